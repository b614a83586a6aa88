//! Mechanical fixes as text edits at the reported spans (`greenlight lint --fix`, `--diff`):
//! a scalar's value replaced with its quotes kept, or new keys inserted before the first key
//! of a block mapping at its indentation. Comments, quoting, key order and every other byte
//! stay as they were.
//!
//! Must never: edit rendered Helm output or standard input (the engine attaches no edits
//! there), apply two edits that overlap, or guess: an edit whose place does not look as
//! expected (a flow mapping, a scalar over several lines) is dropped.

use crate::source::Source;
use crate::yaml::{Pos, Span};

/// What a rule proposes, in terms of the YAML it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// Replace a scalar (on one line) with `value`, in the same quotes when it is quoted.
    Scalar { span: Span, value: String },
    /// New keys for the block mapping whose first key starts at `at`, inserted before it,
    /// each line at the mapping's indentation (a line's own leading blanks nest under it).
    Keys { at: Pos, lines: Vec<String> },
    /// An image reference (a scalar on one line) to pin to the digest its registry serves:
    /// only with `--resolve`, which asks the registry and fills in the text.
    Pin { span: Span, reference: String },
}

/// An edit of a file's text: replace `start..end` (1-based line, 1-based character column)
/// with `text`. `rank` orders edits of the same place: the higher one is kept (two
/// containers asking for different grace periods get the larger).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextEdit {
    pub file: String,
    pub start: Pos,
    pub end: Pos,
    /// The new text; for a pin, the quote the value is written in (empty when plain), around
    /// which the pinned reference goes.
    pub text: String,
    pub rank: i64,
    /// For a pin: the reference to resolve. Without a resolution the edit is not applied.
    pub pin: Option<String>,
}

impl TextEdit {
    /// A pin's text, with the reference pinned to `pinned` in the value's quotes.
    pub fn pinned(&self, pinned: &str) -> TextEdit {
        TextEdit {
            text: format!("{q}{pinned}{q}", q = self.text),
            pin: None,
            ..self.clone()
        }
    }
}

/// The text edit of `edit` in `src`; `None` when its place is not what the edit expects.
pub fn resolve(src: &Source, edit: &Edit, rank: i64) -> Option<TextEdit> {
    match edit {
        Edit::Pin { span, reference } => {
            let e = resolve(
                src,
                &Edit::Scalar {
                    span: *span,
                    value: String::new(),
                },
                rank,
            )?;
            // `e.text` is the empty value in the scalar's quotes: keep the quote alone.
            let quote = e.text.chars().next().map(String::from).unwrap_or_default();
            Some(TextEdit {
                pin: Some(reference.clone()),
                text: quote,
                ..e
            })
        }
        Edit::Scalar { span, value } => {
            if span.start.line != span.end.line || span.end.col <= span.start.col {
                return None;
            }
            let line: Vec<char> = src.line(span.start.line).chars().collect();
            let a = span.start.col as usize - 1;
            let b = (span.end.col as usize - 1).min(line.len());
            let old = line.get(a..b)?;
            let text = match (old.first(), old.last()) {
                (Some(q @ ('"' | '\'')), Some(e)) if e == q && old.len() >= 2 => {
                    format!("{q}{value}{q}")
                }
                _ => value.clone(),
            };
            Some(TextEdit {
                file: src.name.clone(),
                start: span.start,
                end: span.end,
                text,
                rank,
                pin: None,
            })
        }
        Edit::Keys { at, lines } => {
            let line: Vec<char> = src.line(at.line).chars().collect();
            let before = line.get(..(at.col as usize).checked_sub(1)?)?;
            // Only a block mapping's key alone at the start of its line: not `- key:`, not a
            // flow mapping `{key: …}`.
            if !before.iter().all(|c| *c == ' ') || at.col as usize > line.len() {
                return None;
            }
            let indent = " ".repeat(before.len());
            let text: String = lines.iter().map(|l| format!("{l}\n{indent}")).collect();
            Some(TextEdit {
                file: src.name.clone(),
                start: *at,
                end: *at,
                text,
                rank,
                pin: None,
            })
        }
    }
}

/// Byte offset of a position in `text`; `None` past the end of its line.
fn offset(text: &str, p: Pos) -> Option<usize> {
    let mut start = 0usize;
    for _ in 1..p.line {
        start += text[start..].find('\n')? + 1;
    }
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let line = &text[start..line_end];
    let col = p.col as usize - 1;
    if col == line.chars().count() {
        return Some(line_end);
    }
    line.char_indices().nth(col).map(|(i, _)| start + i)
}

/// The edits that will be applied: for one place, the highest rank; none that overlaps an
/// edit already kept; no pin that was not resolved ([`TextEdit::pinned`]); in file order.
pub fn select(mut edits: Vec<TextEdit>) -> Vec<TextEdit> {
    edits.retain(|e| e.pin.is_none());
    edits.sort_by(|a, b| {
        (&a.file, a.start, a.end, std::cmp::Reverse(a.rank)).cmp(&(
            &b.file,
            b.start,
            b.end,
            std::cmp::Reverse(b.rank),
        ))
    });
    let mut kept: Vec<TextEdit> = Vec::new();
    for e in edits {
        if let Some(last) = kept.last()
            && last.file == e.file
            && (e.start < last.end || (e.start == last.start && e.end == last.end))
        {
            continue;
        }
        kept.push(e);
    }
    kept
}

/// `text` with the edits of one file applied (they must come from [`select`]); `None` when
/// an edit's place is not in the text.
pub fn apply(text: &str, edits: &[&TextEdit]) -> Option<String> {
    let mut spans: Vec<(usize, usize, &str)> = Vec::with_capacity(edits.len());
    for e in edits {
        let a = offset(text, e.start)?;
        let b = offset(text, e.end)?;
        if b < a {
            return None;
        }
        spans.push((a, b, &e.text));
    }
    spans.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut out = text.to_string();
    for (a, b, t) in spans {
        out.replace_range(a..b, t);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(line: u32, col: u32) -> Pos {
        Pos { line, col }
    }

    #[test]
    fn scalars_keep_quotes_and_keys_insert_at_the_indentation() {
        let src = Source::new(
            "d.yaml".into(),
            "spec:\n  # the pod\n  grace: \"10\" # seconds\n  é: 1\n".into(),
        );
        let e = resolve(
            &src,
            &Edit::Scalar {
                span: Span {
                    start: pos(3, 10),
                    end: pos(3, 14),
                },
                value: "45".into(),
            },
            45,
        )
        .unwrap();
        assert_eq!(e.text, "\"45\"");
        let k = resolve(
            &src,
            &Edit::Keys {
                at: pos(4, 3),
                lines: vec!["a:".into(), "  b: 1".into()],
            },
            0,
        )
        .unwrap();
        let out = apply(&src.text, &[&e, &k]).unwrap();
        assert_eq!(
            out,
            "spec:\n  # the pod\n  grace: \"45\" # seconds\n  a:\n    b: 1\n  é: 1\n"
        );
        // Not a block key alone on its line: no edit.
        let flow = Source::new("f.yaml".into(), "spec: {a: 1}\n".into());
        assert!(
            resolve(
                &flow,
                &Edit::Keys {
                    at: pos(1, 8),
                    lines: vec!["x: 1".into()]
                },
                0
            )
            .is_none()
        );
    }

    #[test]
    fn the_higher_rank_wins_one_place_and_overlaps_are_dropped() {
        let at = |l, c, t: &str, rank| TextEdit {
            file: "f".into(),
            start: pos(l, c),
            end: pos(l, c),
            text: t.into(),
            rank,
            pin: None,
        };
        let kept = select(vec![at(2, 3, "a", 30), at(2, 3, "b", 60), at(1, 1, "c", 0)]);
        let texts: Vec<&str> = kept.iter().map(|e| e.text.as_str()).collect();
        assert_eq!(texts, ["c", "b"]);
    }
}
