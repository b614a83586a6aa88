//! `greenlight sandbox`: runs the local Argo CD stand-in (crate `greenlight-sandbox`) until
//! SIGINT or SIGTERM. This module only turns flags into a `SandboxConfig` and prints; it never
//! prints the token, and every bad flag is a usage error (exit 2) that names the flag.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use greenlight_sandbox::forge::{ForgeConfig, ForgeKind};
use greenlight_sandbox::{
    AppSpec, ArgoCdVersion, SandboxConfig, SandboxError, ScopedToken, TlsFiles,
};

#[derive(Args)]
pub struct SandboxArgs {
    /// The git remote to sync: a path (bare or not) or a URL; reported as spec.source.repoURL.
    #[arg(long, value_name = "PATH-OR-URL")]
    repo: String,
    /// Where to serve the Argo CD API, e.g. 127.0.0.1:8080 (port 0 picks a free one).
    #[arg(long, value_name = "ADDR:PORT")]
    listen: String,
    /// An Application: <name>=<path>, <name>=helm:<chart>@<version> or <name>=hydrator:<path>
    /// (spec.sourceHydrator instead of spec.source). Repeatable.
    #[arg(long = "app", value_name = "NAME=PATH", required = true)]
    apps: Vec<String>,
    /// The tracked branch (default: the remote's HEAD branch).
    #[arg(long)]
    branch: Option<String>,
    /// How often to fetch the branch: 90 (seconds), 90s, 15m, 2h, 500ms or 1m30s.
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    sync_interval: String,
    /// How long a changed workload stays Progressing before Healthy or Degraded.
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    rollout_time: String,
    /// How long a resource hook (argocd.argoproj.io/hook) that is a Job or a Pod runs before it
    /// succeeds, or fails when annotated sandbox.greenlight.dev/hook: fail; 0s: at the
    /// operation's next step.
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    hook_time: String,
    /// A file listing the image references that exist, one per line (# comments).
    #[arg(long, value_name = "FILE")]
    registry: Option<PathBuf>,
    /// A file holding the bearer token every /api/v1 request must carry.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// A file holding a token that sees only some apps, and the <project>/<app> patterns it sees
    /// (`*` matches anything; every sandbox app is in project default), as an Argo CD account
    /// whose RBAC grants `applications, get` on those only: FILE=default/web,default/api-*.
    /// Repeatable. With one, every /api/v1 request must carry a token.
    #[arg(long = "scoped-token-file", value_name = "FILE=PATTERNS")]
    scoped_token_file: Vec<String>,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key), as argocd-server does.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Start with syncing paused: apps stay never-synced until POST /sandbox/v1/resume.
    #[arg(long)]
    start_paused: bool,
    /// The Argo CD release to imitate where releases differ: 2.14, 3.0, 3.4 or 3.5.
    #[arg(long, value_name = "VERSION", default_value = "3.5")]
    argocd_version: String,
    /// How long a manifest that fails to render stays hidden (previous sync status, no
    /// ComparisonError), as Argo CD hides repo errors on polled refreshes; 0s shows it at once.
    #[arg(long, value_name = "DURATION", default_value = "0s")]
    repo_error_grace: String,
    /// The base back-off between retries of a failed sync (spec.syncPolicy.retry.backoff.duration).
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    retry_backoff: String,
    /// An app (by name) without automated sync: compared at every commit, synced only through
    /// POST /api/v1/applications/{name}/sync. Repeatable.
    #[arg(long = "manual-sync", value_name = "APP")]
    manual_sync: Vec<String>,
    /// An app (by name) whose automated sync prunes (spec.syncPolicy.automated.prune: true): a
    /// resource removed from git is deleted. Without it such a resource stays live, OutOfSync,
    /// requiresPruning. Repeatable.
    #[arg(long = "prune", value_name = "APP")]
    prune: Vec<String>,
    /// An app (by name) whose automated sync may prune every resource
    /// (spec.syncPolicy.automated.allowEmpty: true); without it Argo CD refuses such a sync.
    /// Repeatable.
    #[arg(long = "allow-empty", value_name = "APP")]
    allow_empty: Vec<String>,
    /// An app (by name) whose automated sync does not self-heal
    /// (spec.syncPolicy.automated.selfHeal: false): a live object deleted by hand
    /// (POST /sandbox/v1/delete) stays Missing until the next commit's sync. Repeatable.
    #[arg(long = "no-self-heal", value_name = "APP")]
    no_self_heal: Vec<String>,
    /// How long a new application stream waits between its ADDED burst and subscribing to
    /// updates: an update in that gap is never sent on it (Argo CD has the gap, only shorter).
    #[arg(long, value_name = "DURATION", default_value = "0s")]
    stream_subscribe_delay: String,
    /// How many updates a stream holds for a client that is not keeping up; further ones are
    /// dropped for it, silently (Argo CD's ARGOCD_WATCH_API_BUFFER_SIZE).
    #[arg(long, value_name = "N", default_value = "1000")]
    stream_buffer: String,
    /// How often an SSE stream (Accept: text/event-stream) gets a ":" heartbeat line.
    #[arg(long, value_name = "DURATION", default_value = "15s")]
    heartbeat: String,
    /// Also serve a forge's pull-request API over --repo (a local bare repository): github,
    /// gitlab or gitea. Pull requests merge into the bare repository; see
    /// docs/sandbox-fidelity.md, "The forge face".
    #[arg(long, value_name = "FLAVOUR", requires_all = ["forge_listen", "forge_token_file"])]
    forge: Option<String>,
    /// Where the forge face listens, e.g. 127.0.0.1:8081 (port 0 picks a free one).
    #[arg(long, value_name = "ADDR:PORT", requires = "forge")]
    forge_listen: Option<String>,
    /// A file holding the token every forge API request must carry.
    #[arg(long, value_name = "FILE", requires = "forge")]
    forge_token_file: Option<PathBuf>,
    /// The repository's <owner>/<name> on the forge.
    #[arg(
        long,
        value_name = "OWNER/NAME",
        default_value = "greenlight/deploy",
        requires = "forge"
    )]
    forge_project: String,
    /// A branch the forge protects: a direct push to it is refused in the forge's words; pull
    /// requests into it need the --require-check contexts. Repeatable.
    #[arg(long = "protect", value_name = "BRANCH", requires = "forge")]
    protect: Vec<String>,
    /// A status context required on pull requests into a protected branch before they merge
    /// (reported with POST /sandbox/v1/forge/status). Repeatable.
    #[arg(long = "require-check", value_name = "CONTEXT", requires = "protect")]
    require_check: Vec<String>,
    /// The repository does not allow auto-merge (GitHub's allow_auto_merge: false).
    #[arg(long, requires = "forge")]
    no_auto_merge: bool,
}

fn parse_stream_buffer(text: &str) -> anyhow::Result<usize> {
    match text.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(super::usage(format!(
            "--stream-buffer {text:?}: expected a whole number above zero"
        ))),
    }
}

/// `FILE=PATTERN[,PATTERN…]`: the token in FILE, and the `<project>/<app>` patterns it sees.
fn parse_scoped_token(text: &str) -> anyhow::Result<ScopedToken> {
    let Some((file, patterns)) = text.rsplit_once('=') else {
        return Err(super::usage(format!(
            "--scoped-token-file {text:?}: expected FILE=<project>/<app>[,…], e.g. ci.token=default/web"
        )));
    };
    let sees: Vec<String> = patterns
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    if sees.is_empty() || sees.iter().any(|p| !p.contains('/')) {
        return Err(super::usage(format!(
            "--scoped-token-file {file}: {patterns:?} is not a list of <project>/<app> patterns (e.g. default/web,default/api-*)"
        )));
    }
    let token = super::secret_file("--scoped-token-file", std::path::Path::new(file))?;
    Ok(ScopedToken {
        token: token.expose().to_owned(),
        sees,
    })
}

fn parse_listen(text: &str) -> anyhow::Result<SocketAddr> {
    parse_listen_flag("--listen", text)
}

fn parse_listen_flag(flag: &str, text: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    text.to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| {
            super::usage(format!(
                "{flag} {text:?}: expected <addr>:<port>, e.g. 127.0.0.1:8080"
            ))
        })
}

/// The forge face's configuration from `--forge` and its flags, if `--forge` is given.
fn forge_config_from(args: &SandboxArgs) -> anyhow::Result<Option<ForgeConfig>> {
    let Some(kind) = &args.forge else {
        return Ok(None);
    };
    let kind = kind
        .parse::<ForgeKind>()
        .map_err(|e| super::usage(format!("--forge: {e}")))?;
    let listen = parse_listen_flag(
        "--forge-listen",
        args.forge_listen.as_deref().unwrap_or_default(),
    )?;
    let token_file = args
        .forge_token_file
        .as_deref()
        .ok_or_else(|| super::usage("--forge needs --forge-token-file"))?;
    let token = super::secret_file("--forge-token-file", token_file)?;
    let mut config = ForgeConfig::new(kind, &args.repo, listen, token.expose());
    config.project = args.forge_project.clone();
    config.protected = args.protect.clone();
    config.required_checks = args.require_check.clone();
    config.allow_auto_merge = !args.no_auto_merge;
    Ok(Some(config))
}

fn config_from(args: SandboxArgs) -> anyhow::Result<SandboxConfig> {
    let listen = parse_listen(&args.listen)?;
    let apps = args
        .apps
        .iter()
        .map(|text| AppSpec::parse(text).map_err(|e| super::usage(format!("--app: {e}"))))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let sync_interval = super::positive_duration_flag("--sync-interval", &args.sync_interval)?;
    let mut config = SandboxConfig::new(args.repo, listen, apps);
    config.branch = args.branch;
    config.sync_interval = sync_interval;
    config.rollout_time = super::duration_flag("--rollout-time", &args.rollout_time)?;
    config.hook_time = super::duration_flag("--hook-time", &args.hook_time)?;
    config.registry = args.registry;
    config.token = args
        .token_file
        .as_deref()
        .map(|p| super::secret_file("--token-file", p).map(|s| s.expose().to_owned()))
        .transpose()?;
    config.scoped_tokens = args
        .scoped_token_file
        .iter()
        .map(|text| parse_scoped_token(text))
        .collect::<anyhow::Result<Vec<_>>>()?;
    config.tls = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
        _ => None,
    };
    config.start_paused = args.start_paused;
    config.argocd_version = args
        .argocd_version
        .parse::<ArgoCdVersion>()
        .map_err(|e| super::usage(format!("--argocd-version: {e}")))?;
    config.repo_error_grace = super::duration_flag("--repo-error-grace", &args.repo_error_grace)?;
    config.retry_backoff = super::positive_duration_flag("--retry-backoff", &args.retry_backoff)?;
    config.manual_sync = args.manual_sync;
    config.prune = args.prune;
    config.allow_empty = args.allow_empty;
    config.no_self_heal = args.no_self_heal;
    config.stream_subscribe_delay =
        super::duration_flag("--stream-subscribe-delay", &args.stream_subscribe_delay)?;
    config.stream_buffer = parse_stream_buffer(&args.stream_buffer)?;
    config.heartbeat = super::positive_duration_flag("--heartbeat", &args.heartbeat)?;
    Ok(config)
}

pub fn run(args: SandboxArgs) -> anyhow::Result<ExitCode> {
    let forge = forge_config_from(&args)?;
    let config = config_from(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(serve(config, forge))
}

async fn serve(config: SandboxConfig, forge: Option<ForgeConfig>) -> anyhow::Result<ExitCode> {
    use tokio::signal::unix::{SignalKind, signal};
    // Handlers first: a script may send SIGTERM as soon as it reads the listening line.
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let sandbox = greenlight_sandbox::start(config)
        .await
        .map_err(|e| match e {
            SandboxError::Config { .. } => super::usage(e.to_string()),
            SandboxError::Runtime(_) => anyhow::Error::new(e),
        })?;
    let forge = match forge {
        Some(config) => Some(greenlight_sandbox::forge::serve(config).await.map_err(
            |e| match e {
                SandboxError::Config { .. } => super::usage(e.to_string()),
                SandboxError::Runtime(_) => anyhow::Error::new(e),
            },
        )?),
        None => None,
    };
    if let Some(forge) = &forge {
        // Printed before the sandbox's own line, which scripts wait for last.
        greenlight::output::stderr_line(&format!(
            "forge ({}) listening on {} (API {}, repository {})",
            forge.kind(),
            forge.url(),
            forge.api_url(),
            forge.project()
        ));
    }
    // Scripts wait for exactly this line.
    greenlight::output::stderr_line(&format!("sandbox listening on {}", sandbox.url()));
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    if let Some(forge) = forge {
        forge.shutdown().await;
    }
    sandbox.shutdown().await;
    greenlight::output::stderr_line("sandbox stopped");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_buffer_is_a_count_above_zero() {
        assert_eq!(parse_stream_buffer("1000").unwrap(), 1000);
        for bad in ["0", "-1", "many", ""] {
            let err = parse_stream_buffer(bad).unwrap_err().to_string();
            assert!(err.starts_with("--stream-buffer"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_scoped_token_names_its_file_and_patterns() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ci.token");
        std::fs::write(&file, "a.b.c\n").unwrap();
        let scoped =
            parse_scoped_token(&format!("{}=default/web, default/api-*", file.display())).unwrap();
        assert_eq!(scoped.token, "a.b.c");
        assert_eq!(scoped.sees, ["default/web", "default/api-*"]);
        for bad in ["no-equals".to_string(), format!("{}=web", file.display())] {
            let err = parse_scoped_token(&bad).unwrap_err().to_string();
            assert!(err.starts_with("--scoped-token-file"), "{bad}: {err}");
        }
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        sandbox: SandboxArgs,
    }

    fn args(extra: &[&str]) -> SandboxArgs {
        use clap::Parser as _;
        let base = [
            "greenlight",
            "--repo",
            "/r.git",
            "--listen",
            "127.0.0.1:0",
            "--app",
            "web=apps/web",
        ];
        Cli::try_parse_from(base.iter().chain(extra))
            .unwrap()
            .sandbox
    }

    #[test]
    fn the_forge_flags_make_the_forge_faces_configuration() {
        assert!(forge_config_from(&args(&[])).unwrap().is_none());
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("forge.token");
        std::fs::write(&token, "forge-secret\n").unwrap();
        let token = token.to_str().unwrap();
        let config = forge_config_from(&args(&[
            "--forge",
            "GitLab",
            "--forge-listen",
            "127.0.0.1:0",
            "--forge-token-file",
            token,
            "--protect",
            "main",
            "--require-check",
            "ci",
            "--no-auto-merge",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(config.kind, ForgeKind::GitLab);
        assert_eq!(config.token, "forge-secret");
        assert_eq!(config.project, "greenlight/deploy");
        assert_eq!(
            (config.protected, config.required_checks),
            (vec!["main".to_string()], vec!["ci".to_string()])
        );
        assert!(!config.allow_auto_merge);
        let err = forge_config_from(&args(&[
            "--forge",
            "gitea",
            "--forge-listen",
            "8080",
            "--forge-token-file",
            token,
        ]))
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("--forge-listen"), "{err}");
    }

    #[test]
    fn listen_needs_an_address_and_a_port() {
        assert_eq!(
            parse_listen("127.0.0.1:0").unwrap().ip().to_string(),
            "127.0.0.1"
        );
        assert!(
            parse_listen("8080")
                .unwrap_err()
                .to_string()
                .contains("--listen")
        );
    }
}
