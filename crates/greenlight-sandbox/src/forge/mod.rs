//! The forge face: the pull-request subset of one forge's REST API — GitHub, GitLab or
//! Gitea — served over the same bare repository the Argo CD stand-in syncs, so that a promotion
//! (or a watchdog's revert) that lands by pull request lands in real git. Clients push branches
//! with `git push` to the bare repository's path; the face reads branch tips, merges with git
//! plumbing (a merge commit, compare-and-swapped onto the base branch) and refuses direct pushes
//! to protected branches through a `pre-receive` hook, in the forge's words. Required status
//! checks are modelled simply: the protected branches share one list of required contexts, a
//! control route reports a context's state on a commit, and a pull request with auto-merge
//! armed merges as soon as every required context on its head is `success` — synchronously,
//! inside the request that made it so.
//!
//! Routes (each flavour answers in its own JSON shapes and error bodies; see
//! docs/sandbox-fidelity.md, *The forge face*, for what was checked against which source):
//!
//! | flavour | route | answer |
//! |---|---|---|
//! | GitHub | `POST /api/v3/repos/{owner}/{repo}/pulls` `{head,base,title,body}` | 201 pull request; 422 `Validation Failed` with `A pull request already exists for owner:head.` or `No commits between base and head` |
//! | GitHub | `GET /api/v3/repos/{owner}/{repo}/pulls/{n}` | 200 pull request: `state` `open`/`closed`, `merged`, `merged_at`, `merge_commit_sha`, `mergeable`, `mergeable_state`, `auto_merge` (object or null), `node_id`, `head.sha` |
//! | GitHub | `PATCH /api/v3/repos/{owner}/{repo}/pulls/{n}` `{state:"closed"}` | 200 pull request, closed unmerged |
//! | GitHub | `PUT /api/v3/repos/{owner}/{repo}/pulls/{n}/merge` `{sha?,merge_method?,commit_title?}` | 200 `{sha,merged:true,message}`; 405 `Pull Request is not mergeable` or `Required status check "c" is expected.`; 409 `Head branch was modified. Review and try the merge again.` |
//! | GitHub | `POST /api/graphql` `enablePullRequestAutoMerge(input:{pullRequestId,mergeMethod})` (input in `variables.input`) | 200 `{data:{enablePullRequestAutoMerge:{pullRequest:{…,autoMergeRequest}}}}`, or `errors` `Auto merge is not allowed for this repository` / `Pull request Pull request is in clean status` |
//! | GitLab | `POST /api/v4/projects/{id}/merge_requests` `{source_branch,target_branch,title,description}` | 201 merge request (`iid`, `web_url`, `state: opened`, `sha`); 409 `["Another open merge request already exists for this source branch: !iid"]` |
//! | GitLab | `GET /api/v4/projects/{id}/merge_requests/{iid}` | 200 merge request: `state` `opened`/`closed`/`merged`, `merge_commit_sha`, `merge_when_pipeline_succeeds`, `detailed_merge_status` |
//! | GitLab | `PUT /api/v4/projects/{id}/merge_requests/{iid}` `{state_event:"close"}` | 200 merge request, closed |
//! | GitLab | `PUT /api/v4/projects/{id}/merge_requests/{iid}/merge` `{sha?,squash?,auto_merge?\|merge_when_pipeline_succeeds?}` | 200 merge request (merged, or armed); 405 `405 Method Not Allowed`; 406 `Branch cannot be merged`; 409 `SHA does not match HEAD of source branch` |
//! | Gitea | `POST /api/v1/repos/{owner}/{repo}/pulls` `{head,base,title,body}` | 201 pull request; 409 `pull request already exists for these targets […]`; 422 `Invalid PullRequest: There are no changes between the head and the base` |
//! | Gitea | `GET /api/v1/repos/{owner}/{repo}/pulls/{index}` | 200 pull request: `state` `open`/`closed`, `merged`, `merge_commit_sha`, `mergeable`, `head.sha` |
//! | Gitea | `PATCH /api/v1/repos/{owner}/{repo}/pulls/{index}` `{state:"closed"}` | 201 pull request, closed; 412 when merged |
//! | Gitea | `POST /api/v1/repos/{owner}/{repo}/pulls/{index}/merge` `{Do,head_commit_id?,merge_when_checks_succeed?}` | 200 empty (merged); 201 empty (auto-merge scheduled); 405 not mergeable; 409 conflict or `head out of date` |
//!
//! GitHub's routes are also served without the `/api/v3` prefix (and GraphQL at `/graphql`),
//! as `api.github.com` serves them; [`Forge::api_url`] names the `/api/v3` form, as GitHub
//! Enterprise Server's. `{id}` is GitLab's project id (`1`) or its URL-encoded path
//! (`owner%2Fname`). Unauthenticated control routes (no token, like `/sandbox/v1/…`):
//!
//! | route | effect |
//! |---|---|
//! | `POST /sandbox/v1/forge/status?context=C&state=success\|failure\|error\|pending&(sha=SHA\|branch=B)` | reports C's state on the commit (a branch: its tip); armed pull requests whose required checks turn green merge before it answers `{"merged":[n…]}` |
//! | `POST /sandbox/v1/forge/merge?number=N` | a human merges N (a merge commit; required checks are not enforced, as an administrator's merge); 409 on a conflict |
//! | `POST /sandbox/v1/forge/close?number=N` | a human closes N unmerged |
//! | `GET /sandbox/v1/forge/pulls/N` | `{number,state,head,base,head_sha,merge_commit,auto_merge}`, flavour-neutral |
//! | `POST /sandbox/v1/forge/rate-limit?requests=N&retry_after=S` | the next N API requests are refused as the forge refuses a client over its rate limit, asking for S seconds: GitHub `403` `{"message":"You have exceeded a secondary rate limit…"}` with `retry-after: S`; GitLab `429` `Retry later` with `Retry-After: S` and `RateLimit-Remaining: 0`; Gitea (behind a rate-limiting proxy) `429` with `Retry-After: S` |
//!
//! Auth: every API route wants the token — GitHub `Authorization: Bearer <t>` or `token <t>`
//! (else 401 `Bad credentials`), GitLab `PRIVATE-TOKEN: <t>` or `Authorization: Bearer <t>`
//! (else 401 `401 Unauthorized`), Gitea `Authorization: token <t>` or `Bearer <t>` (else 401).
//! The token is compared, never logged or echoed.

mod board;
mod git;
mod gitea;
mod github;
mod gitlab;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use tokio::sync::{Mutex, watch};
use tokio::task::JoinHandle;

use crate::{LogSink, SandboxError};
use board::{Board, CheckState, Gate, MergeMethod, Rules, Status};
use git::{BareRepo, MergeOutcome};

/// Which forge the face imitates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ForgeKind {
    GitHub,
    GitLab,
    Gitea,
}

impl ForgeKind {
    pub const ALL: [ForgeKind; 3] = [ForgeKind::GitHub, ForgeKind::GitLab, ForgeKind::Gitea];

    pub fn as_str(self) -> &'static str {
        match self {
            ForgeKind::GitHub => "github",
            ForgeKind::GitLab => "gitlab",
            ForgeKind::Gitea => "gitea",
        }
    }

    /// The API's path under the forge's address, as its self-hosted editions serve it.
    pub fn api_prefix(self) -> &'static str {
        match self {
            ForgeKind::GitHub => "/api/v3",
            ForgeKind::GitLab => "/api/v4",
            ForgeKind::Gitea => "/api/v1",
        }
    }
}

impl std::fmt::Display for ForgeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ForgeKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        ForgeKind::ALL
            .into_iter()
            .find(|k| k.as_str() == wanted)
            .ok_or_else(|| format!("unknown forge {s:?} (accepted: github, gitlab, gitea)"))
    }
}

/// Everything the forge face needs. Build it with [`ForgeConfig::new`] and adjust the fields.
#[derive(Clone)]
pub struct ForgeConfig {
    pub kind: ForgeKind,
    /// The bare repository clients push to (the sandbox's `--repo`, a local path).
    pub repo: PathBuf,
    /// Where to listen; port 0 picks a free port.
    pub listen: SocketAddr,
    /// The token every API request must carry.
    pub token: String,
    /// `owner/name`, the repository's path on the forge (default `greenlight/deploy`).
    pub project: String,
    /// Branches that refuse direct pushes; pull requests into them need the required checks.
    pub protected: Vec<String>,
    /// Status contexts required on a pull request into a protected branch before it merges.
    pub required_checks: Vec<String>,
    /// Whether auto-merge may be armed (GitHub's repository setting `allow_auto_merge`).
    pub allow_auto_merge: bool,
    /// Where one line per pull request transition goes; `None` keeps the face silent.
    pub log: Option<LogSink>,
}

impl ForgeConfig {
    pub fn new(
        kind: ForgeKind,
        repo: impl Into<PathBuf>,
        listen: SocketAddr,
        token: impl Into<String>,
    ) -> ForgeConfig {
        ForgeConfig {
            kind,
            repo: repo.into(),
            listen,
            token: token.into(),
            project: "greenlight/deploy".into(),
            protected: Vec::new(),
            required_checks: Vec::new(),
            allow_auto_merge: true,
            log: Some(Arc::new(|line: &str| eprintln!("{line}"))),
        }
    }
}

impl std::fmt::Debug for ForgeConfig {
    // Hand-written so that the token never reaches a log through `{:?}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForgeConfig")
            .field("kind", &self.kind)
            .field("repo", &self.repo)
            .field("listen", &self.listen)
            .field("token", &"<redacted>")
            .field("project", &self.project)
            .field("protected", &self.protected)
            .field("required_checks", &self.required_checks)
            .field("allow_auto_merge", &self.allow_auto_merge)
            .finish_non_exhaustive()
    }
}

/// A pull request as the control API and [`Forge::pull`] show it, flavour-neutral.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullSummary {
    pub number: u64,
    /// `open`, `closed` or `merged`.
    pub state: &'static str,
    pub head: String,
    pub base: String,
    pub head_sha: Option<String>,
    pub merge_commit: Option<String>,
    pub auto_merge: bool,
}

/// The state shared by the routes.
pub(crate) struct Face {
    kind: ForgeKind,
    owner: String,
    name: String,
    token: String,
    repo: BareRepo,
    /// The web root (`http://addr`), for `html_url` and `web_url`.
    web: String,
    /// One lock over the board and every ref update the face makes: merges are serial.
    board: Mutex<Board>,
    log: Option<LogSink>,
    /// The API requests still to refuse as rate-limited, and the seconds each asks to wait.
    rate_limit: std::sync::Mutex<(u32, u64)>,
}

/// Why opening a pull request failed, flavour-neutral.
pub(crate) enum OpenError {
    /// A branch does not exist: which one (`head` or `base`) and its name.
    NoBranch(&'static str, String),
    SameBranch,
    NoCommits,
    Exists(u64),
    Invalid(String),
    Git(String),
}

/// Why a merge failed, flavour-neutral.
#[derive(Debug)]
pub(crate) enum MergeError {
    NotFound,
    NotOpen,
    HeadGone,
    HeadMoved,
    Checks(Gate),
    Conflict,
    BaseMoved,
    Git(String),
}

/// A pull request with what git says about it now.
pub(crate) struct PullView {
    pub pull: board::Pull,
    pub head_sha: Option<String>,
    pub base_sha: Option<String>,
    /// `None` while merged or closed, or when a branch is gone.
    pub mergeable: Option<bool>,
    pub gate: Gate,
}

fn now() -> SystemTime {
    SystemTime::now()
}

impl Face {
    fn say(&self, line: &str) {
        if let Some(log) = &self.log {
            log(&format!("forge ({}): {line}", self.kind));
        }
    }

    pub(crate) fn project_path(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }

    /// Is `owner/name` this forge's repository?
    pub(crate) fn is_repo(&self, owner: &str, name: &str) -> bool {
        owner == self.owner && name == self.name
    }

    pub(crate) fn token_is(&self, candidate: &str) -> bool {
        !candidate.is_empty() && candidate == self.token
    }

    pub(crate) async fn view(&self, number: u64) -> Result<Option<PullView>, String> {
        let board = self.board.lock().await;
        self.view_locked(&board, number).await
    }

    async fn view_locked(&self, board: &Board, number: u64) -> Result<Option<PullView>, String> {
        let Some(pull) = board.pull(number).cloned() else {
            return Ok(None);
        };
        let (head_sha, base_sha) = if pull.is_open() {
            (
                self.repo.tip(&pull.head).await?,
                self.repo.tip(&pull.base).await?,
            )
        } else {
            (pull.final_head.clone(), self.repo.tip(&pull.base).await?)
        };
        let mergeable = match (&pull.status, &head_sha, &base_sha) {
            (Status::Open, Some(h), Some(b)) => Some(self.repo.mergeable(b, h).await?),
            _ => None,
        };
        let gate = match &head_sha {
            Some(h) => board.gate(&pull.base, h),
            None => Gate::Waiting(String::new()),
        };
        Ok(Some(PullView {
            pull,
            head_sha,
            base_sha,
            mergeable,
            gate,
        }))
    }

    /// Opens a pull request from `head` into `base`. `same_base_only`: the duplicate check is
    /// per head and base (GitHub, Gitea) rather than per head (GitLab).
    pub(crate) async fn open(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        same_base_only: bool,
    ) -> Result<u64, OpenError> {
        for branch in [head, base] {
            git::check_branch(branch).map_err(OpenError::Invalid)?;
        }
        if head == base {
            return Err(OpenError::SameBranch);
        }
        let mut board = self.board.lock().await;
        let Some(head_sha) = self.repo.tip(head).await.map_err(OpenError::Git)? else {
            return Err(OpenError::NoBranch("head", head.to_string()));
        };
        let Some(base_sha) = self.repo.tip(base).await.map_err(OpenError::Git)? else {
            return Err(OpenError::NoBranch("base", base.to_string()));
        };
        if let Some(existing) = board.open_from(head, same_base_only.then_some(base)) {
            return Err(OpenError::Exists(existing.number));
        }
        if self
            .repo
            .commits_ahead(&base_sha, &head_sha)
            .await
            .map_err(OpenError::Git)?
            == 0
        {
            return Err(OpenError::NoCommits);
        }
        let number = board.open(head, base, title, body, now()).number;
        self.say(&format!("#{number} opened: {head} into {base}"));
        Ok(number)
    }

    fn merge_message(&self, pull: &board::Pull, method: MergeMethod) -> String {
        if method == MergeMethod::Squash {
            return format!("{} (#{})", pull.title, pull.number);
        }
        match self.kind {
            ForgeKind::GitHub => format!(
                "Merge pull request #{} from {}/{}\n\n{}",
                pull.number, self.owner, pull.head, pull.title
            ),
            ForgeKind::GitLab => format!(
                "Merge branch '{}' into '{}'\n\n{}\n\nSee merge request {}!{}",
                pull.head,
                pull.base,
                pull.title,
                self.project_path(),
                pull.number
            ),
            ForgeKind::Gitea => format!(
                "Merge pull request '{}' (#{}) from {} into {}",
                pull.title, pull.number, pull.head, pull.base
            ),
        }
    }

    /// Merges pull request `number` now. `expected_head`: refuse when the head moved;
    /// `enforce_checks`: the required checks must be green (a human's merge skips them).
    pub(crate) async fn merge(
        &self,
        number: u64,
        method: MergeMethod,
        expected_head: Option<&str>,
        enforce_checks: bool,
    ) -> Result<String, MergeError> {
        let mut board = self.board.lock().await;
        let commit = self
            .merge_locked(&mut board, number, method, expected_head, enforce_checks)
            .await?;
        self.run_due(&mut board).await;
        Ok(commit)
    }

    async fn merge_locked(
        &self,
        board: &mut Board,
        number: u64,
        method: MergeMethod,
        expected_head: Option<&str>,
        enforce_checks: bool,
    ) -> Result<String, MergeError> {
        let pull = board.pull(number).cloned().ok_or(MergeError::NotFound)?;
        if !pull.is_open() {
            return Err(MergeError::NotOpen);
        }
        let git = MergeError::Git;
        let head_sha = self
            .repo
            .tip(&pull.head)
            .await
            .map_err(git)?
            .ok_or(MergeError::HeadGone)?;
        if expected_head.is_some_and(|e| !e.is_empty() && e != head_sha) {
            return Err(MergeError::HeadMoved);
        }
        if enforce_checks {
            let gate = board.gate(&pull.base, &head_sha);
            if gate != Gate::Green {
                return Err(MergeError::Checks(gate));
            }
        }
        let base_sha = self
            .repo
            .tip(&pull.base)
            .await
            .map_err(MergeError::Git)?
            .ok_or_else(|| MergeError::Git(format!("base branch {} is gone", pull.base)))?;
        let message = self.merge_message(&pull, method);
        match self
            .repo
            .merge(&pull.base, &base_sha, &head_sha, method, &message)
            .await
            .map_err(MergeError::Git)?
        {
            MergeOutcome::Merged(commit) => {
                board.record_merge(number, &commit, &head_sha, now());
                self.say(&format!("#{number} merged into {} as {commit}", pull.base));
                Ok(commit)
            }
            MergeOutcome::Conflict => Err(MergeError::Conflict),
            MergeOutcome::BaseMoved => Err(MergeError::BaseMoved),
        }
    }

    /// Merges every armed pull request whose required checks are green; one that cannot
    /// merge (a conflict) stays open and armed, as on the forges.
    async fn run_due(&self, board: &mut Board) {
        loop {
            let mut tips = std::collections::BTreeMap::new();
            let heads: Vec<String> = (1..)
                .map_while(|n| board.pull(n))
                .filter(|p| p.is_open() && p.auto_merge.is_some())
                .map(|p| p.head.clone())
                .collect();
            for head in heads {
                if let Ok(Some(tip)) = self.repo.tip(&head).await {
                    tips.insert(head, tip);
                }
            }
            let due = board.due(|b| tips.get(b).cloned());
            let mut progressed = false;
            for (number, method) in due {
                match self.merge_locked(board, number, method, None, true).await {
                    Ok(_) => progressed = true,
                    Err(e) => self.say(&format!("#{number}: auto-merge could not merge: {e:?}")),
                }
            }
            if !progressed {
                return;
            }
        }
    }

    /// Arms auto-merge; when `merge_if_green` and nothing is left to wait for, merges at once
    /// instead (GitLab, Gitea). `Ok(Some(commit))`: merged now; `Ok(None)`: armed.
    pub(crate) async fn arm(
        &self,
        number: u64,
        method: MergeMethod,
        clean_refused: bool,
        merge_if_green: bool,
    ) -> Result<Option<String>, ArmError> {
        let mut board = self.board.lock().await;
        let pull = board.pull(number).cloned().ok_or(ArmError::NotFound)?;
        let head_sha = self
            .repo
            .tip(&pull.head)
            .await
            .map_err(ArmError::Git)?
            .ok_or(ArmError::Merge(MergeError::HeadGone))?;
        board
            .may_arm(number, &head_sha, clean_refused)
            .map_err(ArmError::Refused)?;
        if merge_if_green && board.gate(&pull.base, &head_sha) == Gate::Green {
            let commit = self
                .merge_locked(&mut board, number, method, None, true)
                .await
                .map_err(ArmError::Merge)?;
            return Ok(Some(commit));
        }
        board.arm(number, method, now());
        self.say(&format!("#{number}: auto-merge armed"));
        Ok(None)
    }

    /// Closes pull request `number` unmerged; `Err` when it is missing (`None`) or not open.
    pub(crate) async fn close(&self, number: u64) -> Result<(), Option<Status>> {
        let mut board = self.board.lock().await;
        let pull = board.pull(number).cloned().ok_or(None)?;
        let head = self.repo.tip(&pull.head).await.ok().flatten();
        if board.close(number, head, now()) {
            self.say(&format!("#{number} closed"));
            Ok(())
        } else {
            Err(Some(pull.status))
        }
    }

    /// Reports `context` as `state` on `commit`, then merges what that made due.
    pub(crate) async fn set_status(
        &self,
        commit: &str,
        context: &str,
        state: CheckState,
    ) -> Vec<u64> {
        let mut board = self.board.lock().await;
        board.set_status(commit, context, state);
        self.say(&format!("{context} is {} on {commit}", state.as_str()));
        let before: Vec<u64> = merged_numbers(&board);
        self.run_due(&mut board).await;
        merged_numbers(&board)
            .into_iter()
            .filter(|n| !before.contains(n))
            .collect()
    }
}

fn merged_numbers(board: &Board) -> Vec<u64> {
    (1..)
        .map_while(|n| board.pull(n))
        .filter(|p| matches!(p.status, Status::Merged { .. }))
        .map(|p| p.number)
        .collect()
}

/// Why arming auto-merge failed.
#[derive(Debug)]
pub(crate) enum ArmError {
    NotFound,
    Refused(board::ArmRefusal),
    Merge(MergeError),
    Git(String),
}

/// A running forge face. Dropping it stops it without waiting; [`Forge::shutdown`] waits.
pub struct Forge {
    addr: SocketAddr,
    face: Arc<Face>,
    shutdown: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl Forge {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn kind(&self) -> ForgeKind {
        self.face.kind
    }

    /// `http://<addr>`, the forge's web root.
    pub fn url(&self) -> String {
        self.face.web.clone()
    }

    /// The API base a client is given: `http://<addr>/api/v3` (GitHub Enterprise Server's
    /// form), `/api/v4` (GitLab), `/api/v1` (Gitea).
    pub fn api_url(&self) -> String {
        format!("{}{}", self.face.web, self.face.kind.api_prefix())
    }

    /// `owner/name`.
    pub fn project(&self) -> String {
        self.face.project_path()
    }

    /// Reports `context` as `state` (`success`, `failure`, `error`, `pending`) on `commit`,
    /// as `POST /sandbox/v1/forge/status` does; returns the pull requests it made merge.
    pub async fn set_status(
        &self,
        commit: &str,
        context: &str,
        state: &str,
    ) -> Result<Vec<u64>, String> {
        let state = CheckState::parse(state)?;
        Ok(self.face.set_status(commit, context, state).await)
    }

    /// The next `requests` API requests are refused as rate-limited, each asking to wait
    /// `retry_after_secs` (as `POST /sandbox/v1/forge/rate-limit` does).
    pub fn rate_limit(&self, requests: u32, retry_after_secs: u64) {
        *self
            .face
            .rate_limit
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = (requests, retry_after_secs);
    }

    /// A human merges pull request `number` (required checks not enforced).
    pub async fn human_merge(&self, number: u64) -> Result<String, String> {
        self.face
            .merge(number, MergeMethod::Merge, None, false)
            .await
            .map_err(|e| format!("#{number} cannot be merged: {e:?}"))
    }

    /// A human closes pull request `number` unmerged.
    pub async fn human_close(&self, number: u64) -> Result<(), String> {
        self.face
            .close(number)
            .await
            .map_err(|e| format!("#{number} cannot be closed: {e:?}"))
    }

    /// Pull request `number` as the control API shows it.
    pub async fn pull(&self, number: u64) -> Option<PullSummary> {
        let view = self.face.view(number).await.ok()??;
        Some(summary(&view))
    }

    /// Stops the server, waits for it, and removes the forge's `pre-receive` hook.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        let _ = self.face.repo.remove_hook();
    }
}

impl Drop for Forge {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        if self.task.is_some() {
            let _ = self.face.repo.remove_hook();
        }
    }
}

fn summary(view: &PullView) -> PullSummary {
    let (state, merge_commit) = match &view.pull.status {
        Status::Open => ("open", None),
        Status::Closed { .. } => ("closed", None),
        Status::Merged { commit, .. } => ("merged", Some(commit.clone())),
    };
    PullSummary {
        number: view.pull.number,
        state,
        head: view.pull.head.clone(),
        base: view.pull.base.clone(),
        head_sha: view.head_sha.clone(),
        merge_commit,
        auto_merge: view.pull.auto_merge.is_some(),
    }
}

/// Starts the forge face: checks the configuration, installs the `pre-receive` hook, listens.
/// Must be called inside a Tokio runtime.
pub async fn serve(config: ForgeConfig) -> Result<Forge, SandboxError> {
    if config.token.trim().is_empty() {
        return Err(SandboxError::config(
            "--forge-token-file",
            "the token is empty",
        ));
    }
    let Some((owner, name)) = config
        .project
        .split_once('/')
        .filter(|(o, n)| valid_segment(o) && valid_segment(n))
    else {
        return Err(SandboxError::config(
            "--forge-project",
            format!("{:?} is not <owner>/<name>", config.project),
        ));
    };
    for (flag, names) in [
        ("--protect", &config.protected),
        ("--require-check", &config.required_checks),
    ] {
        if let Some(bad) = names.iter().find(|n| n.trim().is_empty()) {
            return Err(SandboxError::config(flag, format!("{bad:?} is empty")));
        }
    }
    for branch in &config.protected {
        git::check_branch(branch).map_err(|e| SandboxError::config("--protect", e))?;
    }
    if !config.required_checks.is_empty() && config.protected.is_empty() {
        return Err(SandboxError::config(
            "--require-check",
            "required checks apply to pull requests into protected branches: give --protect too",
        ));
    }
    let repo = BareRepo::open(&config.repo)
        .await
        .map_err(|e| SandboxError::config("--repo", e))?;
    repo.install_hook(config.kind, &config.protected)
        .map_err(|e| SandboxError::config("--protect", e))?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| {
            SandboxError::config(
                "--forge-listen",
                format!("cannot listen on {}: {e}", config.listen),
            )
        })?;
    let addr = listener
        .local_addr()
        .map_err(|e| SandboxError::Runtime(format!("listening socket: {e}")))?;
    let face = Arc::new(Face {
        kind: config.kind,
        owner: owner.to_string(),
        name: name.to_string(),
        token: config.token.trim().to_string(),
        repo,
        web: format!("http://{addr}"),
        board: Mutex::new(Board::new(Rules {
            protected: config.protected.iter().cloned().collect(),
            required_checks: config.required_checks.clone(),
            allow_auto_merge: config.allow_auto_merge,
        })),
        log: config.log.clone(),
        rate_limit: std::sync::Mutex::new((0, 0)),
    });
    let api = match config.kind {
        ForgeKind::GitHub => github::router(face.clone()),
        ForgeKind::GitLab => gitlab::router(face.clone()),
        ForgeKind::Gitea => gitea::router(face.clone()),
    };
    let api = api.layer(axum::middleware::from_fn_with_state(
        face.clone(),
        rate_limited,
    ));
    let app = api.merge(control_router(face.clone()));
    let (shutdown, mut stop) = watch::channel(false);
    let task = tokio::spawn(async move {
        let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
            while !*stop.borrow_and_update() {
                if stop.changed().await.is_err() {
                    return;
                }
            }
        });
        let _ = serve.await;
    });
    Ok(Forge {
        addr,
        face,
        shutdown,
        task: Some(task),
    })
}

fn valid_segment(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

type Shared = State<Arc<Face>>;

fn control_router(face: Arc<Face>) -> Router {
    Router::new()
        .route("/sandbox/v1/forge/status", post(control_status))
        .route("/sandbox/v1/forge/merge", post(control_merge))
        .route("/sandbox/v1/forge/close", post(control_close))
        .route("/sandbox/v1/forge/pulls/{number}", get(control_pull))
        .route("/sandbox/v1/forge/rate-limit", post(control_rate_limit))
        .with_state(face)
}

async fn control_rate_limit(
    State(face): Shared,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Response {
    let number = |name: &str| q.get(name).and_then(|n| n.trim().parse::<u64>().ok());
    let (Some(requests), Some(secs)) = (number("requests"), number("retry_after")) else {
        return control_error(
            StatusCode::BAD_REQUEST,
            "give requests=<whole number> and retry_after=<seconds>",
        );
    };
    let requests = u32::try_from(requests).unwrap_or(u32::MAX);
    *face.rate_limit.lock().unwrap_or_else(|p| p.into_inner()) = (requests, secs);
    axum::Json(json!({"requests": requests, "retry_after": secs})).into_response()
}

/// Refuses an API request as the forge refuses a client over its rate limit, while the control
/// route's count lasts (GitHub: `403` or `429`, `retry-after` when it says how long, a message
/// naming the secondary rate limit; GitLab: `429`, `Retry-After`, `RateLimit-*` headers, the
/// body `Retry later`; Gitea has none of its own: a proxy's `429` with `Retry-After`).
async fn rate_limited(
    State(face): Shared,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let secs = {
        let mut limit = face.rate_limit.lock().unwrap_or_else(|p| p.into_inner());
        if limit.0 == 0 {
            None
        } else {
            limit.0 -= 1;
            Some(limit.1)
        }
    };
    let Some(secs) = secs else {
        return next.run(request).await;
    };
    let retry = secs.to_string();
    match face.kind {
        ForgeKind::GitHub => (
            StatusCode::FORBIDDEN,
            [("retry-after", retry.as_str()), ("x-ratelimit-remaining", "4000")],
            axum::Json(json!({
                "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID.",
                "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
            })),
        )
            .into_response(),
        ForgeKind::GitLab => (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", retry.as_str()), ("ratelimit-remaining", "0")],
            "Retry later\n",
        )
            .into_response(),
        ForgeKind::Gitea => (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", retry.as_str())],
            "Too Many Requests\n",
        )
            .into_response(),
    }
}

fn control_error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(json!({"message": message.into()}))).into_response()
}

fn number_param(q: &std::collections::HashMap<String, String>) -> Result<u64, Box<Response>> {
    q.get("number")
        .and_then(|n| n.trim().parse::<u64>().ok())
        .ok_or_else(|| {
            Box::new(control_error(
                StatusCode::BAD_REQUEST,
                "number: expected a whole number",
            ))
        })
}

async fn control_status(
    State(face): Shared,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Response {
    let Some(context) = q.get("context").filter(|c| !c.trim().is_empty()) else {
        return control_error(StatusCode::BAD_REQUEST, "context: missing");
    };
    let state = match q.get("state").map(|s| CheckState::parse(s)) {
        Some(Ok(s)) => s,
        Some(Err(e)) => return control_error(StatusCode::BAD_REQUEST, format!("state: {e}")),
        None => return control_error(StatusCode::BAD_REQUEST, "state: missing"),
    };
    let commit = match (q.get("sha"), q.get("branch")) {
        (Some(sha), None) if sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit()) => {
            sha.to_ascii_lowercase()
        }
        (None, Some(branch)) => {
            if let Err(e) = git::check_branch(branch) {
                return control_error(StatusCode::BAD_REQUEST, format!("branch: {e}"));
            }
            match face.repo.tip(branch).await {
                Ok(Some(tip)) => tip,
                Ok(None) => {
                    return control_error(
                        StatusCode::NOT_FOUND,
                        format!("branch: {branch:?} does not exist"),
                    );
                }
                Err(e) => return control_error(StatusCode::INTERNAL_SERVER_ERROR, e),
            }
        }
        _ => {
            return control_error(
                StatusCode::BAD_REQUEST,
                "give exactly one of sha=<40 hex digits> or branch=<name>",
            );
        }
    };
    let merged = face.set_status(&commit, context, state).await;
    axum::Json(
        json!({"sha": commit, "context": context, "state": state.as_str(), "merged": merged}),
    )
    .into_response()
}

async fn control_merge(
    State(face): Shared,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Response {
    let number = match number_param(&q) {
        Ok(n) => n,
        Err(r) => return *r,
    };
    match face.merge(number, MergeMethod::Merge, None, false).await {
        Ok(commit) => {
            axum::Json(json!({"number": number, "merged": true, "sha": commit})).into_response()
        }
        Err(MergeError::NotFound) => control_error(StatusCode::NOT_FOUND, format!("no #{number}")),
        Err(e) => control_error(StatusCode::CONFLICT, format!("#{number}: {e:?}")),
    }
}

async fn control_close(
    State(face): Shared,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Response {
    let number = match number_param(&q) {
        Ok(n) => n,
        Err(r) => return *r,
    };
    match face.close(number).await {
        Ok(()) => axum::Json(json!({"number": number, "state": "closed"})).into_response(),
        Err(None) => control_error(StatusCode::NOT_FOUND, format!("no #{number}")),
        Err(Some(_)) => control_error(StatusCode::CONFLICT, format!("#{number} is not open")),
    }
}

async fn control_pull(State(face): Shared, Path(number): Path<u64>) -> Response {
    match face.view(number).await {
        Ok(Some(view)) => {
            let s = summary(&view);
            axum::Json(json!({
                "number": s.number, "state": s.state, "head": s.head, "base": s.base,
                "head_sha": s.head_sha, "merge_commit": s.merge_commit, "auto_merge": s.auto_merge,
            }))
            .into_response()
        }
        Ok(None) => control_error(StatusCode::NOT_FOUND, format!("no #{number}")),
        Err(e) => control_error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

/// The token from `Authorization: <scheme> <token>` when the scheme is one of `schemes`
/// (compared case-insensitively).
pub(crate) fn authorization_token<'a>(
    headers: &'a axum::http::HeaderMap,
    schemes: &[&str],
) -> Option<&'a str> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    schemes
        .iter()
        .any(|s| s.eq_ignore_ascii_case(scheme))
        .then(|| token.trim())
}

/// A JSON body from a request, or why it is not one.
pub(crate) fn json_body(bytes: &[u8]) -> Result<serde_json::Value, String> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(json!({}));
    }
    serde_json::from_slice(bytes).map_err(|e| format!("Problems parsing JSON: {e}"))
}

pub(crate) fn rfc3339(t: SystemTime) -> String {
    crate::timefmt::rfc3339(t)
}
