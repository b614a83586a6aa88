//! The manifest exchange: `HEAD` for the `Docker-Content-Digest` header, `GET` and hash when a
//! registry sends none, and one retry with an anonymous token when the registry challenges.
//! Must never follow a challenge with the caller's token (it goes to the registry only), nor
//! trust a digest header the bytes it came with contradict.

use crate::error::RegistryError;
use crate::token::{BearerChallenge, BearerToken, bearer_header};
use greenlight_core::image::{DEFAULT_REGISTRY, ImageRef, validate_digest};
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use sha2::{Digest as _, Sha256};
use std::time::Duration;

/// Every manifest type a deploy may point at: multi-arch indexes first, since a tag that names
/// an index must be pinned to the index digest, not to one platform's manifest.
const MANIFEST_TYPES: &str = "application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json, \
     application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json";

/// The distribution spec lets registries refuse manifests over 4 MiB; anything larger is not a
/// manifest, and reading it whole would let a hostile server exhaust memory.
pub const MANIFEST_MAX_BYTES: usize = 4 * 1024 * 1024;

/// A token service's answer is a few KiB (a JWT and its lifetime); one over this is refused
/// unread rather than held whole.
pub const TOKEN_ANSWER_MAX_BYTES: usize = 1024 * 1024;

/// Connecting never waits longer than this, even under a longer request timeout: a registry
/// that does not accept a connection in 10 s is down, not slow.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How to reach registries.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Plain HTTP instead of HTTPS (a local registry).
    pub plain_http: bool,
    /// The longest one request may take, connection included.
    pub timeout: Duration,
    /// Sent to every registry asked; without it, pulls are anonymous.
    pub token: Option<BearerToken>,
}

/// Resolves tags to digests. Build one per run; it keeps a connection pool.
pub struct RegistryClient {
    client: reqwest::Client,
    scheme: &'static str,
    token: Option<BearerToken>,
}

impl RegistryClient {
    /// Builds the client. A rustls crypto provider must be installed first (reqwest is built
    /// without a default one).
    pub fn new(options: ClientOptions) -> Result<RegistryClient, RegistryError> {
        let client = reqwest::Client::builder()
            .timeout(options.timeout)
            .connect_timeout(options.timeout.min(MAX_CONNECT_TIMEOUT))
            .user_agent(concat!("greenlight/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(RegistryError::Client)?;
        Ok(RegistryClient {
            client,
            scheme: if options.plain_http { "http" } else { "https" },
            token: options.token,
        })
    }

    /// The digest (`sha256:…`) the registry serves for `image`'s tag (`latest` when it has
    /// none). A reference that already has a digest is asked about by its tag all the same;
    /// callers that trust the digest do not call this.
    pub async fn resolve(&self, image: &ImageRef) -> Result<String, RegistryError> {
        let reference = image.tag().unwrap_or("latest");
        let target = format!("{}/{}:{reference}", image.registry(), image.repository());
        let url = format!(
            "{}://{}/v2/{}/manifests/{reference}",
            self.scheme,
            api_host(image.registry()),
            image.repository()
        );
        let url = Url::parse(&url).map_err(|e| RegistryError::Url {
            target: target.clone(),
            why: e.to_string(),
        })?;
        let mut auth = self.token.as_ref().map(BearerToken::header);

        // HEAD first: the digest is in a header, and Docker Hub does not count a HEAD as a pull.
        let mut response = self.manifest(Method::HEAD, &url, auth.as_ref()).await?;
        if response.status() == StatusCode::UNAUTHORIZED
            && self.token.is_none()
            && let Some(challenge) = BearerChallenge::from_headers(response.headers())
        {
            auth = Some(self.anonymous_token(&challenge, image).await?);
            response = self.manifest(Method::HEAD, &url, auth.as_ref()).await?;
        }
        self.check_status(response.status(), &target)?;
        if response.status().is_success()
            && let Some(digest) = reported_digest(response.headers())?
        {
            return Ok(digest);
        }

        // No usable digest header (or HEAD refused): fetch the manifest and hash it ourselves.
        let mut response = self.manifest(Method::GET, &url, auth.as_ref()).await?;
        self.check_status(response.status(), &target)?;
        if !response.status().is_success() {
            return Err(RegistryError::Status {
                target,
                status: response.status(),
            });
        }
        let reported = reported_digest(response.headers())?;
        let mut body = Vec::new();
        loop {
            let chunk = response
                .chunk()
                .await
                .map_err(|source| RegistryError::Body {
                    target: target.clone(),
                    source,
                })?;
            let Some(chunk) = chunk else { break };
            if body.len() + chunk.len() > MANIFEST_MAX_BYTES {
                return Err(RegistryError::TooLarge {
                    target,
                    max: MANIFEST_MAX_BYTES,
                });
            }
            body.extend_from_slice(&chunk);
        }
        let computed = format!("sha256:{}", hex(&Sha256::digest(&body)));
        match reported {
            Some(reported) if reported.starts_with("sha256:") && reported != computed => {
                Err(RegistryError::DigestMismatch {
                    target,
                    reported,
                    computed,
                })
            }
            _ => Ok(computed),
        }
    }

    async fn manifest(
        &self,
        method: Method,
        url: &Url,
        auth: Option<&HeaderValue>,
    ) -> Result<reqwest::Response, RegistryError> {
        let mut request = self
            .client
            .request(method.clone(), url.clone())
            .header(ACCEPT, MANIFEST_TYPES);
        if let Some(auth) = auth {
            request = request.header(AUTHORIZATION, auth.clone());
        }
        request
            .send()
            .await
            .map_err(|source| RegistryError::Request {
                method: method.to_string(),
                url: url.to_string(),
                source,
            })
    }

    /// Turns the statuses that end the attempt into errors; lets success and "try GET" through.
    fn check_status(&self, status: StatusCode, target: &str) -> Result<(), RegistryError> {
        let target = target.to_string();
        match status {
            StatusCode::NOT_FOUND => Err(RegistryError::NotFound { target }),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => match &self.token {
                Some(token) => Err(RegistryError::TokenRefused {
                    token_source: token.source().to_string(),
                    target,
                    status,
                }),
                None => Err(RegistryError::CredentialsRequired { target, status }),
            },
            _ => Ok(()),
        }
    }

    /// The anonymous half of the registry token protocol: ask the challenge's realm for a pull
    /// token. Only used without a caller's token, so that token never goes to a realm the
    /// registry names.
    async fn anonymous_token(
        &self,
        challenge: &BearerChallenge,
        image: &ImageRef,
    ) -> Result<HeaderValue, RegistryError> {
        let realm_error = |why: String| RegistryError::BadRealm {
            realm: challenge.realm.clone(),
            why,
        };
        let mut realm =
            Url::parse(&challenge.realm).map_err(|e| realm_error(format!("is not a URL: {e}")))?;
        if !matches!(realm.scheme(), "http" | "https") {
            return Err(realm_error("is not http(s)".to_string()));
        }
        let scope = challenge
            .scope
            .clone()
            .unwrap_or_else(|| format!("repository:{}:pull", image.repository()));
        {
            let mut query = realm.query_pairs_mut();
            if let Some(service) = &challenge.service {
                query.append_pair("service", service);
            }
            query.append_pair("scope", &scope);
        }
        let response =
            self.client
                .get(realm)
                .send()
                .await
                .map_err(|source| RegistryError::TokenRequest {
                    realm: challenge.realm.clone(),
                    source,
                })?;
        let status = response.status();
        if !status.is_success() {
            return Err(RegistryError::AnonymousRefused {
                realm: challenge.realm.clone(),
                scope,
                status,
            });
        }
        let bad_answer = |what| RegistryError::BadTokenAnswer {
            realm: challenge.realm.clone(),
            what,
        };
        #[derive(serde::Deserialize)]
        struct TokenResponse {
            token: Option<String>,
            access_token: Option<String>,
        }
        // A token answer is a few KiB: one larger is refused unread, not held whole.
        let mut raw = Vec::new();
        let mut response = response;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|_| bad_answer("broke off its answer"))?
        {
            if raw.len() + chunk.len() > TOKEN_ANSWER_MAX_BYTES {
                return Err(bad_answer("sent an answer over 1 MiB"));
            }
            raw.extend_from_slice(&chunk);
        }
        let body: TokenResponse =
            serde_json::from_slice(&raw).map_err(|_| bad_answer("sent no JSON token"))?;
        let Some(token) = body.token.or(body.access_token).filter(|t| !t.is_empty()) else {
            return Err(bad_answer("sent no token"));
        };
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad_answer("sent a token that cannot go in an HTTP header"));
        }
        Ok(bearer_header(&token))
    }
}

/// The host that serves the distribution API for `registry`: Docker Hub's API is not on
/// `docker.io` itself.
fn api_host(registry: &str) -> &str {
    if registry == DEFAULT_REGISTRY {
        "registry-1.docker.io"
    } else {
        registry
    }
}

/// The `Docker-Content-Digest` header, checked against the digest grammar: a malformed one is
/// an error rather than something to print for CI to deploy.
fn reported_digest(headers: &HeaderMap) -> Result<Option<String>, RegistryError> {
    let Some(value) = headers.get("docker-content-digest") else {
        return Ok(None);
    };
    let digest = value
        .to_str()
        .map_err(|_| RegistryError::BadDigestHeader {
            reason: "it is not text".to_string(),
        })?
        .trim();
    validate_digest(digest).map_err(|reason| RegistryError::BadDigestHeader {
        reason: reason.to_string(),
    })?;
    Ok(Some(digest.to_string()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_hub_api_is_on_registry_1() {
        let hub = ImageRef::parse("nginx:1.27").unwrap();
        assert_eq!(api_host(hub.registry()), "registry-1.docker.io");
        let local = ImageRef::parse("localhost:5000/app").unwrap();
        assert_eq!(api_host(local.registry()), "localhost:5000");
    }

    #[test]
    fn reported_digest_is_validated() {
        let mut headers = HeaderMap::new();
        assert_eq!(reported_digest(&headers).unwrap(), None);
        headers.insert(
            "docker-content-digest",
            HeaderValue::from_static("sha256:abc"),
        );
        assert!(reported_digest(&headers).is_err());
        let good = format!("sha256:{}", "a".repeat(64));
        headers.insert(
            "docker-content-digest",
            HeaderValue::from_str(&good).unwrap(),
        );
        assert_eq!(reported_digest(&headers).unwrap(), Some(good));
    }

    #[test]
    fn only_anonymous_refusals_ask_for_credentials() {
        let target = "r/a:v1".to_string();
        let status = StatusCode::UNAUTHORIZED;
        assert!(
            RegistryError::CredentialsRequired {
                target: target.clone(),
                status
            }
            .needs_credentials()
        );
        let refused = RegistryError::TokenRefused {
            token_source: "--token-file t".into(),
            target,
            status,
        };
        assert!(!refused.needs_credentials());
        assert_eq!(
            refused.to_string(),
            "the registry refused the token from --token-file t for r/a:v1 (HTTP 401 Unauthorized)"
        );
    }
}
