//! A git smart-HTTP remote on 127.0.0.1 that demands credentials: `git http-backend` run as
//! a CGI program behind a small HTTP/1.1 front. The front answers 401 with a Basic challenge
//! to every request whose `Authorization` header is not the one it was told to accept, records
//! what each request carried, and, while it serves, looks at every process's command line for
//! secrets that must never be there.
//!
//! One request per connection (`Connection: close`), served one at a time: git's smart-HTTP
//! fetch and clone ask one request after another. Request bodies may be sent with a
//! `Content-Length` or chunked; `Content-Encoding` and `Git-Protocol` reach the backend as
//! the CGI variables it reads.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::git::isolate;

/// How long the server waits for a client's next bytes before dropping the connection.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// One request the server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// `GET` or `POST`.
    pub method: String,
    /// The request target: path and query.
    pub target: String,
    /// The `Authorization` header as sent, if any.
    pub authorization: Option<String>,
    /// The status the server answered.
    pub status: u16,
}

/// What the server saw.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// Every request, in order.
    pub requests: Vec<Served>,
    /// Command lines of processes that held a watched secret while a request was served.
    pub leaking_cmdlines: Vec<String>,
}

/// The server; it stops when dropped.
pub struct GitHttpServer {
    port: u16,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl GitHttpServer {
    /// Serves the repositories under `project_root` (`/<name>.git` is
    /// `project_root/<name>.git`) to requests whose `Authorization` header is exactly
    /// `authorization` (e.g. `Basic dG9rOg==`). While serving each request it looks for
    /// `watched_secrets` in every process's command line.
    pub fn start(
        project_root: &Path,
        authorization: &str,
        watched_secrets: Vec<String>,
    ) -> GitHttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local address").port();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (seen, stop) = (seen.clone(), stop.clone());
            let root = project_root.to_path_buf();
            let authorization = authorization.to_owned();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        let front = Front {
                            root: &root,
                            authorization: &authorization,
                            watched: &watched_secrets,
                            seen: &seen,
                        };
                        // A client that hangs up mid-request is its own failure to report.
                        let _ = front.serve(stream);
                    }
                }
            })
        };
        GitHttpServer {
            port,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    /// The URL of `path` (e.g. `origin.git`) with `userinfo` (e.g. `tok@`, or empty) before
    /// the host.
    pub fn url(&self, userinfo: &str, path: &str) -> String {
        format!("http://{userinfo}127.0.0.1:{}/{path}", self.port)
    }

    /// What the server saw so far.
    pub fn seen(&self) -> Seen {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for GitHttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Front<'a> {
    root: &'a PathBuf,
    authorization: &'a str,
    watched: &'a [String],
    seen: &'a Mutex<Seen>,
}

/// A request as read from the connection.
struct Request {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

impl Front<'_> {
    fn serve(&self, stream: TcpStream) -> io::Result<()> {
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        let mut out = stream.try_clone()?;
        let mut reader = BufReader::new(stream);
        let request = read_request(&mut reader, &mut out)?;
        // git (its remote helper, and whatever it started) is alive now.
        let leaks = cmdlines_containing(self.watched);
        let authorization = request.header("authorization").map(str::to_owned);
        let (status, head, body) = if authorization.as_deref() == Some(self.authorization) {
            self.backend(&request)?
        } else {
            (
                401,
                vec!["WWW-Authenticate: Basic realm=\"x\"".to_owned()],
                Vec::new(),
            )
        };
        {
            let mut seen = self.seen.lock().unwrap();
            seen.leaking_cmdlines.extend(leaks);
            seen.requests.push(Served {
                method: request.method.clone(),
                target: request.target.clone(),
                authorization,
                status,
            });
        }
        let mut response = format!("HTTP/1.1 {status} {}\r\n", reason(status));
        for line in head {
            response.push_str(&line);
            response.push_str("\r\n");
        }
        response.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        ));
        out.write_all(response.as_bytes())?;
        out.write_all(&body)?;
        out.flush()
    }

    /// Runs `git http-backend` for the request; returns the status, the header lines to send
    /// (`Status:` taken out) and the body.
    fn backend(&self, request: &Request) -> io::Result<(u16, Vec<String>, Vec<u8>)> {
        let (path, query) = request
            .target
            .split_once('?')
            .unwrap_or((request.target.as_str(), ""));
        let mut cmd = Command::new("git");
        isolate(&mut cmd);
        cmd.arg("http-backend")
            .env("GIT_PROJECT_ROOT", self.root)
            .env("GIT_HTTP_EXPORT_ALL", "1")
            .env("REQUEST_METHOD", &request.method)
            .env("PATH_INFO", path)
            .env("QUERY_STRING", query)
            .env("CONTENT_LENGTH", request.body.len().to_string())
            .env("REMOTE_ADDR", "127.0.0.1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (header, variable) in [
            ("content-type", "CONTENT_TYPE"),
            ("content-encoding", "HTTP_CONTENT_ENCODING"),
            ("git-protocol", "HTTP_GIT_PROTOCOL"),
        ] {
            if let Some(value) = request.header(header) {
                cmd.env(variable, value);
            }
        }
        let mut child = cmd.spawn()?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let body = request.body.clone();
        // Written from another thread, so a backend that answers before reading all of its
        // input cannot deadlock with us.
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&body);
        });
        let output = child.wait_with_output()?;
        let _ = writer.join();
        if !output.status.success() && output.stdout.is_empty() {
            return Ok((
                500,
                Vec::new(),
                format!(
                    "git http-backend failed: {}",
                    String::from_utf8_lossy(&output.stderr)
                )
                .into_bytes(),
            ));
        }
        let raw = output.stdout;
        let (head_len, sep_len) = match raw.windows(4).position(|w| w == b"\r\n\r\n") {
            Some(i) => (i, 4),
            None => match raw.windows(2).position(|w| w == b"\n\n") {
                Some(i) => (i, 2),
                None => (raw.len(), 0),
            },
        };
        let head = String::from_utf8_lossy(&raw[..head_len]).into_owned();
        let mut status = 200;
        let mut lines = Vec::new();
        for line in head.lines().map(|l| l.trim_end_matches('\r')) {
            match line.split_once(':') {
                Some((name, value)) if name.eq_ignore_ascii_case("status") => {
                    status = value
                        .trim()
                        .split(' ')
                        .next()
                        .and_then(|code| code.parse().ok())
                        .unwrap_or(500);
                }
                Some(_) => lines.push(line.to_owned()),
                None => {}
            }
        }
        Ok((status, lines, raw[head_len + sep_len..].to_vec()))
    }
}

/// Reads one request: its line, headers and body (by `Content-Length`, or chunked).
fn read_request(reader: &mut impl BufRead, out: &mut impl Write) -> io::Result<Request> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().ok_or_else(|| bad("no method"))?.to_owned();
    let target = parts.next().ok_or_else(|| bad("no target"))?.to_owned();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(bad("end of input inside the headers"));
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
    let mut request = Request {
        method,
        target,
        headers,
        body: Vec::new(),
    };
    if request
        .header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        out.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    if request
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| bad("a chunk size is not hexadecimal"))?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            request.body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = request.header("content-length") {
        let length = length
            .parse()
            .map_err(|_| bad("Content-Length is not a number"))?;
        request.body = vec![0; length];
        reader.read_exact(&mut request.body)?;
    }
    Ok(request)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        _ => "Status",
    }
}

/// Command lines (arguments joined by spaces) of the processes whose command line holds one of
/// `secrets`.
pub fn cmdlines_containing(secrets: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    if secrets.is_empty() {
        return found;
    }
    for entry in std::fs::read_dir("/proc")
        .expect("/proc lists the processes")
        .flatten()
    {
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if secrets.iter().any(|s| cmdline.contains(s.as_str())) {
            found.push(cmdline);
        }
    }
    found
}
