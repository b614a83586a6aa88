//! Fixture tests, one file per rule under `tests/fixtures/<ID>_<name>.yaml`: each runs with only
//! that rule enabled; the diagnostics are snapshotted, and independently of the snapshot every
//! object named `flagged-*` must get at least one diagnostic and every `ok-*` none.

mod common;

use common::{fixture_report, render};
use greenlight_lint::{Options, RULES, Source, lint, object::Object, yaml};
use std::collections::BTreeSet;

fn names(text: &str) -> Vec<String> {
    let docs: Vec<yaml::Document> = yaml::load_stream(text, &yaml::Limits::default())
        .into_iter()
        .filter_map(Result::ok)
        .collect();
    let mut objects = Vec::new();
    for d in &docs {
        Object::collect(&d.root, 0, &mut objects);
    }
    objects
        .iter()
        .filter_map(|o| o.name.map(str::to_string))
        .collect()
}

fn check_fixture(rule: &str) {
    let (text, report) = fixture_report(rule, |_| {});
    let flagged: BTreeSet<String> = report
        .diagnostics
        .iter()
        .map(|d| {
            assert_eq!(d.rule, rule, "only {rule} is enabled");
            d.object
                .as_ref()
                .and_then(|o| o.name.clone())
                .unwrap_or_default()
        })
        .collect();
    let all = names(&text);
    let mut expected = 0;
    for n in &all {
        if n.starts_with("flagged-") {
            expected += 1;
            assert!(
                flagged.contains(n),
                "{rule}: `{n}` should be flagged; got {flagged:?}"
            );
        } else if n.starts_with("ok-") {
            assert!(!flagged.contains(n), "{rule}: `{n}` should not be flagged");
        }
    }
    assert!(
        expected > 0 && all.iter().any(|n| n.starts_with("ok-")),
        "{rule}: fixture needs positive and negative cases"
    );
    for d in &report.diagnostics {
        assert!(d.location.line > Some(0) && d.location.column > Some(0));
        assert!(
            !d.field.is_empty(),
            "{rule}: diagnostics carry the field path"
        );
        assert!(d.fix.is_some(), "{rule}: diagnostics carry a fix");
    }
    insta::assert_snapshot!(rule, render(&report));
}

#[test]
fn gl001_mutable_image_tag() {
    check_fixture("GL001");
}
#[test]
fn gl002_image_not_pinned_by_digest() {
    check_fixture("GL002");
}
#[test]
fn gl101_prestop_sleep_exceeds_grace_period() {
    check_fixture("GL101");
}
#[test]
fn gl102_prestop_sleep_stopgap() {
    check_fixture("GL102");
}
#[test]
fn gl201_initial_delay_without_startup_probe() {
    check_fixture("GL201");
}
#[test]
fn gl202_liveness_readiness_same_endpoint() {
    check_fixture("GL202");
}
#[test]
fn gl301_implicit_rollout_strategy() {
    check_fixture("GL301");
}
#[test]
fn gl302_rolling_update_cannot_progress() {
    check_fixture("GL302");
}
#[test]
fn gl401_pdb_blocks_drain() {
    check_fixture("GL401");
}
#[test]
fn gl501_hpa_target_sets_replicas() {
    check_fixture("GL501");
}
#[test]
fn gl601_argocd_automated_prune() {
    check_fixture("GL601");
}
#[test]
fn gl602_argocd_image_updater_argocd_write_back() {
    check_fixture("GL602");
}

#[test]
fn every_checking_rule_has_a_fixture() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    let files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for r in RULES.iter().filter(|r| r.id != "GL000") {
        let want = format!("{}_{}.yaml", r.id, r.name.replace('-', "_"));
        assert!(files.contains(&want), "missing fixture {want}");
    }
}

#[test]
fn configured_mutable_tags_and_thresholds_apply() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: a\n    image: web:nightly-2024\n    \
                livenessProbe: {httpGet: {path: /, port: 80}, initialDelaySeconds: 45}\n";
    let src = || vec![Source::new("p.yaml".into(), text.into())];
    let default = lint(&src(), Vec::new(), &Options::default());
    assert!(default.diagnostics.is_empty(), "{:?}", default.diagnostics);
    let cfg = greenlight_lint::config::parse(
        "c.toml",
        "[lint]\nmutable-tags = [\"nightly*\"]\n[lint.thresholds]\ninitial-delay-seconds = 30\n",
    )
    .unwrap()
    .lint;
    let opts = Options::from_config(&cfg, None, &[]);
    let rules: Vec<&str> = lint(&src(), Vec::new(), &opts)
        .diagnostics
        .iter()
        .map(|d| d.rule)
        .collect();
    assert_eq!(rules, vec!["GL001", "GL201"]);
}

#[test]
fn strategy_threshold_is_configurable() {
    let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: 5\n  template:\n    spec:\n      \
                containers: [{name: a, image: 'a:1'}]\n";
    let cfg =
        greenlight_lint::config::parse("c.toml", "[lint.thresholds]\nstrategy-max-replicas = 5\n")
            .unwrap()
            .lint;
    let mut opts = Options::from_config(&cfg, Some(vec!["GL301"]), &[]);
    let src = vec![Source::new("d.yaml".into(), text.into())];
    assert_eq!(lint(&src, Vec::new(), &opts).diagnostics.len(), 1);
    opts.settings.strategy_max_replicas = 4;
    assert_eq!(lint(&src, Vec::new(), &opts).diagnostics.len(), 0);
}

#[test]
fn readme_rule_reference_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let (head, rest) = readme
        .split_once("<!-- rules:begin -->\n")
        .expect("README has the rules:begin marker");
    let (_, tail) = rest
        .split_once("<!-- rules:end -->")
        .expect("README has the rules:end marker");
    let table = greenlight_lint::report::rules_reference_markdown("../../docs/lint-rules.md");
    let current = format!("{head}<!-- rules:begin -->\n{table}<!-- rules:end -->{tail}");
    if std::env::var_os("GREENLIGHT_BLESS").is_some() {
        std::fs::write(path, &current).unwrap();
    }
    assert!(
        current == readme,
        "README rule table is stale: rerun with GREENLIGHT_BLESS=1"
    );
}

/// docs/lint-rules.md is the generated reference; a rule edited without regenerating it fails here.
#[test]
fn docs_lint_rules_md_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/lint-rules.md");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    let generated = greenlight_lint::report::reference_markdown();
    assert!(
        committed == generated,
        "docs/lint-rules.md is not what the rule table generates; regenerate it from the \
         repository root with:\n    {}",
        greenlight_lint::report::REFERENCE_COMMAND
    );
}
