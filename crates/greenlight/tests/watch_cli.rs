//! The small commands around the watchdog, run as a user runs them: `trailer check`,
//! `status` on a missing file, JSON event lines, and configuration errors.

mod common;
use common::*;
use greenlight_testkit as kit;
use std::process::Command;
use std::time::Duration;

fn run(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().unwrap()
}

/// `greenlight <args>` writing its stdout into a pipe whose reader has already gone (`| head`
/// that has read enough): it ends quietly, as `git log | head` does, never with a panic.
fn assert_quiet_into_a_closed_pipe(args: &[&str]) {
    use std::os::unix::process::ExitStatusExt;
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(BIN)
        .args(args)
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.is_empty(),
        "greenlight {args:?} into a closed pipe wrote to stderr: {err}"
    );
    assert!(
        out.status.code() == Some(0) || out.status.signal() == Some(SIGPIPE),
        "greenlight {args:?} into a closed pipe: {:?}",
        out.status
    );
}

/// SIGPIPE's number (Linux, the BSDs, macOS).
const SIGPIPE: i32 = 13;

#[test]
fn one_shot_commands_end_quietly_into_a_closed_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("web.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:latest\n",
    )
    .unwrap();
    assert_quiet_into_a_closed_pipe(&["rules"]);
    assert_quiet_into_a_closed_pipe(&["explain", "GL001"]);
    assert_quiet_into_a_closed_pipe(&["lint", manifest.to_str().unwrap()]);
    assert_quiet_into_a_closed_pipe(&["lint", "--format", "json", manifest.to_str().unwrap()]);
    // Messages on a closed stderr (`2>&1 | head` that read enough): the same, never a panic.
    use std::os::unix::process::ExitStatusExt;
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = Command::new(BIN)
        .args(["guard", "image", "nginx:1.25.3", "nginx:latest"])
        .stdout(std::process::Stdio::null())
        .stderr(writer)
        .status()
        .unwrap();
    assert_eq!(status.signal(), Some(SIGPIPE), "{status:?}");
}

#[test]
fn trailer_check_is_a_commit_msg_hook() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("COMMIT_EDITMSG");
    let check = |msg: &str| {
        std::fs::write(&f, msg).unwrap();
        run(&["trailer", "check", f.to_str().unwrap()])
    };
    assert_eq!(
        check("fix\n\nNav-Watchdog: app=web deadline=15m mode=arm\n")
            .status
            .code(),
        Some(0)
    );
    assert_eq!(check("no trailer at all\n").status.code(), Some(0));
    let bad = check("fix\n\nNav-Watchdog: app=web deadline=soon\n");
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("`deadline`"));
    let bad = check("fix\n\nNav-Watchdog: app=web mode=armed\n# comment\n");
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("`mode`"));
    let other_key = run(&[
        "trailer",
        "check",
        f.to_str().unwrap(),
        "--trailer-key",
        "Deploy-Watch",
    ]);
    assert_eq!(other_key.status.code(), Some(0));
    let missing = run(&["trailer", "check", "/nonexistent/msg"]);
    assert_eq!(missing.status.code(), Some(2));
}

/// `COMMIT_EDITMSG` as `git commit -v` hands it to the `commit-msg` hook: the message, git's
/// comment block, the scissors line and the diff below it.
fn verbose_editmsg(message: &str) -> String {
    format!(
        "{message}\n\
         # Please enter the commit message for your changes. Lines starting\n\
         # with '#' will be ignored, and an empty message aborts the commit.\n\
         #\n\
         # On branch main\n\
         # Changes to be committed:\n\
         #\tmodified:   apps/web/deploy.yaml\n\
         #\n\
         # ------------------------ >8 ------------------------\n\
         # Do not modify or remove the line above.\n\
         # Everything below it will be ignored.\n\
         diff --git a/apps/web/deploy.yaml b/apps/web/deploy.yaml\n\
         index 003b3d9..8a29d87 100644\n\
         --- a/apps/web/deploy.yaml\n\
         +++ b/apps/web/deploy.yaml\n\
         @@ -1 +1,2 @@\n\
         -image: a\n\
         +image: b\n\
         +Nav-Watchdog: app=web mode=bogus\n"
    )
}

#[test]
fn trailer_check_reads_the_message_git_commit_will_store() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("COMMIT_EDITMSG");
    let check = |msg: &str| {
        std::fs::write(&f, msg).unwrap();
        let mut cmd = Command::new(BIN);
        kit::isolate(cmd.args(["trailer", "check", f.to_str().unwrap()]));
        let out = cmd.current_dir(dir.path()).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // The trailer above the scissors is checked (below a `---` paragraph too); the diff is not.
    let (code, stderr) = check(&verbose_editmsg(
        "fix\n\nWhy.\n\n---\n\nNav-Watchdog: app=web deadline=15m mode=arm\n",
    ));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("ok: Nav-Watchdog: app=web deadline=900s mode=arm"),
        "{stderr}"
    );
    assert!(!stderr.contains("bogus"), "{stderr}");
    let (code, stderr) = check(&verbose_editmsg(
        "fix\n\nNav-Watchdog: app=web mode=armed\n",
    ));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("`mode`") && stderr.contains("armed"),
        "{stderr}"
    );
    assert!(!stderr.contains("bogus"), "{stderr}");
    // git drops the comment line, so the indented line continues the trailer's value.
    let (code, stderr) = check(&verbose_editmsg(
        "fix\n\nNav-Watchdog: app=web\n# deadline: our default\n  mode=armed\n",
    ));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("`mode`"), "{stderr}");
}

#[test]
fn trailer_check_as_the_commit_msg_hook_of_git_commit_v() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    git(dir.path(), &["init", "-q", "repo"]);
    let hook = repo.join(".git/hooks/commit-msg");
    std::fs::write(
        &hook,
        format!("#!/bin/sh\nexec '{BIN}' trailer check \"$1\"\n"),
    )
    .unwrap();
    // The editor puts the message above what git wrote into the file.
    let editor = dir.path().join("editor");
    let message = dir.path().join("message");
    std::fs::write(
        &editor,
        format!(
            "#!/bin/sh\ncat '{}' \"$1\" > \"$1.new\" && mv \"$1.new\" \"$1\"\n",
            message.display()
        ),
    )
    .unwrap();
    for f in [&hook, &editor] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let commit = |msg: &str| {
        std::fs::write(&message, msg).unwrap();
        std::fs::write(repo.join("deploy.yaml"), format!("{msg:?}\n")).unwrap();
        git(&repo, &["add", "-A"]);
        let mut cmd = kit::git_cmd(&repo);
        let out = cmd
            .args(["commit", "-q", "-v"])
            .env("GIT_EDITOR", &editor)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stderr) = commit("fix\n\nNav-Watchdog: app=web mode=armed\n");
    assert_ne!(code, Some(0), "the hook refuses the commit: {stderr}");
    assert!(stderr.contains("`mode`"), "{stderr}");
    let (code, stderr) = commit("fix\n\nWhy.\n\n---\n\nNav-Watchdog: app=web mode=arm\n");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("ok: Nav-Watchdog: app=web"), "{stderr}");
    assert_eq!(
        git(
            &repo,
            &[
                "log",
                "-1",
                "--format=%(trailers:key=Nav-Watchdog,valueonly)"
            ]
        ),
        "app=web mode=arm"
    );
    // Another comment character: git's comments and scissors line start with it.
    git(&repo, &["config", "core.commentChar", ";"]);
    let (code, stderr) = commit("fix\n\nNav-Watchdog: app=web mode=armed\n");
    assert_ne!(code, Some(0), "the hook refuses the commit: {stderr}");
    assert!(stderr.contains("`mode`"), "{stderr}");
    let (code, stderr) = commit("fix again\n\nNav-Watchdog: app=web mode=shadow\n");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("mode=shadow"), "{stderr}");
}

#[test]
fn a_trailer_below_a_dash_line_starts_a_watch() {
    // In a commit's message a `---` line is no patch divider: git reads the trailer below it.
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let message = format!("web\n\nWhy.\n\n---\n\n{}", trailer("web", "30", "shadow"));
    let c = repo.set_image("web", GOOD2, &message);
    assert_eq!(
        repo.git(&[
            "log",
            "-1",
            "--format=%(trailers:key=Nav-Watchdog,valueonly)"
        ]),
        "app=web deadline=30 mode=shadow"
    );
    wd.wait_state(&c, "CONFIRMED", Duration::from_secs(60));
}

#[test]
fn status_of_a_missing_state_file_is_an_error() {
    let out = run(&["status", "--state", "/nonexistent/greenlight.db"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    assert!(!std::path::Path::new("/nonexistent/greenlight.db").exists());
}

#[test]
fn bad_configuration_exits_2_naming_the_flag() {
    let out = run(&[
        "watch",
        "--repo",
        "/x",
        "--argocd-url",
        "http://127.0.0.1:1",
        "--state",
        "/tmp/x.db",
        "--stable-for",
        "soon",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--stable-for"));
    let out = run(&[
        "watch",
        "--repo",
        "/x",
        "--argocd-url",
        "http://127.0.0.1:1",
        "--state",
        "/tmp/x.db",
        "--git-author",
        "nobody",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--git-author"));
}

#[test]
fn unusable_token_files_exit_2_naming_the_flag_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty-token");
    std::fs::write(&empty, " \n").unwrap();
    let state = dir.path().join("s.db");
    for flag in ["--argocd-token-file", "--git-token-file"] {
        let out = run(&[
            "watch",
            "--repo",
            "/x",
            "--argocd-url",
            "http://127.0.0.1:1",
            "--state",
            state.to_str().unwrap(),
            flag,
            empty.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("{flag} {}: the file is empty", empty.display())),
            "{stderr}"
        );
    }
    let missing = dir.path().join("missing");
    let out = run(&[
        "watch",
        "--repo",
        "/x",
        "--argocd-url",
        "http://127.0.0.1:1",
        "--state",
        state.to_str().unwrap(),
        "--git-token-file",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "--git-token-file {}: cannot read",
            missing.display()
        )),
        "{stderr}"
    );
    assert!(!state.exists(), "nothing is started on a bad flag");
}

#[test]
fn json_event_lines_and_the_status_table() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let wd = watchdog(&repo, &sb.url, &["--log-format", "json"], &[]);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!(
            "web\n\n{}\nNav-Watchdog: app=web mode=bogus\n",
            trailer("web", "30", "shadow")
        ),
    );
    wd.wait_state(&c, "CONFIRMED", Duration::from_secs(60));
    let out = wd.proc.output();
    let events: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("event").is_some())
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    for k in [
        "watch_started",
        "directive_rejected",
        "reached",
        "healthy_streak_started",
        "confirmed",
    ] {
        assert!(kinds.contains(&k), "missing {k} in {kinds:?}");
    }
    let reached = events.iter().find(|e| e["event"] == "reached").unwrap();
    assert_eq!(reached["commit"], c.as_str());
    assert_eq!(reached["app"], "web");
    assert_eq!(reached["state"], "JUDGING");
    assert!(reached["time"].as_str().unwrap().ends_with('Z'));
    assert!(reached["evidence"]["sync"].is_string(), "{reached}");
    assert!(reached["evidence"]["revision"].is_string(), "{reached}");
    assert!(reached["evidence"]["health"].is_string(), "{reached}");
    let rejected = events
        .iter()
        .find(|e| e["event"] == "directive_rejected")
        .unwrap();
    assert!(rejected["message"].as_str().unwrap().contains("`mode`"));

    assert_quiet_into_a_closed_pipe(&["status", "--json", "--state", wd.state.to_str().unwrap()]);
    assert_quiet_into_a_closed_pipe(&["status", "--state", wd.state.to_str().unwrap()]);
    let table = run(&["status", "--state", wd.state.to_str().unwrap()]);
    assert_eq!(table.status.code(), Some(0));
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("CONFIRMED") && text.contains(&c[..10]),
        "{text}"
    );
    let st = wd.status();
    assert_eq!(
        st["watches"].as_array().unwrap().len(),
        1,
        "one watch; the malformed trailer started none"
    );
    let w = &st["watches"][0];
    assert_eq!(w["deadline_s"], 30);
    assert_eq!(w["mode"], "shadow");
    assert_eq!(w["dry_run"], false);
}

/// Argo CD creates the app of an app-of-apps commit when it next refreshes the parent:
/// `timeout.reconciliation` (120 s) plus up to 60 s of jitter after the commit. By default the
/// watchdog waits longer than that for an app that does not exist, and says so.
#[test]
fn a_missing_app_is_waited_for_longer_than_argo_cds_refresh_by_default() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let state = repo.path("state/greenlight.db");
    let mut args = watch_args(&repo, &sb.url, &state, &[]);
    let at = args
        .iter()
        .position(|a| a == "--unknown-app-grace")
        .expect("the kit sets a test grace");
    args.drain(at..at + 2);
    let wd = Proc::spawn(BIN, &args, &[]);
    wd.wait_line(greenlight_testkit::watch::WATCHING, Duration::from_secs(60));
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!(
            "web and its new sibling\n\n{}",
            trailer("web-v2", "900", "shadow")
        ),
    );
    let line = wd.wait_line(
        "Application web-v2 does not exist (yet)",
        Duration::from_secs(60),
    );
    assert!(
        line.contains("waiting up to 300s for it (the commit may create it)"),
        "{line}"
    );
    assert!(line.contains(&c[..8]), "{line}");
}

#[test]
fn tokens_never_reach_output() {
    let repo = Repo::new();
    let dir = tempfile::tempdir().unwrap();
    let argo_token = "argo-token-4f1d9c-very-secret";
    let git_token = "git-token-77aa31-very-secret";
    std::fs::write(dir.path().join("argo"), format!("{argo_token}\n")).unwrap();
    std::fs::write(dir.path().join("git"), git_token).unwrap();
    let sb = sandbox(
        &repo,
        &["web=apps/web"],
        &["--token-file", dir.path().join("argo").to_str().unwrap()],
    );
    // A wrong token is refused by the stand-in: --once fails, and says why without the token.
    std::fs::write(dir.path().join("wrong"), "wrong-token-1234").unwrap();
    let state = dir.path().join("state.db");
    let mut args = watch_args(
        &repo,
        &sb.url,
        &state,
        &[
            "--once",
            "--argocd-token-file",
            dir.path().join("wrong").to_str().unwrap(),
        ],
    );
    let out = Command::new(BIN).args(&args).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("401"), "{text}");
    assert!(!text.contains("wrong-token-1234"), "{text}");

    // The right tokens: a full watch, and neither token in any line.
    let wd = watchdog(
        &repo,
        &sb.url,
        &[
            "--argocd-token-file",
            dir.path().join("argo").to_str().unwrap(),
            "--git-token-file",
            dir.path().join("git").to_str().unwrap(),
        ],
        &[],
    );
    // Real Argo CD would ignore this token (not JWT-shaped); both sides say so, neither quotes it.
    wd.proc.wait_line(
        "the Argo CD token is not JWT-shaped",
        Duration::from_secs(30),
    );
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web\n\n{}", trailer("web", "30", "shadow")),
    );
    wd.wait_state(&c, "CONFIRMED", Duration::from_secs(60));
    let all = format!("{}\n{}", wd.proc.output(), sb.proc.output());
    assert!(
        !all.contains(argo_token) && !all.contains(git_token),
        "{all}"
    );

    // Credentials in a repository URL are redacted from errors.
    args = vec![
        "watch".into(),
        "--repo".into(),
        "https://deploy-bot:hunter2-url-secret@127.0.0.1:1/platform/deploy.git".into(),
        "--argocd-url".into(),
        sb.url.clone(),
        "--state".into(),
        dir.path().join("s2.db").to_str().unwrap().into(),
        "--once".into(),
    ];
    let out = Command::new(BIN).args(&args).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!text.contains("hunter2-url-secret"), "{text}");
    assert!(
        text.contains("127.0.0.1:1"),
        "the error names the remote: {text}"
    );
}

/// A dry-run switch in the environment with a value greenlight does not understand refuses to
/// start (exit 2), naming the variable and the values it accepts: read as "off", `DRY_RUN=y`
/// used to let armed reverts through.
#[test]
fn a_dry_run_switch_it_does_not_understand_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.db");
    for (var, value) in [
        ("DRY_RUN", "y"),
        ("GREENLIGHT_DRY_RUN", "enabled"),
        ("DRY_RUN", "client"),
    ] {
        let out = Command::new(BIN)
            .args([
                "watch",
                "--repo",
                "/x",
                "--argocd-url",
                "http://127.0.0.1:1",
                "--state",
                state.to_str().unwrap(),
            ])
            .env(var, value)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{var}={value}: {err}");
        assert!(
            err.contains(&format!("{var}=\"{value}\"")) && err.contains("1, true, yes or on"),
            "{err}"
        );
        assert!(!state.exists(), "nothing started, no state written");
    }
}

/// A bare repository made with `git init --bare` whose HEAD still names a branch nobody pushed
/// (`master`) while the work goes to `main`: with `--branch main` the watchdog watches `main`
/// (the remote has no default branch, so an app tracking `HEAD` is not taken for it).
#[test]
fn a_remote_whose_head_names_no_branch_is_watched_with_branch() {
    let repo = Repo::new();
    repo.bare_git(&["symbolic-ref", "HEAD", "refs/heads/master"]);
    let sb = sandbox(&repo, &["web=apps/web"], &["--branch", "main"]);
    let wd = watchdog(&repo, &sb.url, &["--branch", "main"], &[]);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web\n\n{}", trailer("web", "30", "shadow")),
    );
    wd.wait_state(&c, "CONFIRMED", Duration::from_secs(60));
    // Without --branch there is nothing to watch, and it says what to give.
    let out = run(&[
        "watch",
        "--repo",
        &repo.repo(),
        "--argocd-url",
        &sb.url,
        "--state",
        repo.path("state/other.db").to_str().unwrap(),
        "--once",
    ]);
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("names no branch"), "{err}");
}

/// The store and election flags refused before anything starts, exit 2, each naming the flag
/// and why: nothing is cloned, no Lease is touched.
#[test]
fn store_and_election_flags_that_cannot_work_exit_2_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("x.db");
    let data = dir.path().join("data");
    let (state, data) = (state.to_str().unwrap(), data.to_str().unwrap());
    let base = ["watch", "--repo", "/x", "--source", "kube"];
    for (extra, names, why) in [
        (
            vec!["--leader-elect", "--state", state],
            "--leader-elect",
            "--store kube",
        ),
        (
            vec!["--store", "kube", "--state", state],
            "--state",
            "--store kube",
        ),
        (vec!["--store", "kube"], "--data-dir", "clone"),
        (vec![], "--state", "required"),
        (
            vec![
                "--store",
                "kube",
                "--data-dir",
                data,
                "--store-name",
                "Bad_Name",
            ],
            "--store-name",
            "lower-case",
        ),
        (
            vec![
                "--store",
                "kube",
                "--data-dir",
                data,
                "--leader-elect",
                "--renew-deadline",
                "20s",
            ],
            "--renew-deadline",
            "--lease-duration",
        ),
        (
            vec![
                "--store",
                "kube",
                "--data-dir",
                data,
                "--leader-elect",
                "--lease-retry-period",
                "10s",
            ],
            "--lease-retry-period",
            "--renew-deadline",
        ),
        (
            vec!["--state", state, "--identity", "a"],
            "--identity",
            "--leader-elect",
        ),
        (
            vec!["--state", state, "--store-namespace", "argocd"],
            "--store-namespace",
            "--store kube",
        ),
    ] {
        let mut args: Vec<&str> = base.to_vec();
        args.extend(&extra);
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(names) && err.contains(why), "{extra:?}: {err}");
        assert!(
            !std::path::Path::new(data).exists(),
            "{extra:?}: nothing cloned"
        );
    }
}
