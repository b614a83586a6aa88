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

/// A place in a file: 1-based line and column; `end_*` is exclusive and on the same or a later line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Location {
    pub file: String,
    pub line: u32,
    pub column: u32,
    pub end_line: u32,
    pub end_column: u32,
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
    /// Text of the offending line in the file as read (rendered stream for Helm output).
    #[serde(skip)]
    pub source_line: String,
}

/// Something the run wants the user to know that is not a finding (a skipped Helm template dir).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    pub file: String,
    pub message: String,
}
