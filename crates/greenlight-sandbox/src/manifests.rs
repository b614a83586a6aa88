//! Rendering: turns an application's manifest files into the set of objects Argo CD would manage,
//! each with a digest of its content so that an object a commit does not change can be recognized,
//! and sets apart the resource hooks (`argocd.argoproj.io/hook`), which Argo CD does not manage
//! but runs during a sync. YAML is parsed multi-document with saphyr, JSON with serde_json. This
//! module never reads git or the clock; it is handed the files.

use std::sync::Arc;

use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use crate::repo::RepoFile;

pub(crate) type Digest = [u8; 32];

/// Identity of a managed object, as Argo CD keys it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ResourceKey {
    pub group: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Clone)]
pub(crate) struct Manifest {
    pub key: ResourceKey,
    pub version: String,
    /// Shared with the live object applied from it and the compared entry's target.
    pub object: Arc<Value>,
    /// Digest of the object's canonical JSON: equal digests mean "nothing to apply".
    pub digest: Digest,
}

#[derive(Debug, Clone)]
pub(crate) struct Rendered {
    /// The managed objects: compared, applied in the Sync phase, shown in the status.
    pub manifests: Vec<Manifest>,
    /// The resource hooks, in the same order: run during a sync, never compared.
    pub hooks: Vec<Hook>,
}

/// Argo CD's annotation that makes an object a resource hook (`PreSync`, `Sync`, `PostSync`,
/// `SyncFail`, comma-separated) or leaves it out of syncs altogether (`Skip` alone).
pub(crate) const ARGOCD_HOOK_ANNOTATION: &str = "argocd.argoproj.io/hook";
/// Argo CD's annotation naming when a hook object is deleted (`BeforeHookCreation`, the default;
/// `HookSucceeded`, `HookFailed`; comma-separated).
pub(crate) const ARGOCD_HOOK_DELETE_POLICY_ANNOTATION: &str =
    "argocd.argoproj.io/hook-delete-policy";

/// The phases of a sync, in the order they run (gitops-engine's `SyncPhase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum SyncPhase {
    PreSync,
    Sync,
    PostSync,
    SyncFail,
}

impl SyncPhase {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SyncPhase::PreSync => "PreSync",
            SyncPhase::Sync => "Sync",
            SyncPhase::PostSync => "PostSync",
            SyncPhase::SyncFail => "SyncFail",
        }
    }
}

/// When a hook object is deleted (gitops-engine's `HookDeletePolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct DeletePolicy {
    /// An object left by an earlier run is deleted before the hook is created again.
    pub before_creation: bool,
    /// Deleted once the operation has succeeded.
    pub on_success: bool,
    /// Deleted once the operation has failed.
    pub on_failure: bool,
}

/// A resource hook: its object (its key has an empty name when only `generateName` is given)
/// and the phases it runs in.
#[derive(Debug, Clone)]
pub(crate) struct Hook {
    pub manifest: Manifest,
    /// `metadata.generateName`, used when the hook has no name.
    pub generate_name: Option<String>,
    /// The phases it runs in, in the annotation's order; empty when none is one Argo CD knows.
    pub phases: Vec<SyncPhase>,
    pub delete_policy: DeletePolicy,
}

/// What the hook annotation makes of an object.
enum Role {
    Managed,
    Hook(Vec<SyncPhase>),
    /// `Skip` alone: neither managed nor run.
    Skipped,
}

// gitops-engine's hook.IsHook / hook.Skip / hook.Types: values are trimmed; unknown ones are
// ignored; an annotated object is a hook unless its only value is `Skip`. Helm's hook
// annotations are not read.
fn role(object: &Value) -> Role {
    let Some(text) = annotation(object, ARGOCD_HOOK_ANNOTATION) else {
        return Role::Managed;
    };
    let mut phases = Vec::new();
    let mut skip = false;
    for value in text.split(',').map(str::trim) {
        match value {
            "PreSync" => phases.push(SyncPhase::PreSync),
            "Sync" => phases.push(SyncPhase::Sync),
            "PostSync" => phases.push(SyncPhase::PostSync),
            "SyncFail" => phases.push(SyncPhase::SyncFail),
            "Skip" => skip = true,
            _ => {}
        }
    }
    if skip && phases.is_empty() {
        Role::Skipped
    } else {
        Role::Hook(phases)
    }
}

fn annotation<'a>(object: &'a Value, name: &str) -> Option<&'a str> {
    object.pointer("/metadata/annotations")?.get(name)?.as_str()
}

// gitops-engine's hook.DeletePolicies: BeforeHookCreation when none is given.
fn delete_policy(object: &Value) -> DeletePolicy {
    let mut policy = DeletePolicy::default();
    for value in annotation(object, ARGOCD_HOOK_DELETE_POLICY_ANNOTATION)
        .unwrap_or("")
        .split(',')
        .map(str::trim)
    {
        match value {
            "BeforeHookCreation" => policy.before_creation = true,
            "HookSucceeded" => policy.on_success = true,
            "HookFailed" => policy.on_failure = true,
            _ => {}
        }
    }
    if policy == DeletePolicy::default() {
        policy.before_creation = true;
    }
    policy
}

impl Rendered {
    /// The digests of every object, in order: equal when nothing would be applied.
    #[cfg(test)]
    pub(crate) fn digests(&self) -> Vec<Digest> {
        self.manifests.iter().map(|m| m.digest).collect()
    }
}

#[derive(Debug, Clone)]
pub(crate) struct RenderError {
    pub message: String,
}

// Kinds that are not namespaced: Argo CD reports them with an empty namespace.
const CLUSTER_SCOPED: &[&str] = &[
    "Namespace",
    "Node",
    "PersistentVolume",
    "StorageClass",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PriorityClass",
    "IngressClass",
    "APIService",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "RuntimeClass",
];

pub(crate) fn render(files: &[RepoFile], default_namespace: &str) -> Result<Rendered, RenderError> {
    let mut objects = Vec::new();
    for file in files {
        let parsed = parse_file(file).map_err(|message| RenderError { message })?;
        objects.extend(parsed);
    }
    let mut manifests: Vec<Manifest> = Vec::new();
    let mut hooks: Vec<Hook> = Vec::new();
    for object in objects {
        expand_lists(object, &mut |object| match role(&object) {
            Role::Skipped => {}
            Role::Managed => {
                if let Some(manifest) = to_manifest(object, default_namespace, false) {
                    // A repeated object: the later file wins (Argo CD warns and applies one of them).
                    manifests.retain(|m| m.key != manifest.key);
                    manifests.push(manifest);
                }
            }
            Role::Hook(phases) => {
                let generate_name = object
                    .pointer("/metadata/generateName")
                    .and_then(Value::as_str)
                    .filter(|g| !g.is_empty())
                    .map(str::to_string);
                let delete_policy = delete_policy(&object);
                if let Some(manifest) = to_manifest(object, default_namespace, true) {
                    let named = !manifest.key.name.is_empty();
                    if named || generate_name.is_some() {
                        if named {
                            hooks.retain(|h| h.manifest.key != manifest.key);
                        }
                        hooks.push(Hook {
                            manifest,
                            generate_name,
                            phases,
                            delete_policy,
                        });
                    }
                }
            }
        });
    }
    manifests.sort_by(|a, b| a.key.cmp(&b.key));
    hooks.sort_by(|a, b| {
        (&a.manifest.key, &a.generate_name).cmp(&(&b.manifest.key, &b.generate_name))
    });
    Ok(Rendered { manifests, hooks })
}

fn parse_file(file: &RepoFile) -> Result<Vec<Value>, String> {
    let text = std::str::from_utf8(&file.bytes)
        .map_err(|e| format!("failed to unmarshal {:?}: {e}", file.path))?;
    if file.path.ends_with(".json") {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| format!("failed to unmarshal {:?}: {e}", file.path))?;
        return Ok(vec![value]);
    }
    use saphyr::LoadableYamlNode;
    let docs = saphyr::Yaml::load_from_str(text)
        .map_err(|e| format!("failed to unmarshal {:?}: {e}", file.path))?;
    docs.iter()
        .enumerate()
        .map(|(i, doc)| {
            yaml_to_json(doc).map_err(|e| {
                format!(
                    "failed to unmarshal {:?}: document {}: {e}",
                    file.path,
                    i + 1
                )
            })
        })
        .collect()
}

fn yaml_to_json(node: &saphyr::Yaml) -> Result<Value, String> {
    use saphyr::{Scalar, Yaml};
    Ok(match node {
        Yaml::Value(scalar) => match scalar {
            Scalar::Null => Value::Null,
            Scalar::Boolean(b) => Value::Bool(*b),
            Scalar::Integer(i) => Value::from(*i),
            Scalar::FloatingPoint(f) => serde_json::Number::from_f64(f.into_inner())
                .map(Value::Number)
                .unwrap_or_else(|| Value::String(f.to_string())),
            Scalar::String(s) => Value::String(s.to_string()),
        },
        Yaml::Representation(text, _, _) => Value::String(text.to_string()),
        Yaml::Sequence(items) => {
            Value::Array(items.iter().map(yaml_to_json).collect::<Result<_, _>>()?)
        }
        Yaml::Mapping(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let key = match yaml_to_json(k)? {
                    Value::String(s) => s,
                    Value::Null => "null".to_string(),
                    other @ (Value::Bool(_) | Value::Number(_)) => other.to_string(),
                    _ => return Err("a mapping key is not a scalar".into()),
                };
                out.insert(key, yaml_to_json(v)?);
            }
            Value::Object(out)
        }
        Yaml::Tagged(_, inner) => yaml_to_json(inner)?,
        Yaml::Alias(_) => return Err("an alias could not be resolved".into()),
        Yaml::BadValue => return Err("a value could not be parsed".into()),
    })
}

// `kind: List` (and `*List`) documents carry their objects in `items`, as kubectl expands them.
fn expand_lists(object: Value, sink: &mut dyn FnMut(Value)) {
    let is_list = object
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"))
        && object.get("items").is_some_and(Value::is_array);
    if is_list {
        if let Some(Value::Array(items)) = object.get("items").cloned() {
            for item in items {
                expand_lists(item, sink);
            }
        }
    } else {
        sink(object);
    }
}

// Objects without a kind or a name (empty documents, values files) are not managed resources;
// a hook may have no name (`nameless`): it is named when it runs.
fn to_manifest(object: Value, default_namespace: &str, nameless: bool) -> Option<Manifest> {
    let kind = object.get("kind")?.as_str()?.to_string();
    let name = match object.pointer("/metadata/name").and_then(Value::as_str) {
        Some(name) => name.to_string(),
        None if nameless => String::new(),
        None => return None,
    };
    if kind.is_empty() || (name.is_empty() && !nameless) {
        return None;
    }
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("v1");
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), api_version.to_string()),
    };
    let namespace = if CLUSTER_SCOPED.contains(&kind.as_str()) {
        String::new()
    } else {
        object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|ns| !ns.is_empty())
            .unwrap_or(default_namespace)
            .to_string()
    };
    let digest = Sha256::digest(canonical(&object).as_bytes()).into();
    Some(Manifest {
        key: ResourceKey {
            group,
            kind,
            namespace,
            name,
        },
        version,
        object: Arc::new(object),
        digest,
    })
}

// JSON with object keys sorted, so that key order in the file does not count as a change.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let body: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&map[*k])))
                .collect();
            format!("{{{}}}", body.join(","))
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

/// The pod spec of a workload, where its containers are.
pub(crate) fn pod_spec<'a>(kind: &str, object: &'a Value) -> Option<&'a Value> {
    match kind {
        "Pod" => object.get("spec"),
        "CronJob" => object.pointer("/spec/jobTemplate/spec/template/spec"),
        _ => object.pointer("/spec/template/spec"),
    }
}

/// The pod metadata of a workload (its pod template's; a Pod's own), where its pods' labels and
/// annotations are.
pub(crate) fn pod_metadata<'a>(kind: &str, object: &'a Value) -> Option<&'a Value> {
    match kind {
        "Pod" => object.get("metadata"),
        "CronJob" => object.pointer("/spec/jobTemplate/spec/template/metadata"),
        _ => object.pointer("/spec/template/metadata"),
    }
}

/// An annotation of a workload's pods (see [`pod_metadata`]); `None` when absent or not text.
pub(crate) fn pod_annotation<'a>(kind: &str, object: &'a Value, name: &str) -> Option<&'a str> {
    pod_metadata(kind, object)?
        .get("annotations")?
        .get(name)?
        .as_str()
}

/// Every container image of a workload (init containers first, then containers).
pub(crate) fn images(kind: &str, object: &Value) -> Vec<String> {
    let Some(spec) = pod_spec(kind, object) else {
        return Vec::new();
    };
    ["initContainers", "containers"]
        .iter()
        .filter_map(|field| spec.get(*field).and_then(Value::as_array))
        .flatten()
        .filter_map(|c| c.get("image").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> RepoFile {
        RepoFile {
            path: path.into(),
            bytes: text.as_bytes().to_vec(),
        }
    }

    const DEPLOY: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      initContainers:\n      - name: init\n        image: busybox:1.36\n      containers:\n      - name: web\n        image: nginx:1.27\n";

    #[test]
    fn renders_multi_document_yaml_and_json() {
        let files = [
            file(
                "a.yaml",
                &format!(
                    "{DEPLOY}---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: edge\n---\n"
                ),
            ),
            file(
                "b.json",
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg"},"data":{"a":"1"}}"#,
            ),
            file("values.yaml", "replicas: 3\n"),
        ];
        let r = render(&files, "default").unwrap();
        let keys: Vec<String> = r
            .manifests
            .iter()
            .map(|m| {
                format!(
                    "{}/{}/{}/{}",
                    m.key.group, m.key.kind, m.key.namespace, m.key.name
                )
            })
            .collect();
        assert_eq!(
            keys,
            [
                "/ConfigMap/default/cfg",
                "/Service/edge/web",
                "apps/Deployment/default/web"
            ]
        );
        let deploy = &r.manifests[2];
        assert_eq!(deploy.version, "v1");
        assert_eq!(
            images("Deployment", &deploy.object),
            ["busybox:1.36", "nginx:1.27"]
        );
    }

    #[test]
    fn digest_ignores_key_order_and_comments_but_not_content() {
        let a = render(&[file("a.yaml", DEPLOY)], "default").unwrap();
        let reordered = "# a comment\nkind: Deployment\napiVersion: apps/v1\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      initContainers:\n      - {image: 'busybox:1.36', name: init}\n      containers:\n      - {name: web, image: 'nginx:1.27'}\n";
        let b = render(&[file("other-name.yaml", reordered)], "default").unwrap();
        assert_eq!(a.digests(), b.digests());
        let c = render(
            &[file("a.yaml", &DEPLOY.replace("1.27", "1.28"))],
            "default",
        )
        .unwrap();
        assert_ne!(a.digests(), c.digests());
    }

    #[test]
    fn a_parse_error_names_the_file_and_position() {
        let err = render(
            &[file(
                "apps/web/bad.yaml",
                "kind: Deployment\nmetadata: [unclosed\n",
            )],
            "default",
        )
        .unwrap_err();
        assert!(err.message.contains("apps/web/bad.yaml"), "{}", err.message);
        assert!(err.message.contains("line"), "{}", err.message);
    }

    #[test]
    fn hooks_are_set_apart_and_skip_leaves_an_object_out() {
        let text = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: smoke\n  annotations:\n    argocd.argoproj.io/hook: PostSync\n    argocd.argoproj.io/hook-delete-policy: HookSucceeded\n---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: migrate-\n  annotations: {argocd.argoproj.io/hook: ' PreSync , Nonsense'}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: skipped\n  annotations: {argocd.argoproj.io/hook: Skip}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: unknown\n  annotations: {argocd.argoproj.io/hook: Later}\n";
        let r = render(
            &[file("h.yaml", &format!("{DEPLOY}---\n{text}"))],
            "default",
        )
        .unwrap();
        let managed: Vec<&str> = r.manifests.iter().map(|m| m.key.name.as_str()).collect();
        assert_eq!(managed, ["web"], "hooks and Skip are not managed");
        let hooks: Vec<(&str, Option<&str>, &[SyncPhase])> = r
            .hooks
            .iter()
            .map(|h| {
                (
                    h.manifest.key.name.as_str(),
                    h.generate_name.as_deref(),
                    h.phases.as_slice(),
                )
            })
            .collect();
        assert_eq!(
            hooks,
            [
                ("unknown", None, &[][..]),
                ("", Some("migrate-"), &[SyncPhase::PreSync][..]),
                ("smoke", None, &[SyncPhase::PostSync][..]),
            ],
            "sorted by key, as managed objects are"
        );
        let smoke = r
            .hooks
            .iter()
            .find(|h| h.manifest.key.name == "smoke")
            .unwrap();
        assert_eq!(
            smoke.delete_policy,
            DeletePolicy {
                before_creation: false,
                on_success: true,
                on_failure: false
            }
        );
        assert!(r.hooks[0].delete_policy.before_creation, "the default");
    }

    #[test]
    fn lists_are_expanded_and_cluster_scoped_kinds_have_no_namespace() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: team}\n- apiVersion: batch/v1\n  kind: CronJob\n  metadata: {name: nightly}\n  spec:\n    jobTemplate:\n      spec:\n        template:\n          spec:\n            containers: [{name: c, image: 'tool:2'}]\n";
        let r = render(&[file("l.yml", text)], "default").unwrap();
        assert_eq!(r.manifests.len(), 2);
        let ns = r
            .manifests
            .iter()
            .find(|m| m.key.kind == "Namespace")
            .unwrap();
        assert_eq!(ns.key.namespace, "");
        let cron = r
            .manifests
            .iter()
            .find(|m| m.key.kind == "CronJob")
            .unwrap();
        assert_eq!(images("CronJob", &cron.object), ["tool:2"]);
    }
}
