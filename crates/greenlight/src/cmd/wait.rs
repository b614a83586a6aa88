//! `greenlight wait`: parse, call the library's [`greenlight::wait::wait`], print the answer.
//! Exit 0 live, 1 not live (the verdict's reason), 2 usage, 3 Argo CD (or git) could not be
//! observed well enough to answer (docs/wait.md). `--source kube` reads the Application from
//! the Kubernetes API instead of Argo CD's (docs/wait.md#source-kube).

use crate::cmd::args::{ArgoCdArgs, GitArgs, JudgeArgs, OneAppSourceArgs, help_of};
use crate::cmd::{positive_duration_flag, usage};
use anyhow::Result;
use clap::Args;
use greenlight::wait::{Progress, WaitConfig, WaitSource, Waited};
use greenlight_core::directive::AppRef;
use greenlight_core::repo_url::RepoUrl;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args)]
#[command(mut_args(help_of(&[
    ("git_author", None),
    ("stable_for", Some("How long the app must stay healthy after the commit reached it")),
    ("stale_after", None),
    ("unknown_app_grace", None),
    ("fetch_interval", None),
    ("argocd_url", Some("Argo CD API server, e.g. https://argocd.example.com (required with --source argocd; with --source kube, where resource trees are read)")),
])))]
// `--argocd-url` is required with `--source argocd` only: `run` says so, not clap.
#[command(mut_arg("argocd_url", |a| a.required(false)))]
pub struct WaitArgs {
    /// The Argo CD Application (`name`, or `namespace/name`).
    #[arg(long)]
    pub app: String,
    /// The commit: a SHA or any revision git resolves after a fetch of the branch; `HEAD` (the
    /// default) is the branch's tip.
    #[arg(long, default_value = "HEAD")]
    pub commit: String,
    /// The answer is due by then: reached, healthy and stable within this, or not live.
    #[arg(long, default_value = "15m")]
    pub timeout: String,
    /// `Healthy`, or `Healthy,Running`: live also means every Pod runs the digest git pins
    /// (as `greenlight verify`; docs/verdicts.md#expect-running).
    #[arg(long, default_value = "Healthy", value_parser = ["Healthy", "Healthy,Running", "Running,Healthy", "Running"])]
    pub expect: String,
    /// The deployment repository: a URL, or a bare repository's path.
    #[arg(long)]
    pub repo: String,
    /// The branch the commit must be on (default: the remote's HEAD branch).
    #[arg(long)]
    pub branch: Option<String>,
    #[command(flatten)]
    pub source: OneAppSourceArgs,
    #[command(flatten)]
    pub argocd: ArgoCdArgs,
    #[command(flatten)]
    pub git: GitArgs,
    /// Where the clone is kept between waits (default: a scratch directory, removed afterwards).
    #[arg(long = "data-dir")]
    pub data_dir: Option<PathBuf>,
    /// `text`: one line with the answer on stdout; `json`: one JSON object (docs/wait.md#json).
    /// Progress lines go to stderr either way.
    #[arg(long, value_enum, default_value = "text")]
    pub output: WaitOutput,
    #[command(flatten)]
    pub judge: JudgeArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOutput {
    Text,
    Json,
}

struct Stderr;

impl Progress for Stderr {
    fn line(&self, line: &str) {
        greenlight::output::stderr_line(line);
    }
}

pub fn run(a: WaitArgs) -> Result<ExitCode> {
    let app = AppRef::parse(&a.app).map_err(|e| usage(format!("--app {:?}: {e}", a.app)))?;
    let timeout = positive_duration_flag("--timeout", &a.timeout)?;
    let timing = a.judge.read()?;
    let git = a.git.read()?;
    let source = match a.source.read()? {
        None if a.argocd.argocd_url.is_none() => {
            return Err(usage(
                "--argocd-url is required with --source argocd (the default); with --source kube it is optional",
            ));
        }
        None => WaitSource::ArgoCd(a.argocd.read()?),
        Some(app) => WaitSource::Kube {
            app,
            argocd: a.argocd.read_optional()?,
        },
    };
    let repo = RepoUrl::new(a.repo.clone());
    if let Some(warning) = crate::cmd::args::url_credentials_warning("--repo", &repo) {
        errln!("warning: {warning}");
    }
    crate::install_crypto();
    let cfg = WaitConfig {
        repo,
        branch: a.branch,
        git_token: git.token,
        source,
        app,
        commit: Some(a.commit),
        timeout,
        stable_for_ms: timing.stable_for_ms,
        stale_after_ms: timing.stale_after_ms,
        unknown_app_grace_ms: timing.unknown_app_grace_ms,
        fetch_interval: timing.fetch_interval,
        data_dir: a.data_dir,
        expect_running: a.expect != "Healthy",
    };
    let app_name = cfg.app.to_string();
    let waited = match greenlight::wait::wait(cfg, Arc::new(Stderr)) {
        Ok(w) => w,
        Err(e) if crate::cmd::exit_code_of(&e) == 2 => return Err(e),
        // Nothing could be observed to answer with: git or Argo CD failed before a verdict.
        Err(e) => Waited {
            outcome: "unobserved",
            commit: String::new(),
            app: app_name,
            state: None,
            reason: format!("could not observe: {e:#}"),
            reached_at: None,
            healthy_since: None,
            later_commits: None,
            exit_code: 3,
        },
    };
    match a.output {
        WaitOutput::Json => outln!("{}", serde_json::to_string(&waited)?),
        WaitOutput::Text => {
            let commit = waited.commit.get(..12).unwrap_or(&waited.commit);
            let head = match waited.outcome {
                "live" => format!("live: {commit} on {}", waited.app),
                "not-live" => format!(
                    "not live: {commit} on {} ({})",
                    waited.app,
                    waited.state.as_deref().unwrap_or("no verdict")
                ),
                _ => format!(
                    "unobserved: {} on {}",
                    if commit.is_empty() {
                        "the commit"
                    } else {
                        commit
                    },
                    waited.app
                ),
            };
            outln!("{head}: {}", waited.reason);
        }
    }
    Ok(ExitCode::from(waited.exit_code))
}
