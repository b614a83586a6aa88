//! One module per subcommand. Each `run` returns the exit code it wants, or an error that
//! `exit_code_of` maps: a `UsageError` is exit 2, anything else exit 1.

pub mod demo;
pub mod guard;
pub mod lint;
pub mod once;
pub mod sandbox;
pub mod status;
pub mod trailer;
pub mod watch;

pub use greenlight::{UsageError, usage};

pub fn exit_code_of(err: &anyhow::Error) -> u8 {
    if err.chain().any(|e| e.is::<UsageError>()) {
        2
    } else {
        1
    }
}
