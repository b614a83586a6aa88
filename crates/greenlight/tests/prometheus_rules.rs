//! `deploy/prometheus/rules.yaml`, the PrometheusRule alerting on greenlight itself: its rule
//! groups (`spec`) pass Debian's `promtool check rules`, its unit tests
//! (`deploy/prometheus/rules_test.yaml`: each alert fires, and stays silent, when it should)
//! pass `promtool test rules`, and every metric an alert reads is one greenlight serves.

mod yaml;

use greenlight::clock::SystemClock;
use greenlight::metrics::Metrics;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

const RULES: &str = "deploy/prometheus/rules.yaml";
const RULES_TEST: &str = "deploy/prometheus/rules_test.yaml";

fn promtool() -> PathBuf {
    greenlight_testkit::process::find_tool(
        "promtool",
        &["/usr/bin/promtool"],
        "promtool is missing (no /usr/bin/promtool, none on PATH): run scripts/test, which \
         installs Debian's prometheus package (or: apt-get install -y --no-install-recommends prometheus)",
    )
}

/// The PrometheusRule's `spec` (its rule groups) in a file of its own, `rules.yaml`, with the
/// unit tests beside it: written as JSON, which is YAML.
fn extracted() -> (tempfile::TempDir, Value) {
    let rule = yaml::load(RULES);
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1", "{RULES}");
    assert_eq!(rule["kind"], "PrometheusRule", "{RULES}");
    let spec = rule["spec"].clone();
    assert!(spec["groups"].is_array(), "{RULES}: spec.groups");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.yaml"), spec.to_string()).unwrap();
    std::fs::copy(
        yaml::repo_root().join(RULES_TEST),
        dir.path().join("rules_test.yaml"),
    )
    .unwrap();
    (dir, spec)
}

fn run(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(promtool())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run promtool");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "promtool {} failed:\n{text}",
        args.join(" ")
    );
    text
}

fn alerts(spec: &Value) -> Vec<&Value> {
    spec["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .collect()
}

#[test]
fn the_rules_pass_promtool_check() {
    let (dir, spec) = extracted();
    let out = run(dir.path(), &["check", "rules", "rules.yaml"]);
    let n = alerts(&spec).len();
    assert!(out.contains(&format!("SUCCESS: {n} rules found")), "{out}");
}

#[test]
fn each_alert_fires_and_stays_silent_in_promtools_unit_tests() {
    let (dir, spec) = extracted();
    let out = run(dir.path(), &["test", "rules", "rules_test.yaml"]);
    assert!(out.contains("SUCCESS"), "{out}");
    // Every alert is tested.
    let tests = std::fs::read_to_string(yaml::repo_root().join(RULES_TEST)).unwrap();
    for rule in alerts(&spec) {
        let name = rule["alert"].as_str().expect("every rule is an alert");
        assert!(
            tests.contains(&format!("alertname: {name}\n")),
            "{RULES_TEST} does not test {name}"
        );
        for key in ["summary", "description", "runbook_url"] {
            assert!(
                rule["annotations"][key].is_string(),
                "{name}: annotation {key}"
            );
        }
        assert_eq!(rule["annotations"]["runbook_url"], "docs/deploy.md#alerts");
    }
}

#[test]
fn a_failing_expectation_fails_promtool() {
    // The unit tests can fail: the same file with one alert expected at a moment it is silent.
    let (dir, _) = extracted();
    let path = dir.path().join("rules_test.yaml");
    let tests = std::fs::read_to_string(&path).unwrap();
    let broken = tests.replacen("eval_time: 9m\n        alertname: GreenlightDown\n        exp_alerts: []", "eval_time: 9m\n        alertname: GreenlightDown\n        exp_alerts:\n          - exp_labels:\n              severity: critical", 1);
    assert_ne!(broken, tests, "the edit applies");
    std::fs::write(&path, broken).unwrap();
    let out = Command::new(promtool())
        .args(["test", "rules", "rules_test.yaml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success(), "promtool passed a wrong expectation");
}

#[test]
fn every_metric_an_alert_reads_is_served() {
    let (_, spec) = extracted();
    // As the runtime has it once it knows its source.
    let metrics = Metrics::new(Arc::new(SystemClock));
    metrics.runtime_configured("argocd", Duration::from_secs(30));
    let page = metrics.render(false);
    for rule in alerts(&spec) {
        let expr = rule["expr"].as_str().unwrap();
        let names: Vec<&str> = expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("greenlight_"))
            .collect();
        assert!(!names.is_empty(), "{expr}");
        for name in names {
            assert!(
                page.lines()
                    .any(|l| l.starts_with(&format!("{name}{{"))
                        || l.starts_with(&format!("{name} "))),
                "{}: {name} is not served:\n{page}",
                rule["alert"]
            );
        }
    }
}
