//! `greenlight watch --listen`: the binary against the sandbox, its `/metrics` scraped by a real
//! Prometheus (Debian's) and read back through Prometheus' query API with a watch in flight,
//! and its probes as the kubelet reads them (`docs/metrics.md`).

mod common;
use common::*;
use greenlight_testkit::http::{Response, http_request};
use greenlight_testkit::prometheus::Prometheus;
use std::net::TcpListener;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

fn get(url: &str, headers: &[(&str, &str)]) -> Response {
    http_request("GET", url, headers).unwrap_or_else(|e| panic!("GET {url}: {e}"))
}

/// Polls `url` until `ok` holds for its answer; fails after `within`, showing the last one.
#[track_caller]
fn wait_answer(
    url: &str,
    within: Duration,
    ok: impl Fn(&Response) -> bool,
    proc: &Proc,
) -> Response {
    let end = Instant::now() + within;
    loop {
        let last = http_request("GET", url, &[]);
        if let Ok(r) = &last
            && ok(r)
        {
            return last.unwrap();
        }
        assert!(
            Instant::now() < end,
            "GET {url}: not the expected answer within {within:?}; last: {:?}\n{}",
            last.map(|r| (r.status, r.body)),
            proc.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The metrics do not depend on Argo CD's version: one run, against the sandbox's default.
#[test]
fn a_watch_in_flight_is_scraped_by_prometheus_and_the_probes_follow_the_source() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    // Every listing fails for a while from before the start: the source connects, but no
    // complete listing answers, so the watchdog is not ready.
    sb.garble("no-items", "listing", 12.0);
    let addr = free_addr();
    let base = format!("http://{addr}");
    let mut args = watch_args(
        &repo,
        &sb.url,
        &repo.path("state/greenlight.db"),
        &["--listen", &addr],
    );
    let i = args.iter().position(|a| a == "--stable-for").unwrap();
    args[i + 1] = "8s".into();
    let proc = Proc::spawn(BIN, args, &[]);
    proc.wait_line("watching ", T);

    let startup = get(&format!("{base}/startupz"), &[]);
    assert_eq!((startup.status, startup.body.as_str()), (200, "ok\n"));
    let not_ready = get(&format!("{base}/readyz"), &[]);
    assert_eq!(not_ready.status, 503, "{}", not_ready.body);
    assert!(
        not_ready.body.contains("waiting for a complete listing")
            || not_ready.body.contains("not connected yet"),
        "{}",
        not_ready.body
    );
    assert_eq!(
        not_ready.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    // Healthy from the start (`ok: starting` before the loop's first turn), then `ok`.
    wait_answer(
        &format!("{base}/healthz"),
        T,
        |r| r.status == 200 && r.body == "ok\n",
        &proc,
    );
    // Ready once a listing answers completely again, after the garbling ends.
    wait_answer(
        &format!("{base}/readyz"),
        T,
        |r| r.status == 200 && r.body == "ok\n",
        &proc,
    );
    assert!(
        proc.output()
            .contains("listing Argo CD applications failed"),
        "the listings failed while it was not ready:\n{}",
        proc.output()
    );

    let prom = Prometheus::scraping(&addr);
    prom.wait_for_value(
        "count(greenlight_build_info{version=\"0.1.0\",commit=~\"[0-9a-f]{12}|unknown\"} == 1)",
        |v| v == [1.0],
        T,
    );
    prom.wait_for_value(
        "greenlight_source_seconds_since_complete_observation{source=\"argocd\"} < 5",
        |v| v.len() == 1,
        T,
    );

    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "60", "arm")),
    );
    wait_state(&repo.path("state/greenlight.db"), &c, "JUDGING", T, &proc);
    // Mid-watch, as Prometheus asks (OpenMetrics) and as a plain client does (classic text).
    let accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let om = get(&format!("{base}/metrics"), &[("Accept", accept)]);
    assert_eq!(om.status, 200);
    assert_eq!(
        om.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    assert!(om.body.ends_with("# EOF\n"), "{}", om.body);
    assert!(
        om.body
            .contains("greenlight_watches{state=\"JUDGING\"} 1\n"),
        "{}",
        om.body
    );
    let plain = get(&format!("{base}/metrics"), &[]);
    assert_eq!(
        plain.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert!(!plain.body.contains("# EOF"), "{}", plain.body);
    eprintln!(
        "--- /metrics mid-watch (OpenMetrics) ---\n{}--- end ---",
        om.body
    );
    for secret in [sb.url.as_str(), &repo.repo()] {
        assert!(!om.body.contains(secret), "{secret} in:\n{}", om.body);
    }

    prom.wait_for_value("greenlight_watches{state=\"JUDGING\"}", |v| v == [1.0], T);
    prom.wait_for_value(
        "greenlight_git_job_duration_seconds_count{kind=\"fetch\"} > 0",
        |v| v.len() == 1,
        T,
    );
    wait_state(&repo.path("state/greenlight.db"), &c, "CONFIRMED", T, &proc);
    prom.wait_for_value(
        "greenlight_verdicts_total{verdict=\"CONFIRMED\"}",
        |v| v == [1.0],
        T,
    );
    prom.wait_for_value("greenlight_watches{state=\"CONFIRMED\"}", |v| v == [1.0], T);
    prom.wait_for_value("greenlight_watches{state=\"JUDGING\"}", |v| v == [0.0], T);
    prom.wait_for_value("greenlight_breaker_open", |v| v == [0.0], T);
    assert_eq!(
        prom.query("sum(greenlight_verdicts_total)").unwrap(),
        [1.0],
        "one verdict, counted once"
    );
}

#[test]
fn a_listen_address_in_use_is_a_clear_error_naming_the_flag() {
    let repo = Repo::new();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let args = watch_args(
        &repo,
        "http://127.0.0.1:9",
        &repo.path("state/greenlight.db"),
        &["--listen", &addr],
    );
    let mut proc = Proc::spawn(BIN, args, &[]);
    let status = proc.wait_exit(T);
    let out = proc.output();
    assert_eq!(status.code(), Some(2), "{out}");
    assert!(
        out.contains(&format!("--listen {addr}: cannot listen there: ")) && out.contains("in use"),
        "{out}"
    );
    assert!(!out.contains("panicked"), "{out}");
    assert!(
        !out.contains("watching "),
        "it stops before start-up:\n{out}"
    );
}

#[test]
fn listen_is_not_for_once() {
    let repo = Repo::new();
    let args = watch_args(
        &repo,
        "http://127.0.0.1:9",
        &repo.path("state/greenlight.db"),
        &["--once", "--listen", "127.0.0.1:0"],
    );
    let mut proc = Proc::spawn(BIN, args, &[]);
    let status = proc.wait_exit(T);
    let out = proc.output();
    assert_eq!(status.code(), Some(2), "{out}");
    assert!(out.contains("--listen: "), "{out}");
}

#[test]
fn a_bad_listen_address_names_the_flag() {
    let repo = Repo::new();
    let args = watch_args(
        &repo,
        "http://127.0.0.1:9",
        &repo.path("state/greenlight.db"),
        &["--listen", "localhost"],
    );
    let mut proc = Proc::spawn(BIN, args, &[]);
    let status = proc.wait_exit(T);
    let out = proc.output();
    assert_eq!(status.code(), Some(2), "{out}");
    assert!(out.contains("--listen"), "{out}");
}
