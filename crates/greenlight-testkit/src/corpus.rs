//! The real-world manifest corpus, which is not part of the repository: `$GREENLIGHT_CORPUS`
//! when set, else `shared/corpus/manifests` beside the clone. A test over it runs when it is
//! present; when it is absent the test says so loudly on stderr and passes, except under
//! `CI=true` (CI always has it), where absence fails.

use std::io::Write;
use std::path::Path;

/// The corpus directory for the test `test` of the crate at `manifest_dir` (the caller's
/// `env!("CARGO_MANIFEST_DIR")`, `<clone>/crates/<crate>`); `None` when it is absent outside CI,
/// after saying on stderr that the test did not run.
pub fn corpus(manifest_dir: &str, test: &str) -> Option<String> {
    let (dir, how) = match std::env::var("GREENLIGHT_CORPUS") {
        Ok(d) if !d.is_empty() => (d, "from GREENLIGHT_CORPUS"),
        // crates/<crate> -> the clone -> the directory holding it.
        _ => (
            Path::new(manifest_dir)
                .ancestors()
                .nth(3)
                .unwrap_or(Path::new("/"))
                .join("shared/corpus/manifests")
                .display()
                .to_string(),
            "shared/corpus/manifests beside the clone; set GREENLIGHT_CORPUS to look elsewhere",
        ),
    };
    if Path::new(&dir).is_dir() {
        return Some(dir);
    }
    let ci = std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    let what = format!("the real-world manifest corpus is missing: no directory at {dir} ({how})");
    assert!(!ci, "{what}; CI=true, so a missing corpus fails {test}");
    // Straight to the process's stderr: the test harness captures `eprintln!` of passing
    // tests, and this must be seen.
    let _ = std::io::stderr().write_all(
        format!(
            "\n{bar}\nNOT RUN: {test}\n{what}.\nThe test passes without checking anything; with CI=true it fails.\n{bar}\n",
            bar = "=".repeat(78)
        )
        .as_bytes(),
    );
    None
}
