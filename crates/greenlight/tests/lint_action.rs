//! The repository's composite GitHub Action (`action.yml`), checked without GitHub: its metadata
//! as GitHub reads it (a composite action; every input declared and used, and used only through
//! a step's `env`; `uses:` pinned; `run:` steps with a shell GitHub has), its scripts parsed by
//! their shell, every `greenlight` command and flag they (and the inputs' descriptions) name
//! accepted by the built binary, and the lint step's script run as the runner runs it, with the
//! built binary standing in for the one the build step installs.

mod yaml;

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_greenlight");

/// The shells GitHub runs a composite action's `run:` step with (`shell:` is required there).
const SHELLS: [&str; 6] = ["bash", "sh", "pwsh", "python", "cmd", "powershell"];

/// Variables the runner sets for every step, which a script may read without an `env:` entry.
fn runner_variable(name: &str) -> bool {
    name.starts_with("GITHUB_")
        || name.starts_with("RUNNER_")
        || ["HOME", "PATH", "CI", "PWD"].contains(&name)
}

/// The names of the `inputs.<name>` references inside the `${{ … }}` expressions of `text`.
/// `Err` for an expression that is not closed, or that reads an input by index
/// (`inputs['x']`), which this check would not see.
fn input_refs(text: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        let after = &rest[start + 3..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("an expression that is not closed: {text:?}"))?;
        let expr = &after[..end];
        if expr.contains("inputs[") {
            return Err(format!("an input read by index: {expr:?}"));
        }
        let mut e = expr;
        while let Some(i) = e.find("inputs.") {
            let preceded = e[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
            let name: String = e[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                .collect();
            if !preceded {
                if name.is_empty() {
                    return Err(format!("`inputs.` without a name: {expr:?}"));
                }
                names.push(name.clone());
            }
            e = &e[i + 7 + name.len()..];
        }
        rest = &after[end + 2..];
    }
    Ok(names)
}

/// Whether `uses` names an action pinned the way a reader can trust: `owner/repo[/path]@ref`
/// with a full commit SHA or a version tag (`v4`, `v4.1.7`) as the ref — never a branch.
fn pinned_action(uses: &str) -> bool {
    let Some((action, reference)) = uses.split_once('@') else {
        return false;
    };
    let segment_ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && s != "."
            && s != ".."
    };
    let parts: Vec<&str> = action.split('/').collect();
    let sha = reference.len() == 40 && reference.chars().all(|c| c.is_ascii_hexdigit());
    let version = reference.strip_prefix('v').is_some_and(|v| {
        !v.is_empty()
            && v.split('.')
                .all(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    });
    parts.len() >= 2 && parts.iter().all(|p| segment_ok(p)) && (sha || version)
}

/// The variables a shell script reads: `$NAME` and `${NAME…}` (not `$1`, `$?`, `$(…)`), outside
/// single quotes and comments.
fn script_variables(script: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in script.lines() {
        let (mut in_single, mut in_double) = (false, false);
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '#' if !in_single && !in_double && (i == 0 || chars[i - 1].is_whitespace()) => {
                    break;
                }
                '"' if !in_single => in_double = !in_double,
                '\'' if !in_double => in_single = !in_single,
                '$' if !in_single => {
                    let start = i + 1 + usize::from(chars.get(i + 1) == Some(&'{'));
                    let name: String = chars[start.min(chars.len())..]
                        .iter()
                        .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
                        .collect();
                    if name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                        out.insert(name);
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
    out
}

/// The simple commands of a shell script, as words with quotes removed: split at `;`, `|`, `&`
/// and newlines, redirections (`>`, `2>&1`, `< file`) and comments left out. Enough for the
/// one-line commands of an action's steps; `Err` for an unclosed quote.
fn commands(script: &str) -> Result<Vec<Vec<String>>, String> {
    #[derive(Default)]
    struct Line {
        commands: Vec<Vec<String>>,
        words: Vec<String>,
        word: Option<String>,
        /// The next word is a redirection's target.
        redirect: bool,
    }
    impl Line {
        fn end_word(&mut self) {
            if let Some(w) = self.word.take()
                && !std::mem::take(&mut self.redirect)
            {
                self.words.push(w);
            }
        }
        fn end_command(&mut self) {
            self.end_word();
            if !self.words.is_empty() {
                self.commands.push(std::mem::take(&mut self.words));
            }
        }
    }
    let mut out = Vec::new();
    for text in script.lines() {
        let mut line = Line::default();
        let mut quote: Option<char> = None;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some('"'), '\\') => {
                    if let Some(n) = chars.next() {
                        line.word.get_or_insert_default().push(n);
                    }
                }
                (Some(_), c) => line.word.get_or_insert_default().push(c),
                (None, '\'' | '"') => {
                    quote = Some(c);
                    line.word.get_or_insert_default();
                }
                (None, '#') if line.word.is_none() => break,
                (None, ' ' | '\t') => line.end_word(),
                (None, ';' | '|' | '&') => line.end_command(),
                (None, '>' | '<') => {
                    // A file descriptor written before it (`2>`) is part of the redirection.
                    if line
                        .word
                        .as_deref()
                        .is_some_and(|w| w.chars().all(|d| d.is_ascii_digit()))
                    {
                        line.word = None;
                    }
                    line.end_word();
                    line.redirect = true;
                    if chars.peek() == Some(&'&') {
                        chars.next();
                    }
                }
                (None, c) => line.word.get_or_insert_default().push(c),
            }
        }
        if quote.is_some() {
            return Err(format!("an unclosed quote: {text:?}"));
        }
        line.end_command();
        out.extend(line.commands);
    }
    Ok(out)
}

/// The shell keywords that may stand before a command on its line.
fn strip_keywords(words: &[String]) -> &[String] {
    let mut w = words;
    while let Some(first) = w.first() {
        if ["if", "then", "else", "elif", "do", "while", "until", "!"].contains(&first.as_str()) {
            w = &w[1..];
        } else {
            break;
        }
    }
    w
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("run {:?}: {e}", cmd.get_program()))
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// The options a `greenlight <subcommand> --help` lists (`--format`, `-f`, …).
fn options_of(subcommand: &str) -> BTreeSet<String> {
    let o = run(Command::new(BIN).args([subcommand, "--help"]));
    assert!(
        o.status.success(),
        "`greenlight {subcommand} --help`: {}",
        text(&o)
    );
    String::from_utf8_lossy(&o.stdout)
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| w.starts_with('-') && w.len() > 1)
        .map(|w| w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric()))
        .filter(|w| w.len() > 1 && *w != "--")
        .map(String::from)
        .collect()
}

/// A step's `env`, each `${{ inputs.<name> }}` value replaced by `inputs[name]`; other
/// expressions are refused (this test could not evaluate them).
fn step_env(step: &Value, inputs: &BTreeMap<&str, &str>) -> Vec<(String, String)> {
    let Some(env) = step.get("env") else {
        return Vec::new();
    };
    env.as_object()
        .expect("a step's env is a mapping")
        .iter()
        .map(|(k, v)| {
            let v = v.as_str().expect("env values are strings");
            let value = match v
                .trim()
                .strip_prefix("${{")
                .and_then(|e| e.strip_suffix("}}"))
            {
                Some(expr) => {
                    let name = expr
                        .trim()
                        .strip_prefix("inputs.")
                        .unwrap_or_else(|| panic!("an expression other than an input: {v}"));
                    inputs
                        .get(name)
                        .unwrap_or_else(|| panic!("no value for inputs.{name}"))
                        .to_string()
                }
                None => {
                    assert!(!v.contains("${{"), "a partial expression: {v}");
                    v.to_string()
                }
            };
            (k.clone(), value)
        })
        .collect()
}

#[test]
fn the_checks_catch_what_they_exist_for() {
    assert_eq!(
        input_refs("${{ inputs.paths }} and ${{ inputs.a || inputs.b-c }} ${{ github.inputs.x }}")
            .unwrap(),
        ["paths", "a", "b-c"]
    );
    assert!(input_refs("${{ inputs['paths'] }}").is_err());
    assert!(input_refs("${{ inputs.paths").is_err());
    assert!(input_refs("${{ inputs. }}").is_err());
    assert_eq!(
        input_refs("no expression: $PATHS").unwrap(),
        Vec::<String>::new()
    );

    for ok in [
        "actions/checkout@v4",
        "actions/checkout@v4.1.7",
        "github/codeql-action/upload-sarif@v3",
        "actions/checkout@692973e3d937129bcbf40652eb9f2f61becf3332",
    ] {
        assert!(pinned_action(ok), "{ok}");
    }
    for bad in [
        "actions/checkout",
        "actions/checkout@main",
        "actions/checkout@",
        "actions/checkout@v",
        "actions/checkout@v4.",
        "checkout@v4",
        "./local-action",
        "docker://alpine:3",
        "actions/../checkout@v4",
        "actions/checkout@692973e3",
    ] {
        assert!(!pinned_action(bad), "{bad}");
    }

    assert_eq!(
        script_variables("echo \"$A'\" ${B:-x} '$C' $1 $? $(pwd) # $D\n# $F\n$E_1/x \"#$G\""),
        ["A", "B", "E_1", "G"]
            .into_iter()
            .map(String::from)
            .collect()
    );

    assert_eq!(
        commands("if [ -n \"$X\" ]; then\n  \"$R/bin/greenlight\" lint --format 'a b' $P > \"$O\" 2>&1 # c\nfi").unwrap(),
        [
            vec!["if", "[", "-n", "$X", "]"],
            vec!["then"],
            vec!["$R/bin/greenlight", "lint", "--format", "a b", "$P"],
            vec!["fi"],
        ]
        .map(|c| c.into_iter().map(String::from).collect::<Vec<_>>())
    );
    assert!(commands("echo 'open").is_err());
}

#[test]
fn action_yml_is_a_composite_action_whose_steps_and_inputs_are_real() {
    let action = yaml::load("action.yml");
    let root = yaml::repo_root();

    // Metadata GitHub requires.
    for key in ["name", "description"] {
        assert!(
            action[key].as_str().is_some_and(|s| !s.trim().is_empty()),
            "action.yml: `{key}` is required"
        );
    }
    if let Some(color) = action["branding"]["color"].as_str() {
        assert!(
            [
                "white",
                "black",
                "yellow",
                "blue",
                "green",
                "orange",
                "red",
                "purple",
                "gray-dark"
            ]
            .contains(&color),
            "branding.color {color}"
        );
    }
    assert_eq!(action["runs"]["using"], "composite", "a composite action");

    // Inputs: each described, each used; nothing used that is not declared.
    let inputs = action["inputs"].as_object().expect("inputs");
    assert!(!inputs.is_empty());
    for (name, input) in inputs {
        assert!(
            input["description"].as_str().is_some_and(|d| !d.is_empty()),
            "input {name}: a description"
        );
    }
    let steps = action["runs"]["steps"].as_array().expect("runs.steps");
    assert!(!steps.is_empty());
    let mut used = BTreeSet::new();
    for (i, step) in steps.iter().enumerate() {
        let mut strings = Vec::new();
        collect_strings(step, &mut strings);
        for s in strings {
            used.extend(input_refs(s).unwrap_or_else(|e| panic!("step {i}: {e}")));
        }
        // Inputs reach a script through `env`, never spliced into its text (which would let an
        // input's value run as code).
        if let Some(script) = step["run"].as_str() {
            assert!(
                !script.contains("${{"),
                "step {i}: an expression inside `run:`; pass it through `env:`"
            );
        }
    }
    let declared: BTreeSet<String> = inputs.keys().cloned().collect();
    assert_eq!(
        used, declared,
        "inputs used by the steps vs. inputs declared"
    );

    // Steps: `uses:` pinned, `run:` with a shell GitHub has, scripts that parse and read only
    // variables they are given.
    let mut greenlight_calls: Vec<(usize, Vec<String>)> = Vec::new();
    let mut install_root: Option<String> = None;
    for (i, step) in steps.iter().enumerate() {
        match (step["uses"].as_str(), step["run"].as_str()) {
            (Some(uses), None) => {
                assert!(
                    pinned_action(uses),
                    "step {i}: `uses: {uses}` is not owner/repo@<tag or sha>"
                )
            }
            (None, Some(script)) => {
                let shell = step["shell"].as_str().unwrap_or_else(|| {
                    panic!("step {i}: a composite action's `run:` needs `shell:`")
                });
                assert!(SHELLS.contains(&shell), "step {i}: shell {shell}");
                // What follows reads POSIX shell; a pwsh or python step is checked this far.
                if !["bash", "sh"].contains(&shell) {
                    continue;
                }
                let d = tempfile::tempdir().unwrap();
                let file = d.path().join("step.sh");
                std::fs::write(&file, script).unwrap();
                let o = run(Command::new(shell).arg("-n").arg(&file));
                assert!(o.status.success(), "step {i}: {shell} -n: {}", text(&o));
                let env_keys: BTreeSet<String> = step["env"]
                    .as_object()
                    .map(|e| e.keys().cloned().collect())
                    .unwrap_or_default();
                let read = script_variables(script);
                for v in &read {
                    assert!(
                        env_keys.contains(v) || runner_variable(v),
                        "step {i}: ${v} is neither in its env nor set by the runner"
                    );
                }
                for k in &env_keys {
                    assert!(read.contains(k), "step {i}: env {k} is never read");
                }
                for words in commands(script).unwrap_or_else(|e| panic!("step {i}: {e}")) {
                    let words = strip_keywords(&words);
                    let Some(program) = words.first() else {
                        continue;
                    };
                    if program.rsplit('/').next() == Some("greenlight") {
                        greenlight_calls.push((i, words.to_vec()));
                    } else {
                        // Anything else is the shell's own or a program the runner has (and
                        // so does the machine running this test: cargo).
                        let o = run(Command::new("bash")
                            .args(["-c", "type -t \"$1\"", "type"])
                            .arg(program));
                        assert!(
                            o.status.success(),
                            "step {i}: `{program}` is no command: {words:?}"
                        );
                        if words.starts_with(&["cargo".into(), "install".into()]) {
                            install_root = Some(check_cargo_install(&root, words));
                        }
                    }
                }
            }
            _ => panic!("step {i}: exactly one of `uses:` and `run:`"),
        }
    }

    // The commands: what the build step installs is what the later steps run, and every
    // subcommand and flag they pass is one the binary has.
    let install_root = install_root.expect("a step installs greenlight with cargo install");
    assert!(!greenlight_calls.is_empty(), "a step runs greenlight");
    let mut lint_options = options_of("lint");
    for (i, words) in &greenlight_calls {
        assert_eq!(
            words[0],
            format!("{install_root}/bin/greenlight"),
            "step {i} runs the greenlight the build step installed"
        );
        let sub = &words[1];
        let options = if sub == "lint" {
            std::mem::take(&mut lint_options)
        } else {
            options_of(sub)
        };
        for flag in words[2..]
            .iter()
            .filter(|w| w.starts_with('-') && *w != "-")
        {
            let flag = flag.split('=').next().unwrap();
            assert!(
                options.contains(flag),
                "step {i}: `greenlight {sub} {flag}` is not an option: {options:?}"
            );
        }
        if sub == "lint" {
            lint_options = options;
        }
    }

    // The flags and formats the inputs' descriptions tell users to pass are real too.
    for (name, input) in inputs {
        let description = input["description"].as_str().unwrap();
        for flag in description
            .split(|c: char| c.is_whitespace() || c == '`' || c == ',' || c == '(' || c == ')')
            .filter(|w| w.starts_with("--"))
        {
            assert!(
                lint_options.contains(flag),
                "input {name}: its description names {flag}, not a `greenlight lint` option"
            );
        }
    }
    let formats = lint_possible_values("--format");
    let format = &inputs["format"];
    let default = format["default"].as_str().unwrap();
    assert!(formats.contains(default), "format default {default}");
    let described: Vec<&str> = format["description"]
        .as_str()
        .unwrap()
        .split('`')
        .skip(1)
        .step_by(2)
        .collect();
    assert_eq!(
        described.iter().copied().collect::<BTreeSet<_>>(),
        formats.iter().map(String::as_str).collect(),
        "the format input lists the formats lint has"
    );
}

/// `cargo install … --path <dir> --root <root>` of the build step: the path, with
/// `$GITHUB_ACTION_PATH` as the repository's root, is the crate of the `greenlight` binary;
/// returns the root as written.
fn check_cargo_install(root: &Path, words: &[String]) -> String {
    let value = |flag: &str| {
        let i = words
            .iter()
            .position(|w| w == flag)
            .unwrap_or_else(|| panic!("cargo install without {flag}: {words:?}"));
        words[i + 1].clone()
    };
    assert!(
        words.iter().any(|w| w == "--locked"),
        "cargo install --locked: the action builds what Cargo.lock pins"
    );
    let path = value("--path");
    let rel = path
        .strip_prefix("$GITHUB_ACTION_PATH/")
        .unwrap_or_else(|| panic!("--path {path} is not inside the action's checkout"));
    let manifest = std::fs::read_to_string(root.join(rel).join("Cargo.toml"))
        .unwrap_or_else(|e| panic!("--path {path}: {e}"));
    assert!(
        manifest.contains("[[bin]]\nname = \"greenlight\""),
        "--path {path} is not the crate of the greenlight binary"
    );
    value("--root")
}

/// The `[possible values: …]` of a `greenlight lint` option, from its help.
fn lint_possible_values(flag: &str) -> BTreeSet<String> {
    let o = run(Command::new(BIN).args(["lint", "--help"]));
    let help = String::from_utf8_lossy(&o.stdout).into_owned();
    let line = help
        .lines()
        .find(|l| l.trim_start().starts_with(flag))
        .unwrap_or_else(|| panic!("{flag} in lint --help"));
    let values = line
        .split_once("[possible values: ")
        .and_then(|(_, v)| v.split_once(']'))
        .unwrap_or_else(|| panic!("no possible values: {line}"))
        .0;
    values.split(", ").map(String::from).collect()
}

fn collect_strings<'v>(v: &'v Value, out: &mut Vec<&'v str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|i| collect_strings(i, out)),
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            out.push(k);
            collect_strings(v, out)
        }),
        _ => {}
    }
}

/// The runner's view of one job: a workspace holding a manifest with a mutable tag and a
/// pinned one, `RUNNER_TEMP` holding the install root with the built binary in place of what
/// `cargo install` would put there.
struct Runner {
    dir: tempfile::TempDir,
}

impl Runner {
    fn new(install_root: &str) -> Runner {
        let dir = tempfile::tempdir().unwrap();
        let temp = dir.path().join("runner-temp");
        let rel = install_root
            .strip_prefix("$RUNNER_TEMP/")
            .unwrap_or_else(|| panic!("the install root {install_root} is not under $RUNNER_TEMP"));
        let bin = temp.join(rel).join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(BIN, bin.join("greenlight")).unwrap();
        let ws = dir.path().join("workspace");
        for (file, image) in [
            ("deploy/web.yaml", "registry.example/web:latest"),
            ("deploy/api.yaml", "registry.example/api:1.4.2"),
        ] {
            let p = ws.join(file);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(
                p,
                format!(
                    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: x}}\nspec:\n  \
                     replicas: 2\n  strategy:\n    rollingUpdate: {{maxSurge: 1, maxUnavailable: 0}}\n  \
                     template:\n    spec:\n      containers:\n        - name: x\n          image: {image}\n"
                ),
            )
            .unwrap();
        }
        Runner { dir }
    }

    fn workspace(&self) -> PathBuf {
        self.dir.path().join("workspace")
    }

    /// Runs `step`'s script with its shell, as the runner does (`bash --noprofile --norc -eo
    /// pipefail {0}` for bash), in the workspace.
    fn run_step(&self, step: &Value, inputs: &BTreeMap<&str, &str>) -> Output {
        assert_eq!(step["shell"], "bash");
        let d = self.dir.path().join("step.sh");
        std::fs::write(&d, step["run"].as_str().unwrap()).unwrap();
        let mut cmd = Command::new("bash");
        cmd.args(["--noprofile", "--norc", "-eo", "pipefail"])
            .arg(&d)
            .current_dir(self.workspace())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("RUNNER_TEMP", self.dir.path().join("runner-temp"))
            .env("GITHUB_ACTION_PATH", yaml::repo_root())
            .env("GITHUB_WORKSPACE", self.workspace())
            .envs(step_env(step, inputs));
        run(&mut cmd)
    }
}

#[test]
fn the_lint_step_runs_as_the_runner_runs_it() {
    let action = yaml::load("action.yml");
    let steps = action["runs"]["steps"].as_array().unwrap();
    let lint = steps
        .iter()
        .find(|s| {
            s["run"]
                .as_str()
                .is_some_and(|r| r.contains("/bin/greenlight\" lint"))
        })
        .expect("a step that runs greenlight lint");
    let build = steps
        .iter()
        .find_map(|s| s["run"].as_str().filter(|r| r.contains("cargo install")))
        .expect("a build step");
    let root = build
        .split_whitespace()
        .skip_while(|w| *w != "--root")
        .nth(1)
        .expect("--root")
        .trim_matches('"');
    let runner = Runner::new(root);
    let defaults: BTreeMap<&str, &str> = action["inputs"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.as_str(), v["default"].as_str().unwrap_or("")))
        .collect();

    // The defaults: annotations for the whole workspace, exit 1 on the mutable tag.
    let o = runner.run_step(lint, &defaults);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        out.starts_with("::error file=deploy/web.yaml,line=12,col=11,")
            && out.contains("title=GL001 mutable-image-tag::"),
        "{out}"
    );

    // SARIF to a file, args and several paths (split into words, as the step intends).
    let mut inputs = defaults.clone();
    inputs.insert("format", "sarif");
    inputs.insert("output", "greenlight.sarif");
    inputs.insert("args", "--fail-on never --select GL001");
    inputs.insert("paths", "deploy/api.yaml deploy/web.yaml");
    let o = runner.run_step(lint, &inputs);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        o.stdout.is_empty(),
        "the report goes to the file: {}",
        text(&o)
    );
    let sarif: Value = serde_json::from_slice(
        &std::fs::read(runner.workspace().join("greenlight.sarif")).expect("the SARIF file"),
    )
    .expect("SARIF is JSON");
    assert_eq!(sarif["version"], "2.1.0");
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{sarif:#}");
    assert_eq!(results[0]["ruleId"], "GL001");
    assert_eq!(
        results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "deploy/web.yaml"
    );

    // A pinned path alone passes.
    let mut inputs = defaults.clone();
    inputs.insert("paths", "deploy/api.yaml");
    let o = runner.run_step(lint, &inputs);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
}
