//! A client for the part of Argo CD's REST API greenlight reads: list and get Applications, an
//! Application's resource tree, and the Application event stream. It owns the HTTP details
//! (URLs, the bearer token, timeouts, framing) and turns every failure into an error that says
//! which endpoint, what status and what Argo CD said. It must never put the token in a log, an
//! error or a Debug string, and never install a TLS crypto provider (the binary does that).

use crate::model::{self, Application, DecodeError, ResourceTree};
use futures_util::{Stream, StreamExt};
use greenlight_core::error_text::{chain, innermost};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The flag that sets [`ClientOptions::max_listing_bytes`], as errors name it.
pub const LISTING_LIMIT_FLAG: &str = "--listing-limit-mib";
/// The flag that sets [`ClientOptions::max_read_bytes`], as errors name it.
pub const READ_LIMIT_FLAG: &str = "--read-limit-mib";
/// The most of an error's body that is read: Argo CD's errors are a line of JSON.
const MAX_ERROR_BODY: usize = 64 << 10;
/// The most of a server's words an error quotes, in characters.
const MAX_QUOTED_CHARS: usize = 300;
/// How long a `429 Too Many Requests` holds further requests back when it says nothing
/// (`Retry-After` absent or unreadable).
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5);
/// The longest a `Retry-After` is honoured: a longer one is taken as this (a daemon that went
/// quiet for an hour on one bad header would be a worse failure).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// A single stream message larger than this is refused rather than buffered without end.
const MAX_STREAM_LINE: usize = 64 * 1024 * 1024;

/// Timeouts. The stream's body has none on purpose: Argo CD's plain stream sends nothing while
/// no Application changes, and that silence can last for hours.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Establishing the TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// A whole request/response for list, get and resource-tree; for the stream, until the
    /// response headers arrive.
    pub request_timeout: Duration,
    /// The most a listing's body may hold, after field selection; beyond it the listing fails
    /// with [`ArgoError::TooLarge`] rather than take the memory (a server that ignores the
    /// selection sends every Application whole).
    pub max_listing_bytes: usize,
    /// The most one other answer may hold — an Application, its resource tree, its managed
    /// resources, one resource: beyond it the read fails with [`ArgoError::TooLarge`] (the app
    /// unobserved, never absent) rather than take the memory (an Application with a million
    /// resources is most of a GiB).
    pub max_read_bytes: usize,
    /// Certificate authorities trusted besides the platform's roots (`--argocd-ca-file`).
    pub extra_roots: Option<CaBundle>,
}

/// The certificates of a PEM bundle, trusted for Argo CD's API server in addition to the
/// platform's roots (Argo CD's own certificate is self-signed unless an operator replaces it).
#[derive(Clone)]
pub struct CaBundle {
    certs: Vec<reqwest::Certificate>,
    /// Where the bundle was read, as errors name it (a path).
    origin: String,
}

impl fmt::Debug for CaBundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaBundle")
            .field("origin", &self.origin)
            .field("certificates", &self.certs.len())
            .finish()
    }
}

impl CaBundle {
    /// Every `CERTIFICATE` block of `pem`; none at all, or one that does not decode, is an error
    /// (in words, without the file's contents). `origin` is how errors name the bundle.
    pub fn from_pem(pem: &[u8], origin: &str) -> Result<CaBundle, String> {
        let blocks = String::from_utf8_lossy(pem)
            .matches("-----BEGIN CERTIFICATE-----")
            .count();
        if blocks == 0 {
            return Err(
                "it holds no PEM certificate (no \"-----BEGIN CERTIFICATE-----\" block)".into(),
            );
        }
        let certs = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| format!("its certificates cannot be read: {}", innermost(&e)))?;
        if certs.len() != blocks {
            return Err(format!(
                "{} of its {blocks} certificate block(s) could be read",
                certs.len()
            ));
        }
        Ok(CaBundle {
            certs,
            origin: origin.to_string(),
        })
    }

    /// How many certificates it holds.
    pub fn len(&self) -> usize {
        self.certs.len()
    }

    /// Never true: a bundle without a certificate is refused.
    pub fn is_empty(&self) -> bool {
        self.certs.is_empty()
    }

    /// Where it was read.
    pub fn origin(&self) -> &str {
        &self.origin
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_listing_bytes: 128 << 20,
            max_read_bytes: 64 << 20,
            extra_roots: None,
        }
    }
}

/// What greenlight asks a listing for (Argo CD's `fields=` selection, as its own UI lists
/// applications): each Application's name and namespace, and the status fields that show
/// whether a watched app changed since the stream delivered it (sync status, health, the last
/// operation's phase and times) — not the managed fields, inline Helm values, summaries or
/// resource lists that make a fleet's listing hundreds of megabytes. Argo CD's list selects
/// from a fixed set of item fields only (no resource version, no revisions, no history, no
/// conditions), so a watched app that changed is then read in full.
pub const LISTING_FIELDS: &[&str] = &[
    "items.metadata.name",
    "items.metadata.namespace",
    "items.status.sync.status",
    "items.status.health",
    "items.status.operationState.phase",
    "items.status.operationState.startedAt",
    "items.status.operationState.finishedAt",
];
/// What went wrong talking to Argo CD, and where. `endpoint` is the request URL, which never
/// carries credentials (a base URL with user info is refused).
#[derive(Debug, thiserror::Error)]
pub enum ArgoError {
    #[error("Argo CD URL {url:?} cannot be used: {why}")]
    Config { url: String, why: String },
    #[error("an Application name is required (got an empty name)")]
    EmptyName,
    #[error("Argo CD API token cannot be used: {why}")]
    Token { why: String },
    #[error("GET {endpoint}: {what}")]
    Transport { endpoint: String, what: String },
    /// The TLS handshake with Argo CD failed: `what` says why in words, `fix` what to give.
    #[error("GET {endpoint}: the TLS handshake failed: {what}; {fix}")]
    Tls {
        endpoint: String,
        what: String,
        fix: String,
    },
    #[error("GET {endpoint}: no response within {}", humantime::format_duration(*after))]
    Timeout { endpoint: String, after: Duration },
    #[error("GET {endpoint}: HTTP {status}{}{}{}", reason(*status), colon(message), hint(*status))]
    Status {
        endpoint: String,
        status: u16,
        message: String,
    },
    #[error("GET {endpoint}: unexpected response: at `{path}`: {message}")]
    Decode {
        endpoint: String,
        path: String,
        message: String,
    },
    #[error("GET {endpoint}: Argo CD reported an error in the stream: {message}")]
    Stream { endpoint: String, message: String },
    /// Argo CD answered `429 Too Many Requests`, or did so earlier and its `Retry-After` has not
    /// passed: nothing was asked.
    #[error("GET {endpoint}: Argo CD asked to be left alone for {}s (429 Too Many Requests, Retry-After); not asked again before then", retry_in.as_secs_f64().ceil() as u64)]
    RateLimited {
        endpoint: String,
        retry_in: Duration,
    },
    #[error("GET {endpoint}: the answer exceeds {} MiB{}; it was not read (raise {flag})", limit >> 20, if *flag == LISTING_LIMIT_FLAG { " even with only the fields greenlight reads" } else { "" })]
    TooLarge {
        endpoint: String,
        limit: usize,
        /// The flag that sets the limit ([`LISTING_LIMIT_FLAG`], [`READ_LIMIT_FLAG`]).
        flag: &'static str,
    },
    /// A `POST` that failed: `what` is worded as for a `GET` (transport, TLS, timeout, status,
    /// decoding); `status` and `message` are Argo CD's answer when it gave one.
    #[error("POST {endpoint}: {what}")]
    Post {
        endpoint: String,
        status: Option<u16>,
        message: String,
        what: String,
    },
}

fn colon(message: &str) -> String {
    if message.is_empty() {
        String::new()
    } else {
        format!(": {message}")
    }
}

fn reason(status: u16) -> String {
    StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .map(|r| format!(" {r}"))
        .unwrap_or_default()
}

fn hint(status: u16) -> &'static str {
    match status {
        401 => " (the API token is missing, expired or wrong)",
        // Argo CD answers 403 both when the token lacks RBAC access and, for non-admin
        // accounts, when the application does not exist.
        403 => " (the token lacks access, or the application does not exist)",
        _ => "",
    }
}

impl ArgoError {
    /// The HTTP status, when Argo CD answered with one.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            ArgoError::Status { status, .. } => Some(*status),
            ArgoError::RateLimited { .. } => Some(429),
            ArgoError::Post { status, .. } => *status,
            _ => None,
        }
    }

    /// Argo CD's own message, when it answered with an error status.
    pub fn argo_message(&self) -> Option<&str> {
        match self {
            ArgoError::Status { message, .. } => Some(message),
            ArgoError::Post {
                status: Some(_),
                message,
                ..
            } => Some(message),
            _ => None,
        }
    }

    /// The same failure, said of a `POST` to `endpoint`.
    fn into_post(self, endpoint: &str) -> ArgoError {
        let status = self.http_status();
        let message = self.argo_message().unwrap_or_default().to_string();
        let text = self.to_string();
        let what = text
            .strip_prefix(&format!("GET {endpoint}: "))
            .unwrap_or(&text)
            .to_string();
        ArgoError::Post {
            endpoint: endpoint.to_string(),
            status,
            message,
            what,
        }
    }
}

/// One list item that could not be decoded. The other items are still returned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("items[{index}]{}: {}", name.as_ref().map(|n| format!(" (application {n:?})")).unwrap_or_default(), item_path(*index, error))]
pub struct ItemError {
    pub index: usize,
    /// `metadata.name`, when even that much could be read.
    pub name: Option<String>,
    pub error: DecodeError,
}

fn item_path(index: usize, e: &DecodeError) -> String {
    if e.path == "." {
        e.message.clone()
    } else {
        format!("at `items[{index}].{}`: {}", e.path, e.message)
    }
}

/// What happened to an Application, as the stream reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
    /// A type this client does not know (kept, not dropped: the caller decides).
    Other(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct StreamEvent {
    pub kind: EventKind,
    pub application: Application,
}

/// What the stream delivers: an event, or a sign of life. Argo CD sends a `:` heartbeat every
/// 15 s on a server-sent-events stream, and nothing between events on a plain JSON one.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamItem {
    Event(Box<StreamEvent>),
    Heartbeat,
}

/// Kept apart so that no derive or format can show it.
#[derive(Clone)]
struct Token(String);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[derive(Clone, Debug)]
pub struct ArgoClient {
    base: Url,
    /// For list, get, resource-tree: a total timeout per request.
    http: reqwest::Client,
    /// For the stream: a connect timeout only.
    stream_http: reqwest::Client,
    token: Option<Token>,
    options: ClientOptions,
    /// After a `429 Too Many Requests`: no request is sent before this moment (its
    /// `Retry-After`); shared by the client's clones.
    hold: Arc<Mutex<Option<Instant>>>,
}

/// Argo CD reads a bearer token only when it has the shape of a JWT: three non-empty parts
/// separated by dots (`jwtutil.IsValid`). Any other token is ignored, and the answer is
/// `401 no session information`.
pub fn looks_like_jwt(token: &str) -> bool {
    let parts: Vec<&str> = token.trim().split('.').collect();
    parts.len() == 3 && parts.iter().all(|p| !p.is_empty())
}

/// The warning for a token that is not JWT-shaped; it never quotes the token.
pub const NOT_A_JWT: &str = "the Argo CD token is not JWT-shaped (three dot-separated parts): real Argo CD ignores such a bearer token and answers 401 \"no session information\"; use an account token from `argocd account generate-token`";

impl ArgoClient {
    /// `base_url` is where Argo CD's API server answers (`https://argocd.example.com`, or with a
    /// `--rootpath` prefix). `token` is sent as `Authorization: Bearer`.
    pub fn new(base_url: &str, token: Option<String>) -> Result<ArgoClient, ArgoError> {
        ArgoClient::with_options(base_url, token, ClientOptions::default())
    }

    pub fn with_options(
        base_url: &str,
        token: Option<String>,
        options: ClientOptions,
    ) -> Result<ArgoClient, ArgoError> {
        let base = parse_base(base_url)?;
        let token = token
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .map(Token);
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        if let Some(Token(t)) = &token {
            let mut v =
                HeaderValue::from_str(&format!("Bearer {t}")).map_err(|_| ArgoError::Token {
                    why: "it contains characters that cannot be sent in an HTTP header".into(),
                })?;
            v.set_sensitive(true);
            headers.insert(AUTHORIZATION, v);
        }
        // reqwest panics when it builds a client (even one only used for http://) without a
        // process-wide rustls crypto provider; the binary installs one at start. Say so instead.
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            return Err(ArgoError::Config {
                url: base.to_string(),
                why: "no TLS crypto provider is installed in this process (a bug in the program that embeds this client)".into(),
            });
        }
        let build = |total: Option<Duration>| {
            let mut b = reqwest::Client::builder()
                .default_headers(headers.clone())
                .connect_timeout(options.connect_timeout)
                // The stream has no body timeout; keepalive probes are what notice a peer that
                // vanished without closing the connection.
                .tcp_keepalive(Duration::from_secs(30));
            if let Some(t) = total {
                b = b.timeout(t);
            }
            if let Some(ca) = &options.extra_roots {
                b = b.tls_certs_merge(ca.certs.iter().cloned());
            }
            b.build().map_err(|e| ArgoError::Config {
                url: base.to_string(),
                why: chain(&e.without_url()),
            })
        };
        Ok(ArgoClient {
            http: build(Some(options.request_timeout))?,
            stream_http: build(None)?,
            base,
            token,
            options,
            hold: Arc::new(Mutex::new(None)),
        })
    }

    /// The base URL, as given (it never contains credentials).
    pub fn base_url(&self) -> &str {
        self.base.as_str()
    }

    /// `GET /api/v1/applications?fields=…`: every Application's name and namespace only
    /// ([`LISTING_FIELDS`]); read a watched one with [`ArgoClient::get`]. One item that does not
    /// decode is reported in its place and does not hide the others.
    pub async fn list(&self) -> Result<Vec<Result<Application, ItemError>>, ArgoError> {
        self.list_selecting(Some(LISTING_FIELDS)).await
    }

    /// `GET /api/v1/applications`: every Application whole (`greenlight audit`, which reads
    /// what Argo CD's fixed `fields` list cannot select: `status.sync.revision`, the history).
    pub async fn list_whole(&self) -> Result<Vec<Result<Application, ItemError>>, ArgoError> {
        self.list_selecting(None).await
    }

    async fn list_selecting(
        &self,
        fields: Option<&[&str]>,
    ) -> Result<Vec<Result<Application, ItemError>>, ArgoError> {
        let mut url = self.url(&["api", "v1", "applications"], None);
        if let Some(fields) = fields {
            url.query_pairs_mut()
                .append_pair("fields", &fields.join(","));
        }
        let endpoint = shown(&url);
        let response = self.send(&self.http, url).await?;
        let Some(response) = self.check(response, &endpoint).await? else {
            return Err(ArgoError::Status {
                endpoint,
                status: 404,
                message: "no applications API here".into(),
            });
        };
        let limit = (self.options.max_listing_bytes, LISTING_LIMIT_FLAG);
        let body = self.bounded_body(response, &endpoint, limit).await?;
        decode_items(&body).map_err(|e| decode_error(&endpoint, e))
    }

    /// The whole body, refused past `limit` bytes as it arrives (the limit and the flag that
    /// sets it, which the error names).
    async fn bounded_body(
        &self,
        mut response: reqwest::Response,
        endpoint: &str,
        (limit, flag): (usize, &'static str),
    ) -> Result<Vec<u8>, ArgoError> {
        if response.content_length().is_some_and(|n| n > limit as u64) {
            return Err(ArgoError::TooLarge {
                endpoint: endpoint.to_string(),
                limit,
                flag,
            });
        }
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > limit {
                        return Err(ArgoError::TooLarge {
                            endpoint: endpoint.to_string(),
                            limit,
                            flag,
                        });
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => return Ok(body),
                Err(e) if e.is_timeout() => {
                    return Err(ArgoError::Timeout {
                        endpoint: endpoint.to_string(),
                        after: self.options.request_timeout,
                    });
                }
                Err(e) => {
                    return Err(ArgoError::Transport {
                        endpoint: endpoint.to_string(),
                        what: chain(&e.without_url()),
                    });
                }
            }
        }
    }

    /// `GET /api/v1/applications/{name}?appNamespace=`; `None` when Argo CD says 404.
    pub async fn get(&self, namespace: &str, name: &str) -> Result<Option<Application>, ArgoError> {
        if name.is_empty() {
            return Err(ArgoError::EmptyName);
        }
        let url = self.url(&["api", "v1", "applications", name], Some(namespace));
        let endpoint = url.to_string();
        let found: Option<Application> = self.fetch_decoded(url).await?;
        // Argo CD answers the Application asked for. Anything else (`{}` from a broken proxy
        // decodes as an Application with no name) is not an observation of this app.
        if let Some(app) = &found
            && let Some(wrong) = not_the_app_asked_for(app, namespace, name)
        {
            return Err(ArgoError::Decode {
                endpoint,
                path: "metadata".into(),
                message: wrong,
            });
        }
        Ok(found)
    }

    /// `POST /api/v1/applications/{name}/sync` with `{"dryRun": true, "prune": true}`: asks Argo
    /// CD for a dry-run sync that prunes, to the app's target revision, and answers the
    /// Application with that operation set (Argo CD's controller runs it, and its result appears
    /// in `status.operationState`). `None` when Argo CD says 404. It can ask for nothing else: no
    /// sync this client requests ever applies or deletes anything.
    pub async fn request_dry_run_prune(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Application>, ArgoError> {
        if name.is_empty() {
            return Err(ArgoError::EmptyName);
        }
        let url = self.url(&["api", "v1", "applications", name, "sync"], None);
        let endpoint = url.to_string();
        // Argo CD's gateway maps the whole body onto ApplicationSyncRequest (`body: "*"`), so the
        // namespace goes in the body, not the query.
        let mut body = serde_json::json!({"name": name, "dryRun": true, "prune": true});
        if !namespace.is_empty() {
            body["appNamespace"] = serde_json::json!(namespace);
        }
        let request = self
            .http
            .post(url)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(body.to_string());
        let post = |e: ArgoError| e.into_post(&endpoint);
        let response = self
            .dispatch(request, endpoint.clone())
            .await
            .map_err(post)?;
        let Some(response) = self.check(response, &endpoint).await.map_err(post)? else {
            return Ok(None);
        };
        let limit = (self.options.max_read_bytes, READ_LIMIT_FLAG);
        let body = match tokio::time::timeout(
            self.options.request_timeout,
            self.bounded_body(response, &endpoint, limit),
        )
        .await
        {
            Ok(Ok(body)) => body,
            Ok(Err(e)) => return Err(post(e)),
            Err(_) => {
                return Err(post(ArgoError::Timeout {
                    endpoint: endpoint.clone(),
                    after: self.options.request_timeout,
                }));
            }
        };
        let text = String::from_utf8_lossy(&body);
        let app: Application =
            model::decode_str(&text).map_err(|e| post(decode_error(&endpoint, e)))?;
        if let Some(wrong) = not_the_app_asked_for(&app, namespace, name) {
            return Err(post(ArgoError::Decode {
                endpoint: endpoint.clone(),
                path: "metadata".into(),
                message: wrong,
            }));
        }
        Ok(Some(app))
    }

    /// `GET /api/v1/applications/{name}/managed-resources`; `None` when Argo CD says 404.
    pub async fn managed_resources(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<crate::model::ManagedResources>, ArgoError> {
        if name.is_empty() {
            return Err(ArgoError::EmptyName);
        }
        let url = self.url(
            &["api", "v1", "applications", name, "managed-resources"],
            Some(namespace),
        );
        self.fetch_decoded(url).await
    }

    /// `GET /api/v1/applications/{name}/resource-tree`; `None` when Argo CD says 404.
    pub async fn resource_tree(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ResourceTree>, ArgoError> {
        if name.is_empty() {
            return Err(ArgoError::EmptyName);
        }
        let url = self.url(
            &["api", "v1", "applications", name, "resource-tree"],
            Some(namespace),
        );
        self.fetch_decoded(url).await
    }

    /// `GET /api/v1/applications/{name}/resource?namespace=&resourceName=&version=&group=&kind=`:
    /// the live object of one node of the app's resource tree (`version` may be empty: Argo CD
    /// does not match it). `None` when Argo CD says 404 (the app, or a managed resource not
    /// created yet).
    pub async fn resource(
        &self,
        namespace: &str,
        name: &str,
        resource: &crate::model::ResourceRef,
        version: &str,
    ) -> Result<Option<serde_json::Value>, ArgoError> {
        if name.is_empty() || resource.name.is_empty() {
            return Err(ArgoError::EmptyName);
        }
        let mut url = self.url(
            &["api", "v1", "applications", name, "resource"],
            Some(namespace),
        );
        url.query_pairs_mut()
            .append_pair("namespace", &resource.namespace)
            .append_pair("resourceName", &resource.name)
            .append_pair("version", version)
            .append_pair("group", &resource.group)
            .append_pair("kind", &resource.kind);
        let endpoint = url.to_string();
        let Some(found) = self
            .fetch_decoded::<crate::model::ResourceManifest>(url)
            .await?
        else {
            return Ok(None);
        };
        model::decode_str(&found.manifest)
            .map(Some)
            .map_err(|e| decode_error(&endpoint, e))
    }

    /// `GET /api/v1/stream/applications` as server-sent events (`Accept: text/event-stream`, so
    /// that Argo CD sends heartbeats): every Application change, and every heartbeat, until the
    /// server closes the stream (the end of the returned Stream). An `{"error":…}` message or an
    /// undecodable line is an error item; the stream goes on after it. A broken connection is a
    /// last error item.
    pub async fn stream(
        &self,
    ) -> Result<impl Stream<Item = Result<StreamItem, ArgoError>> + Send + 'static, ArgoError> {
        let url = self.url(&["api", "v1", "stream", "applications"], None);
        let endpoint = url.to_string();
        let response = self
            .send_accepting(&self.stream_http, url, "text/event-stream")
            .await?;
        let response = self.check(response, &endpoint).await?;
        let Some(response) = response else {
            return Err(ArgoError::Status {
                endpoint,
                status: 404,
                message: "no stream API here".into(),
            });
        };
        Ok(ndjson(Box::pin(response.bytes_stream()), endpoint))
    }

    fn url(&self, segments: &[&str], namespace: Option<&str>) -> Url {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .expect("base URL was checked to be http(s)")
            .pop_if_empty()
            .extend(segments);
        if let Some(ns) = namespace.filter(|ns| !ns.is_empty()) {
            url.query_pairs_mut().append_pair("appNamespace", ns);
        }
        url
    }

    async fn send(
        &self,
        client: &reqwest::Client,
        url: Url,
    ) -> Result<reqwest::Response, ArgoError> {
        self.send_accepting(client, url, "application/json").await
    }

    async fn send_accepting(
        &self,
        client: &reqwest::Client,
        url: Url,
        accept: &'static str,
    ) -> Result<reqwest::Response, ArgoError> {
        let endpoint = shown(&url);
        let request = client
            .get(url)
            .header(ACCEPT, HeaderValue::from_static(accept));
        self.dispatch(request, endpoint).await
    }

    async fn dispatch(
        &self,
        request: reqwest::RequestBuilder,
        endpoint: String,
    ) -> Result<reqwest::Response, ArgoError> {
        // Held back by a 429's Retry-After: not sent, so a busy server is not asked again
        // before it said to (the callers retry at their next turn).
        let held = *self.hold.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(until) = held {
            let now = Instant::now();
            if now < until {
                return Err(ArgoError::RateLimited {
                    endpoint,
                    retry_in: until - now,
                });
            }
        }
        let after = self.options.request_timeout;
        match tokio::time::timeout(after, request.send()).await {
            Err(_) => Err(ArgoError::Timeout { endpoint, after }),
            Ok(Err(e)) if e.is_timeout() => Err(ArgoError::Timeout { endpoint, after }),
            Ok(Err(e)) if let Some(failure) = tls_failure(&e) => {
                let (what, fix) = tls_words(&failure, self.options.extra_roots.as_ref());
                Err(ArgoError::Tls {
                    endpoint,
                    what,
                    fix,
                })
            }
            Ok(Err(e)) if e.is_connect() => Err(ArgoError::Transport {
                endpoint,
                what: format!("cannot connect: {}", innermost(&e)),
            }),
            Ok(Err(e)) => Err(ArgoError::Transport {
                endpoint,
                what: chain(&e.without_url()),
            }),
            Ok(Ok(r)) => Ok(r),
        }
    }

    /// `Ok(None)` for 404; an error naming Argo CD's message for any other non-success status.
    async fn check(
        &self,
        response: reqwest::Response,
        endpoint: &str,
    ) -> Result<Option<reqwest::Response>, ArgoError> {
        let status = response.status();
        if status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if status.is_success() {
            return Ok(Some(response));
        }
        if status == StatusCode::TOO_MANY_REQUESTS {
            let retry_in = retry_after(response.headers());
            *self.hold.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now() + retry_in);
            return Err(ArgoError::RateLimited {
                endpoint: endpoint.to_string(),
                retry_in,
            });
        }
        // At most the start of an error's body: a server (or what stands in front of it) may
        // send an endless one, and only its message is quoted.
        let after = self.options.request_timeout;
        let body = match tokio::time::timeout(after, error_body(response)).await {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(_) => String::new(),
        };
        let mut message = argo_message(&body);
        if let Some(Token(t)) = &self.token {
            message = message.replace(t.as_str(), "<redacted>");
        }
        Err(ArgoError::Status {
            endpoint: endpoint.to_string(),
            status: status.as_u16(),
            message,
        })
    }

    async fn fetch(&self, url: Url) -> Result<Option<String>, ArgoError> {
        let endpoint = url.to_string();
        let response = self.send(&self.http, url).await?;
        let Some(response) = self.check(response, &endpoint).await? else {
            return Ok(None);
        };
        let limit = (self.options.max_read_bytes, READ_LIMIT_FLAG);
        let body = self.bounded_body(response, &endpoint, limit).await?;
        // As `Response::text` did: bytes that are not UTF-8 are replaced (JSON decoding then
        // says what is wrong, where).
        Ok(Some(String::from_utf8_lossy(&body).into_owned()))
    }

    async fn fetch_decoded<T: serde::de::DeserializeOwned>(
        &self,
        url: Url,
    ) -> Result<Option<T>, ArgoError> {
        let endpoint = url.to_string();
        match self.fetch(url).await? {
            None => Ok(None),
            Some(body) => model::decode_str(&body)
                .map(Some)
                .map_err(|e| decode_error(&endpoint, e)),
        }
    }
}

/// The TLS error under a request's failure, found by walking its causes (reqwest → hyper →
/// the connector's `io::Error` → rustls). An `io::Error` hides what it wraps from `source()`,
/// so each one's inner error is looked at too.
fn tls_failure(e: &(dyn std::error::Error + 'static)) -> Option<rustls::Error> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Some(tls.clone());
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
        {
            if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
                return Some(tls.clone());
            }
            if let Some(found) = tls_failure(inner) {
                return Some(found);
            }
        }
        cur = err.source();
    }
    None
}

/// What a TLS failure means, in words, and what to give to fix it. Argo CD serves a
/// self-signed certificate until an operator gives it one (`argocd-server-tls`, else the
/// `tls.crt` it generates into `argocd-secret`).
fn tls_words(failure: &rustls::Error, ca: Option<&CaBundle>) -> (String, String) {
    use rustls::CertificateError as C;
    let trusted = match ca {
        Some(ca) => format!(
            "the platform's root certificates or the {} in {}",
            plural(ca.len(), "certificate"),
            ca.origin
        ),
        None => "the platform's root certificates".to_string(),
    };
    let give_ca = match ca {
        Some(ca) => format!(
            "--argocd-ca-file {} does not hold the CA that signed argocd-server's certificate: give that CA (a self-signed certificate is its own CA; Argo CD keeps its certificate in the argocd-server-tls secret, else in argocd-secret's tls.crt)",
            ca.origin
        ),
        None => "give --argocd-ca-file <the CA that signed argocd-server's certificate, PEM> (a self-signed certificate is its own CA; Argo CD keeps its certificate in the argocd-server-tls secret, else in argocd-secret's tls.crt)".to_string(),
    };
    match failure {
        rustls::Error::InvalidCertificate(C::UnknownIssuer | C::BadSignature) => (
            format!(
                "Argo CD's certificate is not signed by any authority greenlight trusts ({trusted}) — Argo CD's default certificate is self-signed ({failure})"
            ),
            give_ca,
        ),
        rustls::Error::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => (
            format!("Argo CD's certificate does not name the host in --argocd-url ({failure})"),
            "give --argocd-url the name the certificate was issued for, or have argocd-server serve a certificate for this name".to_string(),
        ),
        rustls::Error::InvalidCertificate(
            C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. },
        ) => (
            format!("Argo CD's certificate is outside its validity period ({failure})"),
            "renew argocd-server's certificate, or check this host's clock".to_string(),
        ),
        // webpki's words (no type of rustls' names it): a CA certificate served as the
        // server's own, as Argo CD releases that generate their self-signed certificate with
        // `IsCA: true` serve it. Trusting it does not help.
        rustls::Error::InvalidCertificate(_) if format!("{failure:?}").contains("CaUsedAsEndEntity") => (
            format!(
                "Argo CD's certificate is itself a CA certificate (basicConstraints CA:TRUE), which greenlight's TLS library refuses as a server's own certificate even when it is trusted ({failure})"
            ),
            "have argocd-server serve a certificate signed by a CA (the argocd-server-tls secret, e.g. from cert-manager) and give that CA with --argocd-ca-file".to_string(),
        ),
        rustls::Error::InvalidCertificate(_) => (
            format!("Argo CD's certificate was refused ({failure})"),
            give_ca,
        ),
        other => (
            format!("{other}"),
            "check that --argocd-url is Argo CD's HTTPS endpoint (an http:// URL for a server started with --insecure)".to_string(),
        ),
    }
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Why `app` is not the Application `namespace/name` a read asked for (`namespace` empty: any),
/// if it is not.
fn not_the_app_asked_for(app: &Application, namespace: &str, name: &str) -> Option<String> {
    let (got_ns, got) = (&app.metadata.namespace, &app.metadata.name);
    if got != name {
        return Some(format!(
            "the answer is not Application {name:?} but names {got:?}: not an observation of this app"
        ));
    }
    if !namespace.is_empty() && !got_ns.is_empty() && got_ns != namespace {
        return Some(format!(
            "the answer is Application {name:?} in namespace {got_ns:?}, not {namespace:?}: not an observation of this app"
        ));
    }
    None
}

/// A request URL as errors name it: a `fields=` selection is shortened to `fields=…`, the list
/// of paths saying nothing to a reader.
fn shown(url: &Url) -> String {
    if !url.query_pairs().any(|(k, _)| k == "fields") {
        return url.to_string();
    }
    let mut short = url.clone();
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| k != "fields")
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    short.set_query(None);
    for (k, v) in &kept {
        short.query_pairs_mut().append_pair(k, v);
    }
    match short.query() {
        Some(q) if !q.is_empty() => format!("{short}&fields=…"),
        _ => format!("{short}?fields=…"),
    }
}

/// A listing's items, decoded one at a time as the parser reaches them: at no moment is the
/// whole listing held as a JSON tree, only the body and the Applications decoded so far.
fn decode_items(body: &[u8]) -> Result<Vec<Result<Application, ItemError>>, DecodeError> {
    use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
    type Items = Vec<Result<Application, ItemError>>;

    struct ListVisitor;
    impl<'de> Visitor<'de> for ListVisitor {
        type Value = Items;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an application list object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Items, A::Error> {
            let mut items = None;
            while let Some(key) = map.next_key::<String>()? {
                if key == "items" {
                    items = Some(map.next_value_seed(ItemsSeed)?);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            // Argo CD always writes `items` (`null` when there are none): a body without it is
            // not an Application list (a proxy's answer, another server), and taking it as
            // "no applications" would make every app absent.
            items.ok_or_else(|| {
                serde::de::Error::custom(
                    "no `items` field: this is not an Application list, so it says nothing about which applications exist",
                )
            })
        }
    }

    struct ItemsSeed;
    impl<'de> DeserializeSeed<'de> for ItemsSeed {
        type Value = Items;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Items, D::Error> {
            d.deserialize_any(ItemsVisitor)
        }
    }

    struct ItemsVisitor;
    impl<'de> Visitor<'de> for ItemsVisitor {
        type Value = Items;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of applications or null")
        }
        fn visit_unit<E>(self) -> Result<Items, E> {
            Ok(Vec::new())
        }
        fn visit_none<E>(self) -> Result<Items, E> {
            Ok(Vec::new())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Items, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element::<serde_json::Value>()? {
                let index = out.len();
                let name = item
                    .pointer("/metadata/name")
                    .and_then(|v| v.as_str())
                    .map(str::to_string);
                out.push(
                    model::decode::<Application>(item).map_err(|error| ItemError {
                        index,
                        name,
                        error,
                    }),
                );
            }
            Ok(out)
        }
    }

    let mut de = serde_json::Deserializer::from_slice(body);
    let items = de.deserialize_map(ListVisitor).map_err(|e| DecodeError {
        path: ".".into(),
        message: e.to_string(),
    })?;
    de.end().map_err(|e| DecodeError {
        path: ".".into(),
        message: e.to_string(),
    })?;
    Ok(items)
}

fn parse_base(base_url: &str) -> Result<Url, ArgoError> {
    let shown = |why: &str| ArgoError::Config {
        // Not yet parsed, so not known to be a URL: redacted as text.
        url: greenlight_core::repo_url::redact(base_url),
        why: why.to_string(),
    };
    let url = Url::parse(base_url.trim()).map_err(|e| shown(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(shown("use an http:// or https:// URL"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(shown(
            "credentials do not belong in the URL (greenlight's command line is visible to every user in ps): give the API token with --argocd-token-file",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(shown("the URL must not have a query or fragment"));
    }
    Ok(url)
}

fn decode_error(endpoint: &str, e: DecodeError) -> ArgoError {
    ArgoError::Decode {
        endpoint: endpoint.to_string(),
        path: e.path,
        message: e.message,
    }
}

/// How long a `429`'s `Retry-After` (delta-seconds or an HTTP date) says to wait, at most
/// [`MAX_RETRY_AFTER`]; [`DEFAULT_RETRY_AFTER`] when it says nothing readable.
fn retry_after(headers: &HeaderMap) -> Duration {
    let Some(value) = headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
    else {
        return DEFAULT_RETRY_AFTER;
    };
    let wait = match value.parse::<u64>() {
        Ok(secs) => Some(Duration::from_secs(secs)),
        Err(_) => httpdate::parse_http_date(value).ok().map(|at| {
            at.duration_since(std::time::SystemTime::now())
                .unwrap_or(Duration::ZERO)
        }),
    };
    wait.unwrap_or(DEFAULT_RETRY_AFTER).min(MAX_RETRY_AFTER)
}

/// Argo CD (grpc-gateway) errors look like `{"error":"…","code":16,"message":"…"}`; stream errors
/// like `{"error":{"grpc_code":2,"http_code":500,"message":"…"}}`. Anything else: the start of
/// the body.
/// Either is quoted up to [`MAX_QUOTED_CHARS`] characters.
fn argo_message(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        for p in ["/message", "/error/message", "/error"] {
            if let Some(s) = v
                .pointer(p)
                .and_then(|m| m.as_str())
                .filter(|s| !s.is_empty())
            {
                return capped(s);
            }
        }
    }
    capped(body)
}

/// `text` trimmed, cut at [`MAX_QUOTED_CHARS`] characters with `…` when longer.
fn capped(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// The first [`MAX_ERROR_BODY`] bytes of an error's body; what could not be read is left out.
async fn error_body(mut response: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = MAX_ERROR_BODY - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= MAX_ERROR_BODY {
            break;
        }
    }
    body
}

struct Lines<S> {
    body: S,
    buf: Vec<u8>,
    /// Bytes of `buf` already searched for a newline.
    scanned: usize,
    endpoint: String,
    done: bool,
}

/// Newline-delimited JSON messages, one event or error each, or their server-sent-events
/// framing: a `data:` prefix is read past, blank lines are skipped, and a `:` line is a
/// heartbeat.
fn ndjson<S, B>(
    body: S,
    endpoint: String,
) -> impl Stream<Item = Result<StreamItem, ArgoError>> + Send + 'static
where
    S: Stream<Item = reqwest::Result<B>> + Send + Unpin + 'static,
    B: AsRef<[u8]>,
{
    let state = Lines {
        body,
        buf: Vec::new(),
        scanned: 0,
        endpoint,
        done: false,
    };
    futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(pos) = st.buf[st.scanned..].iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = st.buf.drain(..=st.scanned + pos).collect();
                st.scanned = 0;
                if let Some(item) = parse_line(&line, &st.endpoint) {
                    return Some((item, st));
                }
                continue;
            }
            st.scanned = st.buf.len();
            if st.done {
                if st.buf.iter().all(u8::is_ascii_whitespace) {
                    return None;
                }
                // The server closed without a final newline: the last message may be whole.
                let line = std::mem::take(&mut st.buf);
                st.scanned = 0;
                let item = parse_line(&line, &st.endpoint)?.map_err(|e| match e {
                    ArgoError::Decode {
                        endpoint,
                        path,
                        message,
                    } => ArgoError::Decode {
                        endpoint,
                        path,
                        message: format!("the stream ended in the middle of a message ({message})"),
                    },
                    other => other,
                });
                return Some((item, st));
            }
            match st.body.next().await {
                Some(Ok(chunk)) => {
                    st.buf.extend_from_slice(chunk.as_ref());
                    if st.buf.len() > MAX_STREAM_LINE {
                        st.done = true;
                        st.buf.clear();
                        st.scanned = 0;
                        let e = ArgoError::Transport {
                            endpoint: st.endpoint.clone(),
                            what: format!(
                                "a stream message exceeds {} MiB; giving up on this stream",
                                MAX_STREAM_LINE >> 20
                            ),
                        };
                        return Some((Err(e), st));
                    }
                }
                Some(Err(e)) => {
                    st.done = true;
                    st.buf.clear();
                    st.scanned = 0;
                    let e = ArgoError::Transport {
                        endpoint: st.endpoint.clone(),
                        what: format!("the stream broke: {}", chain(&e.without_url())),
                    };
                    return Some((Err(e), st));
                }
                None => st.done = true,
            }
        }
    })
}

fn parse_line(line: &[u8], endpoint: &str) -> Option<Result<StreamItem, ArgoError>> {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text.starts_with(':') {
        return Some(Ok(StreamItem::Heartbeat));
    }
    let text = text.strip_prefix("data:").map_or(text, str::trim_start);
    let err = |path: String, message: String| ArgoError::Decode {
        endpoint: endpoint.to_string(),
        path,
        message,
    };
    let value: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return Some(Err(err(".".into(), e.to_string()))),
    };
    if let Some(result) = value.get("result").filter(|r| !r.is_null()) {
        let kind = match result.get("type").and_then(|t| t.as_str()).unwrap_or("") {
            "ADDED" => EventKind::Added,
            "MODIFIED" => EventKind::Modified,
            "DELETED" => EventKind::Deleted,
            other => EventKind::Other(other.to_string()),
        };
        let Some(app) = result.get("application").filter(|a| a.is_object()) else {
            return Some(Err(err(
                "result.application".into(),
                "missing: the event carries no application".into(),
            )));
        };
        return Some(
            model::decode::<Application>(app.clone())
                .map(|application| StreamItem::Event(Box::new(StreamEvent { kind, application })))
                .map_err(|e| {
                    let path = if e.path == "." {
                        "result.application".into()
                    } else {
                        format!("result.application.{}", e.path)
                    };
                    err(path, e.message)
                }),
        );
    }
    if let Some(e) = value.get("error").filter(|e| !e.is_null()) {
        let message = argo_message(&e.to_string());
        let message = if message.is_empty() {
            e.to_string()
        } else {
            message
        };
        return Some(Err(ArgoError::Stream {
            endpoint: endpoint.to_string(),
            message,
        }));
    }
    Some(Err(err(
        ".".into(),
        "a stream message with neither `result` nor `error`".into(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }

    #[test]
    fn a_bad_base_url_is_refused_without_echoing_credentials() {
        let e = ArgoClient::new("https://admin:hunter2@argocd.example.com", None).unwrap_err();
        let text = e.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("credentials"), "{text}");
        let e = ArgoClient::new("ftp://argocd", None).unwrap_err();
        assert!(e.to_string().contains("http://"), "{e}");
        let e = ArgoClient::new("not a url", None).unwrap_err();
        assert!(e.to_string().contains("not a url"), "{e}");
        // Unparsable, yet still redacted: a token holding `/` breaks URL parsing.
        let e = ArgoClient::new("https://admin:hun/ter2@argocd example", None).unwrap_err();
        assert!(!e.to_string().contains("hun/ter2"), "{e}");
    }

    #[test]
    fn urls_keep_a_root_path_and_encode_names() {
        provider();
        let c = ArgoClient::new("http://127.0.0.1:1/argocd/", Some("t".into())).unwrap();
        assert_eq!(
            c.url(&["api", "v1", "applications", "a b/c"], Some("team-ns"))
                .as_str(),
            "http://127.0.0.1:1/argocd/api/v1/applications/a%20b%2Fc?appNamespace=team-ns"
        );
        assert_eq!(
            c.url(&["api", "v1", "applications"], Some("")).as_str(),
            "http://127.0.0.1:1/argocd/api/v1/applications"
        );
    }

    #[test]
    fn only_three_dot_separated_parts_look_like_a_jwt() {
        assert!(looks_like_jwt("aaa.bbb.ccc"));
        assert!(looks_like_jwt(" aaa.bbb.ccc\n"));
        for t in ["", "plain-token", "a.b", "a..c", "a.b.c.d", ".b.c"] {
            assert!(!looks_like_jwt(t), "{t}");
        }
    }

    #[test]
    fn the_token_never_shows_in_debug() {
        provider();
        let c = ArgoClient::new("http://127.0.0.1:1", Some("s3cret-token\n".into())).unwrap();
        let debug = format!("{c:?}");
        assert!(!debug.contains("s3cret"), "{debug}");
        assert!(debug.contains("<redacted>"), "{debug}");
    }

    #[test]
    fn argo_messages_are_extracted() {
        assert_eq!(
            argo_message(r#"{"error":"x","code":16,"message":"invalid session"}"#),
            "invalid session"
        );
        assert_eq!(
            argo_message(r#"{"error":{"grpc_code":2,"message":"boom"}}"#),
            "boom"
        );
        assert_eq!(
            argo_message("  upstream connect error \n"),
            "upstream connect error"
        );
        assert_eq!(argo_message(&"x".repeat(400)).chars().count(), 301);
    }

    #[test]
    fn stream_lines() {
        assert!(parse_line(b"\n", "e").is_none());
        assert_eq!(
            parse_line(b":\n", "e").unwrap().unwrap(),
            StreamItem::Heartbeat
        );
        let ok = parse_line(
            br#"data: {"result":{"type":"DELETED","application":{"metadata":{"name":"a"}}}}"#,
            "e",
        );
        let StreamItem::Event(ev) = ok.unwrap().unwrap() else {
            panic!("an event")
        };
        assert_eq!(ev.kind, EventKind::Deleted);
        assert_eq!(ev.application.metadata.name, "a");
        let bad = parse_line(
            br#"{"result":{"type":"ADDED","application":{"status":{"history":[{"id":"x"}]}}}}"#,
            "e",
        );
        match bad.unwrap().unwrap_err() {
            ArgoError::Decode { path, .. } => {
                assert_eq!(path, "result.application.status.history[0].id")
            }
            other => panic!("{other}"),
        }
    }
}
