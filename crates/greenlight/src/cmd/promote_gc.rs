//! `greenlight promote gc` (`docs/promote.md#gc`): the flags, the config and the clone, then
//! the library's gc (`greenlight::promote::gc`), printed as it goes.
//!
//! Must never: put a token in a message, a log line or a process argument.

use super::promote_run::Printed;
use crate::cmd::args::{GitArgs, help_of};
use crate::cmd::usage;
use anyhow::{Context as _, Result};
use clap::Args;
use greenlight::clock::{Clock, SystemClock};
use greenlight::promote::gc;
use greenlight::promote::{self as config, LoadError};
use greenlight_core::repo_url::RepoUrl;
use greenlight_git::{Auth, Repo};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
#[command(mut_args(help_of(&[(
    "git_author",
    Some("Author of the gc commit, \"Name <email>\""),
)])))]
pub struct GcArgs {
    /// The promotion config (promote.yaml; docs/promote.md). Its paths are the repository's.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// The deployment repository: a URL, or a bare repository's path.
    #[arg(long)]
    pub repo: String,
    /// The branch the candidates are on (default: the remote's HEAD branch).
    #[arg(long)]
    pub branch: Option<String>,
    #[command(flatten)]
    pub git: GitArgs,
    /// Where gc keeps its clone (default: a scratch directory, removed afterwards).
    #[arg(long = "data-dir")]
    pub data_dir: Option<PathBuf>,
}

pub fn gc(a: GcArgs) -> Result<ExitCode> {
    let file = a.config.display().to_string();
    let promotion = match config::load(&a.config) {
        Ok(p) => p,
        Err(e @ LoadError::Read { .. }) => return Err(usage(e.to_string())),
        Err(LoadError::Invalid(problems)) => {
            for p in &problems {
                errln!("error: {p}");
            }
            errln!(
                "error: {file}: {} problem(s); nothing was removed",
                problems.len()
            );
            return Ok(ExitCode::from(2));
        }
    };
    let git = a.git.read()?;
    if let Some(warning) =
        crate::cmd::args::url_credentials_warning("--repo", &RepoUrl::new(a.repo.clone()))
    {
        errln!("warning: {warning}");
    }
    let (git_token, author_name, author_email) = (git.token, git.author_name, git.author_email);
    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    // One user of a clone at a time: a run or another gc given the same --data-dir waits for
    // nothing, it is refused.
    let _clone_lock = match &a.data_dir {
        Some(dir) => Some(greenlight::lock::lock_promote_data_dir(dir)?),
        None => None,
    };
    let data_dir = a
        .data_dir
        .clone()
        .unwrap_or_else(|| scratch.path().to_path_buf());
    let auth = Auth {
        token: git_token,
        username: None,
    };
    let repo = Repo::open_or_clone(&a.repo, &data_dir.join("work"), auth)
        .with_context(|| format!("cannot clone {}", RepoUrl::new(a.repo.clone())))?;
    if let Some(note) = greenlight_git::stale_locks_note(&repo.clear_stale_locks()?) {
        errln!("warning: {note}");
    }
    let branch = match &a.branch {
        Some(b) => b.clone(),
        None => repo.remote_default_branch()?,
    };
    let base = repo.fetch(&branch)?;
    let now = SystemClock.now();
    let code = gc::collect(
        &repo,
        &branch,
        &base,
        &promotion.candidate.path,
        promotion.retention.failed_ms,
        (&author_name, &author_email),
        now,
        &mut Printed,
    )?;
    Ok(ExitCode::from(code))
}
