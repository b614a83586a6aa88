//! `watch --events`: every watch transition also written as a Kubernetes Event regarding its
//! Application (`greenlight_kube::events`, `docs/events.md`), with the credentials of
//! `--kubeconfig`, else `$KUBECONFIG` / `~/.kube/config`, else the pod's service account.

use anyhow::Result;
use clap::Args;
use greenlight::clock::{Clock, SystemClock};
use greenlight::output::Output;
use greenlight_kube::events::{EventRecorder, Reporter, Settings};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Args, Clone)]
pub struct EventsArgs {
    /// Also write every watch transition as a Kubernetes Event (events.k8s.io/v1) on its
    /// Application, shown by `kubectl describe application` and Argo CD's UI (docs/events.md).
    #[arg(long)]
    pub events: bool,
    /// The kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config, else the pod's
    /// service account).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

/// The Event writer `--events` asks for, fed by every event `out` prints; `None` without the
/// flag. No Kubernetes configuration is a usage error naming where it looked.
pub async fn recorder(a: &EventsArgs, out: &Output) -> Result<Option<EventRecorder>> {
    if !a.events {
        return Ok(None);
    }
    let client = greenlight_kube::client(a.kubeconfig.as_deref())
        .await
        .map_err(|e| crate::cmd::usage(format!("--events: {e}")))?;
    let reporter = Reporter::from_env();
    let now = || SystemClock.now();
    out.info(
        now(),
        &format!(
            "Kubernetes Events: every transition also written on its Application as {} (instance {})",
            reporter.controller, reporter.instance
        ),
    );
    let settings = Settings {
        reporter,
        lookup_namespaces: vec![client.default_namespace().to_string()],
    };
    let warn_out = out.clone();
    let rec = EventRecorder::spawn(
        client,
        settings,
        Arc::new(move |line: &str| warn_out.warn(now(), line)),
    );
    let feed = rec.clone();
    out.subscribe(move |e| {
        // The words printed are redacted on their way out; so are the Event's.
        let mut e = e.clone();
        e.message = greenlight_git::redact(&e.message);
        feed.record(&e)
    });
    Ok(Some(rec))
}
