//! What can go wrong asking Prometheus, each naming the endpoint asked (never with credentials:
//! the client refuses URLs that carry them) and what failed. Holds no secret: the token,
//! password and extra header values never enter an error, and text that comes from the server
//! (an error message, the start of a body) has them scrubbed before it is kept here.

use std::time::Duration;

/// Why a query produced no measurement.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PromError {
    /// The client cannot be built as configured: a bad URL, header or credential.
    #[error("Prometheus client for {url}: {why}")]
    Config { url: String, why: String },

    /// No connection: refused, unresolvable host, TLS failure, connect timeout.
    #[error("cannot connect to Prometheus at {url}: {what}")]
    Connect { url: String, what: String },

    /// Connected, but the whole answer did not arrive within the request timeout.
    #[error("Prometheus at {url} did not answer within {}", humantime::format_duration(*after))]
    Timeout { url: String, after: Duration },

    /// The connection failed after it was made (reset, closed mid-answer).
    #[error("asking Prometheus at {url} failed: {what}")]
    Transport { url: String, what: String },

    /// An unsuccessful HTTP answer that is not Prometheus' own error JSON (a proxy's 502, an
    /// auth gateway's 401). `body` is the start of the answer, secrets scrubbed.
    #[error("Prometheus at {url} answered HTTP {status}{}{}", reason(*status), colon(body))]
    Status {
        url: String,
        status: u16,
        body: String,
    },

    /// Prometheus refused or failed the query: `status: "error"`, with its `errorType`
    /// (`bad_data`, `execution`, `timeout`, `canceled`, …) and `error` message.
    #[error("Prometheus at {url} rejected the query (HTTP {status}, {error_type}): {message}")]
    Query {
        url: String,
        status: u16,
        error_type: String,
        message: String,
    },

    /// A successful HTTP answer that is not the API's JSON, or JSON of the wrong shape
    /// (a sample value that is no number, say).
    #[error("Prometheus at {url} answered with bad JSON: {why}")]
    BadJson { url: String, why: String },

    /// A result type that yields no measurement: a `string`, or anything unknown.
    #[error(
        "Prometheus at {url} answered a {result_type} result; only scalar, vector and matrix results can be measured"
    )]
    UnsupportedResult { url: String, result_type: String },

    /// The answer is larger than the client reads.
    #[error("Prometheus at {url} sent more than {} MiB; the answer was not read", limit >> 20)]
    TooLarge { url: String, limit: usize },
}

impl PromError {
    /// The HTTP status, when Prometheus (or something in front of it) answered with one.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            PromError::Status { status, .. } | PromError::Query { status, .. } => Some(*status),
            _ => None,
        }
    }
}

fn colon(message: &str) -> String {
    if message.is_empty() {
        String::new()
    } else {
        format!(": {message}")
    }
}

fn reason(status: u16) -> String {
    reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .map(|r| format!(" {r}"))
        .unwrap_or_default()
}
