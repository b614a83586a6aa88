//! What one watch's judge consumed, step by step, so that its verdict can be replayed
//! (`docs/why.md`): the watch as the judge built it, every input that reached it (observations
//! of its app as the judge's reduced snapshots, ancestry answers, the passage of time, commits
//! that arrived, verify's answers, the revert executor's reports, restarts) and every fact from
//! outside the watch the judge consulted while judging it (the batch of a baseline it worked out
//! from the commits that arrived, whether the breaker let a revert through). A fresh judge fed
//! the steps in order decides as the recorded one did — or says where it parts from it.
//!
//! The tape is bounded per watch: at most [`TAPE_STEPS`] steps and [`TAPE_SNAPSHOT_BYTES`] of
//! snapshots; an observation showing what the previous one showed records only its time, one
//! that changed a few fields only those (a JSON merge patch, [`Shown::Changed`]). A
//! watch whose inputs outgrow the bound keeps the steps up to there and a last [`Step::Full`]:
//! its verdict is not replayed (the judge would be fed part of the story).

use crate::commit::{CommitId, Paths};
use crate::judge::{JudgeConfig, Verification};
use crate::snapshot::AppSnapshot;
use crate::time::Timestamp;
use crate::watch::{BeforeSeen, FlatWatch, LaterCommit, RevertOutcome, RevertProposal};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The most steps one watch's tape keeps.
pub const TAPE_STEPS: usize = 4096;

/// The most bytes of snapshot JSON one watch's tape keeps.
pub const TAPE_SNAPSHOT_BYTES: usize = 512 * 1024;

/// One thing the judge of a watch consumed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// The watch as the judge built it when it started (or re-opened), with the settings it
    /// judged with.
    Start {
        at: Timestamp,
        config: Box<JudgeConfig>,
        watch: Box<FlatWatch>,
    },
    /// An observation of the app (present or absent), with the ancestry answers given with it.
    Observed {
        at: Timestamp,
        /// The source said it lost updates since its previous delivery.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        gap: bool,
        app: Shown,
        /// `None`: the same answers as the previous observation's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ancestry: Option<Vec<Answer>>,
        /// The namespaces a bare app name was seen in, when more than one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ambiguous: Option<Vec<String>>,
    },
    /// Time passed (a tick).
    Time { at: Timestamp },
    /// The app's change stream vouched that nothing changed up to `at`.
    Vouched { at: Timestamp },
    /// A commit arrived on the branch (what time alone decides by then is decided first).
    Arrived {
        at: Timestamp,
        sha: CommitId,
        changed_paths: Paths,
        /// A merge that brings the watched commit itself (no later change to it).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        brings_it: bool,
        /// It reverts the watched commit: `Some(true)` when greenlight made that revert.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reverts_it: Option<bool>,
    },
    /// Verify answered the ask the watch waited for.
    Verified { at: Timestamp, answer: Verification },
    /// The revert executor reported.
    RevertFinished {
        at: Timestamp,
        outcome: Box<RevertOutcome>,
    },
    /// Another watch of the same commit opened the pull request this one waits for.
    Proposed {
        at: Timestamp,
        proposal: Box<RevertProposal>,
    },
    /// The revert's pull request ended (merged, adopted, closed).
    ProposalEnded {
        at: Timestamp,
        outcome: Box<RevertOutcome>,
    },
    /// A newer commit changed the app while the revert's pull request was open.
    ProposalSuperseded { at: Timestamp, by: LaterCommit },
    /// The shared pull request is withdrawn for another watch's reason.
    ProposalWithdrawnFor { at: Timestamp, why: String },
    /// greenlight started again (a restart, a new leader), with these settings.
    Resumed {
        at: Timestamp,
        config: Box<JudgeConfig>,
    },
    /// A fact: the baseline an observation before the sync gave, batch and all, as the judge
    /// worked it out from the commits that had arrived.
    Baseline { before: Box<BeforeSeen> },
    /// A fact: what the revert of a FAIL met.
    RevertGate { gate: RevertGate },
    /// The tape reached its bound here: nothing after is recorded.
    Full { at: Timestamp },
}

impl Step {
    /// A fact the judge consulted while it judged, rather than an input fed to it.
    pub fn is_fact(&self) -> bool {
        matches!(self, Step::Baseline { .. } | Step::RevertGate { .. })
    }

    /// When it happened (a fact: never; it belongs to the input before it).
    pub fn at(&self) -> Option<Timestamp> {
        match self {
            Step::Start { at, .. }
            | Step::Observed { at, .. }
            | Step::Time { at }
            | Step::Vouched { at }
            | Step::Arrived { at, .. }
            | Step::Verified { at, .. }
            | Step::RevertFinished { at, .. }
            | Step::Proposed { at, .. }
            | Step::ProposalEnded { at, .. }
            | Step::ProposalSuperseded { at, .. }
            | Step::ProposalWithdrawnFor { at, .. }
            | Step::Resumed { at, .. }
            | Step::Full { at } => Some(*at),
            Step::Baseline { .. } | Step::RevertGate { .. } => None,
        }
    }
}

/// What an observation showed of the app.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shown {
    /// Shared by every watch of the app the same observation reached.
    Present(Arc<AppSnapshot>),
    /// The previous observation's snapshot with these changes, as a JSON merge patch (RFC
    /// 7386: an object's keys replace or, `null`, remove; anything else replaces whole).
    Changed(serde_json::Value),
    /// The same snapshot as the previous observation.
    Same,
    Absent,
}

/// The JSON merge patch that turns `from` into `to` ([`Shown::Changed`]).
pub fn merge_diff(from: &serde_json::Value, to: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            let mut patch = serde_json::Map::new();
            for (k, v) in b {
                match a.get(k) {
                    Some(old) if old == v => {}
                    // (A field that became null is removed: an absent optional field reads
                    // back as the `None` it was.)
                    Some(old) if old.is_object() && v.is_object() => {
                        patch.insert(k.clone(), merge_diff(old, v));
                    }
                    _ => {
                        patch.insert(k.clone(), v.clone());
                    }
                }
            }
            for k in a.keys() {
                if !b.contains_key(k) {
                    patch.insert(k.clone(), Value::Null);
                }
            }
            Value::Object(patch)
        }
        _ => to.clone(),
    }
}

/// `patch` applied to `target` (RFC 7386).
pub fn merge_apply(target: &mut serde_json::Value, patch: &serde_json::Value) {
    use serde_json::Value;
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_apply(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// One ancestry answer: whether `revision` contains `commit`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Answer {
    pub commit: String,
    pub revision: String,
    pub contains: bool,
}

/// What the revert of a FAIL met outside the watch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RevertGate {
    /// The breaker was open and this revert would have been a new one.
    BreakerOpen,
    /// The same commit's revert was already proposed as this pull request (another app's).
    Join(Box<RevertProposal>),
    /// The revert was requested; `known_tip` is the newest commit the judge had heard of.
    Request { known_tip: Option<CommitId> },
}

/// The tape of one watch as the judge keeps it while recording: the steps the store has not
/// taken yet, and what bounds the rest.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    /// Steps recorded so far, the taken ones included (the next step's sequence number).
    pub count: usize,
    /// Bytes of snapshot JSON recorded so far.
    pub snapshot_bytes: usize,
    /// The bound was reached: nothing more is recorded.
    pub full: bool,
    /// Steps the store has not taken.
    pub unsaved: Vec<Step>,
    /// The last snapshot and answers recorded (an observation that repeats them records less).
    pub(crate) last_snapshot: Option<Arc<AppSnapshot>>,
    pub(crate) last_answers: Option<Vec<Answer>>,
}

impl Recording {
    /// Where a restart resumes a stored tape of `count` steps and `snapshot_bytes`, `full` when
    /// its last step is [`Step::Full`].
    pub fn resumed(count: usize, snapshot_bytes: usize, full: bool) -> Recording {
        Recording {
            count,
            snapshot_bytes,
            full,
            ..Recording::default()
        }
    }

    pub(crate) fn push(&mut self, step: Step) {
        if self.full {
            return;
        }
        let bytes = shown_bytes(&step);
        if self.count + 1 >= TAPE_STEPS || self.snapshot_bytes + bytes > TAPE_SNAPSHOT_BYTES {
            let at = step.at().unwrap_or(Timestamp(0));
            self.unsaved.push(Step::Full { at });
            self.count += 1;
            self.full = true;
            return;
        }
        self.snapshot_bytes += bytes;
        self.unsaved.push(step);
        self.count += 1;
    }
}

/// The bytes of snapshot JSON a step holds.
fn shown_bytes(step: &Step) -> usize {
    match step {
        Step::Observed {
            app: Shown::Present(s),
            ..
        } => serde_json::to_string(s).map_or(0, |t| t.len()),
        Step::Observed {
            app: Shown::Changed(p),
            ..
        } => serde_json::to_string(p).map_or(0, |t| t.len()),
        _ => 0,
    }
}

/// The bytes of snapshot JSON a watch's tape holds (where a restart resumes its bound).
pub fn snapshot_bytes(steps: &[Step]) -> usize {
    steps.iter().map(shown_bytes).sum()
}
