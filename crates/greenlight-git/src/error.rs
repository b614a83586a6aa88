//! The crate's error type. Every message names what failed and where (the git command, the
//! repository), and carries git's own words. Every string placed here has already been
//! redacted by the code that builds it; this module must never hold a raw URL or token.

use std::io;

/// What went wrong talking to git. All text is redacted (no URL credentials, no token).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// git ran and failed.
    #[error("`{command}` failed for {repo} ({status}): {stderr}")]
    Command {
        /// The git command line (redacted, without the isolation `-c` options).
        command: String,
        /// The repository: the clone's directory and its remote (redacted).
        repo: String,
        /// The exit status.
        status: String,
        /// git's stderr, trimmed and redacted.
        stderr: String,
    },
    /// git could not be started at all.
    #[error("could not run `{command}` for {repo}: {source} (is git installed and on PATH?)")]
    Spawn {
        /// The git command line (redacted).
        command: String,
        /// The repository.
        repo: String,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The directory holds a clone of another remote.
    #[error(
        "{dir} is a clone of {found}, not of {expected}; use another data directory or remove {dir}"
    )]
    OriginMismatch {
        /// The clone's directory.
        dir: String,
        /// The remote asked for (redacted).
        expected: String,
        /// The clone's `origin` (redacted).
        found: String,
    },
    /// The directory exists but is not a usable clone.
    #[error("{dir} is not a greenlight clone: {reason}; remove it or use another data directory")]
    NotAClone {
        /// The directory.
        dir: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// The branch does not exist on the remote.
    #[error("branch {branch:?} does not exist on {repo}")]
    BranchNotFound {
        /// The branch asked for.
        branch: String,
        /// The repository.
        repo: String,
    },
    /// A revision does not name a commit known to the clone.
    #[error("{rev:?} is not a commit known to {repo} (fetched? mistyped?)")]
    UnknownCommit {
        /// The revision asked for.
        rev: String,
        /// The repository.
        repo: String,
    },
    /// Every push attempt of a revert was rejected by the remote.
    #[error(
        "pushing the revert of {commit} to {branch} on {repo} was rejected {attempts} time(s); last rejection: {reason}"
    )]
    PushRejected {
        /// The commit being reverted.
        commit: String,
        /// The branch pushed to.
        branch: String,
        /// The repository.
        repo: String,
        /// How many pushes were tried.
        attempts: u32,
        /// The remote's last rejection, as git reported it.
        reason: String,
    },
    /// git's output did not have the expected shape.
    #[error("unexpected output from `{command}` for {repo}: {detail}")]
    UnexpectedOutput {
        /// The git command line (redacted).
        command: String,
        /// The repository.
        repo: String,
        /// What was wrong.
        detail: String,
    },
    /// A caller's argument was refused before reaching git.
    #[error("invalid {what} {value:?}: {reason}")]
    InvalidInput {
        /// Which argument.
        what: &'static str,
        /// Its value.
        value: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A file-system operation failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// On which path.
        path: String,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
