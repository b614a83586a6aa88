//! `greenlight promote gc`: removes the kept candidates whose retention has passed
//! (`docs/promote.md#gc`). It reads the config for the candidates' directory, lists the
//! `<workload>-candidate.yaml` files there at the branch's tip, and removes each whose workload's
//! `greenlight.dev/kept-until` is in the past, in one commit of its own, pushed fast-forward. A
//! candidate orphaned by a run that was killed outright (no `kept-until`, its lock expired or
//! gone) is given a `kept-until` in the same commit, so nothing stays without an expiry.
//!
//! Must never: remove a file without `kept-until`, nor touch a candidate whose run's lock is
//! present and not expired (a run under way); force a push; put a token in a message, a log line
//! or a process argument.

use crate::cmd::args::{GitArgs, help_of};
use crate::cmd::usage;
use anyhow::{Context as _, Result, anyhow};
use clap::Args;
use greenlight::clock::{Clock, SystemClock};
use greenlight::promote::candidates::{self, Surveyed, Verdict};
use greenlight::promote::{self as config, LoadError};
use greenlight_core::repo_url::RepoUrl;
use greenlight_core::time::Timestamp;
use greenlight_git::{Auth, ChangeOutcome, ChangeRequest, FileChange, Repo};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
#[command(mut_args(help_of(&[(
    "git_author",
    Some("Author of the gc commit, \"Name <email>\""),
)])))]
pub struct GcArgs {
    /// The promotion config (promote.yaml; docs/promote.md). Its paths are the repository's.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// The deployment repository: a URL, or a bare repository's path.
    #[arg(long)]
    pub repo: String,
    /// The branch the candidates are on (default: the remote's HEAD branch).
    #[arg(long)]
    pub branch: Option<String>,
    #[command(flatten)]
    pub git: GitArgs,
    /// Where gc keeps its clone (default: a scratch directory, removed afterwards).
    #[arg(long = "data-dir")]
    pub data_dir: Option<PathBuf>,
}

pub fn gc(a: GcArgs) -> Result<ExitCode> {
    let file = a.config.display().to_string();
    let promotion = match config::load(&a.config) {
        Ok(p) => p,
        Err(e @ LoadError::Read { .. }) => return Err(usage(e.to_string())),
        Err(LoadError::Invalid(problems)) => {
            for p in &problems {
                errln!("error: {p}");
            }
            errln!(
                "error: {file}: {} problem(s); nothing was removed",
                problems.len()
            );
            return Ok(ExitCode::from(2));
        }
    };
    let git = a.git.read()?;
    if let Some(warning) =
        crate::cmd::args::url_credentials_warning("--repo", &RepoUrl::new(a.repo.clone()))
    {
        errln!("warning: {warning}");
    }
    let (git_token, author_name, author_email) = (git.token, git.author_name, git.author_email);
    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    let data_dir = a
        .data_dir
        .clone()
        .unwrap_or_else(|| scratch.path().to_path_buf());
    let auth = Auth {
        token: git_token,
        username: None,
    };
    let repo = Repo::open_or_clone(&a.repo, &data_dir.join("work"), auth)
        .with_context(|| format!("cannot clone {}", RepoUrl::new(a.repo.clone())))?;
    let branch = match &a.branch {
        Some(b) => b.clone(),
        None => repo.remote_default_branch()?,
    };
    let base = repo.fetch(&branch)?;
    let dir = promotion.candidate.path.trim_end_matches('/').to_string();
    let now = SystemClock.now();
    let files = repo.list_files(&base, &dir)?;
    let mut expired: Vec<(String, String, Timestamp)> = Vec::new();
    // A run killed outright left its candidate without an expiry: it gets one.
    let orphan_until = now.plus_ms(promotion.retention.failed_ms);
    let mut orphans: Vec<(String, String, String)> = Vec::new();
    let surveyed = candidates::survey(&repo, &base, &dir, now)?;
    let looked = surveyed.len();
    for Surveyed {
        workload: name,
        path,
        verdict,
    } in surveyed
    {
        match verdict {
            Verdict::Expired { until } => {
                outln!("{path}: kept until {}: expired, removed", until.rfc3339());
                expired.push((name, path, until));
            }
            Verdict::Kept { until } => {
                outln!("{path}: kept until {}: not expired, kept", until.rfc3339())
            }
            Verdict::Locked { expires } => outln!(
                "{path}: a promotion run holds its lock {} (until {expires}): a run under way, left alone",
                candidates::lock_path(&dir, &name)
            ),
            Verdict::Orphaned { lock_expired } => {
                let text = repo
                    .read_file(&base, &path)?
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .unwrap_or_default();
                match candidates::with_kept_until(&text, orphan_until) {
                    Ok(kept) => {
                        let why = match lock_expired {
                            Some(at) => format!("its run's lock expired at {}", at.rfc3339()),
                            None => "no run holds a lock on it".to_string(),
                        };
                        outln!(
                            "{path}: orphaned, without {} ({why}: a run that was killed): kept until {}",
                            candidates::KEPT_UNTIL,
                            orphan_until.rfc3339()
                        );
                        orphans.push((name, path, kept));
                    }
                    Err(e) => outln!("{path}: orphaned, but it {e}: left alone"),
                }
            }
            Verdict::NotKept { why } => outln!("{path}: {why}: left alone"),
        }
    }
    if expired.is_empty() && orphans.is_empty() {
        outln!(
            "promote gc: nothing expired among {looked} candidate(s) in {dir} on {branch}; nothing committed"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut changes: Vec<FileChange> = expired
        .iter()
        .map(|(_, path, _)| FileChange::Remove { path: path.clone() })
        .collect();
    for (name, path, kept) in &orphans {
        changes.push(FileChange::Write {
            path: path.clone(),
            content: kept.clone().into_bytes(),
        });
        changes.push(FileChange::Remove {
            path: candidates::lock_path(&dir, name),
        });
    }
    // Git keeps no empty directory, and the candidates' Application needs its path: a
    // directory that would be left with nothing keeps a README, as a run's would.
    let remaining = files
        .iter()
        .filter(|f| !expired.iter().any(|(_, p, _)| p == *f))
        .count();
    if remaining == 0 {
        changes.push(FileChange::Write {
            path: candidates::readme_path(&dir),
            content: candidates::README_TEXT.as_bytes().to_vec(),
        });
    }
    // A run that starts meanwhile writes the candidate and its lock: then nothing is removed.
    let mut guarded: Vec<String> = Vec::new();
    for (name, path) in expired
        .iter()
        .map(|(n, p, _)| (n, p))
        .chain(orphans.iter().map(|(n, p, _)| (n, p)))
    {
        guarded.push(path.clone());
        guarded.push(candidates::lock_path(&dir, name));
    }
    let n = expired.len();
    let mut body: Vec<String> = expired
        .iter()
        .map(|(name, path, until)| format!("- {name}: {path}, kept until {}", until.rfc3339()))
        .collect();
    body.extend(orphans.iter().map(|(name, path, _)| {
        format!(
            "- {name}: {path}, orphaned by a run that was killed: kept until {}",
            orphan_until.rfc3339()
        )
    }));
    let subject = match (n, orphans.len()) {
        (_, 0) => format!("promote gc: remove {n} expired candidate(s)"),
        (0, m) => format!(
            "promote gc: keep {m} orphaned candidate(s) until {}",
            orphan_until.rfc3339()
        ),
        (_, m) => format!(
            "promote gc: remove {n} expired candidate(s), keep {m} orphaned one(s) until {}",
            orphan_until.rfc3339()
        ),
    };
    let message = format!("{subject}\n\n{}\n", body.join("\n"));
    let outcome = repo.commit_and_push(&ChangeRequest {
        branch: branch.clone(),
        changes,
        message,
        author_name,
        author_email,
        max_attempts: 5,
        unchanged_since: Some((base.clone(), guarded)),
    })?;
    match outcome {
        ChangeOutcome::Pushed { commit, .. } => {
            let orphaned = match orphans.len() {
                0 => String::new(),
                m => format!(" and gave {m} orphaned candidate(s) a kept-until"),
            };
            outln!(
                "promote gc: removed {n} expired candidate(s){orphaned} in commit {} on {branch}",
                &commit[..commit.len().min(12)]
            );
            Ok(ExitCode::SUCCESS)
        }
        ChangeOutcome::Unchanged { tip } => {
            outln!(
                "promote gc: the expired candidate(s) are already gone at {}; nothing committed",
                &tip[..tip.len().min(12)]
            );
            Ok(ExitCode::SUCCESS)
        }
        ChangeOutcome::Guarded { path, tip, .. } => Err(anyhow!(
            "{path} changed on {branch} since gc read it (now at {}): a run may have started; nothing was committed; run gc again",
            &tip[..tip.len().min(12)]
        )),
    }
}
