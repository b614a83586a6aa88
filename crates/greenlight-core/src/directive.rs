//! The opt-in directive (docs/verdicts.md#watch-start): `Nav-Watchdog: app=<name> deadline=<dur> mode=shadow|arm expect=Healthy`.
//! Parsing is strict: an unknown, repeated or malformed field is an error naming the field, and
//! never a silently different watch. This module reads text; it never starts a watch.

use crate::time::{human_duration, parse_duration_ms};
use crate::trailer;
use serde::{Deserialize, Serialize};
use std::fmt;

pub const DEFAULT_TRAILER_KEY: &str = "Nav-Watchdog";
pub const DEFAULT_DEADLINE_MS: i64 = 900_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Judge and report only (the default).
    Shadow,
    /// Judge, and revert a failed commit; granted per commit, never globally.
    Arm,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Shadow => "shadow",
            Mode::Arm => "arm",
        }
    }
}

/// The app a directive names: `name` or `namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AppRef {
    pub namespace: Option<String>,
    pub name: String,
}

impl AppRef {
    /// Read `name` or `namespace/name`, as a trailer's `app=` field reads it; the error says
    /// which part is not a valid Kubernetes name.
    pub fn parse(text: &str) -> Result<AppRef, String> {
        parse_app(text)
    }

    /// Whether two references can name the same Application (a bare name matches any namespace).
    pub fn overlaps(&self, other: &AppRef) -> bool {
        self.name == other.name
            && match (&self.namespace, &other.namespace) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }

    pub fn matches(&self, namespace: &str, name: &str) -> bool {
        self.name == name && self.namespace.as_deref().is_none_or(|ns| ns == namespace)
    }
}

impl fmt::Display for AppRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// `expect`'s canonical values.
pub const EXPECT_HEALTHY: &str = "Healthy";
pub const EXPECT_RUNNING: &str = "Healthy,Running";

/// One parsed trailer: what to watch and how.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Directive {
    pub app: AppRef,
    pub deadline_ms: i64,
    pub mode: Mode,
    /// [`EXPECT_HEALTHY`], or [`EXPECT_RUNNING`]: healthy, and the Pods run the digests git
    /// pins (`docs/verdicts.md#expect-running`).
    pub expect: String,
}

/// A trailer that could not be read, with the field at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{key} trailer {value:?}: field `{field}`: {problem}")]
pub struct DirectiveError {
    pub key: String,
    pub value: String,
    pub field: String,
    pub problem: String,
}

impl Directive {
    /// Parse one trailer value. `key` is only used in error messages.
    pub fn parse(key: &str, value: &str) -> Result<Directive, DirectiveError> {
        let err = |field: &str, problem: String| DirectiveError {
            key: key.to_string(),
            value: value.to_string(),
            field: field.to_string(),
            problem,
        };
        let mut app = None;
        let mut deadline = None;
        let mut mode = None;
        let mut expect = None;
        for item in value.split_whitespace() {
            let Some((field, v)) = item.split_once('=') else {
                return Err(err(item, "expected `field=value`".into()));
            };
            let slot = match field {
                "app" => &mut app,
                "deadline" => &mut deadline,
                "mode" => &mut mode,
                "expect" => &mut expect,
                other => {
                    return Err(err(
                        other,
                        "unknown field (known: app, deadline, mode, expect)".into(),
                    ));
                }
            };
            if slot.is_some() {
                return Err(err(field, "given more than once".into()));
            }
            *slot = Some(v.to_string());
        }
        let app = app.ok_or_else(|| err("app", "missing (required): name the Argo CD Application, `app=<name>` or `app=<namespace>/<name>`".into()))?;
        let app = parse_app(&app).map_err(|p| err("app", p))?;
        let deadline_ms = match deadline {
            None => DEFAULT_DEADLINE_MS,
            Some(d) => {
                let ms = parse_duration_ms(&d).map_err(|p| err("deadline", p))?;
                if ms <= 0 {
                    return Err(err("deadline", "must be greater than zero".into()));
                }
                ms
            }
        };
        let mode = match mode.as_deref() {
            None | Some("shadow") => Mode::Shadow,
            Some("arm") => Mode::Arm,
            Some(other) => return Err(err("mode", format!("{other:?} is not `shadow` or `arm`"))),
        };
        // `Healthy` always; `Running` adds verify (the Pods run the digests git pins).
        let expect = match expect.as_deref() {
            None => EXPECT_HEALTHY.to_string(),
            Some(list) => {
                let mut running = false;
                for part in list.split(',') {
                    match part {
                        "Healthy" => {}
                        "Running" => running = true,
                        other => {
                            return Err(err(
                                "expect",
                                format!(
                                    "{other:?} is not supported (`Healthy`, or `Healthy,Running`: the Pods also run the digests git pins)"
                                ),
                            ));
                        }
                    }
                }
                if running {
                    EXPECT_RUNNING.to_string()
                } else {
                    EXPECT_HEALTHY.to_string()
                }
            }
        };
        Ok(Directive {
            app,
            deadline_ms,
            mode,
            expect,
        })
    }

    /// `expect=Healthy,Running`: the verdict also needs the Pods to run the digests git pins.
    pub fn expects_running(&self) -> bool {
        self.expect == EXPECT_RUNNING
    }

    /// The canonical trailer text for this directive. The deadline is written exactly (`900s`,
    /// or `1234ms` when it is no whole number of seconds), so the trailer parser reads back the
    /// very deadline that was given: a rounded one (`0.0s` for 49 ms) would be refused or
    /// changed.
    pub fn render(&self) -> String {
        let deadline = if self.deadline_ms % 1000 == 0 {
            human_duration(self.deadline_ms)
        } else {
            format!("{}ms", self.deadline_ms)
        };
        format!(
            "app={} deadline={deadline} mode={} expect={}",
            self.app,
            self.mode.as_str(),
            self.expect
        )
    }
}

fn parse_app(s: &str) -> Result<AppRef, String> {
    let (ns, name) = match s.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, s),
    };
    let valid = |part: &str| {
        !part.is_empty()
            && part.len() <= 253
            && part
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'.')
            && part.as_bytes()[0].is_ascii_alphanumeric()
            && part.as_bytes()[part.len() - 1].is_ascii_alphanumeric()
    };
    if let Some(ns) = ns
        && !valid(ns)
    {
        return Err(format!("namespace {ns:?} is not a valid Kubernetes name"));
    }
    if !valid(name) {
        return Err(format!(
            "{name:?} is not a valid Application name (lowercase letters, digits, '-', '.')"
        ));
    }
    Ok(AppRef {
        namespace: ns.map(str::to_string),
        name: name.to_string(),
    })
}

/// Every directive in a commit message: one result per trailer whose key matches `key`
/// (case-insensitively, as git compares trailer keys).
pub fn directives_in(message: &str, key: &str) -> Vec<Result<Directive, DirectiveError>> {
    trailer::parse(message)
        .into_iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(k, v)| Directive::parse(&k, &v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever deadline a directive holds, its trailer reads back as the same deadline.
    #[test]
    fn a_rendered_trailer_reads_back_as_the_same_deadline() {
        for ms in [
            1, 49, 50, 999, 1000, 1234, 1500, 60_000, 900_000, 86_400_001,
        ] {
            let d = Directive {
                app: parse_app("web").unwrap(),
                deadline_ms: ms,
                mode: Mode::Arm,
                expect: "Healthy".into(),
            };
            let back = Directive::parse(DEFAULT_TRAILER_KEY, &d.render()).unwrap();
            assert_eq!(back.deadline_ms, ms, "{}", d.render());
        }
    }

    #[test]
    fn full_and_default_fields() {
        let d = Directive::parse(
            "Nav-Watchdog",
            "app=lemuel-xr-prod deadline=900 mode=shadow expect=Healthy",
        )
        .unwrap();
        assert_eq!(d.app.name, "lemuel-xr-prod");
        assert_eq!(d.deadline_ms, 900_000);
        assert_eq!(d.mode, Mode::Shadow);
        let d = Directive::parse("K", "app=argocd/x").unwrap();
        assert_eq!(d.app.namespace.as_deref(), Some("argocd"));
        assert_eq!(d.deadline_ms, DEFAULT_DEADLINE_MS);
        assert_eq!(d.mode, Mode::Shadow);
        let d = Directive::parse("K", "deadline=15m mode=arm app=x").unwrap();
        assert_eq!((d.deadline_ms, d.mode), (900_000, Mode::Arm));
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("deadline=9", "app"),
            ("app=x deadlin=9", "deadlin"),
            ("app=x deadline=soon", "deadline"),
            ("app=x deadline=0", "deadline"),
            ("app=x mode=armed", "mode"),
            ("app=x expect=Synced", "expect"),
            ("app=x app=y", "app"),
            ("app=X_Y", "app"),
            ("app=x stray", "stray"),
            ("app=/x", "app"),
        ];
        for (value, field) in cases {
            let e = Directive::parse("Nav-Watchdog", value).unwrap_err();
            assert_eq!(e.field, field, "{value}: {e}");
            assert!(e.to_string().contains(&format!("`{field}`")), "{e}");
        }
    }

    #[test]
    fn several_trailers_several_directives() {
        let msg = "deploy\n\nbody\n\nNav-Watchdog: app=a mode=arm\nnav-watchdog: app=b\nSigned-off-by: x <x@y>\nNav-Watchdog: app=c mode=bogus\n";
        let ds = directives_in(msg, "Nav-Watchdog");
        assert_eq!(ds.len(), 3);
        assert_eq!(ds[0].as_ref().unwrap().app.name, "a");
        assert_eq!(ds[1].as_ref().unwrap().app.name, "b");
        assert_eq!(ds[2].as_ref().unwrap_err().field, "mode");
    }
}
