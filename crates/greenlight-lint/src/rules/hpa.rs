//! An HPA-scaled workload that also sets `spec.replicas` in git: endless drift under Argo CD.
//! Must never: flag a workload no HPA in the same namespace targets.

use super::{Check, Docs, Emit, Rule, key_value_span};
use crate::diagnostic::Severity;
use crate::object::{Object, nearest};
use crate::yaml::Node;

pub const TARGET_SETS_REPLICAS: Rule = Rule {
    id: "GL501",
    name: "hpa-target-sets-replicas",
    severity: Severity::Warning,
    requirement: "W20",
    default_enabled: true,
    summary: "A workload scaled by an HPA also sets spec.replicas",
    docs: Docs {
        what: "Flags `spec.replicas` on a Deployment, StatefulSet, ReplicaSet or Argo Rollout that a \
               HorizontalPodAutoscaler in the same namespace targets (`scaleTargetRef` kind and \
               name).",
        why: "The HPA owns the replica count. With `replicas` in git, every sync writes it back, \
              the HPA scales again, and Argo CD shows the app OutOfSync forever (or, with \
              self-heal, fights the autoscaler and drops capacity at every sync). A watchdog \
              cannot tell such an app's drift from a real one.",
        example: "kind: Deployment\nspec:\n  replicas: 3   # and an HPA targets this Deployment\n",
        fix: "Remove `spec.replicas` from the manifest and let the HPA's `minReplicas` set the \
              floor (or ignore the field with an Argo CD `ignoreDifferences` entry).",
    },
    check: Check::Set(check),
};

fn check(objects: &[Object], emit: &mut Emit) {
    for hpa in objects
        .iter()
        .filter(|o| o.kind == "HorizontalPodAutoscaler")
    {
        let Some(target) = hpa.root.at(&["spec", "scaleTargetRef"]) else {
            continue;
        };
        let kind = target.get("kind").and_then(Node::as_str);
        let name = target.get("name").and_then(Node::as_str);
        let targets: Vec<&Object> = objects
            .iter()
            .filter(|o| {
                Some(o.kind) == kind
                    && o.name == name
                    && o.namespace == hpa.namespace
                    && matches!(
                        o.kind,
                        "Deployment" | "StatefulSet" | "ReplicaSet" | "Rollout"
                    )
            })
            .collect();
        for obj in nearest(hpa, targets, |o| *o) {
            let Some(spec) = obj.root.get("spec") else {
                continue;
            };
            let Some(e) = spec.entry("replicas") else {
                continue;
            };
            if e.value.is_null() {
                continue;
            }
            let hpa_name = hpa.name.unwrap_or("<unnamed>");
            let tspan = hpa
                .root
                .get("spec")
                .and_then(|s| s.entry("scaleTargetRef"))
                .map_or(target.span, |e| e.key.span);
            emit.at(
                obj,
                key_value_span(&e.key, &e.value),
                "spec.replicas",
                format!(
                    "{} {} sets spec.replicas but HorizontalPodAutoscaler {hpa_name} scales it: every sync resets the \
                     replica count and the app never stays in sync",
                    obj.kind,
                    obj.name.unwrap_or("<unnamed>")
                ),
            )
            .fix("remove `spec.replicas` and let the HPA's minReplicas set the floor")
            .related(hpa, tspan, format!("HorizontalPodAutoscaler {hpa_name} targets it"));
        }
    }
}
