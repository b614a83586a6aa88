use clap::Args;
use std::process::ExitCode;

#[derive(Args)]
pub struct DemoArgs {}

pub fn run(_a: DemoArgs) -> anyhow::Result<ExitCode> { Err(super::usage("demo is not built yet")) }
