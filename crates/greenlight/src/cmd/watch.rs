use clap::Args;
use std::process::ExitCode;

#[derive(Args)]
pub struct WatchArgs {}

pub fn run(_a: WatchArgs) -> anyhow::Result<ExitCode> { Err(super::usage("watch is not built yet")) }
