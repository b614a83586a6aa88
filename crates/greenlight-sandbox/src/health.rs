//! The health model: Argo CD's health statuses and their worst-of order, which kinds are
//! workloads, whether an image "exists", and the status and message one resource reports at a
//! given moment of its rollout. Pure functions over their inputs; no clock, no IO except
//! reading the registry file when asked to.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::HEALTH_ANNOTATION;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Health {
    Healthy,
    Suspended,
    Progressing,
    Missing,
    Degraded,
    Unknown,
}

impl Health {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "Healthy",
            Health::Suspended => "Suspended",
            Health::Progressing => "Progressing",
            Health::Missing => "Missing",
            Health::Degraded => "Degraded",
            Health::Unknown => "Unknown",
        }
    }

    /// One of Argo CD's health status words, as the control API takes it.
    pub(crate) fn parse(word: &str) -> Result<Health, String> {
        [
            Health::Healthy,
            Health::Progressing,
            Health::Degraded,
            Health::Suspended,
            Health::Missing,
            Health::Unknown,
        ]
        .into_iter()
        .find(|h| h.as_str() == word)
        .ok_or_else(|| {
            format!(
                "health: {word:?} is not one of Healthy, Progressing, Degraded, Suspended, Missing, Unknown"
            )
        })
    }

    // gitops-engine's IsWorse order.
    fn rank(self) -> u8 {
        match self {
            Health::Healthy => 0,
            Health::Suspended => 1,
            Health::Progressing => 2,
            Health::Missing => 3,
            Health::Degraded => 4,
            Health::Unknown => 5,
        }
    }

    pub(crate) fn is_worse_than(self, other: Health) -> bool {
        self.rank() > other.rank()
    }
}

/// What a resource reports: a status and Argo CD's message for it (possibly empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Assessment {
    pub status: Health,
    pub message: String,
}

impl Assessment {
    pub(crate) fn new(status: Health, message: impl Into<String>) -> Self {
        Assessment {
            status,
            message: message.into(),
        }
    }
}

/// Kinds whose health the sandbox models over time (their pods pull images).
pub(crate) fn is_workload(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        (
            "apps",
            "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet"
        ) | ("", "Pod")
            | ("batch", "Job" | "CronJob")
            | ("argoproj.io", "Rollout")
    )
}

/// Which images exist.
#[derive(Debug, Clone)]
pub(crate) enum ImagePolicy {
    /// No registry file: an image exists unless its tag contains `does-not-exist`.
    TagHeuristic,
    Registry {
        path: PathBuf,
        images: HashSet<String>,
        fingerprint: [u8; 32],
    },
}

impl ImagePolicy {
    pub(crate) fn load(path: &Path) -> Result<ImagePolicy, String> {
        let (images, fingerprint) = read_registry(path)?;
        Ok(ImagePolicy::Registry {
            path: path.to_path_buf(),
            images,
            fingerprint,
        })
    }

    /// Re-reads the registry file; true when its content changed.
    pub(crate) fn reload(&mut self) -> Result<bool, String> {
        let ImagePolicy::Registry {
            path,
            images,
            fingerprint,
        } = self
        else {
            return Ok(false);
        };
        let (fresh, digest) = read_registry(path)?;
        if digest == *fingerprint {
            return Ok(false);
        }
        *images = fresh;
        *fingerprint = digest;
        Ok(true)
    }

    pub(crate) fn exists(&self, image: &str) -> bool {
        match self {
            ImagePolicy::TagHeuristic => !tag_of(image).contains("does-not-exist"),
            ImagePolicy::Registry { images, .. } => images.contains(image),
        }
    }
}

fn read_registry(path: &Path) -> Result<(HashSet<String>, [u8; 32]), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let images = text
        .lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .filter(|line| !line.is_empty())
        .map(str::to_string)
        .collect();
    Ok((images, Sha256::digest(text.as_bytes()).into()))
}

// The tag of an image reference: after the last ':' of the last path segment, digest removed.
fn tag_of(image: &str) -> &str {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last_segment = without_digest.rsplit('/').next().unwrap_or(without_digest);
    last_segment
        .split_once(':')
        .map(|(_, tag)| tag)
        .unwrap_or("")
}

/// The annotation override, when the object carries one.
pub(crate) fn annotation_override(object: &serde_json::Value) -> Option<Assessment> {
    let value = object
        .pointer("/metadata/annotations")?
        .get(HEALTH_ANNOTATION)?
        .as_str()?;
    let status = match value {
        "Healthy" => Health::Healthy,
        "Progressing" => Health::Progressing,
        "Degraded" => Health::Degraded,
        "Missing" => Health::Missing,
        "Suspended" => Health::Suspended,
        other => {
            return Some(Assessment::new(
                Health::Unknown,
                format!(
                    "invalid value {other:?} in annotation {HEALTH_ANNOTATION} (expected Healthy, Progressing, Degraded, Missing or Suspended)"
                ),
            ));
        }
    };
    Some(Assessment::new(
        status,
        format!("health set by annotation {HEALTH_ANNOTATION}"),
    ))
}

/// A health that does not depend on time: the annotation override, or a workload its spec holds
/// (a paused Deployment or Rollout, a suspended CronJob are Suspended, as in Argo CD).
pub(crate) fn fixed_health(
    group: &str,
    kind: &str,
    object: &serde_json::Value,
) -> Option<Assessment> {
    if let Some(forced) = annotation_override(object) {
        return Some(forced);
    }
    let flag =
        |field: &str| object.pointer(field).and_then(serde_json::Value::as_bool) == Some(true);
    match (group, kind) {
        ("apps", "Deployment") if flag("/spec/paused") => {
            Some(Assessment::new(Health::Suspended, "Deployment is paused"))
        }
        ("argoproj.io", "Rollout") if flag("/spec/paused") => {
            Some(Assessment::new(Health::Suspended, "Rollout is paused"))
        }
        ("batch", "CronJob") if flag("/spec/suspend") => {
            Some(Assessment::new(Health::Suspended, "CronJob is Suspended"))
        }
        _ => None,
    }
}

/// Argo CD leaves a resource carrying `argocd.argoproj.io/ignore-healthcheck: "true"` out of the
/// app's health (the resource still reports its own).
pub(crate) fn ignored_by_app_health(object: &serde_json::Value) -> bool {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get("argocd.argoproj.io/ignore-healthcheck"))
        .and_then(serde_json::Value::as_str)
        == Some("true")
}

/// Everything that decides one resource's health at one moment.
pub(crate) struct Subject<'a> {
    pub group: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
    pub images: &'a [String],
    pub replicas: i64,
    /// A health that does not depend on time ([`fixed_health`]), if any.
    pub forced: Option<&'a Assessment>,
    /// Still inside the rollout time after the sync that changed it.
    pub rolling_out: bool,
    /// Its pods cannot be scheduled (the sandbox's schedule annotation): they stay Pending.
    pub unschedulable: bool,
    /// A Deployment's progress deadline (`spec.progressDeadlineSeconds`) has passed since it
    /// was applied.
    pub past_progress_deadline: bool,
    /// A StatefulSet updated `OnDelete` (`spec.updateStrategy.type`).
    pub on_delete: bool,
}

/// What a workload whose pods are not all available yet reports, as gitops-engine words it.
fn waiting_message(kind: &str, name: &str, replicas: i64) -> String {
    match kind {
        "Deployment" => {
            format!(
                "Waiting for rollout to finish: 0 of {replicas} updated replicas are available..."
            )
        }
        "StatefulSet" => format!("Waiting for {replicas} pods to be ready..."),
        "DaemonSet" => format!(
            "Waiting for daemon set {name:?} rollout to finish: 0 out of 1 new pods have been updated..."
        ),
        "ReplicaSet" => format!(
            "Waiting for rollout to finish: 0 out of {replicas} new replicas are available..."
        ),
        "Rollout" => "more replicas need to be updated".to_string(),
        _ => String::new(),
    }
}

/// The health a resource reports, or `None` for kinds Argo CD assesses no health for.
pub(crate) fn assess(subject: &Subject, policy: &ImagePolicy) -> Option<Assessment> {
    if let Some(forced) = subject.forced {
        return Some(forced.clone());
    }
    let Subject {
        group,
        kind,
        name,
        replicas,
        ..
    } = *subject;
    if !is_workload(group, kind) {
        return (group.is_empty() && kind == "Service")
            .then(|| Assessment::new(Health::Healthy, ""));
    }
    if subject.unschedulable && replicas > 0 {
        // Its pods stay Pending: a Deployment turns Degraded once the Deployment controller
        // marks its progress deadline exceeded; nothing else has a deadline.
        if kind == "Deployment" && subject.past_progress_deadline {
            return Some(Assessment::new(
                Health::Degraded,
                format!("Deployment {name:?} exceeded its progress deadline"),
            ));
        }
        return Some(Assessment::new(
            Health::Progressing,
            waiting_message(kind, name, replicas),
        ));
    }
    if subject.rolling_out {
        return Some(Assessment::new(
            Health::Progressing,
            waiting_message(kind, name, replicas),
        ));
    }
    let Some(missing) = subject.images.iter().find(|image| !policy.exists(image)) else {
        // gitops-engine's StatefulSet check words its Healthy (the API server defaults a
        // RollingUpdate strategy's partition to 0, which takes its partitioned branch).
        let message = match kind {
            "StatefulSet" if subject.on_delete => format!("statefulset has {replicas} ready pods"),
            "StatefulSet" => {
                format!("partitioned roll out complete: {replicas} new pods have been updated...")
            }
            _ => String::new(),
        };
        return Some(Assessment::new(Health::Healthy, message));
    };
    if kind == "StatefulSet" {
        // No progress deadline: its pods never become ready, it waits for them forever.
        return Some(Assessment::new(
            Health::Progressing,
            waiting_message(kind, name, replicas),
        ));
    }
    let message = match kind {
        "Pod" => format!("Back-off pulling image {missing:?}"),
        "Job" | "CronJob" => "Job has reached the specified backoff limit".to_string(),
        _ => format!("{kind} {name:?} exceeded its progress deadline"),
    };
    Some(Assessment::new(Health::Degraded, message))
}

/// The health a hook reports once it has run, as gitops-engine reads a hook's outcome from its
/// health: `None` for kinds without a health check (the hook then succeeds as soon as it is
/// created). A Job reports Kubernetes' completion message; a Pod that failed its first
/// container's exit code; `fails` is the sandbox's hook annotation asking for the failure.
pub(crate) fn hook_outcome(
    group: &str,
    kind: &str,
    name: &str,
    object: &serde_json::Value,
    fails: bool,
) -> Option<Assessment> {
    if !is_workload(group, kind) {
        return (group.is_empty() && kind == "Service")
            .then(|| Assessment::new(Health::Healthy, ""));
    }
    if !fails {
        let message = match kind {
            "Job" => "Reached expected number of succeeded pods",
            _ => "",
        };
        return Some(Assessment::new(Health::Healthy, message));
    }
    let message = match kind {
        "Pod" => {
            let container = crate::manifests::pod_spec(kind, object)
                .and_then(|spec| spec.pointer("/containers/0/name"))
                .and_then(serde_json::Value::as_str)
                .unwrap_or("main");
            format!("container {container:?} failed with exit code 1")
        }
        "Job" | "CronJob" => "Job has reached the specified backoff limit".to_string(),
        _ => format!("{kind} {name:?} exceeded its progress deadline"),
    };
    Some(Assessment::new(Health::Degraded, message))
}

/// One managed resource as the app's health sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Contribution<'a> {
    /// The object exists in the cluster (a resource in git that was never created does not).
    pub live: bool,
    /// Carries `argocd.argoproj.io/ignore-healthcheck: "true"`.
    pub ignored: bool,
    /// Its health: the live object's, `Missing` for one not created, `None` for kinds without one.
    pub health: Option<&'a Assessment>,
}

/// App health, as Argo CD's controller aggregates it: the worst health of the managed resources,
/// leaving out ignored ones; `Healthy` when there is nothing to assess. With `missing_counts`
/// (before 3.4) a resource that was never created makes the app at least Missing; from 3.4 on
/// such resources are left out, unless no managed resource exists at all (then `Missing`).
pub(crate) fn aggregate<'a>(
    resources: impl Iterator<Item = Contribution<'a>>,
    missing_counts: bool,
) -> Health {
    let mut worst = Health::Healthy;
    let (mut any, mut any_live) = (false, false);
    for r in resources {
        any = true;
        any_live |= r.live;
        if r.ignored {
            continue;
        }
        let Some(a) = r.health else { continue };
        if !r.live && a.status == Health::Missing && !missing_counts {
            continue;
        }
        if a.status.is_worse_than(worst) {
            worst = a.status;
        }
    }
    if !missing_counts && any && !any_live && Health::Missing.is_worse_than(worst) {
        worst = Health::Missing;
    }
    worst
}

/// The health of a managed resource that does not exist in the cluster.
pub(crate) fn missing() -> Assessment {
    Assessment::new(Health::Missing, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject<'a>(
        kind: &'a str,
        group: &'a str,
        images: &'a [String],
        rolling_out: bool,
    ) -> Subject<'a> {
        Subject {
            group,
            kind,
            name: "web",
            images,
            replicas: 2,
            forced: None,
            rolling_out,
            unschedulable: false,
            past_progress_deadline: false,
            on_delete: false,
        }
    }

    #[test]
    fn workloads_progress_then_turn_healthy_or_degraded() {
        let good = vec!["nginx:1.27".to_string()];
        let bad = vec![
            "busybox:1".to_string(),
            "nginx:does-not-exist-1".to_string(),
        ];
        let p = ImagePolicy::TagHeuristic;
        let a = assess(&subject("Deployment", "apps", &good, true), &p).unwrap();
        assert_eq!(a.status, Health::Progressing);
        assert!(
            a.message.contains("0 of 2 updated replicas"),
            "{}",
            a.message
        );
        assert_eq!(
            assess(&subject("Deployment", "apps", &good, false), &p)
                .unwrap()
                .status,
            Health::Healthy
        );
        let d = assess(&subject("Deployment", "apps", &bad, false), &p).unwrap();
        assert_eq!(
            d,
            Assessment::new(
                Health::Degraded,
                "Deployment \"web\" exceeded its progress deadline"
            )
        );
        let pod = assess(&subject("Pod", "", &bad, false), &p).unwrap();
        assert_eq!(
            pod.message,
            "Back-off pulling image \"nginx:does-not-exist-1\""
        );
    }

    #[test]
    fn pods_that_cannot_be_scheduled_hold_a_deployment_until_its_progress_deadline() {
        let good = vec!["nginx:1.27".to_string()];
        let p = ImagePolicy::TagHeuristic;
        let pending = |kind, group, past_progress_deadline| Subject {
            unschedulable: true,
            past_progress_deadline,
            ..subject(kind, group, &good, false)
        };
        assert_eq!(
            assess(&pending("Deployment", "apps", false), &p).unwrap(),
            Assessment::new(
                Health::Progressing,
                "Waiting for rollout to finish: 0 of 2 updated replicas are available..."
            )
        );
        assert_eq!(
            assess(&pending("Deployment", "apps", true), &p).unwrap(),
            Assessment::new(
                Health::Degraded,
                "Deployment \"web\" exceeded its progress deadline"
            )
        );
        // A StatefulSet has no progress deadline.
        assert_eq!(
            assess(&pending("StatefulSet", "apps", true), &p).unwrap(),
            Assessment::new(Health::Progressing, "Waiting for 2 pods to be ready...")
        );
        let none = Subject {
            replicas: 0,
            ..pending("Deployment", "apps", true)
        };
        assert_eq!(
            assess(&none, &p).unwrap().status,
            Health::Healthy,
            "no pods"
        );
    }

    #[test]
    fn a_stateful_set_rolls_out_and_never_degrades_on_its_own() {
        let good = vec!["nginx:1.27".to_string()];
        let bad = vec!["nginx:does-not-exist".to_string()];
        let p = ImagePolicy::TagHeuristic;
        let sts = |images, rolling_out| subject("StatefulSet", "apps", images, rolling_out);
        assert_eq!(
            assess(&sts(&good, true), &p).unwrap(),
            Assessment::new(Health::Progressing, "Waiting for 2 pods to be ready...")
        );
        assert_eq!(
            assess(&sts(&good, false), &p).unwrap(),
            Assessment::new(
                Health::Healthy,
                "partitioned roll out complete: 2 new pods have been updated..."
            )
        );
        let on_delete = Subject {
            on_delete: true,
            ..sts(&good, false)
        };
        assert_eq!(
            assess(&on_delete, &p).unwrap().message,
            "statefulset has 2 ready pods"
        );
        assert_eq!(
            assess(&sts(&bad, false), &p).unwrap(),
            Assessment::new(Health::Progressing, "Waiting for 2 pods to be ready...")
        );
    }

    #[test]
    fn only_services_among_plain_kinds_report_health() {
        let none: Vec<String> = Vec::new();
        let p = ImagePolicy::TagHeuristic;
        assert_eq!(assess(&subject("ConfigMap", "", &none, false), &p), None);
        assert_eq!(
            assess(&subject("Service", "", &none, false), &p)
                .unwrap()
                .status,
            Health::Healthy
        );
        // A Deployment-named kind in another API group is not a workload.
        assert_eq!(
            assess(&subject("Deployment", "example.com", &none, false), &p),
            None
        );
    }

    #[test]
    fn a_hook_reports_its_kinds_outcome() {
        let pod =
            serde_json::json!({"spec": {"containers": [{"name": "check", "image": "curl:8"}]}});
        let outcome = |group, kind, fails| hook_outcome(group, kind, "smoke", &pod, fails);
        assert_eq!(
            outcome("batch", "Job", false).unwrap(),
            Assessment::new(Health::Healthy, "Reached expected number of succeeded pods")
        );
        assert_eq!(
            outcome("batch", "Job", true).unwrap(),
            Assessment::new(
                Health::Degraded,
                "Job has reached the specified backoff limit"
            )
        );
        assert_eq!(
            outcome("", "Pod", true).unwrap(),
            Assessment::new(
                Health::Degraded,
                "container \"check\" failed with exit code 1"
            )
        );
        assert_eq!(
            outcome("", "Pod", false).unwrap(),
            Assessment::new(Health::Healthy, "")
        );
        assert_eq!(
            outcome("", "ConfigMap", true),
            None,
            "no health: it cannot fail"
        );
    }

    #[test]
    fn the_tag_heuristic_looks_at_the_tag_only() {
        let p = ImagePolicy::TagHeuristic;
        assert!(p.exists("registry.local:5000/does-not-exist/app:1.0"));
        assert!(!p.exists("registry.local:5000/app:does-not-exist@sha256:abc"));
        assert!(p.exists("nginx"));
    }

    #[test]
    fn the_annotation_overrides_and_rejects_unknown_values() {
        let obj = serde_json::json!({"metadata":{"annotations":{HEALTH_ANNOTATION:"Suspended"}}});
        assert_eq!(annotation_override(&obj).unwrap().status, Health::Suspended);
        let obj = serde_json::json!({"metadata":{"annotations":{HEALTH_ANNOTATION:"Fine"}}});
        let a = annotation_override(&obj).unwrap();
        assert_eq!(a.status, Health::Unknown);
        assert!(a.message.contains("\"Fine\""));
    }

    #[test]
    fn a_spec_that_holds_the_workload_is_suspended() {
        let paused = serde_json::json!({"spec": {"paused": true}});
        let a = fixed_health("apps", "Deployment", &paused).unwrap();
        assert_eq!(
            (a.status, a.message.as_str()),
            (Health::Suspended, "Deployment is paused")
        );
        assert_eq!(
            fixed_health("argoproj.io", "Rollout", &paused)
                .unwrap()
                .status,
            Health::Suspended
        );
        let suspended = serde_json::json!({"spec": {"suspend": true}});
        assert_eq!(
            fixed_health("batch", "CronJob", &suspended).unwrap().status,
            Health::Suspended
        );
        assert_eq!(fixed_health("apps", "Deployment", &suspended), None);
        let both = serde_json::json!({"metadata":{"annotations":{HEALTH_ANNOTATION:"Degraded"}},"spec":{"paused":true}});
        assert_eq!(
            fixed_health("apps", "Deployment", &both).unwrap().status,
            Health::Degraded,
            "the annotation wins"
        );
        let ignored = serde_json::json!({"metadata":{"annotations":{"argocd.argoproj.io/ignore-healthcheck":"true"}}});
        assert!(ignored_by_app_health(&ignored) && !ignored_by_app_health(&both));
    }

    fn live(health: &Assessment) -> Contribution<'_> {
        Contribution {
            live: true,
            ignored: false,
            health: Some(health),
        }
    }

    #[test]
    fn aggregate_is_the_worst_and_healthy_when_empty() {
        let h = Assessment::new(Health::Healthy, "");
        let s = Assessment::new(Health::Suspended, "");
        let m = missing();
        let d = Assessment::new(Health::Degraded, "");
        let no_health = Contribution {
            live: true,
            ignored: false,
            health: None,
        };
        for missing_counts in [true, false] {
            assert_eq!(
                aggregate([live(&h), no_health, live(&s)].into_iter(), missing_counts),
                Health::Suspended
            );
            assert_eq!(
                aggregate([live(&d), live(&m)].into_iter(), missing_counts),
                Health::Degraded,
                "a live object reporting Missing counts in every version"
            );
            assert_eq!(
                aggregate([no_health].into_iter(), missing_counts),
                Health::Healthy
            );
            assert_eq!(
                aggregate(std::iter::empty(), missing_counts),
                Health::Healthy
            );
            let ignored = Contribution {
                ignored: true,
                ..live(&d)
            };
            assert_eq!(
                aggregate([live(&h), ignored].into_iter(), missing_counts),
                Health::Healthy
            );
        }
    }

    #[test]
    fn a_resource_never_created_counts_before_3_4_only() {
        let h = Assessment::new(Health::Healthy, "");
        let m = missing();
        let not_created = Contribution {
            live: false,
            ignored: false,
            health: Some(&m),
        };
        assert_eq!(
            aggregate([live(&h), not_created].into_iter(), true),
            Health::Missing
        );
        assert_eq!(
            aggregate([live(&h), not_created].into_iter(), false),
            Health::Healthy
        );
        // From 3.4 on, nothing created at all is still Missing.
        assert_eq!(
            aggregate([not_created, not_created].into_iter(), false),
            Health::Missing
        );
    }

    #[test]
    fn the_registry_file_lists_images_with_comments() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.txt");
        std::fs::write(
            &path,
            "# images we pushed\nnginx:1.27  # web\n\nbusybox:1.36\n",
        )
        .unwrap();
        let mut p = ImagePolicy::load(&path).unwrap();
        assert!(p.exists("nginx:1.27") && p.exists("busybox:1.36") && !p.exists("nginx:1.28"));
        assert!(!p.reload().unwrap());
        std::fs::write(&path, "nginx:1.28\n").unwrap();
        assert!(p.reload().unwrap());
        assert!(p.exists("nginx:1.28") && !p.exists("nginx:1.27"));
        assert!(
            ImagePolicy::load(&dir.path().join("nope"))
                .unwrap_err()
                .contains("nope")
        );
    }
}
