//! What can go wrong resolving a tag, each naming the image (`registry/repository:tag`) or the
//! URL involved. Holds no token: the only token-bearing value, `BearerToken`, is never placed
//! here, and a token service's answer is described, never quoted.

use reqwest::StatusCode;

/// Why a tag could not be resolved to a digest.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The HTTP client could not be built (no TLS crypto provider installed, say).
    #[error("cannot build the HTTP client")]
    Client(#[source] reqwest::Error),

    /// The image's registry and repository make no valid URL.
    #[error("bad registry URL for {target}: {why}")]
    Url { target: String, why: String },

    /// No answer: connection refused, TLS failure, timeout.
    #[error("{method} {url} failed")]
    Request {
        method: String,
        url: String,
        #[source]
        source: reqwest::Error,
    },

    /// The registry has no manifest for the tag.
    #[error("the registry has no manifest for {target} (HTTP 404)")]
    NotFound { target: String },

    /// The registry refused the caller's token. `token_source` says where it came from.
    #[error("the registry refused the token from {token_source} for {target} (HTTP {status})")]
    TokenRefused {
        token_source: String,
        target: String,
        status: StatusCode,
    },

    /// The registry wants credentials and none were given.
    #[error("the registry requires credentials for {target} (HTTP {status})")]
    CredentialsRequired { target: String, status: StatusCode },

    /// Any other unsuccessful answer to the manifest request.
    #[error("the registry answered HTTP {status} for {target}")]
    Status { target: String, status: StatusCode },

    /// The manifest body broke off.
    #[error("reading the manifest of {target}")]
    Body {
        target: String,
        #[source]
        source: reqwest::Error,
    },

    /// The manifest is larger than any registry may serve.
    #[error("the manifest of {target} is larger than {max} bytes")]
    TooLarge { target: String, max: usize },

    /// The registry's digest header disagrees with the bytes it sent.
    #[error(
        "the registry reports digest {reported} for {target} but the manifest it sent hashes to {computed}"
    )]
    DigestMismatch {
        target: String,
        reported: String,
        computed: String,
    },

    /// A `Docker-Content-Digest` header that is no digest.
    #[error("the registry sent a bad Docker-Content-Digest: {reason}")]
    BadDigestHeader { reason: String },

    /// The challenge's token realm cannot be asked.
    #[error("the registry's token realm `{realm}` {why}")]
    BadRealm { realm: String, why: String },

    /// The token realm did not answer.
    #[error("asking {realm} for an anonymous pull token")]
    TokenRequest {
        realm: String,
        #[source]
        source: reqwest::Error,
    },

    /// The token realm refused an anonymous token: the repository needs credentials.
    #[error("the token service {realm} refused an anonymous token for `{scope}` (HTTP {status})")]
    AnonymousRefused {
        realm: String,
        scope: String,
        status: StatusCode,
    },

    /// The token realm answered with something that is no usable token.
    #[error("the token service {realm} {what}")]
    BadTokenAnswer { realm: String, what: &'static str },

    /// The caller's token cannot travel in an HTTP header.
    #[error("{token_source}: a token must be printable ASCII, with no spaces or line breaks")]
    UnusableToken { token_source: String },
}

impl RegistryError {
    /// Whether giving a token would help: the registry or its token service refused an
    /// anonymous pull. Callers add how to give one.
    pub fn needs_credentials(&self) -> bool {
        matches!(
            self,
            RegistryError::CredentialsRequired { .. } | RegistryError::AnonymousRefused { .. }
        )
    }
}
