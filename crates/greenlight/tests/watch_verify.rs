//! End to end: `greenlight watch` with `expect=Healthy,Running` against the sandbox, whose
//! running containers carry the `imageID` a kubelet reports. A watch is `CONFIRMED` only when
//! every Pod runs the digest git pins; a tag cannot be verified; an app whose Pods run nothing
//! git pins fails, never reverted. Waits are on recorded states, never fixed sleeps.

#[macro_use]
mod common;
use common::*;
use std::time::Duration;

const T: Duration = Duration::from_secs(60);
const D1: &str =
    "registry.local/web@sha256:1111111111111111111111111111111111111111111111111111111111111111";
const D2: &str =
    "registry.local/web@sha256:2222222222222222222222222222222222222222222222222222222222222222";

fn expecting_running(app: &str) -> String {
    format!("Nav-Watchdog: app={app} deadline=30 mode=arm expect=Healthy,Running")
}

/// A digest promoted and rolled out: confirmed, the verdict naming what every Pod runs.
fn a_pinned_digest_every_pod_runs_is_confirmed_and_says_so() {
    let repo = Repo::new();
    repo.set_image("web", D1, "web: pinned");
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let c = repo.set_image(
        "web",
        D2,
        &format!("web: promote\n\n{}", expecting_running("web")),
    );
    let w = wd.wait_state(&c, "CONFIRMED", T);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.contains(
            "; verified: Deployment/apps/web container main: all 1 Pod(s) run sha256:222222222222…"
        ),
        "{reason}"
    );
}

/// A tag: what runs cannot be compared with git, said at the verdict, nothing reverted.
fn a_tag_cannot_be_verified() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", expecting_running("web")),
    );
    let w = wd.wait_state(&c, "ERROR_UNWATCHABLE", T);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("{GOOD2} names a tag")) && reason.contains("pin digests"),
        "{reason}"
    );
    assert_eq!(repo.remote_tip(), c, "nothing reverted");
}

/// Healthy and stable, but no Pod of the app runs anything git pins (it deploys a ConfigMap
/// only): FAIL once the verify window ends, never reverted though armed.
fn an_app_whose_pods_run_nothing_git_pins_fails_without_a_revert() {
    let repo = Repo::new();
    repo.write("apps/cfg/config.yaml", &config_map("a"))
        .commit_push("cfg: first");
    let sb = sandbox(&repo, &["cfg=apps/cfg"], &[]);
    settled(&sb, &repo, &["cfg"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    repo.write("apps/cfg/config.yaml", &config_map("b"));
    let c = repo.commit_push(&format!("cfg: b\n\n{}", expecting_running("cfg")));
    let w = wd.wait_state(&c, "FAIL", T);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.contains("did not run what git pins")
            && reason.contains("nothing runs what git pins"),
        "{reason}"
    );
    assert!(
        w["revert_commit"].is_null() && w["revert_pending"] == false,
        "{w}"
    );
    assert_eq!(repo.remote_tip(), c, "nothing reverted");
}

#[test]
fn a_pinned_digest_every_pod_runs_is_confirmed_and_says_so_() {
    on_argocd(
        "3.5",
        a_pinned_digest_every_pod_runs_is_confirmed_and_says_so,
    );
}

#[test]
fn a_tag_cannot_be_verified_() {
    on_argocd("2.14", a_tag_cannot_be_verified);
}

#[test]
fn an_app_whose_pods_run_nothing_git_pins_fails_without_a_revert_() {
    on_argocd(
        "3.5",
        an_app_whose_pods_run_nothing_git_pins_fails_without_a_revert,
    );
}
