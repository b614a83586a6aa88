//! `watch --events` (always on with `--source kube`): every watch transition also written as a
//! Kubernetes Event regarding its Application (`greenlight_kube::events`, `docs/events.md`),
//! with the credentials of `--kubeconfig`, else `$KUBECONFIG` / `~/.kube/config`, else the pod's
//! service account.

use anyhow::Result;
use clap::Args;
use greenlight::clock::{Clock, SystemClock};
use greenlight::output::Output;
use greenlight_kube::events::{EventRecorder, Reporter, Settings};
use std::path::Path;
use std::sync::Arc;

/// `--events` (the credentials are `watch`'s `--kubeconfig`, shared with `--source kube`).
#[derive(Args, Clone)]
pub struct EventsArgs {
    /// Also write every watch transition as a Kubernetes Event (events.k8s.io/v1) on its
    /// Application, shown by `kubectl describe application` and Argo CD's UI (docs/events.md);
    /// always on with --source kube. Credentials: --kubeconfig.
    #[arg(long)]
    pub events: bool,
}

/// The Event writer, when `on`, fed by every event `out` prints, with the credentials of
/// `kubeconfig` (else inferred); an Application named without a namespace is looked for in
/// `namespaces` when it cannot be listed cluster-wide (none: the client's default namespace).
/// No Kubernetes configuration is a usage error naming where it looked.
pub async fn recorder(
    on: bool,
    kubeconfig: Option<&Path>,
    namespaces: &[String],
    out: &Output,
) -> Result<Option<EventRecorder>> {
    if !on {
        return Ok(None);
    }
    let client = greenlight_kube::client(kubeconfig)
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
        lookup_namespaces: if namespaces.is_empty() {
            vec![client.default_namespace().to_string()]
        } else {
            namespaces.to_vec()
        },
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
