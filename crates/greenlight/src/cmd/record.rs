//! `greenlight record`: each app's shadow track record — its verdicts against what people did
//! in git in the day after each — with the sample size and a plain judgement
//! (docs/record.md). Reads the store the watchdog writes; exit 0, 2 usage, 1 unreadable store.

use crate::cmd::state::{Open, StoreArgs};
use crate::cmd::usage;
use anyhow::Result;
use clap::Args;
use greenlight::clock::{Clock, SystemClock};
use greenlight_core::directive::AppRef;
use greenlight_core::record::{DEFAULT_MIN_SAMPLES, Tally, window_words};
use greenlight_core::time::Timestamp;
use serde_json::json;
use std::process::ExitCode;

#[derive(Args)]
pub struct RecordArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Only this app (`name` or `namespace/name`, as trailers name it).
    #[arg(long)]
    pub app: Option<String>,
    /// How many decided verdicts (would-have-reverted or confirmed, the day after each over)
    /// with no miss and no false alarm make enough to arm.
    #[arg(long, default_value_t = DEFAULT_MIN_SAMPLES, value_parser = clap::value_parser!(u64).range(1..))]
    pub min_samples: u64,
    /// Count as of this moment (RFC 3339, e.g. 2026-12-07T09:00:00Z) instead of now: a
    /// verdict's day is over, or not, as of then.
    #[arg(long, value_name = "TIME")]
    pub as_of: Option<String>,
    /// Print JSON instead of lines (docs/record.md#json).
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: RecordArgs) -> Result<ExitCode> {
    let wanted = a
        .app
        .as_deref()
        .map(|s| AppRef::parse(s).map_err(|e| usage(format!("--app {s:?}: {e}"))))
        .transpose()?;
    let now = match &a.as_of {
        None => SystemClock.now(),
        Some(t) => Timestamp::parse_rfc3339(t).ok_or_else(|| {
            usage(format!(
                "--as-of {t:?}: not an RFC 3339 time (e.g. 2026-12-07T09:00:00Z)"
            ))
        })?,
    };
    let mut store = a.store.open(Open::Read)?;
    let exported = store.export()?;
    let record = greenlight::store::track_record(&exported, now);
    let chosen: Vec<(&String, &Tally)> = record
        .iter()
        .filter(|(app, _)| match &wanted {
            None => true,
            Some(w) => AppRef::parse(app).is_ok_and(|r| {
                r.name == w.name
                    && (w.namespace.is_none()
                        || r.namespace.is_none()
                        || r.namespace == w.namespace)
            }),
        })
        .collect();
    if a.json {
        let doc = json!({
            "schema": "greenlight.record/v1",
            "window_hours": greenlight_core::record::WINDOW_MS / 3_600_000,
            "as_of": now.rfc3339(),
            "min_samples": a.min_samples,
            "apps": chosen.iter().map(|(app, t)| json!({
                "app": app,
                "counts": t,
                "decided": t.decided(),
                "ready_to_arm": t.ready_to_arm(a.min_samples),
                "judgement": t.judgement(a.min_samples),
            })).collect::<Vec<_>>(),
        });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    if chosen.is_empty() {
        match &wanted {
            Some(w) => outln!("{w}: no verdict recorded yet"),
            None => outln!("no verdict recorded yet"),
        }
        return Ok(ExitCode::SUCCESS);
    }
    for (app, t) in chosen {
        outln!("{app}: {}", t.judgement(a.min_samples));
        outln!(
            "  {} verdicts: {} confirmed ({} reverted by a human), {} would-have-reverted, {} reverted by greenlight ({} undone by a human), {} inconclusive, {} not reached, {} other",
            t.verdicts,
            t.confirmed,
            t.misses,
            t.would_revert,
            t.reverted,
            t.overruled,
            t.inconclusive,
            t.not_reached,
            t.other
        );
    }
    outln!(
        "(a human's answer is what reached the branch within {} of a verdict)",
        window_words()
    );
    Ok(ExitCode::SUCCESS)
}
