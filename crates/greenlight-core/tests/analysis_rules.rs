//! One test (or a table) per rule of Argo Rollouts' analysis as docs/analysis.md states it: so
//! far one measurement and arguments. Written from the stated rules, not from the code.

use greenlight_core::analysis::{
    ArgError, Expression, Measurement, MeasurementPhase as M, ProviderValue, measure,
    substitute_args,
};
use std::collections::BTreeMap;

const NAN: f64 = f64::NAN;

fn cond(src: &str) -> Expression {
    Expression::parse(src).unwrap()
}

fn scalar(f: f64) -> ProviderValue {
    ProviderValue::Scalar(f)
}

fn vector(v: &[f64]) -> ProviderValue {
    ProviderValue::Vector(v.to_vec())
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
