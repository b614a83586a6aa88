//! greenlight's repository port: everything the watchdog reads from, and the one thing it
//! writes to, a git repository — through the `git` command line, run isolated from the
//! user's and the system's git configuration.
//!
//! Owns greenlight's own clone of the watched remote (under its data directory), the
//! revert-and-push write path, the promotion gate's change commits, and the rules that keep secrets out of argv, errors and
//! logs. It must never force a push, never touch a repository it did not clone, and never
//! put a token in a process argument or an error message.
//!
//! Unix only: credentials reach git through a shell script, as its credential helper.

mod change;
mod checks;
mod command;
mod error;
mod in_process;
mod push_loop;
mod repo;
mod revert;
mod secret;

pub use change::{ChangeOutcome, ChangeRequest, FileChange};
pub use command::ASKPASS_SCRIPT;
pub use error::{Error, Result};
pub use repo::{Auth, CommitData, Repo, stale_locks_note};
pub use revert::{RevertOutcome, RevertRequest, revert_message};
pub use secret::{Secret, SecretFileError, redact, redact_url};

#[cfg(test)]
mod tests {
    /// The daemon shares one `Repo` between its tasks (`Arc<Repo>`).
    #[test]
    fn repo_is_shareable_across_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<crate::Repo>();
        shareable::<crate::Error>();
    }
}
