//! The REST client against a small Argo CD-shaped server on 127.0.0.1 (axum), written here so
//! that every answer — malformed items, 404s, 401/503, a stream that breaks — is under the
//! test's control. Waits are bounded by timeouts; nothing sleeps hoping for an event.

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::StreamExt;
use greenlight_argocd::{ArgoClient, ArgoError, ClientOptions, EventKind, StreamEvent, StreamItem};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

const TOKEN: &str = "eyJhbGciOiJIUzI1NiJ9.s3cret-argocd-token";
const WAIT: Duration = Duration::from_secs(10);

fn provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn fixture(name: &str) -> serde_json::Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn app_json(name: &str) -> serde_json::Value {
    let mut v = fixture("synced-healthy.json");
    v["metadata"]["name"] = name.into();
    v
}

type Chunks = mpsc::UnboundedReceiver<Result<String, std::io::Error>>;

#[derive(Default)]
struct Fake {
    /// Every Authorization header received, in order (`None` when absent).
    auth: Mutex<Vec<Option<String>>>,
    /// Every query string received for a single app.
    queries: Mutex<Vec<HashMap<String, String>>>,
    /// The body of the next stream request, fed by the test.
    stream: Mutex<Option<Chunks>>,
    /// When set, every /api route answers this.
    fail_with: Mutex<Option<(StatusCode, String)>>,
    /// Every sync request's body, in order.
    syncs: Mutex<Vec<serde_json::Value>>,
}

type Shared = Arc<Fake>;

fn argo_error(status: StatusCode, message: &str, code: u32) -> Response {
    let body = serde_json::json!({"error": message, "code": code, "message": message});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Records the token and enforces it, as Argo CD does.
fn gate(fake: &Fake, headers: &HeaderMap) -> Option<Response> {
    let auth = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap().to_string());
    fake.auth.lock().unwrap().push(auth.clone());
    if let Some((status, body)) = fake.fail_with.lock().unwrap().clone() {
        return Some((status, body).into_response());
    }
    if auth.as_deref() != Some(&format!("Bearer {TOKEN}")) {
        return Some(argo_error(
            StatusCode::UNAUTHORIZED,
            "invalid session: token signature is invalid",
            16,
        ));
    }
    None
}

async fn list(
    State(fake): State<Shared>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Some(r) = gate(&fake, &headers) {
        return r;
    }
    fake.queries.lock().unwrap().push(q);
    let mut bad = app_json("broken");
    bad["status"]["history"][0]["id"] = "eight".into();
    let body = serde_json::json!({
        "metadata": {"resourceVersion": "184467"},
        "items": [app_json("web"), bad, app_json("api")]
    });
    axum::Json(body).into_response()
}

async fn one(
    State(fake): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Some(r) = gate(&fake, &headers) {
        return r;
    }
    fake.queries.lock().unwrap().push(q.clone());
    let in_argocd = q.get("appNamespace").is_none_or(|ns| ns == "argocd");
    match name.as_str() {
        "web" | "with space" if in_argocd => axum::Json(app_json(&name)).into_response(),
        "malformed" => {
            let mut v = app_json("malformed");
            v["status"]["operationState"]["startedAt"] = serde_json::json!(17);
            axum::Json(v).into_response()
        }
        _ => argo_error(
            StatusCode::NOT_FOUND,
            &format!("applications.argoproj.io \"{name}\" not found"),
            5,
        ),
    }
}

async fn tree(
    State(fake): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    if let Some(r) = gate(&fake, &headers) {
        return r;
    }
    if name == "nav-canary" {
        axum::Json(fixture("apptree-resource-tree.json")).into_response()
    } else {
        argo_error(StatusCode::NOT_FOUND, "not found", 5)
    }
}

async fn stream(State(fake): State<Shared>, headers: HeaderMap) -> Response {
    if let Some(r) = gate(&fake, &headers) {
        return r;
    }
    let Some(rx) = fake.stream.lock().unwrap().take() else {
        return argo_error(StatusCode::SERVICE_UNAVAILABLE, "no stream prepared", 14);
    };
    let chunks =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(chunks))
        .unwrap()
}

/// `POST …/sync`: records the body; `busy` answers as Argo CD does while an operation is set.
async fn sync(
    State(fake): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: String,
) -> Response {
    if let Some(r) = gate(&fake, &headers) {
        return r;
    }
    let parsed: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    fake.syncs.lock().unwrap().push(parsed.clone());
    match name.as_str() {
        "web" => {
            let mut app = app_json("web");
            app["operation"] =
                serde_json::json!({"sync": {"dryRun": parsed["dryRun"], "prune": parsed["prune"]}});
            axum::Json(app).into_response()
        }
        "busy" => argo_error(
            StatusCode::BAD_REQUEST,
            "another operation is already in progress",
            9,
        ),
        _ => argo_error(StatusCode::NOT_FOUND, "not found", 5),
    }
}

/// A route that never answers, for timeouts.
async fn hang() -> Response {
    std::future::pending::<()>().await;
    unreachable!()
}

async fn serve(fake: Shared) -> SocketAddr {
    let app = Router::new()
        .route("/api/v1/applications", get(list))
        .route("/api/v1/applications/{name}", get(one))
        .route("/api/v1/applications/{name}/resource-tree", get(tree))
        .route(
            "/api/v1/applications/{name}/sync",
            axum::routing::post(sync),
        )
        .route("/api/v1/stream/applications", get(stream))
        .route("/slow/api/v1/applications/{name}", get(hang))
        .with_state(fake);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

async fn setup() -> (Shared, String, ArgoClient) {
    provider();
    let fake: Shared = Arc::default();
    let addr = serve(fake.clone()).await;
    let base = format!("http://{addr}");
    let client = ArgoClient::new(&base, Some(TOKEN.to_string())).unwrap();
    (fake, base, client)
}

fn assert_no_token(text: &str) {
    assert!(!text.contains("s3cret"), "the token leaked: {text}");
}

#[tokio::test]
async fn list_reports_a_malformed_item_in_place_and_keeps_the_others() {
    let (fake, base, client) = setup().await;
    let items = client.list().await.unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(items[0].as_ref().unwrap().metadata.name, "web");
    assert_eq!(items[2].as_ref().unwrap().metadata.name, "api");
    let err = items[1].as_ref().unwrap_err();
    assert_eq!(err.index, 1);
    assert_eq!(err.name.as_deref(), Some("broken"));
    assert_eq!(err.error.path, "status.history[0].id");
    assert_eq!(
        err.to_string().split(':').next().unwrap(),
        "items[1] (application \"broken\")"
    );
    assert!(
        err.to_string().contains("`items[1].status.history[0].id`"),
        "{err}"
    );
    // The token went out as a bearer token.
    assert_eq!(
        fake.auth.lock().unwrap().as_slice(),
        &[Some(format!("Bearer {TOKEN}"))]
    );
    let _ = base;
}

#[tokio::test]
async fn list_asks_only_for_the_fields_greenlight_reads() {
    let (fake, _, client) = setup().await;
    client.list().await.unwrap();
    let queries = fake.queries.lock().unwrap().clone();
    let fields = queries[0].get("fields").expect("a fields= selection");
    let asked: Vec<&str> = fields.split(',').collect();
    // Names and the status fields that show a change: Argo CD's list selects from a fixed set
    // of item fields, without resource versions, revisions or history, so a watched app that
    // changed is read in full.
    assert_eq!(
        asked,
        vec![
            "items.metadata.name",
            "items.metadata.namespace",
            "items.status.sync.status",
            "items.status.health",
            "items.status.operationState.phase",
            "items.status.operationState.startedAt",
            "items.status.operationState.finishedAt",
        ]
    );
}

#[tokio::test]
async fn a_listing_past_the_bound_is_refused_as_too_large_not_read() {
    provider();
    // 2 MiB of applications, against a bound of 1 MiB: refused whether or not the server says
    // its length up front.
    let big: Vec<serde_json::Value> = (0..2000)
        .map(|i| {
            let mut a = app_json(&format!("app-{i}"));
            a["metadata"]["annotations"] = serde_json::json!({"note": "x".repeat(1000)});
            a
        })
        .collect();
    let body = serde_json::json!({"metadata": {}, "items": big}).to_string();
    assert!(body.len() > 2 << 20);
    let fits = body.len() + 1;
    let chunked = body.clone();
    let app = Router::new()
        .route(
            "/known/api/v1/applications",
            get(move || {
                let body = body.clone();
                async move { ([(header::CONTENT_TYPE, "application/json")], body) }
            }),
        )
        .route(
            "/chunked/api/v1/applications",
            get(move || {
                let body = chunked.clone();
                async move { in_chunks(&body) }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    for base in ["known", "chunked"] {
        let opts = ClientOptions {
            max_listing_bytes: 1 << 20,
            ..ClientOptions::default()
        };
        let client =
            ArgoClient::with_options(&format!("http://{addr}/{base}"), None, opts).unwrap();
        let err = client.list().await.unwrap_err();
        assert!(matches!(err, ArgoError::TooLarge { .. }), "{base}: {err}");
        assert!(err.to_string().contains("exceeds 1 MiB"), "{err}");
        // Within the bound, the same listing reads.
        let opts = ClientOptions {
            max_listing_bytes: fits,
            ..ClientOptions::default()
        };
        let client =
            ArgoClient::with_options(&format!("http://{addr}/{base}"), None, opts).unwrap();
        assert_eq!(client.list().await.unwrap().len(), 2000, "{base}");
    }
}

#[tokio::test]
async fn list_with_null_items_is_empty() {
    provider();
    let app = Router::new().route(
        "/api/v1/applications",
        get(|| async {
            (
                [(header::CONTENT_TYPE, "application/json")],
                r#"{"metadata":{},"items":null}"#,
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = ArgoClient::new(&format!("http://{addr}"), None).unwrap();
    assert!(client.list().await.unwrap().is_empty());
}

/// A body without `items` (`{}`, a proxy's answer) is not an Application list: an error naming
/// the field, never "no applications" (which would make every watched app absent).
#[tokio::test]
async fn a_list_body_without_items_is_refused() {
    provider();
    let app = Router::new().route(
        "/api/v1/applications",
        get(|| async { ([(header::CONTENT_TYPE, "application/json")], "{}") }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = ArgoClient::new(&format!("http://{addr}"), None).unwrap();
    let err = client.list().await.unwrap_err().to_string();
    assert!(err.contains("no `items` field"), "{err}");
}

/// A read answered by a broken proxy with `{}`, or with another app, is no observation of the
/// app asked for: refused, naming why (`{}` would decode as an Application without a name).
#[tokio::test]
async fn a_read_answering_something_other_than_the_app_is_refused() {
    provider();
    let app = Router::new()
        .route(
            "/api/v1/applications/web",
            get(|| async { ([(header::CONTENT_TYPE, "application/json")], "{}") }),
        )
        .route(
            "/api/v1/applications/api",
            get(|| async { axum::Json(app_json("web")) }),
        )
        .route(
            "/api/v1/applications/deep",
            get(|| async {
                let body = format!(
                    "{{\"items\":{}{}}}",
                    "[".repeat(100_000),
                    "]".repeat(100_000)
                );
                ([(header::CONTENT_TYPE, "application/json")], body)
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = ArgoClient::new(&format!("http://{addr}"), None).unwrap();
    for (asked, names) in [("web", "\"\""), ("api", "\"web\""), ("deep", "\"\"")] {
        match client.get("argocd", asked).await {
            Err(ArgoError::Decode { path, message, .. }) => {
                assert_eq!(path, "metadata", "{asked}");
                assert!(
                    message.starts_with(&format!(
                        "the answer is not Application {asked:?} but names {names}"
                    )),
                    "{asked}: {message}"
                );
            }
            other => panic!("{asked}: {other:?}"),
        }
    }
    // The app in another namespace than asked for.
    let mut other_ns = app_json("web");
    other_ns["metadata"]["namespace"] = "team-a".into();
    let app = Router::new().route(
        "/api/v1/applications/web",
        get(move || {
            let body = other_ns.clone();
            async move { axum::Json(body) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = ArgoClient::new(&format!("http://{addr}"), None).unwrap();
    let err = client.get("argocd", "web").await.unwrap_err().to_string();
    assert!(
        err.contains("in namespace \"team-a\", not \"argocd\""),
        "{err}"
    );
    assert!(
        client.get("", "web").await.unwrap().is_some(),
        "no namespace asked for"
    );
}

#[tokio::test]
async fn get_finds_an_app_and_404_is_none() {
    let (fake, base, client) = setup().await;
    let app = client.get("argocd", "web").await.unwrap().unwrap();
    assert_eq!(app.metadata.name, "web");
    assert_eq!(app.status.sync.status, "Synced");
    // Names are one path segment, however they are spelled.
    assert_eq!(
        client
            .get("", "with space")
            .await
            .unwrap()
            .unwrap()
            .metadata
            .name,
        "with space"
    );
    assert!(client.get("argocd", "nope").await.unwrap().is_none());
    // An empty name would address the list endpoint: refused before any request.
    assert!(matches!(
        client.get("argocd", "").await,
        Err(ArgoError::EmptyName)
    ));
    assert!(matches!(
        client.resource_tree("argocd", "").await,
        Err(ArgoError::EmptyName)
    ));
    assert!(
        client.get("other-ns", "web").await.unwrap().is_none(),
        "appNamespace is sent"
    );
    let queries = fake.queries.lock().unwrap().clone();
    assert_eq!(
        queries[0].get("appNamespace").map(String::as_str),
        Some("argocd")
    );
    assert_eq!(
        queries[1].get("appNamespace"),
        None,
        "an empty namespace is left out"
    );
    let _ = base;
}

#[tokio::test]
async fn a_malformed_app_names_the_json_path_and_endpoint() {
    let (_, base, client) = setup().await;
    let err = client.get("argocd", "malformed").await.unwrap_err();
    match &err {
        ArgoError::Decode { endpoint, path, .. } => {
            assert_eq!(
                endpoint,
                &format!("{base}/api/v1/applications/malformed?appNamespace=argocd")
            );
            assert_eq!(path, "status.operationState.startedAt");
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn resource_tree_and_its_404() {
    let (_, _, client) = setup().await;
    let tree = client
        .resource_tree("argocd", "nav-canary")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(tree.nodes.len(), 6);
    assert!(
        tree.nodes
            .iter()
            .any(|n| n.kind == "Pod" && !n.parent_refs.is_empty())
    );
    assert!(
        client
            .resource_tree("argocd", "nope")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn a_wrong_or_missing_token_is_401_with_argo_cds_message() {
    provider();
    let fake: Shared = Arc::default();
    let addr = serve(fake.clone()).await;
    let base = format!("http://{addr}");
    for token in [Some("wrong-s3cret".to_string()), None] {
        let client = ArgoClient::new(&base, token).unwrap();
        let err = client.get("argocd", "web").await.unwrap_err();
        assert_eq!(err.http_status(), Some(401));
        let text = err.to_string();
        assert_eq!(
            text,
            format!(
                "GET {base}/api/v1/applications/web?appNamespace=argocd: HTTP 401 Unauthorized: \
                 invalid session: token signature is invalid (the API token is missing, expired or wrong)"
            )
        );
        assert_no_token(&text);
        assert_no_token(&format!("{err:?}"));
    }
    let seen = fake.auth.lock().unwrap().clone();
    assert_eq!(seen, vec![Some("Bearer wrong-s3cret".to_string()), None]);
}

#[tokio::test]
async fn a_503_says_what_the_server_said() {
    let (fake, base, client) = setup().await;
    *fake.fail_with.lock().unwrap() = Some((
        StatusCode::SERVICE_UNAVAILABLE,
        "upstream connect error or disconnect/reset before headers".into(),
    ));
    for err in [
        client.list().await.unwrap_err(),
        client.get("argocd", "web").await.unwrap_err(),
        client.resource_tree("argocd", "web").await.unwrap_err(),
        client.stream().await.map(|_| ()).unwrap_err(),
    ] {
        assert_eq!(err.http_status(), Some(503), "{err}");
        let text = err.to_string();
        assert!(text.starts_with(&format!("GET {base}/api/v1/")), "{text}");
        assert!(
            text.contains("HTTP 503 Service Unavailable: upstream connect error"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn a_server_that_does_not_answer_times_out() {
    let (_, base, _) = setup().await;
    let opts = ClientOptions {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_millis(300),
        ..ClientOptions::default()
    };
    let client = ArgoClient::with_options(&format!("{base}/slow"), None, opts).unwrap();
    let started = std::time::Instant::now();
    let err = tokio::time::timeout(WAIT, client.get("argocd", "web"))
        .await
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, ArgoError::Timeout { .. }), "{err}");
    assert!(
        err.to_string().contains("no response within 300ms"),
        "{err}"
    );
    assert!(started.elapsed() < WAIT);
}

#[tokio::test]
async fn nothing_listening_is_a_transport_error_naming_the_endpoint() {
    provider();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let client = ArgoClient::new(&format!("http://{addr}"), Some(TOKEN.into())).unwrap();
    let err = client.list().await.unwrap_err();
    assert!(matches!(err, ArgoError::Transport { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("GET http://{addr}/api/v1/applications?fields=…: ")),
        "{text}"
    );
    assert!(
        text.contains("cannot connect: Connection refused"),
        "{text}"
    );
    assert_no_token(&text);
}

/// The next event or error, past heartbeats.
async fn next_item(
    s: &mut (impl futures_util::Stream<Item = Result<StreamItem, ArgoError>> + Unpin),
) -> Option<Result<StreamEvent, ArgoError>> {
    loop {
        let item = tokio::time::timeout(WAIT, s.next())
            .await
            .expect("the stream produced nothing in time");
        match item {
            Some(Ok(StreamItem::Heartbeat)) => continue,
            Some(Ok(StreamItem::Event(e))) => return Some(Ok(*e)),
            Some(Err(e)) => return Some(Err(e)),
            None => return None,
        }
    }
}

fn line(kind: &str, name: &str) -> String {
    serde_json::json!({"result": {"type": kind, "application": app_json(name)}}).to_string() + "\n"
}

#[tokio::test]
async fn stream_events_errors_and_the_end() {
    let (fake, _, client) = setup().await;
    let (tx, rx) = mpsc::unbounded_channel();
    *fake.stream.lock().unwrap() = Some(rx);
    let mut events = Box::pin(client.stream().await.unwrap());

    tx.send(Ok(line("ADDED", "web"))).unwrap();
    let e = next_item(&mut events).await.unwrap().unwrap();
    assert_eq!(
        (e.kind, e.application.metadata.name.as_str()),
        (EventKind::Added, "web")
    );

    // One message split across chunks, a keepalive, and two messages in one chunk.
    let modified = line("MODIFIED", "api");
    let (a, b) = modified.split_at(modified.len() / 2);
    tx.send(Ok(a.to_string())).unwrap();
    tx.send(Ok(format!(
        "{b}\n{}{}",
        line("MODIFIED", "web"),
        line("BOOKMARK", "x")
    )))
    .unwrap();
    let e = next_item(&mut events).await.unwrap().unwrap();
    assert_eq!(
        (e.kind, e.application.metadata.name.as_str()),
        (EventKind::Modified, "api")
    );
    let e = next_item(&mut events).await.unwrap().unwrap();
    assert_eq!(
        (e.kind, e.application.metadata.name.as_str()),
        (EventKind::Modified, "web")
    );
    let e = next_item(&mut events).await.unwrap().unwrap();
    assert_eq!(e.kind, EventKind::Other("BOOKMARK".into()));

    // Argo CD reports an error in the stream; the stream goes on.
    tx.send(Ok(
        r#"{"error":{"grpc_code":2,"http_code":500,"message":"application controller is unreachable","http_status":"Internal Server Error"}}"#
            .to_string()
            + "\n",
    ))
    .unwrap();
    match next_item(&mut events).await.unwrap().unwrap_err() {
        ArgoError::Stream { message, .. } => {
            assert_eq!(message, "application controller is unreachable")
        }
        other => panic!("{other}"),
    }

    // A malformed application is an error item, and the next event still arrives.
    let mut bad = app_json("bad");
    bad["spec"]["sources"] = serde_json::json!({"not": "a list"});
    tx.send(Ok(
        serde_json::json!({"result": {"type": "MODIFIED", "application": bad}}).to_string() + "\n",
    ))
    .unwrap();
    match next_item(&mut events).await.unwrap().unwrap_err() {
        ArgoError::Decode { path, .. } => assert_eq!(path, "result.application.spec.sources"),
        other => panic!("{other}"),
    }

    // The last message without a trailing newline, then the server closes: the end.
    let last = line("DELETED", "api");
    tx.send(Ok(last.trim_end().to_string())).unwrap();
    drop(tx);
    let e = next_item(&mut events).await.unwrap().unwrap();
    assert_eq!(
        (e.kind, e.application.metadata.name.as_str()),
        (EventKind::Deleted, "api")
    );
    assert!(
        next_item(&mut events).await.is_none(),
        "the server closed: the stream ends"
    );
    assert_eq!(
        fake.auth.lock().unwrap().last().cloned().flatten(),
        Some(format!("Bearer {TOKEN}"))
    );
}

#[tokio::test]
async fn a_broken_stream_ends_with_an_error() {
    let (fake, _, client) = setup().await;
    let (tx, rx) = mpsc::unbounded_channel();
    *fake.stream.lock().unwrap() = Some(rx);
    let mut events = Box::pin(client.stream().await.unwrap());
    tx.send(Ok(line("ADDED", "web"))).unwrap();
    assert!(next_item(&mut events).await.unwrap().is_ok());
    // Half a message, then the connection is cut.
    tx.send(Ok(r#"{"result":{"type":"MODIFIED","appli"#.to_string()))
        .unwrap();
    tx.send(Err(std::io::Error::other("cut"))).unwrap();
    let err = next_item(&mut events).await.unwrap().unwrap_err();
    assert!(matches!(err, ArgoError::Transport { .. }), "{err}");
    assert!(err.to_string().contains("the stream broke"), "{err}");
    assert!(next_item(&mut events).await.is_none());
}

#[tokio::test]
async fn an_idle_stream_is_not_timed_out() {
    provider();
    let fake: Shared = Arc::default();
    let addr = serve(fake.clone()).await;
    let opts = ClientOptions {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_millis(200),
        ..ClientOptions::default()
    };
    let client =
        ArgoClient::with_options(&format!("http://{addr}"), Some(TOKEN.into()), opts).unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    *fake.stream.lock().unwrap() = Some(rx);
    let mut events = Box::pin(client.stream().await.unwrap());
    tx.send(Ok(line("ADDED", "web"))).unwrap();
    assert!(next_item(&mut events).await.unwrap().is_ok());
    // Silence for three request timeouts: Argo CD's plain stream sends nothing while nothing
    // changes, and that is not a failure.
    tokio::time::sleep(Duration::from_millis(600)).await;
    tx.send(Ok(line("MODIFIED", "web"))).unwrap();
    let e = next_item(&mut events).await.unwrap().unwrap();
    assert_eq!(e.kind, EventKind::Modified);
}

#[tokio::test]
async fn the_only_sync_the_client_requests_is_a_dry_run_with_prune() {
    let (fake, base, client) = setup().await;
    let app = client
        .request_dry_run_prune("argocd", "web")
        .await
        .unwrap()
        .expect("the Application with its operation");
    assert_eq!(app.metadata.name, "web");
    assert_eq!(
        app.operation.unwrap()["sync"],
        serde_json::json!({"dryRun": true, "prune": true})
    );
    assert_eq!(
        fake.syncs.lock().unwrap()[0],
        serde_json::json!({"name": "web", "appNamespace": "argocd", "dryRun": true, "prune": true})
    );
    assert!(
        client
            .request_dry_run_prune("", "gone")
            .await
            .unwrap()
            .is_none()
    );
    // Argo CD's refusal while an operation is under way: a POST error with its words.
    let e = client.request_dry_run_prune("", "busy").await.unwrap_err();
    assert_eq!(e.http_status(), Some(400));
    assert_eq!(
        e.argo_message(),
        Some("another operation is already in progress")
    );
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "POST {base}/api/v1/applications/busy/sync: HTTP 400"
        )),
        "{text}"
    );
    assert_no_token(&text);
    // Unreachable: said of the POST, not of a GET.
    let closed = ArgoClient::new("http://127.0.0.1:9", None).unwrap();
    let e = closed.request_dry_run_prune("", "web").await.unwrap_err();
    assert!(
        e.to_string()
            .starts_with("POST http://127.0.0.1:9/api/v1/applications/web/sync: cannot connect"),
        "{e}"
    );
}

/// A server on 127.0.0.1 with `app`'s routes; its address.
async fn serve_router(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// `body` sent in 64 KiB chunks, with no declared length (as a chunked transfer is).
fn in_chunks(body: &str) -> Body {
    let chunks: Vec<Result<String, std::io::Error>> = body
        .as_bytes()
        .chunks(64 << 10)
        .map(|c| Ok(String::from_utf8_lossy(c).into_owned()))
        .collect();
    Body::from_stream(futures_util::stream::iter(chunks))
}

/// An endless body: the same chunk for ever, as a broken proxy or a hostile server may send.
fn endless(chunk: &'static str) -> Body {
    Body::from_stream(futures_util::stream::repeat_with(move || {
        Ok::<_, std::io::Error>(chunk.to_string())
    }))
}

/// One Application larger than `--read-limit-mib` (declared, or only as it streams) is refused
/// as too large, naming the flag; within the bound it reads.
#[tokio::test]
async fn an_application_past_the_read_bound_is_refused_naming_the_flag() {
    provider();
    let mut big = app_json("web");
    big["metadata"]["annotations"] = serde_json::json!({"padding": "x".repeat(2 << 20)});
    let body = big.to_string();
    let streamed = body.clone();
    let app = Router::new()
        .route(
            "/known/api/v1/applications/web",
            get(move || {
                let body = body.clone();
                async move { ([(header::CONTENT_TYPE, "application/json")], body) }
            }),
        )
        .route(
            "/endless/api/v1/applications/web",
            get(|| async { endless("{\"padding\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx") }),
        )
        .route(
            "/chunked/api/v1/applications/web",
            get(move || {
                let body = streamed.clone();
                async move { in_chunks(&body) }
            }),
        );
    let addr = serve_router(app).await;
    for base in ["known", "endless", "chunked"] {
        let opts = ClientOptions {
            max_read_bytes: 1 << 20,
            ..ClientOptions::default()
        };
        let client =
            ArgoClient::with_options(&format!("http://{addr}/{base}"), None, opts).unwrap();
        let err = tokio::time::timeout(WAIT, client.get("argocd", "web"))
            .await
            .expect("a bounded read ends")
            .unwrap_err();
        assert!(matches!(err, ArgoError::TooLarge { .. }), "{base}: {err}");
        let text = err.to_string();
        assert!(
            text.contains("exceeds 1 MiB; it was not read (raise --read-limit-mib)"),
            "{text}"
        );
    }
    let opts = ClientOptions {
        max_read_bytes: 4 << 20,
        ..ClientOptions::default()
    };
    let client = ArgoClient::with_options(&format!("http://{addr}/known"), None, opts).unwrap();
    let app = client.get("argocd", "web").await.unwrap().unwrap();
    assert_eq!(app.metadata.name, "web");
}

/// An error's body is read only so far, and only so much of the server's words is quoted: an
/// endless error body ends, a huge JSON message is cut at 300 characters.
#[tokio::test]
async fn an_errors_body_is_bounded_and_its_message_capped() {
    provider();
    let app = Router::new()
        .route(
            "/endless/api/v1/applications/web",
            get(|| async {
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    endless("oops oops oops oops "),
                )
            }),
        )
        .route(
            "/json/api/v1/applications/web",
            get(|| async {
                argo_error(StatusCode::INTERNAL_SERVER_ERROR, &"m".repeat(100_000), 13)
            }),
        );
    let addr = serve_router(app).await;
    for base in ["endless", "json"] {
        let client = ArgoClient::new(&format!("http://{addr}/{base}"), None).unwrap();
        let err = tokio::time::timeout(WAIT, client.get("argocd", "web"))
            .await
            .expect("an error's body is read only so far")
            .unwrap_err();
        let message = err.argo_message().unwrap().to_string();
        assert!(message.ends_with('…'), "{base}: {message}");
        assert!(message.chars().count() <= 301, "{base}: {}", message.len());
        assert!(err.to_string().len() < 1000, "{base}: {err}");
    }
}

/// A `429 Too Many Requests` is honoured: nothing more is sent before its `Retry-After` has
/// passed (the requests in between fail at once, saying so), and the first one after is sent.
#[tokio::test]
async fn a_429_holds_requests_back_for_its_retry_after() {
    provider();
    let hits = Arc::new(Mutex::new(0u32));
    let counted = hits.clone();
    let app = Router::new().route(
        "/api/v1/applications/web",
        get(move || {
            let hits = counted.clone();
            async move {
                let n = {
                    let mut h = hits.lock().unwrap();
                    *h += 1;
                    *h
                };
                if n == 1 {
                    (
                        StatusCode::TOO_MANY_REQUESTS,
                        [(header::RETRY_AFTER, "1")],
                        "slow down",
                    )
                        .into_response()
                } else {
                    (
                        [(header::CONTENT_TYPE, "application/json")],
                        app_json("web").to_string(),
                    )
                        .into_response()
                }
            }
        }),
    );
    let addr = serve_router(app).await;
    let client = ArgoClient::new(&format!("http://{addr}"), None).unwrap();
    let first = client.get("argocd", "web").await.unwrap_err();
    assert!(matches!(first, ArgoError::RateLimited { .. }), "{first}");
    assert_eq!(first.http_status(), Some(429));
    assert!(
        first.to_string().contains("429 Too Many Requests"),
        "{first}"
    );
    // Held back: not sent (the server counts one request), failing at once.
    let clone = client.clone();
    let held = clone.get("argocd", "web").await.unwrap_err();
    assert!(matches!(held, ArgoError::RateLimited { .. }), "{held}");
    assert_eq!(*hits.lock().unwrap(), 1);
    // After the second it asked for, the next request is sent and answered.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let app = client.get("argocd", "web").await.unwrap().unwrap();
    assert_eq!(app.metadata.name, "web");
    assert_eq!(*hits.lock().unwrap(), 2);
}
