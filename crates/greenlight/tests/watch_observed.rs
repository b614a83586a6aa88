//! Observed time, end to end (`docs/verdicts.md#observed-time`): `greenlight sandbox` and
//! `greenlight watch` over real git, where Argo CD cannot be seen for part of a stability
//! window. A `CONFIRMED` rests on time greenlight observed; unobserved time counts only up to a
//! small slack. Waits are on recorded states, never fixed sleeps; every test runs against the
//! sandbox as Argo CD 3.5 and 2.14.

#[macro_use]
mod common;
use common::*;
use greenlight_core::time::Timestamp;
use greenlight_testkit::watch::Watchdog;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

fn at(w: &serde_json::Value, field: &str) -> Timestamp {
    let text = w[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} in {w}"));
    Timestamp::parse_rfc3339(text).unwrap_or_else(|| panic!("{field} = {text:?}"))
}

/// Waits until the watch of `commit` has a healthy streak under way; returns the watch.
fn streak_under_way(wd: &Watchdog, commit: &str) -> serde_json::Value {
    let end = Instant::now() + T;
    loop {
        let st = wd.status();
        if let Some(w) = greenlight_testkit::watch::watch_of_app(&st, commit, None)
            && w["healthy_since"].is_string()
        {
            return w.clone();
        }
        assert!(Instant::now() < end, "{}", wd.proc.output());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `--stable-for 6s` at or below `--stale-after 8s`: a quarter of the window, 1.5 s, is the
/// most one unobserved gap may count.
const SHORT_WINDOW: [(&str, &str); 2] = [("--stable-for", "6s"), ("--stale-after", "8s")];

/// A watchdog with [`SHORT_WINDOW`] and a good armed commit of web whose healthy streak is under
/// way: the repository, sandbox, watchdog, commit, and the watch as the streak began.
fn good_commit_in_a_short_window() -> (Repo, Sandbox, Watchdog, String, serde_json::Value) {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let state = repo.path("state/greenlight.db");
    let wd = Watchdog::start_timed(BIN, &repo.repo(), &sb.url, &state, &SHORT_WINDOW);
    let good = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "60", "arm")),
    );
    let judging = streak_under_way(&wd, &good);
    (repo, sb, wd, good, judging)
}

/// `--stable-for 6s` at or below `--stale-after 8s`: Argo CD answers 503 for 5 s of the 6 s
/// window. Before, the window's end (after the outage) confirmed the commit on one healthy
/// observation and 5 s nobody saw; now the outage counts only its slack (a quarter of
/// stable-for, 1.5 s), so the streak needs 3.5 s more of observed time.
fn an_outage_inside_the_stability_window_does_not_count_as_healthy_time() {
    let (repo, sb, wd, good, judging) = good_commit_in_a_short_window();
    sb.control("/sandbox/v1/outage?seconds=5");
    let w = wd.wait_state(&good, "CONFIRMED", T);
    let since = at(&judging, "healthy_since");
    let confirmed = at(&w, "finished_at");
    let took = confirmed.ms_since(since);
    assert!(
        took >= 6_000 + 3_500,
        "confirmed {took} ms after the streak began, across a 5 s outage: {w}"
    );
    assert_eq!(repo.remote_tip(), good, "never a revert");
}

/// The same window cut by a restart of greenlight shorter than `--stale-after`: the time it was
/// down is unobserved, and counts only its slack.
fn a_restart_inside_the_stability_window_does_not_count_as_healthy_time() {
    let (repo, sb, wd, good, judging) = good_commit_in_a_short_window();
    let state = wd.state.clone();
    drop(wd);
    // Down for 4 s (the scenario, not a wait for something): under --stale-after, so the
    // streak is not broken, only not counted.
    std::thread::sleep(Duration::from_secs(4));
    let wd = Watchdog::start_timed(BIN, &repo.repo(), &sb.url, &state, &SHORT_WINDOW);
    let w = wd.wait_state(&good, "CONFIRMED", T);
    let since = at(&judging, "healthy_since");
    let took = at(&w, "finished_at").ms_since(since);
    assert!(
        took >= 6_000 + 2_500,
        "confirmed {took} ms after the streak began, across a 4 s restart: {w}"
    );
}

/// A broken armed commit reaches web; greenlight dies; a human pushes a fix-forward and Argo CD
/// syncs it while greenlight is down. Restarted, greenlight must not revert the broken commit on
/// top of the fix: the fix is a later change to the app (attribution), or the deadline passed
/// unobserved (INCONCLUSIVE) — never a revert.
fn a_fix_forward_synced_while_greenlight_was_down_is_never_reverted_over() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let state = repo.path("state/greenlight.db");
    let wd = Watchdog::start_timed(BIN, &repo.repo(), &sb.url, &state, &[]);
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: 2.0.0\n\n{}", trailer("web", "6", "arm")),
    );
    wd.wait_state(&bad, "JUDGING", T);
    drop(wd);
    let fix = repo.set_image("web", GOOD2, "web: fix forward to 1.1.0");
    sb.wait_app("web", T, |a| healthy_at(a, &fix));
    let wd = Watchdog::start_timed(BIN, &repo.repo(), &sb.url, &state, &[]);
    let end = Instant::now() + T;
    let w = loop {
        let st = wd.status();
        let w = greenlight_testkit::watch::watch_of(&st, &bad)
            .cloned()
            .unwrap();
        if !["JUDGING", "WAITING_REACH"].contains(&w["state"].as_str().unwrap()) {
            break w;
        }
        assert!(Instant::now() < end, "{}", wd.proc.output());
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(w["revert_commit"].is_null(), "{w}\n{}", wd.proc.output());
    assert_ne!(w["state"], "REVERTED", "{w}");
    assert_eq!(repo.remote_tip(), fix, "nothing pushed on top of the fix");
    assert_eq!(count_reverts_of(&repo, &bad), 0);
}

on_every_argocd_version!(
    an_outage_inside_the_stability_window_does_not_count_as_healthy_time,
    a_restart_inside_the_stability_window_does_not_count_as_healthy_time,
    a_fix_forward_synced_while_greenlight_was_down_is_never_reverted_over,
);
