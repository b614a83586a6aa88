//! The reduction: one Argo CD Application (and, when needed, its resource tree) becomes the
//! [`AppSnapshot`] the judge reads. This is where Argo CD's facts are respected — which revisions
//! were actually applied, which source is the watched repository, where per-resource health
//! lives, when health is stale. It must never decide a verdict, and never call out: it is a pure
//! function of the JSON it is given.

use crate::model::{Application, ApplicationSource, ComparedTo, ResourceStatus, ResourceTree};
use greenlight_core::snapshot::{
    AppSnapshot, Health, OperationFacts, ReachCandidate, ReachVia, ResourceHealthSource,
    SourceFacts, SourcePaths, UnhealthyResource,
};
use greenlight_core::time::Timestamp;
use std::collections::BTreeSet;

/// The annotation with which an app declares which repository paths its manifests depend on.
pub const MANIFEST_GENERATE_PATHS: &str = "argocd.argoproj.io/manifest-generate-paths";

/// Reduce an Application to what the judge reads. `repo_url` is the watched repository, in any
/// of the spellings [`normalize_repo_url`] accepts. `tree` is only consulted when the
/// Application carries no per-resource health (see [`needs_resource_tree`]).
pub fn snapshot(app: &Application, tree: Option<&ResourceTree>, repo_url: &str) -> AppSnapshot {
    let repo = normalize_repo_url(repo_url);
    let status = &app.status;
    let spec = layout(app.spec.source.as_ref(), &app.spec.sources);

    let op = status.operation_state.as_ref();
    let operation_running = app.operation.as_ref().is_some_and(|v| !v.is_null())
        || op.is_some_and(|o| matches!(o.phase.as_str(), "Running" | "Terminating"));

    let sync_revs = spec.as_ref().map_or_else(Vec::new, |spec| {
        record_revisions(
            status.sync.compared_to.as_ref().and_then(compared_layout),
            spec,
            &status.sync.revision,
            &status.sync.revisions,
            &repo,
        )
    });
    let result_revs = match (op.and_then(|o| o.sync_result.as_ref()), spec.as_ref()) {
        (Some(r), Some(spec)) => record_revisions(
            layout(r.source.as_ref(), &r.sources),
            spec,
            &r.revision,
            &r.revisions,
            &repo,
        ),
        _ => Vec::new(),
    };

    let mut reach_candidates = Vec::new();
    let mut push = |revision: &str, via: ReachVia| {
        let c = ReachCandidate {
            revision: revision.to_string(),
            via,
        };
        if !reach_candidates.contains(&c) {
            reach_candidates.push(c);
        }
    };
    if let Some(o) = op {
        match o.phase.as_str() {
            "Succeeded" => result_revs
                .iter()
                .for_each(|r| push(r, ReachVia::OperationSucceeded)),
            "Failed" | "Error" => result_revs.iter().for_each(|r| {
                push(
                    r,
                    ReachVia::OperationFailed {
                        phase: o.phase.clone(),
                        message: o.message.clone(),
                    },
                )
            }),
            // Running/Terminating: the result is partial; nothing is known to be applied yet.
            _ => {}
        }
    }
    // While OutOfSync, `sync.revision` is only what Argo CD compared against: never reach.
    if status.sync.status == "Synced" && !operation_running {
        sync_revs
            .iter()
            .for_each(|r| push(r, ReachVia::SyncedRevision));
    }
    let mut history_revs = Vec::new();
    if let Some(spec) = spec.as_ref() {
        for h in &status.history {
            let revs = record_revisions(
                layout(h.source.as_ref(), &h.sources),
                spec,
                &h.revision,
                &h.revisions,
                &repo,
            );
            for r in revs {
                push(&r, ReachVia::History { id: h.id });
                history_revs.push(r);
            }
        }
    }

    let source = match spec.as_ref() {
        None => SourceFacts::NotFromRepo { repos: Vec::new() },
        Some(spec) => {
            let watched: Vec<&ApplicationSource> = spec
                .sources()
                .into_iter()
                .filter(|s| same_repo(s, &repo))
                .collect();
            if watched.is_empty() {
                let mut repos: Vec<String> = Vec::new();
                for s in spec.sources() {
                    let shown = redact_url(&s.repo_url);
                    if !repos.contains(&shown) {
                        repos.push(shown);
                    }
                }
                SourceFacts::NotFromRepo { repos }
            } else {
                let mut revisions: Vec<String> = Vec::new();
                for r in sync_revs.iter().chain(&result_revs).chain(&history_revs) {
                    if !revisions.contains(r) {
                        revisions.push(r.clone());
                    }
                }
                SourceFacts::FromRepo {
                    target_revisions: watched.iter().map(|s| s.target_revision.clone()).collect(),
                    chart: watched
                        .iter()
                        .find(|s| !s.chart.is_empty())
                        .map(|s| s.chart.clone()),
                    revisions,
                    paths: source_paths(app, spec, &repo),
                }
            }
        }
    };

    // The revision is what the operation applied (`syncResult`), never what it was asked for:
    // a sync started from the UI or CLI requests `HEAD` or a branch name, which is not a commit.
    let last_operation = op.map(|o| OperationFacts {
        phase: o.phase.clone(),
        message: o.message.clone(),
        revision: result_revs.first().cloned().unwrap_or_default(),
        started_at: Timestamp::parse_rfc3339(&o.started_at),
        finished_at: Timestamp::parse_rfc3339(&o.finished_at),
    });

    let (unhealthy_resources, resource_health_source) = unhealthy_resources(app, tree);

    // Health and operations are separate controller loops: health computed before the last
    // operation finished describes the cluster before that sync.
    let reconciled = Timestamp::parse_rfc3339(&status.reconciled_at);
    let finished = op.and_then(|o| Timestamp::parse_rfc3339(&o.finished_at));
    let health_stale = matches!((reconciled, finished), (Some(r), Some(f)) if r < f);

    let automated_sync = app
        .spec
        .sync_policy
        .as_ref()
        .and_then(|p| p.automated.as_ref())
        .is_some_and(|a| a.enabled != Some(false));

    AppSnapshot {
        namespace: app.metadata.namespace.clone(),
        name: app.metadata.name.clone(),
        source,
        sync_status: status.sync.status.clone(),
        sync_revision: sync_revs.first().cloned().unwrap_or_default(),
        health: Health::parse(&status.health.status),
        health_message: status.health.message.clone(),
        operation_running,
        last_operation,
        unhealthy_resources,
        resource_health_source,
        health_stale,
        automated_sync,
        reach_candidates,
    }
}

/// Whether per-resource health must come from the resource tree: Argo CD ≥ 3.0 says so with
/// `resourceHealthSource: appTree`; an Application whose managed resources carry no health at all
/// (an unknown future value, a stand-in that omits the field) is read the same way.
///
/// With inline health, Argo CD leaves health off hooks and `ignore-healthcheck` resources on
/// purpose; consulting the tree then would bring their health back, so it is not consulted.
pub fn needs_resource_tree(app: &Application) -> bool {
    match app.status.resource_health_source.as_str() {
        "appTree" => true,
        _ => {
            let mut managed = managed_resources(app).peekable();
            managed.peek().is_some() && managed.all(|r| health_status(r).is_none())
        }
    }
}

fn managed_resources(app: &Application) -> impl Iterator<Item = &ResourceStatus> {
    app.status.resources.iter().filter(|r| !r.hook)
}

fn health_status(r: &ResourceStatus) -> Option<&str> {
    r.health
        .as_ref()
        .map(|h| h.status.as_str())
        .filter(|s| !s.is_empty())
}

fn is_unhealthy(h: Health) -> bool {
    matches!(h, Health::Degraded | Health::Missing)
}

/// Top-level managed resources that are Degraded or Missing, and where that was read.
///
/// Limitation: neither `status.resources[]` nor the resource tree carries annotations, so an
/// `argocd.argoproj.io/ignore-healthcheck: "true"` resource is only left out when Argo CD itself
/// left its health out (inline health). From the tree its health counts like any other.
/// A managed resource absent from the tree is not counted: Argo CD lists missing resources in
/// the tree as Missing nodes, and a missing resource also keeps the app OutOfSync.
fn unhealthy_resources(
    app: &Application,
    tree: Option<&ResourceTree>,
) -> (Vec<UnhealthyResource>, ResourceHealthSource) {
    let mut out = Vec::new();
    if !needs_resource_tree(app) {
        for r in managed_resources(app) {
            let Some(h) = &r.health else { continue };
            let health = Health::parse(&h.status);
            if !h.status.is_empty() && is_unhealthy(health) {
                out.push(unhealthy(r, health, &h.message));
            }
        }
        return (out, ResourceHealthSource::Application);
    }
    let Some(tree) = tree else {
        return (out, ResourceHealthSource::Unavailable);
    };
    for r in managed_resources(app) {
        let node = tree.nodes.iter().find(|n| {
            n.group == r.group && n.kind == r.kind && n.namespace == r.namespace && n.name == r.name
        });
        let Some(h) = node.and_then(|n| n.health.as_ref()) else {
            continue;
        };
        let health = Health::parse(&h.status);
        if !h.status.is_empty() && is_unhealthy(health) {
            out.push(unhealthy(r, health, &h.message));
        }
    }
    (out, ResourceHealthSource::ResourceTree)
}

fn unhealthy(r: &ResourceStatus, health: Health, message: &str) -> UnhealthyResource {
    UnhealthyResource {
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
        health,
        message: message.to_string(),
    }
}

/// How a record (the spec, a sync result, a history entry, a comparison) lists its sources.
enum Layout<'a> {
    Single(&'a ApplicationSource),
    Multi(&'a [ApplicationSource]),
}

impl<'a> Layout<'a> {
    fn sources(&self) -> Vec<&'a ApplicationSource> {
        match self {
            Layout::Single(s) => vec![*s],
            Layout::Multi(v) => v.iter().collect(),
        }
    }
}

/// Argo CD's rule: a non-empty `sources` wins over `source`.
fn layout<'a>(
    source: Option<&'a ApplicationSource>,
    sources: &'a [ApplicationSource],
) -> Option<Layout<'a>> {
    if !sources.is_empty() {
        Some(Layout::Multi(sources))
    } else {
        source
            .filter(|s| !s.repo_url.is_empty())
            .map(Layout::Single)
    }
}

fn compared_layout(c: &ComparedTo) -> Option<Layout<'_>> {
    layout(c.source.as_ref(), &c.sources)
}

fn same_repo(s: &ApplicationSource, normalized_repo: &str) -> bool {
    !s.repo_url.is_empty() && normalize_repo_url(&s.repo_url) == normalized_repo
}

/// The revisions a record reports for the watched repository's source(s). A record that names
/// its own sources is read by those (its `revisions[]` follow its own order, which may predate
/// today's spec); otherwise by the spec's.
fn record_revisions(
    own: Option<Layout<'_>>,
    spec: &Layout<'_>,
    single: &str,
    multi: &[String],
    repo: &str,
) -> Vec<String> {
    let revs: Vec<String> = match own.as_ref().unwrap_or(spec) {
        Layout::Single(s) if same_repo(s, repo) => vec![single.to_string()],
        Layout::Single(_) => Vec::new(),
        Layout::Multi(sources) => sources
            .iter()
            .enumerate()
            .filter(|(_, s)| same_repo(s, repo))
            .filter_map(|(i, _)| multi.get(i).cloned())
            .collect(),
    };
    let mut out: Vec<String> = Vec::new();
    for r in revs.into_iter().filter(|r| !r.is_empty()) {
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

/// The repository paths that decide what this app deploys, for attribution. Union over every
/// source from the watched repository, plus `$ref` value files of any source that point into it.
///
/// Limitation: Kustomize overlays may read `../base` outside the source path; greenlight cannot
/// see that without rendering, so such apps should declare `manifest-generate-paths`.
fn source_paths(app: &Application, spec: &Layout<'_>, repo: &str) -> SourcePaths {
    match collect_source_paths(app, spec, repo) {
        Ok(set) if set.contains("") => SourcePaths::Known(vec![String::new()]),
        Ok(set) => SourcePaths::Known(set.into_iter().collect()),
        Err(why) => SourcePaths::Unknown { why },
    }
}

fn collect_source_paths(
    app: &Application,
    spec: &Layout<'_>,
    repo: &str,
) -> Result<BTreeSet<String>, String> {
    let sources = spec.sources();
    let multi = matches!(spec, Layout::Multi(_));
    let label = |i: usize| {
        if multi {
            format!("spec.sources[{i}]")
        } else {
            "spec.source".to_string()
        }
    };
    let source_type = |i: usize| {
        if multi {
            app.status
                .source_types
                .get(i)
                .map(String::as_str)
                .unwrap_or("")
        } else {
            app.status.source_type.as_str()
        }
    };
    let watched_refs: BTreeSet<&str> = sources
        .iter()
        .filter(|s| !s.ref_name.is_empty() && same_repo(s, repo))
        .map(|s| s.ref_name.as_str())
        .collect();
    let all_refs: BTreeSet<&str> = sources
        .iter()
        .filter(|s| !s.ref_name.is_empty())
        .map(|s| s.ref_name.as_str())
        .collect();
    let annotation = app.metadata.annotations.get(MANIFEST_GENERATE_PATHS);

    let mut out = BTreeSet::new();
    for (i, s) in sources.iter().enumerate() {
        let watched = same_repo(s, repo);
        let files: Vec<&str> = s
            .helm
            .iter()
            .flat_map(|h| {
                h.value_files
                    .iter()
                    .map(String::as_str)
                    .chain(h.file_parameters.iter().map(|p| p.path.as_str()))
            })
            .filter(|f| !f.trim().is_empty())
            .collect();
        if !watched {
            // Another repository's source (a Helm chart, say) may still read value files from
            // ours through `$ref`; its plain value files live in its own repository.
            for f in files.iter().filter(|f| f.starts_with('$')) {
                if let Some(p) = ref_value_file(f, &label(i), &watched_refs, &all_refs)? {
                    out.insert(p);
                }
            }
            continue;
        }
        if s.plugin.is_some() || source_type(i) == "Plugin" {
            return Err(format!(
                "{} is rendered by a config management plugin, which may read any file",
                label(i)
            ));
        }
        if !s.chart.is_empty() {
            return Err(format!(
                "{} is a Helm repository chart ({}), not a path in git",
                label(i),
                s.chart
            ));
        }
        // A ref-only source renders nothing; it only lends its files to `$ref` value files.
        if !s.ref_name.is_empty() && s.path.trim().is_empty() {
            continue;
        }
        let base = normalize_path(&s.path).ok_or_else(|| {
            format!(
                "{} path {:?} points outside the repository",
                label(i),
                s.path
            )
        })?;
        out.insert(base.clone());
        if let Some(ann) = annotation {
            for part in ann.split(';').map(str::trim).filter(|p| !p.is_empty()) {
                let p = if let Some(abs) = part.strip_prefix('/') {
                    normalize_path(abs)
                } else {
                    normalize_path(&join(&base, part))
                };
                out.insert(p.ok_or_else(|| {
                    format!("annotation {MANIFEST_GENERATE_PATHS} entry {part:?} points outside the repository")
                })?);
            }
        }
        for f in files {
            if f.starts_with('$') {
                if let Some(p) = ref_value_file(f, &label(i), &watched_refs, &all_refs)? {
                    out.insert(p);
                }
                continue;
            }
            if f.contains("://") {
                return Err(format!(
                    "{} value file {:?} is a URL",
                    label(i),
                    redact_url(f)
                ));
            }
            let joined = match f.strip_prefix('/') {
                Some(abs) => abs.to_string(),
                None => join(&base, f),
            };
            let p = normalize_path(&glob_prefix(&joined)).ok_or_else(|| {
                format!(
                    "{} value file {f:?} points outside the repository",
                    label(i)
                )
            })?;
            out.insert(p);
        }
    }
    Ok(out)
}

/// `$values/envs/prod.yaml`: a path from the root of the source whose `ref` is `values`.
/// `Ok(None)` when that source is another repository.
fn ref_value_file(
    f: &str,
    label: &str,
    watched_refs: &BTreeSet<&str>,
    all_refs: &BTreeSet<&str>,
) -> Result<Option<String>, String> {
    let body = &f[1..];
    let (name, rest) = body.split_once('/').unwrap_or((body, ""));
    if watched_refs.contains(name) {
        normalize_path(&glob_prefix(rest))
            .map(Some)
            .ok_or_else(|| format!("{label} value file {f:?} points outside the repository"))
    } else if all_refs.contains(name) {
        Ok(None)
    } else {
        Err(format!(
            "{label} value file {f:?} names ${name}, which no source defines as its ref"
        ))
    }
}

fn join(base: &str, rel: &str) -> String {
    if base.is_empty() {
        rel.to_string()
    } else {
        format!("{base}/{rel}")
    }
}

/// Value files may be glob patterns; everything under the directory before the first wildcard
/// may match.
fn glob_prefix(p: &str) -> String {
    match p.find(['*', '?', '[']) {
        None => p.to_string(),
        Some(i) => p[..i]
            .rsplit_once('/')
            .map_or(String::new(), |(dir, _)| dir.to_string()),
    }
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

/// One spelling for one repository, so that the watched repository can be recognized in an
/// Application however either side wrote it:
/// `git@github.com:Org/R.git`, `ssh://git@github.com:22/org/r`, `https://user@GitHub.com/org/r/`
/// all become `github.com/org/r`. Schemes (https, http, ssh, git, git+ssh), user info, ports and
/// a trailing `.git` or `/` are dropped; host and path are lowercased for network URLs (as Argo
/// CD's own URL comparison does: GitHub and most hosts treat paths case-insensitively).
/// Local repositories (`file:///srv/r.git`, `/srv/r`) become `file:///srv/r`, case kept.
/// Ports are dropped because the same repository is served on different ports per scheme.
pub fn normalize_repo_url(url: &str) -> String {
    let u = url.trim();
    let local = |path: &str| {
        let trimmed = strip_git_suffix(path);
        let norm = normalize_path(trimmed).unwrap_or_else(|| trimmed.trim_matches('/').to_string());
        format!("file:///{norm}")
    };
    if let Some(rest) = u.strip_prefix("file://") {
        // `file:///srv/r`, or `file://localhost/srv/r`.
        let path = rest.strip_prefix("localhost").unwrap_or(rest);
        return local(path);
    }
    if let Some((scheme, rest)) = u.split_once("://")
        && !scheme.is_empty()
        && scheme
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'+')
    {
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        return network(authority, path);
    }
    if u.starts_with('/') || u.starts_with('.') {
        return local(u);
    }
    // scp-like `[user@]host:path`: a colon before any slash.
    if let Some((host, path)) = u.split_once(':')
        && !host.contains('/')
        && !host.is_empty()
    {
        return network(host, path);
    }
    local(u)
}

/// A repository URL fit for events and logs: a password, or any user info of an http(s) URL
/// (where tokens travel as the user name), becomes `***`. `ssh://git@host` and scp-style
/// `git@host:org/r` name an account, not a secret, and stay as written.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_string();
    };
    let userinfo = &rest[..at];
    let web = matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https");
    if web || userinfo.contains(':') {
        format!("{scheme}://***@{}", &rest[at + 1..])
    } else {
        url.to_string()
    }
}

fn network(authority: &str, path: &str) -> String {
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        // An IPv6 literal: `[::1]:22`.
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => host_port.split(':').next().unwrap_or(host_port),
    };
    let path = normalize_path(strip_git_suffix(path)).unwrap_or_default();
    format!("{}/{}", host.to_ascii_lowercase(), path.to_lowercase())
}

fn strip_git_suffix(p: &str) -> &str {
    let p = p.trim_end_matches('/');
    p.strip_suffix(".git").unwrap_or(p).trim_end_matches('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_url_spellings_of_one_repository_agree() {
        let same = [
            "https://github.com/org/repo",
            "https://github.com/org/repo.git",
            "https://github.com/org/repo/",
            "https://github.com/org/repo.git/",
            "http://github.com/org/repo",
            "https://GitHub.COM/org/repo",
            "https://github.com/Org/Repo",
            "https://user:secret@github.com/org/repo.git",
            "https://github.com:443/org/repo",
            "git@github.com:org/repo.git",
            "git@github.com:org/repo",
            "github.com:org/repo",
            "git@github.com:/org/repo.git",
            "ssh://git@github.com/org/repo.git",
            "ssh://git@github.com:22/org/repo",
            "git+ssh://git@github.com/org/repo",
            "git://github.com/org/repo.git",
            "  https://github.com/org/repo  ",
        ];
        for u in same {
            assert_eq!(normalize_repo_url(u), "github.com/org/repo", "{u}");
        }
    }

    #[test]
    fn different_repositories_stay_different() {
        let distinct = [
            "https://github.com/org/repo",
            "https://github.com/org/repo2",
            "https://github.com/other/repo",
            "https://gitlab.com/org/repo",
            "https://github.com/org/repo/sub",
            "https://github.com/org",
            "file:///org/repo",
            "/srv/git/repo",
        ];
        let normalized: BTreeSet<String> = distinct.iter().map(|u| normalize_repo_url(u)).collect();
        assert_eq!(normalized.len(), distinct.len(), "{normalized:?}");
    }

    #[test]
    fn local_paths_and_file_urls_agree() {
        for u in [
            "/srv/git/app.git",
            "/srv/git/app",
            "/srv/git/app/",
            "/srv/git/./app.git/",
            "/srv/git/x/../app",
            "file:///srv/git/app.git",
            "file:///srv/git/app",
            "file://localhost/srv/git/app",
        ] {
            assert_eq!(normalize_repo_url(u), "file:///srv/git/app", "{u}");
        }
        // Local paths keep their case: file systems are case-sensitive.
        assert_ne!(
            normalize_repo_url("/srv/Git/app"),
            normalize_repo_url("/srv/git/app")
        );
    }

    #[test]
    fn ipv6_hosts_and_gitlab_subgroups() {
        assert_eq!(
            normalize_repo_url("ssh://git@[::1]:2222/org/r.git"),
            "::1/org/r"
        );
        assert_eq!(normalize_repo_url("https://[::1]/org/r"), "::1/org/r");
        assert_eq!(
            normalize_repo_url("git@gitlab.example.com:group/sub/r.git"),
            normalize_repo_url("https://gitlab.example.com/group/sub/r")
        );
    }

    #[test]
    fn credentials_in_repo_urls_are_redacted() {
        assert_eq!(
            redact_url("https://ghp_abc123@github.com/org/r.git"),
            "https://***@github.com/org/r.git"
        );
        assert_eq!(
            redact_url("https://user:pw@github.com/org/r"),
            "https://***@github.com/org/r"
        );
        assert_eq!(
            redact_url("ssh://git:pw@host/org/r"),
            "ssh://***@host/org/r"
        );
        for kept in [
            "ssh://git@host/org/r",
            "git@github.com:org/r.git",
            "https://github.com/org/r",
            "https://github.com/org/r@v1",
            "/srv/git/r",
        ] {
            assert_eq!(redact_url(kept), kept);
        }
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
        assert_eq!(glob_prefix("envs/*.yaml"), "envs");
        assert_eq!(glob_prefix("*.yaml"), "");
        assert_eq!(glob_prefix("envs/prod.yaml"), "envs/prod.yaml");
    }
}
