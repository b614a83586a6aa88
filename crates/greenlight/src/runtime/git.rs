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
}

impl GitRepository {
    pub fn new(repo: greenlight_git::Repo, author_name: &str, author_email: &str) -> GitRepository {
        GitRepository {
            repo: Arc::new(repo),
            author_name: author_name.to_string(),
            author_email: author_email.to_string(),
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
        let mut commits = Vec::new();
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
                changed_paths,
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
        match self.repo.revert_and_push(&req) {
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
                        Ok(sha) => later.push(LaterCommit { sha, changed_paths }),
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
}
