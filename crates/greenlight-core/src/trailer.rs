//! Trailer parsing with `git interpret-trailers` rules: the trailer block is the last paragraph
//! of the message (or the last one before a `---` patch divider); it counts when every line is a
//! trailer, or when it holds a git-generated trailer and at least 25% of its lines are trailers.
//! Continuation lines (starting with whitespace) fold into the previous value; `#` comment lines
//! are ignored. The subject paragraph is never a trailer block. This module only splits text; it
//! never decides what a trailer means.

/// Prefixes git itself writes; a block with one of them needs only 25% trailer lines.
const GIT_GENERATED: &[&str] = &["Signed-off-by: ", "(cherry picked from commit "];

/// Parse the trailers of a commit message, in order, as `(token, value)` pairs. Values are
/// trimmed and continuation lines are joined with a single space, as `git interpret-trailers
/// --parse` prints them.
pub fn parse(message: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = message
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    // The patch divider ends the message proper.
    let end = lines
        .iter()
        .position(|l| *l == "---" || l.starts_with("--- ") || l.starts_with("---\t"))
        .unwrap_or(lines.len());
    let lines = &lines[..end];
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
    // The subject paragraph (nothing but blank or comment lines before it) is never a trailer block.
    if first == last
        || lines[..first]
            .iter()
            .all(|l| l.trim().is_empty() || is_comment(l))
    {
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

#[cfg(test)]
mod tests {
    use super::parse;

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
    fn divider_ends_message() {
        let m = "s\n\nNav-Watchdog: app=x\n---\n diff --git a b\n";
        assert_eq!(t(m), vec![("Nav-Watchdog".into(), "app=x".into())]);
    }

    #[test]
    fn whitespace_before_colon_and_crlf() {
        let m = "s\r\n\r\nNav-Watchdog : app=x\r\n";
        assert_eq!(t(m), vec![("Nav-Watchdog".into(), "app=x".into())]);
        assert!(t("s\n\n Nav-Watchdog: app=x\n").is_empty());
        assert!(t("s\n\nNav Watchdog: app=x\n").is_empty());
    }
}
