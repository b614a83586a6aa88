//! The Kubernetes API as an Application source (`greenlight watch --source kube`): Argo CD's
//! `applications.argoproj.io/v1alpha1` custom resources, listed then watched, decoded with
//! greenlight-argocd's tolerant Application model and reduced by its [`snapshot`], so that a
//! verdict is the same whichever face the Applications were read through. It sends the same
//! [`SourceMsg`]s as the REST source, on the same vouching rules (`greenlight_core::source`):
//!
//! - `Connected` once every watched namespace is listed and its watch is open; `Lost` when one
//!   watch cannot be (re)opened. A watch the apiserver ends (its `timeoutSeconds`,
//!   [`KubeSourceOptions::rewatch`]) is re-opened from the last `resourceVersion`, losing
//!   nothing; each re-opening is a `Heartbeat`: the apiserver answered and had nothing missed.
//! - `Skipped` on `410 Gone` (etcd compacted past the watch's `resourceVersion`): any app may
//!   have changed; the namespace is listed again (apps gone meanwhile are `Absent`).
//! - `Observed` with the object's `resourceVersion`; `Absent` on a delete.
//! - An Application the model cannot read is said by name (`Problem::Unreadable`); the others
//!   are delivered, and a listing holding it is incomplete.
//! - Every [`KubeSourceOptions::resync`] the namespace is listed again as a safety net: an app
//!   whose `resourceVersion` differs from the watch's last delivery is a missed update
//!   (`Skipped`, then delivered).
//!
//! Why not kube-runtime's `watcher`: it re-opens a watch silently, and the vouching rules need
//! to know when a resumed watch is open again (`Connected`) and alive (`Heartbeat`); the list
//! and watch calls are kube's own.
//!
//! Per-resource health: Argo CD ≥ 3.0 keeps it out of the custom resource (`appTree`). When an
//! Application carries none, its resource tree is read from Argo CD's API when an Argo CD client
//! is given (`--argocd-url`); otherwise the snapshot says `ResourceHealthSource::Unavailable`
//! and the judge uses the app-level health, which its reasons say.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures_util::StreamExt;
use greenlight_argocd::model::Application;
use greenlight_argocd::snapshot::{glimpse, leave_out_ignored, needs_managed_resources};
use greenlight_argocd::{ArgoClient, needs_resource_tree, repo_spelling, snapshot};
use greenlight_core::directive::AppRef;
use greenlight_core::snapshot::AppKey;
use greenlight_core::source::{Origin, Problem, SourceMsg};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, WatchParams};
use kube::core::WatchEvent;
use kube::{Client, ResourceExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How the source reads.
#[derive(Clone)]
pub struct KubeSourceOptions {
    /// The namespaces to watch; empty: all namespaces.
    pub namespaces: Vec<String>,
    /// How often each namespace is listed again as a safety net (`--resync-interval`).
    pub resync: Duration,
    /// The `timeoutSeconds` of each watch: the apiserver ends it then and it is re-opened from
    /// its `resourceVersion` (a heartbeat).
    pub rewatch: Duration,
    /// Argo CD's API, for the resource tree of an Application that carries no per-resource
    /// health.
    pub argocd: Option<ArgoClient>,
}

impl Default for KubeSourceOptions {
    fn default() -> Self {
        KubeSourceOptions {
            namespaces: Vec::new(),
            resync: Duration::from_secs(300),
            rewatch: Duration::from_secs(10),
            argocd: None,
        }
    }
}

/// Argo CD's Application resource.
pub fn application_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("argoproj.io", "v1alpha1", "Application"),
        "applications",
    )
}

/// The source. Dropping it stops its tasks.
pub struct KubeSource {
    worker: Worker,
    tasks: Vec<JoinHandle<()>>,
}

/// What one task of the source needs.
#[derive(Clone)]
struct Worker {
    client: Client,
    opts: Arc<KubeSourceOptions>,
    repo: String,
    watched: Arc<RwLock<Vec<AppRef>>>,
    tx: mpsc::Sender<SourceMsg>,
    /// Which namespace watches are open; `Connected` is said when all are.
    open: Arc<Mutex<HashSet<usize>>>,
}

impl KubeSource {
    /// A source of `repo`'s Applications read with `client`, whose messages go to `tx`.
    /// Nothing runs until [`KubeSource::start_stream`] or a request.
    pub fn new(
        client: Client,
        repo: &str,
        opts: KubeSourceOptions,
        tx: mpsc::Sender<SourceMsg>,
    ) -> KubeSource {
        KubeSource {
            worker: Worker {
                client,
                opts: Arc::new(opts),
                repo: repo.to_string(),
                watched: Arc::new(RwLock::new(Vec::new())),
                tx,
                open: Arc::new(Mutex::new(HashSet::new())),
            },
            tasks: Vec::new(),
        }
    }

    /// Whether resource trees are read from Argo CD's API.
    pub fn reads_resource_trees(&self) -> bool {
        self.worker.opts.argocd.is_some()
    }

    /// One list-then-watch per namespace (one for all namespaces when none is named).
    pub fn start_stream(&mut self) {
        for (idx, api) in self.worker.apis().into_iter().enumerate() {
            let w = self.worker.clone();
            self.tasks
                .push(tokio::spawn(async move { w.watch_loop(idx, api).await }));
        }
    }

    /// Which apps are watched: only their observations are delivered.
    pub fn set_watched(&self, apps: Vec<AppRef>) {
        if let Ok(mut w) = self.worker.watched.write() {
            *w = apps;
        }
    }

    /// A complete listing, answered as the watched apps' `Observed` messages, then `Listed`.
    pub fn request_listing(&mut self, ticket: u64) {
        let w = self.worker.clone();
        self.spawn(async move { w.listing(ticket).await });
    }

    /// Fresh reads of `apps`, answered as `Observed` or `Absent` messages.
    pub fn request_read(&mut self, ticket: u64, apps: Vec<AppRef>) {
        let w = self.worker.clone();
        self.spawn(async move {
            for app in apps {
                if !w.read(ticket, app).await {
                    return;
                }
            }
        });
    }

    fn spawn(&mut self, f: impl std::future::Future<Output = ()> + Send + 'static) {
        self.tasks.retain(|t| !t.is_finished());
        self.tasks.push(tokio::spawn(f));
    }
}

impl Drop for KubeSource {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Where a namespace scope is: `namespace` or "all namespaces".
fn scope(ns: Option<&str>) -> String {
    match ns {
        Some(ns) => format!("namespace {ns}"),
        None => "all namespaces".to_string(),
    }
}

fn is_gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 410)
}

/// An apiserver error in a few words: its status line when it sent one.
fn describe(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
        other => other.to_string(),
    }
}

fn key_of(obj: &DynamicObject) -> AppKey {
    AppKey {
        namespace: obj.namespace().unwrap_or_default(),
        name: obj.name_any(),
    }
}

/// An object as Argo CD's Application model reads it, or why it cannot be read (naming it).
pub(crate) fn decode(obj: &DynamicObject) -> Result<Application, String> {
    let key = key_of(obj);
    let named = |why: String| {
        format!(
            "Application {}/{} could not be read: {why}",
            key.namespace, key.name
        )
    };
    let value = serde_json::to_value(obj).map_err(|e| named(e.to_string()))?;
    serde_path_to_error::deserialize(value)
        .map_err(|e| named(format!("at {}: {}", e.path(), e.inner())))
}

impl Worker {
    /// The Api of each namespace watched (one for all namespaces when none is named).
    fn apis(&self) -> Vec<(Option<String>, Api<DynamicObject>)> {
        let ar = application_resource();
        if self.opts.namespaces.is_empty() {
            return vec![(None, Api::all_with(self.client.clone(), &ar))];
        }
        self.opts
            .namespaces
            .iter()
            .map(|ns| {
                (
                    Some(ns.clone()),
                    Api::namespaced_with(self.client.clone(), ns, &ar),
                )
            })
            .collect()
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

    /// Namespace watch `idx` is open: `Connected` when every one is.
    async fn opened(&self, idx: usize) -> bool {
        let all = {
            let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
            let new = open.insert(idx);
            new && open.len() == self.apis_len()
        };
        !all || self.send(SourceMsg::Connected).await
    }

    /// Namespace watch `idx` is down.
    async fn lost(&self, idx: usize, why: String) -> bool {
        {
            let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
            open.remove(&idx);
        }
        self.send(SourceMsg::Lost(why)).await
    }

    fn apis_len(&self) -> usize {
        self.opts.namespaces.len().max(1)
    }

    /// Complete an app with its resource tree where needed and deliver it. An incomplete
    /// observation is reported as a problem, never delivered as if it were whole.
    async fn deliver(&self, app: &Application, origin: Origin) -> bool {
        let (ns, name) = (&app.metadata.namespace, &app.metadata.name);
        let argocd = self.opts.argocd.as_ref();
        let tree = match argocd {
            Some(client) if needs_resource_tree(app) => {
                match client.resource_tree(ns, name).await {
                    Ok(t) => t,
                    Err(e) => {
                        let why = format!("resource tree of {ns}/{name} unavailable: {e}");
                        return self.incomplete(ns, name, why).await;
                    }
                }
            }
            _ => None,
        };
        let spelling = repo_spelling(&self.repo, app);
        let mut snap = snapshot(app, tree.as_ref(), spelling);
        if let Some(client) = argocd
            && needs_managed_resources(app, &snap)
        {
            match client.managed_resources(ns, name).await {
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

    async fn incomplete(&self, ns: &str, name: &str, why: String) -> bool {
        let app = AppKey {
            namespace: ns.to_string(),
            name: name.to_string(),
        };
        self.send(SourceMsg::Problem(Problem::Incomplete { app, why }))
            .await
    }

    async fn unreadable(&self, why: String) -> bool {
        self.send(SourceMsg::Problem(Problem::Unreadable(why)))
            .await
    }

    /// An object the watch delivered.
    async fn on_applied(&self, obj: &DynamicObject) -> bool {
        let app = match decode(obj) {
            Ok(app) => app,
            Err(why) => return self.unreadable(why).await,
        };
        let key = key_of(obj);
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

    async fn on_deleted(&self, key: AppKey) -> bool {
        let app = AppRef {
            namespace: Some(key.namespace),
            name: key.name,
        };
        self.send(SourceMsg::Absent {
            app,
            origin: Origin::Stream,
        })
        .await
    }

    /// List, then watch from the listing's `resourceVersion`, for ever. `known` holds each app
    /// the stream delivered with its `resourceVersion`.
    async fn watch_loop(&self, idx: usize, (ns, api): (Option<String>, Api<DynamicObject>)) {
        let where_ = scope(ns.as_deref());
        let mut known: HashMap<AppKey, String> = HashMap::new();
        let mut backoff = Duration::from_millis(250);
        'relist: loop {
            let list = match api.list(&ListParams::default()).await {
                Ok(l) => l,
                Err(e) => {
                    let why = format!("listing Applications in {where_} failed: {}", describe(&e));
                    if !self.lost(idx, why).await {
                        return;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            backoff = Duration::from_millis(250);
            let mut rv = list.metadata.resource_version.clone().unwrap_or_default();
            // A relist after a gap: what changed is delivered and what is gone is absent.
            // Said as a missed update when the stream did not see it (a resync).
            if !self.take_listing(idx, &list.items, &mut known).await {
                return;
            }
            let mut resync_at = tokio::time::Instant::now() + self.opts.resync;
            loop {
                let wp = WatchParams::default().timeout(self.opts.rewatch.as_secs().max(1) as u32);
                let stream = tokio::select! {
                    s = api.watch(&wp, &rv) => s,
                    _ = tokio::time::sleep_until(resync_at) => {
                        if !self.resync(&api, &where_, &mut known, &rv).await {
                            return;
                        }
                        resync_at = tokio::time::Instant::now() + self.opts.resync;
                        continue;
                    }
                };
                let stream = match stream {
                    Ok(s) => s,
                    Err(e) if is_gone(&e) => {
                        let why = format!(
                            "the watch of Applications in {where_} is gone (410: its resourceVersion {rv} was compacted); listing again"
                        );
                        if !self.send(SourceMsg::Skipped(why)).await {
                            return;
                        }
                        continue 'relist;
                    }
                    Err(e) => {
                        let why =
                            format!("watching Applications in {where_} failed: {}", describe(&e));
                        if !self.lost(idx, why).await {
                            return;
                        }
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                        continue;
                    }
                };
                // Open, resumed from `rv`: nothing since it was missed. Still open since the
                // last one: a heartbeat; open again after a loss: connected.
                let said = if self.open_now(idx) {
                    self.send(SourceMsg::Heartbeat).await
                } else {
                    self.opened(idx).await
                };
                if !said {
                    return;
                }
                let mut stream = std::pin::pin!(stream);
                loop {
                    let item = tokio::select! {
                        item = stream.next() => item,
                        _ = tokio::time::sleep_until(resync_at) => {
                            if !self.resync(&api, &where_, &mut known, &rv).await {
                                return;
                            }
                            resync_at = tokio::time::Instant::now() + self.opts.resync;
                            continue;
                        }
                    };
                    match item {
                        Some(Ok(WatchEvent::Added(obj) | WatchEvent::Modified(obj))) => {
                            // Only a watch that delivers resets the back-off (as the REST
                            // source's stream), and a listing that answered.
                            backoff = Duration::from_millis(250);
                            rv = obj.resource_version().unwrap_or_else(|| rv.clone());
                            known.insert(key_of(&obj), rv.clone());
                            if !self.on_applied(&obj).await {
                                return;
                            }
                        }
                        Some(Ok(WatchEvent::Deleted(obj))) => {
                            rv = obj.resource_version().unwrap_or_else(|| rv.clone());
                            let key = key_of(&obj);
                            known.remove(&key);
                            if !self.on_deleted(key).await {
                                return;
                            }
                        }
                        Some(Ok(WatchEvent::Bookmark(b))) => {
                            rv = b.metadata.resource_version;
                            if !self.send(SourceMsg::Heartbeat).await {
                                return;
                            }
                        }
                        Some(Ok(WatchEvent::Error(s))) if s.code == 410 => {
                            let why = format!(
                                "the watch of Applications in {where_} is gone (410 {}: {}); listing again",
                                s.reason, s.message
                            );
                            if !self.send(SourceMsg::Skipped(why)).await {
                                return;
                            }
                            continue 'relist;
                        }
                        Some(Ok(WatchEvent::Error(s))) => {
                            let why = format!(
                                "the watch of Applications in {where_} ended with {} {}: {}",
                                s.code, s.reason, s.message
                            );
                            if !self.lost(idx, why).await {
                                return;
                            }
                            break;
                        }
                        Some(Err(e)) => {
                            let why = format!(
                                "the watch of Applications in {where_} broke: {}",
                                describe(&e)
                            );
                            if !self.lost(idx, why).await {
                                return;
                            }
                            tokio::time::sleep(backoff).await;
                            backoff = (backoff * 2).min(Duration::from_secs(5));
                            break;
                        }
                        // The apiserver ended the watch at its timeout: re-open from `rv`.
                        None => break,
                    }
                }
            }
        }
    }

    fn open_now(&self, idx: usize) -> bool {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&idx)
    }

    /// A fresh listing of the namespace taken into the stream: on the first one and after a
    /// gap, the watch (re)connects with it. Apps gone since are `Absent`.
    async fn take_listing(
        &self,
        idx: usize,
        items: &[DynamicObject],
        known: &mut HashMap<AppKey, String>,
    ) -> bool {
        // A (re)listing opens the stream anew: nothing is vouched for until the runtime's own
        // listing after this `Connected`.
        {
            let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
            open.remove(&idx);
        }
        if !self.opened(idx).await {
            return false;
        }
        let mut seen = HashSet::new();
        for obj in items {
            let key = key_of(obj);
            seen.insert(key.clone());
            known.insert(key, obj.resource_version().unwrap_or_default());
            if !self.on_applied(obj).await {
                return false;
            }
        }
        let gone: Vec<AppKey> = known
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            known.remove(&key);
            if !self.on_deleted(key).await {
                return false;
            }
        }
        true
    }

    /// The safety net: list the namespace again; an app the watch did not deliver as it is now
    /// (changed, new or gone) is a missed update: `Skipped`, then delivered.
    async fn resync(
        &self,
        api: &Api<DynamicObject>,
        where_: &str,
        known: &mut HashMap<AppKey, String>,
        rv: &str,
    ) -> bool {
        let list = match api.list(&ListParams::default()).await {
            Ok(l) => l,
            // The watch stays; the next resync tries again.
            Err(_) => return true,
        };
        let now: HashMap<AppKey, String> = list
            .items
            .iter()
            .map(|o| (key_of(o), o.resource_version().unwrap_or_default()))
            .collect();
        // Versions newer than the watch's position are the watch's to deliver next.
        let ahead = |v: &str| match (v.parse::<u64>(), rv.parse::<u64>()) {
            (Ok(v), Ok(at)) => v > at,
            _ => false,
        };
        let missed: Vec<&DynamicObject> = list
            .items
            .iter()
            .filter(|o| {
                let v = o.resource_version().unwrap_or_default();
                !ahead(&v) && known.get(&key_of(o)) != Some(&v)
            })
            .collect();
        let gone: Vec<AppKey> = known
            .keys()
            .filter(|k| !now.contains_key(*k))
            .cloned()
            .collect();
        let list_rv: u64 = list
            .metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let gone: Vec<AppKey> = if list_rv > rv.parse().unwrap_or(u64::MAX) {
            // Deletions after the watch's position are the watch's to deliver.
            Vec::new()
        } else {
            gone
        };
        if missed.is_empty() && gone.is_empty() {
            return true;
        }
        let why = format!(
            "a resync of Applications in {where_} found {} the watch did not deliver",
            missed
                .iter()
                .map(|o| o.name_any())
                .chain(gone.iter().map(|k| k.name.clone()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if !self.send(SourceMsg::Skipped(why)).await {
            return false;
        }
        for obj in missed {
            known.insert(key_of(obj), obj.resource_version().unwrap_or_default());
            if !self.on_applied(obj).await {
                return false;
            }
        }
        for key in gone {
            known.remove(&key);
            if !self.on_deleted(key).await {
                return false;
            }
        }
        true
    }

    async fn listing(&self, ticket: u64) {
        let mut present = Vec::new();
        let mut complete = true;
        for (ns, api) in self.apis() {
            let list = match api.list(&ListParams::default()).await {
                Ok(l) => l,
                Err(e) => {
                    let why = format!(
                        "listing Applications in {} failed: {}",
                        scope(ns.as_deref()),
                        describe(&e)
                    );
                    self.send(SourceMsg::ListingFailed { ticket, why }).await;
                    return;
                }
            };
            for obj in &list.items {
                let key = key_of(obj);
                present.push(key.clone());
                match decode(obj) {
                    Ok(app) => {
                        let origin = Origin::Listing(ticket);
                        let sent = if self.is_watched(&key.namespace, &key.name) {
                            self.deliver(&app, origin).await
                        } else {
                            // Its glimpse: a wait's first listing is the app before its commit.
                            let glimpse = glimpse(&app, repo_spelling(&self.repo, &app));
                            self.send(SourceMsg::Unwatched {
                                key,
                                glimpse,
                                origin,
                            })
                            .await
                        };
                        if !sent {
                            return;
                        }
                    }
                    Err(why) => {
                        complete = false;
                        if !self.unreadable(why).await {
                            return;
                        }
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

    async fn read(&self, ticket: u64, app: AppRef) -> bool {
        let ar = application_resource();
        let objects: Result<Vec<DynamicObject>, kube::Error> = match &app.namespace {
            Some(ns) => Api::<DynamicObject>::namespaced_with(self.client.clone(), ns, &ar)
                .get_opt(&app.name)
                .await
                .map(|o| o.into_iter().collect()),
            None => {
                // No namespace named: the app of that name in the namespaces watched.
                let lp = ListParams::default().fields(&format!("metadata.name={}", app.name));
                let mut all = Vec::new();
                let mut err = None;
                for (_, api) in self.apis() {
                    match api.list(&lp).await {
                        Ok(l) => all.extend(l.items),
                        Err(e) => {
                            err = Some(e);
                            break;
                        }
                    }
                }
                match err {
                    Some(e) => Err(e),
                    None => Ok(all),
                }
            }
        };
        match objects {
            Ok(objs) if objs.is_empty() => {
                self.send(SourceMsg::Absent {
                    app,
                    origin: Origin::Read(ticket),
                })
                .await
            }
            Ok(objs) => {
                for obj in objs {
                    let ok = match decode(&obj) {
                        Ok(a) => self.deliver(&a, Origin::Read(ticket)).await,
                        Err(why) => self.unreadable(why).await,
                    };
                    if !ok {
                        return false;
                    }
                }
                true
            }
            Err(e) => {
                let why = format!("reading Application {app} failed: {}", describe(&e));
                self.send(SourceMsg::Problem(Problem::ReadFailed {
                    app: app.to_string(),
                    why,
                }))
                .await
            }
        }
    }
}
