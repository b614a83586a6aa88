//! `greenlight --version` names the commit the binary was built from (`crates/greenlight/build.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// `git` in `dir` with none of the variables that point it elsewhere; `None` when it fails.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_COMMON_DIR")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[test]
fn version_names_the_commit_built_from() {
    let out = Command::new(env!("CARGO_BIN_EXE_greenlight"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    let shown = String::from_utf8(out.stdout).unwrap();
    let root: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap();
    let in_checkout = git(&root, &["rev-parse", "--show-toplevel"])
        .and_then(|top| Path::new(&top).canonicalize().ok())
        .is_some_and(|top| top == root);
    let commit = if in_checkout {
        let full = git(&root, &["rev-parse", "HEAD"]).unwrap();
        let short = git(&root, &["rev-parse", "--short=12", "HEAD"]).unwrap();
        assert!(full.starts_with(&short), "{full} {short}");
        let date = git(&root, &["show", "-s", "--format=%cs", "HEAD"]).unwrap();
        assert_eq!(date.len(), "2026-12-04".len(), "{date}");
        format!("{short} {date}")
    } else {
        "unknown".to_owned()
    };
    assert_eq!(
        shown,
        format!("greenlight {} ({commit})\n", env!("CARGO_PKG_VERSION"))
    );
}
