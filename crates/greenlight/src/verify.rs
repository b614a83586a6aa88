//! `greenlight verify` (`docs/verify.md`): does the cluster run the digest git pins? For each
//! container a workload of the app pins by digest, the `imageID` of each of the workload's Pods
//! (every ReplicaSet's, so that a rollout's old Pods count) against that digest: all run it,
//! some still run another (a rollout in progress), none do (the sync stalled, the promotion
//! not applied), or the manifest names a tag, for which no answer means anything.
//!
//! Two sources: Argo CD's REST API (here: the app, its target state, its resource tree and
//! each Pod), or the Kubernetes API (`--source kube`, [`kube`]: the Application object, the
//! workloads and their Pods read directly). Both end in the same [`assess`].

use crate::argocd::ArgoCd;
use anyhow::{Context as _, Result, anyhow};
use greenlight_argocd::model::{ResourceNode, ResourceRef};
use greenlight_core::directive::AppRef;
use greenlight_core::image::ImageRef;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

pub mod kube;

/// The kinds whose Pods verify reads.
const WORKLOADS: [&str; 3] = ["Deployment", "StatefulSet", "DaemonSet"];

/// One container of one workload, as the desired state names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Desired {
    /// `Kind/namespace/name`.
    pub workload: String,
    pub container: String,
    pub image: String,
}

/// One running container of one Pod: its `imageID`'s digest (`sha256:…`); `None` while it
/// has none (not pulled, not running).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Running {
    pub workload: String,
    pub pod: String,
    pub container: String,
    pub digest: Option<String>,
}

/// What verify says of one container.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "answer", rename_all = "kebab-case")]
pub enum Answer {
    /// Every Pod runs the pinned digest.
    All { pods: usize },
    /// Some Pods run it, the others another digest or none yet: a rollout in progress.
    Some {
        running: usize,
        pods: usize,
        others: BTreeMap<String, usize>,
    },
    /// No Pod runs it.
    None {
        pods: usize,
        others: BTreeMap<String, usize>,
    },
    /// The manifest names a tag (or nothing parses as a digest): verify means nothing here.
    Tag,
}

/// One container's line of the answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    #[serde(flatten)]
    pub desired: Desired,
    #[serde(flatten)]
    pub answer: Answer,
}

/// Each desired container against the Pods that run its workload.
pub fn assess(desired: &[Desired], running: &[Running]) -> Vec<Verdict> {
    desired
        .iter()
        .map(|d| {
            let Some(want) = ImageRef::parse(&d.image)
                .ok()
                .and_then(|r| r.digest().map(str::to_string))
            else {
                return Verdict {
                    desired: d.clone(),
                    answer: Answer::Tag,
                };
            };
            let mut pods = 0;
            let mut hit = 0;
            let mut others = BTreeMap::new();
            for r in running
                .iter()
                .filter(|r| r.workload == d.workload && r.container == d.container)
            {
                pods += 1;
                match &r.digest {
                    Some(got) if *got == want => hit += 1,
                    Some(got) => *others.entry(got.clone()).or_insert(0) += 1,
                    None => *others.entry("none yet".to_string()).or_insert(0) += 1,
                }
            }
            let answer = if pods > 0 && hit == pods {
                Answer::All { pods }
            } else if hit > 0 {
                Answer::Some {
                    running: hit,
                    pods,
                    others,
                }
            } else {
                Answer::None { pods, others }
            };
            Verdict {
                desired: d.clone(),
                answer,
            }
        })
        .collect()
}

/// The exit code for these verdicts: 2 when a container names a tag, else 1 when one is not
/// run everywhere, else 0.
pub fn exit_code(verdicts: &[Verdict]) -> u8 {
    if verdicts.iter().any(|v| v.answer == Answer::Tag) {
        2
    } else if verdicts
        .iter()
        .all(|v| matches!(v.answer, Answer::All { .. }))
    {
        0
    } else {
        1
    }
}

/// The containers of the workloads among `docs` (Kubernetes objects as JSON).
pub fn desired_of(docs: &[Value], default_namespace: &str) -> Vec<Desired> {
    let mut out = Vec::new();
    for doc in docs {
        let Some(kind) = doc["kind"].as_str().filter(|k| WORKLOADS.contains(k)) else {
            continue;
        };
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        let namespace = doc["metadata"]["namespace"]
            .as_str()
            .unwrap_or(default_namespace);
        let spec = &doc["spec"]["template"]["spec"];
        for list in ["initContainers", "containers"] {
            for c in spec[list].as_array().into_iter().flatten() {
                // An init container has exited: it has no running imageID to compare.
                if list == "initContainers" {
                    continue;
                }
                out.push(Desired {
                    workload: format!("{kind}/{namespace}/{name}"),
                    container: c["name"].as_str().unwrap_or_default().to_string(),
                    image: c["image"].as_str().unwrap_or_default().to_string(),
                });
            }
        }
    }
    out
}

/// The digest of a container status's `imageID` (`docker-pullable://repo@sha256:…`,
/// `repo@sha256:…`); `None` when it has none.
pub fn digest_of_image_id(image_id: &str) -> Option<String> {
    let (_, digest) = image_id.rsplit_once('@')?;
    digest.starts_with("sha256:").then(|| digest.to_string())
}

/// The workload (`Kind/namespace/name`) each Pod node of the tree belongs to: its owner, or its
/// ReplicaSet's owner.
pub fn pods_by_workload(nodes: &[ResourceNode]) -> Vec<(String, ResourceNode)> {
    let owner = |r: &ResourceRef| -> Option<String> {
        if WORKLOADS.contains(&r.kind.as_str()) {
            return Some(format!("{}/{}/{}", r.kind, r.namespace, r.name));
        }
        if r.kind == "ReplicaSet" {
            let rs = nodes.iter().find(|n| {
                n.kind == "ReplicaSet" && n.name == r.name && n.namespace == r.namespace
            })?;
            let up = rs.parent_refs.iter().find(|p| p.kind == "Deployment")?;
            return Some(format!("Deployment/{}/{}", up.namespace, up.name));
        }
        None
    };
    nodes
        .iter()
        .filter(|n| n.kind == "Pod" && n.group.is_empty())
        .filter_map(|n| Some((n.parent_refs.iter().find_map(owner)?, n.clone())))
        .collect()
}

/// Where verify reads the app and its Pods.
pub enum VerifySource {
    /// Argo CD's REST API (`--argocd-url`).
    ArgoCd(ArgoCd),
    /// The Kubernetes API (`--source kube`).
    Kube(crate::kube::KubeApp),
}

/// What verify was told.
pub struct VerifyConfig {
    pub source: VerifySource,
    pub app: AppRef,
    /// The desired state: these documents (`--manifest`), else Argo CD's target state (with
    /// `--source kube`, the live workloads' own templates).
    pub manifest: Option<(String, Vec<Value>)>,
}

/// The answer, with what it was checked against.
#[derive(Clone, Debug, Serialize)]
pub struct Verified {
    pub app: String,
    /// Where the pinned digests came from: the manifest's path, Argo CD's target state, or the
    /// live workloads' templates.
    pub desired_from: String,
    pub sync_status: String,
    pub sync_revision: String,
    pub containers: Vec<Verdict>,
    pub exit_code: u8,
    /// What the answer leaves out and why (a workload of the app that does not exist live).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// How the watchdog verifies a watch with `expect=Healthy,Running`: as `greenlight verify
/// --app <app>` without `--manifest`, from the source the watchdog reads
/// (`docs/verdicts.md#expect-running`).
#[derive(Clone)]
pub enum WatchVerifier {
    ArgoCd(ArgoCd),
    Kube(crate::kube::KubeApp),
}

/// How long one verify of a watch may take before it is answered as failed.
const WATCH_VERIFY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl WatchVerifier {
    /// What `app`'s Pods run against what git pins, as the judge takes it.
    pub async fn verify(&self, app: &AppRef) -> greenlight_core::judge::Verification {
        use greenlight_core::judge::Verification;
        let source = match self {
            WatchVerifier::ArgoCd(a) => VerifySource::ArgoCd(a.clone()),
            WatchVerifier::Kube(k) => VerifySource::Kube(k.clone()),
        };
        let cfg = VerifyConfig {
            source,
            app: app.clone(),
            manifest: None,
        };
        match tokio::time::timeout(WATCH_VERIFY_TIMEOUT, verify(&cfg)).await {
            Err(_) => Verification::Failed(format!(
                "reading the Pods took over {} s",
                WATCH_VERIFY_TIMEOUT.as_secs()
            )),
            Ok(Err(e)) => Verification::Failed(greenlight_git::redact(&format!("{e:#}"))),
            Ok(Ok(v)) => verification_of(&v),
        }
    }
}

/// The judge's [`Verification`](greenlight_core::judge::Verification) of a verify's answer:
/// running when every container's Pods all run the pinned digest; a tag when one names a tag;
/// else not running, with the containers that do not and Argo CD's sync state.
pub fn verification_of(v: &Verified) -> greenlight_core::judge::Verification {
    use greenlight_core::judge::Verification;
    if v.containers.is_empty() {
        return Verification::NotRunning(format!(
            "no Deployment, StatefulSet or DaemonSet container in {} ({}): nothing runs what git pins",
            v.app, v.desired_from
        ));
    }
    let tags: Vec<String> = v
        .containers
        .iter()
        .filter(|c| c.answer == Answer::Tag)
        .map(Verdict::summary)
        .collect();
    if !tags.is_empty() {
        return Verification::Tag(tags.join("; "));
    }
    let short: String = v.sync_revision.chars().take(12).collect();
    let not: Vec<String> = v
        .containers
        .iter()
        .filter(|c| !matches!(c.answer, Answer::All { .. }))
        .map(Verdict::summary)
        .collect();
    if !not.is_empty() {
        Verification::NotRunning(format!(
            "{} (Argo CD: {} at {short})",
            not.join("; "),
            v.sync_status
        ))
    } else {
        Verification::Running(
            v.containers
                .iter()
                .map(Verdict::summary)
                .collect::<Vec<_>>()
                .join("; "),
        )
    }
}

/// Reads the app, its desired workloads and the Pods that run them from the source
/// configured, and assesses them.
pub async fn verify(cfg: &VerifyConfig) -> Result<Verified> {
    match &cfg.source {
        VerifySource::ArgoCd(argocd) => verify_argocd(argocd, cfg).await,
        VerifySource::Kube(kube) => kube::verify(kube, cfg).await,
    }
}

/// Reads the app, its desired workloads, its resource tree and each workload Pod's live
/// object from Argo CD, and assesses them.
async fn verify_argocd(argocd: &ArgoCd, cfg: &VerifyConfig) -> Result<Verified> {
    let client = argocd.client()?;
    let ns = cfg.app.namespace.clone().unwrap_or_default();
    let name = &cfg.app.name;
    let app = client.get(&ns, name).await?.ok_or_else(|| {
        crate::usage(format!(
            "--app {}: Argo CD says it does not exist (404)",
            cfg.app
        ))
    })?;
    // A manifest without a namespace lands in the Application's destination namespace.
    let default_ns = app
        .spec
        .other
        .get("destination")
        .and_then(|d| d["namespace"].as_str())
        .unwrap_or("default")
        .to_string();
    let (desired_from, desired) = match &cfg.manifest {
        Some((path, docs)) => (path.clone(), desired_of(docs, &default_ns)),
        None => {
            let managed = client
                .managed_resources(&ns, name)
                .await?
                .ok_or_else(|| anyhow!("{}: no managed resources (404)", cfg.app))?;
            let mut docs = Vec::new();
            for item in managed
                .items
                .iter()
                .filter(|i| WORKLOADS.contains(&i.kind.as_str()) && !i.target_state.is_empty())
            {
                let doc: Value = serde_json::from_str(&item.target_state).with_context(|| {
                    format!(
                        "the target state of {}/{} from Argo CD",
                        item.kind, item.name
                    )
                })?;
                docs.push(doc);
            }
            (
                "Argo CD's target state (git as Argo CD rendered it)".to_string(),
                desired_of(&docs, &default_ns),
            )
        }
    };
    let tree = client
        .resource_tree(&ns, name)
        .await?
        .ok_or_else(|| anyhow!("{}: no resource tree (404)", cfg.app))?;
    let mut running = Vec::new();
    for (workload, pod) in pods_by_workload(&tree.nodes) {
        let r = ResourceRef {
            group: String::new(),
            kind: "Pod".into(),
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
        };
        // A Pod gone since the tree was read is no longer one that runs anything.
        let Some(live) = client.resource(&ns, name, &r, "v1").await? else {
            continue;
        };
        for s in live["status"]["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
        {
            running.push(Running {
                workload: workload.clone(),
                pod: pod.name.clone(),
                container: s["name"].as_str().unwrap_or_default().to_string(),
                digest: s["imageID"].as_str().and_then(digest_of_image_id),
            });
        }
    }
    let containers = assess(&desired, &running);
    Ok(Verified {
        app: cfg.app.to_string(),
        desired_from,
        sync_status: app.status.sync.status.clone(),
        sync_revision: app.status.sync.revision.clone(),
        exit_code: exit_code(&containers),
        containers,
        notes: Vec::new(),
    })
}

impl Verdict {
    /// One line: the container and what its Pods run against the pinned digest.
    pub fn summary(&self) -> String {
        let d = &self.desired;
        let pinned: String = d
            .image
            .rsplit_once('@')
            .map_or("", |(_, dg)| dg)
            .chars()
            .take(19)
            .collect();
        let head = format!("{} container {}", d.workload, d.container);
        match &self.answer {
            Answer::All { pods } => format!("{head}: all {pods} Pod(s) run {pinned}…"),
            Answer::Some { running, pods, .. } => {
                format!("{head}: {running} of {pods} Pod(s) run {pinned}…: a rollout in progress")
            }
            Answer::None { pods, .. } => format!("{head}: none of {pods} Pod(s) runs {pinned}…"),
            Answer::Tag => format!("{head}: {} names a tag: nothing to verify", d.image),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn want(image: &str) -> Desired {
        Desired {
            workload: "Deployment/apps/web".into(),
            container: "main".into(),
            image: image.into(),
        }
    }

    fn verified(containers: Vec<Verdict>) -> Verified {
        Verified {
            app: "web".into(),
            desired_from: "Argo CD's target state".into(),
            sync_status: "Synced".into(),
            sync_revision: "0123456789abcdef".into(),
            exit_code: exit_code(&containers),
            containers,
            notes: Vec::new(),
        }
    }

    #[test]
    fn the_judges_verification_is_running_only_when_every_container_runs_everywhere() {
        use greenlight_core::judge::Verification;
        let pinned = format!("registry.local/web@{A}");
        let all = assess(&[want(&pinned)], &[pod(1, Some(A)), pod(2, Some(A))]);
        let some = assess(&[want(&pinned)], &[pod(1, Some(A)), pod(2, Some(B))]);
        let none = assess(&[want(&pinned)], &[pod(1, Some(B))]);
        let tag = assess(&[want("registry.local/web:1.0")], &[pod(1, Some(A))]);
        assert!(
            matches!(verification_of(&verified(all.clone())), Verification::Running(s) if s.contains("all 2 Pod(s)"))
        );
        match verification_of(&verified(some)) {
            Verification::NotRunning(s) => {
                assert!(
                    s.contains("1 of 2 Pod(s)") && s.ends_with("(Argo CD: Synced at 0123456789ab)"),
                    "{s}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            verification_of(&verified(none)),
            Verification::NotRunning(_)
        ));
        // One container running everywhere does not vouch for another that is not.
        let mut mixed = all;
        mixed.extend(assess(&[want(&pinned)], &[pod(3, Some(B))]));
        assert!(matches!(
            verification_of(&verified(mixed)),
            Verification::NotRunning(_)
        ));
        assert!(
            matches!(verification_of(&verified(tag)), Verification::Tag(s) if s.contains("names a tag"))
        );
        assert!(
            matches!(verification_of(&verified(Vec::new())), Verification::NotRunning(s) if s.contains("nothing runs"))
        );
    }

    fn pod(n: u32, digest: Option<&str>) -> Running {
        Running {
            workload: "Deployment/apps/web".into(),
            pod: format!("web-{n}"),
            container: "main".into(),
            digest: digest.map(str::to_string),
        }
    }

    #[test]
    fn all_some_none_and_a_tag() {
        let pinned = want(&format!("registry.local/web@{A}"));
        let v = assess(
            std::slice::from_ref(&pinned),
            &[pod(1, Some(A)), pod(2, Some(A))],
        );
        assert_eq!(v[0].answer, Answer::All { pods: 2 });
        assert_eq!(exit_code(&v), 0);
        let v = assess(
            std::slice::from_ref(&pinned),
            &[pod(1, Some(A)), pod(2, Some(B)), pod(3, None)],
        );
        assert_eq!(
            v[0].answer,
            Answer::Some {
                running: 1,
                pods: 3,
                others: BTreeMap::from([(B.to_string(), 1), ("none yet".to_string(), 1)]),
            }
        );
        assert_eq!(exit_code(&v), 1);
        let v = assess(std::slice::from_ref(&pinned), &[pod(1, Some(B))]);
        assert!(matches!(v[0].answer, Answer::None { pods: 1, .. }));
        // No Pods at all: none runs it.
        let v = assess(std::slice::from_ref(&pinned), &[]);
        assert!(matches!(v[0].answer, Answer::None { pods: 0, .. }));
        let v = assess(
            &[want("registry.local/web:1.0"), pinned],
            &[pod(1, Some(A))],
        );
        assert_eq!(v[0].answer, Answer::Tag);
        assert_eq!(exit_code(&v), 2);
    }

    #[test]
    fn image_ids_as_the_runtimes_write_them() {
        assert_eq!(
            digest_of_image_id(&format!("docker-pullable://nginx@{A}")).as_deref(),
            Some(A)
        );
        assert_eq!(
            digest_of_image_id(&format!("registry.local:5000/web@{A}")).as_deref(),
            Some(A)
        );
        assert_eq!(digest_of_image_id(""), None);
        assert_eq!(digest_of_image_id("sha256"), None);
    }

    #[test]
    fn pods_belong_to_their_replicasets_deployment_or_their_own_owner() {
        let nodes: Vec<ResourceNode> = serde_json::from_value(json!([
            {"group": "apps", "kind": "Deployment", "namespace": "apps", "name": "web"},
            {"group": "apps", "kind": "ReplicaSet", "namespace": "apps", "name": "web-1",
             "parentRefs": [{"group": "apps", "kind": "Deployment", "namespace": "apps", "name": "web"}]},
            {"group": "apps", "kind": "ReplicaSet", "namespace": "apps", "name": "web-2",
             "parentRefs": [{"group": "apps", "kind": "Deployment", "namespace": "apps", "name": "web"}]},
            {"kind": "Pod", "namespace": "apps", "name": "web-1-a",
             "parentRefs": [{"group": "apps", "kind": "ReplicaSet", "namespace": "apps", "name": "web-1"}]},
            {"kind": "Pod", "namespace": "apps", "name": "web-2-a",
             "parentRefs": [{"group": "apps", "kind": "ReplicaSet", "namespace": "apps", "name": "web-2"}]},
            {"kind": "Pod", "namespace": "apps", "name": "db-0",
             "parentRefs": [{"group": "apps", "kind": "StatefulSet", "namespace": "apps", "name": "db"}]},
            {"kind": "Pod", "namespace": "apps", "name": "job-x",
             "parentRefs": [{"group": "batch", "kind": "Job", "namespace": "apps", "name": "job"}]},
        ]))
        .unwrap();
        let got: Vec<(String, String)> = pods_by_workload(&nodes)
            .into_iter()
            .map(|(w, p)| (w, p.name))
            .collect();
        assert_eq!(
            got,
            [
                ("Deployment/apps/web".to_string(), "web-1-a".to_string()),
                ("Deployment/apps/web".to_string(), "web-2-a".to_string()),
                ("StatefulSet/apps/db".to_string(), "db-0".to_string()),
            ]
        );
    }

    #[test]
    fn the_desired_containers_of_the_workloads() {
        let docs = vec![
            json!({"kind": "Deployment", "metadata": {"name": "web"},
                "spec": {"template": {"spec": {
                    "initContainers": [{"name": "init", "image": "busybox"}],
                    "containers": [{"name": "main", "image": format!("r/web@{A}")}]}}}}),
            json!({"kind": "Service", "metadata": {"name": "web"}}),
        ];
        assert_eq!(
            desired_of(&docs, "apps"),
            [Desired {
                workload: "Deployment/apps/web".into(),
                container: "main".into(),
                image: format!("r/web@{A}"),
            }]
        );
    }
}
