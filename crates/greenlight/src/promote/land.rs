//! How a promotion lands on the branch: the seam between the gate's decision to promote
//! (`Effect::CommitPromotion`) and git. A direct push ([`DirectPush`]): one commit on the
//! branch's tip, fast-forward, guarded against a change of the live manifest since the run read
//! it; or a pull request ([`PullRequest`], `promotion: {via: pull-request}`): the same commit,
//! built and guarded the same way, pushed to a branch of its own, and a pull (merge) request
//! from it whose body is the commit's message — each check's result, the candidate's verdict —
//! with the forge's auto-merge armed when configured; [`Land::follow`] says where it stands.
//!
//! Must never: force a push; land a change whose guarded paths changed since the run read them;
//! merge what the forge would not (auto-merge is the forge's, waiting for its required checks;
//! a direct merge only when the forge says there is nothing to wait for).

use anyhow::{Context, Result, anyhow};
use greenlight_forge::{AutoMerge, ForgeClient, ForgeError, PrState};
use greenlight_git::{ChangeOutcome, ChangeRequest, Repo};

/// Where a promotion ended up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Landed {
    /// The promotion commit is on the branch.
    Committed { commit: String },
    /// The branch already held exactly these changes: nothing new was committed.
    AlreadyThere { tip: String },
    /// A guarded path (the live manifest) changed on the branch since the run read it: nothing
    /// landed; `tip` is the branch's tip that changed it.
    Guarded { tip: String },
    /// A pull request proposes the promotion; it has not merged.
    Proposed(Proposal),
    /// A pull request carried the promotion and merged at once (auto-merge with nothing to
    /// wait for) as `commit`.
    Merged {
        commit: String,
        number: u64,
        url: String,
    },
}

/// An open pull request that carries the promotion commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proposal {
    pub number: u64,
    pub url: String,
    /// The promotion commit, the request's head.
    pub commit: String,
    /// Whether the forge's auto-merge is armed on it.
    pub auto_merge: bool,
    /// Why auto-merge was asked for and is not armed (the forge refused it), to be said.
    pub auto_merge_refused: Option<String>,
    pub(crate) request: greenlight_forge::PullRequest,
}

/// Where a proposal stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Followed {
    Open,
    Merged { commit: String },
    Closed,
}

/// A way for a promotion to land.
pub trait Land {
    /// Lands `change` (the promotion's files, message and guard) on `change.branch`.
    fn land(&self, repo: &Repo, change: &ChangeRequest) -> Result<Landed>;

    /// Where a proposal this way made stands now (a pull request's way only).
    fn follow(&self, proposal: &Proposal) -> Result<Followed> {
        Err(anyhow!(
            "{} was not proposed by this way of landing",
            proposal.url
        ))
    }
}

/// A fast-forward push of one commit to the branch, retried on a moved tip.
#[derive(Clone, Copy, Debug, Default)]
pub struct DirectPush;

impl Land for DirectPush {
    fn land(&self, repo: &Repo, change: &ChangeRequest) -> Result<Landed> {
        Ok(match repo.commit_and_push(change)? {
            ChangeOutcome::Pushed { commit, .. } => Landed::Committed { commit },
            ChangeOutcome::Unchanged { tip } => Landed::AlreadyThere { tip },
            ChangeOutcome::Guarded { tip, .. } => Landed::Guarded { tip },
        })
    }
}

/// `promotion: {via: pull-request}`: the promotion commit on a branch of its own and a pull
/// request from it into the branch. Its forge calls run on the caller's multi-threaded tokio
/// runtime (the driver's), blocking in place.
pub struct PullRequest {
    pub client: ForgeClient,
    pub auto_merge: bool,
    /// The request's branch: `greenlight/promote/<app>-<short digest>-<unique>`.
    pub head: String,
}

impl PullRequest {
    fn block_on<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
    }

    fn forge_error(&self, what: &str, e: ForgeError) -> anyhow::Error {
        anyhow::Error::new(e).context(format!(
            "{} {}: {what}",
            self.client.kind(),
            self.client.project()
        ))
    }
}

impl Land for PullRequest {
    fn land(&self, repo: &Repo, change: &ChangeRequest) -> Result<Landed> {
        let commit = match repo
            .commit_to_branch(change, &self.head)
            .with_context(|| format!("cannot push the promotion to branch {}", self.head))?
        {
            ChangeOutcome::Pushed { commit, .. } => commit,
            ChangeOutcome::Unchanged { tip } => return Ok(Landed::AlreadyThere { tip }),
            ChangeOutcome::Guarded { tip, .. } => return Ok(Landed::Guarded { tip }),
        };
        let (title, body) = match change.message.split_once('\n') {
            Some((t, rest)) => (t.to_string(), rest.trim_start_matches('\n').to_string()),
            None => (change.message.clone(), String::new()),
        };
        let body = format!(
            "{body}\n\n---\nProposed by greenlight's promotion gate: the checks above ran on a candidate beside the live workload before this request was opened. Merging it promotes; the watchdog then proves the live rollout.\n"
        );
        let request = self
            .block_on(self.client.open(&self.head, &change.branch, &title, &body))
            .map_err(|e| self.forge_error("cannot open the pull request", e))?;
        let mut auto_merge = false;
        let mut auto_merge_refused = None;
        if self.auto_merge {
            match self.block_on(self.client.enable_auto_merge(&request)) {
                Ok(AutoMerge::Armed) => auto_merge = true,
                Ok(AutoMerge::Merged { merge_commit }) => {
                    return Ok(Landed::Merged {
                        commit: merge_commit,
                        number: request.number,
                        url: request.url,
                    });
                }
                // Nothing to wait for (GitHub refuses to arm a request that can merge now):
                // auto-merge means merge once mergeable, and it is. A merge the forge refuses
                // after all leaves the request open for a human, said so: the run does not fail
                // with a request it opened.
                Err(ForgeError::AlreadyMergeable { .. }) => {
                    match self.block_on(self.client.merge(&request)) {
                        Ok(merged) => {
                            return Ok(Landed::Merged {
                                commit: merged,
                                number: request.number,
                                url: request.url,
                            });
                        }
                        Err(e) => {
                            auto_merge_refused = Some(format!(
                                "{:#}",
                                self.forge_error("the pull request could not be merged", e)
                            ));
                        }
                    }
                }
                // The request is open: auto-merge refused leaves it to a human, said so — the
                // run does not fail with a request it opened.
                Err(e) => {
                    auto_merge_refused = Some(format!(
                        "{:#}",
                        self.forge_error("auto-merge could not be armed", e)
                    ));
                }
            }
        }
        Ok(Landed::Proposed(Proposal {
            number: request.number,
            url: request.url.clone(),
            commit,
            auto_merge,
            auto_merge_refused,
            request,
        }))
    }

    fn follow(&self, proposal: &Proposal) -> Result<Followed> {
        let state = self
            .block_on(self.client.get(&proposal.request))
            .map_err(|e| self.forge_error("cannot read the pull request", e))?;
        Ok(match state {
            PrState::Open { .. } => Followed::Open,
            PrState::Merged { merge_commit } => Followed::Merged {
                commit: merge_commit,
            },
            PrState::Closed => Followed::Closed,
        })
    }
}
