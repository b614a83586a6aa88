//! `greenlight guard image` (owned by the guard work).
use clap::Args;
use std::process::ExitCode;

#[derive(Args)]
pub struct GuardArgs {}

pub fn run(_a: GuardArgs) -> anyhow::Result<ExitCode> { Err(super::usage("guard is not built yet")) }
