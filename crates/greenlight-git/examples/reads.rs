//! The repository reads the judge asks, in process or by a git process each, on a large
//! generated history: what `bench/reads.sh` times as whole processes, side by side.
//!
//! ```sh
//! reads make DIR [COMMITS]            # a remote of COMMITS commits (default 50000), and greenlight's clone
//! reads ask DIR READER KIND [COUNT]   # READER: in-process | git; KIND: near | far | far-walk | far-moving | unrelated | commits
//! ```
//!
//! `near`: is a commit a few hundred back an ancestor of the tip (a watched commit against the
//! revision Argo CD synced), and the reverse (no); `far`: the root against the tip, asked again
//! (answered from the tip's ancestor set after the first); `far-walk`: the same with no set kept
//! (each question walks the history); `far-moving`: the root against each of main's last COUNT
//! first-parent commits in turn (a new tip every question); `unrelated`:
//! a commit of a history that shares nothing with the branch; `commits`: a new commit's data
//! and changed paths, as the runtime reads every commit a fetch brings.

use std::io::Write;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

use greenlight_git::{Auth, Repo};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args[..] {
        ["make", dir] => make(Path::new(dir), 50_000),
        ["make", dir, n] => make(Path::new(dir), n.parse().expect("COMMITS is a number")),
        ["ask", dir, reader, kind] => ask(Path::new(dir), reader, kind, 200),
        ["ask", dir, reader, kind, n] => ask(
            Path::new(dir),
            reader,
            kind,
            n.parse().expect("COUNT is a number"),
        ),
        _ => {
            eprintln!("usage: reads make DIR [COMMITS] | reads ask DIR READER KIND [COUNT]");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}

fn git(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null");
    cmd
}

/// A main branch of `n` commits (a merge of a short side branch every 50), each changing one
/// or two of 400 files in 20 directories, and one unrelated root branch; then greenlight's
/// clone of it (which writes the commit-graph, as the daemon's clone does).
fn make(dir: &Path, n: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let remote = dir.join("remote.git");
    assert!(
        git(dir)
            .args(["init", "--quiet", "--bare", "remote.git"])
            .status()
            .unwrap()
            .success()
    );
    let mut child = git(&remote)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufWriter::new(child.stdin.take().unwrap());
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let who = "Ann Example <ann@example.com>";
    let commit = |out: &mut dyn Write,
                  refname: &str,
                  mark: usize,
                  from: Option<usize>,
                  merge: Option<usize>,
                  r: u64| {
        let t = 1_600_000_000 + mark as u64 * 60;
        let msg = format!(
            "change {mark}\n\nNav-Watchdog: app=app{} mode=arm\n",
            r % 100
        );
        write!(out, "commit {refname}\nmark :{mark}\nauthor {who} {t} +0000\ncommitter {who} {t} +0000\ndata {}\n{msg}\n", msg.len()).unwrap();
        if let Some(f) = from {
            writeln!(out, "from :{f}").unwrap();
        }
        if let Some(m) = merge {
            writeln!(out, "merge :{m}").unwrap();
        }
        for k in 0..1 + r % 2 {
            let body = format!("replicas: {}\n", r % 7 + k);
            writeln!(
                out,
                "M 100644 inline apps/dir{}/file{}.yaml\ndata {}\n{body}",
                r % 20,
                (r >> 8) % 20,
                body.len()
            )
            .unwrap();
        }
        writeln!(out).unwrap();
    };
    let mut mark = 0;
    let mut tip: Option<usize> = None;
    while mark < n {
        if mark % 50 == 49 && tip.is_some() {
            // A side branch of two commits, merged back.
            let base = tip;
            mark += 1;
            commit(&mut out, "refs/heads/side", mark, base, None, next());
            mark += 1;
            commit(
                &mut out,
                "refs/heads/side",
                mark,
                Some(mark - 1),
                None,
                next(),
            );
            let side = mark;
            mark += 1;
            commit(&mut out, "refs/heads/main", mark, tip, Some(side), next());
        } else {
            mark += 1;
            commit(&mut out, "refs/heads/main", mark, tip, None, next());
        }
        tip = Some(mark);
    }
    mark += 1;
    commit(&mut out, "refs/heads/unrelated", mark, None, None, next());
    drop(out);
    assert!(child.wait().unwrap().success());
    assert!(
        git(&remote)
            .args(["symbolic-ref", "HEAD", "refs/heads/main"])
            .status()
            .unwrap()
            .success()
    );
    let repo = open(dir);
    println!("made {} commits in {}", mark, repo.dir().display());
}

fn open(dir: &Path) -> Repo {
    Repo::open_or_clone(
        dir.join("remote.git").to_str().unwrap(),
        &dir.join("clone"),
        Auth::default(),
    )
    .unwrap()
}

/// The root of main's history.
fn root(repo: &Repo) -> String {
    let out = git(repo.dir())
        .args(["rev-list", "--max-parents=0", "refs/remotes/origin/main"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn ask(dir: &Path, reader: &str, kind: &str, count: usize) {
    let repo = open(dir);
    match reader {
        "in-process" => assert!(repo.reads_in_process(), "the clone can be read in process"),
        "git" => repo.set_in_process_reads(false),
        other => panic!("READER is in-process or git, not {other}"),
    }
    let rev = |r: &str| {
        let out = git(repo.dir()).args(["rev-parse", r]).output().unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let tip = rev("refs/remotes/origin/main");
    match kind {
        "near" => {
            let old = rev("refs/remotes/origin/main~300");
            for i in 0..count {
                if i % 2 == 0 {
                    assert_eq!(repo.is_ancestor(&old, &tip).unwrap(), Some(true));
                } else {
                    assert_eq!(repo.is_ancestor(&tip, &old).unwrap(), Some(false));
                }
            }
        }
        "far" | "far-walk" => {
            if kind == "far-walk" {
                // No ancestor set: every question walks the whole history.
                repo.set_ancestry_walk_budget(usize::MAX);
            }
            let root = root(&repo);
            for _ in 0..count {
                assert_eq!(repo.is_ancestor(&root, &tip).unwrap(), Some(true));
            }
        }
        "far-moving" => {
            // The branch moving on one commit at a time: each question against a new tip.
            let root = root(&repo);
            let out = git(repo.dir())
                .args([
                    "rev-list",
                    "--first-parent",
                    "--reverse",
                    &format!("-{count}"),
                    "refs/remotes/origin/main",
                ])
                .output()
                .unwrap();
            let tips = String::from_utf8(out.stdout).unwrap();
            assert_eq!(tips.lines().count(), count, "enough first-parent commits");
            for tip in tips.lines() {
                assert_eq!(repo.is_ancestor(&root, tip).unwrap(), Some(true));
            }
        }
        "unrelated" => {
            let other = rev("refs/remotes/origin/unrelated");
            for _ in 0..count {
                assert_eq!(repo.is_ancestor(&other, &tip).unwrap(), Some(false));
            }
        }
        "commits" => {
            let out = git(repo.dir())
                .args(["rev-list", &format!("-{count}"), "refs/remotes/origin/main"])
                .output()
                .unwrap();
            let shas = String::from_utf8(out.stdout).unwrap();
            for sha in shas.lines() {
                let data = repo.commit(sha).unwrap();
                let paths = if data.parents.len() > 1 {
                    repo.changed_paths_against(sha, &data.parents[0]).unwrap()
                } else {
                    repo.changed_paths(sha).unwrap()
                };
                std::hint::black_box(paths);
            }
        }
        other => {
            panic!("KIND is near, far, far-walk, far-moving, unrelated or commits, not {other}")
        }
    }
    let expected_in_process = if reader == "git" { 0 } else { count as u64 };
    assert!(
        repo.answered_in_process() >= expected_in_process,
        "{} of {count} answered in process",
        repo.answered_in_process()
    );
}
