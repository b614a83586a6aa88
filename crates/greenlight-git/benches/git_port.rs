//! What the repository port costs per call, against the bare `git` command it wraps,
//! measured in the same run on the same repository (`cargo bench -p greenlight-git`).
//! The peer is `git` with no isolation options; the ratio is the port's overhead
//! (isolation `-c` options, environment scrubbing, output parsing, extra resolves).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use greenlight_git::{Auth, Repo};

const ROUNDS: u32 = 200;

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/history.sh");
    let out = Command::new("bash")
        .arg(&script)
        .current_dir(tmp.path())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "Bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shas: std::collections::HashMap<String, String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let remote = tmp.path().join("remote.git");
    let dir = tmp.path().join("data/clone");
    let repo = Repo::open_or_clone(remote.to_str().unwrap(), &dir, Auth::default()).unwrap();
    repo.fetch("main").unwrap();
    let (a, b, r) = (&shas["A"], &shas["B"], &shas["R"]);

    let raw = |args: &[&str]| {
        let ok = Command::new("git")
            .current_dir(&dir)
            .args(args)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok);
    };

    println!(
        "{:<28} {:>12} {:>12} {:>7}",
        "call", "port", "bare git", "ratio"
    );
    row(
        "is_ancestor",
        time(|| assert_eq!(repo.is_ancestor(a, r).unwrap(), Some(true))),
        time(|| raw(&["merge-base", "--is-ancestor", a, r])),
    );
    row(
        "commit",
        time(|| assert_eq!(&repo.commit(b).unwrap().sha, b)),
        time(|| raw(&["log", "-1", "--format=%H%x00%P%x00%an%x00%B", b])),
    );
    row(
        "changed_paths",
        time(|| assert!(!repo.changed_paths(b).unwrap().is_empty())),
        time(|| raw(&["diff-tree", "-r", "--name-only", "--root", b])),
    );
    row(
        "fetch (nothing new)",
        time(|| assert_eq!(&repo.fetch("main").unwrap(), r)),
        time(|| raw(&["fetch", "--quiet", "origin", "main"])),
    );
}

fn time(mut f: impl FnMut()) -> Duration {
    f(); // warm the page cache and git's own startup
    let start = Instant::now();
    for _ in 0..ROUNDS {
        f();
    }
    start.elapsed() / ROUNDS
}

fn row(name: &str, port: Duration, peer: Duration) {
    println!(
        "{name:<28} {:>10.2}ms {:>10.2}ms {:>6.2}x",
        port.as_secs_f64() * 1e3,
        peer.as_secs_f64() * 1e3,
        port.as_secs_f64() / peer.as_secs_f64()
    );
}
