//! HTTPS for the sandbox (`--tls-cert`/`--tls-key`), as argocd-server serves its API: rustls
//! (ring) over the same listener. Handshakes run in tasks of their own, so a client that never
//! finishes one (or refuses the certificate, as a client that does not trust its CA does) holds
//! up no other connection.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::SandboxError;

/// How long a client may take to complete its handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// The server's TLS configuration from a PEM certificate chain and its PEM private key; a file
/// that cannot be read or used is a configuration error naming its flag and path.
pub(crate) fn server_config(
    cert: &Path,
    key: &Path,
) -> Result<Arc<rustls::ServerConfig>, SandboxError> {
    let bad = |flag: &'static str, path: &Path, why: String| {
        SandboxError::config(flag, format!("{}: {why}", path.display()))
    };
    let pem =
        std::fs::read(cert).map_err(|e| bad("--tls-cert", cert, format!("cannot read it: {e}")))?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            bad(
                "--tls-cert",
                cert,
                format!("not a PEM certificate chain: {e}"),
            )
        })?;
    if chain.is_empty() {
        return Err(bad("--tls-cert", cert, "holds no PEM certificate".into()));
    }
    let pem =
        std::fs::read(key).map_err(|e| bad("--tls-key", key, format!("cannot read it: {e}")))?;
    let private = PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| bad("--tls-key", key, format!("no PEM private key in it: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SandboxError::Runtime(format!("TLS: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| {
            bad(
                "--tls-key",
                key,
                format!("cannot serve it with --tls-cert: {e}"),
            )
        })?;
    // axum serves HTTP/1.1 here.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A TCP listener whose connections are handed on once their TLS handshake is done.
pub(crate) struct TlsListener {
    addr: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    acceptor: JoinHandle<()>,
}

impl TlsListener {
    pub(crate) fn new(
        listener: TcpListener,
        config: Arc<rustls::ServerConfig>,
    ) -> io::Result<TlsListener> {
        let addr = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        let tls = TlsAcceptor::from(config);
        let acceptor = tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    // Out of descriptors, or a connection reset before it was accepted.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let (tls, tx) = (tls.clone(), tx.clone());
                tokio::spawn(async move {
                    // A failed handshake (a client that does not trust the certificate) ends
                    // the connection; there is nothing to serve.
                    if let Ok(Ok(stream)) = tokio::time::timeout(HANDSHAKE, tls.accept(tcp)).await {
                        let _ = tx.send((stream, peer)).await;
                    }
                });
            }
        });
        Ok(TlsListener {
            addr,
            ready,
            acceptor,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The acceptor stopped: nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.addr)
    }
}
