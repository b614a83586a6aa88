//! `greenlight demo`: the canary story for real (a commit deploys an image tag that does not
//! exist, the canary turns Degraded, greenlight fails and reverts it), in a temporary directory —
//! a bare git remote, a human's clone, the sandbox Argo CD stand-in and the watchdog daemon, all
//! on this machine. It prints each transition as it happens and exits 0 only after checking
//! that the story really happened: the remote's history holds greenlight's revert of the bad
//! commit (no watch trailer), and the app is Healthy again at the revert.
//!
//! `greenlight demo promote` tells the promotion gate's story instead (`demo_promote.rs`).

use anyhow::{Context, Result, bail, ensure};
use clap::{Args, Subcommand};
use greenlight::clock::{Clock, SystemClock};
use greenlight::output::{LogFormat, Output};
use greenlight::runtime::{self, DaemonConfig};
use greenlight_core::event::{Event, EventKind};
use greenlight_core::repo_url::RepoUrl;
use greenlight_sandbox::{AppSpec, SandboxConfig};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

#[derive(Args)]
pub struct DemoArgs {
    /// Which story: none is the canary's (a bad commit reverted).
    #[command(subcommand)]
    pub story: Option<Story>,
    /// Keep the temporary directory and print its path.
    #[arg(long, global = true)]
    pub keep: bool,
    /// The format of the watchdog's lines.
    #[arg(long = "log-format", value_enum, default_value = "text", global = true)]
    pub log_format: LogFormat,
}

#[derive(Subcommand)]
pub enum Story {
    /// The promotion gate's story: one candidate promoted, one blocked, by digest.
    Promote,
}

const APP: &str = "nav-canary";
/// The most a listing may hold: `watch --listing-limit-mib`'s default.
pub(super) const DEMO_LISTING_LIMIT_BYTES: usize = 128 << 20;
const GOOD_IMAGE: &str = "registry.local/nav-canary:1.4.2";
const BAD_IMAGE: &str = "registry.local/nav-canary:1.5.0-does-not-exist";

fn deployment(image: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: nav-canary
  namespace: nav
spec:
  replicas: 2
  selector:
    matchLabels: {{app: nav-canary}}
  template:
    metadata:
      labels: {{app: nav-canary}}
    spec:
      containers:
        - name: app
          image: {image}
---
apiVersion: v1
kind: Service
metadata:
  name: nav-canary
  namespace: nav
spec:
  selector: {{app: nav-canary}}
  ports: [{{port: 80}}]
"
    )
}

/// git with the user's configuration kept out, as a person would run it in their clone.
pub(super) fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "Dana Developer")
        .env("GIT_AUTHOR_EMAIL", "dana@example.com")
        .env("GIT_COMMITTER_NAME", "Dana Developer")
        .env("GIT_COMMITTER_EMAIL", "dana@example.com")
        .output()
        .context("cannot run git (is it installed?)")?;
    if !out.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A bare remote `<root>/origin.git` with `main` as its branch, and a human's clone of it,
/// `<root>/dana`, on `main`.
pub(super) fn new_remote(root: &Path) -> Result<(std::path::PathBuf, std::path::PathBuf)> {
    let remote = root.join("origin.git");
    let work = root.join("dana");
    std::fs::create_dir_all(&remote)?;
    git(
        &remote,
        &["init", "--quiet", "--bare", "--initial-branch=main"],
    )?;
    git(
        root,
        &["clone", "--quiet", remote.to_str().context("path")?, "dana"],
    )?;
    git(&work, &["checkout", "--quiet", "-B", "main"])?;
    Ok((remote, work))
}

pub(super) fn say(line: &str) {
    greenlight::output::stdout_line(&format!("demo: {line}"));
}

pub fn run(a: DemoArgs) -> Result<ExitCode> {
    if let Some(Story::Promote) = a.story {
        return super::demo_promote::run(a.keep, a.log_format);
    }
    crate::install_crypto();
    let rt = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let dir = tempfile::Builder::new()
        .prefix("greenlight-demo-")
        .tempdir()?;
    let result = rt.block_on(story(dir.path(), a.log_format));
    if a.keep {
        let kept = dir.keep();
        say(&format!("kept {}", kept.display()));
    }
    match result {
        Ok(()) => {
            say(
                "the story really happened: the bad commit reached the app, failed, was reverted in git, and the app is Healthy again",
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            greenlight::output::stderr_line(&format!("demo: FAILED: {e:#}"));
            Ok(ExitCode::from(1))
        }
    }
}

async fn story(root: &Path, log_format: LogFormat) -> Result<()> {
    let started = Instant::now();
    let (remote, work) = new_remote(root)?;
    std::fs::create_dir_all(work.join("apps/nav-canary"))?;
    std::fs::write(
        work.join("apps/nav-canary/deployment.yaml"),
        deployment(GOOD_IMAGE),
    )?;
    std::fs::write(work.join("README.md"), "# platform config\n")?;
    git(&work, &["add", "."])?;
    git(
        &work,
        &[
            "commit",
            "--quiet",
            "-m",
            "nav-canary: first deploy at 1.4.2",
        ],
    )?;
    git(&work, &["push", "--quiet", "origin", "main"])?;
    say(&format!(
        "git remote {} with app {APP} at {GOOD_IMAGE}",
        remote.display()
    ));

    let mut sc = SandboxConfig::new(
        remote.to_string_lossy().to_string(),
        "127.0.0.1:0".parse()?,
        vec![
            AppSpec::parse(&format!("{APP}=apps/nav-canary"))
                .map_err(|e| anyhow::anyhow!("{e}"))?,
        ],
    );
    sc.sync_interval = Duration::from_millis(300);
    sc.rollout_time = Duration::from_secs(2);
    sc.log = Some(Arc::new(|line: &str| {
        greenlight::output::stderr_line(&format!("sandbox: {line}"))
    }));
    let sandbox = greenlight_sandbox::start(sc)
        .await
        .context("starting the Argo CD stand-in")?;
    let url = format!("http://{}", sandbox.addr());
    say(&format!(
        "Argo CD stand-in serving the Argo CD REST API at {url}"
    ));
    wait_app(&sandbox, APP, Duration::from_secs(30), |app| {
        health(app) == "Healthy" && sync(app) == "Synced"
    })
    .await
    .context("the app never became Healthy before the story began")?;
    say(&format!("{APP} is Synced and Healthy"));

    // Before arming: the fleet audit, as `greenlight audit` prints it.
    let audit_cfg = greenlight::audit::AuditConfig {
        repo: RepoUrl::new(remote.to_string_lossy()),
        branch: Some("main".into()),
        git_token: None,
        source: greenlight::audit::AuditSource::ArgoCd(
            greenlight::argocd::ArgoCd {
                url: url.clone(),
                token: None,
                ca: None,
                read_limit_bytes: DEMO_LISTING_LIMIT_BYTES,
            },
            DEMO_LISTING_LIMIT_BYTES,
        ),
    };
    let audited = tokio::task::spawn_blocking(move || greenlight::audit::audit(audit_cfg))
        .await
        .context("the audit stopped")??;
    ensure!(
        audited.apps.iter().any(|a| a.name == APP && a.arm_ready()),
        "the audit does not find {APP} arm-ready:\n{}",
        audited.table()
    );
    for line in audited.table().lines() {
        say(&format!("audit: {line}"));
    }

    let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
    let out = Output::new(log_format);
    out.subscribe(move |e| {
        let _ = tx.send(e.clone());
    });
    let cfg = DaemonConfig {
        repo: RepoUrl::new(remote.to_string_lossy()),
        branch: None,
        git_token: None,
        git_author_name: "greenlight".into(),
        git_author_email: "greenlight@localhost".into(),
        state: root.join("state/greenlight.db"),
        data_dir: root.join("state/data"),
        stable_for_ms: 3_000,
        // Above Argo CD's 15 s stream heartbeat, as a real deployment's should be.
        stale_after_ms: 20_000,
        unknown_app_grace_ms: 10_000,
        fetch_interval: Duration::from_millis(300),
        resync_interval: greenlight::runtime::config::DEFAULT_RESYNC_INTERVAL,
        dry_run: false,
        since: None,
        trailer_key: greenlight_core::directive::DEFAULT_TRAILER_KEY.into(),
        // `--retain`'s default; the demo's state file is temporary anyway.
        retain_ms: 30 * 86_400_000,
        reopen_horizon_ms: greenlight_core::judge::DEFAULT_REOPEN_HORIZON_MS,
        strict_health: false,
        gate_candidates: false,
        health_scope: Vec::new(),
        attribution_exempt: Vec::new(),
        asked: None,
        revert_via_pull_request: None,
        verifier: None,
        fetch_nudge: None,
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    // The stand-in serves Argo CD's REST API: the watchdog reads it as it would Argo CD.
    let source = greenlight::argocd::source(&url, None, &cfg.repo, DEMO_LISTING_LIMIT_BYTES)?;
    let d = runtime::start(cfg, source, out, clock)
        .await
        .context("starting the watchdog")?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let daemon_task = tokio::spawn(d.run(async move {
        let _ = stop_rx.await;
    }));

    std::fs::write(
        work.join("apps/nav-canary/deployment.yaml"),
        deployment(BAD_IMAGE),
    )?;
    git(&work, &["add", "."])?;
    let msg = format!(
        "nav-canary: roll out 1.5.0\n\nA tag that was never pushed to the registry.\n\nNav-Watchdog: app={APP} deadline=8 mode=arm\n"
    );
    git(&work, &["commit", "--quiet", "-m", &msg])?;
    let bad = git(&work, &["rev-parse", "HEAD"])?;
    git(&work, &["push", "--quiet", "origin", "main"])?;
    say(&format!(
        "pushed {} with `Nav-Watchdog: app={APP} deadline=8 mode=arm` (image {BAD_IMAGE})",
        &bad[..8]
    ));

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    let revert = loop {
        let e = tokio::time::timeout_at(deadline.into(), rx.recv())
            .await
            .context("timed out waiting for the watchdog's verdict")?
            .context("the watchdog stopped")?;
        if e.commit.as_deref() != Some(bad.as_str()) {
            continue;
        }
        seen.push(e.event);
        match e.event {
            EventKind::RevertPushed => break e,
            EventKind::Confirmed
            | EventKind::NotReached
            | EventKind::Inconclusive
            | EventKind::Unwatchable
            | EventKind::RevertFailed
            | EventKind::Attribution => bail!("the watch ended differently: {}", e.message),
            _ => {}
        }
    };
    for want in [
        EventKind::WatchStarted,
        EventKind::Reached,
        EventKind::Failed,
        EventKind::RevertPushed,
    ] {
        ensure!(
            seen.contains(&want),
            "the watchdog never reported {}",
            want.as_str()
        );
    }
    let _ = revert;

    // Check the story against the world, not against what was printed.
    let tip = git(&remote, &["rev-parse", "main"])?;
    let parent = git(&remote, &["rev-parse", "main^"])?;
    let body = git(&remote, &["log", "-1", "--format=%B", "main"])?;
    let author = git(&remote, &["log", "-1", "--format=%an <%ae>", "main"])?;
    ensure!(
        parent == bad,
        "the remote's tip {tip} is not a child of the bad commit {bad}"
    );
    ensure!(
        body.contains(&format!("This reverts commit {bad}.")),
        "the tip is not a revert of {bad}:\n{body}"
    );
    ensure!(
        !body.contains("Nav-Watchdog:"),
        "the revert commit carries a watch trailer:\n{body}"
    );
    let file = git(&remote, &["show", "main:apps/nav-canary/deployment.yaml"])?;
    ensure!(
        file.contains(GOOD_IMAGE),
        "the revert did not restore {GOOD_IMAGE}"
    );
    say(&format!(
        "remote main is now {} by {author}: {}",
        &tip[..8],
        body.lines().next().unwrap_or("")
    ));

    wait_app(&sandbox, APP, Duration::from_secs(30), |app| {
        health(app) == "Healthy" && sync(app) == "Synced" && revision(app) == tip
    })
    .await
    .context("the app did not become Healthy at the revert")?;
    say(&format!(
        "the stand-in synced the revert {}: {APP} is Healthy again",
        &tip[..8]
    ));

    let _ = stop_tx.send(());
    daemon_task.await??;
    sandbox.shutdown().await;

    // The track record the verdict starts, as `greenlight record` prints it.
    let mut store =
        greenlight::store::SqliteStore::open_existing(&root.join("state/greenlight.db"), true)?;
    let exported = greenlight::store::Store::export(&mut store)?;
    let record = greenlight::store::track_record(&exported, SystemClock.now());
    let t = record.get(APP).cloned().unwrap_or_default();
    ensure!(
        t.reverted == 1,
        "the track record does not count greenlight's revert: {t:?}"
    );
    say(&format!(
        "record: {APP}: {}",
        t.judgement(greenlight_core::record::DEFAULT_MIN_SAMPLES)
    ));
    // Why the verdict came out so, replayed from its recorded inputs as `greenlight why`
    // prints it.
    let loaded = greenlight::store::Store::load(&mut store)?;
    let watch = loaded
        .watches
        .iter()
        .find(|w| w.commit.as_str() == bad)
        .context("the store has no watch of the broken commit")?;
    let (stored, steps) = greenlight::store::Store::tape(&mut store, &watch.id)?;
    let why = greenlight::why::explain(stored.as_ref().unwrap_or(watch), Ok(steps));
    for line in why.lines() {
        say(&format!("why: {line}"));
    }
    ensure!(
        why.outcome == greenlight::why::Outcome::Same,
        "the replay of the verdict did not reach it: {:?}",
        why.outcome
    );
    say(&format!(
        "whole story in {:.1}s",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

fn field<'a>(app: &'a Value, path: &[&str]) -> &'a str {
    let mut v = app;
    for p in path {
        v = &v[*p];
    }
    v.as_str().unwrap_or("")
}
pub(super) fn health(app: &Value) -> &str {
    field(app, &["status", "health", "status"])
}
pub(super) fn sync(app: &Value) -> &str {
    field(app, &["status", "sync", "status"])
}
pub(super) fn revision(app: &Value) -> &str {
    field(app, &["status", "sync", "revision"])
}

pub(super) async fn wait_app(
    sandbox: &greenlight_sandbox::Sandbox,
    name: &str,
    within: Duration,
    ok: impl Fn(&Value) -> bool,
) -> Result<()> {
    let end = Instant::now() + within;
    loop {
        if let Some(app) = sandbox.application(name)
            && ok(&app)
        {
            return Ok(());
        }
        if Instant::now() > end {
            let app = sandbox.application(name).unwrap_or(Value::Null);
            bail!(
                "{name} after {}s: health {} sync {} revision {}",
                within.as_secs(),
                health(&app),
                sync(&app),
                revision(&app)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
