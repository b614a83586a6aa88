//! Attribution by path: does a commit's set of changed files touch an app's source paths?
//! Pure prefix logic over repository-relative paths, and their lexical normalization; git
//! answers which files changed. Never touches a file system: paths here are repository
//! paths, not local ones.

use crate::snapshot::SourcePaths;

/// Whether a commit touches an app.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Touch {
    /// These changed files lie under the app's source paths.
    Yes(Vec<String>),
    No,
    /// The app's paths are unknown: assume it does (the safe answer for attribution).
    Assumed(String),
}

impl Touch {
    pub fn touches(&self) -> bool {
        !matches!(self, Touch::No)
    }
}

pub fn touches(paths: &SourcePaths, changed: &[String]) -> Touch {
    match paths {
        SourcePaths::Unknown { why } => Touch::Assumed(why.clone()),
        SourcePaths::Known(prefixes) => {
            let hit: Vec<String> = changed
                .iter()
                .filter(|f| prefixes.iter().any(|p| under(f, p)))
                .cloned()
                .collect();
            if hit.is_empty() {
                Touch::No
            } else {
                Touch::Yes(hit)
            }
        }
    }
}

/// Whether every commit that touches `inner` touches `outer` too: then a commit that touches
/// nothing under `outer` touches nothing under `inner` either. Unknown paths are touched by
/// every commit: they cover any, and known ones never cover them.
pub fn covers(outer: &SourcePaths, inner: &SourcePaths) -> bool {
    match (outer, inner) {
        (SourcePaths::Unknown { .. }, _) => true,
        (SourcePaths::Known(o), SourcePaths::Known(i)) => {
            i.iter().all(|p| o.iter().any(|q| under(p, q)))
        }
        (SourcePaths::Known(_), SourcePaths::Unknown { .. }) => false,
    }
}

/// Source paths in words: the prefixes, space-separated (`the whole repository` for `""`), or
/// `unknown`.
pub fn shown(paths: &SourcePaths) -> String {
    match paths {
        SourcePaths::Known(ps) if ps.is_empty() => "none".into(),
        SourcePaths::Known(ps) => ps
            .iter()
            .map(|p| {
                if p.is_empty() {
                    "the whole repository"
                } else {
                    p.as_str()
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
        SourcePaths::Unknown { .. } => "unknown".into(),
    }
}

/// Whether `file` is exempt from attribution under `patterns`, read as `.gitignore` reads its
/// lines: a pattern is a repository path whose segments may hold `*` (any characters but `/`),
/// a leading `!` re-includes what an earlier pattern exempted, and the last matching pattern
/// decides. The gate exempts other workloads' candidate files in a shared directory, then
/// re-includes its own: `cands/*-candidate.yaml`, `!cands/web-candidate.yaml`.
pub fn exempt(patterns: &[String], file: &str) -> bool {
    let mut out = false;
    for p in patterns {
        let (negated, glob) = match p.strip_prefix('!') {
            Some(g) => (true, g),
            None => (false, p.as_str()),
        };
        if glob_matches(glob.trim_start_matches("./"), file) {
            out = !negated;
        }
    }
    out
}

/// Segment by segment; `*` never crosses a `/`.
fn glob_matches(pattern: &str, file: &str) -> bool {
    let ps: Vec<&str> = pattern.split('/').collect();
    let fs: Vec<&str> = file.split('/').collect();
    ps.len() == fs.len() && ps.iter().zip(&fs).all(|(p, f)| segment_matches(p, f))
}

fn segment_matches(p: &str, f: &str) -> bool {
    let mut parts = p.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = f.strip_prefix(first) else {
        return false;
    };
    let tail: Vec<&str> = parts.collect();
    let Some((last, middle)) = tail.split_last() else {
        return rest.is_empty();
    };
    for m in middle {
        match rest.find(m) {
            Some(i) => rest = &rest[i + m.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// `file` equals `prefix` or lies in the directory `prefix`; `""` and `.` are the whole repo.
fn under(file: &str, prefix: &str) -> bool {
    let p = prefix.trim_start_matches("./").trim_matches('/');
    if p.is_empty() || p == "." {
        return true;
    }
    file == p || (file.starts_with(p) && file.as_bytes().get(p.len()) == Some(&b'/'))
}

/// Lexically normalize a repository-relative path: `./a/b/../c/` → `a/c`, `.` → `""`.
/// `None` when `..` climbs above the repository root.
pub fn normalize_path(p: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.trim().split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(p: &[&str]) -> SourcePaths {
        SourcePaths::Known(p.iter().map(|s| s.to_string()).collect())
    }
    fn files(f: &[&str]) -> Vec<String> {
        f.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn prefix_is_a_directory_not_a_string_prefix() {
        let p = known(&["apps/web"]);
        assert!(touches(&p, &files(&["apps/web/deploy.yaml"])).touches());
        assert!(touches(&p, &files(&["apps/web"])).touches());
        assert_eq!(
            touches(&p, &files(&["apps/web2/deploy.yaml", "README.md"])),
            Touch::No
        );
    }

    #[test]
    fn whole_repo_and_files() {
        assert!(touches(&known(&[""]), &files(&["x"])).touches());
        assert!(touches(&known(&["."]), &files(&["x"])).touches());
        assert!(touches(&known(&["values/prod.yaml"]), &files(&["values/prod.yaml"])).touches());
        assert_eq!(
            touches(&known(&["values/prod.yaml"]), &files(&["values/dev.yaml"])),
            Touch::No
        );
        assert!(matches!(
            touches(
                &SourcePaths::Unknown {
                    why: "plugin".into()
                },
                &[]
            ),
            Touch::Assumed(_)
        ));
    }

    #[test]
    fn exemption_reads_as_gitignore_does() {
        let pats: Vec<String> = [
            "cands/*-candidate.yaml",
            "cands/*-candidate.lock",
            "cands/README.md",
            "!cands/web-candidate.yaml",
        ]
        .map(String::from)
        .to_vec();
        assert!(exempt(&pats, "cands/api-candidate.yaml"));
        assert!(exempt(&pats, "cands/api-candidate.lock"));
        assert!(exempt(&pats, "cands/README.md"));
        // Its own file is re-included; anything else in the directory was never exempt.
        assert!(!exempt(&pats, "cands/web-candidate.yaml"));
        assert!(!exempt(&pats, "cands/kustomization.yaml"));
        // `*` stays within a segment, and a suffix must be a suffix.
        assert!(!exempt(&pats, "cands/sub/api-candidate.yaml"));
        assert!(!exempt(&pats, "cands/api-candidate.yaml.bak"));
        assert!(!exempt(&pats, "other/api-candidate.yaml"));
        // `*-candidate.yaml` needs its `-candidate.yaml` whole: the star may be empty, the
        // literal parts may not overlap.
        assert!(exempt(&pats, "cands/-candidate.yaml"));
        assert!(!exempt(&pats, "cands/candidate.yaml"));
        assert!(!exempt(&[], "cands/api-candidate.yaml"));
        let mid: Vec<String> = vec!["a/x*y*z".into()];
        assert!(exempt(&mid, "a/xyz"));
        assert!(exempt(&mid, "a/x1y2z"));
        assert!(!exempt(&mid, "a/xzy"));
    }

    #[test]
    fn path_normalization() {
        assert_eq!(normalize_path("./apps/web/").as_deref(), Some("apps/web"));
        assert_eq!(normalize_path(".").as_deref(), Some(""));
        assert_eq!(normalize_path("").as_deref(), Some(""));
        assert_eq!(
            normalize_path("apps/web/../../values/prod.yaml").as_deref(),
            Some("values/prod.yaml")
        );
        assert_eq!(normalize_path("apps/../../etc"), None);
    }
}
