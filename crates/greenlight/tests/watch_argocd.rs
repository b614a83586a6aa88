//! The watchdog against Argo CD's own behaviours, as the sandbox reproduces them
//! (docs/sandbox-fidelity.md): manifests that fail to render, unresolved revisions, syncs that
//! retry, dry-run and partial syncs, a 403 for an app that does not exist, tokens that are not
//! JWT-shaped, and apps that sync through the source hydrator. Each test runs the real binary
//! over real git and waits on recorded states and printed lines, never on fixed sleeps.

#[macro_use]
mod common;
use common::*;
use greenlight_testkit::http::{http_post_json, http_request};
use serde_json::{Value, json};
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

/// A manifest that is not YAML: Argo CD cannot generate the app's manifests.
const BROKEN: &str =
    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web\n  namespace: apps\n";

fn condition_message(app: &Value) -> Option<String> {
    app["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "ComparisonError")
        .and_then(|c| c["message"].as_str())
        .map(str::to_string)
}

fn events_of(wd: &Watchdog, commit: &str) -> Vec<Value> {
    wd.proc
        .output()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["commit"].as_str() == Some(commit))
        .collect()
}

fn a_manifest_that_fails_to_render_is_not_reached_and_never_reverted() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let good = repo.remote_tip();
    sb.wait_app("web", T, |a| healthy_at(a, &good));
    let wd = watchdog(&repo, &sb.url, &["--log-format", "json"], &[]);
    repo.write("apps/web/deploy.yaml", BROKEN);
    let broken = repo.commit_push(&format!("web: a typo\n\n{}", trailer("web", "8", "arm")));
    // Argo CD's picture: no operation, sync Unknown at the unresolved `main`, the condition.
    let app = sb.wait_app("web", T, |a| condition_message(a).is_some());
    assert_eq!(app["status"]["sync"]["status"], "Unknown");
    assert_eq!(app["status"]["sync"]["revision"], "main");
    let why = condition_message(&app).unwrap();
    // The unresolved `main` is no reason to give up: the watch waits for reach.
    wd.proc.wait_line("comparison_error", T);
    assert_eq!(
        watch_of(&wd.status(), &broken).unwrap()["state"],
        "WAITING_REACH"
    );
    let w = wd.wait_state(&broken, "NOT_REACHED", T);
    let reason = w["reason"].as_str().unwrap();
    assert!(reason.contains("ComparisonError"), "{reason}");
    assert!(reason.contains(&why), "{reason}\n{why}");
    assert_eq!(repo.remote_tip(), broken, "nothing pushed");
    let events = events_of(&wd, &broken);
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(
        kinds,
        vec!["watch_started", "comparison_error", "not_reached"],
        "{events:?}"
    );
    assert!(
        events[1..].iter().all(|e| e["level"] == "warn"),
        "{events:?}"
    );
}

fn a_commit_that_fixes_the_render_still_reaches_the_waiting_watch() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let good = repo.remote_tip();
    sb.wait_app("web", T, |a| healthy_at(a, &good));
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    repo.write("apps/web/deploy.yaml", BROKEN);
    let broken = repo.commit_push(&format!(
        "web: 1.1.0 with a typo\n\n{}",
        trailer("web", "60", "arm")
    ));
    sb.wait_app("web", T, |a| condition_message(a).is_some());
    wd.proc.wait_line("cannot render app web", T);
    let fix = repo.set_image("web", GOOD2, "web: fix the typo");
    sb.wait_app("web", T, |a| healthy_at(a, &fix));
    // The watch left WAITING_REACH: the fix's sync reached it (a revision containing it). The
    // fix also changed the app, so the verdict cannot be the watched commit's alone: FAIL by
    // attribution, never reverted, never NOT_REACHED.
    let w = wait_until_finished(&wd, &broken);
    assert_eq!(w["state"], "FAIL", "{w}");
    let reason = w["reason"].as_str().unwrap();
    assert!(reason.starts_with("attribution:"), "{reason}");
    assert!(reason.contains(&fix[..8]), "{reason}");
    assert_eq!(count_reverts_of(&repo, &broken), 0);
    assert_eq!(repo.remote_tip(), fix);
}

fn wait_until_finished(wd: &Watchdog, commit: &str) -> Value {
    let start = std::time::Instant::now();
    loop {
        if let Some(w) = watch_of(&wd.status(), commit)
            && !matches!(w["state"].as_str(), Some("WAITING_REACH" | "JUDGING"))
        {
            return w.clone();
        }
        assert!(
            start.elapsed() < T,
            "the watch of {commit} never finished:\n{}",
            wd.proc.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn a_watch_of_an_app_argo_cd_answers_403_for_comes_from_the_listing() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let good = repo.remote_tip();
    sb.wait_app("web", T, |a| healthy_at(a, &good));
    // Argo CD answers 403 for an app that does not exist, as for one the token may not see.
    let answer =
        http_request("GET", &format!("{}/api/v1/applications/ghost", sb.url), &[]).unwrap();
    assert_eq!(answer.status, 403, "{}", answer.body);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web and ghost\n\n{}", trailer("ghost", "30", "arm")),
    );
    wd.proc.wait_line("absent or not permitted", T);
    let w = wd.wait_state(&c, "ERROR_UNWATCHABLE", T);
    assert!(
        w["reason"].as_str().unwrap().contains("does not exist"),
        "{w}"
    );
}

fn backing_off(app: &Value) -> bool {
    let op = &app["status"]["operationState"];
    op["phase"] == "Running"
        && op["finishedAt"].is_string()
        && op["message"]
            .as_str()
            .is_some_and(|m| m.contains("Retrying attempt #"))
}

fn a_sync_that_fails_and_retries_is_not_reach_until_it_ends() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &["--retry-backoff", "500ms"]);
    let good = repo.remote_tip();
    sb.wait_app("web", T, |a| healthy_at(a, &good));
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let rejected = deployment("web", GOOD2).replace(
        "  namespace: apps\n",
        "  namespace: apps\n  annotations:\n    sandbox.greenlight.dev/apply: fail\n",
    );
    repo.write("apps/web/deploy.yaml", &rejected);
    let c = repo.commit_push(&format!("web: rejected\n\n{}", trailer("web", "8", "arm")));
    wd.proc.wait_line("watch started", T);
    // While Argo CD backs off between attempts, the operation is Running with finishedAt set:
    // greenlight's view, taken while the sandbox stayed in that back-off, is not reach.
    let start = std::time::Instant::now();
    loop {
        let before = sb.app("web");
        let seen = watch_of(&wd.status(), &c).cloned();
        let after = sb.app("web");
        if backing_off(&before)
            && before["status"]["operationState"] == after["status"]["operationState"]
        {
            assert_eq!(
                seen.unwrap()["state"],
                "WAITING_REACH",
                "a retrying sync is not reach"
            );
            break;
        }
        assert!(
            start.elapsed() < T,
            "never saw the sync back off:\n{}",
            sb.proc.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let failed = sb.wait_app("web", T, |a| {
        a["status"]["operationState"]["phase"] == "Failed"
    });
    let message = failed["status"]["operationState"]["message"]
        .as_str()
        .unwrap();
    assert!(message.contains("(retried 2 times)"), "{message}");
    // Reach with failure evidence, then the health deadline: the commit broke its own sync.
    let w = wd.wait_state(&c, "REVERTED", T);
    assert!(w["reached_at"].is_string());
    let out = wd.proc.output();
    assert!(out.contains("sync operation that ended Failed"), "{out}");
}

fn a_dry_run_sync_is_not_reach() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &["--manual-sync", "web"]);
    let sync = |body: Value| {
        let answer = http_post_json(
            &format!("{}/api/v1/applications/web/sync", sb.url),
            &body.to_string(),
        )
        .unwrap();
        assert_eq!(answer.status, 200, "{}", answer.body);
    };
    // Without automated sync the app waits for a human: sync the first commit by hand.
    let good = repo.remote_tip();
    sync(json!({}));
    sb.wait_app("web", T, |a| healthy_at(a, &good));
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "6", "shadow")),
    );
    wd.proc.wait_line("watch started", T);
    sb.wait_app("web", T, |a| a["status"]["sync"]["revision"] == c.as_str());
    // A dry run of the commit: Succeeded at its SHA, and nothing applied.
    sync(json!({"revision": c, "dryRun": true}));
    let app = sb.wait_app("web", T, |a| {
        a["status"]["operationState"]["phase"] == "Succeeded"
            && a["status"]["operationState"]["operation"]["sync"]["dryRun"] == true
    });
    assert_eq!(app["status"]["operationState"]["syncResult"]["revision"], c);
    assert_eq!(app["status"]["sync"]["status"], "OutOfSync");
    let w = wd.wait_state(&c, "NOT_REACHED", T);
    assert!(w["reached_at"].is_null(), "{w}");
}

fn an_app_that_syncs_through_the_source_hydrator_is_unwatchable() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=hydrator:apps/web"], &[]);
    let good = repo.remote_tip();
    sb.wait_app("web", T, |a| a["spec"]["sourceHydrator"].is_object());
    let _ = good;
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "30", "arm")),
    );
    let w = wd.wait_state(&c, "ERROR_UNWATCHABLE", T);
    let reason = w["reason"].as_str().unwrap();
    assert!(reason.contains("source hydrator"), "{reason}");
}

/// A Deployment annotated `argocd.argoproj.io/ignore-healthcheck: "true"` that never becomes
/// healthy: Argo CD leaves it out of the app's health (from 3.0 on, the tree and the health a
/// Get re-fills still show it Degraded). It never fails the watch.
fn an_ignore_healthcheck_resource_never_fails_a_watch() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let good = repo.remote_tip();
    sb.wait_app("web", T, |a| healthy_at(a, &good));
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let ignored = deployment("sidecar", BAD).replace(
        "  namespace: apps\n",
        "  namespace: apps\n  annotations:\n    argocd.argoproj.io/ignore-healthcheck: \"true\"\n",
    );
    repo.write("apps/web/sidecar.yaml", &ignored);
    let c = repo.commit_push(&format!(
        "web: a sidecar nobody waits for\n\n{}",
        trailer("web", "10", "arm")
    ));
    let sidecar_health = |a: &Value| -> Value {
        a["status"]["resources"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["name"] == "sidecar"))
            .map(|r| r["health"]["status"].clone())
            .unwrap_or(Value::Null)
    };
    let w = wd.wait_state(&c, "CONFIRMED", T);
    assert!(w["revert_commit"].is_null(), "{w}");
    assert_eq!(repo.remote_tip(), c, "nothing pushed");
    let app = sb.app("web");
    assert_eq!(app["status"]["health"]["status"], "Healthy", "{app}");
    // From 3.0 on Argo CD's Get shows the ignored resource Degraded (what greenlight had to see
    // through); 2.x leaves its health out of the Application.
    let want = if argocd_version() == Some("2.14") {
        Value::Null
    } else {
        Value::from("Degraded")
    };
    assert_eq!(sidecar_health(&app), want, "{app}");
}

on_every_argocd_version!(
    an_ignore_healthcheck_resource_never_fails_a_watch,
    a_manifest_that_fails_to_render_is_not_reached_and_never_reverted,
    a_commit_that_fixes_the_render_still_reaches_the_waiting_watch,
    a_watch_of_an_app_argo_cd_answers_403_for_comes_from_the_listing,
    a_sync_that_fails_and_retries_is_not_reach_until_it_ends,
    a_dry_run_sync_is_not_reach,
    an_app_that_syncs_through_the_source_hydrator_is_unwatchable,
);
