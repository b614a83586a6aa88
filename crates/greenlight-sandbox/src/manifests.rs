//! Rendering: turns an application's manifest files into the set of objects Argo CD would manage,
//! each with a digest of its content so that an object a commit does not change can be recognized.
//! YAML is parsed multi-document with saphyr, JSON with serde_json. This module never reads git
//! or the clock; it is handed the files.

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
    pub object: Value,
    /// Digest of the object's canonical JSON: equal digests mean "nothing to apply".
    pub digest: Digest,
}

#[derive(Debug, Clone)]
pub(crate) struct Rendered {
    pub manifests: Vec<Manifest>,
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
    for object in objects {
        expand_lists(object, &mut |object| {
            if let Some(manifest) = to_manifest(object, default_namespace) {
                // A repeated object: the later file wins (Argo CD warns and applies one of them).
                manifests.retain(|m| m.key != manifest.key);
                manifests.push(manifest);
            }
        });
    }
    manifests.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(Rendered { manifests })
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

// Objects without a kind or a name (empty documents, values files) are not managed resources.
fn to_manifest(object: Value, default_namespace: &str) -> Option<Manifest> {
    let kind = object.get("kind")?.as_str()?.to_string();
    let name = object.pointer("/metadata/name")?.as_str()?.to_string();
    if kind.is_empty() || name.is_empty() {
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
        object,
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
