//! The state store: one SQLite file (WAL) holding the watches, the breaker, the baseline and
//! the last processed tip, and an append-only event log. A state change and the events it
//! produced are written in one transaction, before anything is printed or pushed, so a
//! `kill -9` loses nothing that was acknowledged. Readers (`status`) open it read-only while
//! the daemon runs. This module never decides anything about a watch, and never writes a judge
//! type as it is in memory: what a watch and the breaker look like on disk is `record`'s.
//!
//! The schema is versioned (`schema_version` in `meta`). A file is brought to the current
//! version by the steps in [`migrate`], all in one transaction, when the daemon opens it; a
//! fresh file goes through the same steps from version 0. Readers never migrate: they read any
//! version this build knows. Retention: finished watches leave the file `--retain` after their
//! verdict, with their events ([`Store::prune`]).

pub mod export;
pub mod kube;
mod record;

pub use self::kube::KubeStore;

use anyhow::{Context, Result, bail};
use greenlight_core::breaker::Breaker;
use greenlight_core::event::Event;
use greenlight_core::judge::{ARRIVED_KEPT, Arrived, Idle, Watch};
use greenlight_core::snapshot::AppKey;
use greenlight_core::tape::{Recording, Step};
use greenlight_core::time::Timestamp;
use record::{BreakerRecord, WatchRecord};
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The schema this build creates and writes. Version 1 had no `live` and `finished_at`
/// columns; version 2 adds them (and indexes for retention), and stamps record formats;
/// version 3 adds the notifications' cursors and dead letters; version 4 keeps a watch's lists of
/// commits and paths apart from its body, each list once however many watches hold it
/// (`docs/state.md#parts`); version 5 adds each watch's tape of judge inputs (`docs/why.md`).
pub const SCHEMA_VERSION: i64 = 5;

/// How often the running daemon prunes, at most.
const PRUNE_EVERY_MS: i64 = 3_600_000;

/// What the runtime, `status`, `breaker reset` and `state export/import` need of a place that
/// keeps the watchdog's state: [`SqliteStore`] (`--state <file>`, the embedded default) or the
/// cluster's custom resources (`--store kube`). Each call is
/// complete when it returns: a step's [`Write`] is atomic, or ordered so that a crash between
/// two of its parts loses no verdict and pushes no second revert (each store says how).
pub trait Store: Send {
    /// Where the state is, for messages: `state file /var/lib/greenlight/state.db`.
    fn describe(&self) -> String;
    /// Record which repository and branch this state belongs to; state is never reused
    /// silently for another repository.
    fn bind(&mut self, repo: &str, branch: &str) -> Result<()>;
    /// Every retained watch, finished or not, and the rest of the state: what `status` shows.
    fn load(&mut self) -> Result<Loaded>;
    /// What the daemon resumes from (see [`SqliteStore::load_resume`]).
    fn load_resume(&mut self, reopen_since: Option<i64>) -> Result<Resume>;
    /// Write one step.
    fn write(&mut self, w: Write<'_>) -> Result<()>;
    /// The daemon's retention (see [`SqliteStore::prune_due`]).
    fn prune_due(&mut self, now: Timestamp, retain_ms: i64) -> Result<Option<Pruned>>;
    /// Leave a breaker reset for the running daemon to apply.
    fn request_breaker_reset(&mut self, at: i64) -> Result<()>;
    /// Whether a reset request is pending.
    fn breaker_reset_requested(&mut self) -> Result<bool>;
    /// Everything `greenlight state export` carries: what [`Store::load`] reads, and the
    /// memory (idle observations, arrived commits). Events are not carried.
    fn export(&mut self) -> Result<Exported>;
    /// One watch as stored and its tape of judge inputs (`docs/why.md`), in order, read
    /// together (a running daemon's write is seen whole or not at all): the tape is empty when
    /// none was recorded (a watch started by an older greenlight); the watch is `None` when the
    /// store no longer holds it.
    fn tape(&mut self, watch_id: &str) -> Result<(Option<Watch>, Vec<Step>)>;
}

impl Store for SqliteStore {
    fn describe(&self) -> String {
        format!("state file {}", self.path.display())
    }
    fn bind(&mut self, repo: &str, branch: &str) -> Result<()> {
        SqliteStore::bind(self, repo, branch)
    }
    fn load(&mut self) -> Result<Loaded> {
        SqliteStore::load(self)
    }
    fn load_resume(&mut self, reopen_since: Option<i64>) -> Result<Resume> {
        SqliteStore::load_resume(self, reopen_since)
    }
    fn write(&mut self, w: Write<'_>) -> Result<()> {
        SqliteStore::write(self, w)
    }
    fn prune_due(&mut self, now: Timestamp, retain_ms: i64) -> Result<Option<Pruned>> {
        SqliteStore::prune_due(self, now, retain_ms)
    }
    fn request_breaker_reset(&mut self, at: i64) -> Result<()> {
        SqliteStore::request_breaker_reset(self, at)
    }
    fn breaker_reset_requested(&mut self) -> Result<bool> {
        SqliteStore::breaker_reset_requested(self)
    }
    fn export(&mut self) -> Result<Exported> {
        let r = self.export_unnamed();
        self.named(r)
    }
    fn tape(&mut self, watch_id: &str) -> Result<(Option<Watch>, Vec<Step>)> {
        let r = self.tape_unnamed(watch_id);
        self.named(r)
    }
}

/// What [`Store::export`] reads.
pub struct Exported {
    pub loaded: Loaded,
    pub idle: Vec<(AppKey, Vec<Idle>)>,
    pub arrived: Vec<Arrived>,
    pub record_summary: Summary,
}

/// A watch's record body, as every store keeps it (`record.body` of a Watch object, the
/// `watches.body` column).
pub fn watch_body(w: &Watch) -> Result<String> {
    WatchRecord::from(w).to_body()
}

/// The watch in a record body of any format this build reads.
pub fn watch_from_body(body: &str) -> Result<Watch> {
    Ok(Watch::try_from(WatchRecord::parse(body)?)?)
}

/// The breaker's record body.
pub fn breaker_body(b: &Breaker) -> Result<String> {
    BreakerRecord::from(b).to_body()
}

/// The breaker in a record body of any format this build reads.
pub fn breaker_from_body(body: &str) -> Result<Breaker> {
    Ok(BreakerRecord::parse(body)?.into())
}

pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    /// The version of the file as opened; below `SCHEMA_VERSION` only for a reader.
    schema: i64,
    /// The version a migration at open started from (`None`: nothing to migrate).
    migrated_from: Option<i64>,
    last_pruned_at: Option<Timestamp>,
}

/// What one step of the daemon writes, atomically.
#[derive(Default)]
pub struct Write<'a> {
    pub watches: &'a [Watch],
    pub breaker: Option<&'a Breaker>,
    pub events: &'a [Event],
    pub tip: Option<&'a str>,
    pub baseline: Option<&'a str>,
    /// The breaker reset this write applies was requested by `greenlight breaker reset`.
    pub clear_breaker_reset_request: bool,
    /// Apps whose idle observations changed (`docs/verdicts.md#baseline`), each with all of
    /// them; none forgets the app.
    pub idle: &'a [(AppKey, Vec<Idle>)],
    /// Commits that arrived, oldest first: kept (the newest few thousand) for the batches of
    /// watches after a restart (`docs/verdicts.md#evidence`).
    pub arrived: &'a [Arrived],
    /// The track record's counted summary of pruned watches, replaced whole (`state import`;
    /// the daemon's prune adds to it itself).
    pub record_summary: Option<&'a Summary>,
    /// Steps of the watches' tapes (`docs/why.md`): (watch id, the first one's sequence
    /// number, the steps), appended.
    pub tapes: &'a [(String, usize, Vec<Step>)],
}

/// The track record's counts of watches retention pruned, by app (`docs/record.md`).
pub type Summary = std::collections::BTreeMap<String, greenlight_core::record::Tally>;

/// Whether `w`'s app was healthy as last seen idle; `None`: not seen.
pub fn healthy_as_last_seen(idle: &[(AppKey, Vec<Idle>)], w: &Watch) -> Option<bool> {
    idle.iter()
        .filter(|(k, _)| {
            k.name == w.app.name && w.app.namespace.as_ref().is_none_or(|ns| *ns == k.namespace)
        })
        .filter_map(|(_, seen)| seen.last())
        .map(|i| i.health == greenlight_core::snapshot::Health::Healthy)
        .reduce(|a, b| a && b)
}

/// The whole track record as of `now`: the retained finished watches counted against what
/// arrived after them, plus the summary of those retention pruned (`greenlight record`).
pub fn track_record(e: &Exported, now: Timestamp) -> Summary {
    let mut out = greenlight_core::record::tally(
        &e.loaded.watches,
        &e.arrived,
        |w| healthy_as_last_seen(&e.idle, w),
        now,
    );
    for (app, t) in &e.record_summary {
        out.entry(app.clone()).or_default().add(t);
    }
    out
}

/// Pruned watches whose records could not be read, by app: counted as `other` verdicts, so
/// that what goes is never dropped uncounted (and retention never stops at one).
pub fn count_unreadable(summary: &mut Summary, apps: &[String]) {
    for app in apps {
        let t = summary.entry(app.clone()).or_default();
        t.verdicts += 1;
        t.other += 1;
    }
}

/// The counts of `gone`, settled for good, added into `summary`.
pub fn summarize_pruned(
    summary: &mut Summary,
    gone: &[Watch],
    arrived: &[Arrived],
    idle: &[(AppKey, Vec<Idle>)],
    now: Timestamp,
) {
    let counted =
        greenlight_core::record::tally(gone, arrived, |w| healthy_as_last_seen(idle, w), now);
    for (app, t) in counted {
        summary
            .entry(app)
            .or_default()
            .add(&greenlight_core::record::settled(t));
    }
}

/// Everything the store holds, read back by `status`: every retained watch, finished or not.
pub struct Loaded {
    pub repo: Option<String>,
    pub branch: Option<String>,
    pub baseline: Option<String>,
    pub tip: Option<String>,
    pub breaker: Breaker,
    pub watches: Vec<Watch>,
}

/// What the daemon resumes from. Finished watches are not loaded into the judge; their ids are,
/// so that a commit delivered again never starts a second watch.
pub struct Resume {
    pub baseline: Option<String>,
    pub tip: Option<String>,
    pub breaker: Breaker,
    /// WAITING_REACH and JUDGING watches, and FAILs whose revert was decided but never
    /// reported back (the judge re-issues that revert at start).
    pub live: Vec<Watch>,
    /// The ids of the retained finished watches (their bodies are not read).
    pub finished_ids: BTreeSet<String>,
    /// Each app's idle observations as last written: the baselines of commits that arrive
    /// after the restart. A row that does not read is left out (no baseline, so no revert).
    pub idle: Vec<(AppKey, Vec<Idle>)>,
    /// The arrived commits kept, oldest first. A row that does not read ends the list there
    /// (what came before it is dropped: a batch through it is then unknown, never wrong).
    pub arrived: Vec<Arrived>,
    /// Where the tape of each loaded watch stands (`docs/why.md`); a watch without one records
    /// nothing more. A tape with a step that does not read records nothing more either.
    pub tapes: Vec<(String, Recording)>,
}

/// What one prune removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub watches: usize,
    pub events: usize,
}

impl Pruned {
    pub fn any(&self) -> bool {
        self.watches > 0 || self.events > 0
    }

    /// One line for the daemon's log: counts only, never a reason or a URL.
    pub fn summary(&self) -> String {
        format!(
            "pruned {} finished watch(es) and {} event(s) older than --retain",
            self.watches, self.events
        )
    }
}

/// The schema's version in `conn`: 0 when greenlight never wrote it (a new file, or an old one
/// whose first start died between creating the tables and recording the version).
fn schema_version(conn: &Connection) -> Result<i64> {
    let has_meta: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta')",
        [],
        |r| r.get(0),
    )?;
    if !has_meta {
        return Ok(0);
    }
    let v: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    match v {
        None => Ok(0),
        Some(v) => v
            .parse()
            .map_err(|_| anyhow::anyhow!("the schema version {v:?} is not a number")),
    }
}

/// Create a new state file whole: its schema is written under a temporary name beside it, the
/// file closed, then linked to `path` (never over a file that appeared meanwhile). A reader
/// (`greenlight status` at a daemon's first start) finds no file, or a whole one, never the
/// empty database SQLite makes first.
fn create_whole(path: &Path) -> Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = path.with_file_name(format!(".{name}.new-{}", std::process::id()));
    let remove_temp = || {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut p = temp.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    };
    remove_temp();
    let created = SqliteStore::open_whole(&temp)
        .map(drop)
        .with_context(|| format!("cannot create the state file {}", path.display()));
    let linked = created.and_then(|()| match std::fs::hard_link(&temp, path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        // A file system without hard links (some network shares): a rename, which the state
        // lock the caller holds keeps from racing another creator.
        Err(_) if !path.exists() => std::fs::rename(&temp, path).map_err(|e| {
            anyhow::Error::new(e)
                .context(format!("cannot create the state file {}", path.display()))
        }),
        Err(e) => Err(anyhow::Error::new(e)
            .context(format!("cannot create the state file {}", path.display()))),
    });
    remove_temp();
    linked
}

/// The write-ahead log's size after a checkpoint, at most.
const WAL_KEPT_BYTES: i64 = 4 * 1024 * 1024;

fn newer_than_known(path: &Path, found: i64) -> anyhow::Error {
    anyhow::anyhow!(
        "{} has state schema version {found}; this greenlight understands versions up to {SCHEMA_VERSION} (a newer greenlight wrote it; run that one)",
        path.display()
    )
}

/// The schema's history, one step per version. Each step runs inside the caller's transaction,
/// so a file is either fully at the new version or untouched.
mod migrate {
    use super::record::{BreakerRecord, WatchRecord};
    use anyhow::{Context, Result};
    use rusqlite::{OptionalExtension, Transaction, params};

    /// Apply the steps from `from` up to `to`.
    pub fn run(tx: &Transaction<'_>, from: i64, to: i64) -> Result<()> {
        for v in from..to {
            match v {
                0 => to_1(tx)?,
                1 => to_2(tx)?,
                2 => to_3(tx)?,
                3 => to_4(tx)?,
                4 => to_5(tx)?,
                _ => unreachable!("no migration from schema version {v}"),
            }
        }
        Ok(())
    }

    /// Version 1: the tables as greenlight first created them. `IF NOT EXISTS`: a file whose
    /// first start died before its version was recorded already has them.
    fn to_1(tx: &Transaction<'_>) -> Result<()> {
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS watches (
                 id TEXT PRIMARY KEY, commit_sha TEXT NOT NULL, app TEXT NOT NULL,
                 state TEXT NOT NULL, started_at INTEGER NOT NULL, body TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS events (
                 seq INTEGER PRIMARY KEY AUTOINCREMENT, time INTEGER NOT NULL, kind TEXT NOT NULL,
                 commit_sha TEXT, app TEXT, state TEXT, body TEXT NOT NULL);",
        )?;
        Ok(())
    }

    /// Version 2: `live` (loaded into the judge at start) and `finished_at` (retention) as
    /// columns, filled from each body read as a record; every body and the breaker rewritten in
    /// the current record format. A body that cannot be read stops the migration, and the
    /// transaction leaves the file as it was.
    fn to_2(tx: &Transaction<'_>) -> Result<()> {
        // Unknown means live: a row the update below somehow missed is loaded, not forgotten.
        tx.execute_batch(
            "ALTER TABLE watches ADD COLUMN live INTEGER NOT NULL DEFAULT 1;
             ALTER TABLE watches ADD COLUMN finished_at INTEGER;",
        )?;
        let rows: Vec<(String, String)> = tx
            .prepare("SELECT id, body FROM watches")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        for (id, body) in rows {
            let r =
                WatchRecord::parse(&body).with_context(|| format!("watch {id} cannot be read"))?;
            tx.execute(
                "UPDATE watches SET body = ?1, live = ?2, finished_at = ?3 WHERE id = ?4",
                params![r.to_body()?, r.is_live(), r.finished_at, id],
            )?;
        }
        let breaker: Option<String> = tx
            .query_row("SELECT value FROM meta WHERE key = 'breaker'", [], |r| {
                r.get(0)
            })
            .optional()?;
        if let Some(b) = breaker {
            let r = BreakerRecord::parse(&b).context("the breaker record cannot be read")?;
            tx.execute(
                "UPDATE meta SET value = ?1 WHERE key = 'breaker'",
                [r.to_body()?],
            )?;
        }
        tx.execute_batch(
            "CREATE INDEX watches_live ON watches (live, started_at);
             CREATE INDEX watches_finished ON watches (live, finished_at);
             CREATE INDEX events_watch ON events (commit_sha, app);
             CREATE INDEX events_time ON events (time);",
        )?;
        Ok(())
    }

    /// Version 3: the notifications' outbox bookkeeping (`docs/notifications.md#outbox`): each
    /// sink's cursor, the sequence of the last event it is done with, and its dead letters,
    /// each with the body it could not deliver (the event may be pruned later).
    fn to_3(tx: &Transaction<'_>) -> Result<()> {
        tx.execute_batch(
            "CREATE TABLE notify_cursor (sink TEXT PRIMARY KEY, seq INTEGER NOT NULL);
             CREATE TABLE notify_dead (
                 sink TEXT NOT NULL, seq INTEGER NOT NULL, time INTEGER NOT NULL,
                 attempts INTEGER NOT NULL, error TEXT NOT NULL, body TEXT NOT NULL,
                 PRIMARY KEY (sink, seq));",
        )?;
        Ok(())
    }

    /// Version 4: a watch's parts (`docs/state.md#parts`). `parts` holds each distinct list
    /// once, by the SHA-256 of its JSON; `watch_parts` links a watch to its parts by name.
    /// Bodies written before stay whole (a watch without links is read from its body alone)
    /// until their watch is next written.
    fn to_4(tx: &Transaction<'_>) -> Result<()> {
        tx.execute_batch(
            "CREATE TABLE parts (hash TEXT PRIMARY KEY, body TEXT NOT NULL);
             CREATE TABLE watch_parts (
                 watch_id TEXT NOT NULL, name TEXT NOT NULL, hash TEXT NOT NULL,
                 PRIMARY KEY (watch_id, name)) WITHOUT ROWID;
             CREATE INDEX watch_parts_hash ON watch_parts (hash);",
        )?;
        Ok(())
    }

    /// Version 5: each watch's tape of judge inputs (`docs/why.md`), one row a step, appended
    /// (rows in the order written, so pages fill; the index finds a watch's). Watches written
    /// before have none.
    fn to_5(tx: &Transaction<'_>) -> Result<()> {
        tx.execute_batch(
            "CREATE TABLE watch_inputs (
                 watch_id TEXT NOT NULL, seq INTEGER NOT NULL, step TEXT NOT NULL);
             CREATE UNIQUE INDEX watch_inputs_step ON watch_inputs (watch_id, seq);",
        )?;
        Ok(())
    }
}

impl SqliteStore {
    /// Open for the daemon, creating the file when missing and migrating it to the current
    /// schema, in one transaction. A schema newer than this build's is an error.
    pub fn open_or_create(path: &Path) -> Result<SqliteStore> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the state directory {}", dir.display()))?;
        }
        if path.is_dir() {
            return Err(crate::usage(format!(
                "--state {} is a directory: give the state file's path, e.g. {}",
                path.display(),
                path.join("state.db").display()
            )));
        }
        if !path.exists() {
            create_whole(path)?;
        }
        Self::open_whole(path)
    }

    /// [`Store::open_or_create`] of a file that exists (or, from [`create_whole`], of the new
    /// file under its temporary name).
    fn open_whole(path: &Path) -> Result<SqliteStore> {
        let cannot_open = || format!("cannot open the state file {}", path.display());
        let mut conn = Connection::open(path).with_context(cannot_open)?;
        // The first statements are where SQLite first reads the file: a file that is no
        // database, or one this process may not write, fails here.
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .with_context(cannot_open)?;
        // A new file gives back the pages pruning frees (`SqliteStore::compact`); the mode can
        // be set without a rewrite only before the first table exists.
        let not_a_state_file = || {
            format!(
                "{} is not a greenlight state file, or cannot be written",
                path.display()
            )
        };
        let pages: i64 = conn
            .pragma_query_value(None, "page_count", |r| r.get(0))
            .with_context(not_a_state_file)?;
        if pages == 0 {
            conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")
                .with_context(not_a_state_file)?;
        }
        conn.pragma_update(None, "journal_mode", "WAL")
            .with_context(not_a_state_file)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .with_context(cannot_open)?;
        // A checkpoint leaves the write-ahead log at most this long (SQLite keeps it at its
        // largest size otherwise: a burst's log would stay on disk for good).
        conn.pragma_update(None, "journal_size_limit", WAL_KEPT_BYTES)
            .with_context(cannot_open)?;
        let migrated_from = {
            // Immediate: the version is read under the write lock that the migration needs.
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .with_context(|| {
                    format!("cannot lock the state file {} for writing", path.display())
                })?;
            let found = schema_version(&tx)
                .with_context(|| format!("{} is not a greenlight state file", path.display()))?;
            if found > SCHEMA_VERSION {
                return Err(newer_than_known(path, found));
            }
            if found < SCHEMA_VERSION {
                migrate::run(&tx, found, SCHEMA_VERSION).with_context(|| {
                    format!(
                        "cannot migrate {} from state schema version {found} to {SCHEMA_VERSION}",
                        path.display()
                    )
                })?;
                tx.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?1)
                     ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    [SCHEMA_VERSION.to_string()],
                )
                .with_context(|| format!("cannot write the state file {}", path.display()))?;
            }
            tx.commit()
                .with_context(|| format!("cannot write the state file {}", path.display()))?;
            // A new file is created, not migrated.
            (found > 0 && found < SCHEMA_VERSION).then_some(found)
        };
        Ok(SqliteStore {
            conn,
            path: path.to_path_buf(),
            schema: SCHEMA_VERSION,
            migrated_from,
            last_pruned_at: None,
        })
    }

    /// Open an existing state file; a missing file is an error, never an empty database. It is
    /// never migrated here: a read-only reader must not write, and `breaker reset` may run
    /// beside a daemon of an older build that still writes the old schema. Any version from 1
    /// to `SCHEMA_VERSION` is read through the same records; only the daemon's own queries
    /// (`load_live`, `prune`, watch writes) need the current one.
    pub fn open_existing(path: &Path, read_only: bool) -> Result<SqliteStore> {
        if !path.is_file() {
            bail!(
                "state file {} does not exist (is this the --state the watchdog runs with?)",
                path.display()
            );
        }
        let flags = if read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX
        };
        let conn = Connection::open_with_flags(path, flags)
            .with_context(|| format!("cannot open the state file {}", path.display()))?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .with_context(|| format!("cannot open the state file {}", path.display()))?;
        let schema = schema_version(&conn)
            .with_context(|| format!("{} is not a greenlight state file", path.display()))?;
        if schema > SCHEMA_VERSION {
            return Err(newer_than_known(path, schema));
        }
        if schema < 1 {
            bail!(
                "{} is not a greenlight state file (it has no schema version)",
                path.display()
            );
        }
        Ok(SqliteStore {
            conn,
            path: path.to_path_buf(),
            schema,
            migrated_from: None,
            last_pruned_at: None,
        })
    }

    /// `r`, its error naming this state file when it does not already (SQLite's own errors name
    /// no file: "disk I/O error", "database is locked").
    fn named<T>(&self, r: Result<T>) -> Result<T> {
        r.map_err(|e| {
            let shown = self.path.display().to_string();
            if format!("{e:#}").contains(&shown) {
                e
            } else {
                e.context(format!("state file {shown}"))
            }
        })
    }

    /// The schema version the file had when opened, when `open_or_create` migrated it.
    #[allow(dead_code)] // read by tests; the daemon does not need to know
    pub fn migrated_from(&self) -> Option<i64> {
        self.migrated_from
    }

    fn need_current(&self, what: &str) -> Result<()> {
        if self.schema < SCHEMA_VERSION {
            bail!(
                "{} has state schema version {}: {what} needs version {SCHEMA_VERSION}; a start of `greenlight watch` migrates it",
                self.path.display(),
                self.schema
            );
        }
        Ok(())
    }

    fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()?)
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.conn.execute(
            "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            params![key, value],
        )?;
        Ok(())
    }

    /// Record which repository and branch this state belongs to; a state file is never reused
    /// silently for another repository.
    pub fn bind(&self, repo: &str, branch: &str) -> Result<()> {
        let r = self.bind_unnamed(repo, branch);
        self.named(r)
    }

    fn bind_unnamed(&self, repo: &str, branch: &str) -> Result<()> {
        for (key, want) in [("repo", repo), ("branch", branch)] {
            match self.meta(key)? {
                None => self.set_meta(key, want)?,
                Some(have) if have == want => {}
                Some(have) => bail!(
                    "state file {} belongs to {key} {have:?}, not {want:?}; use another --state",
                    self.path.display()
                ),
            }
        }
        Ok(())
    }

    fn breaker(&self) -> Result<Breaker> {
        Ok(match self.meta("breaker")? {
            Some(b) => BreakerRecord::parse(&b)
                .with_context(|| {
                    format!(
                        "the breaker record in {} cannot be read",
                        self.path.display()
                    )
                })?
                .into(),
            None => Breaker::default(),
        })
    }

    /// The watches `filter` selects, each read on its own: one that does not read is its app
    /// (the column), so that retention counts it rather than stopping at it.
    fn watches_each(&self, filter: &str) -> Result<Vec<std::result::Result<Watch, String>>> {
        let sql = format!("SELECT id, body, app FROM watches {filter} ORDER BY started_at, id");
        let mut stmt = self.conn.prepare(&sql)?;
        let rows: Vec<(String, String, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows
            .into_iter()
            .map(|(id, body, app)| {
                self.parts_of(&id)
                    .and_then(|parts| WatchRecord::parse_with_parts(&body, &parts))
                    .and_then(|r| Ok(Watch::try_from(r)?))
                    .map_err(|_| app)
            })
            .collect())
    }

    fn watches_where(&self, filter: &str) -> Result<Vec<Watch>> {
        let sql = format!("SELECT id, body FROM watches {filter} ORDER BY started_at, id");
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        let mut watches = Vec::new();
        for row in rows {
            let (id, body) = row?;
            let w = self
                .parts_of(&id)
                .and_then(|parts| WatchRecord::parse_with_parts(&body, &parts))
                .and_then(|r| Ok(Watch::try_from(r)?))
                .with_context(|| format!("watch {id} in {} cannot be read", self.path.display()))?;
            watches.push(w);
        }
        Ok(watches)
    }

    /// Watch `id`'s parts (name, JSON); none in a file from before schema version 4, and none
    /// for a body written whole.
    fn parts_of(&self, id: &str) -> Result<Vec<(String, String)>> {
        if self.schema < 4 {
            return Ok(Vec::new());
        }
        let rows: Vec<(String, String, Option<String>)> = self
            .conn
            .prepare_cached(
                "SELECT l.name, l.hash, p.body FROM watch_parts l
                 LEFT JOIN parts p ON p.hash = l.hash WHERE l.watch_id = ?1",
            )?
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        rows.into_iter()
            .map(|(name, hash, json)| match json {
                Some(json) => Ok((name, json)),
                None => bail!("its part {name} ({hash}) is missing"),
            })
            .collect()
    }

    /// Every retained watch, finished or not, and the meta rows: what `status` shows. Works on
    /// every schema version this build knows, without writing.
    pub fn load(&self) -> Result<Loaded> {
        let r = self.load_unnamed();
        self.named(r)
    }

    fn load_unnamed(&self) -> Result<Loaded> {
        // One read transaction: a daemon writing meanwhile is seen entirely or not at all.
        let tx = self.conn.unchecked_transaction()?;
        let loaded = self.loaded()?;
        tx.finish()?;
        Ok(loaded)
    }

    /// [`SqliteStore::load`]'s reads, inside the caller's transaction.
    fn loaded(&self) -> Result<Loaded> {
        Ok(Loaded {
            repo: self.meta("repo")?,
            branch: self.meta("branch")?,
            baseline: self.meta("baseline")?,
            tip: self.meta("tip")?,
            breaker: self.breaker()?,
            watches: self.watches_where("")?,
        })
    }

    fn export_unnamed(&self) -> Result<Exported> {
        let tx = self.conn.unchecked_transaction()?;
        let exported = Exported {
            loaded: self.loaded()?,
            idle: self.idle()?,
            arrived: self.arrived()?,
            record_summary: self.record_summary()?,
        };
        tx.finish()?;
        Ok(exported)
    }

    /// What the daemon resumes from: the live watches, and the finished ones by id only.
    pub fn load_live(&self) -> Result<Resume> {
        self.load_resume(None)
    }

    /// [`Store::load_live`], and whole the `NOT_REACHED` watches that finished at or after
    /// `reopen_since` (ms since the epoch): a watch within its re-open horizon
    /// (`docs/verdicts.md#reopen`) may start again.
    pub fn load_resume(&self, reopen_since: Option<i64>) -> Result<Resume> {
        let r = self.load_resume_unnamed(reopen_since);
        self.named(r)
    }

    fn load_resume_unnamed(&self, reopen_since: Option<i64>) -> Result<Resume> {
        self.need_current("resuming the daemon")?;
        let since = reopen_since.unwrap_or(i64::MAX);
        let reopenable = format!(
            "(live = 0 AND state = '{}' AND finished_at >= {since})",
            greenlight_core::judge::State::NotReached.as_str()
        );
        let finished_ids = self
            .conn
            .prepare(&format!(
                "SELECT id FROM watches WHERE live = 0 AND NOT {reopenable}"
            ))?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        let live = self.watches_where(&format!("WHERE live = 1 OR {reopenable}"))?;
        let mut tapes = Vec::new();
        for w in live
            .iter()
            .filter(|w| w.is_live() || w.reverting().is_some())
        {
            let rows = self.tape_rows(&w.id)?;
            if rows.is_empty() {
                continue;
            }
            let steps: Option<Vec<Step>> = rows
                .iter()
                .map(|(_, body)| serde_json::from_str::<Step>(body).ok())
                .collect();
            let r = match steps {
                Some(steps) => Recording::resumed(
                    steps.len(),
                    greenlight_core::tape::snapshot_bytes(&steps),
                    matches!(steps.last(), Some(Step::Full { .. })),
                ),
                None => Recording::resumed(rows.len(), 0, true),
            };
            tapes.push((w.id.clone(), r));
        }
        Ok(Resume {
            baseline: self.meta("baseline")?,
            tip: self.meta("tip")?,
            breaker: self.breaker()?,
            live,
            finished_ids,
            idle: self.idle()?,
            arrived: self.arrived()?,
            tapes,
        })
    }

    /// The stored steps of a watch's tape, (sequence number, JSON) in order.
    fn tape_rows(&self, watch_id: &str) -> Result<Vec<(i64, String)>> {
        Ok(self
            .conn
            .prepare_cached("SELECT seq, step FROM watch_inputs WHERE watch_id = ?1 ORDER BY seq")?
            .query_map([watch_id], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?)
    }

    /// A watch's tape: every step read, in order, or an error naming the step that does not
    /// read or the one missing. A file older than the tapes has none.
    fn tape_unnamed(&self, watch_id: &str) -> Result<(Option<Watch>, Vec<Step>)> {
        let tx = self.conn.unchecked_transaction()?;
        let watch = self
            .watches_where(&format!("WHERE id = '{}'", watch_id.replace('\'', "''")))?
            .pop();
        let steps = self.steps_of(watch_id)?;
        tx.finish()?;
        Ok((watch, steps))
    }

    fn steps_of(&self, watch_id: &str) -> Result<Vec<Step>> {
        if self.schema < 5 {
            return Ok(Vec::new());
        }
        let rows = self.tape_rows(watch_id)?;
        let mut steps = Vec::with_capacity(rows.len());
        for (k, (seq, body)) in rows.into_iter().enumerate() {
            if seq != k as i64 {
                bail!("the tape of watch {watch_id} lacks its step {k}");
            }
            let step = serde_json::from_str(&body).with_context(|| {
                format!("step {seq} of the tape of watch {watch_id} cannot be read")
            })?;
            steps.push(step);
        }
        Ok(steps)
    }

    /// The track record's summary of pruned watches (`meta` `record_summary`); none before
    /// anything was pruned. One that does not read is an error naming it, never an empty one.
    fn record_summary(&self) -> Result<Summary> {
        match self.meta("record_summary")? {
            None => Ok(Summary::new()),
            Some(v) => serde_json::from_str(&v)
                .context("the track record's summary (meta record_summary) cannot be read"),
        }
    }

    /// The arrived commits kept in `meta` (`arrived:<sequence>`), oldest first.
    fn arrived(&self) -> Result<Vec<Arrived>> {
        let rows: Vec<String> = self
            .conn
            .prepare("SELECT value FROM meta WHERE key LIKE 'arrived:%' ORDER BY key")?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        let mut out = Vec::new();
        for row in rows {
            match serde_json::from_str::<Arrived>(&row) {
                Ok(a) => out.push(a),
                // Only an unbroken run of commits up to the newest tells a batch.
                Err(_) => out.clear(),
            }
        }
        Ok(out)
    }

    /// The idle observations kept in `meta`, one row an app (`idle:<namespace>/<name>`).
    fn idle(&self) -> Result<Vec<(AppKey, Vec<Idle>)>> {
        let rows: Vec<(String, String)> = self
            .conn
            .prepare("SELECT key, value FROM meta WHERE key LIKE 'idle:%'")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows
            .into_iter()
            .filter_map(|(k, v)| {
                let (namespace, name) = k.strip_prefix("idle:")?.split_once('/')?;
                let seen: Vec<Idle> = serde_json::from_str(&v).ok()?;
                Some((
                    AppKey {
                        namespace: namespace.to_string(),
                        name: name.to_string(),
                    },
                    seen,
                ))
            })
            .collect())
    }

    /// Write one step atomically.
    pub fn write(&mut self, w: Write<'_>) -> Result<()> {
        let r = self.write_unnamed(w);
        self.named(r)
    }

    fn write_unnamed(&mut self, w: Write<'_>) -> Result<()> {
        if !w.watches.is_empty() {
            self.need_current("writing a watch")?;
        }
        let tx = self.conn.transaction()?;
        // The watches of one commit share its changed paths: one JSON and hash for all of them.
        let mut own_paths_seen: Vec<(greenlight_core::commit::Paths, Part)> = Vec::new();
        for watch in w.watches {
            let r = WatchRecord::from(watch);
            let (id, commit, app, state, started_at, live, finished_at) = (
                r.id.clone(),
                r.commit.clone(),
                r.app_str(),
                r.state_str(),
                r.watch_started_at,
                r.is_live(),
                r.finished_at,
            );
            let split = r.into_split()?;
            tx.prepare_cached(
                "INSERT INTO watches (id, commit_sha, app, state, started_at, body, live, finished_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT(id) DO UPDATE SET state = excluded.state, body = excluded.body,
                     live = excluded.live, finished_at = excluded.finished_at",
            )?
            .execute(params![
                id,
                commit,
                app,
                state,
                started_at,
                split.body,
                live,
                finished_at,
            ])?;
            let own_paths = match own_paths_seen
                .iter()
                .find(|(p, _)| std::sync::Arc::ptr_eq(p, &split.own_paths))
            {
                Some((_, part)) => part.clone(),
                None => {
                    let part = Part::of(&*split.own_paths)?;
                    own_paths_seen.push((split.own_paths.clone(), part.clone()));
                    part
                }
            };
            link_part(&tx, &id, record::PART_OWN_PATHS, Some(&own_paths))?;
            let later = Part::of(&split.later_commits)?;
            link_part(&tx, &id, record::PART_LATER_COMMITS, Some(&later))?;
            let batch = split.batch.as_ref().map(Part::of).transpose()?;
            link_part(&tx, &id, record::PART_BASELINE_BATCH, batch.as_ref())?;
        }
        for e in w.events {
            tx.execute(
                "INSERT INTO events (time, kind, commit_sha, app, state, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    e.time.0,
                    e.event.as_str(),
                    e.commit,
                    e.app,
                    e.state.map(|s| s.as_str()),
                    serde_json::to_string(e)?
                ],
            )?;
        }
        let meta = |k: &str, v: &str| {
            tx.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                params![k, v],
            )
        };
        if let Some(b) = w.breaker {
            meta("breaker", &BreakerRecord::from(b).to_body()?)?;
        }
        if let Some(t) = w.tip {
            meta("tip", t)?;
        }
        if let Some(b) = w.baseline {
            meta("baseline", b)?;
        }
        if !w.arrived.is_empty() {
            // The next sequence number; a missing or unreadable counter is never a reason to
            // write below rows already there (their order is the arrival order).
            let counter: Option<i64> = tx
                .query_row(
                    "SELECT value FROM meta WHERE key = 'arrived_next'",
                    [],
                    |r| r.get::<_, String>(0),
                )
                .optional()?
                .and_then(|v| v.parse().ok());
            let newest: Option<String> = tx.query_row(
                "SELECT max(key) FROM meta WHERE key LIKE 'arrived:%'",
                [],
                |r| r.get(0),
            )?;
            let after_newest = newest
                .and_then(|k| {
                    k.strip_prefix("arrived:")
                        .and_then(|n| n.parse::<i64>().ok())
                })
                .map_or(0, |n| n + 1);
            let mut next = counter.unwrap_or(0).max(after_newest);
            for a in w.arrived {
                meta(&format!("arrived:{next:016}"), &serde_json::to_string(a)?)?;
                next += 1;
            }
            meta("arrived_next", &next.to_string())?;
            let keep_from = next - ARRIVED_KEPT as i64;
            tx.execute(
                "DELETE FROM meta WHERE key LIKE 'arrived:%' AND key < ?1",
                [format!("arrived:{:016}", keep_from.max(0))],
            )?;
        }
        for (key, seen) in w.idle {
            let k = idle_key(key);
            if seen.is_empty() {
                tx.execute("DELETE FROM meta WHERE key = ?1", [&k])?;
            } else {
                meta(&k, &serde_json::to_string(seen)?)?;
            }
        }
        if w.clear_breaker_reset_request {
            tx.execute("DELETE FROM meta WHERE key = 'breaker_reset_requested'", [])?;
        }
        if let Some(summary) = w.record_summary {
            meta("record_summary", &serde_json::to_string(summary)?)?;
        }
        for (id, first, steps) in w.tapes {
            for (k, step) in steps.iter().enumerate() {
                tx.prepare_cached(
                    "INSERT OR REPLACE INTO watch_inputs (watch_id, seq, step) VALUES (?1, ?2, ?3)",
                )?
                .execute(params![
                    id,
                    (first + k) as i64,
                    serde_json::to_string(step)?
                ])?;
            }
        }
        tx.commit()
            .with_context(|| format!("cannot write the state file {}", self.path.display()))?;
        Ok(())
    }

    /// Remove, in one transaction, the finished watches whose verdict is older than `cutoff`,
    /// and the events that go with them, but those a notification sink has not delivered yet;
    /// dead letters older than `cutoff` too. Live watches are never removed, however old.
    ///
    /// An event belongs to the watch of its (commit, app) (the judge keeps one watch per pair):
    /// it stays as long as that watch does, and goes with it. Any other event (the breaker's,
    /// a rejected trailer's, one whose watch is already gone) goes by its own time. A finished
    /// watch without a verdict time (no build wrote one) goes by its start time.
    pub fn prune(&mut self, cutoff: Timestamp) -> Result<Pruned> {
        self.prune_at(cutoff, cutoff)
    }

    /// [`SqliteStore::prune`] at `now`: the track record counts what goes as of then.
    pub fn prune_at(&mut self, cutoff: Timestamp, now: Timestamp) -> Result<Pruned> {
        let r = self.prune_unnamed(cutoff, now);
        self.named(r)
    }

    fn prune_unnamed(&mut self, cutoff: Timestamp, now: Timestamp) -> Result<Pruned> {
        self.need_current("pruning")?;
        // What goes is counted first into the track record's summary, which outlives it. An
        // unreadable summary stops the prune: nothing is dropped uncounted.
        let due = format!(
            "WHERE live = 0 AND COALESCE(finished_at, started_at) < {}",
            cutoff.0
        );
        let due_watches = self.watches_each(&due)?;
        let mut summary = self.record_summary()?;
        let (read, unreadable): (Vec<_>, Vec<_>) = due_watches.into_iter().partition(|r| r.is_ok());
        let gone_watches: Vec<Watch> = read.into_iter().filter_map(|r| r.ok()).collect();
        let unreadable: Vec<String> = unreadable.into_iter().filter_map(|r| r.err()).collect();
        if !gone_watches.is_empty() {
            summarize_pruned(
                &mut summary,
                &gone_watches,
                &self.arrived()?,
                &self.idle()?,
                now,
            );
        }
        count_unreadable(&mut summary, &unreadable);
        let any_due = !gone_watches.is_empty() || !unreadable.is_empty();
        let tx = self.conn.transaction()?;
        if any_due {
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('record_summary', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [serde_json::to_string(&summary)?],
            )?;
        }
        let gone: Vec<(String, String, String)> = tx
            .prepare(
                "DELETE FROM watches WHERE live = 0 AND COALESCE(finished_at, started_at) < ?1
                 RETURNING id, commit_sha, app",
            )?
            .query_map([cutoff.0], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        // Their parts, unless another watch holds the same list.
        for (id, _, _) in &gone {
            tx.execute("DELETE FROM watch_parts WHERE watch_id = ?1", [id])?;
            tx.execute("DELETE FROM watch_inputs WHERE watch_id = ?1", [id])?;
        }
        tx.execute(
            "DELETE FROM parts WHERE NOT EXISTS
                 (SELECT 1 FROM watch_parts l WHERE l.hash = parts.hash)",
            [],
        )?;
        // An event a sink has not delivered yet is kept, however old (the outbox,
        // `docs/notifications.md#outbox`): only what every sink is done with may go.
        let undelivered_after: i64 = tx.query_row(
            "SELECT COALESCE(MIN(seq), 9223372036854775807) FROM notify_cursor",
            [],
            |r| r.get(0),
        )?;
        let mut events = 0;
        for (_, commit, app) in &gone {
            events += tx.execute(
                "DELETE FROM events WHERE commit_sha = ?1 AND app = ?2 AND NOT EXISTS
                     (SELECT 1 FROM watches w WHERE w.commit_sha = ?1 AND w.app = ?2)
                     AND seq <= ?3",
                params![commit, app, undelivered_after],
            )?;
        }
        events += tx.execute(
            "DELETE FROM events WHERE time < ?1 AND NOT EXISTS
                 (SELECT 1 FROM watches w WHERE w.commit_sha = events.commit_sha AND w.app = events.app)
                 AND seq <= ?2",
            params![cutoff.0, undelivered_after],
        )?;
        tx.execute("DELETE FROM notify_dead WHERE time < ?1", [cutoff.0])?;
        tx.commit()
            .with_context(|| format!("cannot write the state file {}", self.path.display()))?;
        self.compact()
            .with_context(|| format!("cannot compact the state file {}", self.path.display()))?;
        Ok(Pruned {
            watches: gone.len(),
            events,
        })
    }

    /// Gives the pages pruning freed back to the file system and empties the write-ahead log:
    /// the file shrinks after retention instead of keeping its largest size. A file made before
    /// the store did this is rewritten once (`VACUUM`) into the mode that allows it.
    fn compact(&mut self) -> rusqlite::Result<()> {
        let mode: i64 = self
            .conn
            .pragma_query_value(None, "auto_vacuum", |r| r.get(0))?;
        // 2: INCREMENTAL.
        if mode != 2 {
            self.conn
                .pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
            self.conn.execute_batch("VACUUM")?;
        } else {
            // Each step of the statement frees pages: it is run to its end.
            let mut stmt = self.conn.prepare("PRAGMA incremental_vacuum")?;
            let mut rows = stmt.query([])?;
            while rows.next()?.is_some() {}
        }
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
    }

    /// The daemon's retention: prune what finished more than `retain_ms` before `now`, at the
    /// first call and then at most once an hour (retention is counted in days; pruning at
    /// every fetch would only cost writes). `None` when it was not due. A prune that fails
    /// counts as done: it is tried again an hour later, not at every tick.
    pub fn prune_due(&mut self, now: Timestamp, retain_ms: i64) -> Result<Option<Pruned>> {
        if self
            .last_pruned_at
            .is_some_and(|t| now.ms_since(t) < PRUNE_EVERY_MS)
        {
            return Ok(None);
        }
        self.last_pruned_at = Some(now);
        // Never before a verdict's day is over: the track record reads what people did in it.
        let retain_ms = retain_ms.max(greenlight_core::record::WINDOW_MS);
        self.prune_at(now.plus_ms(-retain_ms), now).map(Some)
    }

    /// `greenlight breaker reset` while a daemon runs: leave a request the daemon applies (it is
    /// the breaker's only writer while it runs).
    pub fn request_breaker_reset(&self, at: i64) -> Result<()> {
        let r = self.request_breaker_reset_unnamed(at);
        self.named(r)
    }

    fn request_breaker_reset_unnamed(&self, at: i64) -> Result<()> {
        self.set_meta("breaker_reset_requested", &at.to_string())
    }

    /// Whether a reset request is pending. It stays pending until the write that applies it
    /// clears it (`Write::clear_breaker_reset_request`), so a crash in between loses nothing.
    pub fn breaker_reset_requested(&self) -> Result<bool> {
        let r = self.breaker_reset_requested_unnamed();
        self.named(r)
    }

    fn breaker_reset_requested_unnamed(&self) -> Result<bool> {
        Ok(self.meta("breaker_reset_requested")?.is_some())
    }
}

/// One part of a watch's record (`docs/state.md#parts`): its JSON and that JSON's SHA-256, the
/// part's key in `parts`.
#[derive(Clone)]
struct Part {
    hash: String,
    json: std::rc::Rc<str>,
}

impl Part {
    fn of<T: serde::Serialize + ?Sized>(value: &T) -> Result<Part> {
        use sha2::Digest;
        let json = serde_json::to_string(value)?;
        let digest = sha2::Sha256::digest(json.as_bytes());
        let hash = digest.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Part {
            hash,
            json: json.into(),
        })
    }
}

/// Link watch `id`'s part `name` to `part` (`None`: it has none), writing only what changed: a
/// part the watch already links is not written again, a part another watch wrote is not
/// written twice, and a part no watch links any more is deleted.
fn link_part(
    tx: &rusqlite::Transaction<'_>,
    id: &str,
    name: &str,
    part: Option<&Part>,
) -> Result<()> {
    let linked: Option<String> = tx
        .prepare_cached("SELECT hash FROM watch_parts WHERE watch_id = ?1 AND name = ?2")?
        .query_row(params![id, name], |r| r.get(0))
        .optional()?;
    if linked.as_deref() == part.map(|p| p.hash.as_str()) {
        return Ok(());
    }
    match part {
        Some(part) => {
            tx.prepare_cached(
                "INSERT INTO parts (hash, body) VALUES (?1, ?2) ON CONFLICT(hash) DO NOTHING",
            )?
            .execute(params![part.hash, &*part.json])?;
            tx.prepare_cached(
                "INSERT INTO watch_parts (watch_id, name, hash) VALUES (?1, ?2, ?3)
                 ON CONFLICT(watch_id, name) DO UPDATE SET hash = excluded.hash",
            )?
            .execute(params![id, name, part.hash])?;
        }
        None => {
            tx.prepare_cached("DELETE FROM watch_parts WHERE watch_id = ?1 AND name = ?2")?
                .execute(params![id, name])?;
        }
    }
    if let Some(old) = linked {
        drop_unlinked_part(tx, &old)?;
    }
    Ok(())
}

/// Delete part `hash` when no watch links it.
fn drop_unlinked_part(tx: &rusqlite::Transaction<'_>, hash: &str) -> Result<()> {
    tx.prepare_cached(
        "DELETE FROM parts WHERE hash = ?1
         AND NOT EXISTS (SELECT 1 FROM watch_parts WHERE hash = ?1)",
    )?
    .execute([hash])?;
    Ok(())
}

/// The `meta` key of an app's idle observations.
fn idle_key(key: &AppKey) -> String {
    format!("idle:{}/{}", key.namespace, key.name)
}

#[cfg(test)]
mod tests;
