//! End to end: `greenlight sandbox`, `greenlight watch` and `greenlight status` as a user runs
//! them, over real git repositories. Each test waits on the `watching …` line and on recorded
//! states, never on fixed sleeps. Every test runs twice: against the sandbox standing in for
//! Argo CD 3.5 (per-resource health in the resource tree) and for 2.14 (health inline).

#[macro_use]
mod common;
use common::*;
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

fn canary_commit_is_reverted_and_the_app_recovers() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let good = repo.remote_tip();
    sb.wait_app("web", T, |a| healthy_at(a, &good));
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: 2.0.0\n\n{}", trailer("web", "4", "arm")),
    );
    let w = wd.wait_state(&bad, "REVERTED", T);
    let revert = w["revert_commit"].as_str().unwrap().to_string();
    assert_eq!(repo.remote_tip(), revert);
    assert_eq!(repo.bare_git(&["rev-parse", "main^"]), bad);
    let msg = repo.bare_git(&["log", "-1", "--format=%B", "main"]);
    assert!(msg.starts_with("Revert \"web: 2.0.0\""), "{msg}");
    assert!(
        msg.contains(&format!("This reverts commit {bad}.")),
        "{msg}"
    );
    assert!(
        !msg.contains("Nav-Watchdog"),
        "the revert must not carry the trailer: {msg}"
    );
    assert_eq!(
        repo.bare_git(&["log", "-1", "--format=%an <%ae>", "main"]),
        "greenlight-bot <bot@greenlight.test>"
    );
    assert!(w["reached_at"].is_string() && w["finished_at"].is_string());
    sb.wait_app("web", T, |a| healthy_at(a, &revert));
    let out = wd.proc.output();
    for needle in [
        "watch started",
        "reached app web",
        "not healthy within",
        "pushed",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
    }
}

fn a_good_commit_is_confirmed() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "30", "arm")),
    );
    let w = wd.wait_state(&c, "CONFIRMED", T);
    assert!(w["healthy_since"].is_string());
    assert_eq!(repo.remote_tip(), c, "nothing pushed");
    let st = wd.status();
    assert_eq!(st["breaker"]["consecutive_reverts"], 0);
}

/// Shadow's words ("shadow mode: judged only, not reverted", notified as "would have reverted
/// (shadow)") need the evidence an armed revert would: the app settled before the commit.
fn shadow_fails_without_pushing() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: bad\n\n{}", trailer("web", "3", "shadow")),
    );
    let w = wd.wait_state(&bad, "FAIL", T);
    assert_eq!(w["mode"], "shadow");
    assert!(
        w["reason"].as_str().unwrap().contains("shadow"),
        "{}",
        w["reason"]
    );
    assert_eq!(repo.remote_tip(), bad);
    assert!(w["revert_commit"].is_null());
}

/// Dry-run's words ("would have reverted; nothing pushed") need the evidence an armed revert
/// would: the app settled before the commit.
fn dry_run_never_pushes_even_armed() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let wd = watchdog(&repo, &sb.url, &[], &[("DRY_RUN", "true")]);
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: bad\n\n{}", trailer("web", "3", "arm")),
    );
    let w = wd.wait_state(&bad, "FAIL", T);
    assert_eq!(w["dry_run"], true);
    assert!(
        w["reason"]
            .as_str()
            .unwrap()
            .contains("dry-run: would have reverted; nothing pushed"),
        "{}",
        w["reason"]
    );
    assert_eq!(repo.remote_tip(), bad);
    assert_eq!(wd.status()["breaker"]["consecutive_reverts"], 0);
}

fn a_helm_chart_app_is_unwatchable_at_once() {
    let repo = Repo::new();
    let sb = sandbox(
        &repo,
        &[
            "web=apps/web",
            "monitoring=helm:kube-prometheus-stack@65.5.0",
        ],
        &[],
    );
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("values\n\n{}", trailer("monitoring", "900", "arm")),
    );
    let started = std::time::Instant::now();
    let w = wd.wait_state(&c, "ERROR_UNWATCHABLE", Duration::from_secs(30));
    assert!(started.elapsed() < Duration::from_secs(30));
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.contains("65.5.0") || reason.contains("chart"),
        "{reason}"
    );
}

fn a_never_synced_app_is_waited_for_then_reached() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &["--start-paused"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web\n\n{}", trailer("web", "60", "shadow")),
    );
    wd.wait_state(&c, "WAITING_REACH", T);
    // The watchdog has seen the empty revision: it keeps waiting, no error.
    wd.proc.wait_line("watch started", T);
    // Never synced: no revision (Argo CD omits the empty field).
    let rev = &sb.app("web")["status"]["sync"]["revision"];
    assert!(rev.is_null() || rev == "", "{rev}");
    assert_eq!(
        watch_of(&wd.status(), &c).unwrap()["state"],
        "WAITING_REACH"
    );
    sb.control("/sandbox/v1/resume");
    let w = wd.wait_state(&c, "CONFIRMED", T);
    assert!(w["reached_at"].is_string());
}

fn the_breaker_opens_after_two_reverts() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web", "other=apps/other"], &[]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    for (i, app) in ["web", "other"].into_iter().enumerate() {
        repo.pull();
        settled(&sb, &repo, &[app]);
        let bad = repo.set_image(
            app,
            BAD,
            &format!("{app}: bad {i}\n\n{}", trailer(app, "3", "arm")),
        );
        wd.wait_state(&bad, "REVERTED", T);
    }
    let st = wd.status();
    assert_eq!(st["breaker"]["open"], true, "{st}");
    assert_eq!(st["breaker"]["consecutive_reverts"], 2);
    repo.pull();
    let third = repo.set_image(
        "web",
        BAD,
        &format!("web: bad again\n\n{}", trailer("web", "3", "arm")),
    );
    let w = wd.wait_state(&third, "FAIL", T);
    assert!(
        w["reason"].as_str().unwrap().contains("breaker"),
        "{}",
        w["reason"]
    );
    assert_eq!(repo.remote_tip(), third, "no third revert");
    wd.proc.wait_line("breaker opened", T);

    // A human closes it (the daemon applies the request).
    let out = std::process::Command::new(BIN)
        .args(["breaker", "reset", "--state", wd.state.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    wd.proc.wait_line("breaker reset by a human", T);
    assert_eq!(wd.status()["breaker"]["open"], false);
}

/// One commit armed for two apps that fails on both is one revert commit: the second watch
/// adopts the first one's revert, and the breaker counts it once.
fn one_commit_failing_on_two_apps_counts_once_for_the_breaker() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web", "other=apps/other"], &[]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    settled(&sb, &repo, &["web", "other"]);
    repo.write("apps/web/deploy.yaml", &deployment("web", BAD));
    repo.write("apps/other/deploy.yaml", &deployment("other", BAD));
    let bad = repo.commit_push(&format!(
        "web, other: bad\n\n{}\n{}",
        trailer("web", "3", "arm"),
        trailer("other", "3", "arm")
    ));
    let web = wd.wait_state_of(&bad, "web", "REVERTED", T);
    let other = wd.wait_state_of(&bad, "other", "REVERTED", T);
    assert_eq!(
        web["revert_commit"], other["revert_commit"],
        "one revert commit"
    );
    assert_eq!(count_reverts_of(&repo, &bad), 1);
    let st = wd.status();
    assert_eq!(st["breaker"]["consecutive_reverts"], 1, "{st}");
    assert_eq!(st["breaker"]["open"], false, "{st}");
}

/// A Deployment that no commit under test touches, held Progressing (a stuck rollout).
fn stuck() -> String {
    deployment("stuck", GOOD).replace(
        "  namespace: apps\n",
        "  namespace: apps\n  annotations:\n    sandbox.greenlight.dev/health: Progressing\n",
    )
}

/// App `web` is held Progressing by a resource no commit touches: armed ConfigMap commits that
/// never see it healthy are not shown to be at fault. FAIL without revert, and the breaker
/// does not count them.
fn a_chronically_unhealthy_app_gets_no_commit_reverted() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    repo.write("apps/web/stuck.yaml", &stuck());
    let held = repo.commit_push("web: a rollout that never finishes");
    sb.wait_app("web", T, |a| {
        a["status"]["sync"]["revision"] == held.as_str()
            && a["status"]["health"]["status"] == "Progressing"
    });
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    for n in 1..=3 {
        repo.write("apps/web/config.yaml", &config_map(&n.to_string()));
        let c = repo.commit_push(&format!(
            "web: config {n}\n\n{}",
            trailer("web", "3", "arm")
        ));
        let w = wd.wait_state(&c, "FAIL", T);
        let reason = w["reason"].as_str().unwrap();
        assert!(
            reason.contains("already unhealthy before this commit (Progressing"),
            "{reason}"
        );
        assert!(w["revert_commit"].is_null());
    }
    assert_eq!(
        repo.remote_tip(),
        repo.git(&["rev-parse", "HEAD"]),
        "nothing pushed"
    );
    let st = wd.status();
    assert_eq!(st["breaker"]["consecutive_reverts"], 0, "{st}");
    assert_eq!(st["breaker"]["open"], false, "{st}");
}

/// main is force-pushed back past an armed commit that reached its app: Argo CD deploys the old
/// revision, the commit is no longer in effect. NOT_REACHED ("withdrawn"), never CONFIRMED,
/// never reverted. The commit adds an object, so the old revision is deployed only by an app
/// with automated prune (without it, Argo CD starts no sync when only pruning is needed).
fn a_commit_withdrawn_by_a_force_push_is_not_reached() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &["--prune", "web"]);
    settled(&sb, &repo, &["web"]);
    let good = repo.remote_tip();
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    // A commit whose rollout does not finish within the test: it stays JUDGING.
    repo.write("apps/web/stuck.yaml", &stuck());
    let c = repo.commit_push(&format!("web: slow\n\n{}", trailer("web", "120", "arm")));
    wd.wait_state(&c, "JUDGING", T);
    repo.git(&["reset", "-q", "--hard", &good]);
    repo.git(&["push", "-q", "--force", "origin", "main"]);
    let w = wd.wait_state(&c, "NOT_REACHED", T);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!("withdrawn: revision {good} does not contain it")),
        "{reason}"
    );
    assert_eq!(repo.remote_tip(), good, "nothing pushed");
    assert_eq!(count_reverts_of(&repo, &c), 0);
}

/// C (arm) is healthy past its deadline, inside its stability window; D, a good change to the
/// same app, is pushed and Argo CD syncs it before greenlight's next fetch. The revision Argo
/// CD reports is fetched and D attributed before the app's state is judged: C ends FAIL by
/// attribution, never reverted (the streak is not broken by D's rollout).
fn a_later_commit_argo_cd_synced_first_is_attributed_not_blamed_on_the_watched_one() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let good = repo.remote_tip();
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "10", "arm")),
    );
    // Only the first fetch (at start) sees C; D is seen only as Argo CD reports it.
    let state = repo.path("state/greenlight.db");
    let mut args = watch_args(&repo, &sb.url, &state, &["--since", &good]);
    for (flag, value) in [
        ("--fetch-interval", "600s"),
        ("--stable-for", "120s"),
        ("--stale-after", "60s"),
    ] {
        let i = args.iter().position(|a| a == flag).unwrap();
        args[i + 1] = value.into();
    }
    let proc = Proc::spawn(BIN, &args, &[]);
    proc.wait_line("deadline passed during a healthy streak", T);
    let d = repo.set_image("web", "registry.local/web:1.2.0", "web: 1.2.0");
    let w = wait_state(&state, &c, "FAIL", T, &proc);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!("attribution: later commit(s) {}", &d[..7])),
        "{reason}"
    );
    assert!(w["revert_commit"].is_null(), "{w}");
    assert_eq!(repo.remote_tip(), d, "nothing pushed");
    assert_eq!(count_reverts_of(&repo, &c), 0);
}

fn a_kill_9_mid_watch_resumes_from_recorded_times() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let mut wd = watchdog(&repo, &sb.url, &[], &[]);
    settled(&sb, &repo, &["web"]);
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: bad\n\n{}", trailer("web", "5", "arm")),
    );
    let before = wd.wait_state(&bad, "JUDGING", T);
    wd.proc.kill9();
    let wd2 = watchdog_with_state(&repo, &sb.url, &wd.state, &[], &[]);
    wd2.proc.wait_line("resumed after a restart", T);
    let after = wd2.wait_state(&bad, "REVERTED", T);
    assert_eq!(before["watch_started_at"], after["watch_started_at"]);
    assert_eq!(
        before["reached_at"], after["reached_at"],
        "deadline measured from the recorded reach"
    );
    assert_eq!(count_reverts_of(&repo, &bad), 1);
}

fn a_second_daemon_on_the_same_state_is_refused() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let args = watch_args(&repo, &sb.url, &wd.state, &[]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = std::process::Command::new(BIN)
        .args(&argv)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already runs"));
}

fn a_merge_commit_is_reverted_against_its_first_parent() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    settled(&sb, &repo, &["web"]);
    repo.git(&["checkout", "-q", "-b", "feature"]);
    repo.write("apps/web/deploy.yaml", &deployment("web", BAD));
    repo.git(&["commit", "-q", "-am", "web: try 2.0.0"]);
    repo.git(&["checkout", "-q", "main"]);
    let msg = format!("Merge branch 'feature'\n\n{}", trailer("web", "3", "arm"));
    repo.git(&["merge", "-q", "--no-ff", "feature", "-m", &msg]);
    repo.git(&["push", "-q", "origin", "main"]);
    let merge = repo.git(&["rev-parse", "HEAD"]);
    let w = wd.wait_state(&merge, "REVERTED", T);
    let revert = w["revert_commit"].as_str().unwrap();
    assert_eq!(repo.bare_git(&["rev-parse", &format!("{revert}^")]), merge);
    let file = repo.bare_git(&["show", "main:apps/web/deploy.yaml"]);
    assert!(file.contains(GOOD), "{file}");
}

fn an_outage_through_the_deadline_is_inconclusive() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: bad\n\n{}", trailer("web", "6", "arm")),
    );
    wd.wait_state(&bad, "JUDGING", T);
    sb.control("/sandbox/v1/outage?seconds=30");
    let w = wd.wait_state(&bad, "INCONCLUSIVE", T);
    assert!(
        w["reason"].as_str().unwrap().contains("last observed"),
        "{}",
        w["reason"]
    );
    assert_eq!(repo.remote_tip(), bad, "never a revert");
}

fn a_later_commit_to_the_same_app_fails_without_revert() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &["--start-paused"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: bad\n\n{}", trailer("web", "30", "arm")),
    );
    wd.wait_state(&bad, "WAITING_REACH", T);
    // Someone else changes the same app before a verdict; another app's change is no concern.
    let unrelated = repo.set_image("other", GOOD2, "other: bump");
    let later = repo.set_image("web", GOOD2, "web: a fix on top");
    let w = wd.wait_state(&bad, "FAIL", T);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.contains("attribution") && reason.contains(&later[..8]),
        "{reason}"
    );
    assert!(!reason.contains(&unrelated[..8]), "{reason}");
    assert_eq!(repo.remote_tip(), later);
}

/// A feature branch forked after the watched commit was on main contains it, but its merge
/// brings only the feature's changes — here the merge itself changes the app (a conflict
/// resolved, a fix made while merging) though the feature's own commit does not: a later
/// change, so the watch cannot blame its commit alone. Before, the merge was taken for one
/// bringing the watched commit, and the watch went on as if nothing else had changed.
fn a_feature_merged_after_the_watched_commit_is_a_later_change_not_its_own() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &["--start-paused"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: bad\n\n{}", trailer("web", "30", "arm")),
    );
    wd.wait_state(&bad, "WAITING_REACH", T);
    repo.git(&["checkout", "-q", "-b", "feature"]);
    repo.write("apps/other/deploy.yaml", &deployment("other", GOOD2));
    repo.git(&["commit", "-q", "-am", "other: bump"]);
    repo.git(&["checkout", "-q", "main"]);
    repo.git(&["merge", "-q", "--no-ff", "--no-commit", "feature"]);
    repo.write("apps/web/config.yaml", &config_map("set while merging"));
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "Merge branch 'feature'"]);
    repo.git(&["push", "-q", "origin", "main"]);
    let merge = repo.git(&["rev-parse", "HEAD"]);
    let w = wd.wait_state(&bad, "FAIL", T);
    let reason = w["reason"].as_str().unwrap();
    assert!(reason.contains("attribution"), "{reason}");
    assert_eq!(repo.remote_tip(), merge, "nothing reverted");
}

fn a_humans_revert_is_adopted_not_duplicated() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: bad\n\n{}", trailer("web", "60", "arm")),
    );
    wd.wait_state(&bad, "JUDGING", T);
    repo.git(&["revert", "--no-edit", &bad]);
    repo.git(&["push", "-q", "origin", "main"]);
    let human = repo.git(&["rev-parse", "HEAD"]);
    let w = wd.wait_state(&bad, "REVERTED", T);
    assert_eq!(w["revert_commit"], human.as_str());
    assert_eq!(count_reverts_of(&repo, &bad), 1);
    assert_eq!(repo.remote_tip(), human);
}

fn once_fails_on_a_bad_argocd_url_and_passes_on_a_good_one() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let state = repo.path("once/state.db");
    let run = |url: &str| {
        let mut args = watch_args(&repo, url, &state, &["--once"]);
        args.push("--log-format".into());
        args.push("json".into());
        std::process::Command::new(BIN)
            .args(&args)
            .output()
            .unwrap()
    };
    let bad = run("http://127.0.0.1:1");
    assert_ne!(
        bad.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let good = run(&sb.url);
    assert_eq!(
        good.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    assert!(String::from_utf8_lossy(&good.stderr).contains("self-check passed"));
    assert!(!state.exists(), "--once writes no state");
}

/// A promotion commit changes the live manifest and removes the candidate and its lock; it
/// names the candidates' directory in `Greenlight-Revert-Keeps`. When the promoted image fails
/// live, the revert undoes the live manifest only: the candidate and the lock stay gone.
fn a_promotion_revert_leaves_the_candidates_directory_as_it_is() {
    let repo = Repo::new();
    repo.write("apps/candidates/README.md", "promotion candidates\n")
        .write(
            "apps/candidates/web-candidate.yaml",
            &deployment("web-candidate", GOOD),
        )
        .write("apps/candidates/web-candidate.lock", "holder: a run\n")
        .commit_push("candidate");
    let sb = sandbox(
        &repo,
        &["web=apps/web", "cands=apps/candidates"],
        &["--prune", "cands", "--allow-empty", "cands"],
    );
    settled(&sb, &repo, &["web", "cands"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    repo.write("apps/web/deploy.yaml", &deployment("web", BAD));
    repo.git(&[
        "rm",
        "-q",
        "apps/candidates/web-candidate.yaml",
        "apps/candidates/web-candidate.lock",
    ]);
    let msg = format!(
        "promote web: 2.0.0 (gate passed)\n\nGreenlight-Gate: passed: 1 check(s)\nGreenlight-Revert-Keeps: apps/candidates\n{}",
        trailer("web", "3", "arm")
    );
    repo.git(&["commit", "-q", "-am", &msg]);
    repo.git(&["push", "-q", "origin", "main"]);
    let promo = repo.git(&["rev-parse", "HEAD"]);
    let w = wd.wait_state(&promo, "REVERTED", T);
    let revert = w["revert_commit"].as_str().unwrap();
    assert_eq!(repo.remote_tip(), revert);
    assert_eq!(
        repo.bare_git(&["diff", "--name-only", &format!("{revert}^"), revert]),
        "apps/web/deploy.yaml"
    );
    let file = repo.bare_git(&["show", "main:apps/web/deploy.yaml"]);
    assert!(file.contains(GOOD), "{file}");
    assert_eq!(
        repo.bare_git(&["ls-tree", "-r", "--name-only", "main", "apps/candidates"]),
        "apps/candidates/README.md"
    );
    let msg = repo.bare_git(&["log", "-1", "--format=%B", "main"]);
    assert!(
        msg.contains("Left as they are on main: apps/candidates"),
        "{msg}"
    );
}

on_every_argocd_version!(
    a_promotion_revert_leaves_the_candidates_directory_as_it_is,
    canary_commit_is_reverted_and_the_app_recovers,
    a_good_commit_is_confirmed,
    shadow_fails_without_pushing,
    dry_run_never_pushes_even_armed,
    a_helm_chart_app_is_unwatchable_at_once,
    a_never_synced_app_is_waited_for_then_reached,
    the_breaker_opens_after_two_reverts,
    one_commit_failing_on_two_apps_counts_once_for_the_breaker,
    a_chronically_unhealthy_app_gets_no_commit_reverted,
    a_commit_withdrawn_by_a_force_push_is_not_reached,
    a_later_commit_argo_cd_synced_first_is_attributed_not_blamed_on_the_watched_one,
    a_kill_9_mid_watch_resumes_from_recorded_times,
    a_second_daemon_on_the_same_state_is_refused,
    a_merge_commit_is_reverted_against_its_first_parent,
    an_outage_through_the_deadline_is_inconclusive,
    a_later_commit_to_the_same_app_fails_without_revert,
    a_feature_merged_after_the_watched_commit_is_a_later_change_not_its_own,
    a_humans_revert_is_adopted_not_duplicated,
    once_fails_on_a_bad_argocd_url_and_passes_on_a_good_one,
);
