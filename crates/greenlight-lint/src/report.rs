//! Reporters: human (source line with a marker, like rustc and ruff), JSON (schema in the
//! crate README), SARIF 2.1.0 (GitHub code scanning) and GitHub workflow annotations; and the
//! rule list and reference (`greenlight rules`, `greenlight explain`, docs/lint-rules.md).
//! Must never: decide what is a finding or which findings fail the run; each reporter only
//! renders a finished [`Report`] into a string.

use crate::Report;
use crate::diagnostic::{Diagnostic, Location, Severity};
use crate::rules::{RULES, Rule};
use serde_json::{Value, json};
use std::fmt::Write;
use std::path::Path;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// JSON output format version; bumped on any incompatible change.
pub const JSON_VERSION: u32 = 2;

/// rustc/ruff-style text.
pub fn human(report: &Report) -> String {
    let mut out = String::new();
    for d in &report.diagnostics {
        let loc = &d.location;
        let _ = writeln!(out, "{}[{}]: {}", d.severity, d.rule, d.message);
        // A template line that is not known shows the rendered output's line under its number.
        let line_no = loc
            .line
            .or(loc.rendered_line)
            .map(|l| l.to_string())
            .unwrap_or_default();
        let pad = " ".repeat(line_no.len());
        let _ = writeln!(out, "{pad}--> {}", loc.display());
        if !d.source_line.is_empty() && !line_no.is_empty() {
            let _ = writeln!(out, "{pad} |");
            let _ = writeln!(out, "{line_no} | {}", d.source_line);
            // A template line that is not known: mark the field on the rendered line shown.
            let marked = match loc.line {
                None => d
                    .related
                    .iter()
                    .map(|r| &r.location)
                    .find(|l| l.line.is_some() && l.line == loc.rendered_line)
                    .unwrap_or(loc),
                Some(_) => loc,
            };
            let _ = writeln!(out, "{pad} | {}", marker(&d.source_line, marked));
        }
        if let Some(o) = &d.object {
            let _ = writeln!(out, "{pad} = object: {o}");
        }
        if !d.field.is_empty() {
            let _ = writeln!(out, "{pad} = field: {}", d.field);
        }
        for r in &d.related {
            let _ = writeln!(
                out,
                "{pad} = related: {}: {}",
                r.location.display(),
                r.message
            );
        }
        if let Some(fix) = &d.fix {
            let _ = writeln!(out, "{pad} = fix: {fix}");
        }
        out.push('\n');
    }
    for n in &report.notes {
        let _ = writeln!(out, "note: {}", n.message);
    }
    let (e, w, i) = (
        report.count(Severity::Error),
        report.count(Severity::Warning),
        report.count(Severity::Info),
    );
    let mut suppressed = String::new();
    if report.duplicates > 0 {
        let _ = write!(
            suppressed,
            ", {} more on copies of the same objects (shown as related)",
            report.duplicates
        );
    }
    if report.suppressed > 0 {
        let _ = write!(suppressed, ", {} suppressed", report.suppressed);
    }
    if report.diagnostics.is_empty() {
        let _ = writeln!(
            out,
            "No problems found in {} file(s), {} object(s){suppressed}.",
            report.files, report.objects
        );
    } else {
        let _ = writeln!(
            out,
            "Found {} problem(s): {e} error(s), {w} warning(s), {i} info in {} file(s), {} object(s){suppressed}.",
            report.diagnostics.len(),
            report.files,
            report.objects
        );
    }
    out
}

/// `^^^^` under the span on its first line (at least one character); for a location whose
/// line is unknown, under the rendered line's column when known, else the whole line.
fn marker(line: &str, loc: &Location) -> String {
    let column = loc.column.unwrap_or(1);
    let end_column = loc.end_column.unwrap_or(0);
    let start = column.saturating_sub(1) as usize;
    let chars: Vec<char> = line.chars().collect();
    let end = if loc.end_line == loc.line && end_column > column {
        (end_column - 1) as usize
    } else {
        chars.len().max(start + 1)
    };
    let mut m: String = chars
        .iter()
        .take(start)
        .map(|c| if *c == '\t' { '\t' } else { ' ' })
        .collect();
    m.push_str(&"^".repeat(end.saturating_sub(start).max(1)));
    m
}

/// Machine-readable output; the schema is documented in the crate README.
pub fn json(report: &Report) -> String {
    let v = json!({
        "version": JSON_VERSION,
        "tool": {"name": "greenlight", "version": VERSION},
        "diagnostics": report.diagnostics,
        "notes": report.notes,
        "summary": {
            "files": report.files,
            "bytes": report.bytes,
            "objects": report.objects,
            "errors": report.count(Severity::Error),
            "warnings": report.count(Severity::Warning),
            "infos": report.count(Severity::Info),
            "suppressed": report.suppressed,
            "duplicates": report.duplicates,
        },
    });
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}

/// The rule list as JSON (`greenlight rules --format json`).
pub fn rules_json() -> String {
    let rules: Vec<Value> = RULES
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "name": r.name,
                "severity": r.severity,
                "default_enabled": r.default_enabled,
                "summary": r.summary,
            })
        })
        .collect();
    let mut s = serde_json::to_string_pretty(&rules).unwrap_or_default();
    s.push('\n');
    s
}

/// The rule list as a table (`greenlight rules`).
pub fn rules_table() -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<6} {:<40} {:<8} {:<4} SUMMARY",
        "ID", "NAME", "SEVERITY", "ON"
    );
    for r in RULES {
        let _ = writeln!(
            out,
            "{:<6} {:<40} {:<8} {:<4} {}",
            r.id,
            r.name,
            r.severity,
            if r.default_enabled { "yes" } else { "no" },
            r.summary
        );
    }
    out
}

/// The rule table in Markdown, each ID linking to its section at `link_base` + `#gl101`
/// (`""` inside the reference itself; a relative path to it from elsewhere).
pub fn rules_reference_markdown(link_base: &str) -> String {
    let mut out =
        String::from("| ID | Name | Severity | Default | Summary |\n|---|---|---|---|---|\n");
    for r in RULES {
        let _ = writeln!(
            out,
            "| [{}]({link_base}#{}) | `{}` | {} | {} | {} |",
            r.id,
            r.anchor(),
            r.name,
            r.severity,
            if r.default_enabled { "on" } else { "off" },
            r.summary
        );
    }
    out
}

/// The command, run from the repository root, that writes [`crate::rules::REFERENCE_DOC`].
pub const REFERENCE_COMMAND: &str =
    "cargo run -q -p greenlight -- rules --format markdown > docs/lint-rules.md";

/// The whole rule reference, `docs/lint-rules.md` (`greenlight rules --format markdown`): the
/// table, then every rule's documentation under a stable anchor (`#gl101`), the same text
/// `greenlight explain` prints.
pub fn reference_markdown() -> String {
    let mut out = format!(
        "# Lint rules\n\n\
         <!-- Generated from the rule table (crates/greenlight-lint/src/rules); do not edit.\n     \
         Regenerate from the repository root: {REFERENCE_COMMAND} -->\n\n\
         Every rule of `greenlight lint`, as `greenlight rules` lists them and `greenlight explain \
         <ID>` prints them. Rules marked off run only when selected (`--select`, or \
         `extend-select` in `.greenlight.toml`); configuration, suppression and output formats are \
         described in [crates/greenlight-lint/README.md](../crates/greenlight-lint/README.md).\n\n"
    );
    out.push_str(&rules_reference_markdown(""));
    for r in RULES {
        let _ = write!(
            out,
            "\n<a id=\"{}\"></a>\n\n## {} `{}`\n\n{}",
            r.anchor(),
            r.id,
            r.name,
            rule_body(r, "###")
        );
    }
    out
}

/// Severity, summary and the four documentation sections, with headings at `level`.
fn rule_body(r: &Rule, level: &str) -> String {
    format!(
        "Severity: {} (default{}).\n\n{}\n\n{level} What it does\n\n{}\n\n{level} Why it matters\n\n{}\n\n\
         {level} Example\n\n```yaml\n{}```\n\n{level} How to fix\n\n{}\n",
        r.severity,
        if r.default_enabled {
            ", on"
        } else {
            ", off: enable with --select or [lint] extend-select"
        },
        r.summary,
        r.docs.what,
        r.docs.why,
        r.docs.example,
        r.docs.fix
    )
}

/// A rule's documentation (`greenlight explain`), as Markdown.
pub fn explain(r: &Rule) -> String {
    format!(
        "# {} {}\n\n{}\nReference: {}\n",
        r.id,
        r.name,
        rule_body(r, "##"),
        r.reference()
    )
}

fn fingerprint(d: &Diagnostic) -> String {
    let base = format!(
        "{}:{}:{}",
        d.rule,
        d.object.as_ref().map(|o| o.to_string()).unwrap_or_default(),
        d.field
    );
    let pipeline = d.object.is_none()
        && crate::rules::find(d.rule)
            .is_some_and(|r| matches!(r.check, crate::rules::Check::Pipeline(_)));
    if pipeline {
        format!("{base}:{}", d.message)
    } else {
        base
    }
}

fn sarif_level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// Percent-encode what may not appear in a URI path.
fn uri_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A path relative to `cwd` (so URIs match the repository and stay stable between runs), or a
/// `file://` URI when it lies outside.
fn artifact(file: &str, cwd: &Path) -> Value {
    let p = Path::new(file);
    if p.is_absolute() {
        if let Ok(rel) = p.strip_prefix(cwd) {
            return json!({"uri": uri_encode(&rel.to_string_lossy().replace('\\', "/")), "uriBaseId": "SRCROOT"});
        }
        return json!({"uri": format!("file://{}", uri_encode(&file.replace('\\', "/")))});
    }
    json!({"uri": uri_encode(file), "uriBaseId": "SRCROOT"})
}

fn region(l: &Location) -> Value {
    let (Some(line), Some(column)) = (l.line, l.column) else {
        // GitHub requires a start line: the file's first, with the message saying it is unknown.
        return json!({"startLine": 1});
    };
    let end_line = l.end_line.unwrap_or(line);
    let end_column = l.end_column.unwrap_or(column);
    let end_column = if end_line == line {
        end_column.max(column)
    } else {
        end_column.max(1)
    };
    json!({
        "startLine": line.max(1),
        "startColumn": column.max(1),
        "endLine": end_line.max(line).max(1),
        "endColumn": end_column.max(1),
    })
}

/// A message, with ` (line unknown; rendered output line N)` when the location has no line.
fn with_unknown_note(message: &str, l: &Location) -> String {
    if l.line.is_some() {
        message.to_string()
    } else {
        format!("{message} {}", l.unknown_note())
    }
}

fn help_markdown(r: &Rule) -> String {
    format!(
        "**{}** ({}, reference: `{}`)\n\n### What it does\n{}\n\n### Why it matters\n{}\n\n### Example\n```yaml\n{}```\n\n### How to fix\n{}\n",
        r.name,
        r.id,
        r.reference(),
        r.docs.what,
        r.docs.why,
        r.docs.example,
        r.docs.fix
    )
}

/// SARIF 2.1.0. `cwd` makes artifact URIs relative.
pub fn sarif(report: &Report, cwd: &Path) -> String {
    let rules: Vec<Value> = RULES
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "name": r.name,
                "shortDescription": {"text": r.summary},
                "fullDescription": {"text": r.docs.what},
                // GitHub does not show helpUri, so the whole documentation goes into help.
                "help": {
                    "text": format!("{}\n\nWhy: {}\n\nFix: {}", r.docs.what, r.docs.why, r.docs.fix),
                    "markdown": help_markdown(r),
                },
                "defaultConfiguration": {"level": sarif_level(r.severity), "enabled": r.default_enabled},
                "properties": {"tags": ["rollout-safety"]},
            })
        })
        .collect();
    let results: Vec<Value> = report
        .diagnostics
        .iter()
        .map(|d| {
            let index = RULES.iter().position(|r| r.id == d.rule).unwrap_or(0);
            let mut text = with_unknown_note(&d.message, &d.location);
            if let Some(fix) = &d.fix {
                text.push_str("\nFix: ");
                text.push_str(fix);
            }
            let mut loc = json!({
                "physicalLocation": {"artifactLocation": artifact(&d.location.file, cwd), "region": region(&d.location)},
            });
            if let Some(o) = &d.object {
                let ns = o.namespace.as_deref().unwrap_or("");
                let name = o.name.as_deref().unwrap_or("");
                loc["logicalLocations"] = json!([{
                    "name": format!("{} {}", o.kind, name),
                    "fullyQualifiedName": format!("{}/{}/{}/{}", o.api_version, o.kind, ns, name),
                    "kind": "object",
                }]);
            }
            let related: Vec<Value> = d
                .related
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    json!({
                        "id": i + 1,
                        "physicalLocation": {"artifactLocation": artifact(&r.location.file, cwd), "region": region(&r.location)},
                        "message": {"text": with_unknown_note(&r.message, &r.location)},
                    })
                })
                .collect();
            let mut result = json!({
                "ruleId": d.rule,
                "ruleIndex": index,
                "level": sarif_level(d.severity),
                "message": {"text": text},
                "locations": [loc],
                // Stable across edits that move lines: the rule, the object and the field; a
                // pipeline finding names no object, and one step may hold several, so its
                // message (the key and value it is about) is part of it too.
                "partialFingerprints": {"greenlightField/v1": fingerprint(d)},
            });
            if !related.is_empty() {
                result["relatedLocations"] = Value::Array(related);
            }
            result
        })
        .collect();
    let notes: Vec<Value> = report
        .notes
        .iter()
        .map(|n| json!({"level": "note", "message": {"text": n.message}}))
        .collect();
    let cwd_uri = format!(
        "file://{}/",
        uri_encode(cwd.to_string_lossy().trim_end_matches('/'))
    );
    let v = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "greenlight",
                "version": VERSION,
                "semanticVersion": VERSION,
                "rules": rules,
            }},
            "originalUriBaseIds": {"SRCROOT": {"uri": cwd_uri}},
            "invocations": [{"executionSuccessful": true, "toolExecutionNotifications": notes}],
            "results": results,
        }],
    });
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}

fn gh_escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn gh_escape_prop(s: &str) -> String {
    gh_escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// GitHub Actions workflow commands (`::error file=…,line=…::…`).
pub fn github(report: &Report) -> String {
    let mut out = String::new();
    for d in &report.diagnostics {
        let cmd = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "notice",
        };
        let l = &d.location;
        let mut msg = with_unknown_note(&d.message, l);
        if let Some(o) = &d.object {
            msg = format!("{o}: {msg}");
        }
        if let Some(fix) = &d.fix {
            msg.push_str("\nFix: ");
            msg.push_str(fix);
        }
        // Without a known line the annotation is on the file as a whole.
        let place = match (l.line, l.column) {
            (Some(line), Some(col)) => format!(
                ",line={line},col={col},endLine={}",
                l.end_line.unwrap_or(line)
            ),
            _ => String::new(),
        };
        // An annotation has no related locations: name the copies folded into this one.
        let copies: Vec<String> = d
            .related
            .iter()
            .filter(|r| r.message == crate::COPY)
            .map(|r| match r.location.line {
                Some(line) => format!("{}:{line}", r.location.file),
                None => format!("{} (line unknown)", r.location.file),
            })
            .collect();
        if !copies.is_empty() {
            let shown = copies.len().min(5);
            let _ = write!(
                msg,
                "\nAlso on copies of this object: {}",
                copies[..shown].join(", ")
            );
            if copies.len() > shown {
                let _ = write!(msg, " and {} more", copies.len() - shown);
            }
        }
        let _ = writeln!(
            out,
            "::{cmd} file={}{place},title={}::{}",
            gh_escape_prop(&l.file),
            gh_escape_prop(&format!("{} {}", d.rule, d.name)),
            gh_escape_data(&msg)
        );
    }
    for n in &report.notes {
        let _ = writeln!(
            out,
            "::notice file={}::{}",
            gh_escape_prop(&n.file),
            gh_escape_data(&n.message)
        );
    }
    out
}

/// Whether a diagnostic's severity reaches `fail_on` — kept here so every format agrees.
pub fn reaches(d: &Diagnostic, fail_on: crate::FailOn) -> bool {
    fail_on.fails(d.severity)
}
