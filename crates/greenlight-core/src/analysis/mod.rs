//! Metric analysis with Argo Rollouts' semantics (`docs/analysis.md`): the conditions a
//! measurement is judged by ([`expr`]), `{{args.name}}` placeholders ([`args`]) and one
//! measurement ([`measure`]). Sans-IO like the rest of the crate: the caller queries the metric
//! provider and passes in what came back. It never queries anything, reads a clock or sleeps;
//! every word it says is in [`reason`].

pub mod args;
pub mod expr;
pub mod measure;
pub mod reason;

pub use args::{ArgError, substitute_args};
pub use expr::{EvalError, Expression, ParseError, ResultValue, Type, Value};
pub use measure::{Measurement, MeasurementPhase, ProviderValue, Which, measure};
pub use reason::MeasurementReason;
