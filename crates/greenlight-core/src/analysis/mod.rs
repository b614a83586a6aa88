//! Metric analysis with Argo Rollouts' semantics (`docs/analysis.md`). So far the conditions a
//! measurement is judged by ([`expr`]). Sans-IO like the rest of the crate: it never queries
//! anything, reads a clock or sleeps; every word it says is in [`reason`].

pub mod expr;
pub mod reason;

pub use expr::{EvalError, Expression, ParseError, ResultValue, Type, Value};
