//! Leader election on a real kube-apiserver (v1.20.2 on Debian's etcd, the kit's harness):
//! electors in one process, each with its own `kube::Client`, measured with one `Instant` clock.
//! Durations are short (Lease 3 s, renew deadline 2 s, retry 0.5 s) so takeovers happen within
//! seconds; waits are bounded polls. The tests take turns (one apiserver at a time) so their
//! timings are not measured on a machine busy with the others' apiservers.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use greenlight_kube::lease::{Leadership, LeaseConfig, LeaseElector, LostReason, Role};
use greenlight_testkit::{KubeApiserver, TcpProxy};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::Client;

const NS: &str = "argocd";
const LEASE: Duration = Duration::from_secs(3);
const RENEW: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_millis(500);
/// Scheduling and request latency on a shared 2-core machine.
const SLACK: Duration = Duration::from_millis(1500);
/// The bound of every wait for something that must happen.
const WITHIN: Duration = Duration::from_secs(30);

static SERIAL: Mutex<()> = Mutex::new(());

/// One apiserver at a time, and a runtime dropped before it.
struct World {
    rt: tokio::runtime::Runtime,
    kube: KubeApiserver,
    _turn: MutexGuard<'static, ()>,
}

fn world() -> World {
    let turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kube = KubeApiserver::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    World {
        rt,
        kube,
        _turn: turn,
    }
}

fn config(name: &str, identity: &str) -> LeaseConfig {
    LeaseConfig {
        lease_duration: LEASE,
        renew_deadline: RENEW,
        retry_period: RETRY,
        ..LeaseConfig::new(name, NS, identity)
    }
}

async fn admin(kube: &KubeApiserver) -> Client {
    greenlight_kube::client(Some(kube.kubeconfig()))
        .await
        .expect("admin client")
}

/// A client of the admin kubeconfig that reaches the apiserver through `proxy` (TLS passes
/// through: the serving certificate is for 127.0.0.1, whatever the port).
async fn through(kube: &KubeApiserver, proxy: &TcpProxy) -> Client {
    let mut config = greenlight_kube::client::config(Some(kube.kubeconfig()))
        .await
        .expect("admin config");
    config.cluster_url = proxy.https_url().parse().expect("proxy URL");
    Client::try_from(config).expect("proxied client")
}

fn elector(client: &Client, name: &str, identity: &str) -> LeaseElector {
    LeaseElector::new(client.clone(), config(name, identity)).expect("valid config")
}

async fn lease(client: &Client, name: &str) -> Lease {
    Api::<Lease>::namespaced(client.clone(), NS)
        .get(name)
        .await
        .expect("read the Lease")
}

fn holder(l: &Lease) -> Option<String> {
    l.spec.as_ref().and_then(|s| s.holder_identity.clone())
}

fn transitions(l: &Lease) -> Option<i32> {
    l.spec.as_ref().and_then(|s| s.lease_transitions)
}

async fn acquire(e: &LeaseElector) -> Leadership {
    tokio::time::timeout(WITHIN, e.acquire())
        .await
        .unwrap_or_else(|_| panic!("{} did not lead within {WITHIN:?}", e.config().identity))
        .expect("acquire")
}

/// `e.acquire()` in a task of its own; the leadership and the instant it returned.
fn acquiring(e: LeaseElector) -> tokio::task::JoinHandle<(Leadership, Instant)> {
    tokio::spawn(async move {
        let l = e.acquire().await.expect("acquire");
        (l, Instant::now())
    })
}

async fn joined<T>(what: &str, task: tokio::task::JoinHandle<T>) -> T {
    tokio::time::timeout(WITHIN, task)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {WITHIN:?}"))
        .expect("task")
}

/// Polls `check` every 50 ms until it holds, for at most [`WITHIN`].
async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let end = Instant::now() + WITHIN;
    while !check().await {
        assert!(Instant::now() < end, "not within {WITHIN:?}: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn of_two_electors_one_leads_while_it_renews() {
    let w = world();
    w.rt.block_on(async {
        let client = admin(&w.kube).await;
        let a = elector(&client, "one-leads", "pod-a");
        let b = elector(&client, "one-leads", "pod-b");
        let (a_seen, b_seen) = (a.observer(), b.observer());
        let la = acquire(&a).await;
        let b_task = acquiring(b);
        // Longer than a Lease duration twice over: the standby never leads.
        let start = Instant::now();
        while start.elapsed() < 2 * LEASE {
            assert!(!b_task.is_finished(), "pod-b led while pod-a renewed");
            assert!(la.is_leading(), "pod-a lost: {:?}", la.lost_reason());
            assert_eq!(
                holder(&lease(&client, "one-leads").await).as_deref(),
                Some("pod-a")
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        assert!(
            la.renewals() >= 4,
            "renewed {} times in {:?}",
            la.renewals(),
            2 * LEASE
        );
        assert_eq!(a_seen.role(), Role::Leader);
        assert_eq!(b_seen.role().to_string(), "standby, leader is pod-a");
        assert_eq!(b_seen.holder().as_deref(), Some("pod-a"));
        let l = lease(&client, "one-leads").await;
        let spec = l.spec.as_ref().expect("spec");
        assert_eq!(spec.lease_duration_seconds, Some(3));
        assert_eq!(spec.lease_transitions, Some(0));
        assert!(spec.acquire_time.is_some() && spec.renew_time.is_some());
        b_task.abort();
    });
}

#[test]
fn a_dead_leader_is_taken_over_after_the_lease_duration() {
    let w = world();
    w.rt.block_on(async {
        let client = admin(&w.kube).await;
        let a = elector(&client, "dead-leader", "pod-a");
        let a_seen = a.observer();
        let (led_tx, led_rx) = tokio::sync::oneshot::channel();
        // The leader's task holds its leadership; aborting it drops it unreleased, as a crash.
        let a_task = tokio::spawn(async move {
            let l = a.acquire().await.expect("acquire");
            let _ = led_tx.send(());
            std::future::pending::<()>().await;
            drop(l);
        });
        tokio::time::timeout(WITHIN, led_rx)
            .await
            .expect("pod-a leads")
            .expect("sent");
        let b = elector(&client, "dead-leader", "pod-b");
        let b_seen = b.observer();
        let b_task = acquiring(b);
        until("pod-b sees pod-a lead", async || {
            b_seen.holder().as_deref() == Some("pod-a")
        })
        .await;
        // Let pod-a renew a few times with pod-b watching.
        tokio::time::sleep(LEASE / 2).await;
        assert!(!b_task.is_finished());
        assert!(a_seen.is_leader());
        let died = Instant::now();
        a_task.abort();
        let (lb, took) = joined("pod-b takes over", b_task).await;
        let after = took - died;
        println!("takeover of a dead leader: {after:?} after its death");
        assert!(
            after <= LEASE + RETRY + SLACK,
            "took {after:?} (bound {:?})",
            LEASE + RETRY + SLACK
        );
        // The dead leader was valid at its death (its last renew sent at most RENEW before),
        // and the standby waited a whole Lease duration from seeing that renew.
        assert!(after >= LEASE - RENEW, "took over after only {after:?}");
        assert!(lb.is_leading());
        let l = lease(&client, "dead-leader").await;
        assert_eq!(holder(&l).as_deref(), Some("pod-b"));
        assert_eq!(transitions(&l), Some(1));
        assert_eq!(b_seen.role(), Role::Leader);
        assert!(!a_seen.is_leader());
    });
}

/// A client as ServiceAccount `sa` in [`NS`], bound to a Role of `verbs` on Leases when given.
async fn service_account(kube: &KubeApiserver, sa: &str, verbs: Option<&str>) -> Client {
    kube.kubectl_ok(&["create", "serviceaccount", sa, "-n", NS]);
    if let Some(verbs) = verbs {
        kube.kubectl_ok(&[
            "create",
            "role",
            sa,
            "-n",
            NS,
            &format!("--verb={verbs}"),
            "--resource=leases.coordination.k8s.io",
        ]);
        kube.kubectl_ok(&[
            "create",
            "rolebinding",
            sa,
            "-n",
            NS,
            &format!("--role={sa}"),
            &format!("--serviceaccount={NS}:{sa}"),
        ]);
    }
    let token = kube.create_token(NS, sa);
    let path = kube.dir().join(format!("{sa}.kubeconfig"));
    kube.write_token_kubeconfig(&path, &token, NS);
    greenlight_kube::client(Some(&path))
        .await
        .expect("service account client")
}

/// The RBAC docs/leader-election.md gives.
const DOCUMENTED_VERBS: &str = "get,create,update";

#[test]
fn a_released_lease_is_taken_within_a_retry_period() {
    let w = world();
    w.rt.block_on(async {
        // Both electors with no more than the documented RBAC: create, renew and release work.
        let client = service_account(&w.kube, "elector", Some(DOCUMENTED_VERBS)).await;
        let a = elector(&client, "released", "pod-a");
        let la = acquire(&a).await;
        let b = elector(&client, "released", "pod-b");
        let b_seen = b.observer();
        let b_task = acquiring(b);
        until("pod-b sees pod-a lead", async || {
            b_seen.holder().as_deref() == Some("pod-a")
        })
        .await;
        let released = la.release().await.expect("release");
        assert!(released, "the Lease was still pod-a's");
        let at = Instant::now();
        let (lb, took) = joined("pod-b takes the released Lease", b_task).await;
        let after = took - at;
        println!("takeover after a release: {after:?}");
        assert!(after <= RETRY + SLACK, "took {after:?}");
        assert!(lb.is_leading());
        let l = lease(&client, "released").await;
        assert_eq!(holder(&l).as_deref(), Some("pod-b"));
        assert_eq!(transitions(&l), Some(1));
        assert!(!a.observer().is_leader());
        // It goes on renewing under that Role.
        let renewed = lb.renewals();
        until("pod-b renews", async || lb.renewals() > renewed).await;
        assert!(lb.is_leading());

        // Without a Role: an error naming the Lease and the verbs it needs, not a retry forever.
        let bare = service_account(&w.kube, "no-rbac", None).await;
        let err = tokio::time::timeout(WITHIN, elector(&bare, "released", "pod-c").acquire())
            .await
            .expect("an answer")
            .err()
            .expect("refused")
            .to_string();
        assert!(
            err.contains("argocd/released")
                && err.contains("403")
                && err.contains("get, create and update on leases.coordination.k8s.io"),
            "{err}"
        );
    });
}

#[test]
fn a_partitioned_leader_stops_before_the_standby_takes_over() {
    let w = world();
    w.rt.block_on(async {
        let target: SocketAddr = w
            .kube
            .url()
            .trim_start_matches("https://")
            .parse()
            .expect("apiserver address");
        let proxy = TcpProxy::start(target);
        let a_client = through(&w.kube, &proxy).await;
        let b_client = admin(&w.kube).await;
        let a = elector(&a_client, "partition", "pod-a");
        let la = Arc::new(acquire(&a).await);
        let (fired_tx, fired_rx) = std::sync::mpsc::channel();
        let _guard = la.guard(move || {
            let _ = fired_tx.send(Instant::now());
        });
        let lost = {
            let la = la.clone();
            tokio::spawn(async move { (la.lost().await, Instant::now()) })
        };
        let b = elector(&b_client, "partition", "pod-b");
        let b_seen = b.observer();
        let b_task = acquiring(b);
        until(
            "pod-a renews through the proxy, pod-b sees it",
            async || la.renewals() >= 2 && b_seen.holder().as_deref() == Some("pod-a"),
        )
        .await;

        proxy.cut();
        let cut = Instant::now();
        let (lb, took) = joined("pod-b takes over from the partitioned pod-a", b_task).await;

        // When pod-b led, pod-a had already stopped: its guard fired, its lost() resolved.
        let fired = fired_rx
            .try_recv()
            .expect("the guard had fired before the standby acquired");
        assert!(
            lost.is_finished(),
            "lost() had resolved before the standby acquired"
        );
        let (reason, lost_at) = lost.await.expect("lost task");
        assert_eq!(reason, LostReason::Expired);
        println!(
            "partition: pod-a stopped {:?} after the cut (guard), lost() {:?}; pod-b led {:?} \
             after the cut: margin {:?}",
            fired - cut,
            lost_at - cut,
            took - cut,
            took - fired
        );
        assert!(fired < took && lost_at < took);
        // Nothing pod-a sent after the cut got through: its last renew was sent before it, and
        // its validity ran from that send.
        assert!(la.last_renew_sent() < cut);
        assert!(la.valid_until() <= cut + RENEW);
        assert!(fired >= la.valid_until());
        assert_eq!(proxy.delivered_since_cut(), 0, "the proxy held every byte");
        assert!(!la.is_leading());
        assert!(lb.is_leading());
        let l = lease(&b_client, "partition").await;
        assert_eq!(holder(&l).as_deref(), Some("pod-b"));
        assert_eq!(transitions(&l), Some(1));

        // The partition heals: pod-a's held bytes arrive (writes with a stale resourceVersion)
        // and change nothing.
        proxy.heal();
        until("the held bytes are delivered", async || {
            proxy.delivered_since_cut() > 0
        })
        .await;
        let end = Instant::now() + 2 * RETRY;
        while Instant::now() < end {
            assert_eq!(
                holder(&lease(&b_client, "partition").await).as_deref(),
                Some("pod-b")
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(!la.is_leading() && lb.is_leading());
    });
}

#[test]
fn of_two_electors_racing_on_a_missing_lease_exactly_one_leads() {
    let w = world();
    w.rt.block_on(async {
        let (ca, cb) = (admin(&w.kube).await, admin(&w.kube).await);
        let a = elector(&ca, "race", "pod-a");
        let b = elector(&cb, "race", "pod-b");
        let (a_seen, b_seen) = (a.observer(), b.observer());
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let start = |e: LeaseElector| {
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                let l = e.acquire().await.expect("acquire");
                (l, Instant::now())
            })
        };
        let (mut ta, mut tb) = (start(a), start(b));
        let (winner, leader, loser) = tokio::time::timeout(WITHIN, async {
            tokio::select! {
                r = &mut ta => ("pod-a", r.expect("task").0, tb),
                r = &mut tb => ("pod-b", r.expect("task").0, ta),
            }
        })
        .await
        .expect("one leads");
        let start = Instant::now();
        while start.elapsed() < 2 * LEASE {
            assert!(!loser.is_finished(), "both led");
            assert!(leader.is_leading());
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let l = lease(&ca, "race").await;
        assert_eq!(holder(&l).as_deref(), Some(winner));
        assert_eq!(transitions(&l), Some(0));
        let (lead_seen, other_seen) = if winner == "pod-a" {
            (a_seen, b_seen)
        } else {
            (b_seen, a_seen)
        };
        assert_eq!(lead_seen.role(), Role::Leader);
        assert_eq!(
            other_seen.role(),
            Role::Standby {
                leader: Some(winner.into())
            }
        );
        loser.abort();
    });
}
