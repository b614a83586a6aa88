//! Two `greenlight watch --leader-elect --store kube` replicas on a real kube-apiserver + etcd
//! (greenlight-testkit's `KubeApiserver`), a real git remote, the sandbox standing in for Argo CD
//! (its Applications mirrored into the apiserver): the failover drill (a leader killed with
//! `kill -9` at points of its life, again and again, over seeds), a partitioned leader, and a
//! graceful hand-over. docs/deploy.md#leader says what these check.

#[macro_use]
mod common;
use common::*;
use greenlight_testkit::KubeApiserver;
use greenlight_testkit::kube::ARGOCD_NAMESPACE;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(90);
/// The election's durations in these tests: lease 3 s, renew deadline 2 s, retry 0.5 s.
const LEASE: &[&str] = &[
    "--lease-duration",
    "3s",
    "--renew-deadline",
    "2s",
    "--lease-retry-period",
    "500ms",
];
const LEASE_DURATION: Duration = Duration::from_secs(3);
const RETRY: Duration = Duration::from_millis(500);

fn crds(kube: &KubeApiserver) {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/helm/greenlight/crds"
    );
    kube.kubectl_ok(&["apply", "-f", dir]);
    for crd in ["watches.greenlight.dev", "watchdogs.greenlight.dev"] {
        kube.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            &format!("crd/{crd}"),
        ]);
    }
}

/// One replica's command line: its own clone under `dir/<name>`, the kit's judge timings.
fn replica_args(
    repo: &Repo,
    kubeconfig: &Path,
    store: &str,
    dir: &Path,
    name: &str,
) -> Vec<String> {
    let data = dir.join(name);
    let mut args: Vec<String> = [
        "watch",
        "--repo",
        &repo.repo(),
        "--source",
        "kube",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--namespace",
        ARGOCD_NAMESPACE,
        "--store",
        "kube",
        "--store-namespace",
        ARGOCD_NAMESPACE,
        "--store-name",
        store,
        "--leader-elect",
        "--identity",
        name,
        "--data-dir",
        data.to_str().unwrap(),
        "--stable-for",
        "2s",
        "--fetch-interval",
        "200ms",
        // Above a takeover's gap (lease 3 s + retry 0.5 s + start-up), as docs/deploy.md#leader
        // asks: an observation from before a failover is still fresh when the new leader
        // resumes, so a deadline in the gap is decided as it would have been.
        "--stale-after",
        "12s",
        "--unknown-app-grace",
        "3s",
        "--reexec-interval",
        "0",
        "--git-author",
        "greenlight-bot <bot@greenlight.test>",
    ]
    .map(String::from)
    .into();
    args.extend(LEASE.iter().map(|s| s.to_string()));
    args
}

/// A replica: its process (restarted as a kubelet would after a kill), its name, and the proxy
/// its apiserver connections go through (a kill while a request is held in flight).
struct Replica {
    name: String,
    args: Vec<String>,
    proc: Proc,
    proxy: greenlight_testkit::proxy::TcpProxy,
}

impl Replica {
    /// Replica `name` of `store`, its kubeconfig pointed at a proxy of its own.
    fn start(kube: &KubeApiserver, repo: &Repo, store: &str, dir: &Path, name: &str) -> Replica {
        let proxy = greenlight_testkit::proxy::TcpProxy::start(apiserver_addr(kube));
        let via = dir.join(format!("{name}.kubeconfig"));
        std::fs::create_dir_all(dir).unwrap();
        kubeconfig_via(kube, &proxy.https_url(), &via);
        let args = replica_args(repo, &via, store, dir, name);
        let proc = Proc::spawn(BIN, &args, &[]);
        Replica {
            name: name.to_string(),
            args,
            proc,
            proxy,
        }
    }

    fn leads(&self) -> bool {
        self.proc.output().contains(" leads: the Lease")
    }

    /// `kill -9`, then the container's restart: a new process, a standby.
    fn kill9_and_restart(&mut self) {
        self.proc.kill9();
        self.proc = Proc::spawn(BIN, &self.args, &[]);
    }
}

/// The apiserver's address, for a proxy in front of it.
fn apiserver_addr(kube: &KubeApiserver) -> std::net::SocketAddr {
    kube.url()
        .trim_start_matches("https://")
        .parse()
        .expect("the apiserver's URL is https://<ip>:<port>")
}

/// `greenlight status --store kube --json` of store `store`.
#[track_caller]
fn kube_status(kube: &KubeApiserver, store: &str) -> Value {
    let out = std::process::Command::new(BIN)
        .args([
            "status",
            "--store",
            "kube",
            "--kubeconfig",
            kube.kubeconfig().to_str().unwrap(),
            "--store-namespace",
            ARGOCD_NAMESPACE,
            "--store-name",
            store,
            "--json",
        ])
        .output()
        .expect("greenlight status runs");
    assert!(
        out.status.success(),
        "status --store kube failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("status --json is JSON")
}

fn watches_of(status: &Value, commit: &str) -> Vec<Value> {
    status["watches"]
        .as_array()
        .map(|ws| {
            ws.iter()
                .filter(|w| w["commit"] == commit)
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// Which of the two leads now (the one whose current process said so and still runs).
fn leader_of(rs: &mut [Replica; 2]) -> Option<usize> {
    (0..2).find(|&i| rs[i].leads() && rs[i].proc.is_running())
}

/// Waits until one replica leads; the time it took from `since`.
#[track_caller]
fn wait_leader(rs: &mut [Replica; 2], since: Instant) -> (usize, Duration) {
    let end = Instant::now() + T;
    loop {
        if let Some(i) = leader_of(rs) {
            return (i, since.elapsed());
        }
        assert!(
            Instant::now() < end,
            "no replica leads within {T:?}:\n--- {}:\n{}\n--- {}:\n{}",
            rs[0].name,
            rs[0].proc.output(),
            rs[1].name,
            rs[1].proc.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A small deterministic generator (SplitMix64): the drill's kill instants from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn millis(&mut self, below: u64) -> Duration {
        Duration::from_millis(self.next() % below)
    }
}

/// What one kill did.
struct Kill {
    seed: u64,
    point: &'static str,
    takeover: Duration,
}

/// One scenario of the drill: an armed failing commit, and its leader killed five times —
/// at a random instant after the commit (waiting for reach or judging), at a random instant
/// after the first takeover, while renewing (its apiserver connection held by a proxy, so a
/// renewal is sent and unanswered, and delivered after the kill), after the revert's push
/// reached the remote and before its record (the push is held by the remote's hook), and at a
/// random instant after the verdict. Each killed replica comes back as a standby.
fn drill(kube: &KubeApiserver, seed: u64, kills: &mut Vec<Kill>) {
    let mut rng = Rng(seed);
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let _mirror = kube.mirror_sandbox(&sb.url);
    let store = format!("drill-{seed}");
    let dir = repo.path("replicas");
    let mut rs = [
        Replica::start(kube, &repo, &store, &dir, "a"),
        Replica::start(kube, &repo, &store, &dir, "b"),
    ];
    let (first, _) = wait_leader(&mut rs, Instant::now());
    rs[first]
        .proc
        .wait_line(greenlight_testkit::watch::WATCHING, T);
    let release = hold_pushes_of(&repo, "Revert ");
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: bad\n\n{}", trailer("web", "6", "arm")),
    );
    let kill = |rs: &mut [Replica; 2], point: &'static str, kills: &mut Vec<Kill>| {
        let (leader, _) = wait_leader(rs, Instant::now());
        let in_flight = point.starts_with("while renewing");
        if in_flight {
            // Its next renewal (due within a retry period) is sent and held, unanswered; the
            // kill comes before its renew deadline, and what it sent lands after its death.
            rs[leader].proxy.cut();
            std::thread::sleep(RETRY + Duration::from_millis(200));
        }
        rs[leader].proc.kill9();
        let killed_at = Instant::now();
        if in_flight {
            rs[leader].proxy.heal();
        }
        rs[leader].kill9_and_restart();
        let (_, took) = wait_leader(rs, killed_at);
        // Either may lead next: the standby that watched the Lease all along, or the killed
        // replica's new process, which saw it unchanged as early (both wait a lease duration).
        kills.push(Kill {
            seed,
            point,
            takeover: took,
        });
    };
    std::thread::sleep(rng.millis(3000));
    kill(
        &mut rs,
        "after the commit (waiting for reach or judging)",
        kills,
    );
    std::thread::sleep(rng.millis(2500));
    kill(&mut rs, "after a takeover (judging or reverting)", kills);
    kill(
        &mut rs,
        "while renewing (its renewal held in flight, delivered after its death)",
        kills,
    );
    // The revert reaches the remote; its pusher waits in the hook.
    let end = Instant::now() + T;
    while repo.remote_tip() == bad {
        assert!(
            Instant::now() < end,
            "no revert pushed within {T:?}: {}\n--- a:\n{}\n--- b:\n{}",
            kube_status(kube, &store),
            rs[0].proc.output(),
            rs[1].proc.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(&mut rs, "after the revert's push, before its record", kills);
    std::fs::write(&release, "").unwrap();
    let end = Instant::now() + T;
    let w = loop {
        let st = kube_status(kube, &store);
        let ws = watches_of(&st, &bad);
        assert!(
            ws.len() <= 1,
            "one watch of the commit, not {}: {st}",
            ws.len()
        );
        if let Some(w) = ws.first().filter(|w| w["state"] == "REVERTED") {
            break w.clone();
        }
        assert!(
            Instant::now() < end,
            "no REVERTED within {T:?}: {st}\n--- a:\n{}\n--- b:\n{}",
            rs[0].proc.output(),
            rs[1].proc.output()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    std::thread::sleep(rng.millis(1500));
    kill(&mut rs, "after the verdict", kills);
    // The new leader resumes from the store: nothing more to do for this commit.
    let (leader, _) = wait_leader(&mut rs, Instant::now());
    rs[leader]
        .proc
        .wait_line(greenlight_testkit::watch::WATCHING, T);
    // Two fetch intervals and a listing later, still one revert and one watch.
    std::thread::sleep(Duration::from_secs(2));
    let st = kube_status(kube, &store);
    let ws = watches_of(&st, &bad);
    assert_eq!(ws.len(), 1, "no watch lost or doubled: {st}");
    assert_eq!(ws[0]["state"], "REVERTED", "the same verdict: {st}");
    assert_eq!(ws[0]["revert_commit"], w["revert_commit"], "{st}");
    assert_eq!(
        count_reverts_of(&repo, &bad),
        1,
        "exactly one revert on the remote (seed {seed})"
    );
    assert_eq!(
        repo.remote_tip(),
        w["revert_commit"].as_str().unwrap(),
        "nothing pushed after the revert (seed {seed})"
    );
    // Its recorded inputs, across every leader that judged it, replay to the same verdict
    // (docs/why.md#stores).
    let out = std::process::Command::new(BIN)
        .args(["why", &bad, "--store", "kube", "--kubeconfig"])
        .arg(kube.kubeconfig())
        .args([
            "--store-namespace",
            ARGOCD_NAMESPACE,
            "--store-name",
            &store,
        ])
        .output()
        .expect("greenlight why runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "seed {seed}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("replay: same verdict — REVERTED") && text.contains("greenlight restarted"),
        "seed {seed}: {text}"
    );
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The failover drill: `GREENLIGHT_DRILL_SEEDS` seeds (default 5), five kills each: at least
/// 20 kill points. Each takeover is bounded by the Lease: a standby takes it at most a lease
/// duration after the last renewal it saw, plus one retry period, plus the time to say so.
#[test]
fn the_failover_drill_keeps_one_verdict_and_one_revert() {
    let seeds: u64 = std::env::var("GREENLIGHT_DRILL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let kube = KubeApiserver::start();
    crds(&kube);
    let mut kills = Vec::new();
    for seed in 1..=seeds {
        drill(&kube, seed, &mut kills);
    }
    assert!(
        kills.len() >= 20 || seeds < 5,
        "{} kill points",
        kills.len()
    );
    let mut times: Vec<Duration> = kills.iter().map(|k| k.takeover).collect();
    times.sort();
    let bound = LEASE_DURATION + RETRY + Duration::from_secs(3);
    for k in &kills {
        eprintln!(
            "seed {} — {}: taken over in {:.2} s",
            k.seed,
            k.point,
            k.takeover.as_secs_f64()
        );
        assert!(
            k.takeover <= bound,
            "seed {} ({}): the standby took over in {:?}, above {bound:?}",
            k.seed,
            k.point,
            k.takeover
        );
    }
    eprintln!(
        "failover drill: {} kill points over {seeds} seeds, 1 revert per scenario; takeover p50 {:.2} s, max {:.2} s",
        kills.len(),
        percentile(&times, 0.5).as_secs_f64(),
        times.last().unwrap().as_secs_f64()
    );
}

/// Polls `http://<addr><path>` until `ok` holds for its answer; fails after `T`, showing the last.
#[track_caller]
fn wait_answer(addr: &str, path: &str, ok: impl Fn(&greenlight_testkit::http::Response) -> bool) {
    let url = format!("http://{addr}{path}");
    let end = Instant::now() + T;
    loop {
        let got = greenlight_testkit::http::http_request("GET", &url, &[]);
        if let Ok(r) = &got
            && ok(r)
        {
            return;
        }
        assert!(
            Instant::now() < end,
            "GET {url}: {:?}",
            got.map(|r| (r.status, r.body))
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The harness's kubeconfig, pointed at `url` instead (a proxy in front of the apiserver).
fn kubeconfig_via(kube: &KubeApiserver, url: &str, path: &Path) {
    let text = std::fs::read_to_string(kube.kubeconfig()).unwrap();
    assert!(text.contains(&kube.url()), "{text}");
    std::fs::write(path, text.replace(&kube.url(), url)).unwrap();
}

/// A leader cut off from the apiserver (a proxy that stops forwarding, connections held open)
/// stops acting — exits — before the standby can take the Lease over.
#[test]
fn a_partitioned_leader_stops_before_its_lease_can_be_taken() {
    let kube = KubeApiserver::start();
    crds(&kube);
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let _mirror = kube.mirror_sandbox(&sb.url);
    let proxy = greenlight_testkit::proxy::TcpProxy::start(apiserver_addr(&kube));
    let via = repo.path("via-proxy.kubeconfig");
    kubeconfig_via(&kube, &proxy.https_url(), &via);
    let dir = repo.path("replicas");
    let mut a = Proc::spawn(BIN, replica_args(&repo, &via, "part", &dir, "a"), &[]);
    a.wait_line(" leads: the Lease", T);
    a.wait_line(greenlight_testkit::watch::WATCHING, T);
    let b = Proc::spawn(
        BIN,
        replica_args(&repo, kube.kubeconfig(), "part", &dir, "b"),
        &[],
    );
    b.wait_line("standing by as b_", T);
    // Let the standby see the leader renew a few times.
    std::thread::sleep(Duration::from_secs(2));
    assert!(!b.output().contains(" leads: the Lease"), "{}", b.output());
    proxy.cut();
    let cut = Instant::now();
    let (mut a_exit, mut b_leads) = (None, None);
    while a_exit.is_none() || b_leads.is_none() {
        assert!(
            cut.elapsed() < T,
            "a exited: {a_exit:?}, b leads: {b_leads:?}\n--- a:\n{}\n--- b:\n{}",
            a.output(),
            b.output()
        );
        if a_exit.is_none() && !a.is_running() {
            a_exit = Some(cut.elapsed());
        }
        if b_leads.is_none() && b.output().contains(" leads: the Lease") {
            b_leads = Some(cut.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let (a_exit, b_leads) = (a_exit.unwrap(), b_leads.unwrap());
    eprintln!(
        "partition: the leader exited {:.2} s after the cut, the standby led {:.2} s after it",
        a_exit.as_secs_f64(),
        b_leads.as_secs_f64()
    );
    assert!(
        a_exit < b_leads,
        "the cut-off leader stopped at {a_exit:?}, after the standby took over at {b_leads:?}"
    );
    assert_eq!(a.wait_exit(T).code(), Some(75), "{}", a.output());
    assert!(a.output().contains("lost the Lease"), "{}", a.output());
    // The renew deadline (2 s) from the last renewal sent, which was before the cut.
    assert!(a_exit <= Duration::from_millis(2500), "{a_exit:?}");
}

/// SIGTERM (a rolling update, a drain): the leader finishes, gives the Lease up, and the
/// standby takes over at once instead of a lease duration later. A standby never judges aloud:
/// no event of a watch is in its output while the leader judges. `/readyz` and
/// `greenlight_leader` say who leads, before and after; a replica whose `--stale-after` is below
/// a takeover's gap says so at start.
#[test]
fn a_stopped_leader_hands_over_at_once_and_a_standby_judges_nothing() {
    let kube = KubeApiserver::start();
    crds(&kube);
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let _mirror = kube.mirror_sandbox(&sb.url);
    let dir = repo.path("replicas");
    let (a_addr, b_addr) = (free_addr(), free_addr());
    let mut a_args = replica_args(&repo, kube.kubeconfig(), "hand", &dir, "a");
    a_args.extend(["--listen".to_string(), a_addr.clone()]);
    let mut a = Proc::spawn(BIN, a_args, &[]);
    a.wait_line(greenlight_testkit::watch::WATCHING, T);
    // b's --stale-after (3 s) is below a takeover's gap (lease 3 s + retry 0.5 s): said at start.
    let mut b_args = replica_args(&repo, kube.kubeconfig(), "hand", &dir, "b");
    let i = b_args.iter().position(|x| x == "--stale-after").unwrap();
    b_args[i + 1] = "3s".into();
    b_args.extend(["--listen".to_string(), b_addr.clone()]);
    let b = Proc::spawn(BIN, b_args, &[]);
    b.wait_line("standing by as b_", T);
    b.wait_line("is not below --stale-after", T);
    assert!(
        !a.output().contains("is not below --stale-after"),
        "{}",
        a.output()
    );
    // /readyz and /metrics say who leads: a leads, b stands by, ready (its stream connected).
    wait_answer(&a_addr, "/readyz", |r| {
        r.status == 200 && r.body.starts_with("ok: leader a_")
    });
    wait_answer(&b_addr, "/readyz", |r| {
        r.status == 200
            && r.body.starts_with("ok: standby b_")
            && r.body.contains("the leader is a_")
    });
    wait_answer(&a_addr, "/metrics", |r| {
        r.body.contains("\ngreenlight_leader 1\n")
    });
    wait_answer(&b_addr, "/metrics", |r| {
        r.body.contains("\ngreenlight_leader 0\n")
    });
    let good = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "30", "arm")),
    );
    let end = Instant::now() + T;
    loop {
        let st = kube_status(&kube, "hand");
        if watches_of(&st, &good)
            .first()
            .is_some_and(|w| w["state"] == "CONFIRMED")
        {
            break;
        }
        assert!(Instant::now() < end, "{st}\n{}", a.output());
        std::thread::sleep(Duration::from_millis(200));
    }
    let standby = b.output();
    for word in ["WAITING_REACH", "JUDGING", "CONFIRMED", "watching "] {
        assert!(
            !standby.contains(word),
            "the standby said {word}:\n{standby}"
        );
    }
    a.sigterm();
    let stopped = Instant::now();
    assert_eq!(a.wait_exit(T).code(), Some(0), "{}", a.output());
    assert!(
        a.output().contains("the Lease is released"),
        "{}",
        a.output()
    );
    b.wait_line(" leads: the Lease", T);
    let took = stopped.elapsed();
    eprintln!("hand-over after SIGTERM: {:.2} s", took.as_secs_f64());
    assert!(
        took < LEASE_DURATION,
        "a released Lease is taken within a retry period or so, not after it expires: {took:?}"
    );
    b.wait_line(greenlight_testkit::watch::WATCHING, T);
    wait_answer(&b_addr, "/readyz", |r| {
        r.status == 200 && r.body.starts_with("ok: leader b_")
    });
    wait_answer(&b_addr, "/metrics", |r| {
        r.body.contains("\ngreenlight_leader 1\n")
    });
    // The new leader resumes the finished watch as finished: no second watch of the commit.
    std::thread::sleep(Duration::from_secs(1));
    let st = kube_status(&kube, "hand");
    assert_eq!(watches_of(&st, &good).len(), 1, "{st}");
}

/// One replica on the cluster store, no election: its watches are in the cluster, and
/// `kubectl get watches` reads like `greenlight status`.
#[test]
fn one_replica_keeps_its_watches_in_the_cluster_without_an_election() {
    let kube = KubeApiserver::start();
    crds(&kube);
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let _mirror = kube.mirror_sandbox(&sb.url);
    let dir = repo.path("replicas");
    let mut args = replica_args(&repo, kube.kubeconfig(), "solo", &dir, "a");
    // No election: its flags go.
    let i = args.iter().position(|a| a == "--leader-elect").unwrap();
    args.drain(i..i + 3);
    // The Lease's durations close the command line.
    assert!(args.ends_with(&LEASE.iter().map(|s| s.to_string()).collect::<Vec<_>>()));
    args.truncate(args.len() - LEASE.len());
    assert!(!args.iter().any(|a| a.starts_with("--lease")), "{args:?}");
    let wd = Proc::spawn(BIN, args, &[]);
    wd.wait_line(greenlight_testkit::watch::WATCHING, T);
    let good = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "30", "arm")),
    );
    let end = Instant::now() + T;
    while !watches_of(&kube_status(&kube, "solo"), &good)
        .first()
        .is_some_and(|w| w["state"] == "CONFIRMED")
    {
        assert!(Instant::now() < end, "{}", wd.output());
        std::thread::sleep(Duration::from_millis(200));
    }
    let table = kube.kubectl_ok(&["get", "watches", "-n", ARGOCD_NAMESPACE]);
    let row = table
        .lines()
        .find(|l| l.contains(&good[..7]))
        .unwrap_or_else(|| panic!("no row of {good}:\n{table}"));
    assert!(
        row.contains("CONFIRMED") && row.contains("web") && row.contains("arm"),
        "{table}"
    );
    assert!(!wd.output().contains("lease"), "{}", wd.output());
}
