//! `promote.yaml`, the promotion gate's configuration (docs/promote.md; its JSON schema is
//! docs/promote.schema.json): read with spans, checked field by field, and turned into
//! greenlight-core's [`Promotion`]. Owns every rule about the file that needs no repository and
//! no cluster: types, ranges, names, paths (a Helm chart or a kustomization is refused by its
//! name), placeholders and args, the AnalysisTemplates the checks import.
//!
//! Must never: stop at the first problem (every problem in a file is reported, each naming the
//! file, line, column and field), accept a key it does not know, or reorder the checks.

use super::analysis_template::{self, GivenArg, GivenArgs};
use super::reader::{ConfigError, Field, Map, Reader};
use crate::files::FileError;
use greenlight_core::directive::{AppRef, Mode};
use greenlight_gate::config::template::{self, Origin, TemplateError};
use greenlight_gate::config::{
    API_VERSION, Analysis, AnalysisOrigin, Candidate, Check, CheckKind, CommandCheck,
    DEFAULT_CONSECUTIVE_ERROR_LIMIT, DEFAULT_FAILED_RETENTION_MS, DEFAULT_HTTP_STATUS,
    DEFAULT_HTTP_TIMEOUT_MS, DEFAULT_QUERY_TIMEOUT_MS, HttpCheck, KIND, Landing, Live, Metric,
    PrometheusQuery, Promotion, PromotionCommit, PullRequestLanding, Retention, ShortDeadline,
    Template, WatchTrailer, Workload, WorkloadKind,
};
use greenlight_lint::yaml::{Document, Limits, load_stream};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A promotion config or an AnalysisTemplate larger than this is refused, read no further
/// ([`crate::files::YAML_LIMIT`]).
pub const MAX_FILE_BYTES: u64 = crate::files::YAML_LIMIT;

/// Why a promotion config could not be used.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file is missing, unreadable, not a regular file, too large or not UTF-8.
    #[error("cannot read promotion config {file}: {}", error.reason())]
    Read { file: String, error: FileError },
    /// Every problem found, in the order of the file.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<ConfigError>),
}

const TOP: &[&str] = &[
    "apiVersion",
    "kind",
    "live",
    "candidate",
    "checks",
    "retention",
    "promotion",
];
const TOP_RESERVED: &[(&str, &str)] = &[(
    "notify",
    "not read here: notifications are configured in a TOML file's [[notify]] tables, given by --notify (docs/notifications.md); remove it",
)];
const CHECK_KINDS: [&str; 4] = ["http", "command", "prometheus", "analysisTemplate"];

/// Reads and checks a promotion config, and the AnalysisTemplates it imports (named relative
/// to the config's directory).
pub fn load(path: &Path) -> Result<Promotion, LoadError> {
    let file = path.display().to_string();
    let text = read_text(path, "--config").map_err(|error| LoadError::Read {
        file: file.clone(),
        error,
    })?;
    let base = path.parent().unwrap_or(Path::new("")).to_path_buf();
    let mut r = Reader::new(file);
    let promotion = parse(&mut r, &text, &base);
    match promotion {
        Some(p) if r.errors.is_empty() => Ok(p),
        _ => Err(LoadError::Invalid(in_file_order(r.errors))),
    }
}

/// Problems by file (in the order the files were read), then by line and column.
fn in_file_order(mut errors: Vec<ConfigError>) -> Vec<ConfigError> {
    let mut files: Vec<String> = Vec::new();
    for e in &errors {
        if !files.contains(&e.file) {
            files.push(e.file.clone());
        }
    }
    let rank = |f: &str| files.iter().position(|x| x == f).unwrap_or(usize::MAX);
    errors.sort_by_key(|e| (rank(&e.file), e.line, e.column));
    errors
}

/// A file's text, named by `what` (a flag or a key): a regular file of at most
/// [`MAX_FILE_BYTES`], UTF-8, without a byte-order mark ([`crate::files::read_text`]).
pub(crate) fn read_text(path: &Path, what: &str) -> Result<String, FileError> {
    let mut text = crate::files::read_text(path, MAX_FILE_BYTES, what)?;
    if text.starts_with('\u{feff}') {
        text.drain(..3);
    }
    Ok(text)
}

/// The documents of a YAML stream; syntax errors are reported and their documents dropped.
pub(crate) fn documents(r: &mut Reader, text: &str) -> Vec<Document> {
    let mut docs = Vec::new();
    for d in load_stream(text, &Limits::default()) {
        match d {
            Ok(d) => docs.push(d),
            Err(e) => r.error(e.pos, "", format!("not valid YAML: {}", e.message)),
        }
    }
    docs
}

fn parse(r: &mut Reader, text: &str, base: &Path) -> Option<Promotion> {
    let docs = documents(r, text);
    if !r.errors.is_empty() {
        return None;
    }
    let (root, rest) = match docs.split_first() {
        Some((first, rest)) => (&first.root, rest),
        None => {
            r.error(
                greenlight_lint::yaml::Pos { line: 1, col: 1 },
                "",
                format!("empty: a promotion config starts with `apiVersion: {API_VERSION}` and `kind: {KIND}`"),
            );
            return None;
        }
    };
    if let Some(second) = rest.first() {
        r.error(
            greenlight_lint::yaml::Pos {
                line: second.start_line,
                col: 1,
            },
            "",
            "a second YAML document: a promotion config is one document",
        );
        return None;
    }
    // apiVersion and kind first: a file that is not a promotion config gets one error that
    // says so, not one for every key it has.
    if !root.is_map() {
        r.error(
            root.span.start,
            "",
            format!(
                "expected a mapping with `apiVersion: {API_VERSION}` and `kind: {KIND}`, found {}",
                super::reader::describe(root)
            ),
        );
        return None;
    }
    let mut header_ok = true;
    for (key, want) in [("apiVersion", API_VERSION), ("kind", KIND)] {
        match root.entry(key) {
            None => {
                r.error(
                    root.span.start,
                    key,
                    format!("missing (required): `{key}: {want}`"),
                );
                header_ok = false;
            }
            Some(e) if e.value.as_str() != Some(want) => {
                let found = super::reader::describe(&e.value);
                let hint = if key == "apiVersion" {
                    format!(" (this greenlight reads `{API_VERSION}`)")
                } else {
                    String::new()
                };
                r.error(
                    e.value.span.start,
                    key,
                    format!("expected `{want}`, found {found}{hint}"),
                );
                header_ok = false;
            }
            Some(_) => {}
        }
    }
    if !header_ok {
        return None;
    }
    let top = r.map(root, root.span.start, "", TOP, TOP_RESERVED)?;
    let live_parts = live(r, &top);
    let candidate = candidate(r, &top, &live_parts);
    let live = live_parts.live();
    let checks = checks(r, &top, base);
    let retention = retention(r, &top);
    let commit = promotion_commit(r, &top);
    Some(Promotion {
        live: live?,
        candidate: candidate?,
        checks: checks?,
        retention: retention?,
        commit: commit?,
    })
}

/// `res`, or its error recorded against `field`.
fn ok_or_report<T>(r: &mut Reader, field: &Field<'_, String>, res: Result<T, String>) -> Option<T> {
    res.map_err(|e| r.invalid(field, e)).ok()
}

fn app_ref(r: &mut Reader, field: Option<Field<'_, String>>) -> Option<AppRef> {
    let f = field?;
    ok_or_report(r, &f, AppRef::parse(&f.value))
}

/// What could be read of `live`, field by field: the candidate is checked against the parts
/// that are right even when another part of `live` is wrong.
#[derive(Default)]
struct LiveParts {
    app: Option<AppRef>,
    manifest: Option<String>,
    kind: Option<WorkloadKind>,
    name: Option<String>,
    /// `Some(None)`: no namespace given; `None`: unreadable (or no `live`).
    namespace: Option<Option<String>>,
    container: Option<String>,
}

impl LiveParts {
    fn live(self) -> Option<Live> {
        Some(Live {
            app: self.app?,
            manifest: self.manifest?,
            workload: Workload {
                kind: self.kind?,
                name: self.name?,
                namespace: self.namespace?,
                container: self.container?,
            },
        })
    }
}

fn live(r: &mut Reader, top: &Map<'_>) -> LiveParts {
    let mut parts = LiveParts::default();
    let Some(m) = r.req_map(
        top,
        "live",
        "what is promoted: `app`, `manifest` and `workload`",
        &["app", "manifest", "workload"],
        &[],
    ) else {
        return parts;
    };
    let app = r.req_str(
        &m,
        "app",
        "the Argo CD Application that deploys the live manifest (`name` or `namespace/name`)",
    );
    parts.app = app_ref(r, app);
    parts.manifest = r
        .req_str(&m, "manifest", "the live manifest's path in the repository")
        .and_then(|f| ok_or_report(r, &f, live_manifest(&f.value)));
    let Some(w) = r.req_map(
        &m,
        "workload",
        "the workload in the manifest: `kind`, `name` and `container`",
        &["kind", "name", "namespace", "container"],
        &[],
    ) else {
        return parts;
    };
    parts.kind = r
        .req_str(&w, "kind", "`Deployment` or `StatefulSet`")
        .and_then(|f| {
            let res = match f.value.as_str() {
                "Deployment" => Ok(WorkloadKind::Deployment),
                "StatefulSet" => Ok(WorkloadKind::StatefulSet),
                other => Err(format!(
                    "`{other}` is not supported: greenlight promotes a `Deployment` or a `StatefulSet`"
                )),
            };
            ok_or_report(r, &f, res)
        });
    parts.name = r
        .req_str(&w, "name", "the workload's `metadata.name`")
        .and_then(|f| ok_or_report(r, &f, dns_subdomain(&f.value)));
    parts.namespace = match r.str(&w, "namespace") {
        Some(f) => ok_or_report(r, &f, dns_label(&f.value)).map(Some),
        None => (!w.has("namespace")).then_some(None),
    };
    parts.container = r
        .req_str(&w, "container", "the container whose image is promoted")
        .and_then(|f| ok_or_report(r, &f, dns_label(&f.value)));
    parts
}

fn candidate(r: &mut Reader, top: &Map<'_>, live: &LiveParts) -> Option<Candidate> {
    let m = r.req_map(
        top,
        "candidate",
        "where the candidate runs: `app`, `path`, `port`",
        &["app", "path", "namespace", "service", "port", "replicas"],
        &[],
    )?;
    let app_field = r.req_str(
        &m,
        "app",
        "the Argo CD Application that deploys the candidates' directory, with automated prune",
    );
    let app_pos = app_field.as_ref().map(|f| (f.pos(), f.path.clone()));
    let app = app_ref(r, app_field);
    if let (Some(app), Some(live_app), Some((pos, path))) = (&app, &live.app, &app_pos)
        && app.overlaps(live_app)
    {
        r.error(
            *pos,
            path,
            format!(
                "`{app}` is the live Application (live.app): candidates need an Application of their own, which prunes what the gate removes"
            ),
        );
    }
    let path = r
        .req_str(&m, "path", "the directory in the repository candidate manifests are written to")
        .and_then(|f| {
            let dir = ok_or_report(r, &f, candidate_dir(&f.value))?;
            if let Some(manifest) = &live.manifest
                && manifest.starts_with(&format!("{dir}/"))
            {
                r.invalid(
                    &f,
                    format!(
                        "holds the live manifest {manifest}: the candidates' Application prunes this directory, so it must hold candidates only"
                    ),
                );
                return None;
            }
            Some(dir)
        });
    let namespace = if m.has("namespace") {
        r.str(&m, "namespace")
            .and_then(|f| ok_or_report(r, &f, dns_label(&f.value)))
    } else {
        match &live.namespace {
            Some(Some(ns)) => Some(ns.clone()),
            Some(None) => {
                r.missing(
                    &m,
                    "namespace",
                    "the namespace the candidate runs in (required when live.workload.namespace is not set)",
                );
                None
            }
            None => None,
        }
    };
    let service = match r.str(&m, "service") {
        Some(f) => ok_or_report(r, &f, dns_label(&f.value)),
        None if m.has("service") => None,
        None => match live.name.as_ref().map(|name| format!("{name}-candidate")) {
            None => None,
            Some(name) => match dns_label(&name) {
                Ok(name) => Some(name),
                Err(e) => {
                    r.error(
                        m.at,
                        &m.path_of("service"),
                        format!("the default, `{name}`, cannot be used ({e}): set it"),
                    );
                    None
                }
            },
        },
    };
    let port = r.req_int(
        &m,
        "port",
        "the candidate Service's port ({{candidate.port}})",
        1..=65535,
    );
    let replicas = r.int(&m, "replicas", 1..=i64::from(i32::MAX));
    Some(Candidate {
        app: app?,
        path: path?,
        namespace: namespace?,
        service: service?,
        port: u16::try_from(port?.value).ok()?,
        replicas: replicas.map_or(Some(1), |f| u32::try_from(f.value).ok())?,
    })
}

fn checks(r: &mut Reader, top: &Map<'_>, base: &Path) -> Option<Vec<Check>> {
    if !top.has("checks") {
        r.missing(
            top,
            "checks",
            "the checks a candidate must pass, in the order they run",
        );
        return None;
    }
    let items = r.seq(top, "checks")?;
    if items.value.is_empty() {
        r.invalid(&items, "at least one check is required");
        return None;
    }
    let mut out = Vec::new();
    let mut names: BTreeMap<String, (usize, u32)> = BTreeMap::new();
    let mut ok = true;
    for (i, node) in items.value.iter().enumerate() {
        let path = format!("checks[{i}]");
        let mut keys = vec!["name"];
        keys.extend(CHECK_KINDS);
        let Some(m) = r.map(node, node.span.start, &path, &keys, &[]) else {
            ok = false;
            continue;
        };
        let name = r
            .req_str(
                &m,
                "name",
                "the check's name (lowercase letters, digits, '-')",
            )
            .and_then(|f| {
                let name = ok_or_report(r, &f, dns_label(&f.value))?;
                if let Some((j, line)) = names.get(&name) {
                    r.invalid(
                        &f,
                        format!("`{name}` is the name of checks[{j}] (line {line}) already"),
                    );
                    return None;
                }
                names.insert(name.clone(), (i, f.pos().line));
                Some(name)
            });
        let given: Vec<&str> = CHECK_KINDS.into_iter().filter(|k| m.has(k)).collect();
        let kind = match given.as_slice() {
            [] => {
                r.error(
                    m.at,
                    &path,
                    "no check: give one of `http`, `command`, `prometheus`, `analysisTemplate`",
                );
                None
            }
            [one] => check_kind(r, &m, one, base),
            [first, second, ..] => {
                let pos = m.entry(second).map_or(m.at, |e| e.key.span.start);
                r.error(
                    pos,
                    &m.path_of(second),
                    format!("one kind per check: this check is `{first}` already"),
                );
                None
            }
        };
        match (name, kind) {
            (Some(name), Some(kind)) => out.push(Check { name, kind }),
            _ => ok = false,
        }
    }
    ok.then_some(out)
}

fn check_kind(r: &mut Reader, check: &Map<'_>, kind: &str, base: &Path) -> Option<CheckKind> {
    match kind {
        "http" => {
            let m = r.sub_map(
                check,
                "http",
                &["url", "status", "bodyContains", "timeout"],
                &[],
            )?;
            http(r, &m).map(CheckKind::Http)
        }
        "command" => {
            let m = r.sub_map(check, "command", &["argv", "timeout"], &[])?;
            command(r, &m).map(CheckKind::Command)
        }
        "prometheus" => {
            let m = r.sub_map(check, "prometheus", PROMETHEUS_KEYS, PROMETHEUS_REFUSED)?;
            let name = check
                .entry("name")
                .and_then(|e| e.value.as_str())
                .unwrap_or("");
            prometheus(r, &m, name).map(|metric| {
                CheckKind::Analysis(Analysis {
                    origin: AnalysisOrigin::Inline,
                    metrics: vec![metric],
                })
            })
        }
        "analysisTemplate" => {
            let m = r.sub_map(
                check,
                "analysisTemplate",
                &["file", "name", "args", "allowNoData"],
                &[],
            )?;
            imported_template(r, &m, base).map(CheckKind::Analysis)
        }
        other => unreachable!("check kind {other}"),
    }
}

fn http(r: &mut Reader, m: &Map<'_>) -> Option<HttpCheck> {
    let url = r
        .req_str(
            m,
            "url",
            "the URL to GET, e.g. http://{{candidate.service}}.{{candidate.namespace}}.svc:{{candidate.port}}/healthz",
        )
        .and_then(|f| {
            let t = template_field(r, &f, &Args::of_config(BTreeMap::new()), &mut BTreeSet::new())?;
            ok_or_report(r, &f, http_url(t))
        });
    let status = r.int(m, "status", 100..=599);
    let body_contains = match r.str(m, "bodyContains") {
        Some(f) if f.value.is_empty() => {
            r.invalid(
                &f,
                "is empty: every body contains the empty text; remove it",
            );
            None
        }
        Some(f) => Some(Some(f.value)),
        None => Some(None),
    };
    let timeout = r.duration(m, "timeout", false);
    Some(HttpCheck {
        url: url?,
        status: status.map_or(Some(DEFAULT_HTTP_STATUS), |f| u16::try_from(f.value).ok())?,
        body_contains: body_contains?,
        timeout_ms: timeout.map_or(DEFAULT_HTTP_TIMEOUT_MS, |f| f.value),
    })
}

fn command(r: &mut Reader, m: &Map<'_>) -> Option<CommandCheck> {
    let argv = if m.has("argv") {
        r.seq(m, "argv").and_then(|f| {
            if f.value.is_empty() {
                r.invalid(&f, "is empty: give the program and its arguments");
                return None;
            }
            let mut out = Vec::new();
            let mut ok = true;
            for (i, node) in f.value.iter().enumerate() {
                let path = format!("{}[{i}]", f.path);
                let Some(text) = r.string_value(node, &path) else {
                    ok = false;
                    continue;
                };
                if i == 0 && text.trim().is_empty() {
                    r.error(node.span.start, &path, "the program is empty");
                    ok = false;
                    continue;
                }
                match Template::new(text) {
                    Ok(t) => out.push(t),
                    Err(e) => {
                        r.error(node.span.start, &path, e.to_string());
                        ok = false;
                    }
                }
            }
            ok.then_some(out)
        })
    } else {
        r.missing(
            m,
            "argv",
            "the program and its arguments, run without a shell",
        );
        None
    };
    let timeout = r.req_duration(m, "timeout", "how long the command may run", false);
    Some(CommandCheck {
        argv: argv?,
        timeout_ms: timeout?.value,
    })
}

const PROMETHEUS_KEYS: &[&str] = &[
    "address",
    "query",
    "timeout",
    "insecure",
    "headers",
    "args",
    "initialDelay",
    "interval",
    "count",
    "successCondition",
    "failureCondition",
    "failureLimit",
    "inconclusiveLimit",
    "consecutiveErrorLimit",
    "consecutiveSuccessLimit",
    "allowNoData",
];
pub(crate) const PROMETHEUS_REFUSED: &[(&str, &str)] = &[
    (
        "authentication",
        "not supported: greenlight queries Prometheus with `headers` (e.g. an Authorization header) only",
    ),
    (
        "rangeQuery",
        "not supported: greenlight runs instant queries only",
    ),
];

fn prometheus(r: &mut Reader, m: &Map<'_>, check_name: &str) -> Option<Metric> {
    let args = given_args(r, m, "args");
    let args_map = Args::of_config(
        args.iter()
            .map(|a| (a.name.clone(), a.value.clone()))
            .collect(),
    );
    let mut used = BTreeSet::new();
    let address = r
        .req_str(m, "address", "the Prometheus server's URL")
        .and_then(|f| {
            let t = template_field(r, &f, &args_map, &mut used)?;
            ok_or_report(r, &f, http_url(t))
        });
    let query = r
        .req_str(
            m,
            "query",
            "the PromQL query; {{args.NAME}} and {{candidate.*}} are resolved in it",
        )
        .and_then(|f| {
            if f.value.trim().is_empty() {
                r.invalid(&f, "is empty");
                return None;
            }
            template_field(r, &f, &args_map, &mut used)
        });
    let success = condition(r, m, "successCondition", &args_map, &mut used);
    let failure = condition(r, m, "failureCondition", &args_map, &mut used);
    let headers = headers(r, m, &args_map, &mut used);
    // Which args are used is known only when every field that may use one was read.
    let all_read = address.is_some()
        && query.is_some()
        && success.is_some()
        && failure.is_some()
        && headers.is_some();
    for a in args.iter().filter(|_| all_read) {
        if !used.contains(&a.name) {
            r.error(
                a.pos,
                &a.path,
                format!(
                    "`{}` is not used: no `{{{{args.{}}}}}` in this check",
                    a.name, a.name
                ),
            );
        }
    }
    let timeout = r.duration(m, "timeout", false);
    let insecure = r.bool(m, "insecure");
    let count = r.req_int(
        m,
        "count",
        "how many measurements the check takes (a gate must end, so it is required)",
        1..=i64::from(i32::MAX),
    );
    let interval = r.duration(m, "interval", false);
    if let Some(c) = &count
        && c.value > 1
        && interval.is_none()
        && !m.has("interval")
    {
        r.invalid(
            c,
            format!("{} measurements need an `interval` between them", c.value),
        );
    }
    let initial_delay = r.duration(m, "initialDelay", true);
    let failure_limit = r.int(m, "failureLimit", -1..=i64::from(i32::MAX));
    let inconclusive_limit = r.int(m, "inconclusiveLimit", 0..=i64::from(i32::MAX));
    let error_limit = r.int(m, "consecutiveErrorLimit", 0..=i64::from(i32::MAX));
    let success_limit = r.int(m, "consecutiveSuccessLimit", 0..=i64::from(i32::MAX));
    let allow_no_data = r.bool(m, "allowNoData");
    if !m.has("successCondition") && !m.has("failureCondition") {
        r.error(
            m.at,
            &m.path,
            "neither `successCondition` nor `failureCondition`: every measurement would pass, and a gate check must be able to fail",
        );
        return None;
    }
    let count = count?.value;
    Some(Metric {
        name: check_name.to_string(),
        initial_delay_ms: initial_delay.map_or(0, |f| f.value),
        interval_ms: interval.map(|f| f.value),
        count: u32::try_from(count).ok()?,
        success_condition: success?,
        failure_condition: failure?,
        failure_limit: match failure_limit.map_or(0, |f| f.value) {
            -1 => None,
            n => Some(u32::try_from(n).ok()?),
        },
        inconclusive_limit: inconclusive_limit.map_or(Some(0), |f| u32::try_from(f.value).ok())?,
        consecutive_error_limit: error_limit
            .map_or(Some(DEFAULT_CONSECUTIVE_ERROR_LIMIT), |f| {
                u32::try_from(f.value).ok()
            })?,
        consecutive_success_limit: success_limit
            .map_or(Some(0), |f| u32::try_from(f.value).ok())?,
        allow_no_data: allow_no_data.is_some_and(|f| f.value),
        prometheus: PrometheusQuery {
            address: address?,
            query: query?,
            timeout_ms: timeout.map_or(DEFAULT_QUERY_TIMEOUT_MS, |f| f.value),
            insecure: insecure.is_some_and(|f| f.value),
            headers: headers?,
        },
    })
}

/// A condition, args resolved: `Some(None)` when absent, `None` when wrong.
fn condition(
    r: &mut Reader,
    m: &Map<'_>,
    key: &str,
    args: &Args,
    used: &mut BTreeSet<String>,
) -> Option<Option<String>> {
    if !m.has(key) {
        return Some(None);
    }
    let f = r.str(m, key)?;
    if f.value.trim().is_empty() {
        r.invalid(&f, "is empty");
        return None;
    }
    let text = resolved(r, &f, args, used)?;
    if text.contains("{{") {
        r.invalid(
            &f,
            "a condition is an expression over `result`; {{candidate.*}} are not resolved in it",
        );
        return None;
    }
    if let Err(why) = check_condition(&text) {
        r.invalid(&f, why);
        return None;
    }
    Some(Some(text))
}

/// A condition the analysis engine can judge every measurement by: it parses, and it is a
/// boolean for a scalar and for a vector result (`docs/analysis.md`).
pub(crate) fn check_condition(text: &str) -> Result<(), String> {
    let e = greenlight_gate::analysis::Expression::parse(text)
        .map_err(|e| format!("is not a condition greenlight can evaluate: {e}"))?;
    e.check_condition_for_any_result()
        .map_err(|e| format!("is not a condition greenlight can evaluate: {e}"))
}

/// Argo Rollouts' `headers: [{key, value}]`, values resolved.
pub(crate) fn headers(
    r: &mut Reader,
    m: &Map<'_>,
    args: &Args,
    used: &mut BTreeSet<String>,
) -> Option<Vec<(String, Template)>> {
    if !m.has("headers") {
        return Some(Vec::new());
    }
    let items = r.seq(m, "headers")?;
    let mut out = Vec::new();
    let mut ok = true;
    for (i, node) in items.value.iter().enumerate() {
        let path = format!("{}[{i}]", items.path);
        let Some(h) = r.map(node, node.span.start, &path, &["key", "value"], &[]) else {
            ok = false;
            continue;
        };
        let key = r.req_str(&h, "key", "the header's name");
        let value = r.req_str(&h, "value", "the header's value").and_then(|f| {
            let text = resolved(r, &f, args, used)?;
            Template::new(text)
                .map_err(|e| r.invalid(&f, e.to_string()))
                .ok()
        });
        match (key, value) {
            (Some(k), Some(v)) if !k.value.is_empty() => out.push((k.value, v)),
            (Some(k), Some(_)) => {
                r.invalid(&k, "is empty");
                ok = false;
            }
            _ => ok = false,
        }
    }
    ok.then_some(out)
}

/// The args a text field may use, and where it was written.
pub(crate) struct Args {
    pub values: BTreeMap<String, String>,
    /// Declared args whose value is missing or refused (reported already): a field that uses
    /// one is skipped without a second error.
    pub unresolved: BTreeSet<String>,
    pub origin: Origin,
}

impl Args {
    pub fn of_config(values: BTreeMap<String, String>) -> Args {
        Args {
            values,
            unresolved: BTreeSet::new(),
            origin: Origin::PromotionConfig,
        }
    }
}

/// `text` with `{{args.NAME}}` resolved, the args used noted; a bad placeholder is reported.
pub(crate) fn resolved(
    r: &mut Reader,
    f: &Field<'_, String>,
    args: &Args,
    used: &mut BTreeSet<String>,
) -> Option<String> {
    match template::resolve_args(&f.value, &args.values, args.origin) {
        Ok((text, names)) => {
            used.extend(names);
            Some(text)
        }
        Err(TemplateError::MissingArg(name)) if args.unresolved.contains(&name) => None,
        Err(e @ TemplateError::MissingArg(_)) => {
            let hint = match args.origin {
                Origin::PromotionConfig => "add it under `args`",
                Origin::AnalysisTemplate => "declare it under `spec.args`",
            };
            r.invalid(f, format!("{e}: {hint}"));
            None
        }
        Err(e) => {
            r.invalid(f, e.to_string());
            None
        }
    }
}

/// A text field of the promotion config as a [`Template`], args resolved.
fn template_field(
    r: &mut Reader,
    f: &Field<'_, String>,
    args: &Args,
    used: &mut BTreeSet<String>,
) -> Option<Template> {
    let text = resolved(r, f, args, used)?;
    Template::new(text)
        .map_err(|e| r.invalid(f, e.to_string()))
        .ok()
}

/// `args:` in the promotion config: a mapping of names to values, which may hold
/// `{{candidate.*}}` placeholders (resolved when the candidate exists).
fn given_args(r: &mut Reader, m: &Map<'_>, key: &str) -> Vec<GivenArg> {
    let Some(e) = m.entry(key) else {
        return Vec::new();
    };
    let path = m.path_of(key);
    let Some(am) = r.free_map(&e.value, e.key.span.start, &path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in am.node.as_map() {
        let name = entry.key.as_str().unwrap_or("").to_string();
        let arg_path = format!("{path}.{name}");
        if !valid_arg_name(&name) {
            r.error(
                entry.key.span.start,
                &arg_path,
                "an arg name is letters, digits, '_', '-' and '.'",
            );
            continue;
        }
        let Some(value) = r.scalar_value(&entry.value, &arg_path) else {
            continue;
        };
        if let Err(e) = Template::new(value.clone()) {
            r.error(entry.value.span.start, &arg_path, e.to_string());
            continue;
        }
        out.push(GivenArg {
            name,
            value,
            pos: entry.key.span.start,
            path: arg_path,
        });
    }
    out
}

fn valid_arg_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
}

fn imported_template(r: &mut Reader, m: &Map<'_>, base: &Path) -> Option<Analysis> {
    let file = r.req_str(
        m,
        "file",
        "the Argo Rollouts AnalysisTemplate file, relative to this config's directory",
    )?;
    let selector = r.str(m, "name").map(|f| f.value);
    let args = given_args(r, m, "args");
    let path: PathBuf = base.join(&file.value);
    let shown = path.display().to_string();
    let text = match read_text(&path, "analysisTemplate.file") {
        Ok(t) => t,
        Err(e) => {
            r.invalid(&file, format!("cannot read {shown}: {}", e.reason()));
            return None;
        }
    };
    let mut tr = Reader::new(shown.clone());
    let given = GivenArgs {
        args,
        at: m.at,
        path: m.path_of("args"),
    };
    let imported = analysis_template::import(r, &mut tr, &file, &text, selector.as_deref(), &given);
    let template_errors = tr.errors.len();
    r.errors.append(&mut tr.errors);
    if template_errors > 0 {
        r.invalid(
            &file,
            format!(
                "{shown} cannot be used as it is: {template_errors} problem(s) in it, each reported with its line"
            ),
        );
        return None;
    }
    let mut t = imported?;
    allow_no_data(r, m, &mut t.metrics)?;
    Some(Analysis {
        origin: AnalysisOrigin::Template {
            file: file.value,
            kind: t.kind,
            name: t.name,
        },
        metrics: t.metrics,
    })
}

/// `analysisTemplate.allowNoData`: the names of the template's metrics that may measure
/// nothing (`docs/promote.md`). Named one by one, never all at once, so a metric added to the
/// template later is never a pass on no data by accident; a name that is no metric of the
/// template, or is given twice, is an error.
fn allow_no_data(r: &mut Reader, m: &Map<'_>, metrics: &mut [Metric]) -> Option<()> {
    let Some(list) = r.seq(m, "allowNoData") else {
        return (!m.has("allowNoData")).then_some(());
    };
    let mut ok = true;
    let mut seen = BTreeSet::new();
    for (i, item) in list.value.iter().enumerate() {
        let path = format!("{}[{i}]", list.path);
        let Some(name) = r.string_value(item, &path) else {
            ok = false;
            continue;
        };
        let Some(metric) = metrics.iter_mut().find(|x| x.name == name) else {
            let names: Vec<String> = metrics.iter().map(|x| format!("`{}`", x.name)).collect();
            r.error(
                item.span.start,
                &path,
                format!(
                    "`{name}` is no metric of the template (it has {})",
                    names.join(", ")
                ),
            );
            ok = false;
            continue;
        };
        if !seen.insert(name.clone()) {
            r.error(item.span.start, &path, format!("`{name}` is given twice"));
            ok = false;
            continue;
        }
        metric.allow_no_data = true;
    }
    ok.then_some(())
}

fn retention(r: &mut Reader, top: &Map<'_>) -> Option<Retention> {
    let Some(m) = r.sub_map(top, "retention", &["failed"], &[]) else {
        return (!top.has("retention")).then_some(Retention {
            failed_ms: DEFAULT_FAILED_RETENTION_MS,
        });
    };
    let failed = r.duration(&m, "failed", true);
    if m.has("failed") && failed.is_none() {
        return None;
    }
    Some(Retention {
        failed_ms: failed.map_or(DEFAULT_FAILED_RETENTION_MS, |f| f.value),
    })
}

fn promotion_commit(r: &mut Reader, top: &Map<'_>) -> Option<PromotionCommit> {
    let Some(m) = r.sub_map(
        top,
        "promotion",
        &["watch", "via", "forge", "autoMerge", "forgeUrl", "project"],
        &[(
            "pr",
            "not a key: a promotion by pull request is `via: pull-request` with `forge` and `autoMerge` (docs/promote.md#pull-request)",
        )],
    ) else {
        return (!top.has("promotion")).then(|| PromotionCommit {
            watch: WatchTrailer::default(),
            landing: Landing::Push,
        });
    };
    let landing = landing(r, &m);
    let Some(w) = r.sub_map(
        &m,
        "watch",
        &["mode", "deadline", "trailerKey", "shortDeadline"],
        &[],
    ) else {
        return (!m.has("watch")).then_some(PromotionCommit {
            watch: WatchTrailer::default(),
            landing: landing?,
        });
    };
    let defaults = WatchTrailer::default();
    let mode = match r.str(&w, "mode") {
        None => Some(defaults.mode),
        Some(f) => {
            let res = match f.value.as_str() {
                "shadow" => Ok(Mode::Shadow),
                "arm" => Ok(Mode::Arm),
                other => Err(format!("`{other}` is not `shadow` or `arm`")),
            };
            ok_or_report(r, &f, res)
        }
    };
    let deadline = match r.duration(&w, "deadline", false) {
        Some(f) => Some(f.value),
        None => (!w.has("deadline")).then_some(defaults.deadline_ms),
    };
    let key = match r.str(&w, "trailerKey") {
        None => Some(defaults.key.clone()),
        Some(f) => {
            let bad = f.value.is_empty() || f.value.chars().any(|c| c.is_whitespace() || c == ':');
            if bad {
                r.invalid(&f, "a trailer key is one word without spaces or colons (the watchdog's --trailer-key)");
                None
            } else if f.value.to_ascii_lowercase().starts_with("greenlight-") {
                r.invalid(
                    &f,
                    "`Greenlight-…` trailers are greenlight's own (`Greenlight-Judged-By`, `Greenlight-Revert-Of`, …), never a watch directive; the promotion's watch trailer is the watchdog's --trailer-key, `Nav-Watchdog` by default",
                );
                None
            } else {
                Some(f.value)
            }
        }
    };
    let short_deadline = match r.str(&w, "shortDeadline") {
        None => Some(ShortDeadline::Raise),
        Some(f) => {
            let res = match f.value.as_str() {
                "raise" => Ok(ShortDeadline::Raise),
                "refuse" => Ok(ShortDeadline::Refuse),
                other => Err(format!("`{other}` is not `raise` or `refuse`")),
            };
            ok_or_report(r, &f, res)
        }
    };
    Some(PromotionCommit {
        watch: WatchTrailer {
            key: key?,
            mode: mode?,
            deadline_ms: deadline?,
            short_deadline: short_deadline?,
        },
        landing: landing?,
    })
}

/// `promotion.via` and, for `pull-request`, the forge's keys; those keys without
/// `via: pull-request` are refused (they would be silently ignored otherwise).
fn landing(r: &mut Reader, m: &Map<'_>) -> Option<Landing> {
    let via = r.str(m, "via");
    let forge = r.str(m, "forge");
    let auto_merge = r.bool(m, "autoMerge");
    let api_url = r.str(m, "forgeUrl");
    let project = r.str(m, "project");
    let pull_request = match &via {
        None => false,
        Some(f) => match f.value.as_str() {
            "push" => false,
            "pull-request" => true,
            other => {
                r.invalid(
                    f,
                    format!("`{other}` is not `push` (the default) or `pull-request`"),
                );
                return None;
            }
        },
    };
    if !pull_request {
        let mut ok = true;
        for (key, present) in [
            ("forge", forge.is_some()),
            ("autoMerge", auto_merge.is_some()),
            ("forgeUrl", api_url.is_some()),
            ("project", project.is_some()),
        ] {
            if present {
                r.error(
                    m.entry(key).map_or(m.at, |e| e.value.span.start),
                    &m.path_of(key),
                    "only with `via: pull-request` (the promotion is pushed to the branch)",
                );
                ok = false;
            }
        }
        return ok.then_some(Landing::Push);
    }
    let Some(forge) = forge else {
        r.missing(
            m,
            "forge",
            "the forge that takes the pull request: github, gitlab or gitea",
        );
        return None;
    };
    if !matches!(forge.value.as_str(), "github" | "gitlab" | "gitea") {
        let v = forge.value.clone();
        r.invalid(&forge, format!("`{v}` is not github, gitlab or gitea"));
        return None;
    }
    if let Some(u) = &api_url {
        let ok = (u.value.starts_with("https://") || u.value.starts_with("http://"))
            && !u.value.contains('@')
            && !u.value.contains('?');
        if !ok {
            r.invalid(
                u,
                "an http:// or https:// URL of the forge's API, without credentials or query",
            );
            return None;
        }
    }
    if let Some(p) = &project {
        let parts: Vec<&str> = p.value.split('/').collect();
        if parts.len() < 2 || parts.iter().any(|s| s.is_empty() || s.contains(' ')) {
            let v = p.value.clone();
            r.invalid(p, format!("`{v}` is not `owner/name`"));
            return None;
        }
    }
    Some(Landing::PullRequest(PullRequestLanding {
        forge: forge.value,
        auto_merge: auto_merge.is_some_and(|f| f.value),
        api_url: api_url.map(|f| f.value),
        project: project.map(|f| f.value),
    }))
}

/// A path inside the repository, `/`-separated and relative to its root, normalized
/// (`./a//b/` is `a/b`). The error says what is wrong with it.
fn repo_path(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err("is empty".into());
    }
    if text.starts_with('/') {
        return Err(format!(
            "`{text}` is absolute: give the path inside the repository, relative to its root"
        ));
    }
    if text.contains('\\') {
        return Err(format!("`{text}`: separate directories with `/`"));
    }
    let mut parts = Vec::new();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(format!("`{text}` leaves the repository (`..`)")),
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

/// The live manifest: one plain-YAML file. A Helm chart or a kustomization is refused by its
/// name here; what Argo CD renders the path with is checked against the Application at run
/// time.
fn live_manifest(text: &str) -> Result<String, String> {
    let path = repo_path(text)?;
    let base = path.rsplit('/').next().unwrap_or("");
    if base.is_empty() || text.ends_with('/') {
        return Err(format!(
            "`{text}` is a directory: name the plain-YAML manifest file that holds the workload"
        ));
    }
    if matches!(base, "Chart.yaml" | "Chart.yml") {
        return Err(format!(
            "`{text}` is a Helm chart: greenlight promotes an image in a plain-YAML manifest that Argo CD applies as it is, not a chart"
        ));
    }
    if matches!(
        base,
        "kustomization.yaml" | "kustomization.yml" | "Kustomization"
    ) {
        return Err(format!(
            "`{text}` is a kustomization: greenlight promotes an image in a plain-YAML manifest that Argo CD applies as it is, not a kustomize overlay"
        ));
    }
    if !(base.ends_with(".yaml") || base.ends_with(".yml")) {
        return Err(format!(
            "`{text}` is not a .yaml or .yml file (a directory?): name the plain-YAML manifest file that holds the workload"
        ));
    }
    Ok(path)
}

/// The candidates' directory: not the repository's root, not a file.
fn candidate_dir(text: &str) -> Result<String, String> {
    let path = repo_path(text)?;
    if path.is_empty() {
        return Err(format!(
            "`{text}` is the repository's root: candidates need a directory of their own, which their Application prunes"
        ));
    }
    if path.ends_with(".yaml") || path.ends_with(".yml") {
        return Err(format!(
            "`{text}` is a file: name the directory candidate manifests are written to"
        ));
    }
    Ok(path)
}

/// A URL greenlight may request: `http://` or `https://` (after the placeholders).
pub(crate) fn http_url(t: Template) -> Result<Template, String> {
    let lower = t.as_str().to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        Ok(t)
    } else {
        Err(format!("`{t}` is not an http:// or https:// URL"))
    }
}

/// An RFC 1123 label (a namespace, a Service, a container, a check).
fn dns_label(text: &str) -> Result<String, String> {
    let ok = !text.is_empty()
        && text.len() <= 63
        && text
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-');
    if ok {
        Ok(text.to_string())
    } else {
        Err(format!(
            "`{text}` is not a valid name: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"
        ))
    }
}

/// An RFC 1123 subdomain (a Deployment's or StatefulSet's name).
fn dns_subdomain(text: &str) -> Result<String, String> {
    let ok = !text.is_empty() && text.len() <= 253 && text.split('.').all(|l| dns_label(l).is_ok());
    if ok {
        Ok(text.to_string())
    } else {
        Err(format!(
            "`{text}` is not a valid Kubernetes name: lowercase letters, digits, '-' and '.'"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_paths_are_relative_normalized_and_inside() {
        assert_eq!(repo_path("./deploy//prod/").unwrap(), "deploy/prod");
        assert!(repo_path("/etc/x.yaml").unwrap_err().contains("absolute"));
        assert!(repo_path("a/../../x.yaml").unwrap_err().contains("leaves"));
        assert_eq!(live_manifest("deploy/web.yml").unwrap(), "deploy/web.yml");
        assert!(
            live_manifest("charts/web/Chart.yaml")
                .unwrap_err()
                .contains("Helm chart")
        );
        assert!(
            live_manifest("overlays/prod/kustomization.yaml")
                .unwrap_err()
                .contains("kustomization")
        );
        assert!(
            live_manifest("deploy/prod/")
                .unwrap_err()
                .contains("directory")
        );
        assert!(
            live_manifest("deploy/prod")
                .unwrap_err()
                .contains("not a .yaml")
        );
        assert!(candidate_dir(".").unwrap_err().contains("root"));
        assert!(candidate_dir("c/web.yaml").unwrap_err().contains("a file"));
    }

    #[test]
    fn kubernetes_names() {
        assert!(dns_label("web-1").is_ok());
        assert!(dns_label("Web").is_err());
        assert!(dns_label("-web").is_err());
        assert!(dns_label(&"a".repeat(64)).is_err());
        assert!(dns_subdomain("web.v2").is_ok());
        assert!(dns_subdomain("web..v2").is_err());
    }
}
