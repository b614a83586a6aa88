//! The circuit breaker (docs/verdicts.md#breaker): two reverts in a row open it, and then no revert is pushed until a
//! human resets it. A confirmed watch resets the count (not an open breaker). Reverts that failed
//! and dry-run verdicts do not count. This module only counts; the judge consults it.

use serde::{Deserialize, Serialize};

/// Consecutive reverts that open the breaker.
pub const OPEN_AFTER: u32 = 2;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breaker {
    pub open: bool,
    pub consecutive_reverts: u32,
}

impl Breaker {
    /// Whether one more revert may be pushed, counting reverts already decided but not finished.
    pub fn allows_revert(&self, pending: u32) -> bool {
        !self.open && self.consecutive_reverts + pending < OPEN_AFTER
    }

    /// A revert was pushed or adopted. Returns true when this opened the breaker.
    pub fn record_revert(&mut self) -> bool {
        self.consecutive_reverts += 1;
        if !self.open && self.consecutive_reverts >= OPEN_AFTER {
            self.open = true;
            return true;
        }
        false
    }

    pub fn record_confirmed(&mut self) {
        self.consecutive_reverts = 0;
    }

    /// A human closes the breaker.
    pub fn reset(&mut self) {
        *self = Breaker::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_in_a_row_open_it_and_confirmed_resets_the_count() {
        let mut b = Breaker::default();
        assert!(b.allows_revert(0));
        assert!(!b.record_revert());
        b.record_confirmed();
        assert!(!b.record_revert());
        assert!(b.allows_revert(0));
        assert!(!b.allows_revert(1), "a pending revert counts");
        assert!(b.record_revert());
        assert!(!b.allows_revert(0));
        b.record_confirmed();
        assert!(b.open, "only a human closes it");
        b.reset();
        assert!(b.allows_revert(0));
    }
}
