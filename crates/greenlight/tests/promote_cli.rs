//! `greenlight promote plan --config <file>`, run as a user runs it: the shipped example, the
//! plan's order, worst cases and total, the slow-before-fast warning, Argo Rollouts
//! AnalysisTemplates used as they are, and configuration errors naming the file, line and field.
//!
//! Every valid config here, the shipped example and the README's and docs' complete examples
//! are validated against docs/promote.schema.json with Python's `jsonschema` (the YAML read by
//! PyYAML). Like the SARIF test, it fails — never skips — when they are missing:
//! `pip install jsonschema pyyaml`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn greenlight(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_greenlight"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run greenlight")
}

fn plan(dir: &Path, config: &str) -> Output {
    greenlight(dir, &["promote", "plan", "--config", config])
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let p = d.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    d
}

/// A config up to its `checks:` line; the checks follow from line 16.
const HEAD: &str = "apiVersion: greenlight.dev/v1alpha1
kind: Promotion
live:
  app: web
  manifest: deploy/prod/web.yaml
  workload:
    kind: Deployment
    name: web
    namespace: shop
    container: web
candidate:
  app: web-candidates
  path: deploy/candidates
  port: 8080
checks:
";

fn config(checks: &str) -> String {
    format!("{HEAD}{checks}")
}

const READY: &str = "  - name: ready
    http:
      url: http://{{candidate.service}}.{{candidate.namespace}}.svc:{{candidate.port}}/healthz
      timeout: 5s
";

/// An Argo Rollouts AnalysisTemplate as the Argo Rollouts docs write one: args (one with a
/// default), `{{args.*}}` in the query, the address and a condition, and an IntOrString count.
const ERROR_RATE_TEMPLATE: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: success-rate
  namespace: shop
spec:
  args:
  - name: service-name
  - name: threshold
    value: "0.95"
  - name: measurements
    value: "4"
  metrics:
  - name: success-rate
    interval: 1m
    count: "{{args.measurements}}"
    successCondition: result[0] >= {{args.threshold}}
    failureLimit: 1
    provider:
      prometheus:
        address: http://prometheus.example.com:9090
        timeout: 15
        query: |
          sum(irate(
            istio_requests_total{reporter="source",destination_service=~"{{args.service-name}}",response_code!~"5.*"}[5m]
          )) /
          sum(irate(
            istio_requests_total{reporter="source",destination_service=~"{{args.service-name}}"}[5m]
          ))
"#;

fn validate_against_schema(name: &str, yaml: &str) {
    let script = "import sys, json, yaml, jsonschema\n\
                  schema = json.load(open(sys.argv[1]))\n\
                  jsonschema.Draft7Validator.check_schema(schema)\n\
                  errors = list(jsonschema.Draft7Validator(schema).iter_errors(yaml.safe_load(sys.stdin)))\n\
                  for e in errors: print(list(e.absolute_path), e.message)\n\
                  sys.exit(1 if errors else 0)\n";
    let o = run_python(script, yaml);
    assert!(
        o.status.success(),
        "{name} does not validate against docs/promote.schema.json (or the validator is missing: pip install jsonschema pyyaml):\n{}{}",
        stdout(&o),
        stderr(&o)
    );
}

/// The schema refuses it too (where a schema can say what is wrong).
fn assert_schema_refuses(name: &str, yaml: &str) {
    let script = "import sys, json, yaml, jsonschema\n\
                  schema = json.load(open(sys.argv[1]))\n\
                  errors = list(jsonschema.Draft7Validator(schema).iter_errors(yaml.safe_load(sys.stdin)))\n\
                  sys.exit(3 if errors else 0)\n";
    let o = run_python(script, yaml);
    assert_eq!(
        o.status.code(),
        Some(3),
        "the schema accepts {name}, which greenlight refuses (or the validator is missing: pip install jsonschema pyyaml):\n{}",
        stderr(&o)
    );
}

fn run_python(script: &str, stdin: &str) -> Output {
    let schema = repo().join("docs/promote.schema.json");
    let mut child = Command::new("python3")
        .args(["-c", script, schema.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 is needed to validate against docs/promote.schema.json");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Plans `text` and expects exit 2 with an error naming `file:line:column: field: …`.
fn assert_refused(text: &str, want: &str) -> String {
    let d = dir_with(&[("promote.yaml", text)]);
    let o = plan(d.path(), "promote.yaml");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{}{err}", stdout(&o));
    assert!(
        err.lines()
            .any(|l| l.starts_with(&format!("error: {want}"))),
        "want `error: {want}…` in:\n{err}"
    );
    assert!(stdout(&o).is_empty(), "nothing is planned: {}", stdout(&o));
    err
}

#[test]
fn the_shipped_example_plans_its_checks_in_order_with_worst_cases_and_the_total() {
    let o = plan(&repo(), "examples/promote.yaml");
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "",
        "the example orders its checks fast to slow: no warning"
    );
    let expected = [
        "examples/promote.yaml: a valid promotion config",
        "  live       Deployment nav/nav-api, container `api`, in deploy/prod/nav-api.yaml (Application argocd/nav-prod)",
        "  promotion  a commit with the trailer `Nav-Watchdog: app=argocd/nav-prod deadline=900s mode=arm expect=Healthy`, pushed to the branch",
        "  retention  a failed candidate is kept 24h",
        "checks, in the order they run (the gate stops at the first that does not pass):",
        "   1. ready       http                  5s  GET http://{{candidate.service}}.{{candidate.namespace}}.svc:{{candidate.port}}/healthz expecting 200 and a body containing \"\\\"status\\\":\\\"UP\\\"\"",
        "   2. smoke       command               2m  runs [\"./scripts/smoke.sh\", \"--image={{candidate.image}}\", \"http://{{candidate.service}}.{{candidate.namespace}}.svc:{{candidate.port}}\"], passing on exit 0",
        "   3. error-rate  prometheus        13m50s  10 measurement(s) of http://prometheus.monitoring.svc:9090",
        "      = 1m initialDelay + 10 × 10s query timeout + 9 × 30s interval + 20 error retries × (10s + 10s retry wait)",
        "   4. latency     analysisTemplate  15m40s  AnalysisTemplate `latency` (analysis/latency.yaml): 2 metric(s), measured together",
        "      metric `p99`: 15m40s = 5 × 20s query timeout + 4 × 1m interval + 20 error retries × (20s + 10s retry wait)",
        "      metric `saturation`: 6m = 30s initialDelay + 3 × 30s query timeout + 2 × 1m interval + 3 error retries × (30s + 10s retry wait)",
        "total worst case: 31m35s (4 check(s) one after another; the wait for the candidate to become healthy comes first and is not counted)",
    ];
    for line in expected {
        assert!(
            out.lines().any(|l| l == line),
            "missing line:\n{line}\nin:\n{out}"
        );
    }
    // The checks come in the written order.
    let order: Vec<usize> = ["1. ready", "2. smoke", "3. error-rate", "4. latency"]
        .iter()
        .map(|c| out.find(c).unwrap_or_else(|| panic!("{c} in {out}")))
        .collect();
    assert!(order.is_sorted(), "{out}");
}

#[test]
fn the_shipped_example_validates_against_the_shipped_schema() {
    let text = std::fs::read_to_string(repo().join("examples/promote.yaml")).unwrap();
    validate_against_schema("examples/promote.yaml", &text);
}

#[test]
fn a_slower_check_before_a_faster_one_is_a_warning_and_the_plan_still_exits_0() {
    let text = config(
        "  - name: load
    command:
      argv: [k6, run, load.js]
      timeout: 10m
  - name: soak
    command: {argv: [./soak.sh], timeout: 15m}
  - name: smoke
    command:
      argv: [./smoke.sh, '{{candidate.image}}']
      timeout: 2m
",
    );
    validate_against_schema("the slow-first config", &text);
    let d = dir_with(&[("promote.yaml", &text)]);
    let o = plan(d.path(), "promote.yaml");
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    // Never reordered: the plan shows the written order.
    assert!(out.contains("   1. load   command  10m"), "{out}");
    assert!(out.contains("   2. soak   command  15m"), "{out}");
    assert!(out.contains("   3. smoke  command   2m"), "{out}");
    assert!(out.contains("total worst case: 27m "), "{out}");
    assert_eq!(
        err,
        "warning: promote.yaml: check `smoke` (worst case 2m) runs after the slower checks `load` (10m), `soak` (15m): the gate stops at the first check that does not pass, so faster checks belong first\n"
    );
}

#[test]
fn an_analysis_template_is_used_as_it_is_with_args_from_the_config() {
    let text = config(&format!(
        "{READY}  - name: success-rate
    analysisTemplate:
      file: analysis/success-rate.yaml
      args:
        service-name: '{{{{candidate.service}}}}.{{{{candidate.namespace}}}}.svc.cluster.local'
"
    ));
    validate_against_schema("the AnalysisTemplate config", &text);
    let d = dir_with(&[
        ("promote.yaml", &text),
        ("analysis/success-rate.yaml", ERROR_RATE_TEMPLATE),
    ]);
    let o = plan(d.path(), "promote.yaml");
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    // count "{{args.measurements}}" is 4 from the template's default; a 15 s query timeout.
    assert!(
        out.contains("   2. success-rate  analysisTemplate  10m40s  AnalysisTemplate `success-rate` (analysis/success-rate.yaml): 1 metric(s), measured together"),
        "{out}"
    );
    assert!(
        out.contains("      metric `success-rate`: 10m40s = 4 × 15s query timeout + 3 × 1m interval + 16 error retries × (15s + 10s retry wait)"),
        "{out}"
    );
    assert!(out.contains("total worst case: 10m45s "), "{out}");

    // A ClusterAnalysisTemplate among other documents, chosen by name; an arg given in the
    // config wins over the template's default.
    let two = format!(
        "{ERROR_RATE_TEMPLATE}---\n{}",
        ERROR_RATE_TEMPLATE
            .replace("kind: AnalysisTemplate", "kind: ClusterAnalysisTemplate")
            .replace(
                "name: success-rate\n  namespace: shop",
                "name: success-rate-cluster"
            )
    );
    let text = config(
        "  - name: success-rate
    analysisTemplate:
      file: templates.yaml
      name: success-rate-cluster
      args:
        service-name: '{{candidate.service}}'
        measurements: '2'
",
    );
    validate_against_schema("the ClusterAnalysisTemplate config", &text);
    let d = dir_with(&[("promote.yaml", &text), ("templates.yaml", &two)]);
    let o = plan(d.path(), "promote.yaml");
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(
        out.contains("ClusterAnalysisTemplate `success-rate-cluster` (templates.yaml)"),
        "{out}"
    );
    assert!(
        out.contains("metric `success-rate`: 4m50s = 2 × 15s query timeout + 1 × 1m interval + 8 error retries × (15s + 10s retry wait)"),
        "{out}"
    );
}

#[test]
fn an_analysis_template_with_another_provider_is_refused_naming_the_metric() {
    let template = format!(
        "{ERROR_RATE_TEMPLATE}  - name: latency-dd
    interval: 5m
    count: 3
    successCondition: default(result, 0) < 200
    provider:
      datadog:
        apiVersion: v2
        query: avg:trace.http.request.duration{{service:web}}
  - name: health-web
    successCondition: result == 'ok'
    provider:
      web:
        url: http://web.shop.svc/status
        jsonPath: \"{{$.status}}\"
"
    );
    let text = config(
        "  - name: slo
    analysisTemplate:
      file: slo.yaml
      args: {service-name: web}
",
    );
    let d = dir_with(&[("promote.yaml", &text), ("slo.yaml", &template)]);
    let o = plan(d.path(), "promote.yaml");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{}{err}", stdout(&o));
    assert!(
        err.contains("error: slo.yaml:35:7: spec.metrics[1].provider.datadog: metric `latency-dd`: provider `datadog` is not supported: greenlight measures only `prometheus` metrics\n"),
        "{err}"
    );
    assert!(
        err.contains("error: slo.yaml:41:7: spec.metrics[2].provider.web: metric `health-web`: provider `web` is not supported: greenlight measures only `prometheus` metrics\n"),
        "{err}"
    );
    // And the config's line that imports it.
    assert!(
        err.contains("error: promote.yaml:18:13: checks[0].analysisTemplate.file: slo.yaml cannot be used as it is: 2 problem(s) in it, each reported with its line\n"),
        "{err}"
    );
}

#[test]
fn an_analysis_template_arg_with_value_from_is_refused_naming_the_arg() {
    let template = ERROR_RATE_TEMPLATE.replace(
        "  - name: measurements\n    value: \"4\"\n",
        "  - name: measurements\n    value: \"4\"\n  - name: api-token\n    valueFrom:\n      secretKeyRef:\n        name: prometheus-auth\n        key: token\n",
    );
    let text = config(
        "  - name: slo
    analysisTemplate:
      file: slo.yaml
      args:
        service-name: web
",
    );
    let d = dir_with(&[("promote.yaml", &text), ("slo.yaml", &template)]);
    let o = plan(d.path(), "promote.yaml");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{}{err}", stdout(&o));
    assert!(
        err.contains("error: slo.yaml:14:5: spec.args[3].valueFrom: arg `api-token`: `valueFrom` (a Secret or a field of the Rollout) is not supported"),
        "{err}"
    );
}

#[test]
fn an_analysis_template_arg_without_a_value_or_unknown_is_refused_in_the_config() {
    let text = config(
        "  - name: slo
    analysisTemplate:
      file: slo.yaml
      args:
        service: web
",
    );
    let d = dir_with(&[("promote.yaml", &text), ("slo.yaml", ERROR_RATE_TEMPLATE)]);
    let o = plan(d.path(), "promote.yaml");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("error: promote.yaml:17:5: checks[0].analysisTemplate.args: arg `service-name` of AnalysisTemplate `success-rate` has no value: give it under `args`\n"),
        "{err}"
    );
    assert!(
        err.contains("error: promote.yaml:20:9: checks[0].analysisTemplate.args.service: `service` is not an arg of AnalysisTemplate `success-rate` (its args: service-name, threshold, measurements)\n"),
        "{err}"
    );
}

#[test]
fn an_unknown_field_is_named_with_its_line_and_a_suggestion() {
    let text = config(
        "  - name: ready
    http:
      url: http://{{candidate.service}}:{{candidate.port}}/
      timout: 5s
",
    );
    assert_refused(
        &text,
        "promote.yaml:19:7: checks[0].http.timout: unknown field (did you mean `timeout`?); known here: url, status, bodyContains, timeout",
    );
    assert_schema_refuses("timout", &text);
}

#[test]
fn a_value_of_the_wrong_type_is_named_with_its_line() {
    let text = config(READY).replace("  port: 8080\n", "  port: \"8080\"\n");
    assert_refused(
        &text,
        "promote.yaml:14:9: candidate.port: expected an integer, found the string \"8080\"",
    );
    assert_schema_refuses("port: \"8080\"", &text);
    let text = config(
        "  - name: ready
    http:
      url: http://{{candidate.service}}/
      status: [200, 204]
",
    );
    assert_refused(
        &text,
        "promote.yaml:19:15: checks[0].http.status: expected an integer, found a list",
    );
}

#[test]
fn a_prometheus_check_without_count_is_refused_naming_the_field() {
    let text = config(
        "  - name: error-rate
    prometheus:
      address: http://prometheus:9090
      query: sum(rate(errors{service=\"{{candidate.service}}\"}[1m]))
      interval: 30s
      successCondition: result[0] < 1
",
    );
    assert_refused(
        &text,
        "promote.yaml:17:5: checks[0].prometheus.count: missing (required): how many measurements the check takes (a gate must end, so it is required)",
    );
    assert_schema_refuses("no count", &text);
}

#[test]
fn a_condition_the_analysis_engine_cannot_evaluate_is_refused_with_its_line() {
    for (condition, why) in [
        ("result[0] ** 2 < 1", "`**`"),
        ("result[0] <", "expected"),
        ("result[0] + 1", "boolean"),
    ] {
        let text = config(&format!(
            "  - name: error-rate
    prometheus:
      address: http://prometheus:9090
      query: sum(rate(errors[1m]))
      count: 1
      successCondition: '{condition}'
"
        ));
        let err = assert_refused(
            &text,
            "promote.yaml:21:25: checks[0].prometheus.successCondition: is not a condition greenlight can evaluate",
        );
        assert!(err.contains(why), "{condition}: {err}");
    }
}

#[test]
fn a_bad_duration_is_named_with_its_line() {
    let text = config(
        "  - name: smoke
    command:
      argv: [./smoke.sh]
      timeout: soon
",
    );
    assert_refused(
        &text,
        "promote.yaml:19:16: checks[0].command.timeout: invalid duration \"soon\"",
    );
    assert_schema_refuses("timeout: soon", &text);
    let text = config(
        "  - name: ready
    http:
      url: http://{{candidate.service}}/
      timeout: 0s
",
    );
    assert_refused(
        &text,
        "promote.yaml:19:16: checks[0].http.timeout: must be greater than zero",
    );
    assert_schema_refuses("timeout: 0s", &text);
}

#[test]
fn a_helm_chart_a_kustomization_or_a_directory_as_the_live_manifest_is_refused() {
    for (path, what) in [
        ("charts/web/Chart.yaml", "is a Helm chart"),
        ("overlays/prod/kustomization.yaml", "is a kustomization"),
        ("deploy/prod/", "is a directory"),
        ("deploy/prod", "is not a .yaml or .yml file (a directory?)"),
    ] {
        let text = config(READY).replace(
            "  manifest: deploy/prod/web.yaml\n",
            &format!("  manifest: {path}\n"),
        );
        assert_refused(
            &text,
            &format!("promote.yaml:5:13: live.manifest: `{path}` {what}"),
        );
        if path != "deploy/prod" {
            assert_schema_refuses(path, &text);
        }
    }
}

#[test]
fn empty_or_missing_checks_are_refused() {
    assert_refused(
        &HEAD.replace("checks:\n", "checks: []\n"),
        "promote.yaml:15:9: checks: at least one check is required",
    );
    assert_schema_refuses("checks: []", &HEAD.replace("checks:\n", "checks: []\n"));
    assert_refused(
        &HEAD.replace("checks:\n", ""),
        "promote.yaml:1:1: checks: missing (required): the checks a candidate must pass, in the order they run",
    );
}

#[test]
fn reserved_sections_for_what_is_not_built_are_refused_with_the_reason() {
    let text = format!("{}notify:\n  slack: '#deploys'\n", config(READY));
    assert_refused(
        &text,
        "promote.yaml:20:1: notify: not read here: notifications are configured in a TOML file's [[notify]] tables, given by --notify (docs/notifications.md); remove it",
    );
    assert_schema_refuses("notify", &text);
    let text = format!("{}promotion:\n  pr:\n    autoMerge: true\n", config(READY));
    assert_refused(
        &text,
        "promote.yaml:21:3: promotion.pr: not a key: a promotion by pull request is `via: pull-request` with `forge` and `autoMerge`",
    );
    for (extra, want) in [
        (
            "promotion:\n  autoMerge: true\n",
            "promote.yaml:21:14: promotion.autoMerge: only with `via: pull-request`",
        ),
        (
            "promotion:\n  via: pull-request\n",
            "promote.yaml:20:1: promotion.forge: missing (required): the forge that takes the pull request",
        ),
        (
            "promotion:\n  via: pull-request\n  forge: bitbucket\n",
            "promote.yaml:22:10: promotion.forge: `bitbucket` is not github, gitlab or gitea",
        ),
        (
            "promotion:\n  via: email\n",
            "promote.yaml:21:8: promotion.via: `email` is not `push` (the default) or `pull-request`",
        ),
        (
            "promotion:\n  via: pull-request\n  forge: gitea\n  forgeUrl: https://u:p@git.example/api/v1\n",
            "promote.yaml:23:13: promotion.forgeUrl: an http:// or https:// URL of the forge's API, without credentials or query",
        ),
    ] {
        assert_refused(&format!("{}{extra}", config(READY)), want);
    }
}

#[test]
fn every_problem_in_a_file_is_reported_in_one_run_in_line_order() {
    let text = "apiVersion: greenlight.dev/v1alpha1
kind: Promotion
live:
  app: web
  manifest: deploy/web.yaml
  workload: {kind: Rollout, name: web, namespace: shop, container: web}
candidate:
  app: web
  path: deploy
  port: 70000
checks:
  - name: ready
    http: {url: 'ftp://{{candidate.service}}/'}
  - name: ready
    command: {argv: [x], timeout: 1m}
";
    let err = assert_refused(
        text,
        "promote.yaml:6:20: live.workload.kind: `Rollout` is not supported",
    );
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[1]
            .starts_with("error: promote.yaml:8:8: candidate.app: `web` is the live Application"),
        "{err}"
    );
    assert!(
        lines[2].starts_with(
            "error: promote.yaml:9:9: candidate.path: holds the live manifest deploy/web.yaml"
        ),
        "{err}"
    );
    assert!(
        lines[3].starts_with("error: promote.yaml:10:9: candidate.port: 70000 is out of range"),
        "{err}"
    );
    assert!(
        lines[4].starts_with("error: promote.yaml:13:17: checks[0].http.url: `ftp://"),
        "{err}"
    );
    assert!(
        lines[5].starts_with("error: promote.yaml:14:11: checks[1].name: `ready` is the name of checks[0] (line 12) already"),
        "{err}"
    );
    assert_eq!(
        lines[6], "error: promote.yaml: 6 problem(s); nothing was planned",
        "{err}"
    );
}

#[test]
fn a_config_file_that_does_not_exist_is_a_usage_error_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let o = plan(d.path(), "nowhere/promote.yaml");
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: cannot read promotion config nowhere/promote.yaml: No such file or directory (os error 2)\n"
    );
    let o = greenlight(d.path(), &["promote", "plan"]);
    assert_eq!(o.status.code(), Some(2), "--config is required");
    assert!(stderr(&o).contains("--config <FILE>"), "{}", stderr(&o));
}

#[test]
fn a_file_that_is_not_a_promotion_config_gets_one_error_saying_so() {
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {}\n";
    let err = assert_refused(
        deployment,
        "promote.yaml:1:13: apiVersion: expected `greenlight.dev/v1alpha1`, found the string \"apps/v1\" (this greenlight reads `greenlight.dev/v1alpha1`)",
    );
    assert_eq!(err.lines().count(), 3, "{err}");
    assert_refused(
        "apiVersion: greenlight.dev/v1alpha1\nkind: Promotion\nlive: [unclosed\n",
        "promote.yaml:4:1: not valid YAML",
    );
}

/// The complete examples in the README's promotion section and in docs/promote.md: each plans
/// (exit 0) and validates against the schema.
#[test]
fn the_documented_examples_plan_and_validate_against_the_schema() {
    let mut found = 0;
    for doc in ["README.md", "docs/promote.md"] {
        let text = std::fs::read_to_string(repo().join(doc)).unwrap();
        for block in text.split("```yaml\n").skip(1) {
            let block = block.split("```").next().unwrap();
            if !block.contains("kind: Promotion") {
                continue;
            }
            found += 1;
            let name = format!("the example in {doc} starting {:?}", block.lines().next());
            validate_against_schema(&name, block);
            let d = dir_with(&[("promote.yaml", block)]);
            // Examples that import a template import the shipped one.
            std::fs::create_dir_all(d.path().join("analysis")).unwrap();
            std::fs::copy(
                repo().join("examples/analysis/latency.yaml"),
                d.path().join("analysis/latency.yaml"),
            )
            .unwrap();
            let o = plan(d.path(), "promote.yaml");
            assert_eq!(o.status.code(), Some(0), "{name}:\n{}", stderr(&o));
        }
    }
    assert!(
        found >= 2,
        "a complete example in README.md and in docs/promote.md"
    );
}

#[test]
fn a_promotion_trailer_key_of_greenlights_own_is_refused() {
    let text = format!(
        "{}promotion:\n  watch:\n    trailerKey: Greenlight-Judged-By\n",
        config(READY)
    );
    let err = assert_refused(
        &text,
        "promote.yaml:22:17: promotion.watch.trailerKey: `Greenlight-…`",
    );
    assert!(err.contains("never a watch directive"), "{err}");
}

#[test]
fn a_watch_deadline_a_slow_candidate_could_outlast_is_a_plan_warning() {
    for (watch, then) in [
        (
            "deadline: 5m",
            "a run then raises it in the promotion's trailer",
        ),
        (
            "{deadline: 5m, shortDeadline: refuse}",
            "a run then blocks the promotion",
        ),
    ] {
        let watch = if watch.starts_with('{') {
            watch.to_string()
        } else {
            format!("{{{watch}}}")
        };
        let d = dir_with(&[(
            "promote.yaml",
            &format!("{}promotion:\n  watch: {watch}\n", config(READY)),
        )]);
        let o = plan(d.path(), "promote.yaml");
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains("warning: promote.yaml: promotion.watch.deadline 5m could be shorter than the candidate's time to healthy plus half of it (15m")
                && err.contains(then),
            "{err}"
        );
    }
    // The default (900 s) covers a candidate that takes the whole default --candidate-deadline.
    let d = dir_with(&[("promote.yaml", &config(READY))]);
    let o = plan(d.path(), "promote.yaml");
    assert!(
        !stderr(&o).contains("promotion.watch.deadline"),
        "{}",
        stderr(&o)
    );
}
