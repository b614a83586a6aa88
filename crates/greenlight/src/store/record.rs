//! The persisted shapes of a watch and of the breaker: the JSON in the `watches.body` column
//! (from schema version 4 without the record's lists, each kept as a part:
//! [`WatchRecord::into_split`]) and in the `breaker` meta row. This module owns every detail of
//! that JSON and the conversions to and from the judge's in-memory types, so a change to those
//! types touches only the conversions here, never a state file already on disk. It never decides
//! anything about a watch, and nothing outside it may serialize a judge type into the store.
//!
//! Record format 1 is exactly the JSON that greenlight wrote before records existed (the
//! in-memory `Watch` serialized field by field), so such bodies, which carry no `format` field,
//! read as format 1. Every body written now carries `"format": 1`. A change to the shape adds a
//! format 2 record beside this one (format 1 stays readable, and is converted on read), never
//! an edit of the format 1 types below.

use anyhow::{Result, bail};
use greenlight_core::breaker::{Breaker, CountedRevert};
use greenlight_core::commit::CommitId;
use greenlight_core::directive::{AppRef, Mode};
use greenlight_core::judge::State;
use greenlight_core::snapshot::{Chronic, Health, ReachCandidate, ReachVia, SourcePaths};
use greenlight_core::time::Timestamp;
use greenlight_core::watch::{
    Baseline, Before, FailedSync, FlatError, FlatWatch, LaterCommit, MergeSide, RevertProposal,
    Seen, Watch,
};
use serde::{Deserialize, Serialize};

/// The newest record format this build reads, and the one it writes.
pub const FORMAT: u32 = 1;

/// A body without a `format` field was written before records existed: format 1.
fn format_1() -> u32 {
    1
}

/// Only the format, read first, so that a body from a newer build is refused by its number
/// rather than by whatever field it added.
#[derive(Deserialize)]
struct Probe {
    #[serde(default = "format_1")]
    format: u32,
}

fn check_format(what: &str, body: &str) -> Result<()> {
    let probe: Probe = serde_json::from_str(body)?;
    if probe.format > FORMAT {
        bail!(
            "{what} has record format {}; this greenlight reads formats up to {FORMAT}",
            probe.format
        );
    }
    Ok(())
}

/// The names of a record's parts (`watch_parts.name`), see [`WatchRecord::into_split`].
pub const PART_OWN_PATHS: &str = "own_paths";
pub const PART_LATER_COMMITS: &str = "later_commits";
pub const PART_BASELINE_BATCH: &str = "baseline_batch";

/// A record split for the state file: the body, and the lists kept as parts.
pub struct SplitRecord {
    /// The record's JSON without `own_paths`, `later_commits` and `baseline.batch`.
    pub body: String,
    /// Shared by the watches of one commit (one list in memory, one part in the file).
    pub own_paths: greenlight_core::commit::Paths,
    pub later_commits: Vec<LaterCommitRecord>,
    /// Absent when the batch is unknown: no part, and none read back.
    pub batch: Option<Vec<LaterCommitRecord>>,
}

/// One watch as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchRecord {
    #[serde(default = "format_1")]
    pub format: u32,
    pub id: String,
    pub commit: String,
    pub subject: String,
    pub app: AppRecord,
    pub mode: ModeRecord,
    pub dry_run: bool,
    pub deadline_ms: i64,
    pub state: StateRecord,
    pub reason: String,
    pub watch_started_at: i64,
    pub reached_at: Option<i64>,
    pub healthy_since: Option<i64>,
    pub finished_at: Option<i64>,
    pub revert_commit: Option<String>,
    pub last_observed_at: Option<i64>,
    pub app_absent_since: Option<i64>,
    pub reach: Option<ReachRecord>,
    pub own_paths: greenlight_core::commit::Paths,
    pub later_commits: Vec<LaterCommitRecord>,
    pub source_paths: Option<SourcePathsRecord>,
    pub arm_blocked: Option<String>,
    pub revert_pending: bool,
    pub deadline_passed: bool,
    pub warned_auto_sync_off: bool,
    pub reported_sync_failure: bool,
    pub seen: SeenRecord,
    /// Absent from bodies written before it was kept (such a watch is judged as it was then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineRecord>,
    /// The streak under way at the deadline paused (absent unless it ever did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streak_pause: Option<StreakPauseRecord>,
    /// Unobserved time inside the healthy streak under way that does not count toward it
    /// (absent when none, and in bodies written before it was kept).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub streak_unobserved_ms: i64,
    /// The app's inputs from outside the watched repository as first observed (absent until
    /// then, and in bodies written before they were kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<std::collections::BTreeMap<String, String>>,
    /// The pull request that proposes a pending revert (absent unless one was opened).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revert_proposal: Option<ProposalRecord>,
    /// `expect=Healthy,Running` (absent otherwise).
    #[serde(default, skip_serializing_if = "is_false")]
    pub expect_running: bool,
    /// The source paths under which later commits that touched none of them were not recorded
    /// (absent when every later commit was, and in bodies written before greenlight dropped any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub later_filtered_under: Option<SourcePathsRecord>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A revert proposed as a pull request and not merged yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProposalRecord {
    pub url: String,
    pub number: u64,
    /// The revert commit, the request's head.
    pub revert: String,
    /// The request's branch.
    pub head: String,
    pub auto_merge: bool,
    /// Newer commits that changed the app while it was open (it is being withdrawn).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub superseded_by: Vec<String>,
    /// Shared with another watch of the commit and withdrawn for that watch's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withdrawn_for: Option<String>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// A streak under way at the deadline that paused on a transient state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreakPauseRecord {
    /// When the streak is paused now; absent once it resumed.
    pub paused_at: Option<i64>,
    /// Healthy time banked before its pauses.
    pub banked_ms: i64,
    pub pauses: u32,
}

/// The app's health before the commit's sync, and after reach.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaselineRecord {
    /// `unknown`, or the health name (`Healthy`, `Progressing`, …).
    pub before: String,
    pub healthy_after_reach: bool,
    pub reach_operation_started: Option<i64>,
    /// The baseline revision (absent when unresolved, and in bodies written before it was
    /// kept: such a watch has no evidence for a revert).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Why the baseline was not clean, when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unclean: Option<String>,
    /// The commits between the baseline revision and the watched one; absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<Vec<LaterCommitRecord>>,
    /// For a watched merge, the parent that was the branch, or `unknown`; absent for a
    /// commit with one parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<String>,
    /// What was not clean in the baseline observation (its resources not Healthy-and-Synced,
    /// its failed PostSync hooks); absent when nothing was, and in bodies written before it
    /// was kept (such a watch is judged strictly, as then).
    #[serde(default, skip_serializing_if = "Chronic::is_empty")]
    pub chronic: Chronic,
    /// The baseline observation was made after Argo CD compared the commit, before its sync
    /// (never clean); absent when it was not, and in bodies written before it was kept.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_compare: bool,
}

impl BaselineRecord {
    fn of(b: &Baseline) -> Option<BaselineRecord> {
        let before = match b.before {
            Before::NotRecorded => return None,
            Before::Unknown => "unknown".to_string(),
            Before::Healthy => Health::Healthy.as_str().to_string(),
            Before::NotHealthy(h) => h.as_str().to_string(),
        };
        Some(BaselineRecord {
            before,
            healthy_after_reach: b.healthy_after_reach,
            reach_operation_started: ts(b.reach_operation_started),
            revision: b.revision.clone(),
            unclean: b.unclean.clone(),
            chronic: b.chronic.clone(),
            after_compare: b.after_compare,
            merge: b.merge_side.as_ref().map(|side| match side {
                MergeSide::Mainline(p) => p.as_str().to_string(),
                MergeSide::Unknown => "unknown".to_string(),
            }),
            batch: b.batch.as_ref().map(|batch| {
                batch
                    .iter()
                    .map(|c| LaterCommitRecord {
                        sha: c.sha.as_str().to_string(),
                        changed_paths: c.changed_paths.clone(),
                    })
                    .collect()
            }),
        })
    }

    fn into_baseline(self) -> Baseline {
        Baseline {
            before: if self.before == "unknown" {
                Before::Unknown
            } else {
                Before::of(Health::parse(&self.before))
            },
            healthy_after_reach: self.healthy_after_reach,
            reach_operation_started: self.reach_operation_started.map(Timestamp),
            revision: self.revision,
            unclean: self.unclean,
            chronic: self.chronic,
            after_compare: self.after_compare,
            // A side that does not parse is no side greenlight can tell.
            merge_side: self.merge.map(|m| match CommitId::parse(&m) {
                Ok(p) => MergeSide::Mainline(p),
                Err(_) => MergeSide::Unknown,
            }),
            // A commit id that does not parse makes the whole batch unknown: no evidence.
            batch: self.batch.and_then(|batch| {
                batch
                    .into_iter()
                    .map(|c| {
                        Some(LaterCommit {
                            sha: CommitId::parse(&c.sha).ok()?,
                            changed_paths: c.changed_paths,
                        })
                    })
                    .collect()
            }),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppRecord {
    pub namespace: Option<String>,
    pub name: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModeRecord {
    Shadow,
    Arm,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum StateRecord {
    WaitingReach,
    Judging,
    Confirmed,
    Fail,
    Reverted,
    NotReached,
    ErrorUnwatchable,
    Inconclusive,
    RevertFailed,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReachRecord {
    pub revision: String,
    pub via: ViaRecord,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ViaRecord {
    OperationSucceeded,
    OperationFailed {
        phase: String,
        message: String,
    },
    PostSyncHookFailed {
        phase: String,
        message: String,
        hooks: Vec<String>,
    },
    SyncedRevision,
    History {
        id: i64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaterCommitRecord {
    pub sha: String,
    pub changed_paths: greenlight_core::commit::Paths,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SourcePathsRecord {
    Known(Vec<String>),
    Unknown { why: String },
}

impl SourcePathsRecord {
    fn of(p: &SourcePaths) -> SourcePathsRecord {
        match p {
            SourcePaths::Known(ps) => SourcePathsRecord::Known(ps.clone()),
            SourcePaths::Unknown { why } => SourcePathsRecord::Unknown { why: why.clone() },
        }
    }
    fn into_paths(self) -> SourcePaths {
        match self {
            SourcePathsRecord::Known(ps) => SourcePaths::Known(ps),
            SourcePathsRecord::Unknown { why } => SourcePaths::Unknown { why },
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeenRecord {
    pub health: Option<HealthRecord>,
    pub sync: String,
    pub revision: String,
    pub operation: Option<String>,
    pub unhealthy_resources: Vec<String>,
    pub resource_health_source: Option<String>,
    pub why_not_healthy: Option<String>,
    /// Absent from bodies written before greenlight read Argo CD's conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison_error: Option<String>,
    /// Absent from bodies written before greenlight told failed syncs from reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_sync: Option<FailedSyncRecord>,
    /// Absent when false, and from bodies written before greenlight kept it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub transient: bool,
    /// Absent unless a compared revision had the commit with no sync operation run with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_applied: Option<String>,
    /// The chronic conditions the last health judgement left out as in the baseline; absent
    /// when none (and in bodies written before they were).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedSyncRecord {
    pub revision: String,
    pub phase: String,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HealthRecord {
    Healthy,
    Progressing,
    Degraded,
    Suspended,
    Missing,
    Unknown,
}

impl WatchRecord {
    /// Parse a stored body of any format this build reads.
    pub fn parse(body: &str) -> Result<WatchRecord> {
        check_format("the watch record", body)?;
        Ok(serde_json::from_str(body)?)
    }

    /// The body to store: always the newest format.
    pub fn to_body(&self) -> Result<String> {
        let mut r = self.clone();
        r.format = FORMAT;
        Ok(serde_json::to_string(&r)?)
    }

    /// The record as the state file keeps it from schema version 4 (`docs/state.md#parts`):
    /// the body without the lists of commits and paths, which are most of a record's size,
    /// change seldom and are often the same in many watches; each list that is present becomes
    /// a part of its own.
    pub fn into_split(mut self) -> Result<SplitRecord> {
        self.format = FORMAT;
        let own_paths = std::mem::take(&mut self.own_paths);
        let later_commits = std::mem::take(&mut self.later_commits);
        let batch = self.baseline.as_mut().and_then(|b| b.batch.take());
        let mut body = serde_json::to_value(&self)?;
        let Some(fields) = body.as_object_mut() else {
            bail!("watch {}: the record is not a JSON object", self.id);
        };
        fields.remove(PART_OWN_PATHS);
        fields.remove(PART_LATER_COMMITS);
        Ok(SplitRecord {
            body: body.to_string(),
            own_paths,
            later_commits,
            batch,
        })
    }

    /// Parse a stored body with its parts (name, JSON), each put back where
    /// [`WatchRecord::into_split`] took it from. Without parts the body is whole (written before
    /// schema version 4, or by a store that keeps records whole).
    pub fn parse_with_parts(body: &str, parts: &[(String, String)]) -> Result<WatchRecord> {
        if parts.is_empty() {
            return Self::parse(body);
        }
        check_format("the watch record", body)?;
        let mut record: serde_json::Value = serde_json::from_str(body)?;
        let Some(fields) = record.as_object_mut() else {
            bail!("the watch record is not a JSON object");
        };
        for (name, json) in parts {
            let value: serde_json::Value = serde_json::from_str(json)
                .map_err(|e| anyhow::anyhow!("its part {name} is not JSON: {e}"))?;
            match name.as_str() {
                PART_OWN_PATHS | PART_LATER_COMMITS => {
                    fields.insert(name.clone(), value);
                }
                PART_BASELINE_BATCH => {
                    let Some(baseline) = fields
                        .get_mut("baseline")
                        .and_then(serde_json::Value::as_object_mut)
                    else {
                        bail!("its part {name} belongs to a baseline the record does not have");
                    };
                    baseline.insert("batch".to_string(), value);
                }
                other => bail!("its part {other:?} is none this greenlight knows"),
            }
        }
        Ok(serde_json::from_value(record)?)
    }

    /// Whether the daemon must load this watch at start: still being judged, or a FAIL whose
    /// revert was decided but never reported back (the judge re-issues it at start).
    pub fn is_live(&self) -> bool {
        matches!(self.state, StateRecord::WaitingReach | StateRecord::Judging)
            || self.revert_pending
    }

    pub fn state_str(&self) -> &'static str {
        State::from(self.state).as_str()
    }

    pub fn app_str(&self) -> String {
        AppRef::from(self.app.clone()).to_string()
    }
}

fn ts(t: Option<Timestamp>) -> Option<i64> {
    t.map(|t| t.0)
}

impl From<&Watch> for WatchRecord {
    fn from(w: &Watch) -> WatchRecord {
        // The judge's own flat view of a watch, then the disk shape of it.
        let w = w.to_flat();
        WatchRecord {
            format: FORMAT,
            id: w.id.clone(),
            commit: w.commit.as_str().to_string(),
            subject: w.subject.clone(),
            app: AppRecord {
                namespace: w.app.namespace.clone(),
                name: w.app.name.clone(),
            },
            mode: match w.mode {
                Mode::Shadow => ModeRecord::Shadow,
                Mode::Arm => ModeRecord::Arm,
            },
            dry_run: w.dry_run,
            deadline_ms: w.deadline_ms,
            state: w.state.into(),
            reason: w.reason.clone(),
            watch_started_at: w.watch_started_at.0,
            reached_at: ts(w.reached_at),
            healthy_since: ts(w.healthy_since),
            finished_at: ts(w.finished_at),
            revert_commit: w.revert_commit.as_ref().map(|c| c.as_str().to_string()),
            last_observed_at: ts(w.last_observed_at),
            app_absent_since: ts(w.app_absent_since),
            reach: w.reach.as_ref().map(|r| ReachRecord {
                revision: r.revision.clone(),
                via: match &r.via {
                    ReachVia::OperationSucceeded => ViaRecord::OperationSucceeded,
                    ReachVia::OperationFailed { phase, message } => ViaRecord::OperationFailed {
                        phase: phase.clone(),
                        message: message.clone(),
                    },
                    ReachVia::PostSyncHookFailed {
                        phase,
                        message,
                        hooks,
                    } => ViaRecord::PostSyncHookFailed {
                        phase: phase.clone(),
                        message: message.clone(),
                        hooks: hooks.clone(),
                    },
                    ReachVia::SyncedRevision => ViaRecord::SyncedRevision,
                    ReachVia::History { id } => ViaRecord::History { id: *id },
                },
            }),
            own_paths: w.own_paths.clone(),
            later_commits: w
                .later_commits
                .iter()
                .map(|c| LaterCommitRecord {
                    sha: c.sha.as_str().to_string(),
                    changed_paths: c.changed_paths.clone(),
                })
                .collect(),
            source_paths: w.source_paths.as_ref().map(SourcePathsRecord::of),
            later_filtered_under: w.later_filtered_under.as_ref().map(SourcePathsRecord::of),
            arm_blocked: w.arm_blocked.clone(),
            revert_pending: w.revert_pending,
            deadline_passed: w.deadline_passed,
            warned_auto_sync_off: w.warned_auto_sync_off,
            reported_sync_failure: w.reported_sync_failure,
            seen: SeenRecord {
                health: w.seen.health.map(Into::into),
                sync: w.seen.sync.clone(),
                revision: w.seen.revision.clone(),
                operation: w.seen.operation.clone(),
                unhealthy_resources: w.seen.unhealthy_resources.clone(),
                resource_health_source: w.seen.resource_health_source.clone(),
                why_not_healthy: w.seen.why_not_healthy.clone(),
                comparison_error: w.seen.comparison_error.clone(),
                failed_sync: w.seen.failed_sync.as_ref().map(|f| FailedSyncRecord {
                    revision: f.revision.clone(),
                    phase: f.phase.clone(),
                    message: f.message.clone(),
                }),
                transient: w.seen.transient,
                not_applied: w.seen.not_applied.clone(),
                left_out: w.seen.left_out.clone(),
            },
            baseline: BaselineRecord::of(&w.baseline),
            streak_pause: (w.streak_pauses > 0 || w.streak_paused_at.is_some()).then(|| {
                StreakPauseRecord {
                    paused_at: ts(w.streak_paused_at),
                    banked_ms: w.streak_banked_ms,
                    pauses: w.streak_pauses,
                }
            }),
            streak_unobserved_ms: w.streak_unobserved_ms,
            inputs: w.inputs.clone(),
            expect_running: w.expect_running,
            revert_proposal: w.revert_proposal.as_ref().map(|p| ProposalRecord {
                url: p.url.clone(),
                number: p.number,
                revert: p.revert.as_str().to_string(),
                head: p.head.clone(),
                auto_merge: p.auto_merge,
                superseded_by: p
                    .superseded_by
                    .iter()
                    .map(|c| c.as_str().to_string())
                    .collect(),
                withdrawn_for: p.withdrawn_for.clone(),
            }),
        }
    }
}

/// A stored body that names something that is not a commit id, or whose fields contradict its
/// state: no watch greenlight ran looks like it.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("watch {id}: {field} {value:?} is not a full commit id")]
    CommitId {
        id: String,
        field: &'static str,
        value: String,
    },
    #[error(transparent)]
    Contradiction(#[from] FlatError),
}

impl TryFrom<WatchRecord> for Watch {
    type Error = RecordError;

    fn try_from(r: WatchRecord) -> Result<Watch, RecordError> {
        let t = |v: Option<i64>| v.map(Timestamp);
        let id = r.id.clone();
        let commit_id = |field: &'static str, value: String| {
            CommitId::parse(&value).map_err(|_| RecordError::CommitId {
                id: id.clone(),
                field,
                value,
            })
        };
        let later_commits = r
            .later_commits
            .into_iter()
            .map(|c| {
                Ok(LaterCommit {
                    sha: commit_id("later_commits[].sha", c.sha)?,
                    changed_paths: c.changed_paths,
                })
            })
            .collect::<Result<Vec<_>, RecordError>>()?;
        let revert_proposal = match r.revert_proposal {
            None => None,
            Some(p) => Some(RevertProposal {
                revert: commit_id("revert_proposal.revert", p.revert)?,
                superseded_by: p
                    .superseded_by
                    .into_iter()
                    .map(|c| commit_id("revert_proposal.superseded_by[]", c))
                    .collect::<Result<_, _>>()?,
                url: p.url,
                number: p.number,
                head: p.head,
                auto_merge: p.auto_merge,
                withdrawn_for: p.withdrawn_for,
            }),
        };
        let flat = FlatWatch {
            revert_proposal,
            expect_running: r.expect_running,
            id: r.id,
            commit: commit_id("commit", r.commit)?,
            subject: r.subject,
            app: r.app.into(),
            mode: match r.mode {
                ModeRecord::Shadow => Mode::Shadow,
                ModeRecord::Arm => Mode::Arm,
            },
            dry_run: r.dry_run,
            deadline_ms: r.deadline_ms,
            state: r.state.into(),
            reason: r.reason,
            watch_started_at: Timestamp(r.watch_started_at),
            reached_at: t(r.reached_at),
            healthy_since: t(r.healthy_since),
            finished_at: t(r.finished_at),
            revert_commit: r
                .revert_commit
                .map(|c| commit_id("revert_commit", c))
                .transpose()?,
            last_observed_at: t(r.last_observed_at),
            app_absent_since: t(r.app_absent_since),
            reach: r.reach.map(|c| ReachCandidate {
                revision: c.revision,
                via: match c.via {
                    ViaRecord::OperationSucceeded => ReachVia::OperationSucceeded,
                    ViaRecord::OperationFailed { phase, message } => {
                        ReachVia::OperationFailed { phase, message }
                    }
                    ViaRecord::PostSyncHookFailed {
                        phase,
                        message,
                        hooks,
                    } => ReachVia::PostSyncHookFailed {
                        phase,
                        message,
                        hooks,
                    },
                    ViaRecord::SyncedRevision => ReachVia::SyncedRevision,
                    ViaRecord::History { id } => ReachVia::History { id },
                },
            }),
            own_paths: r.own_paths,
            later_commits,
            source_paths: r.source_paths.map(SourcePathsRecord::into_paths),
            later_filtered_under: r.later_filtered_under.map(SourcePathsRecord::into_paths),
            arm_blocked: r.arm_blocked,
            revert_pending: r.revert_pending,
            deadline_passed: r.deadline_passed,
            warned_auto_sync_off: r.warned_auto_sync_off,
            reported_sync_failure: r.reported_sync_failure,
            seen: Seen {
                health: r.seen.health.map(Into::into),
                sync: r.seen.sync,
                revision: r.seen.revision,
                operation: r.seen.operation,
                unhealthy_resources: r.seen.unhealthy_resources,
                resource_health_source: r.seen.resource_health_source,
                why_not_healthy: r.seen.why_not_healthy,
                comparison_error: r.seen.comparison_error,
                failed_sync: r.seen.failed_sync.map(|f| FailedSync {
                    revision: f.revision,
                    phase: f.phase,
                    message: f.message,
                }),
                transient: r.seen.transient,
                not_applied: r.seen.not_applied,
                left_out: r.seen.left_out,
            },
            baseline: r
                .baseline
                .map(BaselineRecord::into_baseline)
                .unwrap_or_default(),
            streak_paused_at: r
                .streak_pause
                .as_ref()
                .and_then(|p| p.paused_at)
                .map(Timestamp),
            streak_banked_ms: r.streak_pause.as_ref().map_or(0, |p| p.banked_ms),
            streak_pauses: r.streak_pause.as_ref().map_or(0, |p| p.pauses),
            streak_unobserved_ms: r.streak_unobserved_ms,
            inputs: r.inputs,
        };
        Ok(Watch::from_flat(flat)?)
    }
}

impl From<AppRecord> for AppRef {
    fn from(a: AppRecord) -> AppRef {
        AppRef {
            namespace: a.namespace,
            name: a.name,
        }
    }
}

// The enums are mapped variant by variant, with no wildcard: a state or health added to the
// judge fails to compile here until its stored spelling is decided.
impl From<State> for StateRecord {
    fn from(s: State) -> StateRecord {
        match s {
            State::WaitingReach => StateRecord::WaitingReach,
            State::Judging => StateRecord::Judging,
            State::Confirmed => StateRecord::Confirmed,
            State::Fail => StateRecord::Fail,
            State::Reverted => StateRecord::Reverted,
            State::NotReached => StateRecord::NotReached,
            State::ErrorUnwatchable => StateRecord::ErrorUnwatchable,
            State::Inconclusive => StateRecord::Inconclusive,
            State::RevertFailed => StateRecord::RevertFailed,
        }
    }
}

impl From<StateRecord> for State {
    fn from(s: StateRecord) -> State {
        match s {
            StateRecord::WaitingReach => State::WaitingReach,
            StateRecord::Judging => State::Judging,
            StateRecord::Confirmed => State::Confirmed,
            StateRecord::Fail => State::Fail,
            StateRecord::Reverted => State::Reverted,
            StateRecord::NotReached => State::NotReached,
            StateRecord::ErrorUnwatchable => State::ErrorUnwatchable,
            StateRecord::Inconclusive => State::Inconclusive,
            StateRecord::RevertFailed => State::RevertFailed,
        }
    }
}

impl From<Health> for HealthRecord {
    fn from(h: Health) -> HealthRecord {
        match h {
            Health::Healthy => HealthRecord::Healthy,
            Health::Progressing => HealthRecord::Progressing,
            Health::Degraded => HealthRecord::Degraded,
            Health::Suspended => HealthRecord::Suspended,
            Health::Missing => HealthRecord::Missing,
            Health::Unknown => HealthRecord::Unknown,
        }
    }
}

impl From<HealthRecord> for Health {
    fn from(h: HealthRecord) -> Health {
        match h {
            HealthRecord::Healthy => Health::Healthy,
            HealthRecord::Progressing => Health::Progressing,
            HealthRecord::Degraded => Health::Degraded,
            HealthRecord::Suspended => Health::Suspended,
            HealthRecord::Missing => Health::Missing,
            HealthRecord::Unknown => Health::Unknown,
        }
    }
}

/// The breaker as stored (the `breaker` meta row).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerRecord {
    #[serde(default = "format_1")]
    pub format: u32,
    pub open: bool,
    pub consecutive_reverts: u32,
    /// The counted reverts with their commits and apps; absent when none is known (a body
    /// written before they were recorded reads as reverts of unknown apps).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reverts: Vec<CountedRevertRecord>,
}

/// One counted revert as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountedRevertRecord {
    pub commit: CommitId,
    pub revert: CommitId,
    pub apps: Vec<String>,
}

impl BreakerRecord {
    pub fn parse(body: &str) -> Result<BreakerRecord> {
        check_format("the breaker record", body)?;
        Ok(serde_json::from_str(body)?)
    }

    pub fn to_body(&self) -> Result<String> {
        let mut r = self.clone();
        r.format = FORMAT;
        Ok(serde_json::to_string(&r)?)
    }
}

impl From<&Breaker> for BreakerRecord {
    fn from(b: &Breaker) -> BreakerRecord {
        BreakerRecord {
            format: FORMAT,
            open: b.open,
            consecutive_reverts: b.consecutive_reverts,
            reverts: b
                .reverts
                .iter()
                .map(|r| CountedRevertRecord {
                    commit: r.commit.clone(),
                    revert: r.revert.clone(),
                    apps: r.apps.iter().cloned().collect(),
                })
                .collect(),
        }
    }
}

impl From<BreakerRecord> for Breaker {
    fn from(b: BreakerRecord) -> Breaker {
        // A count below the known reverts would be a hand-edited file: the known ones count.
        let consecutive_reverts = b.consecutive_reverts.max(b.reverts.len() as u32);
        Breaker {
            open: b.open,
            consecutive_reverts,
            reverts: b
                .reverts
                .into_iter()
                .map(|r| CountedRevert {
                    commit: r.commit,
                    revert: r.revert,
                    apps: r.apps.into_iter().collect(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// A body as schema-1 greenlight wrote it, every optional part present and every enum in a
    /// variant with data: the record must read all of it and write it back unchanged.
    fn format_1_body() -> Value {
        json!({
            "id": "0123456789abcdef0123456789abcdef01234567:1",
            "commit": "0123456789abcdef0123456789abcdef01234567",
            "subject": "web: 2.0",
            "app": {"namespace": "apps", "name": "web"},
            "mode": "arm",
            "dry_run": false,
            "deadline_ms": 900000,
            "state": "FAIL",
            "reason": "not healthy within 15m after reach: health=Degraded; reverting",
            "watch_started_at": 1700000000000i64,
            "reached_at": 1700000001000i64,
            "healthy_since": 1700000002000i64,
            "finished_at": 1700000003000i64,
            "revert_commit": null,
            "last_observed_at": 1700000003000i64,
            "app_absent_since": 1700000000500i64,
            "reach": {"revision": "0123456789abcdef0123456789abcdef01234567",
                      "via": {"OperationFailed": {"phase": "Failed", "message": "boom"}}},
            "own_paths": ["apps/web/deploy.yaml"],
            "later_commits": [{"sha": "89abcdef0123456789abcdef0123456789abcdef",
                               "changed_paths": ["apps/other/x"]}],
            "source_paths": {"Unknown": {"why": "a plugin source"}},
            "arm_blocked": "commit changes nothing under app web's source paths",
            "revert_pending": true,
            "deadline_passed": true,
            "warned_auto_sync_off": true,
            "reported_sync_failure": true,
            "seen": {"health": "Degraded", "sync": "Synced", "revision": "0123",
                     "operation": "Failed", "unhealthy_resources": ["Deployment/apps/web=Degraded"],
                     "resource_health_source": "resource-tree", "why_not_healthy": "health=Degraded"}
        })
    }

    #[test]
    fn a_format_1_body_without_a_format_field_reads_and_writes_back_unchanged() {
        let old = format_1_body();
        let r = WatchRecord::parse(&old.to_string()).unwrap();
        assert_eq!(r.format, 1);
        assert!(r.is_live(), "a FAIL with its revert pending is live");
        // Through the in-memory type and back: nothing is lost or renamed.
        let back = WatchRecord::from(&Watch::try_from(r).unwrap());
        let mut written: Value = serde_json::from_str(&back.to_body().unwrap()).unwrap();
        assert_eq!(written["format"], FORMAT);
        written.as_object_mut().unwrap().remove("format");
        assert_eq!(written, old);
    }

    #[test]
    fn the_other_variants_survive_the_round_trip() {
        for (via, paths) in [
            (
                json!("OperationSucceeded"),
                json!({"Known": ["apps/web", ""]}),
            ),
            (json!("SyncedRevision"), Value::Null),
            (json!({"History": {"id": 7}}), json!({"Known": []})),
        ] {
            let mut old = format_1_body();
            old["reach"]["via"] = via;
            // The paths later commits were left out under, when there are any.
            if !paths.is_null() {
                old["later_filtered_under"] = paths.clone();
            }
            old["source_paths"] = paths;
            old["state"] = json!("CONFIRMED");
            old["revert_pending"] = json!(false);
            old["app"]["namespace"] = Value::Null;
            old["seen"]["health"] = Value::Null;
            let r = WatchRecord::parse(&old.to_string()).unwrap();
            assert!(!r.is_live());
            let mut written =
                serde_json::to_value(WatchRecord::from(&Watch::try_from(r).unwrap())).unwrap();
            written.as_object_mut().unwrap().remove("format");
            assert_eq!(written, old);
        }
    }

    #[test]
    fn a_newer_format_is_refused_by_its_number() {
        let mut body = format_1_body();
        body["format"] = json!(FORMAT + 1);
        body["something_new"] = json!(true);
        let err = WatchRecord::parse(&body.to_string()).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("record format {}", FORMAT + 1)),
            "{err}"
        );
        let err = BreakerRecord::parse(r#"{"format":9,"open":true}"#).unwrap_err();
        assert!(err.to_string().contains("record format 9"), "{err}");
    }

    #[test]
    fn liveness_is_waiting_judging_or_a_pending_revert() {
        let mut r = WatchRecord::parse(&format_1_body().to_string()).unwrap();
        for (state, pending, live) in [
            (StateRecord::WaitingReach, false, true),
            (StateRecord::Judging, false, true),
            (StateRecord::Fail, true, true),
            (StateRecord::Fail, false, false),
            (StateRecord::Confirmed, false, false),
            (StateRecord::Reverted, false, false),
            (StateRecord::RevertFailed, false, false),
        ] {
            r.state = state;
            r.revert_pending = pending;
            assert_eq!(r.is_live(), live, "{state:?} pending={pending}");
        }
    }

    #[test]
    fn the_breaker_keeps_its_counted_reverts_and_their_apps() {
        let id = |c: char| CommitId::parse(&c.to_string().repeat(40)).unwrap();
        let b = Breaker {
            open: false,
            consecutive_reverts: 1,
            reverts: vec![CountedRevert {
                commit: id('a'),
                revert: id('b'),
                apps: ["other".to_string(), "web".to_string()].into(),
            }],
        };
        let body = BreakerRecord::from(&b).to_body().unwrap();
        let back: Breaker = BreakerRecord::parse(&body).unwrap().into();
        assert_eq!(back, b);
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            v["consecutive_reverts"], 1,
            "the count as before, for older readers"
        );
        assert_eq!(v["reverts"][0]["apps"], json!(["other", "web"]));
    }

    #[test]
    fn the_breaker_reads_the_body_written_before_records() {
        let b: Breaker = BreakerRecord::parse(r#"{"open":true,"consecutive_reverts":2}"#)
            .unwrap()
            .into();
        assert_eq!(
            b,
            Breaker {
                open: true,
                consecutive_reverts: 2,
                reverts: Vec::new(),
            }
        );
        let body: Value =
            serde_json::from_str(&BreakerRecord::from(&b).to_body().unwrap()).unwrap();
        assert_eq!(
            body,
            json!({"format": 1, "open": true, "consecutive_reverts": 2})
        );
    }
}
