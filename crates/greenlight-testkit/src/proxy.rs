//! A TCP proxy that can partition its clients from their server: [`TcpProxy`] listens on
//! `127.0.0.1:0` and forwards each connection to a target, bytes as they come, both ways (TLS
//! passes through untouched: the client still talks to the target's certificate).
//!
//! [`TcpProxy::cut`] is a network partition, not a refusal: connections stay open (no FIN, no
//! RST), new connections are still accepted (and connected to the target), but no byte is
//! delivered in either direction: what arrives is held (one read's worth in the proxy, the rest
//! in the kernel's buffers) until [`TcpProxy::heal`], which delivers what was held, in order, and
//! resumes. So a client sees what a partition looks like from its side: requests that are never
//! answered, connections that never finish their handshake. Everything stops when the proxy is
//! dropped.
//!
//! Over plain HTTP/1.1 it also keeps the request lines clients sent ([`TcpProxy::requests`]:
//! `GET /api/v1/applications?fields=…`), so a test can count what a client asked for.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

struct Shared {
    target: SocketAddr,
    /// `true` while cut.
    cut: Mutex<bool>,
    healed: Condvar,
    stop: AtomicBool,
    /// Every stream opened, to shut them down when the proxy is dropped.
    streams: Mutex<Vec<TcpStream>>,
    connections: AtomicU64,
    /// Bytes delivered (to either side) since the last cut began.
    delivered_since_cut: AtomicU64,
    /// The request lines clients sent (`METHOD target`), in order of arrival.
    requests: Mutex<Vec<String>>,
}

/// A proxy from a loopback port to `target`; see the module docs.
pub struct TcpProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<std::thread::JoinHandle<()>>,
}

impl TcpProxy {
    /// Listens on `127.0.0.1:0` and forwards to `target`.
    #[track_caller]
    pub fn start(target: SocketAddr) -> TcpProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let shared = Arc::new(Shared {
            target,
            cut: Mutex::new(false),
            healed: Condvar::new(),
            stop: AtomicBool::new(false),
            streams: Mutex::new(Vec::new()),
            connections: AtomicU64::new(0),
            delivered_since_cut: AtomicU64::new(0),
            requests: Mutex::new(Vec::new()),
        });
        let s = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("tcp-proxy-accept".into())
            .spawn(move || accept(listener, s))
            .expect("spawn the proxy");
        TcpProxy {
            addr,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:<port>`.
    pub fn https_url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Stops delivering bytes both ways; connections stay open.
    pub fn cut(&self) {
        let mut cut = self.shared.cut.lock().unwrap_or_else(|e| e.into_inner());
        *cut = true;
        self.shared.delivered_since_cut.store(0, Ordering::SeqCst);
    }

    /// Delivers what was held and resumes forwarding.
    pub fn heal(&self) {
        let mut cut = self.shared.cut.lock().unwrap_or_else(|e| e.into_inner());
        *cut = false;
        self.shared.healed.notify_all();
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// The request lines clients have sent so far over plain HTTP/1.x, as `METHOD target`
    /// (a line of a request body that looks like one is counted too: for GETs, there is none).
    pub fn requests(&self) -> Vec<String> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Bytes delivered to either side since the last [`TcpProxy::cut`] (0 while it holds).
    pub fn delivered_since_cut(&self) -> u64 {
        self.shared.delivered_since_cut.load(Ordering::SeqCst)
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.heal();
        for s in self
            .shared
            .streams
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = s.shutdown(Shutdown::Both);
        }
        // Wake the acceptor with a connection of our own.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

fn accept(listener: TcpListener, shared: Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        shared.connections.fetch_add(1, Ordering::SeqCst);
        let Ok(server) = TcpStream::connect(shared.target) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let pair = (
            client.try_clone(),
            server.try_clone(),
            server.try_clone(),
            client.try_clone(),
        );
        let (Ok(c_read), Ok(s_write), Ok(s_read), Ok(c_write)) = pair else {
            continue;
        };
        {
            let mut streams = shared.streams.lock().unwrap_or_else(|e| e.into_inner());
            if shared.stop.load(Ordering::SeqCst) {
                return;
            }
            streams.push(client);
            streams.push(server);
        }
        for (from, to, from_client) in [(c_read, s_write, true), (s_read, c_write, false)] {
            let s = shared.clone();
            let _ = std::thread::Builder::new()
                .name("tcp-proxy-pipe".into())
                .spawn(move || pipe(from, to, s, from_client));
        }
    }
}

/// Copies `from` to `to`, holding each read while the proxy is cut; from a client, the request
/// lines are kept.
fn pipe(mut from: TcpStream, mut to: TcpStream, shared: Arc<Shared>, from_client: bool) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut line: Vec<u8> = Vec::new();
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if from_client {
            for &b in &buf[..n] {
                if b != b'\n' {
                    // A request line is short; a longer line is a body's, and not kept whole.
                    if line.len() < 8192 {
                        line.push(b);
                    }
                    continue;
                }
                if let Some(request) = request_line(&line) {
                    shared
                        .requests
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(request);
                }
                line.clear();
            }
        }
        {
            let mut cut = shared.cut.lock().unwrap_or_else(|e| e.into_inner());
            while *cut && !shared.stop.load(Ordering::SeqCst) {
                cut = shared.healed.wait(cut).unwrap_or_else(|e| e.into_inner());
            }
            if shared.stop.load(Ordering::SeqCst) {
                break;
            }
            // Counted under the lock: a cut that begins now sees these bytes as before it.
            shared
                .delivered_since_cut
                .fetch_add(n as u64, Ordering::SeqCst);
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// `METHOD target` of an HTTP/1.x request line (`GET /x HTTP/1.1\r`), else `None`.
fn request_line(line: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(line).ok()?.strip_suffix('\r')?;
    let mut parts = text.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    let is_method = !method.is_empty() && method.bytes().all(|b| b.is_ascii_uppercase());
    (is_method
        && target.starts_with('/')
        && version.starts_with("HTTP/1.")
        && parts.next().is_none())
    .then(|| format!("{method} {target}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// An echo server on a loopback port.
    fn echo() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut c) = c else { return };
                std::thread::spawn(move || {
                    let mut w = c.try_clone().unwrap();
                    let _ = std::io::copy(&mut c, &mut w);
                });
            }
        });
        addr
    }

    fn read_exact_within(
        s: &mut TcpStream,
        n: usize,
        within: Duration,
    ) -> std::io::Result<Vec<u8>> {
        s.set_read_timeout(Some(within))?;
        let mut buf = vec![0; n];
        s.read_exact(&mut buf)?;
        Ok(buf)
    }

    #[test]
    fn keeps_the_request_lines_clients_send_and_nothing_else() {
        let proxy = TcpProxy::start(echo());
        let mut c = TcpStream::connect(proxy.addr()).unwrap();
        let sent = "GET /api/v1/applications?fields=a HTTP/1.1\r\nhost: x\r\n\r\nGET /api/v1/applications/web HTTP/1.1\r\n\r\nnot a request\r\nPOST x HTTP/1.1\r\n";
        c.write_all(sent.as_bytes()).unwrap();
        // Echoed back: the server's bytes are never taken for requests.
        read_exact_within(&mut c, sent.len(), Duration::from_secs(10)).unwrap();
        assert_eq!(
            proxy.requests(),
            vec![
                "GET /api/v1/applications?fields=a".to_string(),
                "GET /api/v1/applications/web".to_string(),
            ]
        );
    }

    #[test]
    fn forwards_holds_while_cut_and_delivers_after_heal() {
        let proxy = TcpProxy::start(echo());
        let mut c = TcpStream::connect(proxy.addr()).unwrap();
        c.write_all(b"ping").unwrap();
        assert_eq!(
            read_exact_within(&mut c, 4, Duration::from_secs(10)).unwrap(),
            b"ping"
        );

        proxy.cut();
        c.write_all(b"held").unwrap();
        let start = Instant::now();
        let err = read_exact_within(&mut c, 4, Duration::from_millis(500)).unwrap_err();
        assert!(
            matches!(
                err.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "the connection stays open, silent: {err:?} after {:?}",
            start.elapsed()
        );
        assert_eq!(proxy.delivered_since_cut(), 0);
        // A new connection is accepted but gets nothing through either.
        let mut c2 = TcpStream::connect(proxy.addr()).unwrap();
        c2.write_all(b"new").unwrap();
        assert!(read_exact_within(&mut c2, 3, Duration::from_millis(300)).is_err());

        proxy.heal();
        assert_eq!(
            read_exact_within(&mut c, 4, Duration::from_secs(10)).unwrap(),
            b"held"
        );
        assert_eq!(
            read_exact_within(&mut c2, 3, Duration::from_secs(10)).unwrap(),
            b"new"
        );
        assert_eq!(proxy.connections(), 2);
    }
}
