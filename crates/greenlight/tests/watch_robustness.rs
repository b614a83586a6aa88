//! The watchdog's sharp edges, run as a user runs it: a crash between a revert's push and its
//! record, the git remote failing while Argo CD reports a revision greenlight has not fetched,
//! two daemons given one `--data-dir`, and `--once` leaving nothing behind. Waits are bounded
//! polls on printed lines, recorded states and the remote's refs, never fixed sleeps.

mod common;
use common::*;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

fn wait_until(what: &str, within: Duration, ok: impl Fn() -> bool) {
    let end = Instant::now() + within;
    while !ok() {
        assert!(
            Instant::now() < end,
            "{what} did not happen within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A git process killed mid-command (the daemon under `kill -9`, a node that lost power) leaves
/// its lock files in the clone, and every later command that takes one of them fails — the
/// revert's checkout included. The restarted daemon holds the clone alone: it removes them,
/// says so, and its revert is pushed.
#[test]
fn lock_files_a_killed_git_left_in_the_clone_do_not_block_the_revert() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let mut wd = watchdog(&repo, &sb.url, &[], &[]);
    settled(&sb, &repo, &["web"]);
    wd.proc.kill9();
    let clone = repo.path("state/greenlight.db.d/repo");
    for lock in [".git/HEAD.lock", ".git/index.lock"] {
        std::fs::write(clone.join(lock), "").unwrap();
    }
    let wd2 = watchdog_with_state(&repo, &sb.url, &wd.state, &[], &[]);
    let said = wd2.proc.wait_line("removed git lock file(s)", T);
    assert!(
        said.contains(".git/HEAD.lock") && said.contains(".git/index.lock"),
        "{said}"
    );
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: bad\n\n{}", trailer("web", "5", "arm")),
    );
    wd2.wait_state(&bad, "REVERTED", T);
    assert_eq!(count_reverts_of(&repo, &bad), 1);
}

/// The revert reached the remote, then the daemon died before recording it: the restarted
/// daemon adopts that revert instead of pushing a second one.
#[test]
fn a_kill_9_between_the_revert_push_and_its_record_adopts_the_pushed_revert() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let mut wd = watchdog(&repo, &sb.url, &[], &[]);
    settled(&sb, &repo, &["web"]);
    let release = hold_pushes_of(&repo, "Revert ");
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: bad\n\n{}", trailer("web", "5", "arm")),
    );

    wait_until("the revert push", T, || repo.remote_tip() != bad);
    let pushed = repo.remote_tip();
    let st = wd.status();
    let w = watch_of(&st, &bad).expect("the watch is recorded");
    assert_eq!(w["state"], "FAIL", "the push is not acknowledged yet: {w}");
    assert!(w["revert_commit"].is_null(), "{w}");
    wd.proc.kill9();
    std::fs::write(&release, "").unwrap();

    let wd2 = watchdog_with_state(&repo, &sb.url, &wd.state, &[], &[]);
    let w = wd2.wait_state(&bad, "REVERTED", T);
    assert_eq!(w["revert_commit"], pushed.as_str(), "{w}");
    assert!(
        w["reason"].as_str().unwrap().contains("adopted"),
        "the pushed revert is adopted: {w}"
    );
    assert_eq!(count_reverts_of(&repo, &bad), 1);
    assert_eq!(
        repo.remote_tip(),
        pushed,
        "nothing pushed after the adoption"
    );
}

/// The revert reached the remote, the daemon died before recording it, and then a human
/// reverted greenlight's revert (re-landing the commit on purpose): the restarted daemon adopts
/// its own revert and pushes no second one.
#[test]
fn a_revert_a_human_undid_while_greenlight_was_down_is_adopted_not_pushed_again() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let mut wd = watchdog(&repo, &sb.url, &[], &[]);
    settled(&sb, &repo, &["web"]);
    // greenlight's revert is held; the human's revert of it ("Revert \"Revert …") is not.
    let release = hold_pushes_of(&repo, "Revert \"web: bad");
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: bad\n\n{}", trailer("web", "5", "arm")),
    );
    wait_until("the revert push", T, || repo.remote_tip() != bad);
    let pushed = repo.remote_tip();
    wd.proc.kill9();
    std::fs::write(&release, "").unwrap();
    // A human reverts greenlight's revert: the bad commit is back on purpose.
    repo.pull();
    repo.git(&["revert", "--no-edit", &pushed]);
    repo.git(&["push", "-q", "origin", "main"]);
    let human = repo.remote_tip();
    assert_ne!(human, pushed);

    let wd2 = watchdog_with_state(&repo, &sb.url, &wd.state, &[], &[]);
    let w = wd2.wait_state(&bad, "REVERTED", T);
    assert_eq!(w["revert_commit"], pushed.as_str(), "{w}");
    assert!(w["reason"].as_str().unwrap().contains("adopted"), "{w}");
    assert_eq!(
        count_reverts_of(&repo, &bad),
        1,
        "no second revert of the commit"
    );
    assert_eq!(
        repo.remote_tip(),
        human,
        "nothing pushed over the human's revert"
    );
}

/// Argo CD reports a revision the watchdog's clone does not have, and the fetch that would
/// answer "is the commit an ancestor?" fails: the question waits, the daemon keeps running, and
/// the watch is judged once git answers again.
#[test]
fn a_git_failure_while_answering_reach_does_not_stop_the_daemon() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let good = repo.remote_tip();
    sb.wait_app("web", T, |a| healthy_at(a, &good));
    sb.control("/sandbox/v1/pause");
    let mut wd = watchdog(&repo, &sb.url, &[], &[]);
    let c1 = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1\n\n{}", trailer("web", "600", "shadow")),
    );
    wd.wait_state(&c1, "WAITING_REACH", T);
    // The remote becomes unreachable for the watchdog (its clone's origin points nowhere).
    let clone = repo.path("state/greenlight.db.d/repo");
    let origin = repo.bare.to_str().unwrap().to_string();
    git(
        &clone,
        &["remote", "set-url", "origin", "/nonexistent/origin.git"],
    );
    let c2 = repo.set_image("other", GOOD2, "other: 1.1");
    sb.control("/sandbox/v1/resume");
    sb.wait_app("web", T, |a| healthy_at(a, &c2));
    wd.proc.wait_line("ancestry questions left unanswered", T);
    assert!(
        wd.proc.is_running(),
        "the daemon must survive a git failure; output:\n{}",
        wd.proc.output()
    );
    git(&clone, &["remote", "set-url", "origin", &origin]);
    let w = wd.wait_state(&c1, "CONFIRMED", T);
    assert!(w["reached_at"].is_string(), "{w}");
    assert!(wd.proc.is_running());
    wd.proc.kill9();
}

#[test]
fn two_state_files_given_one_data_dir_are_refused() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let data = repo.path("data");
    let data_s = data.to_str().unwrap();
    let _wd = watchdog_with_state(
        &repo,
        &sb.url,
        &repo.path("a.db"),
        &["--data-dir", data_s],
        &[],
    );
    let args = watch_args(&repo, &sb.url, &repo.path("b.db"), &["--data-dir", data_s]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    // Bounded: a second daemon that is not refused would run forever.
    let mut second = Proc::spawn(BIN, &argv, &[]);
    let status = second.wait_exit(T);
    let err = second.output();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("--data-dir") && err.contains("in use"),
        "{err}"
    );
}

#[test]
fn once_writes_no_state_and_no_clone() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let state = repo.path("s/once.db");
    let args = watch_args(&repo, &sb.url, &state, &["--once"]);
    let out = std::process::Command::new(BIN)
        .args(&args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !repo.path("s").exists(),
        "--once created {:?}",
        repo.path("s")
    );
}

/// A TCP proxy in front of the stand-in that can go silent: open connections stay open but
/// carry nothing more (a peer that vanished without closing, as behind a dropped NAT entry),
/// and new connections are closed at once.
struct SilentProxy {
    url: String,
    silent: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl SilentProxy {
    fn start(upstream: &str) -> SilentProxy {
        use std::io::{Read, Write};
        use std::net::{TcpListener, TcpStream};
        use std::sync::atomic::Ordering;
        let up = upstream.strip_prefix("http://").unwrap().to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let silent = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = silent.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(client) = conn else { return };
                if s.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&up) else {
                    continue;
                };
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let s = s.clone();
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16384];
                        loop {
                            match from.read(&mut buf) {
                                Ok(0) | Err(_) => {
                                    let _ = to.shutdown(std::net::Shutdown::Write);
                                    return;
                                }
                                Ok(n) => {
                                    if !s.load(Ordering::SeqCst) && to.write_all(&buf[..n]).is_err()
                                    {
                                        return;
                                    }
                                }
                            }
                        }
                    });
                }
            }
        });
        SilentProxy { url, silent }
    }

    fn go_silent(&self) {
        self.silent.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Argo CD goes silent while a healthy streak is under way and the stream still looks
/// connected: what greenlight has not observed must not confirm the commit. Past the deadline,
/// with nothing heard for `--stale-after`, the verdict is INCONCLUSIVE.
#[test]
fn a_stream_that_goes_silent_without_closing_vouches_for_nothing() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let proxy = SilentProxy::start(&sb.url);
    let state = repo.path("state/greenlight.db");
    let mut args = watch_args(&repo, &proxy.url, &state, &[]);
    // A streak long enough that Argo CD goes silent in the middle of it.
    let i = args.iter().position(|a| a == "--stable-for").unwrap();
    args[i + 1] = "8s".into();
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let proc = Proc::spawn(BIN, &argv, &[]);
    proc.wait_line("watching ", T);
    proc.wait_line("stream connected", T);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1\n\n{}", trailer("web", "3", "shadow")),
    );
    let end = Instant::now() + T;
    loop {
        let st = status_json(&state);
        if watch_of(&st, &c).is_some_and(|w| w["healthy_since"].is_string()) {
            break;
        }
        assert!(
            Instant::now() < end,
            "no healthy streak:\n{}",
            proc.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    proxy.go_silent();
    // Due about 4 s from now (deadline, then --stale-after 3s). The bound is far below the
    // 30 s a hung Argo CD read may take: a listing stuck on the silent connection must not
    // hold the verdict back.
    let w = wait_state(&state, &c, "INCONCLUSIVE", Duration::from_secs(20), &proc);
    assert!(w["reason"].is_string(), "{w}");
}

/// The stand-in reports `--repo` as given; Argo CD compares normalized URLs. A local remote
/// spelled relative on one side and absolute on the other is still one repository.
#[test]
fn a_local_repo_spelled_relative_or_absolute_is_one_repository() {
    let repo = Repo::new();
    let dir = repo.root();
    let sb_args = [
        "sandbox",
        "--repo",
        "./origin.git",
        "--listen",
        "127.0.0.1:0",
        "--sync-interval",
        "200ms",
        "--rollout-time",
        "1s",
        "--app",
        "web=apps/web",
    ];
    let sb = Sandbox::spawn(BIN, Some(dir), &sb_args);
    let url = &sb.url;
    // Both daemons run where the stand-in runs (one shell): the absolute spelling, and a
    // relative one spelled differently from the stand-in's.
    let abs_args = watch_args(&repo, url, &repo.path("abs.db"), &[]);
    let argv: Vec<&str> = abs_args.iter().map(String::as_str).collect();
    let abs = Proc::spawn_in(BIN, Some(dir), &argv, &[]);
    abs.wait_line("watching ", T);
    let mut rel_args = watch_args(&repo, url, &repo.path("rel.db"), &[]);
    rel_args[2] = "origin.git".into();
    let argv: Vec<&str> = rel_args.iter().map(String::as_str).collect();
    let rel = Proc::spawn_in(BIN, Some(dir), &argv, &[]);
    rel.wait_line("watching ", T);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1\n\n{}", trailer("web", "30", "shadow")),
    );
    wait_state(&repo.path("abs.db"), &c, "CONFIRMED", T, &abs);
    wait_state(&repo.path("rel.db"), &c, "CONFIRMED", T, &rel);
}

/// `--since` watches commits already on the branch (exclusive), `--trailer-key` replaces the
/// default key, `GREENLIGHT_DRY_RUN=true` equals `--dry-run`; `status --json` has every field.
#[test]
fn since_trailer_key_and_greenlight_dry_run_in_one_watch() {
    let repo = Repo::new();
    let base = repo.remote_tip();
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!(
            "web: 1.1\n\nDeploy-Watch: app=web deadline=30 mode=arm\n{}",
            trailer("other", "30", "arm")
        ),
    );
    let sb = sandbox(&repo, &["web=apps/web", "other=apps/other"], &[]);
    let wd = watchdog(
        &repo,
        &sb.url,
        &["--since", &base, "--trailer-key", "Deploy-Watch"],
        &[("GREENLIGHT_DRY_RUN", "true")],
    );
    wd.proc.wait_line(&format!(" main from {base}"), T);
    let w = wd.wait_state(&c, "CONFIRMED", T);
    let st = wd.status();
    assert_eq!(st["baseline"], base.as_str());
    assert_eq!(st["breaker"]["open"], false);
    assert_eq!(st["breaker"]["consecutive_reverts"], 0);
    let watches = st["watches"].as_array().unwrap();
    assert_eq!(watches.len(), 1, "the default key is not watched: {st}");
    assert_eq!(w["app"], "web");
    assert_eq!(w["mode"], "arm");
    assert_eq!(w["dry_run"], true);
    assert_eq!(w["deadline_s"], 30);
    for key in [
        "commit",
        "reason",
        "watch_started_at",
        "reached_at",
        "healthy_since",
        "finished_at",
    ] {
        assert!(w[key].is_string(), "{key}: {w}");
    }
    assert!(w["revert_commit"].is_null(), "{w}");
    assert!(w["finished_at"].as_str().unwrap().ends_with('Z'), "{w}");
}

/// A `--since` that names no commit is a configuration error (exit 2) for the daemon and for
/// the `--once` gate alike.
#[test]
fn a_since_that_is_not_a_commit_exits_2_in_both_modes() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    for extra in [&["--once"][..], &[][..]] {
        let mut flags = vec!["--since", "no-such-rev"];
        flags.extend_from_slice(extra);
        let args = watch_args(&repo, &sb.url, &repo.path("since.db"), &flags);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut p = Proc::spawn(BIN, &argv, &[]);
        let status = p.wait_exit(T);
        let err = p.output();
        assert_eq!(status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains("--since"), "{extra:?}: {err}");
    }
}

/// A revert was decided, the daemon died before its push landed, and the operator restarts it
/// with `DRY_RUN=true` to stop reverts: nothing is pushed.
#[test]
fn a_pending_revert_is_not_pushed_after_a_restart_in_dry_run() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let mut wd = watchdog(&repo, &sb.url, &[], &[]);
    settled(&sb, &repo, &["web"]);
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: bad\n\n{}", trailer("web", "5", "arm")),
    );
    // The push reaches the remote's pre-receive hook, which holds it and then refuses it.
    let release = repo.path("release");
    let entered = repo.path("entered");
    let hook = repo.bare.join("hooks/pre-receive");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ntouch '{}'\ni=0\nwhile [ ! -f '{}' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\nexit 1\n",
            entered.display(),
            release.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    wait_until("the revert push", T, || entered.exists());
    wd.proc.kill9();
    std::fs::write(&release, "").unwrap();
    std::fs::remove_file(&hook).unwrap();
    assert_eq!(repo.remote_tip(), bad);

    let wd2 = watchdog_with_state(&repo, &sb.url, &wd.state, &[], &[("DRY_RUN", "true")]);
    let w = wd2.wait_state(&bad, "REVERT_FAILED", T);
    assert!(w["reason"].as_str().unwrap().contains("dry-run"), "{w}");
    assert_eq!(count_reverts_of(&repo, &bad), 0, "{}", wd2.proc.output());
    assert_eq!(repo.remote_tip(), bad);
}

/// Points the watchdog's clone at a git remote that accepts connections and never answers;
/// returns the clone's directory.
fn point_the_clone_at_a_silent_remote(repo: &Repo) -> std::path::PathBuf {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming() {
            held.push(c);
        }
    });
    let clone = repo.path("state/greenlight.db.d/repo");
    git(
        &clone,
        &[
            "remote",
            "set-url",
            "origin",
            &format!("git://127.0.0.1:{port}/origin.git"),
        ],
    );
    clone
}

/// git has no timeout of its own: a fetch from a remote that accepts and never answers must
/// be said out loud, not stop commit processing quietly.
#[test]
fn a_fetch_that_never_returns_is_reported() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    point_the_clone_at_a_silent_remote(&repo);
    let line = wd.proc.wait_line("has not returned for", T);
    assert!(line.contains("main"), "{line}");
}

/// SIGTERM while a fetch hangs: the daemon stops within `--stop-timeout` (Kubernetes kills a
/// pod at the end of its grace period), says so, and leaves no git process of its own behind.
#[test]
fn sigterm_while_a_fetch_hangs_stops_within_the_stop_timeout() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let mut wd = watchdog(&repo, &sb.url, &["--stop-timeout", "2s"], &[]);
    let clone = point_the_clone_at_a_silent_remote(&repo);
    wd.proc.wait_line("has not returned for", T);
    assert!(working_in(&clone), "the hung fetch runs in the clone");
    let sent = std::time::Instant::now();
    wd.proc.sigterm();
    wd.proc.wait_exit(Duration::from_secs(20));
    let took = sent.elapsed();
    assert!(took < Duration::from_secs(10), "stopped after {took:?}");
    wd.proc.wait_line(
        "still under way after --stop-timeout 2s",
        Duration::from_secs(1),
    );
    // The fetch's git process went with the watchdog (its parent-death signal).
    wait_until("the git fetch to stop", Duration::from_secs(10), || {
        !working_in(&clone)
    });
}

/// Whether any process works in `dir` (a git command greenlight started in its clone).
fn working_in(dir: &std::path::Path) -> bool {
    let dir = dir.canonicalize().unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .any(|e| std::fs::read_link(e.path().join("cwd")).is_ok_and(|cwd| cwd == dir))
}
