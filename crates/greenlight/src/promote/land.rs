//! How a promotion lands on the branch: the seam between the gate's decision to promote
//! (`Effect::CommitPromotion`) and git. Today a direct push ([`DirectPush`]): one commit on the
//! branch's tip, fast-forward, guarded against a change of the live manifest since the run read
//! it. A pull request is the next way to land, behind the same trait.
//!
//! Must never: force a push; land a change whose guarded paths changed since the run read them.

use anyhow::Result;
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
}

/// A way for a promotion to land.
pub trait Land {
    /// Lands `change` (the promotion's files, message and guard) on `change.branch`.
    fn land(&self, repo: &Repo, change: &ChangeRequest) -> Result<Landed>;
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
