//! greenlight's Kubernetes face.
//!
//! - [`client`]: a `kube::Client` from `--kubeconfig`, else `$KUBECONFIG` / `~/.kube/config`,
//!   else the pod's service account (in-cluster), with errors that say which was tried and why it
//!   failed.
//! - [`source`]: Argo CD's Applications read from the Kubernetes API (list, then watch) as the
//!   watchdog's Application source, on the same vouching rules as Argo CD's REST API.

pub mod client;
pub mod source;

pub use client::{ClientError, client};
pub use source::{KubeSource, KubeSourceOptions, application_resource};
