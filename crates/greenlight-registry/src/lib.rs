//! A minimal OCI distribution client: it asks a registry which manifest digest a tag names
//! right now (`HEAD`, or `GET` and hash, `/v2/<repository>/manifests/<tag>`), with a bearer
//! token from the caller or the registry's anonymous token dance. That is all `greenlight
//! guard image --resolve` needs to pin a reference.
//!
//! Owns the HTTP details of that exchange: the URL, the manifest media types, the token
//! challenge, the size bound, checking the registry's digest against the bytes it sent.
//! Parsing and judging image references is `greenlight_core::image`'s job; reading the token
//! file and printing are the binary's.
//!
//! Must never: put a token in an error, a log or a `Debug` string (tokens only ever travel
//! as an `Authorization` header); send the caller's token anywhere but the registry itself
//! (the token realm a registry names only ever gets anonymous requests); read more than
//! [`MANIFEST_MAX_BYTES`] of a manifest; or install a TLS crypto provider (the binary
//! does that, before [`RegistryClient::new`]).

mod client;
mod error;
mod token;

pub use client::{ClientOptions, MANIFEST_MAX_BYTES, RegistryClient};
pub use error::RegistryError;
pub use token::BearerToken;
