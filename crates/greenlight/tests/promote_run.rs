//! End to end: `greenlight promote run` as a user runs it, against the sandbox (two automated
//! apps: the live one and the candidates') over a real bare remote. The candidate is judged by
//! the watchdog's own runtime; checks are `command` checks, which need no network.

#[macro_use]
mod common;
use common::*;
use greenlight_testkit::{Received, Receiver};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const LIVE: &str =
    "registry.local/web@sha256:1111111111111111111111111111111111111111111111111111111111111111";
const NEW: &str =
    "registry.local/web@sha256:2222222222222222222222222222222222222222222222222222222222222222";

/// A remote whose `main` holds the live app (`apps/web`, pinned to [`LIVE`]) and the
/// candidates' directory, the sandbox deploying both, settled.
fn world() -> (Repo, Sandbox) {
    let repo = Repo::new();
    repo.write("apps/web/deploy.yaml", &deployment("web", LIVE))
        .write("apps/candidates/README.md", "promotion candidates\n")
        .commit_push("web: pinned");
    // The candidates' Application prunes, and may become empty: removing a candidate from git
    // then deletes it from the cluster (docs/promote.md#candidate).
    let sb = sandbox(
        &repo,
        &["web=apps/web", "cands=apps/candidates"],
        &["--prune", "cands", "--allow-empty", "cands"],
    );
    settled(&sb, &repo, &["web", "cands"]);
    (repo, sb)
}

/// A promotion config for `apps/web` whose checks are these `command` argvs.
fn config(dir: &Path, checks: &[(&str, &[&str])]) -> String {
    let mut text = String::from(
        "apiVersion: greenlight.dev/v1alpha1
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
",
    );
    for (name, argv) in checks {
        let argv: Vec<String> = argv
            .iter()
            .map(|a| serde_json::to_string(a).unwrap())
            .collect();
        text.push_str(&format!(
            "  - name: {name}\n    command:\n      argv: [{}]\n      timeout: 30s\n",
            argv.join(", ")
        ));
    }
    text.push_str("promotion:\n  watch: {mode: shadow, deadline: 60s}\n");
    let file = dir.join("promote.yaml");
    std::fs::write(&file, text).unwrap();
    file.to_string_lossy().into_owned()
}

fn run(repo: &Repo, sb: &Sandbox, config: &str, candidate: &str, extra: &[&str]) -> Output {
    let mut args = vec!["--candidate", candidate, "--candidate-deadline", "30s"];
    args.extend(extra);
    promote(repo, sb, "run", config, &args)
}

/// `greenlight promote <action>` over `repo` and the sandbox, with the kit's test timings.
fn promote(repo: &Repo, sb: &Sandbox, action: &str, config: &str, extra: &[&str]) -> Output {
    promote_cmd(repo, &sb.url, action, config, extra)
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn live_manifest(repo: &Repo) -> String {
    repo.bare_git(&["show", "main:apps/web/deploy.yaml"])
}

/// The blocked candidate stays in git with its `kept-until`, the lock released, and the tip's
/// commit says why.
#[track_caller]
fn assert_candidate_kept(repo: &Repo, image: &str) {
    assert_eq!(
        files_under(repo, "apps/candidates"),
        [
            "apps/candidates/README.md",
            "apps/candidates/web-candidate.yaml"
        ],
        "the candidate kept, the lock released"
    );
    let kept = repo.bare_git(&["show", "main:apps/candidates/web-candidate.yaml"]);
    assert!(
        kept.contains(image) && kept.contains("greenlight.dev/kept-until"),
        "{kept}"
    );
    let msg = repo.bare_git(&["log", "-1", "--format=%B", "main"]);
    assert!(
        msg.contains("Greenlight-Gate: blocked, candidate kept:") && msg.contains(image),
        "{msg}"
    );
}

/// A `--notify` file whose one webhook sink posts to `rx`'s `/gate` (docs/notifications.md).
fn notify_file(dir: &Path, rx: &Receiver) -> String {
    let file = dir.join("notify.toml");
    std::fs::write(
        &file,
        format!(
            "[[notify]]\nname = \"gate\"\nsink = \"webhook\"\nurl = {:?}\n",
            rx.url("/gate")
        ),
    )
    .unwrap();
    file.to_string_lossy().into_owned()
}

/// The one notification a run sent (it is delivered before the run exits).
#[track_caller]
fn one_notification(rx: &Receiver) -> serde_json::Value {
    let got: Vec<Received> = rx.received("/gate");
    assert_eq!(got.len(), 1, "{got:#?}");
    // Shown with --nocapture: what a receiver gets (docs/notifications.md#body).
    eprintln!("notification: {}", got[0].body);
    got[0].json()
}

fn files_under(repo: &Repo, dir: &str) -> Vec<String> {
    repo.bare_git(&["ls-tree", "-r", "--name-only", "main", dir])
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_candidate_that_is_confirmed_and_passes_its_check_is_promoted_in_one_commit() {
    let (repo, sb) = world();
    let before = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        &[(
            "smoke",
            &["sh", "-c", "echo smoke ok for {{candidate.image}}"],
        )],
    );
    let rx = Receiver::start();
    let nf = notify_file(dir.path(), &rx);
    let o = run(&repo, &sb, &cfg, NEW, &["--notify", &nf]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    let n = one_notification(&rx);
    assert_eq!(
        (&n["outcome"], &n["title"], &n["source"], &n["app"]),
        (
            &"promoted".into(),
            &"promoted: every check passed".into(),
            &"promote".into(),
            &"web".into()
        )
    );
    assert_eq!(n["commit"], repo.remote_tip().as_str());
    assert_eq!(
        n["message"],
        format!("promoted {NEW}; candidate CONFIRMED; checks: smoke passed").as_str()
    );
    for needle in [
        "promotion of",
        "candidate committed in",
        "candidate ready",
        "check 1 smoke (command) passed",
        &format!("smoke ok for {NEW}"),
        "promoted",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
    }
    // Two commits: the candidate, then the promotion.
    let log = repo.bare_git(&["rev-list", &format!("{before}..main")]);
    assert_eq!(log.lines().count(), 2, "{log}");
    // The candidate commit took the run's lock with the candidate; the promotion removed both.
    let locked = repo.bare_git(&["show", "main^:apps/candidates/web-candidate.lock"]);
    assert!(
        locked.contains(&format!("candidate: {NEW}")) && locked.contains("expires: "),
        "{locked}"
    );
    let candidate_msg = repo.bare_git(&["log", "-1", "--format=%B", "main^"]);
    assert!(
        candidate_msg.contains("Nav-Watchdog: app=cands deadline=30s mode=shadow"),
        "{candidate_msg}"
    );
    let msg = repo.bare_git(&["log", "-1", "--format=%B", "main"]);
    assert!(
        msg.starts_with(&format!("promote web: {NEW} (gate passed)")),
        "{msg}"
    );
    for needle in [
        "Greenlight-Gate: passed: candidate ready, 1 check(s) in order",
        &format!("Greenlight-Candidate: {NEW}"),
        "Greenlight-Check: 1 smoke (command) passed: sh exited 0",
        // A watchdog revert of this commit must not bring the candidate and the lock back.
        "Greenlight-Revert-Keeps: apps/candidates\nNav-Watchdog: app=web deadline=60s mode=shadow expect=Healthy",
    ] {
        assert!(msg.contains(needle), "missing {needle:?} in:\n{msg}");
    }
    // The live manifest's image line alone changed, and the candidate is gone.
    assert_eq!(
        live_manifest(&repo),
        deployment("web", NEW).trim_end(),
        "the image line alone changes"
    );
    assert_eq!(
        files_under(&repo, "apps/candidates"),
        ["apps/candidates/README.md"]
    );
    // And Argo CD deletes it from the cluster: the candidates' app prunes what git dropped.
    let tip = repo.remote_tip();
    let cands = sb.wait_app("cands", std::time::Duration::from_secs(60), |a| {
        a["status"]["sync"]["revision"] == tip.as_str() && a["status"]["sync"]["status"] == "Synced"
    });
    assert!(
        !cands["status"]["resources"]
            .to_string()
            .contains("web-candidate")
            && !sb.tree("cands").to_string().contains("web-candidate"),
        "the candidate is pruned: {}",
        cands["status"]
    );
    assert!(
        cands["status"]["operationState"]["syncResult"]["resources"]
            .to_string()
            .contains("\"Pruned\""),
        "{}",
        cands["status"]
    );
}

/// `--wait-live`: after the promotion lands, its commit is followed to live by the
/// watchdog's judge and every Pod of the live app is checked to run the promoted digest.
#[test]
fn a_promotion_waited_live_is_verified_on_every_pod() {
    let (repo, sb) = world();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 0"])]);
    let o = run(
        &repo,
        &sb,
        &cfg,
        NEW,
        &["--wait-live", "60s", "--output", "json"],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&j["outcome"], &j["verified"]),
        (&"promoted".into(), &true.into()),
        "{j}"
    );
    assert_eq!(j["live"]["state"], "CONFIRMED", "{j}");
    assert_eq!(j["live"]["commit"], repo.remote_tip().as_str());
    assert_eq!(
        j["verification"],
        serde_json::json!([
            "Deployment/apps/web container main: all 1 Pod(s) run sha256:222222222222…"
        ])
    );
    assert!(
        j["messages"]
            .to_string()
            .contains("live and verified: every Pod runs the promoted digest"),
        "{j}"
    );
}

#[test]
fn a_candidates_directory_that_would_be_left_empty_is_kept_by_a_readme() {
    // No candidates' directory yet: the candidates' app has no path until the first candidate.
    let repo = Repo::new();
    repo.write("apps/web/deploy.yaml", &deployment("web", LIVE))
        .commit_push("web: pinned");
    let sb = sandbox(
        &repo,
        &["web=apps/web", "cands=apps/candidates"],
        &["--prune", "cands", "--allow-empty", "cands"],
    );
    settled(&sb, &repo, &["web"]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 0"])]);
    let o = run(&repo, &sb, &cfg, NEW, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(
        files_under(&repo, "apps/candidates"),
        ["apps/candidates/README.md"]
    );
    // The path stays, so Argo CD prunes the candidate rather than losing the app's path.
    let tip = repo.remote_tip();
    let cands = sb.wait_app("cands", std::time::Duration::from_secs(60), |a| {
        a["status"]["sync"]["revision"] == tip.as_str() && a["status"]["sync"]["status"] == "Synced"
    });
    assert!(
        !sb.tree("cands").to_string().contains("web-candidate"),
        "{}",
        cands["status"]
    );
}

#[test]
fn a_failing_check_blocks_the_promotion_and_keeps_the_candidate() {
    let (repo, sb) = world();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        &[
            ("smoke", &["sh", "-c", "echo broken >&2; exit 1"]),
            ("never", &["sh", "-c", "echo must not run; exit 0"]),
        ],
    );
    let rx = Receiver::start();
    let nf = notify_file(dir.path(), &rx);
    let o = run(&repo, &sb, &cfg, NEW, &["--notify", &nf]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("check 1 smoke (command) failed, promotion blocked: sh exited 1"),
        "{out}"
    );
    let n = one_notification(&rx);
    assert_eq!(
        (&n["outcome"], &n["title"]),
        (&"blocked".into(), &"blocked: not promoted".into())
    );
    let words = n["message"].as_str().unwrap();
    // The check that failed says failed; the one that never ran is not called a failure.
    assert!(
        words.ends_with("checks: smoke failed, never not run"),
        "{words}"
    );
    assert!(out.contains("broken"), "{out}");
    assert!(out.contains("candidate kept"), "{out}");
    assert!(
        !out.contains("must not run") && !out.contains("check 2"),
        "{out}"
    );
    assert_eq!(live_manifest(&repo), deployment("web", LIVE).trim_end());
    assert_candidate_kept(&repo, NEW);
}

#[test]
fn a_candidate_equal_to_live_is_a_no_op() {
    let (repo, sb) = world();
    let before = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 0"])]);
    let o = run(&repo, &sb, &cfg, LIVE, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        out.starts_with("no-op: the candidate is already live"),
        "{out}"
    );
    assert_eq!(repo.remote_tip(), before, "no commit");
}

#[test]
fn a_bypass_promotes_without_candidate_or_check_and_never_says_passed() {
    let (repo, sb) = world();
    let before = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "echo ran; exit 0"])]);
    let rx = Receiver::start();
    let nf = notify_file(dir.path(), &rx);
    let o = run(
        &repo,
        &sb,
        &cfg,
        NEW,
        &[
            "--bypass-gate",
            "--reason",
            "incident 42: hotfix",
            "--notify",
            &nf,
        ],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("GATE BYPASSED"), "{out}");
    // The notification says BYPASSED in its title and its words, and never "passed".
    let n = one_notification(&rx);
    assert_eq!(
        (&n["outcome"], &n["title"], &n["level"]),
        (
            &"bypassed".into(),
            &"BYPASSED: the checks did not run".into(),
            &"warn".into()
        )
    );
    let words = format!("{} {}", n["title"], n["message"]);
    assert!(words.contains("incident 42: hotfix"), "{words}");
    assert!(
        !words
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| w.eq_ignore_ascii_case("passed")),
        "{words}"
    );
    assert!(out.contains("BYPASSED, NO CHECK RAN"), "{out}");
    let said = format!("{out}{err}");
    assert!(
        !said
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| w.eq_ignore_ascii_case("passed") || w.eq_ignore_ascii_case("verified")),
        "a bypass never says passed:\n{said}"
    );
    assert!(!out.contains("ran"), "no check runs: {out}");
    let log = repo.bare_git(&["rev-list", &format!("{before}..main")]);
    assert_eq!(log.lines().count(), 1, "one commit, no candidate: {log}");
    let msg = repo.bare_git(&["log", "-1", "--format=%B", "main"]);
    assert!(
        msg.starts_with(&format!("promote web: {NEW} (GATE BYPASSED, no check ran)")),
        "{msg}"
    );
    assert!(
        msg.contains("Greenlight-Gate: bypassed, no check ran: incident 42: hotfix"),
        "{msg}"
    );
    assert_eq!(live_manifest(&repo), deployment("web", NEW).trim_end());

    // A bypass nobody noticed: the pipeline proposes the same image again. There is nothing
    // to promote, but the no-op says that no check ever ran on what is live.
    let tip = repo.remote_tip();
    let bypass = short(&tip);
    let o = run(&repo, &sb, &cfg, NEW, &["--notify", &nf]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.starts_with("no-op on a bypassed image: the candidate is already live (sha256:2222")
            && out.contains(&format!(
            "a GATE BYPASS put it there in {bypass} (incident 42: hotfix) and no check ever ran on it"
        )),
        "{out}"
    );
    assert_eq!(out.lines().count(), 1, "{out}");
    assert_eq!(repo.remote_tip(), tip, "nothing committed");
    assert_eq!(rx.received("/gate").len(), 1, "a no-op sends nothing");
}

/// A run's sinks are delivered side by side: one whose receiver hangs holds only itself, for at
/// most the run's wait after its outcome is printed; the exit code is the run's.
#[test]
fn a_hanging_receiver_keeps_no_other_sink_from_the_runs_notification() {
    let (repo, sb) = world();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 0"])]);
    let rx = Receiver::start();
    rx.answer("/stuck", greenlight_testkit::Answer::Hang);
    let nf = dir.path().join("notify.toml");
    std::fs::write(
        &nf,
        format!(
            "[[notify]]\nname = \"stuck\"\nsink = \"webhook\"\nurl = {:?}\ntimeout = \"120s\"\n\n[[notify]]\nname = \"gate\"\nsink = \"webhook\"\nurl = {:?}\n",
            rx.url("/stuck"),
            rx.url("/gate")
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let o = run(
        &repo,
        &sb,
        &cfg,
        NEW,
        &[
            "--bypass-gate",
            "--reason",
            "incident 7",
            "--notify",
            nf.to_str().unwrap(),
        ],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(one_notification(&rx)["outcome"], "bypassed");
    assert_eq!(rx.received("/stuck").len(), 1);
    assert!(
        err.contains("notify \"stuck\": 1 notification(s) not delivered in 20s"),
        "{err}"
    );
    // The run's wait cuts the stuck receiver's 120 s attempt short.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(100), "the run took {took:?}");
}

fn short(sha: &str) -> &str {
    &sha[..12]
}

#[test]
fn kept_candidates_past_their_retention_are_a_warning_on_every_run() {
    let (repo, sb) = world();
    // Another workload's candidate, kept by an earlier run and long expired: nothing ran gc.
    repo.write(
        "apps/candidates/api-candidate.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: api-candidate\n  namespace: apps\n  annotations:\n    greenlight.dev/kept-until: \"2026-01-02T03:04:05Z\"\n",
    )
    .commit_push("api: a kept candidate");
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 0"])]);
    let o = run(&repo, &sb, &cfg, LIVE, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0]
            .starts_with("warning, kept candidates pile up: 1 candidate(s) past their retention")
            && lines[0].contains("apps/candidates/api-candidate.yaml")
            && lines[0].contains("2026-01-02T03:04:05Z"),
        "{out}"
    );
    assert!(lines[1].starts_with("no-op: "), "{out}");
}

#[test]
fn the_live_manifest_changed_mid_run_aborts_and_nothing_is_promoted() {
    let (repo, sb) = world();
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other");
    kit_git(
        dir.path(),
        &["clone", "-q", &repo.repo(), other.to_str().unwrap()],
    );
    let o = other.to_str().unwrap();
    // A check that edits the live manifest in git, as another promotion or a human would.
    let script = format!(
        "git -C {o} pull -q origin main && echo '# edited' >> {o}/apps/web/deploy.yaml && git -C {o} -c user.name=h -c user.email=h@x commit -qam 'edit live' && git -C {o} push -q origin HEAD:main"
    );
    let cfg = config(dir.path(), &[("meddle", &["sh", "-c", &script])]);
    let o = run(&repo, &sb, &cfg, NEW, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("aborted: the live manifest changed"), "{out}");
    assert!(!out.lines().any(|l| l.starts_with("promoted")), "{out}");
    let live = live_manifest(&repo);
    assert!(live.contains(LIVE) && live.contains("# edited"), "{live}");
    assert!(!live.contains(NEW), "{live}");
    let msg = repo.bare_git(&["log", "-1", "--format=%B", "main"]);
    assert!(!msg.contains("gate passed"), "{msg}");
}

#[test]
fn a_candidate_given_by_tag_is_refused_without_resolve() {
    let (repo, sb) = (Repo::new(), None::<Sandbox>);
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 0"])]);
    let before = repo.remote_tip();
    let out = Command::new(BIN)
        .args([
            "promote",
            "run",
            "--config",
            &cfg,
            "--candidate",
            "registry.local/web:latest",
            "--repo",
            &repo.repo(),
            "--argocd-url",
            "http://127.0.0.1:1",
        ])
        .output()
        .unwrap();
    drop(sb);
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--resolve") && err.contains("latest"), "{err}");
    assert_eq!(repo.remote_tip(), before);
}

#[test]
fn the_self_test_passes_when_the_gate_blocks_a_candidate_that_cannot_start_and_never_promotes() {
    let (repo, sb) = world();
    let before = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "echo must not run"])]);
    let o = promote(
        &repo,
        &sb,
        "self-test",
        &cfg,
        &["--candidate-deadline", "6s"],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("candidate not ready"), "{out}");
    assert!(out.contains("self-test passed: the gate blocked"), "{out}");
    assert!(!out.contains("must not run"), "{out}");
    // The candidate was committed, then removed; the live manifest never changed.
    let log = repo.bare_git(&["rev-list", &format!("{before}..main")]);
    assert_eq!(log.lines().count(), 2, "{log}");
    assert_eq!(live_manifest(&repo), deployment("web", LIVE).trim_end());
    assert_eq!(
        files_under(&repo, "apps/candidates"),
        ["apps/candidates/README.md"]
    );
    let first = repo.bare_git(&["log", "-1", "--format=%B", "main^"]);
    assert!(
        first.contains("greenlight-self-test-does-not-exist@sha256:0000"),
        "{first}"
    );
}

#[test]
fn a_self_test_that_the_gate_lets_through_fails() {
    // With a registry file, only the images it lists exist: listing the self-test's image
    // makes its candidate healthy, and the gate must then say it let it through (exit 1),
    // without promoting.
    let repo = Repo::new();
    repo.write("apps/web/deploy.yaml", &deployment("web", LIVE))
        .write("apps/candidates/README.md", "promotion candidates\n")
        .commit_push("web: pinned");
    let registry = repo.path("registry.txt");
    let zeros = "0".repeat(64);
    std::fs::write(
        &registry,
        format!("{LIVE}\nregistry.local/web:greenlight-self-test-does-not-exist@sha256:{zeros}\n"),
    )
    .unwrap();
    let sb = sandbox(
        &repo,
        &["web=apps/web", "cands=apps/candidates"],
        &[
            "--registry",
            registry.to_str().unwrap(),
            "--prune",
            "cands",
            "--allow-empty",
            "cands",
        ],
    );
    settled(&sb, &repo, &["web", "cands"]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 0"])]);
    let o = promote(
        &repo,
        &sb,
        "self-test",
        &cfg,
        &["--candidate-deadline", "20s"],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("self-test FAILED"), "{out}");
    assert_eq!(live_manifest(&repo), deployment("web", LIVE).trim_end());
    assert_eq!(
        files_under(&repo, "apps/candidates"),
        ["apps/candidates/README.md"]
    );
}

#[test]
fn a_prometheus_check_blocks_a_candidate_with_errors_and_passes_one_without() {
    use greenlight_testkit::{Exporter, Prometheus};
    let exporter = Exporter::start();
    exporter.set("candidate_errors", &[("service", "web-candidate")], 5.0);
    let prom = Prometheus::start(&exporter);
    let query = "candidate_errors{service=\"web-candidate\"}";
    prom.wait_for_value(query, |v| v == [5.0], Duration::from_secs(30));
    let (repo, sb) = world();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 0"])]);
    let mut text_cfg = std::fs::read_to_string(&cfg).unwrap();
    let errors = format!(
        "  - name: errors
    prometheus:
      address: {}
      query: candidate_errors{{service=\"{{{{candidate.service}}}}\"}}
      count: 2
      interval: 300ms
      successCondition: result[0] < 1
promotion:",
        prom.url()
    );
    text_cfg = text_cfg.replace("promotion:", &errors);
    std::fs::write(&cfg, text_cfg).unwrap();

    let o = run(&repo, &sb, &cfg, NEW, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains(
            "check 2 errors (prometheus) failed, promotion blocked: Failed: errors Failed"
        ),
        "{out}"
    );
    assert_eq!(live_manifest(&repo), deployment("web", LIVE).trim_end());

    exporter.set("candidate_errors", &[("service", "web-candidate")], 0.0);
    prom.wait_for_value(query, |v| v == [0.0], Duration::from_secs(30));
    let o = run(&repo, &sb, &cfg, NEW, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("check 2 errors (prometheus) passed: Successful: errors Successful (2 measured: 2 successful"),
        "{out}"
    );
    assert_eq!(live_manifest(&repo), deployment("web", NEW).trim_end());
}

/// Argo Rollouts' other endings of an analysis, measured against a real Prometheus through the
/// binary: a failure over a non-zero `failureLimit`, Inconclusive, and Error on a query
/// Prometheus refuses. None promotes; the undecided ones say an undecided check is not a pass.
#[test]
fn prometheus_analyses_fail_on_failure_limit_end_inconclusive_and_error_on_a_bad_query() {
    use greenlight_testkit::{Exporter, Prometheus};
    let exporter = Exporter::start();
    exporter.set("candidate_latency", &[("service", "web-candidate")], 5.0);
    let prom = Prometheus::start(&exporter);
    prom.wait_for_value(
        "candidate_latency{service=\"web-candidate\"}",
        |v| v == [5.0],
        Duration::from_secs(30),
    );
    let (repo, sb) = world();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 0"])]);
    let base = std::fs::read_to_string(&cfg).unwrap();
    let with_metric = |fields: &str| {
        let block = format!(
            "  - name: latency\n    prometheus:\n      address: {}\n{fields}promotion:",
            prom.url()
        );
        std::fs::write(&cfg, base.replace("promotion:", &block)).unwrap();
    };
    let query = "      query: candidate_latency{service=\"{{candidate.service}}\"}\n";
    let cases: [(String, &str); 3] = [
        (
            format!(
                "{query}      count: 4\n      interval: 200ms\n      successCondition: result[0] < 1\n      failureLimit: 1\n"
            ),
            "check 2 latency (prometheus) failed, promotion blocked: Failed: latency Failed (2 measured: 0 successful, 2 failed, 0 inconclusive, 0 error) — Metric \"latency\" assessed Failed due to failed (2) > failureLimit (1)",
        ),
        (
            format!(
                "{query}      count: 2\n      interval: 200ms\n      successCondition: result[0] < 1\n      failureCondition: result[0] > 10\n"
            ),
            "check 2 latency (prometheus) undecided, promotion blocked: Inconclusive: latency Inconclusive (1 measured: 0 successful, 0 failed, 1 inconclusive, 0 error) — Metric \"latency\" assessed Inconclusive due to inconclusive (1) > inconclusiveLimit (0)",
        ),
        (
            "      query: sum(candidate_latency\n      count: 3\n      interval: 200ms\n      successCondition: result[0] < 1\n      consecutiveErrorLimit: 1\n".to_string(),
            // An error is no measurement (Argo Rollouts counts it apart), and Prometheus's own
            // words come with it.
            "check 2 latency (prometheus) undecided, promotion blocked: Error: latency Error (0 measured: 0 successful, 0 failed, 0 inconclusive, 2 error) — Metric \"latency\" assessed Error due to consecutiveErrors (2) > consecutiveErrorLimit (1): \"Error Message: Prometheus at http://127.0.0.1:",
        ),
    ];
    for (fields, expected) in cases {
        with_metric(&fields);
        let o = run(&repo, &sb, &cfg, NEW, &[]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
        assert!(out.contains(expected), "{expected:?} missing from:\n{out}");
        assert_eq!(live_manifest(&repo), deployment("web", LIVE).trim_end());
    }
    let o = run(&repo, &sb, &cfg, NEW, &[]);
    let (out, _) = text(&o);
    assert!(
        out.contains("rejected the query (HTTP 400, bad_data)") && out.contains("parse error"),
        "{out}"
    );
}

#[test]
fn a_run_while_another_holds_the_lock_is_refused_and_an_expired_lock_is_taken_over() {
    let (repo, sb) = world();
    let lock = |expires: &str| {
        format!(
            "holder: release-bot\ncandidate: {NEW}\nstarted: 2026-01-01T00:00:00Z\nexpires: {expires}\n"
        )
    };
    repo.write(
        "apps/candidates/web-candidate.lock",
        &lock("2999-01-01T00:00:00Z"),
    )
    .commit_push("another run's lock");
    let held = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 0"])]);
    let o = run(&repo, &sb, &cfg, NEW, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("another promotion run holds the lock apps/candidates/web-candidate.lock (held by release-bot")
            && err.contains("expires at 2999-01-01T00:00:00Z")
            && err.contains("nothing was committed"),
        "{err}"
    );
    assert_eq!(repo.remote_tip(), held, "nothing committed");

    repo.write(
        "apps/candidates/web-candidate.lock",
        &lock("2000-01-01T00:00:00Z"),
    )
    .commit_push("a lock long expired");
    let o = run(&repo, &sb, &cfg, NEW, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("expired at 2000-01-01T00:00:00Z: taken over"),
        "{out}"
    );
    assert_eq!(
        files_under(&repo, "apps/candidates"),
        ["apps/candidates/README.md"]
    );
    assert_eq!(live_manifest(&repo), deployment("web", NEW).trim_end());
}

fn kit_git(dir: &Path, args: &[&str]) -> String {
    git(dir, args)
}

#[test]
fn a_candidate_stuck_pending_is_reported_short_of_capacity_with_the_schedulers_words() {
    const SCHEDULER: &str = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.";
    // The live workload asks for what the cluster lacks: its pod template carries the sandbox's
    // schedule annotation, so the candidate made from it is Pending too.
    let live = deployment("web", LIVE)
        .replace(
            "spec:\n  replicas: 1\n",
            "spec:\n  replicas: 1\n  progressDeadlineSeconds: 2\n",
        )
        .replace(
            "    metadata:\n      labels: {app: web}\n",
            &format!(
                "    metadata:\n      labels: {{app: web}}\n      annotations:\n        {}: \"{SCHEDULER}\"\n",
                greenlight_sandbox::SCHEDULE_ANNOTATION
            ),
        );
    assert!(live.contains(SCHEDULER) && live.contains("progressDeadlineSeconds: 2"));
    let repo = Repo::new();
    repo.write("apps/web/deploy.yaml", &live)
        .write("apps/candidates/README.md", "promotion candidates\n")
        .commit_push("web: pinned, on GPUs");
    let sb = sandbox(
        &repo,
        &["web=apps/web", "cands=apps/candidates"],
        &["--prune", "cands", "--allow-empty", "cands"],
    );
    settled(&sb, &repo, &["cands"]);
    let tip = repo.remote_tip();
    sb.wait_app("web", Duration::from_secs(60), |a| {
        a["status"]["sync"]["revision"] == tip.as_str() && a["status"]["sync"]["status"] == "Synced"
    });
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("never", &["sh", "-c", "echo must not run"])]);
    let o = promote(
        &repo,
        &sb,
        "run",
        &cfg,
        &["--candidate", NEW, "--candidate-deadline", "8s"],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    for needle in [
        "candidate short of capacity, promotion blocked: its pods are Pending (",
        SCHEDULER,
        "free or add capacity for the candidate's replicas",
        "candidate kept",
    ] {
        assert!(
            out.contains(needle),
            "missing {needle:?} in:\n{out}\nstderr:\n{err}"
        );
    }
    assert!(
        !out.contains("must not run") && !out.contains("check 1"),
        "{out}"
    );
    assert!(!err.contains("warning"), "{err}");
    assert_eq!(
        live_manifest(&repo),
        live.trim_end(),
        "the live manifest unchanged"
    );
    assert_candidate_kept(&repo, NEW);
    // Kept at zero replicas, so it takes no GPU that frees up; the scheduler's words stay in git.
    let kept = repo.bare_git(&["show", "main:apps/candidates/web-candidate.yaml"]);
    assert!(kept.contains("replicas: 0"), "{kept}");
    let msg = repo.bare_git(&["log", "-1", "--format=%B", "main"]);
    assert!(
        msg.contains("scaled to zero (short of capacity)") && msg.contains(SCHEDULER),
        "{msg}"
    );
    assert!(
        out.contains("the kept candidate is scaled to zero"),
        "{out}"
    );
}

/// `greenlight promote gc` over `repo` (it needs neither Argo CD nor the cluster).
fn gc(repo: &Repo, config: &str) -> Output {
    Command::new(BIN)
        .args([
            "promote",
            "gc",
            "--config",
            config,
            "--repo",
            &repo.repo(),
            "--git-author",
            "greenlight-bot <bot@greenlight.test>",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run greenlight")
}

#[test]
fn gc_removes_expired_kept_candidates_in_one_commit_and_leaves_the_rest() {
    let (repo, sb) = world();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 1"])]);
    let o = run(&repo, &sb, &cfg, NEW, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("candidate kept"), "{out}");

    // The kept candidate, retained a day by default, is not expired yet: nothing to do.
    let tip = repo.remote_tip();
    let o = gc(&repo, &cfg);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("apps/candidates/web-candidate.yaml: kept until")
            && out.contains("not expired, kept")
            && out.contains("nothing expired"),
        "{out}"
    );
    assert_eq!(repo.remote_tip(), tip, "nothing committed");

    // Its retention moved into the past (no waiting), beside one not expired, one whose run is
    // under way, and a file greenlight did not keep.
    repo.pull();
    let kept = repo.bare_git(&["show", "main:apps/candidates/web-candidate.yaml"]);
    let until = kept
        .lines()
        .find_map(|l| l.trim().strip_prefix("greenlight.dev/kept-until:"))
        .expect("kept-until")
        .trim()
        .to_string();
    let manifest = |name: &str, until: Option<&str>| {
        let annotations = until.map_or(String::new(), |u| {
            format!("  annotations:\n    greenlight.dev/kept-until: \"{u}\"\n")
        });
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}-candidate\n  namespace: apps\n{annotations}"
        )
    };
    repo.write(
        "apps/candidates/web-candidate.yaml",
        &kept.replace(&until, "2000-01-01T00:00:00Z"),
    )
    .write(
        "apps/candidates/api-candidate.yaml",
        &manifest("api", Some("2999-01-01T00:00:00Z")),
    )
    .write(
        "apps/candidates/job-candidate.yaml",
        &manifest("job", Some("2000-01-01T00:00:00Z")),
    )
    .write(
        "apps/candidates/job-candidate.lock",
        "holder: release-bot\nstarted: 2026-01-01T00:00:00Z\nexpires: 2999-01-01T00:00:00Z\n",
    )
    .write(
        "apps/candidates/hand-candidate.yaml",
        &manifest("hand", None),
    )
    .commit_push("candidates of every kind");
    let before = repo.remote_tip();

    let o = gc(&repo, &cfg);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("removed 1 expired candidate(s)")
            && out.contains("job-candidate.yaml: a promotion run holds its lock")
            && out.contains("hand-candidate.yaml: no greenlight.dev/kept-until annotation"),
        "{out}"
    );
    assert_eq!(
        repo.bare_git(&["rev-parse", "main~1"]),
        before,
        "exactly one commit"
    );
    let msg = repo.bare_git(&["log", "-1", "--format=%B", "main"]);
    assert!(
        msg.starts_with("promote gc: remove 1 expired candidate(s)")
            && msg.contains(
                "- web: apps/candidates/web-candidate.yaml, kept until 2000-01-01T00:00:00Z"
            ),
        "{msg}"
    );
    assert_eq!(
        files_under(&repo, "apps/candidates"),
        [
            "apps/candidates/README.md",
            "apps/candidates/api-candidate.yaml",
            "apps/candidates/hand-candidate.yaml",
            "apps/candidates/job-candidate.lock",
            "apps/candidates/job-candidate.yaml",
        ]
    );

    let after = repo.remote_tip();
    let o = gc(&repo, &cfg);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("nothing expired"), "{out}");
    assert_eq!(repo.remote_tip(), after, "a second gc commits nothing");
    assert_eq!(live_manifest(&repo), deployment("web", LIVE).trim_end());
}

#[test]
fn applications_that_cannot_carry_a_promotion_are_refused_before_anything_is_written() {
    // The candidates' Application neither prunes nor allows an empty sync, and the live one is
    // rendered through kustomize (its spec names it): all three are said at once, exit 2, and
    // the remote is untouched.
    let repo = Repo::new();
    repo.write("apps/web/deploy.yaml", &deployment("web", LIVE))
        .write("apps/candidates/README.md", "promotion candidates\n")
        .commit_push("web: pinned");
    let sb = sandbox(&repo, &["web=apps/web", "cands=apps/candidates"], &[]);
    settled(&sb, &repo, &["web", "cands"]);
    let patched = sb.patch_app(
        "web",
        r#"{"spec":{"source":{"directory":null,"kustomize":{"namePrefix":"prod-"}}}}"#,
        "merge",
    );
    assert_eq!(patched.status, 200, "{}", patched.body);
    let before = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 0"])]);
    for action in ["run", "self-test"] {
        let o = if action == "run" {
            run(&repo, &sb, &cfg, NEW, &[])
        } else {
            promote(&repo, &sb, action, &cfg, &[])
        };
        let (out, err) = text(&o);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{action}\nstdout:\n{out}\nstderr:\n{err}"
        );
        for needle in [
            "error: live.app `web` renders spec.source (path `apps/web`) with Kustomize (its spec has a `kustomize` block)",
            "error: candidate.app `cands` does not prune automatically",
            "error: candidate.app `cands` does not allow an empty sync",
            r#"kubectl -n argocd patch application cands --type merge -p '{"spec":{"syncPolicy":{"automated":{"prune":true,"allowEmpty":true}}}}'"#,
            "3 problem(s) with the Applications in Argo CD; nothing was run",
        ] {
            assert!(
                err.contains(needle),
                "{action}: {needle:?} missing from:\n{err}"
            );
        }
        assert_eq!(repo.remote_tip(), before, "{action} wrote nothing");
    }
    // A bypass reads the live Application only: its commit would promote nothing either.
    let o = run(
        &repo,
        &sb,
        &cfg,
        NEW,
        &["--bypass-gate", "--reason", "hotfix"],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("1 problem(s) with the Applications"), "{err}");
    assert_eq!(repo.remote_tip(), before);
}

#[test]
fn a_live_application_that_also_deploys_the_candidates_or_not_the_manifest_is_refused() {
    let repo = Repo::new();
    repo.write("apps/web/deploy.yaml", &deployment("web", LIVE))
        .write("apps/candidates/README.md", "promotion candidates\n")
        .commit_push("web: pinned");
    // `apps` recursively: the live app would deploy the candidates too.
    let sb = sandbox(
        &repo,
        &["web=apps", "cands=apps/candidates", "other=apps/other"],
        &["--prune", "cands", "--allow-empty", "cands"],
    );
    let before = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 0"])]);
    let o = run(&repo, &sb, &cfg, NEW, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("error: live.app `web`: spec.source (path `apps`) also deploys candidate.path `apps/candidates`"),
        "{err}"
    );
    // An Application whose path does not hold the live manifest.
    let wrong = cfg_with(&cfg, "  app: web\n", "  app: other\n");
    let o = run(&repo, &sb, &wrong, NEW, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("error: live.app `other` does not deploy live.manifest `apps/web/deploy.yaml`: its source(s) of this repository are spec.source path `apps/other`"),
        "{err}"
    );
    assert_eq!(repo.remote_tip(), before);
}

/// A copy of a config file with one piece of text replaced (next to it, under another name).
fn cfg_with(cfg: &str, from: &str, to: &str) -> String {
    let text = std::fs::read_to_string(cfg).unwrap();
    assert!(text.contains(from), "{from:?} not in the config");
    let other = Path::new(cfg).with_file_name("promote-other.yaml");
    std::fs::write(&other, text.replacen(from, to, 1)).unwrap();
    other.to_string_lossy().into_owned()
}

/// `greenlight promote <action>` as a running process, to be signalled.
fn promote_proc(repo: &Repo, sb: &Sandbox, action: &str, config: &str, extra: &[&str]) -> Proc {
    let mut args: Vec<String> = [
        "promote",
        action,
        "--config",
        config,
        "--repo",
        &repo.repo(),
        "--argocd-url",
        &sb.url,
        "--git-author",
        "greenlight-bot <bot@greenlight.test>",
        "--stable-for",
        "2s",
        "--fetch-interval",
        "200ms",
        "--stale-after",
        "3s",
        "--unknown-app-grace",
        "3s",
    ]
    .map(String::from)
    .into();
    args.extend(extra.iter().map(|s| s.to_string()));
    Proc::spawn(BIN, &args, &[])
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet: it runs nothing).
fn process_gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[track_caller]
fn wait_for(what: &str, within: Duration, mut check: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + within;
    while !check() {
        assert!(
            std::time::Instant::now() < end,
            "not within {within:?}: {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigterm_during_a_check_stops_its_processes_releases_the_lock_and_keeps_the_candidate() {
    let (repo, sb) = world();
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    // A load test that would run for minutes, with a child of its own in its process group.
    let script = format!(
        "echo $$ > {p}.tmp; sleep 300 & echo $! >> {p}.tmp; mv {p}.tmp {p}; wait",
        p = pids.display()
    );
    let cfg = config(
        dir.path(),
        &[
            ("load", &["sh", "-c", &script]),
            ("never", &["sh", "-c", "echo must not run"]),
        ],
    );
    let mut p = promote_proc(
        &repo,
        &sb,
        "run",
        &cfg,
        &["--candidate", NEW, "--candidate-deadline", "30s"],
    );
    wait_for("the load check to start", Duration::from_secs(90), || {
        pids.exists()
    });
    let started: Vec<String> = std::fs::read_to_string(&pids)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(started.len(), 2, "{started:?}");
    assert!(
        repo.bare_git(&["ls-tree", "-r", "--name-only", "main"])
            .contains("web-candidate.lock")
    );
    p.sigterm();
    let status = p.wait_exit(Duration::from_secs(60));
    let out = p.output();
    assert_eq!(status.code(), Some(143), "{out}");
    for pid in &started {
        wait_for(
            &format!("check process {pid} to end"),
            Duration::from_secs(10),
            || process_gone(pid),
        );
    }
    assert!(
        out.contains("cancelled by SIGTERM during check 1 load")
            && out.contains("CANCELLED by SIGTERM, nothing promoted")
            && out.contains("the run's lock is released")
            && out.contains("left: apps/candidates/web-candidate.yaml on main, kept until "),
        "{out}"
    );
    assert!(!out.contains("must not run"), "{out}");
    assert_eq!(live_manifest(&repo), deployment("web", LIVE).trim_end());
    assert_eq!(
        files_under(&repo, "apps/candidates"),
        [
            "apps/candidates/README.md",
            "apps/candidates/web-candidate.yaml"
        ],
        "the candidate kept, the lock released"
    );
    let kept = repo.bare_git(&["show", "main:apps/candidates/web-candidate.yaml"]);
    assert!(kept.contains("greenlight.dev/kept-until"), "{kept}");
    let msg = repo.bare_git(&["log", "-1", "--format=%B", "main"]);
    assert!(
        msg.contains("its run was cancelled by SIGTERM")
            && msg.contains(
                "Greenlight-Gate: cancelled by SIGTERM during check 1 load, candidate kept"
            )
            && msg.contains(&format!("Greenlight-Candidate: {NEW}")),
        "{msg}"
    );
}

#[test]
fn sigint_while_the_candidate_is_judged_removes_it_and_the_lock() {
    let (repo, sb) = world();
    let before = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "echo must not run"])]);
    // The self-test's candidate never becomes healthy: its judgement lasts the whole deadline.
    let mut p = promote_proc(
        &repo,
        &sb,
        "self-test",
        &cfg,
        &["--candidate-deadline", "10m"],
    );
    p.wait_line("candidate committed", Duration::from_secs(60));
    p.signal("INT");
    let status = p.wait_exit(Duration::from_secs(60));
    let out = p.output();
    assert_eq!(status.code(), Some(130), "{out}");
    assert!(
        out.contains("cancelled by SIGINT while the candidate was judged")
            && out.contains(
                "the candidate had no verdict yet and is removed from git with the run's lock"
            )
            && out.contains("left: nothing; apps/candidates/web-candidate.yaml and the lock apps/candidates/web-candidate.lock removed from main"),
        "{out}"
    );
    assert_eq!(
        files_under(&repo, "apps/candidates"),
        ["apps/candidates/README.md"]
    );
    let log = repo.bare_git(&["log", "--format=%s", &format!("{before}..main")]);
    assert_eq!(log.lines().count(), 2, "{log}");
    assert!(
        log.lines()
            .next()
            .unwrap()
            .contains("its run was cancelled by SIGINT before a verdict"),
        "{log}"
    );
    assert_eq!(live_manifest(&repo), deployment("web", LIVE).trim_end());
}

#[test]
fn a_run_killed_outright_holds_its_lock_until_expiry_then_gc_gives_its_candidate_an_expiry() {
    let (repo, sb) = world();
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let script = format!(
        "echo $$ > {p}.tmp; mv {p}.tmp {p}; exec sleep 300",
        p = pids.display()
    );
    let cfg = config(dir.path(), &[("load", &["sh", "-c", &script])]);
    let mut p = promote_proc(
        &repo,
        &sb,
        "run",
        &cfg,
        &["--candidate", NEW, "--candidate-deadline", "30s"],
    );
    wait_for("the load check to start", Duration::from_secs(90), || {
        pids.exists()
    });
    p.kill9();
    // Nothing survives a SIGKILL to clean up: the check's own process group runs on (ended here).
    let check = std::fs::read_to_string(&pids).unwrap();
    let _ = Command::new("kill").args(["-KILL", check.trim()]).status();
    assert_eq!(
        files_under(&repo, "apps/candidates"),
        [
            "apps/candidates/README.md",
            "apps/candidates/web-candidate.lock",
            "apps/candidates/web-candidate.yaml"
        ]
    );
    let tip = repo.remote_tip();
    let o = gc(&repo, &cfg);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("web-candidate.yaml: a promotion run holds its lock"),
        "{out}"
    );
    assert_eq!(
        repo.remote_tip(),
        tip,
        "a lock not expired: a run may be under way"
    );

    // The lock's lifetime passes (its expiry moved into the past, no waiting).
    repo.pull();
    let lock = repo.bare_git(&["show", "main:apps/candidates/web-candidate.lock"]);
    let expires = lock
        .lines()
        .find_map(|l| l.strip_prefix("expires:"))
        .expect("expires")
        .trim()
        .to_string();
    repo.write(
        "apps/candidates/web-candidate.lock",
        &lock.replace(&expires, "2000-01-01T00:00:00Z"),
    )
    .commit_push("an hour later");
    let o = gc(&repo, &cfg);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("web-candidate.yaml: orphaned, without greenlight.dev/kept-until (its run's lock expired at 2000-01-01T00:00:00Z")
            && out.contains("gave 1 orphaned candidate(s) a kept-until"),
        "{out}"
    );
    let msg = repo.bare_git(&["log", "-1", "--format=%B", "main"]);
    assert!(
        msg.starts_with("promote gc: keep 1 orphaned candidate(s) until"),
        "{msg}"
    );
    assert_eq!(
        files_under(&repo, "apps/candidates"),
        [
            "apps/candidates/README.md",
            "apps/candidates/web-candidate.yaml"
        ],
        "the dead run's lock removed"
    );
    let kept = repo.bare_git(&["show", "main:apps/candidates/web-candidate.yaml"]);
    assert!(
        kept.contains("greenlight.dev/kept-until") && kept.contains(NEW),
        "{kept}"
    );
    let o = gc(&repo, &cfg);
    let (out, _) = text(&o);
    assert!(
        out.contains("not expired, kept") && out.contains("nothing expired"),
        "{out}"
    );
    assert_eq!(live_manifest(&repo), deployment("web", LIVE).trim_end());
}

#[test]
fn a_watchdog_daemon_never_watches_the_gates_candidates() {
    let (repo, sb) = world();
    let wd = watchdog(&repo, &sb.url, &[], &[]);
    let before = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "echo must not run"])]);
    // The self-test's deliberately broken candidate: committed, judged NOT ready, removed.
    let o = promote(
        &repo,
        &sb,
        "self-test",
        &cfg,
        &["--candidate-deadline", "6s"],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    let made = repo.bare_git(&["rev-list", "--reverse", &format!("{before}..main")]);
    let candidate = made
        .lines()
        .next()
        .expect("the candidate commit")
        .to_string();
    let msg = repo.bare_git(&["log", "-1", "--format=%B", &candidate]);
    assert!(
        msg.contains("Nav-Watchdog: app=cands")
            && msg.contains("Greenlight-Judged-By: promote run"),
        "{msg}"
    );
    // A commit the daemon does watch, after them: once it is watched, the daemon has read the
    // candidate's commits too.
    repo.pull();
    repo.write("apps/web/config.yaml", &config_map("after the self-test"));
    let marker = repo.commit_push(&format!(
        "web: a config change\n\n{}",
        trailer("web", "60", "shadow")
    ));
    wd.wait_state(&marker, "CONFIRMED", Duration::from_secs(90));
    let status = status_json(&repo.path("state/greenlight.db"));
    let watched: Vec<&str> = status["watches"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w["commit"].as_str())
        .collect();
    assert!(
        !watched.iter().any(|c| c.starts_with(&candidate[..12])),
        "the daemon watched the candidate {candidate}: {status:#}"
    );
    assert!(
        watched
            .iter()
            .any(|c| marker.starts_with(c) || c.starts_with(&marker[..12])),
        "{status:#}"
    );
}

#[test]
fn a_watch_deadline_shorter_than_the_candidates_start_is_raised_or_refused() {
    let (repo, sb) = world();
    let dir = tempfile::tempdir().unwrap();
    // The sandbox's workloads take a second to roll out: a 1 s watch deadline is always shorter
    // than the candidate's measured start plus half of it.
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 0"])]);
    let short = |policy: &str| {
        let text = std::fs::read_to_string(&cfg).unwrap().replace(
            "watch: {mode: shadow, deadline: 60s}",
            &format!("watch: {{mode: shadow, deadline: 1s, shortDeadline: {policy}}}"),
        );
        let file = dir.path().join(format!("promote-{policy}.yaml"));
        std::fs::write(&file, text).unwrap();
        file.to_string_lossy().into_owned()
    };
    let refusing = short("refuse");
    let o = run(&repo, &sb, &refusing, NEW, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("watch deadline too short, promotion blocked: every check passed, but the candidate took"),
        "{out}"
    );
    assert_eq!(live_manifest(&repo), deployment("web", LIVE).trim_end());
    let kept = repo.bare_git(&["show", "main:apps/candidates/web-candidate.yaml"]);
    assert!(kept.contains("greenlight.dev/kept-until"), "{kept}");

    let raising = short("raise");
    let o = run(&repo, &sb, &raising, NEW, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("watch deadline raised to "), "{out}");
    assert_eq!(live_manifest(&repo), deployment("web", NEW).trim_end());
    let msg = repo.bare_git(&["log", "-1", "--format=%B", "main"]);
    let deadline = msg
        .lines()
        .find_map(|l| l.strip_prefix("Nav-Watchdog: app=web deadline="))
        .and_then(|rest| rest.split_once("s mode=shadow"))
        .map(|(secs, _)| secs.parse::<u64>().unwrap())
        .unwrap_or_else(|| panic!("{msg}"));
    assert!(deadline >= 2, "{msg}");
    assert!(
        msg.contains("Greenlight-Watch-Deadline: raised from 1s to "),
        "{msg}"
    );
}

#[test]
fn a_no_op_is_a_no_op_even_when_argo_cd_is_unreachable() {
    let (repo, _sb) = world();
    let before = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 0"])]);
    // Nothing listens there (a port bound and closed again).
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", gone.local_addr().unwrap());
    drop(gone);
    let o = promote_cmd(
        &repo,
        &url,
        "run",
        &cfg,
        &["--candidate", LIVE, "--candidate-deadline", "30s"],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        out.starts_with("no-op: the candidate is already live"),
        "{out}"
    );
    assert_eq!(repo.remote_tip(), before, "no commit");
}

#[test]
fn a_mutable_live_tag_without_resolve_is_warned_before_the_verification() {
    let (repo, sb) = world();
    repo.pull();
    repo.write(
        "apps/web/deploy.yaml",
        &deployment("web", "registry.local/web:latest"),
    )
    .commit_push("web: latest");
    settled(&sb, &repo, &["web"]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        &[("smoke", &["sh", "-c", "echo broken; exit 1"])],
    );
    let o = run(&repo, &sb, &cfg, NEW, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("warning: live.manifest apps/web/deploy.yaml: its image `registry.local/web:latest` names the mutable tag `latest` and --resolve was not given"),
        "{err}"
    );
}

#[test]
fn two_runs_sharing_a_data_dir_are_refused_with_the_locks_words() {
    let (repo, sb) = world();
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    let script = format!("touch {}; exec sleep 300", started.display());
    let cfg = config(dir.path(), &[("load", &["sh", "-c", &script])]);
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let mut first = promote_proc(
        &repo,
        &sb,
        "run",
        &cfg,
        &[
            "--candidate",
            NEW,
            "--candidate-deadline",
            "30s",
            "--data-dir",
            data,
        ],
    );
    wait_for("the first run's check", Duration::from_secs(90), || {
        started.exists()
    });
    let o = run(&repo, &sb, &cfg, NEW, &["--data-dir", data]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains(&format!(
            "--data-dir {data} is in use by another greenlight promote run"
        )) && !err.contains("index.lock")
            && !err.contains("fatal:"),
        "{err}"
    );
    // gc works in the same clone: refused too.
    let o = Command::new(BIN)
        .args([
            "promote",
            "gc",
            "--config",
            &cfg,
            "--repo",
            &repo.repo(),
            "--data-dir",
            data,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run greenlight");
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is in use by another greenlight promote run or gc"),
        "{err}"
    );
    first.sigterm();
    assert_eq!(first.wait_exit(Duration::from_secs(60)).code(), Some(143));
}

#[test]
fn output_json_is_one_object_a_pipeline_can_act_on() {
    let (repo, sb) = world();
    let dir = tempfile::tempdir().unwrap();
    let parse = |o: &Output| -> serde_json::Value {
        let (out, err) = text(o);
        assert_eq!(
            out.lines().count(),
            1,
            "one line of JSON:\n{out}\nstderr:\n{err}"
        );
        let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(
            v["exit_code"].as_i64(),
            o.status.code().map(i64::from),
            "the exit code it says is the one it returns: {v:#}"
        );
        v
    };
    // Blocked by its second check.
    let cfg = config(
        dir.path(),
        &[
            ("smoke", &["sh", "-c", "echo fine"]),
            ("load", &["sh", "-c", "echo too slow; exit 3"]),
        ],
    );
    let o = run(&repo, &sb, &cfg, NEW, &["--output", "json"]);
    let v = parse(&o);
    assert_eq!(v["outcome"], "blocked", "{v:#}");
    assert_eq!(v["candidate"], NEW);
    assert_eq!(v["candidate_verdict"], "CONFIRMED");
    assert!(
        v["candidate_commit"]
            .as_str()
            .is_some_and(|c| c.len() == 40),
        "{v:#}"
    );
    assert_eq!(v["checks"][0]["result"], "passed");
    assert_eq!(v["checks"][1]["result"], "failed");
    assert!(
        v["checks"][1]["evidence"]
            .as_str()
            .unwrap()
            .contains("exited 3"),
        "{v:#}"
    );
    assert!(v["checks"][1]["duration_ms"].as_u64().is_some(), "{v:#}");
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .starts_with("check 2 load (command) failed"),
        "{v:#}"
    );
    assert_eq!(
        v["settle_commit"].as_str(),
        Some(repo.remote_tip().as_str())
    );
    assert!(v["promotion_commit"].is_null());
    // Promoted.
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "echo fine"])]);
    let o = run(&repo, &sb, &cfg, NEW, &["--output", "json"]);
    let v = parse(&o);
    assert_eq!(v["outcome"], "promoted", "{v:#}");
    assert_eq!(
        v["promotion_commit"].as_str(),
        Some(repo.remote_tip().as_str())
    );
    assert!(
        v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m.as_str().unwrap().starts_with("promoted ")),
        "{v:#}"
    );
    // A no-op, and an error (another run's lock) are objects too.
    let o = run(&repo, &sb, &cfg, NEW, &["--output", "json"]);
    assert_eq!(parse(&o)["outcome"], "no-op");
    repo.pull();
    repo.write(
        "apps/candidates/web-candidate.lock",
        "holder: release-bot\nstarted: 2026-01-01T00:00:00Z\nexpires: 2999-01-01T00:00:00Z\n",
    )
    .commit_push("another run's lock");
    const OTHER: &str = "registry.local/web@sha256:3333333333333333333333333333333333333333333333333333333333333333";
    let o = run(&repo, &sb, &cfg, OTHER, &["--output", "json"]);
    let v = parse(&o);
    assert_eq!(v["outcome"], "error", "{v:#}");
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("another promotion run holds the lock"),
        "{v:#}"
    );
}

/// The watchdog's revert of `promotion`, as it pushes one: the live manifest only (the
/// candidates' directory kept, `Greenlight-Revert-Keeps`), git's message, its own trailer.
fn watchdog_revert(repo: &Repo, promotion: &str) -> String {
    repo.pull();
    repo.git(&[
        "checkout",
        &format!("{promotion}^"),
        "--",
        "apps/web/deploy.yaml",
    ]);
    let subject = repo.git(&["log", "-1", "--format=%s", promotion]);
    repo.git(&["add", "-A"]);
    repo.commit_push(&format!(
        "Revert \"{}\"\n\nThis reverts commit {promotion}.\n\nweb was Degraded after the rollout.\n\nGreenlight-Revert-Of: {promotion}",
        subject.trim()
    ))
}

#[test]
fn a_digest_the_watchdog_reverted_is_refused_unless_allowed_with_a_reason() {
    let (repo, sb) = world();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 0"])]);
    let o = run(&repo, &sb, &cfg, NEW, &[]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let promotion = repo.remote_tip();
    let revert = watchdog_revert(&repo, &promotion);
    settled(&sb, &repo, &["web", "cands"]);
    let o = run(&repo, &sb, &cfg, NEW, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("the watchdog reverted this digest")
            && err.contains(&format!("promoted in {}", &promotion[..12]))
            && err.contains(&format!("reverted in {}", &revert[..12]))
            && err.contains("--allow-reverted <reason>"),
        "{err}"
    );
    assert_eq!(repo.remote_tip(), revert, "nothing committed");
    let o = run(
        &repo,
        &sb,
        &cfg,
        NEW,
        &["--allow-reverted", "the config it needed is fixed in 4f2a"],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("proposed again with --allow-reverted"),
        "{err}"
    );
    let msg = repo.bare_git(&["log", "-1", "--format=%B", "main"]);
    assert!(
        msg.contains(&format!(
            "Greenlight-Allow-Reverted: the config it needed is fixed in 4f2a (reverted in {})",
            &revert[..12]
        )),
        "{msg}"
    );
}

#[test]
fn a_human_revert_of_a_promotion_brings_back_no_lock() {
    let (repo, sb) = world();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 0"])]);
    let o = run(&repo, &sb, &cfg, NEW, &[]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let promotion = repo.remote_tip();
    // A plain `git revert` restores everything the promotion removed: the candidate, the lock.
    repo.pull();
    repo.git(&["revert", "--no-edit", &promotion]);
    repo.push();
    assert!(
        files_under(&repo, "apps/candidates")
            .contains(&"apps/candidates/web-candidate.lock".to_string())
    );
    settled(&sb, &repo, &["web", "cands"]);
    const OTHER: &str = "registry.local/web@sha256:3333333333333333333333333333333333333333333333333333333333333333";
    let o = run(&repo, &sb, &cfg, OTHER, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("the promotion lock apps/candidates/web-candidate.lock was brought back by")
            && out.contains("it is no run's, taken over"),
        "{out}"
    );
    assert_eq!(live_manifest(&repo), deployment("web", OTHER).trim_end());
}

#[test]
fn a_self_test_never_overwrites_a_kept_candidate() {
    let (repo, sb) = world();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 1"])]);
    let o = run(&repo, &sb, &cfg, NEW, &[]);
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
    assert_candidate_kept(&repo, NEW);
    let kept = repo.remote_tip();
    let o = promote(
        &repo,
        &sb,
        "self-test",
        &cfg,
        &["--candidate-deadline", "6s"],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("apps/candidates/web-candidate.yaml: a kept candidate of web is there until")
            && err.contains("the self-test would overwrite and remove it, so nothing was run"),
        "{err}"
    );
    assert_eq!(repo.remote_tip(), kept, "nothing committed");
    assert_candidate_kept(&repo, NEW);
}

#[test]
fn a_statefulset_candidate_is_checked_on_its_pods_own_port_and_its_claims_go_with_it() {
    let sts = |image: &str| {
        deployment("web", image)
            .replace("kind: Deployment", "kind: StatefulSet")
            .replace(
                "spec:\n  replicas: 1\n",
                "spec:\n  serviceName: web\n  replicas: 1\n",
            )
            + "          ports:\n            - containerPort: 7000\n  volumeClaimTemplates:\n    - metadata: {name: weights}\n      spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n"
    };
    let repo = Repo::new();
    repo.write("apps/web/deploy.yaml", &sts(LIVE))
        .write("apps/candidates/README.md", "promotion candidates\n")
        .commit_push("web: a StatefulSet");
    let sb = sandbox(
        &repo,
        &["web=apps/web", "cands=apps/candidates"],
        &["--prune", "cands", "--allow-empty", "cands"],
    );
    settled(&sb, &repo, &["web", "cands"]);
    let before = repo.remote_tip();
    let dir = tempfile::tempdir().unwrap();
    // The config says port 8080; the headless Service's DNS names the pods, which listen on 7000.
    let cfg = config(
        dir.path(),
        &[(
            "port",
            &[
                "sh",
                "-c",
                "test {{candidate.port}} = 7000 || { echo port {{candidate.port}}; exit 1; }",
            ],
        )],
    );
    let text_of = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("kind: Deployment", "kind: StatefulSet");
    std::fs::write(&cfg, text_of).unwrap();
    let o = run(&repo, &sb, &cfg, NEW, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    let made = repo.bare_git(&["rev-list", "--reverse", &format!("{before}..main")]);
    let candidate = made.lines().next().unwrap();
    let file = repo.bare_git(&[
        "show",
        &format!("{candidate}:apps/candidates/web-candidate.yaml"),
    ]);
    assert!(
        file.contains("clusterIP: None")
            && file.contains("port: 7000")
            && file.contains("whenDeleted: Delete")
            && file.contains("whenScaled: Retain"),
        "{file}"
    );
    assert_eq!(live_manifest(&repo), sts(NEW).trim_end());
}

#[test]
fn another_workloads_kept_degraded_candidate_never_blocks_this_one() {
    let (repo, sb) = world();
    // `api`'s candidate, blocked yesterday and kept: Degraded, in the same candidates' app.
    repo.pull();
    repo.write(
        "apps/candidates/api-candidate.yaml",
        &deployment("api-candidate", "registry.local/api@sha256:4444444444444444444444444444444444444444444444444444444444444444")
            .replace(
                "  namespace: apps\n",
                &format!(
                    "  namespace: apps\n  labels: {{greenlight.dev/role: candidate}}\n  annotations:\n    greenlight.dev/kept-until: \"2999-01-01T00:00:00Z\"\n    {}: Degraded\n",
                    greenlight_sandbox::HEALTH_ANNOTATION
                ),
            ),
    )
    .commit_push("keep the blocked candidate of api");
    let tip = repo.remote_tip();
    sb.wait_app("cands", Duration::from_secs(60), |a| {
        a["status"]["sync"]["revision"] == tip.as_str()
            && a["status"]["health"]["status"] == "Degraded"
    });
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[("smoke", &["sh", "-c", "exit 0"])]);
    let o = run(&repo, &sb, &cfg, NEW, &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("candidate ready"), "{out}");
    assert_eq!(live_manifest(&repo), deployment("web", NEW).trim_end());
    // `api`'s kept candidate is as it was.
    let kept = repo.bare_git(&["show", "main:apps/candidates/api-candidate.yaml"]);
    assert!(kept.contains("2999-01-01T00:00:00Z"), "{kept}");
}

#[test]
fn two_workloads_promoted_at_once_through_one_candidates_application_both_pass() {
    let repo = Repo::new();
    repo.write("apps/web/deploy.yaml", &deployment("web", LIVE))
        .write("apps/api/deploy.yaml", &deployment("api", LIVE))
        .write("apps/candidates/README.md", "promotion candidates\n")
        .commit_push("web and api: pinned");
    let sb = sandbox(
        &repo,
        &["web=apps/web", "api=apps/api", "cands=apps/candidates"],
        &["--prune", "cands", "--allow-empty", "cands"],
    );
    settled(&sb, &repo, &["web", "api", "cands"]);
    let dir = tempfile::tempdir().unwrap();
    // Each check outlasts the other run's candidate commit: the runs overlap in git and in the
    // candidates' Application.
    let web = config(dir.path(), &[("smoke", &["sh", "-c", "sleep 3"])]);
    let api_text = std::fs::read_to_string(&web)
        .unwrap()
        .replace("app: web\n", "app: api\n")
        .replace("apps/web/deploy.yaml", "apps/api/deploy.yaml")
        .replace("name: web,", "name: api,");
    let api = dir.path().join("api.yaml");
    std::fs::write(&api, api_text).unwrap();
    let api = api.to_string_lossy().into_owned();
    let data = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    let (dw, da) = (data("web-data"), data("api-data"));
    let mut runs = [
        promote_proc(
            &repo,
            &sb,
            "run",
            &web,
            &[
                "--candidate",
                NEW,
                "--candidate-deadline",
                "60s",
                "--data-dir",
                &dw,
            ],
        ),
        promote_proc(
            &repo,
            &sb,
            "run",
            &api,
            &[
                "--candidate",
                NEW,
                "--candidate-deadline",
                "60s",
                "--data-dir",
                &da,
            ],
        ),
    ];
    for p in &mut runs {
        let status = p.wait_exit(Duration::from_secs(180));
        assert_eq!(status.code(), Some(0), "{}", p.output());
        assert!(p.output().contains("promoted "), "{}", p.output());
    }
    assert_eq!(live_manifest(&repo), deployment("web", NEW).trim_end());
    assert_eq!(
        repo.bare_git(&["show", "main:apps/api/deploy.yaml"]),
        deployment("api", NEW).trim_end()
    );
    assert_eq!(
        files_under(&repo, "apps/candidates"),
        ["apps/candidates/README.md"]
    );
}
