//! Repository URLs: the one place that decides how a repository URL is shown (credentials
//! hidden) and when two spellings name the same repository — the watched `--repo` and an Argo
//! CD `repoURL`, say. Also the redaction of URLs quoted inside free text (git's stderr, stored
//! verdict reasons), so that one rule hides credentials everywhere.
//!
//! Pure string work: it never resolves a host, reads a file or canonicalizes a path (local
//! paths are compared lexically). It must never show the credentials it holds, except through
//! [`RepoUrl::expose`], whose callers hand the URL to git.

use crate::paths::normalize_path;
use std::fmt;

/// What hidden credentials are replaced by.
const MASK: &str = "***";

/// A repository URL as the user or Argo CD wrote it: `https://…`, `ssh://…`, `git://…`,
/// scp-like `git@host:org/r`, `file://…` or a local path. It may carry credentials
/// (`https://bot:token@host/org/r.git`): `Display` and `Debug` show [`RepoUrl::redacted`],
/// never them.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RepoUrl(String);

impl RepoUrl {
    /// Wraps a URL as given; nothing is checked or changed.
    pub fn new(url: impl Into<String>) -> RepoUrl {
        RepoUrl(url.into())
    }

    /// The URL exactly as given, credentials included. Only for handing it to git; text a
    /// person or a log reads takes [`RepoUrl::redacted`] (or `Display`).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the URL is empty or only whitespace: it names no repository.
    pub fn is_blank(&self) -> bool {
        self.0.trim().is_empty()
    }

    /// The URL fit for logs, errors and events: everything between `://` and the last `@` of
    /// the URL becomes `***`, whatever the scheme (`https://***@host/org/r`,
    /// `ssh://***@host/org/r`). Why the last `@` and not the authority's: tokens pasted into
    /// URLs unencoded may hold `/`, and git quotes such URLs as given; hiding a path that
    /// holds an `@` (`https://***@v1` for `https://host/org/r@v1`) costs less than a leaked
    /// token. scp-like `git@host:org/r` and local paths have no place for a password and are
    /// returned unchanged; so are query strings, which no supported remote uses for tokens.
    pub fn redacted(&self) -> String {
        match self.0.find("://") {
            Some(pos) => {
                let mut out = String::with_capacity(self.0.len());
                out.push_str(&self.0[..pos + 3]);
                mask_userinfo(&self.0[pos + 3..], &mut out);
                out
            }
            None => self.0.clone(),
        }
    }

    /// One spelling per repository, so that the watched repository is recognized however
    /// either side wrote it: `git@github.com:Org/R.git`, `ssh://git@github.com:22/org/r` and
    /// `https://user@GitHub.com/org/r/` all become `github.com/org/r`. Schemes (https, http,
    /// ssh, git, git+ssh), user info, ports and a trailing `.git` or `/` are dropped; host
    /// and path are lowercased for network URLs (as Argo CD's own URL comparison does: GitHub
    /// and most hosts treat paths case-insensitively). Ports are dropped because one
    /// repository is served on different ports per scheme. Local repositories
    /// (`file:///srv/r.git`, `/srv/r`) become `file:///srv/r`, case kept: file systems are
    /// case-sensitive. The result holds no credentials.
    pub fn normalized(&self) -> String {
        let u = self.0.trim();
        if let Some(rest) = u.strip_prefix("file://") {
            // `file:///srv/r`, or `file://localhost/srv/r`.
            return local(rest.strip_prefix("localhost").unwrap_or(rest));
        }
        if let Some((scheme, rest)) = u.split_once("://")
            && !scheme.is_empty()
            && scheme
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'+')
        {
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            return network(authority, path);
        }
        if u.starts_with('/') || u.starts_with('.') {
            return local(u);
        }
        // scp-like `[user@]host:path`: a colon before any slash.
        if let Some((host, path)) = u.split_once(':')
            && !host.contains('/')
            && !host.is_empty()
        {
            return network(host, path);
        }
        local(u)
    }

    /// Whether both name the same repository (see [`RepoUrl::normalized`]). A blank URL names
    /// no repository, so it is never the same as anything.
    pub fn same_repo(&self, other: &RepoUrl) -> bool {
        !self.is_blank() && !other.is_blank() && self.normalized() == other.normalized()
    }
}

impl From<&str> for RepoUrl {
    fn from(url: &str) -> RepoUrl {
        RepoUrl::new(url)
    }
}

impl From<String> for RepoUrl {
    fn from(url: String) -> RepoUrl {
        RepoUrl::new(url)
    }
}

impl fmt::Display for RepoUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Debug for RepoUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RepoUrl").field(&self.redacted()).finish()
    }
}

/// Redacts every `scheme://user-info@host` URL found in free text by the rule of
/// [`RepoUrl::redacted`]. A URL ends at whitespace or a quote (`"`, `'`, `` ` ``, `<`, `>`),
/// the way git and most tools quote URLs in messages.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find("://") {
        let authority_start = pos + 3;
        out.push_str(&rest[..authority_start]);
        let tail = &rest[authority_start..];
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`'))
            .unwrap_or(tail.len());
        mask_userinfo(&tail[..end], &mut out);
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// The one redaction rule: `after_scheme` is what follows `://`; everything up to its last
/// `@` is replaced. An empty user info (`https://@host`) has nothing to hide.
fn mask_userinfo(after_scheme: &str, out: &mut String) {
    match after_scheme.rfind('@') {
        Some(at) if at > 0 => {
            out.push_str(MASK);
            out.push_str(&after_scheme[at..]);
        }
        _ => out.push_str(after_scheme),
    }
}

fn local(path: &str) -> String {
    let trimmed = strip_git_suffix(path);
    let norm = normalize_path(trimmed).unwrap_or_else(|| trimmed.trim_matches('/').to_string());
    format!("file:///{norm}")
}

fn network(authority: &str, path: &str) -> String {
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        // An IPv6 literal: `[::1]:22`.
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => host_port.split(':').next().unwrap_or(host_port),
    };
    let path = normalize_path(strip_git_suffix(path)).unwrap_or_default();
    format!("{}/{}", host.to_ascii_lowercase(), path.to_lowercase())
}

fn strip_git_suffix(p: &str) -> &str {
    let p = p.trim_end_matches('/');
    p.strip_suffix(".git").unwrap_or(p).trim_end_matches('/')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn redacted(url: &str) -> String {
        RepoUrl::new(url).redacted()
    }

    fn normalized(url: &str) -> String {
        RepoUrl::new(url).normalized()
    }

    #[test]
    fn credentials_are_masked_in_any_scheme() {
        assert_eq!(
            redacted("https://ghp_abc123@github.com/org/r.git"),
            "https://***@github.com/org/r.git"
        );
        assert_eq!(
            redacted("https://user:pw@github.com/org/r"),
            "https://***@github.com/org/r"
        );
        assert_eq!(redacted("ssh://git:pw@host/org/r"), "ssh://***@host/org/r");
        for kept in [
            "https://github.com/org/r",
            "git@github.com:org/r.git",
            "/srv/git/r",
            "file:///srv/git/r.git",
            "https://@host/r",
            "",
        ] {
            assert_eq!(redacted(kept), kept);
        }
    }

    // The cases on which the redactions this type replaced disagreed.

    /// One redaction dropped the user info, the others masked it: masked, so a reader sees
    /// that credentials were given.
    #[test]
    fn credentials_are_masked_not_dropped() {
        assert_eq!(
            redacted("https://user:tok@example.com/org/r.git"),
            "https://***@example.com/org/r.git"
        );
    }

    /// Two redactions ended the user info at the first `/` and so showed a token holding one.
    #[test]
    fn a_token_holding_a_slash_is_hidden_whole() {
        assert_eq!(
            redacted("https://u:a/b+c=@h.example/r/"),
            "https://***@h.example/r/"
        );
        assert_eq!(
            redacted("https://x-access-token:ab/cd@host/org/r.git"),
            "https://***@host/org/r.git"
        );
    }

    /// One redaction kept an ssh user as an account name; a password or token can sit there
    /// just as well (`ssh://token@host`), so it is masked too.
    #[test]
    fn an_ssh_user_is_masked() {
        assert_eq!(redacted("ssh://git@host/org/r"), "ssh://***@host/org/r");
        assert_eq!(
            redacted("git+ssh://deploy@host:22/org/r"),
            "git+ssh://***@host:22/org/r"
        );
    }

    /// Two redactions kept an `@` in the path; it cannot be told from a token holding `/`,
    /// so everything before it is hidden.
    #[test]
    fn an_at_sign_in_the_path_hides_what_precedes_it() {
        assert_eq!(redacted("https://github.com/org/r@v1"), "https://***@v1");
    }

    #[test]
    fn display_and_debug_are_redacted() {
        let url = RepoUrl::new("https://bot:s3cr3t@host/org/r.git");
        assert_eq!(url.to_string(), "https://***@host/org/r.git");
        let debug = format!("{url:?}");
        assert!(
            !debug.contains("s3cr3t") && !debug.contains("bot"),
            "{debug}"
        );
        assert_eq!(debug, r#"RepoUrl("https://***@host/org/r.git")"#);
        assert_eq!(url.expose(), "https://bot:s3cr3t@host/org/r.git");
        assert!(!url.normalized().contains("s3cr3t"));
    }

    #[test]
    fn free_text_is_redacted_url_by_url() {
        assert_eq!(
            redact("fatal: unable to access 'https://u:a/b+c=@h.example/r/': 403"),
            "fatal: unable to access 'https://***@h.example/r/': 403"
        );
        assert_eq!(
            redact("a http://x:y@h1/ and ssh://git@h2:22/r b"),
            "a http://***@h1/ and ssh://***@h2:22/r b"
        );
        assert_eq!(
            redact("git fetch \"https://u:p@h/r\" `https://t@h2/x`"),
            "git fetch \"https://***@h/r\" `https://***@h2/x`"
        );
        assert_eq!(redact("no urls here: a@b"), "no urls here: a@b");
        assert_eq!(redact(""), "");
    }

    #[test]
    fn spellings_of_one_repository_agree() {
        let same = [
            "https://github.com/org/repo",
            "https://github.com/org/repo.git",
            "https://github.com/org/repo/",
            "https://github.com/org/repo.git/",
            "http://github.com/org/repo",
            "https://GitHub.COM/org/repo",
            "https://github.com/Org/Repo",
            "https://user:secret@github.com/org/repo.git",
            "https://github.com:443/org/repo",
            "git@github.com:org/repo.git",
            "git@github.com:org/repo",
            "github.com:org/repo",
            "git@github.com:/org/repo.git",
            "ssh://git@github.com/org/repo.git",
            "ssh://git@github.com:22/org/repo",
            "git+ssh://git@github.com/org/repo",
            "git://github.com/org/repo.git",
            "  https://github.com/org/repo  ",
        ];
        let first = RepoUrl::new(same[0]);
        for u in same {
            assert_eq!(normalized(u), "github.com/org/repo", "{u}");
            assert!(first.same_repo(&RepoUrl::new(u)), "{u}");
        }
    }

    #[test]
    fn different_repositories_stay_different() {
        let distinct = [
            "https://github.com/org/repo",
            "https://github.com/org/repo2",
            "https://github.com/other/repo",
            "https://gitlab.com/org/repo",
            "https://github.com/org/repo/sub",
            "https://github.com/org",
            "file:///org/repo",
            "/srv/git/repo",
        ];
        let set: BTreeSet<String> = distinct.iter().map(|u| normalized(u)).collect();
        assert_eq!(set.len(), distinct.len(), "{set:?}");
    }

    #[test]
    fn local_paths_and_file_urls_agree() {
        for u in [
            "/srv/git/app.git",
            "/srv/git/app",
            "/srv/git/app/",
            "/srv/git/./app.git/",
            "/srv/git/x/../app",
            "file:///srv/git/app.git",
            "file:///srv/git/app",
            "file://localhost/srv/git/app",
        ] {
            assert_eq!(normalized(u), "file:///srv/git/app", "{u}");
        }
        // Local paths keep their case: file systems are case-sensitive.
        assert_ne!(normalized("/srv/Git/app"), normalized("/srv/git/app"));
    }

    #[test]
    fn ipv6_hosts_and_gitlab_subgroups() {
        assert_eq!(normalized("ssh://git@[::1]:2222/org/r.git"), "::1/org/r");
        assert_eq!(normalized("https://[::1]/org/r"), "::1/org/r");
        assert_eq!(
            normalized("git@gitlab.example.com:group/sub/r.git"),
            normalized("https://gitlab.example.com/group/sub/r")
        );
    }

    #[test]
    fn a_blank_url_is_no_repository() {
        let blank = RepoUrl::new("  ");
        assert!(blank.is_blank());
        assert!(!blank.same_repo(&RepoUrl::new("")));
        assert!(!RepoUrl::new("/srv/r").same_repo(&blank));
    }
}
