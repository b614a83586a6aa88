//! A small forge client for landing a change by pull request — the promotion gate's
//! `promotion: {via: pull-request}` and the watchdog's revert on a protected branch: open a pull
//! (merge) request from a pushed branch, arm auto-merge or merge it now, read where it stands,
//! close it unmerged. One [`ForgeClient`] over the three flavours ([`ForgeKind`]): GitHub's REST
//! API (and its GraphQL API for auto-merge, which has no REST route), GitLab's API v4 and
//! Gitea's API v1, each spoken in its own shapes and its answers read into one vocabulary:
//! [`PullRequest`], [`PrState`], [`AutoMerge`] and the typed [`ForgeError`].
//!
//! Owns the HTTP exchange and the reading of answers. Pushing the branch is git's job
//! (greenlight-git); deciding when to land is the gate's.
//!
//! Must never: put the token in an error, a log or a `Debug` string (it travels only as a
//! sensitive header, and text a server sends is scrubbed of it before an error quotes it);
//! accept credentials inside the URL; read more than [`ClientOptions::max_body_bytes`] of an
//! answer; panic on what a server sends (an answer that is not the forge's shape is
//! [`ForgeError::UnexpectedBody`]); or install a TLS crypto provider (the binary does).

mod client;
mod error;
mod secret;
mod shapes;

pub use client::{ClientOptions, ForgeClient};
pub use error::ForgeError;
pub use secret::Secret;

/// Which forge a client speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ForgeKind {
    GitHub,
    GitLab,
    Gitea,
}

impl ForgeKind {
    pub const ALL: [ForgeKind; 3] = [ForgeKind::GitHub, ForgeKind::GitLab, ForgeKind::Gitea];

    /// The name a configuration uses: `github`, `gitlab`, `gitea`.
    pub fn as_str(self) -> &'static str {
        match self {
            ForgeKind::GitHub => "github",
            ForgeKind::GitLab => "gitlab",
            ForgeKind::Gitea => "gitea",
        }
    }

    /// The name a person reads.
    pub fn display_name(self) -> &'static str {
        match self {
            ForgeKind::GitHub => "GitHub",
            ForgeKind::GitLab => "GitLab",
            ForgeKind::Gitea => "Gitea",
        }
    }
}

impl std::fmt::Display for ForgeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.display_name())
    }
}

impl std::str::FromStr for ForgeKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        ForgeKind::ALL
            .into_iter()
            .find(|k| k.as_str() == wanted)
            .ok_or_else(|| format!("unknown forge {s:?} (accepted: github, gitlab, gitea)"))
    }
}

/// A pull request (GitLab: merge request) as opened: its number (GitLab's `iid`), its web
/// page, and the head commit it was opened at (merges are pinned to it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub number: u64,
    pub url: String,
    pub head_sha: String,
}

/// Where a pull request stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrState {
    /// Open. `auto_merge`: armed or not, as the forge says; `None` where its API does not say
    /// (Gitea's pull request has no such field).
    Open { auto_merge: Option<bool> },
    /// Merged as `merge_commit` (the merge or squash commit on the base branch).
    Merged { merge_commit: String },
    /// Closed unmerged.
    Closed,
}

/// What arming auto-merge did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AutoMerge {
    /// Armed: the forge merges once the required checks pass.
    Armed,
    /// Nothing was left to wait for and the forge merged at once (GitLab, Gitea) as this commit.
    Merged { merge_commit: String },
}
