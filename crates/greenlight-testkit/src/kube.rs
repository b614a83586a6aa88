//! A real Kubernetes API server for tests: Debian's etcd and a kube-apiserver v1.20.2 (built by
//! `scripts/kube-apiserver` from Debian's `kubernetes` source package), both on loopback ports
//! of their own, with their data, certificates and keys in a temporary directory. Argo CD's real
//! Application CRD (`fixtures/argocd-application-crd.yaml`) is installed and Established before
//! [`KubeApiserver::start`] returns.
//!
//! - Authentication: a static token (token file) for an admin in `system:masters`; ServiceAccount
//!   tokens through TokenRequest ([`KubeApiserver::create_token`]), signed with a key pair made
//!   with the openssl CLI.
//! - Authorization: RBAC, so a ServiceAccount can do only what its bindings grant.
//! - The watch cache is off (`--watch-cache=false`): watches are served by etcd, so after
//!   [`KubeApiserver::compact_etcd`] a watch resumed from an older `resourceVersion` is answered
//!   `410 Gone`, as a long-lived cluster's compaction does, and a watch resumed after
//!   [`KubeApiserver::restart_apiserver`] continues where it was.
//!
//! Only the apiserver runs: no controller-manager (no garbage collection, no namespace
//! finalization, no service-account token controller). Both processes are killed when the
//! harness is dropped, also when a test panics.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::process::Proc;

/// Where `scripts/kube-apiserver` (run by `scripts/test` when it is missing) puts the binary.
pub const INSTALLED: &str = "/var/tmp/greenlight-tools/kube-apiserver-1.20.2/kube-apiserver";

/// The Argo CD Application CRD installed on every test apiserver (see `fixtures/README.md`).
pub const APPLICATION_CRD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/fixtures/argocd-application-crd.yaml"
);

/// The namespace Argo CD keeps its Applications in; always created.
pub const ARGOCD_NAMESPACE: &str = "argocd";

/// The admin user of the token file.
pub const ADMIN_USER: &str = "greenlight-test-admin";

/// How long the apiserver may take to answer `/readyz` (about 5 s on 2 idle cores).
const READY_WITHIN: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(250);

/// The kube-apiserver binary: `$GREENLIGHT_KUBE_APISERVER`, else [`INSTALLED`]. Panics naming
/// `scripts/kube-apiserver` when there is none.
#[track_caller]
pub fn apiserver_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("GREENLIGHT_KUBE_APISERVER").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "GREENLIGHT_KUBE_APISERVER={} is not a file: point it at a kube-apiserver binary, \
             or unset it",
            p.display()
        );
        return p;
    }
    let p = PathBuf::from(INSTALLED);
    assert!(
        p.is_file(),
        "kube-apiserver is missing (GREENLIGHT_KUBE_APISERVER unset, no {INSTALLED}): run \
         scripts/kube-apiserver (scripts/test runs it when missing), which builds v1.20.2 from \
         Debian's kubernetes source package"
    );
    p
}

/// Debian's etcd (package etcd-server).
#[track_caller]
pub fn etcd_binary() -> PathBuf {
    crate::process::find_tool(
        "etcd",
        &["/usr/bin/etcd"],
        "etcd is missing (no /usr/bin/etcd, none on PATH): run scripts/test, which installs \
         Debian's etcd-server and etcd-client",
    )
}

/// Debian's etcdctl (package etcd-client).
#[track_caller]
pub fn etcdctl_binary() -> PathBuf {
    crate::process::find_tool(
        "etcdctl",
        &["/usr/bin/etcdctl"],
        "etcdctl is missing (no /usr/bin/etcdctl, none on PATH): run scripts/test, which \
         installs Debian's etcd-server and etcd-client",
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("find a free port")
        .port()
}

/// A token no other run shares.
fn fresh_token(dir: &Path) -> String {
    let mut h = Sha256::new();
    h.update(dir.as_os_str().as_encoded_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(format!("{:?}", std::time::SystemTime::now()).as_bytes());
    h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[track_caller]
fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("run {:?}: {e}", cmd.get_program()));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A running etcd and kube-apiserver; both killed when dropped.
pub struct KubeApiserver {
    // Declared first: the processes die before their directory is removed.
    apiserver: Option<Proc>,
    etcd: Proc,
    apiserver_args: Vec<String>,
    port: u16,
    etcd_client_url: String,
    token: String,
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
}

impl KubeApiserver {
    /// Starts etcd and the apiserver, waits until `/readyz` answers `ok`, creates the `argocd`
    /// namespace and installs the Application CRD (Established before this returns).
    #[track_caller]
    pub fn start() -> KubeApiserver {
        Self::start_with_namespaces(&[])
    }

    /// As [`KubeApiserver::start`], also creating `namespaces` (beside `argocd`).
    #[track_caller]
    pub fn start_with_namespaces(namespaces: &[&str]) -> KubeApiserver {
        let apiserver = apiserver_binary();
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path();
        let certs = d.join("certs");
        std::fs::create_dir_all(&certs).expect("cert dir");

        // The admin's static token, and the ServiceAccount signing key pair.
        let token = fresh_token(d);
        let tokens = d.join("tokens.csv");
        std::fs::write(
            &tokens,
            format!("{token},{ADMIN_USER},{ADMIN_USER},\"system:masters\"\n"),
        )
        .expect("write the token file");
        let sa_key = d.join("sa.key");
        let sa_pub = d.join("sa.pub");
        run_ok(
            Command::new("openssl")
                .args(["genrsa", "-out"])
                .arg(&sa_key)
                .arg("2048")
                .stderr(Stdio::piped()),
        );
        run_ok(
            Command::new("openssl")
                .args(["rsa", "-pubout", "-in"])
                .arg(&sa_key)
                .arg("-out")
                .arg(&sa_pub)
                .stderr(Stdio::piped()),
        );

        let (etcd, etcd_client_url) = start_etcd(&d.join("etcd"));
        let port = free_port();
        let apiserver_args = vec![
            apiserver.display().to_string(),
            format!("--etcd-servers={etcd_client_url}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            "--insecure-port=0".into(),
            format!("--cert-dir={}", certs.display()),
            format!("--token-auth-file={}", tokens.display()),
            "--authorization-mode=RBAC".into(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", sa_pub.display()),
            format!("--service-account-signing-key-file={}", sa_key.display()),
            "--service-cluster-ip-range=10.96.0.0/24".into(),
            "--enable-priority-and-fairness=false".into(),
            "--watch-cache=false".into(),
            "--profiling=false".into(),
        ];

        let kubeconfig = d.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: \
                 https://127.0.0.1:{port}\n    certificate-authority: {}\nusers:\n- name: admin\n  \
                 user:\n    token: {token}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    \
                 user: admin\n    namespace: {ARGOCD_NAMESPACE}\ncurrent-context: test\n",
                certs.join("apiserver.crt").display()
            ),
        )
        .expect("write the kubeconfig");

        let mut k = KubeApiserver {
            apiserver: None,
            etcd,
            apiserver_args,
            port,
            etcd_client_url,
            token,
            kubeconfig,
            dir,
        };
        k.start_apiserver();
        for ns in std::iter::once(ARGOCD_NAMESPACE).chain(namespaces.iter().copied()) {
            k.ensure_namespace(ns);
        }
        k.kubectl_ok(&["create", "-f", APPLICATION_CRD]);
        k.wait_until("the Application CRD is Established", || {
            k.kubectl(&[
                "get",
                "crd",
                "applications.argoproj.io",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Established\")].status}",
            ])
            .stdout
                == b"True"
        });
        // Established is the CRD's condition; the discovery and the REST handler for it may
        // lag a moment behind: wait until a list answers.
        k.wait_until("a list of Applications answers", || {
            k.kubectl(&["get", "applications.argoproj.io", "-A"])
                .status
                .success()
        });
        k
    }

    #[track_caller]
    fn start_apiserver(&mut self) {
        let (program, args) = self.apiserver_args.split_first().expect("program");
        let proc = Proc::spawn(program, args, &[]);
        self.apiserver = Some(proc);
        let end = Instant::now() + READY_WITHIN;
        loop {
            let running = self.apiserver.as_mut().is_some_and(Proc::is_running);
            assert!(
                running,
                "kube-apiserver exited during start; output:\n{}",
                self.apiserver_output()
            );
            if self.kubectl(&["get", "--raw", "/readyz"]).stdout == b"ok" {
                return;
            }
            assert!(
                Instant::now() < end,
                "kube-apiserver not ready within {READY_WITHIN:?}; output:\n{}",
                self.apiserver_output()
            );
            std::thread::sleep(POLL);
        }
    }

    /// The apiserver's output so far (empty while it is stopped).
    pub fn apiserver_output(&self) -> String {
        self.apiserver
            .as_ref()
            .map(Proc::output)
            .unwrap_or_default()
    }

    /// etcd's output so far.
    pub fn etcd_output(&self) -> String {
        self.etcd.output()
    }

    /// Kills the apiserver (SIGKILL: every open watch is cut, as when it crashes) and starts it
    /// again on the same port with the same etcd, certificates and tokens; returns once it is
    /// ready.
    #[track_caller]
    pub fn restart_apiserver(&mut self) {
        if let Some(mut p) = self.apiserver.take() {
            p.kill9();
        }
        self.start_apiserver();
    }

    /// etcd's current revision.
    #[track_caller]
    pub fn etcd_revision(&self) -> i64 {
        let out = run_ok(
            Command::new(etcdctl_binary())
                .env("ETCDCTL_API", "3")
                .args(["--endpoints", &self.etcd_client_url])
                .args(["endpoint", "status", "-w", "json"]),
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("etcdctl json");
        v[0]["Status"]["header"]["revision"]
            .as_i64()
            .unwrap_or_else(|| panic!("no revision in etcdctl's answer: {v}"))
    }

    /// Makes two writes (a ConfigMap created and deleted in `argocd`), then compacts etcd at
    /// its current revision (`etcdctl compact`) and returns that revision: from now on a watch
    /// from a `resourceVersion` read before this call is answered `410 Gone` (a watch from
    /// version `v` starts at `v + 1`, which etcd keeps when it is the compaction revision
    /// itself: hence two writes). A watch already open is not cut: its next re-opening is.
    #[track_caller]
    pub fn compact_etcd(&self) -> i64 {
        let name = format!(
            "compaction-{}",
            fresh_token(self.dir.path()).get(..8).unwrap_or("x")
        );
        self.kubectl_ok(&["create", "configmap", &name, "-n", ARGOCD_NAMESPACE]);
        self.kubectl_ok(&["delete", "configmap", &name, "-n", ARGOCD_NAMESPACE]);
        let rev = self.etcd_revision();
        run_ok(
            Command::new(etcdctl_binary())
                .env("ETCDCTL_API", "3")
                .args(["--endpoints", &self.etcd_client_url])
                .args(["compact", &rev.to_string(), "--physical"]),
        );
        rev
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The admin kubeconfig (token user in `system:masters`, current namespace `argocd`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The admin's bearer token.
    pub fn admin_token(&self) -> &str {
        &self.token
    }

    /// The apiserver's serving certificate, which is also the CA of the kubeconfigs.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("certs/apiserver.crt")
    }

    /// The harness's temporary directory (for a test's own files).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A kubectl command with the admin kubeconfig and a cache of the harness's own.
    pub fn kubectl_cmd(&self) -> Command {
        let mut cmd = Command::new(crate::kubectl::binary());
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .env("KUBECACHEDIR", self.dir.path().join("kubectl-cache"))
            .env("HOME", self.dir.path());
        cmd
    }

    /// `kubectl <args>` as the admin; its output, whatever the exit status.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_cmd().args(args).output().expect("run kubectl")
    }

    /// `kubectl <args>` as the admin; its stdout. Panics with its stderr when it fails.
    #[track_caller]
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {} failed:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("kubectl prints UTF-8")
    }

    /// `kubectl <args>` as the admin with `stdin` on its standard input (`-f -`); its stdout.
    /// Panics with its stderr when it fails.
    #[track_caller]
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> String {
        let path = self.dir.path().join(format!(
            "stdin-{}.yaml",
            fresh_token(self.dir.path()).get(..8).unwrap_or("x")
        ));
        std::fs::write(&path, stdin).expect("write kubectl input");
        let mut full: Vec<&str> = args.to_vec();
        let p = path.display().to_string();
        full.extend(["-f", &p]);
        let out = self.kubectl_ok(&full);
        let _ = std::fs::remove_file(&path);
        out
    }

    /// Creates `ns` unless it exists.
    #[track_caller]
    pub fn ensure_namespace(&self, ns: &str) {
        if !self.kubectl(&["get", "namespace", ns]).status.success() {
            self.kubectl_ok(&["create", "namespace", ns]);
        }
    }

    /// A token for ServiceAccount `namespace/name` (TokenRequest, as `kubectl create token`
    /// makes it), valid for an hour.
    #[track_caller]
    pub fn create_token(&self, namespace: &str, name: &str) -> String {
        self.kubectl_ok(&["create", "token", name, "-n", namespace, "--duration=1h"])
            .trim()
            .to_string()
    }

    /// Writes a kubeconfig for `token` (same server and CA as the admin's) to `path`.
    pub fn write_token_kubeconfig(&self, path: &Path, token: &str, namespace: &str) {
        std::fs::write(
            path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: \
                 {}\n    certificate-authority: {}\nusers:\n- name: user\n  user:\n    token: \
                 {token}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: user\n    \
                 namespace: {namespace}\ncurrent-context: test\n",
                self.url(),
                self.ca_file().display()
            ),
        )
        .expect("write a kubeconfig");
    }

    /// Polls `check` every 250 ms until it holds; panics naming `what` after 60 s.
    #[track_caller]
    pub fn wait_until(&self, what: &str, mut check: impl FnMut() -> bool) {
        let end = Instant::now() + Duration::from_secs(60);
        while !check() {
            assert!(Instant::now() < end, "not within 60s: {what}");
            std::thread::sleep(POLL);
        }
    }
}

/// Argo CD's application controller, as far as the apiserver sees it: a thread that reads the
/// sandbox's Applications (`GET /api/v1/applications`) every 100 ms and writes each one that
/// changed to the apiserver, metadata, spec, operation and status in one server-side apply by
/// the field manager `argocd-application-controller`. Argo CD's Application CRD has no status
/// subresource (`subresources: {}`): its controller writes status with a patch of the whole
/// resource, as this does. Stops when dropped.
pub struct SandboxMirror {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    writes: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl SandboxMirror {
    /// How many Application writes reached the apiserver so far.
    pub fn writes(&self) -> u64 {
        self.writes.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for SandboxMirror {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The Application custom resource for the sandbox's JSON `app`: what the controller owns of
/// it, without the server-set metadata.
pub fn application_resource_of(app: &serde_json::Value) -> serde_json::Value {
    let meta = &app["metadata"];
    let mut metadata = serde_json::json!({
        "name": meta["name"],
        "namespace": meta["namespace"].as_str().filter(|n| !n.is_empty()).unwrap_or(ARGOCD_NAMESPACE),
    });
    for field in ["labels", "annotations"] {
        if meta[field].is_object() {
            metadata[field] = meta[field].clone();
        }
    }
    let mut cr = serde_json::json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": metadata,
        "spec": app["spec"],
    });
    for field in ["status", "operation"] {
        if !app[field].is_null() {
            cr[field] = app[field].clone();
        }
    }
    cr
}

impl KubeApiserver {
    /// Starts mirroring the sandbox at `sandbox_url` into this apiserver (see [`SandboxMirror`]);
    /// returns once every Application the sandbox has is written.
    #[track_caller]
    pub fn mirror_sandbox(&self, sandbox_url: &str) -> SandboxMirror {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let writes = std::sync::Arc::new(AtomicU64::new(0));
        let url = format!("{sandbox_url}/api/v1/applications");
        let kubeconfig = self.kubeconfig.clone();
        let dir = self.dir.path().to_path_buf();
        let kubectl = crate::kubectl::binary();
        let first = std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let (stop2, writes2, first2) = (stop.clone(), writes.clone(), first.clone());
        let thread = std::thread::spawn(move || {
            let mut last: std::collections::HashMap<String, serde_json::Value> =
                std::collections::HashMap::new();
            let file = dir.join("mirror.json");
            while !stop2.load(Ordering::SeqCst) {
                let listing: serde_json::Value = crate::http::http_request("GET", &url, &[])
                    .ok()
                    .filter(|r| r.status == 200)
                    .and_then(|r| serde_json::from_str(&r.body).ok())
                    .unwrap_or(serde_json::Value::Null);
                if let Some(items) = listing["items"].as_array() {
                    for app in items {
                        let cr = application_resource_of(app);
                        let key =
                            format!("{}/{}", cr["metadata"]["namespace"], cr["metadata"]["name"]);
                        if last.get(&key) == Some(&cr) {
                            continue;
                        }
                        std::fs::write(&file, cr.to_string())
                            .expect("write the mirrored Application");
                        let out = Command::new(&kubectl)
                            .env("KUBECONFIG", &kubeconfig)
                            .env("KUBECACHEDIR", dir.join("kubectl-cache"))
                            .env("HOME", &dir)
                            .args([
                                "apply",
                                "--server-side",
                                "--force-conflicts",
                                "--field-manager=argocd-application-controller",
                                "-f",
                            ])
                            .arg(&file)
                            .output();
                        match out {
                            Ok(o) if o.status.success() => {
                                writes2.fetch_add(1, Ordering::SeqCst);
                                last.insert(key, cr);
                            }
                            // The apiserver restarting: tried again at the next round.
                            Ok(o) => eprintln!(
                                "sandbox mirror: {key}: {}",
                                String::from_utf8_lossy(&o.stderr).trim()
                            ),
                            Err(e) => eprintln!("sandbox mirror: kubectl: {e}"),
                        }
                    }
                    if items.iter().all(|a| {
                        let cr = application_resource_of(a);
                        last.contains_key(&format!(
                            "{}/{}",
                            cr["metadata"]["namespace"], cr["metadata"]["name"]
                        ))
                    }) {
                        *first2.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
                        first2.1.notify_all();
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let (lock, cvar) = &*first;
        let done = cvar
            .wait_timeout_while(
                lock.lock().unwrap_or_else(|e| e.into_inner()),
                Duration::from_secs(60),
                |done| !*done,
            )
            .unwrap_or_else(|e| e.into_inner());
        assert!(
            *done.0,
            "the sandbox's Applications were not mirrored within 60s"
        );
        drop(done);
        SandboxMirror {
            stop,
            thread: Some(thread),
            writes,
        }
    }
}

/// Starts etcd on two free loopback ports with its data in `data`; returns once it answers.
#[track_caller]
fn start_etcd(data: &Path) -> (Proc, String) {
    let etcd = etcd_binary();
    let mut last = String::new();
    for _ in 0..3 {
        let client = format!("http://127.0.0.1:{}", free_port());
        let peer = format!("http://127.0.0.1:{}", free_port());
        let _ = std::fs::remove_dir_all(data);
        let args = [
            "--name=test".to_string(),
            format!("--data-dir={}", data.display()),
            format!("--listen-client-urls={client}"),
            format!("--advertise-client-urls={client}"),
            format!("--listen-peer-urls={peer}"),
            format!("--initial-advertise-peer-urls={peer}"),
            format!("--initial-cluster=test={peer}"),
            "--log-level=warn".to_string(),
        ];
        let mut proc = Proc::spawn(&etcd, &args, &[]);
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            if !proc.is_running() {
                proc.wait_exit(Duration::from_secs(5));
                last = proc.output();
                break;
            }
            let ok = Command::new(etcdctl_binary())
                .env("ETCDCTL_API", "3")
                .args(["--endpoints", &client, "endpoint", "health"])
                .output()
                .is_ok_and(|o| o.status.success());
            if ok {
                return (proc, client);
            }
            assert!(
                Instant::now() < end,
                "etcd not healthy within 30s; output:\n{}",
                proc.output()
            );
            std::thread::sleep(POLL);
        }
    }
    panic!("etcd did not start (ports taken?); last output:\n{last}");
}

#[cfg(test)]
mod tests {
    use super::*;

    const APP: &str = "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: one\n  namespace: argocd\nspec:\n  project: default\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: one\n  source:\n    repoURL: https://example.invalid/repo.git\n    path: one\n    targetRevision: HEAD\n";

    #[test]
    fn applications_survive_a_restart_and_compaction_makes_old_versions_gone() {
        let mut k = KubeApiserver::start_with_namespaces(&["apps"]);
        assert!(k.kubectl_ok(&["get", "namespaces"]).contains("apps"));
        k.kubectl_stdin(&["create"], APP);
        let rv = k.kubectl_ok(&[
            "get",
            "application",
            "one",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ]);
        // Status is an ordinary field of this CRD (no status subresource): a merge patch sets it,
        // as Argo CD's controller does.
        k.kubectl_ok(&[
            "patch",
            "application",
            "one",
            "--type=merge",
            "-p",
            r#"{"status":{"health":{"status":"Healthy"}}}"#,
        ]);

        k.restart_apiserver();
        let health = k.kubectl_ok(&[
            "get",
            "application",
            "one",
            "-o",
            "jsonpath={.status.health.status}",
        ]);
        assert_eq!(health, "Healthy");

        // A watch from the first resourceVersion is served before compaction, 410 after.
        let watch = format!(
            "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications?watch=1&resourceVersion={rv}&timeoutSeconds=1"
        );
        let before = k.kubectl_ok(&["get", "--raw", &watch]);
        assert!(before.contains("\"MODIFIED\""), "{before}");
        let revision = k.compact_etcd();
        assert!(revision >= rv.parse::<i64>().unwrap());
        let after = k.kubectl(&["get", "--raw", &watch]);
        let text = String::from_utf8_lossy(&after.stdout).into_owned()
            + &String::from_utf8_lossy(&after.stderr);
        assert!(text.contains("410") || text.contains("too old"), "{text}");
    }

    #[test]
    fn a_service_account_token_gets_only_what_rbac_grants() {
        let k = KubeApiserver::start();
        k.kubectl_ok(&["create", "serviceaccount", "reader", "-n", ARGOCD_NAMESPACE]);
        let token = k.create_token(ARGOCD_NAMESPACE, "reader");
        let config = k.dir().join("reader.kubeconfig");
        k.write_token_kubeconfig(&config, &token, ARGOCD_NAMESPACE);
        let as_reader = |args: &[&str]| {
            k.kubectl_cmd()
                .env("KUBECONFIG", &config)
                .args(args)
                .output()
                .expect("run kubectl")
        };
        let refused = as_reader(&["get", "applications"]);
        assert!(!refused.status.success());
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains("forbidden"),
            "{}",
            String::from_utf8_lossy(&refused.stderr)
        );
        k.kubectl_ok(&[
            "create",
            "role",
            "reader",
            "--verb=get,list,watch",
            "--resource=applications.argoproj.io",
        ]);
        k.kubectl_ok(&[
            "create",
            "rolebinding",
            "reader",
            "--role=reader",
            "--serviceaccount=argocd:reader",
        ]);
        let allowed = as_reader(&["get", "applications"]);
        assert!(
            allowed.status.success(),
            "{}",
            String::from_utf8_lossy(&allowed.stderr)
        );
    }
}
