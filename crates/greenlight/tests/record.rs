//! End to end: the shadow track record built from scripted histories in real git, as an
//! operator lives them — the watchdog judging shadow commits against the sandbox, humans then
//! reverting, fixing forward or doing nothing — and `greenlight record` read as of the moment
//! each verdict's day is over (`--as-of`), since no test waits a day.

#[macro_use]
mod common;
use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

fn record(state: &Path, extra: &[&str]) -> Output {
    std::process::Command::new(BIN)
        .args(["record", "--state", state.to_str().unwrap()])
        .args(extra)
        .output()
        .expect("run greenlight record")
}

fn record_json(state: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["--json"];
    args.extend(extra);
    let o = record(state, &args);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn app<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["apps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["app"] == name)
        .unwrap_or_else(|| panic!("no {name} in {doc:#}"))
}

/// The state as `state export` reads it while the daemon runs.
fn exported(state: &Path) -> Value {
    let o = std::process::Command::new(BIN)
        .args(["state", "export", "--state", state.to_str().unwrap()])
        .output()
        .expect("run greenlight state export");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Waits until the watchdog has taken in `sha` (its recorded tip).
#[track_caller]
fn seen(state: &Path, sha: &str) {
    let start = std::time::Instant::now();
    while exported(state)["tip"] != sha {
        assert!(start.elapsed() < T, "the watchdog never saw {sha}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until `app`'s last idle observation is `health`.
#[track_caller]
fn idle_health(state: &Path, app: &str, health: &str) {
    let start = std::time::Instant::now();
    loop {
        let doc = exported(state);
        let last = doc["idle"][format!("argocd/{app}")]
            .as_array()
            .and_then(|v| v.last().cloned());
        if last.as_ref().is_some_and(|l| l["health"] == health) {
            return;
        }
        assert!(
            start.elapsed() < T,
            "{app} never seen {health} idle: {last:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A human's `git revert` of `sha`, pushed.
fn human_revert(repo: &Repo, sha: &str) -> String {
    repo.git(&["revert", "--no-edit", sha]);
    repo.push();
    repo.remote_tip()
}

/// Four shadow verdicts and what people did after each:
/// - web, a broken image: FAIL (would have reverted), and a human reverted it — agreement;
/// - web, a good image: CONFIRMED, and a human reverted it anyway — a miss;
/// - web, a broken image again: FAIL, and a human fixed it forward (a later commit to web);
/// - other, a good image the cluster held Degraded past the deadline: FAIL, and nobody touched
///   other, which is healthy again — a likely false alarm.
///
/// Read now, the fix forward and the false alarm are still in their day; read as of a day
/// later, every verdict is decided.
#[test]
fn agreement_a_miss_a_fix_forward_and_a_false_alarm_each_counted() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web", "other=apps/other"], &[]);
    settled(&sb, &repo, &["web", "other"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let state = wd.state.clone();

    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: 2.0.0\n\n{}", trailer("web", "3", "shadow")),
    );
    wd.wait_state(&bad, "FAIL", T);
    let agreed = human_revert(&repo, &bad);
    seen(&state, &agreed);
    settled(&sb, &repo, &["web"]);

    let good = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "30", "shadow")),
    );
    wd.wait_state(&good, "CONFIRMED", T);
    let missed = human_revert(&repo, &good);
    seen(&state, &missed);
    settled(&sb, &repo, &["web"]);

    let bad2 = repo.set_image(
        "web",
        BAD,
        &format!("web: 2.0.1\n\n{}", trailer("web", "3", "shadow")),
    );
    wd.wait_state(&bad2, "FAIL", T);
    let fix = repo.set_image("web", GOOD2, "web: 1.1.1, the fix");
    seen(&state, &fix);

    let blip = repo.set_image(
        "other",
        GOOD2,
        &format!("other: 1.1.0\n\n{}", trailer("other", "4", "shadow")),
    );
    // After the commit reached it (Degraded before reach would be the baseline's, not the
    // commit's doing), through the deadline.
    wd.proc.wait_line("reached app other", T);
    sb.hold_health("other", "Deployment", "other", "Degraded", 8.0);
    let w = wd.wait_state(&blip, "FAIL", T);
    assert!(
        w["reason"].as_str().unwrap().contains("shadow"),
        "armed, it would have reverted: {w}"
    );
    idle_health(&state, "other", "Healthy");

    // Now: the fix forward and the false alarm are still within their day.
    let doc = record_json(&state, &[]);
    let web = &app(&doc, "web")["counts"];
    assert_eq!(web["verdicts"], 3, "{doc:#}");
    assert_eq!(web["shadow"], 3);
    assert_eq!(web["would_revert"], 2);
    assert_eq!(
        web["agreed"], 1,
        "a human reverted the first failure: {doc:#}"
    );
    assert_eq!(web["pending_would_revert"], 1, "{doc:#}");
    assert_eq!(web["confirmed"], 1);
    assert_eq!(
        web["misses"], 1,
        "a human reverted the confirmed commit: {doc:#}"
    );
    let other = &app(&doc, "other")["counts"];
    assert_eq!(other["would_revert"], 1);
    assert_eq!(other["pending_would_revert"], 1, "{doc:#}");
    assert_eq!(other["false_alarms"], 0);

    // A day later everything is decided.
    let day_later = exported(&state)["watches"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["finished_at"].as_i64())
        .max()
        .unwrap()
        + 24 * 3_600_000
        + 1;
    let as_of = greenlight_core::time::Timestamp(day_later).rfc3339();
    let doc = record_json(&state, &["--as-of", &as_of]);
    let web = app(&doc, "web");
    assert_eq!(web["counts"]["fixed_forward"], 1, "{doc:#}");
    assert_eq!(web["counts"]["pending_would_revert"], 0);
    assert_eq!(web["decided"], 3);
    assert_eq!(web["ready_to_arm"], false);
    let other = app(&doc, "other");
    assert_eq!(other["counts"]["false_alarms"], 1, "{doc:#}");
    assert_eq!(other["ready_to_arm"], false);

    // In words, with the sample size; `--app` narrows it.
    let o = record(&state, &["--as-of", &as_of, "--app", "web"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.starts_with("web: 3 shadow verdicts, 2 would-have-reverted (1 reverted by a human, 1 fixed forward): agreement 1/2; 1 confirmed commit reverted by a human: miss; not ready to arm: it confirmed a commit a human had to revert (3 decided of 10 needed)\n"),
        "{out}"
    );
    assert!(!out.contains("other:"), "{out}");
    // The audit's line of each app says how much evidence there is (now: the fix forward is
    // still in its day).
    let o = std::process::Command::new(BIN)
        .args([
            "audit",
            "--repo",
            &repo.repo(),
            "--branch",
            "main",
            "--argocd-url",
            &sb.url,
        ])
        .args(["--state", state.to_str().unwrap()])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    let line = |app: &str| {
        out.lines()
            .find(|l| l.starts_with(app))
            .unwrap_or_else(|| panic!("{app} in {out}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(out.lines().next().unwrap().contains("RECORD"), "{out}");
    assert_eq!(
        line("argocd/web"),
        "argocd/web yes yes* 2 decided of 10, agreement 1/1, 1 miss, 1 in its day",
        "{out}"
    );
    assert_eq!(
        line("argocd/other"),
        "argocd/other yes yes* 0 decided of 10, agreement 0/0, 1 in its day"
    );
    let o = record(&state, &["--as-of", &as_of, "--app", "other"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with("other: 1 shadow verdict, 1 would-have-reverted (0 reverted by a human, 1 likely false alarm): agreement 0/1; do not arm"),
        "{out}"
    );
}

/// An armed watch reverts a commit, and a human puts the commit back (`git revert` of
/// greenlight's revert): the record counts greenlight's revert as overruled, and says an app
/// whose reverts humans undo is not ready to arm.
#[test]
fn a_revert_a_human_undoes_is_overruled() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let state = wd.state.clone();
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: 2.0.0\n\n{}", trailer("web", "3", "arm")),
    );
    let w = wd.wait_state(&bad, "REVERTED", T);
    let revert = w["revert_commit"].as_str().unwrap().to_string();
    repo.pull();
    let undo = human_revert(&repo, &revert);
    seen(&state, &undo);
    let doc = record_json(&state, &[]);
    let web = app(&doc, "web");
    assert_eq!(web["counts"]["reverted"], 1, "{doc:#}");
    assert_eq!(web["counts"]["overruled"], 1, "{doc:#}");
    assert_eq!(web["counts"]["shadow"], 0);
    assert_eq!(web["ready_to_arm"], false);
    assert!(
        web["judgement"]
            .as_str()
            .unwrap()
            .contains("1 of greenlight's 1 revert reverted by a human; not ready to arm: humans undid its reverts"),
        "{doc:#}"
    );
}

/// Bad input is named (exit 2); a store that does not exist is refused as `status` refuses it
/// (exit 2, naming the file), never read as an empty record.
#[test]
fn bad_input_is_named_and_a_missing_store_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.db");
    let o = record(&missing, &["--as-of", "yesterday"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--as-of \"yesterday\""));
    let o = record(&missing, &["--app", "a/b/c"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = record(&missing, &["--min-samples", "0"]);
    assert_eq!(o.status.code(), Some(2));
    let o = record(&missing, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("none.db"));
}
