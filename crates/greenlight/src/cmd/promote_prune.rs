//! `greenlight promote prune-survey --config <promote.yaml>`: lists what Argo CD would delete if
//! prune were turned on for the candidates' Application (`candidate.app`): a dry-run sync with
//! prune through Argo CD's API, its result read once its operation has finished
//! (`docs/promote.md#prune-survey`). Prints each resource (group/kind namespace/name), or that
//! nothing would be pruned; `--output json` prints one JSON object instead.
//!
//! Exit 0 when the survey was made, whatever it found; 1 when it could not be (the app missing,
//! Argo CD unreachable or refusing, the operation not finished within `--timeout`); 2 for a
//! usage or configuration error.
//!
//! Must never: request a sync that is not a dry run, or change the Application's spec (the
//! library's survey can do neither); touch git; put a token in a message or an argument.

use crate::cmd::args::ArgoCdArgs;
use crate::cmd::{positive_duration_flag, usage};
use anyhow::{Context as _, Result};
use clap::{Args, ValueEnum};
use greenlight::promote::prune::{self, Survey, SurveyError, Wait};
use greenlight::promote::{self as config, LoadError};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Args)]
pub struct PruneSurveyArgs {
    /// The promotion config (promote.yaml; docs/promote.md): its candidate.app is surveyed.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    #[command(flatten)]
    pub argocd: ArgoCdArgs,
    /// How long to wait in all: for an operation under way to end, then for the dry run's.
    #[arg(long, default_value = "2m", value_parser = crate::cmd::positive_duration_arg)]
    pub timeout: String,
    /// `text` (lines), or `json` (one object on stdout).
    #[arg(long, value_enum, default_value = "text")]
    pub output: Format,
}

pub fn prune_survey(a: PruneSurveyArgs) -> Result<ExitCode> {
    let file = a.config.display().to_string();
    let promotion = match config::load(&a.config) {
        Ok(p) => p,
        Err(e @ LoadError::Read { .. }) => return Err(usage(e.to_string())),
        Err(LoadError::Invalid(problems)) => {
            for p in &problems {
                errln!("error: {p}");
            }
            errln!(
                "error: {file}: {} problem(s); nothing was surveyed",
                problems.len()
            );
            return Ok(ExitCode::from(2));
        }
    };
    let timeout = positive_duration_flag("--timeout", &a.timeout)?;
    let argocd = a.argocd.read()?;
    crate::install_crypto();
    let argo = greenlight_argocd::ArgoClient::with_options(
        &argocd.url,
        argocd.token.clone(),
        argocd.client_options(),
    )
    .map_err(|e| usage(format!("--argocd-url: {e}")))?;
    let app = promotion.candidate.app.clone();
    let wait = Wait {
        timeout,
        poll: Duration::from_millis(500).min(timeout),
    };
    let rt = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let outcome = rt.block_on(prune::survey(&argo, &app, wait));
    let survey = match outcome {
        Ok(s) => s,
        Err(e) => {
            if a.output == Format::Json {
                outln!(
                    "{}",
                    json!({"app": app.to_string(), "surveyed": false, "error": e.to_string()})
                );
            }
            errln!("error: candidate.app in {file}: {e}");
            let forbidden = match &e {
                SurveyError::NotFound { .. } => true,
                SurveyError::Argo { error, .. } => error.http_status() == Some(403),
                _ => false,
            };
            if forbidden {
                errln!(
                    "error: the survey needs the token to `get` and `sync` the Application in Argo CD's RBAC (a dry run still asks for `sync`)"
                );
            }
            return Ok(ExitCode::from(1));
        }
    };
    match a.output {
        Format::Json => {
            let mut v = serde_json::to_value(&survey)?;
            v["app"] = json!(app.to_string());
            v["surveyed"] = json!(true);
            outln!("{v}");
        }
        Format::Text => print_text(&app.to_string(), &survey)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn print_text(app: &str, s: &Survey) -> Result<()> {
    let at = short(&s.revision);
    if s.would_prune.is_empty() {
        outln!(
            "prune-survey: Application `{app}` at {at}: nothing would be pruned (Argo CD's dry-run sync with prune deletes nothing)"
        );
    } else {
        outln!(
            "prune-survey: Application `{app}` at {at}: a sync with prune would delete {} resource(s) that are live but no longer in git:",
            s.would_prune.len()
        );
        for r in &s.would_prune {
            outln!("  {}", r.label());
        }
    }
    if !s.kept.is_empty() {
        outln!("kept although no longer in git (a prune would leave them):");
        for r in &s.kept {
            outln!("  {} ({})", r.label(), r.message);
        }
    }
    for r in &s.not_in_result {
        errln!(
            "warning: Argo CD's comparison says {} requires pruning, but its dry run did not report it: look at it before enabling prune",
            r.label()
        );
    }
    Ok(())
}

fn short(revision: &str) -> &str {
    if revision.len() == 40 && revision.chars().all(|c| c.is_ascii_hexdigit()) {
        &revision[..7]
    } else if revision.is_empty() {
        "(no revision)"
    } else {
        revision
    }
}
