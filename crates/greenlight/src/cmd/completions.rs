//! `greenlight completions <shell>` and `greenlight man`: a shell completion script and the
//! manual page, generated from the binary's own clap definition so they never drift from it.
//! Must never: write anywhere but stdout.

use clap::{Args, CommandFactory};
use clap_complete::Shell;
use std::process::ExitCode;

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn run_completions(a: CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = crate::Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "greenlight", &mut buf);
    super::out(&String::from_utf8(buf)?)?;
    Ok(ExitCode::SUCCESS)
}

pub fn run_man() -> anyhow::Result<ExitCode> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(crate::Cli::command()).render(&mut buf)?;
    super::out(&String::from_utf8(buf)?)?;
    Ok(ExitCode::SUCCESS)
}
