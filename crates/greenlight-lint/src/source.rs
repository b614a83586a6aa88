//! One input as read: its display name, whether it is a rendered stream (stdin) or a file, its
//! text, the lines of its `# Source:` sections (Helm's rendered output) and its
//! `# greenlight:ignore` comments.
//! Must never: parse YAML (that is `yaml`) or decide what a rule means.

/// A `# greenlight:ignore [ID,...]` comment: `None` ids means every rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoreComment {
    pub ids: Option<Vec<String>>,
}

/// A `# Source:` section of rendered Helm output: the comment's line, the template path it
/// names, and the section's last line (before the next `---` or the end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub header: u32,
    pub path: String,
    pub last: u32,
}

#[derive(Debug)]
pub struct Source {
    /// The name shown to users: the path as given (or found under a given directory), or `<stdin>`.
    pub name: String,
    /// Read from stdin (`helm template … | greenlight lint -`): its `# Source:` templates are
    /// where findings are reported. A file on disk is reported at its own lines.
    pub stream: bool,
    pub text: String,
    line_starts: Vec<usize>,
    /// `(line of the "# Source:" comment, template path)`, in line order.
    helm_sections: Vec<(u32, String)>,
}

impl Source {
    pub fn new(name: String, text: String) -> Source {
        let mut line_starts = vec![0];
        let mut helm_sections = Vec::new();
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                line_starts.push(i + 1);
            }
        }
        // Only look for `# Source:` when the text has one at all: a cheap scan keeps plain files fast.
        if text.contains("# Source: ") {
            for (i, line) in text.lines().enumerate() {
                if let Some(path) = line.strip_prefix("# Source: ") {
                    helm_sections.push((i as u32 + 1, path.trim().to_string()));
                }
            }
        }
        Source {
            name,
            stream: false,
            text,
            line_starts,
            helm_sections,
        }
    }

    /// Text read from stdin, shown as `<stdin>`.
    pub fn stdin(text: String) -> Source {
        Source {
            stream: true,
            ..Source::new("<stdin>".into(), text)
        }
    }

    /// Whether the text has `# Source:` comments (rendered Helm output).
    pub fn has_helm_sections(&self) -> bool {
        !self.helm_sections.is_empty()
    }

    /// The template paths named by `# Source:` comments.
    pub fn helm_template_paths(&self) -> impl Iterator<Item = &str> {
        self.helm_sections.iter().map(|(_, p)| p.as_str())
    }

    fn line_count(&self) -> u32 {
        let n = self.line_starts.len() as u32;
        // A final line break starts no line.
        if self.text.ends_with('\n') { n - 1 } else { n }
    }

    /// The text of a 1-based line, without its line break.
    pub fn line(&self, line: u32) -> &str {
        let i = line as usize;
        if i == 0 || i > self.line_starts.len() {
            return "";
        }
        let start = self.line_starts[i - 1];
        let end = self.line_starts.get(i).copied().unwrap_or(self.text.len());
        self.text[start..end].trim_end_matches(['\n', '\r'])
    }

    /// The `# Source:` section holding a line of rendered Helm output.
    pub fn section(&self, line: u32) -> Option<Section> {
        let idx = self.helm_sections.partition_point(|(l, _)| *l < line);
        let (start, path) = self.helm_sections.get(idx.checked_sub(1)?)?;
        let next = self
            .helm_sections
            .get(idx)
            .map_or(self.line_count() + 1, |(l, _)| *l);
        // The section ends before the first `---` after its comment.
        let last = (start + 1..next)
            .find(|l| self.line(*l).starts_with("---"))
            .map_or(next - 1, |l| l - 1);
        (line > *start && line <= last).then(|| Section {
            header: *start,
            path: path.clone(),
            last,
        })
    }

    /// A `# greenlight:ignore` comment on this line.
    pub fn ignore_comment(&self, line: u32) -> Option<IgnoreComment> {
        ignore_comment(self.line(line))
    }
}

/// A `# greenlight:ignore` comment in a line of text (of an input, or of a Helm template).
pub fn ignore_comment(text: &str) -> Option<IgnoreComment> {
    let hash = text.find('#')?;
    let rest = text[hash..]
        .find("greenlight:ignore")
        .map(|i| &text[hash + i..])?;
    // The marker must be the comment's first word: `# greenlight:ignore`.
    let before = text[hash + 1..].trim_start();
    if !before.starts_with("greenlight:ignore") {
        return None;
    }
    let args = rest["greenlight:ignore".len()..].trim();
    let args = args.split(" -- ").next().unwrap_or("").trim();
    if args.is_empty() {
        return Some(IgnoreComment { ids: None });
    }
    let ids = args
        .split([',', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    Some(IgnoreComment { ids: Some(ids) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helm_sections_end_at_the_next_document() {
        let s = Source::new(
            "<stdin>".into(),
            "---\n# Source: app/templates/a.yaml\napiVersion: v1\nkind: X\n---\nkind: Y\n".into(),
        );
        let a = Section {
            header: 2,
            path: "app/templates/a.yaml".into(),
            last: 4,
        };
        assert_eq!(s.section(3), Some(a.clone()));
        assert_eq!(s.section(4), Some(a));
        assert_eq!(s.section(6), None);
        assert_eq!(s.section(1), None);
        assert_eq!(s.section(2), None);
    }

    #[test]
    fn ignore_comments() {
        let s = Source::new(
            "f".into(),
            "a: 1 # greenlight:ignore GL101, gl102 -- drained by the mesh\n# greenlight:ignore\nb: '#x'\n".into(),
        );
        assert_eq!(
            s.ignore_comment(1).unwrap().ids,
            Some(vec!["GL101".into(), "gl102".into()])
        );
        assert_eq!(s.ignore_comment(2).unwrap().ids, None);
        assert_eq!(s.ignore_comment(3), None);
    }
}
