//! GitLab's face: the merge-request routes of API v4 (`/api/v4/projects/{id}/merge_requests…`,
//! `{id}` the project id `1` or its URL-encoded path `owner%2Fname`), parameters read from a
//! JSON body and the query string as GitLab's API reads both. Errors in GitLab's shapes:
//! `{"message": "…"}`, a list of messages for a model's validation errors, and `{"error": "…"}`
//! for a missing parameter.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde_json::{Value, json};

use super::board::{ArmRefusal, Gate, MergeMethod, Status};
use super::{ArmError, Face, MergeError, OpenError, PullView, json_body, rfc3339};

type Shared = State<Arc<Face>>;

/// The project's numeric id on this forge.
const PROJECT_ID: u64 = 1;

pub(super) fn router(face: Arc<Face>) -> Router {
    Router::new()
        .route("/api/v4/projects/{id}/merge_requests", post(create))
        .route(
            "/api/v4/projects/{id}/merge_requests/{iid}",
            get(read).put(update),
        )
        .route(
            "/api/v4/projects/{id}/merge_requests/{iid}/merge",
            put(merge),
        )
        .route_layer(middleware::from_fn_with_state(face.clone(), auth))
        .with_state(face)
}

fn message(status: StatusCode, message: Value) -> Response {
    (status, axum::Json(json!({"message": message}))).into_response()
}

fn not_found(what: &str) -> Response {
    message(StatusCode::NOT_FOUND, json!(format!("404 {what}")))
}

/// `PRIVATE-TOKEN: <t>` or `Authorization: Bearer <t>`; anything else is 401.
async fn auth(State(face): Shared, request: Request, next: Next) -> Response {
    let private = request
        .headers()
        .get("private-token")
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    let bearer = super::authorization_token(request.headers(), &["bearer"]);
    match private.or(bearer) {
        Some(token) if face.token_is(token) => next.run(request).await,
        _ => message(StatusCode::UNAUTHORIZED, json!("401 Unauthorized")),
    }
}

fn is_project(face: &Face, id: &str) -> bool {
    id == PROJECT_ID.to_string() || id == face.project_path()
}

/// The request's parameters: the JSON body's members over the query string's.
fn params(query: HashMap<String, String>, body: &Bytes) -> Result<Value, Box<Response>> {
    let mut merged = serde_json::Map::new();
    for (k, v) in query {
        merged.insert(k, Value::String(v));
    }
    match json_body(body) {
        Ok(Value::Object(map)) => merged.extend(map),
        Ok(_) => {}
        Err(e) => return Err(Box::new(message(StatusCode::BAD_REQUEST, json!(e)))),
    }
    Ok(Value::Object(merged))
}

fn text<'a>(p: &'a Value, key: &str) -> Option<&'a str> {
    p.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn flag(p: &Value, key: &str) -> bool {
    match p.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s == "true" || s == "1",
        _ => false,
    }
}

fn mr_json(face: &Face, view: &PullView) -> Value {
    let pull = &view.pull;
    let author = json!({"id": 1, "username": face.owner, "name": face.owner, "state": "active"});
    let (state, merged_at, closed_at, merge_commit) = match &pull.status {
        Status::Open => ("opened", None, None, None),
        Status::Closed { at } => ("closed", None, Some(rfc3339(*at)), None),
        Status::Merged { commit, at } => ("merged", Some(rfc3339(*at)), None, Some(commit.clone())),
    };
    let detailed = match (&pull.status, view.mergeable, &view.gate) {
        (Status::Open, Some(false), _) => "conflict",
        (Status::Open, _, Gate::Waiting(_)) => "ci_still_running",
        (Status::Open, _, Gate::Failing(_)) => "ci_must_pass",
        (Status::Open, Some(true), Gate::Green) => "mergeable",
        (Status::Open, None, _) => "broken_status",
        _ => "not_open",
    };
    json!({
        "id": 1000 + pull.number,
        "iid": pull.number,
        "project_id": PROJECT_ID,
        "title": pull.title,
        "description": pull.body,
        "state": state,
        "created_at": rfc3339(pull.created_at),
        "updated_at": rfc3339(pull.updated_at),
        "merged_at": merged_at,
        "closed_at": closed_at,
        "merged_by": if merge_commit.is_some() { author.clone() } else { Value::Null },
        "target_branch": pull.base,
        "source_branch": pull.head,
        "source_project_id": PROJECT_ID,
        "target_project_id": PROJECT_ID,
        "author": author,
        "draft": false,
        "work_in_progress": false,
        "merge_when_pipeline_succeeds": pull.auto_merge.is_some(),
        "merge_status": if view.mergeable == Some(false) { "cannot_be_merged" } else { "can_be_merged" },
        "detailed_merge_status": detailed,
        "has_conflicts": view.mergeable == Some(false),
        "sha": view.head_sha,
        "merge_commit_sha": merge_commit,
        "squash_commit_sha": null,
        "squash": pull.auto_merge == Some(MergeMethod::Squash),
        "web_url": format!("{}/{}/-/merge_requests/{}", face.web, face.project_path(), pull.number),
        "references": {
            "short": format!("!{}", pull.number),
            "full": format!("{}!{}", face.project_path(), pull.number),
        },
        "diff_refs": {"base_sha": view.base_sha, "head_sha": view.head_sha, "start_sha": view.base_sha},
    })
}

async fn answer(face: &Face, iid: u64, status: StatusCode) -> Response {
    match face.view(iid).await {
        Ok(Some(view)) => (status, axum::Json(mr_json(face, &view))).into_response(),
        Ok(None) => not_found("Not found"),
        Err(e) => message(StatusCode::INTERNAL_SERVER_ERROR, json!(e)),
    }
}

async fn create(
    State(face): Shared,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    if !is_project(&face, &id) {
        return not_found("Project Not Found");
    }
    let p = match params(query, &body) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let missing: Vec<&str> = ["source_branch", "target_branch", "title"]
        .into_iter()
        .filter(|k| text(&p, k).is_none())
        .collect();
    if !missing.is_empty() {
        let error = missing
            .iter()
            .map(|k| format!("{k} is missing"))
            .collect::<Vec<_>>()
            .join(", ");
        return (StatusCode::BAD_REQUEST, axum::Json(json!({"error": error}))).into_response();
    }
    let (source, target) = (
        text(&p, "source_branch").unwrap_or_default(),
        text(&p, "target_branch").unwrap_or_default(),
    );
    let title = text(&p, "title").unwrap_or_default();
    let description = text(&p, "description").unwrap_or_default();
    match face.open(source, target, title, description, false).await {
        Ok(iid) => answer(&face, iid, StatusCode::CREATED).await,
        Err(OpenError::Exists(iid)) => message(
            StatusCode::CONFLICT,
            json!([format!(
                "Another open merge request already exists for this source branch: !{iid}"
            )]),
        ),
        Err(OpenError::SameBranch) => message(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!(["You can't use same project/branch for source and target"]),
        ),
        Err(OpenError::NoBranch(which, name)) => {
            let side = if which == "head" { "Source" } else { "Target" };
            message(
                StatusCode::UNPROCESSABLE_ENTITY,
                json!([format!("{side} branch \"{name}\" does not exist")]),
            )
        }
        Err(OpenError::NoCommits) => message(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!([format!(
                "{source} has no commits that {target} does not have"
            )]),
        ),
        Err(OpenError::Invalid(e)) => message(StatusCode::UNPROCESSABLE_ENTITY, json!([e])),
        Err(OpenError::Git(e)) => message(StatusCode::INTERNAL_SERVER_ERROR, json!(e)),
    }
}

fn iid_of(face: &Face, id: &str, iid: &str) -> Result<u64, Box<Response>> {
    if !is_project(face, id) {
        return Err(Box::new(not_found("Project Not Found")));
    }
    iid.parse().map_err(|_| Box::new(not_found("Not found")))
}

async fn read(State(face): Shared, Path((id, iid)): Path<(String, String)>) -> Response {
    match iid_of(&face, &id, &iid) {
        Ok(iid) => answer(&face, iid, StatusCode::OK).await,
        Err(r) => *r,
    }
}

/// `PUT` with `state_event=close` closes; other attributes are accepted and left unchanged.
async fn update(
    State(face): Shared,
    Path((id, iid)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let iid = match iid_of(&face, &id, &iid) {
        Ok(n) => n,
        Err(r) => return *r,
    };
    let p = match params(query, &body) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    match text(&p, "state_event") {
        None => {}
        Some("close") => {
            if let Err(None) = face.close(iid).await {
                return not_found("Not found");
            }
        }
        Some(other) => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": format!("state_event {other:?} is not served by the sandbox forge")})),
            )
                .into_response();
        }
    }
    answer(&face, iid, StatusCode::OK).await
}

fn not_allowed() -> Response {
    message(
        StatusCode::METHOD_NOT_ALLOWED,
        json!("405 Method Not Allowed"),
    )
}

async fn merge(
    State(face): Shared,
    Path((id, iid)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let iid = match iid_of(&face, &id, &iid) {
        Ok(n) => n,
        Err(r) => return *r,
    };
    let p = match params(query, &body) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let method = if flag(&p, "squash") {
        MergeMethod::Squash
    } else {
        MergeMethod::Merge
    };
    let expected = text(&p, "sha");
    // `auto_merge` (GitLab 17.11 on) or the older `merge_when_pipeline_succeeds`.
    if flag(&p, "auto_merge") || flag(&p, "merge_when_pipeline_succeeds") {
        let view = match face.view(iid).await {
            Ok(Some(v)) => v,
            Ok(None) => return not_found("Not found"),
            Err(e) => return message(StatusCode::INTERNAL_SERVER_ERROR, json!(e)),
        };
        if !view.pull.is_open() || matches!(view.gate, Gate::Failing(_)) {
            return not_allowed();
        }
        if expected.is_some_and(|e| Some(e) != view.head_sha.as_deref()) {
            return sha_mismatch();
        }
        return match face.arm(iid, method, false, true).await {
            Ok(_) => answer(&face, iid, StatusCode::OK).await,
            Err(ArmError::NotFound) => not_found("Not found"),
            Err(ArmError::Refused(
                ArmRefusal::NotAllowed | ArmRefusal::NotOpen | ArmRefusal::Clean,
            )) => not_allowed(),
            Err(ArmError::Merge(e)) => merge_error(e),
            Err(ArmError::Git(e)) => message(StatusCode::INTERNAL_SERVER_ERROR, json!(e)),
        };
    }
    match face.merge(iid, method, expected, true).await {
        Ok(_) => answer(&face, iid, StatusCode::OK).await,
        Err(e) => merge_error(e),
    }
}

fn sha_mismatch() -> Response {
    message(
        StatusCode::CONFLICT,
        json!("SHA does not match HEAD of source branch"),
    )
}

fn merge_error(e: MergeError) -> Response {
    match e {
        MergeError::NotFound => not_found("Not found"),
        MergeError::HeadMoved => sha_mismatch(),
        MergeError::NotOpen | MergeError::HeadGone | MergeError::Checks(_) => not_allowed(),
        MergeError::Conflict | MergeError::BaseMoved => {
            message(StatusCode::NOT_ACCEPTABLE, json!("Branch cannot be merged"))
        }
        MergeError::Git(e) => message(StatusCode::INTERNAL_SERVER_ERROR, json!(e)),
    }
}
