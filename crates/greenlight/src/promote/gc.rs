//! `promote gc` (`docs/promote.md#gc`): the kept candidates of the candidates' directory whose
//! `kept-until` has passed are removed, and a candidate orphaned by a run killed outright (no
//! `kept-until`, its lock expired or gone) is given one, in one commit of its own pushed
//! fast-forward and guarded against a run that starts meanwhile. `cmd/promote_gc.rs` parses
//! the flags, clones, and prints this module's [`Report`].
//!
//! Must never: remove a file without `kept-until`, nor touch a candidate whose run's lock is
//! present and not expired (a run under way); force a push.

use crate::promote::candidates::{self, Surveyed, Verdict};
use crate::promote::run::Report;
use anyhow::{Result, anyhow};
use greenlight_core::time::Timestamp;
use greenlight_git::{ChangeOutcome, ChangeRequest, FileChange, Repo};

/// `println!` to a [`Report`].
macro_rules! say {
    ($report:expr, $($arg:tt)*) => {
        $report.line(&format!($($arg)*))?
    };
}

/// One gc of the candidates' directory `dir` on `branch` at `base` (its tip, fetched), at
/// `now`; an orphan is kept `retention_ms`. The exit code: 0 done or nothing to do.
#[allow(clippy::too_many_arguments)]
pub fn collect(
    repo: &Repo,
    branch: &str,
    base: &str,
    dir: &str,
    retention_ms: i64,
    (author_name, author_email): (&str, &str),
    now: Timestamp,
    report: &mut dyn Report,
) -> Result<u8> {
    let dir = dir.trim_end_matches('/').to_string();
    let files = repo.list_files(base, &dir)?;
    let mut expired: Vec<(String, String, Timestamp)> = Vec::new();
    // A run killed outright left its candidate without an expiry: it gets one.
    let orphan_until = now.plus_ms(retention_ms);
    let mut orphans: Vec<(String, String, String)> = Vec::new();
    let surveyed = candidates::survey(repo, base, &dir, now)?;
    let looked = surveyed.len();
    for Surveyed {
        workload: name,
        path,
        verdict,
    } in surveyed
    {
        match verdict {
            Verdict::Expired { until } => {
                say!(
                    report,
                    "{path}: kept until {}: expired, removed",
                    until.rfc3339()
                );
                expired.push((name, path, until));
            }
            Verdict::Kept { until } => {
                say!(
                    report,
                    "{path}: kept until {}: not expired, kept",
                    until.rfc3339()
                )
            }
            Verdict::Locked { expires } => say!(
                report,
                "{path}: a promotion run holds its lock {} (until {expires}): a run under way, left alone",
                candidates::lock_path(&dir, &name)
            ),
            Verdict::Orphaned { lock_expired } => {
                let text = repo
                    .read_file(base, &path)?
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .unwrap_or_default();
                match candidates::with_kept_until(&text, orphan_until) {
                    Ok(kept) => {
                        let why = match lock_expired {
                            Some(at) => format!("its run's lock expired at {}", at.rfc3339()),
                            None => "no run holds a lock on it".to_string(),
                        };
                        say!(
                            report,
                            "{path}: orphaned, without {} ({why}: a run that was killed): kept until {}",
                            candidates::KEPT_UNTIL,
                            orphan_until.rfc3339()
                        );
                        orphans.push((name, path, kept));
                    }
                    Err(e) => say!(report, "{path}: orphaned, but it {e}: left alone"),
                }
            }
            Verdict::NotKept { why } => say!(report, "{path}: {why}: left alone"),
        }
    }
    if expired.is_empty() && orphans.is_empty() {
        say!(
            report,
            "promote gc: nothing expired among {looked} candidate(s) in {dir} on {branch}; nothing committed"
        );
        return Ok(0);
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
        branch: branch.to_string(),
        changes,
        message,
        author_name: author_name.to_string(),
        author_email: author_email.to_string(),
        max_attempts: 5,
        unchanged_since: Some((base.to_string(), guarded)),
    })?;
    match outcome {
        ChangeOutcome::Pushed { commit, .. } => {
            let orphaned = match orphans.len() {
                0 => String::new(),
                m => format!(" and gave {m} orphaned candidate(s) a kept-until"),
            };
            say!(
                report,
                "promote gc: removed {n} expired candidate(s){orphaned} in commit {} on {branch}",
                &commit[..commit.len().min(12)]
            );
            Ok(0)
        }
        ChangeOutcome::Unchanged { tip } => {
            say!(
                report,
                "promote gc: the expired candidate(s) are already gone at {}; nothing committed",
                &tip[..tip.len().min(12)]
            );
            Ok(0)
        }
        ChangeOutcome::Guarded { path, tip, .. } => Err(anyhow!(
            "{path} changed on {branch} since gc read it (now at {}): a run may have started; nothing was committed; run gc again",
            &tip[..tip.len().min(12)]
        )),
    }
}
