//! The in-process reads (ancestry, commit data, changed paths, resolve) give git's answers:
//! generated histories with branches, merges, unrelated roots, skewed clocks, file/directory
//! swaps, symlinks, submodules, odd paths and odd messages, built by `git fast-import` into a
//! real bare remote and cloned by greenlight; every answer read in process is compared with
//! the same question put to git (`git merge-base --is-ancestor`, `git log`, `git diff-tree`,
//! `git rev-parse`), with the commit-graph complete, absent and partial.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use greenlight_git::{Auth, Repo};
use greenlight_testkit::{git, git_cmd};

/// xorshift64*: seeded, the same histories every run.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// Paths that make git's ordering and type changes matter: `a.txt` < `a/b` < `a0`, a file
/// that becomes a directory and back (`x`, `x/y`), a path that is not UTF-8.
const PATHS: &[&str] = &[
    "a.txt",
    "a/b",
    "a/c/d",
    "a0",
    "x",
    "x/y",
    "x/y/z",
    "deploy/app.yaml",
    "\"caf\\351\"",
];

const MESSAGES: &[&str] = &[
    "fix: bump the image\n",
    "feat: a change\n\nWith a body.\n\nNav-Watchdog: app=web deadline=900 mode=arm\n",
    "",
    "\n\n  subject after blank lines\n",
    "windows line\r\n\r\nbody\r\n",
    "no trailing newline",
    "Revert \"x\"\n\nThis reverts commit 0123456789abcdef0123456789abcdef01234567.\n",
    "unicode: é ü 漢字 🚀\n",
];

/// A fast-import stream of `n` commits over a few branches and roots, and the refs it makes.
fn history(seed: u64, n: usize) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let mut marks: Vec<usize> = Vec::new();
    // Branch name -> its tip mark.
    let mut tips: BTreeMap<String, usize> = BTreeMap::new();
    let mut roots = 0;
    for mark in 1..=n {
        let new_root = marks.is_empty() || rng.chance(4);
        let branch = if new_root {
            roots += 1;
            if roots == 1 {
                "main".to_owned()
            } else {
                format!("root{roots}")
            }
        } else if rng.chance(15) {
            format!("b{}", rng.below(4))
        } else {
            tips.keys().nth(rng.below(tips.len())).unwrap().clone()
        };
        let first_parent = if new_root {
            None
        } else {
            Some(
                tips.get(&branch)
                    .copied()
                    .unwrap_or_else(|| *rng.pick(&marks)),
            )
        };
        let merge = (first_parent.is_some() && rng.chance(25)).then(|| {
            if rng.chance(60) {
                *tips.values().nth(rng.below(tips.len())).unwrap()
            } else {
                *rng.pick(&marks)
            }
        });
        // Clocks that disagree with the graph: a child may be older than its parents.
        let time = 1_700_000_000 + mark as i64 * 60 + (rng.below(200_000) as i64 - 100_000);
        let zone = *rng.pick(&["+0000", "+0530", "-0800", "+1400"]);
        let who = match rng.below(10) {
            0 => "<nobody@example.com>".to_owned(),
            1 => "Bö Ünicode <bo@example.com>".to_owned(),
            _ => "Ann Example <ann@example.com>".to_owned(),
        };
        writeln!(out, "commit refs/heads/{branch}").unwrap();
        writeln!(out, "mark :{mark}").unwrap();
        writeln!(out, "author {who} {time} {zone}").unwrap();
        writeln!(out, "committer Ann Example <ann@example.com> {time} {zone}").unwrap();
        if rng.chance(5) {
            writeln!(out, "encoding ISO-8859-1").unwrap();
        }
        let mut message: Vec<u8> = rng.pick(MESSAGES).as_bytes().to_vec();
        if rng.chance(4) {
            message.extend_from_slice(b"latin-1 \xe9\n");
        }
        writeln!(out, "data {}", message.len()).unwrap();
        out.extend_from_slice(&message);
        writeln!(out).unwrap();
        if let Some(p) = first_parent {
            writeln!(out, "from :{p}").unwrap();
        }
        if let Some(m) = merge {
            writeln!(out, "merge :{m}").unwrap();
        }
        for _ in 0..rng.below(4) + usize::from(new_root) {
            let path = *rng.pick(PATHS);
            match rng.below(10) {
                0 | 1 => writeln!(out, "D {path}").unwrap(),
                2 => writeln!(out, "M 120000 inline {path}\ndata 6\ntarget").unwrap(),
                3 => writeln!(
                    out,
                    "M 160000 {:040x} {path}",
                    rng.next() as u128 * 0x1_0000_0001
                )
                .unwrap(),
                4 => writeln!(out, "M 100755 inline {path}\ndata 3\nrun").unwrap(),
                _ => {
                    let body = format!("{mark} {}", rng.below(3));
                    writeln!(out, "M 100644 inline {path}\ndata {}\n{body}", body.len()).unwrap()
                }
            }
        }
        writeln!(out).unwrap();
        tips.insert(branch, mark);
        marks.push(mark);
    }
    // An annotated tag: a tag object's id names a commit only after peeling.
    writeln!(
        out,
        "tag v1\nfrom :{}\ntagger Ann Example <ann@example.com> 1700000000 +0000\ndata 4\nv1 \n",
        n / 2
    )
    .unwrap();
    out
}

/// A bare remote holding the generated history; its commits by mark, in mark order.
fn remote(dir: &Path, seed: u64, n: usize) -> Vec<String> {
    let remote = dir.join("remote.git");
    git(dir, &["init", "--quiet", "--bare", "remote.git"]);
    let marks = dir.join("marks");
    let mut child = git_cmd(&remote)
        .args(["fast-import", "--quiet"])
        .arg(format!("--export-marks={}", marks.display()))
        .stdin(Stdio::piped())
        .spawn()
        .expect("git fast-import runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&history(seed, n))
        .unwrap();
    assert!(child.wait().unwrap().success(), "fast-import (seed {seed})");
    git(&remote, &["symbolic-ref", "HEAD", "refs/heads/main"]);
    let text = std::fs::read_to_string(marks).unwrap();
    let mut by_mark: Vec<(usize, String)> = text
        .lines()
        .map(|l| {
            let (m, sha) = l.split_once(' ').unwrap();
            (m.trim_start_matches(':').parse().unwrap(), sha.to_owned())
        })
        .collect();
    by_mark.sort();
    by_mark.into_iter().map(|(_, sha)| sha).collect()
}

/// Greenlight's clone of the remote in `dir`, opened afresh (the reader loads what is on disk).
fn open(dir: &Path) -> Repo {
    Repo::open_or_clone(
        dir.join("remote.git").to_str().unwrap(),
        &dir.join("data/clone"),
        Auth::default(),
    )
    .unwrap()
}

/// Asks `repo` the same question in process and of git; both must agree. Returns whether the
/// in-process reader answered it.
fn both<T: PartialEq + std::fmt::Debug>(repo: &Repo, what: &str, ask: impl Fn(&Repo) -> T) -> bool {
    repo.set_in_process_reads(true);
    let before = repo.answered_in_process();
    let ours = ask(repo);
    let answered = repo.answered_in_process() > before;
    repo.set_in_process_reads(false);
    let gits = ask(repo);
    repo.set_in_process_reads(true);
    assert_eq!(ours, gits, "{what}: in process vs git");
    answered
}

fn ancestry_agrees(repo: &Repo, shas: &[String], rng: &mut Rng, label: &str) -> usize {
    assert!(
        repo.reads_in_process(),
        "{label}: the clone is read in process"
    );
    let mut answered = 0;
    let mut yes = 0;
    for _ in 0..220 {
        let (a, d) = (rng.pick(shas), rng.pick(shas));
        let ours = repo.is_ancestor(a, d).unwrap();
        yes += usize::from(ours == Some(true));
        answered += usize::from(both(
            repo,
            &format!("{label}: is {a} an ancestor of {d}"),
            |r| r.is_ancestor(a, d).unwrap(),
        ));
    }
    // Both outcomes occur, or the comparison would prove little.
    assert!(
        yes > 10 && yes < 210,
        "{label}: {yes} of 220 pairs are ancestors"
    );
    answered
}

#[test]
fn in_process_reads_answer_as_git_does() {
    for seed in 1..=4u64 {
        let tmp = tempfile::tempdir().unwrap();
        let shas = remote(tmp.path(), seed, 90);
        let repo = open(tmp.path());
        let mut rng = Rng::new(seed);

        // Commit data and changed paths, for every commit.
        let mut commits_in_process = 0;
        let mut paths_in_process = 0;
        for sha in &shas {
            commits_in_process += usize::from(both(&repo, &format!("commit {sha}"), |r| {
                r.commit(sha).map_err(|e| e.to_string())
            }));
            paths_in_process += usize::from(both(&repo, &format!("changed paths of {sha}"), |r| {
                r.changed_paths(sha).unwrap()
            }));
            let base = rng.pick(&shas);
            both(&repo, &format!("paths of {sha} against {base}"), |r| {
                r.changed_paths_against(sha, base).unwrap()
            });
        }
        // Most commits are canonical (the rest, by design, go to git).
        assert!(
            commits_in_process * 10 >= shas.len() * 6,
            "seed {seed}: {commits_in_process} of {} commits read in process",
            shas.len()
        );
        assert_eq!(
            paths_in_process,
            shas.len(),
            "seed {seed}: every diff in process"
        );

        // Revisions: full ids, a missing id, a tag object's id, a prefix, a ref.
        let missing = "0123456789abcdef0123456789abcdef01234567".to_owned();
        let tag = git(&tmp.path().join("remote.git"), &["rev-parse", "v1"]);
        let prefix = shas[3][..12].to_owned();
        for rev in [
            &shas[0],
            &missing,
            &tag,
            &prefix,
            &"refs/remotes/origin/main".to_owned(),
        ] {
            both(&repo, &format!("resolve {rev}"), |r| {
                r.resolve(rev).unwrap()
            });
            both(&repo, &format!("is {rev} an ancestor of main's tip"), |r| {
                r.is_ancestor(rev, shas.last().unwrap()).unwrap()
            });
        }

        // New commits between two revisions: random pairs (mostly with a merge between, or
        // none an ancestor of the other: git answers), and each commit against an ancestor a
        // few first parents back (a line, answered in process when no merge is on it).
        let mut lines_in_process = 0;
        for _ in 0..60 {
            let (a, b) = (rng.pick(&shas), rng.pick(&shas));
            both(&repo, &format!("new commits {a}..{b}"), |r| {
                r.new_commits(Some(a), b).map_err(|e| e.to_string())
            });
        }
        for d in &shas {
            let mut a = d.clone();
            for _ in 0..rng.below(4) {
                match repo.commit(&a).unwrap().parents.first() {
                    Some(p) => a = p.clone(),
                    None => break,
                }
            }
            lines_in_process += usize::from(both(&repo, &format!("new commits {a}..{d}"), |r| {
                r.new_commits(Some(&a), d).map_err(|e| e.to_string())
            }));
        }
        assert!(
            lines_in_process * 3 >= shas.len(),
            "seed {seed}: {lines_in_process} of {} lines listed in process",
            shas.len()
        );
        for (a, b) in [
            (&missing, &shas[5]),
            (&shas[5], &missing),
            (&tag, &shas[80]),
        ] {
            both(&repo, &format!("new commits {a}..{b}"), |r| {
                r.new_commits(Some(a), b).map_err(|e| e.to_string())
            });
        }

        // Ancestry with the commit-graph greenlight writes, with none, and with a partial one.
        let answered = ancestry_agrees(&repo, &shas, &mut rng, "complete commit-graph");
        assert!(answered > 200, "seed {seed}: {answered} of 220 in process");
        // Every answer from a descendant's ancestor set, built whole (budget 0); then extended
        // from the set of an earlier descendant it reaches (descendants in mark order: a
        // branch moving on).
        repo.set_ancestry_walk_budget(0);
        ancestry_agrees(&repo, &shas, &mut rng, "ancestor sets");
        // A budget of a few commits: a descendant a few commits on from the last one asked
        // about extends its set.
        repo.set_ancestry_walk_budget(3);
        let mut yes = 0;
        for d in &shas {
            for _ in 0..3 {
                let a = rng.pick(&shas);
                yes += usize::from(repo.is_ancestor(a, d).unwrap() == Some(true));
                assert!(
                    both(
                        &repo,
                        &format!("sets in order: is {a} an ancestor of {d}"),
                        |r| { r.is_ancestor(a, d).unwrap() }
                    ),
                    "answered in process"
                );
            }
        }
        assert!(
            yes > 10,
            "seed {seed}: {yes} ancestors among the ordered questions"
        );
        let info = tmp.path().join("data/clone/.git/objects/info");
        let _ = std::fs::remove_file(info.join("commit-graph"));
        let _ = std::fs::remove_dir_all(info.join("commit-graphs"));
        let repo = open(tmp.path());
        ancestry_agrees(&repo, &shas, &mut rng, "no commit-graph");
        let clone = tmp.path().join("data/clone");
        let mut child = git_cmd(&clone)
            .args(["commit-graph", "write", "--stdin-commits"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let half = shas[..shas.len() / 2].join("\n");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(half.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
        let repo = open(tmp.path());
        ancestry_agrees(&repo, &shas, &mut rng, "partial commit-graph");
    }
}

/// A commit fetched after the reader was opened (a new pack) is found in process.
#[test]
fn commits_fetched_later_are_read_in_process() {
    let tmp = tempfile::tempdir().unwrap();
    let shas = remote(tmp.path(), 7, 20);
    let repo = open(tmp.path());
    let tip = shas.last().unwrap();
    assert_eq!(repo.commit(tip).unwrap().sha, *tip);

    let human = tmp.path().join("human");
    git(tmp.path(), &["clone", "--quiet", "remote.git", "human"]);
    std::fs::write(human.join("new.txt"), "new").unwrap();
    git(&human, &["add", "new.txt"]);
    git(&human, &["commit", "--quiet", "-m", "later"]);
    git(&human, &["push", "--quiet", "origin", "HEAD:main"]);
    let later = git(&human, &["rev-parse", "HEAD"]);

    // A descendant's ancestor set kept over the old graph is not used over the new one.
    repo.set_ancestry_walk_budget(0);
    assert_eq!(repo.is_ancestor(&shas[0], tip).unwrap(), Some(true));
    let before = repo.answered_in_process();
    assert_eq!(repo.resolve(&later).unwrap(), None, "not fetched yet");
    assert_eq!(repo.is_ancestor(&later, &later).unwrap(), None);
    assert_eq!(repo.fetch("main").unwrap(), later);
    assert_eq!(repo.resolve(&later).unwrap(), Some(later.clone()));
    let main_tip = git(&tmp.path().join("remote.git"), &["rev-parse", "main~1"]);
    assert_eq!(repo.is_ancestor(&main_tip, &later).unwrap(), Some(true));
    assert_eq!(repo.is_ancestor(&later, tip).unwrap(), Some(false));
    assert_eq!(repo.commit(&later).unwrap().subject, "later");
    assert_eq!(
        repo.changed_paths(&later).unwrap(),
        vec!["new.txt".to_owned()]
    );
    assert_eq!(
        repo.new_commits(Some(&main_tip), &later).unwrap(),
        vec![later.clone()]
    );
    assert_eq!(
        repo.answered_in_process() - before,
        8,
        "every one of those answered in process"
    );

    // A commit-graph written whole again puts commits at new positions: the sets kept over
    // the old one must not answer (each question is held to git's answer).
    assert_eq!(repo.is_ancestor(&shas[0], &later).unwrap(), Some(true));
    git(
        &tmp.path().join("data/clone"),
        &["commit-graph", "write", "--reachable"],
    );
    for a in shas.iter().chain([&later]) {
        for d in [tip, &later] {
            both(
                &repo,
                &format!("after the rewrite: is {a} an ancestor of {d}"),
                |r| r.is_ancestor(a, d).unwrap(),
            );
        }
    }
}

/// Grafts (`info/grafts`) rewrite the parents git reads: a clone with them is left to git.
#[test]
fn a_clone_with_grafts_is_left_to_git() {
    let tmp = tempfile::tempdir().unwrap();
    let shas = remote(tmp.path(), 3, 10);
    assert!(open(tmp.path()).reads_in_process());
    let info = tmp.path().join("data/clone/.git/info");
    std::fs::create_dir_all(&info).unwrap();
    // The newest commit made a root.
    std::fs::write(info.join("grafts"), format!("{}\n", shas[9])).unwrap();
    let repo = open(tmp.path());
    assert!(!repo.reads_in_process());
    assert_eq!(repo.commit(&shas[9]).unwrap().parents, Vec::<String>::new());
}
