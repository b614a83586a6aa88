//! The Kubernetes API as the runtime's Application source (`greenlight watch --source kube`):
//! built at the edge and handed to the runtime as a [`Source`]. What is true of this source
//! alone is said here: the names in the lines about the stream, and what a verdict rests on
//! when per-resource health cannot be read.

use crate::runtime::seams::{AppSource, Source, StartupNote};
use anyhow::Result;
use greenlight_core::directive::AppRef;
use greenlight_core::repo_url::RepoUrl;
use greenlight_kube::{KubeSource, KubeSourceOptions};
use std::path::Path;
use tokio::sync::mpsc;

/// [`greenlight_kube::KubeSource`], with what the runtime should hear about it at start.
pub struct KubeAppSource {
    inner: KubeSource,
    namespaces: Vec<String>,
    rewatch_ms: i64,
}

/// Argo CD's Applications in the Kubernetes API reached with `kubeconfig` (else `$KUBECONFIG`,
/// `~/.kube/config`, or the pod's service account) as the source of `repo`'s Applications. A
/// configuration that cannot be used is a usage error naming what was tried.
pub async fn source(
    kubeconfig: Option<&Path>,
    repo: &RepoUrl,
    opts: KubeSourceOptions,
) -> Result<Source> {
    let client = greenlight_kube::client(kubeconfig)
        .await
        .map_err(|e| crate::usage(format!("--source kube: {e}")))?;
    Ok(source_with_client(client, repo, opts))
}

/// [`source`] over a client already built (`wait --source kube` builds one to find the
/// Application's namespace first).
pub fn source_with_client(client: kube::Client, repo: &RepoUrl, opts: KubeSourceOptions) -> Source {
    let (tx, deliveries) = mpsc::channel(256);
    let namespaces = opts.namespaces.clone();
    let rewatch_ms = opts.rewatch.as_millis() as i64;
    let inner = KubeSource::new(client, repo.expose(), opts, tx);
    Source {
        app: Box::new(KubeAppSource {
            inner,
            namespaces,
            rewatch_ms,
        }),
        deliveries,
    }
}

/// Where `verify --source kube` and `wait --source kube` find one Application: the kubeconfig
/// (`--kubeconfig`, else `$KUBECONFIG`, `~/.kube/config`, the pod's service account) and the
/// namespace for an `--app` that names none (`--namespace`).
#[derive(Clone, Debug, Default)]
pub struct KubeApp {
    pub kubeconfig: Option<std::path::PathBuf>,
    /// `--namespace`: the Application's namespace when `--app` names none (default: the
    /// kubeconfig context's namespace, as kubectl's; in a pod, its own).
    pub namespace: Option<String>,
}

impl KubeApp {
    /// A client, and `app` with its namespace: `--app`'s, else `--namespace`, else the
    /// client's default (the kubeconfig context's). A configuration that cannot be used, or
    /// two different namespaces given, is a usage error naming the flags.
    pub async fn connect(&self, app: &AppRef) -> Result<(kube::Client, AppRef)> {
        if let (Some(a), Some(n)) = (&app.namespace, &self.namespace)
            && a != n
        {
            return Err(crate::usage(format!(
                "--app {app} names namespace {a}, --namespace {n}: give one of them"
            )));
        }
        let client = greenlight_kube::client(self.kubeconfig.as_deref())
            .await
            .map_err(|e| crate::usage(format!("--source kube: {e}")))?;
        let namespace = match (&app.namespace, &self.namespace) {
            (Some(a), _) => a.clone(),
            (None, Some(n)) => n.clone(),
            (None, None) => client.default_namespace().to_string(),
        };
        let app = AppRef {
            namespace: Some(namespace),
            name: app.name.clone(),
        };
        Ok((client, app))
    }

    /// Where an `--app` without a namespace was looked for, for the words of a 404.
    pub fn namespace_from(&self, given: &AppRef) -> &'static str {
        match (&given.namespace, &self.namespace) {
            (Some(_), _) => "--app's",
            (None, Some(_)) => "--namespace's",
            (None, None) => "the kubeconfig context's",
        }
    }
}

/// What a verdict says when per-resource health could not be read (no `--argocd-url` with an
/// Argo CD ≥ 3.0 that keeps it out of the Application).
pub const APP_LEVEL_HEALTH_ONLY: &str = "with --source kube and no --argocd-url, an Application that carries no per-resource health (Argo CD >= 3.0 keeps it in the resource tree) is judged on its app-level health alone";

impl AppSource for KubeAppSource {
    fn start_stream(&mut self) {
        self.inner.start_stream()
    }
    fn set_watched(&mut self, apps: Vec<AppRef>) {
        self.inner.set_watched(apps)
    }
    fn request_listing(&mut self, ticket: u64) {
        self.inner.request_listing(ticket)
    }
    fn request_read(&mut self, ticket: u64, apps: Vec<AppRef>) {
        self.inner.request_read(ticket, apps)
    }
    fn name(&self) -> &str {
        "Kubernetes API"
    }
    fn startup_notes(&self, stale_after_ms: i64) -> Vec<StartupNote> {
        let mut notes = vec![StartupNote::Info(format!(
            "reading Applications from the Kubernetes API in {}",
            if self.namespaces.is_empty() {
                "all namespaces".to_string()
            } else {
                format!("namespace(s) {}", self.namespaces.join(", "))
            }
        ))];
        if !self.inner.reads_resource_trees() {
            notes.push(StartupNote::Warn(format!(
                "{APP_LEVEL_HEALTH_ONLY}; give --argocd-url (and --argocd-token-file) to read resource trees"
            )));
        }
        if stale_after_ms < self.rewatch_ms {
            notes.push(StartupNote::Info(format!(
                "--stale-after {} is shorter than the watch's re-opening ({}): between listings (every --fetch-interval) the watch cannot vouch for an app that does not change",
                greenlight_core::time::human_duration(stale_after_ms),
                greenlight_core::time::human_duration(self.rewatch_ms),
            )));
        }
        notes
    }
}

/// `name` as a Kubernetes DNS-1123 label (lower-case letters, digits and `-`, starting and
/// ending with a letter or digit, at most 63 characters): what `--store-name` and
/// `--lease-name` must be, since they name objects and label values.
pub fn dns_label(name: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    if name.is_empty() || name.len() > 63 {
        return Err("a Kubernetes name of 1 to 63 characters is expected".to_string());
    }
    if !name.chars().all(ok_char) || name.starts_with('-') || name.ends_with('-') {
        return Err(
            "lower-case letters, digits and '-' only, starting and ending with a letter or digit"
                .to_string(),
        );
    }
    Ok(())
}
