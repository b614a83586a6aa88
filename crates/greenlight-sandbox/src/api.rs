//! The HTTP surface: the Argo CD REST subset under `/api/v1` (list, get, resource-tree, sync,
//! the application stream) in Argo CD's JSON shapes and error bodies, behind the outage switch
//! and the optional bearer token; and the unauthenticated control API under `/sandbox/v1`.
//! The token is compared, never logged or echoed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use tokio::sync::{broadcast, mpsc};

use crate::engine::{Shared, stopped};
use crate::world::{SyncRequest, SyncResource};
use crate::{APP_NAMESPACE, APP_PROJECT};

type Sandbox = State<Arc<Shared>>;

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let argocd = Router::new()
        .route("/api/v1/applications", get(list))
        .route("/api/v1/applications/{name}", get(one))
        .route("/api/v1/applications/{name}/resource-tree", get(tree))
        .route("/api/v1/applications/{name}/sync", post(sync))
        .route("/api/v1/stream/applications", get(stream))
        .route_layer(middleware::from_fn_with_state(shared.clone(), gate));
    let control = Router::new()
        .route("/sandbox/v1/pause", post(pause))
        .route("/sandbox/v1/resume", post(resume))
        .route("/sandbox/v1/outage", post(outage));
    argocd.merge(control).with_state(shared)
}

// Argo CD's gRPC-gateway error body: `code` is the gRPC status code.
fn grpc_error(status: StatusCode, code: u32, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": message, "code": code, "message": message})),
    )
        .into_response()
}

fn not_found(name: &str) -> Response {
    grpc_error(
        StatusCode::NOT_FOUND,
        5,
        &format!("applications.argoproj.io \"{name}\" not found"),
    )
}

fn permission_denied() -> Response {
    grpc_error(StatusCode::FORBIDDEN, 7, "permission denied")
}

// Argo CD answers "permission denied" for an app the caller may not see, and cannot tell that
// from one that does not exist: a missing app is 403 too, unless the request names a project the
// caller may see (every sandbox app is in `default`); then it is 404. An app asked for in
// another project is not in it: 403.
fn access(exists: bool, project: Option<&str>) -> Result<(), Denied> {
    match (exists, project.filter(|p| !p.is_empty())) {
        (true, None) => Ok(()),
        (true, Some(p)) if p == APP_PROJECT => Ok(()),
        (false, Some(p)) if p == APP_PROJECT => Err(Denied::NotFound),
        _ => Err(Denied::Forbidden),
    }
}

enum Denied {
    Forbidden,
    NotFound,
}

impl Denied {
    fn answer(self, name: &str) -> Response {
        match self {
            Denied::Forbidden => permission_denied(),
            Denied::NotFound => not_found(name),
        }
    }
}

async fn gate(State(shared): Sandbox, request: Request, next: Next) -> Response {
    if shared.in_outage() {
        return grpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            14,
            "the Argo CD API is unavailable (sandbox outage)",
        );
    }
    if let Some(expected) = &shared.token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        match given {
            None => return grpc_error(StatusCode::UNAUTHORIZED, 16, "no session information"),
            // Digests have a fixed length, so the comparison does not depend on where they differ.
            Some(token)
                if Sha256::digest(token.as_bytes()) != Sha256::digest(expected.as_bytes()) =>
            {
                return grpc_error(
                    StatusCode::UNAUTHORIZED,
                    16,
                    "invalid session: token signature is invalid",
                );
            }
            Some(_) => {}
        }
    }
    next.run(request).await
}

#[derive(serde::Deserialize)]
struct AppQuery {
    name: Option<String>,
    #[serde(rename = "appNamespace")]
    app_namespace: Option<String>,
    /// `normal` or `hard`: Argo CD re-reads git and reconciles; the sandbox fetches and
    /// reconciles at once instead of at the next tick (the answer does not wait for it, which
    /// Argo CD's does).
    refresh: Option<String>,
    project: Option<String>,
}

fn refresh_requested(shared: &Shared, q: &AppQuery, name: Option<&str>) {
    if q.refresh.as_deref().is_some_and(|r| !r.is_empty()) {
        shared.request_refresh(name);
    }
}

fn other_namespace(q: &AppQuery) -> bool {
    q.app_namespace
        .as_deref()
        .is_some_and(|ns| !ns.is_empty() && ns != APP_NAMESPACE)
}

async fn list(State(shared): Sandbox, Query(q): Query<AppQuery>) -> Response {
    refresh_requested(&shared, &q, None);
    let world = shared.world();
    let items = if other_namespace(&q) {
        Vec::new()
    } else {
        world.applications(q.name.as_deref())
    };
    axum::Json(json!({
        "metadata": {"resourceVersion": world.resource_version().to_string()},
        "items": items,
    }))
    .into_response()
}

async fn one(
    State(shared): Sandbox,
    Path(name): Path<String>,
    Query(q): Query<AppQuery>,
) -> Response {
    let found = {
        let world = shared.world();
        let exists = !other_namespace(&q) && world.has(&name);
        access(exists, q.project.as_deref()).map(|()| world.application(&name))
    };
    match found {
        Ok(Some(app)) => {
            refresh_requested(&shared, &q, Some(&name));
            axum::Json(app).into_response()
        }
        Ok(None) => not_found(&name),
        Err(denied) => denied.answer(&name),
    }
}

async fn tree(
    State(shared): Sandbox,
    Path(name): Path<String>,
    Query(q): Query<AppQuery>,
) -> Response {
    let world = shared.world();
    let exists = !other_namespace(&q) && world.has(&name);
    if let Err(denied) = access(exists, q.project.as_deref()) {
        return denied.answer(&name);
    }
    match world.resource_tree(&name) {
        Some(tree) => axum::Json(tree).into_response(),
        None => not_found(&name),
    }
}

/// Argo CD's `ApplicationSyncRequest` JSON (the fields the sandbox honours; others are ignored).
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct SyncBody {
    revision: Option<String>,
    dry_run: Option<bool>,
    prune: Option<bool>,
    resources: Option<Vec<SyncResourceBody>>,
    sync_options: Option<SyncOptionsBody>,
    strategy: Option<Value>,
    project: Option<String>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct SyncResourceBody {
    group: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    namespace: Option<String>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct SyncOptionsBody {
    items: Option<Vec<String>>,
}

fn invalid_argument(message: &str) -> Response {
    grpc_error(StatusCode::BAD_REQUEST, 3, message)
}

impl SyncBody {
    fn into_request(self) -> Result<SyncRequest, String> {
        let mut resources = Vec::new();
        for (i, r) in self.resources.unwrap_or_default().into_iter().enumerate() {
            let (Some(kind), Some(name)) = (
                r.kind.filter(|k| !k.is_empty()),
                r.name.filter(|n| !n.is_empty()),
            ) else {
                return Err(format!("resources[{i}]: kind and name are required"));
            };
            resources.push(SyncResource {
                group: r.group.unwrap_or_default(),
                kind,
                name,
                namespace: r.namespace.unwrap_or_default(),
            });
        }
        Ok(SyncRequest {
            revision: self.revision.unwrap_or_default().trim().to_string(),
            dry_run: self.dry_run.unwrap_or(false),
            prune: self.prune.unwrap_or(false),
            resources,
            sync_options: self.sync_options.and_then(|o| o.items).unwrap_or_default(),
            strategy: self.strategy.filter(|s| !s.is_null()),
        })
    }
}

/// `POST /api/v1/applications/{name}/sync`: sets the operation and answers the Application; the
/// sync loop starts it (Argo CD's controller picks it up the same way).
async fn sync(
    State(shared): Sandbox,
    Path(name): Path<String>,
    Query(q): Query<AppQuery>,
    body: Bytes,
) -> Response {
    let parsed: SyncBody = if body.iter().all(u8::is_ascii_whitespace) {
        SyncBody::default()
    } else {
        match serde_json::from_slice(&body) {
            Ok(parsed) => parsed,
            Err(e) => return invalid_argument(&format!("invalid sync request: {e}")),
        }
    };
    let project = parsed.project.clone().or(q.project.clone());
    let request = match parsed.into_request() {
        Ok(request) => request,
        Err(bad) => return invalid_argument(&bad),
    };
    let answer = {
        let mut world = shared.world();
        let exists = !other_namespace(&q) && world.has(&name);
        if let Err(denied) = access(exists, project.as_deref()) {
            return denied.answer(&name);
        }
        world.request_sync(&name, request)
    };
    match answer {
        Some(Ok(app)) => {
            shared.request_sync();
            axum::Json(app).into_response()
        }
        Some(Err(refusal)) => grpc_error(StatusCode::BAD_REQUEST, 9, &refusal.to_string()),
        None => not_found(&name),
    }
}

fn frame(kind: &str, application: &Value, sse: bool) -> Bytes {
    let event = json!({"result": {"type": kind, "application": application}});
    Bytes::from(if sse {
        format!("data: {event}\n\n")
    } else {
        format!("{event}\n")
    })
}

type Chunk = Result<Bytes, std::io::Error>;

async fn stream(State(shared): Sandbox, Query(q): Query<AppQuery>, headers: HeaderMap) -> Response {
    let sse = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    let only = if other_namespace(&q) {
        Some(String::new())
    } else {
        q.name.clone().filter(|n| !n.is_empty())
    };
    // Subscribe and snapshot under one lock: no update is missed or delivered twice.
    let (updates, snapshot) = {
        let world = shared.world();
        (world.subscribe(), world.applications(only.as_deref()))
    };
    let (tx, rx) = mpsc::channel::<Chunk>(64);
    tokio::spawn(forward(shared.clone(), updates, snapshot, only, sse, tx));
    let body = Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    }));
    let content_type = if sse {
        "text/event-stream"
    } else {
        "application/json"
    };
    let mut response = Response::new(body);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

// Feeds one stream: ADDED for every app that exists, then MODIFIED per update, until the client
// goes away, an outage cuts it (an aborted connection, as when the server dies) or the sandbox stops.
async fn forward(
    shared: Arc<Shared>,
    mut updates: broadcast::Receiver<crate::world::Change>,
    snapshot: Vec<Value>,
    only: Option<String>,
    sse: bool,
    tx: mpsc::Sender<Chunk>,
) {
    let mut outage = shared.outage_epoch.subscribe();
    let mut stop = shared.shutdown.subscribe();
    for app in &snapshot {
        if tx.send(Ok(frame("ADDED", app, sse))).await.is_err() {
            return;
        }
    }
    loop {
        let chunk = tokio::select! {
            update = updates.recv() => match update {
                Ok(change) if only.as_ref().is_none_or(|n| *n == change.name) => Ok(frame("MODIFIED", &change.application, sse)),
                Ok(_) => continue,
                // Too slow a reader: send the current state of everything rather than a gap.
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let apps = shared.world().applications(only.as_deref());
                    for app in &apps {
                        if tx.send(Ok(frame("MODIFIED", app, sse))).await.is_err() {
                            return;
                        }
                    }
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = outage.changed() => Err(std::io::Error::other("sandbox outage: stream cut")),
            _ = stopped(&mut stop) => return,
            _ = tx.closed() => return,
        };
        let cut = chunk.is_err();
        if tx.send(chunk).await.is_err() || cut {
            return;
        }
    }
}

fn control_answer(body: Value) -> Response {
    axum::Json(body).into_response()
}

async fn pause(State(shared): Sandbox) -> Response {
    shared.pause().await;
    control_answer(json!({"paused": true}))
}

async fn resume(State(shared): Sandbox) -> Response {
    shared.resume();
    control_answer(json!({"paused": false}))
}

async fn outage(State(shared): Sandbox, Query(q): Query<HashMap<String, String>>) -> Response {
    let seconds = match q.get("seconds").map(|s| s.trim().parse::<f64>()) {
        Some(Ok(s)) if s.is_finite() && (0.0..=86_400.0).contains(&s) => s,
        Some(_) => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": "seconds: expected a number from 0 to 86400"})),
            )
                .into_response();
        }
        None => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": "seconds: missing (use ?seconds=N)"})),
            )
                .into_response();
        }
    };
    shared.start_outage(Duration::from_secs_f64(seconds));
    control_answer(json!({"outageSeconds": seconds}))
}
