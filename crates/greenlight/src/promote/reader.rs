//! A typed reader over greenlight-lint's spanned YAML tree, for configuration files. Every
//! problem becomes a [`ConfigError`] naming the file, line, column and field path, and reading
//! goes on, so that one run reports every mistake in a file.
//!
//! Types are read as YAML 1.2 resolves a plain scalar (as the JSON schema sees the file): `8080`
//! is a number, `"8080"` a string, `true` a boolean, an empty value null. Must never: coerce a
//! value of the wrong type, take the first of two equal keys silently, or ignore a key it does
//! not know.

use greenlight_lint::yaml::{Entry, Node, Pos, Value};
use std::fmt;

/// One problem in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    pub line: u32,
    pub column: u32,
    /// The field's path (`checks[2].prometheus.count`); empty for a problem with the whole file.
    pub field: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

/// A mapping whose keys have been checked against the ones its reader knows.
pub(crate) struct Map<'n> {
    pub node: &'n Node,
    /// Where "missing" is reported: the key that holds this mapping, or its list item.
    pub at: Pos,
    pub path: String,
}

impl<'n> Map<'n> {
    pub fn entry(&self, key: &str) -> Option<&'n Entry> {
        self.node.entry(key)
    }

    pub fn has(&self, key: &str) -> bool {
        self.entry(key).is_some()
    }

    pub fn path_of(&self, key: &str) -> String {
        join(&self.path, key)
    }
}

/// A value read from the file, with where it was written.
pub(crate) struct Field<'n, T> {
    pub value: T,
    pub node: &'n Node,
    pub path: String,
}

impl<T> Field<'_, T> {
    pub fn pos(&self) -> Pos {
        self.node.span.start
    }
}

pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The reader of one file: its name and the problems found so far.
pub(crate) struct Reader {
    pub file: String,
    pub errors: Vec<ConfigError>,
}

impl Reader {
    pub fn new(file: impl Into<String>) -> Reader {
        Reader {
            file: file.into(),
            errors: Vec::new(),
        }
    }

    pub fn error(&mut self, pos: Pos, field: &str, message: impl Into<String>) {
        self.errors.push(ConfigError {
            file: self.file.clone(),
            line: pos.line,
            column: pos.col,
            field: field.to_string(),
            message: message.into(),
        });
    }

    pub fn invalid<T>(&mut self, field: &Field<'_, T>, message: impl Into<String>) {
        let pos = field.pos();
        let path = field.path.clone();
        self.error(pos, &path, message);
    }

    /// `node` as a mapping of `known` keys. A `reserved` key (with the message saying why it
    /// cannot be used) and any other key are errors, and so is a key given twice.
    pub fn map<'n>(
        &mut self,
        node: &'n Node,
        at: Pos,
        path: &str,
        known: &[&str],
        reserved: &[(&str, &str)],
    ) -> Option<Map<'n>> {
        self.checked_map(node, at, path, Some(known), reserved)
    }

    fn checked_map<'n>(
        &mut self,
        node: &'n Node,
        at: Pos,
        path: &str,
        known: Option<&[&str]>,
        reserved: &[(&str, &str)],
    ) -> Option<Map<'n>> {
        if !node.is_map() {
            self.error(
                node.span.start,
                path,
                format!("expected a mapping, found {}", describe(node)),
            );
            return None;
        }
        let entries = node.as_map();
        for (i, e) in entries.iter().enumerate() {
            let key = e.key.as_str().unwrap_or("");
            let key_path = join(path, key);
            if let Some(first) = entries[..i].iter().find(|o| o.key.as_str() == Some(key)) {
                self.error(
                    e.key.span.start,
                    &key_path,
                    format!(
                        "given more than once (first on line {})",
                        first.key.span.start.line
                    ),
                );
            } else if let Some((_, why)) = reserved.iter().find(|(k, _)| *k == key) {
                self.error(e.key.span.start, &key_path, *why);
            } else if let Some(known) = known
                && !known.contains(&key)
            {
                let hint = match suggest(key, known) {
                    Some(s) => format!(" (did you mean `{s}`?)"),
                    None => String::new(),
                };
                self.error(
                    e.key.span.start,
                    &key_path,
                    format!("unknown field{hint}; known here: {}", known.join(", ")),
                );
            }
        }
        Some(Map {
            node,
            at,
            path: path.to_string(),
        })
    }

    /// `node` as a mapping whose keys are names the user chooses (`args`): only a key given
    /// twice is an error.
    pub fn free_map<'n>(&mut self, node: &'n Node, at: Pos, path: &str) -> Option<Map<'n>> {
        self.checked_map(node, at, path, None, &[])
    }

    /// The mapping under `key`, when present (and a mapping).
    pub fn sub_map<'n>(
        &mut self,
        m: &Map<'n>,
        key: &str,
        known: &[&str],
        reserved: &[(&str, &str)],
    ) -> Option<Map<'n>> {
        let e = self.present(m, key)?;
        self.map(&e.value, e.key.span.start, &m.path_of(key), known, reserved)
    }

    /// [`Reader::sub_map`], reporting it missing.
    pub fn req_map<'n>(
        &mut self,
        m: &Map<'n>,
        key: &str,
        what: &str,
        known: &[&str],
        reserved: &[(&str, &str)],
    ) -> Option<Map<'n>> {
        if !m.has(key) {
            self.missing(m, key, what);
            return None;
        }
        self.sub_map(m, key, known, reserved)
    }

    pub fn missing(&mut self, m: &Map<'_>, key: &str, what: &str) {
        self.error(m.at, &m.path_of(key), format!("missing (required): {what}"));
    }

    /// The entry under `key`, or `None` when absent; a null value is an error, not absence.
    fn present<'n>(&mut self, m: &Map<'n>, key: &str) -> Option<&'n Entry> {
        let e = m.entry(key)?;
        if e.value.is_null() {
            self.error(
                e.value.span.start,
                &m.path_of(key),
                "has no value (remove the key to use its default)",
            );
            return None;
        }
        Some(e)
    }

    fn field<'n, T>(&mut self, m: &Map<'n>, key: &str, value: Option<T>) -> Option<Field<'n, T>> {
        let e = m.entry(key)?;
        Some(Field {
            value: value?,
            node: &e.value,
            path: m.path_of(key),
        })
    }

    /// A string under `key`, when present.
    pub fn str<'n>(&mut self, m: &Map<'n>, key: &str) -> Option<Field<'n, String>> {
        let e = self.present(m, key)?;
        let value = self.string_value(&e.value, &m.path_of(key));
        self.field(m, key, value)
    }

    pub fn req_str<'n>(&mut self, m: &Map<'n>, key: &str, what: &str) -> Option<Field<'n, String>> {
        if !m.has(key) {
            self.missing(m, key, what);
            return None;
        }
        self.str(m, key)
    }

    /// A string scalar: quoted, or plain and not a number, boolean or null.
    pub fn string_value(&mut self, node: &Node, path: &str) -> Option<String> {
        match kind(node) {
            Kind::Str => Some(node.as_str().unwrap_or("").to_string()),
            Kind::Int | Kind::Float | Kind::Bool => {
                let text = node.as_str().unwrap_or("");
                self.error(
                    node.span.start,
                    path,
                    format!(
                        "expected a string, found {} (quote it, \"{text}\", if you mean the text)",
                        describe(node)
                    ),
                );
                None
            }
            _ => {
                self.error(
                    node.span.start,
                    path,
                    format!("expected a string, found {}", describe(node)),
                );
                None
            }
        }
    }

    /// Any scalar's text (an arg value: `0.01` and `"0.01"` alike).
    pub fn scalar_value(&mut self, node: &Node, path: &str) -> Option<String> {
        match kind(node) {
            Kind::Str | Kind::Int | Kind::Float | Kind::Bool => {
                Some(node.as_str().unwrap_or("").to_string())
            }
            _ => {
                self.error(
                    node.span.start,
                    path,
                    format!("expected a string, found {}", describe(node)),
                );
                None
            }
        }
    }

    /// An integer in `range` under `key`, when present.
    pub fn int<'n>(
        &mut self,
        m: &Map<'n>,
        key: &str,
        range: std::ops::RangeInclusive<i64>,
    ) -> Option<Field<'n, i64>> {
        let e = self.present(m, key)?;
        let value = self.int_value(&e.value, &m.path_of(key), range);
        self.field(m, key, value)
    }

    pub fn req_int<'n>(
        &mut self,
        m: &Map<'n>,
        key: &str,
        what: &str,
        range: std::ops::RangeInclusive<i64>,
    ) -> Option<Field<'n, i64>> {
        if !m.has(key) {
            self.missing(m, key, what);
            return None;
        }
        self.int(m, key, range)
    }

    pub fn int_value(
        &mut self,
        node: &Node,
        path: &str,
        range: std::ops::RangeInclusive<i64>,
    ) -> Option<i64> {
        if kind(node) != Kind::Int {
            self.error(
                node.span.start,
                path,
                format!("expected an integer, found {}", describe(node)),
            );
            return None;
        }
        let Some(v) = int_of(node.as_str().unwrap_or("")) else {
            self.error(node.span.start, path, "integer out of range");
            return None;
        };
        self.in_range(node, path, v, range)
    }

    pub fn in_range(
        &mut self,
        node: &Node,
        path: &str,
        v: i64,
        range: std::ops::RangeInclusive<i64>,
    ) -> Option<i64> {
        if range.contains(&v) {
            return Some(v);
        }
        let bounds = if *range.end() == i64::MAX {
            format!("at least {}", range.start())
        } else {
            format!("between {} and {}", range.start(), range.end())
        };
        self.error(
            node.span.start,
            path,
            format!("{v} is out of range: must be {bounds}"),
        );
        None
    }

    /// A boolean under `key`, when present.
    pub fn bool<'n>(&mut self, m: &Map<'n>, key: &str) -> Option<Field<'n, bool>> {
        let e = self.present(m, key)?;
        let value = if kind(&e.value) == Kind::Bool {
            e.value.as_bool()
        } else {
            self.error(
                e.value.span.start,
                &m.path_of(key),
                format!("expected true or false, found {}", describe(&e.value)),
            );
            None
        };
        self.field(m, key, value)
    }

    /// A duration under `key`, in milliseconds: a number of seconds or greenlight's duration
    /// text (`500ms`, `30s`, `15m`, `1h30m`). Zero only when `allow_zero`.
    pub fn duration<'n>(
        &mut self,
        m: &Map<'n>,
        key: &str,
        allow_zero: bool,
    ) -> Option<Field<'n, i64>> {
        let e = self.present(m, key)?;
        let path = m.path_of(key);
        let value = match kind(&e.value) {
            Kind::Int | Kind::Str => {
                self.duration_text(&e.value, &path, e.value.as_str().unwrap_or(""), allow_zero)
            }
            _ => {
                self.error(
                    e.value.span.start,
                    &path,
                    format!(
                        "expected a duration (`30s`, `15m`, or a number of seconds), found {}",
                        describe(&e.value)
                    ),
                );
                None
            }
        };
        self.field(m, key, value)
    }

    pub fn req_duration<'n>(
        &mut self,
        m: &Map<'n>,
        key: &str,
        what: &str,
        allow_zero: bool,
    ) -> Option<Field<'n, i64>> {
        if !m.has(key) {
            self.missing(m, key, what);
            return None;
        }
        self.duration(m, key, allow_zero)
    }

    pub fn duration_text(
        &mut self,
        node: &Node,
        path: &str,
        text: &str,
        allow_zero: bool,
    ) -> Option<i64> {
        match greenlight_core::time::parse_duration_ms(text) {
            Err(e) => {
                self.error(node.span.start, path, e);
                None
            }
            Ok(0) if !allow_zero => {
                self.error(node.span.start, path, "must be greater than zero");
                None
            }
            Ok(ms) => Some(ms),
        }
    }

    /// A list under `key`, when present.
    pub fn seq<'n>(&mut self, m: &Map<'n>, key: &str) -> Option<Field<'n, &'n [Node]>> {
        let e = self.present(m, key)?;
        let value = match &e.value.value {
            Value::Seq(items) => Some(items.as_slice()),
            _ => {
                self.error(
                    e.value.span.start,
                    &m.path_of(key),
                    format!("expected a list, found {}", describe(&e.value)),
                );
                None
            }
        };
        self.field(m, key, value)
    }
}

/// How YAML 1.2's core schema resolves a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Null,
    Bool,
    Int,
    Float,
    Str,
    Map,
    Seq,
}

pub(crate) fn kind(node: &Node) -> Kind {
    let s = match &node.value {
        Value::Map(_) => return Kind::Map,
        Value::Seq(_) => return Kind::Seq,
        Value::Scalar(s) => s,
    };
    if !s.plain {
        return Kind::Str;
    }
    let t = s.text.as_str();
    if node.is_null() {
        Kind::Null
    } else if node.as_bool().is_some() {
        Kind::Bool
    } else if is_int(t) {
        Kind::Int
    } else if is_float(t) {
        Kind::Float
    } else {
        Kind::Str
    }
}

fn is_int(t: &str) -> bool {
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    (!digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit()))
        || t.strip_prefix("0x")
            .is_some_and(|h| !h.is_empty() && h.bytes().all(|c| c.is_ascii_hexdigit()))
        || t.strip_prefix("0o")
            .is_some_and(|o| !o.is_empty() && o.bytes().all(|c| (b'0'..=b'7').contains(&c)))
}

fn int_of(t: &str) -> Option<i64> {
    if let Some(h) = t.strip_prefix("0x") {
        return i64::from_str_radix(h, 16).ok();
    }
    if let Some(o) = t.strip_prefix("0o") {
        return i64::from_str_radix(o, 8).ok();
    }
    t.strip_prefix('+').unwrap_or(t).parse().ok()
}

fn is_float(t: &str) -> bool {
    let lower = t.to_ascii_lowercase();
    let body = lower.strip_prefix(['-', '+']).unwrap_or(&lower);
    if matches!(body, ".inf" | ".nan") {
        return true;
    }
    let (mantissa, exponent) = match body.split_once('e') {
        Some((m, e)) => (m, Some(e)),
        None => (body, None),
    };
    let (whole, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |s: &str| s.bytes().all(|c| c.is_ascii_digit());
    let mantissa_ok = digits(whole) && digits(frac) && !(whole.is_empty() && frac.is_empty());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok && (mantissa.contains('.') || exponent.is_some())
}

/// What a node is, for an error message.
pub(crate) fn describe(node: &Node) -> String {
    let text = node.as_str().unwrap_or("");
    match kind(node) {
        Kind::Null => "nothing (null)".into(),
        Kind::Bool => format!("the boolean {text}"),
        Kind::Int | Kind::Float => format!("the number {text}"),
        Kind::Str => format!("the string {text:?}"),
        Kind::Map => "a mapping".into(),
        Kind::Seq => "a list".into(),
    }
}

/// The known key closest to a misspelt one, when it is close enough to be a typo.
fn suggest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| {
            (
                edit_distance(&key.to_ascii_lowercase(), &k.to_ascii_lowercase()),
                *k,
            )
        })
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenlight_lint::yaml::{Limits, load_stream};

    fn root(text: &str) -> Node {
        load_stream(text, &Limits::default())
            .remove(0)
            .unwrap()
            .root
    }

    #[test]
    fn scalars_resolve_as_yaml_1_2_does() {
        let r = root(
            "a: 1\nb: '1'\nc: 0.5\nd: true\ne: ~\nf: 15m\ng: 1e3\nh: 0x1F\ni: .inf\nj: 1.2.3\nk: -7\n",
        );
        let k = |key: &str| kind(&r.entry(key).unwrap().value);
        assert_eq!(k("a"), Kind::Int);
        assert_eq!(k("b"), Kind::Str);
        assert_eq!(k("c"), Kind::Float);
        assert_eq!(k("d"), Kind::Bool);
        assert_eq!(k("e"), Kind::Null);
        assert_eq!(k("f"), Kind::Str);
        assert_eq!(k("g"), Kind::Float);
        assert_eq!(k("h"), Kind::Int);
        assert_eq!(k("i"), Kind::Float);
        assert_eq!(k("j"), Kind::Str);
        assert_eq!(k("k"), Kind::Int);
        assert_eq!(int_of("0x1F"), Some(31));
    }

    #[test]
    fn unknown_duplicate_and_reserved_keys_are_named_with_their_line() {
        let r = root("live: 1\nchekcs: []\nlive: 2\nnotify: {}\n");
        let mut reader = Reader::new("p.yaml");
        reader.map(
            &r,
            r.span.start,
            "",
            &["live", "checks"],
            &[("notify", "reserved: not built yet")],
        );
        let shown: Vec<String> = reader.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            shown,
            [
                "p.yaml:2:1: chekcs: unknown field (did you mean `checks`?); known here: live, checks",
                "p.yaml:3:1: live: given more than once (first on line 1)",
                "p.yaml:4:1: notify: reserved: not built yet",
            ]
        );
    }

    #[test]
    fn suggestions_only_for_near_misses() {
        assert_eq!(
            suggest("intervall", &["interval", "count"]),
            Some("interval")
        );
        assert_eq!(
            suggest("sucessCondition", &["successCondition"]),
            Some("successCondition")
        );
        assert_eq!(suggest("zebra", &["interval", "count"]), None);
    }
}
