//! `greenlight trailer check <commit-msg-file>`: a `commit-msg` hook. git hands the hook the
//! message file as edited, before its cleanup, so the check first cleans it up as `git commit`
//! does by default for an edited message (comment lines and everything from the scissors line of
//! `git commit -v` down are dropped; the comment prefix is git's `core.commentChar`), then reads
//! the trailers of what git will store. Exit 0 for a valid or absent trailer, 1 with a message
//! naming the bad field otherwise, 2 when the file is unreadable.

use anyhow::Result;
use clap::{Args, Subcommand};
use greenlight_core::directive::{DEFAULT_TRAILER_KEY, directives_in};
use greenlight_core::trailer;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

#[derive(Args)]
pub struct TrailerArgs {
    #[command(subcommand)]
    pub action: TrailerAction,
}

#[derive(Subcommand)]
pub enum TrailerAction {
    /// Check the watch trailers of a commit message file, as `git commit` will store it.
    Check {
        file: PathBuf,
        #[arg(long = "trailer-key", default_value = DEFAULT_TRAILER_KEY)]
        trailer_key: String,
    },
}

pub fn run(a: TrailerArgs) -> Result<ExitCode> {
    let TrailerAction::Check { file, trailer_key } = a.action;
    let text =
        greenlight::files::read_text(&file, greenlight::files::MESSAGE_LIMIT, "a commit message")
            .map_err(|e| {
            crate::cmd::usage(format!(
                "cannot read commit message {}: {}",
                file.display(),
                e.reason()
            ))
        })?;
    let message = trailer::cleanup(&text, &comment_prefix());
    let mut bad = 0;
    for d in directives_in(&message, &trailer_key) {
        match d {
            Ok(d) => errln!("{}: ok: {trailer_key}: {}", file.display(), d.render()),
            Err(e) => {
                bad += 1;
                errln!("{}: error: {e}", file.display());
            }
        }
    }
    Ok(if bad > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// git's comment prefix, as the `git commit` running this hook uses it: `core.commentChar` or
/// `core.commentString` (the last one set wins). `#` when neither is set, when it is `auto`
/// (git then picks a character unused in the message, `#` unless the message itself starts a
/// line with one), or when git cannot be asked.
fn comment_prefix() -> String {
    let out = Command::new("git")
        .args(["config", "--get-regexp", r"^core\.comment(char|string)$"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    let Ok(out) = out else {
        return "#".to_owned();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .and_then(|line| line.split_once(' '))
        .map(|(_, value)| value.to_owned())
        .filter(|value| !value.is_empty() && value != "auto")
        .unwrap_or_else(|| "#".to_owned())
}
