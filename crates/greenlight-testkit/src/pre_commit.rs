//! Real pre-commit (PyPI's) for the tests of the repository's pre-commit hooks. `scripts/test`
//! installs it into a virtual environment of its own, [`VENV`], when it is missing; [`binary`]
//! finds it and fails loudly, naming that script, when it is not there. [`command`] runs it with
//! the isolated git environment and a pre-commit home of the caller's, so nothing is read from or
//! written to the user's `~/.cache/pre-commit`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The virtual environment `scripts/test` installs pre-commit into.
pub const VENV: &str = "/var/tmp/greenlight-tools/pre-commit-venv";
/// The `pre-commit` script of [`VENV`].
pub const INSTALLED: &str = "/var/tmp/greenlight-tools/pre-commit-venv/bin/pre-commit";

/// The pre-commit executable: `$GREENLIGHT_PRE_COMMIT`, else [`INSTALLED`], else `pre-commit` on
/// `PATH`. Panics, saying how to get it, when there is none.
#[track_caller]
pub fn binary() -> PathBuf {
    if let Some(p) = std::env::var_os("GREENLIGHT_PRE_COMMIT").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "GREENLIGHT_PRE_COMMIT={} is not a file: point it at a pre-commit executable, or \
             unset it",
            p.display()
        );
        return p;
    }
    crate::process::find_tool(
        "pre-commit",
        &[INSTALLED],
        &format!(
            "pre-commit is missing (GREENLIGHT_PRE_COMMIT unset, no {INSTALLED}, none on PATH): \
             run scripts/test, which installs pre-commit from PyPI into {VENV}"
        ),
    )
}

/// `pre-commit --version`, e.g. `pre-commit 4.7.0`.
pub fn version() -> String {
    crate::process::first_line_of(&binary(), &["--version"])
}

/// `pre-commit` in `dir` with the isolated git environment (git is what pre-commit runs
/// underneath, and what runs its installed hooks), `PRE_COMMIT_HOME` set to `home`, and none of
/// the variables that change what pre-commit runs (`SKIP`, `PRE_COMMIT_*`) inherited.
pub fn command(dir: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(binary());
    cmd.current_dir(dir);
    isolate(&mut cmd, home);
    cmd
}

/// Gives `cmd` (pre-commit, or a `git commit` that runs pre-commit's installed hooks) the
/// isolated git environment and `PRE_COMMIT_HOME=home`, with `SKIP` and every other
/// `PRE_COMMIT_*` variable removed.
pub fn isolate<'c>(cmd: &'c mut Command, home: &Path) -> &'c mut Command {
    for (key, _) in std::env::vars_os() {
        if key == "SKIP" || key.to_string_lossy().starts_with("PRE_COMMIT") {
            cmd.env_remove(key);
        }
    }
    crate::git::isolate(cmd)
        .env("PRE_COMMIT_HOME", home)
        .env("PRE_COMMIT_COLOR", "never")
}
