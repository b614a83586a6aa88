//! A seeded simulation of the judge: thousands of random scenarios (flapping health, outages,
//! operations, later commits, merges, human reverts, restarts through the state file's record,
//! revert outcomes, clock jumps) checked against invariants that follow from the issue text,
//! with an oracle for health and the breaker written here independently of the judge. A failure
//! prints the seed and the last actions so it can be replayed with `GREENLIGHT_SIM_SEED=<seed>`.

mod support;

use greenlight_core::breaker::Breaker;
use greenlight_core::commit::CommitId;
use greenlight_core::event::{Event, EventKind, Outcome};
use greenlight_core::judge::{
    Ancestry, CommitInfo, Effect, Engine, JudgeConfig, Observation, RevertOutcome, RevertProposal,
    State, Verification, Watch,
};
use greenlight_core::reason::{Failure, Inconclusive, Unwatchable, Verdict};
use greenlight_core::snapshot::{
    AppSnapshot, Glimpse, Health, OperationFacts, ReachCandidate, ReachVia, ResourceHealthSource,
    ResourceView, SourceFacts, SourcePaths, UnhealthyResource,
};
use greenlight_core::time::Timestamp;
use greenlight_testkit::TERMINAL_STATES;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use support::{BASE_MS, REPO, sha, through_the_store};

/// The commit id of a SHA the model spelled.
fn cid(sha: &str) -> CommitId {
    CommitId::parse(sha).expect("the model spells full SHAs")
}

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

/// What the simulated Argo CD knows of one app.
#[derive(Clone, Debug)]
struct AppModel {
    name: &'static str,
    exists: bool,
    /// Index into the history of the commit last applied.
    deployed: Option<usize>,
    /// The revision Argo CD compares against (the branch tip when it looked).
    compared: Option<usize>,
    sync_status: &'static str,
    op_phase: Option<&'static str>,
    /// The last operation applied its revision, then failed in a PostSync hook.
    hook_failed: bool,
    /// Bumped by each edit of the Application's spec (an Image Updater write-back).
    spec_version: u32,
    op_rev: Option<usize>,
    /// When the last operation started (`operationState.startedAt`, which Argo CD always sets):
    /// a rollback of an app OutOfSync for good is told from the sync seen at reach by it.
    op_started: Option<Timestamp>,
    health: Health,
    bad_resource: bool,
    /// A live object git no longer has, left for a human to prune (automated prune off): the
    /// app is OutOfSync through it for good, a chronic condition no commit caused.
    leftover: bool,
    stale: bool,
    history: Vec<usize>,
    automated: bool,
    paths: SourcePaths,
    /// A structural defect that makes it unwatchable (non-SHA revision, wrong target).
    defect: Option<&'static str>,
    /// Percent chance per observation that health changes.
    flap: u64,
}

/// A revert the model's forge holds as a pull request (`--revert-via pull-request`).
#[derive(Clone, Debug)]
struct ModelProposal {
    /// The commit it reverts.
    commit: String,
    /// The revert commit, the request's head.
    revert: String,
    /// The watches waiting for it (the one whose executor opened it, and those sharing it).
    watches: BTreeSet<String>,
    /// Those whose app a newer commit changed while it was open: the request was withdrawn
    /// for them, and a close claims no revert for them.
    withdrawn_for: BTreeSet<String>,
    /// How it ended, once it did.
    ended: Option<ProposalEnd>,
}

/// How a pull request ended, by the model.
#[derive(Clone, Debug, PartialEq, Eq)]
enum ProposalEnd {
    /// Merged: the commit that brought it arrived, or the forge said so (that commit).
    Merged(String),
    /// A human's revert of the commit arrived while it was open.
    Adopted(String),
    /// Closed unmerged.
    Closed,
}

/// The Pods of one app, for `expect=Healthy,Running`: whether they run the digest git pins for
/// the revision Argo CD last deployed. Drawn afresh (from `run_rng`) at each deploy: a rollout
/// takes a while, or stalls for good (until the next deploy); now and then a manifest names a tag.
#[derive(Clone, Debug, Default)]
struct PodsModel {
    /// The app's `deployed` when drawn.
    deployed: Option<usize>,
    /// From when every Pod runs what git pins; None: the rollout stalled.
    running_from: Option<Timestamp>,
    /// A manifest names a tag, not a digest.
    tag: bool,
}

/// What verify answered, by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AnswerKind {
    Running,
    NotRunning,
    Tag,
    Failed,
}

/// An `Effect::Verify` the model's verify has not answered yet.
#[derive(Clone, Debug)]
struct Ask {
    watch: String,
    /// The engine's number for this ask: only its answer counts.
    number: u64,
    app: usize,
    at: Timestamp,
    /// The streak it was asked for (the watch's `healthy_since` then).
    since: Option<Timestamp>,
    /// How many observations of the app there were when it was asked.
    seen_len: usize,
    /// When the answer comes.
    due: Timestamp,
}

/// One answer of the model's verify.
#[derive(Clone, Debug)]
struct Answered {
    at: Timestamp,
    kind: AnswerKind,
    /// The summary, what runs, the tag or why (each unique in a scenario).
    text: String,
    ask: Ask,
    /// How many observations of the app there were when it answered.
    seen_len: usize,
}

/// What the model asked and answered of verify for one watch since the last restart (the engine
/// forgets verify progress at a restart, and so does the model).
#[derive(Clone, Debug, Default)]
struct VerifyLog {
    /// Each ask: when, and for which streak.
    asks: Vec<(Timestamp, Option<Timestamp>)>,
    answers: Vec<Answered>,
}

impl VerifyLog {
    /// The first ask for streak `since`.
    fn first_ask(&self, since: Option<Timestamp>) -> Option<Timestamp> {
        self.asks
            .iter()
            .find(|(_, s)| *s == since)
            .map(|(at, _)| *at)
    }
    /// The streak of the last ask, and its first ask.
    fn current(&self) -> Option<(Option<Timestamp>, Timestamp)> {
        let (_, since) = *self.asks.last()?;
        Some((since, self.first_ask(since)?))
    }
    /// The answers the engine counts for the streak of the last ask: those since its first ask.
    fn answers_of_current(&self) -> Vec<&Answered> {
        match self.current() {
            Some((_, first)) => self.answers.iter().filter(|a| a.at >= first).collect(),
            None => Vec::new(),
        }
    }
}

impl AppModel {
    /// The revision `sync.revision` names: the deployed one while Synced, else the compared one.
    fn sync_revision_index(&self) -> Option<usize> {
        if self.sync_status == "Synced" {
            self.deployed
        } else {
            self.compared
        }
    }

    fn healthy_by_oracle(&self) -> bool {
        self.exists
            && self.sync_status == "Synced"
            && self.health == Health::Healthy
            && !self.bad_resource
            && !self.stale
            && self.op_phase != Some("Running")
    }
}

/// One observation of an app, for the stability oracle.
#[derive(Clone, Copy, Debug)]
struct Seen {
    at: Timestamp,
    healthy: bool,
    /// The app's health, None when it was absent.
    health: Option<Health>,
    /// Not healthy, but only in a way an app passes through (Progressing without a bad
    /// resource, an operation running, stale health): after the deadline it pauses a streak.
    transient: bool,
    /// Not an observation: the connected stream vouched that nothing changed since the last
    /// one, so the time in between counts as observed.
    vouched: bool,
}

/// One delivery of an app to the judge (an observation or a stream glimpse), for the baseline
/// and deployment oracles.
#[derive(Clone, Copy, Debug)]
struct Delivery {
    at: Timestamp,
    /// No operation was running.
    idle: bool,
    /// The app-level health was Healthy.
    healthy_app: bool,
    /// The health predicate held (the oracle's).
    healthy: bool,
    /// The index of the revision deployed (ground truth at delivery).
    deployed: Option<usize>,
    /// The index of the revision the health was compared with (`sync.revision`).
    compared: Option<usize>,
    /// The index of the revision the last operation applied, when it Succeeded.
    applied: Option<usize>,
    /// The app was OutOfSync with the compared revision (the model's truth, a leftover aside).
    out_of_sync: bool,
    /// A glimpse (an app no watch followed), not an observation.
    glimpse: bool,
    /// The spec version the delivery showed (observations only).
    spec_version: u32,
    /// A clean before, as the evidence standard defines it: Synced, no operation running, the
    /// last operation (hooks included) Succeeded or none.
    clean: bool,
}

/// Invariants beyond the first set, each of which once caught a bug in the judge; kept as
/// separate switches so a failure can be narrowed down by turning them off one at a time.
#[derive(Clone, Copy, Debug, Default)]
struct Strict {
    /// Every change to a watch is handed over by `take_dirty` (else a restart loses it).
    dirty: bool,
    /// A tick at a stability window's end, with a fresh healthy observation, confirms.
    window: bool,
    /// Deadlines are judged as of their instant, whatever the order of ticks and
    /// observations around them (a late observation never rescues or condemns a watch).
    order: bool,
    /// The same for commits: a commit handled after a due deadline does not pre-empt it.
    arrival_order: bool,
    /// Nor does it pre-empt a due window end (a commit says nothing about health).
    window_arrival: bool,
    /// A deadline the connected stream vouched for is not INCONCLUSIVE.
    vouched_deadline: bool,
    /// A revert's pull request is withdrawn once: one `Withdraw` per request, however many
    /// watches share it and however many newer commits change their apps.
    withdraw_once: bool,
    /// A FAIL not reverted because its withdrawn pull request closed reads back from the state
    /// file as written (its newer commits typed, not recorded words).
    withdrawn_readback: bool,
    /// `expect=Healthy,Running`: the Running answer a confirmation rests on answered an ask made
    /// during the streak it confirms, not one asked for an earlier streak that broke
    /// (docs/verdicts.md#expect-running: "the streak breaking while verify runs discards its
    /// answer").
    verify_ask_in_streak: bool,
    /// `expect=Healthy,Running`: a health deadline that falls while a completed streak waits for
    /// verify is decided at its instant like any other (the streak outlives it), not left
    /// undecided until the streak ends.
    verify_deadline: bool,
}

impl Strict {
    const ALL: Strict = Strict {
        dirty: true,
        window: true,
        order: true,
        arrival_order: true,
        // Off until commit_arrived confirms a due window first (see the ignored rule test
        // `a_commit_arriving_after_a_due_window_end_does_not_replace_the_confirmation`).
        window_arrival: false,
        vouched_deadline: true,
        withdraw_once: true,
        // The judge keeps a withdrawn proposal's newer commits among the later commits, where
        // the state file re-types the verdict from (`GREENLIGHT_SIM_SEED=349` failed before).
        withdrawn_readback: true,
        verify_ask_in_streak: true,
        // The verify gate passes a deadline that falls while it waits, as any streak under way
        // (`GREENLIGHT_SIM_SEED=1204` left it undecided before).
        verify_deadline: true,
    };
}

struct Sim {
    rng: Rng,
    /// Draws for the attribution exemption only, so that the other draws of a seed are those
    /// of the scenarios before it existed.
    exempt_rng: Rng,
    /// Whether this scenario's judge exempts candidate files from attribution, as the
    /// promotion gate's does: `apps/*/cand-*.yaml`, then `apps/web/cand-own.yaml` re-included.
    exempting: bool,
    strict: Strict,
    cfg: JudgeConfig,
    engine: Engine,
    now: Timestamp,
    /// The branch's commits in order; index = position. Linear first-parent history.
    hist: Vec<String>,
    index: HashMap<String, usize>,
    /// The files each commit changed, by sha.
    changed: HashMap<String, Vec<String>>,
    /// Extra ancestry facts (side branches of merges).
    side: BTreeSet<(String, String)>,
    /// Pairs that are no ancestry though the order says so: the branch's commit a pulled
    /// watched commit was made before (`(tip, developer's commit)`).
    not_ancestor: BTreeSet<(String, String)>,
    /// A `git pull` merge of a watched commit made before the branch's tip: the merge, and the
    /// developer's commit it brings.
    pull_of: HashMap<String, String>,
    /// Draws for those pulls only, so that the other draws of a seed are those of before.
    pull_rng: Rng,
    apps: Vec<AppModel>,
    seen: HashMap<&'static str, Vec<Seen>>,
    /// Every delivery of each app, observations and glimpses.
    deliveries: HashMap<&'static str, Vec<Delivery>>,
    /// Watch ids with a revert requested and not yet reported.
    pending: Vec<String>,
    /// Reverts requested per watch id, outside a resume.
    requested: HashMap<String, u32>,
    /// The breaker by its documented rule.
    model_breaker: RuleBreaker,
    /// Apps confirmed while a revert decided before them was pending: they count once those
    /// reverts have finished (in the order of the verdicts). Not kept across a restart.
    model_confirm_deferred: Vec<String>,
    /// What the store would hold if it persisted only `take_dirty`.
    store: BTreeMap<String, Watch>,
    /// Watches the engine let go (`forget_finished`), as the runtime does after each write: a
    /// restart knows them as finished ids, as the state file's records.
    forgotten: BTreeSet<String>,
    /// Watches that went through a kind of event after which a revert is never allowed.
    never_revert: BTreeSet<String>,
    /// `(state, revert requested and not landed)` of every watch as the previous engine call
    /// left it (pending with the executor, or proposed as a pull request), by position (the
    /// engine only appends watches, and a restore keeps their order).
    prev: Vec<(State, bool)>,
    /// Each watch's streak (`healthy_since`) as the previous engine call left it, by position.
    prev_since: Vec<Option<Timestamp>>,
    /// Watches that a later commit touching their app made unattributable (by the oracle).
    touched_later: BTreeSet<String>,
    /// Draws for source paths that move (an edited `manifest-generate-paths`), apart, so that
    /// the other draws of a seed are those of the scenarios before they moved.
    paths_rng: Rng,
    /// Whether this scenario's apps change their source paths now and then.
    paths_moving: bool,
    /// Each app's source paths as the engine was last shown them (an observation or a glimpse;
    /// gone when it saw the app absent, and after a restart, which keeps none).
    engine_paths: HashMap<&'static str, SourcePaths>,
    /// The source paths each watch judges under, by the model: its app's as the engine was last
    /// shown them when it started, then those of each observation of its app (stored with it).
    watch_paths: HashMap<String, Option<SourcePaths>>,
    /// Each live watch's later commits that touched none of the paths it judged under since
    /// they arrived (their changed paths): the oracle checks them against every new paths.
    pending_later: HashMap<String, Vec<Vec<String>>>,
    /// Whether the breaker was open after the previous call.
    was_open: bool,
    /// Whether this scenario's daemon vouches for apps its connected stream delivered.
    streaming: bool,
    /// The stream connection: bumped when it is cut (outage, clock jump, restart).
    stream_gen: u64,
    /// The connection that last delivered each app.
    delivered: HashMap<&'static str, u64>,
    /// When the engine last resumed after a restart.
    resumed_at: Option<Timestamp>,
    trace: Vec<String>,
    next_commit: u64,
    seed: u64,
    counters: Counters,
    /// Each merge's mainline: the branch's tip before it (a `git pull` merge has it second).
    merge_mainline: HashMap<String, String>,
    /// Commits a commit on the branch says it reverts.
    reverted: BTreeSet<String>,
    /// Re-opened watches already checked.
    reopened: BTreeSet<String>,
    /// The arrived commits the engine handed over for the state file (`take_arrived`).
    arrived_store: Vec<greenlight_core::judge::Arrived>,
    /// Each watch's tape as the engine handed it over (`take_tapes`), as a store keeps it.
    tapes: BTreeMap<String, Vec<greenlight_core::tape::Step>>,
    /// Draws for reverts by pull request only, so that the other draws of a seed are those of
    /// the scenarios before it existed.
    pr_rng: Rng,
    /// Whether this scenario's executor proposes its reverts as pull requests.
    by_pr: bool,
    /// The pull requests the model's forge holds, by url (ended ones kept).
    proposals: BTreeMap<String, ModelProposal>,
    /// Each watch that waited for a pull request, and the request's url.
    proposal_of: BTreeMap<String, String>,
    /// Executor requests of watches that got another watch's proposal: never carried out.
    ignored_requests: Vec<String>,
    /// Revert commits the forge said merged, still to arrive on the branch (their first
    /// parent is the tip when they arrive).
    landing: Vec<CommitInfo>,
    next_pr: u64,
    /// The call's `Withdraw` effects were checked against the model (by `proposals_see`).
    withdraws_checked: bool,
    /// Draws for `expect=Healthy,Running` only (trailers, Pods, verify's answers), so that the
    /// other draws of a seed are those of the scenarios before it existed.
    run_rng: Rng,
    /// Each app's Pods, by the index of `apps`.
    pods: Vec<PodsModel>,
    /// Asks of verify not answered yet (a restart drops them: the engine forgets them too).
    asks: Vec<Ask>,
    /// What verify was asked and answered, by watch id, since the last restart.
    verify_log: BTreeMap<String, VerifyLog>,
    /// Numbers verify's answers, so that each summary is unique.
    next_answer: u64,
}

#[derive(Default, Debug, Clone)]
struct Counters {
    states: BTreeMap<&'static str, u64>,
    reverts: u64,
    /// Reverts adopted from another watch of the same commit (counted once by the breaker).
    shared_reverts: u64,
    /// Confirmations that left another app's reverts counted.
    confirmed_beside_reverts: u64,
    /// Apps put back on an older revision.
    withdrawals: u64,
    /// Watches ended NOT_REACHED because their commit was withdrawn.
    withdrawn: u64,
    /// Watches ended NOT_REACHED because greenlight's revert for another app withdrew it.
    withdrawn_by_greenlight: u64,
    /// FAILs not reverted for want of evidence (docs/verdicts.md#evidence).
    no_evidence: u64,
    /// FAILs not reverted because the commit was not shown to be at fault.
    not_at_fault: u64,
    /// Verdicts on a failed PostSync hook of an applied commit.
    hook_failures: u64,
    /// FAIL, not reverted: the Application's spec changed under the watch.
    changed_outside: u64,
    /// Watches ended because their app's paths moved after later commits were left out.
    paths_moved: u64,
    /// CONFIRMED after the streak paused on a transient state after the deadline.
    paused_confirmations: u64,
    /// INCONCLUSIVE: a pause not healthy again within stable-for.
    pauses_inconclusive: u64,
    /// NOT_REACHED because the last sync failed before applying the commit.
    sync_failed: u64,
    /// Watches that re-opened after NOT_REACHED, their commit deployed later.
    reopened: u64,
    /// Reverts not pushed: a fix-forward landed on the branch just before the push.
    superseded: u64,
    /// Merges whose first parent is the developer's side (`git pull`), and those watched.
    pull_merges: u64,
    watched_merges: u64,
    /// Watched commits made before the branch's tip and brought by a `git pull` merge.
    pulled_watched: u64,
    /// CONFIRMED on an app OutOfSync for good through a resource left for pruning.
    leftover_confirmed: u64,
    /// Verdicts of watches whose baseline was seen only after Argo CD compared the commit.
    compared_baselines: u64,
    /// Reverts on such an app (its before clean apart from the leftover).
    leftover_reverts: u64,
    restarts: u64,
    events: u64,
    /// Shadow and dry-run failures whose outcome is "would have reverted".
    would_have_reverted: u64,
    /// Reverts proposed as pull requests (by the executor).
    proposals: u64,
    /// Watches that waited for another watch's pull request.
    shared_proposals: u64,
    /// Pull requests merged by their commit arriving on the branch.
    merged_by_commit: u64,
    /// Pull requests the forge said merged (before their commit arrived).
    merged_by_forge: u64,
    /// Pull requests closed unmerged.
    closed: u64,
    /// Pull requests withdrawn because a newer commit changed the app.
    withdrawn_proposals: u64,
    /// Pull requests made moot by a human's revert of the commit.
    adopted_proposals: u64,
    /// Reverts the forge merged at once (reported as merged by the executor).
    merged_at_once: u64,
    /// Executor reports on requests another watch's proposal made moot (ignored).
    ignored_requests: u64,
    /// Watches with `expect=Healthy,Running`.
    expect_running: u64,
    /// `Effect::Verify` asks.
    verify_asks: u64,
    /// Verify's answers by kind: Running, NotRunning, Tag, Failed.
    answers_running: u64,
    answers_not_running: u64,
    answers_tag: u64,
    answers_failed: u64,
    /// Answers for a watch no longer waiting for verify (ignored by the engine).
    answers_ignored: u64,
    /// Asks dropped by a restart.
    asks_dropped: u64,
    /// Asks due before a call that then ended the watch.
    asks_moot: u64,
    /// CONFIRMED with `; verified: ...`.
    confirmed_after_verify: u64,
    /// FAIL: the Pods did not run what git pins (never reverted).
    not_running_fails: u64,
    /// Of those, armed and not dry-run (a revert would otherwise have been possible).
    not_running_armed: u64,
    /// ERROR_UNWATCHABLE: a manifest names a tag.
    unwatchable_by_tag: u64,
    /// INCONCLUSIVE: what the Pods run could not be read.
    inconclusive_not_verified: u64,
    /// Finished watches the engine let go.
    forgotten: u64,
    /// Verdicts replayed from their tapes, each to the same watch (`docs/why.md`).
    replayed: u64,
    /// Tapes that reached their bound (not replayed).
    tapes_full: u64,
}

const APPS: [&str; 4] = ["web", "api", "ghost", "odd"];

fn ts(ms: i64) -> Timestamp {
    Timestamp(BASE_MS + ms)
}

impl Sim {
    fn new(seed: u64, strict: Strict) -> Sim {
        let mut rng = Rng::new(seed);
        let mut cfg = JudgeConfig::new(REPO, "main", true);
        cfg.stable_for_ms = rng.range(5, 120) * 1000;
        cfg.stale_after_ms = rng.range(8, 45) * 1000;
        cfg.unknown_app_grace_ms = rng.range(5, 90) * 1000;
        cfg.dry_run = rng.chance(10);
        let mut exempt_rng = Rng::new(seed ^ 0x5eed_e4e3_9700_0000);
        let exempting = exempt_rng.chance(30);
        let mut pr_rng = Rng::new(seed ^ 0x0071_1e57_9e11_0000);
        let by_pr = pr_rng.chance(30);
        let run_rng = Rng::new(seed ^ 0x7275_6e00_0e1c_0000);
        let mut paths_rng = Rng::new(seed ^ 0x9a75_5000_0000_0000);
        let paths_moving = paths_rng.chance(40);
        // A short re-open horizon now and then (a generator of its own, so other seeds draw as
        // before): a first watch's horizon then passes while a re-opened one is still held.
        let mut horizon_rng = Rng::new(seed ^ 0x4012_2000_0000_0000);
        if horizon_rng.chance(30) {
            cfg.reopen_horizon_ms = horizon_rng.range(20, 400) * 1000;
        }
        if exempting {
            cfg.attribution_exempt = vec![
                "apps/*/cand-*.yaml".into(),
                "!apps/web/cand-own.yaml".into(),
            ];
        }
        let mut apps = Vec::new();
        for name in APPS {
            let paths = if rng.chance(15) {
                SourcePaths::Unknown {
                    why: "plugin".into(),
                }
            } else {
                SourcePaths::Known(vec![format!("apps/{name}")])
            };
            let defect = match name {
                "odd" => Some(*rng.pick(&["helm", "oci", "tag", "chart", "elsewhere"])),
                _ => None,
            };
            apps.push(AppModel {
                name,
                exists: name != "ghost" || rng.chance(30),
                deployed: None,
                compared: None,
                sync_status: "OutOfSync",
                op_phase: None,
                hook_failed: false,
                spec_version: 0,
                op_rev: None,
                op_started: None,
                health: Health::Missing,
                bad_resource: false,
                leftover: name != "odd" && rng.chance(25),
                stale: false,
                history: Vec::new(),
                automated: !rng.chance(15),
                paths,
                defect,
                flap: rng.range(1, 30) as u64,
            });
        }
        let engine = Engine::new(cfg.clone());
        let base = sha(1);
        let mut index = HashMap::new();
        index.insert(base.clone(), 0);
        Sim {
            rng,
            exempt_rng,
            exempting,
            strict,
            cfg,
            engine,
            now: ts(0),
            hist: vec![base],
            changed: HashMap::new(),
            index,
            side: BTreeSet::new(),
            not_ancestor: BTreeSet::new(),
            pull_of: HashMap::new(),
            pull_rng: Rng::new(seed ^ 0x0b11_0000_7e57_0000),
            apps,
            seen: HashMap::new(),
            pending: Vec::new(),
            requested: HashMap::new(),
            model_breaker: RuleBreaker::default(),
            model_confirm_deferred: Vec::new(),
            store: BTreeMap::new(),
            forgotten: BTreeSet::new(),
            never_revert: BTreeSet::new(),
            prev: Vec::new(),
            prev_since: Vec::new(),
            was_open: false,
            streaming: false,
            stream_gen: 0,
            resumed_at: None,
            delivered: HashMap::new(),
            deliveries: HashMap::new(),
            touched_later: BTreeSet::new(),
            paths_rng,
            paths_moving,
            engine_paths: HashMap::new(),
            watch_paths: HashMap::new(),
            pending_later: HashMap::new(),
            trace: Vec::new(),
            next_commit: 10,
            seed,
            counters: Counters::default(),
            merge_mainline: HashMap::new(),
            reverted: BTreeSet::new(),
            reopened: BTreeSet::new(),
            arrived_store: Vec::new(),
            tapes: BTreeMap::new(),
            pr_rng,
            by_pr,
            proposals: BTreeMap::new(),
            proposal_of: BTreeMap::new(),
            ignored_requests: Vec::new(),
            landing: Vec::new(),
            next_pr: 0,
            withdraws_checked: false,
            run_rng,
            pods: vec![PodsModel::default(); APPS.len()],
            asks: Vec::new(),
            verify_log: BTreeMap::new(),
            next_answer: 0,
        }
    }

    /// The watch `id`, as the engine holds it, or as stored when the engine let it go.
    fn held_or_stored(&self, id: &str) -> Option<&Watch> {
        self.engine
            .watches()
            .iter()
            .find(|w| w.id == id)
            .or_else(|| {
                self.forgotten
                    .contains(id)
                    .then(|| self.store.get(id))
                    .flatten()
            })
    }

    fn position(&self, id: &str) -> Option<usize> {
        self.engine.watches().iter().position(|w| w.id == id)
    }

    fn fail(&self, what: &str) -> ! {
        let tail: Vec<&String> = self
            .trace
            .iter()
            .rev()
            .take(
                std::env::var("GREENLIGHT_SIM_TRACE")
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(40),
            )
            .collect::<Vec<_>>();
        let tail: Vec<&String> = tail.into_iter().rev().collect();
        panic!(
            "seed {} ({:?}): {what}\nconfig: {:?}\nlast actions:\n  {}\nwatches: {:#?}",
            self.seed,
            self.strict,
            self.cfg,
            tail.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n  "),
            self.engine.watches()
        );
    }

    fn answer(&self, qs: Vec<(String, String)>) -> Ancestry {
        let mut map = HashMap::new();
        for (c, r) in qs {
            let yes = self.side.contains(&(c.clone(), r.clone()))
                || (!self.not_ancestor.contains(&(c.clone(), r.clone()))
                    && match (self.index.get(&c), self.index.get(&r)) {
                        (Some(i), Some(j)) => i <= j,
                        _ => false,
                    });
            map.insert((c, r), yes);
        }
        Ancestry(map)
    }

    // ------------------------------------------------------------ actions

    fn new_commit_sha(&mut self) -> String {
        self.next_commit += 1;
        sha(self.next_commit)
    }

    fn push_commit(&mut self, c: CommitInfo) {
        if let Some(at) = c.message.find("This reverts commit ") {
            let sha: String = c.message[at + "This reverts commit ".len()..]
                .chars()
                .take(40)
                .collect();
            self.reverted.insert(sha);
        }
        self.index.insert(c.sha.to_string(), self.hist.len());
        self.changed
            .insert(c.sha.to_string(), c.changed_paths.to_vec());
        self.hist.push(c.sha.to_string());
        let q = self.engine.arrival_questions(&c);
        let anc = self.answer(q);
        let now = self.now;
        self.trace.push(format!(
            "{} arrive {} parents={} paths={:?} msg={:?}",
            now.0 - BASE_MS,
            c.sha.short(),
            c.parents.len(),
            c.changed_paths,
            c.message.lines().last().unwrap_or_default()
        ));
        // The attribution oracle: which live watches does this commit make unattributable?
        let mut human_reverted = Vec::new();
        let mut pending = Vec::new();
        for w in self.engine.watches() {
            if w.state().is_terminal() || w.commit == c.sha {
                continue;
            }
            let brings_it = c.parents[1..].iter().any(|p| {
                *p == w.commit || self.side.contains(&(w.commit.to_string(), p.to_string()))
            }) || self.pull_of.get(c.sha.as_str()) == Some(&w.commit.to_string());
            let reverts_it = c
                .message
                .contains(&format!("This reverts commit {}", w.commit));
            // Against the paths the watch judges under now; none known yet (it was not
            // observed, and the engine was shown none of its app's): checked when they are.
            let touches = self
                .watch_paths
                .get(&w.id)
                .cloned()
                .flatten()
                .is_some_and(|p| self.oracle_touches(&p, &c.changed_paths));
            // A deadline already due may be decided first (its verdict came before the commit).
            let due = w
                .reached_at()
                .unwrap_or(w.watch_started_at)
                .plus_ms(w.deadline_ms);
            if due < now && !w.deadline_passed() {
                continue;
            }
            if touches && !brings_it && !reverts_it {
                self.touched_later.insert(w.id.clone());
            } else if !brings_it && !reverts_it {
                pending.push((w.id.clone(), c.changed_paths.to_vec()));
            }
            if reverts_it && !brings_it && !w.revert_pending() {
                human_reverted.push(w.id.clone());
            }
        }
        for (id, paths) in pending {
            self.pending_later.entry(id).or_default().push(paths);
        }
        let out = self.engine.commit_arrived(&c, &anc, now);
        self.proposals_see(&c, &out);
        // An attribution verdict only where the oracle saw a later commit touch the app: a
        // commit of exempt paths only (another workload's candidate) ends no watch.
        for e in &out {
            let Effect::Emit(ev) = e else { continue };
            if ev.event != EventKind::Attribution {
                continue;
            }
            if !self.apps.iter().any(|a| Some(a.name.to_string()) == ev.app) {
                continue;
            }
            // (Against the paths the watch judged under when the commit arrived.)
            let counted = self.engine.watches().iter().any(|w| {
                Some(w.commit.to_string()) == ev.commit
                    && Some(w.app.to_string()) == ev.app
                    && self
                        .watch_paths
                        .get(&w.id)
                        .cloned()
                        .flatten()
                        .is_some_and(|p| self.oracle_touches(&p, &c.changed_paths))
            });
            if !counted {
                self.fail(&format!(
                    "attribution for {:?} on {:?} by {} (paths {:?}), which touched none of its app's counted paths",
                    ev.commit, ev.app, c.sha, c.changed_paths
                ));
            }
        }
        self.after(out, false);
        // A human's revert of a watched commit before its verdict ends the watch, unpushed.
        for id in human_reverted {
            let w = self.held_or_stored(&id).unwrap();
            if !w.state().is_terminal() || w.revert_pending() {
                self.fail(&format!(
                    "{id} still {:?} after a human reverted it",
                    w.state()
                ));
            }
            self.never_revert.insert(id);
        }
    }

    /// Whether a commit that changed `changed` touches an app with `paths`, by the documented
    /// rule: unknown paths are touched by every commit but one of exempt paths only.
    fn oracle_touches(&self, paths: &SourcePaths, changed: &[String]) -> bool {
        let exempt = |f: &String| self.oracle_exempt(f);
        match paths {
            SourcePaths::Unknown { .. } => changed.is_empty() || changed.iter().any(|f| !exempt(f)),
            SourcePaths::Known(ps) => changed
                .iter()
                .filter(|f| !exempt(f))
                .any(|f| ps.iter().any(|p| f.starts_with(&format!("{p}/")))),
        }
    }

    /// The paths the engine is shown for `a` now (`None`: not from the watched repository).
    fn shown_paths(snap: &AppSnapshot) -> Option<SourcePaths> {
        match &snap.source {
            SourceFacts::FromRepo { paths, .. } => Some(paths.clone()),
            SourceFacts::NotFromRepo { .. } => None,
        }
    }

    /// Exempt from attribution, by the scenario's rule spelled out here rather than read from
    /// the judge's patterns: another workload's candidate file beside an app's
    /// (`apps/<app>/cand-<name>.yaml`), never `apps/web/cand-own.yaml`.
    fn oracle_exempt(&self, f: &str) -> bool {
        let parts: Vec<&str> = f.split('/').collect();
        self.exempting
            && f != "apps/web/cand-own.yaml"
            && parts.len() == 3
            && parts[0] == "apps"
            && parts[2].starts_with("cand-")
            && parts[2].ends_with(".yaml")
            && parts[2].len() >= "cand-.yaml".len()
    }

    fn app_path(&mut self) -> String {
        let app = *self.rng.pick(&APPS);
        format!("apps/{app}/deploy.yaml")
    }

    fn watched_commit(&mut self) {
        let app = *self.rng.pick(&APPS);
        let mut trailers = Vec::new();
        let mut others = Vec::new();
        let n = if self.rng.chance(15) { 2 } else { 1 };
        for t in 0..n {
            // A second trailer names another app more often than not.
            let a = if self.rng.chance(if t == 0 { 80 } else { 40 }) {
                app
            } else {
                self.rng.pick(&APPS)
            };
            if a != app {
                others.push(a);
            }
            let mode = if self.rng.chance(60) { "arm" } else { "shadow" };
            let deadline = self.rng.range(10, 400);
            let expect = self.expect();
            if self.rng.chance(5) {
                trailers.push(format!("Nav-Watchdog: app={a} deadline=never{expect}"));
            } else {
                trailers.push(format!(
                    "Nav-Watchdog: app={a} deadline={deadline}s mode={mode}{expect}"
                ));
            }
        }
        let mut paths = vec![format!("apps/{app}/deploy.yaml")];
        // A commit for two apps mostly changes both (one revert then serves two watches).
        for other in others {
            if self.rng.chance(70) {
                paths.push(format!("apps/{other}/deploy.yaml"));
            }
        }
        if self.rng.chance(15) {
            paths = vec!["docs/notes.md".into()];
        } else if self.rng.chance(15) {
            let p = self.app_path();
            paths.push(p);
        }
        // Reverts by pull request: one request more often serves two watches of a commit.
        if self.by_pr && trailers.len() == 1 && self.pr_rng.chance(30) {
            let other = match app {
                "web" => "api",
                "api" => "web",
                _ => *self.pr_rng.pick(&["web", "api"]),
            };
            let deadline = self.pr_rng.range(10, 400);
            let expect = self.expect();
            trailers.push(format!(
                "Nav-Watchdog: app={other} deadline={deadline}s mode=arm{expect}"
            ));
            paths.push(format!("apps/{other}/deploy.yaml"));
        }
        let sha = self.new_commit_sha();
        let tip = self.hist.last().unwrap().clone();
        // A developer's commit made before the branch's tip, brought by a `git pull` merge
        // pushed with it: one sync deploys the tip's change with it, though the tip is no
        // ancestor of it (`docs/verdicts.md#evidence`). Only on a tip that is no merge.
        let pulled = self.hist.len() >= 3
            && !self.merge_mainline.contains_key(&tip)
            && self.pull_rng.chance(12);
        let parent = if pulled {
            self.hist[self.hist.len() - 2].clone()
        } else {
            tip.clone()
        };
        let message = format!(
            "change {app}\n\nwhy it changes\n\n{}\n",
            trailers.join("\n")
        );
        if pulled {
            self.not_ancestor.insert((tip.clone(), sha.clone()));
        }
        self.push_commit(CommitInfo {
            sha: cid(&sha),
            parents: vec![cid(&parent)],
            subject: format!("change {app}"),
            message,
            changed_paths: paths.clone().into(),
            mainline: None,
        });
        if pulled {
            self.counters.pulled_watched += 1;
            let merge = self.new_commit_sha();
            self.pull_of.insert(merge.clone(), sha.clone());
            self.merge_mainline.insert(merge.clone(), tip.clone());
            self.push_commit(CommitInfo {
                sha: cid(&merge),
                parents: vec![cid(&sha), cid(&tip)],
                subject: "Merge branch 'main' of origin".into(),
                message: "Merge branch 'main' of origin\n".into(),
                // What it brings into the branch: the developer's commit.
                changed_paths: paths.into(),
                mainline: Some(cid(&tip)),
            });
        }
    }

    /// A trailer's `expect`: `Healthy,Running` for about a fifth of them, else the default.
    fn expect(&mut self) -> &'static str {
        if self.run_rng.chance(20) {
            " expect=Healthy,Running"
        } else {
            ""
        }
    }

    fn plain_commit(&mut self) {
        let mut paths = if self.rng.chance(50) {
            vec![self.app_path()]
        } else {
            vec!["README.md".into()]
        };
        if self.paths_moving && self.paths_rng.chance(30) {
            paths = vec!["shared/values.yaml".into()];
        }
        // Another workload's candidate beside an app's files (exempt), the re-included own one
        // (counted), or a candidate with an app file (counted).
        if self.exempting && self.exempt_rng.chance(40) {
            let app = *self.exempt_rng.pick(&APPS);
            let name = *self.exempt_rng.pick(&["api", "own", "llm"]);
            let cand = format!("apps/{app}/cand-{name}.yaml");
            if self.exempt_rng.chance(70) {
                paths = vec![cand];
            } else {
                paths.push(cand);
            }
        }
        let sha = self.new_commit_sha();
        let parent = self.hist.last().unwrap().clone();
        self.push_commit(CommitInfo {
            sha: cid(&sha),
            parents: vec![cid(&parent)],
            subject: "tweak".into(),
            message: "tweak\n\nno trailer here\n".into(),
            changed_paths: paths.into(),
            mainline: None,
        });
    }

    /// A merge whose side parent either carries a watched commit or does not: a merge of a
    /// feature branch (the branch first), or a `git pull` merge (the developer's side first, the
    /// branch second). Sometimes the merge itself carries a trailer.
    fn merge_commit(&mut self) {
        let side = self.new_commit_sha();
        let ws: Vec<String> = self
            .engine
            .watches()
            .iter()
            .map(|w| w.commit.to_string())
            .collect();
        if !ws.is_empty() && self.rng.chance(60) {
            let w = self.rng.pick(&ws).clone();
            self.side.insert((w, side.clone()));
        }
        let sha = self.new_commit_sha();
        let parent = self.hist.last().unwrap().clone();
        let paths = vec![self.app_path()];
        let pull = self.rng.chance(40);
        let parents = if pull {
            self.counters.pull_merges += 1;
            vec![cid(&side), cid(&parent)]
        } else {
            vec![cid(&parent), cid(&side)]
        };
        let mut message = "Merge branch 'feature'\n".to_string();
        if self.rng.chance(30) {
            self.counters.watched_merges += 1;
            let app = paths[0].split('/').nth(1).unwrap_or("web").to_string();
            let mode = if self.rng.chance(70) { "arm" } else { "shadow" };
            let deadline = self.rng.range(10, 200);
            message = format!(
                "Merge branch 'main' of origin\n\nNav-Watchdog: app={app} deadline={deadline}s mode={mode}\n"
            );
        }
        self.merge_mainline.insert(sha.clone(), parent.clone());
        self.push_commit(CommitInfo {
            sha: cid(&sha),
            parents,
            subject: "Merge branch 'feature'".into(),
            message,
            changed_paths: paths.into(),
            // greenlight records the branch's tips: the parent that was the tip is the mainline.
            mainline: Some(cid(&parent)),
        });
    }

    fn human_revert(&mut self) {
        let ws: Vec<(String, String)> = self
            .engine
            .watches()
            .iter()
            .map(|w| (w.commit.to_string(), w.app.name.clone()))
            .collect();
        if ws.is_empty() {
            return;
        }
        let (target, app) = self.rng.pick(&ws).clone();
        self.revert_commit(&target, &app);
    }

    fn revert_commit(&mut self, target: &str, app: &str) {
        let sha = self.new_commit_sha();
        let parent = self.hist.last().unwrap().clone();
        self.push_commit(CommitInfo {
            sha: cid(&sha),
            parents: vec![cid(&parent)],
            subject: "Revert \"change\"".into(),
            message: format!("Revert \"change\"\n\nThis reverts commit {target}.\n"),
            changed_paths: vec![format!("apps/{app}/deploy.yaml")].into(),
            mainline: None,
        });
    }

    /// Argo CD moves on: syncs, operations, health flapping.
    fn evolve(&mut self, i: usize) {
        // An edit of the app's `manifest-generate-paths`: its paths widen to a shared directory,
        // narrow back, or become unknown (no spec field changes).
        if self.paths_moving
            && !matches!(self.apps[i].paths, SourcePaths::Unknown { .. })
            && self.paths_rng.chance(2)
        {
            let name = self.apps[i].name;
            let own = format!("apps/{name}");
            self.apps[i].paths = match self.paths_rng.below(5) {
                0 | 1 => SourcePaths::Known(vec![own]),
                2 | 3 => SourcePaths::Known(vec![own, "shared".into()]),
                _ => SourcePaths::Unknown {
                    why: "manifest-generate-paths names a path outside the repository".into(),
                },
            };
            let paths = self.apps[i].paths.clone();
            self.trace
                .push(format!("{} paths {name} {paths:?}", self.now.0 - BASE_MS));
        }
        let tip = self.hist.len() - 1;
        let now = self.now;
        let r = &mut self.rng;
        let a = &mut self.apps[i];
        if a.name == "ghost" && r.chance(5) {
            a.exists = !a.exists;
        }
        if r.below(1000) < 4 {
            a.spec_version += 1;
        }
        if a.op_phase == Some("Running") {
            if r.chance(60) {
                let ok = r.chance(80);
                // A PostSync hook that fails after every object was applied and healthy.
                let hook_failed = !ok && r.chance(35);
                a.op_phase = Some(if ok {
                    "Succeeded"
                } else if hook_failed || r.chance(50) {
                    "Failed"
                } else {
                    "Error"
                });
                a.hook_failed = hook_failed;
                if hook_failed {
                    a.deployed = a.op_rev;
                    a.sync_status = "Synced";
                    a.health = Health::Healthy;
                } else if ok {
                    a.deployed = a.op_rev;
                    a.history.push(a.op_rev.unwrap());
                    a.sync_status = "Synced";
                    a.stale = r.chance(40);
                    a.health = Health::Progressing;
                } else {
                    a.sync_status = "OutOfSync";
                    a.health = Health::Degraded;
                }
            }
        } else if a.deployed.is_some() && a.sync_status == "Synced" && r.chance(3) {
            // A resync of the same revision: Synced, health unchanged, an operation running.
            a.op_phase = Some("Running");
            a.hook_failed = false;
            a.op_rev = a.deployed;
            a.op_started = Some(now);
        } else if a.compared != Some(tip) && r.chance(50) {
            a.compared = Some(tip);
            if r.chance(20) {
                // Manifests unchanged: the revision moves, Synced, no operation.
                a.deployed = Some(tip);
                a.sync_status = "Synced";
            } else {
                a.sync_status = "OutOfSync";
                if a.automated || r.chance(30) {
                    a.op_phase = Some("Running");
                    a.hook_failed = false;
                    a.op_rev = Some(tip);
                    a.op_started = Some(now);
                }
            }
        }
        // Health flaps, biased to stay and to be healthy.
        if r.chance(a.flap) {
            a.health = *r.pick(&[
                Health::Healthy,
                Health::Healthy,
                Health::Healthy,
                Health::Healthy,
                Health::Healthy,
                Health::Healthy,
                Health::Progressing,
                Health::Degraded,
                Health::Suspended,
                Health::Missing,
                Health::Unknown,
            ]);
        }
        if r.chance(a.flap / 2) {
            a.bad_resource = !a.bad_resource && r.chance(40);
        }
        if a.stale && r.chance(60) {
            a.stale = false;
        }
        self.pods_follow(i);
    }

    /// A deploy (a new revision applied) starts a rollout of the Pods: drawn afresh.
    fn pods_follow(&mut self, i: usize) {
        let deployed = self.apps[i].deployed;
        if self.pods[i].deployed == deployed {
            return;
        }
        let now = self.now;
        let stable = self.cfg.stable_for_ms;
        let r = &mut self.run_rng;
        let running_from = match r.below(20) {
            0..=7 => Some(now),
            8..=12 => Some(now.plus_ms(r.range(0, 2 * stable))),
            13..=14 => Some(now.plus_ms(r.range(2 * stable, 5 * stable))),
            // A stalled sync: the Pods never run it (until the next deploy).
            _ => None,
        };
        let tag = r.chance(5);
        self.pods[i] = PodsModel {
            deployed,
            running_from,
            tag,
        };
    }

    fn snapshot(&self, a: &AppModel) -> AppSnapshot {
        let rev = |i: Option<usize>| i.map(|i| self.hist[i].clone()).unwrap_or_default();
        let running = a.op_phase == Some("Running");
        let mut candidates = Vec::new();
        let mut push = |revision: String, via: ReachVia| {
            if revision.is_empty() {
                return;
            }
            let c = ReachCandidate { revision, via };
            if !candidates.contains(&c) {
                candidates.push(c);
            }
        };
        match a.op_phase {
            Some("Succeeded") => push(rev(a.op_rev), ReachVia::OperationSucceeded),
            Some(p @ "Failed") if a.hook_failed => push(
                rev(a.op_rev),
                ReachVia::PostSyncHookFailed {
                    phase: p.into(),
                    message: "one or more synchronization tasks completed unsuccessfully".into(),
                    hooks: vec!["batch/Job/smoke".into()],
                },
            ),
            Some(p @ ("Failed" | "Error")) => push(
                rev(a.op_rev),
                ReachVia::OperationFailed {
                    phase: p.into(),
                    message: "one or more objects failed to apply".into(),
                },
            ),
            _ => {}
        }
        if a.sync_status == "Synced" && !running {
            push(rev(a.deployed), ReachVia::SyncedRevision);
        }
        for (n, h) in a.history.iter().enumerate() {
            push(rev(Some(*h)), ReachVia::History { id: n as i64 });
        }
        let sync_revision = if a.sync_status == "Synced" {
            rev(a.deployed)
        } else {
            rev(a.compared)
        };
        let mut target = "main".to_string();
        let mut chart = None;
        let mut source_rev_override = None;
        let mut not_from_repo = false;
        match a.defect {
            Some("helm") => source_rev_override = Some("65.5.0".to_string()),
            Some("oci") => source_rev_override = Some(format!("sha256:{}", "ab".repeat(32))),
            Some("tag") => target = "v1.2.3".into(),
            Some("chart") => chart = Some("kube-prometheus-stack".into()),
            Some("elsewhere") => not_from_repo = true,
            _ => {}
        }
        let (sync_revision, candidates) = match &source_rev_override {
            Some(r) if a.deployed.is_some() => (
                r.clone(),
                vec![ReachCandidate {
                    revision: r.clone(),
                    via: ReachVia::SyncedRevision,
                }],
            ),
            Some(_) => (String::new(), Vec::new()),
            None => (sync_revision, candidates),
        };
        AppSnapshot {
            namespace: "argocd".into(),
            name: a.name.into(),
            source: if not_from_repo {
                SourceFacts::NotFromRepo {
                    repos: vec!["https://git.example.com/org/other.git".into()],
                }
            } else {
                SourceFacts::FromRepo {
                    target_revisions: vec![target],
                    chart,
                    revisions: candidates.iter().map(|c| c.revision.clone()).collect(),
                    paths: a.paths.clone(),
                }
            },
            // The leftover keeps a Synced app OutOfSync (only through it).
            sync_status: if a.leftover {
                "OutOfSync"
            } else {
                a.sync_status
            }
            .into(),
            sync_revision,
            health: a.health,
            health_message: String::new(),
            operation_running: running,
            last_operation: a.op_phase.map(|p| OperationFacts {
                phase: p.into(),
                message: String::new(),
                revision: rev(a.op_rev),
                started_at: a.op_started,
                finished_at: None,
                dry_run: false,
                partial: false,
            }),
            unhealthy_resources: if a.bad_resource {
                vec![UnhealthyResource {
                    kind: "Deployment".into(),
                    namespace: "default".into(),
                    name: a.name.into(),
                    health: Health::Degraded,
                    message: String::new(),
                }]
            } else {
                Vec::new()
            },
            resource_health_source: ResourceHealthSource::Application,
            health_stale: a.stale,
            automated_sync: a.automated,
            reach_candidates: candidates,
            compared_elsewhere: None,
            comparison_error: None,
            source_hydrator: false,
            inputs: [
                ("spec.source.repoURL".to_string(), "r".to_string()),
                (
                    "spec.source.kustomize".to_string(),
                    format!("v{}", a.spec_version),
                ),
            ]
            .into_iter()
            .collect(),
            resources: {
                let mut rs = Vec::new();
                if a.leftover {
                    rs.push(ResourceView {
                        group: String::new(),
                        kind: "ConfigMap".into(),
                        namespace: "default".into(),
                        name: format!("{}-old", a.name),
                        sync_status: "OutOfSync".into(),
                        requires_pruning: true,
                        health: None,
                        message: String::new(),
                    });
                }
                // The app's own workload, when a commit is compared but not synced: a rollout
                // pending (never a condition a baseline excuses). The resource-level view is
                // otherwise left out here: the model's health is the app's.
                if a.sync_status != "Synced" {
                    rs.push(ResourceView {
                        group: "apps".into(),
                        kind: "Deployment".into(),
                        namespace: "default".into(),
                        name: a.name.into(),
                        sync_status: "OutOfSync".into(),
                        requires_pruning: false,
                        health: Some(Health::Progressing),
                        message: String::new(),
                    });
                }
                rs
            },
        }
    }

    fn observe_app(&mut self, i: usize) {
        self.evolve(i);
        let a = self.apps[i].clone();
        let now = self.now;
        let healthy = a.healthy_by_oracle() && a.defect.is_none();
        let running = a.op_phase == Some("Running");
        let transient = a.exists
            && a.defect.is_none()
            && !healthy
            && (running
                || a.stale
                || (a.sync_status == "Synced"
                    && a.health == Health::Progressing
                    && !a.bad_resource));
        self.seen.entry(a.name).or_default().push(Seen {
            at: now,
            healthy,
            health: a.exists.then_some(a.health),
            transient,
            vouched: false,
        });
        if !a.exists {
            self.engine_paths.remove(a.name);
            self.trace
                .push(format!("{} absent {}", now.0 - BASE_MS, a.name));
            let out = self.engine.observe(
                Observation::Absent {
                    namespace: Some("argocd"),
                    name: a.name,
                },
                &Ancestry::default(),
                now,
            );
            self.after(out, false);
            return;
        }
        self.delivered.insert(a.name, self.stream_gen);
        let snap = self.snapshot(&a);
        self.deliveries.entry(a.name).or_default().push(Delivery {
            at: now,
            idle: a.op_phase != Some("Running"),
            healthy_app: a.health == Health::Healthy,
            healthy,
            deployed: a.deployed,
            compared: a.sync_revision_index(),
            applied: a.op_rev.filter(|_| a.op_phase == Some("Succeeded")),
            out_of_sync: a.sync_status != "Synced",
            glimpse: false,
            spec_version: a.spec_version,
            clean: clean_before(&snap),
        });
        let q = self.engine.reach_questions(&snap);
        let anc = self.answer(q);
        self.trace.push(format!(
            "{} observe {} sync={} health={:?} op={:?} running={} stale={} bad={} deployed={:?} healthy={}",
            now.0 - BASE_MS,
            a.name,
            a.sync_status,
            a.health,
            a.op_phase,
            snap.operation_running,
            a.stale,
            a.bad_resource,
            a.deployed,
            healthy
        ));
        let shown = Sim::shown_paths(&snap);
        match &shown {
            Some(p) => self.engine_paths.insert(a.name, p.clone()),
            None => self.engine_paths.remove(a.name),
        };
        // The paths each live watch of the app judges under from here: its later commits that
        // touched none before are checked against them — after this call for a watch whose
        // deadline is due, which is decided first, on what was known before.
        let mut moved = BTreeSet::new();
        let mut touched_after = Vec::new();
        if let Some(p) = &shown {
            for w in self.engine.watches() {
                if !w.is_live() || w.app.name != a.name {
                    continue;
                }
                let before = self.watch_paths.get(&w.id).cloned().flatten();
                if before.as_ref().is_some_and(|b| b != p) {
                    moved.insert(w.id.clone());
                }
                let touched = self
                    .pending_later
                    .get(&w.id)
                    .is_some_and(|l| l.iter().any(|c| self.oracle_touches(p, c)));
                let due = w
                    .reached_at()
                    .unwrap_or(w.watch_started_at)
                    .plus_ms(w.deadline_ms);
                if touched && due < now && !w.deadline_passed() {
                    touched_after.push(w.id.clone());
                } else if touched {
                    self.touched_later.insert(w.id.clone());
                }
            }
        }
        let out = self.engine.observe(Observation::Present(&snap), &anc, now);
        // An end for moved paths only where the paths moved.
        for e in &out {
            let Effect::Emit(ev) = e else { continue };
            if ev.event == EventKind::ChangedOutside && ev.message.contains("(source paths ") {
                let ok = self.engine.watches().iter().any(|w| {
                    Some(w.commit.to_string()) == ev.commit
                        && Some(w.app.to_string()) == ev.app
                        && moved.contains(&w.id)
                });
                if !ok {
                    self.fail(&format!("an end for moved paths where none moved: {ev:?}"));
                }
                self.counters.paths_moved += 1;
            }
        }
        if let Some(p) = &shown {
            let ids: Vec<String> = self
                .engine
                .watches()
                .iter()
                .filter(|w| w.is_live() && w.app.name == a.name)
                .map(|w| w.id.clone())
                .collect();
            for id in ids {
                self.watch_paths.insert(id, Some(p.clone()));
            }
        }
        self.after(out, false);
        self.touched_later.extend(touched_after);
        // A structurally unwatchable app ends its watches at once (an empty revision of a
        // non-git source is not an error: keep waiting).
        let structural = match a.defect {
            Some("helm" | "oci") => a.deployed.is_some(),
            Some(_) => true,
            None => false,
        };
        if structural
            && let Some(w) = self
                .engine
                .watches()
                .iter()
                .find(|w| w.app.name == a.name && !w.state().is_terminal())
        {
            self.fail(&format!(
                "{} still {:?} after observing unwatchable app {} ({:?})",
                w.id,
                w.state(),
                a.name,
                a.defect
            ));
        }
    }

    /// Whether two observations of the watch's app since it started showed different specs:
    /// a change from outside the watched repository, after which nothing is reverted.
    ///
    /// A failure at the health deadline is decided as of the deadline instant, before any
    /// observation handled at or after it (`docs/verdicts.md#deadline`: "what was due is
    /// decided first, on what was known before"), so such an observation is no change *under*
    /// the watch: it came after the verdict, whether a tick or the observation reached the
    /// judge first (the edit's own time is unknown; the failure was seen under the first
    /// inputs). `GREENLIGHT_SIM_SEED=3873` counted a spec edit delivered after a due deadline.
    fn spec_changed_under(&self, w: &Watch) -> bool {
        let failure = w.reverting().or(match w.verdict() {
            Some(Verdict::Failed { failure, .. }) => Some(failure),
            _ => None,
        });
        let decided_by = match failure {
            Some(Failure::NotHealthy { .. }) => w.reached_at().map(|r| r.plus_ms(w.deadline_ms)),
            _ => None,
        };
        let mut versions = self
            .deliveries
            .get(w.app.name.as_str())
            .into_iter()
            .flatten()
            .filter(|d| !d.glimpse && d.at >= w.watch_started_at)
            .filter(|d| decided_by.is_none_or(|due| d.at < due))
            .map(|d| d.spec_version);
        let first = versions.next();
        versions.any(|v| Some(v) != first)
    }

    /// Whether some observation of the watch's app showed the commit applied (deployed by a
    /// sync that succeeded, or by one that failed only in its PostSync hook): a sync that
    /// failed before applying it is never reach.
    fn applied(&self, w: &Watch) -> bool {
        let Some(k) = self.index.get(w.commit.as_str()).copied() else {
            return true; // not the model's commit: other invariants speak
        };
        self.deliveries.get(w.app.name.as_str()).is_some_and(|ds| {
            ds.iter()
                .any(|d| !d.glimpse && d.deployed.is_some_and(|i| i >= k))
        })
    }

    /// The oracle of the baseline rule, from what was delivered: a revert needs the app Healthy
    /// in its last idle delivery before reach that had not compared the commit yet, or the
    /// health predicate holding in a delivery after reach.
    fn fault_shown(&self, w: &Watch) -> bool {
        let Some(k) = self.index.get(w.commit.as_str()).copied() else {
            return true; // not the model's commit: other invariants speak
        };
        let Some(reached) = w.reached_at() else {
            return false;
        };
        let log = self
            .deliveries
            .get(w.app.name.as_str())
            .map(Vec::as_slice)
            .unwrap_or_default();
        let before = log
            .iter()
            .rev()
            .find(|d| d.at < reached && d.idle && d.compared.is_none_or(|i| i < k));
        let healthy_after = log
            .iter()
            .any(|d| !d.glimpse && d.at >= reached && d.healthy);
        before.is_some_and(|d| d.healthy_app) || healthy_after
    }

    /// The oracle of the evidence standard (docs/verdicts.md#evidence), from the model's own
    /// history: a revert needs the app's last idle delivery before reach at a revision without
    /// the commit to be clean, and no commit between that revision and the watched one to
    /// have changed the app. `None` when the evidence is there.
    fn evidence_missing(&self, w: &Watch) -> Option<&'static str> {
        let k = self.index.get(w.commit.as_str()).copied()?;
        let Some(reached) = w.reached_at() else {
            return Some("never reached");
        };
        let log = self
            .deliveries
            .get(w.app.name.as_str())
            .map(Vec::as_slice)
            .unwrap_or_default();
        let Some(before) = log
            .iter()
            .rev()
            .find(|d| d.at < reached && d.idle && d.compared.is_none_or(|i| i < k))
        else {
            return Some("no clean before: never delivered idle before the sync");
        };
        if !before.clean {
            return Some("no clean before: the app was not Synced with its last sync Succeeded");
        }
        let Some(ib) = before.compared else {
            return Some("a baseline at no revision: the batch is unknown");
        };
        let app = self.apps.iter().find(|a| a.name == w.app.name)?;
        let touches = |sha: &String| match &app.paths {
            SourcePaths::Unknown { .. } => true,
            SourcePaths::Known(ps) => self.changed.get(sha).is_some_and(|files| {
                files
                    .iter()
                    .any(|f| ps.iter().any(|p| f.starts_with(&format!("{p}/"))))
            }),
        };
        if self.hist[ib + 1..k].iter().any(touches) {
            return Some("another commit of the same sync changed the app");
        }
        None
    }

    /// The stream shows an app no live watch follows.
    fn glimpse_app(&mut self, i: usize) {
        self.evolve(i);
        let a = self.apps[i].clone();
        if !a.exists
            || self
                .engine
                .watches()
                .iter()
                .any(|w| w.is_live() && w.app.name == a.name)
        {
            return;
        }
        let now = self.now;
        let snap = self.snapshot(&a);
        self.deliveries.entry(a.name).or_default().push(Delivery {
            at: now,
            idle: !snap.operation_running,
            healthy_app: a.health == Health::Healthy,
            healthy: a.healthy_by_oracle() && a.defect.is_none(),
            deployed: a.deployed,
            compared: a.sync_revision_index(),
            applied: a.op_rev.filter(|_| a.op_phase == Some("Succeeded")),
            out_of_sync: a.sync_status != "Synced",
            glimpse: true,
            spec_version: 0,
            clean: clean_before(&snap),
        });
        self.trace.push(format!(
            "{} glimpse {} health={:?} running={} deployed={:?}",
            now.0 - BASE_MS,
            a.name,
            a.health,
            snap.operation_running,
            a.deployed
        ));
        let key = greenlight_core::snapshot::AppKey {
            namespace: "argocd".into(),
            name: a.name.into(),
        };
        match Sim::shown_paths(&snap) {
            Some(p) => self.engine_paths.insert(a.name, p),
            None => self.engine_paths.remove(a.name),
        };
        self.engine.glimpse(
            &key,
            &Glimpse {
                health: snap.health,
                sync_revision: snap.sync_revision.clone(),
                operation_running: snap.operation_running,
                sync_status: snap.sync_status.clone(),
                last_operation_phase: snap.last_operation.as_ref().map(|o| o.phase.clone()),
                last_operation_revision: snap.last_operation.as_ref().map(|o| o.revision.clone()),
                chronic: snap.chronic(),
                source_paths: match &snap.source {
                    SourceFacts::FromRepo { paths, .. } => Some(paths.clone()),
                    SourceFacts::NotFromRepo { .. } => None,
                },
            },
        );
    }

    /// The app is put back on an older revision (the branch force-pushed back, or a
    /// rollback): Synced there, the commits after it no longer deployed. An app OutOfSync for
    /// good through a leftover shows it only by the operation that started after the one seen
    /// at reach (docs/verdicts.md#withdrawn): the snapshot carries its start.
    fn withdraw(&mut self, i: usize) {
        let a = &mut self.apps[i];
        let Some(d) = a.deployed else { return };
        if d == 0 || a.op_phase == Some("Running") || a.defect.is_some() {
            return;
        }
        let back = self.rng.below(d as u64) as usize;
        a.deployed = Some(back);
        a.compared = Some(back);
        a.op_phase = Some("Succeeded");
        a.hook_failed = false;
        a.op_rev = Some(back);
        a.op_started = Some(self.now);
        a.history.push(back);
        a.sync_status = "Synced";
        let name = a.name;
        self.counters.withdrawals += 1;
        self.trace.push(format!(
            "{} withdraw {name} to {back}",
            self.now.0 - BASE_MS
        ));
        self.observe_app(i);
    }

    fn tick(&mut self) {
        // Often exactly at the next wakeup, as the daemon sleeps until it (observations go on
        // meanwhile, so only near ones are jumped to).
        if self.rng.chance(50)
            && let Some(at) = self.engine.next_wakeup()
            && at > self.now
            && at.ms_since(self.now) <= 5_000
        {
            self.now = at;
        }
        let now = self.now;
        if self.streaming {
            // The daemon's wake: the connected stream vouches for every app it delivered (the
            // simulated apps change only when observed, so the vouching is true).
            let mut apps: Vec<&'static str> = self
                .delivered
                .iter()
                .filter(|(_, g)| **g == self.stream_gen)
                .map(|(a, _)| *a)
                .collect();
            apps.sort();
            for app in apps {
                let last = self.seen.get(app).and_then(|v| v.last()).copied();
                if let Some(last) = last {
                    self.seen.entry(app).or_default().push(Seen {
                        at: now,
                        vouched: true,
                        ..last
                    });
                }
                self.trace.push(format!("{} vouch {app}", now.0 - BASE_MS));
                let key = greenlight_core::snapshot::AppKey {
                    namespace: "argocd".into(),
                    name: app.into(),
                };
                let out = self.engine.vouch(&key, now);
                self.after(out, false);
            }
        }
        self.trace.push(format!("{} tick", now.0 - BASE_MS));
        let out = self.engine.tick(now);
        self.after(out, false);
        self.check_nothing_due();
    }

    fn finish_revert(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let k = self.rng.below(self.pending.len() as u64) as usize;
        let id = self.pending.remove(k);
        let watch = self.held_or_stored(&id).cloned().unwrap();
        // A revert of the same commit already landed for another of its watches: the executor
        // finds it on the branch and adopts it.
        let landed_before = self
            .engine
            .watches()
            .iter()
            .find(|o| o.commit == watch.commit && o.id != id && o.revert_commit().is_some())
            .and_then(|o| o.revert_commit().cloned());
        // A fix-forward to the app pushed seconds before the revert's push: the executor's fetch
        // finds it, and pushes nothing.
        let fix_forward = (landed_before.is_none() && self.rng.chance(10)).then(|| {
            let sha = self.new_commit_sha();
            (sha, vec![format!("apps/{}/deploy.yaml", watch.app.name)])
        });
        let outcome = match self.rng.below(10) {
            _ if landed_before.is_some() => RevertOutcome::Adopted {
                revert: landed_before.clone().unwrap(),
            },
            _ if fix_forward.is_some() => {
                let (sha, paths) = fix_forward.clone().unwrap();
                RevertOutcome::Superseded {
                    newer: vec![greenlight_core::judge::LaterCommit {
                        sha: cid(&sha),
                        changed_paths: paths.into(),
                    }],
                }
            }
            // By pull request: proposed (now and then merged at once by the forge).
            0..=5 if self.by_pr => self.propose(),
            0..=5 => RevertOutcome::Pushed {
                revert: cid(&self.new_commit_sha()),
            },
            6..=7 => RevertOutcome::Adopted {
                revert: cid(&self.new_commit_sha()),
            },
            _ => RevertOutcome::Failed {
                message: "conflict".into(),
            },
        };
        let now = self.now;
        self.trace.push(format!(
            "{} revert_finished {id} {outcome:?}",
            now.0 - BASE_MS
        ));
        let landed = match &outcome {
            RevertOutcome::Pushed { revert }
            | RevertOutcome::Adopted { revert }
            | RevertOutcome::Merged { revert, .. } => Some(revert.to_string()),
            RevertOutcome::Failed { .. }
            | RevertOutcome::Superseded { .. }
            | RevertOutcome::Proposed { .. }
            | RevertOutcome::Closed { .. } => None,
        };
        let pushed = matches!(outcome, RevertOutcome::Pushed { .. });
        let merged_at_once = matches!(outcome, RevertOutcome::Merged { .. });
        let proposed = match &outcome {
            RevertOutcome::Proposed { proposal, .. } => Some(proposal.clone()),
            _ => None,
        };
        let out = self.engine.revert_finished(&id, outcome, now);
        if out.is_empty() {
            self.fail(&format!("revert_finished for pending {id} did nothing"));
        }
        if landed_before.is_some() {
            self.counters.shared_reverts += 1;
        }
        if let Some(revert) = landed {
            self.model_breaker
                .landed(watch.commit.as_str(), &revert, &watch.app.to_string());
        }
        if let Some(proposal) = proposed {
            self.proposed(&id, &watch, &proposal, &out);
        }
        if merged_at_once {
            // The forge merged it at once: the revert arrives on the branch later.
            self.counters.merged_at_once += 1;
            let w = self.held_or_stored(&id).cloned().unwrap();
            if w.state() != State::Reverted {
                self.fail(&format!(
                    "{id} {:?} after its revert merged at once",
                    w.state()
                ));
            }
            let c = self.greenlight_revert(&w, w.revert_commit().cloned().unwrap());
            self.landing.push(c);
        }
        let still_pending = self.engine.watches().iter().any(|w| w.revert_pending());
        if !still_pending {
            for app in std::mem::take(&mut self.model_confirm_deferred) {
                self.model_breaker.confirmed(&app);
            }
        }
        self.after(out, false);
        if let Some((sha, paths)) = fix_forward {
            self.counters.superseded += 1;
            let w = self.held_or_stored(&id).unwrap();
            if w.state() != State::Fail || w.revert_pending() || w.revert_commit().is_some() {
                self.fail(&format!(
                    "{id} superseded by a fix-forward, yet {:?} pending={} revert={:?}",
                    w.state(),
                    w.revert_pending(),
                    w.revert_commit()
                ));
            }
            self.never_revert.insert(id.clone());
            // The fix-forward arrives on the branch.
            let parent = self.hist.last().unwrap().clone();
            self.push_commit(CommitInfo {
                sha: cid(&sha),
                parents: vec![cid(&parent)],
                subject: "fix forward".into(),
                message: "fix forward\n\nthe fix\n".into(),
                changed_paths: paths.into(),
                mainline: None,
            });
            return;
        }
        // The pushed revert then arrives on the branch like any commit.
        if pushed && self.rng.chance(70) {
            let w = self.held_or_stored(&id).cloned().unwrap();
            let c = CommitInfo {
                sha: w.revert_commit().cloned().unwrap(),
                parents: vec![cid(self.hist.last().unwrap())],
                subject: format!("Revert \"{}\"", w.subject),
                // As greenlight writes it: git's words, the reason, its own trailer last.
                message: format!(
                    "Revert \"{}\"\n\nThis reverts commit {}.\n\ngreenlight: judged FAIL\n\nGreenlight-Revert-Of: {}\n",
                    w.subject, w.commit, w.commit
                ),
                changed_paths: vec![format!("apps/{}/deploy.yaml", w.app.name)].into(),
                mainline: None,
            };
            self.push_commit(c);
        }
    }

    // ------------------------------------------------------------ reverts by pull request

    /// The executor's outcome by pull request: a request opened on a fresh revert commit, now
    /// and then one the forge merged at once.
    fn propose(&mut self) -> RevertOutcome {
        let (proposal, note) = self.fresh_proposal();
        if self.pr_rng.chance(8) {
            return RevertOutcome::Merged {
                revert: proposal.revert,
                url: proposal.url,
            };
        }
        RevertOutcome::Proposed { proposal, note }
    }

    fn fresh_proposal(&mut self) -> (RevertProposal, Option<String>) {
        self.next_pr += 1;
        let n = self.next_pr;
        let proposal = RevertProposal {
            url: format!("https://git.example.com/org/repo/pull/{n}"),
            number: n,
            revert: cid(&self.new_commit_sha()),
            head: format!("greenlight/revert-{n}"),
            auto_merge: self.pr_rng.chance(50),
            superseded_by: Vec::new(),
            withdrawn_for: None,
        };
        let note = self
            .pr_rng
            .chance(20)
            .then(|| "auto-merge is not allowed on this repository".to_string());
        (proposal, note)
    }

    /// The executor proposed `watch`'s revert: it and every other watch of the commit whose
    /// revert was asked of the executor wait for the request (their own requests are never
    /// carried out), and the breaker counts the revert now, once per app.
    fn proposed(&mut self, id: &str, watch: &Watch, proposal: &RevertProposal, out: &[Effect]) {
        self.counters.proposals += 1;
        let commit = watch.commit.to_string();
        let shared: Vec<String> = self
            .pending
            .iter()
            .filter(|p| {
                self.engine
                    .watches()
                    .iter()
                    .any(|w| &w.id == *p && w.commit == watch.commit)
            })
            .cloned()
            .collect();
        self.pending.retain(|p| !shared.contains(p));
        self.ignored_requests.extend(shared.iter().cloned());
        self.counters.shared_proposals += shared.len() as u64;
        if let Some((url, _)) = self.proposals.iter().find(|(_, p)| {
            p.ended.is_none()
                && p.commit == commit
                && p.watches.iter().any(|w| !p.withdrawn_for.contains(w))
        }) {
            self.fail(&format!(
                "{} proposed for {commit} while {url} stands",
                proposal.url
            ));
        }
        let mut watches: BTreeSet<String> = shared.into_iter().collect();
        watches.insert(id.to_string());
        let said = out
            .iter()
            .filter(|e| matches!(e, Effect::Emit(ev) if ev.event == EventKind::RevertProposed))
            .count();
        if said != watches.len() {
            self.fail(&format!(
                "{said} revert_proposed events for {} watches waiting for {}: {out:#?}",
                watches.len(),
                proposal.url
            ));
        }
        for wid in &watches {
            let Some(w) = self.held_or_stored(wid).cloned() else {
                self.fail(&format!("{wid} vanished"));
            };
            if w.proposal().map(|p| p.url.as_str()) != Some(proposal.url.as_str())
                || w.state() != State::Fail
                || w.revert_pending()
                || w.verdict().is_some()
            {
                self.fail(&format!(
                    "{wid} should wait for {} (FAIL, nothing pending), is {:?} pending={} proposal={:?}",
                    proposal.url,
                    w.state(),
                    w.revert_pending(),
                    w.proposal()
                ));
            }
            self.model_breaker
                .landed(&commit, proposal.revert.as_str(), &w.app.to_string());
            self.proposal_of.insert(wid.clone(), proposal.url.clone());
        }
        self.proposals.insert(
            proposal.url.clone(),
            ModelProposal {
                commit,
                revert: proposal.revert.to_string(),
                watches,
                withdrawn_for: BTreeSet::new(),
                ended: None,
            },
        );
    }

    /// A watch that failed while its commit's revert stood proposed waits for the same request
    /// (its `revert_proposed` event): the request must be standing, and the breaker counts the
    /// revert for this app too.
    fn proposal_shared(&mut self, ev: &Event) {
        let Some(w) = self
            .engine
            .watches()
            .iter()
            .find(|w| {
                ev.commit.as_deref() == Some(w.commit.as_str())
                    && ev.app.as_deref() == Some(w.app.to_string().as_str())
                    && w.proposal().is_some()
            })
            .cloned()
        else {
            self.fail(&format!(
                "revert_proposed for no watch with a proposal: {ev:?}"
            ));
        };
        if self.proposal_of.contains_key(&w.id) {
            return; // the executor's report, already followed
        }
        let url = w.proposal().unwrap().url.clone();
        let Some(p) = self.proposals.get_mut(&url) else {
            self.fail(&format!("{} waits for {url}, which was never opened", w.id));
        };
        let standing = p.ended.is_none()
            && p.commit == w.commit.as_str()
            && p.watches.iter().any(|id| !p.withdrawn_for.contains(id));
        p.watches.insert(w.id.clone());
        let (commit, revert) = (p.commit.clone(), p.revert.clone());
        if !standing {
            self.fail(&format!(
                "{} joined {url}, which does not stand for its commit: {:?}",
                w.id, self.proposals[&url]
            ));
        }
        self.proposal_of.insert(w.id.clone(), url);
        self.model_breaker
            .landed(&commit, &revert, &w.app.to_string());
        self.counters.shared_proposals += 1;
    }

    /// A commit arrived while pull requests were open: the model's forge ends, or withdraws,
    /// each by the documented rules, and the engine's `Withdraw` effects must match.
    fn proposals_see(&mut self, c: &CommitInfo, out: &[Effect]) {
        self.withdraws_checked = true;
        let reverted: Option<String> = c.message.find("This reverts commit ").map(|at| {
            c.message[at + "This reverts commit ".len()..]
                .chars()
                .take_while(|ch| ch.is_ascii_hexdigit())
                .collect()
        });
        let greenlight = c
            .message
            .lines()
            .any(|l| l.starts_with("Greenlight-Revert-Of:"));
        let paths_of: BTreeMap<String, SourcePaths> = self
            .engine
            .watches()
            .iter()
            .filter(|w| self.proposal_of.contains_key(&w.id))
            // The paths the watch judged under (its app's may have moved since).
            .filter_map(|w| Some((w.id.clone(), self.watch_paths.get(&w.id).cloned()??)))
            .collect();
        let touches = |id: &String| match paths_of.get(id) {
            Some(SourcePaths::Known(ps)) => c
                .changed_paths
                .iter()
                .any(|f| ps.iter().any(|p| f.starts_with(&format!("{p}/")))),
            Some(SourcePaths::Unknown { .. }) | None => true,
        };
        let mut expected: BTreeSet<String> = BTreeSet::new();
        let mut again: BTreeSet<String> = BTreeSet::new();
        for (url, p) in self.proposals.iter_mut() {
            if p.ended.is_some() {
                continue;
            }
            let reverts_it = reverted.as_deref() == Some(p.commit.as_str());
            if c.sha.as_str() == p.revert
                || c.parents.iter().any(|q| q.as_str() == p.revert)
                || (reverts_it && greenlight)
            {
                p.ended = Some(ProposalEnd::Merged(c.sha.to_string()));
                self.counters.merged_by_commit += 1;
                continue;
            }
            if reverts_it {
                p.ended = Some(ProposalEnd::Adopted(c.sha.to_string()));
                self.counters.adopted_proposals += 1;
                expected.insert(url.clone());
                continue;
            }
            let touched: Vec<String> = p
                .watches
                .iter()
                .filter(|id| !p.withdrawn_for.contains(*id) && touches(id))
                .cloned()
                .collect();
            if touched.is_empty() {
                continue;
            }
            if p.withdrawn_for.is_empty() {
                self.counters.withdrawn_proposals += 1;
            } else {
                again.insert(url.clone());
            }
            p.withdrawn_for.extend(touched);
            expected.insert(url.clone());
        }
        let mut got: BTreeMap<String, u32> = BTreeMap::new();
        for e in out {
            if let Effect::Withdraw { proposal, why } = e {
                *got.entry(proposal.url.clone()).or_default() += 1;
                if why.trim().is_empty() {
                    self.fail(&format!("withdrawing {} without a why", proposal.url));
                }
            }
        }
        let urls: BTreeSet<String> = got.keys().cloned().collect();
        if urls != expected {
            self.fail(&format!(
                "{} arrived: withdrew {got:?}, by the rules {expected:?}",
                c.sha
            ));
        }
        if self.strict.withdraw_once
            && let Some((url, n)) = got.iter().find(|(u, n)| **n > 1 || again.contains(*u))
        {
            self.fail(&format!(
                "{} arrived: {url} withdrawn {n} times in one call{}",
                c.sha,
                if again.contains(url) {
                    ", after it had been withdrawn already"
                } else {
                    ""
                }
            ));
        }
    }

    /// The revert commit as greenlight writes it (git's words, the reason, its trailer last).
    fn greenlight_revert(&self, w: &Watch, sha: CommitId) -> CommitInfo {
        CommitInfo {
            sha,
            parents: vec![cid(self.hist.last().unwrap())],
            subject: format!("Revert \"{}\"", w.subject),
            message: format!(
                "Revert \"{}\"\n\nThis reverts commit {}.\n\ngreenlight: judged FAIL\n\nGreenlight-Revert-Of: {}\n",
                w.subject, w.commit, w.commit
            ),
            changed_paths: self.reverted_paths(w).into(),
            mainline: None,
        }
    }

    /// What a revert of the watch's commit changes: what the commit changed.
    fn reverted_paths(&self, w: &Watch) -> Vec<String> {
        self.changed
            .get(w.commit.as_str())
            .cloned()
            .unwrap_or_else(|| vec![format!("apps/{}/deploy.yaml", w.app.name)])
    }

    /// The commit by which pull request `url` lands on the branch: the revert itself, a merge
    /// commit with the revert its second parent, or a squash that carries greenlight's words.
    fn landing_commit(&mut self, url: &str, p: &ModelProposal) -> CommitInfo {
        let w = self
            .engine
            .watches()
            .iter()
            .find(|w| p.watches.contains(&w.id))
            .cloned()
            .unwrap_or_else(|| self.fail(&format!("no watch waits for {url}")));
        let tip = cid(self.hist.last().unwrap());
        let number = url.rsplit('/').next().unwrap_or("0").to_string();
        match self.pr_rng.below(3) {
            0 => self.greenlight_revert(&w, cid(&p.revert)),
            1 => CommitInfo {
                sha: cid(&self.new_commit_sha()),
                parents: vec![tip.clone(), cid(&p.revert)],
                subject: format!("Merge pull request #{number} from greenlight/revert-{number}"),
                message: format!(
                    "Merge pull request #{number} from greenlight/revert-{number}\n\nRevert \"{}\"\n",
                    w.subject
                ),
                changed_paths: self.reverted_paths(&w).into(),
                mainline: Some(tip),
            },
            _ => {
                let sha = cid(&self.new_commit_sha());
                let mut c = self.greenlight_revert(&w, sha);
                c.subject = format!("Revert \"{}\" (#{number})", w.subject);
                c.message = format!(
                    "Revert \"{}\" (#{number})\n\nThis reverts commit {}.\n\ngreenlight: judged FAIL\n\n* squashed\n\nGreenlight-Revert-Of: {}\n",
                    w.subject, w.commit, w.commit
                );
                c
            }
        }
    }

    /// The forge reports on pull request `url`: merged or closed. A report on a request no
    /// watch waits for any more changes nothing.
    fn forge_reports(&mut self, url: &str, end: RevertOutcome) {
        let now = self.now;
        self.trace
            .push(format!("{} forge {url} {end:?}", now.0 - BASE_MS));
        let open = self.proposals.get(url).is_some_and(|p| p.ended.is_none());
        let out = self.engine.proposal_ended(url, end.clone(), now);
        if open && out.is_empty() {
            self.fail(&format!("the forge's report on open {url} did nothing"));
        }
        if !open && !out.is_empty() {
            self.fail(&format!(
                "a report on {url}, which no watch waits for, did {out:#?}"
            ));
        }
        if open {
            let p = self.proposals.get_mut(url).unwrap();
            p.ended = Some(match &end {
                RevertOutcome::Merged { revert, .. } => {
                    self.counters.merged_by_forge += 1;
                    ProposalEnd::Merged(revert.to_string())
                }
                _ => {
                    self.counters.closed += 1;
                    ProposalEnd::Closed
                }
            });
        }
        self.after(out, false);
    }

    /// The forge merged `url` (its commit arrives later, or not in this scenario).
    fn forge_merges(&mut self, url: &str, p: &ModelProposal) {
        let c = self.landing_commit(url, p);
        self.forge_reports(
            url,
            RevertOutcome::Merged {
                revert: c.sha.clone(),
                url: url.to_string(),
            },
        );
        if self.pr_rng.chance(70) {
            self.landing.push(c);
        }
    }

    /// The forge and the branch move on for one open pull request: its commit arrives, the
    /// forge says merged or closed, or a fix-forward to the app withdraws it (after which the
    /// forge says closed, or merged if it had merged already). Also: a revert the forge said
    /// merged arrives, and the executor reports on a request another's proposal made moot.
    fn proposal_step(&mut self) {
        if !self.landing.is_empty() && self.pr_rng.chance(40) {
            let mut c = self.landing.remove(0);
            let tip = cid(self.hist.last().unwrap());
            c.parents[0] = tip.clone();
            if c.mainline.is_some() {
                c.mainline = Some(tip);
            }
            self.push_commit(c);
            return;
        }
        if !self.ignored_requests.is_empty() && self.pr_rng.chance(25) {
            let k = self.pr_rng.below(self.ignored_requests.len() as u64) as usize;
            let id = self.ignored_requests.remove(k);
            let outcome = if self.pr_rng.chance(50) {
                let (proposal, note) = self.fresh_proposal();
                RevertOutcome::Proposed { proposal, note }
            } else {
                RevertOutcome::Pushed {
                    revert: cid(&self.new_commit_sha()),
                }
            };
            let now = self.now;
            self.trace.push(format!(
                "{} revert_finished (moot) {id} {outcome:?}",
                now.0 - BASE_MS
            ));
            let before = self.held_or_stored(&id).cloned();
            let out = self.engine.revert_finished(&id, outcome, now);
            let after = self.held_or_stored(&id).cloned();
            if !out.is_empty() || before != after {
                self.fail(&format!(
                    "the executor's report on {id}'s moot request did {out:#?}"
                ));
            }
            self.counters.ignored_requests += 1;
            self.after(out, false);
            return;
        }
        let open: Vec<String> = self
            .proposals
            .iter()
            .filter(|(_, p)| p.ended.is_none())
            .map(|(u, _)| u.clone())
            .collect();
        if open.is_empty() {
            // A late report for a request no watch waits for.
            let all: Vec<String> = self.proposals.keys().cloned().collect();
            if !all.is_empty() && self.pr_rng.chance(10) {
                let url = self.pr_rng.pick(&all).clone();
                self.forge_reports(&url, RevertOutcome::Closed { url: url.clone() });
            }
            return;
        }
        let url = self.pr_rng.pick(&open).clone();
        let p = self.proposals[&url].clone();
        if !p.withdrawn_for.is_empty() {
            if self.pr_rng.chance(70) {
                self.forge_reports(&url, RevertOutcome::Closed { url: url.clone() });
            } else {
                self.forge_merges(&url, &p);
            }
            return;
        }
        match self.pr_rng.below(9) {
            0 | 1 => {
                let c = self.landing_commit(&url, &p);
                self.push_commit(c);
            }
            2 => {
                // A human reverts the commit while the request waits.
                let ids: Vec<String> = p.watches.iter().cloned().collect();
                let id = self.pr_rng.pick(&ids).clone();
                let app = self
                    .held_or_stored(&id)
                    .map(|w| w.app.name.clone())
                    .unwrap_or_else(|| "web".into());
                let commit = p.commit.clone();
                self.revert_commit(&commit, &app);
            }
            3 | 4 => self.forge_merges(&url, &p),
            5 | 6 => self.forge_reports(&url, RevertOutcome::Closed { url: url.clone() }),
            _ => {
                let ids: Vec<String> = p.watches.iter().cloned().collect();
                let id = self.pr_rng.pick(&ids).clone();
                let app = self
                    .held_or_stored(&id)
                    .map(|w| w.app.name.clone())
                    .unwrap_or_else(|| "web".into());
                let sha = self.new_commit_sha();
                let parent = self.hist.last().unwrap().clone();
                self.push_commit(CommitInfo {
                    sha: cid(&sha),
                    parents: vec![cid(&parent)],
                    subject: "fix forward".into(),
                    message: "fix forward\n\nthe real fix\n".into(),
                    changed_paths: vec![format!("apps/{app}/deploy.yaml")].into(),
                    mainline: None,
                });
            }
        }
    }

    /// Whether the watch waited for a pull request that was withdrawn for it, then closed.
    fn closed_after_withdrawal(&self, id: &str) -> bool {
        self.proposal_of.get(id).is_some_and(|url| {
            let p = &self.proposals[url];
            p.ended == Some(ProposalEnd::Closed) && p.withdrawn_for.contains(id)
        })
    }

    /// Every watch that waited for a pull request is where the model's forge says: waiting
    /// (FAIL, nothing pending, no verdict yet, withdrawn exactly when the model withdrew it),
    /// REVERTED only once the request merged or a revert of its commit arrived, REVERT_FAILED
    /// when closed, FAIL with no revert when closed after a withdrawal. The engine holds no
    /// request the model did not open, and never two standing requests for one commit.
    fn check_proposals(&self) {
        for (id, url) in &self.proposal_of {
            let Some(w) = self.held_or_stored(id) else {
                self.fail(&format!("{id}, waiting for {url}, vanished"));
            };
            let p = &self.proposals[url];
            let withdrawn = p.withdrawn_for.contains(id);
            let ok = match &p.ended {
                None => {
                    w.proposal().map(|q| q.url.as_str()) == Some(url.as_str())
                        && w.state() == State::Fail
                        && !w.revert_pending()
                        && w.verdict().is_none()
                        && w.revert_commit().is_none()
                        && w.proposal().unwrap().superseded_by.is_empty() != withdrawn
                }
                Some(ProposalEnd::Merged(sha) | ProposalEnd::Adopted(sha)) => {
                    w.proposal().is_none()
                        && w.state() == State::Reverted
                        && w.revert_commit().map(|c| c.as_str()) == Some(sha.as_str())
                }
                Some(ProposalEnd::Closed) if withdrawn => {
                    w.proposal().is_none()
                        && w.state() == State::Fail
                        && w.verdict().is_some()
                        && w.revert_commit().is_none()
                }
                Some(ProposalEnd::Closed) => {
                    w.proposal().is_none() && w.state() == State::RevertFailed
                }
            };
            if !ok {
                self.fail(&format!(
                    "{id} waited for {url} ({:?}, withdrawn for it: {withdrawn}), yet is {:?} pending={} revert={:?} proposal={:?}: {}",
                    p.ended,
                    w.state(),
                    w.revert_pending(),
                    w.revert_commit(),
                    w.proposal(),
                    w.reason()
                ));
            }
        }
        let mut standing: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (id, commit, p) in self.engine.proposals() {
            if self.proposal_of.get(&id) != Some(&p.url) {
                self.fail(&format!(
                    "{id} waits for {}, which the model never saw it join",
                    p.url
                ));
            }
            if p.superseded_by.is_empty() {
                standing
                    .entry(commit.to_string())
                    .or_default()
                    .insert(p.url);
            }
        }
        if let Some((commit, urls)) = standing.iter().find(|(_, urls)| urls.len() > 1) {
            self.fail(&format!("two standing proposals for {commit}: {urls:?}"));
        }
    }

    fn restart(&mut self) {
        self.counters.restarts += 1;
        self.stream_gen += 1;
        // The engine keeps no app's paths over a restart (its watches keep their own).
        self.engine_paths.clear();
        // Only what the store persisted survives: the watches handed over by take_dirty.
        let watches: Vec<Watch> = self.engine.watches().to_vec();
        for w in &watches {
            let stored = self.store.get(&w.id);
            if stored != Some(w) && self.strict.dirty {
                self.fail(&format!(
                    "watch {} changed without being handed over by take_dirty:\nstored {stored:#?}\nlive {w:#?}",
                    w.id
                ));
            }
        }
        // Through the state file: each watch's flat record as JSON, read back. It must read
        // back as exactly the watch that was written (reasons re-typed, nothing lost).
        let restored = through_the_store(&watches);
        for (before, after) in watches.iter().zip(&restored) {
            // (Only when the switch is off: the same words, re-typed as recorded text.)
            let tolerated = !self.strict.withdrawn_readback
                && self.closed_after_withdrawal(&before.id)
                && before.reason().to_string() == after.reason().to_string();
            if (before != after && !tolerated) || before.to_flat() != after.to_flat() {
                self.fail(&format!(
                    "watch {} does not read back as written:\nwritten {before:#?}\nread {after:#?}",
                    before.id
                ));
            }
        }
        let watches = restored;
        // What the store holds is what it read back.
        for w in &watches {
            self.store.insert(w.id.clone(), w.clone());
        }
        let breaker: Breaker =
            serde_json::from_str(&serde_json::to_string(self.engine.breaker()).unwrap()).unwrap();
        let proposals = self.engine.proposals();
        // Downtime: the clock moves on while nothing is observed.
        self.now = self.now.plus_ms(self.rng.range(0, 60_000));
        self.engine = Engine::restore(self.cfg.clone(), watches, breaker)
            .with_finished_ids(self.forgotten.clone());
        // The arrived commits, as the state file keeps them.
        self.engine.restore_arrived(self.arrived_store.clone());
        // Where each stored tape stands.
        let tapes = self
            .tapes
            .iter()
            .map(|(id, steps)| {
                let full = matches!(steps.last(), Some(greenlight_core::tape::Step::Full { .. }));
                let bytes = greenlight_core::tape::snapshot_bytes(steps);
                let r = greenlight_core::tape::Recording::resumed(steps.len(), bytes, full);
                (id.clone(), r)
            })
            .collect();
        self.engine.restore_tapes(tapes);
        if self.engine.proposals() != proposals {
            self.fail(&format!(
                "a restart lost or changed open pull requests: {proposals:#?} became {:#?}",
                self.engine.proposals()
            ));
        }
        self.model_confirm_deferred.clear();
        // Verify's answers under way die with the process; the engine forgets verify progress.
        self.counters.asks_dropped += self.asks.len() as u64;
        self.asks.clear();
        self.verify_log.clear();
        let now = self.now;
        self.trace
            .push(format!("{} restart+resume", now.0 - BASE_MS));
        let out = self.engine.resume(now);
        self.resumed_at = Some(now);
        // Re-issued reverts are for pending watches only.
        let mut reissued = Vec::new();
        for e in &out {
            if let Effect::Revert(r) = e {
                let w = self.held_or_stored(&r.watch_id);
                if let Some(p) = w.and_then(|w| w.proposal()) {
                    self.fail(&format!(
                        "resume re-issued the revert of {}, which waits for {}",
                        r.watch_id, p.url
                    ));
                }
                if !w.is_some_and(|w| w.revert_pending()) {
                    self.fail(&format!(
                        "resume re-issued a revert for a non-pending watch {r:?}"
                    ));
                }
                reissued.push(r.watch_id.clone());
            }
        }
        let mut want: Vec<String> = self
            .engine
            .watches()
            .iter()
            .filter(|w| w.revert_pending())
            .map(|w| w.id.clone())
            .collect();
        want.sort();
        reissued.sort();
        if want != reissued {
            self.fail(&format!("resume re-issued {reissued:?}, pending {want:?}"));
        }
        self.pending = reissued;
        self.after(out, true);
        if self.engine.proposals() != proposals {
            self.fail("resume changed the open pull requests");
        }
    }

    // ------------------------------------------------------------ expect=Healthy,Running

    /// Verify answers the asks whose answer is due, each by the app's Pods as they are now.
    fn verify_step(&mut self) {
        let now = self.now;
        let (due, later): (Vec<Ask>, Vec<Ask>) = std::mem::take(&mut self.asks)
            .into_iter()
            .partition(|a| a.due <= now);
        self.asks = later;
        for ask in due {
            self.answer_verify(ask);
        }
    }

    fn answer_verify(&mut self, ask: Ask) {
        let now = self.now;
        self.next_answer += 1;
        let n = self.next_answer;
        let a = &self.apps[ask.app];
        let p = &self.pods[ask.app];
        let name = a.name;
        let digest = format!("sha256:{:04x}", p.deployed.unwrap_or(0));
        let (kind, answer) = if !a.exists {
            let why = format!("Argo CD answered 404 for {name} (#{n})");
            (AnswerKind::Failed, Verification::Failed(why))
        } else if self.run_rng.chance(6) {
            let why = format!("Argo CD answered 503 (#{n})");
            (AnswerKind::Failed, Verification::Failed(why))
        } else if p.tag {
            let what = format!(
                "Deployment/default/{name} container main: registry.local/{name}:1.{n} names a tag"
            );
            (AnswerKind::Tag, Verification::Tag(what))
        } else if p.running_from.is_some_and(|t| t <= now) {
            let what = format!(
                "Deployment/default/{name} container main: all 2 Pod(s) run {digest} (#{n})"
            );
            (AnswerKind::Running, Verification::Running(what))
        } else {
            let what = format!(
                "Deployment/default/{name} container main: 1 of 2 Pod(s) run {digest}, 1 the previous (#{n})"
            );
            (AnswerKind::NotRunning, Verification::NotRunning(what))
        };
        let text = match &answer {
            Verification::Running(t)
            | Verification::NotRunning(t)
            | Verification::Tag(t)
            | Verification::Failed(t) => t.clone(),
        };
        match kind {
            AnswerKind::Running => self.counters.answers_running += 1,
            AnswerKind::NotRunning => self.counters.answers_not_running += 1,
            AnswerKind::Tag => self.counters.answers_tag += 1,
            AnswerKind::Failed => self.counters.answers_failed += 1,
        }
        let before = self.held_or_stored(&ask.watch).cloned();
        let waiting = before.as_ref().is_some_and(|w| w.is_live());
        self.trace.push(format!(
            "{} verified {} {kind:?} {text:?} (asked at {} for the streak since {:?})",
            now.0 - BASE_MS,
            ask.watch,
            ask.at.0 - BASE_MS,
            ask.since.map(|t| t.0 - BASE_MS)
        ));
        let seen_len = self.seen.get(name).map_or(0, Vec::len);
        self.verify_log
            .entry(ask.watch.clone())
            .or_default()
            .answers
            .push(Answered {
                at: now,
                kind,
                text,
                ask: ask.clone(),
                seen_len,
            });
        let out = self.engine.verified(&ask.watch, ask.number, answer, now);
        if !waiting {
            self.counters.answers_ignored += 1;
            let after = self.held_or_stored(&ask.watch);
            if !out.is_empty() || after != before.as_ref() {
                self.fail(&format!(
                    "an answer for {}, which no longer waits for verify, did something: {out:?}",
                    ask.watch
                ));
            }
        }
        self.after(out, false);
    }

    /// Every `Effect::Verify` of a call: only for a live watch with `expect=Healthy,Running`
    /// whose streak completed (by the stability oracle), once while an answer for its streak is
    /// outstanding, and again only a retry interval after the last answer. The model's verify
    /// then answers it after a random delay.
    ///
    /// A due moment is decided before what a call brings (docs/verdicts.md#deadline): an ask
    /// due before an observation is made for the streak as it stood, though the observation
    /// then breaks the streak or ends the watch (its answer then does nothing).
    fn verify_asked(&mut self, out: &[Effect], before: &[(State, bool)]) {
        let now = self.now;
        let stable = self.cfg.stable_for_ms;
        let window = stable.max(1000);
        let retry = (stable / 4).clamp(1000, 15_000);
        for e in out {
            let Effect::Verify {
                watch_id,
                commit,
                app,
                ask: number,
            } = e
            else {
                continue;
            };
            let Some(w) = self.held_or_stored(watch_id).cloned() else {
                self.fail(&format!("verify asked for an unknown watch {watch_id}"));
            };
            if !w.expect_running {
                self.fail(&format!(
                    "verify asked for {watch_id}, which does not expect Running"
                ));
            }
            let pos = self.position(watch_id).unwrap();
            let was_judging = before.get(pos).map(|o| o.0) == Some(State::Judging);
            let judging = w.is_live() && w.state() == State::Judging;
            let ended_now = was_judging && w.state().is_terminal();
            if !(judging || ended_now) {
                self.fail(&format!(
                    "verify asked for {watch_id}, {:?}, not a live watch judging",
                    w.state()
                ));
            }
            if !judging {
                self.counters.asks_moot += 1;
            }
            if &w.commit != commit || &w.app != app {
                self.fail(&format!(
                    "verify asked for {watch_id} naming {commit} on {app}, not its own"
                ));
            }
            // The streak as it stood before the call, if one was under way: a due ask is made
            // before what the call brings restarts the streak.
            let since = self
                .prev_since
                .get(pos)
                .copied()
                .flatten()
                .or(w.healthy_since());
            if since.is_none() {
                self.fail(&format!(
                    "verify asked for {watch_id} with no streak under way"
                ));
            }
            let best = self.healthy_best(&w, true);
            if best < stable {
                self.fail(&format!(
                    "verify asked for {watch_id} after at most {best} ms of observed healthy time"
                ));
            }
            if let Some(a) = self
                .asks
                .iter()
                .find(|a| &a.watch == watch_id && a.since == since)
            {
                self.fail(&format!(
                    "verify asked again for {watch_id} while its ask at {:?} for the same streak is unanswered",
                    a.at
                ));
            }
            let log = self.verify_log.get(watch_id).cloned().unwrap_or_default();
            if let Some(first) = log.first_ask(since) {
                let last = log.answers.iter().rev().find(|a| a.at >= first);
                match last {
                    Some(l) if now.ms_since(l.at) >= retry => {}
                    _ => self.fail(&format!(
                        "verify asked again for {watch_id} at {now:?}, first asked at {first:?} for the same streak, last answered {:?} (retry {retry} ms)",
                        last.map(|l| l.at)
                    )),
                }
                if now.ms_since(first) >= window {
                    self.fail(&format!(
                        "verify asked again for {watch_id} at {now:?}, after its window from {first:?} ended"
                    ));
                }
            }
            let Some(i) = self.apps.iter().position(|a| a.name == w.app.name) else {
                self.fail(&format!(
                    "verify asked for {watch_id} of an app not modelled"
                ));
            };
            let r = &mut self.run_rng;
            let delay = match r.below(100) {
                0..=69 => r.range(0, 2_000),
                70..=89 => r.range(2_000, retry + 2_000),
                90..=96 => r.range(window / 2, window * 2),
                _ => r.range(window * 2, window * 6),
            };
            self.counters.verify_asks += 1;
            self.trace.push(format!(
                "{} verify? {watch_id} (streak since {:?}; answer in {delay} ms)",
                now.0 - BASE_MS,
                since.map(|t| t.0 - BASE_MS)
            ));
            let seen_len = self.seen.get(w.app.name.as_str()).map_or(0, Vec::len);
            self.verify_log
                .entry(watch_id.clone())
                .or_default()
                .asks
                .push((now, since));
            self.asks.push(Ask {
                watch: watch_id.clone(),
                number: *number,
                app: i,
                at: now,
                since,
                seen_len,
                due: now.plus_ms(delay),
            });
        }
    }

    /// Whether the app was observed healthy throughout, from the last observation before (or
    /// at) the moment `seen_len` observations had been made until now: one streak, never broken
    /// (nor paused) since.
    fn healthy_throughout(&self, app: &str, seen_len: usize, reached: Timestamp) -> bool {
        let seen = self.seen.get(app).map(Vec::as_slice).unwrap_or_default();
        seen_len > 0
            && seen[seen_len - 1].at >= reached
            && seen[seen_len - 1..].iter().all(|s| s.healthy)
    }

    /// A verdict of a watch that expects Running agrees with what the model's verify answered;
    /// one that does not expect it never rests on verify.
    fn check_verify_verdict(&self, w: &Watch) {
        let log = self.verify_log.get(&w.id).cloned().unwrap_or_default();
        let window = self.cfg.stable_for_ms.max(1000);
        let verdict = w.verdict();
        let by_verify = matches!(
            verdict,
            Some(
                Verdict::NotRunning { .. }
                    | Verdict::Unwatchable(Unwatchable::MutableTag { .. })
                    | Verdict::Inconclusive(Inconclusive::NotVerified { .. })
            )
        ) || matches!(
            verdict,
            Some(Verdict::Confirmed {
                verified: Some(_),
                ..
            })
        );
        if !w.expect_running {
            if by_verify || !log.asks.is_empty() {
                self.fail(&format!(
                    "{} does not expect Running, yet {:?}: {}",
                    w.id,
                    w.state(),
                    w.reason()
                ));
            }
            return;
        }
        let last = log.answers.last();
        let reason = w.reason().to_string();
        match verdict {
            Some(Verdict::Confirmed { verified, .. }) => {
                let Some(summary) = verified else {
                    self.fail(&format!(
                        "{} expects Running, yet CONFIRMED unverified: {reason}",
                        w.id
                    ));
                };
                if !reason.ends_with(&format!("; verified: {summary}")) {
                    self.fail(&format!(
                        "{} CONFIRMED, its reason not ending with the summary {summary:?}: {reason}",
                        w.id
                    ));
                }
                let Some(l) = last.filter(|l| l.kind == AnswerKind::Running) else {
                    self.fail(&format!(
                        "{} CONFIRMED while verify's last answer (since the last restart) is {:?}: {reason}",
                        w.id,
                        last.map(|l| (l.kind, l.at))
                    ));
                };
                if &l.text != summary {
                    self.fail(&format!(
                        "{} CONFIRMED with {summary:?}, verify's last answer was {:?}",
                        w.id, l.text
                    ));
                }
                let reached = w.reached_at().unwrap_or(w.watch_started_at);
                if !self.healthy_throughout(&w.app.name, l.seen_len, reached) {
                    self.fail(&format!(
                        "{} CONFIRMED on verify's answer at {:?}, not given during the healthy streak it confirms",
                        w.id, l.at
                    ));
                }
                if self.strict.verify_ask_in_streak
                    && !self.healthy_throughout(&w.app.name, l.ask.seen_len, reached)
                {
                    self.fail(&format!(
                        "{} CONFIRMED on verify's answer at {:?} to the ask at {:?} for the streak since {:?}, which broke since (the streak confirmed is another)",
                        w.id, l.at, l.ask.at, l.ask.since
                    ));
                }
            }
            Some(Verdict::NotRunning { .. }) => {
                if last.map(|l| l.kind) != Some(AnswerKind::NotRunning) {
                    self.fail(&format!(
                        "{} FAIL not running while verify's last answer is {:?}",
                        w.id,
                        last.map(|l| (l.kind, l.at))
                    ));
                }
                let first = log.current().map(|(_, f)| f);
                if first.is_none_or(|f| self.now.ms_since(f) < window) {
                    self.fail(&format!(
                        "{} FAIL not running at {:?}, before the window ({window} ms) from the first ask {first:?}",
                        w.id, self.now
                    ));
                }
                if self.requested.contains_key(&w.id)
                    || w.revert_pending()
                    || w.revert_commit().is_some()
                    || w.proposal().is_some()
                    || w.state() != State::Fail
                {
                    self.fail(&format!(
                        "{} FAIL not running, yet a revert: {:?} pending={} revert={:?}",
                        w.id,
                        w.state(),
                        w.revert_pending(),
                        w.revert_commit()
                    ));
                }
            }
            Some(Verdict::Unwatchable(Unwatchable::MutableTag { what }))
                if last.map(|l| (l.kind, &l.text)) != Some((AnswerKind::Tag, what)) =>
            {
                self.fail(&format!(
                    "{} unwatchable for a tag ({what}) while verify's last answer is {:?}",
                    w.id,
                    last.map(|l| (l.kind, &l.text))
                ));
            }
            Some(Verdict::Inconclusive(Inconclusive::NotVerified { why })) => {
                let answers = log.answers_of_current();
                let ok = match answers.last() {
                    Some(l) => l.kind == AnswerKind::Failed && &l.text == why,
                    None => why.starts_with("verify did not answer within"),
                };
                let first = log.current().map(|(_, f)| f);
                if !ok || first.is_none_or(|f| self.now.ms_since(f) < window) {
                    self.fail(&format!(
                        "{} INCONCLUSIVE not verified ({why}) at {:?}, first asked {first:?}, verify's answers for the streak {:?}",
                        w.id,
                        self.now,
                        answers.iter().map(|a| (a.kind, a.at)).collect::<Vec<_>>()
                    ));
                }
            }
            _ => {}
        }
    }

    /// Whether the watch ended on a verdict of the verify gate (not a deadline's).
    fn ended_by_verify(w: &Watch) -> bool {
        matches!(
            w.verdict(),
            Some(
                Verdict::NotRunning { .. }
                    | Verdict::Unwatchable(Unwatchable::MutableTag { .. })
                    | Verdict::Inconclusive(Inconclusive::NotVerified { .. })
            )
        )
    }

    // ------------------------------------------------------------ invariants

    fn after(&mut self, out: Vec<Effect>, resuming: bool) {
        // A watch the engine started judges under its app's paths as the engine was last shown
        // them; each live watch holds exactly the paths the model says it judges under.
        for w in self.engine.watches() {
            if !self.watch_paths.contains_key(&w.id) {
                let p = self.engine_paths.get(w.app.name.as_str()).cloned();
                self.watch_paths.insert(w.id.clone(), p);
            }
        }
        for w in self.engine.watches() {
            if w.is_live() && w.source_paths() != self.watch_paths[&w.id].as_ref() {
                self.fail(&format!(
                    "{} judges under paths {:?}; the model says {:?}",
                    w.id,
                    w.source_paths(),
                    self.watch_paths[&w.id]
                ));
            }
        }
        let before = std::mem::take(&mut self.prev);
        let was_open = self.was_open;
        let now = self.now;
        // Events.
        let evs: Vec<Event> = out
            .iter()
            .filter_map(|e| match e {
                Effect::Emit(ev) => Some(ev.clone()),
                _ => None,
            })
            .collect();
        self.counters.events += evs.len() as u64;
        // Whether a revert was pending at each confirmation: the ones pending after this step,
        // less those requested later in it.
        let pending_after = self
            .engine
            .watches()
            .iter()
            .filter(|w| w.revert_pending())
            .count();
        let mut requested_later = out
            .iter()
            .filter(|e| matches!(e, Effect::Revert(_)))
            .count();
        let mut confirm_behind_revert = std::collections::VecDeque::new();
        for e in &out {
            match e {
                Effect::Revert(_) => requested_later -= 1,
                Effect::Emit(ev) if ev.event == EventKind::Confirmed => {
                    confirm_behind_revert.push_back(pending_after > requested_later)
                }
                Effect::Emit(_) | Effect::Withdraw { .. } | Effect::Verify { .. } => {}
            }
        }
        for ev in &evs {
            if ev.time != now {
                self.fail(&format!("event at {:?}, now {:?}: {ev:?}", ev.time, now));
            }
            let v: serde_json::Value = serde_json::from_str(&ev.json_line())
                .unwrap_or_else(|e| self.fail(&format!("json line: {e}")));
            for k in ["time", "event", "commit", "app", "state", "evidence"] {
                if v.get(k).is_none() {
                    self.fail(&format!("event json lacks {k}: {v}"));
                }
            }
            let _ = ev.human_line();
            if let (Some(c), Some(_)) = (&ev.commit, &ev.app) {
                let _ = c;
            }
            // A restart's downtime is not the app's staleness: a streak under way is not ended
            // for it before the source has had --stale-after after the resume to observe
            // again (the failover drill's finding; docs/verdicts.md#observed-time).
            if ev.event == EventKind::Inconclusive
                && ev.message.contains("went unobserved (")
                && let Some(r) = self.resumed_at
                && now.ms_since(r) <= self.cfg.stale_after_ms
            {
                for w in self.engine.watches() {
                    if ev.commit.as_deref() == Some(w.commit.as_str())
                        && w.last_observed_at().is_some_and(|l| l < r)
                    {
                        self.fail(&format!(
                            "{} ended INCONCLUSIVE {} ms after a resume on an observation from before it",
                            w.id,
                            now.ms_since(r)
                        ));
                    }
                }
            }
            // (A commit withdrawn by greenlight's own revert for another app ends on that
            // revert's arrival, whenever it comes: no deadline's verdict.)
            if matches!(ev.event, EventKind::NotReached | EventKind::Failed)
                && !ev.message.starts_with("withdrawn by greenlight:")
            {
                // A deadline decided: the app must have been observed recently, or the
                // verdict is INCONCLUSIVE.
                for (i, w) in self.engine.watches().iter().enumerate() {
                    let moved = before.get(i).map(|o| o.0) != Some(w.state());
                    // (The verify gate's FAIL rests on verify's answers, no deadline.)
                    if moved
                        && !Self::ended_by_verify(w)
                        && ev.commit.as_deref() == Some(w.commit.as_str())
                        && Some(w.state()) == ev.state
                        && w.last_observed_at()
                            .is_none_or(|l| now.ms_since(l) > self.cfg.stale_after_ms)
                    {
                        self.fail(&format!(
                            "{:?} for {} decided on a stale observation ({:?})",
                            ev.event,
                            w.id,
                            w.last_observed_at()
                        ));
                    }
                }
            }
            if self.strict.order
                || self.strict.arrival_order
                || self.strict.window_arrival
                || self.strict.vouched_deadline
            {
                self.check_deadline_order(ev, &before);
            }
            match ev.event {
                EventKind::Attribution
                | EventKind::ChangedOutside
                | EventKind::Unwatchable
                | EventKind::NotReached
                | EventKind::Inconclusive
                | EventKind::ArmDowngraded
                | EventKind::RevertedByHuman => {
                    // Events name commit and app, not the watch: with two trailers for the
                    // same app, the event belongs to the watch it moved.
                    let matching: Vec<&Watch> = self
                        .engine
                        .watches()
                        .iter()
                        .filter(|w| {
                            ev.commit.as_deref() == Some(w.commit.as_str())
                                && Some(w.app.to_string()) == ev.app
                        })
                        .collect();
                    let ids: Vec<String> = if matching.len() == 1 {
                        vec![matching[0].id.clone()]
                    } else {
                        matching
                            .iter()
                            .filter(|w| {
                                self.position(&w.id)
                                    .and_then(|i| before.get(i))
                                    .map(|o| o.0)
                                    != Some(w.state())
                                    && Some(w.state()) == ev.state
                            })
                            .map(|w| w.id.clone())
                            .collect()
                    };
                    self.never_revert.extend(ids);
                }
                EventKind::Confirmed => {
                    // Never CONFIRMED unless what was last observed deployed the commit.
                    if let Some(commit) = &ev.commit
                        && let Some(k) = self.index.get(commit.as_str()).copied()
                        && let Some(name) = ev.app.as_deref()
                    {
                        let last = self
                            .deliveries
                            .get(name)
                            .and_then(|l| l.iter().rev().find(|d| !d.glimpse));
                        if last.is_none_or(|d| d.deployed.is_none_or(|i| i < k)) {
                            self.fail(&format!(
                                "{commit} CONFIRMED on {name} while the last observation deployed {:?}",
                                last.map(|d| d.deployed)
                            ));
                        }
                    }
                    let app = ev.app.clone().unwrap_or_default();
                    if self
                        .model_breaker
                        .reverts
                        .values()
                        .any(|(_, apps)| !apps.contains(&app))
                    {
                        self.counters.confirmed_beside_reverts += 1;
                    }
                    if confirm_behind_revert.pop_front().unwrap_or(false) {
                        self.model_confirm_deferred.push(app);
                    } else {
                        self.model_breaker.confirmed(&app);
                    }
                }
                EventKind::BreakerReset => self.model_breaker.reset(),
                EventKind::RevertProposed => self.proposal_shared(ev),
                _ => {}
            }
        }
        // Withdrawals only on a commit's arrival, checked there against the model.
        if !std::mem::take(&mut self.withdraws_checked)
            && let Some(e) = out.iter().find(|e| matches!(e, Effect::Withdraw { .. }))
        {
            self.fail(&format!("a withdrawal on no commit's arrival: {e:?}"));
        }
        // Verify's asks; a FAIL because the Pods did not run the commit is never reverted.
        self.verify_asked(&out, &before);
        let not_running: Vec<String> = self
            .engine
            .watches()
            .iter()
            .filter(|w| matches!(w.verdict(), Some(Verdict::NotRunning { .. })))
            .map(|w| w.id.clone())
            .collect();
        self.never_revert.extend(not_running);
        // Reverts.
        // The revert commits under way before this step, by the commits they revert.
        let mut pending_commits: BTreeSet<String> = self
            .pending
            .iter()
            .filter_map(|id| self.held_or_stored(id))
            .map(|w| w.commit.to_string())
            .collect();
        for e in &out {
            let Effect::Revert(r) = e else { continue };
            let Some(w) = self.held_or_stored(&r.watch_id).cloned() else {
                self.fail(&format!("revert for an unknown watch {r:?}"));
            };
            let why_not = if w.mode.as_str() != "arm" {
                Some("shadow")
            } else if w.dry_run || self.cfg.dry_run {
                Some("dry-run")
            } else if w.arm_blocked().is_some() {
                Some("arm downgraded")
            } else if w.reached_at().is_none() {
                Some("unreached")
            } else if !self.applied(&w) {
                Some("never applied (only a sync that failed before applying it)")
            } else if w.state() != State::Fail || !w.revert_pending() {
                Some("not a pending FAIL")
            } else if !resuming && !w.deadline_passed() && self.suspended_at_deadline(&w) {
                Some("Suspended at the deadline")
            } else if self.touched_later.contains(&w.id) {
                Some("later commit touched the app (attribution)")
            } else if self.never_revert.contains(&w.id) {
                Some("attribution/unwatchable/not-reached/inconclusive/human revert")
            } else if r.commit != w.commit {
                Some("wrong commit")
            } else if !resuming && self.spec_changed_under(&w) {
                // (A re-issued revert was decided before the restart: a spec edit since then
                // came after the decision.)
                Some("Application spec changed under the watch")
            } else if !resuming
                && matches!(w.reverting(), Some(Failure::StreakBroke { .. }))
                && self
                    .seen
                    .get(w.app.name.as_str())
                    .and_then(|v| v.last())
                    .is_some_and(|s| s.at == self.now && s.transient)
            {
                Some("streak paused by a transient state after the deadline")
            } else if !resuming && !self.fault_shown(&w) {
                Some("never healthy after reach on an app that was not Healthy before its sync")
            } else if !resuming && let Some(why) = self.evidence_missing(&w) {
                Some(why)
            } else if let Some(m) = self.merge_mainline.get(w.commit.as_str())
                && r.mainline.as_ref().map(|c| c.as_str()) != Some(m.as_str())
            {
                Some("merge reverted against another parent than the branch's (its mainline)")
            } else {
                None
            };
            if let Some(why) = why_not {
                self.fail(&format!("revert requested for a {why} watch: {w:#?}"));
            }
            // A pull request standing for the commit is waited for, never opened again.
            if let Some((url, _)) = self.proposals.iter().find(|(_, p)| {
                p.ended.is_none()
                    && p.commit == w.commit.as_str()
                    && p.watches.iter().any(|id| !p.withdrawn_for.contains(id))
            }) {
                self.fail(&format!(
                    "revert requested for {} while {url} stands for its commit",
                    w.id
                ));
            }
            if !resuming {
                // The breaker as it stood, counting revert commits already under way; a watch
                // of a commit whose revert is counted or under way adds no revert commit.
                let commit = w.commit.to_string();
                let same_revert =
                    self.model_breaker.counts(&commit) || pending_commits.contains(&commit);
                let pending = pending_commits
                    .iter()
                    .filter(|c| !self.model_breaker.counts(c))
                    .count() as u32;
                if !same_revert
                    && (self.model_breaker.open || self.model_breaker.count() + pending >= 2)
                {
                    self.fail(&format!(
                        "revert requested with the breaker {:?} and {pending} pending",
                        self.model_breaker
                    ));
                }
                pending_commits.insert(commit);
                let n = self.requested.entry(w.id.clone()).or_default();
                *n += 1;
                if *n > 1 {
                    self.fail(&format!("second revert for {}", w.id));
                }
                self.pending.push(w.id.clone());
                self.counters.reverts += 1;
            }
        }
        // "Would have reverted" (a shadow or dry-run failure's outcome, which notifications
        // word so) is said only of a watch the model finds at fault, as a revert would be.
        for e in &out {
            let Effect::Emit(ev) = e else { continue };
            let would = matches!(
                ev.outcome,
                Some(Outcome::WouldHaveRevertedShadow | Outcome::WouldHaveRevertedDryRun)
            );
            // A revert proposed as a pull request is said once, with its outcome (a human may
            // have to merge it), though no verdict is given yet.
            let proposed = ev.event == EventKind::RevertProposed
                && ev.outcome == Some(Outcome::RevertProposed);
            if ev.outcome.is_some()
                && !ev.event.gives_a_verdict()
                && ev.event != EventKind::BreakerOpened
                && !proposed
            {
                self.fail(&format!(
                    "an outcome on a step that gives no verdict: {ev:?}"
                ));
            }
            if !would || resuming {
                continue;
            }
            // (A re-opened watch shares its commit and app with the one that ended NOT_REACHED.)
            let Some(w) = self.engine.watches().iter().find(|w| {
                Some(w.commit.to_string()) == ev.commit
                    && Some(w.app.to_string()) == ev.app
                    && w.verdict().map(Outcome::of_verdict) == ev.outcome
            }) else {
                self.fail(&format!("an outcome for an unknown watch {ev:?}"));
            };
            let why_not = if w.reached_at().is_none() {
                Some("unreached")
            } else if !self.applied(w) {
                Some("never applied")
            } else if self.touched_later.contains(&w.id) {
                Some("later commit touched the app (attribution)")
            } else if self.never_revert.contains(&w.id) {
                Some("attribution/unwatchable/not-reached/inconclusive/human revert")
            } else if self.spec_changed_under(w) {
                Some("Application spec changed under the watch")
            } else if !self.fault_shown(w) {
                Some("never healthy after reach on an app that was not Healthy before its sync")
            } else {
                self.evidence_missing(w)
            };
            if let Some(why) = why_not {
                self.fail(&format!(
                    "\"would have reverted\" said of a {why} watch: {w:#?}"
                ));
            }
            self.counters.would_have_reverted += 1;
        }
        // States: terminal never changes (a pending FAIL, or one whose revert is proposed as a
        // pull request, may become REVERTED/REVERT_FAILED), every change comes with an event
        // carrying the new state.
        let mut compared_baselines = 0u64;
        for (i, w) in self.engine.watches().iter().enumerate() {
            let old = before.get(i).copied();
            let old_state = old.map(|o| o.0);
            if let Some((o_state, o_pending)) = old
                && o_state.is_terminal()
                && o_state != w.state()
            {
                let allowed = o_state == State::Fail
                    && o_pending
                    && matches!(w.state(), State::Reverted | State::RevertFailed);
                if !allowed {
                    self.fail(&format!(
                        "terminal {o_state:?} of {} became {:?}",
                        w.id,
                        w.state()
                    ));
                }
            }
            if old_state != Some(w.state()) {
                let has = evs.iter().any(|e| {
                    e.commit.as_deref() == Some(w.commit.as_str())
                        && e.app.as_deref() == Some(w.app.to_string().as_str())
                        && e.state == Some(w.state())
                });
                if !has {
                    self.fail(&format!(
                        "{} went {old_state:?} -> {:?} without an event: {evs:#?}",
                        w.id,
                        w.state()
                    ));
                }
                if w.state() == State::Confirmed {
                    self.check_confirmed(w);
                }
                if w.state().is_terminal() {
                    self.check_verify_verdict(w);
                    compared_baselines += u64::from(self.check_compared_baseline(w));
                }
                // Only a commit withdrawn after its reach is NOT_REACHED with a reach time.
                if w.state() == State::NotReached
                    && w.reached_at().is_some()
                    && !w.reason().to_string().starts_with("withdrawn")
                {
                    self.fail("NOT_REACHED with a reach time");
                }
            }
            if w.state().is_terminal() && w.state() != State::Fail && w.revert_pending() {
                self.fail(&format!(
                    "{} is {:?} with a revert pending",
                    w.id,
                    w.state()
                ));
            }
        }
        self.counters.compared_baselines += compared_baselines;
        let opened = evs.iter().any(|e| e.event == EventKind::BreakerOpened);
        if self.model_breaker.open && !was_open && !opened {
            self.fail("the breaker opened without a breaker_opened event");
        }
        if opened && (was_open || !self.model_breaker.open) {
            self.fail("breaker_opened event without the breaker opening");
        }
        if !self.model_breaker.agrees_with(self.engine.breaker()) {
            self.fail(&format!(
                "breaker {:?}, by the rules {:?}",
                self.engine.breaker(),
                self.model_breaker
            ));
        }
        // Persist what take_dirty hands over.
        let (ws, b) = self.engine.take_dirty();
        for w in ws {
            self.store.insert(w.id.clone(), w);
        }
        // The tapes, appended in the same write, each step once and in order.
        for (id, first, steps) in self.engine.take_tapes() {
            let held = self.tapes.get(&id).map_or(0, Vec::len);
            if held != first {
                self.fail(&format!(
                    "the tape of {id} handed over from step {first}, the store holds {held}"
                ));
            }
            self.tapes.entry(id).or_default().extend(steps);
        }
        let _ = b;
        if self.strict.dirty {
            for w in self.engine.watches() {
                if let Some(stored) = self.store.get(&w.id)
                    && stored != w
                {
                    let fields = changed_fields(stored, w);
                    self.fail(&format!(
                        "watch {} changed but take_dirty did not hand it over: {fields:?}",
                        w.id
                    ));
                }
            }
        }
        for w in self.engine.watches() {
            if self.store.get(&w.id).map(|s| s.state()) != Some(w.state()) {
                self.fail(&format!(
                    "state of {} changed but was not handed over",
                    w.id
                ));
            }
        }
        // What finished and is stored is let go, as the runtime does after each write: only
        // a watch whose verdict is final and stored as it is may go, and the verdicts of every
        // later step (checked against the model) must not depend on it.
        let held: BTreeMap<String, Watch> = self
            .engine
            .watches()
            .iter()
            .map(|w| (w.id.clone(), w.clone()))
            .collect();
        // Every watch has an id of its own, never one a watch let go had: the store keeps a
        // watch by its id, and a repeated one would overwrite a verdict.
        if held.len() != self.engine.watches().len() {
            self.fail("two watches held share an id");
        }
        if let Some(id) = held.keys().find(|id| self.forgotten.contains(*id)) {
            self.fail(&format!(
                "watch {id} is held under the id of a watch let go before"
            ));
        }
        for id in self.engine.forget_finished(self.now) {
            let w = &held[&id];
            if !w.state().is_terminal() || w.reverting().is_some() || self.store.get(&id) != Some(w)
            {
                self.fail(&format!(
                    "watch {id} was let go while it could still change or was not stored as it is: {w:#?}"
                ));
            }
            self.forgotten.insert(id);
            self.counters.forgotten += 1;
        }
        self.prev = self
            .engine
            .watches()
            .iter()
            .map(|w| (w.state(), w.reverting().is_some()))
            .collect();
        self.prev_since = self
            .engine
            .watches()
            .iter()
            .map(|w| w.healthy_since())
            .collect();
        self.was_open = self.model_breaker.open;
        self.check_wakeup_covers_everything_due();
        self.check_reopened();
        self.check_proposals();
        let arrived = self.engine.take_arrived();
        self.arrived_store.extend(arrived);
    }

    /// A re-opened watch (`docs/verdicts.md#reopen`): the watch it follows ended NOT_REACHED
    /// within the horizon, no commit on the branch reverts its commit, and the app (in the
    /// model) is deployed at a revision that has the commit.
    fn check_reopened(&mut self) {
        let fresh: Vec<Watch> = self
            .engine
            .watches()
            .iter()
            .filter(|w| w.id.contains('~') && !self.reopened.contains(&w.id))
            .cloned()
            .collect();
        for w in fresh {
            self.reopened.insert(w.id.clone());
            self.counters.reopened += 1;
            let base = w.id.split('~').next().unwrap();
            let earlier: Vec<&Watch> = self
                .engine
                .watches()
                .iter()
                .filter(|o| o.id == base || (o.id.starts_with(&format!("{base}~")) && o.id != w.id))
                .collect();
            let Some(last) = earlier.iter().max_by_key(|o| o.watch_started_at) else {
                self.fail(&format!("{} re-opened no watch", w.id));
            };
            if last.state() != State::NotReached {
                self.fail(&format!("{} re-opened a {:?} watch", w.id, last.state()));
            }
            if last
                .finished_at()
                .is_none_or(|f| self.now.ms_since(f) > self.cfg.reopen_horizon_ms)
            {
                self.fail(&format!("{} re-opened beyond the horizon", w.id));
            }
            if self.reverted.contains(w.commit.as_str()) {
                self.fail(&format!("{} re-opened a reverted commit", w.id));
            }
            let Some(k) = self.index.get(w.commit.as_str()).copied() else {
                continue;
            };
            let a = self.apps.iter().find(|a| a.name == w.app.name).unwrap();
            let deployed = a.deployed.is_some_and(|d| d >= k)
                || a.op_rev.is_some_and(|d| d >= k)
                || a.compared.is_some_and(|d| d >= k);
            if !deployed {
                self.fail(&format!(
                    "{} re-opened while the app is at {:?} (the commit is {k})",
                    w.id, a.deployed
                ));
            }
        }
    }

    /// CONFIRMED only after at least stable_for of observed healthy time since reach.
    /// A baseline seen after Argo CD compared the commit (docs/verdicts.md#baseline) is never
    /// clean, and it is the app as the model had it: delivered idle before reach, OutOfSync
    /// with a compared revision that has the commit, the baseline's revision the one its last
    /// (succeeded) operation applied, which lacks the commit: the live objects are that
    /// operation's. (The model may have moved the app Synced to later revisions without an
    /// operation since — commits that changed nothing it renders, the commit perhaps among them.)
    /// True when the watch's baseline was one.
    fn check_compared_baseline(&self, w: &Watch) -> bool {
        let b = w.baseline();
        if !b.after_compare {
            return false;
        }
        if b.unclean.is_none() {
            self.fail(&format!(
                "a baseline seen after the compare is clean: {w:#?}"
            ));
        }
        let Some(k) = self.index.get(w.commit.as_str()).copied() else {
            return true;
        };
        let until = w.reached_at().unwrap_or(self.now);
        let log = self
            .deliveries
            .get(w.app.name.as_str())
            .map(Vec::as_slice)
            .unwrap_or_default();
        let seen = log.iter().any(|d| {
            d.at <= until
                && d.idle
                && d.out_of_sync
                && d.compared.is_some_and(|i| i >= k)
                && d.applied
                    .is_some_and(|i| i < k && b.revision.as_deref() == Some(self.hist[i].as_str()))
        });
        if !seen {
            self.fail(&format!(
                "a baseline after the compare at {:?} that no delivery showed (OutOfSync with the commit compared, that revision applied last): {w:#?}\ndeliveries (k={k}): {log:#?}",
                b.revision
            ));
        }
        true
    }

    fn check_confirmed(&self, w: &Watch) {
        let Some(reached) = w.reached_at() else {
            self.fail("CONFIRMED without reach");
        };
        let best = self.healthy_best(w, w.reason().to_string().contains(" paused "));
        if best < self.cfg.stable_for_ms {
            let seen = self.seen.get(w.app.name.as_str());
            self.fail(&format!(
                "CONFIRMED at {:?} after at most {best} ms of observed healthy time since reach {reached:?}: {:?}",
                self.now,
                seen.into_iter().flatten().rev().take(30).collect::<Vec<_>>()
            ));
        }
    }

    /// The most observed healthy time since reach one streak can have counted (an upper bound,
    /// by the oracle); with `chain`, also a streak that paused on transient states after the
    /// deadline.
    fn healthy_best(&self, w: &Watch, chain: bool) -> i64 {
        let Some(reached) = w.reached_at() else {
            return 0;
        };
        let seen = self
            .seen
            .get(w.app.name.as_str())
            .cloned()
            .unwrap_or_default();
        // Healthy runs since reach: consecutive healthy observations no more than stale-after
        // apart. A run covers its time up to the last observation plus stale-after, cut short
        // by the next unhealthy observation and by now. One run must cover stable-for.
        // Each gap nothing vouched for counts only up to the slack, and so does the time past
        // the last observation.
        let stale = self.cfg.stale_after_ms;
        let slack = stale.min(self.cfg.stable_for_ms / 4);
        let now = self.now;
        let mut best = 0i64;
        let mut run: Option<(Timestamp, Timestamp, i64)> = None;
        let covered = |(start, last, excess): (Timestamp, Timestamp, i64),
                       cut: Option<Timestamp>| {
            let mut until = std::cmp::min(now, last.plus_ms(stale));
            if let Some(c) = cut {
                until = std::cmp::min(until, c);
            }
            last.ms_since(start) - excess + until.ms_since(last).clamp(0, slack)
        };
        let excess = |s: &Seen, last: Timestamp| {
            if s.vouched {
                0
            } else {
                (s.at.ms_since(last) - slack).max(0)
            }
        };
        for s in seen.iter().filter(|s| s.at >= reached) {
            match run {
                Some((start, last, ex))
                    if s.healthy && (s.vouched || s.at.ms_since(last) <= stale) =>
                {
                    run = Some((start, s.at, ex + excess(s, last)));
                }
                Some(r) => {
                    best = best.max(covered(r, (!s.healthy).then_some(s.at)));
                    run = s.healthy.then_some((s.at, s.at, 0));
                }
                None => run = s.healthy.then_some((s.at, s.at, 0)),
            }
        }
        if let Some(r) = run {
            best = best.max(covered(r, None));
        }
        // A streak that paused on transient states after the deadline counts the healthy
        // time of a chain of healthy runs with transient observations between them, each pause
        // shorter than stable-for, observed throughout.
        if chain {
            let mut chain = 0i64;
            let mut run: Option<(Timestamp, Timestamp, i64)> = None;
            let mut paused: Option<Timestamp> = None;
            let mut last_at: Option<Timestamp> = None;
            for s in seen.iter().filter(|s| s.at >= reached) {
                let observed = last_at.is_none_or(|l| s.vouched || s.at.ms_since(l) <= stale);
                if !observed || !(s.healthy || s.transient) {
                    if let Some(r) = run.take() {
                        chain += covered(r, Some(s.at));
                    }
                    best = best.max(chain);
                    chain = 0;
                    paused = None;
                    run = s.healthy.then_some((s.at, s.at, 0));
                } else if s.healthy {
                    paused = None;
                    run = Some(run.map_or((s.at, s.at, 0), |(start, last, ex)| {
                        (start, s.at, ex + excess(s, last))
                    }));
                } else {
                    if let Some(r) = run.take() {
                        chain += covered(r, Some(s.at));
                    }
                    let p = *paused.get_or_insert(s.at);
                    if s.at.ms_since(p) >= self.cfg.stable_for_ms {
                        best = best.max(chain);
                        chain = 0;
                    }
                }
                last_at = Some(s.at);
            }
            if let Some(r) = run {
                chain += covered(r, None);
            }
            best = best.max(chain);
        }
        best
    }

    /// A verdict tied to a deadline agrees with what was observed up to the deadline instant.
    fn check_deadline_order(&self, ev: &Event, before: &[(State, bool)]) {
        let now = self.now;
        for (i, w) in self.engine.watches().iter().enumerate() {
            if ev.commit.as_deref() != Some(w.commit.as_str()) || Some(w.app.to_string()) != ev.app
            {
                continue;
            }
            let moved = before.get(i).map(|o| o.0) != Some(w.state());
            // A watch that had ended before the event is not what it speaks of (a re-opened
            // watch of the same commit and app is). The verify gate's verdicts are no deadline's.
            if (!moved && w.state().is_terminal()) || (moved && Self::ended_by_verify(w)) {
                continue;
            }
            let reach_deadline = w.watch_started_at.plus_ms(w.deadline_ms);
            let health_deadline = w.reached_at().map(|r| r.plus_ms(w.deadline_ms));
            let decided_at = match ev.event {
                EventKind::Reached if w.reached_at() == Some(now) => {
                    if now > reach_deadline {
                        self.fail(&format!(
                            "{} reached at {now:?}, after its reach deadline {reach_deadline:?}",
                            w.id
                        ));
                    }
                    None
                }
                EventKind::HealthyStreakStarted
                    if health_deadline.is_some_and(|d| now > d) && !w.deadline_passed() =>
                {
                    self.fail(&format!(
                        "{}: a streak started at {now:?}, after the deadline {health_deadline:?} that was never decided",
                        w.id
                    ));
                }
                EventKind::Attribution | EventKind::RevertedByHuman
                    if moved && self.strict.arrival_order =>
                {
                    let window_end = w.healthy_since().map(|h| h.plus_ms(self.cfg.stable_for_ms));
                    if self.strict.window_arrival
                        && let (Some(e), Some(last)) = (window_end, w.last_observed_at())
                        && e < now
                        && now.ms_since(last) <= self.cfg.stale_after_ms
                    {
                        self.fail(&format!(
                            "{:?} for {} at {now:?} although its window ended at {e:?} and a tick now would confirm it (last healthy observation {last:?} is fresh)",
                            ev.event, w.id
                        ));
                    }
                    let due = health_deadline.unwrap_or(reach_deadline);
                    if due < now && !w.deadline_passed() {
                        self.fail(&format!(
                            "{:?} for {} at {now:?} although its deadline {due:?} was due and undecided",
                            ev.event, w.id
                        ));
                    }
                    None
                }
                EventKind::Inconclusive
                    if moved && self.strict.vouched_deadline && !w.deadline_passed() =>
                {
                    let d = health_deadline.unwrap_or(reach_deadline);
                    let seen = self.seen.get(w.app.name.as_str());
                    let vouched_through_d = seen
                        .and_then(|v| v.iter().find(|s| s.at >= d))
                        .is_some_and(|s| s.vouched);
                    // After reach, an app last observed absent is unobserved: nothing vouches
                    // for it (docs/verdicts.md#streak-breaks).
                    let absent_after_reach = w.reached_at().is_some()
                        && seen
                            .and_then(|v| v.iter().rev().find(|s| !s.vouched && s.at < d))
                            .is_some_and(|s| s.health.is_none());
                    // Only the watch's own observations count: one made before it started is
                    // nothing the stream can vouch for on its behalf.
                    // A vouching vouches only for a state actually observed before it.
                    let before_d = seen.is_some_and(|v| {
                        v.iter()
                            .any(|s| !s.vouched && s.at < d && s.at >= w.watch_started_at)
                    });
                    if d <= now && vouched_through_d && before_d && !absent_after_reach {
                        self.fail(&format!(
                            "INCONCLUSIVE for {} although the stream vouched for its deadline {d:?}",
                            w.id
                        ));
                    }
                    None
                }
                // A withdrawn commit ends at once, on the observation that shows it, and so
                // does one greenlight's own revert for another app withdrew.
                EventKind::NotReached
                    if moved
                        && !ev.message.starts_with("withdrawn:")
                        && !ev.message.starts_with("withdrawn by greenlight:") =>
                {
                    Some(reach_deadline)
                }
                // A failed PostSync hook fails at once, on the observation that shows it.
                EventKind::Failed
                    if moved
                        && !w.deadline_passed()
                        && !ev.message.contains("PostSync hook failed") =>
                {
                    health_deadline
                }
                _ => None,
            };
            let Some(d) = decided_at else { continue };
            let last_before = self
                .seen
                .get(w.app.name.as_str())
                .and_then(|v| v.iter().rev().find(|s| s.at <= d))
                .map(|s| s.at);
            // The connected stream vouches for every instant between the last observation and
            // the vouching, so a vouching after the deadline covers it.
            let vouched_through_d = last_before.is_some()
                && self
                    .seen
                    .get(w.app.name.as_str())
                    .and_then(|v| v.iter().find(|s| s.at > d))
                    .is_some_and(|s| s.vouched);
            if !vouched_through_d
                && last_before.is_none_or(|l| d.ms_since(l) > self.cfg.stale_after_ms)
            {
                self.fail(&format!(
                    "{:?} for {} at {now:?}: at its deadline {d:?} the last observation was {last_before:?} (stale): INCONCLUSIVE expected",
                    ev.event, w.id
                ));
            }
        }
    }

    /// Whether the app was Suspended when the watch's deadline decided: as of the deadline
    /// instant (the last observation at or before it) and, unless deadlines must be judged as
    /// of their instant, also in the latest observation (the order the judge used to follow).
    fn suspended_at_deadline(&self, w: &Watch) -> bool {
        let Some(d) = w.reached_at().map(|r| r.plus_ms(w.deadline_ms)) else {
            return false;
        };
        // A verdict before the deadline (a failed PostSync hook) is not the deadline's.
        if d > self.now {
            return false;
        }
        let seen = self.seen.get(w.app.name.as_str());
        let suspended = |s: Option<&Seen>| s.and_then(|s| s.health) == Some(Health::Suspended);
        // An observation made at the deadline instant itself comes after it (the judge decides
        // a due deadline before applying what arrives at that moment).
        let at_deadline = suspended(seen.and_then(|v| v.iter().rev().find(|s| s.at < d)));
        let latest = suspended(seen.and_then(|v| v.last()));
        at_deadline && (self.strict.order || latest)
    }

    /// The model's count of the unobserved time a streak since `since` may not count: each gap
    /// between consecutive observations of the app that nothing vouched for, beyond the slack.
    fn unobserved_in_streak(&self, app: &str, since: Timestamp) -> i64 {
        let slack = self.cfg.stale_after_ms.min(self.cfg.stable_for_ms / 4);
        let mut last: Option<Timestamp> = None;
        let mut excess = 0;
        for s in self
            .seen
            .get(app)
            .into_iter()
            .flatten()
            .filter(|s| s.at >= since)
        {
            if let Some(l) = last
                && !s.vouched
            {
                excess += (s.at.ms_since(l) - slack).max(0);
            }
            last = Some(s.at);
        }
        excess
    }

    /// `next_wakeup` is no later than any moment at which a live watch is due.
    fn check_wakeup_covers_everything_due(&self) {
        let next = self.engine.next_wakeup();
        for w in self
            .engine
            .watches()
            .iter()
            .filter(|w| !w.state().is_terminal())
        {
            let mut due = Vec::new();
            if !w.deadline_passed() {
                due.extend(w.deadline_at());
            }
            due.extend(
                w.app_absent_since()
                    .map(|a| a.plus_ms(self.cfg.unknown_app_grace_ms)),
            );
            let streak_due = w.healthy_since().map(|h| {
                h.plus_ms(
                    self.cfg.stable_for_ms + self.unobserved_in_streak(w.app.name.as_str(), h),
                )
            });
            // Expecting Running, a completed streak waits for verify: its window's end is due.
            if w.expect_running {
                due.extend(streak_due.filter(|d| *d > self.now));
                let first = w
                    .healthy_since()
                    .and_then(|h| self.verify_log.get(&w.id)?.first_ask(Some(h)));
                due.extend(
                    first
                        .map(|f| f.plus_ms(self.cfg.stable_for_ms.max(1000)))
                        .filter(|d| *d > self.now),
                );
            } else {
                due.extend(streak_due);
            }
            for d in due {
                if next.is_none_or(|n| n > d) {
                    self.fail(&format!(
                        "next_wakeup {next:?} is after {d:?}, when {} is due",
                        w.id
                    ));
                }
            }
        }
    }

    /// After a tick at `now`, nothing that was due at `now` is left undecided.
    fn check_nothing_due(&self) {
        for w in self.engine.watches() {
            if w.state().is_terminal() {
                continue;
            }
            // (With the switch off, a completed streak waiting for verify is let be.)
            let verifying = w.expect_running
                && w.healthy_since().is_some_and(|h| {
                    self.verify_log
                        .get(&w.id)
                        .and_then(|l| l.first_ask(Some(h)))
                        .is_some()
                });
            if !w.deadline_passed()
                && let Some(d) = w.deadline_at()
                && d <= self.now
                && (self.strict.verify_deadline || !verifying)
            {
                self.fail(&format!(
                    "deadline {d:?} of {} left undecided at {:?}",
                    w.id, self.now
                ));
            }
            if let Some(a) = w.app_absent_since()
                && a.plus_ms(self.cfg.unknown_app_grace_ms) <= self.now
            {
                self.fail(&format!("grace of {} left undecided", w.id));
            }
            // A restart's downtime is no staleness of the app's until the source has had
            // --stale-after after the resume to observe again (docs/verdicts.md#observed-time).
            let resuming = |l: Timestamp| {
                self.resumed_at
                    .is_some_and(|r| l < r && self.now.ms_since(r) <= self.cfg.stale_after_ms)
            };
            if w.deadline_passed()
                && w.last_observed_at()
                    .is_some_and(|l| self.now.ms_since(l) > self.cfg.stale_after_ms && !resuming(l))
            {
                self.fail(&format!(
                    "{} past its deadline with a stale streak left undecided at {:?}",
                    w.id, self.now
                ));
            }
            let slack = self.cfg.stale_after_ms.min(self.cfg.stable_for_ms / 4);
            if self.strict.window
                && let (Some(h), Some(last)) = (w.healthy_since(), w.last_observed_at())
                && last.ms_since(h) - self.unobserved_in_streak(w.app.name.as_str(), h)
                    + self.now.ms_since(last).min(slack)
                    >= self.cfg.stable_for_ms
                && self.now.ms_since(last) <= self.cfg.stale_after_ms
            {
                // Expecting Running, the completed streak waits for verify instead: asked for
                // this streak, and decided once verify's window (from the first ask) ended.
                if w.expect_running {
                    let first = self
                        .verify_log
                        .get(&w.id)
                        .and_then(|l| l.first_ask(Some(h)));
                    let window = self.cfg.stable_for_ms.max(1000);
                    match first {
                        Some(f) if self.now.ms_since(f) < window => continue,
                        Some(f) => self.fail(&format!(
                            "verify's window for {} (first asked at {f:?}) ended, still {:?} at {:?}",
                            w.id,
                            w.state(),
                            self.now
                        )),
                        None => self.fail(&format!(
                            "stability window of {} ended at {:?} with a fresh healthy observation, verify not asked at {:?}",
                            w.id,
                            h.plus_ms(self.cfg.stable_for_ms),
                            self.now
                        )),
                    }
                }
                self.fail(&format!(
                    "stability window of {} ended at {:?} with a fresh healthy observation, still {:?} at {:?}",
                    w.id,
                    h.plus_ms(self.cfg.stable_for_ms),
                    w.state(),
                    self.now
                ));
            }
        }
    }

    fn step(&mut self) {
        // Time moves on: small steps, sometimes an outage-sized jump.
        let dt = if self.rng.below(1000) < 3 {
            self.stream_gen += 1; // asleep: the connection did not survive
            self.rng.range(30_000, 400_000)
        } else {
            self.rng.range(0, 4_000)
        };
        self.now = self.now.plus_ms(dt);
        match self.rng.below(1000) {
            0..=29 => self.watched_commit(),
            30..=49 => self.plain_commit(),
            50..=59 => self.merge_commit(),
            60..=64 => self.human_revert(),
            65..=69 => {
                let i = self.rng.below(self.apps.len() as u64) as usize;
                self.withdraw(i);
            }
            70..=169 => {
                let i = self.rng.below(self.apps.len() as u64) as usize;
                self.glimpse_app(i);
            }
            170..=649 => {
                if self.rng.chance(30) {
                    // A full listing (resync): every app at once.
                    for i in 0..self.apps.len() {
                        self.observe_app(i);
                    }
                } else {
                    let i = self.rng.below(self.apps.len() as u64) as usize;
                    self.observe_app(i);
                }
            }
            650..=899 => self.tick(),
            900..=969 => self.finish_revert(),
            970..=974 => self.restart(),
            975..=979 => {
                let now = self.now;
                self.trace
                    .push(format!("{} reset_breaker", now.0 - BASE_MS));
                let out = self.engine.reset_breaker(now);
                self.after(out, false);
            }
            _ => {
                // An outage: nothing observed for a while, then a tick.
                self.stream_gen += 1;
                self.now = self.now.plus_ms(self.rng.range(10_000, 120_000));
                self.tick();
            }
        }
        // The forge and the branch move on for the reverts proposed as pull requests (drawn
        // apart, so that a scenario without them draws as before).
        if self.by_pr && self.pr_rng.chance(3) {
            self.proposal_step();
        }
        // Verify answers what it was asked, once each answer's delay has passed.
        self.verify_step();
    }
}

/// The breaker by its documented rule, written here apart from the judge's: the distinct revert
/// commits pushed or adopted since the last reset, less those whose apps have all been CONFIRMED
/// since (a confirmation of one app never clears another's); open from two until a reset.
#[derive(Clone, Debug, Default)]
struct RuleBreaker {
    open: bool,
    /// Revert commit -> (the commit it reverts, the apps not confirmed since).
    reverts: BTreeMap<String, (String, BTreeSet<String>)>,
}

impl RuleBreaker {
    fn count(&self) -> u32 {
        self.reverts.len() as u32
    }
    fn counts(&self, commit: &str) -> bool {
        self.reverts.values().any(|(c, _)| c == commit)
    }
    fn landed(&mut self, commit: &str, revert: &str, app: &str) {
        let entry = self
            .reverts
            .entry(revert.to_string())
            .or_insert_with(|| (commit.to_string(), BTreeSet::new()));
        entry.1.insert(app.to_string());
        if self.count() >= 2 {
            self.open = true;
        }
    }
    fn confirmed(&mut self, app: &str) {
        for (_, apps) in self.reverts.values_mut() {
            apps.remove(app);
        }
        self.reverts.retain(|_, (_, apps)| !apps.is_empty());
    }
    fn reset(&mut self) {
        *self = RuleBreaker::default();
    }
    fn agrees_with(&self, b: &Breaker) -> bool {
        let theirs: BTreeMap<String, (String, BTreeSet<String>)> = b
            .reverts
            .iter()
            .map(|r| (r.revert.to_string(), (r.commit.to_string(), r.apps.clone())))
            .collect();
        b.open == self.open && b.consecutive_reverts == self.count() && theirs == self.reverts
    }
}

fn run(seed: u64, steps: usize, strict: Strict) -> Counters {
    run_with(seed, steps, strict, false)
}

/// A scenario; `by_pr` makes its executor propose every revert as a pull request.
fn run_with(seed: u64, steps: usize, strict: Strict, by_pr: bool) -> Counters {
    let mut sim = Sim::new(seed, strict);
    sim.by_pr |= by_pr;
    sim.streaming = sim.rng.chance(50);
    for _ in 0..steps {
        sim.step();
    }
    // Drain: let every watch reach a verdict, observing every app in turn.
    for _ in 0..400 {
        let settled = sim.landing.is_empty() && sim.proposals.values().all(|p| p.ended.is_some());
        if sim.engine.watches().iter().all(|w| w.state().is_terminal())
            && sim.pending.is_empty()
            && settled
        {
            break;
        }
        sim.now = sim.now.plus_ms(5_000);
        for i in 0..sim.apps.len() {
            sim.observe_app(i);
        }
        sim.tick();
        sim.verify_step();
        if sim.rng.chance(50) {
            sim.finish_revert();
        }
        if sim.by_pr {
            sim.proposal_step();
        }
    }
    // Every watch of the run: those the engine holds, and those it let go, as stored.
    let every: Vec<Watch> = sim
        .engine
        .watches()
        .iter()
        .cloned()
        .chain(sim.forgotten.iter().map(|id| sim.store[id].clone()))
        .collect();
    // Every watch's tape replays to the very watch the judge left (`docs/why.md`).
    for w in &every {
        let Some(tape) = sim.tapes.get(&w.id) else {
            sim.fail(&format!("watch {} has no tape", w.id));
        };
        let replay = match Engine::replay(tape) {
            Ok(r) => r,
            Err(e) => sim.fail(&format!("watch {}: its tape cannot be replayed: {e}", w.id)),
        };
        if replay.full {
            sim.counters.tapes_full += 1;
            continue;
        }
        if let Some(d) = &replay.diverged {
            sim.fail(&format!(
                "watch {}: the replay parted from the recording at step {} of {} ({:?}): {}",
                w.id,
                d.step,
                tape.len(),
                tape[d.step],
                d.why
            ));
        }
        if replay.watch.to_flat() != w.to_flat() {
            let fields = changed_fields(w, &replay.watch);
            sim.fail(&format!(
                "watch {}: the replay of its {} steps judged otherwise: {fields:#?}",
                w.id,
                tape.len()
            ));
        }
        sim.counters.replayed += 1;
    }
    for w in &every {
        *sim.counters.states.entry(w.state().as_str()).or_default() += 1;
        let reason = w.reason().to_string();
        if reason.starts_with("withdrawn:") {
            sim.counters.withdrawn += 1;
        }
        if reason.starts_with("withdrawn by greenlight:") {
            sim.counters.withdrawn_by_greenlight += 1;
        }
        if reason.contains("no evidence that this commit broke the app") {
            sim.counters.no_evidence += 1;
        }
        if reason.contains("the streak under way at the deadline paused") {
            sim.counters.paused_confirmations += 1;
        }
        if reason.contains("was not healthy again within") {
            sim.counters.pauses_inconclusive += 1;
        }
        if reason.starts_with("changed outside the watched repository") {
            sim.counters.changed_outside += 1;
        }
        if reason.contains("PostSync hook failed") {
            sim.counters.hook_failures += 1;
        }
        if reason.contains("Argo CD could not apply it") {
            sim.counters.sync_failed += 1;
        }
        if reason.contains("not shown to be this commit's fault") {
            sim.counters.not_at_fault += 1;
        }
        let leftover = sim.apps.iter().any(|a| a.name == w.app.name && a.leftover);
        if leftover && w.state() == State::Confirmed {
            sim.counters.leftover_confirmed += 1;
        }
        if leftover && w.revert_commit().is_some() && w.state() == State::Reverted {
            sim.counters.leftover_reverts += 1;
        }
        if w.expect_running {
            sim.counters.expect_running += 1;
        }
        match w.verdict() {
            Some(Verdict::Confirmed {
                verified: Some(_), ..
            }) => sim.counters.confirmed_after_verify += 1,
            Some(Verdict::NotRunning { .. }) => {
                sim.counters.not_running_fails += 1;
                if w.mode.as_str() == "arm" && !w.dry_run && !sim.cfg.dry_run {
                    sim.counters.not_running_armed += 1;
                }
                // Never reverted, ever.
                if sim.requested.contains_key(&w.id)
                    || w.state() != State::Fail
                    || w.revert_commit().is_some()
                {
                    sim.fail(&format!("{} failed not running, yet reverted", w.id));
                }
            }
            Some(Verdict::Unwatchable(Unwatchable::MutableTag { .. })) => {
                sim.counters.unwatchable_by_tag += 1
            }
            Some(Verdict::Inconclusive(Inconclusive::NotVerified { .. })) => {
                sim.counters.inconclusive_not_verified += 1
            }
            _ => {}
        }
    }
    sim.counters.clone()
}

/// The fields of `b`'s flat record that differ from `a`'s: `field: a -> b`.
fn changed_fields(a: &Watch, b: &Watch) -> Vec<String> {
    let a = serde_json::to_value(a.to_flat()).unwrap();
    let b = serde_json::to_value(b.to_flat()).unwrap();
    b.as_object()
        .unwrap()
        .iter()
        .filter(|(k, v)| a.get(k.as_str()) != Some(v))
        .map(|(k, v)| format!("{k}: {} -> {v}", a[k.as_str()]))
        .collect()
}

fn seeds() -> Vec<u64> {
    if let Ok(s) = std::env::var("GREENLIGHT_SIM_SEED") {
        return vec![s.parse().expect("GREENLIGHT_SIM_SEED is a number")];
    }
    let n: u64 = std::env::var("GREENLIGHT_SIM_SCENARIOS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    (1..=n).collect()
}

/// Checked after every call into the engine:
/// - a Revert only for an armed, not dry-run, reached, pending FAIL of a commit some observation
///   showed applied (a sync that failed before applying it is no reach) whose arm was not downgraded,
///   with no later commit touching the app (oracle: the paths the watch judged under when the
///   commit arrived, or any it judged under since — four scenarios in ten edit apps' paths
///   now and then), not Suspended at its deadline, not after a
///   human's revert, with the breaker closed counting pending reverts (oracle); at most one per
///   watch, except the re-issue of a pending one on resume;
/// - terminal states never change (a pending FAIL may become REVERTED or REVERT_FAILED);
/// - every state change comes with an event carrying the new state, at the call's time, as one
///   JSON line with time/event/commit/app/state/evidence;
/// - CONFIRMED only after stable-for of observed healthy time since reach (oracle);
/// - NOT_REACHED and deadline FAILs only on an observation fresh at the deadline instant, and a
///   late observation or commit never pre-empts a due deadline;
/// - a structurally unwatchable app ends its watches at the first observation;
/// - each live watch judges under its app's paths as the engine was last shown them when it
///   started, then those of each observation of the app; an end for moved paths only where
///   they moved;
/// - after a tick, no deadline, grace end or (freshly observed) window end is left due, and
///   `next_wakeup` is never later than anything due;
/// - the breaker equals the rules' breaker; `breaker_opened` exactly when it opens;
/// - every change to a watch is handed over by `take_dirty`; resume re-issues exactly the
///   pending reverts;
/// - `expect=Healthy,Running` (a fifth of the trailers; the model's verify answers by each app's
///   Pods after a random delay): `Effect::Verify` only for a live watch expecting Running whose
///   streak completed, once while an answer for its streak is outstanding, again only a retry
///   interval after the last answer; CONFIRMED only on a Running answer given (and asked) during
///   the streak it confirms, the last one, its summary ending the reason; FAIL not running only
///   after NotRunning last and the window, never reverted; ERROR_UNWATCHABLE for a tag only
///   after a Tag answer; INCONCLUSIVE not verified only after Failed answers or none; an
///   answer for a watch no longer waiting changes nothing.
#[test]
fn thousands_of_random_scenarios_keep_the_invariants() {
    let mut total = Counters::default();
    for seed in seeds() {
        let c = run(seed, 500, Strict::ALL);
        for (k, v) in c.states {
            *total.states.entry(k).or_default() += v;
        }
        total.reverts += c.reverts;
        total.shared_reverts += c.shared_reverts;
        total.confirmed_beside_reverts += c.confirmed_beside_reverts;
        total.withdrawals += c.withdrawals;
        total.withdrawn += c.withdrawn;
        total.withdrawn_by_greenlight += c.withdrawn_by_greenlight;
        total.no_evidence += c.no_evidence;
        total.would_have_reverted += c.would_have_reverted;
        total.not_at_fault += c.not_at_fault;
        total.hook_failures += c.hook_failures;
        total.changed_outside += c.changed_outside;
        total.paths_moved += c.paths_moved;
        total.paused_confirmations += c.paused_confirmations;
        total.pauses_inconclusive += c.pauses_inconclusive;
        total.sync_failed += c.sync_failed;
        total.restarts += c.restarts;
        total.events += c.events;
        total.reopened += c.reopened;
        total.superseded += c.superseded;
        total.pull_merges += c.pull_merges;
        total.pulled_watched += c.pulled_watched;
        total.watched_merges += c.watched_merges;
        total.leftover_confirmed += c.leftover_confirmed;
        total.leftover_reverts += c.leftover_reverts;
        total.compared_baselines += c.compared_baselines;
        total.proposals += c.proposals;
        total.shared_proposals += c.shared_proposals;
        total.merged_by_commit += c.merged_by_commit;
        total.merged_by_forge += c.merged_by_forge;
        total.closed += c.closed;
        total.withdrawn_proposals += c.withdrawn_proposals;
        total.adopted_proposals += c.adopted_proposals;
        total.merged_at_once += c.merged_at_once;
        total.ignored_requests += c.ignored_requests;
        total.expect_running += c.expect_running;
        total.verify_asks += c.verify_asks;
        total.answers_running += c.answers_running;
        total.answers_not_running += c.answers_not_running;
        total.answers_tag += c.answers_tag;
        total.answers_failed += c.answers_failed;
        total.answers_ignored += c.answers_ignored;
        total.asks_dropped += c.asks_dropped;
        total.asks_moot += c.asks_moot;
        total.confirmed_after_verify += c.confirmed_after_verify;
        total.not_running_fails += c.not_running_fails;
        total.not_running_armed += c.not_running_armed;
        total.unwatchable_by_tag += c.unwatchable_by_tag;
        total.inconclusive_not_verified += c.inconclusive_not_verified;
        total.forgotten += c.forgotten;
        total.replayed += c.replayed;
        total.tapes_full += c.tapes_full;
    }
    eprintln!("simulation outcome totals: {total:?}");
    // Every verdict was replayed from its tape (none outgrew its bound here).
    assert!(
        total.replayed > 0 && total.tapes_full == 0,
        "verdicts not replayed: {total:?}"
    );
    // The scenarios must actually exercise every outcome, or the invariants prove little.
    if seeds().len() > 100 {
        assert!(
            total.confirmed_beside_reverts > 0,
            "no confirmation beside another app's revert: {total:?}"
        );
        assert!(total.withdrawn > 0, "no commit withdrawn: {total:?}");
        assert!(
            total.forgotten > 0,
            "the engine never let a finished watch go: {total:?}"
        );
        assert!(
            total.would_have_reverted > 0,
            "no shadow or dry-run failure would have reverted: {total:?}"
        );
        assert!(
            total.no_evidence > 0 && total.reverts > 0,
            "the evidence standard was never exercised both ways: {total:?}"
        );
        assert!(
            total.withdrawn_by_greenlight > 0,
            "greenlight's revert never withdrew another app's watch: {total:?}"
        );
        assert!(
            total.not_at_fault > 0,
            "no FAIL withheld for its baseline: {total:?}"
        );
        assert!(
            total.paused_confirmations > 0 && total.pauses_inconclusive > 0,
            "no pause after the deadline that resumed or timed out: {total:?}"
        );
        assert!(
            total.changed_outside > 0,
            "no watch ended by a spec edit: {total:?}"
        );
        assert!(
            total.paths_moved > 0,
            "no watch ended because its app's paths moved: {total:?}"
        );
        assert!(
            total.hook_failures > 0,
            "no verdict on a failed PostSync hook: {total:?}"
        );
        assert!(
            total.sync_failed > 0,
            "no NOT_REACHED for a sync that could not apply: {total:?}"
        );
        assert!(
            total.reopened > 0,
            "no NOT_REACHED watch re-opened: {total:?}"
        );
        assert!(
            total.superseded > 0,
            "no revert superseded by a fix-forward: {total:?}"
        );
        assert!(
            total.pull_merges > 0 && total.watched_merges > 0 && total.pulled_watched > 0,
            "no pull merge, or no watched merge: {total:?}"
        );
        assert!(
            total.leftover_confirmed > 0 && total.leftover_reverts > 0,
            "an app OutOfSync for good never confirmed or reverted a commit: {total:?}"
        );
        assert!(
            total.compared_baselines > 0,
            "no watch judged on a baseline seen after the compare: {total:?}"
        );
        assert!(
            total.proposals > 0
                && total.merged_by_commit > 0
                && total.merged_by_forge > 0
                && total.closed > 0
                && total.withdrawn_proposals > 0,
            "reverts by pull request not exercised every way: {total:?}"
        );
        assert!(
            total.verify_asks > 0
                && total.confirmed_after_verify > 0
                && total.not_running_fails > 0,
            "expect=Healthy,Running never asked verify, confirmed after it, or failed not running: {total:?}"
        );
    }
    for st in TERMINAL_STATES {
        if seeds().len() > 100 {
            assert!(
                total.states.get(st).copied().unwrap_or(0) > 0,
                "no {st} in {total:?}"
            );
        }
    }
}

/// Every scenario's executor proposes its reverts as pull requests
/// (`docs/verdicts.md#revert-by-pull-request`): the forge merges them (their commit arriving
/// as itself, a merge or a squash, or the forge saying so), closes them, or a newer commit to
/// the app withdraws them; a human may revert the commit meanwhile; a restart follows them.
#[test]
fn reverts_by_pull_request_keep_the_invariants_in_random_scenarios() {
    let mut total = Counters::default();
    for seed in seeds().into_iter().take(700) {
        let c = run_with(seed, 500, Strict::ALL, true);
        for (k, v) in c.states {
            *total.states.entry(k).or_default() += v;
        }
        total.reverts += c.reverts;
        total.restarts += c.restarts;
        total.proposals += c.proposals;
        total.shared_proposals += c.shared_proposals;
        total.merged_by_commit += c.merged_by_commit;
        total.merged_by_forge += c.merged_by_forge;
        total.closed += c.closed;
        total.withdrawn_proposals += c.withdrawn_proposals;
        total.adopted_proposals += c.adopted_proposals;
        total.merged_at_once += c.merged_at_once;
        total.ignored_requests += c.ignored_requests;
    }
    eprintln!(
        "pull requests: proposals {} shared {} merged_by_commit {} merged_by_forge {} closed {} withdrawn {} adopted {} merged_at_once {} ignored_requests {} (reverts {}, restarts {}, states {:?})",
        total.proposals,
        total.shared_proposals,
        total.merged_by_commit,
        total.merged_by_forge,
        total.closed,
        total.withdrawn_proposals,
        total.adopted_proposals,
        total.merged_at_once,
        total.ignored_requests,
        total.reverts,
        total.restarts,
        total.states
    );
    if seeds().len() > 100 {
        assert!(
            total.proposals > 0
                && total.merged_by_commit > 0
                && total.merged_by_forge > 0
                && total.closed > 0
                && total.withdrawn_proposals > 0
                && total.adopted_proposals > 0,
            "reverts by pull request not exercised every way: {total:?}"
        );
    }
}

#[test]
fn deadlines_vouched_for_by_the_stream_are_decided_in_random_scenarios() {
    let strict = Strict {
        vouched_deadline: true,
        ..Strict::ALL
    };
    for seed in seeds().into_iter().take(500) {
        run(seed, 500, strict);
    }
}

/// The outcomes above, and the states the end-to-end tests stop waiting at, are the test kit's
/// list: it must be exactly the judge's terminal states.
#[test]
fn the_test_kits_terminal_states_are_the_judges() {
    let all = [
        State::WaitingReach,
        State::Judging,
        State::Confirmed,
        State::Fail,
        State::Reverted,
        State::NotReached,
        State::ErrorUnwatchable,
        State::Inconclusive,
        State::RevertFailed,
    ];
    // A state added to the judge stops this from compiling until it is listed above.
    for st in all {
        match st {
            State::WaitingReach
            | State::Judging
            | State::Confirmed
            | State::Fail
            | State::Reverted
            | State::NotReached
            | State::ErrorUnwatchable
            | State::Inconclusive
            | State::RevertFailed => {}
        }
    }
    let terminal: Vec<&str> = all
        .into_iter()
        .filter(|st| st.is_terminal())
        .map(State::as_str)
        .collect();
    assert_eq!(terminal, TERMINAL_STATES);
}

/// A clean before (docs/verdicts.md#evidence), read off what the model delivered.
fn clean_before(s: &AppSnapshot) -> bool {
    // OutOfSync only through resources left for a human to prune is as clean as Synced.
    let synced = s.sync_status == "Synced"
        || (s.sync_status == "OutOfSync"
            && s.resources
                .iter()
                .filter(|r| r.sync_status != "Synced")
                .all(|r| r.requires_pruning));
    synced
        && !s.operation_running
        && s.last_operation
            .as_ref()
            .is_none_or(|o| o.phase == "Succeeded")
}
