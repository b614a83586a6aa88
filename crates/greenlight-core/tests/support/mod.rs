//! Test support for the judge's tests: builders for the facts the judge reads (commits,
//! Application snapshots) and a harness that drives an [`Engine`] with explicit timestamps.
//! The harness answers ancestry questions from a truth table, but only the questions the engine
//! asked, so a test also fails when the engine forgets to ask what it needs. It never reads a
//! clock and never sleeps.
#![allow(dead_code)]

use greenlight_core::commit::CommitId;
use greenlight_core::directive::{DEFAULT_TRAILER_KEY, directives_in};
use greenlight_core::event::{Event, EventKind};
use greenlight_core::judge::{
    Ancestry, CommitInfo, Effect, Engine, JudgeConfig, Observation, RevertOutcome, RevertRequest,
    State, Watch,
};
use greenlight_core::snapshot::{
    AppKey, AppSnapshot, ComparedElsewhere, Glimpse, Health, OperationFacts, ReachCandidate,
    ReachVia, ResourceHealthSource, ResourceView, SourceFacts, SourcePaths, UnhealthyResource,
};
use greenlight_core::time::Timestamp;
use greenlight_core::watch::FlatWatch;
use std::collections::{BTreeSet, HashMap};

pub const REPO: &str = "https://git.example.com/org/deploy.git";
pub const BRANCH: &str = "main";
/// 2026-12-02T10:00:00Z: every test time is an offset in seconds from here.
pub const BASE_MS: i64 = 1_796_205_600_000;

/// A timestamp `s` seconds after the base.
pub fn t(s: i64) -> Timestamp {
    Timestamp(BASE_MS + s * 1000)
}

/// A timestamp `ms` milliseconds after the base.
pub fn tms(ms: i64) -> Timestamp {
    Timestamp(BASE_MS + ms)
}

/// A distinct 40-hex SHA for each `n`.
pub fn sha(n: u64) -> String {
    format!(
        "{:08x}{:032x}",
        n as u32,
        n.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    )
}

/// The commit id `sha(n)`.
pub fn commit_id(n: u64) -> CommitId {
    CommitId::parse(&sha(n)).expect("sha() is 40 hex digits")
}

/// The default configuration of the command line (stable 120 s, stale 30 s, grace 60 s).
pub fn config() -> JudgeConfig {
    JudgeConfig::new(REPO, BRANCH, true)
}

/// A commit message with a subject, a body and the given trailer lines as the last paragraph.
pub fn message(subject: &str, trailers: &[&str]) -> String {
    let mut m = format!("{subject}\n\nsome explanation of the change\n");
    if !trailers.is_empty() {
        m.push('\n');
        for tr in trailers {
            m.push_str(tr);
            m.push('\n');
        }
    }
    m
}

pub fn commit(n: u64, msg: &str, paths: &[&str]) -> CommitInfo {
    CommitInfo {
        sha: commit_id(n),
        parents: vec![commit_id(n + 100_000)],
        subject: msg.lines().next().unwrap_or_default().to_string(),
        message: msg.to_string(),
        changed_paths: paths.iter().map(|p| p.to_string()).collect(),
        mainline: None,
    }
}

/// A commit touching `apps/<app>/deploy.yaml` with one `Nav-Watchdog` trailer.
pub fn watched(n: u64, app: &str, fields: &str) -> CommitInfo {
    let tr = format!("Nav-Watchdog: app={app} {fields}");
    commit(
        n,
        &message(&format!("change {app}"), &[tr.trim_end()]),
        &[&format!("apps/{app}/deploy.yaml")],
    )
}

/// A plain commit (no trailer) touching the given paths.
pub fn plain(n: u64, paths: &[&str]) -> CommitInfo {
    commit(n, &message("an unrelated change", &[]), paths)
}

/// A snapshot builder. The default is an app in namespace `argocd` deploying
/// `apps/<name>` from the watched repo at the tracked branch, Synced, Healthy, automated sync,
/// never synced to any revision (no reach candidates, empty revision).
#[derive(Clone, Debug)]
pub struct Snap(pub AppSnapshot);

impl Snap {
    pub fn new(name: &str) -> Snap {
        Snap(AppSnapshot {
            namespace: "argocd".into(),
            name: name.into(),
            source: SourceFacts::FromRepo {
                target_revisions: vec![BRANCH.into()],
                chart: None,
                revisions: Vec::new(),
                paths: SourcePaths::Known(vec![format!("apps/{name}")]),
            },
            sync_status: "Synced".into(),
            sync_revision: String::new(),
            health: Health::Healthy,
            health_message: String::new(),
            operation_running: false,
            last_operation: None,
            unhealthy_resources: Vec::new(),
            resource_health_source: ResourceHealthSource::Application,
            health_stale: false,
            automated_sync: true,
            reach_candidates: Vec::new(),
            compared_elsewhere: None,
            comparison_error: None,
            source_hydrator: false,
            inputs: Default::default(),
            resources: Vec::new(),
        })
    }

    pub fn snap(&self) -> &AppSnapshot {
        &self.0
    }

    fn candidate(mut self, revision: &str, via: ReachVia) -> Snap {
        self.0.reach_candidates.push(ReachCandidate {
            revision: revision.into(),
            via,
        });
        if let SourceFacts::FromRepo { revisions, .. } = &mut self.0.source
            && !revisions.iter().any(|r| r == revision)
        {
            revisions.push(revision.into());
        }
        self
    }

    /// As the adapter reports an app after a succeeded sync to `rev`: the operation's revision,
    /// the synced revision (Synced, no operation) and a history entry.
    pub fn deployed(mut self, rev: &str) -> Snap {
        self.0.sync_revision = rev.into();
        self.0.last_operation = Some(OperationFacts {
            phase: "Succeeded".into(),
            message: "successfully synced (all tasks run)".into(),
            revision: rev.into(),
            started_at: None,
            finished_at: None,
            dry_run: false,
            partial: false,
        });
        self.candidate(rev, ReachVia::OperationSucceeded)
            .candidate(rev, ReachVia::SyncedRevision)
            .candidate(rev, ReachVia::History { id: 1 })
    }

    /// The last operation started at `at` (Argo CD's clock).
    pub fn operation_started(mut self, at: Timestamp) -> Snap {
        if let Some(op) = &mut self.0.last_operation {
            op.started_at = Some(at);
        }
        self
    }

    /// Only the operation's `syncResult.revision` of a succeeded operation.
    pub fn via_operation(mut self, rev: &str) -> Snap {
        self.0.last_operation = Some(OperationFacts {
            phase: "Succeeded".into(),
            message: "successfully synced".into(),
            revision: rev.into(),
            started_at: None,
            finished_at: None,
            dry_run: false,
            partial: false,
        });
        self.candidate(rev, ReachVia::OperationSucceeded)
    }

    /// Only `sync.revision` while Synced with no operation.
    pub fn via_synced_revision(mut self, rev: &str) -> Snap {
        self.0.sync_revision = rev.into();
        self.candidate(rev, ReachVia::SyncedRevision)
    }

    /// Only a history entry.
    pub fn via_history(self, rev: &str, id: i64) -> Snap {
        self.candidate(rev, ReachVia::History { id })
    }

    /// A finished operation that failed on `rev`.
    pub fn failed_operation(mut self, rev: &str, phase: &str, message: &str) -> Snap {
        self.0.last_operation = Some(OperationFacts {
            phase: phase.into(),
            message: message.into(),
            revision: rev.into(),
            started_at: None,
            finished_at: None,
            dry_run: false,
            partial: false,
        });
        self.0.sync_status = "OutOfSync".into();
        self.0.health = Health::Degraded;
        self.candidate(
            rev,
            ReachVia::OperationFailed {
                phase: phase.into(),
                message: message.into(),
            },
        )
    }

    /// A finished operation that applied `rev` whole, then Failed in its PostSync phase: the
    /// app Synced at `rev`, health as it was left (Healthy: Argo CD runs PostSync hooks only
    /// once the synced objects are healthy).
    pub fn post_sync_hook_failed(mut self, rev: &str, hooks: &[&str]) -> Snap {
        let message = "one or more synchronization tasks completed unsuccessfully";
        self.0.sync_revision = rev.into();
        self.0.last_operation = Some(OperationFacts {
            phase: "Failed".into(),
            message: message.into(),
            revision: rev.into(),
            started_at: None,
            finished_at: None,
            dry_run: false,
            partial: false,
        });
        self.candidate(
            rev,
            ReachVia::PostSyncHookFailed {
                phase: "Failed".into(),
                message: message.into(),
                hooks: hooks.iter().map(|h| h.to_string()).collect(),
            },
        )
        .candidate(rev, ReachVia::SyncedRevision)
    }

    /// One of the app's inputs from outside the watched repository (a spec field's digest,
    /// another source's revision).
    pub fn input(mut self, name: &str, value: &str) -> Snap {
        self.0.inputs.insert(name.into(), value.into());
        self
    }

    /// `sync.revision` = `rev` without making it a reach candidate (what Argo CD compared).
    pub fn compared_revision(mut self, rev: &str) -> Snap {
        self.0.sync_revision = rev.into();
        self
    }

    /// Argo CD cannot render the app: sync `Unknown`, the comparison's revision unresolved (so
    /// not reported), and the condition's message.
    pub fn comparison_error(mut self, message: &str) -> Snap {
        self.0.sync_status = "Unknown".into();
        self.0.sync_revision = String::new();
        self.0.comparison_error = Some(message.into());
        self
    }

    /// The sync that applied `applied` finished in the second the last reconcile (comparing
    /// `compared`) started.
    pub fn compared_elsewhere(mut self, applied: &str, compared: &str) -> Snap {
        self.0.compared_elsewhere = Some(ComparedElsewhere {
            applied: applied.into(),
            compared: compared.into(),
        });
        self
    }

    /// `spec.sourceHydrator` is set.
    pub fn source_hydrator(mut self) -> Snap {
        self.0.source_hydrator = true;
        self
    }

    pub fn health(mut self, h: Health) -> Snap {
        self.0.health = h;
        self
    }
    pub fn sync(mut self, s: &str) -> Snap {
        self.0.sync_status = s.into();
        self
    }
    pub fn operation_running(mut self) -> Snap {
        self.0.operation_running = true;
        self
    }
    pub fn stale_health(mut self) -> Snap {
        self.0.health_stale = true;
        self
    }
    pub fn unhealthy_resource(mut self, kind: &str, name: &str, h: Health) -> Snap {
        self.0.unhealthy_resources.push(UnhealthyResource {
            kind: kind.into(),
            namespace: "default".into(),
            name: name.into(),
            health: h,
            message: String::new(),
        });
        self
    }
    /// A top-level resource as the comparison left it, in namespace `default`: its sync
    /// status, `requiresPruning` and health (`None`: no health check). Degraded or Missing, it
    /// is also an unhealthy resource, as the adapter reports it.
    pub fn resource(
        mut self,
        kind: &str,
        name: &str,
        sync: &str,
        requires_pruning: bool,
        health: Option<Health>,
    ) -> Snap {
        self.0.resources.push(ResourceView {
            group: String::new(),
            kind: kind.into(),
            namespace: "default".into(),
            name: name.into(),
            sync_status: sync.into(),
            requires_pruning,
            health,
            message: String::new(),
        });
        match health {
            Some(h @ (Health::Degraded | Health::Missing)) => {
                self.unhealthy_resource(kind, name, h)
            }
            _ => self,
        }
    }
    pub fn auto_sync(mut self, on: bool) -> Snap {
        self.0.automated_sync = on;
        self
    }
    pub fn namespace(mut self, ns: &str) -> Snap {
        self.0.namespace = ns.into();
        self
    }
    pub fn paths(mut self, p: SourcePaths) -> Snap {
        if let SourceFacts::FromRepo { paths, .. } = &mut self.0.source {
            *paths = p;
        }
        self
    }
    pub fn target_revision(mut self, target: &str) -> Snap {
        if let SourceFacts::FromRepo {
            target_revisions, ..
        } = &mut self.0.source
        {
            *target_revisions = vec![target.into()];
        }
        self
    }
    pub fn chart(mut self, chart: &str) -> Snap {
        if let SourceFacts::FromRepo { chart: c, .. } = &mut self.0.source {
            *c = Some(chart.into());
        }
        self
    }
    pub fn not_from_repo(mut self, other: &str) -> Snap {
        self.0.source = SourceFacts::NotFromRepo {
            repos: vec![other.into()],
        };
        self
    }
    /// A revision as Argo CD reports it for a non-git source (chart version, OCI digest): it is
    /// the sync revision and the succeeded operation's revision.
    pub fn non_git_revision(mut self, rev: &str) -> Snap {
        self.0.sync_revision = rev.into();
        self.0.last_operation = Some(OperationFacts {
            phase: "Succeeded".into(),
            message: "successfully synced".into(),
            revision: rev.into(),
            started_at: None,
            finished_at: None,
            dry_run: false,
            partial: false,
        });
        self.candidate(rev, ReachVia::OperationSucceeded)
            .candidate(rev, ReachVia::SyncedRevision)
    }
}

/// The events among some effects.
pub fn events(effects: &[Effect]) -> Vec<Event> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Emit(ev) => Some(ev.clone()),
            Effect::Revert(_) | Effect::Withdraw { .. } | Effect::Verify { .. } => None,
        })
        .collect()
}

/// The pull requests the effects withdraw, with why.
pub fn withdrawals(effects: &[Effect]) -> Vec<(String, String)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Withdraw { proposal, why } => Some((proposal.url.clone(), why.clone())),
            _ => None,
        })
        .collect()
}

pub fn kinds(effects: &[Effect]) -> Vec<EventKind> {
    events(effects).iter().map(|e| e.event).collect()
}

pub fn reverts(effects: &[Effect]) -> Vec<RevertRequest> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Revert(r) => Some(r.clone()),
            Effect::Emit(_) | Effect::Withdraw { .. } | Effect::Verify { .. } => None,
        })
        .collect()
}

/// Drives an engine with explicit times and records every effect.
pub struct Harness {
    pub engine: Engine,
    /// `(commit, revision)` pairs for which "commit is an ancestor of revision" holds.
    pub truth: BTreeSet<(String, String)>,
    /// Every question the engine asked, in order.
    pub asked: Vec<(String, String)>,
    pub log: Vec<Effect>,
    /// The health the stream shows of each app a commit's trailers name just before the commit
    /// arrives, Synced at the commit's parent (no operation running, no failed operation): the
    /// watch's baseline, a clean one when Healthy, with nothing else in the commit's sync.
    /// `None`: no such glimpse (the test says what the app looked like itself).
    pub baseline: Option<Health>,
    /// The last commit that arrived: a test's next commit on the branch may take it as its parent.
    pub last_arrived: Option<CommitId>,
    /// Each watch's tape as the engine handed it over (`take_tapes`), as a store keeps it.
    pub tapes: std::collections::BTreeMap<String, Vec<greenlight_core::tape::Step>>,
}

/// Every watch a test's harness saw start is replayed from its tape when the test is done with
/// the harness (`docs/why.md`): the replayed watch must be the judged one, field for field. (A
/// watch started before this harness — an engine restored or cloned into it — has no tape here
/// that begins with its start, and is not replayed.)
impl Drop for Harness {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        self.take_tapes();
        for w in self.engine.watches() {
            let Some(tape) = self.tapes.get(&w.id) else {
                continue;
            };
            if !matches!(
                tape.first(),
                Some(greenlight_core::tape::Step::Start { .. })
            ) {
                continue;
            }
            let replay = Engine::replay(tape).expect("a tape replays");
            if replay.full {
                continue;
            }
            assert_eq!(replay.diverged, None, "watch {}: {tape:#?}", w.id);
            assert_eq!(
                replay.watch.to_flat(),
                w.to_flat(),
                "watch {}: the replay of its tape judged otherwise",
                w.id
            );
        }
    }
}

/// The revision an app is at before a root commit arrives (no watched commit is its ancestor).
pub const BASELINE_REVISION: &str = "babeba5e0000000000000000000000000000babe";

impl Harness {
    pub fn new(config: JudgeConfig) -> Harness {
        Harness::with_engine(Engine::new(config))
    }

    pub fn with_engine(engine: Engine) -> Harness {
        Harness {
            engine,
            truth: BTreeSet::new(),
            asked: Vec::new(),
            log: Vec::new(),
            baseline: Some(Health::Healthy),
            last_arrived: None,
            tapes: Default::default(),
        }
    }

    fn take_tapes(&mut self) {
        for (id, first, steps) in self.engine.take_tapes() {
            let tape = self.tapes.entry(id).or_default();
            if tape.len() == first {
                tape.extend(steps);
            } else {
                // Taken by another harness first (an engine cloned into this one).
                tape.clear();
            }
        }
    }

    /// Record that `commit` is an ancestor of `revision`.
    pub fn ancestor(&mut self, commit: impl AsRef<str>, revision: &str) {
        self.truth
            .insert((commit.as_ref().to_string(), revision.to_string()));
    }

    fn answer(&mut self, questions: Vec<(String, String)>) -> Ancestry {
        let mut map = HashMap::new();
        for q in questions {
            let yes = self.truth.contains(&q);
            self.asked.push(q.clone());
            map.insert(q, yes);
        }
        Ancestry(map)
    }

    fn record(&mut self, effects: Vec<Effect>) -> Vec<Effect> {
        self.log.extend(effects.iter().cloned());
        self.take_tapes();
        effects
    }

    /// The listing's glimpse of `app` idle and Synced at `revision`, with `paths` (`None`: no
    /// source from the watched repository).
    pub fn glimpse(
        &mut self,
        namespace: &str,
        app: &str,
        health: Health,
        revision: &str,
        paths: Option<SourcePaths>,
    ) {
        let key = AppKey {
            namespace: namespace.into(),
            name: app.into(),
        };
        let glimpse = Glimpse {
            health,
            sync_revision: revision.into(),
            operation_running: false,
            sync_status: "Synced".into(),
            last_operation_phase: None,
            last_operation_revision: None,
            chronic: Default::default(),
            source_paths: paths,
        };
        self.engine.glimpse(&key, &glimpse);
    }

    pub fn arrive(&mut self, c: &CommitInfo, at: Timestamp) -> Vec<Effect> {
        if let Some(health) = self.baseline {
            let revision = c
                .parents
                .first()
                .map_or(BASELINE_REVISION.to_string(), |p| p.to_string());
            for d in directives_in(&c.message, DEFAULT_TRAILER_KEY)
                .into_iter()
                .flatten()
            {
                let namespace = d.app.namespace.clone().unwrap_or_else(|| "argocd".into());
                self.glimpse(&namespace, &d.app.name, health, &revision, None);
            }
        }
        let q = self.engine.arrival_questions(c);
        let anc = self.answer(q);
        self.last_arrived = Some(c.sha.clone());
        let out = self.engine.commit_arrived(c, &anc, at);
        self.record(out)
    }

    pub fn observe(&mut self, s: &Snap, at: Timestamp) -> Vec<Effect> {
        let q = self.engine.reach_questions(s.snap());
        let anc = self.answer(q);
        let out = self
            .engine
            .observe(Observation::Present(s.snap()), &anc, at);
        self.record(out)
    }

    /// An observation that shows the source lost updates since the last one.
    pub fn observe_after_gap(&mut self, s: &Snap, at: Timestamp) -> Vec<Effect> {
        let q = self.engine.reach_questions(s.snap());
        let anc = self.answer(q);
        let out = self
            .engine
            .observe_after_gap(Observation::Present(s.snap()), &anc, at);
        self.record(out)
    }

    pub fn absent(&mut self, name: &str, at: Timestamp) -> Vec<Effect> {
        let out = self.engine.observe(
            Observation::Absent {
                namespace: Some("argocd"),
                name,
            },
            &Ancestry::default(),
            at,
        );
        self.record(out)
    }

    pub fn tick(&mut self, at: Timestamp) -> Vec<Effect> {
        let out = self.engine.tick(at);
        self.record(out)
    }

    pub fn finish_revert(
        &mut self,
        watch_id: &str,
        o: RevertOutcome,
        at: Timestamp,
    ) -> Vec<Effect> {
        let out = self.engine.revert_finished(watch_id, o, at);
        self.record(out)
    }

    /// The watch of `commit` (its first trailer).
    pub fn watch(&self, commit: impl AsRef<str>) -> &Watch {
        let commit = commit.as_ref();
        self.engine
            .watches()
            .iter()
            .find(|w| w.commit == commit)
            .unwrap_or_else(|| panic!("no watch for {commit}"))
    }

    pub fn state(&self, commit: impl AsRef<str>) -> State {
        self.watch(commit).state()
    }

    /// The words `status` shows for the watch of `commit`.
    pub fn reason(&self, commit: impl AsRef<str>) -> String {
        self.watch(commit).reason().to_string()
    }

    /// Observe the same snapshot every `every` seconds from `from` to `to` inclusive.
    pub fn observe_every(&mut self, s: &Snap, from: i64, to: i64, every: i64) -> Vec<Effect> {
        let mut out = Vec::new();
        let mut at = from;
        while at <= to {
            out.extend(self.observe(s, t(at)));
            at += every;
        }
        out
    }

    pub fn all_reverts(&self) -> Vec<RevertRequest> {
        reverts(&self.log)
    }

    pub fn all_kinds(&self) -> Vec<EventKind> {
        kinds(&self.log)
    }
}

/// Watches as a restart reads them back: each written as the store writes its body (the flat
/// record as JSON) and read back from that text.
pub fn through_the_store(ws: &[Watch]) -> Vec<Watch> {
    ws.iter()
        .map(|w| {
            let body = serde_json::to_string(&w.to_flat()).expect("a flat watch serializes");
            let flat: FlatWatch = serde_json::from_str(&body).expect("a flat watch deserializes");
            Watch::from_flat(flat).expect("a written watch reads back")
        })
        .collect()
}
