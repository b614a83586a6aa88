//! The simulated cluster and controller: every Application's state, the reconciliations and the
//! sync operations Argo CD's controller would run, the live resources with their health over
//! time, and the Application / resource-tree / managed-resources JSON in Argo CD's wire format.
//! Every change is one observable update: it bumps the resourceVersion counter and is offered to
//! each stream subscriber's bounded buffer, dropped for a subscriber whose buffer is full (a
//! change that leaves the stored Application JSON as it was publishes nothing, as an empty patch
//! bumps nothing in Kubernetes: from 3.0 on, a resource's health alone is not in it).
//! It is handed the time (`Now`) and the rendered manifests; it never runs git or sleeps. Timers
//! (rollouts ending, hooks finishing, the steps of a sync that runs hooks, retry back-offs, hidden
//! render errors) are reported by `next_deadline` and fired by `tick`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use crate::health::{self, Assessment, Contribution, Health, ImagePolicy, Subject};
use crate::manifests::{self, Digest, RenderError, Rendered, ResourceKey, SyncPhase};
use crate::patch::{self, Owned, PatchType};
use crate::repo::RepoFile;
use crate::tasks::{Plan, Task, TaskState, waiting_message};
use crate::timefmt::rfc3339;
use crate::{
    APP_NAMESPACE, APP_PROJECT, APPLY_ANNOTATION, AppSpec, ArgoCdVersion, HOOK_ANNOTATION, LogSink,
    SCHEDULE_ANNOTATION,
};

const DESTINATION_SERVER: &str = "https://kubernetes.default.svc";
const DESTINATION_NAMESPACE: &str = "default";
const HISTORY_LIMIT: usize = 10;
const SUCCEEDED_MESSAGE: &str = "successfully synced (all tasks run)";
/// How a sync that ran hooks ends when its last step finds nothing left to run.
const NO_MORE_TASKS_MESSAGE: &str = "successfully synced (no more tasks)";
const TASKS_FAILED_MESSAGE: &str = "one or more synchronization tasks completed unsuccessfully";
const APPLY_FAILED_MESSAGE: &str = "one or more objects failed to apply";
/// `spec.syncPolicy.retry.limit` of every sandbox app.
const RETRY_LIMIT: u32 = 2;
const RETRY_FACTOR: u32 = 2;
/// `maxDuration` over `duration`: Argo CD's 3m over 5s.
const RETRY_MAX_OVER_BASE: u32 = 36;
const MANIFEST_ERROR_PREFIX: &str = "Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown desc = ";

/// One moment, on both clocks: wall time for timestamps, monotonic time for deadlines.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Now {
    pub wall: SystemTime,
    pub mono: Instant,
}

impl Now {
    pub(crate) fn current() -> Now {
        Now {
            wall: SystemTime::now(),
            mono: Instant::now(),
        }
    }
}

/// One observable update of one Application, as the stream delivers it.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub name: String,
    pub application: Arc<Value>,
}

/// What the manifests of a directory app rendered to at a commit.
/// Shared: every app of a path, the compared target and an operation hold the same render.
pub(crate) type RenderResult = Result<Arc<Rendered>, RenderError>;

/// What the world needs from the controller's settings.
#[derive(Debug, Clone)]
pub(crate) struct WorldConfig {
    pub repo_url: String,
    pub branch: String,
    pub rollout_time: Duration,
    /// How long a hook that is a workload runs.
    pub hook_time: Duration,
    pub version: ArgoCdVersion,
    pub repo_error_grace: Duration,
    pub retry_backoff: Duration,
    /// Apps without automated sync: compared, never synced unless asked through the API.
    pub manual_sync: BTreeSet<String>,
    /// Apps whose automated sync prunes (`automated.prune: true`).
    pub prune: BTreeSet<String>,
    /// Apps whose automated sync may prune every resource (`automated.allowEmpty: true`).
    pub allow_empty: BTreeSet<String>,
    /// Apps whose automated sync does not self-heal (`automated.selfHeal: false`).
    pub no_self_heal: BTreeSet<String>,
}

/// A resource named in a partial sync (`resources` of a sync request); an empty namespace
/// matches any namespace, as in Argo CD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyncResource {
    pub group: String,
    pub kind: String,
    pub name: String,
    pub namespace: String,
}

impl SyncResource {
    fn matches(&self, key: &ResourceKey) -> bool {
        self.group == key.group
            && self.kind == key.kind
            && self.name == key.name
            && (self.namespace.is_empty() || self.namespace == key.namespace)
    }

    fn to_json(&self) -> Value {
        let mut r = json!({"kind": self.kind, "name": self.name});
        if !self.group.is_empty() {
            r["group"] = json!(self.group);
        }
        if !self.namespace.is_empty() {
            r["namespace"] = json!(self.namespace);
        }
        r
    }
}

/// `POST /api/v1/applications/{name}/sync`, as the API parsed it.
#[derive(Debug, Clone, Default)]
pub(crate) struct SyncRequest {
    /// Empty: the app's target revision.
    pub revision: String,
    pub dry_run: bool,
    pub prune: bool,
    /// Empty: every resource.
    pub resources: Vec<SyncResource>,
    pub sync_options: Vec<String>,
    pub strategy: Option<Value>,
}

/// Why a sync request was refused (both are gRPC FailedPrecondition in Argo CD).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SyncRefusal {
    InProgress,
    Revision { requested: String, target: String },
}

impl std::fmt::Display for SyncRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyncRefusal::InProgress => f.write_str("another operation is already in progress"),
            SyncRefusal::Revision { requested, target } => write!(
                f,
                "Cannot sync to {requested}: auto-sync currently set to {target}"
            ),
        }
    }
}

/// A requested sync the engine must resolve (git) before it can start.
#[derive(Debug, Clone)]
pub(crate) struct PendingSync {
    pub name: String,
    pub revision: String,
    /// The revision names the tracked branch's tip (the target revision, the branch, `HEAD`).
    pub means_tip: bool,
    /// The app's path in the repository; `None` for a helm app (nothing to resolve).
    pub path: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    /// The branch moved (a polled refresh).
    Tip,
    /// A refresh was asked for explicitly.
    Refresh,
    /// A completed operation asks for a refresh.
    AfterOperation,
    /// A hidden render error's grace ended.
    Deadline,
    /// A live object changed outside a sync (deleted by hand).
    LiveChange,
}

enum Source {
    Path { path: String },
    Helm { chart: String, version: String },
    Hydrator { path: String },
}

#[derive(Clone)]
struct Live {
    key: ResourceKey,
    version: String,
    uid: String,
    resource_version: u64,
    digest: Digest,
    images: Vec<String>,
    replicas: i64,
    /// A health that does not depend on time (annotation, paused spec).
    forced: Option<Assessment>,
    /// Left out of the app's health (`argocd.argoproj.io/ignore-healthcheck`).
    ignored: bool,
    rolling_until: Option<Instant>,
    /// Inside the rollout time when last looked at (with `assessment`).
    rolling: bool,
    /// Its pods cannot be scheduled: the scheduler's message ([`SCHEDULE_ANNOTATION`]).
    unschedulable: Option<String>,
    /// A Deployment's: when its progress deadline (`spec.progressDeadlineSeconds`) passes.
    progress_deadline_at: Option<Instant>,
    assessment: Option<Assessment>,
    /// The object as applied (the manifest from git; shared with it).
    object: Arc<Value>,
    /// When the object was first created.
    created: SystemTime,
    /// When it was last applied with a change (its ReplicaSet's and Pods' creation).
    applied: SystemTime,
    /// A Deployment's: the last revision whose Pods were all running, as it was then. Its
    /// ReplicaSet and Pods stay while the current revision's are not ready, as a rolling
    /// update keeps the old Pods until the new ones are available.
    previous: Option<Box<Live>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SyncCode {
    Synced,
    OutOfSync,
    Unknown,
}

impl SyncCode {
    fn as_str(self) -> &'static str {
        match self {
            SyncCode::Synced => "Synced",
            SyncCode::OutOfSync => "OutOfSync",
            SyncCode::Unknown => "Unknown",
        }
    }
}

/// One entry of `status.resources[]`, as the last comparison left it.
struct Entry {
    key: ResourceKey,
    version: String,
    status: SyncCode,
    requires_pruning: bool,
    /// The object existed when last looked at.
    live: bool,
    ignored: bool,
    health: Option<Assessment>,
    /// The object in git this entry was compared with; `None` for a live object git does not
    /// have (or when the manifests did not render).
    target: Option<Arc<Value>>,
}

/// What the last full reconciliation showed: `status.sync` and `status.resources`; and what the
/// last look at the live objects showed: `status.summary.images`.
#[derive(Default)]
struct Shown {
    /// `None`: never compared.
    code: Option<SyncCode>,
    revision: Option<String>,
    entries: Vec<Entry>,
    images: Vec<String>,
}

/// The newest commit (or chart version) the controller knows for an app, and what it rendered to.
#[derive(Clone)]
struct Target {
    revision: String,
    render: RenderResult,
}

struct RenderFailure {
    since: Instant,
    shown: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    Succeeded,
    Failed,
    Error,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
            Phase::Error => "Error",
        }
    }
}

#[derive(Clone)]
struct Request {
    /// As requested: a commit, a branch, `HEAD`.
    revision: String,
    dry_run: bool,
    /// Live objects git no longer has are deleted (else reported `PruneSkipped`).
    prune: bool,
    resources: Option<Vec<SyncResource>>,
    /// The `apply` sync strategy: no hooks run.
    apply_strategy: bool,
    /// The `operation` JSON.
    operation: Value,
}

impl Request {
    fn initiated_by(&self) -> Value {
        self.operation["initiatedBy"].clone()
    }

    fn records_history(&self) -> bool {
        !self.dry_run && self.resources.is_none()
    }

    /// Argo CD runs hooks in a sync that is neither partial nor of the `apply` strategy; the
    /// sandbox runs none in a dry run either.
    fn runs_hooks(&self) -> bool {
        !self.dry_run && self.resources.is_none() && !self.apply_strategy
    }
}

/// `status.operationState` and what the controller keeps to run it.
struct OpRun {
    request: Request,
    started: SystemTime,
    phase: Phase,
    message: String,
    finished: Option<SystemTime>,
    sync_result: Option<Value>,
    retry_count: u32,
    /// While backing off: when the next attempt starts.
    retry_at: Option<Instant>,
    /// What the operation applies: the resolved commit and its manifests, or why there is none.
    prepared: Result<(String, Arc<Rendered>), String>,
    /// The tasks of the attempt under way, when it runs hooks.
    plan: Option<Plan>,
}

impl OpRun {
    fn to_json(&self) -> Value {
        let mut state = json!({
            "operation": self.request.operation,
            "phase": self.phase.as_str(),
            "startedAt": rfc3339(self.started),
        });
        if !self.message.is_empty() {
            state["message"] = json!(self.message);
        }
        if let Some(result) = &self.sync_result {
            state["syncResult"] = result.clone();
        }
        if let Some(t) = self.finished {
            state["finishedAt"] = json!(rfc3339(t));
        }
        if self.retry_count > 0 {
            state["retryCount"] = json!(self.retry_count);
        }
        state
    }
}

struct App {
    name: String,
    /// `spec.syncPolicy.automated` is set: a comparison that finds it OutOfSync syncs it.
    automated: bool,
    /// `spec.syncPolicy.automated.prune`: its automated syncs delete what git no longer has.
    prune: bool,
    /// `spec.syncPolicy.automated.allowEmpty`: its automated sync may prune every resource.
    allow_empty: bool,
    /// `spec.syncPolicy.automated.selfHeal`: a live object that drifted from the commit already
    /// synced (deleted by hand) is synced again at once; without it, only by the next commit's.
    self_heal: bool,
    uid: String,
    created: SystemTime,
    source: Source,
    resource_version: u64,
    /// The SHA-256 of the JSON last published, without its resourceVersion (the JSON itself,
    /// kept only for that comparison, was about half of what a quiet app held).
    published: Option<[u8; 32]>,
    live: Vec<Live>,
    target: Option<Target>,
    shown: Shown,
    health: Health,
    health_since: SystemTime,
    reconciled_at: Option<SystemTime>,
    conditions: Vec<Value>,
    /// The top-level `operation`: requested or running.
    operation: Option<Value>,
    /// A requested sync not started yet (waiting for the engine to resolve its revision).
    pending: Option<Request>,
    op: Option<OpRun>,
    history: Vec<Value>,
    next_history_id: u64,
    render_failure: Option<RenderFailure>,
    /// `spec` as last edited through the API, published instead of the derived one; `None`
    /// until the first edit. `automated` follows it.
    edited_spec: Option<Value>,
    /// `metadata.annotations` as last edited through the API (empty: none, as before any edit).
    annotations: Map<String, Value>,
    /// Hook objects left in the cluster by earlier runs (not shown anywhere).
    hook_objects: BTreeSet<ResourceKey>,
    /// Healths held on live resources for a while (`POST /sandbox/v1/health`).
    held: Vec<Held>,
    /// Its live objects changed since its health was last worked out (an apply, a rollout's
    /// turn, a hold's end, the registry): the next health refresh looks at it.
    health_due: bool,
}

/// A health a live resource reports until `until`, whatever its own check says (an HPA
/// scale-up holding a Deployment `Progressing` while its new Pods start, for one).
#[derive(Debug, Clone)]
struct Held {
    kind: String,
    name: String,
    /// `None`: the resource of that kind and name in any namespace.
    namespace: Option<String>,
    assessment: Assessment,
    until: Instant,
}

impl Held {
    fn matches(&self, key: &ResourceKey) -> bool {
        self.kind == key.kind
            && self.name == key.name
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| *ns == key.namespace)
    }
}

/// The health a held resource reports at `now`, if a hold on it is still on.
fn held_at<'a>(held: &'a [Held], key: &ResourceKey, now: Now) -> Option<&'a Assessment> {
    held.iter()
        .filter(|h| now.mono < h.until)
        .find(|h| h.matches(key))
        .map(|h| &h.assessment)
}

/// What [`World::hold_health`] holds: which live resource, what it reports, for how long.
#[derive(Debug, Clone)]
pub(crate) struct HoldHealth {
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
    pub health: Health,
    /// Empty: the sandbox's own words.
    pub message: String,
    pub length: Duration,
}

impl App {
    fn git_path(&self) -> Option<&str> {
        match &self.source {
            Source::Path { path } | Source::Hydrator { path } => Some(path),
            Source::Helm { .. } => None,
        }
    }

    fn set_condition(&mut self, kind: &str, message: Option<String>, now: Now) {
        let previous = self.conditions.iter().find(|c| c["type"] == kind).cloned();
        self.conditions.retain(|c| c["type"] != kind);
        if let Some(message) = message {
            // An unchanged condition keeps its transition time, as Argo CD's SetConditions does.
            let since = previous
                .filter(|c| c["message"] == message.as_str())
                .map(|c| c["lastTransitionTime"].clone())
                .unwrap_or_else(|| json!(rfc3339(now.wall)));
            self.conditions.push(json!({
                "type": kind,
                "message": message,
                "lastTransitionTime": since,
            }));
        }
    }
}

pub(crate) struct World {
    cfg: WorldConfig,
    pub(crate) policy: ImagePolicy,
    counter: u64,
    apps: BTreeMap<String, App>,
    /// Stream subscribers, each with its bounded buffer: an update that does not fit is
    /// dropped for that subscriber (Argo CD's broadcaster does the same).
    subscribers: Vec<mpsc::Sender<Change>>,
    log: Option<LogSink>,
}

fn uuid_from(seed: &str) -> String {
    let h = Sha256::digest(seed.as_bytes());
    let hex: String = h.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-4{}-a{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

fn short(rev: &str) -> &str {
    if rev.len() == 40 { &rev[..7] } else { rev }
}

/// A duration as Go's `time.ParseDuration` reads it (`5s`, `3m`, `200ms`).
fn go_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 || !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let s = ms / 1000;
    if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// Go's `time.Kitchen` (`3:04PM`), in UTC.
fn kitchen(t: SystemTime) -> String {
    let text = rfc3339(t); // 2026-05-28T20:26:40Z
    let hour: u32 = text.get(11..13).and_then(|h| h.parse().ok()).unwrap_or(0);
    let minute = text.get(14..16).unwrap_or("00");
    let (h12, half) = match hour {
        0 => (12, "AM"),
        1..=11 => (hour, "AM"),
        12 => (12, "PM"),
        _ => (hour - 12, "PM"),
    };
    format!("{h12}:{minute}{half}")
}

/// Whether an object's `argocd.argoproj.io/sync-options` annotation holds `option`: its value is
/// a comma-separated list, each item trimmed (gitops-engine `resource.HasAnnotationOption`).
fn has_sync_option(object: &Value, option: &str) -> bool {
    object
        .pointer("/metadata/annotations/argocd.argoproj.io~1sync-options")
        .and_then(Value::as_str)
        .is_some_and(|v| v.split(',').any(|item| item.trim() == option))
}

/// The object carries the annotation that makes applying it fail.
fn apply_fails(object: &Value) -> bool {
    annotated_fail(object, APPLY_ANNOTATION)
}

/// The hook carries the annotation that makes it fail once it has run.
fn hook_fails(object: &Value) -> bool {
    annotated_fail(object, HOOK_ANNOTATION)
}

fn annotated_fail(object: &Value, annotation: &str) -> bool {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(annotation))
        .and_then(Value::as_str)
        == Some("fail")
}

/// Why applying an object annotated to fail is refused.
fn apply_denied(key: &ResourceKey) -> String {
    format!(
        "admission webhook \"apply.sandbox.greenlight.dev\" denied the request: {} is annotated {APPLY_ANNOTATION}: fail",
        kubectl_name(key)
    )
}

// kubectl's wording: `deployment.apps/web`.
fn kubectl_name(key: &ResourceKey) -> String {
    let group = if key.group.is_empty() {
        String::new()
    } else {
        format!(".{}", key.group)
    };
    format!("{}{group}/{}", key.kind.to_lowercase(), key.name)
}

/// What a helm app renders to: one Deployment named after the chart.
fn helm_render(chart: &str) -> RenderResult {
    let object =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": chart}});
    manifests::render(
        &[RepoFile {
            path: "chart.json".into(),
            bytes: object.to_string().into_bytes(),
        }],
        DESTINATION_NAMESPACE,
    )
    .map(Arc::new)
}

impl World {
    pub(crate) fn new(
        cfg: WorldConfig,
        policy: ImagePolicy,
        specs: &[AppSpec],
        log: Option<LogSink>,
        now: Now,
    ) -> World {
        let seed = format!("{}-{:?}", std::process::id(), now.wall);
        let mut apps = BTreeMap::new();
        for spec in specs {
            let source = match spec {
                AppSpec::Path { path, .. } => Source::Path { path: path.clone() },
                AppSpec::Helm { chart, version, .. } => Source::Helm {
                    chart: chart.clone(),
                    version: version.clone(),
                },
                AppSpec::Hydrator { path, .. } => Source::Hydrator { path: path.clone() },
            };
            let name = spec.name().to_string();
            apps.insert(
                name.clone(),
                App {
                    automated: !cfg.manual_sync.contains(&name),
                    prune: cfg.prune.contains(&name),
                    allow_empty: cfg.allow_empty.contains(&name),
                    self_heal: !cfg.no_self_heal.contains(&name),
                    uid: uuid_from(&format!("{seed}/{name}")),
                    name,
                    created: now.wall,
                    source,
                    resource_version: 0,
                    published: None,
                    live: Vec::new(),
                    target: None,
                    shown: Shown::default(),
                    health: Health::Missing,
                    health_since: now.wall,
                    reconciled_at: None,
                    conditions: Vec::new(),
                    operation: None,
                    pending: None,
                    op: None,
                    history: Vec::new(),
                    next_history_id: 0,
                    render_failure: None,
                    edited_spec: None,
                    annotations: Map::new(),
                    hook_objects: BTreeSet::new(),
                    held: Vec::new(),
                    health_due: true,
                },
            );
        }
        let mut world = World {
            cfg,
            policy,
            counter: 0,
            apps,
            subscribers: Vec::new(),
            log,
        };
        let names: Vec<String> = world.apps.keys().cloned().collect();
        for name in names {
            world.commit(&name);
        }
        world
    }

    fn log(&self, line: String) {
        if let Some(sink) = &self.log {
            sink(&line);
        }
    }

    fn app(&mut self, name: &str) -> &mut App {
        self.apps.get_mut(name).expect("known app")
    }

    /// The apps rendered from git and their paths, which the engine renders at each new tip.
    pub(crate) fn git_apps(&self) -> Vec<(String, String)> {
        self.apps
            .values()
            .filter_map(|a| a.git_path().map(|p| (a.name.clone(), p.to_string())))
            .collect()
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.apps.contains_key(name)
    }

    /// `spec.source.targetRevision` (for a hydrator app, the sync source's branch).
    fn target_revision(&self, app: &App) -> String {
        match &app.source {
            Source::Path { .. } => self.cfg.branch.clone(),
            Source::Helm { version, .. } => version.clone(),
            Source::Hydrator { .. } => format!("environment/{}", app.name),
        }
    }

    /// A new tip of the tracked branch: every git app is reconciled against it (a helm app only
    /// when it was never compared, or when `refreshed` says a refresh was asked for it).
    pub(crate) fn observe_tip(
        &mut self,
        tip: &str,
        renders: &BTreeMap<String, RenderResult>,
        refreshed: &dyn Fn(&str) -> bool,
        now: Now,
    ) {
        let names: Vec<String> = self.apps.keys().cloned().collect();
        for name in names {
            let explicit = refreshed(&name);
            let why = if explicit { Why::Refresh } else { Why::Tip };
            let app = &self.apps[&name];
            let target = match &app.source {
                Source::Helm { chart, version } => {
                    if app.target.is_some() {
                        if explicit {
                            self.reconcile(&name, now, why);
                        }
                        continue;
                    }
                    Target {
                        revision: version.clone(),
                        render: helm_render(chart),
                    }
                }
                Source::Path { .. } | Source::Hydrator { .. } => {
                    let Some(render) = renders.get(&name) else {
                        continue;
                    };
                    Target {
                        revision: tip.to_string(),
                        render: render.clone(),
                    }
                }
            };
            self.app(&name).target = Some(target);
            self.reconcile(&name, now, why);
        }
    }

    /// An explicit refresh of the apps `wanted` names, at the tip each last saw.
    pub(crate) fn refresh_matching(&mut self, wanted: &dyn Fn(&str) -> bool, now: Now) -> usize {
        let names: Vec<String> = self.apps.keys().filter(|n| wanted(n)).cloned().collect();
        for name in &names {
            self.reconcile(name, now, Why::Refresh);
        }
        names.len()
    }

    // A full reconciliation (Argo CD's CompareWithLatest): compares the target with the live
    // objects, publishes sync status, resources, health, conditions and reconciledAt (its start),
    // then runs the automated sync if the app is OutOfSync.
    fn reconcile(&mut self, name: &str, now: Now, why: Why) {
        let Some(target) = self.apps[name].target.clone() else {
            return;
        };
        let rendered = match &target.render {
            Ok(rendered) => rendered,
            Err(err) => {
                self.show_render_error(name, &err.message, now, why);
                return;
            }
        };
        let version = self.cfg.version;
        let app = self.app(name);
        app.render_failure = None;
        let entries = compare(rendered, &app.live, version);
        let code = if entries.iter().all(|e| e.status == SyncCode::Synced) {
            SyncCode::Synced
        } else {
            SyncCode::OutOfSync
        };
        let before = (app.shown.code, app.shown.revision.clone());
        app.shown = Shown {
            code: Some(code),
            revision: Some(target.revision.clone()),
            entries,
            images: std::mem::take(&mut app.shown.images),
        };
        app.set_condition("ComparisonError", None, now);
        // Argo CD's autoSync, its checks in its order: only an OutOfSync app without an
        // operation; not when only pruning is needed and automated prune is off; never twice for
        // the same commit (a SyncError after a failed attempt); not, with automated prune and
        // without allowEmpty, when every resource would be pruned (a SyncError).
        let mut auto = false;
        let mut heal: Option<Vec<SyncResource>> = None;
        let mut sync_error = None;
        let mut skipped = None;
        if code == SyncCode::OutOfSync && app.operation.is_none() && app.automated {
            let entries = &app.shown.entries;
            let prune_only = entries
                .iter()
                .all(|e| e.status == SyncCode::Synced || e.requires_pruning);
            let all_pruned = entries.iter().all(|e| e.requires_pruning);
            // Argo CD's alreadyAttemptedSync reads the last operation's state whatever it was:
            // a dry run to this commit counts as its attempt.
            let last_attempt = app.op.as_ref().filter(|op| {
                op.sync_result.as_ref().map(|r| &r["revision"]) == Some(&json!(target.revision))
            });
            if !app.prune && prune_only {
                skipped = Some("only pruning is needed and automated prune is off");
            } else if let Some(op) = last_attempt {
                if op.phase != Phase::Succeeded {
                    sync_error = Some(format!(
                        "Failed last sync attempt to [{}]: {}",
                        target.revision, op.message
                    ));
                    skipped = Some("the last sync attempt to it failed");
                } else if !app.self_heal {
                    // The most recent sync is already to this commit: a live object that
                    // drifted since waits for the next commit's sync.
                    skipped =
                        Some("the most recent sync is already to this commit and selfHeal is off");
                } else if op.request.operation["initiatedBy"]["automated"] == true
                    && op.request.resources.is_some()
                {
                    // A self-heal that left the app OutOfSync: Argo CD tries again after a
                    // back-off; the sandbox does not (no loop).
                    skipped = Some("the last self-heal left it OutOfSync");
                } else {
                    // Self-heal: sync again what is not Synced, naming it.
                    heal = Some(
                        entries
                            .iter()
                            .filter(|e| e.status != SyncCode::Synced)
                            .map(|e| SyncResource {
                                group: e.key.group.clone(),
                                kind: e.key.kind.clone(),
                                name: e.key.name.clone(),
                                namespace: String::new(),
                            })
                            .collect(),
                    );
                    auto = true;
                }
            } else if app.prune && !app.allow_empty && all_pruned {
                sync_error = Some(format!(
                    "Skipping sync attempt to [{}]: auto-sync will wipe out all resources",
                    target.revision
                ));
                skipped = Some("it would prune every resource and allowEmpty is off");
            } else {
                auto = true;
            }
        }
        app.set_condition("SyncError", sync_error, now);
        app.reconciled_at = Some(now.wall);
        let after = (app.shown.code, app.shown.revision.clone());
        self.update_app_health(name, now);
        if before != after {
            let extra = match (code, why, skipped) {
                (SyncCode::Synced, Why::Tip | Why::Refresh, _) => {
                    " (manifests unchanged, no operation)".to_string()
                }
                (SyncCode::OutOfSync, _, Some(why)) => format!(" (auto-sync skipped: {why})"),
                _ => String::new(),
            };
            self.log(format!(
                "app {name}: {} at {}{extra}",
                code.as_str(),
                short(&target.revision)
            ));
        }
        self.commit(name);
        if auto {
            let Ok(rendered) = target.render else {
                unreachable!("rendered above")
            };
            let prune = self.apps[name].prune;
            let mut sync = json!({"revision": target.revision, "syncStrategy": {"hook": {}}});
            if prune {
                sync["prune"] = json!(true);
            }
            if let Some(resources) = &heal {
                sync["resources"] = resources.iter().map(SyncResource::to_json).collect();
                self.log(format!(
                    "app {name}: self-heal: syncing {} again",
                    resources
                        .iter()
                        .map(|r| format!("{}/{}", r.kind, r.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            let operation = json!({
                "sync": sync,
                "initiatedBy": {"automated": true},
                "retry": self.retry_json(),
            });
            let request = Request {
                revision: target.revision.clone(),
                dry_run: false,
                prune,
                resources: heal,
                apply_strategy: false,
                operation,
            };
            self.begin_operation(name, request, Ok((target.revision, rendered)), now);
        }
    }

    // A target that does not render: no operation; sync status Unknown at the unresolved target
    // revision with a ComparisonError, the live objects (and so health) untouched. Hidden for
    // `repo_error_grace` after it first fails, unless the refresh was asked for.
    fn show_render_error(&mut self, name: &str, detail: &str, now: Now, why: Why) {
        let grace = self.cfg.repo_error_grace;
        let target_revision = self.target_revision(&self.apps[name]);
        let app = self.app(name);
        let failure = app.render_failure.get_or_insert(RenderFailure {
            since: now.mono,
            shown: false,
        });
        if !failure.shown && why != Why::Refresh && now.mono < failure.since + grace {
            return;
        }
        failure.shown = true;
        let before = (app.shown.code, app.conditions.clone());
        let entries = app
            .live
            .iter()
            .map(|l| Entry {
                key: l.key.clone(),
                version: l.version.clone(),
                status: SyncCode::Unknown,
                requires_pruning: true,
                live: true,
                ignored: l.ignored,
                health: l.assessment.clone(),
                target: None,
            })
            .collect();
        app.shown = Shown {
            code: Some(SyncCode::Unknown),
            revision: Some(target_revision.clone()),
            entries,
            images: std::mem::take(&mut app.shown.images),
        };
        app.set_condition(
            "ComparisonError",
            Some(format!(
                "{MANIFEST_ERROR_PREFIX}Manifest generation error (cached): {detail}"
            )),
            now,
        );
        app.set_condition("SyncError", None, now);
        app.reconciled_at = Some(now.wall);
        let changed = before != (app.shown.code, app.conditions.clone());
        self.update_app_health(name, now);
        if changed {
            self.log(format!(
                "app {name}: Unknown at {target_revision}: ComparisonError: {detail}"
            ));
        }
        self.commit(name);
    }

    fn retry_json(&self) -> Value {
        let base = self.cfg.retry_backoff;
        json!({
            "limit": RETRY_LIMIT,
            "backoff": {
                "duration": go_duration(base),
                "factor": RETRY_FACTOR,
                "maxDuration": go_duration(base * RETRY_MAX_OVER_BASE),
            },
        })
    }

    // Argo CD's RetryStrategy.NextRetryAt: duration * factor^count, at most maxDuration.
    fn backoff(&self, count: u32) -> Duration {
        let base = self.cfg.retry_backoff;
        let factor = RETRY_FACTOR.saturating_pow(count);
        base.saturating_mul(factor)
            .min(base.saturating_mul(RETRY_MAX_OVER_BASE))
    }

    /// `POST /api/v1/applications/{name}/sync`: sets the operation (one update) and answers the
    /// Application; the engine starts it once it has resolved the revision. `None`: no such app.
    pub(crate) fn request_sync(
        &mut self,
        name: &str,
        req: SyncRequest,
    ) -> Option<Result<Value, SyncRefusal>> {
        let app = self.apps.get(name)?;
        if app.operation.is_some() {
            return Some(Err(SyncRefusal::InProgress));
        }
        let target = self.target_revision(app);
        let automated = app.automated;
        // An app with automated sync: Argo CD refuses any other revision, compared as text,
        // unless it is a dry run.
        let effective_target = if target.is_empty() {
            "HEAD".to_string()
        } else {
            target.clone()
        };
        if automated && !req.dry_run && !req.revision.is_empty() && req.revision != effective_target
        {
            return Some(Err(SyncRefusal::Revision {
                requested: req.revision,
                target,
            }));
        }
        let revision = if req.revision.is_empty() {
            target
        } else {
            req.revision
        };
        let mut sync = json!({"revision": revision});
        if req.prune {
            sync["prune"] = json!(true);
        }
        if req.dry_run {
            sync["dryRun"] = json!(true);
        }
        if let Some(strategy) = &req.strategy {
            sync["syncStrategy"] = strategy.clone();
        }
        if !req.resources.is_empty() {
            sync["resources"] = req.resources.iter().map(SyncResource::to_json).collect();
        }
        if !req.sync_options.is_empty() {
            sync["syncOptions"] = json!(req.sync_options);
        }
        let operation = json!({
            "sync": sync,
            "initiatedBy": {"username": "admin"},
            "retry": self.retry_json(),
        });
        let request = Request {
            revision: revision.clone(),
            dry_run: req.dry_run,
            prune: req.prune,
            resources: (!req.resources.is_empty()).then_some(req.resources),
            apply_strategy: req
                .strategy
                .as_ref()
                .is_some_and(|s| s.get("apply").is_some()),
            operation: operation.clone(),
        };
        let app = self.app(name);
        app.operation = Some(operation);
        // Argo CD's SetAppOperation clears the last operation's state as it sets the new one.
        app.op = None;
        app.pending = Some(request);
        self.log(format!(
            "app {name}: sync to {} requested by admin",
            short(&revision)
        ));
        self.commit(name);
        Some(Ok(self.application_json(&self.apps[name])))
    }

    /// The requested syncs waiting to start.
    pub(crate) fn pending(&self) -> Vec<PendingSync> {
        self.apps
            .values()
            .filter_map(|app| {
                let request = app.pending.as_ref()?;
                let rev = request.revision.as_str();
                Some(PendingSync {
                    name: app.name.clone(),
                    revision: rev.to_string(),
                    means_tip: rev == self.target_revision(app)
                        || rev == self.cfg.branch
                        || rev == "HEAD",
                    path: app.git_path().map(str::to_string),
                })
            })
            .collect()
    }

    /// Starts a requested sync with what the engine resolved: the commit and its render, or
    /// `None` when the revision does not resolve. A helm app resolves by itself.
    pub(crate) fn start_pending(
        &mut self,
        name: &str,
        resolved: Option<(String, RenderResult)>,
        now: Now,
    ) {
        let Some(request) = self.apps.get_mut(name).and_then(|a| a.pending.take()) else {
            return;
        };
        let resolved = match &self.apps[name].source {
            Source::Helm { chart, version } => {
                (request.revision == *version).then(|| (version.clone(), helm_render(chart)))
            }
            Source::Path { .. } | Source::Hydrator { .. } => resolved,
        };
        let prepared = match resolved {
            None => Err(format!(
                "ComparisonError: {MANIFEST_ERROR_PREFIX}unable to resolve '{}' to a commit SHA",
                request.revision
            )),
            Some((_, Err(err))) => Err(format!(
                "ComparisonError: {MANIFEST_ERROR_PREFIX}Manifest generation error (cached): {}",
                err.message
            )),
            Some((sha, Ok(rendered))) => Ok((sha, rendered)),
        };
        self.begin_operation(name, request, prepared, now);
    }

    // The operation starts (Running, the requested revision), then its first attempt.
    fn begin_operation(
        &mut self,
        name: &str,
        request: Request,
        prepared: Result<(String, Arc<Rendered>), String>,
        now: Now,
    ) {
        let source = self.source_json(&self.apps[name]);
        let revision = request.revision.clone();
        let app = self.app(name);
        app.operation = Some(request.operation.clone());
        app.op = Some(OpRun {
            sync_result: Some(json!({"revision": request.revision, "source": source})),
            request,
            started: now.wall,
            phase: Phase::Running,
            message: String::new(),
            finished: None,
            retry_count: 0,
            retry_at: None,
            prepared,
            plan: None,
        });
        self.log(format!(
            "app {name}: operation Running at {}",
            short(&revision)
        ));
        self.commit(name);
        self.attempt(name, now, true);
    }

    fn op(&mut self, name: &str) -> &mut OpRun {
        self.app(name).op.as_mut().expect("an operation")
    }

    // One attempt of the running operation: compare (the revision becomes the commit), apply,
    // then succeed, back off for a retry, or fail.
    fn attempt(&mut self, name: &str, now: Now, first: bool) {
        let source = self.source_json(&self.apps[name]);
        let op = self.op(name);
        let request = op.request.clone();
        let (sha, rendered) = match op.prepared.clone() {
            Ok(prepared) => prepared,
            Err(message) => {
                let result = json!({"revision": request.revision, "source": source});
                self.attempt_failed(name, Phase::Error, message, result, now);
                return;
            }
        };
        if first {
            // The comparison resolved the revision: syncResult names the commit from now on.
            op.sync_result = Some(json!({"revision": sha, "source": source}));
            self.commit(name);
        }
        let prunable: Vec<(ResourceKey, String)> = self.apps[name]
            .live
            .iter()
            .filter(|l| !rendered.manifests.iter().any(|m| m.key == l.key))
            .map(|l| (l.key.clone(), l.version.clone()))
            .collect();
        let op = self.op(name);
        if request.runs_hooks()
            && let Some(plan) = Plan::new(&rendered, &prunable, &sha, op.started)
        {
            // A sync with hooks runs in steps, phase by phase.
            op.plan = Some(plan);
            self.step(name, now);
            return;
        }
        let outcome = self.apply(
            name,
            &rendered,
            request.resources.as_deref(),
            request.dry_run,
            request.prune,
            now,
        );
        let results: Vec<Value> = outcome.results.iter().map(Task::to_json).collect();
        let mut result = json!({"revision": sha, "source": source});
        if outcome.results.is_empty() {
            // Nothing to apply nor prune: gitops-engine finds no task and says so.
            self.succeed(name, &sha, result, 0, NO_MORE_TASKS_MESSAGE, now);
        } else if outcome.failures.is_empty() {
            result["resources"] = json!(results);
            self.succeed(name, &sha, result, outcome.changed, SUCCEEDED_MESSAGE, now);
        } else {
            result["resources"] = json!(results);
            let message = format!(
                "{APPLY_FAILED_MESSAGE}, reason: {}",
                outcome.failures.join(",")
            );
            self.attempt_failed(name, Phase::Failed, message, result, now);
        }
    }

    fn succeed(
        &mut self,
        name: &str,
        sha: &str,
        result: Value,
        changed: usize,
        message: &str,
        now: Now,
    ) {
        let source = self.source_json(&self.apps[name]);
        let op = self.op(name);
        let request = op.request.clone();
        let started = op.started;
        if request.records_history() {
            // History is written in its own update while the operation is still Running.
            let app = self.app(name);
            app.history.push(json!({
                "id": app.next_history_id,
                "revision": sha,
                "deployStartedAt": rfc3339(started),
                "deployedAt": rfc3339(now.wall),
                "source": source,
                "initiatedBy": request.initiated_by(),
            }));
            app.next_history_id += 1;
            if app.history.len() > HISTORY_LIMIT {
                app.history.remove(0);
            }
            self.commit(name);
        }
        let op = self.op(name);
        op.phase = Phase::Succeeded;
        op.message = message.to_string();
        op.finished = Some(now.wall);
        op.retry_at = None;
        op.sync_result = Some(result);
        op.plan = None;
        self.app(name).operation = None;
        let kind = if request.dry_run {
            " (dry run)"
        } else if request.resources.is_some() {
            " (partial)"
        } else {
            ""
        };
        let total = self.apps[name].live.len();
        self.log(format!(
            "app {name}: operation Succeeded at {}{kind} ({changed} of {total} resources changed)",
            short(sha)
        ));
        self.commit(name);
        // A completed operation (not a dry run) asks for a refresh: status and health follow.
        if !request.dry_run {
            self.reconcile(name, now, Why::AfterOperation);
        }
    }

    // A failed attempt: back off and retry while the policy allows (Running, `finishedAt` set,
    // "Retrying attempt #N"), else fail the operation.
    fn attempt_failed(
        &mut self,
        name: &str,
        phase: Phase,
        message: String,
        result: Value,
        now: Now,
    ) {
        let op = self.op(name);
        let count = op.retry_count;
        op.sync_result = Some(result);
        op.finished = Some(now.wall);
        op.plan = None;
        if count < RETRY_LIMIT {
            // As Argo CD: the message names now + duration*factor^count, while the retry is
            // scheduled from finishedAt with the count already incremented.
            let announced = now.wall + self.backoff(count);
            let wait = self.backoff(count + 1);
            let op = self.op(name);
            op.phase = Phase::Running;
            op.retry_count = count + 1;
            op.message = format!(
                "{message}. Retrying attempt #{} at {}.",
                count + 1,
                kitchen(announced)
            );
            op.retry_at = Some(now.mono + wait);
            self.log(format!(
                "app {name}: operation attempt {} failed: {message}; retrying in {}",
                count + 1,
                humantime::format_duration(wait)
            ));
            self.commit(name);
            return;
        }
        let op = self.op(name);
        op.phase = phase;
        op.message = if count > 0 {
            format!("{message} (retried {count} times).")
        } else {
            message.clone()
        };
        let dry_run = op.request.dry_run;
        let revision = op.request.revision.clone();
        self.app(name).operation = None;
        self.log(format!(
            "app {name}: operation {} at {}: {message}",
            phase.as_str(),
            short(&revision)
        ));
        self.commit(name);
        if !dry_run {
            self.reconcile(name, now, Why::AfterOperation);
        }
    }

    // One step of a sync that runs hooks, as gitops-engine's Sync() takes one each time the
    // controller looks at the operation: the running tasks are looked at (a hook that has run
    // for `hook_time` is done; a resource is done when Healthy or without health, failed when
    // Degraded), then the operation waits for what still runs, fails on a task that failed,
    // succeeds when no task is left, or runs the next phase. Each step is one update.
    fn step(&mut self, name: &str, now: Now) {
        let mut lines = Vec::new();
        let app = self.apps.get_mut(name).expect("known app");
        let App { live, op, .. } = app;
        let Some(plan) = op.as_mut().and_then(|op| op.plan.as_mut()) else {
            return;
        };
        for task in plan.tasks.iter_mut() {
            if task.state != TaskState::Running {
                continue;
            }
            match &task.hook {
                Some(hook) => {
                    if hook.done_at.is_none_or(|at| at > now.mono) {
                        continue;
                    }
                    let fails = hook_fails(&hook.object);
                    let k = &task.key;
                    match health::hook_outcome(&k.group, &k.kind, &k.name, &hook.object, fails) {
                        // gitops-engine: a hook without health succeeds, "<name> created".
                        None => {
                            task.state = TaskState::Succeeded;
                            task.message = format!("{} created", k.name);
                        }
                        Some(a) => {
                            task.state = if a.status == Health::Healthy {
                                TaskState::Succeeded
                            } else {
                                TaskState::Failed
                            };
                            if !a.message.is_empty() {
                                task.message = a.message;
                            }
                        }
                    }
                    lines.push(format!(
                        "app {name}: {} hook {} {}",
                        task.phase.as_str(),
                        kubectl_name(&task.key),
                        if task.state == TaskState::Succeeded {
                            "succeeded".to_string()
                        } else {
                            format!("failed: {}", task.message)
                        }
                    ));
                }
                None => {
                    let Some(l) = live.iter().find(|l| l.key == task.key) else {
                        continue;
                    };
                    match &l.assessment {
                        None => task.state = TaskState::Succeeded,
                        Some(a) if a.status == Health::Healthy => {
                            task.state = TaskState::Succeeded;
                            if !a.message.is_empty() {
                                task.message = a.message.clone();
                            }
                        }
                        Some(a) if a.status == Health::Degraded => {
                            task.state = TaskState::Failed;
                            if !a.message.is_empty() {
                                task.message = a.message.clone();
                            }
                        }
                        Some(_) => {}
                    }
                }
            }
        }
        for line in lines {
            self.log(line);
        }
        let plan = self.plan(name);
        let awaited = plan.awaited();
        if !awaited.is_empty() {
            let tasks: Vec<&Task> = awaited.iter().map(|&i| &plan.tasks[i]).collect();
            let message = waiting_message(&tasks, false);
            self.keep_running(name, message);
            return;
        }
        if plan.tasks.iter().any(|t| t.state == TaskState::Failed) {
            // Only tasks that failed to apply are named (gitops-engine lists the SyncFailed).
            let reasons: Vec<String> = plan
                .tasks
                .iter()
                .filter(|t| t.apply_failed)
                .map(|t| t.message.clone())
                .collect();
            self.fail_plan(name, TASKS_FAILED_MESSAGE, &reasons, now);
            return;
        }
        let next = plan
            .tasks
            .iter()
            .find(|t| t.state == TaskState::Pending)
            .map(|t| t.phase);
        match next {
            Some(phase) => self.run_phase(name, phase, now),
            None => self.succeed_plan(name, NO_MORE_TASKS_MESSAGE, now),
        }
    }

    fn plan(&mut self, name: &str) -> &mut Plan {
        self.op(name).plan.as_mut().expect("a plan")
    }

    // Runs the pending tasks of `phase` (gitops-engine's runTasks): hook objects an earlier run
    // left are deleted first, and the phase runs at the next step; else the managed objects (the
    // Sync phase) are applied and the hooks created. Then the operation fails (an object failed
    // to apply), succeeds (nothing left and no hook in this phase) or waits for the phase.
    fn run_phase(&mut self, name: &str, phase: SyncPhase, now: Now) {
        let hook_time = self.cfg.hook_time;
        let app = self.apps.get_mut(name).expect("known app");
        let App {
            op, hook_objects, ..
        } = app;
        let op = op.as_mut().expect("an operation");
        let Ok((_, rendered)) = &op.prepared else {
            unreachable!("a plan is made from what was prepared")
        };
        let rendered = rendered.clone();
        let prune = op.request.prune;
        let plan = op.plan.as_mut().expect("a plan");
        let wave: Vec<usize> = (0..plan.tasks.len())
            .filter(|&i| plan.tasks[i].state == TaskState::Pending && plan.tasks[i].phase == phase)
            .collect();
        let remaining = plan
            .tasks
            .iter()
            .any(|t| t.state == TaskState::Pending && t.phase != phase);
        // BeforeHookCreation: a hook object still in the cluster is deleted before it is created.
        let stale: Vec<usize> = wave
            .iter()
            .copied()
            .filter(|&i| {
                let t = &plan.tasks[i];
                t.hook
                    .as_ref()
                    .is_some_and(|h| h.delete_policy.before_creation)
                    && hook_objects.contains(&t.key)
            })
            .collect();
        if !stale.is_empty() {
            for &i in &stale {
                hook_objects.remove(&plan.tasks[i].key);
            }
            plan.deleting = true;
            let tasks: Vec<&Task> = stale.iter().map(|&i| &plan.tasks[i]).collect();
            let message = waiting_message(&tasks, true);
            self.keep_running(name, message);
            return;
        }
        plan.deleting = false;
        if wave.iter().any(|&i| !plan.tasks[i].is_hook()) {
            let outcome = self.apply(name, &rendered, None, false, prune, now);
            let plan = self.plan(name);
            plan.changed += outcome.changed;
            for result in outcome.results {
                if let Some(task) = plan
                    .tasks
                    .iter_mut()
                    .find(|t| !t.is_hook() && t.phase == phase && t.key == result.key)
                {
                    *task = result;
                }
            }
        }
        let mut lines = Vec::new();
        let app = self.apps.get_mut(name).expect("known app");
        let App {
            op, hook_objects, ..
        } = app;
        let plan = op.as_mut().and_then(|op| op.plan.as_mut()).expect("a plan");
        for &i in &wave {
            let task = &mut plan.tasks[i];
            let Some(hook) = task.hook.as_mut() else {
                continue;
            };
            if apply_fails(&hook.object) {
                task.apply_failed = true;
                task.state = TaskState::Failed;
                task.message = apply_denied(&task.key);
            } else {
                task.state = TaskState::Running;
                task.message = format!("{} created", kubectl_name(&task.key));
                let runs = health::is_workload(&task.key.group, &task.key.kind);
                hook.done_at = Some(now.mono + if runs { hook_time } else { Duration::ZERO });
                hook_objects.insert(task.key.clone());
            }
            lines.push(format!(
                "app {name}: {} hook {} {}",
                phase.as_str(),
                kubectl_name(&task.key),
                if task.apply_failed {
                    format!("failed to apply: {}", task.message)
                } else {
                    "created".to_string()
                }
            ));
        }
        // Pruning runs first in its wave (gitops-engine's runTasks), so its results come first.
        let (pruned, applied): (Vec<usize>, Vec<usize>) =
            wave.iter().partition(|&&i| plan.tasks[i].is_prune);
        for i in pruned.into_iter().chain(applied) {
            plan.shown(i);
        }
        for line in lines {
            self.log(line);
        }
        let plan = self.plan(name);
        let failed: Vec<String> = wave
            .iter()
            .filter(|&&i| plan.tasks[i].apply_failed)
            .map(|&i| plan.tasks[i].message.clone())
            .collect();
        if !failed.is_empty() {
            // Hooks of the phase that did start are waited for; the failure is seen after.
            let running: Vec<&Task> = wave
                .iter()
                .map(|&i| &plan.tasks[i])
                .filter(|t| t.is_hook() && t.state == TaskState::Running)
                .collect();
            if running.is_empty() {
                self.fail_plan(name, APPLY_FAILED_MESSAGE, &failed, now);
            } else {
                let message = waiting_message(&running, false);
                self.keep_running(name, message);
            }
            return;
        }
        if !remaining && !wave.iter().any(|&i| plan.tasks[i].is_hook()) {
            // The last phase had only managed objects: done as soon as they are applied.
            self.succeed_plan(name, SUCCEEDED_MESSAGE, now);
            return;
        }
        let tasks: Vec<&Task> = wave.iter().map(|&i| &plan.tasks[i]).collect();
        let message = waiting_message(&tasks, false);
        self.keep_running(name, message);
    }

    // The operation goes on: Running with `message` and the results so far (one update when
    // anything changed).
    fn keep_running(&mut self, name: &str, message: String) {
        let result = self.plan_result(name);
        let op = self.op(name);
        op.phase = Phase::Running;
        let changed = op.message != message;
        op.message = message.clone();
        op.sync_result = Some(result);
        if changed {
            self.log(format!("app {name}: operation Running: {message}"));
        }
        self.commit(name);
    }

    // `syncResult` of a sync that runs hooks: its results so far (none: no `resources`).
    fn plan_result(&self, name: &str) -> Value {
        let app = &self.apps[name];
        let source = self.source_json(app);
        let op = app.op.as_ref().expect("an operation");
        let sha = op.prepared.as_ref().map_or("", |(sha, _)| sha.as_str());
        let mut result = json!({"revision": sha, "source": source});
        if let Some(plan) = &op.plan
            && !plan.order.is_empty()
        {
            result["resources"] = json!(plan.results());
        }
        result
    }

    // Hook objects whose delete policy asks for it go once the operation ends.
    fn delete_finished_hooks(&mut self, name: &str, succeeded: bool) {
        let app = self.apps.get_mut(name).expect("known app");
        let App {
            op, hook_objects, ..
        } = app;
        let Some(plan) = op.as_ref().and_then(|op| op.plan.as_ref()) else {
            return;
        };
        for task in &plan.tasks {
            let Some(hook) = &task.hook else { continue };
            let policy = hook.delete_policy;
            let wanted = if succeeded {
                policy.on_success
            } else {
                policy.on_failure
            };
            if wanted && task.state != TaskState::Running {
                hook_objects.remove(&task.key);
            }
        }
    }

    fn succeed_plan(&mut self, name: &str, message: &str, now: Now) {
        self.delete_finished_hooks(name, true);
        let result = self.plan_result(name);
        let changed = self.plan(name).changed;
        let sha = result["revision"].as_str().unwrap_or_default().to_string();
        self.succeed(name, &sha, result, changed, message, now);
    }

    // The attempt failed: `message`, with `, reason: …` when there are reasons.
    fn fail_plan(&mut self, name: &str, message: &str, reasons: &[String], now: Now) {
        self.delete_finished_hooks(name, false);
        let result = self.plan_result(name);
        let message = if reasons.is_empty() {
            message.to_string()
        } else {
            format!("{message}, reason: {}", reasons.join(","))
        };
        self.attempt_failed(name, Phase::Failed, message, result, now);
    }

    // When a step of the app's sync with hooks can do something: at once after hook objects were
    // deleted, when a running hook finishes, when an awaited resource is (or will be, at the end
    // of its rollout) Healthy, Degraded or without health. `None`: nothing to step, or it waits
    // for something time does not change (a resource held Progressing by its annotation).
    fn progress_at(&self, app: &App, now: Now) -> Option<Instant> {
        let plan = app.op.as_ref()?.plan.as_ref()?;
        if plan.deleting {
            return Some(now.mono);
        }
        plan.awaited()
            .into_iter()
            .filter_map(|i| {
                let task = &plan.tasks[i];
                if let Some(hook) = &task.hook {
                    return hook.done_at;
                }
                let l = app.live.iter().find(|l| l.key == task.key)?;
                if l.unschedulable.is_some() {
                    // Pending pods: only a Deployment's progress deadline changes anything.
                    if let Some(at) = l.progress_deadline_at.filter(|at| *at > now.mono) {
                        return Some(at);
                    }
                } else if let Some(until) = l.rolling_until.filter(|until| *until > now.mono) {
                    return Some(until);
                }
                let held = held_at(&app.held, &l.key, now).cloned();
                match held.or_else(|| assessment_at(l, now, &self.policy)) {
                    None => Some(now.mono),
                    Some(a) if matches!(a.status, Health::Healthy | Health::Degraded) => {
                        Some(now.mono)
                    }
                    Some(_) => None,
                }
            })
            .min()
    }

    // Prunes, then applies, the selected objects (all of them unless a partial sync names some),
    // as gitops-engine's runTasks does. A live object git no longer has is deleted when the sync
    // prunes (`pruned`), else left as it is (`PruneSkipped`, `ignored (requires pruning)`).
    // Objects created or changed roll out; objects annotated to fail are left as they were. A dry
    // run changes nothing (`pruned (dry run)`).
    fn apply(
        &mut self,
        name: &str,
        rendered: &Rendered,
        only: Option<&[SyncResource]>,
        dry_run: bool,
        prune: bool,
        now: Now,
    ) -> ApplyOutcome {
        let rollout_until =
            (!self.cfg.rollout_time.is_zero()).then(|| now.mono + self.cfg.rollout_time);
        let mut counter = self.counter;
        let app = self.apps.get_mut(name).expect("known app");
        let rolls_out = !matches!(app.source, Source::Helm { .. });
        let mut outcome = ApplyOutcome::default();
        let mut live: Vec<Live> = std::mem::take(&mut app.live);
        let selected = |key: &ResourceKey| only.is_none_or(|rs| rs.iter().any(|r| r.matches(key)));
        let extra: Vec<(ResourceKey, String)> = live
            .iter()
            .filter(|l| !rendered.manifests.iter().any(|m| m.key == l.key) && selected(&l.key))
            .map(|l| (l.key.clone(), l.version.clone()))
            .collect();
        for (key, version) in extra {
            // gitops-engine's pruneObject: a live object whose sync options say `Prune=false`
            // is never pruned.
            let no_prune = live
                .iter()
                .find(|l| l.key == key)
                .is_some_and(|l| has_sync_option(&l.object, "Prune=false"));
            let (deletes, message) = match (prune, no_prune, dry_run) {
                (false, _, _) => (false, "ignored (requires pruning)"),
                (true, true, _) => (false, "ignored (no prune)"),
                (true, false, true) => (true, "pruned (dry run)"),
                (true, false, false) => (true, "pruned"),
            };
            outcome
                .results
                .push(Task::pruned(key.clone(), version, !deletes, message));
            if deletes {
                outcome.changed += 1;
                if !dry_run {
                    live.retain(|l| l.key != key);
                }
            }
        }
        for m in &rendered.manifests {
            if only.is_some_and(|rs| !rs.iter().any(|r| r.matches(&m.key))) {
                continue;
            }
            let mut result = Task::resource(m.key.clone(), m.version.clone());
            if apply_fails(&m.object) {
                let detail = apply_denied(&m.key);
                result.apply_failed = true;
                result.message = detail.clone();
                result.state = TaskState::Failed;
                outcome.failures.push(detail);
                outcome.results.push(result);
                continue;
            }
            let existing = live.iter().position(|l| l.key == m.key);
            let verb = match existing {
                None => "created",
                Some(i) if live[i].digest == m.digest => "unchanged",
                Some(_) => "configured",
            };
            result.state = TaskState::Running;
            result.message = format!(
                "{} {verb}{}",
                kubectl_name(&m.key),
                if dry_run { " (dry run)" } else { "" }
            );
            outcome.results.push(result);
            if verb == "unchanged" {
                continue;
            }
            outcome.changed += 1;
            if dry_run {
                continue;
            }
            counter += 1;
            let workload = rolls_out && health::is_workload(&m.key.group, &m.key.kind);
            let unschedulable =
                manifests::pod_annotation(&m.key.kind, &m.object, SCHEDULE_ANNOTATION)
                    .filter(|message| workload && !message.trim().is_empty())
                    .map(str::to_string);
            let is_deployment = m.key.group == "apps" && m.key.kind == "Deployment";
            let fresh = Live {
                uid: uuid_from(&format!("{}/{:?}", app.uid, m.key)),
                key: m.key.clone(),
                version: m.version.clone(),
                resource_version: counter,
                digest: m.digest,
                images: manifests::images(&m.key.kind, &m.object),
                replicas: m
                    .object
                    .pointer("/spec/replicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(1),
                forced: health::fixed_health(&m.key.group, &m.key.kind, &m.object),
                ignored: health::ignored_by_app_health(&m.object),
                rolling_until: if workload { rollout_until } else { None },
                rolling: false,
                unschedulable,
                progress_deadline_at: (workload && is_deployment)
                    .then(|| now.mono + progress_deadline(&m.object)),
                assessment: None,
                object: m.object.clone(),
                created: existing.map_or(now.wall, |i| live[i].created),
                applied: now.wall,
                previous: None,
            };
            // The revision this one replaces, while the new Pods roll out: the old one if its
            // Pods were running, else the one it was still replacing.
            let mut fresh = fresh;
            if let Some(i) = existing.filter(|_| is_deployment) {
                let old = &mut live[i];
                fresh.previous = if PodState::of(old, &self.policy).ready() {
                    let mut was = Box::new(Live {
                        previous: None,
                        ..old.clone()
                    });
                    was.rolling = false;
                    Some(was)
                } else {
                    old.previous.take()
                };
            }
            match existing {
                Some(i) => live[i] = fresh,
                None => live.push(fresh),
            }
        }
        live.sort_by(|a, b| a.key.cmp(&b.key));
        app.live = live;
        self.counter = counter;
        if !dry_run {
            app.health_due = true;
            self.settle_live(name, now);
        }
        outcome
    }

    // Recomputes every live resource's health and rollout; returns whether any changed.
    fn settle_live(&mut self, name: &str, now: Now) -> bool {
        let app = self.apps.get_mut(name).expect("known app");
        app.held.retain(|h| now.mono < h.until);
        let mut changed = false;
        for l in &mut app.live {
            let assessment = held_at(&app.held, &l.key, now)
                .cloned()
                .or_else(|| assessment_at(l, now, &self.policy));
            let rolling = l.rolling_until.is_some_and(|until| now.mono < until);
            if assessment != l.assessment || rolling != l.rolling {
                changed = true;
                app.health_due = true;
                l.assessment = assessment;
                l.rolling = rolling;
                self.counter += 1;
                l.resource_version = self.counter;
            }
        }
        changed
    }

    // What a look at the live objects shows (Argo CD refreshes it on reconciles and on resource
    // changes): the images of the summary, and app health from the managed resources of the last
    // comparison, each with its live object's current health (Missing when it does not exist).
    // Logs a health change.
    fn update_app_health(&mut self, name: &str, now: Now) {
        let version = self.cfg.version;
        let app = self.apps.get_mut(name).expect("known app");
        app.health_due = false;
        if app.shown.code.is_none() {
            return; // never compared: nothing is known yet
        }
        let mut images: Vec<String> = app.live.iter().flat_map(|l| l.images.clone()).collect();
        images.sort();
        images.dedup();
        app.shown.images = images;
        let missing = health::missing();
        for e in &mut app.shown.entries {
            match app.live.iter().find(|l| l.key == e.key) {
                Some(l) => {
                    e.live = true;
                    e.health = l.assessment.clone();
                    if version.ignore_healthcheck_on_live() {
                        e.ignored = l.ignored;
                    }
                }
                None => {
                    e.live = false;
                    e.health = Some(missing.clone());
                }
            }
        }
        let status = health::aggregate(
            app.shown.entries.iter().map(|e| Contribution {
                live: e.live,
                ignored: e.ignored,
                health: e.health.as_ref(),
            }),
            version.missing_counts_in_app_health(),
        );
        if status == app.health {
            return;
        }
        // The log names what made the app this status: the first resource reporting it.
        let cause = app
            .shown
            .entries
            .iter()
            .filter(|e| !e.ignored)
            .filter_map(|e| e.health.as_ref().map(|h| (e, h)))
            .find(|(_, h)| h.status == status && !h.message.is_empty())
            .map(|(e, h)| format!(" ({}/{}: {})", e.key.kind, e.key.name, h.message))
            .unwrap_or_default();
        let line = format!(
            "app {name}: health {} -> {}{cause}",
            app.health.as_str(),
            status.as_str()
        );
        app.health = status;
        app.health_since = now.wall;
        self.log(line);
    }

    /// Time-driven (rollouts finishing) and registry-driven health changes: one update per app
    /// whose JSON changed. Not a reconciliation: reconciledAt stays.
    ///
    /// Only an app whose live objects changed since its health was last worked out
    /// (`health_due`: an apply, or here a rollout's turn, a hold's end, the registry) is looked
    /// at again and its JSON built (to compare, to publish); a comparison works out its app's
    /// health and commits where it is made. At 1,000 apps, building every app's JSON on every
    /// health tick held the world for about a tenth of a second, and every stream's update
    /// waited for it.
    pub(crate) fn refresh_health(&mut self, now: Now) {
        let names: Vec<String> = self.apps.keys().cloned().collect();
        for name in names {
            self.settle_live(&name, now);
            if self.apps[&name].health_due {
                self.update_app_health(&name, now);
                self.commit(&name);
            }
        }
    }

    /// `POST /sandbox/v1/health`: for `hold.length` the live resource of the app named by kind,
    /// name (and namespace, when given) reports `hold.health`, wherever its own health shows:
    /// `status.resources[]` (inline, before 3.0), the resource tree, Get's and the stream's
    /// re-fill, and the app's health, aggregated as any resource's (a live resource reporting
    /// `Missing` counts in every version, as in Argo CD). One update now when that changes the
    /// Application, one when the hold ends (`tick`, at `next_deadline`). A new hold on the same
    /// resource replaces the old one. `Err`: a sentence naming the parameter that is wrong.
    pub(crate) fn hold_health(
        &mut self,
        app_name: &str,
        hold: HoldHealth,
        now: Now,
    ) -> Result<(), String> {
        let Some(app) = self.apps.get_mut(app_name) else {
            return Err(format!("app: no app named {app_name:?}"));
        };
        let held = Held {
            kind: hold.kind,
            name: hold.name,
            namespace: hold.namespace,
            assessment: Assessment::new(
                hold.health,
                if hold.message.is_empty() {
                    format!(
                        "health held by the sandbox for {}",
                        humantime::format_duration(hold.length)
                    )
                } else {
                    hold.message
                },
            ),
            until: now.mono + hold.length,
        };
        let Some(key) = app
            .live
            .iter()
            .map(|l| &l.key)
            .find(|key| held.matches(key))
            .cloned()
        else {
            let namespace = held
                .namespace
                .as_deref()
                .map_or(String::new(), |ns| format!(" in namespace {ns}"));
            return Err(format!(
                "kind, name: app {app_name} has no live {} named {:?}{namespace}",
                held.kind, held.name
            ));
        };
        app.held.retain(|h| !h.matches(&key));
        let line = format!(
            "app {app_name}: {} {} held {} for {}",
            key.kind,
            key.name,
            held.assessment.status.as_str(),
            humantime::format_duration(hold.length)
        );
        app.held.push(held);
        self.log(line);
        self.settle_live(app_name, now);
        self.update_app_health(app_name, now);
        self.commit(app_name);
        Ok(())
    }

    /// `POST /sandbox/v1/delete`: a human deletes the live object of the app named by kind,
    /// name (and namespace, when given) out of band, as `kubectl delete` does. Argo CD's
    /// controller sees the deletion in its cluster cache and reconciles the app at once: the
    /// resource is `Missing` and `OutOfSync` in `status.resources[]` and the tree, the app
    /// `OutOfSync`, its health aggregated per version (from 3.4 a resource that does not exist is
    /// left out); automated sync then re-creates it only with `selfHeal` (a sync naming what is
    /// not Synced), else with the next commit's sync. A hold on it ends. `Err`: a sentence
    /// naming the parameter that is wrong.
    pub(crate) fn delete_resource(
        &mut self,
        app_name: &str,
        kind: &str,
        name: &str,
        namespace: Option<&str>,
        now: Now,
    ) -> Result<ResourceKey, String> {
        let Some(app) = self.apps.get_mut(app_name) else {
            return Err(format!("app: no app named {app_name:?}"));
        };
        let found = app.live.iter().position(|l| {
            l.key.kind == kind
                && l.key.name == name
                && namespace.is_none_or(|ns| ns == l.key.namespace)
        });
        let Some(index) = found else {
            let namespace = namespace.map_or(String::new(), |ns| format!(" in namespace {ns}"));
            return Err(format!(
                "kind, name: app {app_name} has no live {kind} named {name:?}{namespace}"
            ));
        };
        let live = app.live.remove(index);
        app.held.retain(|h| !h.matches(&live.key));
        self.counter += 1;
        self.log(format!(
            "app {app_name}: {} {} deleted by hand (kubectl delete)",
            live.key.kind, live.key.name
        ));
        self.reconcile(app_name, now, Why::LiveChange);
        Ok(live.key)
    }

    /// Fires whatever is due: retries whose back-off ended, render errors whose grace ended,
    /// rollouts that finished, then the steps of syncs with hooks that can go on.
    pub(crate) fn tick(&mut self, now: Now) {
        let names: Vec<String> = self.apps.keys().cloned().collect();
        for name in &names {
            let due = self.apps[name]
                .op
                .as_ref()
                .and_then(|op| op.retry_at)
                .is_some_and(|at| at <= now.mono);
            if due {
                // The retry starts: finishedAt goes (its own update), then the attempt.
                let op = self.op(name);
                op.retry_at = None;
                op.finished = None;
                self.log(format!(
                    "app {name}: retrying the operation (attempt {})",
                    self.apps[name].op.as_ref().map_or(0, |op| op.retry_count) + 1
                ));
                self.commit(name);
                self.attempt(name, now, false);
            }
        }
        let grace = self.cfg.repo_error_grace;
        for name in &names {
            let due = self.apps[name]
                .render_failure
                .as_ref()
                .is_some_and(|f| !f.shown && f.since + grace <= now.mono);
            if due {
                self.reconcile(name, now, Why::Deadline);
            }
        }
        self.refresh_health(now);
        for name in &names {
            if self
                .progress_at(&self.apps[name], now)
                .is_some_and(|at| at <= now.mono)
            {
                self.step(name, now);
            }
        }
    }

    /// The next moment `tick` has something to do.
    pub(crate) fn next_deadline(&self, now: Now) -> Option<Instant> {
        let grace = self.cfg.repo_error_grace;
        let rollouts = self
            .apps
            .values()
            .flat_map(|a| a.live.iter())
            .filter_map(|l| l.rolling_until)
            .filter(|until| *until > now.mono);
        let progress_deadlines = self
            .apps
            .values()
            .flat_map(|a| a.live.iter())
            .filter(|l| l.unschedulable.is_some())
            .filter_map(|l| l.progress_deadline_at)
            .filter(|at| *at > now.mono);
        let retries = self
            .apps
            .values()
            .filter_map(|a| a.op.as_ref().and_then(|op| op.retry_at));
        let render_errors = self
            .apps
            .values()
            .filter_map(|a| a.render_failure.as_ref())
            .filter(|f| !f.shown)
            .map(|f| f.since + grace);
        let steps = self.apps.values().filter_map(|a| self.progress_at(a, now));
        let holds_ending = self
            .apps
            .values()
            .flat_map(|a| a.held.iter())
            .map(|h| h.until)
            .filter(|until| *until > now.mono);
        rollouts
            .chain(holds_ending)
            .chain(progress_deadlines)
            .chain(retries)
            .chain(render_errors)
            .chain(steps)
            .min()
    }

    // Publishes the app if its JSON changed: bumps the resourceVersion and tells subscribers.
    fn commit(&mut self, name: &str) {
        let mut json = self.application_json(&self.apps[name]);
        json["metadata"]["resourceVersion"] = json!("");
        let digest: [u8; 32] =
            Sha256::digest(serde_json::to_vec(&json).expect("a JSON value serializes")).into();
        if self.apps[name].published == Some(digest) {
            return;
        }
        self.counter += 1;
        let counter = self.counter;
        let app = self.app(name);
        app.resource_version = counter;
        app.published = Some(digest);
        // The JSON as `application_json` now builds it: only its resourceVersion differs.
        json["metadata"]["resourceVersion"] = json!(counter.to_string());
        let change = Change {
            name: name.to_string(),
            application: Arc::new(json),
        };
        // No subscriber is not an error: the update is still visible through GET. A subscriber
        // whose buffer is full misses this update, silently (Argo CD's broadcaster:
        // `select { case ch <- event: default: }`); one that went away is forgotten.
        self.subscribers
            .retain(|s| !matches!(s.try_send(change.clone()), Err(TrySendError::Closed(_))));
    }

    pub(crate) fn resource_version(&self) -> u64 {
        self.counter
    }

    /// Subscribes to every app's updates from now on, with room for `buffer` updates not yet
    /// taken: those that do not fit are dropped for this subscriber.
    pub(crate) fn subscribe(&mut self, buffer: usize) -> mpsc::Receiver<Change> {
        let (tx, rx) = mpsc::channel(buffer.max(1));
        self.subscribers.push(tx);
        rx
    }

    /// The Application as stored (and listed): from 3.0 on without resource health.
    pub(crate) fn application(&self, name: &str) -> Option<Value> {
        self.apps.get(name).map(|a| self.application_json(a))
    }

    /// The Application as Get answers it: from 3.0 on (`resourceHealthSource: appTree`)
    /// `status.resources[].health` re-filled from the resource tree as it is now.
    pub(crate) fn application_served(&self, name: &str) -> Option<Value> {
        let mut app = self.application(name)?;
        self.refill_resource_health(&mut app);
        Some(app)
    }

    /// Argo CD's API server (`inferResourcesStatusHealth`, for Get and Watch): when the
    /// Application says `resourceHealthSource: appTree`, each `status.resources[]` entry gets the
    /// health of its node in the current resource tree, or none when the node has none.
    /// ignore-healthcheck plays no part: the tree's health is copied as it is.
    pub(crate) fn refill_resource_health(&self, application: &mut Value) {
        if application.pointer("/status/resourceHealthSource") != Some(&json!("appTree")) {
            return;
        }
        let Some(app) = application
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .and_then(|n| self.apps.get(n))
        else {
            return;
        };
        let health: std::collections::HashMap<ResourceKey, Value> = self
            .tree_nodes(app)
            .into_iter()
            .filter_map(|n| Some((n.key, n.json.get("health")?.clone())))
            .collect();
        let Some(resources) = application
            .pointer_mut("/status/resources")
            .and_then(Value::as_array_mut)
        else {
            return;
        };
        for r in resources {
            let text = |field: &str| {
                r.get(field)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            let key = ResourceKey {
                group: text("group"),
                kind: text("kind"),
                namespace: text("namespace"),
                name: text("name"),
            };
            let health = health.get(&key).cloned();
            let Some(entry) = r.as_object_mut() else {
                continue;
            };
            match health {
                Some(h) => {
                    entry.insert("health".into(), h);
                }
                None => {
                    entry.remove("health");
                }
            }
        }
    }

    pub(crate) fn applications(&self, only: Option<&str>) -> Vec<Value> {
        self.apps
            .values()
            .filter(|a| only.is_none_or(|n| n == a.name))
            .map(|a| self.application_json(a))
            .collect()
    }

    /// `PATCH /api/v1/applications/{name}`: applies the patch to the stored Application and
    /// keeps the edited `spec` (see `patch` for what may change and what is honoured): one update
    /// when it changes anything. `automated` follows the edited spec from now on; rendering does
    /// not change. `None`: no such app; `Err`: the refusal, a sentence naming the field.
    pub(crate) fn patch_application(
        &mut self,
        name: &str,
        kind: PatchType,
        text: &str,
    ) -> Option<Result<Patched, String>> {
        let stored = self.application(name)?;
        let owned = owned_fields(&self.apps[name].source);
        let edit = match patch::edit_spec(&stored, kind, text, owned, self.cfg.version) {
            Ok(edit) => edit,
            Err(refusal) => return Some(Err(refusal)),
        };
        let app = self.app(name);
        let automation = match (app.automated, edit.automated) {
            (false, true) => "; automated sync on",
            (true, false) => "; automated sync off",
            _ => "",
        };
        app.automated = edit.automated;
        app.prune = edit.prune;
        app.allow_empty = edit.allow_empty;
        app.self_heal = edit.self_heal;
        app.edited_spec = Some(edit.spec);
        app.annotations = edit.annotations;
        let before = app.resource_version;
        self.commit(name);
        if self.apps[name].resource_version != before {
            self.log(format!(
                "app {name}: spec updated by admin ({} patch){automation}",
                kind.as_str()
            ));
        }
        Some(Ok(Patched {
            application: self.application(name)?,
            refresh: edit.refresh,
        }))
    }

    /// The source the app is compared to (`status.sync.comparedTo.source`), which is also
    /// `spec.source` except for a hydrator app.
    fn source_json(&self, app: &App) -> Value {
        let path = |p: &str| {
            if p.is_empty() {
                ".".to_string()
            } else {
                p.to_string()
            }
        };
        match &app.source {
            Source::Path { path: p } => json!({
                "repoURL": self.cfg.repo_url,
                "path": path(p),
                "targetRevision": self.cfg.branch,
                "directory": {"recurse": true},
            }),
            Source::Helm { chart, version } => json!({
                "repoURL": self.cfg.repo_url,
                "chart": chart,
                "targetRevision": version,
            }),
            Source::Hydrator { path: p } => json!({
                "repoURL": self.cfg.repo_url,
                "path": path(p),
                "targetRevision": self.target_revision(app),
            }),
        }
    }

    fn application_json(&self, app: &App) -> Value {
        let version = self.cfg.version;
        let source = self.source_json(app);
        let destination = json!({"server": DESTINATION_SERVER, "namespace": DESTINATION_NAMESPACE});
        let resources: Vec<Value> = app
            .shown
            .entries
            .iter()
            .map(|e| {
                let mut r = resource_ref(&e.key, &e.version);
                r["status"] = json!(e.status.as_str());
                if e.requires_pruning {
                    r["requiresPruning"] = json!(true);
                }
                if version.inline_resource_health()
                    && !e.ignored
                    && let Some(h) = &e.health
                {
                    let mut health = json!({"status": h.status.as_str()});
                    if !h.message.is_empty() {
                        health["message"] = json!(h.message);
                    }
                    r["health"] = health;
                }
                r
            })
            .collect();
        let mut sync = json!({
            "status": app.shown.code.unwrap_or(SyncCode::OutOfSync).as_str(),
            "comparedTo": {"source": source, "destination": destination},
        });
        // Argo CD omits an empty revision (never compared yet).
        if let Some(rev) = &app.shown.revision {
            sync["revision"] = json!(rev);
        }
        let health =
            json!({"status": app.health.as_str(), "lastTransitionTime": rfc3339(app.health_since)});
        // Argo CD leaves empty `resources` and `summary.images` out (`omitempty`).
        let mut summary = json!({});
        if !app.shown.images.is_empty() {
            summary["images"] = json!(app.shown.images);
        }
        let mut status = json!({
            "sync": sync,
            "health": health,
            "sourceType": match app.source { Source::Helm { .. } => "Helm", _ => "Directory" },
            "summary": summary,
            "controllerNamespace": APP_NAMESPACE,
        });
        if !resources.is_empty() {
            status["resources"] = json!(resources);
        }
        if !version.inline_resource_health() {
            status["resourceHealthSource"] = json!("appTree");
        }
        if !app.history.is_empty() {
            status["history"] = json!(app.history);
        }
        if !app.conditions.is_empty() {
            status["conditions"] = json!(app.conditions);
        }
        if let Some(t) = app.reconciled_at {
            status["reconciledAt"] = json!(rfc3339(t));
        }
        if let Some(op) = &app.op {
            status["operationState"] = op.to_json();
        }
        let mut spec = json!({
            "project": APP_PROJECT,
            "destination": destination,
            "syncPolicy": {"retry": self.retry_json()},
        });
        if app.automated {
            let mut automated = json!({"prune": app.prune, "selfHeal": app.self_heal});
            if app.allow_empty {
                automated["allowEmpty"] = json!(true);
            }
            spec["syncPolicy"]["automated"] = automated;
        }
        match &app.source {
            Source::Hydrator { path } => {
                let path = if path.is_empty() { "." } else { path.as_str() };
                spec["sourceHydrator"] = json!({
                    "drySource": {
                        "repoURL": self.cfg.repo_url,
                        "path": path,
                        "targetRevision": self.cfg.branch,
                    },
                    "syncSource": {
                        "targetBranch": self.target_revision(app),
                        "path": path,
                    },
                });
            }
            Source::Path { .. } | Source::Helm { .. } => spec["source"] = source,
        }
        // Edited through the API: published as edited (`automated` follows it).
        if let Some(edited) = &app.edited_spec {
            spec = edited.clone();
        }
        let mut out = json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {
                "name": app.name,
                "namespace": APP_NAMESPACE,
                "uid": app.uid,
                "resourceVersion": app.resource_version.to_string(),
                "creationTimestamp": rfc3339(app.created),
            },
            "spec": spec,
            "status": status,
        });
        if !app.annotations.is_empty() {
            out["metadata"]["annotations"] = Value::Object(app.annotations.clone());
        }
        if let Some(op) = &app.operation {
            out["operation"] = op.clone();
        }
        out
    }

    /// The resource tree's nodes: every live object (health from its own health check, none for
    /// kinds without one; ignore-healthcheck plays no part), each Deployment's ReplicaSet and
    /// that ReplicaSet's Pods, and a `Missing` node (no uid, resourceVersion, createdAt) for each
    /// resource in git not created yet. Sorted as Argo CD sorts them (`group/kind/namespace/name`).
    fn tree_nodes(&self, app: &App) -> Vec<TreeNode> {
        let mut nodes = Vec::new();
        for l in &app.live {
            let mut node = resource_ref(&l.key, &l.version);
            node["uid"] = json!(l.uid);
            node["resourceVersion"] = json!(l.resource_version.to_string());
            if !l.images.is_empty() {
                node["images"] = json!(l.images);
            }
            if let Some(a) = &l.assessment {
                node["health"] = assessment_json(a);
            }
            node["createdAt"] = json!(rfc3339(l.created));
            if l.key.group.is_empty() && l.key.kind == "Pod" {
                let containers = containers("Pod", &l.object).len();
                node["info"] = pod_info(&PodState::of(l, &self.policy), containers);
            }
            nodes.push(TreeNode {
                key: l.key.clone(),
                json: node,
            });
            nodes.extend(
                workload_children(l, &self.policy)
                    .into_iter()
                    .map(|c| c.node),
            );
        }
        let live: std::collections::BTreeSet<&ResourceKey> =
            app.live.iter().map(|l| &l.key).collect();
        for e in &app.shown.entries {
            if e.target.is_some() && !live.contains(&e.key) {
                let mut node = resource_ref(&e.key, &e.version);
                node["health"] = json!({"status": Health::Missing.as_str()});
                nodes.push(TreeNode {
                    key: e.key.clone(),
                    json: node,
                });
            }
        }
        nodes.sort_by_key(|n| full_name(&n.key));
        nodes
    }

    /// `GET /api/v1/applications/{name}/resource-tree`. Empty lists are left out, as Argo CD's
    /// `omitempty` does: there are never `orphanedNodes` (no project here enables them) nor
    /// `hosts` (no Kubernetes nodes are modelled).
    pub(crate) fn resource_tree(&self, name: &str) -> Option<Value> {
        let app = self.apps.get(name)?;
        let nodes: Vec<Value> = self.tree_nodes(app).into_iter().map(|n| n.json).collect();
        let mut tree = json!({});
        if !nodes.is_empty() {
            tree["nodes"] = json!(nodes);
        }
        Some(tree)
    }

    /// `GET /api/v1/applications/{name}/resource`: the live object of the node of the app's
    /// resource tree that `key` names (Argo CD's `FindNode`: group, kind, namespace and name),
    /// as Argo CD reads it from the cluster: a managed object as applied (a Secret's values
    /// masked, a Pod with its `status`), a child (ReplicaSet, ControllerRevision, Pod) as its
    /// controller made it. `None`: no such app.
    pub(crate) fn live_resource(
        &self,
        name: &str,
        key: &ResourceKey,
    ) -> Option<Result<Value, ResourceMiss>> {
        let app = self.apps.get(name)?;
        if let Some(l) = app.live.iter().find(|l| &l.key == key) {
            let mut object = hide_secret_data(&l.key, live_object(l));
            if l.key.group.is_empty() && l.key.kind == "Pod" {
                let state = PodState::of(l, &self.policy);
                let meta = PodMeta {
                    name: l.key.name.clone(),
                    namespace: l.key.namespace.clone(),
                    uid: l.uid.clone(),
                    created: l.applied,
                };
                if !matches!(state, PodState::Unschedulable(_)) {
                    object["spec"]["nodeName"] = json!(NODE_NAME);
                }
                object["status"] = pod_status(&state, &containers("Pod", &l.object), &meta);
            }
            return Some(Ok(object));
        }
        if let Some(child) = app
            .live
            .iter()
            .flat_map(|l| workload_children(l, &self.policy))
            .find(|c| &c.node.key == key)
        {
            return Some(Ok(child.object));
        }
        let not_created = app
            .shown
            .entries
            .iter()
            .any(|e| &e.key == key && e.target.is_some());
        Some(Err(if not_created {
            ResourceMiss::NotCreated
        } else {
            ResourceMiss::NotInTree
        }))
    }

    /// `GET /api/v1/applications/{name}/managed-resources`: one `ResourceDiff` per managed
    /// resource of the last comparison, with the objects as JSON strings (`"null"` for none).
    /// Hooks are not managed resources and no health is given. Fields at their zero value are
    /// left out (`omitempty`): `hook` always, `modified` when false, `resourceVersion` when not
    /// created.
    pub(crate) fn managed_resources(&self, name: &str) -> Option<Vec<Value>> {
        let app = self.apps.get(name)?;
        let items = app
            .shown
            .entries
            .iter()
            .map(|e| {
                let live = app.live.iter().find(|l| l.key == e.key);
                let live_state = live.map(live_object);
                let target_state = e
                    .target
                    .as_ref()
                    .map(|t| hide_secret_data(&e.key, Value::clone(t)));
                let target_state = target_state.map(|t| with_namespace(t, &e.key));
                let live_state = live_state.map(|l| hide_secret_data(&e.key, l));
                // What applying the target would leave live: the target with the server's fields.
                let predicted = match (&target_state, live) {
                    (Some(t), Some(l)) => Some(with_server_fields(t.clone(), l)),
                    (Some(t), None) => Some(t.clone()),
                    (None, _) => None,
                };
                let modified = match (&live_state, &target_state) {
                    (Some(_), Some(_)) => e.status != SyncCode::Synced,
                    _ => true,
                };
                let text = |v: &Option<Value>| {
                    v.as_ref()
                        .map_or_else(|| "null".to_string(), Value::to_string)
                };
                let mut item = json!({
                    "kind": e.key.kind,
                    "name": e.key.name,
                    "targetState": text(&target_state),
                    "liveState": text(&live_state),
                    "normalizedLiveState": text(&live_state),
                    "predictedLiveState": text(&predicted),
                });
                if !e.key.group.is_empty() {
                    item["group"] = json!(e.key.group);
                }
                if !e.key.namespace.is_empty() {
                    item["namespace"] = json!(e.key.namespace);
                }
                if let Some(l) = live {
                    item["resourceVersion"] = json!(l.resource_version.to_string());
                }
                if modified {
                    item["modified"] = json!(true);
                }
                item
            })
            .collect();
        Some(items)
    }
}

/// Why `GET …/resource` has no object to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResourceMiss {
    /// No node of the app's resource tree is that resource (Argo CD: 400 code 3).
    NotInTree,
    /// Its node is a managed resource not created yet: the cluster has no such object (Argo CD
    /// passes on the API server's NotFound: 404 code 5).
    NotCreated,
}

/// What an accepted `PATCH` answers, and whether the controller should refresh the app.
#[derive(Debug)]
pub(crate) struct Patched {
    /// The updated Application as stored: Argo CD answers what its update returned, without
    /// Get's re-fill of resource health.
    pub application: Value,
    /// Argo CD's controller refreshes the app after this edit (a source changed, automated
    /// sync was turned on): the engine fetches and reconciles it, as for `?refresh=normal`.
    pub refresh: bool,
}

const FROM_COMMAND_LINE: &str = "the command line (--repo, --branch, --app) sets it";

/// The `spec` fields the sandbox derives and cannot honour an edit of.
fn owned_fields(source: &Source) -> &'static [Owned] {
    const COMMON: [Owned; 3] = [
        Owned {
            pointer: "/project",
            why: "every sandbox app is in project default",
        },
        Owned {
            pointer: "/destination",
            why: "every sandbox app deploys to the in-cluster server, namespace default",
        },
        Owned {
            pointer: "/syncPolicy/retry",
            why: "--retry-backoff sets it",
        },
    ];
    const SOURCE: [Owned; 7] = [
        COMMON[0],
        COMMON[1],
        COMMON[2],
        Owned {
            pointer: "/source/repoURL",
            why: FROM_COMMAND_LINE,
        },
        Owned {
            pointer: "/source/path",
            why: FROM_COMMAND_LINE,
        },
        Owned {
            pointer: "/source/targetRevision",
            why: FROM_COMMAND_LINE,
        },
        Owned {
            pointer: "/source/chart",
            why: FROM_COMMAND_LINE,
        },
    ];
    const HYDRATOR: [Owned; 4] = [
        COMMON[0],
        COMMON[1],
        COMMON[2],
        Owned {
            pointer: "/sourceHydrator",
            why: FROM_COMMAND_LINE,
        },
    ];
    match source {
        Source::Path { .. } | Source::Helm { .. } => &SOURCE,
        Source::Hydrator { .. } => &HYDRATOR,
    }
}

/// The health a live object reports at `now` (its rollout may have ended since it was last looked at).
fn assessment_at(l: &Live, now: Now, policy: &ImagePolicy) -> Option<Assessment> {
    health::assess(
        &Subject {
            group: &l.key.group,
            kind: &l.key.kind,
            name: &l.key.name,
            images: &l.images,
            replicas: l.replicas,
            forced: l.forced.as_ref(),
            rolling_out: l.rolling_until.is_some_and(|until| now.mono < until),
            unschedulable: l.unschedulable.is_some(),
            past_progress_deadline: l.progress_deadline_at.is_some_and(|at| now.mono >= at),
            on_delete: l.object.pointer("/spec/updateStrategy/type") == Some(&json!("OnDelete")),
        },
        policy,
    )
}

/// The Deployment controller's default `spec.progressDeadlineSeconds`.
const DEFAULT_PROGRESS_DEADLINE: Duration = Duration::from_secs(600);

/// A Deployment's `spec.progressDeadlineSeconds` (600 when absent or not above zero).
fn progress_deadline(object: &Value) -> Duration {
    object
        .pointer("/spec/progressDeadlineSeconds")
        .and_then(Value::as_u64)
        .filter(|s| *s > 0)
        .map_or(DEFAULT_PROGRESS_DEADLINE, Duration::from_secs)
}

/// One node of a resource tree, with the key the Get/Watch re-fill looks it up by.
struct TreeNode {
    key: ResourceKey,
    json: Value,
}

fn full_name(key: &ResourceKey) -> String {
    format!("{}/{}/{}/{}", key.group, key.kind, key.namespace, key.name)
}

fn assessment_json(a: &Assessment) -> Value {
    let mut h = json!({"status": a.status.as_str()});
    if !a.message.is_empty() {
        h["message"] = json!(a.message);
    }
    h
}

/// Kubernetes' alphabet for generated name suffixes (no vowels, no look-alikes).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn name_suffix(seed: &[u8], len: usize) -> String {
    let digest = Sha256::digest(seed);
    digest
        .iter()
        .take(len)
        .map(|b| NAME_ALPHABET[usize::from(*b) % NAME_ALPHABET.len()] as char)
        .collect()
}

/// A running container's `imageID`, as containerd's CRI reports it: `<repository>@sha256:…`.
/// An image pinned by digest runs that digest (its tag, if any, dropped); one named by a tag
/// runs the digest the tag resolves to — in the sandbox, one derived from the reference, the
/// same for the same tag (`docs/sandbox-fidelity.md#image-id`).
pub fn image_id(image: &str) -> String {
    if let Some((name, digest)) = image.split_once('@') {
        return format!("{}@{digest}", strip_tag(name));
    }
    let digest: String = Sha256::digest(format!("sandbox-image:{image}").as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{}@sha256:{digest}", strip_tag(image))
}

/// `registry:5000/web:1.0` → `registry:5000/web`: a tag is after the last `/`.
fn strip_tag(name: &str) -> &str {
    let last = name.rfind('/').map_or(0, |i| i + 1);
    match name[last..].find(':') {
        Some(i) => &name[..last + i],
        None => name,
    }
}

/// At most this many Pods are shown under a workload.
const MAX_PODS_SHOWN: i64 = 10;

/// The node the sandbox's scheduled Pods run on (Argo CD shows it in a Pod's `info`).
const NODE_NAME: &str = "sandbox";

/// What a workload's Pods are doing, as the scheduler and the kubelet would report it.
#[derive(Debug, Clone, PartialEq)]
enum PodState {
    /// Not scheduled ([`SCHEDULE_ANNOTATION`]): the scheduler's message.
    Unschedulable(String),
    /// Scheduled, its containers being created (the rollout time).
    Creating,
    /// Its image does not exist: the image.
    PullBackOff(String),
    Running,
    /// Held Degraded by the health annotation: its container keeps failing.
    CrashLoop,
    /// Held Missing or Unknown by the health annotation.
    Other(Health),
}

impl PodState {
    fn of(l: &Live, policy: &ImagePolicy) -> PodState {
        if let Some(message) = &l.unschedulable {
            return PodState::Unschedulable(message.clone());
        }
        if let Some(forced) = &l.forced {
            return match forced.status {
                Health::Healthy | Health::Suspended => PodState::Running,
                Health::Progressing => PodState::Creating,
                Health::Degraded => PodState::CrashLoop,
                other => PodState::Other(other),
            };
        }
        if l.rolling {
            return PodState::Creating;
        }
        match l.images.iter().find(|image| !policy.exists(image)) {
            Some(image) => PodState::PullBackOff(image.clone()),
            None => PodState::Running,
        }
    }

    fn ready(&self) -> bool {
        *self == PodState::Running
    }

    /// kubectl's STATUS column, Argo CD's `Status Reason`.
    fn reason(&self) -> &'static str {
        match self {
            PodState::Unschedulable(_) => "Pending",
            PodState::Creating => "ContainerCreating",
            PodState::PullBackOff(_) => "ImagePullBackOff",
            PodState::Running => "Running",
            PodState::CrashLoop => "CrashLoopBackOff",
            PodState::Other(_) => "Unknown",
        }
    }

    /// The waiting state of its containers, when they wait: (reason, message).
    fn waiting(
        &self,
        container: &str,
        pod: &str,
        namespace: &str,
        uid: &str,
    ) -> Option<(&'static str, String)> {
        match self {
            PodState::Creating => Some(("ContainerCreating", String::new())),
            PodState::PullBackOff(image) => Some((
                "ImagePullBackOff",
                format!("Back-off pulling image {image:?}"),
            )),
            PodState::CrashLoop => Some((
                "CrashLoopBackOff",
                format!(
                    "back-off 5m0s restarting failed container={container} pod={pod}_{namespace}({uid})"
                ),
            )),
            _ => None,
        }
    }

    /// gitops-engine's Pod health check on such a Pod (restartPolicy Always): Pending is
    /// Progressing with `status.message` (the scheduler sets none); a container waiting in a
    /// back-off is Degraded with its message; a ready Pod is Healthy.
    fn health(&self, container: &str, pod: &str, namespace: &str, uid: &str) -> Assessment {
        match self {
            PodState::Unschedulable(_) | PodState::Creating => {
                Assessment::new(Health::Progressing, "")
            }
            PodState::PullBackOff(_) | PodState::CrashLoop => Assessment::new(
                Health::Degraded,
                self.waiting(container, pod, namespace, uid)
                    .map(|(_, message)| message)
                    .unwrap_or_default(),
            ),
            PodState::Running => Assessment::new(Health::Healthy, ""),
            PodState::Other(status) => Assessment::new(*status, ""),
        }
    }
}

/// The containers of a workload's pod spec: (name, image).
fn containers(kind: &str, object: &Value) -> Vec<(String, String)> {
    manifests::pod_spec(kind, object)
        .and_then(|spec| spec.get("containers"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let text = |field: &str| {
                c.get(field)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            (text("name"), text("image"))
        })
        .collect()
}

/// Argo CD's `info` of a Pod node (controller/cache/info.go `populatePodInfo`): its status
/// reason, its node (no value before it is scheduled: `omitempty`) and its ready containers.
fn pod_info(state: &PodState, containers: usize) -> Value {
    let mut node = json!({"name": "Node"});
    if !matches!(state, PodState::Unschedulable(_)) {
        node["value"] = json!(NODE_NAME);
    }
    let ready = if state.ready() { containers } else { 0 };
    json!([
        {"name": "Status Reason", "value": state.reason()},
        node,
        {"name": "Containers", "value": format!("{ready}/{containers}")},
    ])
}

/// A Pod's `status`, as the scheduler and the kubelet leave it in each state.
fn pod_status(state: &PodState, containers: &[(String, String)], meta: &PodMeta) -> Value {
    let since = rfc3339(meta.created);
    let condition = |kind: &str, ok: bool| {
        json!({"type": kind, "status": if ok { "True" } else { "False" },
            "lastProbeTime": null, "lastTransitionTime": since})
    };
    if let PodState::Unschedulable(message) = state {
        let mut scheduled = condition("PodScheduled", false);
        scheduled["reason"] = json!("Unschedulable");
        scheduled["message"] = json!(message);
        return json!({"phase": "Pending", "conditions": [scheduled], "qosClass": "BestEffort"});
    }
    let ready = state.ready();
    let names: Vec<&str> = containers.iter().map(|(n, _)| n.as_str()).collect();
    let mut ready_condition = condition("Ready", ready);
    let mut containers_ready = condition("ContainersReady", ready);
    if !ready {
        for c in [&mut ready_condition, &mut containers_ready] {
            c["reason"] = json!("ContainersNotReady");
            c["message"] = json!(format!(
                "containers with unready status: [{}]",
                names.join(" ")
            ));
        }
    }
    let statuses: Vec<Value> = containers
        .iter()
        .map(|(name, image)| {
            let container_state = match state.waiting(name, &meta.name, &meta.namespace, &meta.uid)
            {
                Some((reason, message)) if message.is_empty() => {
                    json!({"waiting": {"reason": reason}})
                }
                Some((reason, message)) => {
                    json!({"waiting": {"reason": reason, "message": message}})
                }
                None => json!({"running": {"startedAt": since}}),
            };
            // The kubelet reports the image's repository digest once the image is pulled and
            // the container created (a crash-looping one keeps it); empty while it waits for
            // its image (`ErrImagePull`, `ContainerCreating`).
            let image_id = if matches!(state, PodState::Running | PodState::CrashLoop) {
                image_id(image)
            } else {
                String::new()
            };
            json!({"name": name, "image": image, "imageID": image_id, "ready": ready,
                "restartCount": 0, "started": ready, "state": container_state})
        })
        .collect();
    let phase = match state {
        PodState::Creating | PodState::PullBackOff(_) => "Pending",
        _ => "Running",
    };
    json!({
        "phase": phase,
        "conditions": [condition("Initialized", true), ready_condition, containers_ready,
            condition("PodScheduled", true)],
        "startTime": since,
        "containerStatuses": statuses,
        "qosClass": "BestEffort",
    })
}

/// The identity of a Pod the sandbox shows.
struct PodMeta {
    name: String,
    namespace: String,
    uid: String,
    created: SystemTime,
}

/// A child object of a workload: its tree node and the object `GET …/resource` answers.
struct Child {
    node: TreeNode,
    object: Value,
}

fn owner_reference(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": uid,
        "controller": true, "blockOwnerDeletion": true})
}

// The objects a workload's controller creates: a Deployment's current ReplicaSet (named after
// its pod template, as `pod-template-hash`) and that one's Pods; a StatefulSet's
// ControllerRevision and its Pods `<name>-0`, `<name>-1`, … (one only while they are not
// running, with the default `OrderedReady` pod management: the next is created once the one
// before is ready). Nodes carry `parentRefs` naming their owner; a ReplicaSet the Deployment's
// health status, a Pod its own health and `info`.
fn workload_children(l: &Live, policy: &ImagePolicy) -> Vec<Child> {
    let is = |kind: &str| l.key.group == "apps" && l.key.kind == kind;
    if !is("Deployment") && !is("StatefulSet") {
        return Vec::new();
    }
    let namespace = l.key.namespace.clone();
    let state = PodState::of(l, policy);
    let containers = containers(&l.key.kind, &l.object);
    let first_container = containers
        .first()
        .map_or("app", |(n, _)| n.as_str())
        .to_string();
    let template = l
        .object
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(json!({}));
    let revision = format!("{}-{}", l.key.name, name_suffix(&l.digest, 10));
    let seed = if is("Deployment") {
        "replicaset"
    } else {
        "controllerrevision"
    };
    let revision_uid = uuid_from(&format!("{}/{seed}/{revision}", l.uid));
    let parent = |group: &str, kind: &str, name: &str, uid: &str| {
        let mut r = json!({"kind": kind, "name": name, "uid": uid});
        if !group.is_empty() {
            r["group"] = json!(group);
        }
        if !namespace.is_empty() {
            r["namespace"] = json!(namespace);
        }
        r
    };
    let metadata = |name: &str, uid: &str, owner: Value| {
        json!({"name": name, "namespace": namespace, "uid": uid,
            "resourceVersion": l.resource_version.to_string(),
            "creationTimestamp": rfc3339(l.applied), "ownerReferences": [owner]})
    };
    let node = |key: ResourceKey, uid: &str, parent_ref: Value| {
        let mut node = resource_ref(&key, "v1");
        node["uid"] = json!(uid);
        node["resourceVersion"] = json!(l.resource_version.to_string());
        node["parentRefs"] = json!([parent_ref]);
        node["createdAt"] = json!(rfc3339(l.applied));
        TreeNode { key, json: node }
    };
    let key = |group: &str, kind: &str, name: &str| ResourceKey {
        group: group.into(),
        kind: kind.into(),
        namespace: namespace.clone(),
        name: name.into(),
    };
    let mut children = Vec::new();
    // The Pods' owner and the label naming the revision they run.
    let (pod_owner, pod_parent, hash_label, pod_names): (
        Value,
        Value,
        (&str, String),
        Vec<String>,
    );
    if is("Deployment") {
        let mut rs = node(
            key("apps", "ReplicaSet", &revision),
            &revision_uid,
            parent("apps", "Deployment", &l.key.name, &l.uid),
        );
        if !l.images.is_empty() {
            rs.json["images"] = json!(l.images);
        }
        if let Some(a) = &l.assessment {
            rs.json["health"] = json!({"status": a.status.as_str()});
        }
        let mut meta = metadata(
            &revision,
            &revision_uid,
            owner_reference("apps/v1", "Deployment", &l.key.name, &l.uid),
        );
        let hash = revision[l.key.name.len() + 1..].to_string();
        meta["labels"] = json!({"pod-template-hash": hash});
        children.push(Child {
            node: rs,
            object: json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta,
                "spec": {"replicas": l.replicas, "template": template}}),
        });
        pod_owner = owner_reference("apps/v1", "ReplicaSet", &revision, &revision_uid);
        pod_parent = parent("apps", "ReplicaSet", &revision, &revision_uid);
        hash_label = ("pod-template-hash", hash);
        pod_names = (0..l.replicas.clamp(0, MAX_PODS_SHOWN))
            .map(|i| {
                format!(
                    "{revision}-{}",
                    name_suffix(format!("{revision_uid}/{i}").as_bytes(), 5)
                )
            })
            .collect();
    } else {
        let cr = node(
            key("apps", "ControllerRevision", &revision),
            &revision_uid,
            parent("apps", "StatefulSet", &l.key.name, &l.uid),
        );
        children.push(Child {
            node: cr,
            object: json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": metadata(&revision, &revision_uid,
                    owner_reference("apps/v1", "StatefulSet", &l.key.name, &l.uid)),
                "revision": 1}),
        });
        pod_owner = owner_reference("apps/v1", "StatefulSet", &l.key.name, &l.uid);
        pod_parent = parent("apps", "StatefulSet", &l.key.name, &l.uid);
        hash_label = ("controller-revision-hash", revision.clone());
        let parallel = l.object.pointer("/spec/podManagementPolicy") == Some(&json!("Parallel"));
        let created = if state.ready() || parallel {
            l.replicas
        } else {
            l.replicas.min(1)
        };
        pod_names = (0..created.clamp(0, MAX_PODS_SHOWN))
            .map(|i| format!("{}-{i}", l.key.name))
            .collect();
    }
    // A Deployment rolling out keeps the last revision whose Pods ran until the new ones are.
    if is("Deployment")
        && !state.ready()
        && let Some(previous) = &l.previous
    {
        children.extend(workload_children(previous, policy));
    }
    for (i, pod_name) in pod_names.into_iter().enumerate() {
        let uid = uuid_from(&format!("{revision_uid}/pod/{i}"));
        let pod_meta = PodMeta {
            name: pod_name.clone(),
            namespace: namespace.clone(),
            uid: uid.clone(),
            created: l.applied,
        };
        let mut pod = node(key("", "Pod", &pod_name), &uid, pod_parent.clone());
        if !l.images.is_empty() {
            pod.json["images"] = json!(l.images);
        }
        pod.json["info"] = pod_info(&state, containers.len());
        pod.json["health"] =
            assessment_json(&state.health(&first_container, &pod_name, &namespace, &uid));
        let mut meta = metadata(&pod_name, &uid, pod_owner.clone());
        let mut labels = template
            .pointer("/metadata/labels")
            .cloned()
            .unwrap_or(json!({}));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(hash_label.0.to_string(), json!(hash_label.1));
        }
        meta["labels"] = labels;
        if let Some(annotations) = template.pointer("/metadata/annotations") {
            meta["annotations"] = annotations.clone();
        }
        let mut spec = template.get("spec").cloned().unwrap_or(json!({}));
        if !matches!(state, PodState::Unschedulable(_)) {
            spec["nodeName"] = json!(NODE_NAME);
        }
        children.push(Child {
            node: pod,
            object: json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
                "status": pod_status(&state, &containers, &pod_meta)}),
        });
    }
    children
}

fn with_namespace(mut object: Value, key: &ResourceKey) -> Value {
    if !key.namespace.is_empty()
        && let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.insert("namespace".into(), json!(key.namespace));
    }
    object
}

// The fields the API server sets on a live object.
fn with_server_fields(object: Value, l: &Live) -> Value {
    let mut object = with_namespace(object, &l.key);
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("uid".into(), json!(l.uid));
        meta.insert(
            "resourceVersion".into(),
            json!(l.resource_version.to_string()),
        );
        meta.insert("creationTimestamp".into(), json!(rfc3339(l.created)));
    }
    object
}

/// The live object: as applied from git (annotations included), with the server's fields.
fn live_object(l: &Live) -> Value {
    with_server_fields(Value::clone(&l.object), l)
}

// Argo CD masks a Secret's values in managed resources.
fn hide_secret_data(key: &ResourceKey, mut object: Value) -> Value {
    if key.group.is_empty() && key.kind == "Secret" {
        for field in ["data", "stringData"] {
            if let Some(values) = object.get_mut(field).and_then(Value::as_object_mut) {
                for v in values.values_mut() {
                    *v = json!("++++++++");
                }
            }
        }
    }
    object
}

#[derive(Default)]
struct ApplyOutcome {
    /// One task result per object applied (or refused), in order.
    results: Vec<Task>,
    changed: usize,
    failures: Vec<String>,
}

// `status.resources[]` of a comparison: every object in git (Synced when the live one has the
// same content, OutOfSync otherwise, not created yet included), then live objects git no longer
// has (OutOfSync, requiresPruning); sorted as Argo CD sorts them.
fn compare(rendered: &Rendered, live: &[Live], version: ArgoCdVersion) -> Vec<Entry> {
    let mut entries: Vec<Entry> = rendered
        .manifests
        .iter()
        .map(|m| {
            let l = live.iter().find(|l| l.key == m.key);
            Entry {
                key: m.key.clone(),
                version: m.version.clone(),
                status: if l.is_some_and(|l| l.digest == m.digest) {
                    SyncCode::Synced
                } else {
                    SyncCode::OutOfSync
                },
                requires_pruning: false,
                live: l.is_some(),
                ignored: if version.ignore_healthcheck_on_live() {
                    l.is_some_and(|l| l.ignored)
                } else {
                    health::ignored_by_app_health(&m.object)
                },
                health: match l {
                    Some(l) => l.assessment.clone(),
                    None => Some(health::missing()),
                },
                target: Some(m.object.clone()),
            }
        })
        .collect();
    for l in live
        .iter()
        .filter(|l| !rendered.manifests.iter().any(|m| m.key == l.key))
    {
        entries.push(Entry {
            key: l.key.clone(),
            version: l.version.clone(),
            status: SyncCode::OutOfSync,
            requires_pruning: true,
            live: true,
            ignored: version.ignore_healthcheck_on_live() && l.ignored,
            health: l.assessment.clone(),
            target: None,
        });
    }
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    entries
}

// Argo CD leaves empty group and namespace out (`omitempty`).
fn resource_ref(key: &ResourceKey, version: &str) -> Value {
    let mut r = json!({"version": version, "kind": key.kind, "name": key.name});
    if !key.group.is_empty() {
        r["group"] = json!(key.group);
    }
    if !key.namespace.is_empty() {
        r["namespace"] = json!(key.namespace);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_containers_image_id_is_its_repository_digest() {
        let d = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
        assert_eq!(
            image_id(&format!("registry.local/web@{d}")),
            format!("registry.local/web@{d}")
        );
        assert_eq!(
            image_id(&format!("registry.local:5000/web:1.0@{d}")),
            format!("registry.local:5000/web@{d}")
        );
        let tagged = image_id("registry.local:5000/web:1.0");
        assert!(
            tagged.starts_with("registry.local:5000/web@sha256:")
                && tagged.len() == "registry.local:5000/web@sha256:".len() + 64,
            "{tagged}"
        );
        assert_eq!(
            tagged,
            image_id("registry.local:5000/web:1.0"),
            "the same tag, the same digest"
        );
        assert_ne!(tagged, image_id("registry.local:5000/web:1.1"));
    }

    const MAIN: &str = "main";

    fn config(rollout: Duration, version: ArgoCdVersion) -> WorldConfig {
        WorldConfig {
            repo_url: "/srv/origin.git".into(),
            branch: MAIN.into(),
            rollout_time: rollout,
            hook_time: Duration::from_secs(1),
            version,
            repo_error_grace: Duration::ZERO,
            retry_backoff: Duration::from_secs(5),
            manual_sync: Default::default(),
            prune: Default::default(),
            allow_empty: Default::default(),
            no_self_heal: Default::default(),
        }
    }

    fn world_with(cfg: WorldConfig, now: Now) -> World {
        let specs = [AppSpec::parse("web=apps/web").unwrap()];
        World::new(cfg, ImagePolicy::TagHeuristic, &specs, None, now)
    }

    fn world(rollout: Duration, now: Now) -> World {
        world_with(config(rollout, ArgoCdVersion::default()), now)
    }

    fn files(text: &str) -> RenderResult {
        let files = [RepoFile {
            path: "apps/web/d.yaml".into(),
            bytes: text.as_bytes().to_vec(),
        }];
        manifests::render(&files, "default").map(Arc::new)
    }

    fn deployment(image: &str, annotations: &str) -> String {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  annotations: {{{annotations}}}\nspec:\n  template:\n    spec:\n      containers: [{{name: web, image: '{image}'}}]\n"
        )
    }

    fn rendered(image: &str) -> BTreeMap<String, RenderResult> {
        BTreeMap::from([("web".to_string(), files(&deployment(image, "")))])
    }

    fn broken() -> BTreeMap<String, RenderResult> {
        BTreeMap::from([("web".to_string(), files("kind: [unclosed\n"))])
    }

    fn no_refresh(_: &str) -> bool {
        false
    }

    fn at(start: Now, offset: Duration) -> Now {
        Now {
            wall: start.wall + offset,
            mono: start.mono + offset,
        }
    }

    fn health_of(w: &World) -> String {
        w.application("web").unwrap()["status"]["health"]["status"]
            .as_str()
            .unwrap()
            .to_string()
    }

    fn drain(updates: &mut mpsc::Receiver<Change>) -> Vec<Value> {
        let mut out = Vec::new();
        while let Ok(change) = updates.try_recv() {
            out.push((*change.application).clone());
        }
        out
    }

    fn sha(c: char) -> String {
        c.to_string().repeat(40)
    }

    #[test]
    fn a_sync_lands_in_stages_each_its_own_update() {
        let t0 = Now::current();
        let mut w = world(Duration::from_secs(5), t0);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        let t1 = at(t0, Duration::from_secs(10));
        w.refresh_health(t1); // the first rollout ends
        assert_eq!(health_of(&w), "Healthy");
        let before = w.application("web").unwrap();
        let mut updates = w.subscribe(1024);
        let t2 = at(t0, Duration::from_secs(20));
        w.observe_tip(&sha('b'), &rendered("nginx:2"), &no_refresh, t2);
        let stages = drain(&mut updates);
        assert_eq!(stages.len(), 5, "{stages:#?}");
        let reconciled_t2 = json!(rfc3339(t2.wall));
        let (a, b, c, d, e) = (&stages[0], &stages[1], &stages[2], &stages[3], &stages[4]);

        // a: the comparison, no operation yet.
        assert_eq!(a["status"]["sync"]["status"], "OutOfSync");
        assert_eq!(a["status"]["sync"]["revision"], sha('b'));
        assert_eq!(a["status"]["reconciledAt"], reconciled_t2);
        assert!(a.get("operation").is_none());
        assert_eq!(
            a["status"]["operationState"],
            before["status"]["operationState"]
        );
        // b: the operation starts.
        assert_eq!(b["operation"]["sync"]["revision"], sha('b'));
        assert_eq!(b["operation"]["initiatedBy"], json!({"automated": true}));
        let op = &b["status"]["operationState"];
        assert_eq!(op["phase"], "Running");
        assert_eq!(op["startedAt"], reconciled_t2);
        assert_eq!(op["syncResult"]["revision"], sha('b'));
        assert!(op.get("finishedAt").is_none());
        // c: history while still Running.
        assert_eq!(c["status"]["history"].as_array().unwrap().len(), 2);
        assert_eq!(c["status"]["history"][1]["revision"], sha('b'));
        assert_eq!(c["status"]["operationState"]["phase"], "Running");
        // d: Succeeded, but status and health are still the comparison's.
        assert!(d.get("operation").is_none());
        assert_eq!(d["status"]["operationState"]["phase"], "Succeeded");
        assert_eq!(d["status"]["operationState"]["finishedAt"], reconciled_t2);
        assert_eq!(
            d["status"]["operationState"]["syncResult"]["resources"][0]["message"],
            "deployment.apps/web configured"
        );
        assert_eq!(d["status"]["sync"], a["status"]["sync"]);
        assert_eq!(d["status"]["health"], a["status"]["health"]);
        assert_eq!(d["status"]["health"]["status"], "Healthy");
        assert_eq!(d["status"]["summary"], json!({"images": ["nginx:1"]}));
        assert_eq!(e["status"]["summary"], json!({"images": ["nginx:2"]}));
        assert_eq!(d["status"]["reconciledAt"], reconciled_t2);
        // e: the refresh.
        assert_eq!(e["status"]["sync"]["status"], "Synced");
        assert_eq!(e["status"]["sync"]["revision"], sha('b'));
        assert_eq!(e["status"]["health"]["status"], "Progressing");
        assert_eq!(e["status"]["reconciledAt"], reconciled_t2);
        let versions: Vec<u64> = stages
            .iter()
            .map(|s| {
                s["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        assert!(versions.windows(2).all(|v| v[0] < v[1]), "{versions:?}");
    }

    #[test]
    fn a_rollout_ends_exactly_at_its_deadline_without_moving_reconciled_at() {
        let t0 = Now::current();
        let rollout = Duration::from_secs(5);
        let mut w = world(rollout, t0);
        let mut updates = w.subscribe(1024);
        w.observe_tip(
            &sha('a'),
            &rendered("nginx:does-not-exist"),
            &no_refresh,
            t0,
        );
        let phases: Vec<Value> = drain(&mut updates)
            .iter()
            .map(|a| a["status"]["operationState"]["phase"].clone())
            .collect();
        assert_eq!(
            phases,
            [
                Value::Null,
                json!("Running"),
                json!("Running"),
                json!("Succeeded"),
                json!("Succeeded")
            ]
        );
        assert_eq!(health_of(&w), "Progressing");
        assert_eq!(w.next_deadline(t0), Some(t0.mono + rollout));

        w.tick(at(t0, rollout - Duration::from_millis(1)));
        assert!(
            updates.try_recv().is_err(),
            "nothing changes before the deadline"
        );
        w.tick(at(t0, rollout + Duration::from_secs(3)));
        let change = updates.try_recv().unwrap();
        let app = &change.application;
        assert_eq!(app["status"]["health"]["status"], "Degraded");
        assert_eq!(
            app["status"]["reconciledAt"],
            json!(rfc3339(t0.wall)),
            "a health change is not a reconciliation"
        );
        assert_eq!(w.next_deadline(at(t0, rollout)), None);
    }

    #[test]
    fn an_unchanged_render_at_a_new_tip_is_one_update_without_an_operation() {
        let t0 = Now::current();
        let mut w = world(Duration::ZERO, t0);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        assert_eq!(health_of(&w), "Healthy", "no rollout time: healthy at once");
        let mut updates = w.subscribe(1024);
        w.observe_tip(
            &sha('b'),
            &rendered("nginx:1"),
            &no_refresh,
            at(t0, Duration::from_secs(1)),
        );
        let changes = drain(&mut updates);
        assert_eq!(changes.len(), 1);
        let app = &changes[0];
        assert_eq!(app["status"]["sync"]["revision"], sha('b'));
        assert_eq!(app["status"]["sync"]["status"], "Synced");
        assert_eq!(
            app["status"]["operationState"]["syncResult"]["revision"],
            sha('a')
        );
        assert_eq!(app["status"]["history"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn a_synced_manifest_is_held_once_by_the_render_the_comparison_and_the_live_object() {
        // At 10,000 apps the stand-in's memory is mostly manifests: the compared target and
        // the applied live object are the rendered one, shared, not copies of it.
        let t0 = Now::current();
        let mut w = world(Duration::ZERO, t0);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        assert_eq!(health_of(&w), "Healthy");
        let app = &w.apps["web"];
        let Some(Target {
            render: Ok(render), ..
        }) = &app.target
        else {
            panic!("the app has a rendered target");
        };
        let manifest = &render.manifests[0].object;
        let live = app.live.iter().find(|l| l.key == render.manifests[0].key);
        assert!(Arc::ptr_eq(manifest, &live.expect("applied").object));
        let entry = app
            .shown
            .entries
            .iter()
            .find(|e| e.key == render.manifests[0].key);
        let target = entry.and_then(|e| e.target.as_ref()).expect("compared");
        assert!(Arc::ptr_eq(manifest, target));
    }

    #[test]
    fn a_render_error_is_hidden_for_the_grace_then_published_by_the_clock() {
        let t0 = Now::current();
        let mut cfg = config(Duration::ZERO, ArgoCdVersion::default());
        cfg.repo_error_grace = Duration::from_secs(30);
        let mut w = world_with(cfg, t0);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        let good = w.application("web").unwrap();
        let mut updates = w.subscribe(1024);
        let t1 = at(t0, Duration::from_secs(5));
        w.observe_tip(&sha('b'), &broken(), &no_refresh, t1);
        assert!(drain(&mut updates).is_empty(), "hidden during the grace");
        assert_eq!(w.next_deadline(t1), Some(t1.mono + Duration::from_secs(30)));
        // Another failing commit does not restart the grace.
        let t2 = at(t0, Duration::from_secs(20));
        w.observe_tip(&sha('c'), &broken(), &no_refresh, t2);
        assert!(drain(&mut updates).is_empty());
        w.tick(at(t1, Duration::from_secs(29)));
        assert!(drain(&mut updates).is_empty());

        let t3 = at(t1, Duration::from_secs(30));
        w.tick(t3);
        let shown = drain(&mut updates);
        assert_eq!(shown.len(), 1);
        let app = &shown[0];
        assert_eq!(app["status"]["sync"]["status"], "Unknown");
        assert_eq!(app["status"]["sync"]["revision"], MAIN);
        assert_eq!(app["status"]["reconciledAt"], json!(rfc3339(t3.wall)));
        let condition = &app["status"]["conditions"][0];
        assert_eq!(condition["type"], "ComparisonError");
        assert!(
            condition["message"]
                .as_str()
                .unwrap()
                .starts_with("Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown desc = Manifest generation error (cached): "),
            "{condition}"
        );
        assert!(app.get("operation").is_none());
        for field in ["operationState", "history", "health"] {
            assert_eq!(app["status"][field], good["status"][field], "{field}");
        }
        assert_eq!(w.next_deadline(t3), None);

        // A commit that renders again clears it and syncs.
        let t4 = at(t3, Duration::from_secs(1));
        w.observe_tip(&sha('d'), &rendered("nginx:2"), &no_refresh, t4);
        let app = w.application("web").unwrap();
        assert!(app["status"].get("conditions").is_none(), "{app}");
        assert_eq!(app["status"]["sync"]["status"], "Synced");
        assert_eq!(app["status"]["sync"]["revision"], sha('d'));
    }

    #[test]
    fn a_failing_apply_backs_off_retries_then_fails_and_is_not_retried_for_the_same_commit() {
        let t0 = Now::current();
        let mut cfg = config(Duration::ZERO, ArgoCdVersion::default());
        cfg.retry_backoff = Duration::from_secs(1);
        let mut w = world_with(cfg, t0);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        let mut updates = w.subscribe(1024);
        let failing = BTreeMap::from([(
            "web".to_string(),
            files(&deployment("nginx:2", "sandbox.greenlight.dev/apply: fail")),
        )]);
        w.observe_tip(&sha('b'), &failing, &no_refresh, t0);
        let stages = drain(&mut updates);
        let backoff = stages.last().unwrap();
        let op = &backoff["status"]["operationState"];
        assert_eq!(op["phase"], "Running");
        assert_eq!(op["retryCount"], 1);
        assert!(
            op["message"].as_str().unwrap().starts_with(
                "one or more objects failed to apply, reason: admission webhook \"apply.sandbox.greenlight.dev\" denied the request: deployment.apps/web is annotated sandbox.greenlight.dev/apply: fail. Retrying attempt #1 at "
            ),
            "{op}"
        );
        assert_eq!(op["finishedAt"], json!(rfc3339(t0.wall)));
        assert_eq!(op["syncResult"]["revision"], sha('b'));
        assert_eq!(op["syncResult"]["resources"][0]["status"], "SyncFailed");
        assert!(backoff.get("operation").is_some());
        assert_eq!(backoff["status"]["history"].as_array().unwrap().len(), 1);
        // Argo CD schedules retry #1 at finishedAt + duration * factor^1.
        assert_eq!(w.next_deadline(t0), Some(t0.mono + Duration::from_secs(2)));

        let t1 = at(t0, Duration::from_secs(2));
        w.tick(t1);
        let retry = drain(&mut updates);
        let start = &retry[0]["status"]["operationState"];
        assert!(start.get("finishedAt").is_none(), "{start}");
        assert_eq!(start["phase"], "Running");
        let op = &retry.last().unwrap()["status"]["operationState"];
        assert_eq!(op["retryCount"], 2);
        assert!(
            op["message"]
                .as_str()
                .unwrap()
                .contains("Retrying attempt #2 at")
        );
        assert_eq!(w.next_deadline(t1), Some(t1.mono + Duration::from_secs(4)));

        let t2 = at(t1, Duration::from_secs(4));
        w.tick(t2);
        let failed = drain(&mut updates);
        let end = failed.last().unwrap();
        let op = &end["status"]["operationState"];
        assert_eq!(op["phase"], "Failed");
        assert!(
            op["message"]
                .as_str()
                .unwrap()
                .ends_with("apply: fail (retried 2 times)."),
            "{op}"
        );
        assert_eq!(op["finishedAt"], json!(rfc3339(t2.wall)));
        assert_eq!(op["syncResult"]["revision"], sha('b'));
        assert!(end.get("operation").is_none());
        assert_eq!(end["status"]["history"].as_array().unwrap().len(), 1);
        assert_eq!(end["status"]["sync"]["status"], "OutOfSync");
        assert_eq!(end["status"]["conditions"][0]["type"], "SyncError");
        assert_eq!(w.next_deadline(t2), None);

        // A refresh at the same commit starts nothing; a new commit does.
        w.refresh_matching(&|_| true, at(t2, Duration::from_secs(1)));
        assert!(w.application("web").unwrap().get("operation").is_none());
        w.observe_tip(&sha('c'), &rendered("nginx:3"), &no_refresh, t2);
        let app = w.application("web").unwrap();
        assert_eq!(app["status"]["sync"]["status"], "Synced");
        assert!(app["status"].get("conditions").is_none());
    }

    #[test]
    fn versions_differ_in_inline_resource_health_and_missing_resources() {
        let t0 = Now::current();
        let two = format!(
            "{}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  annotations: {{sandbox.greenlight.dev/apply: fail}}\n",
            deployment("nginx:1", "")
        );
        let renders = BTreeMap::from([("web".to_string(), files(&two))]);
        for (version, inline, app_health) in [
            (ArgoCdVersion::V2_14, true, "Missing"),
            (ArgoCdVersion::V3_0, false, "Missing"),
            (ArgoCdVersion::V3_4, false, "Healthy"),
            (ArgoCdVersion::V3_5, false, "Healthy"),
        ] {
            let mut w = world_with(config(Duration::ZERO, version), t0);
            // The ConfigMap never gets created (its operation backs off): it stays Missing.
            w.observe_tip(&sha('a'), &renders, &no_refresh, t0);
            w.tick(t0); // the resource-driven refresh after the Deployment was applied
            let app = w.application("web").unwrap();
            assert_eq!(health_of(&w), app_health, "{version}");
            assert_eq!(
                app["status"].get("resourceHealthSource").is_none(),
                inline,
                "{version}"
            );
            let resources = app["status"]["resources"].as_array().unwrap();
            let of = |kind: &str| resources.iter().find(|r| r["kind"] == kind).unwrap();
            if inline {
                assert_eq!(of("Deployment")["health"], json!({"status": "Healthy"}));
                assert_eq!(of("ConfigMap")["health"], json!({"status": "Missing"}));
            } else {
                assert_eq!(app["status"]["resourceHealthSource"], "appTree");
                assert!(resources.iter().all(|r| r.get("health").is_none()));
            }
        }
    }

    #[test]
    fn an_app_without_resources_is_healthy() {
        let t0 = Now::current();
        let mut w = world(Duration::ZERO, t0);
        assert_eq!(health_of(&w), "Missing", "never compared yet");
        let empty = BTreeMap::from([("web".to_string(), files("# nothing\n"))]);
        w.observe_tip(&sha('a'), &empty, &no_refresh, t0);
        assert_eq!(health_of(&w), "Healthy");
        assert_eq!(
            w.application("web").unwrap()["status"]["sync"]["status"],
            "Synced"
        );
    }

    #[test]
    fn requested_syncs_dry_run_partial_and_refused() {
        let t0 = Now::current();
        let mut w = world(Duration::ZERO, t0);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        let refused = w
            .request_sync(
                "web",
                SyncRequest {
                    revision: sha('a'),
                    ..SyncRequest::default()
                },
            )
            .unwrap()
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            format!(
                "Cannot sync to {}: auto-sync currently set to main",
                sha('a')
            )
        );
        assert!(w.request_sync("nope", SyncRequest::default()).is_none());

        let answered = w
            .request_sync(
                "web",
                SyncRequest {
                    dry_run: true,
                    ..SyncRequest::default()
                },
            )
            .unwrap()
            .unwrap();
        assert_eq!(answered["operation"]["sync"]["revision"], MAIN);
        // The last operation's state is cleared as the new one is set (Argo CD's
        // SetAppOperation): whatever operationState appears next is the requested one's.
        assert!(
            answered["status"].get("operationState").is_none(),
            "{answered}"
        );
        assert_eq!(
            answered["operation"]["initiatedBy"],
            json!({"username": "admin"})
        );
        assert_eq!(
            w.request_sync("web", SyncRequest::default())
                .unwrap()
                .unwrap_err(),
            SyncRefusal::InProgress
        );
        let pending = w.pending();
        assert_eq!((pending.len(), pending[0].means_tip), (1, true));
        let before = w.application("web").unwrap();
        w.start_pending(
            "web",
            Some((sha('a'), rendered("nginx:2")["web"].clone())),
            t0,
        );
        let app = w.application("web").unwrap();
        let op = &app["status"]["operationState"];
        assert_eq!(op["phase"], "Succeeded");
        assert_eq!(op["operation"]["sync"]["dryRun"], true);
        assert_eq!(op["syncResult"]["revision"], sha('a'));
        assert_eq!(
            op["syncResult"]["resources"][0]["message"],
            "deployment.apps/web configured (dry run)"
        );
        assert_eq!(app["status"]["history"], before["status"]["history"]);
        assert_eq!(app["status"]["sync"], before["status"]["sync"]);
        assert_eq!(app["status"]["summary"], before["status"]["summary"]);

        // An unknown revision: the operation errors (after its retries).
        w.request_sync(
            "web",
            SyncRequest {
                revision: "0123abc".into(),
                dry_run: true,
                ..SyncRequest::default()
            },
        )
        .unwrap()
        .unwrap();
        assert!(!w.pending()[0].means_tip);
        w.start_pending("web", None, t0);
        let op = w.application("web").unwrap()["status"]["operationState"].clone();
        assert_eq!(op["phase"], "Running");
        assert!(
            op["message"]
                .as_str()
                .unwrap()
                .contains("unable to resolve '0123abc' to a commit SHA"),
            "{op}"
        );
        assert_eq!(op["syncResult"]["revision"], "0123abc");
    }

    #[test]
    fn a_dry_run_to_a_commit_counts_as_its_attempted_sync() {
        // Argo CD's alreadyAttemptedSync compares the last operationState's syncResult revision
        // with the commit, dry run or not: after a dry run to the tip, automated sync without
        // selfHeal takes the tip as already synced and skips it.
        let t0 = Now::current();
        let mut cfg = config(Duration::ZERO, ArgoCdVersion::default());
        cfg.manual_sync.insert("web".into());
        let mut w = world_with(cfg, t0);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        w.request_sync("web", SyncRequest::default())
            .unwrap()
            .unwrap();
        w.start_pending(
            "web",
            Some((sha('a'), rendered("nginx:1")["web"].clone())),
            t0,
        );
        let t1 = at(t0, Duration::from_secs(1));
        w.observe_tip(&sha('b'), &rendered("nginx:2"), &no_refresh, t1);
        w.request_sync(
            "web",
            SyncRequest {
                dry_run: true,
                prune: true,
                ..SyncRequest::default()
            },
        )
        .unwrap()
        .unwrap();
        w.start_pending(
            "web",
            Some((sha('b'), rendered("nginx:2")["web"].clone())),
            t1,
        );
        let app = w.application("web").unwrap();
        assert_eq!(op_of(&app)["syncResult"]["revision"], sha('b'));
        patch(
            &mut w,
            PatchType::Json,
            json!([{"op": "add", "path": "/spec/syncPolicy/automated", "value": {}}]),
        )
        .unwrap();
        let t2 = at(t0, Duration::from_secs(2));
        w.refresh_matching(&|n| n == "web", t2);
        let app = w.application("web").unwrap();
        assert_eq!(app["status"]["sync"]["status"], "OutOfSync");
        assert_eq!(op_of(&app)["operation"]["sync"]["dryRun"], true, "{app}");
        assert_eq!(app["status"]["summary"], json!({"images": ["nginx:1"]}));
    }

    #[test]
    fn an_app_without_automated_sync_is_compared_and_synced_only_on_request() {
        let t0 = Now::current();
        let mut cfg = config(Duration::ZERO, ArgoCdVersion::default());
        cfg.manual_sync.insert("web".into());
        let mut w = world_with(cfg, t0);
        let mut updates = w.subscribe(1024);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        let app = w.application("web").unwrap();
        assert!(
            app["spec"]["syncPolicy"].get("automated").is_none(),
            "{app}"
        );
        assert_eq!(app["status"]["sync"]["status"], "OutOfSync");
        assert_eq!(app["status"]["sync"]["revision"], sha('a'));
        assert!(app["status"].get("operationState").is_none(), "{app}");
        assert_eq!(drain(&mut updates).len(), 1, "one comparison, no operation");
        // Any revision may be requested of an app without automated sync.
        let answered = w
            .request_sync(
                "web",
                SyncRequest {
                    revision: sha('a'),
                    ..SyncRequest::default()
                },
            )
            .unwrap()
            .unwrap();
        assert_eq!(answered["operation"]["sync"]["revision"], sha('a'));
        w.start_pending(
            "web",
            Some((sha('a'), rendered("nginx:1")["web"].clone())),
            t0,
        );
        let app = w.application("web").unwrap();
        assert_eq!(app["status"]["operationState"]["phase"], "Succeeded");
        assert_eq!(app["status"]["sync"]["status"], "Synced");
    }

    fn patch(w: &mut World, kind: PatchType, text: Value) -> Result<Patched, String> {
        w.patch_application("web", kind, &text.to_string()).unwrap()
    }

    fn version_of(app: &Value) -> u64 {
        app["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    }

    #[test]
    fn a_spec_patch_is_one_update_and_changes_nothing_rendered() {
        let t0 = Now::current();
        let mut w = world(Duration::ZERO, t0);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        let before = w.application("web").unwrap();
        let mut updates = w.subscribe(1024);
        let images = json!({"spec": {"source": {"directory": null, "kustomize": {"images": ["web=nginx:1.27"]}}}});
        let patched = patch(&mut w, PatchType::Merge, images.clone()).unwrap();
        assert!(
            patched.refresh,
            "a source edit makes the controller refresh"
        );
        let changes = drain(&mut updates);
        assert_eq!(changes.len(), 1);
        let app = &changes[0];
        assert_eq!(
            app["spec"]["source"],
            json!({"repoURL": "/srv/origin.git", "path": "apps/web", "targetRevision": MAIN,
                "kustomize": {"images": ["web=nginx:1.27"]}})
        );
        assert_eq!(
            app["status"], before["status"],
            "status is the controller's"
        );
        assert!(version_of(app) > version_of(&before));
        assert_eq!(
            patched.application,
            w.application("web").unwrap(),
            "the answer is the stored Application, as Argo CD's update returns it"
        );
        assert_eq!(&w.applications(None)[0], app, "the list serves it too");
        // The same patch again changes nothing: no update.
        patch(&mut w, PatchType::Merge, images).unwrap();
        assert!(drain(&mut updates).is_empty());
        // The refresh that follows compares what git renders, as before.
        w.refresh_matching(&|n| n == "web", at(t0, Duration::from_secs(1)));
        let refreshed = w.application("web").unwrap();
        assert_eq!(
            refreshed["status"]["summary"],
            json!({"images": ["nginx:1"]})
        );
        assert_eq!(refreshed["status"]["sync"]["status"], "Synced");
        assert_eq!(
            refreshed["status"]["sync"]["comparedTo"]["source"]["directory"],
            json!({"recurse": true}),
            "comparedTo names what the sandbox rendered"
        );
        assert_eq!(refreshed["spec"], app["spec"], "the edit stays");
    }

    #[test]
    fn spec_patches_that_the_sandbox_cannot_honour_are_refused_naming_the_field() {
        let t0 = Now::current();
        let mut w = world(Duration::ZERO, t0);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        let before = w.application("web").unwrap();
        for (kind, text, needle) in [
            (
                PatchType::Merge,
                json!({"spec": {"source": {"path": "apps/api"}}}),
                "spec.source.path cannot be changed in the sandbox: the command line (--repo, --branch, --app) sets it",
            ),
            (
                PatchType::Json,
                json!([{"op": "replace", "path": "/spec/destination/namespace", "value": "prod"}]),
                "spec.destination cannot be changed",
            ),
            (
                PatchType::Merge,
                json!({"spec": {"syncPolicy": {"retry": {"limit": 5}}}}),
                "spec.syncPolicy.retry cannot be changed in the sandbox: --retry-backoff sets it",
            ),
            (
                PatchType::Merge,
                json!({"spec": {"project": "team"}}),
                "spec.project cannot be changed",
            ),
            (
                PatchType::Json,
                json!([{"op": "remove", "path": "/status"}]),
                "this patch changes status",
            ),
            (
                PatchType::Merge,
                json!({"spec": {"source": {"helm": {"parameters": [{"name": "a", "value": "b"}]}}}}),
                "multiple application sources defined: Helm,Directory",
            ),
        ] {
            let err = patch(&mut w, kind, text.clone()).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
        assert_eq!(w.application("web").unwrap(), before, "nothing published");
        assert!(
            w.patch_application("nope", PatchType::Merge, "{}")
                .is_none()
        );
    }

    #[test]
    fn automated_sync_turned_off_by_a_patch_compares_new_commits_without_syncing() {
        let t0 = Now::current();
        let mut w = world(Duration::ZERO, t0);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        let off = patch(
            &mut w,
            PatchType::Merge,
            json!({"spec": {"syncPolicy": {"automated": null}}}),
        )
        .unwrap();
        assert!(!off.refresh);
        assert!(
            off.application["spec"]["syncPolicy"]
                .get("automated")
                .is_none()
        );
        assert!(off.application["spec"]["syncPolicy"].get("retry").is_some());
        let mut updates = w.subscribe(1024);
        let t1 = at(t0, Duration::from_secs(1));
        w.observe_tip(&sha('b'), &rendered("nginx:2"), &no_refresh, t1);
        assert_eq!(drain(&mut updates).len(), 1, "one comparison, no operation");
        let app = w.application("web").unwrap();
        assert_eq!(app["status"]["sync"]["status"], "OutOfSync");
        assert_eq!(app["status"]["sync"]["revision"], sha('b'));
        assert_eq!(
            app["status"]["operationState"]["syncResult"]["revision"],
            sha('a')
        );
        // Without automated sync any revision may be requested.
        assert!(
            w.request_sync(
                "web",
                SyncRequest {
                    revision: sha('a'),
                    dry_run: true,
                    ..SyncRequest::default()
                }
            )
            .unwrap()
            .is_ok()
        );
        w.start_pending(
            "web",
            Some((sha('a'), rendered("nginx:1")["web"].clone())),
            t1,
        );

        // Turned on again (a json patch): the controller refreshes and auto-sync runs.
        let on = patch(
            &mut w,
            PatchType::Json,
            json!([{"op": "add", "path": "/spec/syncPolicy/automated", "value": {"prune": true}}]),
        )
        .unwrap();
        assert!(on.refresh);
        assert_eq!(
            on.application["spec"]["syncPolicy"]["automated"],
            json!({"prune": true})
        );
        let t2 = at(t0, Duration::from_secs(2));
        w.refresh_matching(&|n| n == "web", t2);
        let app = w.application("web").unwrap();
        assert_eq!(app["status"]["operationState"]["phase"], "Succeeded");
        assert_eq!(
            app["status"]["operationState"]["operation"]["initiatedBy"],
            json!({"automated": true})
        );
        assert_eq!(
            app["status"]["operationState"]["syncResult"]["revision"],
            sha('b')
        );
        assert_eq!(app["status"]["sync"]["status"], "Synced");
    }

    #[test]
    fn a_subscriber_whose_buffer_is_full_misses_updates_silently() {
        let t0 = Now::current();
        let mut w = world(Duration::ZERO, t0);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        let mut slow = w.subscribe(2);
        let mut roomy = w.subscribe(1024);
        w.observe_tip(&sha('b'), &rendered("nginx:2"), &no_refresh, t0);
        let all = drain(&mut roomy);
        assert_eq!(all.len(), 5, "the five stages of a sync");
        let kept = drain(&mut slow);
        assert_eq!(
            kept,
            all[..2],
            "the first two fit, the other three were dropped"
        );
        // Nothing is caught up later: the next update is the next thing the slow one gets.
        w.observe_tip(
            &sha('c'),
            &rendered("nginx:2"),
            &no_refresh,
            at(t0, Duration::from_secs(1)),
        );
        let next = drain(&mut slow);
        assert_eq!(next.len(), 1);
        assert_eq!(next[0]["status"]["sync"]["revision"], sha('c'));
        // A subscriber that went away is forgotten.
        drop(slow);
        w.observe_tip(
            &sha('d'),
            &rendered("nginx:2"),
            &no_refresh,
            at(t0, Duration::from_secs(2)),
        );
        assert_eq!(w.subscribers.len(), 1);
    }

    fn two_deployments(version: ArgoCdVersion) -> (World, Now) {
        let t0 = Now::current();
        let mut w = world_with(config(Duration::from_secs(5), version), t0);
        let stuck = deployment("nginx:1", "sandbox.greenlight.dev/health: Progressing")
            .replace("name: web", "name: stuck");
        let both = format!("{}---\n{stuck}", deployment("nginx:1", ""));
        w.observe_tip(
            &sha('a'),
            &BTreeMap::from([("web".to_string(), files(&both))]),
            &no_refresh,
            t0,
        );
        (w, t0)
    }

    fn resource_health(app: &Value, name: &str) -> Value {
        app["status"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["kind"] == "Deployment" && r["name"] == name)
            .unwrap()["health"]
            .clone()
    }

    #[test]
    fn under_app_tree_a_resource_only_health_change_is_no_update_but_get_shows_it() {
        let (mut w, t0) = two_deployments(ArgoCdVersion::V3_5);
        assert_eq!(health_of(&w), "Progressing");
        let before = w.application("web").unwrap();
        let served = w.application_served("web").unwrap();
        assert_eq!(resource_health(&served, "web")["status"], "Progressing");
        let mut updates = w.subscribe(1024);
        // web's rollout ends; stuck keeps the app Progressing.
        w.tick(at(t0, Duration::from_secs(5)));
        assert!(drain(&mut updates).is_empty(), "nothing app-level changed");
        assert_eq!(
            w.application("web").unwrap(),
            before,
            "no resourceVersion bump"
        );
        let served = w.application_served("web").unwrap();
        assert_eq!(
            resource_health(&served, "web"),
            json!({"status": "Healthy"})
        );
        assert_eq!(resource_health(&served, "stuck")["status"], "Progressing");
        assert_eq!(
            resource_health(&before, "web"),
            Value::Null,
            "stored without health"
        );
    }

    #[test]
    fn inline_a_resource_only_health_change_is_an_update() {
        let (mut w, t0) = two_deployments(ArgoCdVersion::V2_14);
        let mut updates = w.subscribe(1024);
        w.tick(at(t0, Duration::from_secs(5)));
        let changes = drain(&mut updates);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0]["status"]["health"]["status"], "Progressing");
        assert_eq!(
            resource_health(&changes[0], "web"),
            json!({"status": "Healthy"})
        );
        // No re-fill under 2.14: Get serves what is stored.
        assert_eq!(
            w.application_served("web").unwrap(),
            w.application("web").unwrap()
        );
    }

    #[test]
    fn the_tree_has_children_missing_nodes_and_each_resources_own_health() {
        let t0 = Now::current();
        let mut w = world(Duration::ZERO, t0);
        let text = format!(
            "{}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  annotations: {{sandbox.greenlight.dev/apply: fail}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n",
            deployment(
                "nginx:does-not-exist",
                "argocd.argoproj.io/ignore-healthcheck: 'true'"
            )
        );
        w.observe_tip(
            &sha('a'),
            &BTreeMap::from([("web".to_string(), files(&text))]),
            &no_refresh,
            t0,
        );
        let tree = w.resource_tree("web").unwrap();
        assert_eq!(
            tree.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["nodes"],
            "empty orphanedNodes and hosts are left out"
        );
        let nodes = tree["nodes"].as_array().unwrap();
        let names: Vec<String> = nodes
            .iter()
            .map(|n| {
                format!(
                    "{}/{}",
                    n["kind"].as_str().unwrap(),
                    n["name"].as_str().unwrap()
                )
            })
            .collect();
        let deploy = nodes.iter().find(|n| n["kind"] == "Deployment").unwrap();
        let rs = nodes.iter().find(|n| n["kind"] == "ReplicaSet").unwrap();
        let pod = nodes.iter().find(|n| n["kind"] == "Pod").unwrap();
        let rs_name = rs["name"].as_str().unwrap();
        assert!(
            rs_name.starts_with("web-") && rs_name.len() == 14,
            "{rs_name}"
        );
        assert_eq!(
            names,
            [
                "ConfigMap/cfg".to_string(),
                "ConfigMap/held".to_string(),
                format!("Pod/{}", pod["name"].as_str().unwrap()),
                "Deployment/web".to_string(),
                format!("ReplicaSet/{rs_name}"),
            ],
            "sorted by group/kind/namespace/name"
        );
        // ignore-healthcheck is not applied in the tree.
        assert_eq!(deploy["health"]["status"], "Degraded");
        assert_eq!(
            rs["parentRefs"],
            json!([{"group": "apps", "kind": "Deployment", "namespace": "default", "name": "web", "uid": deploy["uid"]}])
        );
        assert_eq!(rs["health"], json!({"status": "Degraded"}));
        assert_eq!(
            pod["parentRefs"],
            json!([{"group": "apps", "kind": "ReplicaSet", "namespace": "default", "name": rs_name, "uid": rs["uid"]}])
        );
        assert!(pod.get("group").is_none());
        assert_eq!(pod["images"], json!(["nginx:does-not-exist"]));
        // A ConfigMap has no health check; one not created is a synthesized Missing node.
        let cfg = nodes.iter().find(|n| n["name"] == "cfg").unwrap();
        assert!(cfg.get("health").is_none() && cfg.get("uid").is_some());
        let held = nodes.iter().find(|n| n["name"] == "held").unwrap();
        assert_eq!(
            held,
            &json!({"version": "v1", "kind": "ConfigMap", "namespace": "default", "name": "held", "health": {"status": "Missing"}})
        );
        // Get's re-fill copies the tree, ignored or not.
        let served = w.application_served("web").unwrap();
        assert_eq!(resource_health(&served, "web")["status"], "Degraded");
        assert_eq!(
            health_of(&w),
            "Missing",
            "3.5: the ignored one left out; held not created"
        );
    }

    /// A Job annotated as a hook of `phase`, with more annotations in `extra` (`, k: v`).
    fn hook_job(name: &str, phase: &str, extra: &str) -> String {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  annotations: {{argocd.argoproj.io/hook: {phase}{extra}}}\nspec:\n  template:\n    spec:\n      containers: [{{name: {name}, image: 'curl:8'}}]\n      restartPolicy: Never\n"
        )
    }

    fn with_hook(image: &str, hook: &str) -> BTreeMap<String, RenderResult> {
        let text = format!("{}---\n{hook}", deployment(image, ""));
        BTreeMap::from([("web".to_string(), files(&text))])
    }

    /// Fires every deadline in turn until there is none left; returns when the clock stopped.
    fn run_clock(w: &mut World, mut now: Now) -> Now {
        for _ in 0..100 {
            let Some(deadline) = w.next_deadline(now) else {
                return now;
            };
            now = at(now, deadline.saturating_duration_since(now.mono));
            w.tick(now);
        }
        panic!("the clock never stops");
    }

    fn op_of(app: &Value) -> &Value {
        &app["status"]["operationState"]
    }

    fn results(app: &Value) -> Vec<Value> {
        op_of(app)["syncResult"]["resources"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn kinds(app: &Value, field: &str) -> Vec<String> {
        app["status"][field]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["kind"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    #[test]
    fn a_post_sync_hook_runs_once_the_rollout_is_healthy_then_the_sync_succeeds() {
        let t0 = Now::current();
        let rollout = Duration::from_secs(5);
        let mut w = world(rollout, t0);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        let t1 = at(t0, Duration::from_secs(10));
        w.tick(t1);
        assert_eq!(health_of(&w), "Healthy");
        let mut updates = w.subscribe(1024);
        w.observe_tip(
            &sha('b'),
            &with_hook("nginx:2", &hook_job("smoke", "PostSync", "")),
            &no_refresh,
            t1,
        );
        let stages = drain(&mut updates);
        assert_eq!(stages.len(), 3, "{stages:#?}");
        // The hook is no managed resource: not compared, not in status.resources.
        assert_eq!(stages[0]["status"]["sync"]["status"], "OutOfSync");
        assert_eq!(kinds(&stages[0], "resources"), ["Deployment"]);
        assert_eq!(op_of(&stages[1])["phase"], "Running");
        // The Sync phase is applied; the operation waits for it to be healthy.
        let waiting = &stages[2];
        assert_eq!(op_of(waiting)["phase"], "Running");
        assert_eq!(
            op_of(waiting)["message"],
            "waiting for healthy state of apps/Deployment/web"
        );
        assert_eq!(
            results(waiting),
            [
                json!({"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "default", "name": "web", "status": "Synced", "message": "deployment.apps/web configured", "hookPhase": "Running", "syncPhase": "Sync"})
            ]
        );
        assert!(waiting.get("operation").is_some());
        assert_eq!(waiting["status"]["history"].as_array().unwrap().len(), 1);
        assert_eq!(w.next_deadline(t1), Some(t1.mono + rollout));

        // The rollout ends: health first, then the step that starts the PostSync hook.
        let t2 = at(t1, rollout);
        w.tick(t2);
        let stages = drain(&mut updates);
        let running = stages.last().unwrap();
        assert_eq!(
            op_of(running)["message"],
            "waiting for completion of hook batch/Job/smoke"
        );
        let r = results(running);
        assert_eq!(r.len(), 2, "{r:#?}");
        assert_eq!(r[0]["hookPhase"], "Succeeded");
        assert_eq!(
            r[1],
            json!({"group": "batch", "version": "v1", "kind": "Job", "namespace": "default", "name": "smoke", "status": "Synced", "message": "job.batch/smoke created", "hookType": "PostSync", "hookPhase": "Running", "syncPhase": "PostSync"})
        );
        assert_eq!(w.next_deadline(t2), Some(t2.mono + Duration::from_secs(1)));

        // The hook has run: history while still Running, Succeeded, the refresh.
        let t3 = at(t2, Duration::from_secs(1));
        w.tick(t3);
        let stages = drain(&mut updates);
        assert_eq!(stages.len(), 3, "{stages:#?}");
        let (history, done, refresh) = (&stages[0], &stages[1], &stages[2]);
        assert_eq!(op_of(history)["phase"], "Running");
        let entries = history["status"]["history"].as_array().unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1]["revision"], sha('b'));
        assert_eq!(entries[1]["deployStartedAt"], json!(rfc3339(t1.wall)));
        assert_eq!(entries[1]["deployedAt"], json!(rfc3339(t3.wall)));
        assert_eq!(op_of(done)["phase"], "Succeeded");
        assert_eq!(
            op_of(done)["message"],
            "successfully synced (no more tasks)"
        );
        assert_eq!(op_of(done)["finishedAt"], json!(rfc3339(t3.wall)));
        assert!(done.get("operation").is_none());
        let r = results(done);
        assert_eq!(r[1]["hookPhase"], "Succeeded");
        assert_eq!(r[1]["message"], "Reached expected number of succeeded pods");
        assert_eq!(refresh["status"]["sync"]["status"], "Synced");
        assert_eq!(refresh["status"]["sync"]["revision"], sha('b'));
        assert_eq!(refresh["status"]["reconciledAt"], json!(rfc3339(t3.wall)));
        assert_eq!(kinds(refresh, "resources"), ["Deployment"]);
        assert_eq!(health_of(&w), "Healthy");
        let managed = w.managed_resources("web").unwrap();
        assert_eq!(managed.len(), 1);
        assert_eq!(managed[0]["kind"], "Deployment");
        let tree = w.resource_tree("web").unwrap();
        assert!(
            tree["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .all(|n| n["kind"] != "Job"),
            "{tree}"
        );
        assert_eq!(w.next_deadline(t3), None);

        // A commit that changes only the hook is Synced at once: hooks are never compared.
        let t4 = at(t3, Duration::from_secs(1));
        w.observe_tip(
            &sha('c'),
            &with_hook("nginx:2", &hook_job("smoke", "PostSync", ", x: y")),
            &no_refresh,
            t4,
        );
        let changes = drain(&mut updates);
        assert_eq!(changes.len(), 1, "{changes:#?}");
        assert_eq!(changes[0]["status"]["sync"]["status"], "Synced");
        assert_eq!(op_of(&changes[0])["syncResult"]["revision"], sha('b'));
    }

    #[test]
    fn a_post_sync_hook_that_fails_fails_the_sync_after_its_retries_with_the_sync_phase_applied() {
        let t0 = Now::current();
        let mut cfg = config(Duration::ZERO, ArgoCdVersion::default());
        cfg.retry_backoff = Duration::from_secs(1);
        let mut w = world_with(cfg, t0);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        let mut updates = w.subscribe(1024);
        let failing = hook_job("smoke", "PostSync", ", sandbox.greenlight.dev/hook: fail");
        w.observe_tip(&sha('b'), &with_hook("nginx:2", &failing), &no_refresh, t0);
        let end = run_clock(&mut w, t0);
        let stages = drain(&mut updates);
        let messages: Vec<String> = stages
            .iter()
            .filter_map(|s| op_of(s)["message"].as_str().map(str::to_string))
            .collect();
        for wanted in [
            "waiting for healthy state of apps/Deployment/web",
            "waiting for completion of hook batch/Job/smoke",
            // A retry deletes the Job the failed attempt left before creating it again.
            "waiting for deletion of hook batch/Job/smoke",
        ] {
            assert!(
                messages.iter().any(|m| m == wanted),
                "{wanted}: {messages:#?}"
            );
        }
        assert!(
            messages
                .iter()
                .any(|m| m.starts_with(&format!("{TASKS_FAILED_MESSAGE}. Retrying attempt #1 at "))),
            "{messages:#?}"
        );
        let app = w.application("web").unwrap();
        let op = op_of(&app);
        assert_eq!(op["phase"], "Failed");
        assert_eq!(
            op["message"],
            "one or more synchronization tasks completed unsuccessfully (retried 2 times)."
        );
        assert_eq!(op["retryCount"], 2);
        assert_eq!(op["finishedAt"], json!(rfc3339(end.wall)));
        assert!(app.get("operation").is_none());
        let r = results(&app);
        assert_eq!(r.len(), 2, "{r:#?}");
        assert_eq!(r[0]["message"], "deployment.apps/web unchanged");
        assert_eq!(r[0]["hookPhase"], "Succeeded");
        assert_eq!(
            r[1],
            json!({"group": "batch", "version": "v1", "kind": "Job", "namespace": "default", "name": "smoke", "status": "Synced", "message": "Job has reached the specified backoff limit", "hookType": "PostSync", "hookPhase": "Failed", "syncPhase": "PostSync"})
        );
        // No history for it; the Sync phase was applied, so the refresh finds the app Synced.
        let history = app["status"]["history"].as_array().unwrap();
        assert_eq!(history.len(), 1);
        assert!(history.iter().all(|h| h["revision"] != sha('b')));
        assert_eq!(app["status"]["summary"], json!({"images": ["nginx:2"]}));
        assert_eq!(app["status"]["sync"]["status"], "Synced");
        assert_eq!(app["status"]["sync"]["revision"], sha('b'));
        assert!(app["status"].get("conditions").is_none(), "{app}");
    }

    #[test]
    fn a_pre_sync_hook_that_fails_leaves_the_sync_phase_unapplied() {
        let t0 = Now::current();
        let mut cfg = config(Duration::ZERO, ArgoCdVersion::default());
        cfg.retry_backoff = Duration::from_secs(1);
        let mut w = world_with(cfg, t0);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        let before = w.managed_resources("web").unwrap()[0]["liveState"].clone();
        let mut updates = w.subscribe(1024);
        let failing = hook_job("migrate", "PreSync", ", sandbox.greenlight.dev/hook: fail");
        w.observe_tip(&sha('b'), &with_hook("nginx:2", &failing), &no_refresh, t0);
        let first = drain(&mut updates);
        assert_eq!(
            op_of(first.last().unwrap())["message"],
            "waiting for completion of hook batch/Job/migrate"
        );
        run_clock(&mut w, t0);
        let stages = drain(&mut updates);
        assert!(
            first
                .iter()
                .chain(&stages)
                .filter(|s| op_of(s)["syncResult"]["revision"] == sha('b'))
                .flat_map(results)
                .all(|r| r["kind"] == "Job"),
            "the Sync phase never ran"
        );
        let app = w.application("web").unwrap();
        let op = op_of(&app);
        assert_eq!(op["phase"], "Failed");
        assert_eq!(
            op["message"],
            "one or more synchronization tasks completed unsuccessfully (retried 2 times)."
        );
        let r = results(&app);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0]["hookType"], "PreSync");
        assert_eq!(r[0]["syncPhase"], "PreSync");
        assert_eq!(r[0]["hookPhase"], "Failed");
        // The live Deployment is the one of the earlier sync.
        let managed = w.managed_resources("web").unwrap();
        assert_eq!(managed[0]["liveState"], before);
        assert_eq!(app["status"]["summary"], json!({"images": ["nginx:1"]}));
        assert_eq!(app["status"]["sync"]["status"], "OutOfSync");
        assert_eq!(app["status"]["history"].as_array().unwrap().len(), 1);
        // As after any final failure, automated sync does not try that commit again.
        assert_eq!(app["status"]["conditions"][0]["type"], "SyncError");
        w.refresh_matching(&|_| true, at(t0, Duration::from_secs(60)));
        assert!(w.application("web").unwrap().get("operation").is_none());
    }

    #[test]
    fn a_degraded_workload_fails_a_sync_with_a_post_sync_hook_that_never_runs() {
        let t0 = Now::current();
        let rollout = Duration::from_secs(5);
        let mut cfg = config(rollout, ArgoCdVersion::default());
        cfg.retry_backoff = Duration::from_secs(1);
        let mut w = world_with(cfg, t0);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        let t1 = at(t0, Duration::from_secs(10));
        w.tick(t1);
        let mut updates = w.subscribe(1024);
        w.observe_tip(
            &sha('b'),
            &with_hook("nginx:does-not-exist", &hook_job("smoke", "PostSync", "")),
            &no_refresh,
            t1,
        );
        run_clock(&mut w, t1);
        let stages = drain(&mut updates);
        assert!(
            stages
                .iter()
                .flat_map(results)
                .all(|r| r["kind"] == "Deployment"),
            "the hook never ran"
        );
        assert!(w.apps["web"].hook_objects.is_empty());
        let app = w.application("web").unwrap();
        let op = op_of(&app);
        assert_eq!(op["phase"], "Failed");
        assert_eq!(
            op["message"],
            "one or more synchronization tasks completed unsuccessfully (retried 2 times)."
        );
        assert_eq!(
            results(&app),
            [
                json!({"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "default", "name": "web", "status": "Synced", "message": "Deployment \"web\" exceeded its progress deadline", "hookPhase": "Failed", "syncPhase": "Sync"})
            ]
        );
        assert_eq!(app["status"]["history"].as_array().unwrap().len(), 1);
        assert_eq!(health_of(&w), "Degraded");
    }

    #[test]
    fn a_pre_sync_hook_runs_before_the_apply_and_a_phase_without_hooks_ends_the_sync_at_once() {
        let t0 = Now::current();
        let mut cfg = config(Duration::from_secs(5), ArgoCdVersion::default());
        cfg.hook_time = Duration::ZERO;
        let mut w = world_with(cfg, t0);
        let mut updates = w.subscribe(1024);
        let hooked = with_hook("nginx:1", &hook_job("migrate", "PreSync", ""));
        w.observe_tip(&sha('a'), &hooked, &no_refresh, t0);
        let stages = drain(&mut updates);
        let waiting = stages.last().unwrap();
        assert_eq!(
            op_of(waiting)["message"],
            "waiting for completion of hook batch/Job/migrate"
        );
        assert_eq!(
            kinds(waiting, "resources"),
            ["Deployment"],
            "not created yet"
        );
        assert_eq!(
            w.next_deadline(t0),
            Some(t0.mono),
            "zero hook time: the next step"
        );
        w.tick(t0);
        let app = w.application("web").unwrap();
        // The Deployment is applied and the sync ends without waiting for its rollout.
        assert_eq!(op_of(&app)["phase"], "Succeeded");
        assert_eq!(
            op_of(&app)["message"],
            "successfully synced (all tasks run)"
        );
        let r = results(&app);
        assert_eq!(r[0]["syncPhase"], "PreSync");
        assert_eq!(r[0]["hookPhase"], "Succeeded");
        assert_eq!(r[1]["syncPhase"], "Sync");
        assert_eq!(r[1]["hookPhase"], "Running");
        assert_eq!(app["status"]["sync"]["status"], "Synced");
        assert_eq!(health_of(&w), "Progressing");
        assert_eq!(app["status"]["history"].as_array().unwrap().len(), 1);

        // The next sync deletes the Job left from this one before it creates it again.
        let t1 = at(t0, Duration::from_secs(10));
        w.observe_tip(
            &sha('b'),
            &with_hook("nginx:2", &hook_job("migrate", "PreSync", "")),
            &no_refresh,
            t1,
        );
        assert_eq!(
            op_of(&w.application("web").unwrap())["message"],
            "waiting for deletion of hook batch/Job/migrate"
        );
        run_clock(&mut w, t1);
        let app = w.application("web").unwrap();
        assert_eq!(op_of(&app)["phase"], "Succeeded");
        assert_eq!(app["status"]["summary"], json!({"images": ["nginx:2"]}));
        // A dry run and a partial sync run no hooks.
        for req in [
            SyncRequest {
                dry_run: true,
                ..SyncRequest::default()
            },
            SyncRequest {
                resources: vec![SyncResource {
                    group: "apps".into(),
                    kind: "Deployment".into(),
                    name: "web".into(),
                    namespace: String::new(),
                }],
                ..SyncRequest::default()
            },
        ] {
            w.request_sync("web", req).unwrap().unwrap();
            let tip = at(t1, Duration::from_secs(30));
            w.start_pending(
                "web",
                Some((
                    sha('b'),
                    with_hook("nginx:2", &hook_job("migrate", "PreSync", ""))["web"].clone(),
                )),
                tip,
            );
            let app = w.application("web").unwrap();
            assert_eq!(op_of(&app)["phase"], "Succeeded");
            assert!(results(&app).iter().all(|r| r["kind"] == "Deployment"));
        }
    }

    const CONFIG_MAP: &str =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata: {a: b}\n";

    /// The Deployment `web` (its image `image`), with the ConfigMap `cfg` when `with_cfg`.
    fn web_and_cfg(image: &str, with_cfg: bool) -> BTreeMap<String, RenderResult> {
        let mut text = deployment(image, "");
        if with_cfg {
            text = format!("{text}---\n{CONFIG_MAP}");
        }
        BTreeMap::from([("web".to_string(), files(&text))])
    }

    fn resource_entry(app: &Value, kind: &str) -> Value {
        app["status"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["kind"] == kind)
            .cloned()
            .unwrap_or(Value::Null)
    }

    fn tree_kinds(w: &World) -> Vec<String> {
        w.resource_tree("web").unwrap()["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| n["kind"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn without_automated_prune_a_resource_removed_from_git_stays_live_requiring_pruning() {
        let t0 = Now::current();
        let mut w = world(Duration::ZERO, t0);
        w.observe_tip(&sha('a'), &web_and_cfg("nginx:1", true), &no_refresh, t0);
        let app = w.application("web").unwrap();
        assert_eq!(
            app["spec"]["syncPolicy"]["automated"],
            json!({"prune": false, "selfHeal": true})
        );
        // A commit that changes web and removes cfg: the automated sync applies web and skips
        // the prune.
        let t1 = at(t0, Duration::from_secs(1));
        w.observe_tip(&sha('b'), &web_and_cfg("nginx:2", false), &no_refresh, t1);
        let app = w.application("web").unwrap();
        let op = op_of(&app);
        assert_eq!(op["phase"], "Succeeded");
        assert_eq!(op["message"], "successfully synced (all tasks run)");
        assert!(op["operation"]["sync"].get("prune").is_none(), "{op}");
        assert_eq!(
            results(&app)[0],
            json!({"version": "v1", "kind": "ConfigMap", "namespace": "default", "name": "cfg",
                "status": "PruneSkipped", "message": "ignored (requires pruning)",
                "hookPhase": "Succeeded", "syncPhase": "Sync"}),
            "pruning comes first"
        );
        assert_eq!(
            results(&app)[1]["message"],
            "deployment.apps/web configured"
        );
        assert_eq!(app["status"]["sync"]["status"], "OutOfSync");
        assert_eq!(
            resource_entry(&app, "ConfigMap"),
            json!({"version": "v1", "kind": "ConfigMap", "namespace": "default", "name": "cfg",
                "status": "OutOfSync", "requiresPruning": true})
        );
        assert_eq!(resource_entry(&app, "Deployment")["status"], "Synced");
        assert!(
            tree_kinds(&w).contains(&"ConfigMap".to_string()),
            "still live"
        );
        assert_eq!(app["status"]["history"].as_array().unwrap().len(), 2);

        // A commit that leaves only the prune to do starts no operation at all.
        let mut updates = w.subscribe(1024);
        let t2 = at(t0, Duration::from_secs(2));
        w.observe_tip(&sha('c'), &web_and_cfg("nginx:2", false), &no_refresh, t2);
        assert_eq!(drain(&mut updates).len(), 1, "one comparison, no operation");
        let app = w.application("web").unwrap();
        assert_eq!(app["status"]["sync"]["status"], "OutOfSync");
        assert_eq!(app["status"]["sync"]["revision"], sha('c'));
        assert_eq!(op_of(&app)["syncResult"]["revision"], sha('b'));
        assert!(app["status"].get("conditions").is_none(), "{app}");

        // A requested sync that asks to prune deletes it.
        w.request_sync(
            "web",
            SyncRequest {
                prune: true,
                ..SyncRequest::default()
            },
        )
        .unwrap()
        .unwrap();
        w.start_pending(
            "web",
            Some((sha('c'), web_and_cfg("nginx:2", false)["web"].clone())),
            t2,
        );
        let app = w.application("web").unwrap();
        assert_eq!(op_of(&app)["operation"]["sync"]["prune"], true);
        assert_eq!(
            results(&app)
                .iter()
                .map(|r| format!("{} {} {}", r["kind"], r["status"], r["message"]))
                .collect::<Vec<_>>(),
            [
                r#""ConfigMap" "Pruned" "pruned""#,
                r#""Deployment" "Synced" "deployment.apps/web unchanged""#
            ]
        );
        assert_eq!(app["status"]["sync"]["status"], "Synced");
        assert_eq!(kinds(&app, "resources"), ["Deployment"]);
        assert!(!tree_kinds(&w).contains(&"ConfigMap".to_string()));
    }

    #[test]
    fn with_automated_prune_the_sync_deletes_what_git_no_longer_has() {
        let t0 = Now::current();
        let mut cfg = config(Duration::ZERO, ArgoCdVersion::default());
        cfg.prune.insert("web".into());
        let mut w = world_with(cfg, t0);
        w.observe_tip(&sha('a'), &web_and_cfg("nginx:1", true), &no_refresh, t0);
        assert_eq!(
            w.application("web").unwrap()["spec"]["syncPolicy"]["automated"],
            json!({"prune": true, "selfHeal": true})
        );
        let mut updates = w.subscribe(1024);
        let t1 = at(t0, Duration::from_secs(1));
        w.observe_tip(&sha('b'), &web_and_cfg("nginx:1", false), &no_refresh, t1);
        let stages = drain(&mut updates);
        assert_eq!(stages[0]["status"]["sync"]["status"], "OutOfSync");
        assert_eq!(
            resource_entry(&stages[0], "ConfigMap")["requiresPruning"],
            true
        );
        let app = stages.last().unwrap();
        let op = op_of(app);
        assert_eq!(op["phase"], "Succeeded");
        assert_eq!(op["operation"]["sync"]["prune"], true);
        assert_eq!(app["operation"], Value::Null);
        assert_eq!(
            results(app)[0],
            json!({"version": "v1", "kind": "ConfigMap", "namespace": "default", "name": "cfg",
                "status": "Pruned", "message": "pruned", "hookPhase": "Succeeded",
                "syncPhase": "Sync"})
        );
        assert_eq!(app["status"]["sync"]["status"], "Synced");
        assert_eq!(kinds(app, "resources"), ["Deployment"]);
        assert_eq!(tree_kinds(&w), ["Pod", "Deployment", "ReplicaSet"]);

        // A dry run that would prune deletes nothing.
        w.observe_tip(&sha('c'), &web_and_cfg("nginx:1", true), &no_refresh, t1);
        assert_eq!(kinds(&w.application("web").unwrap(), "resources").len(), 2);
        w.request_sync(
            "web",
            SyncRequest {
                prune: true,
                dry_run: true,
                ..SyncRequest::default()
            },
        )
        .unwrap()
        .unwrap();
        w.start_pending(
            "web",
            Some((sha('b'), web_and_cfg("nginx:1", false)["web"].clone())),
            t1,
        );
        let app = w.application("web").unwrap();
        assert_eq!(results(&app)[0]["status"], "Pruned");
        assert_eq!(results(&app)[0]["message"], "pruned (dry run)");
        assert!(tree_kinds(&w).contains(&"ConfigMap".to_string()));
    }

    #[test]
    fn an_object_whose_sync_options_say_prune_false_is_never_pruned() {
        let t0 = Now::current();
        let mut cfg = config(Duration::ZERO, ArgoCdVersion::default());
        cfg.prune.insert("web".into());
        let mut w = world_with(cfg, t0);
        let kept = CONFIG_MAP.replace(
            "  name: cfg\n",
            "  name: cfg\n  annotations: {argocd.argoproj.io/sync-options: 'Validate=false, Prune=false'}\n",
        );
        let text = format!("{}---\n{kept}", deployment("nginx:1", ""));
        let renders = BTreeMap::from([("web".to_string(), files(&text))]);
        w.observe_tip(&sha('a'), &renders, &no_refresh, t0);
        let t1 = at(t0, Duration::from_secs(1));
        w.observe_tip(&sha('b'), &web_and_cfg("nginx:1", false), &no_refresh, t1);
        let app = w.application("web").unwrap();
        assert_eq!(op_of(&app)["operation"]["sync"]["prune"], true);
        assert_eq!(
            (
                results(&app)[0]["status"].clone(),
                results(&app)[0]["message"].clone()
            ),
            (json!("PruneSkipped"), json!("ignored (no prune)"))
        );
        assert!(tree_kinds(&w).contains(&"ConfigMap".to_string()));
        assert_eq!(resource_entry(&app, "ConfigMap")["requiresPruning"], true);
        // A dry run with prune says the same.
        w.request_sync(
            "web",
            SyncRequest {
                prune: true,
                dry_run: true,
                ..SyncRequest::default()
            },
        )
        .unwrap()
        .unwrap();
        w.start_pending(
            "web",
            Some((sha('b'), web_and_cfg("nginx:1", false)["web"].clone())),
            t1,
        );
        let app = w.application("web").unwrap();
        assert_eq!(results(&app)[0]["message"], "ignored (no prune)");
        assert!(tree_kinds(&w).contains(&"ConfigMap".to_string()));
    }

    #[test]
    fn a_partial_sync_prunes_only_the_resources_it_names() {
        let t0 = Now::current();
        let mut w = world(Duration::ZERO, t0);
        let two = format!(
            "{}---\n{CONFIG_MAP}---\n{}",
            deployment("nginx:1", ""),
            CONFIG_MAP.replace("name: cfg", "name: other")
        );
        let renders = BTreeMap::from([("web".to_string(), files(&two))]);
        w.observe_tip(&sha('a'), &renders, &no_refresh, t0);
        w.observe_tip(&sha('b'), &rendered("nginx:1"), &no_refresh, t0);
        assert_eq!(kinds(&w.application("web").unwrap(), "resources").len(), 3);
        w.request_sync(
            "web",
            SyncRequest {
                prune: true,
                resources: vec![SyncResource {
                    group: String::new(),
                    kind: "ConfigMap".into(),
                    name: "cfg".into(),
                    namespace: String::new(),
                }],
                ..SyncRequest::default()
            },
        )
        .unwrap()
        .unwrap();
        w.start_pending(
            "web",
            Some((sha('b'), rendered("nginx:1")["web"].clone())),
            t0,
        );
        let app = w.application("web").unwrap();
        assert_eq!(
            results(&app)
                .iter()
                .map(|r| format!("{}/{} {}", r["kind"], r["name"], r["status"]))
                .collect::<Vec<_>>(),
            [r#""ConfigMap"/"cfg" "Pruned""#]
        );
        let left: Vec<Value> = app["status"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].clone())
            .collect();
        assert_eq!(left, [json!("other"), json!("web")]);
        assert_eq!(app["status"]["sync"]["status"], "OutOfSync");
    }

    #[test]
    fn a_sync_with_hooks_prunes_in_its_sync_phase_before_applying() {
        let t0 = Now::current();
        let mut cfg = config(Duration::ZERO, ArgoCdVersion::default());
        cfg.prune.insert("web".into());
        let mut w = world_with(cfg, t0);
        w.observe_tip(&sha('a'), &web_and_cfg("nginx:1", true), &no_refresh, t0);
        let renders = with_hook("nginx:2", &hook_job("smoke", "PostSync", ""));
        w.observe_tip(&sha('b'), &renders, &no_refresh, t0);
        run_clock(&mut w, t0);
        let app = w.application("web").unwrap();
        assert_eq!(op_of(&app)["phase"], "Succeeded", "{}", op_of(&app));
        let seen: Vec<String> = results(&app)
            .iter()
            .map(|r| format!("{} {} {}", r["syncPhase"], r["kind"], r["status"]))
            .collect();
        assert_eq!(
            seen,
            [
                r#""Sync" "ConfigMap" "Pruned""#,
                r#""Sync" "Deployment" "Synced""#,
                r#""PostSync" "Job" "Synced""#
            ]
        );
        assert_eq!(app["status"]["sync"]["status"], "Synced");
    }

    #[test]
    fn turning_automated_prune_on_through_a_patch_prunes_at_the_next_refresh() {
        let t0 = Now::current();
        let mut w = world(Duration::ZERO, t0);
        w.observe_tip(&sha('a'), &web_and_cfg("nginx:1", true), &no_refresh, t0);
        w.observe_tip(&sha('b'), &web_and_cfg("nginx:1", false), &no_refresh, t0);
        assert_eq!(
            w.application("web").unwrap()["status"]["sync"]["status"],
            "OutOfSync"
        );
        let edit = patch(
            &mut w,
            PatchType::Merge,
            json!({"spec": {"syncPolicy": {"automated": {"prune": true}}}}),
        )
        .unwrap();
        assert!(!edit.refresh, "a prune flag alone asks for no refresh");
        assert!(
            patch(
                &mut w,
                PatchType::Merge,
                json!({"spec": {"syncPolicy": {"automated": {"prune": "yes"}}}}),
            )
            .unwrap_err()
            .contains("spec.syncPolicy.automated.prune: must be true or false")
        );
        w.refresh_matching(&|n| n == "web", at(t0, Duration::from_secs(1)));
        let app = w.application("web").unwrap();
        assert_eq!(results(&app)[0]["status"], "Pruned");
        assert_eq!(app["status"]["sync"]["status"], "Synced");
    }

    #[test]
    fn an_app_whose_path_holds_nothing_is_synced_and_healthy_until_a_candidate_comes_and_goes() {
        let t0 = Now::current();
        let empty = || BTreeMap::from([("web".to_string(), files("# no manifests yet\n"))]);
        for allow_empty in [true, false] {
            let mut cfg = config(Duration::ZERO, ArgoCdVersion::default());
            cfg.prune.insert("web".into());
            if allow_empty {
                cfg.allow_empty.insert("web".into());
            }
            let mut w = world_with(cfg, t0);
            let mut updates = w.subscribe(1024);
            w.observe_tip(&sha('a'), &empty(), &no_refresh, t0);
            assert_eq!(drain(&mut updates).len(), 1, "one comparison, no operation");
            let app = w.application("web").unwrap();
            assert_eq!(app["status"]["sync"]["status"], "Synced");
            assert_eq!(app["status"]["health"]["status"], "Healthy");
            assert!(app["status"].get("resources").is_none(), "omitempty");
            assert_eq!(app["status"]["summary"], json!({}));
            assert!(app["status"].get("operationState").is_none());
            assert_eq!(w.resource_tree("web").unwrap(), json!({}));
            assert_eq!(
                app["spec"]["syncPolicy"]["automated"].get("allowEmpty"),
                allow_empty.then_some(&json!(true))
            );

            // The candidate arrives and is synced.
            let t1 = at(t0, Duration::from_secs(1));
            w.observe_tip(&sha('b'), &rendered("nginx:1"), &no_refresh, t1);
            let app = w.application("web").unwrap();
            assert_eq!(app["status"]["sync"]["status"], "Synced");
            assert_eq!(kinds(&app, "resources"), ["Deployment"]);

            // The candidate is removed from git (the directory stays, empty).
            let t2 = at(t0, Duration::from_secs(2));
            w.observe_tip(&sha('c'), &empty(), &no_refresh, t2);
            let app = w.application("web").unwrap();
            if allow_empty {
                assert_eq!(results(&app)[0]["status"], "Pruned");
                assert_eq!(app["status"]["sync"]["status"], "Synced");
                assert_eq!(app["status"]["health"]["status"], "Healthy");
                assert!(app["status"].get("resources").is_none());
                assert_eq!(w.resource_tree("web").unwrap(), json!({}));
            } else {
                // Argo CD refuses an automated sync that would prune every resource.
                assert_eq!(app["status"]["sync"]["status"], "OutOfSync");
                assert_eq!(op_of(&app)["syncResult"]["revision"], sha('b'));
                assert_eq!(app["status"]["conditions"][0]["type"], "SyncError", "{app}");
                assert_eq!(
                    app["status"]["conditions"][0]["message"],
                    format!(
                        "Skipping sync attempt to [{}]: auto-sync will wipe out all resources",
                        sha('c')
                    )
                );
                assert_eq!(resource_entry(&app, "Deployment")["requiresPruning"], true);
                assert_eq!(tree_kinds(&w), ["Pod", "Deployment", "ReplicaSet"]);
            }
        }
    }

    #[test]
    fn an_app_whose_path_is_gone_is_a_comparison_error_and_its_objects_stay() {
        let t0 = Now::current();
        let mut cfg = config(Duration::ZERO, ArgoCdVersion::default());
        cfg.prune.insert("web".into());
        cfg.allow_empty.insert("web".into());
        let mut w = world_with(cfg, t0);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        let gone = BTreeMap::from([(
            "web".to_string(),
            Err(RenderError {
                message: "apps/web: app path does not exist".into(),
            }),
        )]);
        w.observe_tip(&sha('b'), &gone, &no_refresh, t0);
        let app = w.application("web").unwrap();
        assert_eq!(app["status"]["sync"]["status"], "Unknown");
        assert!(
            app["status"]["conditions"][0]["message"]
                .as_str()
                .unwrap()
                .ends_with("Manifest generation error (cached): apps/web: app path does not exist"),
            "{app}"
        );
        assert_eq!(op_of(&app)["syncResult"]["revision"], sha('a'));
        assert_eq!(tree_kinds(&w), ["Pod", "Deployment", "ReplicaSet"]);
    }

    const NO_GPU: &str = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.";

    /// A workload `web` of `kind` (apps/v1) with 2 or 3 replicas, `spec_extra` added to its spec
    /// (`key: value` lines indented by two), its pods annotated `pod_annotations`.
    fn workload(kind: &str, replicas: u32, spec_extra: &str, pod_annotations: &str) -> String {
        format!(
            "apiVersion: apps/v1\nkind: {kind}\nmetadata:\n  name: web\nspec:\n  replicas: {replicas}\n{spec_extra}  template:\n    metadata:\n      labels: {{app: web}}\n      annotations: {{{pod_annotations}}}\n    spec:\n      containers: [{{name: app, image: 'nginx:1'}}]\n"
        )
    }

    fn single(text: &str) -> BTreeMap<String, RenderResult> {
        BTreeMap::from([("web".to_string(), files(text))])
    }

    fn tree_node(w: &World, kind: &str, name: &str) -> Value {
        w.resource_tree("web").unwrap()["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|n| n["kind"] == kind && n["name"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    }

    fn pods(w: &World) -> Vec<Value> {
        w.resource_tree("web").unwrap()["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|n| n["kind"] == "Pod")
            .cloned()
            .collect()
    }

    fn live(w: &World, group: &str, kind: &str, name: &str) -> Result<Value, ResourceMiss> {
        let key = ResourceKey {
            group: group.into(),
            kind: kind.into(),
            namespace: "default".into(),
            name: name.into(),
        };
        w.live_resource("web", &key).unwrap()
    }

    #[test]
    fn unschedulable_pods_stay_pending_and_their_deployment_degrades_at_its_progress_deadline() {
        let t0 = Now::current();
        let rollout = Duration::from_secs(5);
        let mut w = world(rollout, t0);
        let pending = workload(
            "Deployment",
            2,
            "  progressDeadlineSeconds: 30\n",
            &format!("sandbox.greenlight.dev/schedule: '{NO_GPU}'"),
        );
        w.observe_tip(&sha('a'), &single(&pending), &no_refresh, t0);
        let waiting = json!({"status": "Progressing",
            "message": "Waiting for rollout to finish: 0 of 2 updated replicas are available..."});
        assert_eq!(tree_node(&w, "Deployment", "web")["health"], waiting);
        assert_eq!(health_of(&w), "Progressing");
        let pending_pods = pods(&w);
        assert_eq!(pending_pods.len(), 2);
        for pod in &pending_pods {
            // Argo CD's Pod check gives a Pending Pod `status.message`, which the scheduler
            // leaves empty: the scheduler's words are in the Pod, not in the tree.
            assert_eq!(pod["health"], json!({"status": "Progressing"}), "{pod}");
            assert_eq!(
                pod["info"],
                json!([{"name": "Status Reason", "value": "Pending"}, {"name": "Node"},
                    {"name": "Containers", "value": "0/1"}])
            );
            assert_eq!(pod["parentRefs"][0]["kind"], "ReplicaSet");
        }
        let pod = live(&w, "", "Pod", pending_pods[0]["name"].as_str().unwrap()).unwrap();
        assert_eq!(pod["status"]["phase"], "Pending");
        let scheduled = &pod["status"]["conditions"][0];
        assert_eq!(
            (
                &scheduled["type"],
                &scheduled["status"],
                &scheduled["reason"]
            ),
            (
                &json!("PodScheduled"),
                &json!("False"),
                &json!("Unschedulable")
            )
        );
        assert_eq!(scheduled["message"], NO_GPU);
        assert!(pod["spec"].get("nodeName").is_none(), "{pod}");
        assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
        assert_eq!(pod["metadata"]["labels"]["app"], "web");

        // The rollout time changes nothing; the progress deadline does.
        assert_eq!(w.next_deadline(t0), Some(t0.mono + rollout));
        w.tick(at(t0, rollout));
        assert_eq!(tree_node(&w, "Deployment", "web")["health"], waiting);
        let deadline = t0.mono + Duration::from_secs(30);
        assert_eq!(w.next_deadline(at(t0, rollout)), Some(deadline));
        w.tick(at(t0, Duration::from_millis(29_999)));
        assert_eq!(health_of(&w), "Progressing");
        w.tick(at(t0, Duration::from_secs(30)));
        assert_eq!(
            tree_node(&w, "Deployment", "web")["health"],
            json!({"status": "Degraded", "message": "Deployment \"web\" exceeded its progress deadline"})
        );
        assert_eq!(health_of(&w), "Degraded");
        assert!(
            pods(&w)
                .iter()
                .all(|p| p["health"]["status"] == "Progressing")
        );
        assert_eq!(w.next_deadline(at(t0, Duration::from_secs(30))), None);

        // Capacity found (the annotation gone): a new rollout, then running Pods.
        let t1 = at(t0, Duration::from_secs(40));
        w.observe_tip(
            &sha('b'),
            &single(&workload("Deployment", 2, "", "")),
            &no_refresh,
            t1,
        );
        w.tick(at(t1, rollout));
        assert_eq!(health_of(&w), "Healthy");
        for pod in pods(&w) {
            assert_eq!(pod["health"], json!({"status": "Healthy"}));
            assert_eq!(pod["info"][0]["value"], "Running");
            assert_eq!(pod["info"][1], json!({"name": "Node", "value": "sandbox"}));
            assert_eq!(pod["info"][2]["value"], "1/1");
            let live_pod = live(&w, "", "Pod", pod["name"].as_str().unwrap()).unwrap();
            assert_eq!(live_pod["status"]["phase"], "Running");
            assert_eq!(live_pod["spec"]["nodeName"], "sandbox");
        }
    }

    #[test]
    fn the_progress_deadline_defaults_to_ten_minutes() {
        assert_eq!(progress_deadline(&json!({})), Duration::from_secs(600));
        let given = json!({"spec": {"progressDeadlineSeconds": 2}});
        assert_eq!(progress_deadline(&given), Duration::from_secs(2));
        let zero = json!({"spec": {"progressDeadlineSeconds": 0}});
        assert_eq!(progress_deadline(&zero), Duration::from_secs(600));
    }

    #[test]
    fn a_stateful_set_rolls_out_with_its_pods_named_by_ordinal() {
        let t0 = Now::current();
        let rollout = Duration::from_secs(5);
        let mut w = world(rollout, t0);
        w.observe_tip(
            &sha('a'),
            &single(&workload("StatefulSet", 3, "", "")),
            &no_refresh,
            t0,
        );
        let sts = tree_node(&w, "StatefulSet", "web");
        assert_eq!(
            sts["health"],
            json!({"status": "Progressing", "message": "Waiting for 3 pods to be ready..."})
        );
        let revisions: Vec<Value> = w.resource_tree("web").unwrap()["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["kind"] == "ControllerRevision")
            .cloned()
            .collect();
        assert_eq!(revisions.len(), 1);
        let revision = &revisions[0];
        assert!(revision.get("health").is_none());
        assert_eq!(revision["parentRefs"][0]["uid"], sts["uid"]);
        // OrderedReady: the next Pod is created once the one before is ready.
        let names = |w: &World| {
            pods(w)
                .iter()
                .map(|p| p["name"].clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&w), [json!("web-0")]);
        let pod = &pods(&w)[0];
        assert_eq!(pod["info"][0]["value"], "ContainerCreating");
        assert_eq!(pod["parentRefs"][0]["kind"], "StatefulSet");
        assert_eq!(pod["parentRefs"][0]["uid"], sts["uid"]);

        w.tick(at(t0, rollout));
        assert_eq!(
            tree_node(&w, "StatefulSet", "web")["health"],
            json!({"status": "Healthy",
                "message": "partitioned roll out complete: 3 new pods have been updated..."})
        );
        assert_eq!(health_of(&w), "Healthy");
        assert_eq!(names(&w), [json!("web-0"), json!("web-1"), json!("web-2")]);
        let live_pod = live(&w, "", "Pod", "web-2").unwrap();
        assert_eq!(
            live_pod["metadata"]["labels"]["controller-revision-hash"],
            revision["name"]
        );
        assert_eq!(
            live_pod["metadata"]["ownerReferences"][0]["kind"],
            "StatefulSet"
        );

        // An image that does not exist: Progressing for good, its first Pod backing off.
        let t1 = at(t0, Duration::from_secs(10));
        let bad = workload("StatefulSet", 3, "", "").replace("nginx:1", "nginx:does-not-exist");
        w.observe_tip(&sha('b'), &single(&bad), &no_refresh, t1);
        w.tick(at(t1, rollout));
        assert_eq!(health_of(&w), "Progressing");
        assert_eq!(
            w.next_deadline(at(t1, rollout)),
            None,
            "no deadline to wait for"
        );
        assert_eq!(names(&w), [json!("web-0")]);
        assert_eq!(
            pods(&w)[0]["health"],
            json!({"status": "Degraded", "message": "Back-off pulling image \"nginx:does-not-exist\""})
        );

        // Unschedulable, in parallel: every Pod Pending, no deadline.
        let t2 = at(t0, Duration::from_secs(20));
        let pending = workload(
            "StatefulSet",
            3,
            "  podManagementPolicy: Parallel\n",
            &format!("sandbox.greenlight.dev/schedule: '{NO_GPU}'"),
        );
        w.observe_tip(&sha('c'), &single(&pending), &no_refresh, t2);
        w.tick(at(t2, Duration::from_secs(3600)));
        assert_eq!(
            tree_node(&w, "StatefulSet", "web")["health"],
            json!({"status": "Progressing", "message": "Waiting for 3 pods to be ready..."})
        );
        assert_eq!(names(&w).len(), 3);
        assert!(pods(&w).iter().all(|p| p["info"][0]["value"] == "Pending"));
    }

    #[test]
    fn the_live_object_of_a_tree_node_or_why_there_is_none() {
        let t0 = Now::current();
        let mut w = world(Duration::ZERO, t0);
        let text = format!(
            "{}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  annotations: {{sandbox.greenlight.dev/apply: fail}}\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData: {{password: hunter2}}\n",
            workload("Deployment", 1, "", "")
        );
        w.observe_tip(&sha('a'), &single(&text), &no_refresh, t0);
        let deploy = live(&w, "apps", "Deployment", "web").unwrap();
        assert_eq!(deploy["spec"]["replicas"], 1);
        assert!(deploy["metadata"]["uid"].is_string());
        assert_eq!(
            live(&w, "", "Secret", "creds").unwrap()["stringData"]["password"],
            "++++++++"
        );
        let rs_name = pods(&w)[0]["parentRefs"][0]["name"]
            .as_str()
            .unwrap()
            .to_string();
        let rs = live(&w, "apps", "ReplicaSet", &rs_name).unwrap();
        assert_eq!(rs["metadata"]["ownerReferences"][0]["name"], "web");
        assert_eq!(
            live(&w, "", "ConfigMap", "held").unwrap_err(),
            ResourceMiss::NotCreated
        );
        assert_eq!(
            live(&w, "apps", "Deployment", "nope").unwrap_err(),
            ResourceMiss::NotInTree
        );
        let key = ResourceKey {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespace: "default".into(),
            name: "web".into(),
        };
        assert!(w.live_resource("nope", &key).is_none());
    }

    #[test]
    fn go_durations_and_kitchen_times() {
        assert_eq!(go_duration(Duration::from_secs(5)), "5s");
        assert_eq!(go_duration(Duration::from_secs(180)), "3m");
        assert_eq!(go_duration(Duration::from_millis(200)), "200ms");
        assert_eq!(go_duration(Duration::from_millis(7200)), "7200ms");
        let t = std::time::UNIX_EPOCH + Duration::from_secs(1_780_000_000);
        assert_eq!(kitchen(t), "8:26PM");
        assert_eq!(
            kitchen(std::time::UNIX_EPOCH + Duration::from_secs(60)),
            "12:01AM"
        );
    }

    fn hold(kind: &str, name: &str, health: Health, seconds: u64) -> HoldHealth {
        HoldHealth {
            kind: kind.into(),
            name: name.into(),
            namespace: None,
            health,
            message: String::new(),
            length: Duration::from_secs(seconds),
        }
    }

    /// A healthy web Deployment (rollout time 1 s, clock run to its end) under `version`.
    fn healthy_web(version: ArgoCdVersion) -> (World, Now) {
        let t0 = Now::current();
        let mut w = world_with(config(Duration::from_secs(1), version), t0);
        w.observe_tip(&sha('a'), &rendered("nginx:1"), &no_refresh, t0);
        let now = run_clock(&mut w, t0);
        assert_eq!(health_of(&w), "Healthy");
        (w, now)
    }

    #[test]
    fn a_held_health_shows_everywhere_for_a_while_and_ends_on_the_clock() {
        for version in ArgoCdVersion::ALL {
            let (mut w, t1) = healthy_web(version);
            let mut updates = w.subscribe(1024);
            let mut h = hold("Deployment", "web", Health::Progressing, 20);
            h.message =
                "Waiting for rollout to finish: 2 of 4 updated replicas are available...".into();
            w.hold_health("web", h, t1).unwrap();
            let expected = json!({"status": "Progressing", "message": "Waiting for rollout to finish: 2 of 4 updated replicas are available..."});
            let changes = drain(&mut updates);
            assert_eq!(changes.len(), 1, "{version:?}: one update when it starts");
            assert_eq!(changes[0]["status"]["health"]["status"], "Progressing");
            assert_eq!(health_of(&w), "Progressing", "{version:?}");
            assert_eq!(tree_node(&w, "Deployment", "web")["health"], expected);
            let served = w.application_served("web").unwrap();
            assert_eq!(resource_health(&served, "web"), expected, "{version:?}");
            let stored = w.application("web").unwrap();
            let inline = if version.inline_resource_health() {
                expected.clone()
            } else {
                Value::Null
            };
            assert_eq!(resource_health(&stored, "web"), inline, "{version:?}");
            // The clock wakes exactly when the hold ends.
            assert_eq!(
                w.next_deadline(t1),
                Some(t1.mono + Duration::from_secs(20)),
                "{version:?}"
            );
            w.tick(at(t1, Duration::from_millis(19_900)));
            assert!(drain(&mut updates).is_empty(), "{version:?}: still held");
            assert_eq!(health_of(&w), "Progressing");
            w.tick(at(t1, Duration::from_secs(20)));
            let changes = drain(&mut updates);
            assert_eq!(changes.len(), 1, "{version:?}: one update when it ends");
            assert_eq!(changes[0]["status"]["health"]["status"], "Healthy");
            assert_eq!(
                tree_node(&w, "Deployment", "web")["health"],
                json!({"status": "Healthy"})
            );
            assert_eq!(w.next_deadline(at(t1, Duration::from_secs(20))), None);
        }
    }

    #[test]
    fn a_held_health_is_aggregated_as_the_resources_own() {
        for version in ArgoCdVersion::ALL {
            let (mut w, t1) = healthy_web(version);
            // A live resource reporting Missing counts in every version (Argo CD leaves out only
            // Missing resources that do not exist, from 3.4 on).
            w.hold_health("web", hold("Deployment", "web", Health::Missing, 5), t1)
                .unwrap();
            assert_eq!(health_of(&w), "Missing", "{version:?}");
            assert_eq!(
                tree_node(&w, "Deployment", "web")["health"]["status"],
                "Missing"
            );
            // A new hold on the same resource replaces the old one; Suspended is better than
            // Degraded, Degraded worse than Progressing.
            w.hold_health("web", hold("Deployment", "web", Health::Suspended, 5), t1)
                .unwrap();
            assert_eq!(health_of(&w), "Suspended", "{version:?}");
            w.hold_health("web", hold("Deployment", "web", Health::Degraded, 5), t1)
                .unwrap();
            assert_eq!(health_of(&w), "Degraded", "{version:?}");
            // Zero seconds ends the hold at once.
            w.hold_health("web", hold("Deployment", "web", Health::Unknown, 0), t1)
                .unwrap();
            assert_eq!(health_of(&w), "Healthy", "{version:?}");
        }
    }

    #[test]
    fn a_held_health_on_an_ignored_resource_leaves_the_app_healthy() {
        let t0 = Now::current();
        let mut w = world(Duration::ZERO, t0);
        let ignored = deployment("nginx:1", "argocd.argoproj.io/ignore-healthcheck: 'true'");
        w.observe_tip(
            &sha('a'),
            &BTreeMap::from([("web".to_string(), files(&ignored))]),
            &no_refresh,
            t0,
        );
        let t1 = run_clock(&mut w, t0);
        w.hold_health("web", hold("Deployment", "web", Health::Degraded, 5), t1)
            .unwrap();
        assert_eq!(
            tree_node(&w, "Deployment", "web")["health"]["status"],
            "Degraded"
        );
        assert_eq!(health_of(&w), "Healthy");
    }

    #[test]
    fn a_hold_survives_a_new_apply_of_the_resource_until_it_ends() {
        let (mut w, t1) = healthy_web(ArgoCdVersion::V3_5);
        w.hold_health(
            "web",
            hold("Deployment", "web", Health::Progressing, 30),
            t1,
        )
        .unwrap();
        let t2 = at(t1, Duration::from_secs(2));
        w.observe_tip(&sha('b'), &rendered("nginx:2"), &no_refresh, t2);
        let t3 = run_clock(&mut w, t2);
        assert_eq!(
            t3.mono,
            t1.mono + Duration::from_secs(30),
            "the hold ends last"
        );
        assert_eq!(health_of(&w), "Healthy");
        assert_eq!(
            w.application("web").unwrap()["status"]["sync"]["revision"],
            sha('b')
        );
    }

    /// A rolling update keeps the old ReplicaSet's Pods, running the old image, until the new
    /// ones run; then only the new ReplicaSet is left.
    #[test]
    fn a_rollout_keeps_the_old_pods_until_the_new_ones_run() {
        let (mut w, t1) = healthy_web(ArgoCdVersion::V3_5);
        let t2 = at(t1, Duration::from_secs(1));
        w.observe_tip(&sha('b'), &rendered("nginx:2"), &no_refresh, t2);
        let running = |w: &World| -> Vec<(String, String)> {
            let mut found: Vec<(String, String)> = pods(w)
                .iter()
                .map(|n| {
                    let name = n["name"].as_str().unwrap().to_string();
                    let live = live(w, "", "Pod", &name).unwrap();
                    let id = live["status"]["containerStatuses"][0]["imageID"]
                        .as_str()
                        .unwrap()
                        .to_string();
                    (n["images"][0].as_str().unwrap().to_string(), id)
                })
                .collect();
            found.sort();
            found
        };
        let rolling = running(&w);
        assert_eq!(
            rolling,
            [
                ("nginx:1".to_string(), image_id("nginx:1")),
                ("nginx:2".to_string(), String::new()),
            ],
            "{rolling:?}"
        );
        assert_eq!(
            tree_kinds(&w).iter().filter(|k| *k == "ReplicaSet").count(),
            2
        );
        run_clock(&mut w, t2);
        assert_eq!(running(&w), [("nginx:2".to_string(), image_id("nginx:2"))]);
        assert_eq!(
            tree_kinds(&w).iter().filter(|k| *k == "ReplicaSet").count(),
            1
        );
    }

    #[test]
    fn a_hold_names_what_it_cannot_find() {
        let (mut w, t1) = healthy_web(ArgoCdVersion::V3_5);
        assert_eq!(
            w.hold_health("nope", hold("Deployment", "web", Health::Degraded, 5), t1)
                .unwrap_err(),
            "app: no app named \"nope\""
        );
        assert_eq!(
            w.hold_health("web", hold("Deployment", "api", Health::Degraded, 5), t1)
                .unwrap_err(),
            "kind, name: app web has no live Deployment named \"api\""
        );
        let mut elsewhere = hold("Deployment", "web", Health::Degraded, 5);
        elsewhere.namespace = Some("other".into());
        assert_eq!(
            w.hold_health("web", elsewhere, t1).unwrap_err(),
            "kind, name: app web has no live Deployment named \"web\" in namespace other"
        );
        let mut here = hold("Deployment", "web", Health::Degraded, 5);
        here.namespace = Some("default".into());
        w.hold_health("web", here, t1).unwrap();
        assert_eq!(health_of(&w), "Degraded");
        assert_eq!(
            Health::parse("Fine").unwrap_err(),
            "health: \"Fine\" is not one of Healthy, Progressing, Degraded, Suspended, Missing, Unknown"
        );
    }
}
