//! The condition language: the subset of expr-lang that `successCondition` and
//! `failureCondition` are written in (`docs/analysis.md#conditions`). It owns parsing, a type
//! check against the shape of the result (a number for a scalar query, a list of numbers for a
//! vector) and evaluation. It must never panic, loop or recurse without bound on any text: a
//! condition is user input, and the nesting it accepts is capped ([`MAX_HEIGHT`]).
//!
//! Like expr-lang, a condition is type-checked before it runs, so `false && result[0] > "x"`
//! is an error even though evaluation would never reach the right-hand side. Errors are typed
//! here and worded in [`super::reason`].

use std::borrow::Cow;

/// The deepest expression accepted: a condition nested deeper (parentheses, operators, calls)
/// is refused when parsed, which bounds every recursion below.
pub const MAX_HEIGHT: u32 = 100;
/// How many `all`/`any` predicates may nest inside one another. Each level multiplies the work
/// by the length of the list, so the cap keeps evaluation time bounded too.
pub const MAX_PREDICATE_NESTING: u32 = 3;

/// Where in a condition's text something is: 1-based line and column, counted in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    pub line: u32,
    pub column: u32,
}

/// What a condition's text says that the subset cannot read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub pos: Pos,
    pub problem: ParseProblem,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseProblem {
    /// `expected` names what would have been read here; `found` is the text found, `None` at
    /// the end of the condition.
    Expected {
        expected: Expected,
        found: Option<String>,
    },
    UnexpectedCharacter(char),
    UnterminatedString,
    /// A backslash escape a string may not hold, as written.
    BadEscape(String),
    /// A number written in a form the subset does not read (`0x1F`, `1_000`, `1e`).
    BadNumber(String),
    /// An integer beyond 64 bits, or a float beyond the largest finite one.
    NumberOutOfRange(String),
    /// An expr-lang feature outside the subset, named.
    Unsupported(Unsupported),
    /// `#` outside the predicate of `all`/`any`.
    ElementOutsidePredicate,
    /// Nested deeper than [`MAX_HEIGHT`].
    TooDeep,
    /// Predicates nested deeper than [`MAX_PREDICATE_NESTING`].
    PredicatesTooDeep,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    /// A value: a number, a string, `true`, `false`, `nil`, `result`, a call or `(`.
    Operand,
    ClosingParen,
    ClosingBracket,
    ClosingBrace,
    CommaOrClosingParen,
    /// After a complete operand: an operator, or nothing more.
    OperatorOrEnd,
}

/// expr-lang syntax that greenlight refuses by name rather than as a bare syntax error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unsupported {
    /// `**` or `^`.
    Power(&'static str),
    /// `a ? b : c`.
    Ternary,
    /// `a ?? b`.
    NilCoalescing,
    /// `a?.b`.
    OptionalChaining,
    /// `a.b`.
    MemberAccess,
    /// `a[1:2]`.
    Slice,
    /// `1..5`.
    Range,
    /// `[1, 2]`.
    ListLiteral,
    /// `{a: 1}` (braces outside a predicate).
    MapLiteral,
    /// `a | f()`.
    Pipe,
    /// `let x = ...;`.
    Let,
    /// A word operator: `in`, `matches`, `contains`, `startsWith`, `endsWith`, `not in`, ...
    WordOperator(String),
    /// `=`, `&` or `|` where `==`, `&&` or `||` was meant.
    SingleCharacter(&'static str),
}

/// What kind of value an expression has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    Int,
    Float,
    Bool,
    Str,
    Nil,
    /// A list of numbers: `result` for a vector query.
    List,
}

/// A value an expression evaluates to.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    Nil,
    List(Vec<f64>),
}

/// What `result` is bound to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ResultValue<'a> {
    /// A Prometheus scalar.
    Scalar(f64),
    /// A Prometheus vector (or matrix): one number per series.
    Vector(&'a [f64]),
}

impl ResultValue<'_> {
    fn ty(&self) -> Type {
        match self {
            ResultValue::Scalar(_) => Type::Float,
            ResultValue::Vector(_) => Type::List,
        }
    }
}

/// Why an expression could not be evaluated against a result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalError {
    pub pos: Pos,
    pub problem: EvalProblem,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvalProblem {
    UnknownName(String),
    UnknownFunction(String),
    /// An expr-lang built-in or an Argo Rollouts helper outside the subset.
    UnsupportedFunction(String),
    WrongArgumentCount {
        function: String,
        expected: usize,
        found: usize,
    },
    /// A function given a kind of value it does not take.
    Argument {
        function: String,
        found: Type,
    },
    /// A unary operator applied to a value it does not take.
    Operand {
        op: &'static str,
        found: Type,
    },
    /// A binary operator applied to values it does not take together.
    Operands {
        op: &'static str,
        left: Type,
        right: Type,
    },
    NotIndexable(Type),
    IndexNotInteger(Type),
    /// expr-lang counts a negative index from the end; greenlight refuses it.
    NegativeIndex(i64),
    IndexOutOfRange {
        index: i64,
        len: usize,
    },
    /// `x % 0` with integers (a float division by zero is ±Inf or NaN, never an error).
    IntegerModuloByZero,
    PredicateNotBoolean(Type),
    /// `all`/`any` called without a predicate as their second argument.
    PredicateMissing(String),
    /// A condition whose value is not a boolean.
    NotABoolean(Type),
}

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Expression {
    source: String,
    root: Node,
}

impl Expression {
    /// Parse `source`. Never panics; refuses what the subset does not hold, naming where.
    pub fn parse(source: &str) -> Result<Expression, ParseError> {
        let tokens = lex(source)?;
        let mut p = Parser {
            tokens,
            i: 0,
            predicates: 0,
        };
        let root = p.expression(0, 0)?;
        let t = p.peek();
        if t.tok != Tok::End {
            return Err(ParseError {
                pos: t.pos,
                problem: match unsupported_infix(&t.tok) {
                    Some(u) => ParseProblem::Unsupported(u),
                    None => ParseProblem::Expected {
                        expected: Expected::OperatorOrEnd,
                        found: Some(t.text.clone()),
                    },
                },
            });
        }
        Ok(Expression {
            source: source.to_string(),
            root,
        })
    }

    /// The text the expression was parsed from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The type the expression has when `result` is of `result`'s kind, or why it has none.
    pub fn check(&self, result: ResultValue<'_>) -> Result<Type, EvalError> {
        check(&self.root, result.ty(), false)
    }

    /// Type-check, then evaluate against `result`.
    pub fn evaluate(&self, result: ResultValue<'_>) -> Result<Value, EvalError> {
        self.check(result)?;
        let env = Env {
            result,
            element: None,
        };
        Ok(eval(&self.root, &env)?.into_value())
    }

    /// Evaluate as a condition: the value must be a boolean.
    pub fn condition(&self, result: ResultValue<'_>) -> Result<bool, EvalError> {
        let ty = self.check(result)?;
        if ty != Type::Bool {
            return Err(EvalError {
                pos: self.root.pos,
                problem: EvalProblem::NotABoolean(ty),
            });
        }
        let env = Env {
            result,
            element: None,
        };
        match eval(&self.root, &env)? {
            Val::Bool(b) => Ok(b),
            other => Err(EvalError {
                pos: self.root.pos,
                problem: EvalProblem::NotABoolean(other.ty()),
            }),
        }
    }

    /// Whether the expression is a condition for some result: a boolean for a scalar or for a
    /// vector. The error is the vector's when it is neither (most queries return vectors).
    pub fn check_condition_for_any_result(&self) -> Result<(), EvalError> {
        let as_condition = |r: ResultValue<'_>| match self.check(r) {
            Ok(Type::Bool) => Ok(()),
            Ok(other) => Err(EvalError {
                pos: self.root.pos,
                problem: EvalProblem::NotABoolean(other),
            }),
            Err(e) => Err(e),
        };
        match as_condition(ResultValue::Scalar(0.0)) {
            Ok(()) => Ok(()),
            Err(_) => as_condition(ResultValue::Vector(&[])),
        }
    }
}

// ------------------------------------------------------------------------------------ lexing

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Int(i64),
    Float(f64),
    Str(String),
    Ident(String),
    Punct(&'static str),
    End,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    pos: Pos,
    /// The token as written, for error messages.
    text: String,
}

/// Punctuation, longest first so that `<=` is never read as `<` `=`.
const PUNCTS: [&str; 34] = [
    "**", "==", "!=", "<=", ">=", "&&", "||", "??", "?.", "..", "+", "-", "*", "/", "%", "<", ">",
    "!", "(", ")", "[", "]", "{", "}", ",", "#", "^", "?", ":", ".", "|", "=", "&", ";",
];

fn lex(source: &str) -> Result<Vec<Token>, ParseError> {
    let chars: Vec<char> = source.chars().collect();
    // Position of each character (and of the end).
    let mut positions = Vec::with_capacity(chars.len() + 1);
    let (mut line, mut column) = (1u32, 1u32);
    for c in &chars {
        positions.push(Pos { line, column });
        if *c == '\n' {
            line = line.saturating_add(1);
            column = 1;
        } else {
            column = column.saturating_add(1);
        }
    }
    positions.push(Pos { line, column });

    let err = |at: usize, problem| ParseError {
        pos: positions[at],
        problem,
    };
    let text = |from: usize, to: usize| chars[from..to].iter().collect::<String>();

    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_ascii_digit() {
            i = scan_number(&chars, i);
            let written = text(start, i);
            // Letters or `_` straight after digits: hex, octal, binary, `1_000`, `1e`.
            if i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                return Err(err(start, ParseProblem::BadNumber(text(start, i))));
            }
            let is_float = written.contains(['.', 'e', 'E']);
            let tok = if is_float {
                match written.parse::<f64>() {
                    Ok(f) if f.is_finite() => Tok::Float(f),
                    _ => return Err(err(start, ParseProblem::NumberOutOfRange(written))),
                }
            } else {
                match written.parse::<i64>() {
                    Ok(n) => Tok::Int(n),
                    Err(_) => return Err(err(start, ParseProblem::NumberOutOfRange(written))),
                }
            };
            tokens.push(Token {
                tok,
                pos: positions[start],
                text: written,
            });
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' || c == '$' {
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '$')
            {
                i += 1;
            }
            let word = text(start, i);
            tokens.push(Token {
                tok: Tok::Ident(word.clone()),
                pos: positions[start],
                text: word,
            });
            continue;
        }
        if c == '"' || c == '\'' || c == '`' {
            let (value, end) = scan_string(&chars, i).map_err(|(at, p)| err(at, p))?;
            i = end;
            tokens.push(Token {
                tok: Tok::Str(value),
                pos: positions[start],
                text: text(start, i),
            });
            continue;
        }
        let Some(p) = PUNCTS.iter().find(|p| {
            let n = p.chars().count();
            i + n <= chars.len() && p.chars().eq(chars[i..i + n].iter().copied())
        }) else {
            return Err(err(start, ParseProblem::UnexpectedCharacter(c)));
        };
        i += p.chars().count();
        tokens.push(Token {
            tok: Tok::Punct(p),
            pos: positions[start],
            text: p.to_string(),
        });
    }
    tokens.push(Token {
        tok: Tok::End,
        pos: positions[chars.len()],
        text: String::new(),
    });
    Ok(tokens)
}

/// The end of a number starting at `i`: digits, an optional fraction (a `.` followed by a
/// digit) and an optional exponent (`e`, an optional sign, digits). An `e` without digits is
/// left for the caller to refuse.
fn scan_number(chars: &[char], mut i: usize) -> usize {
    let digits = |mut i: usize| {
        while i < chars.len() && chars[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    i = digits(i);
    if i + 1 < chars.len() && chars[i] == '.' && chars[i + 1].is_ascii_digit() {
        i = digits(i + 1);
    }
    if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
        let mut j = i + 1;
        if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
            j += 1;
        }
        if j < chars.len() && chars[j].is_ascii_digit() {
            i = digits(j);
        }
    }
    i
}

/// A string starting at `i` (its quote): its value and the index after the closing quote.
/// Backquoted strings are raw; the others take `\\ \" \' \n \r \t \uXXXX`.
fn scan_string(chars: &[char], i: usize) -> Result<(String, usize), (usize, ParseProblem)> {
    let quote = chars[i];
    let mut value = String::new();
    let mut j = i + 1;
    while j < chars.len() {
        let c = chars[j];
        if c == quote {
            return Ok((value, j + 1));
        }
        if c == '\\' && quote != '`' {
            let Some(&e) = chars.get(j + 1) else {
                return Err((i, ParseProblem::UnterminatedString));
            };
            let simple = match e {
                '\\' => Some('\\'),
                '"' => Some('"'),
                '\'' => Some('\''),
                'n' => Some('\n'),
                'r' => Some('\r'),
                't' => Some('\t'),
                _ => None,
            };
            if let Some(s) = simple {
                value.push(s);
                j += 2;
                continue;
            }
            if e == 'u' {
                let hex: String = chars.iter().skip(j + 2).take(4).collect();
                let decoded = (hex.len() == 4 && hex.chars().all(|h| h.is_ascii_hexdigit()))
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .and_then(char::from_u32);
                if let Some(d) = decoded {
                    value.push(d);
                    j += 6;
                    continue;
                }
                let written: String = chars.iter().skip(j).take(6).collect();
                return Err((j, ParseProblem::BadEscape(written)));
            }
            return Err((j, ParseProblem::BadEscape(format!("\\{e}"))));
        }
        value.push(c);
        j += 1;
    }
    Err((i, ParseProblem::UnterminatedString))
}

// ----------------------------------------------------------------------------------- parsing

#[derive(Clone, Debug, PartialEq)]
struct Node {
    kind: Kind,
    pos: Pos,
    /// 1 for a leaf; one more than the highest child otherwise.
    height: u32,
}

#[derive(Clone, Debug, PartialEq)]
enum Kind {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
    Nil,
    /// `result`, or a name the type check refuses.
    Name(String),
    /// `#`: the element a predicate is looking at.
    Element,
    Unary(UnOp, Box<Node>),
    Binary(BinOp, Box<Node>, Box<Node>),
    Index(Box<Node>, Box<Node>),
    Call(String, Vec<Node>),
    /// The body of a predicate (`{# > 1}` or `# > 1`), only as `all`/`any`'s second argument.
    Predicate(Box<Node>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UnOp {
    Neg,
    Plus,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl UnOp {
    fn symbol(self) -> &'static str {
        match self {
            UnOp::Neg => "-",
            UnOp::Plus => "+",
            UnOp::Not => "!",
        }
    }
}

impl BinOp {
    fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "||",
            BinOp::And => "&&",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
        }
    }
}

/// expr-lang's binding strengths: `||` 10, `&&` 15, comparisons 20, `+ -` 30, `* / %` 60; all
/// left-associative. The unary `!`/`not` binds at 50 and `-`/`+` at 90.
fn binary_op(tok: &Tok) -> Option<(BinOp, u8)> {
    let op = match tok {
        Tok::Punct("||") => BinOp::Or,
        Tok::Ident(w) if w == "or" => BinOp::Or,
        Tok::Punct("&&") => BinOp::And,
        Tok::Ident(w) if w == "and" => BinOp::And,
        Tok::Punct("==") => BinOp::Eq,
        Tok::Punct("!=") => BinOp::Ne,
        Tok::Punct("<") => BinOp::Lt,
        Tok::Punct("<=") => BinOp::Le,
        Tok::Punct(">") => BinOp::Gt,
        Tok::Punct(">=") => BinOp::Ge,
        Tok::Punct("+") => BinOp::Add,
        Tok::Punct("-") => BinOp::Sub,
        Tok::Punct("*") => BinOp::Mul,
        Tok::Punct("/") => BinOp::Div,
        Tok::Punct("%") => BinOp::Rem,
        _ => return None,
    };
    let precedence = match op {
        BinOp::Or => 10,
        BinOp::And => 15,
        BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 20,
        BinOp::Add | BinOp::Sub => 30,
        BinOp::Mul | BinOp::Div | BinOp::Rem => 60,
    };
    Some((op, precedence))
}

/// expr-lang operators that may follow an operand but are outside the subset.
fn unsupported_infix(tok: &Tok) -> Option<Unsupported> {
    Some(match tok {
        Tok::Punct("**") => Unsupported::Power("**"),
        Tok::Punct("^") => Unsupported::Power("^"),
        Tok::Punct("?") => Unsupported::Ternary,
        Tok::Punct("??") => Unsupported::NilCoalescing,
        Tok::Punct("?.") => Unsupported::OptionalChaining,
        Tok::Punct(".") => Unsupported::MemberAccess,
        Tok::Punct("..") => Unsupported::Range,
        Tok::Punct("|") => Unsupported::Pipe,
        Tok::Punct("=") => Unsupported::SingleCharacter("="),
        Tok::Punct("&") => Unsupported::SingleCharacter("&"),
        Tok::Punct(";") => Unsupported::Let,
        Tok::Ident(w)
            if matches!(
                w.as_str(),
                "in" | "matches" | "contains" | "startsWith" | "endsWith" | "not"
            ) =>
        {
            Unsupported::WordOperator(w.clone())
        }
        _ => return None,
    })
}

/// expr-lang built-ins whose second argument is a predicate: parsed as one so that the type
/// check can name the function rather than stumble on its `#`.
const PREDICATE_BUILTINS: [&str; 11] = [
    "all",
    "any",
    "none",
    "one",
    "filter",
    "map",
    "count",
    "find",
    "findIndex",
    "findLast",
    "findLastIndex",
];

struct Parser {
    tokens: Vec<Token>,
    i: usize,
    /// How many predicates enclose the current position.
    predicates: u32,
}

type PResult = Result<Node, ParseError>;

fn node(kind: Kind, pos: Pos) -> PResult {
    let height = 1 + match &kind {
        Kind::Int(_)
        | Kind::Float(_)
        | Kind::Str(_)
        | Kind::Bool(_)
        | Kind::Nil
        | Kind::Name(_)
        | Kind::Element => 0,
        Kind::Unary(_, n) | Kind::Predicate(n) => n.height,
        Kind::Binary(_, l, r) | Kind::Index(l, r) => l.height.max(r.height),
        Kind::Call(_, args) => args.iter().map(|a| a.height).max().unwrap_or(0),
    };
    if height > MAX_HEIGHT {
        return Err(ParseError {
            pos,
            problem: ParseProblem::TooDeep,
        });
    }
    Ok(Node { kind, pos, height })
}

impl Parser {
    fn peek(&self) -> &Token {
        // `lex` always ends the list with `End`, and nothing moves past it.
        &self.tokens[self.i.min(self.tokens.len() - 1)]
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if t.tok != Tok::End {
            self.i += 1;
        }
        t
    }

    fn error_here(&self, problem: ParseProblem) -> ParseError {
        ParseError {
            pos: self.peek().pos,
            problem,
        }
    }

    fn expected(&self, expected: Expected) -> ParseError {
        let t = self.peek();
        let found = (t.tok != Tok::End).then(|| t.text.clone());
        self.error_here(ParseProblem::Expected { expected, found })
    }

    fn expect(&mut self, punct: &'static str, expected: Expected) -> Result<(), ParseError> {
        if self.peek().tok == Tok::Punct(punct) {
            self.bump();
            Ok(())
        } else {
            Err(self.expected(expected))
        }
    }

    /// Operators binding at least as strongly as `min`, by precedence climbing. `depth` counts
    /// the levels of nesting, which parentheses grow without growing the tree: one per
    /// parenthesis, operand, argument or index.
    fn expression(&mut self, min: u8, depth: u32) -> PResult {
        if depth > MAX_HEIGHT {
            return Err(self.error_here(ParseProblem::TooDeep));
        }
        let mut left = self.unary(depth)?;
        loop {
            let t = self.peek();
            let Some((op, precedence)) = binary_op(&t.tok) else {
                if let Some(u) = unsupported_infix(&t.tok) {
                    return Err(self.error_here(ParseProblem::Unsupported(u)));
                }
                break;
            };
            if precedence < min {
                break;
            }
            let pos = self.bump().pos;
            let right = self.expression(precedence + 1, depth + 1)?;
            left = node(Kind::Binary(op, Box::new(left), Box::new(right)), pos)?;
        }
        Ok(left)
    }

    fn unary(&mut self, depth: u32) -> PResult {
        if depth > MAX_HEIGHT {
            return Err(self.error_here(ParseProblem::TooDeep));
        }
        let t = self.peek();
        let (op, precedence) = match &t.tok {
            Tok::Punct("!") => (UnOp::Not, 50),
            Tok::Ident(w) if w == "not" => (UnOp::Not, 50),
            Tok::Punct("-") => (UnOp::Neg, 90),
            Tok::Punct("+") => (UnOp::Plus, 90),
            _ => {
                let primary = self.primary(depth)?;
                return self.postfix(primary, depth);
            }
        };
        let pos = self.bump().pos;
        let operand = self.expression(precedence, depth + 1)?;
        node(Kind::Unary(op, Box::new(operand)), pos)
    }

    fn primary(&mut self, depth: u32) -> PResult {
        let t = self.peek().clone();
        match &t.tok {
            Tok::Int(n) => {
                self.bump();
                node(Kind::Int(*n), t.pos)
            }
            Tok::Float(f) => {
                self.bump();
                node(Kind::Float(*f), t.pos)
            }
            Tok::Str(s) => {
                self.bump();
                node(Kind::Str(s.clone()), t.pos)
            }
            Tok::Ident(w) => match w.as_str() {
                "true" | "false" => {
                    self.bump();
                    node(Kind::Bool(w == "true"), t.pos)
                }
                "nil" => {
                    self.bump();
                    node(Kind::Nil, t.pos)
                }
                "let" => Err(self.error_here(ParseProblem::Unsupported(Unsupported::Let))),
                "and" | "or" | "in" | "matches" | "contains" | "startsWith" | "endsWith" => {
                    Err(self.expected(Expected::Operand))
                }
                _ => {
                    self.bump();
                    if self.peek().tok == Tok::Punct("(") {
                        self.call(w.clone(), t.pos, depth)
                    } else {
                        node(Kind::Name(w.clone()), t.pos)
                    }
                }
            },
            Tok::Punct("(") => {
                self.bump();
                let inner = self.expression(0, depth + 1)?;
                self.expect(")", Expected::ClosingParen)?;
                Ok(inner)
            }
            Tok::Punct("#") => {
                if self.predicates == 0 {
                    return Err(self.error_here(ParseProblem::ElementOutsidePredicate));
                }
                self.bump();
                node(Kind::Element, t.pos)
            }
            Tok::Punct("[") => {
                Err(self.error_here(ParseProblem::Unsupported(Unsupported::ListLiteral)))
            }
            Tok::Punct("{") => {
                Err(self.error_here(ParseProblem::Unsupported(Unsupported::MapLiteral)))
            }
            Tok::Punct("|") => {
                Err(self.error_here(ParseProblem::Unsupported(Unsupported::SingleCharacter("|"))))
            }
            _ => Err(self.expected(Expected::Operand)),
        }
    }

    fn postfix(&mut self, mut target: Node, depth: u32) -> PResult {
        loop {
            match self.peek().tok {
                Tok::Punct("[") => {
                    let pos = self.bump().pos;
                    if self.peek().tok == Tok::Punct(":") {
                        return Err(self.error_here(ParseProblem::Unsupported(Unsupported::Slice)));
                    }
                    let index = self.expression(0, depth + 1)?;
                    if self.peek().tok == Tok::Punct(":") {
                        return Err(self.error_here(ParseProblem::Unsupported(Unsupported::Slice)));
                    }
                    self.expect("]", Expected::ClosingBracket)?;
                    target = node(Kind::Index(Box::new(target), Box::new(index)), pos)?;
                }
                Tok::Punct(".") => {
                    return Err(
                        self.error_here(ParseProblem::Unsupported(Unsupported::MemberAccess))
                    );
                }
                Tok::Punct("?.") => {
                    return Err(
                        self.error_here(ParseProblem::Unsupported(Unsupported::OptionalChaining))
                    );
                }
                _ => return Ok(target),
            }
        }
    }

    fn call(&mut self, name: String, pos: Pos, depth: u32) -> PResult {
        self.bump(); // `(`
        let mut args = Vec::new();
        if self.peek().tok == Tok::Punct(")") {
            self.bump();
            return node(Kind::Call(name, args), pos);
        }
        loop {
            let arg = if args.len() == 1 && PREDICATE_BUILTINS.contains(&name.as_str()) {
                self.predicate(depth + 1)?
            } else {
                self.expression(0, depth + 1)?
            };
            args.push(arg);
            match self.peek().tok {
                Tok::Punct(",") => {
                    self.bump();
                }
                Tok::Punct(")") => {
                    self.bump();
                    return node(Kind::Call(name, args), pos);
                }
                _ => return Err(self.expected(Expected::CommaOrClosingParen)),
            }
        }
    }

    /// `{ body }` or a bare `body`, in which `#` is the element.
    fn predicate(&mut self, depth: u32) -> PResult {
        let pos = self.peek().pos;
        if self.predicates >= MAX_PREDICATE_NESTING {
            return Err(self.error_here(ParseProblem::PredicatesTooDeep));
        }
        self.predicates += 1;
        let body = if self.peek().tok == Tok::Punct("{") {
            self.bump();
            let body = self.expression(0, depth + 1);
            let closed = body.and_then(|b| self.expect("}", Expected::ClosingBrace).map(|_| b));
            self.predicates -= 1;
            closed?
        } else {
            let body = self.expression(0, depth + 1);
            self.predicates -= 1;
            body?
        };
        node(Kind::Predicate(Box::new(body)), pos)
    }
}

// ------------------------------------------------------------------------------- type check

fn is_number(t: Type) -> bool {
    matches!(t, Type::Int | Type::Float)
}

/// expr-lang's built-ins and Argo Rollouts' helpers that the subset leaves out: refused by
/// name, not as unknown.
const UNSUPPORTED_FUNCTIONS: [&str; 38] = [
    "none",
    "one",
    "filter",
    "map",
    "count",
    "find",
    "findIndex",
    "findLast",
    "findLastIndex",
    "sum",
    "mean",
    "median",
    "min",
    "max",
    "ceil",
    "floor",
    "round",
    "int",
    "float",
    "string",
    "trim",
    "upper",
    "lower",
    "split",
    "join",
    "first",
    "last",
    "keys",
    "values",
    "now",
    "duration",
    "date",
    "type",
    "reduce",
    "asInt",
    "asFloat",
    "isNil",
    "default",
];

fn check(n: &Node, result: Type, in_predicate: bool) -> Result<Type, EvalError> {
    let fail = |problem| {
        Err(EvalError {
            pos: n.pos,
            problem,
        })
    };
    match &n.kind {
        Kind::Int(_) => Ok(Type::Int),
        Kind::Float(_) => Ok(Type::Float),
        Kind::Str(_) => Ok(Type::Str),
        Kind::Bool(_) => Ok(Type::Bool),
        Kind::Nil => Ok(Type::Nil),
        Kind::Name(name) if name == "result" => Ok(result),
        Kind::Name(name) => fail(EvalProblem::UnknownName(name.clone())),
        // The parser admits `#` only inside a predicate; list elements are numbers.
        Kind::Element => Ok(Type::Float),
        Kind::Unary(op, operand) => {
            let t = check(operand, result, in_predicate)?;
            match (op, t) {
                (UnOp::Not, Type::Bool) => Ok(Type::Bool),
                (UnOp::Neg | UnOp::Plus, Type::Int | Type::Float) => Ok(t),
                _ => fail(EvalProblem::Operand {
                    op: op.symbol(),
                    found: t,
                }),
            }
        }
        Kind::Binary(op, l, r) => {
            let (lt, rt) = (
                check(l, result, in_predicate)?,
                check(r, result, in_predicate)?,
            );
            let mismatch = || {
                fail(EvalProblem::Operands {
                    op: op.symbol(),
                    left: lt,
                    right: rt,
                })
            };
            match op {
                BinOp::Or | BinOp::And if lt == Type::Bool && rt == Type::Bool => Ok(Type::Bool),
                BinOp::Eq | BinOp::Ne
                    if (is_number(lt) && is_number(rt))
                        || lt == rt
                        || lt == Type::Nil
                        || rt == Type::Nil =>
                {
                    Ok(Type::Bool)
                }
                BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
                    if (is_number(lt) && is_number(rt)) || (lt == Type::Str && rt == Type::Str) =>
                {
                    Ok(Type::Bool)
                }
                BinOp::Add if lt == Type::Str && rt == Type::Str => Ok(Type::Str),
                BinOp::Add | BinOp::Sub | BinOp::Mul if is_number(lt) && is_number(rt) => {
                    Ok(if lt == Type::Int && rt == Type::Int {
                        Type::Int
                    } else {
                        Type::Float
                    })
                }
                BinOp::Div if is_number(lt) && is_number(rt) => Ok(Type::Float),
                BinOp::Rem if lt == Type::Int && rt == Type::Int => Ok(Type::Int),
                _ => mismatch(),
            }
        }
        Kind::Index(target, index) => {
            let tt = check(target, result, in_predicate)?;
            let it = check(index, result, in_predicate)?;
            if tt != Type::List {
                return fail(EvalProblem::NotIndexable(tt));
            }
            if it != Type::Int {
                return fail(EvalProblem::IndexNotInteger(it));
            }
            Ok(Type::Float)
        }
        Kind::Call(name, args) => check_call(n, name, args, result, in_predicate),
        // Only `check_call` looks inside a predicate; one anywhere else is not a value.
        Kind::Predicate(_) => fail(EvalProblem::PredicateMissing(String::new())),
    }
}

fn check_call(
    n: &Node,
    name: &str,
    args: &[Node],
    result: Type,
    in_predicate: bool,
) -> Result<Type, EvalError> {
    let fail = |problem| {
        Err(EvalError {
            pos: n.pos,
            problem,
        })
    };
    let arity = |expected: usize| {
        if args.len() == expected {
            Ok(())
        } else {
            Err(EvalError {
                pos: n.pos,
                problem: EvalProblem::WrongArgumentCount {
                    function: name.to_string(),
                    expected,
                    found: args.len(),
                },
            })
        }
    };
    let argument = |found| {
        fail(EvalProblem::Argument {
            function: name.to_string(),
            found,
        })
    };
    match name {
        "len" | "isNaN" | "isInf" | "abs" => {
            arity(1)?;
            let t = check(&args[0], result, in_predicate)?;
            match (name, t) {
                ("len", Type::List | Type::Str) => Ok(Type::Int),
                ("isNaN" | "isInf", Type::Int | Type::Float) => Ok(Type::Bool),
                ("abs", Type::Int | Type::Float) => Ok(t),
                _ => argument(t),
            }
        }
        "all" | "any" => {
            arity(2)?;
            let t = check(&args[0], result, in_predicate)?;
            if t != Type::List {
                return argument(t);
            }
            let Kind::Predicate(body) = &args[1].kind else {
                return fail(EvalProblem::PredicateMissing(name.to_string()));
            };
            match check(body, result, true)? {
                Type::Bool => Ok(Type::Bool),
                other => Err(EvalError {
                    pos: body.pos,
                    problem: EvalProblem::PredicateNotBoolean(other),
                }),
            }
        }
        _ if UNSUPPORTED_FUNCTIONS.contains(&name) => {
            fail(EvalProblem::UnsupportedFunction(name.to_string()))
        }
        _ => fail(EvalProblem::UnknownFunction(name.to_string())),
    }
}

// -------------------------------------------------------------------------------- evaluation

/// A value during evaluation: `result`'s list and literal strings are borrowed.
#[derive(Clone, Debug)]
enum Val<'a> {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(Cow<'a, str>),
    Nil,
    List(&'a [f64]),
}

impl Val<'_> {
    fn ty(&self) -> Type {
        match self {
            Val::Int(_) => Type::Int,
            Val::Float(_) => Type::Float,
            Val::Bool(_) => Type::Bool,
            Val::Str(_) => Type::Str,
            Val::Nil => Type::Nil,
            Val::List(_) => Type::List,
        }
    }

    fn into_value(self) -> Value {
        match self {
            Val::Int(n) => Value::Int(n),
            Val::Float(f) => Value::Float(f),
            Val::Bool(b) => Value::Bool(b),
            Val::Str(s) => Value::Str(s.into_owned()),
            Val::Nil => Value::Nil,
            Val::List(l) => Value::List(l.to_vec()),
        }
    }

    fn as_f64(&self) -> Option<f64> {
        match self {
            Val::Int(n) => Some(*n as f64),
            Val::Float(f) => Some(*f),
            _ => None,
        }
    }
}

struct Env<'a> {
    result: ResultValue<'a>,
    element: Option<f64>,
}

/// Evaluate a node that passed the type check. Combinations the check refuses still return an
/// error here rather than panic.
fn eval<'a>(n: &'a Node, env: &Env<'a>) -> Result<Val<'a>, EvalError> {
    let fail = |problem| {
        Err(EvalError {
            pos: n.pos,
            problem,
        })
    };
    match &n.kind {
        Kind::Int(v) => Ok(Val::Int(*v)),
        Kind::Float(v) => Ok(Val::Float(*v)),
        Kind::Str(s) => Ok(Val::Str(Cow::Borrowed(s))),
        Kind::Bool(b) => Ok(Val::Bool(*b)),
        Kind::Nil => Ok(Val::Nil),
        Kind::Name(name) if name == "result" => Ok(match env.result {
            ResultValue::Scalar(f) => Val::Float(f),
            ResultValue::Vector(v) => Val::List(v),
        }),
        Kind::Name(name) => fail(EvalProblem::UnknownName(name.clone())),
        Kind::Element => match env.element {
            Some(f) => Ok(Val::Float(f)),
            None => fail(EvalProblem::UnknownName("#".to_string())),
        },
        Kind::Unary(op, operand) => {
            let v = eval(operand, env)?;
            match (op, v) {
                (UnOp::Not, Val::Bool(b)) => Ok(Val::Bool(!b)),
                (UnOp::Neg, Val::Int(i)) => Ok(Val::Int(i.wrapping_neg())),
                (UnOp::Neg, Val::Float(f)) => Ok(Val::Float(-f)),
                (UnOp::Plus, v @ (Val::Int(_) | Val::Float(_))) => Ok(v),
                (_, v) => fail(EvalProblem::Operand {
                    op: op.symbol(),
                    found: v.ty(),
                }),
            }
        }
        Kind::Binary(op, l, r) => eval_binary(n, *op, l, r, env),
        Kind::Index(target, index) => {
            let (t, i) = (eval(target, env)?, eval(index, env)?);
            match (t, i) {
                (Val::List(list), Val::Int(i)) => {
                    if i < 0 {
                        return fail(EvalProblem::NegativeIndex(i));
                    }
                    match usize::try_from(i).ok().and_then(|u| list.get(u)) {
                        Some(f) => Ok(Val::Float(*f)),
                        None => fail(EvalProblem::IndexOutOfRange {
                            index: i,
                            len: list.len(),
                        }),
                    }
                }
                (Val::List(_), i) => fail(EvalProblem::IndexNotInteger(i.ty())),
                (t, _) => fail(EvalProblem::NotIndexable(t.ty())),
            }
        }
        Kind::Call(name, args) => eval_call(n, name, args, env),
        Kind::Predicate(_) => fail(EvalProblem::PredicateMissing(String::new())),
    }
}

fn eval_binary<'a>(
    n: &'a Node,
    op: BinOp,
    l: &'a Node,
    r: &'a Node,
    env: &Env<'a>,
) -> Result<Val<'a>, EvalError> {
    let fail = |problem| {
        Err(EvalError {
            pos: n.pos,
            problem,
        })
    };
    let left = eval(l, env)?;
    // `&&` and `||` stop early, as expr-lang's do (the type check has already run).
    match (op, &left) {
        (BinOp::And, Val::Bool(false)) => return Ok(Val::Bool(false)),
        (BinOp::Or, Val::Bool(true)) => return Ok(Val::Bool(true)),
        _ => {}
    }
    let right = eval(r, env)?;
    let mismatch = |left: &Val, right: &Val| {
        fail(EvalProblem::Operands {
            op: op.symbol(),
            left: left.ty(),
            right: right.ty(),
        })
    };
    match op {
        BinOp::And | BinOp::Or => match right {
            Val::Bool(b) if matches!(left, Val::Bool(_)) => Ok(Val::Bool(b)),
            _ => mismatch(&left, &right),
        },
        BinOp::Eq | BinOp::Ne => match equal(&left, &right) {
            Some(eq) => Ok(Val::Bool(eq == (op == BinOp::Eq))),
            None => mismatch(&left, &right),
        },
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
            let ordering = match (&left, &right) {
                (Val::Int(a), Val::Int(b)) => Some(a.partial_cmp(b)),
                (Val::Str(a), Val::Str(b)) => Some(a.partial_cmp(b)),
                _ => match (left.as_f64(), right.as_f64()) {
                    // NaN compares false with everything, as in Go.
                    (Some(a), Some(b)) => Some(a.partial_cmp(&b)),
                    _ => None,
                },
            };
            let Some(ordering) = ordering else {
                return mismatch(&left, &right);
            };
            Ok(Val::Bool(ordering.is_some_and(|o| match op {
                BinOp::Lt => o.is_lt(),
                BinOp::Le => o.is_le(),
                BinOp::Gt => o.is_gt(),
                _ => o.is_ge(),
            })))
        }
        BinOp::Add | BinOp::Sub | BinOp::Mul => match (&left, &right) {
            (Val::Str(a), Val::Str(b)) if op == BinOp::Add => {
                Ok(Val::Str(Cow::Owned(format!("{a}{b}"))))
            }
            // Integers wrap on overflow, as Go's do.
            (Val::Int(a), Val::Int(b)) => Ok(Val::Int(match op {
                BinOp::Add => a.wrapping_add(*b),
                BinOp::Sub => a.wrapping_sub(*b),
                _ => a.wrapping_mul(*b),
            })),
            _ => match (left.as_f64(), right.as_f64()) {
                (Some(a), Some(b)) => Ok(Val::Float(match op {
                    BinOp::Add => a + b,
                    BinOp::Sub => a - b,
                    _ => a * b,
                })),
                _ => mismatch(&left, &right),
            },
        },
        // `/` is always a float division: x/0 is ±Inf, 0/0 is NaN.
        BinOp::Div => match (left.as_f64(), right.as_f64()) {
            (Some(a), Some(b)) => Ok(Val::Float(a / b)),
            _ => mismatch(&left, &right),
        },
        BinOp::Rem => match (&left, &right) {
            (Val::Int(_), Val::Int(0)) => fail(EvalProblem::IntegerModuloByZero),
            (Val::Int(a), Val::Int(b)) => Ok(Val::Int(a.wrapping_rem(*b))),
            _ => mismatch(&left, &right),
        },
    }
}

/// `==` as expr-lang has it: numbers by value whatever their kind, lists element by element,
/// `nil` equal only to `nil`; `None` for kinds that cannot be compared.
fn equal(a: &Val, b: &Val) -> Option<bool> {
    Some(match (a, b) {
        (Val::Int(x), Val::Int(y)) => x == y,
        (Val::Str(x), Val::Str(y)) => x == y,
        (Val::Bool(x), Val::Bool(y)) => x == y,
        (Val::Nil, Val::Nil) => true,
        (Val::Nil, _) | (_, Val::Nil) => false,
        (Val::List(x), Val::List(y)) => x.len() == y.len() && x.iter().zip(*y).all(|(p, q)| p == q),
        _ => match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => return None,
        },
    })
}

fn eval_call<'a>(
    n: &'a Node,
    name: &str,
    args: &'a [Node],
    env: &Env<'a>,
) -> Result<Val<'a>, EvalError> {
    let fail = |problem| {
        Err(EvalError {
            pos: n.pos,
            problem,
        })
    };
    let argument = |v: &Val| {
        fail(EvalProblem::Argument {
            function: name.to_string(),
            found: v.ty(),
        })
    };
    let Some(first) = args.first() else {
        return fail(EvalProblem::WrongArgumentCount {
            function: name.to_string(),
            expected: if matches!(name, "all" | "any") { 2 } else { 1 },
            found: 0,
        });
    };
    let v = eval(first, env)?;
    match name {
        "len" => match v {
            Val::List(l) => Ok(Val::Int(l.len() as i64)),
            Val::Str(s) => Ok(Val::Int(s.len() as i64)),
            other => argument(&other),
        },
        "isNaN" => match v {
            Val::Float(f) => Ok(Val::Bool(f.is_nan())),
            Val::Int(_) => Ok(Val::Bool(false)),
            other => argument(&other),
        },
        "isInf" => match v {
            Val::Float(f) => Ok(Val::Bool(f.is_infinite())),
            Val::Int(_) => Ok(Val::Bool(false)),
            other => argument(&other),
        },
        "abs" => match v {
            Val::Float(f) => Ok(Val::Float(f.abs())),
            Val::Int(i) => Ok(Val::Int(i.wrapping_abs())),
            other => argument(&other),
        },
        "all" | "any" => {
            let Val::List(list) = v else {
                return argument(&v);
            };
            let Some(Kind::Predicate(body)) = args.get(1).map(|a| &a.kind) else {
                return fail(EvalProblem::PredicateMissing(name.to_string()));
            };
            let want = name == "any";
            for x in list {
                let inner = Env {
                    result: env.result,
                    element: Some(*x),
                };
                match eval(body, &inner)? {
                    Val::Bool(b) if b == want => return Ok(Val::Bool(want)),
                    Val::Bool(_) => {}
                    other => {
                        return Err(EvalError {
                            pos: body.pos,
                            problem: EvalProblem::PredicateNotBoolean(other.ty()),
                        });
                    }
                }
            }
            Ok(Val::Bool(!want))
        }
        _ if UNSUPPORTED_FUNCTIONS.contains(&name) => {
            fail(EvalProblem::UnsupportedFunction(name.to_string()))
        }
        _ => fail(EvalProblem::UnknownFunction(name.to_string())),
    }
}
