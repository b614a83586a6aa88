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
pub mod git;
pub mod seams;

pub use config::DaemonConfig;

use crate::clock::Clock;
use crate::output::Output;
use crate::store::{Store, Write};
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
use seams::{Context, Jobs, Repository as _, Source, StartupNote};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};

/// An ancestry question: (commit, revision).
type Question = (String, String);

/// An input for the judge, waiting its turn.
enum Work {
    Source {
        msg: SourceMsg,
        at: Timestamp,
        asked: bool,
        /// The source lost updates of this app before this delivery (see `Freshness`).
        gap: bool,
    },
    /// New commits from one fetch, oldest first; the tip is stored with the watches they start.
    Commits {
        commits: VecDeque<CommitInfo>,
        tip: String,
        at: Timestamp,
        effects: Vec<Effect>,
        asked: bool,
    },
    RevertDone {
        watch_id: String,
        outcome: RevertOutcome,
    },
    BreakerReset,
}

/// What a job reports back.
enum JobDone {
    Fetched(Result<(String, Vec<CommitInfo>)>),
    Answered {
        job: u64,
        answers: Result<Answers>,
    },
    Reverted {
        watch_id: String,
        outcome: RevertOutcome,
    },
}

/// What an ancestry job learnt: the answers, and — when a revision was unknown and the job
/// fetched — the branch's new tip with the commits up to it, which the judge hears before the
/// input that asked (a later commit is attributed before any judging of the app's state).
struct Answers {
    answers: Vec<(Question, Option<bool>)>,
    fetched: Option<(String, Vec<CommitInfo>)>,
}

/// A judge input that needs answers first.
enum Step {
    Done,
    NeedAnswers(Vec<Question>),
}

/// The ancestry job the queue is waiting for.
struct Asking {
    job: u64,
    /// After this, the queue goes on without the answers.
    give_up_at: Timestamp,
}

/// Before the stream's silence extends an app's last observation to a due moment (and a verdict
/// is built on it), one read per app confirms that the source still has the version the stream last
/// delivered: the stream may have lost an update (`docs/verdicts.md#observed-time`).
///
/// The read is asked slightly before the moment — early by about twice the last confirmation's
/// round trip, within [`CONFIRM_LEAD_MIN_MS`, `CONFIRM_LEAD_MAX_MS`] — so that the verdict does not
/// wait for it; an answer that comes after the moment is waited for, as it would be without the
/// lead.
struct Confirming {
    ticket: u64,
    /// The due moment.
    at: Timestamp,
    /// When the read was asked, for the round trip.
    asked_at: Timestamp,
    /// The apps not yet confirmed, with the resource version of their last delivery.
    apps: Vec<(AppKey, Option<u64>)>,
    give_up_at: Timestamp,
}

/// How early a confirming read may be asked before its due moment, at least and at most. An
/// update the stream loses within this margin before the moment is not seen by the verdict.
const CONFIRM_LEAD_MIN_MS: i64 = 2;
const CONFIRM_LEAD_MAX_MS: i64 = 100;
/// How many commit ids the runtime remembers as handed to the judge.
const DELIVERED_KEPT: usize = 100_000;
/// The round trip assumed before the first confirmation has measured one.
const CONFIRM_RTT_GUESS_MS: i64 = 5;

/// The runtime: the judge, the store and the seams, and the order of things.
pub struct Runtime {
    cfg: DaemonConfig,
    ctx: Context,
    store: Store,
    engine: Engine,
    branch: String,
    /// The last tip whose commits were all handed to the judge.
    tip: String,
    /// The commits handed to the judge by this process (bounded): a fetch's commits that an
    /// ancestry job's fetch already delivered are dropped, so the tip never goes back.
    delivered: std::collections::HashSet<String>,
    deliveries: mpsc::Receiver<SourceMsg>,
    freshness: Freshness,
    jobs_tx: mpsc::Sender<JobDone>,
    jobs_rx: mpsc::Receiver<JobDone>,
    /// Git jobs run one at a time: a fetch and a revert never race in one clone.
    git_lane: Arc<Semaphore>,
    work: VecDeque<Work>,
    asking: Option<Asking>,
    next_job: u64,
    /// Ancestry never changes: answers are kept.
    ancestry: HashMap<Question, bool>,
    /// When the fetch in flight started: git has no timeout of its own on a stalled remote,
    /// and a fetch that never returns must not stop commit processing quietly.
    fetching: Option<Timestamp>,
    stuck_warned: bool,
    listing: Option<u64>,
    reverts: VecDeque<RevertRequest>,
    reverting: bool,
    /// A wake-up came while the queue waited for answers: it is handled after them.
    tick_due: bool,
    /// A due moment waits for the source to confirm the apps the stream vouches for.
    confirming: Option<Confirming>,
    /// The due moment a confirmation was last asked for ahead of time, so it is asked once.
    confirmed_ahead: Option<Timestamp>,
    /// The last confirmation's round trip (ms), which sets how early the next one is asked.
    confirm_rtt_ms: i64,
    /// The last wake-up handled, so a moment that stays due is not handled in a loop.
    last_wake: Timestamp,
    /// The next store write also clears the breaker-reset request it applies.
    clear_reset_request: bool,
    /// The apps last given to the source as watched.
    watched: Vec<AppRef>,
    /// `watch --once`: source problems are collected and fail the cycle.
    strict: bool,
    problems: Vec<String>,
    listed: usize,
    rejected: usize,
}

/// What [`Runtime::start_with`] needs besides the context.
pub struct Start {
    pub branch: String,
    pub branch_is_default: bool,
    pub tip: String,
    pub store: Store,
    pub deliveries: mpsc::Receiver<SourceMsg>,
    /// Print the `watching <repo> <branch> from <sha>` line.
    pub announce: bool,
}

/// Open the clone and the state, record the baseline, and print `watching <repo> <branch> from <sha>`;
/// the Applications come from `source`, the caller's choice.
pub async fn start(
    cfg: DaemonConfig,
    source: Source,
    out: Output,
    clock: Arc<dyn Clock>,
) -> Result<Runtime> {
    let store = Store::open_or_create(&cfg.state)?;
    let (repo, branch, default_branch) = open_repo(&cfg, cfg.data_dir.join("repo")).await?;
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
        branch_is_default: branch == default_branch,
        tip,
        store,
        deliveries,
        announce: true,
    };
    Runtime::start_with(cfg, ctx, start).await
}

/// `watch --once`: one cycle of this runtime on a scratch clone and state (the caller's
/// `cfg.data_dir` and `cfg.state`, with dry-run set): the commits in range (after `--since`, or
/// the tip alone), one listing, one judgement of each watch.
pub async fn once(cfg: DaemonConfig, source: Source, out: Output) -> Result<OnceSummary> {
    use anyhow::Context as _;
    let store = Store::open_or_create(&cfg.state)?;
    let (repo, branch, default_branch) = open_repo(&cfg, cfg.data_dir.join("repo"))
        .await
        .context("self-check: the repository")?;
    let tip = {
        let (r, b) = (repo.clone(), branch.clone());
        tokio::task::spawn_blocking(move || seams::Repository::fetch(&*r, &b))
            .await?
            .context("self-check: the repository")?
    };
    let Source { app, deliveries } = source;
    let ctx = Context {
        source: app,
        repo: repo.clone(),
        reverter: repo.clone(),
        clock: Arc::new(crate::clock::SystemClock),
        out,
        jobs: Jobs::Blocking,
    };
    let base = match &cfg.since {
        Some(rev) => Some(resolve_since(&ctx, &cfg, rev).await?),
        None => None,
    };
    let commits = {
        let (r, t) = (repo.clone(), tip.clone());
        tokio::task::spawn_blocking(move || r.commits_between(base.as_deref(), &t))
            .await?
            .context("self-check: the repository")?
    };
    let start = Start {
        branch: branch.clone(),
        branch_is_default: branch == default_branch,
        tip: tip.clone(),
        store,
        deliveries,
        announce: false,
    };
    let runtime = Runtime::start_with(cfg, ctx, start).await?;
    runtime.once(commits, tip, branch).await
}

/// Clone (or open) the watched repository and settle the branch: the given one or the remote's HEAD.
async fn open_repo(
    cfg: &DaemonConfig,
    dir: std::path::PathBuf,
) -> Result<(Arc<git::GitRepository>, String, String)> {
    let auth = greenlight_git::Auth {
        token: cfg.git_token.clone(),
        username: None,
    };
    let remote = cfg.repo.expose().to_string();
    let want = cfg.branch.clone();
    let (name, email) = (cfg.git_author_name.clone(), cfg.git_author_email.clone());
    tokio::task::spawn_blocking(move || -> Result<_> {
        let repo = greenlight_git::Repo::open_or_clone(&remote, &dir, auth)?;
        let repo = git::GitRepository::new(repo, &name, &email);
        let default = repo.remote_default_branch()?;
        let branch = want.unwrap_or_else(|| default.clone());
        Ok((Arc::new(repo), branch, default))
    })
    .await?
}

impl Runtime {
    /// Start on any seams: load the state, settle the baseline (the first start's `--since`, or
    /// the tip), and print the `watching` line.
    pub async fn start_with(cfg: DaemonConfig, ctx: Context, s: Start) -> Result<Runtime> {
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
        if s.announce {
            ctx.out
                .plain(&format!("watching {} {} from {}", cfg.repo, s.branch, from));
        }
        for note in ctx.source.startup_notes(cfg.stale_after_ms) {
            match note {
                StartupNote::Warn(w) => ctx.out.warn(now, &w),
                StartupNote::Info(i) if s.announce => ctx.out.info(now, &i),
                StartupNote::Info(_) => {}
            }
        }
        let (jobs_tx, jobs_rx) = mpsc::channel(64);
        let stale_after_ms = cfg.stale_after_ms;
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
            jobs_tx,
            jobs_rx,
            git_lane: Arc::new(Semaphore::new(1)),
            work: VecDeque::new(),
            asking: None,
            next_job: 0,
            ancestry: HashMap::new(),
            fetching: None,
            stuck_warned: false,
            listing: None,
            reverts: VecDeque::new(),
            reverting: false,
            tick_due: false,
            confirming: None,
            confirmed_ahead: None,
            confirm_rtt_ms: CONFIRM_RTT_GUESS_MS,
            last_wake: Timestamp(i64::MIN),
            clear_reset_request: false,
            watched: Vec::new(),
            strict: false,
            problems: Vec::new(),
            listed: 0,
            rejected: 0,
        })
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
        self.ctx.source.start_stream();
        // The timer's first tick is immediate: the first fetch and listing start at once, as
        // jobs like every later one, so that a hung remote never holds the loop.
        let mut fetch_timer = tokio::time::interval(self.cfg.fetch_interval);
        fetch_timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        loop {
            let now = self.now();
            let due = self.engine.next_wakeup_after(self.last_wake);
            let wake_in = match due {
                Some(t) => self.until(t),
                None => Duration::from_secs(3600),
            };
            let ahead_in = due
                .filter(|d| self.confirming.is_none() && self.confirmed_ahead != Some(*d))
                .map(|d| self.until(d.plus_ms(-self.confirm_lead_ms())));
            let give_up_in = self.asking.as_ref().map(|a| self.until(a.give_up_at));
            // A confirmation answered ahead waits for its moment; one not answered, for its
            // answers until it gives up.
            let confirm_in = self.confirming.as_ref().map(|c| {
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
                Some(done) = self.jobs_rx.recv() => self.on_job(done),
                _ = tokio::time::sleep(give_up_in.unwrap_or_default()), if give_up_in.is_some() => {
                    self.give_up_asking();
                }
                _ = tokio::time::sleep(wake_in) => {
                    // Updates already received are judged before the source vouches for
                    // anything: a Degraded update (or a lost stream) waiting in the channel
                    // must not be vouched over.
                    self.drain_deliveries();
                    self.tick_due = true;
                }
            }
            self.pump()?;
        }
    }

    /// `watch --once`: one cycle — the commits in range, one listing, one judgement of each —
    /// with dry-run forced (the caller's config) and any source problem an error.
    async fn once(
        mut self,
        commits: Vec<CommitInfo>,
        tip: String,
        branch: String,
    ) -> Result<OnceSummary> {
        self.strict = true;
        let commit_count = commits.len();
        let now = self.now();
        self.work.push_back(Work::Commits {
            commits: commits.into(),
            tip,
            at: now,
            effects: Vec::new(),
            asked: false,
        });
        self.pump()?;
        while !self.work.is_empty() || self.asking.is_some() {
            self.once_step().await?;
        }
        let ticket = self.freshness.ticket();
        self.listing = Some(ticket);
        self.sync_watched();
        self.ctx.source.request_listing(ticket);
        while self.listing.is_some() || !self.work.is_empty() || self.asking.is_some() {
            self.once_step().await?;
        }
        if !self.problems.is_empty() {
            return Err(anyhow!("self-check: {}", self.problems.join("; ")));
        }
        Ok(OnceSummary {
            branch,
            tip: self.tip.clone(),
            rejected: self.rejected,
            commits: commit_count,
            watches: self.engine.watches().len(),
            apps_listed: self.listed,
        })
    }

    async fn once_step(&mut self) -> Result<()> {
        let give_up_in = self.asking.as_ref().map(|a| self.until(a.give_up_at));
        tokio::select! {
            msg = self.deliveries.recv() => {
                let Some(msg) = msg else { return Err(anyhow!("the Application source stopped")) };
                self.receive(msg);
                self.drain_deliveries();
            }
            Some(done) = self.jobs_rx.recv() => self.on_job(done),
            _ = tokio::time::sleep(give_up_in.unwrap_or_default()), if give_up_in.is_some() => {
                self.give_up_asking();
            }
        }
        self.pump()
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
        match self.freshness.admit(msg, now) {
            Some(msg) => {
                let missed = self.freshness.take_missed();
                let gap = match &msg {
                    SourceMsg::Observed { snapshot, .. } => missed.contains(&snapshot.key()),
                    _ => false,
                };
                self.work.push_back(Work::Source {
                    msg,
                    at: now,
                    asked: false,
                    gap,
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

    fn on_fetch_timer(&mut self) -> Result<()> {
        // `greenlight breaker reset` leaves a request while the daemon runs; the daemon is the
        // breaker's only writer then. The request is cleared in the same transaction that
        // closes the breaker, so a daemon that dies in between finds it again at its next start.
        let now = self.now();
        // Housekeeping: a failed prune is tried again an hour later; judging goes on.
        match self.store.prune_due(now, self.cfg.retain_ms) {
            Ok(Some(p)) if p.any() => self.ctx.out.info(now, &p.summary()),
            Ok(_) => {}
            Err(e) => self
                .ctx
                .out
                .warn(now, &format!("pruning the state file failed: {e:#}")),
        }
        if self.store.breaker_reset_requested()?
            && !self.work.iter().any(|w| matches!(w, Work::BreakerReset))
            && !self.clear_reset_request
        {
            self.work.push_back(Work::BreakerReset);
        }
        let now = self.now();
        match self.fetching {
            Some(since) => {
                let stuck_after = self.cfg.fetch_interval.as_millis() as i64 * 10;
                if !self.stuck_warned && now.ms_since(since) > stuck_after {
                    self.stuck_warned = true;
                    self.ctx.out.warn(now, &format!(
                        "fetching {} has not returned for {} s: new commits are not seen until it does",
                        self.branch, now.ms_since(since) / 1000
                    ));
                }
            }
            None => {
                self.fetching = Some(now);
                self.stuck_warned = false;
                let repo = self.ctx.repo.clone();
                let (branch, last) = (self.branch.clone(), self.tip.clone());
                self.spawn_git(
                    move || -> Result<(String, Vec<CommitInfo>)> {
                        let tip = repo.fetch(&branch)?;
                        let commits = repo.commits_between(Some(&last), &tip)?;
                        Ok((tip, commits))
                    },
                    |r| JobDone::Fetched(r.and_then(|x| x)),
                );
            }
        }
        if self.listing.is_none() {
            let ticket = self.freshness.ticket();
            self.listing = Some(ticket);
            self.ctx.source.request_listing(ticket);
        }
        // Apps no watch follows change their idle observations without a step of their own:
        // they are written here, so a restart keeps the baseline of a commit not yet fetched.
        self.apply(Vec::new(), None)
    }

    /// Run a blocking git call as a job on the git lane; `done` turns its result into an input.
    fn spawn_git<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
        done: impl FnOnce(Result<T>) -> JobDone + Send + 'static,
    ) {
        let lane = self.git_lane.clone();
        let tx = self.jobs_tx.clone();
        let mode = self.ctx.jobs;
        tokio::spawn(async move {
            let Ok(_permit) = lane.acquire_owned().await else {
                return;
            };
            let result = match mode {
                Jobs::Blocking => tokio::task::spawn_blocking(f)
                    .await
                    .map_err(|e| anyhow!("the git job failed: {e}")),
                Jobs::Inline => Ok(f()),
            };
            let _ = tx.send(done(result)).await;
        });
    }

    fn on_job(&mut self, done: JobDone) {
        match done {
            JobDone::Fetched(result) => {
                self.fetching = None;
                match result {
                    Ok((tip, commits)) if tip != self.tip => {
                        let at = self.now();
                        self.work.push_back(Work::Commits {
                            commits: commits.into(),
                            tip,
                            at,
                            effects: Vec::new(),
                            asked: false,
                        });
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let now = self.now();
                        self.ctx
                            .out
                            .warn(now, &format!("fetching {} failed: {e:#}", self.branch));
                    }
                }
            }
            JobDone::Answered { job, answers } => {
                let mut fetched = None;
                match answers {
                    Ok(a) => {
                        for (q, v) in a.answers {
                            if let Some(v) = v {
                                self.ancestry.insert(q, v);
                            }
                        }
                        fetched = a.fetched;
                    }
                    Err(e) => {
                        // A git failure (the remote unreachable for a moment) leaves the
                        // questions unanswered, as unknown revisions are: "not reached yet".
                        let now = self.now();
                        self.ctx.out.warn(
                            now,
                            &format!("ancestry questions left unanswered for now: {e:#}"),
                        );
                    }
                }
                if self.asking.as_ref().is_some_and(|a| a.job == job) {
                    self.asking = None;
                    self.mark_front_asked();
                }
                // New commits go ahead of the input that asked, so a later commit that the source
                // already reports is recorded (and attributed) before that input is judged.
                if let Some((tip, commits)) = fetched
                    && tip != self.tip
                    && !commits.is_empty()
                {
                    let at = self.now();
                    self.work.push_front(Work::Commits {
                        commits: commits.into(),
                        tip,
                        at,
                        effects: Vec::new(),
                        asked: false,
                    });
                }
            }
            JobDone::Reverted { watch_id, outcome } => {
                self.reverting = false;
                self.work.push_back(Work::RevertDone { watch_id, outcome });
            }
        }
    }

    /// The answers did not come within `--stale-after`: the waiting input goes on without them.
    fn give_up_asking(&mut self) {
        if self.asking.take().is_some() {
            let now = self.now();
            self.ctx.out.warn(
                now,
                "git did not answer ancestry questions in time: judging without them (not reached yet)",
            );
            self.mark_front_asked();
        }
    }

    fn mark_front_asked(&mut self) {
        match self.work.front_mut() {
            Some(Work::Source { asked, .. }) | Some(Work::Commits { asked, .. }) => *asked = true,
            _ => {}
        }
    }

    /// Hand waiting inputs to the judge, in order, until one needs git's answers.
    fn pump(&mut self) -> Result<()> {
        while self.asking.is_none() {
            let Some(work) = self.work.pop_front() else {
                break;
            };
            match self.judge(work)? {
                Step::Done => {}
                Step::NeedAnswers(questions) => self.ask(questions),
            }
        }
        if self.asking.is_none() && self.work.is_empty() && self.tick_due {
            self.tick_due = false;
            self.wake()?;
        }
        self.finish_confirming()?;
        self.start_revert();
        Ok(())
    }

    /// Ask git, as a job; the waiting input stays at the front of the queue.
    fn ask(&mut self, questions: Vec<Question>) {
        self.next_job += 1;
        let job = self.next_job;
        let now = self.now();
        self.asking = Some(Asking {
            job,
            give_up_at: now.plus_ms(self.cfg.stale_after_ms),
        });
        let repo = self.ctx.repo.clone();
        let (branch, last) = (self.branch.clone(), self.tip.clone());
        self.spawn_git(
            move || -> Result<Answers> {
                // An unknown revision triggers one fetch; still unknown, it is "not reached"
                // for now and asked again at the next observation. What the fetch brought is
                // handed to the judge first: the source may report a commit greenlight has not
                // seen yet, and it must be attributed before the app's state is judged.
                // A revision the clone knows but the judge was not handed yet (a fetch of the
                // timer's, its commits still queued behind this input) is handed over first
                // too: a revert of the commit among them must be known before it is judged.
                let mut answers = Vec::new();
                let mut fetched = None;
                for (c, r) in questions {
                    let mut v = repo.is_ancestor(&c, &r)?;
                    if fetched.is_none() && v.is_none() {
                        let tip = repo.fetch(&branch)?;
                        let commits = repo.commits_between(Some(&last), &tip)?;
                        fetched = Some((tip, commits));
                        v = repo.is_ancestor(&c, &r)?;
                    } else if fetched.is_none()
                        && !last.is_empty()
                        && r != last
                        && repo.is_ancestor(&r, &last)? != Some(true)
                        && let Some(local) =
                            repo.resolve(&format!("refs/remotes/origin/{branch}"))?
                        && local != last
                        && repo.is_ancestor(&r, &local)? == Some(true)
                    {
                        let commits = repo.commits_between(Some(&last), &local)?;
                        fetched = Some((local, commits));
                    }
                    answers.push(((c, r), v));
                }
                Ok(Answers { answers, fetched })
            },
            move |r| JobDone::Answered {
                job,
                answers: r.and_then(|x| x),
            },
        );
    }

    /// The cached answers to `questions`, or the questions still open.
    fn answers(&self, questions: Vec<Question>, asked: bool) -> Result<Ancestry, Vec<Question>> {
        let mut answers = Ancestry::default();
        let mut open = Vec::new();
        for q in questions {
            match self.ancestry.get(&q) {
                Some(v) => {
                    answers.0.insert(q, *v);
                }
                None => open.push(q),
            }
        }
        if open.is_empty() || asked {
            Ok(answers)
        } else {
            Err(open)
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
            } => self.judge_source(msg, at, asked, gap),
            Work::Commits {
                mut commits,
                tip,
                at,
                mut effects,
                asked,
            } => {
                // Every commit of this fetch was handed over already (an ancestry job's fetch
                // went ahead of it, to a newer tip): nothing to judge, and the tip stays.
                if !commits.is_empty()
                    && commits
                        .iter()
                        .all(|c| self.delivered.contains(c.sha.as_str()))
                {
                    return Ok(Step::Done);
                }
                let mut asked = asked;
                while let Some(info) = commits.front() {
                    let questions = self.engine.arrival_questions(info);
                    let ancestry = match self.answers(questions, asked) {
                        Ok(a) => a,
                        Err(open) => {
                            self.work.push_front(Work::Commits {
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
                self.tip = tip.clone();
                self.apply(effects, Some(&tip))?;
                // New watches are judged at once against a fresh read of their apps.
                if !self.strict {
                    let apps = self.live_apps();
                    if !apps.is_empty() {
                        let ticket = self.freshness.ticket();
                        self.ctx.source.request_read(ticket, apps);
                    }
                }
                Ok(Step::Done)
            }
            Work::RevertDone { watch_id, outcome } => {
                let now = self.now();
                let effects = self.engine.revert_finished(&watch_id, outcome, now);
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
    ) -> Result<Step> {
        match msg {
            SourceMsg::Connected => {
                self.ctx.out.info(
                    at,
                    &format!("{} application stream connected", self.ctx.source.name()),
                );
                // A source may send its initial burst before it subscribes to changes (Argo CD
                // does): only a
                // listing asked for from now on is a baseline the stream's silence builds on,
                // so one is asked for now, even when an older one is still on its way.
                if !self.strict {
                    let ticket = self.freshness.ticket();
                    self.listing = Some(ticket);
                    self.ctx.source.request_listing(ticket);
                }
            }
            SourceMsg::Heartbeat => {}
            SourceMsg::Lost(_) | SourceMsg::Changing(_) => {}
            SourceMsg::Unwatched(key, glimpse) => self.engine.glimpse(&key, &glimpse),
            SourceMsg::Skipped(why) => {
                // The skipped update may be any app's: until each app is delivered again, the
                // stream vouches for none (listings keep observing them meanwhile).
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
                let ancestry = match self.answers(questions, asked) {
                    Ok(a) => a,
                    Err(open) => {
                        self.work.push_front(Work::Source {
                            msg: SourceMsg::Observed {
                                snapshot,
                                origin,
                                resource_version,
                            },
                            at,
                            asked: false,
                            gap,
                        });
                        return Ok(Step::NeedAnswers(open));
                    }
                };
                if let Origin::Read(ticket) = origin {
                    self.confirmed(ticket, &snapshot.key(), resource_version)?;
                }
                let effects = if gap {
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
                    self.engine
                        .observe(Observation::Present(&snapshot), &ancestry, at)
                };
                self.apply(effects, None)?;
            }
            SourceMsg::Absent { app, origin } => {
                if let Origin::Read(ticket) = origin {
                    self.unconfirmed_where(|k| app.matches(&k.namespace, &k.name), Some(ticket));
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
                self.listed = present.len();
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
                self.unconfirmed_where(|k| app.matches(&k.namespace, &k.name), None);
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
                    Problem::Incomplete { app, .. } => self.unconfirmed_where(|k| k == app, None),
                    Problem::ReadFailed { app, .. } => {
                        self.unconfirmed_where(|k| k.name == *app, None)
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

    /// The app does not exist (deleted, not found, or missing from a complete listing).
    fn observe_absent(&mut self, app: &AppRef, at: Timestamp) -> Result<()> {
        let absent = Observation::Absent {
            namespace: app.namespace.as_deref(),
            name: &app.name,
        };
        let effects = self.engine.observe(absent, &Ancestry::default(), at);
        self.apply(effects, None)
    }

    fn problem(&mut self, why: String) {
        if self.strict {
            self.problems.push(why);
        }
    }

    /// A deadline or window end: extend the observations the source vouches for, then tick.
    fn wake(&mut self) -> Result<()> {
        let now = self.now();
        self.last_wake = now;
        if let Some(c) = &self.confirming {
            if c.at <= now {
                // The confirmation under way decides what is due, this moment included.
                return Ok(());
            }
            // Asked ahead for a later moment; this earlier one is confirmed on its own.
            self.confirming = None;
        }
        if !self.start_confirming(now) {
            let effects = self.engine.tick(now);
            return self.apply(effects, None);
        }
        Ok(())
    }

    /// Shortly before the due moment `due`: ask the source to confirm the apps the stream vouches
    /// for now, so the answer is in by the moment.
    fn confirm_ahead(&mut self, due: Timestamp) {
        self.confirmed_ahead = Some(due);
        if self.confirming.is_none() {
            self.start_confirming(due);
        }
    }

    /// How early a confirmation is asked before its due moment.
    fn confirm_lead_ms(&self) -> i64 {
        (2 * self.confirm_rtt_ms).clamp(CONFIRM_LEAD_MIN_MS, CONFIRM_LEAD_MAX_MS)
    }

    /// Asks one read of every live app the stream vouches for now, to confirm it up to `at`;
    /// false when there is none.
    fn start_confirming(&mut self, at: Timestamp) -> bool {
        let now = self.now();
        let live = self.live_apps();
        let vouched: Vec<AppKey> = self
            .freshness
            .vouched(now)
            .into_iter()
            .filter(|key| live.iter().any(|a| a.matches(&key.namespace, &key.name)))
            .collect();
        if vouched.is_empty() {
            return false;
        }
        let ticket = self.freshness.ticket();
        let apps: Vec<AppRef> = vouched
            .iter()
            .map(|k| AppRef {
                namespace: Some(k.namespace.clone()),
                name: k.name.clone(),
            })
            .collect();
        self.confirming = Some(Confirming {
            ticket,
            at,
            asked_at: now,
            apps: vouched
                .into_iter()
                .map(|k| {
                    let rv = self.freshness.resource_version(&k);
                    (k, rv)
                })
                .collect(),
            give_up_at: at.max(now).plus_ms(self.cfg.stale_after_ms),
        });
        self.ctx.source.request_read(ticket, apps);
        true
    }

    /// A confirming read answered: the same version as the last delivery vouches for the app up
    /// to the due moment, or up to the answer when it came ahead of the moment (the answer is
    /// then the observation the moment is decided on); any other version leaves it unvouched.
    fn confirmed(&mut self, ticket: u64, key: &AppKey, rv: Option<u64>) -> Result<()> {
        let now = self.now();
        let Some(c) = self.confirming.as_mut().filter(|c| c.ticket == ticket) else {
            return Ok(());
        };
        let Some(pos) = c.apps.iter().position(|(k, _)| k == key) else {
            return Ok(());
        };
        let (_, before) = c.apps.remove(pos);
        if c.apps.is_empty() {
            self.confirm_rtt_ms = now.ms_since(c.asked_at).max(0);
        }
        let at = c.at;
        if before.is_some() && before == rv {
            // Unchanged since the last delivery, up to the moment or, answered ahead of it, up
            // to the answer — itself judged next, as an observation fresh at the moment.
            let effects = self.engine.vouch(key, at.min(now));
            self.apply(effects, None)?;
        }
        self.finish_confirming()
    }

    /// A confirming read that brought no observation (overtaken, failed, refused).
    fn unconfirmed(&mut self, ticket: u64, key: &AppKey) {
        self.unconfirmed_where(|k| k == key, Some(ticket));
    }

    fn unconfirmed_where(&mut self, which: impl Fn(&AppKey) -> bool, ticket: Option<u64>) {
        if let Some(c) = self
            .confirming
            .as_mut()
            .filter(|c| ticket.is_none_or(|t| t == c.ticket))
        {
            c.apps.retain(|(k, _)| !which(k));
        }
    }

    /// The due moment has come and every app answered, or it is time to give up: decide what is
    /// due.
    fn finish_confirming(&mut self) -> Result<()> {
        let now = self.now();
        let done = self
            .confirming
            .as_ref()
            .is_some_and(|c| now >= c.at && (c.apps.is_empty() || now >= c.give_up_at));
        if !done {
            return Ok(());
        }
        let Some(c) = self.confirming.take() else {
            return Ok(());
        };
        self.last_wake = self.last_wake.max(c.at);
        let effects = self.engine.tick(now);
        self.apply(effects, None)
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

    /// Persist, then announce, then act: the store first so nothing printed or pushed is lost.
    fn apply(&mut self, effects: Vec<Effect>, tip: Option<&str>) -> Result<()> {
        let (watches, breaker) = self.engine.take_dirty();
        let idle = self.engine.take_idle_dirty();
        let arrived = self.engine.take_arrived();
        let mut events: Vec<Event> = Vec::new();
        let mut reverts = Vec::new();
        for e in effects {
            match e {
                Effect::Emit(ev) => events.push(ev),
                Effect::Revert(r) => reverts.push(r),
            }
        }
        if !watches.is_empty()
            || breaker.is_some()
            || !events.is_empty()
            || tip.is_some()
            || self.clear_reset_request
            || !idle.is_empty()
            || !arrived.is_empty()
        {
            self.store.write(Write {
                watches: &watches,
                breaker: breaker.as_ref(),
                events: &events,
                tip,
                baseline: None,
                clear_breaker_reset_request: self.clear_reset_request,
                idle: &idle,
                arrived: &arrived,
            })?;
            self.clear_reset_request = false;
        }
        for e in &events {
            if e.event == greenlight_core::event::EventKind::DirectiveRejected {
                self.rejected += 1;
            }
            self.ctx.out.event(e);
        }
        self.reverts.extend(reverts);
        self.sync_watched();
        Ok(())
    }

    /// One revert at a time, as a job; its outcome comes back as an input.
    fn start_revert(&mut self) {
        if self.reverting {
            return;
        }
        let Some(r) = self.reverts.pop_front() else {
            return;
        };
        self.reverting = true;
        let reverter = self.ctx.reverter.clone();
        let branch = self.branch.clone();
        let watch_id = r.watch_id.clone();
        let dry_run = self.cfg.dry_run;
        self.spawn_git(
            move || {
                if !dry_run {
                    return reverter.revert(&r, &branch);
                }
                // A revert decided before a restart in dry-run (never push): adopt one that
                // reached the branch before the crash, push nothing.
                match reverter.adopt_only(r.commit.as_str(), &branch) {
                    Ok(Some(revert)) => RevertOutcome::adopted(&revert),
                    Ok(None) => RevertOutcome::Failed {
                        message: format!(
                            "dry-run: the revert of {} decided before the restart was not pushed; revert it by hand if it is still wanted",
                            r.commit
                        ),
                    },
                    Err(e) => RevertOutcome::Failed {
                        message: format!("dry-run: looking for an existing revert failed: {e:#}"),
                    },
                }
            },
            move |result| JobDone::Reverted {
                watch_id,
                outcome: result.unwrap_or_else(|e| RevertOutcome::Failed {
                    message: format!("the revert task failed: {e}"),
                }),
            },
        );
    }
}

/// What one self-check cycle saw.
pub struct OnceSummary {
    pub branch: String,
    pub tip: String,
    /// Trailers in range that started no watch: users' content, reported, not a failure.
    pub rejected: usize,
    pub commits: usize,
    pub watches: usize,
    pub apps_listed: usize,
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
