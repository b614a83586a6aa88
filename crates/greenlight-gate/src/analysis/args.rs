//! `{{args.name}}` placeholders (`docs/analysis.md#arguments`): Argo Rollouts replaces them in
//! a metric's query and conditions before anything runs. Every `{{ ... }}` must name an
//! argument that has a value; anything else is an error naming it, never left in the text.

use std::collections::BTreeMap;

/// Why a text's placeholders could not all be replaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgError {
    /// `{{args.name}}` with no value for `name`.
    Missing { name: String },
    /// `{{ ... }}` holding something other than `args.<name>`, as written between the braces.
    NotAnArgument { placeholder: String },
    /// `{{` with no `}}` after it; `column` is 1-based, in characters.
    Unterminated { column: usize },
}

/// `text` with every `{{args.name}}` (spaces inside the braces allowed) replaced by the value
/// of `name` in `args`. A replaced value is inserted as is and never scanned again.
pub fn substitute_args(text: &str, args: &BTreeMap<String, String>) -> Result<String, ArgError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut consumed = 0usize; // characters of `text` before `rest`
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after_open = &rest[open + 2..];
        let Some(close) = after_open.find("}}") else {
            return Err(ArgError::Unterminated {
                column: consumed + rest[..open].chars().count() + 1,
            });
        };
        let inner = &after_open[..close];
        let tag = inner.trim();
        let Some(name) = tag.strip_prefix("args.") else {
            return Err(ArgError::NotAnArgument {
                placeholder: inner.to_string(),
            });
        };
        let Some(value) = args.get(name) else {
            return Err(ArgError::Missing {
                name: name.to_string(),
            });
        };
        out.push_str(value);
        let used = open + 2 + close + 2;
        consumed += rest[..used].chars().count();
        rest = &rest[used..];
    }
    out.push_str(rest);
    Ok(out)
}
