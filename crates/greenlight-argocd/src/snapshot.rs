//! The reduction: one Argo CD Application (and, when needed, its resource tree) becomes the
//! [`AppSnapshot`] the judge reads. This is where Argo CD's facts are respected — which revisions
//! were actually applied, which source is the watched repository, where per-resource health
//! lives, when health is stale. It must never decide a verdict, and never call out: it is a pure
//! function of the JSON it is given.

use crate::model::{
    Application, ApplicationSource, ComparedTo, ManagedResources, OperationState, ResourceResult,
    ResourceStatus, ResourceTree,
};
use greenlight_core::paths::normalize_path;
use greenlight_core::repo_url::RepoUrl;
use greenlight_core::snapshot::{
    AppSnapshot, ComparedElsewhere, Glimpse, Health, OperationFacts, ReachCandidate, ReachVia,
    ResourceHealthSource, ResourceView, SourceFacts, SourcePaths, UnhealthyResource, digest,
    is_git_sha,
};
use greenlight_core::time::Timestamp;
use std::collections::{BTreeMap, BTreeSet};

/// The annotation with which an app declares which repository paths its manifests depend on.
pub const MANIFEST_GENERATE_PATHS: &str = "argocd.argoproj.io/manifest-generate-paths";

/// What the judge keeps of an app no watch follows: its health, revision, whether it is
/// syncing, and what was not clean (its chronic resources and failed PostSync hooks).
pub fn glimpse(app: &Application, repo_url: &str) -> Glimpse {
    let s = snapshot(app, None, repo_url);
    Glimpse {
        chronic: s.chronic(),
        health: s.health,
        sync_revision: s.sync_revision,
        operation_running: s.operation_running,
        last_operation_phase: s.last_operation.as_ref().map(|o| o.phase.clone()),
        last_operation_revision: s.last_operation.as_ref().map(|o| o.revision.clone()),
        sync_status: s.sync_status,
        source_paths: match s.source {
            SourceFacts::FromRepo { paths, .. } => Some(paths),
            SourceFacts::NotFromRepo { .. } => None,
        },
    }
}

/// Reduce an Application to what the judge reads. `repo_url` is the watched repository, in any
/// of the spellings [`RepoUrl::same_repo`] equates. `tree` is only consulted when the
/// Application carries no per-resource health (see [`needs_resource_tree`]).
pub fn snapshot(app: &Application, tree: Option<&ResourceTree>, repo_url: &str) -> AppSnapshot {
    let repo = RepoUrl::new(repo_url);
    let status = &app.status;
    let spec = layout(app.spec.source.as_ref(), &app.spec.sources);

    // What Argo CD reports before it resolved a revision: the requested `HEAD` or branch.
    let unresolved = unresolved_names(spec.as_ref(), &repo);
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
            &unresolved,
        )
    });
    let result_revs = match (op.and_then(|o| o.sync_result.as_ref()), spec.as_ref()) {
        (Some(r), Some(spec)) => record_revisions(
            layout(r.source.as_ref(), &r.sources),
            spec,
            &r.revision,
            &r.revisions,
            &repo,
            &unresolved,
        ),
        _ => Vec::new(),
    };
    let requested = op
        .and_then(|o| o.operation.as_ref())
        .and_then(|o| o.sync.as_ref());
    let dry_run = requested.is_some_and(|s| s.dry_run);
    let partial = requested.is_some_and(|s| !s.resources.is_empty());

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
    // A dry run or a partial sync ends `Succeeded` without applying the revision: neither its
    // success nor its failure says anything about the commit as a whole.
    if let Some(o) = op.filter(|_| !dry_run && !partial) {
        match o.phase.as_str() {
            "Succeeded" => result_revs
                .iter()
                .for_each(|r| push(r, ReachVia::OperationSucceeded)),
            "Failed" | "Error" => {
                let via = match post_sync_failures(o) {
                    Some(hooks) => ReachVia::PostSyncHookFailed {
                        phase: o.phase.clone(),
                        message: o.message.clone(),
                        hooks,
                    },
                    None => ReachVia::OperationFailed {
                        phase: o.phase.clone(),
                        message: o.message.clone(),
                    },
                };
                result_revs.iter().for_each(|r| push(r, via.clone()))
            }
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
                &unresolved,
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
                    let shown = RepoUrl::new(s.repo_url.as_str()).redacted();
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
        dry_run,
        partial,
    });

    let (unhealthy_resources, resource_health_source) = unhealthy_resources(app, tree);
    let resources = resource_views(app, tree);

    // Health and operations are separate controller loops: health computed before the last
    // operation finished describes the cluster before that sync.
    let reconciled = Timestamp::parse_rfc3339(&status.reconciled_at);
    let finished = op.and_then(|o| Timestamp::parse_rfc3339(&o.finished_at));
    // Both are whole seconds and `reconciledAt` is a reconcile's start: equal, the reconcile may
    // have begun before the operation ended (Argo CD publishes `Succeeded` with the previous
    // reconcile's sync and health). Whether it did is for git to say, when the two revisions differ.
    let health_stale = matches!((reconciled, finished), (Some(r), Some(f)) if r < f);
    let compared_elsewhere = match (reconciled, finished, sync_revs.first(), result_revs.first()) {
        (Some(r), Some(f), Some(compared), Some(applied))
            if r == f
                && op.is_some_and(|o| o.phase == "Succeeded")
                && compared != applied
                && is_git_sha(compared)
                && is_git_sha(applied) =>
        {
            Some(ComparedElsewhere {
                applied: applied.clone(),
                compared: compared.clone(),
            })
        }
        _ => None,
    };
    let comparison_error = status
        .conditions
        .iter()
        .find(|c| c.kind == "ComparisonError")
        .map(|c| c.message.clone());
    let source_hydrator = app
        .spec
        .source_hydrator
        .as_ref()
        .is_some_and(|v| !v.is_null());

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
        compared_elsewhere,
        comparison_error,
        source_hydrator,
        inputs: inputs(app, &repo),
        resources,
    }
}

/// What decides what Argo CD deploys besides the watched repository's commits
/// ([`AppSnapshot::inputs`]): a digest of each field of the spec — each field of each source
/// apart — and the compared revision of each source from another repository.
fn inputs(app: &Application, repo: &RepoUrl) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(serde_json::Value::Object(spec)) = serde_json::to_value(&app.spec) else {
        return out;
    };
    let field = |out: &mut BTreeMap<String, String>, name: String, v: &serde_json::Value| {
        if !v.is_null() {
            out.insert(name, digest(&v.to_string()));
        }
    };
    for (k, v) in &spec {
        match (k.as_str(), v) {
            ("source", serde_json::Value::Object(fields)) => {
                for (f, fv) in fields {
                    field(&mut out, format!("spec.source.{f}"), fv);
                }
            }
            ("sources", serde_json::Value::Array(sources)) => {
                for (i, source) in sources.iter().enumerate() {
                    match source {
                        serde_json::Value::Object(fields) => {
                            for (f, fv) in fields {
                                field(&mut out, format!("spec.sources[{i}].{f}"), fv);
                            }
                        }
                        other => field(&mut out, format!("spec.sources[{i}]"), other),
                    }
                }
            }
            _ => field(&mut out, format!("spec.{k}"), v),
        }
    }
    // Another repository's revision moves without any edit of the spec (a branch it tracks).
    let revisions = &app.status.sync.revisions;
    for (i, source) in app.spec.sources.iter().enumerate() {
        if !repo.same_repo(&RepoUrl::new(&source.repo_url))
            && let Some(r) = revisions.get(i).filter(|r| !r.is_empty())
        {
            out.insert(format!("spec.sources[{i}] revision"), r.clone());
        }
    }
    out
}

/// The annotation with which Argo CD leaves a resource out of the app's health.
pub const IGNORE_HEALTHCHECK: &str = "argocd.argoproj.io/ignore-healthcheck";

/// The failed PostSync tasks of a failed operation that applied its revision whole, labelled;
/// `None` when it did not. Argo CD runs a sync's phases in order (PreSync, Sync, PostSync) and
/// starts a phase only when every task before it succeeded, so a task in the PostSync phase
/// means every PreSync and Sync task succeeded. The failure must lie there too: every failed
/// task is a PostSync one (or a SyncFail hook, which runs because of it).
fn post_sync_failures(o: &OperationState) -> Option<Vec<String>> {
    let results = &o.sync_result.as_ref()?.resources;
    if !results.iter().any(|r| r.sync_phase == "PostSync") {
        return None;
    }
    let failed: Vec<&ResourceResult> = results.iter().filter(|r| r.failed()).collect();
    let post_sync = |r: &&ResourceResult| matches!(r.sync_phase.as_str(), "PostSync" | "SyncFail");
    if !failed.iter().all(post_sync) {
        return None;
    }
    let hooks: Vec<String> = failed
        .iter()
        .filter(|r| r.sync_phase == "PostSync")
        .map(|r| r.label())
        .collect();
    (!hooks.is_empty()).then_some(hooks)
}

/// Whether the judge must see the managed resources' annotations: some top-level resource is
/// unhealthy and its health did not come inline (Argo CD applies `ignore-healthcheck` when it
/// persists inline health, never in the tree or in the health Get and Watch re-fill).
pub fn needs_managed_resources(app: &Application, snap: &AppSnapshot) -> bool {
    let not_inline = app.status.resource_health_source == "appTree"
        || snap.resource_health_source == ResourceHealthSource::ResourceTree;
    not_inline && !snap.unhealthy_resources.is_empty()
}

/// Leave out of `snap` the unhealthy resources annotated `ignore-healthcheck: "true"`, as Argo
/// CD leaves them out of the app's health: the live object's annotation (Argo CD ≥ 3.2), else
/// the target's (a resource not created yet; Argo CD ≤ 3.1 reads the target). A resource
/// Argo CD leaves out of the app's health never fails a watch.
pub fn leave_out_ignored(snap: &mut AppSnapshot, managed: &ManagedResources) {
    let ignored = |d: &crate::model::ResourceDiff| {
        let annotation = |state: &str| -> Option<String> {
            let v: serde_json::Value = serde_json::from_str(state).ok()?;
            v.pointer("/metadata/annotations")?
                .get(IGNORE_HEALTHCHECK)?
                .as_str()
                .map(str::to_string)
        };
        annotation(&d.live_state)
            .or_else(|| annotation(&d.target_state))
            .is_some_and(|a| a == "true")
    };
    let is_ignored = |kind: &str, namespace: &str, name: &str| {
        managed
            .items
            .iter()
            .any(|d| d.kind == kind && d.namespace == namespace && d.name == name && ignored(d))
    };
    snap.unhealthy_resources
        .retain(|r| !is_ignored(&r.kind, &r.namespace, &r.name));
    for r in &mut snap.resources {
        if is_ignored(&r.kind, &r.namespace, &r.name) {
            r.health = None;
        }
    }
}

/// The names a revision field holds before Argo CD resolved it to a commit: `HEAD`, and the
/// `targetRevision` of each source from the watched repository (a branch or tag name).
fn unresolved_names(spec: Option<&Layout<'_>>, repo: &RepoUrl) -> Vec<String> {
    let mut names = vec!["HEAD".to_string()];
    for s in spec.map(Layout::sources).unwrap_or_default() {
        let t = s.target_revision.trim();
        // A chart version is what a Helm repository source resolves to, not a request.
        if same_repo(s, repo)
            && s.chart.is_empty()
            && !t.is_empty()
            && !is_git_sha(t)
            && !names.iter().any(|n| n == t)
        {
            names.push(t.to_string());
        }
    }
    names
}

/// Whether per-resource health must come from the resource tree. With inline health (Argo CD
/// 2.x, or `persist-resource-health`) it is in `status.resources[]`. With `resourceHealthSource:
/// appTree` (3.0+) the stored Application and the List carry none, but Get and the stream
/// (Watch) re-fill it from the tree: an Application that carries health for any managed resource
/// needs no tree; one that carries none (from a listing, or of an unknown future shape) does.
///
/// With inline health, Argo CD leaves health off hooks and `ignore-healthcheck` resources on
/// purpose; consulting the tree then would bring their health back, so it is not consulted.
pub fn needs_resource_tree(app: &Application) -> bool {
    let mut managed = managed_resources(app).peekable();
    if managed.peek().is_none() {
        return app.status.resource_health_source == "appTree";
    }
    managed.all(|r| health_status(r).is_none())
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

/// Every top-level managed resource with its sync status, `requiresPruning` and health, read
/// where [`unhealthy_resources`] reads it (inline, else the tree; none when neither has it).
fn resource_views(app: &Application, tree: Option<&ResourceTree>) -> Vec<ResourceView> {
    let from_tree = needs_resource_tree(app);
    managed_resources(app)
        .map(|r| {
            let h = if from_tree {
                tree.and_then(|t| {
                    t.nodes.iter().find(|n| {
                        n.group == r.group
                            && n.kind == r.kind
                            && n.namespace == r.namespace
                            && n.name == r.name
                    })
                })
                .and_then(|n| n.health.as_ref())
            } else {
                r.health.as_ref()
            };
            let h = h.filter(|h| !h.status.is_empty());
            ResourceView {
                group: r.group.clone(),
                kind: r.kind.clone(),
                namespace: r.namespace.clone(),
                name: r.name.clone(),
                sync_status: r.status.clone(),
                requires_pruning: r.requires_pruning,
                health: h.map(|h| Health::parse(&h.status)),
                message: h.map(|h| h.message.clone()).unwrap_or_default(),
            }
        })
        .collect()
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

fn same_repo(s: &ApplicationSource, repo: &RepoUrl) -> bool {
    repo.same_repo(&RepoUrl::new(s.repo_url.as_str()))
}

/// The revisions a record reports for the watched repository's source(s). A record that names
/// its own sources is read by those (its `revisions[]` follow its own order, which may predate
/// today's spec); otherwise by the spec's.
fn record_revisions(
    own: Option<Layout<'_>>,
    spec: &Layout<'_>,
    single: &str,
    multi: &[String],
    repo: &RepoUrl,
    unresolved: &[String],
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
    for r in revs
        .into_iter()
        .filter(|r| !r.is_empty() && !unresolved.contains(r))
    {
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
fn source_paths(app: &Application, spec: &Layout<'_>, repo: &RepoUrl) -> SourcePaths {
    match collect_source_paths(app, spec, repo) {
        Ok(set) if set.contains("") => SourcePaths::Known(vec![String::new()]),
        Ok(set) => SourcePaths::Known(set.into_iter().collect()),
        Err(why) => SourcePaths::Unknown { why },
    }
}

fn collect_source_paths(
    app: &Application,
    spec: &Layout<'_>,
    repo: &RepoUrl,
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
                    greenlight_core::repo_url::redact(f)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_prefixes() {
        assert_eq!(glob_prefix("envs/*.yaml"), "envs");
        assert_eq!(glob_prefix("*.yaml"), "");
        assert_eq!(glob_prefix("envs/prod.yaml"), "envs/prod.yaml");
    }
}
