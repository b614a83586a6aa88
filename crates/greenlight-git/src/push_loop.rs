//! The one write loop both of greenlight's writes go through — a revert (`revert.rs`) and
//! the promotion gate's change commit (`change.rs`): under the clone's writer lock, each
//! attempt fetches the branch, lets the caller decide on the fresh tip and build its commit on
//! it, and pushes that commit fast-forward; a push the remote rejects (the branch moved, a
//! lost race with another pusher) starts the next attempt from the fetch. After the last
//! rejection: [`Error::PushRejected`].
//!
//! Also owns what that loop needs of the clone: the push itself (never forced; a rejection
//! quoting what the remote said), the work tree reset to the fetched tip, and a commit of the
//! index as a given author.
//!
//! Must never: force a push, push anything but the commit the attempt built on the tip it was
//! given, or leave a rejected commit's work tree for the next attempt (each attempt starts
//! from a reset).

use crate::command::{Git, failure};
use crate::error::{Error, Result};
use crate::repo::Repo;

/// What one attempt decided on the fetched tip.
pub(crate) enum Attempt<T> {
    /// Nothing to push: the write ends with this outcome (adopted, unchanged, refused, …).
    Done(T),
    /// A commit built on the tip, to push to the branch.
    Push(String),
}

/// How the loop ended, when it did not fail.
pub(crate) enum Landed<T> {
    /// An attempt ended the write without pushing.
    Done(T),
    /// The commit the remote accepted, and which attempt pushed it (1 = the first).
    Pushed { commit: String, attempts: u32 },
}

/// The remote's answer to one push.
pub(crate) enum Push {
    Accepted,
    /// Rejected, with git's summary and what the remote said (redacted).
    Rejected(String),
}

impl Repo {
    /// Runs up to `max_attempts` attempts on `branch` under the writer lock: fetch the tip,
    /// `attempt(tip)`, and push the commit it built. A rejected push starts the next attempt;
    /// after `max_attempts` rejections, [`Error::PushRejected`] names `what` (the commit the
    /// write is about) and carries the last rejection. Any other git failure ends the loop.
    pub(crate) fn push_loop<T>(
        &self,
        branch: &str,
        max_attempts: u32,
        what: &str,
        mut attempt: impl FnMut(&str) -> Result<Attempt<T>>,
    ) -> Result<Landed<T>> {
        let _guard = self.lock_writer();
        let mut last_rejection = String::new();
        for n in 1..=max_attempts {
            let tip = self.fetch_locked(branch)?;
            match attempt(&tip)? {
                Attempt::Done(outcome) => return Ok(Landed::Done(outcome)),
                Attempt::Push(commit) => match self.push(&commit, branch)? {
                    Push::Accepted => {
                        return Ok(Landed::Pushed {
                            commit,
                            attempts: n,
                        });
                    }
                    Push::Rejected(reason) => last_rejection = reason,
                },
            }
        }
        Err(Error::PushRejected {
            commit: what.to_owned(),
            branch: branch.to_owned(),
            repo: self.to_string(),
            attempts: max_attempts,
            reason: last_rejection,
        })
    }

    /// Pushes `commit` to the branch, never forced.
    pub(crate) fn push(&self, commit: &str, branch: &str) -> Result<Push> {
        let out = self
            .env()
            .git(["push", "--porcelain", "--no-verify", "origin"])
            .arg(format!("{commit}:refs/heads/{branch}"))
            .network()
            .run()?;
        if out.status.success() {
            return Ok(Push::Accepted);
        }
        match rejection(&out.stdout_str()) {
            Some(reason) => {
                // What the remote itself said (a branch protection's or a hook's words) is
                // what a human needs: git's summary says only "pre-receive hook declined".
                let said = remote_lines(&out.stderr);
                let reason = if said.is_empty() {
                    reason
                } else {
                    format!("{reason}; the remote said: {}", said.join(" / "))
                };
                Ok(Push::Rejected(self.env().redact(&reason)))
            }
            None => Err(failure(self.env(), &out)),
        }
    }

    /// Commits the index with `message` (verbatim, hooks not run) as `name <email>`, author
    /// and committer alike; HEAD is the new commit.
    pub(crate) fn commit_index(&self, message: &str, name: &str, email: &str) -> Result<()> {
        let commit_cmd = self
            .env()
            .git([
                "commit",
                "--quiet",
                "--no-verify",
                "--cleanup=verbatim",
                "--file=-",
            ])
            .stdin(message.as_bytes().to_vec());
        self.with_author(commit_cmd, name, email).run_ok()?;
        Ok(())
    }

    /// `git` with `name <email>` as author and committer.
    pub(crate) fn with_author<'a>(&self, git: Git<'a>, name: &str, email: &str) -> Git<'a> {
        git.env("GIT_AUTHOR_NAME", name)
            .env("GIT_AUTHOR_EMAIL", email)
            .env("GIT_COMMITTER_NAME", name)
            .env("GIT_COMMITTER_EMAIL", email)
    }

    /// Puts the work tree, index and a detached HEAD exactly at the remote tip, dropping
    /// whatever an earlier, interrupted write left behind. The clone is greenlight's
    /// own: nothing of a human's can be lost here.
    pub(crate) fn reset_work_tree(&self, branch: &str) -> Result<()> {
        let git_dir = self.dir().join(".git");
        if git_dir.join("REVERT_HEAD").exists() || git_dir.join("sequencer").exists() {
            self.env().git(["revert", "--quit"]).run_ok()?;
        }
        self.env()
            .git(["checkout", "--quiet", "--force", "--detach"])
            .arg(format!("refs/remotes/origin/{branch}"))
            .arg("--")
            .run_ok()?;
        self.env().git(["clean", "-ffdxq"]).run_ok()?;
        Ok(())
    }
}

/// The remote's reason from `git push --porcelain` output, if it rejected the ref:
/// `!\t<src>:<dst>\t[rejected] (fetch first)` or `[remote rejected] (…)`.
fn rejection(porcelain: &str) -> Option<String> {
    porcelain.lines().find_map(|line| {
        let rest = line.strip_prefix('!')?;
        let mut fields = rest.trim_start_matches('\t').splitn(2, '\t');
        let refs = fields.next()?;
        let summary = fields.next().unwrap_or("").trim();
        Some(format!("{refs}: {summary}"))
    })
}

/// The `remote:` lines of a push's stderr, each trimmed, blank ones left out.
fn remote_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("remote:"))
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_rejections() {
        let out =
            "To /r.git\n!\tabc:refs/heads/main\t[remote rejected] (failed to update ref)\nDone\n";
        assert_eq!(
            rejection(out).as_deref(),
            Some("abc:refs/heads/main: [remote rejected] (failed to update ref)")
        );
        assert_eq!(
            rejection("To /r.git\n \tabc:refs/heads/main\t1..2\nDone\n"),
            None
        );
    }
}
