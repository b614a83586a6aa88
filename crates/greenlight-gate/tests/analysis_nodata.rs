//! A metric that measured nothing is never a pass (`docs/analysis.md#measured-nothing`): an
//! empty vector or NaN on which Argo Rollouts' judgment is Successful makes the measurement
//! Inconclusive — and so the metric and the run — unless the metric allows no data; the words
//! say "measured nothing" either way.

use greenlight_core::time::Timestamp;
use greenlight_gate::analysis::{
    Assessment, Expression, MeasurementPhase as M, MetricResult, MetricSpec, NoData, Phase,
    ProviderValue, Run, RunSpec, measure, measure_metric,
};

const NAN: f64 = f64::NAN;

fn t(ms: i64) -> Timestamp {
    Timestamp(ms)
}

fn vector(v: &[f64]) -> ProviderValue {
    ProviderValue::Vector(v.to_vec())
}

/// An error-rate metric judged by a failure condition only: Argo Rollouts passes every value
/// on which `result[0] > 0.05` is false — and `all(...)` of an empty list is true.
fn failure_only(name: &str, condition: &str, allow_no_data: bool) -> MetricSpec {
    let mut s = MetricSpec::new(name);
    s.failure_condition = Some(condition.into());
    s.allow_no_data = allow_no_data;
    s
}

fn run_once(spec: MetricSpec, value: ProviderValue) -> Run {
    let analysis = RunSpec {
        metrics: vec![spec],
        dry_run: Vec::new(),
    }
    .validate()
    .unwrap();
    let mut run = Run::start(analysis, t(0));
    let name = run.results()[0].name().to_string();
    run.observe(&name, &value, t(0)).unwrap();
    run
}

#[test]
fn what_measured_nothing_is() {
    assert_eq!(NoData::of(&vector(&[])), Some(NoData::EmptyResult));
    assert_eq!(NoData::of(&vector(&[NAN])), Some(NoData::NaN));
    assert_eq!(NoData::of(&vector(&[NAN, NAN])), Some(NoData::NaN));
    assert_eq!(NoData::of(&ProviderValue::Scalar(NAN)), Some(NoData::NaN));
    // One real value among NaNs measured something; so did a zero; an error is no value.
    assert_eq!(NoData::of(&vector(&[NAN, 0.2])), None);
    assert_eq!(NoData::of(&vector(&[0.0])), None);
    assert_eq!(NoData::of(&ProviderValue::Scalar(0.0)), None);
    assert_eq!(NoData::of(&ProviderValue::Error("timeout".into())), None);
}

#[test]
fn an_empty_vector_with_only_a_false_failure_condition_measured_nothing_and_blocks() {
    for condition in [
        "any(result, # > 0.05)",
        "len(result) > 0 && result[0] > 0.05",
    ] {
        let f = Expression::parse(condition).unwrap();
        // Argo Rollouts' own judgment is Successful…
        assert_eq!(measure(&vector(&[]), None, Some(&f)).phase, M::Successful);
        // …a gate's is not.
        let m = measure_metric(&vector(&[]), None, Some(&f), false);
        assert_eq!(m.phase, M::Inconclusive, "{condition}");
        assert_eq!(m.measured_nothing(), Some(NoData::EmptyResult));
        assert_eq!(m.value.as_deref(), Some("[]"));
        assert!(
            m.message().starts_with(&format!(
                "measured nothing (empty result): failureCondition \"{condition}\" is false, which Argo Rollouts would pass"
            )),
            "{}",
            m.message()
        );

        let run = run_once(failure_only("errors", condition, false), vector(&[]));
        assert_eq!(run.phase(), Phase::Inconclusive);
        assert_eq!(
            run.message().as_deref(),
            Some(
                "Metric \"errors\" assessed Inconclusive due to inconclusive (1) > inconclusiveLimit (0): measured nothing (empty result), never a pass unless the check allows it (allowNoData: true)"
            )
        );
    }
}

#[test]
fn an_all_over_an_empty_vector_measured_nothing() {
    let mut s = MetricSpec::new("latency");
    s.success_condition = Some("all(result, {# < 0.5})".into());
    let run = run_once(s, vector(&[]));
    assert_eq!(run.phase(), Phase::Inconclusive);
    let m = run.results()[0].last_measurement().unwrap();
    assert!(
        m.message()
            .starts_with("measured nothing (empty result): successCondition"),
        "{}",
        m.message()
    );
}

#[test]
fn allow_no_data_lets_argo_rollouts_phase_stand_and_still_says_so() {
    let run = run_once(
        failure_only("errors", "any(result, # > 0.05)", true),
        vector(&[]),
    );
    assert_eq!(run.phase(), Phase::Successful);
    let m = run.results()[0].last_measurement().unwrap();
    assert_eq!(m.phase, M::Successful);
    assert_eq!(m.measured_nothing(), Some(NoData::EmptyResult));
    assert_eq!(
        m.message(),
        "measured nothing (empty result), accepted by allowNoData: failureCondition \"any(result, # > 0.05)\" is false"
    );
}

#[test]
fn nan_is_measured_nothing_likewise() {
    // NaN compares false with everything, so a failure condition never holds on it.
    for value in [vector(&[NAN]), ProviderValue::Scalar(NAN)] {
        let condition = match value {
            ProviderValue::Scalar(_) => "result > 0.05",
            _ => "result[0] > 0.05",
        };
        assert_eq!(
            measure(&value, None, Some(&Expression::parse(condition).unwrap())).phase,
            M::Successful
        );
        let run = run_once(failure_only("errors", condition, false), value.clone());
        assert_eq!(run.phase(), Phase::Inconclusive, "{value:?}");
        assert!(
            run.message()
                .unwrap()
                .ends_with(": measured nothing (NaN), never a pass unless the check allows it (allowNoData: true)"),
            "{:?}",
            run.message()
        );
        let run = run_once(failure_only("errors", condition, true), value.clone());
        assert_eq!(run.phase(), Phase::Successful, "{value:?}");
        assert_eq!(
            run.results()[0]
                .last_measurement()
                .unwrap()
                .measured_nothing(),
            Some(NoData::NaN)
        );
    }
}

#[test]
fn a_value_that_measured_something_is_judged_as_before() {
    for (value, phase) in [
        (vector(&[0.01]), Phase::Successful),
        (vector(&[0.2]), Phase::Failed),
        (vector(&[NAN, 0.01]), Phase::Successful),
    ] {
        for allow in [false, true] {
            let run = run_once(
                failure_only("errors", "any(result, # > 0.05)", allow),
                value.clone(),
            );
            assert_eq!(run.phase(), phase, "{value:?} allowNoData {allow}");
            let m = run.results()[0].last_measurement().unwrap();
            assert_eq!(m.measured_nothing(), None);
            assert!(!m.message().contains("measured nothing"), "{}", m.message());
        }
    }
}

#[test]
fn an_inconclusive_judgment_on_nan_stays_argo_rollouts_own() {
    // Both conditions are false on NaN: Argo Rollouts' Inconclusive, which allowNoData would
    // not change, so the metric's sentence does not offer it.
    let mut s = MetricSpec::new("latency");
    s.success_condition = Some("result[0] < 1".into());
    s.failure_condition = Some("result[0] > 10".into());
    let run = run_once(s, vector(&[NAN]));
    assert_eq!(run.phase(), Phase::Inconclusive);
    assert_eq!(
        run.message().as_deref(),
        Some(
            "Metric \"latency\" assessed Inconclusive due to inconclusive (1) > inconclusiveLimit (0)"
        )
    );
    let m = run.results()[0].last_measurement().unwrap();
    assert_eq!(m.measured_nothing(), Some(NoData::NaN));
}

#[test]
fn a_failed_or_errored_measurement_on_no_data_keeps_its_phase() {
    // Nothing to pass: Argo Rollouts' Failed and Error stand, allowed or not.
    let mut s = MetricSpec::new("x");
    s.success_condition = Some("len(result) > 0".into());
    let run = run_once(s, vector(&[]));
    assert_eq!(run.phase(), Phase::Failed);
    let mut s = MetricSpec::new("x");
    s.success_condition = Some("result[0] < 1".into());
    s.consecutive_error_limit = 0;
    let run = run_once(s, vector(&[]));
    assert_eq!(run.phase(), Phase::Error);
}

#[test]
fn limits_that_tolerate_every_measurement_measuring_nothing_do_not_pass_the_metric() {
    // inconclusiveLimit 3 with count 3: each empty measurement is tolerated, and Argo Rollouts
    // would end the metric Successful on count reached; it never saw a value.
    let mut s = failure_only("errors", "any(result, # > 0.05)", false);
    s.count = Some(3);
    s.interval_ms = Some(1000);
    s.inconclusive_limit = 3;
    let mut r = MetricResult::start(s.clone().validate().unwrap(), t(0));
    while let Some(due) = r.next_due() {
        r.observe(&vector(&[]), due).unwrap();
    }
    assert_eq!(r.counts().inconclusive, 3);
    assert_eq!(
        r.assessment(),
        Some(&Assessment::MeasuredNothing {
            count: 3,
            nothing: NoData::EmptyResult
        })
    );
    assert_eq!(r.phase(), Phase::Inconclusive);
    assert_eq!(
        r.message().as_deref(),
        Some(
            "Metric \"errors\" assessed Inconclusive due to count (3) reached but no measurement measured anything, the last measured nothing (empty result)"
        )
    );
    // So does a failureLimit that tolerates failures on an empty result.
    let mut f = MetricSpec::new("up");
    f.success_condition = Some("len(result) > 0".into());
    f.count = Some(2);
    f.interval_ms = Some(1000);
    f.failure_limit = 2;
    let mut r = MetricResult::start(f.validate().unwrap(), t(0));
    while let Some(due) = r.next_due() {
        r.observe(&vector(&[]), due).unwrap();
    }
    assert_eq!(r.phase(), Phase::Inconclusive);
    // One real value among them: the limits decide as Argo Rollouts' do.
    let mut r = MetricResult::start(s.clone().validate().unwrap(), t(0));
    for v in [vector(&[]), vector(&[0.01]), vector(&[])] {
        let due = r.next_due().unwrap();
        r.observe(&v, due).unwrap();
    }
    assert_eq!(r.phase(), Phase::Successful);
    // And with allowNoData, Argo Rollouts' Successful stands.
    s.allow_no_data = true;
    let mut r = MetricResult::start(s.validate().unwrap(), t(0));
    while let Some(due) = r.next_due() {
        r.observe(&vector(&[]), due).unwrap();
    }
    assert_eq!(r.phase(), Phase::Successful);
}
