//! greenlight's Kubernetes face.
//!
//! - [`client`]: a `kube::Client` from `--kubeconfig`, else `$KUBECONFIG` / `~/.kube/config`,
//!   else the pod's service account (in-cluster), with errors that say which was tried and why it
//!   failed.

pub mod client;

pub use client::{ClientError, client};
