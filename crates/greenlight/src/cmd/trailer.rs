//! `greenlight trailer check <commit-msg-file>`: a `commit-msg` hook. Exit 0 for a valid or
//! absent trailer, 1 with a message naming the bad field otherwise, 2 when the file is unreadable.

use anyhow::Result;
use clap::{Args, Subcommand};
use greenlight_core::directive::{DEFAULT_TRAILER_KEY, directives_in};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct TrailerArgs {
    #[command(subcommand)]
    pub action: TrailerAction,
}

#[derive(Subcommand)]
pub enum TrailerAction {
    /// Check the watch trailers of a commit message file.
    Check {
        file: PathBuf,
        #[arg(long = "trailer-key", default_value = DEFAULT_TRAILER_KEY)]
        trailer_key: String,
    },
}

pub fn run(a: TrailerArgs) -> Result<ExitCode> {
    let TrailerAction::Check { file, trailer_key } = a.action;
    let text = std::fs::read_to_string(&file).map_err(|e| {
        crate::cmd::usage(format!(
            "cannot read commit message {}: {e}",
            file.display()
        ))
    })?;
    let mut bad = 0;
    for d in directives_in(&text, &trailer_key) {
        match d {
            Ok(d) => eprintln!("{}: ok: {trailer_key}: {}", file.display(), d.render()),
            Err(e) => {
                bad += 1;
                eprintln!("{}: error: {e}", file.display());
            }
        }
    }
    Ok(if bad > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
