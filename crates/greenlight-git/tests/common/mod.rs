//! Test fixtures: real repositories built by the shell scripts in `tests/fixtures/`, run by the
//! test kit with an isolated git environment. The tests' own git checks use the kit's `git`.
#![allow(dead_code)]

use std::ops::Deref;
use std::path::{Path, PathBuf};

use greenlight_testkit::{ScriptFixture, git};

/// A fixture built in its own temporary directory: `remote.git` (bare), `human` (a clone
/// a human pushes from), and the named commits the script printed as `name=sha`.
pub struct Fixture(ScriptFixture);

impl Deref for Fixture {
    type Target = ScriptFixture;
    fn deref(&self) -> &ScriptFixture {
        &self.0
    }
}

impl Fixture {
    pub fn build(script: &str) -> Fixture {
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(script);
        Fixture(ScriptFixture::run(&script))
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
