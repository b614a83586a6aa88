use clap::Args;
use std::process::ExitCode;

#[derive(Args)]
pub struct StatusArgs {}
#[derive(Args)]
pub struct BreakerArgs {}

pub fn run(_a: StatusArgs) -> anyhow::Result<ExitCode> { Err(super::usage("status is not built yet")) }
pub fn run_breaker(_a: BreakerArgs) -> anyhow::Result<ExitCode> { Err(super::usage("breaker is not built yet")) }
