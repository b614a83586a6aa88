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

fn targets(hpa: &Object, obj: &Object) -> bool {
    let target = |k: &str| {
        hpa.root
            .at(&["spec", "scaleTargetRef", k])
            .and_then(Node::as_str)
    };
    hpa.namespace == obj.namespace && target("kind") == Some(obj.kind) && target("name") == obj.name
}

fn check(objects: &[Object], emit: &mut Emit) {
    let hpas: Vec<&Object> = objects
        .iter()
        .filter(|o| o.kind == "HorizontalPodAutoscaler")
        .collect();
    let scalable = |o: &&Object| {
        matches!(
            o.kind,
            "Deployment" | "StatefulSet" | "ReplicaSet" | "Rollout"
        )
    };
    for obj in objects.iter().filter(scalable) {
        let Some(e) = obj.root.get("spec").and_then(|s| s.entry("replicas")) else {
            continue;
        };
        if e.value.is_null() {
            continue;
        }
        // A pair counts only when it is nearest from both sides: an HPA in another app's test
        // data is nearest to a look-alike workload only from its own side. Several HPAs that
        // target one workload make one finding, each HPA a related location.
        let candidates: Vec<&Object> = hpas.iter().copied().filter(|h| targets(h, obj)).collect();
        let owners: Vec<&Object> = nearest(obj, candidates, |h| *h)
            .into_iter()
            .filter(|h| {
                let rivals: Vec<&Object> = objects
                    .iter()
                    .filter(scalable)
                    .filter(|o| targets(h, o))
                    .collect();
                nearest(h, rivals, |o| *o)
                    .iter()
                    .any(|o| std::ptr::eq(*o, obj))
            })
            .collect();
        if owners.is_empty() {
            continue;
        }
        let names: Vec<&str> = owners
            .iter()
            .map(|h| h.name.unwrap_or("<unnamed>"))
            .collect();
        let f = emit.at(
            obj,
            key_value_span(&e.key, &e.value),
            "spec.replicas",
            format!(
                "{} {} sets spec.replicas but HorizontalPodAutoscaler {} scales it: every sync resets the \
                 replica count and the app never stays in sync",
                obj.kind,
                obj.name.unwrap_or("<unnamed>"),
                names.join(", ")
            ),
        );
        f.fix("remove `spec.replicas` and let the HPA's minReplicas set the floor");
        for h in owners {
            let spec = h.root.get("spec");
            let tspan = spec
                .and_then(|s| s.entry("scaleTargetRef"))
                .map_or(h.root.span, |e| e.key.span);
            f.related(
                h,
                tspan,
                format!(
                    "HorizontalPodAutoscaler {} targets it",
                    h.name.unwrap_or("<unnamed>")
                ),
            );
        }
    }
}
