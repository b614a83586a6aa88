//! `greenlight promote run`: one run of the promotion gate (`docs/promote.md#gate`). It drives
//! the sans-IO machine (`greenlight_core::gate`) by executing each effect and reporting what
//! happened: the candidate's manifests are committed to git, the watchdog's own runtime judges
//! that commit on the candidate Application (the same judge as `greenlight watch`, in-process,
//! with a scratch state), the checks run in the written order, and the machine's promotion or
//! kept candidate is committed. Every commit the run makes after reading the live manifest is
//! guarded: if the live manifest changed in git meanwhile, nothing is pushed and the run aborts.
//!
//! Must never: promote without the machine's `CommitPromotion`; put a token in a message, a log
//! line or a process argument (tokens are read from files and given to git through its
//! credential helper); run a check kind that is not built (refused before anything is written).

use crate::cmd::args::{ArgoCd, ArgoCdArgs, GitArgs, JudgeArgs, help_of};
use crate::cmd::{positive_duration_flag, usage};
use anyhow::{Context as _, Result, anyhow};
use clap::Args;
use greenlight::clock::{Clock, SystemClock};
use greenlight::output::{LogFormat, Output};
use greenlight::promote::{self as config, LoadError};
use greenlight::runtime::{self, DaemonConfig};
use greenlight_core::candidate::{CandidateSpec, make_candidate};
use greenlight_core::directive::{Directive, Mode};
use greenlight_core::event::EventKind;
use greenlight_core::gate::{
    CANDIDATE_TRAILER, CandidateVerdict, CheckOutcome, Effect, ExpiredKept, GATE_TRAILER, Gate,
    GatePlan, Input, LiveBypass, Outcome, PlannedCheck, REVERT_KEEPS_TRAILER, Start,
};
use greenlight_core::image::{ImageRef, TagPolicy};
use greenlight_core::promote::template::CandidateValues;
use greenlight_core::promote::{CheckKind, Promotion};
use greenlight_core::repo_url::RepoUrl;
use greenlight_core::time::Timestamp;
use greenlight_core::watch::State;
use greenlight_git::{Auth, ChangeOutcome, ChangeRequest, FileChange, Repo};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// The most a listing may hold for the candidate's judge: `watch --listing-limit-mib`'s default.
const CANDIDATE_LISTING_LIMIT_BYTES: usize = 128 << 20;

/// The file that keeps the candidates' directory in git when no candidate is in it.
pub(crate) const CANDIDATES_README: &str = "README.md";
pub(crate) const CANDIDATES_README_TEXT: &str = "# Promotion candidates\n\nWritten by `greenlight promote`: each candidate of a promotion run is committed here\nwhile it is verified, and removed when the run promotes it (a failed one is kept for its\nretention window). This file keeps the directory in git when no candidate\nis in it, so that the Application deploying it never loses its path.\n";

#[derive(Args)]
pub struct RunArgs {
    /// The candidate image: pinned by digest (`registry/app@sha256:…`), or a tag with --resolve.
    #[arg(long, value_name = "IMAGE")]
    pub candidate: String,
    /// Resolve a candidate (and live image) given by tag to the digest the registry serves.
    #[arg(long)]
    pub resolve: bool,
    /// Talk to registries over plain HTTP (a local registry); with --resolve.
    #[arg(long = "plain-http", requires = "resolve")]
    pub plain_http: bool,
    /// Promote without candidate or check. Needs --reason; said as BYPASSED everywhere.
    #[arg(long = "bypass-gate", requires = "reason")]
    pub bypass_gate: bool,
    /// Why the gate is bypassed (recorded in the commit).
    #[arg(long, requires = "bypass_gate")]
    pub reason: Option<String>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args)]
pub struct SelfTestArgs {
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args)]
#[command(mut_args(help_of(&[
    ("git_author", Some("Author of the run's commits, \"Name <email>\"")),
    ("stable_for", Some("The judge's settings for the candidate, as `greenlight watch` takes them")),
    ("stale_after", None),
    ("unknown_app_grace", None),
    ("fetch_interval", None),
])))]
pub struct CommonArgs {
    /// The promotion config (promote.yaml; docs/promote.md). Its paths are the repository's.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// The deployment repository: a URL, or a bare repository's path.
    #[arg(long)]
    pub repo: String,
    /// The branch promoted on (default: the remote's HEAD branch).
    #[arg(long)]
    pub branch: Option<String>,
    #[command(flatten)]
    pub argocd: ArgoCdArgs,
    #[command(flatten)]
    pub git: GitArgs,
    /// Where the run keeps its clone (default: a scratch directory, removed afterwards).
    #[arg(long = "data-dir")]
    pub data_dir: Option<PathBuf>,
    /// How long the candidate has to reach its Application and become healthy.
    #[arg(long = "candidate-deadline", default_value = "10m")]
    pub candidate_deadline: String,
    #[command(flatten)]
    pub judge: JudgeArgs,
}

/// What the run is asked to verify: the candidate given (`run`), or none (`self-test`, which
/// makes a candidate that must fail).
struct Given {
    candidate: String,
    resolve: bool,
    plain_http: bool,
}

pub fn run(a: RunArgs) -> Result<ExitCode> {
    let bypass = if a.bypass_gate {
        let reason = a.reason.clone().unwrap_or_default();
        if reason.trim().is_empty() {
            return Err(usage("--reason: say why the gate is bypassed"));
        }
        Some(reason)
    } else {
        None
    };
    let given = Given {
        candidate: a.candidate,
        resolve: a.resolve,
        plain_http: a.plain_http,
    };
    gate(a.common, Some(given), bypass)
}

/// `promote self-test`: a candidate that cannot become healthy (its image does not exist), run
/// through the same gate; it passes only when the gate blocks it, and it never promotes.
pub fn self_test(a: SelfTestArgs) -> Result<ExitCode> {
    gate(a.common, None, None)
}

fn gate(a: CommonArgs, given: Option<Given>, bypass: Option<String>) -> Result<ExitCode> {
    let file = a.config.display().to_string();
    let promotion = match config::load(&a.config) {
        Ok(p) => p,
        Err(e @ LoadError::Read { .. }) => return Err(usage(e.to_string())),
        Err(LoadError::Invalid(problems)) => {
            for p in &problems {
                errln!("error: {p}");
            }
            errln!(
                "error: {file}: {} problem(s); nothing was run",
                problems.len()
            );
            return Ok(ExitCode::from(2));
        }
    };
    if bypass.is_none() {
        for c in &promotion.checks {
            if let CheckKind::Analysis(an) = &c.kind
                && let Some(m) = an.metrics.iter().find(|m| m.prometheus.insecure)
            {
                return Err(usage(format!(
                    "{file}: check `{}`, metric `{}`: `insecure: true` (skipping TLS verification) is not built yet for running checks; `promote plan` reads it",
                    c.name, m.name
                )));
            }
        }
    }
    let git = a.git.read()?;
    let argocd = a.argocd.read()?;
    if let Some(warning) =
        crate::cmd::args::url_credentials_warning("--repo", &RepoUrl::new(a.repo.clone()))
    {
        crate::cmd::err(&format!("warning: {warning}\n"))?;
    }
    let candidate_deadline = positive_duration_flag("--candidate-deadline", &a.candidate_deadline)?;
    let timing = a.judge.read()?;
    let (git_token, author_name, author_email) = (git.token, git.author_name, git.author_email);
    let judge = DaemonConfig {
        repo: RepoUrl::new(a.repo.clone()),
        branch: None,
        git_token: git_token.clone(),
        git_author_name: author_name.clone(),
        git_author_email: author_email.clone(),
        state: PathBuf::new(),
        data_dir: PathBuf::new(),
        stable_for_ms: timing.stable_for_ms,
        stale_after_ms: timing.stale_after_ms,
        unknown_app_grace_ms: timing.unknown_app_grace_ms,
        fetch_interval: timing.fetch_interval,
        // The candidate's watch is judged, never reverted: the run removes or keeps it.
        dry_run: true,
        since: None,
        trailer_key: promotion.commit.watch.key.clone(),
        retain_ms: 86_400_000,
        // The gate decides on its candidate's first verdict: a NOT_REACHED is its answer.
        reopen_horizon_ms: 0,
        // The candidate must be clean, not as clean as before: the gate's meaning of healthy.
        strict_health: true,
    };
    crate::install_crypto();
    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    let data_dir = a
        .data_dir
        .clone()
        .unwrap_or_else(|| scratch.path().to_path_buf());
    let rt = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let config_dir = a
        .config
        .parent()
        .map(|d| {
            if d.as_os_str().is_empty() {
                Path::new(".")
            } else {
                d
            }
        })
        .unwrap_or(Path::new("."))
        .to_path_buf();
    rt.block_on(async move {
        let candidate = match &given {
            Some(g) => Some(pin_candidate(g, &file).await?),
            None => None,
        };
        let remote = a.repo.clone();
        let dir = data_dir.join("work");
        let auth = Auth {
            token: git_token,
            username: None,
        };
        let repo = Repo::open_or_clone(&remote, &dir, auth)
            .with_context(|| format!("cannot clone {}", RepoUrl::new(remote.clone())))?;
        let (branch, head_is_branch) = match &a.branch {
            Some(b) => {
                let head = repo.remote_default_branch().ok().map(|d| d == *b);
                (b.clone(), head)
            }
            None => (repo.remote_default_branch()?, Some(true)),
        };
        let base = repo.fetch(&branch)?;
        let mut judge = judge;
        judge.branch = Some(branch.clone());
        let lock_path = format!(
            "{}/{}-candidate.lock",
            promotion.candidate.path.trim_end_matches('/'),
            promotion.live.workload.name
        );
        let lock_ttl_ms = candidate_deadline.as_millis() as i64
            + judge.unknown_app_grace_ms
            + 2 * judge.stale_after_ms
            + greenlight_core::promote::plan::plan(&promotion).total_ms
            + 600_000;
        let run = RunCtx {
            promotion,
            repo,
            branch,
            head_is_branch,
            base,
            author_name,
            author_email,
            judge,
            argocd,
            candidate_deadline,
            config_dir,
            config_file: file.clone(),
            scratch: scratch.path().to_path_buf(),
            live_text: String::new(),
            made: None,
            http: reqwest::Client::new(),
            lock_path,
            lock_held: false,
            lock_ttl_ms,
        };
        let (resolve_live, plain_http) = given
            .as_ref()
            .map_or((false, false), |g| (g.resolve, g.plain_http));
        run.go(candidate, bypass, resolve_live, plain_http).await
    })
}

/// The candidate pinned by digest: as given, or resolved with --resolve; a tag without
/// --resolve is refused with the guard's words.
async fn pin_candidate(a: &Given, file: &str) -> Result<ImageRef> {
    let image = ImageRef::parse(&a.candidate)
        .map_err(|e| usage(format!("--candidate {:?}: {e}", a.candidate)))?;
    if image.digest().is_some() {
        return Ok(image);
    }
    if !a.resolve {
        let policy = TagPolicy::default();
        let verdict = policy.judge(&image);
        let problem = verdict.problem(&image).unwrap_or_else(|| {
            format!(
                "`{}` is not pinned by digest: the gate verifies and promotes one exact image",
                image.as_str()
            )
        });
        return Err(usage(format!(
            "--candidate: {problem}; pass --resolve to pin it to the digest the registry serves, or give `<image>@sha256:<digest>` ({file} was not run)"
        )));
    }
    let digest = resolve(&image, a.plain_http).await?;
    ImageRef::parse(&image.pinned_to(&digest))
        .map_err(|e| anyhow!("the resolved reference does not parse: {e}"))
}

async fn resolve(image: &ImageRef, plain_http: bool) -> Result<String> {
    let registry = greenlight_registry::RegistryClient::new(greenlight_registry::ClientOptions {
        plain_http,
        timeout: Duration::from_secs(30),
        token: None,
    })?;
    registry
        .resolve(image)
        .await
        .map_err(|e| anyhow!("cannot resolve `{}`: {e}", image.as_str()))
}

struct RunCtx {
    promotion: Promotion,
    repo: Repo,
    branch: String,
    /// Whether the remote's `HEAD` is `branch` (`None`: the remote did not say).
    head_is_branch: Option<bool>,
    /// The branch's tip when the run read the live manifest: every later commit is guarded
    /// against a change of the live manifest since.
    base: String,
    author_name: String,
    author_email: String,
    judge: DaemonConfig,
    /// Where the Applications are read, by the run and by the candidate's judge.
    argocd: ArgoCd,
    candidate_deadline: Duration,
    config_dir: PathBuf,
    /// The config's path as given (`--config`), for the commands a message names.
    config_file: String,
    scratch: PathBuf,
    live_text: String,
    /// The candidate's file in the repository and its values, once made.
    made: Option<(String, CandidateValues, Vec<Value>)>,
    http: reqwest::Client,
    /// The run's lock in git: `<candidate.path>/<workload>-candidate.lock`, written with the
    /// candidate and removed by the commit that settles the run.
    lock_path: String,
    lock_held: bool,
    /// How long the lock is good for: the candidate's judgement and every check's worst case,
    /// with a margin; a lock past its expiry is taken over.
    lock_ttl_ms: i64,
}

impl RunCtx {
    async fn go(
        mut self,
        candidate: Option<ImageRef>,
        bypass: Option<String>,
        resolve_live: bool,
        plain_http: bool,
    ) -> Result<ExitCode> {
        let p = &self.promotion;
        let manifest = p.live.manifest.clone();
        let text = self.repo.read_file(&self.base, &manifest)?.ok_or_else(|| {
            usage(format!(
                "live.manifest {manifest}: no such file on {} at {}",
                self.branch,
                short(&self.base)
            ))
        })?;
        self.live_text = String::from_utf8(text)
            .map_err(|_| usage(format!("live.manifest {manifest}: not UTF-8 text")))?;
        let live_image = self.live_image()?;
        let live_ref = ImageRef::parse(&live_image).ok();
        let live_digest = match &live_ref {
            Some(r) if r.digest().is_some() => r.digest().map(str::to_string),
            // Said as the live manifest's image: the user named the candidate, not this one.
            Some(r) if resolve_live => Some(resolve(r, plain_http).await.with_context(|| {
                format!(
                    "live.manifest {manifest}: its image `{}` is resolved with --resolve to tell a no-op",
                    r.as_str()
                )
            })?),
            _ => None,
        };
        if let Some(refused) = self.check_applications(bypass.is_some()).await? {
            return Ok(refused);
        }
        let self_test = candidate.is_none();
        let candidate = match candidate {
            Some(c) => c,
            None => self_test_candidate(&live_image)?,
        };
        let live_tag_is_mutable = live_ref
            .as_ref()
            .filter(|r| r.digest().is_none())
            .and_then(|r| r.tag())
            .is_some_and(|t| TagPolicy::default().is_mutable(t));
        let plan = GatePlan {
            app: p.live.app.to_string(),
            checks: p
                .checks
                .iter()
                .map(|c| PlannedCheck {
                    name: c.name.clone(),
                    kind: c.kind.word().to_string(),
                })
                .collect(),
            watch_trailer: format!("{}: {}", p.commit.watch.key, p.watch_directive().render()),
        };
        let start_live_image = live_image.clone();
        let start = Start {
            candidate: candidate.as_str().to_string(),
            candidate_digest: candidate.digest().unwrap_or_default().to_string(),
            live_image,
            live_digest,
            live_tag_is_mutable,
            bypass,
            self_test,
            live_bypassed: self.live_bypassed(&start_live_image)?,
            expired_kept: self.expired_kept()?,
        };
        let (gate, first) = Gate::start(plan, start);
        let ran = self.drive(gate, first, &candidate).await;
        if ran.is_err() && self.lock_held {
            // The run failed after taking the lock: give it back rather than leave it to expire.
            if let Err(e) = self.release_lock_after_error() {
                errln!(
                    "warning: the promotion lock {} was not released: {e:#}",
                    self.lock_path
                );
            }
        }
        ran
    }

    /// Check the Applications against Argo CD before anything is written
    /// (`docs/promote.md#applications`): the live one deploys the live manifest as plain YAML
    /// (a bypass too: its commit promotes nothing otherwise), the candidates' one deploys
    /// `candidate.path` and prunes. Warnings go to stderr; problems are all reported, and the run
    /// ends with exit 2 and nothing written.
    async fn check_applications(&self, bypass: bool) -> Result<Option<ExitCode>> {
        use greenlight::promote::apps;
        let p = &self.promotion;
        let argo = greenlight_argocd::ArgoClient::with_options(
            &self.argocd.url,
            self.argocd.token.clone(),
            self.argocd.client_options(),
        )
        .map_err(|e| usage(format!("--argocd-url: {e}")))?;
        let fetch = async |label: &str, app: &greenlight_core::directive::AppRef| {
            let ns = app.namespace.as_deref().unwrap_or("");
            match argo.get(ns, &app.name).await {
                Ok(Some(found)) => Ok(found),
                Ok(None) => Err(usage(format!(
                    "{label} `{app}`: Argo CD at {} has no such Application; nothing was run",
                    argo.base_url()
                ))),
                Err(e) => Err(anyhow!(
                    "cannot read the Application `{app}` ({label}) from Argo CD: {e}; nothing was run"
                )),
            }
        };
        let target = apps::Target {
            repo: &self.judge.repo,
            branch: &self.branch,
            head_is_branch: self.head_is_branch,
        };
        let discovered = |path: &str| {
            let files = match self.repo.list_files(&self.base, path) {
                Ok(f) => f,
                Err(e) => return apps::Discovered::Unread(format!("{e}")),
            };
            let prefix = if path.is_empty() {
                String::new()
            } else {
                format!("{path}/")
            };
            let names: Vec<&str> = files
                .iter()
                .filter_map(|f| f.strip_prefix(prefix.as_str()))
                .filter(|n| !n.contains('/'))
                .collect();
            apps::discover(names)
        };
        let live = fetch("live.app", &p.live.app).await?;
        let mut found = apps::check_live(
            &live,
            &format!("live.app `{}`", p.live.app),
            &p.live.manifest,
            &p.candidate.path,
            &target,
            &discovered,
        );
        if !bypass {
            let candidates = fetch("candidate.app", &p.candidate.app).await?;
            let more = apps::check_candidates(
                &candidates,
                &format!("candidate.app `{}`", p.candidate.app),
                &p.candidate.path,
                &self.config_file,
                &target,
                &discovered,
            );
            found.problems.extend(more.problems);
            found.warnings.extend(more.warnings);
        }
        for w in &found.warnings {
            errln!("warning: {w}");
        }
        if found.problems.is_empty() {
            return Ok(None);
        }
        for problem in &found.problems {
            errln!("error: {problem}");
        }
        errln!(
            "error: {} problem(s) with the Applications in Argo CD; nothing was run",
            found.problems.len()
        );
        Ok(Some(ExitCode::from(2)))
    }

    /// The bypass that put the live image there, if one did: the newest commit of the live
    /// manifest's history that records a gate outcome (`Greenlight-Gate`) says `bypassed` and
    /// names the live image as its candidate. A later hand edit of the image is not a bypass.
    fn live_bypassed(&self, live_image: &str) -> Result<Option<LiveBypass>> {
        let history = self
            .repo
            .path_history(&self.base, &self.promotion.live.manifest, 50)?;
        for sha in history {
            let commit = self.repo.commit(&sha)?;
            let trailers = greenlight_core::trailer::parse(&commit.message);
            let field = |key: &str| {
                trailers
                    .iter()
                    .rev()
                    .find(|(k, _)| k.eq_ignore_ascii_case(key))
                    .map(|(_, v)| v.as_str())
            };
            let (Some(gate), Some(candidate)) = (field(GATE_TRAILER), field(CANDIDATE_TRAILER))
            else {
                continue;
            };
            if candidate != live_image {
                // The image changed by hand since that promotion.
                return Ok(None);
            }
            return Ok(gate
                .strip_prefix("bypassed, no check ran: ")
                .map(|reason| LiveBypass {
                    commit: short(&sha).to_string(),
                    reason: reason.to_string(),
                }));
        }
        Ok(None)
    }

    /// Other workloads' kept candidates in `candidate.path` past their `kept-until` (this run
    /// writes its own workload's candidate over its own).
    fn expired_kept(&self) -> Result<Vec<ExpiredKept>> {
        let dir = self.promotion.candidate.path.trim_end_matches('/');
        let now = SystemClock.now();
        let own = &self.promotion.live.workload.name;
        Ok(super::promote_gc::survey(&self.repo, &self.base, dir, now)?
            .into_iter()
            .filter(|(name, _, _)| name != own)
            .filter_map(|(_, path, v)| match v {
                super::promote_gc::Verdict::Expired { until } => Some(ExpiredKept {
                    path,
                    until: until.rfc3339(),
                }),
                _ => None,
            })
            .collect())
    }

    /// Execute the machine's effects, reporting each result back, until it is done.
    async fn drive(
        &mut self,
        mut gate: Gate,
        first: Vec<Effect>,
        candidate: &ImageRef,
    ) -> Result<ExitCode> {
        let mut effects: VecDeque<Effect> = first.into();
        let mut outcome: Option<Outcome> = None;
        while let Some(effect) = effects.pop_front() {
            let input = match effect {
                Effect::Say(m) => {
                    outln!("{m}");
                    None
                }
                Effect::Done(o) => {
                    outcome = Some(o);
                    None
                }
                Effect::CommitCandidate => Some(self.commit_candidate(candidate.as_str())?),
                Effect::JudgeCandidate { commit } => {
                    Some(Input::CandidateJudged(self.judge_candidate(&commit).await?))
                }
                Effect::RunCheck { index } => Some(Input::CheckFinished {
                    index,
                    outcome: self.run_check(index).await,
                }),
                Effect::CommitPromotion { subject, trailers } => {
                    Some(self.commit_promotion(candidate.as_str(), &subject, &trailers)?)
                }
                Effect::KeepCandidate { trailers } => Some(self.keep_candidate(&trailers)?),
                Effect::RemoveCandidate => Some(self.remove_candidate()?),
            };
            if let Some(input) = input {
                let aborting = matches!(input, Input::LiveManifestChanged { .. });
                let next = gate.step(input);
                if next.is_empty() && aborting && !gate.is_done() {
                    // A bypass whose live manifest changed: nothing was pushed.
                    outln!(
                        "aborted: the live manifest changed in git since the run started; nothing promoted, run again"
                    );
                    return Ok(ExitCode::from(1));
                }
                effects.extend(next);
            }
        }
        let outcome = outcome.ok_or_else(|| anyhow!("the gate ended without an outcome"))?;
        Ok(ExitCode::from(outcome.exit_code() as u8))
    }

    /// The image of the promoted container, as the live manifest writes it.
    fn live_image(&self) -> Result<String> {
        let w = &self.promotion.live.workload;
        let docs = greenlight_lint::edit::documents_as_json(&self.live_text).map_err(|e| {
            usage(format!(
                "live.manifest {}: {e}",
                self.promotion.live.manifest
            ))
        })?;
        let doc = docs
            .iter()
            .find(|d| {
                d["kind"].as_str() == Some(w.kind.as_str())
                    && d["metadata"]["name"].as_str() == Some(w.name.as_str())
            })
            .ok_or_else(|| {
                usage(format!(
                    "live.manifest {}: no {} named {:?}",
                    self.promotion.live.manifest,
                    w.kind.as_str(),
                    w.name
                ))
            })?;
        doc.pointer("/spec/template/spec/containers")
            .and_then(Value::as_array)
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c["name"].as_str() == Some(w.container.as_str()))
            })
            .and_then(|c| c["image"].as_str())
            .map(str::to_string)
            .ok_or_else(|| {
                usage(format!(
                    "live.manifest {}: {} {:?} has no container {:?} with an image",
                    self.promotion.live.manifest,
                    w.kind.as_str(),
                    w.name,
                    w.container
                ))
            })
    }

    fn guard(&self) -> Option<(String, Vec<String>)> {
        Some((
            self.base.clone(),
            vec![self.promotion.live.manifest.clone()],
        ))
    }

    fn push(
        &self,
        changes: Vec<FileChange>,
        message: String,
        guarded: bool,
    ) -> Result<ChangeOutcome> {
        Ok(self.repo.commit_and_push(&ChangeRequest {
            branch: self.branch.clone(),
            changes,
            message,
            author_name: self.author_name.clone(),
            author_email: self.author_email.clone(),
            max_attempts: 5,
            unchanged_since: if guarded { self.guard() } else { None },
        })?)
    }

    fn commit_candidate(&mut self, image: &str) -> Result<Input> {
        let p = &self.promotion;
        let docs = greenlight_lint::edit::documents_as_json(&self.live_text)
            .map_err(|e| anyhow!("live.manifest {}: {e}", p.live.manifest))?;
        let c = make_candidate(
            &docs,
            &CandidateSpec {
                kind: p.live.workload.kind.as_str().to_string(),
                name: p.live.workload.name.clone(),
                container: p.live.workload.container.clone(),
                image: image.to_string(),
                replicas: p.candidate.replicas,
                service: Some(p.candidate.service.clone()),
                namespace: Some(p.candidate.namespace.clone()),
                port: Some(p.candidate.port),
            },
        )
        .map_err(|e| usage(format!("live.manifest {}: {e}", p.live.manifest)))?;
        let path = format!("{}/{}.yaml", p.candidate.path.trim_end_matches('/'), c.name);
        let values = CandidateValues {
            service: c
                .service_name
                .clone()
                .unwrap_or_else(|| p.candidate.service.clone()),
            namespace: c.namespace.clone(),
            port: c.port.unwrap_or(p.candidate.port),
            image: image.to_string(),
        };
        let directive = Directive {
            app: p.candidate.app.clone(),
            deadline_ms: self.candidate_deadline.as_millis() as i64,
            mode: Mode::Shadow,
            expect: "Healthy".to_string(),
        };
        let message = format!(
            "candidate for {}: {image}\n\nThe promotion gate's candidate, judged on {} before any check runs.\n\n{}: {}\n{}: {image}\n",
            p.live.app,
            p.candidate.app,
            p.commit.watch.key,
            directive.render(),
            greenlight_core::gate::CANDIDATE_TRAILER,
        );
        let mut docs = vec![c.workload];
        docs.extend(c.service);
        let content = render_docs(&docs);
        self.made = Some((path.clone(), values, docs));
        let now = SystemClock.now();
        if let Some(held) = self.repo.read_file(&self.base, &self.lock_path)? {
            let held = String::from_utf8_lossy(&held).into_owned();
            let expires = lock_field(&held, "expires").and_then(Timestamp::parse_rfc3339);
            match expires {
                Some(at) if at <= now => outln!(
                    "the promotion lock {} expired at {}: taken over",
                    self.lock_path,
                    at.rfc3339()
                ),
                _ => return Err(lock_held_error(&self.lock_path, &held)),
            }
        }
        let lock = format!(
            "# greenlight promote: one run at a time for {workload}; removed when the run ends\nholder: {holder}\ncandidate: {image}\nstarted: {started}\nexpires: {expires}\n",
            workload = p.live.workload.name,
            holder = self.author_name,
            started = now.rfc3339(),
            expires = now.plus_ms(self.lock_ttl_ms).rfc3339(),
        );
        let mut guard = self.guard();
        if let Some((_, paths)) = &mut guard {
            paths.push(self.lock_path.clone());
        }
        let mut changes = vec![
            FileChange::Write {
                path: path.clone(),
                content: content.into_bytes(),
            },
            FileChange::Write {
                path: self.lock_path.clone(),
                content: lock.into_bytes(),
            },
        ];
        // Git keeps no empty directory: when the candidate and the lock leave, a directory
        // holding nothing else would vanish, and Argo CD would then report the candidates'
        // path missing and never prune the candidate. A file that is no manifest keeps it.
        let others = self
            .repo
            .list_files(&self.base, &p.candidate.path)?
            .into_iter()
            .filter(|f| *f != path && *f != self.lock_path)
            .count();
        if others == 0 {
            changes.push(FileChange::Write {
                path: format!("{}/{CANDIDATES_README}", p.candidate.path),
                content: CANDIDATES_README_TEXT.as_bytes().to_vec(),
            });
        }
        let outcome = self.repo.commit_and_push(&ChangeRequest {
            branch: self.branch.clone(),
            changes,
            message,
            author_name: self.author_name.clone(),
            author_email: self.author_email.clone(),
            max_attempts: 5,
            unchanged_since: guard,
        })?;
        if matches!(outcome, ChangeOutcome::Pushed { .. }) {
            self.lock_held = true;
        }
        Ok(match outcome {
            ChangeOutcome::Pushed { commit, .. } => Input::CandidateCommitted { commit },
            ChangeOutcome::Guarded { path, tip, .. } if path == self.lock_path => {
                let held = self
                    .repo
                    .read_file(&tip, &self.lock_path)?
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .unwrap_or_default();
                return Err(lock_held_error(&self.lock_path, &held));
            }
            ChangeOutcome::Guarded { tip, .. } => Input::LiveManifestChanged { commit: tip },
            ChangeOutcome::Unchanged { tip } => Input::CandidateCommitted { commit: tip },
        })
    }

    /// The watchdog's runtime, in-process on a scratch clone and state, watching from the
    /// candidate commit's parent until that commit's watch has a verdict.
    async fn judge_candidate(&self, commit: &str) -> Result<CandidateVerdict> {
        let dir =
            tempfile::tempdir_in(&self.scratch).context("cannot create a scratch directory")?;
        let mut cfg = self.judge.clone();
        cfg.state = dir.path().join("state.db");
        cfg.data_dir = dir.path().to_path_buf();
        cfg.since = Some(format!("{commit}^"));
        let out = Output::new(LogFormat::Text);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, String)>();
        let watched = commit.to_string();
        out.subscribe(move |e| {
            if e.commit.as_deref() != Some(watched.as_str()) {
                return;
            }
            let verdict = match e.state {
                Some(State::WaitingReach | State::Judging) | None => None,
                Some(s) => Some((s.as_str().to_string(), e.message.clone())),
            };
            let verdict = verdict.or_else(|| {
                (e.event == EventKind::DirectiveRejected)
                    .then(|| ("REJECTED".to_string(), e.message.clone()))
            });
            if let Some(v) = verdict {
                let _ = tx.send(v);
            }
        });
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let source = self
            .argocd
            .source(&cfg.repo, CANDIDATE_LISTING_LIMIT_BYTES)?;
        let daemon = runtime::start(cfg.clone(), source, out, clock).await?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(daemon.run(async move {
            let _ = stopped.await;
        }));
        // The judge decides by the deadline; the margin covers a late reach and a stale source.
        let limit = self.candidate_deadline
            + Duration::from_millis((cfg.unknown_app_grace_ms + 2 * cfg.stale_after_ms) as u64)
            + Duration::from_secs(60);
        let verdict = tokio::select! {
            v = rx.recv() => v,
            _ = tokio::time::sleep(limit) => None,
        };
        let _ = stop.send(());
        let ran = task.await;
        let (state, reason) = match (verdict, ran) {
            (Some(v), _) => v,
            (None, Ok(Err(e))) => return Err(e.context("judging the candidate")),
            (None, _) => (
                "NO VERDICT".to_string(),
                format!(
                    "the judge gave no verdict on {} within {}",
                    short(commit),
                    humantime::format_duration(limit)
                ),
            ),
        };
        Ok(if state == State::Confirmed.as_str() {
            CandidateVerdict::Ready
        } else {
            CandidateVerdict::NotReady {
                state,
                reason,
                pending: self.pending_pods().await,
            }
        })
    }

    /// The scheduler's messages (distinct) for the candidate's Pods stuck Pending: the candidate
    /// Application's resource tree names the Pending Pods, and each live Pod's `PodScheduled=False`
    /// condition says why. A read that fails is a warning; what was found so far is kept.
    async fn pending_pods(&self) -> Vec<String> {
        let mut found = Vec::new();
        let Some((_, values, docs)) = &self.made else {
            return found;
        };
        let Some(workload) = docs[0]["metadata"]["name"].as_str() else {
            return found;
        };
        let kind = self.promotion.live.workload.kind.as_str();
        let app = &self.promotion.candidate.app;
        let app_ns = app.namespace.as_deref().unwrap_or("");
        let warn = |what: &str, e: &dyn std::fmt::Display| {
            // A warning that cannot be written is no reason to hide the verdict.
            let _ = crate::cmd::err(&format!(
                "warning: cannot read {what} of the candidate Application {}: {e}; the candidate's Pending Pods are not all named\n",
                app.name
            ));
        };
        let argo = match greenlight_argocd::ArgoClient::with_options(
            &self.argocd.url,
            self.argocd.token.clone(),
            self.argocd.client_options(),
        ) {
            Ok(c) => c,
            Err(e) => {
                warn("the resource tree", &e);
                return found;
            }
        };
        let tree = match argo.resource_tree(app_ns, &app.name).await {
            Ok(Some(t)) => t,
            Ok(None) => {
                warn("the resource tree", &"Argo CD says 404");
                return found;
            }
            Err(e) => {
                warn("the resource tree", &e);
                return found;
            }
        };
        for pod in pending_candidate_pods(&tree, kind, workload, &values.namespace) {
            let what = format!("the Pod {}/{}", pod.namespace, pod.name);
            let reference = greenlight_argocd::model::ResourceRef {
                group: pod.group.clone(),
                kind: pod.kind.clone(),
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
            };
            match argo
                .resource(app_ns, &app.name, &reference, &pod.version)
                .await
            {
                Ok(Some(live)) => {
                    if let Some(m) = unschedulable_message(&live)
                        && !found.contains(&m)
                    {
                        found.push(m);
                    }
                }
                Ok(None) => warn(&what, &"Argo CD says 404"),
                Err(e) => {
                    warn(&what, &e);
                    return found;
                }
            }
        }
        found
    }

    async fn run_check(&self, index: usize) -> CheckOutcome {
        let Some((_, values, _)) = &self.made else {
            return CheckOutcome::Undecided {
                evidence: "no candidate to check".into(),
            };
        };
        let check = &self.promotion.checks[index];
        match &check.kind {
            CheckKind::Http(h) => {
                greenlight::checks::http_check(
                    &self.http,
                    &h.url.render(values),
                    h.status,
                    h.body_contains.as_deref(),
                    Duration::from_millis(h.timeout_ms as u64),
                )
                .await
            }
            CheckKind::Command(c) => {
                let argv: Vec<String> = c.argv.iter().map(|t| t.render(values)).collect();
                greenlight::checks::command_check_in(
                    &argv,
                    Some(&self.config_dir),
                    Duration::from_millis(c.timeout_ms as u64),
                )
                .await
            }
            CheckKind::Analysis(a) => {
                greenlight::checks::analysis_check(a, values, &SystemClock).await
            }
        }
    }

    fn commit_promotion(
        &self,
        image: &str,
        subject: &str,
        trailers: &[(String, String)],
    ) -> Result<Input> {
        let w = &self.promotion.live.workload;
        let edited = greenlight_lint::edit::set_container_image(
            &self.live_text,
            w.kind.as_str(),
            &w.name,
            &w.container,
            image,
        )
        .map_err(|e| anyhow!("live.manifest {}: {e}", self.promotion.live.manifest))?;
        let mut changes = vec![FileChange::Write {
            path: self.promotion.live.manifest.clone(),
            content: edited.into_bytes(),
        }];
        if let Some((path, ..)) = &self.made {
            changes.push(FileChange::Remove { path: path.clone() });
        }
        if self.lock_held {
            changes.push(FileChange::Remove {
                path: self.lock_path.clone(),
            });
        }
        // A watchdog revert of this commit (the promoted image failing live) undoes the live
        // manifest only: it must not bring back the candidate and the lock removed here.
        let mut trailers = trailers.to_vec();
        if self.made.is_some() || self.lock_held {
            let at = trailers
                .iter()
                .position(|(k, _)| k == &self.promotion.commit.watch.key)
                .unwrap_or(trailers.len());
            trailers.insert(
                at,
                (
                    REVERT_KEEPS_TRAILER.to_string(),
                    self.promotion
                        .candidate
                        .path
                        .trim_end_matches('/')
                        .to_string(),
                ),
            );
        }
        let outcome = self.push(changes, message(subject, "", &trailers), true)?;
        Ok(match outcome {
            ChangeOutcome::Pushed { commit, .. } => Input::PromotionCommitted { commit },
            ChangeOutcome::Guarded { tip, .. } => Input::LiveManifestChanged { commit: tip },
            ChangeOutcome::Unchanged { tip } => Input::PromotionCommitted { commit: tip },
        })
    }

    /// The failed candidate stays deployed; its workload is annotated with when it may be
    /// removed, and the commit carries why.
    fn keep_candidate(&self, trailers: &[(String, String)]) -> Result<Input> {
        let Some((path, _, docs)) = &self.made else {
            return Err(anyhow!("no candidate to keep"));
        };
        let now = SystemClock.now();
        let until = now.plus_ms(self.promotion.retention.failed_ms);
        let mut docs = docs.clone();
        docs[0]["metadata"]["annotations"][KEPT_UNTIL] = json!(until.rfc3339());
        let subject = format!(
            "keep the blocked candidate of {} until {}",
            self.promotion.live.app,
            until.rfc3339()
        );
        let outcome = self.push(
            vec![
                FileChange::Write {
                    path: path.clone(),
                    content: render_docs(&docs).into_bytes(),
                },
                FileChange::Remove {
                    path: self.lock_path.clone(),
                },
            ],
            message(&subject, "", trailers),
            false,
        )?;
        Ok(Input::CandidateSettled {
            commit: match outcome {
                ChangeOutcome::Pushed { commit, .. } => commit,
                ChangeOutcome::Unchanged { tip } | ChangeOutcome::Guarded { tip, .. } => tip,
            },
        })
    }

    fn remove_candidate(&self) -> Result<Input> {
        let Some((path, ..)) = &self.made else {
            return Err(anyhow!("no candidate to remove"));
        };
        let subject = format!(
            "remove the self-test candidate of {}",
            self.promotion.live.app
        );
        let outcome = self.push(
            vec![
                FileChange::Remove { path: path.clone() },
                FileChange::Remove {
                    path: self.lock_path.clone(),
                },
            ],
            message(&subject, "", &[]),
            false,
        )?;
        Ok(Input::CandidateSettled {
            commit: match outcome {
                ChangeOutcome::Pushed { commit, .. } => commit,
                ChangeOutcome::Unchanged { tip } | ChangeOutcome::Guarded { tip, .. } => tip,
            },
        })
    }
}

impl RunCtx {
    /// After an error: remove the lock (the candidate stays, as a blocked one would).
    fn release_lock_after_error(&self) -> Result<()> {
        let subject = format!(
            "release the promotion lock of {} after an error",
            self.promotion.live.app
        );
        self.push(
            vec![FileChange::Remove {
                path: self.lock_path.clone(),
            }],
            message(&subject, "", &[]),
            false,
        )?;
        Ok(())
    }
}

/// The tree's Pods that Argo CD reports Pending (`info` `Status Reason: Pending`) and that are
/// the candidate's: in its namespace, named after its workload, and (when the tree says their
/// owners) owned through their parents by the candidate's Deployment or StatefulSet.
fn pending_candidate_pods<'t>(
    tree: &'t greenlight_argocd::ResourceTree,
    kind: &str,
    workload: &str,
    namespace: &str,
) -> Vec<&'t greenlight_argocd::model::ResourceNode> {
    let owned = |node: &greenlight_argocd::model::ResourceNode| {
        let mut refs: Vec<&greenlight_argocd::model::ResourceRef> =
            node.parent_refs.iter().collect();
        if refs.is_empty() {
            return true;
        }
        for _ in 0..4 {
            if refs.iter().any(|r| r.kind == kind && r.name == workload) {
                return true;
            }
            refs = refs
                .iter()
                .flat_map(|r| {
                    tree.nodes
                        .iter()
                        .filter(|n| {
                            n.kind == r.kind && n.name == r.name && n.namespace == r.namespace
                        })
                        .flat_map(|n| n.parent_refs.iter())
                })
                .collect();
        }
        false
    };
    let prefix = format!("{workload}-");
    tree.nodes
        .iter()
        .filter(|n| n.kind == "Pod" && n.group.is_empty())
        .filter(|n| n.namespace == namespace && n.name.starts_with(&prefix))
        .filter(|n| n.info_value("Status Reason") == Some("Pending"))
        .filter(|n| owned(n))
        .collect()
}

/// The scheduler's message of a live Pod it could not place: its `PodScheduled=False`
/// condition's message.
fn unschedulable_message(pod: &Value) -> Option<String> {
    pod.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")
        .and_then(|c| c["message"].as_str())
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_string)
}

/// A `key: value` line of a lock file.
pub(crate) fn lock_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
}

fn lock_held_error(path: &str, held: &str) -> anyhow::Error {
    let field = |k| lock_field(held, k).unwrap_or("?");
    anyhow!(
        "another promotion run holds the lock {path} (held by {}, candidate {}, since {}; it expires at {}): nothing was committed; wait for it, or remove the file from git if that run is gone",
        field("holder"),
        field("candidate"),
        field("started"),
        field("expires")
    )
}

/// The self-test's candidate: the live image's name with a tag saying what it is and a digest
/// no registry serves (all zeros), so that its pods never start.
fn self_test_candidate(live_image: &str) -> Result<ImageRef> {
    let live = ImageRef::parse(live_image)
        .map_err(|e| usage(format!("the live image {live_image:?} does not parse: {e}")))?;
    let made = format!(
        "{}:{SELF_TEST_TAG}@sha256:{}",
        live.written_name(),
        "0".repeat(64)
    );
    ImageRef::parse(&made).map_err(|e| anyhow!("the self-test image {made:?}: {e}"))
}

/// The tag of the self-test's candidate image.
pub const SELF_TEST_TAG: &str = "greenlight-self-test-does-not-exist";

/// The annotation of a kept candidate: when it may be removed (RFC 3339).
pub const KEPT_UNTIL: &str = "greenlight.dev/kept-until";

fn render_docs(docs: &[Value]) -> String {
    docs.iter()
        .map(greenlight_lint::edit::to_yaml)
        .collect::<Vec<_>>()
        .join("---\n")
}

fn message(subject: &str, body: &str, trailers: &[(String, String)]) -> String {
    let mut m = format!("{subject}\n\n");
    if !body.is_empty() {
        m.push_str(body);
        m.push_str("\n\n");
    }
    for (k, v) in trailers {
        m.push_str(&format!("{k}: {v}\n"));
    }
    m
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, owner: (&str, &str), reason: &str) -> Value {
        json!({"kind": "Pod", "version": "v1", "namespace": "apps", "name": name,
            "health": {"status": "Progressing"},
            "parentRefs": [{"group": "apps", "kind": owner.0, "namespace": "apps", "name": owner.1}],
            "info": [{"name": "Status Reason", "value": reason}, {"name": "Node"}]})
    }

    #[test]
    fn the_candidates_pending_pods_are_those_its_workload_owns() {
        let tree: greenlight_argocd::ResourceTree = greenlight_argocd::model::decode(json!({
            "nodes": [
                {"group": "apps", "kind": "Deployment", "namespace": "apps", "name": "web-candidate"},
                {"group": "apps", "kind": "ReplicaSet", "namespace": "apps", "name": "web-candidate-5d9",
                 "parentRefs": [{"group": "apps", "kind": "Deployment", "namespace": "apps", "name": "web-candidate"}]},
                pod("web-candidate-5d9-a", ("ReplicaSet", "web-candidate-5d9"), "Pending"),
                pod("web-candidate-5d9-b", ("ReplicaSet", "web-candidate-5d9"), "Running"),
                // Another workload whose name starts with the candidate's.
                {"group": "apps", "kind": "ReplicaSet", "namespace": "apps", "name": "web-candidate-x-7f",
                 "parentRefs": [{"group": "apps", "kind": "Deployment", "namespace": "apps", "name": "web-candidate-x"}]},
                pod("web-candidate-x-7f-c", ("ReplicaSet", "web-candidate-x-7f"), "Pending"),
                {"kind": "Pod", "namespace": "apps", "name": "other-1",
                 "info": [{"name": "Status Reason", "value": "Pending"}]},
            ]
        }))
        .unwrap();
        let names: Vec<&str> = pending_candidate_pods(&tree, "Deployment", "web-candidate", "apps")
            .iter()
            .map(|n| n.name.as_str())
            .collect();
        assert_eq!(names, ["web-candidate-5d9-a"]);
    }

    #[test]
    fn the_schedulers_message_is_the_pod_scheduled_false_condition() {
        let pending = json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}]}});
        assert_eq!(
            unschedulable_message(&pending).as_deref(),
            Some("0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
        );
        let scheduled = json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "True"}]}});
        assert_eq!(unschedulable_message(&scheduled), None);
        assert_eq!(unschedulable_message(&json!({})), None);
    }
}
