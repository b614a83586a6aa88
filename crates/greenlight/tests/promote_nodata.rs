//! End to end: a metric check whose query selects nothing in a real Prometheus measured nothing,
//! and that is never a pass (`docs/analysis.md#measured-nothing`): `greenlight promote run`
//! blocks the promotion saying so, and promotes only when the check allows no data
//! (`allowNoData`), the evidence still saying what it saw.

#[macro_use]
mod common;
use common::*;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

const LIVE: &str =
    "registry.local/web@sha256:1111111111111111111111111111111111111111111111111111111111111111";
const NEW: &str =
    "registry.local/web@sha256:2222222222222222222222222222222222222222222222222222222222222222";

/// A remote whose `main` holds the live app (`apps/web`, pinned to [`LIVE`]) and the
/// candidates' directory, the sandbox deploying both, settled.
fn world() -> (Repo, Sandbox) {
    let repo = Repo::new();
    repo.write("apps/web/deploy.yaml", &deployment("web", LIVE))
        .write("apps/candidates/README.md", "promotion candidates\n")
        .commit_push("web: pinned");
    let sb = sandbox(
        &repo,
        &["web=apps/web", "cands=apps/candidates"],
        &["--prune", "cands", "--allow-empty", "cands"],
    );
    settled(&sb, &repo, &["web", "cands"]);
    (repo, sb)
}

/// A promotion config for `apps/web` with these checks (YAML list items).
fn config(dir: &Path, checks: &str) -> String {
    let text = format!(
        "apiVersion: greenlight.dev/v1alpha1
kind: Promotion
live:
  app: web
  manifest: apps/web/deploy.yaml
  workload: {{kind: Deployment, name: web, namespace: apps, container: main}}
candidate:
  app: cands
  path: apps/candidates
  port: 8080
checks:
{checks}promotion:
  watch: {{mode: shadow, deadline: 60s}}
"
    );
    let file = dir.join("promote.yaml");
    std::fs::write(&file, text).unwrap();
    file.to_string_lossy().into_owned()
}

fn run(repo: &Repo, sb: &Sandbox, config: &str) -> (Output, String, String) {
    let o = promote_cmd(
        repo,
        &sb.url,
        "run",
        config,
        &["--candidate", NEW, "--candidate-deadline", "30s"],
    );
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    (o, out, err)
}

/// `docs/promote.schema.json` accepts (`true`) or refuses the config at `path`, as Python's
/// `jsonschema` says (`pip install jsonschema pyyaml`).
#[track_caller]
fn assert_schema(path: &str, accepts: bool) {
    use std::io::Write;
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/promote.schema.json");
    let script = "import sys, json, yaml, jsonschema\n\
                  schema = json.load(open(sys.argv[1]))\n\
                  errors = list(jsonschema.Draft7Validator(schema).iter_errors(yaml.safe_load(sys.stdin)))\n\
                  for e in errors: print(list(e.absolute_path), e.message)\n\
                  sys.exit(3 if errors else 0)\n";
    let mut child = std::process::Command::new("python3")
        .args(["-c", script, schema.to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let text = std::fs::read_to_string(path).unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(if accepts { 0 } else { 3 }),
        "schema on {path} (or the validator is missing: pip install jsonschema pyyaml):\n{text}\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn live_manifest(repo: &Repo) -> String {
    repo.bare_git(&["show", "main:apps/web/deploy.yaml"])
}

/// The error-rate query selects the candidate's 5xx series, which does not exist (the
/// candidate served no traffic): Prometheus answers an empty vector. The failure condition is
/// false on it, so Argo Rollouts would pass the check; greenlight blocks it as "measured
/// nothing" unless `allowNoData: true`.
#[test]
fn a_prometheus_check_that_measured_nothing_blocks_unless_it_allows_no_data() {
    use greenlight_testkit::{Exporter, Prometheus};
    let exporter = Exporter::start();
    exporter.set(
        "candidate_requests",
        &[("service", "web-candidate"), ("code", "200")],
        3.0,
    );
    let prom = Prometheus::start(&exporter);
    // Prometheus has scraped the exporter: the 200 series is there, the 500 one is not.
    prom.wait_for_value(
        "candidate_requests{service=\"web-candidate\",code=\"200\"}",
        |v| v == [3.0],
        Duration::from_secs(30),
    );
    let (repo, sb) = world();
    let dir = tempfile::tempdir().unwrap();
    let check = |extra: &str| {
        format!(
            "  - name: errors
    prometheus:
      address: {}
      query: candidate_requests{{service=\"{{{{candidate.service}}}}\",code=\"500\"}}
      count: 2
      interval: 200ms
      failureCondition: any(result, {{# > 0}})
{extra}",
            prom.url()
        )
    };

    let cfg = config(dir.path(), &check(""));
    let (o, out, err) = run(&repo, &sb, &cfg);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    for expected in [
        "check 1 errors (prometheus) undecided, promotion blocked: Inconclusive: errors Inconclusive (1 measured: 0 successful, 0 failed, 1 inconclusive, 0 error)",
        "Metric \"errors\" assessed Inconclusive due to inconclusive (1) > inconclusiveLimit (0): measured nothing (empty result), never a pass unless the check allows it (allowNoData: true)",
        "last values: errors [] (measured nothing (empty result))",
    ] {
        assert!(out.contains(expected), "{expected:?} missing from:\n{out}");
    }
    assert_eq!(live_manifest(&repo), deployment("web", LIVE).trim_end());

    let cfg = config(dir.path(), &check("      allowNoData: yes please\n"));
    assert_schema(&cfg, false);
    let (o, out, err) = run(&repo, &sb, &cfg);
    assert_eq!(o.status.code(), Some(2), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("checks[0].prometheus.allowNoData: expected true or false"),
        "{err}"
    );

    let cfg = config(dir.path(), &check("      allowNoData: true\n"));
    assert_schema(&cfg, true);
    let (o, out, err) = run(&repo, &sb, &cfg);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    for expected in [
        "check 1 errors (prometheus) passed: Successful: errors Successful (2 measured: 2 successful",
        "last values: errors [] (measured nothing (empty result), allowed by allowNoData)",
    ] {
        assert!(out.contains(expected), "{expected:?} missing from:\n{out}");
    }
    assert_eq!(live_manifest(&repo), deployment("web", NEW).trim_end());
}

/// The same through an Argo Rollouts AnalysisTemplate: the check names the template's metrics
/// that may measure nothing; a metric it does not name still blocks, and a name that is no
/// metric of the template is a configuration error.
#[test]
fn an_analysis_template_check_allows_no_data_only_for_the_metrics_it_names() {
    use greenlight_testkit::{Exporter, Prometheus};
    let exporter = Exporter::start();
    exporter.set("candidate_latency", &[("service", "web-candidate")], 0.2);
    let prom = Prometheus::start(&exporter);
    prom.wait_for_value(
        "candidate_latency{service=\"web-candidate\"}",
        |v| v == [0.2],
        Duration::from_secs(30),
    );
    let (repo, sb) = world();
    let dir = tempfile::tempdir().unwrap();
    let template = format!(
        "apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: web
spec:
  metrics:
  - name: latency
    successCondition: all(result, {{# < 0.5}})
    provider:
      prometheus:
        address: {url}
        query: candidate_latency{{service=\"web-candidate\"}}
  - name: errors
    successCondition: all(result, {{# < 0.01}})
    provider:
      prometheus:
        address: {url}
        query: candidate_error_ratio{{service=\"web-candidate\"}}
",
        url = prom.url()
    );
    std::fs::write(dir.path().join("web.yaml"), template).unwrap();
    let check = |allow: &str| {
        format!("  - name: slo\n    analysisTemplate:\n      file: web.yaml\n{allow}")
    };

    let cfg = config(dir.path(), &check("      allowNoData: [latency]\n"));
    let (o, out, err) = run(&repo, &sb, &cfg);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    for expected in [
        "check 1 slo (analysisTemplate) undecided, promotion blocked: Inconclusive:",
        "Metric \"errors\" assessed Inconclusive due to inconclusive (1) > inconclusiveLimit (0): measured nothing (empty result)",
        "last values: latency [0.2]; errors [] (measured nothing (empty result))",
    ] {
        assert!(out.contains(expected), "{expected:?} missing from:\n{out}");
    }
    assert_eq!(live_manifest(&repo), deployment("web", LIVE).trim_end());

    let cfg = config(dir.path(), &check("      allowNoData: [latncy]\n"));
    let (o, out, err) = run(&repo, &sb, &cfg);
    assert_eq!(o.status.code(), Some(2), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("checks[0].analysisTemplate.allowNoData[0]: `latncy` is no metric of the template (it has `latency`, `errors`)"),
        "{err}"
    );

    let cfg = config(dir.path(), &check("      allowNoData: [errors, errors]\n"));
    assert_schema(&cfg, false);
    let (o, out, err) = run(&repo, &sb, &cfg);
    assert_eq!(o.status.code(), Some(2), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("checks[0].analysisTemplate.allowNoData[1]: `errors` is given twice"),
        "{err}"
    );

    let cfg = config(dir.path(), &check("      allowNoData: [errors]\n"));
    assert_schema(&cfg, true);
    let (o, out, err) = run(&repo, &sb, &cfg);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("last values: latency [0.2]; errors [] (measured nothing (empty result), allowed by allowNoData)"),
        "{out}"
    );
    assert_eq!(live_manifest(&repo), deployment("web", NEW).trim_end());
}
