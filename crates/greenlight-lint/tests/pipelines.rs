//! The pipeline rules (GL701–GL704) on `tests/fixtures/pipelines`: a GitHub Actions workflow
//! with block, folded and quoted `run:` scalars and `env:` at three levels, a workflow that
//! applies manifests from a `working-directory`, a GitLab CI file with `extends`, `!reference`
//! and variables, and a deploy script. Every finding's exact line and column is asserted, and
//! the list is exhaustive: a value the file does not know, a version tag, a digest or a setting
//! that is not an image must stay unflagged.

use greenlight_lint::{Kind, Options, RULES, ReadOptions, Report, Source, lint, read_inputs_with};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/pipelines");

/// Lint the fixture directory as `greenlight lint <dir>` does (file names start with the
/// directory; `at` shows them relative to it).
fn run(enabled: &[&'static str]) -> Report {
    let inputs = read_inputs_with(
        &[DIR.into()],
        &ReadOptions::default(),
        &mut std::io::empty(),
    )
    .unwrap();
    let opts = Options {
        enabled: enabled.iter().copied().collect(),
        ..Options::default()
    };
    let mut r = lint(&inputs.sources, Vec::new(), &opts);
    let strip = |f: &mut String| {
        if let Some(rest) = f.strip_prefix(&format!("{DIR}/")) {
            *f = rest.to_string();
        }
    };
    for d in &mut r.diagnostics {
        strip(&mut d.location.file);
        d.related
            .iter_mut()
            .for_each(|x| strip(&mut x.location.file));
    }
    r.notes.iter_mut().for_each(|n| {
        strip(&mut n.file);
        n.message = n.message.replace(&format!("{DIR}/"), "");
    });
    r
}

fn at(r: &Report) -> Vec<(&'static str, String, u32, u32)> {
    r.diagnostics
        .iter()
        .map(|d| {
            (
                d.rule,
                d.location.file.clone(),
                d.location.line.unwrap(),
                d.location.column.unwrap(),
            )
        })
        .collect()
}

const EXPECTED: &[(&str, &str, u32, u32)] = &[
    // `--set image.tag=$IMAGE_TAG`, IMAGE_TAG: latest in the workflow's env.
    ("GL701", ".github/workflows/deploy.yml", 39, 29),
    ("GL703", ".github/workflows/deploy.yml", 42, 19),
    // A double-quoted `run:` with an escaped line break; HOTFIX in the step's env.
    ("GL701", ".github/workflows/deploy.yml", 60, 52),
    ("GL704", ".github/workflows/deploy.yml", 65, 15),
    // `kubectl apply -f ../k8s/web.yaml` from `working-directory: deploy`.
    ("GL702", ".github/workflows/manifests.yaml", 11, 31),
    ("GL702", ".github/workflows/manifests.yaml", 21, 36),
    // `.helm-deploy`'s folded script, in deploy-dev (TAG: $DEV_TAG, DEV_TAG: edge).
    ("GL701", ".gitlab-ci.yml", 22, 23),
    ("GL701", ".gitlab-ci.yml", 43, 14),
    ("GL703", ".gitlab-ci.yml", 44, 15),
    ("GL701", "scripts/deploy.sh", 15, 22),
    ("GL701", "scripts/deploy.sh", 23, 60),
    // `--reuse-values` keeping `stable`.
    ("GL701", "scripts/deploy.sh", 23, 104),
    ("GL703", "scripts/deploy.sh", 24, 9),
];

fn expected(rules: &[&'static str]) -> Vec<(&'static str, String, u32, u32)> {
    EXPECTED
        .iter()
        .filter(|e| rules.contains(&e.0))
        .map(|(r, f, l, c)| (*r, f.to_string(), *l, *c))
        .collect()
}

const PIPELINE_RULES: &[&str] = &["GL701", "GL702", "GL703", "GL704"];

#[test]
fn every_finding_at_its_line_and_column() {
    let r = run(PIPELINE_RULES);
    assert_eq!(at(&r), expected(PIPELINE_RULES));
}

/// Each rule alone finds its own: removing a rule fails here.
#[test]
fn each_rule_finds_its_own() {
    for rule in PIPELINE_RULES {
        let r = run(&[*rule]);
        let want = expected(&[*rule]);
        assert!(!want.is_empty(), "{rule} has expected findings");
        assert_eq!(at(&r), want, "{rule}");
        for d in &r.diagnostics {
            assert!(
                d.fix.is_some(),
                "{rule}: every finding says what to write instead"
            );
            assert!(
                d.object.is_none(),
                "{rule}: pipeline findings name no object"
            );
        }
    }
}

#[test]
fn messages_name_the_value_and_where_it_is_set() {
    let r = run(PIPELINE_RULES);
    let d = &r.diagnostics[0];
    assert_eq!(d.field, "jobs.deploy.steps[1].run");
    assert!(
        d.message
            .contains("`image.tag` to the mutable tag `latest`"),
        "{}",
        d.message
    );
    assert_eq!(
        d.location.end_column,
        Some(39),
        "the span covers `$IMAGE_TAG`"
    );
    assert_eq!(d.related[0].location.line, Some(13));
    assert!(
        d.related[0]
            .message
            .contains("`IMAGE_TAG` is set to `latest`")
    );
    assert!(
        d.fix
            .as_deref()
            .unwrap()
            .contains("greenlight guard image --resolve")
    );
    // GL702 relates the image's line in the applied manifest.
    let apply = r.diagnostics.iter().find(|d| d.rule == "GL702").unwrap();
    assert_eq!(apply.related[0].location.file, "k8s/web.yaml");
    assert_eq!(apply.related[0].location.line, Some(13));
    // The GitLab finding in a template relates the job's variable.
    let dev = r
        .diagnostics
        .iter()
        .find(|d| d.location.line == Some(22))
        .unwrap();
    assert_eq!(dev.field, "deploy-dev.script[1]");
    assert!(dev.message.contains("`edge`"), "{}", dev.message);
    assert_eq!(dev.related[0].location.line, Some(28));
}

#[test]
fn a_script_the_tokenizer_cannot_finish_is_a_note_and_nothing_after_is_flagged() {
    let r = run(PIPELINE_RULES);
    assert!(
        r.notes.iter().any(|n| n.file == "scripts/deploy.sh"
            && n.message.contains("deploy.sh:25:6")
            && n.message.contains("unterminated single quote")),
        "{:?}",
        r.notes
    );
    assert!(!r.diagnostics.iter().any(|d| d.location.line == Some(26)));
}

fn lint_one(name: &str, text: &str) -> Report {
    let opts = Options {
        enabled: PIPELINE_RULES.iter().copied().collect(),
        ..Options::default()
    };
    lint(&[Source::new(name.into(), text.into())], Vec::new(), &opts)
}

#[test]
fn not_flagged_unknown_versioned_digested_and_not_images() {
    let wf = "on: push\nenv:\n  V: 1.2.3\njobs:\n  d:\n    steps:\n      - run: |\n          \
              helm upgrade a ./c --set image.tag=${{ github.sha }}\n          \
              helm upgrade a ./c --set image.tag=$V --set replicaCount=latest\n          \
              helm upgrade a ./c --set image.tag=$NOT_SET_HERE --set ui.theme=latest\n          \
              helm upgrade a ./c --set image=web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n          \
              helm template a ./c --set image.tag=latest\n          \
              kubectl set image deploy/a a=web:1.4.0\n          \
              echo helm upgrade a ./c --set image.tag=latest\n";
    let r = lint_one(".github/workflows/ok.yml", wf);
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
    // The same file under another name is not a workflow.
    let wf = wf.replace("${{ github.sha }}", "latest");
    assert_eq!(
        lint_one(".github/workflows/ok.yml", &wf).diagnostics.len(),
        1
    );
    assert!(lint_one("ci/ok.yml", &wf).diagnostics.is_empty());
}

#[test]
fn inline_ignore_comments_work_inside_run_blocks_and_scripts() {
    let wf = "jobs:\n  d:\n    steps:\n      - run: |\n          # greenlight:ignore GL701\n          \
              helm upgrade a ./c --set image.tag=latest\n";
    let r = lint_one(".github/workflows/x.yml", wf);
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
    assert_eq!(r.suppressed, 1);
    let sh = "#!/bin/sh\nhelm upgrade a ./c --set image.tag=latest # greenlight:ignore\n";
    assert_eq!(lint_one("bin/deploy", sh).suppressed, 1);
}

#[test]
fn crlf_tabs_and_unicode_keep_columns() {
    let wf = "jobs:\r\n  d:\r\n    steps:\r\n      - run: |\r\n          echo \"é\"; helm upgrade a ./c --set image.tag=main\r\n";
    let r = lint_one(".github/workflows/x.yml", wf);
    assert_eq!(
        at(&r),
        [("GL701", ".github/workflows/x.yml".to_string(), 5, 56)]
    );
}

#[test]
fn hostile_pipelines_never_panic() {
    let deep = format!(
        "jobs:\n  d:\n    steps:\n      - run: {}\n",
        "[".repeat(5000)
    );
    let odd: &[(&str, &str)] = &[
        (".github/workflows/a.yml", "jobs: [1, 2]\n"),
        (
            ".github/workflows/a.yml",
            "jobs:\n  d:\n    steps: {run: x}\n",
        ),
        (
            ".github/workflows/a.yml",
            "jobs:\n  d:\n    steps:\n      - run: {a: b}\n",
        ),
        (".github/workflows/a.yml", &deep),
        (
            ".github/workflows/a.yml",
            "jobs:\n  d:\n    steps:\n      - run: \"helm upgrade a --set image.tag='x\"\n",
        ),
        (
            ".gitlab-ci.yml",
            "a: {script: !reference [., ., .]}\nb: {extends: [a, a, zz], script: [!reference [b, script]]}\n",
        ),
        (
            ".gitlab-ci.yml",
            "j:\n  script:\n    - $(\n    - ${{\n    - \"`\n    - <<\n    - a <<E\n",
        ),
        ("x.sh", "\u{0}\u{1}\\"),
        ("x.sh", "helm upgrade a --set image.tag=$(echo \"$(\n"),
        (
            "x.sh",
            "cat <<'EOF'\nhelm upgrade a --set image.tag=latest\n",
        ),
    ];
    for (name, text) in odd {
        let r = lint_one(name, text);
        assert!(
            r.diagnostics.iter().all(|d| d.rule != "GL701"),
            "{name}: {text:?}: {:?}",
            r.diagnostics
        );
    }
}

#[test]
fn kinds_are_read_by_the_rules_that_declare_them() {
    for r in RULES {
        let kinds = r.check.kinds();
        assert!(!kinds.is_empty(), "{}", r.id);
        if PIPELINE_RULES.contains(&r.id) {
            assert!(kinds.contains(&Kind::ShellScript) && !kinds.contains(&Kind::Manifests));
        }
    }
    // A workflow is not read as manifests: a Pod written in one is not GL001's.
    let wf = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: a, image: a:latest}\n";
    let opts = Options::default();
    let as_manifest = lint(
        &[Source::new("k8s/p.yaml".into(), wf.into())],
        Vec::new(),
        &opts,
    );
    assert!(as_manifest.diagnostics.iter().any(|d| d.rule == "GL001"));
    let as_workflow = lint(
        &[Source::new(".github/workflows/p.yaml".into(), wf.into())],
        Vec::new(),
        &opts,
    );
    assert!(as_workflow.diagnostics.is_empty());
}

#[test]
fn github_env_expressions_read_the_workflow_env() {
    let wf = "env:\n  TAG: main\n  V: 1.0.0\njobs:\n  d:\n    steps:\n      - run: |\n          \
              TAG=1.2.3\n          \
              helm upgrade a ./c --set image.tag=${{ env.TAG }}\n          \
              helm upgrade a ./c --set image.tag=${{ env.V }} --set b.tag=${{ env.NOPE }}\n          \
              helm upgrade a ./c --set image.tag=$TAG\n";
    let r = lint_one(".github/workflows/x.yml", wf);
    assert_eq!(
        at(&r),
        [("GL701", ".github/workflows/x.yml".to_string(), 9, 46)]
    );
    assert!(
        r.diagnostics[0].related[0]
            .message
            .contains("`env.TAG` is set to `main`")
    );
    assert_eq!(r.diagnostics[0].location.end_column, Some(60));
}

/// A value a step writes to `$GITHUB_ENV`, or a GitLab job's dotenv report, replaces the one
/// the file sets for the steps and jobs after it: not known, not flagged.
#[test]
fn values_handed_on_at_run_time_are_not_known() {
    let wf = "env:\n  TAG: latest\njobs:\n  d:\n    steps:\n      - run: helm upgrade a ./c --set image.tag=$TAG\n      - run: |\n          \
              echo \"TAG=sha-${GITHUB_SHA::7}\" >> \"$GITHUB_ENV\"\n      - run: helm upgrade a ./c --set image.tag=$TAG\n      - run: helm upgrade a ./c --set image.tag=${{ env.TAG }}\n";
    let r = lint_one(".github/workflows/x.yml", wf);
    assert_eq!(
        at(&r),
        [("GL701", ".github/workflows/x.yml".to_string(), 6, 49)]
    );
    let gl = "variables:\n  TAG: main\nbuild:\n  script:\n    - echo \"TAG=$CI_COMMIT_SHORT_SHA\" > build.env\n  artifacts:\n    reports:\n      dotenv: build.env\ndeploy:\n  script:\n    - helm upgrade a ./c --set image.tag=$TAG\n";
    assert!(lint_one(".gitlab-ci.yml", gl).diagnostics.is_empty());
    let without = gl.replace("      dotenv: build.env\n", "      junit: r.xml\n");
    assert_eq!(lint_one(".gitlab-ci.yml", &without).diagnostics.len(), 1);
}
