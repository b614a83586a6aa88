//! Existing state files: watch bodies as greenlight has always written them load through the
//! store, show the same state and reason, and are written back as the same record — whole, byte
//! for byte, where a store keeps records whole (`watch_body`), and in the state file as a body
//! and its parts that put together are the same JSON.

use greenlight::store::{SqliteStore, Write};
use rusqlite::params;

/// One body per state and verdict, recorded from the judge (see the core test that owns them).
const BODIES: &str = include_str!("../../greenlight-core/tests/fixtures/watch_bodies.json");

/// `(label, body)`; several recorded watches share a commit, so each gets its own trailer
/// index here to be its own row.
fn bodies() -> Vec<(String, String)> {
    let v: Vec<serde_json::Value> = serde_json::from_str(BODIES).unwrap();
    v.into_iter()
        .enumerate()
        .map(|(i, x)| {
            let body = x["body"].as_str().unwrap();
            let id = serde_json::from_str::<serde_json::Value>(body).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string();
            let unique = format!("{}:{i}", id.split(':').next().unwrap());
            (
                x["label"].as_str().unwrap().to_string(),
                body.replace(&format!("\"id\":\"{id}\""), &format!("\"id\":\"{unique}\"")),
            )
        })
        .collect()
}

#[test]
fn recorded_watch_bodies_load_and_are_written_back_as_the_same_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    let bodies = bodies();
    {
        // As an older greenlight left them.
        let conn = rusqlite::Connection::open(&path).unwrap();
        for (i, (_, body)) in bodies.iter().enumerate() {
            let v: serde_json::Value = serde_json::from_str(body).unwrap();
            conn.execute(
                "INSERT INTO watches (id, commit_sha, app, state, started_at, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    v["id"].as_str().unwrap(),
                    v["commit"].as_str().unwrap(),
                    v["app"]["name"].as_str().unwrap(),
                    v["state"].as_str().unwrap(),
                    i as i64,
                    body
                ],
            )
            .unwrap();
        }
    }
    let loaded = store.load().unwrap();
    assert_eq!(loaded.watches.len(), bodies.len());
    for (w, (label, body)) in loaded.watches.iter().zip(&bodies) {
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(w.id, v["id"].as_str().unwrap(), "{label}");
        assert_eq!(w.state().as_str(), v["state"].as_str().unwrap(), "{label}");
        assert_eq!(
            w.reason().to_string(),
            v["reason"].as_str().unwrap(),
            "{label}"
        );
    }
    store
        .write(Write {
            watches: &loaded.watches,
            ..Write::default()
        })
        .unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    for (w, (label, body)) in loaded.watches.iter().zip(&bodies) {
        // Whole: the record format comes first; the rest is the body as greenlight always
        // wrote it.
        let whole = greenlight::store::watch_body(w).unwrap();
        let whole = whole
            .strip_prefix("{\"format\":1,")
            .map(|rest| format!("{{{rest}"))
            .unwrap_or(whole);
        assert_eq!(&whole, body, "{label}");

        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        let id = v["id"].as_str().unwrap();
        let (state, written): (String, String) = conn
            .query_row("SELECT state, body FROM watches WHERE id = ?1", [id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!(state, v["state"].as_str().unwrap(), "{label}");
        // In the state file: the body without its lists, each list a part.
        let mut written: serde_json::Value = serde_json::from_str(&written).unwrap();
        for list in ["own_paths", "later_commits"] {
            assert!(written.get(list).is_none(), "{label}: {list} is a part");
        }
        let mut stmt = conn
            .prepare(
                "SELECT l.name, p.body FROM watch_parts l JOIN parts p ON p.hash = l.hash
                 WHERE l.watch_id = ?1",
            )
            .unwrap();
        let parts: Vec<(String, String)> = stmt
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for (name, json) in parts {
            let value: serde_json::Value = serde_json::from_str(&json).unwrap();
            match name.as_str() {
                "baseline_batch" => written["baseline"]["batch"] = value,
                _ => written[name.as_str()] = value,
            }
        }
        written.as_object_mut().unwrap().remove("format");
        assert_eq!(written, v, "{label}");
    }
}

#[test]
fn a_body_that_contradicts_its_state_is_refused_naming_the_watch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let store = SqliteStore::open_or_create(&path).unwrap();
    let (_, body) = bodies()
        .into_iter()
        .find(|(l, _)| l == "judging_streak")
        .unwrap();
    let body = body.replace("\"state\":\"JUDGING\"", "\"state\":\"WAITING_REACH\"");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "INSERT INTO watches (id, commit_sha, app, state, started_at, body) VALUES ('w', 'c', 'web', 'WAITING_REACH', 0, ?1)",
        [body],
    )
    .unwrap();
    let err = format!("{:#}", store.load().err().expect("refused"));
    assert!(
        err.contains("watch w in") && err.contains("cannot be read"),
        "{err}"
    );
    assert!(err.contains("JUDGING"), "says what contradicts: {err}");
}
