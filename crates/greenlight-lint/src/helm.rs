//! Helm charts: where a line of `helm template` output came from in the chart's own templates.
//!
//! Owns: reading a chart (its `Chart.yaml` name, its templates, its subcharts in `charts/`, its
//! `values.yaml` and extra values files), and aligning one rendered `# Source:` section with its
//! template line by line. Literal template lines match exactly; lines with template actions
//! (`{{ … }}`) match as patterns whose actions are wildcards; control-only lines (`if`, `else`,
//! `end`, `with`, `range`, `define`, comments, variable assignments) produce nothing; a branch
//! is printed whole or left out whole, so leaving out a single line of text costs; a line whose
//! action inserts a block (`include`, `template`, `toYaml`, `tpl`, `nindent`, …) absorbs the
//! lines it produced; the body of a `range` may repeat; a rendered section is one document, so
//! it starts at the template's start or after a `---` line and ends at one or at the end.
//! Literal lines score more than patterns, so the alignment holds on to the template's text.
//! Among the best-scoring alignments, a rendered line is mapped only when every one of them
//! puts it on the same template line: otherwise its line is unknown, never guessed.
//! Must never: run helm, or report a template line it is not sure of.

use crate::yaml::{self, Limits, Node};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Why a chart could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("--chart {dir}: no Chart.yaml there (a chart directory holds Chart.yaml)")]
    NotAChart { dir: String },
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// Not a regular file, too large or not UTF-8 (greenlight_files's words).
    #[error("cannot read {path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

/// A values file: its displayed path and its parsed root (`None` when it is empty).
#[derive(Debug)]
struct ValuesFile {
    display: String,
    root: Option<Node>,
}

/// A chart on disk.
#[derive(Debug)]
pub struct Chart {
    /// The chart's `name` in Chart.yaml: the first segment of its `# Source:` paths.
    pub name: String,
    dir: PathBuf,
    /// The directory as shown in findings: relative to the current directory, `""` for it.
    display: String,
    /// `values.yaml` of the chart (when present).
    values: Option<ValuesFile>,
    /// Extra values files (`--values`), in the order given: later ones win, as with helm's `-f`.
    extra_values: Vec<ValuesFile>,
}

fn join_display(base: &str, rel: &str) -> String {
    if base.is_empty() || base == "." {
        rel.to_string()
    } else {
        format!("{}/{rel}", base.trim_end_matches('/'))
    }
}

fn display_path(p: &Path, cwd: Option<&Path>) -> String {
    let shown = match cwd {
        Some(cwd) if p.is_absolute() => p.strip_prefix(cwd).unwrap_or(p),
        _ => p,
    };
    let s = shown.to_string_lossy().replace('\\', "/");
    let s = s.strip_prefix("./").unwrap_or(&s).trim_end_matches('/');
    if s == "." {
        String::new()
    } else {
        s.to_string()
    }
}

/// A chart's file: a regular file of at most [`crate::MAX_FILE_BYTES`], UTF-8.
fn read_text(path: &Path, display: &str) -> Result<String, ChartError> {
    use greenlight_files::{FileError, Problem};
    greenlight_files::read_text(path, crate::MAX_FILE_BYTES, "a chart's file").map_err(
        |e| match e {
            FileError {
                problem: Problem::Io(source),
                ..
            } => ChartError::Read {
                path: display.to_string(),
                source,
            },
            e => ChartError::Unreadable {
                path: display.to_string(),
                reason: e.reason(),
            },
        },
    )
}

/// A file read for a message only (a subchart's defaults, a template's lines): `None` when it
/// is not a regular UTF-8 file of at most [`crate::MAX_FILE_BYTES`].
fn read_quietly(path: &Path) -> Option<String> {
    greenlight_files::read_text(path, crate::MAX_FILE_BYTES, "a chart's file").ok()
}

/// The first document's root of a YAML text, or the parse error as `ChartError::Invalid`.
fn parse_yaml(text: &str, display: &str) -> Result<Option<Node>, ChartError> {
    match yaml::load_stream(text, &Limits::default())
        .into_iter()
        .next()
    {
        None => Ok(None),
        Some(Ok(doc)) => Ok(Some(doc.root)),
        Some(Err(e)) => Err(ChartError::Invalid {
            path: format!("{display}:{}:{}", e.pos.line, e.pos.col),
            message: format!("cannot read YAML: {}", e.message),
        }),
    }
}

/// The `name` in a chart directory's Chart.yaml (`None` when there is no Chart.yaml).
fn chart_name(dir: &Path, display: &str) -> Result<Option<String>, ChartError> {
    let path = dir.join("Chart.yaml");
    if !path.is_file() {
        return Ok(None);
    }
    let shown = join_display(display, "Chart.yaml");
    let root = parse_yaml(&read_text(&path, &shown)?, &shown)?;
    match root
        .as_ref()
        .and_then(|r| r.get("name"))
        .and_then(Node::as_str)
    {
        Some(n) if !n.trim().is_empty() => Ok(Some(n.trim().to_string())),
        _ => Err(ChartError::Invalid {
            path: shown,
            message: "no `name`: a chart's Chart.yaml names it".into(),
        }),
    }
}

fn values_file(path: &Path, display: String) -> Result<ValuesFile, ChartError> {
    let root = parse_yaml(&read_text(path, &display)?, &display)?;
    Ok(ValuesFile { display, root })
}

impl Chart {
    /// The chart in `dir` (`--chart`), with extra values files. `cwd` makes shown paths relative.
    pub fn load(dir: &Path, values: &[PathBuf], cwd: Option<&Path>) -> Result<Chart, ChartError> {
        let display = display_path(dir, cwd);
        let Some(name) = chart_name(dir, &display)? else {
            return Err(ChartError::NotAChart {
                dir: if display.is_empty() {
                    ".".into()
                } else {
                    display
                },
            });
        };
        Chart::with_name(dir, display, name, values, cwd)
    }

    fn with_name(
        dir: &Path,
        display: String,
        name: String,
        values: &[PathBuf],
        cwd: Option<&Path>,
    ) -> Result<Chart, ChartError> {
        let own = dir.join("values.yaml");
        let values_yaml = if own.is_file() {
            Some(values_file(&own, join_display(&display, "values.yaml"))?)
        } else {
            None
        };
        let extra_values = values
            .iter()
            .map(|p| values_file(p, display_path(p, cwd)))
            .collect::<Result<_, _>>()?;
        Ok(Chart {
            name,
            dir: dir.to_path_buf(),
            display,
            values: values_yaml,
            extra_values,
        })
    }

    /// The chart in `dir` (the current directory) when its Chart.yaml `name` is the first
    /// segment of a `# Source:` path among `sources`; `None` otherwise.
    pub fn detect(
        dir: &Path,
        sources: &[crate::Source],
        values: &[PathBuf],
        cwd: Option<&Path>,
    ) -> Result<Option<Chart>, ChartError> {
        if !sources.iter().any(|s| s.has_helm_sections()) {
            return Ok(None);
        }
        let display = display_path(dir, cwd);
        let Some(name) = chart_name(dir, &display)? else {
            return Ok(None);
        };
        let matches = sources
            .iter()
            .flat_map(|s| s.helm_template_paths())
            .any(|p| p.split('/').next() == Some(name.as_str()));
        if !matches {
            return Ok(None);
        }
        Chart::with_name(dir, display, name, values, cwd).map(Some)
    }

    /// Where the template of a `# Source:` path is: the file shown in findings, the file on
    /// disk when it is there, and the values to look `.Values` up in (`None` when the path is
    /// not this chart's).
    fn resolve(&self, source_path: &str) -> Option<Resolved> {
        let rest = source_path.strip_prefix(&self.name)?.strip_prefix('/')?;
        let mut dir = self.dir.clone();
        let mut shown = self.display.clone();
        let mut prefix = String::new();
        let mut rest = rest.to_string();
        let mut own_values: Vec<(PathBuf, String, String)> = Vec::new();
        // Subcharts: `charts/<name>/...`, possibly nested.
        while let Some(after) = rest.strip_prefix("charts/") {
            let (sub, tail) = after.split_once('/')?;
            dir = dir.join("charts").join(sub);
            shown = join_display(&shown, &format!("charts/{sub}"));
            prefix = format!("{prefix}{sub}.");
            own_values.push((
                dir.join("values.yaml"),
                join_display(&shown, "values.yaml"),
                prefix.clone(),
            ));
            rest = tail.to_string();
        }
        let on_disk = dir.join(&rest);
        Some(Resolved {
            display: join_display(&shown, &rest),
            path: on_disk.is_file().then_some(on_disk),
            prefix,
            sub_values: own_values,
        })
    }

    /// Where `path` (dotted, `a.b[0].c`) is set for a template under `prefix` (`""` for the
    /// chart's own templates, `sub.` for a subchart's): the last `--values` file that sets it,
    /// else the chart's values.yaml, else the subchart's own values.yaml.
    fn value_location(&self, r: &Resolved, path: &str) -> Option<(String, yaml::Span)> {
        let full = format!("{}{path}", r.prefix);
        for v in self.extra_values.iter().rev().chain(self.values.as_ref()) {
            if let Some(span) = v.root.as_ref().and_then(|root| lookup(root, &full)) {
                return Some((v.display.clone(), span));
            }
        }
        // A subchart's own defaults, the innermost first.
        for (file, shown, sub_prefix) in r.sub_values.iter().rev() {
            let Some(inner) = full.strip_prefix(sub_prefix.as_str()) else {
                continue;
            };
            let Some(text) = read_quietly(file) else {
                continue;
            };
            if let Ok(Some(root)) = parse_yaml(&text, shown)
                && let Some(span) = lookup(&root, inner)
            {
                return Some((shown.clone(), span));
            }
        }
        None
    }
}

#[derive(Debug)]
struct Resolved {
    display: String,
    path: Option<PathBuf>,
    prefix: String,
    /// Each subchart's values.yaml on the way: (path, shown, prefix up to and with it).
    sub_values: Vec<(PathBuf, String, String)>,
}

/// The key span of a dotted path (`a.b[0].c`) in a values tree.
fn lookup(root: &Node, path: &str) -> Option<yaml::Span> {
    let mut node = root;
    let mut span = None;
    for part in path.split('.') {
        let (key, indexes) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            let e = node.entry(key)?;
            span = Some(e.key.span);
            node = &e.value;
        }
        for idx in indexes.split(['[', ']']).filter(|s| !s.is_empty()) {
            let i: usize = idx.parse().ok()?;
            node = node.as_seq().get(i)?;
            span = Some(node.span);
        }
    }
    span
}

// ---------------------------------------------------------------------------------------------
// Templates

/// What `.` is at a point of a template, as far as values are concerned.
#[derive(Debug, Clone, PartialEq)]
enum Dot {
    Root,
    /// A path under `.Values` (`""` is `.Values` itself).
    Values(String),
    /// Under `with (merge .Values.a .Values.b)`: a key is looked up in each map in turn, the
    /// one that takes precedence first (`merge`'s first argument, `mergeOverwrite`'s last).
    Merged(Vec<String>),
    Unknown,
}

/// The maps a `with` over sprig's `merge`/`mergeOverwrite` of `.Values` maps combines, the one
/// whose keys win first; `None` for any other `with` argument.
fn merged_values(body: &str, dot: &Dot) -> Option<Vec<String>> {
    let arg = body.trim().strip_prefix("with")?.trim();
    let arg = arg
        .strip_prefix('(')
        .and_then(|a| a.strip_suffix(')'))
        .unwrap_or(arg);
    let mut words = arg.split_whitespace();
    let overwrite = match words.next()? {
        "merge" => false,
        "mergeOverwrite" => true,
        _ => return None,
    };
    let mut maps: Vec<String> = words
        .map(|w| match w {
            ".Values" | "$.Values" => Some(String::new()),
            _ => values_ref(w, dot),
        })
        .collect::<Option<_>>()?;
    if maps.len() < 2 {
        return None;
    }
    if overwrite {
        maps.reverse();
    }
    Some(maps)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ActKind {
    Open(Opener),
    Else,
    End,
    /// Comments, assignments, `break`, `continue`: nothing is output.
    Silent,
    Output,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Opener {
    If,
    With,
    Range,
    Define,
    Block,
}

#[derive(Debug, Clone)]
struct Action {
    /// 0-based char columns of `{{` and one past `}}` (on the action's first line; an action
    /// running over several lines ends at the end of its first line here).
    start: usize,
    end: usize,
    trim_left: bool,
    trim_right: bool,
    kind: ActKind,
    /// Can output several lines (`include`, `toYaml`, `nindent`, …).
    block: bool,
    /// `nindent N` / `indent N`.
    indent: Option<usize>,
    /// The `.Values` path this action outputs, when it is a plain reference.
    values: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// Whitespace only, or part of a multi-line action, or inside a `define`: produces nothing
    /// we align on.
    Nothing,
    Control,
    DocSep,
    Literal,
    Inline,
    Block,
}

#[derive(Debug, Clone)]
struct TLine {
    text: String,
    kind: Kind,
    /// Branches that may be left out whole: from this line (an `if`, `with`, `range` or
    /// `else`) straight to these lines (the next `else`, or the `end`).
    skips: Vec<usize>,
    actions: Vec<Action>,
    /// For the `end` (or `else`) closing a `range` body: the line of its `range`.
    back_to: Option<usize>,
}

/// A template, parsed into lines for alignment.
#[derive(Debug)]
pub struct Template {
    lines: Vec<TLine>,
    /// Each line as a pattern (empty for lines without actions).
    patterns: Vec<Vec<Piece>>,
    /// Whether a block line has text of its own before its block.
    prefixed: Vec<bool>,
}

struct RawAction {
    line: usize,
    start: usize,
    end_line: usize,
    end: usize,
    body: String,
    trim_left: bool,
    trim_right: bool,
}

/// Every `{{ … }}` of a template, with 0-based line and char positions.
fn scan_actions(text: &str) -> Vec<RawAction> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut line, mut col) = (0usize, 0usize);
    let mut i = 0;
    let advance = |c: char, line: &mut usize, col: &mut usize| {
        if c == '\n' {
            *line += 1;
            *col = 0;
        } else {
            *col += 1;
        }
    };
    while i < chars.len() {
        if chars[i] == '{' && chars.get(i + 1) == Some(&'{') {
            let (start_line, start_col) = (line, col);
            let mut j = i + 2;
            let (mut l, mut c) = (line, col + 2);
            let trim_left =
                chars.get(j) == Some(&'-') && chars.get(j + 1).is_some_and(|c| c.is_whitespace());
            let comment = {
                let mut k = j + usize::from(trim_left);
                while chars.get(k).is_some_and(|c| *c == ' ') {
                    k += 1;
                }
                chars.get(k) == Some(&'/') && chars.get(k + 1) == Some(&'*')
            };
            let mut body = String::new();
            let mut quote: Option<char> = None;
            let mut closed = false;
            while j < chars.len() {
                let ch = chars[j];
                if let Some(q) = quote {
                    body.push(ch);
                    if ch == '\\' && q != '`' {
                        if let Some(n) = chars.get(j + 1) {
                            body.push(*n);
                            advance(ch, &mut l, &mut c);
                            j += 1;
                        }
                    } else if ch == q {
                        quote = None;
                    }
                } else if ch == '}' && chars.get(j + 1) == Some(&'}') {
                    let inner: String = body.clone();
                    let ends_comment = inner
                        .trim_end()
                        .trim_end_matches('-')
                        .trim_end()
                        .ends_with("*/");
                    if !comment || ends_comment {
                        closed = true;
                        break;
                    }
                    body.push(ch);
                } else {
                    if (ch == '"' || ch == '`' || ch == '\'') && !comment {
                        quote = Some(ch);
                    }
                    body.push(ch);
                }
                advance(ch, &mut l, &mut c);
                j += 1;
            }
            if !closed {
                break;
            }
            // `j` is at the first `}` of `}}`.
            let trim_right = body.ends_with(" -") || body.ends_with("\t-") || body.ends_with("\n-");
            let mut inner = body.as_str();
            if trim_left {
                inner = &inner[1..];
            }
            if trim_right {
                inner = &inner[..inner.len() - 1];
            }
            out.push(RawAction {
                line: start_line,
                start: start_col,
                end_line: l,
                end: c + 2,
                body: inner.trim().to_string(),
                trim_left,
                trim_right,
            });
            // Move past `}}`.
            for _ in 0..2 {
                advance(chars[j], &mut l, &mut c);
                j += 1;
            }
            i = j;
            line = l;
            col = c;
            continue;
        }
        advance(chars[i], &mut line, &mut col);
        i += 1;
    }
    out
}

const BLOCK_WORDS: &[&str] = &[
    "include",
    "template",
    "toYaml",
    "tpl",
    "nindent",
    "indent",
    "toPrettyJson",
    "toToml",
    ".Files",
];

fn classify(body: &str) -> ActKind {
    if body.starts_with("/*") {
        return ActKind::Silent;
    }
    let mut words = body.split_whitespace();
    let first = words.next().unwrap_or("");
    match first {
        "if" => ActKind::Open(Opener::If),
        "with" => ActKind::Open(Opener::With),
        "range" => ActKind::Open(Opener::Range),
        "define" => ActKind::Open(Opener::Define),
        "block" => ActKind::Open(Opener::Block),
        "else" => ActKind::Else,
        "end" => ActKind::End,
        "break" | "continue" => ActKind::Silent,
        _ if first.starts_with('$') && matches!(words.next(), Some(":=" | "=")) => ActKind::Silent,
        _ => ActKind::Output,
    }
}

/// Words of a pipeline, split at `|`, each command trimmed.
fn commands(body: &str) -> Vec<Vec<&str>> {
    body.split('|')
        .map(|c| c.split_whitespace().collect())
        .collect()
}

fn indent_of(body: &str) -> Option<usize> {
    for cmd in commands(body) {
        if let [f, n, ..] = cmd.as_slice()
            && (*f == "nindent" || *f == "indent")
        {
            return n.parse().ok();
        }
    }
    None
}

/// A `.Values` path from a field chain (`.Values.a.b`, `$.Values.a.b`, `.a` under a values dot).
fn values_ref(word: &str, dot: &Dot) -> Option<String> {
    let ok = |s: &str| {
        !s.is_empty()
            && s.split('.').all(|p| {
                !p.is_empty()
                    && p.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            })
    };
    if let Some(p) = word.strip_prefix("$.Values.") {
        return ok(p).then(|| p.to_string());
    }
    match dot {
        Dot::Root => {
            let p = word.strip_prefix(".Values.")?;
            ok(p).then(|| p.to_string())
        }
        Dot::Values(base) => {
            if word == "." {
                return (!base.is_empty()).then(|| base.clone());
            }
            let p = word.strip_prefix('.')?;
            if !ok(p) {
                return None;
            }
            Some(if base.is_empty() {
                p.to_string()
            } else {
                format!("{base}.{p}")
            })
        }
        // Each candidate, the winning map first, as alternatives the lookup tries in turn.
        Dot::Merged(maps) => {
            let p = word.strip_prefix('.')?;
            if word == "." || !ok(p) {
                return None;
            }
            Some(
                maps.iter()
                    .map(|m| {
                        if m.is_empty() {
                            p.to_string()
                        } else {
                            format!("{m}.{p}")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(ALTERNATIVES),
            )
        }
        Dot::Unknown => None,
    }
}

/// Between `.Values` paths that may each have set a value (`merge`d maps), the first that a
/// values file sets wins. No path contains it.
const ALTERNATIVES: &str = "|";

/// The `.Values` path an output action prints as it is: `.Values.a.b`, `toYaml .Values.a.b`,
/// `toYaml .` under `with .Values.a.b`, followed only by formatting (`quote`, `nindent 4`, …).
fn plain_values(body: &str, dot: &Dot) -> Option<String> {
    let cmds = commands(body);
    let (first, rest) = cmds.split_first()?;
    let path = match first.as_slice() {
        [w] => values_ref(w, dot)?,
        [f, w] if matches!(*f, "toYaml" | "toJson" | "quote" | "squote" | "toString") => {
            values_ref(w, dot)?
        }
        _ => return None,
    };
    let formatting = rest.iter().all(|c| match c.as_slice() {
        [f] => matches!(
            *f,
            "quote"
                | "squote"
                | "toYaml"
                | "toJson"
                | "toString"
                | "int"
                | "int64"
                | "float64"
                | "trim"
        ),
        [f, n] => matches!(*f, "nindent" | "indent") && n.parse::<usize>().is_ok(),
        _ => false,
    });
    formatting.then_some(path)
}

fn is_doc_sep(line: &str) -> bool {
    let t = line.trim_end();
    t == "---" || t.starts_with("--- ")
}

impl Template {
    pub fn parse(text: &str) -> Template {
        let raw = scan_actions(text);
        let texts: Vec<&str> = text.lines().collect();
        let mut lines: Vec<TLine> = texts
            .iter()
            .map(|t| TLine {
                text: t.to_string(),
                kind: Kind::Nothing,
                skips: Vec::new(),
                actions: Vec::new(),
                back_to: None,
            })
            .collect();
        let mut covered = vec![false; lines.len()];
        let mut by_line: Vec<Vec<&RawAction>> = vec![Vec::new(); lines.len()];
        for a in &raw {
            if a.line < lines.len() {
                by_line[a.line].push(a);
            }
            for c in covered.iter_mut().take(a.end_line + 1).skip(a.line + 1) {
                *c = true;
            }
        }
        // (opener, its line, dot before it)
        let mut stack: Vec<(Opener, usize, Dot)> = Vec::new();
        // For each open block: its opening line and its `else` lines so far.
        let mut branches: Vec<Vec<usize>> = Vec::new();
        let mut dot = Dot::Root;
        let mut define_depth: Option<usize> = None;
        for idx in 0..lines.len() {
            let in_define = define_depth.is_some();
            let mut acts = Vec::new();
            for a in &by_line[idx] {
                let kind = classify(&a.body);
                let end = if a.end_line == a.line {
                    a.end
                } else {
                    texts[idx].chars().count()
                };
                let mut action = Action {
                    start: a.start,
                    end,
                    trim_left: a.trim_left,
                    trim_right: a.trim_right,
                    kind,
                    block: false,
                    indent: None,
                    values: None,
                };
                match kind {
                    ActKind::Open(o) => {
                        let arg = a.body.split_whitespace().nth(1).unwrap_or("");
                        let next = match o {
                            Opener::With => match values_ref(arg, &dot) {
                                // A path of alternatives (a key under merged maps) is no map.
                                Some(p) if !p.contains(ALTERNATIVES) => Dot::Values(p),
                                Some(_) => Dot::Unknown,
                                None if arg == ".Values" || arg == "$.Values" => {
                                    Dot::Values(String::new())
                                }
                                None => match merged_values(&a.body, &dot) {
                                    Some(maps) => Dot::Merged(maps),
                                    None => Dot::Unknown,
                                },
                            },
                            Opener::If => dot.clone(),
                            _ => Dot::Unknown,
                        };
                        stack.push((o, idx, dot.clone()));
                        branches.push(vec![idx]);
                        if o == Opener::Define && define_depth.is_none() {
                            define_depth = Some(stack.len());
                        }
                        dot = next;
                    }
                    ActKind::Else => {
                        if let Some(b) = branches.last_mut() {
                            b.push(idx);
                        }
                        if let Some((o, open, before)) = stack.last().cloned() {
                            if o == Opener::Range && lines[idx].back_to.is_none() {
                                lines[idx].back_to = Some(open);
                            }
                            // `else` of `with`/`range` runs with the outer dot.
                            if matches!(o, Opener::With | Opener::Range) {
                                dot = before;
                            }
                            // Mark the range as closed for back-jumps (`range … else … end`).
                            if o == Opener::Range
                                && let Some(top) = stack.last_mut()
                            {
                                top.0 = Opener::If;
                            }
                        }
                    }
                    ActKind::End => {
                        // Each branch may be left out whole; after a branch, the rest too.
                        if let Some(points) = branches.pop() {
                            for w in points.windows(2) {
                                if w[0] != w[1] {
                                    lines[w[0]].skips.push(w[1]);
                                }
                            }
                            for &e in &points[1..] {
                                if e != idx {
                                    lines[e].skips.push(idx);
                                }
                            }
                            if points.len() == 1 && points[0] != idx {
                                lines[points[0]].skips.push(idx);
                            }
                        }
                        if let Some((o, open, before)) = stack.pop() {
                            if o == Opener::Range {
                                lines[idx].back_to = Some(open);
                            }
                            if define_depth.is_some_and(|d| d > stack.len()) {
                                define_depth = None;
                            }
                            dot = before;
                        }
                    }
                    ActKind::Output => {
                        action.block = BLOCK_WORDS.iter().any(|w| {
                            a.body
                                .split(|c: char| c.is_whitespace() || c == '(' || c == '|')
                                .any(|t| t == *w || (w.starts_with('.') && t.starts_with(w)))
                        });
                        action.indent = indent_of(&a.body);
                        action.values = plain_values(&a.body, &dot);
                    }
                    ActKind::Silent => {}
                }
                acts.push(action);
            }
            let l = &mut lines[idx];
            l.kind = if covered[idx] || in_define || define_depth.is_some() && acts.is_empty() {
                Kind::Nothing
            } else if acts.is_empty() {
                if l.text.trim().is_empty() {
                    Kind::Nothing
                } else if is_doc_sep(&l.text) {
                    Kind::DocSep
                } else {
                    Kind::Literal
                }
            } else {
                let outside = outside_text(&l.text, &acts);
                let outputs: Vec<&Action> =
                    acts.iter().filter(|a| a.kind == ActKind::Output).collect();
                if outputs.is_empty() && outside.trim().is_empty() {
                    Kind::Control
                } else if outputs.iter().any(|a| a.block)
                    || (!outputs.is_empty() && outside.trim().is_empty())
                {
                    Kind::Block
                } else {
                    Kind::Inline
                }
            };
            // A define opened on this line hides the line too.
            if define_depth.is_some() && !in_define {
                l.kind = Kind::Nothing;
            }
            l.actions = acts;
        }
        let patterns: Vec<Vec<Piece>> = lines
            .iter()
            .map(|l| {
                if matches!(l.kind, Kind::Inline | Kind::Block) {
                    pattern(l)
                } else {
                    Vec::new()
                }
            })
            .collect();
        let prefixed = lines
            .iter()
            .zip(&patterns)
            .map(|(l, p)| {
                l.kind == Kind::Block
                    && matches!(p.first(), Some(Piece::Lit { text, .. }) if text.iter().any(|c| !c.is_whitespace()))
            })
            .collect();
        Template {
            lines,
            patterns,
            prefixed,
        }
    }
}

fn outside_text(text: &str, acts: &[Action]) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut at = 0;
    for a in acts {
        if a.start > at {
            out.extend(&chars[at.min(chars.len())..a.start.min(chars.len())]);
        }
        at = at.max(a.end);
    }
    if at < chars.len() {
        out.extend(&chars[at..]);
    }
    out
}

/// A template line as a pattern: literal pieces and wildcards (one per action).
#[derive(Debug)]
enum Piece {
    Lit { text: Vec<char>, tcol: usize },
    Wild { action: usize },
}

fn pattern(line: &TLine) -> Vec<Piece> {
    let chars: Vec<char> = line.text.chars().collect();
    let mut pieces = Vec::new();
    let mut at = 0;
    let mut trim_next_left = false;
    for (ai, a) in line.actions.iter().enumerate() {
        let start = a.start.min(chars.len());
        if start > at || at == 0 {
            let mut s = at;
            let mut e = start.max(at);
            if trim_next_left {
                while s < e && chars[s].is_whitespace() {
                    s += 1;
                }
            }
            if a.trim_left {
                while e > s && chars[e - 1].is_whitespace() {
                    e -= 1;
                }
            }
            if e > s {
                pieces.push(Piece::Lit {
                    text: chars[s..e].to_vec(),
                    tcol: s,
                });
            }
        }
        // Silent actions and controls output nothing, but whatever they guard may; a wildcard
        // keeps the pattern honest either way.
        pieces.push(Piece::Wild { action: ai });
        trim_next_left = a.trim_right;
        at = at.max(a.end.min(chars.len()));
    }
    let mut s = at;
    if trim_next_left {
        while s < chars.len() && chars[s].is_whitespace() {
            s += 1;
        }
    }
    if s < chars.len() {
        pieces.push(Piece::Lit {
            text: chars[s..].to_vec(),
            tcol: s,
        });
    }
    // Trailing blanks of a literal before a wildcard or at the end are not required: an action
    // printing nothing leaves `key: ` whose blank the rendered line may not keep.
    let n = pieces.len();
    for k in 0..n {
        let before_wild_or_end = k + 1 == n || matches!(pieces[k + 1], Piece::Wild { .. });
        if let Piece::Lit { text, .. } = &mut pieces[k]
            && before_wild_or_end
            && text.iter().any(|c| !c.is_whitespace())
        {
            while text.last().is_some_and(|c| c.is_whitespace()) {
                text.pop();
            }
        }
    }
    pieces
}

/// Where each literal piece sits in the rendered line (char offsets), or `None` if it does not
/// match. Wildcards take what lies between.
fn match_pattern(pieces: &[Piece], rendered: &[char]) -> Option<Vec<(usize, usize)>> {
    let mut pos = 0;
    let mut out = Vec::with_capacity(pieces.len());
    let n = pieces.len();
    for (k, p) in pieces.iter().enumerate() {
        match p {
            Piece::Wild { .. } => out.push((pos, pos)),
            Piece::Lit { text, .. } => {
                let anchored_start = k == 0;
                let anchored_end = k == n - 1;
                let at = if anchored_start {
                    rendered.starts_with(text).then_some(0)?
                } else if anchored_end {
                    let s = rendered.len().checked_sub(text.len())?;
                    (s >= pos && rendered[s..] == text[..]).then_some(s)?
                } else {
                    (pos..=rendered.len().saturating_sub(text.len()))
                        .find(|&s| rendered[s..].starts_with(text))?
                };
                if anchored_start && anchored_end && text.len() != rendered.len() {
                    return None;
                }
                out.push((at, at + text.len()));
                pos = at + text.len();
            }
        }
    }
    // Wildcards span from the end of the previous piece to the start of the next.
    for k in 0..n {
        if matches!(pieces[k], Piece::Wild { .. }) {
            let start = if k == 0 { 0 } else { out[k - 1].1 };
            let end = if k + 1 < n {
                out[k + 1].0
            } else {
                rendered.len()
            };
            let end = if k + 1 < n && matches!(pieces[k + 1], Piece::Wild { .. }) {
                start
            } else {
                end
            };
            out[k] = (start, end.max(start));
        }
    }
    Some(out)
}

fn leading_ws(s: &str) -> usize {
    s.chars().take_while(|c| *c == ' ').count()
}

/// How a rendered line is produced by its template line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// The line itself (literal, or a pattern with wildcards).
    Line,
    /// One of the lines a block action inserted.
    Inserted,
}

const NEG: i32 = i32::MIN / 4;
const LITERAL: i32 = 3;
const PATTERN: i32 = 2;
const PATTERN_BARE: i32 = 1;
const REQUIRED_SKIP: i32 = -3;
/// The largest alignment table (rendered lines × template lines) worked out; a bigger section's
/// lines are not placed.
const MAX_CELLS: usize = 4_000_000;

struct Step {
    score: i32,
}

impl Template {
    /// Leaving out one line. A line of text is always printed when its branch is taken, so
    /// leaving it out alone costs; a branch not taken is left out whole at no cost (`skips`).
    /// A `---` ends the rendered document: only a branch left out whole passes it.
    fn skip_cost(&self, j: usize) -> i32 {
        let l = &self.lines[j];
        match l.kind {
            Kind::DocSep => NEG,
            Kind::Literal | Kind::Inline => REQUIRED_SKIP,
            Kind::Block if self.prefixed[j] => REQUIRED_SKIP,
            _ => 0,
        }
    }

    /// The whole line matches (literal exactly, or as a pattern).
    fn line_match(&self, j: usize, r: &str) -> Option<Step> {
        let l = &self.lines[j];
        match l.kind {
            Kind::Literal => (l.text.trim_end() == r.trim_end()).then_some(Step { score: LITERAL }),
            Kind::Inline => {
                let pieces = &self.patterns[j];
                let chars: Vec<char> = r.trim_end().chars().collect();
                match_pattern(pieces, &chars)?;
                let lit = pieces.iter().any(|p| matches!(p, Piece::Lit { text, .. } if text.iter().any(|c| !c.is_whitespace())));
                Some(Step {
                    score: if lit { PATTERN } else { PATTERN_BARE },
                })
            }
            _ => None,
        }
    }

    /// The first rendered line of a block line that has text of its own before the block.
    fn block_first(&self, j: usize, r: &str) -> Option<Step> {
        let l = &self.lines[j];
        if l.kind != Kind::Block || !self.prefixed[j] {
            return None;
        }
        let chars: Vec<char> = r.trim_end().chars().collect();
        match_pattern(&self.patterns[j], &chars)?;
        Some(Step { score: PATTERN })
    }

    /// A line inserted by the block action of line `j`.
    fn inserted(&self, j: usize, r: &str) -> bool {
        let l = &self.lines[j];
        if l.kind != Kind::Block {
            return false;
        }
        let min = l
            .actions
            .iter()
            .filter(|a| a.block)
            .find_map(|a| a.indent)
            .unwrap_or(0);
        leading_ws(r) >= min
    }

    /// Align the rendered lines (non-blank, in order) with this template; for each, the template
    /// line and how it was produced when every best alignment agrees.
    fn align(&self, rendered: &[&str]) -> Vec<Option<(usize, How)>> {
        let t = self.lines.len();
        let r = rendered.len();
        let w = t + 1;
        let idx = |i: usize, j: usize| i * w + j;
        let mut starts = vec![0usize];
        let mut ends = vec![t];
        for (j, l) in self.lines.iter().enumerate() {
            if l.kind == Kind::DocSep {
                starts.push(j + 1);
                ends.push(j);
            }
        }
        if (r + 1).saturating_mul(w) > MAX_CELLS {
            return vec![None; r];
        }
        // Blocks that must match their first line may not absorb lines before it.
        let first_ok = &self.prefixed;
        // How each rendered line can be produced by each template line, worked out once.
        let mut line_scores = vec![None; r * t];
        let mut first_scores = vec![None; r * t];
        let mut inserts = vec![false; r * t];
        for (i, line) in rendered.iter().enumerate() {
            for j in 0..t {
                line_scores[i * t + j] = self.line_match(j, line).map(|s| s.score);
                first_scores[i * t + j] = self.block_first(j, line).map(|s| s.score);
                inserts[i * t + j] = self.inserted(j, line);
            }
        }
        let line_match = |i: usize, j: usize| line_scores[i * t + j].map(|score| Step { score });
        let block_first = |i: usize, j: usize| first_scores[i * t + j].map(|score| Step { score });
        let inserted = |i: usize, j: usize| inserts[i * t + j];

        let mut f0 = vec![NEG; (r + 1) * w];
        let mut f1 = vec![NEG; (r + 1) * w];
        for &s in &starts {
            f0[idx(0, s)] = 0;
        }
        let relax = |v: &mut Vec<i32>, k: usize, val: i32| -> bool {
            if val > v[k] {
                v[k] = val;
                true
            } else {
                false
            }
        };
        for i in 0..=r {
            for _pass in 0..8 {
                let mut changed = false;
                for j in 0..t {
                    // Finish a block.
                    let b = f1[idx(i, j)];
                    if b > NEG {
                        changed |= relax(&mut f0, idx(i, j + 1), b);
                    }
                    let v = f0[idx(i, j)];
                    if v <= NEG {
                        continue;
                    }
                    let sc = self.skip_cost(j);
                    if sc > NEG {
                        changed |= relax(&mut f0, idx(i, j + 1), v + sc);
                    }
                    for &q in &self.lines[j].skips {
                        changed |= relax(&mut f0, idx(i, q), v);
                    }
                    if let Some(back) = self.lines[j].back_to {
                        changed |= relax(&mut f0, idx(i, back + 1), v);
                    }
                }
                if !changed {
                    break;
                }
            }
            if i == r {
                break;
            }
            for j in 0..t {
                let v = f0[idx(i, j)];
                if v > NEG {
                    if let Some(s) = line_match(i, j) {
                        relax(&mut f0, idx(i + 1, j + 1), v + s.score);
                    }
                    if let Some(s) = block_first(i, j) {
                        relax(&mut f1, idx(i + 1, j), v + s.score);
                    } else if !first_ok[j] && inserted(i, j) {
                        relax(&mut f1, idx(i + 1, j), v);
                    }
                }
                let b = f1[idx(i, j)];
                if b > NEG && inserted(i, j) {
                    relax(&mut f1, idx(i + 1, j), b);
                }
            }
        }
        let best = ends.iter().map(|&e| f0[idx(r, e)]).max().unwrap_or(NEG);
        if best <= NEG / 2 {
            return vec![None; r];
        }

        // Backward scores: the best from a state to an end.
        let mut b0 = vec![NEG; (r + 1) * w];
        let mut b1 = vec![NEG; (r + 1) * w];
        for &e in &ends {
            b0[idx(r, e)] = 0;
        }
        for i in (0..=r).rev() {
            for _pass in 0..8 {
                let mut changed = false;
                for j in (0..t).rev() {
                    // b1: finish (same layer) or absorb the next line.
                    let mut v1 = b0[idx(i, j + 1)];
                    if i < r && inserted(i, j) {
                        v1 = v1.max(b1[idx(i + 1, j)]);
                    }
                    changed |= relax(&mut b1, idx(i, j), v1);
                    let mut v = NEG;
                    let sc = self.skip_cost(j);
                    if sc > NEG && b0[idx(i, j + 1)] > NEG {
                        v = v.max(sc + b0[idx(i, j + 1)]);
                    }
                    for &q in &self.lines[j].skips {
                        v = v.max(b0[idx(i, q)]);
                    }
                    if let Some(back) = self.lines[j].back_to {
                        v = v.max(b0[idx(i, back + 1)]);
                    }
                    if i < r {
                        if let Some(s) = line_match(i, j)
                            && b0[idx(i + 1, j + 1)] > NEG
                        {
                            v = v.max(s.score + b0[idx(i + 1, j + 1)]);
                        }
                        if let Some(s) = block_first(i, j) {
                            if b1[idx(i + 1, j)] > NEG {
                                v = v.max(s.score + b1[idx(i + 1, j)]);
                            }
                        } else if !first_ok[j] && inserted(i, j) {
                            v = v.max(b1[idx(i + 1, j)]);
                        }
                    }
                    if v > NEG / 2 {
                        changed |= relax(&mut b0, idx(i, j), v);
                    }
                }
                if !changed {
                    break;
                }
            }
        }

        let mut out = Vec::with_capacity(r);
        for i in 0..r {
            let mut found: Vec<(usize, How)> = Vec::new();
            let mut add = |j: usize, how: How| {
                if !found.contains(&(j, how)) {
                    found.push((j, how));
                }
            };
            for j in 0..t {
                let v = f0[idx(i, j)];
                if v > NEG {
                    if let Some(s) = line_match(i, j)
                        && v + s.score + b0[idx(i + 1, j + 1)] == best
                    {
                        add(j, How::Line);
                    }
                    if let Some(s) = block_first(i, j) {
                        if v + s.score + b1[idx(i + 1, j)] == best {
                            add(j, How::Line);
                        }
                    } else if !first_ok[j] && inserted(i, j) && v + b1[idx(i + 1, j)] == best {
                        add(j, How::Inserted);
                    }
                }
                let b = f1[idx(i, j)];
                if b > NEG && inserted(i, j) && b + b1[idx(i + 1, j)] == best {
                    add(j, How::Inserted);
                }
            }
            let lines: Vec<usize> = found.iter().map(|(j, _)| *j).collect();
            out.push(match found.as_slice() {
                [one] => Some(*one),
                // The same line both ways: point at the action, which is right either way.
                [_, ..] if lines.iter().all(|j| *j == lines[0]) => Some((lines[0], How::Inserted)),
                _ => None,
            });
        }
        out
    }
}

/// A rendered line's place in its template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateSpot {
    /// 1-based line, 1-based columns, end exclusive, on that one line.
    pub line: u32,
    pub column: u32,
    pub end_column: u32,
    /// The template line's text.
    pub text: String,
    /// A `.Values` path the offending value was printed from, when plain.
    pub values: Option<String>,
}

/// The outcome of mapping one rendered position.
#[derive(Debug, Clone)]
pub struct Mapped {
    /// The template as shown in findings.
    pub file: String,
    /// `None`: the line is not known with confidence.
    pub spot: Option<TemplateSpot>,
    /// Where the `.Values` path is set: (values file shown, span).
    pub values: Option<(String, yaml::Span, String)>,
    /// The template's text lines (for `# greenlight:ignore` comments), when read.
    pub lines: Option<std::sync::Arc<Vec<String>>>,
}

/// Rendered line number -> its template line and how it was produced, when sure.
type Alignment = HashMap<u32, Option<(usize, How)>>;

/// A span of rendered output to place in its template.
pub struct At<'a> {
    /// The input's index in the run, and the input.
    pub index: usize,
    pub src: &'a crate::Source,
    pub section: &'a crate::source::Section,
    pub line: u32,
    pub col: u32,
    /// The span's end column when it ends on the same line.
    pub end_col: Option<u32>,
    /// The finding's field path (to follow a block into values).
    pub field: &'a str,
}

/// A template read from disk, parsed once per run.
struct Loaded {
    template: Template,
    lines: std::sync::Arc<Vec<String>>,
}

/// Maps rendered lines to template lines for one run, reading each template once.
pub struct Mapper<'c> {
    chart: Option<&'c Chart>,
    templates: HashMap<PathBuf, Option<Loaded>>,
    /// (source index, section start) -> alignment of that section's lines.
    sections: HashMap<(usize, u32), Alignment>,
}

impl<'c> Mapper<'c> {
    pub fn new(chart: Option<&'c Chart>) -> Mapper<'c> {
        Mapper {
            chart,
            templates: HashMap::new(),
            sections: HashMap::new(),
        }
    }

    /// Where a span of rendered output lies in its template.
    pub fn map(&mut self, at: &At) -> Mapped {
        let At {
            index: src_index,
            src,
            section,
            line,
            col,
            end_col,
            field,
        } = *at;
        let Some(chart) = self.chart else {
            return Mapped {
                file: section.path.clone(),
                spot: None,
                values: None,
                lines: None,
            };
        };
        let Some(resolved) = chart.resolve(&section.path) else {
            return Mapped {
                file: section.path.clone(),
                spot: None,
                values: None,
                lines: None,
            };
        };
        let file = resolved.display.clone();
        let Some(path) = resolved.path.clone() else {
            return Mapped {
                file,
                spot: None,
                values: None,
                lines: None,
            };
        };
        let loaded = self.templates.entry(path.clone()).or_insert_with(|| {
            read_quietly(&path).map(|text| {
                let template = Template::parse(&text);
                let lines = text.lines().map(str::to_string).collect();
                Loaded {
                    template,
                    lines: std::sync::Arc::new(lines),
                }
            })
        });
        let Some(loaded) = loaded.as_ref() else {
            return Mapped {
                file,
                spot: None,
                values: None,
                lines: None,
            };
        };
        let alignment = self
            .sections
            .entry((src_index, section.header))
            .or_insert_with(|| {
                let numbers: Vec<u32> = (section.header + 1..=section.last)
                    .filter(|l| !src.line(*l).trim().is_empty())
                    .collect();
                let texts: Vec<&str> = numbers.iter().map(|l| src.line(*l)).collect();
                let hits = loaded.template.align(&texts);
                numbers.into_iter().zip(hits).collect()
            });
        let hit = alignment.get(&line).copied().flatten();
        let spot = hit.and_then(|(j, how)| {
            spot(
                &loaded.template,
                j,
                how,
                src.line(line),
                col,
                end_col,
                field,
            )
        });
        let values = spot.as_ref().and_then(|s| s.values.as_ref()).and_then(|p| {
            p.split(ALTERNATIVES).find_map(|p| {
                chart
                    .value_location(&resolved, p)
                    .map(|(f, span)| (f, span, p.to_string()))
            })
        });
        Mapped {
            file,
            spot,
            values,
            lines: Some(loaded.lines.clone()),
        }
    }
}

/// The place in template line `j` of the span `col`..`end_col` of `rendered_line`.
fn spot(
    t: &Template,
    j: usize,
    how: How,
    rendered_line: &str,
    col: u32,
    end_col: Option<u32>,
    field: &str,
) -> Option<TemplateSpot> {
    let l = &t.lines[j];
    let text_len = l.text.chars().count() as u32;
    let block_action = || {
        l.actions
            .iter()
            .find(|a| a.kind == ActKind::Output && a.block)
            .or_else(|| l.actions.iter().find(|a| a.kind == ActKind::Output))
    };
    match (how, &l.kind) {
        (How::Line, Kind::Literal) => Some(TemplateSpot {
            line: j as u32 + 1,
            column: col,
            end_column: end_col.unwrap_or(text_len + 1).max(col + 1),
            text: l.text.clone(),
            values: None,
        }),
        (How::Line, Kind::Inline | Kind::Block) => {
            let rendered: Vec<char> = rendered_line.trim_end().chars().collect();
            let pieces = &t.patterns[j];
            let m = match_pattern(pieces, &rendered)?;
            let c0 = col.saturating_sub(1) as usize;
            let place = |c: usize| -> (usize, Option<usize>) {
                // The piece holding rendered char `c`: literal -> its template column; wildcard
                // -> its action's columns.
                for (k, p) in pieces.iter().enumerate() {
                    let (s, e) = m[k];
                    match p {
                        Piece::Lit { tcol, .. } if c >= s && c < e => {
                            return (tcol + (c - s), None);
                        }
                        Piece::Wild { action } if c >= s && (c < e || s == e && c == s) => {
                            let a = &l.actions[*action];
                            return (a.start, Some(a.end));
                        }
                        _ => {}
                    }
                }
                // Past the end: the last action.
                let a = l.actions.last();
                (a.map_or(0, |a| a.start), a.map(|a| a.end))
            };
            let (start, wild_end) = place(c0);
            let end = match (wild_end, end_col) {
                (Some(e), _) => e,
                (None, Some(ec)) if ec > col => {
                    let (e, w) = place((ec - 2) as usize);
                    w.unwrap_or(e + 1)
                }
                _ => start + 1,
            };
            // The value printed on the line: the action under the span, else the line's only one.
            let outputs: Vec<&Action> = l
                .actions
                .iter()
                .filter(|a| a.kind == ActKind::Output)
                .collect();
            let values = match wild_end {
                Some(_) => l
                    .actions
                    .iter()
                    .find(|a| a.start == start)
                    .and_then(|a| a.values.clone()),
                None if outputs.len() == 1 => outputs[0].values.clone(),
                None => None,
            };
            Some(TemplateSpot {
                line: j as u32 + 1,
                column: start as u32 + 1,
                end_column: (end.max(start + 1)) as u32 + 1,
                text: l.text.clone(),
                values,
            })
        }
        (How::Inserted, Kind::Block) => {
            let a = block_action()?;
            let values = a
                .values
                .as_ref()
                .and_then(|base| block_value_path(t, j, base, field));
            Some(TemplateSpot {
                line: j as u32 + 1,
                column: a.start as u32 + 1,
                end_column: a.end as u32 + 1,
                text: l.text.clone(),
                values,
            })
        }
        _ => None,
    }
}

/// The values path of a field inside a block printed from `.Values.<base>`: the block's parent
/// key (the key the block sits under) is found in the finding's field path, and what follows it
/// is appended to `base`.
fn block_value_path(t: &Template, j: usize, base: &str, field: &str) -> Option<String> {
    let l = &t.lines[j];
    let key = if t.prefixed[j] {
        key_of(&l.text)?
    } else {
        let indent = leading_ws(&l.text);
        t.lines[..j]
            .iter()
            .rev()
            .filter(|p| matches!(p.kind, Kind::Literal))
            .find(|p| leading_ws(&p.text) < indent)
            .and_then(|p| key_of(&p.text))?
    };
    let parts: Vec<&str> = field.split('.').collect();
    let at = parts.iter().rposition(|p| *p == key)?;
    let rest = &parts[at + 1..];
    if rest.is_empty() {
        return None;
    }
    Some(format!("{base}.{}", rest.join(".")))
}

/// The key of a `key:` line (`- key:` too), without quotes.
fn key_of(text: &str) -> Option<String> {
    let t = text.trim_start().trim_start_matches("- ").trim_start();
    let (k, _) = t.split_once(':')?;
    let k = k.trim().trim_matches(['"', '\'']);
    (!k.is_empty() && !k.contains('{')).then(|| k.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn align(template: &str, rendered: &str) -> Vec<Option<u32>> {
        let t = Template::parse(template);
        let lines: Vec<&str> = rendered.lines().filter(|l| !l.trim().is_empty()).collect();
        t.align(&lines)
            .into_iter()
            .map(|h| h.map(|(j, _)| j as u32 + 1))
            .collect()
    }

    #[test]
    fn literal_wildcard_control_and_block_lines() {
        let template = "\
# licence
{{- if .Values.on }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Values.name }}
  labels:
    {{- include \"x.labels\" . | nindent 4 }}
data:
  {{- toYaml .Values.data | nindent 2 }}
{{- end }}
";
        let rendered = "\
# licence
apiVersion: v1
kind: ConfigMap
metadata:
  name: web
  labels:
    a: b
    c: d
data:
  k: v
";
        assert_eq!(
            align(template, rendered),
            vec![
                Some(1),
                Some(3),
                Some(4),
                Some(5),
                Some(6),
                Some(7),
                Some(8),
                Some(8),
                Some(9),
                Some(10)
            ]
        );
    }

    #[test]
    fn two_blocks_in_a_row_are_ambiguous() {
        let template = "\
labels:
  {{- include \"a\" . | nindent 2 }}
  {{- with .Values.extra }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
";
        assert_eq!(align(template, "labels:\n  a: b\n"), vec![Some(1), None]);
    }

    #[test]
    fn documents_and_ranges() {
        let template = "\
apiVersion: v1
kind: A
---
apiVersion: v1
kind: B
items:
{{- range .Values.items }}
- name: {{ .name }}
  port: 80
{{- end }}
";
        assert_eq!(
            align(
                template,
                "apiVersion: v1\nkind: B\nitems:\n- name: a\n  port: 80\n- name: b\n  port: 80\n"
            ),
            vec![
                Some(4),
                Some(5),
                Some(6),
                Some(8),
                Some(9),
                Some(8),
                Some(9)
            ]
        );
        assert_eq!(
            align(template, "apiVersion: v1\nkind: A\n"),
            vec![Some(1), Some(2)]
        );
        // A line the template cannot produce: nothing is guessed.
        assert_eq!(
            align(template, "apiVersion: v1\nkind: C\n"),
            vec![None, None]
        );
    }

    #[test]
    fn a_document_separator_inside_a_condition_may_be_left_out() {
        let template = "\
# licence
{{- if .Values.account }}
kind: ServiceAccount
---
{{- end }}
kind: Deployment
spec:
";
        assert_eq!(
            align(template, "# licence\nkind: Deployment\nspec:\n"),
            vec![Some(1), Some(6), Some(7)]
        );
        assert_eq!(
            align(template, "kind: Deployment\nspec:\n"),
            vec![Some(6), Some(7)]
        );
    }

    #[test]
    fn defines_produce_nothing_where_they_are_written() {
        let template = "\
{{- define \"x\" }}
kind: Wrong
{{- end }}
kind: Right
";
        assert_eq!(align(template, "kind: Right\n"), vec![Some(4)]);
    }

    #[test]
    fn plain_values_references() {
        assert_eq!(plain_values(".Values.a.b", &Dot::Root), Some("a.b".into()));
        assert_eq!(
            plain_values(".Values.a.b | quote", &Dot::Root),
            Some("a.b".into())
        );
        assert_eq!(
            plain_values("toYaml .Values.r | nindent 10", &Dot::Root),
            Some("r".into())
        );
        assert_eq!(
            plain_values("toYaml . | nindent 4", &Dot::Values("p".into())),
            Some("p".into())
        );
        assert_eq!(plain_values(".Values.a | default 3", &Dot::Root), None);
        assert_eq!(plain_values("include \"x\" .", &Dot::Root), None);
        assert_eq!(plain_values(".Values.a.b", &Dot::Unknown), None);
    }

    #[test]
    fn values_paths_are_found_with_their_key_line() {
        let root = yaml::load_stream("a:\n  b: 1\n  l:\n  - x: 2\n", &Limits::default())
            .remove(0)
            .unwrap()
            .root;
        assert_eq!(lookup(&root, "a.b").unwrap().start.line, 2);
        assert_eq!(lookup(&root, "a.l[0].x").unwrap().start.line, 4);
        assert!(lookup(&root, "a.c").is_none());
    }
}
