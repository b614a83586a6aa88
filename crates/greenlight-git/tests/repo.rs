//! The read path over real repositories: clone/open, the remote's branches, new commits,
//! commit data, changed paths, ancestry, resolution.

mod common;

use std::collections::HashSet;

use common::Fixture;
use greenlight_git::{Auth, Error, Repo};
use greenlight_testkit::git;

#[test]
fn clones_once_then_reopens_the_same_clone() {
    let fx = Fixture::build("history.sh");
    let repo = fx.open();
    assert!(fx.clone_dir().join(".git").is_dir());
    assert_eq!(repo.dir(), fx.clone_dir());
    // The staging directory of the clone is gone; only the clone is in the data dir.
    let entries: Vec<_> = std::fs::read_dir(fx.path("data"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, vec!["clone".to_owned()]);
    // Ancestry queries get a commit-graph from the start.
    let graphs = fx.clone_dir().join(".git/objects/info/commit-graphs");
    assert!(graphs.join("commit-graph-chain").is_file());

    let marker = fx.clone_dir().join(".git/greenlight-test-marker");
    std::fs::write(&marker, "kept").unwrap();
    let again = fx.open();
    assert!(marker.exists(), "reopening must not re-clone");
    assert_eq!(again.resolve(&fx.sha("R")).unwrap(), Some(fx.sha("R")));

    // The same remote spelled differently (a file:// URL) is the same clone.
    let as_url = format!("file://{}", fx.remote());
    Repo::open_or_clone(&as_url, &fx.clone_dir(), Auth::default()).expect("file:// spelling");
}

#[test]
fn an_empty_directory_is_cloned_into() {
    let fx = Fixture::build("history.sh");
    std::fs::create_dir_all(fx.clone_dir()).unwrap();
    let repo = fx.open();
    assert_eq!(repo.fetch("main").unwrap(), fx.sha("R"));
}

#[test]
fn refuses_a_clone_of_another_remote() {
    let fx = Fixture::build("history.sh");
    fx.open();
    let other = fx.path("other.git").display().to_string();
    let err = Repo::open_or_clone(&other, &fx.clone_dir(), Auth::default()).unwrap_err();
    assert!(matches!(err, Error::OriginMismatch { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("other.git") && text.contains("remote.git"),
        "{text}"
    );
}

#[test]
fn refuses_a_directory_that_is_not_a_clone() {
    let fx = Fixture::build("history.sh");
    std::fs::create_dir_all(fx.clone_dir()).unwrap();
    std::fs::write(fx.clone_dir().join("notes.txt"), "mine").unwrap();
    let err = Repo::open_or_clone(&fx.remote(), &fx.clone_dir(), Auth::default()).unwrap_err();
    assert!(matches!(err, Error::NotAClone { .. }), "{err:?}");
    assert!(
        fx.clone_dir().join("notes.txt").exists(),
        "nothing was touched"
    );
}

#[test]
fn a_missing_remote_is_an_error_naming_the_command_and_leaves_nothing() {
    let fx = Fixture::build("history.sh");
    let missing = fx.path("nope.git").display().to_string();
    let err = Repo::open_or_clone(&missing, &fx.clone_dir(), Auth::default()).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Command { .. }), "{err:?}");
    assert!(
        text.contains("git clone") && text.contains("nope.git"),
        "{text}"
    );
    assert!(!fx.clone_dir().exists());
    let leftovers = std::fs::read_dir(fx.path("data")).unwrap().count();
    assert_eq!(leftovers, 0, "no half clone, no staging directory");
}

#[test]
fn default_branch_is_what_the_remote_head_names() {
    let fx = Fixture::build("history.sh");
    let repo = fx.open();
    assert_eq!(repo.remote_default_branch().unwrap(), "main");
    fx.on_remote(&["symbolic-ref", "HEAD", "refs/heads/side"]);
    assert_eq!(repo.remote_default_branch().unwrap(), "side");
}

#[test]
fn fetch_follows_the_remote_tip() {
    let fx = Fixture::build("history.sh");
    let repo = fx.open();
    let tip = repo.fetch("main").unwrap();
    assert_eq!(tip, fx.sha("R"));
    assert_eq!(repo.fetch("side").unwrap(), fx.sha("S2"));

    fx.human(&["commit", "-q", "--allow-empty", "-m", "Later"]);
    fx.human(&["push", "-q", "origin", "main"]);
    let new_tip = repo.fetch("main").unwrap();
    assert_eq!(new_tip, fx.human(&["rev-parse", "HEAD"]));
    assert_eq!(
        repo.new_commits(Some(&tip), &new_tip).unwrap(),
        vec![new_tip.clone()]
    );
}

#[test]
fn fetch_names_a_missing_or_invalid_branch() {
    let fx = Fixture::build("history.sh");
    let repo = fx.open();
    let err = repo.fetch("nope").unwrap_err();
    assert!(matches!(err, Error::BranchNotFound { .. }), "{err:?}");
    assert!(err.to_string().contains("\"nope\""), "{err}");
    for bad in ["--upload-pack=touch /tmp/x", "a..b", "", "x y"] {
        let err = repo.fetch(bad).unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{bad}: {err:?}");
    }
}

#[test]
fn new_commits_include_merged_branches_parents_first() {
    let fx = Fixture::build("history.sh");
    let repo = fx.open();
    let tip = repo.fetch("main").unwrap();
    let commits = repo.new_commits(Some(&fx.sha("A")), &tip).unwrap();

    let expected: HashSet<String> = ["B", "S1", "S2", "C", "M", "R"]
        .iter()
        .map(|n| fx.sha(n))
        .collect();
    assert_eq!(commits.iter().cloned().collect::<HashSet<_>>(), expected);
    assert_eq!(commits.len(), expected.len(), "no duplicates");
    // Topological: every commit comes after all of its parents that are in the range.
    for (i, sha) in commits.iter().enumerate() {
        for parent in repo.commit(sha).unwrap().parents {
            if let Some(j) = commits.iter().position(|c| *c == parent) {
                assert!(j < i, "parent {parent} listed after its child {sha}");
            }
        }
    }
    assert_eq!(commits.last(), Some(&fx.sha("R")));

    assert!(repo.new_commits(None, &tip).unwrap().is_empty());
    assert!(repo.new_commits(Some(&tip), &tip).unwrap().is_empty());
    let err = repo
        .new_commits(Some("0000000000000000000000000000000000000001"), &tip)
        .unwrap_err();
    assert!(matches!(err, Error::UnknownCommit { .. }), "{err:?}");
}

#[test]
fn commit_data_keeps_the_raw_message() {
    let fx = Fixture::build("history.sh");
    let repo = fx.open();
    let b = repo.commit(&fx.sha("B")).unwrap();
    let written = std::fs::read_to_string(fx.path("msg-B.txt")).unwrap();
    assert_eq!(b.message, written);
    assert_eq!(b.sha, fx.sha("B"));
    assert_eq!(b.subject, "Bump web to 2");
    assert_eq!(b.parents, vec![fx.sha("A")]);
    assert_eq!(
        (b.author_name.as_str(), b.author_email.as_str()),
        ("Human", "human@example.com")
    );
    // The fixture's second tick: 2026-01-01T10:00:02Z.
    assert_eq!(b.committer_time, 1_767_261_602);
    assert!(!b.is_merge());

    let m = repo.commit(&fx.sha("M")).unwrap();
    assert_eq!(m.parents, vec![fx.sha("C"), fx.sha("S2")]);
    assert!(m.is_merge());
    assert_eq!(m.subject, "Merge branch 'side'");

    let a = repo.commit("origin/main~4").unwrap();
    assert_eq!(a.sha, fx.sha("A"));
    assert!(a.parents.is_empty());

    let err = repo.commit("no-such-rev").unwrap_err();
    assert!(matches!(err, Error::UnknownCommit { .. }), "{err:?}");
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn changed_paths_against_the_first_parent() {
    let fx = Fixture::build("history.sh");
    let repo = fx.open();
    assert_eq!(
        sorted(repo.changed_paths(&fx.sha("A")).unwrap()),
        vec!["README.md", "apps/web/deploy.yaml"],
        "a root commit changes every file"
    );
    assert_eq!(
        repo.changed_paths(&fx.sha("B")).unwrap(),
        vec!["apps/web/deploy.yaml"]
    );
    assert_eq!(
        repo.changed_paths(&fx.sha("M")).unwrap(),
        vec!["apps/api/deploy.yaml"],
        "a merge changes what the side branch brought, not what main had"
    );
    assert_eq!(
        sorted(repo.changed_paths(&fx.sha("R")).unwrap()),
        vec!["apps/web/deploy.yaml", "apps/web/deployment.yaml"],
        "both sides of a rename"
    );
}

#[test]
fn ancestry_true_false_equal_and_unknown() {
    let fx = Fixture::build("history.sh");
    let repo = fx.open();
    let (a, c, s1, m) = (fx.sha("A"), fx.sha("C"), fx.sha("S1"), fx.sha("M"));
    assert_eq!(repo.is_ancestor(&a, &m).unwrap(), Some(true));
    assert_eq!(
        repo.is_ancestor(&s1, &m).unwrap(),
        Some(true),
        "via the merge"
    );
    assert_eq!(repo.is_ancestor(&m, &a).unwrap(), Some(false));
    assert_eq!(
        repo.is_ancestor(&s1, &c).unwrap(),
        Some(false),
        "side vs main"
    );
    assert_eq!(
        repo.is_ancestor(&c, &c).unwrap(),
        Some(true),
        "equal counts"
    );
    let unknown = "1234567890123456789012345678901234567890";
    assert_eq!(repo.is_ancestor(unknown, &m).unwrap(), None);
    assert_eq!(repo.is_ancestor(&m, unknown).unwrap(), None);
    assert_eq!(
        repo.is_ancestor("65.5.0", &m).unwrap(),
        None,
        "a chart version"
    );
    assert_eq!(repo.is_ancestor("", &m).unwrap(), None);
    assert_eq!(repo.is_ancestor("--all", &m).unwrap(), None);
}

#[test]
fn resolve_names_commits_only() {
    let fx = Fixture::build("history.sh");
    let repo = fx.open();
    let r = fx.sha("R");
    assert_eq!(repo.resolve(&r[..10]).unwrap(), Some(r.clone()));
    assert_eq!(repo.resolve("origin/main").unwrap(), Some(r.clone()));
    assert_eq!(repo.resolve("nope").unwrap(), None);
    let tree = git(&fx.clone_dir(), &["rev-parse", &format!("{r}^{{tree}}")]);
    assert_eq!(repo.resolve(&tree).unwrap(), None, "a tree is not a commit");
}

#[test]
fn fetch_follows_a_rewritten_history() {
    let fx = Fixture::build("history.sh");
    let repo = fx.open();
    let old_tip = repo.fetch("main").unwrap();
    // A human rewrites main: drops R and pushes another commit instead, with --force.
    fx.human(&["reset", "-q", "--hard", &fx.sha("M")]);
    fx.human(&[
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "Instead of the rename",
    ]);
    fx.human(&["push", "-q", "--force", "origin", "main"]);
    let new_tip = repo.fetch("main").unwrap();
    assert_eq!(new_tip, fx.human(&["rev-parse", "HEAD"]));
    assert_eq!(repo.is_ancestor(&old_tip, &new_tip).unwrap(), Some(false));
    // What the new tip has and the old one lacks.
    assert_eq!(
        repo.new_commits(Some(&old_tip), &new_tip).unwrap(),
        vec![new_tip.clone()]
    );
}
