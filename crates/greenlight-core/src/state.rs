//! A watch's state: what `status`, the state file and every event report about it. Its own
//! module, so that the event catalogue and the watch's phases both read it without reading
//! each other.

use serde::{Deserialize, Serialize};

/// What `status`, the state file and every event report about a watch.
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
    /// A verdict was reached (a FAIL whose revert is pending included).
    pub fn is_terminal(self) -> bool {
        !matches!(self, State::WaitingReach | State::Judging)
    }
}
