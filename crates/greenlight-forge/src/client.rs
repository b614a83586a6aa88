//! The exchanges: one request per operation (two where a forge needs them: GitHub's auto-merge
//! reads the pull request's node id first; Gitea's merge answers no body, so the merge commit
//! is read after), a timeout bounding each request, the answer read up to a bound, the token
//! only ever in a sensitive header.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use greenlight_core::error_text::{chain, innermost};
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, Url};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::ForgeError;
use crate::secret::{Secret, scrub};
use crate::shapes::{self, GitHubMerged, GitHubPull, GitLabMr, GiteaPull};
use crate::{AutoMerge, ForgeKind, PrState, PullRequest};

/// Connecting never waits longer than this, even under a longer request timeout.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How to reach the forge.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The longest one request may take, connection and body included (default 30 s).
    pub timeout: Duration,
    /// The most of an answer that is read (default 4 MiB); more is [`ForgeError::TooLarge`].
    pub max_body_bytes: usize,
    /// The longest a rate limit is waited out before a request is sent again (default 60 s):
    /// a forge that asks for a longer wait gets [`ForgeError::RateLimited`], and is not asked
    /// before the wait it named is over.
    pub max_rate_limit_wait: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            timeout: Duration::from_secs(30),
            max_body_bytes: 4 << 20,
            max_rate_limit_wait: Duration::from_secs(60),
        }
    }
}

/// How long a rate limit is taken to last when the forge does not say (GitHub: "wait for at
/// least one minute before retrying").
const DEFAULT_RATE_LIMIT_WAIT: Duration = Duration::from_secs(60);

/// The longest a forge's word on a rate limit is believed: a longer one is taken as this.
const MAX_RATE_LIMIT_WAIT: Duration = Duration::from_secs(3600);

/// Speaks to one repository on one forge. Build one per repository; it keeps a connection pool.
pub struct ForgeClient {
    kind: ForgeKind,
    client: reqwest::Client,
    /// The API base, ending in `/`.
    api: Url,
    /// `owner/name`.
    project: String,
    token: Secret,
    timeout: Duration,
    max_body_bytes: usize,
    max_rate_limit_wait: Duration,
    /// After a rate limit: no request is sent before this moment.
    held_until: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for ForgeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForgeClient")
            .field("kind", &self.kind)
            .field("api", &self.api.as_str())
            .field("project", &self.project)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

/// Which operation an answer belongs to, for the status codes that mean different things.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Open,
    Read,
    Merge,
    AutoMerge,
    Close,
}

/// The wait a rate-limited answer asks for: a `429`, or a `403` with GitHub's signs of a rate
/// limit (`retry-after`, or `x-ratelimit-remaining: 0`) — the caller also wants its message to
/// say "rate limit" before a 403 counts. `Retry-After` in seconds or as an HTTP date first, then
/// `x-ratelimit-reset` (epoch seconds) when `x-ratelimit-remaining` is 0, else
/// [`DEFAULT_RATE_LIMIT_WAIT`]; never more than [`MAX_RATE_LIMIT_WAIT`].
fn rate_limit_wait(status: u16, headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let retry_after = header("retry-after").and_then(|v| match v.parse::<u64>() {
        Ok(secs) => Some(Duration::from_secs(secs)),
        Err(_) => httpdate::parse_http_date(v)
            .ok()
            .map(|at| at.duration_since(SystemTime::now()).unwrap_or_default()),
    });
    let exhausted = header("x-ratelimit-remaining") == Some("0");
    let reset = header("x-ratelimit-reset")
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|_| exhausted)
        .map(|epoch| {
            (SystemTime::UNIX_EPOCH + Duration::from_secs(epoch))
                .duration_since(SystemTime::now())
                .unwrap_or_default()
        });
    let limited =
        status == 429 || (status == 403 && (header("retry-after").is_some() || exhausted));
    limited.then(|| {
        retry_after
            .or(reset)
            .unwrap_or(DEFAULT_RATE_LIMIT_WAIT)
            .min(MAX_RATE_LIMIT_WAIT)
    })
}

fn segment_ok(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl ForgeClient {
    /// A client for `project` (`owner/name`) on the forge whose API is at `api_url`:
    /// `https://api.github.com` or a GitHub Enterprise Server's `https://host/api/v3`,
    /// `https://gitlab.example.com/api/v4`, `https://gitea.example.com/api/v1`. A rustls
    /// crypto provider must be installed in the process first (reqwest has no default one).
    pub fn new(
        kind: ForgeKind,
        api_url: &str,
        project: &str,
        token: Secret,
        options: ClientOptions,
    ) -> Result<ForgeClient, ForgeError> {
        let refuse = |url: &str, why: &str| ForgeError::Config {
            url: greenlight_core::repo_url::redact(url.trim()),
            why: why.to_string(),
        };
        let mut api = Url::parse(api_url.trim()).map_err(|e| refuse(api_url, &e.to_string()))?;
        if !matches!(api.scheme(), "http" | "https") {
            return Err(refuse(api_url, "use an http:// or https:// URL"));
        }
        if !api.username().is_empty() || api.password().is_some() {
            return Err(refuse(
                api_url,
                "credentials do not belong in the URL; give the token",
            ));
        }
        if api.query().is_some() || api.fragment().is_some() {
            return Err(refuse(api_url, "the URL must not have a query or fragment"));
        }
        if !api.path().ends_with('/') {
            let path = format!("{}/", api.path());
            api.set_path(&path);
        }
        let shown = api.to_string();
        let valid_project = project
            .split_once('/')
            .is_some_and(|(o, n)| segment_ok(o) && segment_ok(n));
        if !valid_project {
            return Err(refuse(
                &shown,
                &format!("{project:?} is not <owner>/<name>"),
            ));
        }
        let raw = token.expose().trim();
        if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(refuse(
                &shown,
                "the token must be one word of printable ASCII",
            ));
        }
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let (name, value) = match kind {
            ForgeKind::GitHub => (AUTHORIZATION, format!("Bearer {raw}")),
            ForgeKind::GitLab => (HeaderName::from_static("private-token"), raw.to_string()),
            ForgeKind::Gitea => (AUTHORIZATION, format!("token {raw}")),
        };
        let mut value = HeaderValue::from_str(&value)
            .map_err(|_| refuse(&shown, "the token cannot be sent in an HTTP header"))?;
        value.set_sensitive(true);
        headers.insert(name, value);
        if kind == ForgeKind::GitHub {
            headers.insert(
                ACCEPT,
                HeaderValue::from_static("application/vnd.github+json"),
            );
            headers.insert(
                HeaderName::from_static("x-github-api-version"),
                HeaderValue::from_static("2022-11-28"),
            );
        }
        // reqwest panics building a client without a process-wide rustls provider; say so.
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            return Err(refuse(
                &shown,
                "no TLS crypto provider is installed in this process (a bug in the program that embeds this client)",
            ));
        }
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(options.timeout)
            .connect_timeout(options.timeout.min(MAX_CONNECT_TIMEOUT))
            .user_agent(concat!("greenlight/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| refuse(&shown, &chain(&e.without_url())))?;
        Ok(ForgeClient {
            kind,
            client,
            api,
            project: project.to_string(),
            token,
            timeout: options.timeout,
            max_body_bytes: options.max_body_bytes,
            max_rate_limit_wait: options.max_rate_limit_wait,
            held_until: Mutex::new(None),
        })
    }

    pub fn kind(&self) -> ForgeKind {
        self.kind
    }

    /// `owner/name`.
    pub fn project(&self) -> &str {
        &self.project
    }

    /// The URL of `path` under the repository's API root.
    fn url(&self, path: &str) -> Result<Url, ForgeError> {
        let repo = match self.kind {
            ForgeKind::GitHub | ForgeKind::Gitea => format!("repos/{}", self.project),
            ForgeKind::GitLab => format!("projects/{}", self.project.replace('/', "%2F")),
        };
        let joined = format!("{}{repo}{path}", self.api);
        Url::parse(&joined).map_err(|e| ForgeError::Config {
            url: joined.clone(),
            why: e.to_string(),
        })
    }

    /// GitHub's GraphQL endpoint: `/graphql` beside `api.github.com`'s REST root, or
    /// `/api/graphql` for a GitHub Enterprise Server whose REST root is `/api/v3`.
    fn graphql_url(&self) -> Result<Url, ForgeError> {
        let mut url = self.api.clone();
        let path = url.path().trim_end_matches('/').to_string();
        let graphql = match path.strip_suffix("/api/v3") {
            Some(root) => format!("{root}/api/graphql"),
            None => format!("{path}/graphql"),
        };
        url.set_path(&graphql);
        Ok(url)
    }

    /// One request, answered with its status and body. A rate limit (`429`, or GitHub's `403`
    /// that says it is one) is waited out once when the forge asks for at most
    /// `max_rate_limit_wait`, and the request sent again (a rate-limited request was not acted
    /// on); a longer wait, or a second limit, is [`ForgeError::RateLimited`]. Until the wait
    /// the forge named is over, no request of this client is sent.
    async fn send(
        &self,
        method: Method,
        url: Url,
        body: Option<Value>,
    ) -> Result<(u16, Vec<u8>, String), ForgeError> {
        let shown = url.to_string();
        // Rate limits met by this call: the second ends it, whatever wait it asks for (a
        // forge answering `Retry-After: 0` again and again is not asked without end).
        let mut limits = 0;
        loop {
            if let Some(wait) = self.held_for() {
                if wait > self.max_rate_limit_wait {
                    return Err(ForgeError::RateLimited {
                        forge: self.kind,
                        url: shown,
                        retry_in: wait,
                    });
                }
                tokio::time::sleep(wait).await;
            }
            let (status, limited, bytes) = self
                .send_once(method.clone(), url.clone(), body.as_ref(), &shown)
                .await?;
            let Some(wait) = limited else {
                return Ok((status, bytes, shown));
            };
            let until = Instant::now() + wait;
            {
                let mut held = self.held_until.lock().unwrap_or_else(|p| p.into_inner());
                *held = Some(held.map_or(until, |h| h.max(until)));
            }
            limits += 1;
            if limits > 1 {
                return Err(ForgeError::RateLimited {
                    forge: self.kind,
                    url: shown,
                    retry_in: wait,
                });
            }
        }
    }

    /// How long requests are still held back by a rate limit, if they are.
    fn held_for(&self) -> Option<Duration> {
        let held = *self.held_until.lock().unwrap_or_else(|p| p.into_inner());
        held.and_then(|t| t.checked_duration_since(Instant::now()))
            .filter(|d| !d.is_zero())
    }

    /// One request: its status, the wait a rate limit asks for (if it is one), and its body.
    async fn send_once(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
        shown: &str,
    ) -> Result<(u16, Option<Duration>, Vec<u8>), ForgeError> {
        let shown = shown.to_string();
        let mut request = self.client.request(method, url);
        if let Some(body) = body {
            request = request.json(body);
        }
        let mut response = request.send().await.map_err(|e| self.failed(&shown, e))?;
        let status = response.status().as_u16();
        let limited = rate_limit_wait(status, response.headers());
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.failed(&shown, e))? {
            if bytes.len() + chunk.len() > self.max_body_bytes {
                return Err(ForgeError::TooLarge {
                    forge: self.kind,
                    url: shown,
                    limit: self.max_body_bytes,
                });
            }
            bytes.extend_from_slice(&chunk);
        }
        // A 403 is a rate limit only when it says so; else it is a permission refusal.
        let limited = limited.filter(|_| {
            status == 429 || {
                let text = String::from_utf8_lossy(&bytes).to_ascii_lowercase();
                text.contains("rate limit")
            }
        });
        Ok((status, limited, bytes))
    }

    fn failed(&self, url: &str, e: reqwest::Error) -> ForgeError {
        let (forge, url) = (self.kind, url.to_string());
        if e.is_connect() {
            ForgeError::Connect {
                forge,
                url,
                what: scrub(&innermost(&e), self.token.expose()),
            }
        } else if e.is_timeout() {
            ForgeError::Timeout {
                forge,
                url,
                after: self.timeout,
            }
        } else {
            ForgeError::Transport {
                forge,
                url,
                what: scrub(&chain(&e.without_url()), self.token.expose()),
            }
        }
    }

    fn parse<T: DeserializeOwned>(&self, url: &str, body: &[u8]) -> Result<T, ForgeError> {
        serde_json::from_slice(body).map_err(|e| ForgeError::UnexpectedBody {
            forge: self.kind,
            url: url.to_string(),
            why: scrub(&e.to_string(), self.token.expose()),
        })
    }

    fn unexpected(&self, url: &str, why: impl Into<String>) -> ForgeError {
        ForgeError::UnexpectedBody {
            forge: self.kind,
            url: url.to_string(),
            why: why.into(),
        }
    }

    /// An unsuccessful answer, read into the error its status means for `op` on this forge.
    fn refusal(&self, op: Op, status: u16, body: &[u8], url: &str) -> ForgeError {
        let message = scrub(&shapes::error_text(body), self.token.expose());
        let (forge, url) = (self.kind, url.to_string());
        let has = |needle: &str| message.to_ascii_lowercase().contains(needle);
        match (self.kind, op, status) {
            (_, _, 401) => ForgeError::Unauthorized {
                forge,
                url,
                message,
            },
            (_, _, 404) => ForgeError::NotFound {
                forge,
                url,
                message,
            },
            (ForgeKind::GitHub, Op::Open, 422) if has("already exists") => {
                ForgeError::AlreadyExists {
                    forge,
                    url,
                    message,
                }
            }
            (ForgeKind::GitHub, Op::Open, 422) if has("no commits between") => {
                ForgeError::NoChanges {
                    forge,
                    url,
                    message,
                }
            }
            (ForgeKind::GitLab | ForgeKind::Gitea, Op::Open, 409) => ForgeError::AlreadyExists {
                forge,
                url,
                message,
            },
            (ForgeKind::Gitea, Op::Open, 422) if has("no changes") => ForgeError::NoChanges {
                forge,
                url,
                message,
            },
            (_, Op::Merge | Op::AutoMerge, 409)
                if has("head branch was modified")
                    || has("sha does not match")
                    || has("head out of date") =>
            {
                ForgeError::HeadMoved {
                    forge,
                    url,
                    message,
                }
            }
            (ForgeKind::Gitea, Op::AutoMerge, 405) if has("auto merge is not allowed") => {
                ForgeError::AutoMergeNotAllowed {
                    forge,
                    url,
                    message,
                }
            }
            (ForgeKind::GitHub, Op::Merge, 405)
            | (ForgeKind::GitLab, Op::Merge | Op::AutoMerge, 405 | 406 | 422)
            | (ForgeKind::Gitea, Op::Merge | Op::AutoMerge, 405 | 409) => {
                ForgeError::NotMergeable {
                    forge,
                    url,
                    status,
                    message: if message.is_empty() {
                        "no reason given".into()
                    } else {
                        message
                    },
                }
            }
            (_, Op::Close, 412) => ForgeError::AlreadyMerged { forge, url },
            _ => ForgeError::Refused {
                forge,
                url,
                status,
                message,
            },
        }
    }

    /// Opens a pull request from `head` into `base` (both branches of this repository; `head`
    /// already pushed).
    pub async fn open(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, ForgeError> {
        let (path, payload) = match self.kind {
            ForgeKind::GitHub | ForgeKind::Gitea => (
                "/pulls",
                json!({"head": head, "base": base, "title": title, "body": body}),
            ),
            ForgeKind::GitLab => (
                "/merge_requests",
                json!({"source_branch": head, "target_branch": base, "title": title, "description": body}),
            ),
        };
        let (status, bytes, url) = self
            .send(Method::POST, self.url(path)?, Some(payload))
            .await?;
        if status != 201 && status != 200 {
            return Err(self.refusal(Op::Open, status, &bytes, &url));
        }
        match self.kind {
            ForgeKind::GitHub => {
                let pull: GitHubPull = self.parse(&url, &bytes)?;
                Ok(PullRequest {
                    number: pull.number,
                    url: pull.html_url,
                    head_sha: pull.head.sha,
                })
            }
            ForgeKind::GitLab => {
                let mr: GitLabMr = self.parse(&url, &bytes)?;
                Ok(PullRequest {
                    number: mr.iid,
                    url: mr.web_url,
                    head_sha: mr
                        .sha
                        .ok_or_else(|| self.unexpected(&url, "the merge request has no sha"))?,
                })
            }
            ForgeKind::Gitea => {
                let pull: GiteaPull = self.parse(&url, &bytes)?;
                Ok(PullRequest {
                    number: pull.number,
                    url: pull.html_url,
                    head_sha: pull.head.sha,
                })
            }
        }
    }

    fn pull_path(&self, number: u64) -> String {
        match self.kind {
            ForgeKind::GitHub | ForgeKind::Gitea => format!("/pulls/{number}"),
            ForgeKind::GitLab => format!("/merge_requests/{number}"),
        }
    }

    async fn read_raw(&self, number: u64) -> Result<(Vec<u8>, String), ForgeError> {
        let (status, bytes, url) = self
            .send(Method::GET, self.url(&self.pull_path(number))?, None)
            .await?;
        if status != 200 {
            return Err(self.refusal(Op::Read, status, &bytes, &url));
        }
        Ok((bytes, url))
    }

    /// Where pull request `pr` stands now.
    pub async fn get(&self, pr: &PullRequest) -> Result<PrState, ForgeError> {
        let (bytes, url) = self.read_raw(pr.number).await?;
        self.state_of(&url, &bytes)
    }

    fn state_of(&self, url: &str, bytes: &[u8]) -> Result<PrState, ForgeError> {
        let merged = |commit: Option<String>| {
            commit
                .filter(|c| !c.is_empty())
                .map(|merge_commit| PrState::Merged { merge_commit })
                .ok_or_else(|| self.unexpected(url, "merged, but no merge commit is named"))
        };
        match self.kind {
            ForgeKind::GitHub => {
                let pull: GitHubPull = self.parse(url, bytes)?;
                match (pull.state.as_str(), pull.merged) {
                    ("open", _) => Ok(PrState::Open {
                        auto_merge: Some(pull.auto_merge.is_some_and(|v| !v.is_null())),
                    }),
                    ("closed", true) => merged(pull.merge_commit_sha),
                    ("closed", false) => Ok(PrState::Closed),
                    (other, _) => Err(self.unexpected(url, format!("state {other:?}"))),
                }
            }
            ForgeKind::GitLab => {
                let mr: GitLabMr = self.parse(url, bytes)?;
                match mr.state.as_str() {
                    // `locked` is the short moment while GitLab merges.
                    "opened" | "locked" => Ok(PrState::Open {
                        auto_merge: Some(mr.merge_when_pipeline_succeeds),
                    }),
                    "merged" => merged(mr.merge_commit_sha.or(mr.squash_commit_sha)),
                    "closed" => Ok(PrState::Closed),
                    other => Err(self.unexpected(url, format!("state {other:?}"))),
                }
            }
            ForgeKind::Gitea => {
                let pull: GiteaPull = self.parse(url, bytes)?;
                match (pull.state.as_str(), pull.merged) {
                    ("open", _) => Ok(PrState::Open { auto_merge: None }),
                    ("closed", true) => merged(pull.merge_commit_sha),
                    ("closed", false) => Ok(PrState::Closed),
                    (other, _) => Err(self.unexpected(url, format!("state {other:?}"))),
                }
            }
        }
    }

    /// Merges `pr` now with a merge commit, pinned to the head it was opened at
    /// ([`ForgeError::HeadMoved`] when the branch moved since); returns the merge commit.
    pub async fn merge(&self, pr: &PullRequest) -> Result<String, ForgeError> {
        let path = format!("{}/merge", self.pull_path(pr.number));
        let (method, payload) = match self.kind {
            ForgeKind::GitHub => (
                Method::PUT,
                json!({"merge_method": "merge", "sha": pr.head_sha}),
            ),
            ForgeKind::GitLab => (Method::PUT, json!({"sha": pr.head_sha})),
            ForgeKind::Gitea => (
                Method::POST,
                json!({"Do": "merge", "head_commit_id": pr.head_sha}),
            ),
        };
        let (status, bytes, url) = self.send(method, self.url(&path)?, Some(payload)).await?;
        if status != 200 {
            return Err(self.refusal(Op::Merge, status, &bytes, &url));
        }
        match self.kind {
            ForgeKind::GitHub => {
                let merged: GitHubMerged = self.parse(&url, &bytes)?;
                if !merged.merged {
                    return Err(self.unexpected(&url, "200 with merged: false"));
                }
                Ok(merged.sha)
            }
            ForgeKind::GitLab => match self.state_of(&url, &bytes)? {
                PrState::Merged { merge_commit } => Ok(merge_commit),
                other => {
                    Err(self.unexpected(&url, format!("200, but the merge request is {other:?}")))
                }
            },
            // Gitea answers 200 with no body: the merge commit is read from the pull request.
            ForgeKind::Gitea => match self.get(pr).await? {
                PrState::Merged { merge_commit } => Ok(merge_commit),
                other => {
                    Err(self.unexpected(&url, format!("200, but the pull request is {other:?}")))
                }
            },
        }
    }

    /// Arms auto-merge with a merge commit: the forge merges once the base branch's required
    /// checks pass on the head. GitHub has no REST route for it: its GraphQL mutation
    /// `enablePullRequestAutoMerge` is used, with the pull request's node id read first.
    /// GitLab and Gitea merge at once when nothing is left to wait for
    /// ([`AutoMerge::Merged`]); GitHub refuses instead ([`ForgeError::AlreadyMergeable`]).
    pub async fn enable_auto_merge(&self, pr: &PullRequest) -> Result<AutoMerge, ForgeError> {
        match self.kind {
            ForgeKind::GitHub => self.github_auto_merge(pr).await,
            ForgeKind::GitLab => {
                let path = format!("{}/merge", self.pull_path(pr.number));
                // `auto_merge` from GitLab 17.11; `merge_when_pipeline_succeeds` before.
                let payload = json!({"auto_merge": true, "merge_when_pipeline_succeeds": true, "sha": pr.head_sha});
                let (status, bytes, url) = self
                    .send(Method::PUT, self.url(&path)?, Some(payload))
                    .await?;
                if status != 200 {
                    return Err(self.refusal(Op::AutoMerge, status, &bytes, &url));
                }
                match self.state_of(&url, &bytes)? {
                    PrState::Merged { merge_commit } => Ok(AutoMerge::Merged { merge_commit }),
                    PrState::Open {
                        auto_merge: Some(true),
                    } => Ok(AutoMerge::Armed),
                    other => Err(self.unexpected(
                        &url,
                        format!("200, but the merge request is {other:?} and not set to merge"),
                    )),
                }
            }
            ForgeKind::Gitea => {
                let path = format!("{}/merge", self.pull_path(pr.number));
                let payload = json!({"Do": "merge", "merge_when_checks_succeed": true, "head_commit_id": pr.head_sha});
                let (status, bytes, url) = self
                    .send(Method::POST, self.url(&path)?, Some(payload))
                    .await?;
                match status {
                    201 => Ok(AutoMerge::Armed),
                    200 => match self.get(pr).await? {
                        PrState::Merged { merge_commit } => Ok(AutoMerge::Merged { merge_commit }),
                        other => Err(self
                            .unexpected(&url, format!("200, but the pull request is {other:?}"))),
                    },
                    409 if shapes::error_text(&bytes).contains("already scheduled") => {
                        Ok(AutoMerge::Armed)
                    }
                    _ => Err(self.refusal(Op::AutoMerge, status, &bytes, &url)),
                }
            }
        }
    }

    async fn github_auto_merge(&self, pr: &PullRequest) -> Result<AutoMerge, ForgeError> {
        let (bytes, url) = self.read_raw(pr.number).await?;
        let pull: GitHubPull = self.parse(&url, &bytes)?;
        let query = "mutation($input: EnablePullRequestAutoMergeInput!) { enablePullRequestAutoMerge(input: $input) { pullRequest { number autoMergeRequest { mergeMethod enabledAt } } } }";
        let payload = json!({
            "query": query,
            "variables": {"input": {"pullRequestId": pull.node_id, "mergeMethod": "MERGE"}},
        });
        let (status, bytes, url) = self
            .send(Method::POST, self.graphql_url()?, Some(payload))
            .await?;
        if status != 200 {
            return Err(self.refusal(Op::AutoMerge, status, &bytes, &url));
        }
        let answer: Value = self.parse(&url, &bytes)?;
        let has_errors = answer
            .get("errors")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty());
        if has_errors {
            let message = scrub(&shapes::error_text(&bytes), self.token.expose());
            let (forge, url) = (self.kind, url.clone());
            let lower = message.to_ascii_lowercase();
            return Err(if lower.contains("auto merge is not allowed") {
                ForgeError::AutoMergeNotAllowed {
                    forge,
                    url,
                    message,
                }
            } else if lower.contains("clean status") {
                ForgeError::AlreadyMergeable {
                    forge,
                    url,
                    message,
                }
            } else {
                ForgeError::Refused {
                    forge,
                    url,
                    status,
                    message,
                }
            });
        }
        let armed = answer
            .pointer("/data/enablePullRequestAutoMerge/pullRequest/autoMergeRequest")
            .is_some_and(|v| v.is_object());
        if armed {
            Ok(AutoMerge::Armed)
        } else {
            Err(self.unexpected(
                &url,
                "neither errors nor data.enablePullRequestAutoMerge.pullRequest.autoMergeRequest",
            ))
        }
    }

    /// Closes `pr` unmerged. Closing a closed one is no error; a merged one is
    /// [`ForgeError::AlreadyMerged`].
    pub async fn close(&self, pr: &PullRequest) -> Result<(), ForgeError> {
        let path = self.pull_path(pr.number);
        let (method, payload) = match self.kind {
            ForgeKind::GitHub | ForgeKind::Gitea => (Method::PATCH, json!({"state": "closed"})),
            ForgeKind::GitLab => (Method::PUT, json!({"state_event": "close"})),
        };
        let (status, bytes, url) = self.send(method, self.url(&path)?, Some(payload)).await?;
        if status != 200 && status != 201 {
            return Err(self.refusal(Op::Close, status, &bytes, &url));
        }
        match self.state_of(&url, &bytes)? {
            PrState::Closed => Ok(()),
            PrState::Merged { .. } => Err(ForgeError::AlreadyMerged {
                forge: self.kind,
                url,
            }),
            PrState::Open { .. } => Err(self.unexpected(&url, "still open after closing")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }

    fn client(kind: ForgeKind, api: &str) -> ForgeClient {
        ForgeClient::new(
            kind,
            api,
            "acme/deploy",
            Secret::new("tok-secret"),
            ClientOptions::default(),
        )
        .unwrap()
    }

    #[test]
    fn rate_limits_are_read_from_each_forges_headers() {
        let headers = |pairs: &[(&'static str, String)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, HeaderValue::from_str(v).unwrap());
            }
            h
        };
        let secs = Duration::from_secs;
        // Retry-After in seconds, or as an HTTP date.
        assert_eq!(
            rate_limit_wait(429, &headers(&[("retry-after", "7".into())])),
            Some(secs(7))
        );
        let later = httpdate::fmt_http_date(SystemTime::now() + secs(120));
        let wait = rate_limit_wait(429, &headers(&[("retry-after", later)])).unwrap();
        assert!(wait > secs(100) && wait <= secs(120), "{wait:?}");
        // GitHub's primary limit: remaining 0, wait until the reset.
        let reset = (SystemTime::now() + secs(300))
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let primary = headers(&[
            ("x-ratelimit-remaining", "0".into()),
            ("x-ratelimit-reset", reset.to_string()),
        ]);
        let wait = rate_limit_wait(403, &primary).unwrap();
        assert!(wait > secs(290) && wait <= secs(300), "{wait:?}");
        // A 429 that says nothing: a minute; a wait beyond an hour is taken as an hour.
        assert_eq!(rate_limit_wait(429, &HeaderMap::new()), Some(secs(60)));
        assert_eq!(
            rate_limit_wait(429, &headers(&[("retry-after", "999999".into())])),
            Some(secs(3600))
        );
        // A 403 without a rate limit's signs is a permission refusal; other codes are answers.
        assert_eq!(rate_limit_wait(403, &HeaderMap::new()), None);
        let remaining = headers(&[("x-ratelimit-remaining", "12".into())]);
        assert_eq!(rate_limit_wait(403, &remaining), None);
        assert_eq!(
            rate_limit_wait(200, &headers(&[("retry-after", "5".into())])),
            None
        );
    }

    #[test]
    fn each_forge_names_its_routes_and_github_its_graphql_endpoint() {
        provider();
        let gh = client(ForgeKind::GitHub, "https://api.github.com");
        assert_eq!(
            gh.url("/pulls/3").unwrap().as_str(),
            "https://api.github.com/repos/acme/deploy/pulls/3"
        );
        assert_eq!(
            gh.graphql_url().unwrap().as_str(),
            "https://api.github.com/graphql"
        );
        let ghes = client(ForgeKind::GitHub, "https://ghe.example.com/api/v3/");
        assert_eq!(
            ghes.graphql_url().unwrap().as_str(),
            "https://ghe.example.com/api/graphql"
        );
        let gl = client(ForgeKind::GitLab, "https://gitlab.example.com/api/v4");
        assert_eq!(
            gl.url("/merge_requests/2").unwrap().as_str(),
            "https://gitlab.example.com/api/v4/projects/acme%2Fdeploy/merge_requests/2"
        );
        let gt = client(ForgeKind::Gitea, "http://gitea:3000/api/v1");
        assert_eq!(
            gt.url("/pulls").unwrap().as_str(),
            "http://gitea:3000/api/v1/repos/acme/deploy/pulls"
        );
    }

    #[test]
    fn bad_settings_are_refused_without_showing_the_token() {
        provider();
        for (api, project, token, needle) in [
            ("ftp://forge", "a/b", "tok-secret", "http:// or https://"),
            (
                "https://u:pw-secret@forge",
                "a/b",
                "tok-secret",
                "credentials",
            ),
            ("https://forge", "nope", "tok-secret", "<owner>/<name>"),
            ("https://forge", "a/b/c", "tok-secret", "<owner>/<name>"),
            (
                "https://forge",
                "a/b",
                "two words-secret",
                "printable ASCII",
            ),
            ("https://forge", "a/b", "", "printable ASCII"),
        ] {
            let e = ForgeClient::new(
                ForgeKind::GitHub,
                api,
                project,
                Secret::new(token),
                ClientOptions::default(),
            )
            .unwrap_err();
            let text = format!("{e} {e:?}");
            assert!(text.contains(needle), "{api} {project}: {text}");
            assert!(!text.contains("secret"), "{text}");
        }
        let ok = client(ForgeKind::Gitea, "https://forge/api/v1");
        assert!(!format!("{ok:?}").contains("tok-secret"));
    }

    #[test]
    fn refusals_are_typed_per_forge_and_scrubbed_of_the_token() {
        provider();
        let gh = client(ForgeKind::GitHub, "https://api.github.com");
        let e = gh.refusal(Op::Open, 422, br#"{"message":"Validation Failed","errors":[{"message":"A pull request already exists for acme:promo."}]}"#, "u");
        assert!(matches!(e, ForgeError::AlreadyExists { .. }), "{e:?}");
        let e = gh.refusal(
            Op::Merge,
            409,
            br#"{"message":"Head branch was modified. Review and try the merge again."}"#,
            "u",
        );
        assert!(matches!(e, ForgeError::HeadMoved { .. }), "{e:?}");
        let e = gh.refusal(
            Op::Read,
            401,
            br#"{"message":"Bad credentials tok-secret"}"#,
            "u",
        );
        assert!(matches!(e, ForgeError::Unauthorized { .. }), "{e:?}");
        assert!(!e.to_string().contains("tok-secret"), "{e}");
        let gl = client(ForgeKind::GitLab, "https://gl/api/v4");
        let e = gl.refusal(
            Op::Merge,
            406,
            br#"{"message":"Branch cannot be merged"}"#,
            "u",
        );
        assert!(
            matches!(e, ForgeError::NotMergeable { status: 406, .. }),
            "{e:?}"
        );
        let gt = client(ForgeKind::Gitea, "https://gt/api/v1");
        let e = gt.refusal(Op::Merge, 409, br#"{"message":"head out of date"}"#, "u");
        assert!(matches!(e, ForgeError::HeadMoved { .. }), "{e:?}");
        let e = gt.refusal(
            Op::Merge,
            409,
            br#"{"Style":"merge","StdErr":"CONFLICT"}"#,
            "u",
        );
        assert!(matches!(e, ForgeError::NotMergeable { .. }), "{e:?}");
        let e = gt.refusal(Op::Close, 412, b"{}", "u");
        assert!(matches!(e, ForgeError::AlreadyMerged { .. }), "{e:?}");
    }

    #[test]
    fn answers_that_are_not_the_forges_shape_are_refused_naming_what_is_wrong() {
        provider();
        let gh = client(ForgeKind::GitHub, "https://api.github.com");
        let e = gh.state_of("u", br#"{"number":1}"#).unwrap_err();
        assert!(matches!(e, ForgeError::UnexpectedBody { .. }), "{e:?}");
        assert!(e.to_string().contains("missing field"), "{e}");
        let e = gh.state_of("u", b"<html>").unwrap_err();
        assert!(matches!(e, ForgeError::UnexpectedBody { .. }), "{e:?}");
        let merged_without_commit = br#"{"number":1,"html_url":"h","node_id":"n","state":"closed","merged":true,"merge_commit_sha":null,"head":{"sha":"s"},"extra":[1,2]}"#;
        let e = gh.state_of("u", merged_without_commit).unwrap_err();
        assert!(e.to_string().contains("no merge commit"), "{e}");
        let gl = client(ForgeKind::GitLab, "https://gl/api/v4");
        let armed = br#"{"iid":2,"web_url":"w","state":"opened","sha":"s","merge_commit_sha":null,"merge_when_pipeline_succeeds":true,"unknown":{}}"#;
        assert_eq!(
            gl.state_of("u", armed).unwrap(),
            PrState::Open {
                auto_merge: Some(true)
            }
        );
    }
}
