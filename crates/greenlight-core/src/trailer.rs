//! Trailer parsing with git's rules for a commit's message, as `git log --format=%(trailers)`
//! reads it: the trailer block is the last paragraph of the message; it counts when every line is
//! a trailer, or when it holds a git-generated trailer and at least 25% of its lines are trailers.
//! Continuation lines (starting with whitespace) fold into the previous value; `#` comment lines
//! are ignored, and so is everything from a scissors line down. A `---` line is part of the
//! message: git reads it as a patch divider only in a patch or in a file given to `git
//! interpret-trailers`, never in a commit. The subject paragraph is never a trailer block.
//! [`cleanup`] turns a `COMMIT_EDITMSG` into the message `git commit` stores. This module only
//! splits text; it never decides what a trailer means.

/// Prefixes git itself writes; a block with one of them needs only 25% trailer lines.
const GIT_GENERATED: &[&str] = &["Signed-off-by: ", "(cherry picked from commit "];

/// Parse the trailers of a commit message, in order, as `(token, value)` pairs. Values are
/// trimmed and continuation lines are joined with a single space, as `git interpret-trailers
/// --parse` prints them.
pub fn parse(message: &str) -> Vec<(String, String)> {
    // No `---` divider in a commit's message; the scissors line does end it.
    let message = &message[..scissors(message, "#")];
    let lines: Vec<&str> = message
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let is_comment = |l: &str| l.starts_with('#');

    // Last paragraph: trailing blank and comment lines skipped, then back to the previous blank line.
    let mut last = lines.len();
    while last > 0 && (lines[last - 1].trim().is_empty() || is_comment(lines[last - 1])) {
        last -= 1;
    }
    let mut first = last;
    while first > 0 && !lines[first - 1].trim().is_empty() {
        first -= 1;
    }
    // The subject paragraph (nothing but blank lines before it) is never a trailer block; a
    // comment line is no blank line, so it may be all the subject paragraph holds.
    if first == last || lines[..first].iter().all(|l| l.trim().is_empty()) {
        return Vec::new();
    }
    let block = &lines[first..last];

    let mut trailers: Vec<(String, String)> = Vec::new();
    let mut trailer_lines = 0usize;
    let mut non_trailer_lines = 0usize;
    let mut has_git_generated = false;
    // Whether the previous line was a trailer, so a continuation line extends it.
    let mut in_trailer = false;
    for line in block {
        if is_comment(line) {
            // Ignored, but it ends the trailer above: a continuation below it is not one.
            in_trailer = false;
            continue;
        }
        if line.starts_with(' ') || line.starts_with('\t') {
            if in_trailer {
                if let Some(last) = trailers.last_mut() {
                    let more = line.trim();
                    if !more.is_empty() {
                        if !last.1.is_empty() {
                            last.1.push(' ');
                        }
                        last.1.push_str(more);
                    }
                }
                continue;
            }
            non_trailer_lines += 1;
            continue;
        }
        if GIT_GENERATED.iter().any(|p| line.starts_with(p)) {
            has_git_generated = true;
            // `(cherry picked from commit …)` counts as a trailer line without being a `Token: value`.
            if split_trailer(line).is_none() {
                trailer_lines += 1;
                in_trailer = false;
                continue;
            }
        }
        match split_trailer(line) {
            Some((token, value)) => {
                trailers.push((token.to_string(), value.to_string()));
                trailer_lines += 1;
                in_trailer = true;
            }
            None => {
                non_trailer_lines += 1;
                in_trailer = false;
            }
        }
    }
    let total = trailer_lines + non_trailer_lines;
    let accepted = !trailers.is_empty()
        && (non_trailer_lines == 0 || (has_git_generated && trailer_lines * 4 >= total));
    if accepted { trailers } else { Vec::new() }
}

/// The scissors line's text after the comment prefix and a space: `git commit -v` writes it above
/// the diff it shows in the editor.
const CUT_LINE: &str = "------------------------ >8 ------------------------\n";

/// Where a scissors line starts (the whole line, newline included, with `comment` and a space
/// before [`CUT_LINE`]), as git finds it; the text's length when there is none.
fn scissors(text: &str, comment: &str) -> usize {
    let pattern = format!("\n{comment} {CUT_LINE}");
    if text.starts_with(&pattern[1..]) {
        0
    } else {
        text.find(&pattern).map_or(text.len(), |at| at + 1)
    }
}

/// The message `git commit` stores from an edited message file, under its default cleanup for
/// an edited message (`--cleanup=strip`, with `-v` or without): everything from the scissors line
/// down is dropped (the diff `git commit -v` shows), then every line starting with `comment`
/// (git's `core.commentChar`, `#` by default), trailing whitespace on each line, leading and
/// trailing blank lines; runs of blank lines become one. A non-empty result ends with a newline.
/// A `commit-msg` hook reads the file before this is done.
pub fn cleanup(raw: &str, comment: &str) -> String {
    let raw = &raw[..scissors(raw, comment)];
    let mut message = String::new();
    let mut blank_before = false;
    for line in raw.split_inclusive('\n') {
        if !comment.is_empty() && line.starts_with(comment) {
            continue;
        }
        let line = line.trim_end_matches([' ', '\t', '\n', '\r']);
        if line.is_empty() {
            blank_before = true;
            continue;
        }
        if blank_before && !message.is_empty() {
            message.push('\n');
        }
        blank_before = false;
        message.push_str(line);
        message.push('\n');
    }
    message
}

/// `Token: value` with no whitespace before or inside the token; spaces or tabs may sit between
/// the token and the colon.
fn split_trailer(line: &str) -> Option<(&str, &str)> {
    let colon = line.find(':')?;
    let head = &line[..colon];
    let token = head.trim_end_matches([' ', '\t']);
    if token.is_empty() || token.contains(|c: char| c.is_whitespace()) {
        return None;
    }
    if !token.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return None;
    }
    Some((token, line[colon + 1..].trim()))
}

/// The trailer that closes every revert greenlight pushes, naming the commit it reverts
/// (`docs/verdicts.md#revert-commits`). Its last paragraph is greenlight's own, so no text a
/// revert quotes (a hook's message is the application's own words) can read as a watch
/// trailer there, and a commit that carries it is never watched.
pub const REVERT_OF: &str = "Greenlight-Revert-Of";

/// The trailer of a commit whose watch another greenlight process judges and acts on: today
/// a promotion gate's candidate (`Greenlight-Judged-By: promote run`), which the gate's run
/// judges, keeps or removes. A watchdog daemon starts no watch for it
/// (`JudgeConfig::gate_candidates` is the gate's own judge).
pub const JUDGED_BY: &str = "Greenlight-Judged-By";
/// [`JUDGED_BY`]'s value on a promotion gate's candidate commit.
pub const JUDGED_BY_GATE: &str = "promote run";

/// Whether `message` says another greenlight process judges its watch ([`JUDGED_BY`]).
pub fn is_judged_elsewhere(message: &str) -> bool {
    parse(message)
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case(JUDGED_BY))
}

/// Whether `message` is a revert greenlight made: its trailers carry [`REVERT_OF`].
pub fn is_greenlight_revert(message: &str) -> bool {
    parse(message)
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case(REVERT_OF))
}

#[cfg(test)]
mod tests {
    use super::{cleanup, parse};

    const SCISSORS: &str = "# ------------------------ >8 ------------------------";

    fn t(msg: &str) -> Vec<(String, String)> {
        parse(msg)
    }

    #[test]
    fn last_paragraph_all_trailers() {
        let m =
            "subject\n\nbody text\n\nNav-Watchdog: app=x deadline=900\nSigned-off-by: A <a@b>\n";
        assert_eq!(
            t(m),
            vec![
                ("Nav-Watchdog".into(), "app=x deadline=900".into()),
                ("Signed-off-by".into(), "A <a@b>".into())
            ]
        );
    }

    #[test]
    fn subject_only_is_never_a_block() {
        assert!(t("Nav-Watchdog: app=x\n").is_empty());
        assert!(t("Nav-Watchdog: app=x").is_empty());
    }

    #[test]
    fn a_comment_line_can_be_all_of_the_subject_paragraph() {
        // git log skips the blank lines before the subject, then ends the subject paragraph at
        // the next blank line; comment lines are no blank lines.
        let x = vec![("Nav-Watchdog".to_string(), "app=x".to_string())];
        assert_eq!(t("# title\n\nNav-Watchdog: app=x\n"), x);
        assert_eq!(t("\n \n# title\n\nNav-Watchdog: app=x\n"), x);
        assert!(t("\n\nNav-Watchdog: app=x\n").is_empty());
        assert!(t("# title\nNav-Watchdog: app=x\n").is_empty());
    }

    #[test]
    fn trailer_in_middle_paragraph_is_ignored() {
        let m = "subject\n\nNav-Watchdog: app=x\n\nplain last paragraph\n";
        assert!(t(m).is_empty());
    }

    #[test]
    fn continuation_lines_fold() {
        let m = "s\n\nNav-Watchdog: app=x\n  deadline=60\n\tmode=arm\n";
        assert_eq!(
            t(m),
            vec![("Nav-Watchdog".into(), "app=x deadline=60 mode=arm".into())]
        );
    }

    #[test]
    fn comment_lines_are_ignored() {
        let m = "s\n\nNav-Watchdog: app=x\n# Please enter the commit message\n";
        assert_eq!(t(m), vec![("Nav-Watchdog".into(), "app=x".into())]);
    }

    #[test]
    fn mixed_block_needs_git_generated_and_a_quarter() {
        let m = "s\n\nsome prose line\nNav-Watchdog: app=x\n";
        assert!(t(m).is_empty());
        let m = "s\n\nsome prose line\nSigned-off-by: A <a@b>\nNav-Watchdog: app=x\n";
        assert_eq!(t(m).len(), 2);
        let m = "s\n\np1\np2\np3\np4\nSigned-off-by: A <a@b>\n";
        assert!(t(m).is_empty(), "1 of 5 lines is below 25%");
    }

    #[test]
    fn a_dash_line_is_no_divider_in_a_commit_message() {
        // `git log --format=%(trailers)` finds the trailer below a `---` paragraph...
        let m = "Bump web\n\nWhy.\n\n---\n\nNav-Watchdog: app=web deadline=900 mode=arm\n";
        assert_eq!(
            t(m),
            vec![(
                "Nav-Watchdog".into(),
                "app=web deadline=900 mode=arm".into()
            )]
        );
        // ...and none above a `---` line: the lines below it are in the last paragraph.
        assert!(t("s\n\nNav-Watchdog: app=x\n---\n diff --git a b\n").is_empty());
        assert!(t("s\n\nNav-Watchdog: app=x\n--- \nX: y\n").is_empty());
    }

    #[test]
    fn the_scissors_line_ends_the_message() {
        let m = format!("s\n\nNav-Watchdog: app=x\n{SCISSORS}\ndiff --git a/f b/f\n+y\n");
        assert_eq!(t(&m), vec![("Nav-Watchdog".into(), "app=x".into())]);
        // Only the whole line, ended by a newline, is the scissors line.
        let m = format!("s\n\nNav-Watchdog: app=x\n{SCISSORS} \nmore\n");
        assert!(t(&m).is_empty());
    }

    /// A `COMMIT_EDITMSG` as `git commit -v` hands it to the editor and the `commit-msg` hook.
    const VERBOSE_EDITMSG: &str = "Bump web\n\nWhy.\n\n---\n\nNav-Watchdog: app=web mode=arm\n\n\
        # Please enter the commit message for your changes. Lines starting\n\
        # with '#' will be ignored, and an empty message aborts the commit.\n\
        #\n\
        # On branch main\n\
        # Changes to be committed:\n\
        #\tmodified:   apps/web/deploy.yaml\n\
        #\n\
        # ------------------------ >8 ------------------------\n\
        # Do not modify or remove the line above.\n\
        # Everything below it will be ignored.\n\
        diff --git a/apps/web/deploy.yaml b/apps/web/deploy.yaml\n\
        index 003b3d9..8a29d87 100644\n\
        --- a/apps/web/deploy.yaml\n\
        +++ b/apps/web/deploy.yaml\n\
        @@ -1 +1,2 @@\n\
        -image: a\n\
        +image: b\n\
        +Nav-Watchdog: app=web mode=bogus\n\
        \n\
        Acked-by: nobody\n";

    #[test]
    fn cleanup_keeps_what_git_commit_stores() {
        assert_eq!(
            cleanup(VERBOSE_EDITMSG, "#"),
            "Bump web\n\nWhy.\n\n---\n\nNav-Watchdog: app=web mode=arm\n"
        );
        assert_eq!(
            t(&cleanup(VERBOSE_EDITMSG, "#")),
            vec![("Nav-Watchdog".into(), "app=web mode=arm".into())]
        );
    }

    #[test]
    fn cleanup_strips_comments_and_whitespace() {
        let raw = "\n \nBump web  \n\n\n\nWhy.\t\n# a comment\nMore.\r\n\n#\n\n# Please enter\n\n";
        assert_eq!(cleanup(raw, "#"), "Bump web\n\nWhy.\nMore.\n");
        assert_eq!(cleanup("# only a comment\n\n", "#"), "");
        assert_eq!(
            cleanup("s\n\nNav-Watchdog: app=x", "#"),
            "s\n\nNav-Watchdog: app=x\n"
        );
        // An indented `#` is no comment; another comment prefix keeps `#` lines.
        assert_eq!(cleanup("s\n  # kept\n", "#"), "s\n  # kept\n");
        assert_eq!(cleanup("s\n; gone\n# kept\n", ";"), "s\n# kept\n");
        let with_semicolons = VERBOSE_EDITMSG.replace("\n#", "\n;");
        assert_eq!(
            cleanup(&with_semicolons, ";"),
            "Bump web\n\nWhy.\n\n---\n\nNav-Watchdog: app=web mode=arm\n"
        );
    }

    #[test]
    fn cleanup_cuts_at_the_scissors_line_only() {
        // At the very start, everything goes.
        assert_eq!(cleanup(&format!("{SCISSORS}\ns\n"), "#"), "");
        // Without the scissors line the lines below the comments stay, as git keeps them.
        let raw = "s\n\nb\n# comment\ndiff\n";
        assert_eq!(cleanup(raw, "#"), "s\n\nb\ndiff\n");
    }

    #[test]
    fn whitespace_before_colon_and_crlf() {
        let m = "s\r\n\r\nNav-Watchdog : app=x\r\n";
        assert_eq!(t(m), vec![("Nav-Watchdog".into(), "app=x".into())]);
        assert!(t("s\n\n Nav-Watchdog: app=x\n").is_empty());
        assert!(t("s\n\nNav Watchdog: app=x\n").is_empty());
    }
}
