//! The watchdog as a library: the runtime that drives the judge ([`runtime`]), its state store
//! ([`store`]), the locks that keep one daemon per state file and clone ([`lock`]), the clock and
//! the voice; the reader of the promotion gate's configuration ([`promote`]) and its `http` and
//! `command` checks ([`checks`]); the one bounded, regular-file-only reader of the files a
//! user names by a flag or a config key ([`files`]); the daemon's watch over its own config file and binary, and
//! its re-exec ([`reexec`]). The `greenlight` binary's `cmd/` parses arguments and calls in
//! here; in-process tests drive [`runtime::Runtime`] with fake seams and a test clock.

pub mod argocd;
pub mod audit;
pub mod breaker;
pub mod checks;
pub mod clock;
pub mod hooks;
/// Bounded reads of the files a user names (the `greenlight-files` crate, which the lint
/// crate shares).
pub use greenlight_files as files;
pub mod kube;
pub mod leader;
pub mod lock;
pub mod metrics;
pub mod notify;
pub mod output;
pub mod promote;
pub mod reexec;
pub mod runtime;
pub mod serve;
pub mod store;
pub mod verify;
pub mod wait;
pub mod why;

/// The environment variable a git token may be given in instead of `--git-token-file` (read
/// once at start, never logged; no child but git's credential script is given it).
pub const GIT_TOKEN_ENV: &str = "GREENLIGHT_GIT_TOKEN";

/// A configuration or usage problem: the binary exits 2 for it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}
