//! The condition language of docs/analysis.md#conditions: what it accepts, what it means, what
//! it refuses and how it says so. Written from the documented subset (expr-lang's meaning, Go's
//! float arithmetic), not from the parser.

use greenlight_gate::analysis::expr::{
    EvalProblem, Expected, MAX_HEIGHT, ParseProblem, Pos, Type, Unsupported,
};
use greenlight_gate::analysis::{Expression, ResultValue, Value};

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;

fn parse(src: &str) -> Expression {
    Expression::parse(src).unwrap_or_else(|e| panic!("{src:?} does not parse: {e}"))
}

fn holds(src: &str, result: ResultValue<'_>) -> bool {
    parse(src)
        .condition(result)
        .unwrap_or_else(|e| panic!("{src:?} against {result:?}: {e}"))
}

fn value(src: &str) -> Value {
    parse(src)
        .evaluate(ResultValue::Scalar(0.0))
        .unwrap_or_else(|e| panic!("{src:?}: {e}"))
}

fn vector(v: &[f64]) -> ResultValue<'_> {
    ResultValue::Vector(v)
}

fn scalar(f: f64) -> ResultValue<'static> {
    ResultValue::Scalar(f)
}

fn parse_problem(src: &str) -> (Pos, ParseProblem) {
    match Expression::parse(src) {
        Ok(_) => panic!("{src:?} parsed"),
        Err(e) => (e.pos, e.problem),
    }
}

fn eval_problem(src: &str, result: ResultValue<'_>) -> EvalProblem {
    match parse(src).condition(result) {
        Ok(b) => panic!("{src:?} evaluated to {b}"),
        Err(e) => e.problem,
    }
}

fn col(column: u32) -> Pos {
    Pos { line: 1, column }
}

// ------------------------------------------------------------ the conditions people write

#[test]
fn success_rate_over_a_threshold() {
    let c = "result[0] >= 0.95";
    assert!(holds(c, vector(&[0.97])));
    assert!(holds(c, vector(&[0.95])));
    assert!(!holds(c, vector(&[0.94])));
    assert!(!holds(c, vector(&[NAN])), "NaN compares false");
}

#[test]
fn error_rate_under_a_threshold_and_not_nan() {
    let c = "result[0] < 0.05 && !isNaN(result[0])";
    assert!(holds(c, vector(&[0.01])));
    assert!(!holds(c, vector(&[0.2])));
    assert!(!holds(c, vector(&[NAN])));
}

#[test]
fn every_series_under_a_latency_guarded_by_len() {
    let c = "len(result) > 0 && all(result, {# < 500})";
    assert!(holds(c, vector(&[120.0, 480.0])));
    assert!(!holds(c, vector(&[120.0, 501.0])));
    assert!(!holds(c, vector(&[])), "len guards the empty vector");
    // Without the guard, all() of nothing is true: why the guard is written.
    assert!(holds("all(result, {# < 500})", vector(&[])));
}

#[test]
fn a_scalar_compared_directly() {
    assert!(holds("result == 1", scalar(1.0)));
    assert!(!holds("result == 1", scalar(0.0)));
    assert!(holds("result >= 0.99", scalar(1.0)));
}

#[test]
fn any_series_over_a_limit_with_a_bare_predicate() {
    let c = "any(result, # > 100)";
    assert!(holds(c, vector(&[1.0, 101.0])));
    assert!(!holds(c, vector(&[1.0, 100.0])));
    assert!(!holds(c, vector(&[])), "any() of nothing is false");
}

// ------------------------------------------------------------------------------- literals

#[test]
fn number_literals_are_integers_and_floats() {
    assert_eq!(value("42"), Value::Int(42));
    assert_eq!(value("0.5"), Value::Float(0.5));
    assert_eq!(value("1e-3"), Value::Float(0.001));
    assert_eq!(value("2E+2"), Value::Float(200.0));
    assert_eq!(value("1.5e2"), Value::Float(150.0));
}

#[test]
fn strings_booleans_and_nil() {
    assert_eq!(value(r"'it\'s'"), Value::Str("it's".into()));
    assert_eq!(value(r#""a\"b\n""#), Value::Str("a\"b\n".into()));
    assert_eq!(value(r"'\u00e9'"), Value::Str("é".into()));
    assert_eq!(value("`raw\\n`"), Value::Str("raw\\n".into()));
    assert_eq!(value("true"), Value::Bool(true));
    assert_eq!(value("false"), Value::Bool(false));
    assert_eq!(value("nil"), Value::Nil);
}

// ---------------------------------------------------------------------------- arithmetic

#[test]
fn arithmetic_follows_expr_lang() {
    assert_eq!(value("1 + 2"), Value::Int(3));
    assert_eq!(value("1 + 2.5"), Value::Float(3.5));
    assert_eq!(value("7 - 10"), Value::Int(-3));
    assert_eq!(value("3 * 4"), Value::Int(12));
    assert_eq!(
        value("7 / 2"),
        Value::Float(3.5),
        "`/` is always a float division"
    );
    assert_eq!(value("7 % 3"), Value::Int(1));
    assert_eq!(
        value("-7 % 3"),
        Value::Int(-1),
        "Go's remainder keeps the sign"
    );
    assert_eq!(value("-(2)"), Value::Int(-2));
    assert_eq!(value("+2"), Value::Int(2));
    assert_eq!(value("'a' + 'b'"), Value::Str("ab".into()));
}

#[test]
fn precedence_and_parentheses() {
    assert_eq!(value("1 + 2 * 3"), Value::Int(7));
    assert_eq!(value("(1 + 2) * 3"), Value::Int(9));
    assert_eq!(value("10 - 2 - 3"), Value::Int(5), "left-associative");
    assert_eq!(value("-2 * 3"), Value::Int(-6));
    assert_eq!(value("1 < 2 == true"), Value::Bool(true));
    // `!` binds looser than `*` and tighter than comparisons, as in expr-lang.
    assert_eq!(value("!true == false"), Value::Bool(true));
    assert_eq!(
        value("true || false && false"),
        Value::Bool(true),
        "&& before ||"
    );
}

#[test]
fn division_by_zero_is_inf_or_nan_as_in_go() {
    assert!(holds("isInf(result / 0)", scalar(1.0)));
    assert!(holds("result / 0 < 0", scalar(-1.0)), "-Inf");
    assert!(holds("isNaN(0 / 0)", scalar(0.0)));
    assert!(holds("isNaN(result / 0)", scalar(0.0)));
}

#[test]
fn nan_compares_false_and_is_unequal_to_itself() {
    let nan = vector(&[NAN]);
    for c in [
        "result[0] == result[0]",
        "result[0] < 1",
        "result[0] <= 1",
        "result[0] > 1",
        "result[0] >= 1",
        "result[0] == 1",
    ] {
        assert!(!holds(c, nan), "{c}");
    }
    assert!(holds("result[0] != result[0]", nan));
    assert!(
        !holds("result == result", nan),
        "lists compare element by element"
    );
}

#[test]
fn integers_wrap_on_overflow_as_in_go() {
    assert!(holds("9223372036854775807 + 1 < 0", scalar(0.0)));
}

#[test]
fn functions_len_isnan_isinf_abs() {
    assert_eq!(value("len('abc')"), Value::Int(3));
    assert!(holds("len(result) == 3", vector(&[1.0, 2.0, 3.0])));
    assert!(holds(
        "isInf(result[0]) && isInf(result[1])",
        vector(&[INF, -INF])
    ));
    assert!(!holds("isInf(result)", scalar(1e308)));
    assert!(holds("isNaN(result)", scalar(NAN)));
    assert!(!holds("isNaN(1)", scalar(0.0)), "an integer is never NaN");
    assert_eq!(value("abs(-2)"), Value::Int(2));
    assert!(holds("abs(result) == 1.5", scalar(-1.5)));
}

#[test]
fn logic_in_symbols_and_words() {
    assert!(holds("true and not false", scalar(0.0)));
    assert!(holds("false or true", scalar(0.0)));
    assert!(holds("!(1 > 2) && (2 > 1 || false)", scalar(0.0)));
    assert!(holds("not (result > 1)", scalar(0.0)));
}

#[test]
fn strings_compare_and_nil_is_equal_only_to_nil() {
    assert!(holds("'a' < 'b' && 'b' >= 'b'", scalar(0.0)));
    assert!(holds("result != nil && nil == nil", scalar(0.0)));
    assert!(holds("result != nil", vector(&[])));
}

#[test]
fn predicates_nest_and_hash_is_the_innermost_element() {
    let c = "all(result, {any(result, {# >= 0})})";
    assert!(holds(c, vector(&[-1.0, 2.0])));
    assert!(!holds(c, vector(&[-1.0, -2.0])));
    assert!(holds("all(result, # > 0 && # < 10)", vector(&[1.0, 9.0])));
}

#[test]
fn and_or_stop_early_so_len_guards_an_index() {
    assert!(!holds("len(result) > 0 && result[0] > 1", vector(&[])));
    assert!(holds("len(result) == 0 || result[0] > 1", vector(&[])));
}

#[test]
fn a_condition_spread_over_lines_parses() {
    assert!(holds(
        "len(result) > 0\n  && result[0] < 0.05",
        vector(&[0.01])
    ));
}

// ---------------------------------------------------------------------------- parse errors

#[test]
fn a_parse_error_names_the_column_and_what_was_expected() {
    let (pos, problem) = parse_problem("result[0] >=");
    assert_eq!(pos, col(13));
    assert_eq!(
        problem,
        ParseProblem::Expected {
            expected: Expected::Operand,
            found: None
        }
    );
    let e = Expression::parse("result[0] >=").unwrap_err().to_string();
    assert!(e.starts_with("column 13: expected a value"), "{e}");
    assert!(e.ends_with("found the end of the condition"), "{e}");

    let (pos, problem) = parse_problem("result[0] > 0.5)");
    assert_eq!(pos, col(16));
    assert_eq!(
        problem,
        ParseProblem::Expected {
            expected: Expected::OperatorOrEnd,
            found: Some(")".into())
        }
    );

    let (pos, problem) = parse_problem("(result[0] > 1");
    assert_eq!(pos, col(15));
    assert!(matches!(
        problem,
        ParseProblem::Expected {
            expected: Expected::ClosingParen,
            ..
        }
    ));

    let (pos, problem) = parse_problem("result[0 > 1");
    assert_eq!(pos, col(13));
    assert!(matches!(
        problem,
        ParseProblem::Expected {
            expected: Expected::ClosingBracket,
            ..
        }
    ));

    let (pos, problem) = parse_problem("all(result, {# > 1)");
    assert_eq!(pos, col(19));
    assert!(matches!(
        problem,
        ParseProblem::Expected {
            expected: Expected::ClosingBrace,
            ..
        }
    ));

    let (pos, problem) = parse_problem("len(result result)");
    assert_eq!(pos, col(12));
    assert!(matches!(
        problem,
        ParseProblem::Expected {
            expected: Expected::CommaOrClosingParen,
            ..
        }
    ));

    let (pos, _) = parse_problem("");
    assert_eq!(pos, col(1));
}

#[test]
fn a_parse_error_on_a_later_line_names_the_line() {
    let e = Expression::parse("len(result) > 0 &&\n  result[0] <").unwrap_err();
    assert_eq!(
        e.pos,
        Pos {
            line: 2,
            column: 14
        }
    );
    assert!(e.to_string().starts_with("line 2, column 14: "), "{e}");
}

#[test]
fn expr_lang_features_outside_the_subset_are_refused_by_name() {
    let cases: &[(&str, u32, Unsupported)] = &[
        ("result ** 2 > 1", 8, Unsupported::Power("**")),
        ("result ^ 2 > 1", 8, Unsupported::Power("^")),
        ("result > 1 ? true : false", 12, Unsupported::Ternary),
        ("result ?? 1", 8, Unsupported::NilCoalescing),
        ("result.value > 1", 7, Unsupported::MemberAccess),
        ("result?.value > 1", 7, Unsupported::OptionalChaining),
        ("len(result[1:]) > 0", 13, Unsupported::Slice),
        ("1..5", 2, Unsupported::Range),
        (
            "result in [1, 2]",
            8,
            Unsupported::WordOperator("in".into()),
        ),
        (
            "'ab' matches 'a'",
            6,
            Unsupported::WordOperator("matches".into()),
        ),
        (
            "'ab' contains 'a'",
            6,
            Unsupported::WordOperator("contains".into()),
        ),
        (
            "result not in [1]",
            8,
            Unsupported::WordOperator("not".into()),
        ),
        ("[1, 2] == result", 1, Unsupported::ListLiteral),
        ("{a: 1}", 1, Unsupported::MapLiteral),
        ("result | len()", 8, Unsupported::Pipe),
        ("let x = 1; x > 0", 1, Unsupported::Let),
        ("result = 1", 8, Unsupported::SingleCharacter("=")),
        ("true & false", 6, Unsupported::SingleCharacter("&")),
    ];
    for (src, column, what) in cases {
        let (pos, problem) = parse_problem(src);
        assert_eq!(
            (pos, problem),
            (col(*column), ParseProblem::Unsupported(what.clone())),
            "{src}"
        );
    }
    let e = Expression::parse("result = 1").unwrap_err().to_string();
    assert_eq!(e, "column 8: `=` is not an operator: write `==`");
    let e = Expression::parse("result ** 2 > 1")
        .unwrap_err()
        .to_string();
    assert!(e.contains("the power operator `**` is not part of"), "{e}");
}

#[test]
fn malformed_tokens_are_refused() {
    assert_eq!(
        parse_problem("0x1F == result"),
        (col(1), ParseProblem::BadNumber("0x1F".into()))
    );
    assert_eq!(
        parse_problem("1_000 > result"),
        (col(1), ParseProblem::BadNumber("1_000".into()))
    );
    assert_eq!(
        parse_problem("1e > 0"),
        (col(1), ParseProblem::BadNumber("1e".into()))
    );
    assert_eq!(
        parse_problem("result > 99999999999999999999"),
        (
            col(10),
            ParseProblem::NumberOutOfRange("99999999999999999999".into())
        )
    );
    assert_eq!(
        parse_problem("result > 1e999"),
        (col(10), ParseProblem::NumberOutOfRange("1e999".into()))
    );
    assert_eq!(
        parse_problem("result == 'abc"),
        (col(11), ParseProblem::UnterminatedString)
    );
    assert_eq!(
        parse_problem(r"'\q' == result"),
        (col(2), ParseProblem::BadEscape(r"\q".into()))
    );
    assert_eq!(
        parse_problem("result > 1 @ 2"),
        (col(12), ParseProblem::UnexpectedCharacter('@'))
    );
    assert_eq!(
        parse_problem("# > 1"),
        (col(1), ParseProblem::ElementOutsidePredicate)
    );
    assert_eq!(
        parse_problem("len(result, # > 1) > 0"),
        (col(13), ParseProblem::ElementOutsidePredicate)
    );
}

#[test]
fn nesting_is_capped_so_no_input_exhausts_the_stack() {
    let n = 10_000;
    let parens = format!("{}1{}", "(".repeat(n), ")".repeat(n));
    let sums = format!("{}1", "1 + ".repeat(n));
    let nots = format!("{}true", "!".repeat(n));
    let negs = format!("{}1", "-".repeat(n));
    let indexes = format!("result{}", "[0]".repeat(n));
    let calls = format!("{}result{}", "abs(".repeat(n), ")".repeat(n));
    for src in [parens, sums, nots, negs, indexes, calls] {
        let (_, problem) = parse_problem(&src);
        assert_eq!(problem, ParseProblem::TooDeep, "{}", &src[..20]);
    }
    // Just under the cap is fine.
    let parens = format!("{}result > 0{}", "(".repeat(90), ")".repeat(90));
    assert!(holds(&parens, scalar(1.0)));
    let sums = format!("{}1 > 0", "1 + ".repeat(MAX_HEIGHT as usize - 2));
    assert!(holds(&sums, scalar(0.0)));
}

#[test]
fn predicates_nest_at_most_three_deep() {
    let three = "all(result, {all(result, {all(result, {# > 0})})})";
    assert!(holds(three, vector(&[1.0])));
    let four = "all(result, {all(result, {all(result, {all(result, {# > 0})})})})";
    assert_eq!(parse_problem(four).1, ParseProblem::PredicatesTooDeep);
}

// ----------------------------------------------------------------------- evaluation errors

#[test]
fn indexing_a_scalar_result_is_a_type_error_that_says_so() {
    let err = parse("result[0] > 1").condition(scalar(2.0)).unwrap_err();
    assert_eq!(err.problem, EvalProblem::NotIndexable(Type::Float));
    assert_eq!(err.pos, col(7));
    let e = err.to_string();
    assert!(e.contains("scalar query's result is a number"), "{e}");
}

#[test]
fn comparing_a_vector_result_to_a_number_is_a_type_error_that_says_so() {
    let p = eval_problem("result > 1", vector(&[2.0]));
    assert_eq!(
        p,
        EvalProblem::Operands {
            op: ">",
            left: Type::List,
            right: Type::Int
        }
    );
    assert!(p.to_string().contains("result[0]"), "{p}");
}

#[test]
fn an_index_out_of_range_or_negative_is_an_error() {
    assert_eq!(
        eval_problem("result[1] > 0", vector(&[1.0])),
        EvalProblem::IndexOutOfRange { index: 1, len: 1 }
    );
    assert_eq!(
        eval_problem("result[0] > 0", vector(&[])),
        EvalProblem::IndexOutOfRange { index: 0, len: 0 }
    );
    assert_eq!(
        eval_problem("result[-1] > 0", vector(&[1.0, 2.0])),
        EvalProblem::NegativeIndex(-1)
    );
    assert_eq!(
        eval_problem("result[0.5] > 0", vector(&[1.0])),
        EvalProblem::IndexNotInteger(Type::Float)
    );
}

#[test]
fn unknown_names_and_functions_are_errors_naming_them() {
    assert_eq!(
        eval_problem("results[0] > 1", vector(&[1.0])),
        EvalProblem::UnknownName("results".into())
    );
    assert_eq!(
        eval_problem("avg(result) > 1", vector(&[1.0])),
        EvalProblem::UnknownFunction("avg".into())
    );
    for f in [
        "asInt(result) > 1",
        "default(result, 0) > 1",
        "isNil(result)",
    ] {
        assert!(
            matches!(
                eval_problem(f, scalar(1.0)),
                EvalProblem::UnsupportedFunction(_)
            ),
            "{f}"
        );
    }
    assert_eq!(
        eval_problem("len(filter(result, # > 1)) > 0", vector(&[1.0])),
        EvalProblem::UnsupportedFunction("filter".into())
    );
}

#[test]
fn wrong_arguments_are_errors() {
    assert_eq!(
        eval_problem("len(result, 1) > 0", vector(&[])),
        EvalProblem::WrongArgumentCount {
            function: "len".into(),
            expected: 1,
            found: 2
        }
    );
    assert_eq!(
        eval_problem("all(result)", vector(&[])),
        EvalProblem::WrongArgumentCount {
            function: "all".into(),
            expected: 2,
            found: 1
        }
    );
    assert_eq!(
        eval_problem("len(result) > 0", scalar(1.0)),
        EvalProblem::Argument {
            function: "len".into(),
            found: Type::Float
        }
    );
    assert_eq!(
        eval_problem("isNaN(result)", vector(&[])),
        EvalProblem::Argument {
            function: "isNaN".into(),
            found: Type::List
        }
    );
    assert_eq!(
        eval_problem("all(result, {# + 1})", vector(&[1.0])),
        EvalProblem::PredicateNotBoolean(Type::Float)
    );
}

#[test]
fn type_mismatches_are_errors() {
    assert_eq!(
        eval_problem("result > 'a'", scalar(1.0)),
        EvalProblem::Operands {
            op: ">",
            left: Type::Float,
            right: Type::Str
        }
    );
    assert_eq!(
        eval_problem("result && true", scalar(1.0)),
        EvalProblem::Operands {
            op: "&&",
            left: Type::Float,
            right: Type::Bool
        }
    );
    assert_eq!(
        eval_problem("!result", scalar(1.0)),
        EvalProblem::Operand {
            op: "!",
            found: Type::Float
        }
    );
    assert_eq!(
        eval_problem("result % 2 == 0", scalar(1.0)),
        EvalProblem::Operands {
            op: "%",
            left: Type::Float,
            right: Type::Int
        }
    );
    assert_eq!(
        eval_problem("1 % 0 == 0", scalar(1.0)),
        EvalProblem::IntegerModuloByZero
    );
}

#[test]
fn types_are_checked_before_evaluation_whatever_short_circuits() {
    assert_eq!(
        eval_problem("false && result[0] > 'x'", vector(&[1.0])),
        EvalProblem::Operands {
            op: ">",
            left: Type::Float,
            right: Type::Str
        }
    );
}

#[test]
fn a_condition_must_be_a_boolean() {
    assert_eq!(
        eval_problem("result + 1", scalar(1.0)),
        EvalProblem::NotABoolean(Type::Float)
    );
    assert_eq!(
        eval_problem("result", vector(&[1.0])),
        EvalProblem::NotABoolean(Type::List)
    );
    assert_eq!(
        parse("result + 1")
            .condition(scalar(1.0))
            .unwrap_err()
            .to_string(),
        "column 8: a condition must be a boolean, not a number"
    );
}

#[test]
fn evaluation_errors_are_worded_with_their_column() {
    let e = parse("result[3] > 1")
        .condition(vector(&[1.0]))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "column 7: index 3 is out of range: the list has 1 element"
    );
    let e = parse("foo(result)").condition(scalar(1.0)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "column 1: unknown function `foo`: the functions are len, isNaN, isInf, abs, all and any"
    );
}

#[test]
fn the_error_messages_docs_analysis_md_shows_are_the_ones_said() {
    let parse_err = |src: &str| Expression::parse(src).unwrap_err().to_string();
    let operand = "expected a value (a number, a string, true, false, nil, result, a function \
                   call or `(`), found the end of the condition";
    assert_eq!(parse_err("result[0] >="), format!("column 13: {operand}"));
    assert_eq!(
        parse_err("result[0] > 0.5)"),
        "column 16: expected an operator or the end of the condition, found `)`"
    );
    assert_eq!(
        parse_err("len(result) > 0 &&\n  result[0] <"),
        format!("line 2, column 14: {operand}")
    );
    let eval_err = |src: &str, r: ResultValue<'_>| parse(src).condition(r).unwrap_err().to_string();
    let table = [
        (
            eval_err("result[0] > 1", scalar(1.0)),
            "column 7: cannot index a number (a scalar query's result is a number: use `result` \
             itself, not `result[0]`)",
        ),
        (
            eval_err("result > 1", vector(&[1.0])),
            "column 8: `>` does not apply to a list of numbers and an integer (a vector query's \
             result is a list: compare one element (`result[0]`) or every element \
             (`all(result, {# < 1})`))",
        ),
        (
            eval_err("results[0] > 1", vector(&[1.0])),
            "column 1: unknown name `results`: the only variable is `result`",
        ),
        (
            eval_err("filter(result, # > 1)", vector(&[1.0])),
            "column 1: `filter` is not part of the condition language greenlight reads: the \
             functions are len, isNaN, isInf, abs, all and any",
        ),
        (
            eval_err("result[-1] > 0", vector(&[1.0])),
            "column 7: index -1 is negative: greenlight does not count from the end of a list",
        ),
    ];
    for (said, documented) in table {
        assert_eq!(said, documented);
    }
}

// --------------------------------------------------------------------- never panics

/// xorshift64*: enough randomness to shake the parser, and the same every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Pieces of conditions, valid and not, so that random joins reach deep into the parser.
const PIECES: &[&str] = &[
    "result",
    "result[0]",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    "#",
    ",",
    " ",
    "0",
    "1",
    "-1",
    "2.5",
    "1e-3",
    "1e",
    "0x1",
    "99999999999999999999",
    "1e999",
    "+",
    "-",
    "*",
    "/",
    "%",
    "**",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "&&",
    "||",
    "!",
    "and",
    "or",
    "not",
    "in",
    "len(",
    "isNaN(",
    "isInf(",
    "abs(",
    "all(",
    "any(",
    "filter(",
    "foo(",
    "nil",
    "true",
    "false",
    "'a'",
    "\"b\"",
    "'",
    "\"",
    "`",
    "\\",
    "\\u12",
    "?",
    ":",
    ".",
    "..",
    "|",
    "=",
    "&",
    ";",
    "let",
    "é",
    "\n",
    "\u{0}",
    "$",
    "@",
    "🙂",
];

fn assert_survives(src: &str) {
    let chars = src.chars().count() as u32;
    match Expression::parse(src) {
        Err(e) => {
            // A position inside the text, or just past its end.
            assert!(e.pos.line >= 1 && e.pos.column >= 1, "{src:?}: {e:?}");
            if e.pos.line == 1 {
                assert!(e.pos.column <= chars + 1, "{src:?}: {e:?}");
            }
            let _ = e.to_string();
        }
        Ok(expr) => {
            for result in [
                ResultValue::Scalar(1.0),
                ResultValue::Scalar(NAN),
                ResultValue::Vector(&[]),
                ResultValue::Vector(&[0.5, NAN, INF, -2.0]),
            ] {
                if let Err(e) = expr.condition(result) {
                    let _ = e.to_string();
                }
                let _ = expr.evaluate(result);
            }
        }
    }
}

#[test]
fn parse_and_evaluation_never_panic_on_random_text() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut parsed = 0;
    for _ in 0..20_000 {
        let mut src = String::new();
        for _ in 0..1 + rng.below(24) {
            src.push_str(PIECES[rng.below(PIECES.len())]);
        }
        if Expression::parse(&src).is_ok() {
            parsed += 1;
        }
        assert_survives(&src);
    }
    // The pieces are meant to reach evaluation too, not only parse errors.
    assert!(parsed > 200, "only {parsed} random conditions parsed");

    for _ in 0..20_000 {
        let len = rng.below(40);
        let src: String = (0..len)
            .map(|_| char::from_u32(rng.below(0x80) as u32).unwrap_or(' '))
            .collect();
        assert_survives(&src);
    }
}
