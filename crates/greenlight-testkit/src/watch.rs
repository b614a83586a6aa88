//! `greenlight watch` (the watchdog daemon) as a child process, and its recorded state read
//! through `greenlight status --json`, as an operator reads it.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::process::Proc;

/// The watch states a watch never leaves (except a FAIL whose revert is being pushed), as
/// `status --json` spells them.
pub const TERMINAL_STATES: [&str; 7] = [
    "CONFIRMED",
    "FAIL",
    "REVERTED",
    "NOT_REACHED",
    "ERROR_UNWATCHABLE",
    "INCONCLUSIVE",
    "REVERT_FAILED",
];

/// What the daemon prints once it watches.
pub const WATCHING: &str = "watching ";

/// How long start-up may take before the test fails.
const START: Duration = Duration::from_secs(60);

/// How often [`wait_state`] reads the state again.
const POLL: Duration = Duration::from_millis(50);

/// The arguments of `greenlight watch` for `repo` and the Argo CD at `argocd_url`, recording in
/// `state`, with test timings (`--stable-for 2s --fetch-interval 200ms --stale-after 3s
/// --unknown-app-grace 3s`) and a bot identity, then `extra`.
pub fn watch_args(repo: &str, argocd_url: &str, state: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "watch",
        "--repo",
        repo,
        "--argocd-url",
        argocd_url,
        "--state",
        state.to_str().unwrap(),
        "--stable-for",
        "2s",
        "--fetch-interval",
        "200ms",
        "--stale-after",
        "3s",
        "--unknown-app-grace",
        "3s",
        "--git-author",
        "greenlight-bot <bot@greenlight.test>",
    ]
    .map(String::from)
    .into();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// A running watchdog and the state file it records in.
pub struct Watchdog {
    pub proc: Proc,
    pub state: PathBuf,
    bin: OsString,
}

impl Watchdog {
    /// `bin` with [`watch_args`] and extra environment `envs`, waited for until it watches.
    #[track_caller]
    pub fn start(
        bin: impl AsRef<OsStr>,
        repo: &str,
        argocd_url: &str,
        state: &Path,
        extra: &[&str],
        envs: &[(&str, &str)],
    ) -> Watchdog {
        let bin = bin.as_ref().to_owned();
        let proc = Proc::spawn(&bin, watch_args(repo, argocd_url, state, extra), envs);
        proc.wait_line(WATCHING, START);
        Watchdog {
            proc,
            state: state.to_owned(),
            bin,
        }
    }

    /// [`Watchdog::start`] with some of the kit's timings set to other values (`("--stable-for",
    /// "6s")`, …).
    #[track_caller]
    pub fn start_timed(
        bin: impl AsRef<OsStr>,
        repo: &str,
        argocd_url: &str,
        state: &Path,
        timings: &[(&str, &str)],
    ) -> Watchdog {
        let bin = bin.as_ref().to_owned();
        let mut args = watch_args(repo, argocd_url, state, &[]);
        for (flag, value) in timings {
            let i = args
                .iter()
                .position(|a| a == flag)
                .unwrap_or_else(|| panic!("{flag} is not one of the kit's timings"));
            args[i + 1] = value.to_string();
        }
        let proc = Proc::spawn(&bin, args, &[]);
        proc.wait_line(WATCHING, START);
        Watchdog {
            proc,
            state: state.to_owned(),
            bin,
        }
    }

    /// `status --json` of this watchdog's state.
    #[track_caller]
    pub fn status(&self) -> Value {
        status_json(&self.bin, &self.state)
    }

    /// Waits until the watch of `commit` is in `state`; fails at once on another terminal state.
    #[track_caller]
    pub fn wait_state(&self, commit: &str, state: &str, within: Duration) -> Value {
        wait_state(
            &self.bin,
            &self.state,
            commit,
            None,
            state,
            within,
            &self.proc,
        )
    }

    /// [`Watchdog::wait_state`] for the watch of `commit` on `app` (a commit with trailers
    /// for several apps has one watch each).
    #[track_caller]
    pub fn wait_state_of(&self, commit: &str, app: &str, state: &str, within: Duration) -> Value {
        wait_state(
            &self.bin,
            &self.state,
            commit,
            Some(app),
            state,
            within,
            &self.proc,
        )
    }
}

/// Every verdict a test waits for is replayed from its tape as soon as it is recorded
/// (`greenlight why <commit>`, `docs/why.md`; a watch and its tape are read together, so a
/// running daemon is no obstacle): a replay that judges otherwise (exit 3) fails the test.
#[track_caller]
pub fn replays_the_same(bin: &OsStr, state_file: &Path, commit: &str) {
    let out = Command::new(bin)
        .args(["why", commit, "--state"])
        .arg(state_file)
        .output()
        .expect("why runs");
    assert_ne!(
        out.status.code(),
        Some(3),
        "the verdict of {commit} replays otherwise (greenlight why {commit} --state {}):\n{}{}",
        state_file.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every verdict a watchdog of the end-to-end suite recorded is replayed from its tape when the
/// test is done with it (`greenlight why --all`, `docs/why.md`): the process is stopped first,
/// so that what is replayed is what it last wrote. A replay that judges otherwise (exit 3)
/// fails the test. A store `why` cannot read (a cluster store, a file a test corrupted on
/// purpose) has no verdict to replay.
impl Drop for Watchdog {
    fn drop(&mut self) {
        if std::thread::panicking() || !self.state.is_file() {
            return;
        }
        self.proc.kill9();
        let out = Command::new(&self.bin)
            .args(["why", "--all", "--state"])
            .arg(&self.state)
            .output()
            .expect("why runs");
        if out.status.code() == Some(3) {
            panic!(
                "a recorded verdict replays otherwise (greenlight why --all --state {}):\n{}{}",
                self.state.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// `bin status --json --state <state>`, parsed; fails unless it succeeds.
#[track_caller]
pub fn status_json(bin: impl AsRef<OsStr>, state: &Path) -> Value {
    let out = Command::new(bin)
        .args(["status", "--json", "--state"])
        .arg(state)
        .output()
        .expect("status runs");
    assert!(
        out.status.success(),
        "status failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("status --json prints JSON")
}

/// The watch of `commit` in a `status --json` document.
pub fn watch_of<'a>(status: &'a Value, commit: &str) -> Option<&'a Value> {
    watch_of_app(status, commit, None)
}

/// The watch of `commit` (on `app`, when given) in a `status --json` document.
pub fn watch_of_app<'a>(status: &'a Value, commit: &str, app: Option<&str>) -> Option<&'a Value> {
    let watches = status["watches"].as_array()?;
    let first = watches
        .iter()
        .find(|w| w["commit"] == commit && app.is_none_or(|a| w["app"] == a))?;
    // A watch that re-opened after NOT_REACHED (`<id>~<n>`) is the one still deciding.
    let reopened = format!("{}~", first["id"].as_str().unwrap_or_default());
    Some(
        watches
            .iter()
            .rev()
            .find(|w| w["id"].as_str().is_some_and(|id| id.starts_with(&reopened)))
            .unwrap_or(first),
    )
}

/// Waits until the watch of `commit` recorded in `state_file` is in state `want`, and returns
/// it. Fails at once when it ends in another terminal state (a FAIL whose revert is pending —
/// asked of git or proposed as a pull request — is still on its way), and after `within`; both show `proc`'s output.
#[track_caller]
pub fn wait_state(
    bin: impl AsRef<OsStr>,
    state_file: &Path,
    commit: &str,
    app: Option<&str>,
    want: &str,
    within: Duration,
    proc: &Proc,
) -> Value {
    let end = Instant::now() + within;
    loop {
        if state_file.exists() {
            let st = status_json(bin.as_ref(), state_file);
            if let Some(w) = watch_of_app(&st, commit, app) {
                let s = w["state"].as_str().unwrap_or("");
                if s == want {
                    if TERMINAL_STATES.contains(&s) {
                        replays_the_same(bin.as_ref(), state_file, commit);
                    }
                    return w.clone();
                }
                let reverting = s == "FAIL"
                    && (w["reason"].as_str().unwrap_or("").ends_with("; reverting")
                        || w["revert_pending"] == true);
                assert!(
                    !TERMINAL_STATES.contains(&s) || reverting,
                    "watch of {commit} ended {s} ({}), expected {want}; output:\n{}",
                    w["reason"],
                    proc.output()
                );
            }
        }
        assert!(
            Instant::now() < end,
            "watch of {commit} not {want} within {within:?}; output:\n{}",
            proc.output()
        );
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_args_put_the_extra_flags_last() {
        let args = watch_args("/r.git", "http://a", Path::new("/s.db"), &["--once"]);
        assert_eq!(
            &args[..7],
            [
                "watch",
                "--repo",
                "/r.git",
                "--argocd-url",
                "http://a",
                "--state",
                "/s.db"
            ]
        );
        assert_eq!(args.last().unwrap(), "--once");
    }

    #[test]
    fn watch_of_finds_the_commit() {
        let st = serde_json::json!({"watches": [{"commit": "a", "state": "JUDGING"}, {"commit": "b", "state": "FAIL"}]});
        assert_eq!(watch_of(&st, "b").unwrap()["state"], "FAIL");
        assert!(watch_of(&st, "c").is_none());
        assert!(watch_of(&Value::Null, "a").is_none());
    }

    /// A stand-in for the binary: a script answering `status --json` from a file.
    fn fake_status(dir: &Path, json: &str) -> PathBuf {
        let bin = dir.join("fake-greenlight");
        std::fs::write(dir.join("status.json"), json).unwrap();
        std::fs::write(
            &bin,
            format!("#!/bin/sh\ncat '{}'\n", dir.join("status.json").display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        bin
    }

    #[test]
    fn wait_state_returns_the_wanted_state_and_fails_at_once_on_another_end() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state.db");
        std::fs::write(&state, "").unwrap();
        let idle = Proc::spawn("true", [""; 0], &[]);
        let bin = fake_status(
            dir.path(),
            r#"{"watches": [{"commit": "c1", "state": "CONFIRMED", "reason": "ok"}]}"#,
        );
        let w = wait_state(
            &bin,
            &state,
            "c1",
            None,
            "CONFIRMED",
            Duration::from_secs(20),
            &idle,
        );
        assert_eq!(w["reason"], "ok");

        let started = Instant::now();
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait_state(
                &bin,
                &state,
                "c1",
                None,
                "REVERTED",
                Duration::from_secs(600),
                &idle,
            )
        }))
        .expect_err("CONFIRMED is not REVERTED");
        assert!(started.elapsed() < Duration::from_secs(60));
        let text = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(text.contains("ended CONFIRMED"), "{text}");
    }
}
