//! greenlight's trailer parser (`greenlight_core::trailer::parse`) against git itself: each
//! message, chosen for its traps, is committed as it is and its trailers read back with `git log
//! --format=%(trailers)`, as git reads a commit's trailers. git is the reference: the watch
//! trailer must mean what git says it means.

use std::io::Write;
use std::process::Stdio;

/// Messages where a parser can go wrong. Each is (what it probes, the message).
const MESSAGES: &[(&str, &str)] = &[
    (
        "all trailers in the last paragraph",
        "Bump web\n\nWhy.\n\nNav-Watchdog: app=web deadline=10m\nSigned-off-by: A <a@x>\n",
    ),
    ("subject only", "Nav-Watchdog: app=web\n"),
    ("subject only, no final newline", "Nav-Watchdog: app=web"),
    ("empty message", ""),
    (
        "trailers in a middle paragraph only",
        "Bump\n\nNav-Watchdog: app=web\n\nA plain last paragraph.\n",
    ),
    (
        "continuation lines (space and tab)",
        "Bump\n\nNav-Watchdog: app=web\n  deadline=10m\n\tmode=arm\nAcked-by: B\n",
    ),
    (
        "comment lines inside the block",
        "Bump\n\nNav-Watchdog: app=web\n# a comment\nAcked-by: B\n",
    ),
    (
        "comment lines after the block",
        "Bump\n\nNav-Watchdog: app=web\n\n# Please enter the commit message\n# Lines starting with '#' ...\n",
    ),
    (
        "a --- line is no patch divider in a commit",
        "Bump\n\nNav-Watchdog: app=web\n---\n app/deploy.yaml | 2 +-\n\nNot-This: x\n",
    ),
    (
        "a --- paragraph before the trailers",
        "Bump web\n\nWhy.\n\n---\n\nNav-Watchdog: app=web deadline=900 mode=arm\n",
    ),
    (
        "the scissors line and what follows it",
        "Bump\n\nNav-Watchdog: app=web\n# ------------------------ >8 ------------------------\ndiff --git a/f b/f\n\nNot-This: x\n",
    ),
    (
        "a scissors line with more on it is none",
        "Bump\n\nNav-Watchdog: app=web\n# ------------------------ >8 ------------------------ x\n\nAcked-by: B\n",
    ),
    (
        "--- inside a line is no divider",
        "Bump\n\nbody\n\nNav-Watchdog: app=web\n---not a divider\n",
    ),
    (
        "25% rule met with Signed-off-by",
        "Bump\n\nbody\n\nsome text\nmore text\nthird text\nSigned-off-by: A <a@x>\n",
    ),
    (
        "25% rule missed with Signed-off-by",
        "Bump\n\nbody\n\nt1\nt2\nt3\nt4\nSigned-off-by: A <a@x>\n",
    ),
    (
        "mixed block without a git-generated trailer",
        "Bump\n\nbody\n\nNav-Watchdog: app=web\nAcked-by: B\nnot a trailer\n",
    ),
    (
        "cherry-pick line counts as git-generated",
        "Bump\n\nbody\n\nsome text\nmore\n(cherry picked from commit 0123456789abcdef0123456789abcdef01234567)\nNav-Watchdog: app=web\n",
    ),
    (
        "CRLF line ends",
        "Bump\r\n\r\nbody\r\n\r\nNav-Watchdog: app=web deadline=10m\r\nAcked-by: B\r\n",
    ),
    (
        "spaces before the colon",
        "Bump\n\nNav-Watchdog : app=web\nAcked-by\t: B\n",
    ),
    (
        "whitespace inside the token",
        "Bump\n\nNav Watchdog: app=web\n",
    ),
    ("empty value", "Bump\n\nNav-Watchdog:\nAcked-by: B\n"),
    (
        "the same key several times",
        "Bump\n\nNav-Watchdog: app=web\nNav-Watchdog: app=api deadline=5m\nNav-Watchdog: app=db\n",
    ),
    (
        "trailing blank and whitespace-only lines",
        "Bump\n\nNav-Watchdog: app=web\n\n   \n\n",
    ),
    (
        "paragraphs split by a whitespace-only line",
        "Bump\n\nbody\n  \nNav-Watchdog: app=web\n",
    ),
    (
        "a block starting with a continuation line",
        "Bump\n\nbody\n\n  indented\nNav-Watchdog: app=web\n",
    ),
    (
        "a URL on its own line",
        "Bump\n\nbody\n\nhttps://example.com/issue/1\nNav-Watchdog: app=web\n",
    ),
    (
        "a token with a dot",
        "Bump\n\nLink.Ref: x\nNav-Watchdog: app=web\n",
    ),
    (
        "a value holding colons",
        "Bump\n\nNav-Watchdog: app=argocd/web note=a:b\n",
    ),
    (
        "leading blank lines before the subject",
        "\n\nBump\n\nNav-Watchdog: app=web\n",
    ),
    (
        "value continued after an empty value",
        "Bump\n\nNav-Watchdog:\n app=web\n",
    ),
    (
        "a continuation line after a comment line",
        "Bump\n\nNav-Watchdog: app=web\n# comment\n  deadline=10m\n",
    ),
    (
        "the cherry-pick line counts as a trailer line for the 25% rule",
        "Bump\n\nbody\n\nt1\nt2\nt3\nt4\nt5\n(cherry picked from commit 0123456789abcdef0123456789abcdef01234567)\nNav-Watchdog: app=web\n",
    ),
    (
        "an underscore in the token",
        "Bump\n\nNav_Watchdog: app=web\n",
    ),
    ("no space after the colon", "Bump\n\nNav-Watchdog:app=web\n"),
    (
        "a comment line before the subject's blank line",
        "# Bump\n\nNav-Watchdog: app=web\n",
    ),
    (
        "only blank lines before the trailers",
        "\n\nNav-Watchdog: app=web\n",
    ),
    (
        "blank lines, then a comment line before the subject's blank line",
        "\n \n# Bump\n\nNav-Watchdog: app=web\n",
    ),
    (
        "a comment line in the subject paragraph",
        "# Bump\nNav-Watchdog: app=web\n",
    ),
    (
        "a two-line subject",
        "Line one\nline two\n\nNav-Watchdog: app=web\n",
    ),
    (
        "continuation lines under Signed-off-by in a 25% block",
        "Bump\n\nbody\n\nt1\nt2\nt3\nSigned-off-by: A\n  c1\n  c2\n",
    ),
    (
        "a --- line followed by a space",
        "Bump\n\nNav-Watchdog: app=web\n--- \nX: y\n",
    ),
    (
        "an indented # is a continuation, not a comment",
        "Bump\n\nNav-Watchdog: app=web\n  # not a comment\n",
    ),
];

/// The trailers of a commit whose message is `message`, byte for byte, as `git log` reads them.
fn git_trailers(message: &str) -> Vec<(String, String)> {
    let tmp = tempfile::tempdir().unwrap();
    greenlight_testkit::git(tmp.path(), &["init", "-q"]);
    let mut child = greenlight_testkit::git_cmd(tmp.path())
        .args([
            "commit",
            "-q",
            "--allow-empty",
            "--allow-empty-message",
            "--cleanup=verbatim",
            "-F",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(message.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        greenlight_testkit::git(tmp.path(), &["log", "-1", "--format=%B"]),
        message.trim_end(),
        "the commit holds the message as it is"
    );
    greenlight_testkit::git(
        tmp.path(),
        &["log", "-1", "--format=%(trailers:only,unfold)"],
    )
    .lines()
    .filter(|line| !line.is_empty())
    .map(|line| {
        let (token, value) = line.split_once(':').expect("git prints `token: value`");
        (token.to_owned(), value.trim().to_owned())
    })
    .collect()
}

/// Cases where `greenlight_core::trailer::parse` and git disagree today, reported to the
/// core's owner rather than fixed here. The test fails on any other disagreement, and also
/// when a case listed here starts agreeing (then remove it from this list).
const KNOWN_DISAGREEMENTS: &[&str] = &[];

#[test]
fn greenlight_parses_trailers_as_git_does() {
    let mut unexpected = Vec::new();
    let mut now_agreeing = Vec::new();
    for (what, message) in MESSAGES {
        let git = git_trailers(message);
        let ours = greenlight_core::trailer::parse(message);
        let known = KNOWN_DISAGREEMENTS.contains(what);
        if git != ours && !known {
            unexpected.push(format!(
                "{what}:\n  message: {message:?}\n  git:        {git:?}\n  greenlight: {ours:?}"
            ));
        }
        if git == ours && known {
            now_agreeing.push(*what);
        }
    }
    assert!(
        unexpected.is_empty(),
        "{} of {} messages parse differently from git:\n{}",
        unexpected.len(),
        MESSAGES.len(),
        unexpected.join("\n")
    );
    assert!(
        now_agreeing.is_empty(),
        "these now agree with git; remove them from KNOWN_DISAGREEMENTS: {now_agreeing:?}"
    );
    for known in KNOWN_DISAGREEMENTS {
        assert!(
            MESSAGES.iter().any(|(what, _)| what == known),
            "{known:?} names no message"
        );
    }
}

#[test]
fn the_reference_is_not_trivial() {
    // Guards the comparison itself: git finds trailers where it should and none where it
    // should not, so agreement above is not agreement on empty lists.
    assert_eq!(
        git_trailers(MESSAGES[0].1),
        vec![
            ("Nav-Watchdog".to_owned(), "app=web deadline=10m".to_owned()),
            ("Signed-off-by".to_owned(), "A <a@x>".to_owned())
        ]
    );
    assert!(git_trailers(MESSAGES[1].1).is_empty());
    let with_trailers = MESSAGES
        .iter()
        .filter(|(_, m)| !git_trailers(m).is_empty())
        .count();
    assert!(with_trailers >= MESSAGES.len() / 2, "{with_trailers}");
}
