//! The forge face on the wire: each flavour's status codes and bodies as its clients see them
//! (the client crate's tests cover the flows; these pin the shapes the fidelity rows cite).

use greenlight_sandbox::forge::{self, Forge, ForgeConfig, ForgeKind};
use greenlight_testkit::Remote;
use serde_json::{Value, json};

const TOKEN: &str = "face-token-0123";

async fn start(kind: ForgeKind) -> (Remote, Forge) {
    // reqwest is built without a default TLS provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let remote = Remote::new("main");
    remote.write("app.yaml", "image: web:1\n");
    remote.commit_push("first");
    remote.git(&["checkout", "-q", "-b", "promote"]);
    remote.write("app.yaml", "image: web:2\n");
    remote.commit_push("promote");
    let mut config = ForgeConfig::new(kind, &remote.bare, "127.0.0.1:0".parse().unwrap(), TOKEN);
    config.project = "acme/deploy".into();
    config.protected = vec!["main".into()];
    config.required_checks = vec!["ci".into()];
    config.log = None;
    let forge = forge::serve(config).await.unwrap();
    (remote, forge)
}

/// Sends `method` to `url` with `headers` and a JSON `body`; the status and the body (JSON
/// when it parses, else a string).
async fn call(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = reqwest::Client::new().request(method.parse().unwrap(), url);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_answers_in_githubs_shapes_under_api_v3_and_at_the_root() {
    let (_remote, forge) = start(ForgeKind::GitHub).await;
    let api = forge.api_url();
    let pulls = format!("{api}/repos/acme/deploy/pulls");
    let auth = [("Authorization", "Bearer face-token-0123")];

    let (status, body) = call("GET", &format!("{pulls}/1"), &[], None).await;
    assert_eq!(
        (status, body["message"].as_str()),
        (401, Some("Requires authentication"))
    );
    let (status, body) = call(
        "GET",
        &format!("{pulls}/1"),
        &[("Authorization", "token wrong")],
        None,
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(
        body,
        json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
    );

    let open = json!({"head": "promote", "base": "main", "title": "Promote", "body": "b"});
    let (status, pr) = call("POST", &pulls, &auth, Some(open.clone())).await;
    assert_eq!(status, 201, "{pr}");
    assert_eq!(pr["number"], 1);
    assert_eq!(pr["state"], "open");
    assert_eq!(pr["merged"], false);
    assert_eq!(pr["mergeable"], true);
    assert_eq!(
        pr["mergeable_state"], "blocked",
        "the required check has not reported"
    );
    assert_eq!(pr["auto_merge"], Value::Null);
    assert_eq!(
        pr["html_url"],
        format!("{}/acme/deploy/pull/1", forge.url())
    );
    assert_eq!(pr["head"]["sha"].as_str().unwrap().len(), 40);
    let (status, body) = call("POST", &pulls, &auth, Some(open)).await;
    assert_eq!(status, 422);
    assert_eq!(body["message"], "Validation Failed");
    assert_eq!(
        body["errors"][0]["message"],
        "A pull request already exists for acme:promote."
    );

    // The root form, as api.github.com serves it, reaches the same pull request.
    let (status, same) = call(
        "GET",
        &format!("{}/repos/acme/deploy/pulls/1", forge.url()),
        &auth,
        None,
    )
    .await;
    assert_eq!((status, &same["number"]), (200, &json!(1)));

    let (status, body) = call("PUT", &format!("{pulls}/1/merge"), &auth, Some(json!({}))).await;
    assert_eq!(status, 405);
    assert_eq!(body["message"], "Required status check \"ci\" is expected.");

    let mutation = json!({
        "query": "mutation($input: EnablePullRequestAutoMergeInput!) { enablePullRequestAutoMerge(input: $input) { pullRequest { number } } }",
        "variables": {"input": {"pullRequestId": pr["node_id"], "mergeMethod": "MERGE"}},
    });
    let graphql = api.replace("/api/v3", "/api/graphql");
    let (status, body) = call("POST", &graphql, &auth, Some(mutation)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["data"]["enablePullRequestAutoMerge"]["pullRequest"]["autoMergeRequest"]["mergeMethod"],
        "MERGE"
    );
    let (_, armed) = call("GET", &format!("{pulls}/1"), &auth, None).await;
    assert_eq!(armed["auto_merge"]["merge_method"], "merge");

    let head = pr["head"]["sha"].as_str().unwrap();
    let (status, _) = call(
        "PUT",
        &format!("{pulls}/1/merge"),
        &auth,
        Some(json!({"sha": "0".repeat(40)})),
    )
    .await;
    assert_eq!(status, 409);
    forge.set_status(head, "ci", "success").await.unwrap();
    let (_, merged) = call("GET", &format!("{pulls}/1"), &auth, None).await;
    assert_eq!(merged["state"], "closed");
    assert_eq!(merged["merged"], true);
    assert_eq!(merged["auto_merge"], Value::Null);
    assert_eq!(merged["merge_commit_sha"].as_str().unwrap().len(), 40);
    forge.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitlab_answers_in_gitlabs_shapes_by_project_path_or_id() {
    let (_remote, forge) = start(ForgeKind::GitLab).await;
    let by_path = format!("{}/projects/acme%2Fdeploy/merge_requests", forge.api_url());
    let by_id = format!("{}/projects/1/merge_requests", forge.api_url());
    let auth = [("PRIVATE-TOKEN", TOKEN)];

    let (status, body) = call(
        "GET",
        &format!("{by_id}/1"),
        &[("PRIVATE-TOKEN", "nope")],
        None,
    )
    .await;
    assert_eq!(
        (status, body),
        (401, json!({"message": "401 Unauthorized"}))
    );
    let (status, body) = call(
        "POST",
        &by_path,
        &auth,
        Some(json!({"source_branch": "promote"})),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"], "target_branch is missing, title is missing");

    let open = json!({"source_branch": "promote", "target_branch": "main", "title": "Promote"});
    let (status, mr) = call(
        "POST",
        &by_path,
        &[("Authorization", "Bearer face-token-0123")],
        Some(open.clone()),
    )
    .await;
    assert_eq!(status, 201, "{mr}");
    assert_eq!(
        (mr["iid"].clone(), mr["state"].clone()),
        (json!(1), json!("opened"))
    );
    assert_eq!(
        mr["web_url"],
        format!("{}/acme/deploy/-/merge_requests/1", forge.url())
    );
    assert_eq!(mr["detailed_merge_status"], "ci_still_running");
    let (status, body) = call("POST", &by_id, &auth, Some(open)).await;
    assert_eq!(status, 409);
    assert_eq!(
        body["message"],
        json!(["Another open merge request already exists for this source branch: !1"])
    );

    let merge = format!("{by_id}/1/merge");
    let (status, body) = call("PUT", &merge, &auth, Some(json!({"sha": "0".repeat(40)}))).await;
    assert_eq!(
        (status, body["message"].as_str()),
        (409, Some("SHA does not match HEAD of source branch"))
    );
    let (status, body) = call("PUT", &merge, &auth, None).await;
    assert_eq!(
        (status, body["message"].as_str()),
        (405, Some("405 Method Not Allowed"))
    );
    // The older parameter, in the query string as curl users send it.
    let (status, armed) = call(
        "PUT",
        &format!("{merge}?merge_when_pipeline_succeeds=true"),
        &auth,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        (
            armed["state"].clone(),
            armed["merge_when_pipeline_succeeds"].clone()
        ),
        (json!("opened"), json!(true))
    );

    let (status, closed) = call(
        "PUT",
        &format!("{by_id}/1"),
        &auth,
        Some(json!({"state_event": "close"})),
    )
    .await;
    assert_eq!((status, closed["state"].as_str()), (200, Some("closed")));
    assert_eq!(closed["merge_when_pipeline_succeeds"], false);
    forge.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitea_answers_in_giteas_shapes() {
    let (_remote, forge) = start(ForgeKind::Gitea).await;
    let pulls = format!("{}/repos/acme/deploy/pulls", forge.api_url());
    let auth = [("Authorization", "token face-token-0123")];
    let swagger = format!("{}/api/swagger", forge.url());

    let (status, body) = call("GET", &format!("{pulls}/1"), &[], None).await;
    assert_eq!(status, 401);
    assert_eq!(body["url"], swagger.as_str());

    let open = json!({"head": "promote", "base": "main", "title": "Promote"});
    let (status, pr) = call("POST", &pulls, &auth, Some(open.clone())).await;
    assert_eq!(status, 201, "{pr}");
    assert_eq!(
        (
            pr["number"].clone(),
            pr["state"].clone(),
            pr["merged"].clone()
        ),
        (json!(1), json!("open"), json!(false))
    );
    let (status, body) = call("POST", &pulls, &auth, Some(open)).await;
    assert_eq!(status, 409);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("pull request already exists for these targets [id: 1, issue_id: 1,"),
        "{body}"
    );
    let (status, body) = call(
        "POST",
        &pulls,
        &auth,
        Some(json!({"head": "main", "base": "main"})),
    )
    .await;
    assert_eq!(
        (status, body["message"].as_str()),
        (
            422,
            Some("Invalid PullRequest: There are no changes between the head and the base")
        )
    );

    let merge = format!("{pulls}/1/merge");
    let (status, body) = call("POST", &merge, &auth, Some(json!({"Do": "rebase"}))).await;
    assert_eq!(
        (status, body["message"].as_str()),
        (
            405,
            Some("rebase is not allowed an allowed merge style for this repository")
        )
    );
    let (status, body) = call(
        "POST",
        &merge,
        &auth,
        Some(json!({"Do": "merge", "merge_when_checks_succeed": true})),
    )
    .await;
    assert_eq!((status, body), (201, json!("")), "scheduled");
    let (status, _) = call(
        "POST",
        &merge,
        &auth,
        Some(json!({"Do": "merge", "merge_when_checks_succeed": true})),
    )
    .await;
    assert_eq!(status, 409, "scheduled twice");
    let answer = reqwest::Client::new()
        .post(format!(
            "{}/sandbox/v1/forge/status?branch=promote&context=ci&state=success",
            forge.url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    let answer: Value = answer.json().await.unwrap();
    assert_eq!(answer["merged"], json!([1]));
    let (status, body) = call(
        "PATCH",
        &format!("{pulls}/1"),
        &auth,
        Some(json!({"state": "closed"})),
    )
    .await;
    assert_eq!(
        (status, body["message"].as_str()),
        (
            412,
            Some("cannot change state of this pull request, it was already merged")
        )
    );
    let (status, body) = call("POST", &merge, &auth, Some(json!({"Do": "merge"}))).await;
    assert_eq!((status, body["message"].as_str()), (405, Some("")));
    forge.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_routes_refuse_what_they_cannot_read_naming_the_parameter() {
    let (_remote, forge) = start(ForgeKind::GitHub).await;
    let base = format!("{}/sandbox/v1/forge", forge.url());
    for (url, needle) in [
        (
            format!("{base}/status?branch=promote&context=ci&state=green"),
            "state:",
        ),
        (
            format!("{base}/status?branch=promote&state=success"),
            "context:",
        ),
        (
            format!("{base}/status?context=ci&state=success"),
            "exactly one of sha",
        ),
        (format!("{base}/merge?number=x"), "number:"),
    ] {
        let (status, body) = call("POST", &url, &[], None).await;
        assert_eq!(status, 400, "{url}");
        assert!(
            body["message"].as_str().unwrap().contains(needle),
            "{url}: {body}"
        );
    }
    let (status, _) = call("POST", &format!("{base}/close?number=9"), &[], None).await;
    assert_eq!(status, 404);
    forge.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_configuration_names_its_flag() {
    let remote = Remote::new("main");
    remote.write("a", "1");
    remote.commit_push("first");
    let listen = "127.0.0.1:0".parse().unwrap();
    let mut not_bare = ForgeConfig::new(ForgeKind::GitHub, &remote.work, listen, TOKEN);
    not_bare.log = None;
    let err = forge::serve(not_bare).await.err().unwrap().to_string();
    assert!(
        err.starts_with("--repo:") && err.contains("not a bare repository"),
        "{err}"
    );
    let mut checks_alone = ForgeConfig::new(ForgeKind::GitHub, &remote.bare, listen, TOKEN);
    checks_alone.required_checks = vec!["ci".into()];
    let err = forge::serve(checks_alone).await.err().unwrap().to_string();
    assert!(err.starts_with("--require-check:"), "{err}");
    let mut project = ForgeConfig::new(ForgeKind::GitHub, &remote.bare, listen, TOKEN);
    project.project = "one-part".into();
    let err = forge::serve(project).await.err().unwrap().to_string();
    assert!(err.starts_with("--forge-project:"), "{err}");
    // A pre-receive hook of the user's is never overwritten.
    std::fs::write(remote.bare.join("hooks/pre-receive"), "#!/bin/sh\nexit 0\n").unwrap();
    let mut protect = ForgeConfig::new(ForgeKind::GitHub, &remote.bare, listen, TOKEN);
    protect.protected = vec!["main".into()];
    let err = forge::serve(protect).await.err().unwrap().to_string();
    assert!(
        err.starts_with("--protect:") && err.contains("not the sandbox forge's"),
        "{err}"
    );
    let debug = format!(
        "{:?}",
        ForgeConfig::new(ForgeKind::GitHub, &remote.bare, listen, TOKEN)
    );
    assert!(!debug.contains(TOKEN), "{debug}");
}
