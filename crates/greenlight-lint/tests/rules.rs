//! Fixture tests, one file per rule under `tests/fixtures/<ID>_<name>.yaml`: each runs with only
//! that rule enabled; the diagnostics are snapshotted, and independently of the snapshot every
//! object named `flagged-*` must get at least one diagnostic and every `ok-*` none.

mod common;

use common::{fixture_report, render};
use greenlight_lint::{Options, RULES, Severity, Source, lint, object::Object, yaml};
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
fn gl003_invalid_image_reference() {
    check_fixture("GL003");
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
    // Pipeline rules are tested on the workflows, GitLab CI file and scripts of
    // `tests/fixtures/pipelines` (tests/pipelines.rs).
    let objects = |r: &&greenlight_lint::Rule| {
        !matches!(
            r.check,
            greenlight_lint::rules::Check::Engine | greenlight_lint::rules::Check::Pipeline(_)
        )
    };
    for r in RULES.iter().filter(objects) {
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
    let severities = |opts: &Options| -> Vec<Severity> {
        lint(&src, Vec::new(), opts)
            .diagnostics
            .iter()
            .map(|d| d.severity)
            .collect()
    };
    assert_eq!(severities(&opts), vec![Severity::Info]);
    opts.settings.strategy_max_replicas = 4;
    assert_eq!(severities(&opts), vec![Severity::Warning]);
    // A configured severity is the user's word for every finding of the rule.
    opts.severity.insert("GL301", Severity::Error);
    opts.settings.strategy_max_replicas = 5;
    assert_eq!(severities(&opts), vec![Severity::Error]);
}

/// GL301 grades its findings: `info` up to 3 replicas (the defaults are the fix there),
/// `warning` from 4 and with a ReadWriteOnce claim at any count.
#[test]
fn gl301_severity_follows_replicas_and_volumes() {
    let (_, report) = common::fixture_report("GL301", |_| {});
    let severity = |name: &str| -> Vec<Severity> {
        report
            .diagnostics
            .iter()
            .filter(|d| d.object.as_ref().and_then(|o| o.name.as_deref()) == Some(name))
            .map(|d| d.severity)
            .collect()
    };
    for (name, want) in [
        ("flagged-no-strategy", Severity::Info),
        ("flagged-replicas-unset", Severity::Info),
        ("flagged-type-only", Severity::Info),
        ("flagged-four-replicas", Severity::Warning),
        ("flagged-hpa-max-twenty", Severity::Warning),
        ("flagged-hpa-max-three", Severity::Info),
        ("flagged-rwo-claim", Severity::Warning),
        ("flagged-rwx-claim-info", Severity::Info),
    ] {
        assert_eq!(severity(name), vec![want], "{name}");
    }
    let rwo = report
        .diagnostics
        .iter()
        .find(|d| d.message.contains("ReadWriteOnce"))
        .expect("the RWO finding");
    assert!(
        rwo.message.starts_with("Deployment with 1 replica(s) "),
        "{}",
        rwo.message
    );
    assert!(rwo.message.contains("`data`") && rwo.fix.as_deref().unwrap().contains("Recreate"));
    assert_eq!(rwo.related.len(), 1, "the claim is related");
    let hpa = report
        .diagnostics
        .iter()
        .find(|d| d.message.contains("HorizontalPodAutoscaler twenty"))
        .expect("the HPA finding");
    assert!(
        hpa.message.starts_with("Deployment with 20 replica(s) "),
        "{}",
        hpa.message
    );
    assert_eq!(
        hpa.related[0].message,
        "HorizontalPodAutoscaler twenty scales it up to 20"
    );
}

const PARTIAL_DEPLOYMENT: &str =
    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 6\n";

/// A file a kustomization names as a patch holds a partial object: GL301 does not judge it.
#[test]
fn gl301_skips_kustomize_patch_files() {
    let opts = Options {
        enabled: ["GL301"].into_iter().collect(),
        ..Options::default()
    };
    let run = |kustomization: &str| {
        let srcs = vec![
            Source::new("app/prod/kustomization.yaml".into(), kustomization.into()),
            Source::new("app/prod/replicas.yaml".into(), PARTIAL_DEPLOYMENT.into()),
            // Another object: identical findings on copies of one object are folded.
            Source::new(
                "app/prod/patches/more.yaml".into(),
                PARTIAL_DEPLOYMENT.replace("{name: web}", "{name: api}"),
            ),
        ];
        let files: Vec<String> = lint(&srcs, Vec::new(), &opts)
            .diagnostics
            .iter()
            .map(|d| d.location.file.clone())
            .collect();
        files
    };
    assert_eq!(
        run("resources: [../base]\n"),
        vec!["app/prod/patches/more.yaml", "app/prod/replicas.yaml"],
        "not named as patches: judged"
    );
    assert!(
        run("patchesStrategicMerge:\n- replicas.yaml\npatches:\n- path: ./patches/../patches/more.yaml\n  target: {kind: Deployment}\n- patch: |-\n    - op: replace\n")
            .is_empty()
    );
    // The same names in a file kustomize would not read are not a kustomization.
    let srcs = vec![
        Source::new(
            "app/prod/notes.yaml".into(),
            "patchesStrategicMerge: [replicas.yaml]\n".into(),
        ),
        Source::new("app/prod/replicas.yaml".into(), PARTIAL_DEPLOYMENT.into()),
    ];
    assert_eq!(lint(&srcs, Vec::new(), &opts).diagnostics.len(), 1);
}

/// A kustomization's `images[].newTag` is what the rendered image will carry.
#[test]
fn kustomize_image_tags_are_judged() {
    let k = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nimages:\n\
             - name: web\n  newTag: latest\n\
             - name: api\n  newName: ghcr.io/acme/api\n  newTag: stable-alpine\n\
             - name: ok-pinned\n  newTag: latest\n  digest: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n\
             - name: ok-versioned\n  newTag: \"1.4.2\"\n\
             - name: placeholder\n  newName: <REGISTRY>/app\n";
    // kustomize does not require apiVersion and kind.
    let bare = k
        .split_once("images:")
        .map(|(_, r)| format!("images:{r}"))
        .unwrap();
    for text in [k.to_string(), bare] {
        let srcs = vec![Source::new("overlay/kustomization.yaml".into(), text)];
        let mut opts = Options {
            enabled: ["GL001", "GL003"].into_iter().collect(),
            ..Options::default()
        };
        let r = lint(&srcs, Vec::new(), &opts);
        let got: Vec<(&str, &str, u32)> = r
            .diagnostics
            .iter()
            .map(|d| {
                (
                    d.rule,
                    d.field.as_str(),
                    d.location.line.expect("a plain file has lines"),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("GL001", "images[0].newTag", got[0].2),
                ("GL001", "images[1].newTag", got[0].2 + 3),
                ("GL003", "images[4].newName", got[0].2 + 10),
            ],
            "{}",
            common::render(&r)
        );
        assert!(
            r.diagnostics[1]
                .message
                .contains("`ghcr.io/acme/api:stable-alpine`")
        );
        // Not a kustomization by name: nothing is read from it.
        opts.enabled.insert("GL002");
        let other = vec![Source::new("overlay/images.yaml".into(), k.into())];
        assert!(lint(&other, Vec::new(), &opts).diagnostics.is_empty());
    }
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

/// `[lint] immutable-tags` declares words a team never pushes twice: GL001 and GL701 then
/// leave them alone; the default mutable list still wins.
#[test]
fn declared_immutable_tags_are_not_flagged() {
    let manifest = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: a, image: 'demo:blue'}\n  - {name: b, image: 'demo:green'}\n  - {name: c, image: 'demo:latest'}\n";
    let script = "#!/bin/sh\nhelm upgrade d ./c --set image.tag=blue\n";
    let src = || {
        vec![
            Source::new("p.yaml".into(), manifest.into()),
            Source::new("deploy.sh".into(), script.into()),
        ]
    };
    let graded = |r: &greenlight_lint::Report| -> Vec<(String, u32, Severity)> {
        r.diagnostics
            .iter()
            .map(|d| {
                (
                    d.location.file.clone(),
                    d.location.line.unwrap(),
                    d.severity,
                )
            })
            .collect()
    };
    let cfg = greenlight_lint::config::parse("c.toml", "").unwrap().lint;
    let opts = Options::from_config(&cfg, Some(vec!["GL001", "GL701"]), &[]);
    let default = lint(&src(), Vec::new(), &opts);
    assert_eq!(
        graded(&default),
        [
            ("deploy.sh".to_string(), 2, Severity::Warning),
            ("p.yaml".to_string(), 6, Severity::Warning),
            ("p.yaml".to_string(), 7, Severity::Warning),
            ("p.yaml".to_string(), 8, Severity::Error),
        ]
    );
    let cfg = greenlight_lint::config::parse(
        "c.toml",
        "[lint]\nimmutable-tags = [\"blue\", \"latest\"]\n",
    )
    .unwrap()
    .lint;
    let opts = Options::from_config(&cfg, Some(vec!["GL001", "GL701"]), &[]);
    let declared = lint(&src(), Vec::new(), &opts);
    assert_eq!(
        graded(&declared),
        [
            ("p.yaml".to_string(), 7, Severity::Warning),
            ("p.yaml".to_string(), 8, Severity::Error),
        ]
    );
}

/// A kustomization's `images[]` newTag/digest is applied to the containers of the files it
/// renders before GL001 judges them: a base tag every built overlay replaces is not flagged;
/// one an overlay deploys as written is.
#[test]
fn kustomize_image_rewrites_apply_before_gl001() {
    let base = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers:\n      - {name: web, image: 'ghcr.io/acme/web:latest'}\n      - {name: side, image: 'busybox:stable'}\n";
    let run = |files: &[(&str, &str)]| -> Vec<(String, u32)> {
        let sources: Vec<Source> = files
            .iter()
            .map(|(n, t)| Source::new(n.to_string(), t.to_string()))
            .collect();
        let opts = Options {
            enabled: ["GL001"].into_iter().collect(),
            ..Options::default()
        };
        lint(&sources, Vec::new(), &opts)
            .diagnostics
            .iter()
            .map(|d| (d.location.file.clone(), d.location.line.unwrap()))
            .collect()
    };
    let base_k = (
        "base/kustomization.yaml",
        "resources:\n  - deployment.yaml\n",
    );
    let prod = (
        "overlays/prod/kustomization.yaml",
        "resources:\n  - ../../base\nimages:\n  - name: ghcr.io/acme/web\n    newTag: 1.4.2\n",
    );
    let stage = (
        "overlays/stage/kustomization.yaml",
        "resources: [../../base]\nimages:\n- {name: ghcr.io/acme/web, digest: 'sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'}\n",
    );
    let dev = (
        "overlays/dev/kustomization.yaml",
        "resources:\n  - ../../base\n",
    );
    // Alone, the base is judged as written.
    assert_eq!(
        run(&[("base/deployment.yaml", base)]),
        [
            ("base/deployment.yaml".to_string(), 8),
            ("base/deployment.yaml".to_string(), 9)
        ]
    );
    // Every built overlay retags `web` (a tag, a digest); `busybox` keeps its tag.
    assert_eq!(
        run(&[("base/deployment.yaml", base), base_k, prod, stage]),
        [("base/deployment.yaml".to_string(), 9)]
    );
    // An overlay deploying the base as written brings the finding back.
    assert_eq!(
        run(&[("base/deployment.yaml", base), base_k, prod, dev]),
        [
            ("base/deployment.yaml".to_string(), 8),
            ("base/deployment.yaml".to_string(), 9)
        ]
    );
    // A rename in the base's own kustomization, retagged again by the overlay under the new
    // name; `busybox` retagged by the overlay only.
    let renamed_base_k = (
        "base/kustomization.yaml",
        "resources: [deployment.yaml]\nimages:\n- {name: ghcr.io/acme/web, newName: registry.example/web, newTag: '2.0.0'}\n",
    );
    let by_new_name = (
        "overlays/prod/kustomization.yaml",
        "resources: [../../base]\nimages:\n- {name: registry.example/web, newTag: sha-1a2b3c4}\n- {name: busybox, newTag: '1.36'}\n",
    );
    assert!(run(&[("base/deployment.yaml", base), renamed_base_k, by_new_name]).is_empty());
    // `newName` alone keeps the container's tag: the entry is no finding of its own, and the
    // base's tag is judged where it is written.
    let rename_only = (
        "overlays/mirror/kustomization.yaml",
        "resources: [../../base]\nimages:\n- {name: busybox, newName: mirror.example/busybox}\n",
    );
    assert_eq!(
        run(&[("base/deployment.yaml", base), base_k, prod, rename_only]),
        [
            ("base/deployment.yaml".to_string(), 8),
            ("base/deployment.yaml".to_string(), 9)
        ]
    );
}
