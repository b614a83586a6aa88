//! `greenlight watch`: the commit watchdog daemon, and its `--once` self-check gate.

use crate::cmd::args::{ArgoCd, ArgoCdArgs, GitArgs, JudgeArgs};
use crate::cmd::{positive_duration_flag, usage};
use anyhow::{Context, Result};
use clap::Args;
use greenlight::clock::{Clock, SystemClock};
use greenlight::lock::{lock_data_dir, lock_state};
use greenlight::output::{LogFormat, Output};
use greenlight::runtime::seams::Source;
use greenlight::runtime::{self, DaemonConfig};
use greenlight_core::repo_url::RepoUrl;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Where `watch` reads Applications.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// Argo CD's REST API (`--argocd-url`).
    Argocd,
    /// The Kubernetes API: Argo CD's `applications.argoproj.io` custom resources.
    Kube,
}

#[derive(Args, Clone)]
#[command(mut_arg("argocd_url", |a| a
    .required(false)
    .required_unless_present("source")
    .required_if_eq("source", "argocd")
    .help("Argo CD API server, e.g. https://argocd.example.com (required with --source argocd; with --source kube, where resource trees are read)")))]
pub struct WatchArgs {
    /// The remote to watch: a URL, or a bare repository's path. Credentials in URLs are redacted;
    /// a user without a password (https://TOKEN@host/…) is a token, sent with an empty password.
    #[arg(long)]
    pub repo: String,
    /// Where Applications are read: Argo CD's REST API (the default), or the Kubernetes API
    /// (its `applications.argoproj.io` resources, with a kubeconfig or in-cluster).
    #[arg(long, value_enum)]
    pub source: Option<SourceKind>,
    #[command(flatten)]
    pub argocd: ArgoCdArgs,
    /// With --source kube: the kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config,
    /// else the pod's service account).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// With --source kube: a namespace whose Applications are watched; repeat it for more
    /// (default: all namespaces).
    #[arg(long = "namespace", value_name = "NAMESPACE")]
    pub namespaces: Vec<String>,
    /// With --source kube: how often the Applications are listed again beside the watch, as a
    /// safety net.
    #[arg(long = "resync-interval", default_value = "5m")]
    pub resync_interval: String,
    /// The state file (SQLite). One daemon per state file.
    #[arg(long)]
    pub state: PathBuf,
    /// The tracked branch (default: the remote's HEAD branch).
    #[arg(long)]
    pub branch: Option<String>,
    #[command(flatten)]
    pub git: GitArgs,
    /// Where the watchdog keeps its own clone (default: beside the state file).
    #[arg(long = "data-dir")]
    pub data_dir: Option<PathBuf>,
    #[command(flatten)]
    pub judge: JudgeArgs,
    /// The most an application listing may hold, in MiB, after greenlight's field selection;
    /// a larger one is refused with a warning (the stream and reads still observe).
    #[arg(long = "listing-limit-mib", default_value_t = 128)]
    pub listing_limit_mib: u32,
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
    /// How long finished watches and their events stay in the state file; live watches
    /// always stay.
    #[arg(long, default_value = "30d")]
    pub retain: String,
    /// How long after a NOT_REACHED verdict its commit reaching the app still re-opens the
    /// watch, judged as new (a sync window, a manual sync, a force-push that lands the commit
    /// again); 0 never re-opens.
    #[arg(long = "reopen-horizon", default_value = "24h")]
    pub reopen_horizon: String,
}

/// A dry-run switch from the environment (`docs/verdicts.md#dry-run`). A safety switch fails
/// closed: a value that is neither a documented "on" nor a documented "off" refuses to start,
/// naming the variable and the values it accepts, rather than be read as "off" and revert.
fn dry_run_env(var: &str) -> Result<bool> {
    let value = match std::env::var(var) {
        Ok(v) => v,
        Err(std::env::VarError::NotPresent) => return Ok(false),
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(super::usage(format!(
                "{var}: not valid UTF-8; a safety switch that cannot be read refuses to start: set 1, true, yes or on for dry-run, or 0, false, no, off or empty for none"
            )));
        }
    };
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        _ => Err(super::usage(format!(
            "{var}={value:?}: not a value greenlight understands, and a safety switch refuses to start on one: set 1, true, yes or on for dry-run, or 0, false, no, off or empty for none"
        ))),
    }
}

/// What `watch` was told: the runtime's settings, and where its source reads.
pub struct Settings {
    pub cfg: DaemonConfig,
    pub source: SourceSpec,
}

/// Where the source reads, as the flags said.
pub enum SourceSpec {
    /// Argo CD's REST API, refusing a listing larger than `listing_limit_bytes`.
    ArgoCd {
        argocd: ArgoCd,
        listing_limit_bytes: usize,
    },
    /// The Kubernetes API; Argo CD's API too when given, for resource trees.
    Kube {
        kubeconfig: Option<PathBuf>,
        namespaces: Vec<String>,
        resync: std::time::Duration,
        argocd: Option<ArgoCd>,
    },
}

impl SourceSpec {
    /// The source of `repo`'s Applications.
    pub async fn source(&self, repo: &RepoUrl) -> Result<Source> {
        match self {
            SourceSpec::ArgoCd {
                argocd,
                listing_limit_bytes,
            } => argocd.source(repo, *listing_limit_bytes),
            SourceSpec::Kube {
                kubeconfig,
                namespaces,
                resync,
                argocd,
            } => {
                let argocd = argocd
                    .as_ref()
                    .map(|a| {
                        greenlight_argocd::ArgoClient::new(&a.url, a.token.clone())
                            .map_err(|e| usage(format!("--argocd-url: {e}")))
                    })
                    .transpose()?;
                let opts = greenlight_kube::KubeSourceOptions {
                    namespaces: namespaces.clone(),
                    resync: *resync,
                    argocd,
                    ..Default::default()
                };
                greenlight::kube::source(kubeconfig.as_deref(), repo, opts).await
            }
        }
    }
}

pub fn config_from(a: &WatchArgs) -> Result<Settings> {
    let git = a.git.read()?;
    let argocd = a.argocd.read_optional()?;
    if a.trailer_key.is_empty()
        || a.trailer_key
            .contains(|c: char| c.is_whitespace() || c == ':')
    {
        return Err(usage(format!(
            "--trailer-key {:?}: a trailer key has no spaces or colons",
            a.trailer_key
        )));
    }
    let judge = a.judge.read()?;
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
    let cfg = DaemonConfig {
        repo: RepoUrl::new(a.repo.clone()),
        branch: a.branch.clone(),
        git_token: git.token,
        git_author_name: git.author_name,
        git_author_email: git.author_email,
        state: a.state.clone(),
        data_dir,
        stable_for_ms: judge.stable_for_ms,
        stale_after_ms: judge.stale_after_ms,
        unknown_app_grace_ms: judge.unknown_app_grace_ms,
        fetch_interval: judge.fetch_interval,
        // Both variables are read (and a bad value refused) even when the flag is given.
        dry_run: {
            let greenlight = dry_run_env("GREENLIGHT_DRY_RUN")?;
            let plain = dry_run_env("DRY_RUN")?;
            a.dry_run || greenlight || plain
        },
        since: a.since.clone(),
        trailer_key: a.trailer_key.clone(),
        retain_ms: positive_duration_flag("--retain", &a.retain)?.as_millis() as i64,
        reopen_horizon_ms: super::duration_flag("--reopen-horizon", &a.reopen_horizon)?.as_millis()
            as i64,
        strict_health: false,
    };
    let listing_limit_bytes = match a.listing_limit_mib {
        0 => return Err(super::usage("--listing-limit-mib: must be above zero")),
        mib => (mib as usize) << 20,
    };
    let resync = positive_duration_flag("--resync-interval", &a.resync_interval)?;
    let source = match a.source.unwrap_or(SourceKind::Argocd) {
        SourceKind::Argocd => {
            for (given, flag) in [
                (a.kubeconfig.is_some(), "--kubeconfig"),
                (!a.namespaces.is_empty(), "--namespace"),
            ] {
                if given {
                    return Err(usage(format!(
                        "{flag}: only read with --source kube (the source is Argo CD's REST API)"
                    )));
                }
            }
            SourceSpec::ArgoCd {
                argocd: argocd.ok_or_else(|| usage("--argocd-url is required"))?,
                listing_limit_bytes,
            }
        }
        SourceKind::Kube => {
            for ns in &a.namespaces {
                if ns.is_empty() {
                    return Err(usage(
                        "--namespace: empty; leave it out to watch all namespaces",
                    ));
                }
            }
            SourceSpec::Kube {
                kubeconfig: a.kubeconfig.clone(),
                namespaces: a.namespaces.clone(),
                resync,
                argocd,
            }
        }
    };
    Ok(Settings { cfg, source })
}

pub fn run(a: WatchArgs) -> Result<ExitCode> {
    let Settings { cfg, source } = config_from(&a)?;
    crate::install_crypto();
    let rt = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let out = Output::new(a.log_format);
    if a.once {
        return rt.block_on(async move {
            let source = source.source(&cfg.repo).await?;
            crate::cmd::once::run(cfg, source, out).await
        });
    }
    let _lock = lock_state(&cfg.state)?;
    let _clone_lock = lock_data_dir(&cfg.data_dir)?;
    rt.block_on(async move {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let source = source.source(&cfg.repo).await?;
        let d = runtime::start(cfg, source, out, clock).await?;
        d.run(shutdown_signal()).await?;
        Ok(ExitCode::SUCCESS)
    })
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
    use crate::cmd::parse_author;

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
