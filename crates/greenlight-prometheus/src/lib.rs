//! A small Prometheus HTTP API client for the promotion gate's Prometheus check: one instant
//! query (`/api/v1/query`) with a per-request timeout and optional bearer token, basic auth or
//! extra headers, its answer decoded the way Argo Rollouts' Prometheus provider decodes it —
//! a scalar is one float, a vector one float per series, a matrix every value; a string
//! result and Prometheus' `status: "error"` are errors ([`decode`] has the rules).
//!
//! Owns the HTTP exchange and the decoding. Judging a measurement against a condition is the
//! analysis engine's job; reading credentials from files and printing are the binary's.
//!
//! Must never: put a token, password or extra header value in an error, a log or a `Debug`
//! string (they travel only as sensitive headers, and server text is scrubbed of them before
//! an error quotes it); accept credentials inside the URL (they would show wherever the URL
//! does); read more than [`ClientOptions::max_body_bytes`] of an answer; or install a TLS
//! crypto provider (the binary does that, before [`PrometheusClient::new`]).

mod auth;
mod client;
pub mod decode;
mod error;

pub use auth::{Auth, Secret};
pub use client::{ClientOptions, PrometheusClient};
pub use decode::{QueryResult, ResultType, ResultValue, Sample, Series};
pub use error::PromError;
