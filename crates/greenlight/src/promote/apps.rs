//! The two Applications a promotion goes through, checked against what Argo CD says of them
//! before a run writes anything (`docs/promote.md#applications`):
//!
//! - the **live** Application must deploy `live.manifest` as plain YAML — a directory source of
//!   the gate's repository and branch whose path holds the file (recursing when the file is
//!   below it) — because the gate promotes by editing the image in that file, which a Helm
//!   chart, a kustomization or a plugin does not read as a manifest; and it must not also deploy
//!   the candidates' directory;
//! - the **candidates'** Application must deploy `candidate.path` the same way, with automated
//!   sync that prunes and allows an empty result, because a candidate is removed by removing its
//!   manifest from git and only pruning deletes it from the cluster.
//!
//! Pure: the caller fetches the Application and says what Argo CD's discovery would find at a
//! path's root ([`Discovered`]); every problem found is returned at once, each naming the
//! Application, the field and the remedy.

use greenlight_argocd::model::{Application, ApplicationSource};
use greenlight_core::repo_url::RepoUrl;
use serde_json::Value;

/// What a source path's root holds, as Argo CD's discovery reads it when the source names no
/// type: a `Chart.yaml` makes it Helm, a `kustomization.yaml` (`.yml`, `Kustomization`)
/// Kustomize, anything else a plain directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Discovered {
    Directory,
    /// The tool and the file that makes it so (`Helm`, `Chart.yaml`).
    Tool(&'static str, String),
    /// The path's root could not be read from git (why).
    Unread(String),
}

/// Read Argo CD's discovery from the file names at a path's root.
pub fn discover<'a>(names: impl IntoIterator<Item = &'a str>) -> Discovered {
    let mut found = Discovered::Directory;
    for name in names {
        match name {
            "Chart.yaml" => found = Discovered::Tool("Helm", name.to_string()),
            "kustomization.yaml" | "kustomization.yml" | "Kustomization" => {
                return Discovered::Tool("Kustomize", name.to_string());
            }
            _ => {}
        }
    }
    found
}

/// Where the gate writes: the repository and branch it pushes to.
pub struct Target<'a> {
    pub repo: &'a RepoUrl,
    pub branch: &'a str,
    /// Whether `HEAD` on the remote is `branch` (an Application tracking `HEAD` follows it);
    /// `None` when the remote did not say.
    pub head_is_branch: Option<bool>,
}

/// What one Application check found: problems refuse the run, warnings are said and the run goes
/// on.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    pub problems: Vec<String>,
    pub warnings: Vec<String>,
}

/// Check the live Application: it deploys `manifest` as plain YAML from the target, and not
/// `candidate_dir`.
pub fn check_live(
    app: &Application,
    label: &str,
    manifest: &str,
    candidate_dir: &str,
    target: &Target<'_>,
    discovered: &dyn Fn(&str) -> Discovered,
) -> Findings {
    let mut f = Findings::default();
    let dir = parent(manifest);
    deploys_plainly(
        app,
        label,
        "live.manifest",
        manifest,
        dir,
        target,
        discovered,
        &mut f,
    );
    for (i, s) in sources(app) {
        if !target.repo.same_repo(&RepoUrl::new(s.repo_url.as_str())) || !s.chart.is_empty() {
            continue;
        }
        let Some(path) = source_path(&s.path) else {
            continue;
        };
        let cand = normal(candidate_dir);
        if covers(&path, &cand, recurse(s)) {
            f.problems.push(format!(
                "{label}: {} (path `{}`) also deploys candidate.path `{cand}`: the candidate would be deployed by the live Application too, and a promotion would remove it from there; give candidates a directory this Application does not read",
                field(i),
                shown(&path)
            ));
        }
    }
    if !automated(app) {
        f.warnings.push(format!(
            "{label} has no automated sync: the promotion commit deploys only when someone syncs it, and the watch trailer's deadline counts from then"
        ));
    }
    f
}

/// Check the candidates' Application: it deploys `candidate_dir` as plain YAML from the target,
/// with automated sync that prunes and allows an empty result. A refusal for want of prune never
/// calls enabling it safe: a prune deletes every live resource of the Application that git no
/// longer holds, which only Argo CD can list, so the remedy names the survey (for the config at
/// `config`) as the step before the command that enables it.
pub fn check_candidates(
    app: &Application,
    label: &str,
    candidate_dir: &str,
    config: &str,
    target: &Target<'_>,
    discovered: &dyn Fn(&str) -> Discovered,
) -> Findings {
    let mut f = Findings::default();
    let dir = normal(candidate_dir);
    let file = format!("{}/<workload>-candidate.yaml", shown(&dir));
    deploys_plainly(
        app,
        label,
        "candidate.path",
        &file,
        &dir,
        target,
        discovered,
        &mut f,
    );
    let enable = enable_command(app);
    let policy = app.spec.sync_policy.as_ref();
    let automated_on = automated(app);
    let prune = policy
        .and_then(|p| p.automated.as_ref())
        .and_then(|a| a.prune)
        .unwrap_or(false);
    let allow_empty = policy
        .and_then(|p| p.automated.as_ref())
        .and_then(|a| a.other.get("allowEmpty"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let first = format!(
        "pruning deletes whatever this Application has live that git no longer holds, not only removed candidates, so first list what Argo CD would delete: {}; then, once nothing listed must stay",
        survey_command(config)
    );
    if !automated_on {
        f.problems.push(format!(
            "{label} has no automated sync (spec.syncPolicy.automated): a candidate committed to git would not be deployed until someone syncs it, and a removed one would keep running; automated sync with prune and allowEmpty is needed, but {first}, enable it: {enable}"
        ));
    } else {
        if !prune {
            f.problems.push(format!(
                "{label} does not prune automatically (spec.syncPolicy.automated.prune is not true): a candidate is removed by removing its manifest from git, and only pruning deletes it from the cluster, so every removed candidate would keep running (and holding what it requested, GPUs included); {first}, enable it: {enable}"
            ));
        }
        if !allow_empty {
            f.problems.push(format!(
                "{label} does not allow an empty sync (spec.syncPolicy.automated.allowEmpty is not true): removing the last candidate leaves it nothing to deploy, Argo CD then refuses the sync (\"auto-sync will wipe out all resources\") and the candidate keeps running; allowing it lets a sync prune everything, so {first}, enable it: {enable}"
            ));
        }
    }
    f
}

/// The survey command for the config at `config`, quoted for a POSIX shell when it must be.
pub fn survey_command(config: &str) -> String {
    let plain = !config.is_empty()
        && config
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c));
    let quoted = if plain {
        config.to_string()
    } else {
        format!("'{}'", config.replace('\'', r"'\''"))
    };
    format!(
        "`greenlight promote prune-survey --config {quoted}` (with the --argocd-url and token flags of this run)"
    )
}

/// The source of `target.repo` that deploys `file` (in directory `dir`) as plain YAML, or a
/// problem saying why none does.
#[allow(clippy::too_many_arguments)]
fn deploys_plainly(
    app: &Application,
    label: &str,
    what: &str,
    file: &str,
    dir: &str,
    target: &Target<'_>,
    discovered: &dyn Fn(&str) -> Discovered,
    f: &mut Findings,
) {
    if app.spec.source_hydrator.is_some() {
        f.problems.push(format!(
            "{label} deploys what Argo CD's source hydrator writes (spec.sourceHydrator), not the branch the gate pushes to; point {what} at a path an Application deploys as it is"
        ));
        return;
    }
    let all: Vec<(Option<usize>, &ApplicationSource)> = sources(app).collect();
    if all.is_empty() {
        f.problems
            .push(format!("{label} has no source (spec.source)"));
        return;
    }
    let ours: Vec<&(Option<usize>, &ApplicationSource)> = all
        .iter()
        .filter(|(_, s)| target.repo.same_repo(&RepoUrl::new(s.repo_url.as_str())))
        .collect();
    if ours.is_empty() {
        let theirs: Vec<String> = all
            .iter()
            .map(|(_, s)| RepoUrl::new(s.repo_url.as_str()).redacted())
            .collect();
        f.problems.push(format!(
            "{label} deploys from {}, not from {}, where the gate writes {what}",
            theirs.join(", "),
            target.repo
        ));
        return;
    }
    // The source whose path holds the file's directory (the deepest, if several do).
    let holding = ours
        .iter()
        .filter(|(_, s)| s.chart.is_empty())
        .filter_map(|(i, s)| source_path(&s.path).map(|p| (*i, *s, p)))
        .filter(|(_, _, p)| covers(p, dir, true))
        .max_by_key(|(_, _, p)| p.len());
    let Some((i, s, path)) = holding else {
        let paths: Vec<String> = ours
            .iter()
            .map(|(i, s)| {
                if s.chart.is_empty() {
                    format!("{} path `{}`", field(*i), s.path)
                } else {
                    format!("{} chart `{}`", field(*i), s.chart)
                }
            })
            .collect();
        f.problems.push(format!(
            "{label} does not deploy {what} `{file}`: its source(s) of this repository are {}",
            paths.join(", ")
        ));
        return;
    };
    let name = field(i);
    let mut unread = Vec::new();
    let tool = explicit_tool(app, i, s, &path, discovered, &mut unread);
    f.warnings
        .extend(unread.into_iter().map(|w| format!("{label}: {w}")));
    if let Some(tool) = tool {
        f.problems.push(format!(
            "{label} renders {name} (path `{}`) with {tool}: the gate promotes by editing the image in {what} `{file}`, which {} does not apply as it is; give the gate a manifest an Application deploys as plain YAML (a directory source)",
            shown(&path),
            tool.split(' ').next().unwrap_or("it")
        ));
        return;
    }
    if path != dir && !recurse(s) {
        f.problems.push(format!(
            "{label}: {name} (path `{}`) does not recurse into subdirectories ({name}.directory.recurse is not true), so it does not deploy {what} `{file}`",
            shown(&path)
        ));
    }
    if let Some(d) = directory(s)
        && (nonempty(d.get("include")) || nonempty(d.get("exclude")))
    {
        f.warnings.push(format!(
            "{label}: {name}.directory has include/exclude patterns; greenlight does not read them: make sure they select {what} `{file}`"
        ));
    }
    let rev = s.target_revision.trim();
    let rev = rev.strip_prefix("refs/heads/").unwrap_or(rev);
    let tracks = match rev {
        "" | "HEAD" => match target.head_is_branch {
            Some(is) => is,
            None => {
                f.warnings.push(format!(
                    "{label}: {name} tracks HEAD and the remote did not say which branch that is; make sure it is `{}`, the branch the gate pushes to",
                    target.branch
                ));
                true
            }
        },
        r => r == target.branch,
    };
    if !tracks {
        f.problems.push(format!(
            "{label}: {name}.targetRevision is `{}`, but the gate pushes to the branch `{}`: what it commits would never reach this Application; run the gate with --branch {}",
            if rev.is_empty() { "HEAD" } else { rev },
            target.branch,
            if rev.is_empty() || rev == "HEAD" {
                "<the remote's default branch>"
            } else {
                rev
            }
        ));
    }
}

/// The tool a source renders with when it is not a plain directory: the type its spec names, the
/// type Argo CD reported, or what discovery finds at its path's root.
fn explicit_tool(
    app: &Application,
    i: Option<usize>,
    s: &ApplicationSource,
    path: &str,
    discovered: &dyn Fn(&str) -> Discovered,
    unread: &mut Vec<String>,
) -> Option<String> {
    if s.helm.is_some() {
        return Some("Helm (its spec has a `helm` block)".into());
    }
    if s.other.get("kustomize").is_some_and(|v| !v.is_null()) {
        return Some("Kustomize (its spec has a `kustomize` block)".into());
    }
    if s.plugin.is_some() {
        return Some("a config management plugin (its spec has a `plugin` block)".into());
    }
    let reported = match i {
        Some(i) => app.status.source_types.get(i).cloned().unwrap_or_default(),
        None => app.status.source_type.clone(),
    };
    if directory(s).is_some() {
        // An explicit directory block is Argo CD's own choice; discovery does not run.
        return None;
    }
    if !reported.is_empty() && reported != "Directory" {
        return Some(format!(
            "{reported} (Argo CD reports status.sourceType {reported})"
        ));
    }
    match discovered(path) {
        Discovered::Directory => None,
        Discovered::Tool(tool, file) => Some(format!(
            "{tool} (Argo CD finds `{}` at the path's root)",
            join(path, &file)
        )),
        Discovered::Unread(why) => {
            unread.push(format!(
                "cannot read `{}` in git to see what Argo CD discovers there ({why}): make sure it holds no Chart.yaml or kustomization.yaml",
                shown(path)
            ));
            None
        }
    }
}

/// `spec.sources[i]`, or `spec.source` (index `None`), as Argo CD reads them: a non-empty
/// `sources` wins.
fn sources(app: &Application) -> impl Iterator<Item = (Option<usize>, &ApplicationSource)> {
    let many = !app.spec.sources.is_empty();
    let multi = app
        .spec
        .sources
        .iter()
        .enumerate()
        .map(|(i, s)| (Some(i), s));
    let single = app.spec.source.iter().map(|s| (None, s));
    multi
        .chain(single.filter(move |_| !many))
        .collect::<Vec<_>>()
        .into_iter()
}

fn field(i: Option<usize>) -> String {
    match i {
        Some(i) => format!("spec.sources[{i}]"),
        None => "spec.source".into(),
    }
}

/// Whether the Application syncs automatically (`spec.syncPolicy.automated` present and not
/// `enabled: false`).
pub(crate) fn automated(app: &Application) -> bool {
    app.spec
        .sync_policy
        .as_ref()
        .and_then(|p| p.automated.as_ref())
        .is_some_and(|a| a.enabled != Some(false))
}

fn directory(s: &ApplicationSource) -> Option<&serde_json::Map<String, Value>> {
    s.other.get("directory").and_then(Value::as_object)
}

fn recurse(s: &ApplicationSource) -> bool {
    directory(s)
        .and_then(|d| d.get("recurse"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn nonempty(v: Option<&Value>) -> bool {
    v.and_then(Value::as_str)
        .is_some_and(|s| !s.trim().is_empty())
}

/// A source path, `/`-separated without `./` or trailing slashes (`""` is the root); `None` for
/// one that leaves the repository.
fn source_path(p: &str) -> Option<String> {
    let mut parts = Vec::new();
    for part in p.trim().split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            x => parts.push(x),
        }
    }
    Some(parts.join("/"))
}

fn normal(p: &str) -> String {
    source_path(p).unwrap_or_default()
}

/// Whether a source at `path` deploys files in `dir`: the same directory, or one below it when it
/// recurses.
fn covers(path: &str, dir: &str, recurse: bool) -> bool {
    path == dir || (recurse && (path.is_empty() || dir.starts_with(&format!("{path}/"))))
}

fn parent(file: &str) -> &str {
    file.rsplit_once('/').map_or("", |(d, _)| d)
}

fn shown(path: &str) -> &str {
    if path.is_empty() { "." } else { path }
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// The command that turns on what the candidates' Application needs, for the namespace and name
/// Argo CD reported.
fn enable_command(app: &Application) -> String {
    let ns = if app.metadata.namespace.is_empty() {
        "argocd"
    } else {
        app.metadata.namespace.as_str()
    };
    format!(
        "`kubectl -n {ns} patch application {} --type merge -p '{{\"spec\":{{\"syncPolicy\":{{\"automated\":{{\"prune\":true,\"allowEmpty\":true}}}}}}}}'` (or the same fields in the Application's manifest in git)",
        app.metadata.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn app(v: Value) -> Application {
        serde_json::from_value(v).unwrap()
    }

    const REPO: &str = "https://git.example.com/platform/deploy.git";

    fn target(repo: &RepoUrl) -> Target<'_> {
        Target {
            repo,
            branch: "main",
            head_is_branch: Some(true),
        }
    }

    fn plain(_: &str) -> Discovered {
        Discovered::Directory
    }

    fn candidates(policy: Value) -> Application {
        app(json!({
            "metadata": {"name": "web-candidates", "namespace": "argocd"},
            "spec": {
                "source": {"repoURL": REPO, "path": "deploy/candidates", "targetRevision": "HEAD"},
                "syncPolicy": policy,
            },
            "status": {"sourceType": "Directory"},
        }))
    }

    fn live(source: Value, status: Value) -> Application {
        app(json!({
            "metadata": {"name": "web-prod", "namespace": "argocd"},
            "spec": {"source": source, "syncPolicy": {"automated": {}}},
            "status": status,
        }))
    }

    #[test]
    fn a_candidates_application_that_prunes_and_allows_empty_passes() {
        let repo = RepoUrl::new(REPO);
        let a = candidates(json!({"automated": {"prune": true, "allowEmpty": true}}));
        let f = check_candidates(
            &a,
            "candidate.app",
            "deploy/candidates",
            "deploy/promote.yaml",
            &target(&repo),
            &plain,
        );
        assert_eq!(f, Findings::default());
    }

    #[test]
    fn a_candidates_application_without_prune_or_allow_empty_is_refused_with_the_remedy() {
        let repo = RepoUrl::new(REPO);
        let a = candidates(json!({"automated": {"selfHeal": true}}));
        let f = check_candidates(
            &a,
            "candidate.app",
            "deploy/candidates",
            "deploy/promote.yaml",
            &target(&repo),
            &plain,
        );
        assert_eq!(f.problems.len(), 2, "{f:?}");
        assert!(
            f.problems[0].contains("does not prune automatically"),
            "{f:?}"
        );
        assert!(
            f.problems[1].contains("does not allow an empty sync"),
            "{f:?}"
        );
        for p in &f.problems {
            let survey = p
                .find("greenlight promote prune-survey --config deploy/promote.yaml")
                .unwrap_or_else(|| panic!("{p}"));
            let enable = p
                .find("kubectl -n argocd patch application web-candidates")
                .unwrap_or_else(|| panic!("{p}"));
            assert!(survey < enable, "the survey comes first: {p}");
            assert!(p.contains(r#""prune":true,"allowEmpty":true"#), "{p}");
            assert!(!p.to_lowercase().contains("safe"), "{p}");
        }
        let off =
            candidates(json!({"automated": {"prune": true, "allowEmpty": true, "enabled": false}}));
        let f = check_candidates(
            &off,
            "candidate.app",
            "deploy/candidates",
            "deploy/promote.yaml",
            &target(&repo),
            &plain,
        );
        assert!(f.problems[0].contains("has no automated sync"), "{f:?}");
        let manual = candidates(json!(null));
        let f = check_candidates(
            &manual,
            "candidate.app",
            "deploy/candidates",
            "deploy/promote.yaml",
            &target(&repo),
            &plain,
        );
        assert!(f.problems[0].contains("has no automated sync"), "{f:?}");
    }

    #[test]
    fn a_live_application_deploys_the_manifest_as_plain_yaml_or_is_refused() {
        let repo = RepoUrl::new(REPO);
        let t = target(&repo);
        let check = |a: &Application, d: &dyn Fn(&str) -> Discovered| {
            check_live(
                a,
                "live.app",
                "deploy/prod/web.yaml",
                "deploy/candidates",
                &t,
                d,
            )
        };
        let ok = live(
            json!({"repoURL": "git@git.example.com:platform/deploy.git", "path": "deploy/prod/", "targetRevision": "main"}),
            json!({"sourceType": "Directory"}),
        );
        assert_eq!(check(&ok, &plain), Findings::default());

        let helm = live(
            json!({"repoURL": REPO, "path": "deploy/prod", "helm": {"valueFiles": ["values.yaml"]}}),
            json!({"sourceType": "Helm"}),
        );
        let f = check(&helm, &plain);
        assert!(
            f.problems[0].contains("with Helm (its spec has a `helm` block)"),
            "{f:?}"
        );

        let reported = live(
            json!({"repoURL": REPO, "path": "deploy/prod"}),
            json!({"sourceType": "Kustomize"}),
        );
        let f = check(&reported, &plain);
        assert!(
            f.problems[0].contains("Argo CD reports status.sourceType Kustomize"),
            "{f:?}"
        );

        // Not compared yet: what Argo CD's discovery will find in git decides.
        let fresh = live(json!({"repoURL": REPO, "path": "deploy/prod"}), json!({}));
        let f = check(&fresh, &|p: &str| {
            assert_eq!(p, "deploy/prod");
            discover(["web.yaml", "kustomization.yaml"])
        });
        assert!(
            f.problems[0].contains("Argo CD finds `deploy/prod/kustomization.yaml`"),
            "{f:?}"
        );

        let shallow = live(
            json!({"repoURL": REPO, "path": "deploy"}),
            json!({"sourceType": "Directory"}),
        );
        let f = check(&shallow, &plain);
        assert!(
            f.problems[0].contains("does not recurse into subdirectories"),
            "{f:?}"
        );

        let elsewhere = live(json!({"repoURL": REPO, "path": "apps/web"}), json!({}));
        let f = check(&elsewhere, &plain);
        assert!(
            f.problems[0].contains("does not deploy live.manifest `deploy/prod/web.yaml`"),
            "{f:?}"
        );

        let other_repo = live(
            json!({"repoURL": "https://git.example.com/other.git", "path": "deploy/prod"}),
            json!({}),
        );
        let f = check(&other_repo, &plain);
        assert!(
            f.problems[0].contains("deploys from https://git.example.com/other.git"),
            "{f:?}"
        );

        let branch = live(
            json!({"repoURL": REPO, "path": "deploy/prod", "targetRevision": "release"}),
            json!({}),
        );
        let f = check(&branch, &plain);
        assert!(
            f.problems[0]
                .contains("targetRevision is `release`, but the gate pushes to the branch `main`"),
            "{f:?}"
        );
    }

    #[test]
    fn a_live_application_that_also_deploys_the_candidates_is_refused() {
        let repo = RepoUrl::new(REPO);
        let t = target(&repo);
        let wide = live(
            json!({"repoURL": REPO, "path": "deploy", "directory": {"recurse": true}}),
            json!({"sourceType": "Directory"}),
        );
        let f = check_live(
            &wide,
            "live.app",
            "deploy/prod/web.yaml",
            "deploy/candidates",
            &t,
            &plain,
        );
        assert_eq!(f.problems.len(), 1, "{f:?}");
        assert!(
            f.problems[0].contains("also deploys candidate.path `deploy/candidates`"),
            "{f:?}"
        );
        let f = check_live(
            &wide,
            "live.app",
            "deploy/prod/web.yaml",
            "other/candidates",
            &t,
            &plain,
        );
        assert_eq!(f, Findings::default());
    }

    #[test]
    fn a_multi_source_application_is_read_by_the_source_of_this_repository() {
        let repo = RepoUrl::new(REPO);
        let t = target(&repo);
        let multi = app(json!({
            "metadata": {"name": "web-prod"},
            "spec": {
                "source": {"repoURL": REPO, "path": "ignored", "helm": {}},
                "sources": [
                    {"repoURL": "https://charts.example.com", "chart": "redis", "targetRevision": "1.0.0"},
                    {"repoURL": REPO, "path": "deploy/prod", "targetRevision": "HEAD"},
                ],
                "syncPolicy": {"automated": {"prune": true}},
            },
            "status": {"sourceTypes": ["Helm", "Directory"]},
        }));
        let f = check_live(
            &multi,
            "live.app",
            "deploy/prod/web.yaml",
            "deploy/candidates",
            &t,
            &plain,
        );
        assert_eq!(f, Findings::default());
    }

    #[test]
    fn a_path_git_cannot_list_is_a_warning_not_a_quiet_directory() {
        let repo = RepoUrl::new(REPO);
        let t = target(&repo);
        let fresh = live(json!({"repoURL": REPO, "path": "deploy/prod"}), json!({}));
        let f = check_live(
            &fresh,
            "live.app",
            "deploy/prod/web.yaml",
            "deploy/candidates",
            &t,
            &|_: &str| Discovered::Unread("git ls-tree failed".into()),
        );
        assert!(f.problems.is_empty(), "{f:?}");
        assert!(
            f.warnings[0].contains("cannot read `deploy/prod` in git")
                && f.warnings[0].contains("git ls-tree failed"),
            "{f:?}"
        );
    }

    #[test]
    fn the_survey_command_is_quoted_for_a_shell_when_it_must_be() {
        assert!(survey_command("deploy/promote.yaml").contains("--config deploy/promote.yaml`"));
        assert!(survey_command("my dir/it's.yaml").contains(r"--config 'my dir/it'\''s.yaml'`"));
    }

    #[test]
    fn discovery_reads_a_paths_root_as_argo_cd_does() {
        assert_eq!(discover(["a.yaml", "b.yml"]), Discovered::Directory);
        assert_eq!(
            discover(["Chart.yaml", "values.yaml"]),
            Discovered::Tool("Helm", "Chart.yaml".into())
        );
        assert_eq!(
            discover(["Kustomization"]),
            Discovered::Tool("Kustomize", "Kustomization".into())
        );
    }
}
