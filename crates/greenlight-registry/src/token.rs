//! Registry credentials: the caller's bearer token, the `WWW-Authenticate: Bearer` challenge a
//! registry answers an anonymous request with, and the `Authorization` header both become.
//! Must never show a token: `BearerToken`'s Debug is redacted, its errors name where it came
//! from, and every header built from a token is marked sensitive.

use crate::error::RegistryError;
use reqwest::header::{HeaderMap, HeaderValue, WWW_AUTHENTICATE};
use std::fmt;

/// A bearer token for the registry, checked to fit in an HTTP header. Debug shows neither the
/// token nor any part of it.
#[derive(Clone)]
pub struct BearerToken {
    value: String,
    source: String,
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BearerToken")
            .field("value", &"<redacted>")
            .field("source", &self.source)
            .finish()
    }
}

impl BearerToken {
    /// Wraps `value`, which came from `source` (e.g. `--token-file /run/secrets/registry`):
    /// errors about the token name the source, never the value. A token that is not one
    /// line of printable ASCII cannot be sent as a header and is refused here, before any
    /// request.
    pub fn new(value: &str, source: impl Into<String>) -> Result<BearerToken, RegistryError> {
        let source = source.into();
        if value.is_empty() || !value.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(RegistryError::UnusableToken {
                token_source: source,
            });
        }
        Ok(BearerToken {
            value: value.to_owned(),
            source,
        })
    }

    /// Where the token came from, as the caller named it.
    pub fn source(&self) -> &str {
        &self.source
    }

    pub(crate) fn header(&self) -> HeaderValue {
        bearer_header(&self.value)
    }
}

/// `Authorization: Bearer <token>`, marked sensitive so that HTTP-level logging leaves it out.
/// Callers check `token` is printable ASCII first, so the fallback is never sent; it exists
/// so that a mistake there is a refused request, not a panic or a quoted token.
pub(crate) fn bearer_header(token: &str) -> HeaderValue {
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .unwrap_or_else(|_| HeaderValue::from_static("Bearer"));
    value.set_sensitive(true);
    value
}

/// `WWW-Authenticate: Bearer realm="…",service="…",scope="…"`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BearerChallenge {
    pub realm: String,
    pub service: Option<String>,
    pub scope: Option<String>,
}

impl BearerChallenge {
    pub fn from_headers(headers: &HeaderMap) -> Option<BearerChallenge> {
        headers
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(BearerChallenge::parse)
    }

    pub fn parse(header: &str) -> Option<BearerChallenge> {
        let header = header.trim();
        let (scheme, params) = header.split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let params = auth_params(params);
        let get = |key: &str| {
            params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.clone())
        };
        Some(BearerChallenge {
            realm: get("realm")?,
            service: get("service"),
            scope: get("scope"),
        })
    }
}

/// `key=value` pairs separated by commas; values may be quoted, and quoted values may hold
/// commas (`scope="repository:a:pull,push"`) and backslash escapes (RFC 9110 §11.2).
fn auth_params(input: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = input.chars().peekable();
    loop {
        while chars.next_if(|c| *c == ',' || c.is_whitespace()).is_some() {}
        let key: String =
            std::iter::from_fn(|| chars.next_if(|c| *c != '=' && *c != ',')).collect();
        if key.is_empty() {
            break;
        }
        if chars.next_if_eq(&'=').is_none() {
            continue;
        }
        let mut value = String::new();
        if chars.next_if_eq(&'"').is_some() {
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            value.extend(std::iter::from_fn(|| chars.next_if(|c| *c != ',')));
            value = value.trim().to_string();
        }
        out.push((key.trim().to_string(), value));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_challenge_with_quoted_commas() {
        let c = BearerChallenge::parse(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/nginx:pull,push""#,
        )
        .unwrap();
        assert_eq!(
            c,
            BearerChallenge {
                realm: "https://auth.docker.io/token".into(),
                service: Some("registry.docker.io".into()),
                scope: Some("repository:library/nginx:pull,push".into()),
            }
        );
        let bare = BearerChallenge::parse("bearer realm=http://h/token, service=s").unwrap();
        assert_eq!(bare.realm, "http://h/token");
        assert_eq!(bare.service.as_deref(), Some("s"));
        assert_eq!(bare.scope, None);
        assert_eq!(BearerChallenge::parse(r#"Basic realm="x""#), None);
        assert_eq!(BearerChallenge::parse(r#"Bearer service="x""#), None);
        let escaped = BearerChallenge::parse(r#"Bearer realm="a\"b""#).unwrap();
        assert_eq!(escaped.realm, "a\"b");
    }

    #[test]
    fn token_debug_is_redacted() {
        let token = BearerToken::new("very-secret", "--token-file t").unwrap();
        let debug = format!("{token:?}");
        assert!(!debug.contains("very-secret"), "{debug}");
        assert!(debug.contains("--token-file t"), "{debug}");
        assert!(token.header().is_sensitive());
    }

    #[test]
    fn a_token_that_cannot_be_a_header_is_refused_without_quoting_it() {
        for bad in [
            "two-part secret",
            "line\nbreak-secret",
            "tab\tsecret",
            "",
            "é-secret",
        ] {
            let err = BearerToken::new(bad, "--token-file t").unwrap_err();
            let text = format!("{err} {err:?}");
            assert!(!text.contains("secret"), "{text}");
            assert!(text.starts_with("--token-file t: "), "{text}");
        }
        assert!(BearerToken::new("glt_5b1f.0e7a-9c3d=", "x").is_ok());
    }
}
