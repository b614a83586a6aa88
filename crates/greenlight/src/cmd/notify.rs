//! `greenlight notify test` (send one sample notification to each configured sink, to see the
//! config work before a verdict needs it) and `notify dead-letters` (what a daemon could not
//! deliver). docs/notifications.md.

use crate::cmd::usage;
use anyhow::Result;
use clap::{Args, Subcommand};
use greenlight::notify::{self, config};
use greenlight_core::event::{Event, EventKind, Evidence, Outcome};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct NotifyArgs {
    #[command(subcommand)]
    pub action: NotifyAction,
}

#[derive(Subcommand)]
pub enum NotifyAction {
    /// Send one sample notification of an outcome to every sink of a config file that wants it;
    /// exit 1 when a sink did not take it.
    Test(TestArgs),
    /// List the notifications a daemon gave up delivering (its state file's dead letters).
    DeadLetters(DeadArgs),
}

#[derive(Args)]
pub struct TestArgs {
    /// The TOML file with the `[[notify]]` tables (a `watch --config` file serves).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// The outcome to send (docs/notifications.md#titles).
    #[arg(long, default_value = "passed")]
    pub outcome: String,
    /// The app the sample names (sinks that filter apps take it only when it matches).
    #[arg(long, default_value = "sample-app")]
    pub app: String,
}

#[derive(Args)]
pub struct DeadArgs {
    /// The watchdog's state file.
    #[arg(long, value_name = "FILE")]
    pub state: PathBuf,
    /// `text` (a line each) or `json` (one array).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub output: String,
}

pub fn run(a: NotifyArgs) -> Result<ExitCode> {
    match a.action {
        NotifyAction::Test(t) => test(t),
        NotifyAction::DeadLetters(d) => dead(d),
    }
}

fn test(a: TestArgs) -> Result<ExitCode> {
    let Some(outcome) = Outcome::parse(&a.outcome).filter(|o| o.notifies()) else {
        let names: Vec<&str> = Outcome::ALL
            .iter()
            .filter(|o| o.notifies())
            .map(|o| o.as_str())
            .collect();
        return Err(usage(format!(
            "--outcome {:?}: one of {}",
            a.outcome,
            names.join(", ")
        )));
    };
    let text = greenlight::files::read_text(&a.config, greenlight::files::YAML_LIMIT, "--config")
        .map_err(|e| usage(e.to_string()))?;
    let sinks = config::parse(&a.config, &text).map_err(|e| usage(e.to_string()))?;
    if sinks.is_empty() {
        return Err(usage(format!(
            "--config {}: no [[notify]] table",
            a.config.display()
        )));
    }
    let wanted: Vec<config::SinkConfig> = sinks
        .into_iter()
        .filter(|s| s.wants(outcome, Some(&a.app)))
        .collect();
    if wanted.is_empty() {
        outln!("no sink wants {} of app {}", outcome.as_str(), a.app);
        return Ok(ExitCode::SUCCESS);
    }
    let dir = tempfile::tempdir()?;
    let outbox = notify::outbox_in(dir.path());
    let mut store = greenlight::store::SqliteStore::open_or_create(&outbox)?;
    notify::register(&outbox, &wanted)?;
    let now = greenlight::clock::Clock::now(&greenlight::clock::SystemClock);
    let event = Event {
        time: now,
        event: EventKind::GateEnded,
        commit: Some("0".repeat(40)),
        app: Some(a.app.clone()),
        state: None,
        message: format!(
            "a test of the notification config {}: not a real outcome",
            a.config.display()
        ),
        evidence: Evidence::default(),
        outcome: Some(outcome),
        reason: None,
    };
    store.write(greenlight::store::Write {
        events: std::slice::from_ref(&event),
        ..Default::default()
    })?;
    drop(store);
    let say: notify::Say = Arc::new(|m: &str| {
        let _ = crate::cmd::err(&format!("{m}\n"));
    });
    // Each sink's attempts, back-offs and timeouts, bounded.
    let longest = wanted
        .iter()
        .map(|s| (s.timeout + s.backoff) * s.attempts)
        .max()
        .unwrap_or_default()
        .min(Duration::from_secs(600));
    let left = notify::drain(&outbox, &wanted, Instant::now() + longest, &say)?;
    let dead = notify::dead_letters(&outbox)?;
    let mut failed = false;
    for s in &wanted {
        let undelivered =
            left.iter().any(|(n, _)| *n == s.name) || dead.iter().any(|d| d.sink == s.name);
        failed |= undelivered;
        outln!(
            "{} ({}): {}",
            s.name,
            s.kind.as_str(),
            if undelivered {
                "NOT delivered"
            } else {
                "delivered"
            }
        );
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn dead(a: DeadArgs) -> Result<ExitCode> {
    if !a.state.is_file() {
        return Err(usage(format!(
            "--state {}: no such state file",
            a.state.display()
        )));
    }
    let dead = notify::dead_letters(&a.state)?;
    if a.output == "json" {
        outln!("{}", serde_json::to_string_pretty(&dead)?);
        return Ok(ExitCode::SUCCESS);
    }
    if dead.is_empty() {
        outln!("no dead letters");
    }
    for d in dead {
        let outcome = d.body["outcome"].as_str().unwrap_or("?");
        outln!(
            "{} {} event {} ({outcome}) after {} attempts: {}",
            d.time,
            d.sink,
            d.seq,
            d.attempts,
            d.error
        );
    }
    Ok(ExitCode::SUCCESS)
}
