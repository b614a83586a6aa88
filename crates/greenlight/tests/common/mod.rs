//! Shared harness for the binary's end-to-end tests: the test kit's git remote, child processes,
//! sandbox and watchdog bound to this crate's `greenlight` binary, and the deployment repository
//! these tests deploy from. Waits are on printed lines and recorded states, never fixed sleeps.
// Each test file uses part of this module (and of what it re-exports).
#![allow(dead_code, unused_imports, unused_macros)]

use greenlight_testkit as kit;
pub use greenlight_testkit::{Proc, Remote, Sandbox, Watchdog, git, healthy_at, watch_of};
use serde_json::Value;
use std::ops::Deref;
use std::path::Path;
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_greenlight");
pub const GOOD: &str = "registry.local/web:1.0.0";
pub const GOOD2: &str = "registry.local/web:1.1.0";
pub const BAD: &str = "registry.local/web:2.0.0-does-not-exist";

pub fn deployment(name: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: apps\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n        - name: main\n          image: {image}\n"
    )
}

/// A bare remote and a human's working repository (the kit's [`Remote`]).
pub struct Repo(Remote);

impl Deref for Repo {
    type Target = Remote;
    fn deref(&self) -> &Remote {
        &self.0
    }
}

impl Repo {
    /// A remote whose `main` holds `apps/web` (and `apps/other`) at good images.
    #[track_caller]
    pub fn new() -> Repo {
        let remote = Remote::new("main");
        remote
            .write("apps/web/deploy.yaml", &deployment("web", GOOD))
            .write("apps/other/deploy.yaml", &deployment("other", GOOD))
            .commit_push("initial deploy");
        Repo(remote)
    }

    /// Sets `app`'s image, commits with `message`, pushes; returns the new sha.
    #[track_caller]
    pub fn set_image(&self, app: &str, image: &str, message: &str) -> String {
        self.write(&format!("apps/{app}/deploy.yaml"), &deployment(app, image));
        self.commit_push(message)
    }
}

thread_local! {
    /// The Argo CD version the sandboxes of this test thread stand in for; `None` is the
    /// sandbox's default.
    static ARGOCD_VERSION: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

/// The Argo CD version this test thread's sandboxes stand in for (`None`: the default, 3.5).
pub fn argocd_version() -> Option<&'static str> {
    ARGOCD_VERSION.with(|v| v.get())
}

/// Runs `test` with every sandbox it starts standing in for Argo CD `version`.
pub fn on_argocd(version: &'static str, test: fn()) {
    ARGOCD_VERSION.with(|v| v.set(Some(version)));
    test();
}

/// Declares each named test function once per Argo CD version the sandbox stands in for
/// (modules `argocd_3_5` and `argocd_2_14`): the watchdog must hold against both.
macro_rules! on_every_argocd_version {
    ($($name:ident),* $(,)?) => {
        mod argocd_3_5 {
            $( #[test] fn $name() { crate::common::on_argocd("3.5", super::$name) } )*
        }
        mod argocd_2_14 {
            $( #[test] fn $name() { crate::common::on_argocd("2.14", super::$name) } )*
        }
    };
}

/// `greenlight sandbox` over `repo` with the kit's test timings (and the Argo CD version this
/// test thread runs against, see [`on_argocd`]).
#[track_caller]
pub fn sandbox(repo: &Repo, apps: &[&str], extra: &[&str]) -> Sandbox {
    let mut args = extra.to_vec();
    if let Some(v) = ARGOCD_VERSION.with(|v| v.get()) {
        args.extend(["--argocd-version", v]);
    }
    Sandbox::start(BIN, &repo.repo(), apps, &args)
}

/// The arguments of `greenlight watch` over `repo` with the kit's test timings.
pub fn watch_args(repo: &Repo, url: &str, state: &Path, extra: &[&str]) -> Vec<String> {
    kit::watch_args(&repo.repo(), url, state, extra)
}

/// `greenlight watch` over `repo`, recording in `state/greenlight.db` beside it.
#[track_caller]
pub fn watchdog(repo: &Repo, url: &str, extra: &[&str], envs: &[(&str, &str)]) -> Watchdog {
    watchdog_with_state(repo, url, &repo.path("state/greenlight.db"), extra, envs)
}

/// `greenlight watch` over `repo`, recording in `state`.
#[track_caller]
pub fn watchdog_with_state(
    repo: &Repo,
    url: &str,
    state: &Path,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> Watchdog {
    Watchdog::start(BIN, &repo.repo(), url, state, extra, envs)
}

/// A loopback address no one listens on (found by binding and letting go): for `--listen`.
pub fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// `greenlight status --json` of `state`.
#[track_caller]
pub fn status_json(state: &Path) -> Value {
    kit::status_json(BIN, state)
}

/// Waits until the watch of `commit` in `state_file` is `want` (see the kit's `wait_state`).
#[track_caller]
pub fn wait_state(
    state_file: &Path,
    commit: &str,
    want: &str,
    within: Duration,
    proc: &Proc,
) -> Value {
    kit::wait_state(BIN, state_file, commit, None, want, within, proc)
}

/// Waits until each of `apps` is Healthy and Synced at the remote's tip: the app as it is before
/// a test's commit, so that the commit's failure can be laid on it (`docs/verdicts.md#baseline`).
#[track_caller]
pub fn settled(sb: &Sandbox, repo: &Repo, apps: &[&str]) {
    let tip = repo.remote_tip();
    for app in apps {
        sb.wait_app(app, std::time::Duration::from_secs(60), |a| {
            healthy_at(a, &tip)
        });
    }
}

pub fn count_reverts_of(repo: &Repo, commit: &str) -> usize {
    repo.bare_git(&["log", "--format=%B", "main"])
        .matches(&format!("This reverts commit {commit}."))
        .count()
}

/// App `web`'s ConfigMap `web-config` holding `value`: a change Argo CD syncs that breaks nothing.
pub fn config_map(value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\n  namespace: apps\ndata:\n  value: \"{value}\"\n"
    )
}

/// A PostSync hook Job whose run fails, as a team's smoke test that fails does.
pub fn failing_smoke_test() -> String {
    "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: smoke\n  namespace: apps\n  annotations: {argocd.argoproj.io/hook: PostSync, sandbox.greenlight.dev/hook: fail}\nspec:\n  template:\n    spec:\n      containers: [{name: smoke, image: 'curl:8'}]\n      restartPolicy: Never\n".to_string()
}

pub fn trailer(app: &str, deadline: &str, mode: &str) -> String {
    format!("Nav-Watchdog: app={app} deadline={deadline} mode={mode}")
}

/// The judge's timings of the one-shot commands' tests (`promote run`, `wait`): seconds, not
/// minutes.
pub const JUDGE_TIMINGS: [&str; 8] = [
    "--stable-for",
    "2s",
    "--fetch-interval",
    "200ms",
    "--stale-after",
    "3s",
    "--unknown-app-grace",
    "3s",
];

/// `greenlight promote <action> --config <config>` over `repo` and the Argo CD at `argocd_url`,
/// with the kit's test timings, then `extra`.
pub fn promote_cmd(
    repo: &Repo,
    argocd_url: &str,
    action: &str,
    config: &str,
    extra: &[&str],
) -> std::process::Output {
    let mut args: Vec<String> = [
        "promote",
        action,
        "--config",
        config,
        "--repo",
        &repo.repo(),
        "--argocd-url",
        argocd_url,
        "--git-author",
        "greenlight-bot <bot@greenlight.test>",
    ]
    .map(String::from)
    .into();
    args.extend(JUDGE_TIMINGS.iter().chain(extra).map(|s| s.to_string()));
    std::process::Command::new(BIN)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run greenlight")
}

/// A push of a commit whose subject starts with `subject` lands on the remote but does not
/// return until the returned file exists: the ref is updated before post-receive runs, and the
/// pusher waits for the hook. Other pushes (a human's) pass at once, so the hook is in place
/// before the bad commit, with no race.
pub fn hold_pushes_of(repo: &Repo, subject: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let release = repo.path("release");
    let hook = repo.bare.join("hooks/post-receive");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\nread old new ref\n\
             case \"$(git log -1 --format=%s \"$new\")\" in '{subject}'*) ;; *) exit 0 ;; esac\n\
             i=0\nwhile [ ! -f '{}' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n",
            release.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    release
}
