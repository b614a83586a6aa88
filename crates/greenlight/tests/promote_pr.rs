//! End to end: `greenlight promote run` with `promotion: {via: pull-request}` against the
//! sandbox's forge face (GitHub's and Gitea's pull-request APIs over the same bare repository
//! the sandbox's Argo CD stand-in syncs; docs/sandbox-fidelity.md). Real git throughout; a
//! human's merge or close is the face's control route. Waits are on printed lines, never
//! fixed sleeps.

#[macro_use]
mod common;
use common::*;
use greenlight_testkit::{Proc, http_post};
use std::process::Output;
use std::time::Duration;

const T: Duration = Duration::from_secs(90);
const LIVE: &str =
    "registry.local/web@sha256:1111111111111111111111111111111111111111111111111111111111111111";
const NEW: &str =
    "registry.local/web@sha256:2222222222222222222222222222222222222222222222222222222222222222";
const TOKEN: &str = "forge-t0ken";

struct World {
    repo: Repo,
    sb: Sandbox,
    /// The forge's base URL (its control routes) and its API.
    forge: String,
    api: String,
    dir: tempfile::TempDir,
}

/// The live app and the candidates' directory, the sandbox deploying both, and its forge face
/// (`flavour`) over the same bare repository.
fn world(flavour: &str) -> World {
    world_with(flavour, &[])
}

/// [`world`] with more of the sandbox's forge flags.
fn world_with(flavour: &str, forge_flags: &[&str]) -> World {
    let repo = Repo::new();
    repo.write("apps/web/deploy.yaml", &deployment("web", LIVE))
        .write("apps/candidates/README.md", "promotion candidates\n")
        .commit_push("web: pinned");
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("forge-token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let sb = sandbox(
        &repo,
        &["web=apps/web", "cands=apps/candidates"],
        &[
            "--prune",
            "cands",
            "--allow-empty",
            "cands",
            "--forge",
            flavour,
            "--forge-listen",
            "127.0.0.1:0",
            "--forge-token-file",
            token.to_str().unwrap(),
            "--forge-project",
            "acme/deploy",
        ]
        .into_iter()
        .chain(forge_flags.iter().copied())
        .collect::<Vec<_>>(),
    );
    let line = sb
        .proc
        .wait_line(&format!("forge ({flavour}) listening on "), T);
    let forge = line
        .split("listening on ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap()
        .to_string();
    let api = line
        .split("(API ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap()
        .to_string();
    settled(&sb, &repo, &["web", "cands"]);
    World {
        repo,
        sb,
        forge,
        api,
        dir,
    }
}

impl World {
    /// promote.yaml proposing by pull request on `flavour`, one passing `command` check.
    fn config(&self, flavour: &str, auto_merge: bool) -> String {
        let text = format!(
            "apiVersion: greenlight.dev/v1alpha1
kind: Promotion
live:
  app: web
  manifest: apps/web/deploy.yaml
  workload: {{kind: Deployment, name: web, namespace: apps, container: main}}
candidate:
  app: cands
  path: apps/candidates
  port: 8080
checks:
  - name: smoke
    command:
      argv: [sh, -c, 'echo smoke ok']
      timeout: 30s
promotion:
  via: pull-request
  forge: {flavour}
  autoMerge: {auto_merge}
  forgeUrl: {}
  project: acme/deploy
  watch: {{mode: shadow, deadline: 60s}}
",
            self.api
        );
        let file = self.dir.path().join("promote.yaml");
        std::fs::write(&file, text).unwrap();
        file.to_string_lossy().into_owned()
    }

    fn args<'a>(&'a self, config: &'a str, extra: &[&'a str]) -> Vec<String> {
        let token = self.dir.path().join("forge-token");
        let mut args: Vec<String> = [
            "promote",
            "run",
            "--config",
            config,
            "--repo",
            &self.repo.repo(),
            "--argocd-url",
            &self.sb.url,
            "--git-author",
            "greenlight-bot <bot@greenlight.test>",
            "--candidate",
            NEW,
            "--candidate-deadline",
            "30s",
            "--forge-token-file",
            token.to_str().unwrap(),
        ]
        .map(String::from)
        .into();
        args.extend(JUDGE_TIMINGS.iter().chain(extra).map(|s| s.to_string()));
        args
    }

    fn run(&self, config: &str, extra: &[&str]) -> Output {
        std::process::Command::new(BIN)
            .args(self.args(config, extra))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    }

    fn spawn(&self, config: &str, extra: &[&str]) -> Proc {
        Proc::spawn(BIN, self.args(config, extra), &[])
    }

    fn control(&self, action: &str, number: u64) -> String {
        http_post(&format!(
            "{}/sandbox/v1/forge/{action}?number={number}",
            self.forge
        ))
    }

    fn pull(&self, number: u64) -> serde_json::Value {
        let body = greenlight_testkit::http_get(&format!(
            "{}/sandbox/v1/forge/pulls/{number}",
            self.forge
        ));
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
    }

    fn live_manifest(&self) -> String {
        self.repo.bare_git(&["show", "main:apps/web/deploy.yaml"])
    }

    fn files_under_candidates(&self) -> Vec<String> {
        self.repo
            .bare_git(&["ls-tree", "-r", "--name-only", "main", "apps/candidates"])
            .lines()
            .map(str::to_string)
            .collect()
    }
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// With auto-merge and nothing to wait for, the request merges at once (GitHub refuses to
/// arm a request that can merge now, so the gate merges it; Gitea merges on the arming): the
/// run ends promoted, main's tip the merge of the promotion commit.
fn auto_merge_with_nothing_to_wait_for_promotes_through_a_merged_pull_request(flavour: &str) {
    let w = world(flavour);
    let cfg = w.config(flavour, true);
    let o = w.run(&cfg, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("check 1 smoke (command) passed"), "{out}");
    assert!(out.contains("promoted"), "{out}");
    assert!(!out.contains("proposed"), "{out}");
    // The request that carried it is named, though it merged at once.
    assert!(
        out.contains("pull request #1 opened: ") && out.contains("merged at once as "),
        "{out}"
    );
    // The tip is the forge's merge; its second parent the promotion commit, with the evidence.
    let parents = w.repo.bare_git(&["log", "-1", "--format=%P", "main"]);
    assert_eq!(parents.split(' ').count(), 2, "a merge commit: {parents}");
    let promotion = w.repo.bare_git(&["log", "-1", "--format=%B", "main^2"]);
    assert!(
        promotion.starts_with(&format!("promote web: {NEW} (gate passed)"))
            && promotion.contains("Greenlight-Check: 1 smoke (command) passed"),
        "{promotion}"
    );
    assert_eq!(w.live_manifest(), deployment("web", NEW).trim_end());
    assert_eq!(w.files_under_candidates(), ["apps/candidates/README.md"]);
    let pr = w.pull(1);
    assert_eq!(pr["state"], "merged", "{pr}");
    assert!(!err.contains(TOKEN) && !out.contains(TOKEN));
}

/// Without auto-merge the run ends `proposed` with the request's URL: nothing on main changed
/// (the candidate and the lock stay until the merge), and the request's body carries the
/// evidence. A human's merge later promotes.
fn without_auto_merge_the_run_ends_proposed_and_a_human_merge_promotes(flavour: &str) {
    let w = world(flavour);
    let cfg = w.config(flavour, false);
    let before = w.live_manifest();
    let o = w.run(&cfg, &["--output", "json"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["outcome"], "proposed", "{j}");
    let url = j["pull_request"].as_str().unwrap();
    assert!(url.ends_with("/1"), "{url}");
    assert!(
        j["reason"]
            .as_str()
            .unwrap()
            .contains("nothing is live until it merges"),
        "{j}"
    );
    assert!(
        j["messages"]
            .to_string()
            .contains("it waits for a human's merge"),
        "{j}"
    );
    assert_eq!(w.live_manifest(), before, "main untouched");
    assert_eq!(
        w.files_under_candidates(),
        [
            "apps/candidates/README.md",
            "apps/candidates/web-candidate.lock",
            "apps/candidates/web-candidate.yaml"
        ],
        "the candidate and the lock stay until the merge"
    );
    let pr = w.pull(1);
    assert_eq!(
        (pr["state"].as_str(), pr["base"].as_str()),
        (Some("open"), Some("main")),
        "{pr}"
    );
    assert!(
        pr["head"]
            .as_str()
            .unwrap()
            .starts_with("greenlight/promote/web-"),
        "{pr}"
    );
    let head = w
        .repo
        .bare_git(&["log", "-1", "--format=%B", pr["head_sha"].as_str().unwrap()]);
    assert!(
        head.contains("Greenlight-Check: 1 smoke (command) passed"),
        "{head}"
    );
    w.control("merge", 1);
    assert_eq!(w.live_manifest(), deployment("web", NEW).trim_end());
    assert_eq!(w.files_under_candidates(), ["apps/candidates/README.md"]);
}

/// `--wait-merge` follows the request: a human's merge ends the run promoted, a close ends it
/// blocked with the candidate kept and the lock released.
fn wait_merge_follows_a_merge_to_promoted_and_a_close_to_blocked(flavour: &str) {
    let w = world(flavour);
    let cfg = w.config(flavour, false);
    let mut p = w.spawn(&cfg, &["--wait-merge", "60s"]);
    p.wait_line("pull request #1 opened", T);
    p.wait_line("waiting up to 1m for it to merge or close", T);
    w.control("merge", 1);
    let status = p.wait_exit(T);
    let out = p.output();
    assert_eq!(status.code(), Some(0), "{out}");
    assert!(out.contains("pull request #1 merged as "), "{out}");
    assert!(out.contains(&format!("promoted {NEW} to web in ")), "{out}");
    assert_eq!(w.live_manifest(), deployment("web", NEW).trim_end());

    // The next promotion (the old image back, since the new one is live) is closed by a human.
    let args: Vec<String> = w
        .args(&cfg, &["--wait-merge", "60s"])
        .into_iter()
        .map(|a| if a == NEW { LIVE.to_string() } else { a })
        .collect();
    let mut p = Proc::spawn(BIN, args, &[]);
    p.wait_line("pull request #2 opened", T);
    w.control("close", 2);
    let status = p.wait_exit(T);
    let out = p.output();
    assert_eq!(status.code(), Some(1), "{out}");
    assert!(
        out.contains("pull request closed unmerged, promotion blocked"),
        "{out}"
    );
    assert_eq!(
        w.live_manifest(),
        deployment("web", NEW).trim_end(),
        "nothing promoted"
    );
    assert_eq!(
        w.files_under_candidates(),
        [
            "apps/candidates/README.md",
            "apps/candidates/web-candidate.yaml"
        ],
        "the candidate kept, the lock released"
    );
    let msg = w.repo.bare_git(&["log", "-1", "--format=%B", "main"]);
    assert!(msg.contains("was closed unmerged"), "{msg}");
}

#[test]
fn github_auto_merge_with_nothing_to_wait_for() {
    auto_merge_with_nothing_to_wait_for_promotes_through_a_merged_pull_request("github");
}

#[test]
fn gitea_auto_merge_with_nothing_to_wait_for() {
    auto_merge_with_nothing_to_wait_for_promotes_through_a_merged_pull_request("gitea");
}

#[test]
fn github_without_auto_merge_ends_proposed() {
    without_auto_merge_the_run_ends_proposed_and_a_human_merge_promotes("github");
}

#[test]
fn gitlab_without_auto_merge_ends_proposed() {
    without_auto_merge_the_run_ends_proposed_and_a_human_merge_promotes("gitlab");
}

#[test]
fn github_wait_merge_follows_merge_and_close() {
    wait_merge_follows_a_merge_to_promoted_and_a_close_to_blocked("github");
}

/// A repository that does not allow auto-merge: the request is open and waits for a human,
/// the run says why and ends proposed — it does not fail with a request it opened.
#[test]
fn auto_merge_refused_by_the_repository_leaves_the_request_to_a_human() {
    let w = world_with("github", &["--no-auto-merge"]);
    let cfg = w.config("github", true);
    let o = w.run(&cfg, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("auto-merge could not be armed"), "{err}");
    assert!(err.contains("waits for a human's merge"), "{err}");
    assert!(out.contains("nothing is live until it merges"), "{out}");
    assert_eq!(w.pull(1)["state"], "open");
    assert_eq!(w.live_manifest(), deployment("web", LIVE).trim_end());
}

/// The token is required, from a file; `--wait-merge` without a pull request is refused.
#[test]
fn a_pull_request_config_without_its_token_or_a_wait_without_one_is_refused() {
    let w = world("github");
    let cfg = w.config("github", true);
    let args: Vec<String> = w
        .args(&cfg, &[])
        .into_iter()
        .filter(|a| a != "--forge-token-file" && !a.ends_with("forge-token"))
        .collect();
    let o = std::process::Command::new(BIN).args(args).output().unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--forge-token-file is required"), "{err}");
}
