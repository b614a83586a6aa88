//! The instant-query exchange: `POST /api/v1/query` with a form body (`query`, and `time`
//! when asked), falling back to `GET` with the same parameters when a server or proxy answers
//! `405 Method Not Allowed` — as Prometheus' Go client, which Argo Rollouts uses, does. One
//! timeout bounds the whole request, connection and body included; the body is read up to a
//! bound. Credentials travel only as sensitive headers, and never reach an error.

use crate::auth::{Auth, Secret, Secrets, base64};
use crate::decode::{QueryResult, decode};
use crate::error::PromError;
use greenlight_core::error_text::{chain, innermost};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Connecting never waits longer than this, even under a longer request timeout.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How to reach Prometheus.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The longest one query may take, connection and body included. Argo Rollouts' default
    /// is 30 s.
    pub timeout: Duration,
    /// Sent on every request; without it, requests are anonymous.
    pub auth: Option<Auth>,
    /// Extra headers sent on every request (`X-Scope-OrgID` for a multi-tenant Cortex or
    /// Mimir, an API key for a gateway). Their values are treated as secrets.
    pub headers: Vec<(String, Secret)>,
    /// The most of an answer that is read; a larger one is [`PromError::TooLarge`].
    pub max_body_bytes: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            timeout: Duration::from_secs(30),
            auth: None,
            headers: Vec::new(),
            max_body_bytes: 16 << 20,
        }
    }
}

/// Asks one Prometheus server. Build one per server; it keeps a connection pool.
pub struct PrometheusClient {
    client: reqwest::Client,
    endpoint: Url,
    /// The endpoint as errors show it (it holds no credentials: those are refused).
    shown: String,
    timeout: Duration,
    max_body_bytes: usize,
    secrets: Secrets,
}

impl fmt::Debug for PrometheusClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrometheusClient")
            .field("endpoint", &self.shown)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl PrometheusClient {
    /// A client for the Prometheus at `base_url` (`http://prometheus:9090`, or with the path
    /// prefix it is served under: `https://example.com/prometheus`). A rustls crypto provider
    /// must be installed in the process first (reqwest is built without a default one).
    pub fn new(base_url: &str, options: ClientOptions) -> Result<PrometheusClient, PromError> {
        let base = parse_base(base_url)?;
        let endpoint = base.join("api/v1/query").map_err(|e| PromError::Config {
            url: base.to_string(),
            why: e.to_string(),
        })?;
        let shown = endpoint.to_string();
        let config = |why: String| PromError::Config {
            url: shown.clone(),
            why,
        };

        let mut secrets = Secrets::default();
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let sensitive = |value: &str, what: &str| {
            let mut v = HeaderValue::from_str(value).map_err(|_| {
                config(format!(
                    "{what} contains characters that cannot be sent in an HTTP header"
                ))
            })?;
            v.set_sensitive(true);
            Ok::<_, PromError>(v)
        };
        match &options.auth {
            None => {}
            Some(Auth::Bearer(token)) => {
                let token = token.expose().trim();
                if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(config(
                        "a bearer token must be one word of printable ASCII".into(),
                    ));
                }
                secrets.add(token);
                headers.insert(
                    AUTHORIZATION,
                    sensitive(&format!("Bearer {token}"), "the bearer token")?,
                );
            }
            Some(Auth::Basic { username, password }) => {
                if username.contains(':') {
                    return Err(config("a basic-auth username cannot contain ':'".into()));
                }
                secrets.add(password.expose());
                let encoded = base64(format!("{username}:{}", password.expose()).as_bytes());
                secrets.add(&encoded);
                headers.insert(
                    AUTHORIZATION,
                    sensitive(&format!("Basic {encoded}"), "the basic-auth credentials")?,
                );
            }
        }
        for (name, value) in &options.headers {
            let header = HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| config(format!("{name:?} is not an HTTP header name")))?;
            if header == AUTHORIZATION && options.auth.is_some() {
                return Err(config(
                    "an Authorization header and bearer or basic auth were both given".into(),
                ));
            }
            secrets.add(value.expose());
            headers.append(
                header,
                sensitive(value.expose(), &format!("the value of header {name}"))?,
            );
        }

        // reqwest panics when it builds a client (even one only used for http://) without a
        // process-wide rustls crypto provider; the binary installs one at start. Say so instead.
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            return Err(config(
                "no TLS crypto provider is installed in this process (a bug in the program that embeds this client)".into(),
            ));
        }
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(options.timeout)
            .connect_timeout(options.timeout.min(MAX_CONNECT_TIMEOUT))
            .user_agent(concat!("greenlight/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| config(chain(&e.without_url())))?;
        Ok(PrometheusClient {
            client,
            endpoint,
            shown,
            timeout: options.timeout,
            max_body_bytes: options.max_body_bytes,
            secrets,
        })
    }

    /// The query endpoint, as errors name it.
    pub fn endpoint(&self) -> &str {
        &self.shown
    }

    /// Evaluates `promql` at `at` (Prometheus' own clock when `None`, which spares the
    /// comparison any skew between the two machines) and decodes the answer: see
    /// [`crate::decode`] for how each result type becomes a measurement.
    pub async fn query(
        &self,
        promql: &str,
        at: Option<SystemTime>,
    ) -> Result<QueryResult, PromError> {
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.append_pair("query", promql);
        if let Some(at) = at {
            form.append_pair("time", &unix_seconds(at));
        }
        let params = form.finish();

        let mut response = self.send(Method::POST, &params).await?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            response = self.send(Method::GET, &params).await?;
        }
        let status = response.status().as_u16();
        let body = self.read_body(response).await?;
        decode(&self.shown, status, &body, &self.secrets)
    }

    async fn send(&self, method: Method, params: &str) -> Result<reqwest::Response, PromError> {
        let request = if method == Method::GET {
            let mut url = self.endpoint.clone();
            url.set_query(Some(params));
            self.client.get(url)
        } else {
            self.client
                .request(method, self.endpoint.clone())
                .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(params.to_string())
        };
        request.send().await.map_err(|e| self.failed(e))
    }

    async fn read_body(&self, mut response: reqwest::Response) -> Result<Vec<u8>, PromError> {
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.failed(e))? {
            if body.len() + chunk.len() > self.max_body_bytes {
                return Err(PromError::TooLarge {
                    url: self.shown.clone(),
                    limit: self.max_body_bytes,
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// What a failed request says: the endpoint as shown (reqwest's own message would name
    /// the URL with its query string), the cause scrubbed of secrets.
    fn failed(&self, e: reqwest::Error) -> PromError {
        let url = self.shown.clone();
        if e.is_connect() {
            PromError::Connect {
                url,
                what: self.secrets.scrub(&innermost(&e)),
            }
        } else if e.is_timeout() {
            PromError::Timeout {
                url,
                after: self.timeout,
            }
        } else {
            PromError::Transport {
                url,
                what: self.secrets.scrub(&chain(&e.without_url())),
            }
        }
    }
}

/// `time` as Prometheus reads it: Unix seconds with a fraction.
fn unix_seconds(at: SystemTime) -> String {
    let secs = match at.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(before) => -before.duration().as_secs_f64(),
    };
    format!("{secs:.3}")
}

fn parse_base(base_url: &str) -> Result<Url, PromError> {
    let refuse = |why: &str| PromError::Config {
        // Not known to be a URL yet: redacted as text.
        url: greenlight_core::repo_url::redact(base_url.trim()),
        why: why.to_string(),
    };
    let mut url = Url::parse(base_url.trim()).map_err(|e| refuse(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refuse("use an http:// or https:// URL"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse(
            "credentials do not belong in the URL; give them as basic auth or a bearer token",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(refuse("the URL must not have a query or fragment"));
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }

    #[test]
    fn the_endpoint_keeps_a_path_prefix() {
        provider();
        for (base, endpoint) in [
            (
                "http://127.0.0.1:9090",
                "http://127.0.0.1:9090/api/v1/query",
            ),
            ("http://prom:9090/", "http://prom:9090/api/v1/query"),
            (
                "https://example.com/prometheus",
                "https://example.com/prometheus/api/v1/query",
            ),
        ] {
            let c = PrometheusClient::new(base, ClientOptions::default()).unwrap();
            assert_eq!(c.endpoint(), endpoint);
        }
    }

    #[test]
    fn bad_base_urls_are_refused_without_showing_credentials() {
        provider();
        for (base, needle) in [
            ("ftp://prom", "http:// or https://"),
            ("https://u:pw-secret@prom", "credentials do not belong"),
            ("https://tok-secret@prom", "credentials do not belong"),
            ("http://prom?x=1", "query or fragment"),
            ("prom:9090", "http:// or https://"),
        ] {
            let e = PrometheusClient::new(base, ClientOptions::default()).unwrap_err();
            let text = format!("{e} {e:?}");
            assert!(text.contains(needle), "{base}: {text}");
            assert!(!text.contains("secret"), "{base}: {text}");
        }
    }

    #[test]
    fn bad_credentials_and_headers_are_refused_without_quoting_them() {
        provider();
        let with = |auth: Option<Auth>, headers: Vec<(&str, &str)>| {
            PrometheusClient::new(
                "http://prom:9090",
                ClientOptions {
                    auth,
                    headers: headers
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), Secret::new(v)))
                        .collect(),
                    ..ClientOptions::default()
                },
            )
        };
        let cases = [
            with(Some(Auth::Bearer("two-part secret\n".into())), vec![]),
            with(Some(Auth::Bearer("  ".into())), vec![]),
            with(
                Some(Auth::Basic {
                    username: "a:b".into(),
                    password: "secret".into(),
                }),
                vec![],
            ),
            with(None, vec![("X-Key", "line\nsecret")]),
            with(None, vec![("bad header", "secret")]),
            with(
                Some(Auth::Bearer("secret".into())),
                vec![("Authorization", "Bearer other-secret")],
            ),
        ];
        for result in cases {
            let e = result.unwrap_err();
            let text = format!("{e} {e:?}");
            assert!(matches!(e, PromError::Config { .. }), "{text}");
            assert!(!text.contains("secret"), "{text}");
        }
        let ok = with(
            Some(Auth::Basic {
                username: "reader".into(),
                password: "pw-secret".into(),
            }),
            vec![("X-Scope-OrgID", "tenant-a")],
        )
        .unwrap();
        assert!(!format!("{ok:?}").contains("secret"));
    }

    #[test]
    fn time_is_unix_seconds_with_milliseconds() {
        let at = UNIX_EPOCH + Duration::from_millis(1_796_317_327_034);
        assert_eq!(unix_seconds(at), "1796317327.034");
        assert_eq!(unix_seconds(UNIX_EPOCH), "0.000");
    }
}
