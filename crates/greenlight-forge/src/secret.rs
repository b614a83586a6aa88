//! The token and what keeps it out of sight: [`Secret`] (Debug redacted, no Display) and the
//! scrubber that removes it from text a server sent before that text goes into an error.

use std::fmt;

/// A value that must never be shown: Debug prints `<redacted>`, and there is no Display.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Secret {
        Secret::new(value)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Secret {
        Secret::new(value)
    }
}

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
        assert_eq!(format!("{s:?}"), "<redacted>");
        assert_eq!(scrub("bad tok-123 here", s.expose()), "bad <redacted> here");
        assert_eq!(scrub("a b", "a"), "a b");
    }
}
