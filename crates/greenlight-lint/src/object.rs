//! Kubernetes objects found in loaded documents, and the normalized workload view rules read.
//! Owns: recognizing an object (`apiVersion` + `kind`), unpacking `List`s, finding the pod
//! template of every workload kind. Must never: judge anything (rules do).

use crate::diagnostic::ObjectRef;
use crate::yaml::Node;

/// Kinds some rule examines.
const EXAMINED: &[&str] = &[
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Job",
    "CronJob",
    "Pod",
    "Rollout",
    "PodDisruptionBudget",
    "HorizontalPodAutoscaler",
    "Application",
    "ApplicationSet",
];

/// How many Kubernetes objects a document holds and whether any is of a kind some rule
/// examines (the engine drops the others' trees early).
pub fn survey(root: &Node) -> (usize, bool) {
    let mut objects = Vec::new();
    Object::collect(root, 0, &mut objects);
    let examined = objects.iter().any(|o| EXAMINED.contains(&o.kind));
    (objects.len(), examined)
}

/// One Kubernetes object inside a source file.
#[derive(Debug)]
pub struct Object<'a> {
    /// Index of the source file in the run.
    pub source: usize,
    pub root: &'a Node,
    pub api_version: &'a str,
    pub kind: &'a str,
    pub name: Option<&'a str>,
    pub namespace: Option<&'a str>,
    /// Path of this object inside its document: empty, or `items[3]` inside a `List`.
    pub prefix: String,
    /// Name of its source file (set by the engine; cross-object rules prefer near objects).
    pub file: &'a str,
}

impl<'a> Object<'a> {
    /// Objects of one document: the document itself when it has `apiVersion` and `kind`, the
    /// items of a `*List`; nothing for other YAML (CI configs, values files).
    pub fn collect(root: &'a Node, source: usize, out: &mut Vec<Object<'a>>) {
        let Some(obj) = Object::from_node(root, source, String::new()) else {
            return;
        };
        if obj.kind.ends_with("List")
            && let Some(items) = root.get("items")
        {
            for (i, item) in items.as_seq().iter().enumerate() {
                if let Some(o) = Object::from_node(item, source, format!("items[{i}]")) {
                    out.push(o);
                }
            }
            return;
        }
        out.push(obj);
    }

    fn from_node(node: &'a Node, source: usize, prefix: String) -> Option<Object<'a>> {
        let api_version = node.get("apiVersion")?.as_str()?;
        let kind = node.get("kind")?.as_str()?;
        let meta = node.get("metadata");
        let name = meta.and_then(|m| m.get("name")).and_then(Node::as_str);
        let namespace = meta.and_then(|m| m.get("namespace")).and_then(Node::as_str);
        Some(Object {
            source,
            root: node,
            api_version,
            kind,
            name,
            namespace,
            prefix,
            file: "",
        })
    }

    /// The full field path of `rel` (`spec.replicas`) inside this object's document.
    pub fn path(&self, rel: &str) -> String {
        match (self.prefix.is_empty(), rel.is_empty()) {
            (true, _) => rel.to_string(),
            (false, true) => self.prefix.clone(),
            (false, false) => format!("{}.{rel}", self.prefix),
        }
    }

    pub fn reference(&self) -> ObjectRef {
        ObjectRef {
            api_version: self.api_version.to_string(),
            kind: self.kind.to_string(),
            namespace: self.namespace.map(str::to_string),
            name: self.name.map(str::to_string),
        }
    }

    pub fn annotation(&self, key: &str) -> Option<&'a Node> {
        self.root.at(&["metadata", "annotations", key])
    }

    /// Whether this is an Argo (`argoproj.io`) object of the given kind.
    pub fn is_argo(&self, kind: &str) -> bool {
        self.kind == kind && self.api_version.starts_with("argoproj.io/")
    }
}

/// The candidates a cross-object rule should match from `from`: those nearest to it in the
/// file tree — the same file, else the longest shared directory prefix. A run over a whole
/// repository holds many applications (and test data); an object elsewhere that happens to
/// share labels or a name must not count when a nearer one exists, while a kustomize overlay
/// still finds its base.
pub fn nearest<'o, 'a, T>(
    from: &Object,
    items: Vec<T>,
    object: impl Fn(&T) -> &'o Object<'a>,
) -> Vec<T>
where
    'a: 'o,
{
    let closeness = |o: &Object| -> usize {
        if o.source == from.source {
            return usize::MAX;
        }
        let a = from.file.rsplit_once('/').map_or("", |(d, _)| d);
        let b = o.file.rsplit_once('/').map_or("", |(d, _)| d);
        a.split('/')
            .zip(b.split('/'))
            .take_while(|(x, y)| x == y)
            .count()
    };
    let Some(best) = items.iter().map(|t| closeness(object(t))).max() else {
        return items;
    };
    items
        .into_iter()
        .filter(|t| closeness(object(t)) == best)
        .collect()
}

/// A workload's pod template, whatever kind carries it.
#[derive(Debug)]
pub struct Workload<'a, 'o> {
    pub object: &'o Object<'a>,
    /// The pod spec.
    pub pod: &'a Node,
    /// Path of the pod spec relative to the object (`spec.template.spec`).
    pub pod_path: &'static str,
    /// The pod's labels (template labels; a bare Pod's own labels).
    pub labels: Option<&'a Node>,
}

/// A container of a workload with its path relative to the object.
#[derive(Debug)]
pub struct Container<'a> {
    pub node: &'a Node,
    pub path: String,
    pub name: &'a str,
}

impl<'a, 'o> Workload<'a, 'o> {
    /// The workload view of an object, when it is one of the workload kinds.
    pub fn of(object: &'o Object<'a>) -> Option<Workload<'a, 'o>> {
        let root = object.root;
        let (template, pod_path): (&Node, &'static str) = match object.kind {
            "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
                (root.at(&["spec", "template"])?, "spec.template.spec")
            }
            "Rollout" if object.is_argo("Rollout") => {
                (root.at(&["spec", "template"])?, "spec.template.spec")
            }
            "CronJob" => (
                root.at(&["spec", "jobTemplate", "spec", "template"])?,
                "spec.jobTemplate.spec.template.spec",
            ),
            "Pod" => (root, "spec"),
            _ => return None,
        };
        let pod = template.get("spec")?;
        if !pod.is_map() {
            return None;
        }
        let labels = template.at(&["metadata", "labels"]);
        Some(Workload {
            object,
            pod,
            pod_path,
            labels,
        })
    }

    /// Regular containers: the ones that serve traffic, are probed and get preStop hooks.
    pub fn containers(&self) -> Vec<Container<'a>> {
        self.list("containers")
    }

    /// Every container that pulls an image: init, regular and ephemeral.
    pub fn all_containers(&self) -> Vec<Container<'a>> {
        let mut all = self.list("initContainers");
        all.extend(self.list("containers"));
        all.extend(self.list("ephemeralContainers"));
        all
    }

    fn list(&self, field: &str) -> Vec<Container<'a>> {
        let Some(seq) = self.pod.get(field) else {
            return Vec::new();
        };
        seq.as_seq()
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_map())
            .map(|(i, c)| Container {
                node: c,
                path: format!("{}.{field}[{i}]", self.pod_path),
                name: c.get("name").and_then(Node::as_str).unwrap_or("?"),
            })
            .collect()
    }

    /// `spec.replicas` for the kinds that have it; `None` when unset or not applicable.
    pub fn replicas_node(&self) -> Option<&'a Node> {
        match self.object.kind {
            "Deployment" | "StatefulSet" | "ReplicaSet" | "Rollout" => {
                self.object.root.at(&["spec", "replicas"])
            }
            _ => None,
        }
    }
}
