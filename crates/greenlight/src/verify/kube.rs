//! `greenlight verify --source kube` (`docs/verify.md#source-kube`): the Application, its
//! workloads and their Pods read from the Kubernetes API, with no Argo CD API at all.
//!
//! The desired state is `--manifest`, or without it each Deployment, StatefulSet and DaemonSet
//! the Application's `status.resources` lists, as the live object's own `spec.template` (the
//! Kubernetes API has no Argo CD `managed-resources`, so git's target state cannot be read
//! here). What runs is every Pod the workload owns (a Deployment's through each of its
//! ReplicaSets), as with Argo CD's resource tree, so a rollout's old Pods count and the answers
//! mean the same whichever source read them.

use super::{
    Running, Verified, VerifyConfig, WORKLOADS, assess, desired_of, digest_of_image_id, exit_code,
};
use crate::kube::KubeApp;
use crate::usage;
use anyhow::Result;
use greenlight_kube::{Workload, WorkloadKind, get_application, get_workload, pods_of};
use std::collections::{HashMap, HashSet};

/// Where the pinned digests come from without `--manifest`.
pub const LIVE_TEMPLATES: &str = "the live workloads' templates (the Kubernetes API)";

/// `Kind/namespace/name` split; `None` for what is not one of [`WORKLOADS`].
fn workload_key(key: &str) -> Option<(WorkloadKind, &str, &str)> {
    let mut parts = key.splitn(3, '/');
    let kind = parts.next().filter(|k| WORKLOADS.contains(k))?;
    let (ns, name) = (parts.next()?, parts.next()?);
    Some((WorkloadKind::parse(kind)?, ns, name))
}

/// Reads the Application, its desired workloads and the Pods each owns from the Kubernetes
/// API, and assesses them.
pub(super) async fn verify(kube: &KubeApp, cfg: &VerifyConfig) -> Result<Verified> {
    let (client, app_ref) = kube.connect(&cfg.app).await?;
    let ns = app_ref.namespace.clone().unwrap_or_default();
    let app = get_application(&client, &ns, &app_ref.name)
        .await?
        .ok_or_else(|| {
            usage(format!(
                "--app {}: the Kubernetes API has no Application {} in namespace {ns} ({} namespace; 404){}",
                cfg.app,
                app_ref.name,
                kube.namespace_from(&cfg.app),
                if cfg.app.namespace.is_none() {
                    ": give --app <namespace>/<name> or --namespace"
                } else {
                    ""
                }
            ))
        })?;
    // A workload without a namespace is in the Application's destination namespace.
    let default_ns = app
        .spec
        .other
        .get("destination")
        .and_then(|d| d["namespace"].as_str())
        .filter(|n| !n.is_empty())
        .unwrap_or("default")
        .to_string();
    let mut notes = Vec::new();
    let mut live: HashMap<String, Workload> = HashMap::new();
    let (desired_from, desired) = match &cfg.manifest {
        Some((path, docs)) => (path.clone(), desired_of(docs, &default_ns)),
        None => {
            let mut docs = Vec::new();
            for r in app.status.resources.iter().filter(|r| r.group == "apps") {
                let Some(kind) = WorkloadKind::parse(&r.kind) else {
                    continue;
                };
                let rns = if r.namespace.is_empty() {
                    default_ns.as_str()
                } else {
                    r.namespace.as_str()
                };
                match get_workload(&client, kind, rns, &r.name).await? {
                    Some(w) => {
                        docs.push(w.object.clone());
                        live.insert(format!("{kind}/{rns}/{}", r.name), w);
                    }
                    None => notes.push(format!(
                        "{kind}/{rns}/{}: the Application lists it (sync {}), and the cluster has no such object: no template of it to compare, and no Pod of it runs",
                        r.name,
                        if r.status.is_empty() {
                            "status unknown"
                        } else {
                            &r.status
                        }
                    )),
                }
            }
            (LIVE_TEMPLATES.to_string(), desired_of(&docs, &default_ns))
        }
    };
    let mut running = Vec::new();
    let mut read = HashSet::new();
    for d in &desired {
        if !read.insert(d.workload.clone()) {
            continue;
        }
        let Some((kind, wns, wname)) = workload_key(&d.workload) else {
            continue;
        };
        let w = match live.remove(&d.workload) {
            Some(w) => Some(w),
            None => get_workload(&client, kind, wns, wname).await?,
        };
        // No such workload: no Pod of it runs, which the answer says.
        let Some(w) = w else { continue };
        for pod in pods_of(&client, &w).await? {
            for c in pod.containers {
                running.push(Running {
                    workload: d.workload.clone(),
                    pod: pod.name.clone(),
                    container: c.name,
                    digest: c.image_id.as_deref().and_then(digest_of_image_id),
                });
            }
        }
    }
    let containers = assess(&desired, &running);
    Ok(Verified {
        app: app_ref.to_string(),
        desired_from,
        sync_status: app.status.sync.status.clone(),
        sync_revision: app.status.sync.revision.clone(),
        exit_code: exit_code(&containers),
        containers,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_key_is_split_into_kind_namespace_and_name() {
        assert_eq!(
            workload_key("Deployment/apps/web"),
            Some((WorkloadKind::Deployment, "apps", "web"))
        );
        assert_eq!(
            workload_key("StatefulSet/db/pg"),
            Some((WorkloadKind::StatefulSet, "db", "pg"))
        );
        assert_eq!(workload_key("ReplicaSet/apps/web"), None);
        assert_eq!(workload_key("Deployment/apps"), None);
    }
}
