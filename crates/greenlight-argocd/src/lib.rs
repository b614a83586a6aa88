//! greenlight's window on Argo CD: the Application model (partial, tolerant serde types), its
//! reduction to the [`greenlight_core::snapshot::AppSnapshot`] the judge reads, and a client for
//! Argo CD's REST API. It reports what Argo CD says; judging it is the core's job.

pub mod audit;
pub mod client;
pub mod model;
pub mod snapshot;
pub mod source;

pub use client::{
    ArgoClient, ArgoError, CaBundle, ClientOptions, EventKind, ItemError, NOT_A_JWT, StreamEvent,
    StreamItem, looks_like_jwt,
};
pub use model::{Application, ResourceTree};
pub use snapshot::{leave_out_ignored, needs_managed_resources, needs_resource_tree, snapshot};
pub use source::{ArgoSource, repo_spelling};
