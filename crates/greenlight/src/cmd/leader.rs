//! `watch --leader-elect`: one of several replicas (docs/deploy.md#leader). The replica stands by
//! — its source warm, its clone fetched, nothing judged, written or pushed — until it holds the
//! Lease (`greenlight_kube::lease`); then it opens the cluster store and runs the runtime with
//! the recorded times of every watch in flight. When it can no longer renew the Lease it exits
//! ([`EXIT_LEASE_LOST`]) at its renew deadline, before any standby may take the Lease over, from
//! a thread of its own that does not wait for the runtime: nothing this process started (a git
//! push under way included) outlives it, and the container restarts as a standby. If two ever
//! overlap anyway, each store write is conditioned on the object's resourceVersion and a revert
//! is pushed fast-forward only, and adopted by its trailer when it is already there.

use crate::cmd::args::Election;
use crate::cmd::usage;
use crate::cmd::watch::SourceSpec;
use anyhow::Result;
use greenlight::clock::Clock;
use greenlight::metrics::{Metrics, Role};
use greenlight::output::Output;
use greenlight::runtime::{self, DaemonConfig};
use greenlight::store::kube::KubeStore;
use greenlight_kube::lease::{LeaseConfig, LeaseElector};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The exit status of a leader that lost its Lease (EX_TEMPFAIL: the container restarts and
/// stands by).
pub const EXIT_LEASE_LOST: i32 = 75;

/// What an elected replica needs besides the runtime's settings.
pub struct Elected {
    pub election: Election,
    pub kubeconfig: Option<PathBuf>,
    pub namespace: Option<String>,
    pub store_name: String,
}

impl Elected {
    /// Stand by, lead when elected, until `stop` (SIGTERM, a re-exec) — then give the Lease up
    /// for a standby to take at once.
    pub async fn run(
        self,
        cfg: DaemonConfig,
        source: SourceSpec,
        out: Output,
        clock: Arc<dyn Clock>,
        metrics: Arc<Metrics>,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<()> {
        let Elected {
            election,
            kubeconfig,
            namespace,
            store_name,
        } = self;
        let client = greenlight_kube::client(kubeconfig.as_deref())
            .await
            .map_err(|e| usage(format!("--leader-elect: {e}")))?;
        let namespace = namespace.unwrap_or_else(|| client.default_namespace().to_string());
        let lease_name = election.lease_name.clone().unwrap_or(store_name.clone());
        greenlight::kube::dns_label(&lease_name)
            .map_err(|why| usage(format!("--lease-name {lease_name:?}: {why}")))?;
        let identity = election.identity.clone();
        let lease = LeaseConfig {
            lease_duration: election.lease_duration,
            renew_deadline: election.renew_deadline,
            retry_period: election.retry_period,
            ..LeaseConfig::new(&lease_name, &namespace, &identity)
        };
        let warn_out = out.clone();
        let warn_clock = clock.clone();
        let elector = LeaseElector::new(client, lease)
            .map_err(|e| usage(e.to_string()))?
            .with_warn(Arc::new(move |line: &str| {
                warn_out.warn(warn_clock.now(), line)
            }));
        let observer = elector.observer();
        metrics.set_role(Role::Standby {
            identity: identity.clone(),
            leader: observer.holder(),
        });
        out.info(
            clock.now(),
            &format!(
                "standing by as {identity} for the Lease {namespace}/{lease_name} (lease {}s, renew deadline {}s)",
                election.lease_duration.as_secs_f64(),
                election.renew_deadline.as_secs_f64()
            ),
        );
        // A takeover leaves the watches unobserved for up to a lease duration and a retry
        // period, and start-up: past --stale-after, a deadline in that gap is INCONCLUSIVE.
        let gap = election.lease_duration + election.retry_period;
        if gap.as_millis() as i64 >= cfg.stale_after_ms {
            out.warn(
                clock.now(),
                &format!(
                    "--lease-duration + --lease-retry-period ({}s) is not below --stale-after ({}s): a watch whose deadline falls while no replica leads is decided on a stale observation (INCONCLUSIVE); keep the lease shorter than --stale-after (docs/deploy.md#leader)",
                    gap.as_secs_f64(),
                    cfg.stale_after_ms as f64 / 1000.0
                ),
            );
        }
        let source = source.source(&cfg.repo).await?;
        let label = greenlight::metrics::source_label(source.app.name());
        metrics.runtime_configured(&label, cfg.fetch_interval);
        let standby = greenlight::leader::stand_by(source, metrics.clone(), label);
        if let Some(note) = runtime::warm_clone(&cfg).await? {
            out.warn(clock.now(), &note);
        }
        metrics.started();
        // Who leads, for the standby's /readyz, as the elector reads it.
        let follow = {
            let (metrics, identity, observer) =
                (metrics.clone(), identity.clone(), observer.clone());
            let every = election.retry_period;
            tokio::spawn(async move {
                loop {
                    if observer.is_leader() {
                        break;
                    }
                    metrics.set_role(Role::Standby {
                        identity: identity.clone(),
                        leader: observer.holder(),
                    });
                    tokio::time::sleep(every).await;
                }
            })
        };
        tokio::pin!(stop);
        let leadership = tokio::select! {
            l = elector.acquire() => l.map_err(|e| anyhow::anyhow!("leader election: {e}"))?,
            _ = &mut stop => {
                follow.abort();
                return Ok(());
            }
        };
        // Stopped and finished before the role says leader, so it cannot say standby after.
        follow.abort();
        let _ = follow.await;
        // From here on this process may act only while it leads: at the renew deadline the
        // guard ends it, whatever the runtime is doing.
        let guard = {
            let (out, clock, identity) = (out.clone(), clock.clone(), identity.clone());
            leadership.guard(move || {
                out.warn(
                    clock.now(),
                    &format!(
                        "{identity} lost the Lease (not renewed within --renew-deadline): exiting ({EXIT_LEASE_LOST}) so that nothing this replica started acts after another one takes over"
                    ),
                );
                std::process::exit(EXIT_LEASE_LOST);
            })
        };
        metrics.set_role(Role::Leader {
            identity: identity.clone(),
        });
        out.info(
            clock.now(),
            &format!("{identity} leads: the Lease {namespace}/{lease_name} is held"),
        );
        let lead = async {
            let source = standby.take_over().await?;
            let store = tokio::task::block_in_place(|| {
                KubeStore::connect(kubeconfig.as_deref(), Some(&namespace), &store_name)
            })?;
            let d = runtime::start_with_store(
                cfg,
                Box::new(store),
                source,
                out.clone(),
                clock.clone(),
                metrics,
            )
            .await?;
            d.run(&mut stop).await
        };
        let ended = tokio::select! {
            r = lead => r,
            why = leadership.lost() => {
                // The guard fires too; this is the same end, said with the reason.
                out.warn(
                    clock.now(),
                    &format!("{identity} lost the Lease ({why}): exiting ({EXIT_LEASE_LOST})"),
                );
                std::process::exit(EXIT_LEASE_LOST);
            }
        };
        // Stopped (SIGTERM, a re-exec) or failed: the runtime is gone, so the Lease can go to a
        // standby at once rather than when it expires.
        guard.disarm();
        match tokio::time::timeout(Duration::from_secs(5), leadership.release()).await {
            Ok(Ok(true)) => out.info(clock.now(), "the Lease is released for a standby"),
            Ok(Ok(false)) => {}
            Ok(Err(e)) => out.warn(clock.now(), &format!("releasing the Lease failed: {e}")),
            Err(_) => out.warn(clock.now(), "releasing the Lease timed out"),
        }
        ended
    }
}
