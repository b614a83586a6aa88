//! One test (or a table) per rule of Argo Rollouts' analysis as docs/analysis.md states it:
//! one measurement, the counters, the schedule, a metric's phase, a spec's validation, the run,
//! worst-case durations and arguments. Written from the stated rules, not from the code; time
//! is explicit milliseconds.

use greenlight_core::time::Timestamp;
use greenlight_gate::analysis::{
    Analysis, ArgError, Assessment, Count, Measurement, MeasurementPhase as M, MetricProblem,
    MetricResult, MetricSpec, Phase, ProviderValue, Refused, Run, RunSpec, SpecError, Summary,
    WorstCase, measure, substitute_args,
};
use greenlight_gate::analysis::{ERROR_RETRY_MS, Expression};
use std::collections::BTreeMap;

const NAN: f64 = f64::NAN;

fn t(ms: i64) -> Timestamp {
    Timestamp(ms)
}

fn cond(src: &str) -> Expression {
    Expression::parse(src).unwrap()
}

fn scalar(f: f64) -> ProviderValue {
    ProviderValue::Scalar(f)
}

fn vector(v: &[f64]) -> ProviderValue {
    ProviderValue::Vector(v.to_vec())
}

/// A metric whose measurements are steered by the value: 1 → Successful, 0 → Failed,
/// 0.5 → Inconclusive (neither condition holds), a provider error → Error.
fn steered(name: &str) -> MetricSpec {
    let mut s = MetricSpec::new(name);
    s.success_condition = Some("result > 0.9".into());
    s.failure_condition = Some("result < 0.1".into());
    s
}

fn value_for(outcome: char) -> ProviderValue {
    match outcome {
        'S' => scalar(1.0),
        'F' => scalar(0.0),
        'I' => scalar(0.5),
        'E' => ProviderValue::Error("connection refused".into()),
        _ => panic!("outcome {outcome}"),
    }
}

fn start(spec: &MetricSpec) -> MetricResult {
    MetricResult::start(spec.validate().unwrap(), t(0))
}

/// Take `outcomes` (S, F, I, E), each when it is due; stops at completion.
fn drive(spec: &MetricSpec, outcomes: &str) -> MetricResult {
    let mut r = start(spec);
    for o in outcomes.chars() {
        let due = r
            .next_due()
            .unwrap_or_else(|| panic!("{:?} is not due after {:?}", spec.name, r.counts()));
        r.observe(&value_for(o), due).unwrap();
    }
    r
}

fn counted(mut spec: MetricSpec, count: u32, interval_ms: i64) -> MetricSpec {
    spec.count = Some(count);
    spec.interval_ms = Some(interval_ms);
    spec
}

// ------------------------------------------------------------------------ one measurement

#[test]
fn neither_condition_set_is_successful() {
    for v in [scalar(0.0), scalar(NAN), vector(&[]), vector(&[5.0])] {
        assert_eq!(measure(&v, None, None).phase, M::Successful, "{v:?}");
    }
}

#[test]
fn only_success_set_is_failed_when_it_is_false() {
    let s = cond("result[0] >= 0.95");
    assert_eq!(
        measure(&vector(&[0.97]), Some(&s), None).phase,
        M::Successful
    );
    assert_eq!(measure(&vector(&[0.5]), Some(&s), None).phase, M::Failed);
    assert_eq!(measure(&vector(&[NAN]), Some(&s), None).phase, M::Failed);
}

#[test]
fn only_failure_set_is_successful_when_it_is_false() {
    let f = cond("result[0] >= 10");
    assert_eq!(
        measure(&vector(&[3.0]), None, Some(&f)).phase,
        M::Successful
    );
    assert_eq!(measure(&vector(&[12.0]), None, Some(&f)).phase, M::Failed);
}

#[test]
fn both_set_and_neither_true_is_inconclusive() {
    let (s, f) = (cond("result > 0.9"), cond("result < 0.1"));
    let m = measure(&scalar(0.5), Some(&s), Some(&f));
    assert_eq!(m.phase, M::Inconclusive);
    assert_eq!(
        m.message(),
        "successCondition \"result > 0.9\" is false and failureCondition \"result < 0.1\" is false"
    );
}

#[test]
fn both_set_and_only_success_true_is_successful() {
    let (s, f) = (cond("result > 0.9"), cond("result < 0.1"));
    assert_eq!(
        measure(&scalar(1.0), Some(&s), Some(&f)).phase,
        M::Successful
    );
}

#[test]
fn both_set_and_both_true_is_failed_the_failure_condition_wins() {
    let (s, f) = (cond("result > 0"), cond("result > 5"));
    let m = measure(&scalar(10.0), Some(&s), Some(&f));
    assert_eq!(m.phase, M::Failed);
    assert!(
        m.message().ends_with("the failureCondition wins"),
        "{}",
        m.message()
    );
}

#[test]
fn an_expression_error_is_an_error_measurement() {
    let s = cond("result[0] > 1");
    let m = measure(&scalar(2.0), Some(&s), None);
    assert_eq!(m.phase, M::Error);
    assert_eq!(m.value.as_deref(), Some("2"));
    assert!(
        m.message().starts_with(
            "could not evaluate successCondition \"result[0] > 1\": column 7: cannot index a number"
        ),
        "{}",
        m.message()
    );
}

#[test]
fn a_provider_error_is_an_error_measurement() {
    let s = cond("result[0] > 1");
    let m = measure(
        &ProviderValue::Error("timeout after 30s".into()),
        Some(&s),
        None,
    );
    assert_eq!(m.phase, M::Error);
    assert_eq!(m.value, None);
    assert_eq!(m.message(), "timeout after 30s");
    assert_eq!(Measurement::error("no provider").phase, M::Error);
}

#[test]
fn an_empty_result_a_condition_cannot_evaluate_says_nil_or_empty() {
    let s = cond("result[0] >= 0.95");
    let m = measure(&vector(&[]), Some(&s), None);
    assert_eq!(m.phase, M::Error);
    assert_eq!(
        m.message(),
        "could not evaluate successCondition \"result[0] >= 0.95\": metric result is nil or \
         empty: no data returned from the metric provider"
    );
}

#[test]
fn an_empty_result_is_evaluated_by_a_condition_that_guards_it() {
    let s = cond("len(result) > 0 && all(result, {# < 500})");
    assert_eq!(measure(&vector(&[]), Some(&s), None).phase, M::Failed);
    let f = cond("any(result, # > 100)");
    assert_eq!(measure(&vector(&[]), None, Some(&f)).phase, M::Successful);
}

#[test]
fn the_success_condition_is_evaluated_first() {
    // Success cannot evaluate; failure would hold. The error wins and names successCondition.
    let (s, f) = (cond("result[3] > 1"), cond("result[0] > 1"));
    let m = measure(&vector(&[5.0]), Some(&s), Some(&f));
    assert_eq!(m.phase, M::Error);
    assert!(m.message().contains("successCondition"), "{}", m.message());
}

#[test]
fn a_measurement_records_the_value_as_argo_rollouts_writes_it() {
    let m = measure(&vector(&[0.97, NAN, f64::INFINITY, -1e-7]), None, None);
    assert_eq!(m.value.as_deref(), Some("[0.97,NaN,+Inf,-0.0000001]"));
    assert_eq!(
        measure(&scalar(1.5), None, None).value.as_deref(),
        Some("1.5")
    );
}

// --------------------------------------------------------------------------------- counters

#[test]
fn successful_failed_and_inconclusive_each_increment_count() {
    let r = drive(
        &counted(steered("x"), 10, 1000)
            .tap(|s| s.failure_limit = 5)
            .tap(|s| s.inconclusive_limit = 5),
        "SFIS",
    );
    let c = r.counts();
    assert_eq!(
        (c.count, c.successful, c.failed, c.inconclusive),
        (4, 2, 1, 1)
    );
}

#[test]
fn error_does_not_increment_count() {
    let r = drive(&counted(steered("x"), 10, 1000), "EESE");
    let c = r.counts();
    assert_eq!((c.count, c.error, c.successful), (1, 3, 1));
}

#[test]
fn error_increments_consecutive_error_and_any_other_measurement_resets_it() {
    let spec = counted(steered("x"), 10, 1000).tap(|s| {
        s.failure_limit = 5;
        s.inconclusive_limit = 5
    });
    for (outcomes, streak) in [("EE", 2), ("EES", 0), ("EEF", 0), ("EEI", 0), ("EESE", 1)] {
        assert_eq!(
            drive(&spec, outcomes).counts().consecutive_error,
            streak,
            "{outcomes}"
        );
    }
}

#[test]
fn a_success_streak_is_ended_by_any_other_measurement_an_error_too() {
    let spec = counted(steered("x"), 20, 1000).tap(|s| {
        s.failure_limit = 5;
        s.inconclusive_limit = 5
    });
    for (outcomes, streak) in [("SS", 2), ("SSF", 0), ("SSI", 0), ("SSE", 0), ("SSES", 1)] {
        assert_eq!(
            drive(&spec, outcomes).counts().consecutive_success,
            streak,
            "{outcomes}"
        );
    }
}

// --------------------------------------------------------------------------------- schedule

#[test]
fn the_first_measurement_is_due_after_the_initial_delay_from_the_run_start() {
    let mut spec = steered("x");
    spec.initial_delay_ms = 30_000;
    let r = MetricResult::start(spec.validate().unwrap(), t(5_000));
    assert_eq!(r.next_due(), Some(t(35_000)));
    assert_eq!(
        start(&steered("y")).next_due(),
        Some(t(0)),
        "no delay: at once"
    );
}

#[test]
fn later_measurements_are_due_one_interval_after_the_last() {
    let mut r = start(&counted(steered("x"), 3, 60_000));
    r.observe(&scalar(1.0), t(2_500)).unwrap();
    assert_eq!(r.next_due(), Some(t(62_500)));
}

#[test]
fn after_an_error_the_next_measurement_waits_ten_seconds() {
    assert_eq!(ERROR_RETRY_MS, 10_000);
    // With an interval…
    let mut r = start(&counted(steered("x"), 3, 60_000));
    r.observe(&value_for('E'), t(1_000)).unwrap();
    assert_eq!(r.next_due(), Some(t(11_000)));
    r.observe(&value_for('S'), t(11_000)).unwrap();
    assert_eq!(r.next_due(), Some(t(71_000)), "back to the interval");
    // …and a single measurement without one is retried too.
    let mut r = start(&steered("y"));
    r.observe(&value_for('E'), t(0)).unwrap();
    assert_eq!(r.phase(), Phase::Running);
    assert_eq!(r.next_due(), Some(t(10_000)));
    r.observe(&value_for('S'), t(10_000)).unwrap();
    assert_eq!(r.phase(), Phase::Successful);
}

#[test]
fn a_completed_metric_is_never_due_and_refuses_measurements() {
    let mut r = drive(&steered("x"), "S");
    assert_eq!(r.phase(), Phase::Successful);
    assert_eq!(r.next_due(), None);
    assert_eq!(
        r.observe(&scalar(0.0), t(99)),
        Err(Refused::Completed(Phase::Successful))
    );
    assert_eq!(r.counts().count, 1);
}

// ---------------------------------------------------------------------------- metric phase

#[test]
fn a_metric_is_pending_until_its_first_measurement_then_running() {
    let mut r = start(&counted(steered("x"), 3, 1000));
    assert_eq!(r.phase(), Phase::Pending);
    r.observe(&value_for('E'), t(0)).unwrap();
    assert_eq!(r.phase(), Phase::Running, "an Error is a measurement too");
}

#[test]
fn failed_above_the_failure_limit_is_failed() {
    // (failureLimit, outcomes, phase after them)
    let table = [
        (0, "F", Phase::Failed),
        (0, "SSF", Phase::Failed),
        (1, "F", Phase::Running),
        (1, "FSF", Phase::Failed),
        (2, "FFS", Phase::Running),
        (2, "FFSF", Phase::Failed),
    ];
    for (limit, outcomes, phase) in table {
        let spec = counted(steered("x"), 10, 1000).tap(|s| s.failure_limit = limit);
        let r = drive(&spec, outcomes);
        assert_eq!(r.phase(), phase, "failureLimit {limit}, {outcomes}");
    }
}

#[test]
fn failure_limit_minus_one_disables_it() {
    let spec = counted(steered("x"), 5, 1000).tap(|s| {
        s.failure_limit = -1;
        s.consecutive_success_limit = 2
    });
    let r = drive(&spec, "FFFF");
    assert_eq!(r.phase(), Phase::Running, "four failures, no limit");
}

#[test]
fn inconclusive_above_the_inconclusive_limit_is_inconclusive() {
    for (limit, outcomes, phase) in [
        (0, "I", Phase::Inconclusive),
        (1, "I", Phase::Running),
        (1, "ISI", Phase::Inconclusive),
    ] {
        let spec = counted(steered("x"), 10, 1000).tap(|s| s.inconclusive_limit = limit);
        assert_eq!(drive(&spec, outcomes).phase(), phase, "{limit} {outcomes}");
    }
}

#[test]
fn consecutive_errors_above_the_limit_is_error() {
    let spec = counted(steered("x"), 10, 1000);
    assert_eq!(
        drive(&spec, "EEEE").phase(),
        Phase::Running,
        "4 is the default limit"
    );
    assert_eq!(drive(&spec, "EEEEE").phase(), Phase::Error);
    assert_eq!(
        drive(&spec, "EEEESEEEE").phase(),
        Phase::Running,
        "a success resets the streak"
    );
    let zero = spec.clone().tap(|s| s.consecutive_error_limit = 0);
    assert_eq!(drive(&zero, "E").phase(), Phase::Error);
}

#[test]
fn consecutive_success_limit_reached_is_successful() {
    let spec = counted(steered("x"), 10, 1000).tap(|s| {
        s.consecutive_success_limit = 3;
        s.failure_limit = 5
    });
    assert_eq!(drive(&spec, "SSFSS").phase(), Phase::Running);
    let r = drive(&spec, "SSFSSS");
    assert_eq!(r.phase(), Phase::Successful);
    assert_eq!(
        r.assessment(),
        Some(&Assessment::ConsecutiveSuccessLimit {
            successes: 3,
            limit: 3
        })
    );
}

#[test]
fn count_reached_with_both_limits_applicable_is_inconclusive() {
    let spec = counted(steered("x"), 4, 1000).tap(|s| {
        s.consecutive_success_limit = 3;
        s.failure_limit = 2
    });
    let r = drive(&spec, "SSFS");
    assert_eq!(r.phase(), Phase::Inconclusive);
    assert_eq!(
        r.message().unwrap(),
        "Metric \"x\" assessed Inconclusive due to count (4) reached with consecutiveSuccesses \
         (1) < consecutiveSuccessLimit (3) and failed (1) <= failureLimit (2)"
    );
}

#[test]
fn count_reached_with_only_the_success_limit_applicable_is_failed() {
    let spec = counted(steered("x"), 4, 1000).tap(|s| {
        s.consecutive_success_limit = 3;
        s.failure_limit = -1
    });
    let r = drive(&spec, "SSFS");
    assert_eq!(r.phase(), Phase::Failed);
    assert_eq!(
        r.message().unwrap(),
        "Metric \"x\" assessed Failed due to count (4) reached with consecutiveSuccesses (1) < \
         consecutiveSuccessLimit (3)"
    );
}

#[test]
fn count_reached_otherwise_is_successful() {
    let spec = counted(steered("x"), 4, 1000).tap(|s| {
        s.failure_limit = 1;
        s.inconclusive_limit = 1
    });
    let r = drive(&spec, "SFIS");
    assert_eq!(r.phase(), Phase::Successful, "within both limits");
    assert_eq!(
        r.message().unwrap(),
        "Metric \"x\" assessed Successful due to count (4) reached"
    );
}

#[test]
fn indefinite_metrics_stay_running_and_end_successful_on_termination() {
    let mut spec = steered("x");
    spec.interval_ms = Some(1000);
    let mut r = drive(&spec, &"S".repeat(50));
    assert_eq!(r.metric().count(), Count::Indefinite);
    assert_eq!(r.phase(), Phase::Running);
    assert!(r.next_due().is_some());
    r.terminate();
    assert_eq!(r.phase(), Phase::Successful);
    assert_eq!(r.assessment(), Some(&Assessment::Terminated));
    assert_eq!(r.next_due(), None);
}

#[test]
fn count_is_one_without_an_interval_and_zero_means_unset() {
    let one = steered("x").validate().unwrap();
    assert_eq!(one.count(), Count::Times(1));
    let zero = steered("x").tap(|s| s.count = Some(0)).validate().unwrap();
    assert_eq!(zero.count(), Count::Times(1));
    let zero_with_interval = steered("x")
        .tap(|s| {
            s.count = Some(0);
            s.interval_ms = Some(1000)
        })
        .validate()
        .unwrap();
    assert_eq!(zero_with_interval.count(), Count::Indefinite);
}

#[test]
fn a_metric_message_is_argo_rollouts_sentence() {
    let r = drive(&steered("x"), "F");
    assert_eq!(
        r.message().unwrap(),
        "Metric \"x\" assessed Failed due to failed (1) > failureLimit (0)"
    );
    let r = drive(&steered("x"), "I");
    assert_eq!(
        r.message().unwrap(),
        "Metric \"x\" assessed Inconclusive due to inconclusive (1) > inconclusiveLimit (0)"
    );
    assert_eq!(drive(&counted(steered("x"), 3, 1000), "S").message(), None);
}

#[test]
fn an_error_ending_appends_the_last_error_message() {
    let r = drive(&steered("x"), "EEEEE");
    assert_eq!(
        r.message().unwrap(),
        "Metric \"x\" assessed Error due to consecutiveErrors (5) > consecutiveErrorLimit (4): \
         \"Error Message: connection refused\""
    );
}

// --------------------------------------------------------------------------- spec validation

fn refused(spec: &MetricSpec) -> MetricProblem {
    match spec.validate() {
        Ok(_) => panic!("{spec:?} validated"),
        Err(SpecError::Metric { problem, .. }) => problem,
        Err(other) => panic!("{other}"),
    }
}

#[test]
fn count_above_one_without_an_interval_is_a_spec_error() {
    let spec = steered("x").tap(|s| s.count = Some(3));
    assert_eq!(
        spec.validate().unwrap_err().to_string(),
        "metric \"x\": interval must be specified when count (3) > 1"
    );
}

#[test]
fn failure_limit_minus_one_needs_a_consecutive_success_limit() {
    let spec = steered("x").tap(|s| s.failure_limit = -1);
    assert_eq!(refused(&spec), MetricProblem::NoLimitApplies);
}

#[test]
fn limits_below_their_minimum_are_spec_errors() {
    type Edit = fn(&mut MetricSpec);
    let table: [(Edit, MetricProblem); 6] = [
        (
            |s| s.failure_limit = -2,
            MetricProblem::FailureLimitBelowMinusOne { limit: -2 },
        ),
        (
            |s| s.inconclusive_limit = -1,
            MetricProblem::NegativeLimit {
                field: "inconclusiveLimit",
                limit: -1,
            },
        ),
        (
            |s| s.consecutive_error_limit = -1,
            MetricProblem::NegativeLimit {
                field: "consecutiveErrorLimit",
                limit: -1,
            },
        ),
        (
            |s| s.consecutive_success_limit = -1,
            MetricProblem::NegativeLimit {
                field: "consecutiveSuccessLimit",
                limit: -1,
            },
        ),
        (
            |s| s.interval_ms = Some(0),
            MetricProblem::IntervalNotPositive { ms: 0 },
        ),
        (
            |s| s.initial_delay_ms = -5,
            MetricProblem::InitialDelayNegative { ms: -5 },
        ),
    ];
    for (edit, problem) in table {
        let mut spec = steered("x");
        edit(&mut spec);
        assert_eq!(refused(&spec), problem);
    }
    assert_eq!(
        MetricSpec::new("").validate().unwrap_err().to_string(),
        "a metric has no name"
    );
}

#[test]
fn a_count_below_a_limit_is_a_spec_error() {
    let spec = counted(steered("x"), 3, 1000).tap(|s| s.failure_limit = 4);
    assert_eq!(
        spec.validate().unwrap_err().to_string(),
        "metric \"x\": count (3) must be >= failureLimit (4)"
    );
    let spec = counted(steered("x"), 3, 1000).tap(|s| s.consecutive_success_limit = 4);
    assert!(matches!(
        refused(&spec),
        MetricProblem::CountBelowLimit {
            field: "consecutiveSuccessLimit",
            ..
        }
    ));
    let equal = counted(steered("x"), 3, 1000).tap(|s| s.failure_limit = 3);
    assert!(equal.validate().is_ok());
}

#[test]
fn a_condition_that_does_not_parse_is_a_spec_error_naming_the_column() {
    let spec = steered("x").tap(|s| s.success_condition = Some("result[0] >= ".into()));
    let e = spec.validate().unwrap_err().to_string();
    assert!(
        e.starts_with("metric \"x\": successCondition does not parse: column 14: expected a value"),
        "{e}"
    );
}

#[test]
fn a_condition_no_result_can_satisfy_is_a_spec_error() {
    for bad in [
        "result + 1",
        "len(1) > 0",
        "avg(result) > 1",
        "results[0] > 1",
    ] {
        let spec = steered("x").tap(|s| s.failure_condition = Some(bad.into()));
        assert!(
            matches!(
                refused(&spec),
                MetricProblem::ConditionNeverEvaluates { .. }
            ),
            "{bad}"
        );
    }
    // Right for one kind of result is right enough: the query decides which it gets.
    for fine in [
        "result == 1",
        "result[0] == 1",
        "len(result) > 0 && result[0] < 1",
    ] {
        let spec = steered("x").tap(|s| s.failure_condition = Some(fine.into()));
        assert!(spec.validate().is_ok(), "{fine}");
    }
}

#[test]
fn an_empty_condition_is_unset() {
    let spec = steered("x").tap(|s| {
        s.success_condition = Some(String::new());
        s.failure_condition = None
    });
    let m = spec.validate().unwrap();
    assert!(m.success_condition().is_none());
    assert_eq!(m.measure(&scalar(0.0)).phase, M::Successful);
}

#[test]
fn a_run_needs_metrics_with_unique_names() {
    assert_eq!(
        RunSpec::default().validate().unwrap_err(),
        SpecError::NoMetrics
    );
    let spec = RunSpec {
        metrics: vec![steered("a"), steered("a")],
        dry_run: vec![],
    };
    assert_eq!(
        spec.validate().unwrap_err().to_string(),
        "two metrics are named \"a\""
    );
}

#[test]
fn a_dry_run_rule_must_match_a_metric_and_be_given_once() {
    let spec = RunSpec {
        metrics: vec![steered("latency")],
        dry_run: vec!["latncy".into()],
    };
    assert_eq!(
        spec.validate().unwrap_err().to_string(),
        "dryRun rule \"latncy\" matches no metric"
    );
    let spec = RunSpec {
        metrics: vec![steered("latency")],
        dry_run: vec!["latency".into(), "latency".into()],
    };
    assert_eq!(
        spec.validate().unwrap_err(),
        SpecError::DuplicateDryRunRule {
            rule: "latency".into()
        }
    );
}

// ------------------------------------------------------------------------------------ run

fn run_of(specs: Vec<MetricSpec>, dry_run: &[&str]) -> Run {
    let analysis = RunSpec {
        metrics: specs,
        dry_run: dry_run.iter().map(|s| s.to_string()).collect(),
    }
    .validate()
    .unwrap();
    Run::start(analysis, t(0))
}

#[test]
fn phases_order_successful_running_pending_inconclusive_error_failed() {
    use Phase::*;
    let order = [Successful, Running, Pending, Inconclusive, Error, Failed];
    for (i, a) in order.iter().enumerate() {
        for (j, b) in order.iter().enumerate() {
            assert_eq!(a.worst(*b), order[i.max(j)], "{a} vs {b}");
            assert_eq!(b.is_worse_than(*a), j > i);
        }
    }
}

#[test]
fn the_run_is_running_until_every_metric_has_completed() {
    let mut slow = counted(steered("slow"), 2, 60_000);
    slow.initial_delay_ms = 30_000;
    let mut run = run_of(vec![steered("fast"), slow], &[]);
    assert_eq!(run.phase(), Phase::Running);
    run.observe("fast", &scalar(1.0), t(0)).unwrap();
    assert_eq!(run.result("fast").unwrap().phase(), Phase::Successful);
    assert_eq!(run.result("slow").unwrap().phase(), Phase::Pending);
    assert_eq!(run.phase(), Phase::Running, "slow has not started");
    run.observe("slow", &scalar(1.0), t(30_000)).unwrap();
    assert_eq!(run.phase(), Phase::Running);
    run.observe("slow", &scalar(1.0), t(90_000)).unwrap();
    assert_eq!(run.phase(), Phase::Successful);
    assert_eq!(run.next_due(), None);
}

#[test]
fn the_run_is_the_worst_of_its_completed_metrics() {
    // Metrics measured in one step can end the run together: the worst decides, in any order.
    for order in [["incon", "fails", "fine"], ["fine", "fails", "incon"]] {
        let specs = ["fine", "incon", "fails"].map(steered).to_vec();
        let mut run = run_of(specs, &[]);
        let value = |name: &str| match name {
            "fine" => scalar(1.0),
            "incon" => scalar(0.5),
            _ => scalar(0.0),
        };
        let batch: Vec<(&str, ProviderValue)> = order.iter().map(|n| (*n, value(n))).collect();
        run.observe_all(&batch, t(0)).unwrap();
        assert_eq!(run.phase(), Phase::Failed, "{order:?}");
        assert_eq!(
            run.message().as_deref(),
            Some("Metric \"fails\" assessed Failed due to failed (1) > failureLimit (0)")
        );
        assert_eq!(
            run.summary(),
            Summary {
                count: 3,
                successful: 1,
                failed: 1,
                inconclusive: 1,
                error: 0
            }
        );
    }
    // Inconclusive is worse than Successful.
    let mut run = run_of(vec![steered("a"), steered("b")], &[]);
    run.observe_all(&[("a", scalar(1.0)), ("b", scalar(0.5))], t(0))
        .unwrap();
    assert_eq!(run.phase(), Phase::Inconclusive);
}

#[test]
fn a_step_naming_a_metric_twice_or_an_unknown_one_records_nothing() {
    let mut run = run_of(vec![steered("a"), steered("b")], &[]);
    assert_eq!(
        run.observe_all(&[("a", scalar(1.0)), ("a", scalar(0.0))], t(0)),
        Err(Refused::Twice("a".into()))
    );
    assert_eq!(
        run.observe_all(&[("a", scalar(1.0)), ("c", scalar(0.0))], t(0)),
        Err(Refused::UnknownMetric("c".into()))
    );
    assert_eq!(run.result("a").unwrap().phase(), Phase::Pending);
}

#[test]
fn a_failed_error_or_inconclusive_metric_terminates_the_run_early() {
    for (outcomes, phase) in [
        ("F", Phase::Failed),
        ("EEEEE", Phase::Error),
        ("I", Phase::Inconclusive),
    ] {
        let long = counted(steered("long"), 10, 60_000);
        let mut run = run_of(vec![long, steered("bad")], &[]);
        run.observe("long", &scalar(1.0), t(0)).unwrap();
        let mut now = 0;
        for o in outcomes.chars() {
            run.observe("bad", &value_for(o), t(now)).unwrap();
            now += ERROR_RETRY_MS;
        }
        assert!(run.is_terminated(), "{outcomes}");
        assert_eq!(run.phase(), phase, "{outcomes}");
        assert_eq!(run.result("long").unwrap().phase(), Phase::Successful);
        assert_eq!(
            run.result("long").unwrap().assessment(),
            Some(&Assessment::Terminated)
        );
        assert_eq!(run.next_due(), None, "nothing more is measured");
        assert_eq!(
            run.record("long", Measurement::error("late"), t(now)),
            Err(Refused::Completed(Phase::Successful))
        );
    }
}

#[test]
fn dry_run_metrics_only_feed_the_dry_run_summary() {
    let mut run = run_of(vec![steered("gate"), steered("trial")], &["trial"]);
    assert!(run.is_dry_run("trial") && !run.is_dry_run("gate"));
    run.observe("trial", &scalar(0.0), t(0)).unwrap();
    assert_eq!(run.result("trial").unwrap().phase(), Phase::Failed);
    assert!(
        !run.is_terminated(),
        "a dry-run failure never stops the run"
    );
    assert_eq!(run.phase(), Phase::Running);
    run.observe("gate", &scalar(1.0), t(0)).unwrap();
    assert_eq!(run.phase(), Phase::Successful);
    assert_eq!(run.message(), None);
    assert_eq!(
        run.dry_run_summary(),
        Summary {
            count: 1,
            failed: 1,
            ..Summary::default()
        }
    );
    assert_eq!(
        run.summary(),
        Summary {
            count: 1,
            successful: 1,
            ..Summary::default()
        }
    );
}

#[test]
fn dry_run_names_take_a_star_wildcard() {
    let names = ["latency-p99", "latency-p50", "errors"];
    let specs = || names.iter().map(|n| steered(n)).collect::<Vec<_>>();
    for (rule, dry) in [
        ("*", vec![true, true, true]),
        ("latency-*", vec![true, true, false]),
        ("*-p99", vec![true, false, false]),
        ("l*y*9", vec![true, false, false]),
        ("errors", vec![false, false, true]),
    ] {
        let run = run_of(specs(), &[rule]);
        let got: Vec<bool> = names.iter().map(|n| run.is_dry_run(n)).collect();
        assert_eq!(got, dry, "{rule}");
    }
}

#[test]
fn a_run_of_only_dry_run_metrics_is_successful() {
    let mut run = run_of(vec![steered("a")], &["*"]);
    run.observe("a", &scalar(0.0), t(0)).unwrap();
    assert_eq!(run.phase(), Phase::Successful);
}

#[test]
fn next_due_is_the_earliest_over_all_metrics() {
    let mut a = counted(steered("a"), 3, 60_000);
    a.initial_delay_ms = 5_000;
    let b = counted(steered("b"), 3, 20_000);
    let mut run = run_of(vec![a, b], &[]);
    assert_eq!(run.next_due(), Some(t(0)));
    assert_eq!(run.due(t(0)), vec!["b"]);
    run.observe("b", &scalar(1.0), t(0)).unwrap();
    assert_eq!(run.next_due(), Some(t(5_000)));
    assert_eq!(run.due(t(4_999)), Vec::<&str>::new());
    run.observe("a", &value_for('E'), t(5_000)).unwrap();
    assert_eq!(
        run.next_due(),
        Some(t(15_000)),
        "a's error retry before b's interval"
    );
    assert_eq!(run.due(t(20_000)), vec!["a", "b"]);
}

#[test]
fn a_terminated_run_ends_its_unfinished_metrics_successful() {
    let mut indefinite = steered("bg");
    indefinite.interval_ms = Some(60_000);
    let mut run = run_of(vec![indefinite, counted(steered("c"), 5, 1000)], &[]);
    run.observe("bg", &scalar(1.0), t(0)).unwrap();
    run.terminate();
    assert_eq!(run.phase(), Phase::Successful);
    assert_eq!(
        run.result("c").unwrap().phase(),
        Phase::Successful,
        "never measured"
    );
    assert_eq!(run.next_due(), None);
}

#[test]
fn the_run_message_is_the_deciding_metric_sentence() {
    let mut run = run_of(vec![steered("ok"), steered("errors")], &[]);
    run.observe("errors", &scalar(0.0), t(0)).unwrap();
    assert_eq!(
        run.message().as_deref(),
        Some("Metric \"errors\" assessed Failed due to failed (1) > failureLimit (0)")
    );
}

#[test]
fn a_measurement_of_an_unknown_metric_is_refused() {
    let mut run = run_of(vec![steered("a")], &[]);
    assert_eq!(
        run.observe("b", &scalar(1.0), t(0)),
        Err(Refused::UnknownMetric("b".into()))
    );
}

// ---------------------------------------------------------------------- worst-case duration

fn worst(spec: &MetricSpec, attempt_ms: i64) -> WorstCase {
    spec.validate().unwrap().worst_case(attempt_ms)
}

#[test]
fn worst_case_is_the_delay_the_intervals_and_the_tolerated_error_retries() {
    // initialDelay + count × consecutiveErrorLimit × 10 s + (count − 1) × interval
    let table = [
        // (count, interval, initialDelay, consecutiveErrorLimit, ms)
        (None, None, 0, 4, 40_000),
        (None, None, 30_000, 0, 30_000),
        (Some(5), Some(60_000), 0, 0, 240_000),
        (
            Some(5),
            Some(60_000),
            10_000,
            4,
            10_000 + 5 * 40_000 + 240_000,
        ),
        (Some(3), Some(1_000), 0, 2, 3 * 20_000 + 2_000),
    ];
    for (count, interval, delay, errors, ms) in table {
        let mut spec = steered("x");
        spec.count = count;
        spec.interval_ms = interval;
        spec.initial_delay_ms = delay;
        spec.consecutive_error_limit = errors;
        assert_eq!(worst(&spec, 0), WorstCase::Bounded { ms }, "{spec:?}");
    }
}

#[test]
fn worst_case_counts_each_attempt_when_given_its_time() {
    // 2 counted attempts and 2 × 4 errored ones, 30 s each.
    let spec = counted(steered("x"), 2, 60_000);
    let ms = 2 * 4 * (30_000 + 10_000) + 2 * 30_000 + 60_000;
    assert_eq!(worst(&spec, 30_000), WorstCase::Bounded { ms });
    // The example of docs/analysis.md#worst-case.
    let mut spec = counted(steered("x"), 5, 60_000);
    spec.initial_delay_ms = 30_000;
    assert_eq!(worst(&spec, 30_000), WorstCase::Bounded { ms: 1_220_000 });
    assert_eq!(worst(&spec, 0), WorstCase::Bounded { ms: 470_000 });
}

#[test]
fn an_indefinite_metric_has_no_worst_case() {
    let spec = steered("x").tap(|s| s.interval_ms = Some(1000));
    assert_eq!(worst(&spec, 0), WorstCase::Indefinite);
    let analysis = RunSpec {
        metrics: vec![steered("a"), spec],
        dry_run: vec![],
    }
    .validate()
    .unwrap();
    assert_eq!(analysis.worst_case(0), WorstCase::Indefinite);
}

#[test]
fn a_runs_worst_case_is_its_longest_metric() {
    let analysis: Analysis = RunSpec {
        metrics: vec![steered("short"), counted(steered("long"), 3, 60_000)],
        dry_run: vec!["short".into()],
    }
    .validate()
    .unwrap();
    assert_eq!(
        analysis.worst_case(0),
        WorstCase::Bounded {
            ms: 3 * 40_000 + 120_000
        }
    );
}

/// xorshift64*, seeded: the same sequences every run.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

#[test]
fn the_worst_case_is_reached_by_the_worst_sequence_and_never_exceeded() {
    let attempt = 3_000;
    let mut spec = counted(steered("x"), 4, 20_000);
    spec.initial_delay_ms = 5_000;
    spec.consecutive_error_limit = 2;
    spec.failure_limit = 4;
    spec.inconclusive_limit = 4;
    let WorstCase::Bounded { ms: bound } = worst(&spec, attempt) else {
        panic!("bounded");
    };
    // Each measurement starts when due and is recorded `attempt` later.
    let finish = |outcomes: &mut dyn FnMut() -> char| {
        let mut r = start(&spec);
        while let Some(due) = r.next_due() {
            r.observe(&value_for(outcomes()), due.plus_ms(attempt))
                .unwrap();
        }
        r.last_measured_at().unwrap().0
    };
    // The worst: two errors before every counted measurement.
    let mut worst_seq = "EESEESEESEES".chars();
    assert_eq!(finish(&mut || worst_seq.next().unwrap()), bound);
    let mut rng = Rng(42);
    for _ in 0..2_000 {
        let end = finish(&mut || ['S', 'F', 'I', 'E'][rng.below(4) as usize]);
        assert!(end <= bound, "{end} > {bound}");
    }
}

// ----------------------------------------------------------------------------- arguments

fn args(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn args_are_substituted_into_a_query_and_a_condition() {
    let a = args(&[("service", "web.prod.svc"), ("threshold", "0.95")]);
    assert_eq!(
        substitute_args(
            "sum(rate(http_requests_total{service=\"{{args.service}}\",code!~\"5..\"}[5m]))",
            &a
        )
        .unwrap(),
        "sum(rate(http_requests_total{service=\"web.prod.svc\",code!~\"5..\"}[5m]))"
    );
    assert_eq!(
        substitute_args("result[0] >= {{ args.threshold }}", &a).unwrap(),
        "result[0] >= 0.95"
    );
    assert_eq!(
        substitute_args("no placeholders", &a).unwrap(),
        "no placeholders"
    );
}

#[test]
fn a_missing_arg_is_an_error_naming_it() {
    let e = substitute_args("x{{args.service}}", &args(&[])).unwrap_err();
    assert_eq!(
        e,
        ArgError::Missing {
            name: "service".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "argument \"service\" has no value ({{args.service}} uses it)"
    );
}

#[test]
fn a_placeholder_that_is_not_an_arg_or_is_unclosed_is_an_error() {
    assert_eq!(
        substitute_args("{{secrets.token}}", &args(&[])).unwrap_err(),
        ArgError::NotAnArgument {
            placeholder: "secrets.token".into()
        }
    );
    assert_eq!(
        substitute_args("é {{args.x", &args(&[("x", "1")])).unwrap_err(),
        ArgError::Unterminated { column: 3 }
    );
}

#[test]
fn a_substituted_value_is_not_scanned_again() {
    let a = args(&[("a", "{{args.b}}"), ("b", "2")]);
    assert_eq!(substitute_args("{{args.a}}", &a).unwrap(), "{{args.b}}");
}

/// Edit a value in place and hand it back (keeps the tables short).
trait Tap: Sized {
    fn tap(mut self, f: impl FnOnce(&mut Self)) -> Self {
        f(&mut self);
        self
    }
}
impl Tap for MetricSpec {}
