//! The promotion gate's `http` and `command` checks, run from where greenlight runs: one request
//! or one process (its URL or argv already rendered with the candidate's values,
//! `greenlight_gate::config::Template::render`), and an outcome with one line of evidence (the
//! status and time, the exit code and the output's last line). The gate
//! (`greenlight_gate::machine`) decides what an outcome means for the run.

use greenlight_gate::machine::CheckOutcome;
use std::time::{Duration, Instant};

/// The most of an `http` check's body read: a larger one is undecided, never held whole.
pub const HTTP_CHECK_BODY_MAX_BYTES: usize = 4 * 1024 * 1024;

/// One HTTP GET: passed when the status is `expect_status` and, if given, the body contains
/// `body_contains`; a request that fails or times out, or a body over
/// [`HTTP_CHECK_BODY_MAX_BYTES`], is undecided, never a pass.
pub async fn http_check(
    client: &reqwest::Client,
    url: &str,
    expect_status: u16,
    body_contains: Option<&str>,
    timeout: Duration,
) -> CheckOutcome {
    let started = Instant::now();
    let answer = tokio::time::timeout(timeout, async {
        let mut resp = client.get(url).send().await?;
        let status = resp.status().as_u16();
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await? {
            if body.len() + chunk.len() > HTTP_CHECK_BODY_MAX_BYTES {
                return Ok(None);
            }
            body.extend_from_slice(&chunk);
        }
        Ok::<_, reqwest::Error>(Some((status, String::from_utf8_lossy(&body).into_owned())))
    })
    .await;
    let ms = started.elapsed().as_millis();
    match answer {
        Err(_) => CheckOutcome::Undecided {
            evidence: format!(
                "GET {url}: no answer within {}",
                humantime::format_duration(timeout)
            ),
        },
        Ok(Err(e)) => CheckOutcome::Undecided {
            evidence: format!("GET {url}: {}", without_url(&e)),
        },
        Ok(Ok(None)) => CheckOutcome::Undecided {
            evidence: format!(
                "GET {url}: the body exceeds {} MiB; not read further",
                HTTP_CHECK_BODY_MAX_BYTES >> 20
            ),
        },
        Ok(Ok(Some((status, body)))) => {
            let status_ok = status == expect_status;
            let body_ok = body_contains.is_none_or(|needle| body.contains(needle));
            let mut evidence = format!("GET {url}: {status} in {ms} ms");
            if body_contains.is_some() {
                evidence.push_str(if body_ok {
                    ", body contains the expected text"
                } else {
                    ", body lacks the expected text"
                });
            }
            if status_ok && body_ok {
                CheckOutcome::Passed { evidence }
            } else {
                if !status_ok {
                    evidence.push_str(&format!(" (expected {expect_status})"));
                }
                CheckOutcome::Failed { evidence }
            }
        }
    }
}

/// reqwest's error without the URL it repeats (the evidence names it once).
fn without_url(e: &reqwest::Error) -> String {
    let mut e = e.to_string();
    if let Some(i) = e.find(" for url (") {
        e.truncate(i);
    }
    e
}

/// One process, argv as given (no shell): passed on exit 0; its output's last non-empty line
/// is the evidence. A process still running at `timeout` is killed: undecided.
pub async fn command_check(argv: &[String], timeout: Duration) -> CheckOutcome {
    command_check_in(argv, None, timeout).await
}

/// [`command_check`] run in `dir` (the promotion config's directory), or where greenlight runs.
pub async fn command_check_in(
    argv: &[String],
    dir: Option<&std::path::Path>,
    timeout: Duration,
) -> CheckOutcome {
    let Some((program, args)) = argv.split_first() else {
        return CheckOutcome::Undecided {
            evidence: "an empty command".into(),
        };
    };
    let started = Instant::now();
    let mut command = tokio::process::Command::new(program);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let child = command
        .args(args)
        // The git token greenlight was given is git's alone.
        .env_remove(crate::GIT_TOKEN_ENV)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        // Its own process group, so that a timeout ends what it started too (a `sh -c` with
        // a child of its own), not only the process itself.
        .process_group(0)
        .kill_on_drop(true)
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            return CheckOutcome::Undecided {
                evidence: format!("{program}: could not start: {e}"),
            };
        }
    };
    // Whatever ends this check — its timeout, or the run dropping it when a signal cancels the
    // run — ends its process group too; a check that exited leaves its group to itself.
    let mut group = GroupKill(child.id().and_then(|id| libc::pid_t::try_from(id).ok()));
    let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Err(_) => {
            drop(group);
            return CheckOutcome::Undecided {
                evidence: format!(
                    "{program}: still running after {}, killed",
                    humantime::format_duration(timeout)
                ),
            };
        }
        Ok(Err(e)) => {
            return CheckOutcome::Undecided {
                evidence: format!("{program}: {e}"),
            };
        }
        Ok(Ok(o)) => o,
    };
    group.0 = None;
    let ms = started.elapsed().as_millis();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| format!(": {}", l.trim()))
        .unwrap_or_default();
    match output.status.code() {
        Some(0) => CheckOutcome::Passed {
            evidence: format!("{program} exited 0 in {ms} ms{last}"),
        },
        Some(code) => CheckOutcome::Failed {
            evidence: format!("{program} exited {code} in {ms} ms{last}"),
        },
        None => CheckOutcome::Failed {
            evidence: format!("{program} was killed by a signal{last}"),
        },
    }
}

/// Kills a check's process group when dropped (`None`: nothing to kill).
struct GroupKill(Option<libc::pid_t>);

impl Drop for GroupKill {
    fn drop(&mut self) {
        if let Some(pgid) = self.0.take() {
            // SAFETY: killpg only sends a signal; the group is the one the check spawned.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

/// One `prometheus` or `analysisTemplate` check: its metrics measured together by the analysis
/// engine (`greenlight_gate::analysis`, Argo Rollouts' semantics), each query sent to its
/// Prometheus when the engine says it is due. Successful passes; Failed fails; Error and
/// Inconclusive are undecided, never a pass. The queries, addresses and header values come
/// rendered with the candidate's values.
pub async fn analysis_check(
    analysis: &greenlight_gate::config::Analysis,
    values: &greenlight_gate::config::template::CandidateValues,
    clock: &dyn crate::clock::Clock,
) -> CheckOutcome {
    use greenlight_gate::analysis::{Phase, ProviderValue, Run, RunSpec};
    use greenlight_prometheus::{ClientOptions, PrometheusClient, ResultValue, Secret};
    let spec = RunSpec {
        metrics: analysis.metrics.iter().map(|m| m.analysis_spec()).collect(),
        dry_run: Vec::new(),
    };
    let validated = match spec.validate() {
        Ok(v) => v,
        Err(e) => {
            return CheckOutcome::Undecided {
                evidence: format!("the analysis is not valid: {e}"),
            };
        }
    };
    let mut queries = std::collections::HashMap::new();
    for m in &analysis.metrics {
        let q = &m.prometheus;
        let options = ClientOptions {
            timeout: Duration::from_millis(q.timeout_ms.max(1) as u64),
            headers: q
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), Secret::new(v.render(values))))
                .collect(),
            ..ClientOptions::default()
        };
        match PrometheusClient::new(&q.address.render(values), options) {
            Ok(client) => {
                queries.insert(m.name.clone(), (client, q.query.render(values)));
            }
            Err(e) => {
                return CheckOutcome::Undecided {
                    evidence: format!("metric `{}`: {e}", m.name),
                };
            }
        }
    }
    let mut run = Run::start(validated, clock.now());
    while !run.is_terminated() {
        let Some(due) = run.next_due() else { break };
        tokio::time::sleep(clock.until(due)).await;
        let now = clock.now();
        let names: Vec<String> = run.due(now).into_iter().map(str::to_string).collect();
        let mut answers = Vec::with_capacity(names.len());
        for name in &names {
            let (client, query) = &queries[name];
            let value = match client.query(query, None).await {
                Ok(r) => match r.value {
                    ResultValue::Scalar(v) => ProviderValue::Scalar(v),
                    ResultValue::List(vs) => ProviderValue::Vector(vs),
                },
                Err(e) => ProviderValue::Error(e.to_string()),
            };
            answers.push((name.as_str(), value));
        }
        if run.observe_all(&answers, clock.now()).is_err() {
            break;
        }
    }
    let figures: Vec<String> = run
        .results()
        .iter()
        .map(|r| {
            let c = r.counts();
            format!(
                "{} {} ({} measured: {} successful, {} failed, {} inconclusive, {} error)",
                r.name(),
                r.phase().as_str(),
                c.count,
                c.successful,
                c.failed,
                c.inconclusive,
                c.error
            )
        })
        .collect();
    let mut evidence = format!("{}: {}", run.phase().as_str(), figures.join("; "));
    if let Some(why) = run.message() {
        evidence.push_str(&format!(" — {why}"));
    }
    for hint in run.results().iter().filter_map(|r| r.noise_hint()) {
        evidence.push_str(&format!(" — {hint}"));
    }
    // What each metric saw: its last measurement's value, and whether that measured nothing
    // (`docs/analysis.md#measured-nothing`), so a reader sees what the verdict rests on.
    let seen: Vec<String> = run
        .results()
        .iter()
        .filter_map(|r| {
            let m = r.last_measurement()?;
            let value = m.value.as_deref().unwrap_or("no value (the query failed)");
            Some(match m.measured_nothing() {
                Some(nothing) if r.metric().allows_no_data() => {
                    format!("{} {value} ({nothing}, allowed by allowNoData)", r.name())
                }
                Some(nothing) => format!("{} {value} ({nothing})", r.name()),
                None => format!("{} {value}", r.name()),
            })
        })
        .collect();
    if !seen.is_empty() {
        evidence.push_str(&format!(" — last values: {}", seen.join("; ")));
    }
    match run.phase() {
        Phase::Successful => CheckOutcome::Passed { evidence },
        Phase::Failed => CheckOutcome::Failed { evidence },
        _ => CheckOutcome::Undecided { evidence },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server on loopback: `/ok` answers 200 "model ready", `/down` 503.
    async fn server() -> String {
        use axum::{Router, http::StatusCode, routing::get};
        let app = Router::new()
            .route("/ok", get(|| async { "model ready" }))
            .route(
                "/down",
                get(|| async { (StatusCode::SERVICE_UNAVAILABLE, "loading") }),
            )
            // A body without end (a misdirected check on a stream): read to the bound only.
            .route(
                "/endless",
                get(|| async {
                    let chunk = axum::body::Bytes::from(vec![b'x'; 64 * 1024]);
                    use futures_util::StreamExt;
                    let stream = futures_util::stream::repeat(chunk).map(Ok::<_, std::io::Error>);
                    axum::body::Body::from_stream(stream)
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn an_http_check_passes_on_the_expected_status_and_body_only() {
        let base = server().await;
        // The binary installs the process's crypto provider at start; a test does it itself.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::new();
        let t = Duration::from_secs(5);
        let out = http_check(&client, &format!("{base}/ok"), 200, Some("ready"), t).await;
        assert!(
            matches!(&out, CheckOutcome::Passed { evidence } if evidence.contains(": 200 in ")),
            "{out:?}"
        );
        let out = http_check(&client, &format!("{base}/ok"), 200, Some("serving"), t).await;
        assert!(
            matches!(&out, CheckOutcome::Failed { evidence } if evidence.contains("lacks")),
            "{out:?}"
        );
        let out = http_check(&client, &format!("{base}/down"), 200, None, t).await;
        assert!(
            matches!(&out, CheckOutcome::Failed { evidence } if evidence.contains("503") && evidence.contains("(expected 200)")),
            "{out:?}"
        );
        let out = http_check(&client, &format!("{base}/endless"), 200, Some("ready"), t).await;
        assert!(
            matches!(&out, CheckOutcome::Undecided { evidence } if evidence.contains("exceeds 4 MiB")),
            "{out:?}"
        );
        // Nothing listening, and a server that never answers: undecided, never a pass.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = format!("http://{}/", listener.local_addr().unwrap());
        drop(listener);
        let out = http_check(&client, &closed, 200, None, t).await;
        assert!(matches!(out, CheckOutcome::Undecided { .. }), "{out:?}");
        let silent = greenlight_testkit::http::SilentServer::start();
        let out = http_check(
            &client,
            &silent.url(),
            200,
            None,
            Duration::from_millis(300),
        )
        .await;
        assert!(
            matches!(&out, CheckOutcome::Undecided { evidence } if evidence.contains("no answer within 300ms")),
            "{out:?}"
        );
    }

    #[tokio::test]
    async fn a_command_passes_on_exit_zero_and_keeps_its_last_line() {
        let out = command_check(
            &["sh".into(), "-c".into(), "echo one; echo ready".into()],
            Duration::from_secs(10),
        )
        .await;
        let CheckOutcome::Passed { evidence } = out else {
            panic!("{out:?}")
        };
        assert!(
            evidence.starts_with("sh exited 0 in ") && evidence.ends_with(": ready"),
            "{evidence}"
        );
        let out = command_check(
            &["sh".into(), "-c".into(), "echo bad >&2; exit 3".into()],
            Duration::from_secs(10),
        )
        .await;
        let CheckOutcome::Failed { evidence } = out else {
            panic!("{out:?}")
        };
        assert!(
            evidence.contains("exited 3") && evidence.ends_with(": bad"),
            "{evidence}"
        );
        // A timeout ends what the command started as well: the grandchild holding the output.
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let out = command_check(
            &["sh".into(), "-c".into(), script],
            Duration::from_millis(500),
        )
        .await;
        assert!(
            matches!(&out, CheckOutcome::Undecided { evidence } if evidence.contains("killed")),
            "{out:?}"
        );
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let gone = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map_or(true, |stat| stat.split(' ').nth(2) == Some("Z"))
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while !gone() && Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert!(gone(), "the grandchild {pid} outlived the check");
        let out = command_check(&["sleep".into(), "30".into()], Duration::from_millis(200)).await;
        assert!(
            matches!(&out, CheckOutcome::Undecided { evidence } if evidence.contains("killed")),
            "{out:?}"
        );
        let out = command_check(&["/nonexistent/prog".into()], Duration::from_secs(1)).await;
        assert!(
            matches!(&out, CheckOutcome::Undecided { evidence } if evidence.contains("could not start")),
            "{out:?}"
        );
    }
}
