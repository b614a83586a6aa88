//! The client and the reduction against the real sandbox (greenlight's Argo CD stand-in),
//! started in process over a real git repository: list, get, resource tree and the stream, read
//! through this crate exactly as the watchdog reads them. Waits are bounded.

use futures_util::StreamExt;
use greenlight_argocd::{ArgoClient, needs_resource_tree, snapshot};
use greenlight_core::snapshot::{Health, ReachVia, ResourceHealthSource, SourceFacts, SourcePaths};
use greenlight_sandbox::{AppSpec, SandboxConfig};
use greenlight_testkit::Remote;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);
const TOKEN: &str = "sandbox-s3cret";

fn manifests(image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  template:\n    spec:\n      containers:\n      - name: app\n        image: {image}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n"
    )
}

/// Writes the web app at `image`, commits and pushes; returns the commit.
fn commit(remote: &Remote, image: &str, message: &str) -> String {
    remote
        .write("apps/web/web.yaml", &manifests(image))
        .commit_push(message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_read_through_the_client() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let remote = Remote::new("main");
    let good = commit(&remote, "ghcr.io/acme/web:1.0.0", "web: first deploy");

    let repo = remote.repo();
    let mut config = SandboxConfig::new(
        repo.clone(),
        "127.0.0.1:0".parse().unwrap(),
        vec![AppSpec::parse("web=apps/web").unwrap()],
    );
    config.sync_interval = Duration::from_millis(100);
    config.rollout_time = Duration::from_millis(300);
    config.token = Some(TOKEN.into());
    config.log = None;
    let sandbox = greenlight_sandbox::start(config)
        .await
        .expect("sandbox starts");
    let base = format!("http://{}", sandbox.addr());

    // Without the token: 401, said as such.
    let anonymous = ArgoClient::new(&base, None).unwrap();
    let err = anonymous.list().await.unwrap_err();
    assert_eq!(err.http_status(), Some(401), "{err}");

    let client = ArgoClient::new(&base, Some(TOKEN.into())).unwrap();
    let listed = client.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    let app = listed.into_iter().next().unwrap().unwrap();
    assert_eq!(
        (app.metadata.namespace.as_str(), app.metadata.name.as_str()),
        ("argocd", "web")
    );
    // Argo CD answers 403 for an app that does not exist, as for one the token may not see:
    // a read cannot tell absence, only a listing can.
    let err = client.get("argocd", "no-such-app").await.unwrap_err();
    assert_eq!(err.http_status(), Some(403), "{err}");
    assert!(
        err.to_string()
            .contains("the token lacks access, or the application does not exist"),
        "{err}"
    );

    // Watched as a file:// URL with a trailing slash: the same repository.
    let watched = format!("file://{repo}/");
    let reduce = |app: &greenlight_argocd::Application,
                  tree: Option<&greenlight_argocd::ResourceTree>| {
        snapshot(app, tree, &watched)
    };

    // The first commit is reached and becomes healthy; resource health comes from the tree.
    let deadline = Instant::now() + WAIT;
    let healthy = loop {
        let app = client
            .get("argocd", "web")
            .await
            .unwrap()
            .expect("web exists");
        let tree = if needs_resource_tree(&app) {
            client.resource_tree("argocd", "web").await.unwrap()
        } else {
            None
        };
        let s = reduce(&app, tree.as_ref());
        if s.health == Health::Healthy && s.reach_candidates.iter().any(|c| c.revision == good) {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "web never became Healthy at {good}: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    match &healthy.source {
        SourceFacts::FromRepo {
            target_revisions,
            revisions,
            paths,
            chart,
        } => {
            assert_eq!(target_revisions, &vec!["main".to_string()]);
            assert_eq!(chart, &None);
            assert!(revisions.contains(&good));
            assert_eq!(paths, &SourcePaths::Known(vec!["apps/web".into()]));
        }
        other => panic!("the sandbox app should deploy from the watched repo: {other:?}"),
    }
    assert_eq!(healthy.sync_status, "Synced");
    assert!(healthy.unhealthy_resources.is_empty());
    assert_ne!(
        healthy.resource_health_source,
        ResourceHealthSource::Unavailable
    );

    // A commit with an image that does not exist: followed through the stream until the
    // operation that applied it succeeded and the Deployment is Degraded.
    let mut events = Box::pin(client.stream().await.unwrap());
    let bad = commit(
        &remote,
        "ghcr.io/acme/web:does-not-exist",
        "web: broken image",
    );
    let deadline = Instant::now() + WAIT;
    let degraded = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let item = tokio::time::timeout(left, events.next())
            .await
            .unwrap_or_else(|_| panic!("no Degraded state for {bad} within {WAIT:?}"))
            .expect("the stream stays open");
        let event = match item.unwrap_or_else(|e| panic!("stream item: {e}")) {
            greenlight_argocd::StreamItem::Event(event) => *event,
            greenlight_argocd::StreamItem::Heartbeat => continue,
        };
        if event.application.metadata.name != "web" {
            continue;
        }
        let tree = if needs_resource_tree(&event.application) {
            client.resource_tree("argocd", "web").await.unwrap()
        } else {
            None
        };
        let s = reduce(&event.application, tree.as_ref());
        let applied = s
            .reach_candidates
            .iter()
            .any(|c| c.revision == bad && c.via == ReachVia::OperationSucceeded);
        if applied && s.health == Health::Degraded {
            break s;
        }
    };
    assert_eq!(
        degraded.unhealthy_resources.len(),
        1,
        "{:?}",
        degraded.unhealthy_resources
    );
    assert_eq!(degraded.unhealthy_resources[0].kind, "Deployment");
    assert_eq!(degraded.unhealthy_resources[0].name, "web");
    assert_eq!(degraded.unhealthy_resources[0].health, Health::Degraded);
    assert!(
        degraded.reach_candidates.iter().any(|c| c.revision == good),
        "the history keeps the first deploy"
    );

    sandbox.shutdown().await;
}
