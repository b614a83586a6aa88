//! The client against the sandbox's forge face, both real: HTTP on a loopback port, a bare
//! repository made and pushed to with real git, merges that move the base branch in it. Every
//! scenario runs once per flavour (modules `github`, `gitlab`, `gitea`); state changes are
//! synchronous in the face (a check that turns green merges before its report is answered), so
//! nothing here sleeps or polls.

use std::time::Duration;

use greenlight_forge::{
    AutoMerge, ClientOptions, ForgeClient, ForgeError, ForgeKind, PrState, PullRequest, Secret,
};
use greenlight_sandbox::forge::{self as face, Forge, ForgeConfig};
use greenlight_testkit::{Remote, git_cmd};

const TOKEN: &str = "forge-token-0123456789";

fn face_kind(kind: ForgeKind) -> face::ForgeKind {
    match kind {
        ForgeKind::GitHub => face::ForgeKind::GitHub,
        ForgeKind::GitLab => face::ForgeKind::GitLab,
        ForgeKind::Gitea => face::ForgeKind::Gitea,
    }
}

/// A repository with `main` (protected) holding `deploy/app.yaml`, a branch `promote` that
/// changes it, the forge face over the bare repository, and a client.
struct World {
    kind: ForgeKind,
    remote: Remote,
    forge: Forge,
    client: ForgeClient,
}

struct Setup<'a> {
    required: &'a [&'a str],
    allow_auto_merge: bool,
}

const CHECKED: Setup<'static> = Setup {
    required: &["ci"],
    allow_auto_merge: true,
};
const UNCHECKED: Setup<'static> = Setup {
    required: &[],
    allow_auto_merge: true,
};

impl World {
    async fn new(kind: ForgeKind, setup: Setup<'_>) -> World {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let remote = Remote::new("main");
        remote.write("deploy/app.yaml", "image: web:1\n");
        remote.commit_push("first");
        remote.git(&["checkout", "-q", "-b", "promote"]);
        remote.write("deploy/app.yaml", "image: web:2\n");
        remote.commit_push("promote web to 2");
        remote.git(&["checkout", "-q", "main"]);
        let mut config = ForgeConfig::new(
            face_kind(kind),
            &remote.bare,
            "127.0.0.1:0".parse().unwrap(),
            TOKEN,
        );
        config.project = "acme/deploy".into();
        config.protected = vec!["main".into()];
        config.required_checks = setup.required.iter().map(|s| s.to_string()).collect();
        config.allow_auto_merge = setup.allow_auto_merge;
        config.log = None;
        let forge = face::serve(config).await.expect("the forge face starts");
        let client = client(kind, &forge, TOKEN);
        World {
            kind,
            remote,
            forge,
            client,
        }
    }

    fn main_tip(&self) -> String {
        self.remote.bare_git(&["rev-parse", "refs/heads/main"])
    }

    fn parents(&self, commit: &str) -> Vec<String> {
        self.remote
            .bare_git(&["rev-list", "--parents", "-n", "1", commit])
            .split_whitespace()
            .skip(1)
            .map(str::to_string)
            .collect()
    }

    fn main_has(&self, commit: &str) -> bool {
        git_cmd(&self.remote.bare)
            .args(["merge-base", "--is-ancestor", commit, "refs/heads/main"])
            .status()
            .expect("git runs")
            .success()
    }

    async fn open_promotion(&self) -> PullRequest {
        self.client
            .open(
                "promote",
                "main",
                "Promote web to 2",
                "Greenlight-Gate: promote",
            )
            .await
            .expect("the pull request opens")
    }

    /// A branch `name` from `main` that changes the same line as `promote`, pushed.
    fn push_rival(&self, name: &str, image: &str) {
        self.remote.git(&["checkout", "-q", "-b", name, "main"]);
        self.remote
            .write("deploy/app.yaml", &format!("image: {image}\n"));
        self.remote.commit_push(&format!("{name}: {image}"));
        self.remote.git(&["checkout", "-q", "main"]);
    }

    fn auto_merge_shown(&self, armed: bool) -> PrState {
        PrState::Open {
            // Gitea's pull request does not say whether auto-merge is armed.
            auto_merge: (self.kind != ForgeKind::Gitea).then_some(armed),
        }
    }
}

fn client(kind: ForgeKind, forge: &Forge, token: &str) -> ForgeClient {
    ForgeClient::new(
        kind,
        &forge.api_url(),
        &forge.project(),
        Secret::new(token),
        ClientOptions {
            timeout: Duration::from_secs(20),
            ..ClientOptions::default()
        },
    )
    .expect("the client builds")
}

async fn a_rate_limit_is_waited_out_once_and_a_longer_one_holds_every_request(kind: ForgeKind) {
    let w = World::new(kind, UNCHECKED).await;
    // One refusal asking for a second: waited out, and the request (a POST: the forge did
    // nothing with the refused one) sent again.
    w.forge.rate_limit(1, 1);
    let asked = std::time::Instant::now();
    let pr = w.open_promotion().await;
    assert!(asked.elapsed() >= Duration::from_secs(1), "not waited out");
    assert_eq!(w.client.get(&pr).await.unwrap(), w.auto_merge_shown(false));
    // Refused again after the wait: an error, not a third try.
    w.forge.rate_limit(2, 1);
    let again = w.client.get(&pr).await.unwrap_err();
    assert!(matches!(again, ForgeError::RateLimited { .. }), "{again:?}");
    // A forge that asks for no wait at all, again and again, is asked twice, not without end:
    // of three refusals, one call meets two and the next call one, then an answer.
    w.forge.rate_limit(3, 0);
    let twice = w.client.get(&pr).await.unwrap_err();
    assert!(matches!(twice, ForgeError::RateLimited { .. }), "{twice:?}");
    assert_eq!(w.client.get(&pr).await.unwrap(), w.auto_merge_shown(false));
    // A wait longer than the client's bound (60 s): an error at once that says how long, and
    // no request at all is sent before it is over — the face would answer the next one.
    w.forge.rate_limit(1, 600);
    let fresh = client(kind, &w.forge, TOKEN);
    let err = fresh.get(&pr).await.unwrap_err();
    let ForgeError::RateLimited { retry_in, .. } = &err else {
        panic!("{err:?}");
    };
    assert!(*retry_in > Duration::from_secs(590), "{retry_in:?}");
    assert!(err.to_string().contains("rate-limiting"), "{err}");
    assert!(!err.to_string().contains(TOKEN));
    let held = fresh.get(&pr).await.unwrap_err();
    assert!(matches!(held, ForgeError::RateLimited { .. }), "{held:?}");
    assert_eq!(w.client.get(&pr).await.unwrap(), w.auto_merge_shown(false));
    w.forge.shutdown().await;
}

async fn auto_merge_waits_for_the_required_check_then_merges_into_the_base(kind: ForgeKind) {
    let w = World::new(kind, CHECKED).await;
    let before = w.main_tip();
    let pr = w.open_promotion().await;
    assert_eq!(pr.number, 1);
    assert_eq!(
        pr.head_sha,
        w.remote.bare_git(&["rev-parse", "refs/heads/promote"])
    );
    assert!(pr.url.starts_with(&w.forge.url()), "{}", pr.url);
    assert_eq!(w.client.get(&pr).await.unwrap(), w.auto_merge_shown(false));

    assert_eq!(
        w.client.enable_auto_merge(&pr).await.unwrap(),
        AutoMerge::Armed
    );
    assert_eq!(w.client.get(&pr).await.unwrap(), w.auto_merge_shown(true));

    // A failing check leaves it open and armed; so does a pending one.
    assert!(
        w.forge
            .set_status(&pr.head_sha, "ci", "failure")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        w.forge
            .set_status(&pr.head_sha, "ci", "pending")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(w.client.get(&pr).await.unwrap(), w.auto_merge_shown(true));
    assert_eq!(w.main_tip(), before);

    let merged = w
        .forge
        .set_status(&pr.head_sha, "ci", "success")
        .await
        .unwrap();
    assert_eq!(merged, vec![pr.number]);
    let PrState::Merged { merge_commit } = w.client.get(&pr).await.unwrap() else {
        panic!("not merged");
    };
    assert_eq!(w.main_tip(), merge_commit);
    assert_eq!(w.parents(&merge_commit), vec![before, pr.head_sha.clone()]);
    assert!(w.main_has(&pr.head_sha));
    let file = w
        .remote
        .bare_git(&["show", "refs/heads/main:deploy/app.yaml"]);
    assert_eq!(file, "image: web:2");
    w.forge.shutdown().await;
}

async fn without_auto_merge_it_stays_open_until_a_human_merges(kind: ForgeKind) {
    let w = World::new(kind, CHECKED).await;
    let before = w.main_tip();
    let pr = w.open_promotion().await;
    w.forge
        .set_status(&pr.head_sha, "ci", "success")
        .await
        .unwrap();
    assert_eq!(w.client.get(&pr).await.unwrap(), w.auto_merge_shown(false));
    assert_eq!(w.main_tip(), before, "green checks alone merge nothing");

    // The human merges through the control API, as a person on the forge would.
    let answer = reqwest::Client::new()
        .post(format!(
            "{}/sandbox/v1/forge/merge?number={}",
            w.forge.url(),
            pr.number
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    let PrState::Merged { merge_commit } = w.client.get(&pr).await.unwrap() else {
        panic!("not merged");
    };
    assert_eq!(w.main_tip(), merge_commit);
    assert!(w.main_has(&pr.head_sha));
}

async fn a_closed_pull_request_stays_closed_and_unmerged(kind: ForgeKind) {
    let w = World::new(kind, UNCHECKED).await;
    let before = w.main_tip();
    let pr = w.open_promotion().await;
    w.client.close(&pr).await.unwrap();
    assert_eq!(w.client.get(&pr).await.unwrap(), PrState::Closed);
    w.client
        .close(&pr)
        .await
        .expect("closing twice is no error");
    let err = w.client.merge(&pr).await.unwrap_err();
    assert!(
        matches!(
            err,
            ForgeError::NotMergeable { .. } | ForgeError::NotFound { .. }
        ),
        "{err:?}"
    );
    assert_eq!(w.main_tip(), before);
    // A new pull request from the same branch may be opened once the first is closed.
    let again = w.open_promotion().await;
    assert_eq!(again.number, 2);
}

async fn a_conflicting_pull_request_is_not_mergeable(kind: ForgeKind) {
    let w = World::new(kind, UNCHECKED).await;
    w.push_rival("hotfix", "web:3");
    let pr = w.open_promotion().await;
    let rival = w
        .client
        .open("hotfix", "main", "Hotfix web to 3", "")
        .await
        .unwrap();
    w.forge.human_merge(rival.number).await.unwrap();
    let after_rival = w.main_tip();
    let err = w.client.merge(&pr).await.unwrap_err();
    assert!(matches!(err, ForgeError::NotMergeable { .. }), "{err:?}");
    assert_eq!(w.main_tip(), after_rival, "a conflict writes nothing");
    assert_eq!(w.client.get(&pr).await.unwrap(), w.auto_merge_shown(false));
}

async fn a_second_pull_request_from_the_branch_already_exists(kind: ForgeKind) {
    let w = World::new(kind, UNCHECKED).await;
    w.open_promotion().await;
    let err = w
        .client
        .open("promote", "main", "again", "")
        .await
        .unwrap_err();
    assert!(matches!(err, ForgeError::AlreadyExists { .. }), "{err:?}");
}

async fn a_bad_token_is_unauthorized_and_never_shown(kind: ForgeKind) {
    let w = World::new(kind, UNCHECKED).await;
    let wrong = client(kind, &w.forge, "wrong-token-4711");
    let err = wrong.open("promote", "main", "t", "").await.unwrap_err();
    assert!(matches!(err, ForgeError::Unauthorized { .. }), "{err:?}");
    let text = format!("{err} {err:?} {wrong:?}");
    assert!(
        !text.contains("wrong-token-4711") && !text.contains(TOKEN),
        "{text}"
    );
    // Nothing was opened by it.
    assert!(matches!(
        w.client
            .get(&PullRequest {
                number: 1,
                url: String::new(),
                head_sha: String::new()
            })
            .await,
        Err(ForgeError::NotFound { .. })
    ));
}

async fn a_direct_push_to_the_protected_branch_is_refused_in_the_forges_words(kind: ForgeKind) {
    let w = World::new(kind, UNCHECKED).await;
    let before = w.main_tip();
    w.remote.write("deploy/app.yaml", "image: web:9\n");
    w.remote.git(&["commit", "-q", "-am", "straight to main"]);
    let out = git_cmd(&w.remote.work)
        .args(["push", "origin", "HEAD:refs/heads/main"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let words = match kind {
        ForgeKind::GitHub => {
            "remote: error: GH006: Protected branch update failed for refs/heads/main."
        }
        ForgeKind::GitLab => {
            "remote: GitLab: You are not allowed to push code to protected branches on this project."
        }
        ForgeKind::Gitea => "remote: Gitea: Not allowed to push to protected branch main",
    };
    assert!(stderr.contains(words), "{stderr}");
    assert_eq!(w.main_tip(), before);
    // Another branch takes the same commit.
    w.remote
        .git(&["push", "-q", "origin", "HEAD:refs/heads/scratch"]);
    // The hook goes with the face.
    w.forge.shutdown().await;
    assert!(!w.remote.bare.join("hooks/pre-receive").exists());
}

async fn a_merge_pinned_to_a_head_that_moved_merges_nothing(kind: ForgeKind) {
    let w = World::new(kind, UNCHECKED).await;
    let before = w.main_tip();
    let pr = w.open_promotion().await;
    w.remote.git(&["checkout", "-q", "promote"]);
    w.remote.write("deploy/extra.yaml", "x: 1\n");
    w.remote.commit_push("one more");
    let err = w.client.merge(&pr).await.unwrap_err();
    assert!(matches!(err, ForgeError::HeadMoved { .. }), "{err:?}");
    assert_eq!(w.main_tip(), before);
}

async fn a_branch_with_nothing_new_opens_nothing(kind: ForgeKind) {
    let w = World::new(kind, UNCHECKED).await;
    w.remote
        .git(&["push", "-q", "origin", "main:refs/heads/same"]);
    let err = w.client.open("same", "main", "t", "").await.unwrap_err();
    match kind {
        ForgeKind::GitLab => assert!(
            matches!(err, ForgeError::Refused { status: 422, .. }),
            "{err:?}"
        ),
        _ => assert!(matches!(err, ForgeError::NoChanges { .. }), "{err:?}"),
    }
}

async fn auto_merge_with_nothing_left_to_wait_for(kind: ForgeKind) {
    let w = World::new(kind, UNCHECKED).await;
    let pr = w.open_promotion().await;
    match (kind, w.client.enable_auto_merge(&pr).await) {
        // GitHub refuses: the pull request is in `clean` status, merge it instead.
        (ForgeKind::GitHub, Err(ForgeError::AlreadyMergeable { message, .. })) => {
            assert_eq!(message, "Pull request Pull request is in clean status");
            let commit = w.client.merge(&pr).await.unwrap();
            assert_eq!(w.main_tip(), commit);
        }
        // GitLab and Gitea merge at once.
        (ForgeKind::GitLab | ForgeKind::Gitea, Ok(AutoMerge::Merged { merge_commit })) => {
            assert_eq!(w.main_tip(), merge_commit);
        }
        (_, other) => panic!("{other:?}"),
    }
    assert!(w.main_has(&pr.head_sha));
}

async fn auto_merge_where_the_repository_does_not_allow_it(kind: ForgeKind) {
    let w = World::new(
        kind,
        Setup {
            required: &["ci"],
            allow_auto_merge: false,
        },
    )
    .await;
    let pr = w.open_promotion().await;
    let err = w.client.enable_auto_merge(&pr).await.unwrap_err();
    match kind {
        ForgeKind::GitHub => {
            assert!(
                matches!(&err, ForgeError::AutoMergeNotAllowed { message, .. }
                if message == "Auto merge is not allowed for this repository"),
                "{err:?}"
            );
        }
        ForgeKind::Gitea => assert!(
            matches!(err, ForgeError::AutoMergeNotAllowed { .. }),
            "{err:?}"
        ),
        ForgeKind::GitLab => assert!(
            matches!(err, ForgeError::NotMergeable { status: 405, .. }),
            "{err:?}"
        ),
    }
    assert_eq!(w.client.get(&pr).await.unwrap(), w.auto_merge_shown(false));
}

async fn a_direct_merge_waits_for_the_required_checks(kind: ForgeKind) {
    let w = World::new(kind, CHECKED).await;
    let pr = w.open_promotion().await;
    let err = w.client.merge(&pr).await.unwrap_err();
    assert!(matches!(err, ForgeError::NotMergeable { .. }), "{err:?}");
    w.forge
        .set_status(&pr.head_sha, "ci", "success")
        .await
        .unwrap();
    let commit = w.client.merge(&pr).await.unwrap();
    assert_eq!(w.main_tip(), commit);
    let err = w.client.close(&pr).await.unwrap_err();
    assert!(matches!(err, ForgeError::AlreadyMerged { .. }), "{err:?}");
}

macro_rules! flavour {
    ($module:ident, $kind:expr) => {
        mod $module {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn auto_merge_waits_for_the_required_check_then_merges_into_the_base() {
                super::auto_merge_waits_for_the_required_check_then_merges_into_the_base($kind)
                    .await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn without_auto_merge_it_stays_open_until_a_human_merges() {
                super::without_auto_merge_it_stays_open_until_a_human_merges($kind).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_closed_pull_request_stays_closed_and_unmerged() {
                super::a_closed_pull_request_stays_closed_and_unmerged($kind).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_conflicting_pull_request_is_not_mergeable() {
                super::a_conflicting_pull_request_is_not_mergeable($kind).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_second_pull_request_from_the_branch_already_exists() {
                super::a_second_pull_request_from_the_branch_already_exists($kind).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_bad_token_is_unauthorized_and_never_shown() {
                super::a_bad_token_is_unauthorized_and_never_shown($kind).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_direct_push_to_the_protected_branch_is_refused_in_the_forges_words() {
                super::a_direct_push_to_the_protected_branch_is_refused_in_the_forges_words($kind)
                    .await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_merge_pinned_to_a_head_that_moved_merges_nothing() {
                super::a_merge_pinned_to_a_head_that_moved_merges_nothing($kind).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_branch_with_nothing_new_opens_nothing() {
                super::a_branch_with_nothing_new_opens_nothing($kind).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn auto_merge_with_nothing_left_to_wait_for() {
                super::auto_merge_with_nothing_left_to_wait_for($kind).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn auto_merge_where_the_repository_does_not_allow_it() {
                super::auto_merge_where_the_repository_does_not_allow_it($kind).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_rate_limit_is_waited_out_once_and_a_longer_one_holds_every_request() {
                super::a_rate_limit_is_waited_out_once_and_a_longer_one_holds_every_request($kind)
                    .await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_direct_merge_waits_for_the_required_checks() {
                super::a_direct_merge_waits_for_the_required_checks($kind).await
            }
        }
    };
}

flavour!(github, ForgeKind::GitHub);
flavour!(gitlab, ForgeKind::GitLab);
flavour!(gitea, ForgeKind::Gitea);
