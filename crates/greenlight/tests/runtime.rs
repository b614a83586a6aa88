//! The watchdog runtime in-process: fake Application source, repository and revert executor,
//! a real SQLite store in a temporary directory, and tokio's paused clock behind the runtime's
//! clock, so a 2-minute stability window passes in milliseconds and every instant is exact.
//! What only a real process, git and the sandbox can show stays in the binary-driven tests.

use greenlight::clock::Clock;
use greenlight::metrics::Probe;
use greenlight::output::{LogFormat, Output};
use greenlight::runtime::seams::{AppSource, Context, Jobs, Repository, RevertExecutor};
use greenlight::runtime::{DaemonConfig, Runtime, Start};
use greenlight::store::SqliteStore;
use greenlight_core::directive::AppRef;
use greenlight_core::event::{Event, EventKind};
use greenlight_core::judge::{CommitInfo, RevertOutcome, RevertRequest};
use greenlight_core::repo_url::RepoUrl;
use greenlight_core::snapshot::{
    AppSnapshot, Glimpse, Health, OperationFacts, ReachCandidate, ReachVia, ResourceHealthSource,
    SourceFacts, SourcePaths,
};
use greenlight_core::source::{Origin, Problem, SourceMsg};
use greenlight_core::time::Timestamp;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

const APP: &str = "web";
const T0: i64 = 1_800_000_000_000;

/// Runtime time is tokio's (paused) time, from a fixed epoch at the test's first instant, so
/// that a second runtime in the same test (a restart) shares the first one's timeline.
struct TestClock {
    start: tokio::time::Instant,
}

thread_local! {
    static ORIGIN: std::cell::OnceCell<tokio::time::Instant> = const { std::cell::OnceCell::new() };
}

impl TestClock {
    fn new() -> TestClock {
        TestClock {
            start: ORIGIN.with(|o| *o.get_or_init(tokio::time::Instant::now)),
        }
    }
}

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        Timestamp(T0 + self.start.elapsed().as_millis() as i64)
    }
}

/// What the fake source was asked.
#[derive(Default)]
struct SourceLog {
    listings: Vec<u64>,
    reads: Vec<(u64, Vec<AppRef>)>,
    watched: Vec<AppRef>,
    stream_started: bool,
}

/// The app as Argo CD currently has it (`None`: no such Application).
type World = Arc<Mutex<Option<AppSnapshot>>>;

/// Answers listings and reads from the world, as Argo CD would, unless the test answers by
/// hand (`auto` false: an API that takes requests and never answers).
struct FakeSource {
    log: Arc<Mutex<SourceLog>>,
    world: World,
    tx: mpsc::Sender<SourceMsg>,
    auto: bool,
}

impl FakeSource {
    fn answer(&self, origin: Origin) {
        let app = self.world.lock().unwrap().clone();
        let msg = match app {
            Some(snap) => observed(snap, origin),
            None => SourceMsg::Absent {
                app: AppRef {
                    namespace: None,
                    name: APP.into(),
                },
                origin,
            },
        };
        self.tx.try_send(msg).unwrap();
    }
}

impl AppSource for FakeSource {
    fn start_stream(&mut self) {
        self.log.lock().unwrap().stream_started = true;
    }
    fn set_watched(&mut self, apps: Vec<AppRef>) {
        self.log.lock().unwrap().watched = apps;
    }
    fn request_listing(&mut self, ticket: u64) {
        self.log.lock().unwrap().listings.push(ticket);
        if self.auto {
            let present = self.world.lock().unwrap().as_ref().map(|s| s.key());
            if present.is_some() {
                self.answer(Origin::Listing(ticket));
            }
            self.tx
                .try_send(SourceMsg::Listed {
                    ticket,
                    present: present.into_iter().collect(),
                    complete: true,
                })
                .unwrap();
        }
    }
    fn request_read(&mut self, ticket: u64, apps: Vec<AppRef>) {
        self.log.lock().unwrap().reads.push((ticket, apps));
        if self.auto {
            self.answer(Origin::Read(ticket));
        }
    }
}

/// A branch as a list of commits, and a remote that may be ahead of the clone.
#[derive(Default)]
struct RepoState {
    /// Commits the clone has, in order.
    local: Vec<CommitInfo>,
    /// Commits only the remote has until the next fetch.
    remote_only: Vec<CommitInfo>,
    /// Commits pushed to the remote just after the next fetch (a push racing it).
    after_fetch: Vec<CommitInfo>,
    fetches: usize,
    /// How many commits `commits_between` returned, in all.
    listed: usize,
}

/// The fake universe: the repository, the reverts pushed to it, and the app in Argo CD.
#[derive(Clone, Default)]
struct FakeRepo {
    state: Arc<Mutex<RepoState>>,
    reverts: Arc<Mutex<Vec<RevertRequest>>>,
    world: World,
}

impl FakeRepo {
    fn push(&self, c: CommitInfo) {
        self.state.lock().unwrap().remote_only.push(c);
    }
}

impl Repository for FakeRepo {
    fn fetch(&self, _branch: &str) -> anyhow::Result<String> {
        let mut s = self.state.lock().unwrap();
        s.fetches += 1;
        let new: Vec<CommitInfo> = s.remote_only.drain(..).collect();
        s.local.extend(new);
        let racing: Vec<CommitInfo> = s.after_fetch.drain(..).collect();
        s.remote_only.extend(racing);
        Ok(s.local
            .last()
            .map(|c| c.sha.to_string())
            .unwrap_or_default())
    }
    fn commits_between(
        &self,
        from_exclusive: Option<&str>,
        tip: &str,
    ) -> anyhow::Result<Vec<CommitInfo>> {
        let mut s = self.state.lock().unwrap();
        let end = s.local.iter().position(|c| c.sha == tip).map(|i| i + 1);
        let end = end.unwrap_or(s.local.len());
        let start = match from_exclusive {
            Some(f) => s.local.iter().position(|c| c.sha == f).map_or(0, |i| i + 1),
            None => end.saturating_sub(1),
        };
        let list = s.local[start.min(end)..end].to_vec();
        s.listed += list.len();
        Ok(list)
    }
    fn is_ancestor(&self, commit: &str, revision: &str) -> anyhow::Result<Option<bool>> {
        // A linear branch: ancestry is order.
        let s = self.state.lock().unwrap();
        let pos = |sha: &str| s.local.iter().position(|c| c.sha == sha);
        Ok(match (pos(commit), pos(revision)) {
            (Some(a), Some(b)) => Some(a <= b),
            _ => None,
        })
    }
    fn resolve(&self, rev: &str) -> anyhow::Result<Option<String>> {
        let s = self.state.lock().unwrap();
        // The remote-tracking branch: the clone's tip as the last fetch left it.
        if rev == "refs/remotes/origin/main" {
            return Ok(s.local.last().map(|c| c.sha.to_string()));
        }
        Ok(s.local
            .iter()
            .find(|c| c.sha == rev)
            .map(|c| c.sha.to_string()))
    }
}

impl RevertExecutor for FakeRepo {
    fn revert(&self, req: &RevertRequest, _branch: &str) -> RevertOutcome {
        let mut reverts = self.reverts.lock().unwrap();
        reverts.push(req.clone());
        RevertOutcome::pushed(&format!("{:040x}", 0xdead_0000_u64 + reverts.len() as u64))
    }
    fn adopt_only(&self, _commit: &str, _branch: &str) -> anyhow::Result<Option<String>> {
        Ok(None)
    }
}

fn sha(n: u64) -> String {
    format!("{n:040x}")
}

fn commit(n: u64, trailer: Option<&str>) -> CommitInfo {
    let mut message = format!("change {n}\n");
    if let Some(t) = trailer {
        message.push_str(&format!("\n{t}\n"));
    }
    CommitInfo {
        sha: sha(n).parse().unwrap(),
        parents: if n > 1 {
            vec![sha(n - 1).parse().unwrap()]
        } else {
            Vec::new()
        },
        subject: format!("change {n}"),
        message,
        changed_paths: vec![format!("apps/{APP}/deployment.yaml")].into(),
        mainline: None,
    }
}

/// `web` as Argo CD reports it after a succeeded sync to `rev`, with `health`.
fn deployed(rev: &str, health: Health) -> AppSnapshot {
    let candidate = |via| ReachCandidate {
        revision: rev.into(),
        via,
    };
    AppSnapshot {
        namespace: "argocd".into(),
        name: APP.into(),
        source: SourceFacts::FromRepo {
            target_revisions: vec!["main".into()],
            chart: None,
            revisions: vec![rev.into()],
            paths: SourcePaths::Known(vec![format!("apps/{APP}")]),
        },
        sync_status: "Synced".into(),
        sync_revision: rev.into(),
        health,
        health_message: String::new(),
        operation_running: false,
        last_operation: Some(OperationFacts {
            phase: "Succeeded".into(),
            message: "successfully synced".into(),
            revision: rev.into(),
            started_at: None,
            finished_at: None,
            dry_run: false,
            partial: false,
        }),
        unhealthy_resources: Vec::new(),
        resource_health_source: ResourceHealthSource::Application,
        health_stale: false,
        automated_sync: true,
        reach_candidates: vec![
            candidate(ReachVia::OperationSucceeded),
            candidate(ReachVia::SyncedRevision),
        ],
        compared_elsewhere: None,
        comparison_error: None,
        source_hydrator: false,
        inputs: Default::default(),
        resources: Vec::new(),
    }
}

thread_local! {
    /// The last state delivered on this test's thread and its resource version: a delivery of
    /// the same state carries the same version, a changed one the next (each test runs its
    /// runtime on its own thread).
    static VERSION: std::cell::RefCell<(String, u64)> = const { std::cell::RefCell::new((String::new(), 0)) };
}

/// A delivery of `snap`, with a resource version that changes when (and only when) the state
/// does, as Argo CD's does.
fn observed(snap: AppSnapshot, origin: Origin) -> SourceMsg {
    let state = format!("{snap:?}");
    let rv = VERSION.with(|v| {
        let mut v = v.borrow_mut();
        if v.0 != state {
            *v = (state, v.1 + 1);
        }
        v.1
    });
    SourceMsg::Observed {
        snapshot: Box::new(snap),
        origin,
        resource_version: Some(rv),
    }
}

/// `msg` (an observation) carrying resource version `rv` instead of its state's.
fn at_version(msg: SourceMsg, rv: u64) -> SourceMsg {
    match msg {
        SourceMsg::Observed {
            snapshot, origin, ..
        } => SourceMsg::Observed {
            snapshot,
            origin,
            resource_version: Some(rv),
        },
        other => other,
    }
}

fn config(dir: &Path) -> DaemonConfig {
    DaemonConfig {
        repo: RepoUrl::new("https://git.example.com/platform/deploy.git"),
        branch: Some("main".into()),
        git_token: None,
        git_author_name: "greenlight".into(),
        git_author_email: "greenlight@localhost".into(),
        state: dir.join("state.db"),
        data_dir: dir.join("data"),
        stable_for_ms: 120_000,
        stale_after_ms: 30_000,
        unknown_app_grace_ms: 60_000,
        fetch_interval: Duration::from_secs(10),
        resync_interval: greenlight::runtime::config::DEFAULT_RESYNC_INTERVAL,
        dry_run: false,
        since: None,
        trailer_key: "Nav-Watchdog".into(),
        retain_ms: 30 * 86_400_000,
        reopen_horizon_ms: greenlight_core::judge::DEFAULT_REOPEN_HORIZON_MS,
        strict_health: false,
        gate_candidates: false,
        health_scope: Vec::new(),
        attribution_exempt: Vec::new(),
        asked: None,
        revert_via_pull_request: None,
        verifier: None,
        fetch_nudge: None,
    }
}

/// One running runtime and its fakes.
struct Harness {
    /// Reads already handed to the test by `next_read`.
    reads_answered: usize,
    tx: mpsc::Sender<SourceMsg>,
    log: Arc<Mutex<SourceLog>>,
    world: World,
    events: mpsc::UnboundedReceiver<Event>,
    seen: Vec<Event>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    /// What the runtime reports to `/metrics`.
    metrics: Arc<greenlight::metrics::Metrics>,
}

impl Harness {
    /// A runtime whose source answers listings and reads from the world.
    async fn start(repo: FakeRepo, cfg: DaemonConfig) -> Harness {
        Harness::start_with(repo, cfg, true).await
    }

    /// `auto` false: the test answers listings and reads itself.
    async fn start_with(repo: FakeRepo, cfg: DaemonConfig, auto: bool) -> Harness {
        let (tx, deliveries) = mpsc::channel(256);
        let log = Arc::new(Mutex::new(SourceLog::default()));
        let world = repo.world.clone();
        let out = Output::new(LogFormat::Text);
        let (etx, events) = mpsc::unbounded_channel();
        out.subscribe(move |e| {
            let _ = etx.send(e.clone());
        });
        let ctx = Context {
            source: Box::new(FakeSource {
                log: log.clone(),
                world: world.clone(),
                tx: tx.clone(),
                auto,
            }),
            repo: Arc::new(repo.clone()),
            reverter: Arc::new(repo.clone()),
            clock: Arc::new(TestClock::new()),
            out,
            jobs: Jobs::Inline,
        };
        let tip = repo.fetch("main").unwrap();
        let start = Start {
            branch: "main".into(),
            branch_is_default: true,
            tip,
            store: Box::new(SqliteStore::open_or_create(&cfg.state).unwrap()),
            deliveries,
            announce: false,
            started: None,
        };
        let runtime = Runtime::start_with(cfg, ctx, start).await.unwrap();
        let metrics = runtime.metrics().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(runtime.run(async move {
            let _ = stopped.await;
        }));
        Harness {
            reads_answered: 0,
            tx,
            log,
            world,
            events,
            seen: Vec::new(),
            stop: Some(stop),
            task: Some(task),
            metrics,
        }
    }

    async fn send(&self, msg: SourceMsg) {
        self.tx.send(msg).await.unwrap();
    }

    /// The stream connects, `web` is healthy at the base commit, and commit 2 with `trailer`
    /// is pushed: its watch's `watch_started` event.
    async fn connected_and_watching(&mut self, repo: &FakeRepo, trailer: &str) -> Event {
        self.send(SourceMsg::Connected).await;
        self.app_now(deployed(&sha(1), Health::Healthy)).await;
        repo.push(commit(2, Some(trailer)));
        self.expect(EventKind::WatchStarted, Duration::from_secs(11))
            .await
    }

    /// The app changes in Argo CD, and the stream says so.
    async fn app_now(&self, snap: AppSnapshot) {
        *self.world.lock().unwrap() = Some(snap.clone());
        self.send(observed(snap, Origin::Stream)).await;
    }

    /// The next event of `kind` for any watch, within `within` of runtime time.
    async fn expect(&mut self, kind: EventKind, within: Duration) -> Event {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let next = tokio::time::timeout_at(deadline, self.events.recv()).await;
            match next {
                Ok(Some(e)) => {
                    self.seen.push(e.clone());
                    if e.event == kind {
                        return e;
                    }
                }
                Ok(None) => panic!("the runtime stopped; events so far: {:#?}", self.seen),
                Err(_) => panic!(
                    "no {kind:?} within {within:?}; events so far: {:#?}",
                    self.seen
                        .iter()
                        .map(|e| (e.event, &e.message))
                        .collect::<Vec<_>>()
                ),
            }
        }
    }

    /// Every event until `within` passes, without expecting any.
    async fn quiet_for(&mut self, within: Duration) -> Vec<Event> {
        let deadline = tokio::time::Instant::now() + within;
        let mut got = Vec::new();
        while let Ok(Some(e)) = tokio::time::timeout_at(deadline, self.events.recv()).await {
            self.seen.push(e.clone());
            got.push(e);
        }
        got
    }

    /// The stream connects with `snap` as the app in Argo CD, and the listing the runtime asks
    /// for at once (the baseline the stream's silence builds on) is answered with it.
    async fn connect_with_baseline(&mut self, snap: &AppSnapshot) {
        *self.world.lock().unwrap() = Some(snap.clone());
        // The listing of the runtime's first fetch tick is asked for before the connection.
        tokio::time::sleep(Duration::from_millis(1)).await;
        let before = self.listings();
        self.send(SourceMsg::Connected).await;
        let ticket = self.listing_after(before).await;
        self.answer_listing(ticket, snap).await;
    }

    /// The stream connects with `web` healthy at the base as its baseline, commit 2 asks for an
    /// armed watch with a 60 s deadline, and the stream delivers `web` Degraded at it: the
    /// `reached` event. The reads asked so far stay unanswered (`skip_reads`).
    async fn armed_and_degraded_on_the_stream(&mut self, repo: &FakeRepo) -> Event {
        self.connect_with_baseline(&deployed(&sha(1), Health::Healthy))
            .await;
        let reached = self.arm_and_degrade(repo).await;
        self.skip_reads().await;
        reached
    }

    /// Commit 2 asks for an armed watch with a 60 s deadline and the stream delivers `web`
    /// Degraded at it: the `reached` event.
    async fn arm_and_degrade(&mut self, repo: &FakeRepo) -> Event {
        repo.push(commit(2, Some(&trailer(60, "arm"))));
        self.expect(EventKind::WatchStarted, Duration::from_secs(11))
            .await;
        self.send(observed(
            deployed(&sha(2), Health::Degraded),
            Origin::Stream,
        ))
        .await;
        self.expect(EventKind::Reached, Duration::from_secs(1))
            .await
    }

    /// Answers listing `ticket`: `snap`, and a complete listing holding it.
    async fn answer_listing(&self, ticket: u64, snap: &AppSnapshot) {
        self.send(observed(snap.clone(), Origin::Listing(ticket)))
            .await;
        self.send(SourceMsg::Listed {
            ticket,
            present: vec![snap.key()],
            complete: true,
        })
        .await;
    }

    /// How many listings the runtime has asked for so far.
    fn listings(&self) -> usize {
        self.log.lock().unwrap().listings.len()
    }

    /// The ticket of the first listing asked for after `before` of them.
    async fn listing_after(&self, before: usize) -> u64 {
        for _ in 0..1000 {
            if let Some(t) = self.log.lock().unwrap().listings.get(before).copied() {
                return t;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no listing asked for")
    }

    /// Leaves the reads asked for so far unanswered: `next_read` waits for a later one. The
    /// runtime first handles what it has (a millisecond of runtime time): a new watch's read is
    /// asked after its `watch_started` event reaches the test.
    async fn skip_reads(&mut self) {
        tokio::time::sleep(Duration::from_millis(1)).await;
        self.reads_answered = self.log.lock().unwrap().reads.len();
    }

    /// `n` heartbeats of the stream, 10 s apart (the first 10 s from now).
    async fn heartbeats(&self, n: usize) {
        for _ in 0..n {
            tokio::time::sleep(Duration::from_secs(10)).await;
            self.send(SourceMsg::Heartbeat).await;
        }
    }

    /// The ticket of the next read the runtime asks for, after those already seen (within 30 s
    /// of runtime time).
    async fn next_read(&mut self) -> u64 {
        let before = self.reads_answered;
        for _ in 0..30_000 {
            let reads = self.log.lock().unwrap().reads.len();
            if reads > before {
                self.reads_answered = reads;
                return self.log.lock().unwrap().reads[reads - 1].0;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("no read asked for")
    }

    fn last_read_ticket(&self) -> u64 {
        self.log
            .lock()
            .unwrap()
            .reads
            .last()
            .expect("a read was requested")
            .0
    }

    fn last_listing_ticket(&self) -> u64 {
        *self
            .log
            .lock()
            .unwrap()
            .listings
            .last()
            .expect("a listing was requested")
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
    }
}

fn trailer(deadline: u64, mode: &str) -> String {
    format!("Nav-Watchdog: app={APP} deadline={deadline} mode={mode}")
}

/// A repository with one base commit already on the branch (the baseline).
fn repo_with_base() -> FakeRepo {
    let repo = FakeRepo::default();
    repo.state.lock().unwrap().local.push(commit(1, None));
    repo
}

#[tokio::test(start_paused = true)]
async fn a_commit_that_reaches_and_stays_healthy_is_confirmed_with_the_stream_vouching() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start(repo.clone(), config(dir.path())).await;
    let started = h.connected_and_watching(&repo, &trailer(300, "arm")).await;
    assert_eq!(started.commit.as_deref(), Some(sha(2).as_str()));
    // The source is told what is watched, and the watch's app is read afresh at once.
    assert_eq!(h.log.lock().unwrap().watched[0].name, APP);
    assert!(!h.log.lock().unwrap().reads.is_empty());
    h.app_now(deployed(&sha(2), Health::Healthy)).await;
    let streak = h
        .expect(EventKind::HealthyStreakStarted, Duration::from_secs(1))
        .await;
    let confirmed = h
        .expect(EventKind::Confirmed, Duration::from_secs(200))
        .await;
    assert_eq!(
        confirmed.time.ms_since(streak.time),
        120_000,
        "confirmed exactly at the end of the stability window: {}",
        confirmed.message
    );
    assert!(repo.reverts.lock().unwrap().is_empty());
    h.stop().await;
}

/// A push of watched commits that Argo CD has already deployed: each commit's ancestry question
/// about the deployed tip must not hand the push's commits over again (they are the hand-over
/// asking), and a commit that reaches the remote just after the fetch is taken on after them.
/// Every commit is listed once, every watch starts once, in the commits' order.
#[tokio::test(start_paused = true)]
async fn a_push_argo_cd_already_deployed_is_handed_over_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start(repo.clone(), config(dir.path())).await;
    h.send(SourceMsg::Connected).await;
    h.app_now(deployed(&sha(1), Health::Healthy)).await;
    h.quiet_for(Duration::from_secs(1)).await;
    let watched: Vec<u64> = (2..=11).collect();
    for &n in &watched {
        repo.push(commit(n, Some(&trailer(600, "shadow"))));
    }
    // Commit 12 reaches the remote just after the fetch that brings the others, and Argo CD has
    // already deployed it.
    repo.state
        .lock()
        .unwrap()
        .after_fetch
        .push(commit(12, None));
    h.app_now(deployed(&sha(12), Health::Healthy)).await;
    h.quiet_for(Duration::from_secs(12)).await;
    let events = |kind: EventKind| -> Vec<String> {
        h.seen
            .iter()
            .filter(|e| e.event == kind)
            .filter_map(|e| e.commit.clone())
            .collect()
    };
    assert_eq!(
        events(EventKind::WatchStarted),
        watched.iter().map(|&n| sha(n)).collect::<Vec<_>>(),
        "{:#?}",
        h.seen
            .iter()
            .map(|e| (e.event, e.commit.clone(), &e.message))
            .collect::<Vec<_>>()
    );
    // Each watch is attributed to the commits after it, 12 among them: it was handed over.
    assert_eq!(events(EventKind::Attribution).len(), watched.len());
    let listed = repo.state.lock().unwrap().listed;
    assert!(
        listed <= 11 + 1,
        "{listed} commits listed for 11 new ones: a push handed over again and again"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_armed_commit_degraded_at_its_deadline_is_reverted_once_by_a_job() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start(repo.clone(), config(dir.path())).await;
    h.connected_and_watching(&repo, &trailer(60, "arm")).await;
    h.app_now(deployed(&sha(2), Health::Degraded)).await;
    let reached = h.expect(EventKind::Reached, Duration::from_secs(1)).await;
    let failed = h.expect(EventKind::Failed, Duration::from_secs(61)).await;
    assert_eq!(failed.time.ms_since(reached.time), 60_000);
    assert!(failed.message.contains("reverting"), "{}", failed.message);
    let pushed = h
        .expect(EventKind::RevertPushed, Duration::from_secs(1))
        .await;
    assert_eq!(pushed.commit.as_deref(), Some(sha(2).as_str()));
    let reverts = repo.reverts.lock().unwrap().clone();
    assert_eq!(reverts.len(), 1, "{reverts:?}");
    assert_eq!(reverts[0].commit, sha(2));
    assert!(
        !reverts[0].reason.contains("reverting"),
        "the revert's reason is the verdict, not the runtime's progress: {}",
        reverts[0].reason
    );
    h.stop().await;

    // The verdict and the revert are in the store.
    let store = SqliteStore::open_existing(&dir.path().join("state.db"), true).unwrap();
    let loaded = store.load().unwrap();
    let w = loaded.watches.iter().find(|w| w.commit == sha(2)).unwrap();
    assert_eq!(w.state().as_str(), "REVERTED");
    assert!(!w.revert_pending());
}

#[tokio::test(start_paused = true)]
async fn a_read_overtaken_by_a_stream_update_is_not_judged() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start_with(repo.clone(), config(dir.path()), false).await;
    h.send(SourceMsg::Connected).await;
    repo.push(commit(2, Some(&trailer(60, "arm"))));
    h.expect(EventKind::WatchStarted, Duration::from_secs(11))
        .await;
    let ticket = h.last_read_ticket();
    // The stream reports the app Degraded; the read's older answer (an older resource version)
    // says Healthy and arrives after it. Judging the read would start a healthy streak on stale
    // news.
    h.send(at_version(
        observed(deployed(&sha(2), Health::Degraded), Origin::Stream),
        1_000,
    ))
    .await;
    h.send(at_version(
        observed(deployed(&sha(2), Health::Healthy), Origin::Read(ticket)),
        999,
    ))
    .await;
    let events = h.quiet_for(Duration::from_secs(5)).await;
    assert!(
        events.iter().any(|e| e.event == EventKind::Reached),
        "{events:#?}"
    );
    assert!(
        events
            .iter()
            .all(|e| e.event != EventKind::HealthyStreakStarted),
        "{events:#?}"
    );
    // A read of a ticket nobody asked for, at the stream's own version: not placed in time,
    // so not trusted over the stream.
    h.send(at_version(
        observed(
            deployed(&sha(2), Health::Healthy),
            Origin::Read(ticket + 100),
        ),
        1_000,
    ))
    .await;
    let events = h.quiet_for(Duration::from_secs(1)).await;
    assert!(
        events
            .iter()
            .all(|e| e.event != EventKind::HealthyStreakStarted),
        "a read with an unknown ticket is not trusted over the stream: {events:#?}"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_goes_silent_vouches_for_nothing_and_the_verdict_is_inconclusive() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    // Listings are asked and never answered: the API hangs, the stream says nothing more.
    let mut h = Harness::start_with(repo.clone(), config(dir.path()), false).await;
    h.send(SourceMsg::Connected).await;
    let reached = h.arm_and_degrade(&repo).await;
    // The read asked at the deadline (the stream vouches for nothing) is never answered either:
    // given up on after stale-after (30 s), the verdict is decided on what is known.
    let verdict = h
        .expect(EventKind::Inconclusive, Duration::from_secs(91))
        .await;
    assert_eq!(verdict.time.ms_since(reached.time), 90_000);
    assert_eq!(
        h.log.lock().unwrap().reads.len(),
        2,
        "the watch's start, the deadline"
    );
    assert!(
        verdict.message.contains("not reverted"),
        "{}",
        verdict.message
    );
    assert!(repo.reverts.lock().unwrap().is_empty());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_listing_asked_before_a_stream_delivery_does_not_call_the_app_absent() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut cfg = config(dir.path());
    cfg.unknown_app_grace_ms = 5_000;
    let mut h = Harness::start_with(repo.clone(), cfg, false).await;
    h.send(SourceMsg::Connected).await;
    repo.push(commit(2, Some(&trailer(300, "shadow"))));
    h.expect(EventKind::WatchStarted, Duration::from_secs(11))
        .await;
    // A listing asked before the app existed answers after the stream delivered it.
    let listing = h.last_listing_ticket();
    h.send(observed(deployed(&sha(2), Health::Healthy), Origin::Stream))
        .await;
    h.expect(EventKind::Reached, Duration::from_secs(1)).await;
    h.send(SourceMsg::Listed {
        ticket: listing,
        present: Vec::new(),
        complete: true,
    })
    .await;
    let events = h.quiet_for(Duration::from_secs(8)).await;
    assert!(
        events
            .iter()
            .all(|e| e.event != EventKind::AppNotFound && e.event != EventKind::Unwatchable),
        "{events:#?}"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_incomplete_listing_proves_no_absence_but_a_complete_one_does() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start_with(repo.clone(), config(dir.path()), false).await;
    repo.push(commit(2, Some(&trailer(300, "shadow"))));
    h.expect(EventKind::WatchStarted, Duration::from_secs(11))
        .await;
    let first = h.last_listing_ticket();
    h.send(SourceMsg::Listed {
        ticket: first,
        present: Vec::new(),
        complete: false,
    })
    .await;
    let events = h.quiet_for(Duration::from_secs(11)).await;
    assert!(
        events.iter().all(|e| e.event != EventKind::AppNotFound),
        "{events:#?}"
    );
    // The next listing, asked at the next fetch tick, read every item.
    let second = h.last_listing_ticket();
    assert_ne!(first, second);
    h.send(SourceMsg::Listed {
        ticket: second,
        present: Vec::new(),
        complete: true,
    })
    .await;
    h.expect(EventKind::AppNotFound, Duration::from_secs(1))
        .await;
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_revision_the_clone_does_not_have_yet_is_fetched_before_reach_is_decided() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start(repo.clone(), config(dir.path())).await;
    h.connected_and_watching(&repo, &trailer(300, "shadow"))
        .await;
    // Argo CD already synced a later commit the watchdog has not fetched (one that changes
    // nothing of the app's, so it is no culprit).
    repo.push(CommitInfo {
        changed_paths: vec!["docs/notes.md".into()].into(),
        mainline: None,
        ..commit(3, None)
    });
    let fetches = repo.state.lock().unwrap().fetches;
    h.app_now(deployed(&sha(3), Health::Healthy)).await;
    let reached = h.expect(EventKind::Reached, Duration::from_secs(1)).await;
    assert!(
        reached.message.contains(&sha(3)[..8]),
        "{}",
        reached.message
    );
    assert!(repo.state.lock().unwrap().fetches > fetches);
    h.stop().await;
}

/// `web` unwatched, as Argo CD's stream reports it: compared with `compared`, its last sync at
/// `applied`.
fn unwatched(compared: &str, applied: &str) -> SourceMsg {
    let app = deployed(applied, Health::Healthy);
    SourceMsg::Unwatched {
        key: app.key(),
        glimpse: Glimpse {
            health: Health::Healthy,
            sync_revision: compared.into(),
            operation_running: false,
            sync_status: if compared == applied {
                "Synced"
            } else {
                "OutOfSync"
            }
            .into(),
            last_operation_phase: Some("Succeeded".into()),
            last_operation_revision: Some(applied.into()),
            chronic: Default::default(),
            source_paths: None,
        },
        origin: Origin::Stream,
    }
}

/// Argo CD compares a commit before the watchdog's fetch tick (its git webhook): the revision
/// it reports, one the clone lacks, is fetched at once, and the watch its commit asks for
/// starts then — not an hour later at the next tick. A revision looked for once is not looked
/// for again, and one the clone has costs no fetch.
#[tokio::test(start_paused = true)]
async fn a_revision_argo_cd_reports_before_the_fetch_tick_is_fetched_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    repo.state.lock().unwrap().local.push(commit(2, None));
    let mut cfg = config(dir.path());
    cfg.fetch_interval = Duration::from_secs(3600);
    let mut h = Harness::start(repo.clone(), cfg).await;
    h.send(SourceMsg::Connected).await;
    h.quiet_for(Duration::from_secs(1)).await;
    let fetches = || repo.state.lock().unwrap().fetches;
    let before = fetches();
    // An app still at an older revision the clone has: nothing to fetch.
    h.send(unwatched(&sha(1), &sha(1))).await;
    h.quiet_for(Duration::from_secs(1)).await;
    assert_eq!(
        fetches(),
        before,
        "a revision the clone has was fetched for"
    );
    repo.push(commit(3, Some(&trailer(300, "shadow"))));
    h.send(unwatched(&sha(3), &sha(2))).await;
    let started = h
        .expect(EventKind::WatchStarted, Duration::from_secs(1))
        .await;
    assert_eq!(started.commit.as_deref(), Some(sha(3).as_str()));
    assert_eq!(fetches(), before + 1);
    // Reported again (every app of the repository compares it): no second fetch.
    h.send(unwatched(&sha(3), &sha(2))).await;
    h.quiet_for(Duration::from_secs(1)).await;
    assert_eq!(fetches(), before + 1);
    h.stop().await;
}

/// A flood of fetch causes while a fetch is under way makes one more fetch, not one each.
#[tokio::test(start_paused = true)]
async fn revisions_reported_while_a_fetch_is_under_way_make_one_more_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut cfg = config(dir.path());
    cfg.fetch_interval = Duration::from_secs(3600);
    let mut h = Harness::start(repo.clone(), cfg).await;
    h.send(SourceMsg::Connected).await;
    h.quiet_for(Duration::from_secs(1)).await;
    let before = repo.state.lock().unwrap().fetches;
    // Ten revisions the clone lacks, reported in one burst: the first starts a fetch, the
    // other nine wait behind it as one.
    for n in 10..20 {
        h.send(unwatched(&sha(n), &sha(1))).await;
    }
    h.quiet_for(Duration::from_secs(1)).await;
    assert_eq!(repo.state.lock().unwrap().fetches, before + 2);
    h.stop().await;
}

/// The same, with a later commit that changes the app: it is handed to the judge before the
/// observation that names it, so the watch ends by attribution (never a revert) rather than
/// judging a state the later commit made.
#[tokio::test(start_paused = true)]
async fn a_later_commit_argo_cd_reports_first_is_attributed_before_the_state_is_judged() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start(repo.clone(), config(dir.path())).await;
    h.connected_and_watching(&repo, &trailer(300, "arm")).await;
    repo.push(commit(3, None));
    h.app_now(deployed(&sha(3), Health::Degraded)).await;
    let ended = h
        .expect(EventKind::Attribution, Duration::from_secs(1))
        .await;
    assert_eq!(ended.commit.as_deref(), Some(sha(2).as_str()));
    assert!(
        h.seen.iter().all(|e| e.event != EventKind::Reached),
        "the state Argo CD reports is commit 3's: {:#?}",
        h.seen
    );
    h.quiet_for(Duration::from_secs(1)).await;
    assert!(repo.reverts.lock().unwrap().is_empty());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_restart_resumes_the_watch_from_its_recorded_times() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start(repo.clone(), config(dir.path())).await;
    h.connected_and_watching(&repo, &trailer(60, "shadow"))
        .await;
    h.app_now(deployed(&sha(2), Health::Degraded)).await;
    let reached = h.expect(EventKind::Reached, Duration::from_secs(1)).await;
    h.stop().await;

    // 20 s later a new process takes over the same state; the deadline still counts from reach.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let mut h = Harness::start(repo.clone(), config(dir.path())).await;
    let resumed = h.expect(EventKind::Resumed, Duration::from_secs(1)).await;
    assert_eq!(resumed.commit.as_deref(), Some(sha(2).as_str()));
    h.send(SourceMsg::Connected).await;
    h.app_now(deployed(&sha(2), Health::Degraded)).await;
    let failed = h.expect(EventKind::Failed, Duration::from_secs(60)).await;
    assert_eq!(
        failed.time.ms_since(reached.time),
        60_000,
        "the deadline is reach + 60 s, across the restart"
    );
    // The commit was not handed to the judge twice.
    assert!(
        h.seen.iter().all(|e| e.event != EventKind::WatchStarted),
        "{:#?}",
        h.seen
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn two_reverts_open_the_breaker_and_the_third_failure_is_not_reverted() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start(repo.clone(), config(dir.path())).await;
    h.send(SourceMsg::Connected).await;
    h.app_now(deployed(&sha(1), Health::Healthy)).await;
    for n in 2..=4u64 {
        repo.push(commit(n, Some(&trailer(30, "arm"))));
        h.expect(EventKind::WatchStarted, Duration::from_secs(11))
            .await;
        h.app_now(deployed(&sha(n), Health::Degraded)).await;
        h.expect(EventKind::Failed, Duration::from_secs(31)).await;
        // The app is Healthy again, Synced at the failed commit's revision, before the next
        // commit: that commit's baseline is its parent, so each failure is laid on its own
        // commit (a baseline at sha(1) would put the earlier commits in its batch).
        h.app_now(deployed(&sha(n), Health::Healthy)).await;
    }
    h.quiet_for(Duration::from_secs(1)).await;
    let reverts = repo.reverts.lock().unwrap().clone();
    assert_eq!(
        reverts.iter().map(|r| r.commit.clone()).collect::<Vec<_>>(),
        vec![sha(2), sha(3)]
    );
    assert!(
        h.seen.iter().any(|e| e.event == EventKind::BreakerOpened),
        "{:#?}",
        h.seen
    );
    let blocked = |e: &Event| {
        e.event == EventKind::BreakerBlocked && e.commit.as_deref() == Some(sha(4).as_str())
    };
    assert!(h.seen.iter().any(blocked), "{:#?}", h.seen);
    // What `/metrics` says of it: three FAIL verdicts, two of them REVERTED, two reverts
    // pushed, the breaker open.
    let page = h.metrics.render(false);
    for line in [
        "greenlight_verdicts_total{verdict=\"FAIL\"} 3\n",
        "greenlight_verdicts_total{verdict=\"REVERTED\"} 2\n",
        "greenlight_verdicts_total{verdict=\"CONFIRMED\"} 0\n",
        "greenlight_watches{state=\"REVERTED\"} 2\n",
        "greenlight_watches{state=\"FAIL\"} 1\n",
        "greenlight_reverts_pushed_total 2\n",
        "greenlight_breaker_open 1\n",
        "greenlight_git_job_duration_seconds_count{kind=\"revert\"} 2\n",
    ] {
        assert!(page.contains(line), "{line:?} missing from:\n{page}");
    }
    h.stop().await;
}

/// Another app, `api`, that nothing watches: its updates show the stream alive.
fn other_app(rev: &str) -> AppSnapshot {
    let mut s = deployed(rev, Health::Healthy);
    s.name = "api".into();
    s
}

#[tokio::test(start_paused = true)]
async fn the_stream_vouches_for_a_quiet_app_while_argo_cd_is_heard_from() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    // The test answers by hand: one listing (the baseline after the connection) and the reads
    // that confirm the app at the window's end. Later listings stay unanswered, so only vouching
    // can carry the quiet app's observation through the 120 s window.
    let mut h = Harness::start_with(repo.clone(), config(dir.path()), false).await;
    let snap = deployed(&sha(2), Health::Healthy);
    h.connect_with_baseline(&snap).await;
    repo.push(commit(2, Some(&trailer(300, "shadow"))));
    h.expect(EventKind::WatchStarted, Duration::from_secs(11))
        .await;
    h.skip_reads().await;
    h.send(observed(snap.clone(), Origin::Stream)).await;
    let streak = h
        .expect(EventKind::HealthyStreakStarted, Duration::from_secs(1))
        .await;
    // Heartbeats every 10 s: the stream is alive, and `web` has not changed. Each wake-up asks
    // Argo CD to confirm the version the stream last delivered; it is the same.
    h.heartbeats(12).await;
    let confirm = h.next_read().await;
    h.send(observed(snap, Origin::Read(confirm))).await;
    let confirmed = h.expect(EventKind::Confirmed, Duration::from_secs(1)).await;
    assert_eq!(confirmed.time.ms_since(streak.time), 120_000);
    h.stop().await;
}

/// The stream connects with a baseline, a shadow watch of `web` starts, and the stream delivers
/// `web` healthy: the streak's `healthy_streak_started` event and the runtime time it arrived.
async fn quiet_healthy_streak(h: &mut Harness, repo: &FakeRepo) -> (Event, tokio::time::Instant) {
    let snap = deployed(&sha(2), Health::Healthy);
    h.connect_with_baseline(&snap).await;
    repo.push(commit(2, Some(&trailer(300, "shadow"))));
    h.expect(EventKind::WatchStarted, Duration::from_secs(11))
        .await;
    h.skip_reads().await;
    h.send(observed(snap, Origin::Stream)).await;
    let streak = h
        .expect(EventKind::HealthyStreakStarted, Duration::from_secs(1))
        .await;
    (streak, tokio::time::Instant::now())
}

#[tokio::test(start_paused = true)]
async fn the_confirming_read_is_asked_just_before_the_window_ends_and_the_verdict_waits_for_the_end()
 {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start_with(repo.clone(), config(dir.path()), false).await;
    let (streak, began) = quiet_healthy_streak(&mut h, &repo).await;
    h.heartbeats(11).await;
    // 119.8 s into the 120 s window: not asked yet (at most 100 ms ahead).
    tokio::time::sleep(Duration::from_millis(9_800)).await;
    assert_eq!(h.log.lock().unwrap().reads.len(), h.reads_answered);
    let confirm = h.next_read().await;
    let asked = began.elapsed();
    assert!(
        asked < Duration::from_secs(120) && asked >= Duration::from_millis(119_900),
        "asked {asked:?} into the window"
    );
    // Answered at once with the version the stream delivered: the verdict still waits for the
    // window's end, and comes exactly then.
    h.send(observed(
        deployed(&sha(2), Health::Healthy),
        Origin::Read(confirm),
    ))
    .await;
    let early = h.quiet_for(Duration::from_millis(3)).await;
    assert!(began.elapsed() < Duration::from_secs(120));
    assert!(
        early.iter().all(|e| e.event != EventKind::Confirmed),
        "confirmed before the window's end: {early:#?}"
    );
    let confirmed = h.expect(EventKind::Confirmed, Duration::from_secs(1)).await;
    assert_eq!(confirmed.time.ms_since(streak.time), 120_000);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_early_confirmation_that_finds_a_newer_version_breaks_the_streak_before_the_window_ends()
{
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start_with(repo.clone(), config(dir.path()), false).await;
    let (_, began) = quiet_healthy_streak(&mut h, &repo).await;
    h.heartbeats(11).await;
    // The app went Degraded and back; the stream lost both. The early read finds a newer
    // version than the stream delivered.
    let _lost = observed(deployed(&sha(2), Health::Degraded), Origin::Stream);
    let mut again = deployed(&sha(2), Health::Healthy);
    again.health_message = "recovered".into();
    let confirm = h.next_read().await;
    h.send(observed(again, Origin::Read(confirm))).await;
    h.expect(EventKind::HealthyStreakBroken, Duration::from_millis(50))
        .await;
    assert!(began.elapsed() < Duration::from_secs(120));
    let events = h.quiet_for(Duration::from_secs(5)).await;
    assert!(
        h.seen.iter().all(|e| e.event != EventKind::Confirmed),
        "confirmed on a window with a lost update: {events:#?}"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_reconnection_asks_for_a_listing_at_once_and_nothing_is_vouched_until_it_answers() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start_with(repo.clone(), config(dir.path()), false).await;
    let snap = deployed(&sha(2), Health::Healthy);
    h.connect_with_baseline(&snap).await;
    repo.push(commit(2, Some(&trailer(300, "shadow"))));
    h.expect(EventKind::WatchStarted, Duration::from_secs(11))
        .await;
    h.skip_reads().await;
    h.send(observed(snap.clone(), Origin::Stream)).await;
    let streak = h
        .expect(EventKind::HealthyStreakStarted, Duration::from_secs(1))
        .await;
    // The stream drops and comes back 20 s into the window: a listing is asked for at once.
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.send(SourceMsg::Heartbeat).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.send(SourceMsg::Lost("connection reset".into())).await;
    let before = h.listings();
    h.send(SourceMsg::Connected).await;
    let relisting = h.listing_after(before).await;
    // Not ready (`/readyz`) until a listing asked for since the connection answers.
    assert_eq!(
        h.metrics.readyz(),
        Probe::Not("source thesource connected; waiting for a complete listing".into())
    );
    // The burst: the app as it is. Not yet vouched for: the burst may have had a gap.
    h.send(observed(snap.clone(), Origin::Stream)).await;
    h.heartbeats(10).await;
    // The window ended 120 s after the streak began, with no listing since the reconnection:
    // nothing carried the observation. The app is read at the window's end, to be observed
    // rather than confirmed (left unanswered here), and nothing is confirmed.
    assert_eq!(h.log.lock().unwrap().reads.len(), h.reads_answered + 1);
    assert!(h.seen.iter().all(|e| e.event != EventKind::Confirmed));
    // The listing answers with the version the burst brought: nothing was lost at the connection,
    // and the stream's silence counts again. The next due moment (the health deadline, the
    // streak still under way) is confirmed by a read and decides on it.
    h.answer_listing(relisting, &snap).await;
    h.skip_reads().await;
    h.heartbeats(18).await;
    let confirm = h.next_read().await;
    h.send(observed(snap, Origin::Read(confirm))).await;
    let confirmed = h.expect(EventKind::Confirmed, Duration::from_secs(1)).await;
    assert_eq!(confirmed.time.ms_since(streak.time), 300_000);
    assert_eq!(h.metrics.readyz(), Probe::Ok("ok".into()));
    let page = h.metrics.render(false);
    assert!(
        page.contains("greenlight_source_reconnects_total{source=\"thesource\"} 1\n"),
        "{page}"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_update_the_stream_lost_before_a_window_ends_is_unobserved_time_not_a_confirmation() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start_with(repo.clone(), config(dir.path()), false).await;
    let healthy = deployed(&sha(2), Health::Healthy);
    h.connect_with_baseline(&healthy).await;
    repo.push(commit(2, Some(&trailer(300, "arm"))));
    h.expect(EventKind::WatchStarted, Duration::from_secs(11))
        .await;
    h.skip_reads().await;
    h.send(observed(healthy.clone(), Origin::Stream)).await;
    h.expect(EventKind::HealthyStreakStarted, Duration::from_secs(1))
        .await;
    // The app went Degraded and back to Healthy; the stream lost both updates (Argo CD drops
    // events for a reader that falls behind). Heartbeats go on.
    let _lost = observed(deployed(&sha(2), Health::Degraded), Origin::Stream);
    let mut again = healthy.clone();
    again.health_message = "recovered".into();
    let _lost = observed(again.clone(), Origin::Stream);
    h.heartbeats(12).await;
    // The window's end: the confirming read finds a newer version than the stream delivered.
    let confirm = h.next_read().await;
    h.send(observed(again, Origin::Read(confirm))).await;
    h.expect(EventKind::HealthyStreakBroken, Duration::from_secs(1))
        .await;
    assert!(
        h.seen.iter().all(|e| e.event != EventKind::Confirmed),
        "confirmed on a window with a lost update: {:#?}",
        h.seen
    );
    assert!(repo.reverts.lock().unwrap().is_empty());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn after_a_skipped_stream_message_a_quiet_app_is_not_vouched_for() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start_with(repo.clone(), config(dir.path()), false).await;
    h.send(SourceMsg::Connected).await;
    repo.push(commit(2, Some(&trailer(60, "arm"))));
    h.expect(EventKind::WatchStarted, Duration::from_secs(11))
        .await;
    h.send(observed(deployed(&sha(2), Health::Healthy), Origin::Stream))
        .await;
    h.expect(EventKind::HealthyStreakStarted, Duration::from_secs(1))
        .await;
    // A line the stream could not decode: it may have been `web` turning Degraded.
    h.send(SourceMsg::Skipped("undecodable line".into())).await;
    for _ in 0..14 {
        tokio::time::sleep(Duration::from_secs(10)).await;
        let other = other_app(&sha(1));
        let glimpse = Glimpse {
            health: other.health,
            sync_revision: other.sync_revision.clone(),
            operation_running: false,
            sync_status: "Synced".into(),
            last_operation_phase: None,
            last_operation_revision: None,
            chronic: Default::default(),
            source_paths: None,
        };
        h.send(SourceMsg::Unwatched {
            key: other.key(),
            glimpse,
            origin: Origin::Stream,
        })
        .await;
    }
    let events = h.quiet_for(Duration::from_secs(1)).await;
    assert!(
        h.seen.iter().all(|e| e.event != EventKind::Confirmed),
        "confirmed on a streak nobody observed: {events:#?}"
    );
    assert!(
        h.seen.iter().any(
            |e| e.event == EventKind::HealthyStreakBroken || e.event == EventKind::Inconclusive
        ),
        "{:#?}",
        h.seen
    );
    assert!(repo.reverts.lock().unwrap().is_empty());
    let page = h.metrics.render(false);
    assert!(
        page.contains("greenlight_source_gaps_total{source=\"thesource\",kind=\"skipped\"} 1\n"),
        "{page}"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_breaker_reset_requested_while_the_runtime_runs_is_applied_at_the_next_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let cfg = config(dir.path());
    let state = cfg.state.clone();
    let mut h = Harness::start(repo.clone(), cfg).await;
    // `greenlight breaker reset` while a watchdog holds the state: it leaves a request.
    let reader = SqliteStore::open_existing(&state, false).unwrap();
    reader.request_breaker_reset(T0).unwrap();
    let reset = h
        .expect(EventKind::BreakerReset, Duration::from_secs(11))
        .await;
    assert!(reset.message.contains("human"), "{}", reset.message);
    h.quiet_for(Duration::from_secs(1)).await;
    assert!(!reader.breaker_reset_requested().unwrap());
    // Once: the request is gone with the write that applied it.
    let again = h.quiet_for(Duration::from_secs(30)).await;
    assert!(
        again.iter().all(|e| e.event != EventKind::BreakerReset),
        "{again:#?}"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn while_the_stream_vouches_a_listing_runs_every_resync_interval_else_at_every_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let h = Harness::start(repo.clone(), config(dir.path())).await;
    h.send(SourceMsg::Connected).await;
    h.app_now(deployed(&sha(1), Health::Healthy)).await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    let baselined = h.listings();
    // Heard from every 10 s: 290 s of fetch ticks ask for no listing (the stream vouches and
    // the resync interval, 5 min, has not passed since the listing after the connection).
    h.heartbeats(29).await;
    assert_eq!(h.listings(), baselined);
    h.heartbeats(2).await;
    assert_eq!(
        h.listings(),
        baselined + 1,
        "one listing at the resync interval"
    );
    // Silent: 30 s (stale-after) after the last heartbeat the stream stops vouching, and a
    // listing is asked at once — then at every fetch tick, as long as it does not vouch.
    let silent = h.listings();
    tokio::time::sleep(Duration::from_millis(30_000)).await;
    assert_eq!(h.listings(), silent, "still vouching at stale-after");
    tokio::time::sleep(Duration::from_millis(2)).await;
    assert_eq!(
        h.listings(),
        silent + 1,
        "a listing the moment vouching lapses"
    );
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        h.listings(),
        silent + 4,
        "a listing at every fetch tick meanwhile"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stream_silent_mid_window_loses_no_time_when_a_listing_finds_the_same_version() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start_with(repo.clone(), config(dir.path()), false).await;
    let (streak, _) = quiet_healthy_streak(&mut h, &repo).await;
    let snap = deployed(&sha(2), Health::Healthy);
    // Heard from for 50 s, then silent: the stream vouches until 80 s and is not asked to
    // confirm anything meanwhile. The listings from then on find the version it delivered:
    // the app did not change, so the 80 s without an observation are observed time.
    h.heartbeats(5).await;
    let before = h.listings();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let ticket = h.listing_after(before).await;
    h.answer_listing(ticket, &snap).await;
    for _ in 0..4 {
        let before = h.listings();
        tokio::time::sleep(Duration::from_secs(5)).await;
        let ticket = h.listing_after(before).await;
        h.answer_listing(ticket, &snap).await;
    }
    // At the window's end the stream vouches for nothing: the app is read, and the answer is
    // the observation the end is decided on.
    let read = h.next_read().await;
    h.send(observed(snap.clone(), Origin::Read(read))).await;
    let confirmed = h
        .expect(EventKind::Confirmed, Duration::from_secs(30))
        .await;
    assert_eq!(confirmed.time.ms_since(streak.time), 120_000);
    assert!(
        h.seen
            .iter()
            .all(|e| e.event != EventKind::HealthyStreakBroken),
        "{:#?}",
        h.seen
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_same_version_after_an_outage_vouches_up_to_the_loss_never_through_the_outage() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start_with(repo.clone(), config(dir.path()), false).await;
    let (_, _) = quiet_healthy_streak(&mut h, &repo).await;
    let snap = deployed(&sha(2), Health::Healthy);
    // Vouched for 50 s, then the stream is lost for 40 s (an outage: more than the 30 s of
    // slack). After it, the listing finds the version the stream vouched for: the 50 s are
    // observed time, the 40 s of the outage are not, and the streak starts again.
    h.heartbeats(5).await;
    h.send(SourceMsg::Lost("outage".into())).await;
    tokio::time::sleep(Duration::from_secs(40)).await;
    let before = h.listings();
    h.send(SourceMsg::Connected).await;
    let ticket = h.listing_after(before).await;
    h.answer_listing(ticket, &snap).await;
    let broken = h
        .expect(EventKind::HealthyStreakBroken, Duration::from_secs(1))
        .await;
    assert!(
        broken.message.contains("not observed for 40.0s"),
        "{}",
        broken.message
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_deadline_just_after_the_stream_lapses_is_decided_on_a_read_not_the_last_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start_with(repo.clone(), config(dir.path()), false).await;
    let reached = h.armed_and_degraded_on_the_stream(&repo).await;
    let degraded = deployed(&sha(2), Health::Degraded);
    // Heard from until 29.95 s after reach, then silent: the stream stops vouching 49 ms before
    // the deadline, and the listing asked then is slow (unanswered here). The deadline must not
    // be decided on the 60 s old delivery: the app is read at the moment and its answer decides.
    tokio::time::sleep(Duration::from_millis(29_950)).await;
    h.send(SourceMsg::Heartbeat).await;
    h.skip_reads().await;
    tokio::time::sleep(Duration::from_millis(29_900)).await;
    let read = h.next_read().await;
    h.send(observed(degraded, Origin::Read(read))).await;
    let failed = h.expect(EventKind::Failed, Duration::from_secs(1)).await;
    assert_eq!(failed.time.ms_since(reached.time), 60_000);
    assert!(failed.message.contains("reverting"), "{}", failed.message);
    h.expect(EventKind::RevertPushed, Duration::from_secs(1))
        .await;
    assert!(
        h.seen.iter().all(|e| e.event != EventKind::Inconclusive),
        "{:#?}",
        h.seen
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_due_moment_reads_only_the_unvouched_apps_with_something_due_then() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start_with(repo.clone(), config(dir.path()), false).await;
    h.connect_with_baseline(&deployed(&sha(1), Health::Healthy))
        .await;
    repo.push(commit(2, Some(&trailer(60, "arm"))));
    h.expect(EventKind::WatchStarted, Duration::from_secs(11))
        .await;
    let mut api = commit(3, Some("Nav-Watchdog: app=api deadline=300 mode=shadow"));
    api.changed_paths = vec!["apps/api/deployment.yaml".into()].into();
    repo.push(api);
    h.expect(EventKind::WatchStarted, Duration::from_secs(11))
        .await;
    h.skip_reads().await;
    // Both apps reached, then the stream falls silent: 30 s later it vouches for neither, and
    // the listings asked from then on go unanswered. `web`'s deadline comes at 60 s; nothing of
    // `api`'s watch is due before its window ends at 120 s.
    h.send(observed(
        deployed(&sha(2), Health::Degraded),
        Origin::Stream,
    ))
    .await;
    h.send(observed(other_app(&sha(3)), Origin::Stream)).await;
    h.expect(EventKind::Reached, Duration::from_secs(1)).await;
    h.expect(EventKind::Reached, Duration::from_secs(1)).await;
    h.skip_reads().await;
    tokio::time::sleep(Duration::from_millis(59_000)).await;
    let read = h.next_read().await;
    let asked = h.log.lock().unwrap().reads.last().unwrap().1.clone();
    assert_eq!(
        asked.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
        vec![APP],
        "of the apps the stream does not vouch for, only the one whose deadline is due is read"
    );
    h.send(observed(
        deployed(&sha(2), Health::Degraded),
        Origin::Read(read),
    ))
    .await;
    h.expect(EventKind::Failed, Duration::from_secs(1)).await;
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_read_at_a_deadline_is_not_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_base();
    let mut h = Harness::start_with(repo.clone(), config(dir.path()), false).await;
    let reached = h.armed_and_degraded_on_the_stream(&repo).await;
    // Silent since reach: at the deadline the stream vouches for nothing and the app is read.
    // Argo CD fails the read (named `argocd/web`, as asked): the deadline is decided at once,
    // not when the read would have been given up on 30 s later.
    tokio::time::sleep(Duration::from_millis(59_000)).await;
    h.next_read().await;
    h.send(SourceMsg::Problem(Problem::ReadFailed {
        app: format!("argocd/{APP}"),
        why: "reading Application argocd/web failed: 502".into(),
    }))
    .await;
    let verdict = h
        .expect(EventKind::Inconclusive, Duration::from_secs(2))
        .await;
    assert!(verdict.time.ms_since(reached.time) < 61_000, "{verdict:?}");
    assert!(repo.reverts.lock().unwrap().is_empty());
    h.stop().await;
}
