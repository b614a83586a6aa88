//! `.greenlight.toml`, read once for every command that reads it (`lint` and `guard`): finding
//! the file, the `[lint]` table (rule selection, severity overrides, thresholds, path
//! excludes, test directories, the mutable-tag list) and the `[guard]` table (tags refused only at dispatch).
//! Parsed with spans and validated in a second step, so every error names the file, line and
//! column of the offending value. It lives in the lint crate because `[lint]` is most of the
//! file and its mutable-tag list is shared with the guard.
//! Must never: reject tables it does not read — the same file may configure other tools.

use crate::diagnostic::Severity;
use crate::rules;
use serde::Deserialize;
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use toml::Spanned;

/// The config file read when none is named and it exists (in the current directory).
pub const DEFAULT_FILE: &str = ".greenlight.toml";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

impl std::error::Error for ConfigError {}

/// Why the config file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A named file is missing, or any file exists but cannot be read: not a regular file (a
    /// FIFO, `/dev/zero`), larger than [`CONFIG_LIMIT`], not UTF-8.
    #[error("cannot read config file {file}: {error}")]
    Read {
        file: String,
        /// The reason in words, shown in the message rather than chained, so that the message
        /// reads whole.
        error: String,
    },
    /// The file is not valid: bad TOML, a wrong type, an unknown rule, …
    #[error("config file {0}")]
    Invalid(ConfigError),
}

/// Everything greenlight reads from the config file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    pub lint: LintConfig,
    pub guard: GuardConfig,
}

/// Validated `[guard]` settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuardConfig {
    /// Tags refused at dispatch only, on top of `[lint] mutable-tags`.
    pub mutable_tags: Vec<String>,
}

impl Config {
    /// The tags `greenlight guard image` refuses on top of its defaults: `[lint]
    /// mutable-tags`, the list the lint rule uses, so that lint and guard agree, then
    /// `[guard] mutable-tags` for tags refused only at dispatch.
    pub fn guard_mutable_tags(&self) -> impl Iterator<Item = &str> {
        self.lint
            .mutable_tags
            .iter()
            .chain(&self.guard.mutable_tags)
            .map(String::as_str)
    }
}

#[derive(Deserialize, Default)]
struct RawFile {
    #[serde(default)]
    lint: Option<RawLint>,
    #[serde(default)]
    guard: Option<RawGuard>,
}

/// Unknown `[guard]` keys are ignored, as they were before this reader took the table over.
#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct RawGuard {
    #[serde(default)]
    mutable_tags: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawLint {
    select: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    extend_select: Vec<Spanned<String>>,
    #[serde(default)]
    ignore: Vec<Spanned<String>>,
    fail_on: Option<Spanned<String>>,
    #[serde(default)]
    exclude: Vec<Spanned<String>>,
    include_tests: Option<bool>,
    #[serde(default)]
    mutable_tags: Vec<String>,
    #[serde(default)]
    immutable_tags: Vec<String>,
    #[serde(default)]
    severity: HashMap<String, Spanned<String>>,
    #[serde(default)]
    thresholds: RawThresholds,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawThresholds {
    initial_delay_seconds: Option<Spanned<i64>>,
    strategy_max_replicas: Option<Spanned<i64>>,
}

/// Validated `[lint]` settings. Rule IDs are canonical (`GL101`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LintConfig {
    pub select: Option<Vec<&'static str>>,
    pub extend_select: Vec<&'static str>,
    pub ignore: Vec<&'static str>,
    pub fail_on: Option<FailOn>,
    pub exclude: Vec<String>,
    /// Lint files in test directories found while walking (`include-tests`).
    pub include_tests: bool,
    pub mutable_tags: Vec<String>,
    /// Tags the team never pushes twice (`immutable-tags`): a word like `blue` that names no
    /// version is then not mutable, for lint and guard alike.
    pub immutable_tags: Vec<String>,
    pub severity: HashMap<&'static str, Severity>,
    pub initial_delay_seconds: Option<i64>,
    pub strategy_max_replicas: Option<i64>,
}

/// The lowest severity that makes `greenlight lint` exit 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailOn {
    Error,
    Warning,
    Never,
}

impl FailOn {
    pub fn parse(s: &str) -> Option<FailOn> {
        match s {
            "error" => Some(FailOn::Error),
            "warning" => Some(FailOn::Warning),
            "never" => Some(FailOn::Never),
            _ => None,
        }
    }

    pub fn fails(self, s: Severity) -> bool {
        match self {
            FailOn::Error => s >= Severity::Error,
            FailOn::Warning => s >= Severity::Warning,
            FailOn::Never => false,
        }
    }
}

/// The 1-based line and column (in characters) of byte `offset` in `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// The most a config file may hold: 1 MiB. `lint` reads [`DEFAULT_FILE`] from the current
/// directory, which a pull request controls: a FIFO or a link to `/dev/zero` there must not
/// hang or exhaust a CI runner.
pub const CONFIG_LIMIT: u64 = greenlight_files::CONFIG_LIMIT;

/// Reads the config file: `explicit` when given (it must exist), otherwise [`DEFAULT_FILE`]
/// when it exists. No file at all is the default configuration. Only a regular file of at most
/// [`CONFIG_LIMIT`] bytes is read.
pub fn load(explicit: Option<&Path>) -> Result<Config, LoadError> {
    let path = explicit.unwrap_or(Path::new(DEFAULT_FILE));
    let file = path.display().to_string();
    let what = if explicit.is_some() {
        "--config"
    } else {
        DEFAULT_FILE
    };
    let text = match greenlight_files::read_text(path, CONFIG_LIMIT, what) {
        Ok(text) => text,
        Err(e)
            if explicit.is_none()
                && matches!(&e.problem, greenlight_files::Problem::Io(io)
                    if io.kind() == std::io::ErrorKind::NotFound) =>
        {
            return Ok(Config::default());
        }
        Err(e) => {
            return Err(LoadError::Read {
                file,
                error: e.reason(),
            });
        }
    };
    parse(&file, &text).map_err(LoadError::Invalid)
}

/// Parse and validate the text of a config file named `file`.
pub fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
    let err_at = |offset: usize, message: String| {
        let (line, column) = line_col(text, offset);
        ConfigError {
            file: file.to_string(),
            line,
            column,
            message,
        }
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        err_at(offset, e.message().trim().to_string())
    })?;
    let guard = GuardConfig {
        mutable_tags: raw.guard.map(|g| g.mutable_tags).unwrap_or_default(),
    };
    let Some(raw) = raw.lint else {
        return Ok(Config {
            lint: LintConfig::default(),
            guard,
        });
    };
    let rule_ids = |list: &[Spanned<String>]| -> Result<Vec<&'static str>, ConfigError> {
        list.iter()
            .map(|s| {
                rules::find(s.get_ref()).map(|r| r.id).ok_or_else(|| {
                    err_at(
                        s.span().start,
                        format!("unknown rule `{}` (see `greenlight rules`)", s.get_ref()),
                    )
                })
            })
            .collect()
    };
    let mut cfg = LintConfig {
        select: raw.select.as_deref().map(rule_ids).transpose()?,
        extend_select: rule_ids(&raw.extend_select)?,
        ignore: rule_ids(&raw.ignore)?,
        mutable_tags: raw.mutable_tags,
        immutable_tags: raw.immutable_tags,
        include_tests: raw.include_tests.unwrap_or(false),
        ..LintConfig::default()
    };
    if let Some(f) = &raw.fail_on {
        cfg.fail_on = Some(FailOn::parse(f.get_ref()).ok_or_else(|| {
            err_at(
                f.span().start,
                format!(
                    "fail-on must be \"error\", \"warning\" or \"never\", not {:?}",
                    f.get_ref()
                ),
            )
        })?);
    }
    for pattern in &raw.exclude {
        if pattern.get_ref().trim().is_empty() {
            return Err(err_at(
                pattern.span().start,
                "an empty exclude pattern matches nothing".into(),
            ));
        }
        cfg.exclude.push(pattern.get_ref().clone());
    }
    // Validate severity entries in file order so the first error reported is the first written.
    let mut entries: Vec<(&String, &Spanned<String>)> = raw.severity.iter().collect();
    entries.sort_by_key(|(_, v)| v.span().start);
    for (id, value) in entries {
        let rule = rules::find(id).ok_or_else(|| {
            let at = text[..value.span().start]
                .rfind(id.as_str())
                .unwrap_or(value.span().start);
            err_at(
                at,
                format!("unknown rule `{id}` in [lint.severity] (see `greenlight rules`)"),
            )
        })?;
        let sev = Severity::parse(value.get_ref()).ok_or_else(|| {
            err_at(
                value.span().start,
                format!(
                    "severity must be \"error\", \"warning\" or \"info\", not {:?}",
                    value.get_ref()
                ),
            )
        })?;
        cfg.severity.insert(rule.id, sev);
    }
    let positive = |v: &Option<Spanned<i64>>, name: &str| -> Result<Option<i64>, ConfigError> {
        match v {
            Some(s) if *s.get_ref() < 1 => {
                Err(err_at(s.span().start, format!("{name} must be at least 1")))
            }
            Some(s) => Ok(Some(*s.get_ref())),
            None => Ok(None),
        }
    };
    cfg.initial_delay_seconds = positive(
        &raw.thresholds.initial_delay_seconds,
        "initial-delay-seconds",
    )?;
    cfg.strategy_max_replicas = positive(
        &raw.thresholds.strategy_max_replicas,
        "strategy-max-replicas",
    )?;
    Ok(Config { lint: cfg, guard })
}

/// Whether `path` (with `/` separators) matches a glob: `*` within a segment, `**` across
/// segments, `?` one character. A pattern without `/` matches the file name or any directory name.
pub fn glob_match(pattern: &str, path: &str) -> bool {
    let path = path.strip_prefix("./").unwrap_or(path);
    let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
    if !pattern.contains('/') {
        return path
            .split('/')
            .any(|seg| segment_match(pattern.as_bytes(), seg.as_bytes()));
    }
    let pat: Vec<&str> = pattern.trim_end_matches('/').split('/').collect();
    let segs: Vec<&str> = path.split('/').collect();
    // A directory pattern also matches everything under it.
    path_match(&pat, &segs) || (0..segs.len()).any(|n| path_match(&pat, &segs[..n]))
}

fn path_match(pat: &[&str], segs: &[&str]) -> bool {
    match pat.split_first() {
        None => segs.is_empty(),
        Some((&"**", rest)) => (0..=segs.len()).any(|i| path_match(rest, &segs[i..])),
        Some((p, rest)) => {
            !segs.is_empty()
                && segment_match(p.as_bytes(), segs[0].as_bytes())
                && path_match(rest, &segs[1..])
        }
    }
}

fn segment_match(p: &[u8], s: &[u8]) -> bool {
    match (p.first(), s.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            segment_match(&p[1..], s) || (!s.is_empty() && segment_match(p, &s[1..]))
        }
        (Some(b'?'), Some(_)) => segment_match(&p[1..], &s[1..]),
        (Some(a), Some(b)) if a == b => segment_match(&p[1..], &s[1..]),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_config() {
        let cfg = parse(
            ".greenlight.toml",
            "[watch]\nanything = 1\n[lint]\nselect = [\"GL101\", \"pdb-blocks-drain\"]\nignore = [\"gl202\"]\n\
             fail-on = \"warning\"\nexclude = [\"vendor/**\"]\ninclude-tests = true\nmutable-tags = [\"dev\"]\n\
             [lint.severity]\nGL201 = \"error\"\n[lint.thresholds]\ninitial-delay-seconds = 90\n",
        )
        .unwrap()
        .lint;
        assert_eq!(cfg.select, Some(vec!["GL101", "GL401"]));
        assert_eq!(cfg.ignore, vec!["GL202"]);
        assert_eq!(cfg.fail_on, Some(FailOn::Warning));
        assert_eq!(cfg.severity.get("GL201"), Some(&Severity::Error));
        assert_eq!(cfg.initial_delay_seconds, Some(90));
        assert_eq!(cfg.mutable_tags, vec!["dev".to_string()]);
        assert!(cfg.include_tests);
        assert!(!parse("c.toml", "[lint]\n").unwrap().lint.include_tests);
    }

    #[test]
    fn errors_point_at_the_line() {
        let e = parse(
            "c.toml",
            "[lint]\nselect = [\n  \"GL101\",\n  \"GL999\",\n]\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.column), (4, 3), "{e}");
        assert!(e.message.contains("GL999"));
        let e = parse("c.toml", "[lint]\nfail-on = \"sometimes\"\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse("c.toml", "[lint]\nselct = []\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.to_string().starts_with("c.toml:2:"), "{e}");
        let e = parse("c.toml", "[lint.severity]\nGL201 = \"fatal\"\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse("c.toml", "[lint.thresholds]\ninitial-delay-seconds = 0\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse("c.toml", "[lint]\nselect = []\ninclude-tests = \"yes\"\n").unwrap_err();
        assert_eq!((e.line, e.column), (3, 17), "{e}");
        assert!(e.message.contains("bool"), "{e}");
        let e = parse("c.toml", "[lint]\ninclude-test = true\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        let e = parse("c.toml", "[lint\n").unwrap_err();
        assert_eq!(e.line, 1);
    }

    #[test]
    fn guard_table_and_the_shared_tag_list() {
        let cfg = parse(
            "c.toml",
            "[lint]\nmutable-tags = [\"dev\"]\n[guard]\nmutable-tags = [\"preview*\"]\nlater = 1\n[other]\nx = 1\n",
        )
        .unwrap();
        assert_eq!(cfg.guard.mutable_tags, vec!["preview*".to_string()]);
        assert_eq!(
            cfg.guard_mutable_tags().collect::<Vec<_>>(),
            vec!["dev", "preview*"]
        );
        let e = parse("c.toml", "[lint]\n\n[guard]\nmutable-tags = [\"dev\", 3]\n").unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        assert!(e.message.contains("expected a string"), "{e}");
    }

    #[test]
    fn load_names_the_file_in_every_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("absent.toml");
        let e = load(Some(&missing)).unwrap_err();
        assert!(matches!(e, LoadError::Read { .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with(&format!("cannot read config file {}: ", missing.display())),
            "{e}"
        );
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "[lint]\nfail-on = \"sometimes\"\n").unwrap();
        let e = load(Some(&bad)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("config file {}:2:11: fail-on", bad.display())),
            "{e}"
        );
        let good = dir.path().join("good.toml");
        std::fs::write(&good, "[guard]\nmutable-tags = [\"qa\"]\n").unwrap();
        assert_eq!(load(Some(&good)).unwrap().guard.mutable_tags, vec!["qa"]);
    }

    #[test]
    fn globs() {
        assert!(glob_match("vendor/**", "vendor/a/b.yaml"));
        assert!(glob_match("**/testdata/**", "x/testdata/y.yaml"));
        assert!(glob_match("*.json", "a/b/c.json"));
        assert!(glob_match("testdata", "a/testdata/c.yaml"));
        assert!(glob_match("deploy/*.yaml", "./deploy/a.yaml"));
        assert!(!glob_match("deploy/*.yaml", "deploy/sub/a.yaml"));
        assert!(glob_match("deploy", "deploy/sub/a.yaml"));
    }
}
