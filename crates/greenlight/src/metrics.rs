//! What the watchdog tells Prometheus and the kubelet: the metrics `/metrics` serves
//! (`prometheus-client`, every name prefixed `greenlight_`; the reference is `docs/metrics.md`)
//! and the state of the probes `/healthz`, `/readyz` and `/startupz` (`crate::serve`).
//!
//! The runtime updates a [`Metrics`] where it already emits events, handles source messages and
//! runs git jobs; it only ever writes here, and reads nothing back, so metrics never change a
//! verdict. Labels come from bounded sets only — the engine's state names, a source's short
//! name, a git job's kind, an error's [`RevertError::metric_label`] — never free text, a commit
//! SHA or anything a secret could be in.

use crate::clock::Clock;
use greenlight_core::judge::RevertOutcome;
use greenlight_core::time::Timestamp;
use greenlight_core::watch::{State, Watch};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The content type of OpenMetrics text, which Prometheus asks for first.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of Prometheus' classic text format (version 0.0.4), for scrapers that do not
/// ask for OpenMetrics.
pub const PROMETHEUS_TEXT_CONTENT_TYPE: &str =
    prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Every state the engine names, in its order: each has a `greenlight_watches` series, zero
/// when no watch is in it.
const STATES: [State; 9] = [
    State::WaitingReach,
    State::Judging,
    State::Confirmed,
    State::Fail,
    State::Reverted,
    State::NotReached,
    State::ErrorUnwatchable,
    State::Inconclusive,
    State::RevertFailed,
];

/// The least `/healthz` allows between two turns of the runtime's loop.
pub const MIN_LOOP_WINDOW: Duration = Duration::from_secs(60);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabel {
    verdict: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabel {
    error: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabel {
    source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GapLabels {
    source: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabels {
    forge: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobLabel {
    kind: &'static str,
}

/// Why a revert did not land, as a metric label (`greenlight_revert_failures_total{error}`):
/// a bounded set, like controller-rs' error enum and its `metric_label()`. The words of the
/// failure stay in the event and the log; only its kind becomes a label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RevertError {
    /// `git revert` stopped on a conflict.
    Conflict,
    /// The commit's changes are no longer on the branch.
    NothingToRevert,
    /// The remote rejected every push attempt.
    PushRejected,
    /// A newer commit touched the app's paths: nothing was pushed (a fix-forward).
    Superseded,
    /// Dry-run after a restart: a revert decided before it was not pushed.
    DryRunNotPushed,
    /// Any other failure (git could not run, the remote was unreachable, an odd answer).
    Git,
    /// The revert's pull request was closed unmerged.
    Closed,
}

impl RevertError {
    pub const ALL: [RevertError; 7] = [
        RevertError::Conflict,
        RevertError::NothingToRevert,
        RevertError::PushRejected,
        RevertError::Superseded,
        RevertError::DryRunNotPushed,
        RevertError::Git,
        RevertError::Closed,
    ];

    /// The label value.
    pub fn metric_label(self) -> &'static str {
        match self {
            RevertError::Conflict => "conflict",
            RevertError::NothingToRevert => "nothing_to_revert",
            RevertError::PushRejected => "push_rejected",
            RevertError::Superseded => "superseded",
            RevertError::DryRunNotPushed => "dry_run_not_pushed",
            RevertError::Git => "git",
            RevertError::Closed => "pull_request_closed",
        }
    }

    /// The kind of a revert that did not land; `None` for one pushed or adopted. A failure's
    /// kind is read from the words the runtime's git adapter (`runtime/git.rs`) and git's
    /// errors (`greenlight_git::Error::PushRejected`) begin with.
    pub fn of(outcome: &RevertOutcome) -> Option<RevertError> {
        match outcome {
            RevertOutcome::Pushed { .. }
            | RevertOutcome::Adopted { .. }
            | RevertOutcome::Proposed { .. }
            | RevertOutcome::Merged { .. } => None,
            RevertOutcome::Closed { .. } => Some(RevertError::Closed),
            RevertOutcome::Superseded { .. } => Some(RevertError::Superseded),
            RevertOutcome::Failed { message } => Some(if message.starts_with(CONFLICT) {
                RevertError::Conflict
            } else if message.starts_with(NOTHING_TO_REVERT) {
                RevertError::NothingToRevert
            } else if message.starts_with(DRY_RUN) {
                RevertError::DryRunNotPushed
            } else if message.starts_with("pushing the revert of ")
                && message.contains(" was rejected ")
            {
                RevertError::PushRejected
            } else {
                RevertError::Git
            }),
        }
    }
}

/// The words a revert failure's message begins with, as the runtime's git adapter and its
/// git lane write them: [`RevertError::of`] reads the kind from them.
pub(crate) const CONFLICT: &str = "conflict: ";
pub(crate) const NOTHING_TO_REVERT: &str = "nothing to revert: ";
pub(crate) const DRY_RUN: &str = "dry-run: ";

/// A git job's kind, the label of `greenlight_git_job_duration_seconds`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GitJob {
    /// Fetch the branch and read the new commits.
    Fetch,
    /// Answer ancestry questions (fetching first when a revision is unknown).
    Ancestry,
    /// Revert and push, or adopt a revert already pushed.
    Revert,
}

impl GitJob {
    pub fn metric_label(self) -> &'static str {
        match self {
            GitJob::Fetch => "fetch",
            GitJob::Ancestry => "ancestry",
            GitJob::Revert => "revert",
        }
    }
}

/// Why a suspected gap in a source's deliveries is suspected (`greenlight_source_gaps_total{kind}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Gap {
    /// The source said it skipped a message (`SourceMsg::Skipped`).
    Skipped,
    /// A read found a newer version of an app than the stream had delivered.
    ReadFoundNewer,
}

impl Gap {
    pub fn metric_label(self) -> &'static str {
        match self {
            Gap::Skipped => "skipped",
            Gap::ReadFoundNewer => "read_found_newer",
        }
    }
}

/// A source's short name as a label: its name's letters and digits, lower-cased
/// (`Argo CD` → `argocd`).
pub fn source_label(name: &str) -> String {
    let label: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if label.is_empty() {
        "source".to_string()
    } else {
        label
    }
}

/// The probes' answer: 200 with `ok`, or 503 with why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    Ok(String),
    Not(String),
}

/// What the probes and the time-derived gauges are computed from.
struct Live {
    /// Start-up finished: state loaded, clone ready.
    started: bool,
    /// The loop's last turn, in this process' monotonic time.
    last_turn: Option<Instant>,
    /// How long `/healthz` allows between turns.
    loop_window: Duration,
    /// Per source: when it was first named, and its last complete listing.
    sources: BTreeMap<String, SourceLive>,
    /// The source the runtime reads (its label).
    source: Option<String>,
    /// The watches in `WAITING_REACH`: when each started and its deadline.
    waiting: Vec<(Timestamp, i64)>,
    /// Each held watch's last state, so a verdict is counted once.
    seen: HashMap<String, State>,
    /// The watches the engine let go since start (finished, stored), by state: still counted
    /// by `greenlight_watches` as the verdicts reached since start.
    let_go: HashMap<State, i64>,
    /// With `--leader-elect`: this replica's part (`None`: it runs alone).
    role: Option<Role>,
}

/// A replica's part under `--leader-elect` (docs/deploy.md#leader).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// It holds the Lease: it judges, writes and pushes.
    Leader { identity: String },
    /// It stands by, its source warm; `leader` is the Lease's holder as last read.
    Standby {
        identity: String,
        leader: Option<String>,
    },
}

struct SourceLive {
    named_at: Timestamp,
    last_complete: Option<Timestamp>,
    connected: bool,
    /// Times it connected in this process.
    connections: u64,
    /// A complete listing answered since the last connection.
    listed_since_connected: bool,
}

/// The watchdog's metrics and probe state. Cheap to share (`Arc`); every method takes `&self`.
pub struct Metrics {
    registry: Registry,
    clock: Arc<dyn Clock>,
    watches: Family<StateLabel, Gauge>,
    verdicts: Family<VerdictLabel, Counter>,
    reverts_pushed: Counter,
    revert_failures: Family<ErrorLabel, Counter>,
    breaker_open: Gauge,
    since_complete: Family<SourceLabel, Gauge<f64, AtomicU64>>,
    reconnects: Family<SourceLabel, Counter>,
    gaps: Family<GapLabels, Counter>,
    git_jobs: Family<JobLabel, Histogram, fn() -> Histogram>,
    push_hooks: Family<HookLabels, Counter>,
    event_write_failures: Counter,
    /// Counts kept elsewhere (the Kubernetes Event writer's), added to
    /// `event_write_failures` at each scrape: each with what was added so far.
    event_failure_counts: Mutex<Vec<(EventFailureCount, u64)>>,
    waiting_ratio: Gauge<f64, AtomicU64>,
    leader: Gauge,
    live: Mutex<Live>,
}

/// A count of Event writes given up that another part keeps (`greenlight_kube`'s writer).
type EventFailureCount = Box<dyn Fn() -> u64 + Send + Sync>;

fn job_histogram() -> Histogram {
    // 50 ms … about 200 s.
    Histogram::new(exponential_buckets(0.05, 2.0, 13))
}

impl Metrics {
    /// Every metric registered, the build's version and commit recorded; `clock` is the one
    /// the runtime judges by (ages are computed from it at each scrape).
    pub fn new(clock: Arc<dyn Clock>) -> Metrics {
        Self::with_build(clock, env!("CARGO_PKG_VERSION"), build_commit())
    }

    fn with_build(clock: Arc<dyn Clock>, version: &str, commit: &str) -> Metrics {
        let mut registry = Registry::with_prefix("greenlight");
        let watches = Family::<StateLabel, Gauge>::default();
        registry.register(
            "watches",
            "Watches this process holds, by state (live ones, FAIL awaiting its revert, and the verdicts reached since start)",
            watches.clone(),
        );
        for s in STATES {
            watches
                .get_or_create(&StateLabel { state: s.as_str() })
                .set(0);
        }
        let verdicts = Family::<VerdictLabel, Counter>::default();
        registry.register(
            "verdicts",
            "Verdicts reached, by the state they put a watch in",
            verdicts.clone(),
        );
        // Every series exists from the start at zero, so that `increase()` sees the first one.
        for s in STATES.iter().filter(|s| s.is_terminal()) {
            verdicts.get_or_create_owned(&VerdictLabel {
                verdict: s.as_str(),
            });
        }
        let reverts_pushed = Counter::default();
        registry.register(
            "reverts_pushed",
            "Reverts greenlight pushed",
            reverts_pushed.clone(),
        );
        let revert_failures = Family::<ErrorLabel, Counter>::default();
        registry.register(
            "revert_failures",
            "Reverts that did not land, by kind of failure",
            revert_failures.clone(),
        );
        for e in RevertError::ALL {
            revert_failures.get_or_create_owned(&ErrorLabel {
                error: e.metric_label(),
            });
        }
        let breaker_open = Gauge::default();
        registry.register(
            "breaker_open",
            "1 while the revert breaker is open (reverts blocked until a human resets it), else 0",
            breaker_open.clone(),
        );
        let since_complete = Family::<SourceLabel, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "source_seconds_since_complete_observation",
            "Seconds since the source last answered a listing completely (since start when it has not yet)",
            since_complete.clone(),
        );
        let reconnects = Family::<SourceLabel, Counter>::default();
        registry.register(
            "source_reconnects",
            "Times the source's change stream connected again after its first connection",
            reconnects.clone(),
        );
        let gaps = Family::<GapLabels, Counter>::default();
        registry.register(
            "source_gaps",
            "Suspected gaps in the source's deliveries, by why they are suspected",
            gaps.clone(),
        );
        let git_jobs =
            Family::<JobLabel, Histogram, fn() -> Histogram>::new_with_constructor(job_histogram);
        registry.register(
            "git_job_duration_seconds",
            "How long git jobs took, by kind",
            git_jobs.clone(),
        );
        let push_hooks = Family::<HookLabels, Counter>::default();
        registry.register(
            "push_hook_deliveries",
            "Push webhook deliveries received on --listen, by forge and what became of them (fetch, duplicate, ignored, refused)",
            push_hooks.clone(),
        );
        let event_write_failures = Counter::default();
        registry.register(
            "event_write_failures",
            "Kubernetes Events that could not be written",
            event_write_failures.clone(),
        );
        let waiting_ratio = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "waiting_reach_deadline_ratio",
            "The largest time in WAITING_REACH over the watch's deadline, among the watches waiting for reach (0 when none); above 1 a verdict is overdue",
            waiting_ratio.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica leads (holds the Lease, or runs without --leader-elect), 0 while it stands by",
            leader.clone(),
        );
        leader.set(1);
        registry.register(
            "build",
            "The version and commit greenlight was built from",
            Info::new(vec![
                ("version".to_string(), version.to_string()),
                ("commit".to_string(), commit.to_string()),
            ]),
        );
        Metrics {
            registry,
            clock,
            watches,
            verdicts,
            reverts_pushed,
            revert_failures,
            breaker_open,
            since_complete,
            reconnects,
            gaps,
            git_jobs,
            push_hooks,
            event_write_failures,
            event_failure_counts: Mutex::new(Vec::new()),
            waiting_ratio,
            leader,
            live: Mutex::new(Live {
                started: false,
                last_turn: None,
                loop_window: MIN_LOOP_WINDOW,
                sources: BTreeMap::new(),
                source: None,
                waiting: Vec::new(),
                seen: HashMap::new(),
                let_go: HashMap::new(),
                role: None,
            }),
        }
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Event writes given up as `count` says (a count that only grows, kept by the Event
    /// writer), added to `greenlight_event_write_failures_total` at each scrape.
    pub fn count_event_write_failures(&self, count: impl Fn() -> u64 + Send + Sync + 'static) {
        self.event_failure_counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((Box::new(count), 0));
    }

    /// The runtime reads `source` (a label from [`source_label`]); its loop turns at least
    /// every `fetch_interval`.
    pub fn runtime_configured(&self, source: &str, fetch_interval: Duration) {
        let now = self.clock.now();
        let mut live = self.live();
        live.loop_window = (fetch_interval * 3).max(MIN_LOOP_WINDOW);
        live.source = Some(source.to_string());
        live.sources
            .entry(source.to_string())
            .or_insert(SourceLive {
                named_at: now,
                last_complete: None,
                connected: false,
                connections: 0,
                listed_since_connected: false,
            });
        drop(live);
        // Each series exists from the start, at zero.
        self.since_complete.get_or_create_owned(&SourceLabel {
            source: source.to_string(),
        });
        self.reconnects.get_or_create_owned(&SourceLabel {
            source: source.to_string(),
        });
        for gap in [Gap::Skipped, Gap::ReadFoundNewer] {
            self.gaps.get_or_create_owned(&GapLabels {
                source: source.to_string(),
                kind: gap.metric_label(),
            });
        }
    }

    /// This replica's part under `--leader-elect`: `greenlight_leader` and `/readyz` say it.
    pub fn set_role(&self, role: Role) {
        self.leader.set(matches!(role, Role::Leader { .. }) as i64);
        self.live().role = Some(role);
    }

    /// Whether this replica stands by under `--leader-elect` (another one judges and fetches).
    pub fn standing_by(&self) -> bool {
        matches!(self.live().role, Some(Role::Standby { .. }))
    }

    /// A standby's source: connected or not, without counting connections (the runtime of a
    /// replica that takes over counts from its own first connection).
    pub fn standby_source(&self, source: &str, connected: bool) {
        self.with_source(source, |s| s.connected = connected);
    }

    /// Start-up finished: the state is loaded and the clone ready.
    pub fn started(&self) {
        self.live().started = true;
    }

    /// The runtime's loop turned.
    pub fn loop_turned(&self) {
        self.live().last_turn = Some(Instant::now());
    }

    fn with_source(&self, source: &str, f: impl FnOnce(&mut SourceLive)) {
        let now = self.clock.now();
        let mut live = self.live();
        let s = live
            .sources
            .entry(source.to_string())
            .or_insert(SourceLive {
                named_at: now,
                last_complete: None,
                connected: false,
                connections: 0,
                listed_since_connected: false,
            });
        f(s);
    }

    /// The source's change stream connected.
    pub fn source_connected(&self, source: &str) {
        let mut again = false;
        self.with_source(source, |s| {
            s.connected = true;
            s.listed_since_connected = false;
            s.connections += 1;
            again = s.connections > 1;
        });
        if again {
            self.reconnects
                .get_or_create(&SourceLabel {
                    source: source.to_string(),
                })
                .inc();
        }
    }

    /// The source's change stream was lost (it reconnects on its own).
    pub fn source_lost(&self, source: &str) {
        self.with_source(source, |s| s.connected = false);
    }

    /// The source answered a listing completely at `at`; `since_connected`: a listing asked
    /// for after the stream's last connection (only such a one makes the watchdog ready).
    pub fn complete_listing(&self, source: &str, at: Timestamp, since_connected: bool) {
        self.with_source(source, |s| {
            s.last_complete = Some(at);
            if s.connected && since_connected {
                s.listed_since_connected = true;
            }
        });
    }

    /// A suspected gap in the source's deliveries.
    pub fn source_gap(&self, source: &str, gap: Gap) {
        self.gaps
            .get_or_create(&GapLabels {
                source: source.to_string(),
                kind: gap.metric_label(),
            })
            .inc();
    }

    /// A push webhook delivery from `forge` (`github`, `gitlab`, `gitea`) ended as `result`.
    pub fn push_hook(&self, forge: &'static str, result: &'static str) {
        self.push_hooks
            .get_or_create(&HookLabels { forge, result })
            .inc();
    }

    /// A git job of `kind` took `took`.
    pub fn git_job(&self, kind: GitJob, took: Duration) {
        self.git_jobs
            .get_or_create(&JobLabel {
                kind: kind.metric_label(),
            })
            .observe(took.as_secs_f64());
    }

    /// What the revert executor reported.
    pub fn revert_finished(&self, outcome: &RevertOutcome) {
        if matches!(outcome, RevertOutcome::Pushed { .. }) {
            self.reverts_pushed.inc();
        }
        if let Some(e) = RevertError::of(outcome) {
            self.revert_failures
                .get_or_create(&ErrorLabel {
                    error: e.metric_label(),
                })
                .inc();
        }
    }

    /// The engine's watches after a step, `changed` those the step wrote, and whether the
    /// breaker is open. A watch's verdict is counted when it changes to a terminal state
    /// (a `FAIL`, then its `REVERTED` or `REVERT_FAILED`, are two).
    pub fn watches_changed(&self, all: &[Watch], changed: &[Watch], breaker_open: bool) {
        let mut live = self.live();
        let mut counts: HashMap<State, i64> = live.let_go.clone();
        let mut waiting = Vec::new();
        for w in all {
            *counts.entry(w.state()).or_default() += 1;
            if w.state() == State::WaitingReach {
                waiting.push((w.watch_started_at, w.deadline_ms));
            }
        }
        for s in STATES {
            self.watches
                .get_or_create(&StateLabel { state: s.as_str() })
                .set(counts.get(&s).copied().unwrap_or(0));
        }
        self.breaker_open.set(i64::from(breaker_open));
        live.waiting = waiting;
        for w in changed {
            let state = w.state();
            let before = live.seen.insert(w.id.clone(), state);
            if state.is_terminal() && before != Some(state) {
                self.verdicts
                    .get_or_create(&VerdictLabel {
                        verdict: state.as_str(),
                    })
                    .inc();
            }
        }
    }

    /// Watches the engine let go (finished, stored, unchangeable): their verdicts are counted
    /// already, and `greenlight_watches` keeps counting them by their final state.
    pub fn watches_forgotten(&self, ids: &[String]) {
        if ids.is_empty() {
            return;
        }
        let mut live = self.live();
        for id in ids {
            if let Some(state) = live.seen.remove(id) {
                *live.let_go.entry(state).or_default() += 1;
            }
        }
    }

    /// The watches a start loaded: their states are known, so none is counted as a verdict
    /// again.
    pub fn watches_loaded(&self, all: &[Watch], breaker_open: bool) {
        {
            let mut live = self.live();
            for w in all {
                live.seen.insert(w.id.clone(), w.state());
            }
        }
        self.watches_changed(all, &[], breaker_open);
    }

    /// The page `/metrics` serves: OpenMetrics text, or Prometheus' classic text format.
    pub fn render(&self, openmetrics: bool) -> String {
        let now = self.clock.now();
        for (count, added) in self
            .event_failure_counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter_mut()
        {
            let now_count = count();
            self.event_write_failures
                .inc_by(now_count.saturating_sub(*added));
            *added = now_count.max(*added);
        }
        {
            let live = self.live();
            for (name, s) in &live.sources {
                let since = s.last_complete.unwrap_or(s.named_at);
                self.since_complete
                    .get_or_create(&SourceLabel {
                        source: name.clone(),
                    })
                    .set(now.ms_since(since).max(0) as f64 / 1000.0);
            }
            let ratio = live
                .waiting
                .iter()
                .map(|(started, deadline_ms)| {
                    now.ms_since(*started).max(0) as f64 / (*deadline_ms).max(1) as f64
                })
                .fold(0.0, f64::max);
            self.waiting_ratio.set(ratio);
        }
        let mut out = String::new();
        let written = if openmetrics {
            prometheus_client::encoding::text::encode(&mut out, &self.registry)
        } else {
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
        };
        // Writing to a String never fails; an encoder error would be a label it cannot
        // write, and every label here is plain text.
        if let Err(e) = written {
            out.push_str(&format!("# encoding failed: {e}\n"));
        }
        out
    }

    /// `/healthz`: the loop turned within its window (3 × `--fetch-interval`, at least 60 s).
    /// Before the loop's first turn (start-up: state, clone) it is healthy: `/startupz` says
    /// whether start-up finished.
    pub fn healthz(&self) -> Probe {
        let live = self.live();
        match live.last_turn {
            None => Probe::Ok("ok: starting (see /startupz)".into()),
            Some(t) if t.elapsed() <= live.loop_window => Probe::Ok("ok".into()),
            Some(t) => Probe::Not(format!(
                "the runtime's loop last turned {} s ago; it turns at least every {} s",
                t.elapsed().as_secs(),
                live.loop_window.as_secs()
            )),
        }
    }

    /// `/readyz`: the source is connected and answered a complete listing since it connected;
    /// a standby's, connected. Under `--leader-elect` the answer says who leads.
    pub fn readyz(&self) -> Probe {
        let live = self.live();
        let Some(name) = &live.source else {
            return Probe::Not("starting: no source yet".into());
        };
        let source = live.sources.get(name);
        match &live.role {
            Some(Role::Standby { identity, leader }) => {
                let leads = match leader {
                    Some(l) => format!("the leader is {l}"),
                    None => "no leader yet".to_string(),
                };
                return match source {
                    Some(s) if s.connected => Probe::Ok(format!(
                        "ok: standby {identity}, source {name} connected; {leads}"
                    )),
                    _ => Probe::Not(format!(
                        "standby {identity}: source {name} not connected; {leads}"
                    )),
                };
            }
            Some(Role::Leader { identity }) => {
                if let Some(s) = source
                    && s.connected
                    && s.listed_since_connected
                {
                    return Probe::Ok(format!("ok: leader {identity}"));
                }
            }
            None => {}
        }
        match source {
            Some(s) if s.connected && s.listed_since_connected => Probe::Ok("ok".into()),
            Some(s) if s.connected => Probe::Not(format!(
                "source {name} connected; waiting for a complete listing"
            )),
            Some(s) if s.connections > 0 => {
                Probe::Not(format!("source {name} lost its stream; reconnecting"))
            }
            _ => Probe::Not(format!("source {name} not connected yet")),
        }
    }

    /// `/startupz`: the state is loaded and the clone ready.
    pub fn startupz(&self) -> Probe {
        if self.live().started {
            Probe::Ok("ok".into())
        } else {
            Probe::Not("starting: loading the state and cloning the repository".into())
        }
    }
}

/// The commit `greenlight --version` names: its SHA (12 digits), or `unknown`.
fn build_commit() -> &'static str {
    env!("GREENLIGHT_BUILD_COMMIT")
        .split(' ')
        .next()
        .unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenlight_core::commit::CommitId;

    struct Fixed(i64);
    impl Clock for Fixed {
        fn now(&self) -> Timestamp {
            Timestamp(self.0)
        }
    }

    fn metrics(now: i64) -> Metrics {
        Metrics::with_build(Arc::new(Fixed(now)), "0.1.0", "0123456789ab")
    }

    #[test]
    fn revert_failures_become_bounded_labels() {
        let failed = |m: &str| RevertOutcome::Failed { message: m.into() };
        let cases = [
            (failed("conflict: CONFLICT (content)"), Some("conflict")),
            (
                failed("nothing to revert: empty"),
                Some("nothing_to_revert"),
            ),
            // git's own error, as the adapter passes it on.
            (
                failed(
                    &greenlight_git::Error::PushRejected {
                        commit: "abc".into(),
                        branch: "main".into(),
                        repo: "r".into(),
                        attempts: 3,
                        reason: "x".into(),
                    }
                    .to_string(),
                ),
                Some("push_rejected"),
            ),
            (
                failed("dry-run: the revert of abc …"),
                Some("dry_run_not_pushed"),
            ),
            (
                failed("`git fetch` failed for https://host/r (exit 128): token s3cret"),
                Some("git"),
            ),
            (
                RevertOutcome::Superseded { newer: Vec::new() },
                Some("superseded"),
            ),
            (
                RevertOutcome::Pushed {
                    revert: CommitId::parse(&"a".repeat(40)).unwrap(),
                },
                None,
            ),
        ];
        for (outcome, label) in cases {
            assert_eq!(
                RevertError::of(&outcome).map(RevertError::metric_label),
                label,
                "{outcome:?}"
            );
        }
        let m = metrics(0);
        m.revert_finished(&failed("`git push` failed: https://user:s3cret@host"));
        let page = m.render(true);
        assert!(
            page.contains("greenlight_revert_failures_total{error=\"git\"} 1"),
            "{page}"
        );
        assert!(!page.contains("s3cret"), "{page}");
    }

    #[test]
    fn source_labels_are_short_names() {
        assert_eq!(source_label("Argo CD"), "argocd");
        assert_eq!(source_label("the source"), "thesource");
        assert_eq!(source_label("—"), "source");
    }

    #[test]
    fn readiness_needs_a_connection_and_a_complete_listing_after_it() {
        let m = metrics(1_000);
        assert!(matches!(m.readyz(), Probe::Not(_)));
        m.runtime_configured("argocd", Duration::from_secs(30));
        assert_eq!(
            m.readyz(),
            Probe::Not("source argocd not connected yet".into())
        );
        // A listing before the stream connects proves nothing about the stream.
        m.complete_listing("argocd", Timestamp(1_000), false);
        assert!(matches!(m.readyz(), Probe::Not(_)));
        m.source_connected("argocd");
        assert!(
            matches!(m.readyz(), Probe::Not(r) if r.contains("waiting for a complete listing"))
        );
        // Nor one asked for before it and answered after.
        m.complete_listing("argocd", Timestamp(1_000), false);
        assert!(matches!(m.readyz(), Probe::Not(_)));
        m.complete_listing("argocd", Timestamp(1_000), true);
        assert_eq!(m.readyz(), Probe::Ok("ok".into()));
        m.source_lost("argocd");
        assert!(matches!(m.readyz(), Probe::Not(r) if r.contains("reconnecting")));
        m.source_connected("argocd");
        assert!(matches!(m.readyz(), Probe::Not(_)));
        let page = m.render(true);
        assert!(
            page.contains("greenlight_source_reconnects_total{source=\"argocd\"} 1"),
            "{page}"
        );
    }

    #[test]
    fn startup_and_health() {
        let m = metrics(0);
        assert!(matches!(m.startupz(), Probe::Not(_)));
        assert!(matches!(m.healthz(), Probe::Ok(_)));
        m.started();
        assert_eq!(m.startupz(), Probe::Ok("ok".into()));
        m.loop_turned();
        assert_eq!(m.healthz(), Probe::Ok("ok".into()));
        m.live().last_turn = Some(Instant::now() - MIN_LOOP_WINDOW - Duration::from_secs(1));
        assert!(matches!(m.healthz(), Probe::Not(r) if r.contains("last turned 61 s ago")));
    }

    #[test]
    fn the_largest_wait_for_reach_over_its_deadline() {
        let m = metrics(25_000);
        assert!(
            m.render(false)
                .contains("greenlight_waiting_reach_deadline_ratio 0.0\n")
        );
        // Started at 0 with a 10 s deadline, and at 20 s with a 1 s one: 2.5 and 5.0.
        m.live().waiting = vec![(Timestamp(0), 10_000), (Timestamp(20_000), 1_000)];
        let page = m.render(false);
        assert!(
            page.contains("greenlight_waiting_reach_deadline_ratio 5.0\n"),
            "{page}"
        );
    }

    #[test]
    fn ages_are_computed_at_the_scrape() {
        let m = metrics(125_000);
        m.runtime_configured("argocd", Duration::from_secs(1));
        m.complete_listing("argocd", Timestamp(5_000), false);
        let page = m.render(true);
        assert!(
            page.contains(
                "greenlight_source_seconds_since_complete_observation{source=\"argocd\"} 120.0"
            ),
            "{page}"
        );
        assert!(
            page.contains("greenlight_build_info{version=\"0.1.0\",commit=\"0123456789ab\"} 1"),
            "{page}"
        );
        assert!(
            page.contains("greenlight_watches{state=\"WAITING_REACH\"} 0"),
            "{page}"
        );
        assert!(page.ends_with("# EOF\n"), "{page}");
        let classic = m.render(false);
        assert!(!classic.contains("# EOF"), "{classic}");
        assert!(classic.contains("greenlight_breaker_open 0"), "{classic}");
    }
}
