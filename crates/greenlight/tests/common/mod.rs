//! Shared harness for end-to-end tests: real git repositories built with the git CLI, the
//! `greenlight sandbox` and `greenlight watch` binaries as child processes, and waits on
//! printed lines and recorded states — never on fixed sleeps.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_greenlight");
pub const GOOD: &str = "registry.local/web:1.0.0";
pub const GOOD2: &str = "registry.local/web:1.1.0";
pub const BAD: &str = "registry.local/web:2.0.0-does-not-exist";

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "Human")
        .env("GIT_AUTHOR_EMAIL", "human@example.com")
        .env("GIT_COMMITTER_NAME", "Human")
        .env("GIT_COMMITTER_EMAIL", "human@example.com")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {:?} failed: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub fn deployment(name: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: apps\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n        - name: main\n          image: {image}\n"
    )
}

/// A bare remote and a human's clone of it.
pub struct Repo {
    pub tmp: tempfile::TempDir,
    pub remote: PathBuf,
    pub work: PathBuf,
}

impl Repo {
    /// A remote whose `main` holds `apps/web` (and `apps/other`) at good images.
    pub fn new() -> Repo {
        let tmp = tempfile::tempdir().unwrap();
        let remote = tmp.path().join("origin.git");
        std::fs::create_dir_all(&remote).unwrap();
        git(&remote, &["init", "-q", "--bare", "--initial-branch=main"]);
        git(
            tmp.path(),
            &["clone", "-q", remote.to_str().unwrap(), "work"],
        );
        let work = tmp.path().join("work");
        git(&work, &["checkout", "-q", "-B", "main"]);
        let r = Repo { tmp, remote, work };
        r.write("apps/web/deploy.yaml", &deployment("web", GOOD));
        r.write("apps/other/deploy.yaml", &deployment("other", GOOD));
        r.commit_push("initial deploy");
        r
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.work.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn git(&self, args: &[&str]) -> String {
        git(&self.work, args)
    }

    /// Commit everything with `message`, push, return the new sha.
    pub fn commit_push(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.git(&["push", "-q", "origin", "HEAD:main"]);
        self.git(&["rev-parse", "HEAD"])
    }

    pub fn set_image(&self, app: &str, image: &str, message: &str) -> String {
        self.write(&format!("apps/{app}/deploy.yaml"), &deployment(app, image));
        self.commit_push(message)
    }

    pub fn remote_git(&self, args: &[&str]) -> String {
        git(&self.remote, args)
    }

    pub fn remote_tip(&self) -> String {
        self.remote_git(&["rev-parse", "main"])
    }

    /// Pull what others (greenlight) pushed.
    pub fn pull(&self) {
        self.git(&["pull", "-q", "--ff-only", "origin", "main"]);
    }
}

/// A child process whose stderr lines are collected as they arrive.
pub struct Proc {
    pub child: Child,
    lines: Arc<(Mutex<Vec<String>>, Condvar)>,
}

impl Proc {
    pub fn spawn(args: &[&str], envs: &[(&str, &str)]) -> Proc {
        Self::spawn_in(None, args, envs)
    }

    /// Spawn with `dir` as the working directory (for relative paths).
    pub fn spawn_in(dir: Option<&Path>, args: &[&str], envs: &[(&str, &str)]) -> Proc {
        let mut cmd = Command::new(BIN);
        if let Some(d) = dir {
            cmd.current_dir(d);
        }
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn greenlight");
        let lines: Arc<(Mutex<Vec<String>>, Condvar)> = Arc::default();
        for stream in [
            Box::new(child.stderr.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stdout.take().unwrap()),
        ] {
            let l = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    if std::env::var_os("GREENLIGHT_TEST_ECHO").is_some() {
                        eprintln!("| {line}");
                    }
                    l.0.lock().unwrap().push(line);
                    l.1.notify_all();
                }
            });
        }
        Proc { child, lines }
    }

    /// Wait for a line containing `needle`; return it.
    pub fn wait_line(&self, needle: &str, within: Duration) -> String {
        let end = Instant::now() + within;
        let (m, cv) = &*self.lines;
        let mut g = m.lock().unwrap();
        loop {
            if let Some(l) = g.iter().find(|l| l.contains(needle)) {
                return l.clone();
            }
            let now = Instant::now();
            assert!(
                now < end,
                "no line containing {needle:?} within {within:?}; output:\n{}",
                g.join("\n")
            );
            g = cv.wait_timeout(g, end - now).unwrap().0;
        }
    }

    pub fn output(&self) -> String {
        self.lines.0.lock().unwrap().join("\n")
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Wait for the process to exit by itself.
    pub fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let end = Instant::now() + within;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                Instant::now() < end,
                "process did not exit; output:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Sandbox {
    pub proc: Proc,
    pub url: String,
}

impl Sandbox {
    pub fn start(repo: &Repo, apps: &[&str], extra: &[&str]) -> Sandbox {
        let remote = repo.remote.to_str().unwrap().to_string();
        let mut args: Vec<String> = vec![
            "sandbox".into(),
            "--repo".into(),
            remote,
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--sync-interval".into(),
            "200ms".into(),
            "--rollout-time".into(),
            "1s".into(),
        ];
        for a in apps {
            args.push("--app".into());
            args.push(a.to_string());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let proc = Proc::spawn(&argv, &[]);
        let line = proc.wait_line("sandbox listening on ", Duration::from_secs(30));
        let url = line
            .split("sandbox listening on ")
            .nth(1)
            .unwrap()
            .trim()
            .to_string();
        Sandbox { proc, url }
    }

    pub fn control(&self, path: &str) {
        let url = format!("{}{}", self.url, path);
        http_post(&url);
    }

    pub fn app(&self, name: &str) -> Value {
        let url = format!("{}/api/v1/applications/{name}", self.url);
        serde_json::from_str(&http_get(&url)).unwrap_or(Value::Null)
    }

    /// Wait until the app satisfies `ok`.
    pub fn wait_app(&self, name: &str, within: Duration, ok: impl Fn(&Value) -> bool) -> Value {
        let end = Instant::now() + within;
        loop {
            let app = self.app(name);
            if ok(&app) {
                return app;
            }
            assert!(
                Instant::now() < end,
                "app {name} never satisfied the condition; last: {}",
                app["status"]
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

pub fn healthy_at(app: &Value, rev: &str) -> bool {
    app["status"]["health"]["status"] == "Healthy"
        && app["status"]["sync"]["status"] == "Synced"
        && app["status"]["sync"]["revision"] == rev
}

fn http(method: &str, url: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, "/".into()));
    let Ok(mut s) = std::net::TcpStream::connect(host) else {
        return String::new();
    };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    if s.write_all(req.as_bytes()).is_err() {
        return String::new();
    }
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    let Some((head, body)) = buf.split_once("\r\n\r\n") else {
        return String::new();
    };
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        // De-chunk.
        let mut out = String::new();
        let mut rest = body;
        while let Some((len, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
            if n == 0 || after.len() < n {
                break;
            }
            out.push_str(&after[..n]);
            rest = after[n..].trim_start_matches("\r\n");
        }
        return out;
    }
    body.to_string()
}

pub fn http_get(url: &str) -> String {
    http("GET", url)
}

pub fn http_post(url: &str) -> String {
    http("POST", url)
}

/// The watchdog daemon as a child process.
pub struct Watchdog {
    pub proc: Proc,
    pub state: PathBuf,
}

pub fn watch_args(repo: &Repo, url: &str, state: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "watch".into(),
        "--repo".into(),
        repo.remote.to_str().unwrap().into(),
        "--argocd-url".into(),
        url.into(),
        "--state".into(),
        state.to_str().unwrap().into(),
        "--stable-for".into(),
        "2s".into(),
        "--fetch-interval".into(),
        "200ms".into(),
        "--stale-after".into(),
        "3s".into(),
        "--unknown-app-grace".into(),
        "3s".into(),
        "--git-author".into(),
        "greenlight-bot <bot@greenlight.test>".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

impl Watchdog {
    pub fn start(repo: &Repo, url: &str, extra: &[&str], envs: &[(&str, &str)]) -> Watchdog {
        let state = repo.path("state/greenlight.db");
        Self::start_with_state(repo, url, &state, extra, envs)
    }

    pub fn start_with_state(
        repo: &Repo,
        url: &str,
        state: &Path,
        extra: &[&str],
        envs: &[(&str, &str)],
    ) -> Watchdog {
        let args = watch_args(repo, url, state, extra);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let proc = Proc::spawn(&argv, envs);
        proc.wait_line("watching ", Duration::from_secs(60));
        Watchdog {
            proc,
            state: state.to_path_buf(),
        }
    }

    pub fn status(&self) -> Value {
        status_json(&self.state)
    }

    /// Wait until the watch of `commit` reaches `state`; fail at once on another terminal state.
    pub fn wait_state(&self, commit: &str, state: &str, within: Duration) -> Value {
        wait_state(&self.state, commit, state, within, &self.proc)
    }
}

pub fn status_json(state: &Path) -> Value {
    let out = Command::new(BIN)
        .args(["status", "--json", "--state", state.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "status failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("status --json prints JSON")
}

pub fn watch_of<'a>(status: &'a Value, commit: &str) -> Option<&'a Value> {
    status["watches"]
        .as_array()?
        .iter()
        .find(|w| w["commit"] == commit)
}

const TERMINAL: &[&str] = &[
    "CONFIRMED",
    "FAIL",
    "REVERTED",
    "NOT_REACHED",
    "ERROR_UNWATCHABLE",
    "INCONCLUSIVE",
    "REVERT_FAILED",
];

pub fn wait_state(
    state_file: &Path,
    commit: &str,
    want: &str,
    within: Duration,
    proc: &Proc,
) -> Value {
    let end = Instant::now() + within;
    loop {
        if state_file.exists() {
            let st = status_json(state_file);
            if let Some(w) = watch_of(&st, commit) {
                let s = w["state"].as_str().unwrap_or("");
                if s == want {
                    return w.clone();
                }
                // A FAIL whose revert is being pushed is on its way to REVERTED or REVERT_FAILED.
                let reverting =
                    s == "FAIL" && w["reason"].as_str().unwrap_or("").ends_with("; reverting");
                assert!(
                    !TERMINAL.contains(&s) || reverting,
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
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn count_reverts_of(repo: &Repo, commit: &str) -> usize {
    repo.remote_git(&["log", "--format=%B", "main"])
        .matches(&format!("This reverts commit {commit}."))
        .count()
}

pub fn trailer(app: &str, deadline: &str, mode: &str) -> String {
    format!("Nav-Watchdog: app={app} deadline={deadline} mode={mode}")
}
