//! Helpers shared by the integration tests: run a fixture, render diagnostics compactly.
#![allow(dead_code)]

use greenlight_lint::{Options, RULES, Report, Source, lint};
use std::fmt::Write;

pub fn fixtures_dir() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures")
}

/// Lint the fixture of `rule` with only that rule enabled (after `tweak`); returns its text too.
pub fn fixture_report(rule: &str, tweak: impl FnOnce(&mut Options)) -> (String, Report) {
    let r = RULES.iter().find(|r| r.id == rule).expect("known rule");
    let file = format!("{}_{}.yaml", r.id, r.name.replace('-', "_"));
    let text =
        std::fs::read_to_string(format!("{}/{file}", fixtures_dir())).expect("fixture exists");
    let mut opts = Options {
        enabled: [r.id].into_iter().collect(),
        ..Options::default()
    };
    tweak(&mut opts);
    let report = lint(&[Source::new(file, text.clone())], Vec::new(), &opts);
    (text, report)
}

/// A line or column, `?` when unknown.
fn n(v: Option<u32>) -> String {
    v.map_or_else(|| "?".into(), |v| v.to_string())
}

/// One block per diagnostic: location, rule, severity, object, field, message, fix, related.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    for d in &report.diagnostics {
        let l = &d.location;
        let obj = d.object.as_ref().map(|o| o.to_string()).unwrap_or_default();
        let _ = writeln!(
            out,
            "{}:{}:{}-{}:{} {} {} [{obj}] {}",
            l.file,
            n(l.line),
            n(l.column),
            n(l.end_line),
            n(l.end_column),
            d.rule,
            d.severity,
            d.field
        );
        let _ = writeln!(out, "  {}", d.message);
        if let Some(f) = &d.fix {
            let _ = writeln!(out, "  fix: {f}");
        }
        for r in &d.related {
            let _ = writeln!(
                out,
                "  related {}:{}:{}: {}",
                r.location.file,
                n(r.location.line),
                n(r.location.column),
                r.message
            );
        }
    }
    out
}
