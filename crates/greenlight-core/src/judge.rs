//! The watch judge (`docs/verdicts.md`): a sans-IO state machine. The caller feeds it new commits, app
//! observations, revert results and the current time; it returns events and revert requests.
//! It never reads a clock, touches git or calls Argo CD: questions it cannot answer alone
//! (is this commit an ancestor of that revision?) are asked up front with [`Engine::reach_questions`]
//! and [`Engine::arrival_questions`] and answered in an [`Ancestry`].
//!
//! Life of a watch: `WAITING_REACH` → (reach) `JUDGING` → `CONFIRMED` | `FAIL` | `REVERTED` |
//! `REVERT_FAILED` | `INCONCLUSIVE`; or `WAITING_REACH` → `NOT_REACHED` | `INCONCLUSIVE`; or
//! any live state → `ERROR_UNWATCHABLE`. A `FAIL` in arm mode that may revert is its own phase
//! until the executor reports back, so a crash in between re-issues the revert (which the
//! executor makes idempotent by adopting an existing revert). Each watch's data and the moves
//! between phases live in [`crate::watch`]; every word said lives in [`crate::reason`].

use crate::breaker::{Breaker, OPEN_AFTER};
use crate::commit::CommitId;
use crate::directive::AppRef;
use crate::directive::{Directive, DirectiveError, Mode, directives_in};
use crate::event::{Event, EventKind, Evidence, Outcome};
use crate::paths::{Touch, touches};
use crate::reason::{
    APP_DOES_NOT_EXIST, ArmBlocked, Deadline, Failure, HEALTH_BROKE, Inconclusive, Message,
    NOT_HEALTHY, NoEvidence, NoRevert, NotReached, StreakBreak, Unhealthy, Unwatchable, Verdict,
    revert_commit_reason, with_left_out,
};
use crate::snapshot::{
    AppKey, AppSnapshot, Chronic, Glimpse, Health, OperationFacts, ReachCandidate, ReachVia,
    ResourceHealthSource, ResourceView, ScopedResource, SourceFacts, SourcePaths, is_git_sha,
};
use crate::tape::{Answer, Recording, RevertGate, Shown, Step};
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt::Display;

pub use crate::commit::CommitInfo;
pub use crate::watch::{
    Baseline, Before, BeforeSeen, FailedSync, LaterCommit, Phase, RevertOutcome, RevertProposal,
    Seen, State, Watch,
};

/// The judge's settings, from the command line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgeConfig {
    /// How long the health condition must hold without a break (`docs/verdicts.md#stability`).
    pub stable_for_ms: i64,
    /// An observation older than this when a deadline decides makes the verdict INCONCLUSIVE.
    pub stale_after_ms: i64,
    /// How long an app that does not exist is waited for (the commit may create it).
    pub unknown_app_grace_ms: i64,
    /// Judge only, whatever the mode (`docs/verdicts.md#dry-run`).
    pub dry_run: bool,
    pub trailer_key: String,
    /// The watched repository (for messages) and its tracked branch.
    pub repo: String,
    pub branch: String,
    /// Whether `branch` is the remote's HEAD branch (then `targetRevision: HEAD` tracks it).
    pub branch_is_default: bool,
    /// How long after a `NOT_REACHED` its commit reaching the app later re-opens the watch
    /// (`docs/verdicts.md#reopen`); 0: never.
    #[serde(default = "default_reopen_horizon_ms")]
    pub reopen_horizon_ms: i64,
    /// Judge health by the strict aggregate only, never relative to a watch's baseline (the
    /// promotion gate's meaning of healthy: its candidate must be clean, not as clean as before).
    #[serde(default)]
    pub strict_health: bool,
    /// Watch the commits another greenlight process judges (`trailer::JUDGED_BY`): only the
    /// promotion gate's own judge of its candidate does; a watchdog daemon never does.
    #[serde(default)]
    pub gate_candidates: bool,
    /// With `strict_health`: judge only these resources of the app (the gate's candidate: its
    /// workload and Service), never the rest a shared Application holds — another workload's
    /// kept candidate, Degraded, must not block this one ([`healthy_scoped`]). Empty: the app.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health_scope: Vec<ScopedResource>,
    /// Paths a later commit may change without making a verdict unattributable, read as
    /// `.gitignore` lines ([`crate::paths::exempt`]): the gate's candidate shares its directory
    /// with other workloads' candidates, whose files it exempts before re-including its own.
    /// Every other changed path under the app's source paths still counts. Empty: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attribution_exempt: Vec<String>,
    /// A watch asked for from outside the commits' messages (`greenlight wait`): only this
    /// commit starts a watch, with this directive, whatever trailers it or any other commit
    /// carries — a greenlight revert and a gate's candidate included, since someone asked. Its
    /// question is whether the app runs the commit healthily, not whether the commit caused
    /// what happened: a later commit to the app's paths does not end it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked: Option<AskedWatch>,
}

/// The one watch `greenlight wait` asks the judge for ([`JudgeConfig::asked`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskedWatch {
    pub commit: CommitId,
    pub directive: Directive,
}

/// A day: longer than a sync window holds syncs, short enough that a re-opened watch is still
/// about the change someone is waiting for.
pub const DEFAULT_REOPEN_HORIZON_MS: i64 = 24 * 3_600_000;

fn default_reopen_horizon_ms() -> i64 {
    DEFAULT_REOPEN_HORIZON_MS
}

impl JudgeConfig {
    pub fn new(repo: &str, branch: &str, branch_is_default: bool) -> JudgeConfig {
        JudgeConfig {
            stable_for_ms: 120_000,
            stale_after_ms: 30_000,
            unknown_app_grace_ms: 60_000,
            dry_run: false,
            trailer_key: crate::directive::DEFAULT_TRAILER_KEY.to_string(),
            repo: repo.to_string(),
            branch: branch.to_string(),
            branch_is_default,
            reopen_horizon_ms: DEFAULT_REOPEN_HORIZON_MS,
            strict_health: false,
            gate_candidates: false,
            health_scope: Vec::new(),
            attribution_exempt: Vec::new(),
            asked: None,
        }
    }

    /// How much of one gap between observations that nothing vouched for a healthy streak may
    /// count: `--stale-after`, and never more than a quarter of `--stable-for`, so a window is
    /// never mostly unobserved time, whatever the two are set to (`docs/verdicts.md#observed-time`).
    pub fn unobserved_slack_ms(&self) -> i64 {
        self.stale_after_ms.min(self.stable_for_ms / 4).max(0)
    }

    fn tracks_branch(&self, target_revision: &str) -> bool {
        let t = target_revision.trim();
        t == self.branch
            || t.strip_prefix("refs/heads/") == Some(self.branch.as_str())
            || (self.branch_is_default && (t.is_empty() || t == "HEAD"))
    }
}

/// Answers to ancestry questions: `(commit, revision) → commit is revision or an ancestor of it`.
/// A missing answer means git could not tell (unknown object) and counts as "no". Questions are
/// string pairs: the revision side is whatever Argo CD reported, and git is asked as spelled.
#[derive(Clone, Debug, Default)]
pub struct Ancestry(pub HashMap<(String, String), bool>);

impl Ancestry {
    pub fn contains(&self, commit: &str, revision: &str) -> bool {
        commit.eq_ignore_ascii_case(revision)
            || self
                .0
                .get(&(commit.to_string(), revision.to_string()))
                .copied()
                .unwrap_or(false)
    }

    /// Whether git said that `revision` does not contain `commit` (an unanswered question is
    /// no such answer).
    pub fn knows_not(&self, commit: &str, revision: &str) -> bool {
        !commit.eq_ignore_ascii_case(revision)
            && self.0.get(&(commit.to_string(), revision.to_string())) == Some(&false)
    }
}

/// A revert the executor should perform (fetch, adopt an existing revert or `git revert` +
/// fast-forward push).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevertRequest {
    pub watch_id: String,
    pub commit: CommitId,
    pub subject: String,
    pub app: String,
    pub reason: String,
    /// Issued again after a restart: a revert pushed before the crash, even one a human has
    /// reverted since, is adopted, never pushed a second time (`docs/verdicts.md#adoption`).
    pub reissued: bool,
    /// The app's source paths: a commit on the branch after the reverted one that touches them
    /// and that the judge has not heard of stops the revert (`docs/verdicts.md#evidence`,
    /// nothing newer decided it).
    pub hold_on: SourcePaths,
    /// For a merge: the parent that was the branch, whose side the revert keeps (`-m` names
    /// it). `None`: git's default, the first parent.
    #[serde(default)]
    pub mainline: Option<CommitId>,
    /// The newest commit the judge had heard of when it decided: only commits after it are
    /// news that can stop the revert. `None` (a revert issued again after a restart): every
    /// commit after the reverted one is.
    #[serde(default)]
    pub known_tip: Option<CommitId>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    Emit(Event),
    Revert(RevertRequest),
    /// Close a revert's pull request that must not merge any more (`why`, in words for the
    /// forge); the watch's verdict waits for the forge to say it is closed, or merged.
    Withdraw {
        proposal: RevertProposal,
        why: String,
    },
    /// `expect=Healthy,Running`: read what the app's Pods run against what git pins, and
    /// answer with [`Engine::verified`].
    Verify {
        watch_id: String,
        commit: CommitId,
        app: AppRef,
        /// Which ask this is: only the answer to the ask the watch still waits for counts.
        ask: u64,
    },
}

/// What verify found for a watch with `expect=Healthy,Running` (the answer to
/// [`Effect::Verify`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "found", content = "what", rename_all = "snake_case")]
pub enum Verification {
    /// Every Pod of every workload runs the digest git pins: the summary.
    Running(String),
    /// Some or none do (a rollout under way, a stalled sync): what they run.
    NotRunning(String),
    /// A manifest names a tag, not a digest: which.
    Tag(String),
    /// The Pods could not be read: why.
    Failed(String),
}

/// A watch whose healthy streak completed and waits for verify (not kept across a restart:
/// a resumed watch asks again).
#[derive(Clone, Debug)]
struct Verifying {
    /// The streak it verifies: an answer from an earlier streak counts for nothing.
    streak_since: Timestamp,
    first_asked: Timestamp,
    /// The ask whose answer is awaited, if any.
    outstanding: Option<u64>,
    answer: Option<(Verification, Timestamp)>,
}

/// How the verify gate of a completed streak decides.
enum Gate {
    Confirm(String),
    Wait(Vec<Effect>),
    End(Verdict, EventKind),
}

/// An observation of one app: present with its facts, or absent from a complete listing.
#[derive(Clone, Debug)]
pub enum Observation<'a> {
    Present(&'a AppSnapshot),
    Absent {
        namespace: Option<&'a str>,
        name: &'a str,
    },
}

/// How many compared revisions of an app the judge remembers its idle health at.
const IDLE_REVISIONS: usize = 8;

/// How many arrived commits the judge remembers (and the state file keeps), to tell what a
/// sync brought besides a watched commit (`docs/verdicts.md#evidence`).
pub const ARRIVED_KEPT: usize = 4096;

/// How many commits one sync may bring with a watched one before greenlight stops counting
/// (and, not knowing them all, reverts nothing).
const BATCH_LIMIT: usize = 256;

/// An app seen idle (no operation running) at a compared revision: the baseline of a watch
/// whose commit that revision lacks. The state file keeps them, so a restart between an app's
/// last idle observation and its commit's arrival loses no baseline (`docs/verdicts.md#baseline`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Idle {
    /// `sync.revision`: what Argo CD had compared.
    pub revision: String,
    pub health: Health,
    /// Why it was no clean before, when it was not.
    #[serde(default)]
    pub unclean: Option<String>,
    /// The revision the last sync operation applied, when it Succeeded and differs: hooks last
    /// ran there (see [`AppSnapshot::applied_revision`]).
    #[serde(default)]
    pub applied: Option<String>,
    /// What was not clean then (`docs/verdicts.md#evidence`, condition 3); empty in rows
    /// written before it was kept.
    #[serde(default, skip_serializing_if = "Chronic::is_empty")]
    pub chronic: Chronic,
    /// Argo CD found the app `OutOfSync` with `revision`, not only through resources that
    /// require pruning (false in rows written before it was kept): seen after a commit was
    /// compared and before it was synced, it is still the app as its last sync left it
    /// ([`Engine`]'s compared baseline, `docs/verdicts.md#baseline`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub out_of_sync: bool,
}

/// A commit that arrived on the branch, as the batch of a later watch needs it. The state
/// file keeps the newest [`ARRIVED_KEPT`], so a restart does not forget what lies between an
/// app's baseline and a commit (`docs/verdicts.md#evidence`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arrived {
    pub sha: CommitId,
    /// The mainline first.
    pub parents: Vec<CommitId>,
    pub changed_paths: crate::commit::Paths,
    /// The commit its message says it reverts (`This reverts commit <sha>.`), if any: such a
    /// commit's watch that ended `NOT_REACHED` never re-opens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverts: Option<CommitId>,
    /// When greenlight saw it arrive (absent in rows written before it was kept): the track
    /// record's clock for what a human did after a verdict (`docs/record.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Timestamp>,
    /// A revert greenlight made (its `Greenlight-Revert-Of` trailer): no human's answer to a
    /// verdict in the track record.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_greenlight: bool,
}

/// All watches and the breaker.
#[derive(Clone, Debug)]
pub struct Engine {
    config: JudgeConfig,
    watches: Vec<Watch>,
    breaker: Breaker,
    dirty: BTreeSet<usize>,
    breaker_dirty: bool,
    /// Watches finished and no longer held, by id: those that finished before a restart and
    /// were not loaded back (no time), and those [`Engine::forget_finished`] let go (when they
    /// finished), until [`Engine::forget_finished_before`] drops them with the store's retention.
    finished_ids: BTreeMap<String, Option<Timestamp>>,
    /// Apps whose watches were confirmed while a revert decided before them was still being
    /// pushed: the breaker hears those confirmations after those reverts, in verdict order.
    confirmed_behind_reverts: Vec<String>,
    /// Each app's last observations with no operation running, one per compared revision
    /// (`sync.revision`), oldest first (at most [`IDLE_REVISIONS`]): the baseline of a watch
    /// that starts after its commit was compared or synced is the newest at a revision without
    /// the commit (`docs/verdicts.md#baseline`).
    idle: BTreeMap<AppKey, Vec<Idle>>,
    /// Apps whose idle observations changed since the store last took them.
    idle_dirty: BTreeSet<AppKey>,
    /// The commits that arrived on the branch, oldest first (at most [`ARRIVED_KEPT`]).
    arrived: VecDeque<Arrived>,
    /// How many times each sha is in `arrived` (once; the count keeps it exact whatever a
    /// state file restored): "arrived before?" in constant time for each commit of a push.
    arrived_shas: HashMap<CommitId, usize>,
    /// Where each arrived commit is: the sequence number of its oldest entry in `arrived`
    /// (`arrived_front` is the first entry's), so a batch's walk finds each step in constant
    /// time rather than by a scan of thousands (a push of many watched commits walks one batch
    /// per watch).
    arrived_at: HashMap<CommitId, u64>,
    arrived_front: u64,
    /// Arrived commits the store has not taken yet: the newest [`ARRIVED_KEPT`] at most, all a
    /// store keeps (a push of 100,000 commits stages 4,096, not 100,000).
    arrived_unsaved: VecDeque<Arrived>,
    /// The branch's tip when greenlight started following it: every commit before the
    /// arrived ones is in it.
    known_tip: Option<CommitId>,
    /// The namespaces each Application name was seen in: a bare trailer name that matches
    /// more than one is ambiguous.
    namespaces: BTreeMap<String, BTreeSet<String>>,
    /// Each app's source paths as last observed or glimpsed: a watch starting on the app
    /// filters its later commits by them from its first one (`docs/verdicts.md#attribution`).
    /// Not stored: after a restart a watch learns them from its first observation.
    app_paths: BTreeMap<AppKey, SourcePaths>,
    /// The latest time the judge was given: questions are asked before an observation's own
    /// time is known.
    clock: Timestamp,
    /// Watches whose streak completed and that wait for verify, by id.
    verifying: BTreeMap<String, Verifying>,
    /// The last ask's number ([`Effect::Verify`]).
    asks: u64,
    /// When [`Engine::resume`] ran (a restart, a new leader): until `--stale-after` after it,
    /// an observation from before it going stale is the downtime's doing, not the app's, and
    /// ends no streak (`docs/verdicts.md#observed-time`).
    resumed_at: Option<Timestamp>,
    /// Each recording watch's tape, by id (`docs/why.md`): the watches this build started.
    tapes: HashMap<String, Recording>,
    /// Set while the engine replays one watch's tape: the facts the recorded judge consulted
    /// for the input being replayed, and where the replay parted from it.
    replaying: Option<Replaying>,
}

/// A replay under way ([`Engine::replay`]).
#[derive(Clone, Debug, Default)]
struct Replaying {
    facts: VecDeque<Step>,
    diverged: Option<String>,
}

impl Engine {
    pub fn new(config: JudgeConfig) -> Engine {
        Engine::restore(config, Vec::new(), Breaker::default())
    }

    pub fn restore(config: JudgeConfig, watches: Vec<Watch>, breaker: Breaker) -> Engine {
        Engine {
            config,
            watches,
            breaker,
            dirty: BTreeSet::new(),
            breaker_dirty: false,
            finished_ids: BTreeMap::new(),
            confirmed_behind_reverts: Vec::new(),
            idle: BTreeMap::new(),
            idle_dirty: BTreeSet::new(),
            arrived: VecDeque::new(),
            arrived_shas: HashMap::new(),
            arrived_at: HashMap::new(),
            arrived_front: 0,
            arrived_unsaved: VecDeque::new(),
            known_tip: None,
            namespaces: BTreeMap::new(),
            app_paths: BTreeMap::new(),
            clock: Timestamp(i64::MIN),
            resumed_at: None,
            verifying: BTreeMap::new(),
            asks: 0,
            tapes: HashMap::new(),
            replaying: None,
        }
    }

    /// After a restart that loads only the live watches: the ids of the finished watches still
    /// on record. A commit delivered again that has one of them is known as processed, and
    /// none of its trailers starts a watch or is rejected a second time.
    pub fn with_finished_ids(mut self, ids: BTreeSet<String>) -> Engine {
        self.finished_ids = ids.into_iter().map(|id| (id, None)).collect();
        self
    }

    /// Lets go of the finished watches that can no longer change, as a restart would not load
    /// them back: each is stored already (called right after the store took the changes, so
    /// nothing is dirty), no verification waits on it, and it may not re-open (a `NOT_REACHED`
    /// for a commit that was not deployed stays for `reopen_horizon_ms`;
    /// `docs/verdicts.md#reopen`). A finished watch older than one let go, of the same commit
    /// and app, goes with it: only the newest of a commit and app re-opens, so it never will.
    /// Their ids stay known (a commit delivered again starts nothing), and the watches of a
    /// busy day do not pile up in memory. Returns the ids let go.
    pub fn forget_finished(&mut self, now: Timestamp) -> Vec<String> {
        if !self.dirty.is_empty() {
            return Vec::new();
        }
        let finished = |w: &Watch| matches!(w.phase(), Phase::Finished(_));
        let mut forget: Vec<bool> = (0..self.watches.len())
            .map(|i| {
                let w = &self.watches[i];
                finished(w) && !self.verifying.contains_key(&w.id) && !self.reopenable(i, now)
            })
            .collect();
        let newest_gone: Vec<usize> = (0..forget.len()).filter(|&i| forget[i]).collect();
        for i in newest_gone {
            let gone = &self.watches[i];
            for (j, w) in self.watches.iter().enumerate() {
                if !forget[j]
                    && finished(w)
                    && !self.verifying.contains_key(&w.id)
                    && w.commit == gone.commit
                    && w.app == gone.app
                    && w.watch_started_at <= gone.watch_started_at
                {
                    forget[j] = true;
                }
            }
        }
        if !forget.contains(&true) {
            return Vec::new();
        }
        let mut ids = Vec::new();
        let mut kept = Vec::with_capacity(self.watches.len());
        for (w, go) in std::mem::take(&mut self.watches).into_iter().zip(forget) {
            if go {
                self.finished_ids.insert(w.id.clone(), w.finished_at());
                ids.push(w.id);
            } else {
                kept.push(w);
            }
        }
        self.watches = kept;
        ids
    }

    /// Whether a watch of `commit` finished and is no longer held ([`Engine::forget_finished`],
    /// or before a restart).
    fn finished_on_record(&self, commit: &CommitId) -> bool {
        let prefix = format!("{commit}:");
        self.finished_ids
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(id, _)| id.starts_with(&prefix))
    }

    /// Forgets the ids of watches let go that finished before `cutoff`: the store's retention
    /// pruned their records, as a restart would not know them either.
    pub fn forget_finished_before(&mut self, cutoff: Timestamp) {
        self.finished_ids
            .retain(|_, at| at.is_none_or(|at| at >= cutoff));
    }

    /// The branch's tip from which commits are handed over as they arrive: every commit that
    /// does not arrive is in it (`docs/verdicts.md#evidence`, the batch).
    pub fn known_tip(&mut self, tip: CommitId) {
        self.known_tip = Some(tip);
    }

    pub fn config(&self) -> &JudgeConfig {
        &self.config
    }
    pub fn watches(&self) -> &[Watch] {
        &self.watches
    }
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    /// The arrived commits the state file kept, oldest first (after a restart).
    pub fn restore_arrived(&mut self, arrived: Vec<Arrived>) {
        let skip = arrived.len().saturating_sub(ARRIVED_KEPT);
        self.arrived = arrived.into_iter().skip(skip).collect();
        self.arrived_shas.clear();
        self.arrived_at.clear();
        self.arrived_front = 0;
        for (i, a) in self.arrived.iter().enumerate() {
            *self.arrived_shas.entry(a.sha.clone()).or_default() += 1;
            self.arrived_at.entry(a.sha.clone()).or_insert(i as u64);
        }
    }

    /// Where `sha` is in the arrived commits (its oldest entry), if there.
    fn arrived_position(&self, sha: &CommitId) -> Option<usize> {
        let at = self.arrived_at.get(sha)?.checked_sub(self.arrived_front)? as usize;
        (at < self.arrived.len()).then_some(at)
    }

    /// The commits that arrived since the last call, oldest first, for the store to keep.
    pub fn take_arrived(&mut self) -> Vec<Arrived> {
        std::mem::take(&mut self.arrived_unsaved).into()
    }

    /// Each app's idle observations as the state file kept them (after a restart).
    pub fn restore_idle(&mut self, idle: Vec<(AppKey, Vec<Idle>)>) {
        for (key, mut seen) in idle {
            seen.truncate(IDLE_REVISIONS);
            if !seen.is_empty() {
                self.idle.insert(key, seen);
            }
        }
    }

    /// The apps whose idle observations changed since the last call, each with all of them
    /// (none: forget the app), for the store to persist.
    pub fn take_idle_dirty(&mut self) -> Vec<(AppKey, Vec<Idle>)> {
        std::mem::take(&mut self.idle_dirty)
            .into_iter()
            .map(|k| {
                let seen = self.idle.get(&k).cloned().unwrap_or_default();
                (k, seen)
            })
            .collect()
    }

    /// Watches changed since the last call, for the store to persist with the events.
    pub fn take_dirty(&mut self) -> (Vec<Watch>, Option<Breaker>) {
        let ws = std::mem::take(&mut self.dirty)
            .into_iter()
            .map(|i| self.watches[i].clone())
            .collect();
        let b = std::mem::take(&mut self.breaker_dirty).then(|| self.breaker.clone());
        (ws, b)
    }

    /// After a restart: one `resumed` event per live watch, and the reverts that were decided
    /// but never confirmed (the executor adopts a revert that was pushed before the crash).
    pub fn resume(&mut self, now: Timestamp) -> Vec<Effect> {
        self.resumed_at = Some(now);
        let mut out = Vec::new();
        for i in 0..self.watches.len() {
            if !matches!(self.watches[i].phase(), Phase::Finished(_)) {
                let config = Box::new(self.config.clone());
                self.tape(i, || Step::Resumed { at: now, config });
            }
            let w = &self.watches[i];
            if w.proposal().is_some() {
                // Its pull request is open: followed, never opened a second time.
                continue;
            }
            if let Some(failure) = w.reverting() {
                out.push(Effect::Revert(RevertRequest {
                    reissued: true,
                    ..revert_request(w, failure)
                }));
                continue;
            }
            if !w.is_live() {
                continue;
            }
            let msg = Message::Resumed {
                deadline: w.deadline_at(),
                from: if w.state() == State::Judging {
                    Deadline::Health
                } else {
                    Deadline::Reach
                },
            };
            out.push(self.emit(i, EventKind::Resumed, msg, now));
        }
        out
    }

    /// Questions to answer before [`Engine::commit_arrived`]: for a merge commit, whether a
    /// watched commit is an ancestor of one of its other parents (then the merge carries the
    /// watched commit itself, and is not a later change for attribution); for each app its
    /// trailers name, whether the revision of the app's last idle observation already contains
    /// the commit (then that observation is no baseline).
    pub fn arrival_questions(&self, commit: &CommitInfo) -> Vec<(String, String)> {
        let mut q = Vec::new();
        let started = self.watches.iter().any(|w| w.commit == commit.sha)
            || self.finished_on_record(&commit.sha)
            || (self.config.asked.is_none()
                && !self.config.gate_candidates
                && crate::trailer::is_judged_elsewhere(&commit.message));
        for d in self
            .directives_of(commit)
            .into_iter()
            .flatten()
            .filter(|_| !started)
        {
            for (key, seen) in &self.idle {
                if !d.app.matches(&key.namespace, &key.name) {
                    continue;
                }
                for Idle {
                    revision, applied, ..
                } in seen
                {
                    // The applied revision: for a compared baseline (see `idle_baseline`).
                    for r in std::iter::once(revision).chain(applied) {
                        if is_git_sha(r) && !commit.sha.as_str().eq_ignore_ascii_case(r) {
                            q.push((commit.sha.to_string(), r.clone()));
                        }
                    }
                }
            }
        }
        if commit.parents.len() < 2 {
            q.sort();
            q.dedup();
            return q;
        }
        for w in self.live() {
            if w.commit == commit.sha {
                continue; // a re-delivered watched merge is not a later commit of itself
            }
            for p in commit.brought_parents() {
                // Equality needs no git: `Ancestry::contains` answers it.
                if *p != w.commit {
                    q.push((w.commit.to_string(), p.to_string()));
                }
            }
            // Whether the branch had the commit before the merge: then the merge brings other
            // changes, whatever its side branch contains.
            if let Some(m) = commit.parents_mainline_first().first()
                && *m != w.commit
            {
                q.push((w.commit.to_string(), m.to_string()));
            }
        }
        q.sort();
        q.dedup();
        q
    }

    /// A commit arrived on the tracked branch (in topological order): start the watches its
    /// trailers ask for, and record it as a later commit for the watches already running.
    pub fn commit_arrived(
        &mut self,
        commit: &CommitInfo,
        ancestry: &Ancestry,
        now: Timestamp,
    ) -> Vec<Effect> {
        self.clock = self.clock.max(now);
        let mut out = Vec::new();
        if !self.arrived_shas.contains_key(&commit.sha) {
            let arrived = Arrived {
                sha: commit.sha.clone(),
                parents: commit.parents_mainline_first(),
                changed_paths: commit.changed_paths.clone(),
                reverts: reverted_sha(&commit.message),
                at: Some(now),
                by_greenlight: crate::trailer::is_greenlight_revert(&commit.message),
            };
            self.arrived_unsaved.push_back(arrived.clone());
            if self.arrived_unsaved.len() > ARRIVED_KEPT {
                self.arrived_unsaved.pop_front();
            }
            *self.arrived_shas.entry(arrived.sha.clone()).or_default() += 1;
            let seq = self.arrived_front + self.arrived.len() as u64;
            self.arrived_at.entry(arrived.sha.clone()).or_insert(seq);
            self.arrived.push_back(arrived);
            if self.arrived.len() > ARRIVED_KEPT
                && let Some(gone) = self.arrived.pop_front()
            {
                self.arrived_front += 1;
                if let Some(n) = self.arrived_shas.get_mut(&gone.sha) {
                    *n -= 1;
                    if *n == 0 {
                        self.arrived_shas.remove(&gone.sha);
                        self.arrived_at.remove(&gone.sha);
                    } else if let Some(next) = self.arrived.iter().position(|a| a.sha == gone.sha) {
                        // (Only a state file's repeated entry: its next one is the oldest.)
                        self.arrived_at
                            .insert(gone.sha.clone(), self.arrived_front + next as u64);
                    }
                }
            }
        }
        let reverted = reverted_sha(&commit.message);
        out.extend(self.proposals_see(commit, reverted.as_ref(), now));
        for i in 0..self.watches.len() {
            if !self.watches[i].is_live() {
                continue;
            }
            let w = &self.watches[i];
            // A merge that brings the watched commit itself (a `git pull` merge of the
            // developer's commit) is no later change to it. One whose side branch merely
            // forked after the watched commit was on the branch brings other changes: its
            // mainline had the commit already (git must say it had not, or it is a later
            // change).
            let brings_it = commit.parents.len() > 1
                && commit
                    .brought_parents()
                    .iter()
                    .any(|p| ancestry.contains(w.commit.as_str(), p.as_str()))
                && commit
                    .parents_mainline_first()
                    .first()
                    .is_some_and(|m| ancestry.knows_not(w.commit.as_str(), m.as_str()));
            let reverts_it = (reverted.as_ref() == Some(&w.commit))
                .then(|| crate::trailer::is_greenlight_revert(&commit.message));
            let step = Step::Arrived {
                at: now,
                sha: commit.sha.clone(),
                changed_paths: commit.changed_paths.clone(),
                brings_it,
                reverts_it,
            };
            self.tape(i, || step.clone());
            out.extend(self.arrival_one(i, &step));
        }

        // A commit with a finished watch on record was processed before (a restart, or its
        // watches were let go): each of its trailers started a watch or was rejected then. Its
        // finished watches are not held, so the checks below could not tell.
        if self.finished_on_record(&commit.sha) {
            return out;
        }
        // A revert greenlight made starts no watch, whatever its text quotes
        // (`docs/verdicts.md#revert-commits`).
        if self.config.asked.is_none() && crate::trailer::is_greenlight_revert(&commit.message) {
            return out;
        }
        // A gate's candidate is its run's to judge, keep or remove: a daemon's verdict on it
        // would be a FAIL for a self-test's deliberately broken candidate, or for one whose run
        // ended (`docs/verdicts.md#judged-elsewhere`).
        if self.config.asked.is_none()
            && !self.config.gate_candidates
            && crate::trailer::is_judged_elsewhere(&commit.message)
        {
            return out;
        }
        for (index, parsed) in self.directives_of(commit).into_iter().enumerate() {
            let id = format!("{}:{index}", commit.sha);
            if self.watches.iter().any(|w| w.id == id) {
                continue; // already started before a restart
            }
            let rejected = |message: Message, app: Option<String>| {
                Effect::Emit(Event {
                    time: now,
                    event: EventKind::DirectiveRejected,
                    commit: Some(commit.sha.to_string()),
                    app,
                    state: None,
                    message: message.to_string(),
                    evidence: Evidence::default(),
                    outcome: None,
                    reason: None,
                })
            };
            match parsed {
                Err(e) => out.push(rejected(Message::DirectiveRejected(e), None)),
                // One watch per (commit, app): two verdicts for the same pair could contradict.
                Ok(d)
                    if self
                        .watches
                        .iter()
                        .any(|w| w.commit == commit.sha && w.app.overlaps(&d.app)) =>
                {
                    let app = d.app.to_string();
                    out.push(rejected(
                        Message::DuplicateTrailer {
                            key: self.config.trailer_key.clone(),
                            app: d.app,
                        },
                        Some(app),
                    ))
                }
                Ok(d) => out.push(self.start(id, commit, d, ancestry, now)),
            }
        }
        out
    }

    /// A commit arrived, as watch `i` weighs it: `step` is [`Step::Arrived`].
    fn arrival_one(&mut self, i: usize, step: &Step) -> Vec<Effect> {
        let Step::Arrived {
            at: now,
            sha,
            changed_paths,
            brings_it,
            reverts_it,
        } = step
        else {
            return Vec::new();
        };
        let now = *now;
        // A deadline or window end already due is decided before this commit can change the
        // story; a commit says nothing about the app's health, so time alone decides here.
        let mut out = self.decide(i, now);
        let w = &self.watches[i];
        if !w.is_live() || w.commit == *sha || *brings_it {
            return out;
        }
        if let Some(by_greenlight) = reverts_it {
            if *by_greenlight {
                let why = NotReached::RevertedForAnotherApp {
                    revert: sha.clone(),
                };
                out.push(self.finish(i, Verdict::NotReached(why), EventKind::NotReached, now));
            } else {
                out.extend(self.reverted_by_human(i, sha, now));
            }
            return out;
        }
        // A commit that changed nothing under the app's known paths can never be a culprit
        // while they stay so: it is not kept (`docs/verdicts.md#attribution`).
        if self.config.asked.is_none()
            && let Some(paths) = self.watches[i].source_paths()
            && !counts_against(&self.config.attribution_exempt, paths, changed_paths)
        {
            let paths = paths.clone();
            if self.watches[i].later_commit_skipped(&paths) {
                self.dirty.insert(i);
            }
            return out;
        }
        self.watches[i].later_commit(LaterCommit {
            sha: sha.clone(),
            changed_paths: changed_paths.clone(),
        });
        self.dirty.insert(i);
        out.extend(self.check_attribution(i, now));
        out
    }

    /// The directives `commit` asks for: its trailers, or, when a watch was asked for from
    /// outside ([`JudgeConfig::asked`]), that one for its commit and none for any other.
    fn directives_of(&self, commit: &CommitInfo) -> Vec<Result<Directive, DirectiveError>> {
        match &self.config.asked {
            Some(a) if a.commit == commit.sha => vec![Ok(a.directive.clone())],
            Some(_) => Vec::new(),
            None => directives_in(&commit.message, &self.config.trailer_key),
        }
    }

    fn start(
        &mut self,
        id: String,
        commit: &CommitInfo,
        d: Directive,
        ancestry: &Ancestry,
        now: Timestamp,
    ) -> Effect {
        let dry_run = self.config.dry_run;
        let parents = commit.parents_mainline_first();
        let before = self.idle_baseline(&commit.sha, Some(&parents), &d.app, ancestry);
        let mut w = Watch::start(id, commit, d, dry_run, now);
        w.saw_before(before);
        // The app's paths as last seen: the later commits of a push are filtered from the
        // first, not held until the watch's first observation (which may show other paths).
        if let Some(paths) = self.paths_of(&w.app) {
            w.learned_source_paths(paths.clone());
        }
        let msg = Message::WatchStarted {
            mode: w.mode,
            dry_run,
            deadline_ms: w.deadline_ms,
            stable_for_ms: self.config.stable_for_ms,
        };
        self.watches.push(w);
        let i = self.watches.len() - 1;
        self.tape_start(i, now);
        self.emit(i, EventKind::WatchStarted, msg, now)
    }

    /// The baseline of a watch of `commit` on `app` starting now: the app's newest idle
    /// observation at a revision that git says does not contain the commit (Argo CD had not
    /// compared or synced the commit then) — or, when there is none, its newest idle observation
    /// that had compared the commit but not synced it ([`Engine::compared_baseline`]).
    fn idle_baseline(
        &self,
        commit: &CommitId,
        parents: Option<&[CommitId]>,
        app: &AppRef,
        ancestry: &Ancestry,
    ) -> BeforeSeen {
        let idle: Vec<&Vec<Idle>> = self
            .idle
            .iter()
            .filter(|(k, _)| app.matches(&k.namespace, &k.name))
            .map(|(_, v)| v)
            .collect();
        let mut found = None;
        let mut compared = None;
        if let [seen] = idle.as_slice() {
            // Newest first: skip what already has the commit; the first without it is the
            // app as it was before the sync; an unanswered question leaves it unknown.
            for s in seen.iter().rev() {
                if s.revision.eq_ignore_ascii_case(commit.as_str())
                    || ancestry.contains(commit.as_str(), &s.revision)
                {
                    if compared.is_none()
                        && s.out_of_sync
                        && s.applied.as_deref().is_some_and(|a| {
                            !a.eq_ignore_ascii_case(commit.as_str())
                                && ancestry.knows_not(commit.as_str(), a)
                        })
                    {
                        compared = Some(s.clone());
                    }
                    continue;
                }
                // No revision yet (never compared) is before any commit.
                if !is_git_sha(&s.revision) || ancestry.knows_not(commit.as_str(), &s.revision) {
                    found = Some(s.clone());
                }
                break;
            }
        }
        match (found, compared) {
            (Some(s), _) => self.before_seen(
                commit,
                parents,
                &s.revision,
                s.applied.as_deref(),
                s.health,
                s.unclean,
                s.chronic,
            ),
            (None, Some(s)) => {
                let applied = s.applied.unwrap_or_default();
                self.compared_baseline(commit, parents, &applied, s.health, s.chronic)
            }
            (None, None) => BeforeSeen {
                before: Before::Unknown,
                revision: None,
                unclean: None,
                batch: Some(None),
                chronic: Chronic::default(),
                after_compare: false,
            },
        }
    }

    /// The baseline an idle observation gives that Argo CD made after it compared `commit`
    /// (`OutOfSync` with it) and before any sync of it — the last sync operation `Succeeded` at
    /// `applied`, a revision git says lacks the commit — when no observation before the compare
    /// does (`docs/verdicts.md#baseline`): a wait started after a webhook made Argo CD compare
    /// at once. The live objects are still that sync's, so the health is the app's before the
    /// commit, at `applied`. But the sync statuses are against the commit, so it is never a
    /// clean before (no revert rests on it), and only resources `Synced` with the commit (which
    /// it leaves as they are) keep their conditions as chronic: one the commit changes, adds
    /// (`Missing`) or removes (requires pruning) is not excused by it.
    fn compared_baseline(
        &self,
        commit: &CommitId,
        parents: Option<&[CommitId]>,
        applied: &str,
        health: Health,
        mut chronic: Chronic,
    ) -> BeforeSeen {
        // Before 3.4 Argo CD's app health counts a resource the commit adds (`Missing`,
        // `OutOfSync`): the app before the commit had no such resource.
        let added =
            |r: &ResourceView| r.health == Some(Health::Missing) && r.sync_status != "Synced";
        let health = if health == Health::Missing && chronic.resources.iter().any(added) {
            chronic
                .resources
                .iter()
                .chain(&chronic.disagreeing)
                .filter(|r| !added(r))
                .filter_map(|r| r.health)
                .max_by_key(|h| h.rank())
                .unwrap_or(Health::Healthy)
        } else {
            health
        };
        chronic.resources.retain(|r| r.sync_status == "Synced");
        let why = "seen only after Argo CD compared this commit: OutOfSync with it, so whether its live objects matched this revision is not known".to_string();
        let mut seen = self.before_seen(commit, parents, applied, None, health, Some(why), chronic);
        seen.after_compare = true;
        seen
    }

    /// Whether the finished watch `i` may re-open (`docs/verdicts.md#reopen`): it ended
    /// `NOT_REACHED` because its commit was not (or no longer) deployed — never because it was
    /// reverted — within the horizon, it is the newest watch of its commit and app, and no
    /// commit that reverts it has arrived.
    fn may_reopen(&self, i: usize, now: Timestamp) -> bool {
        let w = &self.watches[i];
        self.reopenable(i, now)
            && !self.watches.iter().enumerate().any(|(j, o)| {
                j != i
                    && o.commit == w.commit
                    && o.app == w.app
                    && o.watch_started_at >= w.watch_started_at
            })
            && !self
                .arrived
                .iter()
                .any(|a| a.reverts.as_ref() == Some(&w.commit))
    }

    /// The finished watch `i` ended `NOT_REACHED` because its commit was not (or no longer)
    /// deployed, within the re-open horizon: [`Engine::may_reopen`] without what a newer watch
    /// or an arrived revert rules out.
    fn reopenable(&self, i: usize, now: Timestamp) -> bool {
        let horizon = self.config.reopen_horizon_ms;
        let Phase::Finished(f) = self.watches[i].phase() else {
            return false;
        };
        let why = match &f.verdict {
            Verdict::NotReached(why) => why,
            _ => return false,
        };
        let not_deployed = matches!(
            why,
            NotReached::NeverSynced { .. }
                | NotReached::NotApplied { .. }
                | NotReached::SyncFailed { .. }
                | NotReached::ComparisonError { .. }
                | NotReached::AppMissing { .. }
                | NotReached::Withdrawn { .. }
        );
        not_deployed && horizon > 0 && now.0.saturating_sub(f.at.0) <= horizon
    }

    /// Watches of `snap`'s app that ended `NOT_REACHED` and whose commit Argo CD now deploys:
    /// each starts again as a new watch, reached by this very observation
    /// (`docs/verdicts.md#reopen`).
    fn reopen(&mut self, snap: &AppSnapshot, ancestry: &Ancestry, now: Timestamp) -> Vec<Effect> {
        let mut out = Vec::new();
        for i in 0..self.watches.len() {
            if !self.watches[i].app.matches(&snap.namespace, &snap.name) || !self.may_reopen(i, now)
            {
                continue;
            }
            let w = &self.watches[i];
            let Some(ended) = w.finished_at() else {
                continue;
            };
            let ran = synced_by_an_operation(snap, &w.commit, ancestry);
            let Some(revision) = deployed_since(snap, ended)
                .into_iter()
                .filter(|(_, synced)| !synced || ran)
                .map(|(r, _)| r)
                .find(|r| ancestry.contains(w.commit.as_str(), r))
                .map(str::to_string)
            else {
                continue;
            };
            // The commits after this one that the reaching revision brings arrived before the
            // watch re-opens: they are its later commits, as if they had arrived during it
            // (`docs/verdicts.md#attribution`). When greenlight cannot tell them (they arrived
            // before its state file kept them), a revert of the commit may be among them: the
            // watch does not re-open.
            let later = if w.commit.as_str().eq_ignore_ascii_case(&revision) {
                Some(Vec::new())
            } else {
                CommitId::parse(&revision).ok().and_then(|r| {
                    let at = self.arrived_position(&r)?;
                    let mut list = self.batch_between(w.commit.as_str(), &r, None)?;
                    list.push(LaterCommit {
                        sha: r,
                        changed_paths: self.arrived[at].changed_paths.clone(),
                    });
                    Some(list)
                })
            };
            let Some(later) = later else {
                continue;
            };
            let base = w.id.split('~').next().unwrap_or(&w.id).to_string();
            // One more than any re-open of the commit's watch held or let go: the first watch
            // may be let go (its horizon over) while a later one is held, and an id counted
            // from what is held would repeat one the store has.
            let suffix = format!("{base}~");
            let reopened_as = |id: &str| -> Option<u64> {
                if id == base {
                    Some(0)
                } else {
                    id.strip_prefix(&suffix)?.parse().ok()
                }
            };
            let n = self
                .watches
                .iter()
                .map(|o| o.id.as_str())
                .chain(
                    self.finished_ids
                        .range(base.clone()..)
                        .map(|(id, _)| id.as_str())
                        .take_while(|id| id.starts_with(base.as_str())),
                )
                .filter_map(reopened_as)
                .max()
                .map_or(1, |m| m + 1);
            let previous = w.id.clone();
            let mut reopened = w.reopened(format!("{base}~{n}"), now);
            let before = self.idle_baseline(&reopened.commit, None, &reopened.app, ancestry);
            reopened.saw_before(before);
            for c in later {
                reopened.later_commit(c);
            }
            self.watches.push(reopened);
            let j = self.watches.len() - 1;
            self.tape_start(j, now);
            let msg = Message::Reopened {
                previous,
                ended,
                revision,
                mode: self.watches[j].mode,
                deadline_ms: self.watches[j].deadline_ms,
            };
            out.push(self.emit(j, EventKind::WatchStarted, msg, now));
        }
        out
    }

    /// The apps whose observations the judge needs (the rest are glimpses): those of live
    /// watches, those of watches that may still re-open (`docs/verdicts.md#reopen`), and the
    /// app of the watch asked for ([`JudgeConfig::asked`]).
    pub fn followed_apps(&self) -> Vec<AppRef> {
        let mut apps: Vec<AppRef> = (0..self.watches.len())
            .filter(|&i| self.watches[i].is_live() || self.may_reopen(i, self.clock))
            .map(|i| self.watches[i].app.clone())
            .collect();
        // The app a wait asked for, from the start: what it shows before the commit arrives is
        // the commit's baseline, observed whole (resource health and all).
        if let Some(asked) = &self.config.asked {
            apps.push(asked.directive.app.clone());
        }
        apps.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        apps.dedup();
        apps
    }

    /// Ancestry questions for a snapshot: each live watch of this app against each candidate
    /// revision (only git SHAs; equality needs no question).
    pub fn reach_questions(&self, snap: &AppSnapshot) -> Vec<(String, String)> {
        let mut q = Vec::new();
        // Whether the health is the one after the last sync (see `fresh_comparison`).
        if let Some(c) = &snap.compared_elsewhere
            && self
                .live()
                .any(|w| w.app.matches(&snap.namespace, &snap.name))
        {
            q.push((c.applied.clone(), c.compared.clone()));
        }
        for w in self.live() {
            let judging = w.state() != State::WaitingReach;
            if !w.app.matches(&snap.namespace, &snap.name) {
                continue;
            }
            // Once reached: whether what Argo CD deployed since still contains the commit; and
            // every revision it reports (compared, syncing, synced) is asked about, so that one
            // greenlight has not fetched is fetched — and its commit attributed — first.
            if judging {
                let reported = [
                    Some(snap.sync_revision.as_str()),
                    snap.last_operation.as_ref().map(|o| o.revision.as_str()),
                ];
                for revision in deployed_revisions(snap, w)
                    .into_iter()
                    .chain(reported.into_iter().flatten())
                {
                    if is_git_sha(revision) && w.commit != revision {
                        q.push((w.commit.to_string(), revision.to_string()));
                    }
                }
            }
            if judging && w.reported_sync_failure() {
                continue;
            }
            // While waiting: whether the compared revision has the commit (baseline).
            if !judging && is_git_sha(&snap.sync_revision) && w.commit != snap.sync_revision {
                q.push((w.commit.to_string(), snap.sync_revision.clone()));
            }
            // And whether the last sync's revision has it (a compared baseline).
            if !judging
                && let Some(applied) = snap.applied_revision()
                && w.commit != applied.as_str()
            {
                q.push((w.commit.to_string(), applied));
            }
            for c in &snap.reach_candidates {
                // Once reached, only a failed operation is still news (failure evidence).
                if judging
                    && !matches!(
                        c.via,
                        ReachVia::OperationFailed { .. } | ReachVia::PostSyncHookFailed { .. }
                    )
                {
                    continue;
                }
                if !admissible(snap, c) {
                    continue;
                }
                if is_git_sha(&c.revision) && w.commit != c.revision {
                    q.push((w.commit.to_string(), c.revision.clone()));
                }
            }
        }
        // A watch that may re-open: whether what Argo CD deploys now has its commit, and the
        // app's idle revisions for the re-opened watch's baseline.
        for i in 0..self.watches.len() {
            let w = &self.watches[i];
            if !w.app.matches(&snap.namespace, &snap.name) || !self.may_reopen(i, self.clock) {
                continue;
            }
            let Some(ended) = w.finished_at() else {
                continue;
            };
            let deployed: Vec<&str> = deployed_since(snap, ended)
                .into_iter()
                .map(|(r, _)| r)
                .chain(snap.last_operation.as_ref().map(|o| o.revision.as_str()))
                .collect();
            if deployed.is_empty() {
                continue;
            }
            let idle = self
                .idle
                .iter()
                .filter(|(k, _)| w.app.matches(&k.namespace, &k.name))
                .flat_map(|(_, v)| v.iter().map(|s| s.revision.as_str()));
            for revision in deployed.into_iter().chain(idle) {
                if is_git_sha(revision) && w.commit != revision {
                    q.push((w.commit.to_string(), revision.to_string()));
                }
            }
        }
        q.sort();
        q.dedup();
        q
    }

    /// The stream showed an app that no watch follows yet: its health before a commit's sync,
    /// for a watch that starts later.
    pub fn glimpse(&mut self, key: &AppKey, g: &Glimpse) {
        self.namespaces
            .entry(key.name.clone())
            .or_default()
            .insert(key.namespace.clone());
        self.saw_paths(key, g.source_paths.as_ref());
        if !g.operation_running {
            self.saw_idle(
                key.clone(),
                g.sync_revision.clone(),
                g.out_of_sync_beyond_pruning(),
                g.health,
                g.unclean(),
                g.applied_revision(),
                g.chronic.clone(),
            );
        }
    }

    /// The app's source paths as just seen (`None`: no source is the watched repository).
    fn saw_paths(&mut self, key: &AppKey, paths: Option<&SourcePaths>) {
        match paths {
            Some(p) if self.app_paths.get(key) != Some(p) => {
                self.app_paths.insert(key.clone(), p.clone());
            }
            Some(_) => {}
            None => {
                self.app_paths.remove(key);
            }
        }
    }

    /// The source paths last seen of the one app `app` names; `None` when none was seen or
    /// the name matches apps in two namespaces.
    fn paths_of(&self, app: &AppRef) -> Option<&SourcePaths> {
        let mut matching = self
            .app_paths
            .iter()
            .filter(|(k, _)| app.matches(&k.namespace, &k.name));
        let (_, paths) = matching.next()?;
        matching.next().is_none().then_some(paths)
    }

    #[allow(clippy::too_many_arguments)]
    fn saw_idle(
        &mut self,
        key: AppKey,
        revision: String,
        out_of_sync: bool,
        health: Health,
        unclean: Option<String>,
        applied: Option<String>,
        chronic: Chronic,
    ) {
        let seen = self.idle.entry(key.clone()).or_default();
        let applied = applied.filter(|a| !a.eq_ignore_ascii_case(&revision));
        let idle = Idle {
            revision,
            health,
            unclean,
            applied,
            chronic,
            out_of_sync,
        };
        if seen.last() == Some(&idle) {
            return;
        }
        seen.retain(|s| s.revision != idle.revision);
        seen.push(idle);
        if seen.len() > IDLE_REVISIONS {
            seen.remove(0);
        }
        self.idle_dirty.insert(key);
    }

    /// The baseline an idle observation at `revision` gives the watch of `commit`: its health,
    /// whether it was clean, what was chronic there, and the batch (`docs/verdicts.md#evidence`).
    #[allow(clippy::too_many_arguments)]
    fn before_seen(
        &self,
        commit: &CommitId,
        parents: Option<&[CommitId]>,
        revision: &str,
        applied: Option<&str>,
        health: Health,
        unclean: Option<String>,
        chronic: Chronic,
    ) -> BeforeSeen {
        let revision = is_git_sha(revision).then(|| revision.to_ascii_lowercase());
        let mut batch = match &revision {
            Some(r) => self.batch_between(r, commit, parents).map(Some),
            None => Some(None),
        };
        // What arrived on the branch after the baseline and before this commit without being
        // its ancestor (a `git pull` merge of a commit made before them) is deployed with it too.
        if let (Some(Some(list)), Some(r)) = (&mut batch, &revision) {
            match self.deployed_beside(r, commit) {
                Some(beside) => {
                    for c in beside {
                        if !list.iter().any(|l| l.sha == c.sha) {
                            list.push(c);
                        }
                    }
                }
                None => batch = Some(None),
            }
        }
        // Argo CD compares a commit that changes only hooks (or files it does not render) as
        // Synced without running a sync: its hooks first run with the next commit's sync. So
        // the commits since the last sync operation's revision, up to the compared one, are in
        // this commit's batch too — when greenlight can tell them.
        if let (Some(Some(list)), Some(r), Some(applied)) = (&mut batch, &revision, applied)
            && is_git_sha(applied)
            && !applied.eq_ignore_ascii_case(r)
            && let Ok(compared) = CommitId::parse(r)
            && let Some(at) = self.arrived_position(&compared)
            && let Some(between) = self.batch_between(applied, &compared, None)
        {
            let compared = LaterCommit {
                sha: compared,
                changed_paths: self.arrived[at].changed_paths.clone(),
            };
            for c in between.into_iter().chain([compared]) {
                if !list.iter().any(|l| l.sha == c.sha) {
                    list.push(c);
                }
            }
        }
        BeforeSeen {
            before: Before::of(chronic.baseline_health(health)),
            revision,
            unclean,
            batch,
            chronic,
            after_compare: false,
        }
    }

    /// The commits that arrived after `base` and before `commit` but are not among `commit`'s
    /// ancestors (every parent followed: a watched merge's side is its own change, its mainline
    /// the batch). The branch only moves forward, so they were on it before `commit` was, and
    /// any revision that deploys `commit` deploys them: a developer's commit made before them
    /// and brought by a `git pull` merge reaches the app with them (`docs/verdicts.md#evidence`).
    /// When `base` is not among the arrived commits kept, every kept commit before `commit` is
    /// taken as after it. `None` when greenlight cannot tell: `commit` is no longer kept, or more
    /// than [`BATCH_LIMIT`] arrived in between.
    fn deployed_beside(&self, base: &str, commit: &CommitId) -> Option<Vec<LaterCommit>> {
        let hi = self.arrived_position(commit)?;
        let lo = CommitId::parse(base)
            .ok()
            .and_then(|b| self.arrived_position(&b))
            .map_or(0, |b| b + 1);
        if lo >= hi {
            return Some(Vec::new());
        }
        if hi - lo > BATCH_LIMIT {
            return None;
        }
        let mut ancestors = BTreeSet::new();
        let mut stack = self.arrived[hi].parents.clone();
        while let Some(p) = stack.pop() {
            let Some(at) = self.arrived_position(&p) else {
                continue;
            };
            if at < lo || !ancestors.insert(at) {
                continue;
            }
            stack.extend(self.arrived[at].parents.iter().cloned());
        }
        Some(
            (lo..hi)
                .filter(|at| !ancestors.contains(at))
                .map(|at| LaterCommit {
                    sha: self.arrived[at].sha.clone(),
                    changed_paths: self.arrived[at].changed_paths.clone(),
                })
                .collect(),
        )
    }

    /// The commits between `base` and `commit` (both excluded) as the arrived commits tell
    /// them: the mainline of `commit` (a merge's other parents bring the merge's own change)
    /// and then every parent are followed back to `base`. A commit that arrived before `base`
    /// did is in it, and so is one that never arrived (it was on the branch before greenlight
    /// followed it, or arrived too long ago to be kept) — when `base` is known to be at least
    /// that far: it arrived itself, or it is the tip greenlight started from. `None` when it
    /// is not (`base` is older: what lies between is not known), or there are more than
    /// [`BATCH_LIMIT`].
    fn batch_between(
        &self,
        base: &str,
        commit: &CommitId,
        parents: Option<&[CommitId]>,
    ) -> Option<Vec<LaterCommit>> {
        let position = |sha: &str| {
            CommitId::parse(sha)
                .ok()
                .and_then(|c| self.arrived_position(&c))
        };
        let parents: Vec<CommitId> = match parents {
            Some(p) => p.to_vec(),
            None => self
                .arrived
                .get(position(commit.as_str())?)?
                .parents
                .clone(),
        };
        let base_at = position(base);
        let base_covers_the_unknown = base_at.is_some()
            || self
                .known_tip
                .as_ref()
                .is_some_and(|t| t.as_str().eq_ignore_ascii_case(base));
        // A watched merge's other parents bring what the merge is: only its mainline (first in
        // `parents`) leads back along the branch to the baseline.
        let mut stack: Vec<CommitId> = parents.into_iter().take(1).collect();
        let mut seen = BTreeSet::new();
        let mut found = Vec::new();
        while let Some(p) = stack.pop() {
            if p.as_str().eq_ignore_ascii_case(base) || !seen.insert(p.clone()) {
                continue;
            }
            let Some(at) = position(p.as_str()) else {
                if base_covers_the_unknown {
                    continue;
                }
                return None;
            };
            if base_at.is_some_and(|b| at < b) {
                continue;
            }
            if found.len() >= BATCH_LIMIT {
                return None;
            }
            found.push(at);
            stack.extend(self.arrived[at].parents.iter().cloned());
        }
        found.sort_unstable();
        Some(
            found
                .into_iter()
                .map(|at| LaterCommit {
                    sha: self.arrived[at].sha.clone(),
                    changed_paths: self.arrived[at].changed_paths.clone(),
                })
                .collect(),
        )
    }

    /// What is missing from the evidence a revert needs, for a watch whose failure is laid on
    /// its commit (`docs/verdicts.md#evidence`). A watch recorded before baselines were kept is
    /// judged as it was then.
    fn missing_evidence(&self, i: usize) -> Option<NoEvidence> {
        let w = &self.watches[i];
        let b = w.baseline();
        if b.is_not_recorded() {
            return None;
        }
        if b.before == Before::Unknown {
            return Some(NoEvidence::NoBaseline);
        }
        if b.merge_side == Some(crate::watch::MergeSide::Unknown) {
            return Some(NoEvidence::MergeSideUnknown {
                commit: w.commit.clone(),
            });
        }
        if let Some(why) = &b.unclean {
            return Some(NoEvidence::NotClean {
                revision: b.revision.clone(),
                why: why.clone(),
            });
        }
        let Some(batch) = &b.batch else {
            return Some(NoEvidence::BatchUnknown {
                revision: b.revision.clone(),
            });
        };
        let unknown = SourcePaths::Unknown {
            why: "the app's source paths are not known".into(),
        };
        let paths = w.source_paths().unwrap_or(&unknown);
        let suspects: Vec<CommitId> = batch
            .iter()
            .filter(|c| touches(paths, &c.changed_paths).touches())
            .map(|c| c.sha.clone())
            .collect();
        if !suspects.is_empty() {
            return Some(NoEvidence::OtherSuspects {
                app: w.app.clone(),
                commit: w.commit.clone(),
                suspects,
            });
        }
        None
    }

    /// Feed one observation of an app at `now`.
    pub fn observe(
        &mut self,
        obs: Observation<'_>,
        ancestry: &Ancestry,
        now: Timestamp,
    ) -> Vec<Effect> {
        self.observe_inner(obs, ancestry, now, false)
    }

    /// Feed one observation that shows the source lost updates of the app since its last
    /// delivery (a read or listing newer than the stream's last word): the time since the
    /// previous observation counts as unobserved, however short (`docs/verdicts.md#ordering`).
    pub fn observe_after_gap(
        &mut self,
        obs: Observation<'_>,
        ancestry: &Ancestry,
        now: Timestamp,
    ) -> Vec<Effect> {
        self.observe_inner(obs, ancestry, now, true)
    }

    fn observe_inner(
        &mut self,
        obs: Observation<'_>,
        ancestry: &Ancestry,
        now: Timestamp,
        gap: bool,
    ) -> Vec<Effect> {
        self.clock = self.clock.max(now);
        let mut out = Vec::new();
        match obs {
            Observation::Present(snap) => {
                self.namespaces
                    .entry(snap.name.clone())
                    .or_default()
                    .insert(snap.namespace.clone());
                let paths = match &snap.source {
                    SourceFacts::FromRepo { paths, .. } => Some(paths),
                    SourceFacts::NotFromRepo { .. } => None,
                };
                self.saw_paths(&snap.key(), paths);
                if !snap.operation_running {
                    self.saw_idle(
                        snap.key(),
                        snap.sync_revision.clone(),
                        snap.out_of_sync_beyond_pruning(),
                        snap.health,
                        snap.unclean(),
                        snap.applied_revision(),
                        snap.chronic(),
                    );
                }
                out.extend(self.reopen(snap, ancestry, now));
            }
            Observation::Absent { namespace, name } => {
                let gone: Vec<AppKey> = self
                    .idle
                    .keys()
                    .filter(|k| k.name == name && namespace.is_none_or(|ns| ns == k.namespace))
                    .cloned()
                    .collect();
                for k in gone {
                    self.idle.remove(&k);
                    self.idle_dirty.insert(k);
                }
                self.app_paths.retain(|k, _| {
                    !(k.name == name && namespace.is_none_or(|ns| ns == k.namespace))
                });
                if let Some(seen) = self.namespaces.get_mut(name) {
                    match namespace {
                        Some(ns) => {
                            seen.remove(ns);
                        }
                        None => seen.clear(),
                    }
                }
            }
        }
        // One copy of the snapshot for the tapes of every watch it reaches.
        let mut shared: Option<std::sync::Arc<AppSnapshot>> = None;
        for i in 0..self.watches.len() {
            let w = &self.watches[i];
            if !w.is_live() {
                continue;
            }
            let concerns = match obs {
                Observation::Absent { namespace, name } => {
                    let ns_matches = match (&w.app.namespace, namespace) {
                        (Some(a), Some(b)) => a == b,
                        (Some(_), None) | (None, _) => true,
                    };
                    ns_matches && w.app.name == name
                }
                Observation::Present(snap) => w.app.matches(&snap.namespace, &snap.name),
            };
            if !concerns {
                continue;
            }
            // A bare name that matches Applications in two namespaces: their observations
            // would mix, so the watch ends at once, naming both.
            let ambiguous = w
                .app
                .namespace
                .is_none()
                .then(|| self.namespaces.get(&w.app.name))
                .flatten()
                .filter(|seen| seen.len() > 1)
                .map(|seen| seen.iter().cloned().collect::<Vec<_>>());
            let snap = match obs {
                Observation::Present(snap) => Some(snap),
                Observation::Absent { .. } => None,
            };
            self.tape_observed(i, snap, &mut shared, ancestry, now, gap, &ambiguous);
            out.extend(self.observe_one(i, snap, ancestry, now, gap, ambiguous));
        }
        out
    }

    /// One observation of watch `i`'s app (`None`: absent), `ambiguous` when its bare name
    /// names apps in these namespaces.
    fn observe_one(
        &mut self,
        i: usize,
        snap: Option<&AppSnapshot>,
        ancestry: &Ancestry,
        now: Timestamp,
        gap: bool,
        ambiguous: Option<Vec<String>>,
    ) -> Vec<Effect> {
        if let Some(namespaces) = ambiguous {
            let why = Unwatchable::AmbiguousApp {
                app: self.watches[i].app.name.clone(),
                namespaces,
            };
            return vec![self.finish(i, Verdict::Unwatchable(why), EventKind::Unwatchable, now)];
        }
        // A deadline that fell due before this observation is decided on what was known
        // then: an update that arrives after the deadline cannot rescue the watch. The
        // streak is not extended to `now` here: this very observation may contradict it.
        let mut out = self.decide_as_of(i, now, false, gap);
        if !self.watches[i].is_live() {
            return out;
        }
        match snap {
            None => out.extend(self.observe_absent(i, now)),
            Some(snap) => out.extend(self.observe_present(i, snap, ancestry, now, gap)),
        }
        out
    }

    /// The caller vouches that the app's state is unchanged up to `now` (its change stream has
    /// stayed connected since the last observation, and Argo CD sends every change): the last
    /// observation is extended to `now`, then time-based verdicts are decided.
    pub fn vouch(&mut self, app: &crate::snapshot::AppKey, now: Timestamp) -> Vec<Effect> {
        let mut out = Vec::new();
        for i in 0..self.watches.len() {
            let w = &self.watches[i];
            // An observation after `now` already says more than this vouching could.
            // A reached app last found absent is not vouched for: nothing of it is being
            // observed (`docs/verdicts.md#streak-breaks`).
            if !w.is_live()
                || !w.app.matches(&app.namespace, &app.name)
                || w.last_observed_at().is_none_or(|t| t > now)
                || (w.state() == State::Judging && w.app_absent_since().is_some())
            {
                continue;
            }
            self.tape(i, || Step::Vouched { at: now });
            out.extend(self.vouch_one(i, now));
        }
        out
    }

    fn vouch_one(&mut self, i: usize, now: Timestamp) -> Vec<Effect> {
        // The stream vouches for every instant since the last observation, a deadline that
        // fell due in between included.
        self.watches[i].observed(now);
        self.dirty.insert(i);
        self.decide(i, now)
    }

    /// Time passed: deadlines, stability windows, the unknown-app grace.
    pub fn tick(&mut self, now: Timestamp) -> Vec<Effect> {
        self.clock = self.clock.max(now);
        let mut out = Vec::new();
        for i in 0..self.watches.len() {
            if self.watches[i].is_live() {
                self.tape(i, || Step::Time { at: now });
                out.extend(self.decide(i, now));
            }
        }
        out
    }

    /// The earliest time at which [`Engine::tick`] could change something.
    pub fn next_wakeup(&self) -> Option<Timestamp> {
        self.next_wakeup_after(Timestamp(i64::MIN))
    }

    /// The earliest such time strictly after `handled`: a caller that already ticked at
    /// `handled` skips moments that stayed due (a stability window whose end passed while the
    /// app could not be observed), so it never spins on them.
    pub fn next_wakeup_after(&self, handled: Timestamp) -> Option<Timestamp> {
        self.live()
            .flat_map(|w| self.moments(w))
            .flatten()
            .filter(|t| *t > handled)
            .min()
    }

    /// The apps of the live watches with a moment in `(handled, at]`, each once: the apps a tick
    /// at `at` may decide something about (a caller that ticked at `handled` reads these, and
    /// only these, to decide on fresh observations).
    pub fn due_apps(&self, handled: Timestamp, at: Timestamp) -> Vec<AppRef> {
        let mut apps: Vec<AppRef> = self
            .live()
            .filter(|w| {
                self.moments(w)
                    .into_iter()
                    .flatten()
                    .any(|t| t > handled && t <= at)
            })
            .map(|w| w.app.clone())
            .collect();
        apps.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        apps.dedup();
        apps
    }

    /// The moments at which a tick could change something about live watch `w`.
    fn moments(&self, w: &Watch) -> [Option<Timestamp>; 8] {
        let grace = self.config.unknown_app_grace_ms;
        let stable = self.config.stable_for_ms;
        let deadline = if w.deadline_passed() {
            None
        } else {
            w.deadline_at()
        };
        let absent = w.app_absent_since().map(|t| t.plus_ms(grace));
        let streak = w.streak_completes_at(stable);
        let paused = w.streak_paused_at().map(|p| p.plus_ms(stable));
        // After the deadline, the moment the streak under way would go stale.
        let stale = w
            .last_observed_at()
            .filter(|_| w.deadline_passed())
            .map(|t| t.plus_ms(self.config.stale_after_ms + 1));
        // Resumed on an observation from before the restart: the end of the time the
        // source has to observe again.
        let resuming = self
            .resumed_at
            .filter(|r| w.deadline_passed() && w.last_observed_at().is_some_and(|t| t < *r));
        let resumed = resuming.map(|r| r.plus_ms(self.config.stale_after_ms + 1));
        // Verify: its window's end, and when it asks again.
        let (verify_end, verify_again) = match self.verifying.get(&w.id) {
            Some(v) => (
                Some(v.first_asked.plus_ms(self.verify_window_ms())),
                v.answer
                    .as_ref()
                    .filter(|_| v.outstanding.is_none())
                    .map(|(_, at)| at.plus_ms(self.verify_retry_ms())),
            ),
            None => (None, None),
        };
        [
            deadline,
            absent,
            streak,
            paused,
            stale,
            resumed,
            verify_end,
            verify_again,
        ]
    }

    /// The reverts proposed as pull requests that have not merged: each watch's id, its
    /// commit and the proposal (a proposal two watches of one commit share is listed twice).
    pub fn proposals(&self) -> Vec<(String, CommitId, RevertProposal)> {
        self.watches
            .iter()
            .filter_map(|w| {
                w.proposal()
                    .map(|p| (w.id.clone(), w.commit.clone(), p.clone()))
            })
            .collect()
    }

    /// A commit arrived while reverts wait as pull requests: the revert itself (its commit, a
    /// merge of it, or a squash that carries greenlight's revert trailer) means the request
    /// merged; a human's revert of the commit means it is reverted (and the request withdrawn);
    /// a newer commit that changes the app means the verdict no longer rests on evidence — as a
    /// newer commit stops a direct revert before its push — and the request is withdrawn.
    fn proposals_see(
        &mut self,
        commit: &CommitInfo,
        reverted: Option<&CommitId>,
        now: Timestamp,
    ) -> Vec<Effect> {
        let mut out = Vec::new();
        let mut withdrawn = BTreeSet::new();
        for i in 0..self.watches.len() {
            let w = &self.watches[i];
            let Some(p) = w.proposal().cloned() else {
                continue;
            };
            let reverts_it = reverted == Some(&w.commit);
            if commit.sha == p.revert
                || commit.parents.contains(&p.revert)
                || (reverts_it && crate::trailer::is_greenlight_revert(&commit.message))
            {
                let merged = RevertOutcome::Merged {
                    revert: commit.sha.clone(),
                    url: p.url.clone(),
                };
                out.extend(self.end_proposal(i, merged, now));
                continue;
            }
            if reverts_it {
                let adopted = RevertOutcome::Adopted {
                    revert: commit.sha.clone(),
                };
                out.extend(self.end_proposal(i, adopted, now));
                // One request for every watch that shares it: withdrawn once.
                if !withdrawn.contains(&p.url) {
                    withdrawn.insert(p.url.clone());
                    out.push(Effect::Withdraw {
                        why: format!(
                            "the commit was reverted on {} by {}",
                            self.config.branch,
                            commit.sha.short()
                        ),
                        proposal: p,
                    });
                }
                continue;
            }
            let paths = w
                .source_paths()
                .cloned()
                .unwrap_or_else(|| SourcePaths::Unknown {
                    why: "the app's source paths are not known".into(),
                });
            if !touches(&paths, &commit.changed_paths).touches() {
                continue;
            }
            self.dirty.insert(i);
            let first = p.superseded_by.is_empty() && p.withdrawn_for.is_none();
            let by = LaterCommit {
                sha: commit.sha.clone(),
                changed_paths: commit.changed_paths.clone(),
            };
            self.tape(i, || Step::ProposalSuperseded {
                at: now,
                by: by.clone(),
            });
            self.watches[i].proposal_superseded(by);
            if !first {
                continue;
            }
            let msg = Message::RevertWithdrawing {
                url: p.url.clone(),
                newer: vec![commit.sha.clone()],
                other_app: None,
            };
            out.push(self.emit(i, EventKind::RevertWithdrawing, msg, now));
            if !withdrawn.contains(&p.url) {
                withdrawn.insert(p.url.clone());
                out.push(Effect::Withdraw {
                    why: format!(
                        "newer commits changed app {} while this revert waited ({}): the failure no longer shows that the reverted commit is at fault",
                        self.watches[i].app,
                        commit.sha.short()
                    ),
                    proposal: p.clone(),
                });
            }
            // The other watches that share the request: withdrawn for this one's reason unless
            // the commit changed their app too (then theirs is the same, and is seen in turn).
            let why = format!(
                "newer commit {} changed app {}",
                commit.sha.short(),
                self.watches[i].app
            );
            for j in 0..self.watches.len() {
                if j == i || self.watches[j].proposal().is_none_or(|o| o.url != p.url) {
                    continue;
                }
                let theirs = self.watches[j].source_paths().cloned().unwrap_or_else(|| {
                    SourcePaths::Unknown {
                        why: "the app's source paths are not known".into(),
                    }
                });
                if touches(&theirs, &commit.changed_paths).touches() {
                    continue;
                }
                self.tape(j, || Step::ProposalWithdrawnFor {
                    at: now,
                    why: why.clone(),
                });
                if self.watches[j].proposal_withdrawn_for(&why) {
                    self.dirty.insert(j);
                    let msg = Message::RevertWithdrawing {
                        url: p.url.clone(),
                        newer: vec![commit.sha.clone()],
                        other_app: Some(self.watches[i].app.clone()),
                    };
                    out.push(self.emit(j, EventKind::RevertWithdrawing, msg, now));
                }
            }
        }
        out
    }

    /// A revert's pull request ended: the forge said it merged or was closed, or its commit (or
    /// a revert of the commit) arrived. Every watch waiting for the request at `url` gets its
    /// verdict. Nothing happens for a request no watch waits for (a report that came late).
    pub fn proposal_ended(&mut self, url: &str, end: RevertOutcome, now: Timestamp) -> Vec<Effect> {
        self.clock = self.clock.max(now);
        let mut out = Vec::new();
        for i in 0..self.watches.len() {
            if self.watches[i].proposal().is_some_and(|p| p.url == url) {
                out.extend(self.end_proposal(i, end.clone(), now));
            }
        }
        out
    }

    fn end_proposal(&mut self, i: usize, end: RevertOutcome, now: Timestamp) -> Vec<Effect> {
        let Some(p) = self.watches[i].proposal().cloned() else {
            return Vec::new();
        };
        self.tape(i, || Step::ProposalEnded {
            at: now,
            outcome: Box::new(end.clone()),
        });
        if !self.watches[i].revert_done(&end) {
            return Vec::new();
        }
        let branch = self.config.branch.clone();
        let (kind, msg) = match end {
            RevertOutcome::Merged { revert, url } => (
                EventKind::RevertMerged,
                Message::RevertMerged {
                    revert,
                    branch,
                    url,
                }
                .to_string(),
            ),
            RevertOutcome::Adopted { revert } => (
                EventKind::RevertAdopted,
                Message::RevertAdopted { revert, branch }.to_string(),
            ),
            _ if !p.superseded_by.is_empty() => (EventKind::Failed, self.watches[i].reason_text()),
            _ => (EventKind::RevertFailed, self.watches[i].reason_text()),
        };
        vec![self.emit(i, kind, msg, now)]
    }

    /// The executor opened a pull request for watch `i`'s revert (or another watch of the same
    /// commit did): the watch waits for it; the breaker counts the revert now, as decided.
    fn proposed(
        &mut self,
        i: usize,
        proposal: RevertProposal,
        note: Option<String>,
        shared: bool,
        now: Timestamp,
    ) -> Vec<Effect> {
        if !self.watches[i].revert_proposed(proposal.clone()) {
            return Vec::new();
        }
        let msg = Message::RevertProposed {
            revert: proposal.revert.clone(),
            branch: self.config.branch.clone(),
            url: proposal.url.clone(),
            auto_merge: proposal.auto_merge,
            note,
            shared,
        };
        let mut ev = self.emit(i, EventKind::RevertProposed, msg, now);
        // Said once per request: a human may have to merge it.
        if let (Effect::Emit(e), false) = (&mut ev, shared) {
            e.outcome = Some(Outcome::RevertProposed);
            e.reason = Some(self.watches[i].reason_text());
        }
        let mut out = vec![ev];
        out.extend(self.count_revert(i, &proposal.revert, now));
        out
    }

    /// How long a completed streak waits for verify to find every Pod running what git pins,
    /// and how often it asks again meanwhile (`docs/verdicts.md#expect-running`).
    fn verify_window_ms(&self) -> i64 {
        self.config.stable_for_ms.max(1000)
    }
    fn verify_retry_ms(&self) -> i64 {
        (self.config.stable_for_ms / 4).clamp(1000, 15_000)
    }

    /// `expect=Healthy,Running`: watch `i`'s healthy streak since `since` completed; verify
    /// decides whether it is confirmed.
    fn verify_gate(&mut self, i: usize, since: Timestamp, now: Timestamp) -> Gate {
        let window = self.verify_window_ms();
        let retry = self.verify_retry_ms();
        let fresh = || Verifying {
            streak_since: since,
            first_asked: now,
            outstanding: None,
            answer: None,
        };
        let w = &self.watches[i];
        let v = self.verifying.entry(w.id.clone()).or_insert_with(fresh);
        if v.streak_since != since {
            *v = fresh();
        }
        let overdue = now >= v.first_asked.plus_ms(window);
        match &v.answer {
            Some((Verification::Running(summary), _)) => return Gate::Confirm(summary.clone()),
            Some((Verification::Tag(what), _)) => {
                let why = Unwatchable::MutableTag { what: what.clone() };
                return Gate::End(Verdict::Unwatchable(why), EventKind::Unwatchable);
            }
            Some((Verification::NotRunning(what), _)) if overdue => {
                let verdict = Verdict::NotRunning {
                    what: what.clone(),
                    window_ms: window,
                };
                return Gate::End(verdict, EventKind::Failed);
            }
            Some((Verification::Failed(why), _)) if overdue => {
                let why = Inconclusive::NotVerified { why: why.clone() };
                return Gate::End(Verdict::Inconclusive(why), EventKind::Inconclusive);
            }
            _ if overdue && v.outstanding.is_some() => {
                let why = Inconclusive::NotVerified {
                    why: format!(
                        "verify did not answer within {}",
                        crate::time::human_duration(window)
                    ),
                };
                return Gate::End(Verdict::Inconclusive(why), EventKind::Inconclusive);
            }
            _ => {}
        }
        let due = match &v.answer {
            None => true,
            Some((_, at)) => now >= at.plus_ms(retry),
        };
        if v.outstanding.is_some() || !due {
            return Gate::Wait(Vec::new());
        }
        self.asks += 1;
        v.outstanding = Some(self.asks);
        Gate::Wait(vec![Effect::Verify {
            watch_id: w.id.clone(),
            commit: w.commit.clone(),
            app: w.app.clone(),
            ask: self.asks,
        }])
    }

    /// Verify answered for watch `watch_id` (`expect=Healthy,Running`). Nothing happens for a
    /// watch that no longer waits for it.
    pub fn verified(
        &mut self,
        watch_id: &str,
        ask: u64,
        answer: Verification,
        now: Timestamp,
    ) -> Vec<Effect> {
        self.clock = self.clock.max(now);
        let Some(i) = self
            .watches
            .iter()
            .position(|w| w.id == watch_id && w.is_live())
        else {
            return Vec::new();
        };
        // Only the answer to the ask the watch waits for: one asked for an earlier streak (it
        // broke since) counts for nothing.
        let Some(v) = self
            .verifying
            .get_mut(watch_id)
            .filter(|v| v.outstanding == Some(ask))
        else {
            return Vec::new();
        };
        v.outstanding = None;
        v.answer = Some((answer.clone(), now));
        self.tape(i, || Step::Verified { at: now, answer });
        self.decide(i, now)
    }

    /// The executor finished a revert.
    pub fn revert_finished(
        &mut self,
        watch_id: &str,
        outcome: RevertOutcome,
        now: Timestamp,
    ) -> Vec<Effect> {
        let Some(i) = self
            .watches
            .iter()
            .position(|w| w.id == watch_id && w.revert_pending())
        else {
            return Vec::new();
        };
        self.tape(i, || Step::RevertFinished {
            at: now,
            outcome: Box::new(outcome.clone()),
        });
        let mut out = Vec::new();
        if let RevertOutcome::Proposed { proposal, note } = outcome {
            out.extend(self.proposed(i, proposal.clone(), note, false, now));
            // Another watch of the same commit asked for the same revert: it waits for this
            // request too, and its own request (queued) is never carried out.
            let commit = self.watches[i].commit.clone();
            for j in 0..self.watches.len() {
                if j != i && self.watches[j].commit == commit && self.watches[j].revert_pending() {
                    self.tape(j, || Step::Proposed {
                        at: now,
                        proposal: Box::new(proposal.clone()),
                    });
                    out.extend(self.proposed(j, proposal.clone(), None, true, now));
                }
            }
            if !self.watches.iter().any(|w| w.revert_pending()) {
                for app in std::mem::take(&mut self.confirmed_behind_reverts) {
                    self.record_confirmed(app);
                }
            }
            return out;
        }
        // The verdict's time stays; the revert's outcome is in the event log.
        self.watches[i].revert_done(&outcome);
        let branch = self.config.branch.clone();
        match outcome {
            RevertOutcome::Pushed { revert } => {
                let revert_sha = revert.clone();
                let msg = Message::RevertPushed { revert, branch };
                out.push(self.emit(i, EventKind::RevertPushed, msg, now));
                out.extend(self.count_revert(i, &revert_sha, now));
            }
            RevertOutcome::Adopted { revert } => {
                let revert_sha = revert.clone();
                let msg = Message::RevertAdopted { revert, branch };
                out.push(self.emit(i, EventKind::RevertAdopted, msg, now));
                out.extend(self.count_revert(i, &revert_sha, now));
            }
            RevertOutcome::Failed { .. } => {
                let msg = self.watches[i].reason_text();
                out.push(self.emit(i, EventKind::RevertFailed, msg, now));
            }
            RevertOutcome::Superseded { .. } => {
                let msg = self.watches[i].reason_text();
                out.push(self.emit(i, EventKind::Failed, msg, now));
            }
            // The forge merged it at once (nothing to wait for).
            RevertOutcome::Merged { revert, url } => {
                let revert_sha = revert.clone();
                let msg = Message::RevertMerged {
                    revert,
                    branch,
                    url,
                };
                out.push(self.emit(i, EventKind::RevertMerged, msg, now));
                out.extend(self.count_revert(i, &revert_sha, now));
            }
            RevertOutcome::Closed { .. } => {
                let msg = self.watches[i].reason_text();
                out.push(self.emit(i, EventKind::RevertFailed, msg, now));
            }
            RevertOutcome::Proposed { .. } => {}
        }
        if !self.watches.iter().any(|w| w.revert_pending()) {
            for app in std::mem::take(&mut self.confirmed_behind_reverts) {
                self.record_confirmed(app);
            }
        }
        out
    }

    /// A confirmation of `app` clears that app's reverts from the breaker's count — after the
    /// reverts that were decided before it, however long their pushes take. Deferring it never
    /// lets a revert through that verdict order would have withheld.
    fn record_confirmed(&mut self, app: String) {
        if self.watches.iter().any(|w| w.revert_pending()) {
            self.confirmed_behind_reverts.push(app);
            return;
        }
        self.breaker.record_confirmed(&app);
        self.breaker_dirty = true;
    }

    /// A human closes the breaker.
    pub fn reset_breaker(&mut self, now: Timestamp) -> Vec<Effect> {
        self.breaker.reset();
        self.breaker_dirty = true;
        vec![Effect::Emit(Event {
            time: now,
            event: EventKind::BreakerReset,
            commit: None,
            app: None,
            state: None,
            message: Message::BreakerReset.to_string(),
            evidence: Evidence::default(),
            outcome: None,
            reason: None,
        })]
    }

    // ----- internals -----

    fn live(&self) -> impl Iterator<Item = &Watch> {
        self.watches.iter().filter(|w| w.is_live())
    }

    fn emit(&mut self, i: usize, kind: EventKind, message: impl Display, now: Timestamp) -> Effect {
        self.dirty.insert(i);
        let w = &self.watches[i];
        Effect::Emit(Event {
            time: now,
            event: kind,
            commit: Some(w.commit.to_string()),
            app: Some(w.app.to_string()),
            state: Some(w.state()),
            message: message.to_string(),
            evidence: w.seen().evidence(),
            outcome: w
                .verdict()
                .filter(|_| kind.gives_a_verdict())
                .map(Outcome::of_verdict),
            reason: w
                .verdict()
                .filter(|_| kind.gives_a_verdict())
                .map(|_| w.reason_text()),
        })
    }

    /// INCONCLUSIVE: greenlight could not observe what a verdict needed; never a revert.
    fn inconclusive(&mut self, i: usize, why: Inconclusive, now: Timestamp) -> Effect {
        self.finish(i, Verdict::Inconclusive(why), EventKind::Inconclusive, now)
    }

    /// A verdict; its event says the verdict's words.
    fn finish(&mut self, i: usize, verdict: Verdict, kind: EventKind, now: Timestamp) -> Effect {
        self.watches[i].finish(verdict, now);
        self.verifying.remove(&self.watches[i].id);
        let msg = self.watches[i].reason_text();
        self.emit(i, kind, msg, now)
    }

    fn observe_absent(&mut self, i: usize, now: Timestamp) -> Vec<Effect> {
        let mut out = Vec::new();
        self.dirty.insert(i);
        // After reach, an app that cannot be seen has not been shown gone: a read answering 404
        // for a moment, a token that lost access, a listing that misspoke. The time is
        // unobserved — a deadline in it is INCONCLUSIVE — and even a real deletion is no
        // evidence against the commit (`docs/verdicts.md#not-reached`): the unknown-app grace
        // ends such a watch unwatchable, never reverted.
        if self.watches[i].state() == State::Judging {
            let w = &self.watches[i];
            // A streak under way at the deadline that goes unseen cannot complete: inconclusive.
            if w.deadline_passed()
                && (w.healthy_since().is_some() || w.streak_paused_at().is_some())
            {
                let why = Inconclusive::AppUnseen { since: now };
                return vec![self.inconclusive(i, why, now)];
            }
            // No healthy time is counted across a span nobody saw: a streak starts again when
            // the app is seen healthy again.
            if self.watches[i].streak_broke() {
                let msg = Message::StreakBroken(StreakBreak::Disappeared);
                out.push(self.emit(i, EventKind::HealthyStreakBroken, msg, now));
            }
            if self.watches[i].absent(now) {
                let msg = Message::AppNotFound {
                    app: self.watches[i].app.clone(),
                    grace_ms: self.config.unknown_app_grace_ms,
                };
                out.push(self.emit(i, EventKind::AppNotFound, msg, now));
            }
            out.extend(self.decide(i, now));
            return out;
        }
        let w = &mut self.watches[i];
        w.observed(now);
        w.saw(Seen {
            why_not_healthy: Some(APP_DOES_NOT_EXIST.into()),
            ..Seen::default()
        });
        if w.streak_broke() {
            let msg = Message::StreakBroken(StreakBreak::Disappeared);
            out.push(self.emit(i, EventKind::HealthyStreakBroken, msg, now));
        }
        if self.watches[i].absent(now) {
            let msg = Message::AppNotFound {
                app: self.watches[i].app.clone(),
                grace_ms: self.config.unknown_app_grace_ms,
            };
            out.push(self.emit(i, EventKind::AppNotFound, msg, now));
        }
        out.extend(self.decide(i, now));
        out
    }

    fn observe_present(
        &mut self,
        i: usize,
        snap: &AppSnapshot,
        ancestry: &Ancestry,
        now: Timestamp,
        after_gap: bool,
    ) -> Vec<Effect> {
        let mut out = Vec::new();
        self.watches[i].present();
        self.dirty.insert(i);

        if let Some(why) = unwatchable(snap, &self.config) {
            self.watches[i].saw(seen_of(snap));
            return vec![self.finish(i, Verdict::Unwatchable(why), EventKind::Unwatchable, now)];
        }

        // A gap in observation breaks a streak: unobserved time does not count (`docs/verdicts.md#streak-breaks`).
        let gap = self.watches[i].last_observed_at().map(|t| now.ms_since(t));
        let gap_ms = gap.unwrap_or_default();
        // A known loss of updates is unobserved time, whatever its length.
        let gap = gap.map(|g| {
            if after_gap {
                g.max(self.config.stale_after_ms + 1)
            } else {
                g
            }
        });
        if gap.is_some_and(|g| g > self.config.stale_after_ms)
            && self.watches[i].deadline_passed()
            && (self.watches[i].healthy_since().is_some()
                || self.watches[i].streak_paused_at().is_some())
        {
            // The streak under way at the deadline (or paused after it) was not observed to its
            // end; no later streak may stand in for it, and a gap is not a health failure. (Only
            // after a resume does a gap reach here: otherwise the staleness decided first.)
            self.watches[i].saw(seen_of(snap));
            // Kept as its words say it, to the tenth of a second, so that the record reads back.
            let gap_ms = (gap_ms + 50).div_euclid(100) * 100;
            return vec![self.inconclusive(i, Inconclusive::StreakGap { gap_ms }, now)];
        }
        if gap.is_some_and(|g| g > self.config.stale_after_ms) && self.watches[i].streak_broke() {
            let msg = Message::StreakBroken(StreakBreak::Unobserved { gap_ms });
            out.push(self.emit(i, EventKind::HealthyStreakBroken, msg, now));
        } else if let Some(g) = gap {
            // A short gap counts only up to the slack; the rest is not healthy time.
            let slack = self.config.unobserved_slack_ms();
            self.watches[i].streak_unobserved(g - slack);
        }
        let failed_sync = failed_sync_of(snap, &self.watches[i], ancestry);
        let w = &mut self.watches[i];
        w.observed(now);
        let render_broke = w.seen().comparison_error.is_none() && snap.comparison_error.is_some();
        let sync_newly_failed = failed_sync.is_some() && w.seen().failed_sync != failed_sync;
        w.saw(Seen {
            failed_sync,
            ..seen_of(snap)
        });
        // Paths that a commit left unrecorded under the old ones could touch: the commits that
        // landed since can no longer be ruled out (`docs/verdicts.md#attribution`).
        let mut uncovered = None;
        if let SourceFacts::FromRepo { paths, .. } = &snap.source {
            if let Some(before) = w.later_filtered_under()
                && !crate::paths::covers(before, paths)
            {
                uncovered = Some(format!(
                    "source paths {} → {}",
                    crate::paths::shown(before),
                    crate::paths::shown(paths)
                ));
            }
            w.learned_source_paths(paths.clone());
        }
        if render_broke && w.state() == State::WaitingReach {
            let msg = Message::ComparisonError {
                app: w.app.clone(),
                message: snap.comparison_error.clone().unwrap_or_default(),
            };
            out.push(self.emit(i, EventKind::ComparisonError, msg, now));
        }
        out.extend(self.check_arm(i, snap, now));
        out.extend(self.check_attribution(i, now));
        if self.watches[i].is_live() {
            out.extend(self.check_inputs(i, snap, now));
        }
        if self.watches[i].is_live()
            && let Some(changed) = uncovered
        {
            let verdict = Verdict::ChangedOutside {
                app: self.watches[i].app.clone(),
                changed: vec![changed],
            };
            out.push(self.finish(i, verdict, EventKind::ChangedOutside, now));
        }
        if !self.watches[i].is_live() {
            return out;
        }

        if self.watches[i].state() == State::WaitingReach {
            if sync_newly_failed && let Some(f) = &self.watches[i].seen().failed_sync {
                let msg = Message::SyncFailed {
                    revision: f.revision.clone(),
                    phase: f.phase.clone(),
                    message: f.message.clone(),
                };
                out.push(self.emit(i, EventKind::SyncFailed, msg, now));
            }
            out.extend(self.check_reach(i, snap, ancestry, now));
            // Compared as Synced with the commit, yet no sync operation ran with it.
            if self.watches[i].state() == State::WaitingReach
                && snap.sync_status == "Synced"
                && !snap.operation_running
                && is_git_sha(&snap.sync_revision)
                && ancestry.contains(self.watches[i].commit.as_str(), &snap.sync_revision)
            {
                self.watches[i].saw_not_applied(snap.sync_revision.clone());
            }
            // Not reached, nothing syncing and the commit not yet compared (a resource it adds
            // would show Missing): the app as it was before the commit.
            if self.watches[i].state() == State::WaitingReach
                && !snap.operation_running
                && (!is_git_sha(&snap.sync_revision)
                    || ancestry.knows_not(self.watches[i].commit.as_str(), &snap.sync_revision))
            {
                // The batch is worked out once per baseline revision.
                let b = self.watches[i].baseline();
                let known = b.batch.is_some()
                    && b.revision.as_deref() == Some(&snap.sync_revision.to_ascii_lowercase());
                let chronic = snap.chronic();
                let before = if known {
                    BeforeSeen {
                        before: Before::of(chronic.baseline_health(snap.health)),
                        revision: b.revision.clone(),
                        unclean: snap.unclean(),
                        batch: None,
                        chronic,
                        after_compare: false,
                    }
                } else {
                    let seen = self.before_seen(
                        &self.watches[i].commit,
                        None,
                        &snap.sync_revision,
                        snap.applied_revision().as_deref(),
                        snap.health,
                        snap.unclean(),
                        chronic,
                    );
                    self.fact_baseline(i, seen)
                };
                self.watches[i].saw_before(before);
            } else if self.watches[i].state() == State::WaitingReach
                && !snap.operation_running
                && snap.out_of_sync_beyond_pruning()
                && (self.watches[i].baseline().before == Before::Unknown
                    || self.watches[i].baseline().after_compare)
                && let Some(applied) = snap.applied_revision()
                && !self.watches[i]
                    .commit
                    .as_str()
                    .eq_ignore_ascii_case(&applied)
                && ancestry.knows_not(self.watches[i].commit.as_str(), &applied)
                && is_git_sha(&snap.sync_revision)
                && (self.watches[i]
                    .commit
                    .as_str()
                    .eq_ignore_ascii_case(&snap.sync_revision)
                    || ancestry.contains(self.watches[i].commit.as_str(), &snap.sync_revision))
            {
                // Compared with the commit, not synced, and nothing better seen: the app as its
                // last sync left it (see `compared_baseline`).
                let before = self.compared_baseline(
                    &self.watches[i].commit,
                    None,
                    &applied,
                    snap.health,
                    snap.chronic(),
                );
                let before = self.fact_baseline(i, before);
                self.watches[i].saw_before(before);
            }
        } else {
            out.extend(self.check_sync_failure(i, snap, ancestry, now));
        }

        if self.watches[i].state() == State::Judging
            && let Some(revision) = withdrawn_by(snap, &self.watches[i], ancestry)
        {
            let why = NotReached::Withdrawn { revision };
            return vec![self.finish(i, Verdict::NotReached(why), EventKind::NotReached, now)];
        }

        if self.watches[i].state() == State::Judging {
            let w = &self.watches[i];
            let chronic = if self.config.strict_health {
                Chronic::default()
            } else {
                w.baseline().chronic.clone()
            };
            let judged = if self.config.strict_health && !self.config.health_scope.is_empty() {
                healthy_scoped(snap, &self.config.health_scope)
            } else {
                healthy_against(snap, &chronic)
            };
            let verdict = match judged {
                Ok(_) => fresh_comparison(snap, ancestry),
                Err(ref why) => Err(why.clone()),
            };
            let left_out = judged.unwrap_or_else(|_| left_out_of(snap, &chronic));
            let w = &mut self.watches[i];
            w.saw_health(
                verdict
                    .as_ref()
                    .err()
                    .map(|why| with_left_out(why.to_string(), &left_out)),
                verdict.as_ref().err().is_some_and(Unhealthy::is_transient),
                left_out.clone(),
            );
            let stable_for_ms = self.config.stable_for_ms;
            match verdict {
                Ok(()) => {
                    w.saw_healthy_after_reach();
                    if w.healthy_at(now) {
                        let msg = Message::StreakStarted {
                            source: snap.resource_health_source,
                            stable_for_ms,
                            left_out,
                        };
                        out.push(self.emit(i, EventKind::HealthyStreakStarted, msg, now));
                    } else if w.streak_resumed(now) {
                        let msg = Message::StreakResumed {
                            banked_ms: w.streak_banked_ms(),
                            stable_for_ms,
                        };
                        out.push(self.emit(i, EventKind::HealthyStreakResumed, msg, now));
                    }
                }
                // After the deadline, a transient state pauses the streak under way (or
                // keeps it paused) (`docs/verdicts.md#transient`); anything else breaks it.
                Err(why) => {
                    if why.is_transient() && w.streak_paused_at().is_some() {
                    } else if why.is_transient() && w.streak_paused(now) {
                        let msg = Message::StreakPaused { why, stable_for_ms };
                        out.push(self.emit(i, EventKind::HealthyStreakPaused, msg, now));
                    } else if w.streak_broke() {
                        let msg = Message::StreakBroken(StreakBreak::Unhealthy(why));
                        out.push(self.emit(i, EventKind::HealthyStreakBroken, msg, now));
                    }
                }
            }
        }
        out.extend(self.decide(i, now));
        out
    }

    fn check_arm(&mut self, i: usize, snap: &AppSnapshot, now: Timestamp) -> Vec<Effect> {
        let mut out = Vec::new();
        let w = &self.watches[i];
        if w.mode != Mode::Arm {
            return out;
        }
        if w.arm_blocked().is_none()
            && let Some(paths) = w.source_paths()
            && touches(paths, &w.own_paths) == Touch::No
        {
            let why = ArmBlocked::NothingUnderPaths { app: w.app.clone() };
            self.watches[i].block_arm(why.clone());
            out.push(self.emit(
                i,
                EventKind::ArmDowngraded,
                Message::ArmDowngraded(why),
                now,
            ));
        }
        let w = &self.watches[i];
        if !snap.automated_sync && !w.warned_auto_sync_off() && w.arm_blocked().is_none() {
            let msg = Message::AutoSyncOff { app: w.app.clone() };
            self.watches[i].warned_auto_sync();
            out.push(self.emit(i, EventKind::AutoSyncOff, msg, now));
        }
        out
    }

    /// Later commits that changed this app's paths make the verdict unattributable.
    fn check_attribution(&mut self, i: usize, now: Timestamp) -> Vec<Effect> {
        // An asked watch (`greenlight wait`) answers whether the app runs its commit healthily,
        // not whether the commit caused what happened: a later commit on top of it does not end
        // the question (the app running it contains the asked commit too).
        if self.config.asked.is_some() {
            return Vec::new();
        }
        let w = &self.watches[i];
        let Some(paths) = w.source_paths() else {
            return Vec::new();
        };
        let exempt = &self.config.attribution_exempt;
        // The commits found no culprit before are no longer held: only the newer ones are read.
        let culprits: Vec<CommitId> = w
            .later_commits()
            .iter()
            .filter(|c| counts_against(exempt, paths, &c.changed_paths))
            .map(|c| c.sha.clone())
            .collect();
        if culprits.is_empty() {
            let paths = paths.clone();
            if self.watches[i].later_commits_clear(&paths) {
                self.dirty.insert(i);
            }
            return Vec::new();
        }
        let verdict = Verdict::Attribution {
            culprits,
            app: w.app.clone(),
        };
        vec![self.finish(i, verdict, EventKind::Attribution, now)]
    }

    /// A change of the app's inputs from outside the watched repository (its Application
    /// edited, another source's new revision) makes the verdict unattributable
    /// (`docs/verdicts.md#changed-outside`).
    fn check_inputs(&mut self, i: usize, snap: &AppSnapshot, now: Timestamp) -> Vec<Effect> {
        if snap.inputs.is_empty() {
            return Vec::new();
        }
        let Some(first) = self.watches[i].inputs() else {
            self.watches[i].saw_inputs(snap.inputs.clone());
            self.dirty.insert(i);
            return Vec::new();
        };
        let changed = changed_inputs(first, &snap.inputs);
        if changed.is_empty() {
            // A revision resolved since (a SHA where there was none) is kept as the reference.
            if *first != snap.inputs {
                let mut kept = first.clone();
                for (k, v) in &snap.inputs {
                    if is_revision_input(k) && is_git_sha(v) {
                        kept.insert(k.clone(), v.clone());
                    }
                }
                if kept != *first {
                    self.watches[i].saw_inputs(kept);
                    self.dirty.insert(i);
                }
            }
            return Vec::new();
        }
        let verdict = Verdict::ChangedOutside {
            app: self.watches[i].app.clone(),
            changed,
        };
        vec![self.finish(i, verdict, EventKind::ChangedOutside, now)]
    }

    fn check_reach(
        &mut self,
        i: usize,
        snap: &AppSnapshot,
        ancestry: &Ancestry,
        now: Timestamp,
    ) -> Vec<Effect> {
        let mut out = Vec::new();
        let commit = self.watches[i].commit.clone();
        // A sync that failed before it applied the commit is not reach
        // (`docs/verdicts.md#operation-outcomes`).
        let reaching: Vec<&ReachCandidate> = snap
            .reach_candidates
            .iter()
            .filter(|c| {
                admissible(snap, c)
                    && (c.via != ReachVia::SyncedRevision
                        || synced_by_an_operation(snap, &commit, ancestry))
                    && !matches!(c.via, ReachVia::OperationFailed { .. })
                    && is_git_sha(&c.revision)
                    && ancestry.contains(commit.as_str(), &c.revision)
            })
            .collect();
        // Prefer evidence of a sync that succeeded; a failed PostSync hook alone is reach with
        // evidence against the commit.
        let Some(best) = reaching
            .iter()
            .find(|c| !matches!(c.via, ReachVia::PostSyncHookFailed { .. }))
            .or(reaching.first())
        else {
            return out;
        };
        let w = &mut self.watches[i];
        let started = snap.last_operation.as_ref().and_then(|o| o.started_at);
        w.reached((*best).clone(), started, now);
        let msg = Message::Reached {
            app: w.app.clone(),
            via: best.via.clone(),
            revision: best.revision.clone(),
            deadline_ms: w.deadline_ms,
        };
        out.push(self.emit(i, EventKind::Reached, msg, now));
        out.extend(self.check_sync_failure(i, snap, ancestry, now));
        out
    }

    fn check_sync_failure(
        &mut self,
        i: usize,
        snap: &AppSnapshot,
        ancestry: &Ancestry,
        now: Timestamp,
    ) -> Vec<Effect> {
        let w = &self.watches[i];
        if w.reported_sync_failure() {
            return Vec::new();
        }
        let failed = snap.reach_candidates.iter().find_map(|c| match &c.via {
            ReachVia::OperationFailed { phase, message }
            | ReachVia::PostSyncHookFailed { phase, message, .. }
                if ancestry.contains(w.commit.as_str(), &c.revision) =>
            {
                Some((c, phase, message))
            }
            _ => None,
        });
        let Some((c, phase, message)) = failed else {
            return Vec::new();
        };
        let msg = Message::SyncFailed {
            revision: c.revision.clone(),
            phase: phase.clone(),
            message: message.clone(),
        };
        let hook_failure = match &c.via {
            // The same hooks failed in the baseline's last operation: the rest of the app
            // decides (`docs/verdicts.md#evidence`, condition 3).
            ReachVia::PostSyncHookFailed { hooks, .. }
                if !self.config.strict_health && hooks_as_before(hooks, &w.baseline().chronic) =>
            {
                None
            }
            ReachVia::PostSyncHookFailed { message, hooks, .. } => {
                Some(Failure::PostSyncHookFailed {
                    revision: c.revision.clone(),
                    message: message.clone(),
                    hooks: hooks.clone(),
                })
            }
            _ => None,
        };
        self.watches[i].reported_sync_failure_now();
        let mut out = vec![self.emit(i, EventKind::SyncFailed, msg, now)];
        // Argo CD applied the commit and the team's own PostSync check failed: evidence
        // against it, judged at once.
        if let Some(failure) = hook_failure {
            out.extend(self.fail(i, failure, now));
        }
        out
    }

    fn reverted_by_human(&mut self, i: usize, revert: &CommitId, now: Timestamp) -> Vec<Effect> {
        let verdict = Verdict::RevertedByHuman {
            revert: revert.clone(),
            branch: self.config.branch.clone(),
            armed: self.watches[i].mode == Mode::Arm,
        };
        vec![self.finish(i, verdict, EventKind::RevertedByHuman, now)]
    }

    /// Deadlines, stability and grace: the verdicts that time alone can bring.
    fn decide(&mut self, i: usize, now: Timestamp) -> Vec<Effect> {
        self.decide_as_of(i, now, true, false)
    }

    /// `extend`: whether a fresh last observation vouches for the app's state up to `now`
    /// (true for the passage of time; false just before applying a new observation).
    /// `gap`: updates were lost since the last observation, so it vouches for nothing after
    /// itself.
    fn decide_as_of(&mut self, i: usize, now: Timestamp, extend: bool, gap: bool) -> Vec<Effect> {
        let w = &self.watches[i];
        if !w.is_live() {
            return Vec::new();
        }
        let last_observed = w.last_observed_at();
        let stale =
            gap || last_observed.is_none_or(|t| now.ms_since(t) > self.config.stale_after_ms);
        let stale_at = |deadline| Inconclusive::StaleAtDeadline {
            deadline,
            last_observed,
            stale_after_ms: self.config.stale_after_ms,
        };

        if let Some(since) = w.app_absent_since()
            && now.ms_since(since) >= self.config.unknown_app_grace_ms
        {
            let why = Unwatchable::AppMissing {
                app: w.app.clone(),
                grace_ms: self.config.unknown_app_grace_ms,
            };
            return vec![self.finish(i, Verdict::Unwatchable(why), EventKind::Unwatchable, now)];
        }

        match w.phase() {
            Phase::WaitingReach(waiting) => {
                if now < w.watch_started_at.plus_ms(w.deadline_ms) {
                    return Vec::new();
                }
                if stale {
                    let why = stale_at(Deadline::Reach);
                    return vec![self.inconclusive(i, why, now)];
                }
                let why = if waiting.absent_since.is_some() {
                    NotReached::AppMissing {
                        deadline_ms: w.deadline_ms,
                        app: w.app.clone(),
                    }
                } else if let Some(f) = &w.seen().failed_sync {
                    NotReached::SyncFailed {
                        deadline_ms: w.deadline_ms,
                        revision: f.revision.clone(),
                        phase: f.phase.clone(),
                        message: f.message.clone(),
                    }
                } else if let Some(revision) = &w.seen().not_applied {
                    NotReached::NotApplied {
                        deadline_ms: w.deadline_ms,
                        revision: revision.clone(),
                    }
                } else if let Some(message) = &w.seen().comparison_error {
                    NotReached::ComparisonError {
                        deadline_ms: w.deadline_ms,
                        message: message.clone(),
                    }
                } else {
                    NotReached::NeverSynced {
                        deadline_ms: w.deadline_ms,
                        revision: w.seen().revision.clone(),
                        sync: w.seen().sync.clone(),
                    }
                };
                vec![self.finish(i, Verdict::NotReached(why), EventKind::NotReached, now)]
            }
            Phase::Judging(j) => {
                let Some(last) = last_observed else {
                    return Vec::new();
                };
                let streak = j.streak;
                let banked = j.banked_ms - j.unobserved_ms;
                let pauses = j.pauses;
                let deadline = j.reached_at.plus_ms(w.deadline_ms);
                // A streak counts through `now` while the last observation is fresh: the
                // source reports every change, and silence past stale-after is not observation.
                let fresh = !gap && now.ms_since(last) <= self.config.stale_after_ms;
                // Resumed after a restart (or by a new leader) with an observation from before
                // it: the source has had no time to observe again. Until it has had
                // `--stale-after`, staleness is the downtime's, and waits for an observation;
                // the downtime itself is unobserved and counts for nothing.
                let resuming = !fresh
                    && self
                        .resumed_at
                        .is_some_and(|r| last < r && now.ms_since(r) <= self.config.stale_after_ms);
                if let Some(h) = streak.since() {
                    // Past the last observation, only what the slack allows: a moment nothing
                    // vouched for is not observed (`docs/verdicts.md#observed-time`).
                    let tail = if fresh && extend {
                        now.ms_since(last.max(h))
                            .min(self.config.unobserved_slack_ms())
                    } else {
                        0
                    };
                    let observed = banked + last.ms_since(h).max(0) + tail;
                    if observed >= self.config.stable_for_ms {
                        let verified = if w.expect_running {
                            match self.verify_gate(i, h, now) {
                                Gate::Confirm(summary) => Some(summary),
                                Gate::Wait(mut effects) => {
                                    // A deadline that falls while the completed streak waits
                                    // for verify passes with that streak under way, as any
                                    // other: a break after it is a break after the deadline.
                                    if !streak.deadline_passed() && now >= deadline {
                                        self.watches[i].streak_outlived_deadline();
                                        let msg = Message::DeadlinePassedStreakUnderWay;
                                        let kind = EventKind::DeadlinePassedStreakUnderWay;
                                        effects.push(self.emit(i, kind, msg, now));
                                    }
                                    return effects;
                                }
                                Gate::End(verdict, kind) => {
                                    return vec![self.finish(i, verdict, kind, now)];
                                }
                            }
                        } else {
                            None
                        };
                        let w = &self.watches[i];
                        let left_out = w.seen().left_out.clone();
                        // Dry-run verdicts do not count for the breaker, either way.
                        if !(w.dry_run || self.config.dry_run) {
                            self.record_confirmed(w.app.to_string());
                        }
                        let verdict = Verdict::Confirmed {
                            stable_for_ms: self.config.stable_for_ms,
                            pauses,
                            left_out,
                            verified,
                        };
                        return vec![self.finish(i, verdict, EventKind::Confirmed, now)];
                    }
                    if streak.deadline_passed() && !fresh {
                        if resuming {
                            return Vec::new();
                        }
                        let why = Inconclusive::StreakWentStale {
                            last_observed,
                            stale_after_ms: self.config.stale_after_ms,
                        };
                        return vec![self.inconclusive(i, why, now)];
                    }
                }
                if let Some(at) = streak.paused_at() {
                    // A paused streak that goes unobserved is as one under way: no verdict
                    // can rest on it.
                    if !fresh {
                        if resuming {
                            return Vec::new();
                        }
                        let why = Inconclusive::StreakWentStale {
                            last_observed,
                            stale_after_ms: self.config.stale_after_ms,
                        };
                        return vec![self.inconclusive(i, why, now)];
                    }
                    if now.ms_since(at) >= self.config.stable_for_ms {
                        let why = Inconclusive::NotHealthyAgain {
                            within_ms: self.config.stable_for_ms,
                            why: w
                                .seen()
                                .why_not_healthy
                                .clone()
                                .unwrap_or_else(|| NOT_HEALTHY.into()),
                        };
                        return vec![self.inconclusive(i, why, now)];
                    }
                    return Vec::new();
                }
                if streak.deadline_passed() {
                    if streak.since().is_none() {
                        let why = w.seen().why_not_healthy.clone();
                        let failure = Failure::StreakBroke {
                            why: why.unwrap_or_else(|| HEALTH_BROKE.into()),
                        };
                        return self.fail(i, failure, now);
                    }
                    return Vec::new();
                }
                if now < deadline {
                    return Vec::new();
                }
                if stale {
                    let why = stale_at(Deadline::Health);
                    return vec![self.inconclusive(i, why, now)];
                }
                // An app that cannot be seen at its deadline is unobserved, never failed.
                if let Some(since) = j.absent_since {
                    let why = Inconclusive::AppUnseen { since };
                    return vec![self.inconclusive(i, why, now)];
                }
                if streak.since().is_some() {
                    self.watches[i].streak_outlived_deadline();
                    let msg = Message::DeadlinePassedStreakUnderWay;
                    return vec![self.emit(i, EventKind::DeadlinePassedStreakUnderWay, msg, now)];
                }
                // Healthy after reach, then passing through a transient state that spans the
                // deadline (an HPA scale-up, a sync of someone else's change): no evidence the
                // commit failed — the streak is as one paused at the deadline, and the app must
                // be healthy again within stable-for (`docs/verdicts.md#transient`).
                let transient = w.baseline().healthy_after_reach && w.seen().transient;
                if transient && self.watches[i].streak_paused_at_deadline(now) {
                    let why = self.watches[i]
                        .seen()
                        .why_not_healthy
                        .clone()
                        .unwrap_or_else(|| NOT_HEALTHY.into());
                    let msg = Message::DeadlinePassedTransient {
                        why,
                        stable_for_ms: self.config.stable_for_ms,
                    };
                    return vec![self.emit(i, EventKind::HealthyStreakPaused, msg, now)];
                }
                let w = &self.watches[i];
                // Suspended as in the baseline (a CronJob suspended on purpose) is no hold.
                if w.seen().health == Some(Health::Suspended)
                    && !w.seen().left_out.iter().any(|l| l.ends_with("=Suspended"))
                {
                    let verdict = Verdict::Suspended {
                        deadline_ms: w.deadline_ms,
                    };
                    return vec![self.finish(i, verdict, EventKind::Failed, now)];
                }
                let failure = Failure::NotHealthy {
                    deadline_ms: w.deadline_ms,
                    why: w
                        .seen()
                        .why_not_healthy
                        .clone()
                        .unwrap_or_else(|| NOT_HEALTHY.into()),
                };
                self.fail(i, failure, now)
            }
            Phase::Reverting(_) | Phase::Finished(_) => Vec::new(),
        }
    }

    /// FAIL, and in arm mode a revert — unless a safety device says no.
    fn fail(&mut self, i: usize, failure: Failure, now: Timestamp) -> Vec<Effect> {
        let w = &self.watches[i];
        // The evidence is weighed before shadow and dry-run, so that "would have reverted"
        // (dry-run's words, shadow's notification) is said only when an armed watch would
        // have: a shadow or dry-run failure without the evidence says what is missing.
        let not_reverted = if let Some(b) = w.arm_blocked() {
            Some(NoRevert::ArmBlocked(b.clone()))
        } else if !w.baseline().before.was_healthy() && !w.baseline().healthy_after_reach {
            Some(NoRevert::NotShownAtFault {
                before: w.baseline().before,
            })
        } else if let Some(missing) = self.missing_evidence(i) {
            Some(NoRevert::NoEvidence(missing))
        } else if w.mode == Mode::Shadow {
            Some(NoRevert::Shadow)
        } else if w.dry_run || self.config.dry_run {
            Some(NoRevert::DryRun)
        } else {
            None
        };
        if let Some(not_reverted) = not_reverted {
            let verdict = Verdict::Failed {
                failure,
                not_reverted,
            };
            return vec![self.finish(i, verdict, EventKind::Failed, now)];
        }
        let gate = self.revert_gate(i);
        match self.fact_gate(i, gate) {
            RevertGate::BreakerOpen => {
                let verdict = Verdict::Failed {
                    failure,
                    not_reverted: NoRevert::BreakerOpen { after: OPEN_AFTER },
                };
                let mut out = vec![self.finish(i, verdict, EventKind::Failed, now)];
                out.push(Effect::Emit(Event {
                    time: now,
                    event: EventKind::BreakerBlocked,
                    commit: Some(self.watches[i].commit.to_string()),
                    app: Some(self.watches[i].app.to_string()),
                    state: Some(State::Fail),
                    message: Message::BreakerBlocked.to_string(),
                    evidence: Evidence::default(),
                    outcome: None,
                    reason: None,
                }));
                out
            }
            // The same commit's revert is already proposed (for another app): this watch
            // waits for the same request.
            RevertGate::Join(p) => {
                self.watches[i].revert_requested(failure.clone(), now);
                let mut out =
                    vec![self.emit(i, EventKind::Failed, Message::Reverting(failure), now)];
                out.extend(self.proposed(i, *p, None, true, now));
                out
            }
            RevertGate::Request { known_tip } => {
                let request = RevertRequest {
                    known_tip,
                    ..revert_request(&self.watches[i], &failure)
                };
                self.watches[i].revert_requested(failure.clone(), now);
                let ev = self.emit(i, EventKind::Failed, Message::Reverting(failure), now);
                vec![ev, Effect::Revert(request)]
            }
        }
    }

    /// What the revert of watch `i`'s FAIL meets outside it: the breaker, the reverts pending
    /// and the pull requests open.
    fn revert_gate(&self, i: usize) -> RevertGate {
        // The breaker counts revert commits: a watch of a commit whose revert is already
        // counted or under way adopts that revert and adds nothing to the count.
        let commit = &self.watches[i].commit;
        let mut pending: Vec<&CommitId> = self
            .watches
            .iter()
            .filter(|p| p.revert_pending())
            .map(|p| &p.commit)
            .collect();
        pending.sort();
        pending.dedup();
        let same_revert = self.breaker.counts_revert_of(commit) || pending.contains(&commit);
        let pending = pending
            .iter()
            .filter(|c| !self.breaker.counts_revert_of(c))
            .count() as u32;
        if !same_revert && !self.breaker.allows_revert(pending) {
            return RevertGate::BreakerOpen;
        }
        let open = self
            .watches
            .iter()
            .filter(|o| o.commit == *commit)
            .find_map(|o| {
                o.proposal()
                    .filter(|p| p.superseded_by.is_empty() && p.withdrawn_for.is_none())
            })
            .cloned();
        if let Some(p) = open {
            return RevertGate::Join(Box::new(p));
        }
        RevertGate::Request {
            known_tip: self
                .arrived
                .back()
                .map(|a| a.sha.clone())
                .or_else(|| self.known_tip.clone()),
        }
    }

    fn count_revert(&mut self, i: usize, revert: &CommitId, now: Timestamp) -> Vec<Effect> {
        self.breaker_dirty = true;
        let w = &self.watches[i];
        if self
            .breaker
            .record_revert(&w.commit, revert, &w.app.to_string())
        {
            return vec![Effect::Emit(Event {
                time: now,
                event: EventKind::BreakerOpened,
                commit: None,
                app: None,
                state: None,
                message: Message::BreakerOpened { after: OPEN_AFTER }.to_string(),
                evidence: Evidence::default(),
                outcome: Some(Outcome::BreakerOpened),
                reason: None,
            })];
        }
        Vec::new()
    }
}

/// The tapes (`docs/why.md`): recording one watch's inputs, and replaying them.
impl Engine {
    /// Records `step` on watch `i`'s tape, when it has one and the engine is not replaying.
    fn tape(&mut self, i: usize, step: impl FnOnce() -> Step) {
        if self.replaying.is_some() {
            return;
        }
        if let Some(r) = self.tapes.get_mut(&self.watches[i].id) {
            r.push(step());
        }
    }

    /// Watch `i` just started (or re-opened): its tape begins with it as built.
    fn tape_start(&mut self, i: usize, now: Timestamp) {
        if self.replaying.is_some() {
            return;
        }
        let mut r = Recording::default();
        r.push(Step::Start {
            at: now,
            config: Box::new(self.config.clone()),
            watch: Box::new(self.watches[i].to_flat()),
        });
        self.tapes.insert(self.watches[i].id.clone(), r);
    }

    /// An observation of watch `i`'s app, with the answers about its commit. `shared`: the
    /// snapshot as already kept for another watch of the same observation.
    #[allow(clippy::too_many_arguments)]
    fn tape_observed(
        &mut self,
        i: usize,
        snap: Option<&AppSnapshot>,
        shared: &mut Option<std::sync::Arc<AppSnapshot>>,
        ancestry: &Ancestry,
        now: Timestamp,
        gap: bool,
        ambiguous: &Option<Vec<String>>,
    ) {
        if self.replaying.is_some() {
            return;
        }
        let w = &self.watches[i];
        let Some(r) = self.tapes.get_mut(&w.id) else {
            return;
        };
        // The answers the judge may read for this watch: about its commit, and whether the
        // revision compared holds the one applied (`fresh_comparison`).
        let elsewhere = snap.and_then(|s| s.compared_elsewhere.as_ref());
        let mut answers: Vec<Answer> = ancestry
            .0
            .iter()
            .filter(|((c, r), _)| {
                w.commit.as_str().eq_ignore_ascii_case(c)
                    || elsewhere.is_some_and(|e| e.applied == *c && e.compared == *r)
            })
            .map(|((c, r), contains)| Answer {
                commit: c.clone(),
                revision: r.clone(),
                contains: *contains,
            })
            .collect();
        answers.sort();
        let ancestry = (r.last_answers.as_ref() != Some(&answers)).then(|| answers.clone());
        r.last_answers = Some(answers);
        let app = match snap {
            None => {
                r.last_snapshot = None;
                Shown::Absent
            }
            Some(s) if r.last_snapshot.as_deref() == Some(s) => Shown::Same,
            Some(s) => {
                let kept = shared
                    .get_or_insert_with(|| std::sync::Arc::new(s.clone()))
                    .clone();
                // What changed since the previous snapshot, when that says it in fewer words
                // (an app's revision moving on changes a few fields of it).
                let changed = r.last_snapshot.as_ref().and_then(|last| {
                    let from = serde_json::to_value(&**last).ok()?;
                    let to = serde_json::to_value(s).ok()?;
                    let patch = crate::tape::merge_diff(&from, &to);
                    let (p, whole) = (patch.to_string().len(), to.to_string().len());
                    (p < whole / 2).then_some(patch)
                });
                r.last_snapshot = Some(kept.clone());
                match changed {
                    Some(patch) => Shown::Changed(patch),
                    None => Shown::Present(kept),
                }
            }
        };
        r.push(Step::Observed {
            at: now,
            gap,
            app,
            ancestry,
            ambiguous: ambiguous.clone(),
        });
    }

    /// The baseline watch `i` saw, as worked out live — or, replaying, as recorded.
    fn fact_baseline(&mut self, i: usize, live: BeforeSeen) -> BeforeSeen {
        match self.fact(|s| matches!(s, Step::Baseline { .. }), "a baseline") {
            Some(Step::Baseline { before }) => *before,
            Some(_) => live,
            None => {
                self.tape(i, || Step::Baseline {
                    before: Box::new(live.clone()),
                });
                live
            }
        }
    }

    /// What watch `i`'s revert met, as found live — or, replaying, as recorded.
    fn fact_gate(&mut self, i: usize, live: RevertGate) -> RevertGate {
        match self.fact(
            |s| matches!(s, Step::RevertGate { .. }),
            "the revert's gate",
        ) {
            Some(Step::RevertGate { gate }) => gate,
            Some(_) => live,
            None => {
                self.tape(i, || Step::RevertGate { gate: live.clone() });
                live
            }
        }
    }

    /// Replaying: the next recorded fact, which must be of the kind asked (else the replay
    /// has parted from the recording, and says so). Recording: `None`.
    fn fact(&mut self, is: impl Fn(&Step) -> bool, what: &str) -> Option<Step> {
        let r = self.replaying.as_mut()?;
        match r.facts.pop_front() {
            Some(f) if is(&f) => Some(f),
            other => {
                if r.diverged.is_none() {
                    r.diverged = Some(match other {
                        Some(f) => format!(
                            "the judge consulted {what} where the recorded one consulted {}",
                            fact_name(&f)
                        ),
                        None => format!("the judge consulted {what}; the recorded one did not"),
                    });
                }
                // Something to go on with; the replay stops at this step anyway.
                Some(Step::Full { at: self.clock })
            }
        }
    }

    /// The recorded steps the store has not taken, by watch: (id, the first step's sequence
    /// number, the steps). The tapes of finished watches are let go once taken.
    pub fn take_tapes(&mut self) -> Vec<(String, usize, Vec<Step>)> {
        let mut out = Vec::new();
        for (id, r) in &mut self.tapes {
            if !r.unsaved.is_empty() {
                let steps = std::mem::take(&mut r.unsaved);
                out.push((id.clone(), r.count - steps.len(), steps));
            }
        }
        let finished: BTreeSet<&str> = self
            .watches
            .iter()
            .filter(|w| matches!(w.phase(), Phase::Finished(_)))
            .map(|w| w.id.as_str())
            .collect();
        let held: BTreeSet<&str> = self.watches.iter().map(|w| w.id.as_str()).collect();
        self.tapes
            .retain(|id, _| held.contains(id.as_str()) && !finished.contains(id.as_str()));
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// After a restart: where each stored tape of a watch still being judged stands. A watch
    /// without one (started by a greenlight that kept none) records nothing.
    pub fn restore_tapes(&mut self, tapes: Vec<(String, Recording)>) {
        for (id, r) in tapes {
            if self.watches.iter().any(|w| w.id == id) {
                self.tapes.insert(id, r);
            }
        }
    }

    /// Replays a watch's tape through a fresh judge (`docs/why.md`): the watch as the judge
    /// built it, fed every recorded input in order with the facts recorded beside it.
    pub fn replay(steps: &[Step]) -> Result<Replay, ReplayError> {
        let Some(Step::Start { at, config, watch }) = steps.first() else {
            return Err(ReplayError::NoStart);
        };
        let watch = Watch::from_flat((**watch).clone()).map_err(ReplayError::Unreadable)?;
        let id = watch.id.clone();
        let mut e = Engine::restore((**config).clone(), vec![watch], Breaker::default());
        e.replaying = Some(Replaying::default());
        e.clock = *at;
        let mut replay = Replay {
            watch: e.watches[0].clone(),
            events: Vec::new(),
            diverged: None,
            full: false,
        };
        let mut last_snapshot: Option<AppSnapshot> = None;
        let mut last_answers: Vec<Answer> = Vec::new();
        let mut k = 1;
        while k < steps.len() {
            let step = &steps[k];
            let mut next = k + 1;
            let mut facts = VecDeque::new();
            while let Some(f) = steps.get(next).filter(|s| s.is_fact()) {
                facts.push_back(f.clone());
                next += 1;
            }
            if step.is_fact() {
                replay.diverged = Some(Diverged {
                    step: k,
                    why: format!("a recorded {} with no input before it", fact_name(step)),
                });
                break;
            }
            // Only a live watch is given these: a replay that reached its verdict before the
            // recorded judge did stops here, and the verdicts compared tell the difference.
            let for_the_live = matches!(
                step,
                Step::Observed { .. }
                    | Step::Time { .. }
                    | Step::Vouched { .. }
                    | Step::Arrived { .. }
            );
            if for_the_live && !e.watches[0].is_live() {
                break;
            }
            if let Some(r) = e.replaying.as_mut() {
                r.facts = facts;
            }
            if let Some(at) = step.at() {
                e.clock = e.clock.max(at);
            }
            let out = match step {
                Step::Start { .. } => {
                    replay.diverged = Some(Diverged {
                        step: k,
                        why: "a second start on one tape".into(),
                    });
                    break;
                }
                Step::Full { .. } => {
                    replay.full = true;
                    break;
                }
                Step::Observed {
                    at,
                    gap,
                    app,
                    ancestry,
                    ambiguous,
                } => {
                    if let Some(a) = ancestry {
                        last_answers = a.clone();
                    }
                    let snap = match app {
                        Shown::Present(s) => {
                            last_snapshot = Some((**s).clone());
                            last_snapshot.as_ref()
                        }
                        Shown::Changed(patch) => {
                            let read = last_snapshot
                                .as_ref()
                                .and_then(|s| serde_json::to_value(s).ok())
                                .and_then(|mut v| {
                                    crate::tape::merge_apply(&mut v, patch);
                                    serde_json::from_value::<AppSnapshot>(v).ok()
                                });
                            match read {
                                Some(s) => {
                                    last_snapshot = Some(s);
                                    last_snapshot.as_ref()
                                }
                                None => {
                                    replay.diverged = Some(Diverged {
                                        step: k,
                                        why: "an observation's changes do not apply to the previous one".into(),
                                    });
                                    break;
                                }
                            }
                        }
                        Shown::Same => match &last_snapshot {
                            Some(s) => Some(s),
                            None => {
                                replay.diverged = Some(Diverged {
                                    step: k,
                                    why: "an observation said to repeat the previous one, with none before it".into(),
                                });
                                break;
                            }
                        },
                        Shown::Absent => {
                            last_snapshot = None;
                            None
                        }
                    };
                    let answers = Ancestry(
                        last_answers
                            .iter()
                            .map(|a| ((a.commit.clone(), a.revision.clone()), a.contains))
                            .collect(),
                    );
                    let snap = snap.cloned();
                    e.observe_one(0, snap.as_ref(), &answers, *at, *gap, ambiguous.clone())
                }
                Step::Time { at } => e.decide(0, *at),
                Step::Vouched { at } => e.vouch_one(0, *at),
                Step::Arrived { .. } => e.arrival_one(0, step),
                Step::Verified { at, answer } => {
                    let ask = e.verifying.get(&id).and_then(|v| v.outstanding);
                    match ask {
                        Some(ask) => e.verified(&id, ask, answer.clone(), *at),
                        None => {
                            replay.diverged = Some(Diverged {
                                step: k,
                                why: "verify answered, and the judge was not waiting for it".into(),
                            });
                            break;
                        }
                    }
                }
                Step::RevertFinished { at, outcome } => {
                    e.revert_finished(&id, (**outcome).clone(), *at)
                }
                Step::Proposed { at, proposal } => {
                    e.proposed(0, (**proposal).clone(), None, true, *at)
                }
                Step::ProposalEnded { at, outcome } => e.end_proposal(0, (**outcome).clone(), *at),
                Step::ProposalSuperseded { by, .. } => {
                    e.watches[0].proposal_superseded(by.clone());
                    Vec::new()
                }
                Step::ProposalWithdrawnFor { why, .. } => {
                    e.watches[0].proposal_withdrawn_for(why);
                    Vec::new()
                }
                Step::Resumed { at, config } => {
                    // A restart forgets a verify under way: the resumed watch asks again.
                    e.verifying.remove(&id);
                    e.config = (**config).clone();
                    e.resumed_at = Some(*at);
                    Vec::new()
                }
                Step::Baseline { .. } | Step::RevertGate { .. } => Vec::new(),
            };
            replay
                .events
                .extend(out.into_iter().filter_map(|o| match o {
                    Effect::Emit(ev) => Some((k, ev)),
                    _ => None,
                }));
            let r = e.replaying.as_mut().expect("set above");
            if let Some(why) = r.diverged.take() {
                replay.diverged = Some(Diverged { step: k, why });
                break;
            }
            if let Some(f) = r.facts.front() {
                replay.diverged = Some(Diverged {
                    step: k,
                    why: format!(
                        "the recorded judge consulted {} here; this one did not",
                        fact_name(f)
                    ),
                });
                break;
            }
            k = next;
        }
        replay.watch = e.watches.swap_remove(0);
        Ok(replay)
    }
}

fn fact_name(s: &Step) -> &'static str {
    match s {
        Step::Baseline { .. } => "a baseline",
        Step::RevertGate { .. } => "the revert's gate",
        _ => "an input",
    }
}

/// What a replay came to ([`Engine::replay`]).
#[derive(Clone, Debug)]
pub struct Replay {
    /// The watch as the replay left it.
    pub watch: Watch,
    /// What the judge said on the way, with the index of the step that made it say so.
    pub events: Vec<(usize, Event)>,
    /// Where the replay parted from the recording, if it did.
    pub diverged: Option<Diverged>,
    /// The tape reached its bound: the replay stopped where it stops.
    pub full: bool,
}

/// A replay that parted from the recording at `step`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diverged {
    pub step: usize,
    pub why: String,
}

/// A tape that cannot be replayed at all.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("the tape does not begin with the watch's start")]
    NoStart,
    #[error("the tape's start cannot be read back: {0}")]
    Unreadable(crate::watch::FlatError),
}

/// The revert of a failure, with the failure's own words as its reason.
fn revert_request(w: &Watch, failure: &Failure) -> RevertRequest {
    RevertRequest {
        watch_id: w.id.clone(),
        commit: w.commit.clone(),
        subject: w.subject.clone(),
        app: w.app.to_string(),
        reason: revert_commit_reason(failure, &w.app),
        reissued: false,
        mainline: match &w.baseline().merge_side {
            Some(crate::watch::MergeSide::Mainline(p)) => Some(p.clone()),
            _ => None,
        },
        known_tip: None,
        hold_on: w
            .source_paths()
            .cloned()
            .unwrap_or_else(|| SourcePaths::Unknown {
                why: "the app's source paths are not known".into(),
            }),
    }
}
/// The revisions Argo CD shows deployed in `snap` after `w`'s reach: the synced revision while
/// Synced with no operation running, and the revision of a sync operation that started after
/// the one seen at reach and Succeeded (a rollback leaves the app OutOfSync). Git SHAs only.
fn deployed_revisions<'a>(snap: &'a AppSnapshot, w: &Watch) -> Vec<&'a str> {
    let mut out = Vec::new();
    if snap.sync_status == "Synced" && !snap.operation_running && is_git_sha(&snap.sync_revision) {
        out.push(snap.sync_revision.as_str());
    }
    let applied = |op: &OperationFacts| {
        op.phase == "Succeeded"
            || snap.reach_candidates.iter().any(|c| {
                c.revision == op.revision && matches!(c.via, ReachVia::PostSyncHookFailed { .. })
            })
    };
    if let Some(op) = &snap.last_operation
        && applied(op)
        && !op.dry_run
        && !op.partial
        && is_git_sha(&op.revision)
        && op.started_at.is_some_and(|s| {
            w.baseline()
                .reach_operation_started
                .is_none_or(|at_reach| s > at_reach)
        })
    {
        out.push(op.revision.as_str());
    }
    out
}

/// The revisions Argo CD deploys in `snap` as proof of reach for a watch that ended at
/// `ended`: the synced revision while Synced with no operation running, and the revision of a
/// whole sync operation that started after `ended` and applied it. Git SHAs only; never the
/// history (it holds what was deployed before). Each says whether it is the synced revision
/// (then it is reach only if [`synced_by_an_operation`]).
fn deployed_since(snap: &AppSnapshot, ended: Timestamp) -> Vec<(&str, bool)> {
    let mut out = Vec::new();
    if snap.sync_status == "Synced" && !snap.operation_running && is_git_sha(&snap.sync_revision) {
        out.push((snap.sync_revision.as_str(), true));
    }
    if let Some(op) = &snap.last_operation
        && !op.applies_nothing_whole()
        && is_git_sha(&op.revision)
        && op.started_at.is_some_and(|s| s > ended)
        && (op.phase == "Succeeded"
            || snap.reach_candidates.iter().any(|c| {
                c.revision == op.revision && matches!(c.via, ReachVia::PostSyncHookFailed { .. })
            }))
    {
        out.push((op.revision.as_str(), false));
    }
    out
}

/// Whether a sync operation ran with `commit`: the last one (not a dry run) applied a revision
/// that has it. Argo CD compares a commit that changes nothing it compares (only hooks, files it
/// does not render) as `Synced` without running a sync, so the synced revision alone is reach
/// only of a commit some sync operation ran with: hooks run, and what changed was applied
/// (`docs/verdicts.md#reach`).
fn synced_by_an_operation(snap: &AppSnapshot, commit: &CommitId, ancestry: &Ancestry) -> bool {
    snap.last_operation.as_ref().is_some_and(|op| {
        !op.dry_run && is_git_sha(&op.revision) && ancestry.contains(commit.as_str(), &op.revision)
    })
}

/// An input that is another source's revision, not a digest of a spec field.
fn is_revision_input(name: &str) -> bool {
    name.ends_with(" revision")
}

/// The inputs that changed from `first` to `now`, by name. A spec field counts when it was
/// added, removed or changed; another source's revision only when it moved from one commit to
/// another (it is unresolved before Argo CD's first comparison, or while rendering fails).
fn changed_inputs(first: &BTreeMap<String, String>, now: &BTreeMap<String, String>) -> Vec<String> {
    let names: BTreeSet<&String> = first.keys().chain(now.keys()).collect();
    names
        .into_iter()
        .filter(|name| {
            let (a, b) = (first.get(*name), now.get(*name));
            if is_revision_input(name) {
                matches!((a, b), (Some(a), Some(b)) if a != b && is_git_sha(a) && is_git_sha(b))
            } else {
                a != b
            }
        })
        .cloned()
        .collect()
}

/// The app's last sync, when it failed on a revision with the commit before applying it.
fn failed_sync_of(snap: &AppSnapshot, w: &Watch, ancestry: &Ancestry) -> Option<FailedSync> {
    snap.reach_candidates.iter().find_map(|c| match &c.via {
        ReachVia::OperationFailed { phase, message }
            if is_git_sha(&c.revision) && ancestry.contains(w.commit.as_str(), &c.revision) =>
        {
            Some(FailedSync {
                revision: c.revision.clone(),
                phase: phase.clone(),
                message: message.clone(),
            })
        }
        _ => None,
    })
}

/// A revision deployed after reach that git says does not contain the commit: the commit was
/// withdrawn (`docs/verdicts.md#withdrawn`).
fn withdrawn_by(snap: &AppSnapshot, w: &Watch, ancestry: &Ancestry) -> Option<String> {
    deployed_revisions(snap, w)
        .into_iter()
        .find(|r| ancestry.knows_not(w.commit.as_str(), r))
        .map(str::to_string)
}

/// A synced revision is proof of reach only while the same snapshot says Synced with no
/// operation running; the judge checks this itself rather than trust every adapter.
fn admissible(snap: &AppSnapshot, c: &ReachCandidate) -> bool {
    match c.via {
        ReachVia::SyncedRevision => snap.sync_status == "Synced" && !snap.operation_running,
        _ => true,
    }
}

/// A finished sync published in the same whole second as the reconcile that compared another
/// revision: the health is the one after the sync only when that comparison is newer than what
/// the sync applied (a later commit compared), not older (the previous reconcile, published
/// before the refresh). Git decides; no answer counts as older.
fn fresh_comparison(s: &AppSnapshot, ancestry: &Ancestry) -> Result<(), Unhealthy> {
    match &s.compared_elsewhere {
        Some(c) if !ancestry.contains(&c.applied, &c.compared) => Err(Unhealthy::StaleHealth),
        _ => Ok(()),
    }
}

/// The health predicate (`docs/verdicts.md#health`): Synced + Healthy + no Degraded/Missing
/// resource + no operation, on fresh health. Strict: for callers without a baseline (the
/// promotion gate's meaning of healthy).
pub fn healthy(s: &AppSnapshot) -> Result<(), Unhealthy> {
    healthy_against(s, &Chronic::default()).map(|_| ())
}

/// The health predicate of a watch, relative to the chronic conditions its baseline recorded
/// (`docs/verdicts.md#evidence`, condition 3): a resource in the same condition as then (same
/// health, same sync status and `requiresPruning`; the health Suspended, Degraded or Missing)
/// does not count. The app is healthy when no operation runs, health is fresh, and whatever
/// keeps it from Synced and Healthy is such a resource. Without per-resource health
/// (`ResourceHealthSource::Unavailable`) it is the strict aggregate. `Ok` names what was left
/// out.
pub fn healthy_against(s: &AppSnapshot, chronic: &Chronic) -> Result<Vec<String>, Unhealthy> {
    if s.operation_running {
        return Err(Unhealthy::OperationRunning);
    }
    if s.health_stale {
        return Err(Unhealthy::StaleHealth);
    }
    let relative = !chronic.resources.is_empty()
        && s.resource_health_source != ResourceHealthSource::Unavailable;
    let excused = |r: &ResourceView| relative && chronic.excuses(r);
    // A Degraded or Missing resource is left out only when its view is the excused condition.
    let unexcused: Vec<String> = s
        .unhealthy_resources
        .iter()
        .filter(|u| {
            !s.resources.iter().any(|r| {
                r.kind == u.kind
                    && r.namespace == u.namespace
                    && r.name == u.name
                    && r.health == Some(u.health)
                    && excused(r)
            })
        })
        .map(|u| u.label())
        .collect();
    if s.sync_status != "Synced" {
        let mut not_synced = s.resources.iter().filter(|r| r.sync_status != "Synced");
        let as_before = s.sync_status == "OutOfSync"
            && not_synced.clone().next().is_some()
            && not_synced.all(excused);
        if !as_before {
            return Err(Unhealthy::NotSynced {
                sync: s.sync_status.clone(),
            });
        }
    }
    if s.health != Health::Healthy {
        // The app's health is the worst of its resources': explained when that worst is an
        // excused resource's and no other resource is as bad.
        let rank = s.health.rank();
        let explained = relative
            && s.health.may_be_chronic()
            && s.resources
                .iter()
                .any(|r| r.health == Some(s.health) && excused(r))
            && !s
                .resources
                .iter()
                .any(|r| r.health.is_some_and(|h| h.rank() >= rank) && !excused(r));
        if !explained {
            return Err(Unhealthy::Health {
                health: s.health,
                message: s.health_message.clone(),
                resources: unexcused,
            });
        }
    }
    if !unexcused.is_empty() {
        return Err(Unhealthy::Resources {
            resources: unexcused,
        });
    }
    Ok(left_out_of(s, chronic))
}

/// The health predicate of a watch scoped to `scope` (the promotion gate's candidate in an
/// Application other candidates share): no operation runs, health is fresh, and each scoped
/// resource is in the app, Synced, and Healthy (or of a kind without health); what the rest of
/// the app is does not count. `Ok` names the rest that is not clean, left out. Without
/// per-resource health it is the strict aggregate: nothing tells the scope from the rest.
pub fn healthy_scoped(s: &AppSnapshot, scope: &[ScopedResource]) -> Result<Vec<String>, Unhealthy> {
    if s.operation_running {
        return Err(Unhealthy::OperationRunning);
    }
    if s.health_stale {
        return Err(Unhealthy::StaleHealth);
    }
    if s.resource_health_source == ResourceHealthSource::Unavailable {
        return healthy_against(s, &Chronic::default());
    }
    let absent: Vec<String> = scope
        .iter()
        .filter(|x| !s.resources.iter().any(|r| x.matches(r)))
        .map(ScopedResource::label)
        .collect();
    if !absent.is_empty() {
        return Err(Unhealthy::Health {
            health: Health::Missing,
            message: format!("not in the Application yet: {}", absent.join(", ")),
            resources: absent,
        });
    }
    let ours = |r: &ResourceView| scope.iter().any(|x| x.matches(r));
    if let Some(r) = s
        .resources
        .iter()
        .find(|r| ours(r) && r.sync_status != "Synced")
    {
        return Err(Unhealthy::NotSynced {
            sync: r.sync_status.clone(),
        });
    }
    if let Some((r, h)) = s
        .resources
        .iter()
        .filter(|r| ours(r))
        .find_map(|r| r.health.filter(|h| *h != Health::Healthy).map(|h| (r, h)))
    {
        let resources = s
            .unhealthy_resources
            .iter()
            .filter(|u| scope.iter().any(|x| x.kind == u.kind && x.name == u.name))
            .map(|u| u.label())
            .collect();
        return Err(Unhealthy::Health {
            health: h,
            message: r.message.clone(),
            resources,
        });
    }
    Ok(s.resources
        .iter()
        .filter(|r| !ours(r))
        .filter(|r| r.sync_status != "Synced" || r.health.is_some_and(|h| h != Health::Healthy))
        .map(ResourceView::label)
        .collect())
}

/// What a watch's predicate leaves out of `s` as in its baseline: the resources in the same
/// condition, and the PostSync hooks that failed the same way.
fn left_out_of(s: &AppSnapshot, chronic: &Chronic) -> Vec<String> {
    if s.resource_health_source == ResourceHealthSource::Unavailable {
        return Vec::new();
    }
    let hooks = s.failed_post_sync_hooks();
    let hooks = if hooks_as_before(&hooks, chronic) {
        hooks
    } else {
        Vec::new()
    };
    s.resources
        .iter()
        .filter(|r| chronic.excuses(r))
        .map(ResourceView::label)
        .chain(hooks.iter().map(|h| format!("PostSync hook {h}")))
        .collect()
}

/// Every PostSync hook that failed failed the same way in the baseline's last operation.
fn hooks_as_before(hooks: &[String], chronic: &Chronic) -> bool {
    !hooks.is_empty() && hooks.iter().all(|h| chronic.hooks.contains(h))
}

fn seen_of(s: &AppSnapshot) -> Seen {
    Seen {
        health: Some(s.health),
        sync: s.sync_status.clone(),
        revision: s.sync_revision.clone(),
        operation: s.last_operation.as_ref().map(|o| o.phase.clone()),
        unhealthy_resources: s.unhealthy_resources.iter().map(|r| r.label()).collect(),
        resource_health_source: Some(s.resource_health_source.as_str().to_string()),
        why_not_healthy: healthy(s).err().map(|why| why.to_string()),
        comparison_error: s.comparison_error.clone(),
        failed_sync: None,
        transient: healthy(s).err().is_some_and(|why| why.is_transient()),
        not_applied: None,
        left_out: Vec::new(),
    }
}

/// Whether a commit that changed `changed` counts as a change of an app with `paths` for
/// attribution: it touches them with a path the exemptions leave counted. A commit of exempt
/// paths only is no change of the app, even one whose paths are unknown (then every other
/// commit is assumed to touch it).
fn counts_against(exempt: &[String], paths: &SourcePaths, changed: &[String]) -> bool {
    let counted: Vec<String> = changed
        .iter()
        .filter(|p| !crate::paths::exempt(exempt, p))
        .cloned()
        .collect();
    let only_exempt = !changed.is_empty() && counted.is_empty();
    !only_exempt && touches(paths, &counted).touches()
}

/// The commit a `git revert` message says it reverts.
fn reverted_sha(message: &str) -> Option<CommitId> {
    let idx = message.find("This reverts commit ")?;
    let rest = &message[idx + "This reverts commit ".len()..];
    let sha: String = rest.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
    CommitId::parse(&sha).ok()
}

/// Why a commit of the watched branch can never be judged on this app, from its snapshot
/// alone: a source hydrator, no source from the watched repository, a chart, a revision that is
/// not a git SHA, or another branch — reasons it can never prove reach of a commit from the
/// watched branch (`docs/verdicts.md#unwatchable`). `None`: it can. The judge ends a watch with
/// it at once, never after a deadline; `audit` surveys the fleet with it, so the two never
/// disagree.
pub fn unwatchable(snap: &AppSnapshot, config: &JudgeConfig) -> Option<Unwatchable> {
    let app = snap.name.clone();
    if snap.source_hydrator {
        return Some(Unwatchable::SourceHydrator { app });
    }
    match &snap.source {
        SourceFacts::NotFromRepo { repos } => Some(Unwatchable::NotFromRepo {
            app,
            repo: config.repo.clone(),
            sources: repos.clone(),
        }),
        SourceFacts::FromRepo {
            target_revisions,
            chart,
            ..
        } => {
            if let Some(chart) = chart {
                return Some(Unwatchable::HelmChart {
                    app,
                    chart: chart.clone(),
                });
            }
            let current = std::iter::once(snap.sync_revision.as_str())
                .chain(
                    snap.reach_candidates
                        .iter()
                        .filter(|c| !matches!(c.via, ReachVia::History { .. }))
                        .map(|c| c.revision.as_str()),
                )
                .chain(snap.last_operation.iter().map(|o| o.revision.as_str()));
            for rev in current {
                if !rev.is_empty() && !is_git_sha(rev) {
                    return Some(Unwatchable::NotGitRevision {
                        app,
                        revision: rev.to_string(),
                    });
                }
            }
            if let Some(t) = target_revisions.iter().find(|t| !config.tracks_branch(t)) {
                return Some(Unwatchable::OtherBranch {
                    app,
                    target: if t.is_empty() { "HEAD" } else { t.as_str() }.to_string(),
                    branch: config.branch.clone(),
                });
            }
            None
        }
    }
}
