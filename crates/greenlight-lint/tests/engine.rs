//! The pipeline around the rules: suppression, Helm `# Source:` mapping, `List`s, syntax-error
//! recovery, non-Kubernetes YAML, hostile input, directory walking and the Helm `templates/` skip.

mod common;

use common::render;
use greenlight_lint::{
    Options, ReadOptions, Report, Severity, Source, lint, read_inputs, read_inputs_with,
};

const DEPLOY: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    greenlight.dev/ignore: \"GL001 -- CI pins the digest at deploy time\"
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: web
        image: web:latest
";

fn run(name: &str, text: &str, opts: &Options) -> Report {
    let src = if name == "<stdin>" {
        Source::stdin(text.into())
    } else {
        Source::new(name.into(), text.into())
    };
    lint(&[src], Vec::new(), opts)
}

fn rules(r: &Report) -> Vec<&'static str> {
    r.diagnostics.iter().map(|d| d.rule).collect()
}

#[test]
fn annotation_suppresses_named_rules_only_and_audit_mode_ignores_it() {
    let r = run("d.yaml", DEPLOY, &Options::default());
    assert_eq!(rules(&r), vec!["GL301"]);
    assert_eq!(r.suppressed, 1);
    let audit = Options {
        inline_ignores: false,
        ..Options::default()
    };
    let r = run("d.yaml", DEPLOY, &audit);
    assert_eq!(rules(&r), vec!["GL301", "GL001"]);
    assert_eq!(r.suppressed, 0);
}

#[test]
fn comments_suppress_on_the_line_and_the_line_above() {
    let base = DEPLOY.replace(
        "    greenlight.dev/ignore: \"GL001 -- CI pins the digest at deploy time\"\n",
        "    x: y\n",
    );
    let same_line = base.replace(
        "image: web:latest",
        "image: web:latest # greenlight:ignore GL001",
    );
    assert_eq!(
        rules(&run("d.yaml", &same_line, &Options::default())),
        vec!["GL301"]
    );
    let above = base.replace(
        "        image: web:latest",
        "        # greenlight:ignore mutable-image-tag -- pinned later\n        image: web:latest",
    );
    assert_eq!(
        rules(&run("d.yaml", &above, &Options::default())),
        vec!["GL301"]
    );
    let other_rule = base.replace(
        "image: web:latest",
        "image: web:latest # greenlight:ignore GL101",
    );
    assert_eq!(
        rules(&run("d.yaml", &other_rule, &Options::default())),
        vec!["GL301", "GL001"]
    );
    let two_above = base.replace(
        "        image: web:latest",
        "        # greenlight:ignore GL001\n\n        image: web:latest",
    );
    assert_eq!(
        rules(&run("d.yaml", &two_above, &Options::default())),
        vec!["GL301", "GL001"]
    );
    let audit = Options {
        inline_ignores: false,
        ..Options::default()
    };
    assert_eq!(
        rules(&run("d.yaml", &same_line, &audit)),
        vec!["GL301", "GL001"]
    );
}

const HELM: &str = "---
# Source: shop/templates/pdb.yaml
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  minAvailable: 1
  selector:
    matchLabels: {app: web}
---
# Source: shop/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: registry.example/web:1.0.0
";

#[test]
fn helm_output_without_its_chart_names_the_template_and_no_line() {
    // Piped in with no chart at hand: the template is known, its line is not, and the rendered
    // stream's line is kept.
    let r = run("<stdin>", HELM, &Options::default());
    insta::assert_snapshot!(render(&r), @r"
    shop/templates/pdb.yaml:?:?-?:? GL401 error [PodDisruptionBudget web] spec.minAvailable
      PodDisruptionBudget requires minAvailable 1 but its selector matches only 1 replica(s): no eviction is ever allowed, so every drain of a node running these pods hangs
      fix: use `maxUnavailable: 1`, or run more than 1 replicas
      related shop/templates/deployment.yaml:?:?: Deployment web has 1 replica(s)
      related <stdin>:8:3: in the rendered output
    ");
    assert_eq!(r.diagnostics[0].location.rendered_line, Some(8));
    assert_eq!(r.diagnostics[0].source_line, "  minAvailable: 1");
}

#[test]
fn a_committed_render_keeps_its_own_lines_and_relates_the_template() {
    let r = run("rendered/all.yaml", HELM, &Options::default());
    insta::assert_snapshot!(render(&r), @r"
    rendered/all.yaml:8:3-8:18 GL401 error [PodDisruptionBudget web] spec.minAvailable
      PodDisruptionBudget requires minAvailable 1 but its selector matches only 1 replica(s): no eviction is ever allowed, so every drain of a node running these pods hangs
      fix: use `maxUnavailable: 1`, or run more than 1 replicas
      related rendered/all.yaml:18:3: Deployment web has 1 replica(s)
      related shop/templates/pdb.yaml:?:?: rendered from this template
    ");
}

#[test]
fn list_items_are_objects_with_indexed_paths() {
    let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n\
                - apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  spec:\n    containers:\n    - {name: a, image: nginx}\n";
    let r = run("list.yaml", text, &Options::default());
    assert_eq!(r.objects, 2);
    assert_eq!(rules(&r), vec!["GL001"]);
    assert_eq!(r.diagnostics[0].field, "items[1].spec.containers[0].image");
    assert_eq!(
        (
            r.diagnostics[0].location.line,
            r.diagnostics[0].location.column
        ),
        (Some(12), Some(17))
    );
}

#[test]
fn a_syntax_error_is_one_diagnostic_and_the_run_goes_on() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, image: 'a:1'}]}\n---\n\
                apiVersion: v1\nkind: Pod\nmetadata: {name: broken\nspec: {}\n---\n\
                apiVersion: v1\nkind: Pod\nmetadata: {name: c}\nspec: {containers: [{name: c, image: nginx}]}\n";
    let r = run("multi.yaml", text, &Options::default());
    assert_eq!(rules(&r), vec!["GL000", "GL001"], "{}", render(&r));
    let err = &r.diagnostics[0];
    assert_eq!(err.severity, Severity::Error);
    assert!(
        (8..=10).contains(&err.location.line.unwrap()),
        "{}",
        render(&r)
    );
    assert_eq!(r.diagnostics[1].location.line, Some(14));
}

#[test]
fn a_flow_collection_left_open_at_the_next_document_loses_only_its_own_document() {
    // saphyr notices the missing `]` only at the next `---`, so the error is reported on that
    // line; the document the `---` starts is intact and must still be linted.
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: a, image: 'a:1'}\n---\n\
                apiVersion: v1\nkind: Pod\nmetadata: {name: q}\nspec:\n  containers: [{name: q, image: 'q:latest'}]\n";
    let r = run("open.yaml", text, &Options::default());
    assert_eq!(rules(&r), vec!["GL000", "GL001"], "{}", render(&r));
    assert_eq!(r.diagnostics[1].location.line, Some(11), "{}", render(&r));
}

#[test]
fn a_flow_collection_closed_under_its_key_is_read_and_findings_keep_their_columns() {
    // go-yaml (kubectl, Argo CD) and PyYAML read this; the YAML spec, and saphyr, want the
    // lines of `[` … `]` indented deeper than `containers`. The loader indents those lines to
    // read them; findings must still point at the text as written.
    let text = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  template:
    spec:
      containers: [{
        name: web,
        command: [
          \"serve\",
          \"--port\", \"80\"
        ],
      image: web:latest
      }]
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {containers: [{name: p, image: 'p:latest'}]}
";
    let r = run("flow.yaml", text, &Options::default());
    assert_eq!(rules(&r), vec!["GL001", "GL001"], "{}", render(&r));
    let at = |d: &greenlight_lint::Diagnostic| {
        let l = &d.location;
        (l.line, l.column, l.end_line, l.end_column)
    };
    assert_eq!(
        at(&r.diagnostics[0]),
        (Some(15), Some(7), Some(15), Some(24)),
        "{}",
        render(&r)
    );
    assert_eq!(
        r.diagnostics[0].field,
        "spec.template.spec.containers[0].image"
    );
    assert_eq!(
        at(&r.diagnostics[1]),
        (Some(21), Some(31), Some(21), Some(48)),
        "{}",
        render(&r)
    );
}

#[test]
fn non_kubernetes_yaml_and_unexamined_kinds_are_silent() {
    let ci = "name: CI\non: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n    - uses: actions/checkout@v4\n";
    let values = "image:\n  repository: nginx\n  tag: latest\nreplicaCount: 1\n";
    let svc = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80}]}\n";
    for t in [
        ci,
        values,
        svc,
        "",
        "---\n",
        "# only a comment\n",
        "just a string\n",
        "[1, 2]\n",
    ] {
        let r = run("x.yaml", t, &Options::default());
        assert!(r.diagnostics.is_empty(), "{t:?}: {}", render(&r));
    }
}

#[test]
fn an_unrendered_template_gets_a_hint_to_render_it() {
    let text = "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - image: {{ .Values.image }}:{{ .Values.tag }}\n";
    let r = run("t.yaml", text, &Options::default());
    assert_eq!(rules(&r), vec!["GL000"]);
    assert!(
        r.diagnostics[0]
            .fix
            .as_deref()
            .unwrap_or("")
            .contains("helm template")
    );
}

#[test]
fn hostile_input_is_bounded() {
    // Billion laughs: 10^9 nodes if expanded; the budget stops it at once.
    let mut bomb = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\ndata:\n  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    );
    for i in 1..10 {
        bomb.push_str(&format!(
            "  a{i}: &a{i} [{}]\n",
            vec![format!("*a{}", i - 1); 9].join(", ")
        ));
    }
    let started = std::time::Instant::now();
    let r = run("bomb.yaml", &bomb, &Options::default());
    assert_eq!(rules(&r), vec!["GL000"]);
    assert!(
        r.diagnostics[0].message.contains("alias expansion"),
        "{}",
        render(&r)
    );
    assert!(
        started.elapsed().as_secs() < 5,
        "the budget must stop the expansion early"
    );

    let deep = format!("a: {}1{}\n", "[".repeat(50_000), "]".repeat(50_000));
    assert_eq!(
        rules(&run("deep.yaml", &deep, &Options::default())),
        vec!["GL000"]
    );
    let deep_block: String = (0..5000)
        .map(|i| format!("{}k:\n", " ".repeat(i)))
        .collect();
    assert_eq!(
        rules(&run("deep-block.yaml", &deep_block, &Options::default())),
        vec!["GL000"]
    );

    let huge = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big}}\ndata:\n  blob: \"{}\"\n",
        "x".repeat(20 << 20)
    );
    assert!(
        run("huge.yaml", &huge, &Options::default())
            .diagnostics
            .is_empty()
    );
}

#[test]
fn json_manifests_are_linted_with_positions() {
    let text = "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"Pod\",\n  \"metadata\": {\"name\": \"j\"},\n  \"spec\": {\"containers\": [\n    {\"name\": \"a\", \"image\": \"nginx:latest\"}\n  ]}\n}\n";
    let r = run("pod.json", text, &Options::default());
    assert_eq!(rules(&r), vec!["GL001"]);
    assert_eq!(r.diagnostics[0].location.line, Some(6));
}

#[test]
fn cross_object_rules_see_objects_of_all_files() {
    let pdb = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: p}\nspec:\n  maxUnavailable: 1\n  minAvailable: 1\n";
    let pdb2 = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: p}\nspec:\n  minAvailable: 2\n  selector: {matchLabels: {app: a}}\n";
    let dep = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: 2\n  template:\n    metadata: {labels: {app: a}}\n    spec: {containers: [{name: a, image: 'a:1'}]}\n";
    let opts = Options {
        enabled: ["GL401"].into_iter().collect(),
        ..Options::default()
    };
    let r = lint(
        &[
            Source::new("pdb.yaml".into(), pdb.into()),
            Source::new("dep.yaml".into(), dep.into()),
        ],
        Vec::new(),
        &opts,
    );
    assert!(
        r.diagnostics.is_empty(),
        "maxUnavailable 1 allows an eviction"
    );
    let r = lint(
        &[
            Source::new("pdb.yaml".into(), pdb2.into()),
            Source::new("dep.yaml".into(), dep.into()),
        ],
        Vec::new(),
        &opts,
    );
    assert_eq!(r.diagnostics.len(), 1);
    assert_eq!(r.diagnostics[0].location.file, "pdb.yaml");
    assert_eq!(r.diagnostics[0].related[0].location.file, "dep.yaml");
    assert_eq!(r.diagnostics[0].related[0].location.line, Some(5));
}

#[test]
fn directories_are_walked_and_chart_templates_skipped_with_one_note() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("app/sub")).unwrap();
    std::fs::create_dir_all(root.join("chart/templates/nested")).unwrap();
    std::fs::create_dir_all(root.join("vendor")).unwrap();
    std::fs::write(root.join("app/a.yaml"), DEPLOY).unwrap();
    std::fs::write(root.join("app/sub/b.yml"), "kind: x\n").unwrap();
    std::fs::write(root.join("app/sub/c.json"), "{}").unwrap();
    std::fs::write(root.join("app/readme.md"), "# not yaml").unwrap();
    std::fs::write(root.join("app/bin.yaml"), [0x61, 0x3a, 0xff, 0x00]).unwrap();
    std::fs::write(
        root.join("chart/Chart.yaml"),
        "apiVersion: v2\nname: chart\n",
    )
    .unwrap();
    std::fs::write(root.join("chart/templates/d.yaml"), "{{ .Values.x }}").unwrap();
    std::fs::write(
        root.join("chart/templates/nested/e.yaml"),
        "{{ .Values.y }}",
    )
    .unwrap();
    std::fs::write(root.join("vendor/v.yaml"), "a: [").unwrap();
    let paths = vec![root.to_string_lossy().into_owned()];
    let inputs = read_inputs(
        &paths,
        &["vendor/**".into(), "**/vendor/**".into()],
        &mut std::io::empty(),
    )
    .unwrap();
    let names: Vec<String> = inputs
        .sources
        .iter()
        .map(|s| s.name.rsplit("/").take(2).collect::<Vec<_>>().join("<"))
        .collect();
    assert_eq!(
        names,
        vec!["a.yaml<app", "b.yml<sub", "c.json<sub", "Chart.yaml<chart"]
    );
    assert_eq!(inputs.notes.len(), 1);
    assert!(
        inputs.notes[0].message.contains("helm template"),
        "{:?}",
        inputs.notes
    );
    assert_eq!(inputs.unreadable.len(), 1);
    assert!(inputs.unreadable[0].message.contains("UTF-8"));
    // Naming the chart's templates/ directory itself gets the same note, not a lint of
    // unrendered templates.
    let templates = vec![root.join("chart/templates").to_string_lossy().into_owned()];
    let inputs = read_inputs(&templates, &[], &mut std::io::empty()).unwrap();
    assert!(inputs.sources.is_empty(), "{:?}", inputs.sources.len());
    assert_eq!(inputs.notes.len(), 1);
    assert!(inputs.notes[0].message.contains("helm template"));
    let missing = vec![root.join("nope.yaml").to_string_lossy().into_owned()];
    let err = read_inputs(&missing, &[], &mut std::io::empty()).unwrap_err();
    assert!(err.to_string().contains("nope.yaml"), "{err}");
}

#[test]
fn utf16_and_byte_order_marks_are_read_and_the_mark_is_not_a_column() {
    // The first finding sits on line 1, where a mark left in the text would shift it.
    let text = "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: p, image: p}]}}\r\n\
                ---\r\napiVersion: v1\r\nkind: Pod\r\nmetadata: {name: q}\r\nspec:\r\n  containers:\r\n  \
                - name: q\r\n    image: \"q:latest\"  # é ✓ 😀\r\n";
    let utf16 = |be: bool| -> Vec<u8> {
        let mut b = if be {
            vec![0xfe, 0xff]
        } else {
            vec![0xff, 0xfe]
        };
        for u in text.encode_utf16() {
            b.extend(if be { u.to_be_bytes() } else { u.to_le_bytes() });
        }
        b
    };
    let dir = tempfile::tempdir().unwrap();
    let files: [(&str, Vec<u8>); 4] = [
        ("plain.yaml", text.as_bytes().to_vec()),
        (
            "bom8.yaml",
            [b"\xef\xbb\xbf".as_slice(), text.as_bytes()].concat(),
        ),
        ("le16.yaml", utf16(false)),
        ("be16.yaml", utf16(true)),
    ];
    for (name, bytes) in &files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let paths: Vec<String> = files
        .iter()
        .map(|(n, _)| dir.path().join(n).to_string_lossy().into_owned())
        .collect();
    let inputs = read_inputs(&paths, &[], &mut std::io::empty()).unwrap();
    assert!(inputs.unreadable.is_empty(), "{:?}", inputs.unreadable);
    assert_eq!(inputs.sources.len(), 4);
    for src in &inputs.sources {
        assert_eq!(src.text, text, "{}", src.name);
        let r = lint(std::slice::from_ref(src), Vec::new(), &Options::default());
        let at: Vec<_> = r
            .diagnostics
            .iter()
            .map(|d| (d.rule, d.location.line, d.location.column))
            .collect();
        assert_eq!(
            at,
            [("GL001", Some(1), Some(80)), ("GL001", Some(9), Some(5))],
            "{}",
            src.name
        );
    }

    // What is not text says why, and the run goes on.
    let bad: [(&str, &[u8], &str); 3] = [
        (
            "odd.yaml",
            &[0xff, 0xfe, 0x61, 0x00, 0x3a],
            "odd number of bytes",
        ),
        (
            "lone.yaml",
            &[0xfe, 0xff, 0x00, 0x61, 0xd8, 0x00, 0x00, 0x61],
            "unpaired surrogate 0xd800 at offset 4",
        ),
        (
            "u32.yaml",
            &[0xff, 0xfe, 0x00, 0x00, 0x61, 0x00, 0x00, 0x00],
            "UTF-32",
        ),
    ];
    for (name, bytes, _) in &bad {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let paths: Vec<String> = bad
        .iter()
        .map(|(n, _, _)| dir.path().join(n).to_string_lossy().into_owned())
        .collect();
    let inputs = read_inputs(&paths, &[], &mut std::io::empty()).unwrap();
    assert!(inputs.sources.is_empty());
    for ((_, _, why), d) in bad.iter().zip(&inputs.unreadable) {
        assert!(d.message.contains(why), "{why}: {}", d.message);
    }
}

#[test]
fn test_directories_found_while_walking_are_skipped_with_one_note() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    let files = [
        "app/deploy.yaml",
        "app/tests.yaml",
        "app/testing/t.yaml",
        "app/latest/l.yaml",
        "app/tests/t.yaml",
        "app/tests/e2e/deep/x.yml",
        "app/tests/readme.md",
        "testdata/a.json",
        "test/b.yaml",
        "svc/e2e/c.yaml",
        "fixtures/d.yaml",
        "_archived/old/e.yaml",
        "vendor/tests/v.yaml",
    ];
    for f in files {
        let p = root.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "kind: x\n").unwrap();
    }
    std::fs::create_dir_all(root.join("empty/tests")).unwrap();
    let read = |paths: &[&str], include_tests: bool| {
        let paths: Vec<String> = paths
            .iter()
            .map(|p| root.join(p).to_string_lossy().into_owned())
            .collect();
        let opts = ReadOptions {
            exclude: vec!["vendor".into()],
            include_tests,
        };
        read_inputs_with(&paths, &opts, &mut std::io::empty()).unwrap()
    };
    let names = |inputs: &greenlight_lint::Inputs| -> Vec<String> {
        let prefix = format!("{}/", root.to_string_lossy().replace('\\', "/"));
        inputs
            .sources
            .iter()
            .map(|s| s.name.strip_prefix(&prefix).unwrap_or(&s.name).to_string())
            .collect()
    };

    let inputs = read(&[""], false);
    assert_eq!(
        names(&inputs),
        [
            "app/deploy.yaml",
            "app/latest/l.yaml",
            "app/testing/t.yaml",
            "app/tests.yaml"
        ]
    );
    // Excluded files are not counted, nor files that would not be linted anyway.
    assert_eq!(inputs.skipped_tests, 7);
    assert_eq!(inputs.notes.len(), 1, "{:?}", inputs.notes);
    let note = &inputs.notes[0].message;
    assert!(
        note.starts_with("skipped 7 file(s) in 6 test directories found while walking"),
        "{note}"
    );
    assert!(note.contains("--include-tests"), "{note}");
    assert!(note.contains("include-tests = true"), "{note}");
    assert!(
        inputs.notes[0].file.ends_with("_archived"),
        "{:?}",
        inputs.notes
    );

    let inputs = read(&[""], true);
    assert_eq!(inputs.sources.len(), 11);
    assert_eq!((inputs.skipped_tests, inputs.notes.len()), (0, 0));

    // Named paths are always read, even when their own name is a test directory's; below
    // them, the walk skips as before.
    let inputs = read(&["app/tests", "svc/e2e/c.yaml", "test"], false);
    assert_eq!(
        names(&inputs),
        ["app/tests/t.yaml", "svc/e2e/c.yaml", "test/b.yaml"]
    );
    assert_eq!(inputs.skipped_tests, 1);
    assert!(
        inputs.notes[0]
            .message
            .starts_with("skipped 1 file(s) in 1 test directory"),
        "{:?}",
        inputs.notes
    );
    // The default reader is the command's default: tests skipped.
    let all = vec![root.to_string_lossy().into_owned()];
    let inputs = read_inputs(&all, &[], &mut std::io::empty()).unwrap();
    assert_eq!(inputs.skipped_tests, 8);
}

#[test]
fn identical_findings_on_copies_of_an_object_are_reported_once() {
    let web = |ns: &str, tag: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\n\
             spec:\n  replicas: 2\n  strategy: {{rollingUpdate: {{maxSurge: 1, maxUnavailable: 0}}}}\n  \
             template:\n    spec:\n      containers:\n      - name: web\n        image: web:{tag}\n"
        )
    };
    let helm = format!(
        "---\n# Source: a-chart/templates/web.yaml\n{}",
        web("prod", "latest")
    );
    let broken = "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n";
    let sources = [
        ("<stdin>", helm),
        ("bundle-a/all.yaml", web("prod", "latest")),
        ("bundle-b/all.yaml", web("prod", "latest")),
        ("bundle-c/all.yaml", web("prod", "main")),
        ("bundle-d/all.yaml", web("staging", "latest")),
        (
            "bundle-e/all.yaml",
            web("prod", "latest").replace("web:latest", "web:latest # greenlight:ignore GL001"),
        ),
        ("broken-1.yaml", broken.to_string()),
        ("broken-2.yaml", broken.to_string()),
    ];
    let sources: Vec<Source> = sources
        .into_iter()
        .map(|(n, t)| {
            if n == "<stdin>" {
                Source::stdin(t)
            } else {
                Source::new(n.into(), t)
            }
        })
        .collect();
    let r = lint(&sources, Vec::new(), &Options::default());
    insta::assert_snapshot!(render(&r), @r"
    a-chart/templates/web.yaml:?:?-?:? GL001 error [Deployment prod/web] spec.template.spec.containers[0].image
      container `web`: `web:latest` uses the mutable tag `latest`: the same reference can point at new content, so a redeploy renders an identical pod spec and Kubernetes rolls out nothing while every check reports success
      fix: dispatch an immutable tag such as `web:sha-<short-sha>`, or pin the digest `web@sha256:<digest>` (`greenlight guard image --resolve web:latest` prints it)
      related bundle-a/all.yaml:13:9: the same finding on another copy of this object
      related bundle-b/all.yaml:13:9: the same finding on another copy of this object
      related <stdin>:15:9: in the rendered output
    broken-1.yaml:4:1-4:1 GL000 error [] 
      cannot read YAML: while parsing a node, did not find expected node content
      fix: fix the syntax at this line
    broken-2.yaml:4:1-4:1 GL000 error [] 
      cannot read YAML: while parsing a node, did not find expected node content
      fix: fix the syntax at this line
    bundle-c/all.yaml:13:9-13:24 GL001 error [Deployment prod/web] spec.template.spec.containers[0].image
      container `web`: `web:main` uses the mutable tag `main`: the same reference can point at new content, so a redeploy renders an identical pod spec and Kubernetes rolls out nothing while every check reports success
      fix: dispatch an immutable tag such as `web:sha-<short-sha>`, or pin the digest `web@sha256:<digest>` (`greenlight guard image --resolve web:main` prints it)
    bundle-d/all.yaml:13:9-13:26 GL001 error [Deployment staging/web] spec.template.spec.containers[0].image
      container `web`: `web:latest` uses the mutable tag `latest`: the same reference can point at new content, so a redeploy renders an identical pod spec and Kubernetes rolls out nothing while every check reports success
      fix: dispatch an immutable tag such as `web:sha-<short-sha>`, or pin the digest `web@sha256:<digest>` (`greenlight guard image --resolve web:latest` prints it)
    ");
    assert_eq!((r.duplicates, r.suppressed), (2, 1));
}

#[test]
fn stdin_is_read_once_and_named() {
    let mut input: &[u8] = b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: nginx}]}\n";
    let inputs = read_inputs(&["-".into()], &[], &mut input).unwrap();
    assert_eq!(inputs.sources[0].name, "<stdin>");
    assert!(read_inputs(&["-".into(), "-".into()], &[], &mut std::io::empty()).is_err());
}

/// Every fixture cut short at many points, and with bytes swapped for YAML punctuation, lints
/// without a panic: truncated and mangled input is what editors and pipes produce.
#[test]
fn truncated_and_mangled_fixtures_never_panic() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    // (name, text): the pipeline fixtures keep their names, so they are read as workflows,
    // GitLab CI files and scripts.
    let mut texts: Vec<(String, String)> = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from(dir)];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                let name = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                let name = if name.contains('/') {
                    name
                } else {
                    "cut.yaml".into()
                };
                texts.push((name, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    texts.push(("cut.yaml".into(), HELM.to_string()));
    let all = Options {
        enabled: greenlight_lint::RULES.iter().map(|r| r.id).collect(),
        ..Options::default()
    };
    let mut runs = 0;
    for (name, text) in &texts {
        let cuts = (0..text.len())
            .step_by(37)
            .filter(|i| text.is_char_boundary(*i));
        for cut in cuts {
            let _ = run(name, &text[..cut], &all);
            let mut mangled = text.clone().into_bytes();
            let punct = b"-:[]{}&*!|>'\"%@`#,? \n$\\";
            mangled[cut] = punct[cut % punct.len()];
            if let Ok(m) = String::from_utf8(mangled) {
                let _ = run(name, &m, &all);
            }
            runs += 1;
        }
    }
    assert!(runs > 500, "{runs}");
}

#[test]
fn cross_object_rules_prefer_the_nearest_objects() {
    let pdb = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\nspec:\n  minAvailable: 2\n  selector: {matchLabels: {app: web}}\n";
    let dep = |n: u32| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  replicas: {n}\n  template:\n    \
             metadata: {{labels: {{app: web}}}}\n    spec: {{containers: [{{name: a, image: 'a:1'}}]}}\n"
        )
    };
    let opts = Options {
        enabled: ["GL401"].into_iter().collect(),
        ..Options::default()
    };
    let src = |name: &str, text: String| Source::new(name.into(), text);
    // shop's PDB counts shop's Deployment (3 replicas), not blog's (1) elsewhere in the repo.
    let r = lint(
        &[
            src("apps/shop/pdb.yaml", pdb.into()),
            src("apps/shop/deploy.yaml", dep(3)),
            src("apps/blog/deploy.yaml", dep(1)),
        ],
        Vec::new(),
        &opts,
    );
    assert!(r.diagnostics.is_empty(), "{}", render(&r));
    let r = lint(
        &[
            src("apps/shop/pdb.yaml", pdb.into()),
            src("apps/shop/deploy.yaml", dep(2)),
            src("apps/blog/deploy.yaml", dep(5)),
        ],
        Vec::new(),
        &opts,
    );
    assert_eq!(r.diagnostics.len(), 1, "{}", render(&r));
    assert_eq!(r.diagnostics[0].related.len(), 1);
    assert_eq!(
        r.diagnostics[0].related[0].location.file,
        "apps/shop/deploy.yaml"
    );
    // Siblings never pair: a kustomize overlay's PDB and its base's Deployment are two
    // directories, neither above the other.
    let r = lint(
        &[
            src("app/overlays/prod/pdb.yaml", pdb.into()),
            src("app/base/deploy.yaml", dep(2)),
        ],
        Vec::new(),
        &opts,
    );
    assert!(r.diagnostics.is_empty(), "{}", render(&r));
    // An object further up the same branch does pair.
    let r = lint(
        &[
            src("app/pdb.yaml", pdb.into()),
            src("app/web/deploy.yaml", dep(2)),
        ],
        Vec::new(),
        &opts,
    );
    assert_eq!(r.diagnostics.len(), 1, "{}", render(&r));
}

/// Pairing stops at a directory holding a kustomization.yaml, Chart.yaml or .git: an HPA at a
/// repository's top does not scale a look-alike Deployment of a unit below it.
#[test]
fn cross_object_pairing_stops_at_kustomization_chart_and_git() {
    let dep = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 3\n  template:\n    \
               spec: {containers: [{name: a, image: 'a:1'}]}\n";
    let hpa = "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web}\nspec:\n  \
               scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n  maxReplicas: 9\n";
    let opts = Options {
        enabled: ["GL301", "GL501"].into_iter().collect(),
        ..Options::default()
    };
    for marker in ["kustomization.yaml", "Chart.yaml", ".git"] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("unit/deploy")).unwrap();
        std::fs::write(root.join("hpa.yaml"), hpa).unwrap();
        std::fs::write(root.join("unit/deploy/web.yaml"), dep).unwrap();
        let lint_dir = || {
            let inputs = read_inputs(
                &[root.to_string_lossy().into_owned()],
                &[],
                &mut std::io::empty(),
            )
            .unwrap();
            lint(&inputs.sources, inputs.unreadable, &opts)
        };
        // No marker between them: the HPA above pairs (GL501, and GL301 counts its maxReplicas).
        let r = lint_dir();
        assert_eq!(rules(&r), vec!["GL301", "GL501"], "{}", render(&r));
        assert!(
            r.diagnostics[0]
                .message
                .starts_with("Deployment with 9 replica(s)")
        );
        assert!(
            r.diagnostics[0].related[0]
                .location
                .file
                .ends_with("/hpa.yaml")
        );
        if marker == ".git" {
            std::fs::create_dir(root.join("unit/.git")).unwrap();
        } else {
            std::fs::write(root.join("unit").join(marker), "{}\n").unwrap();
        }
        let r = lint_dir();
        assert_eq!(rules(&r), vec!["GL301"], "{marker}: {}", render(&r));
        assert!(
            r.diagnostics[0]
                .message
                .starts_with("Deployment with 3 replica(s) has"),
            "{marker}: {}",
            render(&r)
        );
        assert!(r.diagnostics[0].related.is_empty());
    }
}

/// Live-state dumps (status, metadata.uid) pair only with each other, and standard input pairs
/// only with itself.
#[test]
fn live_state_and_stdin_do_not_pair_with_manifests() {
    let dep = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 3\n  template:\n    \
               spec: {containers: [{name: a, image: 'a:1'}]}\n";
    let hpa = "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web}\nspec:\n  \
               scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n  maxReplicas: 9\n";
    let live_hpa = format!("{hpa}status: {{currentReplicas: 3}}\n");
    let live_dep = dep.replace("metadata: {name: web}", "metadata: {name: web, uid: 1f0c}");
    let empty_status = format!("{hpa}status: {{}}\n");
    let opts = Options {
        enabled: ["GL501"].into_iter().collect(),
        ..Options::default()
    };
    let src = |name: &str, text: &str| Source::new(name.into(), text.into());
    let pairs = |a: &str, b: &str| {
        !lint(&[src("d/a.yaml", a), src("d/b.yaml", b)], Vec::new(), &opts)
            .diagnostics
            .is_empty()
    };
    assert!(pairs(dep, hpa));
    assert!(
        !pairs(dep, &live_hpa),
        "a live HPA does not scale a manifest"
    );
    assert!(
        !pairs(&live_dep, hpa),
        "a manifest HPA does not scale a live Deployment"
    );
    assert!(pairs(&live_dep, &live_hpa), "two dumps pair");
    assert!(pairs(dep, &empty_status), "`status: {{}}` is a manifest");
    let r = lint(
        &[src("<stdin>", dep), src("hpa.yaml", hpa)],
        Vec::new(),
        &opts,
    );
    assert!(r.diagnostics.is_empty(), "{}", render(&r));
    let both = format!("{dep}---\n{hpa}");
    let r = lint(&[src("<stdin>", &both)], Vec::new(), &opts);
    assert_eq!(rules(&r), vec!["GL501"], "one stream pairs with itself");
}

#[test]
fn cross_object_pairs_must_be_nearest_from_both_sides() {
    // An HPA in another app's test data targets a Deployment of the same name. Seen from that
    // HPA the Deployment is the nearest (the only) target, but the Deployment has its own HPA
    // beside it: only that pair is reported (the corpus paired GKE samples with Argo CD's
    // test data this way).
    let dep = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: php-apache}\nspec:\n  replicas: 3\n  template:\n    \
               metadata: {labels: {app: php}}\n    spec: {containers: [{name: a, image: 'a:1'}]}\n";
    let hpa = "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: php-apache}\nspec:\n  \
               scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: php-apache}\n  minReplicas: 4\n  maxReplicas: 9\n";
    let pdb = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: php}\nspec:\n  minAvailable: 3\n  \
               selector: {matchLabels: {app: php}}\n";
    let src = |name: &str, text: &str| Source::new(name.into(), text.into());
    let opts = Options {
        enabled: ["GL401", "GL501"].into_iter().collect(),
        ..Options::default()
    };
    let r = lint(
        &[
            src("samples/php/deploy.yaml", dep),
            src("samples/php/hpa.yaml", hpa),
            src("other/testdata/hpa.yaml", hpa),
            // minAvailable 3 of the HPA's 4: fine for this app; a stray PDB elsewhere must not
            // count this Deployment either, since its own app has a nearer one.
            src("samples/php/pdb.yaml", pdb),
            src(
                "other/testdata/pdb.yaml",
                &pdb.replace("minAvailable: 3", "minAvailable: 4"),
            ),
        ],
        Vec::new(),
        &opts,
    );
    assert_eq!(rules(&r), vec!["GL501"], "{}", render(&r));
    assert_eq!(
        r.diagnostics[0].related[0].location.file,
        "samples/php/hpa.yaml"
    );
    // Two HPAs beside one Deployment make one finding naming both, not two at one line.
    let r = lint(
        &[
            src("samples/php/deploy.yaml", dep),
            src("samples/php/hpa.yaml", hpa),
            src(
                "samples/php/hpa-gpu.yaml",
                &hpa.replace("name: php-apache}\nspec", "name: php-gpu}\nspec"),
            ),
        ],
        Vec::new(),
        &opts,
    );
    assert_eq!(rules(&r), vec!["GL501"], "{}", render(&r));
    assert_eq!(r.diagnostics[0].related.len(), 2, "{}", render(&r));
}

/// A chart that only lets its users set pod annotations (`podAnnotations`): the suppression
/// annotation on the pod template counts as the object's.
const DEPLOY_POD_ANNOTATION: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  template:
    metadata:
      annotations:
        greenlight.dev/ignore: \"GL001 -- CI pins the digest at deploy time\"
    spec:
      containers:
      - name: web
        image: web:latest
";

#[test]
fn a_pod_template_annotation_suppresses_as_the_objects_does() {
    let r = run("d.yaml", DEPLOY_POD_ANNOTATION, &Options::default());
    assert_eq!(rules(&r), vec!["GL301"]);
    assert_eq!(r.suppressed, 1);

    // An object-level field (the strategy GL301 reports) is the workload's too.
    let both =
        DEPLOY_POD_ANNOTATION.replace("\"GL001 -- ", "\"GL001,implicit-rollout-strategy -- ");
    let r = run("d.yaml", &both, &Options::default());
    assert_eq!(rules(&r), Vec::<&str>::new());
    assert_eq!(r.suppressed, 2);

    // Another rule named: nothing of GL001 is silenced.
    let other = DEPLOY_POD_ANNOTATION.replace("\"GL001 -- ", "\"GL101 -- ");
    let r = run("d.yaml", &other, &Options::default());
    assert_eq!(rules(&r), vec!["GL301", "GL001"]);
    assert_eq!(r.suppressed, 0);

    // The object's annotation and the template's add up.
    let object_too = DEPLOY_POD_ANNOTATION.replace(
        "metadata:\n  name: web\n",
        "metadata:\n  name: web\n  annotations:\n    greenlight.dev/ignore: GL301\n",
    );
    let r = run("d.yaml", &object_too, &Options::default());
    assert_eq!(rules(&r), Vec::<&str>::new());
    assert_eq!(r.suppressed, 2);

    // Audit mode reads neither.
    let audit = Options {
        inline_ignores: false,
        ..Options::default()
    };
    let r = run("d.yaml", DEPLOY_POD_ANNOTATION, &audit);
    assert_eq!(rules(&r), vec!["GL301", "GL001"]);
    assert_eq!(r.suppressed, 0);

    // Not a string (a list, a number): no suppression and no panic.
    for value in ["[GL001]", "1"] {
        let odd =
            DEPLOY_POD_ANNOTATION.replace("\"GL001 -- CI pins the digest at deploy time\"", value);
        let r = run("d.yaml", &odd, &Options::default());
        assert_eq!(rules(&r), vec!["GL301", "GL001"], "{value}");
    }

    // A CronJob's pod template is `spec.jobTemplate.spec.template`.
    let cron = "apiVersion: batch/v1
kind: CronJob
metadata: {name: report}
spec:
  schedule: \"0 * * * *\"
  jobTemplate:
    spec:
      template:
        metadata:
          annotations: {greenlight.dev/ignore: mutable-image-tag}
        spec:
          containers:
          - {name: report, image: report:latest}
";
    let r = run("c.yaml", cron, &Options::default());
    assert_eq!(rules(&r), Vec::<&str>::new());
    assert_eq!(r.suppressed, 1);
}

#[test]
fn a_pod_template_annotation_leaves_the_objects_other_templates_alone() {
    let jobset = "apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: train}
spec:
  replicatedJobs:
  - name: leader
    template:
      spec:
        template:
          metadata:
            annotations: {greenlight.dev/ignore: GL001}
          spec:
            containers:
            - {name: leader, image: trainer:latest}
  - name: workers
    template:
      spec:
        template:
          spec:
            containers:
            - {name: worker, image: trainer:latest}
";
    let r = run("j.yaml", jobset, &Options::default());
    assert_eq!(rules(&r), vec!["GL001"]);
    assert_eq!(
        r.diagnostics[0].field,
        "spec.replicatedJobs[1].template.spec.template.spec.containers[0].image"
    );
    assert_eq!(r.suppressed, 1);
}

const SKAFFOLD: &str = "apiVersion: skaffold/v4beta11
kind: Config
build:
  artifacts:
    - image: web
      docker: {dockerfile: Dockerfile}
profiles:
  - name: prod
    build:
      artifacts:
        - image: registry.example/worker
manifests:
  rawYaml: [k8s/*.yaml]
";

const WORKLOADS: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  strategy:
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
  template:
    spec:
      containers:
      - name: web
        image: web
      - name: worker
        image: registry.example/worker:latest
      - name: proxy
        image: envoyproxy/envoy:latest
";

fn gl001(r: &Report) -> Vec<(String, Severity, String)> {
    r.diagnostics
        .iter()
        .filter(|d| d.rule == "GL001")
        .map(|d| (d.field.clone(), d.severity, d.message.clone()))
        .collect()
}

#[test]
fn gl001_says_when_skaffold_replaces_the_image_at_deploy_time() {
    let sources = || {
        vec![
            Source::new("skaffold.yaml".into(), SKAFFOLD.into()),
            Source::new("k8s/web.yaml".into(), WORKLOADS.into()),
        ]
    };
    let r = lint(&sources(), Vec::new(), &Options::default());
    let found = gl001(&r);
    assert_eq!(found.len(), 3, "{found:#?}");
    let (field, severity, message) = &found[0];
    assert_eq!(field, "spec.template.spec.containers[0].image");
    assert_eq!(*severity, Severity::Info);
    assert!(
        message.ends_with(
            "(but skaffold.yaml builds `web` at `build.artifacts[0].image` and replaces this \
             reference at deploy time: lint what `skaffold render` writes)"
        ),
        "{message}"
    );
    let (_, severity, message) = &found[1];
    assert_eq!(*severity, Severity::Info);
    assert!(
        message.contains("`profiles[0].build.artifacts[0].image`"),
        "{message}"
    );
    // An image skaffold does not build stays an error, with no note.
    let (_, severity, message) = &found[2];
    assert_eq!(*severity, Severity::Error);
    assert!(!message.contains("skaffold"), "{message}");

    // Without the skaffold configuration, all three are errors; so with one of a sibling
    // application's, which never builds these.
    let r = lint(&sources()[1..], Vec::new(), &Options::default());
    let severities: Vec<Severity> = gl001(&r).into_iter().map(|f| f.1).collect();
    assert_eq!(severities, vec![Severity::Error; 3]);
    let r = lint(
        &[
            Source::new("other/skaffold.yaml".into(), SKAFFOLD.into()),
            Source::new("k8s/web.yaml".into(), WORKLOADS.into()),
        ],
        Vec::new(),
        &Options::default(),
    );
    let severities: Vec<Severity> = gl001(&r).into_iter().map(|f| f.1).collect();
    assert_eq!(severities, vec![Severity::Error; 3]);
}

#[test]
fn gl001_says_when_a_kustomization_replaces_the_image() {
    // The kustomization above k8s/web.yaml does not render it (no `resources`): a pipeline
    // runs `kustomize edit set image` and builds it at deploy time.
    let kustomization = "images:
  - name: web
  - name: registry.example/worker
    newName: registry.example/worker-v2
  - name: envoyproxy/envoy
    newTag: v1.31.0
";
    let r = lint(
        &[
            Source::new("app/kustomization.yaml".into(), kustomization.into()),
            Source::new("app/k8s/web.yaml".into(), WORKLOADS.into()),
        ],
        Vec::new(),
        &Options::default(),
    );
    let found = gl001(&r);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert_eq!(found[0].1, Severity::Info);
    assert!(
        found[0].2.ends_with(
            "(but the kustomization app/kustomization.yaml lists `web` at `images[0]` with no \
             tag, the place a deploy-time `kustomize edit set image` fills: lint what it renders)"
        ),
        "{}",
        found[0].2
    );
    // Only renamed: the tag `latest` is kept, so the finding stands.
    assert_eq!(found[1].1, Severity::Error);
    assert!(!found[1].2.contains("kustomization"), "{}", found[1].2);
    assert_eq!(found[2].1, Severity::Info);
    assert!(
        found[2].2.ends_with(
            "(but the kustomization app/kustomization.yaml sets `envoyproxy/envoy` at \
             `images[2]`, so `kustomize build` replaces it: lint what it renders)"
        ),
        "{}",
        found[2].2
    );
}
