//! A child process run as a user runs it, with its stdout and stderr lines collected as they
//! arrive (interleaved, in arrival order) so a test can wait for a line with a bound instead of
//! sleeping. Set `GREENLIGHT_TEST_ECHO=1` to echo every line to the test's stderr as it comes.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How often an exit is checked for while waiting (the output streams are waited on directly).
const EXIT_POLL: Duration = Duration::from_millis(20);

#[derive(Default)]
struct Output {
    lines: Vec<String>,
    /// Output streams not yet at end of file.
    open: usize,
}

type Shared = Arc<(Mutex<Output>, Condvar)>;

/// The collected output, also after a failed wait panicked while holding it.
fn lock(shared: &Shared) -> MutexGuard<'_, Output> {
    shared.0.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A child process with its output collected; killed (SIGKILL) when dropped.
pub struct Proc {
    pub child: Child,
    output: Shared,
}

impl Proc {
    /// Spawns `program` with `args` and extra environment `envs`, in the current directory.
    #[track_caller]
    pub fn spawn<I, S>(program: impl AsRef<OsStr>, args: I, envs: &[(&str, &str)]) -> Proc
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Self::spawn_in(program, None, args, envs)
    }

    /// As [`Proc::spawn`], with `dir` (when given) as the working directory.
    #[track_caller]
    pub fn spawn_in<I, S>(
        program: impl AsRef<OsStr>,
        dir: Option<&Path>,
        args: I,
        envs: &[(&str, &str)],
    ) -> Proc
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(program);
        if let Some(d) = dir {
            cmd.current_dir(d);
        }
        cmd.args(args);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        Self::start(cmd)
    }

    /// Spawns a prepared command with stdin closed and stdout and stderr collected.
    #[track_caller]
    pub fn start(mut cmd: Command) -> Proc {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {:?}: {e}", cmd.get_program()));
        let output: Shared = Arc::default();
        let streams: [Box<dyn Read + Send>; 2] = [
            Box::new(child.stderr.take().unwrap()),
            Box::new(child.stdout.take().unwrap()),
        ];
        lock(&output).open = streams.len();
        let echo = std::env::var_os("GREENLIGHT_TEST_ECHO").is_some();
        for stream in streams {
            let out = output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    if echo {
                        eprintln!("| {line}");
                    }
                    lock(&out).lines.push(line);
                    out.1.notify_all();
                }
                lock(&out).open -= 1;
                out.1.notify_all();
            });
        }
        Proc { child, output }
    }

    /// Waits for a line containing `needle` (printed before or after this call) and returns
    /// the first such line. Fails when `within` runs out, or at once when the process closed
    /// its output without printing it.
    #[track_caller]
    pub fn wait_line(&self, needle: &str, within: Duration) -> String {
        self.wait_line_after("", needle, within)
    }

    /// Waits for a line containing `needle` printed after the first line containing `after`
    /// (`""`: from the start), as [`Proc::wait_line`] does: a state reached again (a stream
    /// connected after it was lost) rather than the first time.
    #[track_caller]
    pub fn wait_line_after(&self, after: &str, needle: &str, within: Duration) -> String {
        let end = Instant::now() + within;
        let mut out = lock(&self.output);
        loop {
            let from = if after.is_empty() {
                Some(0)
            } else {
                out.lines
                    .iter()
                    .position(|l| l.contains(after))
                    .map(|i| i + 1)
            };
            if let Some(l) = from.and_then(|i| out.lines[i..].iter().find(|l| l.contains(needle))) {
                return l.clone();
            }
            assert!(
                out.open > 0,
                "no line containing {needle:?} (after one containing {after:?}): the process closed its output; output:\n{}",
                out.lines.join("\n")
            );
            let now = Instant::now();
            assert!(
                now < end,
                "no line containing {needle:?} (after one containing {after:?}) within {within:?}; output:\n{}",
                out.lines.join("\n")
            );
            out = self
                .output
                .1
                .wait_timeout(out, end - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Every line so far, joined with newlines.
    pub fn output(&self) -> String {
        lock(&self.output).lines.join("\n")
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        lock(&self.output).lines.clone()
    }

    /// Whether the process has not exited yet.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// Waits for the process to exit by itself and for its output to be read to the end, so
    /// that [`Proc::output`] is complete. Fails when the process is still running after
    /// `within`. Output held open by a process it left behind is waited for within the same
    /// bound; after that, the status is returned with the output read so far.
    #[track_caller]
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let end = Instant::now() + within;
        loop {
            let status = self.child.try_wait().expect("try_wait");
            let now = Instant::now();
            let out = lock(&self.output);
            match status {
                Some(st) if out.open == 0 || now >= end => return st,
                None => assert!(
                    now < end,
                    "the process did not exit within {within:?}; output:\n{}",
                    out.lines.join("\n")
                ),
                Some(_) => {}
            }
            let _ = self.output.1.wait_timeout(out, EXIT_POLL.min(end - now));
        }
    }

    /// Kills the process with SIGKILL (no chance to clean up) and reaps it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM, as a service manager stopping it would; use [`Proc::wait_exit`] next.
    #[track_caller]
    pub fn sigterm(&self) {
        self.signal("TERM");
    }

    /// Sends the signal named `name` (`TERM`, `INT`, `HUP`, …), as `kill -<name>` does.
    pub fn signal(&self, name: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -{name} {} failed", self.child.id());
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A tool the tests run: the first of `places` that is a file, else `name` on `PATH`. Panics with
/// `missing` (which says how to get it) when there is none.
#[track_caller]
pub fn find_tool(name: &str, places: &[&str], missing: &str) -> PathBuf {
    places
        .iter()
        .map(PathBuf::from)
        .chain(
            std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths)
                .map(|dir| dir.join(name)),
        )
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{missing}"))
}

/// The first line `<binary> <args>` prints (stdout, then stderr): a tool's version line.
pub fn first_line_of(binary: &Path, args: &[&str]) -> String {
    let out = Command::new(binary)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {} {}: {e}", binary.display(), args.join(" ")));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    text.lines().next().unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(20);

    fn sh(script: &str) -> Proc {
        Proc::spawn("sh", ["-c", script], &[("WHO", "kit")])
    }

    #[test]
    fn lines_from_both_streams_are_waited_for_and_the_output_is_complete_at_exit() {
        let mut p = sh(
            "echo out-$WHO; echo err >&2; i=0; while [ $i -lt 200 ]; do echo line $i; i=$((i+1)); done; exit 3",
        );
        assert_eq!(p.wait_line("out-", T), "out-kit");
        assert_eq!(p.wait_line("err", T), "err");
        let status = p.wait_exit(T);
        assert_eq!(status.code(), Some(3));
        // Read to the end before wait_exit returned, never a partial tail.
        assert!(p.lines().iter().any(|l| l == "line 199"), "{}", p.output());
        assert_eq!(p.lines().len(), 202);
    }

    #[test]
    fn a_line_never_printed_fails_at_once_when_the_output_closes() {
        let p = sh("echo only");
        let started = Instant::now();
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            p.wait_line("never", Duration::from_secs(600))
        }))
        .expect_err("the line never comes");
        assert!(started.elapsed() < Duration::from_secs(60));
        let text = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            text.contains("closed its output") && text.contains("only"),
            "{text}"
        );
    }

    #[test]
    fn a_line_not_yet_printed_fails_when_the_bound_runs_out() {
        let p = sh("echo started; exec sleep 600");
        p.wait_line("started", T);
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            p.wait_line("never", Duration::from_millis(200))
        }))
        .expect_err("the line never comes");
        let text = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            text.contains("within 200ms") && text.contains("started"),
            "{text}"
        );
    }

    #[test]
    fn sigterm_and_kill9_end_a_process_that_would_run_on() {
        let mut p =
            sh("trap 'echo got TERM; exit 0' TERM; echo ready; while :; do sleep 0.05; done");
        p.wait_line("ready", T);
        assert!(p.is_running());
        p.sigterm();
        assert!(p.wait_exit(T).success());
        assert!(p.output().contains("got TERM"), "{}", p.output());

        let mut q = sh("echo ready; exec sleep 600");
        q.wait_line("ready", T);
        q.kill9();
        assert!(!q.is_running());
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sh("exec sleep 600").wait_exit(Duration::from_millis(100))
        }))
        .expect_err("it does not exit by itself");
        let text = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(text.contains("did not exit"), "{text}");
    }

    #[test]
    fn spawn_in_runs_in_the_given_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("marker"), "here").unwrap();
        let mut p = Proc::spawn_in("cat", Some(dir.path()), ["marker"], &[]);
        assert!(p.wait_exit(T).success());
        assert_eq!(p.output(), "here");
    }
}
