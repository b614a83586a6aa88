//! The cluster store (`greenlight::store::KubeStore`) against a real kube-apiserver v1.20.2 on
//! Debian's etcd (the kit's harness) with the chart's CRDs applied by kubectl: what the state
//! file's tests check where it applies (watches of every phase written and read back byte for
//! byte, finished ids, re-openable watches, idle observations and arrived commits, retention, the
//! bind refusal, a breaker reset request), and what only the cluster has: a second writer is a
//! conflict and nothing after it is written; the order of a step's object writes (the
//! apiserver refusing the Watch writes by RBAC: the breaker is written, the tip is not); the
//! printer columns of `kubectl get watches`.

use greenlight::store::{KubeStore, Store, Write, watch_body, watch_from_body};
use greenlight_core::breaker::{Breaker, CountedRevert};
use greenlight_core::commit::CommitId;
use greenlight_core::event::{Event, EventKind, Evidence};
use greenlight_core::judge::{Arrived, Idle, Watch};
use greenlight_core::snapshot::{AppKey, Health};
use greenlight_core::time::Timestamp;
use greenlight_testkit::KubeApiserver;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const CRDS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../deploy/helm/greenlight/crds"
);
const BODIES: &str = include_str!("../../greenlight-core/tests/fixtures/watch_bodies.json");
const NS: &str = "gl";
const REPO: &str = "https://git.example.com/platform/deploy.git";

/// The chart's CRDs, applied and served.
fn apply_crds(kube: &KubeApiserver) {
    kube.kubectl_ok(&["apply", "-f", CRDS]);
    for crd in ["watches.greenlight.dev", "watchdogs.greenlight.dev"] {
        kube.wait_until(&format!("{crd} is served"), || {
            kube.kubectl(&["get", crd, "-n", NS]).status.success()
        });
    }
}

/// One watch per recorded state and verdict (the core's fixture), each on a commit of its own
/// (several recorded watches share one: the judge keeps one watch per commit and app).
fn watches() -> Vec<(String, Watch)> {
    let v: Vec<Value> = serde_json::from_str(BODIES).unwrap();
    v.into_iter()
        .enumerate()
        .map(|(i, x)| {
            let body = x["body"].as_str().unwrap();
            let commit = serde_json::from_str::<Value>(body).unwrap()["commit"]
                .as_str()
                .unwrap()
                .to_string();
            let unique = format!("{:08x}{}", i + 1, &commit[8..]);
            (
                x["label"].as_str().unwrap().to_string(),
                watch_from_body(&body.replace(&commit, &unique)).unwrap(),
            )
        })
        .collect()
}

fn is_live(w: &Watch) -> bool {
    matches!(w.state().as_str(), "WAITING_REACH" | "JUDGING") || w.revert_pending()
}

fn store(kube: &KubeApiserver) -> KubeStore {
    KubeStore::connect(Some(kube.kubeconfig()), Some(NS), "greenlight").unwrap()
}

fn event(time: i64, kind: EventKind, of: Option<&Watch>) -> Event {
    Event {
        time: Timestamp(time),
        event: kind,
        commit: of.map(|w| w.commit.to_string()),
        app: of.map(|w| w.app.to_string()),
        state: of.map(|w| w.state()),
        message: format!("at {time}"),
        evidence: Evidence::default(),
        outcome: None,
        reason: None,
    }
}

fn sha(n: usize) -> CommitId {
    CommitId::parse(&format!("{n:040x}")).unwrap()
}

fn arrived(n: usize) -> Arrived {
    Arrived {
        sha: sha(n),
        parents: vec![sha(n + 1_000_000)],
        changed_paths: vec![format!("apps/{n}/deploy.yaml")].into(),
        reverts: (n % 2 == 1).then(|| sha(n + 2_000_000)),
        at: Some(greenlight_core::time::Timestamp(
            1_700_000_000_000 + n as i64,
        )),
        by_greenlight: n.is_multiple_of(4),
    }
}

fn key(name: &str) -> AppKey {
    AppKey {
        namespace: "argocd".into(),
        name: name.into(),
    }
}

fn idle(rev: char, health: Health) -> Idle {
    Idle {
        revision: rev.to_string().repeat(40),
        health,
        unclean: None,
        applied: None,
        chronic: Default::default(),
        out_of_sync: false,
    }
}

fn get_json(kube: &KubeApiserver, args: &[&str]) -> Value {
    let mut full = vec!["get"];
    full.extend_from_slice(args);
    full.extend(["-n", NS, "-o", "json"]);
    serde_json::from_str(&kube.kubectl_ok(&full)).unwrap()
}

fn dog(kube: &KubeApiserver) -> Value {
    get_json(kube, &["watchdog", "greenlight"])
}

fn object_of(w: &Watch) -> String {
    greenlight::store::kube::object_name(&w.id)
}

#[test]
fn watches_of_every_phase_the_breaker_and_the_memory_come_back_from_the_cluster() {
    let kube = KubeApiserver::start_with_namespaces(&[NS]);
    apply_crds(&kube);
    let all = watches();
    let ws: Vec<Watch> = all.iter().map(|(_, w)| w.clone()).collect();
    let first = &ws[0];
    let breaker = Breaker {
        open: true,
        consecutive_reverts: 2,
        reverts: vec![CountedRevert {
            commit: sha(7),
            revert: sha(8),
            apps: ["web".to_string()].into(),
        }],
    };
    let mut events: Vec<Event> = ws
        .iter()
        .map(|w| event(w.watch_started_at.0, EventKind::WatchStarted, Some(w)))
        .collect();
    events.push(event(1_796_205_700_000, EventKind::BreakerOpened, None));
    let old_event = event(1_000, EventKind::DirectiveRejected, None);
    events.push(old_event);
    let idle_web = vec![idle('a', Health::Healthy), idle('b', Health::Degraded)];
    let first_arrived: Vec<Arrived> = (0..3).map(arrived).collect();
    let tip = sha(2).to_string();
    let base = sha(0).to_string();

    let mut s = store(&kube);
    assert_eq!(
        s.describe(),
        "watches.greenlight.dev in namespace gl (store greenlight)"
    );
    s.bind(REPO, "main").unwrap();
    s.write(Write {
        watches: &ws,
        breaker: Some(&breaker),
        events: &events,
        tip: Some(&tip),
        baseline: Some(&base),
        idle: &[
            (key("web"), idle_web.clone()),
            (key("api"), vec![idle('c', Health::Healthy)]),
        ],
        arrived: &first_arrived,
        ..Write::default()
    })
    .unwrap();
    // A later step: an app forgotten, more commits.
    s.write(Write {
        idle: &[(key("api"), Vec::new())],
        arrived: &[arrived(3)],
        ..Write::default()
    })
    .unwrap();

    // What `status` reads, from another store (another process would).
    let mut reader = store(&kube);
    let loaded = reader.load().unwrap();
    assert_eq!(loaded.repo.as_deref(), Some(REPO));
    assert_eq!(loaded.branch.as_deref(), Some("main"));
    assert_eq!(loaded.tip.as_deref(), Some(tip.as_str()));
    assert_eq!(loaded.baseline.as_deref(), Some(base.as_str()));
    assert_eq!(loaded.breaker, breaker);
    let mut want = ws.clone();
    want.sort_by(|a, b| (a.watch_started_at, &a.id).cmp(&(b.watch_started_at, &b.id)));
    assert_eq!(loaded.watches, want);
    // Each object's record.body is the state file's body, byte for byte.
    for (label, w) in &all {
        let o = get_json(&kube, &["watch", &object_of(w)]);
        assert_eq!(
            o["record"]["body"].as_str().unwrap(),
            watch_body(w).unwrap(),
            "{label}"
        );
        assert_eq!(o["record"]["id"], w.id.as_str(), "{label}");
        assert_eq!(o["record"]["live"], is_live(w), "{label}");
        assert_eq!(
            o["metadata"]["labels"]["greenlight.dev/live"],
            is_live(w).to_string()
        );
        assert_eq!(
            o["metadata"]["labels"]["greenlight.dev/store"],
            "greenlight"
        );
        // Its event went with it, in the same object.
        let h = o["history"].as_array().unwrap();
        assert!(
            h.iter().any(|e| e["event"] == "watch_started"
                && e["body"].as_str().unwrap().contains(&w.commit.to_string())),
            "{label}: {h:?}"
        );
    }
    // Events of no watch are the Watchdog's.
    let d = dog(&kube);
    let history: Vec<&str> = d["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(history, ["breaker_opened", "directive_rejected"]);
    assert_eq!(d["state"]["breakerState"], "open");
    assert_eq!(d["state"]["consecutiveReverts"], 2);

    // What the daemon resumes from.
    let r = reader.load_resume(None).unwrap();
    let live: BTreeSet<&str> = r.live.iter().map(|w| w.id.as_str()).collect();
    let want_live: BTreeSet<&str> = ws
        .iter()
        .filter(|w| is_live(w))
        .map(|w| w.id.as_str())
        .collect();
    let want_finished: BTreeSet<String> = ws
        .iter()
        .filter(|w| !is_live(w))
        .map(|w| w.id.clone())
        .collect();
    assert_eq!(live, want_live);
    assert_eq!(r.finished_ids, want_finished);
    assert_eq!(r.breaker, breaker);
    assert_eq!(r.tip.as_deref(), Some(tip.as_str()));
    assert_eq!(r.idle, vec![(key("web"), idle_web)]);
    assert_eq!(r.arrived, (0..4).map(arrived).collect::<Vec<_>>());
    // NOT_REACHED watches within the re-open horizon come back whole.
    let not_reached: BTreeSet<String> = ws
        .iter()
        .filter(|w| w.state().as_str() == "NOT_REACHED")
        .map(|w| w.id.clone())
        .collect();
    assert_eq!(not_reached.len(), 2);
    let r = reader.load_resume(Some(1_796_205_660_000)).unwrap();
    let reopened: BTreeSet<String> = r
        .live
        .iter()
        .filter(|w| !is_live(w))
        .map(|w| w.id.clone())
        .collect();
    assert_eq!(reopened, not_reached);
    assert!(r.finished_ids.is_disjoint(&not_reached));

    // The printer columns.
    let table = kube.kubectl_ok(&["get", "watches", "-n", NS]);
    let header = table.lines().next().unwrap();
    for col in [
        "NAME", "COMMIT", "APP", "MODE", "STATE", "STARTED", "REASON",
    ] {
        assert!(header.contains(col), "{header}");
    }
    let row = table
        .lines()
        .find(|l| l.starts_with(&object_of(first)))
        .unwrap();
    assert!(
        row.contains(first.commit.short())
            && row.contains("WAITING_REACH")
            && row.contains(&first.watch_started_at.rfc3339()),
        "{row}"
    );

    // Another repository is refused, naming the Watchdog.
    let err = format!(
        "{:#}",
        reader
            .bind("https://other.example/x.git", "main")
            .unwrap_err()
    );
    assert!(
        err.contains("watchdogs.greenlight.dev gl/greenlight") && err.contains("belongs to repo"),
        "{err}"
    );

    // A breaker reset request (a merge patch by `breaker reset`) is seen by the writer, which
    // clears it with the breaker it closes; a request made after its read survives its next
    // write.
    let mut cli = store(&kube);
    cli.require_existing().unwrap();
    assert!(!cli.breaker_reset_requested().unwrap());
    cli.request_breaker_reset(42).unwrap();
    assert!(s.breaker_reset_requested().unwrap());
    s.write(Write {
        breaker: Some(&Breaker::default()),
        clear_breaker_reset_request: true,
        ..Write::default()
    })
    .unwrap();
    assert!(!cli.breaker_reset_requested().unwrap());
    assert_eq!(store(&kube).load().unwrap().breaker, Breaker::default());
    cli.request_breaker_reset(43).unwrap();
    s.write(Write {
        tip: Some(sha(3).as_ref()),
        ..Write::default()
    })
    .unwrap();
    assert_eq!(dog(&kube)["state"]["breakerResetRequestedAt"], 43);
    assert!(s.breaker_reset_requested().unwrap());

    // Retention: finished watches older than the cutoff go with their events; live ones stay.
    // The cutoff is never within a verdict's day (the track record's window).
    let day = greenlight_core::record::WINDOW_MS;
    let now = Timestamp(1_796_205_668_000 + day);
    let pruned = s.prune_due(now, 1).unwrap().unwrap();
    let gone: BTreeSet<String> = ws
        .iter()
        .filter(|w| !is_live(w) && w.finished_at().unwrap().0 < now.0 - day)
        .map(|w| w.id.clone())
        .collect();
    assert!(gone.len() >= 5, "{gone:?}");
    assert_eq!(pruned.watches, gone.len());
    // Counted first into the track record's summary, with the ids counted, before they went.
    let summary: BTreeMap<String, greenlight_core::record::Tally> = serde_json::from_str(
        dog(&kube)["record"]["summary"]
            .as_str()
            .expect("record.summary"),
    )
    .unwrap();
    assert_eq!(
        summary.values().map(|t| t.verdicts).sum::<u64>(),
        gone.len() as u64,
        "{summary:?}"
    );
    let counted: BTreeSet<String> =
        serde_json::from_str(dog(&kube)["record"]["counted"].as_str().unwrap()).unwrap();
    assert_eq!(counted, gone);
    assert_eq!(store(&kube).export().unwrap().record_summary, summary);
    // Each pruned watch had one event; the Watchdog's event at 1000 ms went by its time.
    assert_eq!(pruned.events, gone.len() + 1);
    let left: BTreeSet<String> = store(&kube)
        .load()
        .unwrap()
        .watches
        .iter()
        .map(|w| w.id.clone())
        .collect();
    let want_left: BTreeSet<String> = ws
        .iter()
        .map(|w| w.id.clone())
        .filter(|id| !gone.contains(id))
        .collect();
    assert_eq!(left, want_left);
    let history: Vec<String> = dog(&kube)["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(history, ["breaker_opened"]);
    assert_eq!(s.prune_due(now.plus_ms(1000), 1).unwrap(), None, "hourly");
    // The store goes on writing after its own deletes.
    s.write(Write {
        watches: &ws[..1],
        tip: Some(sha(4).as_ref()),
        ..Write::default()
    })
    .unwrap();
}

#[test]
fn another_writer_is_a_conflict_and_nothing_after_it_is_written() {
    let kube = KubeApiserver::start_with_namespaces(&[NS]);
    apply_crds(&kube);
    let ws: Vec<Watch> = watches().into_iter().map(|(_, w)| w).take(3).collect();
    let mut s = store(&kube);
    s.bind(REPO, "main").unwrap();
    s.write(Write {
        watches: &ws,
        tip: Some(sha(1).as_ref()),
        ..Write::default()
    })
    .unwrap();

    let third_before =
        get_json(&kube, &["watch", &object_of(&ws[2])])["metadata"]["resourceVersion"].clone();
    // The step that conflicts would change the third watch (an event of its own).
    let third_event = [event(1, EventKind::Reached, Some(&ws[2]))];
    // A Watch object changed by someone else (a second leader; here kubectl).
    kube.kubectl_ok(&[
        "annotate",
        "watch",
        &object_of(&ws[1]),
        "-n",
        NS,
        "someone=else",
    ]);
    let err = format!(
        "{:#}",
        s.write(Write {
            watches: &ws,
            events: &third_event,
            tip: Some(sha(2).as_ref()),
            ..Write::default()
        })
        .unwrap_err()
    );
    assert!(
        err.contains(&format!(
            "another writer changed watches.greenlight.dev gl/{}",
            object_of(&ws[1])
        )) && err.contains("is a second greenlight leading? this replica stops"),
        "{err}"
    );
    // Nothing after the conflict: not the next watch, not the tip.
    assert_eq!(dog(&kube)["state"]["tip"], sha(1).to_string());
    assert_eq!(
        get_json(&kube, &["watch", &object_of(&ws[2])])["metadata"]["resourceVersion"],
        third_before,
        "the watch after the conflict was not written"
    );

    // The Watchdog changed by someone else.
    let mut s = store(&kube);
    s.load_resume(None).unwrap();
    kube.kubectl_ok(&[
        "patch",
        "watchdog",
        "greenlight",
        "-n",
        NS,
        "--type=merge",
        "-p",
        r#"{"state":{"baseline":"changed"}}"#,
    ]);
    let err = format!(
        "{:#}",
        s.write(Write {
            tip: Some(sha(3).as_ref()),
            ..Write::default()
        })
        .unwrap_err()
    );
    assert!(
        err.contains("another writer changed watchdogs.greenlight.dev gl/greenlight"),
        "{err}"
    );
    assert_eq!(dog(&kube)["state"]["tip"], sha(1).to_string());

    // What a hand (or a newer build) left that does not read: a memory entry is left out
    // (an idle app: no baseline; an arrived commit: what came before it), a watch's body is an
    // error naming its object.
    kube.kubectl_ok(&[
        "patch",
        "watchdog",
        "greenlight",
        "-n",
        NS,
        "--type=merge",
        "-p",
        &serde_json::json!({"memory": {
            "idle": serde_json::json!({
                "argocd/web": [idle('a', Health::Healthy)],
                "argocd/broken": "not observations",
            }).to_string(),
            "arrived": serde_json::json!([arrived(1), "broken", arrived(2), arrived(3)]).to_string(),
        }})
        .to_string(),
    ]);
    let r = store(&kube).load_resume(None).unwrap();
    assert_eq!(r.idle, vec![(key("web"), vec![idle('a', Health::Healthy)])]);
    assert_eq!(r.arrived, vec![arrived(2), arrived(3)]);
    kube.kubectl_ok(&[
        "patch",
        "watch",
        &object_of(&ws[0]),
        "-n",
        NS,
        "--type=merge",
        "-p",
        r#"{"record":{"body":"not json"}}"#,
    ]);
    let err = format!("{:#}", store(&kube).load_resume(None).err().unwrap());
    assert!(
        err.contains(&format!(
            "watches.greenlight.dev gl/{} cannot be read",
            object_of(&ws[0])
        )),
        "{err}"
    );
    kube.kubectl_ok(&["delete", "watch", &object_of(&ws[0]), "-n", NS]);

    // A watch this store did not know exists already: another writer created it.
    let mut fresh = store(&kube);
    let err = format!(
        "{:#}",
        fresh
            .write(Write {
                watches: &ws[1..2],
                ..Write::default()
            })
            .unwrap_err()
    );
    assert!(
        err.contains("another writer changed") && err.contains("did not know"),
        "{err}"
    );
}

/// A ServiceAccount `sa` in NS with a Role of `rules` (verbs, resource), and a kubeconfig for it.
fn service_account(kube: &KubeApiserver, sa: &str, rules: &[(&str, &str)]) -> std::path::PathBuf {
    kube.kubectl_ok(&["create", "serviceaccount", sa, "-n", NS]);
    for (i, (verbs, resource)) in rules.iter().enumerate() {
        let role = format!("{sa}-{i}");
        kube.kubectl_ok(&[
            "create",
            "role",
            &role,
            "-n",
            NS,
            &format!("--verb={verbs}"),
            &format!("--resource={resource}"),
        ]);
        kube.kubectl_ok(&[
            "create",
            "rolebinding",
            &role,
            "-n",
            NS,
            &format!("--role={role}"),
            &format!("--serviceaccount={NS}:{sa}"),
        ]);
    }
    let token = kube.create_token(NS, sa);
    let path = kube.dir().join(format!("{sa}.kubeconfig"));
    kube.write_token_kubeconfig(&path, &token, NS);
    path
}

#[test]
fn a_step_writes_the_breaker_first_and_the_tip_last() {
    let kube = KubeApiserver::start_with_namespaces(&[NS]);
    apply_crds(&kube);
    // May write the Watchdog, and only read Watch objects.
    let config = service_account(
        &kube,
        "no-watches",
        &[
            ("get,list,create,update,patch", "watchdogs.greenlight.dev"),
            ("get,list", "watches.greenlight.dev"),
        ],
    );
    let mut s = KubeStore::connect(Some(&config), None, "greenlight").unwrap();
    assert_eq!(s.namespace(), NS, "the kubeconfig's namespace");
    s.bind(REPO, "main").unwrap();
    s.write(Write {
        tip: Some(sha(1).as_ref()),
        ..Write::default()
    })
    .unwrap();
    let ws: Vec<Watch> = watches().into_iter().map(|(_, w)| w).take(1).collect();
    let counted = Breaker {
        open: false,
        consecutive_reverts: 1,
        reverts: vec![CountedRevert {
            commit: ws[0].commit.clone(),
            revert: sha(9),
            apps: ["web".to_string()].into(),
        }],
    };
    let err = format!(
        "{:#}",
        s.write(Write {
            watches: &ws,
            breaker: Some(&counted),
            tip: Some(sha(2).as_ref()),
            ..Write::default()
        })
        .unwrap_err()
    );
    assert!(
        err.contains("the service account may not create watches.greenlight.dev in namespace gl")
            && err.contains("RBAC"),
        "{err}"
    );
    // (1) happened: the breaker counts the revert (it errs closed); (2) failed; (3) never ran.
    let d = dog(&kube);
    assert_eq!(d["state"]["consecutiveReverts"], 1);
    assert_eq!(d["state"]["tip"], sha(1).to_string());
    assert!(
        kube.kubectl_ok(&["get", "watches", "-n", NS, "-o", "name"])
            .trim()
            .is_empty()
    );
    assert_eq!(store(&kube).load().unwrap().breaker, counted);
}

#[test]
fn a_missing_crd_and_a_missing_store_are_named() {
    let kube = KubeApiserver::start_with_namespaces(&[NS]);
    let mut s = store(&kube);
    let err = format!("{:#}", s.load().err().unwrap());
    assert!(
        err.contains("the CRD watchdogs.greenlight.dev is not installed")
            && err.contains("deploy/helm/greenlight/crds/"),
        "{err}"
    );
    apply_crds(&kube);
    let err = format!("{:#}", s.require_existing().unwrap_err());
    assert!(
        err.contains("watchdogs.greenlight.dev gl/greenlight does not exist"),
        "{err}"
    );
    let err = format!("{:#}", s.request_breaker_reset(1).unwrap_err());
    assert!(err.contains("does not exist"), "{err}");
    // The runtime calls the store from inside its tokio runtime (here one with a single
    // thread, the strictest): requests run on the store's own, and it drops there too.
    let inside = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let loaded = inside.block_on(async {
        let mut s = store(&kube);
        s.bind(REPO, "main").unwrap();
        s.write(Write {
            tip: Some(sha(1).as_ref()),
            ..Write::default()
        })
        .unwrap();
        let loaded = s.load().unwrap();
        drop(s);
        loaded
    });
    assert_eq!(loaded.tip, Some(sha(1).to_string()));
    let bad = KubeStore::connect(Some(kube.kubeconfig()), Some(NS), "Not_A_Name");
    assert!(bad.is_err());
    let missing = KubeStore::connect(Some(Path::new("/nonexistent/kubeconfig")), None, "x");
    let err = format!("{:#}", missing.err().unwrap());
    assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
}

/// docs/state.md's Role is what the leader needs: a ServiceAccount bound to it alone binds,
/// writes a step of every part, resumes, prunes, and a reset request is applied.
#[test]
fn the_documented_role_is_enough_for_the_leader() {
    let kube = KubeApiserver::start_with_namespaces(&[NS]);
    apply_crds(&kube);
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/state.md"))
        .unwrap();
    let role = doc
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap();
    assert!(role.contains("kind: Role"), "{role}");
    kube.kubectl_stdin(&["apply", "-n", NS], role);
    kube.kubectl_ok(&["create", "serviceaccount", "leader", "-n", NS]);
    kube.kubectl_ok(&[
        "create",
        "rolebinding",
        "leader",
        "-n",
        NS,
        "--role=greenlight-store",
        &format!("--serviceaccount={NS}:leader"),
    ]);
    let token = kube.create_token(NS, "leader");
    let config = kube.dir().join("leader.kubeconfig");
    kube.write_token_kubeconfig(&config, &token, NS);

    let mut s = KubeStore::connect(Some(&config), None, "greenlight").unwrap();
    s.bind(REPO, "main").unwrap();
    let ws: Vec<Watch> = watches().into_iter().map(|(_, w)| w).collect();
    let events = [
        event(1, EventKind::WatchStarted, Some(&ws[0])),
        event(1_000, EventKind::BreakerOpened, None),
    ];
    s.prune_due(Timestamp(1_796_205_668_000), 1).unwrap();
    s.load_resume(None).unwrap();
    s.write(Write {
        watches: &ws,
        breaker: Some(&Breaker::default()),
        events: &events,
        tip: Some(sha(1).as_ref()),
        baseline: Some(sha(1).as_ref()),
        idle: &[(key("web"), vec![idle('a', Health::Healthy)])],
        arrived: &[arrived(1)],
        ..Write::default()
    })
    .unwrap();
    store(&kube).request_breaker_reset(7).unwrap();
    assert!(s.breaker_reset_requested().unwrap());
    s.write(Write {
        breaker: Some(&Breaker::default()),
        clear_breaker_reset_request: true,
        ..Write::default()
    })
    .unwrap();
    let r = s.load_resume(None).unwrap();
    assert_eq!(r.live.len(), ws.iter().filter(|w| is_live(w)).count());
    let pruned = s
        .prune_due(
            Timestamp(1_796_205_668_000 + greenlight_core::record::WINDOW_MS + 3_600_000),
            3_600_000,
        )
        .unwrap()
        .unwrap();
    assert!(pruned.watches > 0 && pruned.events > 0, "{pruned:?}");
}

/// A watch's tape in its Watch object (`docs/why.md#stores`): written with the watch; a step
/// that changed nothing in the watch waits for its next write (no request of its own); a
/// restart resumes the recording where the object's tape ends; read back, replayed to the
/// watch, and carried by `state export` into a state file.
#[test]
fn a_watchs_tape_lives_in_its_object_and_moves_with_an_export() {
    use greenlight_core::commit::CommitInfo;
    use greenlight_core::judge::{Ancestry, Engine, JudgeConfig};
    use greenlight_core::tape::Step;
    let kube = KubeApiserver::start_with_namespaces(&[NS]);
    apply_crds(&kube);
    let mut s = store(&kube);
    s.bind(REPO, "main").unwrap();
    let mut config = JudgeConfig::new(REPO, "main", true);
    config.stable_for_ms = 2_000;
    let mut engine = Engine::new(config.clone());
    let commit = CommitInfo {
        sha: sha(7),
        parents: vec![sha(6)],
        subject: "web: 1.1.0".into(),
        message: "web: 1.1.0\n\nNav-Watchdog: app=web deadline=5 mode=arm\n".into(),
        changed_paths: vec!["apps/web/deploy.yaml".to_string()].into(),
        mainline: None,
    };
    let flush = |engine: &mut Engine, s: &mut KubeStore| {
        let (watches, _) = engine.take_dirty();
        let tapes = engine.take_tapes();
        s.write(Write {
            watches: &watches,
            tapes: &tapes,
            ..Write::default()
        })
        .unwrap();
    };
    let tape_in_object = |w: &str| -> Vec<Step> {
        let o = get_json(&kube, &["watch", w]);
        serde_json::from_str(o["tape"].as_str().unwrap()).unwrap()
    };
    engine.commit_arrived(&commit, &Ancestry::default(), Timestamp(1_000));
    flush(&mut engine, &mut s);
    let id = format!("{}:0", sha(7));
    let name = greenlight::store::kube::object_name(&id);
    assert_eq!(tape_in_object(&name).len(), 1);
    // A tick that decides nothing: the step waits for the watch's next write.
    engine.tick(Timestamp(2_000));
    flush(&mut engine, &mut s);
    assert_eq!(tape_in_object(&name).len(), 1, "written without its watch");

    // A restart: the step held in memory is lost (it changed nothing); the recording resumes
    // after the one step the object holds.
    drop(s);
    let mut s = store(&kube);
    let resume = s.load_resume(None).unwrap();
    assert_eq!(resume.tapes.len(), 1);
    assert_eq!(resume.tapes[0].1.count, 1);
    let mut engine = Engine::restore(config, resume.live, resume.breaker);
    engine.restore_tapes(resume.tapes);
    engine.resume(Timestamp(3_000));
    engine.tick(Timestamp(7_000));
    flush(&mut engine, &mut s);
    let tape = Store::tape(&mut s, &id).unwrap().1;
    assert_eq!(tape, tape_in_object(&name));
    assert_eq!(tape.len(), 3, "{tape:?}");
    assert!(matches!(tape[1], Step::Resumed { .. }), "{tape:?}");
    let replay = Engine::replay(&tape).unwrap();
    assert!(replay.diverged.is_none(), "{:?}", replay.diverged);
    assert_eq!(replay.watch.to_flat(), engine.watches()[0].to_flat());
    assert_eq!(replay.watch.state().as_str(), "INCONCLUSIVE");

    // Exported with its watch, imported into a state file.
    let doc = greenlight::store::export::export(&mut s).unwrap();
    assert_eq!(doc.tapes.get(&id), Some(&tape));
    let dir = tempfile::tempdir().unwrap();
    let mut file =
        greenlight::store::SqliteStore::open_or_create(&dir.path().join("s.db")).unwrap();
    greenlight::store::export::import(&doc, &mut file).unwrap();
    assert_eq!(Store::tape(&mut file, &id).unwrap().1, tape);
}
