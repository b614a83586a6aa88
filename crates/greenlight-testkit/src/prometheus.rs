//! A real Prometheus for tests: Debian's `/usr/bin/prometheus` run as a child process on a
//! loopback port, with its own config and a data directory in a temporary directory, scraping
//! an [`Exporter`] whose gauges the test sets at any moment. Never a system service: each
//! [`Prometheus`] starts its own and kills it when dropped.
//!
//! `scripts/test` installs the binary when it is missing. Prometheus 2.x applies a new scrape
//! configuration on a 5-second tick, so the first scrape lands some 5 s after start;
//! [`Prometheus::start`] returns only after it did. After that, a value set on the exporter is
//! visible to queries within a scrape interval ([`SCRAPE_INTERVAL`]);
//! [`Prometheus::wait_for_value`] waits for it instead of sleeping.

use crate::http::http_send;
use crate::process::Proc;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often Prometheus scrapes the exporter.
pub const SCRAPE_INTERVAL: Duration = Duration::from_millis(250);

/// The scrape job's name: series from the exporter carry `job="exporter"`.
pub const JOB: &str = "exporter";

/// How long start-up may take: ready, then the first scrape (≈5 s after start).
const START_WITHIN: Duration = Duration::from_secs(60);

/// How often a wait asks Prometheus again.
const POLL: Duration = Duration::from_millis(50);

type Key = (String, Vec<(String, String)>);

#[derive(Default)]
struct Gauges {
    values: BTreeMap<Key, f64>,
}

/// An HTTP server on 127.0.0.1 serving `/metrics` in Prometheus' text format: the gauges the
/// test set, each series `name{labels} value`. Stops when dropped.
pub struct Exporter {
    addr: SocketAddr,
    gauges: Arc<Mutex<Gauges>>,
    scrapes: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Exporter {
    /// Starts serving on a free port of 127.0.0.1, with no gauges.
    pub fn start() -> Exporter {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the exporter");
        let addr = listener.local_addr().unwrap();
        let gauges: Arc<Mutex<Gauges>> = Arc::default();
        let scrapes = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (gauges, scrapes, stop) = (gauges.clone(), scrapes.clone(), stop.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let (gauges, scrapes) = (gauges.clone(), scrapes.clone());
                    std::thread::spawn(move || serve_metrics(conn, &gauges, &scrapes));
                }
            })
        };
        Exporter {
            addr,
            gauges,
            scrapes,
            stop,
            thread: Some(thread),
        }
    }

    /// Sets gauge `name` with `labels` to `value` (NaN and ±Inf included) from the next scrape on.
    pub fn set(&self, name: &str, labels: &[(&str, &str)], value: f64) {
        assert!(valid_name(name), "not a metric name: {name:?}");
        for (k, _) in labels {
            assert!(valid_name(k) && !k.contains(':'), "not a label name: {k:?}");
        }
        let mut gauges = self.gauges.lock().unwrap_or_else(PoisonError::into_inner);
        gauges.values.insert(key(name, labels), value);
    }

    /// Stops exposing the series; Prometheus marks it stale at the next scrape.
    pub fn remove(&self, name: &str, labels: &[(&str, &str)]) {
        let mut gauges = self.gauges.lock().unwrap_or_else(PoisonError::into_inner);
        gauges.values.remove(&key(name, labels));
    }

    /// `host:port`, as a scrape target.
    pub fn target(&self) -> String {
        self.addr.to_string()
    }

    /// `http://127.0.0.1:<port>/metrics`.
    pub fn url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }

    /// How many times `/metrics` was served.
    pub fn scrapes(&self) -> u64 {
        self.scrapes.load(Ordering::SeqCst)
    }

    /// The page `/metrics` serves now.
    pub fn render(&self) -> String {
        let gauges = self.gauges.lock().unwrap_or_else(PoisonError::into_inner);
        render(&gauges.values)
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn key(name: &str, labels: &[(&str, &str)]) -> Key {
    let mut labels: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    labels.sort();
    (name.to_string(), labels)
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn render(values: &BTreeMap<Key, f64>) -> String {
    let mut out = String::new();
    let mut last: Option<&str> = None;
    for ((name, labels), value) in values {
        if last != Some(name.as_str()) {
            out.push_str(&format!("# TYPE {name} gauge\n"));
            last = Some(name);
        }
        out.push_str(name);
        if !labels.is_empty() {
            let inner: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                .collect();
            out.push_str(&format!("{{{}}}", inner.join(",")));
        }
        out.push_str(&format!(" {}\n", format_value(*value)));
    }
    out
}

fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        // Debug keeps every digit and writes large and small numbers with an exponent, both
        // of which Prometheus reads.
        format!("{v:?}")
    }
}

/// Answers one connection: `GET /metrics` with the gauges, anything else 404.
fn serve_metrics(conn: TcpStream, gauges: &Mutex<Gauges>, scrapes: &AtomicU64) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(match conn.try_clone() {
        Ok(c) => c,
        Err(_) => return,
    });
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) if line == "\r\n" || line == "\n" => break,
            Ok(_) => {}
        }
    }
    let path = request_line.split(' ').nth(1).unwrap_or("");
    let (status, body) = if path == "/metrics" || path.starts_with("/metrics?") {
        scrapes.fetch_add(1, Ordering::SeqCst);
        let gauges = gauges.lock().unwrap_or_else(PoisonError::into_inner);
        ("200 OK", render(&gauges.values))
    } else {
        ("404 Not Found", "not found\n".to_string())
    };
    let mut conn = conn;
    let _ = write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// Credentials Prometheus demands (its `--web.config.file` `basic_auth_users`), and that the
/// kit's own requests send.
#[derive(Clone, Debug)]
pub struct BasicAuthUser {
    pub username: String,
    pub password: String,
    /// The password's bcrypt hash, as Prometheus' web config wants it.
    pub bcrypt_hash: String,
}

/// A running Prometheus scraping one exporter; killed (SIGKILL) when dropped.
pub struct Prometheus {
    // Declared first: the process dies before its directory is removed.
    proc: Proc,
    url: String,
    auth_header: Option<String>,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// The binary: `/usr/bin/prometheus`, else `prometheus` on `PATH`. Panics, saying how to
    /// get it, when there is none.
    #[track_caller]
    pub fn binary() -> PathBuf {
        crate::process::find_tool(
            "prometheus",
            &["/usr/bin/prometheus"],
            "the prometheus binary is missing (no /usr/bin/prometheus, none on PATH): \
             run scripts/test, which installs Debian's prometheus package \
             (or: apt-get install -y --no-install-recommends prometheus)",
        )
    }

    /// `prometheus --version`'s first line.
    pub fn version() -> String {
        crate::process::first_line_of(&Self::binary(), &["--version"])
    }

    /// Starts Prometheus scraping `exporter` every [`SCRAPE_INTERVAL`], and returns once it is
    /// ready and its first scrape of the exporter landed (`up{job="exporter"} == 1`).
    #[track_caller]
    pub fn start(exporter: &Exporter) -> Prometheus {
        Self::start_with(&exporter.target(), None)
    }

    /// Starts Prometheus scraping `target` (`host:port`, path `/metrics`; any server, such as
    /// `greenlight watch --listen`) every [`SCRAPE_INTERVAL`] as job [`JOB`], and returns once it
    /// is ready and its first scrape of the target landed.
    #[track_caller]
    pub fn scraping(target: &str) -> Prometheus {
        Self::start_with(target, None)
    }

    /// As [`Prometheus::start`], with Prometheus demanding basic auth from every request.
    #[track_caller]
    pub fn start_with_basic_auth(exporter: &Exporter, user: &BasicAuthUser) -> Prometheus {
        Self::start_with(&exporter.target(), Some(user))
    }

    #[track_caller]
    fn start_with(target: &str, user: Option<&BasicAuthUser>) -> Prometheus {
        let binary = Self::binary();
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("prometheus.yml");
        let interval = SCRAPE_INTERVAL.as_millis();
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: {interval}ms\n  scrape_timeout: {interval}ms\n  evaluation_interval: {interval}ms\n\
                 scrape_configs:\n  - job_name: {JOB}\n    static_configs:\n      - targets: ['{target}']\n",
            ),
        )
        .expect("write prometheus.yml");
        let mut args = vec![
            format!("--config.file={}", config.display()),
            format!("--storage.tsdb.path={}", dir.path().join("data").display()),
            "--storage.tsdb.retention.time=1h".to_string(),
        ];
        let auth_header = user.map(|u| {
            let web = dir.path().join("web.yml");
            std::fs::write(
                &web,
                format!("basic_auth_users:\n  {}: '{}'\n", u.username, u.bcrypt_hash),
            )
            .expect("write web.yml");
            args.push(format!("--web.config.file={}", web.display()));
            format!(
                "Basic {}",
                base64(format!("{}:{}", u.username, u.password).as_bytes())
            )
        });

        // A free port is found by binding and letting go; another process may take it in
        // between, so a start that loses the port is tried again.
        let mut last_output = String::new();
        for _ in 0..3 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("find a free port")
                .port();
            let mut attempt = args.clone();
            attempt.push(format!("--web.listen-address=127.0.0.1:{port}"));
            let mut proc = Proc::spawn(&binary, &attempt, &[]);
            let url = format!("http://127.0.0.1:{port}");
            let end = Instant::now() + START_WITHIN;
            let ready = loop {
                if !proc.is_running() {
                    proc.wait_exit(Duration::from_secs(5));
                    break false;
                }
                let answer = http_send(
                    "GET",
                    &format!("{url}/-/ready"),
                    &auth_header
                        .as_deref()
                        .map(|h| vec![("Authorization", h)])
                        .unwrap_or_default(),
                    "",
                );
                if answer.is_ok_and(|r| r.status == 200) {
                    break true;
                }
                assert!(
                    Instant::now() < end,
                    "Prometheus was not ready within {START_WITHIN:?}; output:\n{}",
                    proc.output()
                );
                std::thread::sleep(POLL);
            };
            if !ready {
                last_output = proc.output();
                if last_output.contains("address already in use") {
                    continue;
                }
                panic!("Prometheus exited before it was ready; output:\n{last_output}");
            }
            let prometheus = Prometheus {
                proc,
                url,
                auth_header,
                _dir: dir,
            };
            prometheus.wait_for_value(
                &format!("up{{job=\"{JOB}\"}}"),
                |v| v == [1.0],
                START_WITHIN,
            );
            return prometheus;
        }
        panic!("Prometheus found no free port in three tries; output:\n{last_output}");
    }

    /// `http://127.0.0.1:<port>`: the base URL a client is given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Prometheus' output so far (its log lines).
    pub fn output(&self) -> String {
        self.proc.output()
    }

    /// Evaluates `promql` now: the values (one per vector series, in Prometheus' order; a
    /// scalar's one value), or Prometheus' answer when it is not a scalar or vector.
    pub fn query(&self, promql: &str) -> Result<Vec<f64>, String> {
        let mut headers = vec![("Content-Type", "application/x-www-form-urlencoded")];
        if let Some(h) = &self.auth_header {
            headers.push(("Authorization", h));
        }
        let body = format!("query={}", percent_encode(promql));
        let response = http_send(
            "POST",
            &format!("{}/api/v1/query", self.url),
            &headers,
            &body,
        )
        .map_err(|e| format!("POST /api/v1/query: {e}"))?;
        let json: serde_json::Value = serde_json::from_str(&response.body)
            .map_err(|e| format!("HTTP {}: {e}: {}", response.status, response.body))?;
        let data = &json["data"];
        let value = |pair: &serde_json::Value| -> Result<f64, String> {
            match pair[1].as_str() {
                Some("NaN") => Ok(f64::NAN),
                Some("+Inf") => Ok(f64::INFINITY),
                Some("-Inf") => Ok(f64::NEG_INFINITY),
                Some(s) => s.parse().map_err(|_| format!("bad value in {json}")),
                None => Err(format!("no value in {json}")),
            }
        };
        match (json["status"].as_str(), data["resultType"].as_str()) {
            (Some("success"), Some("scalar")) => Ok(vec![value(&data["result"])?]),
            (Some("success"), Some("vector")) => data["result"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| value(&s["value"]))
                .collect(),
            _ => Err(format!("HTTP {}: {}", response.status, response.body)),
        }
    }

    /// Waits until `pred` holds for `promql`'s values (see [`Prometheus::query`]) and returns
    /// them; fails after `within`, showing the last answer.
    #[track_caller]
    pub fn wait_for_value(
        &self,
        promql: &str,
        pred: impl Fn(&[f64]) -> bool,
        within: Duration,
    ) -> Vec<f64> {
        let end = Instant::now() + within;
        loop {
            let answer = self.query(promql);
            if let Ok(values) = &answer
                && pred(values)
            {
                return values.clone();
            }
            assert!(
                Instant::now() < end,
                "{promql:?} did not reach the expected value within {within:?}; last answer: \
                 {answer:?}; Prometheus output:\n{}",
                self.proc.output()
            );
            std::thread::sleep(POLL);
        }
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters, for a form value.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char
            } else {
                '='
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::http_get;

    #[test]
    fn the_exporter_serves_what_was_set_in_text_format() {
        let e = Exporter::start();
        e.set("http_requests_error_ratio", &[("app", "web")], 0.01);
        e.set("http_requests_error_ratio", &[("app", "api")], f64::NAN);
        e.set("queue_depth", &[], f64::INFINITY);
        e.set("odd", &[("b", "x\"y\\z\nw"), ("a", "1")], -1e-9);
        let page = http_get(&e.url());
        assert_eq!(
            page,
            "# TYPE http_requests_error_ratio gauge\n\
             http_requests_error_ratio{app=\"api\"} NaN\n\
             http_requests_error_ratio{app=\"web\"} 0.01\n\
             # TYPE odd gauge\n\
             odd{a=\"1\",b=\"x\\\"y\\\\z\\nw\"} -1e-9\n\
             # TYPE queue_depth gauge\n\
             queue_depth +Inf\n"
        );
        assert_eq!(e.scrapes(), 1);
        e.set("queue_depth", &[], 3.0);
        e.remove("odd", &[("a", "1"), ("b", "x\"y\\z\nw")]);
        assert!(http_get(&e.url()).ends_with("queue_depth 3.0\n"));
        assert!(!e.render().contains("odd"));
        assert_eq!(
            http_get(&format!("http://{}/other", e.target())),
            "not found\n"
        );
    }

    #[test]
    fn encoders() {
        assert_eq!(percent_encode("up{a=\"b c\"}"), "up%7Ba%3D%22b%20c%22%7D");
        assert_eq!(base64(b"reader:pw"), "cmVhZGVyOnB3");
        assert_eq!(base64(b"fo"), "Zm8=");
    }
}
