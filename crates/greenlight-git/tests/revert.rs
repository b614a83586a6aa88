//! The write path over real repositories: revert commits pushed fast-forward, merges
//! reverted against their first parent, conflicts left for humans, adoption of existing
//! reverts, and pushes that lose a race with another pusher.

mod common;

use std::path::Path;

use common::Fixture;
use greenlight_git::{Error, RevertOutcome, RevertRequest};
use greenlight_testkit::{git, git_cmd};

fn request(fx: &Fixture, commit: &str) -> RevertRequest {
    RevertRequest {
        commit: fx.sha(commit),
        branch: "main".into(),
        reason: "greenlight: web was Degraded 5m after reaching the cluster.".into(),
        author_name: "greenlight bot".into(),
        author_email: "greenlight@example.com".into(),
        max_attempts: 3,
        adopt_any: false,
        keep: Vec::new(),
        hold_on: None,
        hold_after: None,
        mainline: None,
    }
}

/// The clone is clean: no change, no untracked file, no revert in progress.
fn assert_clean(dir: &Path) {
    assert_eq!(git(dir, &["status", "--porcelain", "--ignored"]), "");
    assert!(!dir.join(".git/REVERT_HEAD").exists());
}

#[test]
fn reverts_a_commit_and_pushes_it() {
    let fx = Fixture::build("revert.sh");
    let repo = fx.open();
    let before = fx.on_remote(&["rev-parse", "main"]);
    let outcome = repo.revert_and_push(&request(&fx, "BAD")).unwrap();
    let RevertOutcome::Pushed { revert, attempts } = outcome else {
        panic!("expected Pushed, got {outcome:?}");
    };
    assert_eq!(attempts, 1);
    assert_eq!(fx.on_remote(&["rev-parse", "main"]), revert);
    assert_eq!(
        fx.on_remote(&["rev-parse", "main^"]),
        before,
        "fast-forward"
    );

    let message = fx.on_remote(&["log", "-1", "--format=%B", "main"]);
    assert_eq!(
        message,
        format!(
            "Revert \"Roll web to the new image\"\n\nThis reverts commit {}.\n\n\
             greenlight: web was Degraded 5m after reaching the cluster.\n\n\
             Greenlight-Revert-Of: {}",
            fx.sha("BAD"),
            fx.sha("BAD")
        )
    );
    let trailers = interpret_trailers(fx.path("human").as_path(), &format!("{message}\n"));
    assert!(
        !trailers.contains("Nav-Watchdog"),
        "no watch trailer: {trailers}"
    );
    assert_eq!(
        trailers.trim(),
        format!("Greenlight-Revert-Of: {}", fx.sha("BAD")),
        "git reads greenlight's own trailer, and only it"
    );
    assert_eq!(
        fx.on_remote(&["log", "-1", "--format=%an <%ae>|%cn <%ce>", "main"]),
        "greenlight bot <greenlight@example.com>|greenlight bot <greenlight@example.com>"
    );
    // The change is undone, and nothing else is.
    assert_eq!(
        fx.on_remote(&["show", "main:app/deploy.yaml"]),
        "image: web:1"
    );
    assert_eq!(
        fx.on_remote(&["diff", "--name-only", "main^", "main"]),
        "app/deploy.yaml"
    );
    assert_clean(&fx.clone_dir());

    // Asking again adopts the revert just pushed: never a second one.
    let again = repo.revert_and_push(&request(&fx, "BAD")).unwrap();
    assert_eq!(
        again,
        RevertOutcome::Adopted {
            revert: revert.clone()
        }
    );
    assert_eq!(fx.on_remote(&["rev-parse", "main"]), revert);
}

fn interpret_trailers(dir: &Path, message: &str) -> String {
    use std::io::Write;
    let mut child = git_cmd(dir)
        .args(["interpret-trailers", "--parse"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(message.as_bytes())
        .unwrap();
    String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap()
}

#[test]
fn reverts_a_merge_against_its_first_parent() {
    let fx = Fixture::build("revert.sh");
    let repo = fx.open();
    let before = fx.on_remote(&["rev-parse", "main"]);
    let outcome = repo.revert_and_push(&request(&fx, "F")).unwrap();
    let RevertOutcome::Pushed { revert, .. } = outcome else {
        panic!("expected Pushed, got {outcome:?}");
    };
    assert_eq!(fx.on_remote(&["rev-parse", "main"]), revert);
    assert_eq!(fx.on_remote(&["rev-parse", "main^"]), before);
    // What the merge brought in is gone; what main had is kept.
    assert_eq!(
        fx.on_remote(&["diff", "--name-status", "main^", "main"]),
        "D\tapp/feature.yaml"
    );
    let message = fx.on_remote(&["log", "-1", "--format=%B", "main"]);
    assert!(message.starts_with(&format!(
        "Revert \"Merge feature\"\n\nThis reverts commit {}.\n",
        fx.sha("F")
    )));
    assert!(!message.contains("Nav-Watchdog"), "{message}");
    assert_clean(&fx.clone_dir());
}

#[test]
fn a_conflict_pushes_nothing_and_leaves_the_clone_clean() {
    let fx = Fixture::build("revert.sh");
    let repo = fx.open();
    let before = fx.on_remote(&["rev-parse", "main"]);
    let outcome = repo.revert_and_push(&request(&fx, "X")).unwrap();
    let RevertOutcome::Conflict { message, paths } = outcome else {
        panic!("expected Conflict, got {outcome:?}");
    };
    assert_eq!(paths, vec!["app/conf.txt"]);
    assert!(
        message.contains("app/conf.txt") && message.contains(&fx.sha("X")),
        "{message}"
    );
    assert_eq!(
        fx.on_remote(&["rev-parse", "main"]),
        before,
        "remote untouched"
    );
    assert_clean(&fx.clone_dir());
    // The clone is usable afterwards.
    assert!(matches!(
        repo.revert_and_push(&request(&fx, "BAD")).unwrap(),
        RevertOutcome::Pushed { .. }
    ));
}

#[test]
fn nothing_to_revert_when_already_undone_or_not_on_the_branch() {
    let fx = Fixture::build("revert.sh");
    // A human undid BAD by hand, without `git revert`'s message.
    std::fs::write(fx.path("human/app/deploy.yaml"), "image: web:1\n").unwrap();
    fx.human(&["commit", "-q", "-a", "-m", "Back to web 1"]);
    fx.human(&["push", "-q", "origin", "main"]);
    let before = fx.on_remote(&["rev-parse", "main"]);

    let repo = fx.open();
    let outcome = repo.revert_and_push(&request(&fx, "BAD")).unwrap();
    assert!(
        matches!(&outcome, RevertOutcome::NothingToRevert { message } if message.contains("already undone")),
        "{outcome:?}"
    );
    let outcome = repo.revert_and_push(&request(&fx, "OFF")).unwrap();
    assert!(
        matches!(&outcome, RevertOutcome::NothingToRevert { message } if message.contains("not on main")),
        "{outcome:?}"
    );
    assert_eq!(fx.on_remote(&["rev-parse", "main"]), before);
    assert_clean(&fx.clone_dir());
}

#[test]
fn adopts_a_humans_revert() {
    let fx = Fixture::build("revert.sh");
    fx.human(&["revert", "--no-edit", &fx.sha("BAD")]);
    fx.human(&["push", "-q", "origin", "main"]);
    let human_revert = fx.human(&["rev-parse", "HEAD"]);
    let repo = fx.open();
    assert_eq!(
        repo.revert_and_push(&request(&fx, "BAD")).unwrap(),
        RevertOutcome::Adopted {
            revert: human_revert.clone()
        }
    );
    assert_eq!(fx.on_remote(&["rev-parse", "main"]), human_revert);
    let tip = repo.fetch("main").unwrap();
    assert_eq!(
        repo.find_revert_of(&fx.sha("BAD"), &fx.sha("BAD"), &tip)
            .unwrap(),
        Some(human_revert)
    );
    // Before the revert, there is none.
    assert_eq!(
        repo.find_revert_of(&fx.sha("BAD"), &fx.sha("BAD"), &fx.sha("Y"))
            .unwrap(),
        None
    );
}

#[test]
fn a_revert_that_was_itself_reverted_is_not_adopted() {
    let fx = Fixture::build("revert.sh");
    // A human reverts BAD, then reverts the revert: BAD's change is live again.
    fx.human(&["revert", "--no-edit", &fx.sha("BAD")]);
    let first = fx.human(&["rev-parse", "HEAD"]);
    fx.human(&["revert", "--no-edit", &first]);
    fx.human(&["push", "-q", "origin", "main"]);
    let relanded = fx.human(&["rev-parse", "HEAD"]);
    let repo = fx.open();
    let tip = repo.fetch("main").unwrap();
    assert_eq!(
        repo.find_revert_of(&fx.sha("BAD"), &fx.sha("BAD"), &tip)
            .unwrap(),
        None,
        "the revert is no longer in effect"
    );
    let outcome = repo.revert_and_push(&request(&fx, "BAD")).unwrap();
    let RevertOutcome::Pushed { revert, .. } = outcome else {
        panic!("expected a new revert, got {outcome:?}");
    };
    assert_eq!(fx.on_remote(&["rev-parse", "main^"]), relanded);
    // And once reverted again, that newest revert is the one in effect.
    let tip = repo.fetch("main").unwrap();
    assert_eq!(
        repo.find_revert_of(&fx.sha("BAD"), &fx.sha("BAD"), &tip)
            .unwrap(),
        Some(revert)
    );
}

#[test]
fn adopts_a_humans_revert_with_an_abbreviated_reference() {
    let fx = Fixture::build("revert.sh");
    // `git revert --reference` names the commit by an abbreviated sha.
    fx.human(&["revert", "--no-edit", "--reference", &fx.sha("BAD")]);
    let message = fx.human(&["log", "-1", "--format=%B"]);
    assert!(!message.contains(&fx.sha("BAD")), "abbreviated: {message}");
    fx.human(&["push", "-q", "origin", "main"]);
    let repo = fx.open();
    assert_eq!(
        repo.revert_and_push(&request(&fx, "BAD")).unwrap(),
        RevertOutcome::Adopted {
            revert: fx.human(&["rev-parse", "HEAD"])
        }
    );
}

/// Installs a `pre-receive` hook on the remote that, on the first push only, moves `main`
/// to `new_tip` (a commit already on the remote) as if another pusher had won the race,
/// then lets the push go on: the remote's ref update then fails, as in a real race.
fn race_once(fx: &Fixture, new_tip: &str) {
    let hook = fx.path("remote.git/hooks/pre-receive");
    let marker = fx.path("raced");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\nif [ ! -e '{m}' ]; then\n  touch '{m}'\n  \
             env -u GIT_QUARANTINE_PATH git update-ref refs/heads/main {new_tip}\nfi\nexit 0\n",
            m = marker.display()
        ),
    )
    .unwrap();
    make_executable(&hook);
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A human commit on top of the remote's main, pushed to a side ref so that the hook can
/// move main to it.
fn stage_human_commit(fx: &Fixture, args: &[&str]) -> String {
    fx.human(args);
    fx.human(&["push", "-q", "origin", "HEAD:refs/heads/staged"]);
    fx.human(&["rev-parse", "HEAD"])
}

#[test]
fn a_push_that_loses_a_race_is_retried_on_the_new_tip() {
    let fx = Fixture::build("revert.sh");
    let human = stage_human_commit(
        &fx,
        &["commit", "-q", "--allow-empty", "-m", "Meanwhile, a human"],
    );
    race_once(&fx, &human);
    let repo = fx.open();
    let outcome = repo.revert_and_push(&request(&fx, "BAD")).unwrap();
    let RevertOutcome::Pushed { revert, attempts } = outcome else {
        panic!("expected Pushed, got {outcome:?}");
    };
    assert!(fx.path("raced").exists(), "the race happened");
    assert_eq!(attempts, 2);
    assert_eq!(fx.on_remote(&["rev-parse", "main"]), revert);
    assert_eq!(
        fx.on_remote(&["rev-parse", "main^"]),
        human,
        "the human's commit is kept"
    );
    assert_clean(&fx.clone_dir());
}

#[test]
fn a_race_lost_to_a_humans_revert_adopts_it() {
    let fx = Fixture::build("revert.sh");
    let human_revert = stage_human_commit(&fx, &["revert", "--no-edit", &fx.sha("BAD")]);
    race_once(&fx, &human_revert);
    let repo = fx.open();
    assert_eq!(
        repo.revert_and_push(&request(&fx, "BAD")).unwrap(),
        RevertOutcome::Adopted {
            revert: human_revert.clone()
        }
    );
    assert_eq!(fx.on_remote(&["rev-parse", "main"]), human_revert);
}

#[test]
fn gives_up_after_max_attempts_without_forcing() {
    let fx = Fixture::build("revert.sh");
    let hook = fx.path("remote.git/hooks/pre-receive");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\necho push >> '{}'\necho 'branch is frozen' >&2\nexit 1\n",
            fx.path("pushes").display()
        ),
    )
    .unwrap();
    make_executable(&hook);
    let before = fx.on_remote(&["rev-parse", "main"]);
    let repo = fx.open();
    let err = repo.revert_and_push(&request(&fx, "BAD")).unwrap_err();
    assert!(
        matches!(err, Error::PushRejected { attempts: 3, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("pre-receive hook declined"),
        "{err}"
    );
    let pushes = std::fs::read_to_string(fx.path("pushes")).unwrap();
    assert_eq!(pushes.lines().count(), 3);
    assert_eq!(fx.on_remote(&["rev-parse", "main"]), before);
}

#[test]
fn recovers_from_a_revert_interrupted_in_the_clone() {
    let fx = Fixture::build("revert.sh");
    let repo = fx.open();
    // As if greenlight died mid-revert: a conflicted revert left in the clone.
    let clone = fx.clone_dir();
    git(
        &clone,
        &["checkout", "-q", "--force", "--detach", "origin/main"],
    );
    let out = git_cmd(&clone)
        .args(["revert", "--no-commit", &fx.sha("X")])
        .output()
        .unwrap();
    assert!(!out.status.success(), "the fixture revert conflicts");
    std::fs::write(clone.join("stray.txt"), "left over").unwrap();

    assert!(matches!(
        repo.revert_and_push(&request(&fx, "BAD")).unwrap(),
        RevertOutcome::Pushed { .. }
    ));
    assert_eq!(
        fx.on_remote(&["diff", "--name-only", "main^", "main"]),
        "app/deploy.yaml"
    );
    assert_clean(&clone);
}

#[test]
fn refuses_bad_requests_before_touching_anything() {
    let fx = Fixture::build("revert.sh");
    let repo = fx.open();
    let before = fx.on_remote(&["rev-parse", "main"]);
    let cases = [
        RevertRequest {
            max_attempts: 0,
            ..request(&fx, "BAD")
        },
        RevertRequest {
            author_name: "Eve <eve@x>".into(),
            ..request(&fx, "BAD")
        },
        RevertRequest {
            author_email: "".into(),
            ..request(&fx, "BAD")
        },
        RevertRequest {
            branch: "--force".into(),
            ..request(&fx, "BAD")
        },
    ];
    for req in cases {
        let err = repo.revert_and_push(&req).unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    }
    let err = repo
        .revert_and_push(&RevertRequest {
            commit: "1234567890123456789012345678901234567890".into(),
            ..request(&fx, "BAD")
        })
        .unwrap_err();
    assert!(matches!(err, Error::UnknownCommit { .. }), "{err:?}");
    assert_eq!(fx.on_remote(&["rev-parse", "main"]), before);
}

#[test]
fn a_revert_leaves_the_paths_it_is_asked_to_keep_as_they_are_on_the_branch() {
    // PROMO changed the live manifest and removed a candidate and its lock; NEXT wrote a new
    // candidate and lock since. Undoing PROMO restores the live manifest only: the candidate
    // directory stays as the branch has it, the conflict on the new candidate resolved to the
    // branch's side, and the old lock is not brought back.
    let fx = Fixture::build("promotion.sh");
    let repo = fx.open();
    let mut req = request(&fx, "PROMO");
    req.keep = vec!["cands/".into()];
    let outcome = repo.revert_and_push(&req).unwrap();
    let RevertOutcome::Pushed { revert, .. } = outcome else {
        panic!("expected Pushed, got {outcome:?}");
    };
    assert_eq!(fx.on_remote(&["rev-parse", "main"]), revert);
    assert_eq!(
        fx.on_remote(&["diff", "--name-only", "main^", "main"]),
        "app/deploy.yaml"
    );
    assert_eq!(
        fx.on_remote(&["show", "main:app/deploy.yaml"]),
        "image: web:1"
    );
    assert_eq!(
        fx.on_remote(&["show", "main:cands/web-candidate.yaml"]),
        "image: web:3"
    );
    assert_eq!(
        fx.on_remote(&["show", "main:cands/web-candidate.lock"]),
        "holder: run 2"
    );
    let message = fx.on_remote(&["log", "-1", "--format=%B", "main"]);
    assert!(
        message
            .contains("Left as they are on main: cands/ (the commit asks a revert to keep them)."),
        "{message}"
    );
    assert_clean(&fx.clone_dir());

    // Without `keep`, git's own revert conflicts on the candidate and lock NEXT wrote: nothing
    // pushed.
    let fx = Fixture::build("promotion.sh");
    let repo = fx.open();
    let tip = fx.on_remote(&["rev-parse", "main"]);
    let outcome = repo.revert_and_push(&request(&fx, "PROMO")).unwrap();
    assert!(
        matches!(&outcome, RevertOutcome::Conflict { paths, .. }
            if paths == &["cands/web-candidate.lock", "cands/web-candidate.yaml"]),
        "{outcome:?}"
    );
    assert_eq!(fx.on_remote(&["rev-parse", "main"]), tip);
    assert_clean(&fx.clone_dir());
}

#[test]
fn a_revert_keeping_paths_still_stops_on_a_conflict_outside_them() {
    let fx = Fixture::build("revert.sh");
    let repo = fx.open();
    let tip = fx.on_remote(&["rev-parse", "main"]);
    // X changed app/conf.txt and Y changed it again: reverting X conflicts there.
    let mut req = request(&fx, "X");
    req.keep = vec!["cands".into()];
    let outcome = repo.revert_and_push(&req).unwrap();
    assert!(
        matches!(&outcome, RevertOutcome::Conflict { paths, .. } if paths == &["app/conf.txt"]),
        "{outcome:?}"
    );
    assert_eq!(fx.on_remote(&["rev-parse", "main"]), tip);
    assert_clean(&fx.clone_dir());
    req.keep = vec!["../outside".into()];
    assert!(matches!(
        repo.revert_and_push(&req),
        Err(Error::InvalidInput { .. })
    ));
}

/// A revert asked to hold on the app's paths: newer commits on the branch that change them (a
/// fix-forward) stop it before anything is pushed, named oldest first with their paths; newer
/// commits elsewhere do not.
#[test]
fn a_newer_commit_under_the_held_paths_stops_the_revert() {
    use greenlight_core::snapshot::SourcePaths;
    let fx = Fixture::build("revert.sh");
    let repo = fx.open();
    let before = fx.on_remote(&["rev-parse", "main"]);
    let req = RevertRequest {
        hold_on: Some(SourcePaths::Known(vec!["app/conf.txt".into()])),
        ..request(&fx, "BAD")
    };
    let outcome = repo.revert_and_push(&req).unwrap();
    assert_eq!(
        outcome,
        RevertOutcome::Superseded {
            newer: vec![
                (fx.sha("X"), vec!["app/conf.txt".to_string()]),
                (fx.sha("Y"), vec!["app/conf.txt".to_string()]),
            ]
        }
    );
    assert_eq!(
        fx.on_remote(&["rev-parse", "main"]),
        before,
        "nothing pushed"
    );

    // What the caller already took into account (up to X) is no news.
    let req = RevertRequest {
        hold_on: Some(SourcePaths::Known(vec!["app/conf.txt".into()])),
        hold_after: Some(fx.sha("X")),
        ..request(&fx, "BAD")
    };
    assert_eq!(
        repo.revert_and_push(&req).unwrap(),
        RevertOutcome::Superseded {
            newer: vec![(fx.sha("Y"), vec!["app/conf.txt".to_string()])]
        }
    );

    let req = RevertRequest {
        hold_on: Some(SourcePaths::Known(vec!["app/deploy.yaml".into()])),
        ..request(&fx, "BAD")
    };
    let outcome = repo.revert_and_push(&req).unwrap();
    assert!(
        matches!(outcome, RevertOutcome::Pushed { .. }),
        "{outcome:?}"
    );
}

/// Paths that are not known: any newer commit may have changed the app, so any stops it.
#[test]
fn unknown_held_paths_let_any_newer_commit_stop_the_revert() {
    use greenlight_core::snapshot::SourcePaths;
    let fx = Fixture::build("revert.sh");
    let repo = fx.open();
    let req = RevertRequest {
        hold_on: Some(SourcePaths::Unknown {
            why: "a config management plugin".into(),
        }),
        ..request(&fx, "BAD")
    };
    let outcome = repo.revert_and_push(&req).unwrap();
    let RevertOutcome::Superseded { newer } = outcome else {
        panic!("expected Superseded, got {outcome:?}");
    };
    assert_eq!(newer[0].0, fx.sha("LATER"));
}

/// A remote that declines the push (a branch protection, a pre-receive hook): the error quotes
/// what the remote said, not only git's "pre-receive hook declined".
#[test]
fn a_declined_push_quotes_what_the_remote_said() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::build("revert.sh");
    let hook = fx.path("remote.git/hooks/pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\necho 'branch main is protected: changes need an approved review' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let repo = fx.open();
    let err = repo.revert_and_push(&request(&fx, "BAD")).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::PushRejected { .. }), "{text}");
    assert!(
        text.contains("the remote said: branch main is protected: changes need an approved review"),
        "{text}"
    );
}

#[test]
fn lock_files_a_killed_git_left_are_cleared_and_the_revert_then_pushes() {
    let fx = Fixture::build("revert.sh");
    let repo = fx.open();
    let dir = fx.clone_dir();
    repo.fetch("main").unwrap();
    // What `kill -9` of a git process mid-command leaves: its lock files, which make every later
    // command that takes the same lock fail.
    let planted = [
        ".git/HEAD.lock",
        ".git/index.lock",
        ".git/packed-refs.lock",
        ".git/refs/remotes/origin/main.lock",
    ];
    for p in planted {
        std::fs::write(dir.join(p), "").unwrap();
    }
    let stuck = repo.revert_and_push(&request(&fx, "BAD"));
    assert!(
        stuck
            .as_ref()
            .is_err_and(|e| e.to_string().contains(".lock")),
        "{stuck:?}"
    );
    let cleared = repo.clear_stale_locks().unwrap();
    let mut want: Vec<String> = planted.iter().map(|p| p.to_string()).collect();
    want.sort();
    assert_eq!(cleared, want);
    assert!(planted.iter().all(|p| !dir.join(p).exists()));
    assert_eq!(repo.clear_stale_locks().unwrap(), Vec::<String>::new());
    let outcome = repo.revert_and_push(&request(&fx, "BAD")).unwrap();
    assert!(
        matches!(outcome, RevertOutcome::Pushed { .. }),
        "{outcome:?}"
    );
    assert_clean(&dir);
}
