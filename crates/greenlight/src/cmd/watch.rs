//! `greenlight watch`: the commit watchdog daemon, and its `--once` self-check gate (W18).

use crate::clock::{Clock, SystemClock};
use crate::cmd::{positive_duration_flag, secret_file, usage};
use crate::daemon::{self, DaemonConfig};
use crate::output::{LogFormat, Output};
use anyhow::{Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args, Clone)]
pub struct WatchArgs {
    /// The remote to watch: a URL, or a bare repository's path. Credentials in URLs are redacted.
    #[arg(long)]
    pub repo: String,
    /// Argo CD API server, e.g. https://argocd.example.com
    #[arg(long = "argocd-url")]
    pub argocd_url: String,
    /// The state file (SQLite). One daemon per state file.
    #[arg(long)]
    pub state: PathBuf,
    /// The tracked branch (default: the remote's HEAD branch).
    #[arg(long)]
    pub branch: Option<String>,
    /// File holding an Argo CD API token (sent as a bearer token).
    #[arg(long = "argocd-token-file")]
    pub argocd_token_file: Option<PathBuf>,
    /// File holding a git token (given to git through GIT_ASKPASS, never argv).
    #[arg(long = "git-token-file")]
    pub git_token_file: Option<PathBuf>,
    /// Author of revert commits, "Name <email>".
    #[arg(
        long = "git-author",
        default_value = "greenlight <greenlight@localhost>"
    )]
    pub git_author: String,
    /// Where the watchdog keeps its own clone (default: beside the state file).
    #[arg(long = "data-dir")]
    pub data_dir: Option<PathBuf>,
    /// How long the health condition must hold without a break.
    #[arg(long = "stable-for", default_value = "120s")]
    pub stable_for: String,
    /// An observation older than this when a deadline decides makes the verdict INCONCLUSIVE.
    #[arg(long = "stale-after", default_value = "30s")]
    pub stale_after: String,
    /// How long to wait for an app that does not exist yet.
    #[arg(long = "unknown-app-grace", default_value = "60s")]
    pub unknown_app_grace: String,
    /// How often to fetch the branch (and re-list apps as a safety net).
    #[arg(long = "fetch-interval", default_value = "10s")]
    pub fetch_interval: String,
    /// Judge only, whatever the mode (also GREENLIGHT_DRY_RUN=true or DRY_RUN=true).
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// One full cycle with dry-run forced, writing no state; exit non-zero on any failure.
    #[arg(long)]
    pub once: bool,
    /// On the first start, watch commits after this revision (exclusive).
    #[arg(long)]
    pub since: Option<String>,
    /// The trailer key that opts a commit in.
    #[arg(long = "trailer-key", default_value = greenlight_core::directive::DEFAULT_TRAILER_KEY)]
    pub trailer_key: String,
    #[arg(long = "log-format", value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

fn truthy(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

/// "Name <email>" → (name, email).
fn parse_author(s: &str) -> Result<(String, String)> {
    let bad = || usage(format!("--git-author {s:?}: expected \"Name <email>\""));
    let (name, rest) = s.split_once('<').ok_or_else(bad)?;
    let email = rest.strip_suffix('>').ok_or_else(bad)?.trim();
    let name = name.trim();
    if name.is_empty() || email.is_empty() || email.contains(['<', '>']) {
        return Err(bad());
    }
    Ok((name.to_string(), email.to_string()))
}

pub fn config_from(a: &WatchArgs) -> Result<DaemonConfig> {
    let (git_author_name, git_author_email) = parse_author(&a.git_author)?;
    let argocd_token = a
        .argocd_token_file
        .as_deref()
        .map(|p| secret_file("--argocd-token-file", p).map(|s| s.expose().to_owned()))
        .transpose()?;
    let git_token = a
        .git_token_file
        .as_deref()
        .map(|p| secret_file("--git-token-file", p))
        .transpose()?;
    if a.trailer_key.is_empty()
        || a.trailer_key
            .contains(|c: char| c.is_whitespace() || c == ':')
    {
        return Err(usage(format!(
            "--trailer-key {:?}: a trailer key has no spaces or colons",
            a.trailer_key
        )));
    }
    let data_dir = match &a.data_dir {
        Some(d) => d.clone(),
        None => {
            let mut name = a
                .state
                .file_name()
                .map(|n| n.to_os_string())
                .unwrap_or_default();
            name.push(".d");
            a.state.with_file_name(name)
        }
    };
    Ok(DaemonConfig {
        repo: a.repo.clone(),
        branch: a.branch.clone(),
        argocd_url: a.argocd_url.clone(),
        argocd_token,
        git_token,
        git_author_name,
        git_author_email,
        state: a.state.clone(),
        data_dir,
        // Durations are parsed from i64 milliseconds, so `as_millis` fits back into one.
        stable_for_ms: positive_duration_flag("--stable-for", &a.stable_for)?.as_millis() as i64,
        stale_after_ms: positive_duration_flag("--stale-after", &a.stale_after)?.as_millis() as i64,
        unknown_app_grace_ms: positive_duration_flag("--unknown-app-grace", &a.unknown_app_grace)?
            .as_millis() as i64,
        fetch_interval: positive_duration_flag("--fetch-interval", &a.fetch_interval)?,
        dry_run: a.dry_run || truthy("GREENLIGHT_DRY_RUN") || truthy("DRY_RUN"),
        since: a.since.clone(),
        trailer_key: a.trailer_key.clone(),
    })
}

pub fn run(a: WatchArgs) -> Result<ExitCode> {
    let cfg = config_from(&a)?;
    crate::install_crypto();
    let rt = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let out = Output::new(a.log_format);
    if a.once {
        return rt.block_on(crate::cmd::once::run(cfg, out));
    }
    let _lock = lock_state(&cfg.state)?;
    let _clone_lock = lock_data_dir(&cfg.data_dir)?;
    rt.block_on(async move {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let d = daemon::start(cfg, out, clock).await?;
        d.run(shutdown_signal()).await?;
        Ok(ExitCode::SUCCESS)
    })
}

/// One daemon per state file: an exclusive lock on `<state>.lock`, held for the process's life
/// (the OS releases it on any exit, `kill -9` included).
pub fn lock_state(state: &Path) -> Result<std::fs::File> {
    if let Some(dir) = state.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut name = state
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".lock");
    let path = state.with_file_name(name);
    exclusive_lock(&path, || {
        format!(
            "another greenlight watch already runs with state {} (lock {} is held)",
            state.display(),
            path.display()
        )
    })
}

/// One daemon per clone: two state files given one `--data-dir` would share `<dir>/repo`, and
/// two daemons fetching and pushing reverts in one clone corrupt each other's work.
fn lock_data_dir(dir: &Path) -> Result<std::fs::File> {
    std::fs::create_dir_all(dir)
        .map_err(|e| usage(format!("--data-dir {}: cannot create: {e}", dir.display())))?;
    let path = dir.join("repo.lock");
    exclusive_lock(&path, || {
        format!(
            "--data-dir {} is in use by another greenlight watch (lock {} is held); give each --state its own --data-dir",
            dir.display(),
            path.display()
        )
    })
}

/// Take an exclusive lock on `path` (created if missing); held while the file is open. A lock
/// another process holds is a usage error worded by `held`.
fn exclusive_lock(path: &Path, held: impl FnOnce() -> String) -> Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open the lock file {}", path.display()))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(usage(held())),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(anyhow::Error::new(e).context(format!("cannot lock {}", path.display())))
        }
    }
}

pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::parse_author;

    #[test]
    fn author() {
        assert_eq!(
            parse_author("Nav Bot <nav@example.com>").unwrap(),
            ("Nav Bot".to_string(), "nav@example.com".to_string())
        );
        assert!(parse_author("nobody").is_err());
        assert!(parse_author("<a@b>").is_err());
    }
}
