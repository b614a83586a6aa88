//! What a finding is once it leaves the engine: rule, severity, the offending field's location
//! and path, the object it belongs to, message, fix and related locations.
//! Must never: format for a particular output (that is `report`).

use serde::Serialize;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Severity> {
        match s {
            "info" => Some(Severity::Info),
            "warning" => Some(Severity::Warning),
            "error" => Some(Severity::Error),
            _ => None,
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, not `write_str`, so width and alignment apply (`{:<8}` in tables).
        f.pad(self.as_str())
    }
}

/// A place in a file: 1-based line and column; `end_*` is exclusive and on the same or a later
/// line. The line (and with it the columns) is `None` when it is not known: a Helm template
/// whose line could not be found with confidence; `rendered_line` then gives the line of the
/// rendered output the finding was made at, when there is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Location {
    pub file: String,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub end_line: Option<u32>,
    pub end_column: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rendered_line: Option<u32>,
}

impl Location {
    /// A place whose line is known.
    pub fn at(file: String, line: u32, column: u32, end_line: u32, end_column: u32) -> Location {
        Location {
            file,
            line: Some(line),
            column: Some(column),
            end_line: Some(end_line),
            end_column: Some(end_column),
            rendered_line: None,
        }
    }

    /// A file whose line is not known; `rendered_line` is the rendered output's line, if any.
    pub fn line_unknown(file: String, rendered_line: Option<u32>) -> Location {
        Location {
            file,
            line: None,
            column: None,
            end_line: None,
            end_column: None,
            rendered_line,
        }
    }

    /// `file:line:column`, or `file (line unknown; rendered output line N)`.
    pub fn display(&self) -> String {
        match (self.line, self.column) {
            (Some(l), Some(c)) => format!("{}:{l}:{c}", self.file),
            _ => format!("{} {}", self.file, self.unknown_note()),
        }
    }

    /// `(line unknown; rendered output line N)`, or `(line unknown)` without a rendered line.
    pub fn unknown_note(&self) -> String {
        match self.rendered_line {
            Some(n) => format!("(line unknown; rendered output line {n})"),
            None => "(line unknown)".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Related {
    #[serde(flatten)]
    pub location: Location,
    pub message: String,
}

/// The Kubernetes object a diagnostic is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ObjectRef {
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ", self.kind)?;
        if let Some(ns) = &self.namespace {
            write!(f, "{ns}/")?;
        }
        f.write_str(self.name.as_deref().unwrap_or("<unnamed>"))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub rule: &'static str,
    pub name: &'static str,
    pub severity: Severity,
    #[serde(flatten)]
    pub location: Location,
    pub object: Option<ObjectRef>,
    /// Dotted path of the offending field (`spec.template.spec.containers[0].image`).
    pub field: String,
    pub message: String,
    pub fix: Option<String>,
    pub related: Vec<Related>,
    /// Text of the offending line: the template's line for Helm output mapped to its template,
    /// else the line of the input as read.
    #[serde(skip)]
    pub source_line: String,
    /// Mechanical fixes (`--fix`, `--diff`), in this file or in copies folded into it; none
    /// for standard input, rendered Helm output and kustomize output mapped to its sources.
    #[serde(skip)]
    pub edits: Vec<crate::fix::TextEdit>,
}

/// Something the run wants the user to know that is not a finding (a skipped Helm template dir).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    pub file: String,
    pub message: String,
}
