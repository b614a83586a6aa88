//! A workload and the Pods it runs, read from the Kubernetes API (`greenlight verify --source
//! kube`), and one Application read once (`greenlight verify`'s and `wait`'s single reads).
//!
//! A workload's Pods are found as its controllers own them, by `ownerReferences` UIDs: a
//! Deployment's through every ReplicaSet it owns (all of them, the old ones of a rollout in
//! progress too, as Argo CD's resource tree shows them), a StatefulSet's or DaemonSet's
//! directly. The workload's label selector narrows the lists on the server; ownership decides.
//! Nothing here judges: what the Pods run is handed back as the kubelet reported it.
//!
//! RBAC: `get` on the workload's kind, `list` on `replicasets` (Deployments only) and on `pods`
//! in the workload's namespace; `get` on `applications.argoproj.io` for [`get_application`].

use std::collections::HashSet;
use std::fmt;

use greenlight_argocd::model::Application;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::Selector;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

/// The most objects one list page asks for; larger namespaces are read page by page.
const PAGE: u32 = 500;

/// A read that failed, naming what was read and where; the apiserver's status line when it
/// sent one (a `403` says which verb on which resource RBAC refused).
#[derive(Debug, thiserror::Error)]
#[error("reading {what} from the Kubernetes API failed: {why}")]
pub struct ReadError {
    pub what: String,
    pub why: String,
}

/// The workload kinds whose Pods are read (all `apps/v1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkloadKind {
    Deployment,
    StatefulSet,
    DaemonSet,
}

impl WorkloadKind {
    /// The kind of this name (`Deployment`, …); `None` for any other.
    pub fn parse(kind: &str) -> Option<WorkloadKind> {
        match kind {
            "Deployment" => Some(WorkloadKind::Deployment),
            "StatefulSet" => Some(WorkloadKind::StatefulSet),
            "DaemonSet" => Some(WorkloadKind::DaemonSet),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::StatefulSet => "StatefulSet",
            WorkloadKind::DaemonSet => "DaemonSet",
        }
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One live workload object.
#[derive(Clone, Debug)]
pub struct Workload {
    pub kind: WorkloadKind,
    pub namespace: String,
    pub name: String,
    uid: String,
    selector: Option<LabelSelector>,
    /// The object as the apiserver sent it: its `spec.template` is what its Pods are made from.
    pub object: serde_json::Value,
}

/// One running container of a Pod: its name and the `imageID` the kubelet reports (`None`
/// while it has none: not pulled, not created).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerImage {
    pub name: String,
    pub image_id: Option<String>,
}

/// One Pod of a workload and its containers' statuses (init containers left out: they have
/// exited).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodImages {
    pub name: String,
    pub containers: Vec<ContainerImage>,
}

/// An apiserver error in a few words: its status line when it sent one.
fn describe(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
        other => other.to_string(),
    }
}

/// `namespace/name` of kind `K`, or `None` when the apiserver has none (404).
async fn get_opt<K>(client: &Client, namespace: &str, name: &str) -> Result<Option<K>, ReadError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| ReadError {
            what: format!("{} {namespace}/{name}", K::kind(&())),
            why: describe(&e),
        })
}

/// Every object of kind `K` in `namespace` that `selector` selects, page by page.
async fn list_all<K>(
    client: &Client,
    namespace: &str,
    selector: Option<&Selector>,
) -> Result<Vec<K>, ReadError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + fmt::Debug,
{
    let api = Api::<K>::namespaced(client.clone(), namespace);
    let mut items = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(PAGE);
        if let Some(s) = selector {
            lp = lp.labels_from(s);
        }
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await.map_err(|e| ReadError {
            what: format!("the {} of namespace {namespace}", K::plural(&())),
            why: describe(&e),
        })?;
        items.extend(page.items);
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return Ok(items),
        }
    }
}

/// The parts of a typed workload that finding its Pods needs, and the object whole.
fn workload_of<K: serde::Serialize>(
    kind: WorkloadKind,
    meta: &ObjectMeta,
    selector: Option<LabelSelector>,
    obj: &K,
) -> Result<Workload, ReadError> {
    let namespace = meta.namespace.clone().unwrap_or_default();
    let name = meta.name.clone().unwrap_or_default();
    let object = serde_json::to_value(obj).map_err(|e| ReadError {
        what: format!("{kind} {namespace}/{name}"),
        why: e.to_string(),
    })?;
    Ok(Workload {
        kind,
        uid: meta.uid.clone().unwrap_or_default(),
        namespace,
        name,
        selector,
        object,
    })
}

/// The live workload `kind` `namespace/name`, or `None` when the apiserver has none.
pub async fn get_workload(
    client: &Client,
    kind: WorkloadKind,
    namespace: &str,
    name: &str,
) -> Result<Option<Workload>, ReadError> {
    let w = match kind {
        WorkloadKind::Deployment => {
            get_opt::<Deployment>(client, namespace, name)
                .await?
                .map(|d| {
                    workload_of(
                        kind,
                        &d.metadata,
                        d.spec.as_ref().map(|s| s.selector.clone()),
                        &d,
                    )
                })
        }
        WorkloadKind::StatefulSet => {
            get_opt::<StatefulSet>(client, namespace, name)
                .await?
                .map(|s| {
                    workload_of(
                        kind,
                        &s.metadata,
                        s.spec.as_ref().map(|s| s.selector.clone()),
                        &s,
                    )
                })
        }
        WorkloadKind::DaemonSet => get_opt::<DaemonSet>(client, namespace, name)
            .await?
            .map(|d| {
                workload_of(
                    kind,
                    &d.metadata,
                    d.spec.as_ref().map(|s| s.selector.clone()),
                    &d,
                )
            }),
    };
    w.transpose()
}

/// Whether `meta` names one of `owners` (UIDs) among its owners.
fn owned_by(meta: &ObjectMeta, owners: &HashSet<String>) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| owners.contains(&o.uid))
}

/// What a Pod's status says its containers run.
fn images_of(pod: &Pod) -> PodImages {
    let containers = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|c| ContainerImage {
            name: c.name.clone(),
            image_id: Some(c.image_id.clone()).filter(|id| !id.is_empty()),
        })
        .collect();
    PodImages {
        name: pod.metadata.name.clone().unwrap_or_default(),
        containers,
    }
}

/// Every Pod `w` owns: a Deployment's through each ReplicaSet it owns, a StatefulSet's or
/// DaemonSet's directly; sorted by name.
pub async fn pods_of(client: &Client, w: &Workload) -> Result<Vec<PodImages>, ReadError> {
    // A selector that does not convert (an operator Kubernetes does not have) narrows nothing:
    // ownership alone then decides.
    let selector = w
        .selector
        .clone()
        .and_then(|s| Selector::try_from(s).ok())
        .filter(|s| !s.selects_all());
    let mut owners = HashSet::from([w.uid.clone()]);
    if w.kind == WorkloadKind::Deployment {
        owners = list_all::<ReplicaSet>(client, &w.namespace, selector.as_ref())
            .await?
            .iter()
            .filter(|rs| owned_by(&rs.metadata, &owners))
            .filter_map(|rs| rs.metadata.uid.clone())
            .collect();
    }
    owners.retain(|uid| !uid.is_empty());
    if owners.is_empty() {
        return Ok(Vec::new());
    }
    let mut pods: Vec<PodImages> = list_all::<Pod>(client, &w.namespace, selector.as_ref())
        .await?
        .iter()
        .filter(|p| owned_by(&p.metadata, &owners))
        .map(images_of)
        .collect();
    pods.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(pods)
}

/// The Application `namespace/name` as Argo CD's model reads it, or `None` when the apiserver
/// has none (404). An object the model cannot read is an error naming it and the field.
pub async fn get_application(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<Application>, ReadError> {
    let what = || format!("Application {namespace}/{name}");
    let obj = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        namespace,
        &crate::source::application_resource(),
    )
    .get_opt(name)
    .await
    .map_err(|e| ReadError {
        what: what(),
        why: describe(&e),
    })?;
    obj.map(|o| crate::source::decode(&o).map_err(|why| ReadError { what: what(), why }))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_pods_images_are_its_container_statuses() {
        let p = pod(json!({
            "metadata": {"name": "web-1"},
            "status": {
                "initContainerStatuses": [{"name": "init", "image": "busybox", "imageID": "busybox@sha256:00",
                    "ready": false, "restartCount": 0}],
                "containerStatuses": [
                    {"name": "main", "image": "r/web", "imageID": "docker-pullable://r/web@sha256:aa",
                     "ready": true, "restartCount": 0},
                    {"name": "side", "image": "r/side", "imageID": "", "ready": false, "restartCount": 0}
                ]
            }
        }));
        assert_eq!(
            images_of(&p),
            PodImages {
                name: "web-1".into(),
                containers: vec![
                    ContainerImage {
                        name: "main".into(),
                        image_id: Some("docker-pullable://r/web@sha256:aa".into()),
                    },
                    ContainerImage {
                        name: "side".into(),
                        image_id: None,
                    },
                ],
            }
        );
        // A Pod with no status yet (not scheduled) runs nothing.
        assert!(
            images_of(&pod(json!({"metadata": {"name": "p"}})))
                .containers
                .is_empty()
        );
    }

    #[test]
    fn ownership_is_by_uid() {
        let meta: ObjectMeta = serde_json::from_value(json!({
            "name": "web-1",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc",
                "uid": "u-1", "controller": true}]
        }))
        .unwrap();
        assert!(owned_by(&meta, &HashSet::from(["u-1".to_string()])));
        assert!(!owned_by(&meta, &HashSet::from(["u-2".to_string()])));
        assert!(!owned_by(
            &ObjectMeta::default(),
            &HashSet::from(["u-1".to_string()])
        ));
    }

    #[test]
    fn workload_kinds_by_name() {
        for k in [
            WorkloadKind::Deployment,
            WorkloadKind::StatefulSet,
            WorkloadKind::DaemonSet,
        ] {
            assert_eq!(WorkloadKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(WorkloadKind::parse("ReplicaSet"), None);
    }
}
