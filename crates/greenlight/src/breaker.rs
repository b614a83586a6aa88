//! A human's breaker reset. When no watchdog runs on the state file, the breaker is closed here,
//! with its event, in one transaction; while one runs (it holds the state lock and is then the
//! breaker's only writer), a request is left that it applies at its next fetch. Never decides
//! anything about a watch.

use crate::lock::lock_state;
use crate::store::{SqliteStore, Write};
use anyhow::Result;
use greenlight_core::judge::{Effect, Engine, JudgeConfig};
use greenlight_core::time::Timestamp;
use std::path::Path;

/// What a reset did.
#[derive(Debug, PartialEq, Eq)]
pub enum Reset {
    /// The breaker is closed: reverts are allowed again.
    Applied,
    /// A watchdog runs on this state file; it applies the request at its next fetch.
    Requested,
}

/// Reset the breaker of the state file `state`, opened as `store`.
pub fn reset(store: &mut SqliteStore, state: &Path, now: Timestamp) -> Result<Reset> {
    let _lock = match lock_state(state) {
        Ok(lock) => lock,
        Err(e) if e.is::<crate::UsageError>() => {
            store.request_breaker_reset(now.0)?;
            return Ok(Reset::Requested);
        }
        Err(e) => return Err(e),
    };
    let loaded = store.load()?;
    let mut engine = Engine::restore(JudgeConfig::new("", "", false), Vec::new(), loaded.breaker);
    let events: Vec<_> = engine
        .reset_breaker(now)
        .into_iter()
        .filter_map(|e| match e {
            Effect::Emit(ev) => Some(ev),
            Effect::Revert(_) | Effect::Withdraw { .. } | Effect::Verify { .. } => None,
        })
        .collect();
    let (_, breaker) = engine.take_dirty();
    store.write(Write {
        breaker: breaker.as_ref(),
        events: &events,
        // A request left while a daemon ran is satisfied by this reset.
        clear_breaker_reset_request: true,
        ..Write::default()
    })?;
    Ok(Reset::Applied)
}
