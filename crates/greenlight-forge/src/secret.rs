//! The token and what keeps it out of sight: [`Secret`] (Debug redacted, no Display) and the
//! scrubber that removes it from text a server sent before that text goes into an error.

/// The token: greenlight-core's one secret type (`Debug` and `Display` print `***`).
pub use greenlight_core::secret::Secret;

/// `text` with `secret` replaced by `<redacted>` (a secret shorter than 3 characters is left:
/// replacing every `a` would hide the message, not a secret).
pub(crate) fn scrub(text: &str, secret: &str) -> String {
    let secret = secret.trim();
    if secret.len() >= 3 && text.contains(secret) {
        text.replace(secret, "<redacted>")
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_never_prints_and_is_scrubbed_from_server_text() {
        let s = Secret::new("tok-123");
        assert_eq!(format!("{s:?}"), "***");
        assert_eq!(scrub("bad tok-123 here", s.expose()), "bad <redacted> here");
        assert_eq!(scrub("a b", "a"), "a b");
    }
}
