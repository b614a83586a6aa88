//! The catalogue of what greenlight says: every reason a watch states (`status`, the state
//! file) and every message of the judge's events, as typed data, and the one place their words
//! are written (the `Display` impls below). The promotion gate's words are the gate crate's. The judge decides which variant applies
//! and never formats a sentence of its own; nothing here decides anything. Users and tests grep
//! these words, so a sentence changes only when it was wrong.
//!
//! State files hold reasons as text. [`Verdict::retype`] and friends read such text back into
//! the variant whose words it is, and keep it verbatim (`Recorded`) when no variant says
//! exactly that, so an old file's reasons display unchanged.

use crate::commit::{CommitId, NotACommitId};
use crate::directive::{AppRef, DirectiveError, Mode};
use crate::snapshot::{Health, ReachVia, ResourceHealthSource};
use crate::time::{Timestamp, human_duration, parse_human_duration};
use crate::watch::{Before, FailedSync, LaterCommit, State};
use std::fmt;

/// What an observation of an absent app says about its health.
pub const APP_DOES_NOT_EXIST: &str = "the app does not exist";
/// The cause quoted when a streak under way at the deadline broke without a recorded reason.
pub const HEALTH_BROKE: &str = "health broke";
/// The cause quoted when the app was not healthy at the deadline without a recorded reason.
pub const NOT_HEALTHY: &str = "not healthy";

/// Why a watch is where it is: what `status` shows and the state file records. Borrowed from
/// the watch's phase ([`crate::watch::Watch::reason`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason<'a> {
    WaitingReach,
    Judging,
    /// FAIL in arm mode: the revert is requested and the executor has not reported back.
    Reverting(&'a Failure),
    /// FAIL in arm mode: the revert is proposed as a pull request that has not merged.
    Proposed(&'a Failure, &'a crate::watch::RevertProposal),
    Verdict(&'a Verdict),
}

/// A failure the judge saw in the app's health: the FAILs a revert may follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Not healthy by reach + deadline (`docs/verdicts.md#deadline`), with what was seen.
    NotHealthy { deadline_ms: i64, why: String },
    /// The streak under way at the deadline broke (`docs/verdicts.md#deadline`).
    StreakBroke { why: String },
    /// Argo CD applied the commit and a PostSync hook of that sync failed
    /// (`docs/verdicts.md#operation-outcomes`). `hooks` labels each failed hook.
    PostSyncHookFailed {
        revision: String,
        message: String,
        hooks: Vec<String>,
    },
    /// Words read back from a state file that no variant above says exactly.
    Recorded(String),
}

/// Why a FAIL was not reverted (`docs/verdicts.md#safety`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoRevert {
    Shadow,
    ArmBlocked(ArmBlocked),
    DryRun,
    BreakerOpen {
        after: u32,
    },
    /// The app was not Healthy before the commit's sync (or not observed then) and never
    /// became healthy after reach: the failure is not shown to be the commit's
    /// (`docs/verdicts.md#baseline`).
    NotShownAtFault {
        before: Before,
    },
    /// The evidence a revert needs is missing (`docs/verdicts.md#evidence`).
    NoEvidence(NoEvidence),
}

/// The words every [`NoEvidence`] starts with.
pub const NO_EVIDENCE: &str = "no evidence that this commit broke the app";

/// What is missing from the evidence standard for a revert (`docs/verdicts.md#evidence`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoEvidence {
    /// No observation of the app idle before the commit's sync: no clean before.
    NoBaseline,
    /// The last observation before the sync was not clean.
    NotClean {
        revision: Option<String>,
        why: String,
    },
    /// The commits between the baseline revision and this commit are not known to greenlight:
    /// the sync may have brought others with it.
    BatchUnknown { revision: Option<String> },
    /// Other commits that changed the app came in the same sync.
    OtherSuspects {
        app: AppRef,
        commit: CommitId,
        suspects: Vec<CommitId>,
    },
    /// Commits that changed the app landed after the verdict, before the revert landed.
    Superseded { app: AppRef, newer: Vec<CommitId> },
    /// A watched merge whose branch side greenlight could not tell.
    MergeSideUnknown { commit: CommitId },
    /// Words read back from a state file.
    Recorded(String),
}

impl NoEvidence {
    /// The variant whose words `text` is, from what the record holds, or the text as recorded.
    pub fn retype(text: &str, rec: &Recorded<'_>) -> NoEvidence {
        let b = rec.baseline;
        // The commits a list of short ids names, each found in `among`.
        let named = |list: &str, among: &[LaterCommit]| -> Option<Vec<CommitId>> {
            list.split(", ")
                .map(|s| {
                    among
                        .iter()
                        .find(|c| c.sha.short() == s)
                        .map(|c| c.sha.clone())
                })
                .collect()
        };
        let between = |after: &str, before: &str| -> Option<String> {
            let rest = &text[text.find(after)? + after.len()..];
            Some(rest[..rest.find(before)?].to_string())
        };
        let mut candidates = vec![
            NoEvidence::NoBaseline,
            NoEvidence::MergeSideUnknown {
                commit: rec.commit.clone(),
            },
            NoEvidence::BatchUnknown {
                revision: b.revision.clone(),
            },
        ];
        if let Some(why) = &b.unclean {
            candidates.push(NoEvidence::NotClean {
                revision: b.revision.clone(),
                why: why.clone(),
            });
        }
        if let Some(suspects) = between("also brought commit(s) ", " that changed app ")
            .and_then(|l| named(&l, b.batch.as_deref().unwrap_or_default()))
        {
            candidates.push(NoEvidence::OtherSuspects {
                app: rec.app.clone(),
                commit: rec.commit.clone(),
                suspects,
            });
        }
        if let Some(newer) =
            between("newer commit(s) ", " changed app ").and_then(|l| named(&l, rec.later_commits))
        {
            candidates.push(NoEvidence::Superseded {
                app: rec.app.clone(),
                newer,
            });
        }
        candidates
            .into_iter()
            .find(|c| c.to_string() == text)
            .unwrap_or_else(|| NoEvidence::Recorded(text.to_string()))
    }
}

fn shorts(commits: &[CommitId]) -> String {
    commits
        .iter()
        .map(CommitId::short)
        .collect::<Vec<_>>()
        .join(", ")
}

fn short_revision(revision: &Option<String>) -> String {
    match revision {
        // A revision read back from a state file may be anything: never sliced mid-character.
        Some(r) => format!("revision {}", r.chars().take(7).collect::<String>()),
        None => "an unresolved revision".to_string(),
    }
}

impl fmt::Display for NoEvidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoEvidence::NoBaseline => write!(
                f,
                "{NO_EVIDENCE}: the app was never observed idle before this commit's sync began (no clean before); not reverted"
            ),
            NoEvidence::NotClean { revision, why } => write!(
                f,
                "{NO_EVIDENCE}: before this commit's sync the app was not clean at {} ({why}), so what failed may have failed before it; not reverted",
                short_revision(revision)
            ),
            NoEvidence::BatchUnknown { revision } => write!(
                f,
                "{NO_EVIDENCE}: greenlight does not know every commit between the app's baseline ({}) and this commit, so the sync may have deployed others with it; not reverted",
                short_revision(revision)
            ),
            NoEvidence::OtherSuspects {
                app,
                commit,
                suspects,
            } => write!(
                f,
                "{NO_EVIDENCE} alone: the sync that deployed it also brought commit(s) {} that changed app {app}'s source paths; suspects: {}, {}; not reverted",
                shorts(suspects),
                commit.short(),
                shorts(suspects)
            ),
            NoEvidence::Superseded { app, newer } => write!(
                f,
                "{NO_EVIDENCE} any more: newer commit(s) {} changed app {app}'s source paths after the verdict, before the revert landed (a fix-forward, or a change Argo CD may have synced since); not reverted",
                shorts(newer)
            ),
            NoEvidence::MergeSideUnknown { commit } => write!(
                f,
                "{NO_EVIDENCE}: {} is a merge and greenlight could not tell which parent was the branch before it (no tip it recorded is in only one of them), so a revert could undo the wrong side; not reverted",
                commit.short()
            ),
            NoEvidence::Recorded(text) => f.write_str(text),
        }
    }
}

/// Why arm was downgraded to shadow for a watch (`docs/verdicts.md#attribution`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArmBlocked {
    /// The commit changes nothing under the app's source paths.
    NothingUnderPaths { app: AppRef },
    /// Words read back from a state file that the variant above does not say exactly.
    Recorded(String),
}

/// How a revert the judge requested landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Landed {
    Pushed,
    Adopted,
    /// Proposed as a pull request (`--revert-via pull-request`), and merged.
    Merged,
}

/// `NOT_REACHED` (`docs/verdicts.md#not-reached`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotReached {
    AppMissing {
        deadline_ms: i64,
        app: AppRef,
    },
    /// `sync` is empty when Argo CD never said.
    NeverSynced {
        deadline_ms: i64,
        revision: String,
        sync: String,
    },
    /// Argo CD could not render the app's manifests when the deadline came (a `ComparisonError`
    /// condition): it compared nothing and synced nothing.
    ComparisonError {
        deadline_ms: i64,
        message: String,
    },
    /// Argo CD compared a revision with the commit as Synced, but no sync operation ran with
    /// it: the commit changed nothing Argo CD compares (hooks, files it does not render), and
    /// takes effect with the next sync (`docs/verdicts.md#reach`).
    NotApplied {
        deadline_ms: i64,
        revision: String,
    },
    /// Argo CD's last sync of a revision with the commit failed before it applied it
    /// (`docs/verdicts.md#operation-outcomes`), and no later sync applied it.
    SyncFailed {
        deadline_ms: i64,
        revision: String,
        phase: String,
        message: String,
    },
    /// After reach, Argo CD deployed a revision that does not contain the commit (the branch
    /// was force-pushed back past it, or the app was rolled back): it is no longer in effect.
    Withdrawn {
        revision: String,
    },
    /// greenlight's own revert of the commit, pushed for another app's failure, landed before a
    /// verdict on this app: it is no longer in effect, and nothing was judged here (a shadow
    /// watch's record must not read as a human's revert).
    RevertedForAnotherApp {
        revert: CommitId,
    },
}

/// `ERROR_UNWATCHABLE` (`docs/verdicts.md#unwatchable`). `app` is the Application's name as
/// observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unwatchable {
    /// Still absent after the unknown-app grace.
    AppMissing {
        app: AppRef,
        grace_ms: i64,
    },
    NotFromRepo {
        app: String,
        repo: String,
        sources: Vec<String>,
    },
    HelmChart {
        app: String,
        chart: String,
    },
    /// A revision that is not a git SHA (a chart version, an OCI digest).
    NotGitRevision {
        app: String,
        revision: String,
    },
    /// `target` as shown: an empty `targetRevision` is `HEAD`.
    OtherBranch {
        app: String,
        target: String,
        branch: String,
    },
    /// `spec.sourceHydrator`: the app deploys a branch the hydrator writes.
    SourceHydrator {
        app: String,
    },
    /// A trailer's bare name matches Applications in several namespaces: their health would
    /// mix. `namespaces` in order.
    AmbiguousApp {
        app: String,
        namespaces: Vec<String>,
    },
    /// `expect=Healthy,Running` on an app whose manifests name a tag, not a digest: what its
    /// Pods run cannot be compared with git.
    MutableTag {
        what: String,
    },
}

/// Which deadline decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deadline {
    /// Watch start + deadline.
    Reach,
    /// Reach + deadline.
    Health,
}

/// `INCONCLUSIVE` (`docs/verdicts.md#inconclusive`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inconclusive {
    /// The last observation (if any) was older than stale-after when a deadline decided.
    StaleAtDeadline {
        deadline: Deadline,
        last_observed: Option<Timestamp>,
        stale_after_ms: i64,
    },
    /// The streak under way at the deadline went stale before it completed.
    StreakWentStale {
        last_observed: Option<Timestamp>,
        stale_after_ms: i64,
    },
    /// The next observation of that streak came after a gap over stale-after.
    StreakGap { gap_ms: i64 },
    /// That streak paused on a transient state and the app was not healthy again within
    /// stable-for (`docs/verdicts.md#transient`).
    NotHealthyAgain { within_ms: i64, why: String },
    /// After reach the app could not be seen (absent from Argo CD's answers) when a deadline or
    /// the streak under way at it needed it (`docs/verdicts.md#streak-breaks`).
    AppUnseen { since: Timestamp },
    /// `expect=Healthy,Running`: what the Pods run could not be read within the verify window.
    NotVerified { why: String },
}

/// A verdict: how a watch ended (`docs/verdicts.md#states`). The state it reports is
/// [`Verdict::state`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Confirmed {
        stable_for_ms: i64,
        /// How many times the streak under way at the deadline paused on a transient state
        /// (`docs/verdicts.md#transient`) before it completed.
        pauses: u32,
        /// The chronic conditions the health predicate left out, as in the baseline
        /// (`docs/verdicts.md#evidence`, condition 3), labelled.
        left_out: Vec<String>,
        /// `expect=Healthy,Running`: what verify found, every Pod running what git pins.
        verified: Option<String>,
    },
    /// FAIL, never reverted: `expect=Healthy,Running`, healthy and stable, but the Pods did
    /// not run what git pins within the verify window (`docs/verdicts.md#expect-running`).
    NotRunning {
        what: String,
        window_ms: i64,
    },
    /// FAIL, and why it was not reverted.
    Failed {
        failure: Failure,
        not_reverted: NoRevert,
    },
    /// FAIL, never reverted: someone holds the app.
    Suspended {
        deadline_ms: i64,
    },
    /// FAIL, never reverted: later commits changed the app's paths.
    Attribution {
        culprits: Vec<CommitId>,
        app: AppRef,
    },
    /// FAIL, never reverted: the app's inputs from outside the watched repository changed
    /// under the watch (`docs/verdicts.md#changed-outside`); `changed` names each.
    ChangedOutside {
        app: AppRef,
        changed: Vec<String>,
    },
    /// A human reverted the commit before a verdict: REVERTED for an armed watch, else FAIL.
    RevertedByHuman {
        revert: CommitId,
        branch: String,
        armed: bool,
    },
    /// REVERTED: greenlight's revert of a failure landed.
    Reverted {
        failure: Failure,
        revert: CommitId,
        landed: Landed,
    },
    /// REVERT_FAILED: the executor's words for why no revert landed.
    RevertFailed {
        message: String,
    },
    NotReached(NotReached),
    Unwatchable(Unwatchable),
    Inconclusive(Inconclusive),
    /// A verdict read back from a state file that no variant above says exactly: its state,
    /// words and revert commit as recorded.
    Recorded {
        state: State,
        text: String,
        revert_commit: Option<CommitId>,
    },
}

impl Verdict {
    /// The state a watch with this verdict reports (`status`, events).
    pub fn state(&self) -> State {
        match self {
            Verdict::Confirmed { .. } => State::Confirmed,
            Verdict::NotRunning { .. } => State::Fail,
            Verdict::Failed { .. }
            | Verdict::Suspended { .. }
            | Verdict::Attribution { .. }
            | Verdict::ChangedOutside { .. } => State::Fail,
            Verdict::RevertedByHuman { armed: true, .. } | Verdict::Reverted { .. } => {
                State::Reverted
            }
            Verdict::RevertedByHuman { armed: false, .. } => State::Fail,
            Verdict::RevertFailed { .. } => State::RevertFailed,
            Verdict::NotReached(_) => State::NotReached,
            Verdict::Unwatchable(_) => State::ErrorUnwatchable,
            Verdict::Inconclusive(_) => State::Inconclusive,
            Verdict::Recorded { state, .. } => *state,
        }
    }

    /// The revert of the watched commit on the branch, when this verdict names one.
    pub fn revert_commit(&self) -> Option<&CommitId> {
        match self {
            Verdict::RevertedByHuman { revert, .. } | Verdict::Reverted { revert, .. } => {
                Some(revert)
            }
            Verdict::Recorded { revert_commit, .. } => revert_commit.as_ref(),
            _ => None,
        }
    }
}

/// An event's message. Verdict events say the verdict's own words ([`Message::Verdict`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    WatchStarted {
        mode: Mode,
        dry_run: bool,
        deadline_ms: i64,
        stable_for_ms: i64,
    },
    DirectiveRejected(DirectiveError),
    /// A second trailer of the commit for an app it already watches.
    DuplicateTrailer {
        key: String,
        app: AppRef,
    },
    /// A watch that ended `NOT_REACHED` (`previous`, at `ended`) started again: Argo CD now
    /// deploys `revision`, which has its commit (`docs/verdicts.md#reopen`).
    Reopened {
        previous: String,
        ended: Timestamp,
        revision: String,
        mode: Mode,
        deadline_ms: i64,
    },
    /// `deadline` is the live watch's deadline, counted from `from`.
    Resumed {
        deadline: Option<Timestamp>,
        from: Deadline,
    },
    AppNotFound {
        app: AppRef,
        grace_ms: i64,
    },
    ArmDowngraded(ArmBlocked),
    AutoSyncOff {
        app: AppRef,
    },
    /// A `ComparisonError` appeared while the watch waits for reach.
    ComparisonError {
        app: AppRef,
        message: String,
    },
    Reached {
        app: AppRef,
        via: ReachVia,
        revision: String,
        deadline_ms: i64,
    },
    SyncFailed {
        revision: String,
        phase: String,
        message: String,
    },
    StreakStarted {
        source: ResourceHealthSource,
        stable_for_ms: i64,
        /// Chronic conditions left out as in the baseline, labelled.
        left_out: Vec<String>,
    },
    StreakBroken(StreakBreak),
    /// The streak under way at the deadline paused on a transient state.
    StreakPaused {
        why: Unhealthy,
        stable_for_ms: i64,
    },
    /// It resumed: the app is healthy again.
    StreakResumed {
        banked_ms: i64,
        stable_for_ms: i64,
    },
    DeadlinePassedStreakUnderWay,
    /// The deadline came with no streak under way, the app healthy after reach and now in a
    /// transient state (`why`).
    DeadlinePassedTransient {
        why: String,
        stable_for_ms: i64,
    },
    Verdict(Verdict),
    /// FAIL in arm mode, revert requested.
    Reverting(Failure),
    RevertPushed {
        revert: CommitId,
        branch: String,
    },
    RevertAdopted {
        revert: CommitId,
        branch: String,
    },
    /// The revert is on a branch of its own with a pull request into `branch`.
    RevertProposed {
        revert: CommitId,
        branch: String,
        url: String,
        auto_merge: bool,
        /// Why auto-merge is not armed though asked for, in the forge's words.
        note: Option<String>,
        /// Another watch of the same commit proposed it first.
        shared: bool,
    },
    /// The revert's pull request merged as `revert`.
    RevertMerged {
        revert: CommitId,
        branch: String,
        url: String,
    },
    /// Newer commits changed the app while the revert's pull request was open: the verdict no
    /// longer rests on evidence, and the request is withdrawn (closed).
    RevertWithdrawing {
        url: String,
        newer: Vec<CommitId>,
        /// The request is shared, and the newer commits changed this other app (not this one).
        other_app: Option<AppRef>,
    },
    BreakerOpened {
        after: u32,
    },
    BreakerBlocked,
    BreakerReset,
}

/// Why one observation of a reached app is not healthy (`docs/verdicts.md#health`). Watches
/// record it as its words (`Seen::why_not_healthy`, a failure's `why`): they quote an
/// observation, and are shown as seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unhealthy {
    OperationRunning,
    /// Health computed before the last operation finished.
    StaleHealth,
    /// `sync` is empty when Argo CD did not say.
    NotSynced {
        sync: String,
    },
    /// `resources` are the Degraded or Missing top-level resources, labelled.
    Health {
        health: Health,
        message: String,
        resources: Vec<String>,
    },
    Resources {
        resources: Vec<String>,
    },
}

impl Unhealthy {
    /// A state an app passes through without anything being wrong (`docs/verdicts.md#transient`):
    /// Progressing with no Degraded or Missing resource (an HPA scale-up, an evicted pod being
    /// replaced), an operation running, health not yet recomputed after one.
    pub fn is_transient(&self) -> bool {
        match self {
            Unhealthy::OperationRunning | Unhealthy::StaleHealth => true,
            Unhealthy::Health {
                health, resources, ..
            } => *health == Health::Progressing && resources.is_empty(),
            Unhealthy::NotSynced { .. } | Unhealthy::Resources { .. } => false,
        }
    }
}

/// Why a healthy streak broke (`docs/verdicts.md#streak-breaks`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreakBreak {
    Unhealthy(Unhealthy),
    Disappeared,
    Unobserved { gap_ms: i64 },
}

/// The last paragraph of a revert commit's message: why greenlight reverted.
pub fn revert_commit_reason(failure: &Failure, app: &AppRef) -> String {
    format!("greenlight: {failure} (app {app})")
}

/// The executor's failure when git named a revert by something that is not a commit id.
pub fn revert_not_a_commit(landed: Landed, e: &NotACommitId) -> String {
    match landed {
        Landed::Pushed => format!("git reported the pushed revert as {e}"),
        Landed::Adopted => format!("git reported the existing revert as {e}"),
        Landed::Merged => format!("the forge reported the merged revert as {e}"),
    }
}

// ----------------------------------------------------------------------------- the words

/// How messages quote a revision Argo CD reported: its first 8 characters.
fn short(revision: &str) -> &str {
    revision
        .char_indices()
        .nth(8)
        .map_or(revision, |(i, _)| &revision[..i])
}

fn last_seen(f: &mut fmt::Formatter<'_>, last_observed: Option<Timestamp>) -> fmt::Result {
    match last_observed {
        Some(t) => write!(f, "the app was last observed at {t}"),
        None => f.write_str("the app was never observed"),
    }
}

/// After the reason of a verdict judged without per-resource health ([`crate::watch::Watch::reason_text`]).
pub const APP_LEVEL_HEALTH: &str = "; judged on the app-level health alone: Argo CD's per-resource health was not available (it keeps it out of the Application since 3.0; greenlight reads the resource tree when given --argocd-url)";

const SHADOW: &str = "shadow mode: judged only, not reverted";
/// Before the chronic conditions a watch's health predicate left out
/// (`docs/verdicts.md#evidence`, condition 3).
const LEFT_OUT: &str = "; left out as in the baseline: ";

/// `why`, followed by the chronic conditions left out as in the baseline, if any.
pub fn with_left_out(why: String, left_out: &[String]) -> String {
    if left_out.is_empty() {
        why
    } else {
        format!("{why}{LEFT_OUT}{}", left_out.join(", "))
    }
}

fn write_left_out(f: &mut fmt::Formatter<'_>, left_out: &[String]) -> fmt::Result {
    if left_out.is_empty() {
        Ok(())
    } else {
        write!(f, "{LEFT_OUT}{}", left_out.join(", "))
    }
}
const DRY_RUN: &str = "dry-run: would have reverted; nothing pushed";
const VERIFIED: &str = "; verified: ";
const NOT_RUNNING: &str = "expect=Running: the Pods did not run what git pins within ";
const MUTABLE_TAG: &str = "expect=Running, but ";
const MUTABLE_TAG_END: &str = ": a tag names no digest, so what the Pods run cannot be compared with git; pin digests (greenlight guard image --resolve)";
const NOT_VERIFIED: &str =
    "inconclusive: healthy and stable, but what the Pods run could not be read: ";

fn write_verified(f: &mut fmt::Formatter<'_>, verified: &Option<String>) -> fmt::Result {
    match verified {
        Some(v) => write!(f, "{VERIFIED}{v}"),
        None => Ok(()),
    }
}
const REVERTING: &str = "; reverting";
const PROPOSED: &str = "; revert proposed as ";

fn short_list(shas: &[CommitId]) -> String {
    shas.iter()
        .map(|c| c.short())
        .collect::<Vec<_>>()
        .join(", ")
}
const SUSPENDED: &str = "the app is Suspended (someone is holding it, e.g. a blue/green awaiting promotion); not reverted";

impl fmt::Display for Reason<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::WaitingReach => f.write_str("waiting for the commit to reach the app"),
            Reason::Judging => f.write_str("reached; judging health"),
            Reason::Reverting(failure) => write!(f, "{failure}{REVERTING}"),
            Reason::Proposed(failure, p) => {
                write!(
                    f,
                    "{failure}{REVERTING}{PROPOSED}{} ({}), waiting for it to merge",
                    p.url,
                    p.revert.short()
                )?;
                if !p.superseded_by.is_empty() {
                    write!(
                        f,
                        "; withdrawn: newer commits changed the app ({})",
                        short_list(&p.superseded_by)
                    )?;
                }
                Ok(())
            }
            Reason::Verdict(v) => v.fmt(f),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::NotHealthy { deadline_ms, why } => write!(
                f,
                "not healthy within {} after reach: {why}",
                human_duration(*deadline_ms)
            ),
            Failure::StreakBroke { why } => {
                write!(
                    f,
                    "the healthy streak under way at the deadline broke: {why}"
                )
            }
            Failure::PostSyncHookFailed {
                revision,
                message,
                hooks,
            } => write!(
                f,
                "Argo CD applied it (revision {revision}), then its PostSync hook failed: {} (operation: {message})",
                hooks.join(", ")
            ),
            Failure::Recorded(text) => f.write_str(text),
        }
    }
}

impl fmt::Display for NoRevert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoRevert::Shadow => f.write_str(SHADOW),
            NoRevert::ArmBlocked(b) => b.fmt(f),
            NoRevert::DryRun => f.write_str(DRY_RUN),
            NoRevert::BreakerOpen { after } => write!(
                f,
                "breaker open after {after} reverts in a row: not reverted; a human must look, then run `greenlight breaker reset`"
            ),
            NoRevert::NotShownAtFault {
                before: Before::NotHealthy(health),
            } => write!(
                f,
                "already unhealthy before this commit ({} before its sync began) and never healthy after it: not shown to be this commit's fault, not reverted",
                health.as_str()
            ),
            NoRevert::NotShownAtFault { .. } => f.write_str(
                "baseline unknown: the app was not observed before this commit's sync began and never healthy after it: not shown to be this commit's fault, not reverted",
            ),
            NoRevert::NoEvidence(e) => e.fmt(f),
        }
    }
}

impl fmt::Display for ArmBlocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArmBlocked::NothingUnderPaths { app } => write!(
                f,
                "commit changes nothing under app {app}'s source paths: judged as shadow, it cannot arm a revert for this app"
            ),
            ArmBlocked::Recorded(text) => f.write_str(text),
        }
    }
}

impl fmt::Display for NotReached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotReached::AppMissing { deadline_ms, app } => write!(
                f,
                "not reached within {} of the watch start: Application {app} does not exist; check the trailer's app name; nothing reverted",
                human_duration(*deadline_ms)
            ),
            NotReached::NeverSynced {
                deadline_ms,
                revision,
                sync,
            } => write!(
                f,
                "not reached within {} of the watch start (app at revision {revision:?}, sync {}): the commit was never deployed; check the sync pipeline, nothing reverted",
                human_duration(*deadline_ms),
                if sync.is_empty() { "unknown" } else { sync }
            ),
            NotReached::NotApplied {
                deadline_ms,
                revision,
            } => write!(
                f,
                "not reached within {} of the watch start: Argo CD compares revision {revision}, which has the commit, as Synced, but no sync operation ran with it (the commit changes nothing Argo CD compares: hooks, or files it does not render); it takes effect with the next sync, which re-opens this watch; nothing reverted",
                human_duration(*deadline_ms)
            ),
            NotReached::ComparisonError {
                deadline_ms,
                message,
            } => write!(
                f,
                "not reached within {} of the watch start: Argo CD cannot render the app's manifests (ComparisonError: {message}), so it compared and synced nothing; fix the manifests in a later commit, nothing reverted",
                human_duration(*deadline_ms)
            ),
            NotReached::SyncFailed {
                deadline_ms,
                revision,
                phase,
                message,
            } => write!(
                f,
                "not reached within {} of the watch start: Argo CD could not apply it (sync operation {phase} at revision {}: {message}); a commit Argo CD could not apply is never reverted for that; fix it forward or sync again, nothing reverted",
                human_duration(*deadline_ms),
                short(revision)
            ),
            NotReached::Withdrawn { revision } => write!(
                f,
                "withdrawn: revision {revision} does not contain it (Argo CD deployed it after reach: the branch moved back past the commit, or the app was rolled back); the commit is no longer in effect, nothing reverted"
            ),
            NotReached::RevertedForAnotherApp { revert } => write!(
                f,
                "withdrawn by greenlight: its revert {revert} of this commit, pushed for another app's failure, landed before a verdict on this app; the commit is no longer in effect, and this app's watch says nothing for or against it"
            ),
        }
    }
}

impl fmt::Display for Unwatchable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unwatchable::MutableTag { what } => write!(f, "{MUTABLE_TAG}{what}{MUTABLE_TAG_END}"),
            Unwatchable::AppMissing { app, grace_ms } => write!(
                f,
                "Application {app} does not exist after waiting {}: check the trailer's app name (`app=<name>` or `app=<namespace>/<name>`)",
                human_duration(*grace_ms)
            ),
            Unwatchable::NotFromRepo { app, repo, sources } => write!(
                f,
                "app {app} does not deploy from {repo} (its sources: {}): this commit can never reach it; name the app that deploys this repo",
                if sources.is_empty() {
                    "none".to_string()
                } else {
                    sources.join(", ")
                }
            ),
            Unwatchable::HelmChart { app, chart } => write!(
                f,
                "app {app} deploys Helm chart {chart:?}: its revision is a chart version, not a git commit, so reach cannot be proven by ancestry; watch the git-sourced app that pins the chart version instead"
            ),
            Unwatchable::NotGitRevision { app, revision } => write!(
                f,
                "app {app} reports revision {revision:?}, {}: reach cannot be proven by git ancestry; watch a git-sourced app, or verify digests instead",
                if revision.starts_with("sha256:") {
                    "an OCI digest"
                } else {
                    "not a git SHA (a Helm chart version?)"
                }
            ),
            Unwatchable::OtherBranch {
                app,
                target,
                branch,
            } => write!(
                f,
                "app {app} tracks targetRevision {target:?}, not the watched branch {branch:?}: a commit on {branch} does not deploy through it; watch the branch it tracks"
            ),
            Unwatchable::SourceHydrator { app } => write!(
                f,
                "app {app} syncs through Argo CD's source hydrator (spec.sourceHydrator): it deploys the hydrated branch, not the commits of the watched branch, so reach cannot be proven by ancestry"
            ),
            Unwatchable::AmbiguousApp { app, namespaces } => write!(
                f,
                "app {app} names Applications in {} namespaces ({}): a bare name cannot tell them apart; name the namespace in the trailer (app=<namespace>/{app})",
                namespaces.len(),
                namespaces
                    .iter()
                    .map(|ns| format!("{ns}/{app}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

impl fmt::Display for Inconclusive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Inconclusive::NotVerified { why } => write!(f, "{NOT_VERIFIED}{why}; not reverted"),
            Inconclusive::StaleAtDeadline {
                deadline,
                last_observed,
                stale_after_ms,
            } => {
                let which = match deadline {
                    Deadline::Reach => "the reach deadline",
                    Deadline::Health => "the deadline",
                };
                write!(f, "inconclusive: {which} passed but ")?;
                last_seen(f, *last_observed)?;
                write!(
                    f,
                    " (older than {}); not reverted",
                    human_duration(*stale_after_ms)
                )
            }
            Inconclusive::StreakWentStale {
                last_observed,
                stale_after_ms,
            } => {
                f.write_str(
                    "inconclusive: the healthy streak under way at the deadline went unobserved (",
                )?;
                last_seen(f, *last_observed)?;
                write!(
                    f,
                    ", older than {}); not reverted",
                    human_duration(*stale_after_ms)
                )
            }
            Inconclusive::AppUnseen { since } => write!(
                f,
                "inconclusive: the app could not be seen since {since} (absent from Argo CD's answers: a deletion, a token that lost access, an answer that was not Argo CD's), so the verdict has nothing to rest on; not reverted"
            ),
            Inconclusive::StreakGap { gap_ms } => write!(
                f,
                "inconclusive: the healthy streak under way at the deadline went unobserved for {}; not reverted",
                human_duration(*gap_ms)
            ),
            Inconclusive::NotHealthyAgain { within_ms, why } => write!(
                f,
                "inconclusive: the healthy streak under way at the deadline paused ({why}) and the app was not healthy again within {}; a transient state is no evidence against the commit, not reverted",
                human_duration(*within_ms)
            ),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Confirmed {
                stable_for_ms,
                pauses: 0,
                left_out,
                verified,
            } => {
                write!(
                    f,
                    "confirmed: reached and healthy without a break for {}",
                    human_duration(*stable_for_ms)
                )?;
                write_left_out(f, left_out)?;
                write_verified(f, verified)
            }
            Verdict::Confirmed {
                stable_for_ms,
                pauses,
                left_out,
                verified,
            } => {
                write!(
                    f,
                    "confirmed: reached and healthy for {} in all; the streak under way at the deadline paused {pauses} time(s) on a transient state and was healthy again each time",
                    human_duration(*stable_for_ms)
                )?;
                write_left_out(f, left_out)?;
                write_verified(f, verified)
            }
            Verdict::NotRunning { what, window_ms } => write!(
                f,
                "{NOT_RUNNING}{} after it was healthy and stable: {what}; not reverted: a commit that does not run is not shown to be at fault (the sync may have stalled, or the change not been applied)",
                human_duration(*window_ms)
            ),
            Verdict::Failed {
                failure,
                not_reverted,
            } => write!(f, "{failure}; {not_reverted}"),
            Verdict::Suspended { deadline_ms } => write!(
                f,
                "not healthy within {} after reach: {SUSPENDED}",
                human_duration(*deadline_ms)
            ),
            Verdict::Attribution { culprits, app } => write!(
                f,
                "attribution: later commit(s) {} changed app {app}'s source paths before a verdict, so the app's state can no longer be attributed to this commit alone; not reverted",
                culprits
                    .iter()
                    .map(CommitId::short)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Verdict::ChangedOutside { app, changed } => write!(
                f,
                "changed outside the watched repository: app {app}'s Application changed under the watch ({}), so what it deploys is no longer this commit's doing alone (an edit of the Application such as an Image Updater write-back or `kubectl edit`, or another source's new revision); not reverted",
                changed.join(", ")
            ),
            Verdict::RevertedByHuman { revert, branch, .. } => write!(
                f,
                "reverted by {} on {branch} before a verdict (not made by greenlight): the commit is no longer deployed, so judging stops; nothing pushed",
                revert.short()
            ),
            Verdict::Reverted {
                failure,
                revert,
                landed: Landed::Pushed,
            } => write!(f, "{failure}{REVERTING}; revert {} pushed", revert.short()),
            Verdict::Reverted {
                failure,
                revert,
                landed: Landed::Adopted,
            } => write!(
                f,
                "{failure}{REVERTING}; existing revert {} adopted",
                revert.short()
            ),
            Verdict::Reverted {
                failure,
                revert,
                landed: Landed::Merged,
            } => write!(
                f,
                "{failure}{REVERTING}; revert {} merged by pull request",
                revert.short()
            ),
            Verdict::RevertFailed { message } => write!(
                f,
                "revert failed, nothing forced: {message}; a human must revert or fix forward"
            ),
            Verdict::NotReached(n) => n.fmt(f),
            Verdict::Unwatchable(u) => u.fmt(f),
            Verdict::Inconclusive(i) => i.fmt(f),
            Verdict::Recorded { text, .. } => f.write_str(text),
        }
    }
}

impl fmt::Display for Unhealthy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unhealthy::OperationRunning => f.write_str("an operation is running"),
            Unhealthy::StaleHealth => f.write_str(
                "health is stale (reconciledAt is before the last operation's finishedAt)",
            ),
            Unhealthy::NotSynced { sync } => write!(
                f,
                "sync status is {}",
                if sync.is_empty() { "unknown" } else { sync }
            ),
            Unhealthy::Health {
                health,
                message,
                resources,
            } => {
                write!(f, "health={}", health.as_str())?;
                if !message.is_empty() {
                    write!(f, " ({message})")?;
                }
                if !resources.is_empty() {
                    write!(f, " resources: {}", resources.join(", "))?;
                }
                Ok(())
            }
            Unhealthy::Resources { resources } => {
                write!(f, "resources not healthy: {}", resources.join(", "))
            }
        }
    }
}

impl fmt::Display for StreakBreak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreakBreak::Unhealthy(why) => write!(f, "healthy streak broken: {why}"),
            StreakBreak::Disappeared => f.write_str("healthy streak broken: the app disappeared"),
            StreakBreak::Unobserved { gap_ms } => write!(
                f,
                "healthy streak broken: the app was not observed for {}; unobserved time does not count",
                human_duration(*gap_ms)
            ),
        }
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Message::WatchStarted {
                mode,
                dry_run,
                deadline_ms,
                stable_for_ms,
            } => write!(
                f,
                "watch started mode={}{} deadline={} (healthy within the deadline after reach, stable for {})",
                mode.as_str(),
                if *dry_run { " dry-run" } else { "" },
                human_duration(*deadline_ms),
                human_duration(*stable_for_ms),
            ),
            Message::DirectiveRejected(e) => write!(f, "no watch started: {e}"),
            Message::DuplicateTrailer { key, app } => write!(
                f,
                "no watch started: this commit already has a {key} trailer for app {app}; only the first counts"
            ),
            Message::Reopened {
                previous,
                ended,
                revision,
                mode,
                deadline_ms,
            } => write!(
                f,
                "watch re-opened mode={} deadline={}: watch {previous} ended NOT_REACHED at {}, and Argo CD now deploys {revision}, which has the commit; judged as new",
                mode.as_str(),
                human_duration(*deadline_ms),
                ended.rfc3339(),
            ),
            Message::Resumed { deadline, from } => write!(
                f,
                "resumed after a restart; deadline {} (from the recorded {} time); unobserved time does not count toward stability",
                deadline.map(Timestamp::rfc3339).unwrap_or_default(),
                match from {
                    Deadline::Health => "reach",
                    Deadline::Reach => "watch start",
                }
            ),
            Message::AppNotFound { app, grace_ms } => write!(
                f,
                "Application {app} does not exist (yet): waiting up to {} for it (the commit may create it)",
                human_duration(*grace_ms)
            ),
            Message::ArmDowngraded(b) => b.fmt(f),
            Message::AutoSyncOff { app } => write!(
                f,
                "warning: app {app} has automated sync off: a revert pushed to git will not deploy by itself; someone must sync it"
            ),
            Message::ComparisonError { app, message } => write!(
                f,
                "warning: Argo CD cannot render app {app} (ComparisonError: {message}): no commit reaches it until the manifests render again"
            ),
            Message::Reached {
                app,
                via,
                revision,
                deadline_ms,
            } => write!(
                f,
                "reached app {app} via {} at revision {} (deadline {} from now)",
                via.describe(),
                short(revision),
                human_duration(*deadline_ms)
            ),
            Message::SyncFailed {
                revision,
                phase,
                message,
            } => write!(
                f,
                "sync of revision {} containing this commit ended {phase}: \"{message}\"",
                short(revision)
            ),
            Message::StreakStarted {
                source,
                stable_for_ms,
                left_out,
            } => {
                write!(
                    f,
                    "healthy (Synced, Healthy, no Degraded/Missing resource, no operation; resource health from {}): stability window of {} started",
                    source.as_str(),
                    human_duration(*stable_for_ms)
                )?;
                write_left_out(f, left_out)
            }
            Message::StreakBroken(b) => b.fmt(f),
            Message::StreakPaused { why, stable_for_ms } => write!(
                f,
                "healthy streak paused after the deadline: {why}; a transient state, not a failure: judging goes on if the app is healthy again within {}",
                human_duration(*stable_for_ms)
            ),
            Message::StreakResumed {
                banked_ms,
                stable_for_ms,
            } => write!(
                f,
                "healthy streak resumed: {} of {} already healthy before the pause",
                human_duration(*banked_ms),
                human_duration(*stable_for_ms)
            ),
            Message::DeadlinePassedStreakUnderWay => f.write_str(
                "deadline passed during a healthy streak: judging goes on until the streak completes or breaks",
            ),
            Message::DeadlinePassedTransient { why, stable_for_ms } => write!(
                f,
                "deadline passed while the app, healthy after reach, was in a transient state: {why}; not a failure: the streak counts as paused, and judging goes on if the app is healthy again within {}",
                human_duration(*stable_for_ms)
            ),
            Message::Verdict(v) => v.fmt(f),
            Message::Reverting(failure) => write!(f, "{failure}; arm: reverting"),
            Message::RevertPushed { revert, branch } => {
                write!(f, "revert {} pushed to {branch}", revert.short())
            }
            Message::RevertAdopted { revert, branch } => write!(
                f,
                "a revert of this commit ({}) is already on {branch}: adopted, not duplicated",
                revert.short()
            ),
            Message::RevertProposed {
                revert,
                branch,
                url,
                auto_merge,
                note,
                shared,
            } => {
                if *shared {
                    write!(f, "the revert of this commit is already proposed: {url}")?;
                } else {
                    write!(
                        f,
                        "revert {} proposed as {url} into {branch}",
                        revert.short()
                    )?;
                }
                if *auto_merge {
                    write!(f, "; the forge merges it once its checks pass")?;
                } else {
                    write!(f, "; it waits for a human to merge it")?;
                }
                if let Some(note) = note {
                    write!(f, " ({note})")?;
                }
                write!(
                    f,
                    "; nothing is reverted until it merges, and the watch ends REVERTED only then"
                )
            }
            Message::RevertMerged {
                revert,
                branch,
                url,
            } => write!(f, "revert {url} merged into {branch} as {}", revert.short()),
            Message::RevertWithdrawing {
                url,
                newer,
                other_app: None,
            } => write!(
                f,
                "newer commits changed the app while the revert waited ({}): the verdict no longer rests on evidence, so the revert's pull request {url} is being closed; nothing is reverted unless it had already merged",
                short_list(newer)
            ),
            Message::RevertWithdrawing {
                url,
                newer,
                other_app: Some(other),
            } => write!(
                f,
                "newer commits changed app {other} while the shared revert waited ({}): its pull request {url} is being closed; this app's failure stands, and nothing is reverted unless it had already merged",
                short_list(newer)
            ),
            Message::BreakerOpened { after } => write!(
                f,
                "breaker opened after {after} reverts in a row: no more reverts until a human runs `greenlight breaker reset`; human attention needed"
            ),
            Message::BreakerBlocked => {
                f.write_str("revert withheld: the breaker is open; human attention needed")
            }
            Message::BreakerReset => {
                f.write_str("breaker reset by a human: reverts are allowed again")
            }
        }
    }
}

// ------------------------------------------------------------- reading recorded words back

/// What the rest of a watch's record says, for reading its reason text back: a reason quotes
/// commits by their short form and the record holds them in full.
#[derive(Clone, Copy, Debug)]
pub struct Recorded<'a> {
    pub deadline_ms: i64,
    pub app: &'a AppRef,
    pub arm_blocked: Option<&'a ArmBlocked>,
    pub later_commits: &'a [LaterCommit],
    pub revert_commit: Option<&'a CommitId>,
    /// The failed sync last seen while waiting for reach.
    pub failed_sync: Option<&'a FailedSync>,
    /// The watched commit.
    pub commit: &'a CommitId,
    /// The app's baseline (`docs/verdicts.md#evidence`).
    pub baseline: &'a crate::watch::Baseline,
}

impl Failure {
    /// The failure whose words `text` is, or the text kept as recorded.
    pub fn retype(text: &str, rec: &Recorded<'_>) -> Failure {
        let not_healthy = format!(
            "not healthy within {} after reach: ",
            human_duration(rec.deadline_ms)
        );
        let candidate = if let Some(why) = text.strip_prefix(&not_healthy) {
            Some(Failure::NotHealthy {
                deadline_ms: rec.deadline_ms,
                why: why.to_string(),
            })
        } else if let Some(why) =
            text.strip_prefix("the healthy streak under way at the deadline broke: ")
        {
            Some(Failure::StreakBroke {
                why: why.to_string(),
            })
        } else {
            retype_hook_failure(text)
        };
        candidate
            .filter(|c| c.to_string() == text)
            .unwrap_or_else(|| Failure::Recorded(text.to_string()))
    }

    /// A FAIL with its revert pending reads `<failure>; reverting`.
    pub fn retype_reverting(text: &str, rec: &Recorded<'_>) -> Failure {
        // A proposed revert's words go on after the failure's: the proposal is recorded apart.
        let text = match text.find(&format!("{REVERTING}{PROPOSED}")) {
            Some(at) => &text[..at + REVERTING.len()],
            None => text,
        };
        Failure::retype(text.strip_suffix(REVERTING).unwrap_or(text), rec)
    }
}

/// The words of [`Failure::PostSyncHookFailed`].
fn retype_hook_failure(text: &str) -> Option<Failure> {
    let rest = text.strip_prefix("Argo CD applied it (revision ")?;
    let (revision, rest) = rest.split_once("), then its PostSync hook failed: ")?;
    let (hooks, rest) = rest.split_once(" (operation: ")?;
    let message = rest.strip_suffix(')')?;
    Some(Failure::PostSyncHookFailed {
        revision: revision.to_string(),
        message: message.to_string(),
        hooks: hooks.split(", ").map(str::to_string).collect(),
    })
}

impl ArmBlocked {
    pub fn retype(text: &str, app: &AppRef) -> ArmBlocked {
        let candidate = ArmBlocked::NothingUnderPaths { app: app.clone() };
        if candidate.to_string() == text {
            candidate
        } else {
            ArmBlocked::Recorded(text.to_string())
        }
    }
}

impl Verdict {
    /// The verdict of a finished watch whose state and reason text a state file recorded: the
    /// variant that says exactly `text` (and names the recorded revert commit), else the text
    /// kept as recorded.
    pub fn retype(state: State, text: &str, rec: &Recorded<'_>) -> Verdict {
        let candidates = match state {
            State::Confirmed => retype_confirmed(text).into_iter().collect(),
            State::Fail => retype_fail(text, rec),
            State::Reverted => retype_reverted(text, rec),
            State::RevertFailed => text
                .strip_prefix("revert failed, nothing forced: ")
                .and_then(|t| t.strip_suffix("; a human must revert or fix forward"))
                .map(|message| Verdict::RevertFailed {
                    message: message.to_string(),
                })
                .into_iter()
                .collect(),
            State::NotReached => retype_not_reached(text, rec),
            State::ErrorUnwatchable => retype_unwatchable(text, rec)
                .into_iter()
                .map(Verdict::Unwatchable)
                .collect(),
            State::Inconclusive => retype_inconclusive(text)
                .into_iter()
                .map(Verdict::Inconclusive)
                .collect(),
            State::WaitingReach | State::Judging => Vec::new(),
        };
        candidates
            .into_iter()
            .find(|v: &Verdict| {
                v.state() == state
                    && v.revert_commit() == rec.revert_commit
                    && v.to_string() == text
            })
            .unwrap_or_else(|| Verdict::Recorded {
                state,
                text: text.to_string(),
                revert_commit: rec.revert_commit.cloned(),
            })
    }
}

fn retype_confirmed(text: &str) -> Option<Verdict> {
    let (text, verified) = match text.split_once(VERIFIED) {
        Some((text, v)) => (text, Some(v.to_string())),
        None => (text, None),
    };
    let (text, left_out) = match text.split_once(LEFT_OUT) {
        Some((text, labels)) => (text, labels.split(", ").map(str::to_string).collect()),
        None => (text, Vec::new()),
    };
    if let Some(d) = text.strip_prefix("confirmed: reached and healthy without a break for ") {
        return Some(Verdict::Confirmed {
            stable_for_ms: parse_human_duration(d)?,
            pauses: 0,
            left_out,
            verified,
        });
    }
    let rest = text.strip_prefix("confirmed: reached and healthy for ")?;
    let (d, rest) = rest.split_once(" in all; the streak under way at the deadline paused ")?;
    let (n, _) = rest.split_once(" time(s)")?;
    Some(Verdict::Confirmed {
        stable_for_ms: parse_human_duration(d)?,
        pauses: n.parse().ok()?,
        left_out,
        verified,
    })
}

fn human_revert(text: &str, rec: &Recorded<'_>, armed: bool) -> Option<Verdict> {
    let revert = rec.revert_commit?.clone();
    let rest = text.strip_prefix(&format!("reverted by {} on ", revert.short()))?;
    let (branch, _) = rest.split_once(" before a verdict (not made by greenlight)")?;
    Some(Verdict::RevertedByHuman {
        revert,
        branch: branch.to_string(),
        armed,
    })
}

fn retype_fail(text: &str, rec: &Recorded<'_>) -> Vec<Verdict> {
    let mut out = vec![Verdict::Suspended {
        deadline_ms: rec.deadline_ms,
    }];
    if let Some(rest) = text.strip_prefix(NOT_RUNNING)
        && let Some((window, rest)) = rest.split_once(" after it was healthy and stable: ")
        && let Some(window_ms) = parse_human_duration(window)
        && let Some((what, _)) = rest.rsplit_once("; not reverted: a commit that does not run")
    {
        out.push(Verdict::NotRunning {
            what: what.to_string(),
            window_ms,
        });
    }
    if let Some(rest) = text.strip_prefix("attribution: later commit(s) ")
        && let Some((shorts, _)) = rest.split_once(" changed app ")
    {
        let culprits: Option<Vec<CommitId>> = shorts
            .split(", ")
            .map(|s| {
                rec.later_commits
                    .iter()
                    .find(|c| c.sha.short() == s)
                    .map(|c| c.sha.clone())
            })
            .collect();
        if let Some(culprits) = culprits {
            out.push(Verdict::Attribution {
                culprits,
                app: rec.app.clone(),
            });
        }
    }
    if let Some(rest) = text.strip_prefix(&format!(
        "changed outside the watched repository: app {}'s Application changed under the watch (",
        rec.app
    )) && let Some((changed, _)) = rest.split_once("), so what it deploys is no longer")
    {
        out.push(Verdict::ChangedOutside {
            app: rec.app.clone(),
            changed: changed.split(", ").map(str::to_string).collect(),
        });
    }
    out.extend(human_revert(text, rec, false));
    let breaker = text
        .rfind("; breaker open after ")
        .and_then(|i| {
            let n = &text[i + "; breaker open after ".len()..];
            let digits = n.split(' ').next()?;
            digits.parse::<u32>().ok()
        })
        .map(|after| NoRevert::BreakerOpen { after });
    let not_at_fault = [
        Health::Progressing,
        Health::Degraded,
        Health::Suspended,
        Health::Missing,
        Health::Unknown,
    ]
    .into_iter()
    .map(Before::NotHealthy)
    .chain([Before::Unknown])
    .map(|before| Some(NoRevert::NotShownAtFault { before }));
    let withheld = [Some(NoRevert::Shadow), Some(NoRevert::DryRun), breaker]
        .into_iter()
        .chain(not_at_fault)
        .chain(std::iter::once(
            rec.arm_blocked.cloned().map(NoRevert::ArmBlocked),
        ))
        .flatten();
    for not_reverted in withheld {
        let suffix = format!("; {not_reverted}");
        if let Some(failure) = text.strip_suffix(&suffix) {
            out.push(Verdict::Failed {
                failure: Failure::retype(failure, rec),
                not_reverted,
            });
        }
    }
    if let Some(at) = text.find(&format!("; {NO_EVIDENCE}")) {
        out.push(Verdict::Failed {
            failure: Failure::retype(&text[..at], rec),
            not_reverted: NoRevert::NoEvidence(NoEvidence::retype(&text[at + 2..], rec)),
        });
    }
    out
}

fn retype_reverted(text: &str, rec: &Recorded<'_>) -> Vec<Verdict> {
    let mut out: Vec<Verdict> = human_revert(text, rec, true).into_iter().collect();
    if let Some(revert) = rec.revert_commit {
        for (landed, suffix) in [
            (
                Landed::Pushed,
                format!("{REVERTING}; revert {} pushed", revert.short()),
            ),
            (
                Landed::Adopted,
                format!("{REVERTING}; existing revert {} adopted", revert.short()),
            ),
            (
                Landed::Merged,
                format!(
                    "{REVERTING}; revert {} merged by pull request",
                    revert.short()
                ),
            ),
        ] {
            if let Some(failure) = text.strip_suffix(&suffix) {
                out.push(Verdict::Reverted {
                    failure: Failure::retype(failure, rec),
                    revert: revert.clone(),
                    landed,
                });
            }
        }
    }
    out
}

fn retype_not_reached(text: &str, rec: &Recorded<'_>) -> Vec<Verdict> {
    let mut out = vec![Verdict::NotReached(NotReached::AppMissing {
        deadline_ms: rec.deadline_ms,
        app: rec.app.clone(),
    })];
    let prefix = format!(
        "not reached within {} of the watch start (app at revision ",
        human_duration(rec.deadline_ms)
    );
    if let Some(rest) = text.strip_prefix(&prefix)
        && let Some((revision, rest)) = debug_quoted(rest)
        && let Some(rest) = rest.strip_prefix(", sync ")
        && let Some((sync, _)) = rest.split_once("): the commit was never deployed")
    {
        out.push(Verdict::NotReached(NotReached::NeverSynced {
            deadline_ms: rec.deadline_ms,
            revision,
            sync: if sync == "unknown" { "" } else { sync }.to_string(),
        }));
    }
    let prefix = format!(
        "not reached within {} of the watch start: Argo CD compares revision ",
        human_duration(rec.deadline_ms)
    );
    if let Some(rest) = text.strip_prefix(&prefix)
        && let Some((revision, _)) = rest.split_once(", which has the commit, as Synced")
    {
        out.push(Verdict::NotReached(NotReached::NotApplied {
            deadline_ms: rec.deadline_ms,
            revision: revision.to_string(),
        }));
    }
    let prefix = format!(
        "not reached within {} of the watch start: Argo CD cannot render the app's manifests (ComparisonError: ",
        human_duration(rec.deadline_ms)
    );
    if let Some(rest) = text.strip_prefix(&prefix)
        && let Some((message, _)) = rest.rsplit_once("), so it compared and synced nothing")
    {
        out.push(Verdict::NotReached(NotReached::ComparisonError {
            deadline_ms: rec.deadline_ms,
            message: message.to_string(),
        }));
    }
    let prefix = format!(
        "not reached within {} of the watch start: Argo CD could not apply it (sync operation ",
        human_duration(rec.deadline_ms)
    );
    if let Some(rest) = text.strip_prefix(&prefix)
        && let Some((phase, rest)) = rest.split_once(" at revision ")
        && let Some((short_rev, rest)) = rest.split_once(": ")
        && let Some((message, _)) = rest.rsplit_once("); a commit Argo CD could not apply")
        && let Some(failed) = rec.failed_sync
        && short(&failed.revision) == short_rev
    {
        out.push(Verdict::NotReached(NotReached::SyncFailed {
            deadline_ms: rec.deadline_ms,
            revision: failed.revision.clone(),
            phase: phase.to_string(),
            message: message.to_string(),
        }));
    }
    if let Some(rest) = text.strip_prefix("withdrawn: revision ")
        && let Some((revision, _)) = rest.split_once(" does not contain it (")
    {
        out.push(Verdict::NotReached(NotReached::Withdrawn {
            revision: revision.to_string(),
        }));
    }
    if let Some(rest) = text.strip_prefix("withdrawn by greenlight: its revert ")
        && let Some((revert, _)) = rest.split_once(' ')
        && let Ok(revert) = CommitId::parse(revert)
    {
        out.push(Verdict::NotReached(NotReached::RevertedForAnotherApp {
            revert,
        }));
    }
    out
}

fn retype_unwatchable(text: &str, rec: &Recorded<'_>) -> Vec<Unwatchable> {
    let mut out = Vec::new();
    if let Some(rest) = text.strip_prefix(MUTABLE_TAG)
        && let Some((what, _)) = rest.rsplit_once(MUTABLE_TAG_END)
    {
        out.push(Unwatchable::MutableTag {
            what: what.to_string(),
        });
    }
    if let Some(rest) = text.strip_prefix(&format!(
        "Application {} does not exist after waiting ",
        rec.app
    )) && let Some((grace, _)) = rest.split_once(": check the trailer's app name")
        && let Some(grace_ms) = parse_human_duration(grace)
    {
        out.push(Unwatchable::AppMissing {
            app: rec.app.clone(),
            grace_ms,
        });
    }
    // An Application's name has no spaces.
    let Some((app, rest)) = text.strip_prefix("app ").and_then(|t| t.split_once(' ')) else {
        return out;
    };
    let app = app.to_string();
    if let Some(rest) = rest.strip_prefix("does not deploy from ")
        && let Some((repo, rest)) = rest.split_once(" (its sources: ")
        && let Some((sources, _)) = rest.split_once("): this commit can never reach it")
    {
        out.push(Unwatchable::NotFromRepo {
            app: app.clone(),
            repo: repo.to_string(),
            sources: if sources == "none" {
                Vec::new()
            } else {
                sources.split(", ").map(str::to_string).collect()
            },
        });
    }
    if let Some(rest) = rest.strip_prefix("deploys Helm chart ")
        && let Some((chart, _)) = debug_quoted(rest)
    {
        out.push(Unwatchable::HelmChart {
            app: app.clone(),
            chart,
        });
    }
    if let Some(rest) = rest.strip_prefix("reports revision ")
        && let Some((revision, _)) = debug_quoted(rest)
    {
        out.push(Unwatchable::NotGitRevision {
            app: app.clone(),
            revision,
        });
    }
    if rest.starts_with("syncs through Argo CD's source hydrator") {
        out.push(Unwatchable::SourceHydrator { app: app.clone() });
    }
    if let Some(rest) = rest.strip_prefix("names Applications in ")
        && let Some((_, rest)) = rest.split_once(" namespaces (")
        && let Some((list, _)) = rest.split_once("): a bare name cannot tell them apart")
    {
        let suffix = format!("/{app}");
        let namespaces: Option<Vec<String>> = list
            .split(", ")
            .map(|q| q.strip_suffix(&suffix).map(str::to_string))
            .collect();
        if let Some(namespaces) = namespaces {
            out.push(Unwatchable::AmbiguousApp {
                app: app.clone(),
                namespaces,
            });
        }
    }
    if let Some(rest) = rest.strip_prefix("tracks targetRevision ")
        && let Some((target, rest)) = debug_quoted(rest)
        && let Some(rest) = rest.strip_prefix(", not the watched branch ")
        && let Some((branch, _)) = debug_quoted(rest)
    {
        out.push(Unwatchable::OtherBranch {
            app,
            target,
            branch,
        });
    }
    out
}

fn retype_inconclusive(text: &str) -> Vec<Inconclusive> {
    let mut out = Vec::new();
    if let Some(rest) = text.strip_prefix(NOT_VERIFIED)
        && let Some(why) = rest.strip_suffix("; not reverted")
    {
        out.push(Inconclusive::NotVerified {
            why: why.to_string(),
        });
    }
    let Some(rest) = text.strip_prefix("inconclusive: ") else {
        return out;
    };
    let last_seen = |s: &str| -> Option<Option<Timestamp>> {
        if s == "the app was never observed" {
            return Some(None);
        }
        let t = s.strip_prefix("the app was last observed at ")?;
        Timestamp::parse_rfc3339(t).map(Some)
    };
    for (deadline, prefix) in [
        (Deadline::Reach, "the reach deadline passed but "),
        (Deadline::Health, "the deadline passed but "),
    ] {
        if let Some(r) = rest.strip_prefix(prefix)
            && let Some(r) = r.strip_suffix("); not reverted")
            && let Some((seen, stale)) = r.rsplit_once(" (older than ")
            && let Some(last_observed) = last_seen(seen)
            && let Some(stale_after_ms) = parse_human_duration(stale)
        {
            out.push(Inconclusive::StaleAtDeadline {
                deadline,
                last_observed,
                stale_after_ms,
            });
        }
    }
    if let Some(r) = rest.strip_prefix("the app could not be seen since ")
        && let Some((since, _)) = r.split_once(" (absent from Argo CD's answers")
        && let Some(since) = Timestamp::parse_rfc3339(since)
    {
        out.push(Inconclusive::AppUnseen { since });
    }
    if let Some(r) =
        rest.strip_prefix("the healthy streak under way at the deadline went unobserved ")
    {
        if let Some(r) = r.strip_prefix('(')
            && let Some(r) = r.strip_suffix("); not reverted")
            && let Some((seen, stale)) = r.rsplit_once(", older than ")
            && let Some(last_observed) = last_seen(seen)
            && let Some(stale_after_ms) = parse_human_duration(stale)
        {
            out.push(Inconclusive::StreakWentStale {
                last_observed,
                stale_after_ms,
            });
        }
        if let Some(r) = r.strip_prefix("for ")
            && let Some(gap) = r.strip_suffix("; not reverted")
            && let Some(gap_ms) = parse_human_duration(gap)
        {
            out.push(Inconclusive::StreakGap { gap_ms });
        }
    }
    if let Some(r) = rest.strip_prefix("the healthy streak under way at the deadline paused (")
        && let Some((r, _)) =
            r.rsplit_once("; a transient state is no evidence against the commit, not reverted")
        && let Some((why, within)) = r.rsplit_once(") and the app was not healthy again within ")
        && let Some(within_ms) = parse_human_duration(within)
    {
        out.push(Inconclusive::NotHealthyAgain {
            within_ms,
            why: why.to_string(),
        });
    }
    out
}

/// A string as `{:?}` writes it, at the start of `s`: its value and the text after it. Only the
/// escapes `{:?}` writes for printable text and common controls are read; anything else is not
/// a match (the caller then keeps the words as recorded).
fn debug_quoted(s: &str) -> Option<(String, &str)> {
    let mut chars = s.strip_prefix('"')?.char_indices();
    let mut out = String::new();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &s[1 + i + 1..])),
            '\\' => {
                let (_, e) = chars.next()?;
                out.push(match e {
                    '"' => '"',
                    '\\' => '\\',
                    '\'' => '\'',
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '0' => '\0',
                    _ => return None,
                });
            }
            c => out.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app() -> AppRef {
        AppRef {
            namespace: None,
            name: "web".into(),
        }
    }

    fn rec<'a>(app: &'a AppRef, revert: Option<&'a CommitId>) -> Recorded<'a> {
        static COMMIT: std::sync::LazyLock<CommitId> = std::sync::LazyLock::new(|| {
            CommitId::parse("0123456789abcdef0123456789abcdef01234567").unwrap()
        });
        static BASELINE: std::sync::LazyLock<crate::watch::Baseline> =
            std::sync::LazyLock::new(crate::watch::Baseline::default);
        Recorded {
            deadline_ms: 60_000,
            app,
            arm_blocked: None,
            later_commits: &[],
            revert_commit: revert,
            failed_sync: None,
            commit: &COMMIT,
            baseline: &BASELINE,
        }
    }

    #[test]
    fn debug_quoted_reads_what_debug_writes() {
        for s in [
            "",
            "1.2.3",
            "a \"quoted\" \\ word",
            "tab\there",
            "line\nbreak",
            "é ü",
        ] {
            let text = format!("{s:?} and after");
            assert_eq!(
                debug_quoted(&text),
                Some((s.to_string(), " and after")),
                "{text}"
            );
        }
        assert_eq!(debug_quoted("no quote"), None);
        assert_eq!(debug_quoted("\"unterminated"), None);
    }

    #[test]
    fn a_render_failure_and_a_source_hydrator_read_back_as_themselves() {
        let a = app();
        let r = rec(&a, None);
        for v in [
            Verdict::NotReached(NotReached::ComparisonError {
                deadline_ms: 60_000,
                message: "rpc error: code = Unknown desc = yaml: line 3 (cached), twice)".into(),
            }),
            Verdict::Unwatchable(Unwatchable::SourceHydrator { app: "web".into() }),
            Verdict::NotReached(NotReached::NotApplied {
                deadline_ms: 60_000,
                revision: "0123456789abcdef0123456789abcdef01234567".into(),
            }),
            Verdict::Unwatchable(Unwatchable::AmbiguousApp {
                app: "web".into(),
                namespaces: vec!["argocd".into(), "team-a".into()],
            }),
        ] {
            assert_eq!(Verdict::retype(v.state(), &v.to_string(), &r), v);
        }
    }

    #[test]
    fn words_no_variant_says_exactly_are_kept_as_recorded() {
        let a = app();
        let r = rec(&a, None);
        for (state, text) in [
            (State::Fail, "something an older greenlight said"),
            (
                State::Confirmed,
                "confirmed: reached and healthy without a break for ever",
            ),
            (
                State::Inconclusive,
                "inconclusive: the deadline passed but who knows",
            ),
            // The right words for another app: not this watch's verdict.
            (
                State::NotReached,
                "not reached within 60s of the watch start: Application api does not exist; check the trailer's app name; nothing reverted",
            ),
        ] {
            let v = Verdict::retype(state, text, &r);
            assert!(matches!(v, Verdict::Recorded { .. }), "{text}: {v:?}");
            assert_eq!(v.to_string(), text);
            assert_eq!(v.state(), state);
        }
    }

    #[test]
    fn a_human_revert_needs_the_recorded_revert_commit() {
        let a = app();
        let revert = CommitId::parse(&"ab".repeat(20)).unwrap();
        let v = Verdict::RevertedByHuman {
            revert: revert.clone(),
            branch: "main".into(),
            armed: true,
        };
        let text = v.to_string();
        assert_eq!(
            Verdict::retype(State::Reverted, &text, &rec(&a, Some(&revert))),
            v
        );
        assert!(matches!(
            Verdict::retype(State::Reverted, &text, &rec(&a, None)),
            Verdict::Recorded { .. }
        ));
    }
}
