//! GL301 and GL302: a Deployment's rollout strategy left implicit (graded by replica count and
//! by ReadWriteOnce volumes), and the `maxSurge: 0` + `maxUnavailable: 0` combination the API
//! server (for a Deployment) or Argo Rollouts (for a canary Rollout) rejects.
//! Must never: scale percentages for the rejection check — the API server compares the values
//! as written (`0` or `0%`), not scaled by replicas.

use super::{Check, Docs, Emit, IntOrPercent, Rule, entry_span, holder_span, int_or_percent};
use crate::diagnostic::Severity;
use crate::object::{Object, nearest};
use crate::yaml::{Node, Span};

pub const IMPLICIT: Rule = Rule {
    id: "GL301",
    name: "implicit-rollout-strategy",
    severity: Severity::Warning,
    default_enabled: true,
    summary: "A Deployment leaves maxSurge/maxUnavailable implicit",
    docs: Docs {
        what: "Flags a Deployment that has no `strategy`, or a RollingUpdate strategy without \
               `maxSurge` and `maxUnavailable`. Its replica count N is `spec.replicas` (1 when \
               unset), or the `maxReplicas` of an HPA that targets it. With N at most 3 \
               (`[lint.thresholds] strategy-max-replicas`) the finding is `info`: the defaults \
               give maxSurge 1 and maxUnavailable 0 there, so nothing is wrong yet. With more it \
               is a `warning`. A Deployment that mounts a ReadWriteOnce PersistentVolumeClaim \
               (a `persistentVolumeClaim.claimName` whose PersistentVolumeClaim is in the run, \
               paired as for GL401, with `ReadWriteOnce` or `ReadWriteOncePod` in its \
               `accessModes`) is a `warning` at any N. Not flagged: a Deployment scaled to zero \
               (such as one an Argo Rollout's `workloadRef` took over), one whose `replicas` is \
               not a number (a template), and one in a file a kustomization of the run names as \
               a patch (`patches[].path`, `patchesStrategicMerge`): a patch only says what it \
               changes.",
        why: "The defaults (25% / 25%) round differently at every replica count: up to 3 \
              replicas they add one pod and take none away, from 4 on they let a quarter of the \
              pods go unavailable during a rollout, so a change of `replicas` (or of an HPA's \
              ceiling) silently changes how much capacity a rollout costs. With a ReadWriteOnce \
              volume a rolling update deadlocks instead: the surge pod starts before the old one \
              stops and, on another node, waits forever on a Multi-Attach error for the volume \
              the old pod holds.",
        example: "kind: Deployment\nspec:\n  replicas: 6\n  # no strategy: maxUnavailable rounds to 1\n",
        fix: "Declare it, e.g. `strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, \
              maxUnavailable: 0}}` (pair `maxUnavailable: 0` with a startupProbe so new pods \
              become Ready promptly). With a ReadWriteOnce volume use `strategy: {type: \
              Recreate}`.",
    },
    check: Check::Set(check_implicit_all),
};

pub const CANNOT_PROGRESS: Rule = Rule {
    id: "GL302",
    name: "rolling-update-cannot-progress",
    severity: Severity::Error,
    default_enabled: true,
    summary: "maxSurge 0 with maxUnavailable 0 is rejected (Deployment or canary Rollout)",
    docs: Docs {
        what: "Flags a Deployment whose RollingUpdate sets both `maxSurge` and `maxUnavailable` to \
               `0` (or `0%`), and an Argo Rollout whose canary strategy does.",
        why: "Such a rollout could neither add a pod nor remove one. The API server rejects the \
              Deployment (\"may not be 0 when maxSurge is 0\"), so the sync fails and nothing you \
              changed in that commit is applied; Argo Rollouts marks the Rollout InvalidSpec \
              (\"MaxSurge and MaxUnavailable both can not be zero\") and it never progresses.",
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
    let claims: Vec<&Object> = objects
        .iter()
        .filter(|o| o.kind == "PersistentVolumeClaim")
        .collect();
    for obj in objects
        .iter()
        .filter(|o| o.kind == "Deployment" && !o.kustomize_patch)
    {
        check_implicit(obj, &hpas, &claims, emit);
    }
}

/// The HPA scaling `obj` (the nearest one when several do): its name, `maxReplicas` and where
/// that is written.
fn hpa_ceiling<'o, 'a>(
    obj: &Object,
    hpas: &[&'o Object<'a>],
) -> Option<(&'o Object<'a>, i64, Span)> {
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
    let spec = h.root.get("spec")?;
    let max = spec.get("maxReplicas")?.as_i64()?;
    let span = entry_span(spec, "maxReplicas").unwrap_or(spec.span);
    Some((h, max, span))
}

/// A ReadWriteOnce claim the pod template mounts, with the claim object (paired as for the
/// other cross-object rules) and the span of its access modes.
fn rwo_claim<'o, 'a>(
    obj: &Object,
    claims: &[&'o Object<'a>],
) -> Option<(String, &'o Object<'a>, Span)> {
    let volumes = obj.root.at(&["spec", "template", "spec", "volumes"])?;
    for v in volumes.as_seq() {
        let Some(name) = v
            .at(&["persistentVolumeClaim", "claimName"])
            .and_then(Node::as_str)
        else {
            continue;
        };
        let named: Vec<&Object> = claims
            .iter()
            .copied()
            .filter(|c| c.name == Some(name) && c.namespace == obj.namespace)
            .collect();
        let Some(claim) = nearest(obj, named, |c| *c).into_iter().next() else {
            continue;
        };
        let Some(spec) = claim.root.get("spec") else {
            continue;
        };
        let rwo = spec
            .get("accessModes")
            .map(Node::as_seq)
            .unwrap_or_default()
            .iter()
            .filter_map(Node::as_str)
            .any(|m| m == "ReadWriteOnce" || m == "ReadWriteOncePod");
        if rwo {
            let span = spec.entry("accessModes").map_or(spec.span, |e| e.key.span);
            return Some((name.to_string(), claim, span));
        }
    }
    None
}

fn check_implicit(obj: &Object, hpas: &[&Object], claims: &[&Object], emit: &mut Emit) {
    let Some(spec) = obj.root.get("spec") else {
        return;
    };
    // An HPA owns the replica count, up to its ceiling; without one, unset replicas default
    // to 1. A count that is not a number (a template) is not guessed.
    let hpa = hpa_ceiling(obj, hpas);
    let replicas = match (&hpa, spec.get("replicas").filter(|r| !r.is_null())) {
        (Some((_, max, _)), _) => *max,
        (None, Some(r)) => match r.as_i64() {
            Some(n) => n,
            None => return,
        },
        (None, None) => 1,
    };
    // Scaled to zero (parked, or handed to an Argo Rollout's workloadRef): nothing rolls out.
    if replicas <= 0 {
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
    let opening = format!(
        "Deployment with {replicas} replica(s){}",
        hpa.as_ref().map_or(String::new(), |(h, _, _)| format!(
            " (the maxReplicas of HorizontalPodAutoscaler {})",
            h.name.unwrap_or("<unnamed>")
        ))
    );
    let claim = rwo_claim(obj, claims);
    let (severity, message, fix) = if let Some((name, _, _)) = &claim {
        (
            Severity::Warning,
            format!(
                "{opening} mounts the ReadWriteOnce PersistentVolumeClaim `{name}` and has {what}: a rolling \
                 update starts the new pod before the old one stops, and on another node the new pod waits on \
                 Multi-Attach for the volume the old one holds, so the rollout hangs"
            ),
            "declare `strategy: {type: Recreate}` so the old pod releases the volume before the new one starts"
                .to_string(),
        )
    } else if replicas <= emit.settings.strategy_max_replicas {
        (
            Severity::Info,
            format!(
                "{opening} has {what}: the 25%/25% defaults give maxSurge {surge}, maxUnavailable \
                 {unavailable} at this count; declare it so a replica change does not silently change it"
            ),
            "declare `strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}` (or the values you mean)"
                .to_string(),
        )
    } else {
        (
            Severity::Warning,
            format!(
                "{opening} has {what}: the 25%/25% defaults round to maxSurge {surge}, maxUnavailable \
                 {unavailable}, so {unavailable} pod(s) may be unavailable during every rollout"
            ),
            "declare `strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}` (or the values you mean)"
                .to_string(),
        )
    };
    let f = emit.at(obj, span, field, message);
    f.severity(severity).fix(fix);
    // `--fix`: the strategy the fix names, as the first key of `spec`.
    if strategy.is_none()
        && claim.is_none()
        && let Some(first) = spec.as_map().first()
    {
        f.edit(
            crate::fix::Edit::Keys {
                at: first.key.span.start,
                lines: [
                    "strategy:",
                    "  type: RollingUpdate",
                    "  rollingUpdate:",
                    "    maxSurge: 1",
                    "    maxUnavailable: 0",
                ]
                .map(String::from)
                .to_vec(),
            },
            0,
        );
    }
    if let Some((h, max, at)) = hpa {
        f.related(
            h,
            at,
            format!(
                "HorizontalPodAutoscaler {} scales it up to {max}",
                h.name.unwrap_or("<unnamed>")
            ),
        );
    }
    if let Some((name, c, at)) = claim {
        f.related(
            c,
            at,
            format!("PersistentVolumeClaim {name} is ReadWriteOnce"),
        );
    }
}

fn check_cannot_progress(obj: &Object, emit: &mut Emit) {
    let (keys, field, consequence, of_what): (&[&str], &str, &str, &str) = if obj.kind
        == "Deployment"
    {
        (
            &["spec", "strategy", "rollingUpdate"],
            "spec.strategy.rollingUpdate",
            "the API server rejects this Deployment (maxUnavailable may not be 0 when maxSurge is 0), so the sync will fail",
            "",
        )
    } else if obj.is_argo("Rollout") {
        (
            &["spec", "strategy", "canary"],
            "spec.strategy.canary",
            "Argo Rollouts rejects this canary strategy (\"MaxSurge and MaxUnavailable both can not be zero\"): \
             the Rollout is marked InvalidSpec and never progresses",
            " of the canary",
        )
    } else {
        return;
    };
    let Some(ru) = obj.root.at(keys) else {
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
        &format!("{field}.maxUnavailable"),
        format!("maxUnavailable and maxSurge{of_what} are both 0: {consequence}"),
    )
    .fix("set `maxSurge: 1` (keeps full capacity) or a non-zero `maxUnavailable`")
    .related(obj, sspan, "maxSurge is 0");
    // `--fix`: `maxSurge: 1`, when written plain (a quoted "0%" stays the author's).
    if matches!(&surge.value, crate::yaml::Value::Scalar(s) if s.plain)
        && let Some(f) = emit.findings.last_mut()
    {
        f.edit(
            crate::fix::Edit::Scalar {
                span: surge.span,
                value: "1".into(),
            },
            1,
        );
    }
}
