//! Document kinds: what a file is, so that each rule reads only the files it understands —
//! Kubernetes manifests (objects), CI pipelines (a GitHub Actions workflow, a GitLab CI file)
//! and shell scripts.
//! Must never: read a file (the name and the text already read decide).

use std::path::Path;

/// What a source holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// YAML or JSON whose documents may be Kubernetes objects (the default).
    Manifests,
    /// `.github/workflows/*.yml` / `*.yaml`.
    GithubWorkflow,
    /// `.gitlab-ci.yml` (or `.yaml`).
    GitlabCi,
    /// `*.sh`, `*.bash`, or a file whose first line is an `sh` or `bash` shebang.
    ShellScript,
}

impl Kind {
    /// The kind of a source by its name (as shown) and text.
    pub fn of(name: &str, text: &str) -> Kind {
        let path = Path::new(name);
        let base = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if matches!(ext, "yml" | "yaml") {
            let parent = path
                .parent()
                .map(|p| p.to_string_lossy().replace('\\', "/"));
            if parent.is_some_and(|p| p == ".github/workflows" || p.ends_with("/.github/workflows"))
            {
                return Kind::GithubWorkflow;
            }
            if base == ".gitlab-ci.yml" || base == ".gitlab-ci.yaml" {
                return Kind::GitlabCi;
            }
            return Kind::Manifests;
        }
        if matches!(ext, "sh" | "bash") || is_shell_shebang(text) {
            return Kind::ShellScript;
        }
        Kind::Manifests
    }

    /// Whether the source is read as YAML.
    pub fn is_yaml(self) -> bool {
        self != Kind::ShellScript
    }

    /// How the kind is named in documentation.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Manifests => "Kubernetes manifests",
            Kind::GithubWorkflow => "GitHub Actions workflows",
            Kind::GitlabCi => "GitLab CI files",
            Kind::ShellScript => "shell scripts",
        }
    }
}

/// A first line `#!/bin/sh`, `#!/bin/bash -e`, `#!/usr/bin/env bash`, `#!/usr/bin/env -S bash -eu`.
pub fn is_shell_shebang(text: &str) -> bool {
    let Some(rest) = text.strip_prefix("#!") else {
        return false;
    };
    let first = rest.lines().next().unwrap_or("");
    let mut words = first.split_whitespace();
    let Some(prog) = words.next() else {
        return false;
    };
    let name = |p: &str| p.rsplit('/').next().unwrap_or("").to_string();
    let interpreter = if name(prog) == "env" {
        words.find(|w| !w.starts_with('-')).map(name)
    } else {
        Some(name(prog))
    };
    matches!(interpreter.as_deref(), Some("sh" | "bash" | "dash" | "ash"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_name_and_shebang() {
        assert_eq!(
            Kind::of(".github/workflows/ci.yml", ""),
            Kind::GithubWorkflow
        );
        assert_eq!(
            Kind::of("repo/.github/workflows/d.yaml", ""),
            Kind::GithubWorkflow
        );
        assert_eq!(Kind::of("repo/.github/ci.yml", ""), Kind::Manifests);
        assert_eq!(Kind::of("a/.gitlab-ci.yml", ""), Kind::GitlabCi);
        assert_eq!(Kind::of("deploy.sh", ""), Kind::ShellScript);
        assert_eq!(
            Kind::of("bin/deploy", "#!/usr/bin/env bash\n"),
            Kind::ShellScript
        );
        assert_eq!(Kind::of("bin/deploy", "#!/bin/sh -e\n"), Kind::ShellScript);
        assert_eq!(
            Kind::of("bin/deploy", "#!/usr/bin/env python3\n"),
            Kind::Manifests
        );
        assert_eq!(Kind::of("k8s/app.yaml", "#!/bin/sh\n"), Kind::Manifests);
        assert!(!is_shell_shebang("#!"));
    }
}
