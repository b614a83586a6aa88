//! Several replicas, one leader (docs/deploy.md#leader): what a replica does while it stands by,
//! and how its source is handed to the runtime when it takes over. The election itself — the
//! Lease, its renewal, when a standby may take it and when a leader must stop — is
//! `greenlight_kube::lease`'s; the command (`cmd/watch.rs`) puts the two together.
//!
//! A standby keeps its source warm: the change stream is open (and re-opened on its own, as a
//! leader's is) and its connection is what the standby's `/readyz` reports, but every message
//! is dropped: a standby judges nothing, writes nothing and pushes nothing. When it takes over,
//! the runtime receives the stream from then on, preceded by `Connected` if it is connected:
//! the runtime then asks for a complete listing, as after any connection, and only a listing
//! asked for after that makes the stream's silence vouch for anything
//! (`greenlight_core::source::Freshness`). What the standby dropped is older than that listing.

use crate::metrics::Metrics;
use crate::runtime::seams::{AppSource, Source, SourceMsg, StartupNote};
use greenlight_core::directive::AppRef;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// How many messages the hand-over channel holds (the source's own channel is behind it).
const HANDOVER_QUEUE: usize = 1024;

/// A replica standing by: its source streams, its messages are dropped.
pub struct Standby {
    app: Box<dyn AppSource>,
    stop: oneshot::Sender<()>,
    drain: JoinHandle<mpsc::Receiver<SourceMsg>>,
    connected: Arc<AtomicBool>,
}

/// Start `source`'s stream and drop what it delivers until [`Standby::take_over`]; its
/// connection is reported to `metrics` under `label` (the standby's `/readyz`).
pub fn stand_by(source: Source, metrics: Arc<Metrics>, label: String) -> Standby {
    let Source {
        mut app,
        mut deliveries,
    } = source;
    app.start_stream();
    let connected = Arc::new(AtomicBool::new(false));
    let (stop, mut stopped) = oneshot::channel();
    let seen = connected.clone();
    let drain = tokio::spawn(async move {
        loop {
            tokio::select! {
                biased;
                _ = &mut stopped => break,
                msg = deliveries.recv() => match msg {
                    Some(SourceMsg::Connected) => {
                        seen.store(true, Ordering::SeqCst);
                        metrics.standby_source(&label, true);
                    }
                    Some(SourceMsg::Lost(_)) => {
                        seen.store(false, Ordering::SeqCst);
                        metrics.standby_source(&label, false);
                    }
                    Some(_) => {}
                    // The source ended: the runtime that takes over finds it ended too.
                    None => break,
                },
            }
        }
        deliveries
    });
    Standby {
        app,
        stop,
        drain,
        connected,
    }
}

impl Standby {
    /// Whether the standby's stream is connected now.
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }

    /// Stop dropping: the source, for the runtime of the replica that now leads. Its stream is
    /// not started again (it runs), and it begins with `Connected` when connected.
    pub async fn take_over(self) -> anyhow::Result<Source> {
        let _ = self.stop.send(());
        let mut deliveries = self
            .drain
            .await
            .map_err(|e| anyhow::anyhow!("the standby's source task failed: {e}"))?;
        let (tx, rx) = mpsc::channel(HANDOVER_QUEUE);
        if self.connected.load(Ordering::SeqCst) {
            // A fresh channel: this send cannot fail or wait.
            let _ = tx.try_send(SourceMsg::Connected);
        }
        tokio::spawn(async move {
            while let Some(msg) = deliveries.recv().await {
                if tx.send(msg).await.is_err() {
                    break;
                }
            }
        });
        Ok(Source {
            app: Box::new(Started(self.app)),
            deliveries: rx,
        })
    }
}

/// A source whose stream already runs: the runtime's `start_stream` is a no-op.
struct Started(Box<dyn AppSource>);

impl AppSource for Started {
    fn start_stream(&mut self) {}
    fn set_watched(&mut self, apps: Vec<AppRef>) {
        self.0.set_watched(apps)
    }
    fn request_listing(&mut self, ticket: u64) {
        self.0.request_listing(ticket)
    }
    fn request_read(&mut self, ticket: u64, apps: Vec<AppRef>) {
        self.0.request_read(ticket, apps)
    }
    fn set_stale_after(&mut self, stale_after_ms: i64) {
        self.0.set_stale_after(stale_after_ms)
    }
    fn name(&self) -> &str {
        self.0.name()
    }
    fn startup_notes(&self, stale_after_ms: i64) -> Vec<StartupNote> {
        self.0.startup_notes(stale_after_ms)
    }
}
