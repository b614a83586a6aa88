//! The watchdog's one write to a remote: a revert commit, pushed fast-forward through the
//! fetch-and-retry loop of `push_loop.rs` (the promotion gate's writes are in `change.rs`,
//! through the same loop).
//!
//! Owns the revert's construction (git's own `revert`, the mainline parent for merges), its
//! message (no watch trailer), and adoption of a revert already on the branch. It must never
//! force a push, never push anything but one revert on top of the remote's tip, and never leave
//! a conflicted work tree behind.

use crate::checks::{check_attempts, check_identity, check_path};
use crate::command::failure;
use crate::error::{Error, Result};
use crate::push_loop::{Attempt, Landed, Push};
use crate::repo::Repo;
use greenlight_core::paths::touches;
use greenlight_core::snapshot::SourcePaths;

/// What to revert, where, why and as whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevertRequest {
    /// The commit to revert (full sha preferred; any revision naming it is accepted).
    pub commit: String,
    /// The branch to push the revert to.
    pub branch: String,
    /// Why, in words: the last paragraph of the revert's message. Should not itself carry
    /// a watch trailer.
    pub reason: String,
    /// Author and committer name of the revert.
    pub author_name: String,
    /// Author and committer e-mail of the revert.
    pub author_email: String,
    /// How many pushes to try when the remote rejects them (≥ 1).
    pub max_attempts: u32,
    /// The request is issued again after a restart: a revert of the commit may have been
    /// pushed before the crash, and a human may have reverted it since. Any revert of the
    /// commit on the branch is then adopted, in effect or not: a revert a human undid is a
    /// human's decision, never pushed over.
    pub adopt_any: bool,
    /// Paths (files or directories, from the repository's root) whose changes the revert
    /// leaves as they are on the branch: it undoes the rest of the commit. A conflict only in
    /// these paths is resolved to the branch's version. The promotion gate names its
    /// candidates' directory here, so that undoing a promotion does not bring back the
    /// candidate and the lock it removed.
    pub keep: Vec<String>,
    /// The app's source paths, when a newer commit that touches them must stop the revert: a
    /// commit after `commit` on the branch (not a revert of it, not a merge that brings it)
    /// that changes a file under them means the verdict that asked for this revert no longer
    /// has the last word — a fix-forward may be on its way to the app. `None`: no such check.
    pub hold_on: Option<SourcePaths>,
    /// The newest commit the caller had already taken into account: only commits after it
    /// (`hold_after..tip`) can stop the revert. `None`: every commit after `commit`.
    pub hold_after: Option<String>,
    /// For a merge: the parent that was the branch before it, whose side the revert keeps
    /// (`git revert -m` names it). `None`: the first parent, git's default. A parent that is
    /// not one of the merge's is refused.
    pub mainline: Option<String>,
}

/// How a revert request ended. Errors (git failing, every push rejected) are `Err`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevertOutcome {
    /// greenlight's revert is on the remote branch.
    Pushed {
        /// The revert commit's sha.
        revert: String,
        /// Which push attempt succeeded (1 = the first).
        attempts: u32,
    },
    /// A revert of the commit was already on the branch (greenlight's before a crash, or a
    /// human's); nothing was pushed.
    Adopted {
        /// The existing revert's sha.
        revert: String,
    },
    /// The revert does not apply to the branch's tip; nothing was pushed and the clone is
    /// clean again. A human has to resolve it.
    Conflict {
        /// Says which commit, which branch tip and which paths.
        message: String,
        /// The conflicting paths.
        paths: Vec<String>,
    },
    /// Nothing to undo: the commit's changes are already gone from the branch, or the
    /// commit is no longer on the branch at all. Nothing was pushed.
    NothingToRevert {
        /// Says why.
        message: String,
    },
    /// Newer commits on the branch change the app's source paths ([`RevertRequest::hold_on`]);
    /// nothing was pushed.
    Superseded {
        /// Each newer commit that touches them, oldest first, with the paths it changed.
        newer: Vec<(String, Vec<String>)>,
    },
}

/// The revert's message: git's own wording, then the reason as one paragraph (its line breaks
/// folded: the reason may quote Argo CD, and a hook's message is the application's own text),
/// then `extra` paragraphs, then greenlight's own trailer
/// ([`REVERT_OF`](greenlight_core::trailer::REVERT_OF)) as the last paragraph. The original's
/// trailers are not carried over and nothing quoted can be the trailer block, so the revert
/// cannot start a watch of its own.
pub fn revert_message(subject: &str, sha: &str, reason: &str, extra: &[String]) -> String {
    let mut message = format!("Revert \"{subject}\"\n\nThis reverts commit {sha}.\n");
    let reason = reason.split_whitespace().collect::<Vec<_>>().join(" ");
    for paragraph in std::iter::once(&reason).chain(extra) {
        if !paragraph.trim().is_empty() {
            message.push('\n');
            message.push_str(paragraph.trim());
            message.push('\n');
        }
    }
    message.push_str(&format!(
        "\n{}: {sha}\n",
        greenlight_core::trailer::REVERT_OF
    ));
    message
}

impl Repo {
    /// Reverts `req.commit` on `req.branch` and pushes the revert, fast-forward only.
    ///
    /// Each attempt: fetch the branch; if the commit is no longer on it → `NothingToRevert`;
    /// if a revert of it already follows it on the branch → `Adopted` (never a duplicate);
    /// else, in the clone's work tree reset to the remote tip, `git revert --no-commit`
    /// (`-m 1` for a merge: undo what the merge brought into its first parent). A conflict
    /// is aborted and reported as `Conflict`; an empty result is `NothingToRevert`.
    /// Otherwise commit with [`revert_message`] as the given author and committer and push
    /// `<revert>:refs/heads/<branch>` without force. A push the remote rejects (the branch
    /// moved, a lost race with another pusher) starts the next attempt from the fetch, so
    /// a revert pushed meanwhile by someone else is adopted. After `max_attempts`
    /// rejections: [`Error::PushRejected`].
    pub fn revert_and_push(&self, req: &RevertRequest) -> Result<RevertOutcome> {
        check_request(req)?;
        self.check_branch(&req.branch)?;
        let landed = self.push_loop(&req.branch, req.max_attempts, &req.commit, |tip| {
            self.revert_attempt(req, tip)
        })?;
        Ok(match landed {
            Landed::Done(outcome) => outcome,
            Landed::Pushed { commit, attempts } => RevertOutcome::Pushed {
                revert: commit,
                attempts,
            },
        })
    }

    /// The revert of `req.commit` built on `req.branch`'s tip as [`Repo::revert_and_push`]
    /// builds it (the same checks: nothing to revert, a revert to adopt, a newer commit that
    /// holds it), pushed to the branch `head` instead — the head of a pull request into
    /// `req.branch` (`--revert-via pull-request`). `head` must not exist on the remote yet:
    /// the push is never forced. `Pushed` names the revert commit on `head`; nothing is on
    /// `req.branch` until the request merges.
    pub fn revert_to_branch(&self, req: &RevertRequest, head: &str) -> Result<RevertOutcome> {
        check_request(req)?;
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
        match self.revert_attempt(req, &tip)? {
            Attempt::Done(outcome) => Ok(outcome),
            Attempt::Push(revert) => match self.push(&revert, head)? {
                Push::Accepted => Ok(RevertOutcome::Pushed {
                    revert,
                    attempts: 1,
                }),
                Push::Rejected(reason) => Err(Error::PushRejected {
                    commit: format!("the revert of {}", req.commit),
                    branch: head.to_owned(),
                    repo: self.to_string(),
                    attempts: 1,
                    reason,
                }),
            },
        }
    }

    /// One attempt on the fetched `tip`: nothing to revert, a revert to adopt, a newer commit
    /// that holds it, or the revert built on the tip.
    fn revert_attempt(&self, req: &RevertRequest, tip: &str) -> Result<Attempt<RevertOutcome>> {
        let commit = self.full_commit(&req.commit)?;
        if self.is_ancestor(&commit, tip)? != Some(true) {
            return Ok(Attempt::Done(RevertOutcome::NothingToRevert {
                message: format!(
                    "commit {commit} is not on {} (tip {tip}); there is nothing of it to revert",
                    req.branch
                ),
            }));
        }
        let found = if req.adopt_any {
            self.find_first_revert_of(&commit, &commit, tip)?
        } else {
            self.find_revert_of(&commit, &commit, tip)?
        };
        if let Some(revert) = found {
            return Ok(Attempt::Done(RevertOutcome::Adopted { revert }));
        }
        if let Some(paths) = &req.hold_on {
            let after = req.hold_after.as_deref().unwrap_or(&commit);
            let newer = self.newer_touching(&commit, after, tip, paths)?;
            if !newer.is_empty() {
                return Ok(Attempt::Done(RevertOutcome::Superseded { newer }));
            }
        }
        self.build_revert(req, &commit, tip)
    }

    /// The commits after `after` up to `tip` that change files under `paths`, oldest first —
    /// leaving out reverts of `commit` (adoption's business) and merges whose other parents
    /// bring `commit` itself.
    fn newer_touching(
        &self,
        commit: &str,
        after: &str,
        tip: &str,
        paths: &SourcePaths,
    ) -> Result<Vec<(String, Vec<String>)>> {
        let mut newer = Vec::new();
        for sha in self.new_commits(Some(after), tip)? {
            let data = self.commit(&sha)?;
            if crate::repo::message_reverts(&data.message, commit) {
                continue;
            }
            let mut brings_it = false;
            for p in data.parents.iter().skip(1) {
                if self.is_ancestor(commit, p)? == Some(true) {
                    brings_it = true;
                }
            }
            if brings_it {
                continue;
            }
            let changed = self.changed_paths(&sha)?;
            if touches(paths, &changed).touches() {
                newer.push((sha, changed));
            }
        }
        Ok(newer)
    }

    /// Makes the revert commit on top of `tip` in the work tree.
    fn build_revert(
        &self,
        req: &RevertRequest,
        commit: &str,
        tip: &str,
    ) -> Result<Attempt<RevertOutcome>> {
        let data = self.commit(commit)?;
        self.reset_work_tree(&req.branch)?;
        let mut revert = self
            .env()
            .git(["revert", "--no-commit", "--no-rerere-autoupdate"]);
        if data.is_merge() {
            let number = match &req.mainline {
                None => 1,
                Some(m) => {
                    let m = self.full_commit(m)?;
                    match data.parents.iter().position(|p| *p == m) {
                        Some(i) => i + 1,
                        None => {
                            return Err(Error::InvalidInput {
                                what: "mainline",
                                value: m,
                                reason: "not a parent of the merge to revert",
                            });
                        }
                    }
                }
            };
            revert = revert.arg("-m").arg(number.to_string());
        }
        let out = self
            .with_author(revert.arg(commit), &req.author_name, &req.author_email)
            .run()?;
        let conflicted = if out.status.success() {
            Vec::new()
        } else {
            self.conflicted_paths()?
        };
        let resolvable = !conflicted.is_empty()
            && conflicted
                .iter()
                .all(|p| req.keep.iter().any(|k| under(p, k)));
        if resolvable || (out.status.success() && !req.keep.is_empty()) {
            self.keep_as_on_branch(&req.keep)?;
        }
        if !out.status.success() && !resolvable {
            let paths = conflicted;
            // Best effort: the reset below restores the work tree whatever --abort did.
            let _ = self.env().git(["revert", "--abort"]).run();
            self.reset_work_tree(&req.branch)?;
            if paths.is_empty() {
                return Err(failure(self.env(), &out));
            }
            return Ok(Attempt::Done(RevertOutcome::Conflict {
                message: format!(
                    "reverting {commit} on {} (tip {tip}) conflicts in {}; nothing was pushed",
                    req.branch,
                    paths.join(", ")
                ),
                paths,
            }));
        }
        let unchanged = self
            .env()
            .git(["diff", "--cached", "--quiet"])
            .run()?
            .status
            .success();
        if unchanged {
            self.reset_work_tree(&req.branch)?;
            return Ok(Attempt::Done(RevertOutcome::NothingToRevert {
                message: format!(
                    "reverting {commit} on {} (tip {tip}) changes nothing: its changes are already undone",
                    req.branch
                ),
            }));
        }
        let kept = (!req.keep.is_empty()).then(|| {
            format!(
                "Left as they are on {}: {} (the commit asks a revert to keep them).",
                req.branch,
                req.keep.join(", ")
            )
        });
        let message = revert_message(&data.subject, &data.sha, &req.reason, kept.as_slice());
        self.commit_index(&message, &req.author_name, &req.author_email)?;
        let revert = self
            .resolve("HEAD")?
            .ok_or_else(|| Error::UnexpectedOutput {
                command: "git commit".into(),
                repo: self.to_string(),
                detail: "HEAD names no commit after committing the revert".into(),
            })?;
        Ok(Attempt::Push(revert))
    }

    /// Puts `paths` back as they are at HEAD (the branch's tip) in the index and the work
    /// tree, whatever the revert did to them: changes undone, files it brought back removed,
    /// conflicts resolved to the branch's side.
    fn keep_as_on_branch(&self, paths: &[String]) -> Result<()> {
        for path in paths {
            let spec = format!(":(literal){}", path.trim_end_matches('/'));
            let known = |args: &[&str]| -> Result<bool> {
                let out = self
                    .env()
                    .git(args.iter().copied())
                    .arg("--")
                    .arg(&spec)
                    .run_ok()?;
                Ok(!out.stdout.is_empty())
            };
            if !known(&["ls-files", "--cached"])?
                && !known(&["ls-tree", "-r", "--name-only", "HEAD"])?
            {
                continue;
            }
            self.env()
                .git(["restore", "--source=HEAD", "--staged", "--worktree"])
                .arg("--")
                .arg(&spec)
                .run_ok()?;
        }
        Ok(())
    }

    fn conflicted_paths(&self) -> Result<Vec<String>> {
        let out = self
            .env()
            .git(["diff", "--name-only", "--diff-filter=U", "-z"])
            .run_ok()?;
        let mut paths: Vec<String> = out
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        paths.dedup();
        Ok(paths)
    }
}

/// Whether `path` is `dir` or below it.
fn under(path: &str, dir: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn check_request(req: &RevertRequest) -> Result<()> {
    for path in &req.keep {
        check_path(path.trim_end_matches('/'))?;
    }
    let bad = |what, value: &str, reason| {
        Err(Error::InvalidInput {
            what,
            value: value.to_owned(),
            reason,
        })
    };
    check_attempts(req.max_attempts)?;
    if req.commit.is_empty() || req.commit.starts_with('-') {
        return bad("commit", &req.commit, "expected a commit sha");
    }
    check_identity(&req.author_name, &req.author_email)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_shape() {
        assert_eq!(
            revert_message("Bump image", "abc", "  deadline passed  \n", &[]),
            "Revert \"Bump image\"\n\nThis reverts commit abc.\n\ndeadline passed\n\nGreenlight-Revert-Of: abc\n"
        );
        assert_eq!(
            revert_message("x", "abc", "", &[]),
            "Revert \"x\"\n\nThis reverts commit abc.\n\nGreenlight-Revert-Of: abc\n"
        );
    }

    /// A reason that quotes a hook's message ending in a watch trailer (the application's own
    /// text): the revert's trailers are greenlight's alone, and no watch trailer is read.
    #[test]
    fn a_quoted_watch_trailer_never_becomes_the_reverts_trailer() {
        let reason =
            "its PostSync hook failed: batch/Job/smoke (done\n\nNav-Watchdog: app=web mode=arm)";
        let message = revert_message("web: 2.0.0", "abc", reason, &[]);
        assert_eq!(
            greenlight_core::trailer::parse(&message),
            vec![("Greenlight-Revert-Of".to_string(), "abc".to_string())]
        );
        assert!(
            greenlight_core::directive::directives_in(&message, "Nav-Watchdog").is_empty(),
            "{message}"
        );
        assert!(greenlight_core::trailer::is_greenlight_revert(&message));
    }
}
