//! Names the commit the binary is built from, for `greenlight --version`:
//! `GREENLIGHT_BUILD_COMMIT` is `<sha, 12 digits> <commit date, YYYY-MM-DD>` when this crate is
//! built inside its own git checkout, else `unknown` (a source tarball, a packaged crate, a copy
//! without `.git`, or no `git` on `PATH`). A checkout counts only when git's top level is this
//! workspace's root: a tarball unpacked inside some other repository does not take that
//! repository's commit. The script runs again when `HEAD` or the branch it names moves.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = commit(&manifest_dir).unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=GREENLIGHT_BUILD_COMMIT={commit}");
}

/// `git` in `dir`, its output's first line trimmed, or `None` when it fails. The variables by
/// which a caller (a git hook running cargo) could point git at another repository are removed.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_COMMON_DIR")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| line.to_owned())
}

fn commit(manifest_dir: &Path) -> Option<String> {
    // The workspace root: `crates/greenlight` is two levels below it.
    let root = manifest_dir.parent()?.parent()?.canonicalize().ok()?;
    let top = git(manifest_dir, &["rev-parse", "--show-toplevel"])?;
    if Path::new(&top).canonicalize().ok()? != root {
        return None;
    }
    watch_head(manifest_dir);
    let sha = git(manifest_dir, &["rev-parse", "--short=12", "HEAD"])?;
    let date = git(manifest_dir, &["show", "-s", "--format=%cs", "HEAD"])?;
    let plain = |s: &str| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    (plain(&sha) && plain(&date)).then(|| format!("{sha} {date}"))
}

/// Asks cargo to run this script again when `HEAD` changes (a checkout) or the branch it names
/// moves (a commit): the loose ref when there is one, else the directory it would be written
/// to, and `packed-refs`. Only existing paths are named (cargo reruns every time for a missing
/// one).
fn watch_head(manifest_dir: &Path) {
    let watch = |p: &Path| {
        if p.exists() {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    };
    let abs = |what: &str| {
        git(manifest_dir, &["rev-parse", "--path-format=absolute", what]).map(PathBuf::from)
    };
    let (Some(git_dir), Some(common)) = (abs("--git-dir"), abs("--git-common-dir")) else {
        return;
    };
    watch(&git_dir.join("HEAD"));
    if let Some(branch) = git(manifest_dir, &["symbolic-ref", "-q", "HEAD"]) {
        let loose = common.join(&branch);
        if loose.exists() {
            watch(&loose);
        } else if let Some(parent) = loose.parent() {
            watch(parent);
        }
    }
    watch(&common.join("packed-refs"));
}
