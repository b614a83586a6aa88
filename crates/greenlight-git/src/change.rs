//! The promotion gate's writes: one commit of whole-file changes (a candidate's manifests, a
//! promotion, a kept candidate's record, a lock), made on the remote's tip and pushed
//! fast-forward — never forced — through the same fetch-and-retry loop as a revert
//! (`push_loop.rs`). A guard refuses the commit when files the run read have changed on the
//! branch since it read them (the live manifest edited by someone else mid-run): the caller
//! decides again, nothing is pushed.

use crate::checks::{check_attempts, check_identity, check_path};
use crate::error::{Error, Result};
use crate::push_loop::{Attempt, Landed, Push};
use crate::repo::Repo;

/// One file's change, by its path in the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileChange {
    /// Create or overwrite the file (and its directories).
    Write { path: String, content: Vec<u8> },
    /// Remove the file, or the directory and everything under it; absent is fine.
    Remove { path: String },
}

impl FileChange {
    fn path(&self) -> &str {
        match self {
            FileChange::Write { path, .. } | FileChange::Remove { path } => path,
        }
    }
}

/// What to commit, where, as whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRequest {
    pub branch: String,
    pub changes: Vec<FileChange>,
    /// The whole commit message (subject, body, trailers).
    pub message: String,
    pub author_name: String,
    pub author_email: String,
    /// How many pushes to try when the remote rejects them (≥ 1).
    pub max_attempts: u32,
    /// Refuse when one of these paths differs between this commit and the branch's tip.
    pub unchanged_since: Option<(String, Vec<String>)>,
}

/// How a change request ended. Errors (git failing, every push rejected) are `Err`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeOutcome {
    Pushed {
        commit: String,
        attempts: u32,
    },
    /// The changes are already on the branch: nothing to commit, nothing pushed.
    Unchanged {
        tip: String,
    },
    /// A guarded path changed on the branch since `base`; nothing was pushed.
    Guarded {
        path: String,
        base: String,
        tip: String,
    },
}

impl Repo {
    /// Commits `req.changes` on the tip of `req.branch` and pushes the commit, fast-forward
    /// only. Each attempt fetches the branch first, checks the guard, applies the changes to
    /// the clone's work tree reset to the tip, and pushes; a rejected push starts the next
    /// attempt. After `max_attempts` rejections: [`Error::PushRejected`].
    pub fn commit_and_push(&self, req: &ChangeRequest) -> Result<ChangeOutcome> {
        check(req)?;
        self.check_branch(&req.branch)?;
        let landed = self.push_loop(&req.branch, req.max_attempts, "the change commit", |tip| {
            self.build_change(req, tip)
        })?;
        Ok(match landed {
            Landed::Done(outcome) => outcome,
            Landed::Pushed { commit, attempts } => ChangeOutcome::Pushed { commit, attempts },
        })
    }

    /// Commits `req.changes` on the tip of `req.branch` (its guard checked as for
    /// [`Repo::commit_and_push`]) and pushes that commit to the new branch `head`, leaving
    /// `req.branch` alone: the head of a pull request. The push creates `head`; a `head` that
    /// exists and is not an ancestor of the commit is refused ([`Error::PushRejected`]) — never
    /// forced. [`ChangeOutcome::Pushed`] names the commit now on `head`.
    pub fn commit_to_branch(&self, req: &ChangeRequest, head: &str) -> Result<ChangeOutcome> {
        check(req)?;
        self.check_branch(&req.branch)?;
        self.check_branch(head)?;
        if head == req.branch {
            return Err(Error::InvalidInput {
                what: "branch",
                value: head.to_owned(),
                reason: "a pull request's branch must not be the branch it merges into",
            });
        }
        let _guard = self.lock_writer();
        let tip = self.fetch_locked(&req.branch)?;
        match self.build_change(req, &tip)? {
            Attempt::Done(outcome) => Ok(outcome),
            Attempt::Push(commit) => match self.push(&commit, head)? {
                Push::Accepted => Ok(ChangeOutcome::Pushed {
                    commit,
                    attempts: 1,
                }),
                Push::Rejected(reason) => Err(Error::PushRejected {
                    commit: "the pull request's commit".to_owned(),
                    branch: head.to_owned(),
                    repo: self.to_string(),
                    attempts: 1,
                    reason,
                }),
            },
        }
    }

    /// One attempt on the fetched `tip`: the guard, then the changes committed on the tip in
    /// the work tree.
    fn build_change(&self, req: &ChangeRequest, tip: &str) -> Result<Attempt<ChangeOutcome>> {
        let tip = tip.to_owned();
        if let Some((base, paths)) = &req.unchanged_since {
            let base = self.full_commit(base)?;
            let out = self
                .env()
                .git(["diff", "--name-only", "-z"])
                .arg(&base)
                .arg(&tip)
                .arg("--")
                .args(paths)
                .run_ok()?;
            if let Some(path) = out
                .stdout
                .split(|b| *b == 0)
                .find(|p| !p.is_empty())
                .map(|p| String::from_utf8_lossy(p).into_owned())
            {
                return Ok(Attempt::Done(ChangeOutcome::Guarded { path, base, tip }));
            }
        }
        self.reset_work_tree(&req.branch)?;
        for change in &req.changes {
            let full = self.dir().join(change.path());
            let io = |e: std::io::Error| Error::InvalidInput {
                what: "file change",
                value: change.path().to_string(),
                reason: if e.kind() == std::io::ErrorKind::PermissionDenied {
                    "permission denied in the clone"
                } else {
                    "could not be written in the clone"
                },
            };
            match change {
                FileChange::Write { content, .. } => {
                    if let Some(dir) = full.parent() {
                        std::fs::create_dir_all(dir).map_err(io)?;
                    }
                    std::fs::write(&full, content).map_err(io)?;
                }
                FileChange::Remove { .. } => {
                    if full.is_dir() {
                        std::fs::remove_dir_all(&full).map_err(io)?;
                    } else if full.exists() {
                        std::fs::remove_file(&full).map_err(io)?;
                    }
                }
            }
        }
        // The work tree was the tip, clean, before the changes: everything that differs is
        // theirs (a removed path that never existed differs in nothing).
        self.env().git(["add", "--all"]).run_ok()?;
        let unchanged = self
            .env()
            .git(["diff", "--cached", "--quiet"])
            .run()?
            .status
            .success();
        if unchanged {
            self.reset_work_tree(&req.branch)?;
            return Ok(Attempt::Done(ChangeOutcome::Unchanged { tip }));
        }
        self.commit_index(&req.message, &req.author_name, &req.author_email)?;
        Ok(Attempt::Push(self.full_commit("HEAD")?))
    }

    /// A file's content at `rev`; `None` when the file does not exist there.
    pub fn read_file(&self, rev: &str, path: &str) -> Result<Option<Vec<u8>>> {
        check_path(path)?;
        let commit = self.full_commit(rev)?;
        let out = self
            .env()
            .git(["cat-file", "blob"])
            .arg(format!("{commit}:{path}"))
            .run()?;
        if out.status.success() {
            Ok(Some(out.stdout))
        } else {
            Ok(None)
        }
    }

    /// The files under `dir` at `rev` (paths from the repository's root), sorted; empty when
    /// the directory does not exist there. `""` is the repository's root.
    pub fn list_files(&self, rev: &str, dir: &str) -> Result<Vec<String>> {
        if !dir.is_empty() {
            check_path(dir)?;
        }
        let commit = self.full_commit(rev)?;
        let mut ls = self
            .env()
            .git(["ls-tree", "-r", "-z", "--name-only"])
            .arg(&commit);
        if !dir.is_empty() {
            ls = ls.arg("--").arg(dir);
        }
        let out = ls.run_ok()?;
        let mut files: Vec<String> = out
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        files.sort();
        Ok(files)
    }

    /// The commits reachable from `rev` that changed `path`, newest first, at most `limit`
    /// (`git log --format=%H -n <limit> <rev> -- <path>`).
    pub fn path_history(&self, rev: &str, path: &str, limit: usize) -> Result<Vec<String>> {
        check_path(path)?;
        let commit = self.full_commit(rev)?;
        let out = self
            .env()
            .git(["log", "--format=%H"])
            .arg(format!("-n{limit}"))
            .arg(&commit)
            .arg("--")
            .arg(path)
            .run_ok()?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect())
    }
}

fn check(req: &ChangeRequest) -> Result<()> {
    check_attempts(req.max_attempts)?;
    if req.changes.is_empty() {
        return Err(Error::InvalidInput {
            what: "changes",
            value: String::new(),
            reason: "a change commit needs at least one file change",
        });
    }
    for c in &req.changes {
        check_path(c.path())?;
    }
    if let Some((_, paths)) = &req.unchanged_since {
        for p in paths {
            check_path(p)?;
        }
    }
    check_identity(&req.author_name, &req.author_email)
}
