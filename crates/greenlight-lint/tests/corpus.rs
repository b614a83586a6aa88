//! The real-world corpus (`shared/corpus/manifests` beside the clone, see its SOURCES.md): every
//! file is linted with every rule enabled; no panic, every location inside its file, and a stable
//! count per rule (snapshot). The corpus is not part of the repository: where it is absent the
//! test says so loudly on stderr and passes, except under `CI=true`, where absence fails.

use greenlight_lint::{Options, RULES, Severity, lint, read_inputs};
use std::collections::BTreeMap;
use std::fmt::Write;

fn corpus(test: &str) -> Option<String> {
    greenlight_testkit::corpus(env!("CARGO_MANIFEST_DIR"), test)
}

#[test]
fn corpus_counts_per_rule_are_stable() {
    let Some(root) = corpus("corpus_counts_per_rule_are_stable") else {
        return;
    };
    let inputs = read_inputs(std::slice::from_ref(&root), &[], &mut std::io::empty())
        .expect("corpus is readable");
    assert!(
        inputs.sources.len() > 1000,
        "corpus looks truncated: {} files",
        inputs.sources.len()
    );
    let opts = Options {
        enabled: RULES.iter().map(|r| r.id).collect(),
        ..Options::default()
    };
    let report = lint(&inputs.sources, inputs.unreadable, &opts);

    let lines: BTreeMap<&str, usize> = inputs
        .sources
        .iter()
        .map(|s| (s.name.as_str(), s.text.lines().count()))
        .collect();
    let mut per_rule: BTreeMap<&str, usize> = RULES.iter().map(|r| (r.id, 0)).collect();
    let mut per_severity: BTreeMap<(&str, Severity), usize> = BTreeMap::new();
    let mut per_repo: BTreeMap<String, usize> = BTreeMap::new();
    for d in &report.diagnostics {
        *per_rule.get_mut(d.rule).unwrap() += 1;
        *per_severity.entry((d.rule, d.severity)).or_default() += 1;
        let loc = &d.location;
        assert!(loc.line >= Some(1) && loc.column >= Some(1), "{d:?}");
        // Plain files: the line exists. Helm-mapped findings carry the rendered line as related.
        let real = lines.get(loc.file.as_str()).copied().or_else(|| {
            d.related
                .last()
                .and_then(|r| lines.get(r.location.file.as_str()))
                .map(|_| usize::MAX)
        });
        // Files that are not text (GL000 at 1:1) have no source to check against.
        let unreadable = d.rule == "GL000" && loc.line == Some(1) && d.source_line.is_empty();
        let n = real
            .or(unreadable.then_some(1))
            .unwrap_or_else(|| panic!("diagnostic in an unknown file: {d:?}"));
        assert!(
            (loc.line.unwrap_or(0) as usize) <= n.max(1),
            "{} beyond the end of the file",
            loc.display()
        );
        let rel = loc
            .file
            .strip_prefix(root.as_str())
            .unwrap_or(&loc.file)
            .trim_start_matches('/');
        let repo = rel.split('/').next().unwrap_or("?").to_string();
        *per_repo.entry(repo).or_default() += 1;
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "files {} objects {} notes {} suppressed {}",
        report.files,
        report.objects,
        // Chart `templates/` skips are noted while reading inputs, as `greenlight lint` reports them.
        report.notes.len() + inputs.notes.len(),
        report.suppressed
    );
    for (rule, n) in &per_rule {
        let name = RULES.iter().find(|r| r.id == *rule).map_or("", |r| r.name);
        // Rules that grade their findings show the split.
        let split: Vec<String> = per_severity
            .iter()
            .filter(|((r, _), _)| r == rule)
            .map(|((_, s), n)| format!("{s} {n}"))
            .collect();
        if split.len() > 1 {
            let _ = writeln!(out, "{rule} {name:<40} {n} ({})", split.join(", "));
        } else {
            let _ = writeln!(out, "{rule} {name:<40} {n}");
        }
    }
    let _ = writeln!(out, "-- per source repository --");
    for (repo, n) in &per_repo {
        let _ = writeln!(out, "{repo} {n}");
    }
    insta::assert_snapshot!("corpus_counts", out);
}
