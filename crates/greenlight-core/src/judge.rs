//! The watch judge (`docs/verdicts.md`): a sans-IO state machine. The caller feeds it new commits, app
//! observations, revert results and the current time; it returns events and revert requests.
//! It never reads a clock, touches git or calls Argo CD: questions it cannot answer alone
//! (is this commit an ancestor of that revision?) are asked up front with [`Engine::reach_questions`]
//! and [`Engine::merge_questions`] and answered in an [`Ancestry`].
//!
//! Life of a watch: `WAITING_REACH` → (reach) `JUDGING` → `CONFIRMED` | `FAIL` | `REVERTED` |
//! `REVERT_FAILED` | `INCONCLUSIVE`; or `WAITING_REACH` → `NOT_REACHED` | `INCONCLUSIVE`; or
//! any live state → `ERROR_UNWATCHABLE`. A `FAIL` in arm mode that may revert carries
//! `revert_pending` until the executor reports back, so a crash in between re-issues the revert
//! (which the executor makes idempotent by adopting an existing revert).

use crate::breaker::Breaker;
use crate::directive::{AppRef, Directive, Mode, directives_in};
use crate::event::{Event, EventKind, Evidence};
use crate::paths::{Touch, touches};
use crate::snapshot::{
    AppSnapshot, Health, ReachCandidate, ReachVia, SourceFacts, SourcePaths, is_git_sha,
};
use crate::time::{Timestamp, human_duration};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum State {
    WaitingReach,
    Judging,
    Confirmed,
    Fail,
    Reverted,
    NotReached,
    ErrorUnwatchable,
    Inconclusive,
    RevertFailed,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::WaitingReach => "WAITING_REACH",
            State::Judging => "JUDGING",
            State::Confirmed => "CONFIRMED",
            State::Fail => "FAIL",
            State::Reverted => "REVERTED",
            State::NotReached => "NOT_REACHED",
            State::ErrorUnwatchable => "ERROR_UNWATCHABLE",
            State::Inconclusive => "INCONCLUSIVE",
            State::RevertFailed => "REVERT_FAILED",
        }
    }
    pub fn parse(s: &str) -> Option<State> {
        [
            State::WaitingReach,
            State::Judging,
            State::Confirmed,
            State::Fail,
            State::Reverted,
            State::NotReached,
            State::ErrorUnwatchable,
            State::Inconclusive,
            State::RevertFailed,
        ]
        .into_iter()
        .find(|st| st.as_str() == s)
    }
    pub fn is_terminal(self) -> bool {
        !matches!(self, State::WaitingReach | State::Judging)
    }
}

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
        }
    }

    fn tracks_branch(&self, target_revision: &str) -> bool {
        let t = target_revision.trim();
        t == self.branch
            || t.strip_prefix("refs/heads/") == Some(self.branch.as_str())
            || (self.branch_is_default && (t.is_empty() || t == "HEAD"))
    }
}

/// A commit that arrived on the tracked branch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitInfo {
    pub sha: String,
    pub parents: Vec<String>,
    pub subject: String,
    pub message: String,
    /// Files changed against the first parent (every file for a root commit).
    pub changed_paths: Vec<String>,
}

/// A commit that arrived after a watched one, kept for attribution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaterCommit {
    pub sha: String,
    pub changed_paths: Vec<String>,
}

/// Answers to ancestry questions: `(commit, revision) → commit is revision or an ancestor of it`.
/// A missing answer means git could not tell (unknown object) and counts as "no".
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
}

/// What greenlight last saw of the app, kept for messages and `status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    pub health: Option<Health>,
    pub sync: String,
    pub revision: String,
    pub operation: Option<String>,
    pub unhealthy_resources: Vec<String>,
    pub resource_health_source: Option<String>,
    pub why_not_healthy: Option<String>,
}

impl Seen {
    fn evidence(&self) -> Evidence {
        Evidence {
            health: self.health.map(|h| h.as_str().to_string()),
            sync: (!self.sync.is_empty()).then(|| self.sync.clone()),
            revision: (!self.revision.is_empty()).then(|| self.revision.clone()),
            operation: self.operation.clone(),
            unhealthy_resources: self.unhealthy_resources.clone(),
            resource_health_source: self.resource_health_source.clone(),
        }
    }
}

/// One watched (commit, app) pair and everything the judge needs to resume it after a restart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watch {
    /// `<commit>:<index of the trailer in the commit>`.
    pub id: String,
    pub commit: String,
    pub subject: String,
    pub app: AppRef,
    pub mode: Mode,
    pub dry_run: bool,
    pub deadline_ms: i64,
    pub state: State,
    pub reason: String,
    pub watch_started_at: Timestamp,
    pub reached_at: Option<Timestamp>,
    pub healthy_since: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub revert_commit: Option<String>,
    /// The last time the app was successfully observed (present or absent).
    pub last_observed_at: Option<Timestamp>,
    pub app_absent_since: Option<Timestamp>,
    pub reach: Option<ReachCandidate>,
    pub own_paths: Vec<String>,
    pub later_commits: Vec<LaterCommit>,
    pub source_paths: Option<SourcePaths>,
    /// Why arm was downgraded to shadow for this watch, once known.
    pub arm_blocked: Option<String>,
    pub revert_pending: bool,
    /// The deadline passed while a healthy streak was under way; a break now fails.
    pub deadline_passed: bool,
    pub warned_auto_sync_off: bool,
    pub reported_sync_failure: bool,
    pub seen: Seen,
}

impl Watch {
    pub fn deadline_at(&self) -> Option<Timestamp> {
        match self.state {
            State::WaitingReach => Some(self.watch_started_at.plus_ms(self.deadline_ms)),
            State::Judging => self.reached_at.map(|r| r.plus_ms(self.deadline_ms)),
            _ => None,
        }
    }
}

/// A revert the executor should perform (fetch, adopt an existing revert or `git revert` +
/// fast-forward push).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevertRequest {
    pub watch_id: String,
    pub commit: String,
    pub subject: String,
    pub app: String,
    pub reason: String,
}

/// What the revert executor reports back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RevertOutcome {
    Pushed {
        revert: String,
    },
    Adopted {
        revert: String,
    },
    /// A conflict, nothing to revert, or an error after retries: a human must act.
    Failed {
        message: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    Emit(Event),
    Revert(RevertRequest),
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

/// All watches and the breaker.
#[derive(Clone, Debug)]
pub struct Engine {
    config: JudgeConfig,
    watches: Vec<Watch>,
    breaker: Breaker,
    dirty: BTreeSet<usize>,
    breaker_dirty: bool,
    /// Watches that finished before a restart and were not loaded back, by id.
    finished_ids: BTreeSet<String>,
    /// A watch was confirmed while a revert decided before it was still being pushed: the
    /// breaker hears the confirmation after those reverts, in the order of the verdicts.
    confirmed_behind_reverts: bool,
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
            finished_ids: BTreeSet::new(),
            confirmed_behind_reverts: false,
        }
    }

    /// After a restart that loads only the live watches: the ids of the finished watches still
    /// on record. A commit delivered again that has one of them is known as processed, and
    /// none of its trailers starts a watch or is rejected a second time.
    pub fn with_finished_ids(mut self, ids: BTreeSet<String>) -> Engine {
        self.finished_ids = ids;
        self
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
        let mut out = Vec::new();
        for i in 0..self.watches.len() {
            let w = &self.watches[i];
            if w.revert_pending {
                out.push(Effect::Revert(revert_request(w)));
                continue;
            }
            if w.state.is_terminal() {
                continue;
            }
            let deadline = w.deadline_at().map(|d| d.rfc3339()).unwrap_or_default();
            let msg = format!(
                "resumed after a restart; deadline {deadline} (from the recorded {} time); unobserved time does not count toward stability",
                if w.state == State::Judging {
                    "reach"
                } else {
                    "watch start"
                }
            );
            out.push(self.emit(i, EventKind::Resumed, msg, now));
        }
        out
    }

    /// Questions to answer before [`Engine::commit_arrived`]: for a merge commit, whether a
    /// watched commit is an ancestor of one of its other parents (then the merge carries the
    /// watched commit itself, and is not a later change for attribution).
    pub fn merge_questions(&self, commit: &CommitInfo) -> Vec<(String, String)> {
        if commit.parents.len() < 2 {
            return Vec::new();
        }
        let mut q = Vec::new();
        for w in self.live() {
            if w.commit == commit.sha {
                continue; // a re-delivered watched merge is not a later commit of itself
            }
            for p in &commit.parents[1..] {
                // Equality needs no git: `Ancestry::contains` answers it.
                if !p.eq_ignore_ascii_case(&w.commit) {
                    q.push((w.commit.clone(), p.clone()));
                }
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
        let mut out = Vec::new();
        let reverted = reverted_sha(&commit.message);
        for i in 0..self.watches.len() {
            if self.watches[i].state.is_terminal() || self.watches[i].revert_pending {
                continue;
            }
            // A deadline or window end already due is decided before this commit can change the
            // story; a commit says nothing about the app's health, so time alone decides here.
            out.extend(self.decide(i, now));
            let w = &self.watches[i];
            if w.state.is_terminal() || w.revert_pending || w.commit == commit.sha {
                continue;
            }
            if commit.parents.len() > 1
                && commit.parents[1..]
                    .iter()
                    .any(|p| ancestry.contains(&w.commit, p))
            {
                continue;
            }
            if reverted.as_deref() == Some(w.commit.as_str()) {
                out.extend(self.reverted_by_human(i, &commit.sha, now));
                continue;
            }
            self.watches[i].later_commits.push(LaterCommit {
                sha: commit.sha.clone(),
                changed_paths: commit.changed_paths.clone(),
            });
            self.dirty.insert(i);
            out.extend(self.check_attribution(i, now));
        }

        // A commit with a finished watch on record was processed before a restart: each of its
        // trailers started a watch or was rejected then. Its finished watches are not loaded,
        // so the checks below could not tell.
        let prefix = format!("{}:", commit.sha);
        if self
            .finished_ids
            .range(prefix.clone()..)
            .next()
            .is_some_and(|id| id.starts_with(&prefix))
        {
            return out;
        }
        for (index, parsed) in directives_in(&commit.message, &self.config.trailer_key)
            .into_iter()
            .enumerate()
        {
            let id = format!("{}:{index}", commit.sha);
            if self.watches.iter().any(|w| w.id == id) {
                continue; // already started before a restart
            }
            let rejected = |message: String, app: Option<String>| {
                Effect::Emit(Event {
                    time: now,
                    event: EventKind::DirectiveRejected,
                    commit: Some(commit.sha.clone()),
                    app,
                    state: None,
                    message,
                    evidence: Evidence::default(),
                })
            };
            match parsed {
                Err(e) => out.push(rejected(format!("no watch started: {e}"), None)),
                // One watch per (commit, app): two verdicts for the same pair could contradict.
                Ok(d) if self.watches.iter().any(|w| w.commit == commit.sha && w.app.overlaps(&d.app)) => {
                    out.push(rejected(
                        format!(
                            "no watch started: this commit already has a {} trailer for app {}; only the first counts",
                            self.config.trailer_key, d.app
                        ),
                        Some(d.app.to_string()),
                    ))
                }
                Ok(d) => out.push(self.start(id, commit, d, now)),
            }
        }
        out
    }

    fn start(&mut self, id: String, commit: &CommitInfo, d: Directive, now: Timestamp) -> Effect {
        let dry_run = self.config.dry_run;
        let w = Watch {
            id,
            commit: commit.sha.clone(),
            subject: commit.subject.clone(),
            app: d.app,
            mode: d.mode,
            dry_run,
            deadline_ms: d.deadline_ms,
            state: State::WaitingReach,
            reason: "waiting for the commit to reach the app".into(),
            watch_started_at: now,
            reached_at: None,
            healthy_since: None,
            finished_at: None,
            revert_commit: None,
            last_observed_at: None,
            app_absent_since: None,
            reach: None,
            own_paths: commit.changed_paths.clone(),
            later_commits: Vec::new(),
            source_paths: None,
            arm_blocked: None,
            revert_pending: false,
            deadline_passed: false,
            warned_auto_sync_off: false,
            reported_sync_failure: false,
            seen: Seen::default(),
        };
        let msg = format!(
            "watch started mode={}{} deadline={} (healthy within the deadline after reach, stable for {})",
            w.mode.as_str(),
            if dry_run { " dry-run" } else { "" },
            human_duration(w.deadline_ms),
            human_duration(self.config.stable_for_ms),
        );
        self.watches.push(w);
        let i = self.watches.len() - 1;
        self.emit(i, EventKind::WatchStarted, msg, now)
    }

    /// Ancestry questions for a snapshot: each live watch of this app against each candidate
    /// revision (only git SHAs; equality needs no question).
    pub fn reach_questions(&self, snap: &AppSnapshot) -> Vec<(String, String)> {
        let mut q = Vec::new();
        for w in self.live() {
            let judging = w.state != State::WaitingReach;
            if (judging && w.reported_sync_failure) || !w.app.matches(&snap.namespace, &snap.name) {
                continue;
            }
            for c in &snap.reach_candidates {
                // Once reached, only a failed operation is still news (failure evidence).
                if judging && !matches!(c.via, ReachVia::OperationFailed { .. }) {
                    continue;
                }
                if !admissible(snap, c) {
                    continue;
                }
                if is_git_sha(&c.revision) && !c.revision.eq_ignore_ascii_case(&w.commit) {
                    q.push((w.commit.clone(), c.revision.clone()));
                }
            }
        }
        q.sort();
        q.dedup();
        q
    }

    /// Feed one observation of an app at `now`.
    pub fn observe(
        &mut self,
        obs: Observation<'_>,
        ancestry: &Ancestry,
        now: Timestamp,
    ) -> Vec<Effect> {
        let mut out = Vec::new();
        for i in 0..self.watches.len() {
            let w = &self.watches[i];
            if w.state.is_terminal() {
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
            // A deadline that fell due before this observation is decided on what was known
            // then: an update that arrives after the deadline cannot rescue the watch. The
            // streak is not extended to `now` here: this very observation may contradict it.
            out.extend(self.decide_as_of(i, now, false));
            if self.watches[i].state.is_terminal() {
                continue;
            }
            match obs {
                Observation::Absent { .. } => out.extend(self.observe_absent(i, now)),
                Observation::Present(snap) => {
                    out.extend(self.observe_present(i, snap, ancestry, now))
                }
            }
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
            if w.state.is_terminal()
                || !w.app.matches(&app.namespace, &app.name)
                || w.last_observed_at.is_none()
            {
                continue;
            }
            // The stream vouches for every instant since the last observation, a deadline that
            // fell due in between included.
            self.watches[i].last_observed_at = Some(now);
            self.dirty.insert(i);
            out.extend(self.decide(i, now));
        }
        out
    }

    /// Time passed: deadlines, stability windows, the unknown-app grace.
    pub fn tick(&mut self, now: Timestamp) -> Vec<Effect> {
        let mut out = Vec::new();
        for i in 0..self.watches.len() {
            if !self.watches[i].state.is_terminal() {
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
        let grace = self.config.unknown_app_grace_ms;
        let stable = self.config.stable_for_ms;
        self.live()
            .flat_map(|w| {
                let deadline = if w.deadline_passed {
                    None
                } else {
                    w.deadline_at()
                };
                let absent = w.app_absent_since.map(|t| t.plus_ms(grace));
                let streak = w.healthy_since.map(|h| h.plus_ms(stable));
                // After the deadline, the moment the streak under way would go stale.
                let stale = w
                    .last_observed_at
                    .filter(|_| w.deadline_passed)
                    .map(|t| t.plus_ms(self.config.stale_after_ms + 1));
                [deadline, absent, streak, stale]
            })
            .flatten()
            .filter(|t| *t > handled)
            .min()
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
            .position(|w| w.id == watch_id && w.revert_pending)
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        self.watches[i].revert_pending = false;
        // finished_at stays the verdict's time; the revert's outcome is in the event log.
        match outcome {
            RevertOutcome::Pushed { revert } => {
                let w = &mut self.watches[i];
                w.state = State::Reverted;
                w.reason = format!("{}; revert {} pushed", w.reason, short(&revert));
                w.revert_commit = Some(revert.clone());
                let msg = format!("revert {} pushed to {}", short(&revert), self.config.branch);
                out.push(self.emit(i, EventKind::RevertPushed, msg, now));
                out.extend(self.count_revert(now));
            }
            RevertOutcome::Adopted { revert } => {
                let w = &mut self.watches[i];
                w.state = State::Reverted;
                w.reason = format!("{}; existing revert {} adopted", w.reason, short(&revert));
                w.revert_commit = Some(revert.clone());
                let msg = format!(
                    "a revert of this commit ({}) is already on {}: adopted, not duplicated",
                    short(&revert),
                    self.config.branch
                );
                out.push(self.emit(i, EventKind::RevertAdopted, msg, now));
                out.extend(self.count_revert(now));
            }
            RevertOutcome::Failed { message } => {
                let w = &mut self.watches[i];
                w.state = State::RevertFailed;
                w.reason = format!(
                    "revert failed, nothing forced: {message}; a human must revert or fix forward"
                );
                let msg = w.reason.clone();
                out.push(self.emit(i, EventKind::RevertFailed, msg, now));
            }
        }
        if self.confirmed_behind_reverts && !self.watches.iter().any(|w| w.revert_pending) {
            self.confirmed_behind_reverts = false;
            self.record_confirmed();
        }
        out
    }

    /// A confirmation resets the breaker's count of reverts in a row — after the reverts that
    /// were decided before it, however long their pushes take. Deferring it never lets a revert
    /// through that verdict order would have withheld.
    fn record_confirmed(&mut self) {
        if self.watches.iter().any(|w| w.revert_pending) {
            self.confirmed_behind_reverts = true;
            return;
        }
        self.breaker.record_confirmed();
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
            message: "breaker reset by a human: reverts are allowed again".into(),
            evidence: Evidence::default(),
        })]
    }

    // ----- internals -----

    fn live(&self) -> impl Iterator<Item = &Watch> {
        self.watches.iter().filter(|w| !w.state.is_terminal())
    }

    fn emit(&mut self, i: usize, kind: EventKind, message: String, now: Timestamp) -> Effect {
        self.dirty.insert(i);
        let w = &self.watches[i];
        Effect::Emit(Event {
            time: now,
            event: kind,
            commit: Some(w.commit.clone()),
            app: Some(w.app.to_string()),
            state: Some(w.state),
            message,
            evidence: w.seen.evidence(),
        })
    }

    /// INCONCLUSIVE: greenlight could not observe what a verdict needed; never a revert.
    fn inconclusive(&mut self, i: usize, reason: String, now: Timestamp) -> Effect {
        self.finish(i, State::Inconclusive, reason, EventKind::Inconclusive, now)
    }

    fn finish(
        &mut self,
        i: usize,
        state: State,
        reason: String,
        kind: EventKind,
        now: Timestamp,
    ) -> Effect {
        let w = &mut self.watches[i];
        w.state = state;
        w.reason = reason.clone();
        w.finished_at = Some(now);
        self.emit(i, kind, reason, now)
    }

    fn observe_absent(&mut self, i: usize, now: Timestamp) -> Vec<Effect> {
        let mut out = Vec::new();
        self.dirty.insert(i);
        let w = &mut self.watches[i];
        w.last_observed_at = Some(now);
        w.seen = Seen {
            why_not_healthy: Some("the app does not exist".into()),
            ..Seen::default()
        };
        if w.healthy_since.take().is_some() {
            out.push(self.emit(
                i,
                EventKind::HealthyStreakBroken,
                "healthy streak broken: the app disappeared".into(),
                now,
            ));
        }
        let w = &mut self.watches[i];
        if w.app_absent_since.is_none() {
            w.app_absent_since = Some(now);
            let msg = format!(
                "Application {} does not exist (yet): waiting up to {} for it (the commit may create it)",
                w.app,
                human_duration(self.config.unknown_app_grace_ms)
            );
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
    ) -> Vec<Effect> {
        let mut out = Vec::new();
        self.watches[i].app_absent_since = None;
        self.dirty.insert(i);

        if let Some(why) = self.unwatchable(snap) {
            self.watches[i].seen = seen_of(snap);
            return vec![self.finish(i, State::ErrorUnwatchable, why, EventKind::Unwatchable, now)];
        }

        // A gap in observation breaks a streak: unobserved time does not count (`docs/verdicts.md#streak-breaks`).
        let gap = self.watches[i].last_observed_at.map(|t| now.ms_since(t));
        if gap.is_some_and(|g| g > self.config.stale_after_ms)
            && self.watches[i].deadline_passed
            && self.watches[i].healthy_since.is_some()
        {
            // The streak under way at the deadline was not observed to its end; no later
            // streak may stand in for it, and a gap is not a health failure.
            let reason = format!(
                "inconclusive: the healthy streak under way at the deadline went unobserved for {}; not reverted",
                human_duration(gap.unwrap_or_default())
            );
            self.watches[i].seen = seen_of(snap);
            return vec![self.inconclusive(i, reason, now)];
        }
        if gap.is_some_and(|g| g > self.config.stale_after_ms)
            && self.watches[i].healthy_since.take().is_some()
        {
            let msg = format!(
                "healthy streak broken: the app was not observed for {}; unobserved time does not count",
                human_duration(gap.unwrap_or_default())
            );
            out.push(self.emit(i, EventKind::HealthyStreakBroken, msg, now));
        }
        let w = &mut self.watches[i];
        w.last_observed_at = Some(now);
        w.seen = seen_of(snap);

        if let SourceFacts::FromRepo { paths, .. } = &snap.source {
            w.source_paths = Some(paths.clone());
        }
        out.extend(self.check_arm(i, snap, now));
        out.extend(self.check_attribution(i, now));
        if self.watches[i].state.is_terminal() {
            return out;
        }

        if self.watches[i].state == State::WaitingReach {
            out.extend(self.check_reach(i, snap, ancestry, now));
        } else {
            out.extend(self.check_sync_failure(i, snap, ancestry, now));
        }

        if self.watches[i].state == State::Judging {
            let verdict = healthy(snap);
            let w = &mut self.watches[i];
            w.seen.why_not_healthy = verdict.clone().err();
            match verdict {
                Ok(()) => {
                    if w.healthy_since.is_none() {
                        w.healthy_since = Some(now);
                        let msg = format!(
                            "healthy (Synced, Healthy, no Degraded/Missing resource, no operation; resource health from {}): stability window of {} started",
                            snap.resource_health_source.as_str(),
                            human_duration(self.config.stable_for_ms)
                        );
                        out.push(self.emit(i, EventKind::HealthyStreakStarted, msg, now));
                    }
                }
                Err(why) => {
                    if w.healthy_since.take().is_some() {
                        let msg = format!("healthy streak broken: {why}");
                        out.push(self.emit(i, EventKind::HealthyStreakBroken, msg, now));
                    }
                }
            }
        }
        out.extend(self.decide(i, now));
        out
    }

    /// Revisions that are not git SHAs, and the structural checks: reasons this app can never
    /// prove reach of a commit from the watched branch (`docs/verdicts.md#unwatchable`). Said at
    /// once, never after a deadline.
    fn unwatchable(&self, snap: &AppSnapshot) -> Option<String> {
        let repo = &self.config.repo;
        match &snap.source {
            SourceFacts::NotFromRepo { repos } => Some(format!(
                "app {} does not deploy from {repo} (its sources: {}): this commit can never reach it; name the app that deploys this repo",
                snap.name,
                if repos.is_empty() {
                    "none".into()
                } else {
                    repos.join(", ")
                }
            )),
            SourceFacts::FromRepo {
                target_revisions,
                chart,
                ..
            } => {
                if let Some(chart) = chart {
                    return Some(format!(
                        "app {} deploys Helm chart {chart:?}: its revision is a chart version, not a git commit, so reach cannot be proven by ancestry; watch the git-sourced app that pins the chart version instead",
                        snap.name
                    ));
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
                        let what = if rev.starts_with("sha256:") {
                            "an OCI digest"
                        } else {
                            "not a git SHA (a Helm chart version?)"
                        };
                        return Some(format!(
                            "app {} reports revision {rev:?}, {what}: reach cannot be proven by git ancestry; watch a git-sourced app, or verify digests instead",
                            snap.name
                        ));
                    }
                }
                if let Some(t) = target_revisions
                    .iter()
                    .find(|t| !self.config.tracks_branch(t))
                {
                    let t = if t.is_empty() { "HEAD" } else { t.as_str() };
                    return Some(format!(
                        "app {} tracks targetRevision {t:?}, not the watched branch {:?}: a commit on {} does not deploy through it; watch the branch it tracks",
                        snap.name, self.config.branch, self.config.branch
                    ));
                }
                None
            }
        }
    }

    fn check_arm(&mut self, i: usize, snap: &AppSnapshot, now: Timestamp) -> Vec<Effect> {
        let mut out = Vec::new();
        let w = &self.watches[i];
        if w.mode != Mode::Arm {
            return out;
        }
        if w.arm_blocked.is_none()
            && let Some(paths) = &w.source_paths
            && touches(paths, &w.own_paths) == Touch::No
        {
            let why = format!(
                "commit changes nothing under app {}'s source paths: judged as shadow, it cannot arm a revert for this app",
                w.app
            );
            self.watches[i].arm_blocked = Some(why.clone());
            out.push(self.emit(i, EventKind::ArmDowngraded, why, now));
        }
        let w = &self.watches[i];
        if !snap.automated_sync && !w.warned_auto_sync_off && w.arm_blocked.is_none() {
            let msg = format!(
                "warning: app {} has automated sync off: a revert pushed to git will not deploy by itself; someone must sync it",
                w.app
            );
            self.watches[i].warned_auto_sync_off = true;
            out.push(self.emit(i, EventKind::AutoSyncOff, msg, now));
        }
        out
    }

    /// Later commits that changed this app's paths make the verdict unattributable.
    fn check_attribution(&mut self, i: usize, now: Timestamp) -> Vec<Effect> {
        let w = &self.watches[i];
        let Some(paths) = &w.source_paths else {
            return Vec::new();
        };
        let culprits: Vec<&str> = w
            .later_commits
            .iter()
            .filter(|c| touches(paths, &c.changed_paths).touches())
            .map(|c| c.sha.as_str())
            .collect();
        if culprits.is_empty() {
            return Vec::new();
        }
        let reason = format!(
            "attribution: later commit(s) {} changed app {}'s source paths before a verdict, so the app's state can no longer be attributed to this commit alone; not reverted",
            culprits
                .iter()
                .map(|s| short(s))
                .collect::<Vec<_>>()
                .join(", "),
            w.app
        );
        vec![self.finish(i, State::Fail, reason, EventKind::Attribution, now)]
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
        let reaching: Vec<&ReachCandidate> = snap
            .reach_candidates
            .iter()
            .filter(|c| {
                admissible(snap, c)
                    && is_git_sha(&c.revision)
                    && ancestry.contains(&commit, &c.revision)
            })
            .collect();
        // Prefer evidence of a successful sync; a failed operation alone is reach with failure evidence.
        let Some(best) = reaching
            .iter()
            .find(|c| !matches!(c.via, ReachVia::OperationFailed { .. }))
            .or(reaching.first())
        else {
            return out;
        };
        let w = &mut self.watches[i];
        w.state = State::Judging;
        w.reached_at = Some(now);
        w.reach = Some((*best).clone());
        w.reason = "reached; judging health".into();
        let msg = format!(
            "reached app {} via {} at revision {} (deadline {} from now)",
            w.app,
            best.via.describe(),
            short(&best.revision),
            human_duration(w.deadline_ms)
        );
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
        if w.reported_sync_failure {
            return Vec::new();
        }
        let failed = snap.reach_candidates.iter().find_map(|c| match &c.via {
            ReachVia::OperationFailed { phase, message }
                if ancestry.contains(&w.commit, &c.revision) =>
            {
                Some((phase.clone(), message.clone(), c.revision.clone()))
            }
            _ => None,
        });
        let Some((phase, message, rev)) = failed else {
            return Vec::new();
        };
        self.watches[i].reported_sync_failure = true;
        let msg = format!(
            "sync of revision {} containing this commit ended {phase}: \"{message}\"",
            short(&rev)
        );
        vec![self.emit(i, EventKind::SyncFailed, msg, now)]
    }

    fn reverted_by_human(&mut self, i: usize, revert: &str, now: Timestamp) -> Vec<Effect> {
        let w = &mut self.watches[i];
        w.revert_commit = Some(revert.to_string());
        let reason = format!(
            "reverted by {} on {} before a verdict (not made by greenlight): the commit is no longer deployed, so judging stops; nothing pushed",
            short(revert),
            self.config.branch
        );
        let state = if w.mode == Mode::Arm {
            State::Reverted
        } else {
            State::Fail
        };
        vec![self.finish(i, state, reason, EventKind::RevertedByHuman, now)]
    }

    /// Deadlines, stability and grace: the verdicts that time alone can bring.
    fn decide(&mut self, i: usize, now: Timestamp) -> Vec<Effect> {
        self.decide_as_of(i, now, true)
    }

    /// `extend`: whether a fresh last observation vouches for the app's state up to `now`
    /// (true for the passage of time; false just before applying a new observation).
    fn decide_as_of(&mut self, i: usize, now: Timestamp, extend: bool) -> Vec<Effect> {
        let w = &self.watches[i];
        if w.state.is_terminal() || w.revert_pending {
            return Vec::new();
        }
        let stale = w
            .last_observed_at
            .is_none_or(|t| now.ms_since(t) > self.config.stale_after_ms);
        let last_seen = match w.last_observed_at {
            Some(t) => format!("the app was last observed at {t}"),
            None => "the app was never observed".to_string(),
        };

        if let Some(since) = w.app_absent_since
            && now.ms_since(since) >= self.config.unknown_app_grace_ms
        {
            let reason = format!(
                "Application {} does not exist after waiting {}: check the trailer's app name (`app=<name>` or `app=<namespace>/<name>`)",
                w.app,
                human_duration(self.config.unknown_app_grace_ms)
            );
            return vec![self.finish(
                i,
                State::ErrorUnwatchable,
                reason,
                EventKind::Unwatchable,
                now,
            )];
        }

        let stale_after = human_duration(self.config.stale_after_ms);
        let stale_reason = |deadline: &str| {
            format!(
                "inconclusive: {deadline} passed but {last_seen} (older than {stale_after}); not reverted"
            )
        };
        match w.state {
            State::WaitingReach => {
                if now < w.watch_started_at.plus_ms(w.deadline_ms) {
                    return Vec::new();
                }
                if stale {
                    return vec![self.inconclusive(i, stale_reason("the reach deadline"), now)];
                }
                if w.app_absent_since.is_some() {
                    let reason = format!(
                        "not reached within {} of the watch start: Application {} does not exist; check the trailer's app name; nothing reverted",
                        human_duration(w.deadline_ms),
                        w.app
                    );
                    return vec![self.finish(
                        i,
                        State::NotReached,
                        reason,
                        EventKind::NotReached,
                        now,
                    )];
                }
                let reason = format!(
                    "not reached within {} of the watch start (app at revision {:?}, sync {}): the commit was never deployed; check the sync pipeline, nothing reverted",
                    human_duration(w.deadline_ms),
                    w.seen.revision,
                    if w.seen.sync.is_empty() {
                        "unknown"
                    } else {
                        w.seen.sync.as_str()
                    }
                );
                vec![self.finish(i, State::NotReached, reason, EventKind::NotReached, now)]
            }
            State::Judging => {
                let (Some(reached), Some(last)) = (w.reached_at, w.last_observed_at) else {
                    return Vec::new();
                };
                // A streak counts through `now` while the last observation is fresh: the
                // source reports every change, and silence past stale-after is not observation.
                let fresh = now.ms_since(last) <= self.config.stale_after_ms;
                if let Some(h) = w.healthy_since {
                    let observed = if fresh && extend {
                        now.ms_since(h)
                    } else {
                        last.ms_since(h)
                    };
                    if observed >= self.config.stable_for_ms {
                        // Dry-run verdicts do not count for the breaker, either way.
                        if !(w.dry_run || self.config.dry_run) {
                            self.record_confirmed();
                        }
                        let reason = format!(
                            "confirmed: reached and healthy without a break for {}",
                            human_duration(self.config.stable_for_ms)
                        );
                        return vec![self.finish(
                            i,
                            State::Confirmed,
                            reason,
                            EventKind::Confirmed,
                            now,
                        )];
                    }
                    if w.deadline_passed && !fresh {
                        let reason = format!(
                            "inconclusive: the healthy streak under way at the deadline went unobserved ({last_seen}, older than {}); not reverted",
                            human_duration(self.config.stale_after_ms)
                        );
                        return vec![self.inconclusive(i, reason, now)];
                    }
                }
                let deadline = reached.plus_ms(w.deadline_ms);
                if w.deadline_passed {
                    if w.healthy_since.is_none() {
                        let why = w
                            .seen
                            .why_not_healthy
                            .clone()
                            .unwrap_or_else(|| "health broke".into());
                        let reason =
                            format!("the healthy streak under way at the deadline broke: {why}");
                        return self.fail(i, reason, now);
                    }
                    return Vec::new();
                }
                if now < deadline {
                    return Vec::new();
                }
                if stale {
                    return vec![self.inconclusive(i, stale_reason("the deadline"), now)];
                }
                if w.healthy_since.is_some() {
                    self.watches[i].deadline_passed = true;
                    let msg = "deadline passed during a healthy streak: judging goes on until the streak completes or breaks".to_string();
                    return vec![self.emit(i, EventKind::DeadlinePassedStreakUnderWay, msg, now)];
                }
                if w.seen.health == Some(Health::Suspended) {
                    let reason = format!(
                        "not healthy within {} after reach: the app is Suspended (someone is holding it, e.g. a blue/green awaiting promotion); not reverted",
                        human_duration(w.deadline_ms)
                    );
                    return vec![self.finish(i, State::Fail, reason, EventKind::Failed, now)];
                }
                let why = w
                    .seen
                    .why_not_healthy
                    .clone()
                    .unwrap_or_else(|| "not healthy".into());
                let reason = format!(
                    "not healthy within {} after reach: {why}",
                    human_duration(w.deadline_ms)
                );
                self.fail(i, reason, now)
            }
            _ => Vec::new(),
        }
    }

    /// FAIL, and in arm mode a revert — unless a safety device says no.
    fn fail(&mut self, i: usize, why: String, now: Timestamp) -> Vec<Effect> {
        let w = &self.watches[i];
        let no_revert = if w.mode == Mode::Shadow {
            Some("shadow mode: judged only, not reverted".to_string())
        } else if let Some(b) = &w.arm_blocked {
            Some(b.clone())
        } else if w.dry_run || self.config.dry_run {
            Some("dry-run: would have reverted; nothing pushed".to_string())
        } else {
            None
        };
        if let Some(no) = no_revert {
            return vec![self.finish(
                i,
                State::Fail,
                format!("{why}; {no}"),
                EventKind::Failed,
                now,
            )];
        }
        let pending = self.watches.iter().filter(|w| w.revert_pending).count() as u32;
        if !self.breaker.allows_revert(pending) {
            let reason = format!(
                "{why}; breaker open after {} reverts in a row: not reverted; a human must look, then run `greenlight breaker reset`",
                crate::breaker::OPEN_AFTER
            );
            let mut out = vec![self.finish(i, State::Fail, reason, EventKind::Failed, now)];
            out.push(Effect::Emit(Event {
                time: now,
                event: EventKind::BreakerBlocked,
                commit: Some(self.watches[i].commit.clone()),
                app: Some(self.watches[i].app.to_string()),
                state: Some(State::Fail),
                message: "revert withheld: the breaker is open; human attention needed".into(),
                evidence: Evidence::default(),
            }));
            return out;
        }
        let w = &mut self.watches[i];
        w.state = State::Fail;
        w.reason = format!("{why}; reverting");
        w.revert_pending = true;
        w.finished_at = Some(now);
        let ev = self.emit(i, EventKind::Failed, format!("{why}; arm: reverting"), now);
        vec![ev, Effect::Revert(revert_request(&self.watches[i]))]
    }

    fn count_revert(&mut self, now: Timestamp) -> Vec<Effect> {
        self.breaker_dirty = true;
        if self.breaker.record_revert() {
            return vec![Effect::Emit(Event {
                time: now,
                event: EventKind::BreakerOpened,
                commit: None,
                app: None,
                state: None,
                message: format!(
                    "breaker opened after {} reverts in a row: no more reverts until a human runs `greenlight breaker reset`; human attention needed",
                    crate::breaker::OPEN_AFTER
                ),
                evidence: Evidence::default(),
            })];
        }
        Vec::new()
    }
}

fn revert_request(w: &Watch) -> RevertRequest {
    RevertRequest {
        watch_id: w.id.clone(),
        commit: w.commit.clone(),
        subject: w.subject.clone(),
        app: w.app.to_string(),
        reason: format!(
            "greenlight: {} (app {})",
            w.reason.trim_end_matches("; reverting"),
            w.app
        ),
    }
}

/// A synced revision is proof of reach only while the same snapshot says Synced with no
/// operation running; the judge checks this itself rather than trust every adapter.
fn admissible(snap: &AppSnapshot, c: &ReachCandidate) -> bool {
    match c.via {
        ReachVia::SyncedRevision => snap.sync_status == "Synced" && !snap.operation_running,
        _ => true,
    }
}

/// The health predicate (`docs/verdicts.md#health`): Synced + Healthy + no Degraded/Missing resource + no operation, on fresh health.
pub fn healthy(s: &AppSnapshot) -> Result<(), String> {
    if s.operation_running {
        return Err("an operation is running".into());
    }
    if s.health_stale {
        return Err(
            "health is stale (reconciledAt is before the last operation's finishedAt)".into(),
        );
    }
    if s.sync_status != "Synced" {
        let st = if s.sync_status.is_empty() {
            "unknown"
        } else {
            s.sync_status.as_str()
        };
        return Err(format!("sync status is {st}"));
    }
    if s.health != Health::Healthy {
        let mut why = format!("health={}", s.health.as_str());
        if !s.health_message.is_empty() {
            why.push_str(&format!(" ({})", s.health_message));
        }
        if !s.unhealthy_resources.is_empty() {
            let rs: Vec<String> = s.unhealthy_resources.iter().map(|r| r.label()).collect();
            why.push_str(&format!(" resources: {}", rs.join(", ")));
        }
        return Err(why);
    }
    if !s.unhealthy_resources.is_empty() {
        let rs: Vec<String> = s.unhealthy_resources.iter().map(|r| r.label()).collect();
        return Err(format!("resources not healthy: {}", rs.join(", ")));
    }
    Ok(())
}

fn seen_of(s: &AppSnapshot) -> Seen {
    Seen {
        health: Some(s.health),
        sync: s.sync_status.clone(),
        revision: s.sync_revision.clone(),
        operation: s.last_operation.as_ref().map(|o| o.phase.clone()),
        unhealthy_resources: s.unhealthy_resources.iter().map(|r| r.label()).collect(),
        resource_health_source: Some(s.resource_health_source.as_str().to_string()),
        why_not_healthy: healthy(s).err(),
    }
}

/// The commit a `git revert` message says it reverts.
fn reverted_sha(message: &str) -> Option<String> {
    let idx = message.find("This reverts commit ")?;
    let rest = &message[idx + "This reverts commit ".len()..];
    let sha: String = rest.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
    is_git_sha(&sha).then(|| sha.to_ascii_lowercase())
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(8)]
}
