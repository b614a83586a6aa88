//! GL301 and GL302: a Deployment's rollout strategy left implicit with few replicas, and the
//! `maxSurge: 0` + `maxUnavailable: 0` combination the API server rejects.
//! Must never: scale percentages for the rejection check — the API server compares the values
//! as written (`0` or `0%`), not scaled by replicas.

use super::{Check, Docs, Emit, IntOrPercent, Rule, entry_span, holder_span, int_or_percent};
use crate::diagnostic::Severity;
use crate::object::{Object, nearest};
use crate::yaml::Node;

pub const IMPLICIT: Rule = Rule {
    id: "GL301",
    name: "implicit-rollout-strategy",
    severity: Severity::Warning,
    default_enabled: true,
    summary: "A Deployment with few replicas leaves maxSurge/maxUnavailable implicit",
    docs: Docs {
        what: "Flags a Deployment with at most 3 replicas (`[lint.thresholds] \
               strategy-max-replicas`; 1 when `replicas` is unset) that has no `strategy`, or a \
               RollingUpdate strategy without `maxSurge` and `maxUnavailable`. When an HPA \
               targets the Deployment its `minReplicas` counts instead; a Deployment scaled to \
               zero (such as one an Argo Rollout's `workloadRef` took over) is not flagged.",
        why: "The defaults (25% / 25%) round differently at every replica count, so how many pods \
              may be down during a rollout is a side effect rather than a decision. With few \
              replicas one pod is a large share of capacity: say how many may be added and how \
              many may be missing.",
        example: "kind: Deployment\nspec:\n  replicas: 2\n  # no strategy\n",
        fix: "Declare it, e.g. `strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, \
              maxUnavailable: 0}}` (pair `maxUnavailable: 0` with a startupProbe so new pods \
              become Ready promptly).",
    },
    check: Check::Set(check_implicit_all),
};

pub const CANNOT_PROGRESS: Rule = Rule {
    id: "GL302",
    name: "rolling-update-cannot-progress",
    severity: Severity::Error,
    default_enabled: true,
    summary: "maxSurge 0 with maxUnavailable 0 is rejected by the API server",
    docs: Docs {
        what: "Flags a Deployment whose RollingUpdate sets both `maxSurge` and `maxUnavailable` to \
               `0` (or `0%`).",
        why: "Such a rollout could neither add a pod nor remove one. The API server rejects the \
              object (\"may not be 0 when maxSurge is 0\"), so the sync fails and nothing you \
              changed in that commit is applied.",
        example: "strategy:\n  rollingUpdate:\n    maxSurge: 0\n    maxUnavailable: 0\n",
        fix: "Allow one of them: `maxSurge: 1, maxUnavailable: 0` keeps full capacity during the \
              rollout.",
    },
    check: Check::Object(check_cannot_progress),
};

fn is_zero(n: &Node) -> bool {
    matches!(
        int_or_percent(n),
        Some(IntOrPercent::Int(0) | IntOrPercent::Percent(0))
    )
}

fn check_implicit_all(objects: &[Object], emit: &mut Emit) {
    let hpas: Vec<&Object> = objects
        .iter()
        .filter(|o| o.kind == "HorizontalPodAutoscaler")
        .collect();
    for obj in objects.iter().filter(|o| o.kind == "Deployment") {
        check_implicit(obj, &hpas, emit);
    }
}

/// The HPA scaling `obj` (the nearest one when several do) and its `minReplicas` (default 1).
fn hpa_floor<'o>(obj: &Object, hpas: &[&'o Object<'o>]) -> Option<(&'o str, i64)> {
    let targeting: Vec<&Object> = hpas
        .iter()
        .copied()
        .filter(|h| {
            let t = |k: &str| {
                h.root
                    .at(&["spec", "scaleTargetRef", k])
                    .and_then(Node::as_str)
            };
            h.namespace == obj.namespace && t("kind") == Some(obj.kind) && t("name") == obj.name
        })
        .collect();
    let h = nearest(obj, targeting, |h| *h).into_iter().next()?;
    let min = h
        .root
        .at(&["spec", "minReplicas"])
        .and_then(Node::as_i64)
        .unwrap_or(1);
    Some((h.name.unwrap_or("<unnamed>"), min))
}

fn check_implicit(obj: &Object, hpas: &[&Object], emit: &mut Emit) {
    let Some(spec) = obj.root.get("spec") else {
        return;
    };
    // An HPA owns the replica count; without one, unset replicas default to 1.
    let hpa = hpa_floor(obj, hpas);
    let replicas = match hpa {
        Some((_, min)) => min,
        None => spec.get("replicas").and_then(Node::as_i64).unwrap_or(1),
    };
    // Scaled to zero (parked, or handed to an Argo Rollout's workloadRef): nothing rolls out.
    if replicas <= 0 || replicas > emit.settings.strategy_max_replicas {
        return;
    }
    let strategy = spec.get("strategy");
    let ty = strategy
        .and_then(|s| s.get("type"))
        .and_then(Node::as_str)
        .unwrap_or("RollingUpdate");
    if ty != "RollingUpdate" {
        return;
    }
    let ru = strategy.and_then(|s| s.get("rollingUpdate"));
    if ru.is_some_and(|r| r.get("maxSurge").is_some() || r.get("maxUnavailable").is_some()) {
        return;
    }
    // Kubernetes rounds maxSurge up and maxUnavailable down.
    let surge = (replicas * 25 + 99) / 100;
    let unavailable = replicas * 25 / 100;
    let (span, field, what) = match strategy {
        None => (holder_span(obj, &["spec"]), "spec", "no `strategy`"),
        Some(_) => (
            entry_span(spec, "strategy").unwrap_or(spec.span),
            "spec.strategy",
            "a RollingUpdate `strategy` without maxSurge/maxUnavailable",
        ),
    };
    emit.at(
        obj,
        span,
        field,
        format!(
            "Deployment with {replicas} replica(s){} has {what}: the 25%/25% defaults silently round to maxSurge {surge}, \
             maxUnavailable {unavailable}",
            hpa.map_or(String::new(), |(name, _)| format!(" (the minReplicas of HorizontalPodAutoscaler {name})"))
        ),
    )
    .fix("declare `strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}` (or the values you mean)");
}

fn check_cannot_progress(obj: &Object, emit: &mut Emit) {
    if obj.kind != "Deployment" {
        return;
    }
    let Some(ru) = obj.root.at(&["spec", "strategy", "rollingUpdate"]) else {
        return;
    };
    let (Some(surge), Some(unavail)) = (ru.get("maxSurge"), ru.get("maxUnavailable")) else {
        return;
    };
    if !(is_zero(surge) && is_zero(unavail)) {
        return;
    }
    let span = entry_span(ru, "maxUnavailable").unwrap_or(unavail.span);
    let sspan = entry_span(ru, "maxSurge").unwrap_or(surge.span);
    emit.at(
        obj,
        span,
        "spec.strategy.rollingUpdate.maxUnavailable",
        "maxUnavailable and maxSurge are both 0: the API server rejects this Deployment \
         (maxUnavailable may not be 0 when maxSurge is 0), so the sync will fail"
            .to_string(),
    )
    .fix("set `maxSurge: 1` (keeps full capacity) or a non-zero `maxUnavailable`")
    .related(obj, sspan, "maxSurge is 0");
}
