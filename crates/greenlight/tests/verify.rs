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
