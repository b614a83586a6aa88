//! The simulated cluster and controller: every Application's state, the sync operation Argo CD's
//! automated sync would run for a new tip, the live resources with their health over time, and
//! the Application / resource-tree JSON in Argo CD's wire format. Every change is one observable
//! update: it bumps the resourceVersion counter and is published to stream subscribers.
//! It is handed the time (`Now`) and the rendered manifests; it never runs git or sleeps.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use tokio::sync::broadcast;

use crate::health::{self, Assessment, Health, ImagePolicy, Subject};
use crate::manifests::{self, Digest, RenderError, Rendered, ResourceKey};
use crate::timefmt::rfc3339;
use crate::{APP_NAMESPACE, AppSpec, LogSink};

const DESTINATION_SERVER: &str = "https://kubernetes.default.svc";
const DESTINATION_NAMESPACE: &str = "default";
const HISTORY_LIMIT: usize = 10;
const SUCCEEDED_MESSAGE: &str = "successfully synced (all tasks run)";

/// One moment, on both clocks: wall time for timestamps, monotonic time for deadlines.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Now {
    pub wall: SystemTime,
    pub mono: Instant,
}

impl Now {
    pub(crate) fn current() -> Now {
        Now {
            wall: SystemTime::now(),
            mono: Instant::now(),
        }
    }
}

/// One observable update of one Application, as the stream delivers it.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub name: String,
    pub application: Arc<Value>,
}

/// What the manifests of a directory app rendered to at a tip.
pub(crate) type RenderResult = Result<Rendered, RenderError>;

enum Source {
    Path { path: String },
    Helm { chart: String, version: String },
}

struct Live {
    key: ResourceKey,
    version: String,
    uid: String,
    resource_version: u64,
    digest: Digest,
    images: Vec<String>,
    replicas: i64,
    /// A health that does not depend on time (annotation, paused spec).
    forced: Option<Assessment>,
    /// Left out of the app's health (`argocd.argoproj.io/ignore-healthcheck`).
    ignored: bool,
    rolling_until: Option<Instant>,
    assessment: Option<Assessment>,
}

struct App {
    name: String,
    uid: String,
    created: SystemTime,
    source: Source,
    resource_version: u64,
    /// Digest of the manifests the live resources were last synced from.
    synced_digest: Option<Digest>,
    synced: bool,
    revision: Option<String>,
    /// While OutOfSync after a comparison: what git wants, with its digest per object.
    desired: Option<Vec<(ResourceKey, String, Digest)>>,
    live: Vec<Live>,
    operation: Option<Value>,
    operation_state: Option<Value>,
    history: Vec<Value>,
    next_history_id: u64,
    conditions: Vec<Value>,
    reconciled_at: Option<SystemTime>,
    health: Health,
    health_since: SystemTime,
}

pub(crate) struct World {
    repo_url: String,
    branch: String,
    rollout_time: Duration,
    pub(crate) policy: ImagePolicy,
    counter: u64,
    apps: BTreeMap<String, App>,
    events: broadcast::Sender<Change>,
    log: Option<LogSink>,
}

fn uuid_from(seed: &str) -> String {
    let h = Sha256::digest(seed.as_bytes());
    let hex: String = h.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-4{}-a{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

fn short(rev: &str) -> &str {
    if rev.len() == 40 { &rev[..7] } else { rev }
}

impl World {
    pub(crate) fn new(
        repo_url: String,
        branch: String,
        rollout_time: Duration,
        policy: ImagePolicy,
        specs: &[AppSpec],
        log: Option<LogSink>,
        now: Now,
    ) -> World {
        let (events, _) = broadcast::channel(1024);
        let seed = format!("{}-{:?}", std::process::id(), now.wall);
        let mut apps = BTreeMap::new();
        for spec in specs {
            let source = match spec {
                AppSpec::Path { path, .. } => Source::Path { path: path.clone() },
                AppSpec::Helm { chart, version, .. } => Source::Helm {
                    chart: chart.clone(),
                    version: version.clone(),
                },
            };
            let name = spec.name().to_string();
            apps.insert(
                name.clone(),
                App {
                    uid: uuid_from(&format!("{seed}/{name}")),
                    name,
                    created: now.wall,
                    source,
                    resource_version: 0,
                    synced_digest: None,
                    synced: false,
                    revision: None,
                    desired: None,
                    live: Vec::new(),
                    operation: None,
                    operation_state: None,
                    history: Vec::new(),
                    next_history_id: 0,
                    conditions: Vec::new(),
                    reconciled_at: None,
                    health: Health::Missing,
                    health_since: now.wall,
                },
            );
        }
        let mut world = World {
            repo_url,
            branch,
            rollout_time,
            policy,
            counter: 0,
            apps,
            events,
            log,
        };
        let names: Vec<String> = world.apps.keys().cloned().collect();
        for name in names {
            world.commit(&name);
        }
        world
    }

    fn log(&self, line: String) {
        if let Some(sink) = &self.log {
            sink(&line);
        }
    }

    /// The directory apps and their paths, which the engine renders at each new tip.
    pub(crate) fn directory_apps(&self) -> Vec<(String, String)> {
        self.apps
            .values()
            .filter_map(|a| match &a.source {
                Source::Path { path } => Some((a.name.clone(), path.clone())),
                Source::Helm { .. } => None,
            })
            .collect()
    }

    /// Reconciles every app against a new tip of the tracked branch.
    pub(crate) fn observe_tip(
        &mut self,
        tip: &str,
        renders: &BTreeMap<String, RenderResult>,
        now: Now,
    ) {
        let names: Vec<String> = self.apps.keys().cloned().collect();
        for name in names {
            let helm_version = match &self.apps[&name].source {
                Source::Helm { version, .. } => Some(version.clone()),
                Source::Path { .. } => None,
            };
            if let Some(version) = helm_version {
                // A chart repository does not move with the git branch: synced once, at its version.
                if self.apps[&name].history.is_empty() {
                    self.run_operation(&name, &version, Ok(None), now);
                }
                continue;
            }
            let Some(render) = renders.get(&name) else {
                continue;
            };
            match render {
                Ok(rendered) if self.apps[&name].synced_digest == Some(rendered.digest) => {
                    self.move_without_changes(&name, tip, now);
                }
                Ok(rendered) => self.run_operation(&name, tip, Ok(Some(rendered)), now),
                Err(err) => {
                    let app = &self.apps[&name];
                    let already_failed_here = app.revision.as_deref() == Some(tip) && !app.synced;
                    if !already_failed_here {
                        self.run_operation(&name, tip, Err(err), now);
                    }
                }
            }
        }
    }

    // A commit that leaves the rendered manifests alone: Argo CD compares, finds nothing to do,
    // and reports the new revision as Synced without running an operation.
    fn move_without_changes(&mut self, name: &str, tip: &str, now: Now) {
        let app = self.apps.get_mut(name).expect("known app");
        if app.synced && app.revision.as_deref() == Some(tip) {
            return;
        }
        app.synced = true;
        app.revision = Some(tip.to_string());
        app.desired = None;
        app.conditions.clear();
        app.reconciled_at = Some(now.wall);
        self.log(format!(
            "app {name}: Synced at {} (manifests unchanged, no operation)",
            short(tip)
        ));
        self.commit(name);
    }

    // Argo CD's automated sync, one observable update per step: the comparison (OutOfSync at the
    // new revision), the operation starting (Running), the operation finishing.
    fn run_operation(
        &mut self,
        name: &str,
        revision: &str,
        render: Result<Option<&Rendered>, &RenderError>,
        now: Now,
    ) {
        let source = self.source_json(&self.apps[name]);
        {
            let app = self.apps.get_mut(name).expect("known app");
            app.synced = false;
            app.revision = Some(revision.to_string());
            app.desired = match render {
                Ok(Some(rendered)) => Some(
                    rendered
                        .manifests
                        .iter()
                        .map(|m| (m.key.clone(), m.version.clone(), m.digest))
                        .collect(),
                ),
                _ => None,
            };
            app.reconciled_at = Some(now.wall);
        }
        self.log(format!("app {name}: OutOfSync at {}", short(revision)));
        self.commit(name);

        let operation = json!({
            "sync": {"revision": revision, "syncStrategy": {"hook": {}}},
            "initiatedBy": {"automated": true},
            "retry": {"limit": 5},
        });
        {
            let app = self.apps.get_mut(name).expect("known app");
            app.operation = Some(operation.clone());
            app.operation_state = Some(json!({
                "operation": operation,
                "phase": "Running",
                "message": "",
                "startedAt": rfc3339(now.wall),
            }));
        }
        self.log(format!(
            "app {name}: operation Running at {}",
            short(revision)
        ));
        self.commit(name);

        let started = rfc3339(now.wall);
        let finished = rfc3339(SystemTime::now().max(now.wall));
        match render {
            Err(err) => {
                let message = format!(
                    "ComparisonError: Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown desc = Manifest generation error (cached): {}",
                    err.message
                );
                let app = self.apps.get_mut(name).expect("known app");
                app.operation = None;
                app.operation_state = Some(json!({
                    "operation": operation,
                    "phase": "Failed",
                    "message": message,
                    "syncResult": {"revision": revision, "source": source},
                    "startedAt": started,
                    "finishedAt": finished,
                }));
                app.conditions = vec![json!({
                    "type": "ComparisonError",
                    "message": message,
                    "lastTransitionTime": finished,
                })];
                app.reconciled_at = Some(SystemTime::now().max(now.wall));
                self.log(format!(
                    "app {name}: operation Failed at {}: {}",
                    short(revision),
                    err.message
                ));
            }
            Ok(rendered) => {
                let changed = self.apply(name, rendered, now);
                let app = self.apps.get_mut(name).expect("known app");
                let results: Vec<Value> = app
                    .live
                    .iter()
                    .map(|l| {
                        let verb = if changed.contains(&l.key) {
                            "configured"
                        } else {
                            "unchanged"
                        };
                        let mut r = resource_ref(&l.key, &l.version);
                        r["status"] = json!("Synced");
                        // kubectl's wording: `deployment.apps/web configured`.
                        let group = if l.key.group.is_empty() {
                            String::new()
                        } else {
                            format!(".{}", l.key.group)
                        };
                        r["message"] = json!(format!(
                            "{}{group}/{} {verb}",
                            l.key.kind.to_lowercase(),
                            l.key.name
                        ));
                        r["hookPhase"] = json!("Running");
                        r["syncPhase"] = json!("Sync");
                        r
                    })
                    .collect();
                app.operation = None;
                app.operation_state = Some(json!({
                    "operation": operation,
                    "phase": "Succeeded",
                    "message": SUCCEEDED_MESSAGE,
                    "syncResult": {"resources": results, "revision": revision, "source": source},
                    "startedAt": started,
                    "finishedAt": finished,
                }));
                app.history.push(json!({
                    "id": app.next_history_id,
                    "revision": revision,
                    "deployStartedAt": started,
                    "deployedAt": finished,
                    "source": source,
                    "initiatedBy": {"automated": true},
                }));
                app.next_history_id += 1;
                if app.history.len() > HISTORY_LIMIT {
                    app.history.remove(0);
                }
                app.synced = true;
                app.desired = None;
                app.conditions.clear();
                // reconciledAt is never earlier than finishedAt: the health that follows is fresh.
                app.reconciled_at = Some(SystemTime::now().max(now.wall));
                self.log(format!(
                    "app {name}: operation Succeeded at {} ({} of {} resources changed)",
                    short(revision),
                    changed.len(),
                    self.apps[name].live.len()
                ));
            }
        }
        self.settle_health(name, now);
        self.commit(name);
    }

    // Replaces the live resources by the rendered ones (a helm app: one Deployment named after
    // the chart); returns the keys that were created or changed.
    fn apply(&mut self, name: &str, rendered: Option<&Rendered>, now: Now) -> Vec<ResourceKey> {
        let rollout_until = (!self.rollout_time.is_zero()).then(|| now.mono + self.rollout_time);
        let app = self.apps.get_mut(name).expect("known app");
        let mut old: BTreeMap<ResourceKey, Live> =
            app.live.drain(..).map(|l| (l.key.clone(), l)).collect();
        let mut changed = Vec::new();
        let mut live = Vec::new();
        match rendered {
            Some(rendered) => {
                for m in &rendered.manifests {
                    if let Some(existing) = old.remove(&m.key).filter(|l| l.digest == m.digest) {
                        live.push(existing);
                        continue;
                    }
                    changed.push(m.key.clone());
                    self.counter += 1;
                    let workload = health::is_workload(&m.key.group, &m.key.kind);
                    live.push(Live {
                        uid: uuid_from(&format!("{}/{:?}", app.uid, m.key)),
                        key: m.key.clone(),
                        version: m.version.clone(),
                        resource_version: self.counter,
                        digest: m.digest,
                        images: manifests::images(&m.key.kind, &m.object),
                        replicas: m
                            .object
                            .pointer("/spec/replicas")
                            .and_then(Value::as_i64)
                            .unwrap_or(1),
                        forced: health::fixed_health(&m.key.group, &m.key.kind, &m.object),
                        ignored: health::ignored_by_app_health(&m.object),
                        rolling_until: if workload { rollout_until } else { None },
                        assessment: None,
                    });
                }
            }
            None => {
                let Source::Helm { chart, .. } = &app.source else {
                    unreachable!("only helm apps render nothing")
                };
                let key = ResourceKey {
                    group: "apps".into(),
                    kind: "Deployment".into(),
                    namespace: DESTINATION_NAMESPACE.into(),
                    name: chart.clone(),
                };
                changed.push(key.clone());
                self.counter += 1;
                live.push(Live {
                    uid: uuid_from(&format!("{}/{key:?}", app.uid)),
                    key,
                    version: "v1".into(),
                    resource_version: self.counter,
                    digest: [0; 32],
                    images: Vec::new(),
                    replicas: 1,
                    forced: None,
                    ignored: false,
                    rolling_until: None,
                    assessment: None,
                });
            }
        }
        app.live = live;
        app.synced_digest = rendered.map(|r| r.digest).or(Some([0; 32]));
        changed
    }

    // Recomputes every resource's health and the app's; returns whether anything changed.
    fn settle_health(&mut self, name: &str, now: Now) -> bool {
        let app = self.apps.get_mut(name).expect("known app");
        let mut changed = false;
        for l in &mut app.live {
            let assessment = health::assess(
                &Subject {
                    group: &l.key.group,
                    kind: &l.key.kind,
                    name: &l.key.name,
                    images: &l.images,
                    replicas: l.replicas,
                    forced: l.forced.as_ref(),
                    rolling_out: l.rolling_until.is_some_and(|until| now.mono < until),
                },
                &self.policy,
            );
            if assessment != l.assessment {
                l.assessment = assessment;
                self.counter += 1;
                l.resource_version = self.counter;
                changed = true;
            }
        }
        let status = health::aggregate(app.live.iter().map(|l| {
            if l.ignored {
                None
            } else {
                l.assessment.as_ref()
            }
        }));
        // The log names what made the app this status: the first resource reporting it.
        let cause = app
            .live
            .iter()
            .filter(|l| !l.ignored)
            .filter_map(|l| l.assessment.as_ref().map(|a| (l, a)))
            .find(|(_, a)| a.status == status && !a.message.is_empty())
            .map(|(l, a)| format!("{}/{}: {}", l.key.kind, l.key.name, a.message))
            .unwrap_or_default();
        if status != app.health {
            let line = format!(
                "app {name}: health {} -> {}{}",
                app.health.as_str(),
                status.as_str(),
                if cause.is_empty() {
                    String::new()
                } else {
                    format!(" ({cause})")
                }
            );
            app.health = status;
            app.health_since = now.wall;
            changed = true;
            self.log(line);
        }
        changed
    }

    /// Time-driven (rollouts finishing) and registry-driven health changes, one update per app
    /// that changed.
    pub(crate) fn refresh_health(&mut self, now: Now) {
        let names: Vec<String> = self.apps.keys().cloned().collect();
        for name in names {
            if self.settle_health(&name, now) {
                self.apps.get_mut(&name).expect("known app").reconciled_at = Some(now.wall);
                self.commit(&name);
            }
        }
    }

    /// When the next rollout finishes, if one is under way.
    pub(crate) fn next_deadline(&self, now: Now) -> Option<Instant> {
        self.apps
            .values()
            .flat_map(|a| a.live.iter())
            .filter_map(|l| l.rolling_until)
            .filter(|until| *until > now.mono)
            .min()
    }

    fn commit(&mut self, name: &str) {
        self.counter += 1;
        let app = self.apps.get_mut(name).expect("known app");
        app.resource_version = self.counter;
        let application = Arc::new(self.application_json(&self.apps[name]));
        // No subscriber is not an error: the update is still visible through GET.
        let _ = self.events.send(Change {
            name: name.to_string(),
            application,
        });
    }

    pub(crate) fn resource_version(&self) -> u64 {
        self.counter
    }

    /// Subscribes to updates; called with the world locked so that the snapshot taken under the
    /// same lock and the updates that follow neither overlap nor leave a gap.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.events.subscribe()
    }

    pub(crate) fn application(&self, name: &str) -> Option<Value> {
        self.apps.get(name).map(|a| self.application_json(a))
    }

    pub(crate) fn applications(&self, only: Option<&str>) -> Vec<Value> {
        self.apps
            .values()
            .filter(|a| only.is_none_or(|n| n == a.name))
            .map(|a| self.application_json(a))
            .collect()
    }

    fn source_json(&self, app: &App) -> Value {
        match &app.source {
            Source::Path { path } => json!({
                "repoURL": self.repo_url,
                "path": if path.is_empty() { "." } else { path.as_str() },
                "targetRevision": self.branch,
                "directory": {"recurse": true},
            }),
            Source::Helm { chart, version } => json!({
                "repoURL": self.repo_url,
                "chart": chart,
                "targetRevision": version,
            }),
        }
    }

    fn application_json(&self, app: &App) -> Value {
        let source = self.source_json(app);
        let destination = json!({"server": DESTINATION_SERVER, "namespace": DESTINATION_NAMESPACE});
        let resources: Vec<Value> = match &app.desired {
            Some(desired) => {
                let mut out: Vec<Value> = desired
                    .iter()
                    .map(|(key, version, digest)| {
                        let same = app
                            .live
                            .iter()
                            .any(|l| &l.key == key && &l.digest == digest);
                        let mut r = resource_ref(key, version);
                        r["status"] = json!(if same { "Synced" } else { "OutOfSync" });
                        r
                    })
                    .collect();
                for l in app
                    .live
                    .iter()
                    .filter(|l| !desired.iter().any(|(k, _, _)| k == &l.key))
                {
                    let mut r = resource_ref(&l.key, &l.version);
                    r["status"] = json!("OutOfSync");
                    r["requiresPruning"] = json!(true);
                    out.push(r);
                }
                out
            }
            None => app
                .live
                .iter()
                .map(|l| {
                    let mut r = resource_ref(&l.key, &l.version);
                    r["status"] = json!("Synced");
                    r
                })
                .collect(),
        };
        let mut sync = json!({
            "status": if app.synced { "Synced" } else { "OutOfSync" },
            "comparedTo": {"source": source, "destination": destination},
        });
        // Argo CD omits an empty revision (never compared yet).
        if let Some(rev) = &app.revision {
            sync["revision"] = json!(rev);
        }
        let health =
            json!({"status": app.health.as_str(), "lastTransitionTime": rfc3339(app.health_since)});
        let mut images: Vec<&String> = app.live.iter().flat_map(|l| l.images.iter()).collect();
        images.sort();
        images.dedup();
        let mut status = json!({
            "resources": resources,
            "sync": sync,
            "health": health,
            "sourceType": match app.source { Source::Path { .. } => "Directory", Source::Helm { .. } => "Helm" },
            "summary": {"images": images},
            "resourceHealthSource": "appTree",
            "controllerNamespace": APP_NAMESPACE,
        });
        if !app.history.is_empty() {
            status["history"] = json!(app.history);
        }
        if !app.conditions.is_empty() {
            status["conditions"] = json!(app.conditions);
        }
        if let Some(t) = app.reconciled_at {
            status["reconciledAt"] = json!(rfc3339(t));
        }
        if let Some(op) = &app.operation_state {
            status["operationState"] = op.clone();
        }
        let mut out = json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {
                "name": app.name,
                "namespace": APP_NAMESPACE,
                "uid": app.uid,
                "resourceVersion": app.resource_version.to_string(),
                "creationTimestamp": rfc3339(app.created),
            },
            "spec": {
                "project": "default",
                "source": source,
                "destination": destination,
                "syncPolicy": {"automated": {"prune": false, "selfHeal": true}},
            },
            "status": status,
        });
        if let Some(op) = &app.operation {
            out["operation"] = op.clone();
        }
        out
    }

    /// `GET /api/v1/applications/{name}/resource-tree`: the live resources with their health.
    pub(crate) fn resource_tree(&self, name: &str) -> Option<Value> {
        let app = self.apps.get(name)?;
        let nodes: Vec<Value> = app
            .live
            .iter()
            .map(|l| {
                let mut node = resource_ref(&l.key, &l.version);
                node["uid"] = json!(l.uid);
                node["resourceVersion"] = json!(l.resource_version.to_string());
                if !l.images.is_empty() {
                    node["images"] = json!(l.images);
                }
                if let Some(a) = &l.assessment {
                    let mut h = json!({"status": a.status.as_str()});
                    if !a.message.is_empty() {
                        h["message"] = json!(a.message);
                    }
                    node["health"] = h;
                }
                node["createdAt"] = json!(rfc3339(app.created));
                node
            })
            .collect();
        Some(json!({"nodes": nodes}))
    }
}

// Argo CD leaves empty group and namespace out (`omitempty`).
fn resource_ref(key: &ResourceKey, version: &str) -> Value {
    let mut r = json!({"version": version, "kind": key.kind, "name": key.name});
    if !key.group.is_empty() {
        r["group"] = json!(key.group);
    }
    if !key.namespace.is_empty() {
        r["namespace"] = json!(key.namespace);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repo::RepoFile;

    fn world(rollout: Duration, now: Now) -> World {
        let specs = [AppSpec::parse("web=apps/web").unwrap()];
        World::new(
            "/srv/origin.git".into(),
            "main".into(),
            rollout,
            ImagePolicy::TagHeuristic,
            &specs,
            None,
            now,
        )
    }

    fn rendered(image: &str) -> BTreeMap<String, RenderResult> {
        let text = format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  template:\n    spec:\n      containers: [{{name: web, image: '{image}'}}]\n"
        );
        let files = [RepoFile {
            path: "apps/web/d.yaml".into(),
            bytes: text.into_bytes(),
        }];
        BTreeMap::from([("web".to_string(), manifests::render(&files, "default"))])
    }

    fn at(start: Now, offset: Duration) -> Now {
        Now {
            wall: start.wall + offset,
            mono: start.mono + offset,
        }
    }

    fn health_of(w: &World) -> String {
        w.application("web").unwrap()["status"]["health"]["status"]
            .as_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn a_rollout_ends_exactly_at_its_deadline_and_is_published() {
        let t0 = Now::current();
        let rollout = Duration::from_secs(5);
        let mut w = world(rollout, t0);
        let mut updates = w.subscribe();
        w.observe_tip(&"a".repeat(40), &rendered("nginx:does-not-exist"), t0);
        // Compare, start, finish: three updates.
        for phase in [None, Some("Running"), Some("Succeeded")] {
            let change = updates.try_recv().unwrap();
            let op = &change.application["status"]["operationState"]["phase"];
            assert_eq!(op.as_str(), phase);
        }
        assert_eq!(health_of(&w), "Progressing");
        assert_eq!(w.next_deadline(t0), Some(t0.mono + rollout));

        w.refresh_health(at(t0, rollout - Duration::from_millis(1)));
        assert!(
            updates.try_recv().is_err(),
            "nothing changes before the deadline"
        );
        w.refresh_health(at(t0, rollout));
        assert_eq!(health_of(&w), "Degraded");
        let change = updates.try_recv().unwrap();
        assert_eq!(change.application["status"]["health"]["status"], "Degraded");
        assert_eq!(w.next_deadline(at(t0, rollout)), None);
    }

    #[test]
    fn an_unchanged_render_at_a_new_tip_is_one_update_without_an_operation() {
        let t0 = Now::current();
        let mut w = world(Duration::ZERO, t0);
        w.observe_tip(&"a".repeat(40), &rendered("nginx:1"), t0);
        assert_eq!(health_of(&w), "Healthy", "no rollout time: healthy at once");
        let mut updates = w.subscribe();
        w.observe_tip(
            &"b".repeat(40),
            &rendered("nginx:1"),
            at(t0, Duration::from_secs(1)),
        );
        let change = updates.try_recv().unwrap();
        assert!(updates.try_recv().is_err());
        let app = &change.application;
        assert_eq!(app["status"]["sync"]["revision"], "b".repeat(40));
        assert_eq!(
            app["status"]["operationState"]["syncResult"]["revision"],
            "a".repeat(40)
        );
        assert_eq!(app["status"]["history"].as_array().unwrap().len(), 1);
    }
}
