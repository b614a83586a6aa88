//! The watchdog runtime: drives the sans-IO judge with real inputs. It owns the IO the judge
//! must never do — git fetches and ancestry questions, the Argo CD stream and listings, the
//! clock, the state store and the revert executor — and it is the only place they meet.
//!
//! Event-driven: every stream update is judged as it arrives, and the loop sleeps exactly until
//! the judge's next deadline (`Engine::next_wakeup`), so no fixed polling delay sits between the
//! status that decides a verdict and the verdict. Listings every fetch interval are a safety net
//! for a stream that dies quietly, not the clock of the judgement. The periodic git fetch and
//! listing run as jobs off the loop: a hung remote delays only what it alone can tell.

use crate::clock::Clock;
use crate::output::Output;
use crate::store::{Store, Write};
use anyhow::{Result, anyhow};
use greenlight_argocd::{Application, ArgoClient, EventKind as AppEventKind};
use greenlight_core::event::Event;
use greenlight_core::judge::{
    Ancestry, CommitInfo, Effect, Engine, JudgeConfig, Observation, RevertOutcome, RevertRequest,
};
use greenlight_core::snapshot::AppKey;
use greenlight_core::time::Timestamp;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Everything `greenlight watch` was told.
#[derive(Clone)]
pub struct DaemonConfig {
    pub repo: String,
    pub branch: Option<String>,
    pub argocd_url: String,
    pub argocd_token: Option<String>,
    pub git_token: Option<greenlight_git::Secret>,
    pub git_author_name: String,
    pub git_author_email: String,
    pub state: PathBuf,
    pub data_dir: PathBuf,
    pub stable_for_ms: i64,
    pub stale_after_ms: i64,
    pub unknown_app_grace_ms: i64,
    pub fetch_interval: Duration,
    pub dry_run: bool,
    pub since: Option<String>,
    pub trailer_key: String,
    /// How long finished watches and their events stay in the state file.
    pub retain_ms: i64,
}

impl DaemonConfig {
    fn judge_config(&self, branch: &str, branch_is_default: bool) -> JudgeConfig {
        // The judge quotes the repository in reasons that are stored and shown by `status`:
        // never with the credentials a URL may carry.
        let repo = greenlight_git::redact_url(&self.repo);
        let mut j = JudgeConfig::new(&repo, branch, branch_is_default);
        j.stable_for_ms = self.stable_for_ms;
        j.stale_after_ms = self.stale_after_ms;
        j.unknown_app_grace_ms = self.unknown_app_grace_ms;
        j.dry_run = self.dry_run;
        j.trailer_key = self.trailer_key.clone();
        j
    }
}

/// An ancestry question: (commit, revision).
type Question = (String, String);

type Listing =
    Result<Vec<Result<Application, greenlight_argocd::ItemError>>, greenlight_argocd::ArgoError>;

/// The result of a slow read run off the loop, so that a hung network read never holds back a
/// deadline, a stream update or another watch.
enum JobDone {
    Fetch(Result<(String, Vec<CommitInfo>)>),
    List(Listing),
}

enum StreamMsg {
    Up,
    Event(AppEventKind, Box<Application>),
    /// A message the stream could not deliver (an `{"error":…}` line, an undecodable one).
    Bad(String),
    Down(String),
}

pub struct Daemon {
    cfg: DaemonConfig,
    out: Output,
    clock: Arc<dyn Clock>,
    engine: Engine,
    store: Store,
    repo: Arc<greenlight_git::Repo>,
    argo: ArgoClient,
    branch: String,
    tip: String,
    /// The stream connection that last delivered each app: while that connection stays up, it
    /// vouches that the app has not changed since (Argo CD streams every change).
    delivered_by: HashMap<AppKey, u64>,
    ancestry: HashMap<(String, String), bool>,
    stream_up: bool,
    /// Incremented at every (re)connection of the stream.
    stream_gen: u64,
    /// The last wake-up handled, so a moment that stays due is not handled in a loop.
    last_wake: Timestamp,
    /// The last time Argo CD answered anything (a stream line, a listing, a read). A stream
    /// whose peer vanished without closing stays "connected" for minutes (TCP keepalive); it
    /// vouches only while Argo CD has been heard from within `--stale-after`.
    last_contact: Option<Timestamp>,
    /// The next store write also clears the breaker-reset request it applies.
    clear_reset_request: bool,
}

/// Open the clone and the state, record the baseline, and print `watching <repo> <branch> from <sha>`.
pub async fn start(cfg: DaemonConfig, out: Output, clock: Arc<dyn Clock>) -> Result<Daemon> {
    let now = clock.now();
    let mut store = Store::open_or_create(&cfg.state)?;
    let auth = greenlight_git::Auth {
        token: cfg.git_token.clone(),
        username: None,
    };
    let repo_dir = cfg.data_dir.join("repo");
    let (repo, branch, default_branch) = {
        let remote = cfg.repo.clone();
        let want = cfg.branch.clone();
        tokio::task::spawn_blocking(move || -> Result<_> {
            let repo = greenlight_git::Repo::open_or_clone(&remote, &repo_dir, auth)?;
            let default = repo.remote_default_branch()?;
            let branch = want.unwrap_or_else(|| default.clone());
            Ok((repo, branch, default))
        })
        .await??
    };
    let repo = Arc::new(repo);
    store.bind(&greenlight_git::redact_url(&cfg.repo), &branch)?;
    let tip = {
        let (r, b) = (repo.clone(), branch.clone());
        tokio::task::spawn_blocking(move || r.fetch(&b)).await??
    };
    // Retention first, so that what it removes is not loaded; never before `bind`, which
    // refuses another repository's state file.
    if let Some(p) = store.prune_due(now, cfg.retain_ms)?.filter(|p| p.any()) {
        out.info(now, &p.summary());
    }
    let loaded = store.load_live()?;
    let judge = cfg.judge_config(&branch, branch == default_branch);
    let engine =
        Engine::restore(judge, loaded.live, loaded.breaker).with_finished_ids(loaded.finished_ids);

    let (from, first_start) = match (&loaded.baseline, &loaded.tip) {
        (Some(_), Some(t)) => (t.clone(), false),
        _ => {
            let base = match &cfg.since {
                Some(rev) => {
                    let (r, rev2) = (repo.clone(), rev.clone());
                    tokio::task::spawn_blocking(move || r.resolve(&rev2))
                        .await??
                        .ok_or_else(|| {
                            crate::cmd::usage(format!(
                                "--since {rev:?} is not a commit in {}",
                                greenlight_git::redact_url(&cfg.repo)
                            ))
                        })?
                }
                None => tip.clone(),
            };
            store.write(Write {
                baseline: Some(&base),
                tip: Some(&base),
                ..Write::default()
            })?;
            (base, true)
        }
    };
    if !first_start && cfg.since.is_some() {
        out.warn(
            now,
            "--since is ignored: this state file already has a baseline",
        );
    }
    let argo = ArgoClient::new(&cfg.argocd_url, cfg.argocd_token.clone())
        .map_err(|e| crate::cmd::usage(format!("--argocd-url: {e}")))?;
    out.plain(&format!(
        "watching {} {} from {}",
        greenlight_git::redact_url(&cfg.repo),
        branch,
        from
    ));
    Ok(Daemon {
        cfg,
        out,
        clock,
        engine,
        store,
        repo,
        argo,
        branch,
        tip: from,
        delivered_by: HashMap::new(),
        ancestry: HashMap::new(),
        stream_up: false,
        stream_gen: 0,
        last_wake: Timestamp(i64::MIN),
        last_contact: None,
        clear_reset_request: false,
    })
}

impl Daemon {
    /// Run until `shutdown` resolves.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) -> Result<()> {
        let now = self.clock.now();
        let effects = self.engine.resume(now);
        self.apply(effects, None).await?;

        let (tx, mut rx) = mpsc::channel::<StreamMsg>(256);
        let stream_task = tokio::spawn(stream_loop(self.argo.clone(), tx));
        // The timer's first tick is immediate: the first fetch and listing start at once, as
        // jobs like every later one, so that a hung remote never holds the loop.
        let mut fetch_timer = tokio::time::interval(self.cfg.fetch_interval);
        fetch_timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // At most one fetch and one listing in flight; their results come back on `jobs`.
        let (jobs_tx, mut jobs) = mpsc::channel::<JobDone>(2);
        let (mut fetching, mut listing) = (false, false);
        // When the fetch in flight started: git has no timeout of its own on a stalled https
        // remote, and a fetch that never returns must not stop commit processing quietly.
        let mut fetch_since = self.clock.now();
        let mut stuck_warned = false;
        tokio::pin!(shutdown);
        let result = loop {
            let sleep = match self.engine.next_wakeup_after(self.last_wake) {
                Some(t) => Duration::from_millis(t.ms_since(self.clock.now()).max(0) as u64),
                None => Duration::from_secs(3600),
            };
            tokio::select! {
                _ = &mut shutdown => break Ok(()),
                msg = rx.recv() => {
                    let Some(msg) = msg else { break Err(anyhow!("the Argo CD stream task ended")) };
                    if let Err(e) = self.on_stream(msg).await { break Err(e) }
                }
                _ = fetch_timer.tick() => {
                    if let Err(e) = self.breaker_reset_requested().await { break Err(e) }
                    let now = self.clock.now();
                    // Housekeeping: a failed prune is tried again an hour later; judging goes on.
                    match self.store.prune_due(now, self.cfg.retain_ms) {
                        Ok(Some(p)) if p.any() => self.out.info(now, &p.summary()),
                        Ok(_) => {}
                        Err(e) => self.out.warn(now, &format!("pruning the state file failed: {e:#}")),
                    }
                    let stuck_after = self.cfg.fetch_interval.as_millis() as i64 * 10;
                    if fetching && !stuck_warned && now.ms_since(fetch_since) > stuck_after {
                        stuck_warned = true;
                        self.out.warn(now, &format!(
                            "fetching {} has not returned for {} s: new commits are not seen until it does",
                            self.branch, now.ms_since(fetch_since) / 1000
                        ));
                    }
                    if !fetching {
                        fetching = true;
                        fetch_since = now;
                        stuck_warned = false;
                        let job = self.fetch_job();
                        let tx = jobs_tx.clone();
                        tokio::spawn(async move { let _ = tx.send(JobDone::Fetch(job.await)).await; });
                    }
                    if !listing {
                        listing = true;
                        let argo = self.argo.clone();
                        let tx = jobs_tx.clone();
                        tokio::spawn(async move { let _ = tx.send(JobDone::List(argo.list().await)).await; });
                    }
                }
                Some(done) = jobs.recv() => {
                    let r = match done {
                        JobDone::Fetch(fetched) => { fetching = false; self.on_fetched(fetched).await }
                        JobDone::List(items) => { listing = false; self.on_listing(items).await }
                    };
                    if let Err(e) = r { break Err(e) }
                }
                _ = tokio::time::sleep(sleep) => {
                    // Updates already received are judged before the stream vouches for
                    // anything: a Degraded update (or a lost stream) waiting in the channel
                    // must not be vouched over.
                    let mut drained = Ok(());
                    while let Ok(msg) = rx.try_recv() {
                        drained = self.on_stream(msg).await;
                        if drained.is_err() { break }
                    }
                    if let Err(e) = drained { break Err(e) }
                    if let Err(e) = self.wake().await { break Err(e) }
                }
            }
        };
        stream_task.abort();
        result
    }

    /// `greenlight breaker reset` leaves a request while the daemon runs; the daemon is the
    /// breaker's only writer then. The request is cleared in the same transaction that closes
    /// the breaker, so a daemon that dies in between finds it again at its next start.
    async fn breaker_reset_requested(&mut self) -> Result<()> {
        if self.store.breaker_reset_requested()? {
            let now = self.clock.now();
            let effects = self.engine.reset_breaker(now);
            self.clear_reset_request = true;
            self.apply(effects, None).await?;
        }
        Ok(())
    }

    async fn on_stream(&mut self, msg: StreamMsg) -> Result<()> {
        let now = self.clock.now();
        if !matches!(msg, StreamMsg::Down(_)) {
            self.last_contact = Some(now);
        }
        match msg {
            StreamMsg::Up => {
                self.stream_up = true;
                self.stream_gen += 1;
                self.out.info(now, "Argo CD application stream connected");
            }
            StreamMsg::Down(why) => {
                if self.stream_up {
                    self.out.warn(
                        now,
                        &format!("Argo CD application stream lost: {why}; reconnecting"),
                    );
                }
                self.stream_up = false;
            }
            StreamMsg::Bad(why) => {
                // The skipped update may be any app's: until each app is delivered again, the
                // stream vouches for none (listings keep observing them meanwhile).
                self.delivered_by.clear();
                self.out
                    .warn(now, &format!("Argo CD stream message skipped: {why}"))
            }
            StreamMsg::Event(AppEventKind::Deleted, app) => {
                let (ns, name) = (app.metadata.namespace.clone(), app.metadata.name.clone());
                self.delivered_by.remove(&AppKey {
                    namespace: ns.clone(),
                    name: name.clone(),
                });
                let effects = self.engine.observe(
                    Observation::Absent {
                        namespace: Some(&ns),
                        name: &name,
                    },
                    &Ancestry::default(),
                    now,
                );
                self.apply(effects, None).await?;
            }
            StreamMsg::Event(_, app) => self.on_app(&app, true).await?,
        }
        Ok(())
    }

    fn watched(&self, ns: &str, name: &str) -> bool {
        self.engine
            .watches()
            .iter()
            .any(|w| !w.state.is_terminal() && w.app.matches(ns, name))
    }

    /// One app update: reduce it, answer the judge's ancestry questions, judge.
    async fn on_app(&mut self, app: &Application, from_stream: bool) -> Result<()> {
        let (ns, name) = (app.metadata.namespace.clone(), app.metadata.name.clone());
        let key = AppKey {
            namespace: ns.clone(),
            name: name.clone(),
        };
        // The stream vouches for an app only from an update the judge actually saw: an update
        // dropped below (no resource tree) must not let the previous observation be extended.
        if from_stream {
            self.delivered_by.remove(&key);
        }
        if !self.watched(&ns, &name) {
            if from_stream {
                self.delivered_by.insert(key, self.stream_gen);
            }
            return Ok(());
        }
        let tree = if greenlight_argocd::needs_resource_tree(app) {
            match self.argo.resource_tree(&ns, &name).await {
                Ok(t) => t,
                Err(e) => {
                    let now = self.clock.now();
                    self.out.warn(
                        now,
                        &format!("resource tree of {ns}/{name} unavailable: {e}"),
                    );
                    // Without per-resource health the observation is incomplete: do not judge on it.
                    return Ok(());
                }
            }
        } else {
            None
        };
        let repo = repo_spelling(&self.cfg.repo, app);
        let snap = greenlight_argocd::snapshot(app, tree.as_ref(), repo);
        let questions = self.engine.reach_questions(&snap);
        let ancestry = self.answer(questions).await?;
        let now = self.clock.now();
        let effects = self
            .engine
            .observe(Observation::Present(&snap), &ancestry, now);
        if from_stream {
            self.delivered_by.insert(key, self.stream_gen);
        }
        self.apply(effects, None).await
    }

    /// Answer ancestry questions with git, caching answers (ancestry never changes). An unknown
    /// revision triggers one fetch; still unknown, it is "not reached" for now and asked again later.
    /// A git failure (the remote unreachable for a moment) leaves the questions unanswered, as
    /// unknown revisions are: it must not stop the daemon.
    async fn answer(&mut self, questions: Vec<(String, String)>) -> Result<Ancestry> {
        let mut answers = Ancestry::default();
        let mut unknown = Vec::new();
        for q in questions {
            match self.ancestry.get(&q) {
                Some(v) => {
                    answers.0.insert(q, *v);
                }
                None => unknown.push(q),
            }
        }
        if unknown.is_empty() {
            return Ok(answers);
        }
        let repo = self.repo.clone();
        let branch = self.branch.clone();
        let resolved =
            tokio::task::spawn_blocking(move || -> Result<Vec<(Question, Option<bool>)>> {
                let mut out = Vec::new();
                let mut fetched = false;
                for (c, r) in unknown {
                    let mut v = repo.is_ancestor(&c, &r)?;
                    if v.is_none() && !fetched {
                        fetched = true;
                        repo.fetch(&branch)?;
                        v = repo.is_ancestor(&c, &r)?;
                    }
                    out.push(((c, r), v));
                }
                Ok(out)
            })
            .await?;
        let resolved = match resolved {
            Ok(r) => r,
            Err(e) => {
                let now = self.clock.now();
                self.out.warn(
                    now,
                    &format!("ancestry questions left unanswered for now: {e:#}"),
                );
                return Ok(answers);
            }
        };
        for (q, v) in resolved {
            if let Some(v) = v {
                self.ancestry.insert(q.clone(), v);
                answers.0.insert(q, v);
            }
        }
        Ok(answers)
    }

    /// A complete listing: refresh every app and tell the judge which watched apps are absent.
    /// Argo CD failures are warnings; a state-store failure is returned, because the judge's
    /// changes it failed to persist (and any revert they asked for) must not be dropped quietly.
    async fn on_listing(&mut self, items: Listing) -> Result<()> {
        let now = self.clock.now();
        let items = match items {
            Ok(items) => {
                self.last_contact = Some(now);
                items
            }
            Err(e) => {
                self.out
                    .warn(now, &format!("listing Argo CD applications failed: {e}"));
                return Ok(());
            }
        };
        let mut present = Vec::new();
        for item in items {
            match item {
                Ok(app) => {
                    present.push((app.metadata.namespace.clone(), app.metadata.name.clone()));
                    self.on_app(&app, false).await?;
                }
                Err(e) => self.out.warn(
                    now,
                    &format!("an Application in the listing could not be read: {e}"),
                ),
            }
        }
        let missing: Vec<(Option<String>, String)> = self
            .engine
            .watches()
            .iter()
            .filter(|w| !w.state.is_terminal())
            .filter(|w| !present.iter().any(|(ns, n)| w.app.matches(ns, n)))
            .map(|w| (w.app.namespace.clone(), w.app.name.clone()))
            .collect();
        for (ns, name) in missing {
            let now = self.clock.now();
            let effects = self.engine.observe(
                Observation::Absent {
                    namespace: ns.as_deref(),
                    name: &name,
                },
                &Ancestry::default(),
                now,
            );
            self.apply(effects, None).await?;
        }
        Ok(())
    }

    /// A deadline or window end: extend the observations the connected stream vouches for, then tick.
    async fn wake(&mut self) -> Result<()> {
        let now = self.clock.now();
        let heard_lately = self
            .last_contact
            .is_some_and(|t| now.ms_since(t) <= self.cfg.stale_after_ms);
        if self.stream_up && heard_lately {
            let vouched: Vec<AppKey> = self
                .delivered_by
                .iter()
                .filter(|(_, g)| **g == self.stream_gen)
                .filter(|(k, _)| self.watched(&k.namespace, &k.name))
                .map(|(k, _)| k.clone())
                .collect();
            for key in vouched {
                let effects = self.engine.vouch(&key, now);
                self.apply(effects, None).await?;
            }
        }
        self.last_wake = now;
        let effects = self.engine.tick(now);
        self.apply(effects, None).await
    }

    /// The git side of a fetch, runnable off the loop: the new tip and the commits since the
    /// last processed tip (which only `on_fetched` moves, one fetch at a time).
    fn fetch_job(
        &self,
    ) -> impl std::future::Future<Output = Result<(String, Vec<CommitInfo>)>> + Send + 'static {
        let repo = self.repo.clone();
        let (branch, last) = (self.branch.clone(), self.tip.clone());
        let job = tokio::task::spawn_blocking(move || -> Result<(String, Vec<CommitInfo>)> {
            let tip = repo.fetch(&branch)?;
            if tip == last {
                return Ok((tip, Vec::new()));
            }
            let mut commits = Vec::new();
            for sha in repo.new_commits(Some(&last), &tip)? {
                let data = repo.commit(&sha)?;
                let changed_paths = repo.changed_paths(&sha)?;
                commits.push(CommitInfo {
                    sha: data.sha,
                    parents: data.parents,
                    subject: data.subject,
                    message: data.message,
                    changed_paths,
                });
            }
            Ok((tip, commits))
        });
        async move { job.await? }
    }

    /// A fetch returned: every new commit, in topological order, goes to the judge; the new
    /// tip is stored in the same transaction as the watches it started.
    async fn on_fetched(&mut self, fetched: Result<(String, Vec<CommitInfo>)>) -> Result<()> {
        let (tip, commits) = match fetched {
            Ok(v) => v,
            Err(e) => {
                let now = self.clock.now();
                self.out
                    .warn(now, &format!("fetching {} failed: {e:#}", self.branch));
                return Ok(());
            }
        };
        if tip == self.tip {
            return Ok(());
        }
        let mut effects = Vec::new();
        for info in commits {
            let questions = self.engine.merge_questions(&info);
            let ancestry = self.answer(questions).await?;
            let now = self.clock.now();
            effects.extend(self.engine.commit_arrived(&info, &ancestry, now));
        }
        self.tip = tip.clone();
        self.apply(effects, Some(&tip)).await?;
        // New watches are judged at once against a fresh read of their apps.
        self.refresh_watched().await
    }

    /// Read every watched app afresh (with its resource tree) and judge it; 404 is absence.
    async fn refresh_watched(&mut self) -> Result<()> {
        let mut refs: Vec<(Option<String>, String)> = self
            .engine
            .watches()
            .iter()
            .filter(|w| !w.state.is_terminal())
            .map(|w| (w.app.namespace.clone(), w.app.name.clone()))
            .collect();
        refs.sort();
        refs.dedup();
        for (ns, name) in refs {
            let now = self.clock.now();
            match self.argo.get(ns.as_deref().unwrap_or(""), &name).await {
                Ok(Some(app)) => {
                    self.last_contact = Some(now);
                    self.on_app(&app, false).await?
                }
                Ok(None) => {
                    self.last_contact = Some(now);
                    let effects = self.engine.observe(
                        Observation::Absent {
                            namespace: ns.as_deref(),
                            name: &name,
                        },
                        &Ancestry::default(),
                        now,
                    );
                    self.apply(effects, None).await?;
                }
                Err(e) => self
                    .out
                    .warn(now, &format!("reading Application {name} failed: {e}")),
            }
        }
        Ok(())
    }

    /// Persist, then announce, then act: the store first so nothing printed or pushed is lost.
    async fn apply(&mut self, effects: Vec<Effect>, tip: Option<&str>) -> Result<()> {
        let mut pending = effects;
        let mut tip = tip.map(str::to_string);
        while !pending.is_empty() || tip.is_some() {
            let (watches, breaker) = self.engine.take_dirty();
            let events: Vec<Event> = pending
                .iter()
                .filter_map(|e| match e {
                    Effect::Emit(ev) => Some(ev.clone()),
                    Effect::Revert(_) => None,
                })
                .collect();
            self.store.write(Write {
                watches: &watches,
                breaker: breaker.as_ref(),
                events: &events,
                tip: tip.as_deref(),
                baseline: None,
                clear_breaker_reset_request: self.clear_reset_request,
            })?;
            self.clear_reset_request = false;
            tip = None;
            for e in &events {
                self.out.event(e);
            }
            let reverts: Vec<RevertRequest> = pending
                .into_iter()
                .filter_map(|e| match e {
                    Effect::Revert(r) => Some(r),
                    Effect::Emit(_) => None,
                })
                .collect();
            pending = Vec::new();
            for r in reverts {
                let outcome = self.revert(&r).await;
                let now = self.clock.now();
                pending.extend(self.engine.revert_finished(&r.watch_id, outcome, now));
            }
        }
        Ok(())
    }

    async fn revert(&mut self, r: &RevertRequest) -> RevertOutcome {
        let repo = self.repo.clone();
        if self.cfg.dry_run {
            // A revert decided before a restart in dry-run (W13: never push): adopt one that
            // reached the branch before the crash, push nothing.
            let (commit, branch) = (r.commit.clone(), self.branch.clone());
            let found = tokio::task::spawn_blocking(move || -> Result<Option<String>> {
                let tip = repo.fetch(&branch)?;
                Ok(repo.find_revert_of(&commit, &commit, &tip)?)
            })
            .await;
            return match found {
                Ok(Ok(Some(revert))) => RevertOutcome::Adopted { revert },
                Ok(Ok(None)) => RevertOutcome::Failed {
                    message: format!(
                        "dry-run: the revert of {} decided before the restart was not pushed; revert it by hand if it is still wanted",
                        r.commit
                    ),
                },
                Ok(Err(e)) => RevertOutcome::Failed {
                    message: format!("dry-run: looking for an existing revert failed: {e:#}"),
                },
                Err(e) => RevertOutcome::Failed {
                    message: format!("the revert task failed: {e}"),
                },
            };
        }
        let req = greenlight_git::RevertRequest {
            commit: r.commit.clone(),
            branch: self.branch.clone(),
            reason: r.reason.clone(),
            author_name: self.cfg.git_author_name.clone(),
            author_email: self.cfg.git_author_email.clone(),
            max_attempts: 5,
        };
        let result = tokio::task::spawn_blocking(move || repo.revert_and_push(&req)).await;
        match result {
            Ok(Ok(greenlight_git::RevertOutcome::Pushed { revert, .. })) => {
                RevertOutcome::Pushed { revert }
            }
            Ok(Ok(greenlight_git::RevertOutcome::Adopted { revert })) => {
                RevertOutcome::Adopted { revert }
            }
            Ok(Ok(greenlight_git::RevertOutcome::Conflict { message, .. })) => {
                RevertOutcome::Failed {
                    message: format!("conflict: {message}"),
                }
            }
            Ok(Ok(greenlight_git::RevertOutcome::NothingToRevert { message })) => {
                RevertOutcome::Failed {
                    message: format!("nothing to revert: {message}"),
                }
            }
            Ok(Err(e)) => RevertOutcome::Failed {
                message: format!("{e}"),
            },
            Err(e) => RevertOutcome::Failed {
                message: format!("the revert task failed: {e}"),
            },
        }
    }
}

/// The spelling of the watched repository to recognize it in `app`'s sources with. URLs are
/// compared after normalization, which cannot know that `./origin.git` and `/srv/origin.git`
/// are one local repository: when the watched repository is a local path and one of the app's
/// sources is a local path to the same directory (the sandbox reports `--repo` as given),
/// that source's spelling is used. Real Argo CD never reports a relative path, so for it this
/// is the given `--repo`.
pub(crate) fn repo_spelling<'a>(watched: &'a str, app: &'a Application) -> &'a str {
    let Some(ours) = local_repo_dir(watched) else {
        return watched;
    };
    let spec = &app.spec;
    spec.source
        .iter()
        .chain(spec.sources.iter())
        .map(|s| s.repo_url.as_str())
        .find(|u| local_repo_dir(u).is_some_and(|p| p == ours))
        .unwrap_or(watched)
}

/// The canonical directory of a local repository URL or path; `None` for network URLs.
fn local_repo_dir(url: &str) -> Option<PathBuf> {
    let path = url.strip_prefix("file://").unwrap_or(url);
    if path.is_empty() || path.contains("://") {
        return None;
    }
    // scp-style `host:org/r` is a network URL.
    if let Some((host, _)) = path.split_once(':')
        && !host.contains('/')
    {
        return None;
    }
    std::fs::canonicalize(path).ok()
}

/// Keep one stream open, reconnecting with a bounded back-off.
async fn stream_loop(argo: ArgoClient, tx: mpsc::Sender<StreamMsg>) {
    use futures_util::StreamExt;
    let mut backoff = Duration::from_millis(250);
    loop {
        match argo.stream().await {
            Ok(stream) => {
                if tx.send(StreamMsg::Up).await.is_err() {
                    return;
                }
                let mut stream = std::pin::pin!(stream);
                let why = loop {
                    match stream.next().await {
                        Some(Ok(ev)) => {
                            // Only a stream that delivers resets the back-off: one that is
                            // accepted and closed at once is retried ever more slowly.
                            backoff = Duration::from_millis(250);
                            if tx
                                .send(StreamMsg::Event(ev.kind, Box::new(ev.application)))
                                .await
                                .is_err()
                            {
                                return;
                            }
                        }
                        Some(Err(e)) => {
                            if tx.send(StreamMsg::Bad(e.to_string())).await.is_err() {
                                return;
                            }
                        }
                        None => break "the stream ended".to_string(),
                    }
                };
                if tx.send(StreamMsg::Down(why)).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                if tx.send(StreamMsg::Down(e.to_string())).await.is_err() {
                    return;
                }
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judge_never_holds_the_credentials_of_the_repo_url() {
        let cfg = DaemonConfig {
            repo: "https://deploy-bot:s3cret-token@git.example.com/platform/deploy.git".into(),
            branch: None,
            argocd_url: "http://127.0.0.1:1".into(),
            argocd_token: None,
            git_token: None,
            git_author_name: "g".into(),
            git_author_email: "g@example.com".into(),
            state: PathBuf::from("s.db"),
            data_dir: PathBuf::from("s.db.d"),
            stable_for_ms: 1,
            stale_after_ms: 1,
            unknown_app_grace_ms: 1,
            fetch_interval: Duration::from_secs(1),
            dry_run: false,
            since: None,
            trailer_key: "Nav-Watchdog".into(),
            retain_ms: 1,
        };
        // The judge quotes its repository in reasons (stored, shown by `status`).
        let j = cfg.judge_config("main", true);
        assert!(!j.repo.contains("s3cret-token"), "{}", j.repo);
        assert!(
            j.repo.contains("git.example.com/platform/deploy"),
            "{}",
            j.repo
        );
    }
}
