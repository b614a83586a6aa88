//! Argo Rollouts `AnalysisTemplate` and `ClusterAnalysisTemplate` files (apiVersion
//! `argoproj.io/v1alpha1`), used as they are by an `analysisTemplate` check: the template's
//! args get their values from the promotion config (or the template's own `value`), and
//! `{{args.NAME}}` is resolved in every text field of a metric, as Argo Rollouts does.
//!
//! Only `provider.prometheus` metrics are measured; another provider, an arg with `valueFrom`
//! (greenlight reads nothing from the cluster to resolve one), `dryRun` and composed
//! `templates` are refused, naming the metric or arg. Must never: accept a field it does not
//! know, or a metric that would run forever (`interval` without `count`).

use super::config::{Args, PROMETHEUS_REFUSED, documents, headers, http_url, resolved};
use super::reader::{Field, Kind, Map, Reader, describe, kind};
use greenlight_gate::config::template::Origin;
use greenlight_gate::config::{
    DEFAULT_CONSECUTIVE_ERROR_LIMIT, DEFAULT_QUERY_TIMEOUT_MS, Metric, PrometheusQuery, Template,
};
use greenlight_lint::yaml::{Node, Pos};
use std::collections::{BTreeMap, BTreeSet};

pub const API_VERSION: &str = "argoproj.io/v1alpha1";
pub const KINDS: [&str; 2] = ["AnalysisTemplate", "ClusterAnalysisTemplate"];

/// An arg value given in the promotion config, with where it was written.
pub(crate) struct GivenArg {
    pub name: String,
    pub value: String,
    pub pos: Pos,
    pub path: String,
}

/// The promotion config's `args:` of one `analysisTemplate` check.
pub(crate) struct GivenArgs {
    pub args: Vec<GivenArg>,
    /// Where a missing arg value is reported: the `analysisTemplate` key.
    pub at: Pos,
    pub path: String,
}

pub(crate) struct Imported {
    pub kind: String,
    pub name: String,
    pub metrics: Vec<Metric>,
}

/// The template `selector` names (or the file's only one), its metrics read with args
/// resolved. Problems in the template are reported in `tr` (the template's file), problems with
/// how the config uses it in `cfg`.
pub(crate) fn import(
    cfg: &mut Reader,
    tr: &mut Reader,
    file: &Field<'_, String>,
    text: &str,
    selector: Option<&str>,
    given: &GivenArgs,
) -> Option<Imported> {
    let docs = documents(tr, text);
    if !tr.errors.is_empty() {
        return None;
    }
    let templates: Vec<(&Node, &str)> = docs
        .iter()
        .filter(|d| {
            d.root
                .get("kind")
                .and_then(Node::as_str)
                .is_some_and(|k| KINDS.contains(&k))
        })
        .map(|d| {
            let name = d.root.at(&["metadata", "name"]).and_then(Node::as_str);
            (&d.root, name.unwrap_or(""))
        })
        .collect();
    let names = || {
        templates
            .iter()
            .map(|(_, n)| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let root = match (selector, templates.as_slice()) {
        (_, []) => {
            cfg.invalid(
                file,
                format!(
                    "{} holds no AnalysisTemplate or ClusterAnalysisTemplate",
                    tr.file
                ),
            );
            return None;
        }
        (None, [(root, _)]) => *root,
        (None, _) => {
            cfg.invalid(
                file,
                format!(
                    "{} holds {} templates ({}): choose one with `name`",
                    tr.file,
                    templates.len(),
                    names()
                ),
            );
            return None;
        }
        (Some(want), _) => match templates.iter().find(|(_, n)| *n == want) {
            Some((root, _)) => *root,
            None => {
                cfg.invalid(
                    file,
                    format!(
                        "{} holds no template named `{want}` (it holds {})",
                        tr.file,
                        names()
                    ),
                );
                return None;
            }
        },
    };
    template(cfg, tr, root, given)
}

fn template(cfg: &mut Reader, tr: &mut Reader, root: &Node, given: &GivenArgs) -> Option<Imported> {
    let top = tr.map(
        root,
        root.span.start,
        "",
        &["apiVersion", "kind", "metadata", "spec"],
        &[],
    )?;
    let kind_name = top
        .entry("kind")
        .and_then(|e| e.value.as_str())
        .unwrap_or("")
        .to_string();
    match tr.req_str(&top, "apiVersion", "`argoproj.io/v1alpha1`") {
        Some(f) if f.value != API_VERSION => {
            tr.invalid(
                &f,
                format!(
                    "expected `{API_VERSION}` (Argo Rollouts), found `{}`",
                    f.value
                ),
            );
        }
        _ => {}
    }
    let name = match top.entry("metadata") {
        None => {
            tr.missing(&top, "metadata", "the template's `name`");
            None
        }
        // Labels, annotations and the rest of an object's metadata are no business of the gate.
        Some(e) => tr
            .free_map(&e.value, e.key.span.start, "metadata")
            .and_then(|m| match m.entry("name") {
                None => {
                    tr.missing(&m, "name", "the template's name");
                    None
                }
                Some(e) => tr.string_value(&e.value, "metadata.name"),
            }),
    };
    let spec = tr.req_map(
        &top,
        "spec",
        "the template's `metrics`",
        &["metrics", "args", "measurementRetention"],
        &[
            (
                "dryRun",
                "not supported: every metric of a gate counts, and a dry-run metric is a check that cannot fail; remove `dryRun` (or the metric)",
            ),
            (
                "templates",
                "not supported: a template composed of other templates; give each template a check of its own",
            ),
        ],
    )?;
    let template_name = name.clone().unwrap_or_default();
    let args = args(cfg, tr, &spec, &kind_name, &template_name, given);
    let metrics = metrics(tr, &spec, &args);
    Some(Imported {
        kind: kind_name,
        name: name?,
        metrics: metrics?,
    })
}

/// The template's args with their values: the promotion config's, else the template's own.
fn args(
    cfg: &mut Reader,
    tr: &mut Reader,
    spec: &Map<'_>,
    kind_name: &str,
    template_name: &str,
    given: &GivenArgs,
) -> Args {
    let mut out = Args {
        values: BTreeMap::new(),
        unresolved: BTreeSet::new(),
        origin: Origin::AnalysisTemplate,
    };
    let declared = match tr.seq(spec, "args") {
        Some(f) => f,
        // Wrong, and reported: what it would declare is unknown.
        None if spec.has("args") => return out,
        None => {
            for g in &given.args {
                cfg.error(
                    g.pos,
                    &g.path,
                    format!(
                        "`{}` is not an arg of {kind_name} `{template_name}`: it declares none",
                        g.name
                    ),
                );
            }
            return out;
        }
    };
    let mut names = Vec::new();
    for (i, node) in declared.value.iter().enumerate() {
        let path = format!("{}[{i}]", declared.path);
        let Some(a) = tr.map(
            node,
            node.span.start,
            &path,
            &["name", "value", "valueFrom"],
            &[],
        ) else {
            continue;
        };
        let Some(name) = tr.req_str(&a, "name", "the arg's name") else {
            continue;
        };
        if names.contains(&name.value) {
            tr.invalid(&name, format!("arg `{}` is declared twice", name.value));
            continue;
        }
        names.push(name.value.clone());
        if let Some(e) = a.entry("valueFrom") {
            tr.error(
                e.key.span.start,
                &a.path_of("valueFrom"),
                format!(
                    "arg `{}`: `valueFrom` (a Secret or a field of the Rollout) is not supported: greenlight reads nothing from the cluster to resolve an arg; give it a `value` instead",
                    name.value
                ),
            );
            out.unresolved.insert(name.value.clone());
            continue;
        }
        let own = match a.entry("value") {
            None => None,
            Some(e) if e.value.is_null() => None,
            Some(e) => tr.scalar_value(&e.value, &a.path_of("value")),
        };
        let value = match given.args.iter().find(|g| g.name == name.value) {
            Some(g) => Some(g.value.clone()),
            None => own,
        };
        match value {
            Some(v) => {
                out.values.insert(name.value.clone(), v);
            }
            None => {
                cfg.error(
                    given.at,
                    &given.path,
                    format!(
                        "arg `{}` of {kind_name} `{template_name}` has no value: give it under `args`",
                        name.value
                    ),
                );
                out.unresolved.insert(name.value.clone());
            }
        }
    }
    for g in &given.args {
        if !names.contains(&g.name) {
            cfg.error(
                g.pos,
                &g.path,
                format!(
                    "`{}` is not an arg of {kind_name} `{template_name}` (its args: {})",
                    g.name,
                    names.join(", ")
                ),
            );
        }
    }
    out
}

const METRIC_KEYS: &[&str] = &[
    "name",
    "interval",
    "initialDelay",
    "count",
    "successCondition",
    "failureCondition",
    "failureLimit",
    "inconclusiveLimit",
    "consecutiveErrorLimit",
    "consecutiveSuccessLimit",
    "provider",
];

fn metrics(tr: &mut Reader, spec: &Map<'_>, args: &Args) -> Option<Vec<Metric>> {
    if !spec.has("metrics") {
        tr.missing(spec, "metrics", "the metrics to measure");
        return None;
    }
    let list = tr.seq(spec, "metrics")?;
    if list.value.is_empty() {
        tr.invalid(&list, "no metrics: a template must measure something");
        return None;
    }
    let mut out = Vec::new();
    let mut names = BTreeSet::new();
    let mut ok = true;
    for (i, node) in list.value.iter().enumerate() {
        let path = format!("{}[{i}]", list.path);
        let metric = tr
            .map(node, node.span.start, &path, METRIC_KEYS, &[])
            .and_then(|m| metric(tr, &m, args, &mut names));
        match metric {
            Some(m) => out.push(m),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

fn metric(
    tr: &mut Reader,
    m: &Map<'_>,
    args: &Args,
    names: &mut BTreeSet<String>,
) -> Option<Metric> {
    let name = tr.req_str(m, "name", "the metric's name")?;
    if !names.insert(name.value.clone()) {
        tr.invalid(&name, format!("metric `{}` is named twice", name.value));
        return None;
    }
    let name = name.value;
    let prometheus = provider(tr, m, &name, args);
    let mut used = BTreeSet::new();
    let mut text = |tr: &mut Reader, key: &str| -> Option<Option<String>> {
        if !m.has(key) {
            return Some(None);
        }
        let f = tr.str(m, key)?;
        let text = resolved(tr, &f, args, &mut used)?;
        // Another provider's metric is refused for that; its conditions are its own business.
        if prometheus.is_some()
            && let Err(why) = super::config::check_condition(&text)
        {
            tr.invalid(&f, why);
            return None;
        }
        Some(Some(text))
    };
    let success = text(tr, "successCondition");
    let failure = text(tr, "failureCondition");
    let interval = duration(tr, m, "interval", args, false);
    let initial_delay = duration(tr, m, "initialDelay", args, true);
    let count = int_or_string(tr, m, "count", args, 0..=i64::from(i32::MAX));
    let failure_limit = int_or_string(tr, m, "failureLimit", args, -1..=i64::from(i32::MAX));
    let inconclusive_limit =
        int_or_string(tr, m, "inconclusiveLimit", args, 0..=i64::from(i32::MAX));
    let error_limit = int_or_string(
        tr,
        m,
        "consecutiveErrorLimit",
        args,
        0..=i64::from(i32::MAX),
    );
    let success_limit = int_or_string(
        tr,
        m,
        "consecutiveSuccessLimit",
        args,
        0..=i64::from(i32::MAX),
    );
    // Argo Rollouts' effective count: 1 when neither count nor interval is set; forever with
    // an interval alone; count > 1 needs an interval.
    let count = match (count.flatten().filter(|c| *c > 0), interval.flatten()) {
        (None, None) => Some(1),
        (None, Some(_)) => {
            tr.error(
                m.at,
                &m.path,
                format!(
                    "metric `{name}` has an `interval` but no `count`: Argo Rollouts measures it until the rollout ends, and a gate must end; set `count`"
                ),
            );
            None
        }
        (Some(c), None) if c > 1 => {
            tr.error(
                m.entry("count").map_or(m.at, |e| e.value.span.start),
                &m.path_of("count"),
                format!("metric `{name}`: {c} measurements need an `interval` between them"),
            );
            None
        }
        (Some(c), _) => Some(c),
    };
    if !m.has("successCondition") && !m.has("failureCondition") {
        tr.error(
            m.at,
            &m.path,
            format!(
                "metric `{name}` has neither `successCondition` nor `failureCondition`: every measurement would pass, and a gate check must be able to fail"
            ),
        );
        return None;
    }
    Some(Metric {
        name,
        initial_delay_ms: initial_delay?.unwrap_or(0),
        interval_ms: interval?,
        count: u32::try_from(count?).ok()?,
        success_condition: success?,
        failure_condition: failure?,
        failure_limit: match failure_limit?.unwrap_or(0) {
            -1 => None,
            n => Some(u32::try_from(n).ok()?),
        },
        inconclusive_limit: u32::try_from(inconclusive_limit?.unwrap_or(0)).ok()?,
        consecutive_error_limit: match error_limit? {
            Some(n) => u32::try_from(n).ok()?,
            None => DEFAULT_CONSECUTIVE_ERROR_LIMIT,
        },
        consecutive_success_limit: u32::try_from(success_limit?.unwrap_or(0)).ok()?,
        // An AnalysisTemplate has no such field: the check that imports it says which of its
        // metrics may measure nothing (`promote::config`).
        allow_no_data: false,
        prometheus: prometheus?,
    })
}

fn provider(tr: &mut Reader, m: &Map<'_>, name: &str, args: &Args) -> Option<PrometheusQuery> {
    if !m.has("provider") {
        tr.missing(m, "provider", "the metric's provider (`prometheus`)");
        return None;
    }
    let e = m.entry("provider")?;
    let p = tr.free_map(&e.value, e.key.span.start, &m.path_of("provider"))?;
    let mut refused = false;
    for entry in p.node.as_map() {
        let key = entry.key.as_str().unwrap_or("");
        if key != "prometheus" {
            tr.error(
                entry.key.span.start,
                &p.path_of(key),
                format!(
                    "metric `{name}`: provider `{key}` is not supported: greenlight measures only `prometheus` metrics"
                ),
            );
            refused = true;
        }
    }
    if refused {
        return None;
    }
    let q = tr.req_map(
        &p,
        "prometheus",
        "the Prometheus query",
        &["address", "query", "timeout", "insecure", "headers"],
        PROMETHEUS_REFUSED,
    )?;
    let mut used = BTreeSet::new();
    let address = tr
        .req_str(&q, "address", "the Prometheus server's URL")
        .and_then(|f| {
            let text = resolved(tr, &f, args, &mut used)?;
            let t = Template::new(text)
                .map_err(|e| tr.invalid(&f, e.to_string()))
                .ok()?;
            http_url(t).map_err(|e| tr.invalid(&f, e)).ok()
        });
    let query = tr.req_str(&q, "query", "the PromQL query").and_then(|f| {
        let text = resolved(tr, &f, args, &mut used)?;
        Template::new(text)
            .map_err(|e| tr.invalid(&f, e.to_string()))
            .ok()
    });
    let timeout = match q.entry("timeout") {
        None => Some(DEFAULT_QUERY_TIMEOUT_MS),
        Some(e) if kind(&e.value) == Kind::Int => tr
            .int_value(&e.value, &q.path_of("timeout"), 1..=86_400)
            .map(|s| s * 1000),
        Some(e) => {
            tr.error(
                e.value.span.start,
                &q.path_of("timeout"),
                format!(
                    "expected a whole number of seconds (Argo Rollouts' `timeout`), found {}",
                    describe(&e.value)
                ),
            );
            None
        }
    };
    let insecure = q.has("insecure").then(|| tr.bool(&q, "insecure")).flatten();
    let headers = headers(tr, &q, args, &mut used);
    Some(PrometheusQuery {
        address: address?,
        query: query?,
        timeout_ms: timeout?,
        insecure: insecure.is_some_and(|f| f.value),
        headers: headers?,
    })
}

/// A Go duration field (`30s`, `5m`, `1h30m`), args resolved: `Some(None)` when absent.
fn duration(
    tr: &mut Reader,
    m: &Map<'_>,
    key: &str,
    args: &Args,
    allow_zero: bool,
) -> Option<Option<i64>> {
    let Some(e) = m.entry(key) else {
        return Some(None);
    };
    let path = m.path_of(key);
    if kind(&e.value) != Kind::Str {
        tr.error(
            e.value.span.start,
            &path,
            format!(
                "expected a duration with a unit, as Argo Rollouts reads it (`30s`, `5m`), found {}",
                describe(&e.value)
            ),
        );
        return None;
    }
    let f = tr.str(m, key)?;
    let text = resolved(tr, &f, args, &mut BTreeSet::new())?;
    tr.duration_text(&e.value, &path, &text, allow_zero)
        .map(Some)
}

/// An Argo Rollouts `IntOrString` field (a number, or text such as `"{{args.count}}"` that is
/// one once args are resolved): `Some(None)` when absent.
fn int_or_string(
    tr: &mut Reader,
    m: &Map<'_>,
    key: &str,
    args: &Args,
    range: std::ops::RangeInclusive<i64>,
) -> Option<Option<i64>> {
    let Some(e) = m.entry(key) else {
        return Some(None);
    };
    let path = m.path_of(key);
    match kind(&e.value) {
        Kind::Int => tr.int_value(&e.value, &path, range).map(Some),
        Kind::Str => {
            let f = tr.str(m, key)?;
            let text = resolved(tr, &f, args, &mut BTreeSet::new())?;
            match text.trim().parse::<i64>() {
                Ok(v) => tr.in_range(&e.value, &path, v, range).map(Some),
                Err(_) => {
                    tr.invalid(&f, format!("expected an integer, found `{text}`"));
                    None
                }
            }
        }
        _ => {
            tr.error(
                e.value.span.start,
                &path,
                format!("expected an integer, found {}", describe(&e.value)),
            );
            None
        }
    }
}
