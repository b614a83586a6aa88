//! Credentials for Prometheus and what keeps them out of sight: [`Secret`] (Debug redacted),
//! [`Auth`] (bearer token or basic auth) and the scrubber that removes every configured
//! secret from text a server sent before that text goes into an error.

/// A credential: greenlight-core's one secret type (`Debug` and `Display` print `***`).
pub use greenlight_core::secret::Secret;

/// How requests authenticate, sent on every request as a sensitive `Authorization` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// `Authorization: Bearer <token>`.
    Bearer(Secret),
    /// `Authorization: Basic base64(username:password)`.
    Basic { username: String, password: Secret },
}

/// Every secret a client was given, to scrub from server text. Values shorter than
/// [`MIN_SCRUBBED`] are left alone: replacing every `a` in a message would hide the message,
/// not a secret.
#[derive(Clone, Default)]
pub(crate) struct Secrets(Vec<String>);

/// The shortest value scrubbed from text.
const MIN_SCRUBBED: usize = 3;

impl Secrets {
    pub fn add(&mut self, value: &str) {
        let value = value.trim();
        if value.len() >= MIN_SCRUBBED && !self.0.iter().any(|s| s == value) {
            self.0.push(value.to_string());
            // Longest first, so that a secret containing another is replaced whole.
            self.0.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    /// `text` with every secret replaced by `<redacted>`.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for secret in &self.0 {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), "<redacted>");
            }
        }
        out
    }
}

/// Standard base64 with padding (RFC 4648 §4), for the basic-auth header.
pub(crate) fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_in_debug() {
        let auth = Auth::Basic {
            username: "reader".into(),
            password: Secret::new("hunter22"),
        };
        let debug = format!("{auth:?} {:?}", Auth::Bearer("tok-123".into()));
        assert!(
            !debug.contains("hunter22") && !debug.contains("tok-123"),
            "{debug}"
        );
        assert!(debug.contains("reader"), "{debug}");
    }

    #[test]
    fn scrub_replaces_every_secret_longest_first_and_leaves_short_values() {
        let mut s = Secrets::default();
        s.add("abc");
        s.add("abcdef");
        s.add("x");
        assert_eq!(
            s.scrub("abcdef and abc and x"),
            "<redacted> and <redacted> and x"
        );
    }

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain}");
        }
    }
}
