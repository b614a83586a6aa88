//! Argo CD's REST API as an Application source: the change stream (reconnecting), listings and
//! reads on request, each Application completed with its resource tree where Argo CD keeps
//! per-resource health only there, and reduced to the facts the judge reads ([`snapshot`]).
//! Everything here runs in tasks of its own and reports, in order, on one channel of
//! [`SourceMsg`]s; the watchdog's loop never waits on Argo CD. It judges nothing.

use crate::client::{ArgoClient, EventKind, StreamItem};
use crate::model::Application;
use crate::snapshot::{
    glimpse, leave_out_ignored, needs_managed_resources, needs_resource_tree, snapshot,
};
use greenlight_core::directive::AppRef;
use greenlight_core::snapshot::AppKey;
use greenlight_core::source::{Origin, Problem, SourceMsg};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The source. Dropping it stops its tasks.
pub struct ArgoSource {
    client: ArgoClient,
    /// The watched repository as given (`--repo`): the spelling to find among an app's sources.
    repo: String,
    watched: Arc<RwLock<Vec<AppRef>>>,
    tx: mpsc::Sender<SourceMsg>,
    tasks: Vec<JoinHandle<()>>,
}

impl ArgoSource {
    /// A source whose messages go to `tx`. Nothing runs until [`ArgoSource::start_stream`] or a request.
    pub fn new(client: ArgoClient, repo: &str, tx: mpsc::Sender<SourceMsg>) -> ArgoSource {
        ArgoSource {
            client,
            repo: repo.to_string(),
            watched: Arc::new(RwLock::new(Vec::new())),
            tx,
            tasks: Vec::new(),
        }
    }

    /// Keep one change stream open, reconnecting with a bounded back-off.
    pub fn start_stream(&mut self) {
        let worker = self.worker();
        self.tasks
            .push(tokio::spawn(async move { worker.stream_loop().await }));
    }

    /// Which apps are watched: only their observations are completed and delivered.
    pub fn set_watched(&self, apps: Vec<AppRef>) {
        if let Ok(mut w) = self.watched.write() {
            *w = apps;
        }
    }

    /// A complete listing, answered as the watched apps' `Observed` messages, then `Listed`.
    pub fn request_listing(&mut self, ticket: u64) {
        let worker = self.worker();
        self.spawn(async move { worker.listing(ticket).await });
    }

    /// Fresh reads of `apps`, answered as `Observed` or `Absent` messages.
    pub fn request_read(&mut self, ticket: u64, apps: Vec<AppRef>) {
        let worker = self.worker();
        self.spawn(async move {
            for app in apps {
                if !worker.read(ticket, app).await {
                    return;
                }
            }
        });
    }

    fn spawn(&mut self, f: impl std::future::Future<Output = ()> + Send + 'static) {
        self.tasks.retain(|t| !t.is_finished());
        self.tasks.push(tokio::spawn(f));
    }

    fn worker(&self) -> Worker {
        Worker {
            client: self.client.clone(),
            repo: self.repo.clone(),
            watched: self.watched.clone(),
            tx: self.tx.clone(),
        }
    }
}

impl Drop for ArgoSource {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// What one task of the source needs.
#[derive(Clone)]
struct Worker {
    client: ArgoClient,
    repo: String,
    watched: Arc<RwLock<Vec<AppRef>>>,
    tx: mpsc::Sender<SourceMsg>,
}

impl Worker {
    fn is_watched(&self, ns: &str, name: &str) -> bool {
        self.watched
            .read()
            .map(|w| w.iter().any(|a| a.matches(ns, name)))
            .unwrap_or(false)
    }

    /// Send; false when the receiver is gone (the source is shutting down).
    async fn send(&self, msg: SourceMsg) -> bool {
        self.tx.send(msg).await.is_ok()
    }

    /// An observation of `ns/name` that could not be completed: said, never delivered.
    async fn incomplete(&self, ns: &str, name: &str, why: String) -> bool {
        let app = AppKey {
            namespace: ns.to_string(),
            name: name.to_string(),
        };
        self.send(SourceMsg::Problem(Problem::Incomplete { app, why }))
            .await
    }

    /// Complete an app with its resource tree where needed and deliver it. An incomplete
    /// observation is reported as a problem, never delivered as if it were whole.
    async fn deliver(&self, app: &Application, origin: Origin) -> bool {
        let (ns, name) = (&app.metadata.namespace, &app.metadata.name);
        let tree = if needs_resource_tree(app) {
            match self.client.resource_tree(ns, name).await {
                Ok(t) => t,
                Err(e) => {
                    let why = format!("resource tree of {ns}/{name} unavailable: {e}");
                    return self.incomplete(ns, name, why).await;
                }
            }
        } else {
            None
        };
        let spelling = repo_spelling(&self.repo, app);
        let mut snap = snapshot(app, tree.as_ref(), spelling);
        if needs_managed_resources(app, &snap) {
            match self.client.managed_resources(ns, name).await {
                Ok(Some(managed)) => leave_out_ignored(&mut snap, &managed),
                Ok(None) => {}
                Err(e) => {
                    let why = format!(
                        "managed resources of {ns}/{name} unavailable (needed to leave out ignore-healthcheck resources): {e}"
                    );
                    return self.incomplete(ns, name, why).await;
                }
            }
        }
        self.send(SourceMsg::Observed {
            snapshot: Box::new(snap),
            origin,
            resource_version: app.metadata.resource_version.parse().ok(),
        })
        .await
    }

    async fn listing(&self, ticket: u64) {
        let items = match self.client.list().await {
            Ok(items) => items,
            Err(e) => {
                let why = format!("listing Argo CD applications failed: {e}");
                self.send(SourceMsg::ListingFailed { ticket, why }).await;
                return;
            }
        };
        let mut present = Vec::new();
        let mut complete = true;
        for item in items {
            match item {
                Ok(item) => {
                    let (ns, name) = (&item.metadata.namespace, &item.metadata.name);
                    present.push(AppKey {
                        namespace: ns.clone(),
                        name: name.clone(),
                    });
                    // The listing names the apps (only: it is asked for names, to stay small at
                    // scale, so it carries no glimpse of the others); a watched one is read
                    // whole (and with its resource health, which Argo CD re-fills on a read).
                    if self.is_watched(ns, name) && !self.read_listed(ticket, ns, name).await {
                        return;
                    }
                }
                Err(e) => {
                    complete = false;
                    let why = format!("an Application in the listing could not be read: {e}");
                    if !self
                        .send(SourceMsg::Problem(Problem::Unreadable(why)))
                        .await
                    {
                        return;
                    }
                }
            }
        }
        self.send(SourceMsg::Listed {
            ticket,
            present,
            complete,
        })
        .await;
    }

    /// One watched app of a listing, read in full and delivered as part of the listing. A read
    /// that fails is said; the listing's word on which apps exist stands.
    async fn read_listed(&self, ticket: u64, ns: &str, name: &str) -> bool {
        match self.client.get(ns, name).await {
            Ok(Some(app)) => self.deliver(&app, Origin::Listing(ticket)).await,
            // Gone between the listing and the read: the next listing says so.
            Ok(None) => true,
            Err(e) if e.http_status() == Some(403) => true,
            Err(e) => {
                let why = format!("reading listed Application {ns}/{name} failed: {e}");
                self.send(SourceMsg::Problem(Problem::ReadFailed {
                    app: name.to_string(),
                    why,
                }))
                .await
            }
        }
    }

    async fn read(&self, ticket: u64, app: AppRef) -> bool {
        let ns = app.namespace.clone().unwrap_or_default();
        match self.client.get(&ns, &app.name).await {
            Ok(Some(a)) => self.deliver(&a, Origin::Read(ticket)).await,
            // A 404 is no proof either: an ingress's default backend answers it while Argo CD's
            // server rolls out. Like a 403, the listing decides.
            Ok(None) => {
                let why = format!(
                    "Application {app} answered 404: absent, or the answer did not come from Argo CD's API (an ingress's default backend during a rollout); a listing decides whether it exists"
                );
                self.send(SourceMsg::Problem(Problem::AbsentOrForbidden { app, why }))
                    .await
            }
            Err(e) if e.http_status() == Some(403) => {
                let why = format!(
                    "Application {app} is absent or not permitted to this token (Argo CD answers 403 permission denied for both); a listing decides whether it exists"
                );
                self.send(SourceMsg::Problem(Problem::AbsentOrForbidden { app, why }))
                    .await
            }
            Err(e) => {
                let why = format!("reading Application {} failed: {e}", app.name);
                self.send(SourceMsg::Problem(Problem::ReadFailed {
                    app: app.to_string(),
                    why,
                }))
                .await
            }
        }
    }

    async fn stream_loop(&self) {
        use futures_util::StreamExt;
        let mut backoff = Duration::from_millis(250);
        loop {
            let why = match self.client.stream().await {
                Ok(stream) => {
                    if !self.send(SourceMsg::Connected).await {
                        return;
                    }
                    let mut stream = std::pin::pin!(stream);
                    loop {
                        match stream.next().await {
                            Some(Ok(StreamItem::Event(ev))) => {
                                // Only a stream that delivers resets the back-off: one that is
                                // accepted and closed at once is retried ever more slowly.
                                backoff = Duration::from_millis(250);
                                if !self.on_event(ev.kind, ev.application).await {
                                    return;
                                }
                            }
                            Some(Ok(StreamItem::Heartbeat)) => {
                                if !self.send(SourceMsg::Heartbeat).await {
                                    return;
                                }
                            }
                            Some(Err(e)) => {
                                if !self.send(SourceMsg::Skipped(e.to_string())).await {
                                    return;
                                }
                            }
                            None => break "the stream ended".to_string(),
                        }
                    }
                }
                Err(e) => e.to_string(),
            };
            if !self.send(SourceMsg::Lost(why)).await {
                return;
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    async fn on_event(&self, kind: EventKind, app: Application) -> bool {
        let key = AppKey {
            namespace: app.metadata.namespace.clone(),
            name: app.metadata.name.clone(),
        };
        if kind == EventKind::Deleted {
            let app = AppRef {
                namespace: Some(key.namespace),
                name: key.name,
            };
            return self
                .send(SourceMsg::Absent {
                    app,
                    origin: Origin::Stream,
                })
                .await;
        }
        if !self.is_watched(&key.namespace, &key.name) {
            let g = glimpse(&app, repo_spelling(&self.repo, &app));
            return self
                .send(SourceMsg::Unwatched {
                    key,
                    glimpse: g,
                    origin: Origin::Stream,
                })
                .await;
        }
        // Until the tree is read, the previous observation of this app is no longer current.
        self.send(SourceMsg::Changing(key)).await && self.deliver(&app, Origin::Stream).await
    }
}

/// The spelling of the watched repository to recognize it in `app`'s sources with. URLs are
/// compared after normalization, which cannot know that `./origin.git` and `/srv/origin.git`
/// are one local repository: when the watched repository is a local path and one of the app's
/// sources is a local path to the same directory (the sandbox reports `--repo` as given),
/// that source's spelling is used. Real Argo CD never reports a relative path, so for it this
/// is the given `--repo`.
pub fn repo_spelling<'a>(watched: &'a str, app: &'a Application) -> &'a str {
    let Some(ours) = local_repo_dir(watched) else {
        return watched;
    };
    let spec = &app.spec;
    spec.source
        .iter()
        .chain(spec.sources.iter())
        .map(|s| s.repo_url.as_str())
        .find(|u| local_repo_dir(u).is_some_and(|p| p == ours))
        .unwrap_or(watched)
}

/// The canonical directory of a local repository URL or path; `None` for network URLs.
fn local_repo_dir(url: &str) -> Option<PathBuf> {
    let path = url.strip_prefix("file://").unwrap_or(url);
    if path.is_empty() || path.contains("://") {
        return None;
    }
    // scp-style `host:org/r` is a network URL.
    if let Some((host, _)) = path.split_once(':')
        && !host.contains('/')
    {
        return None;
    }
    std::fs::canonicalize(path).ok()
}
