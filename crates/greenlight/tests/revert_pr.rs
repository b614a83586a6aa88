//! End to end: `greenlight watch --revert-via pull-request` on a protected branch, against the
//! sandbox's forge face (GitHub's, Gitea's and GitLab's pull-request APIs over the bare
//! repository its Argo CD stand-in syncs; docs/sandbox-fidelity.md), where a direct push to
//! `main` is refused as a branch protection refuses it. Real git throughout; a human's merge or
//! close is the face's control route. Waits are on printed lines and recorded states, never
//! fixed sleeps.

#[macro_use]
mod common;
use common::*;
use greenlight_testkit::{http_get, http_post};
use std::time::Duration;

const T: Duration = Duration::from_secs(60);
const TOKEN: &str = "forge-t0ken";

struct World {
    repo: Repo,
    sb: Sandbox,
    /// The forge's base URL (its control routes) and its API.
    forge: String,
    api: String,
    token: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// App `web` deployed and settled, `main` protected, the forge face (`flavour`) over the repo.
fn world(flavour: &str, forge_flags: &[&str]) -> World {
    world_of(&["web"], flavour, forge_flags)
}

/// [`world`] with `apps` (each `apps/<name>`) deployed.
fn world_of(apps: &[&str], flavour: &str, forge_flags: &[&str]) -> World {
    let repo = Repo::new();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("forge-token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let mut flags = vec![
        "--forge",
        flavour,
        "--forge-listen",
        "127.0.0.1:0",
        "--forge-token-file",
        token.to_str().unwrap(),
        "--forge-project",
        "acme/deploy",
        "--protect",
        "main",
    ];
    flags.extend_from_slice(forge_flags);
    let specs: Vec<String> = apps.iter().map(|a| format!("{a}=apps/{a}")).collect();
    let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
    let sb = sandbox(&repo, &specs, &flags);
    let line = sb
        .proc
        .wait_line(&format!("forge ({flavour}) listening on "), T);
    let forge = line
        .split("listening on ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap()
        .to_string();
    let api = line
        .split("(API ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap()
        .to_string();
    settled(&sb, &repo, apps);
    World {
        repo,
        sb,
        forge,
        api,
        token,
        _dir: dir,
    }
}

impl World {
    /// `watch`'s flags for reverts by pull request on this world's forge, with `token`.
    fn revert_args<'a>(&'a self, flavour: &'a str, token: &'a std::path::Path) -> Vec<&'a str> {
        vec![
            "--revert-via",
            "pull-request",
            "--forge",
            flavour,
            "--forge-url",
            &self.api,
            "--forge-project",
            "acme/deploy",
            "--forge-token-file",
            token.to_str().unwrap(),
        ]
    }

    fn watchdog(&self, flavour: &str) -> Watchdog {
        let args = self.revert_args(flavour, &self.token);
        watchdog(&self.repo, &self.sb.url, &args, &[])
    }

    fn watchdog_on(&self, state: &std::path::Path, flavour: &str) -> Watchdog {
        let args = self.revert_args(flavour, &self.token);
        watchdog_with_state(&self.repo, &self.sb.url, state, &args, &[])
    }

    fn control(&self, action: &str, number: u64) -> String {
        http_post(&format!(
            "{}/sandbox/v1/forge/{action}?number={number}",
            self.forge
        ))
    }

    /// The revert a REVERTED watch names is request `number`'s: its own commit (a merge brought
    /// it in; git saw it first) or the forge's merge of it (the forge said so first), and on
    /// `main`.
    fn landed(&self, st: &serde_json::Value, number: u64) {
        let revert = st["revert_commit"].as_str().unwrap();
        let pr = self.pull(number);
        assert!(
            revert == pr["head_sha"] || revert == pr["merge_commit"],
            "{st}\n{pr}"
        );
        assert_eq!(
            pr["merge_commit"].as_str(),
            Some(self.repo.remote_tip().as_str())
        );
    }

    fn pull(&self, number: u64) -> serde_json::Value {
        let body = http_get(&format!("{}/sandbox/v1/forge/pulls/{number}", self.forge));
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
    }

    /// A failing commit to `web`, armed, landed on `main` by an admin who may bypass the
    /// protection (the objects pushed to a branch of their own, `main` moved in the bare
    /// repository, as a forge's own merge moves it: its hook never sees it).
    fn bad_commit(&self, deadline: &str) -> String {
        self.admin_set_image(
            BAD,
            &format!("web: 2.0.0\n\n{}", trailer("web", deadline, "arm")),
        )
    }

    fn admin_set_image(&self, image: &str, message: &str) -> String {
        self.repo
            .write("apps/web/deploy.yaml", &deployment("web", image));
        self.admin_commit(message)
    }

    /// Commits what is written and lands it on `main` as [`World::bad_commit`] does.
    fn admin_commit(&self, message: &str) -> String {
        self.repo.git(&["add", "-A"]);
        self.repo.git(&["commit", "-q", "-m", message]);
        let sha = self.repo.git(&["rev-parse", "HEAD"]);
        self.repo
            .git(&["push", "-q", "origin", "HEAD:refs/heads/admin-stage"]);
        let old = self.repo.remote_tip();
        self.repo
            .bare_git(&["update-ref", "refs/heads/main", &sha, &old]);
        sha
    }
}

/// Without the forge's auto-merge, the revert waits as a pull request (FAIL, main untouched,
/// the request's body carrying the verdict's evidence, status saying where it waits), survives a
/// restart without a second request, and the watch ends REVERTED once a human merges it.
fn a_revert_waits_as_a_pull_request_and_ends_reverted_when_a_human_merges_it() {
    let w = world("github", &["--no-auto-merge"]);
    let mut wd = w.watchdog("github");
    let bad = w.bad_commit("4");
    let line = wd.proc.wait_line(" proposed as ", T);
    assert!(
        line.contains("/pull/1") || line.contains("/pulls/1"),
        "{line}"
    );
    assert!(line.contains("it waits for a human to merge it"), "{line}");
    let st = wd.wait_state(&bad, "FAIL", T);
    assert!(st["revert_commit"].is_null(), "{st}");
    assert!(
        st["reason"]
            .as_str()
            .unwrap()
            .contains("waiting for it to merge"),
        "{st}"
    );
    assert_eq!(
        w.repo.remote_tip(),
        bad,
        "nothing pushed to the protected main"
    );
    let pr = w.pull(1);
    assert_eq!(
        (pr["state"].as_str(), pr["base"].as_str()),
        (Some("open"), Some("main")),
        "{pr}"
    );
    assert!(
        pr["head"]
            .as_str()
            .unwrap()
            .starts_with("greenlight/revert/"),
        "{pr}"
    );
    let head = w
        .repo
        .bare_git(&["log", "-1", "--format=%B", pr["head_sha"].as_str().unwrap()]);
    assert!(
        head.contains(&format!("This reverts commit {bad}.")),
        "{head}"
    );
    assert!(
        head.contains(&format!("Greenlight-Revert-Of: {bad}")),
        "{head}"
    );

    // A restart follows the request; it opens no second one.
    wd.proc.kill9();
    let wd = w.watchdog_on(&wd.state, "github");
    wd.proc.wait_line("watching ", T);
    w.control("merge", 1);
    let st = wd.wait_state(&bad, "REVERTED", T);
    w.landed(&st, 1);
    assert!(
        st["reason"]
            .as_str()
            .unwrap()
            .ends_with("merged by pull request"),
        "{st}"
    );
    let second = http_get(&format!("{}/sandbox/v1/forge/pulls/2", w.forge));
    assert!(
        !second.contains("\"state\""),
        "a second request was opened: {second}"
    );
    assert_eq!(count_reverts_of(&w.repo, &bad), 1);
    let tip = w.repo.remote_tip();
    w.sb.wait_app("web", T, |a| healthy_at(a, &tip));
    let out = wd.proc.output();
    assert!(!out.contains(TOKEN), "{out}");
}

/// With auto-merge and nothing to wait for, the forge merges at once (Gitea merges on the
/// arming; GitHub refuses to arm a request that can merge now, and greenlight merges it): the
/// watch ends REVERTED through the request.
fn auto_merge_with_nothing_to_wait_for_reverts_through_the_request(flavour: &str) {
    let w = world(flavour, &[]);
    let wd = w.watchdog(flavour);
    let bad = w.bad_commit("4");
    let st = wd.wait_state(&bad, "REVERTED", T);
    assert_eq!(w.pull(1)["state"], "merged");
    // Merged as the request was armed: the forge's merge is what the executor reports.
    assert_eq!(
        st["revert_commit"].as_str(),
        Some(w.repo.remote_tip().as_str())
    );
    w.landed(&st, 1);
    assert_eq!(count_reverts_of(&w.repo, &bad), 1);
}

/// A request closed unmerged by a human: REVERT_FAILED, main untouched.
fn a_revert_request_closed_unmerged_is_revert_failed() {
    let w = world("gitlab", &["--no-auto-merge"]);
    let wd = w.watchdog("gitlab");
    let bad = w.bad_commit("4");
    wd.proc.wait_line(" proposed as ", T);
    w.control("close", 1);
    let st = wd.wait_state(&bad, "REVERT_FAILED", T);
    assert!(
        st["reason"]
            .as_str()
            .unwrap()
            .contains("closed without merging"),
        "{st}"
    );
    assert_eq!(w.repo.remote_tip(), bad);
}

/// A fix-forward to the app while the revert waits: the verdict no longer rests on evidence,
/// so greenlight closes its request; the watch ends FAIL, not reverted, and main keeps the fix.
fn a_fix_forward_while_the_revert_waits_withdraws_the_request() {
    let w = world("github", &["--no-auto-merge"]);
    let wd = w.watchdog("github");
    let bad = w.bad_commit("4");
    wd.proc.wait_line(" proposed as ", T);
    let fix = w.admin_set_image(GOOD2, "web: fix forward to 1.1.0");
    let st = wd.wait_state(&bad, "FAIL", T);
    let deadline = std::time::Instant::now() + T;
    while w.pull(1)["state"] != "closed" {
        assert!(std::time::Instant::now() < deadline, "{}", w.pull(1));
        std::thread::sleep(Duration::from_millis(100));
    }
    let st = wait_until_reason(&wd, &bad, "not reverted", st);
    assert!(st["revert_commit"].is_null(), "{st}");
    assert_eq!(w.repo.remote_tip(), fix, "the fix stays; nothing reverted");
    let out = wd.proc.output();
    assert!(
        out.contains("newer commits changed the app while the revert waited"),
        "{out}"
    );
}

/// One commit failing on two apps has one revert and one request: the second watch waits for
/// the first one's request (its own request is never carried out), and the merge reverts both.
fn one_commit_failing_on_two_apps_waits_for_one_request() {
    let w = world_of(&["web", "other"], "github", &["--no-auto-merge"]);
    let wd = w.watchdog("github");
    w.repo
        .write("apps/web/deploy.yaml", &deployment("web", BAD))
        .write("apps/other/deploy.yaml", &deployment("other", BAD));
    let bad = w.admin_commit(&format!(
        "web, other: bad\n\n{}\n{}",
        trailer("web", "3", "arm"),
        trailer("other", "3", "arm")
    ));
    let web = wd.wait_state_of(&bad, "web", "FAIL", T);
    let other = wd.wait_state_of(&bad, "other", "FAIL", T);
    let deadline = std::time::Instant::now() + T;
    let (mut web, mut other) = (web, other);
    while web["revert_pull_request"].is_null() || other["revert_pull_request"].is_null() {
        assert!(std::time::Instant::now() < deadline, "{web}\n{other}");
        std::thread::sleep(Duration::from_millis(100));
        web = wd.wait_state_of(&bad, "web", "FAIL", T);
        other = wd.wait_state_of(&bad, "other", "FAIL", T);
    }
    assert_eq!(web["revert_pull_request"], other["revert_pull_request"]);
    let second = http_get(&format!("{}/sandbox/v1/forge/pulls/2", w.forge));
    assert!(!second.contains("\"state\""), "a second request: {second}");
    w.control("merge", 1);
    let web = wd.wait_state_of(&bad, "web", "REVERTED", T);
    let other = wd.wait_state_of(&bad, "other", "REVERTED", T);
    assert_eq!(web["revert_commit"], other["revert_commit"]);
    let st = wd.status();
    assert_eq!(st["breaker"]["consecutive_reverts"], 1, "{st}");
}

/// Auto-merge armed on a branch that requires a check: the request waits (FAIL, pending) until
/// the check passes on its head, then the forge merges it and the watch ends REVERTED.
fn auto_merge_waits_for_the_required_check() {
    let w = world("github", &["--require-check", "ci"]);
    let wd = w.watchdog("github");
    let bad = w.bad_commit("4");
    let line = wd.proc.wait_line(" proposed as ", T);
    assert!(
        line.contains("the forge merges it once its checks pass"),
        "{line}"
    );
    let st = wd.wait_state(&bad, "FAIL", T);
    assert_eq!(st["revert_pending"], true, "{st}");
    assert_eq!(w.pull(1)["state"], "open");
    assert_eq!(w.repo.remote_tip(), bad);
    let head = w.pull(1)["head_sha"].as_str().unwrap().to_string();
    http_post(&format!(
        "{}/sandbox/v1/forge/status?context=ci&state=success&sha={head}",
        w.forge
    ));
    let st = wd.wait_state(&bad, "REVERTED", T);
    assert_eq!(w.pull(1)["state"], "merged");
    w.landed(&st, 1);
}

/// A token the forge refuses: the revert is on its branch but no request opens, so the watch
/// is REVERT_FAILED saying so — nothing on main, and neither token in any output.
fn a_token_the_forge_refuses_is_a_failed_revert_that_says_why() {
    let w = world("github", &[]);
    let wrong = w.token.with_file_name("wrong-token");
    std::fs::write(&wrong, "not-the-t0ken\n").unwrap();
    let args = w.revert_args("github", &wrong);
    let wd = watchdog(&w.repo, &w.sb.url, &args, &[]);
    let bad = w.bad_commit("4");
    let st = wd.wait_state(&bad, "REVERT_FAILED", T);
    let reason = st["reason"].as_str().unwrap();
    assert!(
        reason.contains("did not open its pull request") && reason.contains("401"),
        "{reason}"
    );
    assert_eq!(w.repo.remote_tip(), bad, "nothing on main");
    let out = wd.proc.output();
    assert!(
        !out.contains("not-the-t0ken") && !out.contains(TOKEN),
        "{out}"
    );
}

/// Polls the watch of `commit` until its reason contains `words`.
fn wait_until_reason(
    wd: &Watchdog,
    commit: &str,
    words: &str,
    mut st: serde_json::Value,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + T;
    while !st["reason"].as_str().unwrap_or_default().contains(words) {
        assert!(std::time::Instant::now() < deadline, "{st}");
        std::thread::sleep(Duration::from_millis(100));
        st = wd.wait_state(commit, "FAIL", T);
    }
    st
}

#[test]
fn a_revert_waits_as_a_pull_request_and_ends_reverted_when_a_human_merges_it_() {
    on_argocd(
        "3.5",
        a_revert_waits_as_a_pull_request_and_ends_reverted_when_a_human_merges_it,
    );
}

#[test]
fn auto_merge_on_github_reverts_through_the_request() {
    on_argocd("3.5", || {
        auto_merge_with_nothing_to_wait_for_reverts_through_the_request("github")
    });
}

#[test]
fn auto_merge_on_gitea_reverts_through_the_request() {
    on_argocd("2.14", || {
        auto_merge_with_nothing_to_wait_for_reverts_through_the_request("gitea")
    });
}

#[test]
fn a_revert_request_closed_unmerged_is_revert_failed_() {
    on_argocd("3.5", a_revert_request_closed_unmerged_is_revert_failed);
}

#[test]
fn a_fix_forward_while_the_revert_waits_withdraws_the_request_() {
    on_argocd(
        "3.5",
        a_fix_forward_while_the_revert_waits_withdraws_the_request,
    );
}

#[test]
fn one_commit_failing_on_two_apps_waits_for_one_request_() {
    on_argocd("2.14", one_commit_failing_on_two_apps_waits_for_one_request);
}

#[test]
fn auto_merge_waits_for_the_required_check_() {
    on_argocd("3.5", auto_merge_waits_for_the_required_check);
}

#[test]
fn a_token_the_forge_refuses_is_a_failed_revert_that_says_why_() {
    on_argocd(
        "2.14",
        a_token_the_forge_refuses_is_a_failed_revert_that_says_why,
    );
}

/// The flags of reverts by pull request are checked before anything starts: each missing or
/// misplaced one is named, exit 2, and no state is written.
#[test]
fn revert_via_pull_request_flags_are_checked_at_start() {
    let repo = Repo::new();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("t");
    std::fs::write(&token, "tok-xyz\n").unwrap();
    let token = token.to_str().unwrap();
    let state = repo.path("state/greenlight.db");
    for (extra, says) in [
        (
            vec!["--revert-via", "pull-request"],
            "--revert-via pull-request needs --forge",
        ),
        (
            vec!["--revert-via", "pull-request", "--forge", "bitbucket"],
            "--forge: unknown forge",
        ),
        (
            vec!["--revert-via", "pull-request", "--forge", "github"],
            "needs --forge-token-file",
        ),
        (
            vec![
                "--revert-via",
                "pull-request",
                "--forge",
                "gitea",
                "--forge-token-file",
                token,
            ],
            "--forge-url is required",
        ),
        (
            vec!["--forge", "github"],
            "--forge: only read with --revert-via pull-request",
        ),
    ] {
        let o = std::process::Command::new(BIN)
            .args(watch_args(&repo, "http://127.0.0.1:9", &state, &extra))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(says), "{extra:?}: {err}");
        assert!(!err.contains("tok-xyz"), "{err}");
        assert!(!state.exists(), "nothing started");
    }
}
