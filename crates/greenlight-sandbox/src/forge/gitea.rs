//! Gitea's face: the pull-request routes of API v1 (`/api/v1/repos/{owner}/{repo}/pulls…`),
//! with Gitea's answers as its `routers/api/v1/repo/pull.go` writes them: errors
//! `{"message","url"}`, a merge that answers 200 with no body (201 when auto-merge was
//! scheduled instead), a conflict answered with the merge error's own JSON, a close that
//! answers 201.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::board::{ArmRefusal, Gate, MergeMethod, Status};
use super::{ArmError, Face, MergeError, OpenError, PullView, json_body, rfc3339};

type Shared = State<Arc<Face>>;

pub(super) fn router(face: Arc<Face>) -> Router {
    Router::new()
        .route("/api/v1/repos/{owner}/{repo}/pulls", post(create))
        .route(
            "/api/v1/repos/{owner}/{repo}/pulls/{index}",
            get(read).patch(update),
        )
        .route(
            "/api/v1/repos/{owner}/{repo}/pulls/{index}/merge",
            post(merge),
        )
        .route_layer(middleware::from_fn_with_state(face.clone(), auth))
        .with_state(face)
}

fn error(face: &Face, status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"message": message, "url": format!("{}/api/swagger", face.web)})),
    )
        .into_response()
}

fn not_found(face: &Face) -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({
            "message": "The target couldn't be found.",
            "url": format!("{}/api/swagger", face.web),
            "errors": [],
        })),
    )
        .into_response()
}

/// `Authorization: token <t>` (or `Bearer <t>`); anything else is 401.
async fn auth(State(face): Shared, request: Request, next: Next) -> Response {
    match super::authorization_token(request.headers(), &["token", "bearer"]) {
        Some(token) if face.token_is(token) => next.run(request).await,
        _ => error(
            &face,
            StatusCode::UNAUTHORIZED,
            "user does not exist [uid: 0, name: , keyid: 0]",
        ),
    }
}

fn pull_json(face: &Face, view: &PullView) -> Value {
    let pull = &view.pull;
    let user = json!({"id": 1, "login": face.owner, "username": face.owner});
    let (state, merged, merged_at, closed_at, merge_commit) = match &pull.status {
        Status::Open => ("open", false, None, None, None),
        Status::Closed { at } => ("closed", false, None, Some(rfc3339(*at)), None),
        Status::Merged { commit, at } => (
            "closed",
            true,
            Some(rfc3339(*at)),
            Some(rfc3339(*at)),
            Some(commit.clone()),
        ),
    };
    let html = format!("{}/{}/pulls/{}", face.web, face.project_path(), pull.number);
    let repo = json!({"id": 1, "name": face.name, "full_name": face.project_path(), "owner": user});
    let side = |branch: &str, sha: &Option<String>| json!({"label": branch, "ref": branch, "sha": sha, "repo_id": 1, "repo": repo});
    json!({
        "id": pull.number,
        "url": html,
        "number": pull.number,
        "user": user,
        "title": pull.title,
        "body": pull.body,
        "state": state,
        "draft": false,
        "html_url": html,
        "diff_url": format!("{html}.diff"),
        "patch_url": format!("{html}.patch"),
        "mergeable": view.mergeable.unwrap_or(false),
        "merged": merged,
        "merged_at": merged_at,
        "merge_commit_sha": merge_commit,
        "merged_by": if merged { user.clone() } else { Value::Null },
        "base": side(&pull.base, &view.base_sha),
        "head": side(&pull.head, &view.head_sha),
        "created_at": rfc3339(pull.created_at),
        "updated_at": rfc3339(pull.updated_at),
        "closed_at": closed_at,
    })
}

async fn answer(face: &Face, number: u64, status: StatusCode) -> Response {
    match face.view(number).await {
        Ok(Some(view)) => (status, axum::Json(pull_json(face, &view))).into_response(),
        Ok(None) => not_found(face),
        Err(e) => error(face, StatusCode::INTERNAL_SERVER_ERROR, &e),
    }
}

fn text<'a>(body: &'a Value, key: &str) -> Option<&'a str> {
    body.get(key).and_then(Value::as_str)
}

fn body_of(face: &Face, bytes: &Bytes) -> Result<Value, Box<Response>> {
    json_body(bytes).map_err(|e| Box::new(error(face, StatusCode::UNPROCESSABLE_ENTITY, &e)))
}

const NO_CHANGES: &str = "Invalid PullRequest: There are no changes between the head and the base";

async fn create(
    State(face): Shared,
    Path((owner, repo)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    if !face.is_repo(&owner, &repo) {
        return not_found(&face);
    }
    let body = match body_of(&face, &body) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    let (Some(head), Some(base)) = (text(&body, "head"), text(&body, "base")) else {
        return error(
            &face,
            StatusCode::UNPROCESSABLE_ENTITY,
            "head and base are required",
        );
    };
    let head = head.split_once(':').map_or(head, |(_, b)| b);
    let title = text(&body, "title").unwrap_or_default();
    let description = text(&body, "body").unwrap_or_default();
    match face.open(head, base, title, description, true).await {
        Ok(number) => answer(&face, number, StatusCode::CREATED).await,
        Err(OpenError::Exists(number)) => error(
            &face,
            StatusCode::CONFLICT,
            &format!(
                "pull request already exists for these targets [id: {number}, issue_id: {number}, head_repo_id: 1, base_repo_id: 1, head_branch: {head}, base_branch: {base}]"
            ),
        ),
        Err(OpenError::SameBranch | OpenError::NoCommits) => {
            error(&face, StatusCode::UNPROCESSABLE_ENTITY, NO_CHANGES)
        }
        Err(OpenError::NoBranch(..)) => not_found(&face),
        Err(OpenError::Invalid(e)) => error(&face, StatusCode::UNPROCESSABLE_ENTITY, &e),
        Err(OpenError::Git(e)) => error(&face, StatusCode::INTERNAL_SERVER_ERROR, &e),
    }
}

fn index_of(face: &Face, owner: &str, repo: &str, index: &str) -> Result<u64, Box<Response>> {
    match (face.is_repo(owner, repo), index.parse::<u64>()) {
        (true, Ok(n)) => Ok(n),
        _ => Err(Box::new(not_found(face))),
    }
}

async fn read(
    State(face): Shared,
    Path((owner, repo, index)): Path<(String, String, String)>,
) -> Response {
    match index_of(&face, &owner, &repo, &index) {
        Ok(n) => answer(&face, n, StatusCode::OK).await,
        Err(r) => *r,
    }
}

/// `PATCH` with `{"state":"closed"}` closes (201, as Gitea answers); a merged pull request's
/// state cannot change (412). Other fields are accepted and left unchanged.
async fn update(
    State(face): Shared,
    Path((owner, repo, index)): Path<(String, String, String)>,
    body: Bytes,
) -> Response {
    let number = match index_of(&face, &owner, &repo, &index) {
        Ok(n) => n,
        Err(r) => return *r,
    };
    let body = match body_of(&face, &body) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    match text(&body, "state") {
        None => {}
        Some("closed") => match face.close(number).await {
            Ok(()) | Err(Some(Status::Closed { .. })) => {}
            Err(Some(_)) => {
                return error(
                    &face,
                    StatusCode::PRECONDITION_FAILED,
                    "cannot change state of this pull request, it was already merged",
                );
            }
            Err(None) => return not_found(&face),
        },
        Some(other) => {
            return error(
                &face,
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("the sandbox forge does not set state {other:?}"),
            );
        }
    }
    answer(&face, number, StatusCode::CREATED).await
}

async fn merge(
    State(face): Shared,
    Path((owner, repo, index)): Path<(String, String, String)>,
    body: Bytes,
) -> Response {
    let number = match index_of(&face, &owner, &repo, &index) {
        Ok(n) => n,
        Err(r) => return *r,
    };
    let body = match body_of(&face, &body) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    let method = match text(&body, "Do").unwrap_or("merge") {
        "" | "merge" => MergeMethod::Merge,
        "squash" => MergeMethod::Squash,
        other => {
            return error(
                &face,
                StatusCode::METHOD_NOT_ALLOWED,
                &format!("{other} is not allowed an allowed merge style for this repository"),
            );
        }
    };
    let view = match face.view(number).await {
        Ok(Some(v)) => v,
        Ok(None) => return not_found(&face),
        Err(e) => return error(&face, StatusCode::INTERNAL_SERVER_ERROR, &e),
    };
    match &view.pull.status {
        Status::Open => {}
        // Gitea: a closed pull request is not found for merging; a merged one is 405.
        Status::Closed { .. } => return not_found(&face),
        Status::Merged { .. } => return error(&face, StatusCode::METHOD_NOT_ALLOWED, ""),
    }
    let expected = text(&body, "head_commit_id").filter(|s| !s.is_empty());
    let auto = body
        .get("merge_when_checks_succeed")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if auto {
        if view.pull.auto_merge.is_some() {
            return error(
                &face,
                StatusCode::CONFLICT,
                "pull request is already scheduled to auto merge when checks succeed",
            );
        }
        if expected.is_some_and(|e| Some(e) != view.head_sha.as_deref()) {
            return error(&face, StatusCode::CONFLICT, "head out of date");
        }
        return match face.arm(number, method, false, true).await {
            Ok(Some(_)) => StatusCode::OK.into_response(),
            Ok(None) => StatusCode::CREATED.into_response(),
            Err(ArmError::NotFound) => not_found(&face),
            Err(ArmError::Refused(ArmRefusal::NotAllowed)) => error(
                &face,
                StatusCode::METHOD_NOT_ALLOWED,
                "auto merge is not allowed for this repository (the sandbox forge's --no-auto-merge)",
            ),
            Err(ArmError::Refused(ArmRefusal::NotOpen | ArmRefusal::Clean)) => {
                error(&face, StatusCode::METHOD_NOT_ALLOWED, "")
            }
            Err(ArmError::Merge(e)) => merge_error(&face, e, method),
            Err(ArmError::Git(e)) => error(&face, StatusCode::INTERNAL_SERVER_ERROR, &e),
        };
    }
    match face.merge(number, method, expected, true).await {
        Ok(_) => StatusCode::OK.into_response(),
        Err(e) => merge_error(&face, e, method),
    }
}

fn merge_error(face: &Face, e: MergeError, method: MergeMethod) -> Response {
    match e {
        MergeError::NotFound => not_found(face),
        MergeError::NotOpen => error(face, StatusCode::METHOD_NOT_ALLOWED, ""),
        MergeError::HeadMoved => error(face, StatusCode::CONFLICT, "head out of date"),
        MergeError::BaseMoved => error(face, StatusCode::CONFLICT, "merge push out of date"),
        MergeError::Checks(Gate::Green) | MergeError::HeadGone => error(
            face,
            StatusCode::METHOD_NOT_ALLOWED,
            "Please try again later",
        ),
        MergeError::Checks(_) => error(
            face,
            StatusCode::METHOD_NOT_ALLOWED,
            "Not all required status checks successful",
        ),
        // Gitea answers a conflict with the merge error itself as JSON.
        MergeError::Conflict => (
            StatusCode::CONFLICT,
            axum::Json(json!({
                "Style": if method == MergeMethod::Squash { "squash" } else { "merge" },
                "StdOut": "",
                "StdErr": "CONFLICT (content): merge conflict",
                "Err": {},
            })),
        )
            .into_response(),
        MergeError::Git(e) => error(face, StatusCode::INTERNAL_SERVER_ERROR, &e),
    }
}
