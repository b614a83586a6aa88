//! Secrets and their redaction: the `Secret` newtype, the one rule that turns a token file's
//! text into a token, the redaction of a known secret in text (URL credentials are redacted by
//! greenlight-core's rule, re-exported here), and the splitting of credentials out of remote
//! URLs.
//!
//! Every token greenlight takes — git's, Argo CD's, a registry's, the sandbox's — comes from a
//! file: the binary reads it with its bounded, regular-file-only reader (`greenlight::files`,
//! which refuses a FIFO, a device or an oversized file) and hands the text to
//! [`Secret::from_file_text`]. The rule lives here because this module owns the `Secret` type
//! the value travels in, and every caller already links this crate.
//!
//! It must never print, log or return a secret's value except through `Secret::expose`, whose
//! callers hand the value to where it is used: a child process's environment or an
//! `Authorization` header.

use greenlight_core::repo_url::RepoUrl;
/// Redaction of URLs inside free text (git's stderr, command lines, stored reasons): the one
/// rule lives in greenlight-core, beside the repository URL type that shows it.
pub use greenlight_core::repo_url::redact;

pub use greenlight_core::secret::{Secret, SecretFileError};

/// Redacts the credentials of a URL: `https://user:pass@host/x` → `https://***@host/x`.
/// A URL without credentials is returned unchanged. The rule is
/// [`greenlight_core::repo_url::RepoUrl::redacted`]'s; this is its spelling for callers that
/// hold the URL as a string.
pub fn redact_url(url: &str) -> String {
    RepoUrl::new(url).redacted()
}

/// Replaces every occurrence of each secret value in `text` by `***`, then redacts URLs.
pub(crate) fn redact_with(text: &str, secrets: &[&str]) -> String {
    let mut text = text.to_owned();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        text = text.replace(secret, "***");
    }
    redact(&text)
}

/// Credentials found in an `http(s)://user:password@host/…` URL, percent-decoded.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct UrlCredentials {
    pub username: Option<String>,
    pub password: Option<Secret>,
}

/// Splits the credentials out of an http(s) URL, so that the URL git sees (argv, the
/// clone's config) carries none; the credentials then reach git through askpass.
/// Other schemes keep their user (`ssh://git@host/x` names the ssh login, not a secret).
pub(crate) fn split_credentials(url: &str) -> (String, UrlCredentials) {
    let lower = url.to_ascii_lowercase();
    let scheme_len = if lower.starts_with("https://") {
        8
    } else if lower.starts_with("http://") {
        7
    } else {
        return (url.to_owned(), UrlCredentials::default());
    };
    let rest = &url[scheme_len..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return (url.to_owned(), UrlCredentials::default());
    };
    let userinfo = &authority[..at];
    let stripped = format!("{}{}", &url[..scheme_len], &rest[at + 1..]);
    let (user, password) = match userinfo.split_once(':') {
        Some((u, p)) => (u, Some(p)),
        None => (userinfo, None),
    };
    let credentials = UrlCredentials {
        username: Some(percent_decode(user)).filter(|u| !u.is_empty()),
        password: password
            .map(percent_decode)
            .filter(|p| !p.is_empty())
            .map(Secret::new),
    };
    (stripped, credentials)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn secret_never_prints_its_value() {
        let s = Secret::new("ghp_abc");
        assert_eq!(format!("{s:?} {s}"), "*** ***");
        assert_eq!(s.expose(), "ghp_abc");
    }

    #[test]
    fn url_redaction_is_the_core_rule() {
        assert_eq!(redact_url("https://user:pass@host/x"), "https://***@host/x");
        assert_eq!(redact_url("/srv/git/x.git"), "/srv/git/x.git");
        assert_eq!(
            redact("fatal: 'https://u:a/b+c=@h.example/r/': 403"),
            "fatal: 'https://***@h.example/r/': 403"
        );
    }

    #[test]
    fn token_files_are_trimmed_and_must_not_be_empty() {
        let path = Path::new("/run/secrets/token");
        let secret = Secret::from_file_text("--git-token-file", path, "  tok-3f9a\n").unwrap();
        assert_eq!(secret.expose(), "tok-3f9a");

        let err = Secret::from_file_text("--git-token-file", path, " \n\t\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "--git-token-file /run/secrets/token: the file is empty"
        );
    }

    #[test]
    fn redacts_a_known_secret_anywhere() {
        assert_eq!(redact_with("x s3cr3t y", &["s3cr3t"]), "x *** y");
        assert_eq!(redact_with("x s3cr3t y", &["", "y"]), "x s3cr3t ***");
    }

    #[test]
    fn splits_http_credentials_only() {
        let (url, c) = split_credentials("https://bot:p%40ss@host.example/org/r.git");
        assert_eq!(url, "https://host.example/org/r.git");
        assert_eq!(c.username.as_deref(), Some("bot"));
        assert_eq!(c.password.as_ref().map(Secret::expose), Some("p@ss"));

        let (url, c) = split_credentials("ssh://git@host/r.git");
        assert_eq!(url, "ssh://git@host/r.git");
        assert_eq!(c, UrlCredentials::default());

        let (url, c) = split_credentials("https://host/@scope/x");
        assert_eq!(url, "https://host/@scope/x");
        assert_eq!(c, UrlCredentials::default());
    }
}
