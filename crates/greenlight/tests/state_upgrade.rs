//! A state file written by the greenlight before schema 2 (`tests/fixtures/state-v1.db`, see
//! the README there), met by this build as a user would meet it: `status` reads it without
//! writing, a daemon migrates it and resumes its in-flight watches against the very remote it
//! watched, and `--retain` prunes its finished watches. Only copies of the fixture are opened;
//! expectations are read from the file's own rows. Waits are bounded polls on printed lines and
//! recorded states, never fixed sleeps.

mod common;
use common::*;
use greenlight_core::time::Timestamp;
use rusqlite::{Connection, OpenFlags};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const T: Duration = Duration::from_secs(60);
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// A temporary directory holding `state.db`, a copy of the fixture, and, when asked, the
/// remote it watched (`origin.git`), which the file names by that relative path.
fn copy(with_remote: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.db");
    std::fs::copy(format!("{FIXTURES}/state-v1.db"), &state).unwrap();
    if with_remote {
        let out = Command::new("tar")
            .arg("-xzf")
            .arg(format!("{FIXTURES}/state-v1-origin.git.tar.gz"))
            .arg("-C")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (dir, state)
}

/// The watch bodies of the original file, read from a copy of it with plain SQL, by commit.
fn old_bodies() -> BTreeMap<String, Value> {
    let (_dir, state) = copy(false);
    let c = Connection::open(&state).unwrap();
    let mut stmt = c.prepare("SELECT commit_sha, body FROM watches").unwrap();
    stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .unwrap()
        .map(|r| {
            let (c, b) = r.unwrap();
            (c, serde_json::from_str(&b).unwrap())
        })
        .collect()
}

fn old_meta(key: &str) -> Option<String> {
    let (_dir, state) = copy(false);
    Connection::open(&state)
        .unwrap()
        .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .ok()
}

fn is_live(b: &Value) -> bool {
    matches!(b["state"].as_str(), Some("WAITING_REACH" | "JUDGING")) || b["revert_pending"] == true
}

fn rfc3339(ms: &Value) -> Value {
    ms.as_i64()
        .map(|ms| Value::String(Timestamp(ms).rfc3339()))
        .unwrap_or(Value::Null)
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

fn schema_version(state: &Path) -> String {
    Connection::open_with_flags(state, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap()
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

#[test]
fn status_reads_a_v1_file_without_writing_it_and_shows_every_watch() {
    let want = old_bodies();
    let (_dir, state) = copy(false);
    let before = std::fs::read(&state).unwrap();
    let st = status_json(&state);
    // The document's shape stays exactly what scripts read.
    assert_eq!(
        keys(&st),
        BTreeSet::from(["baseline", "breaker", "watches"])
    );
    assert_eq!(
        keys(&st["breaker"]),
        BTreeSet::from(["open", "consecutive_reverts"])
    );
    assert_eq!(st["baseline"], old_meta("baseline").unwrap().as_str());
    let breaker: Value = serde_json::from_str(&old_meta("breaker").unwrap()).unwrap();
    assert_eq!(st["breaker"]["open"], breaker["open"]);
    assert_eq!(
        st["breaker"]["consecutive_reverts"],
        breaker["consecutive_reverts"]
    );
    let watches = st["watches"].as_array().unwrap();
    assert_eq!(watches.len(), want.len());
    for w in watches {
        let b = &want[w["commit"].as_str().unwrap()];
        assert_eq!(
            keys(w),
            BTreeSet::from([
                "id",
                "commit",
                "app",
                "mode",
                "dry_run",
                "deadline_s",
                "state",
                "reason",
                "watch_started_at",
                "reached_at",
                "healthy_since",
                "finished_at",
                "revert_commit",
                // Added since (a revert asked of git or proposed as a pull request and not
                // landed yet): scripts that read the keys above read them unchanged.
                "revert_pending",
                "revert_pull_request",
            ])
        );
        assert_eq!(w["app"], b["app"]["name"]);
        assert_eq!(w["mode"], b["mode"]);
        assert_eq!(w["dry_run"], b["dry_run"]);
        assert_eq!(w["deadline_s"], b["deadline_ms"].as_i64().unwrap() / 1000);
        assert_eq!(w["state"], b["state"]);
        assert_eq!(w["reason"], b["reason"]);
        for key in [
            "watch_started_at",
            "reached_at",
            "healthy_since",
            "finished_at",
        ] {
            assert_eq!(w[key], rfc3339(&b[key]), "{key}: {w}");
        }
        assert_eq!(w["revert_commit"], b["revert_commit"]);
        assert_eq!(w["revert_pending"], b["revert_pending"]);
        assert!(w["revert_pull_request"].is_null(), "{w}");
    }
    // The table too.
    let out = Command::new(BIN)
        .args(["status", "--state", state.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for c in want.keys() {
        assert!(text.contains(&c[..10]), "{c} in:\n{text}");
    }
    assert_eq!(std::fs::read(&state).unwrap(), before, "status wrote");
    assert_eq!(schema_version(&state), "1");
}

/// The sandbox and the daemon run where the file and its remote are, as they were made.
fn sandbox_in(dir: &Path) -> (Proc, String) {
    let args = [
        "sandbox",
        "--repo",
        "origin.git",
        "--listen",
        "127.0.0.1:0",
        "--sync-interval",
        "200ms",
        "--rollout-time",
        "1s",
        "--app",
        "web=apps/web",
        "--app",
        "api=apps/api",
        "--app",
        "other=apps/other",
    ];
    let sb = Proc::spawn_in(BIN, Some(dir), args, &[]);
    let line = sb.wait_line("sandbox listening on ", T);
    let url = line.split("sandbox listening on ").nth(1).unwrap().trim();
    (sb, url.to_string())
}

fn daemon_in(dir: &Path, url: &str, retain: &str) -> Proc {
    let args = [
        "watch",
        "--repo",
        "origin.git",
        "--argocd-url",
        url,
        "--state",
        "state.db",
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
        "--retain",
        retain,
    ];
    let p = Proc::spawn_in(BIN, Some(dir), args, &[]);
    p.wait_line("watching ", T);
    p
}

fn remote_git(dir: &Path, args: &[&str]) -> String {
    git(&dir.join("origin.git"), args)
}

#[test]
fn a_daemon_migrates_a_v1_file_and_resumes_its_in_flight_watches() {
    let want = old_bodies();
    let (dir, state) = copy(true);
    let dir = dir.path();
    let (_sb, url) = sandbox_in(dir);
    let wd = daemon_in(dir, &url, "87600h");
    let tip = old_meta("tip").unwrap();
    wd.wait_line(&format!("watching origin.git main from {tip}"), T);
    assert_eq!(
        schema_version(&state),
        greenlight::store::SCHEMA_VERSION.to_string()
    );

    let by_state = |s: &str, pending: bool| -> &str {
        want.iter()
            .find(|(_, b)| b["state"] == s && b["revert_pending"] == pending)
            .map(|(c, _)| c.as_str())
            .unwrap()
    };
    let (waiting, judging, reverting) = (
        by_state("WAITING_REACH", false),
        by_state("JUDGING", false),
        by_state("FAIL", true),
    );
    // The watches being judged resume, from their recorded times.
    for c in [waiting, judging] {
        let app = want[c]["app"]["name"].as_str().unwrap();
        wd.wait_line(&format!("{} app={app} resumed after a restart", &c[..8]), T);
    }
    // The revert decided before the kill is issued again (the remote refused it then).
    let w = wait_state(&state, reverting, "REVERTED", T, &wd);
    assert_eq!(count_reverts_of_in(dir, reverting), 1);
    assert_eq!(
        w["revert_commit"],
        remote_git(dir, &["rev-parse", "main"]).as_str()
    );
    // The breaker counted one revert before; this one opens it.
    wd.wait_line("breaker opened", T);
    // And judging goes on where it stopped: the waiting watch reaches and is confirmed.
    let w = wait_state(&state, waiting, "CONFIRMED", T, &wd);
    assert!(w["reached_at"].is_string(), "{w}");
    // The streak recorded for the judging one before the kill already covers this daemon's
    // --stable-for: it is confirmed on that record, its reach and streak times kept.
    let b = &want[judging];
    let recorded = b["last_observed_at"].as_i64().unwrap() - b["healthy_since"].as_i64().unwrap();
    assert!(
        recorded >= 2000,
        "the fixture's streak lasted {recorded} ms"
    );
    let j = wait_state(&state, judging, "CONFIRMED", T, &wd);
    assert_eq!(j["reached_at"], rfc3339(&b["reached_at"]));
    assert_eq!(j["healthy_since"], rfc3339(&b["healthy_since"]));

    // The finished watches were not resumed, and `status` still lists them as they were.
    let st = status_json(&state);
    assert_eq!(st["watches"].as_array().unwrap().len(), want.len());
    assert_eq!(st["breaker"]["open"], true);
    for (c, b) in want.iter().filter(|(_, b)| !is_live(b)) {
        assert!(
            !wd.output().contains(&format!(
                "{} app={} resumed",
                &c[..8],
                b["app"]["name"].as_str().unwrap()
            )),
            "{c} resumed"
        );
        let w = watch_of(&st, c).unwrap();
        assert_eq!(w["state"], b["state"]);
        assert_eq!(w["finished_at"], rfc3339(&b["finished_at"]));
    }
}

fn count_reverts_of_in(dir: &Path, commit: &str) -> usize {
    remote_git(dir, &["log", "--format=%B", "main"])
        .matches(&format!("This reverts commit {commit}."))
        .count()
}

#[test]
fn retain_prunes_the_finished_watches_of_a_migrated_file_at_start_and_keeps_the_live_ones() {
    let want = old_bodies();
    let (dir, state) = copy(true);
    // Each event belongs to the watch of its (commit, app); the fixture has no other kind.
    let finished: Vec<(&str, &str)> = want
        .iter()
        .filter(|(_, b)| !is_live(b))
        .map(|(c, b)| (c.as_str(), b["app"]["name"].as_str().unwrap()))
        .collect();
    let events_of_finished: i64 = {
        let c = Connection::open(&state).unwrap();
        finished
            .iter()
            .map(|(commit, app)| {
                c.query_row(
                    "SELECT COUNT(*) FROM events WHERE commit_sha = ?1 AND app = ?2",
                    [commit, app],
                    |r| r.get::<_, i64>(0),
                )
                .unwrap()
            })
            .sum()
    };
    assert!(events_of_finished > 0);
    // The fixture is older than a second: every finished watch is past the retention. No
    // Argo CD is needed to see what start-up pruned.
    let wd = daemon_in(dir.path(), "http://127.0.0.1:1", "1s");
    wd.wait_line(
        &format!(
            "pruned {} finished watch(es) and {events_of_finished} event(s) older than --retain",
            finished.len()
        ),
        T,
    );
    let st = status_json(&state);
    let listed: BTreeSet<&str> = st["watches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["commit"].as_str().unwrap())
        .collect();
    let live: BTreeSet<&str> = want
        .iter()
        .filter(|(_, b)| is_live(b))
        .map(|(c, _)| c.as_str())
        .collect();
    assert_eq!(listed, live);
    let c = Connection::open_with_flags(&state, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    for (commit, _) in &finished {
        let left: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM events WHERE commit_sha = ?1",
                [commit],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(left, 0, "events of {commit}");
    }
    for commit in &live {
        let kept: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM events WHERE commit_sha = ?1 AND kind = 'watch_started'",
                [commit],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(kept, 1, "the start of {commit}, older than --retain, stays");
    }
}

#[test]
fn a_bad_retain_is_a_usage_error_naming_the_flag() {
    for bad in ["soon", "0", "0d", "2 months"] {
        let out = Command::new(BIN)
            .args([
                "watch",
                "--repo",
                "/x",
                "--argocd-url",
                "http://127.0.0.1:1",
                "--state",
                "/nonexistent/x.db",
                "--retain",
                bad,
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--retain"),
            "{bad}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
