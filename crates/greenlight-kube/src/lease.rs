//! Leader election on a `coordination.k8s.io/v1` Lease: of the replicas of `greenlight watch`, the
//! one holding the Lease leads (judges, writes state, pushes reverts); the others are standbys
//! that take the Lease over when its holder stops renewing it.
//!
//! Written on kube-rs rather than taken from a leader-election crate because the safety property
//! (a leader stops acting before any other replica can take the Lease) rests on two clocks this
//! module owns and lets tests inject ([`MonotonicClock`]), with client-go's `leaderelection`
//! semantics, immune to clock skew between pods:
//!
//! - **The leader's validity** is measured on its own monotonic clock from the instant each
//!   successful renew request was *sent*: `valid_until = sent + renew_deadline`. A renew that
//!   fails (no answer within its timeout, which is at most `retry_period`, an error) is retried
//!   every `retry_period` until `valid_until` passes; then leadership is lost. A `409 Conflict`
//!   or a read showing another holder loses it at once.
//! - **A candidate** measures the holder's expiry on *its* monotonic clock from the instant it
//!   first saw the holder's record (holderIdentity, renewTime, leaseDurationSeconds,
//!   resourceVersion) unchanged: only when that record has stayed the same for the record's
//!   `leaseDurationSeconds` does it take the Lease over, with a `PUT` conditioned on the
//!   observed `resourceVersion` (a `409` means another write came first: it goes on waiting).
//!   The `renewTime` written in the Lease is informative only: wall clocks of two pods are never
//!   compared.
//!
//! The candidate's first sight of a record comes after the leader sent the request that wrote
//! it, so a takeover happens at least `lease_duration` after that send, while the leader stopped
//! at `renew_deadline` after it: [`LeaseConfig::validate`] demands
//! `retry_period < renew_deadline < lease_duration`, and the difference is the margin for
//! clock-rate differences and the leader's own reaction. A leader acts on this through its
//! [`Leadership`]: [`Leadership::lost`] resolves when leadership ends, and a [`Guard`] (a thread
//! of its own, independent of the async runtime) calls a given function (the daemon's: exit
//! the process) as soon as the monotonic clock passes `valid_until` without an extension. A
//! fast-forward-only git push remains the fence should two leaders ever overlap.
//!
//! A graceful stop ([`Leadership::release`]) writes the Lease with an empty `holderIdentity`
//! (client-go's release shape: `leaseDurationSeconds: 1`, `renewTime` now) only while it is
//! still ours (conditioned on our last `resourceVersion`), so a standby takes over within one
//! `retry_period` on a rolling update.
//!
//! RBAC: `get`, `create` and `update` on `leases` in API group `coordination.k8s.io`, in the
//! Lease's namespace. No `list` or `watch` (the Lease is read by name every `retry_period`),
//! no `patch`, no `delete`.
//!
//! Identities must be unique per running process (the pod's name is): a process that finds its
//! own identity in the Lease takes it as its own, as client-go does after a quick restart.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;

/// client-go's default `LeaseDuration`.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// client-go's default `RenewDeadline`.
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// client-go's default `RetryPeriod`.
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// The longest lease duration: its whole seconds must fit `leaseDurationSeconds` (an `int32`).
pub const MAX_LEASE_DURATION: Duration = Duration::from_secs(i32::MAX as u64);

/// Which Lease, who we are, and the three durations of the election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    /// The Lease's name.
    pub name: String,
    /// The Lease's namespace.
    pub namespace: String,
    /// This process's identity in `holderIdentity`; unique per running process (a pod's name).
    pub identity: String,
    /// How long a candidate waits, from when it first saw the holder's record unchanged, before
    /// it takes the Lease over (`--lease-duration`).
    pub lease_duration: Duration,
    /// How long a leader's last successful renew keeps it leading, from when that request was
    /// sent (`--renew-deadline`).
    pub renew_deadline: Duration,
    /// How often a candidate reads the Lease and a leader renews it; also each request's
    /// timeout (`--lease-retry-period`).
    pub retry_period: Duration,
}

/// Why a [`LeaseConfig`] cannot elect safely; each names the flag and the values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseConfigError {
    #[error("{flag} must be greater than zero, got {value:?}")]
    NotPositive { flag: &'static str, value: Duration },
    #[error(
        "--lease-retry-period ({retry_period:?}) must be shorter than --renew-deadline \
         ({renew_deadline:?}): a leader retries a failed renew every retry period until its \
         deadline"
    )]
    RetryNotBelowRenew {
        retry_period: Duration,
        renew_deadline: Duration,
    },
    #[error(
        "--renew-deadline ({renew_deadline:?}) must be shorter than --lease-duration \
         ({lease_duration:?}): a leader must stop acting before a standby may take the Lease"
    )]
    RenewNotBelowLease {
        renew_deadline: Duration,
        lease_duration: Duration,
    },
    #[error("--lease-duration ({value:?}) must be at most {MAX_LEASE_DURATION:?}")]
    TooLong { value: Duration },
    #[error("the Lease's {what} is empty")]
    Empty { what: &'static str },
}

impl LeaseConfig {
    /// The Lease `namespace/name` for `identity`, with client-go's default durations (15 s,
    /// 10 s, 2 s).
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        identity: impl Into<String>,
    ) -> LeaseConfig {
        LeaseConfig {
            name: name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }

    /// All durations above zero, `retry_period < renew_deadline < lease_duration`, the
    /// duration within `leaseDurationSeconds`' range, and name, namespace and identity given.
    pub fn validate(&self) -> Result<(), LeaseConfigError> {
        for (flag, value) in [
            ("--lease-duration", self.lease_duration),
            ("--renew-deadline", self.renew_deadline),
            ("--lease-retry-period", self.retry_period),
        ] {
            if value.is_zero() {
                return Err(LeaseConfigError::NotPositive { flag, value });
            }
        }
        if self.retry_period >= self.renew_deadline {
            return Err(LeaseConfigError::RetryNotBelowRenew {
                retry_period: self.retry_period,
                renew_deadline: self.renew_deadline,
            });
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(LeaseConfigError::RenewNotBelowLease {
                renew_deadline: self.renew_deadline,
                lease_duration: self.lease_duration,
            });
        }
        if self.lease_duration > MAX_LEASE_DURATION {
            return Err(LeaseConfigError::TooLong {
                value: self.lease_duration,
            });
        }
        for (what, value) in [
            ("name", &self.name),
            ("namespace", &self.namespace),
            ("holder identity", &self.identity),
        ] {
            if value.trim().is_empty() {
                return Err(LeaseConfigError::Empty { what });
            }
        }
        Ok(())
    }

    /// `leaseDurationSeconds` as written: the duration's seconds, rounded up.
    pub fn lease_duration_seconds(&self) -> i32 {
        let d = self.lease_duration;
        let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        i32::try_from(secs).unwrap_or(i32::MAX)
    }
}

/// The monotonic clock the election measures with; [`SystemClock`] in the product, a manual
/// one in tests.
pub trait MonotonicClock: Send + Sync + 'static {
    fn now(&self) -> Instant;
}

/// [`std::time::Instant::now`].
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl MonotonicClock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// Why a Lease could not be used at all (retrying will not help without an operator).
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error(
        "Lease {namespace}/{name}: the API server refused {verb} ({code}: {message}); greenlight \
         needs get, create and update on leases.coordination.k8s.io in namespace {namespace}"
    )]
    Forbidden {
        namespace: String,
        name: String,
        verb: &'static str,
        code: u16,
        message: String,
    },
    #[error("Lease {namespace}/{name}: namespace {namespace} does not exist ({message})")]
    NoNamespace {
        namespace: String,
        name: String,
        message: String,
    },
    #[error("Lease {namespace}/{name}: {verb} failed: {source}")]
    Request {
        namespace: String,
        name: String,
        verb: &'static str,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("Lease {namespace}/{name}: {verb}: no answer within {timeout:?}")]
    Timeout {
        namespace: String,
        name: String,
        verb: &'static str,
        timeout: Duration,
    },
    #[error("invalid leader election settings: {0}")]
    Config(#[from] LeaseConfigError),
}

/// A warning line's sink (the daemon's `Output::warn`).
pub type Warn = Arc<dyn Fn(&str) + Send + Sync>;

/// The wall clock as `MicroTime`, for `renewTime`/`acquireTime` (informative: never compared
/// across pods).
fn wall_now() -> MicroTime {
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    MicroTime(
        k8s_openapi::jiff::Timestamp::from_microsecond(micros)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}

// ---------------------------------------------------------------------------------------------
// The decisions, free of IO: what a candidate does with what it read, and how long a leader is
// valid.

/// What a candidate compares between reads: a holder's record is "unchanged" while all of
/// these are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderRecord {
    /// `holderIdentity`; `None` when empty (released).
    pub holder: Option<String>,
    pub renew_time: Option<MicroTime>,
    pub lease_duration_seconds: Option<i32>,
    pub resource_version: Option<String>,
}

impl LeaderRecord {
    /// The record of `lease`.
    pub fn of(lease: &Lease) -> LeaderRecord {
        let spec = lease.spec.as_ref();
        LeaderRecord {
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty()),
            renew_time: spec.and_then(|s| s.renew_time.clone()),
            lease_duration_seconds: spec.and_then(|s| s.lease_duration_seconds),
            resource_version: lease.metadata.resource_version.clone(),
        }
    }
}

/// What a candidate does after a read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// There is no Lease: create it with us as holder.
    Create,
    /// Take it (a `PUT` with the observed `resourceVersion`): released, ours already, or its
    /// holder's record unchanged for its duration.
    Take,
    /// Held by `holder`; it may be taken at `expires` (our clock) if the record stays the same.
    Wait { holder: String, expires: Instant },
}

/// A candidate's memory of the last record it saw and since when (its own clock).
#[derive(Clone, Debug)]
pub struct Candidate {
    identity: String,
    own_lease_duration: Duration,
    seen: Option<(LeaderRecord, Instant)>,
}

impl Candidate {
    pub fn new(identity: impl Into<String>, own_lease_duration: Duration) -> Candidate {
        Candidate {
            identity: identity.into(),
            own_lease_duration,
            seen: None,
        }
    }

    /// Decides on `record` (`None`: no Lease) read at `now`. A record that differs from the last
    /// one seen restarts the count; a holder's duration is its record's `leaseDurationSeconds`
    /// (our own when it has none).
    pub fn decide(&mut self, record: Option<&LeaderRecord>, now: Instant) -> Decision {
        let Some(record) = record else {
            self.seen = None;
            return Decision::Create;
        };
        let since = match &self.seen {
            Some((seen, since)) if seen == record => *since,
            _ => {
                self.seen = Some((record.clone(), now));
                now
            }
        };
        let holder = match &record.holder {
            None => return Decision::Take,
            Some(h) if *h == self.identity => return Decision::Take,
            Some(h) => h.clone(),
        };
        let duration = match record.lease_duration_seconds {
            Some(s) if s > 0 => Duration::from_secs(s.unsigned_abs().into()),
            _ => self.own_lease_duration,
        };
        let expires = since + duration;
        if now >= expires {
            Decision::Take
        } else {
            Decision::Wait { holder, expires }
        }
    }

    /// Forgets what was seen (after our own write, or a lost race).
    pub fn forget(&mut self) {
        self.seen = None;
    }
}

/// The instant a leader stops being one: a renew *sent* at `sent` that succeeded extends it to
/// `sent + renew_deadline`, never shortens it.
pub fn extended(valid_until: Instant, sent: Instant, renew_deadline: Duration) -> Instant {
    valid_until.max(sent + renew_deadline)
}

// ---------------------------------------------------------------------------------------------
// Shared leadership state: atomics, so a plain thread (the guard) reads it without the async
// runtime.

/// Why leadership ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostReason {
    /// No renew succeeded before `valid_until`.
    Expired,
    /// A renew was refused (`409 Conflict`): someone else wrote the Lease.
    Conflict,
    /// A read showed another holder, or no Lease.
    Taken,
    /// [`Leadership::release`] gave it up.
    Released,
    /// The [`Leadership`] was dropped: nothing renews any more.
    Dropped,
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LostReason::Expired => "no renew succeeded before the renew deadline",
            LostReason::Conflict => "the Lease was written by someone else (409 Conflict)",
            LostReason::Taken => "the Lease names another holder",
            LostReason::Released => "released",
            LostReason::Dropped => "the leadership handle was dropped",
        })
    }
}

const LEADING: u8 = 0;

fn reason_code(r: LostReason) -> u8 {
    match r {
        LostReason::Expired => 1,
        LostReason::Conflict => 2,
        LostReason::Taken => 3,
        LostReason::Released => 4,
        LostReason::Dropped => 5,
    }
}

fn reason_of(code: u8) -> Option<LostReason> {
    Some(match code {
        1 => LostReason::Expired,
        2 => LostReason::Conflict,
        3 => LostReason::Taken,
        4 => LostReason::Released,
        5 => LostReason::Dropped,
        _ => return None,
    })
}

struct LeaderState {
    clock: Arc<dyn MonotonicClock>,
    /// Instants are kept as nanoseconds after `base`.
    base: Instant,
    valid_until: AtomicU64,
    ended: AtomicU8,
    renewals: AtomicU64,
    /// Send instant of the last successful write (acquire or renew), as nanoseconds after base
    /// (0: the acquiring write, sent at base).
    last_sent: AtomicU64,
    /// Bumped on every change, for async waiters.
    changed: watch::Sender<u64>,
    /// Guard threads to wake when leadership ends early.
    guards: Mutex<Vec<std::thread::Thread>>,
}

impl LeaderState {
    fn nanos(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX)
    }

    fn instant(&self, nanos: u64) -> Instant {
        self.base + Duration::from_nanos(nanos)
    }

    fn valid_until(&self) -> Instant {
        self.instant(self.valid_until.load(Ordering::SeqCst))
    }

    fn ended(&self) -> Option<LostReason> {
        reason_of(self.ended.load(Ordering::SeqCst))
    }

    /// Why leadership ended, if it did. Whoever first sees the clock at or past `valid_until`
    /// ends it ([`LostReason::Expired`]), so that a renew answered a moment too late cannot
    /// bring back a leadership someone already saw lost.
    fn check(&self) -> Option<LostReason> {
        if let Some(r) = self.ended() {
            return Some(r);
        }
        if self.clock.now() >= self.valid_until() {
            self.end(LostReason::Expired);
            return self.ended();
        }
        None
    }

    /// Leading: not ended and the clock before `valid_until`.
    fn leading(&self) -> bool {
        self.check().is_none()
    }

    /// A renew sent at `sent` succeeded: extends `valid_until` unless leadership is already
    /// over (ended, or the clock past `valid_until` when the answer is taken in).
    fn renewed(&self, sent: Instant, renew_deadline: Duration) {
        if self.check().is_some() {
            return;
        }
        let until = self.nanos(sent + renew_deadline);
        self.valid_until.fetch_max(until, Ordering::SeqCst);
        self.last_sent.fetch_max(self.nanos(sent), Ordering::SeqCst);
        self.renewals.fetch_add(1, Ordering::SeqCst);
        self.changed.send_modify(|v| *v += 1);
    }

    /// Ends leadership (the first reason stays) and wakes every waiter and guard.
    fn end(&self, reason: LostReason) {
        let _ = self.ended.compare_exchange(
            LEADING,
            reason_code(reason),
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        self.changed.send_modify(|v| *v += 1);
        let guards = self.guards.lock().unwrap_or_else(|e| e.into_inner());
        for t in guards.iter() {
            t.unpark();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Who leads, for metrics and probes.

/// This process's part in the election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    Leader,
    /// Not leading; the holder last read from the Lease, if any.
    Standby {
        leader: Option<String>,
    },
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Leader => f.write_str("leader"),
            Role::Standby { leader: Some(l) } => write!(f, "standby, leader is {l}"),
            Role::Standby { leader: None } => f.write_str("standby, no leader"),
        }
    }
}

#[derive(Default)]
struct Observed {
    holder: Option<String>,
    current: Option<Arc<LeaderState>>,
}

/// Who leads now, as this process knows it: a clone-able view for metrics and `/readyz`,
/// readable by standbys too (their view is refreshed each `retry_period` while
/// [`LeaseElector::acquire`] runs).
#[derive(Clone)]
pub struct LeaderObserver {
    identity: String,
    observed: Arc<Mutex<Observed>>,
}

impl LeaderObserver {
    /// The holder last read from (or written to) the Lease; `None` when it was empty or absent.
    pub fn holder(&self) -> Option<String> {
        self.lock().holder.clone()
    }

    /// Whether this process leads now (its leadership not ended, not past `valid_until`).
    pub fn is_leader(&self) -> bool {
        self.lock().current.as_ref().is_some_and(|s| s.leading())
    }

    /// [`Role::Leader`], or a standby and whom it last saw leading.
    pub fn role(&self) -> Role {
        let o = self.lock();
        if o.current.as_ref().is_some_and(|s| s.leading()) {
            return Role::Leader;
        }
        Role::Standby {
            leader: o.holder.clone().filter(|h| *h != self.identity),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Observed> {
        self.observed.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn saw(&self, holder: Option<String>) {
        self.lock().holder = holder;
    }
}

// ---------------------------------------------------------------------------------------------
// The elector.

/// Elects over one Lease with a `kube::Client`.
pub struct LeaseElector {
    api: Api<Lease>,
    config: LeaseConfig,
    clock: Arc<dyn MonotonicClock>,
    observer: LeaderObserver,
    warn: Warn,
}

impl LeaseElector {
    /// An elector on the system's monotonic clock. Fails on a config [`LeaseConfig::validate`]
    /// refuses.
    pub fn new(client: Client, config: LeaseConfig) -> Result<LeaseElector, LeaseConfigError> {
        Self::with_clock(client, config, Arc::new(SystemClock))
    }

    /// An elector measuring with `clock`.
    pub fn with_clock(
        client: Client,
        config: LeaseConfig,
        clock: Arc<dyn MonotonicClock>,
    ) -> Result<LeaseElector, LeaseConfigError> {
        config.validate()?;
        Ok(LeaseElector {
            api: Api::namespaced(client, &config.namespace),
            observer: LeaderObserver {
                identity: config.identity.clone(),
                observed: Arc::default(),
            },
            config,
            clock,
            warn: Arc::new(|_| {}),
        })
    }

    /// Where warnings go (a failed read or renew, leadership lost); none by default.
    pub fn with_warn(mut self, warn: Warn) -> LeaseElector {
        self.warn = warn;
        self
    }

    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// Who leads, for metrics and probes.
    pub fn observer(&self) -> LeaderObserver {
        self.observer.clone()
    }

    /// Returns once this identity holds the Lease, with the renew loop running on the current
    /// tokio runtime. Reads the Lease every `retry_period`; errors only on what retrying cannot
    /// mend (refused by RBAC, no such namespace); anything else is warned about and retried.
    pub async fn acquire(&self) -> Result<Leadership, LeaseError> {
        let cfg = &self.config;
        let mut candidate = Candidate::new(&cfg.identity, cfg.lease_duration);
        let mut last_warning = String::new();
        loop {
            let started = self.clock.now();
            match self.attempt(&mut candidate).await {
                Ok(Attempt::Led(leadership)) => return Ok(*leadership),
                Ok(Attempt::Again) => continue,
                Ok(Attempt::Wait) => {}
                Err(e) => {
                    if let LeaseError::Forbidden { .. } | LeaseError::NoNamespace { .. } = e {
                        return Err(e);
                    }
                    let line = format!("leader election: {e}; retrying");
                    if line != last_warning {
                        (self.warn)(&line);
                        last_warning = line;
                    }
                    candidate.forget();
                    // A retry right after a failed write would hammer; wait the period.
                }
            }
            let next = started + cfg.retry_period;
            let wait = next.saturating_duration_since(self.clock.now());
            tokio::time::sleep(wait).await;
        }
    }

    /// One read and, when the decision says so, one write.
    async fn attempt(&self, candidate: &mut Candidate) -> Result<Attempt, LeaseError> {
        let cfg = &self.config;
        let current = self.timed("get", self.api.get_opt(&cfg.name)).await?;
        let record = current.as_ref().map(LeaderRecord::of);
        self.observer
            .saw(record.as_ref().and_then(|r| r.holder.clone()));
        let decision = candidate.decide(record.as_ref(), self.clock.now());
        let (sent, written) = match decision {
            Decision::Wait { .. } => return Ok(Attempt::Wait),
            Decision::Create => {
                let lease = self.ours(None);
                let sent = self.clock.now();
                match self
                    .timed("create", self.api.create(&PostParams::default(), &lease))
                    .await
                {
                    Ok(l) => (sent, l),
                    Err(e) if e.is_conflict() => {
                        // Someone else created it first: read it again at once.
                        candidate.forget();
                        return Ok(Attempt::Again);
                    }
                    Err(e) => return Err(e),
                }
            }
            Decision::Take => {
                let Some(old) = current else {
                    return Ok(Attempt::Wait);
                };
                let lease = self.ours(Some(&old));
                let sent = self.clock.now();
                match self
                    .timed(
                        "update",
                        self.api.replace(&cfg.name, &PostParams::default(), &lease),
                    )
                    .await
                {
                    Ok(l) => (sent, l),
                    Err(e) if e.is_conflict() => {
                        // Lost the race: what we saw is stale.
                        candidate.forget();
                        return Ok(Attempt::Wait);
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        Ok(Attempt::Led(Box::new(self.lead(sent, written))))
    }

    /// The Lease with us as holder, from `old` (same `resourceVersion`, transitions counted)
    /// or new.
    fn ours(&self, old: Option<&Lease>) -> Lease {
        let cfg = &self.config;
        let now = wall_now();
        let old_spec = old.and_then(|l| l.spec.clone()).unwrap_or_default();
        let old_holder = old_spec.holder_identity.clone().filter(|h| !h.is_empty());
        let same_holder = old_holder.as_deref() == Some(cfg.identity.as_str());
        let transitions = old_spec.lease_transitions.unwrap_or(0);
        // A change of holder (from another, or from a released, empty Lease) is a transition.
        let transitions = if old.is_none() || same_holder {
            transitions
        } else {
            transitions.saturating_add(1)
        };
        let spec = LeaseSpec {
            holder_identity: Some(cfg.identity.clone()),
            lease_duration_seconds: Some(cfg.lease_duration_seconds()),
            acquire_time: if same_holder {
                old_spec.acquire_time.clone().or_else(|| Some(now.clone()))
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..old_spec
        };
        Lease {
            metadata: match old {
                Some(l) => l.metadata.clone(),
                None => ObjectMeta {
                    name: Some(cfg.name.clone()),
                    namespace: Some(cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
            },
            spec: Some(spec),
        }
    }

    /// Leadership from a write sent at `sent`; starts the renew loop.
    fn lead(&self, sent: Instant, lease: Lease) -> Leadership {
        let cfg = &self.config;
        let base = sent;
        let (changed, _) = watch::channel(0);
        let state = Arc::new(LeaderState {
            clock: self.clock.clone(),
            base,
            valid_until: AtomicU64::new(0),
            ended: AtomicU8::new(LEADING),
            renewals: AtomicU64::new(0),
            last_sent: AtomicU64::new(0),
            changed,
            guards: Mutex::new(Vec::new()),
        });
        state
            .valid_until
            .store(state.nanos(sent + cfg.renew_deadline), Ordering::SeqCst);
        {
            let mut o = self.observer.lock();
            o.holder = Some(cfg.identity.clone());
            o.current = Some(state.clone());
        }
        let last = Arc::new(Mutex::new(lease));
        let renewer = Renewer {
            api: self.api.clone(),
            config: cfg.clone(),
            clock: self.clock.clone(),
            state: state.clone(),
            last: last.clone(),
            observer: self.observer.clone(),
            warn: self.warn.clone(),
        };
        let task = tokio::spawn(renewer.run());
        Leadership {
            state,
            task: Some(task),
            last,
            api: self.api.clone(),
            config: cfg.clone(),
            clock: self.clock.clone(),
        }
    }

    async fn timed<T>(
        &self,
        verb: &'static str,
        fut: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, LeaseError> {
        timed(&self.config, verb, self.config.retry_period, fut).await
    }
}

/// What one read (and write) of [`LeaseElector::acquire`] came to.
enum Attempt {
    Led(Box<Leadership>),
    /// Not ours: read again after the retry period.
    Wait,
    /// Another created the Lease first: read it again at once.
    Again,
}

/// `fut` within `timeout`, its error named.
async fn timed<T>(
    cfg: &LeaseConfig,
    verb: &'static str,
    timeout: Duration,
    fut: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, LeaseError> {
    match tokio::time::timeout(timeout, fut).await {
        Err(_) => Err(LeaseError::Timeout {
            namespace: cfg.namespace.clone(),
            name: cfg.name.clone(),
            verb,
            timeout,
        }),
        Ok(Ok(v)) => Ok(v),
        Ok(Err(kube::Error::Api(s))) if s.code == 401 || s.code == 403 => {
            Err(LeaseError::Forbidden {
                namespace: cfg.namespace.clone(),
                name: cfg.name.clone(),
                verb,
                code: s.code,
                message: s.message.clone(),
            })
        }
        Ok(Err(kube::Error::Api(s))) if verb == "create" && s.code == 404 => {
            Err(LeaseError::NoNamespace {
                namespace: cfg.namespace.clone(),
                name: cfg.name.clone(),
                message: s.message.clone(),
            })
        }
        Ok(Err(source)) => Err(LeaseError::Request {
            namespace: cfg.namespace.clone(),
            name: cfg.name.clone(),
            verb,
            source: Box::new(source),
        }),
    }
}

impl LeaseError {
    fn is_conflict(&self) -> bool {
        self.code() == Some(409)
    }

    fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    fn code(&self) -> Option<u16> {
        match self {
            LeaseError::Request { source, .. } => match source.as_ref() {
                kube::Error::Api(s) => Some(s.code),
                _ => None,
            },
            _ => None,
        }
    }
}

/// The renew loop of one leadership.
struct Renewer {
    api: Api<Lease>,
    config: LeaseConfig,
    clock: Arc<dyn MonotonicClock>,
    state: Arc<LeaderState>,
    /// The Lease as last written by us (its `resourceVersion` conditions the next write).
    last: Arc<Mutex<Lease>>,
    observer: LeaderObserver,
    warn: Warn,
}

enum RenewFailure {
    /// Another holder or a conflicting write: lost at once.
    Lost(LostReason),
    /// Retry until the deadline.
    Transient(String),
}

impl Renewer {
    async fn run(self) {
        let cfg = &self.config;
        // After a failed attempt the stored resourceVersion may be stale (a write that timed out
        // may still have been applied): read before writing.
        let mut reread = false;
        let mut next = self.clock.now() + cfg.retry_period;
        loop {
            let left = next.saturating_duration_since(self.clock.now());
            tokio::select! {
                _ = tokio::time::sleep(left) => {}
                _ = self.ended() => {}
            }
            if let Some(reason) = self.state.check() {
                self.stopped(reason);
                return;
            }
            let sent = self.clock.now();
            next = sent + cfg.retry_period;
            // Each attempt ends by the retry period and never runs past the deadline.
            let timeout = cfg
                .retry_period
                .min(self.state.valid_until().saturating_duration_since(sent));
            let attempt = tokio::time::timeout(timeout, self.renew_once(reread));
            let outcome = tokio::select! {
                r = attempt => r,
                _ = self.ended() => {
                    if let Some(reason) = self.state.check() {
                        self.stopped(reason);
                        return;
                    }
                    continue;
                }
            };
            match outcome {
                Ok(Ok(lease)) => {
                    if self.state.ended().is_some() {
                        return;
                    }
                    *self.last.lock().unwrap_or_else(|e| e.into_inner()) = lease;
                    self.state.renewed(sent, cfg.renew_deadline);
                    self.observer.saw(Some(cfg.identity.clone()));
                    reread = false;
                }
                Ok(Err(RenewFailure::Lost(reason))) => {
                    (self.warn)(&format!(
                        "leader election: lost Lease {}/{}: {reason}",
                        cfg.namespace, cfg.name
                    ));
                    self.state.end(reason);
                    return;
                }
                Ok(Err(RenewFailure::Transient(why))) => {
                    (self.warn)(&format!(
                        "leader election: renewing Lease {}/{} failed: {why}; retrying until \
                         the renew deadline",
                        cfg.namespace, cfg.name
                    ));
                    reread = true;
                }
                Err(_) => {
                    (self.warn)(&format!(
                        "leader election: renewing Lease {}/{}: no answer within {timeout:?}; \
                         retrying until the renew deadline",
                        cfg.namespace, cfg.name
                    ));
                    reread = true;
                }
            }
        }
    }

    /// Says that leadership ran out (the guard acts on it; this is the daemon's log line).
    fn stopped(&self, reason: LostReason) {
        if reason == LostReason::Expired {
            (self.warn)(&format!(
                "leader election: lost Lease {}/{}: {reason}",
                self.config.namespace, self.config.name
            ));
        }
    }

    /// Resolves when leadership ended by other means (release, drop, expiry seen elsewhere).
    async fn ended(&self) {
        let mut rx = self.state.changed.subscribe();
        while self.state.ended().is_none() {
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    async fn renew_once(&self, reread: bool) -> Result<Lease, RenewFailure> {
        let cfg = &self.config;
        let mut lease = self.last.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let transient = |e: LeaseError| RenewFailure::Transient(e.to_string());
        if reread {
            let current = timed(cfg, "get", cfg.retry_period, self.api.get_opt(&cfg.name))
                .await
                .map_err(transient)?;
            let Some(current) = current else {
                self.observer.saw(None);
                return Err(RenewFailure::Lost(LostReason::Taken));
            };
            let record = LeaderRecord::of(&current);
            if record.holder.as_deref() != Some(cfg.identity.as_str()) {
                self.observer.saw(record.holder);
                return Err(RenewFailure::Lost(LostReason::Taken));
            }
            lease = current;
        }
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(cfg.identity.clone());
        spec.lease_duration_seconds = Some(cfg.lease_duration_seconds());
        spec.renew_time = Some(wall_now());
        match timed(
            cfg,
            "update",
            cfg.retry_period,
            self.api.replace(&cfg.name, &PostParams::default(), &lease),
        )
        .await
        {
            Ok(l) => Ok(l),
            Err(e) if e.is_conflict() => Err(RenewFailure::Lost(LostReason::Conflict)),
            Err(e) if e.is_not_found() => Err(RenewFailure::Lost(LostReason::Taken)),
            Err(e) => Err(transient(e)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Leadership and its guard.

/// This process leads until [`Leadership::valid_until`] unless a renew extends it. Dropping it
/// stops the renew loop (leadership then ends: [`LostReason::Dropped`]).
pub struct Leadership {
    state: Arc<LeaderState>,
    task: Option<tokio::task::JoinHandle<()>>,
    last: Arc<Mutex<Lease>>,
    api: Api<Lease>,
    config: LeaseConfig,
    clock: Arc<dyn MonotonicClock>,
}

impl Leadership {
    /// The monotonic instant this leadership ends unless a renew sent before it succeeds.
    pub fn valid_until(&self) -> Instant {
        self.state.valid_until()
    }

    /// Leading now: not ended and before [`Leadership::valid_until`].
    pub fn is_leading(&self) -> bool {
        self.state.leading()
    }

    /// Why it ended, once it did (by the clock alone it is [`LostReason::Expired`]).
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.state.check()
    }

    /// Successful renews so far (the acquiring write not counted).
    pub fn renewals(&self) -> u64 {
        self.state.renewals.load(Ordering::SeqCst)
    }

    /// When the last successful write (acquire or renew) was sent, on the monotonic clock.
    pub fn last_renew_sent(&self) -> Instant {
        self.state
            .instant(self.state.last_sent.load(Ordering::SeqCst))
    }

    /// Resolves when leadership is lost: at `valid_until` without an extension, or at once on a
    /// conflict, another holder, a release.
    pub async fn lost(&self) -> LostReason {
        let mut rx = self.state.changed.subscribe();
        loop {
            if let Some(reason) = self.lost_reason() {
                return reason;
            }
            let left = self
                .state
                .valid_until()
                .saturating_duration_since(self.clock.now());
            tokio::select! {
                _ = tokio::time::sleep(left) => {}
                r = rx.changed() => {
                    if r.is_err() {
                        // The sender lives in the state we hold: cannot happen; wait the clock.
                        tokio::time::sleep(left).await;
                    }
                }
            }
        }
    }

    /// A thread that calls `on_lost` once leadership is lost (see [`Guard`]).
    pub fn guard(&self, on_lost: impl FnOnce() + Send + 'static) -> Guard {
        Guard::spawn(self, on_lost)
    }

    /// Gives the Lease up for a standby to take at once: ends leadership here first (an armed
    /// [`Guard`] fires: disarm it before a graceful release), stops the renew loop, then writes
    /// the Lease with an empty holder, `leaseDurationSeconds: 1` and `renewTime` now, only while
    /// it is still ours (conditioned on our last `resourceVersion`, read again once after a
    /// conflict). `Ok(true)`: released; `Ok(false)`: it was no longer ours.
    pub async fn release(mut self) -> Result<bool, LeaseError> {
        self.state.end(LostReason::Released);
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
        let cfg = self.config.clone();
        let mut lease = self.last.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for attempt in 0..2 {
            if attempt > 0 {
                let current =
                    timed(&cfg, "get", cfg.retry_period, self.api.get_opt(&cfg.name)).await?;
                match current {
                    Some(l)
                        if LeaderRecord::of(&l).holder.as_deref()
                            == Some(cfg.identity.as_str()) =>
                    {
                        lease = l
                    }
                    _ => return Ok(false),
                }
            }
            let now = wall_now();
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(now.clone());
            spec.acquire_time = Some(now);
            match timed(
                &cfg,
                "update",
                cfg.retry_period,
                self.api.replace(&cfg.name, &PostParams::default(), &lease),
            )
            .await
            {
                Ok(_) => return Ok(true),
                Err(e) if e.is_conflict() => continue,
                Err(e) if e.is_not_found() => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            self.state.end(LostReason::Dropped);
        }
    }
}

/// A plain thread that calls a function once leadership is lost: when the monotonic clock
/// passes `valid_until` without an extension, or at once when it ends otherwise. It sleeps to
/// the deadline and re-reads atomics, so it fires even when the async runtime makes no
/// progress. Wire it right after [`LeaseElector::acquire`]:
///
/// ```no_run
/// # async fn lead(
/// #     elector: greenlight_kube::lease::LeaseElector,
/// # ) -> Result<(), greenlight_kube::lease::LeaseError> {
/// let leadership = elector.acquire().await?;
/// let guard = leadership.guard(|| std::process::exit(1));
/// // ... lead ...
/// // graceful stop: stop acting, then
/// guard.disarm();
/// leadership.release().await?;
/// # Ok(())
/// # }
/// ```
///
/// Dropping a `Guard` does not disarm it: the thread keeps guarding.
pub struct Guard {
    disarmed: Arc<AtomicBool>,
    thread: std::thread::Thread,
}

impl Guard {
    /// Starts the thread over `leadership`'s state.
    pub fn spawn(leadership: &Leadership, on_lost: impl FnOnce() + Send + 'static) -> Guard {
        let state = leadership.state.clone();
        let watched = state.clone();
        let disarmed = Arc::new(AtomicBool::new(false));
        let off = disarmed.clone();
        let handle = std::thread::Builder::new()
            .name("lease-guard".into())
            .spawn(move || {
                loop {
                    if off.load(Ordering::SeqCst) {
                        return;
                    }
                    if watched.check().is_some() {
                        break;
                    }
                    let left = watched
                        .valid_until()
                        .saturating_duration_since(watched.clock.now());
                    std::thread::park_timeout(left);
                }
                if !off.load(Ordering::SeqCst) {
                    on_lost();
                }
            })
            .expect("spawn the lease guard thread");
        let thread = handle.thread().clone();
        state
            .guards
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(thread.clone());
        // Ended before the thread was registered: wake it to look again.
        thread.unpark();
        Guard { disarmed, thread }
    }

    /// Stops guarding without calling the function (a graceful stop).
    pub fn disarm(self) {
        self.disarmed.store(true, Ordering::SeqCst);
        self.thread.unpark();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LeaseConfig {
        LeaseConfig::new("greenlight", "argocd", "pod-a")
    }

    #[test]
    fn the_defaults_are_client_gos_and_valid() {
        let c = config();
        assert_eq!(c.lease_duration, Duration::from_secs(15));
        assert_eq!(c.renew_deadline, Duration::from_secs(10));
        assert_eq!(c.retry_period, Duration::from_secs(2));
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.lease_duration_seconds(), 15);
    }

    #[test]
    fn a_zero_duration_is_refused_naming_its_flag() {
        for (flag, set) in [
            (
                "--lease-duration",
                (|c: &mut LeaseConfig| c.lease_duration = Duration::ZERO) as fn(&mut _),
            ),
            ("--renew-deadline", |c| c.renew_deadline = Duration::ZERO),
            ("--lease-retry-period", |c| c.retry_period = Duration::ZERO),
        ] {
            let mut c = config();
            set(&mut c);
            let err = c.validate().unwrap_err().to_string();
            assert!(err.starts_with(flag), "{err}");
            assert!(err.contains("0ns"), "{err}");
        }
    }

    #[test]
    fn the_order_of_the_durations_is_enforced_naming_flags_and_values() {
        let mut c = config();
        c.renew_deadline = Duration::from_secs(15);
        let err = c.validate().unwrap_err().to_string();
        assert!(
            err.contains("--renew-deadline (15s)") && err.contains("--lease-duration (15s)"),
            "{err}"
        );

        let mut c = config();
        c.retry_period = Duration::from_millis(10_500);
        let err = c.validate().unwrap_err().to_string();
        assert!(
            err.contains("--lease-retry-period (10.5s)") && err.contains("--renew-deadline (10s)"),
            "{err}"
        );

        let mut c = config();
        c.lease_duration = Duration::from_secs(3);
        c.renew_deadline = Duration::from_secs(2);
        c.retry_period = Duration::from_millis(500);
        assert_eq!(c.validate(), Ok(()));

        let mut c = config();
        c.lease_duration = MAX_LEASE_DURATION + Duration::from_secs(1);
        assert!(matches!(
            c.validate(),
            Err(LeaseConfigError::TooLong { .. })
        ));
    }

    #[test]
    fn an_empty_identity_is_refused() {
        let mut c = config();
        c.identity = " ".into();
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "the Lease's holder identity is empty"
        );
    }

    #[test]
    fn lease_duration_seconds_round_up() {
        let mut c = config();
        c.lease_duration = Duration::from_millis(2_500);
        assert_eq!(c.lease_duration_seconds(), 3);
        c.lease_duration = Duration::from_secs(3);
        assert_eq!(c.lease_duration_seconds(), 3);
    }

    /// A clock tests move by hand.
    struct ManualClock {
        base: Instant,
        offset: Mutex<Duration>,
    }

    impl ManualClock {
        fn new() -> ManualClock {
            ManualClock {
                base: Instant::now(),
                offset: Mutex::new(Duration::ZERO),
            }
        }
        fn advance(&self, d: Duration) {
            *self.offset.lock().unwrap() += d;
        }
    }

    impl MonotonicClock for ManualClock {
        fn now(&self) -> Instant {
            self.base + *self.offset.lock().unwrap()
        }
    }

    fn held_by(holder: &str, renew_us: i64, rv: &str) -> LeaderRecord {
        LeaderRecord {
            holder: Some(holder.into()),
            renew_time: Some(MicroTime(
                k8s_openapi::jiff::Timestamp::from_microsecond(renew_us).unwrap(),
            )),
            lease_duration_seconds: Some(3),
            resource_version: Some(rv.into()),
        }
    }

    #[test]
    fn a_missing_lease_is_created_and_a_released_one_taken_at_once() {
        let clock = ManualClock::new();
        let mut c = Candidate::new("b", Duration::from_secs(3));
        assert_eq!(c.decide(None, clock.now()), Decision::Create);
        let released = LeaderRecord {
            holder: None,
            ..held_by("a", 1, "7")
        };
        assert_eq!(c.decide(Some(&released), clock.now()), Decision::Take);
        // Our own identity (a restart): ours again.
        assert_eq!(
            c.decide(Some(&held_by("b", 1, "8")), clock.now()),
            Decision::Take
        );
    }

    #[test]
    fn a_holder_is_taken_over_only_after_its_record_stayed_unchanged_for_its_duration() {
        let clock = ManualClock::new();
        let start = clock.now();
        let mut c = Candidate::new("b", Duration::from_secs(15));
        let r = held_by("a", 1, "7");
        assert_eq!(
            c.decide(Some(&r), clock.now()),
            Decision::Wait {
                holder: "a".into(),
                // The record's 3 s, not our own 15 s.
                expires: start + Duration::from_secs(3)
            }
        );
        clock.advance(Duration::from_millis(2_999));
        assert!(matches!(
            c.decide(Some(&r), clock.now()),
            Decision::Wait { .. }
        ));
        clock.advance(Duration::from_millis(1));
        assert_eq!(c.decide(Some(&r), clock.now()), Decision::Take);
    }

    #[test]
    fn a_changed_renew_time_restarts_the_count() {
        let clock = ManualClock::new();
        let mut c = Candidate::new("b", Duration::from_secs(3));
        c.decide(Some(&held_by("a", 1, "7")), clock.now());
        clock.advance(Duration::from_millis(2_500));
        // Renewed: a new renewTime (and version).
        let renewed = held_by("a", 2, "8");
        let at = clock.now();
        assert_eq!(
            c.decide(Some(&renewed), at),
            Decision::Wait {
                holder: "a".into(),
                expires: at + Duration::from_secs(3)
            }
        );
        clock.advance(Duration::from_millis(2_500));
        assert!(matches!(
            c.decide(Some(&renewed), clock.now()),
            Decision::Wait { .. }
        ));
        // Only the version changed (another field written): the count restarts as well.
        let touched = held_by("a", 2, "9");
        clock.advance(Duration::from_millis(600));
        assert!(matches!(
            c.decide(Some(&touched), clock.now()),
            Decision::Wait { .. }
        ));
        clock.advance(Duration::from_secs(3));
        assert_eq!(c.decide(Some(&touched), clock.now()), Decision::Take);
    }

    #[test]
    fn wall_clock_renew_times_are_never_compared_with_ours() {
        // A holder whose renewTime lies far in the past (its clock is behind) is not expired
        // for that: only our own observation counts.
        let clock = ManualClock::new();
        let mut c = Candidate::new("b", Duration::from_secs(3));
        let ancient = held_by("a", 0, "7");
        assert!(matches!(
            c.decide(Some(&ancient), clock.now()),
            Decision::Wait { .. }
        ));
    }

    #[test]
    fn forgetting_restarts_the_count() {
        let clock = ManualClock::new();
        let mut c = Candidate::new("b", Duration::from_secs(3));
        let r = held_by("a", 1, "7");
        c.decide(Some(&r), clock.now());
        clock.advance(Duration::from_secs(2));
        c.forget();
        clock.advance(Duration::from_secs(2));
        assert!(matches!(
            c.decide(Some(&r), clock.now()),
            Decision::Wait { .. }
        ));
    }

    #[test]
    fn validity_runs_from_the_send_instant_and_never_shrinks() {
        let clock = ManualClock::new();
        let sent = clock.now();
        let deadline = Duration::from_secs(2);
        // The answer came 1.5 s after the request left: still sent + deadline.
        clock.advance(Duration::from_millis(1_500));
        let v = extended(sent, sent, deadline);
        assert_eq!(v, sent + deadline);
        // An older request answered late does not shorten it.
        let older = sent - Duration::from_millis(500);
        assert_eq!(extended(v, older, deadline), v);
        let later = sent + Duration::from_millis(500);
        assert_eq!(extended(v, later, deadline), later + deadline);
    }

    fn state(clock: Arc<dyn MonotonicClock>, valid_for: Duration) -> Arc<LeaderState> {
        let base = clock.now();
        let (changed, _) = watch::channel(0);
        let s = Arc::new(LeaderState {
            clock,
            base,
            valid_until: AtomicU64::new(0),
            ended: AtomicU8::new(LEADING),
            renewals: AtomicU64::new(0),
            last_sent: AtomicU64::new(0),
            changed,
            guards: Mutex::new(Vec::new()),
        });
        s.valid_until
            .store(s.nanos(base + valid_for), Ordering::SeqCst);
        s
    }

    #[test]
    fn the_leader_state_extends_from_the_send_instant_and_ends_on_the_clock() {
        let clock = Arc::new(ManualClock::new());
        let s = state(clock.clone(), Duration::from_secs(2));
        assert!(s.leading());
        let sent = clock.now() + Duration::from_millis(500);
        clock.advance(Duration::from_millis(1_900));
        s.renewed(sent, Duration::from_secs(2));
        assert_eq!(s.valid_until(), sent + Duration::from_secs(2));
        clock.advance(Duration::from_millis(599));
        assert!(s.leading());
        clock.advance(Duration::from_millis(1));
        assert!(!s.leading(), "at valid_until it is over");
        assert_eq!(
            s.ended(),
            Some(LostReason::Expired),
            "seen over, it stays over"
        );
        // A renew answered a moment too late brings nothing back.
        s.renewed(clock.now(), Duration::from_secs(2));
        assert!(!s.leading());
        s.end(LostReason::Conflict);
        assert_eq!(
            s.ended(),
            Some(LostReason::Expired),
            "the first reason stays"
        );
    }

    #[test]
    fn a_conflict_ends_leadership_before_its_deadline() {
        let clock = Arc::new(ManualClock::new());
        let s = state(clock.clone(), Duration::from_secs(2));
        s.end(LostReason::Conflict);
        assert!(!s.leading());
        assert_eq!(s.check(), Some(LostReason::Conflict));
        s.renewed(clock.now(), Duration::from_secs(2));
        assert!(!s.leading(), "an ended leadership is never extended");
    }

    fn leadership_over(state: Arc<LeaderState>) -> Leadership {
        // No renew loop and no API calls: the guard and lost() read only the state.
        let client = Client::try_from(kube::Config::new("https://127.0.0.1:9".parse().unwrap()))
            .expect("a client that is never used");
        Leadership {
            clock: state.clock.clone(),
            state,
            task: None,
            last: Arc::new(Mutex::new(Lease::default())),
            api: Api::namespaced(client, "argocd"),
            config: config(),
        }
    }

    #[tokio::test]
    async fn the_guard_fires_at_valid_until_unless_extended() {
        install_crypto();
        let s = state(Arc::new(SystemClock), Duration::from_millis(300));
        let l = leadership_over(s.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        let start = Instant::now();
        let _guard = l.guard(move || tx.send(Instant::now()).unwrap());
        // Extended once, from a send 200 ms in: valid until 500 ms.
        std::thread::sleep(Duration::from_millis(200));
        s.renewed(
            start + Duration::from_millis(200),
            Duration::from_millis(300),
        );
        let fired = rx.recv_timeout(Duration::from_secs(10)).expect("fired");
        let after = fired - start;
        assert!(after >= Duration::from_millis(500), "fired after {after:?}");
        assert!(after < Duration::from_secs(3), "fired after {after:?}");
        assert_eq!(l.lost().await, LostReason::Expired);
    }

    #[tokio::test]
    async fn the_guard_fires_at_once_on_a_conflict_and_not_when_disarmed() {
        install_crypto();
        let s = state(Arc::new(SystemClock), Duration::from_secs(600));
        let l = leadership_over(s.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        let tx2 = tx.clone();
        let disarmed = l.guard(move || tx2.send("disarmed").unwrap());
        disarmed.disarm();
        let _guard = l.guard(move || tx.send("armed").unwrap());
        s.end(LostReason::Conflict);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "armed");
        assert_eq!(l.lost().await, LostReason::Conflict);
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    }

    #[test]
    fn the_guard_fires_while_no_async_runtime_runs() {
        let s = state(Arc::new(SystemClock), Duration::from_millis(100));
        let (tx, rx) = std::sync::mpsc::channel();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let l = rt.block_on(async {
            install_crypto();
            leadership_over(s)
        });
        let _guard = l.guard(move || tx.send(()).unwrap());
        // The runtime is idle (never polled again): the thread fires on its own.
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the guard fired without the runtime");
        drop(rt);
    }

    #[test]
    fn roles_read_as_probes_print_them() {
        assert_eq!(Role::Leader.to_string(), "leader");
        assert_eq!(
            Role::Standby {
                leader: Some("pod-a".into())
            }
            .to_string(),
            "standby, leader is pod-a"
        );
        assert_eq!(
            Role::Standby { leader: None }.to_string(),
            "standby, no leader"
        );
    }

    fn install_crypto() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
