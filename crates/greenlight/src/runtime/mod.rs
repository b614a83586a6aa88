//! The watchdog runtime: drives the sans-IO judge with real inputs. It owns the order in which
//! the judge hears things and what happens after each step — persist, announce, act — and it
//! never waits on the network or git itself: the Application source, the repository and the
//! revert executor ([`seams`]) do their IO as jobs whose results come back as inputs.
//!
//! Event-driven: every source message is judged as it arrives, in order, and the loop sleeps
//! exactly until the judge's next deadline (`Engine::next_wakeup_after`), so no polling delay
//! sits between the status that decides a verdict and the verdict. Listings every fetch
//! interval are a safety net for a stream that dies quietly, not the clock of the judgement.
//!
//! Ordering: judge inputs wait in one queue. An observation whose reach needs git (is the
//! commit an ancestor of the synced revision?) holds the queue, and the time-driven verdicts
//! behind it, until the answer comes back or `--stale-after` passes (then unanswered is "not
//! reached yet"): the judge never hears a later input, or a later instant, before an earlier one.
//!
//! `watch --once` ([`Runtime::once`]) is one cycle of this same runtime with dry-run forced and
//! source problems made fatal.

pub mod config;
mod confirm;
pub mod git;
mod git_lane;
mod inputs;
mod once;
pub mod one;
pub mod seams;

pub use config::DaemonConfig;
pub use once::{OnceSummary, once};

use confirm::Confirm;
use git_lane::{FetchWanted, GitLane, JobDone};
use inputs::{Inputs, Step, Work};
use once::OnceCycle;

use crate::clock::Clock;
use crate::metrics::{Gap, Metrics};
use crate::output::Output;
use crate::store::{SqliteStore, Store, Write};
use anyhow::{Result, anyhow};
use greenlight_core::commit::CommitId;
use greenlight_core::directive::AppRef;
use greenlight_core::event::Event;
use greenlight_core::judge::{
    Ancestry, CommitInfo, Effect, Engine, Observation, RevertOutcome, RevertRequest,
};
use greenlight_core::snapshot::AppKey;
use greenlight_core::source::{Freshness, Origin, Problem, SourceMsg};
use greenlight_core::time::Timestamp;
use greenlight_core::watch::RevertProposal;
use seams::{Context, Jobs, Repository as _, Source, StartupNote};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};

/// How many commit ids the runtime remembers as handed to the judge.
const DELIVERED_KEPT: usize = 100_000;

/// The runtime: the judge, the store and the seams, and the order of things.
pub struct Runtime {
    cfg: DaemonConfig,
    ctx: Context,
    store: Box<dyn Store>,
    engine: Engine,
    branch: String,
    /// The last tip whose commits were all handed to the judge.
    tip: String,
    /// The commits handed to the judge by this process (bounded): a fetch's commits that an
    /// ancestry job's fetch already delivered are dropped, so the tip never goes back.
    delivered: std::collections::HashSet<String>,
    deliveries: mpsc::Receiver<SourceMsg>,
    freshness: Freshness,
    /// The queue of judge inputs and the git answers it waits for (`inputs.rs`).
    inputs: Inputs,
    /// Git's jobs: fetches, ancestry, reverts (`git_lane.rs`).
    git: GitLane,
    listing: Option<u64>,
    /// When the last complete listing answered: while the stream vouches, the next safety-net
    /// listing is due `--resync-interval` after it ([`Runtime::list_if_due`]).
    listed_at: Option<Timestamp>,
    /// What the stream vouched for when it last stopped vouching: per app, that moment and the
    /// version (`note_vouching_end`); taken by the app's next delivery.
    vouched_before_lapse: HashMap<AppKey, (Timestamp, Option<u64>)>,
    /// The last lapse noted, so that it is noted once.
    lapse_noted: Option<Timestamp>,
    /// The turn's decisions, written together at its end.
    staged: Staged,
    /// Confirmation reads (`confirm.rs`).
    confirm: Confirm,
    /// The last wake-up handled, so a moment that stays due is not handled in a loop.
    last_wake: Timestamp,
    /// The next store write also clears the breaker-reset request it applies.
    clear_reset_request: bool,
    /// The apps last given to the source as watched.
    watched: Vec<AppRef>,
    /// What a `watch --once` cycle collects (`once.rs`).
    once: OnceCycle,
    /// What `/metrics` and the probes report (`crate::metrics`); written, never read back.
    metrics: Arc<Metrics>,
    /// The source's short name, the `source` label of its metrics.
    source_label: String,
    /// The listing asked for at the source's last connection: a complete answer to it, or to a
    /// later one, makes the watchdog ready (`/readyz`).
    connected_listing: Option<u64>,
}

/// What a loop turn's steps decided, not yet written ([`Runtime::flush`]).
#[derive(Default)]
struct Staged {
    events: Vec<Event>,
    reverts: Vec<RevertRequest>,
    withdrawals: Vec<(RevertProposal, String)>,
    verifies: Vec<(String, AppRef, u64)>,
    tip: Option<String>,
    /// A step was applied this turn: the watches' gauges are counted again at the flush.
    applied: bool,
}

/// What [`Runtime::start_with`] needs besides the context.
pub struct Start {
    pub branch: String,
    pub branch_is_default: bool,
    pub tip: String,
    pub store: Box<dyn Store>,
    pub deliveries: mpsc::Receiver<SourceMsg>,
    /// Print the `watching <repo> <branch> from <sha>` line.
    pub announce: bool,
    /// Told that start-up finished (`/startupz`) before the `watching` line is printed, so
    /// that whoever reads the line finds the probe ready.
    pub started: Option<Arc<Metrics>>,
}

/// Open the clone and the state, record the baseline, and print `watching <repo> <branch> from <sha>`;
/// the Applications come from `source`, the caller's choice.
pub async fn start(
    cfg: DaemonConfig,
    source: Source,
    out: Output,
    clock: Arc<dyn Clock>,
) -> Result<Runtime> {
    let metrics = Arc::new(Metrics::new(clock.clone()));
    start_metered(cfg, source, out, clock, metrics).await
}

/// [`start`], reporting to `metrics` (`watch --listen`): `/startupz` turns ready when this
/// returns a runtime.
pub async fn start_metered(
    cfg: DaemonConfig,
    source: Source,
    out: Output,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
) -> Result<Runtime> {
    let store = Box::new(SqliteStore::open_or_create(&cfg.state)?);
    start_with_store(cfg, store, source, out, clock, metrics).await
}

/// [`start_metered`] on a store the caller opened (`watch --store kube`).
pub async fn start_with_store(
    cfg: DaemonConfig,
    mut store: Box<dyn Store>,
    source: Source,
    out: Output,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
) -> Result<Runtime> {
    metrics.runtime_configured(
        &crate::metrics::source_label(source.app.name()),
        cfg.fetch_interval,
    );
    let (repo, branch, branch_is_default, cleared) =
        open_repo(&cfg, cfg.data_dir.join("repo")).await?;
    if let Some(note) = greenlight_git::stale_locks_note(&cleared) {
        out.warn(clock.now(), &note);
    }
    store.bind(&cfg.repo.redacted(), &branch)?;
    let tip = {
        let (r, b) = (repo.clone(), branch.clone());
        tokio::task::spawn_blocking(move || seams::Repository::fetch(&*r, &b)).await??
    };
    let Source { app, deliveries } = source;
    let ctx = Context {
        source: app,
        repo: repo.clone(),
        reverter: repo,
        clock,
        out,
        jobs: Jobs::Blocking,
    };
    let start = Start {
        branch: branch.clone(),
        branch_is_default,
        tip,
        store,
        deliveries,
        announce: true,
        started: Some(metrics.clone()),
    };
    let runtime = Runtime::start_with(cfg, ctx, start)
        .await?
        .with_metrics(metrics);
    runtime.metrics.started();
    Ok(runtime)
}

/// Clone (or open) the watched repository and fetch it: what a standby does before it may lead,
/// so that taking over costs a fetch, not a clone.
/// What it says: the git lock files a killed process left, removed (`Repo::clear_stale_locks`).
pub async fn warm_clone(cfg: &DaemonConfig) -> Result<Option<String>> {
    let (repo, branch, _, cleared) = open_repo(cfg, cfg.data_dir.join("repo")).await?;
    tokio::task::spawn_blocking(move || seams::Repository::fetch(&*repo, &branch)).await??;
    Ok(greenlight_git::stale_locks_note(&cleared))
}

/// Clone (or open) the watched repository and settle the branch: the given one or the remote's HEAD,
/// and whether it is the remote's default branch; and the stale git lock files removed from the
/// clone (the caller holds the data directory's lock: the clone is this process's alone).
async fn open_repo(
    cfg: &DaemonConfig,
    dir: std::path::PathBuf,
) -> Result<(Arc<git::GitRepository>, String, bool, Vec<String>)> {
    let auth = greenlight_git::Auth {
        token: cfg.git_token.clone(),
        username: None,
    };
    let remote = cfg.repo.expose().to_string();
    let want = cfg.branch.clone();
    let (name, email) = (cfg.git_author_name.clone(), cfg.git_author_email.clone());
    let proposing = cfg.revert_via_pull_request.clone();
    tokio::task::spawn_blocking(move || -> Result<_> {
        let repo = greenlight_git::Repo::open_or_clone(&remote, &dir, auth)?;
        let cleared = repo.clear_stale_locks()?;
        let mut repo = git::GitRepository::new(repo, &name, &email);
        if let Some(pr) = proposing {
            repo = repo.proposing(pr);
        }
        let (branch, is_default) = match want {
            // A remote whose HEAD names no branch (a bare repository made with `git init
            // --bare` and pushed another branch) has no default: an app that tracks `HEAD`
            // then tracks nothing this branch proves, so it is not this branch's.
            Some(b) => {
                let is_default = repo.remote_default_branch().ok().is_some_and(|d| d == b);
                (b, is_default)
            }
            None => (repo.remote_default_branch()?, true),
        };
        Ok((Arc::new(repo), branch, is_default, cleared))
    })
    .await?
}

impl Runtime {
    /// Start on any seams: load the state, settle the baseline (the first start's `--since`, or
    /// the tip), and print the `watching` line.
    pub async fn start_with(cfg: DaemonConfig, mut ctx: Context, s: Start) -> Result<Runtime> {
        let now = ctx.clock.now();
        let mut store = s.store;
        // Retention first, so that what it removes is not loaded; the caller has bound the
        // store to its repository, which refuses another repository's state file.
        if let Some(p) = store.prune_due(now, cfg.retain_ms)?.filter(|p| p.any()) {
            ctx.out.info(now, &p.summary());
        }
        let reopen_since = (cfg.reopen_horizon_ms > 0).then(|| now.0 - cfg.reopen_horizon_ms);
        let loaded = store.load_resume(reopen_since)?;
        let judge = cfg.judge_config(&s.branch, s.branch_is_default);
        let mut engine = Engine::restore(judge, loaded.live, loaded.breaker)
            .with_finished_ids(loaded.finished_ids);
        engine.restore_idle(loaded.idle);
        engine.restore_arrived(loaded.arrived);
        engine.restore_tapes(loaded.tapes);
        let from = match (&loaded.baseline, &loaded.tip) {
            (Some(_), Some(t)) => {
                if cfg.since.is_some() {
                    ctx.out.warn(
                        now,
                        "--since is ignored: this state file already has a baseline",
                    );
                }
                t.clone()
            }
            _ => {
                let base = match &cfg.since {
                    Some(rev) => resolve_since(&ctx, &cfg, rev).await?,
                    None => s.tip.clone(),
                };
                store.write(Write {
                    baseline: Some(&base),
                    tip: Some(&base),
                    ..Write::default()
                })?;
                base
            }
        };
        // Every commit after `from` reaches the judge as it arrives; those up to it were on
        // the branch before (the batch of a sync is worked out from there).
        if let Ok(tip) = CommitId::parse(&from) {
            engine.known_tip(tip);
        }
        if let Some(m) = &s.started {
            m.started();
        }
        if s.announce {
            ctx.out
                .plain(&format!("watching {} {} from {}", cfg.repo, s.branch, from));
        }
        ctx.source.set_stale_after(cfg.stale_after_ms);
        for note in ctx.source.startup_notes(cfg.stale_after_ms) {
            match note {
                StartupNote::Warn(w) => ctx.out.warn(now, &w),
                StartupNote::Info(i) if s.announce => ctx.out.info(now, &i),
                StartupNote::Info(_) => {}
            }
        }
        let stale_after_ms = cfg.stale_after_ms;
        let mut inputs = Inputs::new();
        // A wait's commit is handed to the judge after the app's first complete listing (at
        // most --stale-after after the start): its baseline is the app before the commit.
        if cfg.asked.is_some() {
            inputs.hold_commits_until = Some(now.plus_ms(stale_after_ms));
        }
        let source_label = crate::metrics::source_label(ctx.source.name());
        let metrics = Arc::new(Metrics::new(ctx.clock.clone()));
        metrics.runtime_configured(&source_label, cfg.fetch_interval);
        metrics.watches_loaded(engine.watches(), engine.breaker().open);
        Ok(Runtime {
            cfg,
            ctx,
            store,
            engine,
            branch: s.branch,
            tip: from,
            delivered: std::collections::HashSet::new(),
            deliveries: s.deliveries,
            freshness: Freshness::new(stale_after_ms),
            inputs,
            git: GitLane::new(),
            listing: None,
            listed_at: None,
            vouched_before_lapse: HashMap::new(),
            lapse_noted: None,
            staged: Staged::default(),
            confirm: Confirm::new(),
            last_wake: Timestamp(i64::MIN),
            clear_reset_request: false,
            watched: Vec::new(),
            once: OnceCycle::new(),
            metrics,
            source_label,
            connected_listing: None,
        })
    }

    /// Report to `metrics` from now on (`watch --listen`'s): the watches loaded at start are
    /// known there, not counted as verdicts again.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Runtime {
        metrics.runtime_configured(&self.source_label, self.cfg.fetch_interval);
        metrics.watches_loaded(self.engine.watches(), self.engine.breaker().open);
        self.metrics = metrics;
        self
    }

    /// What this runtime reports to (`/metrics`, the probes).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The judge, for tests and the self-check's summary.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Run until `shutdown` resolves.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) -> Result<()> {
        let now = self.now();
        let effects = self.engine.resume(now);
        self.apply(effects, None)?;
        self.flush()?;
        self.ctx.source.start_stream();
        // The timer's first tick is immediate: the first fetch and listing start at once, as
        // jobs like every later one, so that a hung remote never holds the loop.
        let mut fetch_timer = tokio::time::interval(self.cfg.fetch_interval);
        fetch_timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Push hooks (`crate::hooks`) ask for a fetch between ticks.
        let nudge = self.cfg.fetch_nudge.clone();
        if let Some(n) = &nudge {
            n.set_branch(&self.branch);
        }
        let nudged = || async {
            match &nudge {
                Some(n) => n.nudged().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(shutdown);
        loop {
            self.metrics.loop_turned();
            let now = self.now();
            let due = self.engine.next_wakeup_after(self.last_wake);
            let wake_in = match due {
                Some(t) => self.until(t),
                None => Duration::from_secs(3600),
            };
            let ahead_in = due
                .filter(|d| {
                    self.confirm.confirming.is_none() && self.confirm.confirmed_ahead != Some(*d)
                })
                .map(|d| self.until(d.plus_ms(-self.confirm_lead_ms())));
            let give_up_in = self
                .inputs
                .asking
                .as_ref()
                .map(|a| self.until(a.give_up_at));
            // The moment the stream stops vouching unless it is heard from: listings observe
            // from then on, the first at once (`list_if_due`).
            let lapse_in = self
                .freshness
                .vouching_until()
                .filter(|t| *t > now)
                .map(|t| self.until(t));
            // A confirmation answered ahead waits for its moment; one not answered, for its
            // answers until it gives up.
            let confirm_in = self.confirm.confirming.as_ref().map(|c| {
                let until = if now < c.at { c.at } else { c.give_up_at };
                self.until(until)
            });
            tokio::select! {
                _ = &mut shutdown => return Ok(()),
                _ = tokio::time::sleep(confirm_in.unwrap_or_default()), if confirm_in.is_some() => {}
                _ = tokio::time::sleep(ahead_in.unwrap_or_default()), if ahead_in.is_some() => {
                    if let Some(due) = due {
                        self.drain_deliveries();
                        self.confirm_ahead(due);
                    }
                }
                msg = self.deliveries.recv() => {
                    let Some(msg) = msg else { return Err(anyhow!("the Application source stopped")) };
                    self.receive(msg);
                    self.drain_deliveries();
                }
                _ = fetch_timer.tick() => self.on_fetch_timer()?,
                _ = nudged() => self.want_fetch(FetchWanted { always: true, unless_present: Vec::new() }),
                Some(done) = self.git.jobs_rx.recv() => self.on_job(done),
                _ = tokio::time::sleep(give_up_in.unwrap_or_default()), if give_up_in.is_some() => {
                    self.give_up_asking();
                }
                _ = tokio::time::sleep(lapse_in.unwrap_or_default()), if lapse_in.is_some() => {
                    self.drain_deliveries();
                    let now = self.now();
                    self.note_vouching_end(now, false);
                    self.list_if_due(now);
                }
                _ = tokio::time::sleep(wake_in) => {
                    // Updates already received are judged before the source vouches for
                    // anything: a Degraded update (or a lost stream) waiting in the channel
                    // must not be vouched over.
                    self.drain_deliveries();
                    self.inputs.tick_due = true;
                }
            }
            self.pump()?;
        }
    }

    fn now(&self) -> Timestamp {
        self.ctx.clock.now()
    }

    fn until(&self, t: Timestamp) -> Duration {
        self.ctx.clock.until(t)
    }

    /// A source message arrives: ordering and freshness first, then it waits its turn.
    fn receive(&mut self, msg: SourceMsg) {
        let now = self.now();
        let was_connected = self.freshness.connected();
        if let SourceMsg::Lost(why) = &msg
            && was_connected
        {
            self.ctx.out.warn(
                now,
                &format!(
                    "{} application stream lost: {why}; reconnecting",
                    self.ctx.source.name()
                ),
            );
        }
        let read = match &msg {
            SourceMsg::Observed {
                snapshot,
                origin: Origin::Read(t),
                ..
            } => Some((*t, snapshot.key())),
            _ => None,
        };
        let ends = matches!(
            &msg,
            SourceMsg::Lost(_) | SourceMsg::Skipped(_) | SourceMsg::Connected
        );
        self.note_vouching_end(now, ends);
        match self.freshness.admit(msg, now) {
            Some(msg) => {
                let missed = self.freshness.take_missed();
                let (gap, vouched_to) = match &msg {
                    SourceMsg::Observed {
                        snapshot,
                        resource_version,
                        ..
                    } => {
                        let key = snapshot.key();
                        let gap = missed.contains(&key);
                        // Any delivery settles what the stream vouched for before it stopped.
                        let vouched = self.vouched_before_lapse.remove(&key);
                        let to = vouched
                            .filter(|(_, rv)| !gap && rv.is_some() && rv == resource_version)
                            .map(|(to, _)| to);
                        (gap, to)
                    }
                    _ => (false, None),
                };
                self.inputs.work.push_back(Work::Source {
                    msg,
                    at: now,
                    asked: false,
                    gap,
                    vouched_to,
                });
            }
            // A read the stream overtook: the stream's delivery is the newer word.
            None => {
                if let Some((ticket, key)) = read {
                    self.unconfirmed(ticket, &key);
                }
            }
        }
    }

    fn drain_deliveries(&mut self) {
        while let Ok(msg) = self.deliveries.try_recv() {
            self.receive(msg);
        }
    }

    /// One input to the judge. An input that needs answers goes back to the queue's front.
    fn judge(&mut self, work: Work) -> Result<Step> {
        match work {
            Work::Source {
                msg,
                at,
                asked,
                gap,
                vouched_to,
            } => self.judge_source(msg, at, asked, gap, vouched_to),
            Work::Commits {
                mut commits,
                tip,
                at,
                mut effects,
                asked,
            } => {
                // Every commit of this fetch was handed over already (an ancestry job's fetch
                // went ahead of it, to a newer tip): nothing to judge, and the tip stays. What
                // its commits before that decided (it waited for git with them) is still taken.
                if !commits.is_empty()
                    && commits
                        .iter()
                        .all(|c| self.delivered.contains(c.sha.as_str()))
                {
                    if !effects.is_empty() {
                        self.apply(effects, None)?;
                    }
                    return Ok(Step::Done);
                }
                let mut asked = asked;
                while let Some(info) = commits.front() {
                    // A commit an earlier fetch's input handed over already (two fetches'
                    // ranges overlap when the second started before the first was judged).
                    if self.delivered.contains(info.sha.as_str()) {
                        commits.pop_front();
                        continue;
                    }
                    let questions = self.engine.arrival_questions(info);
                    let ancestry = match self.answers(questions, asked) {
                        Ok(a) => a,
                        Err(open) => {
                            self.inputs.work.push_front(Work::Commits {
                                commits,
                                tip,
                                at,
                                effects,
                                asked: false,
                            });
                            return Ok(Step::NeedAnswers(open));
                        }
                    };
                    effects.extend(self.engine.commit_arrived(info, &ancestry, at));
                    if self.delivered.len() >= DELIVERED_KEPT {
                        self.delivered.clear();
                    }
                    self.delivered.insert(info.sha.to_string());
                    commits.pop_front();
                    asked = false;
                }
                // The tip left behind is in the clone: an app reporting it costs no look.
                let left = std::mem::replace(&mut self.tip, tip.clone());
                self.git.looked_for.insert(left);
                self.apply(effects, Some(&tip))?;
                // New watches are judged at once against a fresh read of their apps.
                if !self.once.strict {
                    let apps = self.live_apps();
                    if !apps.is_empty() {
                        let ticket = self.freshness.ticket();
                        self.ctx.source.request_read(ticket, apps);
                    }
                }
                Ok(Step::Done)
            }
            Work::RevertDone { watch_id, outcome } => {
                self.metrics.revert_finished(&outcome);
                let now = self.now();
                let effects = self.engine.revert_finished(&watch_id, outcome, now);
                self.apply(effects, None)?;
                Ok(Step::Done)
            }
            Work::Verified {
                watch_id,
                ask,
                answer,
            } => {
                let now = self.now();
                let effects = self.engine.verified(&watch_id, ask, answer, now);
                self.apply(effects, None)?;
                Ok(Step::Done)
            }
            Work::ProposalEnded { url, outcome } => {
                self.metrics.revert_finished(&outcome);
                let now = self.now();
                let effects = self.engine.proposal_ended(&url, outcome, now);
                self.apply(effects, None)?;
                Ok(Step::Done)
            }
            Work::BreakerReset => {
                let now = self.now();
                let effects = self.engine.reset_breaker(now);
                self.clear_reset_request = true;
                self.apply(effects, None)?;
                Ok(Step::Done)
            }
        }
    }

    fn judge_source(
        &mut self,
        msg: SourceMsg,
        at: Timestamp,
        asked: bool,
        gap: bool,
        vouched_to: Option<Timestamp>,
    ) -> Result<Step> {
        match msg {
            SourceMsg::Connected => {
                self.metrics.source_connected(&self.source_label);
                self.ctx.out.info(
                    at,
                    &format!("{} application stream connected", self.ctx.source.name()),
                );
                // A source may send its initial burst before it subscribes to changes (Argo CD
                // does): only a
                // listing asked for from now on is a baseline the stream's silence builds on,
                // so one is asked for now, even when an older one is still on its way.
                if !self.once.strict {
                    let ticket = self.freshness.ticket();
                    self.listing = Some(ticket);
                    self.connected_listing = Some(ticket);
                    self.ctx.source.request_listing(ticket);
                }
            }
            SourceMsg::Heartbeat => {}
            SourceMsg::Lost(_) => {
                self.connected_listing = None;
                self.metrics.source_lost(&self.source_label);
            }
            SourceMsg::Changing(_) => {}
            SourceMsg::Unwatched { key, glimpse, .. } => {
                self.reported_revision(&glimpse.sync_revision);
                if let Some(applied) = glimpse.last_operation_revision.as_deref() {
                    self.reported_revision(applied);
                }
                self.engine.glimpse(&key, &glimpse)
            }
            SourceMsg::Skipped(why) => {
                // The skipped update may be any app's: until each app is delivered again, the
                // stream vouches for none (listings keep observing them meanwhile).
                self.metrics.source_gap(&self.source_label, Gap::Skipped);
                self.ctx.out.warn(
                    at,
                    &format!("{} stream message skipped: {why}", self.ctx.source.name()),
                );
                self.problem(why);
            }
            SourceMsg::Observed {
                snapshot,
                origin,
                resource_version,
            } => {
                let questions = self.engine.reach_questions(&snapshot);
                // A watch's questions fetch for an unknown revision themselves, and hand its
                // commits over ahead of this observation; without questions, a revision the
                // clone lacks is fetched for the watches its commits may ask for.
                if questions.is_empty() {
                    self.reported_revision(&snapshot.sync_revision);
                    for c in &snapshot.reach_candidates {
                        self.reported_revision(&c.revision);
                    }
                }
                let ancestry = match self.answers(questions, asked) {
                    Ok(a) => a,
                    Err(open) => {
                        self.inputs.work.push_front(Work::Source {
                            msg: SourceMsg::Observed {
                                snapshot,
                                origin,
                                resource_version,
                            },
                            at,
                            asked: false,
                            gap,
                            vouched_to,
                        });
                        return Ok(Step::NeedAnswers(open));
                    }
                };
                if let Origin::Read(ticket) = origin {
                    self.confirmed(ticket, &snapshot.key(), resource_version)?;
                }
                let effects = if gap {
                    self.metrics
                        .source_gap(&self.source_label, Gap::ReadFoundNewer);
                    self.ctx.out.warn(
                        at,
                        &format!(
                            "a read of app {}/{} found a newer version than {}'s stream had delivered: the updates in between were not observed (the stream lost them, or had not sent them yet), so the time since the last observation counts as unobserved and the stream vouches for nothing until the next listing",
                            snapshot.namespace,
                            snapshot.name,
                            self.ctx.source.name()
                        ),
                    );
                    if self.listing.is_none() {
                        let ticket = self.freshness.ticket();
                        self.listing = Some(ticket);
                        self.ctx.source.request_listing(ticket);
                    }
                    self.engine
                        .observe_after_gap(Observation::Present(&snapshot), &ancestry, at)
                } else {
                    // The version the stream vouched for until it stopped: nothing was lost,
                    // so the stream's word up to then stands — as a confirming read's same
                    // version vouches up to its moment (docs/verdicts.md#observed-time). What
                    // came after (an outage, a silence) stays unobserved.
                    let mut effects = match vouched_to {
                        Some(to) => self.engine.vouch(&snapshot.key(), to),
                        None => Vec::new(),
                    };
                    effects.extend(self.engine.observe(
                        Observation::Present(&snapshot),
                        &ancestry,
                        at,
                    ));
                    effects
                };
                self.apply(effects, None)?;
                if let Origin::Read(_) = origin {
                    // A read of an app the stream did not vouch for decides its moment now.
                    self.finish_confirming()?;
                }
            }
            SourceMsg::Absent { app, origin } => {
                if let Origin::Read(ticket) = origin {
                    self.unconfirmed_where(
                        |ns, name| confirm::same_app(ns, name, app.namespace.as_deref(), &app.name),
                        Some(ticket),
                    );
                }
                self.observe_absent(&app, at)?
            }
            SourceMsg::Listed {
                ticket,
                present,
                complete,
            } => {
                if self.listing == Some(ticket) {
                    self.listing = None;
                }
                if complete {
                    self.inputs.hold_commits_until = None;
                    self.listed_at = Some(at);
                }
                self.once.listed = present.len();
                if complete {
                    // Tickets grow: a later one was asked for after the connection too.
                    let since_connected = self.connected_listing.is_some_and(|t| ticket >= t);
                    self.metrics
                        .complete_listing(&self.source_label, at, since_connected);
                }
                if self.once.strict && complete {
                    self.once_unlisted(&present);
                }
                // A listing that could not read every item proves nothing by its silence.
                let missing: Vec<AppRef> = if complete {
                    self.live_apps()
                        .into_iter()
                        .filter(|a| !present.iter().any(|k| a.matches(&k.namespace, &k.name)))
                        .filter(|a| self.freshness.absent_is_current(a, ticket))
                        .collect()
                } else {
                    Vec::new()
                };
                self.freshness.forget(ticket);
                for app in missing {
                    self.observe_absent(&app, at)?;
                }
            }
            SourceMsg::ListingFailed { ticket, why } => {
                if self.listing == Some(ticket) {
                    self.listing = None;
                }
                self.ctx.out.warn(at, &why);
                self.problem(why);
            }
            SourceMsg::Problem(Problem::AbsentOrForbidden { why, app }) => {
                self.unconfirmed_where(
                    |ns, name| confirm::same_app(ns, name, app.namespace.as_deref(), &app.name),
                    None,
                );
                // Not a failure of the source: the listing that follows says whether it exists.
                self.ctx.out.warn(at, &why);
                if self.listing.is_none() {
                    let ticket = self.freshness.ticket();
                    self.listing = Some(ticket);
                    self.ctx.source.request_listing(ticket);
                }
            }
            SourceMsg::Problem(p) => {
                match &p {
                    Problem::Incomplete { app, .. } => self.unconfirmed_where(
                        |ns, name| confirm::same_app(ns, name, Some(&app.namespace), &app.name),
                        None,
                    ),
                    // Named as it was asked: `namespace/name`, or the name alone.
                    Problem::ReadFailed { app, .. } => {
                        let (app_ns, app_name) = match app.split_once('/') {
                            Some((ns, name)) => (Some(ns), name),
                            None => (None, app.as_str()),
                        };
                        self.unconfirmed_where(
                            |ns, name| confirm::same_app(ns, name, app_ns, app_name),
                            None,
                        )
                    }
                    _ => {}
                }
                let why = match p {
                    Problem::AbsentOrForbidden { why, .. } => why,
                    Problem::Unreadable(why) => why,
                    Problem::Incomplete { why, .. } => why,
                    Problem::ReadFailed { why, .. } => why,
                };
                self.ctx.out.warn(at, &why);
                self.problem(why);
            }
        }
        Ok(Step::Done)
    }

    /// The stream stops vouching — `ends_now`: the message about to be admitted ends it (a
    /// loss, a skipped message, a reconnection); else it lapsed in silence at its last sign of
    /// life plus stale-after. The apps it vouched for then are kept with the version each was
    /// vouched at, once per lapse: a later delivery at that version shows that no update was
    /// lost, and carries their observation to that moment — never beyond (an outage after it
    /// stays unobserved time, docs/verdicts.md#observed-time).
    pub(super) fn note_vouching_end(&mut self, now: Timestamp, ends_now: bool) {
        let Some(until) = self.freshness.vouching_until() else {
            return;
        };
        let last = until.plus_ms(-1);
        let end = if now <= last {
            if !ends_now {
                return;
            }
            now
        } else {
            last
        };
        if self.lapse_noted == Some(end) {
            return;
        }
        self.lapse_noted = Some(end);
        for key in self.freshness.vouched(end) {
            // Only watched apps are delivered whole; the others' glimpses judge nothing.
            if !self
                .watched
                .iter()
                .any(|a| a.matches(&key.namespace, &key.name))
            {
                continue;
            }
            let rv = self.freshness.resource_version(&key);
            self.vouched_before_lapse.insert(key, (end, rv));
        }
    }

    /// Asks for a safety-net listing when one is due: at once while the stream does not vouch
    /// (not connected, not heard from within `--stale-after`, or not baselined by a complete
    /// listing since its last suspected gap: listings observe then), else `--resync-interval`
    /// after the last complete one — a stream that vouches makes the listing a safety net, not
    /// the way apps are seen (docs/verdicts.md#observed-time). Never while one is on its way.
    pub(super) fn list_if_due(&mut self, now: Timestamp) {
        if self.listing.is_some() {
            return;
        }
        let resync_ms = self.cfg.resync_interval.as_millis() as i64;
        let due = !self.freshness.vouching(now)
            || self.listed_at.is_none_or(|t| now.ms_since(t) >= resync_ms);
        if due {
            let ticket = self.freshness.ticket();
            self.listing = Some(ticket);
            self.ctx.source.request_listing(ticket);
        }
    }

    /// The app does not exist (deleted, not found, or missing from a complete listing).
    fn observe_absent(&mut self, app: &AppRef, at: Timestamp) -> Result<()> {
        let absent = Observation::Absent {
            namespace: app.namespace.as_deref(),
            name: &app.name,
        };
        let effects = self.engine.observe(absent, &Ancestry::default(), at);
        self.apply(effects, None)
    }

    /// A deadline or window end: extend the observations the source vouches for, then tick.
    fn wake(&mut self) -> Result<()> {
        let now = self.now();
        let handled = self.last_wake;
        self.last_wake = now;
        if let Some(c) = &self.confirm.confirming {
            if c.at <= now {
                // The confirmation under way decides what is due, this moment included.
                return Ok(());
            }
            // Asked ahead for a later moment; this earlier one is confirmed on its own.
            self.confirm.confirming = None;
        }
        if !self.start_confirming(handled, now) {
            let effects = self.engine.tick(now);
            return self.apply(effects, None);
        }
        Ok(())
    }

    /// The apps of live watches, each once.
    fn live_apps(&self) -> Vec<AppRef> {
        let mut apps: Vec<AppRef> = self
            .engine
            .watches()
            .iter()
            .filter(|w| w.is_live())
            .map(|w| w.app.clone())
            .collect();
        apps.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        apps.dedup();
        apps
    }

    fn sync_watched(&mut self) {
        let apps = self.engine.followed_apps();
        if apps != self.watched {
            self.watched = apps.clone();
            self.ctx.source.set_watched(apps);
        }
    }

    /// Take a step's effects: they are written with the turn's other steps in one transaction
    /// by [`Runtime::flush`] at the end of the loop's turn, and only then announced and carried
    /// out (persist, then announce, then act: nothing printed or pushed is lost). What the
    /// source is told to watch changes at once.
    fn apply(&mut self, effects: Vec<Effect>, tip: Option<&str>) -> Result<()> {
        let staged = &mut self.staged;
        staged.applied = true;
        for e in effects {
            match e {
                Effect::Emit(ev) => staged.events.push(ev),
                Effect::Revert(r) => staged.reverts.push(r),
                Effect::Withdraw { proposal, why } => staged.withdrawals.push((proposal, why)),
                Effect::Verify {
                    watch_id, app, ask, ..
                } => staged.verifies.push((watch_id, app, ask)),
            }
        }
        if let Some(tip) = tip {
            staged.tip = Some(tip.to_string());
        }
        self.sync_watched();
        Ok(())
    }

    /// Write what the turn's steps decided — the watches they changed, the breaker, the events,
    /// the new tip, the idle observations and arrived commits — in one SQLite transaction, then
    /// print the events, then queue the reverts and withdrawals and start the verifications. A
    /// burst (200 apps turning Healthy at once) is one write, not 200 (`docs/state.md`).
    fn flush(&mut self) -> Result<()> {
        if !self.staged.applied {
            // A turn that applied no step (a heartbeat, a job still running) writes and counts
            // nothing: the gauges walk every watch. What the engine marked meanwhile (an
            // unwatched app's idle observation) waits for the next applied step — the fetch
            // tick applies one.
            return Ok(());
        }
        let (watches, breaker) = self.engine.take_dirty();
        let idle = self.engine.take_idle_dirty();
        let arrived = self.engine.take_arrived();
        let tapes = self.engine.take_tapes();
        let Staged {
            events,
            reverts,
            withdrawals,
            verifies,
            tip,
            applied: _,
        } = std::mem::take(&mut self.staged);
        if !watches.is_empty()
            || breaker.is_some()
            || !events.is_empty()
            || tip.is_some()
            || self.clear_reset_request
            || !idle.is_empty()
            || !arrived.is_empty()
            || !tapes.is_empty()
        {
            self.store.write(Write {
                watches: &watches,
                breaker: breaker.as_ref(),
                events: &events,
                tip: tip.as_deref(),
                baseline: None,
                clear_breaker_reset_request: self.clear_reset_request,
                idle: &idle,
                arrived: &arrived,
                record_summary: None,
                tapes: &tapes,
            })?;
            self.clear_reset_request = false;
        }
        self.metrics
            .watches_changed(self.engine.watches(), &watches, self.engine.breaker().open);
        // What finished and can no longer change is stored now: the engine lets it go, so a
        // day of verdicts does not pile up in memory (`--once` counts what it started).
        if !self.once.strict {
            let gone = self.engine.forget_finished(self.now());
            self.metrics.watches_forgotten(&gone);
        }
        for e in &events {
            if e.event == greenlight_core::event::EventKind::DirectiveRejected {
                self.once.rejected += 1;
            }
            self.ctx.out.event(e);
        }
        self.git.reverts.extend(reverts);
        self.git.withdrawals.extend(withdrawals);
        for (watch_id, app, ask) in verifies {
            self.start_verify(watch_id, app, ask);
        }
        Ok(())
    }
}

/// `--since` on a first start: the commit to watch after.
async fn resolve_since(ctx: &Context, cfg: &DaemonConfig, rev: &str) -> Result<String> {
    let repo = ctx.repo.clone();
    let rev2 = rev.to_string();
    let found = match ctx.jobs {
        Jobs::Blocking => tokio::task::spawn_blocking(move || repo.resolve(&rev2)).await??,
        Jobs::Inline => repo.resolve(&rev2)?,
    };
    found.ok_or_else(|| crate::usage(format!("--since {rev:?} is not a commit in {}", cfg.repo)))
}
