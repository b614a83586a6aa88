//! Text embedded in a file — a shell script in a YAML scalar (`run: |`, `script: >-`, a quoted
//! one-liner) or a whole script file — with the file position of every character, so a finding
//! inside it is reported at the line and column where that character is written.
//!
//! Owns: rebuilding a scalar's value from the text as written (block scalars with their
//! indentation, folding and chomping; quoted scalars with escapes and folding; multi-line plain
//! scalars) and keeping each character's position. The rebuilt value must equal the value the
//! YAML parser produced, character for character (trailing line breaks aside); when it does
//! not, there is no embedded text (`None`) and nothing inside the scalar is reported.
//! Must never: guess a position, or panic on any input.

use crate::source::Source;
use crate::yaml::{Node, Pos, Span, Style, Value};

/// Scripts longer than this (in characters) are not read: a position per character is kept,
/// and no real pipeline step is this long.
pub const MAX_CHARS: usize = 1 << 20;

/// A text and the file position of each of its characters.
#[derive(Debug, Clone)]
pub struct Embedded {
    pub chars: Vec<char>,
    /// `positions[i]` is where `chars[i]` is written; one more entry marks the end.
    positions: Vec<Pos>,
}

impl Embedded {
    /// A whole file (a shell script): positions are its own lines and columns. `None` past
    /// [`MAX_CHARS`].
    pub fn file(text: &str) -> Option<Embedded> {
        let chars: Vec<char> = text.chars().collect();
        if chars.len() > MAX_CHARS {
            return None;
        }
        let mut positions = Vec::with_capacity(chars.len() + 1);
        let (mut line, mut col) = (1u32, 1u32);
        for c in &chars {
            positions.push(Pos { line, col });
            if *c == '\n' {
                line += 1;
                col = 1;
            } else {
                col += 1;
            }
        }
        positions.push(Pos { line, col });
        Some(Embedded { chars, positions })
    }

    /// A scalar's value, found in the source it was parsed from. `None` when the node is not
    /// a scalar, is too long, or cannot be matched to the text as written.
    pub fn scalar(src: &Source, node: &Node) -> Option<Embedded> {
        let Value::Scalar(s) = &node.value else {
            return None;
        };
        if s.text.len() > MAX_CHARS * 4 {
            return None;
        }
        let want: Vec<char> = s.text.chars().collect();
        if want.len() > MAX_CHARS {
            return None;
        }
        let built = match s.style {
            Style::Literal | Style::Folded => block(src, node, s.style == Style::Folded, &want),
            Style::Plain | Style::SingleQuoted | Style::DoubleQuoted => {
                flow(src, node, s.style).filter(|(c, _)| *c == want)
            }
        }?;
        let (_, mut positions) = built;
        let end = positions.last().map_or(node.span.start, |p| Pos {
            line: p.line,
            col: p.col + 1,
        });
        // The parser's value may carry trailing line breaks the rebuilt one lacks (chomping):
        // they are at the end.
        positions.resize(want.len(), end);
        positions.push(end);
        Some(Embedded {
            chars: want,
            positions,
        })
    }

    pub fn len(&self) -> usize {
        self.chars.len()
    }

    pub fn is_empty(&self) -> bool {
        self.chars.is_empty()
    }

    /// Where character `i` is written (the end, for `i` past the last).
    pub fn pos(&self, i: usize) -> Pos {
        self.positions
            .get(i)
            .or(self.positions.last())
            .copied()
            .unwrap_or_default()
    }

    /// The span of characters `start..end` (exclusive): from the first one's position to just
    /// after the last one.
    pub fn span(&self, start: usize, end: usize) -> Span {
        let first = self.pos(start);
        if end <= start {
            return Span {
                start: first,
                end: first,
            };
        }
        let last = self.pos(end - 1);
        Span {
            start: first,
            end: Pos {
                line: last.line,
                col: last.col + 1,
            },
        }
    }

    /// The text of characters `start..end`.
    pub fn text(&self, start: usize, end: usize) -> String {
        self.chars[start.min(self.len())..end.min(self.len())]
            .iter()
            .collect()
    }
}

/// The characters of a line, 1-based.
fn line_chars(src: &Source, line: u32) -> Vec<char> {
    src.line(line).chars().collect()
}

/// A block scalar (`|`, `>`, with indicators). The parser's span starts at the first
/// character of content, so its column is the content indentation; with an explicit
/// indentation indicator (the content then starts with blanks) every smaller indentation is
/// tried, and the one that rebuilds the parsed value is taken. Leading empty lines are line
/// breaks at the start of the value.
fn block(src: &Source, node: &Node, folded: bool, want: &[char]) -> Option<(Vec<char>, Vec<Pos>)> {
    let first_line = node.span.start.line;
    let auto = node.span.start.col.checked_sub(1)? as usize;
    let last_line = node.span.end.line.max(first_line);
    let leading = want.iter().take_while(|c| **c == '\n').count();
    let trimmed = |v: &[char]| {
        let mut n = v.len();
        while n > 0 && v[n - 1] == '\n' {
            n -= 1;
        }
        n
    };
    let want_len = trimmed(want);
    if want_len == 0 {
        return None;
    }
    for indent in std::iter::once(auto).chain((1..auto).rev()) {
        if indent == 0 {
            continue;
        }
        let (body, body_pos) = block_with(src, first_line, last_line, indent, folded);
        let mut chars = vec!['\n'; leading];
        let mut positions = vec![node.span.start; leading];
        chars.extend(body);
        positions.extend(body_pos);
        let n = trimmed(&chars);
        if n == want_len && chars[..n] == want[..n] {
            chars.truncate(n);
            positions.truncate(n);
            return Some((chars, positions));
        }
    }
    None
}

fn block_with(
    src: &Source,
    first_line: u32,
    last_line: u32,
    indent: usize,
    folded: bool,
) -> (Vec<char>, Vec<Pos>) {
    // (line number, content chars, line length) per line; empty lines have no content.
    let mut lines: Vec<(u32, Vec<char>, usize)> = Vec::new();
    for l in first_line..=last_line {
        let text = line_chars(src, l);
        let spaces = text.iter().take_while(|c| **c == ' ').count();
        if spaces == text.len() {
            lines.push((l, text.get(indent..).unwrap_or(&[]).to_vec(), text.len()));
            continue;
        }
        if spaces < indent {
            break;
        }
        lines.push((l, text[indent..].to_vec(), text.len()));
    }
    let mut chars = Vec::new();
    let mut positions = Vec::new();
    let col = |k: usize| (indent + k + 1) as u32;
    if !folded {
        for (i, (l, content, len)) in lines.iter().enumerate() {
            for (k, c) in content.iter().enumerate() {
                chars.push(*c);
                positions.push(Pos {
                    line: *l,
                    col: col(k),
                });
            }
            if i + 1 < lines.len() {
                chars.push('\n');
                positions.push(Pos {
                    line: *l,
                    col: (*len + 1) as u32,
                });
            }
        }
        return (chars, positions);
    }
    // Folding: a line break between two lines of text that do not start with a blank is a
    // space; with empty lines between them, each empty line is one line break.
    #[derive(PartialEq)]
    enum Prev {
        None,
        Normal,
        More,
    }
    let mut prev = Prev::None;
    let mut empties = 0usize;
    let mut break_at = Pos::default();
    for (l, content, len) in &lines {
        if content.iter().all(|c| *c == ' ') && prev != Prev::More && content.is_empty() {
            empties += 1;
            continue;
        }
        let kind = if matches!(content.first(), Some(' ' | '\t')) {
            Prev::More
        } else {
            Prev::Normal
        };
        match prev {
            Prev::None => {
                for _ in 0..empties {
                    chars.push('\n');
                    positions.push(break_at);
                }
            }
            Prev::Normal if kind == Prev::Normal => {
                if empties == 0 {
                    chars.push(' ');
                    positions.push(break_at);
                } else {
                    for _ in 0..empties {
                        chars.push('\n');
                        positions.push(break_at);
                    }
                }
            }
            _ => {
                for _ in 0..=empties {
                    chars.push('\n');
                    positions.push(break_at);
                }
            }
        }
        for (k, c) in content.iter().enumerate() {
            chars.push(*c);
            positions.push(Pos {
                line: *l,
                col: col(k),
            });
        }
        break_at = Pos {
            line: *l,
            col: (*len + 1) as u32,
        };
        prev = kind;
        empties = 0;
    }
    (chars, positions)
}

/// A plain, single- or double-quoted scalar from its first character (the quote, when
/// quoted), folded across lines as YAML folds flow scalars.
fn flow(src: &Source, node: &Node, style: Style) -> Option<(Vec<char>, Vec<Pos>)> {
    let start = node.span.start;
    let end = node.span.end;
    let mut out = Vec::new();
    let mut pos = Vec::new();
    let mut line = start.line;
    let mut text = line_chars(src, line);
    let mut i = start.col.checked_sub(1)? as usize;
    let quote = match style {
        Style::SingleQuoted => Some('\''),
        Style::DoubleQuoted => Some('"'),
        _ => None,
    };
    if let Some(q) = quote {
        if text.get(i) != Some(&q) {
            return None;
        }
        i += 1;
    }
    let at = |line: u32, i: usize| Pos {
        line,
        col: i as u32 + 1,
    };
    // Bound the walk: a flow scalar never runs past the node's end line.
    let last_line = end.line.max(start.line);
    loop {
        if i >= text.len() {
            // A line break inside the scalar: fold it.
            if quote.is_none() && line >= last_line {
                break;
            }
            let break_pos = at(line, text.len());
            // Trailing blanks before a break are not part of the value.
            while matches!(out.last(), Some(' ' | '\t'))
                && pos.last().is_some_and(|p: &Pos| p.line == line)
            {
                out.pop();
                pos.pop();
            }
            let mut breaks = 0;
            loop {
                line += 1;
                if line > last_line.max(start.line) && quote.is_none() {
                    return None;
                }
                if line > last_line {
                    return None;
                }
                text = line_chars(src, line);
                breaks += 1;
                i = text.iter().take_while(|c| matches!(c, ' ' | '\t')).count();
                if i < text.len() {
                    break;
                }
            }
            if breaks == 1 {
                out.push(' ');
                pos.push(break_pos);
            } else {
                for _ in 1..breaks {
                    out.push('\n');
                    pos.push(break_pos);
                }
            }
            continue;
        }
        if quote.is_none() && line == end.line && i + 1 >= end.col as usize {
            break;
        }
        let c = text[i];
        match (quote, c) {
            (Some('\''), '\'') => {
                if text.get(i + 1) == Some(&'\'') {
                    out.push('\'');
                    pos.push(at(line, i));
                    i += 2;
                    continue;
                }
                break;
            }
            (Some('"'), '"') => break,
            (Some('"'), '\\') => {
                let Some(&e) = text.get(i + 1) else {
                    // An escaped line break: the break and the next line's indentation vanish.
                    line += 1;
                    if line > last_line {
                        return None;
                    }
                    text = line_chars(src, line);
                    i = text.iter().take_while(|c| matches!(c, ' ' | '\t')).count();
                    continue;
                };
                let (ch, used) = match e {
                    'n' => ('\n', 2),
                    't' | '\t' => ('\t', 2),
                    'r' => ('\r', 2),
                    '0' => ('\0', 2),
                    'a' => ('\x07', 2),
                    'b' => ('\x08', 2),
                    'e' => ('\x1b', 2),
                    'f' => ('\x0c', 2),
                    'v' => ('\x0b', 2),
                    ' ' => (' ', 2),
                    '"' => ('"', 2),
                    '/' => ('/', 2),
                    '\\' => ('\\', 2),
                    'N' => ('\u{85}', 2),
                    '_' => ('\u{a0}', 2),
                    'L' => ('\u{2028}', 2),
                    'P' => ('\u{2029}', 2),
                    'x' | 'u' | 'U' => {
                        let n = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let hex: String = text.get(i + 2..i + 2 + n)?.iter().collect();
                        let ch = char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?;
                        (ch, 2 + n)
                    }
                    _ => return None,
                };
                out.push(ch);
                pos.push(at(line, i));
                i += used;
            }
            _ => {
                out.push(c);
                pos.push(at(line, i));
                i += 1;
            }
        }
    }
    Some((out, pos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::{Limits, load_stream};

    /// Every character of the value at `key` is at the file position the text says it is.
    fn positions_of(yaml: &str, key: &str) -> (String, Embedded) {
        let src = Source::new("x.yaml".into(), yaml.into());
        let docs = load_stream(yaml, &Limits::default());
        let root = &docs[0].as_ref().unwrap().root;
        let node = root.get(key).unwrap();
        let e = Embedded::scalar(&src, node).unwrap_or_else(|| panic!("{key}: not rebuilt"));
        (node.as_str().unwrap().to_string(), e)
    }

    fn find(e: &Embedded, needle: &str) -> (u32, u32) {
        let s: String = e.chars.iter().collect();
        let byte = s.find(needle).unwrap();
        let i = s[..byte].chars().count();
        let p = e.pos(i);
        (p.line, p.col)
    }

    #[test]
    fn literal_block_scalar_positions() {
        let y = "run: |\n  echo hi\n\n  helm upgrade app --set image.tag=latest\n";
        let (v, e) = positions_of(y, "run");
        assert_eq!(e.chars.iter().collect::<String>(), v);
        assert_eq!(find(&e, "latest"), (4, 36));
        assert_eq!(find(&e, "echo"), (2, 3));
    }

    #[test]
    fn folded_block_scalar_positions() {
        let y = "a: 1\nrun: >-\n    helm upgrade app ./chart\n    --set image.tag=main\n\n    --wait\nb: 2\n";
        let (v, e) = positions_of(y, "run");
        assert_eq!(
            v, "helm upgrade app ./chart --set image.tag=main\n--wait",
            "the parser folds"
        );
        assert_eq!(find(&e, "main"), (4, 21));
        assert_eq!(find(&e, "--wait"), (6, 5));
    }

    #[test]
    fn folded_with_more_indented_lines_and_keep_chomping() {
        let y = "run: >+\n  a\n    b\n  c\n\nnext: 1\n";
        let (v, e) = positions_of(y, "run");
        assert_eq!(e.chars.iter().collect::<String>(), v);
        assert_eq!(find(&e, "c"), (4, 3));
    }

    #[test]
    fn explicit_indentation_indicator() {
        let y = "run: |2\n    indented\n  x\n";
        let (v, e) = positions_of(y, "run");
        assert_eq!(v, "  indented\nx\n");
        assert_eq!(find(&e, "indented"), (2, 5));
        assert_eq!(find(&e, "x"), (3, 3));
    }

    #[test]
    fn double_quoted_escapes_and_folding() {
        let y = "run: \"helm upgrade \\\"app\\\" \\\n  --set tag=\\x6catest\n\n  end\"\n";
        let (v, e) = positions_of(y, "run");
        assert_eq!(v, "helm upgrade \"app\" --set tag=latest\nend");
        assert_eq!(find(&e, "--set"), (2, 3));
        // `l` is written as the escape `\x6c`.
        assert_eq!(find(&e, "latest"), (2, 13));
        assert_eq!(find(&e, "atest"), (2, 17));
        assert_eq!(find(&e, "end"), (4, 3));
    }

    #[test]
    fn single_quoted_and_plain_multiline() {
        let y = "a: 'it''s\n  here'\nb: plain\n  more words\n";
        let (v, e) = positions_of(y, "a");
        assert_eq!(v, "it's here");
        assert_eq!(find(&e, "here"), (2, 3));
        assert_eq!(find(&e, "'s"), (1, 7));
        let (v, e) = positions_of(y, "b");
        assert_eq!(v, "plain more words");
        assert_eq!(find(&e, "words"), (4, 8));
    }

    #[test]
    fn a_script_file_is_its_own_positions() {
        let e = Embedded::file("#!/bin/sh\nhelm x\n").unwrap();
        assert_eq!(find(&e, "x"), (2, 6));
        assert_eq!(e.span(10, 14).end, Pos { line: 2, col: 5 });
    }
}
