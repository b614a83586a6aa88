//! A watch's body in the state file: existing users' files hold this JSON, so reading it back
//! must keep working and writing it must keep its shape. `fixtures/watch_bodies.json` holds one
//! body per state and verdict (and per cause of each), as greenlight wrote them when this test
//! was added: the judge was driven into each and the watch serialized as the store did then.

mod support;

use greenlight_core::breaker::Breaker;
use greenlight_core::commit::CommitId;
use greenlight_core::judge::{Effect, Engine, RevertOutcome, State, Watch};
use greenlight_core::reason::{
    ArmBlocked, Failure, Inconclusive, Landed, NoRevert, NotReached, Reason, Unwatchable, Verdict,
};
use greenlight_core::snapshot::Health;
use greenlight_core::watch::{FlatWatch, Phase, Streak};
use support::*;

struct Body {
    label: String,
    body: String,
}

fn bodies() -> Vec<Body> {
    let text = include_str!("fixtures/watch_bodies.json");
    let v: Vec<serde_json::Value> = serde_json::from_str(text).expect("fixture is JSON");
    v.into_iter()
        .map(|x| Body {
            label: x["label"].as_str().expect("label").to_string(),
            body: x["body"].as_str().expect("body").to_string(),
        })
        .collect()
}

fn body(label: &str) -> String {
    bodies()
        .into_iter()
        .find(|b| b.label == label)
        .unwrap_or_else(|| panic!("no fixture {label}"))
        .body
}

fn flat(body: &str) -> FlatWatch {
    serde_json::from_str(body).expect("a recorded body is a flat watch")
}

fn watch(label: &str) -> Watch {
    Watch::from_flat(flat(&body(label))).expect("a recorded body reads back")
}

// ------------------------------------------------------------------- reading old bodies

#[test]
fn every_recorded_body_reads_back_and_writes_out_byte_for_byte() {
    let bodies = bodies();
    assert_eq!(bodies.len(), 30);
    for b in &bodies {
        let f = flat(&b.body);
        assert_eq!(serde_json::to_string(&f).unwrap(), b.body, "{}", b.label);
    }
}

#[test]
fn every_recorded_body_becomes_a_typed_watch_and_writes_out_the_same_body() {
    for b in bodies() {
        let w = Watch::from_flat(flat(&b.body)).unwrap_or_else(|e| panic!("{}: {e}", b.label));
        assert_eq!(
            serde_json::to_string(&w.to_flat()).unwrap(),
            b.body,
            "{}",
            b.label
        );
        // Every reason greenlight writes today is read back as its own variant, not kept as
        // mere words.
        match w.reason() {
            Reason::Verdict(Verdict::Recorded { text, .. }) => {
                panic!("{}: not re-typed: {text}", b.label)
            }
            Reason::Reverting(Failure::Recorded(text)) => {
                panic!("{}: not re-typed: {text}", b.label)
            }
            _ => {}
        }
        if let Some(ArmBlocked::Recorded(text)) = w.arm_blocked() {
            panic!("{}: arm_blocked not re-typed: {text}", b.label);
        }
    }
}

#[test]
fn the_recorded_bodies_cover_every_state() {
    let states: std::collections::HashSet<State> =
        bodies().iter().map(|b| flat(&b.body).state).collect();
    assert_eq!(states.len(), 9, "{states:?}");
}

#[test]
fn each_recorded_body_reads_back_in_its_phase_with_its_typed_reason() {
    let verdict = |label: &str| watch(label).verdict().cloned().expect(label);
    assert!(
        matches!(watch("waiting_reach").phase(), Phase::WaitingReach(w) if w.absent_since.is_none())
    );
    assert!(
        matches!(watch("waiting_reach_app_absent").phase(), Phase::WaitingReach(w) if w.absent_since.is_some())
    );
    assert!(
        matches!(watch("judging_sync_failed").phase(), Phase::Judging(j) if j.reported_sync_failure && j.streak == Streak::NotUnderWay)
    );
    assert!(
        matches!(watch("judging_streak").phase(), Phase::Judging(j) if matches!(j.streak, Streak::UnderWay { .. }))
    );
    assert!(
        matches!(watch("judging_streak_past_deadline").phase(), Phase::Judging(j) if matches!(j.streak, Streak::UnderWayAtDeadline { .. }))
    );
    assert!(matches!(
        watch("fail_reverting").phase(),
        Phase::Reverting(r) if matches!(r.failure, Failure::NotHealthy { deadline_ms: 60_000, .. })
    ));
    assert_eq!(
        verdict("confirmed"),
        Verdict::Confirmed {
            stable_for_ms: 120_000,
            pauses: 0,
            left_out: Vec::new(),
            verified: None,
        }
    );
    let not_healthy = Failure::NotHealthy {
        deadline_ms: 60_000,
        why: "health=Degraded".into(),
    };
    for (label, not_reverted) in [
        ("fail_shadow", NoRevert::Shadow),
        ("fail_dry_run", NoRevert::DryRun),
        ("fail_breaker_open", NoRevert::BreakerOpen { after: 2 }),
        (
            "fail_arm_blocked",
            NoRevert::ArmBlocked(ArmBlocked::NothingUnderPaths {
                app: watch("fail_arm_blocked").app.clone(),
            }),
        ),
    ] {
        assert_eq!(
            verdict(label),
            Verdict::Failed {
                failure: not_healthy.clone(),
                not_reverted
            },
            "{label}"
        );
    }
    assert!(matches!(
        verdict("fail_streak_broke"),
        Verdict::Failed {
            failure: Failure::StreakBroke { .. },
            not_reverted: NoRevert::Shadow
        }
    ));
    assert_eq!(
        verdict("fail_suspended"),
        Verdict::Suspended {
            deadline_ms: 60_000
        }
    );
    assert!(
        matches!(verdict("fail_attribution"), Verdict::Attribution { culprits, .. } if culprits.len() == 2)
    );
    for (label, armed) in [
        ("reverted_by_human", true),
        ("fail_reverted_by_human", false),
    ] {
        assert!(
            matches!(verdict(label), Verdict::RevertedByHuman { armed: a, .. } if a == armed),
            "{label}"
        );
    }
    for (label, landed) in [
        ("reverted_pushed", Landed::Pushed),
        ("reverted_adopted", Landed::Adopted),
    ] {
        assert!(
            matches!(verdict(label), Verdict::Reverted { landed: l, ref failure, .. } if l == landed && *failure == not_healthy),
            "{label}"
        );
    }
    assert!(matches!(
        verdict("revert_failed"),
        Verdict::RevertFailed { .. }
    ));
    assert!(matches!(
        verdict("not_reached"),
        Verdict::NotReached(NotReached::NeverSynced { .. })
    ));
    assert!(matches!(
        verdict("not_reached_app_missing"),
        Verdict::NotReached(NotReached::AppMissing { .. })
    ));
    for (label, want) in [
        ("unwatchable_app_missing", "AppMissing"),
        ("unwatchable_not_from_repo", "NotFromRepo"),
        ("unwatchable_chart", "HelmChart"),
        ("unwatchable_oci", "NotGitRevision"),
        ("unwatchable_chart_version", "NotGitRevision"),
        ("unwatchable_target", "OtherBranch"),
    ] {
        let Verdict::Unwatchable(u) = verdict(label) else {
            panic!("{label}")
        };
        let got = match u {
            Unwatchable::AppMissing { .. } => "AppMissing",
            Unwatchable::NotFromRepo { .. } => "NotFromRepo",
            Unwatchable::HelmChart { .. } => "HelmChart",
            Unwatchable::NotGitRevision { .. } => "NotGitRevision",
            Unwatchable::OtherBranch { .. } => "OtherBranch",
            Unwatchable::SourceHydrator { .. } => "SourceHydrator",
            Unwatchable::AmbiguousApp { .. } => "AmbiguousApp",
            Unwatchable::MutableTag { .. } => "MutableTag",
        };
        assert_eq!(got, want, "{label}");
    }
    assert!(matches!(
        verdict("inconclusive_reach_never_observed"),
        Verdict::Inconclusive(Inconclusive::StaleAtDeadline {
            last_observed: None,
            ..
        })
    ));
    assert!(matches!(
        verdict("inconclusive_health_stale"),
        Verdict::Inconclusive(Inconclusive::StaleAtDeadline {
            last_observed: Some(_),
            ..
        })
    ));
    assert!(matches!(
        verdict("inconclusive_streak_stale"),
        Verdict::Inconclusive(Inconclusive::StreakWentStale { .. })
    ));
}

#[test]
fn a_pending_revert_read_from_an_old_body_is_issued_again_with_its_failure_as_reason() {
    let w = watch("fail_reverting");
    let mut engine = Engine::restore(config(), vec![w.clone()], Breaker::default());
    let out = engine.resume(t(100));
    let reverts: Vec<_> = out
        .iter()
        .filter_map(|e| match e {
            Effect::Revert(r) => Some(r.clone()),
            Effect::Emit(_) | Effect::Withdraw { .. } | Effect::Verify { .. } => None,
        })
        .collect();
    assert_eq!(reverts.len(), 1, "{out:?}");
    assert_eq!(reverts[0].commit, w.commit);
    assert_eq!(
        reverts[0].reason,
        "greenlight: not healthy within 60s after reach: health=Degraded (app web)"
    );
    let out = engine.revert_finished(
        &w.id,
        RevertOutcome::Pushed {
            revert: commit_id(77),
        },
        t(101),
    );
    assert_eq!(
        kinds(&out),
        vec![greenlight_core::event::EventKind::RevertPushed]
    );
    let w = &engine.watches()[0];
    assert_eq!(w.state(), State::Reverted);
    assert_eq!(
        w.reason().to_string(),
        format!(
            "not healthy within 60s after reach: health=Degraded; reverting; revert {} pushed",
            commit_id(77).short()
        )
    );
}

#[test]
fn words_no_variant_says_are_kept_as_recorded_and_written_back_unchanged() {
    // A reason in words this greenlight never wrote, for a verdict, a pending revert and an
    // arm downgrade: each displays and is written back exactly as recorded.
    let mut f = flat(&body("fail_shadow"));
    f.reason = "failed, in the words of an older greenlight".into();
    let w = Watch::from_flat(f.clone()).unwrap();
    assert!(matches!(
        w.verdict(),
        Some(Verdict::Recorded {
            state: State::Fail,
            ..
        })
    ));
    assert_eq!(w.reason().to_string(), f.reason);
    assert_eq!(w.to_flat(), f);

    let mut f = flat(&body("fail_reverting"));
    f.reason = "unhealthy, said differently; reverting".into();
    let w = Watch::from_flat(f.clone()).unwrap();
    assert_eq!(
        w.reverting(),
        Some(&Failure::Recorded("unhealthy, said differently".into()))
    );
    assert_eq!(w.to_flat(), f);

    let mut f = flat(&body("fail_arm_blocked"));
    let old = f.arm_blocked.clone().unwrap();
    f.arm_blocked = Some("arm is off for this one".into());
    f.reason = f.reason.replace(&old, "arm is off for this one");
    let w = Watch::from_flat(f.clone()).unwrap();
    assert_eq!(
        w.arm_blocked(),
        Some(&ArmBlocked::Recorded("arm is off for this one".into()))
    );
    assert!(matches!(
        w.verdict(),
        Some(Verdict::Failed {
            not_reverted: NoRevert::ArmBlocked(ArmBlocked::Recorded(_)),
            ..
        })
    ));
    assert_eq!(w.to_flat(), f);

    // The right words naming a revert commit the record does not hold stay words.
    let mut f = flat(&body("reverted_pushed"));
    f.revert_commit = Some(commit_id(4242));
    let w = Watch::from_flat(f.clone()).unwrap();
    assert!(matches!(w.verdict(), Some(Verdict::Recorded { .. })));
    assert_eq!(w.revert_commit(), Some(&commit_id(4242)));
    assert_eq!(w.to_flat(), f);
}

#[test]
fn a_record_that_contradicts_its_state_is_refused_with_the_contradiction_named() {
    type Spoil = Box<dyn Fn(&mut FlatWatch)>;
    let cases: Vec<(&str, Spoil, &str)> = vec![
        ("judging_streak", Box::new(|f| f.reach = None), "reach"),
        (
            "waiting_reach",
            Box::new(|f| f.state = State::Judging),
            "JUDGING",
        ),
        (
            "confirmed",
            Box::new(|f| f.revert_pending = true),
            "revert pending",
        ),
        (
            "fail_reverting",
            Box::new(|f| f.finished_at = None),
            "finished_at",
        ),
        (
            "waiting_reach",
            Box::new(|f| f.deadline_passed = true),
            "never reached",
        ),
        (
            "waiting_reach",
            Box::new(|f| f.finished_at = Some(t(1))),
            "live",
        ),
    ];
    for (label, spoil, needle) in cases {
        let mut f = flat(&body(label));
        spoil(&mut f);
        let err = Watch::from_flat(f).expect_err(label).to_string();
        assert!(err.contains(needle), "{label}: {err}");
        assert!(
            err.contains(&flat(&body(label)).id),
            "{label}: names the watch: {err}"
        );
    }
    // A commit id that is not one is refused while reading the JSON.
    let bad = body("waiting_reach").replace(
        "\"commit\":\"0000000100000000000000009e3779b97f4a7c15\"",
        "\"commit\":\"main\"",
    );
    assert!(serde_json::from_str::<FlatWatch>(&bad).is_err());
}

// ----------------------------------------------------- watches of every phase, round trip

fn start(h: &mut Harness, n: u64, fields: &str) -> CommitId {
    let c = watched(n, "web", fields);
    h.arrive(&c, t(0));
    c.sha
}

fn reach(h: &mut Harness, w: &CommitId, at: i64, health: Health) -> Snap {
    let r = sha(7000 + at as u64);
    h.ancestor(w, &r);
    let s = Snap::new("web").deployed(&r).health(health);
    h.observe(&s, t(at));
    s
}

/// A streak under way when the health deadline (reach at 10 + 60) passes.
fn streak_at_deadline(h: &mut Harness, w: &CommitId) -> Snap {
    let s = reach(h, w, 10, Health::Progressing);
    h.observe(&s.clone().health(Health::Healthy), t(40));
    h.observe(&s.clone().health(Health::Healthy), t(60));
    h.tick(t(70));
    s
}

/// Watches the judge itself brought into every phase and verdict.
fn watches_in_every_phase() -> Vec<(&'static str, Watch)> {
    let mut out = Vec::new();
    let mut keep = |label: &'static str, h: &Harness, w: &CommitId| {
        out.push((label, h.watch(w).clone()));
    };

    let mut h = Harness::new(config());
    let w = start(&mut h, 1, "deadline=60");
    keep("waiting", &h, &w);
    h.absent("web", t(5));
    keep("waiting, app absent", &h, &w);

    let mut h = Harness::new(config());
    let w = start(&mut h, 2, "deadline=600 mode=arm");
    let s = reach(&mut h, &w, 10, Health::Degraded);
    keep("judging, no streak", &h, &w);
    h.observe(&s.clone().health(Health::Healthy), t(20));
    keep("judging, streak", &h, &w);
    h.absent("web", t(30));
    keep("judging, app absent", &h, &w);

    let mut h = Harness::new(config());
    let w = start(&mut h, 3, "deadline=60 mode=arm");
    let s = streak_at_deadline(&mut h, &w);
    keep("judging, streak at the deadline", &h, &w);
    h.observe(&s.clone().health(Health::Degraded), t(75));
    keep("streak broke after the deadline: reverting", &h, &w);
    let id = h.watch(&w).id.clone();
    h.finish_revert(
        &id,
        RevertOutcome::Failed {
            message: "conflict: x".into(),
        },
        t(80),
    );
    keep("revert failed", &h, &w);

    for (n, outcome, label) in [
        (4, None, "reverting"),
        (
            5,
            Some(RevertOutcome::Pushed {
                revert: commit_id(900),
            }),
            "reverted, pushed",
        ),
        (
            6,
            Some(RevertOutcome::Adopted {
                revert: commit_id(901),
            }),
            "reverted, adopted",
        ),
    ] {
        let mut h = Harness::new(config());
        let w = start(&mut h, n, "deadline=60 mode=arm");
        let s = reach(&mut h, &w, 10, Health::Degraded);
        h.observe_every(&s, 20, 70, 10);
        if let Some(o) = outcome {
            let id = h.watch(&w).id.clone();
            h.finish_revert(&id, o, t(80));
        }
        keep(label, &h, &w);
    }

    let mut h = Harness::new(config());
    let w = start(&mut h, 7, "deadline=600");
    let s = reach(&mut h, &w, 10, Health::Healthy);
    h.observe_every(&s, 20, 130, 10);
    keep("confirmed", &h, &w);

    let mut h = Harness::with_engine(Engine::restore(
        config(),
        Vec::new(),
        Breaker {
            open: true,
            consecutive_reverts: 2,
            reverts: Vec::new(),
        },
    ));
    let w = start(&mut h, 8, "deadline=60 mode=arm");
    let s = reach(&mut h, &w, 10, Health::Suspended);
    h.observe_every(&s, 20, 70, 10);
    keep("fail, suspended", &h, &w);

    let mut h = Harness::new(config());
    let w = start(&mut h, 9, "deadline=600 mode=arm");
    h.arrive(&plain(90, &["apps/web/other.yaml"]), t(3));
    h.observe(&Snap::new("web"), t(5));
    keep("fail, attribution", &h, &w);

    let mut h = Harness::new(config());
    let w = start(&mut h, 10, "deadline=600 mode=arm");
    let msg = format!("Revert \"change web\"\n\nThis reverts commit {w}.\n");
    h.arrive(&commit(100, &msg, &["apps/web/deploy.yaml"]), t(20));
    keep("reverted by a human", &h, &w);

    let mut h = Harness::new(config());
    let w = start(&mut h, 11, "deadline=60");
    h.observe_every(&Snap::new("web").sync("OutOfSync"), 10, 60, 10);
    keep("not reached", &h, &w);

    let mut h = Harness::new(config());
    let w = start(&mut h, 12, "deadline=600");
    h.observe(&Snap::new("web").target_revision("release-1"), t(5));
    keep("unwatchable", &h, &w);

    let mut h = Harness::new(config());
    let w = start(&mut h, 13, "deadline=60");
    streak_at_deadline(&mut h, &w);
    h.tick(t(100));
    keep("inconclusive", &h, &w);
    out
}

#[test]
fn watches_in_every_phase_read_back_from_the_store_text_as_written() {
    let watches = watches_in_every_phase();
    let mut phases = std::collections::BTreeSet::new();
    for (label, w) in &watches {
        phases.insert(match w.phase() {
            Phase::WaitingReach(_) => "waiting",
            Phase::Judging(_) => "judging",
            Phase::Reverting(_) => "reverting",
            Phase::Finished(_) => "finished",
        });
        let text = serde_json::to_string(&w.to_flat()).unwrap();
        let back = Watch::from_flat(serde_json::from_str::<FlatWatch>(&text).unwrap())
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(&back, w, "{label}");
    }
    assert_eq!(phases.len(), 4, "{phases:?}");
    let states: std::collections::HashSet<State> = watches.iter().map(|(_, w)| w.state()).collect();
    assert_eq!(states.len(), 9, "{states:?}");
}

#[test]
fn a_streak_that_broke_after_the_deadline_reads_back_and_fails_at_once() {
    // Never written at the end of a step (the FAIL comes in the same step), but the flat shape
    // can say it: it reads back as the broken streak, and the next step fails it as then.
    let mut f = flat(&body("judging_streak_past_deadline"));
    f.healthy_since = None;
    let w = Watch::from_flat(f.clone()).unwrap();
    assert!(matches!(w.phase(), Phase::Judging(j) if j.streak == Streak::BrokeAfterDeadline));
    assert_eq!(w.to_flat(), f);
    let mut h = Harness::with_engine(Engine::restore(
        config(),
        vec![w.clone()],
        Breaker::default(),
    ));
    h.tick(t(75));
    assert_eq!(h.state(&w.commit), State::Fail);
    assert!(
        h.reason(&w.commit)
            .starts_with("the healthy streak under way at the deadline broke: "),
        "{}",
        h.reason(&w.commit)
    );
}
