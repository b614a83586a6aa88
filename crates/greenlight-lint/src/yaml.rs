//! Spanned YAML documents built from saphyr-parser events.
//!
//! Owns: turning a text stream into documents whose every node knows its 1-based line and
//! column, with hard budgets on alias expansion and nesting depth, and recovery after a syntax
//! error at the next `---` line. Must never: interpret Kubernetes meaning, recurse on input
//! depth, or panic on any input.
//!
//! Why our own tree: saphyr's tree loader copies a node for every alias reference, so a
//! "billion laughs" stream grows exponentially before anything can stop it. Building the tree
//! from parser events lets us charge each alias by the size of what it copies and stop the
//! document as soon as the budget is spent.

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError};
use std::borrow::Cow;
use std::collections::HashMap;

/// A 1-based line and 1-based column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub start: Pos,
    pub end: Pos,
}

#[derive(Debug, Clone)]
pub struct Scalar {
    pub text: String,
    /// Plain (unquoted, not block) scalars are the only ones YAML resolves to null/int/bool.
    pub plain: bool,
    /// How the scalar is written: what [`crate::embedded`] needs to find each character of
    /// `text` in the file.
    pub style: Style,
}

/// The five ways YAML writes a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    /// `|`: line breaks kept.
    Literal,
    /// `>`: line breaks folded into spaces.
    Folded,
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub key: Node,
    pub value: Node,
}

#[derive(Debug, Clone)]
pub enum Value {
    Scalar(Scalar),
    Seq(Vec<Node>),
    Map(Vec<Entry>),
}

#[derive(Debug, Clone)]
pub struct Node {
    pub span: Span,
    pub value: Value,
    /// A local tag written on the node (`!reference` in GitLab CI), without the core schema's
    /// `!!str`-style tags.
    pub tag: Option<Box<str>>,
}

const NO_NODES: &[Node] = &[];
const NO_ENTRIES: &[Entry] = &[];

impl Node {
    /// The entry with this (string) key, when this node is a mapping.
    pub fn entry(&self, key: &str) -> Option<&Entry> {
        self.as_map().iter().find(|e| e.key.as_str() == Some(key))
    }

    /// The value under this key, when this node is a mapping; YAML null counts as absent.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|e| &e.value).filter(|v| !v.is_null())
    }

    /// Follow a chain of mapping keys.
    pub fn at(&self, keys: &[&str]) -> Option<&Node> {
        keys.iter().try_fold(self, |n, k| n.get(k))
    }

    pub fn as_map(&self) -> &[Entry] {
        match &self.value {
            Value::Map(m) => m,
            _ => NO_ENTRIES,
        }
    }

    pub fn as_seq(&self) -> &[Node] {
        match &self.value {
            Value::Seq(s) => s,
            _ => NO_NODES,
        }
    }

    pub fn is_map(&self) -> bool {
        matches!(self.value, Value::Map(_))
    }

    /// Scalar text, whatever its style.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar(s) => Some(&s.text),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        match &self.value {
            Value::Scalar(s) => {
                s.plain && matches!(s.text.as_str(), "" | "~" | "null" | "Null" | "NULL")
            }
            _ => false,
        }
    }

    /// An integer, also when quoted: manifests in the wild quote numbers (`"30"`), and the
    /// question a rule asks is what the author meant, not whether the API server would coerce it.
    pub fn as_i64(&self) -> Option<i64> {
        let t = self.as_str()?.trim();
        let t = t.strip_prefix('+').unwrap_or(t);
        t.parse().ok()
    }

    pub fn as_bool(&self) -> Option<bool> {
        match &self.value {
            Value::Scalar(s) => match s.text.as_str() {
                "true" | "True" | "TRUE" => Some(true),
                "false" | "False" | "FALSE" => Some(false),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Budgets that keep hostile input bounded.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Nodes that alias references may copy into one document, in total.
    pub max_alias_nodes: usize,
    /// Maximum nesting of sequences and mappings.
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_alias_nodes: 100_000,
            max_depth: 200,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Document {
    pub root: Node,
    /// Line of the document's first event (its `---` when explicit).
    pub start_line: u32,
}

/// A document (or the rest of a stream) that could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    pub pos: Pos,
    pub message: String,
}

/// Load every document of a stream. A syntax error becomes one `Err` at its location and
/// loading resumes at the next line that starts a document (`---`).
pub fn load_stream(text: &str, limits: &Limits) -> Vec<Result<Document, LoadError>> {
    let mut out = Vec::new();
    let mut buf: Cow<str> = Cow::Borrowed(text);
    let mut start = 0usize; // byte offset of the current slice
    let mut offset_line = 0u32; // lines before the current slice
    let mut reindents = 0;
    // Blanks the workarounds below added at the start of a line (absolute line → columns):
    // positions on that line are given back in the columns of the text as written.
    let mut shifts: HashMap<u32, u32> = HashMap::new();
    loop {
        let before = out.len();
        let Some(err_line) = load_slice(&buf[start..], offset_line, limits, &shifts, &mut out)
        else {
            break;
        };
        if let Some(Err(err)) = out.last()
            && reindents < MAX_REINDENTS
            && let Some(fixed) = match err.message.as_str() {
                QUOTED_INDENT => reindent_quoted(&buf, start, offset_line, err.pos, &mut shifts),
                FLOW_INDENT | FLOW_SCALAR_INDENT => {
                    indent_flow_line(&buf, start, offset_line, err.pos, &mut shifts)
                }
                _ => None,
            }
        {
            // Parse again from the document that failed (documents before it stand), with
            // the offending lines indented.
            buf = Cow::Owned(fixed);
            let (resume, resume_line) = document_start_before(&buf, start, offset_line, err_line);
            let kept = out[before..]
                .iter()
                .take_while(|d| match d {
                    Ok(doc) => doc.start_line <= resume_line,
                    Err(e) => e.pos.line <= resume_line,
                })
                .count();
            out.truncate(before + kept);
            (start, offset_line) = (resume, resume_line);
            reindents += 1;
            continue;
        }
        // Resume at the first `---` line after the error line, or on it when it is not the
        // slice's first line: an unclosed flow collection is only noticed at the next `---`,
        // and the document that marker starts is intact. Never resume at the slice's start,
        // so every round moves forward.
        let mut consumed = 0usize;
        let mut resumed = false;
        for (i, line) in buf[start..].split_inclusive('\n').enumerate() {
            let line_no = offset_line + i as u32 + 1;
            if (line_no > err_line || (line_no == err_line && i > 0)) && is_document_start(line) {
                offset_line = line_no - 1;
                start += consumed;
                resumed = true;
                break;
            }
            consumed += line.len();
        }
        if !resumed {
            break;
        }
    }
    out
}

/// The last line at or before `line` of the slice at `start` that starts a document (`---`),
/// as a byte offset and the number of lines before it; the slice's own start when none does.
fn document_start_before(buf: &str, start: usize, offset_line: u32, line: u32) -> (usize, u32) {
    let mut found = (start, offset_line);
    let mut at = start;
    for (i, l) in buf[start..].split_inclusive('\n').enumerate() {
        let line_no = offset_line + i as u32 + 1;
        if line_no > line {
            break;
        }
        if i > 0 && is_document_start(l) {
            found = (at, line_no - 1);
        }
        at += l.len();
    }
    found
}

/// Byte offset in `buf` of the start of (absolute) line `line`, the slice at `start` holding
/// `offset_line` lines before it.
fn line_start(buf: &str, start: usize, offset_line: u32, line: u32) -> Option<usize> {
    let rel_line = line.checked_sub(offset_line + 1)? as usize;
    Some(
        start
            + buf[start..]
                .split_inclusive('\n')
                .take(rel_line)
                .map(str::len)
                .sum::<usize>(),
    )
}

const QUOTED_INDENT: &str = "invalid indentation in quoted scalar";
/// saphyr-parser's words for a token inside a flow collection that sits at or left of the
/// indentation of the block holding the collection (it says this only in flow context).
const FLOW_INDENT: &str = "invalid indentation";
const FLOW_SCALAR_INDENT: &str = "invalid indentation in flow construct";
const MAX_REINDENTS: usize = 64;

/// saphyr follows the YAML spec and rejects a quoted scalar whose continuation lines are not
/// indented deeper than its mapping; libyaml and go-yaml (so kubectl and Argo CD) accept it,
/// and real manifests rely on that. Line folding drops a continuation line's leading blanks,
/// so indenting those lines further changes no value and no line number: pad each one to one
/// column past the opening quote (recorded in `shifts`). `None` when no quote is at `pos`.
fn reindent_quoted(
    buf: &str,
    start: usize,
    offset_line: u32,
    pos: Pos,
    shifts: &mut HashMap<u32, u32>,
) -> Option<String> {
    let line_start = line_start(buf, start, offset_line, pos.line)?;
    let line = &buf[line_start..];
    let raw_col = pos.col + shifts.get(&pos.line).copied().unwrap_or(0);
    let (qi, quote) = line.char_indices().nth(raw_col.checked_sub(1)? as usize)?;
    if quote != '\'' && quote != '"' {
        return None;
    }
    let want = raw_col as usize; // columns of blanks: one past the quote
    let body_start = line_start + qi + 1;
    let mut out = String::with_capacity(buf.len() + 256);
    out.push_str(&buf[..body_start]);
    let mut chars = buf[body_start..].char_indices().peekable();
    let mut closed_at = None;
    let mut line_no = pos.line;
    let mut added: Vec<(u32, u32)> = Vec::new();
    let mut pad = |rest: &str, line_no: u32, out: &mut String| {
        let n = pad_line(rest, want, out);
        if n > 0 {
            added.push((line_no, n));
        }
    };
    while let Some((i, c)) = chars.next() {
        out.push(c);
        match c {
            '\\' if quote == '"' => {
                if let Some((_, n)) = chars.next() {
                    out.push(n);
                    if n == '\n' {
                        line_no += 1;
                        pad(&buf[body_start + i + 2..], line_no, &mut out);
                    }
                }
            }
            '\'' if quote == '\'' => {
                if chars.peek().map(|(_, n)| *n) == Some('\'') {
                    chars.next();
                    out.push('\'');
                } else {
                    closed_at = Some(body_start + i + 1);
                    break;
                }
            }
            '"' if quote == '"' => {
                closed_at = Some(body_start + i + 1);
                break;
            }
            '\n' => {
                line_no += 1;
                pad(&buf[body_start + i + 1..], line_no, &mut out);
            }
            _ => {}
        }
    }
    out.push_str(&buf[closed_at?..]);
    for (l, n) in added {
        *shifts.entry(l).or_default() += n;
    }
    Some(out)
}

/// Add blanks so the line starting `rest` is indented at least `want` columns (blank lines
/// are left alone: they are line breaks of the value). Returns how many were added.
fn pad_line(rest: &str, want: usize, out: &mut String) -> u32 {
    let line = rest.split('\n').next().unwrap_or("");
    let blanks = line.len() - line.trim_start_matches([' ', '\t']).len();
    if line.trim().is_empty() || blanks >= want {
        return 0;
    }
    out.extend(std::iter::repeat_n(' ', want - blanks));
    (want - blanks) as u32
}

/// saphyr follows the YAML spec and rejects a line inside a flow collection (`[`, `{`) that
/// is not indented deeper than the block holding the collection — typically the closing
/// bracket written under its key (`command: [` … `]`); libyaml, go-yaml and PyYAML ignore
/// indentation inside flow collections. Blanks before a flow token are never part of a value,
/// so the line gets one more leading blank (recorded in `shifts`) and the document is parsed
/// again; a line further left takes one round per column. `None` unless only blanks come
/// before the token at `pos` on its line.
fn indent_flow_line(
    buf: &str,
    start: usize,
    offset_line: u32,
    pos: Pos,
    shifts: &mut HashMap<u32, u32>,
) -> Option<String> {
    let line_start = line_start(buf, start, offset_line, pos.line)?;
    let line = buf[line_start..].split('\n').next().unwrap_or("");
    let blanks = line.len() - line.trim_start_matches([' ', '\t']).len();
    let shift = shifts.get(&pos.line).copied().unwrap_or(0);
    if blanks == line.len() || (pos.col + shift) as usize != blanks + 1 {
        return None;
    }
    let mut out = String::with_capacity(buf.len() + 1);
    out.push_str(&buf[..line_start]);
    out.push(' ');
    out.push_str(&buf[line_start..]);
    *shifts.entry(pos.line).or_default() += 1;
    Some(out)
}

fn is_document_start(line: &str) -> bool {
    let l = line.trim_end_matches(['\n', '\r']);
    l == "---" || l.starts_with("--- ") || l.starts_with("---\t")
}

enum Frame {
    Seq {
        start: Pos,
        anchor: usize,
        first: usize,
        items: Vec<Node>,
        tag: Option<Box<str>>,
    },
    Map {
        start: Pos,
        anchor: usize,
        first: usize,
        entries: Vec<Entry>,
        key: Option<Node>,
        tag: Option<Box<str>>,
    },
}

struct Builder<'l> {
    limits: &'l Limits,
    stack: Vec<Frame>,
    anchors: HashMap<usize, (Node, usize)>,
    /// Nodes created in this document, alias copies included; a collection's size is the
    /// difference between this counter at its end and at its start.
    created: usize,
    alias_copied: usize,
    root: Option<Node>,
    start_line: u32,
}

impl<'l> Builder<'l> {
    fn new(limits: &'l Limits, start_line: u32) -> Self {
        Builder {
            limits,
            stack: Vec::new(),
            anchors: HashMap::new(),
            created: 0,
            alias_copied: 0,
            root: None,
            start_line,
        }
    }

    fn finish_node(&mut self, node: Node, anchor: usize, size: usize) {
        if anchor != 0 {
            self.anchors.insert(anchor, (node.clone(), size));
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, key, .. }) => match key.take() {
                None => *key = Some(node),
                Some(k) => entries.push(Entry {
                    key: k,
                    value: node,
                }),
            },
        }
    }
}

/// Returns the (absolute) line of a syntax error when loading stopped on one.
fn load_slice(
    text: &str,
    offset_line: u32,
    limits: &Limits,
    shifts: &HashMap<u32, u32>,
    out: &mut Vec<Result<Document, LoadError>>,
) -> Option<u32> {
    let pos = |m: saphyr_parser::Marker| {
        unshift(
            Pos {
                line: m.line() as u32 + offset_line,
                col: m.col() as u32 + 1,
            },
            shifts,
        )
    };
    let mut parser = Parser::new_from_str(text);
    let mut doc: Option<Builder> = None;
    // Set when the current document blew a budget: its events are skipped until it ends.
    let mut abandoned = false;
    loop {
        let (event, span) = match parser.next_event() {
            None => return None,
            Some(Ok(ev)) => ev,
            Some(Err(e)) => {
                let mut err = scan_error(&e, offset_line);
                err.pos = unshift(err.pos, shifts);
                let line = err.pos.line;
                out.push(Err(err));
                return Some(line);
            }
        };
        let start = pos(span.start);
        let end = pos(span.end);
        match event {
            Event::StreamStart | Event::Nothing => {}
            Event::StreamEnd => return None,
            Event::DocumentStart(_) => {
                doc = Some(Builder::new(limits, start.line));
                abandoned = false;
            }
            Event::DocumentEnd => {
                if let Some(b) = doc.take()
                    && !abandoned
                    && let Some(root) = b.root
                {
                    out.push(Ok(Document {
                        root,
                        start_line: b.start_line,
                    }));
                }
                abandoned = false;
            }
            _ if abandoned => {}
            ev => {
                let Some(b) = doc.as_mut() else { continue };
                if let Err(err) = apply(b, ev, start, end) {
                    out.push(Err(err));
                    abandoned = true;
                    b.stack.clear();
                    b.anchors.clear();
                }
            }
        }
    }
}

fn apply(b: &mut Builder, ev: Event, start: Pos, end: Pos) -> Result<(), LoadError> {
    match ev {
        Event::Scalar(text, style, anchor, tag) => {
            b.created += 1;
            let plain = matches!(style, ScalarStyle::Plain);
            let style = match style {
                ScalarStyle::Plain => Style::Plain,
                ScalarStyle::SingleQuoted => Style::SingleQuoted,
                ScalarStyle::DoubleQuoted => Style::DoubleQuoted,
                ScalarStyle::Literal => Style::Literal,
                ScalarStyle::Folded => Style::Folded,
            };
            let node = Node {
                span: Span { start, end },
                value: Value::Scalar(Scalar {
                    text: text.into_owned(),
                    plain,
                    style,
                }),
                tag: local_tag(tag.as_deref()),
            };
            b.finish_node(node, anchor, 1);
        }
        Event::Alias(id) => {
            let Some((node, size)) = b.anchors.get(&id) else {
                return Err(LoadError {
                    pos: start,
                    message: "alias refers to an unknown anchor".into(),
                });
            };
            b.alias_copied += size;
            if b.alias_copied > b.limits.max_alias_nodes {
                return Err(LoadError {
                    pos: start,
                    message: format!(
                        "alias expansion exceeds {} nodes in this document (an alias bomb?); the document was not linted",
                        b.limits.max_alias_nodes
                    ),
                });
            }
            let (mut node, size) = (node.clone(), *size);
            // The copy sits where the alias is written, so findings point at the reference.
            node.span = Span { start, end };
            b.created += size;
            b.finish_node(node, 0, size);
        }
        Event::SequenceStart(anchor, ref tag) | Event::MappingStart(anchor, ref tag) => {
            if b.stack.len() >= b.limits.max_depth {
                return Err(LoadError {
                    pos: start,
                    message: format!(
                        "nesting deeper than {} levels; the document was not linted",
                        b.limits.max_depth
                    ),
                });
            }
            b.created += 1;
            let first = b.created;
            let tag = local_tag(tag.as_deref());
            b.stack.push(if matches!(ev, Event::SequenceStart(..)) {
                Frame::Seq {
                    start,
                    anchor,
                    first,
                    items: Vec::new(),
                    tag,
                }
            } else {
                Frame::Map {
                    start,
                    anchor,
                    first,
                    entries: Vec::new(),
                    key: None,
                    tag,
                }
            });
        }
        Event::SequenceEnd | Event::MappingEnd => {
            let Some(frame) = b.stack.pop() else {
                return Ok(());
            };
            let (node, anchor, size) = match frame {
                Frame::Seq {
                    start: s,
                    anchor,
                    first,
                    items,
                    tag,
                } => {
                    let e = items.last().map_or(end, |n| n.span.end.max(end));
                    (
                        Node {
                            span: Span { start: s, end: e },
                            value: Value::Seq(items),
                            tag,
                        },
                        anchor,
                        b.created - first + 1,
                    )
                }
                Frame::Map {
                    start: s,
                    anchor,
                    first,
                    entries,
                    tag,
                    ..
                } => {
                    let entries = apply_merge_keys(entries);
                    let e = entries.last().map_or(end, |en| en.value.span.end.max(end));
                    (
                        Node {
                            span: Span { start: s, end: e },
                            value: Value::Map(entries),
                            tag,
                        },
                        anchor,
                        b.created - first + 1,
                    )
                }
            };
            b.finish_node(node, anchor, size);
        }
        _ => {}
    }
    Ok(())
}

/// A local tag (`!reference`) as written; the core schema's `!!` tags say nothing a rule reads.
fn local_tag(tag: Option<&saphyr_parser::Tag>) -> Option<Box<str>> {
    let t = tag?;
    (t.handle == "!").then(|| format!("!{}", t.suffix).into_boxed_str())
}

/// YAML 1.1 merge keys (`<<: *base`), which the Kubernetes YAML decoder honours: explicit keys
/// win over merged ones, earlier merged maps over later ones.
fn apply_merge_keys(entries: Vec<Entry>) -> Vec<Entry> {
    let is_merge =
        |e: &Entry| matches!(&e.key.value, Value::Scalar(s) if s.plain && s.text == "<<");
    if !entries.iter().any(is_merge) {
        return entries;
    }
    let (merges, mut own): (Vec<Entry>, Vec<Entry>) = entries.into_iter().partition(is_merge);
    for m in merges {
        let sources: Vec<Node> = match m.value.value {
            Value::Map(_) => vec![m.value],
            Value::Seq(items) => items,
            Value::Scalar(_) => Vec::new(),
        };
        for src in sources {
            if let Value::Map(src_entries) = src.value {
                for e in src_entries {
                    let k = e.key.as_str();
                    if k.is_none() || !own.iter().any(|o| o.key.as_str() == k) {
                        own.push(e);
                    }
                }
            }
        }
    }
    own
}

/// A position in the text as written, from one in the text the workarounds indented.
fn unshift(p: Pos, shifts: &HashMap<u32, u32>) -> Pos {
    match shifts.get(&p.line) {
        Some(n) => Pos {
            line: p.line,
            col: p.col.saturating_sub(*n).max(1),
        },
        None => p,
    }
}

fn scan_error(e: &ScanError, offset_line: u32) -> LoadError {
    let m = e.marker();
    LoadError {
        pos: Pos {
            line: m.line() as u32 + offset_line,
            col: m.col() as u32 + 1,
        },
        message: e.info().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(t: &str) -> Vec<Result<Document, LoadError>> {
        load_stream(t, &Limits::default())
    }

    #[test]
    fn spans_are_one_based_and_point_at_keys_and_values() {
        let docs = load("a: 1\nb:\n  c: [x, \"y\"]\n");
        let root = &docs[0].as_ref().unwrap().root;
        let b = root.entry("b").unwrap();
        assert_eq!(b.key.span.start, Pos { line: 2, col: 1 });
        let c = root.at(&["b", "c"]).unwrap();
        assert_eq!(c.as_seq()[1].span.start, Pos { line: 3, col: 10 });
        assert_eq!(c.as_seq()[1].as_str(), Some("y"));
    }

    #[test]
    fn multi_document_streams_and_recovery_after_a_syntax_error() {
        let docs = load("a: 1\n---\nb: [unclosed\nc: 2\n---\nd: 4\n");
        assert_eq!(docs.len(), 3, "{docs:?}");
        assert!(docs[0].is_ok());
        let err = docs[1].as_ref().unwrap_err();
        assert!(err.pos.line >= 3, "{err:?}");
        let last = docs[2].as_ref().unwrap();
        assert_eq!(last.root.get("d").unwrap().span.start.line, 6);
    }

    #[test]
    fn alias_bomb_is_stopped_by_the_budget() {
        let mut t = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let refs = vec![format!("*a{}", i - 1); 10].join(", ");
            t.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        let docs = load(&t);
        assert_eq!(docs.len(), 1);
        let err = docs[0].as_ref().unwrap_err();
        assert!(err.message.contains("alias expansion"), "{err:?}");
    }

    #[test]
    fn small_aliases_and_merge_keys_resolve() {
        let docs = load("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\n");
        let root = &docs[0].as_ref().unwrap().root;
        let u = root.get("use").unwrap();
        assert_eq!(u.get("x").and_then(Node::as_i64), Some(1));
        assert_eq!(u.get("y").and_then(Node::as_i64), Some(3));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let t = "[".repeat(100_000);
        let docs = load(&t);
        assert!(docs.iter().any(|d| d.is_err()));
        let t = format!("{}1{}", "[".repeat(230), "]".repeat(230));
        let docs = load(&t);
        assert!(
            docs[0].as_ref().unwrap_err().message.contains("nesting"),
            "{docs:?}"
        );
    }

    #[test]
    fn quoted_scalars_indented_like_their_key_load_as_kubectl_reads_them() {
        let docs = load(
            "m:\n  - k: 1\n    message: 'abc\n    def ''x''\n    ghi'\n    next: \"a\\\n    b\n    c\"\n    after: 2\n",
        );
        let item = &docs[0].as_ref().unwrap().root.get("m").unwrap().as_seq()[0];
        assert_eq!(
            item.get("message").unwrap().as_str(),
            Some("abc def 'x' ghi")
        );
        assert_eq!(item.get("next").unwrap().as_str(), Some("ab c"));
        assert_eq!(
            item.entry("after").unwrap().key.span.start,
            Pos { line: 9, col: 5 }
        );
    }

    /// As PyYAML reads it (`yaml.safe_load`): {'svc': {'flagd': {'command': ['start',
    /// '--uri', 'x', 'file'], 'env': {'A': 1, 'B': [2, 3]}, 'ports': [8080]}}, 'top': [1, 2]}
    const FLOW_AT_KEY_INDENT: &str = "svc:
  flagd:
    command: [
      \"start\",
    \"--uri\", 'x',
  file
    ]
    env: {
      A: 1,
    B: [2,
  3]
    }
    ports:
      - 8080
top: [
1, 2
]
";

    #[test]
    fn flow_collections_closed_at_their_key_indent_load_as_kubectl_reads_them() {
        let docs = load(FLOW_AT_KEY_INDENT);
        assert_eq!(docs.len(), 1, "{docs:?}");
        let root = &docs[0].as_ref().unwrap().root;
        let flagd = root.at(&["svc", "flagd"]).unwrap();
        let command: Vec<_> = flagd.get("command").unwrap().as_seq().iter().collect();
        let texts: Vec<_> = command.iter().filter_map(|n| n.as_str()).collect();
        assert_eq!(texts, ["start", "--uri", "x", "file"]);
        // Positions are those of the text as written, also on the lines indented to load it.
        let at = |n: &Node| (n.span.start.line, n.span.start.col);
        assert_eq!(at(command[1]), (5, 5));
        assert_eq!(at(command[2]), (5, 14));
        assert_eq!(command[2].span.end, Pos { line: 5, col: 17 });
        assert_eq!(at(command[3]), (6, 3));
        let env = flagd.get("env").unwrap();
        assert_eq!(env.get("A").and_then(Node::as_i64), Some(1));
        let b = env.entry("B").unwrap();
        assert_eq!(at(&b.key), (10, 5));
        let b: Vec<_> = b.value.as_seq().iter().filter_map(Node::as_i64).collect();
        assert_eq!(b, [2, 3]);
        assert_eq!(at(&env.get("B").unwrap().as_seq()[1]), (11, 3));
        assert_eq!(at(&flagd.entry("ports").unwrap().key), (13, 5));
        let top = root.get("top").unwrap().as_seq();
        assert_eq!(top.len(), 2);
        assert_eq!(at(&top[0]), (16, 1));
        assert_eq!(at(&top[1]), (16, 4));
    }

    #[test]
    fn indenting_a_flow_line_is_bounded_and_keeps_other_errors() {
        // A real syntax error inside a flow collection is still one, at its own place.
        let docs = load("a: [\n  1,\n]\nb: [x: y: z]\n");
        let err = docs[0].as_ref().unwrap_err();
        assert_eq!(err.pos.line, 4, "{err:?}");
        // A line far left of its key takes one round per column: past the budget, the
        // document is an error at the line as written, and the next document still loads.
        let deep = format!("a:\n{}k: [\n1\n]\n---\nok: 1\n", " ".repeat(70));
        let docs = load(&deep);
        assert!(docs[0].is_err(), "{docs:?}");
        assert_eq!(docs[0].as_ref().unwrap_err().pos.col, 1);
        assert!(docs.last().unwrap().is_ok(), "{docs:?}");
    }

    #[test]
    fn huge_scalar_loads() {
        let t = format!("a: {}\n", "x".repeat(8 << 20));
        let docs = load(&t);
        assert_eq!(
            docs[0]
                .as_ref()
                .unwrap()
                .root
                .get("a")
                .unwrap()
                .as_str()
                .unwrap()
                .len(),
            8 << 20
        );
    }

    #[test]
    fn quoted_integers_and_nulls() {
        let docs = load("a: \"30\"\nb: ~\nc: 'null'\n");
        let root = &docs[0].as_ref().unwrap().root;
        assert_eq!(root.get("a").unwrap().as_i64(), Some(30));
        assert!(root.get("b").is_none());
        assert_eq!(root.get("c").unwrap().as_str(), Some("null"));
    }
}
