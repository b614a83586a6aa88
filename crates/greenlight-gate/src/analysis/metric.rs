//! One metric over time (`docs/analysis.md#one-metric`): a spec as written ([`MetricSpec`]),
//! validated into a [`Metric`], and a [`MetricResult`]: the sans-IO state machine that says
//! when the next measurement is due, counts what was measured and assesses the metric's phase
//! the way Argo Rollouts' `assessMetricStatus` does. It never measures, reads a clock or words
//! a sentence of its own ([`super::reason`] does).

use super::Phase;
use super::expr::Expression;
use super::measure::{Measurement, MeasurementPhase, ProviderValue, Which, measure_metric};
use super::reason::{Assessment, MeasurementReason, MetricMessage, MetricProblem, SpecError};
use greenlight_core::time::Timestamp;

/// `consecutiveErrorLimit` when the spec does not say.
pub const DEFAULT_CONSECUTIVE_ERROR_LIMIT: i32 = 4;
/// How long after an Error the measurement is retried, whatever the interval: Argo Rollouts'
/// `DefaultErrorRetryInterval`.
pub const ERROR_RETRY_MS: i64 = 10_000;

/// A metric as written, with Argo Rollouts' field meanings and defaults (see [`Self::new`]).
/// Arguments are substituted before it is validated ([`super::args`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricSpec {
    pub name: String,
    /// Time between measurements; without it the metric measures once.
    pub interval_ms: Option<i64>,
    /// How many measurements (Error measurements are not counted). `None` or `Some(0)`: one
    /// without an interval, no end with one.
    pub count: Option<u32>,
    /// Wait before the first measurement, from the run's start.
    pub initial_delay_ms: i64,
    /// Failed measurements tolerated; `-1` disables the limit.
    pub failure_limit: i32,
    pub inconclusive_limit: i32,
    /// Errors in a row tolerated.
    pub consecutive_error_limit: i32,
    /// Successes in a row that end the metric Successful; `0` disables the limit.
    pub consecutive_success_limit: i32,
    /// `None` or an empty string: not set.
    pub success_condition: Option<String>,
    pub failure_condition: Option<String>,
    /// Whether a measurement that measured nothing (an empty vector, NaN) may pass as Argo
    /// Rollouts would pass it (`docs/analysis.md#measured-nothing`). Off by default.
    pub allow_no_data: bool,
}

impl MetricSpec {
    /// A spec with Argo Rollouts' defaults: one measurement, no delay, `failureLimit` 0,
    /// `inconclusiveLimit` 0, `consecutiveErrorLimit` 4, `consecutiveSuccessLimit` 0 (off), no
    /// conditions; a measurement that measured nothing is never a pass.
    pub fn new(name: impl Into<String>) -> MetricSpec {
        MetricSpec {
            name: name.into(),
            interval_ms: None,
            count: None,
            initial_delay_ms: 0,
            failure_limit: 0,
            inconclusive_limit: 0,
            consecutive_error_limit: DEFAULT_CONSECUTIVE_ERROR_LIMIT,
            consecutive_success_limit: 0,
            success_condition: None,
            failure_condition: None,
            allow_no_data: false,
        }
    }

    /// Check the spec and parse its conditions. Errors name the metric and the field.
    pub fn validate(&self) -> Result<Metric, SpecError> {
        let problem = |problem| SpecError::Metric {
            name: self.name.clone(),
            problem,
        };
        if self.name.is_empty() {
            return Err(problem(MetricProblem::EmptyName));
        }
        if let Some(ms) = self.interval_ms
            && ms <= 0
        {
            return Err(problem(MetricProblem::IntervalNotPositive { ms }));
        }
        if self.initial_delay_ms < 0 {
            return Err(problem(MetricProblem::InitialDelayNegative {
                ms: self.initial_delay_ms,
            }));
        }
        let count = match (self.count.filter(|&c| c > 0), self.interval_ms) {
            (Some(c), None) if c > 1 => {
                return Err(problem(MetricProblem::CountWithoutInterval { count: c }));
            }
            (Some(c), _) => Count::Times(c),
            (None, None) => Count::Times(1),
            (None, Some(_)) => Count::Indefinite,
        };
        if self.failure_limit < -1 {
            return Err(problem(MetricProblem::FailureLimitBelowMinusOne {
                limit: self.failure_limit,
            }));
        }
        let non_negative = |field: &'static str, limit: i32| {
            u32::try_from(limit).map_err(|_| problem(MetricProblem::NegativeLimit { field, limit }))
        };
        let inconclusive_limit = non_negative("inconclusiveLimit", self.inconclusive_limit)?;
        let consecutive_error_limit =
            non_negative("consecutiveErrorLimit", self.consecutive_error_limit)?;
        let consecutive_success_limit =
            non_negative("consecutiveSuccessLimit", self.consecutive_success_limit)?;
        let failure_limit = u32::try_from(self.failure_limit).ok();
        let consecutive_success_limit = Some(consecutive_success_limit).filter(|&limit| limit > 0);
        if failure_limit.is_none() && consecutive_success_limit.is_none() {
            return Err(problem(MetricProblem::NoLimitApplies));
        }
        if let Some(c) = self.count.filter(|&c| c > 0) {
            let limits = [
                ("failureLimit", failure_limit),
                ("inconclusiveLimit", Some(inconclusive_limit)),
                ("consecutiveSuccessLimit", consecutive_success_limit),
            ];
            for (field, limit) in limits {
                if let Some(limit) = limit
                    && c < limit
                {
                    return Err(problem(MetricProblem::CountBelowLimit {
                        count: c,
                        field,
                        limit,
                    }));
                }
            }
        }
        let condition = |which: Which, text: &Option<String>| {
            let Some(text) = text.as_deref().filter(|t| !t.is_empty()) else {
                return Ok(None);
            };
            let parsed = Expression::parse(text)
                .map_err(|error| problem(MetricProblem::Condition { which, error }))?;
            parsed.check_condition_for_any_result().map_err(|error| {
                problem(MetricProblem::ConditionNeverEvaluates { which, error })
            })?;
            Ok(Some(parsed))
        };
        Ok(Metric {
            name: self.name.clone(),
            interval_ms: self.interval_ms,
            count,
            initial_delay_ms: self.initial_delay_ms,
            failure_limit,
            inconclusive_limit,
            consecutive_error_limit,
            consecutive_success_limit,
            success: condition(Which::Success, &self.success_condition)?,
            failure: condition(Which::Failure, &self.failure_condition)?,
            allow_no_data: self.allow_no_data,
        })
    }
}

/// How many measurements a metric takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    Times(u32),
    /// An interval without a count: measures until its run is terminated.
    Indefinite,
}

/// How long a metric can take at most, from its run's start to its last measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorstCase {
    Bounded {
        ms: i64,
    },
    /// An indefinite metric ends only when its run is terminated, so it has no worst case.
    Indefinite,
}

/// A validated metric: limits applied, conditions parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    name: String,
    interval_ms: Option<i64>,
    count: Count,
    initial_delay_ms: i64,
    /// `None`: disabled (`-1`).
    failure_limit: Option<u32>,
    inconclusive_limit: u32,
    consecutive_error_limit: u32,
    /// `None`: disabled (`0`).
    consecutive_success_limit: Option<u32>,
    success: Option<Expression>,
    failure: Option<Expression>,
    allow_no_data: bool,
}

impl Metric {
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn interval_ms(&self) -> Option<i64> {
        self.interval_ms
    }
    pub fn count(&self) -> Count {
        self.count
    }
    pub fn initial_delay_ms(&self) -> i64 {
        self.initial_delay_ms
    }
    pub fn failure_limit(&self) -> Option<u32> {
        self.failure_limit
    }
    pub fn inconclusive_limit(&self) -> u32 {
        self.inconclusive_limit
    }
    pub fn consecutive_error_limit(&self) -> u32 {
        self.consecutive_error_limit
    }
    pub fn consecutive_success_limit(&self) -> Option<u32> {
        self.consecutive_success_limit
    }
    pub fn success_condition(&self) -> Option<&Expression> {
        self.success.as_ref()
    }
    pub fn failure_condition(&self) -> Option<&Expression> {
        self.failure.as_ref()
    }
    pub fn allows_no_data(&self) -> bool {
        self.allow_no_data
    }

    /// Judge a provider's answer by this metric's conditions; one that measured nothing is
    /// never a pass unless the metric allows it ([`measure_metric`]).
    pub fn measure(&self, value: &ProviderValue) -> Measurement {
        measure_metric(
            value,
            self.success.as_ref(),
            self.failure.as_ref(),
            self.allow_no_data,
        )
    }

    /// The longest this metric can take from its run's start until it completes, when each
    /// query takes at most `attempt_ms` (the provider's timeout; 0 to leave it out):
    ///
    /// `initialDelay + count × (consecutiveErrorLimit × (attempt + 10 s) + attempt)
    ///  + (count − 1) × interval`
    ///
    /// Error measurements are not counted and a streak of them up to the limit is tolerated
    /// before every counted one, each retried 10 s later; the metric ends Error on the streak
    /// after that, which takes no longer. Limits that end a metric early only shorten it.
    pub fn worst_case(&self, attempt_ms: i64) -> WorstCase {
        let Count::Times(n) = self.count else {
            return WorstCase::Indefinite;
        };
        let attempt = i128::from(attempt_ms.max(0));
        let n = i128::from(n);
        let errors = i128::from(self.consecutive_error_limit);
        let interval = i128::from(self.interval_ms.unwrap_or(0));
        let ms = i128::from(self.initial_delay_ms)
            + n * (errors * (attempt + i128::from(ERROR_RETRY_MS)) + attempt)
            + (n - 1) * interval;
        WorstCase::Bounded {
            ms: i64::try_from(ms).unwrap_or(i64::MAX),
        }
    }
}

/// What a metric's measurements added up to (Argo Rollouts' MetricResult counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Successful, Failed and Inconclusive measurements; never Error ones.
    pub count: u32,
    pub successful: u32,
    pub failed: u32,
    pub inconclusive: u32,
    pub error: u32,
    /// Errors since the last other measurement.
    pub consecutive_error: u32,
    /// Successes since the last other measurement (an Error ends the streak too).
    pub consecutive_success: u32,
}

/// Why a measurement was not recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The metric has completed; nothing changes it.
    Completed(Phase),
    /// The run has no metric of that name.
    UnknownMetric(String),
    /// One step of a run named the metric twice.
    Twice(String),
}

/// One metric being measured: the sans-IO state machine.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricResult {
    metric: Metric,
    started_at: Timestamp,
    counts: Counts,
    /// The latest measurement and when it was recorded.
    last: Option<(Measurement, Timestamp)>,
    /// Counted measurements whose value measured something, whatever their phase
    /// (`docs/analysis.md#measured-nothing`).
    measured_something: u32,
    /// Set once the metric completes.
    assessment: Option<Assessment>,
}

impl MetricResult {
    /// Start measuring `metric` in a run that started at `started_at`.
    pub fn start(metric: Metric, started_at: Timestamp) -> MetricResult {
        MetricResult {
            metric,
            started_at,
            counts: Counts::default(),
            last: None,
            measured_something: 0,
            assessment: None,
        }
    }

    pub fn metric(&self) -> &Metric {
        &self.metric
    }
    pub fn name(&self) -> &str {
        &self.metric.name
    }
    pub fn started_at(&self) -> Timestamp {
        self.started_at
    }
    pub fn counts(&self) -> Counts {
        self.counts
    }
    pub fn last_measurement(&self) -> Option<&Measurement> {
        self.last.as_ref().map(|(m, _)| m)
    }
    pub fn last_measured_at(&self) -> Option<Timestamp> {
        self.last.as_ref().map(|(_, at)| *at)
    }
    /// Why the metric completed; `None` while it has not.
    pub fn assessment(&self) -> Option<&Assessment> {
        self.assessment.as_ref()
    }

    /// Pending until the first measurement, Running until an assessment completes it.
    pub fn phase(&self) -> Phase {
        match (&self.assessment, &self.last) {
            (Some(a), _) => a.phase(),
            (None, None) => Phase::Pending,
            (None, Some(_)) => Phase::Running,
        }
    }

    pub fn is_completed(&self) -> bool {
        self.assessment.is_some()
    }

    /// For a metric that failed on its `failureLimit` while most of its measurements were
    /// successful, the diagnosis a team needs when a gate keeps failing on noise: the rule is
    /// stricter than the metric is steady. `None` for any other result — a metric that failed on
    /// most of its measurements is a failure, not noise.
    pub fn noise_hint(&self) -> Option<String> {
        let Some(Assessment::FailureLimit { failed, limit }) = &self.assessment else {
            return None;
        };
        let c = self.counts;
        (c.successful > c.failed).then(|| {
            format!(
                "`{}` failed on {failed} of {} measurements with failureLimit {limit}, the others successful: if this gate often fails on such noise, failureLimit is too strict for how steady the metric is; raise failureLimit (with count) or smooth the query (a longer rate window), rather than bypass the gate",
                self.name(),
                c.count
            )
        })
    }

    /// Argo Rollouts' sentence for a completed metric: `Metric "x" assessed Failed due to
    /// failed (1) > failureLimit (0)`, with the last measurement's error appended when it was
    /// an Error.
    pub fn message(&self) -> Option<String> {
        let assessment = self.assessment.as_ref()?;
        let error = self
            .last
            .as_ref()
            .filter(|(m, _)| m.phase == MeasurementPhase::Error)
            .map(|(m, _)| m.message());
        // Said when the last measurement was made Inconclusive because it measured nothing, not
        // when Argo Rollouts' own judgment was Inconclusive or Failed on it.
        let nothing = match self.last.as_ref().map(|(m, _)| &m.reason) {
            Some(MeasurementReason::MeasuredNothing {
                nothing,
                allowed: false,
                ..
            }) => Some(*nothing),
            _ => None,
        };
        Some(
            MetricMessage {
                name: &self.metric.name,
                assessment,
                error: error.as_deref(),
                nothing,
            }
            .to_string(),
        )
    }

    /// When the next measurement is due: the run's start plus `initialDelay` for the first; 10 s
    /// after an Error; `interval` after any other; never once the metric has completed.
    pub fn next_due(&self) -> Option<Timestamp> {
        if self.assessment.is_some() {
            return None;
        }
        match &self.last {
            None => Some(self.started_at.plus_ms(self.metric.initial_delay_ms)),
            Some((m, at)) if m.phase == MeasurementPhase::Error => Some(at.plus_ms(ERROR_RETRY_MS)),
            Some((_, at)) => self.metric.interval_ms.map(|i| at.plus_ms(i)),
        }
    }

    /// Judge `value` by the metric's conditions and record it.
    pub fn observe(&mut self, value: &ProviderValue, now: Timestamp) -> Result<(), Refused> {
        let m = self.metric.measure(value);
        self.record(m, now)
    }

    /// Record a measurement finished at `now`, update the counters and assess the metric.
    pub fn record(&mut self, m: Measurement, now: Timestamp) -> Result<(), Refused> {
        if let Some(a) = &self.assessment {
            return Err(Refused::Completed(a.phase()));
        }
        let c = &mut self.counts;
        let bump = |n: &mut u32| *n = n.saturating_add(1);
        match m.phase {
            MeasurementPhase::Error => {
                bump(&mut c.error);
                bump(&mut c.consecutive_error);
                c.consecutive_success = 0;
            }
            counted => {
                bump(&mut c.count);
                if m.measured_nothing().is_none() {
                    self.measured_something = self.measured_something.saturating_add(1);
                }
                c.consecutive_error = 0;
                match counted {
                    MeasurementPhase::Successful => {
                        bump(&mut c.successful);
                        bump(&mut c.consecutive_success);
                    }
                    MeasurementPhase::Failed => {
                        bump(&mut c.failed);
                        c.consecutive_success = 0;
                    }
                    _ => {
                        bump(&mut c.inconclusive);
                        c.consecutive_success = 0;
                    }
                }
            }
        }
        self.last = Some((m, now));
        self.assessment = self.assess();
        Ok(())
    }

    /// The run is terminating: a metric that has not completed ends Successful, as in Argo
    /// Rollouts (its limits were assessed at every measurement and held).
    pub fn terminate(&mut self) {
        if self.assessment.is_none() {
            self.assessment = Some(Assessment::Terminated);
        }
    }

    /// `assessMetricStatus` after a measurement: the failure, inconclusive and consecutive
    /// error limits in that order, a later match overriding an earlier one; then the
    /// consecutive success limit; then, once `count` is reached, the ending its limits give.
    fn assess(&self) -> Option<Assessment> {
        let c = self.counts;
        let m = &self.metric;
        let mut exceeded = None;
        if let Some(limit) = m.failure_limit
            && c.failed > limit
        {
            exceeded = Some(Assessment::FailureLimit {
                failed: c.failed,
                limit,
            });
        }
        if c.inconclusive > m.inconclusive_limit {
            exceeded = Some(Assessment::InconclusiveLimit {
                inconclusive: c.inconclusive,
                limit: m.inconclusive_limit,
            });
        }
        if c.consecutive_error > m.consecutive_error_limit {
            exceeded = Some(Assessment::ConsecutiveErrorLimit {
                errors: c.consecutive_error,
                limit: m.consecutive_error_limit,
            });
        }
        if exceeded.is_some() {
            return exceeded;
        }
        if let Some(limit) = m.consecutive_success_limit
            && c.consecutive_success >= limit
        {
            return Some(Assessment::ConsecutiveSuccessLimit {
                successes: c.consecutive_success,
                limit,
            });
        }
        let Count::Times(count) = m.count else {
            return None;
        };
        if c.count < count {
            return None;
        }
        // Limits loose enough to tolerate every measurement measuring nothing would pass a
        // metric that never saw a value: not without allowNoData.
        if !m.allow_no_data
            && self.measured_something == 0
            && m.consecutive_success_limit.is_none()
            && let Some(nothing) = self.last.as_ref().and_then(|(l, _)| l.measured_nothing())
        {
            return Some(Assessment::MeasuredNothing { count, nothing });
        }
        Some(match (m.failure_limit, m.consecutive_success_limit) {
            (Some(failure_limit), Some(success_limit)) => Assessment::CountReachedBothLimits {
                count,
                successes: c.consecutive_success,
                success_limit,
                failed: c.failed,
                failure_limit,
            },
            (None, Some(success_limit)) => Assessment::CountReachedWithoutSuccesses {
                count,
                successes: c.consecutive_success,
                success_limit,
            },
            _ => Assessment::CountReached { count },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The three limits are checked in the order failure, inconclusive, consecutive errors and
    /// a later match overrides an earlier one. One measurement can cross only one limit, so the
    /// order shows only on counters set by hand.
    #[test]
    fn a_later_limit_overrides_an_earlier_one() {
        let metric = MetricSpec::new("x").validate().unwrap();
        let with = |failed, inconclusive, consecutive_error| {
            let mut r = MetricResult::start(metric.clone(), Timestamp(0));
            r.counts = Counts {
                count: failed + inconclusive,
                failed,
                inconclusive,
                error: consecutive_error,
                consecutive_error,
                ..Counts::default()
            };
            r.assess().map(|a| a.phase())
        };
        assert_eq!(with(1, 0, 0), Some(Phase::Failed));
        assert_eq!(with(1, 1, 0), Some(Phase::Inconclusive));
        assert_eq!(with(1, 1, 5), Some(Phase::Error));
        assert_eq!(with(1, 0, 5), Some(Phase::Error));
        assert_eq!(with(0, 1, 5), Some(Phase::Error));
    }

    #[test]
    fn a_failure_on_a_few_measurements_among_successes_names_failure_limit_as_too_strict() {
        let mut spec = MetricSpec::new("error-rate");
        spec.count = Some(10);
        spec.interval_ms = Some(30_000);
        let metric = spec.validate().unwrap();
        let with = |successful, failed, inconclusive| {
            let mut r = MetricResult::start(metric.clone(), Timestamp(0));
            r.counts = Counts {
                count: successful + failed + inconclusive,
                successful,
                failed,
                inconclusive,
                ..Counts::default()
            };
            r.assessment = r.assess();
            r
        };
        let noisy = with(6, 1, 0);
        assert_eq!(noisy.phase(), Phase::Failed);
        let hint = noisy.noise_hint().expect("a hint");
        assert!(
            hint.starts_with("`error-rate` failed on 1 of 7 measurements with failureLimit 0")
                && hint.contains("raise failureLimit"),
            "{hint}"
        );
        // Failed at once, or mostly failing: a failure, not noise.
        assert_eq!(with(0, 1, 0).noise_hint(), None);
        assert_eq!(with(1, 1, 0).noise_hint(), None);
        // Not a failure at all.
        assert_eq!(with(6, 0, 1).noise_hint(), None);
        assert_eq!(with(3, 0, 0).noise_hint(), None);
    }
}
