//! A watch as one flat record: the shape of a watch's body in the state file, field for field
//! and in the same order as greenlight has always written it, so existing files read back and
//! new ones read the same. Converting is pure and checks what the flat shape cannot: that the
//! fields agree with the state (a JUDGING watch was reached, a pending revert is a FAIL, …).
//! Reasons are recorded as their words and read back into their typed variant where one says
//! exactly those words ([`crate::reason`]). This module never decides anything about a watch.

use super::{
    Baseline, Finished, Judging, Live, Phase, RevertProposal, Reverting, Seen, State, Streak,
    Waiting, Watch,
};
use crate::commit::CommitId;
use crate::directive::{AppRef, Mode};
use crate::reason::{ArmBlocked, Failure, Recorded, Verdict};
use crate::snapshot::{ReachCandidate, SourcePaths};
use crate::time::Timestamp;
use crate::watch::LaterCommit;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Every field of a watch, flat, as the state file holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlatWatch {
    pub id: String,
    pub commit: CommitId,
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
    pub revert_commit: Option<CommitId>,
    pub last_observed_at: Option<Timestamp>,
    pub app_absent_since: Option<Timestamp>,
    pub reach: Option<ReachCandidate>,
    pub own_paths: crate::commit::Paths,
    pub later_commits: Vec<LaterCommit>,
    pub source_paths: Option<SourcePaths>,
    pub arm_blocked: Option<String>,
    pub revert_pending: bool,
    pub deadline_passed: bool,
    pub warned_auto_sync_off: bool,
    pub reported_sync_failure: bool,
    pub seen: Seen,
    /// Absent from records written before it was kept: [`Before::NotRecorded`](super::Before::NotRecorded).
    #[serde(default, skip_serializing_if = "Baseline::is_not_recorded")]
    pub baseline: Baseline,
    /// The streak under way at the deadline paused here (`docs/verdicts.md#transient`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streak_paused_at: Option<Timestamp>,
    /// Healthy time that streak had before its pauses.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub streak_banked_ms: i64,
    /// How many times that streak paused.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub streak_pauses: u32,
    /// Unobserved time inside the streak that does not count toward it.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub streak_unobserved_ms: i64,
    /// The app's inputs from outside the watched repository as first observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<BTreeMap<String, String>>,
    /// The pull request that proposes a pending revert, once opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revert_proposal: Option<RevertProposal>,
    /// `expect=Healthy,Running`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub expect_running: bool,
    /// The source paths later commits that touched none of them were left unrecorded under
    /// (`docs/verdicts.md#attribution`); absent when every later commit was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub later_filtered_under: Option<SourcePaths>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero_i64(n: &i64) -> bool {
    *n == 0
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// A flat record whose fields contradict each other: no watch greenlight ran looks like it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("watch {id} ({state}) cannot be read back: {problem}")]
pub struct FlatError {
    pub id: String,
    pub state: &'static str,
    pub problem: String,
}

impl Watch {
    /// The watch a flat record describes. A reason whose words no typed variant says exactly
    /// is kept as recorded, so it displays unchanged; a live watch's reason is a function of
    /// its phase and is restated.
    pub fn from_flat(f: FlatWatch) -> Result<Watch, FlatError> {
        let fail = |problem: &str| FlatError {
            id: f.id.clone(),
            state: f.state.as_str(),
            problem: problem.to_string(),
        };
        let arm_blocked = f
            .arm_blocked
            .as_deref()
            .map(|text| ArmBlocked::retype(text, &f.app));
        let live = match (f.reached_at, &f.reach) {
            (None, None) => {
                if f.healthy_since.is_some()
                    || f.deadline_passed
                    || f.reported_sync_failure
                    || f.streak_paused_at.is_some()
                    || f.streak_banked_ms != 0
                    || f.streak_pauses != 0
                    || f.streak_unobserved_ms != 0
                {
                    return Err(fail(
                        "healthy_since, deadline_passed or reported_sync_failure is set for a commit that never reached the app",
                    ));
                }
                Live::WaitingReach(Waiting {
                    absent_since: f.app_absent_since,
                })
            }
            (Some(reached_at), Some(reach)) => Live::Judging(Judging {
                reached_at,
                reach: reach.clone(),
                absent_since: f.app_absent_since,
                streak: match (f.healthy_since, f.deadline_passed, f.streak_paused_at) {
                    (None, false, None) => Streak::NotUnderWay,
                    (Some(since), false, None) => Streak::UnderWay { since },
                    (Some(since), true, None) => Streak::UnderWayAtDeadline { since },
                    (None, true, None) => Streak::BrokeAfterDeadline,
                    (None, true, Some(at)) => Streak::PausedAfterDeadline { at },
                    _ => {
                        return Err(fail(
                            "a streak pauses only after the deadline, and a paused streak has no healthy_since",
                        ));
                    }
                },
                reported_sync_failure: f.reported_sync_failure,
                banked_ms: f.streak_banked_ms,
                pauses: f.streak_pauses,
                unobserved_ms: f.streak_unobserved_ms,
            }),
            _ => return Err(fail("reached_at and reach are recorded only together")),
        };
        if f.revert_pending && f.state != State::Fail {
            return Err(fail("only a FAIL has a revert pending"));
        }
        if f.revert_proposal.is_some() && !f.revert_pending {
            return Err(fail("a revert is proposed only while it is pending"));
        }
        let live_state = match &live {
            Live::WaitingReach(_) => State::WaitingReach,
            Live::Judging(_) => State::Judging,
        };
        // The note on a verdict judged on the app-level health is the watch's, not its reason's
        // (`Watch::reason_text`): read back from what the watch saw.
        let reason = f
            .reason
            .strip_suffix(crate::reason::APP_LEVEL_HEALTH)
            .unwrap_or(&f.reason);
        let rec = Recorded {
            deadline_ms: f.deadline_ms,
            app: &f.app,
            arm_blocked: arm_blocked.as_ref(),
            later_commits: &f.later_commits,
            revert_commit: f.revert_commit.as_ref(),
            failed_sync: f.seen.failed_sync.as_ref(),
            commit: &f.commit,
            baseline: &f.baseline,
        };
        let phase = if !f.state.is_terminal() {
            if f.state != live_state {
                return Err(fail(
                    "a watch is JUDGING exactly when it has reached_at and reach",
                ));
            }
            if f.finished_at.is_some() || f.revert_commit.is_some() {
                return Err(fail("a live watch has no finished_at or revert_commit"));
            }
            if f.state == State::Judging && f.last_observed_at.is_none() {
                return Err(fail("a JUDGING watch was observed (last_observed_at)"));
            }
            match live {
                Live::WaitingReach(w) => Phase::WaitingReach(w),
                Live::Judging(j) => Phase::Judging(j),
            }
        } else {
            let Some(at) = f.finished_at else {
                return Err(fail("a verdict has its time (finished_at)"));
            };
            if f.revert_pending {
                let Live::Judging(judged) = live else {
                    return Err(fail(
                        "a revert is pending only for a commit that reached the app",
                    ));
                };
                if f.revert_commit.is_some() {
                    return Err(fail("a pending revert has no revert_commit yet"));
                }
                Phase::Reverting(Reverting {
                    failure: Failure::retype_reverting(reason, &rec),
                    at,
                    judged,
                    proposal: f.revert_proposal.clone(),
                })
            } else {
                Phase::Finished(Finished {
                    verdict: Verdict::retype(f.state, reason, &rec),
                    at,
                    ended: live,
                })
            }
        };
        Ok(Watch {
            phase,
            arm_blocked,
            id: f.id,
            commit: f.commit,
            subject: f.subject,
            app: f.app,
            mode: f.mode,
            dry_run: f.dry_run,
            deadline_ms: f.deadline_ms,
            watch_started_at: f.watch_started_at,
            own_paths: f.own_paths,
            last_observed_at: f.last_observed_at,
            seen: f.seen,
            later_commits: super::LaterCommits::restored(f.later_commits, f.later_filtered_under),
            source_paths: f.source_paths,
            warned_auto_sync_off: f.warned_auto_sync_off,
            baseline: f.baseline,
            inputs: f.inputs,
            expect_running: f.expect_running,
        })
    }

    /// The flat record of this watch, as the state file holds it.
    pub fn to_flat(&self) -> FlatWatch {
        FlatWatch {
            id: self.id.clone(),
            commit: self.commit.clone(),
            subject: self.subject.clone(),
            app: self.app.clone(),
            mode: self.mode,
            dry_run: self.dry_run,
            deadline_ms: self.deadline_ms,
            state: self.state(),
            reason: self.reason_text(),
            watch_started_at: self.watch_started_at,
            reached_at: self.reached_at(),
            healthy_since: self.healthy_since(),
            finished_at: self.finished_at(),
            revert_commit: self.revert_commit().cloned(),
            last_observed_at: self.last_observed_at,
            app_absent_since: self.app_absent_since(),
            reach: self.reach().cloned(),
            own_paths: self.own_paths.clone(),
            later_commits: self.later_commits().to_vec(),
            source_paths: self.source_paths.clone(),
            arm_blocked: self.arm_blocked.as_ref().map(ToString::to_string),
            revert_pending: self.reverting().is_some(),
            deadline_passed: self.deadline_passed(),
            warned_auto_sync_off: self.warned_auto_sync_off,
            reported_sync_failure: self.reported_sync_failure(),
            seen: self.seen.clone(),
            baseline: self.baseline.clone(),
            streak_paused_at: self.streak_paused_at(),
            streak_banked_ms: self.streak_banked_ms(),
            streak_pauses: self.streak_pauses(),
            streak_unobserved_ms: self.streak_unobserved_ms(),
            inputs: self.inputs.clone(),
            revert_proposal: self.proposal().cloned(),
            expect_running: self.expect_running,
            later_filtered_under: self.later_filtered_under().cloned(),
        }
    }
}
