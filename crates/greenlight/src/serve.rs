//! `--listen`'s HTTP listener: `/metrics` and the probes `/healthz`, `/readyz`, `/startupz`
//! over one [`Metrics`] (`docs/metrics.md`), which it only reads; and the push hooks
//! (`crate::hooks`, `docs/deploy.md#push-hooks`), which ask the runtime for a fetch.
//!
//! `/metrics` answers in OpenMetrics text when the scraper asks for it (Prometheus does, in its
//! `Accept` header), else in Prometheus' classic text format (version 0.0.4). A probe answers
//! 200 `ok`, or 503 with a short plain-text reason.

use crate::metrics::{Metrics, OPENMETRICS_CONTENT_TYPE, PROMETHEUS_TEXT_CONTENT_TYPE, Probe};
use anyhow::Result;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::net::SocketAddr;
use std::sync::Arc;

/// Bind `addr` for `flag` (`--listen`): an address in use, or not this host's, is a usage error
/// naming the flag.
pub async fn bind(flag: &str, addr: SocketAddr) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| crate::usage(format!("{flag} {addr}: cannot listen there: {e}")))
}

/// The routes, over `metrics`, and the push hooks (`crate::hooks`) when any is configured.
pub fn router(metrics: Arc<Metrics>, hooks: Option<Arc<crate::hooks::PushHooks>>) -> Router {
    let hooks = hooks.map(|h| h.routes()).unwrap_or_default();
    Router::new()
        .route("/metrics", get(metrics_page))
        .route(
            "/healthz",
            get(|State(m): State<Arc<Metrics>>| async move { probe(m.healthz()) }),
        )
        .route(
            "/readyz",
            get(|State(m): State<Arc<Metrics>>| async move { probe(m.readyz()) }),
        )
        .route(
            "/startupz",
            get(|State(m): State<Arc<Metrics>>| async move { probe(m.startupz()) }),
        )
        .with_state(metrics)
        .merge(hooks)
}

/// Serve on `listener` until the process ends; a failure of the listener is returned.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    hooks: Option<Arc<crate::hooks::PushHooks>>,
) -> Result<()> {
    axum::serve(listener, router(metrics, hooks)).await?;
    Ok(())
}

async fn metrics_page(State(m): State<Arc<Metrics>>, headers: HeaderMap) -> Response {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let content_type = if openmetrics {
        OPENMETRICS_CONTENT_TYPE
    } else {
        PROMETHEUS_TEXT_CONTENT_TYPE
    };
    (
        [(header::CONTENT_TYPE, content_type)],
        m.render(openmetrics),
    )
        .into_response()
}

fn probe(p: Probe) -> Response {
    let (status, text) = match p {
        Probe::Ok(t) => (StatusCode::OK, t),
        Probe::Not(t) => (StatusCode::SERVICE_UNAVAILABLE, t),
    };
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{text}\n"),
    )
        .into_response()
}
