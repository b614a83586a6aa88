//! The real-world corpus (`shared/corpus/manifests` beside the clone, see its SOURCES.md): every
//! file is linted with every rule enabled, as `greenlight lint` reads a directory (test
//! directories skipped) and with `--include-tests`; no panic, every location inside its file,
//! and a stable count per rule (snapshot). The corpus is not part of the repository: where it
//! is absent the test says so loudly on stderr and passes, except under `CI=true`, where
//! absence fails.

use greenlight_lint::{
    Options, RULES, ReadOptions, Report, Severity, Source, lint, read_inputs_with,
};
use std::collections::BTreeMap;
use std::fmt::Write;

fn corpus(test: &str) -> Option<String> {
    greenlight_testkit::corpus(env!("CARGO_MANIFEST_DIR"), test)
}

/// One run over the corpus: its report, the notes of reading, the files skipped as tests,
/// and the count of findings per rule and per source repository.
struct Run {
    report: Report,
    read_notes: usize,
    skipped_tests: usize,
    per_rule: BTreeMap<&'static str, usize>,
    per_severity: BTreeMap<(&'static str, Severity), usize>,
    per_repo: BTreeMap<String, usize>,
}

fn run(root: &str, include_tests: bool) -> Run {
    let read = ReadOptions {
        exclude: Vec::new(),
        include_tests,
    };
    let inputs = read_inputs_with(
        std::slice::from_ref(&root.to_string()),
        &read,
        &mut std::io::empty(),
    )
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
    let (per_rule, per_severity, per_repo) = check_and_count(root, &inputs.sources, &report);
    Run {
        report,
        // Chart `templates/` and test-directory skips are noted while reading inputs, as
        // `greenlight lint` reports them.
        read_notes: inputs.notes.len(),
        skipped_tests: inputs.skipped_tests,
        per_rule,
        per_severity,
        per_repo,
    }
}

type Counts = (
    BTreeMap<&'static str, usize>,
    BTreeMap<(&'static str, Severity), usize>,
    BTreeMap<String, usize>,
);

fn check_and_count(root: &str, sources: &[Source], report: &Report) -> Counts {
    let lines: BTreeMap<&str, usize> = sources
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
            .strip_prefix(root)
            .unwrap_or(&loc.file)
            .trim_start_matches('/');
        let repo = rel.split('/').next().unwrap_or("?").to_string();
        *per_repo.entry(repo).or_default() += 1;
    }
    (per_rule, per_severity, per_repo)
}

#[test]
fn corpus_counts_per_rule_are_stable() {
    let Some(root) = corpus("corpus_counts_per_rule_are_stable") else {
        return;
    };
    let runs = [run(&root, false), run(&root, true)];
    let mut out = String::new();
    for (what, r) in ["default", "--include-tests"].iter().zip(&runs) {
        let _ = writeln!(
            out,
            "{what}: files {} objects {} notes {} suppressed {} skipped-as-tests {} \
             findings {} duplicates {}",
            r.report.files,
            r.report.objects,
            r.report.notes.len() + r.read_notes,
            r.report.suppressed,
            r.skipped_tests,
            r.report.diagnostics.len(),
            r.report.duplicates,
        );
    }
    let _ = writeln!(
        out,
        "{:<46} {:>7} {:>15}",
        "rule", "default", "--include-tests"
    );
    for (rule, n) in &runs[0].per_rule {
        let name = RULES.iter().find(|r| r.id == *rule).map_or("", |r| r.name);
        // Rules that grade their findings show the split (default run | --include-tests).
        let split = |r: &Run| -> Vec<String> {
            r.per_severity
                .iter()
                .filter(|((id, _), _)| id == rule)
                .map(|((_, s), n)| format!("{s} {n}"))
                .collect()
        };
        let (a, b) = (split(&runs[0]), split(&runs[1]));
        let graded = if a.len() > 1 || b.len() > 1 {
            format!("  ({} | {})", a.join(", "), b.join(", "))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{rule} {name:<40} {n:>7} {:>15}{graded}",
            runs[1].per_rule[rule]
        );
    }
    let _ = writeln!(out, "-- per source repository --");
    for (repo, n) in &runs[1].per_repo {
        let d = runs[0].per_repo.get(repo).copied().unwrap_or(0);
        let _ = writeln!(out, "{repo:<46} {d:>7} {n:>15}");
    }
    insta::assert_snapshot!("corpus_counts", out);
}
