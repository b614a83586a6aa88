//! Argo CD's REST API as the runtime's Application source: built at the edge, by the commands
//! that take `--argocd-url` (`watch`, `promote run`, the demos), and handed to the runtime as
//! a [`Source`]. What is true of Argo CD alone is said here, not in the runtime: the token
//! that real Argo CD would ignore, the stream's heartbeat against `--stale-after`, the name in
//! the lines about the stream.

use crate::runtime::seams::{AppSource, Source, StartupNote};
use anyhow::Result;
use greenlight_argocd::{CaBundle, ClientOptions};
use greenlight_core::directive::AppRef;
use greenlight_core::repo_url::RepoUrl;
use tokio::sync::mpsc;

/// How often Argo CD sends a heartbeat on a server-sent-events stream.
pub const HEARTBEAT_MS: i64 = 15_000;

/// [`greenlight_argocd::ArgoSource`], with what the runtime should hear about it at start.
pub struct ArgoCdSource {
    inner: greenlight_argocd::ArgoSource,
    /// A token was given that is not JWT-shaped (real Argo CD ignores it).
    token_not_jwt: bool,
}

/// The Argo CD API server at `url` (with `token`, the contents of `--argocd-token-file`) as
/// the source of `repo`'s Applications, refusing a listing larger than `max_listing_bytes`;
/// a URL or token it cannot use is a usage error naming `--argocd-url`.
pub fn source(
    url: &str,
    token: Option<String>,
    repo: &RepoUrl,
    max_listing_bytes: usize,
) -> Result<Source> {
    let options = greenlight_argocd::ClientOptions {
        max_listing_bytes,
        ..Default::default()
    };
    source_with(url, token, repo, options)
}

/// [`source`] with the client's options given whole (`--argocd-ca-file`'s CAs among them).
pub fn source_with(
    url: &str,
    token: Option<String>,
    repo: &RepoUrl,
    options: greenlight_argocd::ClientOptions,
) -> Result<Source> {
    let token_not_jwt = token
        .as_deref()
        .is_some_and(|t| !greenlight_argocd::looks_like_jwt(t));
    let argo = greenlight_argocd::ArgoClient::with_options(url, token, options)
        .map_err(|e| crate::usage(format!("--argocd-url: {e}")))?;
    let (tx, deliveries) = mpsc::channel(256);
    let inner = greenlight_argocd::ArgoSource::new(argo, repo.expose(), tx);
    Ok(Source {
        app: Box::new(ArgoCdSource {
            inner,
            token_not_jwt,
        }),
        deliveries,
    })
}

impl AppSource for ArgoCdSource {
    fn start_stream(&mut self) {
        self.inner.start_stream()
    }
    fn set_watched(&mut self, apps: Vec<AppRef>) {
        self.inner.set_watched(apps)
    }
    fn request_listing(&mut self, ticket: u64) {
        self.inner.request_listing(ticket)
    }
    fn request_read(&mut self, ticket: u64, apps: Vec<AppRef>) {
        self.inner.request_read(ticket, apps)
    }
    fn set_stale_after(&mut self, stale_after_ms: i64) {
        let ms = u64::try_from(stale_after_ms).unwrap_or(0);
        self.inner
            .set_stale_after(std::time::Duration::from_millis(ms))
    }
    fn name(&self) -> &str {
        "Argo CD"
    }
    fn startup_notes(&self, stale_after_ms: i64) -> Vec<StartupNote> {
        let mut notes = Vec::new();
        if self.token_not_jwt {
            notes.push(StartupNote::Warn(greenlight_argocd::NOT_A_JWT.to_string()));
        }
        if stale_after_ms < HEARTBEAT_MS {
            notes.push(StartupNote::Info(format!(
                "--stale-after {} is shorter than Argo CD's stream heartbeat ({}): between listings (every --fetch-interval) the stream cannot vouch for an app that does not change",
                greenlight_core::time::human_duration(stale_after_ms),
                greenlight_core::time::human_duration(HEARTBEAT_MS),
            )));
        }
        notes
    }
}

/// Where Argo CD is and how to reach it: `--argocd-url`, its token and `--argocd-ca-file`
/// read (the CLI's `ArgoCdArgs`).
#[derive(Clone)]
pub struct ArgoCd {
    pub url: String,
    pub token: Option<String>,
    /// `--argocd-ca-file`'s certificates.
    pub ca: Option<CaBundle>,
    /// `--read-limit-mib`, in bytes ([`ClientOptions::max_read_bytes`]).
    pub read_limit_bytes: usize,
}

impl ArgoCd {
    /// Argo CD's REST API as the runtime's source of `repo`'s Applications.
    pub fn source(&self, repo: &RepoUrl, max_listing_bytes: usize) -> Result<Source> {
        let options = ClientOptions {
            max_listing_bytes,
            ..self.client_options()
        };
        source_with(&self.url, self.token.clone(), repo, options)
    }

    /// A REST client of this Argo CD.
    pub fn client(&self) -> Result<greenlight_argocd::ArgoClient, greenlight_argocd::ArgoError> {
        greenlight_argocd::ArgoClient::with_options(
            &self.url,
            self.token.clone(),
            self.client_options(),
        )
    }

    /// The client's options: the defaults, the CAs of `--argocd-ca-file` and
    /// `--read-limit-mib`.
    pub fn client_options(&self) -> ClientOptions {
        ClientOptions {
            extra_roots: self.ca.clone(),
            max_read_bytes: self.read_limit_bytes,
            ..ClientOptions::default()
        }
    }
}
