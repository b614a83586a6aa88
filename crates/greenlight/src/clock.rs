//! The daemon's clock, injectable so that the runtime can be driven by tests; the judge itself
//! never reads a clock.

use std::time::Duration;

use greenlight_core::time::Timestamp;

pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;

    /// How long from now until `t`, zero when it has passed. The runtime's timers sleep this
    /// long; a clock that counts below the millisecond says so here, so that a timer set for a
    /// moment wakes at it rather than up to a millisecond after (`now` is whole milliseconds).
    fn until(&self, t: Timestamp) -> Duration {
        Duration::from_millis(t.ms_since(self.now()).max(0) as u64)
    }
}

/// Wall-clock time.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(d.as_millis() as i64)
    }

    fn until(&self, t: Timestamp) -> Duration {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Duration::from_millis(t.0.max(0) as u64).saturating_sub(now)
    }
}
