//! Where an input sits for cross-object pairing: its directory and the nearest directory above
//! it (or at it) that starts a unit of its own — one holding a `kustomization.yaml`, a
//! `Chart.yaml` or a `.git`.
//! Owns: the one filesystem question the engine asks (does this directory hold such a marker),
//! asked once per directory. Must never: read a file's contents, or fail the run (a directory
//! that cannot be probed simply has no marker).

use std::collections::HashMap;
use std::path::Path;

/// Files whose presence makes a directory a pairing boundary. Kustomize reads any of its three
/// spellings; `.git` is a directory in a clone and a file in a worktree.
pub const MARKERS: &[&str] = &[
    "kustomization.yaml",
    "kustomization.yml",
    "Kustomization",
    "Chart.yaml",
    ".git",
];

/// Whether `dir` (a path as inputs are named; `""` is the current directory) holds one of the
/// [`MARKERS`]. The default probe of [`crate::Options::scope_marker`].
pub fn holds_marker(dir: &str) -> bool {
    let dir = if dir.is_empty() { "." } else { dir };
    MARKERS.iter().any(|m| Path::new(dir).join(m).exists())
}

/// A probe that never finds a marker: pairing by directory ancestry alone.
pub fn no_marker(_: &str) -> bool {
    false
}

/// The pairing scope of one input.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scope {
    /// The input's directory as named (`apps/shop` for `apps/shop/pdb.yaml`, `""` for a bare
    /// file name, `/` for `/x.yaml`).
    pub dir: String,
    /// The nearest directory at or above `dir` holding a marker; `None` when none does.
    pub boundary: Option<String>,
    /// Standard input (or any input without a directory of its own): pairs only with itself.
    pub isolated: bool,
}

/// The scope no input has (objects built outside the engine).
pub static UNSCOPED: Scope = Scope {
    dir: String::new(),
    boundary: None,
    isolated: false,
};

/// The directory of a named input: everything before its last `/`, `/` for a file at the
/// root, `""` for a bare name.
pub fn dir_of(name: &str) -> &str {
    match name.rfind('/') {
        Some(0) => "/",
        Some(i) => &name[..i],
        None => "",
    }
}

/// The parent of a directory as named, `None` above the top (`""` or `/`).
fn parent(dir: &str) -> Option<&str> {
    match dir {
        "" | "/" => None,
        d => Some(dir_of(d)),
    }
}

/// Whether directory `a` is `b` or one of its ancestors.
pub fn is_ancestor_or_self(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match a {
        "" => !b.starts_with('/'),
        "/" => b.starts_with('/'),
        _ => b.strip_prefix(a).is_some_and(|rest| rest.starts_with('/')),
    }
}

impl Scope {
    /// The scope of the input named `name`; `probe` answers for a directory, `seen` remembers
    /// the answers across inputs.
    pub fn of(name: &str, probe: fn(&str) -> bool, seen: &mut HashMap<String, bool>) -> Scope {
        if name == "<stdin>" {
            return Scope {
                dir: String::new(),
                boundary: None,
                isolated: true,
            };
        }
        let dir = dir_of(name);
        let mut at = Some(dir);
        let mut boundary = None;
        while let Some(d) = at {
            let marked = *seen.entry(d.to_string()).or_insert_with(|| probe(d));
            if marked {
                boundary = Some(d.to_string());
                break;
            }
            at = parent(d);
        }
        Scope {
            dir: dir.to_string(),
            boundary,
            isolated: false,
        }
    }

    /// Whether objects in inputs of these scopes may pair: one's directory is the other's or
    /// an ancestor of it, and not above the deeper one's boundary. Isolated scopes pair with
    /// nothing (the caller pairs objects of one input without asking).
    pub fn pairs_with(&self, other: &Scope) -> bool {
        if self.isolated || other.isolated {
            return false;
        }
        let (upper, lower) = if is_ancestor_or_self(&self.dir, &other.dir) {
            (self, other)
        } else if is_ancestor_or_self(&other.dir, &self.dir) {
            (other, self)
        } else {
            return false;
        };
        lower
            .boundary
            .as_deref()
            .is_none_or(|b| is_ancestor_or_self(b, &upper.dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(name: &str, marked: &[&str]) -> Scope {
        let mut seen: HashMap<String, bool> =
            marked.iter().map(|d| (d.to_string(), true)).collect();
        Scope::of(name, no_marker, &mut seen)
    }

    #[test]
    fn directories_and_ancestry() {
        assert_eq!(dir_of("a/b/c.yaml"), "a/b");
        assert_eq!(dir_of("c.yaml"), "");
        assert_eq!(dir_of("/c.yaml"), "/");
        assert!(is_ancestor_or_self("a", "a/b"));
        assert!(is_ancestor_or_self("", "a/b"));
        assert!(is_ancestor_or_self("/", "/a"));
        assert!(!is_ancestor_or_self("a", "ab/c"));
        assert!(!is_ancestor_or_self("a/b", "a"));
        assert!(!is_ancestor_or_self("", "/a"));
    }

    #[test]
    fn pairs_along_one_branch_below_the_boundary() {
        let marked = ["app", "app/overlays/prod"];
        let base = scope("app/base/d.yaml", &marked);
        let prod = scope("app/overlays/prod/hpa.yaml", &marked);
        let prod_sub = scope("app/overlays/prod/extra/pdb.yaml", &marked);
        let app = scope("app/hpa.yaml", &marked);
        assert_eq!(prod.boundary.as_deref(), Some("app/overlays/prod"));
        assert!(!base.pairs_with(&prod), "siblings never pair");
        assert!(prod.pairs_with(&prod_sub) && prod_sub.pairs_with(&prod));
        // app/ is above prod's own boundary, but base/ has none nearer than app/.
        assert!(!app.pairs_with(&prod));
        assert!(app.pairs_with(&base));
        let stdin = scope("<stdin>", &[]);
        assert!(!stdin.pairs_with(&stdin.clone()) && !stdin.pairs_with(&base));
        // No marker anywhere: ancestry alone decides.
        assert!(scope("x.yaml", &[]).pairs_with(&scope("a/b/y.yaml", &[])));
    }
}
