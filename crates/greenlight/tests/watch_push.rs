//! A watch starts when the push lands (`docs/deploy.md#push-hooks`): the binary over real git and
//! the sandbox, with the fetch interval an hour so that only the two ways in can start a watch —
//! Argo CD reporting a revision the clone lacks, and a forge's push webhook on `--listen`
//! (signed, verified, coalesced). Waits are on printed lines, recorded states and answers.

mod common;
use common::*;
use greenlight_testkit::http::{Response, http_request, http_send};
use std::time::Duration;

const T: Duration = Duration::from_secs(60);
/// How long a watch may take to start after its push in these tests: far under the hour of
/// their fetch interval, generous for a loaded CI machine (the figure is measured in `bench/`).
const START: Duration = Duration::from_secs(20);

/// `args` with `flag`'s value replaced.
fn with(mut args: Vec<String>, flag: &str, value: &str) -> Vec<String> {
    let i = args.iter().position(|a| a == flag).unwrap();
    args[i + 1] = value.into();
    args
}

#[test]
fn a_revision_argo_cd_compares_starts_its_watch_without_waiting_for_the_fetch_tick() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let state = repo.path("state/greenlight.db");
    let args = with(
        watch_args(&repo, &sb.url, &state, &[]),
        "--fetch-interval",
        "1h",
    );
    let proc = Proc::spawn(BIN, args, &[]);
    proc.wait_line("watching ", T);
    // The first fetch ran at start; the next tick is an hour away.
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "60", "shadow")),
    );
    proc.wait_line("watch started", START);
    wait_state(&state, &c, "CONFIRMED", T, &proc);
}

fn metric(addr: &str, series: &str) -> f64 {
    let page = http_request("GET", &format!("http://{addr}/metrics"), &[])
        .unwrap()
        .body;
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

fn post(addr: &str, forge: &str, headers: &[(&str, &str)], body: &str) -> Response {
    let mut h = vec![("Content-Type", "application/json")];
    h.extend_from_slice(headers);
    http_send("POST", &format!("http://{addr}/hooks/{forge}"), &h, body)
        .unwrap_or_else(|e| panic!("POST /hooks/{forge}: {e}"))
}

/// A commit setting `app`'s image to `image` with a shadow trailer (deadline 600 s); its sha.
fn watched_commit(repo: &Repo, app: &str, image: &str) -> String {
    repo.set_image(
        app,
        image,
        &format!("{app}: {image}\n\n{}", trailer(app, "600", "shadow")),
    )
}

fn push_body(branch: &str, after: &str) -> String {
    format!(r#"{{"ref":"refs/heads/{branch}","after":"{after}","object_kind":"push"}}"#)
}

#[test]
fn push_webhooks_verified_by_each_forges_scheme_start_a_fetch_and_nothing_else_does() {
    let repo = Repo::new();
    // Argo CD polls git every hour here (no webhook of its own): it never reports the push.
    let sb = Sandbox::spawn(
        BIN,
        None,
        &[
            "sandbox",
            "--repo",
            &repo.repo(),
            "--listen",
            "127.0.0.1:0",
            "--sync-interval",
            "1h",
            "--rollout-time",
            "1s",
            "--app",
            "web=apps/web",
            "--app",
            "other=apps/other",
        ],
    );
    settled(&sb, &repo, &["web", "other"]);
    let secrets = [
        ("github", "--github-webhook-secret-file", "gh-s3cret-4711"),
        ("gitlab", "--gitlab-webhook-token-file", "gl-t0ken-4712"),
        ("gitea", "--gitea-webhook-secret-file", "gt-s3cret-4713"),
    ];
    let addr = free_addr();
    let mut extra = vec!["--listen".to_string(), addr.clone()];
    for (forge, flag, secret) in secrets {
        let file = repo.path(&format!("secrets/{forge}"));
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, format!("{secret}\n")).unwrap();
        extra.extend([flag.to_string(), file.display().to_string()]);
    }
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let state = repo.path("state/greenlight.db");
    let args = with(
        watch_args(&repo, &sb.url, &state, &extra),
        "--fetch-interval",
        "1h",
    );
    let proc = Proc::spawn(BIN, args, &[]);
    proc.wait_line("watching ", T);
    let fetches = || {
        metric(
            &addr,
            "greenlight_git_job_duration_seconds_count{kind=\"fetch\"}",
        )
    };
    // The first tick's fetch, as a job, right after start.
    let end = std::time::Instant::now() + T;
    while fetches() < 1.0 {
        assert!(std::time::Instant::now() < end, "no fetch at start");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(fetches(), 1.0, "the start's fetch only");

    let c1 = watched_commit(&repo, "web", GOOD2);
    let body = push_body("main", &c1);
    let signed = greenlight::notify::body::signature(b"gh-s3cret-4711", body.as_bytes());
    let event = ("X-GitHub-Event", "push");
    // Missing, wrong, and a good signature over another body: refused, no fetch.
    let wrong = greenlight::notify::body::signature(b"guess", body.as_bytes());
    let other_body = push_body("main", "0000000000000000000000000000000000000000");
    for (headers, sent) in [
        (vec![event], body.as_str()),
        (
            vec![event, ("X-Hub-Signature-256", wrong.as_str())],
            body.as_str(),
        ),
        (
            vec![event, ("X-Hub-Signature-256", signed.as_str())],
            other_body.as_str(),
        ),
    ] {
        let r = post(&addr, "github", &headers, sent);
        assert_eq!(r.status, 401, "{}", r.body);
    }
    proc.wait_line(
        "push hook /hooks/github refused: no X-Hub-Signature-256 header",
        T,
    );
    let refused = "greenlight_push_hook_deliveries_total{forge=\"github\",result=\"refused\"}";
    assert_eq!(metric(&addr, refused), 3.0);

    let delivery = ("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958");
    let good = [event, delivery, ("X-Hub-Signature-256", signed.as_str())];
    let r = post(&addr, "github", &good, &body);
    assert_eq!((r.status, r.body.as_str()), (202, "fetching main\n"));
    wait_state(&state, &c1, "WAITING_REACH", START, &proc);
    // The same delivery again (a replay, or the forge's redelivery): nothing to do.
    let r = post(&addr, "github", &good, &body);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("received before"), "{}", r.body);

    // GitLab's token, then Gitea's signature, each starting the watch of its own push.
    let c2 = watched_commit(&repo, "other", GOOD2);
    let gl = [("X-Gitlab-Event", "Push Hook")];
    let r = post(
        &addr,
        "gitlab",
        &[gl[0], ("X-Gitlab-Token", "gl-t0ken")],
        &push_body("main", &c2),
    );
    assert_eq!(r.status, 401, "{}", r.body);
    let r = post(
        &addr,
        "gitlab",
        &[gl[0], ("X-Gitlab-Token", "gl-t0ken-4712")],
        &push_body("main", &c2),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    wait_state(&state, &c2, "WAITING_REACH", START, &proc);

    let c3 = watched_commit(&repo, "web", GOOD);
    let body = push_body("main", &c3);
    let sig = greenlight::notify::body::signature(b"gt-s3cret-4713", body.as_bytes());
    let sig = sig.strip_prefix("sha256=").unwrap();
    let r = post(
        &addr,
        "gitea",
        &[("X-Gitea-Event", "push"), ("X-Gitea-Signature", sig)],
        &body,
    );
    assert_eq!(r.status, 202, "{}", r.body);
    wait_state(&state, &c3, "WAITING_REACH", START, &proc);

    // A push to another branch is verified and ignored.
    let body = push_body("feature", &c3);
    let sig = greenlight::notify::body::signature(b"gh-s3cret-4711", body.as_bytes());
    let r = post(
        &addr,
        "github",
        &[event, ("X-Hub-Signature-256", sig.as_str())],
        &body,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body.contains("not to the tracked branch main"),
        "{}",
        r.body
    );

    // One fetch for each verified push to main, and none for anything else.
    assert_eq!(fetches(), 4.0, "{}", proc.output());
    let out = proc.output();
    for (_, _, secret) in secrets {
        assert!(!out.contains(secret), "a secret reached the log:\n{out}");
    }
}

#[test]
fn a_webhook_secret_needs_listen_and_a_real_file() {
    let repo = Repo::new();
    let state = repo.path("state/greenlight.db");
    let args = watch_args(
        &repo,
        "http://127.0.0.1:9",
        &state,
        &["--github-webhook-secret-file", "/nonexistent"],
    );
    let out = std::process::Command::new(BIN)
        .args(&args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--listen"), "{err}");

    let empty = repo.path("empty-secret");
    std::fs::write(&empty, "\n").unwrap();
    let addr = free_addr();
    let args = watch_args(
        &repo,
        "http://127.0.0.1:9",
        &state,
        &[
            "--listen",
            &addr,
            "--gitea-webhook-secret-file",
            empty.to_str().unwrap(),
        ],
    );
    let out = std::process::Command::new(BIN)
        .args(&args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--gitea-webhook-secret-file"), "{err}");
}
