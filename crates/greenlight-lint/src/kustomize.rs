//! `kustomize build` output mapped back to the files it was built from. With
//! `buildMetadata: [originAnnotations]` in the kustomization, kustomize writes on every object
//! the annotation `config.kubernetes.io/origin` (`path: ../base/deployment.yaml`, relative to
//! the directory that was built); a finding on such an object is reported in that file — at
//! the offending field's line when the field is there at the same path, else at the object's
//! `kind:` line — with the rendered line related.
//!
//! greenlight never runs kustomize. Must never: report a line it did not find in the source
//! file (an object it cannot match by kind and name keeps its rendered location), or read
//! anything but the file the annotation names.

use crate::diagnostic::Location;
use crate::source::Source;
use crate::yaml::{self, Document, Limits, Node, Span};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The annotation kustomize writes with `buildMetadata: [originAnnotations]`.
pub const ORIGIN_ANNOTATION: &str = "config.kubernetes.io/origin";

/// The source file a rendered object came from: `path:` of the origin annotation, when the
/// origin is a local file (not a remote `repo:` and not a generator's `configuredIn:`).
pub fn origin_path(annotation: &str) -> Option<String> {
    let docs = yaml::load_stream(annotation, &Limits::default());
    let root = docs.into_iter().next()?.ok()?.root;
    if root.get("repo").is_some() {
        return None;
    }
    let path = root.get("path")?.as_str()?.trim();
    (!path.is_empty() && !path.starts_with('/')).then(|| path.to_string())
}

/// Where a finding lies in the kustomization's sources.
#[derive(Debug, Clone)]
pub struct Mapped {
    pub location: Location,
    /// The text of that line, and of the line above it (for `# greenlight:ignore`).
    pub line_text: String,
    pub above_text: String,
}

/// Source files read once per run.
pub struct Origins {
    root: PathBuf,
    files: HashMap<String, Option<(Source, Vec<Document>)>>,
}

impl Origins {
    /// Paths in origin annotations are relative to `root` (the directory `kustomize build`
    /// was given).
    pub fn new(root: PathBuf) -> Self {
        Origins {
            root,
            files: HashMap::new(),
        }
    }

    /// The place in its source file of `field` (a dotted path with `[i]` indices, from the
    /// object's root) of the object `kind`/`name` that came from `path`.
    pub fn map(
        &mut self,
        path: &str,
        kind: &str,
        name: Option<&str>,
        field: &str,
    ) -> Option<Mapped> {
        let full = self.root.join(path);
        let shown = display(&full);
        let entry = self.files.entry(shown.clone()).or_insert_with(|| {
            let text = read(&full)?;
            let docs = yaml::load_stream(&text, &Limits::default())
                .into_iter()
                .filter_map(Result::ok)
                .collect();
            Some((Source::new(shown.clone(), text), docs))
        });
        let (src, docs) = entry.as_ref()?;
        let object = find_object(docs, kind, name)?;
        let span = field_span(object, field).or_else(|| {
            let e = object.entry("kind")?;
            Some(crate::rules::key_value_span(&e.key, &e.value))
        })?;
        Some(Mapped {
            location: Location::at(
                shown,
                span.start.line,
                span.start.col,
                span.end.line,
                span.end.col,
            ),
            line_text: src.line(span.start.line).to_string(),
            above_text: src.line(span.start.line.saturating_sub(1)).to_string(),
        })
    }
}

fn display(p: &Path) -> String {
    let s = p.to_string_lossy().replace('\\', "/");
    // `a/../b` as `b`, `./x` as `x`: the path a user would type.
    let mut parts: Vec<&str> = Vec::new();
    for seg in s.split('/') {
        match seg {
            "." => {}
            ".." if parts.last().is_some_and(|l| *l != ".." && !l.is_empty()) => {
                parts.pop();
            }
            seg => parts.push(seg),
        }
    }
    let joined = parts.join("/");
    if joined.is_empty() {
        ".".into()
    } else {
        joined
    }
}

fn read(p: &Path) -> Option<String> {
    greenlight_files::read_text(p, crate::MAX_FILE_BYTES, "a kustomization's file").ok()
}

/// The object of this kind in the source documents: the only one, else the one whose name
/// the rendered name contains (kustomize's `namePrefix`/`nameSuffix` only add to it), the
/// longest such name winning; `None` when that is still not one object.
fn find_object<'d>(docs: &'d [Document], kind: &str, name: Option<&str>) -> Option<&'d Node> {
    let same_kind: Vec<&Node> = docs
        .iter()
        .map(|d| &d.root)
        .filter(|r| r.get("kind").and_then(Node::as_str) == Some(kind))
        .collect();
    if same_kind.len() == 1 {
        return Some(same_kind[0]);
    }
    let name = name?;
    let mut best: Vec<(&Node, usize)> = same_kind
        .into_iter()
        .filter_map(|r| {
            let n = r.at(&["metadata", "name"])?.as_str()?;
            name.contains(n).then_some((r, n.len()))
        })
        .collect();
    best.sort_by_key(|(_, l)| std::cmp::Reverse(*l));
    match best.as_slice() {
        [(r, _)] => Some(r),
        [(r, a), (_, b), ..] if a > b => Some(r),
        _ => None,
    }
}

/// The span of a field (`spec.template.spec.containers[0].image`) in an object: the key and
/// its value when they share a line, the item for an index; `None` when the path is not there.
fn field_span(object: &Node, field: &str) -> Option<Span> {
    if field.is_empty() {
        return None;
    }
    let mut node = object;
    let mut span = None;
    for seg in field.split('.') {
        let (key, indices) = match seg.find('[') {
            Some(i) => (&seg[..i], &seg[i..]),
            None => (seg, ""),
        };
        if !key.is_empty() {
            let e = node.entry(key)?;
            span = Some(crate::rules::key_value_span(&e.key, &e.value));
            node = &e.value;
        }
        for idx in indices.split('[').filter(|s| !s.is_empty()) {
            let i: usize = idx.strip_suffix(']')?.parse().ok()?;
            node = node.as_seq().get(i)?;
            span = Some(node.span);
        }
    }
    span
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_paths() {
        assert_eq!(
            origin_path("path: ../base/deployment.yaml\n").as_deref(),
            Some("../base/deployment.yaml")
        );
        assert_eq!(
            origin_path("path: examples/x.yaml\nrepo: https://github.com/a/b\nref: v1\n"),
            None
        );
        assert_eq!(
            origin_path(
                "configuredIn: kustomization.yaml\nconfiguredBy:\n  kind: ConfigMapGenerator\n"
            ),
            None
        );
        assert_eq!(origin_path("[unclosed"), None);
    }

    #[test]
    fn fields_and_objects_in_a_source_file() {
        let text = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: web:latest\n";
        let docs: Vec<Document> = yaml::load_stream(text, &Limits::default())
            .into_iter()
            .filter_map(Result::ok)
            .collect();
        let d = find_object(&docs, "Deployment", Some("prod-web")).unwrap();
        let s = field_span(d, "spec.template.spec.containers[0].image").unwrap();
        assert_eq!((s.start.line, s.start.col, s.end.col), (14, 9, 26));
        assert!(field_span(d, "spec.template.spec.containers[1].image").is_none());
        assert!(find_object(&docs, "Pod", None).is_none());
        assert_eq!(
            display(Path::new("overlays/prod/../../base/d.yaml")),
            "base/d.yaml"
        );
        assert_eq!(display(Path::new("./../base/d.yaml")), "../base/d.yaml");
    }
}
