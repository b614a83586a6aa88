//! Re-opened watches, end to end (`docs/verdicts.md#reopen`): `greenlight sandbox` and
//! `greenlight watch` over real git. A `NOT_REACHED` is no longer final: a commit Argo CD
//! deploys after the reach deadline (a sync window, a manual sync) or that lands again after a
//! force-push withdrew it is judged as new. Waits are on recorded states, never fixed sleeps;
//! every test runs against the sandbox as Argo CD 3.5 and 2.14.

#[macro_use]
mod common;
use common::*;
use greenlight_testkit::watch::Watchdog;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

/// Every watch of `commit` in `wd`'s state file, oldest first.
fn watches_of(wd: &Watchdog, commit: &str) -> Vec<serde_json::Value> {
    wd.status()["watches"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["commit"] == commit)
        .cloned()
        .collect()
}

/// Waits until `commit` has a second watch in state `want`; returns both.
fn reopened(wd: &Watchdog, commit: &str, want: &str) -> (serde_json::Value, serde_json::Value) {
    let end = Instant::now() + T;
    loop {
        let ws = watches_of(wd, commit);
        if let [first, second] = ws.as_slice()
            && second["state"] == want
        {
            return (first.clone(), second.clone());
        }
        assert!(ws.len() <= 2, "{ws:?}");
        assert!(Instant::now() < end, "{ws:?}\n{}", wd.proc.output());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Syncs are held (a sync window) past the reach deadline of an armed commit that breaks web's
/// image: NOT_REACHED. Before, that was final and the broken image deployed with no word when
/// the window opened; now the watch re-opens when Argo CD deploys the commit, and the broken
/// commit is reverted — on the same evidence as any other (a clean before, nothing else in the
/// batch).
fn a_commit_synced_after_its_reach_deadline_is_judged_and_reverted() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    sb.control("/sandbox/v1/pause");
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: 2.0.0\n\n{}", trailer("web", "4", "arm")),
    );
    let w = wd.wait_state(&bad, "NOT_REACHED", T);
    assert!(
        w["reason"].as_str().unwrap().starts_with("not reached"),
        "{w}"
    );
    sb.control("/sandbox/v1/resume");
    let (first, second) = reopened(&wd, &bad, "REVERTED");
    assert_eq!(
        first["state"], "NOT_REACHED",
        "the first verdict stays on record"
    );
    assert_eq!(second["id"], format!("{}~1", first["id"].as_str().unwrap()));
    assert_eq!(count_reverts_of(&repo, &bad), 1);
    let file = repo.bare_git(&["show", "main:apps/web/deploy.yaml"]);
    assert!(file.contains(GOOD), "{file}");
}

/// An armed commit reaches web, then main is force-pushed back past it (NOT_REACHED,
/// withdrawn), then the same commit lands again. Before, it was never judged again; now a
/// second watch judges it (here: healthy, CONFIRMED).
fn a_commit_that_lands_again_after_a_force_push_is_judged_again() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let old = repo.remote_tip();
    let state = repo.path("state/greenlight.db");
    // A window long enough that the withdrawal comes first.
    let wd = Watchdog::start_timed(
        BIN,
        &repo.repo(),
        &sb.url,
        &state,
        &[("--stable-for", "20s")],
    );
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "60", "arm")),
    );
    wd.wait_state(&c, "JUDGING", T);
    repo.git(&["reset", "-q", "--hard", &old]);
    repo.git(&["push", "-q", "--force", "origin", "main"]);
    let w = wd.wait_state(&c, "NOT_REACHED", T);
    assert!(
        w["reason"].as_str().unwrap().starts_with("withdrawn"),
        "{w}"
    );
    repo.git(&["push", "-q", "origin", &format!("{c}:main")]);
    let (_, second) = reopened(&wd, &c, "CONFIRMED");
    assert!(second["reached_at"].is_string(), "{second}");
    assert_eq!(repo.remote_tip(), c, "nothing reverted");
}

/// A human reverts the commit while it is not deployed: its NOT_REACHED never re-opens, even
/// when a revision that contains the commit (and its revert) is deployed.
fn a_reverted_commit_never_reopens() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    sb.control("/sandbox/v1/pause");
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: 2.0.0\n\n{}", trailer("web", "4", "arm")),
    );
    wd.wait_state(&bad, "NOT_REACHED", T);
    repo.git(&["revert", "--no-edit", &bad]);
    repo.push();
    // Then a change Argo CD syncs, watched itself (shadow): its CONFIRMED shows the watchdog
    // observed web deployed by a sync at a revision that has the reverted commit. (The revert
    // alone changes nothing Argo CD compares: the commit was never deployed.)
    repo.write("apps/web/config.yaml", &config_map("1"));
    let later = repo.commit_push(&format!(
        "web: config\n\n{}",
        trailer("web", "30", "shadow")
    ));
    sb.control("/sandbox/v1/resume");
    wd.wait_state(&later, "CONFIRMED", T);
    assert_eq!(watches_of(&wd, &bad).len(), 1, "{}", wd.proc.output());
}

/// An armed commit that only adds a (failing) PostSync hook: Argo CD does not compare hooks, so
/// it calls the revision Synced without running a sync. Before, the commit was CONFIRMED on
/// that; now it is NOT_REACHED ("no sync operation ran with it"), and the next commit's sync,
/// which runs the broken hook, re-opens it — judged with that commit as a later change to the
/// app, so nothing is reverted on a guess.
fn a_hook_only_commit_is_not_confirmed_before_a_sync_runs_its_hook() {
    let repo = Repo::new();
    let sb = sandbox(
        &repo,
        &["web=apps/web"],
        &["--retry-backoff", "200ms", "--hook-time", "200ms"],
    );
    settled(&sb, &repo, &["web"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    repo.write("apps/web/smoke.yaml", &failing_smoke_test());
    let c1 = repo.commit_push(&format!(
        "web: a smoke test\n\n{}",
        trailer("web", "4", "arm")
    ));
    let w = wd.wait_state(&c1, "NOT_REACHED", T);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.contains("as Synced, but no sync operation ran with it"),
        "{reason}"
    );
    repo.write("apps/web/config.yaml", &config_map("1"));
    let c2 = repo.commit_push("web: config");
    let (_, second) = reopened(&wd, &c1, "FAIL");
    let reason = second["reason"].as_str().unwrap();
    assert!(reason.contains(&c2[..8]), "{reason}");
    assert!(second["revert_commit"].is_null(), "{second}");
    assert_eq!(repo.remote_tip(), c2, "nothing pushed");
}

on_every_argocd_version!(
    a_commit_synced_after_its_reach_deadline_is_judged_and_reverted,
    a_commit_that_lands_again_after_a_force_push_is_judged_again,
    a_reverted_commit_never_reopens,
    a_hook_only_commit_is_not_confirmed_before_a_sync_runs_its_hook,
);
