//! The promotion gate's candidate: a temporary copy of the live workload that runs the candidate
//! image beside the live one, reachable through a Service of its own and never selected by the
//! live Service (`docs/promote.md#the-candidate`). Built from the live manifest as parsed YAML
//! (`serde_json::Value`); the caller reads and writes the files. Pure: nothing here reads git,
//! a cluster or a clock.

use serde_json::{Map, Value, json};

/// The suffix of every name the candidate takes from the live workload.
pub const SUFFIX: &str = "-candidate";
/// The label (and annotation prefix) greenlight puts on what it generates.
pub const ROLE_LABEL: &str = "greenlight.dev/role";
/// The annotation naming the live workload a candidate was made from (`Deployment/web`).
pub const CANDIDATE_OF: &str = "greenlight.dev/candidate-of";

/// What the candidate is made from, besides the live manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandidateSpec {
    /// `Deployment` or `StatefulSet`.
    pub kind: String,
    /// The live workload's name.
    pub name: String,
    /// The container whose image is promoted.
    pub container: String,
    /// The candidate image, pinned (`registry/app@sha256:…`).
    pub image: String,
    /// The candidate's replicas.
    pub replicas: u32,
    /// The candidate Service's name, when not `<name>-candidate`.
    pub service: Option<String>,
    /// The candidate's namespace, when not the live workload's.
    pub namespace: Option<String>,
    /// The candidate Service's port (to the first container port; to itself when the container
    /// declares none), when not the first container port.
    pub port: Option<u16>,
}

/// The generated manifests, and what checks may template with (`{{candidate.*}}`).
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub workload: Value,
    /// Absent when the container declares no port: then nothing can be addressed by a check.
    pub service: Option<Value>,
    pub name: String,
    pub namespace: String,
    /// The Service's name (the workload's), when there is one.
    pub service_name: Option<String>,
    /// The first declared container port.
    pub port: Option<u16>,
    pub image: String,
}

/// Why no candidate could be made; each names what in the live manifest is missing or wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CandidateError {
    #[error("no {kind} named {name:?} in the live manifest (found: {found})")]
    NoWorkload {
        kind: String,
        name: String,
        found: String,
    },
    #[error(
        "{kind} is not a workload greenlight can make a candidate of (Deployment or StatefulSet)"
    )]
    UnsupportedKind { kind: String },
    #[error("{kind}/{name} has no container named {container:?} (its containers: {found})")]
    NoContainer {
        kind: String,
        name: String,
        container: String,
        found: String,
    },
    #[error("{kind}/{name}: `{field}` {problem}")]
    Malformed {
        kind: String,
        name: String,
        field: &'static str,
        problem: &'static str,
    },
}

/// A label value with the candidate suffix, still a valid label value (at most 63 characters,
/// alphanumeric at both ends): different from every value the live pods carry, so no selector
/// written for the live pods matches the candidate's.
pub fn candidate_label_value(value: &str) -> String {
    if value.is_empty() {
        return "candidate".to_string();
    }
    let max = 63 - SUFFIX.len();
    let mut base: String = value.chars().take(max).collect();
    // A cut may leave a non-alphanumeric last character; the suffix's own '-' follows it.
    while base
        .chars()
        .last()
        .is_some_and(|c| !c.is_ascii_alphanumeric())
    {
        base.pop();
    }
    if base.is_empty() {
        return "candidate".to_string();
    }
    format!("{base}{SUFFIX}")
}

/// The candidate of `spec` from the live manifest's documents.
pub fn make_candidate(
    documents: &[Value],
    spec: &CandidateSpec,
) -> Result<Candidate, CandidateError> {
    if !matches!(spec.kind.as_str(), "Deployment" | "StatefulSet") {
        return Err(CandidateError::UnsupportedKind {
            kind: spec.kind.clone(),
        });
    }
    let live = documents
        .iter()
        .find(|d| {
            d["kind"].as_str() == Some(spec.kind.as_str())
                && d["metadata"]["name"].as_str() == Some(spec.name.as_str())
        })
        .ok_or_else(|| CandidateError::NoWorkload {
            kind: spec.kind.clone(),
            name: spec.name.clone(),
            found: found_workloads(documents),
        })?;
    let malformed = |field, problem| CandidateError::Malformed {
        kind: spec.kind.clone(),
        name: spec.name.clone(),
        field,
        problem,
    };
    let mut workload = live.clone();
    let name = format!("{}{SUFFIX}", spec.name);
    let namespace = match &spec.namespace {
        Some(ns) => ns.clone(),
        None => live["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    };
    let service_name = spec.service.clone().unwrap_or_else(|| name.clone());

    // metadata: the candidate's own name, what greenlight made it from; nothing the server set.
    let metadata = workload
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| malformed("metadata", "is not a mapping"))?;
    for server_set in [
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "managedFields",
        "ownerReferences",
        "selfLink",
    ] {
        metadata.remove(server_set);
    }
    metadata.insert("name".into(), json!(name));
    if !namespace.is_empty() {
        metadata.insert("namespace".into(), json!(namespace));
    }
    relabel(metadata, "labels");
    object_at(metadata, "labels").insert(ROLE_LABEL.into(), json!("candidate"));
    let annotations = object_at(metadata, "annotations");
    // Argo CD tracks what it deploys by label or annotation; a copied one would claim the
    // candidate for the live workload's Application.
    annotations.remove("argocd.argoproj.io/tracking-id");
    annotations.insert(
        CANDIDATE_OF.into(),
        json!(format!("{}/{}", spec.kind, spec.name)),
    );
    if let Some(labels) = metadata.get_mut("labels").and_then(Value::as_object_mut) {
        labels.remove("app.kubernetes.io/instance");
    }
    if let Some(obj) = workload.as_object_mut() {
        obj.remove("status");
    }

    let spec_obj = workload
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| malformed("spec", "is not a mapping"))?;
    spec_obj.insert("replicas".into(), json!(spec.replicas));
    // The selector and the pod labels change together, every value: a Service written for the
    // live pods selects on some of their labels, and none of those values match any more.
    let selector = spec_obj
        .get_mut("selector")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| malformed("spec.selector", "is missing"))?;
    relabel(selector, "matchLabels");
    if let Some(exprs) = selector
        .get_mut("matchExpressions")
        .and_then(Value::as_array_mut)
    {
        for e in exprs {
            if e["operator"].as_str() == Some("In")
                && let Some(values) = e.get_mut("values").and_then(Value::as_array_mut)
            {
                for v in values {
                    if let Some(s) = v.as_str() {
                        *v = json!(candidate_label_value(s));
                    }
                }
            }
        }
    }
    let selector_labels = selector.get("matchLabels").cloned();
    let template_meta = spec_obj
        .get_mut("template")
        .and_then(Value::as_object_mut)
        .map(|t| object_at(t, "metadata"))
        .ok_or_else(|| malformed("spec.template", "is missing"))?;
    relabel(template_meta, "labels");
    let pod_labels = template_meta.get("labels").cloned().unwrap_or(json!({}));
    if spec.kind == "StatefulSet" {
        spec_obj.insert("serviceName".into(), json!(service_name));
        // The PersistentVolumeClaims of its volumeClaimTemplates go with the candidate: deleted
        // when the StatefulSet is (the gate removing it, gc after its retention), kept while it
        // is kept at zero replicas (Kubernetes' StatefulSetAutoDeletePVC, on by default since
        // 1.27; an older API server drops the field and the claims stay).
        if spec_obj.contains_key("volumeClaimTemplates") {
            spec_obj.insert(
                "persistentVolumeClaimRetentionPolicy".into(),
                json!({"whenDeleted": "Delete", "whenScaled": "Retain"}),
            );
        }
    }

    let containers = workload
        .pointer_mut("/spec/template/spec/containers")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| malformed("spec.template.spec.containers", "is missing"))?;
    let found: Vec<String> = containers
        .iter()
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect();
    let container = containers
        .iter_mut()
        .find(|c| c["name"].as_str() == Some(spec.container.as_str()))
        .ok_or_else(|| CandidateError::NoContainer {
            kind: spec.kind.clone(),
            name: spec.name.clone(),
            container: spec.container.clone(),
            found: if found.is_empty() {
                "none".into()
            } else {
                found.join(", ")
            },
        })?;
    container["image"] = json!(spec.image);
    let ports: Vec<Value> = container["ports"].as_array().cloned().unwrap_or_default();

    let mut service_ports: Vec<Value> = ports
        .iter()
        .filter_map(|p| {
            let number = p["containerPort"].as_u64()?;
            let mut port = json!({"port": number, "targetPort": number});
            if let Some(n) = p["name"].as_str() {
                port["name"] = json!(n);
            }
            if let Some(proto) = p["protocol"].as_str() {
                port["protocol"] = json!(proto);
            }
            Some(port)
        })
        .collect();
    // A headless Service (a StatefulSet's) maps no port: its DNS names the pods themselves, so
    // a check must address the container's own port, whatever the configured one.
    let headless = spec.kind == "StatefulSet";
    match (spec.port, service_ports.first_mut()) {
        (Some(_), Some(_)) if headless => {}
        (Some(p), Some(first)) => first["port"] = json!(p),
        (Some(p), None) => service_ports.push(json!({"port": p, "targetPort": p})),
        (None, _) => {}
    }
    let port = service_ports
        .first()
        .and_then(|p| p["port"].as_u64())
        .and_then(|p| u16::try_from(p).ok());
    let service = (!service_ports.is_empty()).then(|| {
        let mut meta = json!({
            "name": service_name,
            "labels": {ROLE_LABEL: "candidate"},
            "annotations": {CANDIDATE_OF: format!("{}/{}", spec.kind, spec.name)},
        });
        if !namespace.is_empty() {
            meta["namespace"] = json!(namespace);
        }
        let mut svc_spec = json!({
            "selector": selector_labels.clone().unwrap_or_else(|| pod_labels.clone()),
            "ports": service_ports,
        });
        // A StatefulSet's governing Service is headless.
        if spec.kind == "StatefulSet" {
            svc_spec["clusterIP"] = json!("None");
        }
        json!({"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": svc_spec})
    });
    Ok(Candidate {
        workload,
        service_name: service.as_ref().map(|_| service_name.clone()),
        service,
        name,
        namespace,
        port,
        image: spec.image.clone(),
    })
}

/// The mapping at `key` in `obj`, made one if absent or not a mapping.
fn object_at<'a>(obj: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = obj.entry(key).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    slot.as_object_mut().expect("made a mapping above")
}

/// Every label value under `obj[key]` with the candidate suffix.
fn relabel(obj: &mut Map<String, Value>, key: &str) {
    if let Some(labels) = obj.get_mut(key).and_then(Value::as_object_mut) {
        for v in labels.values_mut() {
            let s = v.as_str().map(str::to_string).unwrap_or_default();
            *v = json!(candidate_label_value(&s));
        }
    }
}

fn found_workloads(documents: &[Value]) -> String {
    let found: Vec<String> = documents
        .iter()
        .filter_map(|d| {
            Some(format!(
                "{}/{}",
                d["kind"].as_str()?,
                d["metadata"]["name"].as_str()?
            ))
        })
        .collect();
    if found.is_empty() {
        "nothing".into()
    } else {
        found.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live_deployment() -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "llm",
                "namespace": "serving",
                "labels": {"app": "llm", "app.kubernetes.io/instance": "llm-prod"},
                "annotations": {"argocd.argoproj.io/tracking-id": "llm:apps/Deployment:serving/llm"},
                "uid": "1234",
                "resourceVersion": "99",
            },
            "spec": {
                "replicas": 4,
                "selector": {
                    "matchLabels": {"app": "llm", "tier": "inference"},
                    "matchExpressions": [
                        {"key": "track", "operator": "In", "values": ["stable"]},
                        {"key": "zone", "operator": "Exists"},
                    ],
                },
                "template": {
                    "metadata": {"labels": {"app": "llm", "tier": "inference", "track": "stable", "zone": "a"}},
                    "spec": {"containers": [
                        {"name": "sidecar", "image": "envoy:1"},
                        {
                            "name": "server",
                            "image": "registry.local/llm:1.0",
                            "ports": [{"name": "http", "containerPort": 8080}, {"containerPort": 9090, "protocol": "TCP"}],
                            "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "40Gi"}, "requests": {"nvidia.com/gpu": 1}},
                        },
                    ]},
                },
            },
            "status": {"replicas": 4},
        })
    }

    fn spec(kind: &str) -> CandidateSpec {
        CandidateSpec {
            kind: kind.into(),
            name: "llm".into(),
            container: "server".into(),
            image: "registry.local/llm@sha256:abc".into(),
            replicas: 1,
            service: None,
            namespace: None,
            port: None,
        }
    }

    /// Whether a Service selector written for `pod_labels` selects pods labelled `labels`.
    fn selects(selector: &Value, labels: &Value) -> bool {
        selector
            .as_object()
            .unwrap()
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
    }

    #[test]
    fn a_candidate_is_renamed_relabelled_and_runs_the_candidate_image_with_the_live_resources() {
        let live = live_deployment();
        let c = make_candidate(std::slice::from_ref(&live), &spec("Deployment")).unwrap();
        let w = &c.workload;
        assert_eq!(w["metadata"]["name"], "llm-candidate");
        assert_eq!(w["metadata"]["namespace"], "serving");
        assert_eq!(w["spec"]["replicas"], 1);
        assert!(w["metadata"].get("uid").is_none() && w.get("status").is_none());
        assert!(
            w["metadata"]["annotations"]
                .get("argocd.argoproj.io/tracking-id")
                .is_none()
        );
        assert!(
            w["metadata"]["labels"]
                .get("app.kubernetes.io/instance")
                .is_none()
        );
        assert_eq!(w["metadata"]["annotations"][CANDIDATE_OF], "Deployment/llm");
        let server = &w["spec"]["template"]["spec"]["containers"][1];
        assert_eq!(server["image"], "registry.local/llm@sha256:abc");
        assert_eq!(
            server["resources"], live["spec"]["template"]["spec"]["containers"][1]["resources"],
            "GPU requests and limits kept"
        );
        assert_eq!(
            w["spec"]["template"]["spec"]["containers"][0]["image"],
            "envoy:1"
        );
        // No selector written for the live pods selects the candidate's: every single label.
        let pods = &w["spec"]["template"]["metadata"]["labels"];
        let live_pods = &live["spec"]["template"]["metadata"]["labels"];
        for (k, v) in live_pods.as_object().unwrap() {
            assert!(
                !selects(&json!({k: v}), pods),
                "live selector {k}={v} selects the candidate"
            );
        }
        // The workload's own selector still selects its pods (an invalid object otherwise).
        assert!(selects(&w["spec"]["selector"]["matchLabels"], pods));
        assert_eq!(
            w["spec"]["selector"]["matchExpressions"][0]["values"],
            json!(["stable-candidate"])
        );
        assert_eq!(pods["track"], "stable-candidate");
        // Its own Service selects it, on the container's ports.
        let svc = c.service.as_ref().unwrap();
        assert_eq!(svc["metadata"]["name"], "llm-candidate");
        assert_eq!(svc["metadata"]["namespace"], "serving");
        assert!(selects(&svc["spec"]["selector"], pods));
        assert_eq!(
            svc["spec"]["ports"][0],
            json!({"name": "http", "port": 8080, "targetPort": 8080})
        );
        assert_eq!(svc["spec"]["ports"][1]["protocol"], "TCP");
        assert!(svc["spec"].get("clusterIP").is_none());
        assert_eq!(c.port, Some(8080));
        assert_eq!(c.service_name.as_deref(), Some("llm-candidate"));
        // The live manifest itself is untouched.
        assert_eq!(live, live_deployment());
    }

    #[test]
    fn a_statefulset_candidate_is_governed_by_its_own_headless_service() {
        let mut live = live_deployment();
        live["kind"] = json!("StatefulSet");
        live["spec"]["serviceName"] = json!("llm-headless");
        let c = make_candidate(&[live], &spec("StatefulSet")).unwrap();
        assert_eq!(c.workload["spec"]["serviceName"], "llm-candidate");
        assert_eq!(c.service.as_ref().unwrap()["spec"]["clusterIP"], "None");
        // No volume claims: no retention policy to set.
        assert!(c.workload["spec"]["persistentVolumeClaimRetentionPolicy"].is_null());
    }

    #[test]
    fn a_headless_candidate_exposes_the_containers_own_port_and_its_claims_go_with_it() {
        let mut live = live_deployment();
        live["kind"] = json!("StatefulSet");
        live["spec"]["volumeClaimTemplates"] =
            json!([{"metadata": {"name": "weights"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]);
        let c = make_candidate(
            &[live],
            &CandidateSpec {
                port: Some(9000),
                ..spec("StatefulSet")
            },
        )
        .unwrap();
        let svc = c.service.unwrap();
        assert_eq!(svc["spec"]["ports"][0]["port"], 8080, "{svc:#}");
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
        assert_eq!(c.port, Some(8080), "checks address the pods' own port");
        assert_eq!(
            c.workload["spec"]["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Delete", "whenScaled": "Retain"})
        );
    }

    #[test]
    fn a_container_without_ports_has_no_service_to_address() {
        let mut live = live_deployment();
        live["spec"]["template"]["spec"]["containers"][1]
            .as_object_mut()
            .unwrap()
            .remove("ports");
        let c = make_candidate(&[live], &spec("Deployment")).unwrap();
        assert!(c.service.is_none() && c.port.is_none() && c.service_name.is_none());
    }

    #[test]
    fn the_configured_service_namespace_and_port_override_the_derived_ones() {
        let live = live_deployment();
        let c = make_candidate(
            std::slice::from_ref(&live),
            &CandidateSpec {
                service: Some("llm-try".into()),
                namespace: Some("staging".into()),
                port: Some(9000),
                ..spec("Deployment")
            },
        )
        .unwrap();
        let svc = c.service.as_ref().unwrap();
        assert_eq!(svc["metadata"]["name"], "llm-try");
        assert_eq!(svc["metadata"]["namespace"], "staging");
        assert_eq!(c.workload["metadata"]["namespace"], "staging");
        assert_eq!(c.workload["metadata"]["name"], "llm-candidate");
        assert_eq!(svc["spec"]["ports"][0]["port"], 9000);
        assert_eq!(
            svc["spec"]["ports"][0]["targetPort"],
            live["spec"]["template"]["spec"]["containers"][1]["ports"][0]["containerPort"]
        );
        assert_eq!(
            (c.service_name.as_deref(), c.namespace.as_str(), c.port),
            (Some("llm-try"), "staging", Some(9000))
        );
        // A container without ports still gets a Service on the configured port.
        let mut bare = live.clone();
        bare["spec"]["template"]["spec"]["containers"][1]
            .as_object_mut()
            .unwrap()
            .remove("ports");
        let c = make_candidate(
            &[bare],
            &CandidateSpec {
                port: Some(8080),
                ..spec("Deployment")
            },
        )
        .unwrap();
        assert_eq!(c.service.unwrap()["spec"]["ports"][0]["targetPort"], 8080);
    }

    #[test]
    fn what_is_missing_is_named() {
        let live = live_deployment();
        let err = make_candidate(
            &[
                json!({"kind": "Service", "metadata": {"name": "llm"}}),
                live.clone(),
            ],
            &CandidateSpec {
                name: "other".into(),
                ..spec("Deployment")
            },
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no Deployment named \"other\" in the live manifest (found: Service/llm, Deployment/llm)"
        );
        let err = make_candidate(
            std::slice::from_ref(&live),
            &CandidateSpec {
                container: "main".into(),
                ..spec("Deployment")
            },
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Deployment/llm has no container named \"main\" (its containers: sidecar, server)"
        );
        let err = make_candidate(std::slice::from_ref(&live), &spec("DaemonSet")).unwrap_err();
        assert!(
            err.to_string().starts_with("DaemonSet is not a workload"),
            "{err}"
        );
        let mut no_selector = live;
        no_selector["spec"]
            .as_object_mut()
            .unwrap()
            .remove("selector");
        let err = make_candidate(&[no_selector], &spec("Deployment")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Deployment/llm: `spec.selector` is missing"
        );
    }

    #[test]
    fn candidate_label_values_stay_valid_label_values() {
        assert_eq!(candidate_label_value("web"), "web-candidate");
        assert_eq!(candidate_label_value(""), "candidate");
        let long = "a".repeat(63);
        let v = candidate_label_value(&long);
        assert_eq!(v.len(), 63);
        assert!(v.ends_with(SUFFIX));
        // A cut that would end on '-' or '.' drops it.
        let v = candidate_label_value(&format!("{}-.x", "b".repeat(52)));
        assert_eq!(v, format!("{}{SUFFIX}", "b".repeat(52)));
        assert_eq!(candidate_label_value("--"), "candidate");
    }
}
