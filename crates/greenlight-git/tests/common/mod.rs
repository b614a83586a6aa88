//! Test fixtures: real repositories built by the shell scripts in `tests/fixtures/`, and a
//! git runner for the tests' own checks, isolated from the machine's git configuration.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

/// A fixture built in its own temporary directory: `remote.git` (bare), `human` (a clone
/// a human pushes from), and the named commits the script printed as `name=sha`.
pub struct Fixture {
    pub tmp: TempDir,
    pub shas: HashMap<String, String>,
}

/// A `git` command isolated from the user's and the system's configuration, with a fixed
/// human identity.
pub fn git_cmd(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Human")
        .env("GIT_AUTHOR_EMAIL", "human@example.com")
        .env("GIT_COMMITTER_NAME", "Human")
        .env("GIT_COMMITTER_EMAIL", "human@example.com")
        .env("LC_ALL", "C");
    cmd
}

/// Runs git in `dir`, panics with its stderr unless it succeeds, returns trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir).args(args).output().expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
}

impl Fixture {
    pub fn build(script: &str) -> Fixture {
        let tmp = tempfile::tempdir().expect("tempdir");
        let script_path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(script);
        // The script gets a clean environment: only PATH, isolated git config, a fixed identity.
        let out = Command::new("bash")
            .arg(&script_path)
            .current_dir(tmp.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "Human")
            .env("GIT_AUTHOR_EMAIL", "human@example.com")
            .env("GIT_COMMITTER_NAME", "Human")
            .env("GIT_COMMITTER_EMAIL", "human@example.com")
            .env("LC_ALL", "C")
            .output()
            .expect("run fixture script");
        assert!(
            out.status.success(),
            "{script} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let shas = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Fixture { tmp, shas }
    }

    pub fn sha(&self, name: &str) -> String {
        self.shas
            .get(name)
            .unwrap_or_else(|| panic!("fixture has no commit {name}"))
            .clone()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// The bare remote's path, as a user would pass it.
    pub fn remote(&self) -> String {
        self.path("remote.git").display().to_string()
    }

    /// Where greenlight's clone goes (inside a data directory that does not exist yet).
    pub fn clone_dir(&self) -> PathBuf {
        self.path("data/clone")
    }

    pub fn human(&self, args: &[&str]) -> String {
        git(&self.path("human"), args)
    }

    pub fn on_remote(&self, args: &[&str]) -> String {
        git(&self.path("remote.git"), args)
    }

    pub fn open(&self) -> greenlight_git::Repo {
        greenlight_git::Repo::open_or_clone(
            &self.remote(),
            &self.clone_dir(),
            greenlight_git::Auth::default(),
        )
        .expect("open_or_clone")
    }
}
