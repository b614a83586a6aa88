//! A day of churn in a few minutes: the watchdog's runtime with its real SQLite state file,
//! driven through simulated time (tokio's paused clock behind the runtime's clock), by a fleet
//! whose commits ask for `--per-hour` watches an hour that each end CONFIRMED; retention
//! (`--retain`) prunes as the daemon does. Every simulated hour it prints the state file's size
//! (with its WAL), the heap the process holds and the most it held during that hour, and how
//! many watches finished: bounded state means the size and the heap stop growing once
//! retention starts pruning.
//!
//! ```sh
//! cargo run --release -p greenlight --example churn -- [--hours 24] [--per-hour 1000] [--apps 20] [--retain-hours 6]
//! ```
//!
//! The Argo CD side is a fake that answers listings and reads from the fleet, and whose stream
//! delivers each app at the branch's tip after every commit (an app's `sync.revision` follows
//! the tip, as Argo CD's does); the repository is a linear branch in memory. What the judge
//! decides is the real judge's; any verdict other than CONFIRMED stops the run.
//!
//! With `CHURN_KEEP_STATE=<path>` set, the state file is copied there at the end (SQLite's
//! `VACUUM INTO`), to look into its records.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use greenlight::clock::Clock;
use greenlight::output::{LogFormat, Output};
use greenlight::runtime::seams::{AppSource, Context, Jobs, Repository, RevertExecutor};
use greenlight::runtime::{DaemonConfig, Runtime, Start};
use greenlight::store::SqliteStore;
use greenlight_core::directive::AppRef;
use greenlight_core::event::{Event, EventKind};
use greenlight_core::judge::{CommitInfo, RevertOutcome, RevertRequest};
use greenlight_core::repo_url::RepoUrl;
use greenlight_core::snapshot::{
    AppSnapshot, Health, OperationFacts, ReachCandidate, ReachVia, ResourceHealthSource,
    SourceFacts, SourcePaths,
};
use greenlight_core::source::{Origin, SourceMsg};
use greenlight_core::time::Timestamp;
use tokio::sync::mpsc;

/// The heap the process holds now, and the most it held since the last reset.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as given.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as given.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as given.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            let now = LIVE.fetch_add(new_size, Ordering::Relaxed) + new_size;
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const T0: i64 = 1_800_000_000_000;

struct SimClock {
    start: tokio::time::Instant,
}

impl Clock for SimClock {
    fn now(&self) -> Timestamp {
        Timestamp(T0 + self.start.elapsed().as_millis() as i64)
    }
}

/// The fleet as Argo CD has it: each app's snapshot and its resource version.
#[derive(Default)]
struct Fleet {
    apps: BTreeMap<String, (AppSnapshot, u64)>,
}

type Shared = Arc<Mutex<Fleet>>;

struct FakeArgo {
    fleet: Shared,
    tx: mpsc::UnboundedSender<SourceMsg>,
}

fn observed(snap: &AppSnapshot, rv: u64, origin: Origin) -> SourceMsg {
    SourceMsg::Observed {
        snapshot: Box::new(snap.clone()),
        origin,
        resource_version: Some(rv),
    }
}

impl AppSource for FakeArgo {
    fn start_stream(&mut self) {}
    fn set_watched(&mut self, _apps: Vec<AppRef>) {}
    fn request_listing(&mut self, ticket: u64) {
        let fleet = self.fleet.lock().unwrap();
        for (snap, rv) in fleet.apps.values() {
            let _ = self.tx.send(observed(snap, *rv, Origin::Listing(ticket)));
        }
        let present = fleet.apps.values().map(|(s, _)| s.key()).collect();
        let _ = self.tx.send(SourceMsg::Listed {
            ticket,
            present,
            complete: true,
        });
    }
    fn request_read(&mut self, ticket: u64, apps: Vec<AppRef>) {
        let fleet = self.fleet.lock().unwrap();
        for app in apps {
            let msg = match fleet.apps.get(&app.name) {
                Some((snap, rv)) => observed(snap, *rv, Origin::Read(ticket)),
                None => SourceMsg::Absent {
                    app,
                    origin: Origin::Read(ticket),
                },
            };
            let _ = self.tx.send(msg);
        }
    }
}

/// A linear branch in memory, and a remote ahead of it until the next fetch. Only the newest
/// [`KEPT_COMMITS`] are held (the fake's own memory must stay flat too, or it would be counted
/// as the daemon's); older ones are unknown to it, as no question of the run is about them.
#[derive(Default)]
struct Branch {
    local: VecDeque<CommitInfo>,
    /// Each held commit's position on the branch (0: the first commit).
    index: HashMap<String, usize>,
    /// How many commits were dropped from the front of `local`.
    dropped: usize,
    remote_only: Vec<CommitInfo>,
}

const KEPT_COMMITS: usize = 10_000;

#[derive(Clone, Default)]
struct FakeRepo(Arc<Mutex<Branch>>);

impl Repository for FakeRepo {
    fn fetch(&self, _branch: &str) -> anyhow::Result<String> {
        let mut b = self.0.lock().unwrap();
        let new: Vec<CommitInfo> = b.remote_only.drain(..).collect();
        for c in new {
            let at = b.dropped + b.local.len();
            b.index.insert(c.sha.to_string(), at);
            b.local.push_back(c);
            if b.local.len() > KEPT_COMMITS
                && let Some(gone) = b.local.pop_front()
            {
                b.index.remove(gone.sha.as_str());
                b.dropped += 1;
            }
        }
        Ok(b.local
            .back()
            .map(|c| c.sha.to_string())
            .unwrap_or_default())
    }
    fn commits_between(&self, from: Option<&str>, tip: &str) -> anyhow::Result<Vec<CommitInfo>> {
        let b = self.0.lock().unwrap();
        let held = |at: usize| at - b.dropped;
        let end = b.index.get(tip).map_or(b.local.len(), |&i| held(i) + 1);
        let start = match from {
            Some(f) => b.index.get(f).map_or(0, |&i| held(i) + 1),
            None => end.saturating_sub(1),
        };
        Ok(b.local.range(start.min(end)..end).cloned().collect())
    }
    fn is_ancestor(&self, commit: &str, revision: &str) -> anyhow::Result<Option<bool>> {
        let b = self.0.lock().unwrap();
        Ok(match (b.index.get(commit), b.index.get(revision)) {
            (Some(a), Some(r)) => Some(a <= r),
            _ => None,
        })
    }
    fn resolve(&self, rev: &str) -> anyhow::Result<Option<String>> {
        let b = self.0.lock().unwrap();
        Ok(b.index.contains_key(rev).then(|| rev.to_string()))
    }
}

impl RevertExecutor for FakeRepo {
    fn revert(&self, _req: &RevertRequest, _branch: &str) -> RevertOutcome {
        RevertOutcome::pushed(&format!("{:040x}", 0xdead_u64))
    }
    fn adopt_only(&self, _commit: &str, _branch: &str) -> anyhow::Result<Option<String>> {
        Ok(None)
    }
}

fn sha(n: u64) -> String {
    format!("{n:040x}")
}

fn app_name(i: usize) -> String {
    format!("app{i:03}")
}

fn commit(n: u64, app: &str, deadline_s: u64) -> CommitInfo {
    let message =
        format!("change {n}\n\nNav-Watchdog: app={app} deadline={deadline_s} mode=shadow\n");
    CommitInfo {
        sha: sha(n).parse().expect("a sha"),
        parents: if n > 1 {
            vec![sha(n - 1).parse().expect("a sha")]
        } else {
            Vec::new()
        },
        subject: format!("change {n}"),
        message,
        changed_paths: vec![format!("apps/{app}/deployment.yaml")].into(),
        mainline: None,
    }
}

/// `name` as Argo CD reports it after a succeeded sync to `rev`, healthy.
fn deployed(name: &str, rev: &str) -> AppSnapshot {
    let candidate = |via| ReachCandidate {
        revision: rev.into(),
        via,
    };
    AppSnapshot {
        namespace: "argocd".into(),
        name: name.into(),
        source: SourceFacts::FromRepo {
            target_revisions: vec!["main".into()],
            chart: None,
            revisions: vec![rev.into()],
            paths: SourcePaths::Known(vec![format!("apps/{name}")]),
        },
        sync_status: "Synced".into(),
        sync_revision: rev.into(),
        health: Health::Healthy,
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

fn config(dir: &Path, retain_ms: i64, stable_for_ms: i64) -> DaemonConfig {
    DaemonConfig {
        repo: RepoUrl::new("https://git.example.com/platform/deploy.git"),
        branch: Some("main".into()),
        git_token: None,
        git_author_name: "greenlight".into(),
        git_author_email: "greenlight@localhost".into(),
        state: dir.join("state.db"),
        data_dir: dir.join("data"),
        stable_for_ms,
        stale_after_ms: 30_000,
        unknown_app_grace_ms: 60_000,
        fetch_interval: Duration::from_secs(1),
        resync_interval: greenlight::runtime::config::DEFAULT_RESYNC_INTERVAL,
        dry_run: false,
        since: None,
        trailer_key: "Nav-Watchdog".into(),
        retain_ms,
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

struct Args {
    hours: u64,
    per_hour: u64,
    apps: usize,
    retain_hours: u64,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        hours: 24,
        per_hour: 1000,
        apps: 20,
        retain_hours: 6,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let n: u64 = value
            .parse()
            .map_err(|_| format!("{flag} {value}: not a whole number"))?;
        match flag.as_str() {
            "--hours" => a.hours = n,
            "--per-hour" => a.per_hour = n.max(1),
            "--apps" => a.apps = (n as usize).max(1),
            "--retain-hours" => a.retain_hours = n,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(a)
}

fn file_bytes(db: &Path) -> u64 {
    let wal = db.with_extension("db-wal");
    [db, wal.as_path()]
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() -> anyhow::Result<()> {
    let a = args().map_err(|e| anyhow::anyhow!("churn: {e}"))?;
    let dir = tempfile::tempdir()?;
    let step = Duration::from_millis(3_600_000 / a.per_hour);
    // Each app gets a commit every `apps` steps; its window ends well before its next one.
    let stable_for_ms = (step.as_millis() as i64 * a.apps as i64 / 2).max(1_000);
    let deadline_s = (stable_for_ms as u64 / 1000) * 4 + 60;
    let cfg = config(dir.path(), a.retain_hours as i64 * 3_600_000, stable_for_ms);
    let db = cfg.state.clone();

    let fleet: Shared = Arc::default();
    let repo = FakeRepo::default();
    repo.0.lock().unwrap().remote_only.push(CommitInfo {
        message: "base\n".into(),
        subject: "base".into(),
        ..commit(1, &app_name(0), deadline_s)
    });
    let tip = repo.fetch("main")?;
    for i in 0..a.apps {
        fleet
            .lock()
            .unwrap()
            .apps
            .insert(app_name(i), (deployed(&app_name(i), &tip), 1));
    }

    let (tx, mut from_argo) = mpsc::unbounded_channel();
    let (dtx, deliveries) = mpsc::channel(1024);
    // The runtime's delivery channel is bounded; the fake's sends are not: a pump between.
    tokio::spawn(async move {
        while let Some(m) = from_argo.recv().await {
            if dtx.send(m).await.is_err() {
                break;
            }
        }
    });
    let out = Output::new(LogFormat::Text).events_unprinted();
    let (etx, mut events) = mpsc::unbounded_channel::<Event>();
    out.subscribe(move |e| {
        let _ = etx.send(e.clone());
    });
    let ctx = Context {
        source: Box::new(FakeArgo {
            fleet: fleet.clone(),
            tx: tx.clone(),
        }),
        repo: Arc::new(repo.clone()),
        reverter: Arc::new(repo.clone()),
        clock: Arc::new(SimClock {
            start: tokio::time::Instant::now(),
        }),
        out,
        jobs: Jobs::Inline,
    };
    let start = Start {
        branch: "main".into(),
        branch_is_default: true,
        tip,
        store: Box::new(SqliteStore::open_or_create(&db)?),
        deliveries,
        announce: false,
        started: None,
    };
    let runtime = Runtime::start_with(cfg, ctx, start).await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(runtime.run(async move {
        let _ = stopped.await;
    }));
    let _ = tx.send(SourceMsg::Connected);

    println!(
        "{} apps, {} watches an hour (one every {:?}), stable for {} s, retention {} h",
        a.apps,
        a.per_hour,
        step,
        stable_for_ms / 1000,
        a.retain_hours
    );
    println!(
        "| hour | finished | state file (MiB) | heap now (MiB) | heap peak in the hour (MiB) |"
    );
    println!("|---|---|---|---|---|");
    let mut n = 1u64;
    let mut confirmed = 0u64;
    for hour in 1..=a.hours {
        PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
        for _ in 0..a.per_hour {
            n += 1;
            let app = app_name((n as usize) % a.apps);
            repo.0
                .lock()
                .unwrap()
                .remote_only
                .push(commit(n, &app, deadline_s));
            // Argo CD compares every app at the new tip; the changed one syncs it.
            tokio::time::sleep(step / 2).await;
            {
                let mut f = fleet.lock().unwrap();
                for (snap, rv) in f.apps.values_mut() {
                    let mut next = deployed(&snap.name, &sha(n));
                    if snap.name != app {
                        // Compared at the tip, nothing to sync: its last sync stays.
                        next.last_operation = snap.last_operation.clone();
                        next.reach_candidates
                            .retain(|c| c.via == ReachVia::SyncedRevision);
                    }
                    *snap = next;
                    *rv += 1;
                    let _ = tx.send(observed(snap, *rv, Origin::Stream));
                }
            }
            let _ = tx.send(SourceMsg::Heartbeat);
            tokio::time::sleep(step - step / 2).await;
            while let Ok(e) = events.try_recv() {
                match e.event {
                    EventKind::Confirmed => confirmed += 1,
                    EventKind::Failed
                    | EventKind::Inconclusive
                    | EventKind::RevertFailed
                    | EventKind::RevertedByHuman => {
                        anyhow::bail!("churn: an unexpected verdict: {e:?}");
                    }
                    _ => {}
                }
            }
        }
        println!(
            "| {hour} | {confirmed} | {:.2} | {:.1} | {:.1} |",
            file_bytes(&db) as f64 / (1024.0 * 1024.0),
            mib(LIVE.load(Ordering::Relaxed)),
            mib(PEAK.load(Ordering::Relaxed)),
        );
    }
    let _ = stop.send(());
    task.await??;
    // Where the state file's pages go, by table and index (SQLite's dbstat, when built in).
    let db = rusqlite::Connection::open(&db)?;
    let pages: rusqlite::Result<Vec<(String, i64)>> = db
        .prepare("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")
        .and_then(|mut q| q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect());
    if let Ok(pages) = pages {
        println!("\n| table or index | bytes |\n|---|---|");
        for (name, bytes) in pages {
            println!("| {name} | {bytes} |");
        }
    }
    let mut rows = Vec::new();
    for table in ["watches", "events"] {
        let n: i64 = db.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?;
        rows.push(format!("{table} {n}"));
    }
    println!("\nrows at the end: {}", rows.join(", "));
    if let Ok(keep) = std::env::var("CHURN_KEEP_STATE") {
        db.execute("VACUUM INTO ?1", [&keep])?;
        println!("state file kept as {keep}");
    }
    Ok(())
}
