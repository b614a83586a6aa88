//! GL401: a PodDisruptionBudget that blocks every voluntary eviction (node drain).
//! Owns: label-selector semantics (matchLabels and matchExpressions), namespace matching and
//! counting the replicas a PDB covers (HPA `minReplicas` when an HPA scales the workload).
//! Must never: guess replicas it cannot know (DaemonSets: one per node) — such a PDB is only
//! judged by its static values.

use super::{Check, Docs, Emit, IntOrPercent, Rule, entry_span, int_or_percent, key_value_span};
use crate::diagnostic::Severity;
use crate::object::{Object, Workload, nearest};
use crate::yaml::{Node, Span};

pub const BLOCKS_DRAIN: Rule = Rule {
    id: "GL401",
    name: "pdb-blocks-drain",
    severity: Severity::Error,
    default_enabled: true,
    summary: "A PodDisruptionBudget allows no eviction, so node drains hang",
    docs: Docs {
        what: "Flags a PodDisruptionBudget with `minAvailable: 100%` or `maxUnavailable: 0` (`0%`), \
               or whose `minAvailable` (a count, or a percentage rounded up) is at least the number \
               of replicas of the workloads its selector matches in the same namespace. Replicas \
               come from `spec.replicas` (1 when unset), or from an HPA's `minReplicas` when an HPA \
               targets the workload. Selectors use Kubernetes semantics, matchExpressions \
               included; an unset namespace matches another unset one. When the run holds several \
               apps, the workloads nearest the PDB count (same file, else the longest shared \
               directory).",
        why: "A drain evicts pods through the eviction API, which refuses while the budget would be \
              violated. If the budget can never be met with one pod fewer, every drain of a node \
              running those pods waits forever: node upgrades, autoscaler scale-down and spot \
              replacements stall, usually found out during a maintenance window.",
        example: "kind: PodDisruptionBudget\nspec:\n  minAvailable: 1\n  selector:\n    matchLabels: {app: admin}\n---\n# Deployment app=admin with replicas: 1\n",
        fix: "Use `maxUnavailable: 1` (always allows one eviction), or raise the replicas above \
              `minAvailable`.",
    },
    check: Check::Set(check),
};

fn check(objects: &[Object], emit: &mut Emit) {
    // Analysis templates describe pods that exist only while an analysis runs.
    let workloads: Vec<Workload> = objects
        .iter()
        .filter(|o| !matches!(o.kind, "AnalysisTemplate" | "ClusterAnalysisTemplate"))
        .flat_map(Workload::all)
        .collect();
    let hpas: Vec<&Object> = objects
        .iter()
        .filter(|o| o.kind == "HorizontalPodAutoscaler")
        .collect();
    let pdbs: Vec<&Object> = objects
        .iter()
        .filter(|o| o.kind == "PodDisruptionBudget")
        .collect();
    for &pdb in &pdbs {
        let Some(spec) = pdb.root.get("spec") else {
            continue;
        };
        if let Some(max) = spec.get("maxUnavailable") {
            if matches!(
                int_or_percent(max),
                Some(IntOrPercent::Int(0) | IntOrPercent::Percent(0))
            ) {
                let span = entry_span(spec, "maxUnavailable").unwrap_or(max.span);
                emit.at(
                    pdb,
                    span,
                    "spec.maxUnavailable",
                    "PodDisruptionBudget allows 0 unavailable pods: no eviction is ever allowed, so every drain of a node \
                     running these pods hangs"
                        .to_string(),
                )
                .fix("use `maxUnavailable: 1`");
            }
            continue;
        }
        let Some(min) = spec.get("minAvailable") else {
            continue;
        };
        let Some(min_v) = int_or_percent(min) else {
            continue;
        };
        let span = entry_span(spec, "minAvailable").unwrap_or(min.span);
        if min_v == IntOrPercent::Percent(100) {
            emit.at(
                pdb,
                span,
                "spec.minAvailable",
                "PodDisruptionBudget requires 100% of its pods available: no eviction is ever allowed, so every drain hangs"
                    .to_string(),
            )
            .fix("use `maxUnavailable: 1`");
            continue;
        }
        let Some(selector) = spec.get("selector") else {
            continue;
        };
        let matched: Vec<&Workload> = workloads
            .iter()
            .filter(|w| w.object.namespace == pdb.namespace)
            .filter(|w| selects(selector, w.labels))
            .collect();
        let matched: Vec<&Workload> = nearest(pdb, matched, |w| w.object)
            .into_iter()
            .filter(|w| pdb_is_nearest(pdb, w, &pdbs))
            .collect();
        if matched.is_empty() {
            continue;
        }
        let mut total = 0i64;
        let mut related: Vec<(&Object, Span, String)> = Vec::new();
        let mut unknown = false;
        for w in &matched {
            match replicas(w, &hpas) {
                Some((n, who, at)) => {
                    total += n;
                    related.push((who, at.0, at.1));
                }
                None => unknown = true,
            }
        }
        if unknown {
            continue;
        }
        let required = match min_v {
            IntOrPercent::Int(n) => n,
            // The disruption controller rounds a percentage of minAvailable up.
            IntOrPercent::Percent(p) => (p * total + 99) / 100,
        };
        // minAvailable 0 never refuses an eviction, and with no replicas there is no pod a
        // drain could wait on.
        if required == 0 || total == 0 || required < total {
            continue;
        }
        let shown = match min_v {
            IntOrPercent::Int(n) => n.to_string(),
            IntOrPercent::Percent(p) => format!("{p}% (= {required})"),
        };
        let f = emit.at(
            pdb,
            span,
            "spec.minAvailable",
            format!(
                "PodDisruptionBudget requires minAvailable {shown} but its selector matches only {total} replica(s): \
                 no eviction is ever allowed, so every drain of a node running these pods hangs"
            ),
        );
        f.fix(format!(
            "use `maxUnavailable: 1`, or run more than {required} replicas"
        ));
        for (who, at, msg) in related {
            f.related(who, at, msg);
        }
    }
}

/// Whether `pdb` is among the PDBs nearest to `w` that select it. Pairs must be nearest from
/// both sides: a stray PDB in another app's test data is nearest to a look-alike workload only
/// from its own side, while the workload's own app holds a nearer PDB.
fn pdb_is_nearest(pdb: &Object, w: &Workload, pdbs: &[&Object]) -> bool {
    let selecting: Vec<&Object> = pdbs
        .iter()
        .copied()
        .filter(|p| p.namespace == w.object.namespace)
        .filter(|p| {
            p.root
                .at(&["spec", "selector"])
                .is_some_and(|sel| selects(sel, w.labels))
        })
        .collect();
    nearest(w.object, selecting, |p| *p)
        .iter()
        .any(|p| std::ptr::eq(*p, pdb))
}

/// Replicas of a workload as the disruption controller will see them at their lowest, with
/// the place that sets them. `None` when they cannot be known statically (DaemonSet).
fn replicas<'o, 'a>(
    w: &Workload<'a, 'o>,
    hpas: &[&'o Object<'a>],
) -> Option<(i64, &'o Object<'a>, (Span, String))> {
    let obj = w.object;
    // DaemonSets run one pod per node, Jobs run to completion, and JobSets, LeaderWorkerSets
    // and Experiments multiply their templates: none has a count to compare with.
    if !matches!(
        obj.kind,
        "Deployment" | "StatefulSet" | "ReplicaSet" | "ReplicationController" | "Rollout" | "Pod"
    ) {
        return None;
    }
    let targeting: Vec<&&Object> = hpas
        .iter()
        .filter(|h| {
            h.namespace == obj.namespace
                && h.root
                    .at(&["spec", "scaleTargetRef", "kind"])
                    .and_then(Node::as_str)
                    == Some(obj.kind)
                && h.root
                    .at(&["spec", "scaleTargetRef", "name"])
                    .and_then(Node::as_str)
                    == obj.name
        })
        .collect();
    let hpa = nearest(obj, targeting, |h| **h).into_iter().next();
    if let Some(h) = hpa {
        let spec = h.root.get("spec")?;
        let n = spec.get("minReplicas").and_then(Node::as_i64).unwrap_or(1);
        let span = spec.entry("minReplicas").map_or_else(
            || {
                spec.entry("scaleTargetRef")
                    .map_or(spec.span, |e| e.key.span)
            },
            |e| key_value_span(&e.key, &e.value),
        );
        let name = h.name.unwrap_or("<unnamed>");
        return Some((
            n,
            h,
            (
                span,
                format!(
                    "HorizontalPodAutoscaler {name} scales {} down to {n}",
                    describe(obj)
                ),
            ),
        ));
    }
    if obj.kind == "Pod" {
        return Some((
            1,
            obj,
            (
                obj.root.entry("kind").map_or(obj.root.span, |e| e.key.span),
                format!("{} is one pod", describe(obj)),
            ),
        ));
    }
    let spec = obj.root.get("spec")?;
    match spec.entry("replicas") {
        Some(e) => {
            let n = e.value.as_i64()?;
            Some((
                n,
                obj,
                (
                    key_value_span(&e.key, &e.value),
                    format!("{} has {n} replica(s)", describe(obj)),
                ),
            ))
        }
        None => {
            let at = obj.root.entry("spec").map_or(obj.root.span, |e| e.key.span);
            Some((
                1,
                obj,
                (
                    at,
                    format!("{} has 1 replica (replicas unset)", describe(obj)),
                ),
            ))
        }
    }
}

fn describe(obj: &Object) -> String {
    format!("{} {}", obj.kind, obj.name.unwrap_or("<unnamed>"))
}

/// Kubernetes LabelSelector semantics: every matchLabels pair and every matchExpression must
/// hold; an empty selector matches everything.
pub(crate) fn selects(selector: &Node, labels: Option<&Node>) -> bool {
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Node::as_str);
    if let Some(ml) = selector.get("matchLabels") {
        for e in ml.as_map() {
            let (Some(k), Some(v)) = (e.key.as_str(), e.value.as_str()) else {
                return false;
            };
            if label(k) != Some(v) {
                return false;
            }
        }
    }
    if let Some(exprs) = selector.get("matchExpressions") {
        for ex in exprs.as_seq() {
            let Some(key) = ex.get("key").and_then(Node::as_str) else {
                return false;
            };
            let op = ex.get("operator").and_then(Node::as_str).unwrap_or("");
            let values: Vec<&str> = ex
                .get("values")
                .map(Node::as_seq)
                .unwrap_or_default()
                .iter()
                .filter_map(Node::as_str)
                .collect();
            let have = label(key);
            let ok = match op {
                "In" => have.is_some_and(|v| values.contains(&v)),
                "NotIn" => have.is_none_or(|v| !values.contains(&v)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            };
            if !ok {
                return false;
            }
        }
    }
    true
}
