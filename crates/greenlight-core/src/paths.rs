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
