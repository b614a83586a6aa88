//! The runtime's seams: the three things the watchdog's loop talks to, each behind a narrow
//! interface so that the loop can be driven in-process by fakes and a test clock, and so that a
//! second Application source (the Kubernetes API) plugs in beside Argo CD's REST API.
//!
//! - [`AppSource`]: where Applications come from. It does its IO in tasks of its own and sends
//!   [`SourceMsg`]s, in order, on the channel the runtime gave it.
//! - [`Repository`]: the watched repository (fetch, new commits, changed paths, ancestry).
//! - [`RevertExecutor`]: pushes a revert, or finds the one already on the branch.
//!
//! Repository and revert calls block (git is a subprocess); the runtime runs them as jobs, one
//! at a time in the watchdog's clone, never on the loop.

use crate::clock::Clock;
use crate::output::Output;
use anyhow::Result;
use greenlight_core::directive::AppRef;
use greenlight_core::judge::{CommitInfo, RevertOutcome, RevertRequest};
use greenlight_core::watch::RevertProposal;
use std::sync::Arc;
use tokio::sync::mpsc;

pub use greenlight_core::source::SourceMsg;

/// Where Applications come from. Requests return at once; their answers arrive as messages.
pub trait AppSource: Send {
    /// Keep a change stream open (reconnecting on its own) that delivers every change.
    fn start_stream(&mut self);
    /// The apps under watch: only theirs are completed and delivered as observations.
    fn set_watched(&mut self, apps: Vec<AppRef>);
    /// A complete listing: the watched apps' observations — a source may leave out one its
    /// stream delivered in its current connection and the listing shows unchanged since, while
    /// the stream was heard from within `--stale-after` —, then `Listed` with this ticket.
    fn request_listing(&mut self, ticket: u64);
    /// Fresh reads of `apps`, answered as `Observed` or `Absent` with this ticket.
    fn request_read(&mut self, ticket: u64, apps: Vec<AppRef>);
    /// How long the stream may stay silent and still vouch (`--stale-after`), told once at
    /// start: a source whose listing can skip what its stream showed needs it.
    fn set_stale_after(&mut self, _stale_after_ms: i64) {}
    /// Who the runtime's lines about the stream name (`Argo CD application stream connected`).
    fn name(&self) -> &str {
        "the source"
    }
    /// What the runtime says at start about this source with `stale_after_ms` (a token it
    /// would ignore, a heartbeat that cannot vouch within `--stale-after`).
    fn startup_notes(&self, _stale_after_ms: i64) -> Vec<StartupNote> {
        Vec::new()
    }
}

/// A source and the channel its messages arrive on: what the command that chose the source
/// hands the runtime (`crate::argocd::source` for Argo CD's REST API).
pub struct Source {
    pub app: Box<dyn AppSource>,
    pub deliveries: mpsc::Receiver<SourceMsg>,
}

/// What the runtime says at start about its source ([`AppSource::startup_notes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartupNote {
    /// Said at every start.
    Warn(String),
    /// Said when the runtime announces itself (`watching <repo> <branch> from <sha>`).
    Info(String),
}

/// The watched repository, as the watchdog's clone sees it.
pub trait Repository: Send + Sync {
    /// Fetch `branch`; the remote's tip.
    fn fetch(&self, branch: &str) -> Result<String>;
    /// The commits after `from_exclusive` up to `tip`, oldest first (topological order), each
    /// with its message and changed paths.
    fn commits_between(&self, from_exclusive: Option<&str>, tip: &str) -> Result<Vec<CommitInfo>>;
    /// Whether `commit` is `revision` or an ancestor of it; `None` when an object is unknown.
    fn is_ancestor(&self, commit: &str, revision: &str) -> Result<Option<bool>>;
    /// A revision's full sha, `None` when it names no commit.
    fn resolve(&self, rev: &str) -> Result<Option<String>>;
}

/// Pushes reverts.
pub trait RevertExecutor: Send + Sync {
    /// Revert `req.commit` on `branch` and push fast-forward, or adopt a revert already there.
    fn revert(&self, req: &RevertRequest, branch: &str) -> RevertOutcome;
    /// Never push: adopt a revert of `commit` already on `branch`, if there is one (the first,
    /// in effect or not: this is a revert decided before a restart).
    fn adopt_only(&self, commit: &str, branch: &str) -> Result<Option<String>>;
    /// Where a revert's pull request stands: `None` while it is open; merged, closed — or,
    /// closed while a revert of `commit` reached `branch` some other way, adopted.
    fn follow(
        &self,
        proposal: &RevertProposal,
        _commit: &str,
        _branch: &str,
    ) -> Result<Option<RevertOutcome>> {
        anyhow::bail!("{} was not proposed by this executor", proposal.url)
    }
    /// Close a revert's pull request (`why`, for the log); how it ended: closed, or merged
    /// before the close came.
    fn withdraw(&self, proposal: &RevertProposal, _why: &str) -> Result<RevertOutcome> {
        anyhow::bail!("{} was not proposed by this executor", proposal.url)
    }
}

/// How blocking jobs run: on tokio's blocking pool (the real thing), or inline in their task
/// (fakes that never block, so that a paused test clock only moves when everything waits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jobs {
    Blocking,
    Inline,
}

/// What the loop holds: the seams, the clock and the voice.
pub struct Context {
    pub source: Box<dyn AppSource>,
    pub repo: Arc<dyn Repository>,
    pub reverter: Arc<dyn RevertExecutor>,
    pub clock: Arc<dyn Clock>,
    pub out: Output,
    pub jobs: Jobs,
}
