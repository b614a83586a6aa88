//! The watchdog against Argo CD's own behaviours, as the sandbox reproduces them
//! (docs/sandbox-fidelity.md): manifests that fail to render, unresolved revisions, syncs that
//! retry, dry-run and partial syncs, a 403 for an app that does not exist, tokens that are not
//! JWT-shaped, and apps that sync through the source hydrator; and, behind a proxy that spoils
//! it, a listing item that does not decode. Each test runs the real binary over real git and
//! waits on recorded states, printed lines and counted requests, never on fixed sleeps.

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

fn a_sync_that_fails_and_retries_is_never_reach_and_ends_not_reached() {
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
    // Argo CD could not apply it: never reach, so never a revert. At the reach deadline the
    // verdict quotes the operation's own words.
    let w = wd.wait_state(&c, "NOT_REACHED", T);
    assert!(w["reached_at"].is_null(), "{w}");
    let reason = w["reason"].as_str().unwrap();
    assert!(reason.contains("Argo CD could not apply it"), "{reason}");
    assert!(reason.contains("(retried 2 times)"), "{reason}");
    assert_eq!(repo.remote_tip(), c, "nothing pushed");
    let out = wd.proc.output();
    assert!(out.contains("containing this commit ended Failed"), "{out}");
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

/// An HTTP proxy in front of the stand-in that passes everything through (the stream too, as it
/// arrives) except the application listings: in them, the item of `app` gets a `status` that
/// does not decode (`health.status` a number). It counts the listings it spoiled.
struct SpoilingProxy {
    url: String,
    spoiled: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl SpoilingProxy {
    fn start(upstream: &str, app: &str) -> SpoilingProxy {
        use axum::body::Body;
        use axum::extract::{Request, State};
        use axum::response::{IntoResponse, Response};
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};

        struct Shared {
            upstream: String,
            app: String,
            client: reqwest::Client,
            spoiled: Arc<AtomicUsize>,
        }

        async fn forward(State(p): State<Arc<Shared>>, req: Request) -> Response {
            let (parts, body) = req.into_parts();
            let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
            let target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
            let mut up = p
                .client
                .request(parts.method.clone(), format!("{}{target}", p.upstream))
                .body(body.to_vec());
            for (name, value) in &parts.headers {
                if name != axum::http::header::HOST {
                    up = up.header(name, value);
                }
            }
            let Ok(resp) = up.send().await else {
                return (axum::http::StatusCode::BAD_GATEWAY, "upstream").into_response();
            };
            let status = resp.status();
            if parts.uri.path() == "/api/v1/applications" && status.is_success() {
                let mut list: Value = resp.json().await.unwrap();
                let mut spoiled = false;
                for item in list["items"].as_array_mut().into_iter().flatten() {
                    if item["metadata"]["name"] == p.app.as_str() {
                        item["status"] = json!({"health": {"status": 5}});
                        spoiled = true;
                    }
                }
                if spoiled {
                    p.spoiled.fetch_add(1, Ordering::SeqCst);
                }
                return (status, axum::Json(list)).into_response();
            }
            let mut out = Response::builder().status(status);
            for (name, value) in resp.headers() {
                if !matches!(
                    name.as_str(),
                    "content-length" | "transfer-encoding" | "connection"
                ) {
                    out = out.header(name, value);
                }
            }
            out.body(Body::from_stream(resp.bytes_stream())).unwrap()
        }

        let _ = rustls::crypto::ring::default_provider().install_default();
        let spoiled = Arc::new(AtomicUsize::new(0));
        let shared = Arc::new(Shared {
            upstream: upstream.to_string(),
            app: app.to_string(),
            client: reqwest::Client::new(),
            spoiled: spoiled.clone(),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = axum::Router::new().fallback(forward).with_state(shared);
                axum::serve(listener, app).await.unwrap();
            });
        });
        SpoilingProxy { url, spoiled }
    }

    fn spoiled(&self) -> usize {
        self.spoiled.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// `greenlight watch` with `--stable-for 600s`, so that no watch ends CONFIRMED while a test
/// looks on; started and watching. Returns its state file and process.
fn watchdog_that_never_confirms(repo: &Repo, url: &str) -> (std::path::PathBuf, Proc) {
    let state = repo.path("state/greenlight.db");
    let mut args = watch_args(repo, url, &state, &[]);
    let i = args.iter().position(|a| a == "--stable-for").unwrap();
    args[i + 1] = "600s".into();
    let proc = Proc::spawn(BIN, &args, &[]);
    proc.wait_line("watching ", T);
    (state, proc)
}

/// An Application that a listing holds but that does not decode is unobserved, never absent:
/// the listing is incomplete, its silence about the app proves nothing, and the warning names
/// the app and what did not decode. Reads and the stream still observe the app.
#[test]
fn an_app_whose_listing_item_does_not_decode_is_unobserved_not_absent() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let proxy = SpoilingProxy::start(&sb.url, "web");
    // The watch stays live throughout: its streak cannot complete while the test looks on.
    let (state, proc) = watchdog_that_never_confirms(&repo, &proxy.url);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1\n\n{}", trailer("web", "900", "shadow")),
    );
    proc.wait_line("watch started", T);
    // Listings every --fetch-interval (200ms) while the watch is live, for longer than the
    // --unknown-app-grace (3s) the kit sets: absence would have been said, and would have
    // ended the watch as unwatchable by now.
    let spoiled_at_start = proxy.spoiled();
    let end = std::time::Instant::now() + T;
    while proxy.spoiled() < spoiled_at_start + 25 {
        assert!(
            std::time::Instant::now() < end,
            "too few listings:\n{}",
            proc.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The warning of the last spoiled listing is printed after every line of the ones before.
    let warned = |out: &str| {
        out.lines()
            .filter(|l| l.contains("an Application in the listing could not be read"))
            .count()
    };
    let started = std::time::Instant::now();
    while warned(&proc.output()) < spoiled_at_start + 25 {
        assert!(started.elapsed() < T, "{}", proc.output());
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = proc.output();
    let warning = out
        .lines()
        .find(|l| l.contains("an Application in the listing could not be read"))
        .unwrap();
    assert!(
        warning.contains("(application \"web\")")
            && warning.contains("`items[0].status.health.status`"),
        "{warning}"
    );
    assert!(
        !out.contains("does not exist") && !out.contains("disappeared"),
        "{out}"
    );
    let st = status_json(&state);
    let w = watch_of(&st, &c).expect("the watch is recorded");
    assert!(
        !greenlight_testkit::TERMINAL_STATES.contains(&w["state"].as_str().unwrap()),
        "{w}\n{out}"
    );
}

/// A PostSync hook (a smoke-test Job) that fails, annotated for the sandbox to fail it.
const FAILING_SMOKE_TEST: &str = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: smoke\n  namespace: apps\n  annotations:\n    argocd.argoproj.io/hook: PostSync\n    sandbox.greenlight.dev/hook: fail\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: smoke\n          image: registry.local/curl:8\n";

/// Argo CD applied the commit, waited for it to be healthy, ran its PostSync hook, and the hook
/// failed (after the retries): the team's own check speaks against the commit.
fn a_failed_post_sync_hook_on_an_applied_commit_reverts_it() {
    let repo = Repo::new();
    let sb = sandbox(
        &repo,
        &["web=apps/web"],
        &["--retry-backoff", "200ms", "--hook-time", "200ms"],
    );
    settled(&sb, &repo, &["web"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    repo.write("apps/web/smoke.yaml", FAILING_SMOKE_TEST);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!(
            "web: 1.1 with a smoke test\n\n{}",
            trailer("web", "60", "arm")
        ),
    );
    let failed = sb.wait_app("web", T, |a| {
        a["status"]["operationState"]["phase"] == "Failed"
    });
    let results = failed["status"]["operationState"]["syncResult"]["resources"].to_string();
    assert!(results.contains("\"syncPhase\":\"PostSync\""), "{results}");
    let w = wd.wait_state(&c, "REVERTED", T);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.contains("PostSync hook failed: batch/Job/smoke"),
        "{reason}"
    );
    assert_eq!(count_reverts_of(&repo, &c), 1);
    assert!(
        wd.proc
            .output()
            .contains("containing this commit ended Failed"),
        "{}",
        wd.proc.output()
    );
}

/// An armed watch of `web` judging its commit (returned last), under a watchdog that never
/// confirms: it stays live until what a test does next.
fn a_judging_watch_of_web() -> (Repo, Sandbox, std::path::PathBuf, Proc, String) {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let (state, proc) = watchdog_that_never_confirms(&repo, &sb.url);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1\n\n{}", trailer("web", "900", "arm")),
    );
    wait_state(&state, &c, "JUDGING", T, &proc);
    (repo, sb, state, proc, c)
}

/// An Image Updater write-back (`argocd` method) edits the Application's spec while the watch
/// judges: what the app deploys is no longer the commit's doing alone.
fn an_application_edited_under_the_watch_is_fail_never_reverted() {
    let (repo, sb, state, proc, c) = a_judging_watch_of_web();
    let edit = json!({"spec": {"source": {"directory": null, "kustomize": {"images": ["web=registry.local/web:9.9.9"]}}}});
    let answer = sb.patch_app("web", &edit.to_string(), "merge");
    assert_eq!(answer.status, 200, "{}", answer.body);
    let w = wait_state(&state, &c, "FAIL", T, &proc);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("changed outside the watched repository"),
        "{reason}"
    );
    assert!(reason.contains("spec.source.kustomize"), "{reason}");
    assert!(w["revert_commit"].is_null(), "{w}");
    assert_eq!(repo.remote_tip(), c, "nothing pushed");
    // The step's transaction is committed before its events are printed: wait for the line.
    proc.wait_line("changed outside", T);
}

/// An edited `manifest-generate-paths` annotation (metadata, no spec field) widens the app's
/// paths while the watch judges, after a commit under the new paths landed — left out then, as
/// it touched none of the app's paths: the commits since can no longer be ruled out, so the
/// watch ends `FAIL`, never reverted, naming the paths before and after.
fn paths_widened_under_the_watch_after_a_commit_was_left_out_is_fail_never_reverted() {
    let (repo, sb, state, proc, c) = a_judging_watch_of_web();
    repo.write("shared/values.yaml", "replicas: 2\n");
    let shared = repo.commit_push("shared: two replicas");
    // The watchdog has taken the commit (and left it out) once its record says under what.
    let deadline = std::time::Instant::now() + T;
    loop {
        let out = std::process::Command::new(BIN)
            .args(["state", "export", "--state"])
            .arg(&state)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        if text.contains("later_filtered_under") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the commit was never left out: {text}\n{}",
            proc.output()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let edit = json!({"metadata": {"annotations": {
        "argocd.argoproj.io/manifest-generate-paths": ".;/shared"}}});
    let answer = sb.patch_app("web", &edit.to_string(), "merge");
    assert_eq!(answer.status, 200, "{}", answer.body);
    let w = wait_state(&state, &c, "FAIL", T, &proc);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("changed outside the watched repository")
            && reason.contains("(source paths apps/web → apps/web shared)"),
        "{reason}"
    );
    assert!(w["revert_commit"].is_null(), "{w}");
    assert_eq!(repo.remote_tip(), shared, "nothing pushed");
    proc.wait_line("changed outside", T);
}

on_every_argocd_version!(
    an_ignore_healthcheck_resource_never_fails_a_watch,
    paths_widened_under_the_watch_after_a_commit_was_left_out_is_fail_never_reverted,
    a_manifest_that_fails_to_render_is_not_reached_and_never_reverted,
    a_commit_that_fixes_the_render_still_reaches_the_waiting_watch,
    a_watch_of_an_app_argo_cd_answers_403_for_comes_from_the_listing,
    a_sync_that_fails_and_retries_is_never_reach_and_ends_not_reached,
    a_dry_run_sync_is_not_reach,
    an_app_that_syncs_through_the_source_hydrator_is_unwatchable,
    a_failed_post_sync_hook_on_an_applied_commit_reverts_it,
    an_application_edited_under_the_watch_is_fail_never_reverted,
);
