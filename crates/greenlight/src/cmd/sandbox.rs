//! `greenlight sandbox` (owned by the sandbox work).
use clap::Args;
use std::process::ExitCode;

#[derive(Args)]
pub struct SandboxArgs {}

pub fn run(_a: SandboxArgs) -> anyhow::Result<ExitCode> { Err(super::usage("sandbox is not built yet")) }
