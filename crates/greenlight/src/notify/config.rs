//! The `[[notify]]` tables of a TOML file (`docs/notifications.md#config`): each one sink,
//! checked whole before anything is delivered. An error names the file, the line and column,
//! and the key; a secret's file is named, never its contents.

use crate::files::{self, TOKEN_LIMIT};
use greenlight_core::event::Outcome;
use greenlight_git::Secret;
use greenlight_lint::config::{ConfigError, line_col};
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::de::{DeTable, DeValue};

/// One configured sink.
#[derive(Clone, Debug)]
pub struct SinkConfig {
    /// Unique among the file's sinks; the delivery cursor is kept under it, so renaming a sink
    /// starts it afresh at the newest event.
    pub name: String,
    pub kind: SinkKind,
    /// The outcomes it is sent; `None`: every outcome that notifies (never a no-op).
    pub outcomes: Option<BTreeSet<OutcomeKey>>,
    /// Globs over the app (`web`, `payments-*`, `prod/*`); `None`: every app. A promotion's
    /// outcome is matched by its live app.
    pub apps: Option<Vec<String>>,
    /// How long one delivery may take before it is cut off.
    pub timeout: Duration,
    /// Deliveries tried before the notification is a dead letter.
    pub attempts: u32,
    /// The wait before the second attempt; it doubles each time, up to [`MAX_BACKOFF`].
    pub backoff: Duration,
}

/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// An [`Outcome`] as a set key (ordered by its name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct OutcomeKey(pub &'static str);

impl SinkConfig {
    /// Whether this sink is sent `outcome` of `app`.
    pub fn wants(&self, outcome: Outcome, app: Option<&str>) -> bool {
        if !outcome.notifies() {
            return false;
        }
        if let Some(set) = &self.outcomes
            && !set.contains(&OutcomeKey(outcome.as_str()))
        {
            return false;
        }
        match (&self.apps, app) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(globs), Some(app)) => globs
                .iter()
                .any(|g| greenlight_lint::config::glob_match(g, app)),
        }
    }
}

/// Where a sink delivers.
#[derive(Clone)]
pub enum SinkKind {
    /// A JSON body (`docs/notifications.md#body`) POSTed to `url`, signed with `secret` when
    /// one is configured (`X-Greenlight-Signature-256`).
    Webhook {
        url: SinkUrl,
        secret: Option<Secret>,
    },
    /// A Slack incoming webhook: its URL is its secret.
    Slack { url: SinkUrl },
    /// A program run with the JSON body on its standard input; exit 0 is delivered.
    Command { argv: Vec<String> },
}

impl fmt::Debug for SinkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SinkKind::Webhook { url, secret } => f
                .debug_struct("Webhook")
                .field("url", url)
                .field("signed", &secret.is_some())
                .finish(),
            SinkKind::Slack { url } => f.debug_struct("Slack").field("url", url).finish(),
            SinkKind::Command { argv } => f.debug_struct("Command").field("argv", argv).finish(),
        }
    }
}

impl SinkKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            SinkKind::Webhook { .. } => "webhook",
            SinkKind::Slack { .. } => "slack",
            SinkKind::Command { .. } => "command",
        }
    }
}

/// A receiver's URL. Slack's path is its token, and a generic webhook's query may carry one:
/// `Debug` and `Display` show the scheme and host only.
#[derive(Clone)]
pub struct SinkUrl(reqwest::Url);

impl SinkUrl {
    pub fn expose(&self) -> &reqwest::Url {
        &self.0
    }

    /// `https://hooks.slack.com/…`: what may be shown of it.
    pub fn redacted(&self) -> String {
        let host = self.0.host_str().unwrap_or("");
        match self.0.port() {
            Some(p) => format!("{}://{host}:{p}/…", self.0.scheme()),
            None => format!("{}://{host}/…", self.0.scheme()),
        }
    }
}

impl fmt::Debug for SinkUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Display for SinkUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

const KEYS: &[&str] = &[
    "name",
    "sink",
    "url",
    "url-file",
    "secret-file",
    "command",
    "outcomes",
    "apps",
    "timeout",
    "attempts",
    "backoff",
];

/// The sinks of the `[[notify]]` tables in `text` (the file `path`); every other top-level key
/// is left to its own reader (a `watch --config` file holds both). No table: no sink.
pub fn parse(path: &Path, text: &str) -> Result<Vec<SinkConfig>, ConfigError> {
    let file = path.display().to_string();
    let at = |offset: usize, message: String| {
        let (line, column) = line_col(text, offset);
        ConfigError {
            file: file.clone(),
            line,
            column,
            message,
        }
    };
    let table = DeTable::parse(text)
        .map_err(|e| at(e.span().map_or(0, |s| s.start), e.message().to_string()))?;
    let Some(notify) = table.get_ref().get("notify") else {
        return Ok(Vec::new());
    };
    let tables: Vec<&toml::Spanned<DeValue>> = match notify.get_ref() {
        DeValue::Array(items) => items.iter().collect(),
        _ => {
            return Err(at(
                notify.span().start,
                "notify: write each sink as a [[notify]] table".into(),
            ));
        }
    };
    let mut sinks: Vec<SinkConfig> = Vec::new();
    for t in tables {
        let DeValue::Table(t_ref) = t.get_ref() else {
            return Err(at(
                t.span().start,
                "notify: write each sink as a [[notify]] table".into(),
            ));
        };
        let sink = one(t.span().start, t_ref, &at)?;
        if sinks.iter().any(|s| s.name == sink.name) {
            return Err(at(
                t.span().start,
                format!(
                    "notify: two sinks are named {:?}; each needs its own name",
                    sink.name
                ),
            ));
        }
        sinks.push(sink);
    }
    Ok(sinks)
}

fn one(
    start: usize,
    t: &DeTable<'_>,
    at: &dyn Fn(usize, String) -> ConfigError,
) -> Result<SinkConfig, ConfigError> {
    for (k, _) in t.iter() {
        if !KEYS.contains(&k.get_ref().as_ref()) {
            return Err(at(
                k.span().start,
                format!(
                    "notify: unknown key {:?}; a sink takes {}",
                    k.get_ref(),
                    KEYS.join(", ")
                ),
            ));
        }
    }
    let get = |key: &str| t.get(key);
    let string = |key: &str| -> Result<Option<(usize, String)>, ConfigError> {
        match get(key) {
            None => Ok(None),
            Some(v) => match v.get_ref() {
                DeValue::String(s) => Ok(Some((v.span().start, s.to_string()))),
                other => Err(at(
                    v.span().start,
                    format!("notify: {key} takes a string, not {}", other.type_str()),
                )),
            },
        }
    };
    let strings = |key: &str| -> Result<Option<Vec<(usize, String)>>, ConfigError> {
        match get(key) {
            None => Ok(None),
            Some(v) => match v.get_ref() {
                DeValue::Array(items) => items
                    .iter()
                    .map(|i| match i.get_ref() {
                        DeValue::String(s) => Ok((i.span().start, s.to_string())),
                        other => Err(at(
                            i.span().start,
                            format!("notify: {key} takes strings, not {}", other.type_str()),
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(Some),
                other => Err(at(
                    v.span().start,
                    format!(
                        "notify: {key} takes an array of strings, not {}",
                        other.type_str()
                    ),
                )),
            },
        }
    };
    let Some((name_at, name)) = string("name")? else {
        return Err(at(
            start,
            "notify: a sink needs a name (name = \"…\")".into(),
        ));
    };
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(at(
            name_at,
            format!("notify: name {name:?}: 1 to 64 letters, digits, '-', '_' or '.'"),
        ));
    }
    let Some((sink_at, sink)) = string("sink")? else {
        return Err(at(
            start,
            format!("notify {name:?}: sink is required: webhook, slack or command"),
        ));
    };
    let url = |required: bool| -> Result<Option<SinkUrl>, ConfigError> {
        let inline = string("url")?;
        let file = string("url-file")?;
        let (offset, text, from) = match (inline, file) {
            (Some(_), Some((o, _))) => {
                return Err(at(
                    o,
                    format!("notify {name:?}: url and url-file: give one"),
                ));
            }
            (Some((o, u)), None) => (o, u, None),
            (None, Some((o, f))) => {
                let p = PathBuf::from(&f);
                let text = files::read_text(&p, TOKEN_LIMIT, "url-file")
                    .map_err(|e| at(o, format!("notify {name:?}: {e}")))?;
                (o, text.trim().to_string(), Some(p))
            }
            (None, None) if required => {
                return Err(at(
                    start,
                    format!("notify {name:?}: a {sink} sink needs url or url-file"),
                ));
            }
            (None, None) => return Ok(None),
        };
        // The URL's text is never quoted back: it may be a token.
        let whence = match &from {
            Some(p) => format!("the URL in {}", p.display()),
            None => "url".to_string(),
        };
        let parsed = reqwest::Url::parse(&text)
            .map_err(|e| at(offset, format!("notify {name:?}: {whence} is no URL ({e})")))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(at(
                offset,
                format!("notify {name:?}: {whence} must be http:// or https:// with a host"),
            ));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(at(
                offset,
                format!(
                    "notify {name:?}: {whence} carries credentials; sign with secret-file instead"
                ),
            ));
        }
        Ok(Some(SinkUrl(parsed)))
    };
    let only_for = |key: &str, kinds: &str| -> Result<(), ConfigError> {
        match get(key) {
            Some(v) => Err(at(
                v.span().start,
                format!("notify {name:?}: {key} is for {kinds} sinks, not {sink}"),
            )),
            None => Ok(()),
        }
    };
    let kind = match sink.as_str() {
        "webhook" => {
            only_for("command", "command")?;
            let url = url(true)?.expect("required");
            let secret = match string("secret-file")? {
                None => None,
                Some((o, f)) => {
                    let p = PathBuf::from(&f);
                    let text = files::read_text(&p, TOKEN_LIMIT, "secret-file")
                        .map_err(|e| at(o, format!("notify {name:?}: {e}")))?;
                    Some(
                        Secret::from_file_text("secret-file", &p, &text)
                            .map_err(|e| at(o, format!("notify {name:?}: {e}")))?,
                    )
                }
            };
            SinkKind::Webhook { url, secret }
        }
        "slack" => {
            only_for("command", "command")?;
            only_for("secret-file", "webhook")?;
            SinkKind::Slack {
                url: url(true)?.expect("required"),
            }
        }
        "command" => {
            only_for("url", "webhook and slack")?;
            only_for("url-file", "webhook and slack")?;
            only_for("secret-file", "webhook")?;
            let Some(argv) = strings("command")? else {
                return Err(at(
                    start,
                    format!("notify {name:?}: a command sink needs command = [\"program\", …]"),
                ));
            };
            if argv.is_empty() || argv[0].1.is_empty() {
                return Err(at(
                    get("command").map_or(start, |v| v.span().start),
                    format!("notify {name:?}: command names no program"),
                ));
            }
            SinkKind::Command {
                argv: argv.into_iter().map(|(_, a)| a).collect(),
            }
        }
        other => {
            return Err(at(
                sink_at,
                format!("notify {name:?}: sink {other:?}: webhook, slack or command"),
            ));
        }
    };
    let outcomes = match strings("outcomes")? {
        None => None,
        Some(list) => {
            let mut set = BTreeSet::new();
            for (o, text) in list {
                let Some(outcome) = Outcome::parse(&text) else {
                    let names: Vec<&str> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
                    return Err(at(
                        o,
                        format!(
                            "notify {name:?}: unknown outcome {text:?}; the outcomes are {}",
                            names.join(", ")
                        ),
                    ));
                };
                if !outcome.notifies() {
                    return Err(at(
                        o,
                        format!(
                            "notify {name:?}: {text:?} is never sent (a no-op changes nothing)"
                        ),
                    ));
                }
                set.insert(OutcomeKey(outcome.as_str()));
            }
            Some(set)
        }
    };
    let apps = strings("apps")?.map(|l| l.into_iter().map(|(_, a)| a).collect());
    let duration = |key: &str, default: Duration| -> Result<Duration, ConfigError> {
        match string(key)? {
            None => Ok(default),
            Some((o, text)) => match humantime::parse_duration(&text) {
                Ok(d) if !d.is_zero() => Ok(d),
                Ok(_) => Err(at(
                    o,
                    format!("notify {name:?}: {key} must be more than 0s"),
                )),
                Err(e) => Err(at(o, format!("notify {name:?}: {key} = {text:?}: {e}"))),
            },
        }
    };
    let timeout = duration("timeout", Duration::from_secs(10))?;
    let backoff = duration("backoff", Duration::from_secs(2))?.min(MAX_BACKOFF);
    let attempts = match get("attempts") {
        None => 5,
        Some(v) => match v.get_ref() {
            DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
                Ok(n @ 1..=20) => n as u32,
                _ => {
                    return Err(at(
                        v.span().start,
                        format!("notify {name:?}: attempts takes 1 to 20"),
                    ));
                }
            },
            other => {
                return Err(at(
                    v.span().start,
                    format!(
                        "notify {name:?}: attempts takes a number, not {}",
                        other.type_str()
                    ),
                ));
            }
        },
    };
    Ok(SinkConfig {
        name,
        kind,
        outcomes,
        apps,
        timeout,
        attempts,
        backoff,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<Vec<SinkConfig>, String> {
        parse(Path::new("n.toml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn sinks_are_read_with_their_defaults_and_other_keys_are_left_alone() {
        let s = parse_text(
            "repo = \"x\"\n[[notify]]\nname = \"hook\"\nsink = \"webhook\"\nurl = \"https://h.example/p?token=abc\"\n\
             [[notify]]\nname = \"run\"\nsink = \"command\"\ncommand = [\"/bin/cat\"]\noutcomes = [\"reverted\", \"bypassed\"]\napps = [\"web\"]\nattempts = 2\nbackoff = \"10ms\"\ntimeout = \"1s\"\n",
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].attempts, s[0].timeout), (5, Duration::from_secs(10)));
        assert_eq!(
            format!("{:?}", s[0].kind),
            "Webhook { url: https://h.example/…, signed: false }"
        );
        assert!(s[1].wants(Outcome::Reverted, Some("web")));
        assert!(s[1].wants(Outcome::Bypassed, Some("team/web")));
        assert!(!s[1].wants(Outcome::Passed, Some("web")));
        assert!(!s[1].wants(Outcome::Reverted, Some("api")));
        assert!(
            !s[0].wants(Outcome::NoOp, Some("web")),
            "a no-op is never sent"
        );
        assert!(s[0].wants(Outcome::BreakerOpened, None));
        // The breaker names no app: a sink narrowed to apps does not get it (its table says
        // which apps it is for), one without `apps` does.
        assert!(!s[1].wants(Outcome::BreakerOpened, None));
        assert!(s[0].wants(Outcome::RevertProposed, Some("web")));
        assert!(parse_text("repo = \"x\"\n").unwrap().is_empty());
    }

    #[test]
    fn mistakes_are_named_where_they_were_written_and_a_url_is_never_quoted() {
        let cases = [
            (
                "[[notify]]\nsink = \"webhook\"\n",
                "n.toml:1:1: notify: a sink needs a name",
            ),
            (
                "[[notify]]\nname = \"a\"\nsink = \"email\"\n",
                "n.toml:3:8: notify \"a\": sink \"email\"",
            ),
            (
                "[[notify]]\nname = \"a\"\nsink = \"slack\"\n",
                "notify \"a\": a slack sink needs url or url-file",
            ),
            (
                "[[notify]]\nname = \"a\"\nsink = \"slack\"\nurl = \"ftp://x/T0KEN\"\n",
                "n.toml:4:7: notify \"a\": url must be http:// or https:// with a host",
            ),
            (
                "[[notify]]\nname = \"a\"\nsink = \"webhook\"\nurl = \"https://u:p@h/\"\n",
                "url carries credentials",
            ),
            (
                "[[notify]]\nname = \"a\"\nsink = \"webhook\"\nurl = \"https://h/\"\noutcomes = [\"no_op\"]\n",
                "\"no_op\" is never sent",
            ),
            (
                "[[notify]]\nname = \"a\"\nsink = \"webhook\"\nurl = \"https://h/\"\noutcomes = [\"pass\"]\n",
                "unknown outcome \"pass\"",
            ),
            (
                "[[notify]]\nname = \"a\"\nsink = \"webhook\"\nurl = \"https://h/\"\nattempts = 0\n",
                "attempts takes 1 to 20",
            ),
            (
                "[[notify]]\nname = \"a\"\nsink = \"webhook\"\nurl = \"https://h/\"\ncolour = 1\n",
                "n.toml:5:1: notify: unknown key \"colour\"",
            ),
            (
                "[[notify]]\nname = \"a\"\nsink = \"command\"\ncommand = []\n",
                "command names no program",
            ),
            (
                "[[notify]]\nname = \"a\"\nsink = \"slack\"\nurl = \"https://h/\"\nsecret-file = \"s\"\n",
                "secret-file is for webhook sinks, not slack",
            ),
            (
                "[[notify]]\nname = \"a\"\nsink = \"webhook\"\nurl = \"https://h/\"\n[[notify]]\nname = \"a\"\nsink = \"webhook\"\nurl = \"https://h/\"\n",
                "two sinks are named \"a\"",
            ),
            ("notify = 1\n", "write each sink as a [[notify]] table"),
            (
                "[[notify]]\nname = \"a\"\nsink = \"webhook\"\nurl-file = \"/nonexistent/greenlight-url\"\n",
                "url-file /nonexistent/greenlight-url",
            ),
        ];
        for (text, want) in cases {
            let err = parse_text(text).unwrap_err();
            assert!(err.contains(want), "{text:?}: {err}");
            assert!(!err.contains("T0KEN") && !err.contains("u:p"), "{err}");
        }
    }

    #[test]
    fn a_url_file_and_a_secret_file_are_read_and_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().join("url");
        let secret = dir.path().join("secret");
        std::fs::write(&url, "https://hooks.slack.example/services/T0KEN\n").unwrap();
        std::fs::write(&secret, "s3cret\n").unwrap();
        let text = format!(
            "[[notify]]\nname = \"s\"\nsink = \"slack\"\nurl-file = {:?}\n[[notify]]\nname = \"w\"\nsink = \"webhook\"\nurl = \"http://127.0.0.1:9/x\"\nsecret-file = {:?}\n",
            url.display().to_string(),
            secret.display().to_string()
        );
        let s = parse_text(&text).unwrap();
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("T0KEN") && !shown.contains("s3cret"),
            "{shown}"
        );
        match &s[1].kind {
            SinkKind::Webhook {
                secret: Some(k), ..
            } => assert_eq!(k.expose(), "s3cret"),
            other => panic!("{other:?}"),
        }
        match &s[0].kind {
            SinkKind::Slack { url } => assert_eq!(url.expose().path(), "/services/T0KEN"),
            other => panic!("{other:?}"),
        }
    }
}
