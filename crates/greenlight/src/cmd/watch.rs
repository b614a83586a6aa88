//! `greenlight watch`: the commit watchdog daemon, and its `--once` self-check gate.

use crate::cmd::args::{ArgoCd, ArgoCdArgs, GitArgs, JudgeArgs, ListenArgs};
use crate::cmd::{duration_arg, positive_duration_arg, positive_duration_flag, usage};
use anyhow::{Context, Result};
use clap::Args;
use greenlight::clock::{Clock, SystemClock};
use greenlight::lock::{lock_data_dir, lock_state};
use greenlight::metrics::Metrics;
use greenlight::output::{LogFormat, Output};
use greenlight::reexec::{Change, SelfWatch};
use greenlight::runtime::seams::Source;
use greenlight::runtime::{self, DaemonConfig};
use greenlight_core::repo_url::RepoUrl;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Where `watch` keeps its state.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// A SQLite file (`--state`): a laptop, a single VM, one replica.
    Sqlite,
    /// The cluster: `watches.greenlight.dev` and `watchdogs.greenlight.dev` objects, for
    /// several replicas with `--leader-elect`.
    Kube,
}

pub use crate::cmd::args::SourceKind;

#[derive(Args, Clone)]
// Whether `--argocd-url` is required depends on `--source`, which may come from the environment
// or the config file (`cmd::config`): `config_from` says so, not clap.
#[command(mut_arg("argocd_url", |a| a
    .required(false)
    .help("Argo CD API server, e.g. https://argocd.example.com (required with --source argocd; with --source kube, where resource trees are read)")))]
pub struct WatchArgs {
    /// The remote to watch: a URL, or a bare repository's path. Credentials in URLs are redacted;
    /// a user without a password (https://TOKEN@host/…) is a token, sent with an empty password.
    #[arg(long)]
    pub repo: String,
    /// A TOML file of flags (`stable-for = "10m"`; also GREENLIGHT_CONFIG); every flag can also be
    /// set as GREENLIGHT_<FLAG>. Flags come first, then the environment, then the file
    /// (docs/configuration.md). A change to the file re-executes the daemon.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Where Applications are read: Argo CD's REST API (the default), or the Kubernetes API
    /// (its `applications.argoproj.io` resources, with a kubeconfig or in-cluster).
    #[arg(long, value_enum)]
    pub source: Option<SourceKind>,
    #[command(flatten)]
    pub argocd: ArgoCdArgs,
    /// With --source kube or --events: the kubeconfig to use (default: $KUBECONFIG, else
    /// ~/.kube/config, else the pod's service account).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// With --source kube: a namespace whose Applications are watched; repeat it for more
    /// (default: all namespaces).
    #[arg(long = "namespace", value_name = "NAMESPACE")]
    pub namespaces: Vec<String>,
    /// While the application stream vouches (connected, heard from within --stale-after,
    /// baselined by a listing), how often the Applications are listed again as a safety net;
    /// while it does not, a listing runs every --fetch-interval.
    #[arg(long = "resync-interval", default_value = "5m")]
    pub resync_interval: String,
    /// The state file (SQLite; the default store). One daemon per state file.
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Where the state is kept: `sqlite` (the `--state` file, the default) or `kube` (custom
    /// resources in the cluster, docs/deploy.md#store-kube).
    #[arg(long, value_enum)]
    pub store: Option<StoreKind>,
    /// With --store kube: the namespace of the state's objects (default: the kubeconfig
    /// context's namespace; in a pod, its own).
    #[arg(long = "store-namespace")]
    pub store_namespace: Option<String>,
    /// With --store kube: the name of this installation's `Watchdog` object, which labels its
    /// `Watch` objects (and names the Lease by default).
    #[arg(long = "store-name", default_value = "greenlight")]
    pub store_name: String,
    #[command(flatten)]
    pub election: crate::cmd::args::ElectionArgs,
    /// The tracked branch (default: the remote's HEAD branch).
    #[arg(long)]
    pub branch: Option<String>,
    #[command(flatten)]
    pub git: GitArgs,
    /// Where the watchdog keeps its own clone (default: beside the state file; required with
    /// --store kube).
    #[arg(long = "data-dir")]
    pub data_dir: Option<PathBuf>,
    #[command(flatten)]
    pub judge: JudgeArgs,
    #[command(flatten)]
    pub listen: ListenArgs,
    #[command(flatten)]
    pub events: crate::cmd::events::EventsArgs,
    /// The most an application listing may hold, in MiB, after greenlight's field selection;
    /// a larger one is refused with a warning (the stream and reads still observe).
    #[arg(long = "listing-limit-mib", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..))]
    pub listing_limit_mib: u32,
    /// How an armed watch's revert lands: `push` (fast-forward to the branch) or
    /// `pull-request` (a branch of its own and a pull request with the verdict's evidence, for
    /// a protected branch; the watch ends REVERTED when it merges).
    #[arg(long = "revert-via", value_enum, default_value = "push")]
    pub revert_via: RevertVia,
    /// With --revert-via pull-request: the forge that hosts the repository (github, gitlab,
    /// gitea).
    #[arg(long)]
    pub forge: Option<String>,
    /// With --revert-via pull-request: the forge's API (default: told by --repo's host —
    /// https://api.github.com, https://HOST/api/v3, /api/v4, /api/v1).
    #[arg(long = "forge-url")]
    pub forge_url: Option<String>,
    /// With --revert-via pull-request: the repository on the forge, `owner/name` (default:
    /// told by --repo's path).
    #[arg(long = "forge-project")]
    pub forge_project: Option<String>,
    /// With --revert-via pull-request: a file holding the forge's API token (never a flag's
    /// value: it would show in the process list).
    #[arg(long = "forge-token-file")]
    pub forge_token_file: Option<PathBuf>,
    /// With --revert-via pull-request: do not arm the forge's auto-merge; each revert waits for
    /// a human to merge it.
    #[arg(long = "no-revert-auto-merge")]
    pub no_revert_auto_merge: bool,
    /// Judge only, whatever the mode (also GREENLIGHT_DRY_RUN=true or DRY_RUN=true; no layer
    /// turns it off once one turned it on).
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// One full cycle with dry-run forced, writing no state; exit non-zero on any failure.
    #[arg(long)]
    pub once: bool,
    /// On the first start, watch commits after this revision (exclusive).
    #[arg(long)]
    pub since: Option<String>,
    /// The trailer key that opts a commit in.
    #[arg(long = "trailer-key", default_value = greenlight_core::directive::DEFAULT_TRAILER_KEY, value_parser = trailer_key_arg)]
    pub trailer_key: String,
    #[arg(long = "log-format", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// How long finished watches and their events stay in the state file; live watches
    /// always stay.
    #[arg(long, default_value = "30d", value_parser = positive_duration_arg)]
    pub retain: String,
    /// How long after a NOT_REACHED verdict its commit reaching the app still re-opens the
    /// watch, judged as new (a sync window, a manual sync, a force-push that lands the commit
    /// again); 0 never re-opens.
    #[arg(long = "reopen-horizon", default_value = "24h", value_parser = duration_arg)]
    pub reopen_horizon: String,
    /// How often the config file and the binary on disk are compared with those the daemon
    /// started with; a change of content re-executes it (docs/configuration.md#re-exec). 0: never.
    #[arg(long = "reexec-interval", default_value = "5s", value_parser = duration_arg)]
    pub reexec_interval: String,
    /// On SIGTERM (and before a re-exec), how long a git job under way (a push, a fetch) may go
    /// on before greenlight stops without it, its git process stopped with it. Keep it below
    /// the pod's terminationGracePeriodSeconds (the chart's: 60 s).
    #[arg(long = "stop-timeout", default_value = "30s", value_parser = duration_arg)]
    pub stop_timeout: String,
}

/// How a revert lands (`--revert-via`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RevertVia {
    /// A fast-forward push to the tracked branch.
    Push,
    /// A pull request into the tracked branch.
    PullRequest,
}

/// `--revert-via pull-request`'s forge client; `None` for `push`, whose forge flags are refused.
fn revert_pull_requests(
    a: &WatchArgs,
) -> Result<Option<Arc<greenlight::runtime::git::PullRequestReverts>>> {
    use greenlight_forge::ForgeKind;
    if a.revert_via == RevertVia::Push {
        for (set, flag) in [
            (a.forge.is_some(), "--forge"),
            (a.forge_url.is_some(), "--forge-url"),
            (a.forge_project.is_some(), "--forge-project"),
            (a.forge_token_file.is_some(), "--forge-token-file"),
            (a.no_revert_auto_merge, "--no-revert-auto-merge"),
        ] {
            if set {
                return Err(usage(format!(
                    "{flag}: only read with --revert-via pull-request"
                )));
            }
        }
        return Ok(None);
    }
    let Some(forge) = &a.forge else {
        return Err(usage(
            "--revert-via pull-request needs --forge (github, gitlab or gitea)",
        ));
    };
    let kind: ForgeKind = forge.parse().map_err(|e| usage(format!("--forge: {e}")))?;
    let Some(token_file) = &a.forge_token_file else {
        return Err(usage(format!(
            "--revert-via pull-request needs --forge-token-file: a token that may push branches and open pull requests on {kind}"
        )));
    };
    let client = crate::cmd::promote_run::forge_client(
        kind,
        &a.repo,
        (a.forge_url.clone(), "--forge-url"),
        (a.forge_project.clone(), "--forge-project"),
        token_file,
        "--revert-via pull-request",
    )?;
    Ok(Some(Arc::new(
        greenlight::runtime::git::PullRequestReverts {
            client,
            auto_merge: !a.no_revert_auto_merge,
        },
    )))
}

/// `--trailer-key` as a clap value parser: a trailer key has no spaces or colons.
fn trailer_key_arg(text: &str) -> Result<String, String> {
    if text.is_empty() || text.contains(|c: char| c.is_whitespace() || c == ':') {
        return Err("a trailer key has no spaces or colons".to_string());
    }
    Ok(text.to_string())
}

/// What `watch` needs to re-execute itself (docs/configuration.md#re-exec): the command line
/// as given, the config file as read, and how to check a changed one.
pub struct Relaunch {
    pub argv: Vec<std::ffi::OsString>,
    pub config: Option<crate::cmd::config::ConfigFile>,
    pub check: greenlight::reexec::ConfigCheck,
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
    super::switch_value(&value).ok_or_else(|| {
        super::usage(format!(
            "{var}={value:?}: not a value greenlight understands, and a safety switch refuses to start on one: set 1, true, yes or on for dry-run, or 0, false, no, off or empty for none"
        ))
    })
}

/// What `watch` was told: the runtime's settings, where its source reads, where its state is
/// kept, and whether it runs as one of several replicas.
pub struct Settings {
    pub cfg: DaemonConfig,
    pub source: SourceSpec,
    pub store: StoreSpec,
    pub election: Option<crate::cmd::args::Election>,
}

/// Where the state is kept, as the flags said.
#[derive(Clone, Debug)]
pub enum StoreSpec {
    /// The SQLite file `--state`.
    Sqlite(PathBuf),
    /// The cluster's `watches`/`watchdogs.greenlight.dev` objects.
    Kube {
        kubeconfig: Option<PathBuf>,
        namespace: Option<String>,
        name: String,
    },
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
                        greenlight_argocd::ArgoClient::with_options(
                            &a.url,
                            a.token.clone(),
                            greenlight_argocd::ClientOptions {
                                extra_roots: a.ca.clone(),
                                ..Default::default()
                            },
                        )
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
    trailer_key_arg(&a.trailer_key)
        .map_err(|why| usage(format!("--trailer-key {:?}: {why}", a.trailer_key)))?;
    let judge = a.judge.read()?;
    let election = a.election.read()?;
    let store = match (a.store.unwrap_or(StoreKind::Sqlite), &a.state) {
        (StoreKind::Sqlite, Some(state)) => StoreSpec::Sqlite(state.clone()),
        (StoreKind::Sqlite, None) => {
            return Err(usage(
                "--state is required: the state file (or --store kube, to keep the state in the cluster)",
            ));
        }
        (StoreKind::Kube, Some(_)) => {
            return Err(usage(
                "--state: not read with --store kube (the state is in the cluster's watches.greenlight.dev objects)",
            ));
        }
        (StoreKind::Kube, None) => {
            greenlight::kube::dns_label(&a.store_name)
                .map_err(|why| usage(format!("--store-name {:?}: {why}", a.store_name)))?;
            if a.data_dir.is_none() && !a.once {
                return Err(usage(
                    "--data-dir is required with --store kube: where the watchdog keeps its clone (an emptyDir is enough)",
                ));
            }
            StoreSpec::Kube {
                kubeconfig: a.kubeconfig.clone(),
                namespace: a.store_namespace.clone(),
                name: a.store_name.clone(),
            }
        }
    };
    if let StoreSpec::Sqlite(_) = store {
        if a.store_namespace.is_some() {
            return Err(usage("--store-namespace: only read with --store kube"));
        }
        if election.is_some() {
            return Err(usage(
                "--leader-elect needs --store kube: a state file is one replica's, and a new leader must find the watches where the old one left them",
            ));
        }
    }
    let state = match &store {
        StoreSpec::Sqlite(state) => state.clone(),
        // Read by `--once` only, which replaces it with a scratch file.
        StoreSpec::Kube { .. } => PathBuf::new(),
    };
    let data_dir = match (&a.data_dir, &store) {
        (Some(d), _) => d.clone(),
        (None, StoreSpec::Sqlite(state)) => {
            let mut name = state
                .file_name()
                .map(|n| n.to_os_string())
                .unwrap_or_default();
            name.push(".d");
            state.with_file_name(name)
        }
        // `--once` only: it works in a scratch directory of its own.
        (None, StoreSpec::Kube { .. }) => PathBuf::new(),
    };
    let resync = positive_duration_flag("--resync-interval", &a.resync_interval)?;
    let mut cfg = DaemonConfig {
        repo: RepoUrl::new(a.repo.clone()),
        branch: a.branch.clone(),
        git_token: git.token,
        git_author_name: git.author_name,
        git_author_email: git.author_email,
        state,
        data_dir,
        stable_for_ms: judge.stable_for_ms,
        stale_after_ms: judge.stale_after_ms,
        unknown_app_grace_ms: judge.unknown_app_grace_ms,
        fetch_interval: judge.fetch_interval,
        resync_interval: resync,
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
        gate_candidates: false,
        health_scope: Vec::new(),
        attribution_exempt: Vec::new(),
        asked: None,
        revert_via_pull_request: revert_pull_requests(a)?,
        verifier: None,
        fetch_nudge: None,
    };
    let listing_limit_bytes = match a.listing_limit_mib {
        0 => return Err(super::usage("--listing-limit-mib: must be above zero")),
        mib => (mib as usize) << 20,
    };
    let source = match a.source.unwrap_or(SourceKind::Argocd) {
        SourceKind::Argocd => {
            // With --events or --store kube, the kubeconfig is theirs.
            for (given, flag) in [
                (
                    a.kubeconfig.is_some()
                        && !a.events.events
                        && !matches!(store, StoreSpec::Kube { .. }),
                    "--kubeconfig",
                ),
                (!a.namespaces.is_empty(), "--namespace"),
            ] {
                if given {
                    return Err(usage(format!(
                        "{flag}: only read with --source kube{} (the source is Argo CD's REST API)",
                        if flag == "--kubeconfig" {
                            ", --events or --store kube"
                        } else {
                            ""
                        }
                    )));
                }
            }
            SourceSpec::ArgoCd {
                argocd: argocd.ok_or_else(|| {
                    usage(
                        "--argocd-url is required with --source argocd (the default); with --source kube it is optional",
                    )
                })?,
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
    // `expect=Healthy,Running` verifies from the source the watchdog reads (as `greenlight
    // verify`): Argo CD's API, or the cluster's (a trailer's app without a namespace is looked
    // for in the one --namespace given, else the kubeconfig's).
    cfg.verifier = Some(std::sync::Arc::new(match &source {
        SourceSpec::ArgoCd { argocd, .. } => {
            greenlight::verify::WatchVerifier::ArgoCd(argocd.clone())
        }
        SourceSpec::Kube {
            kubeconfig,
            namespaces,
            ..
        } => greenlight::verify::WatchVerifier::Kube(greenlight::kube::KubeApp {
            kubeconfig: kubeconfig.clone(),
            namespace: match namespaces.as_slice() {
                [one] => Some(one.clone()),
                _ => None,
            },
        }),
    }));
    Ok(Settings {
        cfg,
        source,
        store,
        election,
    })
}

pub fn run(a: WatchArgs, relaunch: Relaunch) -> Result<ExitCode> {
    let Relaunch {
        argv,
        config,
        check,
    } = relaunch;
    let Settings {
        mut cfg,
        source,
        store,
        election,
    } = config_from(&a)?;
    // Push hooks: their secrets are read before anything starts, so a bad file stops the start.
    let hook_secrets = a.listen.hook_secrets()?;
    if hook_secrets.any() {
        cfg.fetch_nudge = Some(greenlight::hooks::FetchNudge::new());
    }
    let reexec_every = super::duration_flag("--reexec-interval", &a.reexec_interval)?;
    let stop_timeout = super::duration_flag("--stop-timeout", &a.stop_timeout)?;
    // The config file's `[[notify]]` sinks (docs/notifications.md#config), read and checked
    // before anything starts.
    let sinks = match &config {
        Some(c) => {
            greenlight::notify::config::parse(&c.path, &c.text).map_err(|e| usage(e.to_string()))?
        }
        None => Vec::new(),
    };
    if !sinks.is_empty() && matches!(store, StoreSpec::Kube { .. }) && !a.once {
        return Err(usage(
            "[[notify]]: notifications read the SQLite state file's events (--state); the cluster store (--store kube) keeps no outbox",
        ));
    }
    crate::install_crypto();
    let rt = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let out = Output::new(a.log_format);
    // Only a URL on the command line itself is in `ps`: one from the environment or the
    // config file (`--config`) is not, and is not warned about.
    let on_command_line =
        std::env::args_os().any(|arg| arg.to_string_lossy().contains(cfg.repo.expose().trim()));
    if let Some(warning) =
        crate::cmd::args::url_credentials_warning("--repo", &cfg.repo).filter(|_| on_command_line)
    {
        out.warn(SystemClock.now(), &warning);
    }
    if a.once {
        if a.listen.listen.is_some() {
            return Err(usage(
                "--listen: serves a running daemon's metrics and probes, not a --once check",
            ));
        }
        if a.events.events {
            out.warn(
                greenlight::clock::SystemClock.now(),
                "--events is ignored with --once: a self-check judges in a scratch state and writes no Kubernetes Events",
            );
        }
        if !sinks.is_empty() {
            out.warn(
                greenlight::clock::SystemClock.now(),
                "[[notify]] is ignored with --once: a self-check judges in a scratch state and notifies no one",
            );
        }
        return rt.block_on(async move {
            let source = source.source(&cfg.repo).await?;
            crate::cmd::once::run(cfg, source, out).await
        });
    }
    // The binary as it is now: a re-exec runs what is at this path then.
    let binary = std::env::current_exe().ok();
    // One daemon per state file; in the cluster, the Lease (or, without it, the objects'
    // resourceVersions) keeps a second writer out.
    let lock = match &store {
        StoreSpec::Sqlite(state) => Some(lock_state(state)?),
        StoreSpec::Kube { .. } => None,
    };
    let clone_lock = lock_data_dir(&cfg.data_dir)?;
    let self_watch = (!reexec_every.is_zero())
        .then(|| SelfWatch::new(config.map(|c| (c.path, c.text, check)), binary.clone()));
    let stop_out = out.clone();
    let change = rt.block_on(async move {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let metrics = Arc::new(Metrics::new(clock.clone()));
        let hooks = cfg.fetch_nudge.clone().map(|nudge| {
            greenlight::hooks::PushHooks::new(
                hook_secrets,
                nudge,
                metrics.clone(),
                out.clone(),
                clock.clone(),
            )
        });
        let server = a.listen.serve(&metrics, hooks).await?;
        // Events are written by a task of their own for as long as the daemon runs; the
        // verdicts are in the state whatever becomes of them. A standby emits none.
        // Always with --source kube: its credentials are Kubernetes credentials.
        let events = crate::cmd::events::recorder(
            a.events.events || a.source == Some(SourceKind::Kube),
            a.kubeconfig.as_deref(),
            &a.namespaces,
            &out,
        )
        .await?;
        if let Some(events) = &events {
            let failures = events.failures();
            metrics.count_event_write_failures(move || failures.get());
        }
        let changed = Arc::new(std::sync::Mutex::new(None::<Change>));
        let stop = {
            let changed = changed.clone();
            let (out, clock) = (out.clone(), clock.clone());
            async move {
                let watch_self = async {
                    match self_watch {
                        Some(w) => w.changed(reexec_every, out.clone(), clock.clone()).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = shutdown_signal() => {}
                    c = watch_self => {
                        out.info(clock.now(), &c.line());
                        *changed.lock().expect("change lock") = Some(c);
                    }
                }
            }
        };
        let daemon = async {
            match election {
                Some(election) => {
                    let StoreSpec::Kube {
                        kubeconfig,
                        namespace,
                        name,
                    } = store
                    else {
                        return Err(usage("--leader-elect needs --store kube"));
                    };
                    let elected = crate::cmd::leader::Elected {
                        election,
                        kubeconfig,
                        namespace,
                        store_name: name,
                    };
                    elected
                        .run(
                            cfg,
                            source,
                            out.clone(),
                            clock.clone(),
                            metrics.clone(),
                            stop,
                        )
                        .await
                }
                None => {
                    let source = source.source(&cfg.repo).await?;
                    let mut notifier = None;
                    let d = match store {
                        StoreSpec::Sqlite(state) => {
                            // The sinks' cursors are in place before the runtime writes its
                            // first event (the store is created and migrated first).
                            if !sinks.is_empty() {
                                let out = out.clone();
                                notifier = Some(tokio::task::block_in_place(|| {
                                    drop(greenlight::store::SqliteStore::open_or_create(&state)?);
                                    greenlight::notify::Notifier::start(
                                        &state,
                                        sinks,
                                        &out.clone(),
                                        Arc::new(move |m: &str| out.warn(SystemClock.now(), m)),
                                    )
                                })?);
                            }
                            runtime::start_metered(cfg, source, out.clone(), clock.clone(), metrics)
                                .await?
                        }
                        StoreSpec::Kube {
                            kubeconfig,
                            namespace,
                            name,
                        } => {
                            let kube_store = tokio::task::block_in_place(|| {
                                greenlight::store::kube::KubeStore::connect(
                                    kubeconfig.as_deref(),
                                    namespace.as_deref(),
                                    &name,
                                )
                            })?;
                            runtime::start_with_store(
                                cfg,
                                Box::new(kube_store),
                                source,
                                out.clone(),
                                clock.clone(),
                                metrics,
                            )
                            .await?
                        }
                    };
                    let r = d.run(stop).await;
                    if let Some(n) = notifier {
                        tokio::task::block_in_place(|| n.stop());
                    }
                    r
                }
            }
        };
        match server {
            Some(mut server) => tokio::select! {
                r = daemon => r?,
                r = &mut server => {
                    return Err(match r {
                        Ok(Err(e)) => e.context("--listen: the metrics listener stopped"),
                        Ok(Ok(())) => anyhow::anyhow!("--listen: the metrics listener stopped"),
                        Err(e) => anyhow::anyhow!("--listen: the metrics listener failed: {e}"),
                    });
                }
            },
            None => daemon.await?,
        }
        let change = changed.lock().expect("change lock").take();
        anyhow::Ok(change)
    })?;
    // The same path as SIGTERM: a git job under way (a push) finishes as the runtime stops
    // (and with it `--listen`'s listener) — within `--stop-timeout`: a fetch that hangs does not
    // hold the stop past the pod's grace period; its git process goes with this one — then the
    // locks are released, and only then does the new process start.
    let stopping = std::time::Instant::now();
    rt.shutdown_timeout(stop_timeout);
    if stopping.elapsed() >= stop_timeout {
        stop_out.warn(
            SystemClock.now(),
            &format!(
                "a git job was still under way after --stop-timeout {}: stopping without it",
                humantime::format_duration(stop_timeout)
            ),
        );
    }
    drop(clone_lock);
    drop(lock);
    if change.is_none() {
        return Ok(ExitCode::SUCCESS);
    }
    // Without the binary's path (no /proc), the command as it was started.
    let binary = binary.unwrap_or_else(|| PathBuf::from(argv.first().cloned().unwrap_or_default()));
    let err = greenlight::reexec::exec(&binary, &argv);
    Err(anyhow::Error::new(err).context(format!("cannot re-execute {}", binary.display())))
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
