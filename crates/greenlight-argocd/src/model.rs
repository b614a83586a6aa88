//! The Argo CD Application and resource tree as greenlight reads them: partial, tolerant serde
//! types. They keep only the fields the reduction needs, except that the spec keeps every field
//! (the reduction digests it, to see the Application edited under a watch); other unknown fields
//! are ignored and absent or `null` fields read as empty, so a newer Argo CD never breaks
//! decoding. This module never
//! interprets what the fields mean — that is `snapshot.rs`.
//!
//! Field names follow Argo CD's JSON (`pkg/apis/application/v1alpha1/types.go`); note `repoURL`,
//! and that `operation` sits at the top level of the Application, not in its status.

use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// The fields of a spec object greenlight does not read, kept as they came.
pub type Other = BTreeMap<String, serde_json::Value>;

/// Go's encoder writes `null` for nil slices and pointers; read `null` as the empty value, the
/// same as an absent field.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Application {
    #[serde(deserialize_with = "nullable")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "nullable")]
    pub spec: ApplicationSpec,
    /// A requested or in-flight operation. Its content does not matter to greenlight, only that
    /// it is there, so it is kept as raw JSON.
    pub operation: Option<serde_json::Value>,
    #[serde(deserialize_with = "nullable")]
    pub status: ApplicationStatus,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    #[serde(deserialize_with = "nullable")]
    pub namespace: String,
    #[serde(deserialize_with = "nullable")]
    pub annotations: std::collections::BTreeMap<String, String>,
    /// What Image Updater's `ImageUpdater` resources select apps by (`greenlight audit`).
    #[serde(deserialize_with = "nullable")]
    pub labels: std::collections::BTreeMap<String, String>,
    #[serde(deserialize_with = "nullable")]
    pub resource_version: String,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApplicationSpec {
    pub source: Option<ApplicationSource>,
    /// Multi-source apps. When non-empty, Argo CD ignores `source`.
    #[serde(deserialize_with = "nullable")]
    pub sources: Vec<ApplicationSource>,
    pub sync_policy: Option<SyncPolicy>,
    /// Set when the app syncs from a branch that Argo CD's source hydrator writes; its content
    /// does not matter to greenlight, only that it is there.
    pub source_hydrator: Option<serde_json::Value>,
    #[serde(flatten)]
    pub other: Other,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApplicationSource {
    #[serde(rename = "repoURL", deserialize_with = "nullable")]
    pub repo_url: String,
    #[serde(deserialize_with = "nullable")]
    pub path: String,
    #[serde(deserialize_with = "nullable")]
    pub target_revision: String,
    /// Set for a Helm repository (or OCI) chart source.
    #[serde(deserialize_with = "nullable")]
    pub chart: String,
    /// The name other sources use as `$<ref>` in Helm value files.
    #[serde(rename = "ref", deserialize_with = "nullable")]
    pub ref_name: String,
    pub helm: Option<HelmSource>,
    /// A config management plugin: what it reads is beyond greenlight's knowledge.
    pub plugin: Option<serde_json::Value>,
    #[serde(flatten)]
    pub other: Other,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct HelmSource {
    #[serde(deserialize_with = "nullable")]
    pub value_files: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    pub file_parameters: Vec<HelmFileParameter>,
    #[serde(flatten)]
    pub other: Other,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct HelmFileParameter {
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    #[serde(deserialize_with = "nullable")]
    pub path: String,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SyncPolicy {
    pub automated: Option<SyncPolicyAutomated>,
    #[serde(flatten)]
    pub other: Other,
}

/// All `*bool` in Argo CD: absent means the default (`enabled` absent means on).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SyncPolicyAutomated {
    pub prune: Option<bool>,
    pub self_heal: Option<bool>,
    pub enabled: Option<bool>,
    #[serde(flatten)]
    pub other: Other,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApplicationStatus {
    #[serde(deserialize_with = "nullable")]
    pub sync: SyncStatus,
    #[serde(deserialize_with = "nullable")]
    pub health: HealthStatus,
    #[serde(deserialize_with = "nullable")]
    pub resources: Vec<ResourceStatus>,
    pub operation_state: Option<OperationState>,
    #[serde(deserialize_with = "nullable")]
    pub history: Vec<RevisionHistory>,
    #[serde(deserialize_with = "nullable")]
    pub conditions: Vec<ApplicationCondition>,
    #[serde(deserialize_with = "nullable")]
    pub reconciled_at: String,
    /// `""` (health inline in `resources[]`) or `appTree` (Argo CD ≥ 3.0 default: only the
    /// resource tree carries per-resource health).
    #[serde(deserialize_with = "nullable")]
    pub resource_health_source: String,
    /// Helm, Kustomize, Directory, Plugin — for single-source apps.
    #[serde(deserialize_with = "nullable")]
    pub source_type: String,
    /// Index-aligned with `spec.sources[]`.
    #[serde(deserialize_with = "nullable")]
    pub source_types: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SyncStatus {
    /// Synced, OutOfSync, Unknown.
    #[serde(deserialize_with = "nullable")]
    pub status: String,
    /// What the last comparison ran against — not necessarily what is applied.
    #[serde(deserialize_with = "nullable")]
    pub revision: String,
    #[serde(deserialize_with = "nullable")]
    pub revisions: Vec<String>,
    pub compared_to: Option<ComparedTo>,
}

/// The sources a comparison, sync result or history entry was made from. Their order is the
/// order of that record's `revisions[]`, which may differ from today's `spec.sources[]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ComparedTo {
    pub source: Option<ApplicationSource>,
    #[serde(deserialize_with = "nullable")]
    pub sources: Vec<ApplicationSource>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct HealthStatus {
    #[serde(deserialize_with = "nullable")]
    pub status: String,
    #[serde(deserialize_with = "nullable")]
    pub message: String,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResourceStatus {
    #[serde(deserialize_with = "nullable")]
    pub group: String,
    #[serde(deserialize_with = "nullable")]
    pub version: String,
    #[serde(deserialize_with = "nullable")]
    pub kind: String,
    #[serde(deserialize_with = "nullable")]
    pub namespace: String,
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    /// Synced or OutOfSync.
    #[serde(deserialize_with = "nullable")]
    pub status: String,
    /// Absent with `resourceHealthSource: appTree`, for kinds without a health check, and for
    /// hooks and `ignore-healthcheck` resources (Argo CD skips those before persisting health).
    pub health: Option<HealthStatus>,
    #[serde(deserialize_with = "nullable")]
    pub hook: bool,
    /// A live object git no longer has, left for a prune (`RequiresPruning bool
    /// json:"requiresPruning,omitempty"` in Argo CD's `ResourceStatus`).
    #[serde(deserialize_with = "nullable")]
    pub requires_pruning: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct OperationState {
    pub operation: Option<Operation>,
    /// Running, Terminating, Failed, Error, Succeeded.
    #[serde(deserialize_with = "nullable")]
    pub phase: String,
    #[serde(deserialize_with = "nullable")]
    pub message: String,
    pub sync_result: Option<SyncResult>,
    #[serde(deserialize_with = "nullable")]
    pub started_at: String,
    #[serde(deserialize_with = "nullable")]
    pub finished_at: String,
}

/// The operation that was requested (what it asked to sync, not what got applied).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct Operation {
    pub sync: Option<SyncOperation>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SyncOperation {
    #[serde(deserialize_with = "nullable")]
    pub revision: String,
    #[serde(deserialize_with = "nullable")]
    pub revisions: Vec<String>,
    /// A dry run applies nothing, yet its operation ends `Succeeded`.
    #[serde(deserialize_with = "nullable")]
    pub dry_run: bool,
    /// The sync deletes live objects git no longer has (else it reports them `PruneSkipped`).
    #[serde(deserialize_with = "nullable")]
    pub prune: bool,
    /// A partial sync (only these resources); it too ends `Succeeded`.
    #[serde(deserialize_with = "nullable")]
    pub resources: Vec<ResourceRef>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct SyncResult {
    #[serde(deserialize_with = "nullable")]
    pub revision: String,
    #[serde(deserialize_with = "nullable")]
    pub revisions: Vec<String>,
    pub source: Option<ApplicationSource>,
    #[serde(deserialize_with = "nullable")]
    pub sources: Vec<ApplicationSource>,
    /// One entry per task the operation ran (objects applied or pruned, hooks run).
    #[serde(deserialize_with = "nullable")]
    pub resources: Vec<ResourceResult>,
}

/// `syncResult.resources[]`: one task of a sync operation.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResourceResult {
    #[serde(deserialize_with = "nullable")]
    pub group: String,
    #[serde(deserialize_with = "nullable")]
    pub kind: String,
    #[serde(deserialize_with = "nullable")]
    pub namespace: String,
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    /// Synced, SyncFailed, Pruned, PruneSkipped (empty for a hook not applied yet).
    #[serde(deserialize_with = "nullable")]
    pub status: String,
    #[serde(deserialize_with = "nullable")]
    pub message: String,
    /// PreSync, Sync, PostSync, SyncFail, Skip (empty for an object that is no hook).
    #[serde(deserialize_with = "nullable")]
    pub hook_type: String,
    /// Running, Succeeded, Failed, Error, Terminating.
    #[serde(deserialize_with = "nullable")]
    pub hook_phase: String,
    /// The phase of the sync the task ran in: PreSync, Sync, PostSync, SyncFail.
    #[serde(deserialize_with = "nullable")]
    pub sync_phase: String,
}

impl ResourceResult {
    /// The task did not succeed: its object could not be applied, or its hook (or, in a sync
    /// with hooks or waves, its object's health) failed.
    pub fn failed(&self) -> bool {
        self.status == "SyncFailed" || matches!(self.hook_phase.as_str(), "Failed" | "Error")
    }

    pub fn label(&self) -> String {
        let mut s = if self.group.is_empty() {
            format!("{}/{}", self.kind, self.name)
        } else {
            format!("{}/{}/{}", self.group, self.kind, self.name)
        };
        if !self.message.is_empty() {
            s.push_str(&format!(" ({})", self.message));
        }
        s
    }
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RevisionHistory {
    #[serde(deserialize_with = "nullable")]
    pub id: i64,
    #[serde(deserialize_with = "nullable")]
    pub revision: String,
    #[serde(deserialize_with = "nullable")]
    pub revisions: Vec<String>,
    pub source: Option<ApplicationSource>,
    #[serde(deserialize_with = "nullable")]
    pub sources: Vec<ApplicationSource>,
    #[serde(deserialize_with = "nullable")]
    pub deployed_at: String,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApplicationCondition {
    #[serde(rename = "type", deserialize_with = "nullable")]
    pub kind: String,
    #[serde(deserialize_with = "nullable")]
    pub message: String,
}

/// `GET /api/v1/applications/{name}/managed-resources`: the live and target object of every
/// managed resource, each as a JSON *string* (`"null"` when there is none).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct ManagedResources {
    #[serde(deserialize_with = "nullable")]
    pub items: Vec<ResourceDiff>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResourceDiff {
    #[serde(deserialize_with = "nullable")]
    pub group: String,
    #[serde(deserialize_with = "nullable")]
    pub kind: String,
    #[serde(deserialize_with = "nullable")]
    pub namespace: String,
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    #[serde(deserialize_with = "nullable")]
    pub live_state: String,
    #[serde(deserialize_with = "nullable")]
    pub target_state: String,
}

/// `GET /api/v1/applications/{name}/resource-tree`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct ResourceTree {
    #[serde(deserialize_with = "nullable")]
    pub nodes: Vec<ResourceNode>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResourceNode {
    #[serde(deserialize_with = "nullable")]
    pub group: String,
    #[serde(deserialize_with = "nullable")]
    pub version: String,
    #[serde(deserialize_with = "nullable")]
    pub kind: String,
    #[serde(deserialize_with = "nullable")]
    pub namespace: String,
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    pub health: Option<HealthStatus>,
    /// Empty for top-level (managed) resources; children (ReplicaSets, Pods) name their owners.
    #[serde(deserialize_with = "nullable")]
    pub parent_refs: Vec<ResourceRef>,
    /// Argo CD's facts about the live object; a Pod's include `Status Reason` (`Pending`,
    /// `Running`, …) — but not the scheduler's message, which only the live Pod holds.
    #[serde(deserialize_with = "nullable")]
    pub info: Vec<InfoItem>,
}

/// One `{name, value}` of a node's `info`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct InfoItem {
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    #[serde(deserialize_with = "nullable")]
    pub value: String,
}

impl ResourceNode {
    /// The value of the `info` item named `name`.
    pub fn info_value(&self, name: &str) -> Option<&str> {
        self.info
            .iter()
            .find(|i| i.name == name)
            .map(|i| i.value.as_str())
    }
}

/// `GET /api/v1/applications/{name}/resource`: the live object as a JSON string.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct ResourceManifest {
    #[serde(deserialize_with = "nullable")]
    pub manifest: String,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct ResourceRef {
    #[serde(deserialize_with = "nullable")]
    pub group: String,
    #[serde(deserialize_with = "nullable")]
    pub kind: String,
    #[serde(deserialize_with = "nullable")]
    pub namespace: String,
    #[serde(deserialize_with = "nullable")]
    pub name: String,
}

impl Application {
    /// `namespace/name`, the way Argo CD's CLI names an app.
    pub fn qualified_name(&self) -> String {
        if self.metadata.namespace.is_empty() {
            self.metadata.name.clone()
        } else {
            format!("{}/{}", self.metadata.namespace, self.metadata.name)
        }
    }
}

/// Decode one value, naming the JSON path that failed (`status.history[2].id`) in the error.
pub fn decode<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T, DecodeError> {
    serde_path_to_error::deserialize(value).map_err(|e| DecodeError {
        path: e.path().to_string(),
        message: e.into_inner().to_string(),
    })
}

/// Decode from text, naming the JSON path that failed.
pub fn decode_str<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, DecodeError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| DecodeError {
        path: e.path().to_string(),
        message: e.into_inner().to_string(),
    })
}

/// Where and why a JSON document did not have the expected shape.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("at `{path}`: {message}")]
pub struct DecodeError {
    /// The JSON path, `.` for the document itself.
    pub path: String,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nulls_and_absent_fields_read_as_empty() {
        let app: Application = decode(json!({
            "metadata": {"name": "web", "annotations": null},
            "spec": {"sources": null, "source": null},
            "operation": null,
            "status": {"history": null, "resources": null, "sync": null, "operationState": null}
        }))
        .unwrap();
        assert_eq!(app.metadata.name, "web");
        assert!(app.metadata.annotations.is_empty());
        assert!(app.spec.sources.is_empty() && app.spec.source.is_none());
        assert!(app.operation.is_none());
        assert!(app.status.history.is_empty());
        assert!(app.status.operation_state.is_none());
    }

    #[test]
    fn a_wrong_type_names_its_path() {
        let err = decode::<Application>(json!({
            "status": {"history": [{"id": 1}, {"id": "seven"}]}
        }))
        .unwrap_err();
        assert_eq!(err.path, "status.history[1].id");
        assert!(err.message.contains("invalid type"), "{err}");
    }
}
