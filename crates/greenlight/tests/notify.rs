//! Notifications end to end (docs/notifications.md): `greenlight watch` with `[[notify]]` sinks
//! in its `--config` file, over real git and the sandbox, delivering to a real HTTP receiver
//! (`greenlight_testkit::Receiver`) and a real program. Waits are on the receiver's requests
//! and recorded states, never fixed sleeps.

#[macro_use]
mod common;
use common::*;
use greenlight_testkit::{Answer, Received, Receiver};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;
use std::path::{Path, PathBuf};
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

fn write(path: &Path, text: &str) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

/// The webhook signature as a receiver checks it: HMAC-SHA256 of the body under the secret.
fn signature_ok(r: &Received, secret: &str) -> bool {
    let Some(sig) = r.header("x-greenlight-signature-256") else {
        return false;
    };
    let Some(hex) = sig.strip_prefix("sha256=") else {
        return false;
    };
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .filter_map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(r.body.as_bytes());
    mac.verify_slice(&bytes).is_ok()
}

fn outcomes(rs: &[Received]) -> Vec<String> {
    rs.iter()
        .map(|r| r.json()["outcome"].as_str().unwrap_or("?").to_string())
        .collect()
}

fn dead_letters(state: &Path) -> String {
    let o = std::process::Command::new(BIN)
        .args(["notify", "dead-letters", "--state"])
        .arg(state)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    String::from_utf8(o.stdout).unwrap()
}

/// A verdict's outcome reaches a signed webhook, Slack and a command, each in the catalogue's
/// words, in order; the steps on the way (a watch starting, reach, a revert under way) send
/// nothing; the Slack URL (its token) and the secret never reach the daemon's output.
#[test]
fn verdicts_reach_a_signed_webhook_slack_and_a_command_in_order() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let rx = Receiver::start();
    let dir = repo.path("notify");
    let secret = write(&dir.join("secret"), "s3cret-key\n");
    let slack_url = write(&dir.join("slack-url"), &rx.url("/services/T0KEN/B0T"));
    let out_file = dir.join("command.jsonl");
    let config = write(
        &dir.join("watch.toml"),
        &format!(
            "[[notify]]\nname = \"hook\"\nsink = \"webhook\"\nurl = {:?}\nsecret-file = {:?}\n\n\
             [[notify]]\nname = \"chat\"\nsink = \"slack\"\nurl-file = {:?}\n\n\
             [[notify]]\nname = \"pager\"\nsink = \"command\"\ncommand = [\"sh\", \"-c\", \"cat >> '{}'; echo >> '{}'\"]\noutcomes = [\"reverted\"]\n",
            rx.url("/hook"),
            secret.display().to_string(),
            slack_url.display().to_string(),
            out_file.display(),
            out_file.display(),
        ),
    );
    let wd = watchdog(&repo, &sb.url, &["--config", config.to_str().unwrap()], &[]);
    let good = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "30", "arm")),
    );
    wd.wait_state(&good, "CONFIRMED", T);
    settled(&sb, &repo, &["web"]);
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: 2.0.0\n\n{}", trailer("web", "4", "arm")),
    );
    wd.wait_state(&bad, "REVERTED", T);

    let hook = rx.wait("/hook", T, |r| r.len() >= 2);
    assert_eq!(outcomes(&hook), ["passed", "reverted"]);
    for (r, commit) in hook.iter().zip([&good, &bad]) {
        assert!(signature_ok(r, "s3cret-key"), "bad signature: {r:?}");
        let b = r.json();
        assert_eq!(b["schema"], "greenlight.dev/notification/v1");
        assert_eq!(b["app"], "web");
        assert_eq!(b["commit"], commit.as_str());
        assert_eq!(b["source"], "watch");
        assert_eq!(r.header("x-greenlight-delivery"), b["delivery"].as_str());
        assert_eq!(r.header("x-greenlight-outcome"), b["outcome"].as_str());
        assert_eq!(r.header("content-type"), Some("application/json"));
    }
    assert_eq!(hook[0].json()["title"], "passed: live and stayed healthy");
    assert_eq!(hook[1].json()["state"], "REVERTED");
    assert!(
        hook[1].json()["reason"]
            .as_str()
            .unwrap()
            .contains("not healthy within"),
        "{}",
        hook[1].body
    );

    let chat = rx.wait("/services/T0KEN/B0T", T, |r| r.len() >= 2);
    let titles: Vec<Value> = chat
        .iter()
        .map(|r| r.json()["blocks"][0]["text"]["text"].clone())
        .collect();
    assert_eq!(
        titles,
        [
            "passed: live and stayed healthy",
            "reverted: the commit is undone in git"
        ]
    );
    assert!(
        chat.iter()
            .all(|r| r.header("x-greenlight-signature-256").is_none())
    );

    // The command sink wants reverts only: one JSON line.
    let lines = wait_lines(&out_file, 1);
    let b: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(
        (b["outcome"].as_str(), b["commit"].as_str()),
        (Some("reverted"), Some(bad.as_str()))
    );

    assert_eq!(
        rx.received("/hook").len(),
        2,
        "the steps on the way send nothing"
    );
    let out = wd.proc.output();
    assert!(!out.contains("T0KEN") && !out.contains("s3cret"), "{out}");
    assert_eq!(
        dead_letters(&repo.path("state/greenlight.db")),
        "no dead letters\n"
    );
}

/// The non-empty lines of `file` once there are `n` (a bounded wait on the command sink).
fn wait_lines(file: &Path, n: usize) -> Vec<String> {
    let until = std::time::Instant::now() + T;
    loop {
        let lines: Vec<String> = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(String::from)
            .collect();
        if lines.len() >= n {
            return lines;
        }
        assert!(std::time::Instant::now() < until, "{file:?}: {lines:?}");
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

/// A receiver that hangs holds only its own sink: another sink gets a later verdict while it
/// hangs, and the verdict itself is in the state; one that hangs past its timeout and one that
/// answers 500 end as dead letters; one that answers 500 then 200 is retried with the same
/// delivery id and delivered once.
#[test]
fn a_hanging_receiver_holds_no_verdict_and_failures_are_retried_then_dead_letters() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let rx = Receiver::start();
    rx.answer("/stuck", Answer::Hang)
        .answer("/cut", Answer::Hang)
        .answer("/down", Answer::Status(500))
        .queue("/flaky", &[Answer::Status(500)]);
    let sink = |name: &str, extra: &str| {
        format!(
            "[[notify]]\nname = \"{name}\"\nsink = \"webhook\"\nurl = {:?}\n{extra}\n",
            rx.url(&format!("/{name}"))
        )
    };
    let config = write(
        &repo.path("notify/watch.toml"),
        &[
            sink("stuck", "timeout = \"120s\"\nattempts = 1"),
            sink("cut", "timeout = \"1s\"\nattempts = 1"),
            sink("down", "attempts = 2\nbackoff = \"100ms\""),
            sink("flaky", "attempts = 3\nbackoff = \"100ms\""),
        ]
        .concat(),
    );
    let wd = watchdog(&repo, &sb.url, &["--config", config.to_str().unwrap()], &[]);
    let first = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "30", "arm")),
    );
    wd.wait_state(&first, "CONFIRMED", T);
    settled(&sb, &repo, &["web"]);
    let second = repo.set_image(
        "web",
        GOOD,
        &format!("web: 1.0.0\n\n{}", trailer("web", "30", "arm")),
    );
    wd.wait_state(&second, "CONFIRMED", T);
    let flaky = rx.wait("/flaky", T, |r| r.len() >= 3);
    // The second verdict was delivered while `stuck` still held the first (120 s).
    assert_eq!(rx.received("/stuck").len(), 1);
    assert_eq!(
        flaky.iter().map(|r| r.answer).collect::<Vec<_>>(),
        [
            Answer::Status(500),
            Answer::Status(200),
            Answer::Status(200)
        ]
    );
    let ids: Vec<&str> = flaky
        .iter()
        .map(|r| r.header("x-greenlight-delivery").unwrap())
        .collect();
    assert_eq!(ids[0], ids[1], "a retry is the same delivery");
    assert_ne!(ids[1], ids[2]);
    assert_eq!(
        outcomes(&flaky),
        ["passed", "passed", "passed"],
        "in order, each verdict once delivered"
    );
    assert_eq!(flaky[2].json()["commit"], second.as_str());

    rx.wait("/down", T, |r| r.len() >= 4);
    rx.wait("/cut", T, |r| r.len() >= 2);
    let state = repo.path("state/greenlight.db");
    let until = std::time::Instant::now() + T;
    let listed = loop {
        let listed = dead_letters(&state);
        if listed.lines().count() >= 4 || std::time::Instant::now() > until {
            break listed;
        }
        std::thread::park_timeout(Duration::from_millis(100));
    };
    let of = |sink: &str| -> Vec<&str> {
        listed
            .lines()
            .filter(|l| l.split(' ').nth(1) == Some(sink))
            .collect()
    };
    assert_eq!(of("down").len(), 2, "{listed}");
    assert!(
        of("down")
            .iter()
            .all(|l| l.contains("after 2 attempts") && l.contains("answered 500")),
        "{listed}"
    );
    assert_eq!(of("cut").len(), 2, "{listed}");
    assert!(
        of("cut")
            .iter()
            .all(|l| l.contains("did not answer in time")),
        "{listed}"
    );
    assert!(of("flaky").is_empty() && of("stuck").is_empty(), "{listed}");
    assert!(
        !listed.contains("/down") && !listed.contains("/cut"),
        "no URL path: {listed}"
    );
    let out = wd.proc.output();
    assert!(out.contains("kept as a dead letter"), "{out}");
    // The same dead letters as one JSON array, each with its sink and body.
    let o = std::process::Command::new(BIN)
        .args(["notify", "dead-letters", "--output", "json", "--state"])
        .arg(&state)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let dead: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let sinks: Vec<&str> = dead
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["sink"].as_str().unwrap())
        .collect();
    assert_eq!(
        (
            sinks.iter().filter(|s| **s == "down").count(),
            sinks.iter().filter(|s| **s == "cut").count()
        ),
        (2, 2),
        "{dead}"
    );
    assert!(!dead.to_string().contains("/down"), "no URL path: {dead}");
}

/// The tables are refused with the cluster store, which keeps no outbox, and ignored, said
/// so, by `--once`, which judges in a scratch state.
#[test]
fn notify_tables_are_refused_with_the_cluster_store_and_ignored_by_once() {
    let repo = Repo::new();
    let config = write(
        &repo.path("notify/watch.toml"),
        "[[notify]]\nname = \"hook\"\nsink = \"webhook\"\nurl = \"http://127.0.0.1:9/x\"\n",
    );
    let o = std::process::Command::new(BIN)
        .args([
            "watch",
            "--repo",
            &repo.repo(),
            "--argocd-url",
            "http://127.0.0.1:9",
            "--store",
            "kube",
            "--data-dir",
            repo.path("data").to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("[[notify]]") && err.contains("--store kube"),
        "{err}"
    );
    let state = repo.path("state/greenlight.db");
    let o = std::process::Command::new(BIN)
        .args(watch_args(
            &repo,
            "http://127.0.0.1:9",
            &state,
            &["--once", "--config", config.to_str().unwrap()],
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("[[notify]] is ignored with --once"), "{err}");
    assert!(!state.exists(), "a self-check writes no state");
}

/// A daemon stopped while a sink's receiver is down sends, after its restart, what that sink
/// had not delivered — and nothing it had.
#[test]
fn a_restart_resumes_after_the_last_delivered_event() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let rx = Receiver::start();
    let config = write(
        &repo.path("notify/watch.toml"),
        &format!(
            "[[notify]]\nname = \"hook\"\nsink = \"webhook\"\nurl = {:?}\nattempts = 20\nbackoff = \"200ms\"\n",
            rx.url("/hook")
        ),
    );
    let args = ["--config", config.to_str().unwrap()];
    let mut wd = watchdog(&repo, &sb.url, &args, &[]);
    let first = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "30", "arm")),
    );
    wd.wait_state(&first, "CONFIRMED", T);
    rx.wait("/hook", T, |r| r.len() == 1);
    rx.answer("/hook", Answer::Status(503));
    settled(&sb, &repo, &["web"]);
    let second = repo.set_image(
        "web",
        GOOD,
        &format!("web: 1.0.0\n\n{}", trailer("web", "30", "arm")),
    );
    wd.wait_state(&second, "CONFIRMED", T);
    rx.wait("/hook", T, |r| r.len() >= 2);
    wd.proc.sigterm();
    wd.proc.wait_exit(T);
    rx.answer("/hook", Answer::Status(200));
    let failed_before = rx.received("/hook").len() - 1;
    let wd = watchdog(&repo, &sb.url, &args, &[]);
    let hook = rx.wait("/hook", T, |r| {
        r.last().is_some_and(|l| {
            l.answer == Answer::Status(200) && l.json()["commit"] == second.as_str()
        })
    });
    let commits: Vec<String> = hook
        .iter()
        .map(|r| r.json()["commit"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(commits[0], first);
    assert!(commits[1..].iter().all(|c| *c == second), "{commits:?}");
    assert_eq!(
        hook.len(),
        1 + failed_before + 1,
        "the first verdict was not sent again"
    );
    drop(wd);
}

/// A mistake in a `[[notify]]` table stops the daemon before it starts, naming the line; a
/// sink on the cluster store is refused.
#[test]
fn a_bad_notify_table_is_refused_at_start_with_its_line() {
    let repo = Repo::new();
    let config = write(
        &repo.path("notify/watch.toml"),
        "dry-run = true\n\n[[notify]]\nname = \"chat\"\nsink = \"slack\"\nurl = \"https://hooks.example/services/T0KEN\"\noutcomes = [\"pass\"]\n",
    );
    let state = repo.path("state/greenlight.db");
    let o = std::process::Command::new(BIN)
        .args(watch_args(
            &repo,
            "http://127.0.0.1:9",
            &state,
            &["--config", config.to_str().unwrap()],
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("watch.toml:7:13: notify \"chat\": unknown outcome \"pass\""),
        "{err}"
    );
    assert!(!err.contains("T0KEN"), "{err}");
    assert!(!state.exists(), "nothing started");
}

/// `notify test` sends a sample to each sink that wants the outcome and says which took it.
#[test]
fn notify_test_sends_a_sample_and_says_which_sink_took_it() {
    let rx = Receiver::start();
    rx.answer("/broken", Answer::Status(404));
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        &dir.path().join("n.toml"),
        &format!(
            "[[notify]]\nname = \"ok\"\nsink = \"webhook\"\nurl = {:?}\n\n\
             [[notify]]\nname = \"broken\"\nsink = \"webhook\"\nurl = {:?}\nattempts = 1\n\n\
             [[notify]]\nname = \"reverts-only\"\nsink = \"webhook\"\nurl = {:?}\noutcomes = [\"reverted\"]\n",
            rx.url("/ok"),
            rx.url("/broken"),
            rx.url("/other"),
        ),
    );
    let o = std::process::Command::new(BIN)
        .args(["notify", "test", "--outcome", "bypassed", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert_eq!(
        stdout,
        "ok (webhook): delivered\nbroken (webhook): NOT delivered\n"
    );
    let b = rx.received("/ok")[0].json();
    assert_eq!(b["outcome"], "bypassed");
    assert_eq!(b["title"], "BYPASSED: the checks did not run");
    assert!(rx.received("/other").is_empty());
}

/// A receiver that rate-limits (429 with `Retry-After`, as Slack does) is waited for as long
/// as it asked, not the sink's shorter back-off, and then delivered to.
#[test]
fn a_rate_limited_receiver_is_retried_after_the_time_it_asked_for() {
    let rx = Receiver::start();
    rx.queue("/limited", &[Answer::RetryAfter(429, 2)]);
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        &dir.path().join("n.toml"),
        &format!(
            "[[notify]]\nname = \"limited\"\nsink = \"webhook\"\nurl = {:?}\nattempts = 2\nbackoff = \"100ms\"\n",
            rx.url("/limited")
        ),
    );
    let o = std::process::Command::new(BIN)
        .args(["notify", "test", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let got = rx.received("/limited");
    assert_eq!(
        got.iter().map(|r| r.answer).collect::<Vec<_>>(),
        [Answer::RetryAfter(429, 2), Answer::Status(200)]
    );
    let waited = got[1].at - got[0].at;
    assert!(waited >= Duration::from_secs(2), "retried after {waited:?}");
}
