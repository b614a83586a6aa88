//! The facts the judge reads about one Argo CD Application at one moment. The Argo CD adapter
//! (greenlight-argocd) reduces an Application's JSON and resource tree to an [`AppSnapshot`];
//! the judge never sees Argo CD's JSON, so every rule of judgement is testable with plain data.
//! This module only describes; it decides nothing.

use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Argo CD's health vocabulary (gitops-engine `health.go`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Health {
    Healthy,
    Progressing,
    Degraded,
    Suspended,
    Missing,
    Unknown,
}

impl Health {
    /// Argo CD's order of badness (gitops-engine `health.IsWorse`): Healthy < Suspended <
    /// Progressing < Missing < Degraded < Unknown.
    pub fn rank(self) -> u8 {
        match self {
            Health::Healthy => 0,
            Health::Suspended => 1,
            Health::Progressing => 2,
            Health::Missing => 3,
            Health::Degraded => 4,
            Health::Unknown => 5,
        }
    }

    /// A condition a resource can hold for good, which a baseline may excuse
    /// (`docs/verdicts.md#evidence`): Suspended, Degraded, Missing. Progressing is a state on
    /// the way (the commit's own rollout may be what is progressing), Unknown says nothing.
    pub fn may_be_chronic(self) -> bool {
        matches!(self, Health::Suspended | Health::Degraded | Health::Missing)
    }

    /// Tolerant: anything Argo CD may add later reads as Unknown, never as Healthy.
    pub fn parse(s: &str) -> Health {
        match s {
            "Healthy" => Health::Healthy,
            "Progressing" => Health::Progressing,
            "Degraded" => Health::Degraded,
            "Suspended" => Health::Suspended,
            "Missing" => Health::Missing,
            _ => Health::Unknown,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "Healthy",
            Health::Progressing => "Progressing",
            Health::Degraded => "Degraded",
            Health::Suspended => "Suspended",
            Health::Missing => "Missing",
            Health::Unknown => "Unknown",
        }
    }
}

/// Where per-resource health came from: Argo CD ≥ 3.0 keeps it out of the Application unless
/// configured, and the REST resource tree has it. A judgement says which one it used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResourceHealthSource {
    /// `status.resources[].health` in the Application.
    Application,
    /// `GET /api/v1/applications/{name}/resource-tree`.
    ResourceTree,
    /// Neither was available: per-resource health is unknown.
    Unavailable,
}

impl ResourceHealthSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceHealthSource::Application => "application",
            ResourceHealthSource::ResourceTree => "resource-tree",
            ResourceHealthSource::Unavailable => "unavailable",
        }
    }
}

/// A top-level managed resource whose health is Degraded or Missing (hooks and resources
/// annotated `argocd.argoproj.io/ignore-healthcheck: "true"` are already left out).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnhealthyResource {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub health: Health,
    pub message: String,
}

impl UnhealthyResource {
    pub fn label(&self) -> String {
        if self.namespace.is_empty() {
            format!("{}/{}={}", self.kind, self.name, self.health.as_str())
        } else {
            format!(
                "{}/{}/{}={}",
                self.kind,
                self.namespace,
                self.name,
                self.health.as_str()
            )
        }
    }
}

/// A top-level managed resource as the last comparison left it (hooks are not managed
/// resources): its sync status and, when known, its health.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceView {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    #[serde(default)]
    pub namespace: String,
    pub name: String,
    /// `status.resources[].status`: Synced, OutOfSync (Unknown, or empty when not said).
    pub sync_status: String,
    /// `status.resources[].requiresPruning`: a live object git no longer has, left for a
    /// human (or an automated sync that prunes) to delete.
    #[serde(default)]
    pub requires_pruning: bool,
    /// Inline `status.resources[].health` or the resource tree's; `None` when not known (a
    /// kind without a health check, `ignore-healthcheck`, health unavailable).
    #[serde(default)]
    pub health: Option<Health>,
    #[serde(default)]
    pub message: String,
}

impl ResourceView {
    /// Synced, and Healthy or without health: nothing a baseline needs to remember.
    pub fn is_clean(&self) -> bool {
        self.sync_status == "Synced" && self.health.is_none_or(|h| h == Health::Healthy)
    }

    /// The same resource (group, kind, namespace, name).
    pub fn same_object(&self, other: &ResourceView) -> bool {
        self.group == other.group
            && self.kind == other.kind
            && self.namespace == other.namespace
            && self.name == other.name
    }

    /// The same resource failing the same way: same health, same sync status, same
    /// `requiresPruning` (`docs/verdicts.md#evidence`, condition 3).
    pub fn same_condition(&self, other: &ResourceView) -> bool {
        self.same_object(other)
            && self.health == other.health
            && self.sync_status == other.sync_status
            && self.requires_pruning == other.requires_pruning
    }

    /// `Kind/namespace/name=<condition>`, as reasons quote a resource: its health when not
    /// Healthy, its sync status when not Synced (`CronJob/default/nightly=Suspended`,
    /// `ConfigMap/apps/old=OutOfSync (requires pruning)`). No comma, so a list reads back.
    pub fn label(&self) -> String {
        let object = if self.namespace.is_empty() {
            format!("{}/{}", self.kind, self.name)
        } else {
            format!("{}/{}/{}", self.kind, self.namespace, self.name)
        };
        let health = self
            .health
            .filter(|h| *h != Health::Healthy)
            .map(|h| h.as_str().to_string());
        let sync = (self.sync_status != "Synced").then(|| {
            let status = if self.sync_status.is_empty() {
                "sync not said"
            } else {
                self.sync_status.as_str()
            };
            if self.requires_pruning {
                format!("{status} (requires pruning)")
            } else {
                status.to_string()
            }
        });
        match (health, sync) {
            (Some(h), Some(s)) => format!("{object}={h} and {s}"),
            (Some(c), None) | (None, Some(c)) => format!("{object}={c}"),
            (None, None) => format!("{object}=Healthy"),
        }
    }
}

/// What was already wrong with an app when greenlight saw it idle before a commit's sync: the
/// One top-level resource of an Application, by kind, namespace and name: what a scoped health
/// predicate looks at (the promotion gate's candidate, in a candidates' Application other
/// workloads' candidates share).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopedResource {
    pub kind: String,
    /// Empty: any namespace.
    #[serde(default)]
    pub namespace: String,
    pub name: String,
}

impl ScopedResource {
    pub fn matches(&self, r: &ResourceView) -> bool {
        r.kind == self.kind
            && r.name == self.name
            && (self.namespace.is_empty() || r.namespace == self.namespace)
    }

    pub fn label(&self) -> String {
        if self.namespace.is_empty() {
            format!("{}/{}", self.kind, self.name)
        } else {
            format!("{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// *chronic* conditions its baseline records, so that the same condition after the commit is
/// not laid on the commit (`docs/verdicts.md#evidence`, condition 3). Only what was not clean.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chronic {
    /// Every top-level resource that was not Healthy-and-Synced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceView>,
    /// The PostSync hooks that failed in the last operation, when it failed in PostSync
    /// (labelled as [`ReachVia::PostSyncHookFailed`] labels them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<String>,
    /// Resources Degraded while the app-level health of the same observation was better. Argo
    /// CD's app health is the worst of its resources' (gitops-engine `health.IsWorse`; Missing
    /// is left out since 3.4), so such an observation joins an Application and a resource tree
    /// read at different moments
    /// (the tree already showing what the next sync did): these are never chronic, never
    /// excused, and the observation is no clean before ([`unclean`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disagreeing: Vec<ResourceView>,
}

impl Chronic {
    /// The chronic conditions of an observation whose app-level health is `app_health`: its
    /// resources that are not clean, its failed PostSync hooks; a resource less healthy than
    /// the app is kept apart (`disagreeing`).
    pub fn of(resources: &[ResourceView], hooks: &[String], app_health: Health) -> Chronic {
        let (disagreeing, resources) = resources
            .iter()
            .filter(|r| !r.is_clean())
            .cloned()
            .partition(|r| {
                r.health
                    .is_some_and(|h| h == Health::Degraded && h.rank() > app_health.rank())
            });
        Chronic {
            resources,
            hooks: hooks.to_vec(),
            disagreeing,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.resources.is_empty() && self.hooks.is_empty() && self.disagreeing.is_empty()
    }

    /// `r` is in the same condition as it was here, and that condition may be chronic: its
    /// health (if any) Suspended, Degraded or Missing.
    pub fn excuses(&self, r: &ResourceView) -> bool {
        !r.is_clean()
            && r.health
                .is_none_or(|h| h == Health::Healthy || h.may_be_chronic())
            && self.resources.iter().any(|c| c.same_condition(r))
    }

    /// An app whose app-level health is `health` with these conditions is healthy apart from
    /// them: `health` is Healthy, or it is the worst health of its chronic resources and may
    /// be chronic, and no chronic resource is Progressing or Unknown.
    pub fn explains(&self, health: Health) -> bool {
        if health == Health::Healthy {
            return true;
        }
        let healths = || self.resources.iter().filter_map(|r| r.health);
        health.may_be_chronic()
            && healths().all(|h| h == Health::Healthy || h.may_be_chronic())
            && healths().map(Health::rank).max() == Some(health.rank())
    }

    /// The app-level health a baseline records: Healthy when these conditions explain it.
    pub fn baseline_health(&self, health: Health) -> Health {
        if self.explains(health) {
            Health::Healthy
        } else {
            health
        }
    }
}

/// How a revision was seen as synced. Only revisions Argo CD actually applied are candidates:
/// never `sync.revision` while OutOfSync (that is only what it compared against).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReachVia {
    /// `status.operationState.syncResult.revision(s)` of an operation that Succeeded.
    OperationSucceeded,
    /// A finished operation that Failed or Errored on this revision before it applied it whole
    /// (an object it could not apply, a PreSync hook, a Sync-phase task): evidence that Argo
    /// CD could not apply the commit, never reach (`docs/verdicts.md#operation-outcomes`).
    /// Watches recorded by an older greenlight may name it as their reach.
    OperationFailed { phase: String, message: String },
    /// A finished operation that applied this revision whole (every PreSync and Sync task
    /// succeeded) and then Failed in its PostSync phase: reach, with a failed hook as evidence
    /// against the commit. `hooks` labels each failed PostSync task with its message.
    PostSyncHookFailed {
        phase: String,
        message: String,
        hooks: Vec<String>,
    },
    /// `status.sync.revision(s)` while `status.sync.status == Synced` and no operation running.
    SyncedRevision,
    /// `status.history[].revision(s)`.
    History { id: i64 },
}

impl ReachVia {
    pub fn describe(&self) -> String {
        match self {
            ReachVia::OperationSucceeded => "a succeeded sync operation".into(),
            ReachVia::OperationFailed { phase, .. } => {
                format!("a sync operation that ended {phase}")
            }
            ReachVia::PostSyncHookFailed { phase, .. } => {
                format!("a sync operation that applied it, then ended {phase} in a PostSync hook")
            }
            ReachVia::SyncedRevision => "the synced revision".into(),
            ReachVia::History { id } => format!("deployment history entry {id}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReachCandidate {
    /// The revision for the watched repository's source (multi-source apps: that source's index).
    pub revision: String,
    pub via: ReachVia,
}

/// The app's source paths in the watched repository, for attribution: which commits could have
/// changed what this app deploys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SourcePaths {
    /// Repository-relative path prefixes (`apps/web`, `values/prod.yaml`); `""` is the whole repo.
    Known(Vec<String>),
    /// greenlight cannot tell (a plugin, a URL value file, …): assume every commit touches it.
    Unknown { why: String },
}

/// How the app relates to the watched repository.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SourceFacts {
    /// No source of the app is the watched repository (URLs compared after normalization).
    NotFromRepo { repos: Vec<String> },
    /// At least one source is the watched repository.
    FromRepo {
        /// `targetRevision` of each source from the watched repo (as written; `""` = HEAD).
        target_revisions: Vec<String>,
        /// The Helm chart name when the source is a Helm repository chart.
        chart: Option<String>,
        /// Every non-empty revision Argo CD reported for this source (sync, operation, history).
        /// Evidence only: the judge refuses non-SHA revisions from the current ones (sync and
        /// operation), since history may hold what the app deployed before it moved to git.
        revisions: Vec<String>,
        paths: SourcePaths,
    },
}

/// The last sync operation, when there is one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationFacts {
    /// Running, Terminating, Failed, Error, Succeeded.
    pub phase: String,
    pub message: String,
    pub revision: String,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    /// `operation.sync.dryRun`: nothing was applied, whatever the phase says.
    #[serde(default)]
    pub dry_run: bool,
    /// `operation.sync.resources` named some resources: only those were applied.
    #[serde(default)]
    pub partial: bool,
}

impl OperationFacts {
    /// A dry run or a partial sync: its `Succeeded` does not mean the revision was applied.
    pub fn applies_nothing_whole(&self) -> bool {
        self.dry_run || self.partial
    }
}

/// See [`AppSnapshot::compared_elsewhere`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComparedElsewhere {
    /// `operationState.syncResult.revision`: what the operation applied.
    pub applied: String,
    /// `status.sync.revision`: what the last reconcile compared.
    pub compared: String,
}

/// One Application, reduced to what the judge reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppSnapshot {
    pub namespace: String,
    pub name: String,
    pub source: SourceFacts,
    /// `status.sync.status`: Synced, OutOfSync, Unknown (or empty).
    pub sync_status: String,
    /// `status.sync.revision(s)` for the watched source: evidence only, never proof of reach.
    pub sync_revision: String,
    pub health: Health,
    pub health_message: String,
    /// `operation` present, or `operationState.phase` Running/Terminating.
    pub operation_running: bool,
    pub last_operation: Option<OperationFacts>,
    pub unhealthy_resources: Vec<UnhealthyResource>,
    pub resource_health_source: ResourceHealthSource,
    /// Health was computed before the last operation finished (`reconciledAt < finishedAt`).
    pub health_stale: bool,
    /// `spec.syncPolicy.automated` present with `enabled` not false.
    pub automated_sync: bool,
    pub reach_candidates: Vec<ReachCandidate>,
    /// The last operation `Succeeded` in the same whole second as the last reconcile started,
    /// and that reconcile compared another revision than the operation applied. Argo CD
    /// publishes a finished sync with the *previous* reconcile's sync and health, so the health
    /// is the state after the sync only when that comparison is newer than what was applied:
    /// the judge asks git (`docs/verdicts.md#health`).
    #[serde(default)]
    pub compared_elsewhere: Option<ComparedElsewhere>,
    /// The message of a `ComparisonError` condition: Argo CD could not render the app's
    /// manifests, so it compared nothing and will sync nothing until a commit fixes them.
    #[serde(default)]
    pub comparison_error: Option<String>,
    /// `spec.sourceHydrator` is set: the app syncs from a branch Argo CD's source hydrator
    /// writes, not from the commits pushed to the watched branch.
    #[serde(default)]
    pub source_hydrator: bool,
    /// What decides what Argo CD deploys for this app besides the watched repository's
    /// commits, each under the name a reason quotes: a digest of each field of the spec
    /// (`spec.source.kustomize`, `spec.syncPolicy`, `spec.sources[1].targetRevision`, …) and
    /// the revision of each source from another repository (`spec.sources[1] revision`). A
    /// change while a watch is live is a change from outside the watched repository
    /// (`docs/verdicts.md#changed-outside`). Empty when not known.
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
    /// Every top-level managed resource (hooks left out), with its sync status and health
    /// when known (`ignore-healthcheck` resources without health). Empty when not known.
    #[serde(default)]
    pub resources: Vec<ResourceView>,
}

/// A short, stable digest of `text` (64-bit FNV-1a, hex): enough to tell whether a field
/// changed, never to stand for its content.
pub fn digest(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

impl AppSnapshot {
    pub fn key(&self) -> AppKey {
        AppKey {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

/// What the stream says of an app that no watch follows: enough for the health a later
/// watch's commit found before its sync began (`docs/verdicts.md#baseline`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Glimpse {
    /// The app-level health (`status.health.status`).
    pub health: Health,
    /// `status.sync.revision` for the watched source: the revision Argo CD compared the live
    /// state with (a resource the commit adds is `Missing` once its revision is compared).
    pub sync_revision: String,
    /// `operation` present, or `operationState.phase` Running/Terminating.
    pub operation_running: bool,
    /// `status.sync.status` (empty when not said, as in a glimpse recorded before it was kept).
    #[serde(default)]
    pub sync_status: String,
    /// The phase of the last operation (`status.operationState.phase`), if any.
    #[serde(default)]
    pub last_operation_phase: Option<String>,
    /// The revision the last operation applied (`syncResult.revision` for the watched source).
    #[serde(default)]
    pub last_operation_revision: Option<String>,
    /// What was not clean: the resources not Healthy-and-Synced, the PostSync hooks that
    /// failed (`docs/verdicts.md#evidence`). Empty in a glimpse from before it was kept.
    #[serde(default)]
    pub chronic: Chronic,
    /// The app's source paths in the watched repository; `None` when no source is the watched
    /// repository (and in a glimpse from before they were kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_paths: Option<SourcePaths>,
}

impl Glimpse {
    /// See [`AppSnapshot::applied_revision`].
    pub fn applied_revision(&self) -> Option<String> {
        self.last_operation_revision
            .clone()
            .filter(|r| self.last_operation_phase.as_deref() == Some("Succeeded") && is_git_sha(r))
    }

    /// See [`out_of_sync_beyond_pruning`]; a glimpse keeps every resource not Synced among its
    /// chronic ones.
    pub fn out_of_sync_beyond_pruning(&self) -> bool {
        let resources: Vec<ResourceView> = self
            .chronic
            .resources
            .iter()
            .chain(&self.chronic.disagreeing)
            .cloned()
            .collect();
        out_of_sync_beyond_pruning(&self.sync_status, &resources)
    }

    /// What a glimpse says of an app as a baseline (`docs/verdicts.md#evidence`).
    pub fn unclean(&self) -> Option<String> {
        unclean(
            &self.sync_status,
            self.operation_running,
            self.last_operation_phase.as_deref(),
            &self.chronic.resources,
        )
        .or_else(|| disagreement(self.health, &self.chronic.disagreeing))
    }
}

/// Why an observation of an app is no *clean before* (`docs/verdicts.md#evidence`): the app
/// must be `Synced` — or `OutOfSync` only through resources that require pruning (live objects
/// git no longer has, which Argo CD leaves for a human to prune and no commit's rendering
/// contains) — with no operation running and its last sync operation (hooks included)
/// `Succeeded`, or none ever run. `resources` are the app's resources (its chronic ones are
/// enough). `None` when it is clean.
pub fn unclean(
    sync_status: &str,
    operation_running: bool,
    last_operation_phase: Option<&str>,
    resources: &[ResourceView],
) -> Option<String> {
    if operation_running {
        return Some("an operation was running".into());
    }
    if sync_status != "Synced" && !out_of_sync_only_by_pruning(sync_status, resources) {
        let sync = if sync_status.is_empty() {
            "not said"
        } else {
            sync_status
        };
        return Some(format!("sync status {sync}"));
    }
    match last_operation_phase {
        None | Some("Succeeded") => None,
        Some(phase) => Some(format!("its last sync operation ended {phase}")),
    }
}

/// Why an observation whose app-level health is `app_health` is no clean before when some
/// resources are less healthy than the app ([`Chronic::disagreeing`]); `None` when none is.
pub fn disagreement(app_health: Health, disagreeing: &[ResourceView]) -> Option<String> {
    if disagreeing.is_empty() {
        return None;
    }
    let named: Vec<String> = disagreeing.iter().map(ResourceView::label).collect();
    Some(format!(
        "its app health {} is better than its resources' ({}): the Application and its resource tree were read at different moments",
        app_health.as_str(),
        named.join(", ")
    ))
}

/// `OutOfSync` through a resource that git's rendering at the compared revision would change:
/// not only through resources that require pruning (which no sync applies).
pub fn out_of_sync_beyond_pruning(sync_status: &str, resources: &[ResourceView]) -> bool {
    sync_status == "OutOfSync" && !out_of_sync_only_by_pruning(sync_status, resources)
}

/// `OutOfSync` only through resources that require pruning: at least one resource is not
/// Synced, and every such one requires pruning.
fn out_of_sync_only_by_pruning(sync_status: &str, resources: &[ResourceView]) -> bool {
    let mut not_synced = resources.iter().filter(|r| r.sync_status != "Synced");
    sync_status == "OutOfSync"
        && not_synced.clone().next().is_some()
        && not_synced.all(|r| r.sync_status == "OutOfSync" && r.requires_pruning)
}

impl AppSnapshot {
    /// The PostSync hooks that failed in the last operation, when it applied its revision and
    /// failed in PostSync.
    pub fn failed_post_sync_hooks(&self) -> Vec<String> {
        self.reach_candidates
            .iter()
            .find_map(|c| match &c.via {
                ReachVia::PostSyncHookFailed { hooks, .. } => Some(hooks.clone()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// What is not clean in this observation (see [`Chronic`]).
    pub fn chronic(&self) -> Chronic {
        Chronic::of(&self.resources, &self.failed_post_sync_hooks(), self.health)
    }

    /// The revision the last sync operation applied, when it Succeeded: hooks (which Argo CD
    /// does not compare) last ran there, however far `sync.revision` has moved since.
    pub fn applied_revision(&self) -> Option<String> {
        self.last_operation
            .as_ref()
            .filter(|o| o.phase == "Succeeded" && is_git_sha(&o.revision))
            .map(|o| o.revision.clone())
    }

    /// See [`out_of_sync_beyond_pruning`].
    pub fn out_of_sync_beyond_pruning(&self) -> bool {
        out_of_sync_beyond_pruning(&self.sync_status, &self.resources)
    }

    /// See [`unclean`] and [`disagreement`].
    pub fn unclean(&self) -> Option<String> {
        unclean(
            &self.sync_status,
            self.operation_running,
            self.last_operation.as_ref().map(|o| o.phase.as_str()),
            &self.resources,
        )
        .or_else(|| disagreement(self.health, &self.chronic().disagreeing))
    }
}

/// An Application's identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AppKey {
    pub namespace: String,
    pub name: String,
}

/// A 40-hex git SHA-1 (lowercase or uppercase).
pub fn is_git_sha(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|c| c.is_ascii_hexdigit())
}
