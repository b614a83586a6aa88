//! Placeholders in the promotion gate's text fields, in Argo Rollouts' syntax (`{{name}}`,
//! blanks inside the braces allowed): `{{args.NAME}}`, resolved once when the configuration is
//! read, and `{{candidate.service}}`, `{{candidate.namespace}}`, `{{candidate.port}}`,
//! `{{candidate.image}}`, resolved when the candidate exists.
//!
//! Must never: leave a placeholder it does not know in the text, or resolve a substituted value
//! again (a value containing `{{…}}` is text, as in Argo Rollouts).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The placeholders a [`Template`] may hold, resolved from the candidate at run time.
pub const CANDIDATE_PLACEHOLDERS: [&str; 4] = [
    "candidate.service",
    "candidate.namespace",
    "candidate.port",
    "candidate.image",
];

/// What a placeholder in a text field is wrong about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("`{{{{` is never closed by `}}}}`")]
    Unclosed,
    #[error(
        "unknown placeholder `{{{{{0}}}}}` (known: {{{{candidate.service}}}}, {{{{candidate.namespace}}}}, {{{{candidate.port}}}}, {{{{candidate.image}}}}, {{{{args.NAME}}}})"
    )]
    Unknown(String),
    #[error(
        "`{{{{{0}}}}}` is not resolved in an Argo Rollouts AnalysisTemplate (only `{{{{args.NAME}}}}` are); pass it in as an arg value from the promotion config"
    )]
    CandidateInAnalysisTemplate(String),
    #[error("`{{{{args.{0}}}}}` names an arg that is not given")]
    MissingArg(String),
}

/// The candidate's values for the placeholders, known once it has been created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateValues {
    pub service: String,
    pub namespace: String,
    pub port: u16,
    pub image: String,
}

/// Text whose placeholders are all `{{candidate.*}}` ones (args already resolved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template(String);

impl Template {
    pub fn new(text: impl Into<String>) -> Result<Template, TemplateError> {
        let text = text.into();
        for piece in pieces(&text)? {
            if let Piece::Tag(tag) = piece
                && !CANDIDATE_PLACEHOLDERS.contains(&tag)
            {
                return Err(TemplateError::Unknown(tag.to_string()));
            }
        }
        Ok(Template(text))
    }

    /// The text as written, placeholders included.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The text with the candidate's values in place of the placeholders.
    pub fn render(&self, c: &CandidateValues) -> String {
        let Ok(pieces) = pieces(&self.0) else {
            unreachable!("a Template was checked when it was made")
        };
        let mut out = String::with_capacity(self.0.len());
        for piece in pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Tag("candidate.service") => out.push_str(&c.service),
                Piece::Tag("candidate.namespace") => out.push_str(&c.namespace),
                Piece::Tag("candidate.port") => out.push_str(&c.port.to_string()),
                Piece::Tag("candidate.image") => out.push_str(&c.image),
                Piece::Tag(other) => unreachable!("unknown placeholder {other} in a Template"),
            }
        }
        out
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where the text being resolved comes from: the promotion config may use the candidate's
/// placeholders directly; an Argo Rollouts AnalysisTemplate, used as is, only `{{args.NAME}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    PromotionConfig,
    AnalysisTemplate,
}

/// Substitutes `{{args.NAME}}` with `args[NAME]`, in one pass, and keeps `{{candidate.*}}` for
/// run time (from the promotion config only). Returns the text and the args it used.
pub fn resolve_args(
    text: &str,
    args: &BTreeMap<String, String>,
    origin: Origin,
) -> Result<(String, BTreeSet<String>), TemplateError> {
    let mut out = String::with_capacity(text.len());
    let mut used = BTreeSet::new();
    for piece in pieces(text)? {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Tag(tag) => {
                if let Some(name) = tag.strip_prefix("args.") {
                    let value = args
                        .get(name)
                        .ok_or_else(|| TemplateError::MissingArg(name.to_string()))?;
                    out.push_str(value);
                    used.insert(name.to_string());
                } else if CANDIDATE_PLACEHOLDERS.contains(&tag) {
                    if origin == Origin::AnalysisTemplate {
                        return Err(TemplateError::CandidateInAnalysisTemplate(tag.to_string()));
                    }
                    out.push_str("{{");
                    out.push_str(tag);
                    out.push_str("}}");
                } else {
                    return Err(TemplateError::Unknown(tag.to_string()));
                }
            }
        }
    }
    Ok((out, used))
}

/// Every `{{args.NAME}}` a text refers to (for telling a user which args a query needs).
pub fn arg_names(text: &str) -> Result<BTreeSet<String>, TemplateError> {
    Ok(pieces(text)?
        .into_iter()
        .filter_map(|p| match p {
            Piece::Tag(tag) => tag.strip_prefix("args.").map(str::to_string),
            Piece::Text(_) => None,
        })
        .collect())
}

enum Piece<'t> {
    Text(&'t str),
    /// A placeholder's name, blanks trimmed.
    Tag(&'t str),
}

fn pieces(text: &str) -> Result<Vec<Piece<'_>>, TemplateError> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        if open > 0 {
            out.push(Piece::Text(&rest[..open]));
        }
        let after = &rest[open + 2..];
        let close = after.find("}}").ok_or(TemplateError::Unclosed)?;
        out.push(Piece::Tag(after[..close].trim()));
        rest = &after[close + 2..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> CandidateValues {
        CandidateValues {
            service: "web-candidate".into(),
            namespace: "shop".into(),
            port: 8080,
            image: "ghcr.io/acme/web@sha256:abc".into(),
        }
    }

    #[test]
    fn candidate_placeholders_render_with_or_without_blanks() {
        let t = Template::new(
            "http://{{candidate.service}}.{{ candidate.namespace }}.svc:{{candidate.port}}/?i={{candidate.image}}",
        )
        .unwrap();
        assert_eq!(
            t.render(&values()),
            "http://web-candidate.shop.svc:8080/?i=ghcr.io/acme/web@sha256:abc"
        );
        assert_eq!(
            Template::new("no placeholders").unwrap().render(&values()),
            "no placeholders"
        );
    }

    #[test]
    fn unknown_and_unclosed_placeholders_are_refused() {
        assert_eq!(
            Template::new("{{candidate.host}}"),
            Err(TemplateError::Unknown("candidate.host".into()))
        );
        assert_eq!(
            Template::new("x {{candidate.port"),
            Err(TemplateError::Unclosed)
        );
        assert_eq!(
            Template::new("{{args.service}}"),
            Err(TemplateError::Unknown("args.service".into()))
        );
    }

    #[test]
    fn args_resolve_once_and_keep_candidate_placeholders_for_later() {
        let args = BTreeMap::from([
            ("service".to_string(), "{{candidate.service}}".to_string()),
            ("loop".to_string(), "{{args.loop}}".to_string()),
        ]);
        let (text, used) = resolve_args(
            r#"rate(x{svc="{{ args.service }}",ns="{{candidate.namespace}}"}[1m])"#,
            &args,
            Origin::PromotionConfig,
        )
        .unwrap();
        assert_eq!(
            text,
            r#"rate(x{svc="{{candidate.service}}",ns="{{candidate.namespace}}"}[1m])"#
        );
        assert_eq!(used, BTreeSet::from(["service".to_string()]));
        // A value is text: it is not resolved a second time.
        let (text, _) = resolve_args("{{args.loop}}", &args, Origin::PromotionConfig).unwrap();
        assert_eq!(text, "{{args.loop}}");
        assert_eq!(
            resolve_args("{{args.missing}}", &args, Origin::PromotionConfig),
            Err(TemplateError::MissingArg("missing".into()))
        );
        assert_eq!(
            resolve_args("{{candidate.port}}", &args, Origin::AnalysisTemplate),
            Err(TemplateError::CandidateInAnalysisTemplate(
                "candidate.port".into()
            ))
        );
        assert_eq!(
            arg_names("{{args.a}} {{ args.b }} {{candidate.port}}").unwrap(),
            BTreeSet::from(["a".to_string(), "b".to_string()])
        );
    }
}
