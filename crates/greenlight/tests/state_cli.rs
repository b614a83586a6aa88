//! The binary's `state export`, `state import`, `status` and `breaker reset` with `--store kube`
//! against a real kube-apiserver (the kit's harness) with the chart's CRDs: a state file (the
//! first release's fixture, migrated, with memory added) exported, imported into the cluster,
//! shown by `status --store kube` as `status --state` shows the file, exported again and
//! imported into a new file losslessly; an import into a store that is not empty refused; a
//! breaker reset left as a request; the flags' usage errors.

mod common;
use common::{GOOD2, Repo, sandbox, trailer, watchdog};
use greenlight::store::{SqliteStore, Write};
use greenlight_core::commit::CommitId;
use greenlight_core::judge::{Arrived, Idle};
use greenlight_core::snapshot::{AppKey, Health};
use greenlight_testkit::KubeApiserver;
use serde_json::Value;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const BIN: &str = common::BIN;
const CRDS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../deploy/helm/greenlight/crds"
);
const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/state-v1.db");
const NS: &str = "gl";

fn run(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(s) = stdin {
        input.write_all(s.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[track_caller]
fn ok(args: &[&str], stdin: Option<&str>) -> String {
    let out = run(args, stdin);
    assert!(
        out.status.success(),
        "greenlight {} failed:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[track_caller]
fn fails(args: &[&str], code: i32) -> String {
    let out = run(args, None);
    assert_eq!(
        out.status.code(),
        Some(code),
        "greenlight {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stderr).unwrap()
}

/// A state file as a daemon leaves it: the first release's file, migrated, with the idle
/// observations and arrived commits a later release keeps.
fn state_file(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("state.db");
    std::fs::copy(FIXTURE, &path).unwrap();
    let mut store = SqliteStore::open_or_create(&path).unwrap();
    let sha = |n: usize| CommitId::parse(&format!("{n:040x}")).unwrap();
    let arrived: Vec<Arrived> = (1..=5)
        .map(|n| Arrived {
            sha: sha(n),
            parents: vec![sha(n - 1)],
            changed_paths: vec![format!("apps/web/{n}.yaml")].into(),
            reverts: None,
            at: None,
            by_greenlight: false,
        })
        .collect();
    let idle = vec![Idle {
        revision: sha(5).to_string(),
        health: Health::Healthy,
        unclean: None,
        applied: None,
        chronic: Default::default(),
        out_of_sync: false,
    }];
    store
        .write(Write {
            idle: &[(
                AppKey {
                    namespace: "argocd".into(),
                    name: "web".into(),
                },
                idle,
            )],
            arrived: &arrived,
            ..Write::default()
        })
        .unwrap();
    path
}

#[test]
fn a_state_file_moves_into_the_cluster_and_back_and_status_shows_the_same() {
    let kube = KubeApiserver::start_with_namespaces(&[NS]);
    let dir = tempfile::tempdir().unwrap();
    let kc = kube.kubeconfig().to_str().unwrap().to_string();
    let kube_flags = [
        "--store",
        "kube",
        "--kubeconfig",
        &kc,
        "--store-namespace",
        NS,
    ];
    let with = |cmd: &[&str], extra: &[&str]| -> Vec<String> {
        cmd.iter()
            .chain(kube_flags.iter())
            .chain(extra.iter())
            .map(|s| s.to_string())
            .collect()
    };

    // No CRDs yet: said so, with what to do.
    let err = fails(&args(&with(&["status"], &[])), 2);
    assert!(
        err.contains("the CRD watchdogs.greenlight.dev is not installed")
            && err.contains("kubectl apply -f deploy/helm/greenlight/crds/"),
        "{err}"
    );
    kube.kubectl_ok(&["apply", "-f", CRDS]);
    kube.wait_until("the CRDs are served", || {
        kube.kubectl(&[
            "get",
            "watchdogs.greenlight.dev,watches.greenlight.dev",
            "-n",
            NS,
        ])
        .status
        .success()
    });
    let err = fails(&args(&with(&["status"], &[])), 2);
    assert!(
        err.contains("watchdogs.greenlight.dev gl/greenlight does not exist"),
        "{err}"
    );

    let file = state_file(dir.path());
    let f = file.to_str().unwrap();
    let doc_path = dir.path().join("state.json");
    ok(
        &[
            "state",
            "export",
            "--state",
            f,
            "--output",
            doc_path.to_str().unwrap(),
        ],
        None,
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&doc_path).unwrap()).unwrap();
    assert_eq!(doc["format"], 1);
    assert_eq!(doc["repo"], "origin.git");
    assert_eq!(doc["watches"].as_array().unwrap().len(), 6);
    assert_eq!(doc["arrived"].as_array().unwrap().len(), 5);
    assert!(doc["idle"]["argocd/web"].is_array());

    let out = ok(
        &args(&with(&["state", "import"], &[doc_path.to_str().unwrap()])),
        None,
    );
    assert!(
        out.contains(
            "imported 6 watch(es) into watches.greenlight.dev in namespace gl (store greenlight)"
        ),
        "{out}"
    );
    // The same watches, verdicts and breaker, as `status` shows them.
    assert_eq!(
        ok(&args(&with(&["status", "--json"], &[])), None),
        ok(&["status", "--json", "--state", f], None)
    );
    assert_eq!(
        ok(&args(&with(&["status"], &[])), None),
        ok(&["status", "--state", f], None)
    );
    // Back out of the cluster: the same document; into a new file: the same again.
    let again = ok(&args(&with(&["state", "export"], &[])), None);
    let again_doc: Value = serde_json::from_str(&again).unwrap();
    assert_eq!(again_doc, doc);
    let back = dir.path().join("back.db");
    ok(
        &["state", "import", "--state", back.to_str().unwrap(), "-"],
        Some(&again),
    );
    let back_doc: Value = serde_json::from_str(&ok(
        &["state", "export", "--state", back.to_str().unwrap()],
        None,
    ))
    .unwrap();
    assert_eq!(back_doc, doc);

    // A store that holds watches is no target.
    let out = run(
        &args(&with(&["state", "import"], &[doc_path.to_str().unwrap()])),
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not empty (6 watch(es)"), "{err}");
    let err = fails(
        &[
            "state",
            "import",
            "--state",
            back.to_str().unwrap(),
            doc_path.to_str().unwrap(),
        ],
        1,
    );
    assert!(err.contains("is not empty"), "{err}");

    // A breaker reset is a request for the leader.
    let out = ok(&args(&with(&["breaker", "reset"], &[])), None);
    assert!(
        out.contains("breaker reset requested") && out.contains("next fetch"),
        "{out}"
    );
    let at = kube.kubectl_ok(&[
        "get",
        "watchdog",
        "greenlight",
        "-n",
        NS,
        "-o",
        "jsonpath={.state.breakerResetRequestedAt}",
    ]);
    assert!(
        at.trim().parse::<i64>().unwrap() > 1_700_000_000_000,
        "{at}"
    );
}

#[test]
fn the_store_flags_are_exactly_one_of_state_and_store_kube() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("state.db");
    let f = f.to_str().unwrap();
    for (args, want) in [
        (vec!["status"], "give --state <file> or --store kube"),
        (vec!["status", "--state", f, "--store", "kube"], "not both"),
        (
            vec!["breaker", "reset", "--state", f, "--store-name", "x"],
            "--store-name is for --store kube",
        ),
        (
            vec!["state", "export"],
            "give --state <file> or --store kube",
        ),
        (
            vec!["state", "import", "--state", f, "/nonexistent/doc.json"],
            "cannot read the document /nonexistent/doc.json",
        ),
        (
            vec![
                "status",
                "--store",
                "kube",
                "--kubeconfig",
                "/nonexistent/kubeconfig",
            ],
            "/nonexistent/kubeconfig",
        ),
    ] {
        let err = fails(&args, 2);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // clap refuses another store by name.
    let err = fails(&["status", "--store", "etcd"], 2);
    assert!(err.contains("etcd"), "{err}");
    // A document that is not one.
    let doc = dir.path().join("doc.json");
    std::fs::write(&doc, "{\"format\": 9}").unwrap();
    let err = fails(&["state", "import", "--state", f, doc.to_str().unwrap()], 2);
    assert!(err.contains("format 9"), "{err}");
    assert!(
        !Path::new(f).exists(),
        "nothing created for a refused document"
    );
}

/// The state a real `greenlight watch` run left (a CONFIRMED watch, the app's idle
/// observations, the arrived commit) moves into the cluster and shows the same there.
#[test]
fn a_watchdogs_state_file_moves_into_the_cluster() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let mut wd = watchdog(&repo, &sb.url, &[], &[]);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "30", "arm")),
    );
    wd.wait_state(&c, "CONFIRMED", std::time::Duration::from_secs(60));
    wd.proc.sigterm();
    assert!(
        wd.proc
            .wait_exit(std::time::Duration::from_secs(30))
            .success()
    );
    let state = repo.path("state/greenlight.db");
    let f = state.to_str().unwrap();
    let doc = ok(&["state", "export", "--state", f], None);
    let v: Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(v["watches"].as_array().unwrap().len(), 1);
    assert_eq!(v["watches"][0]["state"], "CONFIRMED");
    assert!(!v["idle"].as_object().unwrap().is_empty(), "{v}");
    assert!(
        v["arrived"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["sha"] == c.as_str()),
        "{v}"
    );

    let kube = KubeApiserver::start_with_namespaces(&[NS]);
    kube.kubectl_ok(&["apply", "-f", CRDS]);
    kube.wait_until("the CRDs are served", || {
        kube.kubectl(&[
            "get",
            "watchdogs.greenlight.dev,watches.greenlight.dev",
            "-n",
            NS,
        ])
        .status
        .success()
    });
    let kc = kube.kubeconfig().to_str().unwrap();
    let kube_flags = [
        "--store",
        "kube",
        "--kubeconfig",
        kc,
        "--store-namespace",
        NS,
    ];
    let with = |cmd: &[&str]| -> Vec<String> {
        cmd.iter()
            .chain(kube_flags.iter())
            .map(|s| s.to_string())
            .collect()
    };
    ok(&args(&with(&["state", "import", "-"])), Some(&doc));
    assert_eq!(
        ok(&args(&with(&["status", "--json"])), None),
        ok(&["status", "--json", "--state", f], None)
    );
    let again: Value = serde_json::from_str(&ok(&args(&with(&["state", "export"])), None)).unwrap();
    assert_eq!(again, v);
    let row = kube.kubectl_ok(&["get", "watches", "-n", NS]);
    assert!(row.contains(&c[..8]) && row.contains("CONFIRMED"), "{row}");
}
