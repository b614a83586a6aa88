//! `greenlight sandbox` run as a user runs it: a real git remote in a temporary directory, the
//! binary as a child process, the `sandbox listening on` line waited for, real HTTP, SIGTERM.

use greenlight_testkit::{Remote, Sandbox, healthy_at, http_request, http_send};
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_greenlight");
const T: Duration = Duration::from_secs(20);

/// A bare remote (`origin.git` in its temporary directory) whose `main` holds one Deployment
/// under `apps/web`, and its tip.
fn remote() -> (Remote, String) {
    let remote = Remote::new("main");
    let tip = remote
        .write(
            "apps/web/web.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n",
        )
        .commit_push("web");
    (remote, tip)
}

#[test]
fn sandbox_serves_the_argo_cd_api_and_stops_cleanly_on_sigterm() {
    let (remote, tip) = remote();
    let token_file = remote.path("token");
    std::fs::write(&token_file, "cli-s3cret\n").unwrap();

    let mut sb = Sandbox::spawn(
        BIN,
        Some(remote.root()),
        &[
            "sandbox",
            "--repo",
            "origin.git",
            "--listen",
            "127.0.0.1:0",
            "--app",
            "web=apps/web",
            "--sync-interval",
            "150ms",
            "--rollout-time",
            "300ms",
            "--token-file",
            token_file.to_str().unwrap(),
        ],
    );
    let url = sb.url.clone();
    assert!(
        url.starts_with("http://127.0.0.1:") && !url.ends_with(":0"),
        "{url}"
    );
    let app_url = format!("{url}/api/v1/applications/web");
    let anonymous = http_request("GET", &app_url, &[]).unwrap();
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    let authorized =
        http_request("GET", &app_url, &[("Authorization", "Bearer cli-s3cret")]).unwrap();
    assert_eq!(authorized.status, 200, "{}", authorized.body);
    let app: serde_json::Value = serde_json::from_str(&authorized.body).unwrap();
    assert_eq!(app["status"]["sync"]["status"], "Synced");
    assert_eq!(app["status"]["sync"]["revision"], tip.as_str());
    assert_eq!(
        app["spec"]["source"]["repoURL"], "origin.git",
        "the --repo value as given"
    );
    // A spec edit goes through the same gate.
    let edit = r#"{"patch":"{\"spec\":{\"info\":[{\"name\":\"a\",\"value\":\"b\"}]}}","patchType":"merge"}"#;
    let anonymous = http_send("PATCH", &app_url, &[], edit).unwrap();
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    let authorized = http_send(
        "PATCH",
        &app_url,
        &[("Authorization", "Bearer cli-s3cret")],
        edit,
    )
    .unwrap();
    assert_eq!(authorized.status, 200, "{}", authorized.body);
    // The rollout ends by itself and is logged as one line.
    sb.proc
        .wait_line("app web: health Progressing -> Healthy", T);

    sb.proc.sigterm();
    let status = sb.proc.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status}");
    let output = sb.proc.output();
    assert!(output.contains("app web: operation Succeeded"), "{output}");
    assert!(
        !output.contains("cli-s3cret"),
        "the token reached the log:\n{output}"
    );
    assert!(
        output.contains("the token is not JWT-shaped"),
        "a token Argo CD would refuse is pointed out:\n{output}"
    );
}

#[test]
fn sandbox_flags_choose_the_argo_cd_version_and_the_retry_back_off() {
    let (remote, _) = remote();
    let mut sb = Sandbox::spawn(
        BIN,
        Some(remote.root()),
        &[
            "sandbox",
            "--repo",
            "origin.git",
            "--listen",
            "127.0.0.1:0",
            "--app",
            "web=apps/web",
            "--app",
            "dry=hydrator:apps/web",
            "--argocd-version",
            "2.14",
            "--repo-error-grace",
            "2s",
            "--retry-backoff",
            "200ms",
        ],
    );
    let web = http_request("GET", &format!("{}/api/v1/applications/web", sb.url), &[]).unwrap();
    assert_eq!(web.status, 200, "{}", web.body);
    let web: serde_json::Value = serde_json::from_str(&web.body).unwrap();
    assert!(
        web["status"].get("resourceHealthSource").is_none(),
        "2.14 keeps resource health inline: {}",
        web["status"]
    );
    assert_eq!(
        web["spec"]["syncPolicy"]["retry"]["backoff"]["duration"],
        "200ms"
    );
    let dry = http_request("GET", &format!("{}/api/v1/applications/dry", sb.url), &[]).unwrap();
    let dry: serde_json::Value = serde_json::from_str(&dry.body).unwrap();
    assert_eq!(
        dry["spec"]["sourceHydrator"]["syncSource"]["targetBranch"],
        "environment/dry"
    );
    let missing =
        http_request("GET", &format!("{}/api/v1/applications/nope", sb.url), &[]).unwrap();
    assert_eq!(missing.status, 403, "{}", missing.body);
    sb.proc.sigterm();
    assert!(sb.proc.wait_exit(Duration::from_secs(10)).success());
}

#[test]
fn sandbox_stream_flags_set_the_sse_heartbeat_and_are_accepted() {
    use std::io::{Read, Write};
    let (remote, _) = remote();
    let mut sb = Sandbox::spawn(
        BIN,
        Some(remote.root()),
        &[
            "sandbox",
            "--repo",
            "origin.git",
            "--listen",
            "127.0.0.1:0",
            "--app",
            "web=apps/web",
            "--heartbeat",
            "200ms",
            "--stream-buffer",
            "5",
            "--stream-subscribe-delay",
            "10ms",
        ],
    );
    let addr = sb.url.trim_start_matches("http://").to_string();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.set_read_timeout(Some(T)).unwrap();
    write!(
        conn,
        "GET /api/v1/stream/applications?name=web HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    // The headers, the ADDED frame, then a heartbeat line, all within the read timeout.
    let mut seen = Vec::new();
    let mut buf = [0u8; 8192];
    while !String::from_utf8_lossy(&seen).contains("\r\n:\n\r\n") {
        let n = conn.read(&mut buf).expect("the stream within the timeout");
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&seen);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("content-type: text/event-stream"), "{text}");
    assert!(text.contains("data: {\"result\":"), "{text}");
    drop(conn);
    sb.proc.sigterm();
    assert!(sb.proc.wait_exit(Duration::from_secs(10)).success());
}

#[test]
fn sandbox_patch_edits_an_apps_spec_as_argo_cds_api_does() {
    use std::io::{Read, Write};
    let (remote, tip) = remote();
    let mut sb = Sandbox::start(BIN, &remote.repo(), &["web=apps/web"], &[]);
    let before = sb.wait_app("web", T, |a| healthy_at(a, &tip));
    let version = |app: &serde_json::Value| -> u64 {
        app["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    // A stream opened before the edit carries it.
    let addr = sb.url.trim_start_matches("http://").to_string();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.set_read_timeout(Some(T)).unwrap();
    write!(
        conn,
        "GET /api/v1/stream/applications?name=web HTTP/1.1\r\nHost: {addr}\r\n\r\n"
    )
    .unwrap();
    let mut streamed = Vec::new();
    let mut read_until = |needle: &str| {
        let mut buf = [0u8; 8192];
        while !String::from_utf8_lossy(&streamed).contains(needle) {
            let n = conn.read(&mut buf).expect("the stream within the timeout");
            assert!(n > 0, "closed: {}", String::from_utf8_lossy(&streamed));
            streamed.extend_from_slice(&buf[..n]);
        }
    };
    read_until("\"type\":\"ADDED\"");

    // A path app's source is a directory: kustomize replaces it.
    let images =
        r#"{"spec":{"source":{"directory":null,"kustomize":{"images":["web=nginx:1.27"]}}}}"#;
    let answer = sb.patch_app("web", images, "merge");
    assert_eq!(answer.status, 200, "{}", answer.body);
    let answer: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
    let kustomize = serde_json::json!({"images": ["web=nginx:1.27"]});
    assert_eq!(answer["spec"]["source"]["kustomize"], kustomize);
    assert!(version(&answer) > version(&before));
    assert_eq!(sb.app("web")["spec"], answer["spec"]);
    let list = http_request("GET", &format!("{}/api/v1/applications", sb.url), &[]).unwrap();
    let list: serde_json::Value = serde_json::from_str(&list.body).unwrap();
    assert_eq!(list["items"][0]["spec"]["source"]["kustomize"], kustomize);
    read_until("\"kustomize\":{\"images\":[\"web=nginx:1.27\"]}");
    let text = String::from_utf8_lossy(&streamed).into_owned();
    assert!(text.contains("\"type\":\"MODIFIED\""), "{text}");
    drop(conn);

    // A json patch; then automated sync off: a new commit is compared, not synced.
    let info = r#"[{"op":"add","path":"/spec/info","value":[{"name":"owner","value":"team-a"}]}]"#;
    let answer = sb.patch_app("web", info, "json");
    assert_eq!(answer.status, 200, "{}", answer.body);
    let answer = sb.patch_app(
        "web",
        r#"{"spec":{"syncPolicy":{"automated":null}}}"#,
        "merge",
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    let next = remote
        .write(
            "apps/web/web.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.28\n",
        )
        .commit_push("web: 1.28");
    let compared = sb.wait_app("web", T, |a| {
        a["status"]["sync"]["revision"] == next.as_str()
    });
    assert_eq!(compared["status"]["sync"]["status"], "OutOfSync");
    assert!(compared.get("operation").is_none(), "{compared}");
    assert_eq!(
        compared["status"]["operationState"]["syncResult"]["revision"],
        tip.as_str()
    );
    assert_eq!(compared["spec"]["info"][0]["value"], "team-a");

    // Refusals are 400 code 3; an unknown app is 403 as for Get.
    let bad = sb.patch_app("web", r#"{"status":{"sync":{"status":"Synced"}}}"#, "merge");
    assert_eq!(bad.status, 400, "{}", bad.body);
    let bad: serde_json::Value = serde_json::from_str(&bad.body).unwrap();
    assert_eq!(bad["code"], 3);
    assert!(
        bad["message"]
            .as_str()
            .unwrap()
            .contains("status.sync.status"),
        "{bad}"
    );
    let url = format!("{}/api/v1/applications/web", sb.url);
    let garbled = http_send("PATCH", &url, &[], "{not json").unwrap();
    assert_eq!(garbled.status, 400, "{}", garbled.body);
    assert!(garbled.body.contains("\"code\":3"), "{}", garbled.body);
    assert_eq!(sb.patch_app("nope", "{}", "merge").status, 403);

    sb.proc.sigterm();
    assert!(sb.proc.wait_exit(Duration::from_secs(10)).success());
    let output = sb.proc.output();
    assert!(
        output.contains("app web: spec updated by admin (merge patch); automated sync off"),
        "{output}"
    );
}

#[test]
fn sandbox_prune_flags_decide_what_a_resource_removed_from_git_becomes() {
    let (remote, _) = remote();
    // The candidate app's directory exists but holds no manifest yet.
    let first = remote
        .write("candidates/web/.gitkeep", "")
        .commit_push("an empty candidate directory");
    let mut sb = Sandbox::start(
        BIN,
        &remote.repo(),
        &["web=apps/web", "cand=candidates/web"],
        &["--prune", "cand", "--allow-empty", "cand"],
    );
    let cand = sb.wait_app("cand", T, |a| healthy_at(a, &first));
    assert!(cand["status"].get("resources").is_none(), "{cand}");
    assert_eq!(
        cand["spec"]["syncPolicy"]["automated"],
        serde_json::json!({"prune": true, "selfHeal": true, "allowEmpty": true})
    );
    assert_eq!(
        sb.app("web")["spec"]["syncPolicy"]["automated"]["prune"],
        false
    );

    // A candidate arrives, and web gets a ConfigMap.
    let config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n";
    let added = remote
        .write(
            "candidates/web/web-candidate.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-candidate\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.28\n",
        )
        .write("apps/web/extra.yaml", config_map)
        .commit_push("candidate");
    sb.wait_app("cand", T, |a| healthy_at(a, &added));
    sb.wait_app("web", T, |a| healthy_at(a, &added));
    let tree = sb.tree("cand");
    assert!(
        tree["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["kind"] == "Pod" && n["info"][0]["value"] == "Running"),
        "{tree}"
    );
    let live = sb
        .live_object("cand", "apps", "Deployment", "default", "web-candidate")
        .unwrap();
    assert_eq!(
        live["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.28"
    );
    assert!(
        sb.live_object("cand", "apps", "Deployment", "default", "nope")
            .is_none()
    );

    // Both removed from git: the candidate app prunes, web keeps its ConfigMap live.
    for file in ["candidates/web/web-candidate.yaml", "apps/web/extra.yaml"] {
        std::fs::remove_file(remote.work.join(file)).unwrap();
    }
    let removed = remote.commit_push("candidate gone");
    let cand = sb.wait_app("cand", T, |a| healthy_at(a, &removed));
    assert!(cand["status"].get("resources").is_none(), "{cand}");
    let pruned = &cand["status"]["operationState"]["syncResult"]["resources"][0];
    assert_eq!(
        (&pruned["name"], &pruned["status"], &pruned["message"]),
        (&"web-candidate".into(), &"Pruned".into(), &"pruned".into())
    );
    let web = sb.wait_app("web", T, |a| {
        a["status"]["sync"]["revision"] == removed.as_str()
    });
    assert_eq!(web["status"]["sync"]["status"], "OutOfSync");
    let extra = web["status"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "extra")
        .cloned()
        .unwrap();
    assert_eq!(extra["requiresPruning"], true, "{extra}");
    // A sync request that asks to prune deletes it.
    let answer = sb.sync("web", r#"{"prune": true}"#);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let web = sb.wait_app("web", T, |a| healthy_at(a, &removed));
    assert_eq!(
        web["status"]["operationState"]["syncResult"]["resources"][0]["status"],
        "Pruned"
    );

    sb.proc.sigterm();
    assert!(sb.proc.wait_exit(Duration::from_secs(10)).success());
    let output = sb.proc.output();
    assert!(
        output.contains(
            "app web: OutOfSync at {} (auto-sync skipped: only pruning is needed and automated prune is off)"
                .replace("{}", &removed[..7])
                .as_str()
        ),
        "{output}"
    );
}

#[test]
fn the_hook_time_is_a_duration() {
    let (remote, _) = remote();
    let out = Command::new(BIN)
        .current_dir(remote.root())
        .args([
            "sandbox",
            "--repo",
            "origin.git",
            "--listen",
            "127.0.0.1:0",
            "--app",
            "web=apps/web",
            "--hook-time",
            "soon",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--hook-time: invalid duration \"soon\""),
        "{stderr}"
    );
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    let (remote, _) = remote();
    let dir = remote.root();
    let base = ["sandbox", "--repo", "origin.git", "--listen", "127.0.0.1:0"];
    let cases: &[(&[&str], &str)] = &[
        (
            &["--app", "web=apps/web", "--sync-interval", "soon"],
            "--sync-interval",
        ),
        (
            &["--app", "web=apps/web", "--rollout-time", "5x"],
            "--rollout-time",
        ),
        (&["--app", "web"], "--app"),
        (&[], "--app"),
        (
            &["--app", "web=apps/web", "--registry", "missing.txt"],
            "--registry",
        ),
        (
            &["--app", "web=apps/web", "--token-file", "missing-token"],
            "--token-file",
        ),
        (&["--app", "web=apps/web", "--branch", "nope"], "--branch"),
        (
            &["--app", "web=apps/web", "--argocd-version", "2.9"],
            "--argocd-version",
        ),
        (
            &["--app", "web=apps/web", "--repo-error-grace", "later"],
            "--repo-error-grace",
        ),
        (
            &["--app", "web=apps/web", "--retry-backoff", "0s"],
            "--retry-backoff",
        ),
        (&["--app", "web=hydrator:/abs"], "--app"),
        (
            &["--app", "web=apps/web", "--stream-buffer", "0"],
            "--stream-buffer",
        ),
        (
            &["--app", "web=apps/web", "--heartbeat", "0s"],
            "--heartbeat",
        ),
        (
            &["--app", "web=apps/web", "--stream-subscribe-delay", "soon"],
            "--stream-subscribe-delay",
        ),
        (&["--app", "web=apps/web", "--prune", "nope"], "--prune"),
        (
            &["--app", "web=apps/web", "--allow-empty", "nope"],
            "--allow-empty",
        ),
        (
            &[
                "--app",
                "web=apps/web",
                "--manual-sync",
                "web",
                "--prune",
                "web",
            ],
            "--prune",
        ),
        (
            &[
                "--app",
                "web=apps/web",
                "--forge",
                "bitbucket",
                "--forge-listen",
                "127.0.0.1:0",
                "--forge-token-file",
                "missing-token",
            ],
            "--forge",
        ),
        (
            &[
                "--app",
                "web=apps/web",
                "--forge",
                "github",
                "--forge-listen",
                "127.0.0.1:0",
                "--forge-token-file",
                "missing-token",
            ],
            "--forge-token-file",
        ),
        (
            &[
                "--app",
                "web=apps/web",
                "--forge",
                "github",
                "--forge-listen",
                "127.0.0.1:0",
                "--require-check",
                "ci",
            ],
            "--protect",
        ),
    ];
    for (extra, flag) in cases {
        let out = Command::new(BIN)
            .current_dir(dir)
            .args(base)
            .args(*extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(
            stderr.contains(flag),
            "{extra:?} should name {flag}: {stderr}"
        );
        if *flag == "--argocd-version" {
            assert!(stderr.contains("2.14, 3.0, 3.4, 3.5"), "{stderr}");
        }
    }
    for (args, flag) in [
        (
            vec![
                "sandbox",
                "--repo",
                "nowhere.git",
                "--listen",
                "127.0.0.1:0",
                "--app",
                "w=a",
            ],
            "--repo",
        ),
        (
            vec![
                "sandbox",
                "--repo",
                "origin.git",
                "--listen",
                "localhost",
                "--app",
                "w=a",
            ],
            "--listen",
        ),
    ] {
        let out = Command::new(BIN)
            .current_dir(dir)
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
}

#[test]
fn sandbox_forge_flags_serve_a_forge_over_the_same_bare_repository() {
    let (remote, _) = remote();
    remote.git(&["checkout", "-q", "-b", "promote"]);
    remote.write("apps/web/note.yaml", "a: 1\n");
    remote.commit_push("promote");
    let token_file = remote.path("forge-token");
    std::fs::write(&token_file, "forge-s3cret\n").unwrap();
    let mut sb = Sandbox::spawn(
        BIN,
        Some(remote.root()),
        &[
            "sandbox",
            "--repo",
            "origin.git",
            "--listen",
            "127.0.0.1:0",
            "--app",
            "web=apps/web",
            "--forge",
            "github",
            "--forge-listen",
            "127.0.0.1:0",
            "--forge-token-file",
            token_file.to_str().unwrap(),
            "--forge-project",
            "acme/deploy",
            "--protect",
            "main",
            "--require-check",
            "ci",
        ],
    );
    let line = sb.proc.wait_line("forge (github) listening on ", T);
    let api = line
        .split("(API ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("no API URL in {line:?}"))
        .to_string();
    assert!(
        api.starts_with("http://127.0.0.1:") && api.ends_with("/api/v3"),
        "{line}"
    );
    let pulls = format!("{api}/repos/acme/deploy/pulls");
    let body = r#"{"head":"promote","base":"main","title":"Promote"}"#;
    let refused = http_send("POST", &pulls, &[("Authorization", "token wrong")], body).unwrap();
    assert_eq!(refused.status, 401, "{}", refused.body);
    let opened = http_send(
        "POST",
        &pulls,
        &[("Authorization", "Bearer forge-s3cret")],
        body,
    )
    .unwrap();
    assert_eq!(opened.status, 201, "{}", opened.body);
    // A direct push to the protected branch is refused in GitHub's words.
    remote.git(&["checkout", "-q", "main"]);
    remote.write("apps/web/direct.yaml", "b: 1\n");
    remote.git(&["add", "-A"]);
    remote.git(&["commit", "-q", "-m", "direct"]);
    let push = greenlight_testkit::git_cmd(&remote.work)
        .args(["push", "origin", "HEAD:refs/heads/main"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&push.stderr);
    assert!(!push.status.success(), "{stderr}");
    assert!(
        stderr.contains("GH006: Protected branch update failed for refs/heads/main."),
        "{stderr}"
    );

    sb.proc.sigterm();
    let status = sb.proc.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status}");
    assert!(
        !remote.bare.join("hooks/pre-receive").exists(),
        "the hook goes with the forge"
    );
    assert!(
        !sb.proc.output().contains("forge-s3cret"),
        "{}",
        sb.proc.output()
    );
}
