//! What can go wrong asking a forge, each naming the forge and the endpoint asked (never with
//! credentials: URLs that carry them are refused) and, where the forge said why, its words with
//! the token scrubbed out.

use std::time::Duration;

use crate::ForgeKind;

/// Why a forge request did not do what was asked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ForgeError {
    /// The client cannot be built as configured: a bad URL, project or token.
    #[error("forge client for {url}: {why}")]
    Config { url: String, why: String },

    /// 401: the token is wrong, expired or missing.
    #[error("{forge} at {url} refused the token (HTTP 401): {message}")]
    Unauthorized {
        forge: ForgeKind,
        url: String,
        message: String,
    },

    /// 404: no such repository or pull request, or the token may not see it (forges answer
    /// 404 for what a token may not read; Gitea also for merging a closed pull request).
    #[error("{forge} at {url} found nothing there (HTTP 404): {message}")]
    NotFound {
        forge: ForgeKind,
        url: String,
        message: String,
    },

    /// An open pull request from this branch already exists.
    #[error("{forge} at {url}: a pull request from this branch is already open: {message}")]
    AlreadyExists {
        forge: ForgeKind,
        url: String,
        message: String,
    },

    /// The head branch has no commits the base lacks: nothing to propose.
    #[error("{forge} at {url}: nothing to merge: {message}")]
    NoChanges {
        forge: ForgeKind,
        url: String,
        message: String,
    },

    /// The forge will not merge it now: a conflict, required checks not passed, closed.
    #[error("{forge} at {url} will not merge it (HTTP {status}): {message}")]
    NotMergeable {
        forge: ForgeKind,
        url: String,
        status: u16,
        message: String,
    },

    /// The head branch moved since the pull request was read: nothing was merged.
    #[error("{forge} at {url}: the head branch moved; nothing was merged: {message}")]
    HeadMoved {
        forge: ForgeKind,
        url: String,
        message: String,
    },

    /// The repository does not allow auto-merge (GitHub's `allow_auto_merge`).
    #[error("{forge} at {url}: auto-merge is not allowed for this repository: {message}")]
    AutoMergeNotAllowed {
        forge: ForgeKind,
        url: String,
        message: String,
    },

    /// GitHub refuses to arm auto-merge on a pull request with nothing left to wait for
    /// (`clean` status): merge it now instead.
    #[error("{forge} at {url}: nothing left to wait for, merge it now: {message}")]
    AlreadyMergeable {
        forge: ForgeKind,
        url: String,
        message: String,
    },

    /// The pull request was merged already: it cannot be closed.
    #[error("{forge} at {url}: the pull request is already merged")]
    AlreadyMerged { forge: ForgeKind, url: String },

    /// The forge limits this client's requests (`429`, or GitHub's `403` that says so) for
    /// longer than the client waits, or again after one wait: nothing was done, and nothing is
    /// asked of the forge before `retry_in` has passed.
    #[error("{forge} at {url} is rate-limiting this token for another {}s (HTTP 429 / Retry-After); nothing was done, and it is not asked again before then", retry_in.as_secs_f64().ceil() as u64)]
    RateLimited {
        forge: ForgeKind,
        url: String,
        retry_in: Duration,
    },

    /// Any other refusal: the status and the forge's words (or the start of its answer).
    #[error("{forge} at {url} answered HTTP {status}: {message}")]
    Refused {
        forge: ForgeKind,
        url: String,
        status: u16,
        message: String,
    },

    /// No connection: refused, unresolvable host, TLS failure, connect timeout.
    #[error("cannot connect to {forge} at {url}: {what}")]
    Connect {
        forge: ForgeKind,
        url: String,
        what: String,
    },

    /// Connected, but the whole answer did not arrive within the request timeout.
    #[error("{forge} at {url} did not answer within {}", humantime::format_duration(*after))]
    Timeout {
        forge: ForgeKind,
        url: String,
        after: Duration,
    },

    /// The connection failed after it was made.
    #[error("asking {forge} at {url} failed: {what}")]
    Transport {
        forge: ForgeKind,
        url: String,
        what: String,
    },

    /// A successful answer that is not the forge's shape (not JSON, a member missing).
    #[error("{forge} at {url} answered with something that is not its API's shape: {why}")]
    UnexpectedBody {
        forge: ForgeKind,
        url: String,
        why: String,
    },

    /// The answer is larger than the client reads.
    #[error("{forge} at {url} sent more than {} KiB; the answer was not read", limit >> 10)]
    TooLarge {
        forge: ForgeKind,
        url: String,
        limit: usize,
    },
}
