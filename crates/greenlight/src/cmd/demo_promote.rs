//! `greenlight demo promote`: the promotion gate's story for real (docs/promote.md, "How a run
//! goes"), in a temporary directory — a bare git remote, a human's clone holding a live manifest
//! pinned by digest and an empty candidates' directory, the sandbox Argo CD stand-in deploying
//! both (the candidates' Application pruning and allowed to become empty, as an operator sets it
//! up), a local server answering the checks' HTTP requests, and the watchdog daemon. Two runs of
//! `greenlight promote run`, in-process through the command's own entry point (the same code,
//! the same flags): one candidate passes its checks and is promoted, one fails a check and is
//! blocked. It exits 0 only after checking on the remote that this really happened.
//!
//! The check server stands in for the candidate's pods, which the sandbox does not run: the
//! checks pass the image they verify (`{{candidate.image}}`) and the server answers as that
//! build would. The gate decides; the server only knows which build is broken.

use super::demo::{git, health, new_remote, revision, say, sync, wait_app};
use super::promote_run::{self, RunArgs};
use anyhow::{Context, Result, bail, ensure};
use axum::extract::Query;
use axum::http::StatusCode;
use clap::{Args, FromArgMatches};
use greenlight::clock::{Clock, SystemClock};
use greenlight::output::{LogFormat, Output};
use greenlight::promote::candidates::{self, KEPT_UNTIL};
use greenlight::runtime::{self, DaemonConfig};
use greenlight_core::directive::DEFAULT_TRAILER_KEY;
use greenlight_core::event::{Event, EventKind};
use greenlight_core::repo_url::RepoUrl;
use greenlight_sandbox::{AppSpec, SandboxConfig};
use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

const LIVE_APP: &str = "nav-prod";
const CANDIDATES_APP: &str = "nav-candidates";
const MANIFEST: &str = "deploy/prod/nav-api.yaml";
const CANDIDATES: &str = "deploy/candidates";
const CANDIDATE_FILE: &str = "deploy/candidates/nav-api-candidate.yaml";
/// nav-api 1.4.2, live.
const LIVE: &str = "registry.local/nav-api@sha256:d6293b3140b9823b8060486f071526a073952bd59a79c0f98682e684029a5e03";
/// nav-api 1.5.0: a good build.
const GOOD: &str = "registry.local/nav-api@sha256:eab48692d96a6b722a783a628aeffcd853592a19d3d61ccb4fc8b1ac3c6c175b";
/// nav-api 1.6.0: healthy, but its route planning answers 500.
const BAD: &str = "registry.local/nav-api@sha256:0566e585fe4b934b60a4aeded4e2c587e10927f16c0503ce58fbe0131dbd559c";

fn live_manifest(image: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: nav-api
  namespace: nav
spec:
  replicas: 2
  selector:
    matchLabels: {{app: nav-api}}
  template:
    metadata:
      labels: {{app: nav-api}}
    spec:
      containers:
        - name: api
          image: {image}
          ports: [{{containerPort: 8080}}]
---
apiVersion: v1
kind: Service
metadata:
  name: nav-api
  namespace: nav
spec:
  selector: {{app: nav-api}}
  ports: [{{port: 8080}}]
"
    )
}

fn promote_yaml(checks: &str) -> String {
    format!(
        "# The promotion gate for nav-api (docs/promote.md), as `greenlight demo promote` writes it.
apiVersion: greenlight.dev/v1alpha1
kind: Promotion
live:
  app: {LIVE_APP}
  manifest: {MANIFEST}
  workload: {{kind: Deployment, name: nav-api, namespace: nav, container: api}}
candidate:
  app: {CANDIDATES_APP}
  path: {CANDIDATES}
  port: 8080
# In a cluster a check would ask the candidate's Service,
# http://{{{{candidate.service}}}}.{{{{candidate.namespace}}}}.svc:{{{{candidate.port}}}}/healthz. The stand-in
# runs no pods, so a local server answers for the candidate, as the build {{{{candidate.image}}}}.
checks:
  - name: healthz
    http:
      url: {checks}/healthz?image={{{{candidate.image}}}}
      bodyContains: ok
      timeout: 5s
  - name: smoke
    http:
      url: {checks}/smoke?image={{{{candidate.image}}}}
      timeout: 5s
promotion:
  watch: {{mode: arm, deadline: 60s}}
"
    )
}

pub fn run(keep: bool, log_format: LogFormat) -> Result<ExitCode> {
    crate::install_crypto();
    let rt = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let dir = tempfile::Builder::new()
        .prefix("greenlight-demo-promote-")
        .tempdir()?;
    let result = rt.block_on(story(dir.path(), log_format));
    if keep {
        let kept = dir.keep();
        say(&format!("kept {}", kept.display()));
    }
    match result {
        Ok(()) => {
            say(&format!(
                "the story really happened: {GOOD} passed its checks and is live by a promotion commit the watchdog confirmed; {BAD} failed a check, is kept in git, and the live manifest never changed"
            ));
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
    let checks = check_server().await?;
    say(&format!(
        "check server at {checks}: answers /healthz and /smoke as the build named by ?image= would ({GOOD} is good; {BAD} answers /smoke with 500)"
    ));

    let (remote, work) = new_remote(root)?;
    std::fs::create_dir_all(work.join("deploy/prod"))?;
    std::fs::create_dir_all(work.join(CANDIDATES))?;
    std::fs::write(work.join(MANIFEST), live_manifest(LIVE))?;
    std::fs::write(
        work.join(CANDIDATES).join(candidates::README),
        candidates::README_TEXT,
    )?;
    let config = work.join("promote.yaml");
    std::fs::write(&config, promote_yaml(&checks))?;
    git(&work, &["add", "."])?;
    git(
        &work,
        &[
            "commit",
            "--quiet",
            "-m",
            "nav-api: live at 1.4.2, pinned; the promotion gate's config",
        ],
    )?;
    git(&work, &["push", "--quiet", "origin", "main"])?;
    say(&format!(
        "git remote {} with {MANIFEST} at {LIVE} and an empty {CANDIDATES}/",
        remote.display()
    ));
    say(&format!("promotion config {}", config.display()));

    let mut sc = SandboxConfig::new(
        remote.to_string_lossy().to_string(),
        "127.0.0.1:0".parse()?,
        vec![
            AppSpec::parse(&format!("{LIVE_APP}=deploy/prod"))
                .map_err(|e| anyhow::anyhow!("{e}"))?,
            AppSpec::parse(&format!("{CANDIDATES_APP}={CANDIDATES}"))
                .map_err(|e| anyhow::anyhow!("{e}"))?,
        ],
    );
    // The candidates' Application as docs/promote.md asks for it: a candidate removed from git
    // is deleted by pruning, and removing the last one leaves it empty.
    sc.prune = vec![CANDIDATES_APP.into()];
    sc.allow_empty = vec![CANDIDATES_APP.into()];
    sc.sync_interval = Duration::from_millis(300);
    sc.rollout_time = Duration::from_secs(1);
    sc.log = Some(Arc::new(|line: &str| {
        greenlight::output::stderr_line(&format!("sandbox: {line}"))
    }));
    let sandbox = greenlight_sandbox::start(sc)
        .await
        .context("starting the Argo CD stand-in")?;
    let url = format!("http://{}", sandbox.addr());
    say(&format!(
        "Argo CD stand-in at {url}: {LIVE_APP} deploys deploy/prod, {CANDIDATES_APP} deploys {CANDIDATES} (automated, prune, allowEmpty)"
    ));
    for app in [LIVE_APP, CANDIDATES_APP] {
        wait_app(&sandbox, app, Duration::from_secs(30), |a| {
            health(a) == "Healthy" && sync(a) == "Synced"
        })
        .await
        .context("the apps never settled before the story began")?;
    }
    say(&format!(
        "{LIVE_APP} and {CANDIDATES_APP} are Synced and Healthy"
    ));

    // The watchdog, which proves the promotion commit's watch trailer on the live app.
    let (tx, mut events) = mpsc::unbounded_channel::<Event>();
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
        stable_for_ms: 2_000,
        // Above Argo CD's 15 s stream heartbeat, as a real deployment's should be.
        stale_after_ms: 20_000,
        unknown_app_grace_ms: 10_000,
        fetch_interval: Duration::from_millis(300),
        resync_interval: greenlight::runtime::config::DEFAULT_RESYNC_INTERVAL,
        dry_run: false,
        since: None,
        trailer_key: DEFAULT_TRAILER_KEY.into(),
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
    let source =
        greenlight::argocd::source(&url, None, &cfg.repo, super::demo::DEMO_LISTING_LIMIT_BYTES)?;
    let daemon = runtime::start(cfg, source, out, Arc::new(SystemClock) as Arc<dyn Clock>)
        .await
        .context("starting the watchdog")?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let daemon_task = tokio::spawn(daemon.run(async move {
        let _ = stop_rx.await;
    }));

    let run_flags = |candidate: &str, n: u32| -> Vec<String> {
        [
            "--config",
            &config.to_string_lossy(),
            "--candidate",
            candidate,
            "--repo",
            &remote.to_string_lossy(),
            "--argocd-url",
            &url,
            "--data-dir",
            &root.join(format!("run-{n}")).to_string_lossy(),
            // The judge's timings, short for a demo (the sandbox rolls out in a second).
            "--candidate-deadline",
            "30s",
            "--stable-for",
            "2s",
            "--fetch-interval",
            "200ms",
            "--stale-after",
            "20s",
            "--unknown-app-grace",
            "10s",
        ]
        .map(String::from)
        .into()
    };

    // Run 1: a good build.
    let before = git(&remote, &["rev-parse", "main"])?;
    say(&format!(
        "run 1: greenlight promote run --candidate {GOOD} (the flags: {})",
        run_flags(GOOD, 1).join(" ")
    ));
    let code = promote_run_in_process(run_flags(GOOD, 1)).await?;
    ensure!(
        code == ExitCode::SUCCESS,
        "run 1 exited {code:?}, not 0 (promoted)"
    );
    let promotion = git(&remote, &["rev-parse", "main"])?;
    let commits = git(&remote, &["rev-list", &format!("{before}..main")])?;
    ensure!(
        commits.lines().count() == 2,
        "run 1 should have pushed two commits (the candidate, the promotion):\n{commits}"
    );
    let body = git(&remote, &["log", "-1", "--format=%B", "main"])?;
    for want in [
        format!("promote {LIVE_APP}: {GOOD} (gate passed)"),
        "Greenlight-Gate: passed".to_string(),
        format!("Greenlight-Candidate: {GOOD}"),
        format!("{DEFAULT_TRAILER_KEY}: app={LIVE_APP} "),
    ] {
        ensure!(
            body.contains(&want),
            "the promotion commit {} lacks {want:?}:\n{body}",
            short(&promotion)
        );
    }
    let live = git(&remote, &["show", &format!("main:{MANIFEST}")])?;
    ensure!(
        live.contains(&format!("image: {GOOD}")) && !live.contains(LIVE),
        "the live manifest does not name {GOOD} after the promotion:\n{live}"
    );
    let left = candidates_files(&remote)?;
    ensure!(
        left == [format!("{CANDIDATES}/{}", candidates::README)],
        "the promotion left candidate files behind: {left:?}"
    );
    say(&format!(
        "run 1 outcome: promoted {GOOD} (exit 0); verified on the remote: promotion commit {} sets {MANIFEST} to that digest, carries `{}`, and removed the candidate",
        short(&promotion),
        body.lines()
            .find(|l| l.starts_with(&format!("{DEFAULT_TRAILER_KEY}:")))
            .unwrap_or("")
    ));

    // The watchdog proves the promotion on the live app, as the trailer asks.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let e = tokio::time::timeout_at(deadline.into(), events.recv())
            .await
            .context("timed out waiting for the watchdog's verdict on the promotion")?
            .context("the watchdog stopped")?;
        if e.commit.as_deref() != Some(promotion.as_str()) {
            continue;
        }
        match e.event {
            EventKind::Confirmed => break,
            EventKind::Failed
            | EventKind::NotReached
            | EventKind::Inconclusive
            | EventKind::Unwatchable
            | EventKind::RevertPushed
            | EventKind::RevertFailed
            | EventKind::Attribution => {
                bail!("the promotion's watch ended differently: {}", e.message)
            }
            _ => {}
        }
    }
    let app = sandbox.application(LIVE_APP).unwrap_or_default();
    ensure!(
        revision(&app) == promotion && health(&app) == "Healthy",
        "{LIVE_APP} is not Healthy at the promotion: health {} revision {}",
        health(&app),
        revision(&app)
    );
    say(&format!(
        "the watchdog confirmed the promotion {}: {LIVE_APP} reached it, Healthy and stable, running {GOOD}",
        short(&promotion)
    ));

    // Run 2: a build whose smoke check fails.
    say(&format!(
        "run 2: greenlight promote run --candidate {BAD} (same flags)"
    ));
    let code = promote_run_in_process(run_flags(BAD, 2)).await?;
    ensure!(
        code == ExitCode::from(1),
        "run 2 exited {code:?}, not 1 (blocked)"
    );
    let tip = git(&remote, &["rev-parse", "main"])?;
    let changed = git(
        &remote,
        &["diff", "--name-only", &promotion, "main", "--", MANIFEST],
    )?;
    ensure!(
        changed.is_empty(),
        "run 2 changed the live manifest since the promotion {}",
        short(&promotion)
    );
    let body = git(&remote, &["log", "-1", "--format=%B", "main"])?;
    ensure!(
        body.contains("Greenlight-Gate: blocked, candidate kept"),
        "the tip {} does not record a blocked run:\n{body}",
        short(&tip)
    );
    let kept = git(&remote, &["show", &format!("main:{CANDIDATE_FILE}")])?;
    ensure!(
        kept.contains(BAD) && kept.contains(KEPT_UNTIL),
        "the blocked candidate is not kept in {CANDIDATE_FILE} with {KEPT_UNTIL}:\n{kept}"
    );
    let until = kept
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{KEPT_UNTIL}:")))
        .unwrap_or("")
        .trim()
        .trim_matches(['"', '\'']);
    let left = candidates_files(&remote)?;
    ensure!(
        left.len() == 2 && left.iter().any(|f| f == CANDIDATE_FILE),
        "the candidates' directory holds more than its README and the kept candidate (a lock left behind?): {left:?}"
    );
    say(&format!(
        "run 2 outcome: blocked {BAD} (exit 1, as `promote run` exits when the gate blocks); verified on the remote: {MANIFEST} unchanged since {}, the candidate kept in {CANDIDATE_FILE} with {KEPT_UNTIL}: {until}",
        short(&promotion)
    ));

    let _ = stop_tx.send(());
    daemon_task.await??;
    sandbox.shutdown().await;
    say(&format!(
        "whole story in {:.1}s",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// `greenlight promote run` with these flags, through the command's own entry point. It builds
/// its own async runtime, so it runs on a thread of its own while this one serves the sandbox.
async fn promote_run_in_process(flags: Vec<String>) -> Result<ExitCode> {
    let command = RunArgs::augment_args(clap::Command::new("greenlight promote run"));
    let matches = command
        .no_binary_name(true)
        .try_get_matches_from(&flags)
        .context("the demo's `promote run` flags")?;
    let args = RunArgs::from_arg_matches(&matches).context("the demo's `promote run` flags")?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = tx.send(promote_run::run(args));
    });
    rx.await
        .context("`promote run` stopped without an answer")?
        .context("`promote run` failed")
}

fn candidates_files(remote: &Path) -> Result<Vec<String>> {
    Ok(git(
        remote,
        &["ls-tree", "-r", "--name-only", "main", CANDIDATES],
    )?
    .lines()
    .map(str::to_string)
    .collect())
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(8)]
}

/// The candidate's HTTP endpoints, as each build answers them: the stand-in for its pods.
async fn check_server() -> Result<String> {
    async fn healthz(Query(q): Query<HashMap<String, String>>) -> (StatusCode, &'static str) {
        answer("/healthz", q.get("image").map(String::as_str))
    }
    async fn smoke(Query(q): Query<HashMap<String, String>>) -> (StatusCode, &'static str) {
        answer("/smoke", q.get("image").map(String::as_str))
    }
    let app = axum::Router::new()
        .route("/healthz", axum::routing::get(healthz))
        .route("/smoke", axum::routing::get(smoke));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("starting the check server")?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}"))
}

fn answer(path: &str, image: Option<&str>) -> (StatusCode, &'static str) {
    let (status, body) = match (image, path) {
        (Some(GOOD | BAD), "/healthz") => (StatusCode::OK, "ok"),
        (Some(GOOD), "/smoke") => (StatusCode::OK, "route planned: 3 legs"),
        (Some(BAD), "/smoke") => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "route planning failed: index out of range",
        ),
        _ => (StatusCode::NOT_FOUND, "no such build"),
    };
    greenlight::output::stderr_line(&format!(
        "check server: GET {path} as {}: {} {body}",
        image.unwrap_or("(no image)"),
        status.as_u16()
    ));
    (status, body)
}
