//! The circuit breaker (docs/verdicts.md#breaker): it counts the distinct revert commits pushed
//! or adopted since the last `breaker reset`, except those whose apps have all been CONFIRMED
//! since; at two it opens, and then no revert is pushed until a human resets it. A confirmation
//! clears only its own app's reverts. Reverts that failed and dry-run verdicts do not count.
//! This module only counts; the judge consults it.

use crate::commit::CommitId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Counted reverts that open the breaker.
pub const OPEN_AFTER: u32 = 2;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breaker {
    pub open: bool,
    /// The reverts counted now. It is never less than `reverts.len()`; any excess are reverts
    /// recorded by a greenlight that did not say which apps they were for: a confirmation of
    /// any app clears those.
    pub consecutive_reverts: u32,
    /// The counted reverts whose commits and apps are known.
    #[serde(default)]
    pub reverts: Vec<CountedRevert>,
}

/// One revert commit the breaker counts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountedRevert {
    /// The commit it reverts.
    pub commit: CommitId,
    /// The revert commit itself.
    pub revert: CommitId,
    /// The apps whose watches failed into it and have not been CONFIRMED since (`ns/name`
    /// or `name`, as the trailer named them).
    pub apps: BTreeSet<String>,
}

impl Breaker {
    /// Whether one more revert commit may be pushed, counting `pending` distinct reverts
    /// already decided but not finished.
    pub fn allows_revert(&self, pending: u32) -> bool {
        !self.open && self.consecutive_reverts + pending < OPEN_AFTER
    }

    /// Whether a revert of `commit` is already counted: another watch of the same commit
    /// adopts it, which adds no revert commit to the count.
    pub fn counts_revert_of(&self, commit: &CommitId) -> bool {
        self.reverts.iter().any(|r| &r.commit == commit)
    }

    /// The revert `revert` of `commit` landed (pushed or adopted) for a watch of `app`.
    /// Returns true when this opened the breaker.
    pub fn record_revert(&mut self, commit: &CommitId, revert: &CommitId, app: &str) -> bool {
        if let Some(r) = self.reverts.iter_mut().find(|r| &r.revert == revert) {
            r.apps.insert(app.to_string());
            return false;
        }
        self.reverts.push(CountedRevert {
            commit: commit.clone(),
            revert: revert.clone(),
            apps: BTreeSet::from([app.to_string()]),
        });
        self.consecutive_reverts += 1;
        if !self.open && self.consecutive_reverts >= OPEN_AFTER {
            self.open = true;
            return true;
        }
        false
    }

    /// A watch of `app` was CONFIRMED: the reverts counted for that app no longer count for
    /// it; a revert whose apps have all been confirmed leaves the count. An open breaker stays
    /// open.
    pub fn record_confirmed(&mut self, app: &str) {
        for r in &mut self.reverts {
            r.apps.remove(app);
        }
        self.reverts.retain(|r| !r.apps.is_empty());
        // What is left counts; reverts of unknown apps are gone: any confirmation clears them.
        self.consecutive_reverts = self.reverts.len() as u32;
    }

    /// A human closes the breaker.
    pub fn reset(&mut self) {
        *self = Breaker::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(c: char) -> CommitId {
        CommitId::parse(&c.to_string().repeat(40)).unwrap()
    }

    #[test]
    fn two_reverts_open_it_and_only_a_human_closes_it() {
        let mut b = Breaker::default();
        assert!(b.allows_revert(0));
        assert!(!b.record_revert(&sha('a'), &sha('1'), "web"));
        assert!(b.allows_revert(0));
        assert!(!b.allows_revert(1), "a pending revert counts");
        assert!(b.record_revert(&sha('b'), &sha('2'), "web"));
        assert!(!b.allows_revert(0));
        b.record_confirmed("web");
        assert!(b.open, "only a human closes it");
        b.reset();
        assert!(b.allows_revert(0));
        assert_eq!(b, Breaker::default());
    }

    #[test]
    fn one_revert_commit_adopted_by_a_second_app_counts_once() {
        let mut b = Breaker::default();
        assert!(!b.record_revert(&sha('a'), &sha('1'), "web"));
        assert!(!b.record_revert(&sha('a'), &sha('1'), "other"));
        assert_eq!(b.consecutive_reverts, 1);
        assert!(b.counts_revert_of(&sha('a')));
        assert!(!b.open);
        // Both apps must be confirmed before that revert leaves the count.
        b.record_confirmed("web");
        assert_eq!(b.consecutive_reverts, 1);
        b.record_confirmed("other");
        assert_eq!(b.consecutive_reverts, 0);
    }

    #[test]
    fn a_confirmation_clears_only_its_own_apps_reverts() {
        let mut b = Breaker::default();
        assert!(!b.record_revert(&sha('a'), &sha('1'), "web"));
        b.record_confirmed("other");
        assert_eq!(
            b.consecutive_reverts, 1,
            "another app's CONFIRMED clears nothing"
        );
        assert!(b.record_revert(&sha('b'), &sha('2'), "web"));
        assert!(b.open);
    }

    #[test]
    fn reverts_of_unknown_apps_from_an_older_record_are_cleared_by_any_confirmation() {
        let mut b = Breaker {
            open: false,
            consecutive_reverts: 1,
            reverts: Vec::new(),
        };
        assert!(!b.allows_revert(1));
        b.record_confirmed("other");
        assert_eq!(b.consecutive_reverts, 0);
    }
}
