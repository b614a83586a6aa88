//! The running sandbox: starts it (validates the configuration, clones, first sync, binds),
//! and owns its three tasks: the HTTP server, the sync loop (fetch every `sync_interval`,
//! render, hand the tip to the world; resolve and render requested syncs and start them) and
//! the clock (wakes exactly when the world's next deadline comes: a rollout finishing, a retry
//! back-off ending, a hidden render error's grace ending, so that those changes reach stream
//! subscribers when they happen). It never decides what a sync or a health status means; the
//! world does.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use greenlight_core::repo_url::RepoUrl;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::health::ImagePolicy;
use crate::manifests::{self, RenderError};
use crate::repo::{self, Mirror};
use crate::world::{HoldHealth, Now, RenderResult, World, WorldConfig};
use crate::{LogSink, SandboxConfig, SandboxError};

/// State shared by the tasks and the HTTP handlers.
pub(crate) struct Shared {
    world: Mutex<World>,
    paused: AtomicBool,
    outage_until: Mutex<Option<Instant>>,
    /// Until when requests meet an ingress's default backend (404) instead of Argo CD.
    default_backend_until: Mutex<Option<Instant>>,
    /// Apps the token may not see, each until when (an RBAC change for a while).
    hidden: Mutex<std::collections::HashMap<String, Instant>>,
    /// A body that is no Argo CD answer, served for a while instead of some answers.
    garbled: Mutex<Option<(Garble, Instant)>>,
    /// Bumped when an outage starts: open streams end when they see it change.
    pub(crate) outage_epoch: watch::Sender<u64>,
    pub(crate) shutdown: watch::Sender<bool>,
    wake_sync: Notify,
    wake_health: Notify,
    /// Refreshes asked for through the API, done by the next sync round.
    refresh: Mutex<Refresh>,
    // Held by the sync loop for a whole fetch-and-sync round, so that `pause` returns only once
    // no sync is in flight.
    sync_gate: tokio::sync::Mutex<()>,
    pub(crate) token: Option<String>,
    pub(crate) scoped_tokens: Vec<crate::ScopedToken>,
    pub(crate) stream: StreamSettings,
    log: Option<LogSink>,
}

/// How the application stream behaves (see [`SandboxConfig`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamSettings {
    pub subscribe_delay: Duration,
    pub buffer: usize,
    pub heartbeat: Duration,
}

impl Shared {
    pub(crate) fn world(&self) -> MutexGuard<'_, World> {
        // A panic while holding the lock leaves plain data behind; keep serving it.
        self.world
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn log(&self, line: &str) {
        if let Some(sink) = &self.log {
            sink(line);
        }
    }

    pub(crate) async fn pause(&self) {
        let _round = self.sync_gate.lock().await;
        if !self.paused.swap(true, Ordering::SeqCst) {
            self.log("sandbox: syncing paused");
        }
    }

    pub(crate) fn resume(&self) {
        if self.paused.swap(false, Ordering::SeqCst) {
            self.log("sandbox: syncing resumed");
        }
        self.wake_sync.notify_one();
    }

    /// Fetch now rather than at the next tick (a no-op while paused); requested syncs start then.
    pub(crate) fn request_sync(&self) {
        self.wake_sync.notify_one();
    }

    /// An explicit refresh of one app (`None`: every app): fetched and reconciled at once.
    pub(crate) fn request_refresh(&self, name: Option<&str>) {
        {
            let mut refresh = self.refresh.lock().unwrap_or_else(|p| p.into_inner());
            match name {
                Some(name) => {
                    refresh.apps.insert(name.to_string());
                }
                None => refresh.all = true,
            }
        }
        self.wake_sync.notify_one();
    }

    fn take_refresh(&self) -> Refresh {
        std::mem::take(&mut *self.refresh.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub(crate) fn start_outage(self: &Arc<Self>, length: Duration) {
        *self.outage_until.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(Instant::now() + length);
        self.outage_epoch.send_modify(|epoch| *epoch += 1);
        let epoch = *self.outage_epoch.borrow();
        self.log(&format!(
            "sandbox: API outage for {}",
            humantime::format_duration(length)
        ));
        // Say when it is over, unless a later outage has replaced this one by then.
        let shared = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(length).await;
            if *shared.outage_epoch.borrow() == epoch && !*shared.shutdown.borrow() {
                shared.log("sandbox: API outage over");
            }
        });
    }

    /// For `length`, new API requests reach an ingress's default backend, which answers 404
    /// for everything (as ingress-nginx's does while the server's endpoints are replaced in a
    /// rollout); streams already open stay open.
    pub(crate) fn start_default_backend(&self, length: Duration) {
        *self
            .default_backend_until
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Instant::now() + length);
        self.log(&format!(
            "sandbox: requests meet the ingress's default backend (404) for {}",
            humantime::format_duration(length)
        ));
    }

    /// For `length`, the token may not see `app`, as after an RBAC change: Argo CD leaves it
    /// out of listings and streams and answers 403 `permission denied` for it.
    pub(crate) fn hide(&self, app: &str, length: Duration) {
        self.hidden
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(app.to_string(), Instant::now() + length);
        self.log(&format!(
            "sandbox: app {app} hidden from the token for {}",
            humantime::format_duration(length)
        ));
    }

    /// For `hold.length` on the sandbox's clock, a live resource of `app` reports another health
    /// (see [`World::hold_health`]); the clock is woken to end it on time.
    pub(crate) fn hold_health(&self, app: &str, hold: HoldHealth) -> Result<(), String> {
        self.world().hold_health(app, hold, Now::current())?;
        self.wake_health.notify_one();
        Ok(())
    }

    /// A human deletes a live resource of `app` out of band (see [`World::delete_resource`]);
    /// the clock is woken for what the reconcile started (a self-heal's rollout).
    pub(crate) fn delete_resource(
        &self,
        app: &str,
        kind: &str,
        name: &str,
        namespace: Option<&str>,
    ) -> Result<(), String> {
        self.world()
            .delete_resource(app, kind, name, namespace, Now::current())?;
        self.wake_health.notify_one();
        Ok(())
    }

    /// For `length`, the answers `garble.on` names are `garble.what`'s body instead (a broken
    /// proxy, a misbehaving server); a later call replaces it, `length` zero ends it.
    pub(crate) fn start_garble(&self, garble: Garble, length: Duration) {
        self.log(&format!(
            "sandbox: {} answered with {} for {}",
            garble.on.describe(),
            garble.what.describe(),
            humantime::format_duration(length)
        ));
        *self.garbled.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((garble, Instant::now() + length));
    }

    /// The garbled body to answer a request for `target` with, while a garble is on.
    pub(crate) fn garbled(&self, target: Target) -> Option<GarbleWhat> {
        let garbled = self.garbled.lock().unwrap_or_else(|p| p.into_inner());
        let (garble, until) = garbled.as_ref()?;
        (Instant::now() < *until && garble.on.covers(target)).then_some(garble.what)
    }

    pub(crate) fn is_hidden(&self, app: &str) -> bool {
        self.hidden
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(app)
            .is_some_and(|until| Instant::now() < *until)
    }

    pub(crate) fn in_default_backend(&self) -> bool {
        self.default_backend_until
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|until| Instant::now() < until)
    }

    pub(crate) fn in_outage(&self) -> bool {
        self.outage_until
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|until| Instant::now() < until)
    }
}

/// What `POST /sandbox/v1/garble` serves, and instead of which answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Garble {
    pub what: GarbleWhat,
    pub on: GarbleOn,
}

/// A 200 `application/json` body that is no Argo CD answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GarbleWhat {
    /// `{}`: an object without `items` (a listing) or without anything (a read).
    NoItems,
    /// `{"items":[[[…]]]}`, [`NESTED_DEPTH`] nested arrays where a listing's items go: valid
    /// JSON no parser should recurse through.
    Nested,
}

/// How deep [`GarbleWhat::Nested`] nests.
pub(crate) const NESTED_DEPTH: usize = 100_000;

impl GarbleWhat {
    pub(crate) fn parse(word: &str) -> Option<GarbleWhat> {
        match word {
            "no-items" => Some(GarbleWhat::NoItems),
            "nested" => Some(GarbleWhat::Nested),
            _ => None,
        }
    }

    fn describe(self) -> String {
        match self {
            GarbleWhat::NoItems => "{}".into(),
            GarbleWhat::Nested => format!("{NESTED_DEPTH} nested arrays as items"),
        }
    }

    pub(crate) fn body(self) -> String {
        match self {
            GarbleWhat::NoItems => "{}".into(),
            GarbleWhat::Nested => {
                format!(
                    "{{\"items\":{}{}}}",
                    "[".repeat(NESTED_DEPTH),
                    "]".repeat(NESTED_DEPTH)
                )
            }
        }
    }
}

/// Which answers a garble replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GarbleOn {
    /// `GET /api/v1/applications`.
    Listing,
    /// `GET /api/v1/applications/{name}` and its sub-resources (tree, resource, managed resources).
    Reads,
    Both,
}

/// The kind of request a garble may replace the answer of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Listing,
    Read,
}

impl GarbleOn {
    pub(crate) fn parse(word: &str) -> Option<GarbleOn> {
        match word {
            "listing" => Some(GarbleOn::Listing),
            "reads" => Some(GarbleOn::Reads),
            "both" => Some(GarbleOn::Both),
            _ => None,
        }
    }

    fn covers(self, target: Target) -> bool {
        matches!(
            (self, target),
            (GarbleOn::Both, _)
                | (GarbleOn::Listing, Target::Listing)
                | (GarbleOn::Reads, Target::Read)
        )
    }

    fn describe(self) -> &'static str {
        match self {
            GarbleOn::Listing => "the application listing is",
            GarbleOn::Reads => "application reads are",
            GarbleOn::Both => "the application listing and reads are",
        }
    }
}

#[derive(Default)]
struct Refresh {
    all: bool,
    apps: BTreeSet<String>,
}

impl Refresh {
    fn wants(&self, name: &str) -> bool {
        self.all || self.apps.contains(name)
    }
}

/// A running sandbox. Dropping it stops it too, without waiting; [`Sandbox::shutdown`] waits.
pub struct Sandbox {
    addr: SocketAddr,
    /// Served over TLS (`--tls-cert`).
    https: bool,
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl Sandbox {
    /// The address it listens on (the real port when the configuration asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>` (`https://` with `--tls-cert`), the Argo CD base URL to give a client.
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The Application JSON `GET /api/v1/applications/{name}` serves, if there is such an app
    /// (from 3.0 on, resource health re-filled from the tree).
    pub fn application(&self, name: &str) -> Option<serde_json::Value> {
        self.shared.world().application_served(name)
    }

    /// `GET /api/v1/applications/{name}/resource-tree`, in process.
    pub fn resource_tree(&self, name: &str) -> Option<serde_json::Value> {
        self.shared.world().resource_tree(name)
    }

    /// Stops syncing; returns once no sync is in flight.
    pub async fn pause(&self) {
        self.shared.pause().await;
    }

    /// Restarts syncing and fetches at once.
    pub fn resume(&self) {
        self.shared.resume();
    }

    /// Makes every `/api/v1` route answer 503 for `length`; open streams end with an error.
    pub fn outage(&self, length: Duration) {
        self.shared.start_outage(length);
    }

    /// For `length`, the live resource `kind`/`name` of `app` reports `health` (`Healthy`,
    /// `Progressing`, `Degraded`, `Suspended`, `Missing` or `Unknown`) with `message` (empty:
    /// the sandbox's words), as `POST /sandbox/v1/health` does. `Err`: what is wrong.
    pub fn hold_health(
        &self,
        app: &str,
        kind: &str,
        name: &str,
        health: &str,
        message: &str,
        length: Duration,
    ) -> Result<(), String> {
        let health = crate::health::Health::parse(health)?;
        self.shared.hold_health(
            app,
            HoldHealth {
                kind: kind.to_string(),
                name: name.to_string(),
                namespace: None,
                health,
                message: message.to_string(),
                length,
            },
        )
    }

    /// A human deletes the live resource `kind`/`name` of `app` out of band (`kubectl
    /// delete`), as `POST /sandbox/v1/delete` does. `Err`: what is wrong.
    pub fn delete_resource(&self, app: &str, kind: &str, name: &str) -> Result<(), String> {
        self.shared.delete_resource(app, kind, name, None)
    }

    /// Stops the server and the loops and waits for them; the private clone is removed.
    pub async fn shutdown(mut self) {
        let _ = self.shared.shutdown.send(true);
        for task in std::mem::take(&mut self.tasks) {
            let _ = task.await;
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = self.shared.shutdown.send(true);
    }
}

/// Starts the sandbox; returns once it listens and (unless `start_paused`) the first sync of
/// every app has finished.
pub async fn start(config: SandboxConfig) -> Result<Sandbox, SandboxError> {
    if config.apps.is_empty() {
        return Err(SandboxError::config("--app", "at least one app is needed"));
    }
    let mut seen = std::collections::BTreeSet::new();
    for app in &config.apps {
        if !seen.insert(app.name()) {
            return Err(SandboxError::config(
                "--app",
                format!("the app name {:?} is given twice", app.name()),
            ));
        }
    }
    if config.sync_interval.is_zero() {
        return Err(SandboxError::config(
            "--sync-interval",
            "must be above zero",
        ));
    }
    if config.repo.trim().is_empty() {
        return Err(SandboxError::config("--repo", "is empty"));
    }
    if config.token.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return Err(SandboxError::config("--token-file", "the token is empty"));
    }
    for scoped in &config.scoped_tokens {
        if scoped.token.trim().is_empty() {
            return Err(SandboxError::config(
                "--scoped-token-file",
                "the token is empty",
            ));
        }
        if scoped.sees.iter().all(|p| p.trim().is_empty()) {
            return Err(SandboxError::config(
                "--scoped-token-file",
                "names no <project>/<app> pattern the token sees",
            ));
        }
    }
    let tls = match &config.tls {
        Some(files) => Some(crate::tls::server_config(&files.cert, &files.key)?),
        None => None,
    };
    if let Some(name) = config
        .manual_sync
        .iter()
        .find(|n| !config.apps.iter().any(|a| a.name() == n.as_str()))
    {
        return Err(SandboxError::config(
            "--manual-sync",
            format!("{name:?} is not one of the --app names"),
        ));
    }
    for (flag, names) in [
        ("--prune", &config.prune),
        ("--allow-empty", &config.allow_empty),
        ("--no-self-heal", &config.no_self_heal),
    ] {
        if let Some(name) = names
            .iter()
            .find(|n| !config.apps.iter().any(|a| a.name() == n.as_str()))
        {
            return Err(SandboxError::config(
                flag,
                format!("{name:?} is not one of the --app names"),
            ));
        }
        if let Some(name) = names.iter().find(|n| config.manual_sync.contains(n)) {
            return Err(SandboxError::config(
                flag,
                format!(
                    "{name:?} is also --manual-sync: an app without automated sync has no automated prune (a sync request prunes when it asks to)"
                ),
            ));
        }
    }
    if config.stream_buffer == 0 {
        return Err(SandboxError::config(
            "--stream-buffer",
            "must be above zero",
        ));
    }
    if config.heartbeat.is_zero() {
        return Err(SandboxError::config("--heartbeat", "must be above zero"));
    }
    if config.retry_backoff.is_zero() {
        return Err(SandboxError::config(
            "--retry-backoff",
            "must be above zero",
        ));
    }
    let policy = match &config.registry {
        Some(path) => ImagePolicy::load(path).map_err(|e| SandboxError::config("--registry", e))?,
        None => ImagePolicy::TagHeuristic,
    };
    let remote = repo::remote_for_git(&config.repo);
    let branch = match &config.branch {
        Some(b) if b.trim().is_empty() || b.starts_with('-') || b.contains(char::is_whitespace) => {
            return Err(SandboxError::config(
                "--branch",
                format!("{b:?} is not a branch name"),
            ));
        }
        Some(b) => b.clone(),
        None => repo::default_branch(&remote)
            .await
            .map_err(|e| SandboxError::config("--repo", e))?,
    };
    let mirror = Mirror::create(remote, branch.clone())
        .await
        .map_err(SandboxError::Runtime)?;
    let tip = mirror.fetch().await.map_err(|e| {
        let flag = if config.branch.is_some() && e.starts_with("branch ") {
            "--branch"
        } else {
            "--repo"
        };
        SandboxError::config(flag, e)
    })?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| {
            SandboxError::config(
                "--listen",
                format!("cannot listen on {}: {e}", config.listen),
            )
        })?;
    let addr = listener
        .local_addr()
        .map_err(|e| SandboxError::Runtime(format!("listening socket: {e}")))?;

    if let (Some(token), Some(log)) = (&config.token, &config.log)
        && !jwt_shaped(token)
    {
        log(
            "sandbox: the token is not JWT-shaped (three non-empty dot-separated parts); the sandbox accepts it, but real Argo CD would refuse it: it uses a bearer token only when it looks like a JWT",
        );
    }
    let world = World::new(
        WorldConfig {
            repo_url: RepoUrl::new(config.repo.as_str()).redacted(),
            branch,
            rollout_time: config.rollout_time,
            hook_time: config.hook_time,
            version: config.argocd_version,
            repo_error_grace: config.repo_error_grace,
            retry_backoff: config.retry_backoff,
            manual_sync: config.manual_sync.iter().cloned().collect(),
            prune: config.prune.iter().cloned().collect(),
            allow_empty: config.allow_empty.iter().cloned().collect(),
            no_self_heal: config.no_self_heal.iter().cloned().collect(),
        },
        policy,
        &config.apps,
        config.log.clone(),
        Now::current(),
    );
    let shared = Arc::new(Shared {
        world: Mutex::new(world),
        paused: AtomicBool::new(config.start_paused),
        outage_until: Mutex::new(None),
        default_backend_until: Mutex::new(None),
        hidden: Mutex::new(std::collections::HashMap::new()),
        garbled: Mutex::new(None),
        outage_epoch: watch::channel(0).0,
        shutdown: watch::channel(false).0,
        wake_sync: Notify::new(),
        wake_health: Notify::new(),
        refresh: Mutex::new(Refresh::default()),
        sync_gate: tokio::sync::Mutex::new(()),
        token: config.token.clone(),
        scoped_tokens: config.scoped_tokens.clone(),
        stream: StreamSettings {
            subscribe_delay: config.stream_subscribe_delay,
            buffer: config.stream_buffer,
            heartbeat: config.heartbeat,
        },
        log: config.log.clone(),
    });

    let mut last_tip = None;
    if !config.start_paused {
        sync_to(&shared, &mirror, &tip, &Refresh::default())
            .await
            .map_err(SandboxError::Runtime)?;
        last_tip = Some(tip);
    }

    let https = tls.is_some();
    let server = {
        let mut stop = shared.shutdown.subscribe();
        let app = crate::api::router(shared.clone());
        match tls {
            Some(tls) => {
                let listener = crate::tls::TlsListener::new(listener, tls)
                    .map_err(|e| SandboxError::Runtime(format!("listening socket: {e}")))?;
                tokio::spawn(async move {
                    let serve = axum::serve(listener, app)
                        .with_graceful_shutdown(async move { stopped(&mut stop).await });
                    let _ = serve.await;
                })
            }
            None => tokio::spawn(async move {
                let serve = axum::serve(listener, app)
                    .with_graceful_shutdown(async move { stopped(&mut stop).await });
                let _ = serve.await;
            }),
        }
    };
    let sync = tokio::spawn(sync_loop(
        shared.clone(),
        mirror,
        last_tip,
        config.sync_interval,
    ));
    let clock = tokio::spawn(health_clock(shared.clone()));
    Ok(Sandbox {
        addr,
        https,
        shared,
        tasks: vec![server, sync, clock],
    })
}

/// Argo CD reads a bearer token only when it has three non-empty dot-separated parts.
fn jwt_shaped(token: &str) -> bool {
    let parts: Vec<&str> = token.trim().split('.').collect();
    parts.len() == 3 && parts.iter().all(|p| !p.is_empty())
}

async fn render_at(mirror: &Mirror, commit: &str, path: &str) -> Result<RenderResult, String> {
    Ok(match mirror.manifest_files(commit, path).await? {
        Some(files) => manifests::render(&files, "default").map(Arc::new),
        None => Err(RenderError {
            message: format!("{path}: app path does not exist"),
        }),
    })
}

// Renders every git app at `tip` (outside the world's lock: git runs here), then lets the
// world reconcile them all at once.
async fn sync_to(
    shared: &Shared,
    mirror: &Mirror,
    tip: &str,
    refresh: &Refresh,
) -> Result<(), String> {
    let apps = shared.world().git_apps();
    let mut renders: BTreeMap<String, RenderResult> = BTreeMap::new();
    let mut by_path: BTreeMap<String, RenderResult> = BTreeMap::new();
    for (name, path) in apps {
        if !by_path.contains_key(&path) {
            let render = render_at(mirror, tip, &path).await?;
            by_path.insert(path.clone(), render);
        }
        renders.insert(name, by_path[&path].clone());
    }
    shared
        .world()
        .observe_tip(tip, &renders, &|name| refresh.wants(name), Now::current());
    shared.wake_health.notify_one();
    Ok(())
}

// Starts the syncs requested through the API: resolves each revision in the mirror (the
// tracked branch's tip for the target revision, the branch or HEAD; a commit that exists in the
// mirror otherwise) and renders it there.
async fn start_requested(shared: &Shared, mirror: &Mirror, tip: &str) -> Result<(), String> {
    let pending = shared.world().pending();
    for p in pending {
        let resolved = match &p.path {
            None => None,
            Some(path) => {
                let commit = if p.means_tip {
                    Some(tip.to_string())
                } else {
                    mirror.resolve(&p.revision).await?
                };
                match commit {
                    Some(commit) => {
                        let render = render_at(mirror, &commit, path).await?;
                        Some((commit, render))
                    }
                    None => None,
                }
            }
        };
        shared
            .world()
            .start_pending(&p.name, resolved, Now::current());
        shared.wake_health.notify_one();
    }
    Ok(())
}

async fn sync_loop(
    shared: Arc<Shared>,
    mirror: Mirror,
    mut last_tip: Option<String>,
    every: Duration,
) {
    let mut stop = shared.shutdown.subscribe();
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await; // the first tick is immediate; start() already synced
    let mut last_error: Option<String> = None;
    let mut registry_error: Option<String> = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shared.wake_sync.notified() => {}
            _ = stopped(&mut stop) => return,
        }
        // The registry is the world, not the sync: it is re-read even while syncing is paused.
        let reloaded = {
            let mut world = shared.world();
            let reloaded = world.policy.reload();
            if let Ok(true) = reloaded {
                world.refresh_health(Now::current());
            }
            reloaded
        };
        match reloaded {
            Ok(true) => {
                registry_error = None;
                shared.log("sandbox: registry file changed; image availability re-assessed");
                shared.wake_health.notify_one();
            }
            Ok(false) => registry_error = None,
            Err(e) if registry_error.as_ref() != Some(&e) => {
                shared.log(&format!("sandbox: keeping the last registry contents: {e}"));
                registry_error = Some(e);
            }
            Err(_) => {}
        }
        let _round = shared.sync_gate.lock().await;
        if shared.paused.load(Ordering::SeqCst) {
            continue;
        }
        let refresh = shared.take_refresh();
        let outcome = match mirror.fetch().await {
            Ok(tip) => {
                let moved = last_tip.as_ref() != Some(&tip);
                let reconciled = if moved {
                    sync_to(&shared, &mirror, &tip, &refresh)
                        .await
                        .map(|()| last_tip = Some(tip.clone()))
                } else {
                    // The health clock is woken only when a refresh reconciled an app: at
                    // 10,000 apps, waking it every tick for nothing walked every app each second.
                    let refreshed = shared
                        .world()
                        .refresh_matching(&|name| refresh.wants(name), Now::current());
                    if refreshed > 0 {
                        shared.wake_health.notify_one();
                    }
                    Ok(())
                };
                match (reconciled, &last_tip) {
                    (Ok(()), Some(tip)) => start_requested(&shared, &mirror, tip).await,
                    (other, _) => other,
                }
            }
            // The remote is away: requested syncs still start, at the last tip seen.
            Err(e) => match &last_tip {
                Some(tip) => start_requested(&shared, &mirror, tip).await.and(Err(e)),
                None => Err(e),
            },
        };
        // One line per distinct problem, not one per tick.
        match outcome {
            Ok(()) => {
                if last_error.take().is_some() {
                    shared.log("sandbox: sync works again");
                }
            }
            Err(e) if last_error.as_ref() != Some(&e) => {
                shared.log(&format!(
                    "sandbox: sync failed, retrying every {}: {e}",
                    humantime::format_duration(every)
                ));
                last_error = Some(e);
            }
            Err(_) => {}
        }
    }
}

/// Resolves once the sandbox is told to stop (the guard `wait_for` returns is not `Send`).
pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

async fn health_clock(shared: Arc<Shared>) {
    let mut stop = shared.shutdown.subscribe();
    loop {
        let next = shared.world().next_deadline(Now::current());
        let sleep = async {
            match next {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = sleep => {}
            _ = shared.wake_health.notified() => {}
            _ = stopped(&mut stop) => return,
        }
        shared.world().tick(Now::current());
    }
}
