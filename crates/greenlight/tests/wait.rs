//! End to end: `greenlight wait` as a pipeline runs it after a deploy commit, against the
//! sandbox over a real bare remote: live (exit 0), not live (1, the verdict's reason), usage
//! (2), and Argo CD that could not be observed (3). The wait never reverts, never writes a
//! state file the caller keeps, and reads the commit's trailers not at all.

#[macro_use]
mod common;
use common::*;
use serde_json::Value;
use std::process::Output;
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

/// The arguments of `greenlight wait` over `repo` and `url` with the kit's test timings, then
/// `extra`.
fn wait_args(repo: &Repo, url: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["wait", "--repo", &repo.repo(), "--argocd-url", url]
        .map(String::from)
        .into();
    args.extend(JUDGE_TIMINGS.iter().chain(extra).map(|s| s.to_string()));
    args
}

/// `greenlight wait` over `repo` and `url` with the kit's test timings.
fn wait(repo: &Repo, url: &str, extra: &[&str]) -> Output {
    std::process::Command::new(BIN)
        .args(wait_args(repo, url, extra))
        .env_remove("GREENLIGHT_GIT_TOKEN")
        .output()
        .expect("run greenlight wait")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn json(o: &Output) -> Value {
    let (out, err) = text(o);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}\nstderr:\n{err}"))
}

/// A commit with no trailer, pushed by a pipeline: reached, healthy, stable → exit 0, with
/// progress on stderr that says when it was reached and how long the window has to go.
fn a_deployed_commit_is_live_once_healthy_for_the_window() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let c = repo.set_image("web", GOOD2, "web: 1.1.0");
    let o = wait(&repo, &sb.url, &["--app", "web", "--timeout", "60s"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.starts_with(&format!(
            "live: {} on web: confirmed: reached and healthy without a break for 2s",
            &c[..12]
        )),
        "{out}"
    );
    let waiting = format!("waiting for {} on web", &c[..12]);
    for needle in [
        waiting.as_str(),
        "reached:",
        "healthy_streak_started:",
        "s to go)",
        "confirmed:",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    }
    // The same answer for the commit named, as JSON.
    let o = wait(
        &repo,
        &sb.url,
        &[
            "--app",
            "web",
            "--commit",
            &c,
            "--timeout",
            "60s",
            "--output",
            "json",
        ],
    );
    let j = json(&o);
    assert_eq!(o.status.code(), Some(0), "{j}");
    assert_eq!(j["outcome"], "live");
    assert_eq!(j["state"], "CONFIRMED");
    assert_eq!(j["commit"], c.as_str());
    assert_eq!(j["app"], "web");
    assert_eq!(j["exit_code"], 0);
    assert!(
        j["reached_at"].is_string() && j["healthy_since"].is_string(),
        "{j}"
    );
    assert!(j.get("later_commits").is_none(), "{j}");
}

/// `--expect Healthy,Running`: live only once verify finds every Pod running the digest git
/// pins (the answer says what they run); a tag cannot be verified and is no live answer.
fn expect_running_is_live_only_when_every_pod_runs_the_pinned_digest() {
    const D2: &str = "registry.local/web@sha256:2222222222222222222222222222222222222222222222222222222222222222";
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let c = repo.set_image("web", D2, "web: pinned");
    let o = wait(
        &repo,
        &sb.url,
        &[
            "--app",
            "web",
            "--timeout",
            "60s",
            "--expect",
            "Healthy,Running",
        ],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.starts_with(&format!("live: {} on web: confirmed:", &c[..12]))
            && out.contains("; verified: Deployment/apps/web container main: all 1 Pod(s) run sha256:222222222222…"),
        "{out}"
    );
    // A tag: not live, said why.
    repo.set_image("web", GOOD2, "web: 1.1.0");
    let o = wait(
        &repo,
        &sb.url,
        &[
            "--app",
            "web",
            "--timeout",
            "60s",
            "--expect",
            "Healthy,Running",
        ],
    );
    let (out, err) = text(&o);
    assert_ne!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("names a tag") && out.contains("pin digests"),
        "{out}"
    );
}

/// Live is by ancestry: a broken commit fixed forward before the wait is "live" — the app runs
/// a revision that contains it, healthy — but never quietly: the answer names the later commit
/// to the app's paths that runs with it, and not one to another app's.
fn a_commit_fixed_forward_is_live_and_the_fix_is_named() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web", "other=apps/other"], &[]);
    settled(&sb, &repo, &["web", "other"]);
    let broken = repo.set_image("web", BAD, "web: 2.0.0");
    let fix = repo.set_image("web", GOOD2, "web: 1.1.0, fixed forward");
    let other = repo.set_image("other", GOOD2, "other: 1.1.0");
    let o = wait(
        &repo,
        &sb.url,
        &[
            "--app",
            "web",
            "--commit",
            &broken,
            "--timeout",
            "60s",
            "--output",
            "json",
        ],
    );
    let j = json(&o);
    assert_eq!(o.status.code(), Some(0), "{j}");
    assert_eq!(j["outcome"], "live");
    assert_eq!(j["later_commits"], serde_json::json!([fix]), "{j}");
    let reason = j["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!(
            "the app runs 1 later commit(s) to its paths with it ({}): they may have changed what this commit deployed",
            &fix[..12]
        )) && !reason.contains(&other[..12]),
        "{reason}"
    );
}

/// A commit that never becomes healthy is not live (exit 1, FAIL, the reason), and the wait
/// reverts nothing even when the commit's trailer says `mode=arm`.
fn a_broken_commit_is_not_live_and_nothing_is_reverted() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: 2.0.0\n\n{}", trailer("web", "900", "arm")),
    );
    let o = wait(
        &repo,
        &sb.url,
        &["--app", "web", "--timeout", "6s", "--output", "json"],
    );
    let j = json(&o);
    assert_eq!(o.status.code(), Some(1), "{j}");
    assert_eq!(j["outcome"], "not-live");
    assert_eq!(j["state"], "FAIL");
    assert_eq!(j["commit"], bad.as_str());
    assert!(
        j["reason"]
            .as_str()
            .unwrap()
            .contains("not healthy within 6s"),
        "{j}"
    );
    assert_eq!(repo.remote_tip(), bad, "a wait never pushes");
}

/// A commit a human reverted is withdrawn: not live (exit 1), the revert named.
fn a_commit_reverted_by_a_human_is_not_live() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let c = repo.set_image("web", GOOD2, "web: 1.1.0");
    repo.git(&["revert", "--no-edit", &c]);
    let revert = repo.push();
    let o = wait(
        &repo,
        &sb.url,
        &[
            "--app",
            "web",
            "--commit",
            &c,
            "--timeout",
            "60s",
            "--output",
            "json",
        ],
    );
    let j = json(&o);
    assert_eq!(o.status.code(), Some(1), "{j}");
    assert_eq!(j["outcome"], "not-live");
    assert_eq!(j["state"], "FAIL");
    let reason = j["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("reverted by {}", &revert[..8])),
        "{reason}"
    );
}

/// An app with a chronic condition (a resource Degraded since before the commit, which the
/// commit does not touch): a wait started before Argo CD syncs the commit has the app's state
/// before it as the baseline, and answers live, naming what it left out as in the baseline.
fn a_chronic_condition_from_before_the_sync_is_left_out_and_named() {
    chronic_condition_left_out(false)
}

/// The same, with the wait started only after Argo CD compared the commit (a webhook made it
/// compare at once): the app `OutOfSync` with the commit, its live objects still the last
/// sync's. That observation is the baseline (never a clean one, docs/verdicts.md#baseline): the
/// cache, which the commit leaves alone, is left out as in it.
fn a_chronic_condition_is_left_out_when_the_wait_starts_after_the_compare() {
    chronic_condition_left_out(true)
}

/// An app on manual sync with a broken cache Deployment, synced; a commit to its web image; a
/// wait for it started (after Argo CD compared the commit, with `after_compare`), then the sync.
fn chronic_condition_left_out(after_compare: bool) {
    let repo = Repo::new();
    repo.write("apps/web/cache.yaml", &deployment("cache", BAD))
        .commit_push("cache: broken since long ago");
    let sb = sandbox(&repo, &["web=apps/web"], &["--manual-sync", "web"]);
    let before = repo.remote_tip();
    sb.sync("web", "{}");
    // The first sync done: applied at `before`, the broken cache Degraded.
    sb.wait_app("web", T, |a| {
        a["status"]["operationState"]["phase"] == "Succeeded"
            && a["status"]["operationState"]["syncResult"]["revision"] == before.as_str()
            && a["status"]["sync"]["status"] == "Synced"
            && a["status"]["health"]["status"] == "Degraded"
    });
    let c = repo.set_image("web", GOOD2, "web: 1.1.0");
    if after_compare {
        // Compared, not synced: OutOfSync with the commit.
        sb.wait_app("web", T, |a| {
            a["status"]["sync"]["revision"] == c.as_str()
                && a["status"]["sync"]["status"] == "OutOfSync"
        });
    }
    let args = wait_args(
        &repo,
        &sb.url,
        &["--app", "web", "--commit", &c, "--timeout", "60s"],
    );
    let mut p = Proc::spawn(BIN, &args, &[]);
    p.wait_line("watch_started", T);
    sb.sync("web", "{}");
    let status = p.wait_exit(T);
    let out = p.output();
    assert_eq!(status.code(), Some(0), "{out}");
    assert!(
        out.contains(&format!("live: {} on web: confirmed", &c[..12]))
            && out.contains("left out as in the baseline: Deployment/apps/cache=Degraded"),
        "{out}"
    );
}

/// An app that does not sync on its own (automated sync off) never reaches the commit within
/// the timeout: NOT_REACHED, exit 1.
fn a_commit_the_app_never_syncs_is_not_reached() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &["--manual-sync", "web"]);
    sb.wait_app("web", T, |a| a["status"]["sync"]["revision"].is_string());
    let c = repo.set_image("web", GOOD2, "web: 1.1.0");
    let o = wait(&repo, &sb.url, &["--app", "web", "--timeout", "4s"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.starts_with(&format!("not live: {} on web (NOT_REACHED)", &c[..12])),
        "{out}"
    );
}

/// A clone kept with `--data-dir` is fetched before `--commit` is read: `HEAD~1` is the
/// branch's as it is now, never the kept clone's own checkout.
#[test]
fn a_kept_clone_reads_head_as_the_branch_is_now() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_str().unwrap();
    let first = repo.set_image("web", GOOD2, "web: 1.1.0");
    let o = wait(
        &repo,
        &sb.url,
        &["--app", "web", "--data-dir", data_dir, "--output", "json"],
    );
    let j = json(&o);
    assert_eq!(
        (o.status.code(), &j["commit"]),
        (Some(0), &Value::from(first.as_str())),
        "{j}"
    );
    let second = repo.set_image("web", GOOD, "web: 1.0.0 again");
    let o = wait(
        &repo,
        &sb.url,
        &[
            "--app",
            "web",
            "--data-dir",
            data_dir,
            "--commit",
            "HEAD~1",
            "--output",
            "json",
        ],
    );
    let j = json(&o);
    assert_eq!(j["commit"], first.as_str(), "HEAD~1 of {second}: {j}");
    assert_eq!(o.status.code(), Some(0), "{j}");
}

/// Argo CD that cannot be reached: nothing was observed, exit 3 — never a 0, never a FAIL.
#[test]
fn argo_cd_down_is_unobserved() {
    let repo = Repo::new();
    repo.set_image("web", GOOD2, "web: 1.1.0");
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let o = wait(
        &repo,
        &closed,
        &["--app", "web", "--timeout", "3s", "--output", "json"],
    );
    let j = json(&o);
    assert_eq!(o.status.code(), Some(3), "{j}");
    assert_eq!(j["outcome"], "unobserved");
    assert_ne!(j["state"], "CONFIRMED");
    assert_ne!(j["state"], "FAIL");
}

/// A commit that is not on the branch, and an app name that cannot be, are usage errors
/// (exit 2) that name what was wrong, before any wait.
#[test]
fn a_commit_not_on_the_branch_is_refused_at_once() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let tip = repo.remote_tip();
    // A commit pushed to another branch only.
    repo.git(&["checkout", "-q", "-b", "side"]);
    repo.write("apps/web/extra.yaml", "# side\n");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "side"]);
    let side = repo.git(&["rev-parse", "HEAD"]);
    repo.git(&["push", "-q", "origin", "side"]);
    let o = wait(&repo, &sb.url, &["--app", "web", "--commit", &side]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains(&format!("{} is not on main", &side[..12]))
            && err.contains(&format!("its tip is {}", &tip[..12])),
        "{err}"
    );
    let o = wait(&repo, &sb.url, &["--app", "web", "--commit", "no-such-rev"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--commit \"no-such-rev\" is not a commit of"),
        "{err}"
    );
    let o = wait(&repo, &sb.url, &["--app", "a/b/c"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--app \"a/b/c\""), "{err}");
}

// `--source kube`: the sandbox stands in for Argo CD, its Applications written to the kit's real
// kube-apiserver as Argo CD's controller writes them (`KubeApiserver::mirror_sandbox`); the wait
// reads them from there, with no `--argocd-url`.

/// `greenlight wait --source kube` over `repo` with the kit's test timings and `kubeconfig`
/// (whose context's namespace is `argocd`, where the mirror writes), then `extra`.
fn wait_kube(repo: &Repo, kubeconfig: &std::path::Path, extra: &[&str]) -> Output {
    let mut args: Vec<String> = [
        "wait",
        "--repo",
        &repo.repo(),
        "--source",
        "kube",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ]
    .map(String::from)
    .into();
    args.extend(JUDGE_TIMINGS.iter().chain(extra).map(|s| s.to_string()));
    std::process::Command::new(BIN)
        .args(args)
        .env_remove("GREENLIGHT_GIT_TOKEN")
        .output()
        .expect("run greenlight wait")
}

/// Reached, healthy and stable, read from the Kubernetes API: live (exit 0), the app named
/// with the namespace it was found in (the kubeconfig context's).
#[test]
fn kube_source_a_deployed_commit_is_live() {
    let kube = greenlight_testkit::KubeApiserver::start();
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let _mirror = kube.mirror_sandbox(&sb.url);
    let c = repo.set_image("web", GOOD2, "web: 1.1.0");
    let o = wait_kube(
        &repo,
        kube.kubeconfig(),
        &["--app", "web", "--timeout", "60s", "--output", "json"],
    );
    let j = json(&o);
    assert_eq!(o.status.code(), Some(0), "{j}\n{}", text(&o).1);
    assert_eq!(j["outcome"], "live", "{j}");
    assert_eq!(j["state"], "CONFIRMED", "{j}");
    assert_eq!(j["commit"], c.as_str());
    assert_eq!(j["app"], "argocd/web");
    // Without --argocd-url, Argo CD 3.5's Application carries no per-resource health: the
    // verdict says it was judged on the app-level health, as `watch --source kube`'s does.
    assert!(
        j["reason"]
            .as_str()
            .unwrap_or("")
            .contains("judged on the app-level health alone"),
        "{j}"
    );
    // The same with the namespace given by --namespace, as text.
    let o = wait_kube(
        &repo,
        kube.kubeconfig(),
        &["--app", "web", "--namespace", "argocd", "--timeout", "60s"],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.starts_with(&format!("live: {} on argocd/web: confirmed", &c[..12])),
        "{out}"
    );
}

/// An app that never syncs the commit, read from the Kubernetes API: NOT_REACHED at the
/// timeout (exit 1). A token file that cannot be read, two namespaces for the app, and
/// `--namespace` without `--source kube` are usage errors (exit 2).
#[test]
fn kube_source_a_commit_the_app_never_syncs_is_not_reached() {
    let kube = greenlight_testkit::KubeApiserver::start();
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &["--manual-sync", "web"]);
    sb.wait_app("web", T, |a| a["status"]["sync"]["revision"].is_string());
    let _mirror = kube.mirror_sandbox(&sb.url);
    let c = repo.set_image("web", GOOD2, "web: 1.1.0");
    let o = wait_kube(
        &repo,
        kube.kubeconfig(),
        &["--app", "argocd/web", "--timeout", "4s"],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.starts_with(&format!(
            "not live: {} on argocd/web (NOT_REACHED)",
            &c[..12]
        )),
        "{out}"
    );
    let o = wait_kube(
        &repo,
        kube.kubeconfig(),
        &[
            "--app",
            "web",
            "--namespace",
            "other",
            "--argocd-url",
            "http://127.0.0.1:1",
            "--argocd-token-file",
            "/nonexistent",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    let o = wait_kube(
        &repo,
        kube.kubeconfig(),
        &["--app", "argocd/web", "--namespace", "other"],
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("give one of them"), "{err}");
    let o = wait(&repo, &sb.url, &["--app", "web", "--namespace", "argocd"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--namespace: only read with --source kube"),
        "{err}"
    );
}

#[test]
fn expect_running_is_live_only_when_every_pod_runs_the_pinned_digest_() {
    crate::common::on_argocd(
        "3.5",
        expect_running_is_live_only_when_every_pod_runs_the_pinned_digest,
    );
}

on_every_argocd_version!(
    a_chronic_condition_from_before_the_sync_is_left_out_and_named,
    a_chronic_condition_is_left_out_when_the_wait_starts_after_the_compare,
    a_deployed_commit_is_live_once_healthy_for_the_window,
    a_commit_fixed_forward_is_live_and_the_fix_is_named,
    a_commit_reverted_by_a_human_is_not_live,
    a_broken_commit_is_not_live_and_nothing_is_reverted,
    a_commit_the_app_never_syncs_is_not_reached,
);
