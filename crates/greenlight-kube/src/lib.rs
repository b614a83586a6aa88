//! greenlight's Kubernetes face.
//!
//! - [`client`]: a `kube::Client` from `--kubeconfig`, else `$KUBECONFIG` / `~/.kube/config`,
//!   else the pod's service account (in-cluster), with errors that say which was tried and why it
//!   failed.
//! - [`source`]: Argo CD's Applications read from the Kubernetes API (list, then watch) as the
//!   watchdog's Application source, on the same vouching rules as Argo CD's REST API.
//! - [`events`]: every watch transition also an `events.k8s.io/v1` Event regarding its
//!   Application, aggregated into series as client-go does, written by a task of its own
//!   (`docs/events.md`).
//! - [`lease`]: leader election on a `coordination.k8s.io/v1` Lease (client-go's semantics on
//!   monotonic clocks), a [`lease::Leadership`] with its deadline and a [`lease::Guard`] thread
//!   that acts when it passes, and who leads for probes and metrics.
//! - [`workloads`]: a Deployment's, StatefulSet's or DaemonSet's live object and the Pods it
//!   owns with the `imageID` each container runs (`greenlight verify --source kube`), and one
//!   Application read once.
//! - [`audit`]: every Application and Image Updater's `ImageUpdater` resources, listed page by
//!   page, for `greenlight audit --source kube`.

pub mod audit;
pub mod client;
pub mod events;
pub mod lease;
pub mod source;
pub mod workloads;

pub use client::{ClientError, client};
pub use lease::{
    Guard, LeaderObserver, Leadership, LeaseConfig, LeaseConfigError, LeaseElector, LeaseError,
    LostReason, MonotonicClock, Role, SystemClock,
};
pub use source::{KubeSource, KubeSourceOptions, application_resource};
pub use workloads::{
    ContainerImage, PodImages, ReadError, Workload, WorkloadKind, get_application, get_workload,
    pods_of,
};
