//! `greenlight lint`, `rules`, `explain` (owned by the lint work).
use clap::Args;
use std::process::ExitCode;

#[derive(Args)]
pub struct LintArgs {}
#[derive(Args)]
pub struct RulesArgs {}
#[derive(Args)]
pub struct ExplainArgs {}

pub fn run_lint(_a: LintArgs) -> anyhow::Result<ExitCode> { Err(super::usage("lint is not built yet")) }
pub fn run_rules(_a: RulesArgs) -> anyhow::Result<ExitCode> { Err(super::usage("rules is not built yet")) }
pub fn run_explain(_a: ExplainArgs) -> anyhow::Result<ExitCode> { Err(super::usage("explain is not built yet")) }
