//! The store against real files: the schema-1 fixture written by the old code (only ever
//! copies of it), migrations and their failure, readers that must not write, and retention.
//! Expectations about the fixture are read from its own JSON bodies with plain SQL.

use super::*;
use greenlight_core::event::{EventKind, Evidence};
use rusqlite::types::ValueRef;
use serde_json::{Value, json};
use std::collections::BTreeMap;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/state-v1.db");

/// A copy of the schema-1 fixture: the fixture itself is never opened (even a reader of a WAL
/// file may leave files beside it).
fn fixture_copy(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::copy(FIXTURE, &p).unwrap();
    p
}

fn sql(path: &Path) -> Connection {
    Connection::open(path).unwrap()
}

/// The watch bodies of a state file as JSON, by id.
fn bodies(path: &Path) -> BTreeMap<String, Value> {
    let c = sql(path);
    let mut stmt = c.prepare("SELECT id, body FROM watches").unwrap();
    stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .unwrap()
        .map(|r| {
            let (id, body) = r.unwrap();
            (id, serde_json::from_str(&body).unwrap())
        })
        .collect()
}

fn meta_of(path: &Path, key: &str) -> Option<String> {
    sql(path)
        .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .optional()
        .unwrap()
}

/// Every row of `table`, every column, as text: for "nothing changed" comparisons.
fn dump(path: &Path, table: &str) -> Vec<String> {
    let c = sql(path);
    let mut stmt = c
        .prepare(&format!("SELECT * FROM {table} ORDER BY 1"))
        .unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |r| {
        Ok((0..n)
            .map(|i| match r.get_ref(i).unwrap() {
                ValueRef::Null => "NULL".to_string(),
                ValueRef::Integer(v) => v.to_string(),
                ValueRef::Real(v) => v.to_string(),
                ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
            })
            .collect::<Vec<_>>()
            .join("|"))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn columns(path: &Path, table: &str) -> Vec<String> {
    let c = sql(path);
    let mut stmt = c
        .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn is_live(body: &Value) -> bool {
    matches!(body["state"].as_str(), Some("WAITING_REACH" | "JUDGING"))
        || body["revert_pending"] == true
}

fn ms(t: Option<Timestamp>) -> Option<i64> {
    t.map(|t| t.0)
}

#[test]
fn every_watch_of_the_v1_file_written_by_the_old_code_comes_back_intact() {
    let dir = tempfile::tempdir().unwrap();
    let want = bodies(&fixture_copy(dir.path(), "old.db"));
    let path = fixture_copy(dir.path(), "state.db");
    // What the fixture was made to hold (see its README).
    let states: Vec<(&str, bool)> = want
        .values()
        .map(|b| (b["state"].as_str().unwrap(), b["revert_pending"] == true))
        .collect();
    for needed in [
        ("WAITING_REACH", false),
        ("JUDGING", false),
        ("FAIL", true),
        ("FAIL", false),
        ("CONFIRMED", false),
        ("REVERTED", false),
    ] {
        assert!(states.contains(&needed), "{needed:?} in {states:?}");
    }

    let store = SqliteStore::open_or_create(&path).unwrap();
    let loaded = store.load().unwrap();
    assert_eq!(loaded.watches.len(), want.len());
    for w in &loaded.watches {
        let b = &want[&w.id];
        // The fields the judge and `status` read, against the old JSON itself.
        assert_eq!(b["commit"], w.commit.as_str());
        assert_eq!(b["subject"], w.subject.as_str());
        assert_eq!(b["app"]["name"], w.app.name.as_str());
        assert_eq!(b["app"]["namespace"].as_str(), w.app.namespace.as_deref());
        assert_eq!(b["mode"], w.mode.as_str());
        assert_eq!(b["dry_run"], w.dry_run);
        assert_eq!(b["deadline_ms"], w.deadline_ms);
        assert_eq!(b["state"], w.state().as_str());
        assert_eq!(b["reason"], w.reason_text());
        assert_eq!(b["watch_started_at"], w.watch_started_at.0);
        assert_eq!(b["reached_at"].as_i64(), ms(w.reached_at()));
        assert_eq!(b["healthy_since"].as_i64(), ms(w.healthy_since()));
        assert_eq!(b["finished_at"].as_i64(), ms(w.finished_at()));
        assert_eq!(b["last_observed_at"].as_i64(), ms(w.last_observed_at()));
        assert_eq!(
            b["revert_commit"].as_str(),
            w.revert_commit().map(|c| c.as_str())
        );
        assert_eq!(b["revert_pending"], w.revert_pending());
        assert_eq!(b["deadline_passed"], w.deadline_passed());
        let later: Vec<&str> = w.later_commits().iter().map(|c| c.sha.as_str()).collect();
        let want_later: Vec<&str> = b["later_commits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["sha"].as_str().unwrap())
            .collect();
        assert_eq!(later, want_later);
        assert_eq!(
            b["seen"]["health"].as_str(),
            w.seen().health.map(|h| h.as_str())
        );
        // And every other field: written back as a record, the watch is the old body, key
        // for key (the record adds only its format number).
        let mut again = serde_json::to_value(WatchRecord::from(w)).unwrap();
        assert_eq!(
            again.as_object_mut().unwrap().remove("format"),
            Some(json!(1))
        );
        assert_eq!(&again, b, "{}", w.id);
    }
    let judging = loaded
        .watches
        .iter()
        .find(|w| w.state().as_str() == "JUDGING")
        .unwrap();
    assert!(judging.healthy_since().is_some(), "a streak under way");

    // The daemon's view: the live ones in full, the finished ones by id.
    let resume = store.load_live().unwrap();
    let live: BTreeSet<String> = resume.live.iter().map(|w| w.id.clone()).collect();
    let want_live: BTreeSet<String> = want
        .iter()
        .filter(|(_, b)| is_live(b))
        .map(|(id, _)| id.clone())
        .collect();
    let want_finished: BTreeSet<String> = want
        .iter()
        .filter(|(_, b)| !is_live(b))
        .map(|(id, _)| id.clone())
        .collect();
    assert_eq!(live, want_live);
    assert_eq!(resume.finished_ids, want_finished);
    assert_eq!((live.len(), want_finished.len()), (3, 3));

    let breaker: Value =
        serde_json::from_str(&meta_of(&dir.path().join("old.db"), "breaker").unwrap()).unwrap();
    assert_eq!(breaker["open"], resume.breaker.open);
    assert_eq!(
        breaker["consecutive_reverts"],
        resume.breaker.consecutive_reverts
    );
    assert_eq!(resume.breaker.consecutive_reverts, 1);
    let old = dir.path().join("old.db");
    assert_eq!(resume.tip, meta_of(&old, "tip"));
    assert_eq!(resume.baseline, meta_of(&old, "baseline"));
    assert_eq!(loaded.repo.as_deref(), Some("origin.git"));
}

#[test]
fn open_or_create_migrates_a_v1_file_to_the_current_version_and_a_second_open_is_a_no_op() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_copy(dir.path(), "state.db");
    assert_eq!(meta_of(&path, "schema_version").as_deref(), Some("1"));
    assert!(!columns(&path, "watches").contains(&"live".to_string()));
    let events_before = dump(&path, "events");
    let old = bodies(&path);

    let store = SqliteStore::open_or_create(&path).unwrap();
    assert_eq!(store.migrated_from(), Some(1));
    drop(store);
    assert_eq!(
        meta_of(&path, "schema_version"),
        Some(SCHEMA_VERSION.to_string())
    );
    assert_eq!(
        dump(&path, "events"),
        events_before,
        "events are not touched"
    );
    // The new columns say what the bodies say; every body now names its format.
    let c = sql(&path);
    let mut stmt = c
        .prepare("SELECT id, live, finished_at, body FROM watches")
        .unwrap();
    let rows: Vec<(String, bool, Option<i64>, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), old.len());
    for (id, live, finished_at, body) in rows {
        let mut body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(live, is_live(&old[&id]), "{id}");
        assert_eq!(finished_at, old[&id]["finished_at"].as_i64(), "{id}");
        assert_eq!(
            body.as_object_mut().unwrap().remove("format"),
            Some(json!(1))
        );
        assert_eq!(body, old[&id], "{id}");
    }
    let breaker: Value = serde_json::from_str(&meta_of(&path, "breaker").unwrap()).unwrap();
    assert_eq!(breaker["format"], 1);

    let after: Vec<Vec<String>> = ["meta", "watches", "events"]
        .iter()
        .map(|t| dump(&path, t))
        .collect();
    let store = SqliteStore::open_or_create(&path).unwrap();
    assert_eq!(store.migrated_from(), None);
    drop(store);
    let again: Vec<Vec<String>> = ["meta", "watches", "events"]
        .iter()
        .map(|t| dump(&path, t))
        .collect();
    assert_eq!(again, after, "a second open changes nothing");
}

#[test]
fn a_new_file_goes_through_every_step_and_matches_a_migrated_one() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.db");
    let store = SqliteStore::open_or_create(&fresh).unwrap();
    assert_eq!(store.migrated_from(), None, "created, not migrated");
    drop(store);
    let migrated = fixture_copy(dir.path(), "migrated.db");
    SqliteStore::open_or_create(&migrated).unwrap();
    assert_eq!(
        meta_of(&fresh, "schema_version"),
        Some(SCHEMA_VERSION.to_string())
    );
    for table in [
        "meta",
        "watches",
        "events",
        "notify_cursor",
        "notify_dead",
        "parts",
        "watch_parts",
        "watch_inputs",
    ] {
        assert!(!columns(&fresh, table).is_empty(), "{table}");
        assert_eq!(columns(&fresh, table), columns(&migrated, table), "{table}");
    }
    let indexes = |p: &Path| -> Vec<String> {
        let c = sql(p);
        let mut stmt = c
            .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(indexes(&fresh), indexes(&migrated));
    assert_eq!(indexes(&fresh).len(), 6);
}

#[test]
fn a_reader_reads_a_v1_file_through_the_same_records_without_writing_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_copy(dir.path(), "state.db");
    let bytes = std::fs::read(&path).unwrap();
    let store = SqliteStore::open_existing(&path, true).unwrap();
    let old = store.load().unwrap();
    // The daemon's own queries need the new columns, and say how to get them.
    let err = store.load_live().err().unwrap().to_string();
    assert!(
        err.contains("schema version 1") && err.contains("greenlight watch"),
        "{err}"
    );
    drop(store);
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "the reader wrote");

    let migrated = fixture_copy(dir.path(), "migrated.db");
    let new = SqliteStore::open_or_create(&migrated)
        .unwrap()
        .load()
        .unwrap();
    assert_eq!(old.watches, new.watches);
    assert_eq!(old.breaker, new.breaker);
    assert_eq!((old.tip, old.baseline), (new.tip, new.baseline));
}

#[test]
fn breaker_reset_on_a_v1_file_writes_the_breaker_but_never_a_watch() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_copy(dir.path(), "state.db");
    let mut store = SqliteStore::open_existing(&path, false).unwrap();
    let watches = store.load().unwrap().watches;
    store
        .write(Write {
            breaker: Some(&Breaker::default()),
            ..Write::default()
        })
        .unwrap();
    let err = store
        .write(Write {
            watches: &watches[..1],
            ..Write::default()
        })
        .unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("needs version {SCHEMA_VERSION}")),
        "{err}"
    );
    drop(store);
    assert_eq!(meta_of(&path, "schema_version").as_deref(), Some("1"));
    let b: Value = serde_json::from_str(&meta_of(&path, "breaker").unwrap()).unwrap();
    assert_eq!(b["consecutive_reverts"], 0);
}

#[test]
fn a_newer_schema_is_refused_naming_the_file_and_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_copy(dir.path(), "state.db");
    sql(&path)
        .execute(
            "UPDATE meta SET value = '7' WHERE key = 'schema_version'",
            [],
        )
        .unwrap();
    let before = dump(&path, "watches");
    for err in [
        SqliteStore::open_or_create(&path).err().unwrap(),
        SqliteStore::open_existing(&path, true).err().unwrap(),
        SqliteStore::open_existing(&path, false).err().unwrap(),
    ] {
        let msg = format!("{err:#}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains("version 7"), "{msg}");
        assert!(msg.contains(&format!("up to {SCHEMA_VERSION}")), "{msg}");
    }
    assert_eq!(meta_of(&path, "schema_version").as_deref(), Some("7"));
    assert_eq!(dump(&path, "watches"), before);
}

#[test]
fn a_migration_that_cannot_read_a_body_leaves_the_file_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_copy(dir.path(), "state.db");
    let id = bodies(&path).keys().next().unwrap().clone();
    sql(&path)
        .execute(
            "UPDATE watches SET body = '{\"id\": 1' WHERE id = ?1",
            [&id],
        )
        .unwrap();
    let before: Vec<Vec<String>> = ["meta", "watches", "events"]
        .iter()
        .map(|t| dump(&path, t))
        .collect();
    let err = format!("{:#}", SqliteStore::open_or_create(&path).err().unwrap());
    assert!(
        err.contains(&id)
            && err.contains(&format!("from state schema version 1 to {SCHEMA_VERSION}")),
        "{err}"
    );
    let after: Vec<Vec<String>> = ["meta", "watches", "events"]
        .iter()
        .map(|t| dump(&path, t))
        .collect();
    assert_eq!(after, before);
    assert!(!columns(&path, "watches").contains(&"live".to_string()));
}

#[test]
fn a_breaker_reset_request_survives_until_the_write_that_applies_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    SqliteStore::open_existing(&path, false)
        .unwrap()
        .request_breaker_reset(1)
        .unwrap();
    assert!(store.breaker_reset_requested().unwrap());
    // The daemon saw the request; an unrelated write (or a crash) before the reset is
    // persisted leaves it pending.
    store.write(Write::default()).unwrap();
    drop(store);
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    assert!(store.breaker_reset_requested().unwrap());
    store
        .write(Write {
            breaker: Some(&Breaker::default()),
            clear_breaker_reset_request: true,
            ..Write::default()
        })
        .unwrap();
    assert!(!store.breaker_reset_requested().unwrap());
}

// ---------------------------------------------------------------- retention

/// A watch of app `app` on commit `n`, as a body of the current format would hold it.
fn watch(n: u32, app: &str, state: &str, started: i64, finished: Option<i64>) -> Watch {
    watch_with(n, app, state, started, finished, false)
}

/// A watch as its stored body says; a JUDGING one reached its app at `started`.
fn watch_with(
    n: u32,
    app: &str,
    state: &str,
    started: i64,
    finished: Option<i64>,
    revert_pending: bool,
) -> Watch {
    let sha = format!("{n:040x}");
    // A JUDGING watch, and a FAIL whose revert is pending, reached their app.
    let judging = state == "JUDGING" || revert_pending;
    let body = json!({
        "id": format!("{sha}:0"), "commit": sha, "subject": "s",
        "app": {"namespace": null, "name": app}, "mode": "arm", "dry_run": false,
        "deadline_ms": 60000, "state": state, "reason": "r", "watch_started_at": started,
        "reached_at": judging.then_some(started), "healthy_since": null, "finished_at": finished,
        "revert_commit": null, "last_observed_at": judging.then_some(started),
        "app_absent_since": null,
        "reach": judging.then(|| json!({"revision": sha, "via": "OperationSucceeded"})),
        "own_paths": [], "later_commits": [], "source_paths": null,
        "arm_blocked": null, "revert_pending": revert_pending, "deadline_passed": false,
        "warned_auto_sync_off": false, "reported_sync_failure": false,
        "seen": {"health": null, "sync": "", "revision": "", "operation": null,
                 "unhealthy_resources": [], "resource_health_source": null,
                 "why_not_healthy": null}
    });
    Watch::try_from(WatchRecord::parse(&body.to_string()).unwrap()).unwrap()
}

fn event(time: i64, kind: EventKind, of: Option<&Watch>) -> Event {
    Event {
        time: Timestamp(time),
        event: kind,
        commit: of.map(|w| w.commit.to_string()),
        app: of.map(|w| w.app.to_string()),
        state: of.map(|w| w.state()),
        message: format!("at {time}"),
        evidence: Evidence::default(),
        outcome: None,
        reason: None,
    }
}

fn event_times(path: &Path) -> Vec<i64> {
    let c = sql(path);
    let mut stmt = c.prepare("SELECT time FROM events ORDER BY time").unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The state file's bytes on disk: the database and its write-ahead log.
fn bytes_on_disk(path: &Path) -> u64 {
    let wal = path.with_file_name(format!(
        "{}-wal",
        path.file_name().unwrap().to_string_lossy()
    ));
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    size(path) + size(&wal)
}

/// A day of finished watches, each with a few events, written one write each (as the daemon
/// writes a loop turn), all past the cutoff but the last `kept`.
fn a_busy_day(store: &mut SqliteStore, n: u32, kept: u32) {
    for i in 0..n {
        let t = if i + kept >= n { 10_000 } else { 10 };
        let w = watch(i + 1, "web", "CONFIRMED", t, Some(t + 1));
        let events: Vec<Event> = (0..4)
            .map(|k| event(t + k, EventKind::Reached, Some(&w)))
            .collect();
        store
            .write(Write {
                watches: std::slice::from_ref(&w),
                events: &events,
                ..Write::default()
            })
            .unwrap();
    }
}

#[test]
fn pruning_gives_the_space_back_and_empties_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    let empty = bytes_on_disk(&path);
    a_busy_day(&mut store, 3000, 30);
    let full = bytes_on_disk(&path);
    assert!(
        full > 20 * empty,
        "{full} bytes after a busy day, {empty} empty"
    );

    let pruned = store.prune(Timestamp(1000)).unwrap();
    assert_eq!(pruned.watches, 2970);
    let after = bytes_on_disk(&path);
    let c = sql(&path);
    let q = |p: &str| -> i64 {
        c.query_row(&format!("PRAGMA {p}"), [], |r| r.get(0))
            .unwrap()
    };
    assert!(
        after * 10 < full,
        "{after} bytes after pruning 99% of {full} bytes; auto_vacuum {} freelist {} pages {}",
        q("auto_vacuum"),
        q("freelist_count"),
        q("page_count")
    );
    assert_eq!(
        store.load().unwrap().watches.len(),
        30,
        "the retained ones stay"
    );
    assert_eq!(event_times(&path).len(), 30 * 4);
}

/// A file made before the store compacted (no auto-vacuum) is rewritten into the mode that
/// allows it at its first prune, and shrinks then.
#[test]
fn a_file_from_before_compaction_is_converted_at_its_first_prune() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    drop(store);
    let c = sql(&path);
    c.execute_batch("PRAGMA auto_vacuum = NONE; VACUUM;")
        .unwrap();
    let mode: i64 = c.query_row("PRAGMA auto_vacuum", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, 0);
    drop(c);
    store = SqliteStore::open_or_create(&path).unwrap();
    a_busy_day(&mut store, 2000, 20);
    let full = bytes_on_disk(&path);
    store.prune(Timestamp(1000)).unwrap();
    let after = bytes_on_disk(&path);
    assert!(
        after * 10 < full,
        "{after} bytes after pruning, {full} before"
    );
    let mode: i64 = sql(&path)
        .query_row("PRAGMA auto_vacuum", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, 2, "incremental from now on");
}

#[test]
fn prune_removes_finished_watches_past_the_cutoff_with_their_events_and_keeps_live_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    let done_old = watch(1, "web", "CONFIRMED", 10, Some(100));
    let pending_old = watch_with(2, "api", "FAIL", 20, Some(100), true);
    let live_old = watch(3, "other", "JUDGING", 50, None);
    let done_new = watch(4, "web", "FAIL", 1500, Some(2000));
    // A rejected trailer of a retained watch's commit, for the same app: it stays with it.
    let mut rejected_kept = event(300, EventKind::DirectiveRejected, Some(&done_new));
    rejected_kept.state = None;
    // A rejected trailer that started nothing (no app): it goes by its time.
    let mut rejected_alone = event(400, EventKind::DirectiveRejected, Some(&done_old));
    rejected_alone.app = None;
    store
        .write(Write {
            watches: &[
                done_old.clone(),
                pending_old.clone(),
                live_old.clone(),
                done_new.clone(),
            ],
            events: &[
                event(90, EventKind::Confirmed, Some(&done_old)),
                // After its watch's verdict and after the cutoff: still goes with its watch.
                event(1500, EventKind::RevertFailed, Some(&done_old)),
                event(95, EventKind::Failed, Some(&pending_old)),
                event(60, EventKind::Reached, Some(&live_old)),
                event(1900, EventKind::Failed, Some(&done_new)),
                rejected_kept,
                rejected_alone,
                event(500, EventKind::BreakerOpened, None),
                event(1200, EventKind::BreakerReset, None),
            ],
            ..Write::default()
        })
        .unwrap();

    let pruned = store.prune(Timestamp(1000)).unwrap();
    assert_eq!(
        pruned,
        Pruned {
            watches: 1,
            events: 4
        }
    );
    assert_eq!(event_times(&path), vec![60, 95, 300, 1200, 1900]);
    let ids: Vec<String> = store
        .load()
        .unwrap()
        .watches
        .iter()
        .map(|w| w.id.clone())
        .collect();
    assert_eq!(
        ids,
        vec![
            pending_old.id.clone(),
            live_old.id.clone(),
            done_new.id.clone()
        ]
    );
    let resume = store.load_live().unwrap();
    let live: Vec<&str> = resume.live.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(live, vec![pending_old.id.as_str(), live_old.id.as_str()]);
    assert_eq!(resume.finished_ids, BTreeSet::from([done_new.id.clone()]));
    assert_eq!(store.prune(Timestamp(1000)).unwrap(), Pruned::default());

    // A watch that finishes is written as finished, and goes once it is old enough.
    let done = watch(3, "other", "INCONCLUSIVE", 50, Some(2500));
    assert_eq!(done.id, live_old.id);
    store
        .write(Write {
            watches: &[done],
            ..Write::default()
        })
        .unwrap();
    // Not yet: only the older verdict, its events and the breaker's old event go.
    assert_eq!(
        store.prune(Timestamp(2400)).unwrap(),
        Pruned {
            watches: 1,
            events: 3
        }
    );
    assert_eq!(event_times(&path), vec![60, 95]);
    assert_eq!(
        store.prune(Timestamp(3000)).unwrap(),
        Pruned {
            watches: 1,
            events: 1
        }
    );
    assert_eq!(event_times(&path), vec![95]);
    assert_eq!(
        store.load_live().unwrap().live.len(),
        1,
        "the pending revert stays"
    );
}

#[test]
fn the_daemon_prunes_at_its_first_call_then_at_most_once_an_hour() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    let day = 86_400_000;
    let t0 = 100 * day;
    let retain = 30 * day;
    store
        .write(Write {
            watches: &[
                watch(1, "web", "CONFIRMED", 0, Some(t0 - retain - 1)),
                watch(2, "api", "CONFIRMED", 0, Some(t0 - retain + 1_800_000)),
            ],
            ..Write::default()
        })
        .unwrap();
    let first = store.prune_due(Timestamp(t0), retain).unwrap();
    assert_eq!(first.map(|p| p.watches), Some(1));
    // Half an hour later the second is past the retention, but pruning is not due yet.
    let half = Timestamp(t0 + 1_800_001);
    assert_eq!(store.prune_due(half, retain).unwrap(), None);
    assert_eq!(store.load().unwrap().watches.len(), 1);
    let hour = Timestamp(t0 + PRUNE_EVERY_MS);
    assert_eq!(
        store.prune_due(hour, retain).unwrap().map(|p| p.watches),
        Some(1)
    );
    assert!(store.load().unwrap().watches.is_empty());
}

#[test]
fn a_failed_prune_is_tried_again_an_hour_later_not_at_every_tick() {
    let dir = tempfile::tempdir().unwrap();
    // A v1 file opened without migrating cannot be pruned: a failure that is easy to make.
    let path = fixture_copy(dir.path(), "state.db");
    let mut store = SqliteStore::open_existing(&path, false).unwrap();
    let t0 = Timestamp(1_000_000_000);
    assert!(store.prune_due(t0, 1).is_err());
    assert_eq!(store.prune_due(t0.plus_ms(60_000), 1).unwrap(), None);
    assert!(store.prune_due(t0.plus_ms(PRUNE_EVERY_MS), 1).is_err());
}

/// Each app's idle observations are written as they change and read back at the next start;
/// none forgets the app, and a row that does not read is left out (no baseline, no revert).
#[test]
fn idle_observations_survive_a_restart() {
    use greenlight_core::judge::Idle;
    use greenlight_core::snapshot::{AppKey, Chronic, Health, ResourceView};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let key = |name: &str| AppKey {
        namespace: "argocd".into(),
        name: name.into(),
    };
    let seen = vec![
        Idle {
            revision: "a".repeat(40),
            health: Health::Healthy,
            unclean: None,
            applied: None,
            chronic: Chronic::default(),
            out_of_sync: false,
        },
        Idle {
            revision: "b".repeat(40),
            health: Health::Degraded,
            unclean: Some("sync status OutOfSync".into()),
            applied: Some("c".repeat(40)),
            // What was not clean there is kept too (`docs/verdicts.md#evidence`).
            chronic: Chronic {
                resources: vec![ResourceView {
                    group: "batch".into(),
                    kind: "CronJob".into(),
                    namespace: "apps".into(),
                    name: "nightly".into(),
                    sync_status: "Synced".into(),
                    requires_pruning: false,
                    health: Some(Health::Suspended),
                    message: "CronJob is Suspended".into(),
                }],
                hooks: vec!["batch/Job/smoke (Job has reached the specified backoff limit)".into()],
                disagreeing: Vec::new(),
            },
            // Compared OutOfSync: a compared baseline's row (`docs/verdicts.md#baseline`).
            out_of_sync: true,
        },
    ];
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    store
        .write(Write {
            idle: &[(key("web"), seen.clone()), (key("api"), seen[..1].to_vec())],
            ..Write::default()
        })
        .unwrap();
    store
        .write(Write {
            idle: &[(key("api"), Vec::new())],
            ..Write::default()
        })
        .unwrap();
    drop(store);
    sql(&path)
        .execute(
            "INSERT INTO meta (key, value) VALUES ('idle:argocd/broken', 'not json')",
            [],
        )
        .unwrap();
    let store = SqliteStore::open_or_create(&path).unwrap();
    assert_eq!(store.load_live().unwrap().idle, vec![(key("web"), seen)]);
}

/// Arrived commits are kept in order, the newest few thousand; a row that does not read drops
/// what came before it (a batch through it is then unknown, never wrong).
#[test]
fn arrived_commits_survive_a_restart_in_order() {
    use greenlight_core::commit::CommitId;
    use greenlight_core::judge::{ARRIVED_KEPT, Arrived};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let commit = |n: usize| Arrived {
        sha: CommitId::parse(&format!("{n:040x}")).unwrap(),
        parents: vec![CommitId::parse(&format!("{:040x}", n + 1_000_000)).unwrap()],
        changed_paths: vec![format!("apps/{n}/deploy.yaml")].into(),
        // Every other one a revert: what it reverts is kept too.
        reverts: (n % 2 == 1).then(|| CommitId::parse(&format!("{:040x}", n + 2_000_000)).unwrap()),
        at: n.is_multiple_of(3).then_some(Timestamp(n as i64)),
        by_greenlight: n.is_multiple_of(5),
    };
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    let first: Vec<Arrived> = (0..3).map(commit).collect();
    store
        .write(Write {
            arrived: &first,
            ..Write::default()
        })
        .unwrap();
    let more: Vec<Arrived> = (3..ARRIVED_KEPT + 2).map(commit).collect();
    store
        .write(Write {
            arrived: &more,
            ..Write::default()
        })
        .unwrap();
    let kept = store.load_live().unwrap().arrived;
    assert_eq!(kept.len(), ARRIVED_KEPT);
    assert_eq!(kept[0], commit(2));
    assert_eq!(kept.last(), Some(&commit(ARRIVED_KEPT + 1)));
    drop(store);
    sql(&path)
        .execute(
            "UPDATE meta SET value = 'not json' WHERE key = (SELECT min(key) FROM meta WHERE key LIKE 'arrived:%' AND key > (SELECT min(key) FROM meta WHERE key LIKE 'arrived:%'))",
            [],
        )
        .unwrap();
    let store = SqliteStore::open_or_create(&path).unwrap();
    let kept = store.load_live().unwrap().arrived;
    assert_eq!(
        kept.len(),
        ARRIVED_KEPT - 2,
        "the broken row and the one before it"
    );
    assert_eq!(kept[0], commit(4));
    // A counter lost or garbled never writes below the rows already there.
    drop(store);
    sql(&path)
        .execute("UPDATE meta SET value = 'x' WHERE key = 'arrived_next'", [])
        .unwrap();
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    let newest = commit(ARRIVED_KEPT + 7);
    store
        .write(Write {
            arrived: std::slice::from_ref(&newest),
            ..Write::default()
        })
        .unwrap();
    assert_eq!(store.load_live().unwrap().arrived.last(), Some(&newest));
}

/// A reader beside a daemon's first start (`greenlight status`) finds no state file or a whole
/// one, never the empty database SQLite makes first ("has no schema version"); and creating
/// leaves nothing of its temporary name behind.
#[test]
fn a_new_state_file_appears_whole() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..40 {
        let path = dir.path().join(format!("state-{round}.db"));
        let reader = {
            let path = path.clone();
            std::thread::spawn(move || {
                loop {
                    if path.exists() {
                        return SqliteStore::open_existing(&path, true).map(drop);
                    }
                    std::thread::yield_now();
                }
            })
        };
        let store = SqliteStore::open_or_create(&path).unwrap();
        assert_eq!(store.schema, SCHEMA_VERSION);
        let seen = reader.join().unwrap();
        assert!(seen.is_ok(), "round {round}: {:#}", seen.unwrap_err());
    }
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".new-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The events table is the notifications' outbox: an event a sink has not delivered stays,
/// however old, and goes once every sink is done with it (docs/notifications.md#outbox).
#[test]
fn prune_keeps_what_a_notification_sink_has_not_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    let done_old = watch(1, "web", "CONFIRMED", 10, Some(100));
    store
        .write(Write {
            watches: std::slice::from_ref(&done_old),
            events: &[
                event(90, EventKind::Confirmed, Some(&done_old)),
                event(500, EventKind::BreakerOpened, None),
            ],
            ..Write::default()
        })
        .unwrap();
    let c = sql(&path);
    c.execute(
        "INSERT INTO notify_cursor (sink, seq) VALUES ('slow', 0), ('fast', 2)",
        [],
    )
    .unwrap();
    c.execute(
        "INSERT INTO notify_dead (sink, seq, time, attempts, error, body) VALUES ('fast', 1, 50, 5, 'x', '{}')",
        [],
    )
    .unwrap();
    let pruned = store.prune(Timestamp(1000)).unwrap();
    assert_eq!((pruned.watches, pruned.events), (1, 0), "'slow' holds both");
    assert_eq!(event_times(&path), vec![90, 500]);
    assert_eq!(
        dump(&path, "notify_dead").len(),
        0,
        "dead letters go by their time"
    );
    c.execute("UPDATE notify_cursor SET seq = 1 WHERE sink = 'slow'", [])
        .unwrap();
    store.last_pruned_at = None;
    let pruned = store.prune(Timestamp(1000)).unwrap();
    assert_eq!(pruned.events, 1);
    assert_eq!(event_times(&path), vec![500]);
    c.execute("UPDATE notify_cursor SET seq = 2 WHERE sink = 'slow'", [])
        .unwrap();
    assert_eq!(store.prune(Timestamp(1000)).unwrap().events, 1);
    assert!(event_times(&path).is_empty());
}

// ---------------------------------------------------------------- parts

/// `w` holding `own` changed paths of its own, `later` later commits and, when given, a baseline
/// batch of that many commits (none of them a later commit: equal lists are one part).
fn with_lists(w: &Watch, own: usize, later: u32, batch: Option<u32>) -> Watch {
    let commit = |i: u32| json!({"sha": format!("{:040x}", 0xabc000 + i), "changed_paths": [format!("apps/{i}.yaml")]});
    let mut r = WatchRecord::from(w);
    r.own_paths = (0..own)
        .map(|i| format!("apps/web/deployment-{i}.yaml"))
        .collect::<Vec<_>>()
        .into();
    r.later_commits =
        serde_json::from_value(json!((100..100 + later).map(commit).collect::<Vec<_>>())).unwrap();
    r.baseline = batch.map(|n| {
        serde_json::from_value(json!({
            "before": "Healthy", "healthy_after_reach": true, "reach_operation_started": null,
            "revision": format!("{:040x}", 0xbad), "batch": (0..n).map(commit).collect::<Vec<_>>()
        }))
        .unwrap()
    });
    Watch::try_from(r).unwrap()
}

fn count(path: &Path, sql_text: &str) -> i64 {
    sql(path).query_row(sql_text, [], |r| r.get(0)).unwrap()
}

/// Every write of a part or of a watch's link to one, counted by triggers in the file itself.
fn count_part_writes(path: &Path) {
    sql(path)
        .execute_batch(
            "CREATE TABLE part_writes (what TEXT NOT NULL);
             CREATE TRIGGER part_insert AFTER INSERT ON parts
                 BEGIN INSERT INTO part_writes VALUES ('part'); END;
             CREATE TRIGGER link_insert AFTER INSERT ON watch_parts
                 BEGIN INSERT INTO part_writes VALUES ('link'); END;
             CREATE TRIGGER link_update AFTER UPDATE ON watch_parts
                 BEGIN INSERT INTO part_writes VALUES ('link'); END;",
        )
        .unwrap();
}

fn records(watches: &[Watch]) -> Vec<WatchRecord> {
    watches.iter().map(WatchRecord::from).collect()
}

#[test]
fn a_commits_changed_paths_are_kept_once_however_many_watches_hold_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    let watches: Vec<Watch> = ["web", "api", "worker"]
        .iter()
        .enumerate()
        .map(|(i, app)| {
            with_lists(
                &watch(i as u32 + 1, app, "JUDGING", 100, None),
                1000,
                0,
                Some(2),
            )
        })
        .collect();
    store
        .write(Write {
            watches: &watches,
            ..Write::default()
        })
        .unwrap();
    // One list of 1,000 paths, one empty list of later commits, one batch: three parts for
    // the three watches; no body carries a path.
    assert_eq!(count(&path, "SELECT count(*) FROM parts"), 3);
    assert_eq!(count(&path, "SELECT count(*) FROM watch_parts"), 9);
    assert_eq!(
        count(
            &path,
            "SELECT count(*) FROM watches WHERE body LIKE '%deployment-%' OR body LIKE '%apps/%'"
        ),
        0
    );
    assert!(count(&path, "SELECT max(length(body)) FROM watches") < 2048);
    assert_eq!(records(&store.load().unwrap().watches), records(&watches));
    assert_eq!(
        records(&store.load_live().unwrap().live),
        records(&watches),
        "the daemon resumes from the same records"
    );
}

#[test]
fn a_step_writes_only_the_parts_that_changed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    count_part_writes(&path);
    let writes = || count(&path, "SELECT count(*) FROM part_writes");
    let mut write = |w: &Watch| {
        store
            .write(Write {
                watches: std::slice::from_ref(w),
                ..Write::default()
            })
            .unwrap();
    };

    let first = with_lists(&watch(1, "web", "JUDGING", 100, None), 500, 2, Some(3));
    write(&first);
    assert_eq!(writes(), 6, "three parts and three links");

    // The verdict changes the body only.
    let confirmed = with_lists(
        &watch(1, "web", "CONFIRMED", 100, Some(900)),
        500,
        2,
        Some(3),
    );
    write(&confirmed);
    assert_eq!(writes(), 6, "nothing of the parts written again");

    // A later commit lands: its list is written anew, the old one is gone.
    let later = with_lists(
        &watch(1, "web", "CONFIRMED", 100, Some(900)),
        500,
        3,
        Some(3),
    );
    write(&later);
    assert_eq!(writes(), 8, "one part and one link");
    assert_eq!(count(&path, "SELECT count(*) FROM parts"), 3);

    // The batch becomes unknown: its link and part go; nothing is read back for it.
    let unknown = with_lists(&watch(1, "web", "CONFIRMED", 100, Some(900)), 500, 3, None);
    write(&unknown);
    assert_eq!(count(&path, "SELECT count(*) FROM parts"), 2);
    assert_eq!(count(&path, "SELECT count(*) FROM watch_parts"), 2);
    assert_eq!(records(&store.load().unwrap().watches), records(&[unknown]));
}

#[test]
fn pruning_a_watch_takes_its_parts_but_not_those_another_watch_holds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    let old = with_lists(&watch(1, "web", "CONFIRMED", 10, Some(20)), 100, 1, Some(1));
    let kept = with_lists(
        &watch(2, "api", "CONFIRMED", 10, Some(5000)),
        100,
        0,
        Some(1),
    );
    store
        .write(Write {
            watches: &[old, kept.clone()],
            ..Write::default()
        })
        .unwrap();
    // Shared: the paths and the batch; each its own: the later commits.
    assert_eq!(count(&path, "SELECT count(*) FROM parts"), 4);
    assert_eq!(store.prune(Timestamp(1000)).unwrap().watches, 1);
    assert_eq!(count(&path, "SELECT count(*) FROM parts"), 3);
    assert_eq!(count(&path, "SELECT count(*) FROM watch_parts"), 3);
    assert_eq!(records(&store.load().unwrap().watches), records(&[kept]));
    assert_eq!(store.prune(Timestamp(10_000)).unwrap().watches, 1);
    assert_eq!(count(&path, "SELECT count(*) FROM parts"), 0);
    assert_eq!(count(&path, "SELECT count(*) FROM watch_parts"), 0);
}

#[test]
fn a_watch_whose_part_is_missing_is_refused_naming_the_watch_and_the_part() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    let w = with_lists(&watch(1, "web", "JUDGING", 100, None), 10, 0, None);
    store
        .write(Write {
            watches: std::slice::from_ref(&w),
            ..Write::default()
        })
        .unwrap();
    sql(&path)
        .execute(
            "DELETE FROM parts WHERE hash = (SELECT hash FROM watch_parts WHERE name = 'own_paths')",
            [],
        )
        .unwrap();
    let err = format!("{:#}", store.load().err().unwrap());
    assert!(
        err.contains(&w.id) && err.contains("part own_paths") && err.contains("missing"),
        "{err}"
    );
}

// ---------------------------------------------------------------- the track record

/// What retention prunes is counted first into the track record's summary, which survives the
/// prune, later prunes and a restart, and which `state export` carries: a confirmed commit a
/// human reverted within its day is a miss, still counted once the watch is gone. Retention
/// never cuts a verdict's day short.
#[test]
fn pruned_watches_are_counted_into_a_summary_that_outlives_them() {
    use greenlight_core::commit::CommitId;
    use greenlight_core::record::WINDOW_MS;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    let missed = watch(1, "web", "CONFIRMED", 10, Some(100));
    let fine = watch(2, "web", "CONFIRMED", 20, Some(100));
    let lost = watch(3, "api", "INCONCLUSIVE", 30, Some(100));
    let human_revert = Arrived {
        sha: CommitId::parse(&format!("{:040x}", 9)).unwrap(),
        parents: vec![missed.commit.clone()],
        changed_paths: vec!["apps/web/deploy.yaml".to_string()].into(),
        reverts: Some(missed.commit.clone()),
        at: Some(Timestamp(200)),
        by_greenlight: false,
    };
    store
        .write(Write {
            watches: &[missed.clone(), fine.clone(), lost.clone()],
            arrived: std::slice::from_ref(&human_revert),
            ..Write::default()
        })
        .unwrap();
    // Before: the retained watches are counted as they are.
    let day_over = Timestamp(100 + WINDOW_MS + 1);
    let before = track_record(&store.export().unwrap(), day_over);
    assert_eq!(before["web"].confirmed, 2);
    assert_eq!(before["web"].misses, 1);
    assert_eq!(before["api"].inconclusive, 1);
    // The daemon's retention of 1 ms still waits for the day to be over.
    assert_eq!(
        store
            .prune_due(Timestamp(100 + WINDOW_MS - 1), 1)
            .unwrap()
            .map(|p| p.watches),
        Some(0)
    );
    store.last_pruned_at = None;
    assert_eq!(
        store.prune_due(day_over, 1).unwrap().map(|p| p.watches),
        Some(3)
    );
    let e = store.export().unwrap();
    assert!(e.loaded.watches.is_empty());
    assert_eq!(
        e.record_summary, before,
        "the same counts, from the summary"
    );
    assert_eq!(track_record(&e, day_over), before);
    // A later prune of nothing, and a reopening, keep it.
    store.last_pruned_at = None;
    store.prune_due(Timestamp(day_over.0 + 1), 1).unwrap();
    drop(store);
    let mut store = SqliteStore::open_existing(&path, true).unwrap();
    assert_eq!(store.export().unwrap().record_summary, before);
    assert!(meta_of(&path, "record_summary").is_some());
}

/// An unreadable summary stops the prune (nothing goes uncounted) and `record` names it.
#[test]
fn an_unreadable_summary_stops_the_prune() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    store
        .write(Write {
            watches: &[watch(1, "web", "CONFIRMED", 10, Some(100))],
            ..Write::default()
        })
        .unwrap();
    store.set_meta("record_summary", "{not json").unwrap();
    let err = format!("{:#}", store.prune(Timestamp(1000)).unwrap_err());
    assert!(err.contains("record_summary"), "{err}");
    assert_eq!(store.load().unwrap().watches.len(), 1);
    let err = format!("{:#}", store.export().err().unwrap());
    assert!(err.contains("record_summary"), "{err}");
}

/// A pruned watch whose record cannot be read is counted as an `other` verdict of its app:
/// retention never stops at it, and nothing goes uncounted.
#[test]
fn an_unreadable_pruned_watch_is_counted_as_other() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    let broken = watch(1, "web", "CONFIRMED", 10, Some(100));
    let fine = watch(2, "api", "CONFIRMED", 10, Some(100));
    store
        .write(Write {
            watches: &[broken.clone(), fine],
            ..Write::default()
        })
        .unwrap();
    sql(&path)
        .execute(
            "UPDATE watches SET body = '{' WHERE id = ?1",
            [broken.id.as_str()],
        )
        .unwrap();
    assert_eq!(store.prune(Timestamp(1000)).unwrap().watches, 2);
    let summary = store.export().unwrap().record_summary;
    assert_eq!((summary["web"].verdicts, summary["web"].other), (1, 1));
    assert_eq!(summary["api"].confirmed, 1);
}

/// A watch's tape (`docs/why.md`): appended step by step with the watch it belongs to, read
/// back whole and in order, replayed to the very watch; a restart resumes the recording where
/// the file's tape ends; a step that does not read is named; pruning takes the tape with its
/// watch.
#[test]
fn a_watchs_tape_is_appended_read_back_replayed_resumed_and_pruned() {
    use greenlight_core::commit::{CommitId, CommitInfo};
    use greenlight_core::judge::{Ancestry, Engine, JudgeConfig};
    use greenlight_core::tape::Step;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    let mut config = JudgeConfig::new("https://git.example/deploy.git", "main", true);
    config.stable_for_ms = 2_000;
    let mut engine = Engine::new(config.clone());
    let sha = CommitId::parse(&"c".repeat(40)).unwrap();
    let commit = CommitInfo {
        sha: sha.clone(),
        parents: vec![CommitId::parse(&"b".repeat(40)).unwrap()],
        subject: "web: 1.1.0".into(),
        message: "web: 1.1.0\n\nNav-Watchdog: app=web deadline=5 mode=arm\n".into(),
        changed_paths: vec!["apps/web/deploy.yaml".to_string()].into(),
        mainline: None,
    };
    let flush = |engine: &mut Engine, store: &mut SqliteStore| {
        let (watches, _) = engine.take_dirty();
        let tapes = engine.take_tapes();
        store
            .write(Write {
                watches: &watches,
                tapes: &tapes,
                ..Write::default()
            })
            .unwrap();
    };
    engine.commit_arrived(&commit, &Ancestry::default(), Timestamp(1_000));
    flush(&mut engine, &mut store);
    engine.tick(Timestamp(2_000));
    engine.tick(Timestamp(3_000));
    flush(&mut engine, &mut store);
    let id = format!("{sha}:0");
    let tape = Store::tape(&mut store, &id).unwrap().1;
    assert!(matches!(tape[0], Step::Start { .. }), "{tape:?}");
    assert_eq!(
        tape[1..],
        [
            Step::Time {
                at: Timestamp(2_000)
            },
            Step::Time {
                at: Timestamp(3_000)
            }
        ]
    );
    let replay = Engine::replay(&tape).unwrap();
    assert_eq!(replay.watch.to_flat(), engine.watches()[0].to_flat());

    // A restart: the recording goes on after the three steps the file holds.
    drop(store);
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    let resume = store.load_resume(None).unwrap();
    assert_eq!(resume.tapes.len(), 1);
    assert_eq!(
        (resume.tapes[0].0.as_str(), resume.tapes[0].1.count),
        (id.as_str(), 3)
    );
    let mut engine = Engine::restore(config, resume.live, resume.breaker);
    engine.restore_tapes(resume.tapes);
    engine.resume(Timestamp(9_000));
    engine.tick(Timestamp(9_000));
    flush(&mut engine, &mut store);
    let tape = Store::tape(&mut store, &id).unwrap().1;
    assert_eq!(tape.len(), 5, "{tape:?}");
    assert!(
        matches!(
            tape[3],
            Step::Resumed {
                at: Timestamp(9_000),
                ..
            }
        ),
        "{tape:?}"
    );
    let replay = Engine::replay(&tape).unwrap();
    assert_eq!(replay.watch.to_flat(), engine.watches()[0].to_flat());
    // Never observed by its deadline: INCONCLUSIVE, replayed as judged.
    assert_eq!(replay.watch.state().as_str(), "INCONCLUSIVE");

    // A step that does not read is named, with its watch.
    drop(store);
    sql(&path)
        .execute(
            "UPDATE watch_inputs SET step = 'not json' WHERE seq = 2",
            [],
        )
        .unwrap();
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    let err = format!("{:#}", Store::tape(&mut store, &id).unwrap_err());
    assert!(
        err.contains(&format!("step 2 of the tape of watch {id} cannot be read")),
        "{err}"
    );

    // Pruned with its watch.
    assert_eq!(count(&path, "SELECT count(*) FROM watch_inputs"), 5);
    store.prune(Timestamp(i64::MAX)).unwrap();
    assert_eq!(count(&path, "SELECT count(*) FROM watches"), 0);
    assert_eq!(count(&path, "SELECT count(*) FROM watch_inputs"), 0);
}
