//! `greenlight sandbox` run as a user runs it: a real git remote in a temporary directory, the
//! binary as a child process, the `sandbox listening on` line waited for, real HTTP, SIGTERM.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_greenlight");

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Test Author")
        .env("GIT_AUTHOR_EMAIL", "author@example.com")
        .env("GIT_COMMITTER_NAME", "Test Author")
        .env("GIT_COMMITTER_EMAIL", "author@example.com")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A bare remote whose `main` holds one Deployment under `apps/web`; returns its tip.
fn remote(dir: &Path) -> String {
    git(
        dir,
        &[
            "init",
            "--quiet",
            "--bare",
            "--initial-branch=main",
            "origin.git",
        ],
    );
    git(dir, &["init", "--quiet", "--initial-branch=main", "work"]);
    let work = dir.join("work");
    std::fs::create_dir_all(work.join("apps/web")).unwrap();
    std::fs::write(
        work.join("apps/web/web.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n",
    )
    .unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "--quiet", "-m", "web"]);
    git(
        &work,
        &[
            "push",
            "--quiet",
            dir.join("origin.git").to_str().unwrap(),
            "HEAD:main",
        ],
    );
    git(&work, &["rev-parse", "HEAD"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_serves_the_argo_cd_api_and_stops_cleanly_on_sigterm() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let tip = remote(dir.path());
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "cli-s3cret\n").unwrap();

    let mut child = Command::new(BIN)
        .current_dir(dir.path())
        .args([
            "sandbox",
            "--repo",
            "origin.git",
            "--listen",
            "127.0.0.1:0",
            "--app",
            "web=apps/web",
        ])
        .args([
            "--sync-interval",
            "150ms",
            "--rollout-time",
            "300ms",
            "--token-file",
        ])
        .arg(&token_file)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut output = Vec::new();
    let wait_line = |output: &mut Vec<String>, needle: &str| -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {needle:?} line in:\n{}", output.join("\n")));
            output.push(line.clone());
            if line.contains(needle) {
                return line;
            }
        }
    };

    let line = wait_line(&mut output, "sandbox listening on ");
    let url = line
        .split("sandbox listening on ")
        .nth(1)
        .unwrap()
        .trim()
        .to_string();
    assert!(
        url.starts_with("http://127.0.0.1:") && !url.ends_with(":0"),
        "{url}"
    );
    let http = reqwest::Client::new();
    let app_url = format!("{url}/api/v1/applications/web");
    assert_eq!(
        http.get(&app_url).send().await.unwrap().status().as_u16(),
        401
    );
    let app: serde_json::Value = http
        .get(&app_url)
        .bearer_auth("cli-s3cret")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(app["status"]["sync"]["status"], "Synced");
    assert_eq!(app["status"]["sync"]["revision"], tip.as_str());
    assert_eq!(
        app["spec"]["source"]["repoURL"], "origin.git",
        "the --repo value as given"
    );
    // The rollout ends by itself and is logged as one line.
    wait_line(&mut output, "app web: health Progressing -> Healthy");

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "still running after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    output.extend(lines.try_iter());
    let output = output.join("\n");
    assert!(output.contains("app web: operation Succeeded"), "{output}");
    assert!(
        !output.contains("cli-s3cret"),
        "the token reached the log:\n{output}"
    );
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    remote(dir.path());
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
    ];
    for (extra, flag) in cases {
        let out = Command::new(BIN)
            .current_dir(dir.path())
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
            .current_dir(dir.path())
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
}
