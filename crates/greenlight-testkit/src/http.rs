//! Small blocking HTTP/1.1 requests over a plain TCP connection to a local server, for tests
//! that are not async: one request per connection (`Connection: close`), chunked bodies
//! decoded, a read timeout so a silent server cannot hang a test; and [`SilentServer`], a server
//! that never answers, for tests of a client's timeout.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How long a request waits for the server before giving up.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// A response: status code, headers as sent (names lowercased), body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `method` to `url` (`http://host:port/path?query`) with `headers` and no body.
pub fn http_request(method: &str, url: &str, headers: &[(&str, &str)]) -> io::Result<Response> {
    http_send(method, url, headers, "")
}

/// POSTs `json` to `url` as `application/json`.
pub fn http_post_json(url: &str, json: &str) -> io::Result<Response> {
    http_send("POST", url, &[("Content-Type", "application/json")], json)
}

/// Sends `method` to `url` with `headers` and `body` (no body when empty).
pub fn http_send(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> io::Result<Response> {
    let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| invalid(format!("not an http:// URL: {url}")))?;
    let (host, path) = match rest.split_once('/') {
        Some((h, p)) => (h, format!("/{p}")),
        None => (rest, "/".to_owned()),
    };
    let mut stream = TcpStream::connect(host)?;
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    stream.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;

    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| invalid(format!("no end of headers from {url}")))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let body = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| invalid(format!("bad status line from {url}: {status_line:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(body).ok_or_else(|| invalid(format!("bad chunked body from {url}")))?
    } else {
        body.to_vec()
    };
    Ok(Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Decodes a complete chunked body; `None` when it is cut short or malformed.
fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let nl = rest.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&rest[..nl]).ok()?;
        let size = size.split(';').next()?.trim();
        let n = usize::from_str_radix(size, 16).ok()?;
        rest = &rest[nl + 2..];
        if n == 0 {
            return Some(out);
        }
        out.extend_from_slice(rest.get(..n)?);
        rest = rest.get(n..)?.strip_prefix(b"\r\n")?;
    }
}

/// The body of a GET, or an empty string when there is no (well-formed) answer: for polls that
/// go on until the server answers what they wait for.
pub fn http_get(url: &str) -> String {
    http_request("GET", url, &[]).map_or_else(|_| String::new(), |r| r.body)
}

/// The body of a POST with no body, or an empty string when there is no (well-formed) answer.
pub fn http_post(url: &str) -> String {
    http_request("POST", url, &[]).map_or_else(|_| String::new(), |r| r.body)
}

/// A server on 127.0.0.1 that accepts connections, reads each request's head and never
/// answers: what a client's timeout is tested against. Each connection is held open until the
/// server is dropped, so the client sees silence rather than a close.
pub struct SilentServer {
    addr: std::net::SocketAddr,
    requests: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SilentServer {
    pub fn start() -> SilentServer {
        use std::io::BufRead;
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().unwrap();
        let requests: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
        let stop: std::sync::Arc<std::sync::atomic::AtomicBool> = Default::default();
        let thread = {
            let (requests, stop) = (requests.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let requests = requests.clone();
                    let reader = conn.try_clone();
                    held.push(conn);
                    let Ok(reader) = reader else { continue };
                    std::thread::spawn(move || {
                        let mut reader = std::io::BufReader::new(reader);
                        let mut head = String::new();
                        loop {
                            let mut line = String::new();
                            match reader.read_line(&mut line) {
                                Ok(0) | Err(_) => break,
                                Ok(_) if line == "\r\n" => break,
                                Ok(_) => head.push_str(&line),
                            }
                        }
                        if !head.is_empty() {
                            requests
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .push(head);
                        }
                    });
                }
            })
        };
        SilentServer {
            addr,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The head (request line and headers) of every request received so far.
    pub fn requests(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl Drop for SilentServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;

    /// Serves one connection: returns the request head it read; answers `reply` verbatim.
    fn serve_once(reply: &'static [u8]) -> (String, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut head = String::new();
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line == "\r\n" || line.is_empty() {
                    break;
                }
                head.push_str(&line);
            }
            conn.write_all(reply).unwrap();
            head
        });
        (url, handle)
    }

    #[test]
    fn a_plain_response_with_status_headers_and_body() {
        let (url, server) = serve_once(
            b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{\"error\":\"no\"}\n",
        );
        let r = http_request(
            "GET",
            &format!("{url}/api/v1/x?y=1"),
            &[("Authorization", "Bearer t")],
        )
        .unwrap();
        assert_eq!(r.status, 401);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.body, "{\"error\":\"no\"}\n");
        let head = server.join().unwrap();
        assert!(head.starts_with("GET /api/v1/x?y=1 HTTP/1.1\r\n"), "{head}");
        assert!(head.contains("Authorization: Bearer t\r\n"), "{head}");
    }

    #[test]
    fn a_chunked_body_is_decoded_across_a_split_character() {
        // "é" is two bytes, split between the chunks.
        let (url, server) = serve_once(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab\xc3\r\n2\r\n\xa9!\r\n0\r\n\r\n",
        );
        assert_eq!(http_post(&url), "ab\u{e9}!");
        assert!(server.join().unwrap().starts_with("POST / HTTP/1.1"));
    }

    #[test]
    fn no_server_is_an_error_and_an_empty_body_for_polls() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        drop(listener);
        assert!(http_request("GET", &url, &[]).is_err());
        assert_eq!(http_get(&url), "");
        assert!(http_request("GET", "https://127.0.0.1:1/", &[]).is_err());
    }

    #[test]
    fn a_silent_server_records_the_request_and_never_answers() {
        let server = SilentServer::start();
        let mut conn = TcpStream::connect(server.url().trim_start_matches("http://")).unwrap();
        conn.write_all(b"GET /api?q=1 HTTP/1.1\r\nX-Tenant: a\r\n\r\n")
            .unwrap();
        conn.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let err = conn.read(&mut [0; 16]).expect_err("no answer comes");
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "{err:?}"
        );
        let end = std::time::Instant::now() + Duration::from_secs(20);
        while server.requests().is_empty() && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        let heads = server.requests();
        assert_eq!(heads, ["GET /api?q=1 HTTP/1.1\r\nX-Tenant: a\r\n"]);
    }
}
