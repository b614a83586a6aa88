//! The git lane: fetches, ancestry questions and reverts run as jobs, one at a time in the
//! watchdog's clone, and report back on one channel.

use super::inputs::Answers;
use super::*;
use crate::metrics::GitJob;

/// What a job reports back.
pub(super) enum JobDone {
    /// A fetch's new tip and the commits up to it; `None` when the fetch was not needed (every
    /// revision it was asked for was in the clone already).
    Fetched(Result<Option<(String, Vec<CommitInfo>)>>),
    Answered {
        job: u64,
        answers: Result<Answers>,
    },
    Reverted {
        watch_id: String,
        outcome: RevertOutcome,
    },
    /// The forge's answers on the reverts' pull requests: by url, `None` while open.
    Followed(Vec<(String, Result<Option<RevertOutcome>>)>),
    /// A pull request withdrawn: how it ended, or why the close failed.
    Withdrawn {
        url: String,
        ended: Result<RevertOutcome>,
    },
    /// Verify's answer for a watch (`expect=Healthy,Running`).
    Verified {
        watch_id: String,
        ask: u64,
        answer: greenlight_core::judge::Verification,
    },
}

/// Git's jobs: the channel they report on, the lane they take turns in, the fetch and the
/// reverts under way.
pub(super) struct GitLane {
    pub(super) jobs_tx: mpsc::Sender<JobDone>,
    pub(super) jobs_rx: mpsc::Receiver<JobDone>,
    /// Git jobs run one at a time: a fetch and a revert never race in one clone.
    pub(super) lane: Arc<Semaphore>,
    pub(super) next_job: u64,
    /// When the fetch in flight started: git has no timeout of its own on a stalled remote,
    /// and a fetch that never returns must not stop commit processing quietly.
    pub(super) fetching: Option<Timestamp>,
    pub(super) stuck_warned: bool,
    /// A fetch asked for while one was under way: it starts when that one ends. However many
    /// ask meanwhile (a flood of push hooks, a burst of apps comparing a new revision), one is
    /// in flight and one queued.
    pub(super) fetch_next: Option<FetchWanted>,
    /// Revisions a source reported that were looked for in the clone already (and fetched for,
    /// when missing): each is looked for once (bounded: forgotten all at once when full).
    pub(super) looked_for: std::collections::HashSet<String>,
    pub(super) reverts: VecDeque<RevertRequest>,
    pub(super) reverting: bool,
    /// Reverts' pull requests to close, with why.
    pub(super) withdrawals: VecDeque<(RevertProposal, String)>,
    /// A forge job (following or withdrawing) is under way.
    pub(super) forging: bool,
    /// Requests whose forge failure was said, so that a forge that stays down is said once.
    pub(super) forge_warned: BTreeSet<String>,
    /// When the forge was last asked about the open requests.
    pub(super) followed_at: Option<Timestamp>,
}

/// The forge is asked about open revert requests at most this often (or each fetch, when
/// fetches are rarer): a merge is seen in git at the next fetch anyway; only a close needs the
/// forge, and a forge's API is rate-limited (GitHub: 5,000 requests an hour per token).
const FOLLOW_EVERY_MS: i64 = 15_000;

/// How many reported revisions the runtime remembers as looked for in the clone.
const LOOKED_FOR_KEPT: usize = 10_000;

/// A fetch asked for.
#[derive(Debug, Default)]
pub(super) struct FetchWanted {
    /// Fetch whatever the clone has (the fetch timer, a push hook).
    pub(super) always: bool,
    /// Else fetch only when one of these revisions (a source reported them) is not in the clone.
    pub(super) unless_present: Vec<String>,
}

impl FetchWanted {
    fn merge(&mut self, other: FetchWanted) {
        self.always |= other.always;
        if self.always {
            self.unless_present.clear();
        } else {
            self.unless_present.extend(other.unless_present);
        }
    }
}

impl GitLane {
    pub(super) fn new() -> GitLane {
        let (jobs_tx, jobs_rx) = mpsc::channel(64);
        GitLane {
            jobs_tx,
            jobs_rx,
            lane: Arc::new(Semaphore::new(1)),
            next_job: 0,
            fetching: None,
            stuck_warned: false,
            fetch_next: None,
            looked_for: std::collections::HashSet::new(),
            reverts: VecDeque::new(),
            reverting: false,
            withdrawals: VecDeque::new(),
            forging: false,
            forge_warned: BTreeSet::new(),
            followed_at: None,
        }
    }
}

impl Runtime {
    pub(super) fn on_fetch_timer(&mut self) -> Result<()> {
        // `greenlight breaker reset` leaves a request while the daemon runs; the daemon is the
        // breaker's only writer then. The request is cleared in the same transaction that
        // closes the breaker, so a daemon that dies in between finds it again at its next start.
        let now = self.now();
        // Housekeeping: a failed prune is tried again an hour later; judging goes on.
        match self.store.prune_due(now, self.cfg.retain_ms) {
            Ok(Some(p)) => {
                // The watches the judge let go are forgotten with their records.
                self.engine
                    .forget_finished_before(now.plus_ms(-self.cfg.retain_ms));
                if p.any() {
                    self.ctx.out.info(now, &p.summary());
                }
            }
            Ok(None) => {}
            Err(e) => self
                .ctx
                .out
                .warn(now, &format!("pruning the state file failed: {e:#}")),
        }
        if self.store.breaker_reset_requested()?
            && !self
                .inputs
                .work
                .iter()
                .any(|w| matches!(w, Work::BreakerReset))
            && !self.clear_reset_request
        {
            self.inputs.work.push_back(Work::BreakerReset);
        }
        let now = self.now();
        if let Some(since) = self.git.fetching {
            let stuck_after = self.cfg.fetch_interval.as_millis() as i64 * 10;
            if !self.git.stuck_warned && now.ms_since(since) > stuck_after {
                self.git.stuck_warned = true;
                self.ctx.out.warn(now, &format!(
                    "fetching {} has not returned for {} s: new commits are not seen until it does",
                    self.branch, now.ms_since(since) / 1000
                ));
            }
        }
        self.want_fetch(FetchWanted {
            always: true,
            unless_present: Vec::new(),
        });
        self.start_following();
        self.list_if_due(now);
        // Apps no watch follows change their idle observations without a step of their own:
        // they are written here, so a restart keeps the baseline of a commit not yet fetched.
        self.apply(Vec::new(), None)
    }

    /// A fetch is wanted: it starts now, or — one under way — when that one ends, merged with
    /// whatever else was asked for meanwhile.
    pub(super) fn want_fetch(&mut self, wanted: FetchWanted) {
        if self.git.fetching.is_some() {
            self.git
                .fetch_next
                .get_or_insert_with(FetchWanted::default)
                .merge(wanted);
            return;
        }
        self.git.fetching = Some(self.now());
        self.git.stuck_warned = false;
        let repo = self.ctx.repo.clone();
        let (branch, last) = (self.branch.clone(), self.tip.clone());
        // A fetch for revisions looks for them first, as an ancestry job does.
        let kind = if wanted.always {
            GitJob::Fetch
        } else {
            GitJob::Ancestry
        };
        self.spawn_git(
            kind,
            move || -> Result<Option<(String, Vec<CommitInfo>)>> {
                if !wanted.always {
                    let mut missing = false;
                    for r in &wanted.unless_present {
                        if repo.is_ancestor(r, r)?.is_none() {
                            missing = true;
                            break;
                        }
                    }
                    if !missing {
                        return Ok(None);
                    }
                }
                let tip = repo.fetch(&branch)?;
                let commits = repo.commits_between(Some(&last), &tip)?;
                Ok(Some((tip, commits)))
            },
            |r| JobDone::Fetched(r.and_then(|x| x)),
        );
    }

    /// A source reported `revision` of the watched repository (an app compared, is syncing or
    /// synced it): one the clone lacks is fetched at once, so that the watches its commits ask
    /// for start when Argo CD knows of the push rather than at the next fetch tick
    /// (`docs/deploy.md#push-hooks`). Each revision is looked for once.
    pub(super) fn reported_revision(&mut self, revision: &str) {
        if !greenlight_core::snapshot::is_git_sha(revision)
            || revision == self.tip
            || self.delivered.contains(revision)
            || self.git.looked_for.contains(revision)
        {
            return;
        }
        if self.git.looked_for.len() >= LOOKED_FOR_KEPT {
            self.git.looked_for.clear();
        }
        self.git.looked_for.insert(revision.to_string());
        self.want_fetch(FetchWanted {
            always: false,
            unless_present: vec![revision.to_string()],
        });
    }

    /// Run a blocking git call as a job on the git lane; `done` turns its result into an input.
    pub(super) fn spawn_git<T: Send + 'static>(
        &self,
        kind: GitJob,
        f: impl FnOnce() -> T + Send + 'static,
        done: impl FnOnce(Result<T>) -> JobDone + Send + 'static,
    ) {
        let lane = self.git.lane.clone();
        let tx = self.git.jobs_tx.clone();
        let mode = self.ctx.jobs;
        let metrics = self.metrics.clone();
        tokio::spawn(async move {
            let Ok(_permit) = lane.acquire_owned().await else {
                return;
            };
            // Real time, whatever clock the runtime judges by: how long git took.
            let began = std::time::Instant::now();
            let result = match mode {
                Jobs::Blocking => tokio::task::spawn_blocking(f)
                    .await
                    .map_err(|e| anyhow!("the git job failed: {e}")),
                Jobs::Inline => Ok(f()),
            };
            metrics.git_job(kind, began.elapsed());
            let _ = tx.send(done(result)).await;
        });
    }

    pub(super) fn on_job(&mut self, done: JobDone) {
        match done {
            JobDone::Fetched(result) => {
                self.git.fetching = None;
                match result {
                    Ok(Some((tip, commits))) if tip != self.tip => {
                        let at = self.now();
                        self.inputs.work.push_back(Work::Commits {
                            commits: commits.into(),
                            tip,
                            at,
                            effects: Vec::new(),
                            asked: false,
                        });
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let now = self.now();
                        self.ctx
                            .out
                            .warn(now, &format!("fetching {} failed: {e:#}", self.branch));
                    }
                }
                if let Some(next) = self.git.fetch_next.take() {
                    self.want_fetch(next);
                }
            }
            JobDone::Answered { job, answers } => {
                let mut fetched = None;
                let mut base = String::new();
                match answers {
                    Ok(a) => {
                        base = a.base;
                        for (q, v) in a.answers {
                            if let Some(v) = v {
                                self.inputs.ancestry.insert(q, v);
                            }
                        }
                        fetched = a.fetched;
                    }
                    Err(e) => {
                        // A git failure (the remote unreachable for a moment) leaves the
                        // questions unanswered, as unknown revisions are: "not reached yet".
                        let now = self.now();
                        self.ctx.out.warn(
                            now,
                            &format!("ancestry questions left unanswered for now: {e:#}"),
                        );
                    }
                }
                if self.inputs.asking.as_ref().is_some_and(|a| a.job == job) {
                    self.inputs.asking = None;
                    self.mark_front_asked();
                }
                // New commits go ahead of the input that asked, so a later commit that the source
                // already reports is recorded (and attributed) before that input is judged. When
                // that input is itself a hand-over of commits, they are the ones beyond its tip
                // (listed from it): it takes them on, after its own, in order.
                if let Some((tip, commits)) = fetched
                    && tip != self.tip
                    && !commits.is_empty()
                {
                    match self.inputs.work.front_mut() {
                        Some(Work::Commits {
                            commits: own,
                            tip: own_tip,
                            ..
                        }) if *own_tip == base => {
                            own.extend(commits);
                            *own_tip = tip;
                        }
                        front => {
                            // Newer commits never go ahead of a hand-over's own (a later commit
                            // judged before the one it follows would not be its later commit):
                            // behind a hand-over listed from another tip they follow it, and what
                            // it hands over meanwhile is skipped then.
                            let behind = usize::from(matches!(front, Some(Work::Commits { .. })));
                            let work = Work::Commits {
                                commits: commits.into(),
                                tip,
                                at: self.now(),
                                effects: Vec::new(),
                                asked: false,
                            };
                            self.inputs.work.insert(behind, work);
                        }
                    }
                }
            }
            JobDone::Reverted { watch_id, outcome } => {
                self.git.reverting = false;
                self.inputs
                    .work
                    .push_back(Work::RevertDone { watch_id, outcome });
            }
            JobDone::Followed(answers) => {
                self.git.forging = false;
                for (url, answer) in answers {
                    match answer {
                        Ok(answer) => {
                            self.git.forge_warned.remove(&url);
                            if let Some(outcome) = answer {
                                self.inputs
                                    .work
                                    .push_back(Work::ProposalEnded { url, outcome });
                            }
                        }
                        Err(e) => {
                            if self.git.forge_warned.insert(url.clone()) {
                                let now = self.now();
                                self.ctx.out.warn(now, &format!(
                                    "cannot read the revert's pull request {url}: {e:#}; asked again at each fetch, and its commit arriving on {} ends it all the same",
                                    self.branch
                                ));
                            }
                        }
                    }
                }
            }
            JobDone::Verified {
                watch_id,
                ask,
                answer,
            } => {
                self.inputs.work.push_back(Work::Verified {
                    watch_id,
                    ask,
                    answer,
                });
            }
            JobDone::Withdrawn { url, ended } => {
                self.git.forging = false;
                let now = self.now();
                match ended {
                    Ok(outcome) => {
                        self.ctx
                            .out
                            .info(now, &format!("the revert's pull request {url} is closed"));
                        self.inputs
                            .work
                            .push_back(Work::ProposalEnded { url, outcome });
                    }
                    Err(e) => self.ctx.out.warn(now, &format!(
                        "closing the revert's pull request {url} failed: {e:#}; it is followed until the forge says it is closed or merged — close it by hand so that it does not merge"
                    )),
                }
            }
        }
    }

    /// At each fetch: ask the forge where each revert's open pull request stands (one job for
    /// all of them, on the git lane: a closed request is looked for on the branch).
    pub(super) fn start_following(&mut self) {
        let now = self.now();
        if self.git.forging
            || self
                .git
                .followed_at
                .is_some_and(|at| now.ms_since(at) < FOLLOW_EVERY_MS)
        {
            return;
        }
        // Withdrawn ones too: a close that failed leaves the forge to say how it ends.
        let mut asked: Vec<(String, greenlight_core::commit::CommitId, RevertProposal)> =
            self.engine.proposals();
        asked.sort_by(|a, b| a.2.url.cmp(&b.2.url));
        asked.dedup_by(|a, b| a.2.url == b.2.url);
        if asked.is_empty() {
            return;
        }
        self.git.forging = true;
        self.git.followed_at = Some(now);
        let reverter = self.ctx.reverter.clone();
        let branch = self.branch.clone();
        self.spawn_git(
            GitJob::Revert,
            move || {
                asked
                    .into_iter()
                    .map(|(_, commit, p)| {
                        let answer = reverter.follow(&p, commit.as_str(), &branch);
                        (p.url, answer)
                    })
                    .collect::<Vec<_>>()
            },
            |r| {
                JobDone::Followed(r.unwrap_or_else(|e| {
                    vec![(String::new(), Err(anyhow!("the forge task failed: {e}")))]
                }))
            },
        );
    }

    /// Verify a watch's Pods (`expect=Healthy,Running`), as a task off the loop and off the git
    /// lane (it reads Argo CD or the cluster, not the clone); the answer comes back as an input.
    pub(super) fn start_verify(
        &mut self,
        watch_id: String,
        app: greenlight_core::directive::AppRef,
        ask: u64,
    ) {
        let verifier = self.cfg.verifier.clone();
        let tx = self.git.jobs_tx.clone();
        tokio::spawn(async move {
            let answer = match verifier {
                Some(v) => v.verify(&app).await,
                None => greenlight_core::judge::Verification::Failed(
                    "this greenlight reads no Pods (it was started without a way to verify)".into(),
                ),
            };
            let _ = tx
                .send(JobDone::Verified {
                    watch_id,
                    ask,
                    answer,
                })
                .await;
        });
    }

    /// One withdrawal at a time, as a job; how the request ended comes back as an input.
    pub(super) fn start_withdrawal(&mut self) {
        if self.git.forging {
            return;
        }
        let Some((proposal, why)) = self.git.withdrawals.pop_front() else {
            return;
        };
        self.git.forging = true;
        let reverter = self.ctx.reverter.clone();
        let url = proposal.url.clone();
        self.spawn_git(
            GitJob::Revert,
            move || reverter.withdraw(&proposal, &why),
            move |r| JobDone::Withdrawn {
                url,
                ended: r.and_then(|x| x),
            },
        );
    }

    /// One revert at a time, as a job; its outcome comes back as an input.
    pub(super) fn start_revert(&mut self) {
        if self.git.reverting {
            return;
        }
        // A request whose watch no longer waits for it (another watch of the same commit had
        // its revert proposed, and this one waits for that request) is not carried out.
        let r = loop {
            let Some(r) = self.git.reverts.pop_front() else {
                return;
            };
            if self
                .engine
                .watches()
                .iter()
                .any(|w| w.id == r.watch_id && w.revert_pending())
            {
                break r;
            }
        };
        self.git.reverting = true;
        let reverter = self.ctx.reverter.clone();
        let branch = self.branch.clone();
        let watch_id = r.watch_id.clone();
        let dry_run = self.cfg.dry_run;
        self.spawn_git(
            GitJob::Revert,
            move || {
                if !dry_run {
                    return reverter.revert(&r, &branch);
                }
                // A revert decided before a restart in dry-run (never push): adopt one that
                // reached the branch before the crash, push nothing.
                match reverter.adopt_only(r.commit.as_str(), &branch) {
                    Ok(Some(revert)) => RevertOutcome::adopted(&revert),
                    Ok(None) => RevertOutcome::Failed {
                        message: format!(
                            "{}the revert of {} decided before the restart was not pushed; revert it by hand if it is still wanted",
                            crate::metrics::DRY_RUN,
                            r.commit
                        ),
                    },
                    Err(e) => RevertOutcome::Failed {
                        message: format!(
                            "{}looking for an existing revert failed: {e:#}",
                            crate::metrics::DRY_RUN
                        ),
                    },
                }
            },
            move |result| JobDone::Reverted {
                watch_id,
                outcome: result.unwrap_or_else(|e| RevertOutcome::Failed {
                    message: format!("the revert task failed: {e}"),
                }),
            },
        );
    }
}
