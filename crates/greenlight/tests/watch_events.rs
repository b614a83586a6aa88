//! `greenlight watch --events` against a real kube-apiserver (v1.20.2 on Debian's etcd, the kit's
//! harness) with Argo CD's real Application CRD: the sandbox stands in for Argo CD's REST API, and
//! its Applications are also objects in the apiserver, so the Events greenlight writes have
//! something to regard. What the Events say is read back with real kubectl, as an operator reads
//! them (`kubectl get events.events.k8s.io`, `kubectl describe application`). Waits are bounded
//! polls on printed lines, the state file and the apiserver, never fixed sleeps.

mod common;
use common::*;
use greenlight_testkit::KubeApiserver;
use greenlight_testkit::watch::WATCHING;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);
const NS: &str = "argocd";

/// Argo CD's Application `name` for `apps/<name>` of `repo`, as an operator creates it.
fn create_application(kube: &KubeApiserver, repo: &Repo, name: &str) -> String {
    let yaml = format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {name}\n  namespace: {NS}\nspec:\n  project: default\n  source:\n    repoURL: {}\n    path: apps/{name}\n    targetRevision: main\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: apps\n",
        repo.repo()
    );
    kube.kubectl_stdin(&["apply"], &yaml);
    kube.kubectl_ok(&[
        "get",
        "application",
        name,
        "-n",
        NS,
        "-o",
        "jsonpath={.metadata.uid}",
    ])
}

/// A ServiceAccount `sa` in `argocd` bound to a Role of `rules` (kubectl's `create role` flags,
/// one `--verb=… --resource=…` pair each); a kubeconfig for its token, written in `dir`, and
/// the token.
fn service_account(
    kube: &KubeApiserver,
    sa: &str,
    rules: &[(&str, &str)],
    dir: &Path,
) -> (String, String) {
    kube.kubectl_ok(&["create", "serviceaccount", sa, "-n", NS]);
    for (i, (verbs, resource)) in rules.iter().enumerate() {
        let role = format!("{sa}-{i}");
        kube.kubectl_ok(&[
            "create",
            "role",
            &role,
            "-n",
            NS,
            &format!("--verb={verbs}"),
            &format!("--resource={resource}"),
        ]);
        kube.kubectl_ok(&[
            "create",
            "rolebinding",
            &role,
            "-n",
            NS,
            &format!("--role={role}"),
            &format!("--serviceaccount={NS}:{sa}"),
        ]);
    }
    let token = kube.create_token(NS, sa);
    let path = dir.join(format!("{sa}.kubeconfig"));
    kube.write_token_kubeconfig(&path, &token, NS);
    (path.display().to_string(), token)
}

/// The RBAC docs/events.md gives: Events created and patched, Applications read.
const DOCUMENTED_RBAC: &[(&str, &str)] = &[
    ("create,patch", "events.events.k8s.io"),
    ("get,list", "applications.argoproj.io"),
];

/// `greenlight watch --events --kubeconfig <kubeconfig>` over the sandbox, `--stable-for`
/// `stable_for`.
fn watchdog_with_events(
    repo: &Repo,
    url: &str,
    kubeconfig: &str,
    stable_for: &str,
) -> (Proc, std::path::PathBuf) {
    let state = repo.path("state/greenlight.db");
    let mut args = watch_args(repo, url, &state, &["--events", "--kubeconfig", kubeconfig]);
    let i = args.iter().position(|a| a == "--stable-for").unwrap();
    args[i + 1] = stable_for.to_string();
    let proc = Proc::spawn(BIN, &args, &[]);
    proc.wait_line(WATCHING, T);
    (proc, state)
}

/// The Events greenlight wrote in `argocd`, as `kubectl get events.events.k8s.io -o json` shows them.
fn events(kube: &KubeApiserver) -> Vec<Value> {
    let out = kube.kubectl_ok(&["get", "events.events.k8s.io", "-n", NS, "-o", "json"]);
    let v: Value = serde_json::from_str(&out).expect("kubectl prints JSON");
    v["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["reportingController"] == "greenlight.dev/watchdog")
        .collect()
}

fn with_reason(events: &[Value], reason: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["reason"] == reason)
        .cloned()
        .collect()
}

/// Polls the Events until `ok` holds of them; fails after [`T`] showing what there was.
#[track_caller]
fn wait_events(kube: &KubeApiserver, what: &str, ok: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let end = Instant::now() + T;
    loop {
        let evs = events(kube);
        if ok(&evs) {
            return evs;
        }
        assert!(
            Instant::now() < end,
            "{what}: not within {T:?}; the Events: {evs:#?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn count_lines(proc: &Proc, needle: &str) -> usize {
    proc.lines().iter().filter(|l| l.contains(needle)).count()
}

#[track_caller]
fn wait_lines(proc: &Proc, needle: &str, n: usize) {
    let end = Instant::now() + T;
    while count_lines(proc, needle) < n {
        assert!(
            Instant::now() < end,
            "fewer than {n} lines with {needle:?} within {T:?}:\n{}",
            proc.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A commit's watch, start to CONFIRMED, with its healthy streak broken once by a transient:
/// each transition is an Event regarding the Application (its uid, so `kubectl describe` and
/// Argo CD's UI list it), with the kind as reason and the catalogue's words and the short SHA as
/// note; the streak that started twice with the same words is one Event with a series of 2.
/// greenlight runs as a ServiceAccount bound only to the RBAC docs/events.md gives.
#[test]
fn transitions_are_events_on_the_application_and_a_repeat_is_a_series() {
    let kube = KubeApiserver::start();
    let repo = Repo::new();
    let uid = create_application(&kube, &repo, "web");
    assert!(!uid.is_empty());
    let (kubeconfig, _) = service_account(&kube, "greenlight", DOCUMENTED_RBAC, kube.dir());
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let (proc, state) = watchdog_with_events(&repo, &sb.url, &kubeconfig, "6s");
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "120s", "shadow")),
    );
    let short = &c[..8];
    proc.wait_line("stability window of 6s started", T);
    sb.hold_health("web", "Deployment", "web", "Progressing", 1.0);
    proc.wait_line("healthy streak broken", T);
    wait_lines(&proc, "stability window of 6s started", 2);
    wait_state(&state, &c, "CONFIRMED", T, &proc);
    let started = count_lines(&proc, "stability window of 6s started");

    let evs = wait_events(&kube, "the CONFIRMED Event", |e| {
        !with_reason(e, "Confirmed").is_empty()
    });
    for reason in [
        "WatchStarted",
        "Reached",
        "HealthyStreakBroken",
        "Confirmed",
    ] {
        let found = with_reason(&evs, reason);
        assert_eq!(found.len(), 1, "one {reason} Event: {evs:#?}");
        let e = &found[0];
        assert_eq!(e["regarding"]["kind"], "Application", "{e}");
        assert_eq!(e["regarding"]["apiVersion"], "argoproj.io/v1alpha1", "{e}");
        assert_eq!(e["regarding"]["name"], "web", "{e}");
        assert_eq!(e["regarding"]["namespace"], NS, "{e}");
        assert_eq!(e["regarding"]["uid"], uid.as_str(), "{e}");
        assert_eq!(e["type"], "Normal", "{e}");
        let note = e["note"].as_str().unwrap();
        assert!(
            note.starts_with(&format!("commit {short}: ")),
            "{reason}: {note}"
        );
    }
    let confirmed = &with_reason(&evs, "Confirmed")[0];
    assert_eq!(confirmed["action"], "Judge", "{confirmed}");
    assert!(
        confirmed["note"].as_str().unwrap().ends_with("[CONFIRMED]"),
        "{confirmed}"
    );
    // The streak started `started` times (twice at least) with the same words: one Event.
    assert!(started >= 2, "{}", proc.output());
    let streak = wait_events(&kube, "the streak's series", |e| {
        with_reason(e, "HealthyStreakStarted")
            .first()
            .is_some_and(|s| s["series"]["count"] == started as i64)
    });
    let series = with_reason(&streak, "HealthyStreakStarted");
    assert_eq!(series.len(), 1, "one Event, not {started}: {series:#?}");
    assert!(
        series[0]["series"]["lastObservedTime"].is_string(),
        "{series:#?}"
    );

    // What an operator sees.
    let described = kube.kubectl_ok(&["describe", "application", "web", "-n", NS]);
    eprintln!("kubectl describe application web:\n{described}");
    eprintln!("the Confirmed Event: {confirmed:#}");
    for words in [
        "WatchStarted",
        "HealthyStreakStarted",
        "Confirmed",
        &format!("commit {short}: "),
        &format!("(x{started} over"),
    ] {
        assert!(
            described.contains(words),
            "kubectl describe shows {words:?}:\n{described}"
        );
    }
    assert!(
        !proc.output().contains("not written"),
        "no Event write failed:\n{}",
        proc.output()
    );
}

/// A ServiceAccount that may read Applications but not create Events: the verdict is recorded
/// all the same, and each refused write is one warning naming the app and the HTTP status, with
/// the running count of failures, and never the token.
#[test]
fn a_refused_event_write_is_warned_and_counted_and_the_verdict_stands() {
    let kube = KubeApiserver::start();
    let repo = Repo::new();
    create_application(&kube, &repo, "web");
    let (kubeconfig, token) = service_account(
        &kube,
        "reader",
        &[("get,list", "applications.argoproj.io")],
        kube.dir(),
    );
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let (proc, state) = watchdog_with_events(&repo, &sb.url, &kubeconfig, "2s");
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "60s", "shadow")),
    );
    wait_state(&state, &c, "CONFIRMED", T, &proc);
    let line = proc.wait_line("Kubernetes Event WatchStarted for Application", T);
    assert!(line.contains("argocd/web"), "{line}");
    assert!(line.contains("not written: HTTP 403"), "{line}");
    assert!(line.contains("Event write failures: 1)"), "{line}");
    let last = proc.wait_line("Kubernetes Event Confirmed for Application", T);
    assert!(last.contains("HTTP 403"), "{last}");
    // The verdict's is the watch's last Event: every refused write before it is in its count.
    let lines = proc.lines();
    let at = lines.iter().position(|l| *l == last).unwrap();
    let refused = lines[..=at]
        .iter()
        .filter(|l| l.contains("not written: HTTP 403"))
        .count();
    assert!(refused >= 3, "{}", proc.output());
    assert!(
        last.contains(&format!("(Event write failures: {refused})")),
        "each refused write is counted once:\n{}",
        proc.output()
    );
    assert!(
        !proc.output().contains(&token),
        "the token never reaches the output"
    );
    assert!(events(&kube).is_empty(), "nothing was written");
}

/// `--events` with a kubeconfig that is not there refuses to start (exit 2), naming the flag and
/// the file, before any watch.
#[test]
fn events_without_a_usable_kubeconfig_refuse_to_start() {
    let repo = Repo::new();
    let missing = repo.path("no-such-kubeconfig");
    let state = repo.path("state/greenlight.db");
    let args = watch_args(
        &repo,
        "http://127.0.0.1:9",
        &state,
        &["--events", "--kubeconfig", missing.to_str().unwrap()],
    );
    let out = std::process::Command::new(BIN)
        .args(&args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--events"), "{err}");
    assert!(err.contains(missing.to_str().unwrap()), "{err}");
    assert!(!err.contains("watching "), "no watch started: {err}");
}

/// The API server does not answer (nothing listens where the kubeconfig points): the writer
/// retries, gives up, warns and counts, while the judge goes on and records its verdict.
#[test]
fn an_api_server_that_does_not_answer_costs_no_verdict() {
    let repo = Repo::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let kubeconfig = repo.path("dead.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: dead\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: not-a-real-token-4711\ncontexts:\n- name: dead\n  context:\n    cluster: dead\n    user: u\n    namespace: {NS}\ncurrent-context: dead\n"
        ),
    )
    .unwrap();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let (proc, state) = watchdog_with_events(&repo, &sb.url, kubeconfig.to_str().unwrap(), "2s");
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "60s", "shadow")),
    );
    wait_state(&state, &c, "CONFIRMED", T, &proc);
    let line = proc.wait_line("Kubernetes Event WatchStarted for Application web", T);
    assert!(
        line.contains("not written: no answer from the API server"),
        "{line}"
    );
    assert!(line.contains("(Event write failures: 1)"), "{line}");
    assert!(
        !proc.output().contains("not-a-real-token-4711"),
        "the token never reaches the output"
    );
}

/// With `--source kube` Events are on without `--events`: the sandbox's Applications mirrored
/// into the apiserver, greenlight reading them there as the ServiceAccount of
/// `deploy/rbac.yaml`'s rules (bound in `argocd` only), and its verdict on the Application.
#[test]
fn the_kubernetes_source_writes_events_without_the_flag() {
    let kube = KubeApiserver::start();
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let _mirror = kube.mirror_sandbox(&sb.url);
    let uid = kube.kubectl_ok(&[
        "get",
        "application",
        "web",
        "-n",
        NS,
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let (kubeconfig, _) = service_account(
        &kube,
        "greenlight",
        &[
            ("create,patch", "events.events.k8s.io"),
            ("get,list,watch", "applications.argoproj.io"),
        ],
        kube.dir(),
    );
    let state = repo.path("state/greenlight.db");
    let mut args = watch_args(&repo, "-", &state, &[]);
    let i = args.iter().position(|a| a == "--argocd-url").unwrap();
    args.drain(i..i + 2);
    args.extend(
        [
            "--source",
            "kube",
            "--kubeconfig",
            &kubeconfig,
            "--namespace",
            NS,
        ]
        .map(String::from),
    );
    let proc = Proc::spawn(BIN, &args, &[]);
    proc.wait_line(WATCHING, T);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "60s", "shadow")),
    );
    wait_state(&state, &c, "CONFIRMED", T, &proc);
    let evs = wait_events(&kube, "the CONFIRMED Event", |e| {
        !with_reason(e, "Confirmed").is_empty()
    });
    let confirmed = &with_reason(&evs, "Confirmed")[0];
    assert_eq!(confirmed["regarding"]["uid"], uid.as_str(), "{confirmed}");
    assert!(
        confirmed["note"]
            .as_str()
            .unwrap()
            .starts_with(&format!("commit {}: ", &c[..8])),
        "{confirmed}"
    );
    assert!(!proc.output().contains("not written"), "{}", proc.output());
}
