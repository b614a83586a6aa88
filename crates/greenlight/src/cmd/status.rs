//! `greenlight status` and `greenlight breaker reset`: read (and, for the breaker, amend) the
//! state the watchdog writes, a state file (`--state`) or the cluster store (`--store kube`). A
//! missing state file or store is an error, never an empty state.

use crate::cmd::state::{Chosen, Open, StoreArgs, open_file};
use anyhow::Result;
use clap::{Args, Subcommand};
use greenlight::breaker::Reset;
use greenlight_core::judge::Watch;
use greenlight_core::time::Timestamp;
use serde_json::{Value, json};
use std::process::ExitCode;

#[derive(Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct BreakerArgs {
    #[command(subcommand)]
    pub action: BreakerAction,
}

#[derive(Subcommand)]
pub enum BreakerAction {
    /// A human closes the breaker: reverts are allowed again.
    ///
    /// With --store kube it always leaves a request, which the leading watchdog applies at its
    /// next fetch.
    Reset {
        #[command(flatten)]
        store: StoreArgs,
    },
}

fn ts(t: Option<Timestamp>) -> Value {
    t.map(|t| Value::String(t.rfc3339())).unwrap_or(Value::Null)
}

pub fn watch_json(w: &Watch) -> Value {
    json!({
        // `<commit>:<trailer index>`, and `~<n>` for a watch that re-opened (`docs/verdicts.md#reopen`).
        "id": w.id,
        "commit": w.commit,
        "app": w.app.to_string(),
        "mode": w.mode.as_str(),
        "dry_run": w.dry_run,
        "deadline_s": w.deadline_ms / 1000,
        "state": w.state().as_str(),
        // Reasons quote URLs; a state file written before they were redacted must not leak.
        "reason": greenlight_git::redact(&w.reason_text()),
        "watch_started_at": ts(Some(w.watch_started_at)),
        "reached_at": ts(w.reached_at()),
        "healthy_since": ts(w.healthy_since()),
        "finished_at": ts(w.finished_at()),
        "revert_commit": w.revert_commit(),
        // A FAIL whose revert has not landed yet: asked of git, or proposed as a pull request
        // (`revert_pull_request`) that has not merged.
        "revert_pending": w.reverting().is_some(),
        "revert_pull_request": w.proposal().map(|p| p.url.as_str()),
    })
}

pub fn run(a: StatusArgs) -> Result<ExitCode> {
    let mut store = a.store.open(Open::Read)?;
    let loaded = store.load()?;
    if a.json {
        let doc = json!({
            "baseline": loaded.baseline,
            "breaker": {"open": loaded.breaker.open, "consecutive_reverts": loaded.breaker.consecutive_reverts},
            "watches": loaded.watches.iter().map(watch_json).collect::<Vec<_>>(),
        });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "repo {}  branch {}  baseline {}  tip {}",
        loaded.repo.as_deref().unwrap_or("-"),
        loaded.branch.as_deref().unwrap_or("-"),
        loaded
            .baseline
            .as_deref()
            .map(|s| &s[..s.len().min(12)])
            .unwrap_or("-"),
        loaded
            .tip
            .as_deref()
            .map(|s| &s[..s.len().min(12)])
            .unwrap_or("-"),
    );
    outln!(
        "breaker {} ({} consecutive revert(s))",
        if loaded.breaker.open {
            "OPEN — run `greenlight breaker reset` after a human has looked"
        } else {
            "closed"
        },
        loaded.breaker.consecutive_reverts
    );
    if loaded.watches.is_empty() {
        outln!("no watches");
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{:<10} {:<24} {:<7} {:<18} {:<21} REASON",
        "COMMIT",
        "APP",
        "MODE",
        "STATE",
        "STARTED"
    );
    for w in &loaded.watches {
        let mode = if w.dry_run {
            format!("{}*", w.mode.as_str())
        } else {
            w.mode.as_str().to_string()
        };
        outln!(
            "{:<10} {:<24} {:<7} {:<18} {:<21} {}",
            &w.commit.as_str()[..10],
            w.app.to_string(),
            mode,
            w.state().as_str(),
            w.watch_started_at.rfc3339(),
            greenlight_git::redact(&w.reason_text())
        );
    }
    if loaded.watches.iter().any(|w| w.dry_run) {
        outln!("* dry-run: judged only");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_breaker(a: BreakerArgs) -> Result<ExitCode> {
    let BreakerAction::Reset { store } = a.action;
    let now = greenlight::clock::Clock::now(&greenlight::clock::SystemClock);
    let (mut store, state) = match store.choose(Open::Write)? {
        Chosen::File(path) => (open_file(&path, Open::Write)?, path),
        Chosen::Kube(mut k) => {
            // The leader is the breaker's only writer: a request, always.
            greenlight::store::Store::request_breaker_reset(&mut *k, now.0)?;
            outln!(
                "breaker reset requested in {}: the leading watchdog applies it at its next fetch (`greenlight status --store kube` shows the breaker closed then)",
                greenlight::store::Store::describe(&*k)
            );
            return Ok(ExitCode::SUCCESS);
        }
    };
    match greenlight::breaker::reset(&mut store, &state, now)? {
        Reset::Applied => outln!("breaker reset: reverts are allowed again"),
        Reset::Requested => {
            outln!("breaker reset requested: the running watchdog applies it at its next fetch")
        }
    }
    Ok(ExitCode::SUCCESS)
}
