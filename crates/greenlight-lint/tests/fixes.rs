//! `--fix` on the rule fixtures: every edit the fixable rules (GL101, GL301, GL302) attach is
//! applied, and the fixed file is linted again — the findings that carried a fix are gone,
//! nothing new appears, every other rule finds what it found before, the file still parses,
//! and every comment is kept.

mod common;

use common::fixtures_dir;
use greenlight_lint::{Options, RULES, Source, fix, lint};
use std::collections::BTreeSet;

fn fixed(rule: &'static str) -> (String, String, usize) {
    let r = RULES.iter().find(|r| r.id == rule).unwrap();
    let file = format!("{}_{}.yaml", r.id, r.name.replace('-', "_"));
    let text = std::fs::read_to_string(format!("{}/{file}", fixtures_dir())).unwrap();
    let opts = Options {
        enabled: [r.id, "GL000"].into_iter().collect(),
        ..Options::default()
    };
    let before = lint(
        &[Source::new(file.clone(), text.clone())],
        Vec::new(),
        &opts,
    );
    let with_fix = before
        .diagnostics
        .iter()
        .filter(|d| !d.edits.is_empty())
        .count();
    let edits = fix::select(
        before
            .diagnostics
            .iter()
            .flat_map(|d| d.edits.iter().cloned())
            .collect(),
    );
    let refs: Vec<&fix::TextEdit> = edits.iter().collect();
    let new = fix::apply(&text, &refs).expect("the edits apply");
    (text, new, with_fix)
}

fn objects_flagged(rule: &'static str, name: &str, text: &str) -> BTreeSet<String> {
    let opts = Options {
        enabled: [rule, "GL000"].into_iter().collect(),
        ..Options::default()
    };
    let r = lint(&[Source::new(name.into(), text.into())], Vec::new(), &opts);
    assert!(
        r.diagnostics.iter().all(|d| d.rule != "GL000"),
        "{rule}: the fixed file parses: {:?}",
        r.diagnostics
    );
    r.diagnostics
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                d.object
                    .as_ref()
                    .and_then(|o| o.name.clone())
                    .unwrap_or_default(),
                d.field
            )
        })
        .collect()
}

#[test]
fn each_fixable_rule_fixes_its_fixture_and_the_fixed_file_lints_clean_of_it() {
    for rule in ["GL101", "GL301", "GL302"] {
        let (text, new, with_fix) = fixed(rule);
        assert!(with_fix > 0, "{rule}: some finding carries a fix");
        let before = objects_flagged(rule, "f.yaml", &text);
        let after = objects_flagged(rule, "f.yaml", &new);
        assert!(
            after.is_subset(&before),
            "{rule}: nothing new: {:?}",
            after.difference(&before)
        );
        assert_eq!(
            before.len() - after.len(),
            with_fix,
            "{rule}: each finding with a fix is gone; left: {after:?}"
        );
        for line in text.lines().filter(|l| l.trim_start().starts_with('#')) {
            assert!(new.contains(line), "{rule}: comment kept: {line}");
        }
        // Nothing else changed: every other rule finds exactly what it found before.
        let others = |t: &str| -> BTreeSet<String> {
            let opts = Options {
                enabled: RULES
                    .iter()
                    .map(|r| r.id)
                    .filter(|id| *id != rule)
                    .collect(),
                ..Options::default()
            };
            lint(&[Source::new("f.yaml".into(), t.into())], Vec::new(), &opts)
                .diagnostics
                .iter()
                .map(|d| format!("{} {} {}", d.rule, d.field, d.message))
                .collect()
        };
        assert_eq!(others(&text), others(&new), "{rule}: other rules' findings");
    }
}

#[test]
fn no_edits_for_stdin_or_rendered_helm_output() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  terminationGracePeriodSeconds: 5\n  containers:\n  - name: a\n    image: a:1\n    lifecycle: {preStop: {exec: {command: [sleep, '10']}}}\n";
    let opts = Options::default();
    let file = lint(
        &[Source::new("p.yaml".into(), text.into())],
        Vec::new(),
        &opts,
    );
    assert!(file.diagnostics.iter().any(|d| !d.edits.is_empty()));
    let stdin = lint(&[Source::stdin(text.into())], Vec::new(), &opts);
    assert!(stdin.diagnostics.iter().all(|d| d.edits.is_empty()));
    let render = format!("---\n# Source: chart/templates/p.yaml\n{text}");
    let committed = lint(
        &[Source::new("render.yaml".into(), render)],
        Vec::new(),
        &opts,
    );
    assert!(!committed.diagnostics.is_empty());
    assert!(committed.diagnostics.iter().all(|d| d.edits.is_empty()));
}
