//! Notifications (`docs/notifications.md`): the events table is the outbox. Each configured
//! sink has a cursor in the state file (`notify_cursor`: the last event it is done with) and
//! a thread of its own, with its own connection to the file, that reads the events after its
//! cursor in order, sends those whose [`Outcome`] it wants (`config`), and moves the cursor
//! only when one is delivered or, after its attempts, written down as a dead letter
//! (`notify_dead`). So a verdict is never held by a receiver (the judge's loop writes and goes
//! on; a hanging receiver is cut off by the sink's timeout), a restart resumes after the last
//! event each sink is done with, and retention keeps what some sink has not delivered.
//! Delivery is at least once: a crash between a receiver's answer and the cursor's write sends
//! that event again, with the same delivery id.
//!
//! Must never: put a sink's URL (a Slack URL is its token) or secret in a log line, an error
//! or an argument; call a skipped check a failure or a bypass a pass (the wording is the
//! catalogue's, `Outcome::title`); send a no-op.

pub mod body;
pub mod config;

use crate::output::Output;
use anyhow::{Context, Result};
use body::Notice;
use config::{MAX_BACKOFF, SinkConfig, SinkKind};
use greenlight_core::event::Event;
use greenlight_core::time::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Events read from the outbox at a time.
const BATCH: i64 = 100;
/// How often a sink looks at the outbox without being woken (a write from another process).
const POLL: Duration = Duration::from_secs(1);
/// How long a sink whose loop failed waits before it starts again.
const RESTART: Duration = Duration::from_secs(5);
/// What of a receiver's answer is kept in a dead letter's error.
const ANSWER_KEPT: usize = 200;

/// The running notifier of a daemon: a thread per sink.
pub struct Notifier {
    signal: Arc<Signal>,
    threads: Vec<JoinHandle<()>>,
}

/// Wakes and stops the sinks' threads.
#[derive(Default)]
struct Signal {
    state: Mutex<(bool, u64)>,
    cond: Condvar,
}

impl Signal {
    fn wake(&self) {
        let mut s = self.state.lock().expect("notify signal");
        s.1 += 1;
        self.cond.notify_all();
    }
    fn stop(&self) {
        let mut s = self.state.lock().expect("notify signal");
        s.0 = true;
        self.cond.notify_all();
    }
    fn stopped(&self) -> bool {
        self.state.lock().expect("notify signal").0
    }
    /// Wait until woken (a wake not yet `seen`), stopped or `until`; true when stopped.
    fn wait(&self, seen: &mut u64, until: Instant) -> bool {
        self.wait_for(Some(seen), until)
    }
    /// Sleep until `until` unless stopped (wakes do not end it); true when stopped.
    fn sleep(&self, until: Instant) -> bool {
        self.wait_for(None, until)
    }
    fn wait_for(&self, mut seen: Option<&mut u64>, until: Instant) -> bool {
        let mut s = self.state.lock().expect("notify signal");
        loop {
            if s.0 {
                return true;
            }
            if let Some(seen) = seen.as_deref_mut()
                && s.1 != *seen
            {
                *seen = s.1;
                return false;
            }
            let now = Instant::now();
            if now >= until {
                return false;
            }
            s = self
                .cond
                .wait_timeout(s, until - now)
                .expect("notify signal")
                .0;
        }
    }
}

/// What a sink's thread says of itself: a dead letter, an event it could not read.
pub type Say = Arc<dyn Fn(&str) + Send + Sync>;

impl Notifier {
    /// Start the sinks over the state file `state` (already created and migrated by the
    /// store). A sink the file has no cursor for starts at its newest event; the cursors of
    /// sinks no longer configured are removed (their undelivered events no longer held).
    /// Every event `output` hands over wakes the sinks.
    pub fn start(
        state: &Path,
        sinks: Vec<SinkConfig>,
        output: &Output,
        say: Say,
    ) -> Result<Notifier> {
        register(state, &sinks)?;
        let signal = Arc::new(Signal::default());
        let wake = signal.clone();
        output.subscribe(move |e: &Event| {
            if e.outcome.is_some() {
                wake.wake();
            }
        });
        let mut threads = Vec::new();
        for sink in sinks {
            let (state, signal, say) = (state.to_path_buf(), signal.clone(), say.clone());
            let name = format!("notify-{}", sink.name);
            let t = std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    // A sink whose loop fails (the state file locked for too long, a disk
                    // error) starts again from its cursor after a pause: nothing is lost, and
                    // the sink is not silently gone for the rest of the daemon's life.
                    while let Err(e) = run_sink(&state, &sink, &signal, None, &say) {
                        say(&format!(
                            "notify {:?}: {e:#}; starting again from its last delivered event in {}s",
                            sink.name,
                            RESTART.as_secs()
                        ));
                        if signal.sleep(Instant::now() + RESTART) {
                            return;
                        }
                    }
                })
                .context("cannot start a notification thread")?;
            threads.push(t);
        }
        Ok(Notifier { signal, threads })
    }

    /// Stop the sinks: each ends after the delivery under way (bounded by its timeout); what
    /// is undelivered stays in the outbox for the next start.
    pub fn stop(self) {
        self.signal.stop();
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Deliver what is pending in `state` to every sink, until each has caught up or `until`
/// passed (a one-shot command: `promote run`). Returns the number of notifications still
/// undelivered per sink that did not catch up.
pub fn drain(
    state: &Path,
    sinks: &[SinkConfig],
    until: Instant,
    say: &Say,
) -> Result<Vec<(String, usize)>> {
    let signal = Signal::default();
    // Each sink in a thread of its own, as in the daemon: one that hangs holds only itself.
    let ran: Vec<Result<()>> = std::thread::scope(|scope| {
        let threads: Vec<_> = sinks
            .iter()
            .map(|sink| scope.spawn(|| run_sink(state, sink, &signal, Some(until), say)))
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a notification thread panicked")))
            })
            .collect()
    });
    let mut left = Vec::new();
    for (sink, r) in sinks.iter().zip(ran) {
        if let Err(e) = r {
            say(&format!("notify {:?}: {e:#}", sink.name));
        }
        let n = pending(state, sink)?;
        if n > 0 {
            left.push((sink.name.clone(), n));
        }
    }
    Ok(left)
}

/// Put each configured sink's cursor in place before any event it should see is written:
/// a new sink starts at the newest event; cursors of sinks gone from the config are dropped.
pub fn register(state: &Path, sinks: &[SinkConfig]) -> Result<()> {
    let mut conn = open(state)?;
    let tx = conn.transaction()?;
    let names: Vec<&str> = sinks.iter().map(|s| s.name.as_str()).collect();
    let known: Vec<String> = tx
        .prepare("SELECT sink FROM notify_cursor")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for gone in known.iter().filter(|k| !names.contains(&k.as_str())) {
        tx.execute("DELETE FROM notify_cursor WHERE sink = ?1", [gone])?;
    }
    // The outbox's id, made once (delivery ids: `Notice::delivery_id`).
    let made = {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        format!(
            "{:x}{:05x}",
            d.as_nanos() & 0xffff_ffff_ffff,
            std::process::id() & 0xfffff
        )
    };
    tx.execute(
        "INSERT INTO meta (key, value) VALUES ('outbox_id', ?1) ON CONFLICT(key) DO NOTHING",
        [made],
    )?;
    for name in names {
        tx.execute(
            "INSERT INTO notify_cursor (sink, seq)
             SELECT ?1, COALESCE(MAX(seq), 0) FROM events WHERE true
             ON CONFLICT(sink) DO NOTHING",
            [name],
        )?;
    }
    tx.commit()
        .with_context(|| format!("cannot write the state file {}", state.display()))?;
    Ok(())
}

fn open(state: &Path) -> Result<Connection> {
    let conn = Connection::open(state)
        .with_context(|| format!("cannot open the state file {}", state.display()))?;
    conn.busy_timeout(Duration::from_secs(10))?;
    Ok(conn)
}

/// How many events after the sink's cursor it would be sent.
fn pending(state: &Path, sink: &SinkConfig) -> Result<usize> {
    let conn = open(state)?;
    let cursor = cursor(&conn, &sink.name)?;
    let mut n = 0;
    let mut stmt = conn.prepare("SELECT seq, body FROM events WHERE seq > ?1 ORDER BY seq")?;
    let rows = stmt.query_map([cursor], |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
    })?;
    for row in rows {
        let (seq, body) = row?;
        if let Some(notice) = serde_json::from_str::<Event>(&body)
            .ok()
            .and_then(|e| Notice::of("", seq, e))
            && sink.wants(notice.outcome, notice.event.app.as_deref())
        {
            n += 1;
        }
    }
    Ok(n)
}

fn outbox_id(conn: &Connection) -> Result<String> {
    Ok(conn
        .query_row("SELECT value FROM meta WHERE key = 'outbox_id'", [], |r| {
            r.get(0)
        })
        .optional()?
        .unwrap_or_default())
}

fn cursor(conn: &Connection, sink: &str) -> Result<i64> {
    Ok(conn
        .query_row(
            "SELECT seq FROM notify_cursor WHERE sink = ?1",
            [sink],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or(0))
}

/// One sink's loop: deliver in order, move the cursor; with `until`, return once caught up or
/// at `until` (a one-shot drain), else run until stopped.
fn run_sink(
    state: &Path,
    sink: &SinkConfig,
    signal: &Signal,
    until: Option<Instant>,
    say: &Say,
) -> Result<()> {
    let mut conn = open(state)?;
    // reqwest's TLS needs the process's crypto provider (the binary installs it; a library
    // caller may not have): ring, the one compiled in; a second install is refused harmlessly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the notification runtime")?;
    let client = reqwest::Client::builder()
        .timeout(sink.timeout)
        .connect_timeout(sink.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .context("cannot build the notification HTTP client")?;
    let outbox = outbox_id(&conn)?;
    let mut seen = 0;
    loop {
        if signal.stopped() || until.is_some_and(|u| Instant::now() >= u) {
            return Ok(());
        }
        let from = cursor(&conn, &sink.name)?;
        let batch: Vec<(i64, String)> = conn
            .prepare("SELECT seq, body FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2")?
            .query_map(params![from, BATCH], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        if batch.is_empty() {
            if until.is_some() {
                return Ok(());
            }
            if signal.wait(&mut seen, Instant::now() + POLL) {
                return Ok(());
            }
            continue;
        }
        for (seq, text) in batch {
            let notice = match serde_json::from_str::<Event>(&text) {
                Ok(e) => Notice::of(&outbox, seq, e),
                Err(e) => {
                    say(&format!(
                        "notify {:?}: event {seq} cannot be read ({e}); skipped",
                        sink.name
                    ));
                    None
                }
            };
            let Some(notice) = notice.filter(|n| sink.wants(n.outcome, n.event.app.as_deref()))
            else {
                advance(&mut conn, &sink.name, seq, None)?;
                continue;
            };
            match deliver_with_retries(&runtime, &client, sink, &notice, signal, until) {
                Delivery::Delivered => advance(&mut conn, &sink.name, seq, None)?,
                Delivery::Dead { attempts, error } => {
                    say(&format!(
                        "notify {:?}: {} undelivered after {attempts} attempts ({error}); kept as a dead letter",
                        sink.name,
                        notice.delivery_id(&sink.name)
                    ));
                    let dead = DeadLetter {
                        attempts,
                        error,
                        body: payload(sink, &notice).1,
                        time: crate::clock::Clock::now(&crate::clock::SystemClock),
                    };
                    advance(&mut conn, &sink.name, seq, Some(dead))?;
                }
                Delivery::Interrupted => return Ok(()),
            }
        }
    }
}

struct DeadLetter {
    attempts: u32,
    error: String,
    body: String,
    time: Timestamp,
}

/// The sink is done with event `seq`: the cursor moves (with its dead letter, in one
/// transaction). A cursor never moves back.
fn advance(conn: &mut Connection, sink: &str, seq: i64, dead: Option<DeadLetter>) -> Result<()> {
    let tx = conn.transaction()?;
    if let Some(d) = dead {
        tx.execute(
            "INSERT OR REPLACE INTO notify_dead (sink, seq, time, attempts, error, body)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![sink, seq, d.time.0, d.attempts, d.error, d.body],
        )?;
    }
    tx.execute(
        "INSERT INTO notify_cursor (sink, seq) VALUES (?1, ?2)
         ON CONFLICT(sink) DO UPDATE SET seq = MAX(seq, excluded.seq)",
        params![sink, seq],
    )?;
    tx.commit()?;
    Ok(())
}

enum Delivery {
    Delivered,
    Dead {
        attempts: u32,
        error: String,
    },
    /// Stopped, or the drain's time is up: the cursor stays, the next start sends it.
    Interrupted,
}

fn deliver_with_retries(
    runtime: &tokio::runtime::Runtime,
    client: &reqwest::Client,
    sink: &SinkConfig,
    notice: &Notice,
    signal: &Signal,
    until: Option<Instant>,
) -> Delivery {
    let mut wait = sink.backoff;
    let mut last = String::new();
    for attempt in 1..=sink.attempts {
        // A one-shot drain's deadline cuts an attempt short; an attempt it cut is no failure
        // of the receiver's: the notification stays undelivered, not dead.
        let timeout = match until {
            None => sink.timeout,
            Some(u) => sink
                .timeout
                .min(u.saturating_duration_since(Instant::now())),
        };
        if timeout.is_zero() {
            return Delivery::Interrupted;
        }
        // A receiver that says when to come back (429 or 503 with `Retry-After`, as Slack
        // rate-limits) is waited for that long, at most the longest back-off.
        let asked_wait = match runtime.block_on(deliver(client, sink, notice, timeout)) {
            Ok(()) => return Delivery::Delivered,
            Err(Failed { said, retry_after }) => {
                last = said;
                retry_after
            }
        };
        if until.is_some_and(|u| Instant::now() >= u) {
            return Delivery::Interrupted;
        }
        if attempt == sink.attempts {
            break;
        }
        let next = Instant::now() + asked_wait.map_or(wait, |a| a.max(wait).min(MAX_BACKOFF));
        if until.is_some_and(|u| next >= u) || signal.sleep(next) {
            return Delivery::Interrupted;
        }
        wait = (wait * 2).min(MAX_BACKOFF);
    }
    Delivery::Dead {
        attempts: sink.attempts,
        error: last,
    }
}

/// The content type and bytes a sink sends for `notice`.
fn payload(sink: &SinkConfig, notice: &Notice) -> (&'static str, String) {
    let body = match &sink.kind {
        SinkKind::Slack { .. } => notice.slack(),
        SinkKind::Webhook { .. } | SinkKind::Command { .. } => notice.json(&sink.name),
    };
    ("application/json", body.to_string())
}

/// A failed attempt: what happened, in words that carry no URL and no secret, and when the
/// receiver asked to be tried again.
struct Failed {
    said: String,
    retry_after: Option<Duration>,
}

impl From<String> for Failed {
    fn from(said: String) -> Failed {
        Failed {
            said,
            retry_after: None,
        }
    }
}

/// One attempt.
async fn deliver(
    client: &reqwest::Client,
    sink: &SinkConfig,
    notice: &Notice,
    timeout: Duration,
) -> Result<(), Failed> {
    let (content_type, body) = payload(sink, notice);
    match &sink.kind {
        SinkKind::Webhook { url, secret } => {
            let mut req = client
                .post(url.expose().clone())
                .timeout(timeout)
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .header(body::DELIVERY_HEADER, notice.delivery_id(&sink.name))
                .header(body::OUTCOME_HEADER, notice.outcome.as_str());
            if let Some(s) = secret {
                req = req.header(
                    body::SIGNATURE_HEADER,
                    body::signature(s.expose().as_bytes(), body.as_bytes()),
                );
            }
            answer(req.body(body).send().await, url)
        }
        SinkKind::Slack { url } => answer(
            client
                .post(url.expose().clone())
                .timeout(timeout)
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(body)
                .send()
                .await,
            url,
        ),
        SinkKind::Command { argv } => run_command(argv, &body, timeout)
            .await
            .map_err(Failed::from),
    }
}

fn answer(sent: reqwest::Result<reqwest::Response>, url: &config::SinkUrl) -> Result<(), Failed> {
    match sent {
        Ok(r) if r.status().is_success() => Ok(()),
        Ok(r) => {
            let retry_after = matches!(r.status().as_u16(), 429 | 503)
                .then(|| r.headers().get(reqwest::header::RETRY_AFTER))
                .flatten()
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            Err(Failed {
                said: format!("{url} answered {}", r.status()),
                retry_after,
            })
        }
        Err(e) if e.is_timeout() => Err(format!("{url} did not answer in time").into()),
        Err(e) if e.is_connect() => Err(format!("cannot connect to {url}").into()),
        // reqwest's words name the URL: only its kind is kept.
        Err(e) => Err(format!("sending to {url} failed ({})", e.without_url()).into()),
    }
}

/// The command sink: the program with the body on its standard input, killed at `timeout`.
async fn run_command(argv: &[String], body: &str, timeout: Duration) -> Result<(), String> {
    use tokio::io::AsyncWriteExt;
    let program = &argv[0];
    let mut child = tokio::process::Command::new(program)
        .args(&argv[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let body = body.as_bytes().to_vec();
    let run = async move {
        // A program that does not read its input is not held up by it.
        let _ = stdin.write_all(&body).await;
        drop(stdin);
        child.wait_with_output().await
    };
    match tokio::time::timeout(timeout, run).await {
        Err(_) => Err(format!(
            "{program} did not finish in {}",
            humantime::format_duration(timeout)
        )),
        Ok(Err(e)) => Err(format!("{program}: {e}")),
        Ok(Ok(out)) if out.status.success() => Ok(()),
        Ok(Ok(out)) => {
            let said: String = String::from_utf8_lossy(&out.stderr)
                .trim()
                .chars()
                .take(ANSWER_KEPT)
                .collect();
            Err(format!(
                "{program} exited with {}{}",
                out.status,
                if said.is_empty() {
                    String::new()
                } else {
                    format!(": {}", greenlight_git::redact(&said))
                }
            ))
        }
    }
}

/// A dead letter, as `greenlight notify dead-letters` lists it.
#[derive(Debug, serde::Serialize)]
pub struct Dead {
    pub sink: String,
    pub seq: i64,
    pub time: String,
    pub attempts: u32,
    pub error: String,
    pub body: serde_json::Value,
}

/// The dead letters in `state`, oldest first.
pub fn dead_letters(state: &Path) -> Result<Vec<Dead>> {
    let conn = open(state)?;
    let rows = conn
        .prepare(
            "SELECT sink, seq, time, attempts, error, body FROM notify_dead ORDER BY time, sink, seq",
        )
        .with_context(|| {
            format!(
                "{} has no dead letters table: a start of `greenlight watch` migrates it",
                state.display()
            )
        })?
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, u32>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows
        .into_iter()
        .map(|(sink, seq, time, attempts, error, body)| Dead {
            sink,
            seq,
            time: Timestamp(time).rfc3339(),
            attempts,
            error,
            body: serde_json::from_str(&body).unwrap_or(serde_json::Value::String(body)),
        })
        .collect())
}

/// Where a one-shot command keeps its outbox: `<data-dir>/events.db`.
pub fn outbox_in(data_dir: &Path) -> PathBuf {
    data_dir.join("events.db")
}
