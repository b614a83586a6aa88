//! The promotion gate's writes over real repositories: whole-file changes committed on the
//! remote's tip and pushed fast-forward, a guard on files changed since they were read, a race
//! lost to another pusher, and reads of files and directories at a revision.

mod common;

use std::path::Path;

use common::Fixture;
use greenlight_git::{ChangeOutcome, ChangeRequest, Error, FileChange};
use greenlight_testkit::git;

fn request(changes: Vec<FileChange>) -> ChangeRequest {
    ChangeRequest {
        branch: "main".into(),
        changes,
        message: "promote web: web@sha256:ab (gate passed)\n\nGreenlight-Gate: passed\n".into(),
        author_name: "greenlight bot".into(),
        author_email: "greenlight@example.com".into(),
        max_attempts: 3,
        unchanged_since: None,
    }
}

fn write(path: &str, content: &str) -> FileChange {
    FileChange::Write {
        path: path.into(),
        content: content.as_bytes().to_vec(),
    }
}

fn assert_clean(dir: &Path) {
    assert_eq!(git(dir, &["status", "--porcelain", "--ignored"]), "");
}

#[test]
fn writes_and_removals_land_in_one_commit_pushed_fast_forward() {
    let fx = Fixture::build("revert.sh");
    let repo = fx.open();
    let before = fx.on_remote(&["rev-parse", "main"]);
    let outcome = repo
        .commit_and_push(&request(vec![
            write("app/deploy.yaml", "image: web@sha256:ab\n"),
            write("candidates/web/deploy.yaml", "kind: Deployment\n"),
            FileChange::Remove {
                path: "app/feature.yaml".into(),
            },
            FileChange::Remove {
                path: "not/there".into(),
            },
        ]))
        .unwrap();
    let ChangeOutcome::Pushed { commit, attempts } = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(attempts, 1);
    assert_eq!(fx.on_remote(&["rev-parse", "main"]), commit);
    assert_eq!(
        fx.on_remote(&["rev-parse", "main^"]),
        before,
        "fast-forward"
    );
    assert_eq!(
        fx.on_remote(&["show", "--name-status", "--format=", "main"]),
        "M\tapp/deploy.yaml\nD\tapp/feature.yaml\nA\tcandidates/web/deploy.yaml"
    );
    assert_eq!(
        fx.on_remote(&[
            "log",
            "-1",
            "--format=%an <%ae>|%s|%(trailers:key=Greenlight-Gate,valueonly)",
            "main"
        ]),
        "greenlight bot <greenlight@example.com>|promote web: web@sha256:ab (gate passed)|passed"
    );
    assert_eq!(
        repo.read_file(&commit, "app/deploy.yaml")
            .unwrap()
            .as_deref(),
        Some(&b"image: web@sha256:ab\n"[..])
    );
    assert_eq!(repo.read_file(&commit, "app/feature.yaml").unwrap(), None);
    assert_eq!(
        repo.list_files(&commit, "candidates").unwrap(),
        ["candidates/web/deploy.yaml"]
    );
    assert_eq!(
        repo.list_files(&commit, "nothing/here").unwrap(),
        Vec::<String>::new()
    );
    assert!(
        repo.list_files(&commit, "")
            .unwrap()
            .contains(&"candidates/web/deploy.yaml".to_string()),
        "the root lists every file"
    );
    assert_eq!(
        repo.path_history(&commit, "app/deploy.yaml", 5).unwrap()[0],
        commit,
        "the newest change of the file first"
    );
    assert_eq!(
        repo.path_history(&commit, "candidates/web/deploy.yaml", 5)
            .unwrap(),
        std::slice::from_ref(&commit)
    );
    assert!(
        repo.path_history(&before, "candidates/web/deploy.yaml", 5)
            .unwrap()
            .is_empty()
    );
    assert_clean(&fx.clone_dir());
    // The same changes again: nothing to commit, nothing pushed.
    let again = repo
        .commit_and_push(&request(vec![write(
            "app/deploy.yaml",
            "image: web@sha256:ab\n",
        )]))
        .unwrap();
    assert_eq!(
        again,
        ChangeOutcome::Unchanged {
            tip: commit.clone()
        }
    );
    assert_eq!(fx.on_remote(&["rev-parse", "main"]), commit);
}

#[test]
fn a_guarded_file_changed_since_it_was_read_stops_the_commit() {
    let fx = Fixture::build("revert.sh");
    let repo = fx.open();
    let base = fx.on_remote(&["rev-parse", "main"]);
    // A human changes the live manifest meanwhile.
    fx.human(&["pull", "-q", "origin", "main"]);
    std::fs::write(fx.path("human/app/deploy.yaml"), "image: web:2\n").unwrap();
    fx.human(&["commit", "-q", "-a", "-m", "A human rolls web"]);
    fx.human(&["push", "-q", "origin", "main"]);
    let tip = fx.on_remote(&["rev-parse", "main"]);
    let mut req = request(vec![write("app/deploy.yaml", "image: web@sha256:ab\n")]);
    req.unchanged_since = Some((base.clone(), vec!["app/deploy.yaml".into()]));
    assert_eq!(
        repo.commit_and_push(&req).unwrap(),
        ChangeOutcome::Guarded {
            path: "app/deploy.yaml".into(),
            base: base.clone(),
            tip: tip.clone()
        }
    );
    assert_eq!(fx.on_remote(&["rev-parse", "main"]), tip, "nothing pushed");
    // A change elsewhere does not trip the guard.
    req.unchanged_since = Some((base, vec!["app/conf.txt".into()]));
    assert!(matches!(
        repo.commit_and_push(&req).unwrap(),
        ChangeOutcome::Pushed { .. }
    ));
}

#[test]
fn a_push_that_loses_a_race_is_made_again_on_the_new_tip() {
    let fx = Fixture::build("revert.sh");
    fx.human(&["commit", "-q", "--allow-empty", "-m", "Meanwhile, a human"]);
    fx.human(&["push", "-q", "origin", "HEAD:refs/heads/staged"]);
    let human = fx.human(&["rev-parse", "HEAD"]);
    let hook = fx.path("remote.git/hooks/pre-receive");
    let marker = fx.path("raced");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\nif [ ! -e '{m}' ]; then\n  touch '{m}'\n  \
             env -u GIT_QUARANTINE_PATH git update-ref refs/heads/main {human}\nfi\nexit 0\n",
            m = marker.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let repo = fx.open();
    let outcome = repo
        .commit_and_push(&request(vec![write(
            "candidates/web/deploy.yaml",
            "x: 1\n",
        )]))
        .unwrap();
    let ChangeOutcome::Pushed { commit, attempts } = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(attempts, 2);
    assert_eq!(
        fx.on_remote(&["rev-parse", "main^"]),
        human,
        "the human's commit is kept"
    );
    assert_eq!(fx.on_remote(&["rev-parse", "main"]), commit);
}

/// A remote that declines every push: the change is built and pushed again on each of the
/// request's attempts (the same loop as a revert's), never forced, and then the error quotes
/// the remote; the branch is as it was and the clone is left clean.
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
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = fx.on_remote(&["rev-parse", "main"]);
    let repo = fx.open();
    let err = repo
        .commit_and_push(&request(vec![write(
            "candidates/web/deploy.yaml",
            "x: 1\n",
        )]))
        .unwrap_err();
    assert!(
        matches!(err, Error::PushRejected { attempts: 3, .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("the remote said: branch is frozen"), "{text}");
    let pushes = std::fs::read_to_string(fx.path("pushes")).unwrap();
    assert_eq!(pushes.lines().count(), 3);
    assert_eq!(fx.on_remote(&["rev-parse", "main"]), before);
    assert_clean(&fx.clone_dir());
}

#[test]
fn paths_outside_the_repository_are_refused_before_anything_runs() {
    let fx = Fixture::build("revert.sh");
    let repo = fx.open();
    for path in [
        "../escape",
        "/etc/passwd",
        ".git/config",
        "a/../../b",
        "",
        "-x",
    ] {
        let err = repo
            .commit_and_push(&request(vec![write(path, "x")]))
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidInput { what: "path", .. }),
            "{path}: {err}"
        );
    }
    let err = repo.commit_and_push(&request(Vec::new())).unwrap_err();
    assert!(
        err.to_string().contains("at least one file change"),
        "{err}"
    );
    let mut bad_author = request(vec![write("a", "b")]);
    bad_author.author_email = "x>\n".into();
    assert!(repo.commit_and_push(&bad_author).is_err());
    assert!(repo.read_file("main", "../x").is_err());
}
