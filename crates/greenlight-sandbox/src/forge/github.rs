//! GitHub's face: the REST pull-request routes (`/repos/{owner}/{repo}/pulls…`, under
//! `/api/v3` as GitHub Enterprise Server serves them, and at the root as `api.github.com`
//! does) and the one GraphQL mutation auto-merge needs, `enablePullRequestAutoMerge` — GitHub
//! has no REST route to enable auto-merge. Bodies and errors in GitHub's shapes:
//! `{"message","documentation_url"}`, `422 Validation Failed` with `errors[]`.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde_json::{Value, json};

use super::board::{ArmRefusal, Gate, MergeMethod, Status};
use super::{ArmError, Face, MergeError, OpenError, PullView, json_body, rfc3339};

type Shared = State<Arc<Face>>;

const DOCS: &str = "https://docs.github.com/rest/pulls/pulls";

pub(super) fn router(face: Arc<Face>) -> Router {
    let rest = Router::new()
        .route("/repos/{owner}/{repo}/pulls", post(create))
        .route(
            "/repos/{owner}/{repo}/pulls/{number}",
            get(read).patch(update),
        )
        .route("/repos/{owner}/{repo}/pulls/{number}/merge", put(merge));
    let api = Router::new()
        .merge(rest.clone())
        .nest("/api/v3", rest)
        .route("/graphql", post(graphql))
        .route("/api/graphql", post(graphql))
        .route_layer(middleware::from_fn_with_state(face.clone(), auth));
    api.with_state(face)
}

fn error(status: StatusCode, message: &str, docs: &str) -> Response {
    (
        status,
        axum::Json(json!({"message": message, "documentation_url": docs})),
    )
        .into_response()
}

fn validation(errors: Value, docs: &str) -> Response {
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        axum::Json(
            json!({"message": "Validation Failed", "errors": errors, "documentation_url": docs}),
        ),
    )
        .into_response()
}

fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "Not Found", DOCS)
}

/// `Authorization: Bearer <t>` or `token <t>`; GitHub answers 401 `Bad credentials` to a
/// wrong token.
async fn auth(State(face): Shared, request: Request, next: Next) -> Response {
    let docs = if request.uri().path().ends_with("graphql") {
        "https://docs.github.com/graphql"
    } else {
        "https://docs.github.com/rest"
    };
    match super::authorization_token(request.headers(), &["bearer", "token"]) {
        Some(token) if face.token_is(token) => next.run(request).await,
        Some(_) => error(StatusCode::UNAUTHORIZED, "Bad credentials", docs),
        None => error(StatusCode::UNAUTHORIZED, "Requires authentication", docs),
    }
}

fn node_id(number: u64) -> String {
    format!("PR_sandbox_{number}")
}

fn number_of_node(id: &str) -> Option<u64> {
    id.strip_prefix("PR_sandbox_")?.parse().ok()
}

fn method_name(method: MergeMethod) -> &'static str {
    match method {
        MergeMethod::Merge => "merge",
        MergeMethod::Squash => "squash",
    }
}

fn pull_json(face: &Face, view: &PullView) -> Value {
    let pull = &view.pull;
    let api = format!("{}/api/v3/repos/{}", face.web, face.project_path());
    let user = json!({"login": face.owner, "type": "User"});
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
    let mergeable_state = match (&pull.status, view.mergeable, &view.gate) {
        (Status::Open, Some(false), _) => "dirty",
        (Status::Open, Some(true), Gate::Green) => "clean",
        (Status::Open, Some(true), _) => "blocked",
        _ => "unknown",
    };
    let side = |branch: &str, sha: &Option<String>| {
        json!({
            "label": format!("{}:{branch}", face.owner),
            "ref": branch,
            "sha": sha,
            "user": user,
            "repo": {"name": face.name, "full_name": face.project_path()},
        })
    };
    json!({
        "url": format!("{api}/pulls/{}", pull.number),
        "id": pull.number,
        "node_id": node_id(pull.number),
        "html_url": format!("{}/{}/pull/{}", face.web, face.project_path(), pull.number),
        "number": pull.number,
        "state": state,
        "locked": false,
        "title": pull.title,
        "body": pull.body,
        "user": user,
        "created_at": rfc3339(pull.created_at),
        "updated_at": rfc3339(pull.updated_at),
        "closed_at": closed_at,
        "merged_at": merged_at,
        "merge_commit_sha": merge_commit,
        "head": side(&pull.head, &view.head_sha),
        "base": side(&pull.base, &view.base_sha),
        "draft": false,
        "merged": merged,
        "mergeable": view.mergeable,
        "mergeable_state": mergeable_state,
        "merged_by": if merged { user.clone() } else { Value::Null },
        "auto_merge": pull.auto_merge.map(|m| json!({
            "enabled_by": user,
            "merge_method": method_name(m),
            "commit_title": null,
            "commit_message": null,
        })),
    })
}

async fn answer_pull(face: &Face, number: u64, status: StatusCode) -> Response {
    match face.view(number).await {
        Ok(Some(view)) => (status, axum::Json(pull_json(face, &view))).into_response(),
        Ok(None) => not_found(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e, DOCS),
    }
}

fn text<'a>(body: &'a Value, key: &str) -> Option<&'a str> {
    body.get(key).and_then(Value::as_str)
}

async fn create(
    State(face): Shared,
    Path((owner, repo)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    if !face.is_repo(&owner, &repo) {
        return not_found();
    }
    let docs = format!("{DOCS}#create-a-pull-request");
    let body = match json_body(&body) {
        Ok(b) => b,
        Err(_) => return error(StatusCode::BAD_REQUEST, "Problems parsing JSON", &docs),
    };
    // `head` may be `owner:branch`; only this repository's own branches exist here.
    let head = text(&body, "head").map(|h| h.split_once(':').map_or(h, |(_, b)| b));
    let (Some(head), Some(base)) = (head, text(&body, "base")) else {
        let field = if text(&body, "head").is_none() {
            "head"
        } else {
            "base"
        };
        return validation(
            json!([{"resource": "PullRequest", "field": field, "code": "missing_field"}]),
            &docs,
        );
    };
    let title = text(&body, "title").unwrap_or_default();
    let description = text(&body, "body").unwrap_or_default();
    match face.open(head, base, title, description, true).await {
        Ok(number) => answer_pull(&face, number, StatusCode::CREATED).await,
        Err(OpenError::Exists(_)) => validation(
            json!([{"resource": "PullRequest", "code": "custom",
                    "message": format!("A pull request already exists for {owner}:{head}.")}]),
            &docs,
        ),
        Err(OpenError::NoCommits | OpenError::SameBranch) => validation(
            json!([{"resource": "PullRequest", "code": "custom",
                    "message": format!("No commits between {base} and {head}")}]),
            &docs,
        ),
        Err(OpenError::NoBranch(field, _)) => validation(
            json!([{"resource": "PullRequest", "field": field, "code": "invalid"}]),
            &docs,
        ),
        Err(OpenError::Invalid(_)) => validation(
            json!([{"resource": "PullRequest", "field": "head", "code": "invalid"}]),
            &docs,
        ),
        Err(OpenError::Git(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e, &docs),
    }
}

async fn read(
    State(face): Shared,
    Path((owner, repo, number)): Path<(String, String, String)>,
) -> Response {
    match (face.is_repo(&owner, &repo), number.parse::<u64>()) {
        (true, Ok(number)) => answer_pull(&face, number, StatusCode::OK).await,
        _ => not_found(),
    }
}

/// `PATCH` with `{"state":"closed"}` closes; other fields are accepted and left as they were.
async fn update(
    State(face): Shared,
    Path((owner, repo, number)): Path<(String, String, String)>,
    body: Bytes,
) -> Response {
    let docs = format!("{DOCS}#update-a-pull-request");
    let (true, Ok(number)) = (face.is_repo(&owner, &repo), number.parse::<u64>()) else {
        return not_found();
    };
    let body = match json_body(&body) {
        Ok(b) => b,
        Err(_) => return error(StatusCode::BAD_REQUEST, "Problems parsing JSON", &docs),
    };
    match text(&body, "state") {
        None => {}
        Some("closed") => {
            if let Err(None) = face.close(number).await {
                return not_found();
            }
        }
        Some(other) => {
            return validation(
                json!([{"resource": "PullRequest", "field": "state", "code": "invalid",
                        "message": format!("the sandbox forge does not set state {other:?}")}]),
                &docs,
            );
        }
    }
    answer_pull(&face, number, StatusCode::OK).await
}

async fn merge(
    State(face): Shared,
    Path((owner, repo, number)): Path<(String, String, String)>,
    body: Bytes,
) -> Response {
    let docs = format!("{DOCS}#merge-a-pull-request");
    let (true, Ok(number)) = (face.is_repo(&owner, &repo), number.parse::<u64>()) else {
        return not_found();
    };
    let body = match json_body(&body) {
        Ok(b) => b,
        Err(_) => return error(StatusCode::BAD_REQUEST, "Problems parsing JSON", &docs),
    };
    let method = match text(&body, "merge_method").unwrap_or("merge") {
        "merge" => MergeMethod::Merge,
        "squash" => MergeMethod::Squash,
        "rebase" => {
            return error(
                StatusCode::METHOD_NOT_ALLOWED,
                "the sandbox forge does not rebase: use merge or squash",
                &docs,
            );
        }
        _ => {
            return validation(
                json!([{"resource": "PullRequest", "field": "merge_method", "code": "invalid"}]),
                &docs,
            );
        }
    };
    let expected = text(&body, "sha");
    match face.merge(number, method, expected, true).await {
        Ok(sha) => axum::Json(json!({
            "sha": sha,
            "merged": true,
            "message": "Pull Request successfully merged",
        }))
        .into_response(),
        Err(MergeError::NotFound) => not_found(),
        Err(MergeError::HeadMoved) => error(
            StatusCode::CONFLICT,
            "Head branch was modified. Review and try the merge again.",
            &docs,
        ),
        Err(MergeError::Checks(Gate::Failing(ctx))) => error(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!("Required status check \"{ctx}\" is failing."),
            "https://docs.github.com/articles/about-protected-branches",
        ),
        Err(MergeError::Checks(gate)) => {
            let ctx = match gate {
                Gate::Waiting(c) | Gate::Failing(c) => c,
                Gate::Green => String::new(),
            };
            error(
                StatusCode::METHOD_NOT_ALLOWED,
                &format!("Required status check \"{ctx}\" is expected."),
                "https://docs.github.com/articles/about-protected-branches",
            )
        }
        Err(MergeError::BaseMoved) => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "Base branch was modified. Review and try the merge again.",
            &docs,
        ),
        Err(MergeError::NotOpen | MergeError::HeadGone | MergeError::Conflict) => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "Pull Request is not mergeable",
            &docs,
        ),
        Err(MergeError::Git(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e, &docs),
    }
}

fn graphql_error(kind: &str, message: &str) -> Response {
    axum::Json(json!({
        "data": {"enablePullRequestAutoMerge": null},
        "errors": [{
            "type": kind,
            "path": ["enablePullRequestAutoMerge"],
            "locations": [{"line": 1, "column": 1}],
            "message": message,
        }],
    }))
    .into_response()
}

/// `POST /graphql`: only `enablePullRequestAutoMerge`, its input read from
/// `variables.input` (`pullRequestId`, `mergeMethod`). GraphQL answers 200 even for errors.
async fn graphql(State(face): Shared, body: Bytes) -> Response {
    let docs = "https://docs.github.com/graphql";
    let Ok(body) = json_body(&body) else {
        return error(StatusCode::BAD_REQUEST, "Problems parsing JSON", docs);
    };
    let query = text(&body, "query").unwrap_or_default();
    if !query.contains("enablePullRequestAutoMerge") {
        return axum::Json(json!({"errors": [{"message":
            "the sandbox forge serves only the enablePullRequestAutoMerge mutation"}]}))
        .into_response();
    }
    let input = body
        .get("variables")
        .and_then(|v| v.get("input"))
        .cloned()
        .unwrap_or(Value::Null);
    let Some(id) = input.get("pullRequestId").and_then(Value::as_str) else {
        return axum::Json(json!({"errors": [{"message":
            "the sandbox forge reads enablePullRequestAutoMerge's input from variables.input, which has no pullRequestId"}]}))
        .into_response();
    };
    let method = match input
        .get("mergeMethod")
        .and_then(Value::as_str)
        .unwrap_or("MERGE")
    {
        "MERGE" => MergeMethod::Merge,
        "SQUASH" => MergeMethod::Squash,
        other => {
            return graphql_error(
                "UNPROCESSABLE",
                &format!("the sandbox forge does not auto-merge with {other}"),
            );
        }
    };
    let Some(number) = number_of_node(id) else {
        return graphql_error(
            "NOT_FOUND",
            &format!("Could not resolve to a node with the global id of '{id}'"),
        );
    };
    match face.arm(number, method, true, false).await {
        Ok(_) => match face.view(number).await {
            Ok(Some(view)) => axum::Json(json!({"data": {"enablePullRequestAutoMerge": {
                "clientMutationId": null,
                "pullRequest": {
                    "id": node_id(number),
                    "number": number,
                    "state": if view.pull.is_open() { "OPEN" } else { "MERGED" },
                    "autoMergeRequest": view.pull.auto_merge.map(|m| json!({
                        "mergeMethod": method_name(m).to_ascii_uppercase(),
                        "enabledAt": rfc3339(view.pull.updated_at),
                    })),
                },
            }}}))
            .into_response(),
            _ => graphql_error("NOT_FOUND", "the pull request is gone"),
        },
        Err(ArmError::NotFound) => graphql_error(
            "NOT_FOUND",
            &format!("Could not resolve to a node with the global id of '{id}'"),
        ),
        Err(ArmError::Refused(ArmRefusal::NotAllowed)) => graphql_error(
            "UNPROCESSABLE",
            "Auto merge is not allowed for this repository",
        ),
        Err(ArmError::Refused(ArmRefusal::Clean)) => graphql_error(
            "UNPROCESSABLE",
            "Pull request Pull request is in clean status",
        ),
        Err(ArmError::Refused(ArmRefusal::NotOpen)) => {
            graphql_error("UNPROCESSABLE", "Pull request is closed")
        }
        Err(ArmError::Merge(e)) => graphql_error("UNPROCESSABLE", &format!("{e:?}")),
        Err(ArmError::Git(e)) => graphql_error("INTERNAL", &e),
    }
}
