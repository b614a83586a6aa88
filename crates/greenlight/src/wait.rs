//! `greenlight wait` (`docs/wait.md`): is this commit live on this app, healthy, and did it stay
//! healthy? One shot, for a pipeline: the watchdog's own judge and source, asked for one watch
//! of one commit (`JudgeConfig::asked`) in a scratch state removed afterwards. Never reverts:
//! the watch is shadow and dry-run, whatever the commit's trailers say.
//!
//! The source is Argo CD's REST API, or with `--source kube` the Kubernetes API (Argo CD's
//! Application objects, as `watch --source kube` reads them): the judge is the same.

use crate::argocd::ArgoCd;
use crate::clock::{Clock, SystemClock};
use crate::kube::KubeApp;
use crate::output::{LogFormat, Output};
use crate::runtime::DaemonConfig;
use crate::runtime::one::{Judged, judge_one};
use crate::runtime::seams::Source;
use crate::usage;
use anyhow::{Context as _, Result};
use greenlight_argocd::model::Application;
use greenlight_core::commit::CommitId;
use greenlight_core::directive::{AppRef, Directive, Mode};
use greenlight_core::event::EventKind;
use greenlight_core::judge::AskedWatch;
use greenlight_core::repo_url::RepoUrl;
use greenlight_core::time::Timestamp;
use greenlight_core::watch::State;
use greenlight_git::{Auth, Repo, Secret};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The listing bound of `wait`'s source: as `watch`'s default.
const LISTING_LIMIT_BYTES: usize = 128 << 20;

/// What `greenlight wait` was told.
pub struct WaitConfig {
    pub repo: RepoUrl,
    /// The branch the commit must be on (default: the remote's HEAD branch).
    pub branch: Option<String>,
    pub git_token: Option<Secret>,
    /// Where the Application is read.
    pub source: WaitSource,
    pub app: AppRef,
    /// A commit (any revision git resolves in the clone), or `None`: the branch's tip.
    pub commit: Option<String>,
    /// The watch's deadline: reached, healthy and stable by then, or the answer is no.
    pub timeout: Duration,
    pub stable_for_ms: i64,
    pub stale_after_ms: i64,
    pub unknown_app_grace_ms: i64,
    pub fetch_interval: Duration,
    /// Where the clone is kept (default: a scratch directory, removed afterwards).
    pub data_dir: Option<PathBuf>,
    /// `--expect Healthy,Running`: live also means every Pod runs what git pins
    /// (`docs/verdicts.md#expect-running`).
    pub expect_running: bool,
}

/// Where `wait` reads its Application.
pub enum WaitSource {
    /// Argo CD's REST API (`--argocd-url`).
    ArgoCd(ArgoCd),
    /// The Kubernetes API (`--source kube`); Argo CD's API too when given, for resource trees
    /// (as `watch --source kube`).
    Kube {
        app: KubeApp,
        argocd: Option<ArgoCd>,
    },
}

/// The wait's one Application as its source reads it: the judge's source, the read at the
/// cut-off and the read of the revision a live app runs.
enum Reader {
    ArgoCd(ArgoCd),
    Kube {
        client: ::kube::Client,
        argocd: Option<ArgoCd>,
    },
}

impl Reader {
    /// The reader for `source`, and `app` with the namespace it is read in (with `--source
    /// kube`, `--app`'s, else `--namespace`, else the kubeconfig context's).
    async fn connect(source: &WaitSource, app: &AppRef) -> Result<(Reader, AppRef)> {
        match source {
            WaitSource::ArgoCd(a) => Ok((Reader::ArgoCd(a.clone()), app.clone())),
            WaitSource::Kube { app: kube, argocd } => {
                let (client, app) = kube.connect(app).await?;
                Ok((
                    Reader::Kube {
                        client,
                        argocd: argocd.clone(),
                    },
                    app,
                ))
            }
        }
    }

    /// Who answers, for the words of an answer.
    fn name(&self) -> &'static str {
        match self {
            Reader::ArgoCd(_) => "Argo CD",
            Reader::Kube { .. } => "the Kubernetes API",
        }
    }

    /// The runtime's source of `repo`'s Applications; with `--source kube`, those of `app`'s
    /// namespace only (namespaced RBAC is enough).
    fn source(&self, repo: &RepoUrl, app: &AppRef) -> Result<Source> {
        match self {
            Reader::ArgoCd(a) => a.source(repo, LISTING_LIMIT_BYTES),
            Reader::Kube { client, argocd } => {
                let argocd = argocd
                    .as_ref()
                    .map(|a| a.client().map_err(|e| usage(format!("--argocd-url: {e}"))))
                    .transpose()?;
                let opts = greenlight_kube::KubeSourceOptions {
                    namespaces: app.namespace.iter().cloned().collect(),
                    argocd,
                    ..Default::default()
                };
                Ok(crate::kube::source_with_client(client.clone(), repo, opts))
            }
        }
    }

    /// `app` read once; `None` when the source says it does not exist (404).
    async fn get(&self, app: &AppRef) -> Result<Option<Application>> {
        let ns = app.namespace.as_deref().unwrap_or("");
        match self {
            Reader::ArgoCd(a) => Ok(a.client()?.get(ns, &app.name).await?),
            Reader::Kube { client, .. } => {
                Ok(greenlight_kube::get_application(client, ns, &app.name).await?)
            }
        }
    }
}

/// How a wait ended, with the process's exit code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Waited {
    /// `live` (CONFIRMED), `not-live` (a verdict other than CONFIRMED or INCONCLUSIVE),
    /// `unobserved` (INCONCLUSIVE, or no verdict: Argo CD could not be observed well enough).
    pub outcome: &'static str,
    pub commit: String,
    pub app: String,
    /// The verdict's state (`CONFIRMED`, `FAIL`, `NOT_REACHED`, …); `None` without one.
    pub state: Option<String>,
    pub reason: String,
    pub reached_at: Option<String>,
    pub healthy_since: Option<String>,
    /// Live only: later commits to the app's paths that the app runs with this one (a
    /// fix-forward among them); `None` when there are none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub later_commits: Option<Vec<String>>,
    pub exit_code: u8,
}

/// Answers for the lines said while waiting (stderr, as they happen).
pub trait Progress: Send + Sync {
    fn line(&self, line: &str);
}

/// The wait, from the clone to the verdict. Blocks on an async runtime of its own. A usage
/// error (a commit not on the branch, an app name that cannot be) is `Err` with
/// [`crate::UsageError`]; anything else that stops it before a verdict is `Err` too, and the
/// caller says it could not observe.
pub fn wait(cfg: WaitConfig, progress: Arc<dyn Progress>) -> Result<Waited> {
    // The app with the namespace it is read in; a kubeconfig that cannot be used is a usage
    // error before anything is cloned.
    let app = match &cfg.source {
        WaitSource::ArgoCd(_) => cfg.app.clone(),
        WaitSource::Kube { app: kube, .. } => {
            let rt = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
            rt.block_on(kube.connect(&cfg.app))?.1
        }
    };
    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    let data_dir = cfg
        .data_dir
        .clone()
        .unwrap_or_else(|| scratch.path().join("data"));
    let _clone_lock = crate::lock::lock_data_dir(&data_dir)?;
    // The runtime opens the same clone (`<data dir>/repo`): the commit is resolved here first,
    // so that a commit not on the branch is a usage error, not a wait until the timeout.
    let auth = Auth {
        token: cfg.git_token.clone(),
        username: None,
    };
    let repo = Repo::open_or_clone(cfg.repo.expose(), &data_dir.join("repo"), auth)?;
    if let Some(note) = greenlight_git::stale_locks_note(&repo.clear_stale_locks()?) {
        progress.line(&format!("warning: {note}"));
    }
    let branch = match &cfg.branch {
        Some(b) => b.clone(),
        None => repo.remote_default_branch()?,
    };
    let tip = repo.fetch(&branch)?;
    let commit = match &cfg.commit {
        None => tip.clone(),
        Some(rev) if rev == "HEAD" => tip.clone(),
        // `HEAD~1`, `main^`: relative to the branch as just fetched, never to the clone's own
        // checkout (a kept `--data-dir` clone's is as old as the clone).
        Some(rev) => repo.resolve(&on_fetched(rev, &branch))?.ok_or_else(|| {
            usage(format!(
                "--commit {rev:?} is not a commit of {} (fetched {branch} at {})",
                cfg.repo,
                short(&tip)
            ))
        })?,
    };
    if repo.is_ancestor(&commit, &tip)? != Some(true) {
        return Err(usage(format!(
            "--commit {}: {} is not on {branch} of {} (its tip is {}): no Application that tracks {branch} can run it (--branch names the branch the app tracks)",
            cfg.commit.as_deref().unwrap_or("HEAD"),
            short(&commit),
            cfg.repo,
            short(&tip)
        )));
    }
    let data = repo.commit(&commit)?;
    if data.parents.is_empty() {
        return Err(usage(format!(
            "{} is the repository's first commit: wait judges a commit against the one before it",
            short(&commit)
        )));
    }
    let commit_id = CommitId::parse(&commit).map_err(|e| anyhow::anyhow!("{commit}: {e}"))?;
    let directive = Directive {
        app: app.clone(),
        deadline_ms: cfg.timeout.as_millis().min(i64::MAX as u128) as i64,
        mode: Mode::Shadow,
        expect: if cfg.expect_running {
            greenlight_core::directive::EXPECT_RUNNING
        } else {
            greenlight_core::directive::EXPECT_HEALTHY
        }
        .to_string(),
    };
    drop(repo);
    let state_dir = scratch.path().join("state");
    std::fs::create_dir_all(&state_dir).context("cannot create a scratch directory")?;
    let daemon = DaemonConfig {
        repo: cfg.repo.clone(),
        branch: Some(branch.clone()),
        git_token: cfg.git_token.clone(),
        git_author_name: "greenlight wait".to_string(),
        git_author_email: "wait@greenlight.invalid".to_string(),
        state: state_dir.join("state.db"),
        data_dir: data_dir.clone(),
        stable_for_ms: cfg.stable_for_ms,
        stale_after_ms: cfg.stale_after_ms,
        unknown_app_grace_ms: cfg.unknown_app_grace_ms,
        fetch_interval: cfg.fetch_interval,
        resync_interval: crate::runtime::config::DEFAULT_RESYNC_INTERVAL,
        // Never a revert, whatever the commit's trailers say.
        dry_run: true,
        since: Some(format!("{commit}^")),
        trailer_key: greenlight_core::directive::DEFAULT_TRAILER_KEY.to_string(),
        retain_ms: 86_400_000,
        reopen_horizon_ms: 0,
        strict_health: false,
        gate_candidates: false,
        health_scope: Vec::new(),
        attribution_exempt: Vec::new(),
        asked: Some(AskedWatch {
            commit: commit_id,
            directive,
        }),
        revert_via_pull_request: None,
        verifier: Some(std::sync::Arc::new(match &cfg.source {
            WaitSource::ArgoCd(a) => crate::verify::WatchVerifier::ArgoCd(a.clone()),
            WaitSource::Kube { app, .. } => crate::verify::WatchVerifier::Kube(app.clone()),
        })),
        fetch_nudge: None,
    };
    progress.line(&format!(
        "waiting for {} on {} ({} {branch}): reached, healthy and stable for {} within {}",
        short(&commit),
        app,
        cfg.repo,
        humantime::format_duration(Duration::from_millis(cfg.stable_for_ms as u64)),
        humantime::format_duration(cfg.timeout)
    ));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let out = Output::new(LogFormat::Text).events_unprinted();
    {
        let seen = seen.clone();
        let progress = progress.clone();
        let watched = commit.clone();
        let stable_for_ms = cfg.stable_for_ms;
        out.subscribe(move |e| {
            if e.commit.as_deref() != Some(watched.as_str()) {
                return;
            }
            let Ok(mut s) = seen.lock() else { return };
            match e.event {
                EventKind::Reached => s.reached_at = Some(e.time),
                EventKind::HealthyStreakStarted | EventKind::HealthyStreakResumed => {
                    s.healthy_since.get_or_insert(e.time);
                }
                EventKind::HealthyStreakBroken => s.healthy_since = None,
                _ => {}
            }
            let mut line = format!("{} {}: {}", e.time.rfc3339(), e.event.as_str(), e.message);
            if let Some(since) = s.healthy_since
                && !e.state.is_some_and(|st| st.is_terminal())
            {
                let to_go = (stable_for_ms - e.time.ms_since(since)).max(0);
                line.push_str(&format!(
                    " (healthy since {}, {}s to go)",
                    since.rfc3339(),
                    (to_go + 999) / 1000
                ));
            }
            progress.line(&line);
        });
    }
    // The wait's runtime, made only now (as the judge's runtime has always been started, after
    // the clone): a kube client's connection task lives on the runtime that built it, so the
    // reader is connected on this one.
    let rt = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let (reader, app) = rt.block_on(Reader::connect(&cfg.source, &app))?;
    let source = reader.source(&cfg.repo, &app)?;
    // `--timeout` bounds the whole wait, as `kubectl rollout status --timeout` does. The
    // watch's deadline is the same length from its start (a little after this), so the judge's
    // NOT_REACHED or INCONCLUSIVE at that deadline is still heard: the margin covers the
    // runtime's start and a stale observation. A judge whose health deadline counts from a late
    // reach is cut off here, and the answer says where the wait stood.
    let limit = cfg.timeout
        + Duration::from_millis(cfg.stale_after_ms.saturating_mul(2).max(0) as u64)
        + Duration::from_secs(10);
    let judged = {
        let ticker = {
            let seen = seen.clone();
            let progress = progress.clone();
            let stable_for_ms = cfg.stable_for_ms;
            rt.spawn(async move {
                let mut every = tokio::time::interval(Duration::from_secs(30));
                every.tick().await;
                loop {
                    every.tick().await;
                    let since = seen.lock().ok().and_then(|s| s.healthy_since);
                    if let Some(since) = since {
                        let now = SystemClock.now();
                        let to_go = (stable_for_ms - now.ms_since(since)).max(0);
                        progress.line(&format!(
                            "{} healthy since {}, {}s to go",
                            now.rfc3339(),
                            since.rfc3339(),
                            (to_go + 999) / 1000
                        ));
                    }
                }
            })
        };
        let judged = rt.block_on(judge_one(daemon, source, out, &commit, limit));
        ticker.abort();
        judged?
    };
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    let at_cutoff = if judged == Judged::NoVerdict {
        rt.block_on(readable(&reader, &app))
    } else {
        Ok(())
    };
    let confirmed = matches!(judged, Judged::Verdict(State::Confirmed, _));
    let bounds = Bounds {
        timeout: cfg.timeout,
        stable_for_ms: cfg.stable_for_ms,
        limit,
        source: reader.name(),
    };
    let mut waited = answer(judged, &seen, at_cutoff, commit, app.to_string(), &bounds);
    if confirmed {
        // Live by ancestry: the app runs a revision that contains the commit. Later commits to
        // the app's paths in that revision (a fix-forward of this very commit among them) may
        // have changed what it deployed: the answer names them, never quietly.
        match rt.block_on(later_commits(
            &cfg,
            &reader,
            &app,
            &data_dir,
            &waited.commit,
        )) {
            Ok(later) if later.is_empty() => {}
            Ok(later) => {
                let shas: Vec<&str> = later.iter().map(|c| short(c)).collect();
                waited.reason.push_str(&format!(
                    "; the app runs {} later commit(s) to its paths with it ({}): they may have changed what this commit deployed",
                    later.len(),
                    shas.join(", ")
                ));
                waited.later_commits = Some(later);
            }
            Err(e) => waited.reason.push_str(&format!(
                "; whether later commits to the app's paths run with it could not be read: {e:#}"
            )),
        }
    }
    Ok(waited)
}

/// The commits after `commit` in the revision the app runs now that change its source paths
/// (every one of them when Argo CD's answer does not say its paths).
async fn later_commits(
    cfg: &WaitConfig,
    reader: &Reader,
    app: &AppRef,
    data_dir: &std::path::Path,
    commit: &str,
) -> Result<Vec<String>> {
    use greenlight_core::snapshot::{SourceFacts, SourcePaths};
    let app = reader
        .get(app)
        .await?
        .ok_or_else(|| anyhow::anyhow!("{} says {app} does not exist (404)", reader.name()))?;
    let snap = greenlight_argocd::snapshot::snapshot(&app, None, cfg.repo.expose());
    let paths = match &snap.source {
        SourceFacts::FromRepo { paths, .. } => paths.clone(),
        SourceFacts::NotFromRepo { .. } => SourcePaths::Unknown {
            why: "no source of the app is this repository".into(),
        },
    };
    let revision = snap.sync_revision.clone();
    let auth = Auth {
        token: cfg.git_token.clone(),
        username: None,
    };
    let repo = Repo::open_or_clone(cfg.repo.expose(), &data_dir.join("repo"), auth)?;
    let commit = commit.to_string();
    tokio::task::spawn_blocking(move || -> Result<Vec<String>> {
        let mut found = Vec::new();
        for c in repo.new_commits(Some(&commit), &revision)? {
            let changed = repo.changed_paths(&c)?;
            if greenlight_core::paths::touches(&paths, &changed).touches() {
                found.push(c);
            }
        }
        Ok(found)
    })
    .await?
}

/// The answer from what the judge said (or did not say within `limit`), what the events
/// showed, and, when it said nothing, whether the app could be read at the cut-off: exit 0
/// live, 1 not live, 3 unobserved.
fn answer(
    judged: Judged,
    seen: &Seen,
    at_cutoff: Result<(), String>,
    commit: String,
    app: String,
    bounds: &Bounds,
) -> Waited {
    let Bounds {
        timeout,
        stable_for_ms,
        limit,
        source,
    } = *bounds;
    let timeout = humantime::format_duration(timeout);
    let (state, reason, outcome, exit_code) = match judged {
        Judged::Verdict(State::Confirmed, reason) => (Some(State::Confirmed), reason, "live", 0),
        Judged::Verdict(State::Inconclusive, reason) => {
            (Some(State::Inconclusive), reason, "unobserved", 3)
        }
        Judged::Verdict(s, reason) => (Some(s), for_the_flag(&reason), "not-live", 1),
        Judged::TrailerRejected(reason) => (None, reason, "unobserved", 3),
        // Reached: the app was observed, and it was not healthy and stable in time.
        // Cut off by the timeout: the app was read once more (`at_cutoff`). Unreadable, the
        // answer is unobserved; readable, the events say where the commit stood.
        Judged::NoVerdict => match (at_cutoff, seen.reached_at, seen.healthy_since) {
            (Err(why), _, _) => (
                None,
                format!(
                    "no verdict on {} within {}, and {source} could not be read then: {why}",
                    short(&commit),
                    humantime::format_duration(limit)
                ),
                "unobserved",
                3,
            ),
            (Ok(()), Some(reached), Some(since)) => (
                None,
                format!(
                    "reached at {}, healthy since {}: the {} window was not over when the timeout ({timeout}) ran out",
                    reached.rfc3339(),
                    since.rfc3339(),
                    humantime::format_duration(Duration::from_millis(stable_for_ms as u64))
                ),
                "not-live",
                1,
            ),
            (Ok(()), Some(reached), None) => (
                None,
                format!(
                    "reached at {}, not healthy when the timeout ({timeout}) ran out",
                    reached.rfc3339()
                ),
                "not-live",
                1,
            ),
            (Ok(()), None, _) => (
                None,
                format!("not reached when the timeout ({timeout}) ran out"),
                "not-live",
                1,
            ),
        },
    };
    Waited {
        outcome,
        reached_at: seen.reached_at.map(|t| t.rfc3339()),
        healthy_since: seen.healthy_since.map(|t| t.rfc3339()),
        commit,
        app,
        state: state.map(|s| s.as_str().to_string()),
        reason,
        later_commits: None,
        exit_code,
    }
}

/// The judge's words about a trailer's `app=` field, said of `--app`: a wait has no trailer.
fn for_the_flag(reason: &str) -> String {
    reason
        .replace(
            "check the trailer's app name (`app=<name>` or `app=<namespace>/<name>`)",
            "check --app (`<name>` or `<namespace>/<name>`)",
        )
        .replace("check the trailer's app name", "check --app")
}

/// `rev` with a leading `HEAD` or `branch` read as the fetched branch (`HEAD~2` →
/// `refs/remotes/origin/main~2`); any other revision as it is.
fn on_fetched(rev: &str, branch: &str) -> String {
    let fetched = format!("refs/remotes/origin/{branch}");
    for head in ["HEAD", branch] {
        if let Some(rest) = rev.strip_prefix(head)
            && (rest.is_empty() || rest.starts_with('~') || rest.starts_with('^'))
        {
            return format!("{fetched}{rest}");
        }
    }
    rev.to_string()
}

/// Whether the source answers for `app` now: the cut-off's one read.
async fn readable(reader: &Reader, app: &AppRef) -> Result<(), String> {
    let read = tokio::time::timeout(Duration::from_secs(30), reader.get(app))
        .await
        .map_err(|_| "no answer within 30s".to_string())?;
    match read {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(format!("{} says {app} does not exist (404)", reader.name())),
        Err(e) => Err(format!("{e:#}")),
    }
}

/// The wait's time bounds, for the answer's words.
#[derive(Clone, Copy)]
struct Bounds {
    timeout: Duration,
    stable_for_ms: i64,
    /// When the wait stopped listening for a verdict.
    limit: Duration,
    /// Who answers for the app (`Argo CD`, `the Kubernetes API`).
    source: &'static str,
}

/// What the events said so far.
#[derive(Clone, Default)]
struct Seen {
    reached_at: Option<Timestamp>,
    /// The start of the current healthy streak.
    healthy_since: Option<Timestamp>,
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(judged: Judged, seen: Seen) -> Waited {
        ask_read(judged, seen, Ok(()))
    }

    fn ask_read(judged: Judged, seen: Seen, read: Result<(), String>) -> Waited {
        answer(
            judged,
            &seen,
            read,
            "a".repeat(40),
            "web".into(),
            &Bounds {
                timeout: Duration::from_secs(900),
                stable_for_ms: 120_000,
                limit: Duration::from_secs(916),
                source: "Argo CD",
            },
        )
    }

    fn at(s: i64) -> Timestamp {
        Timestamp(s * 1000)
    }

    /// The judge's own words for a missing app, as it renders them, are said of `--app`.
    #[test]
    fn a_missing_app_is_said_of_the_flag() {
        use greenlight_core::directive::AppRef;
        use greenlight_core::reason::{NotReached, Unwatchable};
        let app = AppRef::parse("web").unwrap();
        for judged in [
            Unwatchable::AppMissing {
                app: app.clone(),
                grace_ms: 3000,
            }
            .to_string(),
            NotReached::AppMissing {
                deadline_ms: 60_000,
                app,
            }
            .to_string(),
        ] {
            let w = ask(
                Judged::Verdict(State::ErrorUnwatchable, judged.clone()),
                Seen::default(),
            );
            assert!(
                w.reason.contains("check --app") && !w.reason.contains("trailer"),
                "{judged} → {}",
                w.reason
            );
        }
    }

    #[test]
    fn head_and_the_branch_are_read_as_fetched() {
        assert_eq!(on_fetched("HEAD~1", "main"), "refs/remotes/origin/main~1");
        assert_eq!(on_fetched("main^", "main"), "refs/remotes/origin/main^");
        assert_eq!(on_fetched("main", "main"), "refs/remotes/origin/main");
        assert_eq!(on_fetched("mainline", "main"), "mainline");
        assert_eq!(on_fetched("HEADS", "main"), "HEADS");
        assert_eq!(on_fetched("1a2b3c4", "main"), "1a2b3c4");
    }

    #[test]
    fn each_verdict_has_its_exit_code() {
        let seen = Seen::default();
        let live = ask(Judged::Verdict(State::Confirmed, "ok".into()), seen.clone());
        assert_eq!((live.outcome, live.exit_code), ("live", 0));
        for s in [State::Fail, State::NotReached, State::ErrorUnwatchable] {
            let w = ask(Judged::Verdict(s, "why".into()), seen.clone());
            assert_eq!((w.outcome, w.exit_code), ("not-live", 1), "{s:?}");
            assert_eq!(w.state.as_deref(), Some(s.as_str()));
            assert_eq!(w.reason, "why");
        }
        let w = ask(Judged::Verdict(State::Inconclusive, "down".into()), seen);
        assert_eq!((w.outcome, w.exit_code), ("unobserved", 3));
    }

    /// The timeout bounds the wait: cut off with no verdict, a reached app is not live (it was
    /// observed, and not healthy and stable in time) and says where it stood; an app never
    /// seen to reach is unobserved.
    #[test]
    fn a_wait_cut_off_by_its_timeout_says_where_it_stood() {
        let streak = Seen {
            reached_at: Some(at(100)),
            healthy_since: Some(at(130)),
        };
        let w = ask(Judged::NoVerdict, streak);
        assert_eq!((w.outcome, w.exit_code, w.state), ("not-live", 1, None));
        assert!(
            w.reason.contains("healthy since 1970-01-01T00:02:10")
                && w.reason
                    .contains("the 2m window was not over when the timeout (15m) ran out"),
            "{}",
            w.reason
        );
        let unhealthy = Seen {
            reached_at: Some(at(100)),
            healthy_since: None,
        };
        let w = ask(Judged::NoVerdict, unhealthy);
        assert_eq!((w.outcome, w.exit_code), ("not-live", 1));
        assert!(
            w.reason
                .contains("not healthy when the timeout (15m) ran out"),
            "{}",
            w.reason
        );
        let w = ask(Judged::NoVerdict, Seen::default());
        assert_eq!((w.outcome, w.exit_code), ("not-live", 1));
        assert_eq!(w.reason, "not reached when the timeout (15m) ran out");
        // Argo CD unreadable at the cut-off: unobserved, whatever the events said before.
        let streak = Seen {
            reached_at: Some(at(100)),
            healthy_since: Some(at(130)),
        };
        let w = ask_read(Judged::NoVerdict, streak, Err("connection refused".into()));
        assert_eq!((w.outcome, w.exit_code), ("unobserved", 3));
        assert!(
            w.reason
                .contains("within 15m 16s, and Argo CD could not be read then: connection refused"),
            "{}",
            w.reason
        );
    }
}
