//! `greenlight lint`, `greenlight rules`, `greenlight explain`: the command-line edge of
//! greenlight-lint. Owns argument parsing, the config file lookup, printing and the exit code
//! (0 nothing reaches `--fail-on`, 1 something does, 2 usage/config errors and unreadable paths).
//! Must never: print anything but the report on stdout (SARIF consumers parse all of it).

use clap::{Args, ValueEnum};
use greenlight_lint::{Chart, FailOn, Options, report, rules};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Human,
    Json,
    Sarif,
    Github,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum FailOnArg {
    Error,
    Warning,
    Never,
}

#[derive(Args)]
pub struct LintArgs {
    /// Files, directories (recursive *.yaml, *.yml, *.json, *.sh, *.bash and sh/bash
    /// shebang scripts; GitHub Actions workflows and .gitlab-ci.yml are read as pipelines) or
    /// `-` for stdin. Default: `.`
    pub paths: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
    /// Config file (default: `.greenlight.toml` in the current directory, when present).
    #[arg(long)]
    pub config: Option<String>,
    /// Run only these rules (IDs or names, comma-separated); replaces the default set.
    #[arg(long, value_delimiter = ',')]
    pub select: Vec<String>,
    /// Do not run these rules (IDs or names, comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub ignore: Vec<String>,
    /// Lowest severity that makes the exit code 1 (default: error, or `fail-on` in the config).
    #[arg(long, value_enum)]
    pub fail_on: Option<FailOnArg>,
    /// Audit mode: `greenlight.dev/ignore` annotations and `# greenlight:ignore` comments do not suppress.
    #[arg(long)]
    pub no_inline_ignores: bool,
    /// The Helm chart rendered output came from (`helm template DIR | greenlight lint --chart
    /// DIR -`): findings point at its template lines. Default: the current directory, when its
    /// Chart.yaml `name` is the first segment of the `# Source:` paths.
    #[arg(long, value_name = "DIR")]
    pub chart: Option<String>,
    /// A values file given to `helm template -f` (repeatable, later ones win): a finding whose
    /// value was printed from `.Values` also points at where the value is set.
    #[arg(long = "values", short = 'f', value_name = "FILE")]
    pub values: Vec<String>,
    /// Apply the mechanical fixes to the files (GL101: the grace period raised to the value
    /// the fix names; GL301: an explicit rolling-update strategy; GL302: `maxSurge: 1`), then
    /// lint again: the report and the exit code are those of what remains. Never standard
    /// input or rendered Helm output.
    #[arg(long, conflicts_with = "diff")]
    pub fix: bool,
    /// Print the mechanical fixes `--fix` would apply, as a unified diff, instead of the
    /// report; the exit code is the report's.
    #[arg(long)]
    pub diff: bool,
    /// With --fix or --diff: also pin each container image GL001 flags to the digest its
    /// registry serves (`image: web:latest` → `web:latest@sha256:…`), as `greenlight guard
    /// image --resolve` does.
    #[arg(long)]
    pub resolve: bool,
    /// With --resolve: talk to registries over plain HTTP (a local registry).
    #[arg(long, requires = "resolve")]
    pub plain_http: bool,
    /// With --resolve: a file holding a bearer token for the registry (anonymous without it).
    #[arg(long, requires = "resolve", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The directory `kustomize build` was given (`kustomize build DIR | greenlight lint
    /// --kustomize-root DIR -`): with `buildMetadata: [originAnnotations]`, findings point at
    /// the files the objects came from, relative to it. Default: the current directory.
    #[arg(long, value_name = "DIR")]
    pub kustomize_root: Option<String>,
    /// Also lint test directories (testdata, test, tests, e2e, fixtures, _archived) found while
    /// walking a directory; a path named on the command line is always linted.
    #[arg(long)]
    pub include_tests: bool,
}

/// Each reference GL001 asks to pin, resolved by its registry: reference → the reference
/// pinned to the served digest. A reference that cannot be resolved is named on stderr and
/// left as it is (its finding remains).
fn resolve_pins(
    rep: &greenlight_lint::Report,
    plain_http: bool,
    token_file: Option<&Path>,
) -> anyhow::Result<std::collections::HashMap<String, String>> {
    use greenlight_core::image::ImageRef;
    use greenlight_registry::{BearerToken, ClientOptions, RegistryClient};
    let mut wanted: Vec<&str> = rep
        .diagnostics
        .iter()
        .flat_map(|d| d.edits.iter())
        .filter_map(|e| e.pin.as_deref())
        .collect();
    wanted.sort();
    wanted.dedup();
    let mut out = std::collections::HashMap::new();
    if wanted.is_empty() {
        return Ok(out);
    }
    let token = match token_file {
        Some(p) => {
            let secret = super::secret_file("--token-file", p)?;
            Some(
                BearerToken::new(secret.expose(), format!("--token-file {}", p.display()))
                    .map_err(|e| super::usage(e.to_string()))?,
            )
        }
        None => None,
    };
    crate::install_crypto();
    let registry = RegistryClient::new(ClientOptions {
        plain_http,
        timeout: std::time::Duration::from_secs(30),
        token,
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for reference in wanted {
        let Ok(image) = ImageRef::parse(reference) else {
            continue;
        };
        match runtime.block_on(registry.resolve(&image)) {
            Ok(digest) => {
                out.insert(reference.to_string(), image.pinned_to(&digest));
            }
            Err(err) => {
                let err = anyhow::Error::new(err);
                super::err(&format!(
                    "greenlight: cannot resolve `{reference}`, left as it is: {err:#}\n"
                ))?;
            }
        }
    }
    Ok(out)
}

/// The files the report's fixes change: (name, text before, text after), in file order.
/// Rendered Helm output committed to the repository is never edited (its findings carry no
/// edits); a file whose fixes do not apply cleanly is an error, not a half-edit.
fn fixes(
    sources: &[greenlight_lint::Source],
    rep: &greenlight_lint::Report,
    pins: Option<&std::collections::HashMap<String, String>>,
) -> anyhow::Result<Vec<(String, String, String)>> {
    // A pin is applied only with the digest its registry served.
    let edits = greenlight_lint::fix::select(
        rep.diagnostics
            .iter()
            .flat_map(|d| d.edits.iter())
            .filter_map(|e| match &e.pin {
                None => Some(e.clone()),
                Some(reference) => pins?.get(reference).map(|p| e.pinned(p)),
            })
            .collect(),
    );
    let mut out = Vec::new();
    for src in sources.iter().filter(|s| !s.stream) {
        let mut mine: Vec<greenlight_lint::fix::TextEdit> = edits
            .iter()
            .filter(|e| e.file == src.name)
            .cloned()
            .collect();
        if mine.is_empty() {
            continue;
        }
        // Written back byte for byte: a file read through a byte-order mark or as UTF-16 is
        // left alone rather than re-encoded.
        let on_disk = greenlight::files::read_bounded(
            std::path::Path::new(&src.name),
            greenlight_lint::MAX_FILE_BYTES,
            "input",
        );
        if on_disk.ok().as_deref() != Some(src.text.as_bytes()) {
            super::err(&format!(
                "greenlight: not fixing {}: it is not plain UTF-8 text as read (a byte-order \
                 mark or UTF-16)\n",
                src.name
            ))?;
            continue;
        }
        if src.text.contains("\r\n") {
            for e in &mut mine {
                e.text = e.text.replace('\n', "\r\n");
            }
        }
        let mine: Vec<&greenlight_lint::fix::TextEdit> = mine.iter().collect();
        let new = greenlight_lint::fix::apply(&src.text, &mine).ok_or_else(|| {
            anyhow::anyhow!("--fix: the fixes for {} do not apply to its text", src.name)
        })?;
        out.push((src.name.clone(), src.text.clone(), new));
    }
    Ok(out)
}

/// `greenlight rules` has formats of its own: a rule list is not a report.
#[derive(Clone, Copy, ValueEnum)]
pub enum RulesFormat {
    Human,
    Json,
    /// The full reference, as committed in docs/lint-rules.md.
    Markdown,
}

#[derive(Args)]
pub struct RulesArgs {
    /// Output format: a table (human), JSON, or the full Markdown reference (docs/lint-rules.md).
    #[arg(long, value_enum, default_value = "human")]
    pub format: RulesFormat,
}

#[derive(Args)]
pub struct ExplainArgs {
    /// Rule ID (`GL101`) or name (`pdb-blocks-drain`).
    pub rule: String,
}

fn rule_ids(list: &[String], flag: &str) -> anyhow::Result<Vec<&'static str>> {
    list.iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(|s| {
            rules::find(s).map(|r| r.id).ok_or_else(|| {
                super::usage(format!(
                    "{flag}: unknown rule `{s}` (see `greenlight rules`)"
                ))
            })
        })
        .collect()
}

pub fn run_lint(a: LintArgs) -> anyhow::Result<ExitCode> {
    let cfg = super::config_file(a.config.as_deref().map(std::path::Path::new))?.lint;
    let select = if a.select.is_empty() {
        None
    } else {
        Some(rule_ids(&a.select, "--select")?)
    };
    let ignore = rule_ids(&a.ignore, "--ignore")?;
    let mut opts = Options::from_config(&cfg, select, &ignore);
    opts.inline_ignores = !a.no_inline_ignores;
    if let Some(root) = &a.kustomize_root {
        if !Path::new(root).is_dir() {
            return Err(super::usage(format!(
                "--kustomize-root {root}: not a directory"
            )));
        }
        opts.kustomize_root = PathBuf::from(root);
    }
    let fail_on = match a.fail_on {
        Some(FailOnArg::Error) => FailOn::Error,
        Some(FailOnArg::Warning) => FailOn::Warning,
        Some(FailOnArg::Never) => FailOn::Never,
        None => cfg.fail_on.unwrap_or(FailOn::Error),
    };
    let paths = if a.paths.is_empty() {
        vec![".".to_string()]
    } else {
        a.paths
    };
    let read = greenlight_lint::ReadOptions {
        exclude: cfg.exclude.clone(),
        include_tests: a.include_tests || cfg.include_tests,
    };
    if (a.fix || a.diff) && paths.iter().any(|p| p == "-") {
        return Err(super::usage(format!(
            "{}: standard input cannot be fixed in place; fix the files it was rendered from \
             (a chart's templates or values, a kustomization's sources)",
            if a.fix { "--fix" } else { "--diff" }
        )));
    }
    let inputs = greenlight_lint::read_inputs_with(&paths, &read, &mut std::io::stdin().lock())
        .map_err(|e| super::usage(e.to_string()))?;
    opts.chart = chart(&a.chart, &a.values, &inputs.sources)?.map(std::sync::Arc::new);
    let mut rep = greenlight_lint::lint(&inputs.sources, inputs.unreadable, &opts);
    rep.notes.extend(inputs.notes);
    if a.resolve && !(a.fix || a.diff) {
        return Err(super::usage(
            "--resolve pins images only with --fix or --diff",
        ));
    }
    if a.fix || a.diff {
        let pins = if a.resolve {
            Some(resolve_pins(&rep, a.plain_http, a.token_file.as_deref())?)
        } else {
            None
        };
        let fixed = fixes(&inputs.sources, &rep, pins.as_ref())?;
        if a.diff {
            let diff: String = fixed
                .iter()
                .map(|(name, old, new)| {
                    similar::TextDiff::from_lines(old.as_str(), new.as_str())
                        .unified_diff()
                        .context_radius(3)
                        .header(&format!("a/{name}"), &format!("b/{name}"))
                        .to_string()
                })
                .collect();
            super::out(&diff)?;
            let failed = rep.diagnostics.iter().any(|d| report::reaches(d, fail_on));
            return Ok(if failed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            });
        }
        for (name, _, new) in &fixed {
            std::fs::write(name, new)
                .map_err(|e| anyhow::anyhow!("--fix: cannot write {name}: {e}"))?;
        }
        let count = rep
            .diagnostics
            .iter()
            .filter(|d| !d.edits.is_empty())
            .count();
        super::err(&format!(
            "greenlight: fixed {count} finding(s) in {} file(s); linting again\n",
            fixed.len()
        ))?;
        // What remains decides the report and the exit code.
        let again = greenlight_lint::read_inputs_with(&paths, &read, &mut std::io::empty())
            .map_err(|e| super::usage(e.to_string()))?;
        rep = greenlight_lint::lint(&again.sources, again.unreadable, &opts);
        rep.notes.extend(again.notes);
    }
    let out = match a.format {
        Format::Human => report::human(&rep),
        Format::Json => report::json(&rep),
        Format::Sarif => report::sarif(&rep, &std::env::current_dir()?),
        Format::Github => report::github(&rep),
    };
    super::out(&out)?;
    let failed = rep.diagnostics.iter().any(|d| report::reaches(d, fail_on));
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The chart of `--chart`, else the current directory's when the input was rendered from it.
fn chart(
    dir: &Option<String>,
    values: &[String],
    sources: &[greenlight_lint::Source],
) -> anyhow::Result<Option<Chart>> {
    let cwd = std::env::current_dir().ok();
    for v in values {
        if !Path::new(v).is_file() {
            return Err(super::usage(format!("--values {v}: no such file")));
        }
    }
    let values: Vec<PathBuf> = values.iter().map(PathBuf::from).collect();
    let chart = match dir {
        Some(d) => Some(
            Chart::load(Path::new(d), &values, cwd.as_deref())
                .map_err(|e| super::usage(e.to_string()))?,
        ),
        None => Chart::detect(Path::new("."), sources, &values, cwd.as_deref())
            .map_err(|e| super::usage(e.to_string()))?,
    };
    if chart.is_none() && !values.is_empty() {
        return Err(super::usage(
            "--values needs the chart it belongs to: give --chart DIR, or run in the chart's \
             directory (its Chart.yaml `name` is the first segment of the `# Source:` paths)"
                .to_string(),
        ));
    }
    Ok(chart)
}

pub fn run_rules(a: RulesArgs) -> anyhow::Result<ExitCode> {
    let out = match a.format {
        RulesFormat::Human => report::rules_table(),
        RulesFormat::Json => report::rules_json(),
        RulesFormat::Markdown => report::reference_markdown(),
    };
    super::out(&out)?;
    Ok(ExitCode::SUCCESS)
}

pub fn run_explain(a: ExplainArgs) -> anyhow::Result<ExitCode> {
    let rule = rules::find(a.rule.trim()).ok_or_else(|| {
        super::usage(format!(
            "unknown rule `{}` (see `greenlight rules`)",
            a.rule
        ))
    })?;
    super::out(&report::explain(rule))?;
    Ok(ExitCode::SUCCESS)
}
