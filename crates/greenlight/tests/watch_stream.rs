//! The watchdog against Argo CD's application stream as it really is (docs/sandbox-fidelity.md):
//! server-sent events with heartbeats, no response headers before the first event, and a
//! stream whose silence means nothing without a listing behind it. The real binary over real
//! git and the sandbox; waits on recorded states and printed lines, never on fixed sleeps.

#[macro_use]
mod common;
use common::*;
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

/// A commit to `web` reached and healthy before the watchdog starts (`--since` the base), then
/// nothing changes: only the stream's heartbeats can carry the one observation through the
/// stability window, since the fetch interval (60 s) brings no listing meanwhile.
fn a_quiet_app_after_reach(heartbeat: &str) -> (Repo, Sandbox, Proc, std::path::PathBuf, String) {
    let repo = Repo::new();
    let base = repo.remote_tip();
    let sb = sandbox(&repo, &["web=apps/web"], &["--heartbeat", heartbeat]);
    sb.wait_app("web", T, |a| healthy_at(a, &base));
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "15", "shadow")),
    );
    sb.wait_app("web", T, |a| healthy_at(a, &c));
    let state = repo.path("state/greenlight.db");
    let mut args = watch_args(&repo, &sb.url, &state, &["--since", base.as_str()]);
    for (flag, value) in [("--fetch-interval", "60s"), ("--stable-for", "6s")] {
        let i = args.iter().position(|a| a == flag).unwrap();
        args[i + 1] = value.into();
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let proc = Proc::spawn(BIN, &argv, &[]);
    proc.wait_line("watching ", T);
    (repo, sb, proc, state, c)
}

fn heartbeats_keep_a_quiet_app_fresh() {
    let (_repo, _sb, proc, state, c) = a_quiet_app_after_reach("500ms");
    let w = wait_state(&state, &c, "CONFIRMED", T, &proc);
    assert!(w["healthy_since"].is_string(), "{w}");
    // The stream vouched for the whole window: one streak, never broken for unobserved time.
    let out = proc.output();
    assert!(!out.contains("healthy streak broken"), "{out}");
    assert_eq!(
        out.matches("stability window of 6s started").count(),
        1,
        "{out}"
    );
}

fn without_heartbeats_the_silence_vouches_for_nothing() {
    let (_repo, _sb, proc, _state, _c) = a_quiet_app_after_reach("1h");
    // Silent past --stale-after (3 s) and no listing (the fetch interval is 60 s): nothing
    // vouches for the window. At its end the app is read, since the stream vouches for nothing
    // then, and the answer finds the 6 s without an observation: the streak starts again. (Each
    // later due moment reads the app again, and a verdict comes from those reads, never from
    // the stream's silence.)
    proc.wait_line("healthy streak broken: the app was not observed for", T);
}

/// A proxy to the sandbox that accepts stream requests and never answers them, as Argo CD
/// does while no application is visible (no headers before the first event).
struct StreamlessProxy {
    url: String,
}

impl StreamlessProxy {
    fn start(upstream: &str) -> StreamlessProxy {
        use std::io::{Read, Write};
        use std::net::{TcpListener, TcpStream};
        let up = upstream.strip_prefix("http://").unwrap().to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut client) = conn else { return };
                let up = up.clone();
                std::thread::spawn(move || {
                    let mut head = vec![0u8; 8192];
                    let Ok(n) = client.read(&mut head) else {
                        return;
                    };
                    head.truncate(n);
                    if String::from_utf8_lossy(&head).contains("/api/v1/stream/") {
                        // Hold the connection open and say nothing.
                        let mut sink = [0u8; 1024];
                        while matches!(client.read(&mut sink), Ok(n) if n > 0) {}
                        return;
                    }
                    let Ok(mut server) = TcpStream::connect(&up) else {
                        return;
                    };
                    if server.write_all(&head).is_err() {
                        return;
                    }
                    let (mut c2, mut s2) =
                        (client.try_clone().unwrap(), server.try_clone().unwrap());
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut c2, &mut s2);
                        let _ = s2.shutdown(std::net::Shutdown::Write);
                    });
                    let _ = std::io::copy(&mut server, &mut client);
                    let _ = client.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        StreamlessProxy { url }
    }
}

fn a_stream_that_sends_no_headers_is_quiet_and_listings_still_judge() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    let proxy = StreamlessProxy::start(&sb.url);
    let wd = watchdog(&repo, &proxy.url, &[], &[]);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "30", "shadow")),
    );
    wd.wait_state(&c, "CONFIRMED", T);
    let out = wd.proc.output();
    for noise in ["stream lost", "outage", "unavailable"] {
        assert!(!out.contains(noise), "{noise:?} in:\n{out}");
    }
    assert!(!out.contains("stream connected"), "{out}");
}

/// Idle with a watch in flight: the stream's heartbeats vouch, so the fetch ticks (every
/// 200 ms here) ask Argo CD for nothing — no listing before `--resync-interval`, no read of the
/// watched app — until the window's end, where one read confirms the verdict.
fn a_vouching_stream_makes_idle_fetch_ticks_ask_argo_cd_for_nothing() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &["--heartbeat", "500ms"]);
    let addr = sb.url.strip_prefix("http://").unwrap().parse().unwrap();
    let proxy = greenlight_testkit::proxy::TcpProxy::start(addr);
    let url = format!("http://{}", proxy.addr());
    let wd = watchdog(&repo, &url, &[], &[]);
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "60", "shadow")),
    );
    wd.proc.wait_line("stability window of 2s started", T);
    let idle_from = proxy.requests().len();
    let w = wd.wait_state(&c, "CONFIRMED", T);
    let during = proxy.requests()[idle_from..].to_vec();
    let listings = during
        .iter()
        .filter(|r| r.starts_with("GET /api/v1/applications?"))
        .count();
    let reads = during
        .iter()
        .filter(|r| r.starts_with("GET /api/v1/applications/web"))
        .count();
    // 2 s of fetch ticks at 200 ms: before, about 10 listings and 10 reads.
    assert_eq!(listings, 0, "{during:#?}\n{w}");
    assert!(
        reads <= 2,
        "only the window's confirmation: {during:#?}\n{w}"
    );
}

on_every_argocd_version!(
    a_vouching_stream_makes_idle_fetch_ticks_ask_argo_cd_for_nothing,
    heartbeats_keep_a_quiet_app_fresh,
    without_heartbeats_the_silence_vouches_for_nothing,
    a_stream_that_sends_no_headers_is_quiet_and_listings_still_judge,
);
