//! The HTTP surface: the Argo CD REST subset under `/api/v1` (list, get, patch, resource-tree,
//! resource, managed-resources, sync, the application stream) in Argo CD's JSON shapes and error bodies,
//! written the way its gRPC gateway writes them (stream framing, `fields=`), behind the outage
//! switch and the optional bearer token; and the unauthenticated control API under
//! `/sandbox/v1`. The token is compared, never logged or echoed.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use tokio::sync::{mpsc, watch};

use crate::engine::{Garble, GarbleOn, GarbleWhat, Shared, Target, stopped};
use crate::fields::{FieldSelection, select_list};
use crate::manifests::ResourceKey;
use crate::patch::PatchType;
use crate::world::{ResourceMiss, SyncRequest, SyncResource};
use crate::{APP_NAMESPACE, APP_PROJECT};

type Sandbox = State<Arc<Shared>>;

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let argocd = Router::new()
        .route("/api/v1/applications", get(list))
        .route(
            "/api/v1/applications/{name}",
            get(one).patch(patch_application),
        )
        .route("/api/v1/applications/{name}/resource-tree", get(tree))
        .route("/api/v1/applications/{name}/resource", get(resource))
        .route(
            "/api/v1/applications/{name}/managed-resources",
            get(managed_resources),
        )
        .route("/api/v1/applications/{name}/sync", post(sync))
        .route("/api/v1/stream/applications", get(stream))
        .route_layer(middleware::from_fn_with_state(shared.clone(), gate));
    let control = Router::new()
        .route("/sandbox/v1/pause", post(pause))
        .route("/sandbox/v1/resume", post(resume))
        .route("/sandbox/v1/outage", post(outage))
        .route("/sandbox/v1/default-backend", post(default_backend))
        .route("/sandbox/v1/hide", post(hide))
        .route("/sandbox/v1/health", post(hold_health))
        .route("/sandbox/v1/delete", post(delete_resource))
        .route("/sandbox/v1/garble", post(garble));
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

/// Who asks, as its token says: with no token configured, or with the `--token-file` token,
/// every app; with a `--scoped-token-file` token, the apps its patterns match. Argo CD's RBAC
/// object for an Application is `<project>/<name>` (glob patterns in a policy's `p` lines); an
/// account whose role may `get` only some objects sees only those: a listing and a stream leave
/// the others out, and a read of one is 403 `permission denied`, the answer for an app that does
/// not exist (docs/sandbox-fidelity.md#rbac).
#[derive(Clone)]
pub(crate) enum Caller {
    All,
    Scoped(Arc<Vec<String>>),
}

impl Caller {
    fn sees(&self, project: &str, app: &str) -> bool {
        match self {
            Caller::All => true,
            Caller::Scoped(patterns) => {
                let object = format!("{project}/{app}");
                patterns.iter().any(|p| glob_match(p, &object))
            }
        }
    }

    /// The app is out of this caller's sight: hidden for a while (`/sandbox/v1/hide`), or not
    /// in its token's RBAC. Every sandbox app is in project `default`.
    fn cannot_see(&self, shared: &Shared, app: &str) -> bool {
        shared.is_hidden(app) || !self.sees(APP_PROJECT, app)
    }
}

/// `*` matches any run of characters (Argo CD matches RBAC objects as globs).
fn glob_match(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            let Some(text) = text.strip_prefix(head) else {
                return false;
            };
            (0..=text.len())
                .filter(|i| text.is_char_boundary(*i))
                .any(|i| glob_match(rest, &text[i..]))
        }
    }
}

async fn gate(State(shared): Sandbox, mut request: Request, next: Next) -> Response {
    if shared.in_outage() {
        return grpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            14,
            "the Argo CD API is unavailable (sandbox outage)",
        );
    }
    if shared.in_default_backend() {
        // ingress-nginx's default backend: 404 and a one-line text body, whatever was asked.
        return (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain")],
            "default backend - 404",
        )
            .into_response();
    }
    // A broken proxy or a misbehaving server in front of Argo CD: 200 and a body that is no
    // Argo CD answer, for the listing and/or reads (streams are left alone).
    if request.method() == axum::http::Method::GET {
        let path = request.uri().path();
        let target = if path == "/api/v1/applications" {
            Some(Target::Listing)
        } else if path.starts_with("/api/v1/applications/") {
            Some(Target::Read)
        } else {
            None
        };
        if let Some(what) = target.and_then(|t| shared.garbled(t)) {
            return (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                what.body(),
            )
                .into_response();
        }
    }
    let caller = if shared.token.is_none() && shared.scoped_tokens.is_empty() {
        Caller::All
    } else {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let Some(token) = given else {
            return grpc_error(StatusCode::UNAUTHORIZED, 16, "no session information");
        };
        // Digests have a fixed length, so a comparison does not depend on where they differ.
        let digest = Sha256::digest(token.as_bytes());
        let same = |known: &str| Sha256::digest(known.as_bytes()) == digest;
        if shared.token.as_deref().is_some_and(same) {
            Caller::All
        } else if let Some(scoped) = shared.scoped_tokens.iter().find(|t| same(&t.token)) {
            Caller::Scoped(Arc::new(scoped.sees.clone()))
        } else {
            return grpc_error(
                StatusCode::UNAUTHORIZED,
                16,
                "invalid session: token signature is invalid",
            );
        }
    };
    request.extensions_mut().insert(caller);
    next.run(request).await
}

#[derive(serde::Deserialize)]
struct AppQuery {
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

/// `GET /api/v1/applications`: every app (`name`, `appNamespace`, `projects` narrow it), as
/// stored: from 3.0 on without resource health. `fields` selects from Argo CD's fixed list.
async fn list(
    State(shared): Sandbox,
    Extension(caller): Extension<Caller>,
    Query(params): Query<Vec<(String, String)>>,
) -> Response {
    let params = Params(params);
    if params.given("refresh").is_some() {
        shared.request_refresh(None);
    }
    let projects = params.projects();
    let world = shared.world();
    let items: Vec<Value> = if params
        .given("appNamespace")
        .is_some_and(|ns| ns != APP_NAMESPACE)
    {
        Vec::new()
    } else {
        world
            .applications(params.given("name"))
            .into_iter()
            .filter(|app| in_projects(&projects, app))
            .filter(|app| !caller.cannot_see(&shared, text_at(app, "/metadata/name")))
            .collect()
    };
    let metadata = json!({"resourceVersion": world.resource_version().to_string()});
    drop(world);
    match params.fields() {
        Some(selection) => axum::Json(select_list(&items, metadata, &selection)).into_response(),
        None => axum::Json(json!({"metadata": metadata, "items": items})).into_response(),
    }
}

async fn one(
    State(shared): Sandbox,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Query(q): Query<AppQuery>,
) -> Response {
    let found = {
        let world = shared.world();
        let exists = !other_namespace(&q) && world.has(&name) && !caller.cannot_see(&shared, &name);
        access(exists, q.project.as_deref()).map(|()| world.application_served(&name))
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
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Query(q): Query<AppQuery>,
) -> Response {
    let world = shared.world();
    let exists = !other_namespace(&q) && world.has(&name) && !caller.cannot_see(&shared, &name);
    if let Err(denied) = access(exists, q.project.as_deref()) {
        return denied.answer(&name);
    }
    match world.resource_tree(&name) {
        Some(tree) => axum::Json(tree).into_response(),
        None => not_found(&name),
    }
}

/// `GET /api/v1/applications/{name}/resource?namespace=&resourceName=&version=&group=&kind=`:
/// `{"manifest": "<the live object as JSON>"}` for a node of the app's resource tree (Argo CD's
/// `GetResource`; `version` is not matched, as Argo CD's `FindNode` does not match it). A
/// resource that is no node of the tree is 400 code 3 `<kind> <group> <name> not found as part
/// of application <app>`; a managed resource not created yet is the API server's NotFound, 404
/// code 5. Same 403/404 rules as Get.
async fn resource(
    State(shared): Sandbox,
    Extension(caller): Extension<Caller>,
    Path(app_name): Path<String>,
    Query(params): Query<Vec<(String, String)>>,
) -> Response {
    let params = Params(params);
    let text = |key: &str| params.first(key).unwrap_or("").to_string();
    let key = ResourceKey {
        group: text("group"),
        kind: text("kind"),
        namespace: text("namespace"),
        name: text("resourceName"),
    };
    let found = {
        let world = shared.world();
        let exists = params
            .given("appNamespace")
            .is_none_or(|ns| ns == APP_NAMESPACE)
            && world.has(&app_name)
            && !caller.cannot_see(&shared, &app_name);
        if let Err(denied) = access(exists, params.given("project")) {
            return denied.answer(&app_name);
        }
        world.live_resource(&app_name, &key)
    };
    match found {
        Some(Ok(object)) => axum::Json(json!({"manifest": object.to_string()})).into_response(),
        Some(Err(ResourceMiss::NotInTree)) => invalid_argument(&format!(
            "{} {} {} not found as part of application {app_name}",
            key.kind, key.group, key.name
        )),
        Some(Err(ResourceMiss::NotCreated)) => {
            let resource = plural(&key.kind.to_lowercase());
            let resource = if key.group.is_empty() {
                resource
            } else {
                format!("{resource}.{}", key.group)
            };
            grpc_error(
                StatusCode::NOT_FOUND,
                5,
                &format!("{resource} \"{}\" not found", key.name),
            )
        }
        None => not_found(&app_name),
    }
}

// The API server's resource name for a kind: lower case, plural.
fn plural(kind: &str) -> String {
    if let Some(stem) = kind.strip_suffix('y') {
        format!("{stem}ies")
    } else if kind.ends_with('s') {
        format!("{kind}es")
    } else {
        format!("{kind}s")
    }
}

/// `GET /api/v1/applications/{name}/managed-resources[?group=&kind=&namespace=&name=&fields=]`:
/// the app's managed resources, narrowed by the resource's group, kind, namespace and name.
async fn managed_resources(
    State(shared): Sandbox,
    Extension(caller): Extension<Caller>,
    Path(app_name): Path<String>,
    Query(params): Query<Vec<(String, String)>>,
) -> Response {
    let params = Params(params);
    let items = {
        let world = shared.world();
        let exists = params
            .given("appNamespace")
            .is_none_or(|ns| ns == APP_NAMESPACE)
            && world.has(&app_name)
            && !caller.cannot_see(&shared, &app_name);
        if let Err(denied) = access(exists, params.given("project")) {
            return denied.answer(&app_name);
        }
        world.managed_resources(&app_name)
    };
    let Some(items) = items else {
        return not_found(&app_name);
    };
    let matches = |item: &Value, field: &str| {
        params
            .given(field)
            .is_none_or(|want| text_at(item, &format!("/{field}")) == want)
    };
    let items: Vec<Value> = items
        .into_iter()
        .filter(|item| {
            ["group", "kind", "namespace", "name"]
                .iter()
                .all(|f| matches(item, f))
        })
        .collect();
    let mut answer = json!({});
    if !items.is_empty() {
        answer["items"] = json!(items);
    }
    if let Some(selection) = params.fields() {
        selection.apply(&mut answer);
    }
    axum::Json(answer).into_response()
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
    Extension(caller): Extension<Caller>,
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
        let exists = !other_namespace(&q) && world.has(&name) && !caller.cannot_see(&shared, &name);
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

/// Argo CD's `ApplicationPatchRequest` JSON. `name` comes from the path (the gateway lets the
/// path win over the body); `appNamespace` and `project` from the body, else the query.
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct PatchBody {
    /// The patch document, itself JSON, as a string.
    patch: Option<String>,
    patch_type: Option<String>,
    app_namespace: Option<String>,
    project: Option<String>,
}

/// `PATCH /api/v1/applications/{name}`: edits the spec as Argo CD's API does (see `patch`) and
/// answers the updated Application as stored (Argo CD answers what its update returned: from
/// 3.0 on no resource health is re-filled, unlike Get). An edit the controller refreshes for is
/// fetched and reconciled at once, as `?refresh=normal` is; the answer does not wait for it.
async fn patch_application(
    State(shared): Sandbox,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Query(q): Query<AppQuery>,
    body: Bytes,
) -> Response {
    // The gateway reads the body first; an empty one is an empty request.
    let parsed: PatchBody = if body.iter().all(u8::is_ascii_whitespace) {
        PatchBody::default()
    } else {
        match serde_json::from_slice(&body) {
            Ok(parsed) => parsed,
            Err(e) => return invalid_argument(&format!("invalid patch request: {e}")),
        }
    };
    let project = parsed.project.clone().or(q.project.clone());
    let namespace = AppQuery {
        app_namespace: parsed.app_namespace.clone().or(q.app_namespace.clone()),
        refresh: None,
        project: None,
    };
    let answer = {
        let mut world = shared.world();
        let exists =
            !other_namespace(&namespace) && world.has(&name) && !caller.cannot_see(&shared, &name);
        if let Err(denied) = access(exists, project.as_deref()) {
            return denied.answer(&name);
        }
        let kind = match PatchType::parse(parsed.patch_type.as_deref().unwrap_or("")) {
            Ok(kind) => kind,
            Err(refusal) => return invalid_argument(&refusal),
        };
        world.patch_application(&name, kind, parsed.patch.as_deref().unwrap_or(""))
    };
    match answer {
        Some(Ok(patched)) => {
            if patched.refresh {
                shared.request_refresh(Some(&name));
            }
            axum::Json(patched.application).into_response()
        }
        Some(Err(refusal)) => invalid_argument(&refusal),
        None => not_found(&name),
    }
}

/// The query parameters of a request, in order, repeated ones included.
struct Params(Vec<(String, String)>);

impl Params {
    /// The first value of `key` (Go's `url.Values.Get`).
    fn first(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The first non-empty value of `key`.
    fn given(&self, key: &str) -> Option<&str> {
        self.first(key).filter(|v| !v.is_empty())
    }

    fn all(&self, key: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// `projects` (repeatable), or the legacy `project` when `projects` is absent.
    fn projects(&self) -> Vec<String> {
        let projects = self.all("projects");
        if projects.is_empty() {
            self.all("project")
        } else {
            projects
        }
    }

    fn fields(&self) -> Option<FieldSelection> {
        self.first("fields").and_then(FieldSelection::parse)
    }
}

fn in_projects(projects: &[String], app: &Value) -> bool {
    projects.is_empty()
        || app
            .pointer("/spec/project")
            .and_then(Value::as_str)
            .is_some_and(|p| projects.iter().any(|want| want == p))
}

fn text_at<'a>(app: &'a Value, pointer: &str) -> &'a str {
    app.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// What a stream is allowed to see (Argo CD's `isApplicationPermitted`).
struct StreamFilter {
    name: Option<String>,
    namespace: String,
    projects: Vec<String>,
    /// `resourceVersion`: apps older than this are not sent (not a resume: nothing is replayed).
    min_version: i64,
    /// Send the ADDED burst: no `resourceVersion`, or a `name`.
    burst: bool,
    /// Whose stream it is: an app the token may not see is never sent.
    caller: Caller,
}

impl StreamFilter {
    fn from(params: &Params, caller: Caller) -> StreamFilter {
        let version = params.given("resourceVersion");
        let name = params.given("name").map(str::to_string);
        StreamFilter {
            burst: version.is_none() || name.is_some(),
            // Argo CD ignores a resourceVersion that is not a number.
            min_version: version.and_then(|v| v.parse().ok()).unwrap_or(0),
            namespace: params
                .given("appNamespace")
                .unwrap_or(APP_NAMESPACE)
                .to_string(),
            name,
            projects: params.projects(),
            caller,
        }
    }

    fn permits(&self, app: &Value) -> bool {
        if !self.caller.sees(
            text_at(app, "/spec/project"),
            text_at(app, "/metadata/name"),
        ) {
            return false;
        }
        if !in_projects(&self.projects, app) {
            return false;
        }
        let version = text_at(app, "/metadata/resourceVersion").parse::<i64>();
        if version.is_ok_and(|v| v < self.min_version) {
            return false;
        }
        // `appNamespace` only narrows a stream that names an app.
        self.name.as_ref().is_none_or(|name| {
            text_at(app, "/metadata/name") == name
                && text_at(app, "/metadata/namespace") == self.namespace
        })
    }
}

/// What the stream's feeder hands the response: a chunk to write, or (before anything was
/// written) an error to answer with instead.
enum Out {
    Chunk(Bytes),
    Refuse {
        status: StatusCode,
        code: u32,
        message: String,
    },
}

/// Why a stream ends.
enum End {
    /// The client went away, or the sandbox stops.
    Gone,
    /// An outage began.
    Outage,
}

const OUTAGE_MESSAGE: &str = "the Argo CD API is unavailable (sandbox outage)";

/// Writes one stream the way Argo CD's HTTP gateway does: each message marshalled (with the
/// `fields` selection, SSE framing when asked for) and compared with the last one sent for the
/// same app, which suppresses an identical one; then written with its `\n` delimiter.
struct Writer {
    tx: mpsc::Sender<Out>,
    sse: bool,
    fields: Option<FieldSelection>,
    last_sent: HashMap<String, Vec<u8>>,
    wrote: bool,
    stop: watch::Receiver<bool>,
}

impl Writer {
    fn marshal(&self, mut message: Value, go_order: Option<String>) -> Vec<u8> {
        let json = match (&self.fields, go_order) {
            (None, Some(text)) => text,
            (Some(fields), _) => {
                fields.apply(&mut message);
                message.to_string()
            }
            (None, None) => message.to_string(),
        };
        if self.sse {
            format!("data: {json} \n\n").into_bytes()
        } else {
            json.into_bytes()
        }
    }

    async fn send(&mut self, out: Out) -> Result<(), End> {
        tokio::select! {
            sent = self.tx.send(out) => sent.map_err(|_| End::Gone),
            _ = stopped(&mut self.stop) => Err(End::Gone),
        }
    }

    async fn message(&mut self, kind: &str, name: &str, application: Value) -> Result<(), End> {
        let event = json!({"result": {"type": kind, "application": application}});
        let mut bytes = self.marshal(event, None);
        if self.last_sent.get(name) == Some(&bytes) {
            return Ok(());
        }
        self.last_sent.insert(name.to_string(), bytes.clone());
        bytes.push(b'\n');
        self.send(Out::Chunk(Bytes::from(bytes))).await?;
        self.wrote = true;
        Ok(())
    }

    async fn heartbeat(&mut self) -> Result<(), End> {
        self.send(Out::Chunk(Bytes::from_static(b":\n"))).await
    }

    /// An error ends the stream: before anything was written it is the answer (status and the
    /// usual error body, as Argo CD answers when the stream fails before its headers); after, it
    /// is the stream's error chunk, without a delimiter.
    async fn fail(&mut self, status: StatusCode, code: u32, message: &str) {
        let out = if self.wrote {
            let chunk = json!({"error": {
                "grpc_code": code,
                "http_code": status.as_u16(),
                "message": message,
                "http_status": status.canonical_reason().unwrap_or(""),
            }});
            // grpc-gateway's field order, unless a selection re-marshals it.
            let go_order = format!(
                r#"{{"error":{{"grpc_code":{code},"http_code":{},"message":{},"http_status":{}}}}}"#,
                status.as_u16(),
                Value::from(message),
                Value::from(status.canonical_reason().unwrap_or("")),
            );
            Out::Chunk(Bytes::from(self.marshal(chunk, Some(go_order))))
        } else {
            Out::Refuse {
                status,
                code,
                message: message.to_string(),
            }
        };
        let _ = self.send(out).await;
    }
}

async fn tick(heartbeat: &mut Option<tokio::time::Interval>) {
    match heartbeat {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// `GET /api/v1/stream/applications`. The response (status and headers) waits for the first
/// message, as Argo CD's gateway waits for the gRPC stream's header.
async fn stream(
    State(shared): Sandbox,
    Extension(caller): Extension<Caller>,
    Query(params): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    let params = Params(params);
    // Argo CD speaks SSE only when Accept is exactly this.
    let sse = headers
        .get(header::ACCEPT)
        .is_some_and(|v| v.as_bytes() == b"text/event-stream");
    let (tx, mut rx) = mpsc::channel::<Out>(1);
    let writer = Writer {
        tx,
        sse,
        fields: params.fields(),
        last_sent: HashMap::new(),
        wrote: false,
        stop: shared.shutdown.subscribe(),
    };
    tokio::spawn(feed(
        shared.clone(),
        StreamFilter::from(&params, caller),
        writer,
    ));
    let first = match rx.recv().await {
        Some(Out::Chunk(first)) => first,
        Some(Out::Refuse {
            status,
            code,
            message,
        }) => return grpc_error(status, code, &message),
        None => {
            return grpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                14,
                "the sandbox is stopping",
            );
        }
    };
    let rest = futures_util::stream::unfold(rx, |mut rx| async move {
        match rx.recv().await {
            Some(Out::Chunk(chunk)) => Some((Ok::<Bytes, Infallible>(chunk), rx)),
            Some(Out::Refuse { .. }) | None => None,
        }
    });
    let body = Body::from_stream(futures_util::stream::once(async { Ok(first) }).chain(rest));
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    if sse {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
    } else {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    response
}

// Feeds one stream as Argo CD's Watch does: the ADDED burst of every permitted app (sorted by
// qualified name) is sent *before* subscribing, so an update in between is lost for this
// stream; then each update the subscription's buffer held (an update that found it full was
// dropped), re-filled with the tree's resource health at the moment it is sent. SSE streams get
// a heartbeat every `heartbeat` from the first message on. An outage ends the stream with an
// error; the client going away or the sandbox stopping ends it silently.
async fn feed(shared: Arc<Shared>, filter: StreamFilter, mut writer: Writer) {
    let mut outage = shared.outage_epoch.subscribe();
    outage.mark_unchanged();
    let ended = run_feed(&shared, &filter, &mut writer, &mut outage).await;
    if let Err(End::Outage) = ended {
        writer
            .fail(StatusCode::SERVICE_UNAVAILABLE, 14, OUTAGE_MESSAGE)
            .await;
    }
}

async fn run_feed(
    shared: &Shared,
    filter: &StreamFilter,
    writer: &mut Writer,
    outage: &mut watch::Receiver<u64>,
) -> Result<(), End> {
    let settings = shared.stream;
    // Heartbeats start with the first message written (Argo CD's keep-alive lives in the
    // gateway's forwarder, which runs once the stream has its first message).
    let mut heartbeat: Option<tokio::time::Interval> = None;
    let start_heartbeat = |heartbeat: &mut Option<tokio::time::Interval>, writer: &Writer| {
        if writer.sse && writer.wrote && heartbeat.is_none() {
            let every = settings.heartbeat;
            *heartbeat = Some(tokio::time::interval_at(
                tokio::time::Instant::now() + every,
                every,
            ));
        }
    };
    if filter.burst {
        let burst: Vec<(String, Value)> = {
            let world = shared.world();
            world
                .applications(None)
                .into_iter()
                .filter(|app| filter.permits(app))
                .filter(|app| {
                    !filter
                        .caller
                        .cannot_see(shared, text_at(app, "/metadata/name"))
                })
                .map(|mut app| {
                    world.refill_resource_health(&mut app);
                    (text_at(&app, "/metadata/name").to_string(), app)
                })
                .collect()
        };
        for (name, app) in burst {
            if outage.has_changed().unwrap_or(false) {
                return Err(End::Outage);
            }
            writer.message("ADDED", &name, app).await?;
        }
    }
    start_heartbeat(&mut heartbeat, writer);
    if !settings.subscribe_delay.is_zero() {
        let delay = tokio::time::sleep(settings.subscribe_delay);
        tokio::pin!(delay);
        loop {
            tokio::select! {
                _ = &mut delay => break,
                _ = tick(&mut heartbeat) => writer.heartbeat().await?,
                _ = outage.changed() => return Err(End::Outage),
                _ = writer.tx.closed() => return Err(End::Gone),
                _ = stopped(&mut writer.stop) => return Err(End::Gone),
            }
        }
    }
    let mut updates = shared.world().subscribe(settings.buffer);
    loop {
        tokio::select! {
            change = updates.recv() => {
                let Some(change) = change else { return Err(End::Gone) };
                if !filter.permits(&change.application) || filter.caller.cannot_see(shared, &change.name) {
                    continue;
                }
                let mut app = (*change.application).clone();
                shared.world().refill_resource_health(&mut app);
                writer.message("MODIFIED", &change.name, app).await?;
                start_heartbeat(&mut heartbeat, writer);
            }
            _ = tick(&mut heartbeat) => writer.heartbeat().await?,
            _ = outage.changed() => return Err(End::Outage),
            _ = writer.tx.closed() => return Err(End::Gone),
            _ = stopped(&mut writer.stop) => return Err(End::Gone),
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

async fn default_backend(
    State(shared): Sandbox,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let seconds = match q.get("seconds").map(|s| s.trim().parse::<f64>()) {
        Some(Ok(s)) if s.is_finite() && (0.0..=86_400.0).contains(&s) => s,
        _ => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(
                    json!({"error": "seconds: expected a number from 0 to 86400 (?seconds=N)"}),
                ),
            )
                .into_response();
        }
    };
    shared.start_default_backend(Duration::from_secs_f64(seconds));
    control_answer(json!({"defaultBackendSeconds": seconds}))
}

/// `?app=NAME&seconds=N`: for N seconds the token may not see the app, as after an RBAC change.
async fn hide(State(shared): Sandbox, Query(q): Query<HashMap<String, String>>) -> Response {
    let seconds = q.get("seconds").map(|s| s.trim().parse::<f64>());
    let (Some(app), Some(Ok(seconds))) = (q.get("app"), seconds) else {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "expected ?app=NAME&seconds=N"})),
        )
            .into_response();
    };
    if !seconds.is_finite() || !(0.0..=86_400.0).contains(&seconds) {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "seconds: expected a number from 0 to 86400"})),
        )
            .into_response();
    }
    shared.hide(app, Duration::from_secs_f64(seconds));
    control_answer(json!({"hidden": app, "seconds": seconds}))
}

fn bad_control(message: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({"error": message})),
    )
        .into_response()
}

/// `?app=NAME&kind=KIND&name=NAME[&namespace=NS]&health=H&seconds=N[&message=M]`: for N
/// seconds the live resource reports health H (with M, or the sandbox's words), as an HPA
/// scale-up holds a Deployment `Progressing` while its new Pods start.
async fn hold_health(State(shared): Sandbox, Query(q): Query<HashMap<String, String>>) -> Response {
    let given = |key: &str| q.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
    let mut missing = ["app", "kind", "name", "health", "seconds"]
        .into_iter()
        .filter(|key| given(key).is_none());
    if let Some(key) = missing.next() {
        return bad_control(&format!(
            "{key}: missing (use ?app=NAME&kind=KIND&name=NAME&health=H&seconds=N[&namespace=NS][&message=M])"
        ));
    }
    let text = |key: &str| given(key).unwrap_or_default().to_string();
    let health = match crate::health::Health::parse(&text("health")) {
        Ok(health) => health,
        Err(e) => return bad_control(&e),
    };
    let seconds = match text("seconds").parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=86_400.0).contains(&s) => s,
        _ => return bad_control("seconds: expected a number from 0 to 86400"),
    };
    let hold = crate::world::HoldHealth {
        kind: text("kind"),
        name: text("name"),
        namespace: given("namespace").map(str::to_string),
        health,
        message: q.get("message").cloned().unwrap_or_default(),
        length: Duration::from_secs_f64(seconds),
    };
    let app = text("app");
    match shared.hold_health(&app, hold) {
        Ok(()) => control_answer(json!({
            "app": app,
            "kind": text("kind"),
            "name": text("name"),
            "health": health.as_str(),
            "seconds": seconds,
        })),
        Err(e) => bad_control(&e),
    }
}

/// `?app=NAME&kind=KIND&name=NAME[&namespace=NS]`: a human deletes the live object out of band,
/// as `kubectl delete` does.
async fn delete_resource(
    State(shared): Sandbox,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let given = |key: &str| q.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
    let (Some(app), Some(kind), Some(name)) = (given("app"), given("kind"), given("name")) else {
        let key = ["app", "kind", "name"]
            .into_iter()
            .find(|key| given(key).is_none())
            .unwrap_or("app");
        return bad_control(&format!(
            "{key}: missing (use ?app=NAME&kind=KIND&name=NAME[&namespace=NS])"
        ));
    };
    let namespace = given("namespace");
    match shared.delete_resource(app, kind, name, namespace) {
        Ok(()) => control_answer(json!({"app": app, "kind": kind, "name": name, "deleted": true})),
        Err(e) => bad_control(&e),
    }
}

/// `?what=no-items|nested&seconds=N[&on=listing|reads|both]` (default `both`): for N seconds
/// the listing and/or reads answer 200 with a body that is no Argo CD answer (`{}`, or
/// `{"items":…}` holding 100000 nested arrays), as a broken proxy or a misbehaving server might.
async fn garble(State(shared): Sandbox, Query(q): Query<HashMap<String, String>>) -> Response {
    let given = |key: &str| q.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
    let Some(what) = given("what") else {
        return bad_control(
            "what: missing (use ?what=no-items|nested&seconds=N[&on=listing|reads|both])",
        );
    };
    let Some(what) = GarbleWhat::parse(what) else {
        return bad_control(&format!("what: {what:?} is not one of no-items, nested"));
    };
    let on = match given("on").map(GarbleOn::parse) {
        None => GarbleOn::Both,
        Some(Some(on)) => on,
        Some(None) => return bad_control("on: expected one of listing, reads, both"),
    };
    let seconds = match given("seconds").map(str::parse::<f64>) {
        Some(Ok(s)) if s.is_finite() && (0.0..=86_400.0).contains(&s) => s,
        Some(_) => return bad_control("seconds: expected a number from 0 to 86400"),
        None => return bad_control("seconds: missing (use ?seconds=N)"),
    };
    shared.start_garble(Garble { what, on }, Duration::from_secs_f64(seconds));
    control_answer(json!({"garbleSeconds": seconds}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_become_the_api_servers_resource_names() {
        assert_eq!(plural("configmap"), "configmaps");
        assert_eq!(plural("ingress"), "ingresses");
        assert_eq!(plural("networkpolicy"), "networkpolicies");
    }
}
