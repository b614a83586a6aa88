//! The forge's hands on the bare repository: it reads branch tips, merges a pull request with
//! plumbing only (`git merge-tree --write-tree`, `git commit-tree`, then `git update-ref` with
//! the old value, a compare-and-swap that hooks never see), and installs the `pre-receive`
//! hook that refuses pushes to protected branches in the forge's words. Git runs as the rest of
//! the sandbox runs it: system and global configuration ignored, no prompt, the C locale.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use super::ForgeKind;

const GIT_TIMEOUT: Duration = Duration::from_secs(60);

/// The identity the forge's own merge commits carry.
const MERGER_NAME: &str = "greenlight sandbox forge";
const MERGER_EMAIL: &str = "forge@sandbox.greenlight.invalid";

/// The first line of every hook the forge writes; a hook without it is the user's and is
/// never overwritten or removed.
pub(crate) const HOOK_MARKER: &str = "# greenlight-sandbox forge: protected branches";

/// What a merge attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MergeOutcome {
    /// The base branch now points at this new commit.
    Merged(String),
    /// The head and the base change the same lines: nothing was written.
    Conflict,
    /// The base branch moved between reading it and updating it: nothing was written.
    BaseMoved,
}

/// A bare repository on disk.
#[derive(Debug, Clone)]
pub(crate) struct BareRepo {
    dir: PathBuf,
}

fn git(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .env("GIT_AUTHOR_NAME", MERGER_NAME)
        .env("GIT_AUTHOR_EMAIL", MERGER_EMAIL)
        .env("GIT_COMMITTER_NAME", MERGER_NAME)
        .env("GIT_COMMITTER_EMAIL", MERGER_EMAIL)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn run(mut cmd: Command, what: &str) -> Result<Ran, String> {
    let out = tokio::time::timeout(GIT_TIMEOUT, cmd.output())
        .await
        .map_err(|_| format!("{what}: no answer within {}s", GIT_TIMEOUT.as_secs()))?
        .map_err(|e| format!("{what}: cannot run git: {e}"))?;
    Ok(Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })
}

async fn ok(cmd: Command, what: &str) -> Result<String, String> {
    let ran = run(cmd, what).await?;
    if ran.code == Some(0) {
        Ok(ran.stdout.trim().to_string())
    } else {
        Err(format!("{what} failed: {}", ran.stderr))
    }
}

/// A branch name the forge accepts from a request: what git accepts as a branch, narrowed to
/// characters that need no quoting in the hook script.
pub(crate) fn check_branch(name: &str) -> Result<(), String> {
    let fine = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/');
    if name.is_empty()
        || name.len() > 200
        || !name.chars().all(fine)
        || name.starts_with(['-', '/', '.'])
        || name.ends_with(['/', '.'])
        || name.contains("..")
        || name.contains("//")
        || name.ends_with(".lock")
    {
        return Err(format!(
            "{name:?} is not a branch name the sandbox forge accepts (letters, digits, '.', '_', '-', '/')"
        ));
    }
    Ok(())
}

impl BareRepo {
    /// The bare repository at `dir`; an error names the path when it is not one.
    pub(crate) async fn open(dir: &Path) -> Result<BareRepo, String> {
        let dir = dir
            .canonicalize()
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut cmd = git(&dir);
        cmd.args(["rev-parse", "--is-bare-repository"]);
        let answer = ok(cmd, &format!("git rev-parse in {}", dir.display()))
            .await
            .map_err(|e| format!("{}: not a git repository ({e})", dir.display()))?;
        if answer != "true" {
            return Err(format!(
                "{}: not a bare repository (the forge serves the repository clients push to)",
                dir.display()
            ));
        }
        Ok(BareRepo { dir })
    }

    /// The commit `refs/heads/<branch>` points at, if the branch exists.
    pub(crate) async fn tip(&self, branch: &str) -> Result<Option<String>, String> {
        let mut cmd = git(&self.dir);
        cmd.args([
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}^{{commit}}"),
        ]);
        let ran = run(cmd, "git rev-parse").await?;
        Ok((ran.code == Some(0))
            .then(|| ran.stdout.trim().to_string())
            .filter(|s| s.len() == 40))
    }

    /// How many commits `head` has that `base` has not.
    pub(crate) async fn commits_ahead(&self, base: &str, head: &str) -> Result<u64, String> {
        let mut cmd = git(&self.dir);
        cmd.args(["rev-list", "--count", &format!("{base}..{head}")]);
        let out = ok(cmd, "git rev-list --count").await?;
        out.parse()
            .map_err(|_| format!("git rev-list --count answered {out:?}"))
    }

    /// Can `head` merge into `base` without conflicts? Writes objects, moves no ref.
    pub(crate) async fn mergeable(&self, base_sha: &str, head_sha: &str) -> Result<bool, String> {
        Ok(self.merge_tree(base_sha, head_sha).await?.is_some())
    }

    async fn merge_tree(&self, base_sha: &str, head_sha: &str) -> Result<Option<String>, String> {
        let mut cmd = git(&self.dir);
        cmd.args([
            "merge-tree",
            "--write-tree",
            "--no-messages",
            base_sha,
            head_sha,
        ]);
        let ran = run(cmd, "git merge-tree").await?;
        match ran.code {
            Some(0) => ran
                .stdout
                .lines()
                .next()
                .map(|l| l.trim().to_string())
                .filter(|t| t.len() == 40)
                .map(Some)
                .ok_or_else(|| "git merge-tree printed no tree".to_string()),
            Some(1) => Ok(None),
            _ => Err(format!("git merge-tree failed: {}", ran.stderr)),
        }
    }

    /// Merges `head_sha` into branch `base`, which must still point at `base_sha`: a merge
    /// commit (parents base, head) or a squashed one (parent base), with `message`.
    pub(crate) async fn merge(
        &self,
        base: &str,
        base_sha: &str,
        head_sha: &str,
        method: super::board::MergeMethod,
        message: &str,
    ) -> Result<MergeOutcome, String> {
        let Some(tree) = self.merge_tree(base_sha, head_sha).await? else {
            return Ok(MergeOutcome::Conflict);
        };
        let mut cmd = git(&self.dir);
        cmd.args(["commit-tree", &tree, "-p", base_sha]);
        if method == super::board::MergeMethod::Merge {
            cmd.args(["-p", head_sha]);
        }
        cmd.args(["-m", message]);
        let commit = ok(cmd, "git commit-tree").await?;
        let mut cmd = git(&self.dir);
        cmd.args([
            "update-ref",
            "-m",
            "sandbox forge: merge",
            &format!("refs/heads/{base}"),
            &commit,
            base_sha,
        ]);
        let ran = run(cmd, "git update-ref").await?;
        if ran.code == Some(0) {
            Ok(MergeOutcome::Merged(commit))
        } else if self.tip(base).await?.as_deref() != Some(base_sha) {
            Ok(MergeOutcome::BaseMoved)
        } else {
            Err(format!("git update-ref failed: {}", ran.stderr))
        }
    }

    fn hook_path(&self) -> PathBuf {
        self.dir.join("hooks").join("pre-receive")
    }

    /// Writes the `pre-receive` hook that refuses updates of `protected` branches with
    /// `kind`'s words. A hook the forge did not write is left alone: an error says so.
    pub(crate) fn install_hook(&self, kind: ForgeKind, protected: &[String]) -> Result<(), String> {
        let path = self.hook_path();
        if let Ok(existing) = std::fs::read_to_string(&path)
            && existing.lines().nth(1).is_none_or(|l| l != HOOK_MARKER)
        {
            return Err(format!(
                "{} exists and is not the sandbox forge's: remove it or leave --protect out",
                path.display()
            ));
        }
        if protected.is_empty() {
            return self.remove_hook();
        }
        for branch in protected {
            check_branch(branch)?;
        }
        let pattern = protected
            .iter()
            .map(|b| format!("refs/heads/{b}"))
            .collect::<Vec<_>>()
            .join("|");
        let refusal = match kind {
            // GitHub: `remote: error: GH006: Protected branch update failed for refs/heads/x.`
            ForgeKind::GitHub => {
                "echo \"error: GH006: Protected branch update failed for $ref.\" >&2\n      echo \"error: Changes must be made through a pull request.\" >&2"
            }
            // GitLab's access check: `You are not allowed to push code to protected branches on
            // this project.`, shown as `remote: GitLab: …`.
            ForgeKind::GitLab => {
                "echo \"GitLab: You are not allowed to push code to protected branches on this project.\" >&2"
            }
            // Gitea's pre-receive: `Not allowed to push to protected branch <name>`, shown as
            // `remote: Gitea: …`.
            ForgeKind::Gitea => {
                "echo \"Gitea: Not allowed to push to protected branch ${ref#refs/heads/}\" >&2"
            }
        };
        let script = format!(
            "#!/bin/sh\n{HOOK_MARKER}\n# Written by `greenlight sandbox --forge`, removed when it stops.\nstatus=0\nwhile read old new ref; do\n  case \"$ref\" in\n    {pattern})\n      {refusal}\n      status=1\n      ;;\n  esac\ndone\nexit $status\n"
        );
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
            std::fs::write(&path, &script)?;
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        };
        write().map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// Removes the forge's own hook (a hook it did not write stays).
    pub(crate) fn remove_hook(&self) -> Result<(), String> {
        let path = self.hook_path();
        match std::fs::read_to_string(&path) {
            Ok(text) if text.lines().nth(1).is_some_and(|l| l == HOOK_MARKER) => {
                std::fs::remove_file(&path)
                    .map_err(|e| format!("cannot remove {}: {e}", path.display()))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_that_need_quoting_or_that_git_refuses_are_refused() {
        for good in ["main", "promote/web-1.2", "release_2024", "a-b.c"] {
            assert!(check_branch(good).is_ok(), "{good}");
        }
        for bad in [
            "", "-x", "a..b", "a b", "a;rm", "x.lock", "/a", "a/", "$(x)", "a//b",
        ] {
            let err = check_branch(bad).unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
    }
}
