//! The runtime's queue of judge inputs (`docs/verdicts.md#observed-time` for why order
//! matters): an input whose reach needs git waits, and everything behind it, until the
//! ancestry job answers or `--stale-after` passes; answers are kept, since ancestry never
//! changes.

use super::*;

/// An ancestry question: (commit, revision).
pub(super) type Question = (String, String);

/// An input for the judge, waiting its turn.
pub(super) enum Work {
    Source {
        msg: SourceMsg,
        at: Timestamp,
        asked: bool,
        /// The source lost updates of this app before this delivery (see `Freshness`).
        gap: bool,
        /// The stream vouched for this app up to this moment, then stopped (a loss, a skipped
        /// message, a silence past stale-after), and this delivery carries the version it
        /// vouched for: no update was lost, so that time is observed time
        /// ([`super::Runtime::note_vouching_end`]).
        vouched_to: Option<Timestamp>,
    },
    /// New commits from one fetch, oldest first; the tip is stored with the watches they start.
    Commits {
        commits: VecDeque<CommitInfo>,
        tip: String,
        at: Timestamp,
        effects: Vec<Effect>,
        asked: bool,
    },
    RevertDone {
        watch_id: String,
        outcome: RevertOutcome,
    },
    /// Verify answered for a watch with `expect=Healthy,Running`.
    Verified {
        watch_id: String,
        ask: u64,
        answer: greenlight_core::judge::Verification,
    },
    /// A revert's pull request merged or was closed (the forge's report).
    ProposalEnded {
        url: String,
        outcome: RevertOutcome,
    },
    BreakerReset,
}

/// What an ancestry job learnt: the answers, and — when a revision was unknown and the job
/// fetched — the branch's new tip with the commits up to it, which the judge hears before the
/// input that asked (a later commit is attributed before any judging of the app's state).
pub(super) struct Answers {
    pub(super) answers: Vec<(Question, Option<bool>)>,
    pub(super) fetched: Option<(String, Vec<CommitInfo>)>,
    /// The tip the fetched commits are listed from (exclusive).
    pub(super) base: String,
}

/// A judge input that needs answers first.
pub(super) enum Step {
    Done,
    NeedAnswers(Vec<Question>),
}

/// Ancestry answers kept for the next observations: two generations of at most half of
/// [`KeptAnswers::CAP`] each. When the newer fills, the older goes; a question asked again after
/// that costs one in-process read, and memory stays flat however long the daemon runs.
#[derive(Default)]
pub(super) struct KeptAnswers {
    newer: HashMap<Question, bool>,
    older: HashMap<Question, bool>,
}

impl KeptAnswers {
    /// At most this many answers are kept (about 200 bytes each).
    pub(super) const CAP: usize = 100_000;

    pub(super) fn get(&self, q: &Question) -> Option<&bool> {
        self.newer.get(q).or_else(|| self.older.get(q))
    }

    pub(super) fn insert(&mut self, q: Question, answer: bool) {
        if self.newer.len() >= Self::CAP / 2 && !self.newer.contains_key(&q) {
            self.older = std::mem::take(&mut self.newer);
        }
        self.newer.insert(q, answer);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.newer.len() + self.older.len()
    }
}

/// The ancestry job the queue is waiting for.
pub(super) struct Asking {
    pub(super) job: u64,
    /// After this, the queue goes on without the answers.
    pub(super) give_up_at: Timestamp,
}

/// The queue of judge inputs and what it waits for.
pub(super) struct Inputs {
    pub(super) work: VecDeque<Work>,
    pub(super) asking: Option<Asking>,
    /// Ancestry never changes: answers are kept, as many as [`KeptAnswers::CAP`].
    pub(super) ancestry: KeptAnswers,
    /// A wake-up came while the queue waited for answers: it is handled after them.
    pub(super) tick_due: bool,
    /// An asked watch (`greenlight wait`) holds the branch's commits back until this moment or
    /// the source's first complete listing, whichever comes first: the app as it was before the
    /// commit is observed first, so its baseline is whole whatever the timing of the sync.
    /// `None`: nothing held (a daemon, or the listing came).
    pub(super) hold_commits_until: Option<Timestamp>,
}

impl Inputs {
    pub(super) fn new() -> Inputs {
        Inputs {
            work: VecDeque::new(),
            asking: None,
            ancestry: KeptAnswers::default(),
            tick_due: false,
            hold_commits_until: None,
        }
    }
}

impl Runtime {
    /// The answers did not come within `--stale-after`: the waiting input goes on without them.
    pub(super) fn give_up_asking(&mut self) {
        if self.inputs.asking.take().is_some() {
            let now = self.now();
            self.ctx.out.warn(
                now,
                "git did not answer ancestry questions in time: judging without them (not reached yet)",
            );
            self.mark_front_asked();
        }
    }

    pub(super) fn mark_front_asked(&mut self) {
        match self.inputs.work.front_mut() {
            Some(Work::Source { asked, .. }) | Some(Work::Commits { asked, .. }) => *asked = true,
            _ => {}
        }
    }

    /// Hand waiting inputs to the judge, in order, until one needs git's answers.
    pub(super) fn pump(&mut self) -> Result<()> {
        while self.inputs.asking.is_none() {
            // Commits held for the first listing: what the source delivered behind them is
            // judged first; the commits wait (see `Inputs::hold_commits_until`).
            let held = matches!(self.inputs.work.front(), Some(Work::Commits { .. }))
                && self
                    .inputs
                    .hold_commits_until
                    .is_some_and(|until| self.now() < until);
            let next = if held {
                self.inputs
                    .work
                    .iter()
                    .position(|w| !matches!(w, Work::Commits { .. }))
                    .and_then(|at| self.inputs.work.remove(at))
            } else {
                self.inputs.work.pop_front()
            };
            let Some(work) = next else {
                break;
            };
            match self.judge(work)? {
                Step::Done => {}
                Step::NeedAnswers(questions) => self.ask(questions),
            }
        }
        if self.inputs.asking.is_none() && self.inputs.work.is_empty() && self.inputs.tick_due {
            self.inputs.tick_due = false;
            self.wake()?;
        }
        self.finish_confirming()?;
        self.flush()?;
        self.start_revert();
        self.start_withdrawal();
        Ok(())
    }

    /// Ask git, as a job; the waiting input stays at the front of the queue.
    pub(super) fn ask(&mut self, questions: Vec<Question>) {
        self.git.next_job += 1;
        let job = self.git.next_job;
        let now = self.now();
        self.inputs.asking = Some(Asking {
            job,
            give_up_at: now.plus_ms(self.cfg.stale_after_ms),
        });
        let repo = self.ctx.repo.clone();
        // The commits a hand-over that asks is judging are not new to it: what lies beyond its
        // tip is (each question of its commits would otherwise hand them all over again).
        let last = match self.inputs.work.front() {
            Some(Work::Commits { tip, .. }) => tip.clone(),
            _ => self.tip.clone(),
        };
        let branch = self.branch.clone();
        self.spawn_git(
            crate::metrics::GitJob::Ancestry,
            move || -> Result<Answers> {
                // An unknown revision triggers one fetch; still unknown, it is "not reached"
                // for now and asked again at the next observation. What the fetch brought is
                // handed to the judge first: the source may report a commit greenlight has not
                // seen yet, and it must be attributed before the app's state is judged.
                // A revision the clone knows but the judge was not handed yet (a fetch of the
                // timer's, its commits still queued behind this input) is handed over first
                // too: a revert of the commit among them must be known before it is judged.
                let mut answers = Vec::new();
                let mut fetched = None;
                for (c, r) in questions {
                    let mut v = repo.is_ancestor(&c, &r)?;
                    if fetched.is_none() && v.is_none() {
                        let tip = repo.fetch(&branch)?;
                        let commits = repo.commits_between(Some(&last), &tip)?;
                        fetched = Some((tip, commits));
                        v = repo.is_ancestor(&c, &r)?;
                    } else if fetched.is_none()
                        && !last.is_empty()
                        && r != last
                        && repo.is_ancestor(&r, &last)? != Some(true)
                        && let Some(local) =
                            repo.resolve(&format!("refs/remotes/origin/{branch}"))?
                        && local != last
                        && repo.is_ancestor(&r, &local)? == Some(true)
                    {
                        let commits = repo.commits_between(Some(&last), &local)?;
                        fetched = Some((local, commits));
                    }
                    answers.push(((c, r), v));
                }
                Ok(Answers {
                    answers,
                    fetched,
                    base: last,
                })
            },
            move |r| JobDone::Answered {
                job,
                answers: r.and_then(|x| x),
            },
        );
    }

    /// The cached answers to `questions`, or the questions still open.
    pub(super) fn answers(
        &self,
        questions: Vec<Question>,
        asked: bool,
    ) -> Result<Ancestry, Vec<Question>> {
        let mut answers = Ancestry::default();
        let mut open = Vec::new();
        for q in questions {
            match self.inputs.ancestry.get(&q) {
                Some(v) => {
                    answers.0.insert(q, *v);
                }
                None => open.push(q),
            }
        }
        if open.is_empty() || asked {
            Ok(answers)
        } else {
            Err(open)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(i: usize) -> Question {
        (format!("{i:040x}"), format!("{:040x}", i + 1))
    }

    /// A day of questions never grows the cache past its cap, and the newest answers stay.
    #[test]
    fn kept_answers_stay_bounded_and_keep_the_newest() {
        let mut a = KeptAnswers::default();
        for i in 0..KeptAnswers::CAP * 3 {
            a.insert(q(i), i.is_multiple_of(2));
            assert!(a.len() <= KeptAnswers::CAP, "{} answers kept", a.len());
        }
        let last = KeptAnswers::CAP * 3 - 1;
        assert_eq!(a.get(&q(last)), Some(&last.is_multiple_of(2)));
        assert_eq!(
            a.get(&q(last - KeptAnswers::CAP / 2)),
            Some(&last.is_multiple_of(2))
        );
        assert_eq!(a.get(&q(0)), None, "the oldest went");
        // Answering a kept question again does not push the others out.
        let before = a.len();
        a.insert(q(last), true);
        assert_eq!(a.len(), before);
    }
}
