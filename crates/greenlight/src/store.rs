//! The state store: one SQLite file (WAL) holding the watches, the breaker, the baseline and
//! the last processed tip, and an append-only event log. A state change and the events it
//! produced are written in one transaction, before anything is printed or pushed, so a
//! `kill -9` loses nothing that was acknowledged. Readers (`status`) open it read-only while
//! the daemon runs. This module never decides anything about a watch.

use anyhow::{Context, Result, bail};
use greenlight_core::breaker::Breaker;
use greenlight_core::event::Event;
use greenlight_core::judge::Watch;
use greenlight_core::watch::FlatWatch;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use std::path::{Path, PathBuf};

const SCHEMA_VERSION: i64 = 1;

pub struct Store {
    conn: Connection,
    path: PathBuf,
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
}

/// Everything the store holds, read back at start-up or by `status`.
pub struct Loaded {
    pub repo: Option<String>,
    pub branch: Option<String>,
    pub baseline: Option<String>,
    pub tip: Option<String>,
    pub breaker: Breaker,
    pub watches: Vec<Watch>,
}

impl Store {
    /// Open for the daemon, creating the file and schema when missing.
    pub fn open_or_create(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the state directory {}", dir.display()))?;
        }
        let conn = Connection::open(path)
            .with_context(|| format!("cannot open the state file {}", path.display()))?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS watches (
                 id TEXT PRIMARY KEY, commit_sha TEXT NOT NULL, app TEXT NOT NULL,
                 state TEXT NOT NULL, started_at INTEGER NOT NULL, body TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS events (
                 seq INTEGER PRIMARY KEY AUTOINCREMENT, time INTEGER NOT NULL, kind TEXT NOT NULL,
                 commit_sha TEXT, app TEXT, state TEXT, body TEXT NOT NULL);",
        )
        .with_context(|| format!("cannot create the schema in {}", path.display()))?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
        };
        match store.meta("schema_version")? {
            None => store.set_meta("schema_version", &SCHEMA_VERSION.to_string())?,
            Some(v) if v == SCHEMA_VERSION.to_string() => {}
            Some(v) => bail!(
                "{} has state schema version {v}; this greenlight understands version {SCHEMA_VERSION}",
                path.display()
            ),
        }
        Ok(store)
    }

    /// Open an existing state file; a missing file is an error, never an empty database.
    pub fn open_existing(path: &Path, read_only: bool) -> Result<Store> {
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
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
        };
        let version = store
            .meta("schema_version")
            .with_context(|| format!("{} is not a greenlight state file", path.display()))?;
        if version.as_deref() != Some(&SCHEMA_VERSION.to_string()) {
            bail!(
                "{} is not a greenlight state file of schema version {SCHEMA_VERSION}",
                path.display()
            );
        }
        Ok(store)
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

    pub fn load(&self) -> Result<Loaded> {
        let breaker = match self.meta("breaker")? {
            Some(b) => serde_json::from_str(&b)
                .context("the breaker record in the state file is corrupt")?,
            None => Breaker::default(),
        };
        let mut stmt = self
            .conn
            .prepare("SELECT id, body FROM watches ORDER BY started_at, id")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        let mut watches = Vec::new();
        for row in rows {
            let (id, body) = row?;
            // The body is the flat record greenlight has always written (`FlatWatch`).
            let w = serde_json::from_str::<FlatWatch>(&body)
                .map_err(anyhow::Error::from)
                .and_then(|flat| Ok(Watch::from_flat(flat)?))
                .with_context(|| format!("watch {id} in {} is corrupt", self.path.display()))?;
            watches.push(w);
        }
        Ok(Loaded {
            repo: self.meta("repo")?,
            branch: self.meta("branch")?,
            baseline: self.meta("baseline")?,
            tip: self.meta("tip")?,
            breaker,
            watches,
        })
    }

    /// Write one step atomically.
    pub fn write(&mut self, w: Write<'_>) -> Result<()> {
        let tx = self.conn.transaction()?;
        for watch in w.watches {
            tx.execute(
                "INSERT INTO watches (id, commit_sha, app, state, started_at, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT(id) DO UPDATE SET state = excluded.state, body = excluded.body",
                params![
                    watch.id,
                    watch.commit.as_str(),
                    watch.app.to_string(),
                    watch.state().as_str(),
                    watch.watch_started_at.0,
                    serde_json::to_string(&watch.to_flat())?
                ],
            )?;
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
            meta("breaker", &serde_json::to_string(b)?)?;
        }
        if let Some(t) = w.tip {
            meta("tip", t)?;
        }
        if let Some(b) = w.baseline {
            meta("baseline", b)?;
        }
        if w.clear_breaker_reset_request {
            tx.execute("DELETE FROM meta WHERE key = 'breaker_reset_requested'", [])?;
        }
        tx.commit()
            .with_context(|| format!("cannot write the state file {}", self.path.display()))?;
        Ok(())
    }

    /// `greenlight breaker reset` while a daemon runs: leave a request the daemon applies (it is
    /// the breaker's only writer while it runs).
    pub fn request_breaker_reset(&self, at: i64) -> Result<()> {
        self.set_meta("breaker_reset_requested", &at.to_string())
    }

    /// Whether a reset request is pending. It stays pending until the write that applies it
    /// clears it (`Write::clear_breaker_reset_request`), so a crash in between loses nothing.
    pub fn breaker_reset_requested(&self) -> Result<bool> {
        Ok(self.meta("breaker_reset_requested")?.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_breaker_reset_request_survives_until_the_write_that_applies_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let mut store = Store::open_or_create(&path).unwrap();
        Store::open_existing(&path, false)
            .unwrap()
            .request_breaker_reset(1)
            .unwrap();
        assert!(store.breaker_reset_requested().unwrap());
        // The daemon saw the request; an unrelated write (or a crash) before the reset is
        // persisted leaves it pending.
        store.write(Write::default()).unwrap();
        drop(store);
        let mut store = Store::open_or_create(&path).unwrap();
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
}
