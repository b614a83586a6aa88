//! One run of the promotion gate (`docs/promote.md#gate`): the driver of the sans-IO machine
//! (`greenlight_gate::machine`). It executes each effect and reports what happened: the
//! candidate's manifests are committed to git, the watchdog's own runtime judges that commit on
//! the candidate Application (the same judge as `greenlight watch`, in-process, with a scratch
//! state), the checks run in the written order, and the machine's promotion lands through a
//! [`Land`] or its kept candidate is committed. Every commit the run makes after reading the
//! live manifest is guarded: if the live manifest changed in git meanwhile, nothing is pushed
//! and the run aborts. What the run says goes to a [`Report`] the caller gives; the CLI's
//! `promote run` and `self-test` only parse their flags and print.
//!
//! Must never: promote without the machine's `CommitPromotion`; put a token in a message, a log
//! line or a process argument (tokens are given to git through its credential helper); run a
//! check kind that is not built (the caller refuses it before anything is written).

use crate::argocd::ArgoCd;
use crate::clock::{Clock, SystemClock};
use crate::output::{LogFormat, Output};
use crate::promote::candidates::{self, Lock};
use crate::promote::land::{self, Followed, Land, Landed};
use crate::runtime::one::Judged;
use crate::runtime::{self, DaemonConfig};
use crate::usage;
use anyhow::{Context as _, Result, anyhow};
use greenlight_core::directive::{Directive, Mode};
use greenlight_core::event::{Event, EventKind, Evidence};
use greenlight_core::image::{ImageRef, TagPolicy};
use greenlight_core::repo_url::RepoUrl;
use greenlight_core::time::Timestamp;
use greenlight_core::watch::State;
use greenlight_gate::candidate::{CandidateSpec, make_candidate};
use greenlight_gate::config::template::CandidateValues;
use greenlight_gate::config::{CheckKind, Promotion};
use greenlight_gate::machine::{
    CandidateVerdict, CheckOutcome, Effect, ExpiredKept, Gate, GateMessage, GatePlan, Input,
    JudgedAs, Left, LiveBypass, Outcome, PlannedCheck, Signal, Start,
};
use greenlight_gate::trailers::{self, GateRecord};
use greenlight_git::{Auth, ChangeOutcome, ChangeRequest, FileChange, Repo};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The most a listing may hold for the candidate's judge: `watch --listing-limit-mib`'s default.
const CANDIDATE_LISTING_LIMIT_BYTES: usize = 128 << 20;

/// The tag of the self-test's candidate image.
pub const SELF_TEST_TAG: &str = "greenlight-self-test-does-not-exist";

/// Where a run says what happens. Lines go to standard output, warnings and errors to standard
/// error, in the CLI.
pub trait Report {
    /// A line of the run's story.
    fn line(&mut self, text: &str) -> Result<()>;
    /// A message of the gate's machine.
    fn gate(&mut self, message: &GateMessage) -> Result<()> {
        self.line(&message.to_string())
    }
    /// Something the user should know that does not stop the run.
    fn warning(&mut self, text: &str) -> Result<()>;
    /// A problem that ends the run (each is reported before the run's end).
    fn error(&mut self, text: &str) -> Result<()>;
}

/// What the run is asked to verify.
#[derive(Clone, Debug)]
pub enum Asked {
    /// `promote run`: this candidate (pinned, or a tag with `resolve`), or a bypass.
    Promote {
        candidate: String,
        /// Resolve a candidate (and the live image) given by tag to the digest the registry serves.
        resolve: bool,
        /// Talk to registries over plain HTTP.
        plain_http: bool,
        /// `--bypass-gate --reason`.
        bypass: Option<String>,
        /// `--allow-reverted <reason>`: propose a digest the watchdog reverted.
        allow_reverted: Option<String>,
    },
    /// `promote self-test`: a candidate made to fail; the run passes only when the gate blocks it.
    SelfTest,
}

/// The judge's settings for the candidate, as `greenlight watch` takes them.
#[derive(Clone, Debug)]
pub struct Timing {
    pub stable_for_ms: i64,
    pub stale_after_ms: i64,
    pub unknown_app_grace_ms: i64,
    pub fetch_interval: Duration,
}

/// Everything a run needs, read and checked by the caller.
pub struct RunConfig {
    pub promotion: Promotion,
    /// The config file: its directory is where `command` checks run; its name is quoted.
    pub config_path: PathBuf,
    /// The deployment repository: a URL, or a bare repository's path.
    pub repo: String,
    /// The branch promoted on (`None`: the remote's HEAD branch).
    pub branch: Option<String>,
    pub git_token: Option<greenlight_git::Secret>,
    pub author_name: String,
    pub author_email: String,
    pub argocd: ArgoCd,
    /// How long the candidate has to reach its Application and become healthy.
    pub candidate_deadline: Duration,
    pub timing: Timing,
    /// Where the run keeps its clone (`None`: a scratch directory, removed afterwards).
    pub data_dir: Option<PathBuf>,
    /// With a pull request: how long to follow it to merged or closed (`None`: end
    /// `proposed` once it is open).
    pub wait_merge: Option<Duration>,
}

/// How a run ended: the exit code the process returns, the machine's outcome when it reached
/// one, and what the run did on the way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ended {
    pub exit_code: u8,
    pub outcome: Option<Outcome>,
    pub record: RunRecord,
}

impl Ended {
    fn code(exit_code: u8) -> Ended {
        Ended {
            exit_code,
            outcome: None,
            record: RunRecord::default(),
        }
    }
}

impl Ended {
    /// The outcome in one word, as `--output json` says it: `promoted`, `bypassed`, `proposed`, `no-op`,
    /// `blocked`, `aborted`, `cancelled`, `self-test-passed`, `self-test-failed`, or `refused`
    /// (the Applications cannot carry a promotion; nothing was run).
    pub fn outcome_word(&self) -> &'static str {
        match &self.outcome {
            Some(Outcome::Promoted { .. }) => "promoted",
            Some(Outcome::Bypassed { .. }) => "bypassed",
            Some(Outcome::Proposed { .. }) => "proposed",
            Some(Outcome::NoOp | Outcome::SuspiciousNoOp) => "no-op",
            Some(Outcome::Blocked(_)) => "blocked",
            Some(Outcome::Aborted { .. }) => "aborted",
            Some(Outcome::SelfTestBlocked(_)) => "self-test-passed",
            Some(Outcome::SelfTestLetThrough) => "self-test-failed",
            Some(Outcome::Cancelled { .. }) => "cancelled",
            None if self.exit_code == 2 => "refused",
            None if self.exit_code >= 128 => "cancelled",
            None => "aborted",
        }
    }

    /// Why it ended so, in one line, when there is more to say than the word.
    pub fn reason(&self) -> Option<String> {
        match &self.outcome {
            Some(Outcome::Blocked(b) | Outcome::SelfTestBlocked(b)) => {
                Some(greenlight_gate::reason::gate_blocked_summary(b))
            }
            Some(Outcome::Aborted { commit }) => Some(format!(
                "the live manifest changed in git since the run started ({commit})"
            )),
            Some(Outcome::Proposed { url, .. }) => Some(format!(
                "pull request {url} proposes the promotion; nothing is live until it merges"
            )),
            Some(Outcome::Cancelled { signal, .. }) => {
                Some(format!("cancelled by {}", signal.name()))
            }
            _ => None,
        }
    }
}

impl Ended {
    /// The run's end as an event of the catalogue (`gate_ended`, with its outcome), for the
    /// notifications' outbox (`docs/notifications.md`): the live `app`, the commit that
    /// promoted or was judged, and words that name each configured check with its own result —
    /// one skipped or never reached says so, a bypass says the checks did not run and why.
    /// `None` when nothing
    /// ran (a refusal before the machine started).
    pub fn event(
        &self,
        app: &str,
        checks_configured: &[String],
        bypass_reason: Option<&str>,
        now: Timestamp,
    ) -> Option<Event> {
        use greenlight_core::event::Outcome as O;
        let outcome = self.outcome.as_ref()?;
        let r = &self.record;
        // Every configured check, in order, with its result; one the run never reached says
        // so — it did not fail.
        let checks = || {
            let list: Vec<String> = checks_configured
                .iter()
                .map(|name| match r.checks.iter().find(|c| c.name == *name) {
                    Some(c) => format!("{name} {}", c.result),
                    None => format!("{name} not run"),
                })
                .collect();
            if list.is_empty() {
                String::new()
            } else {
                format!("; checks: {}", list.join(", "))
            }
        };
        let candidate = r.candidate.as_deref().unwrap_or("the candidate");
        let verdict = r
            .candidate_verdict
            .as_deref()
            .map(|v| format!("; candidate {v}"))
            .unwrap_or_default();
        let (o, commit, message) = match outcome {
            Outcome::Promoted { commit } => (
                O::Promoted,
                Some(commit.clone()),
                format!("promoted {candidate}{verdict}{}", checks()),
            ),
            Outcome::Bypassed { commit } => (
                O::Bypassed,
                Some(commit.clone()),
                format!(
                    "BYPASSED: {candidate} promoted without a candidate or any check; reason: {}",
                    bypass_reason.unwrap_or("(none given)")
                ),
            ),
            Outcome::Proposed {
                url,
                commit,
                bypassed: false,
            } => (
                O::Proposed,
                Some(commit.clone()),
                format!(
                    "proposed {candidate} in pull request {url}{verdict}{}",
                    checks()
                ),
            ),
            Outcome::Proposed {
                url,
                commit,
                bypassed: true,
            } => (
                O::Bypassed,
                Some(commit.clone()),
                format!(
                    "BYPASSED: {candidate} proposed in pull request {url} without a candidate or any check; reason: {}",
                    bypass_reason.unwrap_or("(none given)")
                ),
            ),
            Outcome::NoOp => (O::NoOp, None, format!("{candidate} is what runs already")),
            Outcome::SuspiciousNoOp => (
                O::NoOpOnMutableTag,
                None,
                format!(
                    "nothing changed in git, but the live manifest names a mutable tag that now resolves to {candidate}: the pods may run older content"
                ),
            ),
            Outcome::Blocked(b) => (
                O::Blocked,
                r.candidate_commit.clone(),
                format!(
                    "{}{verdict}{}",
                    greenlight_gate::reason::gate_blocked_summary(b),
                    checks()
                ),
            ),
            Outcome::SelfTestBlocked(b) => (
                O::SelfTestPassed,
                r.candidate_commit.clone(),
                format!(
                    "the deliberately failing candidate was blocked: {}",
                    greenlight_gate::reason::gate_blocked_summary(b)
                ),
            ),
            Outcome::SelfTestLetThrough => (
                O::SelfTestLetThrough,
                r.candidate_commit.clone(),
                format!(
                    "the deliberately failing candidate would have been promoted{verdict}{}",
                    checks()
                ),
            ),
            Outcome::Aborted { commit } => (
                O::Aborted,
                Some(commit.clone()),
                format!(
                    "the live manifest changed in git since the run started ({commit}); nothing promoted"
                ),
            ),
            Outcome::Cancelled { signal, .. } => (
                O::Cancelled,
                r.candidate_commit.clone(),
                format!("cancelled by {}; nothing promoted", signal.name()),
            ),
        };
        Some(Event {
            time: now,
            event: EventKind::GateEnded,
            commit,
            app: Some(app.to_string()),
            state: None,
            message,
            evidence: Evidence::default(),
            outcome: Some(o),
            reason: None,
        })
    }
}

/// What a run did, for `--output json`: the commits it made, the candidate's verdict, each
/// check's result with its evidence and timing.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RunRecord {
    /// The candidate image, pinned (a bypass's too: the image it promotes).
    pub candidate: Option<String>,
    pub candidate_commit: Option<String>,
    /// The judge's verdict on the candidate (`CONFIRMED`, `FAIL`, …, or why there is none).
    pub candidate_verdict: Option<String>,
    /// From the candidate commit to the healthy streak that confirmed it.
    pub candidate_healthy_after_ms: Option<i64>,
    pub checks: Vec<CheckRecord>,
    pub promotion_commit: Option<String>,
    /// The pull request that proposes (or proposed) the promotion.
    pub pull_request: Option<String>,
    /// The commit that kept or removed the candidate.
    pub settle_commit: Option<String>,
}

/// One check as it ran.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CheckRecord {
    /// 1-based, in the written order.
    pub number: usize,
    pub name: String,
    pub kind: String,
    /// `passed`, `failed`, `undecided` or `skipped`.
    pub result: &'static str,
    pub evidence: String,
    pub started: String,
    pub duration_ms: u64,
}

/// The signals that cancel a run, caught from the moment the run starts (their default
/// action, ending the process at once, would leave the lock and the checks behind).
pub struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        let catch = |kind: SignalKind, name: &str| {
            signal(kind).with_context(|| format!("cannot catch {name}"))
        };
        Ok(Signals {
            terminate: catch(SignalKind::terminate(), "SIGTERM")?,
            interrupt: catch(SignalKind::interrupt(), "SIGINT")?,
            hangup: catch(SignalKind::hangup(), "SIGHUP")?,
        })
    }

    /// The next signal.
    async fn recv(&mut self) -> Signal {
        tokio::select! {
            Some(()) = self.terminate.recv() => Signal::Terminate,
            Some(()) = self.interrupt.recv() => Signal::Interrupt,
            Some(()) = self.hangup.recv() => Signal::Hangup,
            // The signal driver is gone (never while the runtime lives): no signal will come.
            else => std::future::pending().await,
        }
    }

    /// A signal that came since the last look, if any.
    fn pending(&mut self) -> Option<Signal> {
        futures_util::FutureExt::now_or_never(self.recv())
    }
}

/// One run, from the clone to its outcome. Blocks on an async runtime of its own.
pub fn run(
    config: RunConfig,
    asked: Asked,
    land: &dyn Land,
    report: &mut dyn Report,
) -> Result<Ended> {
    let RunConfig {
        promotion,
        config_path,
        repo: remote,
        branch,
        git_token,
        author_name,
        author_email,
        argocd,
        candidate_deadline,
        timing,
        data_dir,
        wait_merge,
    } = config;
    let file = config_path.display().to_string();
    let judge = DaemonConfig {
        repo: RepoUrl::new(remote.clone()),
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
        resync_interval: crate::runtime::config::DEFAULT_RESYNC_INTERVAL,
        // The candidate's watch is judged, never reverted: the run removes or keeps it.
        dry_run: true,
        since: None,
        trailer_key: promotion.commit.watch.key.clone(),
        // The candidate commit says it is this run's to judge (`Greenlight-Judged-By`), which
        // a watchdog daemon leaves alone.
        gate_candidates: true,
        health_scope: Vec::new(),
        attribution_exempt: Vec::new(),
        asked: None,
        revert_via_pull_request: None,
        verifier: None,
        fetch_nudge: None,
        retain_ms: 86_400_000,
        // The gate decides on its candidate's first verdict: a NOT_REACHED is its answer.
        reopen_horizon_ms: 0,
        // The candidate must be clean, not as clean as before: the gate's meaning of healthy.
        strict_health: true,
    };
    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    // Held until the run ends: one run per clone.
    let _clone_lock = match &data_dir {
        Some(dir) => Some(crate::lock::lock_promote_data_dir(dir)?),
        None => None,
    };
    let data_dir = data_dir.unwrap_or_else(|| scratch.path().to_path_buf());
    let rt = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let config_dir = config_path
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
        // From here a signal cancels the run: it is noticed between steps and while the
        // candidate is judged or a check runs, and the run then settles what it put in git.
        let mut signals = Signals::install()?;
        let (candidate, bypass, resolve_live, plain_http) = match &asked {
            Asked::Promote {
                candidate,
                resolve,
                plain_http,
                bypass,
                ..
            } => (
                Some(pin_candidate(candidate, *resolve, *plain_http, &file).await?),
                bypass.clone(),
                *resolve,
                *plain_http,
            ),
            Asked::SelfTest => (None, None, false, false),
        };
        let allow_reverted = match &asked {
            Asked::Promote { allow_reverted, .. } => allow_reverted.clone(),
            Asked::SelfTest => None,
        };
        let dir = data_dir.join("work");
        let auth = Auth {
            token: git_token,
            username: None,
        };
        let repo = Repo::open_or_clone(&remote, &dir, auth)
            .with_context(|| format!("cannot clone {}", RepoUrl::new(remote.clone())))?;
        if let Some(note) = greenlight_git::stale_locks_note(&repo.clear_stale_locks()?) {
            report.warning(&note)?;
        }
        let (branch, head_is_branch) = match &branch {
            Some(b) => {
                let head = repo.remote_default_branch().ok().map(|d| d == *b);
                (b.clone(), head)
            }
            None => (repo.remote_default_branch()?, Some(true)),
        };
        let base = repo.fetch(&branch)?;
        let mut judge = judge;
        judge.branch = Some(branch.clone());
        let lock_path =
            candidates::lock_path(&promotion.candidate.path, &promotion.live.workload.name);
        let lock_ttl_ms = candidates::lock_ttl_ms(
            candidate_deadline.as_millis() as i64,
            judge.unknown_app_grace_ms,
            judge.stale_after_ms,
            greenlight_gate::config::plan::plan(&promotion).total_ms,
        );
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
            land,
            wait_merge,
            cancelled: None,
            allowed_reverted: None,
            candidate_at: None,
            kept_until: None,
            record: RunRecord::default(),
        };
        let proposal = Proposal {
            candidate,
            bypass,
            allow_reverted,
            resolve_live,
            plain_http,
        };
        run.go(proposal, &mut signals, report).await
    })
}

/// The candidate pinned by digest: as given, or resolved with `resolve`; a tag without it is
/// refused with the guard's words.
async fn pin_candidate(
    candidate: &str,
    resolve_tag: bool,
    plain_http: bool,
    file: &str,
) -> Result<ImageRef> {
    let image =
        ImageRef::parse(candidate).map_err(|e| usage(format!("--candidate {candidate:?}: {e}")))?;
    if image.digest().is_some() {
        return Ok(image);
    }
    if !resolve_tag {
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
    let digest = resolve(&image, plain_http).await?;
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

/// What a run is asked, read: the candidate pinned (`None`: a self-test's, made from the live
/// image), a bypass, `--allow-reverted`, and how to resolve the live image's tag.
struct Proposal {
    candidate: Option<ImageRef>,
    bypass: Option<String>,
    allow_reverted: Option<String>,
    resolve_live: bool,
    plain_http: bool,
}

/// A promotion the watchdog reverted.
struct Reverted {
    promotion: String,
    revert: String,
    subject: String,
}

struct RunCtx<'l> {
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
    /// The run's lock in git ([`candidates::lock_path`]), written with the candidate and removed
    /// by the commit that settles the run.
    lock_path: String,
    lock_held: bool,
    /// How long the lock is good for ([`candidates::lock_ttl_ms`]); a lock past its expiry is
    /// taken over.
    lock_ttl_ms: i64,
    /// How the promotion lands.
    land: &'l dyn Land,
    /// How long a proposal is followed to merged or closed.
    wait_merge: Option<Duration>,
    /// The signal that cancelled the run, once one did.
    cancelled: Option<Signal>,
    /// `Greenlight-Allow-Reverted`, when the candidate is a digest the watchdog reverted and
    /// `--allow-reverted` said why it is proposed again.
    allowed_reverted: Option<(String, String)>,
    /// When the candidate commit was pushed: its time to healthy is measured from there.
    candidate_at: Option<Timestamp>,
    /// The kept candidate's `kept-until`, once written.
    kept_until: Option<Timestamp>,
    record: RunRecord,
}

impl RunCtx<'_> {
    async fn go(
        mut self,
        proposal: Proposal,
        signals: &mut Signals,
        report: &mut dyn Report,
    ) -> Result<Ended> {
        let Proposal {
            candidate,
            bypass,
            allow_reverted,
            resolve_live,
            plain_http,
        } = proposal;
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
        let self_test = candidate.is_none();
        if self_test {
            self.refuse_a_kept_candidate()?;
        }
        if let Some(c) = &candidate
            && let Some(digest) = c.digest()
            && let Some(reverted) = self.reverted_promotion_of(digest)?
        {
            match allow_reverted {
                None => {
                    return Err(usage(format!(
                        "--candidate {}: the watchdog reverted this digest: it was promoted in {} and reverted in {} ({}); it failed live, so it is not proposed again unless you say why: --allow-reverted <reason> (nothing was run)",
                        c.as_str(),
                        short(&reverted.promotion),
                        short(&reverted.revert),
                        reverted.subject
                    )));
                }
                Some(reason) => {
                    report.warning(&format!(
                        "the watchdog reverted {} in {} ({}); proposed again with --allow-reverted: {reason}",
                        c.as_str(),
                        short(&reverted.revert),
                        reverted.subject
                    ))?;
                    self.allowed_reverted =
                        Some(trailers::allowed_reverted(&reason, short(&reverted.revert)));
                }
            }
        }
        let mutable_live_tag = live_ref
            .as_ref()
            .filter(|r| r.digest().is_none())
            .and_then(|r| r.tag())
            .filter(|t| TagPolicy::default().is_mutable(t));
        if let Some(tag) = mutable_live_tag
            && live_digest.is_none()
            && !self_test
            && bypass.is_none()
        {
            report.warning(&format!(
                "live.manifest {manifest}: its image `{live_image}` names the mutable tag `{tag}` and --resolve was not given: the gate cannot tell whether the candidate is already live, so it verifies and promotes it whatever runs now; pass --resolve to compare digests first"
            ))?;
        }
        // A no-op needs nothing of Argo CD: it is said as one even when Argo CD is unreachable.
        let no_op = !self_test
            && bypass.is_none()
            && live_digest.is_some()
            && live_digest.as_deref() == candidate.as_ref().and_then(|c| c.digest());
        if !no_op && let Some(refused) = self.check_applications(bypass.is_some(), report).await? {
            return Ok(refused);
        }
        let candidate = match candidate {
            Some(c) => c,
            None => self_test_candidate(&live_image)?,
        };
        let live_tag_is_mutable = mutable_live_tag.is_some();
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
            watch_key: p.commit.watch.key.clone(),
            watch: p.watch_directive(),
            short_deadline: p.commit.watch.short_deadline,
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
        self.record.candidate = Some(candidate.as_str().to_string());
        let (gate, first) = Gate::start(plan, start);
        if let Some(signal) = signals.pending() {
            report.line(&format!(
                "CANCELLED by {} before the run started: nothing was written",
                signal.name()
            ))?;
            return Ok(Ended::code(signal.exit_code() as u8));
        }
        let ran = self.drive(gate, first, &candidate, signals, report).await;
        if ran.is_err() && self.lock_held {
            // The run failed after taking the lock: give it back rather than leave it to expire.
            if let Err(e) = self.release_lock_after_error() {
                report.warning(&format!(
                    "the promotion lock {} was not released: {e:#}",
                    self.lock_path
                ))?;
            }
        }
        // A cancelled run says where what it left is.
        if let Ok(Ended {
            outcome: Some(Outcome::Cancelled { left, .. }),
            record,
            ..
        }) = &ran
            && let Some((path, ..)) = &self.made
        {
            let commit = record.settle_commit.as_deref().map(short).unwrap_or("?");
            match (left, self.kept_until) {
                (Left::Kept, Some(until)) => report.line(&format!(
                    "left: {path} on {}, kept until {} (commit {commit}); the lock {} released",
                    self.branch,
                    until.rfc3339(),
                    self.lock_path
                ))?,
                (Left::Removed, _) => report.line(&format!(
                    "left: nothing; {path} and the lock {} removed from {} (commit {commit})",
                    self.lock_path, self.branch
                ))?,
                _ => {}
            }
        }
        ran
    }

    /// Check the Applications against Argo CD before anything is written
    /// (`docs/promote.md#applications`): the live one deploys the live manifest as plain YAML
    /// (a bypass too: its commit promotes nothing otherwise), the candidates' one deploys
    /// `candidate.path` and prunes. Warnings go to stderr; problems are all reported, and the run
    /// ends with exit 2 and nothing written.
    async fn check_applications(
        &self,
        bypass: bool,
        report: &mut dyn Report,
    ) -> Result<Option<Ended>> {
        use crate::promote::apps;
        let p = &self.promotion;
        let argo = self
            .argocd
            .client()
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
            report.warning(w)?;
        }
        if found.problems.is_empty() {
            return Ok(None);
        }
        for problem in &found.problems {
            report.error(problem)?;
        }
        report.error(&format!(
            "{} problem(s) with the Applications in Argo CD; nothing was run",
            found.problems.len()
        ))?;
        Ok(Some(Ended::code(2)))
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
            let Some(record) = GateRecord::parse(&commit.message) else {
                continue;
            };
            if record.candidate != live_image {
                // The image changed by hand since that promotion.
                return Ok(None);
            }
            return Ok(record.bypass_reason().map(|reason| LiveBypass {
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
        Ok(candidates::survey(&self.repo, &self.base, dir, now)?
            .into_iter()
            .filter(|s| s.workload != *own)
            .filter_map(|s| match s.verdict {
                candidates::Verdict::Expired { until } => Some(ExpiredKept {
                    path: s.path,
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
        signals: &mut Signals,
        report: &mut dyn Report,
    ) -> Result<Ended> {
        let mut effects: VecDeque<Effect> = first.into();
        let mut outcome: Option<Outcome> = None;
        let mut cancelled: Option<Signal> = None;
        while let Some(effect) = effects.pop_front() {
            if cancelled.is_none()
                && let Some(signal) = signals.pending()
            {
                effects.push_front(effect);
                self.cancel(&mut gate, &mut effects, signal, &mut cancelled);
                continue;
            }
            let mut stopped_by: Option<Signal> = None;
            let input = match effect {
                Effect::Say(m) => {
                    report.gate(&m)?;
                    None
                }
                Effect::Done(o) => {
                    outcome = Some(o);
                    None
                }
                Effect::CommitCandidate => Some(self.commit_candidate(candidate.as_str(), report)?),
                Effect::JudgeCandidate { commit } => tokio::select! {
                    judged = self.judge_candidate(&commit, report) => {
                        let (verdict, healthy_after_ms) = judged?;
                        self.record.candidate_verdict = Some(match &verdict {
                            CandidateVerdict::Ready => State::Confirmed.as_str().to_string(),
                            CandidateVerdict::NotReady { state, .. } => state.to_string(),
                        });
                        self.record.candidate_healthy_after_ms = healthy_after_ms;
                        if let Some(ms) = healthy_after_ms {
                            effects.extend(gate.step(Input::CandidateHealthyAfter { ms }));
                        }
                        Some(Input::CandidateJudged(verdict))
                    }
                    signal = signals.recv(), if cancelled.is_none() => {
                        stopped_by = Some(signal);
                        None
                    }
                },
                // Dropping a check's future stops it: its processes' group is killed.
                Effect::RunCheck { index } => tokio::select! {
                    outcome = self.timed_check(index) => Some(Input::CheckFinished { index, outcome }),
                    signal = signals.recv(), if cancelled.is_none() => {
                        stopped_by = Some(signal);
                        None
                    }
                },
                Effect::CommitPromotion { subject, trailers } => {
                    match self.commit_promotion(candidate.as_str(), &subject, &trailers)? {
                        Landed::Committed { commit } | Landed::AlreadyThere { tip: commit } => {
                            Some(Input::PromotionCommitted { commit })
                        }
                        Landed::Guarded { tip } => Some(Input::LiveManifestChanged { commit: tip }),
                        Landed::Merged {
                            commit,
                            number,
                            url,
                        } => {
                            report.line(&format!(
                                "pull request #{number} opened: {url}; nothing to wait for: merged at once as {commit}"
                            ))?;
                            self.record.pull_request = Some(url);
                            Some(Input::PromotionCommitted { commit })
                        }
                        Landed::Proposed(p) => {
                            report.line(&format!(
                                "pull request #{} opened: {}{}",
                                p.number,
                                p.url,
                                if p.auto_merge {
                                    "; auto-merge armed: the forge merges it once its required checks pass"
                                } else {
                                    "; it waits for a human's merge"
                                }
                            ))?;
                            if let Some(why) = &p.auto_merge_refused {
                                report.warning(&format!(
                                    "{why}: pull request #{} waits for a human's merge",
                                    p.number
                                ))?;
                            }
                            self.record.pull_request = Some(p.url.clone());
                            Some(self.follow_merge(p, signals, report).await?)
                        }
                    }
                }
                Effect::KeepCandidate {
                    trailers,
                    scale_to_zero,
                } => Some(self.keep_candidate(&trailers, scale_to_zero, report)?),
                Effect::RemoveCandidate => Some(self.remove_candidate()?),
            };
            if let Some(signal) = stopped_by {
                self.cancel(&mut gate, &mut effects, signal, &mut cancelled);
                continue;
            }
            if let Some(input) = input {
                match &input {
                    Input::CandidateCommitted { commit } => {
                        self.record.candidate_commit = Some(commit.clone());
                    }
                    Input::PromotionCommitted { commit } => {
                        self.record.promotion_commit = Some(commit.clone());
                    }
                    Input::CandidateSettled { commit } => {
                        self.record.settle_commit = Some(commit.clone());
                    }
                    _ => {}
                }
                let aborting = matches!(input, Input::LiveManifestChanged { .. });
                let next = gate.step(input);
                if next.is_empty() && aborting && !gate.is_done() {
                    // A bypass whose live manifest changed: nothing was pushed.
                    report.line(
                        "aborted: the live manifest changed in git since the run started; nothing promoted, run again",
                    )?;
                    return Ok(Ended::code(1));
                }
                effects.extend(next);
            }
        }
        let outcome = outcome.ok_or_else(|| anyhow!("the gate ended without an outcome"))?;
        Ok(Ended {
            exit_code: outcome.exit_code() as u8,
            outcome: Some(outcome),
            record: self.record.clone(),
        })
    }

    /// A signal: the machine settles the run (its effects replace what was queued); a run that
    /// is already ending keeps its course.
    fn cancel(
        &mut self,
        gate: &mut Gate,
        effects: &mut VecDeque<Effect>,
        signal: Signal,
        cancelled: &mut Option<Signal>,
    ) {
        *cancelled = Some(signal);
        self.cancelled = Some(signal);
        let next = gate.step(Input::Cancelled { signal });
        if !next.is_empty() {
            effects.clear();
            effects.extend(next);
        }
    }

    /// A self-test writes the workload's candidate file and removes it: a kept candidate there,
    /// not yet expired, is evidence someone may be investigating, and is never overwritten.
    fn refuse_a_kept_candidate(&self) -> Result<()> {
        let dir = self.promotion.candidate.path.trim_end_matches('/');
        let now = SystemClock.now();
        for s in candidates::survey(&self.repo, &self.base, dir, now)? {
            if s.workload != self.promotion.live.workload.name {
                continue;
            }
            if let candidates::Verdict::Kept { until } = s.verdict {
                return Err(anyhow!(
                    "{}: a kept candidate of {} is there until {} (a blocked run's evidence, which someone may be investigating): the self-test would overwrite and remove it, so nothing was run; run the self-test once `greenlight promote gc` removed it, or remove it from git yourself",
                    s.path,
                    s.workload,
                    until.rfc3339()
                ));
            }
        }
        Ok(())
    }

    /// The watchdog's revert of a promotion of `digest`, if the live manifest's recent history
    /// holds one: a commit carrying `Greenlight-Revert-Of: <promotion>` whose promotion's
    /// `Greenlight-Candidate` is pinned to that digest.
    fn reverted_promotion_of(&self, digest: &str) -> Result<Option<Reverted>> {
        let history = self
            .repo
            .path_history(&self.base, &self.promotion.live.manifest, 50)?;
        for sha in history {
            let commit = self.repo.commit(&sha)?;
            let Some(promotion) = greenlight_core::trailer::parse(&commit.message)
                .into_iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(greenlight_core::trailer::REVERT_OF))
                .map(|(_, v)| v.trim().to_string())
            else {
                continue;
            };
            let Ok(original) = self.repo.commit(&promotion) else {
                continue;
            };
            let Some(record) = GateRecord::parse(&original.message) else {
                continue;
            };
            let promoted = ImageRef::parse(&record.candidate)
                .ok()
                .and_then(|r| r.digest().map(str::to_string));
            if promoted.as_deref() == Some(digest) {
                return Ok(Some(Reverted {
                    promotion: original.sha,
                    revert: sha,
                    subject: commit.message.lines().next().unwrap_or("").to_string(),
                }));
            }
        }
        Ok(None)
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

    fn change(&self, changes: Vec<FileChange>, message: String, guarded: bool) -> ChangeRequest {
        ChangeRequest {
            branch: self.branch.clone(),
            changes,
            message,
            author_name: self.author_name.clone(),
            author_email: self.author_email.clone(),
            max_attempts: 5,
            unchanged_since: if guarded { self.guard() } else { None },
        }
    }

    /// A direct push of the run's own bookkeeping (candidate, lock, kept record).
    fn push(
        &self,
        changes: Vec<FileChange>,
        message: String,
        guarded: bool,
    ) -> Result<ChangeOutcome> {
        Ok(self
            .repo
            .commit_and_push(&self.change(changes, message, guarded))?)
    }

    fn commit_candidate(&mut self, image: &str, report: &mut dyn Report) -> Result<Input> {
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
        let message = trailers::candidate_message(
            &p.live.app.to_string(),
            image,
            &p.candidate.app.to_string(),
            (&p.commit.watch.key, &directive.render()),
        );
        let mut docs = vec![c.workload];
        docs.extend(c.service);
        let content = candidates::render(&docs);
        self.made = Some((path.clone(), values, docs));
        let now = SystemClock.now();
        let brought_back = match self.repo.read_file(&self.base, &self.lock_path)? {
            Some(_) => candidates::lock_brought_back_by(&self.repo, &self.base, &self.lock_path)?,
            None => None,
        };
        if let Some(by) = brought_back {
            report.line(&format!(
                "the promotion lock {} was brought back by {}, a revert of a gate commit: it is no run's, taken over",
                self.lock_path,
                short(&by)
            ))?;
        } else if let Some(held) = self.repo.read_file(&self.base, &self.lock_path)? {
            let held = String::from_utf8_lossy(&held).into_owned();
            match candidates::lock_expires(&held) {
                Some(at) if at <= now => report.line(&format!(
                    "the promotion lock {} expired at {}: taken over",
                    self.lock_path,
                    at.rfc3339()
                ))?,
                _ => return Err(candidates::lock_held_error(&self.lock_path, &held)),
            }
        }
        let lock = Lock {
            workload: p.live.workload.name.clone(),
            holder: self.author_name.clone(),
            candidate: image.to_string(),
            started: now,
            expires: now.plus_ms(self.lock_ttl_ms),
        }
        .render();
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
                path: candidates::readme_path(&p.candidate.path),
                content: candidates::README_TEXT.as_bytes().to_vec(),
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
            self.candidate_at = Some(SystemClock.now());
        }
        Ok(match outcome {
            ChangeOutcome::Pushed { commit, .. } => Input::CandidateCommitted { commit },
            ChangeOutcome::Guarded { path, tip, .. } if path == self.lock_path => {
                let held = self
                    .repo
                    .read_file(&tip, &self.lock_path)?
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .unwrap_or_default();
                return Err(candidates::lock_held_error(&self.lock_path, &held));
            }
            ChangeOutcome::Guarded { tip, .. } => Input::LiveManifestChanged { commit: tip },
            ChangeOutcome::Unchanged { tip } => Input::CandidateCommitted { commit: tip },
        })
    }

    /// The watchdog's runtime, in-process on a scratch clone and state, watching from the
    /// candidate commit's parent until that commit's watch has a verdict.
    /// The verdict, and — when it is CONFIRMED — how long the candidate took from its commit
    /// to the healthy streak that confirmed it.
    async fn judge_candidate(
        &self,
        commit: &str,
        report: &mut dyn Report,
    ) -> Result<(CandidateVerdict, Option<i64>)> {
        let dir =
            tempfile::tempdir_in(&self.scratch).context("cannot create a scratch directory")?;
        let mut cfg = self.judge.clone();
        cfg.state = dir.path().join("state.db");
        cfg.data_dir = dir.path().to_path_buf();
        cfg.since = Some(format!("{commit}^"));
        // The candidate is judged on its own resources: a candidates' Application other
        // workloads share may hold their kept candidates, Degraded, which are not this one.
        if let Some((path, _, docs)) = &self.made {
            // Another workload's candidate commit to the same directory is no change of this
            // candidate; a commit to its own file, or to anything else there, still is.
            cfg.attribution_exempt =
                candidates::attribution_exempt(&self.promotion.candidate.path, path);
            cfg.health_scope = docs
                .iter()
                .filter_map(|d| {
                    Some(greenlight_core::snapshot::ScopedResource {
                        kind: d["kind"].as_str()?.to_string(),
                        namespace: d["metadata"]["namespace"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        name: d["metadata"]["name"].as_str()?.to_string(),
                    })
                })
                .collect();
        }
        let out = Output::new(LogFormat::Text);
        // The start of the candidate's last healthy streak: the one a CONFIRMED ends.
        let streak_from = Arc::new(std::sync::Mutex::new(None::<Timestamp>));
        let streak = streak_from.clone();
        let watched = commit.to_string();
        out.subscribe(move |e| {
            if e.commit.as_deref() == Some(watched.as_str())
                && e.event == EventKind::HealthyStreakStarted
                && let Ok(mut at) = streak.lock()
            {
                *at = Some(e.time);
            }
        });
        let source = self
            .argocd
            .source(&cfg.repo, CANDIDATE_LISTING_LIMIT_BYTES)?;
        // The judge decides by the deadline; the margin covers a late reach and a stale source.
        let limit = self.candidate_deadline
            + Duration::from_millis(
                cfg.unknown_app_grace_ms
                    .saturating_add(cfg.stale_after_ms.saturating_mul(2))
                    .max(0) as u64,
            )
            + Duration::from_secs(60);
        let (state, reason) = match runtime::one::judge_one(cfg, source, out, commit, limit)
            .await
            .context("judging the candidate")?
        {
            Judged::Verdict(s, reason) => (JudgedAs::Verdict(s), reason),
            Judged::TrailerRejected(reason) => (JudgedAs::TrailerRejected, reason),
            Judged::NoVerdict => (
                JudgedAs::NoVerdict,
                format!(
                    "the judge gave no verdict on {} within {}",
                    short(commit),
                    humantime::format_duration(limit)
                ),
            ),
        };
        Ok(if state == JudgedAs::Verdict(State::Confirmed) {
            let from = streak_from.lock().ok().and_then(|at| *at);
            let healthy_after_ms = from
                .zip(self.candidate_at)
                .map(|(healthy, committed)| healthy.ms_since(committed).max(0));
            (CandidateVerdict::Ready, healthy_after_ms)
        } else {
            let (pending, warnings) = self.pending_pods().await;
            for w in &warnings {
                report.warning(w)?;
            }
            (
                CandidateVerdict::NotReady {
                    state,
                    reason,
                    pending,
                },
                None,
            )
        })
    }

    /// The scheduler's messages (distinct) for the candidate's Pods stuck Pending: the candidate
    /// Application's resource tree names the Pending Pods, and each live Pod's `PodScheduled=False`
    /// condition says why. A read that fails is a warning (returned second); what was found so
    /// far is kept.
    async fn pending_pods(&self) -> (Vec<String>, Vec<String>) {
        let mut found = Vec::new();
        let mut warnings = Vec::new();
        let Some((_, values, docs)) = &self.made else {
            return (found, warnings);
        };
        let Some(workload) = docs[0]["metadata"]["name"].as_str() else {
            return (found, warnings);
        };
        let kind = self.promotion.live.workload.kind.as_str();
        let app = &self.promotion.candidate.app;
        let app_ns = app.namespace.as_deref().unwrap_or("");
        let mut warn = |what: &str, e: &dyn std::fmt::Display| {
            warnings.push(format!(
                "cannot read {what} of the candidate Application {}: {e}; the candidate's Pending Pods are not all named",
                app.name
            ));
        };
        let argo = match self.argocd.client() {
            Ok(c) => c,
            Err(e) => {
                warn("the resource tree", &e);
                return (found, warnings);
            }
        };
        let tree = match argo.resource_tree(app_ns, &app.name).await {
            Ok(Some(t)) => t,
            Ok(None) => {
                warn("the resource tree", &"Argo CD says 404");
                return (found, warnings);
            }
            Err(e) => {
                warn("the resource tree", &e);
                return (found, warnings);
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
                    return (found, warnings);
                }
            }
        }
        (found, warnings)
    }

    /// [`Self::run_check`], recorded with its start and duration.
    async fn timed_check(&mut self, index: usize) -> CheckOutcome {
        let started = SystemClock.now();
        let clock = std::time::Instant::now();
        let outcome = self.run_check(index).await;
        let (result, evidence) = match &outcome {
            CheckOutcome::Passed { evidence } => ("passed", evidence),
            CheckOutcome::Failed { evidence } => ("failed", evidence),
            CheckOutcome::Undecided { evidence } => ("undecided", evidence),
            CheckOutcome::Skipped { why } => ("skipped", why),
        };
        let check = &self.promotion.checks[index];
        self.record.checks.push(CheckRecord {
            number: index + 1,
            name: check.name.clone(),
            kind: check.kind.word().to_string(),
            result,
            evidence: evidence.clone(),
            started: started.rfc3339(),
            duration_ms: clock.elapsed().as_millis() as u64,
        });
        outcome
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
                crate::checks::http_check(
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
                crate::checks::command_check_in(
                    &argv,
                    Some(&self.config_dir),
                    Duration::from_millis(c.timeout_ms as u64),
                )
                .await
            }
            CheckKind::Analysis(a) => crate::checks::analysis_check(a, values, &SystemClock).await,
        }
    }

    fn commit_promotion(
        &self,
        image: &str,
        subject: &str,
        trailers: &[(String, String)],
    ) -> Result<Landed> {
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
            trailers.insert(at, trailers::revert_keeps(&self.promotion.candidate.path));
        }
        if let Some(allowed) = &self.allowed_reverted {
            let at = trailers
                .iter()
                .position(|(k, _)| k == &self.promotion.commit.watch.key)
                .unwrap_or(trailers.len());
            trailers.insert(at, allowed.clone());
        }
        self.land.land(
            &self.repo,
            &self.change(changes, trailers::message(subject, "", &trailers), true),
        )
    }

    /// A proposal followed (with `--wait-merge`) until it merges, is closed, the wait runs
    /// out or a signal comes; without `--wait-merge`, proposed as it stands.
    async fn follow_merge(
        &mut self,
        p: land::Proposal,
        signals: &mut Signals,
        report: &mut dyn Report,
    ) -> Result<Input> {
        let proposed = |p: &land::Proposal| Input::PromotionProposed {
            url: p.url.clone(),
            commit: p.commit.clone(),
        };
        let Some(limit) = self.wait_merge else {
            return Ok(proposed(&p));
        };
        report.line(&format!(
            "waiting up to {} for it to merge or close",
            humantime::format_duration(limit)
        ))?;
        let poll = (limit / 30).clamp(Duration::from_millis(250), Duration::from_secs(5));
        let until = tokio::time::Instant::now() + limit;
        // A forge that cannot be read for a while is no outcome: the request is as it was; the
        // run says so once per new error and reads again until the wait runs out.
        let mut last_error: Option<String> = None;
        loop {
            let followed = match tokio::task::block_in_place(|| self.land.follow(&p)) {
                Ok(f) => {
                    last_error = None;
                    f
                }
                Err(e) => {
                    let text = format!("{e:#}");
                    if last_error.as_ref() != Some(&text) {
                        report.warning(&format!(
                            "cannot read pull request #{}: {text}; reading again",
                            p.number
                        ))?;
                    }
                    last_error = Some(text);
                    Followed::Open
                }
            };
            match followed {
                Followed::Merged { commit } => {
                    report.line(&format!("pull request #{} merged as {commit}", p.number))?;
                    return Ok(Input::PromotionCommitted { commit });
                }
                Followed::Closed => {
                    return Ok(Input::PromotionDeclined { url: p.url.clone() });
                }
                Followed::Open => {}
            }
            if tokio::time::Instant::now() >= until {
                report.line(&format!(
                    "pull request #{} is still open after {}: it stays open; nothing is live until it merges",
                    p.number,
                    humantime::format_duration(limit)
                ))?;
                return Ok(proposed(&p));
            }
            tokio::select! {
                _ = tokio::time::sleep(poll.min(until - tokio::time::Instant::now())) => {}
                signal = signals.recv() => {
                    report.line(&format!(
                        "{} while waiting for the merge: pull request #{} stays open; nothing is live until it merges",
                        signal.name(),
                        p.number
                    ))?;
                    return Ok(proposed(&p));
                }
            }
        }
    }

    /// The failed candidate stays deployed; its workload is annotated with when it may be
    /// removed, and the commit carries why.
    fn keep_candidate(
        &mut self,
        trailers: &[(String, String)],
        scale_to_zero: bool,
        report: &mut dyn Report,
    ) -> Result<Input> {
        let Some((path, _, docs)) = &self.made else {
            return Err(anyhow!("no candidate to keep"));
        };
        let now = SystemClock.now();
        let until = now.plus_ms(self.promotion.retention.failed_ms);
        let mut docs = docs.clone();
        docs[0]["metadata"]["annotations"][candidates::KEPT_UNTIL] = json!(until.rfc3339());
        self.kept_until = Some(until);
        if scale_to_zero {
            docs[0]["spec"]["replicas"] = json!(0);
            report.line(&format!(
                "the kept candidate is scaled to zero in {path}: its pods were Pending for lack of capacity and would take the next GPU or node that frees up; the scheduler's words stay in its commit"
            ))?;
        }
        let subject = match self.cancelled {
            Some(signal) => format!(
                "keep the candidate of {} until {}: its run was cancelled by {}",
                self.promotion.live.app,
                until.rfc3339(),
                signal.name()
            ),
            None if scale_to_zero => format!(
                "keep the blocked candidate of {} until {}, scaled to zero (short of capacity)",
                self.promotion.live.app,
                until.rfc3339()
            ),
            None => format!(
                "keep the blocked candidate of {} until {}",
                self.promotion.live.app,
                until.rfc3339()
            ),
        };
        let outcome = self.push(
            vec![
                FileChange::Write {
                    path: path.clone(),
                    content: candidates::render(&docs).into_bytes(),
                },
                FileChange::Remove {
                    path: self.lock_path.clone(),
                },
            ],
            trailers::message(&subject, "", trailers),
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
        let subject = match self.cancelled {
            Some(signal) => format!(
                "remove the candidate of {}: its run was cancelled by {} before a verdict",
                self.promotion.live.app,
                signal.name()
            ),
            None => format!(
                "remove the self-test candidate of {}",
                self.promotion.live.app
            ),
        };
        let outcome = self.push(
            vec![
                FileChange::Remove { path: path.clone() },
                FileChange::Remove {
                    path: self.lock_path.clone(),
                },
            ],
            trailers::message(&subject, "", &[]),
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

impl RunCtx<'_> {
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
            trailers::message(&subject, "", &[]),
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
