//! End to end: `greenlight promote run --resolve --plain-http` against a real OCI registry
//! (Debian's `docker-registry`, started per test by the kit on a loopback port), the sandbox
//! and a real bare remote. Each test pushes its images over the distribution API and checks
//! what the run pins, commits or refuses against the digests the registry reported for them;
//! and `greenlight guard image --resolve` is run against the same registry.

#[macro_use]
mod common;
use common::*;
use greenlight_testkit::{ManifestKind, Registry};
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The repository every test pushes to.
const REPO: &str = "team/web";

/// A remote whose `main` holds the live app (`apps/web`, its image `live_image`) and the
/// candidates' directory, the sandbox deploying both, settled.
fn world(live_image: &str) -> (Repo, Sandbox) {
    let repo = Repo::new();
    repo.write("apps/web/deploy.yaml", &deployment("web", live_image))
        .write("apps/candidates/README.md", "promotion candidates\n")
        .commit_push("web: live");
    let sb = sandbox(
        &repo,
        &["web=apps/web", "cands=apps/candidates"],
        &["--prune", "cands", "--allow-empty", "cands"],
    );
    settled(&sb, &repo, &["web", "cands"]);
    (repo, sb)
}

/// A promotion config for `apps/web` with one `command` check that prints the candidate.
fn config(dir: &Path) -> String {
    let text = "apiVersion: greenlight.dev/v1alpha1
kind: Promotion
live:
  app: web
  manifest: apps/web/deploy.yaml
  workload: {kind: Deployment, name: web, namespace: apps, container: main}
candidate:
  app: cands
  path: apps/candidates
  port: 8080
checks:
  - name: smoke
    command:
      argv: [sh, -c, 'echo smoke ok for {{candidate.image}}']
      timeout: 30s
promotion:
  watch: {mode: shadow, deadline: 60s}
";
    let file = dir.join("promote.yaml");
    std::fs::write(&file, text).unwrap();
    file.to_string_lossy().into_owned()
}

/// `greenlight promote run` of `candidate` over `repo` and the sandbox (or an Argo CD URL no
/// one answers, for runs that must stop before Argo CD), with the kit's test timings.
fn run(repo: &Repo, argocd_url: &str, config: &str, candidate: &str, extra: &[&str]) -> Output {
    let mut args = vec!["--candidate", candidate, "--candidate-deadline", "30s"];
    args.extend(extra);
    promote_cmd(repo, argocd_url, "run", config, &args)
}

const RESOLVE: &[&str] = &["--resolve", "--plain-http"];

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn live_manifest(repo: &Repo) -> String {
    repo.bare_git(&["show", "main:apps/web/deploy.yaml"])
}

/// The registry's log lines of reads (`HEAD`, `GET`) of a manifest of [`REPO`]: what a run
/// asked, the test's own pushes left out.
fn manifest_requests(registry: &Registry) -> Vec<String> {
    registry
        .output()
        .lines()
        .filter(|l| l.contains(&format!("http.request.uri=/v2/{REPO}/manifests/")))
        .filter(|l| l.contains("http.request.method=HEAD") || l.contains("http.request.method=GET"))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_candidate_given_by_tag_is_pinned_to_the_digest_the_registry_serves_and_promoted() {
    let registry = Registry::start();
    // The live manifest names a mutable tag: the run resolves it too, to a different digest.
    let live = registry.image(&format!("{REPO}:stable"));
    let live_digest = registry.push(REPO, "stable", "web 1.0");
    // The candidate's tag is pushed twice: the run must pin what the tag names now.
    let stale = registry.push(REPO, "2.0.0", "web 2.0, first build");
    let digest = registry.push(REPO, "2.0.0", "web 2.0, rebuilt");
    assert!(stale != digest && digest != live_digest);
    let (repo, sb) = world(&live);
    let before = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());

    let tagged = registry.image(&format!("{REPO}:2.0.0"));
    let pinned = format!("{tagged}@{digest}");
    let o = run(&repo, &sb.url, &cfg, &tagged, RESOLVE);
    let (out, err) = text(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{out}\nstderr:\n{err}\nregistry:\n{}",
        registry.output()
    );
    assert!(out.contains(&format!("smoke ok for {pinned}")), "{out}");
    assert!(!out.contains(&stale), "{out}");

    // The candidate commit deployed the pinned reference, and the promotion wrote it live.
    let log = repo.bare_git(&["rev-list", &format!("{before}..main")]);
    assert_eq!(log.lines().count(), 2, "{log}");
    let candidate = repo.bare_git(&["show", "main^:apps/candidates/web-candidate.yaml"]);
    assert!(
        candidate.contains(&format!("image: \"{pinned}\"")),
        "{candidate}"
    );
    let msg = repo.bare_git(&["log", "-1", "--format=%B", "main"]);
    assert!(
        msg.starts_with(&format!("promote web: {pinned} (gate passed)"))
            && msg.contains(&format!("Greenlight-Candidate: {pinned}")),
        "{msg}"
    );
    // The editor quotes a value that starts with a digit (YAML 1.1 could read it as a number).
    assert_eq!(
        live_manifest(&repo),
        deployment("web", &format!("\"{pinned}\"")).trim_end()
    );

    // Both tags were asked about, by HEAD, once each.
    let asked = manifest_requests(&registry);
    for tag in ["2.0.0", "stable"] {
        assert_eq!(
            asked
                .iter()
                .filter(|l| l.contains(&format!("/manifests/{tag} "))
                    && l.contains("http.request.method=HEAD"))
                .count(),
            1,
            "{asked:#?}"
        );
    }
}

#[test]
fn a_candidate_given_by_tag_without_resolve_is_refused_before_the_registry_is_asked() {
    let registry = Registry::start();
    let digest = registry.push(REPO, "2.0.0", "web 2.0");
    let repo = Repo::new();
    let before = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());

    for tag in ["2.0.0", "latest"] {
        let image = registry.image(&format!("{REPO}:{tag}"));
        let words = if tag == "latest" {
            "mutable tag `latest`".to_string()
        } else {
            format!(
                "`{image}` is not pinned by digest: the gate verifies and promotes one exact image"
            )
        };
        let o = run(&repo, "http://127.0.0.1:1", &cfg, &image, &[]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "stdout:\n{out}\nstderr:\n{err}");
        assert!(
            err.starts_with(&format!("error: --candidate: `{image}` "))
                && err.contains(&words)
                && err.contains(
                    "pass --resolve to pin it to the digest the registry serves, or give `<image>@sha256:<digest>`"
                ),
            "{err}"
        );
        assert!(!err.contains(&digest), "{err}");
    }
    assert_eq!(repo.remote_tip(), before, "nothing committed");
    assert_eq!(manifest_requests(&registry), Vec::<String>::new());
}

#[test]
fn a_tag_that_resolves_to_the_pinned_live_digest_is_a_no_op() {
    let registry = Registry::start();
    let digest = registry.push(REPO, "1.0.0", "web 1.0");
    // The same image under another tag: the same manifest, the same digest.
    assert_eq!(registry.push(REPO, "1.0.0-rc", "web 1.0"), digest);
    let live = registry.image(&format!("{REPO}@{digest}"));
    let (repo, sb) = world(&live);
    let before = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());

    let o = run(
        &repo,
        &sb.url,
        &cfg,
        &registry.image(&format!("{REPO}:1.0.0-rc")),
        RESOLVE,
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.starts_with(&format!(
            "no-op: the candidate is already live ({digest}); nothing committed, nothing notified"
        )),
        "{out}"
    );
    assert_eq!(out.lines().count(), 1, "one line: {out}");
    assert_eq!(repo.remote_tip(), before, "no commit");
    // The live manifest is pinned: only the candidate's tag was asked about.
    let asked = manifest_requests(&registry);
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert!(asked[0].contains("/manifests/1.0.0-rc "), "{asked:#?}");
}

#[test]
fn a_live_mutable_tag_that_moved_to_the_candidate_is_a_suspicious_no_op() {
    let registry = Registry::start();
    registry.push(REPO, "stable", "web 1.0");
    let live = registry.image(&format!("{REPO}:stable"));
    let (repo, sb) = world(&live);
    // Someone pushed 2.0 to `stable`: the live manifest did not change, the pods did not roll.
    let digest = registry.push(REPO, "stable", "web 2.0");
    assert_eq!(registry.push(REPO, "2.0.0", "web 2.0"), digest);
    let before = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());

    let o = run(
        &repo,
        &sb.url,
        &cfg,
        &registry.image(&format!("{REPO}:2.0.0")),
        RESOLVE,
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(
        out,
        format!(
            "suspicious no-op: the live manifest names {live}, a mutable tag that now resolves to the candidate's digest {digest}; the pods may still run older content (a tag does not roll pods out): pin the live manifest by digest\n"
        )
    );
    assert_eq!(repo.remote_tip(), before, "no commit");
    assert_eq!(live_manifest(&repo), deployment("web", &live).trim_end());
}

#[test]
fn a_tag_the_registry_does_not_have_is_an_error_naming_the_image_and_nothing_is_committed() {
    let registry = Registry::start();
    let digest = registry.push(REPO, "1.0.0", "web 1.0");
    let (repo, sb) = world(&registry.image(&format!("{REPO}@{digest}")));
    let before = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());

    let missing = registry.image(&format!("{REPO}:9.9.9"));
    let o = run(&repo, &sb.url, &cfg, &missing, RESOLVE);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(
        err,
        format!(
            "error: cannot resolve `{missing}`: the registry has no manifest for {missing} (HTTP 404)\n"
        )
    );
    assert_eq!(out, "");
    assert_eq!(repo.remote_tip(), before, "nothing committed");

    // A repository the registry has never heard of reads the same.
    let unknown = registry.image("nobody/here:1.0.0");
    let o = run(&repo, &sb.url, &cfg, &unknown, RESOLVE);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains(&format!(
            "cannot resolve `{unknown}`: the registry has no manifest for {unknown} (HTTP 404)"
        )),
        "{err}"
    );
    assert_eq!(repo.remote_tip(), before, "nothing committed");
}

#[test]
fn a_live_tag_the_registry_does_not_have_is_an_error_that_says_it_is_the_live_image() {
    let registry = Registry::start();
    // The live manifest names a tag the registry no longer has (a retention policy removed it).
    let gone = registry.push(REPO, "stable", "web 1.0");
    let live = registry.image(&format!("{REPO}:stable"));
    let (repo, sb) = world(&live);
    registry.delete_manifest(REPO, &gone);
    registry.push(REPO, "2.0.0", "web 2.0");
    let before = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());

    let candidate = registry.image(&format!("{REPO}:2.0.0"));
    let o = run(&repo, &sb.url, &cfg, &candidate, RESOLVE);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(
        err,
        format!(
            "error: live.manifest apps/web/deploy.yaml: its image `{live}` is resolved with --resolve to tell a no-op: cannot resolve `{live}`: the registry has no manifest for {live} (HTTP 404)\n"
        )
    );
    assert_eq!(out, "");
    assert_eq!(repo.remote_tip(), before, "nothing committed");
}

/// `greenlight guard image --resolve --plain-http` over `images`.
fn guard_resolve(images: &[&str]) -> Output {
    Command::new(BIN)
        .args(["guard", "image", "--resolve", "--plain-http"])
        .args(images)
        .stdin(Stdio::null())
        .output()
        .expect("run greenlight guard")
}

#[test]
fn guard_resolve_pins_oci_docker_and_index_manifests_to_the_digests_the_registry_serves() {
    let registry = Registry::start();
    let oci = registry.push(REPO, "oci", "web oci");
    let docker = registry.push_as(REPO, "docker", "web docker", ManifestKind::DockerV2);
    let arm = registry.push(REPO, "arm", "web arm64");
    let index = registry.push_index(REPO, "latest", &[&oci, &arm]);
    let images: Vec<String> = ["oci", "docker", "latest"]
        .iter()
        .map(|t| registry.image(&format!("{REPO}:{t}")))
        .collect();
    let args: Vec<&str> = images.iter().map(String::as_str).collect();
    let o = guard_resolve(&args);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(
        out,
        format!(
            "{}@{oci}\n{}@{docker}\n{}@{index}\n",
            images[0], images[1], images[2]
        ),
        "a tag that names an index is pinned to the index"
    );
    assert!(err.contains("mutable tag `latest`"), "{err}");

    // The tag moves: the guard pins what it names now.
    let moved = registry.push(REPO, "oci", "web oci, rebuilt");
    let o = guard_resolve(&[&images[0]]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(out, format!("{}@{moved}\n", images[0]));

    // A deleted manifest is gone for its tag too.
    registry.delete_manifest(REPO, &moved);
    let o = guard_resolve(&[&images[0]]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "cannot resolve `{}`: the registry has no manifest",
            images[0]
        )),
        "{err}"
    );
}
