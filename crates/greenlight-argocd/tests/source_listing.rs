//! `ArgoSource`'s safety-net listing against the real sandbox, through a proxy that keeps the
//! request lines: a watched app the stream delivered, unchanged since by the listing's status
//! fields while the stream was heard from within stale-after, is not read again; one the
//! stream did not show, or shows no longer (silent past stale-after), is read whole.

use greenlight_argocd::{ArgoClient, ArgoSource};
use greenlight_core::directive::AppRef;
use greenlight_core::source::{Origin, SourceMsg};
use greenlight_sandbox::{AppSpec, SandboxConfig};
use greenlight_testkit::Remote;
use greenlight_testkit::proxy::TcpProxy;
use std::time::Duration;
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(20);
const TOKEN: &str = "sandbox-s3cret";

fn manifests(image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  template:\n    spec:\n      containers:\n      - name: app\n        image: {image}\n"
    )
}

/// The next message, within [`WAIT`].
async fn next(rx: &mut mpsc::Receiver<SourceMsg>) -> SourceMsg {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("a message within the wait")
        .expect("the source is running")
}

/// Every message up to and including `Listed` for `ticket`.
async fn until_listed(rx: &mut mpsc::Receiver<SourceMsg>, ticket: u64) -> Vec<SourceMsg> {
    let mut got = Vec::new();
    loop {
        let msg = next(rx).await;
        let done = matches!(&msg, SourceMsg::Listed { ticket: t, .. } if *t == ticket);
        got.push(msg);
        if done {
            return got;
        }
    }
}

fn observed_by_listing(msgs: &[SourceMsg], ticket: u64) -> usize {
    msgs.iter()
        .filter(
            |m| matches!(m, SourceMsg::Observed { origin: Origin::Listing(t), .. } if *t == ticket),
        )
        .count()
}

/// Requests for web's Application (not the listing, not the stream) among `requests`.
fn reads_of_web(requests: &[String]) -> usize {
    requests
        .iter()
        .filter(|r| r.starts_with("GET /api/v1/applications/web"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_reads_only_the_watched_apps_the_live_stream_did_not_show_as_they_are() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let remote = Remote::new("main");
    remote
        .write("apps/web/web.yaml", &manifests("ghcr.io/acme/web:1.0.0"))
        .write("apps/api/web.yaml", &manifests("ghcr.io/acme/api:1.0.0"))
        .commit_push("first deploy");
    let repo = remote.repo();
    let mut config = SandboxConfig::new(
        repo.clone(),
        "127.0.0.1:0".parse().unwrap(),
        vec![
            AppSpec::parse("web=apps/web").unwrap(),
            AppSpec::parse("api=apps/api").unwrap(),
        ],
    );
    config.sync_interval = Duration::from_millis(100);
    config.rollout_time = Duration::from_millis(200);
    config.token = Some(TOKEN.into());
    // No heartbeat within the test: the stream is heard from only when an app changes.
    config.heartbeat = Duration::from_secs(3600);
    config.log = None;
    let sandbox = greenlight_sandbox::start(config)
        .await
        .expect("sandbox starts");
    let direct =
        ArgoClient::new(&format!("http://{}", sandbox.addr()), Some(TOKEN.into())).unwrap();
    // Both apps settle first: Healthy after their first sync.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let apps: Vec<_> = direct.list().await.unwrap().into_iter().flatten().collect();
        let settled = apps.len() == 2
            && apps.iter().all(|a| {
                a.status.health.status == "Healthy"
                    && a.status.sync.status == "Synced"
                    && a.status
                        .operation_state
                        .as_ref()
                        .is_some_and(|o| o.phase == "Succeeded")
            });
        if settled {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the apps never settled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let proxy = TcpProxy::start(sandbox.addr());
    let client = ArgoClient::new(&format!("http://{}", proxy.addr()), Some(TOKEN.into())).unwrap();
    let (tx, mut rx) = mpsc::channel(256);
    let mut source = ArgoSource::new(client.clone(), &repo, tx);
    source.set_stale_after(Duration::from_secs(30));
    let web = AppRef {
        namespace: Some("argocd".into()),
        name: "web".into(),
    };
    source.set_watched(vec![web.clone()]);
    source.start_stream();
    // The stream's burst: web delivered whole (the watched app), api glimpsed.
    assert!(matches!(next(&mut rx).await, SourceMsg::Connected));
    loop {
        match next(&mut rx).await {
            SourceMsg::Observed {
                snapshot,
                origin: Origin::Stream,
                ..
            } if snapshot.name == "web" => break,
            _ => continue,
        }
    }

    // Heard from just now, web as the listing shows it: the listing is one request.
    let before = proxy.requests().len();
    source.request_listing(1);
    let msgs = until_listed(&mut rx, 1).await;
    let asked = proxy.requests()[before..].to_vec();
    assert_eq!(observed_by_listing(&msgs, 1), 0, "{msgs:#?}");
    assert_eq!(reads_of_web(&asked), 0, "{asked:#?}");
    assert_eq!(
        asked
            .iter()
            .filter(|r| r.starts_with("GET /api/v1/applications?"))
            .count(),
        1,
        "{asked:#?}"
    );
    let Some(SourceMsg::Listed {
        present, complete, ..
    }) = msgs.last()
    else {
        unreachable!()
    };
    assert!(*complete);
    assert_eq!(present.len(), 2, "the listing still names every app");

    // The stream not heard from within stale-after: its word is no longer current, and the
    // listing reads web whole.
    source.set_stale_after(Duration::from_millis(300));
    tokio::time::sleep(Duration::from_millis(400)).await;
    let before = proxy.requests().len();
    source.request_listing(2);
    let msgs = until_listed(&mut rx, 2).await;
    assert_eq!(observed_by_listing(&msgs, 2), 1, "{msgs:#?}");
    assert_eq!(reads_of_web(&proxy.requests()[before..]), 1);

    // A source whose stream never ran has nothing to go by: the listing reads web.
    let (tx2, mut rx2) = mpsc::channel(256);
    let mut cold = ArgoSource::new(client, &repo, tx2);
    cold.set_stale_after(Duration::from_secs(30));
    cold.set_watched(vec![web]);
    let before = proxy.requests().len();
    cold.request_listing(3);
    let msgs = until_listed(&mut rx2, 3).await;
    assert_eq!(observed_by_listing(&msgs, 3), 1, "{msgs:#?}");
    assert_eq!(reads_of_web(&proxy.requests()[before..]), 1);
}
