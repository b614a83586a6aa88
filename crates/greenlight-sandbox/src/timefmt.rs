//! Timestamps as Argo CD writes them (`metav1.Time`: RFC 3339, UTC, whole seconds). Formatting
//! only; the sandbox never parses times back.

use std::time::SystemTime;

pub(crate) fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn formats_whole_seconds_in_utc() {
        let t = UNIX_EPOCH + Duration::from_millis(1_780_000_000_900);
        assert_eq!(rfc3339(t), "2026-05-28T20:26:40Z");
    }
}
