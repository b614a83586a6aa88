//! `greenlight watch --source kube` against a real Kubernetes API server (Debian's etcd and
//! kube-apiserver v1.20.2, greenlight-testkit's `kube` module) with Argo CD's real Application
//! CRD. The sandbox stands in for Argo CD; its Applications are written to the apiserver as
//! Argo CD's application controller writes them (the kit's `SandboxMirror`), and the watchdog
//! reads them from there only: no `--argocd-url` unless a test says so.

#[macro_use]
mod common;
use common::*;
use greenlight_testkit::KubeApiserver;
use greenlight_testkit::kube::ARGOCD_NAMESPACE;
use std::path::Path;
use std::time::Duration;

const T: Duration = Duration::from_secs(90);

fn out_of(p: &Proc) -> String {
    p.output()
}

/// `greenlight watch --source kube` over `repo` with the kit's test timings and `kubeconfig`,
/// then `extra`; waited for until it watches.
#[track_caller]
fn kube_watchdog(
    repo: &Repo,
    kubeconfig: &Path,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> (Proc, std::path::PathBuf) {
    let state = repo.path("state/greenlight.db");
    let mut args = watch_args(repo, "-", &state, &[]);
    let i = args.iter().position(|a| a == "--argocd-url").unwrap();
    args.drain(i..i + 2);
    args.extend(
        [
            "--source",
            "kube",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--namespace",
            ARGOCD_NAMESPACE,
        ]
        .map(String::from),
    );
    args.extend(extra.iter().map(|s| s.to_string()));
    let proc = Proc::spawn(BIN, &args, envs);
    proc.wait_line(greenlight_testkit::watch::WATCHING, T);
    (proc, state)
}

#[test]
fn a_good_commit_is_confirmed_from_the_kubernetes_api() {
    let kube = KubeApiserver::start();
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let _mirror = kube.mirror_sandbox(&sb.url);
    // A resync every second beside the watch finds nothing the watch missed.
    let (wd, state) = kube_watchdog(
        &repo,
        kube.kubeconfig(),
        &["--log-format", "json", "--resync-interval", "1s"],
        &[],
    );
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "30", "arm")),
    );
    let w = wait_state(&state, &c, "CONFIRMED", T, &wd);
    assert!(w["healthy_since"].is_string());
    // The verdict's evidence names where resource health came from: nowhere.
    let verdict: serde_json::Value = wd
        .lines()
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["state"] == "CONFIRMED")
        .expect("a CONFIRMED line");
    assert_eq!(
        verdict["evidence"]["resource_health_source"], "unavailable",
        "{verdict}"
    );
    // And so does the verdict's reason, in the event and in `status`.
    let note = "judged on the app-level health alone";
    assert!(
        verdict["message"].as_str().unwrap_or("").contains(note),
        "{verdict}"
    );
    assert!(w["reason"].as_str().unwrap_or("").contains(note), "{w}");
    assert!(
        !out_of(&wd).contains("a resync of Applications"),
        "{}",
        out_of(&wd)
    );
    // Argo CD 3.5 keeps per-resource health out of the Application: without --argocd-url the
    // judge had the app-level health only, and says so, at start and where the streak began.
    let out = wd.output();
    assert!(out.contains("app-level health alone"), "{out}");
    assert!(out.contains("resource health from unavailable"), "{out}");
}

#[test]
fn a_bad_commit_fails_in_dry_run_and_resource_trees_come_from_argocd_when_given() {
    let kube = KubeApiserver::start();
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let _mirror = kube.mirror_sandbox(&sb.url);
    let (wd, state) = kube_watchdog(
        &repo,
        kube.kubeconfig(),
        &["--argocd-url", &sb.url],
        &[("DRY_RUN", "true")],
    );
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: bad\n\n{}", trailer("web", "4", "arm")),
    );
    let w = wait_state(&state, &bad, "FAIL", T, &wd);
    assert_eq!(w["dry_run"], true);
    let reason = w["reason"].as_str().unwrap();
    // Dry-run says "would have reverted" only with the evidence an armed watch needs; under
    // load the baseline's Application and resource tree can be read at different moments, and
    // then it says that instead (docs/verdicts.md#dry-run) — never that it reverted.
    assert!(
        reason.contains("dry-run: would have reverted")
            || reason.contains("no evidence that this commit broke the app"),
        "{reason}"
    );
    // The Degraded Deployment is named: read from the resource tree of Argo CD's API.
    assert!(reason.contains("Deployment"), "{reason}");
    assert!(!wd.output().contains("app-level health alone"));
    assert_eq!(repo.remote_tip(), bad, "dry-run pushes nothing");
}

#[test]
fn the_watch_resumes_after_the_apiserver_restarts() {
    let mut kube = KubeApiserver::start_with_namespaces(&["team-b"]);
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let mirror = kube.mirror_sandbox(&sb.url);
    // Two namespaces, two watches: connected when both are open again.
    let (wd, state) = kube_watchdog(&repo, kube.kubeconfig(), &["--namespace", "team-b"], &[]);
    wd.wait_line("Kubernetes API application stream connected", T);
    drop(mirror);
    kube.restart_apiserver();
    wd.wait_line("Kubernetes API application stream lost", T);
    let _mirror = kube.mirror_sandbox(&sb.url);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "30", "arm")),
    );
    wait_state(&state, &c, "CONFIRMED", T, &wd);
    // The verdict may come from the fallback listing before the stream is back (its backoff
    // under load): the stream's return is waited for, not assumed at the verdict's moment.
    wd.wait_line_after(
        "Kubernetes API application stream lost",
        "Kubernetes API application stream connected",
        T,
    );
    let out = wd.output();
    // Resumed from its resourceVersion: no 410, no relist.
    assert!(!out.contains("listing again"), "{out}");
}

#[test]
fn a_watch_past_etcd_compaction_is_gone_and_relisted() {
    let kube = KubeApiserver::start();
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let mirror = kube.mirror_sandbox(&sb.url);
    let (wd, state) = kube_watchdog(&repo, kube.kubeconfig(), &[], &[]);
    // The Applications stop changing, then etcd is compacted past their last change: the
    // watch's next re-opening (every 10 s) is from a compacted resourceVersion.
    drop(mirror);
    kube.compact_etcd();
    let gone = wd.wait_line("listing again", Duration::from_secs(30));
    assert!(gone.contains("is gone (410"), "{gone}");
    let _mirror = kube.mirror_sandbox(&sb.url);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "30", "arm")),
    );
    wait_state(&state, &c, "CONFIRMED", T, &wd);
}

#[test]
fn a_malformed_application_is_named_and_the_others_are_judged() {
    let kube = KubeApiserver::start();
    // A CRD out of step with the controller that writes it (an upgrade half done): its status
    // schema keeps whatever is written, so the apiserver stores what Argo CD's types cannot
    // hold.
    kube.kubectl_ok(&[
        "patch",
        "crd",
        "applications.argoproj.io",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/versions/0/schema/openAPIV3Schema/properties/status","value":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}]"#,
    ]);
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let _mirror = kube.mirror_sandbox(&sb.url);
    // The apiserver takes the new schema a moment after the patch: tried until it does
    // (kubectl's own validation, from its cached OpenAPI, left to the apiserver).
    let broken = kube.dir().join("broken.json");
    std::fs::write(
        &broken,
        r#"{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"broken","namespace":"argocd"},"spec":{"project":"default","destination":{"server":"https://kubernetes.default.svc","namespace":"apps"},"source":{"repoURL":"https://example.invalid/r.git","path":"apps/broken","targetRevision":"HEAD"}},"status":{"sync":{"status":"Synced","revisions":"not-a-list"}}}"#,
    )
    .unwrap();
    kube.wait_until("the relaxed schema takes the malformed Application", || {
        kube.kubectl(&[
            "apply",
            "--server-side",
            "--validate=false",
            "-f",
            broken.to_str().unwrap(),
        ])
        .status
        .success()
    });
    let (wd, state) = kube_watchdog(&repo, kube.kubeconfig(), &[], &[]);
    wd.wait_line("argocd/broken could not be read", T);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "30", "arm")),
    );
    wait_state(&state, &c, "CONFIRMED", T, &wd);
    let line = wd.wait_line("argocd/broken could not be read", T);
    assert!(line.contains("status.sync.revisions"), "{line}");
}

#[test]
fn a_service_account_runs_it_with_the_documented_rbac_and_is_refused_without_it() {
    let kube = KubeApiserver::start();
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let _mirror = kube.mirror_sandbox(&sb.url);
    let rbac = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/rbac.yaml");
    // The ServiceAccount alone first: its token is valid, and bound to nothing.
    let sa_only: String = std::fs::read_to_string(rbac)
        .unwrap()
        .split("\n---\n")
        .find(|d| d.contains("kind: ServiceAccount"))
        .unwrap()
        .to_string();
    kube.kubectl_stdin(&["apply"], &sa_only);
    let token = kube.create_token(ARGOCD_NAMESPACE, "greenlight");
    let config = repo.path("sa.kubeconfig");
    kube.write_token_kubeconfig(&config, &token, ARGOCD_NAMESPACE);

    let state = repo.path("state/greenlight.db");
    let mut args = watch_args(&repo, "-", &state, &[]);
    let i = args.iter().position(|a| a == "--argocd-url").unwrap();
    args.drain(i..i + 2);
    args.extend(["--source", "kube", "--kubeconfig", config.to_str().unwrap()].map(String::from));
    let wd = Proc::spawn(BIN, &args, &[]);
    let refused = wd.wait_line("forbidden", T);
    assert!(refused.contains("403"), "{refused}");
    assert!(
        refused.contains("system:serviceaccount:argocd:greenlight"),
        "{refused}"
    );

    // The documented RBAC, as the docs apply it: now it lists, watches and judges.
    kube.kubectl_ok(&["apply", "-f", rbac]);
    wd.wait_line(greenlight_testkit::watch::WATCHING, T);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "30", "arm")),
    );
    wait_state(&state, &c, "CONFIRMED", T, &wd);
    // It holds no more than the file grants.
    let can = |verb: &str, what: &str| {
        kube.kubectl(&[
            "auth",
            "can-i",
            verb,
            what,
            "--as=system:serviceaccount:argocd:greenlight",
            "-A",
        ])
        .status
        .success()
    };
    assert!(can("watch", "applications.argoproj.io"));
    assert!(can("create", "events.events.k8s.io"));
    assert!(!can("update", "applications.argoproj.io"));
    assert!(!can("get", "secrets"));
}

#[test]
fn argocd_url_stays_required_with_the_rest_source_and_a_bad_kubeconfig_is_named() {
    let run = |args: &[&str]| {
        std::process::Command::new(BIN)
            .args(["watch", "--repo", "/nonexistent/repo", "--state"])
            .arg(std::env::temp_dir().join("greenlight-kube-cli-test.db"))
            .args(args)
            .output()
            .expect("run greenlight")
    };
    for args in [&[][..], &["--source", "argocd"]] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--argocd-url"), "{args:?}: {err}");
    }
    let out = run(&[
        "--source",
        "kube",
        "--kubeconfig",
        "/nonexistent/kubeconfig",
        "--once",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("kubeconfig /nonexistent/kubeconfig"), "{err}");
    // `--source` from the environment (or a config file) is read before --argocd-url is
    // required: kube's kubeconfig is what is missing here.
    let out = std::process::Command::new(BIN)
        .args(["watch", "--repo", "/nonexistent/repo", "--state"])
        .arg(std::env::temp_dir().join("greenlight-kube-cli-test.db"))
        .args(["--kubeconfig", "/nonexistent/kubeconfig", "--once"])
        .env("GREENLIGHT_SOURCE", "kube")
        .output()
        .expect("run greenlight");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("kubeconfig /nonexistent/kubeconfig") && !err.contains("--argocd-url"),
        "{err}"
    );
    let out = run(&[
        "--argocd-url",
        "http://127.0.0.1:9",
        "--namespace",
        "argocd",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--namespace: only read with --source kube"),
        "{err}"
    );
}
