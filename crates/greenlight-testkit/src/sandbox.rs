//! `greenlight sandbox` (the local Argo CD stand-in) as a child process: started, waited for
//! until it prints the URL it listens on, then read and steered over HTTP.

use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::http::{Response, http_get, http_post, http_send};
use crate::process::Proc;

/// What the sandbox prints, followed by its URL, once it serves.
pub const LISTENING: &str = "sandbox listening on ";

/// How long start-up may take before the test fails.
const START: Duration = Duration::from_secs(30);

/// How often [`Sandbox::wait_app`] reads the application again.
const POLL: Duration = Duration::from_millis(50);

/// A running `greenlight sandbox` and its base URL (`http://127.0.0.1:<port>`).
pub struct Sandbox {
    pub proc: Proc,
    pub url: String,
    /// The `TMPDIR` of a sandbox the kit spawned: its private clone lives there, and a sandbox
    /// the kit kills cannot remove it, so it goes with this (after `proc`, dropped first).
    pub tmp: Option<tempfile::TempDir>,
}

impl Sandbox {
    /// `bin sandbox` over the git remote `repo` with test timings (`--sync-interval 200ms
    /// --rollout-time 1s`), on a free local port, one `--app` per entry of `apps`, then `extra`.
    #[track_caller]
    pub fn start(bin: impl AsRef<OsStr>, repo: &str, apps: &[&str], extra: &[&str]) -> Sandbox {
        let mut args: Vec<&str> = vec![
            "sandbox",
            "--repo",
            repo,
            "--listen",
            "127.0.0.1:0",
            "--sync-interval",
            "200ms",
            "--rollout-time",
            "1s",
        ];
        for app in apps {
            args.extend(["--app", app]);
        }
        args.extend(extra);
        Self::spawn(bin, None, &args)
    }

    /// `bin` with exactly `args` (starting with `sandbox`), in `dir` when given.
    #[track_caller]
    pub fn spawn(bin: impl AsRef<OsStr>, dir: Option<&Path>, args: &[&str]) -> Sandbox {
        let tmp = tempfile::tempdir().expect("a temporary directory for the sandbox");
        let tmpdir = tmp.path().display().to_string();
        let mut sandbox =
            Self::wait_listening(Proc::spawn_in(bin, dir, args, &[("TMPDIR", &tmpdir)]));
        sandbox.tmp = Some(tmp);
        sandbox
    }

    /// Waits for an already spawned sandbox to print its URL.
    #[track_caller]
    pub fn wait_listening(proc: Proc) -> Sandbox {
        let line = proc.wait_line(LISTENING, START);
        let url = line.split(LISTENING).nth(1).unwrap().trim().to_owned();
        Sandbox {
            proc,
            url,
            tmp: None,
        }
    }

    /// POSTs to a path of the sandbox's own control API (`/sandbox/v1/...`).
    pub fn control(&self, path: &str) {
        http_post(&format!("{}{path}", self.url));
    }

    /// `POST /sandbox/v1/health`: for `seconds` the live resource `kind`/`name` of `app` reports
    /// `health` (as an HPA scale-up holds a Deployment `Progressing`). Fails the test unless the
    /// sandbox accepts it.
    #[track_caller]
    pub fn hold_health(&self, app: &str, kind: &str, name: &str, health: &str, seconds: f64) {
        let url = format!(
            "{}/sandbox/v1/health?app={app}&kind={kind}&name={name}&health={health}&seconds={seconds}",
            self.url
        );
        let answer = crate::http::http_request("POST", &url, &[])
            .unwrap_or_else(|e| panic!("POST {url}: {e}"));
        assert_eq!(answer.status, 200, "POST {url}: {}", answer.body);
    }

    /// `POST /sandbox/v1/delete`: a human deletes the live resource `kind`/`name` of `app` out of
    /// band (`kubectl delete`); Argo CD shows it `Missing` and `OutOfSync`. Fails the test
    /// unless the sandbox accepts it.
    #[track_caller]
    pub fn delete_resource(&self, app: &str, kind: &str, name: &str) {
        let url = format!(
            "{}/sandbox/v1/delete?app={app}&kind={kind}&name={name}",
            self.url
        );
        let answer = crate::http::http_request("POST", &url, &[])
            .unwrap_or_else(|e| panic!("POST {url}: {e}"));
        assert_eq!(answer.status, 200, "POST {url}: {}", answer.body);
    }

    /// `POST /sandbox/v1/garble`: for `seconds` the answers `on` names (`listing`, `reads` or
    /// `both`) are `what` instead (`no-items`: `{}`; `nested`: 100000 nested arrays), as a
    /// broken proxy might send. Fails the test unless the sandbox accepts it.
    #[track_caller]
    pub fn garble(&self, what: &str, on: &str, seconds: f64) {
        let url = format!(
            "{}/sandbox/v1/garble?what={what}&on={on}&seconds={seconds}",
            self.url
        );
        let answer = crate::http::http_request("POST", &url, &[])
            .unwrap_or_else(|e| panic!("POST {url}: {e}"));
        assert_eq!(answer.status, 200, "POST {url}: {}", answer.body);
    }

    /// The application `name` as the Argo CD API returns it; `Null` when there is no answer.
    pub fn app(&self, name: &str) -> Value {
        let url = format!("{}/api/v1/applications/{name}", self.url);
        serde_json::from_str(&http_get(&url)).unwrap_or(Value::Null)
    }

    /// `PATCH /api/v1/applications/{name}` as `argocd app patch --type <patch_type>` sends it:
    /// `patch_json` is the patch document itself (a merge patch object for `merge`, an array of
    /// operations for `json`), carried as a string in Argo CD's `ApplicationPatchRequest`. The
    /// answer whatever its status: the Application, or Argo CD's error body.
    #[track_caller]
    pub fn patch_app(&self, name: &str, patch_json: &str, patch_type: &str) -> Response {
        let url = format!("{}/api/v1/applications/{name}", self.url);
        let body = serde_json::json!({"name": name, "patch": patch_json, "patchType": patch_type});
        let headers = [("Content-Type", "application/json")];
        http_send("PATCH", &url, &headers, &body.to_string())
            .unwrap_or_else(|e| panic!("PATCH {url}: {e}"))
    }

    /// `GET /api/v1/applications/{name}/resource-tree`; `Null` when there is no answer.
    pub fn tree(&self, name: &str) -> Value {
        let url = format!("{}/api/v1/applications/{name}/resource-tree", self.url);
        serde_json::from_str(&http_get(&url)).unwrap_or(Value::Null)
    }

    /// The live object of a node of the app's resource tree (`group` empty for the core group),
    /// as `GET /api/v1/applications/{app}/resource` carries it in `manifest`: a Pod with its
    /// `status` (the scheduler's `PodScheduled` condition for one that cannot be scheduled).
    /// `None` when Argo CD answers an error (not in the tree, not created).
    pub fn live_object(
        &self,
        app: &str,
        group: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        let url = format!(
            "{}/api/v1/applications/{app}/resource?namespace={namespace}&resourceName={name}&group={group}&kind={kind}",
            self.url
        );
        let answer = crate::http::http_request("GET", &url, &[]).ok()?;
        if answer.status != 200 {
            return None;
        }
        let body: Value = serde_json::from_str(&answer.body).ok()?;
        serde_json::from_str(body["manifest"].as_str()?).ok()
    }

    /// `POST /api/v1/applications/{name}/sync` with `body_json` (Argo CD's sync request, e.g.
    /// `{"prune": true}`). The answer whatever its status: the Application with its `operation`,
    /// or Argo CD's error body.
    #[track_caller]
    pub fn sync(&self, name: &str, body_json: &str) -> Response {
        let url = format!("{}/api/v1/applications/{name}/sync", self.url);
        crate::http::http_post_json(&url, body_json).unwrap_or_else(|e| panic!("POST {url}: {e}"))
    }

    /// Reads the application until it satisfies `ok`; fails after `within` showing its status.
    #[track_caller]
    pub fn wait_app(&self, name: &str, within: Duration, ok: impl Fn(&Value) -> bool) -> Value {
        let end = Instant::now() + within;
        loop {
            let app = self.app(name);
            if ok(&app) {
                return app;
            }
            assert!(
                Instant::now() < end,
                "app {name} never satisfied the condition within {within:?}; last status: {}",
                app["status"]
            );
            std::thread::sleep(POLL);
        }
    }
}

/// The application is Synced at `rev` and Healthy.
pub fn healthy_at(app: &Value, rev: &str) -> bool {
    app["status"]["health"]["status"] == "Healthy"
        && app["status"]["sync"]["status"] == "Synced"
        && app["status"]["sync"]["revision"] == rev
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthy_at_needs_health_sync_and_the_revision() {
        let app = |health: &str, sync: &str, rev: &str| serde_json::json!({"status": {"health": {"status": health}, "sync": {"status": sync, "revision": rev}}});
        assert!(healthy_at(&app("Healthy", "Synced", "abc"), "abc"));
        assert!(!healthy_at(&app("Progressing", "Synced", "abc"), "abc"));
        assert!(!healthy_at(&app("Healthy", "OutOfSync", "abc"), "abc"));
        assert!(!healthy_at(&app("Healthy", "Synced", "abc"), "def"));
        assert!(!healthy_at(&Value::Null, "abc"));
    }

    #[test]
    fn patch_app_sends_an_application_patch_request() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            // The request is small: read until its body (after the blank line) is whole.
            while !String::from_utf8_lossy(&seen).ends_with('}') {
                let n = conn.read(&mut buf).unwrap();
                assert!(n > 0, "{}", String::from_utf8_lossy(&seen));
                seen.extend_from_slice(&buf[..n]);
            }
            conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                .unwrap();
            String::from_utf8(seen).unwrap()
        });
        let sb = Sandbox {
            proc: Proc::spawn("sh", ["-c", "exec sleep 600"], &[]),
            url,
            tmp: None,
        };
        let answer = sb.patch_app("web", r#"{"spec":{"info":[]}}"#, "merge");
        assert_eq!((answer.status, answer.body.as_str()), (200, "{}"));
        let request = server.join().unwrap();
        assert!(
            request.starts_with("PATCH /api/v1/applications/web HTTP/1.1\r\n"),
            "{request}"
        );
        let body = request.split("\r\n\r\n").nth(1).unwrap();
        let body: Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"name": "web", "patch": "{\"spec\":{\"info\":[]}}", "patchType": "merge"})
        );
    }

    #[test]
    fn the_url_is_read_from_the_listening_line() {
        let proc = Proc::spawn(
            "sh",
            [
                "-c",
                "echo starting >&2; echo 'sandbox listening on http://127.0.0.1:4242' >&2; exec sleep 600",
            ],
            &[],
        );
        let sb = Sandbox::wait_listening(proc);
        assert_eq!(sb.url, "http://127.0.0.1:4242");
    }
}
