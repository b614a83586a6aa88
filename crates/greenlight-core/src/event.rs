//! The event catalogue: every transition of a watch, and of the breaker, is one event with
//! one wording. The daemon prints each as a human line or a JSON object and stores it; nothing
//! else in the product invents its own wording for an outcome.

use crate::state::State;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    WatchStarted,
    DirectiveRejected,
    Resumed,
    AppNotFound,
    ArmDowngraded,
    AutoSyncOff,
    ComparisonError,
    Reached,
    SyncFailed,
    HealthyStreakStarted,
    HealthyStreakBroken,
    HealthyStreakPaused,
    HealthyStreakResumed,
    DeadlinePassedStreakUnderWay,
    Confirmed,
    Failed,
    Attribution,
    ChangedOutside,
    RevertedByHuman,
    RevertPushed,
    RevertAdopted,
    /// The revert is proposed as a pull request; the watch waits for it to merge.
    RevertProposed,
    /// The revert's pull request merged.
    RevertMerged,
    /// Newer commits changed the app while the revert's pull request was open: it is closed.
    RevertWithdrawing,
    RevertFailed,
    NotReached,
    Unwatchable,
    Inconclusive,
    BreakerOpened,
    BreakerBlocked,
    BreakerReset,
    /// A promotion run ended; its [`Outcome`] says how.
    GateEnded,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::WatchStarted => "watch_started",
            EventKind::DirectiveRejected => "directive_rejected",
            EventKind::Resumed => "resumed",
            EventKind::AppNotFound => "app_not_found",
            EventKind::ArmDowngraded => "arm_downgraded",
            EventKind::AutoSyncOff => "auto_sync_off",
            EventKind::ComparisonError => "comparison_error",
            EventKind::Reached => "reached",
            EventKind::SyncFailed => "sync_failed",
            EventKind::HealthyStreakStarted => "healthy_streak_started",
            EventKind::HealthyStreakBroken => "healthy_streak_broken",
            EventKind::HealthyStreakPaused => "healthy_streak_paused",
            EventKind::HealthyStreakResumed => "healthy_streak_resumed",
            EventKind::DeadlinePassedStreakUnderWay => "deadline_passed_streak_under_way",
            EventKind::Confirmed => "confirmed",
            EventKind::Failed => "failed",
            EventKind::Attribution => "attribution",
            EventKind::ChangedOutside => "changed_outside",
            EventKind::RevertedByHuman => "reverted_by_human",
            EventKind::RevertPushed => "revert_pushed",
            EventKind::RevertAdopted => "revert_adopted",
            EventKind::RevertProposed => "revert_proposed",
            EventKind::RevertMerged => "revert_merged",
            EventKind::RevertWithdrawing => "revert_withdrawing",
            EventKind::RevertFailed => "revert_failed",
            EventKind::NotReached => "not_reached",
            EventKind::Unwatchable => "unwatchable",
            EventKind::Inconclusive => "inconclusive",
            EventKind::BreakerOpened => "breaker_opened",
            EventKind::BreakerBlocked => "breaker_blocked",
            EventKind::BreakerReset => "breaker_reset",
            EventKind::GateEnded => "gate_ended",
        }
    }

    /// The kinds that give a watch its final verdict (a revert's end included): only these
    /// carry the watch's [`Outcome`].
    pub fn gives_a_verdict(self) -> bool {
        matches!(
            self,
            EventKind::Confirmed
                | EventKind::Failed
                | EventKind::Attribution
                | EventKind::ChangedOutside
                | EventKind::RevertedByHuman
                | EventKind::RevertPushed
                | EventKind::RevertAdopted
                | EventKind::RevertMerged
                | EventKind::RevertFailed
                | EventKind::NotReached
                | EventKind::Unwatchable
                | EventKind::Inconclusive
        )
    }

    /// `warn` for what an operator should look at (the human line's `!` and the breaker),
    /// `info` for the ordinary course of a watch.
    pub fn level(self) -> &'static str {
        match self.marker() {
            "   !" | "BRKR" => "warn",
            _ => match self {
                EventKind::AutoSyncOff
                | EventKind::ArmDowngraded
                | EventKind::AppNotFound
                | EventKind::RevertProposed
                | EventKind::RevertWithdrawing => "warn",
                _ => "info",
            },
        }
    }

    /// A short marker for the human line, so outcomes can be told apart at a glance.
    fn marker(self) -> &'static str {
        match self {
            EventKind::WatchStarted | EventKind::Resumed => "watch",
            EventKind::Reached => "  ->",
            EventKind::HealthyStreakStarted | EventKind::HealthyStreakResumed => "   +",
            EventKind::Confirmed => "  OK",
            EventKind::RevertPushed | EventKind::RevertAdopted | EventKind::RevertMerged => "  <-",
            EventKind::RevertProposed | EventKind::RevertWithdrawing => "  ?-",
            EventKind::Failed
            | EventKind::Attribution
            | EventKind::ChangedOutside
            | EventKind::RevertedByHuman
            | EventKind::NotReached
            | EventKind::Unwatchable
            | EventKind::Inconclusive
            | EventKind::RevertFailed
            | EventKind::ComparisonError
            | EventKind::DirectiveRejected => "   !",
            EventKind::BreakerOpened | EventKind::BreakerBlocked | EventKind::BreakerReset => {
                "BRKR"
            }
            EventKind::GateEnded => "gate",
            _ => "   ~",
        }
    }
}

/// What greenlight saw of the app when the event happened.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub health: Option<String>,
    pub sync: Option<String>,
    pub revision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub unhealthy_resources: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_health_source: Option<String>,
    /// Chronic conditions left out as in the baseline (`docs/verdicts.md#evidence`).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub left_out: Vec<String>,
}

impl Evidence {
    pub fn is_empty(&self) -> bool {
        self.health.is_none() && self.sync.is_none() && self.revision.is_none()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub time: Timestamp,
    pub event: EventKind,
    pub commit: Option<String>,
    pub app: Option<String>,
    pub state: Option<State>,
    pub message: String,
    pub evidence: Evidence,
    /// What the event ends with, for the people told about it: set on the event that gives a
    /// watch its final verdict, on a breaker that opens, and on a promotion run's end
    /// (`docs/notifications.md`); `None` on every step on the way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// With an outcome: the verdict's whole words (what failed, why nothing was or what was
    /// reverted), where the event's own message tells only its step ("revert … pushed").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// An outcome as notifications name it: each has one title, distinct at a glance from every
/// other (`docs/notifications.md#titles`). The watch's come from its verdict
/// ([`Outcome::of_verdict`]); the promotion gate's from how its run ended; the breaker's when
/// it opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// `CONFIRMED`: reached, healthy, stayed healthy.
    Passed,
    /// A shadow watch's `FAIL` with the evidence a revert needs: armed, it would have reverted.
    WouldHaveRevertedShadow,
    /// The same under dry-run.
    WouldHaveRevertedDryRun,
    /// `FAIL` that nothing reverts: evidence missing, the breaker open, arm withheld, the app
    /// suspended.
    FailedNotReverted,
    /// `FAIL` that is not this commit's alone: later commits, or inputs outside the watched
    /// repository, changed the app under the watch.
    NotAttributable,
    /// `REVERTED`: greenlight's revert landed.
    Reverted,
    /// An armed watch's revert is proposed as a pull request that has not merged: the commit is
    /// still in git.
    RevertProposed,
    /// A human reverted the commit before a verdict.
    RevertedByHuman,
    /// `REVERT_FAILED`.
    RevertFailed,
    NotReached,
    Unwatchable,
    Inconclusive,
    /// The breaker opened: no more reverts until a human resets it.
    BreakerOpened,
    /// The gate promoted a candidate that passed its checks.
    Promoted,
    /// A human bypassed the gate's checks: promoted (or proposed) without them.
    Bypassed,
    /// The gate passed and a pull request proposes the promotion: nothing is live until it
    /// merges.
    Proposed,
    /// The gate refused the candidate.
    Blocked,
    /// Nothing to promote: the candidate is what runs. Never notified.
    NoOp,
    /// Nothing changed in git, but the live manifest names a mutable tag that now resolves to
    /// the candidate's digest: the pods may run older content.
    NoOpOnMutableTag,
    /// The live manifest changed in git while the run went on.
    Aborted,
    /// A signal stopped the run.
    Cancelled,
    /// The self-test's failing candidate was blocked, as it should be.
    SelfTestPassed,
    /// The self-test's failing candidate would have been promoted: the gate is broken.
    SelfTestLetThrough,
}

impl Outcome {
    /// Every outcome, for the catalogue's tests and docs.
    pub const ALL: [Outcome; 23] = [
        Outcome::Passed,
        Outcome::WouldHaveRevertedShadow,
        Outcome::WouldHaveRevertedDryRun,
        Outcome::FailedNotReverted,
        Outcome::NotAttributable,
        Outcome::Reverted,
        Outcome::RevertProposed,
        Outcome::RevertedByHuman,
        Outcome::RevertFailed,
        Outcome::NotReached,
        Outcome::Unwatchable,
        Outcome::Inconclusive,
        Outcome::BreakerOpened,
        Outcome::Promoted,
        Outcome::Bypassed,
        Outcome::Proposed,
        Outcome::Blocked,
        Outcome::NoOp,
        Outcome::NoOpOnMutableTag,
        Outcome::Aborted,
        Outcome::Cancelled,
        Outcome::SelfTestPassed,
        Outcome::SelfTestLetThrough,
    ];

    /// The name in config (`outcomes = [...]`) and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::WouldHaveRevertedShadow => "would_have_reverted_shadow",
            Outcome::WouldHaveRevertedDryRun => "would_have_reverted_dry_run",
            Outcome::FailedNotReverted => "failed_not_reverted",
            Outcome::NotAttributable => "not_attributable",
            Outcome::Reverted => "reverted",
            Outcome::RevertProposed => "revert_proposed",
            Outcome::RevertedByHuman => "reverted_by_human",
            Outcome::RevertFailed => "revert_failed",
            Outcome::NotReached => "not_reached",
            Outcome::Unwatchable => "unwatchable",
            Outcome::Inconclusive => "inconclusive",
            Outcome::BreakerOpened => "breaker_opened",
            Outcome::Promoted => "promoted",
            Outcome::Bypassed => "bypassed",
            Outcome::Proposed => "proposed",
            Outcome::Blocked => "blocked",
            Outcome::NoOp => "no_op",
            Outcome::NoOpOnMutableTag => "no_op_on_mutable_tag",
            Outcome::Aborted => "aborted",
            Outcome::Cancelled => "cancelled",
            Outcome::SelfTestPassed => "self_test_passed",
            Outcome::SelfTestLetThrough => "self_test_let_through",
        }
    }

    pub fn parse(s: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// The title a notification leads with. Each starts with a word no other title starts
    /// with (but the two "would have reverted", told apart by shadow or dry-run); what went
    /// around a check says so in capitals (`BYPASSED`), what failed says whether anything was
    /// undone, and a skipped check is never called a failure.
    pub fn title(self) -> &'static str {
        match self {
            Outcome::Passed => "passed: live and stayed healthy",
            Outcome::WouldHaveRevertedShadow => {
                "would have reverted (shadow): failed, nothing undone"
            }
            Outcome::WouldHaveRevertedDryRun => {
                "would have reverted (dry-run): failed, nothing undone"
            }
            Outcome::FailedNotReverted => "FAILED, not reverted",
            Outcome::NotAttributable => "unattributable: other changes came with it, not reverted",
            Outcome::Reverted => "reverted: the commit is undone in git",
            Outcome::RevertProposed => {
                "pending revert: its pull request awaits a merge, the commit is still in git"
            }
            Outcome::RevertedByHuman => "undone by a human before a verdict",
            Outcome::RevertFailed => "REVERT FAILED: the failed commit is still in git",
            Outcome::NotReached => "not reached: never deployed by the deadline",
            Outcome::Unwatchable => "unwatchable: greenlight cannot judge this app",
            Outcome::Inconclusive => "inconclusive: greenlight could not see enough to judge",
            Outcome::BreakerOpened => "BREAKER OPEN: reverts stopped until a human resets it",
            Outcome::Promoted => "promoted: every check passed",
            Outcome::Bypassed => "BYPASSED: the checks did not run",
            Outcome::Proposed => "proposed: a pull request awaits its merge",
            Outcome::Blocked => "blocked: not promoted",
            Outcome::NoOp => "no-op: nothing to promote",
            Outcome::NoOpOnMutableTag => "unverified no-op: a mutable tag moved",
            Outcome::Aborted => "aborted: the live manifest changed during the run",
            Outcome::Cancelled => "cancelled: stopped by a signal, nothing promoted",
            Outcome::SelfTestPassed => "self-test passed: the gate blocked the failing candidate",
            Outcome::SelfTestLetThrough => {
                "GATE BROKEN: the self-test's failing candidate got through"
            }
        }
    }

    /// Whether notifications send it: everything but a no-op, which would flood a channel
    /// with runs that changed nothing.
    pub fn notifies(self) -> bool {
        self != Outcome::NoOp
    }

    /// `warn` for what a human should look at, `info` for the rest (the JSON body's `level`).
    pub fn level(self) -> &'static str {
        match self {
            Outcome::Passed
            | Outcome::Promoted
            | Outcome::Proposed
            | Outcome::NoOp
            | Outcome::SelfTestPassed
            | Outcome::Reverted => "info",
            _ => "warn",
        }
    }

    /// A watch's outcome from its final verdict.
    pub fn of_verdict(v: &crate::reason::Verdict) -> Outcome {
        use crate::reason::{NoRevert, Verdict};
        match v {
            Verdict::Confirmed { .. } => Outcome::Passed,
            Verdict::Failed {
                not_reverted: NoRevert::Shadow,
                ..
            } => Outcome::WouldHaveRevertedShadow,
            Verdict::Failed {
                not_reverted: NoRevert::DryRun,
                ..
            } => Outcome::WouldHaveRevertedDryRun,
            Verdict::Failed { .. } | Verdict::Suspended { .. } | Verdict::NotRunning { .. } => {
                Outcome::FailedNotReverted
            }
            Verdict::Attribution { .. } | Verdict::ChangedOutside { .. } => {
                Outcome::NotAttributable
            }
            Verdict::RevertedByHuman { .. } => Outcome::RevertedByHuman,
            Verdict::Reverted { .. } => Outcome::Reverted,
            Verdict::RevertFailed { .. } => Outcome::RevertFailed,
            Verdict::NotReached(_) => Outcome::NotReached,
            Verdict::Unwatchable(_) => Outcome::Unwatchable,
            Verdict::Inconclusive(_) => Outcome::Inconclusive,
            Verdict::Recorded { state, .. } => match state {
                State::Confirmed => Outcome::Passed,
                State::Reverted => Outcome::Reverted,
                State::RevertFailed => Outcome::RevertFailed,
                State::NotReached => Outcome::NotReached,
                State::ErrorUnwatchable => Outcome::Unwatchable,
                State::Inconclusive => Outcome::Inconclusive,
                State::Fail | State::WaitingReach | State::Judging => Outcome::FailedNotReverted,
            },
        }
    }
}

impl Event {
    /// One human-readable line: time, marker, short commit, app, words.
    pub fn human_line(&self) -> String {
        let mut line = format!("{} {}", self.time.rfc3339(), self.event.marker());
        if let Some(c) = &self.commit {
            line.push(' ');
            line.push_str(&c[..c.len().min(8)]);
        }
        if let Some(a) = &self.app {
            line.push_str(" app=");
            line.push_str(a);
        }
        line.push(' ');
        line.push_str(&self.message);
        if let Some(s) = self.state {
            line.push_str(" [");
            line.push_str(s.as_str());
            line.push(']');
        }
        line
    }

    /// One JSON object: `time` (RFC 3339 UTC), `level` (`info` or `warn`), `event`, `commit`,
    /// `app`, `state`, `message`, `evidence` {health, sync, revision, …}, and `outcome` on the
    /// events that carry one.
    pub fn json_line(&self) -> String {
        let level = match (self.event, self.outcome) {
            (EventKind::GateEnded, Some(o)) => o.level(),
            _ => self.event.level(),
        };
        let mut line = serde_json::json!({
            "time": self.time.rfc3339(),
            "level": level,
            "event": self.event.as_str(),
            "commit": self.commit,
            "app": self.app,
            "state": self.state.map(State::as_str),
            "message": self.message,
            "evidence": self.evidence,
        });
        if let (Some(o), Some(obj)) = (self.outcome, line.as_object_mut()) {
            obj.insert("outcome".into(), o.as_str().into());
        }
        line.to_string()
    }
}
