//! The rule registry: every rule is data (ID, name, default severity, documentation in fixed
//! sections) plus one check function, listed once in [`RULES`]. `greenlight rules`,
//! `greenlight explain`, the SARIF rule metadata, the crate README's rule table and
//! `docs/lint-rules.md` are all generated from this table.
//! Each rule declares the document kind it checks by its [`Check`]: Kubernetes objects, or
//! pipelines (GitHub Actions workflows, GitLab CI files, shell scripts).
//! Must never: read files or format output; a check only looks at objects or pipelines and
//! emits findings (a file a pipeline applies is read through [`Settings::read_file`], the
//! engine's seam).

mod argocd;
mod hpa;
mod image;
mod pdb;
pub(crate) mod pipeline;
mod probes;
mod strategy;
mod termination;

use crate::diagnostic::Severity;
use crate::kind::Kind;
use crate::object::{Object, Workload};
use crate::pipeline::Pipeline;
use crate::yaml::{Node, Span};

pub use image::TagPolicy;

/// How a rule looks at the manifests.
#[derive(Clone, Copy)]
pub enum Check {
    /// Emitted by the engine itself (syntax errors), not by a check.
    Engine,
    /// One workload at a time, through the normalized pod-template view.
    Workload(fn(&Workload, &mut Emit)),
    /// One object at a time.
    Object(fn(&Object, &mut Emit)),
    /// The whole set of objects (cross-object rules: a PDB against what it selects).
    Set(fn(&[Object], &mut Emit)),
    /// One pipeline at a time: a GitHub Actions workflow, a GitLab CI file or a shell script,
    /// as the scripts it runs.
    Pipeline(fn(&Pipeline, &mut Emit)),
}

impl Check {
    /// The document kinds a check reads.
    pub fn kinds(&self) -> &'static [Kind] {
        match self {
            Check::Engine => &[Kind::Manifests, Kind::GithubWorkflow, Kind::GitlabCi],
            Check::Workload(_) | Check::Object(_) | Check::Set(_) => &[Kind::Manifests],
            Check::Pipeline(_) => &[Kind::GithubWorkflow, Kind::GitlabCi, Kind::ShellScript],
        }
    }
}

/// A rule's documentation, in the fixed sections `greenlight explain` prints.
pub struct Docs {
    pub what: &'static str,
    pub why: &'static str,
    pub example: &'static str,
    pub fix: &'static str,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id)
    }
}

pub struct Rule {
    /// `GL` + three digits; stable forever.
    pub id: &'static str,
    /// kebab-case, stable.
    pub name: &'static str,
    pub severity: Severity,
    pub default_enabled: bool,
    /// One line, shown in `greenlight rules` and as SARIF `shortDescription`.
    pub summary: &'static str,
    pub docs: Docs,
    pub check: Check,
}

pub const INVALID_YAML: Rule = Rule {
    id: "GL000",
    name: "invalid-yaml",
    severity: Severity::Error,
    default_enabled: true,
    summary: "A file that should hold manifests cannot be read as YAML",
    docs: Docs {
        what: "Reports a YAML syntax error, a document over the alias-expansion or nesting budget, \
               or a file that is not UTF-8, at the location where reading stopped. The rest of the \
               file (from the next `---`) and every other file are still linted.",
        why: "A manifest that does not parse is never applied: Argo CD reports a ComparisonError and \
              the change you meant to ship is not shipped. Budgets keep a hostile file (an alias \
              bomb, thousands of nested brackets) from exhausting memory or stack.",
        example: "spec:\n  replicas: [3\n",
        fix: "Fix the syntax at the reported line. A Helm chart's `templates/` cannot be linted \
              unrendered: lint `helm template . | greenlight lint -` instead.",
    },
    check: Check::Engine,
};

/// The rule reference in the repository, generated from [`RULES`]; each rule has a section
/// there under [`Rule::anchor`].
pub const REFERENCE_DOC: &str = "docs/lint-rules.md";

impl Rule {
    /// The rule's anchor in [`REFERENCE_DOC`]: its ID in lower case (`gl101`).
    pub fn anchor(&self) -> String {
        self.id.to_ascii_lowercase()
    }

    /// Where the rule is documented: `docs/lint-rules.md#gl101`.
    pub fn reference(&self) -> String {
        format!("{REFERENCE_DOC}#{}", self.anchor())
    }
}

/// Every rule, in ID order.
pub static RULES: &[Rule] = &[
    INVALID_YAML,
    image::MUTABLE_TAG,
    image::NOT_PINNED,
    image::INVALID_REFERENCE,
    termination::PRESTOP_EXCEEDS_GRACE,
    termination::PRESTOP_STOPGAP,
    probes::INITIAL_DELAY,
    probes::SAME_ENDPOINT,
    strategy::IMPLICIT,
    strategy::CANNOT_PROGRESS,
    pdb::BLOCKS_DRAIN,
    hpa::TARGET_SETS_REPLICAS,
    argocd::AUTOMATED_PRUNE,
    argocd::IMAGE_UPDATER_ARGOCD,
    pipeline::DEPLOYS_MUTABLE_TAG,
    pipeline::APPLIES_MUTABLE_MANIFEST,
    pipeline::ROLLOUT_STATUS_ONLY,
    pipeline::GREP_TAG,
];

/// A rule by ID (case-insensitive) or by name.
pub fn find(id_or_name: &str) -> Option<&'static Rule> {
    RULES
        .iter()
        .find(|r| r.id.eq_ignore_ascii_case(id_or_name) || r.name == id_or_name)
}

/// Thresholds and lists the rules read; filled from defaults and `.greenlight.toml`.
#[derive(Debug, Clone)]
pub struct Settings {
    /// GL201: `initialDelaySeconds` at or above this, with no startupProbe, is flagged.
    pub initial_delay_seconds: i64,
    /// GL301: an implicit strategy on a Deployment with at most this many replicas is `info`,
    /// with more a `warning`.
    pub strategy_max_replicas: i64,
    /// GL001: which tags count as mutable.
    pub tag_policy: TagPolicy,
    /// The engine's seam for the manifests a pipeline applies (`kubectl apply -f PATH`): the
    /// file at PATH, or the `*.yaml`, `*.yml` and `*.json` files in the directory (below it
    /// too when the flag says recursive), as (path, text); what cannot be read is left out.
    pub read_manifests: fn(&std::path::Path, bool) -> Vec<(String, String)>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            initial_delay_seconds: 60,
            strategy_max_replicas: 3,
            tag_policy: TagPolicy::default(),
            read_manifests: read_manifests_on_disk,
        }
    }
}

/// [`Settings::read_manifests`] on the filesystem: UTF-8 files within
/// [`crate::MAX_FILE_BYTES`], symlinked directories not followed, at most 1 000 files.
pub fn read_manifests_on_disk(path: &std::path::Path, recursive: bool) -> Vec<(String, String)> {
    fn read(p: &std::path::Path) -> Option<String> {
        greenlight_files::read_text(p, crate::MAX_FILE_BYTES, "a manifest").ok()
    }
    let show = |p: &std::path::Path| p.to_string_lossy().replace('\\', "/");
    let mut out = Vec::new();
    if path.is_file() {
        out.extend(read(path).map(|t| (show(path), t)));
        return out;
    }
    let mut dirs = vec![path.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = rd.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                if recursive {
                    dirs.push(p);
                }
            } else if matches!(
                p.extension().and_then(|x| x.to_str()),
                Some("yaml" | "yml" | "json")
            ) && out.len() < 1000
            {
                out.extend(read(&p).map(|t| (show(&p), t)));
            }
        }
    }
    out
}

/// A finding as a check reports it: spans into the object's source, not yet a user-facing
/// location (the engine maps Helm sections and applies suppression).
#[derive(Debug, Clone)]
pub struct Finding {
    pub rule: &'static Rule,
    pub source: usize,
    pub span: Span,
    pub object: crate::diagnostic::ObjectRef,
    /// The `greenlight.dev/ignore` annotations that apply: the object's and its pod
    /// templates' ([`Object::ignore_annotations`]).
    pub ignore_annotations: Vec<String>,
    pub field: String,
    pub message: String,
    pub fix: Option<String>,
    pub related: Vec<(usize, Span, String)>,
    /// Related locations in files that are not inputs of the run (a manifest a pipeline
    /// applies), already placed.
    pub related_elsewhere: Vec<crate::diagnostic::Related>,
    /// The source file of a `kustomize build` object (its origin annotation's `path`).
    pub origin: Option<String>,
    /// Mechanical fixes, each with its rank (see [`crate::fix::TextEdit::rank`]).
    pub edits: Vec<(crate::fix::Edit, i64)>,
    /// This finding's severity when the rule grades its findings; `None`: the rule's.
    pub severity: Option<Severity>,
}

/// Where checks put their findings.
pub struct Emit<'s> {
    pub settings: &'s Settings,
    pub(crate) rule: &'static Rule,
    pub(crate) findings: Vec<Finding>,
}

impl<'s> Emit<'s> {
    pub(crate) fn new(settings: &'s Settings, rule: &'static Rule) -> Self {
        Emit {
            settings,
            rule,
            findings: Vec::new(),
        }
    }

    /// Report a finding on `obj` at `span`; `field` is relative to the object.
    pub fn at(&mut self, obj: &Object, span: Span, field: &str, message: String) -> &mut Finding {
        let ignore_annotations = obj
            .ignore_annotations(field)
            .into_iter()
            .map(str::to_string)
            .collect();
        let origin = obj
            .annotation(crate::kustomize::ORIGIN_ANNOTATION)
            .and_then(Node::as_str)
            .and_then(crate::kustomize::origin_path);
        self.findings.push(Finding {
            rule: self.rule,
            source: obj.source,
            span,
            object: obj.reference(),
            ignore_annotations,
            field: obj.path(field),
            message,
            fix: None,
            related: Vec::new(),
            related_elsewhere: Vec::new(),
            origin,
            edits: Vec::new(),
            severity: None,
        });
        self.findings.last_mut().expect("just pushed")
    }

    /// Report a finding in a pipeline file at `span`; `field` is the YAML path (empty in a
    /// script file). Pipeline findings name no Kubernetes object.
    pub fn in_file(
        &mut self,
        source: usize,
        span: Span,
        field: &str,
        message: String,
    ) -> &mut Finding {
        self.findings.push(Finding {
            rule: self.rule,
            source,
            span,
            object: crate::diagnostic::ObjectRef {
                api_version: String::new(),
                kind: String::new(),
                namespace: None,
                name: None,
            },
            ignore_annotations: Vec::new(),
            field: field.to_string(),
            message,
            fix: None,
            related: Vec::new(),
            related_elsewhere: Vec::new(),
            origin: None,
            edits: Vec::new(),
            severity: None,
        });
        self.findings.last_mut().expect("just pushed")
    }
}

impl Finding {
    /// Grade this finding apart from the rule's default severity (a configured
    /// `[lint.severity]` still wins).
    pub fn severity(&mut self, severity: Severity) -> &mut Self {
        self.severity = Some(severity);
        self
    }

    pub fn fix(&mut self, fix: impl Into<String>) -> &mut Self {
        self.fix = Some(fix.into());
        self
    }

    /// A mechanical fix `--fix` may apply; of two for one place the higher `rank` wins.
    pub fn edit(&mut self, edit: crate::fix::Edit, rank: i64) -> &mut Self {
        self.edits.push((edit, rank));
        self
    }

    pub fn related(&mut self, obj: &Object, span: Span, message: impl Into<String>) -> &mut Self {
        self.related.push((obj.source, span, message.into()));
        self
    }

    /// A related location in an input of the run, by its index.
    pub fn related_in(
        &mut self,
        source: usize,
        span: Span,
        message: impl Into<String>,
    ) -> &mut Self {
        self.related.push((source, span, message.into()));
        self
    }

    /// A related location in a file that is not an input of the run.
    pub fn related_elsewhere(
        &mut self,
        location: crate::diagnostic::Location,
        message: impl Into<String>,
    ) -> &mut Self {
        self.related_elsewhere.push(crate::diagnostic::Related {
            location,
            message: message.into(),
        });
        self
    }
}

/// The span of a mapping entry from its key to the end of its value when that is on the same
/// line (so the marker underlines `key: value`), else the key alone.
pub(crate) fn entry_span(node: &Node, key: &str) -> Option<Span> {
    let e = node.entry(key)?;
    Some(key_value_span(&e.key, &e.value))
}

pub(crate) fn key_value_span(key: &Node, value: &Node) -> Span {
    let end = if value.span.end.line == key.span.start.line {
        value.span.end
    } else {
        key.span.end
    };
    Span {
        start: key.span.start,
        end,
    }
}

/// The span to use for an absent field: the key of the mapping that should hold it, else the
/// start of the object.
pub(crate) fn holder_span(obj: &Object, keys: &[&str]) -> Span {
    let mut node = obj.root;
    let mut span = obj
        .root
        .entry("kind")
        .map_or(obj.root.span, |e| key_value_span(&e.key, &e.value));
    for k in keys {
        let Some(e) = node.entry(k) else { break };
        span = e.key.span;
        node = &e.value;
    }
    span
}

/// A duration in seconds as `sleep` reads it: `45`, `1.5`, `5s`, `1m`, `2h`, `1d`.
pub(crate) fn parse_sleep_duration(s: &str) -> Option<f64> {
    let s = s.trim().trim_matches(['"', '\'']);
    // GNU coreutils' `sleep infinity` (a common "keep the pod around" idiom) never returns.
    if s == "infinity" || s == "inf" {
        return Some(f64::INFINITY);
    }
    let (num, mult) = match s.char_indices().last()? {
        (i, 's') => (&s[..i], 1.0),
        (i, 'm') => (&s[..i], 60.0),
        (i, 'h') => (&s[..i], 3600.0),
        (i, 'd') => (&s[..i], 86400.0),
        _ => (s, 1.0),
    };
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let v: f64 = num.parse().ok()?;
    v.is_finite().then_some(v * mult)
}

/// Seconds shown without a trailing `.0`.
pub(crate) fn secs(v: f64) -> String {
    if v.is_infinite() {
        "forever".to_string()
    } else if v.fract() == 0.0 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// A Kubernetes IntOrString as written: a count or a percentage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum IntOrPercent {
    Int(i64),
    Percent(i64),
}

pub(crate) fn int_or_percent(node: &Node) -> Option<IntOrPercent> {
    let t = node.as_str()?.trim();
    match t.strip_suffix('%') {
        Some(p) => p.trim().parse().ok().map(IntOrPercent::Percent),
        None => t.parse().ok().map(IntOrPercent::Int),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_sorted_and_documented() {
        for pair in RULES.windows(2) {
            assert!(
                pair[0].id < pair[1].id,
                "{} before {}",
                pair[0].id,
                pair[1].id
            );
        }
        for r in RULES {
            assert!(r.id.len() == 5 && r.id.starts_with("GL"), "{}", r.id);
            assert!(
                r.name.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
                "{}",
                r.name
            );
            for s in [
                r.summary,
                r.docs.what,
                r.docs.why,
                r.docs.example,
                r.docs.fix,
            ] {
                assert!(!s.trim().is_empty(), "{} has an empty doc section", r.id);
            }
        }
    }

    #[test]
    fn sleep_durations() {
        assert_eq!(parse_sleep_duration("45"), Some(45.0));
        assert_eq!(parse_sleep_duration("5s"), Some(5.0));
        assert_eq!(parse_sleep_duration("1m"), Some(60.0));
        assert_eq!(parse_sleep_duration("1.5"), Some(1.5));
        assert_eq!(parse_sleep_duration("$DELAY"), None);
        assert_eq!(parse_sleep_duration("infinity"), Some(f64::INFINITY));
        assert_eq!(parse_sleep_duration("infinite"), None);
    }
}
