//! One input as read: its display name, its text, the lines of its `# Source:` sections
//! (Helm's rendered output) and its `# greenlight:ignore` comments.
//! Must never: parse YAML (that is `yaml`) or decide what a rule means.

/// A `# greenlight:ignore [ID,...]` comment: `None` ids means every rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoreComment {
    pub ids: Option<Vec<String>>,
}

#[derive(Debug)]
pub struct Source {
    /// The name shown to users: the path as given (or found under a given directory), or `<stdin>`.
    pub name: String,
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
            text,
            line_starts,
            helm_sections,
        }
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

    /// For a line of rendered Helm output: the template it came from and the line within that
    /// template (the line after the `# Source:` comment is line 1).
    pub fn helm_origin(&self, line: u32) -> Option<(&str, u32)> {
        let idx = self.helm_sections.partition_point(|(l, _)| *l < line);
        let (start, path) = self.helm_sections.get(idx.checked_sub(1)?)?;
        // A `---` between the comment and the line closes the section.
        if (start + 1..line).any(|l| self.line(l).starts_with("---")) {
            return None;
        }
        Some((path.as_str(), line - start))
    }

    /// A `# greenlight:ignore` comment on this line.
    pub fn ignore_comment(&self, line: u32) -> Option<IgnoreComment> {
        let text = self.line(line);
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helm_sections_map_lines_to_templates() {
        let s = Source::new(
            "<stdin>".into(),
            "---\n# Source: app/templates/a.yaml\napiVersion: v1\nkind: X\n---\nkind: Y\n".into(),
        );
        assert_eq!(s.helm_origin(3), Some(("app/templates/a.yaml", 1)));
        assert_eq!(s.helm_origin(4), Some(("app/templates/a.yaml", 2)));
        assert_eq!(s.helm_origin(6), None);
        assert_eq!(s.helm_origin(1), None);
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
