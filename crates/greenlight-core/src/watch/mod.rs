//! One watched (commit, app) pair through its life (`docs/verdicts.md#states`): the data that
//! means something in each phase lives in that phase, and the methods here are the only way
//! from one phase to the next. The judge decides *when* a watch moves; this module makes sure
//! it can only move as the states table allows and that no phase carries another's leftovers
//! (a pending revert is its own phase, not a flag on a verdict). It never decides a verdict,
//! reads a clock or words a reason (that is [`crate::reason`]).

mod flat;

pub use flat::{FlatError, FlatWatch};

use crate::commit::CommitId;
use crate::commit::CommitInfo;
use crate::directive::{AppRef, Directive, Mode};
use crate::event::Evidence;
use crate::reason::{
    ArmBlocked, Failure, Landed, NoEvidence, NoRevert, Reason, Verdict, revert_not_a_commit,
};
use crate::snapshot::{Chronic, Health, ReachCandidate, SourcePaths};
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use crate::state::State;

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
    /// Argo CD's `ComparisonError` message while it stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison_error: Option<String>,
    /// The app's last sync operation failed on a revision with the commit before it applied
    /// it (`docs/verdicts.md#operation-outcomes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_sync: Option<FailedSync>,
    /// `why_not_healthy` is a state an app passes through (Progressing with no bad resource,
    /// an operation running, stale health: `docs/verdicts.md#transient`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub transient: bool,
    /// While waiting for reach: Argo CD compares this revision, which has the commit, as
    /// Synced, but no sync operation ran with it (`docs/verdicts.md#reach`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_applied: Option<String>,
    /// The chronic conditions the last health judgement left out as in the baseline
    /// (`docs/verdicts.md#evidence`, condition 3), labelled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

/// A sync operation that failed on a revision with the watched commit before applying it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedSync {
    pub revision: String,
    /// Failed or Error.
    pub phase: String,
    pub message: String,
}

impl Seen {
    pub(crate) fn evidence(&self) -> Evidence {
        Evidence {
            health: self.health.map(|h| h.as_str().to_string()),
            sync: (!self.sync.is_empty()).then(|| self.sync.clone()),
            revision: (!self.revision.is_empty()).then(|| self.revision.clone()),
            operation: self.operation.clone(),
            unhealthy_resources: self.unhealthy_resources.clone(),
            resource_health_source: self.resource_health_source.clone(),
            left_out: self.left_out.clone(),
        }
    }
}

/// A commit that arrived after a watched one, kept for attribution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaterCommit {
    pub sha: CommitId,
    pub changed_paths: crate::commit::Paths,
}

/// A watch's later commits that may still matter, in the order they arrived, each once: a
/// commit delivered again (by two fetches, after a restart) is one later commit. The set beside
/// the list makes that check constant-time.
///
/// Only what attribution has not ruled out is kept (`docs/verdicts.md#attribution`): a commit
/// that arrives while the watch's source paths are known and changes nothing under them is
/// not recorded, and the commits recorded while they were unknown go once the first check
/// under known paths finds no culprit among them. `filtered_under` keeps the paths of the
/// last such dropping: should the app's paths change to some a dropped commit could touch,
/// the watch can no longer rule the dropped ones out (the judge ends it, never reverting).
/// So a push of N watched commits holds N watches of a few commits each, not N²/2 commits.
#[derive(Clone, Debug, Default)]
pub(crate) struct LaterCommits {
    list: Vec<LaterCommit>,
    shas: std::collections::HashSet<CommitId>,
    filtered_under: Option<SourcePaths>,
}

impl LaterCommits {
    fn add(&mut self, c: LaterCommit) {
        if self.shas.insert(c.sha.clone()) {
            self.list.push(c);
        }
    }

    fn restored(list: Vec<LaterCommit>, filtered_under: Option<SourcePaths>) -> LaterCommits {
        let mut later = LaterCommits {
            filtered_under,
            ..LaterCommits::default()
        };
        for c in list {
            later.add(c);
        }
        later
    }
}

impl PartialEq for LaterCommits {
    fn eq(&self, other: &LaterCommits) -> bool {
        self.list == other.list && self.filtered_under == other.filtered_under
    }
}

impl Eq for LaterCommits {}

/// What is known of the app around the sync that brought the commit: whether a failure can be
/// laid on the commit at all (`docs/verdicts.md#baseline`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    /// The app's health in the last observation before that sync began.
    pub before: Before,
    /// The app passed the health predicate in some observation after reach.
    pub healthy_after_reach: bool,
    /// When the sync operation last seen at reach started (Argo CD's clock): only an operation
    /// started after it can have withdrawn the commit.
    pub reach_operation_started: Option<Timestamp>,
    /// The revision Argo CD had compared in that observation (`sync.revision`), when it is a
    /// commit SHA: the *baseline revision* (`docs/verdicts.md#evidence`).
    #[serde(default)]
    pub revision: Option<String>,
    /// Why that observation was no clean before (not Synced, its last sync operation did not
    /// succeed), when it was not.
    #[serde(default)]
    pub unclean: Option<String>,
    /// The commits between the baseline revision and this commit (both excluded): what the
    /// sync that brings this commit brings with it. `None` when greenlight cannot tell.
    #[serde(default)]
    pub batch: Option<Vec<LaterCommit>>,
    /// For a watched merge: which parent was the branch (`docs/verdicts.md#evidence`). `None`
    /// for a commit with one parent, and in records from before it was kept (a merge is then
    /// reverted against its first parent, as it was).
    #[serde(default)]
    pub merge_side: Option<MergeSide>,
    /// What was not clean in that observation: the resources not Healthy-and-Synced and the
    /// PostSync hooks that failed (`docs/verdicts.md#evidence`, condition 3). The same
    /// condition after the commit does not count against it. Empty in records from before it
    /// was kept (judged strictly, as then).
    #[serde(default)]
    pub chronic: Chronic,
    /// The observation was made after Argo CD compared the commit, before it synced it (a
    /// *compared baseline*, never clean: `docs/verdicts.md#baseline`); a later one of the same
    /// kind replaces it, and one from before the compare always does.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_compare: bool,
}

/// Which parent of a watched merge was the branch before it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MergeSide {
    /// This parent: a revert keeps its side and undoes what the merge brought.
    Mainline(CommitId),
    /// greenlight could not tell (it had not recorded a tip that only one parent contains):
    /// no revert, since either side could be the one it would undo.
    Unknown,
}

/// What an observation of the app before the commit's sync says, for the baseline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BeforeSeen {
    pub before: Before,
    pub revision: Option<String>,
    pub unclean: Option<String>,
    /// The batch, when the revision is new to the baseline and the judge could work it out;
    /// `None` keeps the batch already recorded for the same revision.
    pub batch: Option<Option<Vec<LaterCommit>>>,
    pub chronic: Chronic,
    /// See [`Baseline::after_compare`].
    pub after_compare: bool,
}

impl Baseline {
    /// Nothing recorded: the shape of a watch written before baselines were kept.
    pub fn is_not_recorded(&self) -> bool {
        *self == Baseline::default()
    }
}

/// The app's health before the sync that brought the commit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Before {
    /// A watch started by a greenlight that did not record it: judged as it was then.
    #[default]
    NotRecorded,
    /// No observation of the app before that sync began.
    Unknown,
    Healthy,
    NotHealthy(Health),
}

impl Before {
    /// From the app-level health of an observation.
    pub fn of(health: Health) -> Before {
        if health == Health::Healthy {
            Before::Healthy
        } else {
            Before::NotHealthy(health)
        }
    }

    /// Whether a failure after reach may be laid on the commit: the app was Healthy before
    /// (or the watch predates the record).
    pub fn was_healthy(self) -> bool {
        matches!(self, Before::Healthy | Before::NotRecorded)
    }
}

/// Where a watch is in its life, and what is known there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// `WAITING_REACH`.
    WaitingReach(Waiting),
    /// `JUDGING`.
    Judging(Judging),
    /// `FAIL` in arm mode with its revert requested and not yet reported back; a restart
    /// issues it again (`docs/verdicts.md#adoption`).
    Reverting(Reverting),
    /// A verdict; nothing changes this watch any more.
    Finished(Finished),
}

/// Waiting for reach.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Waiting {
    /// Since when the app has been absent (the unknown-app grace counts from here).
    pub absent_since: Option<Timestamp>,
}

/// Reached; health and stability are being judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judging {
    /// When greenlight observed the reach: the health deadline counts from here.
    pub reached_at: Timestamp,
    pub reach: ReachCandidate,
    pub absent_since: Option<Timestamp>,
    pub streak: Streak,
    /// A failed sync containing the commit was reported (once per watch).
    pub reported_sync_failure: bool,
    /// Healthy time the streak under way at the deadline had before it paused
    /// (`docs/verdicts.md#transient`): it counts toward stable-for when the streak resumes.
    pub banked_ms: i64,
    /// How many times that streak paused.
    pub pauses: u32,
    /// Unobserved time inside the streak under way beyond what it may count: each gap between
    /// observations that nothing vouched for counts only up to the judge's slack
    /// (`docs/verdicts.md#observed-time`); the rest is subtracted from the streak.
    pub unobserved_ms: i64,
}

/// The healthy streak (`docs/verdicts.md#stability`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Streak {
    NotUnderWay,
    UnderWay {
        since: Timestamp,
    },
    /// The health deadline passed during this streak: it may still complete; a break fails.
    UnderWayAtDeadline {
        since: Timestamp,
    },
    /// The streak under way at the deadline was interrupted by a transient state (Progressing,
    /// an operation, stale health) at `at`: it resumes on Healthy, and without that within
    /// stable-for the watch is INCONCLUSIVE (`docs/verdicts.md#transient`).
    PausedAfterDeadline {
        at: Timestamp,
    },
    /// The streak under way at the deadline broke: the FAIL is due (the judge decides it in
    /// the same step).
    BrokeAfterDeadline,
}

impl Streak {
    pub fn since(self) -> Option<Timestamp> {
        match self {
            Streak::UnderWay { since } | Streak::UnderWayAtDeadline { since } => Some(since),
            Streak::NotUnderWay
            | Streak::PausedAfterDeadline { .. }
            | Streak::BrokeAfterDeadline => None,
        }
    }
    pub fn deadline_passed(self) -> bool {
        matches!(
            self,
            Streak::UnderWayAtDeadline { .. }
                | Streak::PausedAfterDeadline { .. }
                | Streak::BrokeAfterDeadline
        )
    }
    pub fn paused_at(self) -> Option<Timestamp> {
        match self {
            Streak::PausedAfterDeadline { at } => Some(at),
            _ => None,
        }
    }
}

/// FAIL, revert requested.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reverting {
    pub failure: Failure,
    /// The verdict's time (the revert's own outcome is in the event log).
    pub at: Timestamp,
    /// What was known when the verdict came.
    pub judged: Judging,
    /// The pull request that proposes the revert (`--revert-via pull-request`), once opened:
    /// the watch waits for it to merge.
    pub proposal: Option<RevertProposal>,
}

/// A revert proposed as a pull request, and not merged yet (`docs/verdicts.md#revert-by-pull-request`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevertProposal {
    /// The request's web page.
    pub url: String,
    /// Its number (GitLab: the merge request's `iid`).
    pub number: u64,
    /// The revert commit, the request's head.
    pub revert: CommitId,
    /// The request's branch.
    pub head: String,
    /// Whether the forge's auto-merge is armed on it.
    pub auto_merge: bool,
    /// Newer commits that changed the app while it was open: the verdict no longer rests on
    /// evidence, and the request is being withdrawn (closed). Empty while it stands.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub superseded_by: Vec<CommitId>,
    /// The request is shared with another watch of the same commit and is being withdrawn for
    /// that watch's reason (its app changed since): this watch's failure still stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withdrawn_for: Option<String>,
}

/// A verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finished {
    pub verdict: Verdict,
    /// The verdict's time.
    pub at: Timestamp,
    /// The live phase as it was when the verdict came, kept for `status` and the state file;
    /// the judge never reads it.
    pub ended: Live,
}

/// A live phase, as a finished watch remembers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Live {
    WaitingReach(Waiting),
    Judging(Judging),
}

/// One watched (commit, app) pair and everything the judge needs to resume it after a restart.
/// The identity is public (it never changes after the start); the rest is read through
/// accessors and changed only by the transitions below.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watch {
    /// `<commit>:<index of the trailer in the commit>`.
    pub id: String,
    pub commit: CommitId,
    pub subject: String,
    pub app: AppRef,
    pub mode: Mode,
    /// Started in dry-run: judged only, whatever a later start says (`docs/verdicts.md#dry-run`).
    pub dry_run: bool,
    pub deadline_ms: i64,
    pub watch_started_at: Timestamp,
    /// Files the watched commit changed.
    pub own_paths: crate::commit::Paths,
    phase: Phase,
    /// The last time the app was successfully observed (present or absent).
    last_observed_at: Option<Timestamp>,
    seen: Seen,
    later_commits: LaterCommits,
    source_paths: Option<SourcePaths>,
    /// Why arm was downgraded to shadow for this watch, once known.
    arm_blocked: Option<ArmBlocked>,
    warned_auto_sync_off: bool,
    baseline: Baseline,
    /// The app's inputs from outside the watched repository as first observed
    /// (`docs/verdicts.md#changed-outside`); `None` until then.
    inputs: Option<BTreeMap<String, String>>,
    /// `expect=Healthy,Running`: no `CONFIRMED` until the Pods are verified to run what git
    /// pins (`docs/verdicts.md#expect-running`).
    pub expect_running: bool,
}

impl Watch {
    // ----------------------------------------------------------------------- reading

    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    pub fn state(&self) -> State {
        match &self.phase {
            Phase::WaitingReach(_) => State::WaitingReach,
            Phase::Judging(_) => State::Judging,
            Phase::Reverting(_) => State::Fail,
            Phase::Finished(f) => f.verdict.state(),
        }
    }

    /// Why the watch is where it is; `to_string()` gives the words `status` shows.
    pub fn reason(&self) -> Reason<'_> {
        match &self.phase {
            Phase::WaitingReach(_) => Reason::WaitingReach,
            Phase::Judging(_) => Reason::Judging,
            Phase::Reverting(Reverting {
                failure,
                proposal: Some(p),
                ..
            }) => Reason::Proposed(failure, p),
            Phase::Reverting(r) => Reason::Reverting(&r.failure),
            Phase::Finished(f) => Reason::Verdict(&f.verdict),
        }
    }

    /// The words `status` shows, the state file keeps and the verdict's event says: the reason
    /// and, for a verdict after reach whose last judgement had no per-resource health (Argo CD
    /// ≥ 3.0 keeps it out of the Application and no resource tree was read), that it was judged
    /// on the app-level health alone ([`crate::reason::APP_LEVEL_HEALTH`]).
    pub fn reason_text(&self) -> String {
        let text = self.reason().to_string();
        if self.judged_on_app_level_health() {
            format!("{text}{}", crate::reason::APP_LEVEL_HEALTH)
        } else {
            text
        }
    }

    fn judged_on_app_level_health(&self) -> bool {
        matches!(self.phase, Phase::Finished(_) | Phase::Reverting(_))
            && self.reached_at().is_some()
            && self.seen.resource_health_source.as_deref()
                == Some(crate::snapshot::ResourceHealthSource::Unavailable.as_str())
    }

    /// Still waiting for reach or being judged: observations, commits and time can move it.
    pub fn is_live(&self) -> bool {
        matches!(self.phase, Phase::WaitingReach(_) | Phase::Judging(_))
    }

    /// The deadline that decides next: watch start + deadline while waiting, reach + deadline
    /// while judging; none once a verdict is in.
    pub fn deadline_at(&self) -> Option<Timestamp> {
        match &self.phase {
            Phase::WaitingReach(_) => Some(self.watch_started_at.plus_ms(self.deadline_ms)),
            Phase::Judging(j) => Some(j.reached_at.plus_ms(self.deadline_ms)),
            Phase::Reverting(_) | Phase::Finished(_) => None,
        }
    }

    /// The judging data: live, or as it was when the verdict came.
    fn judged(&self) -> Option<&Judging> {
        match &self.phase {
            Phase::Judging(j)
            | Phase::Reverting(Reverting { judged: j, .. })
            | Phase::Finished(Finished {
                ended: Live::Judging(j),
                ..
            }) => Some(j),
            Phase::WaitingReach(_)
            | Phase::Finished(Finished {
                ended: Live::WaitingReach(_),
                ..
            }) => None,
        }
    }

    fn waiting_absent_since(&self) -> Option<Timestamp> {
        match &self.phase {
            Phase::WaitingReach(w)
            | Phase::Finished(Finished {
                ended: Live::WaitingReach(w),
                ..
            }) => w.absent_since,
            _ => None,
        }
    }

    // The accessors below answer for a finished watch as it was when its verdict came.

    pub fn reached_at(&self) -> Option<Timestamp> {
        self.judged().map(|j| j.reached_at)
    }
    pub fn reach(&self) -> Option<&ReachCandidate> {
        self.judged().map(|j| &j.reach)
    }
    pub fn healthy_since(&self) -> Option<Timestamp> {
        self.judged().and_then(|j| j.streak.since())
    }
    /// When the streak under way paused after the deadline (`docs/verdicts.md#transient`).
    pub fn streak_paused_at(&self) -> Option<Timestamp> {
        self.judged().and_then(|j| j.streak.paused_at())
    }
    /// Healthy time banked by pauses of the streak under way at the deadline.
    pub fn streak_banked_ms(&self) -> i64 {
        self.judged().map_or(0, |j| j.banked_ms)
    }
    /// Unobserved time inside the streak under way that does not count toward it.
    pub fn streak_unobserved_ms(&self) -> i64 {
        self.judged().map_or(0, |j| j.unobserved_ms)
    }
    /// A gap of `excess_ms` beyond the slack inside the streak under way: it does
    /// not count toward the streak; true when there was a streak to charge it to.
    pub(crate) fn streak_unobserved(&mut self, excess_ms: i64) -> bool {
        match &mut self.phase {
            Phase::Judging(j)
                if excess_ms > 0
                    && matches!(
                        j.streak,
                        Streak::UnderWay { .. } | Streak::UnderWayAtDeadline { .. }
                    ) =>
            {
                j.unobserved_ms += excess_ms;
                true
            }
            _ => false,
        }
    }
    /// How many times the streak under way at the deadline paused.
    pub fn streak_pauses(&self) -> u32 {
        self.judged().map_or(0, |j| j.pauses)
    }
    /// When the streak under way completes stable-for, if it stays healthy.
    pub fn streak_completes_at(&self, stable_for_ms: i64) -> Option<Timestamp> {
        let banked = self.streak_banked_ms() - self.streak_unobserved_ms();
        self.healthy_since()
            .map(|h| h.plus_ms((stable_for_ms - banked).max(0)))
    }
    /// The health deadline passed while a healthy streak was under way.
    pub fn deadline_passed(&self) -> bool {
        self.judged().is_some_and(|j| j.streak.deadline_passed())
    }
    pub fn reported_sync_failure(&self) -> bool {
        self.judged().is_some_and(|j| j.reported_sync_failure)
    }
    pub fn app_absent_since(&self) -> Option<Timestamp> {
        self.judged()
            .map(|j| j.absent_since)
            .unwrap_or_else(|| self.waiting_absent_since())
    }

    /// The failure whose revert is requested and has not landed: asked of the executor, or
    /// proposed as a pull request that has not merged.
    pub fn reverting(&self) -> Option<&Failure> {
        match &self.phase {
            Phase::Reverting(r) => Some(&r.failure),
            _ => None,
        }
    }
    /// A revert is asked of the executor, which has not reported back.
    pub fn revert_pending(&self) -> bool {
        matches!(&self.phase, Phase::Reverting(r) if r.proposal.is_none())
    }
    /// The pull request that proposes this watch's revert, while it has not merged.
    pub fn proposal(&self) -> Option<&RevertProposal> {
        match &self.phase {
            Phase::Reverting(r) => r.proposal.as_ref(),
            _ => None,
        }
    }
    pub fn verdict(&self) -> Option<&Verdict> {
        match &self.phase {
            Phase::Finished(f) => Some(&f.verdict),
            _ => None,
        }
    }
    /// When the verdict came (for a revert, when it was decided).
    pub fn finished_at(&self) -> Option<Timestamp> {
        match &self.phase {
            Phase::Reverting(r) => Some(r.at),
            Phase::Finished(f) => Some(f.at),
            _ => None,
        }
    }
    /// The revert of this commit on the branch: greenlight's (pushed or adopted) or a human's.
    pub fn revert_commit(&self) -> Option<&CommitId> {
        self.verdict().and_then(Verdict::revert_commit)
    }

    pub fn last_observed_at(&self) -> Option<Timestamp> {
        self.last_observed_at
    }
    pub fn seen(&self) -> &Seen {
        &self.seen
    }
    pub fn later_commits(&self) -> &[LaterCommit] {
        &self.later_commits.list
    }
    pub fn source_paths(&self) -> Option<&SourcePaths> {
        self.source_paths.as_ref()
    }
    /// The source paths under which later commits were last left unrecorded, for touching
    /// nothing under them; `None` when every later commit was recorded.
    pub fn later_filtered_under(&self) -> Option<&SourcePaths> {
        self.later_commits.filtered_under.as_ref()
    }
    /// A later commit that changed nothing under `paths` is not recorded. True when that
    /// changed what the watch keeps (the paths filtered under).
    pub(crate) fn later_commit_skipped(&mut self, paths: &SourcePaths) -> bool {
        if self.later_commits.filtered_under.as_ref() == Some(paths) {
            return false;
        }
        self.later_commits.filtered_under = Some(paths.clone());
        true
    }
    /// Every later commit recorded so far was found no culprit under `paths`: they are let go.
    /// True when there were any.
    pub(crate) fn later_commits_clear(&mut self, paths: &SourcePaths) -> bool {
        if self.later_commits.list.is_empty() {
            return false;
        }
        self.later_commits.list.clear();
        self.later_commits.shas.clear();
        self.later_commits.filtered_under = Some(paths.clone());
        true
    }
    pub fn arm_blocked(&self) -> Option<&ArmBlocked> {
        self.arm_blocked.as_ref()
    }
    pub fn inputs(&self) -> Option<&BTreeMap<String, String>> {
        self.inputs.as_ref()
    }
    pub fn baseline(&self) -> &Baseline {
        &self.baseline
    }
    pub fn warned_auto_sync_off(&self) -> bool {
        self.warned_auto_sync_off
    }

    // ------------------------------------------------------------------- transitions

    /// A new watch of the same commit, app and directive as this finished one, started at
    /// `now` and judged as new (`docs/verdicts.md#reopen`): its commit was reached after this
    /// one ended `NOT_REACHED`.
    pub(crate) fn reopened(&self, id: String, now: Timestamp) -> Watch {
        Watch {
            id,
            commit: self.commit.clone(),
            subject: self.subject.clone(),
            app: self.app.clone(),
            mode: self.mode,
            dry_run: self.dry_run,
            deadline_ms: self.deadline_ms,
            watch_started_at: now,
            own_paths: self.own_paths.clone(),
            phase: Phase::WaitingReach(Waiting::default()),
            last_observed_at: None,
            seen: Seen::default(),
            later_commits: LaterCommits::default(),
            source_paths: self.source_paths.clone(),
            arm_blocked: None,
            warned_auto_sync_off: false,
            baseline: Baseline {
                before: Before::Unknown,
                merge_side: self.baseline.merge_side.clone(),
                ..Baseline::default()
            },
            inputs: None,
            expect_running: self.expect_running,
        }
    }

    pub(crate) fn start(
        id: String,
        commit: &CommitInfo,
        d: Directive,
        dry_run: bool,
        now: Timestamp,
    ) -> Watch {
        let expect_running = d.expects_running();
        Watch {
            expect_running,
            id,
            commit: commit.sha.clone(),
            subject: commit.subject.clone(),
            app: d.app,
            mode: d.mode,
            dry_run,
            deadline_ms: d.deadline_ms,
            watch_started_at: now,
            own_paths: commit.changed_paths.clone(),
            phase: Phase::WaitingReach(Waiting::default()),
            last_observed_at: None,
            seen: Seen::default(),
            later_commits: LaterCommits::default(),
            source_paths: None,
            arm_blocked: None,
            warned_auto_sync_off: false,
            baseline: Baseline {
                before: Before::Unknown,
                merge_side: (commit.parents.len() > 1).then(|| match &commit.mainline {
                    Some(m) => MergeSide::Mainline(m.clone()),
                    None => MergeSide::Unknown,
                }),
                ..Baseline::default()
            },
            inputs: None,
        }
    }

    /// The app's inputs from outside the watched repository, as now known.
    pub(crate) fn saw_inputs(&mut self, inputs: BTreeMap<String, String>) {
        self.inputs = Some(inputs);
    }

    /// Observed at `at` (present or absent), or vouched for up to then.
    pub(crate) fn observed(&mut self, at: Timestamp) {
        self.last_observed_at = Some(at);
    }
    pub(crate) fn saw(&mut self, seen: Seen) {
        self.seen = seen;
    }
    pub(crate) fn saw_not_applied(&mut self, revision: String) {
        self.seen.not_applied = Some(revision);
    }
    pub(crate) fn saw_health(
        &mut self,
        why_not_healthy: Option<String>,
        transient: bool,
        left_out: Vec<String>,
    ) {
        self.seen.why_not_healthy = why_not_healthy;
        self.seen.transient = transient;
        self.seen.left_out = left_out;
    }
    pub(crate) fn learned_source_paths(&mut self, paths: SourcePaths) {
        self.source_paths = Some(paths);
    }
    pub(crate) fn later_commit(&mut self, c: LaterCommit) {
        // A commit delivered again (by two fetches) is one later commit.
        self.later_commits.add(c);
    }
    pub(crate) fn block_arm(&mut self, why: ArmBlocked) {
        self.arm_blocked = Some(why);
    }
    pub(crate) fn warned_auto_sync(&mut self) {
        self.warned_auto_sync_off = true;
    }
    /// An observation before the commit's sync began (the last one wins).
    pub(crate) fn saw_before(&mut self, seen: BeforeSeen) {
        if self.state() != State::WaitingReach {
            return;
        }
        let b = &mut self.baseline;
        if b.revision != seen.revision {
            b.batch = None;
        }
        b.before = seen.before;
        b.revision = seen.revision;
        b.unclean = seen.unclean;
        b.chronic = seen.chronic;
        b.after_compare = seen.after_compare;
        if let Some(batch) = seen.batch {
            b.batch = batch;
        }
    }
    pub(crate) fn saw_healthy_after_reach(&mut self) {
        self.baseline.healthy_after_reach = true;
    }

    fn live_absent_since(&mut self) -> Option<&mut Option<Timestamp>> {
        match &mut self.phase {
            Phase::WaitingReach(w) => Some(&mut w.absent_since),
            Phase::Judging(j) => Some(&mut j.absent_since),
            Phase::Reverting(_) | Phase::Finished(_) => None,
        }
    }

    /// The app was found absent; true when it was not absent before (the grace starts now).
    pub(crate) fn absent(&mut self, at: Timestamp) -> bool {
        match self.live_absent_since() {
            Some(since @ None) => {
                *since = Some(at);
                true
            }
            _ => false,
        }
    }
    pub(crate) fn present(&mut self) {
        if let Some(since) = self.live_absent_since() {
            *since = None;
        }
    }

    /// WAITING_REACH → JUDGING.
    pub(crate) fn reached(
        &mut self,
        reach: ReachCandidate,
        operation_started: Option<Timestamp>,
        at: Timestamp,
    ) -> bool {
        let Phase::WaitingReach(Waiting { absent_since }) = self.phase else {
            return false;
        };
        self.baseline.reach_operation_started = operation_started;
        self.phase = Phase::Judging(Judging {
            reached_at: at,
            reach,
            absent_since,
            streak: Streak::NotUnderWay,
            reported_sync_failure: false,
            banked_ms: 0,
            pauses: 0,
            unobserved_ms: 0,
        });
        true
    }

    pub(crate) fn reported_sync_failure_now(&mut self) {
        if let Phase::Judging(j) = &mut self.phase {
            j.reported_sync_failure = true;
        }
    }

    /// A healthy observation while judging; true when it starts a streak. A streak that broke
    /// after the deadline is not restarted: its FAIL is due.
    pub(crate) fn healthy_at(&mut self, at: Timestamp) -> bool {
        match &mut self.phase {
            Phase::Judging(j) if j.streak == Streak::NotUnderWay => {
                j.streak = Streak::UnderWay { since: at };
                j.unobserved_ms = 0;
                true
            }
            _ => false,
        }
    }

    /// A healthy observation resumes the streak paused after the deadline; true when it did.
    pub(crate) fn streak_resumed(&mut self, at: Timestamp) -> bool {
        match &mut self.phase {
            Phase::Judging(j) if matches!(j.streak, Streak::PausedAfterDeadline { .. }) => {
                j.streak = Streak::UnderWayAtDeadline { since: at };
                true
            }
            _ => false,
        }
    }

    /// A transient state pauses the streak under way at the deadline, banking its healthy time
    /// so far; true when it did.
    pub(crate) fn streak_paused(&mut self, at: Timestamp) -> bool {
        match &mut self.phase {
            Phase::Judging(j) => match j.streak {
                Streak::UnderWayAtDeadline { since } => {
                    j.banked_ms += (at.ms_since(since) - j.unobserved_ms).max(0);
                    j.unobserved_ms = 0;
                    j.pauses += 1;
                    j.streak = Streak::PausedAfterDeadline { at };
                    true
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// The streak under way (if any) broke; true when there was one.
    pub(crate) fn streak_broke(&mut self) -> bool {
        let Phase::Judging(j) = &mut self.phase else {
            return false;
        };
        match j.streak {
            Streak::UnderWay { .. } => j.streak = Streak::NotUnderWay,
            Streak::UnderWayAtDeadline { .. } | Streak::PausedAfterDeadline { .. } => {
                j.streak = Streak::BrokeAfterDeadline
            }
            Streak::NotUnderWay | Streak::BrokeAfterDeadline => return false,
        }
        true
    }

    /// At the deadline, no streak under way but the app was healthy after reach and is now in a
    /// transient state: the streak is as one paused at the deadline (`docs/verdicts.md#transient`).
    pub(crate) fn streak_paused_at_deadline(&mut self, at: Timestamp) -> bool {
        match &mut self.phase {
            Phase::Judging(j) if j.streak == Streak::NotUnderWay => {
                j.pauses += 1;
                j.unobserved_ms = 0;
                j.streak = Streak::PausedAfterDeadline { at };
                true
            }
            _ => false,
        }
    }

    /// The health deadline passed during the streak under way.
    pub(crate) fn streak_outlived_deadline(&mut self) -> bool {
        match &mut self.phase {
            Phase::Judging(j) => match j.streak {
                Streak::UnderWay { since } => {
                    j.streak = Streak::UnderWayAtDeadline { since };
                    true
                }
                _ => false,
            },
            _ => false,
        }
    }

    fn take_live(&mut self) -> Option<Live> {
        let placeholder = Phase::WaitingReach(Waiting::default());
        match std::mem::replace(&mut self.phase, placeholder) {
            Phase::WaitingReach(w) => Some(Live::WaitingReach(w)),
            Phase::Judging(j) => Some(Live::Judging(j)),
            other => {
                self.phase = other;
                None
            }
        }
    }

    /// A live watch gets its verdict. False (and nothing changes) when it already had one.
    pub(crate) fn finish(&mut self, verdict: Verdict, at: Timestamp) -> bool {
        let Some(ended) = self.take_live() else {
            return false;
        };
        self.phase = Phase::Finished(Finished { verdict, at, ended });
        true
    }

    /// JUDGING → FAIL with a revert requested.
    pub(crate) fn revert_requested(&mut self, failure: Failure, at: Timestamp) -> bool {
        let Phase::Judging(_) = &self.phase else {
            return false;
        };
        let Some(Live::Judging(judged)) = self.take_live() else {
            return false;
        };
        self.phase = Phase::Reverting(Reverting {
            failure,
            at,
            judged,
            proposal: None,
        });
        true
    }

    /// The executor opened a pull request for the requested revert: the watch waits for it.
    /// False when no revert was asked of the executor.
    pub(crate) fn revert_proposed(&mut self, proposal: RevertProposal) -> bool {
        match &mut self.phase {
            Phase::Reverting(r) if r.proposal.is_none() => {
                r.proposal = Some(proposal);
                true
            }
            _ => false,
        }
    }

    /// A newer commit changed the app while the proposal was open: it is recorded as a later
    /// commit (the verdict's words name it) and the proposal is withdrawn. False when there is
    /// no proposal.
    pub(crate) fn proposal_superseded(&mut self, newer: LaterCommit) -> bool {
        let Phase::Reverting(Reverting {
            proposal: Some(p), ..
        }) = &mut self.phase
        else {
            return false;
        };
        if !p.superseded_by.contains(&newer.sha) {
            p.superseded_by.push(newer.sha.clone());
        }
        self.later_commits.add(newer);
        true
    }

    /// The shared proposal is withdrawn for another watch's reason (`why`). False when there
    /// is no proposal, or it is withdrawn already.
    pub(crate) fn proposal_withdrawn_for(&mut self, why: &str) -> bool {
        match &mut self.phase {
            Phase::Reverting(Reverting {
                proposal: Some(p), ..
            }) if p.superseded_by.is_empty() && p.withdrawn_for.is_none() => {
                p.withdrawn_for = Some(why.to_string());
                true
            }
            _ => false,
        }
    }

    /// The executor reported back on the requested revert: REVERTED or REVERT_FAILED, with the
    /// verdict's time kept. False when no revert was pending.
    pub(crate) fn revert_done(&mut self, outcome: &RevertOutcome) -> bool {
        let placeholder = Phase::WaitingReach(Waiting::default());
        let r = match std::mem::replace(&mut self.phase, placeholder) {
            Phase::Reverting(r) => r,
            other => {
                self.phase = other;
                return false;
            }
        };
        let verdict = match outcome {
            RevertOutcome::Pushed { revert } => Verdict::Reverted {
                failure: r.failure,
                revert: revert.clone(),
                landed: Landed::Pushed,
            },
            RevertOutcome::Adopted { revert } => Verdict::Reverted {
                failure: r.failure,
                revert: revert.clone(),
                landed: Landed::Adopted,
            },
            RevertOutcome::Merged { revert, .. } => Verdict::Reverted {
                failure: r.failure,
                revert: revert.clone(),
                landed: Landed::Merged,
            },
            // Closed unmerged after newer commits changed the app: as a revert stopped by them
            // before its push.
            RevertOutcome::Closed { .. }
                if r.proposal
                    .as_ref()
                    .is_some_and(|p| !p.superseded_by.is_empty()) =>
            {
                let newer = r
                    .proposal
                    .as_ref()
                    .map(|p| p.superseded_by.clone())
                    .unwrap_or_default();
                Verdict::Failed {
                    failure: r.failure,
                    not_reverted: NoRevert::NoEvidence(NoEvidence::Superseded {
                        app: self.app.clone(),
                        newer,
                    }),
                }
            }
            RevertOutcome::Closed { url } => {
                match r.proposal.as_ref().and_then(|p| p.withdrawn_for.as_ref()) {
                    Some(why) => Verdict::RevertFailed {
                        message: format!(
                            "greenlight closed the revert's pull request {url}, shared with another watch of this commit, because {why}; nothing was reverted, and this app's failure still stands"
                        ),
                    },
                    None => Verdict::RevertFailed {
                        message: format!(
                            "the revert's pull request {url} was closed without merging; nothing was reverted"
                        ),
                    },
                }
            }
            // Only the executor's first report proposes; a proposal is not a verdict.
            RevertOutcome::Proposed { .. } => {
                self.phase = Phase::Reverting(r);
                return false;
            }
            RevertOutcome::Failed { message } => Verdict::RevertFailed {
                message: message.clone(),
            },
            RevertOutcome::Superseded { newer } => {
                for c in newer {
                    self.later_commits.add(c.clone());
                }
                Verdict::Failed {
                    failure: r.failure,
                    not_reverted: NoRevert::NoEvidence(NoEvidence::Superseded {
                        app: self.app.clone(),
                        newer: newer.iter().map(|c| c.sha.clone()).collect(),
                    }),
                }
            }
        };
        self.phase = Phase::Finished(Finished {
            verdict,
            at: r.at,
            ended: Live::Judging(r.judged),
        });
        true
    }
}

/// What the revert executor reports back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RevertOutcome {
    Pushed {
        revert: CommitId,
    },
    Adopted {
        revert: CommitId,
    },
    /// A conflict, nothing to revert, or an error after retries: a human must act.
    Failed {
        message: String,
    },
    /// Fetched just before the push, the branch had newer commits that changed the app (a
    /// fix-forward): nothing was pushed, and the verdict no longer rests on evidence.
    Superseded {
        newer: Vec<LaterCommit>,
    },
    /// `--revert-via pull-request`: the revert is on a branch of its own with a pull request
    /// open; the watch waits for it. `note`: why auto-merge is not armed though asked for.
    Proposed {
        proposal: RevertProposal,
        note: Option<String>,
    },
    /// The revert's pull request merged (the forge said so, or its commit arrived on the
    /// branch); `revert` is the commit that brought it.
    Merged {
        revert: CommitId,
        url: String,
    },
    /// The revert's pull request was closed unmerged.
    Closed {
        url: String,
    },
}

impl RevertOutcome {
    /// git pushed the revert it names. Named by anything but a commit id, no revert can be
    /// recorded as landed: a human must look.
    pub fn pushed(revert: &str) -> RevertOutcome {
        match CommitId::parse(revert) {
            Ok(revert) => RevertOutcome::Pushed { revert },
            Err(e) => RevertOutcome::Failed {
                message: revert_not_a_commit(Landed::Pushed, &e),
            },
        }
    }

    /// A revert git found already on the branch.
    pub fn adopted(revert: &str) -> RevertOutcome {
        match CommitId::parse(revert) {
            Ok(revert) => RevertOutcome::Adopted { revert },
            Err(e) => RevertOutcome::Failed {
                message: revert_not_a_commit(Landed::Adopted, &e),
            },
        }
    }
}
