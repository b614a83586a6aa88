//! greenlight's test kit, for tests only: it is a dev-dependency of the crates that use it and is
//! never part of the product (`publish = false`, never linked into the `greenlight` binary).
//!
//! - [`corpus`]: where the real-world manifest corpus is, and what a test does without it.
//! - [`git`]: git run with an isolated environment (no user or system config, no inherited
//!   `GIT_*` variables, a fixed identity), a bare origin with a working clone, and a runner for
//!   fixture shell scripts.
//! - [`process`]: a child process whose output lines are collected as they arrive, waited on
//!   line by line with bounded timeouts.
//! - [`git_http`]: a git smart-HTTP remote (`git http-backend` behind a front that demands
//!   credentials) on 127.0.0.1, recording what each request carried.
//! - [`helm`]: real helm (installed by `scripts/test`) rendering charts with `helm template`.
//! - [`http`]: small blocking HTTP/1.1 requests for tests that poll a local server, and a
//!   server that never answers.
//! - [`receiver`]: a real HTTP server that records what it receives and answers each path as
//!   scripted (a status, or never: a receiver that hangs); waits woken by each request.
//! - [`kube`]: a real Kubernetes API server (Debian's etcd and kube-apiserver v1.20.2) on loopback
//!   ports, with Argo CD's Application CRD installed, an admin kubeconfig, apiserver restarts and
//!   etcd compaction.
//! - [`kubectl`]: real kubectl (installed by `scripts/test`) rendering kustomizations with
//!   `kubectl kustomize`.
//! - [`proxy`]: a TCP proxy on a loopback port whose `cut()` partitions its clients from their
//!   server (connections stay open, bytes are held) until `heal()`.
//! - [`pre_commit`]: real pre-commit (installed by `scripts/test`) run with an isolated git
//!   environment and a pre-commit home of the test's.
//! - [`prometheus`]: a real Prometheus (Debian's binary) on a loopback port, scraping an
//!   exporter whose gauges the test sets.
//! - [`registry`]: a real OCI registry (Debian's `docker-registry`) on a loopback port, and
//!   pushes of small images to it over the distribution API.
//! - [`sandbox`]: `greenlight sandbox` as a child process, started and read over HTTP.
//! - [`watch`]: `greenlight watch` as a child process and its `status --json`.
//!
//! The kit depends on no workspace crate, so any of them can use it without a cycle. What needs
//! the `greenlight` binary takes its path as an argument: callers pass
//! `env!("CARGO_BIN_EXE_greenlight")`. The in-process sandbox stays with the crates that already
//! depend on `greenlight-sandbox`.
//!
//! Waits never sleep and hope: each one watches for an observable line or state and fails,
//! showing what it saw, when its bound runs out.

pub mod corpus;
pub mod git;
pub mod git_http;
pub mod helm;
pub mod http;
pub mod kube;
pub mod kubectl;
pub mod pre_commit;
pub mod process;
pub mod prometheus;
pub mod proxy;
pub mod receiver;
pub mod registry;
pub mod sandbox;
pub mod watch;

pub use corpus::corpus;
pub use git::{IDENTITY_EMAIL, IDENTITY_NAME, Remote, ScriptFixture, git, git_cmd, isolate};
pub use git_http::GitHttpServer;
pub use http::{Response, SilentServer, http_get, http_post, http_request, http_send};
pub use kube::KubeApiserver;
pub use process::Proc;
pub use prometheus::{BasicAuthUser, Exporter, Prometheus};
pub use proxy::TcpProxy;
pub use receiver::{Answer, Received, Receiver};
pub use registry::{ManifestKind, Registry};
pub use sandbox::{Sandbox, healthy_at};
pub use watch::{TERMINAL_STATES, Watchdog, status_json, wait_state, watch_args, watch_of};
