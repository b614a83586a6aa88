//! `greenlight watch --once`: the self-check gate (W18). One full cycle — configuration, clone
//! and fetch, every trailer in range, one listing of Argo CD, one judgement of each directive —
//! with dry-run forced and no state written. Any failure is a non-zero exit, so a broken
//! release is caught before it runs as the daemon ("Synced is not running").

use crate::daemon::DaemonConfig;
use crate::output::Output;
use anyhow::{Context, Result};
use greenlight_core::judge::{Ancestry, CommitInfo, Effect, Engine, JudgeConfig, Observation};
use greenlight_core::time::Timestamp;
use std::process::ExitCode;

pub async fn run(cfg: DaemonConfig, out: Output) -> Result<ExitCode> {
    let now = || {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(d.as_millis() as i64)
    };
    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    let remote = cfg.repo.clone();
    let want = cfg.branch.clone();
    let since = cfg.since.clone();
    let dir = scratch.path().join("repo");
    let auth = greenlight_git::Auth {
        token: cfg.git_token.clone(),
        username: None,
    };
    let (branch, default_branch, tip, commits) =
        tokio::task::spawn_blocking(move || -> Result<_> {
            let repo = greenlight_git::Repo::open_or_clone(&remote, &dir, auth)?;
            let default = repo.remote_default_branch()?;
            let branch = want.unwrap_or_else(|| default.clone());
            let tip = repo.fetch(&branch)?;
            let shas = match &since {
                Some(rev) => {
                    let base = repo.resolve(rev)?.ok_or_else(|| {
                        crate::cmd::usage(format!("--since {rev:?} is not a commit"))
                    })?;
                    repo.new_commits(Some(&base), &tip)?
                }
                None => vec![tip.clone()],
            };
            let mut commits = Vec::new();
            for sha in shas {
                let data = repo.commit(&sha)?;
                commits.push(CommitInfo {
                    changed_paths: repo.changed_paths(&sha)?,
                    sha: data.sha,
                    parents: data.parents,
                    subject: data.subject,
                    message: data.message,
                });
            }
            Ok((branch, default, tip, commits))
        })
        .await?
        .context("self-check: the repository")?;

    let argo = greenlight_argocd::ArgoClient::new(&cfg.argocd_url, cfg.argocd_token.clone())
        .map_err(|e| crate::cmd::usage(format!("--argocd-url: {e}")))?;
    let items = argo
        .list()
        .await
        .context("self-check: listing Argo CD applications")?;
    let mut apps = Vec::new();
    for item in items {
        apps.push(item.context("self-check: an Application could not be parsed")?);
    }

    let mut judge = JudgeConfig::new(&cfg.repo, &branch, branch == default_branch);
    judge.dry_run = true;
    judge.trailer_key = cfg.trailer_key.clone();
    judge.stable_for_ms = cfg.stable_for_ms;
    judge.stale_after_ms = cfg.stale_after_ms;
    judge.unknown_app_grace_ms = cfg.unknown_app_grace_ms;
    let mut engine = Engine::new(judge);
    let mut effects = Vec::new();
    for c in &commits {
        effects.extend(engine.commit_arrived(c, &Ancestry::default(), now()));
    }
    let rejected = effects
        .iter()
        .filter(|e| matches!(e, Effect::Emit(ev) if ev.event == greenlight_core::event::EventKind::DirectiveRejected))
        .count();
    for app in &apps {
        let watched = engine
            .watches()
            .iter()
            .any(|w| w.app.matches(&app.metadata.namespace, &app.metadata.name));
        if !watched {
            continue;
        }
        let tree = if greenlight_argocd::needs_resource_tree(app) {
            argo.resource_tree(&app.metadata.namespace, &app.metadata.name)
                .await
                .with_context(|| format!("self-check: resource tree of {}", app.metadata.name))?
        } else {
            None
        };
        let repo = crate::daemon::repo_spelling(&cfg.repo, app);
        let snap = greenlight_argocd::snapshot(app, tree.as_ref(), repo);
        // Reach is not proven here (no ancestry answers): the gate checks that everything loads
        // and parses, and shows what each directive would start as.
        effects.extend(engine.observe(Observation::Present(&snap), &Ancestry::default(), now()));
    }
    for e in &effects {
        if let Effect::Emit(ev) = e {
            out.event(ev);
        }
    }
    if rejected > 0 {
        out.plain(&format!(
            "self-check: {rejected} malformed trailer(s) in range (see directive_rejected above)"
        ));
    }
    out.plain(&format!(
        "self-check passed: {} {} at {}, {} commit(s) read, {} watch(es) would start, {} Application(s) listed (dry-run, no state written)",
        greenlight_git::redact_url(&cfg.repo),
        branch,
        &tip[..tip.len().min(12)],
        commits.len(),
        engine.watches().len(),
        apps.len()
    ));
    Ok(ExitCode::SUCCESS)
}
