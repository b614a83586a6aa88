//! The flag groups that more than one command takes (`#[command(flatten)]`), each with the one
//! function that reads it: git's (`watch`, `promote run`/`self-test`, `promote gc`), Argo CD's
//! (`watch`, `promote run`/`self-test`) and the judge's (`watch`, `promote run`/`self-test`).
//!
//! A command whose words for a flag are its own says them with [`help_of`] on its own arguments
//! (`promote run`'s author writes the run's commits, not reverts); names, defaults and parsing
//! stay here.

use crate::cmd::{parse_author, positive_duration_flag, secret_file};
use anyhow::Result;
use clap::{Arg, Args};
use greenlight::runtime::seams::Source;
use greenlight_core::repo_url::RepoUrl;
use greenlight_git::Secret;
use std::path::PathBuf;
use std::time::Duration;

/// How greenlight commits and pushes: the token git is given and the author of its commits.
#[derive(Args, Clone)]
pub struct GitArgs {
    /// File holding a git token (given to git through its credential helper, never argv).
    #[arg(long = "git-token-file")]
    pub git_token_file: Option<PathBuf>,
    /// Author of revert commits, "Name <email>".
    #[arg(
        long = "git-author",
        default_value = "greenlight <greenlight@localhost>"
    )]
    pub git_author: String,
}

/// [`GitArgs`], read.
pub struct Git {
    pub token: Option<Secret>,
    pub author_name: String,
    pub author_email: String,
}

impl GitArgs {
    /// The author (`"Name <email>"`), then the token file: a bad one is a usage error naming its flag.
    pub fn read(&self) -> Result<Git> {
        let (author_name, author_email) = parse_author(&self.git_author)?;
        let token = self
            .git_token_file
            .as_deref()
            .map(|p| secret_file("--git-token-file", p))
            .transpose()?;
        Ok(Git {
            token,
            author_name,
            author_email,
        })
    }
}

/// Where the Applications are read: Argo CD's API server and its token.
#[derive(Args, Clone)]
pub struct ArgoCdArgs {
    /// Argo CD API server, e.g. https://argocd.example.com
    #[arg(long = "argocd-url", required = true)]
    pub argocd_url: Option<String>,
    /// File holding an Argo CD API token (sent as a bearer token).
    #[arg(long = "argocd-token-file")]
    pub argocd_token_file: Option<PathBuf>,
}

/// [`ArgoCdArgs`], read.
#[derive(Clone)]
pub struct ArgoCd {
    pub url: String,
    pub token: Option<String>,
}

impl ArgoCd {
    /// Argo CD's REST API as the runtime's source of `repo`'s Applications.
    pub fn source(&self, repo: &RepoUrl, max_listing_bytes: usize) -> Result<Source> {
        greenlight::argocd::source(&self.url, self.token.clone(), repo, max_listing_bytes)
    }
}

impl ArgoCdArgs {
    /// The token file, read: a bad one is a usage error naming `--argocd-token-file`. The URL
    /// is required (clap requires it where this group is flattened as it is).
    pub fn read(&self) -> Result<ArgoCd> {
        self.read_optional()?
            .ok_or_else(|| crate::cmd::usage("--argocd-url is required"))
    }

    /// As [`ArgoCdArgs::read`], `None` without `--argocd-url` (where a command made it
    /// optional: `watch --source kube`). A token file without a URL is a usage error.
    pub fn read_optional(&self) -> Result<Option<ArgoCd>> {
        let Some(url) = self.argocd_url.clone() else {
            if self.argocd_token_file.is_some() {
                return Err(crate::cmd::usage(
                    "--argocd-token-file: given without --argocd-url, which it is for",
                ));
            }
            return Ok(None);
        };
        let token = self
            .argocd_token_file
            .as_deref()
            .map(|p| secret_file("--argocd-token-file", p).map(|s| s.expose().to_owned()))
            .transpose()?;
        Ok(Some(ArgoCd { url, token }))
    }
}

/// The judge's timing: how long health must hold, when an observation is stale, how long an
/// app may not exist yet, how often the branch is fetched.
#[derive(Args, Clone)]
pub struct JudgeArgs {
    /// How long the health condition must hold without a break.
    #[arg(long = "stable-for", default_value = "120s")]
    pub stable_for: String,
    /// An observation older than this when a deadline decides makes the verdict INCONCLUSIVE.
    #[arg(long = "stale-after", default_value = "30s")]
    pub stale_after: String,
    /// How long to wait for an app that does not exist yet. Longer than Argo CD takes to create
    /// the app of an app-of-apps commit: its refresh (timeout.reconciliation, 120s) plus up to
    /// 60s of jitter.
    #[arg(long = "unknown-app-grace", default_value = "300s")]
    pub unknown_app_grace: String,
    /// How often to fetch the branch (and re-list apps as a safety net).
    #[arg(long = "fetch-interval", default_value = "10s")]
    pub fetch_interval: String,
}

/// [`JudgeArgs`], read.
pub struct Judge {
    pub stable_for_ms: i64,
    pub stale_after_ms: i64,
    pub unknown_app_grace_ms: i64,
    pub fetch_interval: Duration,
}

impl JudgeArgs {
    /// Each duration in the order of the flags; each must be above zero.
    pub fn read(&self) -> Result<Judge> {
        // Durations are parsed from i64 milliseconds, so `as_millis` fits back into one.
        Ok(Judge {
            stable_for_ms: positive_duration_flag("--stable-for", &self.stable_for)?.as_millis()
                as i64,
            stale_after_ms: positive_duration_flag("--stale-after", &self.stale_after)?.as_millis()
                as i64,
            unknown_app_grace_ms: positive_duration_flag(
                "--unknown-app-grace",
                &self.unknown_app_grace,
            )?
            .as_millis() as i64,
            fetch_interval: positive_duration_flag("--fetch-interval", &self.fetch_interval)?,
        })
    }
}

/// For `#[command(mut_args(help_of(&[(id, help), …])))]`: the help of the arguments named,
/// replaced (`None`: no help). Unlike `mut_arg`, it keeps every argument where it stands, so
/// that completions list them in the order declared.
pub fn help_of(words: &'static [(&'static str, Option<&'static str>)]) -> impl FnMut(Arg) -> Arg {
    move |arg| match words.iter().find(|(id, _)| arg.get_id() == *id) {
        Some((_, help)) => arg.help(*help),
        None => arg,
    }
}
