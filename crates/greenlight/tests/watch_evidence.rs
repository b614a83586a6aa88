//! A revert needs evidence (`docs/verdicts.md#evidence`), end to end: `greenlight sandbox` and
//! `greenlight watch` over real git, in the everyday situations of a busy Argo CD where "the
//! watched commit reached the app, then the app failed" is not enough to blame the commit (and
//! "the app is not clean" not enough to spare it). Each test reverted an innocent commit, or
//! failed a good one or kept a broken one, before the evidence standard. Waits are on recorded states,
//! never fixed sleeps; every test runs against the sandbox as Argo CD 3.5 and 2.14.

#[macro_use]
mod common;
use common::*;
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

/// A watchdog over `repo` from `since`, the kit's timings with `flags` set to other values;
/// returns it and its state file.
fn watchdog_timed(
    repo: &Repo,
    url: &str,
    since: &str,
    flags: &[(&str, &str)],
) -> (Proc, std::path::PathBuf) {
    let state = repo.path("state/greenlight.db");
    let mut args = watch_args(repo, url, &state, &["--since", since]);
    for (flag, value) in flags {
        match args.iter().position(|a| a == flag) {
            Some(i) => args[i + 1] = value.to_string(),
            None => args.extend([flag.to_string(), value.to_string()]),
        }
    }
    (Proc::spawn(BIN, &args, &[]), state)
}

/// A watchdog over `repo` whose own fetches (and listings) are rare (600 s): it learns of a
/// commit only when it starts, or when Argo CD reports it; the stream's heartbeats keep it
/// observing (`--stale-after` 60 s).
fn slow_fetch_watchdog(repo: &Repo, url: &str, since: &str) -> (Proc, std::path::PathBuf) {
    let flags = [
        ("--fetch-interval", "600s"),
        ("--stable-for", "120s"),
        ("--stale-after", "60s"),
    ];
    watchdog_timed(repo, url, since, &flags)
}

/// Waits until the watch of `commit` is FAIL with no revert pending any more (a FAIL whose
/// revert is under way reads `…; reverting`).
fn settled_fail(state: &std::path::Path, commit: &str, proc: &Proc) -> serde_json::Value {
    let end = std::time::Instant::now() + T;
    loop {
        let w = wait_state(state, commit, "FAIL", T, proc);
        if !w["reason"]
            .as_str()
            .unwrap_or_default()
            .ends_with("reverting")
        {
            return w;
        }
        assert!(
            std::time::Instant::now() < end,
            "still reverting after {T:?}: {w}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Argo CD polls git every three minutes, so one sync often deploys several commits: here C1
/// (no trailer, it breaks web's image) and C2 (armed, it only adds a ConfigMap to web). Before
/// the evidence standard C2 was reverted and C1 escaped; now nothing is reverted and C2's reason
/// names both commits as suspects.
fn one_sync_deploying_two_commits_to_the_app_reverts_neither() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    sb.control("/sandbox/v1/pause");
    let c1 = repo.set_image("web", BAD, "web: 2.0.0");
    repo.write("apps/web/config.yaml", &config_map("1"));
    let c2 = repo.commit_push(&format!("web: config\n\n{}", trailer("web", "4", "arm")));
    wd.wait_state(&c2, "WAITING_REACH", T);
    sb.control("/sandbox/v1/resume");
    let w = wd.wait_state(&c2, "FAIL", T);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!(
            "no evidence that this commit broke the app alone: the sync that deployed it also brought commit(s) {} that changed app web's source paths; suspects: {}, {}",
            &c1[..8],
            &c2[..8],
            &c1[..8]
        )),
        "{reason}"
    );
    assert!(w["revert_commit"].is_null(), "{w}");
    assert_eq!(repo.remote_tip(), c2, "nothing pushed");
    assert_eq!(wd.status()["breaker"]["consecutive_reverts"], 0);
}

/// The same batch when C1 changed another app: C2 alone changed web, and its failure is its
/// own — the revert still comes (a busy monorepo keeps its watchdog).
fn one_sync_that_also_deployed_another_apps_commit_still_reverts() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    sb.control("/sandbox/v1/pause");
    repo.set_image("other", GOOD2, "other: 1.1.0");
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: 2.0.0\n\n{}", trailer("web", "4", "arm")),
    );
    wd.wait_state(&bad, "WAITING_REACH", T);
    sb.control("/sandbox/v1/resume");
    let w = wd.wait_state(&bad, "REVERTED", T);
    assert_eq!(repo.remote_tip(), w["revert_commit"].as_str().unwrap());
    assert_eq!(count_reverts_of(&repo, &bad), 1);
}

/// A fix-forward pushed while the broken commit's deadline runs out, before greenlight fetched
/// it and before Argo CD synced it: the revert's fetch just before the push finds it, and
/// nothing is pushed on top of the fix.
fn a_fix_forward_greenlight_had_not_fetched_stops_the_revert() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let good = repo.remote_tip();
    // Held until the watchdog has seen the app idle before the commit (its baseline).
    sb.control("/sandbox/v1/pause");
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: 2.0.0\n\n{}", trailer("web", "6", "arm")),
    );
    let (proc, state) = slow_fetch_watchdog(&repo, &sb.url, &good);
    wait_state(&state, &bad, "WAITING_REACH", T, &proc);
    sb.control("/sandbox/v1/resume");
    wait_state(&state, &bad, "JUDGING", T, &proc);
    // Argo CD does not see the fix yet (syncing held), and greenlight does not fetch it.
    sb.control("/sandbox/v1/pause");
    let fix = repo.set_image("web", GOOD2, "web: back to a good image");
    let w = settled_fail(&state, &bad, &proc);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!(
            "no evidence that this commit broke the app any more: newer commit(s) {} changed app web's source paths after the verdict, before the revert landed",
            &fix[..8]
        )),
        "{reason}"
    );
    assert!(w["revert_commit"].is_null(), "{w}");
    assert_eq!(repo.remote_tip(), fix, "nothing pushed on top of the fix");
    assert_eq!(count_reverts_of(&repo, &bad), 0);
    sb.control("/sandbox/v1/resume");
}

/// A PostSync smoke test that already failed on the previous revision: the next commit's sync
/// runs it again and it fails again the same way. That says nothing against the commit: the
/// rest of the app decides, and a good image bump is confirmed, naming the hook it left out.
/// Before, the innocent commit ended FAIL for the hook.
fn a_post_sync_check_already_failing_is_no_evidence_against_the_next_commit() {
    let repo = Repo::new();
    repo.write("apps/web/smoke.yaml", &failing_smoke_test());
    let broken = repo.commit_push("web: a smoke test (it fails)");
    let sb = sandbox(
        &repo,
        &["web=apps/web"],
        &["--retry-backoff", "200ms", "--hook-time", "200ms"],
    );
    sb.wait_app("web", T, |a| {
        a["status"]["operationState"]["phase"] == "Failed"
            && a["status"]["operationState"]["syncResult"]["revision"] == broken.as_str()
    });
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "60", "arm")),
    );
    let w = wd.wait_state(&c, "CONFIRMED", T);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.contains(
            "left out as in the baseline: PostSync hook batch/Job/smoke (Job has reached the specified backoff limit)"
        ),
        "{reason}"
    );
    assert!(
        wd.proc.output().contains("sync_failed") || wd.proc.output().contains("PostSync"),
        "the hook's failure is still said: {}",
        wd.proc.output()
    );
    assert_eq!(repo.remote_tip(), c, "nothing pushed");
}

/// An app OutOfSync for good — automated prune off, a ConfigMap removed from git still live,
/// `requiresPruning` — with the watchdog following it and Argo CD holding syncs. Returns the
/// watchdog once the armed image bump to `image` is pushed and waits for reach (syncing
/// resumed), and the commit.
fn out_of_sync_for_pruning_then(repo: &Repo, image: &str) -> (Sandbox, Watchdog, String) {
    repo.write("apps/web/config.yaml", &config_map("1"));
    repo.commit_push("web: a config map");
    let sb = sandbox(repo, &["web=apps/web"], &[]);
    settled(&sb, repo, &["web"]);
    repo.git(&["rm", "-q", "apps/web/config.yaml"]);
    let left = repo.commit_push("web: the config map is no longer needed");
    sb.wait_app("web", T, |a| {
        a["status"]["sync"]["status"] == "OutOfSync"
            && a["status"]["sync"]["revision"] == left.as_str()
            && a["status"]["resources"]
                .as_array()
                .is_some_and(|rs| rs.iter().any(|r| r["requiresPruning"] == true))
    });
    let wd = watchdog(repo, &sb.url, &[], &[]);
    sb.control("/sandbox/v1/pause");
    let c = repo.set_image(
        "web",
        image,
        &format!("web: new image\n\n{}", trailer("web", "4", "arm")),
    );
    wd.wait_state(&c, "WAITING_REACH", T);
    sb.control("/sandbox/v1/resume");
    (sb, wd, c)
}

const PRUNING_LEFT_OUT: &str =
    "left out as in the baseline: ConfigMap/apps/web-config=OutOfSync (requires pruning)";

/// The leftover waits for a human to prune it, before and after the commit, and no commit's
/// sync applies it: a good image bump is confirmed. Before, it ended FAIL "OutOfSync".
fn an_app_out_of_sync_only_for_pruning_confirms_a_good_image_bump() {
    let repo = Repo::new();
    let (_sb, wd, c) = out_of_sync_for_pruning_then(&repo, GOOD2);
    let w = wd.wait_state(&c, "CONFIRMED", T);
    let reason = w["reason"].as_str().unwrap();
    assert!(reason.ends_with(PRUNING_LEFT_OUT), "{reason}");
    assert_eq!(repo.remote_tip(), c, "nothing pushed");
}

/// The same app, a broken image: a clean before (OutOfSync only for pruning), only this commit
/// in the batch, and the Deployment Degraded — reverted. Before, "no clean before" kept it.
fn an_app_out_of_sync_only_for_pruning_reverts_a_broken_image_bump() {
    let repo = Repo::new();
    let (_sb, wd, c) = out_of_sync_for_pruning_then(&repo, BAD);
    let w = wd.wait_state(&c, "REVERTED", T);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.contains("Deployment/apps/web=Degraded") && reason.contains(PRUNING_LEFT_OUT),
        "{reason}"
    );
    assert_eq!(repo.remote_tip(), w["revert_commit"].as_str().unwrap());
    assert_eq!(count_reverts_of(&repo, &c), 1);
}

/// A CronJob suspended on purpose beside web's Deployment: Argo CD calls the app `Suspended`.
/// Returns the sandbox and the watchdog once the armed image bump to `image` waits for reach.
fn suspended_cronjob_then(repo: &Repo, image: &str) -> (Sandbox, Watchdog, String) {
    repo.write(
        "apps/web/nightly.yaml",
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: nightly\n  namespace: apps\nspec:\n  suspend: true\n  schedule: '0 3 * * *'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers: [{name: report, image: 'registry.local/report:1'}]\n          restartPolicy: Never\n",
    );
    let tip = repo.commit_push("web: a nightly report, suspended for now");
    let sb = sandbox(repo, &["web=apps/web"], &[]);
    sb.wait_app("web", T, |a| {
        a["status"]["health"]["status"] == "Suspended"
            && a["status"]["sync"]["status"] == "Synced"
            && a["status"]["sync"]["revision"] == tip.as_str()
    });
    let wd = watchdog(repo, &sb.url, &[], &[]);
    sb.control("/sandbox/v1/pause");
    let c = repo.set_image(
        "web",
        image,
        &format!("web: new image\n\n{}", trailer("web", "4", "arm")),
    );
    wd.wait_state(&c, "WAITING_REACH", T);
    sb.control("/sandbox/v1/resume");
    (sb, wd, c)
}

/// The app stays `Suspended` through its CronJob, as before the commit: a good image bump is
/// confirmed. Before, it ended FAIL ("the app is Suspended (someone is holding it …)").
fn a_cronjob_suspended_on_purpose_confirms_a_good_image_bump() {
    let repo = Repo::new();
    let (_sb, wd, c) = suspended_cronjob_then(&repo, GOOD2);
    let w = wd.wait_state(&c, "CONFIRMED", T);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.ends_with("left out as in the baseline: CronJob/apps/nightly=Suspended"),
        "{reason}"
    );
    assert_eq!(repo.remote_tip(), c, "nothing pushed");
}

/// The same app, a broken image: the Deployment Degraded is this commit's doing, and it is
/// reverted. Before, the Suspended baseline ("already unhealthy before this commit") kept it.
fn a_cronjob_suspended_on_purpose_does_not_keep_a_broken_image_bump() {
    let repo = Repo::new();
    let (_sb, wd, c) = suspended_cronjob_then(&repo, BAD);
    let w = wd.wait_state(&c, "REVERTED", T);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.contains("Deployment/apps/web=Degraded")
            && reason.contains("left out as in the baseline: CronJob/apps/nightly=Suspended"),
        "{reason}"
    );
    assert_eq!(repo.remote_tip(), w["revert_commit"].as_str().unwrap());
}

/// web's Deployment and its ConfigMap, automated sync without selfHeal; a human deletes the
/// ConfigMap by hand (`kubectl delete`): Argo CD shows it `Missing` and `OutOfSync`, and calls
/// the app `Healthy` from 3.4 on (a resource that does not exist is left out of its health),
/// `Missing` before. Nothing re-creates it until a sync runs. With the watchdog following the
/// app (its baseline kept, the Missing ConfigMap among its chronic conditions) and Argo CD
/// holding syncs, returns the watchdog once the armed image bump to `image` — which does not
/// touch the ConfigMap — waits for reach (syncing resumed), the commit, and the revision the
/// ConfigMap went missing at.
fn config_map_deleted_by_hand_then(
    repo: &Repo,
    image: &str,
) -> (Sandbox, Watchdog, String, String) {
    repo.write("apps/web/config.yaml", &config_map("1"));
    let tip = repo.commit_push("web: a config map");
    let sb = sandbox(repo, &["web=apps/web"], &["--no-self-heal", "web"]);
    settled(&sb, repo, &["web"]);
    sb.delete_resource("web", "ConfigMap", "web-config");
    // The scenario: Missing and OutOfSync (not for pruning), the app's health Argo CD's per
    // version, and no sync re-creating it.
    let expected = match argocd_version() {
        Some("2.14") => "Missing",
        _ => "Healthy",
    };
    let before = sb.wait_app("web", T, |a| {
        a["status"]["sync"]["status"] == "OutOfSync"
            && a["status"]["sync"]["revision"] == tip.as_str()
            && a["status"]["resources"].as_array().is_some_and(|rs| {
                rs.iter().any(|r| {
                    r["kind"] == "ConfigMap"
                        && r["status"] == "OutOfSync"
                        && r["health"]["status"] == "Missing"
                        && r.get("requiresPruning").is_none()
                })
            })
    });
    assert_eq!(
        before["status"]["health"]["status"], expected,
        "{}",
        before["status"]
    );
    let wd = watchdog(repo, &sb.url, &[], &[]);
    // greenlight's baseline: web idle at `tip` with the ConfigMap Missing among its chronic
    // conditions.
    let end = std::time::Instant::now() + T;
    while !kept_idle(&wd.state, "web")
        .is_some_and(|v| v.contains(&tip) && v.contains("web-config") && v.contains("Missing"))
    {
        assert!(
            std::time::Instant::now() < end,
            "the idle observation with the Missing ConfigMap was never written: {:?}",
            kept_idle(&wd.state, "web")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let still = sb.app("web");
    assert_eq!(still["status"]["sync"]["status"], "OutOfSync", "{still}");
    assert_eq!(still["status"]["health"]["status"], expected, "{still}");
    sb.control("/sandbox/v1/pause");
    let c = repo.set_image(
        "web",
        image,
        &format!("web: new image\n\n{}", trailer("web", "4", "arm")),
    );
    wd.wait_state(&c, "WAITING_REACH", T);
    sb.control("/sandbox/v1/resume");
    (sb, wd, c, tip)
}

/// The ConfigMap deleted by hand is not this commit's doing, and the commit's sync re-creates
/// it (it applies every resource): the app is Synced and Healthy after it, on both versions. An
/// operator expects the good image bump confirmed, never reverted.
fn a_config_map_deleted_by_hand_confirms_a_good_image_bump() {
    let repo = Repo::new();
    let (sb, wd, c, _) = config_map_deleted_by_hand_then(&repo, GOOD2);
    let w = wd.wait_state(&c, "CONFIRMED", T);
    let reason = w["reason"].as_str().unwrap();
    // Re-created, the ConfigMap is no longer in its baseline's condition: nothing left out.
    assert!(
        reason.starts_with("confirmed: reached and healthy") && !reason.contains("left out"),
        "{reason}"
    );
    assert!(w["revert_commit"].is_null(), "{w}");
    assert_eq!(repo.remote_tip(), c, "nothing pushed");
    assert_eq!(count_reverts_of(&repo, &c), 0);
    // The commit's sync re-created the ConfigMap.
    let after = sb.app("web");
    assert!(healthy_at(&after, &c), "{}", after["status"]);
}

/// The same app, a broken image: the Deployment is Degraded after the commit. The before was
/// not clean — a resource OutOfSync other than for pruning, which the commit's sync re-applied
/// along with it (`docs/verdicts.md#evidence`, condition 1) — so the FAIL says so and nothing
/// is reverted; never CONFIRMED.
fn a_config_map_deleted_by_hand_keeps_a_broken_image_bump_unreverted() {
    let repo = Repo::new();
    let (_sb, wd, c, tip) = config_map_deleted_by_hand_then(&repo, BAD);
    let w = settled_fail(&wd.state, &c, &wd.proc);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("not healthy within 4s after reach: health=Degraded")
            && reason.contains("Deployment/apps/web=Degraded"),
        "{reason}"
    );
    assert!(
        reason.contains(&format!(
            "no evidence that this commit broke the app: before this commit's sync the app was not clean at revision {} (sync status OutOfSync)",
            &tip[..7]
        )) && reason.ends_with("not reverted"),
        "{reason}"
    );
    assert!(w["revert_commit"].is_null(), "{w}");
    assert_eq!(repo.remote_tip(), c, "nothing pushed");
    assert_eq!(count_reverts_of(&repo, &c), 0);
    assert_eq!(wd.status()["breaker"]["consecutive_reverts"], 0);
}

/// A developer committed D (a broken image) on an old tip while G (a ConfigMap for web) landed;
/// `git pull --no-rebase` then made the merge M with D as its *first* parent. Returns (D, G, M)
/// once M is pushed; `on_merge` is the trailer of M, `on_d` of D.
fn pull_merge(repo: &Repo, wd: &Watchdog, on_d: &str, on_merge: &str) -> (String, String, String) {
    repo.write("apps/web/deploy.yaml", &deployment("web", BAD));
    repo.git(&["add", "-A"]);
    let message = if on_d.is_empty() {
        "web: 2.0.0".to_string()
    } else {
        format!("web: 2.0.0\n\n{on_d}")
    };
    repo.git(&["commit", "-q", "-m", &message]);
    let d = repo.git(&["rev-parse", "HEAD"]);
    // Someone else pushes G first; greenlight fetches it (its watch of `other` starts).
    let other = repo.path("other-human");
    git(
        repo.root(),
        &["clone", "-q", &repo.repo(), other.to_str().unwrap()],
    );
    std::fs::write(other.join("apps/web/config.yaml"), config_map("1")).unwrap();
    git(&other, &["add", "-A"]);
    let g_message = format!("web: a config map\n\n{}", trailer("other", "600", "shadow"));
    git(&other, &["commit", "-q", "-m", &g_message]);
    git(&other, &["push", "-q", "origin", "main"]);
    let g = git(&other, &["rev-parse", "HEAD"]);
    let end = std::time::Instant::now() + T;
    while watch_of(&wd.status(), &g).is_none() {
        assert!(std::time::Instant::now() < end, "G was never fetched");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Argo CD deployed G, and greenlight saw web idle and clean there, before the pull: had it
    // last seen web before G, the merge's sync would deploy G with D, and G, changing web, would
    // be a suspect (judge_rules `a_pull_merge_deploying_the_branchs_newer_commit_…`).
    let clean_at_g = |row: Option<String>| {
        row.and_then(|r| serde_json::from_str::<serde_json::Value>(&r).ok())
            .and_then(|v| v.as_array().cloned())
            .is_some_and(|a| {
                a.iter().any(|i| {
                    i["revision"] == g.as_str()
                        && i["health"] == "Healthy"
                        && i.get("out_of_sync").is_none()
                        && i["unclean"].is_null()
                })
            })
    };
    while !clean_at_g(kept_idle(&wd.state, "web")) {
        assert!(
            std::time::Instant::now() < end,
            "web was never seen idle and clean at G: {:?}",
            kept_idle(&wd.state, "web")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    repo.git(&["pull", "-q", "--no-rebase", "--no-edit", "origin", "main"]);
    let merge_message = if on_merge.is_empty() {
        "Merge branch 'main'".to_string()
    } else {
        format!("Merge branch 'main'\n\n{on_merge}")
    };
    repo.git(&["commit", "-q", "--amend", "-m", &merge_message]);
    let m = repo.push();
    assert_eq!(
        repo.git(&["rev-parse", "HEAD^1", "HEAD^2"]),
        format!("{d}\n{g}"),
        "a pull merge has the developer's commit first"
    );
    (d, g, m)
}

/// The trailer on the pull merge: the revert undoes what the merge brought into the branch (D's
/// broken image) and keeps the branch's side (G's ConfigMap). Before, `-m 1` kept D's side and
/// undid G's: an innocent change reverted, the broken image left live.
fn a_pull_merges_revert_undoes_the_developers_side_not_the_branchs() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web", "other=apps/other"], &[]);
    settled(&sb, &repo, &["web", "other"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let (_, _, m) = pull_merge(&repo, &wd, "", &trailer("web", "6", "arm"));
    let w = wd.wait_state(&m, "REVERTED", T);
    let revert = w["revert_commit"].as_str().unwrap();
    assert_eq!(repo.remote_tip(), revert);
    let image = repo.bare_git(&["show", "main:apps/web/deploy.yaml"]);
    assert!(image.contains(GOOD), "the broken image is undone: {image}");
    repo.bare_git(&["cat-file", "-e", "main:apps/web/config.yaml"]);
}

/// The trailer on the developer's commit D: the pull merge brings D itself, so it is no later
/// commit of D's watch. Before, D escaped as "attributed to a later commit"; now D is reverted.
fn a_commit_arriving_through_a_pull_merge_is_judged_as_its_own() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web", "other=apps/other"], &[]);
    settled(&sb, &repo, &["web", "other"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let (d, _, _) = pull_merge(&repo, &wd, &trailer("web", "6", "arm"), "");
    let w = wd.wait_state(&d, "REVERTED", T);
    assert!(
        w["later_commits"].as_array().is_none_or(|l| l.is_empty()),
        "{w}"
    );
    let image = repo.bare_git(&["show", "main:apps/web/deploy.yaml"]);
    assert!(image.contains(GOOD), "{image}");
    repo.bare_git(&["cat-file", "-e", "main:apps/web/config.yaml"]);
}

/// The idle observation of `app` the state file at `state` keeps, as its JSON row, if any.
fn kept_idle(state: &std::path::Path, app: &str) -> Option<String> {
    let conn =
        rusqlite::Connection::open_with_flags(state, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ok()?;
    conn.query_row(
        "SELECT value FROM meta WHERE key = ?1",
        [format!("idle:argocd/{app}")],
        |r| r.get(0),
    )
    .ok()
}

/// greenlight dies after it last saw the app idle and before the commit's push; Argo CD syncs
/// the broken commit while it is down. Restarted, greenlight finds the app's last idle
/// observation in its state file — the commit's clean before — and reverts. Before, that
/// observation lived only in memory: "baseline unknown", the revert lost.
fn a_restart_before_the_commit_arrives_keeps_the_apps_baseline() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let good = repo.remote_tip();
    let mut wd = watchdog(&repo, &sb.url, &[], &[]);
    let end = std::time::Instant::now() + T;
    while !kept_idle(&wd.state, "web").is_some_and(|v| v.contains(&good)) {
        assert!(
            std::time::Instant::now() < end,
            "the idle observation was never written"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    wd.proc.kill9();
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: 2.0.0\n\n{}", trailer("web", "6", "arm")),
    );
    sb.wait_app("web", T, |a| {
        a["status"]["sync"]["revision"] == bad.as_str()
            && a["status"]["operationState"]["phase"] == "Succeeded"
    });
    let wd2 = watchdog_with_state(&repo, &sb.url, &wd.state, &[], &[]);
    let w = wd2.wait_state(&bad, "REVERTED", T);
    assert_eq!(repo.remote_tip(), w["revert_commit"].as_str().unwrap());
}

/// greenlight fetched X (another app's commit) while Argo CD had not compared it for web yet,
/// then died; a broken armed commit of web is pushed and synced with X while it is down.
/// Restarted, greenlight still knows X came between web's baseline and the commit (the arrived
/// commits are in its state file): X did not touch web, so the revert comes. Before, the batch
/// was unknown after a restart and nothing was reverted.
fn a_restart_keeps_the_commits_between_an_apps_baseline_and_its_next_commit() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web", "other=apps/other"], &[]);
    settled(&sb, &repo, &["web", "other"]);
    let good = repo.remote_tip();
    let mut wd = watchdog(&repo, &sb.url, &[], &[]);
    let end = std::time::Instant::now() + T;
    while !kept_idle(&wd.state, "web").is_some_and(|v| v.contains(&good)) {
        assert!(
            std::time::Instant::now() < end,
            "the idle observation was never written"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Argo CD holds (web stays compared at `good`); greenlight fetches X.
    sb.control("/sandbox/v1/pause");
    let x = repo.set_image(
        "other",
        GOOD2,
        &format!("other: 1.1.0\n\n{}", trailer("other", "600", "shadow")),
    );
    wd.wait_state(&x, "WAITING_REACH", T);
    wd.proc.kill9();
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: 2.0.0\n\n{}", trailer("web", "6", "arm")),
    );
    sb.control("/sandbox/v1/resume");
    sb.wait_app("web", T, |a| {
        a["status"]["sync"]["revision"] == bad.as_str()
            && a["status"]["operationState"]["phase"] == "Succeeded"
    });
    let wd2 = watchdog_with_state(&repo, &sb.url, &wd.state, &[], &[]);
    let w = wd2.wait_state(&bad, "REVERTED", T);
    assert_eq!(repo.remote_tip(), w["revert_commit"].as_str().unwrap());
}

/// Argo CD's server rolls out behind an ingress: for a while every request meets the ingress's
/// default backend, `404` for everything, right through a healthy armed commit's deadline. A
/// 404 is no proof the app is gone — the listing decides, and a listing that fails proves
/// nothing — so the commit is confirmed once Argo CD answers again. Before, the 404 read was
/// taken as "the app does not exist" and the healthy commit was reverted.
fn a_read_answering_404_at_the_deadline_is_no_failure() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let good = repo.remote_tip();
    // A window longer than the deadline, so the streak is under way when the deadline passes;
    // the 404s last less than --stale-after, so the time is not unobserved for too long.
    let flags = [("--stable-for", "15s"), ("--stale-after", "5s")];
    let (proc, state) = watchdog_timed(&repo, &sb.url, &good, &flags);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "2", "arm")),
    );
    proc.wait_line("stability window of 15s started", T);
    // From the start of the streak past the deadline (reach + 2 s): the deadline's read is a 404.
    sb.control("/sandbox/v1/default-backend?seconds=3");
    let w = wait_state(&state, &c, "CONFIRMED", T, &proc);
    assert!(w["revert_commit"].is_null(), "{w}");
    assert_eq!(repo.remote_tip(), c, "nothing pushed");
    assert!(
        proc.output()
            .contains("answered 404: absent, or the answer did not come from Argo CD's API"),
        "{}",
        proc.output()
    );
}

/// An RBAC change hides the app from greenlight's token for a moment right before a healthy
/// armed commit's deadline: Argo CD leaves it out of listings and streams and answers 403. An
/// app that cannot be seen has not been shown deleted: the verdict is INCONCLUSIVE (or, if it is
/// seen again in time, CONFIRMED), never a revert. Before, "the app does not exist" reverted it.
fn an_app_hidden_from_the_token_before_the_deadline_is_not_reverted() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let good = repo.remote_tip();
    let flags = [("--stable-for", "30s"), ("--stale-after", "5s")];
    let (proc, state) = watchdog_timed(&repo, &sb.url, &good, &flags);
    idle_seen(&state, &good);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "3", "arm")),
    );
    proc.wait_line("stability window of 30s started", T);
    sb.control("/sandbox/v1/hide?app=web&seconds=4");
    let end = std::time::Instant::now() + T;
    let w = loop {
        let st = status_json(&state);
        if let Some(w) = watch_of(&st, &c)
            && [
                "INCONCLUSIVE",
                "CONFIRMED",
                "FAIL",
                "REVERTED",
                "REVERT_FAILED",
            ]
            .contains(&w["state"].as_str().unwrap_or_default())
        {
            break w.clone();
        }
        assert!(
            std::time::Instant::now() < end,
            "no verdict: {}",
            proc.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(w["state"], "INCONCLUSIVE", "{w}\n{}", proc.output());
    assert!(w["revert_commit"].is_null(), "{w}");
    assert_eq!(repo.remote_tip(), c, "nothing pushed");
}

/// C1 adds only a PostSync hook that fails: Argo CD does not compare hooks, so it calls the app
/// Synced at C1 without running a sync, and the hook first runs with the next commit's sync. C2
/// (armed, an innocent ConfigMap) is that next commit: its sync fails in C1's hook. C1 is in
/// C2's batch (the commits since the last sync operation's revision), so C2 is not reverted.
/// Before, C2 was reverted for C1's hook.
fn a_hook_only_commit_is_a_suspect_of_the_next_commits_sync() {
    let repo = Repo::new();
    let sb = sandbox(
        &repo,
        &["web=apps/web"],
        &["--retry-backoff", "200ms", "--hook-time", "200ms"],
    );
    settled(&sb, &repo, &["web"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    repo.write("apps/web/smoke.yaml", &failing_smoke_test());
    let c1 = repo.commit_push("web: a smoke test");
    sb.wait_app("web", T, |a| {
        a["status"]["sync"]["revision"] == c1.as_str() && a["status"]["sync"]["status"] == "Synced"
    });
    repo.write("apps/web/config.yaml", &config_map("1"));
    let c2 = repo.commit_push(&format!("web: config\n\n{}", trailer("web", "60", "arm")));
    let w = wd.wait_state(&c2, "FAIL", T);
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.contains("PostSync hook failed")
            && reason.contains(&format!("suspects: {}, {}", &c2[..8], &c1[..8])),
        "{reason}"
    );
    assert!(w["revert_commit"].is_null(), "{w}");
    assert_eq!(repo.remote_tip(), c2, "nothing pushed");
}

/// One commit armed for web (a broken image) and shadow for other (a rollout that takes its
/// time): greenlight reverts it for web while other's watch still judges. other's record says
/// greenlight withdrew the commit — not a human's revert, not a verdict on other.
fn greenlights_revert_for_one_app_withdraws_the_commits_watch_of_another() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web", "other=apps/other"], &[]);
    settled(&sb, &repo, &["web", "other"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    repo.write("apps/web/deploy.yaml", &deployment("web", BAD));
    let slow = deployment("other", GOOD2).replace(
        "  namespace: apps\n",
        "  namespace: apps\n  annotations:\n    sandbox.greenlight.dev/health: Progressing\n",
    );
    repo.write("apps/other/deploy.yaml", &slow);
    let c = repo.commit_push(&format!(
        "web and other: new images\n\n{}\n{}",
        trailer("web", "4", "arm"),
        trailer("other", "600", "shadow")
    ));
    let web = wd.wait_state(&c, "REVERTED", T);
    let revert = web["revert_commit"].as_str().unwrap().to_string();
    let end = std::time::Instant::now() + T;
    let other = loop {
        let st = wd.status();
        if let Some(w) = greenlight_testkit::watch::watch_of_app(&st, &c, Some("other")).cloned()
            && w["state"] != "JUDGING"
            && w["state"] != "WAITING_REACH"
        {
            break w;
        }
        assert!(std::time::Instant::now() < end, "{}", wd.proc.output());
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(other["state"], "NOT_REACHED", "{other}");
    let reason = other["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!(
            "withdrawn by greenlight: its revert {revert} of this commit"
        )),
        "{reason}"
    );
    assert!(!reason.contains("not made by greenlight"), "{reason}");
    assert_eq!(count_reverts_of(&repo, &c), 1);
}

/// Waits for the watch of `commit` to have its verdict (a FAIL whose revert is under way is not
/// one yet); returns it.
fn verdict_of(state: &std::path::Path, commit: &str, proc: &Proc) -> serde_json::Value {
    let end = std::time::Instant::now() + T;
    loop {
        let st = status_json(state);
        if let Some(w) = watch_of(&st, commit)
            && greenlight_testkit::watch::TERMINAL_STATES
                .contains(&w["state"].as_str().unwrap_or_default())
            && !w["reason"]
                .as_str()
                .unwrap_or_default()
                .ends_with("reverting")
        {
            return w.clone();
        }
        assert!(
            std::time::Instant::now() < end,
            "no verdict: {}",
            proc.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the state file keeps web's idle observation at `revision`: the baseline a
/// commit pushed next is judged against (so that a verdict is never "no clean before").
fn idle_seen(state: &std::path::Path, revision: &str) {
    let end = std::time::Instant::now() + T;
    while !kept_idle(state, "web").is_some_and(|v| v.contains(revision)) {
        assert!(
            std::time::Instant::now() < end,
            "the idle observation was never written"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The index of the first output line containing `needle`.
fn line_index(proc: &Proc, needle: &str) -> Option<usize> {
    proc.lines().iter().position(|l| l.contains(needle))
}

/// The same scale-up once the deadline has passed during the healthy streak: it pauses the
/// streak (its healthy time banked), the streak resumes when the Deployment is `Healthy` again,
/// and the commit is confirmed, the pause named — nothing pushed.
fn a_transient_progressing_after_the_deadline_pauses_the_streak_and_confirms() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let good = repo.remote_tip();
    let flags = [("--stable-for", "6s"), ("--stale-after", "5s")];
    let (proc, state) = watchdog_timed(&repo, &sb.url, &good, &flags);
    idle_seen(&state, &good);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "2", "arm")),
    );
    proc.wait_line("deadline passed during a healthy streak", T);
    sb.hold_health("web", "Deployment", "web", "Progressing", 2.0);
    let w = verdict_of(&state, &c, &proc);
    let out = proc.output();
    let paused = line_index(
        &proc,
        "healthy streak paused after the deadline: health=Progressing",
    )
    .unwrap_or_else(|| panic!("the transient never paused the streak:\n{out}"));
    let resumed = line_index(&proc, "healthy streak resumed")
        .unwrap_or_else(|| panic!("the streak never resumed:\n{out}"));
    assert!(paused < resumed, "{out}");
    assert_eq!(w["state"], "CONFIRMED", "{w}\n{out}");
    assert!(
        w["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("paused 1 time(s) on a transient state"),
        "{w}"
    );
    assert_eq!(repo.remote_tip(), c, "nothing pushed");
}

/// A healthy armed commit whose Deployment an HPA scales up just before the health deadline:
/// `Progressing` from after the healthy streak started until past the deadline (the new Pods
/// take longer than the time left), then `Healthy` again. Nothing says the commit broke the app:
/// an operator expects it confirmed (the streak under way at the deadline, paused by the
/// transient) or a verdict that pushes nothing — never a revert.
fn a_transient_progressing_from_just_before_the_deadline_reverts_nothing() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let good = repo.remote_tip();
    // A window longer than the deadline: the streak cannot complete before it.
    let flags = [("--stable-for", "15s"), ("--stale-after", "5s")];
    let (proc, state) = watchdog_timed(&repo, &sb.url, &good, &flags);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "3", "arm")),
    );
    // Reach, then healthy after the 1 s rollout: about 2 s of the deadline are left.
    proc.wait_line("stability window of 15s started", T);
    sb.hold_health("web", "Deployment", "web", "Progressing", 5.0);
    let w = verdict_of(&state, &c, &proc);
    let out = proc.output();
    // The scenario: the transient began before the deadline (it broke the streak under way)
    // and outlasted it.
    let broken = line_index(&proc, "healthy streak broken").unwrap_or_else(|| {
        panic!("the transient never reached the judge before the deadline:\n{out}")
    });
    assert!(
        line_index(&proc, "deadline passed during a healthy streak").is_none_or(|d| d > broken),
        "the transient came after the deadline, not before it:\n{out}"
    );
    assert!(
        !out.contains("no clean before"),
        "the baseline was known:\n{out}"
    );
    assert!(w["revert_commit"].is_null(), "{w}\n{out}");
    assert_eq!(repo.remote_tip(), c, "nothing pushed: {w}\n{out}");
    assert_eq!(count_reverts_of(&repo, &c), 0);
    // The deadline found the transient after a healthy app: the streak counts as paused there,
    // resumes when the Deployment is healthy again, and completes.
    assert_eq!(w["state"], "CONFIRMED", "{w}\n{out}");
}

/// The everyday timings, a health deadline longer than the stability window: the streak would
/// complete before the deadline, but an HPA scale-up makes the Deployment `Progressing` before
/// it does, for longer than the deadline. The streak is broken before the deadline and the app
/// is `Progressing` at it; nothing says the commit broke the app, so nothing may be pushed.
fn a_transient_progressing_that_breaks_the_streak_and_spans_the_deadline_reverts_nothing() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let good = repo.remote_tip();
    let flags = [("--stable-for", "4s"), ("--stale-after", "5s")];
    let (proc, state) = watchdog_timed(&repo, &sb.url, &good, &flags);
    idle_seen(&state, &good);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "5", "arm")),
    );
    // Healthy about 1 s after reach: the streak would complete about 5 s after reach, at the
    // deadline; the scale-up starts at once and lasts past it.
    proc.wait_line("stability window of 4s started", T);
    sb.hold_health("web", "Deployment", "web", "Progressing", 8.0);
    let w = verdict_of(&state, &c, &proc);
    let out = proc.output();
    assert!(
        line_index(&proc, "healthy streak broken").is_some(),
        "the transient never broke the streak:\n{out}"
    );
    // The streak did not complete before the transient: a CONFIRMED came through the pause at
    // the deadline (or the app was not healthy again within stable-for: INCONCLUSIVE).
    let reason = w["reason"].as_str().unwrap_or_default();
    assert!(
        (w["state"] == "CONFIRMED" && reason.contains("paused 1 time(s)"))
            || w["state"] == "INCONCLUSIVE",
        "the streak completed before the transient, or the transient was judged a failure\n{w}\n{out}"
    );
    assert!(
        !out.contains("no clean before"),
        "the baseline was known:\n{out}"
    );
    assert!(w["revert_commit"].is_null(), "{w}\n{out}");
    assert_eq!(repo.remote_tip(), c, "nothing pushed: {w}\n{out}");
    assert_eq!(count_reverts_of(&repo, &c), 0);
}

/// A healthy armed commit whose deadline passes while a broken proxy or a misbehaving server
/// answers `on` (the listing, reads or both) with `what` (`{}` or 100000 nested arrays) for a
/// while: returns the verdict and the watchdog's output.
fn verdict_through_garbled_answers(what: &str, on: &str) -> (serde_json::Value, String) {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let good = repo.remote_tip();
    // A listing at every fetch tick (200 ms), as while the stream does not vouch: the garbled
    // answers are met whatever the stream does.
    let flags = [
        ("--stable-for", "6s"),
        ("--stale-after", "5s"),
        ("--resync-interval", "200ms"),
    ];
    let (mut proc, state) = watchdog_timed(&repo, &sb.url, &good, &flags);
    idle_seen(&state, &good);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "3", "arm")),
    );
    proc.wait_line("stability window of 6s started", T);
    // From the start of the streak past the deadline (reach + 3 s).
    sb.garble(what, on, 4.0);
    let w = verdict_of(&state, &c, &proc);
    let out = proc.output();
    assert!(proc.is_running(), "the watchdog died:\n{out}");
    assert!(!out.contains("panicked"), "{out}");
    assert!(w["revert_commit"].is_null(), "{w}\n{out}");
    assert_eq!(repo.remote_tip(), c, "nothing pushed: {w}\n{out}");
    assert_eq!(count_reverts_of(&repo, &c), 0);
    (w, out)
}

/// The listing answered `{}`: no `items`, so it says nothing about which apps exist. It is
/// refused (a warning naming why), no app is taken as gone, and the commit is confirmed.
fn a_listing_without_items_at_the_deadline_is_refused_not_a_failure() {
    let (w, out) = verdict_through_garbled_answers("no-items", "listing");
    assert!(
        out.contains("listing Argo CD applications failed")
            && out.contains("no `items` field: this is not an Application list"),
        "{out}"
    );
    assert_eq!(w["state"], "CONFIRMED", "{w}\n{out}");
}

/// The listing and every read answered with an object whose `items` are 100000 nested arrays:
/// the listing is refused at the parser's depth limit (a warning naming it), never a stack
/// overflow, and the commit is confirmed.
fn a_deeply_nested_body_at_the_deadline_is_refused_not_a_crash() {
    let (w, out) = verdict_through_garbled_answers("nested", "both");
    assert!(
        out.contains("listing Argo CD applications failed")
            && out.contains("recursion limit exceeded"),
        "{out}"
    );
    assert_eq!(w["state"], "CONFIRMED", "{w}\n{out}");
}

/// Reads of the app answered `{}`: that is no Application, let alone web. The read is refused
/// (a warning naming why), and the commit is confirmed.
fn a_read_answering_an_empty_object_at_the_deadline_is_refused_not_a_failure() {
    let (w, out) = verdict_through_garbled_answers("no-items", "reads");
    assert!(
        out.contains("reading Application web failed")
            && out.contains("the answer is not Application \"web\" but names \"\""),
        "{out}"
    );
    assert_eq!(w["state"], "CONFIRMED", "{w}\n{out}");
}

on_every_argocd_version!(
    one_sync_deploying_two_commits_to_the_app_reverts_neither,
    one_sync_that_also_deployed_another_apps_commit_still_reverts,
    a_fix_forward_greenlight_had_not_fetched_stops_the_revert,
    a_post_sync_check_already_failing_is_no_evidence_against_the_next_commit,
    an_app_out_of_sync_only_for_pruning_confirms_a_good_image_bump,
    an_app_out_of_sync_only_for_pruning_reverts_a_broken_image_bump,
    a_cronjob_suspended_on_purpose_confirms_a_good_image_bump,
    a_cronjob_suspended_on_purpose_does_not_keep_a_broken_image_bump,
    a_config_map_deleted_by_hand_confirms_a_good_image_bump,
    a_config_map_deleted_by_hand_keeps_a_broken_image_bump_unreverted,
    a_pull_merges_revert_undoes_the_developers_side_not_the_branchs,
    a_commit_arriving_through_a_pull_merge_is_judged_as_its_own,
    a_restart_before_the_commit_arrives_keeps_the_apps_baseline,
    a_restart_keeps_the_commits_between_an_apps_baseline_and_its_next_commit,
    a_read_answering_404_at_the_deadline_is_no_failure,
    an_app_hidden_from_the_token_before_the_deadline_is_not_reverted,
    a_hook_only_commit_is_a_suspect_of_the_next_commits_sync,
    greenlights_revert_for_one_app_withdraws_the_commits_watch_of_another,
    a_transient_progressing_after_the_deadline_pauses_the_streak_and_confirms,
    a_listing_without_items_at_the_deadline_is_refused_not_a_failure,
    a_deeply_nested_body_at_the_deadline_is_refused_not_a_crash,
    a_read_answering_an_empty_object_at_the_deadline_is_refused_not_a_failure,
    a_transient_progressing_from_just_before_the_deadline_reverts_nothing,
    a_transient_progressing_that_breaks_the_streak_and_spans_the_deadline_reverts_nothing,
);
