//! `greenlight promote run` and `promote self-test` (`docs/promote.md#gate`): the flags, read
//! and checked, then one run of the library's driver (`greenlight::promote::run`), whose story
//! is printed as it goes.
//!
//! Must never: put a token in a message, a log line or a process argument (tokens are read from
//! files); run a check kind that is not built (refused here, before anything is written).

use crate::cmd::args::{ArgoCdArgs, GitArgs, JudgeArgs, help_of};
use crate::cmd::{positive_duration_flag, usage};
use anyhow::Result;
use clap::Args;
use greenlight::promote::land::DirectPush;
use greenlight::promote::run::{self as driver, Asked, Report, RunConfig, Timing};
use greenlight::promote::{self as config, LoadError};
use greenlight_core::repo_url::RepoUrl;
use greenlight_gate::config::CheckKind;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

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
    /// Propose a digest the watchdog reverted (refused without it), saying why (recorded in
    /// the promotion commit).
    #[arg(long = "allow-reverted", value_name = "REASON")]
    pub allow_reverted: Option<String>,
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
    /// Where the run keeps its clone (default: a scratch directory, removed afterwards), and,
    /// with --notify, its notifications' outbox (`events.db`).
    #[arg(long = "data-dir")]
    pub data_dir: Option<PathBuf>,
    /// With `promotion: {via: pull-request}`: the forge's token (a file; never an argument).
    #[arg(long = "forge-token-file", value_name = "FILE")]
    pub forge_token_file: Option<PathBuf>,
    /// With `promotion: {via: pull-request}`: follow the pull request this long, to merged
    /// (the outcome is then `promoted`) or closed (`blocked`, the candidate kept); without it
    /// the run ends `proposed` once the request is open.
    #[arg(long = "wait-merge", value_name = "DURATION")]
    pub wait_merge: Option<String>,
    /// After a promotion lands: wait up to this long for its commit to be live on the live
    /// app (reached, healthy and stable, by the watchdog's own judge, as `greenlight wait`),
    /// then verify that every Pod runs the promoted digest (as `greenlight verify`); the
    /// outcome says `verified` (docs/promote.md#verified).
    #[arg(long = "wait-live", value_name = "DURATION")]
    pub wait_live: Option<String>,
    /// A TOML file whose `[[notify]]` tables say where the run's outcome is sent
    /// (docs/notifications.md; a `watch --config` file serves: its other keys are not read).
    #[arg(long, value_name = "FILE")]
    pub notify: Option<PathBuf>,
    /// `text`: the run's story as it goes; `json`: one JSON object on stdout at the end
    /// (docs/promote.md#json), warnings and errors still on stderr.
    #[arg(long, value_enum, default_value = "text")]
    pub output: RunOutput,
    /// How long the candidate has to reach its Application and become healthy.
    #[arg(long = "candidate-deadline", default_value = "10m")]
    pub candidate_deadline: String,
    #[command(flatten)]
    pub judge: JudgeArgs,
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
    if a.allow_reverted
        .as_deref()
        .is_some_and(|r| r.trim().is_empty())
    {
        return Err(usage(
            "--allow-reverted: say why a digest the watchdog reverted is proposed again",
        ));
    }
    let asked = Asked::Promote {
        candidate: a.candidate,
        resolve: a.resolve,
        plain_http: a.plain_http,
        bypass,
        allow_reverted: a.allow_reverted,
    };
    gate(a.common, asked)
}

/// `promote self-test`: a candidate that cannot become healthy (its image does not exist), run
/// through the same gate; it passes only when the gate blocks it, and it never promotes.
pub fn self_test(a: SelfTestArgs) -> Result<ExitCode> {
    gate(a.common, Asked::SelfTest)
}

/// `--output`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunOutput {
    Text,
    Json,
}

fn gate(a: CommonArgs, asked: Asked) -> Result<ExitCode> {
    let json = a.output == RunOutput::Json;
    let ran = gate_as(a, asked, json);
    if json {
        // A pipeline reads the outcome from stdout whatever happened: an error too.
        match &ran {
            Ok(Some(_)) => {}
            Ok(None) => outln!(
                "{}",
                json!({"outcome": "refused", "exit_code": 2, "reason": "the config has problems (see stderr); nothing was run"})
            ),
            Err(e) => outln!(
                "{}",
                json!({"outcome": "error", "exit_code": crate::cmd::exit_code_of(e), "reason": format!("{e:#}")})
            ),
        }
    }
    Ok(ExitCode::from(ran?.unwrap_or(2)))
}

/// The run; `None` when the config has problems (reported on stderr, nothing run).
fn gate_as(a: CommonArgs, asked: Asked, json: bool) -> Result<Option<u8>> {
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
            return Ok(None);
        }
    };
    let bypass = matches!(
        &asked,
        Asked::Promote {
            bypass: Some(_),
            ..
        }
    );
    if !bypass {
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
    let sinks = match &a.notify {
        Some(path) => {
            let text =
                greenlight::files::read_text(path, greenlight::files::YAML_LIMIT, "--notify")
                    .map_err(|e| usage(e.to_string()))?;
            greenlight::notify::config::parse(path, &text).map_err(|e| usage(e.to_string()))?
        }
        None => Vec::new(),
    };
    let bypass_reason = match &asked {
        Asked::Promote { bypass, .. } => bypass.clone(),
        Asked::SelfTest => None,
    };
    let live_app = promotion.live.app.to_string();
    let wait_live = match &a.wait_live {
        Some(d) => Some(positive_duration_flag("--wait-live", d)?),
        None => None,
    };
    let wait_merge = match &a.wait_merge {
        Some(d) => Some(positive_duration_flag("--wait-merge", d)?),
        None => None,
    };
    let pull_request = match &promotion.commit.landing {
        greenlight_gate::config::Landing::PullRequest(pr)
            if matches!(asked, Asked::Promote { .. }) =>
        {
            Some(pull_request_land(
                pr,
                &a.repo,
                &promotion.live.workload.name,
                a.forge_token_file.as_deref(),
            )?)
        }
        _ => {
            if wait_merge.is_some() {
                return Err(usage(
                    "--wait-merge: follows the promotion's pull request; the config lands by push (`promotion.via`)",
                ));
            }
            if a.forge_token_file.is_some() {
                return Err(usage(
                    "--forge-token-file: for `promotion: {via: pull-request}`; the config lands by push",
                ));
            }
            None
        }
    };
    let check_names: Vec<String> = promotion.checks.iter().map(|c| c.name.clone()).collect();
    let outbox_dir = a.data_dir.clone();
    let git = a.git.read()?;
    let argocd = a.argocd.read()?;
    let live_ctx = LiveCtx {
        repo: a.repo.clone(),
        branch: a.branch.clone(),
        git_token: git.token.clone(),
        argocd: argocd.clone(),
        app: promotion.live.app.clone(),
    };
    if let Some(warning) =
        crate::cmd::args::url_credentials_warning("--repo", &RepoUrl::new(a.repo.clone()))
    {
        errln!("warning: {warning}");
    }
    let candidate_deadline = positive_duration_flag("--candidate-deadline", &a.candidate_deadline)?;
    let timing = a.judge.read()?;
    crate::install_crypto();
    let config = RunConfig {
        promotion,
        config_path: a.config,
        repo: a.repo,
        branch: a.branch,
        git_token: git.token,
        author_name: git.author_name,
        author_email: git.author_email,
        argocd,
        candidate_deadline,
        timing: Timing {
            stable_for_ms: timing.stable_for_ms,
            stale_after_ms: timing.stale_after_ms,
            unknown_app_grace_ms: timing.unknown_app_grace_ms,
            fetch_interval: timing.fetch_interval,
        },
        data_dir: a.data_dir,
        wait_merge,
    };
    let land: &dyn greenlight::promote::land::Land = match &pull_request {
        Some(pr) => pr,
        None => &DirectPush,
    };
    let told = |ended: &driver::Ended, live: Option<&Live>| {
        let now = greenlight::clock::Clock::now(&greenlight::clock::SystemClock);
        if let Some(mut event) = ended.event(&live_app, &check_names, bypass_reason.as_deref(), now)
        {
            if let Some(l) = live {
                event.message = format!("{}; {}", event.message, l.said);
            }
            notify_outcome(&sinks, outbox_dir.as_deref(), &event);
        }
    };
    let judge_timing = (
        timing.stable_for_ms,
        timing.stale_after_ms,
        timing.unknown_app_grace_ms,
        timing.fetch_interval,
    );
    let check_live = |ended: &driver::Ended, report: &mut dyn Report| -> Result<Option<Live>> {
        let (Some(limit), Some(commit)) = (wait_live, landed_commit(ended)) else {
            return Ok(None);
        };
        live_check(&live_ctx, commit, limit, judge_timing, report).map(Some)
    };
    if !json {
        let ended = driver::run(config, asked, land, &mut Printed)?;
        let live = check_live(&ended, &mut Printed)?;
        told(&ended, live.as_ref());
        return Ok(Some(exit_with(&ended, live.as_ref())));
    }
    let mut collected = Collected::default();
    let ended = driver::run(config, asked, land, &mut collected)?;
    let live = check_live(&ended, &mut collected)?;
    let r = &ended.record;
    outln!(
        "{}",
        json!({
            "outcome": ended.outcome_word(),
            "exit_code": exit_with(&ended, live.as_ref()),
            "reason": ended.reason(),
            "candidate": r.candidate,
            "candidate_commit": r.candidate_commit,
            "candidate_verdict": r.candidate_verdict,
            "candidate_healthy_after_ms": r.candidate_healthy_after_ms,
            "checks": r.checks,
            "promotion_commit": r.promotion_commit,
            "pull_request": r.pull_request,
            "settle_commit": r.settle_commit,
            "live": live.as_ref().map(|l| &l.waited),
            "verified": live.as_ref().map(|l| l.verified),
            "verification": live.as_ref().map(|l| &l.containers),
            "messages": collected.lines,
        })
    );
    told(&ended, live.as_ref());
    Ok(Some(exit_with(&ended, live.as_ref())))
}

/// What `--wait-live` found of a landed promotion.
struct Live {
    waited: greenlight::wait::Waited,
    /// Every container of the live app runs the digest its target state pins.
    verified: bool,
    containers: Vec<String>,
    /// In one phrase, for the notification.
    said: String,
}

/// What `--wait-live` needs besides the run's config.
struct LiveCtx {
    repo: String,
    branch: Option<String>,
    git_token: Option<greenlight_git::Secret>,
    argocd: greenlight::argocd::ArgoCd,
    app: greenlight_core::directive::AppRef,
}

/// The commit a landed promotion put on the branch (a bypass's too); none for the rest.
fn landed_commit(ended: &driver::Ended) -> Option<&str> {
    use greenlight_gate::machine::Outcome;
    match &ended.outcome {
        Some(Outcome::Promoted { commit } | Outcome::Bypassed { commit }) => Some(commit),
        _ => None,
    }
}

/// The run's exit code, and with `--wait-live` the live check's: a promotion that did not
/// become live (1; 3 when Argo CD could not be observed) or that the Pods do not run (1) is not
/// a success, though it landed.
fn exit_with(ended: &driver::Ended, live: Option<&Live>) -> u8 {
    match live {
        Some(l) if ended.exit_code == 0 && l.waited.exit_code != 0 => l.waited.exit_code,
        Some(l) if ended.exit_code == 0 && !l.verified => 1,
        _ => ended.exit_code,
    }
}

/// `--wait-live`: the promotion commit followed as `greenlight wait` follows one (the
/// watchdog's judge, a scratch state), then the live app's Pods against its pinned digests as
/// `greenlight verify` reads them.
fn live_check(
    ctx: &LiveCtx,
    commit: &str,
    limit: std::time::Duration,
    (stable_for_ms, stale_after_ms, unknown_app_grace_ms, fetch_interval): (
        i64,
        i64,
        i64,
        std::time::Duration,
    ),
    report: &mut dyn Report,
) -> Result<Live> {
    struct Said;
    impl greenlight::wait::Progress for Said {
        fn line(&self, line: &str) {
            let _ = crate::cmd::err(&format!("live: {line}\n"));
        }
    }
    report.line(&format!(
        "waiting up to {} for {} to be live on {} (reached, healthy, stable), then verifying its Pods",
        humantime::format_duration(limit),
        &commit[..commit.len().min(12)],
        ctx.app
    ))?;
    let waited = greenlight::wait::wait(
        greenlight::wait::WaitConfig {
            repo: RepoUrl::new(ctx.repo.clone()),
            branch: ctx.branch.clone(),
            git_token: ctx.git_token.clone(),
            source: greenlight::wait::WaitSource::ArgoCd(ctx.argocd.clone()),
            app: ctx.app.clone(),
            commit: Some(commit.to_string()),
            timeout: limit,
            stable_for_ms,
            stale_after_ms,
            unknown_app_grace_ms,
            fetch_interval,
            data_dir: None,
            // Verified below against the digest this run promoted, not Argo CD's target state.
            expect_running: false,
        },
        std::sync::Arc::new(Said),
    )?;
    if waited.exit_code != 0 {
        let said = format!("NOT live: {} ({})", waited.reason, waited.outcome);
        report.line(&format!("the promotion is {said}"))?;
        return Ok(Live {
            waited,
            verified: false,
            containers: Vec::new(),
            said,
        });
    }
    report.line(&format!("the promotion is live: {}", waited.reason))?;
    let verified = tokio::runtime::Runtime::new()?.block_on(greenlight::verify::verify(
        &greenlight::verify::VerifyConfig {
            source: greenlight::verify::VerifySource::ArgoCd(ctx.argocd.clone()),
            app: ctx.app.clone(),
            manifest: None,
        },
    ))?;
    let containers: Vec<String> = verified.containers.iter().map(|c| c.summary()).collect();
    for c in &containers {
        report.line(c)?;
    }
    let ok = verified.exit_code == 0 && !containers.is_empty();
    let said = if ok {
        "live and verified: every Pod runs the promoted digest".to_string()
    } else if containers.is_empty() {
        "live, NOT verified: no container of the app to verify".to_string()
    } else {
        "live, NOT verified: not every Pod runs the promoted digest".to_string()
    };
    report.line(&said)?;
    Ok(Live {
        waited,
        verified: ok,
        containers,
        said,
    })
}

/// The pull request way of landing for `promotion: {via: pull-request}`: the forge's client
/// (its API and project from the config, else from the repository's URL) and a branch name of
/// the run's own.
fn pull_request_land(
    pr: &greenlight_gate::config::PullRequestLanding,
    repo: &str,
    workload: &str,
    token_file: Option<&std::path::Path>,
) -> Result<greenlight::promote::land::PullRequest> {
    let kind: greenlight_forge::ForgeKind = pr.forge.parse().map_err(usage)?;
    let Some(token_file) = token_file else {
        return Err(usage(format!(
            "--forge-token-file is required: the config proposes the promotion by pull request on {kind}"
        )));
    };
    let client = forge_client(
        kind,
        repo,
        (pr.api_url.clone(), "promotion.forgeUrl"),
        (pr.project.clone(), "promotion.project"),
        token_file,
        "promotion",
    )?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    Ok(greenlight::promote::land::PullRequest {
        client,
        auto_merge: pr.auto_merge,
        head: format!("greenlight/promote/{workload}-{stamp}"),
    })
}

/// The client of `kind` for `repo`: its API and `owner/name` as given (each with the key that
/// names it in errors), else as `forge_defaults` tells them from `repo`; the token from
/// `token_file`. `what` prefixes the client's own refusal. Errors are usage errors.
pub(crate) fn forge_client(
    kind: greenlight_forge::ForgeKind,
    repo: &str,
    (api, api_key): (Option<String>, &str),
    (project, project_key): (Option<String>, &str),
    token_file: &std::path::Path,
    what: &str,
) -> Result<greenlight_forge::ForgeClient> {
    let token = crate::cmd::secret_file("--forge-token-file", token_file)?;
    crate::install_crypto();
    let (default_api, default_project) = forge_defaults(kind, repo);
    let Some(api) = api.or(default_api) else {
        return Err(usage(format!(
            "{api_key} is required: {kind}'s API cannot be told from --repo {}",
            greenlight_core::repo_url::redact(repo)
        )));
    };
    let Some(project) = project.or(default_project) else {
        return Err(usage(format!(
            "{project_key} is required: the forge's owner/name cannot be told from --repo {}",
            greenlight_core::repo_url::redact(repo)
        )));
    };
    greenlight_forge::ForgeClient::new(
        kind,
        &api,
        &project,
        token,
        greenlight_forge::ClientOptions::default(),
    )
    .map_err(|e| usage(format!("{what}: {e}")))
}

/// The forge's API and the repository's `owner/name` as told by the repository's URL
/// (`https://host/owner/name(.git)`, `ssh://git@host/…`, `git@host:owner/name(.git)`): GitHub's
/// API is `https://api.github.com` for github.com and `https://<host>/api/v3` for GitHub
/// Enterprise; GitLab's `https://<host>/api/v4`, Gitea's `https://<host>/api/v1`. `None` where
/// the URL does not tell (a local path).
pub(crate) fn forge_defaults(
    kind: greenlight_forge::ForgeKind,
    repo: &str,
) -> (Option<String>, Option<String>) {
    use greenlight_forge::ForgeKind;
    let url = repo.trim().trim_end_matches('/').trim_end_matches(".git");
    let (host, path) = match url.split_once("://") {
        Some((_, rest)) => {
            let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
            match rest.split_once('/') {
                Some((h, p)) => (Some(h), Some(p)),
                None => (Some(rest), None),
            }
        }
        None => match url.split_once(':') {
            Some((h, p)) if h.contains('@') && !p.starts_with('/') => {
                (h.rsplit_once('@').map(|(_, h)| h), Some(p))
            }
            _ => (None, None),
        },
    };
    // A host with a port (`host:8443`) keeps it for https; an ssh URL's port does not serve
    // the API, so it is dropped.
    let host = host.map(|h| {
        if repo.starts_with("ssh://") {
            h.split(':').next().unwrap_or(h)
        } else {
            h
        }
    });
    let api = host.map(|h| match kind {
        ForgeKind::GitHub if h == "github.com" => "https://api.github.com".to_string(),
        ForgeKind::GitHub => format!("https://{h}/api/v3"),
        ForgeKind::GitLab => format!("https://{h}/api/v4"),
        ForgeKind::Gitea => format!("https://{h}/api/v1"),
    });
    let project = path
        .filter(|p| p.contains('/') && !p.split('/').any(str::is_empty))
        .map(str::to_string);
    (api, project)
}

#[cfg(test)]
mod tests {
    use super::forge_defaults;
    use greenlight_forge::ForgeKind::{GitHub, GitLab, Gitea};

    #[test]
    fn the_forges_api_and_project_come_from_the_repository_url() {
        let d = |k, r: &str| forge_defaults(k, r);
        let some = |a: &str, p: &str| (Some(a.to_string()), Some(p.to_string()));
        assert_eq!(
            d(GitHub, "https://github.com/acme/deploy.git"),
            some("https://api.github.com", "acme/deploy")
        );
        assert_eq!(
            d(GitHub, "git@github.com:acme/deploy.git"),
            some("https://api.github.com", "acme/deploy")
        );
        assert_eq!(
            d(GitHub, "https://ghe.example.com/acme/deploy"),
            some("https://ghe.example.com/api/v3", "acme/deploy")
        );
        assert_eq!(
            d(
                GitLab,
                "ssh://git@gitlab.example.com:2222/group/sub/deploy.git"
            ),
            some("https://gitlab.example.com/api/v4", "group/sub/deploy")
        );
        assert_eq!(
            d(
                Gitea,
                "https://user:t0ken@git.example.com:8443/acme/deploy.git"
            ),
            some("https://git.example.com:8443/api/v1", "acme/deploy")
        );
        assert_eq!(d(GitHub, "/tmp/origin.git"), (None, None));
        assert_eq!(
            d(GitHub, "https://github.com/deploy"),
            (Some("https://api.github.com".into()), None)
        );
    }
}

/// How long a run waits for its notifications, after its outcome is printed.
const NOTIFY_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// The run's outcome to the sinks, after it is printed and decided: written to the outbox
/// (`<--data-dir>/events.db`, or a scratch one), then delivered for at most [`NOTIFY_WAIT`].
/// Nothing here changes the exit code: a sink that fails is a warning, and with --data-dir
/// what is undelivered stays for the next run.
fn notify_outcome(
    sinks: &[greenlight::notify::config::SinkConfig],
    data_dir: Option<&std::path::Path>,
    event: &greenlight_core::event::Event,
) {
    if sinks.is_empty() {
        return;
    }
    let scratch = match data_dir {
        Some(_) => None,
        None => match tempfile::tempdir() {
            Ok(d) => Some(d),
            Err(e) => {
                warn(&format!(
                    "notifications not sent: no scratch directory for the outbox: {e}"
                ));
                return;
            }
        },
    };
    let dir = data_dir.unwrap_or_else(|| scratch.as_ref().expect("made above").path());
    let outbox = greenlight::notify::outbox_in(dir);
    let written = (|| -> anyhow::Result<()> {
        let mut store = greenlight::store::SqliteStore::open_or_create(&outbox)?;
        greenlight::notify::register(&outbox, sinks)?;
        store.write(greenlight::store::Write {
            events: std::slice::from_ref(event),
            ..Default::default()
        })
    })();
    if let Err(e) = written {
        warn(&format!("notifications not sent: {e:#}"));
        return;
    }
    let say: greenlight::notify::Say = std::sync::Arc::new(|m: &str| warn(m));
    match greenlight::notify::drain(
        &outbox,
        sinks,
        std::time::Instant::now() + NOTIFY_WAIT,
        &say,
    ) {
        Ok(left) => {
            for (sink, n) in left {
                match data_dir {
                    Some(_) => warn(&format!(
                        "notify {sink:?}: {n} notification(s) not delivered yet; kept in {} for the next run",
                        outbox.display()
                    )),
                    None => warn(&format!(
                        "notify {sink:?}: {n} notification(s) not delivered in {}s (without --data-dir nothing keeps them)",
                        NOTIFY_WAIT.as_secs()
                    )),
                }
            }
        }
        Err(e) => warn(&format!("notifications: {e:#}")),
    }
}

/// `--output json`: the story kept for the one object printed at the end; warnings and errors
/// on standard error as they come.
#[derive(Default)]
struct Collected {
    lines: Vec<String>,
}

impl Report for Collected {
    fn line(&mut self, text: &str) -> Result<()> {
        self.lines.push(text.to_string());
        Ok(())
    }

    fn warning(&mut self, text: &str) -> Result<()> {
        crate::cmd::err(&format!("warning: {text}\n"))
    }

    fn error(&mut self, text: &str) -> Result<()> {
        crate::cmd::err(&format!("error: {text}\n"))
    }
}

/// The run's story on standard output, its warnings and errors on standard error.
pub(crate) struct Printed;

impl Report for Printed {
    fn line(&mut self, text: &str) -> Result<()> {
        crate::cmd::out(&format!("{text}\n"))
    }

    fn warning(&mut self, text: &str) -> Result<()> {
        crate::cmd::err(&format!("warning: {text}\n"))
    }

    fn error(&mut self, text: &str) -> Result<()> {
        crate::cmd::err(&format!("error: {text}\n"))
    }
}

/// A warning on standard error; a closed stderr loses it, nothing else.
fn warn(text: &str) {
    let _ = crate::cmd::err(&format!("warning: {text}\n"));
}
