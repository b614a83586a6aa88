//! End to end: `greenlight promote prune-survey` as a user runs it before turning prune on for
//! the candidates' Application, against the sandbox over a real bare remote; and the refusal of
//! `promote run` that names it (`docs/promote.md#prune-survey`).

#[macro_use]
mod common;
use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const LIVE: &str =
    "registry.local/web@sha256:1111111111111111111111111111111111111111111111111111111111111111";
const NEW: &str =
    "registry.local/web@sha256:2222222222222222222222222222222222222222222222222222222222222222";

/// A ConfigMap in the candidates' directory that is not a candidate: what a prune would delete
/// once its file is gone from git.
const LEFTOVER: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leftover\n  namespace: apps\ndata:\n  note: \"left here by hand\"\n";

/// A remote whose `main` holds the live app and the candidates' directory (with `extra` files
/// in it), the sandbox deploying both with Argo CD's defaults for the candidates' app (automated
/// sync without prune), settled.
fn world(extra: &[(&str, &str)], sandbox_flags: &[&str]) -> (Repo, Sandbox) {
    let repo = Repo::new();
    repo.write("apps/web/deploy.yaml", &deployment("web", LIVE))
        .write("apps/candidates/README.md", "promotion candidates\n");
    for (path, text) in extra {
        repo.write(path, text);
    }
    repo.commit_push("web: pinned");
    let sb = sandbox(
        &repo,
        &["web=apps/web", "cands=apps/candidates"],
        sandbox_flags,
    );
    settled(&sb, &repo, &["web", "cands"]);
    (repo, sb)
}

fn config(dir: &Path) -> String {
    let text = "apiVersion: greenlight.dev/v1alpha1
kind: Promotion
live:
  app: web
  manifest: apps/web/deploy.yaml
  workload: {kind: Deployment, name: web, namespace: apps, container: main}
candidate:
  app: cands
  path: apps/candidates
  port: 8080
checks:
  - name: smoke
    command:
      argv: [sh, -c, 'exit 0']
      timeout: 30s
promotion:
  watch: {mode: shadow, deadline: 60s}
";
    let file = dir.join("promote.yaml");
    std::fs::write(&file, text).unwrap();
    file.to_string_lossy().into_owned()
}

fn survey(url: &str, config: &str, extra: &[&str]) -> Output {
    Command::new(BIN)
        .args([
            "promote",
            "prune-survey",
            "--config",
            config,
            "--argocd-url",
            url,
        ])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("run greenlight")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn tree_has(sb: &Sandbox, app: &str, kind: &str, name: &str) -> bool {
    sb.tree(app)["nodes"]
        .as_array()
        .is_some_and(|nodes| nodes.iter().any(|n| n["kind"] == kind && n["name"] == name))
}

fn requires_pruning(app: &Value, name: &str) -> bool {
    app["status"]["resources"].as_array().is_some_and(|rs| {
        rs.iter()
            .any(|r| r["name"] == name && r["requiresPruning"] == true)
    })
}

#[test]
fn a_leftover_resource_is_named_and_nothing_is_deleted() {
    let pinned = LEFTOVER.replace(
        "  name: leftover\n",
        "  name: pinned\n  annotations: {argocd.argoproj.io/sync-options: Prune=false}\n",
    );
    let (repo, sb) = world(
        &[
            ("apps/candidates/leftover.yaml", LEFTOVER),
            ("apps/candidates/pinned.yaml", &pinned),
        ],
        &[],
    );
    assert!(tree_has(&sb, "cands", "ConfigMap", "leftover"));
    // Removed from git: Argo CD keeps them live, requiring pruning (automated prune is off).
    repo.git(&[
        "rm",
        "-q",
        "apps/candidates/leftover.yaml",
        "apps/candidates/pinned.yaml",
    ]);
    repo.commit_push("candidates: drop the leftover's file");
    let before = sb.wait_app("cands", Duration::from_secs(30), |a| {
        requires_pruning(a, "leftover")
    });
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());

    let o = survey(&sb.url, &cfg, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("Application `cands`")
            && out.contains("a sync with prune would delete 1 resource(s)")
            && out.contains("\n  ConfigMap apps/leftover\n"),
        "{out}"
    );
    assert!(!out.contains("nothing would be pruned"), "{out}");
    // The one its sync options keep from a prune is said apart, with Argo CD's words.
    assert!(
        out.contains("kept although no longer in git")
            && out.contains("  ConfigMap apps/pinned (ignored (no prune))"),
        "{out}"
    );
    assert!(!err.contains("warning"), "{err}");

    // Nothing was deleted, nothing synced for real, the spec untouched: the dry run is the
    // app's last operation, and the leftover still requires pruning.
    let after = sb.app("cands");
    assert!(tree_has(&sb, "cands", "ConfigMap", "leftover"));
    assert!(tree_has(&sb, "cands", "ConfigMap", "pinned"));
    assert!(requires_pruning(&after, "leftover"), "{}", after["status"]);
    let op = &after["status"]["operationState"];
    assert_eq!(op["operation"]["sync"]["dryRun"], true, "{op}");
    assert_eq!(op["operation"]["sync"]["prune"], true, "{op}");
    assert_eq!(after["spec"], before["spec"]);
    assert_eq!(after["status"]["history"], before["status"]["history"]);
    assert_eq!(after["status"]["sync"]["status"], "OutOfSync");

    // The same as one JSON object.
    let o = survey(&sb.url, &cfg, &["--output", "json"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["surveyed"], true);
    assert_eq!(v["app"], "cands");
    assert_eq!(v["revision"], repo.remote_tip());
    assert_eq!(
        v["wouldPrune"],
        serde_json::json!([{"group": "", "kind": "ConfigMap", "namespace": "apps", "name": "leftover", "message": "pruned (dry run)"}])
    );
    assert!(tree_has(&sb, "cands", "ConfigMap", "leftover"));
}

#[test]
fn a_clean_application_has_nothing_to_prune() {
    let (_repo, sb) = world(&[], &[]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let o = survey(&sb.url, &cfg, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("Application `cands`") && out.contains("nothing would be pruned"),
        "{out}"
    );
    let o = survey(&sb.url, &cfg, &["--output", "json"]);
    let (out, _) = text(&o);
    let v: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["wouldPrune"], serde_json::json!([]));
}

#[test]
fn an_unreachable_argocd_or_a_missing_app_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = survey(&format!("http://127.0.0.1:{port}"), &cfg, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("cannot survey Application `cands`") && err.contains("cannot connect"),
        "{err}"
    );
    assert!(out.is_empty(), "{out}");
    // As one JSON object too, saying no survey was made.
    let o = survey(
        &format!("http://127.0.0.1:{port}"),
        &cfg,
        &["--output", "json"],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["surveyed"], false);
    assert!(
        v["error"].as_str().unwrap().contains("cannot connect"),
        "{v}"
    );
    // A config that cannot be read is a usage error: nothing asked of Argo CD.
    let o = survey(
        &format!("http://127.0.0.1:{port}"),
        dir.path().join("missing.yaml").to_str().unwrap(),
        &[],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("missing.yaml"), "{err}");

    let (_repo, sb) = world(&[], &[]);
    let other = Path::new(&cfg).with_file_name("other.yaml");
    std::fs::write(
        &other,
        std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("app: cands", "app: nope"),
    )
    .unwrap();
    let o = survey(&sb.url, other.to_str().unwrap(), &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("`nope`"), "{err}");
}

#[test]
fn an_operation_that_does_not_end_in_time_is_waited_for_then_reported() {
    // A PostSync hook that runs for a minute keeps the candidates' app's operation under way.
    let (repo, sb) = world(&[], &["--hook-time", "60s"]);
    repo.write(
        "apps/candidates/smoke.yaml",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: smoke\n  namespace: apps\n  annotations: {argocd.argoproj.io/hook: PostSync}\nspec:\n  template:\n    spec:\n      containers: [{name: smoke, image: 'curl:8'}]\n      restartPolicy: Never\n",
    );
    // A hook is not a managed resource: a managed change comes with it, so the app is OutOfSync
    // and its automated sync runs the hook.
    repo.write("apps/candidates/notes.yaml", LEFTOVER);
    repo.commit_push("candidates: a note and a slow hook");
    sb.wait_app("cands", Duration::from_secs(30), |a| {
        !a["operation"].is_null()
    });
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let o = survey(&sb.url, &cfg, &["--timeout", "1s"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("waited") && err.contains("operation under way on it to finish"),
        "{err}"
    );
    let app = sb.app("cands");
    assert_ne!(
        app["status"]["operationState"]["operation"]["sync"]["dryRun"], true,
        "no dry run was requested: {}",
        app["status"]
    );
}

#[test]
fn an_automated_app_with_a_change_waiting_to_deploy_is_not_dry_run() {
    // A commit whose sync failed (an object the API server refuses): the app OutOfSync, no
    // operation. A dry run now would be taken by Argo CD's automated sync as that commit's
    // attempt, so nothing is requested.
    let (repo, sb) = world(&[], &["--retry-backoff", "100ms"]);
    let refused = LEFTOVER.replace(
        "  name: leftover\n",
        "  name: leftover\n  annotations: {sandbox.greenlight.dev/apply: fail}\n",
    );
    repo.write("apps/candidates/notes.yaml", &refused);
    let tip = repo.commit_push("candidates: a note the API server refuses");
    sb.wait_app("cands", Duration::from_secs(30), |a| {
        a["status"]["sync"]["revision"] == tip.as_str()
            && a["status"]["sync"]["status"] == "OutOfSync"
            && a["operation"].is_null()
            && a["status"]["operationState"]["phase"] == "Failed"
    });
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let o = survey(&sb.url, &cfg, &["--timeout", "1s"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("ConfigMap apps/leftover")
            && err.contains("would hold it back")
            && err.contains("nothing was requested"),
        "{err}"
    );
    let app = sb.app("cands");
    assert!(app["operation"].is_null(), "{app}");
    assert_ne!(
        app["status"]["operationState"]["operation"]["sync"]["dryRun"], true,
        "{}",
        app["status"]
    );
}

#[test]
fn the_refusal_of_an_application_without_prune_names_the_survey_and_never_says_safe() {
    let (repo, sb) = world(&[], &[]);
    let before = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let o = promote_cmd(
        &repo,
        &sb.url,
        "run",
        &cfg,
        &["--candidate", NEW, "--candidate-deadline", "30s"],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "stdout:\n{out}\nstderr:\n{err}");
    let refusal = err
        .lines()
        .find(|l| l.contains("candidate.app `cands` does not prune automatically"))
        .unwrap_or_else(|| panic!("{err}"));
    let survey_at = refusal
        .find(&format!("greenlight promote prune-survey --config {cfg}"))
        .unwrap_or_else(|| panic!("{refusal}"));
    let enable_at = refusal
        .find("kubectl -n argocd patch application cands")
        .unwrap_or_else(|| panic!("{refusal}"));
    assert!(survey_at < enable_at, "the survey comes first: {refusal}");
    assert!(!err.to_lowercase().contains("safe"), "{err}");
    assert_eq!(repo.remote_tip(), before, "nothing written");
}
