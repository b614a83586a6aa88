//! `greenlight promote gc`: removes the kept candidates whose retention has passed
//! (`docs/promote.md#gc`). It reads the config for the candidates' directory, lists the
//! `<workload>-candidate.yaml` files there at the branch's tip, and removes each whose workload's
//! `greenlight.dev/kept-until` is in the past, in one commit of its own, pushed fast-forward.
//!
//! Must never: remove a file without `kept-until` (not a candidate greenlight kept), nor a
//! candidate whose run's lock is present and not expired (a run under way); force a push; put a
//! token in a message, a log line or a process argument.

use super::promote_run::{CANDIDATES_README, CANDIDATES_README_TEXT, KEPT_UNTIL, lock_field};
use crate::cmd::args::{GitArgs, help_of};
use crate::cmd::usage;
use anyhow::{Context as _, Result, anyhow};
use clap::Args;
use greenlight::clock::{Clock, SystemClock};
use greenlight::promote::{self as config, LoadError};
use greenlight_core::repo_url::RepoUrl;
use greenlight_core::time::Timestamp;
use greenlight_git::{Auth, ChangeOutcome, ChangeRequest, FileChange, Repo};
use serde_json::Value;
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

/// What gc decided about one candidate file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// `kept-until` has passed and no run holds the lock: removed.
    Expired { until: Timestamp },
    /// `kept-until` is still ahead.
    Kept { until: Timestamp },
    /// A run holds the candidate's lock (present and not expired).
    Locked { expires: String },
    /// Not a candidate greenlight kept, or one that cannot be read: left alone, with why.
    NotKept { why: String },
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
    let surveyed = survey(&repo, &base, &dir, now)?;
    let looked = surveyed.len();
    for (name, path, verdict) in surveyed {
        match verdict {
            Verdict::Expired { until } => {
                outln!("{path}: kept until {}: expired, removed", until.rfc3339());
                expired.push((name, path, until));
            }
            Verdict::Kept { until } => {
                outln!("{path}: kept until {}: not expired, kept", until.rfc3339())
            }
            Verdict::Locked { expires } => outln!(
                "{path}: a promotion run holds its lock {dir}/{name}-candidate.lock (until {expires}): a run under way, left alone"
            ),
            Verdict::NotKept { why } => outln!("{path}: {why}: left alone"),
        }
    }
    if expired.is_empty() {
        outln!(
            "promote gc: nothing expired among {looked} candidate(s) in {dir} on {branch}; nothing committed"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut changes: Vec<FileChange> = expired
        .iter()
        .map(|(_, path, _)| FileChange::Remove { path: path.clone() })
        .collect();
    // Git keeps no empty directory, and the candidates' Application needs its path: a
    // directory that would be left with nothing keeps a README, as a run's would.
    let remaining = files
        .iter()
        .filter(|f| !expired.iter().any(|(_, p, _)| p == *f))
        .count();
    if remaining == 0 {
        changes.push(FileChange::Write {
            path: format!("{dir}/{CANDIDATES_README}"),
            content: CANDIDATES_README_TEXT.as_bytes().to_vec(),
        });
    }
    // A run that starts meanwhile writes the candidate and its lock: then nothing is removed.
    let mut guarded: Vec<String> = Vec::new();
    for (name, path, _) in &expired {
        guarded.push(path.clone());
        guarded.push(format!("{dir}/{name}-candidate.lock"));
    }
    let n = expired.len();
    let body: Vec<String> = expired
        .iter()
        .map(|(name, path, until)| format!("- {name}: {path}, kept until {}", until.rfc3339()))
        .collect();
    let message = format!(
        "promote gc: remove {n} expired candidate(s)\n\n{}\n",
        body.join("\n")
    );
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
            outln!(
                "promote gc: removed {n} expired candidate(s) in commit {} on {branch}",
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

/// Each candidate file (`<dir>/<name>-candidate.yaml`) at `base`, with its name and what gc
/// makes of it.
pub(crate) fn survey(
    repo: &greenlight_git::Repo,
    base: &str,
    dir: &str,
    now: Timestamp,
) -> Result<Vec<(String, String, Verdict)>> {
    let mut out = Vec::new();
    for path in repo.list_files(base, dir)? {
        let Some(name) = path
            .strip_prefix(&format!("{dir}/"))
            .filter(|f| !f.contains('/'))
            .and_then(|f| f.strip_suffix("-candidate.yaml"))
        else {
            continue;
        };
        let text = repo
            .read_file(base, &path)?
            .map(|t| String::from_utf8_lossy(&t).into_owned())
            .unwrap_or_default();
        let lock = repo
            .read_file(base, &format!("{dir}/{name}-candidate.lock"))?
            .map(|t| String::from_utf8_lossy(&t).into_owned());
        let v = verdict(&text, lock.as_deref(), now);
        out.push((name.to_string(), path, v));
    }
    Ok(out)
}

/// Whether a candidate file is an expired kept candidate, given its run's lock (if any).
fn verdict(text: &str, lock: Option<&str>, now: Timestamp) -> Verdict {
    let docs = match greenlight_lint::edit::documents_as_json(text) {
        Ok(d) => d,
        Err(e) => {
            return Verdict::NotKept {
                why: format!("does not parse as YAML ({e})"),
            };
        }
    };
    let written = docs.iter().find_map(|d| {
        d.pointer("/metadata/annotations")
            .and_then(|a| a.get(KEPT_UNTIL))
            .and_then(Value::as_str)
    });
    let Some(written) = written else {
        return Verdict::NotKept {
            why: format!("no {KEPT_UNTIL} annotation, not a candidate greenlight kept"),
        };
    };
    let Some(until) = Timestamp::parse_rfc3339(written) else {
        return Verdict::NotKept {
            why: format!("{KEPT_UNTIL} {written:?} is not an RFC 3339 time"),
        };
    };
    if until > now {
        return Verdict::Kept { until };
    }
    if let Some(lock) = lock {
        let expires = lock_field(lock, "expires");
        // A lock whose expiry cannot be read is taken as held: gc never races a run.
        match expires.and_then(Timestamp::parse_rfc3339) {
            Some(at) if at <= now => {}
            _ => {
                return Verdict::Locked {
                    expires: expires.unwrap_or("?").to_string(),
                };
            }
        }
    }
    Verdict::Expired { until }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(until: &str) -> String {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-candidate\n  annotations:\n    {KEPT_UNTIL}: \"{until}\"\n"
        )
    }

    #[test]
    fn a_candidate_is_removed_only_past_its_kept_until_and_without_a_live_lock() {
        let now = Timestamp::parse_rfc3339("2026-06-01T00:00:00Z").unwrap();
        let past = Timestamp::parse_rfc3339("2026-01-01T00:00:00Z").unwrap();
        let future = Timestamp::parse_rfc3339("2027-01-01T00:00:00Z").unwrap();
        assert_eq!(
            verdict(&kept("2026-01-01T00:00:00Z"), None, now),
            Verdict::Expired { until: past }
        );
        assert_eq!(
            verdict(&kept("2027-01-01T00:00:00Z"), None, now),
            Verdict::Kept { until: future }
        );
        assert_eq!(
            verdict(
                &kept("2026-01-01T00:00:00Z"),
                Some("expires: 2027-01-01T00:00:00Z\n"),
                now
            ),
            Verdict::Locked {
                expires: "2027-01-01T00:00:00Z".into()
            }
        );
        assert_eq!(
            verdict(
                &kept("2026-01-01T00:00:00Z"),
                Some("expires: 2026-02-01T00:00:00Z\n"),
                now
            ),
            Verdict::Expired { until: past }
        );
        assert!(matches!(
            verdict("kind: Deployment\nmetadata: {name: x}\n", None, now),
            Verdict::NotKept { .. }
        ));
    }
}
