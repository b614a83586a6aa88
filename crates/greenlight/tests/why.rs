//! End to end: `greenlight why` on verdicts the watchdog reached against the sandbox with real
//! git — a CONFIRMED across a restart of the watchdog, an armed FAIL it reverted, and an
//! INCONCLUSIVE across an outage of Argo CD's API — each told in words and replayed from its
//! recorded judge inputs to the same verdict; and a tape an "older greenlight" judged
//! otherwise (its settings changed on the tape), shown side by side with exit 3.

#[macro_use]
mod common;
use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

fn why(state: &Path, args: &[&str]) -> Output {
    std::process::Command::new(BIN)
        .arg("why")
        .args(args)
        .args(["--state", state.to_str().unwrap()])
        .output()
        .expect("run greenlight why")
}

#[track_caller]
fn why_text(state: &Path, args: &[&str], code: i32) -> String {
    let o = why(state, args);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(code),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

#[track_caller]
fn why_json(state: &Path, commit: &str) -> Value {
    let out = why_text(state, &[commit, "--json"], 0);
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(doc["schema"], "greenlight.why/v1");
    let watches = doc["watches"].as_array().unwrap();
    assert_eq!(watches.len(), 1, "{doc:#}");
    watches[0].clone()
}

fn events(w: &Value) -> Vec<String> {
    w["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_confirmed_a_reverted_and_an_inconclusive_verdict_each_replay_to_themselves() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web", "other=apps/other"], &[]);
    settled(&sb, &repo, &["web", "other"]);
    let state = repo.path("state/greenlight.db");

    // CONFIRMED, with the watchdog killed and started again while it judged.
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let good = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "30", "arm")),
    );
    wd.wait_state(&good, "JUDGING", T);
    drop(wd);
    let wd = watchdog_with_state(&repo, &sb.url, &state, &[], &[]);
    wd.wait_state(&good, "CONFIRMED", T);
    settled(&sb, &repo, &["web"]);

    // An armed FAIL, reverted.
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: 2.0.0\n\n{}", trailer("web", "3", "arm")),
    );
    wd.wait_state(&bad, "REVERTED", T);
    repo.pull();
    settled(&sb, &repo, &["web"]);

    // INCONCLUSIVE: Argo CD's API out through the deadline.
    let dark = repo.set_image(
        "other",
        BAD,
        &format!("other: 2.0.0\n\n{}", trailer("other", "6", "arm")),
    );
    wd.wait_state(&dark, "JUDGING", T);
    sb.control("/sandbox/v1/outage?seconds=30");
    wd.wait_state(&dark, "INCONCLUSIVE", T);
    drop(wd);

    let text = why_text(&state, &[&good[..10]], 0);
    assert!(
        text.contains("verdict as recorded: CONFIRMED")
            && text.contains("greenlight restarted")
            && text.contains("healthy streak started")
            && text.contains("replay: same verdict — CONFIRMED"),
        "{text}"
    );
    let w = why_json(&state, &good);
    assert_eq!(w["replay"]["outcome"], "same", "{w:#}");
    assert_eq!(w["recorded"]["state"], "CONFIRMED");
    assert_eq!(w["replay"]["verdict"], w["recorded"], "{w:#}");
    assert_eq!(w["restarts"].as_array().unwrap().len(), 1, "{w:#}");

    let w = why_json(&state, &bad);
    assert_eq!(w["replay"]["outcome"], "same", "{w:#}");
    assert_eq!(w["recorded"]["state"], "REVERTED");
    let said = events(&w);
    for e in ["reached", "failed", "revert_pushed"] {
        assert!(said.iter().any(|s| s == e), "{e} not in {said:?}");
    }
    let text = why_text(&state, &[&bad, "--app", "web"], 0);
    assert!(
        text.contains("replay: same verdict — REVERTED") && text.contains("health deadline"),
        "{text}"
    );

    let w = why_json(&state, &dark);
    assert_eq!(w["replay"]["outcome"], "same", "{w:#}");
    assert_eq!(w["recorded"]["state"], "INCONCLUSIVE");
    assert!(
        w["replay"]["verdict"]["reason"]
            .as_str()
            .unwrap()
            .contains("last observed"),
        "{w:#}"
    );
    let every = why_text(&state, &["--all"], 0);
    assert_eq!(every.matches("replay: same verdict").count(), 3, "{every}");

    // An older greenlight's settings on the tape (at its start and at the restart): the same
    // inputs, judged with a stable-for of an hour, never confirm — shown side by side, exit 3.
    let conn = rusqlite::Connection::open(&state).unwrap();
    let id = format!("{good}:0");
    let changed = conn
        .execute(
            "UPDATE watch_inputs SET step = json_set(step, '$.config.stable_for_ms', 3600000)
             WHERE watch_id = ?1 AND json_extract(step, '$.config') IS NOT NULL",
            [&id],
        )
        .unwrap();
    assert_eq!(changed, 2, "its start and its restart");
    drop(conn);
    let text = why_text(&state, &[&good], 3);
    assert!(
        text.contains("replay: a DIFFERENT verdict")
            && text.contains("recorded")
            && text.contains("replayed")
            && text.contains("JUDGING"),
        "{text}"
    );
    let o = why(&state, &["--all"]);
    assert_eq!(o.status.code(), Some(3));

    // A step that does not read: named, with its watch, exit 1; nothing is replayed from it.
    let conn = rusqlite::Connection::open(&state).unwrap();
    let id = format!("{bad}:0");
    conn.execute(
        "UPDATE watch_inputs SET step = '{\"step\": \"nonsense\"}' WHERE watch_id = ?1 AND seq = 1",
        [&id],
    )
    .unwrap();
    drop(conn);
    let o = why(&state, &[&bad]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("replay: none — its tape cannot be read")
            && out.contains(&format!("step 1 of the tape of watch {id} cannot be read")),
        "{out}"
    );
}

#[test]
fn what_why_refuses() {
    let repo = Repo::new();
    let state = repo.path("state/greenlight.db");
    // No state file.
    let o = why(&state, &["abcdef12"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("greenlight.db"),
        "{o:?}"
    );
    // A state file, and no watch of the commit.
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    drop(wd);
    let o = why(&state, &["abcdef12"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no watch of commit abcdef12"),
        "{o:?}"
    );
    for bad in ["xyz", "abc", "not-a-sha"] {
        let o = why(&state, &[bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {o:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("not a commit SHA"),
            "{o:?}"
        );
    }
    let o = why(&state, &["abcdef12", "--app", "a/b/c"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--app"),
        "{o:?}"
    );
    assert_eq!(
        why_text(&state, &["--all"], 0).trim(),
        format!("no watch in the state file {}", state.display())
    );
}
