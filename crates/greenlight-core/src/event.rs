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
    RevertFailed,
    NotReached,
    Unwatchable,
    Inconclusive,
    BreakerOpened,
    BreakerBlocked,
    BreakerReset,
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
            EventKind::RevertFailed => "revert_failed",
            EventKind::NotReached => "not_reached",
            EventKind::Unwatchable => "unwatchable",
            EventKind::Inconclusive => "inconclusive",
            EventKind::BreakerOpened => "breaker_opened",
            EventKind::BreakerBlocked => "breaker_blocked",
            EventKind::BreakerReset => "breaker_reset",
        }
    }

    /// `warn` for what an operator should look at (the human line's `!` and the breaker),
    /// `info` for the ordinary course of a watch.
    pub fn level(self) -> &'static str {
        match self.marker() {
            "   !" | "BRKR" => "warn",
            _ => match self {
                EventKind::AutoSyncOff | EventKind::ArmDowngraded | EventKind::AppNotFound => {
                    "warn"
                }
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
            EventKind::RevertPushed | EventKind::RevertAdopted => "  <-",
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
    /// `app`, `state`, `message`, `evidence` {health, sync, revision, …}.
    pub fn json_line(&self) -> String {
        serde_json::json!({
            "time": self.time.rfc3339(),
            "level": self.event.level(),
            "event": self.event.as_str(),
            "commit": self.commit,
            "app": self.app,
            "state": self.state.map(State::as_str),
            "message": self.message,
            "evidence": self.evidence,
        })
        .to_string()
    }
}
