//! What the repository port costs per call, against the bare `git` command it wraps,
//! measured in the same run on the same repository (`cargo bench -p greenlight-git`).
//! The peer is `git` with no isolation options; the ratio is the port's overhead
//! (isolation `-c` options, environment scrubbing, output parsing, extra resolves).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use greenlight_git::{Auth, Repo};
use greenlight_testkit::ScriptFixture;

const ROUNDS: u32 = 200;

fn main() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/history.sh");
    let fx = ScriptFixture::run(&script);
    let shas = &fx.shas;
    let remote = fx.path("remote.git");
    let dir = fx.path("data/clone");
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
