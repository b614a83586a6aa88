//! Metric analysis with Argo Rollouts' semantics (`docs/analysis.md`): the conditions a
//! measurement is judged by ([`expr`]), `{{args.name}}` placeholders ([`args`]), one
//! measurement ([`measure`](mod@measure)), one metric over time ([`metric`]) and a run of
//! several metrics ([`run`]). Sans-IO like the rest of the crate: the caller queries the metric
//! provider when [`run::Run::next_due`] says, passes in what came back and the time, and reads
//! the phases. It never queries anything, reads a clock or sleeps; every word it says is in
//! [`reason`].

pub mod args;
pub mod expr;
pub mod measure;
pub mod metric;
pub mod reason;
pub mod run;

pub use args::{ArgError, substitute_args};
pub use expr::{EvalError, Expression, ParseError, ResultValue, Type, Value};
pub use measure::{
    Measurement, MeasurementPhase, NoData, ProviderValue, Which, measure, measure_metric,
};
pub use metric::{
    Count, Counts, DEFAULT_CONSECUTIVE_ERROR_LIMIT, ERROR_RETRY_MS, Metric, MetricResult,
    MetricSpec, Refused, WorstCase,
};
pub use reason::{Assessment, MeasurementReason, MetricProblem, SpecError};
pub use run::{Analysis, Run, RunSpec, Summary};

use std::fmt;

/// The phase of a metric or a run, as Argo Rollouts names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Nothing measured yet.
    Pending,
    Running,
    Successful,
    Failed,
    Error,
    /// Neither passed nor failed: Argo Rollouts pauses for a human.
    Inconclusive,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Successful => "Successful",
            Phase::Failed => "Failed",
            Phase::Error => "Error",
            Phase::Inconclusive => "Inconclusive",
        }
    }

    /// Whether nothing more will change it.
    pub fn is_completed(self) -> bool {
        matches!(
            self,
            Phase::Successful | Phase::Failed | Phase::Error | Phase::Inconclusive
        )
    }

    /// Rank from best to worst: Successful < Running < Pending < Inconclusive < Error < Failed.
    fn rank(self) -> u8 {
        match self {
            Phase::Successful => 0,
            Phase::Running => 1,
            Phase::Pending => 2,
            Phase::Inconclusive => 3,
            Phase::Error => 4,
            Phase::Failed => 5,
        }
    }

    /// Whether `self` is worse than `other` in that order.
    pub fn is_worse_than(self, other: Phase) -> bool {
        self.rank() > other.rank()
    }

    /// The worse of two phases; the first on a tie.
    pub fn worst(self, other: Phase) -> Phase {
        if other.is_worse_than(self) {
            other
        } else {
            self
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
