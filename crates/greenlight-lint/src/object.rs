//! Kubernetes objects found in loaded documents, and the normalized workload view rules read.
//! Owns: recognizing an object (`apiVersion` + `kind`), unpacking `List`s, finding the pod
//! template of every workload kind. Must never: judge anything (rules do).

use crate::diagnostic::ObjectRef;
use crate::scope::{Scope, UNSCOPED};
use crate::yaml::Node;

/// Kinds some rule examines.
const EXAMINED: &[&str] = &[
    "Deployment",
    "DeploymentConfig",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Job",
    "CronJob",
    "Pod",
    "Rollout",
    "ReplicationController",
    "AnalysisTemplate",
    "ClusterAnalysisTemplate",
    "Experiment",
    "JobSet",
    "LeaderWorkerSet",
    "PersistentVolumeClaim",
    "PodDisruptionBudget",
    "HorizontalPodAutoscaler",
    "Application",
    "ApplicationSet",
    "ImageUpdater",
];

/// How many Kubernetes objects a document holds and whether any is of a kind some rule
/// examines (the engine drops the others' trees early).
pub fn survey(root: &Node) -> (usize, bool) {
    let mut objects = Vec::new();
    Object::collect(root, 0, &mut objects);
    let examined = objects
        .iter()
        .any(|o| EXAMINED.contains(&o.kind) || o.is_skaffold_config());
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
    /// Where its source file sits for pairing (set by the engine).
    pub scope: &'a Scope,
    /// Its source file is named as a patch by a kustomization in the run (set by the engine).
    pub kustomize_patch: bool,
    /// How the kustomizations of the run render its file (set by the engine): one entry per
    /// kustomization that is built (included by no other) and reaches the file through
    /// `resources`; empty when none does.
    pub kustomize_renders: Vec<Render<'a>>,
    /// The image names some file of the run replaces at deploy time (set by the engine:
    /// [`mark_deploy_images`]), shared by every object.
    pub deploy_images: std::sync::Arc<Vec<DeployImage>>,
}

/// An image name that a tool replaces at deploy time: a skaffold artifact it builds, or a
/// kustomization `images[]` entry that sets the tag (or only names the image, for a
/// `kustomize edit set image` at deploy time).
#[derive(Debug, Clone)]
pub struct DeployImage {
    /// The image name as written there (no tag).
    pub name: String,
    /// `skaffold` or `kustomize`.
    pub tool: &'static str,
    /// The file that says so and the field.
    pub file: String,
    pub field: String,
    /// A kustomization entry with nothing but its `name`: the place a deploy-time
    /// `kustomize edit set image` fills.
    pub name_only: bool,
}

/// One way a kustomization renders a file: the kustomization that is built, and the `images`
/// lists met from the file's own kustomization up to it (innermost first, as kustomize
/// applies them).
#[derive(Debug, Clone)]
pub struct Render<'a> {
    pub top: &'a str,
    pub images: Vec<(&'a str, &'a Node)>,
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

    /// A kustomization document (by its file name) that does not declare `apiVersion` and
    /// `kind`, as kustomize allows: kind `Kustomization`, the `apiVersion` empty.
    pub fn kustomization(root: &'a Node, source: usize) -> Option<Object<'a>> {
        if !root.is_map() {
            return None;
        }
        Some(Object {
            source,
            root,
            api_version: root.get("apiVersion").and_then(Node::as_str).unwrap_or(""),
            kind: "Kustomization",
            name: root.at(&["metadata", "name"]).and_then(Node::as_str),
            namespace: root.at(&["metadata", "namespace"]).and_then(Node::as_str),
            prefix: String::new(),
            file: "",
            scope: &UNSCOPED,
            kustomize_patch: false,
            kustomize_renders: Vec::new(),
            deploy_images: Default::default(),
        })
    }

    /// A kustomization kustomize reads (from a file it would read one from).
    pub fn is_kustomization(&self) -> bool {
        self.kind == "Kustomization" && is_kustomization_file(self.file)
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
            scope: &UNSCOPED,
            kustomize_patch: false,
            kustomize_renders: Vec::new(),
            deploy_images: Default::default(),
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

    /// The `greenlight.dev/ignore` annotations that apply to a finding at `field` (relative
    /// to the object): the object's own, and each pod template's
    /// (`spec.template.metadata.annotations`, as a Helm chart's `podAnnotations` sets them)
    /// unless `field` lies inside another pod template of the object. A template's annotation
    /// thus covers the workload as the object's would — its pod and its object-level fields
    /// (`spec.replicas`, `spec.strategy`) — but not a sibling template of a JobSet, an
    /// Experiment or a LeaderWorkerSet.
    pub fn ignore_annotations(&self, field: &str) -> Vec<&'a str> {
        let mut out: Vec<&'a str> = self
            .annotation(crate::IGNORE_ANNOTATION)
            .and_then(Node::as_str)
            .into_iter()
            .collect();
        let templates = pod_templates(self);
        let inside = |path: &str| {
            field
                .strip_prefix(path)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        };
        // A bare Pod's template is the object itself: its annotation is the object's.
        let templates: Vec<&(&'a Node, String)> = templates
            .iter()
            .filter(|(_, path)| !path.is_empty())
            .collect();
        for (template, path) in &templates {
            let in_another = templates
                .iter()
                .any(|(_, other)| other != path && inside(other));
            if in_another {
                continue;
            }
            if let Some(a) = template
                .at(&["metadata", "annotations", crate::IGNORE_ANNOTATION])
                .and_then(Node::as_str)
            {
                out.push(a);
            }
        }
        out
    }

    /// A live-state dump (`kubectl get -o yaml`, test data of controllers) rather than a
    /// manifest: it carries a non-empty `status` or a server-assigned `metadata.uid`.
    /// (`status: {}`, as `kubectl create --dry-run` writes it, is a manifest.)
    pub fn is_live(&self) -> bool {
        let status = self.root.get("status").is_some_and(|s| {
            let empty =
                s.is_null() || s.as_str() == Some("") || (s.is_map() && s.as_map().is_empty());
            !empty
        });
        status || self.root.at(&["metadata", "uid"]).is_some()
    }

    /// A skaffold configuration (`skaffold.yaml`: `apiVersion: skaffold/…`, `kind: Config`).
    pub fn is_skaffold_config(&self) -> bool {
        self.kind == "Config" && self.api_version.starts_with("skaffold/")
    }

    /// Whether this is an Argo (`argoproj.io`) object of the given kind.
    pub fn is_argo(&self, kind: &str) -> bool {
        self.kind == kind && self.api_version.starts_with("argoproj.io/")
    }
}

/// Whether kustomize reads a kustomization from a file of this name.
pub fn is_kustomization_file(name: &str) -> bool {
    matches!(
        name.rsplit('/').next(),
        Some("kustomization.yaml" | "kustomization.yml" | "Kustomization")
    )
}

/// `a/./b/../c` → `a/c`, lexically (no filesystem).
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." if parts.last().is_some_and(|l| *l != "..") => {
                parts.pop();
            }
            _ => parts.push(p),
        }
    }
    let joined = parts.join("/");
    if path.starts_with('/') {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Mark the objects of files that a kustomization in the run names as patches
/// (`patchesStrategicMerge` entries, `patches[].path`): partial objects that only make sense
/// merged onto their base.
pub fn mark_kustomize_patches(objects: &mut [Object]) {
    let mut patches: Vec<String> = Vec::new();
    for k in objects.iter().filter(|o| o.is_kustomization()) {
        let dir = crate::scope::dir_of(k.file);
        let mut add = |rel: &str| {
            // Inline patches are YAML text, not file names.
            if !rel.contains('\n') && !rel.trim().is_empty() {
                let rel = rel.trim();
                patches.push(match dir {
                    "" => normalize(rel),
                    d => normalize(&format!("{d}/{rel}")),
                });
            }
        };
        if let Some(list) = k.root.get("patchesStrategicMerge") {
            list.as_seq()
                .iter()
                .filter_map(Node::as_str)
                .for_each(&mut add);
        }
        if let Some(list) = k.root.get("patches") {
            list.as_seq()
                .iter()
                .filter_map(|p| p.get("path").and_then(Node::as_str))
                .for_each(&mut add);
        }
    }
    if patches.is_empty() {
        return;
    }
    for o in objects.iter_mut() {
        if patches.contains(&normalize(o.file)) {
            o.kustomize_patch = true;
        }
    }
}

/// Record on each object how the kustomizations of the run render its file: from every
/// kustomization that no other includes, down `resources` (files, and directories holding a
/// kustomization in the run), collecting `images` lists on the way. Remote resources are not
/// followed; the walk is bounded in depth and never revisits a kustomization on one path.
pub fn mark_kustomize_renders(objects: &mut [Object]) {
    struct Kust<'a> {
        file: &'a str,
        images: Option<&'a Node>,
        files: Vec<String>,
        kusts: Vec<usize>,
    }
    let found: Vec<(&str, &Node)> = objects
        .iter()
        .filter(|o| o.is_kustomization())
        .map(|o| (o.file, o.root))
        .collect();
    if found.is_empty() {
        return;
    }
    let dir_index: std::collections::HashMap<String, usize> = found
        .iter()
        .enumerate()
        .map(|(i, (f, _))| (normalize(crate::scope::dir_of(f)), i))
        .collect();
    let mut kusts: Vec<Kust> = Vec::new();
    for (file, root) in &found {
        let dir = crate::scope::dir_of(file);
        let mut k = Kust {
            file,
            images: root.get("images"),
            files: Vec::new(),
            kusts: Vec::new(),
        };
        for key in ["resources", "bases"] {
            for r in root.get(key).map(Node::as_seq).unwrap_or_default() {
                let Some(rel) = r.as_str().map(str::trim) else {
                    continue;
                };
                if rel.is_empty() || rel.contains("://") || rel.starts_with("github.com/") {
                    continue;
                }
                let path = match dir {
                    "" => normalize(rel),
                    d => normalize(&format!("{d}/{rel}")),
                };
                match dir_index.get(&path) {
                    Some(&i) => k.kusts.push(i),
                    None => k.files.push(path),
                }
            }
        }
        kusts.push(k);
    }
    let included: std::collections::HashSet<usize> =
        kusts.iter().flat_map(|k| k.kusts.iter().copied()).collect();
    let mut renders: std::collections::HashMap<String, Vec<(usize, Vec<usize>)>> =
        std::collections::HashMap::new();
    for top in (0..kusts.len()).filter(|i| !included.contains(i)) {
        // (kustomization, chain from the top down to it)
        let mut stack = vec![(top, vec![top])];
        while let Some((k, chain)) = stack.pop() {
            for f in &kusts[k].files {
                renders
                    .entry(f.clone())
                    .or_default()
                    .push((top, chain.clone()));
            }
            for &c in &kusts[k].kusts {
                if chain.contains(&c) || chain.len() >= 16 {
                    continue;
                }
                let mut next = chain.clone();
                next.push(c);
                stack.push((c, next));
            }
        }
    }
    if renders.is_empty() {
        return;
    }
    let kusts: Vec<(&str, Option<&Node>)> = kusts.iter().map(|k| (k.file, k.images)).collect();
    for o in objects.iter_mut() {
        let Some(rs) = renders.get(&normalize(o.file)) else {
            continue;
        };
        o.kustomize_renders = rs
            .iter()
            .map(|(top, chain)| Render {
                top: kusts[*top].0,
                images: chain
                    .iter()
                    .rev()
                    .filter_map(|i| kusts[*i].1.map(|n| (kusts[*i].0, n)))
                    .collect(),
            })
            .collect();
    }
}

/// Record on every object the image names the run's files replace at deploy time: each
/// skaffold configuration's `build.artifacts[].image` (also under `profiles[]`), and each
/// kustomization's `images[]` entry that sets `newTag` or `digest`, or nothing but its
/// `name` (an entry only renamed by `newName` keeps the tag).
pub fn mark_deploy_images(objects: &mut [Object]) {
    let mut found: Vec<DeployImage> = Vec::new();
    for o in objects.iter() {
        if o.is_skaffold_config() {
            let mut builds: Vec<(&Node, String)> = Vec::new();
            if let Some(b) = o.root.get("build") {
                builds.push((b, "build".to_string()));
            }
            for (i, p) in o
                .root
                .get("profiles")
                .map(Node::as_seq)
                .unwrap_or_default()
                .iter()
                .enumerate()
            {
                if let Some(b) = p.get("build") {
                    builds.push((b, format!("profiles[{i}].build")));
                }
            }
            for (build, path) in builds {
                let artifacts = build.get("artifacts").map(Node::as_seq).unwrap_or_default();
                for (i, a) in artifacts.iter().enumerate() {
                    if let Some(name) = a.get("image").and_then(Node::as_str).map(str::trim)
                        && !name.is_empty()
                    {
                        found.push(DeployImage {
                            name: name.to_string(),
                            tool: "skaffold",
                            file: o.file.to_string(),
                            field: format!("{path}.artifacts[{i}].image"),
                            name_only: false,
                        });
                    }
                }
            }
        } else if o.is_kustomization() {
            let images = o.root.get("images").map(Node::as_seq).unwrap_or_default();
            for (i, img) in images.iter().enumerate() {
                let set = |k: &str| img.get(k).is_some_and(|v| !v.is_null());
                let replaces = set("newTag") || set("digest") || !set("newName");
                if let Some(name) = img.get("name").and_then(Node::as_str).map(str::trim)
                    && !name.is_empty()
                    && replaces
                {
                    found.push(DeployImage {
                        name: name.to_string(),
                        tool: "kustomize",
                        file: o.file.to_string(),
                        field: format!("images[{i}]"),
                        name_only: !set("newTag") && !set("digest"),
                    });
                }
            }
        }
    }
    if found.is_empty() {
        return;
    }
    let found = std::sync::Arc::new(found);
    for o in objects.iter_mut() {
        o.deploy_images = found.clone();
    }
}

impl DeployImage {
    /// Whether it applies to a file: one in the directory of the file that declares it, or
    /// below (a skaffold.yaml or kustomization and the manifests of its application; never a
    /// sibling application or another repository of the run).
    pub fn covers(&self, file: &str) -> bool {
        let dir = normalize(crate::scope::dir_of(&self.file));
        if dir.is_empty() {
            return true;
        }
        let prefix = if dir.ends_with('/') {
            dir
        } else {
            format!("{dir}/")
        };
        normalize(file).starts_with(&prefix)
    }
}

/// Whether a cross-object rule may pair `a` with `b` at all: both manifests or both live-state
/// dumps, and in the same file or in inputs whose scopes pair (one's directory is the other's
/// or an ancestor of it, not above the nearest `kustomization.yaml`, `Chart.yaml` or `.git`;
/// see [`Scope::pairs_with`]). A run over a whole repository holds many applications, their
/// test data and other repositories; only objects on one branch of one unit can meet.
pub fn pairs(a: &Object, b: &Object) -> bool {
    a.is_live() == b.is_live() && (a.source == b.source || a.scope.pairs_with(b.scope))
}

/// The candidates a cross-object rule should match from `from`: those that [`pairs`] with it,
/// and of those the nearest in the file tree — the same file, else the longest shared
/// directory prefix — so a nearer look-alike wins over one further up the branch.
pub fn nearest<'o, 'a, T>(
    from: &Object,
    items: Vec<T>,
    object: impl Fn(&T) -> &'o Object<'a>,
) -> Vec<T>
where
    'a: 'o,
{
    let items: Vec<T> = items
        .into_iter()
        .filter(|t| pairs(from, object(t)))
        .collect();
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

/// One pod template of a workload, whatever kind carries it (an object may carry several: a
/// JobSet's replicated jobs, an Experiment's templates, an AnalysisTemplate's job metrics).
#[derive(Debug)]
pub struct Workload<'a, 'o> {
    pub object: &'o Object<'a>,
    /// The pod spec.
    pub pod: &'a Node,
    /// Path of the pod spec relative to the object (`spec.template.spec`).
    pub pod_path: String,
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

/// The pod templates (`metadata` + `spec`) an object carries, with their paths.
fn pod_templates<'a>(object: &Object<'a>) -> Vec<(&'a Node, String)> {
    let root = object.root;
    let mut out: Vec<(&'a Node, String)> = Vec::new();
    let mut at = |keys: &[&str]| {
        if let Some(t) = root.at(keys) {
            out.push((t, keys.join(".")));
        }
    };
    match object.kind {
        "Deployment"
        | "StatefulSet"
        | "DaemonSet"
        | "ReplicaSet"
        | "Job"
        | "ReplicationController" => at(&["spec", "template"]),
        "Rollout" if object.is_argo("Rollout") => at(&["spec", "template"]),
        // OpenShift's DeploymentConfig (`apps.openshift.io/v1`, or `v1` on OpenShift 3).
        "DeploymentConfig"
            if object.api_version.starts_with("apps.openshift.io/")
                || object.api_version == "v1" =>
        {
            at(&["spec", "template"])
        }
        "CronJob" => at(&["spec", "jobTemplate", "spec", "template"]),
        "LeaderWorkerSet" => {
            at(&["spec", "leaderWorkerTemplate", "leaderTemplate"]);
            at(&["spec", "leaderWorkerTemplate", "workerTemplate"]);
        }
        "Pod" => out.push((root, String::new())),
        _ => {}
    }
    // Templates inside lists: (list path, path inside each item).
    let listed: &[(&[&str], &[&str])] = match object.kind {
        "AnalysisTemplate" | "ClusterAnalysisTemplate"
            if object.api_version.starts_with("argoproj.io/") =>
        {
            &[(
                &["spec", "metrics"],
                &["provider", "job", "spec", "template"],
            )]
        }
        "Experiment" if object.is_argo("Experiment") => &[(&["spec", "templates"], &["template"])],
        "JobSet" => &[(
            &["spec", "replicatedJobs"],
            &["template", "spec", "template"],
        )],
        _ => &[],
    };
    for (list, inner) in listed {
        let Some(items) = root.at(list) else { continue };
        for (i, item) in items.as_seq().iter().enumerate() {
            if let Some(t) = item.at(inner) {
                out.push((t, format!("{}[{i}].{}", list.join("."), inner.join("."))));
            }
        }
    }
    out
}

impl<'a, 'o> Workload<'a, 'o> {
    /// Every pod template of an object, in document order; none for kinds without one.
    pub fn all(object: &'o Object<'a>) -> Vec<Workload<'a, 'o>> {
        pod_templates(object)
            .into_iter()
            .filter_map(|(template, path)| {
                let pod = template.get("spec").filter(|p| p.is_map())?;
                let pod_path = if path.is_empty() {
                    "spec".to_string()
                } else {
                    format!("{path}.spec")
                };
                Some(Workload {
                    object,
                    pod,
                    pod_path,
                    labels: template.at(&["metadata", "labels"]),
                })
            })
            .collect()
    }

    /// Regular containers: the ones that serve traffic, are probed and get preStop hooks.
    pub fn containers(&self) -> Vec<Container<'a>> {
        self.list("containers")
    }

    /// Native sidecars: init containers with `restartPolicy: Always`, which run beside the
    /// regular containers and are stopped after them, preStop hook included.
    pub fn sidecars(&self) -> Vec<Container<'a>> {
        self.list("initContainers")
            .into_iter()
            .filter(|c| c.node.get("restartPolicy").and_then(Node::as_str) == Some("Always"))
            .collect()
    }

    /// The containers that get a preStop hook at termination: regular ones and native
    /// sidecars.
    pub fn stopped_containers(&self) -> Vec<Container<'a>> {
        let mut all = self.containers();
        all.extend(self.sidecars());
        all
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
}
