//! `greenlight demo` and `greenlight demo promote` as a newcomer runs them: each builds its own
//! world in a temporary directory (git, the sandbox, local servers), checks its own story on the
//! remote, and exits 0 only when that story really happened.

#[macro_use]
mod common;
use common::*;
use std::process::{Command, Output, Stdio};

fn demo(args: &[&str]) -> (Output, String, String) {
    let o = Command::new(BIN)
        .arg("demo")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run greenlight demo");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    (o, out, err)
}

#[test]
fn the_canary_demo_reverts_the_bad_commit_and_says_so() {
    let (o, out, err) = demo(&[]);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("demo: the story really happened"),
        "stdout:\n{out}\nstderr:\n{err}"
    );
    // The audit before arming, and the track record the verdict starts.
    let audit = out
        .lines()
        .find(|l| l.starts_with("demo: audit: argocd/nav-canary"))
        .unwrap_or_else(|| panic!("no audit line in:\n{out}"));
    assert_eq!(
        audit.split_whitespace().collect::<Vec<_>>(),
        ["demo:", "audit:", "argocd/nav-canary", "yes", "yes*"]
    );
    assert!(
        out.contains("demo: record: nav-canary: 0 shadow verdicts, 0 would-have-reverted; 1 reverted by greenlight, none undone by a human; not enough samples to arm (0 decided of 10 needed)\n"),
        "{out}"
    );
    // Why, replayed from the watch's recorded inputs: the timeline and the same verdict.
    let why: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("demo: why: "))
        .collect();
    let said = |needle: &str| why.iter().any(|l| l.contains(needle));
    assert!(
        said("verdict as recorded: REVERTED")
            && said("watch started mode=arm deadline=8s")
            && said("reached: reached app nav-canary")
            && said("failed: not healthy within 8s after reach")
            && said("revert pushed")
            && why
                .last()
                .is_some_and(|l| l.starts_with("  replay: same verdict — REVERTED at ")),
        "{why:#?}"
    );
}

#[test]
fn the_promote_demo_promotes_one_candidate_and_blocks_another_by_digest() {
    let (o, out, err) = demo(&["promote"]);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    let line = |start: &str| {
        out.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line starting {start:?} in:\n{out}\nstderr:\n{err}"))
            .to_string()
    };
    // The gate's own words, then the demo's outcome lines, each naming the candidate by digest.
    let promoted = line("promoted registry.local/nav-api@sha256:");
    let blocked = line("check 2 smoke (http) failed, promotion blocked:");
    assert!(blocked.contains("@sha256:"), "{blocked}");
    let run1 = line("demo: run 1 outcome: promoted registry.local/nav-api@sha256:");
    let run2 = line("demo: run 2 outcome: blocked registry.local/nav-api@sha256:");
    // Two different candidates: the promoted digest is not the blocked one.
    let digest = |l: &str| {
        let at = l.find("sha256:").expect("a digest");
        l[at..at + 7 + 64].to_string()
    };
    assert_eq!(digest(&promoted), digest(&run1));
    assert_eq!(digest(&blocked), digest(&run2));
    assert_ne!(digest(&run1), digest(&run2));
    assert!(out.contains("demo: the story really happened"), "{out}");
}
