//! The layers under a command's flags (docs/configuration.md): the environment
//! (`GREENLIGHT_<FLAG>`) and a TOML config file (`--config FILE`, or `GREENLIGHT_CONFIG`), for
//! the commands in [`LAYERED`] (today `watch`). Precedence: the command line, then the
//! environment, then the file, then the flag's default.
//!
//! The flags are the one list of keys: a key is a flag's long name, its variable the name in
//! upper snake case after `GREENLIGHT_`, and every value goes through the flag's own clap value
//! parser, so a value means the same and fails the same wherever it is written. A bad value is
//! refused naming where it was written: the variable, or the file's `file:line:column` and the
//! key. A switch (a flag without a value, such as `--dry-run`) takes the spellings of
//! [`switch_value`] and nothing else, and is on when any layer turns it on: no layer turns off
//! a safety switch another turned on.
//!
//! How: the command line is parsed once with the layered command's flags not required, which
//! tells which flags it gave (`ArgMatches::value_source`); each other flag takes its value from
//! the environment, else the file, checked by its parser; the values found are appended to the
//! command line as `--flag=value` and the whole is parsed again, so required flags, defaults and
//! conflicts are clap's as ever. The appended arguments live only in this process: `ps` shows
//! the command line as given, and a re-exec (`watch`) runs that same command line. Flags take
//! token *files*, never tokens, so no secret goes through here.

use crate::cmd::{SWITCH_SPELLINGS, switch_value};
use clap::{Arg, ArgAction, ArgMatches, Command, parser::ValueSource};
use greenlight_lint::config::{ConfigError, line_col};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use toml::de::{DeTable, DeValue};

/// The subcommands that take a config file and the environment, by their path of names.
pub const LAYERED: &[&[&str]] = &[&["watch"]];

/// The flag that names the config file (its own key is not a key of the file).
pub const CONFIG_FLAG: &str = "config";

/// Every variable's prefix.
pub const ENV_PREFIX: &str = "GREENLIGHT_";

/// A config file as read: its path and text (the text a re-exec compares the file with).
#[derive(Clone, Debug)]
pub struct ConfigFile {
    pub path: PathBuf,
    pub text: String,
}

/// The command line with its layers filled in.
pub struct Resolved {
    pub matches: ArgMatches,
    /// The config file read, when the command took one.
    pub config: Option<ConfigFile>,
}

/// Why the arguments were refused: clap's own error (printed and exited as clap does, `--help`
/// included), or a value from a layer.
#[derive(Debug)]
pub enum Refusal {
    Clap(clap::Error),
    Layer(String),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // clap's message up to its usage, on one line, without its `error: ` (the caller
            // adds its own).
            Refusal::Clap(e) => {
                let text = e.render().to_string();
                let lines: Vec<&str> = text
                    .lines()
                    .take_while(|l| !l.trim().is_empty())
                    .map(str::trim)
                    .collect();
                let joined = lines.join(" ");
                f.write_str(joined.strip_prefix("error: ").unwrap_or(&joined))
            }
            Refusal::Layer(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Refusal {}

/// The environment, as a lookup.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// The variable of the flag `--long`: `--stable-for` → `GREENLIGHT_STABLE_FOR`.
pub fn env_name(long: &str) -> String {
    format!(
        "{ENV_PREFIX}{}",
        long.to_ascii_uppercase().replace('-', "_")
    )
}

/// The variable of the config file itself.
pub fn config_env() -> String {
    env_name(CONFIG_FLAG)
}

/// `argv` parsed by `cli`, with its layers when its subcommand takes them; the config file is
/// read from disk.
pub fn resolve(cli: &Command, argv: &[OsString], env: Env) -> Result<Resolved, Refusal> {
    resolve_with(cli, argv, env, &read_config)
}

/// The config file's text: a regular file of at most [`greenlight::files::CONFIG_LIMIT`] bytes (a
/// FIFO or `/dev/zero` named by `--config` is refused, never read to its end).
pub fn read_config(path: &Path) -> std::io::Result<String> {
    greenlight::files::read_text(path, greenlight::files::CONFIG_LIMIT, "--config")
        .map_err(std::io::Error::from)
}

/// [`resolve`] with the config file read by `read` (a re-exec checks a changed file's text so).
pub fn resolve_with(
    cli: &Command,
    argv: &[OsString],
    env: Env,
    read: &dyn Fn(&Path) -> std::io::Result<String>,
) -> Result<Resolved, Refusal> {
    let mut relaxed = cli.clone();
    for path in LAYERED {
        relaxed = relax(relaxed, path);
    }
    // An error here (`--help` included) is the one the command as declared gives.
    let first = relaxed
        .try_get_matches_from(argv)
        .map_err(|e| Refusal::Clap(cli.clone().try_get_matches_from(argv).err().unwrap_or(e)))?;
    let Some((path, sub_m)) = LAYERED
        .iter()
        .find_map(|p| subcommand_matches(&first, p).map(|m| (*p, m)))
    else {
        let matches = cli
            .clone()
            .try_get_matches_from(argv)
            .map_err(Refusal::Clap)?;
        return Ok(Resolved {
            matches,
            config: None,
        });
    };
    let sub_cmd = find_subcommand(cli, path).expect("a layered subcommand exists");
    let config = config_file(sub_m, env, read)?;
    let mut from_file = match &config {
        Some(f) => read_file(sub_cmd, f).map_err(|e| Refusal::Layer(e.to_string()))?,
        None => Vec::new(),
    };
    let mut extra: Vec<OsString> = Vec::new();
    for arg in keys(sub_cmd) {
        let long = arg.get_long().expect("keys have long names");
        let var = env_name(long);
        // Every layer is read and checked, also under a flag that overrides it: a bad value is
        // refused wherever it is (a safety switch fails closed).
        let from_env = match env(&var) {
            Some(v) => env_value(sub_cmd, arg, &var, &v)?,
            None => None,
        };
        let from_file = from_file
            .iter()
            .position(|(id, _)| id == long)
            .map(|i| from_file.swap_remove(i).1);
        if sub_m.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine) {
            continue;
        }
        let value = if is_switch(arg) {
            let on = [&from_env, &from_file]
                .into_iter()
                .flatten()
                .any(|v| matches!(v, Value::Switch(true)));
            Some(Value::Switch(on))
        } else {
            from_env.or(from_file)
        };
        match value {
            Some(Value::Switch(true)) => extra.push(format!("--{long}").into()),
            Some(Value::Switch(false)) | None => {}
            Some(Value::Texts(texts)) => {
                for t in texts {
                    let mut a = OsString::from(format!("--{long}="));
                    a.push(t);
                    extra.push(a);
                }
            }
        }
    }
    let mut full = argv.to_vec();
    full.extend(extra);
    let matches = cli
        .clone()
        .try_get_matches_from(full)
        .map_err(Refusal::Clap)?;
    Ok(Resolved { matches, config })
}

/// A value from a layer: a switch's, or the texts a flag is given (one, or several for a
/// repeated flag), each already accepted by its parser.
#[derive(Debug, PartialEq)]
enum Value {
    Switch(bool),
    Texts(Vec<OsString>),
}

/// The flags a layer may set: those with a long name, but help, version and the config file.
pub fn keys(cmd: &Command) -> impl Iterator<Item = &Arg> {
    cmd.get_arguments().filter(|a| {
        a.get_long()
            .is_some_and(|l| !matches!(l, "help" | "version" | CONFIG_FLAG))
    })
}

fn is_switch(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::SetTrue)
}

fn is_repeated(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::Append)
}

/// `cli` with the flags of the subcommand at `path` not required (the first pass).
fn relax(cli: Command, path: &[&str]) -> Command {
    match path {
        [] => cli.mut_args(|a| a.required(false)),
        [name, rest @ ..] => {
            if cli.find_subcommand(name).is_none() {
                return cli;
            }
            cli.mut_subcommand(*name, |c| relax(c, rest))
        }
    }
}

fn subcommand_matches<'a>(m: &'a ArgMatches, path: &[&str]) -> Option<&'a ArgMatches> {
    path.iter()
        .try_fold(m, |m, name| m.subcommand_matches(name))
}

fn find_subcommand<'a>(cli: &'a Command, path: &[&str]) -> Option<&'a Command> {
    path.iter().try_fold(cli, |c, name| c.find_subcommand(name))
}

/// The config file the command line or the environment names, read.
fn config_file(
    m: &ArgMatches,
    env: Env,
    read: &dyn Fn(&Path) -> std::io::Result<String>,
) -> Result<Option<ConfigFile>, Refusal> {
    let var = config_env();
    let (path, named_by) = match m.get_one::<PathBuf>(CONFIG_FLAG) {
        Some(p) if m.value_source(CONFIG_FLAG) == Some(ValueSource::CommandLine) => {
            (p.clone(), format!("--{CONFIG_FLAG}"))
        }
        _ => match env(&var).filter(|v| !v.is_empty()) {
            Some(p) => (PathBuf::from(p), var),
            None => return Ok(None),
        },
    };
    let text = read(&path).map_err(|e| {
        Refusal::Layer(format!(
            "{named_by} {}: cannot read the config file: {e}",
            path.display()
        ))
    })?;
    Ok(Some(ConfigFile { path, text }))
}

/// A variable's value for `arg`, checked; an empty one is unset, but for a switch (off).
fn env_value(cmd: &Command, arg: &Arg, var: &str, raw: &OsStr) -> Result<Option<Value>, Refusal> {
    if is_switch(arg) {
        let text = raw.to_str().ok_or_else(|| {
            Refusal::Layer(format!(
                "{var}: not valid UTF-8; a switch that cannot be read refuses to start: {SWITCH_SPELLINGS}"
            ))
        })?;
        return match switch_value(text) {
            Some(on) => Ok(Some(Value::Switch(on))),
            None => Err(Refusal::Layer(format!(
                "{var}={text:?}: not a value greenlight understands, and a switch refuses to start on one: {SWITCH_SPELLINGS}"
            ))),
        };
    }
    if raw.is_empty() {
        return Ok(None);
    }
    // A repeated flag takes several values, separated by commas.
    let values: Vec<OsString> = match (is_repeated(arg), raw.to_str()) {
        (true, Some(text)) => text.split(',').map(|s| OsString::from(s.trim())).collect(),
        _ => vec![raw.to_owned()],
    };
    for v in &values {
        check(cmd, arg, v)
            .map_err(|why| Refusal::Layer(format!("{var}={:?}: {why}", v.to_string_lossy())))?;
    }
    Ok(Some(Value::Texts(values)))
}

/// `value` through `arg`'s own parser: what it accepts, in words, when it does not.
fn check(cmd: &Command, arg: &Arg, value: &OsStr) -> Result<(), String> {
    // The flag's parser is reached through clap: the command alone, given this one value
    // (with nothing required; what is missing or in conflict is the second parse's business).
    let mut given = OsString::from(format!("--{}=", arg.get_long().unwrap_or_default()));
    given.push(value);
    let alone = cmd
        .clone()
        .no_binary_name(true)
        .mut_args(|a| a.required(false))
        .try_get_matches_from([given]);
    use clap::error::ErrorKind;
    match alone {
        Ok(_) => Ok(()),
        Err(e)
            if !matches!(
                e.kind(),
                ErrorKind::InvalidValue | ErrorKind::ValueValidation | ErrorKind::InvalidUtf8
            ) =>
        {
            Ok(())
        }
        Err(e) => {
            let values: Vec<String> = arg
                .get_possible_values()
                .iter()
                .map(|v| v.get_name().to_string())
                .collect();
            if !values.is_empty() {
                return Err(format!("not one of {}", values.join(", ")));
            }
            match std::error::Error::source(&e) {
                Some(why) => Err(why.to_string()),
                None => Err(Refusal::Clap(e).to_string()),
            }
        }
    }
}

/// The file's keys, each checked and with its value: an unknown key, a value of the wrong kind
/// or one its flag's parser refuses is an error at its line and column.
fn read_file(cmd: &Command, f: &ConfigFile) -> Result<Vec<(String, Value)>, ConfigError> {
    let file = f.path.display().to_string();
    let at = |offset: usize, message: String| {
        let (line, column) = line_col(&f.text, offset);
        ConfigError {
            file: file.clone(),
            line,
            column,
            message,
        }
    };
    let table = DeTable::parse(&f.text)
        .map_err(|e| at(e.span().map_or(0, |s| s.start), e.message().to_string()))?;
    let mut out = Vec::new();
    for (key, value) in table.get_ref().iter() {
        let name: &str = key.get_ref();
        // The sinks' tables have a reader of their own (`greenlight::notify::config`).
        if name == "notify" {
            continue;
        }
        let Some(arg) = keys(cmd).find(|a| a.get_long() == Some(name)) else {
            let known: Vec<&str> = keys(cmd).filter_map(Arg::get_long).collect();
            return Err(at(
                key.span().start,
                format!(
                    "unknown key {name:?}: `greenlight {}` takes {}",
                    cmd.get_name(),
                    known.join(", ")
                ),
            ));
        };
        let start = value.span().start;
        if is_switch(arg) {
            let on = match value.get_ref() {
                DeValue::Boolean(b) => Some(*b),
                DeValue::String(s) => switch_value(s),
                _ => None,
            };
            let Some(on) = on else {
                return Err(at(
                    start,
                    format!(
                        "{name}: a switch takes true or false (or a string: {SWITCH_SPELLINGS}), and refuses to start on anything else"
                    ),
                ));
            };
            out.push((name.to_string(), Value::Switch(on)));
            continue;
        }
        let items: Vec<(usize, &DeValue)> = match value.get_ref() {
            DeValue::Array(items) if is_repeated(arg) => items
                .iter()
                .map(|v| (v.span().start, v.get_ref()))
                .collect(),
            DeValue::Array(_) => {
                return Err(at(start, format!("{name}: takes one value, not an array")));
            }
            v => vec![(start, v)],
        };
        let mut texts = Vec::new();
        for (offset, item) in items {
            let text = match item {
                DeValue::String(s) => s.to_string(),
                DeValue::Integer(i) => match i128::from_str_radix(i.as_str(), i.radix()) {
                    Ok(n) => n.to_string(),
                    Err(e) => return Err(at(offset, format!("{name}: {e}"))),
                },
                DeValue::Float(x) => x.as_str().to_string(),
                DeValue::Boolean(b) => b.to_string(),
                other => {
                    return Err(at(
                        offset,
                        format!(
                            "{name}: takes a string or a number, not {}",
                            other.type_str()
                        ),
                    ));
                }
            };
            check(cmd, arg, OsStr::new(&text))
                .map_err(|why| at(offset, format!("{name} = {text:?}: {why}")))?;
            texts.push(OsString::from(text));
        }
        out.push((name.to_string(), Value::Texts(texts)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::value_parser;
    use std::collections::HashMap;

    /// A command with each kind of flag a layer fills.
    fn cli() -> Command {
        Command::new("greenlight")
            .subcommand(
                Command::new("watch")
                    .arg(Arg::new("repo").long("repo").required(true))
                    .arg(
                        Arg::new("config")
                            .long("config")
                            .value_parser(value_parser!(PathBuf)),
                    )
                    .arg(
                        Arg::new("limit")
                            .long("limit")
                            .default_value("5")
                            .value_parser(value_parser!(u32).range(1..)),
                    )
                    .arg(
                        Arg::new("format")
                            .long("format")
                            .default_value("text")
                            .value_parser(["text", "json"]),
                    )
                    .arg(
                        Arg::new("namespace")
                            .long("namespace")
                            .action(ArgAction::Append),
                    )
                    .arg(
                        Arg::new("dry-run")
                            .long("dry-run")
                            .action(ArgAction::SetTrue),
                    ),
            )
            .subcommand(Command::new("status").arg(Arg::new("state").long("state")))
    }

    struct World {
        env: HashMap<String, String>,
        files: HashMap<PathBuf, String>,
    }

    impl World {
        fn new(env: &[(&str, &str)], files: &[(&str, &str)]) -> World {
            World {
                env: env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                files: files
                    .iter()
                    .map(|(k, v)| (PathBuf::from(k), v.to_string()))
                    .collect(),
            }
        }

        fn run(&self, args: &[&str]) -> Result<ArgMatches, String> {
            let argv: Vec<OsString> = std::iter::once("greenlight")
                .chain(args.iter().copied())
                .map(OsString::from)
                .collect();
            let env = |k: &str| self.env.get(k).map(OsString::from);
            let read = |p: &Path| {
                self.files
                    .get(p)
                    .cloned()
                    .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
            };
            resolve_with(&cli(), &argv, &env, &read)
                .map(|r| r.matches.subcommand_matches("watch").unwrap().clone())
                .map_err(|e| e.to_string())
        }
    }

    fn one(m: &ArgMatches, id: &str) -> String {
        m.get_one::<String>(id).cloned().unwrap_or_default()
    }

    #[test]
    fn flags_then_environment_then_file_then_defaults() {
        let file = "repo = \"/file\"\nformat = \"json\"\nlimit = 7\n";
        let w = World::new(&[("GREENLIGHT_FORMAT", "text")], &[("w.toml", file)]);
        let m = w.run(&["watch", "--config", "w.toml"]).unwrap();
        assert_eq!(one(&m, "repo"), "/file");
        assert_eq!(one(&m, "format"), "text", "the environment over the file");
        assert_eq!(*m.get_one::<u32>("limit").unwrap(), 7);
        let m = w
            .run(&[
                "watch", "--config", "w.toml", "--format", "json", "--repo", "/flag",
            ])
            .unwrap();
        assert_eq!(one(&m, "repo"), "/flag");
        assert_eq!(one(&m, "format"), "json", "the flag over the environment");
        // GREENLIGHT_CONFIG names the file when --config does not.
        let w = World::new(&[("GREENLIGHT_CONFIG", "w.toml")], &[("w.toml", file)]);
        let m = w.run(&["watch"]).unwrap();
        assert_eq!(one(&m, "repo"), "/file");
        assert_eq!(*m.get_one::<u32>("limit").unwrap(), 7);
        // No layers: the defaults, and a missing required flag is clap's error.
        let w = World::new(&[], &[]);
        assert!(w.run(&["watch"]).unwrap_err().contains("--repo"));
        assert_eq!(
            one(&w.run(&["watch", "--repo", "r"]).unwrap(), "format"),
            "text"
        );
    }

    #[test]
    fn repeated_flags_take_arrays_and_comma_lists() {
        let w = World::new(
            &[],
            &[("w.toml", "repo = \"r\"\nnamespace = [\"a\", \"b\"]\n")],
        );
        let m = w.run(&["watch", "--config", "w.toml"]).unwrap();
        let ns: Vec<&String> = m.get_many::<String>("namespace").unwrap().collect();
        assert_eq!(ns, ["a", "b"]);
        let w = World::new(&[("GREENLIGHT_NAMESPACE", "c, d")], &[]);
        let m = w.run(&["watch", "--repo", "r"]).unwrap();
        let ns: Vec<&String> = m.get_many::<String>("namespace").unwrap().collect();
        assert_eq!(ns, ["c", "d"]);
        let w = World::new(&[], &[("w.toml", "repo = [\"a\"]\n")]);
        let err = w.run(&["watch", "--config", "w.toml"]).unwrap_err();
        assert_eq!(err, "w.toml:1:8: repo: takes one value, not an array");
    }

    #[test]
    fn a_switch_is_on_when_any_layer_turns_it_on_and_refuses_other_spellings() {
        let on = |env: &[(&str, &str)], file: &str| {
            let w = World::new(env, &[("w.toml", file)]);
            w.run(&["watch", "--repo", "r", "--config", "w.toml"])
                .map(|m| m.get_flag("dry-run"))
        };
        assert_eq!(on(&[], "dry-run = true"), Ok(true));
        assert_eq!(on(&[], "dry-run = \"yes\""), Ok(true));
        assert_eq!(on(&[], "dry-run = false"), Ok(false));
        assert_eq!(on(&[("GREENLIGHT_DRY_RUN", "on")], ""), Ok(true));
        assert_eq!(on(&[("GREENLIGHT_DRY_RUN", "")], ""), Ok(false));
        // The environment cannot turn off what the file turned on.
        assert_eq!(
            on(&[("GREENLIGHT_DRY_RUN", "0")], "dry-run = true"),
            Ok(true)
        );
        let err = on(&[("GREENLIGHT_DRY_RUN", "enabled")], "").unwrap_err();
        assert!(err.starts_with("GREENLIGHT_DRY_RUN=\"enabled\": "), "{err}");
        assert!(err.contains("1, true, yes or on"), "{err}");
        let err = on(&[], "\n  dry-run = \"maybe\"").unwrap_err();
        assert!(
            err.starts_with("w.toml:2:13: dry-run: a switch takes true or false"),
            "{err}"
        );
        let err = on(&[], "dry-run = 1").unwrap_err();
        assert!(err.starts_with("w.toml:1:11: dry-run:"), "{err}");
        // A bad value is refused even where a flag overrides it.
        let w = World::new(&[("GREENLIGHT_DRY_RUN", "sure")], &[]);
        assert!(w.run(&["watch", "--repo", "r", "--dry-run"]).is_err());
    }

    #[test]
    fn bad_values_are_refused_where_they_were_written() {
        let w = World::new(&[], &[("w.toml", "repo = \"r\"\nlimit = 0\n")]);
        let err = w.run(&["watch", "--config", "w.toml"]).unwrap_err();
        assert!(err.starts_with("w.toml:2:9: limit = \"0\": "), "{err}");
        let w = World::new(&[], &[("w.toml", "repo = \"r\"\n\nformat = \"xml\"\n")]);
        assert_eq!(
            w.run(&["watch", "--config", "w.toml"]).unwrap_err(),
            "w.toml:3:10: format = \"xml\": not one of text, json"
        );
        let w = World::new(&[], &[("w.toml", "repo = \"r\"\nstable-for = \"2m\"\n")]);
        assert_eq!(
            w.run(&["watch", "--config", "w.toml"]).unwrap_err(),
            "w.toml:2:1: unknown key \"stable-for\": `greenlight watch` takes repo, limit, format, namespace, dry-run"
        );
        let w = World::new(
            &[],
            &[("w.toml", "repo = \"r\"\nconfig = \"other.toml\"\n")],
        );
        assert!(
            w.run(&["watch", "--config", "w.toml"])
                .unwrap_err()
                .starts_with("w.toml:2:1: unknown key \"config\"")
        );
        let w = World::new(&[], &[("w.toml", "repo = \"r\"\nrepo = \"s\"\n")]);
        assert!(
            w.run(&["watch", "--config", "w.toml"])
                .unwrap_err()
                .starts_with("w.toml:2:1: ")
        );
        let w = World::new(&[], &[("w.toml", "repo = { a = 1 }\n")]);
        assert!(
            w.run(&["watch", "--config", "w.toml"])
                .unwrap_err()
                .starts_with("w.toml:1:8: repo: takes a string or a number")
        );
        let w = World::new(&[("GREENLIGHT_LIMIT", "lots")], &[]);
        let err = w.run(&["watch", "--repo", "r"]).unwrap_err();
        assert!(err.starts_with("GREENLIGHT_LIMIT=\"lots\": "), "{err}");
        let w = World::new(&[], &[]);
        let err = w
            .run(&["watch", "--repo", "r", "--config", "gone.toml"])
            .unwrap_err();
        assert!(
            err.starts_with("--config gone.toml: cannot read the config file"),
            "{err}"
        );
    }

    #[test]
    fn commands_without_layers_ignore_the_environment() {
        let w = World::new(&[("GREENLIGHT_STATE", "/env")], &[]);
        let argv: Vec<OsString> = ["greenlight", "status"].map(OsString::from).into();
        let env = |k: &str| w.env.get(k).map(OsString::from);
        let r = resolve(&cli(), &argv, &env).unwrap();
        assert!(r.config.is_none());
        assert!(
            r.matches
                .subcommand_matches("status")
                .unwrap()
                .get_one::<String>("state")
                .is_none()
        );
    }

    #[test]
    fn variables_are_upper_snake_case() {
        assert_eq!(env_name("stable-for"), "GREENLIGHT_STABLE_FOR");
        assert_eq!(config_env(), "GREENLIGHT_CONFIG");
    }
}
