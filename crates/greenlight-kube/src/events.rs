//! Events on the Application: every watch transition greenlight emits is also written as an
//! `events.k8s.io/v1` Event regarding the Argo CD Application it is about, so that it shows in
//! `kubectl describe application <name>`, `kubectl get events` and Argo CD's UI (which lists the
//! Events whose `involvedObject` is the Application, matched by name, namespace and uid).
//!
//! The words are the event catalogue's (`greenlight_core::event`): `reason` is the event kind
//! in CamelCase (`WatchStarted`, `Confirmed`, `Failed`, …), `note` the catalogue's message with
//! the commit's short SHA and the watch's state, `type` `Warning` for what an operator should
//! look at (the catalogue's `warn` level) and `Normal` otherwise. See `docs/events.md`.
//!
//! Aggregation follows client-go's `tools/events` EventBroadcaster: an occurrence isomorphic to
//! one recorded within the last 6 minutes (its `finishTime`) does not create a second Event; the
//! first one's `series` is patched (`count` 2, 3, …, `lastObservedTime`). One difference, on
//! purpose: client-go's isomorphism key (type, reason, action, reporting controller and
//! instance, regarding, related) leaves the note out, so a second commit's `Failed` on one app
//! would only bump the count of the first commit's Event. Here the note is part of the key: an
//! Event says which commit it is about.
//!
//! Writes never hold the judge: [`EventRecorder::record`] puts the occurrence on a bounded queue
//! (full: dropped and counted) and returns; one task of its own writes them in order, retries
//! what may pass later (no answer, 5xx, 429) a few times with backoff, and gives up on what will
//! not (403, 422). Every occurrence given up is counted ([`EventRecorder::failures`]) and warned
//! about in one line naming the app and the HTTP status, never a credential. The verdict is in
//! the state file whatever happens here.

use greenlight_core::directive::AppRef;
use greenlight_core::event::{Event, EventKind};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// `reportingController` of every Event greenlight writes.
pub const REPORTING_CONTROLLER: &str = "greenlight.dev/watchdog";
/// The most bytes an Event's note may hold (the API server's limit, `NoteLengthLimit`).
pub const NOTE_LIMIT: usize = 1024;
/// How long after its last occurrence an Event still takes repeats into its series (client-go's
/// `finishTime`, kube-rs' `CACHE_TTL`).
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// How many occurrences wait for the writer before new ones are dropped (and counted).
pub const QUEUE: usize = 256;
/// How long an Application's uid is kept before it is looked up again (an Application deleted
/// and created again has a new uid).
const UID_TTL: Duration = Duration::from_secs(5 * 60);
/// Waits between attempts of a write that may pass later.
const RETRY_DELAYS: [Duration; 3] = [
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
];

/// Who writes: `reportingController` and `reportingInstance`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reporter {
    pub controller: String,
    pub instance: String,
}

impl Reporter {
    /// [`REPORTING_CONTROLLER`], and the pod's name (`$POD_NAME`, from the downward API) or
    /// else the host's name as the instance.
    pub fn from_env() -> Reporter {
        let instance = std::env::var("POD_NAME")
            .ok()
            .filter(|n| !n.trim().is_empty())
            .or_else(hostname)
            .unwrap_or_else(|| "greenlight".to_string());
        Reporter {
            controller: REPORTING_CONTROLLER.to_string(),
            instance: truncate(instance.trim(), 128),
        }
    }
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

/// `Normal` or `Warning`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// What one greenlight event becomes on the Application it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occurrence {
    pub app: AppRef,
    pub type_: EventType,
    pub reason: String,
    pub action: &'static str,
    pub note: String,
    /// When it happened (the judge's time), in milliseconds since the epoch.
    pub time_ms: i64,
}

impl Occurrence {
    /// The Kubernetes Event of `e`; `None` when it names no app (nothing to regard) or an app
    /// that is not a Kubernetes name.
    pub fn of(e: &Event) -> Option<Occurrence> {
        let app = AppRef::parse(e.app.as_deref()?).ok()?;
        Some(Occurrence {
            app,
            type_: event_type(e.event),
            reason: reason(e.event),
            action: action(e.event),
            note: note(e),
            time_ms: e.time.0,
        })
    }
}

/// The event kind as a Kubernetes reason: `healthy_streak_broken` → `HealthyStreakBroken`.
pub fn reason(kind: EventKind) -> String {
    kind.as_str()
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// `Warning` for what the catalogue says an operator should look at (its `warn` level: a
/// failure, a revert that failed, an inconclusive or unreached watch, the breaker, …).
pub fn event_type(kind: EventKind) -> EventType {
    match kind.level() {
        "warn" => EventType::Warning,
        _ => EventType::Normal,
    }
}

/// What greenlight did, in one verb: `Watch` (a watch starts, resumes or cannot), `Observe`
/// (what the app did: reach, streaks, a failed sync), `Judge` (a verdict), `Revert` (the
/// executor), `Breaker` or `Promote` (a promotion run's end).
pub fn action(kind: EventKind) -> &'static str {
    use EventKind::*;
    match kind {
        WatchStarted | DirectiveRejected | Resumed | AppNotFound | ArmDowngraded | AutoSyncOff => {
            "Watch"
        }
        ComparisonError
        | Reached
        | SyncFailed
        | HealthyStreakStarted
        | HealthyStreakBroken
        | HealthyStreakPaused
        | HealthyStreakResumed
        | DeadlinePassedStreakUnderWay
        | Attribution => "Observe",
        Confirmed | Failed | ChangedOutside | RevertedByHuman | NotReached | Unwatchable
        | Inconclusive => "Judge",
        RevertPushed | RevertAdopted | RevertProposed | RevertMerged | RevertWithdrawing
        | RevertFailed => "Revert",
        BreakerOpened | BreakerBlocked | BreakerReset => "Breaker",
        GateEnded => "Promote",
    }
}

/// `commit <short sha>: <the catalogue's words> [<STATE>]`, at most [`NOTE_LIMIT`] bytes.
pub fn note(e: &Event) -> String {
    let mut s = String::new();
    if let Some(c) = &e.commit {
        let short: String = c.chars().take(8).collect();
        s.push_str("commit ");
        s.push_str(&short);
        s.push_str(": ");
    }
    s.push_str(&e.message);
    if let Some(st) = e.state {
        s.push_str(" [");
        s.push_str(st.as_str());
        s.push(']');
    }
    truncate(&s, NOTE_LIMIT)
}

/// `s` in at most `limit` bytes, cut on a character boundary and ended with `…` when cut.
pub fn truncate(s: &str, limit: usize) -> String {
    if s.len() <= limit {
        return s.to_string();
    }
    const ELLIPSIS: &str = "…";
    let mut end = limit.saturating_sub(ELLIPSIS.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{ELLIPSIS}", &s[..end])
}

/// How many Event writes were given up (refused, unanswered after retries, or dropped on a full
/// queue) since start: the count behind `greenlight_event_write_failures_total`.
#[derive(Clone, Debug, Default)]
pub struct FailureCount(Arc<AtomicU64>);

impl FailureCount {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
    fn add(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// A warning line's sink (the daemon's `Output::warn`).
pub type Warn = Arc<dyn Fn(&str) + Send + Sync>;

/// The handle the runtime's output feeds; the writer runs in a task of its own.
#[derive(Clone)]
pub struct EventRecorder {
    tx: mpsc::Sender<Occurrence>,
    failures: FailureCount,
    warn: Warn,
}

/// Where Applications named without a namespace are looked for when the client may not list
/// them across namespaces.
#[derive(Clone, Debug)]
pub struct Settings {
    pub reporter: Reporter,
    /// Namespaces to try, in order, for an app named without one when a cluster-wide lookup is
    /// refused (`--namespace` of `--source kube`, else the client's default namespace).
    pub lookup_namespaces: Vec<String>,
}

impl EventRecorder {
    /// Start the writer on the current tokio runtime.
    pub fn spawn(client: Client, settings: Settings, warn: Warn) -> EventRecorder {
        let (tx, rx) = mpsc::channel(QUEUE);
        let failures = FailureCount::default();
        let writer = Writer {
            client: client.clone(),
            settings,
            series: HashMap::new(),
            apps: HashMap::new(),
            failures: failures.clone(),
            warn: warn.clone(),
            last_name_nanos: 0,
        };
        tokio::spawn(writer.run(rx));
        EventRecorder { tx, failures, warn }
    }

    /// Queue `e`'s Event; never waits. An event that names no app is not written.
    pub fn record(&self, e: &Event) {
        let Some(o) = Occurrence::of(e) else { return };
        if let Err(err) = self.tx.try_send(o) {
            let (o, why) = match err {
                mpsc::error::TrySendError::Full(o) => (o, "the queue is full"),
                mpsc::error::TrySendError::Closed(o) => (o, "the writer has stopped"),
            };
            let n = self.failures.add();
            (self.warn)(&format!(
                "Kubernetes Event {} for Application {} dropped: {why} (Event write failures: {n}); the verdict is in the state file",
                o.reason, o.app
            ));
        }
    }

    /// The writes given up so far (the lead's `/metrics` reads it).
    pub fn failures(&self) -> FailureCount {
        self.failures.clone()
    }
}

/// An Application an Event regards.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Regarding {
    namespace: String,
    name: String,
    uid: Option<String>,
}

/// The isomorphism key: client-go's fields, and the note.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    regarding: Regarding,
    type_: EventType,
    reason: String,
    action: &'static str,
    note: String,
}

/// An Event written, and its series so far.
struct Recorded {
    name: String,
    count: i32,
    last: Instant,
}

struct Writer {
    client: Client,
    settings: Settings,
    series: HashMap<Key, Recorded>,
    /// Each app's Applications, as last looked up.
    apps: HashMap<AppRef, (Vec<Regarding>, Instant)>,
    failures: FailureCount,
    warn: Warn,
    last_name_nanos: u128,
}

/// Why a write was given up: the HTTP status when the server answered.
struct Failure {
    status: Option<u16>,
    detail: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            Some(code) => write!(f, "HTTP {code} ({})", self.detail),
            None => write!(f, "no answer from the API server ({})", self.detail),
        }
    }
}

fn failure(e: &kube::Error) -> Failure {
    match e {
        kube::Error::Api(s) => Failure {
            status: Some(s.code),
            detail: if s.reason.is_empty() {
                s.message.clone()
            } else {
                format!("{}: {}", s.reason, s.message)
            },
        },
        other => Failure {
            status: None,
            detail: other.to_string(),
        },
    }
}

/// Whether a later attempt may pass: no answer, a server error, or too many requests.
fn retryable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code >= 500 || s.code == 429,
        _ => true,
    }
}

fn application() -> ApiResource {
    ApiResource {
        group: "argoproj.io".into(),
        version: "v1alpha1".into(),
        api_version: "argoproj.io/v1alpha1".into(),
        kind: "Application".into(),
        plural: "applications".into(),
    }
}

fn micro(ms: i64) -> MicroTime {
    MicroTime(
        k8s_openapi::jiff::Timestamp::from_millisecond(ms)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<Occurrence>) {
        while let Some(o) = rx.recv().await {
            let targets = match self.regarding(&o.app).await {
                Ok(t) => t,
                Err(f) => {
                    self.give_up(&o, &o.app.to_string(), &f);
                    continue;
                }
            };
            for r in targets {
                let shown = format!("{}/{}", r.namespace, r.name);
                if let Err(f) = self.write(&o, r).await {
                    self.give_up(&o, &shown, &f);
                }
            }
        }
    }

    fn give_up(&self, o: &Occurrence, app: &str, f: &Failure) {
        let n = self.failures.add();
        (self.warn)(&format!(
            "Kubernetes Event {} for Application {app} not written: {f} (Event write failures: {n}); the verdict is in the state file",
            o.reason
        ));
    }

    /// The Applications `app` names: itself in its namespace, or, named without one, every
    /// Application of that name (a cluster-wide lookup, else the lookup namespaces in turn).
    /// An Application that cannot be read is regarded without its uid.
    async fn regarding(&mut self, app: &AppRef) -> Result<Vec<Regarding>, Failure> {
        if let Some((r, at)) = self.apps.get(app)
            && at.elapsed() < UID_TTL
        {
            return Ok(r.clone());
        }
        let found = match &app.namespace {
            Some(ns) => vec![self.get(ns, &app.name).await],
            None => self.find(&app.name).await?,
        };
        if found.iter().all(|r| r.uid.is_some()) {
            self.apps
                .insert(app.clone(), (found.clone(), Instant::now()));
        }
        Ok(found)
    }

    /// The Application `ns/name`, with its uid when it can be read.
    async fn get(&self, ns: &str, name: &str) -> Regarding {
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &application());
        let uid = match attempt(|| api.get_opt(name)).await {
            Ok(Some(o)) => o.uid(),
            Ok(None) => None,
            Err(e) => {
                (self.warn)(&format!(
                    "Application {ns}/{name}: cannot read its uid: {}; its Events are written without one, so Argo CD's UI and kubectl describe may not list them",
                    failure(&e)
                ));
                None
            }
        };
        Regarding {
            namespace: ns.to_string(),
            name: name.to_string(),
            uid,
        }
    }

    /// Every Application named `name`.
    async fn find(&self, name: &str) -> Result<Vec<Regarding>, Failure> {
        let all: Api<DynamicObject> = Api::all_with(self.client.clone(), &application());
        let by_name = ListParams::default().fields(&format!("metadata.name={name}"));
        match attempt(|| all.list(&by_name)).await {
            Ok(list) => {
                let found: Vec<Regarding> = list
                    .items
                    .iter()
                    .filter_map(|o| {
                        Some(Regarding {
                            namespace: o.namespace()?,
                            name: o.name_any(),
                            uid: o.uid(),
                        })
                    })
                    .collect();
                if found.is_empty() {
                    return Err(Failure {
                        status: None,
                        detail: format!("no Application named {name} in the cluster"),
                    });
                }
                Ok(found)
            }
            Err(kube::Error::Api(s)) if s.code == 403 => {
                for ns in &self.settings.lookup_namespaces {
                    let r = self.get(ns, name).await;
                    if r.uid.is_some() {
                        return Ok(vec![r]);
                    }
                }
                Err(Failure {
                    status: Some(403),
                    detail: format!(
                        "Applications cannot be listed across namespaces and none named {name} was found in {}",
                        self.settings.lookup_namespaces.join(", ")
                    ),
                })
            }
            Err(e) => Err(failure(&e)),
        }
    }

    /// Create the Event, or add to its series.
    async fn write(&mut self, o: &Occurrence, regarding: Regarding) -> Result<(), Failure> {
        let key = Key {
            regarding,
            type_: o.type_,
            reason: o.reason.clone(),
            action: o.action,
            note: o.note.clone(),
        };
        let now = Instant::now();
        self.series
            .retain(|_, r| now.duration_since(r.last) < SERIES_WINDOW);
        let events: Api<KubeEvent> = Api::namespaced(self.client.clone(), &key.regarding.namespace);
        if let Some(r) = self.series.get(&key) {
            let (name, count) = (r.name.clone(), r.count + 1);
            let patch = serde_json::json!({
                "series": {"count": count, "lastObservedTime": micro(o.time_ms)},
            });
            let done = attempt(|| {
                let (events, name, patch) = (&events, &name, &patch);
                async move {
                    events
                        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
                        .await
                        .map(|_| ())
                }
            })
            .await;
            match done {
                Ok(()) => {
                    self.series.insert(
                        key,
                        Recorded {
                            name,
                            count,
                            last: now,
                        },
                    );
                    return Ok(());
                }
                // Gone (its time to live passed, or deleted): a new Event, as client-go does.
                Err(e) if matches!(&e, kube::Error::Api(s) if s.code == 404) => {
                    self.series.remove(&key);
                }
                // It happened all the same: the next patch counts it.
                Err(e) => {
                    if let Some(r) = self.series.get_mut(&key) {
                        r.count = count;
                        r.last = now;
                    }
                    return Err(failure(&e));
                }
            }
        }
        let name = self.event_name(&key.regarding.name);
        let ev = self.event(&key, o, &name);
        attempt(|| {
            let (events, ev) = (&events, &ev);
            async move { events.create(&PostParams::default(), ev).await.map(|_| ()) }
        })
        .await
        .map_err(|e| failure(&e))?;
        self.series.insert(
            key,
            Recorded {
                name,
                count: 1,
                last: now,
            },
        );
        Ok(())
    }

    /// `<app>.<hex nanoseconds>`, as client-go names Events, never the same twice here.
    fn event_name(&mut self, app: &str) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        self.last_name_nanos = now.max(self.last_name_nanos + 1);
        let app: String = app.chars().take(200).collect();
        format!("{app}.{:x}", self.last_name_nanos)
    }

    fn event(&self, key: &Key, o: &Occurrence, name: &str) -> KubeEvent {
        let r = &key.regarding;
        KubeEvent {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(r.namespace.clone()),
                ..ObjectMeta::default()
            },
            event_time: Some(micro(o.time_ms)),
            regarding: Some(ObjectReference {
                api_version: Some("argoproj.io/v1alpha1".into()),
                kind: Some("Application".into()),
                namespace: Some(r.namespace.clone()),
                name: Some(r.name.clone()),
                uid: r.uid.clone(),
                ..ObjectReference::default()
            }),
            reason: Some(key.reason.clone()),
            action: Some(key.action.to_string()),
            note: Some(key.note.clone()),
            type_: Some(key.type_.as_str().to_string()),
            reporting_controller: Some(self.settings.reporter.controller.clone()),
            reporting_instance: Some(self.settings.reporter.instance.clone()),
            series: None,
            ..KubeEvent::default()
        }
    }
}

/// `f` until it passes, fails for good, or the retries run out.
async fn attempt<T, F, Fut>(mut f: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut delays = RETRY_DELAYS.iter();
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if retryable(&e) => match delays.next() {
                Some(d) => tokio::time::sleep(*d).await,
                None => return Err(e),
            },
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenlight_core::event::Evidence;
    use greenlight_core::time::Timestamp;

    fn event(kind: EventKind, app: Option<&str>, message: &str) -> Event {
        Event {
            time: Timestamp(1_700_000_000_000),
            event: kind,
            commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
            app: app.map(String::from),
            state: None,
            message: message.into(),
            evidence: Evidence::default(),
            outcome: None,
            reason: None,
        }
    }

    #[test]
    fn reasons_are_the_kinds_in_camel_case() {
        assert_eq!(reason(EventKind::WatchStarted), "WatchStarted");
        assert_eq!(reason(EventKind::Failed), "Failed");
        assert_eq!(
            reason(EventKind::DeadlinePassedStreakUnderWay),
            "DeadlinePassedStreakUnderWay"
        );
        assert_eq!(reason(EventKind::RevertFailed), "RevertFailed");
    }

    #[test]
    fn failures_are_warnings_and_the_ordinary_course_is_normal() {
        for k in [
            EventKind::Failed,
            EventKind::RevertFailed,
            EventKind::Inconclusive,
            EventKind::NotReached,
            EventKind::BreakerOpened,
            EventKind::AppNotFound,
        ] {
            assert_eq!(event_type(k), EventType::Warning, "{k:?}");
        }
        for k in [
            EventKind::WatchStarted,
            EventKind::Reached,
            EventKind::HealthyStreakStarted,
            EventKind::Confirmed,
            EventKind::RevertPushed,
        ] {
            assert_eq!(event_type(k), EventType::Normal, "{k:?}");
        }
    }

    #[test]
    fn the_note_names_the_short_commit_and_the_state() {
        let mut e = event(
            EventKind::Confirmed,
            Some("web"),
            "confirmed: healthy for 2m",
        );
        e.state = Some(greenlight_core::judge::State::Confirmed);
        assert_eq!(
            note(&e),
            "commit 01234567: confirmed: healthy for 2m [CONFIRMED]"
        );
    }

    #[test]
    fn a_long_note_is_cut_on_a_character_boundary() {
        // 'é' is two bytes: a cut at an odd byte would split one.
        let e = event(EventKind::Failed, Some("web"), &"é".repeat(2000));
        let n = note(&e);
        assert!(n.len() <= NOTE_LIMIT, "{}", n.len());
        assert!(n.ends_with('…'), "{n}");
        assert!(n.starts_with("commit 01234567: é"), "{n}");
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("abcdef", 6), "abcdef");
        assert_eq!(truncate("abcdefg", 6), "abc…");
    }

    #[test]
    fn an_event_without_an_app_regards_nothing() {
        assert!(Occurrence::of(&event(EventKind::BreakerReset, None, "reset")).is_none());
        let o = Occurrence::of(&event(EventKind::Failed, Some("argocd/web"), "fail")).unwrap();
        assert_eq!(o.app.namespace.as_deref(), Some("argocd"));
        assert_eq!((o.reason.as_str(), o.action), ("Failed", "Judge"));
    }
}
