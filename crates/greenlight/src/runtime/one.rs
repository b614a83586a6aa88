//! One commit's verdict from the watchdog's own runtime, in a scratch state: what the promotion
//! gate asks of its candidate and what `greenlight wait` asks of a pipeline's commit. The
//! runtime runs until the commit's first verdict (or its trailer's rejection), then stops.

use super::DaemonConfig;
use super::seams::Source;
use crate::clock::{Clock, SystemClock};
use crate::output::Output;
use anyhow::Result;
use greenlight_core::event::EventKind;
use greenlight_core::watch::State;
use std::sync::Arc;
use std::time::Duration;

/// What the runtime said of the commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judged {
    /// Its watch's verdict and the verdict's reason.
    Verdict(State, String),
    /// Its watch trailer was rejected (the event's message): no watch started.
    TrailerRejected(String),
    /// Nothing within `limit`.
    NoVerdict,
}

/// Runs the watchdog runtime on `cfg` (its `state` and `data_dir` are the caller's scratch)
/// until `commit`'s first verdict or `limit`. Everything the runtime says goes to `out`, whose
/// subscribers see each event as it happens (progress lines, the healthy streak's start).
pub async fn judge_one(
    cfg: DaemonConfig,
    source: Source,
    out: Output,
    commit: &str,
    limit: Duration,
) -> Result<Judged> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Judged>();
    let watched = commit.to_string();
    out.subscribe(move |e| {
        if e.commit.as_deref() != Some(watched.as_str()) {
            return;
        }
        let judged = match e.state {
            Some(State::WaitingReach | State::Judging) => None,
            Some(s) => Some(Judged::Verdict(s, e.message.clone())),
            None => (e.event == EventKind::DirectiveRejected)
                .then(|| Judged::TrailerRejected(e.message.clone())),
        };
        if let Some(j) = judged {
            let _ = tx.send(j);
        }
    });
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let daemon = super::start(cfg, source, out, clock).await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(daemon.run(async move {
        let _ = stopped.await;
    }));
    let verdict = tokio::select! {
        v = rx.recv() => v,
        _ = tokio::time::sleep(limit) => None,
    };
    let _ = stop.send(());
    let ran = task.await;
    match (verdict, ran) {
        (Some(v), _) => Ok(v),
        (None, Ok(Err(e))) => Err(e),
        (None, Err(e)) => Err(anyhow::Error::new(e).context("the judge's runtime ended")),
        (None, Ok(Ok(()))) => Ok(Judged::NoVerdict),
    }
}
