//! The promotion gate's configuration, validated: which workload's container is promoted and
//! where its live manifest is, where a candidate runs while it is verified, the checks in the
//! order they run, how long a failed candidate is kept, and the watch trailer the promotion
//! commit carries. Plus [`plan`]: each check's worst-case duration and the order warnings.
//!
//! The values here are already checked (names, paths, ranges, placeholders); the reader of
//! `promote.yaml` and of Argo Rollouts AnalysisTemplates, which knows files, lines and YAML,
//! is `greenlight::promote`. Must never: read a file, parse YAML, or run a check.

pub mod plan;
pub mod template;

use greenlight_core::directive::{AppRef, DEFAULT_TRAILER_KEY, Directive, Mode};
pub use template::{CandidateValues, Template};

/// The `apiVersion` of a promotion config this greenlight reads.
pub const API_VERSION: &str = "greenlight.dev/v1alpha1";
/// The `kind` of a promotion config.
pub const KIND: &str = "Promotion";

/// A failed candidate is kept this long by default (`retention.failed`).
pub const DEFAULT_FAILED_RETENTION_MS: i64 = 24 * 3_600_000;
/// An `http` check's default `timeout`.
pub const DEFAULT_HTTP_TIMEOUT_MS: i64 = 10_000;
/// An `http` check's default expected `status`.
pub const DEFAULT_HTTP_STATUS: u16 = 200;
/// A Prometheus query's default `timeout`, as in Argo Rollouts.
pub const DEFAULT_QUERY_TIMEOUT_MS: i64 = 30_000;
/// `consecutiveErrorLimit`'s default, as in Argo Rollouts.
pub const DEFAULT_CONSECUTIVE_ERROR_LIMIT: u32 = 4;
/// How long Argo Rollouts waits after a measurement that errored before measuring again
/// (`DefaultErrorRetryInterval`), whatever the metric's `interval`.
pub const ERROR_RETRY_INTERVAL_MS: i64 = crate::analysis::ERROR_RETRY_MS;

/// A whole promotion config.
#[derive(Debug, Clone, PartialEq)]
pub struct Promotion {
    pub live: Live,
    pub candidate: Candidate,
    /// In the written order, never reordered: the gate stops at the first that does not pass.
    pub checks: Vec<Check>,
    pub retention: Retention,
    pub commit: PromotionCommit,
}

impl Promotion {
    /// The watch trailer the promotion commit carries: the live Application, judged by the
    /// watchdog like any other opted-in commit.
    pub fn watch_directive(&self) -> Directive {
        Directive {
            app: self.live.app.clone(),
            deadline_ms: self.commit.watch.deadline_ms,
            mode: self.commit.watch.mode,
            expect: "Healthy".to_string(),
        }
    }
}

/// What is promoted: one container of one workload in a plain-YAML manifest in git.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Live {
    /// The Argo CD Application that deploys the live manifest.
    pub app: AppRef,
    /// The manifest's path in the repository (`/`-separated, relative, a `.yaml`/`.yml` file).
    pub manifest: String,
    pub workload: Workload,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    pub kind: WorkloadKind,
    pub name: String,
    /// Set when the manifest says it (or several objects share the name).
    pub namespace: Option<String>,
    /// The container whose image is promoted.
    pub container: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    Deployment,
    StatefulSet,
}

impl WorkloadKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::StatefulSet => "StatefulSet",
        }
    }
}

/// Where a candidate runs while it is verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The Argo CD Application that deploys `path`; it must prune automatically, so that a
    /// candidate removed from git is removed from the cluster (checked against Argo CD at run
    /// time).
    pub app: AppRef,
    /// The directory in the repository candidate manifests are written to.
    pub path: String,
    pub namespace: String,
    /// The candidate's Service (`{{candidate.service}}`).
    pub service: String,
    /// The Service's port (`{{candidate.port}}`).
    pub port: u16,
    pub replicas: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// How long a failed candidate stays for investigation before it may be removed.
    pub failed_ms: i64,
}

/// The commit that promotes a verified candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromotionCommit {
    pub watch: WatchTrailer,
    /// How the promotion lands (`promotion.via`).
    pub landing: Landing,
}

/// `promotion.via`: the promotion commit pushed to the branch, or proposed by pull request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Landing {
    /// `push` (the default): one fast-forward commit on the branch.
    #[default]
    Push,
    /// `pull-request`: the commit on a branch of its own and a pull (merge) request from it.
    PullRequest(PullRequestLanding),
}

/// `promotion: {via: pull-request, forge, autoMerge, forgeUrl, project}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestLanding {
    /// `github`, `gitlab` or `gitea`.
    pub forge: String,
    /// Arm the forge's auto-merge (merge when its required checks pass; at once when there
    /// are none); otherwise the request waits for a human's merge.
    pub auto_merge: bool,
    /// The forge's API (`forgeUrl`); `None`: told by the repository's URL (docs/promote.md:
    /// `api.github.com`, a GitHub Enterprise host's `/api/v3`, GitLab's `/api/v4`, Gitea's
    /// `/api/v1`).
    pub api_url: Option<String>,
    /// `owner/name` (`project`); `None`: the repository URL's path.
    pub project: Option<String>,
}

/// The watch trailer on the promotion commit (`Nav-Watchdog: app=… deadline=… mode=…`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchTrailer {
    /// The trailer key the watchdog reads (its `--trailer-key`).
    pub key: String,
    pub mode: Mode,
    pub deadline_ms: i64,
    /// `shortDeadline`: what a run does when `deadline_ms` is shorter than its candidate's
    /// measured time to healthy plus margin.
    pub short_deadline: ShortDeadline,
}

/// `promotion.watch.shortDeadline`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShortDeadline {
    /// Promote with the deadline raised to the measured time plus margin, saying so (default).
    #[default]
    Raise,
    /// Block the promotion (the candidate is kept), naming the deadline to configure.
    Refuse,
}

impl ShortDeadline {
    pub fn word(self) -> &'static str {
        match self {
            ShortDeadline::Raise => "raise",
            ShortDeadline::Refuse => "refuse",
        }
    }
}

impl Default for WatchTrailer {
    fn default() -> Self {
        WatchTrailer {
            key: DEFAULT_TRAILER_KEY.to_string(),
            mode: Mode::Shadow,
            deadline_ms: greenlight_core::directive::DEFAULT_DEADLINE_MS,
            short_deadline: ShortDeadline::Raise,
        }
    }
}

/// One check, by the name the config gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub name: String,
    pub kind: CheckKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CheckKind {
    Http(HttpCheck),
    Command(CommandCheck),
    /// Metrics measured as Argo Rollouts measures an AnalysisRun: together, the check's result
    /// the worst of theirs. One metric for a `prometheus` check, the template's for an
    /// `analysisTemplate` check.
    Analysis(Analysis),
}

impl CheckKind {
    /// The config's word for the kind of check.
    pub fn word(&self) -> &'static str {
        match self {
            CheckKind::Http(_) => "http",
            CheckKind::Command(_) => "command",
            CheckKind::Analysis(a) => match a.origin {
                AnalysisOrigin::Inline => "prometheus",
                AnalysisOrigin::Template { .. } => "analysisTemplate",
            },
        }
    }
}

/// A GET request to the candidate: passes on the expected status (and body text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpCheck {
    pub url: Template,
    pub status: u16,
    /// A literal, case-sensitive substring the response body must contain.
    pub body_contains: Option<String>,
    pub timeout_ms: i64,
}

/// A program run without a shell: passes when it exits 0 within its timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandCheck {
    pub argv: Vec<Template>,
    pub timeout_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    pub origin: AnalysisOrigin,
    pub metrics: Vec<Metric>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnalysisOrigin {
    /// A `prometheus` check written in the promotion config.
    Inline,
    /// An Argo Rollouts `AnalysisTemplate` or `ClusterAnalysisTemplate` file.
    Template {
        /// The file as the config names it.
        file: String,
        kind: String,
        name: String,
    },
}

/// An Argo Rollouts metric with the Prometheus provider, args already resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    pub name: String,
    /// Zero when unset (the first measurement is taken at once).
    pub initial_delay_ms: i64,
    /// Between measurements; `None` only when `count` is 1.
    pub interval_ms: Option<i64>,
    /// Measurements that count (Error ones do not), at least 1.
    pub count: u32,
    pub success_condition: Option<String>,
    pub failure_condition: Option<String>,
    /// `None` is Argo Rollouts' `-1`: failures never fail the metric by themselves.
    pub failure_limit: Option<u32>,
    pub inconclusive_limit: u32,
    pub consecutive_error_limit: u32,
    /// Zero: disabled.
    pub consecutive_success_limit: u32,
    /// `allowNoData`: a measurement that measured nothing (an empty vector, NaN) may pass as
    /// Argo Rollouts would pass it; otherwise it is Inconclusive (`docs/analysis.md#measured-nothing`).
    pub allow_no_data: bool,
    pub prometheus: PrometheusQuery,
}

impl Metric {
    /// The analysis engine's spec of this metric (`crate::analysis`), which judges its
    /// measurements and bounds its duration.
    pub fn analysis_spec(&self) -> crate::analysis::MetricSpec {
        let limit = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
        crate::analysis::MetricSpec {
            name: self.name.clone(),
            interval_ms: self.interval_ms,
            count: Some(self.count),
            initial_delay_ms: self.initial_delay_ms,
            failure_limit: self.failure_limit.map_or(-1, limit),
            inconclusive_limit: limit(self.inconclusive_limit),
            consecutive_error_limit: limit(self.consecutive_error_limit),
            consecutive_success_limit: limit(self.consecutive_success_limit),
            success_condition: self.success_condition.clone(),
            failure_condition: self.failure_condition.clone(),
            allow_no_data: self.allow_no_data,
        }
    }
}

/// Argo Rollouts' `provider.prometheus`, the parts greenlight queries with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrometheusQuery {
    pub address: Template,
    pub query: Template,
    /// Per query.
    pub timeout_ms: i64,
    pub insecure: bool,
    pub headers: Vec<(String, Template)>,
}
