//! git for tests, isolated from the machine it runs on: no system or user configuration, no
//! `GIT_*` variable inherited from a surrounding hook or shell, no credential prompt, the C
//! locale, and one fixed identity for author and committer. Dates are git's own (the current
//! time); a fixture that needs fixed dates sets `GIT_AUTHOR_DATE`/`GIT_COMMITTER_DATE` itself,
//! as the fixture scripts do.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

/// The name every test commit is authored and committed by.
pub const IDENTITY_NAME: &str = "Human";
/// The e-mail every test commit is authored and committed by.
pub const IDENTITY_EMAIL: &str = "human@example.com";

/// Gives `cmd` the isolated git environment: every `GIT_*` variable removed (inherited or
/// already set on `cmd`), system and global configuration off, no terminal prompt, the fixed
/// identity, `LC_ALL=C`.
pub fn isolate(cmd: &mut Command) -> &mut Command {
    let set: Vec<_> = cmd.get_envs().map(|(k, _)| k.to_owned()).collect();
    let inherited = std::env::vars_os().map(|(k, _)| k);
    for key in inherited.chain(set) {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", IDENTITY_NAME)
        .env("GIT_AUTHOR_EMAIL", IDENTITY_EMAIL)
        .env("GIT_COMMITTER_NAME", IDENTITY_NAME)
        .env("GIT_COMMITTER_EMAIL", IDENTITY_EMAIL)
        .env("LC_ALL", "C")
}

/// A `git` command in `dir` with the isolated environment, for callers that need stdin, the
/// exit status or raw output.
pub fn git_cmd(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir);
    isolate(&mut cmd);
    cmd
}

/// Runs git in `dir`; panics with its stderr unless it succeeds; returns stdout without
/// trailing whitespace.
#[track_caller]
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir).args(args).output().expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
}

/// A bare origin and a working repository that commits and pushes to it, both in one temporary
/// directory: `origin.git` and `work`. The origin's `HEAD` names the branch it was created with.
pub struct Remote {
    pub dir: TempDir,
    /// The bare repository (`origin.git`).
    pub bare: PathBuf,
    /// The working repository (`work`), with `origin` pointing at the bare one.
    pub work: PathBuf,
}

impl Remote {
    /// An empty origin whose default branch is `branch`, and an empty working repository on
    /// that branch.
    #[track_caller]
    pub fn new(branch: &str) -> Remote {
        let dir = tempfile::tempdir().expect("tempdir");
        let bare = dir.path().join("origin.git");
        let work = dir.path().join("work");
        let initial = format!("--initial-branch={branch}");
        git(
            dir.path(),
            &["init", "-q", "--bare", &initial, "origin.git"],
        );
        git(dir.path(), &["init", "-q", &initial, "work"]);
        git(&work, &["remote", "add", "origin", bare.to_str().unwrap()]);
        Remote { dir, bare, work }
    }

    /// The temporary directory holding both repositories.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `rel` inside the temporary directory (not inside the working repository).
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The bare origin's path as a string, as a user passes it to `--repo`.
    pub fn repo(&self) -> String {
        self.bare.to_string_lossy().into_owned()
    }

    /// Writes `text` to `rel` in the working repository, creating directories.
    pub fn write(&self, rel: &str, text: &str) -> &Self {
        let file = self.work.join(rel);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
        self
    }

    /// Runs git in the working repository.
    #[track_caller]
    pub fn git(&self, args: &[&str]) -> String {
        git(&self.work, args)
    }

    /// Runs git in the bare origin.
    #[track_caller]
    pub fn bare_git(&self, args: &[&str]) -> String {
        git(&self.bare, args)
    }

    /// The working repository's current branch.
    #[track_caller]
    pub fn branch(&self) -> String {
        self.git(&["rev-parse", "--abbrev-ref", "HEAD"])
    }

    /// Commits everything (an empty commit when nothing changed) with `message`, pushes the
    /// current branch to origin, returns the new commit's sha.
    #[track_caller]
    pub fn commit_push(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.push()
    }

    /// Pushes `HEAD` to the branch of the same name on origin; returns `HEAD`'s sha.
    #[track_caller]
    pub fn push(&self) -> String {
        let branch = self.branch();
        self.git(&["push", "-q", "origin", &format!("HEAD:refs/heads/{branch}")]);
        self.git(&["rev-parse", "HEAD"])
    }

    /// The sha at the tip of origin's default branch.
    #[track_caller]
    pub fn remote_tip(&self) -> String {
        self.bare_git(&["rev-parse", "HEAD"])
    }

    /// Fast-forwards the current branch to what others pushed to origin.
    #[track_caller]
    pub fn pull(&self) {
        let branch = self.branch();
        self.git(&["pull", "-q", "--ff-only", "origin", &branch]);
    }
}

/// A repository history built by a fixture shell script in its own temporary directory, and the
/// commits it named: the script prints `name=sha` lines on stdout.
pub struct ScriptFixture {
    pub dir: TempDir,
    pub shas: HashMap<String, String>,
}

impl ScriptFixture {
    /// Runs `script` with bash in a new temporary directory, with a clean environment: only
    /// `PATH` and the isolated git environment. Panics with its stderr unless it succeeds.
    #[track_caller]
    pub fn run(script: &Path) -> ScriptFixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cmd = Command::new("bash");
        cmd.arg(script)
            .current_dir(dir.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default());
        let out = isolate(&mut cmd).output().expect("bash runs");
        assert!(
            out.status.success(),
            "{} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let shas = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        ScriptFixture { dir, shas }
    }

    /// The sha the script printed as `name=...`.
    #[track_caller]
    pub fn sha(&self, name: &str) -> String {
        self.shas
            .get(name)
            .unwrap_or_else(|| panic!("the fixture named no commit {name}"))
            .clone()
    }

    /// `rel` inside the fixture's directory.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_commits_and_pushes_with_the_fixed_identity() {
        let remote = Remote::new("trunk");
        remote.write("a/b.txt", "one\n");
        let first = remote.commit_push("first");
        assert_eq!(remote.remote_tip(), first);
        assert_eq!(
            remote.bare_git(&["symbolic-ref", "HEAD"]),
            "refs/heads/trunk"
        );
        assert_eq!(remote.bare_git(&["show", "trunk:a/b.txt"]), "one");
        assert_eq!(
            remote.bare_git(&["log", "-1", "--format=%an <%ae>|%cn <%ce>"]),
            "Human <human@example.com>|Human <human@example.com>"
        );
        // Nothing changed: still a new commit.
        let second = remote.commit_push("second");
        assert_ne!(second, first);
        assert_eq!(remote.remote_tip(), second);
        // Another branch is pushed to its own name, origin's default branch stays.
        remote.git(&["checkout", "-q", "-b", "side"]);
        let side = remote.commit_push("side");
        assert_eq!(remote.bare_git(&["rev-parse", "side"]), side);
        assert_eq!(remote.remote_tip(), second);
    }

    #[test]
    fn pull_fast_forwards_to_what_another_clone_pushed() {
        let remote = Remote::new("main");
        remote.commit_push("first");
        let other = remote.path("other");
        git(
            remote.root(),
            &["clone", "-q", remote.bare.to_str().unwrap(), "other"],
        );
        git(&other, &["commit", "-q", "--allow-empty", "-m", "theirs"]);
        git(&other, &["push", "-q", "origin", "HEAD:main"]);
        remote.pull();
        assert_eq!(remote.git(&["log", "-1", "--format=%s"]), "theirs");
    }

    #[test]
    fn the_environment_of_the_caller_does_not_reach_git() {
        // A GIT_DIR as inside a hook sends git to another repository: set after the
        // isolation, it does (so the check below can fail).
        let remote = Remote::new("main");
        let mut cmd = git_cmd(&remote.work);
        cmd.env("GIT_DIR", "/nonexistent");
        let out = cmd.args(["rev-parse", "--git-dir"]).output().unwrap();
        assert!(!out.status.success());
        // Set before the isolation, it is gone, and the identity is the fixed one.
        let mut cmd = Command::new("git");
        cmd.env("GIT_DIR", "/nonexistent")
            .env("GIT_AUTHOR_NAME", "Someone");
        isolate(&mut cmd);
        let out = cmd
            .current_dir(&remote.work)
            .args(["var", "GIT_AUTHOR_IDENT"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ident = String::from_utf8_lossy(&out.stdout);
        assert!(ident.starts_with("Human <human@example.com> "), "{ident}");
    }

    #[test]
    fn a_failing_git_command_panics_with_its_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let err = std::panic::catch_unwind(|| git(dir.path(), &["rev-parse", "HEAD"]))
            .expect_err("not a repository");
        let text = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            text.contains("rev-parse") && text.contains("not a git repository"),
            "{text}"
        );
    }

    #[test]
    fn a_script_fixture_reports_the_commits_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("fx.sh");
        std::fs::write(
            &script,
            "set -eu\ngit init -q -b main r\ncd r\n\
             GIT_AUTHOR_DATE=2026-01-01T10:00:00Z GIT_COMMITTER_DATE=2026-01-01T10:00:00Z \
             git commit -q --allow-empty -m one\n\
             echo \"ONE=$(git rev-parse HEAD)\"\necho \"WHO=$(git log -1 --format=%ae)\"\n\
             echo \"HOME_SET=${HOME:-no}\"\n",
        )
        .unwrap();
        let fx = ScriptFixture::run(&script);
        assert_eq!(fx.sha("WHO"), "human@example.com");
        assert_eq!(
            fx.sha("HOME_SET"),
            "no",
            "the script's environment is clean"
        );
        // Fixed dates and identity: the same commit on every machine.
        assert_eq!(fx.sha("ONE"), ScriptFixture::run(&script).sha("ONE"));
        assert!(fx.path("r/.git").is_dir());
    }
}
