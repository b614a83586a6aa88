//! The candidates' directory protocol (`docs/promote.md#gate`, `#gc`): what `promote run`,
//! `self-test` and `gc` write and read in `candidate.path` — the run's lock, the README that
//! keeps the directory in git, a kept candidate's `kept-until`, and the survey of the kept
//! candidates that a run (other workloads' expired ones) and `gc` (what it removes) share.
//!
//! Files, by workload `<w>`: `<dir>/<w>-candidate.yaml` (the candidate's manifests) and
//! `<dir>/<w>-candidate.lock` (one run at a time; `key: value` lines, see [`Lock`]).

use anyhow::{Result, anyhow};
use greenlight_core::time::Timestamp;
use greenlight_gate::candidate::ROLE_LABEL;
use serde_json::Value;

/// The file that keeps the candidates' directory in git when no candidate is in it.
pub const README: &str = "README.md";
pub const README_TEXT: &str = "# Promotion candidates\n\nWritten by `greenlight promote`: each candidate of a promotion run is committed here\nwhile it is verified, and removed when the run promotes it (a failed one is kept for its\nretention window). This file keeps the directory in git when no candidate\nis in it, so that the Application deploying it never loses its path.\n";

/// The annotation of a kept candidate's workload: when it may be removed (RFC 3339).
pub const KEPT_UNTIL: &str = "greenlight.dev/kept-until";

/// The lock of `workload`'s runs in the candidates' directory `dir`.
pub fn lock_path(dir: &str, workload: &str) -> String {
    format!("{}/{workload}-candidate.lock", dir.trim_end_matches('/'))
}

/// The README's path in the candidates' directory `dir`.
pub fn readme_path(dir: &str) -> String {
    format!("{}/{README}", dir.trim_end_matches('/'))
}

/// What a later commit may change in the candidates' directory `dir` without making the
/// verdict of the candidate in `own` unattributable (`JudgeConfig::attribution_exempt`, read as
/// `.gitignore` lines): the other workloads' candidates and locks, and the README; never its own
/// file, nor anything else in the directory (a hand-made kustomization there still counts).
pub fn attribution_exempt(dir: &str, own: &str) -> Vec<String> {
    let dir = dir.trim_end_matches('/');
    vec![
        format!("{dir}/*-candidate.yaml"),
        format!("{dir}/*-candidate.lock"),
        readme_path(dir),
        format!("!{own}"),
    ]
}

/// A run's lock, as written in git.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lock {
    pub workload: String,
    /// The run's git author name.
    pub holder: String,
    pub candidate: String,
    pub started: Timestamp,
    /// Past this instant the lock is taken over (by a run) or ignored (by `gc`).
    pub expires: Timestamp,
}

impl Lock {
    /// The file's text.
    pub fn render(&self) -> String {
        format!(
            "# greenlight promote: one run at a time for {workload}; removed when the run ends\nholder: {holder}\ncandidate: {candidate}\nstarted: {started}\nexpires: {expires}\n",
            workload = self.workload,
            holder = self.holder,
            candidate = self.candidate,
            started = self.started.rfc3339(),
            expires = self.expires.rfc3339(),
        )
    }
}

/// A `key: value` line of a lock file.
pub fn lock_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
}

/// A lock file's expiry; `None` when it cannot be read (then it is taken as held).
pub fn lock_expires(text: &str) -> Option<Timestamp> {
    lock_field(text, "expires").and_then(Timestamp::parse_rfc3339)
}

/// The error of a run that finds another run's lock held.
pub fn lock_held_error(path: &str, held: &str) -> anyhow::Error {
    let field = |k| lock_field(held, k).unwrap_or("?");
    anyhow!(
        "another promotion run holds the lock {path} (held by {}, candidate {}, since {}; it expires at {}): nothing was committed; wait for it, or remove the file from git if that run is gone",
        field("holder"),
        field("candidate"),
        field("started"),
        field("expires")
    )
}

/// How long a run's lock is good for: the candidate's judgement (its deadline, the unknown-app
/// grace and twice the staleness bound, as the run waits for a verdict), every check's worst
/// case from `promote plan`, and ten minutes for the commits around them.
pub fn lock_ttl_ms(
    candidate_deadline_ms: i64,
    unknown_app_grace_ms: i64,
    stale_after_ms: i64,
    checks_worst_case_ms: i64,
) -> i64 {
    candidate_deadline_ms
        + unknown_app_grace_ms
        + 2 * stale_after_ms
        + checks_worst_case_ms
        + LOCK_MARGIN_MS
}

/// The margin of [`lock_ttl_ms`] for the run's commits and reads.
pub const LOCK_MARGIN_MS: i64 = 600_000;

/// What the survey makes of one candidate file.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// `kept-until` has passed and no run holds the lock.
    Expired { until: Timestamp },
    /// `kept-until` is still ahead.
    Kept { until: Timestamp },
    /// A run holds the candidate's lock (present and not expired).
    Locked { expires: String },
    /// A candidate a run made (labelled `greenlight.dev/role: candidate`) without `kept-until`
    /// whose run is gone: its lock expired (`Some`, when) or was removed (`None`) — a run killed
    /// outright. It needs a `kept-until` of its own.
    Orphaned { lock_expired: Option<Timestamp> },
    /// Not a candidate greenlight kept, or one that cannot be read: left alone, with why.
    NotKept { why: String },
}

/// One candidate file of the directory.
#[derive(Debug, PartialEq, Eq)]
pub struct Surveyed {
    /// The workload's name (`<name>-candidate.yaml`).
    pub workload: String,
    pub path: String,
    pub verdict: Verdict,
}

/// Each candidate file (`<dir>/<name>-candidate.yaml`) at `base`, with what it is.
pub fn survey(
    repo: &greenlight_git::Repo,
    base: &str,
    dir: &str,
    now: Timestamp,
) -> Result<Vec<Surveyed>> {
    let dir = dir.trim_end_matches('/');
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
        let lock = match repo.read_file(base, &lock_path(dir, name))? {
            // A lock a revert brought back is no run's.
            Some(_) if lock_brought_back_by(repo, base, &lock_path(dir, name))?.is_some() => None,
            t => t.map(|t| String::from_utf8_lossy(&t).into_owned()),
        };
        let verdict = verdict(&text, lock.as_deref(), now);
        out.push(Surveyed {
            workload: name.to_string(),
            path,
            verdict,
        });
    }
    Ok(out)
}

/// Whether a candidate file is an expired kept candidate, given its run's lock (if any).
pub fn verdict(text: &str, lock: Option<&str>, now: Timestamp) -> Verdict {
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
        let made_by_a_run = docs.iter().any(|d| {
            d.pointer("/metadata/labels")
                .and_then(|l| l.get(ROLE_LABEL))
                .and_then(Value::as_str)
                == Some("candidate")
        });
        if !made_by_a_run {
            return Verdict::NotKept {
                why: format!("no {KEPT_UNTIL} annotation, not a candidate greenlight kept"),
            };
        }
        // A run writes its candidate (labelled as one) and its lock in one commit, and removes
        // the lock only when it settles the candidate: a candidate without a live lock is a
        // run's that died.
        return match lock {
            None => Verdict::Orphaned { lock_expired: None },
            Some(lock) => match lock_expires(lock) {
                Some(at) if at <= now => Verdict::Orphaned {
                    lock_expired: Some(at),
                },
                _ => Verdict::Locked {
                    expires: lock_field(lock, "expires").unwrap_or("?").to_string(),
                },
            },
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
        // A lock whose expiry cannot be read is taken as held: gc never races a run.
        match lock_expires(lock) {
            Some(at) if at <= now => {}
            _ => {
                return Verdict::Locked {
                    expires: lock_field(lock, "expires").unwrap_or("?").to_string(),
                };
            }
        }
    }
    Verdict::Expired { until }
}

/// The commit that brought the lock at `lock_path` back, when the newest commit touching it is
/// a revert (`This reverts commit <sha>`) of a gate commit (a promotion or a kept candidate's,
/// which removed it): a human's `git revert` of a promotion restores the files it removed, and
/// the lock among them belongs to no run. `None`: the lock is as a run wrote it.
pub fn lock_brought_back_by(
    repo: &greenlight_git::Repo,
    base: &str,
    lock_path: &str,
) -> Result<Option<String>> {
    let Some(newest) = repo.path_history(base, lock_path, 1)?.into_iter().next() else {
        return Ok(None);
    };
    let message = repo.commit(&newest)?.message;
    let Some(reverted) = reverted_commit(&message) else {
        return Ok(None);
    };
    let Ok(original) = repo.commit(reverted) else {
        return Ok(None);
    };
    Ok(greenlight_gate::trailers::GateRecord::parse(&original.message).map(|_| newest))
}

/// The commit `git revert` names in its message (`This reverts commit <sha>`, 7 to 40 hex
/// digits).
fn reverted_commit(message: &str) -> Option<&str> {
    let rest = &message[message.find("This reverts commit ")? + "This reverts commit ".len()..];
    let hex = rest
        .find(|c: char| !c.is_ascii_hexdigit())
        .map_or(rest, |end| &rest[..end]);
    (7..=40).contains(&hex.len()).then_some(hex)
}

/// A candidate file's documents in YAML, as the run writes them.
pub fn render(docs: &[Value]) -> String {
    docs.iter()
        .map(greenlight_lint::edit::to_yaml)
        .collect::<Vec<_>>()
        .join("---\n")
}

/// `text` (a candidate file) with its workload — the first document — annotated
/// `kept-until: until`.
pub fn with_kept_until(text: &str, until: Timestamp) -> Result<String> {
    let mut docs = greenlight_lint::edit::documents_as_json(text)
        .map_err(|e| anyhow!("does not parse as YAML ({e})"))?;
    let Some(first) = docs.first_mut().filter(|d| d.is_object()) else {
        return Err(anyhow!("holds no Kubernetes object"));
    };
    first["metadata"]["annotations"][KEPT_UNTIL] = Value::String(until.rfc3339());
    Ok(render(&docs))
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
        let orphan = "kind: Deployment\nmetadata: {name: x-candidate, labels: {greenlight.dev/role: candidate}}\n";
        assert_eq!(
            verdict(orphan, None, now),
            Verdict::Orphaned { lock_expired: None }
        );
        assert_eq!(
            verdict(orphan, Some("expires: 2026-02-01T00:00:00Z\n"), now),
            Verdict::Orphaned {
                lock_expired: Some(Timestamp::parse_rfc3339("2026-02-01T00:00:00Z").unwrap())
            }
        );
        assert!(matches!(
            verdict(orphan, Some("expires: 2027-01-01T00:00:00Z\n"), now),
            Verdict::Locked { .. }
        ));
        assert!(matches!(
            verdict("kind: [", None, now),
            Verdict::NotKept { .. }
        ));
        assert!(matches!(
            verdict(
                "kind: ConfigMap\nmetadata: {name: hand-candidate}\n",
                None,
                now
            ),
            Verdict::NotKept { .. }
        ));
        let kept = with_kept_until(orphan, future).unwrap();
        assert_eq!(verdict(&kept, None, now), Verdict::Kept { until: future });
    }

    #[test]
    fn the_reverted_commit_is_read_as_git_revert_writes_it() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(
            reverted_commit(&format!("Revert \"x\"\n\nThis reverts commit {sha}.\n")),
            Some(sha)
        );
        assert_eq!(
            reverted_commit("Revert\n\nThis reverts commit 0123abc (x, 2026).\n"),
            Some("0123abc")
        );
        assert_eq!(reverted_commit("This reverts commit 0123.\n"), None);
        assert_eq!(reverted_commit("promote web"), None);
    }

    #[test]
    fn a_lock_reads_back_what_it_wrote() {
        let at = |s| Timestamp::parse_rfc3339(s).unwrap();
        let lock = Lock {
            workload: "web".into(),
            holder: "ci".into(),
            candidate: "r/web@sha256:ab".into(),
            started: at("2026-06-01T00:00:00Z"),
            expires: at("2026-06-01T01:00:00Z"),
        };
        let text = lock.render();
        assert_eq!(lock_field(&text, "holder"), Some("ci"));
        assert_eq!(lock_field(&text, "candidate"), Some("r/web@sha256:ab"));
        assert_eq!(lock_expires(&text), Some(at("2026-06-01T01:00:00Z")));
        assert_eq!(
            lock_path("deploy/candidates/", "web"),
            "deploy/candidates/web-candidate.lock"
        );
    }
}
