//! `watch --once`: one cycle of the same runtime, with dry-run forced and source problems
//! collected to fail the cycle.

use super::*;

/// `watch --once`: one cycle of this runtime on a scratch clone and state (the caller's
/// `cfg.data_dir` and `cfg.state`, with dry-run set): the commits in range (after `--since`, or
/// the tip alone), one listing, one judgement of each watch.
pub async fn once(cfg: DaemonConfig, source: Source, out: Output) -> Result<OnceSummary> {
    use anyhow::Context as _;
    let store: Box<dyn Store> = Box::new(SqliteStore::open_or_create(&cfg.state)?);
    let (repo, branch, branch_is_default, cleared) = open_repo(&cfg, cfg.data_dir.join("repo"))
        .await
        .context("self-check: the repository")?;
    if let Some(note) = greenlight_git::stale_locks_note(&cleared) {
        out.warn(crate::clock::SystemClock.now(), &note);
    }
    let tip = {
        let (r, b) = (repo.clone(), branch.clone());
        tokio::task::spawn_blocking(move || seams::Repository::fetch(&*r, &b))
            .await?
            .context("self-check: the repository")?
    };
    let Source { app, deliveries } = source;
    let ctx = Context {
        source: app,
        repo: repo.clone(),
        reverter: repo.clone(),
        clock: Arc::new(crate::clock::SystemClock),
        out,
        jobs: Jobs::Blocking,
    };
    let base = match &cfg.since {
        Some(rev) => Some(resolve_since(&ctx, &cfg, rev).await?),
        None => None,
    };
    let commits = {
        let (r, t) = (repo.clone(), tip.clone());
        tokio::task::spawn_blocking(move || r.commits_between(base.as_deref(), &t))
            .await?
            .context("self-check: the repository")?
    };
    let start = Start {
        branch: branch.clone(),
        branch_is_default,
        tip: tip.clone(),
        store,
        deliveries,
        announce: false,
        started: None,
    };
    let runtime = Runtime::start_with(cfg, ctx, start).await?;
    runtime.once(commits, tip, branch).await
}

/// What one self-check cycle saw.
pub struct OnceSummary {
    pub branch: String,
    pub tip: String,
    /// Trailers in range that started no watch: users' content, reported, not a failure.
    pub rejected: usize,
    pub commits: usize,
    pub watches: usize,
    pub apps_listed: usize,
}

/// What a `--once` cycle collects (nothing, and not strict, for the daemon).
pub(super) struct OnceCycle {
    /// `watch --once`: source problems are collected and fail the cycle.
    pub(super) strict: bool,
    pub(super) problems: Vec<String>,
    pub(super) listed: usize,
    pub(super) rejected: usize,
}

impl OnceCycle {
    pub(super) fn new() -> OnceCycle {
        OnceCycle {
            strict: false,
            problems: Vec::new(),
            listed: 0,
            rejected: 0,
        }
    }
}

impl Runtime {
    /// `watch --once`: one cycle — the commits in range, one listing, one judgement of each —
    /// with dry-run forced (the caller's config) and any source problem an error.
    pub(super) async fn once(
        mut self,
        commits: Vec<CommitInfo>,
        tip: String,
        branch: String,
    ) -> Result<OnceSummary> {
        self.once.strict = true;
        let commit_count = commits.len();
        let now = self.now();
        self.inputs.work.push_back(Work::Commits {
            commits: commits.into(),
            tip,
            at: now,
            effects: Vec::new(),
            asked: false,
        });
        self.pump()?;
        while !self.inputs.work.is_empty() || self.inputs.asking.is_some() {
            self.once_step().await?;
        }
        let ticket = self.freshness.ticket();
        self.listing = Some(ticket);
        self.sync_watched();
        self.ctx.source.request_listing(ticket);
        while self.listing.is_some() || !self.inputs.work.is_empty() || self.inputs.asking.is_some()
        {
            self.once_step().await?;
        }
        if !self.once.problems.is_empty() {
            return Err(anyhow!("self-check: {}", self.once.problems.join("; ")));
        }
        Ok(OnceSummary {
            branch,
            tip: self.tip.clone(),
            rejected: self.once.rejected,
            commits: commit_count,
            watches: self.engine.watches().len(),
            apps_listed: self.once.listed,
        })
    }

    pub(super) async fn once_step(&mut self) -> Result<()> {
        let give_up_in = self
            .inputs
            .asking
            .as_ref()
            .map(|a| self.until(a.give_up_at));
        tokio::select! {
            msg = self.deliveries.recv() => {
                let Some(msg) = msg else { return Err(anyhow!("the Application source stopped")) };
                self.receive(msg);
                self.drain_deliveries();
            }
            Some(done) = self.git.jobs_rx.recv() => self.on_job(done),
            _ = tokio::time::sleep(give_up_in.unwrap_or_default()), if give_up_in.is_some() => {
                self.give_up_asking();
            }
        }
        self.pump()
    }

    /// `watch --once`: a trailer in range names an app the complete listing left out. A token
    /// sees no app its RBAC hides, and Argo CD answers for such an app as for one that does not
    /// exist, so the self-check cannot tell which: it fails, naming the app and the commit.
    pub(super) fn once_unlisted(&mut self, present: &[AppKey]) {
        let mut unlisted: Vec<(AppRef, String)> = self
            .engine
            .watches()
            .iter()
            .filter(|w| w.is_live())
            .filter(|w| !present.iter().any(|k| w.app.matches(&k.namespace, &k.name)))
            .map(|w| (w.app.clone(), w.commit.short().to_string()))
            .collect();
        unlisted.sort_by(|a, b| (a.0.to_string(), &a.1).cmp(&(b.0.to_string(), &b.1)));
        unlisted.dedup();
        let source = self.ctx.source.name().to_string();
        for (app, commit) in unlisted {
            self.once.problems.push(format!(
                "app {app}, named by the trailer of commit {commit}, is not visible to this token: it does not exist, or the token's RBAC cannot see it ({source} answers both the same: its listing leaves the app out)"
            ));
        }
    }

    pub(super) fn problem(&mut self, why: String) {
        if self.once.strict {
            self.once.problems.push(why);
        }
    }
}
