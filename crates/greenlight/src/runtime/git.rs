//! The repository and revert seams over greenlight's own clone (`greenlight-git`). Every call
//! blocks on a git subprocess; the runtime runs them as jobs, never on its loop.

use super::seams::{Repository, RevertExecutor};
use anyhow::Result;
use greenlight_core::commit::CommitId;
use greenlight_core::judge::{CommitInfo, LaterCommit, RevertOutcome, RevertRequest};
use std::sync::Arc;

/// The watchdog's clone, and who signs its reverts.
pub struct GitRepository {
    repo: Arc<greenlight_git::Repo>,
    author_name: String,
    author_email: String,
    /// `--revert-via pull-request`: reverts are proposed on this forge, not pushed.
    pull_requests: Option<Arc<PullRequestReverts>>,
}

/// How reverts are proposed as pull requests (`docs/verdicts.md#revert-by-pull-request`).
pub struct PullRequestReverts {
    pub client: greenlight_forge::ForgeClient,
    /// Arm the forge's auto-merge on each request (it merges once the branch's checks pass).
    pub auto_merge: bool,
}

impl GitRepository {
    pub fn new(repo: greenlight_git::Repo, author_name: &str, author_email: &str) -> GitRepository {
        GitRepository {
            repo: Arc::new(repo),
            author_name: author_name.to_string(),
            author_email: author_email.to_string(),
            pull_requests: None,
        }
    }

    /// Reverts proposed as pull requests on a forge.
    pub fn proposing(mut self, pr: Arc<PullRequestReverts>) -> GitRepository {
        self.pull_requests = Some(pr);
        self
    }

    /// The revert, on a branch of its own, proposed as a pull request into `branch`, with the
    /// forge's auto-merge armed when configured: `Proposed`, or `Merged` when the forge merged
    /// it at once. A request that cannot be opened is a failed revert (the branch stays: a
    /// human may open it).
    fn propose(
        &self,
        pr: &PullRequestReverts,
        r: &RevertRequest,
        head: &str,
        revert: &str,
        branch: &str,
    ) -> RevertOutcome {
        use greenlight_forge::{AutoMerge, ForgeError};
        let revert_id = match CommitId::parse(revert) {
            Ok(c) => c,
            Err(e) => {
                return RevertOutcome::Failed {
                    message: format!("git named the revert on {head} as no commit id: {e}"),
                };
            }
        };
        let message = match self.repo.commit(revert) {
            Ok(c) => c.message,
            Err(e) => {
                return RevertOutcome::Failed {
                    message: format!("cannot read the revert {revert} on {head}: {e}"),
                };
            }
        };
        let (title, body) = match message.split_once('\n') {
            Some((t, rest)) => (t.to_string(), rest.trim_start_matches('\n').to_string()),
            None => (message.clone(), String::new()),
        };
        let body = format!(
            "{body}\n---\nProposed by greenlight's watchdog: app {} failed after commit {} and the judge found the evidence that this commit caused it (the reason above). Merging this request reverts the commit; the watch ends REVERTED only then. If a newer commit changes the app first, greenlight closes this request instead.\n",
            r.app, r.commit
        );
        let forge = format!("{} {}", pr.client.kind(), pr.client.project());
        let request = match block_on(pr.client.open(head, branch, &title, &body)) {
            Ok(request) => request,
            Err(e) => {
                return RevertOutcome::Failed {
                    message: format!(
                        "the revert {} is on branch {head}, but {forge} did not open its pull request: {e}; nothing was reverted",
                        revert_id.short()
                    ),
                };
            }
        };
        let mut proposal = greenlight_core::watch::RevertProposal {
            url: request.url.clone(),
            number: request.number,
            revert: revert_id,
            head: head.to_string(),
            auto_merge: false,
            superseded_by: Vec::new(),
            withdrawn_for: None,
        };
        let mut note = None;
        if pr.auto_merge {
            match block_on(pr.client.enable_auto_merge(&request)) {
                Ok(AutoMerge::Armed) => proposal.auto_merge = true,
                Ok(AutoMerge::Merged { merge_commit }) => {
                    return merged(&merge_commit, &request.url);
                }
                // Nothing to wait for (GitHub refuses to arm a request that can merge now):
                // auto-merge means merge once mergeable, and it is.
                Err(ForgeError::AlreadyMergeable { .. }) => {
                    match block_on(pr.client.merge(&request)) {
                        Ok(merge_commit) => return merged(&merge_commit, &request.url),
                        Err(e) => note = Some(format!("{forge} would not merge it: {e}")),
                    }
                }
                Err(e) => note = Some(format!("{forge} refused auto-merge: {e}")),
            }
        }
        RevertOutcome::Proposed { proposal, note }
    }

    fn pull_request(p: &greenlight_core::watch::RevertProposal) -> greenlight_forge::PullRequest {
        greenlight_forge::PullRequest {
            number: p.number,
            url: p.url.clone(),
            head_sha: p.revert.to_string(),
        }
    }

    pub fn remote_default_branch(&self) -> Result<String> {
        Ok(self.repo.remote_default_branch()?)
    }

    /// The paths a revert of `commit` leaves as they are: its `Greenlight-Revert-Keeps`
    /// trailers (a promotion commit names its candidates' directory, so that undoing the
    /// promotion does not bring back the candidate and the lock it removed).
    fn revert_keeps(&self, commit: &str) -> Result<Vec<String>> {
        let data = self.repo.commit(commit)?;
        Ok(greenlight_gate::trailers::revert_keeps_of(&data.message))
    }
}

impl Repository for GitRepository {
    fn fetch(&self, branch: &str) -> Result<String> {
        Ok(self.repo.fetch(branch)?)
    }

    fn commits_between(&self, from_exclusive: Option<&str>, tip: &str) -> Result<Vec<CommitInfo>> {
        let shas = match from_exclusive {
            Some(from) if from == tip => return Ok(Vec::new()),
            Some(from) => self.repo.new_commits(Some(from), tip)?,
            None => vec![tip.to_string()],
        };
        let mut commits = Vec::with_capacity(shas.len());
        for sha in shas {
            let data = self.repo.commit(&sha)?;
            // A merge's mainline is the branch's side: the parent that is the tip greenlight
            // recorded before this fetch, else the one parent that contains it; none, or more
            // than one: it cannot tell (`docs/verdicts.md#evidence`).
            let mut mainline = None;
            if let (true, Some(from)) = (data.parents.len() > 1, from_exclusive) {
                if let Some(p) = data.parents.iter().find(|p| p.eq_ignore_ascii_case(from)) {
                    mainline = Some(CommitId::parse(p)?);
                } else {
                    let mut sides = Vec::new();
                    for p in &data.parents {
                        if self.repo.is_ancestor(from, p)? == Some(true) {
                            sides.push(p);
                        }
                    }
                    if let [only] = sides.as_slice() {
                        mainline = Some(CommitId::parse(only)?);
                    }
                }
            }
            // What a merge changed is what it brought into the branch: against its mainline.
            let changed_paths = match &mainline {
                Some(m) => self.repo.changed_paths_against(&sha, m.as_str())?,
                None => self.repo.changed_paths(&sha)?,
            };
            commits.push(CommitInfo {
                changed_paths: changed_paths.into(),
                sha: CommitId::parse(&data.sha)?,
                parents: data
                    .parents
                    .iter()
                    .map(|p| CommitId::parse(p))
                    .collect::<Result<_, _>>()?,
                subject: data.subject,
                message: data.message,
                mainline,
            });
        }
        Ok(commits)
    }

    fn is_ancestor(&self, commit: &str, revision: &str) -> Result<Option<bool>> {
        Ok(self.repo.is_ancestor(commit, revision)?)
    }

    fn resolve(&self, rev: &str) -> Result<Option<String>> {
        Ok(self.repo.resolve(rev)?)
    }
}

impl RevertExecutor for GitRepository {
    fn revert(&self, r: &RevertRequest, branch: &str) -> RevertOutcome {
        let keep = match self.revert_keeps(r.commit.as_ref()) {
            Ok(k) => k,
            Err(e) => {
                return RevertOutcome::Failed {
                    message: format!("cannot read the commit's trailers: {e:#}"),
                };
            }
        };
        let req = greenlight_git::RevertRequest {
            commit: r.commit.to_string(),
            branch: branch.to_string(),
            reason: r.reason.clone(),
            author_name: self.author_name.clone(),
            author_email: self.author_email.clone(),
            max_attempts: 5,
            adopt_any: r.reissued,
            keep,
            hold_on: Some(r.hold_on.clone()),
            mainline: r.mainline.as_ref().map(ToString::to_string),
            hold_after: r.known_tip.as_ref().map(ToString::to_string),
        };
        let landed = match &self.pull_requests {
            None => self.repo.revert_and_push(&req),
            Some(_) => {
                let stamp = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_millis();
                let short: String = r.commit.as_str().chars().take(12).collect();
                let head = format!("greenlight/revert/{short}-{stamp}");
                match self.repo.revert_to_branch(&req, &head) {
                    Ok(greenlight_git::RevertOutcome::Pushed { revert, .. }) => {
                        let pr = self.pull_requests.as_ref().expect("matched Some");
                        return self.propose(pr, r, &head, &revert, branch);
                    }
                    other => other,
                }
            }
        };
        match landed {
            Ok(greenlight_git::RevertOutcome::Pushed { revert, .. }) => {
                RevertOutcome::pushed(&revert)
            }
            Ok(greenlight_git::RevertOutcome::Adopted { revert }) => {
                RevertOutcome::adopted(&revert)
            }
            Ok(greenlight_git::RevertOutcome::Conflict { message, .. }) => RevertOutcome::Failed {
                message: format!("{}{message}", crate::metrics::CONFLICT),
            },
            Ok(greenlight_git::RevertOutcome::NothingToRevert { message }) => {
                RevertOutcome::Failed {
                    message: format!("{}{message}", crate::metrics::NOTHING_TO_REVERT),
                }
            }
            Ok(greenlight_git::RevertOutcome::Superseded { newer }) => {
                let mut later = Vec::new();
                for (sha, changed_paths) in newer {
                    match CommitId::parse(&sha) {
                        Ok(sha) => later.push(LaterCommit {
                            sha,
                            changed_paths: changed_paths.into(),
                        }),
                        Err(e) => {
                            return RevertOutcome::Failed {
                                message: format!(
                                    "a newer commit stopped the revert, but git named it as no commit id: {e}"
                                ),
                            };
                        }
                    }
                }
                RevertOutcome::Superseded { newer: later }
            }
            Err(e) => RevertOutcome::Failed {
                message: format!("{e}"),
            },
        }
    }

    fn adopt_only(&self, commit: &str, branch: &str) -> Result<Option<String>> {
        let tip = self.repo.fetch(branch)?;
        // Only a revert decided before a restart comes here: any revert of the commit is the
        // one it may have pushed, even if a human has reverted it since.
        Ok(self.repo.find_first_revert_of(commit, commit, &tip)?)
    }

    fn follow(
        &self,
        proposal: &greenlight_core::watch::RevertProposal,
        commit: &str,
        branch: &str,
    ) -> Result<Option<RevertOutcome>> {
        let Some(pr) = &self.pull_requests else {
            anyhow::bail!(
                "{} was proposed, but reverts are pushed now (--revert-via)",
                proposal.url
            );
        };
        let state = block_on(pr.client.get(&Self::pull_request(proposal)))?;
        Ok(match state {
            greenlight_forge::PrState::Open { .. } => None,
            greenlight_forge::PrState::Merged { merge_commit } => {
                Some(merged(&merge_commit, &proposal.url))
            }
            // Closed: the commit may have been reverted on the branch another way (a human
            // cherry-picked the revert): then it is reverted all the same.
            greenlight_forge::PrState::Closed => {
                let tip = self.repo.fetch(branch)?;
                match self.repo.find_revert_of(commit, commit, &tip)? {
                    Some(revert) => Some(RevertOutcome::adopted(&revert)),
                    None => Some(RevertOutcome::Closed {
                        url: proposal.url.clone(),
                    }),
                }
            }
        })
    }

    fn withdraw(
        &self,
        proposal: &greenlight_core::watch::RevertProposal,
        _why: &str,
    ) -> Result<RevertOutcome> {
        let Some(pr) = &self.pull_requests else {
            anyhow::bail!(
                "{} was proposed, but reverts are pushed now (--revert-via)",
                proposal.url
            );
        };
        let request = Self::pull_request(proposal);
        match block_on(pr.client.close(&request)) {
            Ok(()) => Ok(RevertOutcome::Closed {
                url: proposal.url.clone(),
            }),
            Err(greenlight_forge::ForgeError::AlreadyMerged { .. }) => {
                match block_on(pr.client.get(&request))? {
                    greenlight_forge::PrState::Merged { merge_commit } => {
                        Ok(merged(&merge_commit, &proposal.url))
                    }
                    other => anyhow::bail!(
                        "{} said the request merged, then that it is {other:?}",
                        pr.client.kind()
                    ),
                }
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Waits for a forge call: the executor runs as a blocking job inside the runtime.
fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Handle::current().block_on(f)
}

/// The forge merged a revert's request as `merge_commit`.
fn merged(merge_commit: &str, url: &str) -> RevertOutcome {
    match CommitId::parse(merge_commit) {
        Ok(revert) => RevertOutcome::Merged {
            revert,
            url: url.to_string(),
        },
        Err(e) => RevertOutcome::Failed {
            message: format!("the forge reported the merge of {url} as {e}"),
        },
    }
}
