//! Where events and operational messages go: stderr, as one human line or one JSON object per
//! line. Secrets never arrive here: URLs are redacted by their owners before they are logged,
//! and this module redacts credentials in URLs once more as a last line of defence.

use greenlight_core::event::Event;
use greenlight_core::time::Timestamp;
use std::io::Write;
use std::sync::{Arc, Mutex};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

type Listener = Box<dyn Fn(&Event) + Send + Sync>;

/// The daemon's voice.
#[derive(Clone)]
pub struct Output {
    format: LogFormat,
    listeners: Arc<Mutex<Vec<Listener>>>,
    /// Whether events are printed (else only handed to the listeners).
    print_events: bool,
}

impl Output {
    pub fn new(format: LogFormat) -> Output {
        Output {
            format,
            listeners: Arc::new(Mutex::new(Vec::new())),
            print_events: true,
        }
    }

    /// Events go to the listeners only; operational messages are still printed (`greenlight
    /// wait` prints its own progress lines from the events).
    pub fn events_unprinted(mut self) -> Output {
        self.print_events = false;
        self
    }

    /// Also hand every event to `f` (the demo follows the story this way).
    pub fn subscribe(&self, f: impl Fn(&Event) + Send + Sync + 'static) {
        self.listeners
            .lock()
            .expect("listener lock")
            .push(Box::new(f));
    }

    pub fn event(&self, e: &Event) {
        let line = match self.format {
            LogFormat::Text => e.human_line(),
            LogFormat::Json => e.json_line(),
        };
        if self.print_events {
            write_line(&greenlight_git::redact(&line));
        }
        for l in self.listeners.lock().expect("listener lock").iter() {
            l(e);
        }
    }

    /// An operational message (not a watch transition).
    pub fn info(&self, now: Timestamp, msg: &str) {
        self.log(now, "info", msg)
    }

    pub fn warn(&self, now: Timestamp, msg: &str) {
        self.log(now, "warn", msg)
    }

    /// Something the operator must fix, though the daemon runs on.
    pub fn error(&self, now: Timestamp, msg: &str) {
        self.log(now, "error", msg)
    }

    fn log(&self, now: Timestamp, level: &str, msg: &str) {
        let msg = greenlight_git::redact(msg);
        let line = match self.format {
            LogFormat::Text => format!("{} {level:>5} {msg}", now.rfc3339()),
            LogFormat::Json => {
                serde_json::json!({"time": now.rfc3339(), "level": level, "message": msg})
                    .to_string()
            }
        };
        write_line(&line);
    }

    /// A line scripts wait for, printed as is in both formats.
    pub fn plain(&self, line: &str) {
        write_line(&greenlight_git::redact(line));
    }
}

/// One line to stdout for a long-running command: a reader that has gone is no reason to stop
/// (or to panic, as `println!` does).
pub fn stdout_line(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// One line to stderr, never failing (see [`stdout_line`]).
pub fn stderr_line(line: &str) {
    write_line(line)
}

fn write_line(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
    let _ = err.flush();
}
