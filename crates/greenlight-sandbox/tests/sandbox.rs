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

async fn post_json(base: &str, path: &str, body: &str) -> (u16, Value) {
    let response = client()
        .post(format!("{base}{path}"))
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
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

/// The resource tree's node of `kind` named `name` (`Value::Null` when there is none).
fn node(tree: &Value, kind: &str, name: &str) -> Value {
    tree["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|n| n["kind"] == kind && n["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

/// The stream's events, one parsed JSON line each; `None` marks the end of the stream (or an
/// error cutting it).
struct Events {
    rx: mpsc::UnboundedReceiver<Option<Value>>,
}

type Body =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<axum::body::Bytes>> + Send>>;

fn stream_url(base: &str, query: &str) -> String {
    format!("{base}/api/v1/stream/applications{query}")
}

impl Events {
    async fn open(base: &str, query: &str) -> Events {
        let response = client().get(stream_url(base, query)).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        Events::read(Box::pin(response.bytes_stream()), Vec::new())
    }

    /// Parses `body` (after the bytes already taken, `pending`) line by line from now on.
    fn read(mut body: Body, mut pending: Vec<u8>) -> Events {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                while let Some(nl) = pending.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=nl).collect();
                    let _ = tx.send(Some(
                        serde_json::from_slice(&line).expect("each line is JSON"),
                    ));
                }
                match body.next().await {
                    Some(Ok(chunk)) => pending.extend_from_slice(&chunk),
                    _ => break,
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

/// A stream's bytes as they arrive, for the exact wire format.
struct Raw {
    rx: mpsc::UnboundedReceiver<Option<axum::body::Bytes>>,
    text: String,
    ended: bool,
}

impl Raw {
    fn read(response: reqwest::Response) -> Raw {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut body = response.bytes_stream();
            while let Some(Ok(chunk)) = body.next().await {
                let _ = tx.send(Some(chunk));
            }
            let _ = tx.send(None);
        });
        Raw {
            rx,
            text: String::new(),
            ended: false,
        }
    }

    /// Reads until the text received so far satisfies `done`; returns it.
    async fn until(&mut self, what: &str, done: impl Fn(&str) -> bool) -> String {
        while !done(&self.text) {
            assert!(
                !self.ended,
                "the stream ended before {what}: {:?}",
                self.text
            );
            match tokio::time::timeout(WAIT, self.rx.recv()).await {
                Ok(Some(Some(chunk))) => self.text.push_str(std::str::from_utf8(&chunk).unwrap()),
                Ok(_) => self.ended = true,
                Err(_) => panic!("timed out waiting for {what}: {:?}", self.text),
            }
        }
        self.text.clone()
    }

    /// Reads to the end of the stream; returns everything received.
    async fn read_to_end(&mut self) -> String {
        while !self.ended {
            match tokio::time::timeout(WAIT, self.rx.recv()).await {
                Ok(Some(Some(chunk))) => self.text.push_str(std::str::from_utf8(&chunk).unwrap()),
                Ok(_) => self.ended = true,
                Err(_) => panic!("the stream did not end: {:?}", self.text),
            }
        }
        self.text.clone()
    }
}

async fn open_raw(base: &str, query: &str, accept: &str) -> reqwest::Response {
    let response = client()
        .get(stream_url(base, query))
        .header("Accept", accept)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response
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
        assert_eq!(r["status"], "Synced");
        // Argo CD >= 3.0 keeps resource health in the tree; Get re-fills it from there.
        let expected = match r["kind"].as_str().unwrap() {
            "Deployment" => {
                serde_json::json!({"status": "Progressing", "message": "Waiting for rollout to finish: 0 of 2 updated replicas are available..."})
            }
            "Service" => serde_json::json!({"status": "Healthy"}),
            _ => Value::Null,
        };
        assert_eq!(r["health"], expected, "{r}");
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
    for r in list["items"][0]["status"]["resources"].as_array().unwrap() {
        assert!(r.get("health").is_none(), "the list is as stored: {r}");
    }
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
async fn a_sync_lands_in_stages_each_its_own_update_then_rolls_out() {
    let (remote, first) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    let before = app_where(&s.base, "web", "Healthy", |a| health(a) == "Healthy").await;
    let mut events = Events::open(&s.base, "").await;
    let added = events.next().await.unwrap();
    assert_eq!(added["result"]["type"], "ADDED");
    assert_eq!(added["result"]["application"]["metadata"]["name"], "web");

    remote.write("apps/web/web.yaml", &web_manifests("nginx:1.28"));
    let second = remote.commit_push("web: nginx 1.28");
    let seen = events
        .until("the refresh after the sync", |a| {
            synced_at(a, &second) && sync_status(a) == "Synced"
        })
        .await;
    let steps: Vec<&Value> = seen.iter().filter(|a| revision(a) == second).collect();
    assert_eq!(
        steps.len(),
        5,
        "compare, start, history, finish, refresh: {steps:#?}"
    );
    let (a, b, c, d, e) = (steps[0], steps[1], steps[2], steps[3], steps[4]);
    let whole_seconds = |t: &Value| {
        let t = t.as_str().unwrap_or_else(|| panic!("a timestamp: {t}"));
        assert!(t.len() == 20 && t.ends_with('Z'), "{t}");
        t.to_string()
    };

    // a: the comparison.
    assert_eq!(sync_status(a), "OutOfSync");
    assert!(a.get("operation").is_none());
    assert_eq!(
        a["status"]["operationState"], before["status"]["operationState"],
        "still the old operation"
    );
    let reconciled = whole_seconds(&a["status"]["reconciledAt"]);
    assert!(reconciled >= whole_seconds(&before["status"]["reconciledAt"]));
    let deploy = a["status"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "Deployment")
        .unwrap();
    assert_eq!(deploy["status"], "OutOfSync");

    // b: the operation starts.
    assert_eq!(b["operation"]["sync"]["revision"], second);
    assert_eq!(
        b["operation"]["initiatedBy"],
        serde_json::json!({"automated": true})
    );
    let op = &b["status"]["operationState"];
    assert_eq!(phase(b), "Running");
    assert_eq!(op["syncResult"]["revision"], second);
    let started = whole_seconds(&op["startedAt"]);
    assert!(started >= reconciled);
    assert!(op.get("finishedAt").is_none());
    assert_eq!(sync_status(b), "OutOfSync");

    // c: history while the operation is still Running.
    assert_eq!(phase(c), "Running");
    assert!(c.get("operation").is_some());
    assert_eq!(history_len(c), 2);
    let entry = &c["status"]["history"][1];
    assert_eq!(entry["id"], 1);
    assert_eq!(entry["revision"], second);
    assert_eq!(whole_seconds(&entry["deployStartedAt"]), started);
    whole_seconds(&entry["deployedAt"]);
    assert_eq!(entry["source"]["path"], "apps/web");
    assert_eq!(entry["initiatedBy"], serde_json::json!({"automated": true}));

    // d: Succeeded, with the comparison's sync status, health and reconciledAt.
    assert!(d.get("operation").is_none(), "cleared when it finishes");
    let op = &d["status"]["operationState"];
    assert_eq!(op["phase"], "Succeeded");
    assert_eq!(op["syncResult"]["revision"], second);
    assert_eq!(op["message"], "successfully synced (all tasks run)");
    let finished = whole_seconds(&op["finishedAt"]);
    assert!(!op["syncResult"]["resources"].as_array().unwrap().is_empty());
    assert_eq!(d["status"]["sync"], a["status"]["sync"]);
    assert_eq!(d["status"]["health"], a["status"]["health"]);
    assert_eq!(d["status"]["summary"], a["status"]["summary"]);
    assert_eq!(health(d), "Healthy");
    assert_eq!(d["status"]["reconciledAt"], a["status"]["reconciledAt"]);

    // e: the refresh that follows.
    assert_eq!(sync_status(e), "Synced");
    assert_eq!(health(e), "Progressing");
    assert_eq!(e["status"]["operationState"], d["status"]["operationState"]);
    let refreshed = whole_seconds(&e["status"]["reconciledAt"]);
    assert!(refreshed >= finished, "{refreshed} < {finished}");
    assert_eq!(history_len(e), 2);
    assert_ne!(first, second);

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

    // The rollout's end is pushed to the stream by the sandbox's timer: no client polls. It is
    // not a reconciliation: reconciledAt stays.
    let rollout = events.until("Healthy", |a| health(a) == "Healthy").await;
    let healthy = rollout.last().unwrap();
    assert_eq!(healthy["status"]["operationState"], op.clone());
    assert_eq!(
        healthy["status"]["reconciledAt"],
        e["status"]["reconciledAt"]
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
        .position(|a| synced_at(a, &bad) && sync_status(a) == "Synced")
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
    let gone = node(&tree, "ConfigMap", "gone");
    assert_eq!(gone["health"]["status"], "Missing");
    assert!(
        gone["health"]["message"]
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
    eventually("the ignored resource Degraded", || async {
        let (_, tree) = get(&s.base, "/api/v1/applications/ignored/resource-tree").await;
        (node(&tree, "Deployment", "ignored")["health"]["status"] == "Degraded").then_some(tree)
    })
    .await;
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
async fn a_manifest_that_does_not_render_is_a_comparison_error_without_an_operation() {
    let (remote, first) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    let good = app_where(&s.base, "web", "Healthy", |a| health(a) == "Healthy").await;
    let mut events = Events::open(&s.base, "?name=web").await;
    events.next().await;

    remote.write(
        "apps/web/broken.yaml",
        "kind: ConfigMap\nmetadata: [unclosed\n",
    );
    remote.commit_push("web: broken yaml");
    let seen = events
        .until("the comparison error", |a| sync_status(a) == "Unknown")
        .await;
    assert_eq!(seen.len(), 1, "one update, no operation: {seen:#?}");
    let failed = &seen[0];
    assert_eq!(revision(failed), "main", "the unresolved target revision");
    assert!(failed.get("operation").is_none());
    for field in ["operationState", "history", "health", "summary"] {
        assert_eq!(failed["status"][field], good["status"][field], "{field}");
    }
    assert_eq!(failed["status"]["history"][0]["revision"], first);
    assert!(
        failed["status"]["reconciledAt"].as_str().unwrap()
            >= good["status"]["reconciledAt"].as_str().unwrap()
    );
    let conditions = failed["status"]["conditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 1);
    assert_eq!(conditions[0]["type"], "ComparisonError");
    let message = conditions[0]["message"].as_str().unwrap();
    assert!(
        message.starts_with("Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown desc = Manifest generation error (cached): "),
        "{message}"
    );
    assert!(
        message.contains("apps/web/broken.yaml") && message.contains("line"),
        "{message}"
    );
    assert!(conditions[0]["lastTransitionTime"].is_string());
    for r in failed["status"]["resources"].as_array().unwrap() {
        assert_eq!(r["status"], "Unknown", "{r}");
    }
    let log = s.log.lock().unwrap().join("\n");
    assert!(!log.contains("operation Running at main"), "{log}");

    remote.write(
        "apps/web/broken.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fixed\n",
    );
    let fixed = remote.commit_push("web: fix the yaml");
    let seen = events
        .until("the fix synced", |a| {
            synced_at(a, &fixed) && sync_status(a) == "Synced"
        })
        .await;
    let ok = seen.last().unwrap();
    assert!(ok["status"].get("conditions").is_none());
    assert_eq!(history_len(ok), 2);
    assert!(seen.iter().any(|a| phase(a) == "Running"));
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_render_error_stays_hidden_for_the_grace_then_the_sandbox_publishes_it() {
    let (remote, _) = web_remote("nginx:1.27");
    let (mut config, log) = config(&remote.repo(), &["web=apps/web"]);
    let grace = Duration::from_millis(1500);
    config.repo_error_grace = grace;
    let s = start(config, log).await;
    let good = app_where(&s.base, "web", "Healthy", |a| health(a) == "Healthy").await;
    let mut events = Events::open(&s.base, "?name=web").await;
    events.next().await;

    remote.write("apps/web/broken.yaml", "kind: [unclosed\n");
    remote.commit_push("web: broken yaml");
    let pushed = Instant::now();
    // Nothing is published during the grace: the next update is the error, at its end, sent by
    // the sandbox's own timer (the stream is the only reader here).
    let seen = events
        .until("the comparison error", |a| sync_status(a) == "Unknown")
        .await;
    assert!(
        pushed.elapsed() >= grace,
        "shown after {:?}",
        pushed.elapsed()
    );
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(
        seen[0]["status"]["conditions"][0]["type"],
        "ComparisonError"
    );
    assert_eq!(revision(&seen[0]), "main");
    assert_ne!(
        seen[0]["status"]["reconciledAt"],
        good["status"]["reconciledAt"]
    );
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
    let chart = node(&tree, "Deployment", "kube-prometheus-stack");
    assert_eq!(chart["health"]["status"], "Healthy");

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
        assert!(a["status"].get("resources").is_none(), "omitempty: {a}");
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
async fn an_outage_answers_503_and_ends_open_streams_with_the_error_chunk() {
    let (remote, _) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    let mut plain = Raw::read(open_raw(&s.base, "?name=web", "application/json").await);
    let mut sse = Raw::read(open_raw(&s.base, "?name=web", "text/event-stream").await);
    plain.until("the ADDED line", |t| t.contains('\n')).await;
    sse.until("the ADDED frame", |t| t.contains(" \n\n\n"))
        .await;
    // A stream still waiting for its first message (nothing visible) when the outage begins.
    let waiting = tokio::spawn(client().get(stream_url(&s.base, "?name=nope")).send());

    let started = Instant::now();
    assert_eq!(post(&s.base, "/sandbox/v1/outage?seconds=2").await, 200);
    // Open streams end with grpc-gateway's error chunk: no delimiter after it.
    let chunk = r#"{"error":{"grpc_code":14,"http_code":503,"message":"the Argo CD API is unavailable (sandbox outage)","http_status":"Service Unavailable"}}"#;
    let text = plain.read_to_end().await;
    let (_, tail) = text.split_once('\n').unwrap();
    assert_eq!(tail, chunk, "{text}");
    let text = sse.read_to_end().await;
    let (_, tail) = text.split_once(" \n\n\n").unwrap();
    assert_eq!(tail, format!("data: {chunk} \n\n"), "{text}");
    // Before anything was written, the status is the error's and the body the usual one.
    let refused = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("answered")
        .unwrap()
        .unwrap();
    assert_eq!(refused.status().as_u16(), 503);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["code"], 14, "{body}");
    for path in [
        "/api/v1/applications",
        "/api/v1/applications/web",
        "/api/v1/applications/web/resource-tree",
        "/api/v1/applications/web/managed-resources",
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
        // The stream too: its auth check fails before the stream's headers, so the answer is
        // the usual error body, not a stream error chunk.
        assert_eq!(
            body,
            serde_json::json!({"error": "no session information", "code": 16, "message": "no session information"}),
            "{path}"
        );
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
    // A spec edit too.
    let url = format!("{}/api/v1/applications/web", s.base);
    let body = r#"{"patch":"{\"spec\":{\"info\":[{\"name\":\"a\",\"value\":\"b\"}]}}","patchType":"merge"}"#;
    let none = client().patch(&url).body(body).send().await.unwrap();
    assert_eq!(none.status().as_u16(), 401);
    assert_eq!(none.json::<Value>().await.unwrap()["code"], 16);
    let right = client()
        .patch(&url)
        .bearer_auth("s3cret-token-value")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(right.status().as_u16(), 200);
    assert_eq!(
        right.json::<Value>().await.unwrap()["spec"]["info"][0]["value"],
        "b"
    );
    assert_eq!(
        post(&s.base, "/sandbox/v1/pause").await,
        200,
        "the control API needs no token"
    );
    let log = s.log.lock().unwrap().join("\n");
    assert!(!log.contains("s3cret"), "{log}");
    assert_eq!(
        log.matches("the token is not JWT-shaped").count(),
        1,
        "said once, at start: {log}"
    );
    assert!(log.contains("real Argo CD would refuse it"), "{log}");
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwt_shaped_token_is_not_warned_about() {
    let (remote, _) = web_remote("nginx:1.27");
    let (mut config, log) = config(&remote.repo(), &["web=apps/web"]);
    config.token = Some("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.c2lnbmF0dXJl".into());
    let s = start(config, log).await;
    let response = client()
        .get(format!("{}/api/v1/applications/web", s.base))
        .bearer_auth("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.c2lnbmF0dXJl")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let log = s.log.lock().unwrap().join("\n");
    assert!(!log.contains("JWT"), "{log}");
    s.sandbox.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// API details and configuration errors

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_apps_are_permission_denied_unless_a_project_is_named() {
    let (remote, _) = web_remote("nginx:1.27");
    remote.write("apps/api/d.yaml", &deployment("api", "nginx:1.27"));
    remote.commit_push("api");
    let (config, log) = config(&remote.repo(), &["web=apps/web", "api=apps/api"]);
    let s = start(config, log).await;
    let denied = serde_json::json!({"error": "permission denied", "code": 7, "message": "permission denied"});
    let not_found = serde_json::json!({"error": "applications.argoproj.io \"nope\" not found", "code": 5,
        "message": "applications.argoproj.io \"nope\" not found"});

    for path in [
        "/api/v1/applications/nope",
        "/api/v1/applications/nope/resource-tree",
    ] {
        assert_eq!(get(&s.base, path).await, (403, denied.clone()), "{path}");
        let (status, body) = get(&s.base, &format!("{path}?project=default")).await;
        assert_eq!((status, &body), (404, &not_found), "{path}");
        assert_eq!(
            get(&s.base, &format!("{path}?project=team")).await,
            (403, denied.clone())
        );
    }
    let (status, body) = post_json(&s.base, "/api/v1/applications/nope/sync", "{}").await;
    assert_eq!((status, &body), (403, &denied));
    let (status, body) = post_json(
        &s.base,
        "/api/v1/applications/nope/sync",
        r#"{"project":"default"}"#,
    )
    .await;
    assert_eq!((status, &body), (404, &not_found));

    // An existing app is in project default only.
    for path in [
        "/api/v1/applications/web",
        "/api/v1/applications/web/resource-tree",
    ] {
        assert_eq!(get(&s.base, path).await.0, 200, "{path}");
        assert_eq!(
            get(&s.base, &format!("{path}?project=default")).await.0,
            200
        );
        assert_eq!(
            get(&s.base, &format!("{path}?project=team")).await,
            (403, denied.clone())
        );
    }
    let (status, _) = post_json(
        &s.base,
        "/api/v1/applications/web/sync",
        r#"{"project":"team"}"#,
    )
    .await;
    assert_eq!(status, 403);
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
        403
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
    let (status, none) = get(&s.base, "/api/v1/applications?name=nope").await;
    assert_eq!((status, none["items"].as_array().unwrap().len()), (200, 0));

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

    let (mut c, _) = config(&remote.repo(), &["web=apps/web"]);
    c.retry_backoff = Duration::ZERO;
    assert_eq!(
        flag_of(greenlight_sandbox::start(c).await).0,
        "--retry-backoff"
    );

    let (mut c, _) = config(&remote.repo(), &["web=apps/web"]);
    c.stream_buffer = 0;
    assert_eq!(
        flag_of(greenlight_sandbox::start(c).await).0,
        "--stream-buffer"
    );

    let (mut c, _) = config(&remote.repo(), &["web=apps/web"]);
    c.heartbeat = Duration::ZERO;
    assert_eq!(flag_of(greenlight_sandbox::start(c).await).0, "--heartbeat");

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
async fn an_app_whose_path_does_not_exist_yet_is_a_comparison_error_until_a_commit_creates_it() {
    let (remote, _) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web", "later=apps/later"]);
    let s = start(config, log).await;
    let later = s.sandbox.application("later").unwrap();
    assert!(later["status"].get("operationState").is_none(), "{later}");
    assert_eq!(sync_status(&later), "Unknown");
    assert_eq!(revision(&later), "main");
    let message = later["status"]["conditions"][0]["message"]
        .as_str()
        .unwrap();
    assert!(
        message
            .ends_with("Manifest generation error (cached): apps/later: app path does not exist"),
        "{message}"
    );
    assert_eq!(health(&later), "Healthy", "no resources: Healthy");

    remote.write("apps/later/d.yaml", &deployment("later", "nginx:1.27"));
    let tip = remote.commit_push("create the later app");
    let created = app_where(&s.base, "later", "created", |a| {
        synced_at(a, &tip) && sync_status(a) == "Synced"
    })
    .await;
    assert!(created["status"].get("conditions").is_none());
    assert_eq!(history_len(&created), 1);
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_speaks_server_sent_events_with_heartbeats_only_when_asked_exactly() {
    let (remote, _) = web_remote("nginx:1.27");
    let (mut config, log) = config(&remote.repo(), &["web=apps/web"]);
    config.rollout_time = Duration::ZERO;
    config.heartbeat = Duration::from_millis(200);
    let s = start(config, log).await;
    let response = open_raw(&s.base, "?name=web", "text/event-stream").await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(response.headers()["x-content-type-options"], "nosniff");
    let mut sse = Raw::read(response);
    let plain_response =
        open_raw(&s.base, "?name=web", "text/event-stream, application/json").await;
    assert_eq!(
        plain_response.headers()["content-type"],
        "application/json",
        "SSE only for exactly text/event-stream"
    );
    let mut plain = Raw::read(plain_response);
    // One frame, `data: <json> \n\n` then the gateway's `\n` delimiter; then heartbeats.
    let text = sse
        .until("three heartbeats", |t| t.matches(":\n").count() >= 3)
        .await;
    let (frame, rest) = text.split_once(" \n\n\n").expect("a data frame");
    let event: Value =
        serde_json::from_str(frame.strip_prefix("data: ").expect("an SSE data frame")).unwrap();
    assert_eq!(event["result"]["type"], "ADDED");
    assert_eq!(event["result"]["application"]["metadata"]["name"], "web");
    assert_eq!(
        rest,
        ":\n".repeat(rest.len() / 2),
        "nothing but heartbeats while nothing changes"
    );
    // Plain JSON gets no heartbeats: only lines of JSON up to the next update.
    remote.write("README.md", "marker\n");
    let marker = remote.commit_push("marker");
    let text = plain
        .until("the marker", |t| t.contains(&marker) && t.ends_with('\n'))
        .await;
    for line in text.lines() {
        let event: Value = serde_json::from_str(line).expect("a JSON line, not a heartbeat");
        assert!(event.get("result").is_some(), "{line}");
    }
    // With nothing to send, an SSE stream sends nothing at all, heartbeats included: they start
    // with the first message.
    let nothing = tokio::time::timeout(
        Duration::from_millis(1000),
        client()
            .get(stream_url(&s.base, "?name=nope"))
            .header("Accept", "text/event-stream")
            .send(),
    )
    .await;
    assert!(nothing.is_err(), "headers with no message: {nothing:?}");
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

// ---------------------------------------------------------------------------------------------
// Argo CD versions

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_cd_versions_differ_in_resource_health_and_missing_resources() {
    let remote = Remote::new("main");
    remote.write("apps/web/web.yaml", &web_manifests("nginx:1.27"));
    remote.write(
        "apps/web/ignored.yaml",
        &deployment("ignored", "nginx:does-not-exist").replace(
            "  name: ignored\n",
            "  name: ignored\n  annotations:\n    argocd.argoproj.io/ignore-healthcheck: \"true\"\n",
        ),
    );
    // A ConfigMap whose apply fails: it is never created, so it stays Missing.
    remote.write(
        "apps/held/held.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  annotations:\n    sandbox.greenlight.dev/apply: fail\n---\n{}",
            deployment("held", "nginx:1.27")
        ),
    );
    remote.write("apps/empty/README.md", "nothing to deploy yet\n");
    remote.commit_push("apps");
    for (version, inline, held_health) in [
        ("2.14", true, "Missing"),
        ("3.0", false, "Missing"),
        ("3.4", false, "Healthy"),
        ("3.5", false, "Healthy"),
    ] {
        let (mut config, log) = config(
            &remote.repo(),
            &["web=apps/web", "held=apps/held", "empty=apps/empty"],
        );
        config.argocd_version = version.parse().unwrap();
        config.rollout_time = Duration::ZERO;
        let s = start(config, log).await;

        let web = app(&s.base, "web").await;
        assert_eq!(
            health(&web),
            "Healthy",
            "{version}: the ignored Degraded one is left out"
        );
        assert_eq!(
            web["status"].get("resourceHealthSource").cloned(),
            (!inline).then(|| serde_json::json!("appTree")),
            "{version}"
        );
        let resources = web["status"]["resources"].as_array().unwrap().clone();
        let of = |name: &str, kind: &str| {
            resources
                .iter()
                .find(|r| r["name"] == name && r["kind"] == kind)
                .unwrap_or_else(|| panic!("{name} in {resources:?}"))
                .get("health")
                .cloned()
        };
        if inline {
            let healthy = Some(serde_json::json!({"status": "Healthy"}));
            assert_eq!(of("web", "Deployment"), healthy, "{version}");
            assert_eq!(of("web", "Service"), healthy, "{version}");
            assert_eq!(
                of("web-config", "ConfigMap"),
                None,
                "no health for a ConfigMap"
            );
            assert_eq!(
                of("ignored", "Deployment"),
                None,
                "ignore-healthcheck: none inline"
            );
        } else {
            // Get re-fills each resource's health from the tree, as it is there: no health for a
            // ConfigMap, and the ignored one Degraded (ignore-healthcheck is for the app only).
            let healthy = Some(serde_json::json!({"status": "Healthy"}));
            assert_eq!(of("web", "Deployment"), healthy, "{version}");
            assert_eq!(of("web", "Service"), healthy, "{version}");
            assert_eq!(of("web-config", "ConfigMap"), None, "{version}");
            let ignored = of("ignored", "Deployment").unwrap();
            assert_eq!(ignored["status"], "Degraded", "{version}");
            // The list is the stored object: no resource health at all.
            let (_, list) = get(&s.base, "/api/v1/applications?name=web").await;
            let listed = list["items"][0]["status"]["resources"].as_array().unwrap();
            assert_eq!(listed.len(), resources.len());
            assert!(
                listed.iter().all(|r| r.get("health").is_none()),
                "{version}: {listed:?}"
            );
        }
        // The tree has every live resource's health, in every version.
        let (_, tree) = get(&s.base, "/api/v1/applications/web/resource-tree").await;
        let ignored = node(&tree, "Deployment", "ignored");
        assert_eq!(ignored["health"]["status"], "Degraded", "{version}");

        // held: the Deployment exists, the ConfigMap never does.
        let held = app_where(&s.base, "held", "the Deployment assessed", |a| {
            let (_, expected) = (version, held_health);
            health(a) == expected
                && a["status"]["operationState"]["syncResult"]["resources"].is_array()
        })
        .await;
        assert_eq!(phase(&held), "Running", "{version}: backing off");
        // The ConfigMap never created: a Missing node, and Missing re-filled (or inline).
        let (_, tree) = get(&s.base, "/api/v1/applications/held/resource-tree").await;
        let cm = node(&tree, "ConfigMap", "held");
        assert_eq!(cm["health"], serde_json::json!({"status": "Missing"}));
        assert!(
            cm.get("uid").is_none() && cm.get("resourceVersion").is_none(),
            "{cm}"
        );
        if !inline {
            let refilled = app_where(&s.base, "held", "the Deployment's health re-filled", |a| {
                a["status"]["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["kind"] == "Deployment" && r["health"]["status"] == "Healthy")
            })
            .await;
            let cm = refilled["status"]["resources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["kind"] == "ConfigMap")
                .unwrap()
                .clone();
            assert_eq!(
                cm["health"],
                serde_json::json!({"status": "Missing"}),
                "{version}"
            );
        }
        if inline {
            let held = app_where(&s.base, "held", "inline health refreshed", |a| {
                a["status"]["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["kind"] == "Deployment" && r["health"]["status"] == "Healthy")
            })
            .await;
            let cm = held["status"]["resources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["kind"] == "ConfigMap")
                .unwrap()
                .clone();
            assert_eq!(cm["health"], serde_json::json!({"status": "Missing"}));
            assert_eq!(health(&held), "Missing");
        }

        // No resources at all: Healthy.
        let empty = app(&s.base, "empty").await;
        assert_eq!(
            (sync_status(&empty), health(&empty)),
            ("Synced", "Healthy"),
            "{version}"
        );
        assert!(
            empty["status"].get("resources").is_none(),
            "omitempty: {empty}"
        );
        assert_eq!(empty["status"]["summary"], serde_json::json!({}));
        s.sandbox.shutdown().await;
    }
}

// ---------------------------------------------------------------------------------------------
// Operations

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requested_sync_runs_as_admin_and_resolves_the_branch_once_compared() {
    let (remote, _) = web_remote("nginx:1.27");
    let (mut config, log) = config(&remote.repo(), &["web=apps/web"]);
    // Only the sync request makes the sandbox fetch within the test's time.
    config.sync_interval = Duration::from_secs(120);
    let s = start(config, log).await;
    let mut events = Events::open(&s.base, "?name=web").await;
    events.next().await;
    remote.write("apps/web/web.yaml", &web_manifests("nginx:1.28"));
    let tip = remote.commit_push("web: 1.28");

    let (status, answer) = post_json(&s.base, "/api/v1/applications/web/sync", "{}").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["metadata"]["name"], "web");
    let operation = &answer["operation"];
    assert_eq!(
        operation["sync"]["revision"], "main",
        "the target revision, unresolved"
    );
    assert_eq!(
        operation["initiatedBy"],
        serde_json::json!({"username": "admin"})
    );
    assert_eq!(operation["retry"]["limit"], 2);

    let seen = events
        .until("the requested sync done", |a| {
            synced_at(a, &tip) && sync_status(a) == "Synced"
        })
        .await;
    let running: Vec<&Value> = seen.iter().filter(|a| phase(a) == "Running").collect();
    assert!(!running.is_empty(), "{seen:#?}");
    assert_eq!(
        running[0]["status"]["operationState"]["syncResult"]["revision"], "main",
        "the requested revision until the sync compared"
    );
    assert_eq!(
        running[0]["status"]["operationState"]["operation"]["initiatedBy"]["username"],
        "admin"
    );
    assert!(
        running
            .iter()
            .any(|a| a["status"]["operationState"]["syncResult"]["revision"] == tip),
        "then the commit"
    );
    let done = seen.last().unwrap();
    let op = &done["status"]["operationState"];
    assert_eq!(op["operation"]["sync"]["revision"], "main");
    assert_eq!(op["syncResult"]["revision"], tip);
    let last = done["status"]["history"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["revision"], tip);
    assert_eq!(
        last["initiatedBy"],
        serde_json::json!({"username": "admin"})
    );
    s.sandbox.shutdown().await;
}

/// The `syncResult.resources[]` entry of the last operation for the resource named `name`.
fn sync_result_of(app: &Value, name: &str) -> Value {
    app["status"]["operationState"]["syncResult"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_removed_from_git_is_pruned_only_by_a_sync_that_prunes() {
    let remote = Remote::new("main");
    for dir in ["apps/kept", "apps/pruned"] {
        remote.write(&format!("{dir}/web.yaml"), &web_manifests("nginx:1.27"));
    }
    remote.commit_push("two apps, each with its ConfigMap");
    let (mut config, log) = config(&remote.repo(), &["kept=apps/kept", "pruned=apps/pruned"]);
    config.prune = vec!["pruned".into()];
    let s = start(config, log).await;
    for dir in ["apps/kept", "apps/pruned"] {
        remote.write(
            &format!("{dir}/web.yaml"),
            &web_manifests("nginx:1.28").replace("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\ndata:\n  greeting: hello\n", ""),
        );
    }
    let tip = remote.commit_push("web: 1.28, its ConfigMap removed");

    // Automated prune on: deleted first, then the rest applied; Synced.
    let pruned = app_where(&s.base, "pruned", "pruned synced", |a| {
        synced_at(a, &tip) && sync_status(a) == "Synced"
    })
    .await;
    let op = &pruned["status"]["operationState"];
    assert_eq!(op["operation"]["sync"]["prune"], true);
    assert_eq!(
        op["syncResult"]["resources"][0],
        serde_json::json!({"version": "v1", "kind": "ConfigMap", "namespace": "default",
            "name": "web-config", "status": "Pruned", "message": "pruned",
            "hookPhase": "Succeeded", "syncPhase": "Sync"})
    );
    let (_, tree) = get(&s.base, "/api/v1/applications/pruned/resource-tree").await;
    assert_eq!(node(&tree, "ConfigMap", "web-config"), Value::Null);

    // Automated prune off: applied, the ConfigMap skipped and still live; OutOfSync.
    let kept = app_where(&s.base, "kept", "kept synced", |a| {
        synced_at(a, &tip) && revision(a) == tip
    })
    .await;
    assert_eq!(sync_status(&kept), "OutOfSync");
    assert_eq!(
        kept["spec"]["syncPolicy"]["automated"],
        serde_json::json!({"prune": false, "selfHeal": true})
    );
    let skipped = sync_result_of(&kept, "web-config");
    assert_eq!(
        (&skipped["status"], &skipped["message"]),
        (&"PruneSkipped".into(), &"ignored (requires pruning)".into())
    );
    let entry = kept["status"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "web-config")
        .cloned()
        .unwrap();
    assert_eq!(
        (&entry["status"], &entry["requiresPruning"]),
        (&"OutOfSync".into(), &true.into())
    );
    let (_, tree) = get(&s.base, "/api/v1/applications/kept/resource-tree").await;
    assert_ne!(node(&tree, "ConfigMap", "web-config"), Value::Null);

    // A requested sync that asks to prune deletes it.
    let (status, answer) = post_json(
        &s.base,
        "/api/v1/applications/kept/sync",
        r#"{"prune": true}"#,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["operation"]["sync"]["prune"], true);
    let kept = app_where(&s.base, "kept", "kept pruned", |a| {
        sync_status(a) == "Synced" && sync_result_of(a, "web-config")["status"] == "Pruned"
    })
    .await;
    assert_eq!(
        kept["status"]["operationState"]["operation"]["initiatedBy"],
        serde_json::json!({"username": "admin"})
    );
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_requests_are_refused_as_argo_cd_refuses_them() {
    let (remote, first) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    let sync = |body: &'static str| post_json(&s.base, "/api/v1/applications/web/sync", body);

    // Auto-sync apps accept no other revision than the target, compared as text.
    for revision in [first.as_str(), "HEAD", "release"] {
        let body = serde_json::json!({"revision": revision}).to_string();
        let (status, answer) = post_json(&s.base, "/api/v1/applications/web/sync", &body).await;
        let message = format!("Cannot sync to {revision}: auto-sync currently set to main");
        assert_eq!(
            (status, answer),
            (
                400,
                serde_json::json!({"error": message, "code": 9, "message": message})
            )
        );
    }
    let (status, answer) = sync("{not json").await;
    assert_eq!(
        (status, answer["code"].clone()),
        (400, serde_json::json!(3))
    );

    // While an operation is requested or running, another is refused.
    assert_eq!(post(&s.base, "/sandbox/v1/pause").await, 200);
    let (status, answer) = sync(r#"{"revision":"main","prune":true}"#).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["operation"]["sync"]["prune"], true);
    let (status, answer) = sync("{}").await;
    let message = "another operation is already in progress";
    assert_eq!(
        (status, answer),
        (
            400,
            serde_json::json!({"error": message, "code": 9, "message": message})
        )
    );
    // Paused, nothing runs it (the last operation's state is cleared as the new one is set, as
    // Argo CD's SetAppOperation does); resumed, it runs.
    let waiting = app(&s.base, "web").await;
    assert!(
        waiting["status"].get("operationState").is_none(),
        "{}",
        waiting["status"]
    );
    assert_eq!(post(&s.base, "/sandbox/v1/resume").await, 200);
    app_where(&s.base, "web", "the requested sync done", |a| {
        a.get("operation").is_none() && history_len(a) == 2
    })
    .await;
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_and_partial_syncs_succeed_without_history() {
    let (remote, first) = web_remote("nginx:1.27");
    remote.write("apps/web/web.yaml", &web_manifests("nginx:1.28"));
    let second = remote.commit_push("web: 1.28");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    let before = app_where(&s.base, "web", "Healthy", |a| health(a) == "Healthy").await;
    assert_eq!(revision(&before), second);

    // A dry run may name another commit: it resolves in the mirror, applies nothing.
    let body = serde_json::json!({"revision": first, "dryRun": true}).to_string();
    let (status, _) = post_json(&s.base, "/api/v1/applications/web/sync", &body).await;
    assert_eq!(status, 200);
    let dry = app_where(&s.base, "web", "the dry run done", |a| {
        a.get("operation").is_none()
            && a["status"]["operationState"]["operation"]["sync"]["dryRun"] == true
    })
    .await;
    let op = &dry["status"]["operationState"];
    assert_eq!(op["phase"], "Succeeded");
    assert_eq!(op["syncResult"]["revision"], first);
    let messages: Vec<&str> = op["syncResult"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["message"].as_str().unwrap())
        .collect();
    assert!(
        messages.contains(&"deployment.apps/web configured (dry run)"),
        "{messages:?}"
    );
    assert_eq!(dry["status"]["history"], before["status"]["history"]);
    assert_eq!(dry["status"]["sync"], before["status"]["sync"]);
    assert_eq!(dry["status"]["summary"], before["status"]["summary"]);

    // A partial sync: only the named objects.
    let body = r#"{"resources":[{"group":"","kind":"ConfigMap","name":"web-config","namespace":"default"}]}"#;
    let (status, _) = post_json(&s.base, "/api/v1/applications/web/sync", body).await;
    assert_eq!(status, 200);
    let partial = app_where(&s.base, "web", "the partial sync done", |a| {
        a.get("operation").is_none()
            && a["status"]["operationState"]["operation"]["sync"]["resources"].is_array()
    })
    .await;
    let op = &partial["status"]["operationState"];
    assert_eq!(op["phase"], "Succeeded");
    assert_eq!(
        op["operation"]["sync"]["resources"],
        serde_json::json!([{"kind": "ConfigMap", "name": "web-config", "namespace": "default"}])
    );
    let results = op["syncResult"]["resources"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["message"], "configmap/web-config unchanged");
    assert_eq!(op["syncResult"]["revision"], second);
    assert_eq!(history_len(&partial), history_len(&before));

    // An unknown commit fails the operation with Argo CD's message (dry run: no auto-sync check).
    let (status, _) = post_json(
        &s.base,
        "/api/v1/applications/web/sync",
        r#"{"revision":"0123456789abcdef0123456789abcdef01234567","dryRun":true}"#,
    )
    .await;
    assert_eq!(status, 200);
    let errored = app_where(&s.base, "web", "the unknown revision reported", |a| {
        a["status"]["operationState"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unable to resolve"))
    })
    .await;
    let op = &errored["status"]["operationState"];
    assert!(
        op["message"].as_str().unwrap().contains(
            "unable to resolve '0123456789abcdef0123456789abcdef01234567' to a commit SHA"
        ),
        "{op}"
    );
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_apply_is_retried_with_back_off_then_fails_and_is_not_retried_for_the_same_commit()
 {
    let (remote, _) = web_remote("nginx:1.27");
    let (mut config, log) = config(&remote.repo(), &["web=apps/web"]);
    config.retry_backoff = Duration::from_millis(100);
    config.rollout_time = Duration::ZERO;
    let s = start(config, log).await;
    let good = app(&s.base, "web").await;
    assert_eq!(
        good["spec"]["syncPolicy"]["retry"],
        serde_json::json!({"limit": 2, "backoff": {"duration": "100ms", "factor": 2, "maxDuration": "3600ms"}})
    );
    let mut events = Events::open(&s.base, "?name=web").await;
    events.next().await;

    let failing = web_manifests("nginx:1.28").replace(
        "  name: web\nspec:",
        "  name: web\n  annotations:\n    sandbox.greenlight.dev/apply: fail\nspec:",
    );
    remote.write("apps/web/web.yaml", &failing);
    let bad = remote.commit_push("web: an object the cluster refuses");
    let seen = events
        .until("the operation failed", |a| phase(a) == "Failed")
        .await;
    let ops: Vec<&Value> = seen
        .iter()
        .filter(|a| revision(a) == bad)
        .map(|a| &a["status"]["operationState"])
        .collect();
    // Back-off #1, retry start, back-off #2, retry start, Failed: each its own update.
    let backoffs: Vec<&&Value> = ops
        .iter()
        .filter(|op| {
            op["message"]
                .as_str()
                .is_some_and(|m| m.contains("Retrying attempt #"))
        })
        .collect();
    let first_backoff = ops
        .iter()
        .position(|op| {
            op["message"]
                .as_str()
                .is_some_and(|m| m.contains("Retrying attempt #1 at "))
        })
        .expect("a back-off");
    let backoff = ops[first_backoff];
    assert_eq!(backoff["phase"], "Running");
    assert!(backoff["finishedAt"].is_string(), "{backoff}");
    assert_eq!(backoff["retryCount"], 1);
    assert_eq!(backoff["syncResult"]["revision"], bad);
    let failed_result = backoff["syncResult"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "Deployment")
        .unwrap()
        .clone();
    assert_eq!(failed_result["status"], "SyncFailed");
    let retry_start = ops[first_backoff + 1];
    assert_eq!(retry_start["phase"], "Running");
    assert!(retry_start.get("finishedAt").is_none(), "{retry_start}");
    assert!(
        backoffs.iter().any(|op| op["message"]
            .as_str()
            .unwrap()
            .contains("Retrying attempt #2 at ")),
        "{ops:#?}"
    );
    let failed = seen.last().unwrap();
    let op = &failed["status"]["operationState"];
    let message = op["message"].as_str().unwrap();
    assert!(
        message.starts_with("one or more objects failed to apply, reason: ")
            && message.ends_with(" (retried 2 times)."),
        "{message}"
    );
    assert!(
        message.contains("sandbox.greenlight.dev/apply"),
        "{message}"
    );
    assert!(op["finishedAt"].is_string());
    assert_eq!(op["syncResult"]["revision"], bad);
    assert!(failed.get("operation").is_none());
    assert_eq!(history_len(failed), 1, "no history for a failed sync");

    // The refresh that follows: still OutOfSync, and auto-sync does not try that commit again.
    let after = events
        .until("the refresh", |a| {
            a["status"]["conditions"]
                .as_array()
                .is_some_and(|c| !c.is_empty())
        })
        .await;
    let after = after.last().unwrap();
    assert_eq!(sync_status(after), "OutOfSync");
    assert!(after.get("operation").is_none());
    let condition = &after["status"]["conditions"][0];
    assert_eq!(condition["type"], "SyncError");
    assert!(
        condition["message"].as_str().unwrap().starts_with(&format!(
            "Failed last sync attempt to [{bad}]: one or more objects failed to apply"
        )),
        "{condition}"
    );
    let (status, refreshed) = get(&s.base, "/api/v1/applications/web?refresh=normal").await;
    assert_eq!(status, 200);
    assert!(refreshed.get("operation").is_none());

    // A partial sync of what does apply: Succeeded, no history, still OutOfSync.
    let (status, _) = post_json(
        &s.base,
        "/api/v1/applications/web/sync",
        r#"{"resources":[{"kind":"Service","name":"web"}]}"#,
    )
    .await;
    assert_eq!(status, 200);
    let partial = events
        .until("the partial sync", |a| {
            a.get("operation").is_none()
                && phase(a) == "Succeeded"
                && a["status"]["operationState"]["operation"]["sync"]["resources"].is_array()
        })
        .await;
    let partial = partial.last().unwrap();
    assert_eq!(history_len(partial), 1);
    assert_eq!(sync_status(partial), "OutOfSync");

    // A new commit starts a new operation.
    remote.write("apps/web/web.yaml", &web_manifests("nginx:1.28"));
    let fixed = remote.commit_push("web: without the refusal");
    let done = events
        .until("the fix synced", |a| {
            synced_at(a, &fixed) && sync_status(a) == "Synced"
        })
        .await;
    let done = done.last().unwrap();
    assert_eq!(history_len(done), 2);
    assert!(done["status"].get("conditions").is_none());
    s.sandbox.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Source hydrator

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hydrator_app_has_a_source_hydrator_and_no_source() {
    let (remote, first) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=hydrator:apps/web"]);
    let s = start(config, log).await;
    let web = app(&s.base, "web").await;
    assert!(web["spec"].get("source").is_none(), "{}", web["spec"]);
    assert_eq!(
        web["spec"]["sourceHydrator"],
        serde_json::json!({
            "drySource": {"repoURL": remote.repo(), "path": "apps/web", "targetRevision": "main"},
            "syncSource": {"targetBranch": "environment/web", "path": "apps/web"},
        })
    );
    assert_eq!(
        web["status"]["sync"]["comparedTo"]["source"],
        serde_json::json!({"repoURL": remote.repo(), "path": "apps/web", "targetRevision": "environment/web"})
    );
    // The sandbox does not hydrate: the tracked branch's commits stand for the hydrated ones.
    assert_eq!(revision(&web), first);
    assert_eq!(sync_status(&web), "Synced");
    let message = "Cannot sync to main: auto-sync currently set to environment/web";
    let (status, answer) = post_json(
        &s.base,
        "/api/v1/applications/web/sync",
        r#"{"revision":"main"}"#,
    )
    .await;
    assert_eq!((status, answer["message"].as_str()), (400, Some(message)));
    s.sandbox.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// The stream as Argo CD's gateway writes it

/// Waits until the app's revision is `rev` and its operation for it is over, Synced.
async fn landed(base: &str, name: &str, rev: &str) -> Value {
    app_where(base, name, "the commit landed", |a| {
        synced_at(a, rev) && revision(a) == rev && sync_status(a) == "Synced"
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_sends_its_burst_before_subscribing_so_an_update_in_between_is_lost() {
    let (remote, _) = web_remote("nginx:1.27");
    let (mut config, log) = config(&remote.repo(), &["web=apps/web"]);
    config.rollout_time = Duration::ZERO;
    let gap = Duration::from_secs(4);
    config.stream_subscribe_delay = gap;
    let s = start(config, log).await;
    let opened = Instant::now();
    let mut events = Events::open(&s.base, "?name=web").await;
    assert_eq!(events.next().await.unwrap()["result"]["type"], "ADDED");

    // A whole sync lands between the burst and the subscription.
    remote.write("apps/web/web.yaml", &web_manifests("nginx:1.28"));
    let lost = remote.commit_push("in the gap");
    landed(&s.base, "web", &lost).await;
    assert!(
        opened.elapsed() < gap,
        "the commit took longer than the gap to land: nothing to conclude"
    );
    // Then README-only commits (one update each), one at a time, until one comes through.
    let deadline = Instant::now() + gap + WAIT;
    let mut marker = lost.clone();
    let first = loop {
        if let Ok(event) = events.rx.try_recv() {
            break event.expect("the stream is open");
        }
        assert!(Instant::now() < deadline, "no update ever came through");
        if revision(&app(&s.base, "web").await) == marker {
            remote.write("README.md", &format!("after {marker}\n"));
            marker = remote.commit_push("after the gap");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(first["result"]["type"], "MODIFIED");
    let application = &first["result"]["application"];
    assert_ne!(revision(application), lost, "an update of the gap was sent");
    assert_eq!(sync_status(application), "Synced");
    assert!(
        synced_at(application, &lost),
        "the gap's sync happened, unseen on this stream: {application}"
    );
    s.sandbox.shutdown().await;
}

/// An HTTP/1.1 stream read off a socket by hand, so that the test decides when (and whether)
/// anything is read: the status line and headers, and the de-chunked body.
struct Wire {
    socket: tokio::net::TcpStream,
    buf: Vec<u8>,
    pos: usize,
    head: Option<String>,
    body: Vec<u8>,
}

impl Wire {
    /// Connects with a small receive buffer (so that little waits in the kernel for a client
    /// that does not read) and sends `GET <path>`.
    async fn get(addr: std::net::SocketAddr, path: &str) -> Wire {
        use tokio::io::AsyncWriteExt as _;
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(16 * 1024).unwrap();
        let mut socket = socket.connect(addr).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\n\r\n");
        socket.write_all(request.as_bytes()).await.unwrap();
        Wire {
            socket,
            buf: Vec::new(),
            pos: 0,
            head: None,
            body: Vec::new(),
        }
    }

    async fn read_some(&mut self) -> bool {
        use tokio::io::AsyncReadExt as _;
        let mut chunk = vec![0u8; 64 * 1024];
        let n = tokio::time::timeout(WAIT, self.socket.read(&mut chunk))
            .await
            .expect("data within the timeout")
            .unwrap();
        self.buf.extend_from_slice(&chunk[..n]);
        self.decode();
        n > 0
    }

    /// Reads up to the end of the status line and headers.
    async fn head(&mut self) -> String {
        while self.head.is_none() {
            assert!(self.read_some().await, "closed before the headers");
        }
        self.head.clone().unwrap()
    }

    /// From now on, reads everything as it comes: the body's lines, parsed.
    fn into_events(mut self) -> Events {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                while let Some(nl) = self.body.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = self.body.drain(..=nl).collect();
                    let _ = tx.send(Some(
                        serde_json::from_slice(&line).expect("each line is JSON"),
                    ));
                }
                if !self.read_some().await {
                    break;
                }
            }
            let _ = tx.send(None);
        });
        Events { rx }
    }

    fn decode(&mut self) {
        let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
        if self.head.is_none() {
            let Some(end) = find(&self.buf, b"\r\n\r\n") else {
                return;
            };
            self.head = Some(String::from_utf8_lossy(&self.buf[..end]).into_owned());
            self.pos = end + 4;
        }
        loop {
            let rest = &self.buf[self.pos..];
            let Some(nl) = find(rest, b"\r\n") else {
                return;
            };
            let size =
                usize::from_str_radix(std::str::from_utf8(&rest[..nl]).unwrap(), 16).unwrap();
            if size == 0 || rest.len() < nl + 2 + size + 2 {
                return;
            }
            self.body.extend_from_slice(&rest[nl + 2..nl + 2 + size]);
            self.pos += nl + 2 + size + 2;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_client_does_not_read_loses_updates_silently() {
    // An app of a thousand objects: each update of it is a few hundred kB on the wire, so that
    // a client not reading soon fills what the sockets hold, then the stream's buffer.
    let remote = Remote::new("main");
    let mut manifests = deployment("big", "nginx:1");
    for i in 0..1000 {
        manifests.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings-{i}\n"
        ));
    }
    remote.write("apps/big/all.yaml", &manifests);
    remote.commit_push("big");
    let (mut config, log) = config(&remote.repo(), &["big=apps/big"]);
    config.rollout_time = Duration::ZERO;
    // Room for a whole sync (five updates) and one more.
    config.stream_buffer = 6;
    let s = start(config, log).await;
    let mut reading = Events::open(&s.base, "?name=big").await;
    assert_eq!(reading.next().await.unwrap()["result"]["type"], "ADDED");
    let mut idle = Wire::get(s.sandbox.addr(), "/api/v1/stream/applications?name=big").await;
    assert!(idle.head().await.starts_with("HTTP/1.1 200"));

    // Twelve syncs land while `idle` reads nothing; `reading` takes each as it comes.
    let mut commits = Vec::new();
    let mut kept = 0;
    for i in 2..14 {
        remote.write(
            "apps/big/all.yaml",
            &manifests.replace("nginx:1", &format!("nginx:{i}")),
        );
        let commit = remote.commit_push(&format!("big: nginx:{i}"));
        kept += reading
            .until("the sync", |a| {
                synced_at(a, &commit) && sync_status(a) == "Synced"
            })
            .await
            .len();
        commits.push(commit);
    }
    assert_eq!(
        kept,
        commits.len() * 5,
        "a client that reads gets every update"
    );

    // `idle` reads again: what the sockets and its buffer kept, then (one at a time, until one
    // comes through) README-only commits made from now on.
    let mut idle = idle.into_events();
    let mut seen: Vec<Value> = Vec::new();
    let mut markers: Vec<String> = Vec::new();
    let deadline = Instant::now() + WAIT;
    loop {
        while let Ok(event) = idle.rx.try_recv() {
            seen.push(event.expect("the stream is open")["result"]["application"].clone());
        }
        if seen
            .iter()
            .any(|a| markers.iter().any(|m| revision(a) == m))
        {
            break;
        }
        assert!(Instant::now() < deadline, "no update after reading again");
        let last = markers.last().cloned().unwrap_or_default();
        if markers.is_empty() || revision(&app(&s.base, "big").await) == last {
            remote.write("README.md", &format!("marker {}\n", markers.len()));
            markers.push(remote.commit_push("marker"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let of_the_syncs = seen
        .iter()
        .filter(|a| commits.iter().any(|c| revision(a) == c))
        .count();
    assert!(
        of_the_syncs < commits.len() * 5,
        "{of_the_syncs} of {} updates: none dropped",
        commits.len() * 5
    );
    // Silently: no error, no catch-up; what was dropped is not sent later, nothing twice.
    let versions: Vec<u64> = seen
        .iter()
        .map(|a| {
            a["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(versions.windows(2).all(|v| v[0] < v[1]), "{versions:?}");
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_identical_to_the_last_one_sent_for_its_app_is_not_sent_again() {
    let (remote, _) = web_remote("nginx:1.27");
    let (mut config, log) = config(&remote.repo(), &["web=apps/web"]);
    config.rollout_time = Duration::ZERO;
    let s = start(config, log).await;
    let fields = "?name=web&fields=result.type,result.application.metadata.name,result.application.status.sync.status";
    let mut events = Events::open(&s.base, fields).await;
    let message = |kind: &str, sync: &str| serde_json::json!({"result": {"type": kind, "application": {"metadata": {"name": "web"}, "status": {"sync": {"status": sync}}}}});
    assert_eq!(events.next().await.unwrap(), message("ADDED", "Synced"));
    for image in ["nginx:1.28", "nginx:1.29"] {
        // Five updates each: OutOfSync four times (comparison, operation, history, Succeeded),
        // then Synced. Selected down to the sync status, they are sent as two messages.
        remote.write("apps/web/web.yaml", &web_manifests(image));
        let commit = remote.commit_push(image);
        assert_eq!(
            events.next().await.unwrap(),
            message("MODIFIED", "OutOfSync")
        );
        assert_eq!(events.next().await.unwrap(), message("MODIFIED", "Synced"));
        landed(&s.base, "web", &commit).await;
    }
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_sends_no_headers_before_its_first_message() {
    let (remote, _) = web_remote("nginx:1.27");
    let (mut config, log) = config(&remote.repo(), &["web=apps/web"]);
    config.rollout_time = Duration::ZERO;
    let s = start(config, log).await;
    // Nothing visible: no status line, no headers, however long the client waits.
    for query in [
        "?name=nope",
        "?projects=elsewhere",
        "?project=elsewhere",
        "?name=web&appNamespace=elsewhere",
    ] {
        let answer = tokio::time::timeout(
            Duration::from_millis(300),
            client().get(stream_url(&s.base, query)).send(),
        )
        .await;
        assert!(answer.is_err(), "{query}: an answer before any message");
    }
    // `resourceVersion` skips the burst (it is no resume): the first message is the next update.
    let (_, list) = get(&s.base, "/api/v1/applications").await;
    let version = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut no_burst = tokio::spawn(
        client()
            .get(stream_url(&s.base, &format!("?resourceVersion={version}")))
            .send(),
    );
    // With a name the burst is sent, but an app older than resourceVersion is left out of it.
    let newer = version.parse::<u64>().unwrap() + 1;
    let mut filtered = tokio::spawn(
        client()
            .get(stream_url(
                &s.base,
                &format!("?name=web&resourceVersion={newer}"),
            ))
            .send(),
    );
    for waiting in [&mut no_burst, &mut filtered] {
        assert!(
            tokio::time::timeout(Duration::from_millis(300), waiting)
                .await
                .is_err(),
            "an answer before any message"
        );
    }
    remote.write("README.md", "news\n");
    let news = remote.commit_push("news");
    for waiting in [no_burst, filtered] {
        let response = tokio::time::timeout(WAIT, waiting)
            .await
            .expect("headers with the first message")
            .unwrap()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let mut events = Events::read(Box::pin(response.bytes_stream()), Vec::new());
        let first = events.next().await.unwrap();
        assert_eq!(first["result"]["type"], "MODIFIED", "no ADDED burst");
        assert_eq!(revision(&first["result"]["application"]), news);
    }
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_select_what_the_list_and_the_stream_carry() {
    let (remote, first) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web", "copy=apps/web"]);
    let s = start(config, log).await;
    let (_, all) = get(&s.base, "/api/v1/applications").await;
    let version = all["metadata"]["resourceVersion"].clone();

    // The list selects from Argo CD's fixed set of item fields; the list's metadata stays whole.
    // `items.status.sync.revision` is not in that set: it is not there.
    let (status, list) = get(
        &s.base,
        "/api/v1/applications?fields=metadata.resourceVersion,items.metadata.name,items.status.sync.status,items.status.sync.revision",
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        list,
        serde_json::json!({"metadata": {"resourceVersion": version}, "items": [
            {"metadata": {"name": "copy"}, "status": {"sync": {"status": "Synced"}}},
            {"metadata": {"name": "web"}, "status": {"sync": {"status": "Synced"}}},
        ]})
    );
    // A leading `-` excludes: every field of the set but those listed.
    let (_, list) = get(
        &s.base,
        "/api/v1/applications?name=web&fields=-items.status.resources,items.spec",
    )
    .await;
    let item = &list["items"][0];
    assert!(
        item.get("spec").is_none() && item["status"].get("resources").is_none(),
        "{item}"
    );
    assert_eq!(
        item["status"]["health"],
        all["items"][1]["status"]["health"]
    );
    assert_eq!(item["status"]["operationState"]["phase"], "Succeeded");
    assert_eq!(
        item["status"]["operationState"]["operation"]["sync"]["revision"], first,
        "Argo CD answers syncResult under this name"
    );
    assert!(item["status"]["sync"].get("revision").is_none(), "{item}");
    let (_, none) = get(
        &s.base,
        "/api/v1/applications?name=nope&fields=items.metadata.name",
    )
    .await;
    assert_eq!(none["items"], Value::Null);

    // The stream selects any path from the message's root, arrays walked through.
    let mut events = Events::open(
        &s.base,
        "?name=web&fields=result.type,result.application.metadata.name,result.application.status.resources.kind",
    )
    .await;
    assert_eq!(
        events.next().await.unwrap(),
        serde_json::json!({"result": {"type": "ADDED", "application": {
            "metadata": {"name": "web"},
            "status": {"resources": [{"kind": "ConfigMap"}, {"kind": "Service"}, {"kind": "Deployment"}]},
        }}})
    );
    let mut events = Events::open(
        &s.base,
        "?name=web&fields=-result.application.status,result.application.spec",
    )
    .await;
    let event = events.next().await.unwrap();
    let application = event["result"]["application"].as_object().unwrap();
    assert_eq!(
        application.keys().collect::<Vec<_>>(),
        ["apiVersion", "kind", "metadata"]
    );
    assert_eq!(event["result"]["type"], "ADDED");
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_app_tree_a_resource_only_health_change_is_not_an_update() {
    for version in ["3.5", "2.14"] {
        let remote = Remote::new("main");
        // `stuck` keeps the app Degraded whatever `web` does.
        remote.write(
            "apps/web/web.yaml",
            &format!(
                "{}---\n{}",
                deployment("web", "registry.local/web:1.0"),
                deployment("stuck", "registry.local/web:1.0").replace(
                    "  name: stuck\n",
                    "  name: stuck\n  annotations:\n    sandbox.greenlight.dev/health: Degraded\n"
                )
            ),
        );
        remote.commit_push("web and stuck");
        let dir = tempfile::tempdir().unwrap();
        let registry = dir.path().join("registry.txt");
        std::fs::write(&registry, "registry.local/web:1.0\n").unwrap();
        let (mut config, log) = config(&remote.repo(), &["web=apps/web"]);
        config.registry = Some(registry.clone());
        config.rollout_time = Duration::ZERO;
        config.argocd_version = version.parse().unwrap();
        let s = start(config, log).await;
        let web_health = |a: &Value| {
            a["status"]["resources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["kind"] == "Deployment" && r["name"] == "web")
                .unwrap()["health"]["status"]
                .clone()
        };
        let before = app_where(&s.base, "web", "web Healthy", |a| {
            web_health(a) == "Healthy"
        })
        .await;
        assert_eq!(health(&before), "Degraded");
        let mut events = Events::open(&s.base, "?name=web").await;
        assert_eq!(events.next().await.unwrap()["result"]["type"], "ADDED");

        // web's image goes away: web turns Degraded; the app was Degraded already.
        std::fs::write(&registry, "# nothing pushed\n").unwrap();
        let after = app_where(&s.base, "web", "web Degraded", |a| {
            web_health(a) == "Degraded"
        })
        .await;
        remote.write("README.md", "marker\n");
        let marker = remote.commit_push("marker");
        let seen = events.until("the marker", |a| revision(a) == marker).await;
        if version == "3.5" {
            assert_eq!(
                after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
                "{version}: no update of the Application"
            );
            assert_eq!(seen.len(), 1, "{version}: only the marker: {seen:?}");
            // The marker's message is re-filled with the tree's health as it is when sent.
            assert_eq!(web_health(&seen[0]), "Degraded");
        } else {
            assert_ne!(
                after["metadata"]["resourceVersion"],
                before["metadata"]["resourceVersion"]
            );
            assert_eq!(
                seen.len(),
                2,
                "{version}: the inline change, then the marker"
            );
            assert_eq!(web_health(&seen[0]), "Degraded");
            assert_eq!(health(&seen[0]), "Degraded");
        }
        s.sandbox.shutdown().await;
    }
}

// ---------------------------------------------------------------------------------------------
// Resource tree and managed resources

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resource_tree_shows_each_deployments_replica_set_and_pods() {
    let (remote, _) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    let (status, tree) = get(&s.base, "/api/v1/applications/web/resource-tree").await;
    assert_eq!(status, 200);
    assert_eq!(
        tree.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["nodes"],
        "empty orphanedNodes and hosts are left out, as Argo CD's omitempty does"
    );
    let nodes = tree["nodes"].as_array().unwrap();
    let of_kind = |kind: &str| {
        nodes
            .iter()
            .filter(|n| n["kind"] == kind)
            .collect::<Vec<_>>()
    };
    let deploy = node(&tree, "Deployment", "web");
    assert_eq!(deploy["health"]["status"], "Progressing");
    assert!(deploy.get("parentRefs").is_none());
    let rs = of_kind("ReplicaSet");
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0]["parentRefs"][0]["uid"], deploy["uid"]);
    assert_eq!(rs[0]["parentRefs"][0]["kind"], "Deployment");
    assert_eq!(
        rs[0]["health"],
        serde_json::json!({"status": "Progressing"})
    );
    let pods = of_kind("Pod");
    assert_eq!(pods.len(), 2, "one per replica");
    for pod in &pods {
        assert_eq!(pod["parentRefs"][0]["uid"], rs[0]["uid"]);
        assert_eq!(pod["parentRefs"][0]["name"], rs[0]["name"]);
        assert_eq!(pod["images"], serde_json::json!(["nginx:1.27"]));
        assert!(
            pod["name"]
                .as_str()
                .unwrap()
                .starts_with(rs[0]["name"].as_str().unwrap())
        );
    }
    assert!(
        node(&tree, "ConfigMap", "web-config")
            .get("health")
            .is_none()
    );
    assert_eq!(node(&tree, "Service", "web")["health"]["status"], "Healthy");
    // The children follow the Deployment's health.
    let tree = eventually("the rollout over", || async {
        let (_, tree) = get(&s.base, "/api/v1/applications/web/resource-tree").await;
        (node(&tree, "Deployment", "web")["health"]["status"] == "Healthy").then_some(tree)
    })
    .await;
    for n in tree["nodes"].as_array().unwrap() {
        if n["kind"] == "Pod" || n["kind"] == "ReplicaSet" {
            assert_eq!(n["health"], serde_json::json!({"status": "Healthy"}), "{n}");
        }
    }
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unschedulable_pods_are_pending_in_the_tree_and_the_scheduler_says_why_in_the_pod() {
    let no_gpu = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.";
    let remote = Remote::new("main");
    remote.write(
        "apps/web/web.yaml",
        &format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n  progressDeadlineSeconds: 2\n  template:\n    metadata:\n      annotations:\n        {}: '{no_gpu}'\n    spec:\n      containers:\n      - name: app\n        image: nginx:1.27\n",
            greenlight_sandbox::SCHEDULE_ANNOTATION
        ),
    );
    remote.commit_push("web, short of GPUs");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    let (status, tree) = get(&s.base, "/api/v1/applications/web/resource-tree").await;
    assert_eq!(status, 200, "{tree}");
    assert_eq!(
        node(&tree, "Deployment", "web")["health"],
        serde_json::json!({"status": "Progressing",
            "message": "Waiting for rollout to finish: 0 of 2 updated replicas are available..."})
    );
    let pods: Vec<Value> = tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "Pod")
        .cloned()
        .collect();
    assert_eq!(pods.len(), 2);
    for pod in &pods {
        assert_eq!(pod["health"], serde_json::json!({"status": "Progressing"}));
        assert_eq!(
            pod["info"][0],
            serde_json::json!({"name": "Status Reason", "value": "Pending"})
        );
    }
    // The scheduler's message is in the live Pod, as Argo CD's GetResource serves it.
    let pod_name = pods[0]["name"].as_str().unwrap();
    let (status, answer) = get(
        &s.base,
        &format!("/api/v1/applications/web/resource?namespace=default&resourceName={pod_name}&version=v1&kind=Pod&group="),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let manifest: Value = serde_json::from_str(answer["manifest"].as_str().unwrap()).unwrap();
    assert_eq!(manifest["status"]["phase"], "Pending");
    assert_eq!(
        manifest["status"]["conditions"][0]["reason"],
        "Unschedulable"
    );
    assert_eq!(manifest["status"]["conditions"][0]["message"], no_gpu);

    // Its progress deadline passes: Degraded, on the sandbox's own clock.
    let degraded = app_where(&s.base, "web", "the progress deadline", |a| {
        health(a) == "Degraded"
    })
    .await;
    assert_eq!(sync_status(&degraded), "Synced");
    let (_, tree) = get(&s.base, "/api/v1/applications/web/resource-tree").await;
    assert_eq!(
        node(&tree, "Deployment", "web")["health"]["message"],
        "Deployment \"web\" exceeded its progress deadline"
    );

    // What is not in the tree, and what the cluster does not have.
    let (status, answer) = get(
        &s.base,
        "/api/v1/applications/web/resource?namespace=default&resourceName=nope&version=v1&kind=Pod&group=",
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["code"], 3);
    assert_eq!(
        answer["message"],
        "Pod  nope not found as part of application web"
    );
    let (status, _) = get(
        &s.base,
        "/api/v1/applications/nope/resource?namespace=default&resourceName=web&kind=Deployment&group=apps",
    )
    .await;
    assert_eq!(status, 403);
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_resources_carry_the_objects_as_json_strings() {
    let remote = Remote::new("main");
    remote.write(
        "apps/web/web.yaml",
        &format!(
            "{}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  annotations:\n    sandbox.greenlight.dev/apply: fail\ndata:\n  a: b\n",
            deployment("web", "nginx:1.27").replace(
                "  name: web\n",
                "  name: web\n  annotations:\n    team: checkout\n"
            )
        ),
    );
    remote.commit_push("web and a ConfigMap that is never created");
    let (mut config, log) = config(&remote.repo(), &["web=apps/web"]);
    config.retry_backoff = Duration::from_millis(50);
    let s = start(config, log).await;
    // The operation fails (after its retries); the refresh after it compares again.
    app_where(&s.base, "web", "the operation failed", |a| {
        phase(a) == "Failed"
    })
    .await;
    let path = "/api/v1/applications/web/managed-resources";
    let (status, answer) = get(&s.base, path).await;
    assert_eq!(status, 200, "{answer}");
    let items = answer["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    let (cm, deploy) = (&items[0], &items[1]);
    for item in items {
        for absent in ["hook", "health", "diff"] {
            assert!(item.get(absent).is_none(), "{absent}: {item}");
        }
    }
    assert_eq!(
        (
            deploy["group"].as_str(),
            deploy["kind"].as_str(),
            deploy["namespace"].as_str(),
            deploy["name"].as_str()
        ),
        (
            Some("apps"),
            Some("Deployment"),
            Some("default"),
            Some("web")
        )
    );
    assert!(deploy.get("modified").is_none(), "in sync: {deploy}");
    let parse = |field: &str, item: &Value| -> Value {
        serde_json::from_str(
            item[field]
                .as_str()
                .unwrap_or_else(|| panic!("{field} is a string: {item}")),
        )
        .unwrap()
    };
    let live = parse("liveState", deploy);
    assert_eq!(
        live["metadata"]["annotations"],
        serde_json::json!({"team": "checkout"})
    );
    assert_eq!(live["metadata"]["namespace"], "default");
    assert_eq!(
        live["metadata"]["resourceVersion"].as_str(),
        deploy["resourceVersion"].as_str()
    );
    assert!(live["metadata"]["uid"].is_string());
    let target = parse("targetState", deploy);
    assert_eq!(target["spec"], live["spec"]);
    assert_eq!(parse("normalizedLiveState", deploy), live);
    assert_eq!(parse("predictedLiveState", deploy), live);
    // Not created: live "null", modified, no resourceVersion.
    assert_eq!(cm["kind"], "ConfigMap");
    assert!(cm.get("group").is_none());
    assert_eq!(cm["liveState"], "null");
    assert_eq!(cm["normalizedLiveState"], "null");
    assert_eq!(cm["modified"], true);
    assert!(cm.get("resourceVersion").is_none());
    assert_eq!(
        parse("targetState", cm)["data"],
        serde_json::json!({"a": "b"})
    );
    assert_eq!(parse("predictedLiveState", cm), parse("targetState", cm));

    // Narrowed by the resource's kind (or group, namespace, name); fields select.
    let (_, only) = get(&s.base, &format!("{path}?kind=ConfigMap")).await;
    assert_eq!(only["items"].as_array().unwrap().len(), 1);
    let (_, none) = get(&s.base, &format!("{path}?name=nothing")).await;
    assert_eq!(none, serde_json::json!({}));
    let (_, names) = get(&s.base, &format!("{path}?fields=items.name")).await;
    assert_eq!(
        names,
        serde_json::json!({"items": [{"name": "held"}, {"name": "web"}]})
    );
    // The same access rules as the other per-app routes.
    for (query, status) in [
        ("/api/v1/applications/nope/managed-resources", 403),
        (
            "/api/v1/applications/nope/managed-resources?project=default",
            404,
        ),
        (
            "/api/v1/applications/web/managed-resources?project=other",
            403,
        ),
        (
            "/api/v1/applications/web/managed-resources?appNamespace=other",
            403,
        ),
        (
            "/api/v1/applications/web/managed-resources?project=default",
            200,
        ),
    ] {
        assert_eq!(get(&s.base, query).await.0, status, "{query}");
    }
    s.sandbox.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Spec edits

/// `PATCH /api/v1/applications/{name}` with an `ApplicationPatchRequest` body as `argocd app
/// patch` sends it; the answer's status and body.
async fn patch_app(base: &str, name: &str, patch: &str, patch_type: &str) -> (u16, Value) {
    let body = serde_json::json!({"name": name, "patch": patch, "patchType": patch_type});
    patch_raw(base, name, &body.to_string()).await
}

async fn patch_raw(base: &str, name: &str, body: &str) -> (u16, Value) {
    let response = client()
        .patch(format!("{base}/api/v1/applications/{name}"))
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn resource_version(app: &Value) -> u64 {
    app["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_patch_is_published_in_get_the_list_and_the_stream_and_renders_nothing_new() {
    let (remote, _) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    let before = app_where(&s.base, "web", "Healthy", |a| health(a) == "Healthy").await;
    let mut events = Events::open(&s.base, "?name=web").await;
    events.next().await; // ADDED

    // A path app has `directory`: kustomize replaces it (two source types are refused).
    let images =
        r#"{"spec":{"source":{"directory":null,"kustomize":{"images":["web=nginx:1.27"]}}}}"#;
    let (status, answer) = patch_app(&s.base, "web", images, "merge").await;
    assert_eq!(status, 200, "{answer}");
    let kustomize = serde_json::json!({"images": ["web=nginx:1.27"]});
    assert_eq!(answer["metadata"]["name"], "web");
    assert_eq!(answer["spec"]["source"]["kustomize"], kustomize);
    assert!(answer["spec"]["source"].get("directory").is_none());
    assert_eq!(answer["spec"]["source"]["path"], "apps/web");
    assert!(resource_version(&answer) > resource_version(&before));
    assert_eq!(answer["status"]["sync"], before["status"]["sync"]);

    let seen = events
        .until("the edited spec on the stream", |a| {
            a["spec"]["source"]["kustomize"] == kustomize
        })
        .await;
    let streamed = seen.last().unwrap();
    assert_eq!(resource_version(streamed), resource_version(&answer));
    let got = app(&s.base, "web").await;
    assert_eq!(got["spec"], answer["spec"]);
    assert!(resource_version(&got) >= resource_version(&answer));
    let (_, list) = get(&s.base, "/api/v1/applications").await;
    assert_eq!(list["items"][0]["spec"], answer["spec"]);
    assert!(
        s.log
            .lock()
            .unwrap()
            .iter()
            .any(|l| l == "app web: spec updated by admin (merge patch)")
    );

    // A json patch (RFC 6902) edits it again; the sandbox still renders git as it is.
    let bump = r#"[{"op":"replace","path":"/spec/source/kustomize/images/0","value":"web=nginx:1.28"},
        {"op":"add","path":"/spec/info","value":[{"name":"owner","value":"team-a"}]}]"#;
    let (status, answer) = patch_app(&s.base, "web", bump, "json").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["spec"]["source"]["kustomize"]["images"],
        serde_json::json!(["web=nginx:1.28"])
    );
    assert_eq!(answer["spec"]["info"][0]["value"], "team-a");
    let got = app(&s.base, "web").await;
    assert_eq!(
        got["status"]["summary"]["images"],
        serde_json::json!(["nginx:1.27"])
    );
    assert_eq!(sync_status(&got), "Synced");
    assert_eq!(
        got["status"]["sync"]["comparedTo"]["source"]["directory"],
        serde_json::json!({"recurse": true}),
        "status names what the sandbox renders"
    );
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automated_sync_turned_off_by_a_patch_compares_new_commits_without_syncing_them() {
    let (remote, first) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    let off = r#"{"spec":{"syncPolicy":{"automated":null}}}"#;
    let (status, answer) = patch_app(&s.base, "web", off, "merge").await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer["spec"]["syncPolicy"].get("automated").is_none());
    assert_eq!(answer["spec"]["syncPolicy"]["retry"]["limit"], 2);

    remote.write("apps/web/web.yaml", &web_manifests("nginx:1.28"));
    let tip = remote.commit_push("web: 1.28");
    // Auto-sync would start in the same reconcile that compares the commit: seeing the
    // comparison without an operation means none was started.
    let compared = app_where(&s.base, "web", "the new commit compared", |a| {
        revision(a) == tip
    })
    .await;
    assert_eq!(sync_status(&compared), "OutOfSync");
    assert!(compared.get("operation").is_none(), "{compared}");
    assert_eq!(
        compared["status"]["operationState"]["syncResult"]["revision"],
        first
    );

    // Turned on again: Argo CD's controller refreshes the app, and auto-sync syncs it.
    let on = r#"[{"op":"add","path":"/spec/syncPolicy/automated","value":{"selfHeal":true}}]"#;
    let (status, answer) = patch_app(&s.base, "web", on, "json").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["spec"]["syncPolicy"]["automated"],
        serde_json::json!({"selfHeal": true})
    );
    let done = landed(&s.base, "web", &tip).await;
    assert_eq!(
        done["status"]["operationState"]["operation"]["initiatedBy"],
        serde_json::json!({"automated": true})
    );
    let log = s.log.lock().unwrap().join("\n");
    assert!(
        log.contains("spec updated by admin (merge patch); automated sync off"),
        "{log}"
    );
    assert!(
        log.contains("spec updated by admin (json patch); automated sync on"),
        "{log}"
    );
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_requests_are_refused_as_argo_cd_refuses_them() {
    let (remote, _) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    let before = app(&s.base, "web").await;
    let refused = |message: &str| {
        (
            400,
            serde_json::json!({"error": message, "code": 3, "message": message}),
        )
    };

    assert_eq!(
        patch_app(&s.base, "web", "{}", "strategic").await,
        refused("Patch type 'strategic' is not supported")
    );
    for (body, needle) in [
        ("{not json", "invalid patch request"),
        (r#"{"patch":{"spec":{}}}"#, "invalid patch request"),
        ("", "patch: missing"),
        (
            r#"{"patch":"{\"spec\":","patchType":"merge"}"#,
            "patch: not a JSON document",
        ),
        (
            r#"{"patch":"[]","patchType":"merge"}"#,
            "a merge patch must be a JSON object",
        ),
        (r#"{"patch":"{}"}"#, "a json patch must be a JSON array"),
        (
            r#"{"patch":"[{\"op\":\"remove\",\"path\":\"/spec/nope\"}]","patchType":"json"}"#,
            "patch: operation 0: /spec/nope: no such member",
        ),
        (
            r#"{"patch":"[{\"op\":\"merge\",\"path\":\"/spec\"}]","patchType":"json"}"#,
            "unknown op \"merge\"",
        ),
        (
            r#"{"patch":"{\"status\":{\"sync\":{\"status\":\"OutOfSync\"}}}","patchType":"merge"}"#,
            "the sandbox keeps only spec and metadata.annotations of a patched Application: this patch changes status.sync.status",
        ),
        (
            r#"{"patch":"{\"metadata\":{\"labels\":{\"team\":\"a\"}}}","patchType":"merge"}"#,
            "this patch changes metadata.labels",
        ),
        (
            r#"{"patch":"{\"spec\":{\"source\":{\"targetRevision\":\"release\"}}}","patchType":"merge"}"#,
            "spec.source.targetRevision cannot be changed in the sandbox",
        ),
        (
            r#"{"patch":"{\"spec\":{\"source\":{\"kustomize\":{}}}}","patchType":"merge"}"#,
            "application spec for web is invalid: InvalidSpecError: Unable to generate manifests in apps/web: rpc error: code = Unknown desc = multiple application sources defined: Kustomize,Directory",
        ),
    ] {
        let (status, answer) = patch_raw(&s.base, "web", body).await;
        assert_eq!(
            (status, &answer["code"]),
            (400, &serde_json::json!(3)),
            "{body}: {answer}"
        );
        let message = answer["message"].as_str().unwrap();
        assert!(message.contains(needle), "{body}: {message}");
        assert_eq!(answer["error"], answer["message"]);
    }

    // Unknown apps: as Get.
    let denied = serde_json::json!({"error": "permission denied", "code": 7, "message": "permission denied"});
    let ok_patch = r#"{"spec":{"info":[{"name":"a","value":"b"}]}}"#;
    assert_eq!(
        patch_app(&s.base, "nope", ok_patch, "merge").await,
        (403, denied.clone())
    );
    let in_default =
        serde_json::json!({"patch": ok_patch, "patchType": "merge", "project": "default"});
    let (status, answer) = patch_raw(&s.base, "nope", &in_default.to_string()).await;
    assert_eq!(
        (status, answer["code"].clone()),
        (404, serde_json::json!(5))
    );
    let elsewhere =
        serde_json::json!({"patch": ok_patch, "patchType": "merge", "appNamespace": "team-a"});
    assert_eq!(
        patch_raw(&s.base, "web", &elsewhere.to_string()).await,
        (403, denied)
    );
    assert_eq!(
        app(&s.base, "web").await["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"],
        "nothing refused was published"
    );
    s.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_sync_hook_runs_after_the_rollout_on_the_sandboxs_own_clock() {
    let (remote, _) = web_remote("nginx:1.27");
    let (mut config, log) = config(&remote.repo(), &["web=apps/web"]);
    config.rollout_time = Duration::from_millis(300);
    config.hook_time = Duration::from_millis(200);
    let s = start(config, log).await;
    let mut events = Events::open(&s.base, "?name=web").await;
    events.next().await;

    let hook = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: smoke\n  annotations:\n    argocd.argoproj.io/hook: PostSync\nspec:\n  template:\n    spec:\n      containers:\n      - name: smoke\n        image: curl:8\n      restartPolicy: Never\n";
    remote.write("apps/web/web.yaml", &web_manifests("nginx:1.28"));
    remote.write("apps/web/smoke.yaml", hook);
    let rev = remote.commit_push("web: 1.28 with a smoke test after the sync");
    let seen = events
        .until("the sync with its hook succeeded", |a| synced_at(a, &rev))
        .await;
    let messages: Vec<&str> = seen
        .iter()
        .filter(|a| a["status"]["operationState"]["syncResult"]["revision"] == rev.as_str())
        .filter_map(|a| a["status"]["operationState"]["message"].as_str())
        .collect();
    let waits_for = |m: &str| messages.iter().position(|x| *x == m);
    let healthy =
        waits_for("waiting for healthy state of /ConfigMap/web-config and 2 more resources")
            .or_else(|| waits_for("waiting for healthy state of apps/Deployment/web"))
            .unwrap_or_else(|| panic!("{messages:#?}"));
    let hook_running = waits_for("waiting for completion of hook batch/Job/smoke")
        .unwrap_or_else(|| panic!("{messages:#?}"));
    assert!(healthy < hook_running, "{messages:#?}");
    let done = seen.last().unwrap();
    let op = &done["status"]["operationState"];
    assert_eq!(op["message"], "successfully synced (no more tasks)");
    let job = op["syncResult"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "Job")
        .unwrap()
        .clone();
    assert_eq!(job["hookType"], "PostSync");
    assert_eq!(job["hookPhase"], "Succeeded");
    assert_eq!(history_len(done), 2);
    let refreshed = app_where(&s.base, "web", "the refresh", |a| {
        sync_status(a) == "Synced" && revision(a) == rev
    })
    .await;
    assert!(
        refreshed["status"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["kind"] != "Job"),
        "{refreshed}"
    );
    let lines = s.log.lock().unwrap().clone();
    assert!(
        lines
            .iter()
            .any(|l| l == "app web: PostSync hook job.batch/smoke succeeded"),
        "{lines:#?}"
    );
    s.sandbox.shutdown().await;
}

/// An ingress's default backend in front of the API for a while: every new request is `404`
/// with its one-line text (not Argo CD's error body), an open stream stays open, the control
/// API stays up, and Argo CD answers again afterwards.
#[tokio::test]
async fn the_default_backend_answers_404_to_every_api_request_for_a_while() {
    let (remote, _) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    let mut plain = Raw::read(open_raw(&s.base, "?name=web", "application/json").await);
    plain.until("the ADDED line", |t| t.contains('\n')).await;
    assert_eq!(
        post(&s.base, "/sandbox/v1/default-backend?seconds=1").await,
        200
    );
    for path in [
        "/api/v1/applications",
        "/api/v1/applications/web",
        "/api/v1/applications/web/resource-tree",
    ] {
        let response = client()
            .get(format!("{}{path}", s.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 404, "{path}");
        assert_eq!(
            response.text().await.unwrap(),
            "default backend - 404",
            "{path}"
        );
    }
    assert_eq!(
        post(&s.base, "/sandbox/v1/pause").await,
        200,
        "the control API stays up"
    );
    assert_eq!(post(&s.base, "/sandbox/v1/resume").await, 200);
    assert_eq!(
        post(&s.base, "/sandbox/v1/default-backend?seconds=x").await,
        400
    );
    eventually("Argo CD answering again", || async {
        (get(&s.base, "/api/v1/applications/web").await.0 == 200).then_some(())
    })
    .await;
    while let Ok(item) = plain.rx.try_recv() {
        assert!(item.is_some(), "the open stream ended: {:?}", plain.text);
    }
}

/// An app hidden from the token for a while, as after an RBAC change: left out of listings and
/// of the stream, 403 `permission denied` when asked for; seen again afterwards.
#[tokio::test]
async fn a_hidden_app_is_left_out_and_forbidden_for_a_while() {
    let (remote, _) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    assert_eq!(
        post(&s.base, "/sandbox/v1/hide?app=web&seconds=1").await,
        200
    );
    let (status, list) = get(&s.base, "/api/v1/applications").await;
    assert_eq!(status, 200);
    assert_eq!(list["items"], serde_json::json!([]), "{list}");
    let (status, body) = get(&s.base, "/api/v1/applications/web").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["code"], 7, "{body}");
    assert_eq!(post(&s.base, "/sandbox/v1/hide?app=web").await, 400);
    eventually("the app visible again", || async {
        (get(&s.base, "/api/v1/applications/web").await.0 == 200).then_some(())
    })
    .await;
}

/// A live resource held `Progressing` for a while, as an HPA scale-up holds a Deployment while
/// its new Pods start: the app, its tree and Get show it, the stream delivers the change when it
/// starts and when it ends on the sandbox's clock; bad requests are 400 naming the parameter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_held_progressing_shows_in_the_app_tree_and_stream_for_a_while() {
    let (remote, _) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    app_where(&s.base, "web", "web healthy", |a| health(a) == "Healthy").await;
    let mut events = Events::open(&s.base, "?name=web").await;
    let added = events.next().await.unwrap();
    assert_eq!(added["result"]["type"], "ADDED");
    let message = "Waiting for rollout to finish: 2 of 4 updated replicas are available...";
    let (status, answer) = post_json(
        &s.base,
        &format!(
            "/sandbox/v1/health?app=web&kind=Deployment&name=web&health=Progressing&seconds=1&message={}",
            message.replace(' ', "%20")
        ),
        "",
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let held = events
        .until("the hold", |a| health(a) == "Progressing")
        .await;
    let last = held.last().unwrap();
    let entry = last["status"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "Deployment")
        .unwrap();
    assert_eq!(
        entry["health"],
        serde_json::json!({"status": "Progressing", "message": message}),
        "the stream re-fills the held health"
    );
    let (_, tree) = get(&s.base, "/api/v1/applications/web/resource-tree").await;
    assert_eq!(
        node(&tree, "Deployment", "web")["health"]["status"],
        "Progressing"
    );
    assert_eq!(health(&app(&s.base, "web").await), "Progressing");
    // The end comes from the sandbox's clock, not from a request.
    let ended = events
        .until("the end of the hold", |a| health(a) == "Healthy")
        .await;
    assert_eq!(ended.len(), 1, "one update when it ends: {ended:#?}");
    let lines = s.log.lock().unwrap().clone();
    assert!(
        lines
            .iter()
            .any(|l| l == "app web: Deployment web held Progressing for 1s"),
        "{lines:#?}"
    );
    for (query, names) in [
        (
            "app=web&kind=Deployment&name=web&seconds=1",
            "health: missing",
        ),
        (
            "app=web&kind=Deployment&name=web&health=Fine&seconds=1",
            "health: \"Fine\" is not one of",
        ),
        (
            "app=web&kind=Deployment&name=web&health=Degraded&seconds=x",
            "seconds: expected a number",
        ),
        (
            "app=nope&kind=Deployment&name=web&health=Degraded&seconds=1",
            "app: no app named \"nope\"",
        ),
        (
            "app=web&kind=Deployment&name=api&health=Degraded&seconds=1",
            "kind, name: app web has no live Deployment named \"api\"",
        ),
    ] {
        let (status, body) = post_json(&s.base, &format!("/sandbox/v1/health?{query}"), "").await;
        assert_eq!(status, 400, "{query}: {body}");
        let error = body["error"].as_str().unwrap_or_default();
        assert!(error.starts_with(names), "{query}: {error}");
    }
    assert_eq!(health(&app(&s.base, "web").await), "Healthy");
    s.sandbox.shutdown().await;
}

async fn get_text(base: &str, path: &str) -> (u16, String) {
    let response = client().get(format!("{base}{path}")).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// A broken proxy or a misbehaving server for a while: the listing and/or reads answer 200 with
/// `{}` or an object whose `items` are 100000 nested arrays; the stream and the other answers are left alone, and Argo CD
/// answers again afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbled_answers_replace_the_listing_or_reads_for_a_while() {
    let (remote, _) = web_remote("nginx:1.27");
    let (config, log) = config(&remote.repo(), &["web=apps/web"]);
    let s = start(config, log).await;
    app_where(&s.base, "web", "web healthy", |a| health(a) == "Healthy").await;
    assert_eq!(
        post(
            &s.base,
            "/sandbox/v1/garble?what=no-items&on=listing&seconds=30"
        )
        .await,
        200
    );
    assert_eq!(
        get_text(&s.base, "/api/v1/applications").await,
        (200, "{}".to_string())
    );
    assert_eq!(
        health(&app(&s.base, "web").await),
        "Healthy",
        "reads answer"
    );
    assert_eq!(
        post(&s.base, "/sandbox/v1/garble?what=nested&on=reads&seconds=1").await,
        200,
        "a new garble replaces the last"
    );
    for path in [
        "/api/v1/applications/web",
        "/api/v1/applications/web/resource-tree",
    ] {
        let (status, body) = get_text(&s.base, path).await;
        assert_eq!(status, 200, "{path}");
        assert_eq!(body.len(), 200_010, "{path}");
        assert!(
            body.starts_with("{\"items\":[[[") && body.ends_with("]]]}"),
            "{path}"
        );
    }
    let (status, list) = get(&s.base, "/api/v1/applications").await;
    assert_eq!(status, 200);
    assert_eq!(list["items"][0]["metadata"]["name"], "web", "{list}");
    let mut events = Events::open(&s.base, "?name=web").await;
    assert_eq!(events.next().await.unwrap()["result"]["type"], "ADDED");
    for (query, names) in [
        ("seconds=1", "what: missing"),
        ("what=junk&seconds=1", "what: \"junk\" is not one of"),
        ("what=nested&on=stream&seconds=1", "on: expected one of"),
        ("what=nested", "seconds: missing"),
        ("what=nested&seconds=-1", "seconds: expected a number"),
    ] {
        let (status, body) = post_json(&s.base, &format!("/sandbox/v1/garble?{query}"), "").await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap_or_default()
                .starts_with(names),
            "{query}: {body}"
        );
    }
    // Garbled reads are 200 too: wait for an Application.
    let again = eventually("Argo CD answering reads again", || async {
        let (_, body) = get(&s.base, "/api/v1/applications/web").await;
        (body["metadata"]["name"] == "web").then_some(body)
    })
    .await;
    assert_eq!(health(&again), "Healthy");
    let lines = s.log.lock().unwrap().clone();
    assert!(
        lines.iter().any(|l| l
            == "sandbox: application reads are answered with 100000 nested arrays as items for 1s"),
        "{lines:#?}"
    );
    s.sandbox.shutdown().await;
}

/// The `status.resources[]` entry of `kind` (`Value::Null` when there is none).
fn resource_entry(app: &Value, kind: &str) -> Value {
    app["status"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["kind"] == kind)
        .cloned()
        .unwrap_or(Value::Null)
}

/// A human deletes a synced ConfigMap by hand (`kubectl delete`): Argo CD shows it `Missing` and
/// `OutOfSync` in `status.resources[]` and the tree, the app `OutOfSync`, and its health per
/// version (from 3.4 a resource that does not exist is left out: `Healthy`; before, `Missing`);
/// the stream delivers the change. Without selfHeal no operation re-creates it until the next
/// commit's sync does; with selfHeal a sync naming it re-creates it at once. Bad requests are
/// 400 naming the parameter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_deleted_by_hand_is_missing_until_a_sync_re_creates_it() {
    let (remote, _) = web_remote("nginx:1.27");
    for (version, app_health, image) in [
        ("3.5", "Healthy", "nginx:1.28"),
        ("2.14", "Missing", "nginx:1.29"),
    ] {
        let (mut config, log) = config(&remote.repo(), &["web=apps/web", "healed=apps/web"]);
        config.argocd_version = version.parse().unwrap();
        config.no_self_heal = vec!["web".into()];
        let s = start(config, log).await;
        let base = &s.base;
        app_where(base, "web", "web healthy", |a| health(a) == "Healthy").await;
        app_where(base, "healed", "healed healthy", |a| health(a) == "Healthy").await;
        let before = app(base, "web").await;
        assert_eq!(
            before["spec"]["syncPolicy"]["automated"]["selfHeal"], false,
            "{version}"
        );
        let tip = revision(&before).to_string();
        let mut events = Events::open(base, "?name=web").await;
        assert_eq!(events.next().await.unwrap()["result"]["type"], "ADDED");

        let (status, answer) = post_json(
            base,
            "/sandbox/v1/delete?app=web&kind=ConfigMap&name=web-config",
            "",
        )
        .await;
        assert_eq!(status, 200, "{version}: {answer}");
        let seen = events
            .until("the deletion", |a| sync_status(a) == "OutOfSync")
            .await;
        let streamed = seen.last().unwrap();
        let web = app(base, "web").await;
        for a in [streamed, &web] {
            assert_eq!(health(a), app_health, "{version}: {}", a["status"]);
            let entry = resource_entry(a, "ConfigMap");
            assert_eq!(entry["status"], "OutOfSync", "{version}: {entry}");
            assert_eq!(entry["health"]["status"], "Missing", "{version}: {entry}");
            assert!(entry.get("requiresPruning").is_none(), "{entry}");
            assert_eq!(
                resource_entry(a, "Deployment")["status"],
                "Synced",
                "{version}"
            );
        }
        let (_, tree) = get(base, "/api/v1/applications/web/resource-tree").await;
        let missing = node(&tree, "ConfigMap", "web-config");
        assert_eq!(missing["health"]["status"], "Missing", "{version}: {tree}");
        assert!(missing.get("uid").is_none(), "{version}: {missing}");
        // selfHeal off: Argo CD skips auto-sync (the most recent sync is already to this
        // commit); nothing re-creates it.
        assert!(synced_at(&web, &tip), "{version}: {}", web["status"]);
        assert_eq!(history_len(&web), 1, "{version}");
        assert!(web.get("operation").is_none(), "{version}");
        let lines = s.log.lock().unwrap().clone();
        assert!(
            lines
                .iter()
                .any(|l| l == "app web: ConfigMap web-config deleted by hand (kubectl delete)"),
            "{lines:#?}"
        );
        assert!(
            lines.iter().any(|l| l.starts_with("app web: OutOfSync at ")
                && l.ends_with("(auto-sync skipped: the most recent sync is already to this commit and selfHeal is off)")),
            "{lines:#?}"
        );
        // A refresh changes nothing: it stays Missing.
        let (_, refreshed) = get(base, "/api/v1/applications/web?refresh=normal").await;
        assert_eq!(sync_status(&refreshed), "OutOfSync", "{version}");
        assert_eq!(history_len(&refreshed), 1, "{version}");

        // selfHeal on: a sync naming what is not Synced re-creates it at once, no history.
        let (status, answer) = post_json(
            base,
            "/sandbox/v1/delete?app=healed&kind=ConfigMap&name=web-config&namespace=",
            "",
        )
        .await;
        assert_eq!(status, 200, "{version}: {answer}");
        let healed = app_where(base, "healed", "the self-heal", |a| {
            sync_status(a) == "Synced"
                && phase(a) == "Succeeded"
                && a["status"]["operationState"]["operation"]["sync"]["resources"].is_array()
        })
        .await;
        let op = &healed["status"]["operationState"]["operation"];
        assert_eq!(
            op["sync"]["resources"],
            serde_json::json!([{"kind": "ConfigMap", "name": "web-config"}]),
            "{version}: {op}"
        );
        assert_eq!(op["initiatedBy"], serde_json::json!({"automated": true}));
        assert_eq!(
            history_len(&healed),
            1,
            "{version}: a partial sync adds none"
        );
        assert_eq!(health(&healed), "Healthy", "{version}");

        // The next commit's sync re-creates it.
        remote.write("apps/web/web.yaml", &web_manifests(image));
        let next = remote.commit_push(&format!("web: {image}"));
        let web = app_where(base, "web", "the next commit's sync", |a| {
            synced_at(a, &next) && sync_status(a) == "Synced" && health(a) == "Healthy"
        })
        .await;
        let entry = resource_entry(&web, "ConfigMap");
        assert_eq!(entry["status"], "Synced", "{version}: {entry}");
        let (_, tree) = get(base, "/api/v1/applications/web/resource-tree").await;
        assert!(
            node(&tree, "ConfigMap", "web-config").get("uid").is_some(),
            "{version}: {tree}"
        );

        for (query, names) in [
            ("kind=ConfigMap&name=web-config", "app: missing"),
            ("app=web&name=web-config", "kind: missing"),
            ("app=web&kind=ConfigMap&name=%20", "name: missing"),
            (
                "app=nope&kind=ConfigMap&name=web-config",
                "app: no app named \"nope\"",
            ),
            (
                "app=web&kind=ConfigMap&name=api",
                "kind, name: app web has no live ConfigMap named \"api\"",
            ),
            (
                "app=web&kind=ConfigMap&name=web-config&namespace=other",
                "kind, name: app web has no live ConfigMap named \"web-config\" in namespace other",
            ),
        ] {
            let (status, body) = post_json(base, &format!("/sandbox/v1/delete?{query}"), "").await;
            assert_eq!(status, 400, "{query}: {body}");
            let error = body["error"].as_str().unwrap_or_default();
            assert!(error.starts_with(names), "{query}: {error}");
        }
        assert_eq!(sync_status(&app(base, "web").await), "Synced");
        s.sandbox.shutdown().await;
    }
}
