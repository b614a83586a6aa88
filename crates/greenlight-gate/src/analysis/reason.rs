//! Every word the analysis engine says, as typed data and the one place those words are written
//! (the `Display` impls below): why a condition does not parse or evaluate, why a measurement
//! came out as it did, why a metric completed, why a spec is refused. The engine decides which
//! variant applies; nothing here decides anything. Where Argo Rollouts has a sentence for the
//! same thing (`Metric "x" assessed Failed due to failed (1) > failureLimit (0)`), it is
//! Argo Rollouts' sentence, so people who know one know the other.

use super::Phase;
use super::args::ArgError;
use super::expr::{
    EvalError, EvalProblem, Expected, MAX_HEIGHT, MAX_PREDICATE_NESTING, ParseError, ParseProblem,
    Pos, Type, Unsupported,
};
use super::measure::{NoData, Which};
use std::fmt;

/// The functions a condition may call, for messages.
const FUNCTIONS: &str = "len, isNaN, isInf, abs, all and any";

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 1 {
            write!(f, "line {}, column {}", self.line, self.column)
        } else {
            write!(f, "column {}", self.column)
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.pos, self.problem)
    }
}

impl std::error::Error for ParseError {}

impl fmt::Display for ParseProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseProblem::Expected { expected, found } => match found {
                Some(found) => write!(f, "expected {expected}, found `{found}`"),
                None => write!(f, "expected {expected}, found the end of the condition"),
            },
            ParseProblem::UnexpectedCharacter(c) => write!(f, "unexpected character `{c}`"),
            ParseProblem::UnterminatedString => {
                f.write_str("a string is not closed: add its closing quote")
            }
            ParseProblem::BadEscape(e) => write!(
                f,
                "`{e}` is not an escape a string may hold (\\\\, \\\", \\', \\n, \\r, \\t, \\uXXXX)"
            ),
            ParseProblem::BadNumber(n) => write!(
                f,
                "`{n}` is not a number greenlight reads: write decimal digits, optionally with a \
                 fraction and an exponent (`1`, `0.5`, `1e-3`)"
            ),
            ParseProblem::NumberOutOfRange(n) => write!(
                f,
                "`{n}` is out of range: an integer must fit in 64 bits and a float must be finite"
            ),
            ParseProblem::Unsupported(Unsupported::SingleCharacter(c)) => {
                let meant = match *c {
                    "=" => "==",
                    "&" => "&&",
                    _ => "||",
                };
                write!(f, "`{c}` is not an operator: write `{meant}`")
            }
            ParseProblem::Unsupported(u) => write!(
                f,
                "{u} is not part of the condition language greenlight reads (docs/analysis.md#conditions)"
            ),
            ParseProblem::ElementOutsidePredicate => f.write_str(
                "`#` stands for a list element only inside the predicate of all() or any()",
            ),
            ParseProblem::TooDeep => write!(
                f,
                "the condition is nested more than {MAX_HEIGHT} levels deep"
            ),
            ParseProblem::PredicatesTooDeep => write!(
                f,
                "predicates are nested more than {MAX_PREDICATE_NESTING} deep"
            ),
        }
    }
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Expected::Operand => {
                "a value (a number, a string, true, false, nil, result, a function call or `(`)"
            }
            Expected::ClosingParen => "`)`",
            Expected::ClosingBracket => "`]`",
            Expected::ClosingBrace => "`}`",
            Expected::CommaOrClosingParen => "`,` or `)`",
            Expected::OperatorOrEnd => "an operator or the end of the condition",
        })
    }
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unsupported::Power(op) => write!(f, "the power operator `{op}`"),
            Unsupported::Ternary => f.write_str("the conditional operator `? :`"),
            Unsupported::NilCoalescing => f.write_str("the operator `??`"),
            Unsupported::OptionalChaining => f.write_str("optional chaining `?.`"),
            Unsupported::MemberAccess => f.write_str("member access `.`"),
            Unsupported::Slice => f.write_str("slicing `[a:b]`"),
            Unsupported::Range => f.write_str("the range operator `..`"),
            Unsupported::ListLiteral => f.write_str("a list literal `[...]`"),
            Unsupported::MapLiteral => f.write_str(
                "a map literal `{...}` (braces hold only the predicate of all() or any())",
            ),
            Unsupported::Pipe => f.write_str("the pipe operator `|`"),
            Unsupported::Let => f.write_str("`let` and `;`"),
            Unsupported::WordOperator(w) if w == "not" => {
                f.write_str("`not` after a value (`not in`, `not matches`)")
            }
            Unsupported::WordOperator(w) => write!(f, "the operator `{w}`"),
            Unsupported::SingleCharacter(c) => write!(f, "`{c}`"),
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Type::Int => "an integer",
            Type::Float => "a number",
            Type::Bool => "a boolean",
            Type::Str => "a string",
            Type::Nil => "nil",
            Type::List => "a list of numbers",
        })
    }
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.pos, self.problem)
    }
}

impl std::error::Error for EvalError {}

/// Said when a list meets an operator for numbers.
const VECTOR_HINT: &str = "a vector query's result is a list: compare one element (`result[0]`) \
                           or every element (`all(result, {# < 1})`)";
/// Said when a number is indexed or given where a list belongs.
const SCALAR_HINT: &str = "a scalar query's result is a number: use `result` itself";

impl fmt::Display for EvalProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalProblem::UnknownName(n) => {
                write!(f, "unknown name `{n}`: the only variable is `result`")
            }
            EvalProblem::UnknownFunction(n) => {
                write!(f, "unknown function `{n}`: the functions are {FUNCTIONS}")
            }
            EvalProblem::UnsupportedFunction(n) => write!(
                f,
                "`{n}` is not part of the condition language greenlight reads: the functions are {FUNCTIONS}"
            ),
            EvalProblem::WrongArgumentCount {
                function,
                expected,
                found,
            } => {
                let s = if *expected == 1 { "" } else { "s" };
                write!(
                    f,
                    "`{function}` takes {expected} argument{s}, given {found}"
                )
            }
            EvalProblem::Argument { function, found } => {
                let takes = match function.as_str() {
                    "len" => "a list or a string",
                    "all" | "any" => "a list as its first argument",
                    _ => "a number",
                };
                write!(f, "`{function}` takes {takes}, not {found}")?;
                if *found == Type::Float && takes != "a number" {
                    write!(f, " ({SCALAR_HINT})")?;
                }
                if *found == Type::List && takes == "a number" {
                    write!(f, " ({VECTOR_HINT})")?;
                }
                Ok(())
            }
            EvalProblem::Operand { op, found } => {
                write!(f, "`{op}` does not apply to {found}")?;
                if *found == Type::List {
                    write!(f, " ({VECTOR_HINT})")?;
                }
                Ok(())
            }
            EvalProblem::Operands { op, left, right } => {
                write!(f, "`{op}` does not apply to {left} and {right}")?;
                if *left == Type::List || *right == Type::List {
                    write!(f, " ({VECTOR_HINT})")?;
                } else if *op == "%" {
                    f.write_str(" (`%` takes integers)")?;
                }
                Ok(())
            }
            EvalProblem::NotIndexable(t) => {
                write!(f, "cannot index {t}")?;
                if *t == Type::Float {
                    write!(f, " ({SCALAR_HINT}, not `result[0]`)")?;
                }
                Ok(())
            }
            EvalProblem::IndexNotInteger(t) => write!(f, "an index must be an integer, not {t}"),
            EvalProblem::NegativeIndex(i) => write!(
                f,
                "index {i} is negative: greenlight does not count from the end of a list"
            ),
            EvalProblem::IndexOutOfRange { index, len } => {
                let s = if *len == 1 { "" } else { "s" };
                write!(
                    f,
                    "index {index} is out of range: the list has {len} element{s}"
                )
            }
            EvalProblem::IntegerModuloByZero => f.write_str("integer modulo by zero"),
            EvalProblem::PredicateNotBoolean(t) => {
                write!(f, "a predicate must be a boolean, not {t}")
            }
            EvalProblem::PredicateMissing(n) if n.is_empty() => {
                f.write_str("a predicate is allowed only as the second argument of all() or any()")
            }
            EvalProblem::PredicateMissing(n) => {
                write!(f, "`{n}` takes a predicate as its second argument")
            }
            EvalProblem::NotABoolean(t) => {
                write!(f, "a condition must be a boolean, not {t}")
            }
        }
    }
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::Missing { name } => {
                write!(
                    f,
                    "argument \"{name}\" has no value ({{{{args.{name}}}}} uses it)"
                )
            }
            ArgError::NotAnArgument { placeholder } => write!(
                f,
                "{{{{{placeholder}}}}} is not an argument: placeholders are written {{{{args.<name>}}}}"
            ),
            ArgError::Unterminated { column } => {
                write!(f, "column {column}: `{{{{` is not closed by `}}}}`")
            }
        }
    }
}

impl std::error::Error for ArgError {}

/// A condition's text and whether it held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub source: String,
    pub holds: bool,
}

/// Why a measurement came out as it did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MeasurementReason {
    /// The conditions that are set, evaluated.
    Evaluated {
        success: Option<Held>,
        failure: Option<Held>,
    },
    /// The provider's own words.
    ProviderError(String),
    /// Argo Rollouts' judgment was Successful, but on a value that measured nothing: the
    /// measurement is Inconclusive unless the metric allows no data (`allowed`).
    MeasuredNothing {
        nothing: NoData,
        allowed: bool,
        success: Option<Held>,
        failure: Option<Held>,
    },
    /// A condition could not be evaluated against the result.
    ConditionError {
        which: Which,
        source: String,
        /// The result was an empty vector.
        empty_result: bool,
        error: EvalError,
    },
}

impl fmt::Display for MeasurementReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MeasurementReason::Evaluated {
                success: None,
                failure: None,
            } => f.write_str(
                "no successCondition or failureCondition: Successful unless the query fails",
            ),
            MeasurementReason::Evaluated { success, failure } => {
                let said = |which: Which, held: &Held| {
                    format!("{} \"{}\" is {}", which.field(), held.source, held.holds)
                };
                let parts: Vec<String> = [
                    success.as_ref().map(|h| said(Which::Success, h)),
                    failure.as_ref().map(|h| said(Which::Failure, h)),
                ]
                .into_iter()
                .flatten()
                .collect();
                f.write_str(&parts.join(" and "))?;
                if success.as_ref().is_some_and(|h| h.holds)
                    && failure.as_ref().is_some_and(|h| h.holds)
                {
                    f.write_str(": the failureCondition wins")?;
                }
                Ok(())
            }
            MeasurementReason::ProviderError(message) => f.write_str(message),
            MeasurementReason::MeasuredNothing {
                nothing,
                allowed,
                success,
                failure,
            } => {
                let evaluated = MeasurementReason::Evaluated {
                    success: success.clone(),
                    failure: failure.clone(),
                };
                if *allowed {
                    write!(f, "{nothing}, accepted by allowNoData: {evaluated}")
                } else {
                    write!(
                        f,
                        "{nothing}: {evaluated}, which Argo Rollouts would pass; Inconclusive \
                         here, as a check that measured nothing is never a pass \
                         (allowNoData: true accepts it)"
                    )
                }
            }
            MeasurementReason::ConditionError {
                which,
                source,
                empty_result: true,
                ..
            } => write!(
                f,
                "could not evaluate {} \"{source}\": metric result is nil or empty: no data \
                 returned from the metric provider",
                which.field()
            ),
            MeasurementReason::ConditionError {
                which,
                source,
                error,
                ..
            } => write!(
                f,
                "could not evaluate {} \"{source}\": {error}",
                which.field()
            ),
        }
    }
}

/// The words for a value that measured nothing.
impl fmt::Display for NoData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NoData::EmptyResult => "measured nothing (empty result)",
            NoData::NaN => "measured nothing (NaN)",
        })
    }
}

/// Why a metric completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assessment {
    /// Failed.
    FailureLimit { failed: u32, limit: u32 },
    /// Inconclusive.
    InconclusiveLimit { inconclusive: u32, limit: u32 },
    /// Error.
    ConsecutiveErrorLimit { errors: u32, limit: u32 },
    /// Successful.
    ConsecutiveSuccessLimit { successes: u32, limit: u32 },
    /// Inconclusive: `count` reached with both limits in force and neither decided.
    CountReachedBothLimits {
        count: u32,
        successes: u32,
        success_limit: u32,
        failed: u32,
        failure_limit: u32,
    },
    /// Failed: `count` reached without the successes in a row the only limit asks for.
    CountReachedWithoutSuccesses {
        count: u32,
        successes: u32,
        success_limit: u32,
    },
    /// Successful: `count` reached within the failure limit.
    CountReached { count: u32 },
    /// Successful: the run was terminated before the metric completed.
    Terminated,
    /// Inconclusive: the limits would end the metric Successful, but none of its `count`
    /// measurements measured anything (the last as `nothing`), and it does not allow that.
    MeasuredNothing { count: u32, nothing: NoData },
}

impl Assessment {
    pub fn phase(&self) -> Phase {
        match self {
            Assessment::FailureLimit { .. } | Assessment::CountReachedWithoutSuccesses { .. } => {
                Phase::Failed
            }
            Assessment::InconclusiveLimit { .. }
            | Assessment::CountReachedBothLimits { .. }
            | Assessment::MeasuredNothing { .. } => Phase::Inconclusive,
            Assessment::ConsecutiveErrorLimit { .. } => Phase::Error,
            Assessment::ConsecutiveSuccessLimit { .. }
            | Assessment::CountReached { .. }
            | Assessment::Terminated => Phase::Successful,
        }
    }
}

/// What follows "due to" in a metric's message.
impl fmt::Display for Assessment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Assessment::FailureLimit { failed, limit } => {
                write!(f, "failed ({failed}) > failureLimit ({limit})")
            }
            Assessment::InconclusiveLimit {
                inconclusive,
                limit,
            } => write!(
                f,
                "inconclusive ({inconclusive}) > inconclusiveLimit ({limit})"
            ),
            Assessment::ConsecutiveErrorLimit { errors, limit } => write!(
                f,
                "consecutiveErrors ({errors}) > consecutiveErrorLimit ({limit})"
            ),
            Assessment::ConsecutiveSuccessLimit { successes, limit } => write!(
                f,
                "consecutiveSuccesses ({successes}) >= consecutiveSuccessLimit ({limit})"
            ),
            Assessment::CountReachedBothLimits {
                count,
                successes,
                success_limit,
                failed,
                failure_limit,
            } => write!(
                f,
                "count ({count}) reached with consecutiveSuccesses ({successes}) < \
                 consecutiveSuccessLimit ({success_limit}) and failed ({failed}) <= \
                 failureLimit ({failure_limit})"
            ),
            Assessment::CountReachedWithoutSuccesses {
                count,
                successes,
                success_limit,
            } => write!(
                f,
                "count ({count}) reached with consecutiveSuccesses ({successes}) < \
                 consecutiveSuccessLimit ({success_limit})"
            ),
            Assessment::CountReached { count } => write!(f, "count ({count}) reached"),
            Assessment::Terminated => f.write_str("run terminated"),
            Assessment::MeasuredNothing { count, nothing } => write!(
                f,
                "count ({count}) reached but no measurement measured anything, the last \
                 {nothing}"
            ),
        }
    }
}

/// Argo Rollouts' sentence for a completed metric.
pub(crate) struct MetricMessage<'a> {
    pub name: &'a str,
    pub assessment: &'a Assessment,
    /// The last measurement's message, when it was an Error.
    pub error: Option<&'a str>,
    /// How the last measurement measured nothing, when it did and that was not allowed.
    pub nothing: Option<NoData>,
}

impl fmt::Display for MetricMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Metric \"{}\" assessed {} due to {}",
            self.name,
            self.assessment.phase(),
            self.assessment
        )?;
        if let Some(error) = self.error {
            write!(f, ": \"Error Message: {error}\"")?;
        }
        if let Some(nothing) = self.nothing
            && !matches!(self.assessment, Assessment::MeasuredNothing { .. })
        {
            write!(
                f,
                ": {nothing}, never a pass unless the check allows it (allowNoData: true)"
            )?;
        }
        Ok(())
    }
}

/// Why a run's spec is refused; the run is then an Error before anything is measured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecError {
    NoMetrics,
    DuplicateName {
        name: String,
    },
    Metric {
        name: String,
        problem: MetricProblem,
    },
    /// A dry-run rule that names no metric (a typo would otherwise let the metric decide).
    DryRunMatchesNothing {
        rule: String,
    },
    DuplicateDryRunRule {
        rule: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetricProblem {
    EmptyName,
    IntervalNotPositive {
        ms: i64,
    },
    InitialDelayNegative {
        ms: i64,
    },
    CountWithoutInterval {
        count: u32,
    },
    FailureLimitBelowMinusOne {
        limit: i32,
    },
    NegativeLimit {
        field: &'static str,
        limit: i32,
    },
    /// `failureLimit: -1` and `consecutiveSuccessLimit: 0`: nothing could end the metric.
    NoLimitApplies,
    CountBelowLimit {
        count: u32,
        field: &'static str,
        limit: u32,
    },
    Condition {
        which: Which,
        error: ParseError,
    },
    /// A condition that parses but is not a boolean for a scalar result nor for a vector one.
    ConditionNeverEvaluates {
        which: Which,
        error: EvalError,
    },
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecError::NoMetrics => f.write_str("no metrics specified"),
            SpecError::DuplicateName { name } => {
                write!(f, "two metrics are named \"{name}\"")
            }
            SpecError::Metric {
                problem: MetricProblem::EmptyName,
                ..
            } => f.write_str("a metric has no name"),
            SpecError::Metric { name, problem } => write!(f, "metric \"{name}\": {problem}"),
            SpecError::DryRunMatchesNothing { rule } => {
                write!(f, "dryRun rule \"{rule}\" matches no metric")
            }
            SpecError::DuplicateDryRunRule { rule } => {
                write!(f, "dryRun rule \"{rule}\" is given twice")
            }
        }
    }
}

impl std::error::Error for SpecError {}

impl fmt::Display for MetricProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetricProblem::EmptyName => f.write_str("the name is empty"),
            MetricProblem::IntervalNotPositive { ms } => {
                write!(f, "interval must be positive, not {ms} ms")
            }
            MetricProblem::InitialDelayNegative { ms } => {
                write!(f, "initialDelay must not be negative, not {ms} ms")
            }
            MetricProblem::CountWithoutInterval { count } => {
                write!(f, "interval must be specified when count ({count}) > 1")
            }
            MetricProblem::FailureLimitBelowMinusOne { limit } => write!(
                f,
                "failureLimit must be >= 0, or -1 to disable it, not {limit}"
            ),
            MetricProblem::NegativeLimit { field, limit } => {
                write!(f, "{field} must be >= 0, not {limit}")
            }
            MetricProblem::NoLimitApplies => f.write_str(
                "failureLimit is -1 and consecutiveSuccessLimit is 0: at least one must apply",
            ),
            MetricProblem::CountBelowLimit {
                count,
                field,
                limit,
            } => write!(f, "count ({count}) must be >= {field} ({limit})"),
            MetricProblem::Condition { which, error } => {
                write!(f, "{} does not parse: {error}", which.field())
            }
            MetricProblem::ConditionNeverEvaluates { which, error } => write!(
                f,
                "{} cannot be evaluated for any result: {error}",
                which.field()
            ),
        }
    }
}
