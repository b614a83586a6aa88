//! End to end: `greenlight verify` against the sandbox, whose running containers carry the
//! `imageID` a kubelet reports: the digest git pins against the one the Pods run — all run
//! it (0), none do because the sync has not applied it (1), a tag (2), and usage errors (2).

#[macro_use]
mod common;
use common::*;
use serde_json::Value;
use std::process::Output;
use std::time::Duration;

const T: Duration = Duration::from_secs(60);
const D1: &str =
    "registry.local/web@sha256:1111111111111111111111111111111111111111111111111111111111111111";
const D2: &str =
    "registry.local/web@sha256:2222222222222222222222222222222222222222222222222222222222222222";

fn verify(url: &str, extra: &[&str]) -> Output {
    let mut args = vec!["verify", "--argocd-url", url];
    args.extend(extra);
    std::process::Command::new(BIN)
        .args(&args)
        .output()
        .expect("run greenlight verify")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Synced and running: every Pod runs the digest git pins.
fn a_synced_digest_runs_on_every_pod() {
    let repo = Repo::new();
    repo.set_image("web", D1, "web: pinned");
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let o = verify(&sb.url, &["--app", "web"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains(
            "Deployment/apps/web container main: all 1 Pod(s) run sha256:111111111111… — the digest pinned"
        ) && out.contains("(pinned digests from Argo CD's target state"),
        "{out}"
    );
}

/// A promotion committed but not synced (automated sync off): git pins the new digest, every
/// Pod still runs the old one — none runs it, with Argo CD's sync state.
fn a_digest_not_synced_runs_on_no_pod() {
    let repo = Repo::new();
    repo.set_image("web", D1, "web: pinned");
    let sb = sandbox(&repo, &["web=apps/web"], &["--manual-sync", "web"]);
    let first = repo.remote_tip();
    sb.sync("web", "{}");
    sb.wait_app("web", T, |a| healthy_at(a, &first));
    let promoted = repo.set_image("web", D2, "web: promoted");
    sb.wait_app("web", T, |a| {
        a["status"]["sync"]["revision"] == promoted.as_str()
            && a["status"]["sync"]["status"] == "OutOfSync"
    });
    let o = verify(&sb.url, &["--app", "web"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains(&format!(
            "none of 1 Pod(s) runs sha256:222222222222…: they run sha256:111111111111… ×1 — the sync stalled or the change is not applied (Argo CD: OutOfSync at {})",
            &promoted[..12]
        )),
        "{out}"
    );
    // The manifest a pipeline holds says the same, as JSON.
    // (A file of its own, as a pipeline's checkout holds it.)
    let file = repo.path("deploy.yaml");
    std::fs::write(&file, deployment("web", D2)).unwrap();
    let o = verify(
        &sb.url,
        &[
            "--app",
            "web",
            "--manifest",
            file.to_str().unwrap(),
            "--output",
            "json",
        ],
    );
    let (out, err) = text(&o);
    let j: Value =
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}\nstderr:\n{err}"));
    assert_eq!(o.status.code(), Some(1), "{j}");
    assert_eq!(j["exit_code"], 1);
    assert_eq!(j["containers"][0]["answer"], "none");
    assert_eq!(j["containers"][0]["pods"], 1);
    assert_eq!(j["containers"][0]["image"], D2);
    assert_eq!(
        j["containers"][0]["others"]["sha256:1111111111111111111111111111111111111111111111111111111111111111"],
        1
    );
    // Synced: now every Pod runs it.
    sb.sync("web", "{}");
    sb.wait_app("web", T, |a| healthy_at(a, &promoted));
    let o = verify(&sb.url, &["--app", "web"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
}

/// A rollout that does not finish (the new Pods crash-loop): the old ReplicaSet's Pods keep
/// running the old digest beside the new ones — some Pods run it, and how many.
fn a_rollout_in_progress_is_some_pods_and_how_many() {
    let repo = Repo::new();
    repo.set_image("web", D1, "web: pinned");
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let crashing = deployment("web", D2).replacen(
        "  namespace: apps\n",
        &format!(
            "  namespace: apps\n  annotations:\n    {}: Degraded\n",
            greenlight_sandbox::HEALTH_ANNOTATION
        ),
        1,
    );
    repo.write("apps/web/deploy.yaml", &crashing);
    let c = repo.commit_push("web: a build that crashes");
    sb.wait_app("web", T, |a| {
        a["status"]["sync"]["revision"] == c.as_str()
            && a["status"]["health"]["status"] == "Degraded"
    });
    let o = verify(&sb.url, &["--app", "web"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains(
            "a rollout in progress — 1 of 2 Pod(s) run sha256:222222222222…; the others run sha256:111111111111… ×1"
        ),
        "{out}"
    );
}

/// A tag: what it runs can change under it, so verify says it means nothing (exit 2) and
/// points at pinning it.
fn a_tag_is_not_verified() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let o = verify(&sb.url, &["--app", "web"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains(&format!("{GOOD} names a tag, not a digest"))
            && out.contains(&format!("greenlight guard image --resolve {GOOD}")),
        "{out}"
    );
}

on_every_argocd_version!(
    a_synced_digest_runs_on_every_pod,
    a_digest_not_synced_runs_on_no_pod,
    a_rollout_in_progress_is_some_pods_and_how_many,
    a_tag_is_not_verified,
);

/// Usage errors name what was wrong: an app name that cannot be, a manifest that is not a
/// readable file, an app Argo CD does not have.
#[test]
fn usage_errors_name_the_flag() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let o = verify(&sb.url, &["--app", "a/b/c"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--app \"a/b/c\""), "{err}");
    let o = verify(&sb.url, &["--app", "web", "--manifest", "/dev/zero"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--manifest") && err.contains("/dev/zero"),
        "{err}"
    );
    // Argo CD answers 403 for an app that does not exist as for one the token cannot see.
    let o = verify(&sb.url, &["--app", "nosuch"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("the token lacks access, or the application does not exist"),
        "{err}"
    );
}

// `--source kube`: the Application, its workloads and their Pods read from a real
// kube-apiserver (greenlight-testkit's `KubeApiserver`). The apiserver runs no controllers, so
// the test writes what they would: a Deployment's ReplicaSets owned by it, their Pods owned by
// them, and each Pod's `status.containerStatuses[].imageID` through the `/status` subresource,
// as a kubelet reports it; the Application as Argo CD's controller writes it.

use greenlight_testkit::KubeApiserver;
use greenlight_testkit::kube::ARGOCD_NAMESPACE;
use serde_json::json;

/// The namespace the workloads run in.
const APPS: &str = "apps";

/// `greenlight verify --source kube --kubeconfig <kubeconfig>`, then `extra`.
fn verify_kube(kubeconfig: &std::path::Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "verify",
        "--source",
        "kube",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ];
    args.extend(extra);
    std::process::Command::new(BIN)
        .args(&args)
        .output()
        .expect("run greenlight verify")
}

/// Creates `object` (JSON) as the admin; its UID.
#[track_caller]
fn create(kube: &KubeApiserver, object: &Value) -> String {
    kube.kubectl_stdin(
        &["create", "-o", "jsonpath={.metadata.uid}"],
        &object.to_string(),
    )
}

/// The owner reference a controller writes.
fn owner(kind: &str, name: &str, uid: &str) -> Value {
    json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid,
            "controller": true, "blockOwnerDeletion": true}])
}

/// A pod template (or Pod spec) of one container `main` running `image`, labelled `app: name`.
fn pod_spec(image: &str) -> Value {
    json!({"automountServiceAccountToken": false,
           "containers": [{"name": "main", "image": image}]})
}

/// Deployment `name` in [`APPS`] pinning `image`; its UID.
#[track_caller]
fn create_deployment(kube: &KubeApiserver, name: &str, image: &str) -> String {
    create(
        kube,
        &json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": APPS},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec(image)}}}),
    )
}

/// ReplicaSet `name` (revision `revision`) owned by `owners` (`None`: an orphan), pinning
/// `image`, labelled `app: app`; its UID.
#[track_caller]
fn create_replicaset(
    kube: &KubeApiserver,
    app: &str,
    name: &str,
    revision: u32,
    image: &str,
    owners: Option<Value>,
) -> String {
    let mut meta = json!({"name": name, "namespace": APPS, "labels": {"app": app},
        "annotations": {"deployment.kubernetes.io/revision": revision.to_string()}});
    if let Some(o) = owners {
        meta["ownerReferences"] = o;
    }
    create(
        kube,
        &json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta,
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": app}},
                "template": {"metadata": {"labels": {"app": app}}, "spec": pod_spec(image)}}}),
    )
}

/// Pod `name` labelled `app: app`, owned by `owners`, whose container `main` the kubelet
/// reports running `image_id` (`None`: still waiting for its image, no `imageID`).
#[track_caller]
fn create_pod(
    kube: &KubeApiserver,
    app: &str,
    name: &str,
    image: &str,
    owners: Option<Value>,
    image_id: Option<&str>,
) {
    let mut meta = json!({"name": name, "namespace": APPS, "labels": {"app": app}});
    if let Some(o) = owners {
        meta["ownerReferences"] = o;
    }
    create(
        kube,
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec(image)}),
    );
    let status = match image_id {
        Some(id) => json!({"name": "main", "image": image, "imageID": id, "ready": true,
            "restartCount": 0, "started": true,
            "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}}}),
        None => json!({"name": "main", "image": image, "imageID": "", "ready": false,
            "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}),
    };
    let phase = if image_id.is_some() {
        "Running"
    } else {
        "Pending"
    };
    kube.kubectl_ok(&[
        "patch",
        "pod",
        name,
        "-n",
        APPS,
        "--subresource=status",
        "--type=merge",
        "-p",
        &json!({"status": {"phase": phase, "containerStatuses": [status]}}).to_string(),
    ]);
}

/// The Application `name` in `argocd`, as Argo CD's controller writes it: its workload the
/// Deployment `name` in [`APPS`], its sync `sync` at `revision`.
#[track_caller]
fn create_application(kube: &KubeApiserver, name: &str, sync: &str, revision: &str) {
    create(
        kube,
        &json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": ARGOCD_NAMESPACE},
            "spec": {"project": "default",
                "destination": {"server": "https://kubernetes.default.svc", "namespace": APPS},
                "source": {"repoURL": "https://git.example/deploy.git", "path": name,
                    "targetRevision": "HEAD"}},
            "status": {"sync": {"status": sync, "revision": revision},
                "health": {"status": "Healthy"},
                "resources": [
                    {"version": "v1", "kind": "Service", "namespace": APPS, "name": name,
                     "status": sync},
                    {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": APPS,
                     "name": name, "status": sync}]}}),
    );
}

/// An `imageID` as a kubelet with Docker reports it.
fn image_id(image: &str) -> String {
    format!("docker-pullable://{image}")
}

/// The apiserver with what a cluster running four apps would hold: `done` (every Pod runs the
/// pinned digest), `rolling` (a rollout half way: the old ReplicaSet's Pod beside a new one,
/// and a new Pod still pulling), `stalled` (the Deployment still at the old digest) and
/// `tagged` (a tag). A Pod with `app: done`'s labels that no ReplicaSet of it owns runs another
/// digest: ownership, not labels, makes a Pod the workload's.
fn cluster() -> KubeApiserver {
    let kube = KubeApiserver::start_with_namespaces(&[APPS]);
    // Pods need their ServiceAccount (the admission plugin looks it up; no controller makes it).
    kube.kubectl_ok(&["create", "serviceaccount", "default", "-n", APPS]);
    let rev = "0123456789abcdef0123456789abcdef01234567";

    let uid = create_deployment(&kube, "done", D2);
    let rs = create_replicaset(
        &kube,
        "done",
        "done-2",
        2,
        D2,
        Some(owner("Deployment", "done", &uid)),
    );
    for p in ["done-2-a", "done-2-b"] {
        create_pod(
            &kube,
            "done",
            p,
            D2,
            Some(owner("ReplicaSet", "done-2", &rs)),
            Some(&image_id(D2)),
        );
    }
    // Not the Deployment's: an orphan ReplicaSet's Pod and a Pod of no one, both labelled as
    // its Pods are.
    let stray = create_replicaset(&kube, "done", "done-stray", 1, D1, None);
    create_pod(
        &kube,
        "done",
        "done-stray-a",
        D1,
        Some(owner("ReplicaSet", "done-stray", &stray)),
        Some(D1),
    );
    create_pod(&kube, "done", "done-bare", D1, None, Some(D1));
    create_application(&kube, "done", "Synced", rev);

    let uid = create_deployment(&kube, "rolling", D2);
    let old = create_replicaset(
        &kube,
        "rolling",
        "rolling-1",
        1,
        D1,
        Some(owner("Deployment", "rolling", &uid)),
    );
    let new = create_replicaset(
        &kube,
        "rolling",
        "rolling-2",
        2,
        D2,
        Some(owner("Deployment", "rolling", &uid)),
    );
    create_pod(
        &kube,
        "rolling",
        "rolling-1-a",
        D1,
        Some(owner("ReplicaSet", "rolling-1", &old)),
        Some(&image_id(D1)),
    );
    create_pod(
        &kube,
        "rolling",
        "rolling-2-a",
        D2,
        Some(owner("ReplicaSet", "rolling-2", &new)),
        Some(&image_id(D2)),
    );
    create_pod(
        &kube,
        "rolling",
        "rolling-2-b",
        D2,
        Some(owner("ReplicaSet", "rolling-2", &new)),
        None,
    );
    create_application(&kube, "rolling", "Synced", rev);

    let uid = create_deployment(&kube, "stalled", D1);
    let rs = create_replicaset(
        &kube,
        "stalled",
        "stalled-1",
        1,
        D1,
        Some(owner("Deployment", "stalled", &uid)),
    );
    create_pod(
        &kube,
        "stalled",
        "stalled-1-a",
        D1,
        Some(owner("ReplicaSet", "stalled-1", &rs)),
        Some(&image_id(D1)),
    );
    create_application(&kube, "stalled", "OutOfSync", rev);

    let uid = create_deployment(&kube, "tagged", GOOD);
    let rs = create_replicaset(
        &kube,
        "tagged",
        "tagged-1",
        1,
        GOOD,
        Some(owner("Deployment", "tagged", &uid)),
    );
    create_pod(
        &kube,
        "tagged",
        "tagged-1-a",
        GOOD,
        Some(owner("ReplicaSet", "tagged-1", &rs)),
        Some(&image_id(D1)),
    );
    create_application(&kube, "tagged", "Synced", rev);
    kube
}

/// A kubeconfig of a ServiceAccount granted only what docs/verify.md#source-kube lists: `get`
/// on Applications in `argocd`; `get` on Deployments and `list` on ReplicaSets and Pods in
/// [`APPS`].
fn least_privilege_kubeconfig(kube: &KubeApiserver) -> std::path::PathBuf {
    kube.kubectl_ok(&[
        "create",
        "serviceaccount",
        "verifier",
        "-n",
        ARGOCD_NAMESPACE,
    ]);
    kube.kubectl_ok(&[
        "create",
        "role",
        "verify-apps",
        "-n",
        ARGOCD_NAMESPACE,
        "--verb=get",
        "--resource=applications.argoproj.io",
    ]);
    kube.kubectl_ok(&[
        "create",
        "rolebinding",
        "verify-apps",
        "-n",
        ARGOCD_NAMESPACE,
        "--role=verify-apps",
        "--serviceaccount=argocd:verifier",
    ]);
    kube.kubectl_ok(&[
        "create",
        "role",
        "verify-workloads",
        "-n",
        APPS,
        "--verb=get",
        "--resource=deployments.apps,statefulsets.apps,daemonsets.apps",
    ]);
    kube.kubectl_ok(&[
        "create",
        "role",
        "verify-pods",
        "-n",
        APPS,
        "--verb=list",
        "--resource=replicasets.apps,pods",
    ]);
    for role in ["verify-workloads", "verify-pods"] {
        kube.kubectl_ok(&[
            "create",
            "rolebinding",
            role,
            "-n",
            APPS,
            &format!("--role={role}"),
            "--serviceaccount=argocd:verifier",
        ]);
    }
    let token = kube.create_token(ARGOCD_NAMESPACE, "verifier");
    let path = kube.dir().join("verifier.kubeconfig");
    kube.write_token_kubeconfig(&path, &token, ARGOCD_NAMESPACE);
    path
}

/// All, some, none and a tag, from the Kubernetes API alone: each with its words and exit
/// code, the same as from Argo CD's API; without `--manifest` the live template is the desired
/// state, with it the file's digest; a ServiceAccount with the documented rights only answers
/// the same.
#[test]
fn kube_source_all_some_none_and_a_tag() {
    let kube = cluster();
    let k = kube.kubeconfig();

    // All: both Pods of the Deployment's ReplicaSet, and not the strays with its labels.
    let o = verify_kube(k, &["--app", "done"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains(
            "Deployment/apps/done container main: all 2 Pod(s) run sha256:222222222222… — the digest pinned"
        ) && out.contains("(pinned digests from the live workloads' templates (the Kubernetes API)")
            && out.contains("Argo CD: Synced at 0123456789ab"),
        "{out}"
    );

    // Some: the old ReplicaSet's Pod still runs the old digest, a new one has none yet.
    let o = verify_kube(k, &["--app", "argocd/rolling", "--output", "json"]);
    let (out, err) = text(&o);
    let j: Value =
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}\nstderr:\n{err}"));
    assert_eq!(o.status.code(), Some(1), "{j}");
    assert_eq!(j["app"], "argocd/rolling");
    assert_eq!(j["containers"][0]["answer"], "some", "{j}");
    assert_eq!(j["containers"][0]["running"], 1, "{j}");
    assert_eq!(j["containers"][0]["pods"], 3, "{j}");
    assert_eq!(j["containers"][0]["others"]["none yet"], 1, "{j}");
    assert_eq!(
        j["containers"][0]["others"]["sha256:1111111111111111111111111111111111111111111111111111111111111111"],
        1,
        "{j}"
    );
    let o = verify_kube(k, &["--app", "rolling", "--namespace", ARGOCD_NAMESPACE]);
    let (out, _) = text(&o);
    assert!(
        out.contains(
            "a rollout in progress — 1 of 3 Pod(s) run sha256:222222222222…; the others run none yet ×1, sha256:111111111111… ×1"
        ),
        "{out}"
    );

    // None: git (the file a pipeline holds) pins the new digest; the Deployment was never
    // updated. Without --manifest the live template is what is compared, and its Pods run it:
    // that proves the rollout, not git, and the footer says Argo CD's OutOfSync.
    let file = kube.dir().join("stalled.yaml");
    std::fs::write(&file, deployment("stalled", D2)).unwrap();
    let o = verify_kube(
        k,
        &["--app", "stalled", "--manifest", file.to_str().unwrap()],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains(
            "Deployment/apps/stalled container main: none of 1 Pod(s) runs sha256:222222222222…: they run sha256:111111111111… ×1 — the sync stalled or the change is not applied (Argo CD: OutOfSync at 0123456789ab)"
        ),
        "{out}"
    );
    let o = verify_kube(k, &["--app", "stalled"]);
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("Argo CD: OutOfSync at 0123456789ab"), "{out}");

    // A tag: nothing to verify.
    let o = verify_kube(k, &["--app", "tagged"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains(&format!("{GOOD} names a tag, not a digest")),
        "{out}"
    );

    // An app the cluster does not have: a usage error naming where it was looked for.
    let o = verify_kube(k, &["--app", "nosuch"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains(
            "no Application nosuch in namespace argocd (the kubeconfig context's namespace; 404)"
        ) && err.contains("give --app <namespace>/<name> or --namespace"),
        "{err}"
    );

    // The rights docs/verify.md lists are enough.
    let sa = least_privilege_kubeconfig(&kube);
    let o = verify_kube(&sa, &["--app", "rolling"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("1 of 3 Pod(s) run sha256:222222222222…"),
        "{out}"
    );
    // And without the Pods' the error names what RBAC refused.
    kube.kubectl_ok(&["delete", "rolebinding", "verify-pods", "-n", APPS]);
    let o = verify_kube(&sa, &["--app", "rolling"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("from the Kubernetes API failed: 403") && err.contains("replicasets"),
        "{err}"
    );
}

/// Flags that do nothing with the source chosen are usage errors, naming the flag.
#[test]
fn kube_source_usage_errors_name_the_flag() {
    let run = |args: &[&str]| {
        let o = std::process::Command::new(BIN)
            .args(args)
            .output()
            .expect("run greenlight verify");
        let (_, err) = text(&o);
        (o.status.code(), err)
    };
    let (code, err) = run(&[
        "verify",
        "--app",
        "web",
        "--source",
        "kube",
        "--argocd-url",
        "http://127.0.0.1:1",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--argocd-url: not read with --source kube"),
        "{err}"
    );
    let (code, err) = run(&["verify", "--app", "web", "--kubeconfig", "/nonexistent"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--kubeconfig: only read with --source kube"),
        "{err}"
    );
    let (code, err) = run(&["verify", "--app", "web"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--argocd-url is required with --source argocd"),
        "{err}"
    );
    let (code, err) = run(&[
        "verify",
        "--app",
        "web",
        "--source",
        "kube",
        "--kubeconfig",
        "/nonexistent/kubeconfig",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
    let (code, err) = run(&[
        "verify",
        "--app",
        "argocd/web",
        "--source",
        "kube",
        "--namespace",
        "other",
        "--kubeconfig",
        "/nonexistent/kubeconfig",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("give one of them"), "{err}");
}
