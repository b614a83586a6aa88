//! One module per subcommand. Each `run` returns the exit code it wants, or an error that
//! `exit_code_of` maps: a `UsageError` is exit 2, anything else exit 1.
//!
//! This module also owns the readers every subcommand shares, so that one kind of flag means
//! one thing everywhere: durations, token files and the config file. They only turn flags
//! into values and errors into usage errors; the grammar and the reading live in the library
//! crates.

use greenlight_core::time::parse_duration_ms;
use greenlight_git::Secret;
use greenlight_lint::Config;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// `println!` for a command's answer, through [`out`]: `?` passes on a write error.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cmd::out(&format!("{}\n", format_args!($($arg)*)))?
    };
}

/// `eprintln!` for a command's messages, through [`err`].
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::cmd::err(&format!("{}\n", format_args!($($arg)*)))?
    };
}

pub mod args;
pub mod audit;
pub mod completions;
pub mod config;
pub mod demo;
pub mod demo_promote;
pub mod events;
pub mod guard;
pub mod leader;
pub mod lint;
pub mod notify;
pub mod once;
pub mod promote;
pub mod promote_gc;
pub mod promote_prune;
pub mod promote_run;
pub mod record;
pub mod sandbox;
pub mod state;
pub mod status;
pub mod trailer;
pub mod verify;
pub mod wait;
pub mod watch;
pub mod why;

pub use greenlight::{UsageError, usage};

/// Writes a command's answer to stdout. A reader that has gone (`| head` that read enough)
/// ends the command as it ends `git log | head`: by SIGPIPE, without a word. Only the
/// standard streams are treated so: Rust's runtime keeps SIGPIPE ignored, so a socket or a
/// child's pipe that closes is an error to handle, never a silent death.
pub fn out(text: &str) -> anyhow::Result<()> {
    write_or_end(&mut std::io::stdout().lock(), text)
}

/// [`out`] for stderr.
pub fn err(text: &str) -> anyhow::Result<()> {
    write_or_end(&mut std::io::stderr().lock(), text)
}

fn write_or_end(w: &mut impl Write, text: &str) -> anyhow::Result<()> {
    match w.write_all(text.as_bytes()).and_then(|()| w.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => end_by_sigpipe(),
        r => Ok(r?),
    }
}

/// Ends the process as SIGPIPE's default action does.
fn end_by_sigpipe() -> ! {
    #[cfg(unix)]
    // SAFETY: restores the default action of one signal and raises it; nothing else is touched.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(141)
}

pub fn exit_code_of(err: &anyhow::Error) -> u8 {
    if err.chain().any(|e| e.is::<UsageError>()) {
        2
    } else {
        1
    }
}

/// Reads a duration flag (`--stable-for 2m`). Every duration flag goes through here, so all
/// share one grammar, [`parse_duration_ms`]'s, and a bad value is a usage error naming the flag.
pub fn duration_flag(flag: &str, text: &str) -> anyhow::Result<Duration> {
    let ms = parse_duration_ms(text).map_err(|e| usage(format!("{flag}: {e}")))?;
    // The grammar has no sign; a negative count would be a parser bug, refused rather than
    // wrapped around.
    let ms =
        u64::try_from(ms).map_err(|_| usage(format!("{flag}: a duration is never negative")))?;
    Ok(Duration::from_millis(ms))
}

/// [`duration_flag`] for an interval, a window or a timeout, where zero makes no sense.
pub fn positive_duration_flag(flag: &str, text: &str) -> anyhow::Result<Duration> {
    let duration = duration_flag(flag, text)?;
    if duration.is_zero() {
        return Err(usage(format!("{flag} must be greater than zero")));
    }
    Ok(duration)
}

/// [`duration_flag`] as a clap value parser (`value_parser = duration_arg`): the text is kept
/// as given and read again by the command, but a bad one is refused while the arguments are
/// parsed, wherever it came from (the command line, the environment, the config file).
pub fn duration_arg(text: &str) -> Result<String, String> {
    duration_flag("", text)
        .map(|_| text.to_string())
        .map_err(|e| e.to_string().trim_start_matches(": ").to_string())
}

/// [`positive_duration_flag`] as a clap value parser, as [`duration_arg`].
pub fn positive_duration_arg(text: &str) -> Result<String, String> {
    match duration_flag("", text) {
        Ok(d) if d.is_zero() => Err("must be greater than zero".to_string()),
        Ok(_) => Ok(text.to_string()),
        Err(e) => Err(e.to_string().trim_start_matches(": ").to_string()),
    }
}

/// The spellings of a switch's value in the environment or a config file: on is 1, true, yes
/// or on; off is 0, false, no, off or empty (case and surrounding blanks ignored). Anything
/// else is `None`, which a switch refuses rather than guess (a safety switch fails closed).
pub fn switch_value(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" | "" => Some(false),
        _ => None,
    }
}

/// What [`switch_value`] accepts, in words, for error messages.
pub const SWITCH_SPELLINGS: &str =
    "set 1, true, yes or on for on, or 0, false, no, off or empty for off";

/// Reads the token file named by `flag`: a regular file of at most
/// [`TOKEN_LIMIT`](greenlight::files::TOKEN_LIMIT) bytes of UTF-8
/// ([`greenlight::files::read_text`]), trimmed ([`Secret::from_file_text`]). A missing,
/// unreadable, empty or oversized file, a FIFO, a device or a directory is a usage error naming
/// the flag and the path, never the contents.
pub fn secret_file(flag: &str, path: &Path) -> anyhow::Result<Secret> {
    let text = greenlight::files::read_text(path, greenlight::files::TOKEN_LIMIT, flag)
        .map_err(|e| usage(e.to_string()))?;
    Secret::from_file_text(flag, path, &text).map_err(|e| usage(e.to_string()))
}

/// Reads `.greenlight.toml` (or `--config FILE`) for `lint` and `guard` alike
/// ([`greenlight_lint::config::load`]): any problem with it is a usage error naming the file
/// and, for a bad value, its line and column.
pub fn config_file(explicit: Option<&Path>) -> anyhow::Result<Config> {
    greenlight_lint::config::load(explicit).map_err(|e| usage(e.to_string()))
}

/// [`parse_author`] as a clap value parser (`value_parser = author_arg`).
pub fn author_arg(text: &str) -> Result<String, String> {
    parse_author(text)
        .map(|_| text.to_string())
        .map_err(|_| "expected \"Name <email>\"".to_string())
}

/// `--git-author "Name <email>"` → (name, email); every command that commits reads it so.
pub(crate) fn parse_author(s: &str) -> anyhow::Result<(String, String)> {
    let bad = || usage(format!("--git-author {s:?}: expected \"Name <email>\""));
    let (name, rest) = s.split_once('<').ok_or_else(bad)?;
    let email = rest.strip_suffix('>').ok_or_else(bad)?.trim();
    let name = name.trim();
    if name.is_empty() || email.is_empty() || email.contains(['<', '>']) {
        return Err(bad());
    }
    Ok((name.to_string(), email.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_flags_accept_every_spelling_the_commands_documented() {
        for (text, ms) in [
            ("90", 90_000),
            ("90s", 90_000),
            ("15m", 900_000),
            ("2h", 7_200_000),
            ("500ms", 500),
            ("1m30s", 90_000),
            ("1h 30m", 5_400_000),
            ("1.5s", 1_500),
            ("0", 0),
        ] {
            assert_eq!(
                duration_flag("--x", text).unwrap(),
                Duration::from_millis(ms),
                "{text}"
            );
        }
    }

    #[test]
    fn duration_flag_errors_name_the_flag_and_exit_2() {
        let err = duration_flag("--rollout-time", "soon").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("--rollout-time: invalid duration \"soon\""),
            "{err}"
        );
        assert_eq!(exit_code_of(&err), 2);

        let err = positive_duration_flag("--sync-interval", "0s").unwrap_err();
        assert_eq!(err.to_string(), "--sync-interval must be greater than zero");
        assert_eq!(exit_code_of(&err), 2);
        assert_eq!(
            positive_duration_flag("--sync-interval", "200ms").unwrap(),
            Duration::from_millis(200)
        );
    }
}
