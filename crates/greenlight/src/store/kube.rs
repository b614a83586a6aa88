//! The cluster store (`--store kube`): the watchdog's state as custom resources in one
//! namespace, for a Deployment of two replicas of which one leads (docs/state.md).
//!
//! - One `Watch` object (`watches.greenlight.dev`) a watch: `record.body` is the watch's record
//!   exactly as the state file keeps it (`store::record`), beside the fields `kubectl get
//!   watches` prints, and `history`, the watch's newest events (at most [`WATCH_HISTORY`]).
//! - One `Watchdog` object (`watchdogs.greenlight.dev`) an installation (`--store-name`):
//!   repository, branch, baseline, tip, the breaker's record, a pending breaker reset,
//!   `memory` (idle observations and arrived commits, as JSON) and the events that belong to no
//!   watch (at most [`WATCHDOG_HISTORY`]).
//!
//! **One writer.** Every update is a PUT carrying the `resourceVersion` this store last read or
//! wrote for that object; a `409 Conflict` (or `AlreadyExists` on the create of an object it did
//! not know) means another writer — a second leader — touched the object, and the write stops
//! with an error that says so; it is never retried over someone else's write. The one field
//! another writer may set is `state.breakerResetRequestedAt` (`greenlight breaker reset`, a
//! merge patch): a conflict on the Watchdog is retried once when the object differs from what
//! this store last saw in that field alone.
//!
//! **A step's write order.** The apiserver has no transaction over several objects, so a step
//! ([`Write`]) is written in an order where a crash between two object writes loses no verdict
//! and pushes no second revert (the runtime announces and pushes nothing before `write`
//! returns):
//!
//! 1. the Watchdog's breaker (and the cleared reset request), when they changed: a crash after
//!    it has counted a revert whose watch is not recorded yet, so the breaker errs closed;
//! 2. each Watch object, with its new events in its `history` (one object write: a verdict and
//!    its event are never apart);
//! 3. the Watchdog's tip, baseline, memory and the events of no watch, last: a crash before it
//!    leaves the tip behind, so the commits after it are delivered again, and the watches
//!    recorded in (2) — their ids — keep a second watch from starting; a revert already pushed
//!    is adopted by its `Revert-of` trailer.
//!
//! (1) and (3) are skipped when nothing of theirs changed.
//!
//! **Bounds.** An object is at most about 1.5 MiB in etcd. `memory` is kept under
//! [`MEMORY_LIMIT`] bytes of JSON: the oldest arrived commits are dropped first (a batch through
//! a dropped commit is unknown, so no revert: it fails closed); idle observations are never
//! dropped silently — when they alone exceed the limit the write fails naming their size.
//!
//! The trait is synchronous and the runtime calls it from inside its tokio runtime: each
//! request runs on this store's own small runtime, driven from a scoped thread, so the caller's
//! runtime is never blocked on itself.

use super::record::{BreakerRecord, WatchRecord};
use super::{
    Exported, Loaded, PRUNE_EVERY_MS, Pruned, Resume, Store, Summary, Write, count_unreadable,
    summarize_pruned,
};
use anyhow::{Context, Result, anyhow, bail};
use greenlight_core::breaker::Breaker;
use greenlight_core::event::Event;
use greenlight_core::judge::{ARRIVED_KEPT, Arrived, Idle, State, Watch};
use greenlight_core::snapshot::AppKey;
use greenlight_core::tape::{Recording, Step};
use greenlight_core::time::Timestamp;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, Preconditions,
};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::Path;

/// The events kept on a Watch object (the CRD's `maxItems`).
pub const WATCH_HISTORY: usize = 32;
/// The events of no watch kept on the Watchdog (the CRD's `maxItems`).
pub const WATCHDOG_HISTORY: usize = 64;
/// The most JSON `memory` (idle + arrived) may hold, in bytes.
pub const MEMORY_LIMIT: usize = 800 * 1024;
/// The version of the objects' shape this build writes (`state.schemaVersion`).
pub const KUBE_SCHEMA_VERSION: i64 = 1;

const GROUP: &str = "greenlight.dev";
const VERSION: &str = "v1alpha1";
const WATCHES: &str = "watches.greenlight.dev";
const WATCHDOGS: &str = "watchdogs.greenlight.dev";
const LABEL_STORE: &str = "greenlight.dev/store";
const LABEL_LIVE: &str = "greenlight.dev/live";
const CRDS: &str = "helm install, or kubectl apply -f deploy/helm/greenlight/crds/";
const LIST_PAGE: u32 = 500;

fn watch_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, "Watch"), "watches")
}

fn watchdog_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, VERSION, "Watchdog"),
        "watchdogs",
    )
}

/// The Watch object name of a watch id: `<commit>:<n>` → `<commit>-<n>`, `~<k>` → `-r<k>`,
/// lower case; any other character outside `[a-z0-9.-]` becomes `-` (the real id is in
/// `record.id`).
pub fn object_name(id: &str) -> String {
    let mut out = String::with_capacity(id.len() + 2);
    for c in id.chars() {
        match c {
            ':' => out.push('-'),
            '~' => out.push_str("-r"),
            c if c.is_ascii_alphanumeric() || c == '.' || c == '-' => {
                out.push(c.to_ascii_lowercase())
            }
            _ => out.push('-'),
        }
    }
    let trimmed = out.trim_matches(|c: char| c == '-' || c == '.');
    let mut name: String = trimmed.chars().take(253).collect();
    if name.is_empty() {
        name = "watch".into();
    }
    name
}

/// What a request was doing, for its error.
#[derive(Clone, Copy)]
enum Verb {
    Get,
    List,
    Create,
    Update,
    Patch,
    Delete,
}

impl Verb {
    fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
        }
    }
}

fn is_api(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// A 404 about the object itself (the type is served): the apiserver names the object.
fn is_object_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404
        && s.details.as_ref().is_some_and(|d| !d.name.is_empty()))
}

/// A watch as written in the kube store: its object name, the resourceVersion this store last
/// read or wrote, and the object itself when this store keeps it (live watches and those it
/// wrote; a finished watch known by id only is read again before it is written).
struct Known {
    id: String,
    rv: String,
    obj: Option<DynamicObject>,
}

/// A Watch object to write: `base` is the object as last seen (`None`: to create).
struct WatchObject {
    name: String,
    base: Option<DynamicObject>,
    data: Value,
    labels: BTreeMap<String, String>,
    live: bool,
}

/// The cluster store. See the module documentation.
pub struct KubeStore {
    /// Always `Some` until dropped (taken to shut it down without blocking).
    rt: Option<tokio::runtime::Runtime>,
    namespace: String,
    name: String,
    watches: Api<DynamicObject>,
    watchdogs: Api<DynamicObject>,
    /// The Watchdog as last read or written; `None` until read, `Some(None)` when it does not
    /// exist.
    dog: Option<Option<DynamicObject>>,
    /// The Watch objects this store knows, by object name.
    known: BTreeMap<String, Known>,
    last_pruned_at: Option<Timestamp>,
    /// Tape steps of watches not written since they were recorded, by id: each goes with its
    /// watch's next write (a step that changed nothing in the watch is all a crash loses,
    /// and a replay needs none such: `docs/why.md#stores`).
    pending_tapes: BTreeMap<String, (usize, Vec<Step>)>,
}

impl Drop for KubeStore {
    fn drop(&mut self) {
        // A runtime dropped inside another runtime's context would panic; this never blocks.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("greenlight-kube-store")
        .enable_all()
        .build()
        .context("cannot start the cluster store's runtime")
}

/// `fut` run to its end on `rt`, from a thread of its own (the caller may be inside a runtime,
/// where `block_on` is not allowed). A panic in it is an error, never the caller's panic.
fn run_on<T: Send>(rt: &tokio::runtime::Runtime, fut: impl Future<Output = T> + Send) -> Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| rt.block_on(fut))
            .join()
            .map_err(|_| anyhow!("a request of the cluster store panicked"))
    })
}

impl KubeStore {
    /// The store `name` in `namespace` (the client's default namespace when `None`), with a
    /// client built from `kubeconfig` (else `$KUBECONFIG`, `~/.kube/config`, the pod's service
    /// account) on this store's own runtime. A configuration that cannot be used is a usage
    /// error naming what was tried.
    pub fn connect(
        kubeconfig: Option<&Path>,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<KubeStore> {
        let rt = runtime()?;
        let config = run_on(&rt, greenlight_kube::client::config(kubeconfig))?
            .map_err(|e| crate::usage(format!("--store kube: {e}")))?;
        Self::open_on(rt, config, namespace, name)
    }

    /// [`KubeStore::connect`] with a configuration already read.
    pub fn open(config: kube::Config, namespace: Option<&str>, name: &str) -> Result<KubeStore> {
        Self::open_on(runtime()?, config, namespace, name)
    }

    fn open_on(
        rt: tokio::runtime::Runtime,
        config: kube::Config,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<KubeStore> {
        if crate::kube::dns_label(name).is_err() {
            return Err(crate::usage(format!(
                "--store-name {name:?}: a store name is a DNS label (lower-case letters, digits and '-', at most 63)"
            )));
        }
        let namespace = match namespace {
            Some("") => {
                return Err(crate::usage(
                    "--store-namespace: empty; leave it out for the client's default namespace",
                ));
            }
            Some(ns) => ns.to_string(),
            None => config.default_namespace.clone(),
        };
        let cluster = config.cluster_url.to_string();
        // The client is built on this store's runtime: its connection tasks live there.
        let client = run_on(&rt, async move { kube::Client::try_from(config) })?
            .map_err(|e| anyhow!("Kubernetes client for {cluster}: {e}"))?;
        let watches = Api::namespaced_with(client.clone(), &namespace, &watch_resource());
        let watchdogs = Api::namespaced_with(client, &namespace, &watchdog_resource());
        Ok(KubeStore {
            rt: Some(rt),
            namespace,
            name: name.to_string(),
            watches,
            watchdogs,
            dog: None,
            known: BTreeMap::new(),
            last_pruned_at: None,
            pending_tapes: BTreeMap::new(),
        })
    }

    /// The namespace the objects are in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn run<T: Send>(&self, fut: impl Future<Output = T> + Send) -> Result<T> {
        run_on(self.rt.as_ref().expect("the runtime lives until drop"), fut)
    }

    fn dog_object(&self) -> String {
        format!("{WATCHDOGS} {}/{}", self.namespace, self.name)
    }

    fn watch_object(&self, name: &str) -> String {
        format!("{WATCHES} {}/{name}", self.namespace)
    }

    /// `e` in words: the object, what was done, and what to do about it.
    fn api_error(&self, e: kube::Error, verb: Verb, resource: &str, object: &str) -> anyhow::Error {
        let ns = &self.namespace;
        match &e {
            kube::Error::Api(s) if s.code == 403 => anyhow!(
                "{object}: the service account may not {} {resource} in namespace {ns}: see the chart's RBAC (docs/state.md#rbac): {}",
                verb.as_str(),
                s.message
            ),
            kube::Error::Api(_) if is_api(&e, 404) && !is_object_not_found(&e) => {
                anyhow!("{object}: the CRD {resource} is not installed: {CRDS}")
            }
            kube::Error::Api(s) if s.code == 409 => self.conflict(object, &s.message),
            kube::Error::Api(s) => anyhow!(
                "{object}: {} failed: {} {}: {}",
                verb.as_str(),
                s.code,
                s.reason,
                s.message
            ),
            _ => anyhow!("{object}: {} failed: {e}", verb.as_str()),
        }
    }

    fn conflict(&self, object: &str, detail: &str) -> anyhow::Error {
        anyhow!(
            "another writer changed {object} since this greenlight read or wrote it ({detail}): is a second greenlight leading? this replica stops"
        )
    }

    // ------------------------------------------------------------------ the Watchdog

    /// The Watchdog as last seen, read when not yet.
    fn dog(&mut self) -> Result<Option<DynamicObject>> {
        if let Some(d) = &self.dog {
            return Ok(d.clone());
        }
        let d = self.get_dog()?;
        self.dog = Some(d.clone());
        Ok(d)
    }

    fn get_dog(&self) -> Result<Option<DynamicObject>> {
        let api = self.watchdogs.clone();
        let name = self.name.clone();
        match self.run(async move { api.get(&name).await })? {
            Ok(o) => Ok(Some(o)),
            Err(e) if is_object_not_found(&e) => Ok(None),
            Err(e) => Err(self.api_error(e, Verb::Get, WATCHDOGS, &self.dog_object())),
        }
    }

    /// The Watchdog must exist (`status`, `breaker reset`): an error naming it otherwise.
    pub fn require_existing(&mut self) -> Result<()> {
        self.dog = None;
        if self.dog()?.is_none() {
            bail!(
                "{} does not exist (is this the --store-namespace and --store-name the watchdog runs with?)",
                self.dog_object()
            );
        }
        Ok(())
    }

    /// Writes `data` as the Watchdog's content (state, memory, history): a create when it does
    /// not exist, else a PUT with the resourceVersion last seen. See the module documentation
    /// for the one conflict retried.
    fn put_dog(&mut self, data: Value) -> Result<()> {
        let object = self.dog_object();
        match self.dog()? {
            None => {
                let obj = DynamicObject::new(&self.name, &watchdog_resource())
                    .within(&self.namespace)
                    .data(data);
                let mut obj = obj;
                obj.metadata.labels = Some(
                    [(
                        "app.kubernetes.io/name".to_string(),
                        "greenlight".to_string(),
                    )]
                    .into(),
                );
                let api = self.watchdogs.clone();
                match self.run(async move { api.create(&PostParams::default(), &obj).await })? {
                    Ok(o) => {
                        self.dog = Some(Some(o));
                        Ok(())
                    }
                    Err(e) if is_api(&e, 409) => {
                        Err(self.conflict(&object, "it was created meanwhile"))
                    }
                    Err(e) => Err(self.api_error(e, Verb::Create, WATCHDOGS, &object)),
                }
            }
            // Nothing changed (a fetch that found the same tip): no write.
            Some(last) if last.data == data => Ok(()),
            Some(last) => {
                let mut obj = last.clone();
                obj.data = data;
                match self.replace_dog(&obj)? {
                    Ok(o) => {
                        self.dog = Some(Some(o));
                        Ok(())
                    }
                    Err(e) if is_api(&e, 409) => {
                        let Some(now) = self.get_dog()? else {
                            return Err(self.conflict(&object, "it was deleted"));
                        };
                        if !only_requested(&last.data, &now.data) {
                            return Err(self.conflict(&object, "its content differs"));
                        }
                        // Only a breaker reset request came meanwhile: keep it unless this
                        // write clears it.
                        let mut obj = obj;
                        obj.metadata.resource_version = now.metadata.resource_version.clone();
                        let requested = now.data["state"].get("breakerResetRequestedAt").cloned();
                        let clears = last.data["state"].get("breakerResetRequestedAt").is_some()
                            && obj.data["state"].get("breakerResetRequestedAt").is_none();
                        if let (Some(at), false) = (requested, clears) {
                            state_mut(&mut obj.data).insert("breakerResetRequestedAt".into(), at);
                        }
                        match self.replace_dog(&obj)? {
                            Ok(o) => {
                                self.dog = Some(Some(o));
                                Ok(())
                            }
                            Err(e) => Err(self.api_error(e, Verb::Update, WATCHDOGS, &object)),
                        }
                    }
                    Err(e) => Err(self.api_error(e, Verb::Update, WATCHDOGS, &object)),
                }
            }
        }
    }

    fn replace_dog(&self, obj: &DynamicObject) -> Result<Result<DynamicObject, kube::Error>> {
        let api = self.watchdogs.clone();
        let name = self.name.clone();
        let obj = obj.clone();
        self.run(async move { api.replace(&name, &PostParams::default(), &obj).await })
    }

    fn dog_data(&mut self) -> Result<Value> {
        Ok(self
            .dog()?
            .map(|d| d.data)
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({})))
    }

    fn breaker_of(&self, data: &Value) -> Result<Breaker> {
        match data["state"]["breaker"].as_str() {
            Some(b) => Ok(BreakerRecord::parse(b)
                .with_context(|| {
                    format!("the breaker record in {} cannot be read", self.dog_object())
                })?
                .into()),
            None => Ok(Breaker::default()),
        }
    }

    fn check_schema(&self, data: &Value) -> Result<()> {
        if let Some(v) = data["state"]["schemaVersion"].as_i64()
            && v > KUBE_SCHEMA_VERSION
        {
            bail!(
                "{} has state schema version {v}; this greenlight understands versions up to {KUBE_SCHEMA_VERSION} (a newer greenlight wrote it; run that one)",
                self.dog_object()
            );
        }
        Ok(())
    }

    // ------------------------------------------------------------------ Watch objects

    /// Every Watch object of this store (`selector` added to the store's label), page by page.
    fn list_watches(&self, selector: Option<&str>) -> Result<Vec<DynamicObject>> {
        let mut labels = format!("{LABEL_STORE}={}", self.name);
        if let Some(s) = selector {
            labels.push(',');
            labels.push_str(s);
        }
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut lp = ListParams::default().labels(&labels).limit(LIST_PAGE);
            if let Some(t) = &token {
                lp = lp.continue_token(t);
            }
            let api = self.watches.clone();
            let page = self.run(async move { api.list(&lp).await })?.map_err(|e| {
                self.api_error(
                    e,
                    Verb::List,
                    WATCHES,
                    &format!("{WATCHES} in namespace {}", self.namespace),
                )
            })?;
            out.extend(page.items);
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// The watch in object `obj`, or an error naming it.
    fn watch_of(&self, obj: &DynamicObject) -> Result<Watch> {
        let name = obj.metadata.name.clone().unwrap_or_default();
        let body = obj.data["record"]["body"]
            .as_str()
            .ok_or_else(|| anyhow!("it has no record.body"));
        body.and_then(|b| WatchRecord::parse(b).and_then(|r| Ok(Watch::try_from(r)?)))
            .with_context(|| format!("{} cannot be read", self.watch_object(&name)))
    }

    /// Remembers `obj` as last read; `keep` keeps the object itself.
    fn remember(&mut self, obj: &DynamicObject, keep: bool) {
        let Some(name) = obj.metadata.name.clone() else {
            return;
        };
        let id = obj.data["record"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let rv = obj.metadata.resource_version.clone().unwrap_or_default();
        self.known.insert(
            name,
            Known {
                id,
                rv,
                obj: keep.then(|| obj.clone()),
            },
        );
    }

    /// The Watch object of `w` with `events` appended to its history.
    fn watch_object_for(
        &mut self,
        w: &Watch,
        events: &[&Event],
        tape: Option<(usize, Vec<Step>)>,
    ) -> Result<WatchObject> {
        let name = object_name(&w.id);
        let r = WatchRecord::from(w);
        let mut base = None;
        if let Some(k) = self.known.get(&name) {
            if k.id != w.id {
                bail!(
                    "{}: watches {} and {} have the same object name",
                    self.watch_object(&name),
                    k.id,
                    w.id
                );
            }
            base = match &k.obj {
                Some(o) => Some(o.clone()),
                None => {
                    // Known by id only: read it, and it must be as this store last saw it.
                    let api = self.watches.clone();
                    let n = name.clone();
                    let o = self.run(async move { api.get(&n).await })?.map_err(|e| {
                        if is_object_not_found(&e) {
                            self.conflict(&self.watch_object(&name), "it was deleted")
                        } else {
                            self.api_error(e, Verb::Get, WATCHES, &self.watch_object(&name))
                        }
                    })?;
                    if o.metadata.resource_version.as_deref() != Some(k.rv.as_str()) {
                        return Err(self.conflict(&self.watch_object(&name), "its version differs"));
                    }
                    Some(o)
                }
            };
        }
        let mut history: Vec<Value> = base
            .as_ref()
            .and_then(|o| o.data["history"].as_array().cloned())
            .unwrap_or_default();
        history.extend(events.iter().map(|e| history_item(e)));
        let cut = history.len().saturating_sub(WATCH_HISTORY);
        history.drain(..cut);
        let finished_at = r.finished_at.map(Timestamp);
        let mut record = json!({
            "id": r.id,
            "commit": r.commit,
            "commitShort": w.commit.short(),
            "app": r.app_str(),
            "mode": w.mode.as_str(),
            "dryRun": r.dry_run,
            "state": r.state_str(),
            "live": r.is_live(),
            "startedAt": w.watch_started_at.rfc3339(),
            "reason": greenlight_git::redact(&w.reason_text()),
            "body": r.to_body()?,
        });
        if let Some(t) = finished_at {
            record["finishedAt"] = json!(t.rfc3339());
            record["finishedAtMs"] = json!(t.0);
        }
        let labels: BTreeMap<String, String> = [
            (LABEL_STORE.to_string(), self.name.clone()),
            (LABEL_LIVE.to_string(), r.is_live().to_string()),
            (
                "app.kubernetes.io/name".to_string(),
                "greenlight".to_string(),
            ),
        ]
        .into();
        let mut data = json!({"record": record, "history": history});
        let held = base.as_ref().and_then(|o| o.data["tape"].as_str());
        if let Some(t) = held.filter(|t| serde_json::from_str::<Vec<Step>>(t).is_err()) {
            // A tape that does not read is kept as it is (`why` names it), never overwritten.
            data["tape"] = json!(t);
            return Ok(WatchObject {
                name,
                base,
                data,
                labels,
                live: r.is_live(),
            });
        }
        let mut steps = base.as_ref().map(tape_of).unwrap_or_default();
        if let Some((first, new)) = tape {
            if steps.len() == first {
                steps.extend(new);
            } else if !matches!(steps.last(), Some(Step::Full { .. })) {
                // Steps went missing in between: what follows could not be replayed.
                let at = new.first().and_then(Step::at).unwrap_or(Timestamp(0));
                steps.push(Step::Full { at });
            }
        }
        if !steps.is_empty() {
            let mut text = serde_json::to_string(&steps)?;
            // The object stays well under etcd's limit whatever the tape's own bound allows:
            // past this, the tape ends (`docs/why.md#bounds`).
            if text.len() > KUBE_TAPE_BYTES {
                let at = steps.last().and_then(Step::at).unwrap_or(Timestamp(0));
                let mut kept = base.as_ref().map(tape_of).unwrap_or_default();
                if !matches!(kept.last(), Some(Step::Full { .. })) {
                    kept.push(Step::Full { at });
                }
                text = serde_json::to_string(&kept)?;
            }
            data["tape"] = json!(text);
        }
        Ok(WatchObject {
            name,
            base,
            data,
            labels,
            live: r.is_live(),
        })
    }

    fn write_watch(&mut self, w: &Watch, events: &[&Event]) -> Result<()> {
        let WatchObject {
            name,
            base,
            data,
            labels,
            live,
        } = {
            let tape = self.pending_tapes.remove(&w.id);
            self.watch_object_for(w, events, tape)?
        };
        let object = self.watch_object(&name);
        let api = self.watches.clone();
        let written = match base {
            Some(mut o) => {
                o.data = data;
                o.metadata
                    .labels
                    .get_or_insert_with(Default::default)
                    .extend(labels);
                let n = name.clone();
                self.run(async move { api.replace(&n, &PostParams::default(), &o).await })?
                    .map_err(|e| self.api_error(e, Verb::Update, WATCHES, &object))?
            }
            None => {
                let mut o = DynamicObject::new(&name, &watch_resource())
                    .within(&self.namespace)
                    .data(data);
                o.metadata.labels = Some(labels);
                match self.run(async move { api.create(&PostParams::default(), &o).await })? {
                    Ok(o) => o,
                    Err(e) if is_api(&e, 409) => {
                        return Err(self
                            .conflict(&object, "it exists, and this greenlight did not know it"));
                    }
                    Err(e) => return Err(self.api_error(e, Verb::Create, WATCHES, &object)),
                }
            }
        };
        self.remember(&written, live);
        Ok(())
    }

    /// A watch's tape as its object holds it (`tape`, a JSON array in a string); an object
    /// without one has none. One that does not read is an error naming the object.
    fn tape_unnamed(&mut self, watch_id: &str) -> Result<(Option<Watch>, Vec<Step>)> {
        let name = object_name(watch_id);
        let object = self.watch_object(&name);
        let api = self.watches.clone();
        let n = name.clone();
        let o = match self.run(async move { api.get(&n).await })? {
            Ok(o) => o,
            Err(e) if is_object_not_found(&e) => return Ok((None, Vec::new())),
            Err(e) => return Err(self.api_error(e, Verb::Get, WATCHES, &object)),
        };
        let watch = self.watch_of(&o)?;
        let steps = match o.data["tape"].as_str() {
            None => Vec::new(),
            Some(t) => serde_json::from_str(t)
                .with_context(|| format!("the tape of {object} cannot be read"))?,
        };
        Ok((Some(watch), steps))
    }

    // ------------------------------------------------------------------ the trait's work

    fn bind_unnamed(&mut self, repo: &str, branch: &str) -> Result<()> {
        let mut data = self.dog_data()?;
        self.check_schema(&data)?;
        let mut changed = false;
        for (key, want) in [("repo", repo), ("branch", branch)] {
            match data["state"][key].as_str() {
                None => {
                    state_mut(&mut data).insert(key.into(), json!(want));
                    changed = true;
                }
                Some(have) if have == want => {}
                Some(have) => bail!(
                    "{} belongs to {key} {have:?}, not {want:?}; use another --store-name",
                    self.dog_object()
                ),
            }
        }
        if changed {
            state_mut(&mut data).insert("schemaVersion".into(), json!(KUBE_SCHEMA_VERSION));
            self.put_dog(data)?;
        }
        Ok(())
    }

    fn load_unnamed(&mut self) -> Result<Loaded> {
        self.dog = None;
        let data = self.dog_data()?;
        let mut watches = Vec::new();
        for o in self.list_watches(None)? {
            watches.push(self.watch_of(&o)?);
        }
        watches.sort_by(|a, b| (a.watch_started_at, &a.id).cmp(&(b.watch_started_at, &b.id)));
        let s = |k: &str| data["state"][k].as_str().map(str::to_string);
        Ok(Loaded {
            repo: s("repo"),
            branch: s("branch"),
            baseline: s("baseline"),
            tip: s("tip"),
            breaker: self.breaker_of(&data)?,
            watches,
        })
    }

    fn load_resume_unnamed(&mut self, reopen_since: Option<i64>) -> Result<Resume> {
        self.dog = None;
        let data = self.dog_data()?;
        self.check_schema(&data)?;
        let since = reopen_since.unwrap_or(i64::MAX);
        let mut live = Vec::new();
        let mut finished_ids = BTreeSet::new();
        let mut tapes = Vec::new();
        self.known.clear();
        self.pending_tapes.clear();
        for o in self.list_watches(None)? {
            let rec = &o.data["record"];
            let id = rec["id"].as_str().unwrap_or_default().to_string();
            let is_live = rec["live"].as_bool().unwrap_or(true);
            let reopenable = !is_live
                && rec["state"].as_str() == Some(State::NotReached.as_str())
                && rec["finishedAtMs"].as_i64().is_some_and(|t| t >= since);
            if is_live || reopenable || id.is_empty() {
                let steps = tape_of(&o);
                if is_live && !steps.is_empty() {
                    let r = Recording::resumed(
                        steps.len(),
                        greenlight_core::tape::snapshot_bytes(&steps),
                        matches!(steps.last(), Some(Step::Full { .. })),
                    );
                    tapes.push((id.clone(), r));
                }
                live.push(self.watch_of(&o)?);
                self.remember(&o, true);
            } else {
                finished_ids.insert(id);
                self.remember(&o, false);
            }
        }
        live.sort_by(|a, b| (a.watch_started_at, &a.id).cmp(&(b.watch_started_at, &b.id)));
        let s = |k: &str| data["state"][k].as_str().map(str::to_string);
        Ok(Resume {
            baseline: s("baseline"),
            tip: s("tip"),
            breaker: self.breaker_of(&data)?,
            live,
            finished_ids,
            idle: idle_of(&data),
            arrived: arrived_of(&data),
            tapes,
        })
    }

    fn export_unnamed(&mut self) -> Result<Exported> {
        let loaded = self.load_unnamed()?;
        let data = self.dog_data()?;
        Ok(Exported {
            loaded,
            idle: idle_of(&data),
            arrived: arrived_of(&data),
            record_summary: self.summary_of(&data)?,
        })
    }

    fn write_unnamed(&mut self, w: Write<'_>) -> Result<()> {
        // Each event goes with the watch of its commit and app written in this step, else to
        // the Watchdog's history.
        let mut of_watch: Vec<Vec<&Event>> = vec![Vec::new(); w.watches.len()];
        let mut of_none: Vec<&Event> = Vec::new();
        for e in w.events {
            let at = w.watches.iter().rposition(|x| {
                e.commit.as_deref() == Some(x.commit.as_str())
                    && e.app.as_deref() == Some(x.app.to_string().as_str())
            });
            match at {
                Some(i) => of_watch[i].push(e),
                None => of_none.push(e),
            }
        }

        for (id, first, steps) in w.tapes {
            match self.pending_tapes.get_mut(id) {
                Some((at, held)) if *at + held.len() == *first => {
                    held.extend(steps.iter().cloned())
                }
                _ => {
                    self.pending_tapes
                        .insert(id.clone(), (*first, steps.clone()));
                }
            }
        }

        // (1) The breaker first: a crash after it errs closed.
        if w.breaker.is_some() || w.clear_breaker_reset_request {
            let mut data = self.dog_data()?;
            let mut changed = false;
            if let Some(b) = w.breaker {
                let body = BreakerRecord::from(b).to_body()?;
                let st = state_mut(&mut data);
                st.insert("breaker".into(), json!(body));
                st.insert(
                    "breakerState".into(),
                    json!(if b.open { "open" } else { "closed" }),
                );
                st.insert("consecutiveReverts".into(), json!(b.consecutive_reverts));
                changed = true;
            }
            if w.clear_breaker_reset_request
                && state_mut(&mut data)
                    .remove("breakerResetRequestedAt")
                    .is_some()
            {
                changed = true;
            }
            if changed {
                state_mut(&mut data).insert("schemaVersion".into(), json!(KUBE_SCHEMA_VERSION));
                self.put_dog(data)?;
            }
        }

        // (2) Each watch with its events: one object write each.
        for (watch, events) in w.watches.iter().zip(&of_watch) {
            self.write_watch(watch, events)?;
        }

        // (3) Tip, baseline, memory and the events of no watch last: a crash before it
        // delivers the commits again, and the watches written above stop a second start.
        if w.tip.is_some()
            || w.baseline.is_some()
            || !w.idle.is_empty()
            || !w.arrived.is_empty()
            || !of_none.is_empty()
            || w.record_summary.is_some()
        {
            let mut data = self.dog_data()?;
            {
                let st = state_mut(&mut data);
                st.insert("schemaVersion".into(), json!(KUBE_SCHEMA_VERSION));
                if let Some(t) = w.tip {
                    st.insert("tip".into(), json!(t));
                    st.insert("tipShort".into(), json!(&t[..t.len().min(12)]));
                }
                if let Some(b) = w.baseline {
                    st.insert("baseline".into(), json!(b));
                }
            }
            if !w.idle.is_empty() || !w.arrived.is_empty() {
                let mut idle = raw_idle(&data);
                for (key, seen) in w.idle {
                    let k = format!("{}/{}", key.namespace, key.name);
                    if seen.is_empty() {
                        idle.remove(&k);
                    } else {
                        idle.insert(k, serde_json::to_value(seen)?);
                    }
                }
                let mut arrived = raw_arrived(&data);
                for a in w.arrived {
                    arrived.push(serde_json::to_value(a)?);
                }
                let (idle, arrived) = bounded_memory(&idle, arrived, &self.dog_object())?;
                let m = obj_mut(&mut data, "memory");
                m.insert("idle".into(), json!(idle));
                m.insert("arrived".into(), json!(arrived));
            }
            if let Some(summary) = w.record_summary {
                obj_mut(&mut data, "record")
                    .insert("summary".into(), json!(serde_json::to_string(summary)?));
            }
            if !of_none.is_empty() {
                let mut history: Vec<Value> =
                    data["history"].as_array().cloned().unwrap_or_default();
                history.extend(of_none.iter().map(|e| history_item(e)));
                let cut = history.len().saturating_sub(WATCHDOG_HISTORY);
                history.drain(..cut);
                data["history"] = Value::Array(history);
            }
            self.put_dog(data)?;
        }
        Ok(())
    }

    /// The track record's summary of pruned watches (`record.summary`); none before anything
    /// was pruned. One that does not read is an error naming the object, never an empty one.
    fn summary_of(&self, data: &Value) -> Result<Summary> {
        match data["record"]["summary"].as_str() {
            None => Ok(Summary::new()),
            Some(text) => serde_json::from_str(text).with_context(|| {
                format!(
                    "the track record's summary (record.summary of {}) cannot be read",
                    self.dog_object()
                )
            }),
        }
    }

    fn prune_unnamed(&mut self, cutoff: Timestamp, now: Timestamp) -> Result<Pruned> {
        let mut pruned = Pruned::default();
        let mut due = Vec::new();
        for o in self.list_watches(Some(&format!("{LABEL_LIVE}=false")))? {
            let rec = &o.data["record"];
            let at = rec["finishedAtMs"].as_i64().or_else(|| {
                rec["startedAt"]
                    .as_str()
                    .and_then(Timestamp::parse_rfc3339)
                    .map(|t| t.0)
            });
            if at.is_none_or(|t| t >= cutoff.0) || rec["live"].as_bool() != Some(false) {
                continue;
            }
            due.push(o);
        }
        // What goes is counted first into the track record's summary, with the ids counted: a
        // prune that stops part-way leaves some of them, which the next one does not count
        // again. An unreadable summary stops the prune: nothing is dropped uncounted.
        if !due.is_empty() {
            let mut data = self.dog_data()?;
            let mut summary = self.summary_of(&data)?;
            let counted: BTreeSet<String> = data["record"]["counted"]
                .as_str()
                .and_then(|t| serde_json::from_str(t).ok())
                .unwrap_or_default();
            let mut ids = Vec::new();
            let mut fresh = Vec::new();
            let mut unreadable = Vec::new();
            for o in &due {
                let id = o.data["record"]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if !counted.contains(&id) {
                    match self.watch_of(o) {
                        Ok(w) => fresh.push(w),
                        // Counted, never a reason for retention to stop here.
                        Err(_) => unreadable
                            .push(o.data["record"]["app"].as_str().unwrap_or("?").to_string()),
                    }
                }
                ids.push(id);
            }
            count_unreadable(&mut summary, &unreadable);
            summarize_pruned(
                &mut summary,
                &fresh,
                &arrived_of(&data),
                &idle_of(&data),
                now,
            );
            let r = obj_mut(&mut data, "record");
            r.insert("summary".into(), json!(serde_json::to_string(&summary)?));
            r.insert("counted".into(), json!(serde_json::to_string(&ids)?));
            self.put_dog(data)?;
        }
        for o in due {
            let name = o.metadata.name.clone().unwrap_or_default();
            let object = self.watch_object(&name);
            let listed = o.metadata.resource_version.clone();
            if let Some(k) = self.known.get(&name)
                && Some(&k.rv) != listed.as_ref()
            {
                return Err(self.conflict(&object, "its version differs"));
            }
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: listed,
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            let api = self.watches.clone();
            let n = name.clone();
            match self.run(async move { api.delete(&n, &dp).await })? {
                Ok(_) => {}
                Err(e) if is_object_not_found(&e) => {}
                Err(e) => return Err(self.api_error(e, Verb::Delete, WATCHES, &object)),
            }
            self.known.remove(&name);
            pruned.watches += 1;
            pruned.events += o.data["history"].as_array().map_or(0, Vec::len);
        }
        // The events of no watch go by their own time.
        if let Some(dog) = self.dog()? {
            let mut data = dog.data.clone();
            if let Some(history) = data["history"].as_array().cloned() {
                let kept: Vec<Value> = history
                    .iter()
                    .filter(|h| {
                        h["time"]
                            .as_str()
                            .and_then(Timestamp::parse_rfc3339)
                            .is_none_or(|t| t >= cutoff)
                    })
                    .cloned()
                    .collect();
                if kept.len() < history.len() {
                    pruned.events += history.len() - kept.len();
                    data["history"] = Value::Array(kept);
                    self.put_dog(data)?;
                }
            }
        }
        Ok(pruned)
    }

    fn request_breaker_reset_unnamed(&mut self, at: i64) -> Result<()> {
        let api = self.watchdogs.clone();
        let name = self.name.clone();
        let patch = Patch::Merge(json!({"state": {"breakerResetRequestedAt": at}}));
        let object = self.dog_object();
        match self.run(async move { api.patch(&name, &PatchParams::default(), &patch).await })? {
            Ok(_) => Ok(()),
            Err(e) if is_object_not_found(&e) => bail!(
                "{object} does not exist (is this the --store-namespace and --store-name the watchdog runs with?)"
            ),
            Err(e) => Err(self.api_error(e, Verb::Patch, WATCHDOGS, &object)),
        }
    }

    /// Whether a reset request is pending. The Watchdog read now replaces the one last seen
    /// when it differs from it in that field alone (a `breaker reset` came); otherwise the
    /// store keeps what it last saw, and its next write finds the conflict.
    fn breaker_reset_requested_unnamed(&mut self) -> Result<bool> {
        let Some(now) = self.get_dog()? else {
            return Ok(false);
        };
        let requested = now.data["state"].get("breakerResetRequestedAt").is_some();
        let adopt = match &self.dog {
            None => true,
            Some(None) => false,
            Some(Some(last)) => only_requested(&last.data, &now.data),
        };
        if adopt {
            self.dog = Some(Some(now));
        }
        Ok(requested)
    }

    /// `r`, its error naming the store when it names no object of it.
    fn named<T>(&self, r: Result<T>) -> Result<T> {
        r.map_err(|e| {
            let text = format!("{e:#}");
            if text.contains(WATCHES) || text.contains(WATCHDOGS) {
                e
            } else {
                e.context(self.describe())
            }
        })
    }
}

/// Whether the Watchdog's data went from `last` to `now` by a breaker reset request alone (one
/// made, or made again): the only change another writer may make. A request that went away
/// was cleared by a leader, so it is not.
fn only_requested(last: &Value, now: &Value) -> bool {
    let had = last["state"].get("breakerResetRequestedAt").is_some();
    let has = now["state"].get("breakerResetRequestedAt").is_some();
    without_request(last) == without_request(now) && (has || !had)
}

/// The Watchdog's data without the one field another writer may set.
fn without_request(data: &Value) -> Value {
    let mut d = data.clone();
    if let Some(st) = d.get_mut("state").and_then(Value::as_object_mut) {
        st.remove("breakerResetRequestedAt");
    }
    d
}

fn obj_mut<'a>(data: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    if !data.is_object() {
        *data = json!({});
    }
    let m = data.as_object_mut().expect("an object");
    let v = m.entry(key.to_string()).or_insert_with(|| json!({}));
    if !v.is_object() {
        *v = json!({});
    }
    v.as_object_mut().expect("an object")
}

fn state_mut(data: &mut Value) -> &mut Map<String, Value> {
    obj_mut(data, "state")
}

/// An event as a history entry: its time, its kind, and its JSON line (redacted).
fn history_item(e: &Event) -> Value {
    json!({
        "time": e.time.rfc3339(),
        "event": e.event.as_str(),
        "body": greenlight_git::redact(&e.json_line()),
    })
}

/// `memory.idle` as stored: app → its observations (as JSON, unread).
fn raw_idle(data: &Value) -> BTreeMap<String, Value> {
    data["memory"]["idle"]
        .as_str()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}

/// `memory.arrived` as stored, oldest first (unread).
fn raw_arrived(data: &Value) -> Vec<Value> {
    data["memory"]["arrived"]
        .as_str()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}

/// Each app's idle observations; an app whose entry does not read is left out (no baseline,
/// so no revert).
/// The most bytes of a Watch object's `tape` (its JSON text).
const KUBE_TAPE_BYTES: usize = 640 * 1024;

/// The tape a Watch object holds; none when it holds none or one that does not read (its
/// watch then records nothing more, and `why` names the unreadable one).
fn tape_of(o: &DynamicObject) -> Vec<Step> {
    o.data["tape"]
        .as_str()
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default()
}

fn idle_of(data: &Value) -> Vec<(AppKey, Vec<Idle>)> {
    raw_idle(data)
        .into_iter()
        .filter_map(|(k, v)| {
            let (namespace, name) = k.split_once('/')?;
            let seen: Vec<Idle> = serde_json::from_value(v).ok()?;
            Some((
                AppKey {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                },
                seen,
            ))
        })
        .collect()
}

/// The arrived commits, oldest first; an entry that does not read drops what came before it
/// (only an unbroken run up to the newest tells a batch).
fn arrived_of(data: &Value) -> Vec<Arrived> {
    let mut out = Vec::new();
    for v in raw_arrived(data) {
        match serde_json::from_value::<Arrived>(v) {
            Ok(a) => out.push(a),
            Err(_) => out.clear(),
        }
    }
    out
}

/// `idle` and `arrived` as the JSON strings `memory` holds, the newest [`ARRIVED_KEPT`] arrived
/// commits at most, and the oldest dropped until both fit in [`MEMORY_LIMIT`]. Idle
/// observations alone over the limit are an error naming their size.
fn bounded_memory(
    idle: &BTreeMap<String, Value>,
    mut arrived: Vec<Value>,
    object: &str,
) -> Result<(String, String)> {
    let idle_json = serde_json::to_string(idle)?;
    if idle_json.len() + 2 > MEMORY_LIMIT {
        bail!(
            "{object}: the idle observations of {} app(s) are {} bytes of JSON, more than the {MEMORY_LIMIT} the Watchdog's memory holds; nothing of this step's memory was written",
            idle.len(),
            idle_json.len()
        );
    }
    let cut = arrived.len().saturating_sub(ARRIVED_KEPT);
    arrived.drain(..cut);
    let sizes: Vec<usize> = arrived
        .iter()
        .map(|a| serde_json::to_string(a).map_or(0, |s| s.len() + 1))
        .collect();
    let mut total = idle_json.len() + 2 + sizes.iter().sum::<usize>();
    let mut drop = 0;
    while total > MEMORY_LIMIT && drop < sizes.len() {
        total -= sizes[drop];
        drop += 1;
    }
    arrived.drain(..drop);
    Ok((idle_json, serde_json::to_string(&arrived)?))
}

impl Store for KubeStore {
    fn describe(&self) -> String {
        format!(
            "{WATCHES} in namespace {} (store {})",
            self.namespace, self.name
        )
    }
    fn bind(&mut self, repo: &str, branch: &str) -> Result<()> {
        let r = self.bind_unnamed(repo, branch);
        self.named(r)
    }
    fn load(&mut self) -> Result<Loaded> {
        let r = self.load_unnamed();
        self.named(r)
    }
    fn load_resume(&mut self, reopen_since: Option<i64>) -> Result<Resume> {
        let r = self.load_resume_unnamed(reopen_since);
        self.named(r)
    }
    fn write(&mut self, w: Write<'_>) -> Result<()> {
        let r = self.write_unnamed(w);
        self.named(r)
    }
    fn prune_due(&mut self, now: Timestamp, retain_ms: i64) -> Result<Option<Pruned>> {
        if self
            .last_pruned_at
            .is_some_and(|t| now.ms_since(t) < PRUNE_EVERY_MS)
        {
            return Ok(None);
        }
        self.last_pruned_at = Some(now);
        // Never before a verdict's day is over: the track record reads what people did in it.
        let retain_ms = retain_ms.max(greenlight_core::record::WINDOW_MS);
        let r = self.prune_unnamed(now.plus_ms(-retain_ms), now);
        self.named(r).map(Some)
    }
    fn request_breaker_reset(&mut self, at: i64) -> Result<()> {
        let r = self.request_breaker_reset_unnamed(at);
        self.named(r)
    }
    fn breaker_reset_requested(&mut self) -> Result<bool> {
        let r = self.breaker_reset_requested_unnamed();
        self.named(r)
    }
    fn export(&mut self) -> Result<Exported> {
        let r = self.export_unnamed();
        self.named(r)
    }
    fn tape(&mut self, watch_id: &str) -> Result<(Option<Watch>, Vec<Step>)> {
        let r = self.tape_unnamed(watch_id);
        self.named(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_dns_names_that_keep_the_id_apart() {
        let c = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(object_name(&format!("{c}:0")), format!("{c}-0"));
        assert_eq!(object_name(&format!("{c}:2~1")), format!("{c}-2-r1"));
        assert_eq!(object_name("ABC:1"), "abc-1");
        assert_ne!(
            object_name(&format!("{c}:1~1")),
            object_name(&format!("{c}:11"))
        );
    }

    #[test]
    fn only_a_reset_request_made_is_another_writers_change() {
        let base = json!({"state": {"tip": "a"}, "memory": {}});
        let mut asked = base.clone();
        asked["state"]["breakerResetRequestedAt"] = json!(5);
        let mut asked_again = asked.clone();
        asked_again["state"]["breakerResetRequestedAt"] = json!(6);
        let mut moved = asked.clone();
        moved["state"]["tip"] = json!("b");
        assert!(only_requested(&base, &asked));
        assert!(only_requested(&asked, &asked_again));
        assert!(only_requested(&base, &base));
        assert!(!only_requested(&asked, &base), "cleared by a leader");
        assert!(!only_requested(&base, &moved));
    }

    #[test]
    fn memory_drops_the_oldest_arrived_first_and_never_idle() {
        let idle: BTreeMap<String, Value> = [("argocd/web".to_string(), json!([{"x": 1}]))].into();
        let arrived: Vec<Value> = (0..20_000)
            .map(|n| json!({"sha": format!("{n:040x}"), "changed_paths": ["p".repeat(300)]}))
            .collect();
        let (i, a) = bounded_memory(&idle, arrived, "o").unwrap();
        assert!(i.len() + a.len() <= MEMORY_LIMIT);
        assert!(
            i.len() + a.len() > MEMORY_LIMIT - 1000,
            "no more dropped than needed"
        );
        let a: Vec<Value> = serde_json::from_str(&a).unwrap();
        assert!(a.len() < ARRIVED_KEPT, "{}", a.len());
        assert_eq!(a.last().unwrap()["sha"], format!("{:040x}", 19_999));
        let big: BTreeMap<String, Value> = (0..20_000)
            .map(|n| {
                (
                    format!("argocd/app-{n}"),
                    json!([{"revision": "a".repeat(40)}]),
                )
            })
            .collect();
        let err = bounded_memory(&big, Vec::new(), "watchdogs.greenlight.dev ns/x").unwrap_err();
        assert!(err.to_string().contains("bytes of JSON"), "{err}");
    }
}
