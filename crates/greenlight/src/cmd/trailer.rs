use clap::Args;
use std::process::ExitCode;

#[derive(Args)]
pub struct TrailerArgs {}

pub fn run(_a: TrailerArgs) -> anyhow::Result<ExitCode> { Err(super::usage("trailer is not built yet")) }
