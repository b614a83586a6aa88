//! The shadow track record: each finished watch is an outcome, and what people did in git in
//! the day after it is the ground truth (`docs/record.md`). A verdict that would have reverted
//! agrees with the human who reverted the commit, is half-right when they fixed it forward (a
//! later commit to the app's paths), and was likely a false alarm when nobody touched the app
//! and it is healthy now. A confirmation a human reverted anyway is a miss. Pure: the store
//! hands over the retained watches, the commits that arrived (each with when greenlight saw
//! it) and each app's health as last seen; what retention prunes is counted first into a
//! summary that outlives it.

use crate::commit::CommitId;
use crate::directive::Mode;
use crate::event::Outcome;
use crate::judge::{Arrived, Watch};
use crate::paths::touches;
use crate::time::{Timestamp, human_duration};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How long after a verdict what people do in git is read as their answer to it.
pub const WINDOW_MS: i64 = 24 * 3_600_000;

/// How many decided shadow verdicts, with no miss and no false alarm, make enough to arm.
pub const DEFAULT_MIN_SAMPLES: u64 = 10;

/// What people did after one verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Truth {
    /// The window is still open and nothing decisive happened yet.
    Pending,
    /// A commit that reverts the watched commit arrived within the window.
    Reverted { by: CommitId },
    /// A later commit changed the app's paths within the window (and none reverted it).
    FixedForward { by: CommitId },
    /// Nothing in the window; `healthy`: the app as last seen (`None`: not known).
    Quiet { healthy: Option<bool> },
}

/// One app's counts. Every field is a count of finished watches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Tally {
    /// Every finished watch, armed or not.
    pub verdicts: u64,
    /// Of them, shadow or dry-run: nothing was reverted whatever the verdict.
    pub shadow: u64,
    /// Shadow verdicts that would have reverted (`FAIL` with the evidence a revert needs).
    pub would_revert: u64,
    /// … and a human reverted the commit within the window.
    pub agreed: u64,
    /// … and a human fixed it forward instead.
    pub fixed_forward: u64,
    /// … and nobody touched the app, which is healthy: likely a false alarm.
    pub false_alarms: u64,
    /// … and nobody touched the app, which is not (known to be) healthy.
    pub unresolved: u64,
    /// `CONFIRMED` (shadow or armed).
    pub confirmed: u64,
    /// … and a human reverted the commit anyway within the window: a miss.
    pub misses: u64,
    /// Would-have-reverted verdicts whose window is still open.
    pub pending_would_revert: u64,
    /// Confirmed verdicts whose window is still open.
    pub pending_confirmed: u64,
    pub inconclusive: u64,
    pub not_reached: u64,
    /// Armed: greenlight's revert landed.
    pub reverted: u64,
    /// … and a human reverted greenlight's revert within the window: overruled.
    pub overruled: u64,
    /// Any other verdict (failed without evidence, unattributable, unwatchable, …).
    pub other: u64,
}

impl Tally {
    pub fn add(&mut self, o: &Tally) {
        self.verdicts += o.verdicts;
        self.shadow += o.shadow;
        self.would_revert += o.would_revert;
        self.agreed += o.agreed;
        self.fixed_forward += o.fixed_forward;
        self.false_alarms += o.false_alarms;
        self.unresolved += o.unresolved;
        self.confirmed += o.confirmed;
        self.misses += o.misses;
        self.pending_would_revert += o.pending_would_revert;
        self.pending_confirmed += o.pending_confirmed;
        self.inconclusive += o.inconclusive;
        self.not_reached += o.not_reached;
        self.reverted += o.reverted;
        self.overruled += o.overruled;
        self.other += o.other;
    }

    /// Verdicts the ground truth has decided: would-have-reverted and confirmed, window closed.
    pub fn decided(&self) -> u64 {
        (self.would_revert + self.confirmed).saturating_sub(self.pending())
    }

    /// Would-have-reverted and confirmed verdicts whose window is still open.
    pub fn pending(&self) -> u64 {
        self.pending_would_revert + self.pending_confirmed
    }

    /// Enough decided verdicts, and nothing that says a revert would have been wrong: no
    /// likely false alarm, no miss, none of greenlight's reverts undone by a human.
    pub fn ready_to_arm(&self, min_samples: u64) -> bool {
        self.false_alarms == 0
            && self.misses == 0
            && self.overruled == 0
            && self.decided() >= min_samples
    }

    /// The plain judgement `greenlight record` prints.
    pub fn judgement(&self, min_samples: u64) -> String {
        let mut s = format!(
            "{} shadow verdict{}, {} would-have-reverted",
            self.shadow,
            plural(self.shadow),
            self.would_revert
        );
        if self.would_revert > 0 {
            let mut parts = vec![format!("{} reverted by a human", self.agreed)];
            if self.fixed_forward > 0 {
                parts.push(format!("{} fixed forward", self.fixed_forward));
            }
            if self.false_alarms > 0 {
                parts.push(format!(
                    "{} likely false alarm{}",
                    self.false_alarms,
                    plural(self.false_alarms)
                ));
            }
            if self.unresolved > 0 {
                parts.push(format!("{} left broken", self.unresolved));
            }
            if self.pending_would_revert > 0 {
                parts.push(format!("{} still in the window", self.pending_would_revert));
            }
            s.push_str(&format!(" ({})", parts.join(", ")));
            let judged = self.agreed + self.fixed_forward + self.false_alarms + self.unresolved;
            s.push_str(&format!(": agreement {}/{judged}", self.agreed));
        }
        if self.misses > 0 {
            s.push_str(&format!(
                "; {} confirmed commit{} reverted by a human: miss{}",
                self.misses,
                plural(self.misses),
                if self.misses == 1 { "" } else { "es" }
            ));
        }
        if self.overruled > 0 {
            s.push_str(&format!(
                "; {} of greenlight's {} revert{} reverted by a human",
                self.overruled,
                self.reverted,
                plural(self.reverted)
            ));
        } else if self.reverted > 0 {
            s.push_str(&format!(
                "; {} reverted by greenlight, none undone by a human",
                self.reverted
            ));
        }
        let verdict = if self.false_alarms > 0 {
            "do not arm: a revert would have undone a commit nobody else found broken"
        } else if self.misses > 0 {
            "not ready to arm: it confirmed a commit a human had to revert"
        } else if self.overruled > 0 {
            "not ready to arm: humans undid its reverts"
        } else if !self.ready_to_arm(min_samples) {
            "not enough samples to arm"
        } else {
            "enough samples to arm: no miss, no false alarm"
        };
        s.push_str(&format!(
            "; {verdict} ({} decided of {min_samples} needed)",
            self.decided()
        ));
        s
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// What happened after `w`'s verdict, from the commits that arrived (oldest first).
pub fn truth_of(
    w: &Watch,
    arrived: &[Arrived],
    healthy: Option<bool>,
    now: Timestamp,
) -> Option<Truth> {
    let finished = w.finished_at()?;
    let end = finished.plus_ms(WINDOW_MS);
    let mut forward: Option<CommitId> = None;
    // What people did is known only while the kept arrivals reach back to the verdict: the
    // store keeps the newest few thousand, and rows written before arrival times were kept
    // have none. Without that, a quiet day could be a revert no longer kept: unknown, never a
    // false alarm.
    let covered = arrived
        .first()
        .is_some_and(|a| a.at.is_some_and(|at| at <= finished));
    let mut unknown = !covered;
    for a in arrived {
        let Some(at) = a.at else {
            if a.reverts.as_ref() == Some(&w.commit) {
                unknown = true;
            }
            continue;
        };
        if at < finished || at > end || a.sha == w.commit {
            continue;
        }
        if a.reverts.as_ref() == Some(&w.commit) {
            // Greenlight's revert of it, for another app's failure: no human answered, and
            // what this app would have needed cannot be told any more.
            if a.by_greenlight {
                unknown = true;
                continue;
            }
            return Some(Truth::Reverted { by: a.sha.clone() });
        }
        // Greenlight's own revert of it is no human's answer (an armed watch's reverts are
        // counted apart).
        if w.revert_commit() == Some(&a.sha) {
            continue;
        }
        if forward.is_none()
            && let Some(paths) = w.source_paths()
            && touches(paths, &a.changed_paths).touches()
        {
            forward = Some(a.sha.clone());
        }
    }
    if now < end {
        return Some(Truth::Pending);
    }
    Some(match forward {
        Some(by) => Truth::FixedForward { by },
        None if unknown => Truth::Quiet { healthy: None },
        None => Truth::Quiet { healthy },
    })
}

/// Whether a human reverted greenlight's revert `revert` within the window after `finished`.
fn overruled(revert: &CommitId, finished: Timestamp, arrived: &[Arrived]) -> bool {
    let end = finished.plus_ms(WINDOW_MS);
    arrived.iter().any(|a| {
        a.reverts.as_ref() == Some(revert)
            && !a.by_greenlight
            && a.at.is_some_and(|at| at >= finished && at <= end)
    })
}

/// Count one finished watch into `t`.
pub fn count(t: &mut Tally, w: &Watch, arrived: &[Arrived], healthy: Option<bool>, now: Timestamp) {
    let Some(verdict) = w.verdict() else { return };
    t.verdicts += 1;
    let shadow = w.mode == Mode::Shadow || w.dry_run;
    if shadow {
        t.shadow += 1;
    }
    match Outcome::of_verdict(verdict) {
        Outcome::WouldHaveRevertedShadow | Outcome::WouldHaveRevertedDryRun => {
            t.would_revert += 1;
            match truth_of(w, arrived, healthy, now) {
                Some(Truth::Reverted { .. }) => t.agreed += 1,
                Some(Truth::FixedForward { .. }) => t.fixed_forward += 1,
                Some(Truth::Quiet {
                    healthy: Some(true),
                }) => t.false_alarms += 1,
                Some(Truth::Quiet { .. }) => t.unresolved += 1,
                Some(Truth::Pending) | None => t.pending_would_revert += 1,
            }
        }
        Outcome::Passed => {
            t.confirmed += 1;
            match truth_of(w, arrived, healthy, now) {
                Some(Truth::Reverted { .. }) => t.misses += 1,
                Some(Truth::Pending) | None => t.pending_confirmed += 1,
                Some(_) => {}
            }
        }
        Outcome::Inconclusive => t.inconclusive += 1,
        Outcome::NotReached => t.not_reached += 1,
        Outcome::Reverted => {
            t.reverted += 1;
            if let (Some(r), Some(at)) = (w.revert_commit(), w.finished_at())
                && overruled(r, at, arrived)
            {
                t.overruled += 1;
            }
        }
        _ => t.other += 1,
    }
}

/// Each app's tally (by `AppRef`'s text, as trailers name it) of `watches`; `healthy` answers
/// for an app as last seen.
pub fn tally<'a>(
    watches: impl IntoIterator<Item = &'a Watch>,
    arrived: &[Arrived],
    healthy: impl Fn(&Watch) -> Option<bool>,
    now: Timestamp,
) -> BTreeMap<String, Tally> {
    let mut out: BTreeMap<String, Tally> = BTreeMap::new();
    for w in watches {
        if w.verdict().is_none() {
            continue;
        }
        let t = out.entry(w.app.to_string()).or_default();
        count(t, w, arrived, healthy(w), now);
    }
    out
}

/// Counts pruned for good (retention shorter than the window): a would-have-reverted verdict
/// still waiting is unresolved from now on, a confirmation still waiting stands.
pub fn settled(mut t: Tally) -> Tally {
    t.unresolved += t.pending_would_revert;
    t.pending_would_revert = 0;
    t.pending_confirmed = 0;
    t
}

/// The window in words, for what `record` prints.
pub fn window_words() -> String {
    human_duration(WINDOW_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judgement_names_the_sample_and_what_blocks_arming() {
        let agreeing = Tally {
            verdicts: 12,
            shadow: 12,
            would_revert: 3,
            agreed: 3,
            confirmed: 9,
            ..Tally::default()
        };
        assert_eq!(
            agreeing.judgement(DEFAULT_MIN_SAMPLES),
            "12 shadow verdicts, 3 would-have-reverted (3 reverted by a human): agreement 3/3; enough samples to arm: no miss, no false alarm (12 decided of 10 needed)"
        );
        assert!(agreeing.ready_to_arm(10));
        assert!(!agreeing.ready_to_arm(13));
        let mut false_alarm = agreeing.clone();
        false_alarm.would_revert += 1;
        false_alarm.false_alarms = 1;
        assert!(!false_alarm.ready_to_arm(1));
        assert!(false_alarm.judgement(1).contains("do not arm"));
        let mut pending = agreeing.clone();
        pending.pending_confirmed = 5;
        assert_eq!(pending.decided(), 7);
        assert!(
            pending
                .judgement(10)
                .ends_with("not enough samples to arm (7 decided of 10 needed)")
        );
    }

    #[test]
    fn a_prune_settles_what_is_still_in_its_day() {
        let t = settled(Tally {
            would_revert: 2,
            pending_would_revert: 1,
            confirmed: 3,
            pending_confirmed: 2,
            ..Tally::default()
        });
        assert_eq!((t.unresolved, t.pending()), (1, 0));
        assert_eq!(t.decided(), 5);
    }
}
