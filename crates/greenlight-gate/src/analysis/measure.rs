//! One measurement (`docs/analysis.md#one-measurement`): what the metric provider returned,
//! judged by the metric's conditions into Successful, Failed, Inconclusive or Error, as Argo
//! Rollouts' `EvaluateResult` does. It never queries a provider; it is given the answer.

use super::expr::{Expression, ResultValue};
use super::reason::{Held, MeasurementReason};

/// What the metric provider returned for one query.
#[derive(Clone, Debug, PartialEq)]
pub enum ProviderValue {
    /// A Prometheus scalar: `result` is a number.
    Scalar(f64),
    /// A Prometheus vector or matrix: `result` is a list with one number per series.
    Vector(Vec<f64>),
    /// The query failed (unreachable server, bad query, timeout, a result of another type).
    Error(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MeasurementPhase {
    Successful,
    Failed,
    Inconclusive,
    Error,
}

impl MeasurementPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            MeasurementPhase::Successful => "Successful",
            MeasurementPhase::Failed => "Failed",
            MeasurementPhase::Inconclusive => "Inconclusive",
            MeasurementPhase::Error => "Error",
        }
    }
}

/// Which of a metric's two conditions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Which {
    Success,
    Failure,
}

impl Which {
    /// The field's name in an AnalysisTemplate.
    pub fn field(self) -> &'static str {
        match self {
            Which::Success => "successCondition",
            Which::Failure => "failureCondition",
        }
    }
}

/// One judged measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub phase: MeasurementPhase,
    /// The value as Argo Rollouts' Prometheus provider writes it (`0.97`, `[0.97,1.2]`); none
    /// when the provider failed.
    pub value: Option<String>,
    pub reason: MeasurementReason,
    /// How the value measured nothing, whatever the phase (`docs/analysis.md#measured-nothing`);
    /// `None` when it measured something or the provider failed.
    pub nothing: Option<NoData>,
}

impl Measurement {
    /// A measurement that could not be taken, for a failure the caller met before any value
    /// (the provider could not be built, the query could not be sent).
    pub fn error(message: impl Into<String>) -> Measurement {
        Measurement {
            phase: MeasurementPhase::Error,
            value: None,
            reason: MeasurementReason::ProviderError(message.into()),
            nothing: None,
        }
    }

    /// The measurement's message, as `status` shows it.
    pub fn message(&self) -> String {
        self.reason.to_string()
    }

    /// How the value measured nothing, if it did (`docs/analysis.md#measured-nothing`).
    pub fn measured_nothing(&self) -> Option<NoData> {
        self.nothing
    }
}

/// How a provider's answer measured nothing (`docs/analysis.md#measured-nothing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NoData {
    /// A vector with no series: the query selected nothing.
    EmptyResult,
    /// A scalar that is NaN, or a vector whose every value is NaN.
    NaN,
}

impl NoData {
    /// Whether `value` measured nothing: an empty vector, a NaN scalar, a vector of NaNs only.
    /// A provider error is not a value; a vector with one real number measured something.
    pub fn of(value: &ProviderValue) -> Option<NoData> {
        match value {
            ProviderValue::Vector(v) if v.is_empty() => Some(NoData::EmptyResult),
            ProviderValue::Vector(v) if v.iter().all(|f| f.is_nan()) => Some(NoData::NaN),
            ProviderValue::Scalar(f) if f.is_nan() => Some(NoData::NaN),
            _ => None,
        }
    }
}

/// Judge what the provider returned as a gate's metric does: Argo Rollouts' judgment
/// ([`measure`]), except that a measurement Argo Rollouts calls Successful on a value that
/// measured nothing ([`NoData::of`]) is Inconclusive, never a pass — unless `allow_no_data`,
/// when Argo Rollouts' Successful stands. Either way the reason says it measured nothing.
pub fn measure_metric(
    value: &ProviderValue,
    success: Option<&Expression>,
    failure: Option<&Expression>,
    allow_no_data: bool,
) -> Measurement {
    let m = measure(value, success, failure);
    let Some(nothing) = NoData::of(value) else {
        return m;
    };
    match m {
        Measurement {
            phase: MeasurementPhase::Successful,
            value,
            reason: MeasurementReason::Evaluated { success, failure },
            ..
        } => Measurement {
            phase: if allow_no_data {
                MeasurementPhase::Successful
            } else {
                MeasurementPhase::Inconclusive
            },
            value,
            reason: MeasurementReason::MeasuredNothing {
                nothing,
                allowed: allow_no_data,
                success,
                failure,
            },
            nothing: Some(nothing),
        },
        other => other,
    }
}

/// Judge what the provider returned by the metric's conditions, in Argo Rollouts' order: the
/// success condition is evaluated first and an error in either is an Error measurement; then
/// neither condition set → Successful; only success set → Failed unless it holds; only failure
/// set → Successful unless it holds; both set → Failed when failure holds (whatever success
/// says), Successful when only success holds, Inconclusive when neither does.
///
/// An empty vector is evaluated like any other (`len(result) > 0 && ...` can guard it); when a
/// condition cannot be evaluated against it, the message says the result was nil or empty.
pub fn measure(
    value: &ProviderValue,
    success: Option<&Expression>,
    failure: Option<&Expression>,
) -> Measurement {
    let result = match value {
        ProviderValue::Error(message) => return Measurement::error(message.clone()),
        ProviderValue::Scalar(f) => ResultValue::Scalar(*f),
        ProviderValue::Vector(v) => ResultValue::Vector(v),
    };
    let shown = Some(show_value(value));
    let nothing = NoData::of(value);
    let evaluate = |which: Which, condition: Option<&Expression>| {
        let Some(condition) = condition else {
            return Ok(None);
        };
        match condition.condition(result) {
            Ok(holds) => Ok(Some(Held {
                source: condition.source().to_string(),
                holds,
            })),
            Err(error) => Err(Measurement {
                phase: MeasurementPhase::Error,
                value: shown.clone(),
                reason: MeasurementReason::ConditionError {
                    which,
                    source: condition.source().to_string(),
                    empty_result: matches!(value, ProviderValue::Vector(v) if v.is_empty()),
                    error,
                },
                nothing,
            }),
        }
    };
    let success = match evaluate(Which::Success, success) {
        Ok(held) => held,
        Err(m) => return m,
    };
    let failure = match evaluate(Which::Failure, failure) {
        Ok(held) => held,
        Err(m) => return m,
    };
    let phase = match (&success, &failure) {
        (None, None) => MeasurementPhase::Successful,
        (Some(s), None) if s.holds => MeasurementPhase::Successful,
        (Some(_), None) => MeasurementPhase::Failed,
        (None, Some(f)) if f.holds => MeasurementPhase::Failed,
        (None, Some(_)) => MeasurementPhase::Successful,
        (Some(_), Some(f)) if f.holds => MeasurementPhase::Failed,
        (Some(s), Some(_)) if s.holds => MeasurementPhase::Successful,
        (Some(_), Some(_)) => MeasurementPhase::Inconclusive,
    };
    Measurement {
        phase,
        value: shown,
        reason: MeasurementReason::Evaluated { success, failure },
        nothing,
    }
}

/// A value as Argo Rollouts' Prometheus provider records it: the shortest decimal that reads
/// back the same float, a vector as `[a,b]`, and Go's `NaN`, `+Inf`, `-Inf`.
fn show_value(value: &ProviderValue) -> String {
    fn float(f: f64) -> String {
        if f.is_nan() {
            "NaN".to_string()
        } else if f.is_infinite() {
            if f > 0.0 { "+Inf" } else { "-Inf" }.to_string()
        } else {
            f.to_string()
        }
    }
    match value {
        ProviderValue::Scalar(f) => float(*f),
        ProviderValue::Vector(v) => {
            let items: Vec<String> = v.iter().map(|f| float(*f)).collect();
            format!("[{}]", items.join(","))
        }
        ProviderValue::Error(_) => String::new(),
    }
}
