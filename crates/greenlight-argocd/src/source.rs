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
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How many apps one request for reads reads at once (the confirmations of a due moment that
/// several apps share, the reads a new watch asks for).
pub const READS_IN_FLIGHT: usize = 8;

/// The source. Dropping it stops its tasks.
pub struct ArgoSource {
    client: ArgoClient,
    /// The watched repository as given (`--repo`): the spelling to find among an app's sources.
    repo: String,
    watched: Arc<RwLock<Vec<AppRef>>>,
    seen: Arc<Mutex<StreamSeen>>,
    tx: mpsc::Sender<SourceMsg>,
    tasks: Vec<JoinHandle<()>>,
}

/// What the stream has delivered of the watched apps since it last connected, so that a
/// listing can tell an app the stream already showed as it is from one that changed behind
/// its back. Argo CD's listing cannot carry a resource version (its list selects from a fixed
/// set of fields), so the listing's status fields are compared ([`Fingerprint`]).
#[derive(Default)]
struct StreamSeen {
    /// The fingerprint of each watched app's last observation the stream delivered whole in
    /// the current connection. Cleared at every (re)connection, loss and skipped message; an
    /// app is taken out when it starts changing and put back only when its change is delivered.
    delivered: HashMap<AppKey, Fingerprint>,
    /// The stream's last sign of life (a message or a heartbeat) in the current connection.
    last_life: Option<Instant>,
    /// How long the stream may stay silent and still vouch (`--stale-after`); `None`: a
    /// listing reads every watched app.
    stale_after: Option<Duration>,
}

/// What Argo CD's listing can say of an app's state: its sync status, health (status and
/// message) and last operation's phase and times. Equal to the stream's last delivery, the
/// app is taken as the stream showed it, as the stream's silence is taken; any difference is
/// read whole. A change these fields cannot show (a resource's health under `appTree`, which
/// the stream does not publish either) is found by the read that confirms a due moment.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fingerprint {
    sync: String,
    health: String,
    health_message: String,
    operation: Option<(String, String, String)>,
}

impl Fingerprint {
    fn of(app: &Application) -> Fingerprint {
        let s = &app.status;
        Fingerprint {
            sync: s.sync.status.clone(),
            health: s.health.status.clone(),
            health_message: s.health.message.clone(),
            operation: s
                .operation_state
                .as_ref()
                .map(|o| (o.phase.clone(), o.started_at.clone(), o.finished_at.clone())),
        }
    }
}

impl ArgoSource {
    /// A source whose messages go to `tx`. Nothing runs until [`ArgoSource::start_stream`] or a request.
    pub fn new(client: ArgoClient, repo: &str, tx: mpsc::Sender<SourceMsg>) -> ArgoSource {
        ArgoSource {
            client,
            repo: repo.to_string(),
            watched: Arc::new(RwLock::new(Vec::new())),
            seen: Arc::new(Mutex::new(StreamSeen::default())),
            tx,
            tasks: Vec::new(),
        }
    }

    /// How long the stream may stay silent and still vouch (`--stale-after`). Until this is
    /// given, a listing reads every watched app whole; after, a listing reads only the watched
    /// apps its status fields show changed since the stream's last delivery of them, while the
    /// stream was heard from within `stale_after`.
    pub fn set_stale_after(&self, stale_after: Duration) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.stale_after = Some(stale_after);
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

    /// Fresh reads of `apps`, answered as `Observed` or `Absent` messages, up to
    /// [`READS_IN_FLIGHT`] at once: each answer stands on its own, so their order is not kept.
    pub fn request_read(&mut self, ticket: u64, apps: Vec<AppRef>) {
        use futures_util::StreamExt;
        let worker = self.worker();
        self.spawn(async move {
            let reads = futures_util::stream::iter(apps)
                .map(|app| {
                    let worker = worker.clone();
                    async move { worker.read(ticket, app).await }
                })
                .buffer_unordered(READS_IN_FLIGHT);
            let mut reads = std::pin::pin!(reads);
            while let Some(sent) = reads.next().await {
                if !sent {
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
            seen: self.seen.clone(),
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
    seen: Arc<Mutex<StreamSeen>>,
    tx: mpsc::Sender<SourceMsg>,
}

impl Worker {
    /// Updates what the stream has delivered (a poisoned lock is left alone: then nothing is
    /// taken as unchanged, and every listing reads).
    fn seen(&self, f: impl FnOnce(&mut StreamSeen)) {
        if let Ok(mut seen) = self.seen.lock() {
            f(&mut seen);
        }
    }

    /// Whether a listed app is as the stream last delivered it while heard from within
    /// stale-after: then the listing need not read it.
    fn unchanged_on_stream(&self, app: &Application) -> bool {
        let Ok(seen) = self.seen.lock() else {
            return false;
        };
        let alive = match (seen.last_life, seen.stale_after) {
            (Some(t), Some(stale)) => t.elapsed() <= stale,
            _ => false,
        };
        let key = AppKey {
            namespace: app.metadata.namespace.clone(),
            name: app.metadata.name.clone(),
        };
        alive && seen.delivered.get(&key) == Some(&Fingerprint::of(app))
    }

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
        let key = snap.key();
        let sent = self
            .send(SourceMsg::Observed {
                snapshot: Box::new(snap),
                origin,
                resource_version: app.metadata.resource_version.parse().ok(),
            })
            .await;
        if sent && origin == Origin::Stream {
            let fingerprint = Fingerprint::of(app);
            self.seen(|s| {
                s.delivered.insert(key, fingerprint);
            });
        }
        sent
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
                    // The listing names the apps with their status fields only (to stay small
                    // at scale, so it carries no glimpse of the others); a watched one is read
                    // whole (and with its resource health, which Argo CD re-fills on a read)
                    // unless the stream showed it as the listing does.
                    if self.is_watched(ns, name)
                        && !self.unchanged_on_stream(&item)
                        && !self.read_listed(ticket, ns, name).await
                    {
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
                    self.seen(|s| {
                        s.delivered.clear();
                        s.last_life = Some(Instant::now());
                    });
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
                                self.seen(|s| s.last_life = Some(Instant::now()));
                                if !self.on_event(ev.kind, ev.application).await {
                                    return;
                                }
                            }
                            Some(Ok(StreamItem::Heartbeat)) => {
                                self.seen(|s| s.last_life = Some(Instant::now()));
                                if !self.send(SourceMsg::Heartbeat).await {
                                    return;
                                }
                            }
                            Some(Err(e)) => {
                                // Any app's update may be the one skipped.
                                self.seen(|s| s.delivered.clear());
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
            self.seen(|s| {
                s.delivered.clear();
                s.last_life = None;
            });
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
        // Until this delivery is whole, the app is not as the stream last showed it.
        self.seen(|s| {
            s.delivered.remove(&key);
        });
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

#[cfg(test)]
mod tests {
    use super::*;

    fn app(health: &str, finished_at: &str) -> Application {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "argocd", "resourceVersion": "7"},
            "status": {
                "sync": {"status": "Synced", "revision": "abc"},
                "health": {"status": health},
                "operationState": {"phase": "Succeeded", "startedAt": "2026-12-06T00:00:00Z", "finishedAt": finished_at},
            },
        }))
        .unwrap()
    }

    fn worker() -> Worker {
        let (tx, _rx) = mpsc::channel(1);
        Worker {
            client: ArgoClient::new("http://127.0.0.1:9", None).unwrap(),
            repo: "https://git.example.com/deploy.git".into(),
            watched: Arc::new(RwLock::new(Vec::new())),
            seen: Arc::new(Mutex::new(StreamSeen::default())),
            tx,
        }
    }

    fn delivered(w: &Worker, a: &Application, life: Instant) {
        w.seen(|s| {
            s.delivered.insert(
                AppKey {
                    namespace: "argocd".into(),
                    name: "web".into(),
                },
                Fingerprint::of(a),
            );
            s.last_life = Some(life);
        });
    }

    #[test]
    fn a_listing_skips_only_an_app_the_live_stream_showed_as_the_listing_does() {
        let w = worker();
        let shown = app("Healthy", "2026-12-06T00:00:05Z");
        delivered(&w, &shown, Instant::now());
        // Before --stale-after is known, nothing is taken as unchanged.
        assert!(!w.unchanged_on_stream(&shown));
        w.seen(|s| s.stale_after = Some(Duration::from_secs(30)));
        assert!(w.unchanged_on_stream(&shown));
        // The listing shows another health, or a later operation: read.
        assert!(!w.unchanged_on_stream(&app("Degraded", "2026-12-06T00:00:05Z")));
        assert!(!w.unchanged_on_stream(&app("Healthy", "2026-12-06T00:01:00Z")));
        let mut other = shown.clone();
        other.metadata.name = "api".into();
        assert!(!w.unchanged_on_stream(&other), "never delivered");
        // The stream not heard from within stale-after: its word is no longer current.
        let long_ago = Instant::now().checked_sub(Duration::from_secs(31)).unwrap();
        delivered(&w, &shown, long_ago);
        assert!(!w.unchanged_on_stream(&shown));
    }
}
