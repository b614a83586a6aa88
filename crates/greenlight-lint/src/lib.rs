//! Rollout-safety lint for Kubernetes manifests.
//!
//! Owns the pipeline: inputs (files, directories, stdin) → spanned YAML documents → objects →
//! rules → diagnostics with file, line, column and field path, after Helm `# Source:` mapping
//! (to the chart's template lines, `helm`) and suppression. Must never: exit the process or print (the binary does), or let one bad
//! file stop the run.
//!
//! ```no_run
//! use greenlight_lint::{Options, Source, lint};
//! let src = Source::new("deploy.yaml".into(), std::fs::read_to_string("deploy.yaml").unwrap());
//! let report = lint(&[src], Vec::new(), &Options::default());
//! for d in &report.diagnostics { println!("{} {}", d.location.display(), d.message) }
//! ```

pub mod config;
pub mod diagnostic;
pub mod edit;
pub mod embedded;
pub mod fix;
pub mod helm;
pub mod input;
pub mod kind;
pub mod kustomize;
pub mod object;
pub mod pipeline;
pub mod report;
pub mod rules;
pub mod scope;
pub mod shell;
pub mod source;
pub mod yaml;

pub use config::{Config, FailOn, GuardConfig, LintConfig};
pub use diagnostic::{Diagnostic, Location, Note, ObjectRef, Related, Severity};
pub use helm::{Chart, ChartError};
pub use input::{InputError, Inputs, ReadOptions, TEST_DIRS, read_inputs, read_inputs_with};
pub use kind::Kind;
pub use rules::{RULES, Rule, Settings};
pub use source::Source;

use object::{Object, Workload};
use rules::{Check, Emit, Finding};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The object annotation that suppresses rules: `"GL101,GL202 -- reason"`.
pub const IGNORE_ANNOTATION: &str = "greenlight.dev/ignore";

/// Files larger than this are reported (GL000) and not parsed: manifests are never this big,
/// and the bound keeps memory proportional to something sane.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone)]
pub struct Options {
    /// Rules that run (canonical IDs).
    pub enabled: HashSet<&'static str>,
    pub severity: HashMap<&'static str, Severity>,
    /// Honour `greenlight.dev/ignore` annotations and `# greenlight:ignore` comments.
    pub inline_ignores: bool,
    pub settings: Settings,
    pub limits: yaml::Limits,
    /// The chart rendered Helm output came from: findings are mapped to its template lines.
    pub chart: Option<Arc<Chart>>,
    /// Whether a directory holds a `kustomization.yaml`, `Chart.yaml` or `.git`: where
    /// cross-object pairing stops ([`scope::holds_marker`] asks the filesystem).
    pub scope_marker: fn(&str) -> bool,
    /// The directory `kustomize build` was given: origin annotations' paths are relative to
    /// it (empty: the current directory).
    pub kustomize_root: std::path::PathBuf,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            enabled: RULES
                .iter()
                .filter(|r| r.default_enabled)
                .map(|r| r.id)
                .collect(),
            severity: HashMap::new(),
            inline_ignores: true,
            settings: Settings::default(),
            limits: yaml::Limits::default(),
            chart: None,
            scope_marker: scope::holds_marker,
            kustomize_root: std::path::PathBuf::new(),
        }
    }
}

impl Options {
    /// Options from a validated config plus command-line selection (which wins over the file's).
    pub fn from_config(
        cfg: &LintConfig,
        cli_select: Option<Vec<&'static str>>,
        cli_ignore: &[&'static str],
    ) -> Options {
        let mut o = Options::default();
        if let Some(sel) = cli_select.or_else(|| cfg.select.clone()) {
            o.enabled = sel.into_iter().collect();
        }
        o.enabled.extend(cfg.extend_select.iter().copied());
        for id in cfg.ignore.iter().chain(cli_ignore) {
            o.enabled.remove(id);
        }
        o.severity = cfg.severity.clone();
        if let Some(v) = cfg.initial_delay_seconds {
            o.settings.initial_delay_seconds = v;
        }
        if let Some(v) = cfg.strategy_max_replicas {
            o.settings.strategy_max_replicas = v;
        }
        o.settings.tag_policy = rules::TagPolicy::default()
            .with_extra(cfg.mutable_tags.iter().cloned())
            .with_immutable(cfg.immutable_tags.iter().cloned());
        o
    }
}

/// The outcome of a run.
#[derive(Debug, Default)]
pub struct Report {
    pub diagnostics: Vec<Diagnostic>,
    pub notes: Vec<Note>,
    pub files: usize,
    pub objects: usize,
    pub bytes: usize,
    /// Findings silenced by an annotation or comment.
    pub suppressed: usize,
    /// Findings identical to a reported one on another copy of the same object (another
    /// generated bundle, another kustomize base): listed in its `related`, not reported again.
    pub duplicates: usize,
}

impl Report {
    pub fn count(&self, s: Severity) -> usize {
        self.diagnostics.iter().filter(|d| d.severity == s).count()
    }
}

/// A problem with a source that is reported as GL000 rather than parsed (not UTF-8, too big).
pub fn unreadable_source(name: String, message: String) -> Diagnostic {
    Diagnostic {
        rule: rules::INVALID_YAML.id,
        name: rules::INVALID_YAML.name,
        severity: Severity::Error,
        location: Location::at(name, 1, 1, 1, 1),
        object: None,
        field: String::new(),
        message,
        fix: None,
        related: Vec::new(),
        source_line: String::new(),
        edits: Vec::new(),
    }
}

/// The message of the note for a script too long to read.
fn script_too_long(name: &str) -> Note {
    Note {
        file: name.to_string(),
        message: format!(
            "skipped {name}: a shell script over {} characters is not read",
            embedded::MAX_CHARS
        ),
    }
}

/// A note for each script the shell tokenizer stopped in: the commands from there on are not
/// checked, and the user should know.
fn unread_scripts(pipelines: &[pipeline::Pipeline]) -> Vec<Note> {
    let mut seen = HashSet::new();
    let mut notes = Vec::new();
    for p in pipelines {
        for script in p.jobs.iter().flat_map(|j| &j.scripts) {
            let Some((at, what)) = shell::parse(&script.text.chars).stopped else {
                continue;
            };
            let pos = script.text.pos(at);
            if seen.insert((p.source, pos)) {
                notes.push(Note {
                    file: p.file.to_string(),
                    message: format!(
                        "{}:{}:{}: the shell script could not be read past {what}; the commands \
                         from there on are not checked",
                        p.file, pos.line, pos.col
                    ),
                });
            }
        }
    }
    notes
}

/// Lint sources. `pre` holds diagnostics found while reading (GL000 for unreadable text).
pub fn lint(sources: &[Source], pre: Vec<Diagnostic>, opts: &Options) -> Report {
    let mut report = Report {
        files: sources.len(),
        ..Report::default()
    };
    report.diagnostics = pre
        .into_iter()
        .filter(|_| opts.enabled.contains(rules::INVALID_YAML.id))
        .collect();
    report.files += report.diagnostics.len();
    report.bytes = sources.iter().map(|s| s.text.len()).sum();

    let mut docs: Vec<Vec<yaml::Document>> = Vec::with_capacity(sources.len());
    let mut findings: Vec<Finding> = Vec::new();
    let kinds: Vec<Kind> = sources
        .iter()
        .map(|s| {
            if s.stream {
                Kind::Manifests
            } else {
                Kind::of(&s.name, &s.text)
            }
        })
        .collect();
    for (i, src) in sources.iter().enumerate() {
        let mut ok = Vec::new();
        if !kinds[i].is_yaml() {
            docs.push(ok);
            continue;
        }
        for d in yaml::load_stream(&src.text, &opts.limits) {
            match d {
                Ok(doc) => {
                    // Keep only documents a rule looks at: CRDs and ConfigMaps are most of the
                    // bytes of a GitOps repository and would otherwise stay in memory.
                    let (objects, examined) = object::survey(&doc.root);
                    report.objects += objects;
                    if examined
                        || object::is_kustomization_file(&src.name)
                        || kinds[i] != Kind::Manifests
                    {
                        ok.push(doc);
                    }
                }
                Err(e) => findings.push(Finding {
                    rule: &rules::INVALID_YAML,
                    source: i,
                    span: yaml::Span { start: e.pos, end: e.pos },
                    object: ObjectRef { api_version: String::new(), kind: String::new(), namespace: None, name: None },
                    ignore_annotations: Vec::new(),
                    field: String::new(),
                    message: format!("cannot read YAML: {}", e.message),
                    fix: Some(if src.text.contains("{{") {
                        "this looks like an unrendered template: lint the rendered output (`helm template . | greenlight lint -`)".into()
                    } else {
                        "fix the syntax at this line".into()
                    }),
                    related: Vec::new(),
                    related_elsewhere: Vec::new(),
                    origin: None,
                    edits: Vec::new(),
                    severity: None,
                }),
            }
        }
        docs.push(ok);
    }
    let mut seen = HashMap::new();
    let scopes: Vec<scope::Scope> = sources
        .iter()
        .map(|s| scope::Scope::of(&s.name, opts.scope_marker, &mut seen))
        .collect();
    let mut objects: Vec<Object> = Vec::new();
    for (i, ds) in docs.iter().enumerate() {
        if kinds[i] != Kind::Manifests {
            continue;
        }
        let first = objects.len();
        let kustomization = object::is_kustomization_file(&sources[i].name);
        for d in ds {
            let before = objects.len();
            Object::collect(&d.root, i, &mut objects);
            if kustomization && objects.len() == before {
                objects.extend(Object::kustomization(&d.root, i));
            }
        }
        objects[first..].iter_mut().for_each(|o| {
            o.file = &sources[i].name;
            o.scope = &scopes[i];
        });
    }
    object::mark_kustomize_patches(&mut objects);
    object::mark_kustomize_renders(&mut objects);
    object::mark_deploy_images(&mut objects);
    let workloads: Vec<Workload> = objects.iter().flat_map(Workload::all).collect();
    let mut pipelines = Vec::new();
    for (i, src) in sources.iter().enumerate() {
        if kinds[i] == Kind::Manifests {
            continue;
        }
        let roots: Vec<&yaml::Node> = docs[i].iter().map(|d| &d.root).collect();
        match pipeline::Pipeline::build(kinds[i], i, src, &roots) {
            Some(p) => pipelines.push(p),
            None => report.notes.push(script_too_long(&src.name)),
        }
    }
    if RULES
        .iter()
        .any(|r| opts.enabled.contains(r.id) && matches!(r.check, Check::Pipeline(_)))
    {
        report.notes.extend(unread_scripts(&pipelines));
    }

    for rule in RULES.iter().filter(|r| opts.enabled.contains(r.id)) {
        let mut emit = Emit::new(&opts.settings, rule);
        match rule.check {
            Check::Engine => {}
            Check::Workload(f) => workloads.iter().for_each(|w| f(w, &mut emit)),
            Check::Object(f) => objects.iter().for_each(|o| f(o, &mut emit)),
            Check::Set(f) => f(&objects, &mut emit),
            Check::Pipeline(f) => pipelines.iter().for_each(|p| f(p, &mut emit)),
        }
        findings.extend(emit.findings);
    }
    if !opts.enabled.contains(rules::INVALID_YAML.id) {
        findings.retain(|f| f.rule.id != rules::INVALID_YAML.id);
    }

    let mut mapper = helm::Mapper::new(opts.chart.as_deref());
    let mut origins = kustomize::Origins::new(opts.kustomize_root.clone());
    for f in findings {
        let src = &sources[f.source];
        let mut placed = place(&mut mapper, sources, f.source, f.span, &f.field);
        if placed.template.is_none()
            && let Some(path) = &f.origin
        {
            placed.origin = origins.map(path, &f.object.kind, f.object.name.as_deref(), &f.field);
        }
        if opts.inline_ignores && suppressed(&f, src, &placed) {
            report.suppressed += 1;
            continue;
        }
        report
            .diagnostics
            .push(to_diagnostic(f, placed, &mut mapper, sources, opts));
    }
    report.diagnostics.sort_by(|a, b| {
        (&a.location.file, a.location.line, a.location.column, a.rule).cmp(&(
            &b.location.file,
            b.location.line,
            b.location.column,
            b.rule,
        ))
    });
    report.duplicates = fold_copies(&mut report.diagnostics);
    report
}

/// The message of a related location that is the rendered Helm output of a finding.
const RENDERED: &str = "in the rendered output";

/// The message of a related location that is another copy of the finding.
pub const COPY: &str = "the same finding on another copy of this object";

/// What makes two findings the same: rule, severity, object (apiVersion, kind, namespace,
/// name), field path, message and fix — everything but where they are.
type CopyKey = (
    &'static str,
    Severity,
    ObjectRef,
    String,
    String,
    Option<String>,
);

/// Fold identical findings on copies of one object into the first in report order; each
/// other copy becomes a related location of it ([`COPY`]), after the rule's own related
/// locations and before the rendered Helm line. A finding without a named object (GL000) is
/// never folded. Returns how many were folded.
fn fold_copies(diagnostics: &mut Vec<Diagnostic>) -> usize {
    let mut first: HashMap<CopyKey, usize> = HashMap::new();
    let mut kept: Vec<Diagnostic> = Vec::with_capacity(diagnostics.len());
    let mut folded = 0;
    for d in diagnostics.drain(..) {
        let key = d.object.as_ref().filter(|o| o.name.is_some()).map(|o| {
            (
                d.rule,
                d.severity,
                o.clone(),
                d.field.clone(),
                d.message.clone(),
                d.fix.clone(),
            )
        });
        let Some(key) = key else {
            kept.push(d);
            continue;
        };
        match first.get(&key) {
            Some(&i) => {
                let primary = &mut kept[i];
                primary.edits.extend(d.edits);
                let at = primary
                    .related
                    .iter()
                    .position(|r| r.message == RENDERED)
                    .unwrap_or(primary.related.len());
                primary.related.insert(
                    at,
                    Related {
                        location: d.location,
                        message: COPY.into(),
                    },
                );
                folded += 1;
            }
            None => {
                first.insert(key, kept.len());
                kept.push(d);
            }
        }
    }
    *diagnostics = kept;
    folded
}

fn names_rule(list: &str, rule: &Rule) -> bool {
    list.split([',', ' '])
        .map(str::trim)
        .any(|id| id.eq_ignore_ascii_case(rule.id) || id.eq_ignore_ascii_case(rule.name))
}

fn comment_names(c: Option<source::IgnoreComment>, rule: &Rule) -> bool {
    c.is_some_and(|c| {
        c.ids
            .as_ref()
            .is_none_or(|ids| ids.iter().any(|id| names_rule(id, rule)))
    })
}

/// Suppressed by the object's annotation or its pod template's, or by a `# greenlight:ignore` comment on the
/// finding's line or the line above: in the input, and for Helm output also in the template.
fn suppressed(f: &Finding, src: &Source, placed: &Placed) -> bool {
    for ann in &f.ignore_annotations {
        let ids = ann.split(" -- ").next().unwrap_or("");
        if names_rule(ids, f.rule) {
            return true;
        }
    }
    let line = f.span.start.line;
    let in_input = [line, line.saturating_sub(1)]
        .into_iter()
        .filter(|l| *l > 0)
        .any(|l| comment_names(src.ignore_comment(l), f.rule));
    let in_origin = placed.origin.as_ref().is_some_and(|m| {
        comment_names(source::ignore_comment(&m.line_text), f.rule)
            || comment_names(source::ignore_comment(&m.above_text), f.rule)
    });
    let in_template = match (&placed.template, &placed.template_lines) {
        (Some(t), Some(lines)) => t.line.is_some_and(|l| {
            [l, l.saturating_sub(1)]
                .into_iter()
                .filter(|l| *l > 0)
                .filter_map(|l| lines.get(l as usize - 1))
                .any(|text| comment_names(source::ignore_comment(text), f.rule))
        }),
        _ => false,
    };
    in_input || in_template || in_origin
}

/// Where a span of an input lies: in the input itself, and for rendered Helm output also in
/// its template (line known or not) and, when the value was printed from `.Values`, in values.
struct Placed {
    input: Location,
    template: Option<Location>,
    /// The template line's text, when its line is known.
    template_text: Option<String>,
    template_lines: Option<Arc<Vec<String>>>,
    values: Option<Related>,
    /// For `kustomize build` output with origin annotations: the place in the source file.
    origin: Option<kustomize::Mapped>,
}

fn place(
    mapper: &mut helm::Mapper,
    sources: &[Source],
    index: usize,
    span: yaml::Span,
    field: &str,
) -> Placed {
    let src = &sources[index];
    let (start, mut end) = (span.start, span.end);
    if end < start {
        end = start;
    }
    let input = Location::at(src.name.clone(), start.line, start.col, end.line, end.col);
    let Some(section) = src.section(start.line) else {
        return Placed {
            input,
            template: None,
            template_text: None,
            template_lines: None,
            values: None,
            origin: None,
        };
    };
    let end_col = (end.line == start.line).then_some(end.col);
    let m = mapper.map(&helm::At {
        index,
        src,
        section: &section,
        line: start.line,
        col: start.col,
        end_col,
        field,
    });
    let (template, template_text) = match m.spot {
        Some(s) => (
            Location::at(m.file, s.line, s.column, s.line, s.end_column),
            Some(s.text),
        ),
        None => (Location::line_unknown(m.file, Some(start.line)), None),
    };
    let values = m.values.map(|(file, span, path)| Related {
        location: Location::at(
            file,
            span.start.line,
            span.start.col,
            span.end.line,
            span.end.col,
        ),
        message: format!("the value comes from `.Values.{path}`"),
    });
    Placed {
        input,
        template: Some(template),
        template_text,
        template_lines: m.lines,
        values,
        origin: None,
    }
}

fn to_diagnostic(
    f: Finding,
    placed: Placed,
    mapper: &mut helm::Mapper,
    sources: &[Source],
    opts: &Options,
) -> Diagnostic {
    let src = &sources[f.source];
    let rendered_text = src.line(f.span.start.line).to_string();
    // Fixes edit the file as written: never standard input, rendered Helm output or
    // kustomize output reported in its sources.
    let edits = if src.stream || placed.template.is_some() || placed.origin.is_some() {
        Vec::new()
    } else {
        f.edits
            .iter()
            .filter_map(|(e, rank)| fix::resolve(src, e, *rank))
            .collect()
    };
    // A stream (stdin) is reported at the template; a file on disk at its own line, with the
    // template it was rendered from related.
    let (location, source_line, mut extra) = match placed.template {
        Some(template) if src.stream => {
            let text = placed.template_text.unwrap_or(rendered_text);
            let rendered = Related {
                location: placed.input,
                message: RENDERED.into(),
            };
            (template, text, vec![rendered])
        }
        Some(template) => {
            let from = Related {
                location: template,
                message: "rendered from this template".into(),
            };
            (placed.input, rendered_text, vec![from])
        }
        None => match placed.origin {
            // `kustomize build` output: the source file, with the rendered line related.
            Some(m) => {
                let rendered = Related {
                    location: placed.input,
                    message: RENDERED.into(),
                };
                (m.location, m.line_text, vec![rendered])
            }
            None => (placed.input, rendered_text, Vec::new()),
        },
    };
    extra.extend(placed.values);
    let mut related = Vec::new();
    for (s, span, message) in f.related {
        let p = place(mapper, sources, s, span, "");
        let l = match p.template {
            Some(t) if sources[s].stream => t,
            _ => p.input,
        };
        related.push(Related {
            location: l,
            message,
        });
    }
    related.extend(f.related_elsewhere);
    related.extend(extra);
    let object = (!f.object.kind.is_empty()).then_some(f.object);
    Diagnostic {
        rule: f.rule.id,
        name: f.rule.name,
        // A configured severity is the user's word for the whole rule; otherwise the finding's
        // own (GL301 grades by replica count), else the rule's.
        severity: opts
            .severity
            .get(f.rule.id)
            .copied()
            .or(f.severity)
            .unwrap_or(f.rule.severity),
        source_line,
        location,
        object,
        field: f.field,
        message: f.message,
        fix: f.fix,
        related,
        edits,
    }
}
