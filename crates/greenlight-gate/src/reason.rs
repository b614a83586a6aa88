//! Every word the promotion gate says: [`GateMessage`]'s `Display` and the one-line summary a
//! kept candidate's commit records. The machine ([`crate::machine`]) decides which message
//! applies and never formats a sentence of its own; nothing here decides anything. The metric
//! analysis keeps its own words beside it ([`crate::analysis::reason`]).

use crate::config::plan::compact_duration as human_duration;
use crate::machine::{Blocked, CancelledDuring, GateMessage, JudgedAs, Left};
use std::fmt;

/// One line saying why the gate blocked: the reason a kept candidate's commit records.
pub fn gate_blocked_summary(b: &Blocked) -> String {
    match b {
        Blocked::CandidateNotReady { pending, .. } if !pending.is_empty() => format!(
            "candidate short of capacity: its pods are Pending ({})",
            pending.join("; ")
        ),
        Blocked::CandidateNotReady { state, reason, .. } => {
            format!("candidate not ready ({state}): {reason}")
        }
        Blocked::CheckFailed {
            index,
            name,
            kind,
            evidence,
        } => format!("check {} {name} ({kind}) failed: {evidence}", index + 1),
        Blocked::CheckUndecided {
            index,
            name,
            kind,
            evidence,
        } => format!("check {} {name} ({kind}) undecided: {evidence}", index + 1),
        Blocked::WatchDeadlineShort {
            configured_ms,
            measured_ms,
            required_ms,
        } => format!(
            "the promotion's watch deadline {} is shorter than the candidate's time to healthy {} plus margin ({})",
            human_duration(*configured_ms),
            human_duration(*measured_ms),
            human_duration(*required_ms)
        ),
        Blocked::PullRequestClosed { url } => {
            format!("the promotion's pull request {url} was closed unmerged")
        }
    }
}

impl fmt::Display for GateMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GateMessage::Started {
                app,
                candidate,
                checks,
            } => write!(
                f,
                "promotion of {candidate} to {app} started: the candidate first, then {checks} check(s) in the written order"
            ),
            GateMessage::NoOp { digest } => write!(
                f,
                "no-op: the candidate is already live ({digest}); nothing committed, nothing notified (if every run says this, the pipeline is proposing the live image: give it the digest its build produced)"
            ),
            GateMessage::SuspiciousNoOp { live_image, digest } => write!(
                f,
                "suspicious no-op: the live manifest names {live_image}, a mutable tag that now resolves to the candidate's digest {digest}; the pods may still run older content (a tag does not roll pods out): pin the live manifest by digest"
            ),
            GateMessage::CandidateCommitted { commit } => write!(
                f,
                "candidate committed in {commit}: waiting for it to reach its Application, become healthy and stay healthy"
            ),
            GateMessage::CandidateReady => {
                f.write_str("candidate ready: reached, healthy and stable; the checks run now")
            }
            GateMessage::CheckPassed {
                index,
                name,
                kind,
                evidence,
            } => write!(f, "check {} {name} ({kind}) passed: {evidence}", index + 1),
            GateMessage::CheckSkipped { index, name, why } => write!(
                f,
                "check {} {name} skipped by design: {why} (neither a pass nor a failure)",
                index + 1
            ),
            GateMessage::Blocked(b) => match b {
                Blocked::CandidateNotReady { pending, .. } if !pending.is_empty() => write!(
                    f,
                    "candidate short of capacity, promotion blocked: its pods are Pending ({}); free or add capacity for the candidate's replicas (GPUs included), or lower the candidate's replicas",
                    pending.join("; ")
                ),
                Blocked::CandidateNotReady { state, reason, .. } => write!(
                    f,
                    "candidate not ready ({state}), promotion blocked: {reason}"
                ),
                Blocked::CheckFailed {
                    index,
                    name,
                    kind,
                    evidence,
                } => write!(
                    f,
                    "check {} {name} ({kind}) failed, promotion blocked: {evidence}",
                    index + 1
                ),
                Blocked::CheckUndecided {
                    index,
                    name,
                    kind,
                    evidence,
                } => write!(
                    f,
                    "check {} {name} ({kind}) undecided, promotion blocked: {evidence} (an undecided check is not a pass)",
                    index + 1
                ),
                Blocked::WatchDeadlineShort {
                    configured_ms,
                    measured_ms,
                    required_ms,
                } => write!(
                    f,
                    "watch deadline too short, promotion blocked: every check passed, but the candidate took {} to become healthy and promotion.watch.deadline is {}: the watchdog would judge the live rollout before it could be healthy; set it to at least {} (or `shortDeadline: raise`)",
                    human_duration(*measured_ms),
                    human_duration(*configured_ms),
                    human_duration(*required_ms)
                ),
                Blocked::PullRequestClosed { url } => write!(
                    f,
                    "pull request closed unmerged, promotion blocked: {url} was closed without a merge; nothing promoted"
                ),
            },
            GateMessage::Proposed {
                app,
                candidate,
                url,
                bypass: None,
            } => write!(
                f,
                "proposed {candidate} to {app} in pull request {url}: the gate verified it; nothing is live until it merges"
            ),
            GateMessage::Proposed {
                app,
                candidate,
                url,
                bypass: Some(reason),
            } => write!(
                f,
                "BYPASSED, NO CHECK RAN: {candidate} proposed to {app} in pull request {url} without the gate ({reason}); nothing is live until it merges"
            ),
            GateMessage::Aborted { commit } => write!(
                f,
                "aborted: the live manifest changed in git since the run started ({commit}); nothing promoted, run again"
            ),
            GateMessage::Promoted {
                app,
                candidate,
                commit,
            } => write!(
                f,
                "promoted {candidate} to {app} in {commit}: the gate verified it; the watchdog now proves the live rollout"
            ),
            GateMessage::BypassRequested { reason } => write!(
                f,
                "GATE BYPASSED on request ({reason}): no candidate, no check runs"
            ),
            GateMessage::NoOpAfterBypass {
                digest,
                commit,
                reason,
            } => write!(
                f,
                "no-op on a bypassed image: the candidate is already live ({digest}), but a GATE BYPASS put it there in {commit} ({reason}) and no check ever ran on it; nothing committed. The gate promotes only a new digest: to check this one, run its checks by hand against the live workload, or gate the next build"
            ),
            GateMessage::LiveWasBypassed { commit, reason } => write!(
                f,
                "note, live came in by a GATE BYPASS in {commit} ({reason}): no check ever ran on what is live; this run checks the candidate only"
            ),
            GateMessage::KeptCandidatesExpired { expired } => {
                let oldest = expired
                    .iter()
                    .map(|e| e.until.as_str())
                    .min()
                    .unwrap_or_default();
                let paths: Vec<&str> = expired.iter().map(|e| e.path.as_str()).collect();
                write!(
                    f,
                    "warning, kept candidates pile up: {} candidate(s) past their retention are still in git and deployed (the oldest kept until {oldest}: {}); only `greenlight promote gc --config …` removes them: run it on a schedule (a CI schedule or a CronJob)",
                    expired.len(),
                    paths.join(", ")
                )
            }
            GateMessage::Bypassed {
                app,
                candidate,
                commit,
                reason,
            } => write!(
                f,
                "BYPASSED, NO CHECK RAN: {candidate} promoted to {app} in {commit} without the gate ({reason})"
            ),
            GateMessage::CandidateKept => f.write_str(
                "candidate kept for the retention window: recorded in git; `greenlight promote gc` removes it once expired",
            ),
            GateMessage::WatchDeadlineRaised {
                configured_ms,
                measured_ms,
                raised_ms,
            } => write!(
                f,
                "watch deadline raised to {} for the promotion: the candidate took {} to become healthy, and promotion.watch.deadline {} would let the watchdog judge the live rollout before it could be healthy",
                human_duration(*raised_ms),
                human_duration(*measured_ms),
                human_duration(*configured_ms)
            ),
            GateMessage::Cancelled { signal, during } => write!(
                f,
                "cancelled by {} {}: its processes are stopped; nothing is promoted",
                signal.name(),
                during_words(during)
            ),
            GateMessage::CancelSettled { signal, left } => write!(
                f,
                "CANCELLED by {}, nothing promoted: {}",
                signal.name(),
                match left {
                    Left::Nothing => "nothing of the run is in git (no candidate, no lock)",
                    Left::Removed =>
                        "the candidate had no verdict yet and is removed from git with the run's lock (its Application prunes it)",
                    Left::Kept =>
                        "the candidate stays deployed, kept in git for the retention window like a blocked one (`greenlight promote gc` removes it once expired); the run's lock is released",
                }
            ),
            GateMessage::SelfTestBlocked => f.write_str(
                "self-test passed: the gate blocked the deliberately failing candidate",
            ),
            GateMessage::SelfTestLetThrough => f.write_str(
                "self-test FAILED: the gate let a deliberately failing candidate through (nothing was promoted); fix the checks before trusting the gate",
            ),
        }
    }
}

impl fmt::Display for JudgedAs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JudgedAs::Verdict(state) => f.write_str(state.as_str()),
            JudgedAs::TrailerRejected => f.write_str("its watch trailer was rejected"),
            JudgedAs::NoVerdict => f.write_str("no verdict"),
        }
    }
}

/// Where a cancelled run was, in words (also the `Greenlight-Gate` trailer's).
pub fn during(d: &CancelledDuring) -> String {
    during_words(d)
}

fn during_words(d: &CancelledDuring) -> String {
    match d {
        CancelledDuring::Start => "before the candidate was committed".to_string(),
        CancelledDuring::Judging => "while the candidate was judged".to_string(),
        CancelledDuring::Check { index, name } => {
            format!("during check {} {name}", index + 1)
        }
    }
}
