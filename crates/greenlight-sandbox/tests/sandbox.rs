//! The sandbox end to end: real git repositories built in a temporary directory, the sandbox
//! started in process, real HTTP on 127.0.0.1. Waits are bounded polls or stream reads with a
//! timeout; nothing sleeps and hopes.

use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use greenlight_sandbox::{AppSpec, Sandbox, SandboxConfig, SandboxError};
use greenlight_testkit::Remote;
use serde_json::Value;
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// Fixtures

fn deployment(name: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n      - name: app\n        image: {image}\n"
    )
}

fn web_manifests(image: &str) -> String {
    format!(
        "{}---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\ndata:\n  greeting: hello\n",
        deployment("web", image)
    )
}

/// A remote holding `apps/web` (Deployment, Service, ConfigMap) on branch main.
fn web_remote(image: &str) -> (Remote, String) {
    let remote = Remote::new("main");
    remote
        .write("apps/web/web.yaml", &web_manifests(image))
        .write("README.md", "demo\n");
    let first = remote.commit_push("web: first deploy");
    (remote, first)
}

struct Running {
    sandbox: Sandbox,
    base: String,
    log: Arc<Mutex<Vec<String>>>,
}

fn config(repo: &str, apps: &[&str]) -> (SandboxConfig, Arc<Mutex<Vec<String>>>) {
    let apps = apps.iter().map(|a| AppSpec::parse(a).unwrap()).collect();
    let mut config = SandboxConfig::new(repo, "127.0.0.1:0".parse().unwrap(), apps);
    config.sync_interval = Duration::from_millis(100);
    config.rollout_time = Duration::from_millis(600);
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    config.log = Some(Arc::new(move |line: &str| {
        sink.lock().unwrap().push(line.to_string())
    }));
    (config, log)
}

async fn start(config: SandboxConfig, log: Arc<Mutex<Vec<String>>>) -> Running {
    let sandbox = greenlight_sandbox::start(config)
        .await
        .expect("sandbox starts");
    let base = sandbox.url();
    Running { sandbox, base, log }
}

fn client() -> reqwest::Client {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::new()
}

async fn get(base: &str, path: &str) -> (u16, Value) {
    let response = client().get(format!("{base}{path}")).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn app(base: &str, name: &str) -> Value {
    let (status, body) = get(base, &format!("/api/v1/applications/{name}")).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn post(base: &str, path: &str) -> u16 {
    client()
        .post(format!("{base}{path}"))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Polls `probe` until it yields a value; fails the test naming `what` after `WAIT`.
async fn eventually<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn app_where(base: &str, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    eventually(what, || async {
        let a = app(base, name).await;
        check(&a).then_some(a)
    })
    .await
}

fn health(app: &Value) -> &str {
    app["status"]["health"]["status"].as_str().unwrap_or("")
}

fn sync_status(app: &Value) -> &str {
    app["status"]["sync"]["status"].as_str().unwrap_or("")
}

fn revision(app: &Value) -> &str {
    app["status"]["sync"]["revision"].as_str().unwrap_or("")
}

fn phase(app: &Value) -> &str {
    app["status"]["operationState"]["phase"]
        .as_str()
        .unwrap_or("")
}

/// The operation for `rev` finished successfully.
fn synced_at(app: &Value, rev: &str) -> bool {
    phase(app) == "Succeeded" && app["status"]["operationState"]["syncResult"]["revision"] == rev
}

fn history_len(app: &Value) -> usize {
    app["status"]["history"].as_array().map_or(0, Vec::len)
}

/// The stream's events, one parsed JSON line each; `None` marks the end of the stream (or an
/// error cutting it).
struct Events {
    rx: mpsc::UnboundedReceiver<Option<Value>>,
}

impl Events {
    async fn open(base: &str, query: &str) -> Events {
        let response = client()
            .get(format!("{base}/api/v1/stream/applications{query}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut body = response.bytes_stream();
            let mut pending: Vec<u8> = Vec::new();
            while let Some(Ok(chunk)) = body.next().await {
                pending.extend_from_slice(&chunk);
                while let Some(nl) = pending.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=nl).collect();
                    let _ = tx.send(Some(
                        serde_json::from_slice(&line).expect("each line is JSON"),
                    ));
                }
            }
            let _ = tx.send(None);
        });
        Events { rx }
    }

    async fn next(&mut self) -> Option<Value> {
        tokio::time::timeout(WAIT, self.rx.recv())
            .await
            .expect("a stream event within the timeout")
            .flatten()
    }

    /// Reads events until one satisfies `check`, returning every application seen on the way
    /// (the last one satisfying it).
    async fn until(&mut self, what: &str, check: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let event = self
                .next()
                .await
                .unwrap_or_else(|| panic!("stream ended before {what}"));
            assert_eq!(event["result"]["type"], "MODIFIED", "{event}");
            let application = event["result"]["application"].clone();
            let done = check(&application);
            seen.push(application);
            if done {
                return seen;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Sync

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_sync_is_finished_when_start_returns_and_speaks_argo_cds_shape() {
    let (remote, first) = web_remote("nginx:1.27");
    let (mut config, log) = config(&remote.repo(), &["web=apps/web"]);
    config.rollout_time = Duration::from_secs(30);
    let s = start(config, log).await;

    // No polling: start() returned after the first sync.
    let a = s.sandbox.application("web").unwrap();
    assert_eq!(a["metadata"]["namespace"], "argocd");
    assert_eq!(a["spec"]["source"]["repoURL"], remote.repo());
    assert_eq!(a["spec"]["source"]["path"], "apps/web");
    assert_eq!(
        a["spec"]["source"]["targetRevision"], "main",
        "the remote's HEAD branch by default"
    );
    assert_eq!(
        a["spec"]["syncPolicy"]["automated"],
        serde_json::json!({"prune": false, "selfHeal": true})
    );
    assert_eq!(sync_status(&a), "Synced");
    assert_eq!(revision(&a), first);
    assert_eq!(phase(&a), "Succeeded");
    assert_eq!(
        a["status"]["operationState"]["syncResult"]["revision"],
        first
    );
    assert_eq!(a["status"]["history"][0]["revision"], first);
    assert_eq!(a["status"]["resourceHealthSource"], "appTree");
    assert_eq!(
        health(&a),
        "Progressing",
        "a workload rolls out after its first sync"
    );
    let resources = a["status"]["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 3);
    for r in resources {
        assert!(
            r.get("health").is_none(),
            "Argo CD >= 3.0 keeps resource health out of the CR: {r}"
        );
        assert_eq!(r["status"], "Synced");
    }
    let deploy = resources
        .iter()
        .find(|r| r["kind"] == "Deployment")
        .unwrap();
    assert_eq!(
        (deploy["group"].as_str(), deploy["version"].as_str()),
        (Some("apps"), Some("v1"))
    );
    assert_eq!(deploy["namespace"], "default");

    // The list carries the same object, and a resourceVersion.
    let (status, list) = get(&s.base, "/api/v1/applications").await;
    assert_eq!(status, 200);
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert!(
        list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0
    );
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_leaves_the_manifests_alone_moves_the_revision_without_an_operation() {
    let (remote, first) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    let before = app_where(&s.base, "web", "Healthy", |a| health(a) == "Healthy").await;
    let mut events = Events::open(&s.base, "?name=web").await;
    assert_eq!(events.next().await.unwrap()["result"]["type"], "ADDED");

    // Another file, and the same manifests rewritten (comments, key order): nothing to apply.
    remote.write("README.md", "changed\n");
    let reordered = web_manifests("nginx:1.27").replace(
        "apiVersion: apps/v1\nkind: Deployment",
        "# moved\nkind: Deployment\napiVersion: apps/v1",
    );
    remote.write("apps/web/web.yaml", &reordered);
    let second = remote.commit_push("docs and formatting only");

    let seen = events
        .until("the new revision", |a| revision(a) == second)
        .await;
    let after = seen.last().unwrap();
    for a in &seen {
        assert!(
            a.get("operation").is_none(),
            "no operation for an unchanged commit: {a}"
        );
        assert_ne!(sync_status(a), "OutOfSync");
    }
    assert_eq!(sync_status(after), "Synced");
    assert_eq!(health(after), "Healthy");
    assert_eq!(history_len(after), 1);
    assert_eq!(
        after["status"]["operationState"],
        before["status"]["operationState"]
    );
    assert_eq!(
        after["status"]["operationState"]["syncResult"]["revision"],
        first
    );
    let log = s.log.lock().unwrap().join("\n");
    assert!(log.contains("manifests unchanged"), "{log}");
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_manifest_goes_out_of_sync_then_runs_an_operation_and_rolls_out() {
    let (remote, first) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    app_where(&s.base, "web", "Healthy", |a| health(a) == "Healthy").await;
    let mut events = Events::open(&s.base, "").await;
    let added = events.next().await.unwrap();
    assert_eq!(added["result"]["type"], "ADDED");
    assert_eq!(added["result"]["application"]["metadata"]["name"], "web");

    remote.write("apps/web/web.yaml", &web_manifests("nginx:1.28"));
    let second = remote.commit_push("web: nginx 1.28");
    let seen = events
        .until("the sync to finish", |a| synced_at(a, &second))
        .await;
    let steps: Vec<&Value> = seen.iter().filter(|a| revision(a) == second).collect();
    assert_eq!(steps.len(), 3, "compare, start, finish: {steps:#?}");

    let compared = steps[0];
    assert_eq!(sync_status(compared), "OutOfSync");
    assert!(compared.get("operation").is_none());
    assert_eq!(
        compared["status"]["operationState"]["syncResult"]["revision"], first,
        "still the old operation"
    );
    let deploy = compared["status"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "Deployment")
        .unwrap();
    assert_eq!(deploy["status"], "OutOfSync");

    let running = steps[1];
    assert_eq!(phase(running), "Running");
    assert_eq!(running["operation"]["sync"]["revision"], second);
    assert!(running["status"]["operationState"]["startedAt"].is_string());
    assert_eq!(sync_status(running), "OutOfSync");

    let done = steps[2];
    assert!(
        done.get("operation").is_none(),
        "the operation is cleared when it finishes"
    );
    assert_eq!(sync_status(done), "Synced");
    let op = &done["status"]["operationState"];
    assert_eq!(op["syncResult"]["revision"], second);
    assert_eq!(op["message"], "successfully synced (all tasks run)");
    let finished = op["finishedAt"].as_str().unwrap();
    assert!(done["status"]["reconciledAt"].as_str().unwrap() >= finished);
    assert_eq!(history_len(done), 2);
    let entry = &done["status"]["history"][1];
    assert_eq!(entry["id"], 1);
    assert_eq!(entry["revision"], second);
    assert!(entry["deployStartedAt"].is_string() && entry["deployedAt"].is_string());
    assert_eq!(entry["source"]["path"], "apps/web");
    let versions: Vec<u64> = steps
        .iter()
        .map(|a| {
            a["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");

    // The rollout's end is pushed to the stream by the sandbox's timer: no client polls.
    assert_eq!(health(done), "Progressing");
    let rollout = events.until("Healthy", |a| health(a) == "Healthy").await;
    assert_eq!(
        rollout.last().unwrap()["status"]["operationState"],
        done["status"]["operationState"]
    );
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_image_progresses_then_degrades_and_a_revert_heals_it() {
    let (remote, _) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    app_where(&s.base, "web", "Healthy", |a| health(a) == "Healthy").await;
    let mut events = Events::open(&s.base, "?name=web").await;
    events.next().await;

    remote.write(
        "apps/web/web.yaml",
        &web_manifests("nginx:does-not-exist-1"),
    );
    let bad = remote.commit_push("web: a tag that does not exist");
    let seen = events.until("Degraded", |a| health(a) == "Degraded").await;
    let synced = seen
        .iter()
        .position(|a| synced_at(a, &bad))
        .expect("the sync");
    assert_eq!(health(&seen[synced]), "Progressing");
    assert_eq!(seen.last().unwrap()["status"]["sync"]["status"], "Synced");

    let (status, tree) = get(&s.base, "/api/v1/applications/web/resource-tree").await;
    assert_eq!(status, 200);
    let nodes = tree["nodes"].as_array().unwrap();
    let node = |kind: &str| nodes.iter().find(|n| n["kind"] == kind).unwrap().clone();
    let deploy = node("Deployment");
    assert_eq!(deploy["health"]["status"], "Degraded");
    assert_eq!(
        deploy["health"]["message"],
        "Deployment \"web\" exceeded its progress deadline"
    );
    assert_eq!(
        (deploy["group"].as_str(), deploy["name"].as_str()),
        (Some("apps"), Some("web"))
    );
    assert!(deploy["uid"].is_string() && deploy["resourceVersion"].is_string());
    assert_eq!(node("Service")["health"]["status"], "Healthy");
    assert!(
        node("ConfigMap").get("health").is_none(),
        "no health for a ConfigMap, as in Argo CD"
    );
    let log = s.log.lock().unwrap().join("\n");
    assert!(log.contains("health Progressing -> Degraded"), "{log}");

    remote.git(&["revert", "--no-edit", "HEAD"]);
    let revert = remote.push();
    let healed = events
        .until("Healthy again", |a| health(a) == "Healthy")
        .await;
    assert_eq!(revision(healed.last().unwrap()), revert);
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_file_decides_which_images_exist_and_is_reread() {
    let (remote, _) = web_remote("registry.local/web:1.0");
    let dir = tempfile::tempdir().unwrap();
    let registry = dir.path().join("registry.txt");
    std::fs::write(&registry, "# pushed images\nregistry.local/web:1.0\n").unwrap();
    let (mut config, log) = config(&remote.repo(), &["web=apps/web"]);
    config.registry = Some(registry.clone());
    let s = start(config, log).await;
    app_where(&s.base, "web", "Healthy", |a| health(a) == "Healthy").await;

    // 1.1 is an ordinary tag, but it is not in the registry yet.
    remote.write(
        "apps/web/web.yaml",
        &web_manifests("registry.local/web:1.1"),
    );
    let second = remote.commit_push("web: 1.1");
    app_where(&s.base, "web", "Degraded at 1.1", |a| {
        revision(a) == second && health(a) == "Degraded"
    })
    .await;

    std::fs::write(
        &registry,
        "registry.local/web:1.0\nregistry.local/web:1.1 # pushed late\n",
    )
    .unwrap();
    app_where(&s.base, "web", "Healthy once 1.1 is pushed", |a| {
        health(a) == "Healthy"
    })
    .await;
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_annotation_overrides_the_model() {
    let remote = Remote::new("main");
    let annotated = |name: &str, image: &str, value: &str| {
        deployment(name, image).replace(
            &format!("  name: {name}\n"),
            &format!(
                "  name: {name}\n  annotations:\n    sandbox.greenlight.dev/health: {value}\n"
            ),
        )
    };
    remote.write(
        "apps/held/d.yaml",
        &annotated("held", "nginx:1.27", "Suspended"),
    );
    remote.write(
        "apps/forced/d.yaml",
        &annotated("forced", "nginx:does-not-exist", "Healthy"),
    );
    remote.write(
        "apps/gone/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gone\n  annotations:\n    sandbox.greenlight.dev/health: Missing\n",
    );
    remote.write(
        "apps/paused/d.yaml",
        &deployment("paused", "nginx:1.27").replace(
            "spec:\n  replicas: 2",
            "spec:\n  paused: true\n  replicas: 2",
        ),
    );
    remote.write(
        "apps/ignored/d.yaml",
        &deployment("ignored", "nginx:does-not-exist").replace(
            "  name: ignored\n",
            "  name: ignored\n  annotations:\n    argocd.argoproj.io/ignore-healthcheck: \"true\"\n",
        ),
    );
    remote.commit_push("annotated apps");
    let (config, log) = config(
        &remote.repo(),
        &[
            "held=apps/held",
            "forced=apps/forced",
            "gone=apps/gone",
            "paused=apps/paused",
            "ignored=apps/ignored",
        ],
    );
    let s = start(config, log).await;

    // Overrides hold from the first sync on, through and after the rollout time.
    assert_eq!(health(&s.sandbox.application("held").unwrap()), "Suspended");
    assert_eq!(health(&s.sandbox.application("forced").unwrap()), "Healthy");
    assert_eq!(health(&s.sandbox.application("gone").unwrap()), "Missing");
    let (_, tree) = get(&s.base, "/api/v1/applications/gone/resource-tree").await;
    assert_eq!(tree["nodes"][0]["health"]["status"], "Missing");
    assert!(
        tree["nodes"][0]["health"]["message"]
            .as_str()
            .unwrap()
            .contains("sandbox.greenlight.dev/health")
    );
    assert_eq!(
        health(&s.sandbox.application("paused").unwrap()),
        "Suspended",
        "spec.paused, as Argo CD"
    );
    // ignore-healthcheck: the resource reports Degraded in the tree, the app leaves it out.
    let tree = eventually("the ignored resource Degraded", || async {
        let (_, tree) = get(&s.base, "/api/v1/applications/ignored/resource-tree").await;
        (tree["nodes"][0]["health"]["status"] == "Degraded").then_some(tree)
    })
    .await;
    assert_eq!(tree["nodes"][0]["name"], "ignored");
    assert_eq!(health(&app(&s.base, "ignored").await), "Healthy");

    remote.write("apps/held/d.yaml", &deployment("held", "nginx:1.27"));
    let second = remote.commit_push("release the hold");
    let released = app_where(&s.base, "held", "the hold released", |a| {
        revision(a) == second && health(a) == "Healthy"
    })
    .await;
    assert_eq!(phase(&released), "Succeeded");
    assert_eq!(health(&app(&s.base, "forced").await), "Healthy");
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_that_does_not_parse_fails_the_operation_quoting_the_error() {
    let (remote, first) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;

    remote.write(
        "apps/web/broken.yaml",
        "kind: ConfigMap\nmetadata: [unclosed\n",
    );
    let bad = remote.commit_push("web: broken yaml");
    let failed = app_where(&s.base, "web", "the failed operation", |a| {
        phase(a) == "Failed"
    })
    .await;
    assert_eq!(revision(&failed), bad);
    assert_eq!(sync_status(&failed), "OutOfSync");
    assert_eq!(history_len(&failed), 1, "no history for a failed sync");
    assert!(failed.get("operation").is_none());
    let op = &failed["status"]["operationState"];
    assert_eq!(op["syncResult"]["revision"], bad);
    let message = op["message"].as_str().unwrap();
    assert!(
        message.contains("apps/web/broken.yaml") && message.contains("line"),
        "{message}"
    );
    assert_eq!(failed["status"]["conditions"][0]["type"], "ComparisonError");
    assert_eq!(failed["status"]["history"][0]["revision"], first);

    remote.write(
        "apps/web/broken.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fixed\n",
    );
    let fixed = remote.commit_push("web: fix the yaml");
    let ok = app_where(&s.base, "web", "the fix synced", |a| synced_at(a, &fixed)).await;
    assert_eq!(sync_status(&ok), "Synced");
    assert!(ok["status"].get("conditions").is_none());
    assert_eq!(history_len(&ok), 2);
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_helm_app_reports_its_chart_version_as_the_revision() {
    let (remote, _) = web_remote("nginx:1.27");
    let (config, log) = config(
        &remote.repo(),
        &["web=apps/web", "mon=helm:kube-prometheus-stack@65.5.0"],
    );
    let s = start(config, log).await;
    let mon = app(&s.base, "mon").await;
    assert_eq!(mon["spec"]["source"]["chart"], "kube-prometheus-stack");
    assert_eq!(mon["spec"]["source"]["targetRevision"], "65.5.0");
    assert_eq!(mon["spec"]["source"]["repoURL"], remote.repo());
    assert!(mon["spec"]["source"].get("path").is_none());
    assert_eq!(revision(&mon), "65.5.0");
    assert_eq!(
        mon["status"]["operationState"]["syncResult"]["revision"],
        "65.5.0"
    );
    assert_eq!(mon["status"]["history"][0]["revision"], "65.5.0");
    assert_eq!(mon["status"]["sourceType"], "Helm");
    assert_eq!((sync_status(&mon), health(&mon)), ("Synced", "Healthy"));
    let (_, tree) = get(&s.base, "/api/v1/applications/mon/resource-tree").await;
    assert_eq!(tree["nodes"][0]["name"], "kube-prometheus-stack");
    assert_eq!(tree["nodes"][0]["health"]["status"], "Healthy");

    // A git commit moves the directory app, not the chart.
    remote.write("apps/web/web.yaml", &web_manifests("nginx:1.28"));
    let second = remote.commit_push("web: 1.28");
    app_where(&s.base, "web", "web synced", |a| synced_at(a, &second)).await;
    let after = app(&s.base, "mon").await;
    assert_eq!(
        after["metadata"]["resourceVersion"],
        mon["metadata"]["resourceVersion"]
    );
    s.sandbox.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Control API

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_paused_apps_are_never_synced_until_resumed() {
    let (remote, _) = web_remote("nginx:1.27");
    let (mut config, log) = config(&remote.repo(), &["web=apps/web", "mon=helm:chart@1.0.0"]);
    config.start_paused = true;
    let s = start(config, log).await;
    for name in ["web", "mon"] {
        let a = app(&s.base, name).await;
        assert_eq!(revision(&a), "", "{a}");
        assert_eq!(sync_status(&a), "OutOfSync");
        assert_eq!(health(&a), "Missing");
        assert!(
            a["status"].get("operationState").is_none() && a["status"].get("history").is_none()
        );
        assert_eq!(a["status"]["resources"], serde_json::json!([]));
    }
    let tip = remote
        .write(
            "apps/web/extra.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n",
        )
        .commit_push("more");

    assert_eq!(post(&s.base, "/sandbox/v1/resume").await, 200);
    let web = app_where(&s.base, "web", "synced after resume", |a| {
        synced_at(a, &tip)
    })
    .await;
    assert_eq!(history_len(&web), 1);
    assert_eq!(revision(&app(&s.base, "mon").await), "1.0.0");

    // Pausing again: commits are not picked up until the next resume.
    assert_eq!(post(&s.base, "/sandbox/v1/pause").await, 200);
    remote.write(
        "apps/web/extra.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra2\n",
    );
    let later = remote.commit_push("while paused");
    // A negative check needs some time: several sync intervals pass without the commit landing.
    let until = Instant::now() + Duration::from_millis(600);
    while Instant::now() < until {
        assert_eq!(
            revision(&app(&s.base, "web").await),
            tip,
            "synced while paused"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(post(&s.base, "/sandbox/v1/resume").await, 200);
    app_where(&s.base, "web", "synced after the second resume", |a| {
        synced_at(a, &later)
    })
    .await;
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_answers_503_and_cuts_open_streams() {
    let (remote, _) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    let mut events = Events::open(&s.base, "").await;
    assert_eq!(events.next().await.unwrap()["result"]["type"], "ADDED");

    let started = Instant::now();
    assert_eq!(post(&s.base, "/sandbox/v1/outage?seconds=2").await, 200);
    // The stream ends (the connection is aborted) even though nothing changed.
    loop {
        match events.next().await {
            None => break,
            Some(event) => assert_eq!(event["result"]["type"], "MODIFIED"),
        }
    }
    for path in [
        "/api/v1/applications",
        "/api/v1/applications/web",
        "/api/v1/applications/web/resource-tree",
        "/api/v1/stream/applications",
    ] {
        let (status, body) = get(&s.base, path).await;
        assert_eq!(status, 503, "{path}");
        assert_eq!(body["code"], 14, "{path}: {body}");
    }
    assert_eq!(
        post(&s.base, "/sandbox/v1/pause").await,
        200,
        "the control API stays up"
    );
    assert_eq!(post(&s.base, "/sandbox/v1/resume").await, 200);
    assert_eq!(post(&s.base, "/sandbox/v1/outage?seconds=soon").await, 400);
    eventually("the API back", || async {
        (get(&s.base, "/api/v1/applications/web").await.0 == 200).then_some(())
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "back too early: {:?}",
        started.elapsed()
    );
    let mut events = Events::open(&s.base, "").await;
    assert_eq!(events.next().await.unwrap()["result"]["type"], "ADDED");
    let log = s.log.clone();
    eventually("the outage's end logged", || {
        std::future::ready(
            log.lock()
                .unwrap()
                .iter()
                .any(|l| l.contains("API outage over"))
                .then_some(()),
        )
    })
    .await;
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_checked_on_every_api_route_only_when_configured() {
    let (remote, _) = web_remote("nginx:1.27");
    let (mut config, log) = config(&remote.repo(), &["web=apps/web"]);
    config.token = Some("s3cret-token-value".into());
    assert!(
        !format!("{config:?}").contains("s3cret"),
        "Debug must not show the token"
    );
    let s = start(config, log).await;
    for path in [
        "/api/v1/applications",
        "/api/v1/applications/web",
        "/api/v1/applications/web/resource-tree",
        "/api/v1/stream/applications",
    ] {
        let url = format!("{}{path}", s.base);
        let none = client().get(&url).send().await.unwrap();
        assert_eq!(none.status().as_u16(), 401, "{path}");
        let body: Value = none.json().await.unwrap();
        assert_eq!(body["code"], 16);
        let wrong = client()
            .get(&url)
            .bearer_auth("s3cret-token-valuX")
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status().as_u16(), 401, "{path}");
        let right = client()
            .get(&url)
            .bearer_auth("s3cret-token-value")
            .send()
            .await
            .unwrap();
        assert_eq!(right.status().as_u16(), 200, "{path}");
    }
    assert_eq!(
        post(&s.base, "/sandbox/v1/pause").await,
        200,
        "the control API needs no token"
    );
    let log = s.log.lock().unwrap().join("\n");
    assert!(!log.contains("s3cret"), "{log}");
    s.sandbox.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// API details and configuration errors

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_apps_get_argo_cds_not_found_and_filters_are_honoured() {
    let (remote, _) = web_remote("nginx:1.27");
    remote.write("apps/api/d.yaml", &deployment("api", "nginx:1.27"));
    remote.commit_push("api");
    let (config, log) = config(&remote.repo(), &["web=apps/web", "api=apps/api"]);
    let s = start(config, log).await;

    let (status, body) = get(&s.base, "/api/v1/applications/nope").await;
    assert_eq!(status, 404);
    assert_eq!(
        body,
        serde_json::json!({"error": "applications.argoproj.io \"nope\" not found", "code": 5,
            "message": "applications.argoproj.io \"nope\" not found"})
    );
    assert_eq!(
        get(&s.base, "/api/v1/applications/nope/resource-tree")
            .await
            .0,
        404
    );
    assert_eq!(
        get(&s.base, "/api/v1/applications/web?appNamespace=argocd")
            .await
            .0,
        200
    );
    assert_eq!(
        get(&s.base, "/api/v1/applications/web?appNamespace=team-a")
            .await
            .0,
        404
    );

    let (_, list) = get(&s.base, "/api/v1/applications?name=api").await;
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["api"]);
    let (_, all) = get(&s.base, "/api/v1/applications").await;
    assert_eq!(all["items"].as_array().unwrap().len(), 2);

    let mut only_api = Events::open(&s.base, "?name=api").await;
    assert_eq!(
        only_api.next().await.unwrap()["result"]["application"]["metadata"]["name"],
        "api"
    );
    remote.write("apps/web/web.yaml", &web_manifests("nginx:1.28"));
    remote.write("apps/api/d.yaml", &deployment("api", "nginx:1.28"));
    let tip = remote.commit_push("both");
    let seen = only_api.until("api synced", |a| synced_at(a, &tip)).await;
    assert!(seen.iter().all(|a| a["metadata"]["name"] == "api"));
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_errors_name_the_flag() {
    let (remote, _) = web_remote("nginx:1.27");
    let flag_of = |r: Result<Sandbox, SandboxError>| match r {
        Err(SandboxError::Config { flag, message }) => (flag, message),
        Err(other) => panic!("not a configuration error: {other}"),
        Ok(_) => panic!("started"),
    };

    let (c, _) = config("/nonexistent/repo.git", &["web=apps/web"]);
    assert_eq!(flag_of(greenlight_sandbox::start(c).await).0, "--repo");

    let (mut c, _) = config(&remote.repo(), &["web=apps/web"]);
    c.branch = Some("release".into());
    let (flag, message) = flag_of(greenlight_sandbox::start(c).await);
    assert_eq!(flag, "--branch");
    assert!(message.contains("release"), "{message}");

    let (mut c, _) = config(&remote.repo(), &["web=apps/web"]);
    c.registry = Some("/nonexistent/registry.txt".into());
    assert_eq!(flag_of(greenlight_sandbox::start(c).await).0, "--registry");

    let (c, _) = config(&remote.repo(), &["web=apps/web", "web=apps/other"]);
    assert_eq!(flag_of(greenlight_sandbox::start(c).await).0, "--app");

    let empty = Remote::new("main");
    let (c, _) = config(&empty.repo(), &["web=apps/web"]);
    let (flag, message) = flag_of(greenlight_sandbox::start(c).await);
    assert_eq!(flag, "--repo");
    assert!(message.contains("--branch"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_branch_and_a_non_bare_remote_work() {
    let remote = Remote::new("main");
    remote.write("apps/web/d.yaml", &deployment("web", "nginx:1.27"));
    remote.commit_push("main");
    remote.git(&["checkout", "--quiet", "-b", "release"]);
    remote.write("apps/web/d.yaml", &deployment("web", "nginx:2.0"));
    let release = remote.commit_push("release");
    // The working clone itself as the remote (not a bare repository).
    let (mut c, log) = config(remote.work.to_str().unwrap(), &["web=apps/web"]);
    c.branch = Some("release".into());
    let s = start(c, log).await;
    let a = s.sandbox.application("web").unwrap();
    assert_eq!(revision(&a), release);
    assert_eq!(a["spec"]["source"]["targetRevision"], "release");
    assert_eq!(
        a["status"]["summary"]["images"],
        serde_json::json!(["nginx:2.0"])
    );
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_whose_path_does_not_exist_yet_fails_until_a_commit_creates_it() {
    let (remote, _) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web", "later=apps/later"]);
    let s = start(config, log).await;
    let later = s.sandbox.application("later").unwrap();
    assert_eq!(phase(&later), "Failed");
    let message = later["status"]["operationState"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.contains("apps/later: app path does not exist"),
        "{message}"
    );
    assert_eq!(
        (sync_status(&later), health(&later)),
        ("OutOfSync", "Missing")
    );

    remote.write("apps/later/d.yaml", &deployment("later", "nginx:1.27"));
    let tip = remote.commit_push("create the later app");
    let created = app_where(&s.base, "later", "created", |a| synced_at(a, &tip)).await;
    assert_eq!(sync_status(&created), "Synced");
    assert_eq!(history_len(&created), 1);
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_speaks_server_sent_events_when_asked() {
    let (remote, _) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    let response = client()
        .get(format!("{}/api/v1/stream/applications?name=web", s.base))
        .header("Accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.bytes_stream();
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = tokio::time::timeout(WAIT, body.next())
            .await
            .expect("a frame")
            .expect("open")
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    let frame = text.split("\n\n").next().unwrap();
    let event: Value =
        serde_json::from_str(frame.strip_prefix("data: ").expect("an SSE data frame")).unwrap();
    assert_eq!(event["result"]["type"], "ADDED");
    assert_eq!(event["result"]["application"]["metadata"]["name"], "web");
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_request_fetches_at_once() {
    let (remote, _) = web_remote("nginx:1.27");
    let (mut config, log) = config(&remote.repo(), &["web=apps/web"]);
    // Far longer than the wait below: only the refresh can bring the commit in time.
    config.sync_interval = Duration::from_secs(120);
    let s = start(config, log).await;
    remote.write("apps/web/web.yaml", &web_manifests("nginx:1.28"));
    let tip = remote.commit_push("web: 1.28");
    let (status, _) = get(&s.base, "/api/v1/applications/web?refresh=normal").await;
    assert_eq!(status, 200);
    let a = app_where(&s.base, "web", "synced after the refresh", |a| {
        synced_at(a, &tip)
    })
    .await;
    let results = a["status"]["operationState"]["syncResult"]["resources"]
        .as_array()
        .unwrap();
    let messages: Vec<&str> = results
        .iter()
        .map(|r| r["message"].as_str().unwrap())
        .collect();
    assert!(
        messages.contains(&"deployment.apps/web configured"),
        "{messages:?}"
    );
    assert!(messages.contains(&"service/web unchanged"), "{messages:?}");
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_remote_is_logged_once_and_syncing_resumes_when_it_is_back() {
    let (remote, _) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    let logged = |needle: &'static str| {
        let log = s.log.clone();
        move || {
            let found = log
                .lock()
                .unwrap()
                .iter()
                .filter(|l| l.contains(needle))
                .count();
            std::future::ready((found > 0).then_some(found))
        }
    };
    let away = remote.bare.with_extension("moved");
    std::fs::rename(&remote.bare, &away).unwrap();
    eventually("the failure logged", logged("sync failed")).await;
    // Still served while the remote is away.
    assert_eq!(sync_status(&app(&s.base, "web").await), "Synced");
    std::fs::rename(&away, &remote.bare).unwrap();
    eventually("the recovery logged", logged("sync works again")).await;
    let failures = s
        .log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("sync failed"))
        .count();
    assert_eq!(
        failures, 1,
        "one line per distinct problem, not one per tick"
    );
    remote.write("apps/web/web.yaml", &web_manifests("nginx:1.28"));
    let tip = remote.commit_push("web: 1.28");
    app_where(&s.base, "web", "synced after the outage", |a| {
        synced_at(a, &tip)
    })
    .await;
    s.sandbox.shutdown().await;
}
