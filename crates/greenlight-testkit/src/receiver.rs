//! [`Receiver`]: a real HTTP/1.1 server on 127.0.0.1 that records every request (method,
//! path, headers, body) and answers each path as the test scripts it: a status, or no answer
//! at all (a receiver that hangs). Tests wait on what it received with a bounded deadline,
//! woken by each request, never by a fixed sleep.

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How a path answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// This status, with the body `ok`.
    Status(u16),
    /// This status with a `Retry-After` of so many seconds (a rate limit, as Slack answers).
    RetryAfter(u16, u64),
    /// Read the request, then never answer (the connection stays open until the receiver is
    /// dropped).
    Hang,
}

/// One request as received.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Names lowercased, in the order sent.
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// How it was answered.
    pub answer: Answer,
    /// When it arrived.
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| {
            panic!(
                "{} {}: not JSON ({e}): {}",
                self.method, self.path, self.body
            )
        })
    }
}

#[derive(Default)]
struct Script {
    /// Answers used once each, in order, before the path's default.
    queued: BTreeMap<String, VecDeque<Answer>>,
    defaults: BTreeMap<String, Answer>,
}

#[derive(Default)]
struct Shared {
    received: Mutex<Vec<Received>>,
    arrived: Condvar,
    script: Mutex<Script>,
    stop: AtomicBool,
}

pub struct Receiver {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    /// Every path answers 200 until scripted otherwise.
    pub fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a receiver");
        let addr = listener.local_addr().expect("the receiver's address");
        let shared = Arc::new(Shared::default());
        let thread = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if shared.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let shared = shared.clone();
                    std::thread::spawn(move || serve(conn, &shared));
                }
            })
        };
        Receiver {
            addr,
            shared,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// From now on `path` answers `answer` (after what is queued for it).
    pub fn answer(&self, path: &str, answer: Answer) -> &Receiver {
        self.script().defaults.insert(path.to_string(), answer);
        self
    }

    /// The next requests to `path` answer `answers`, one each, then its default.
    pub fn queue(&self, path: &str, answers: &[Answer]) -> &Receiver {
        self.script()
            .queued
            .entry(path.to_string())
            .or_default()
            .extend(answers.iter().copied());
        self
    }

    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.shared
            .script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// What `path` received so far, in order.
    pub fn received(&self, path: &str) -> Vec<Received> {
        self.shared
            .received
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }

    /// Waits until what `path` received satisfies `done`, at most `within`; panics naming what
    /// arrived otherwise.
    #[track_caller]
    pub fn wait(
        &self,
        path: &str,
        within: Duration,
        done: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        let until = Instant::now() + within;
        let mut all = self
            .shared
            .received
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        loop {
            let here: Vec<Received> = all.iter().filter(|r| r.path == path).cloned().collect();
            if done(&here) {
                return here;
            }
            let now = Instant::now();
            if now >= until {
                let bodies: Vec<&str> = here.iter().map(|r| r.body.as_str()).collect();
                panic!(
                    "{path} did not receive what was awaited within {within:?}; it received {bodies:#?}"
                );
            }
            all = self
                .shared
                .arrived
                .wait_timeout(all, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One connection: one request, answered as scripted, then closed (`Connection: close`).
fn serve(conn: TcpStream, shared: &Shared) {
    let Ok(reader) = conn.try_clone() else { return };
    let mut reader = BufReader::new(reader);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line == "\r\n" => break,
            Ok(_) => {
                if let Some((k, v)) = line.split_once(':') {
                    headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                }
            }
        }
    }
    let length = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let answer = {
        let mut script = shared.script.lock().unwrap_or_else(PoisonError::into_inner);
        let queued = script.queued.get_mut(&path).and_then(VecDeque::pop_front);
        queued.unwrap_or_else(|| {
            script
                .defaults
                .get(&path)
                .copied()
                .unwrap_or(Answer::Status(200))
        })
    };
    {
        let mut all = shared
            .received
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        all.push(Received {
            method,
            path,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
            answer,
            at: Instant::now(),
        });
        shared.arrived.notify_all();
    }
    let mut conn = conn;
    match answer {
        Answer::Status(code) => {
            let _ = conn.write_all(
                format!("HTTP/1.1 {code} X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                    .as_bytes(),
            );
        }
        Answer::RetryAfter(code, secs) => {
            let _ = conn.write_all(
                format!(
                    "HTTP/1.1 {code} X\r\nRetry-After: {secs}\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                )
                .as_bytes(),
            );
        }
        Answer::Hang => {
            // Held open, silent, until the receiver goes.
            while !shared.stop.load(Ordering::SeqCst) {
                std::thread::park_timeout(Duration::from_millis(100));
            }
        }
    }
}
