//! The promotion gate (`docs/promote.md#gate`): a sans-IO machine beside the judge. It decides
//! what one `greenlight promote` run does next — commit the candidate, have the judge watch
//! it, run each check in the written order, promote in one commit, keep a failed candidate —
//! from what the caller reports back, and says every outcome in words of its own kind
//! ([`GateMessage`], worded in [`crate::reason`]). It never runs a check, reads git or waits:
//! the caller does that and reports each result as an [`Input`].
//!
//! A bypass is its own path from the first step: no candidate, no check, and a promotion whose
//! commit, messages and outcome say *bypassed*, never *passed*. The trailers its commits carry
//! are [`crate::trailers`]'.

use crate::config::ShortDeadline;
use crate::config::plan::compact_duration as human_duration;
use crate::trailers;
use greenlight_core::directive::Directive;
use greenlight_core::watch::State;

/// What a run promotes, as the configuration says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatePlan {
    /// The Application the live workload belongs to.
    pub app: String,
    /// The checks, in the written order (never reordered).
    pub checks: Vec<PlannedCheck>,
    /// The key of the watch trailer the promotion commit carries (the watchdog's
    /// `--trailer-key`), and its directive (`app=… deadline=… mode=…`), so the watchdog then
    /// proves the live rollout.
    pub watch_key: String,
    pub watch: Directive,
    /// What the run does when that deadline is shorter than the candidate's measured time to
    /// healthy plus margin ([`required_deadline_ms`]).
    pub short_deadline: ShortDeadline,
}

/// The shortest watch deadline for a promotion whose candidate took `healthy_after_ms` from its
/// commit to a healthy streak: that time and half of it again (the live rollout replaces more
/// pods than the candidate started, and Argo CD's sync comes first in both), in whole seconds.
pub fn required_deadline_ms(healthy_after_ms: i64) -> i64 {
    let ms = healthy_after_ms.max(0);
    let required = ms.saturating_add(ms / 2);
    required.saturating_add(999) / 1000 * 1000
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedCheck {
    pub name: String,
    /// `http`, `command`, `prometheus`, `analysis-template`.
    pub kind: String,
}

/// What the run starts from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Start {
    /// The candidate image, pinned by digest (`registry/app@sha256:…`).
    pub candidate: String,
    pub candidate_digest: String,
    /// The image the live manifest names, as written.
    pub live_image: String,
    /// The live digest: the manifest's own, or its tag resolved through the registry.
    pub live_digest: Option<String>,
    /// The live manifest names a mutable tag (rather than a digest).
    pub live_tag_is_mutable: bool,
    /// `--bypass-gate --reason <text>`.
    pub bypass: Option<String>,
    /// `promote self-test`: the candidate is made to fail on purpose; the run passes only if the
    /// gate blocks it, and it never promotes.
    pub self_test: bool,
    /// How the live image got there, when a gate bypass put it there: the commit and its reason.
    pub live_bypassed: Option<LiveBypass>,
    /// Other workloads' kept candidates past their retention, still in git and deployed.
    pub expired_kept: Vec<ExpiredKept>,
}

/// The bypass commit that put the live image there (no check ever ran on it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveBypass {
    pub commit: String,
    pub reason: String,
}

/// A kept candidate past its `kept-until`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpiredKept {
    /// Its file in the repository.
    pub path: String,
    /// Its `kept-until`, as written (RFC 3339).
    pub until: String,
}

/// What the caller reports back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// The candidate's manifests are pushed (the candidate Application deploys them).
    CandidateCommitted { commit: String },
    /// The judge's verdict on the candidate (reach, healthy, stable).
    CandidateJudged(CandidateVerdict),
    /// Check `index` ended.
    CheckFinished { index: usize, outcome: CheckOutcome },
    /// The live manifest changed in git since the run started: another promotion, a human.
    LiveManifestChanged { commit: String },
    /// The promotion commit is pushed (by pull request: the request merged, `commit` its
    /// merge).
    PromotionCommitted { commit: String },
    /// The promotion commit is on a branch of its own and a pull request proposes it; it has
    /// not merged (yet, or within the run's wait).
    PromotionProposed { url: String, commit: String },
    /// The promotion's pull request was closed unmerged.
    PromotionDeclined { url: String },
    /// The failed candidate is recorded in git for the retention window (or removed, after a
    /// self-test).
    CandidateSettled { commit: String },
    /// The run was told to stop (SIGTERM, SIGINT or SIGHUP): the effect under way was
    /// abandoned (a check's processes stopped).
    Cancelled { signal: Signal },
    /// How long the candidate took from its commit to the healthy streak that confirmed it
    /// (reported before `CandidateJudged(Ready)`).
    CandidateHealthyAfter { ms: i64 },
}

/// A signal that cancels a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    Interrupt,
    Terminate,
    Hangup,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
            Signal::Hangup => "SIGHUP",
        }
    }

    /// The exit code of a process this signal stopped, as a shell reports it: 128 + its number.
    pub fn exit_code(self) -> i32 {
        128 + match self {
            Signal::Hangup => 1,
            Signal::Interrupt => 2,
            Signal::Terminate => 15,
        }
    }
}

/// Where a cancelled run was when the signal came.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CancelledDuring {
    /// Before the candidate was committed: nothing of the run is in git.
    Start,
    /// The candidate was committed and being judged.
    Judging,
    /// Check `index` was running.
    Check { index: usize, name: String },
}

/// What a cancelled run left in git.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Left {
    /// Nothing: no candidate was committed.
    Nothing,
    /// The candidate was removed (it had no verdict yet, or it was the self-test's).
    Removed,
    /// The candidate stays deployed, kept for the retention window like a blocked one.
    Kept,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CandidateVerdict {
    /// CONFIRMED: reached, healthy, stable.
    Ready,
    /// Any other verdict, with the judge's reason; `pending` holds each distinct message the
    /// scheduler gave for the candidate's pods stuck Pending (short of capacity).
    NotReady {
        state: JudgedAs,
        reason: String,
        pending: Vec<String>,
    },
}

/// What the judge made of a candidate that is not ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JudgedAs {
    /// A verdict other than CONFIRMED (FAIL, INCONCLUSIVE, NOT_REACHED, …).
    Verdict(State),
    /// The candidate commit's watch trailer was rejected: no watch started.
    TrailerRejected,
    /// No verdict came within the run's limit for the candidate's judgement.
    NoVerdict,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckOutcome {
    /// The evidence, one line: the status and time, the exit code, the analysis figures.
    Passed {
        evidence: String,
    },
    Failed {
        evidence: String,
    },
    /// The check could not decide (an analysis Inconclusive or Error, a request that never
    /// answered): not a pass.
    Undecided {
        evidence: String,
    },
    /// Skipped by design (its condition does not apply): neither a failure nor a pass.
    Skipped {
        why: String,
    },
}

/// What the caller does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    Say(GateMessage),
    /// Write and push the candidate's manifests.
    CommitCandidate,
    /// Have the judge watch the candidate commit on the candidate Application.
    JudgeCandidate {
        commit: String,
    },
    RunCheck {
        index: usize,
    },
    /// One commit, pushed fast-forward: the live image becomes the candidate's digest, the
    /// candidate's manifests are removed, and these trailers record why.
    CommitPromotion {
        subject: String,
        trailers: Vec<(String, String)>,
    },
    /// Record the failed candidate for the retention window (it stays deployed), with why.
    KeepCandidate {
        trailers: Vec<(String, String)>,
        /// Scale it to zero replicas: its pods were Pending for lack of capacity, and kept
        /// running they would take the next GPU (or node) that frees up. Its evidence, the
        /// scheduler's words, stays in the commit's trailers.
        scale_to_zero: bool,
    },
    /// Remove the candidate (after a self-test, or a run cancelled before its verdict).
    RemoveCandidate,
    Done(Outcome),
}

/// How a run ended. [`Outcome::exit_code`]: 0 promoted, no-op or bypassed (and a self-test the
/// gate blocked); 1 blocked, aborted, or a self-test the gate let through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Promoted {
        commit: String,
    },
    Bypassed {
        commit: String,
    },
    /// The gate passed (or was bypassed) and a pull request proposes the promotion: nothing
    /// is on the branch yet.
    Proposed {
        url: String,
        commit: String,
        bypassed: bool,
    },
    NoOp,
    /// The live manifest names a mutable tag that now resolves to the candidate's digest: the
    /// pods may still run older content.
    SuspiciousNoOp,
    Blocked(Blocked),
    /// The live manifest changed in git since the run started.
    Aborted {
        commit: String,
    },
    SelfTestBlocked(Blocked),
    /// The deliberately failing candidate would have been promoted: the gate is broken.
    SelfTestLetThrough,
    /// A signal stopped the run; nothing was promoted.
    Cancelled {
        signal: Signal,
        left: Left,
    },
}

impl Outcome {
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Promoted { .. }
            | Outcome::Bypassed { .. }
            | Outcome::Proposed { .. }
            | Outcome::NoOp
            | Outcome::SuspiciousNoOp
            | Outcome::SelfTestBlocked(_) => 0,
            Outcome::Blocked(_) | Outcome::Aborted { .. } | Outcome::SelfTestLetThrough => 1,
            Outcome::Cancelled { signal, .. } => signal.exit_code(),
        }
    }
}

/// Why the gate blocked a candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// The candidate never became ready; with pods Pending, it is short of capacity.
    CandidateNotReady {
        state: JudgedAs,
        reason: String,
        pending: Vec<String>,
    },
    CheckFailed {
        index: usize,
        name: String,
        kind: String,
        evidence: String,
    },
    CheckUndecided {
        index: usize,
        name: String,
        kind: String,
        evidence: String,
    },
    /// Every check passed, but the promotion's watch deadline is shorter than the candidate's
    /// measured time to healthy plus margin, and the config says to refuse rather than raise.
    WatchDeadlineShort {
        configured_ms: i64,
        measured_ms: i64,
        required_ms: i64,
    },
    /// The promotion's pull request was closed without a merge.
    PullRequestClosed { url: String },
}

/// What a run says as it goes (the first line of each is distinct; see `reason.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GateMessage {
    Started {
        app: String,
        candidate: String,
        checks: usize,
    },
    NoOp {
        digest: String,
    },
    SuspiciousNoOp {
        live_image: String,
        digest: String,
    },
    CandidateCommitted {
        commit: String,
    },
    CandidateReady,
    CheckPassed {
        index: usize,
        name: String,
        kind: String,
        evidence: String,
    },
    CheckSkipped {
        index: usize,
        name: String,
        why: String,
    },
    Blocked(Blocked),
    /// A pull request proposes the promotion (`bypass`: the gate was bypassed).
    Proposed {
        app: String,
        candidate: String,
        url: String,
        bypass: Option<String>,
    },
    Aborted {
        commit: String,
    },
    Promoted {
        app: String,
        candidate: String,
        commit: String,
    },
    BypassRequested {
        reason: String,
    },
    /// A no-op on an image a bypass put live: nothing to promote, and nothing ever checked it.
    NoOpAfterBypass {
        digest: String,
        commit: String,
        reason: String,
    },
    /// The live image came in by a bypass; this run checks the candidate only.
    LiveWasBypassed {
        commit: String,
        reason: String,
    },
    /// Kept candidates past their retention pile up: nothing runs `promote gc`.
    KeptCandidatesExpired {
        expired: Vec<ExpiredKept>,
    },
    Bypassed {
        app: String,
        candidate: String,
        commit: String,
        reason: String,
    },
    CandidateKept,
    /// The promotion's watch deadline was shorter than the candidate's measured time to healthy
    /// plus margin: the promotion commit carries the raised one.
    WatchDeadlineRaised {
        configured_ms: i64,
        measured_ms: i64,
        raised_ms: i64,
    },
    /// A signal stopped the run at this point.
    Cancelled {
        signal: Signal,
        during: CancelledDuring,
    },
    /// What the cancelled run left, once settled.
    CancelSettled {
        signal: Signal,
        left: Left,
    },
    SelfTestBlocked,
    SelfTestLetThrough,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    /// Waiting for the candidate commit.
    Committing,
    /// Waiting for the judge's verdict on the candidate.
    Judging,
    /// Waiting for check `i`.
    Checking(usize),
    /// Waiting for the promotion commit.
    Promoting,
    /// Waiting for the failed candidate to be recorded (or removed), then done with this.
    Settling(Outcome),
    Done,
}

/// One run of the gate.
#[derive(Clone, Debug)]
pub struct Gate {
    plan: GatePlan,
    start: Start,
    step: Step,
    /// The evidence of each check so far, in order.
    evidence: Vec<(String, String)>,
    /// The candidate's measured time to healthy, once reported.
    healthy_after_ms: Option<i64>,
}

impl Gate {
    /// A run, and what to do first.
    pub fn start(plan: GatePlan, start: Start) -> (Gate, Vec<Effect>) {
        let mut gate = Gate {
            plan,
            start,
            step: Step::Committing,
            evidence: Vec::new(),
            healthy_after_ms: None,
        };
        let out = gate.begin();
        (gate, out)
    }

    pub fn is_done(&self) -> bool {
        self.step == Step::Done
    }

    fn begin(&mut self) -> Vec<Effect> {
        let s = &self.start;
        // Diagnostics first, whatever the run does next.
        let mut said = Vec::new();
        if !s.expired_kept.is_empty() {
            said.push(Effect::Say(GateMessage::KeptCandidatesExpired {
                expired: s.expired_kept.clone(),
            }));
        }
        let mut out = self.decide();
        said.append(&mut out);
        said
    }

    fn decide(&mut self) -> Vec<Effect> {
        let s = &self.start;
        if let Some(reason) = s.bypass.clone() {
            self.step = Step::Promoting;
            return vec![
                Effect::Say(GateMessage::BypassRequested {
                    reason: reason.clone(),
                }),
                Effect::CommitPromotion {
                    subject: format!(
                        "promote {}: {} (GATE BYPASSED, no check ran)",
                        self.plan.app, s.candidate
                    ),
                    trailers: vec![
                        trailers::bypassed(&reason),
                        trailers::candidate(&s.candidate),
                        (self.plan.watch_key.clone(), self.plan.watch.render()),
                    ],
                },
            ];
        }
        if !s.self_test && s.live_digest.as_deref() == Some(s.candidate_digest.as_str()) {
            self.step = Step::Done;
            let (msg, outcome) = if let Some(b) = &s.live_bypassed {
                (
                    GateMessage::NoOpAfterBypass {
                        digest: s.candidate_digest.clone(),
                        commit: b.commit.clone(),
                        reason: b.reason.clone(),
                    },
                    Outcome::NoOp,
                )
            } else if s.live_tag_is_mutable {
                (
                    GateMessage::SuspiciousNoOp {
                        live_image: s.live_image.clone(),
                        digest: s.candidate_digest.clone(),
                    },
                    Outcome::SuspiciousNoOp,
                )
            } else {
                (
                    GateMessage::NoOp {
                        digest: s.candidate_digest.clone(),
                    },
                    Outcome::NoOp,
                )
            };
            return vec![Effect::Say(msg), Effect::Done(outcome)];
        }
        let mut out = vec![Effect::Say(GateMessage::Started {
            app: self.plan.app.clone(),
            candidate: s.candidate.clone(),
            checks: self.plan.checks.len(),
        })];
        if let Some(b) = &s.live_bypassed
            && !s.self_test
        {
            out.push(Effect::Say(GateMessage::LiveWasBypassed {
                commit: b.commit.clone(),
                reason: b.reason.clone(),
            }));
        }
        out.push(Effect::CommitCandidate);
        out
    }

    /// The next step after `input`. An input the current step does not wait for changes
    /// nothing (a late or repeated report), except that a change of the live manifest aborts
    /// any run that has not promoted yet.
    pub fn step(&mut self, input: Input) -> Vec<Effect> {
        match (self.step.clone(), input) {
            (step, Input::Cancelled { signal }) => self.cancel(step, signal),
            (Step::Judging, Input::CandidateHealthyAfter { ms }) => {
                self.healthy_after_ms = Some(ms);
                Vec::new()
            }
            (Step::Done | Step::Settling(_), Input::LiveManifestChanged { .. }) => Vec::new(),
            (Step::Promoting, Input::LiveManifestChanged { .. }) if self.start.bypass.is_some() => {
                Vec::new()
            }
            (_, Input::LiveManifestChanged { commit }) => {
                let outcome = Outcome::Aborted {
                    commit: commit.clone(),
                };
                let mut out = vec![Effect::Say(GateMessage::Aborted { commit })];
                out.extend(self.settle(outcome));
                out
            }
            (Step::Committing, Input::CandidateCommitted { commit }) => {
                self.step = Step::Judging;
                vec![
                    Effect::Say(GateMessage::CandidateCommitted {
                        commit: commit.clone(),
                    }),
                    Effect::JudgeCandidate { commit },
                ]
            }
            (Step::Judging, Input::CandidateJudged(verdict)) => match verdict {
                CandidateVerdict::Ready => {
                    let mut out = vec![Effect::Say(GateMessage::CandidateReady)];
                    out.extend(self.next_check(0));
                    out
                }
                CandidateVerdict::NotReady {
                    state,
                    reason,
                    pending,
                } => self.block(Blocked::CandidateNotReady {
                    state,
                    reason,
                    pending,
                }),
            },
            (Step::Checking(i), Input::CheckFinished { index, outcome }) if index == i => {
                let check = self.plan.checks[i].clone();
                match outcome {
                    CheckOutcome::Passed { evidence } => {
                        self.evidence.push(trailers::check(
                            i,
                            &check.name,
                            &check.kind,
                            "passed",
                            &evidence,
                        ));
                        let mut out = vec![Effect::Say(GateMessage::CheckPassed {
                            index: i,
                            name: check.name,
                            kind: check.kind,
                            evidence,
                        })];
                        out.extend(self.next_check(i + 1));
                        out
                    }
                    CheckOutcome::Skipped { why } => {
                        self.evidence.push(trailers::check(
                            i,
                            &check.name,
                            &check.kind,
                            "skipped by design",
                            &why,
                        ));
                        let mut out = vec![Effect::Say(GateMessage::CheckSkipped {
                            index: i,
                            name: check.name,
                            why,
                        })];
                        out.extend(self.next_check(i + 1));
                        out
                    }
                    CheckOutcome::Failed { evidence } => self.block(Blocked::CheckFailed {
                        index: i,
                        name: check.name,
                        kind: check.kind,
                        evidence,
                    }),
                    CheckOutcome::Undecided { evidence } => self.block(Blocked::CheckUndecided {
                        index: i,
                        name: check.name,
                        kind: check.kind,
                        evidence,
                    }),
                }
            }
            (Step::Promoting, Input::PromotionCommitted { commit }) => {
                self.step = Step::Done;
                let (msg, outcome) = match &self.start.bypass {
                    Some(reason) => (
                        GateMessage::Bypassed {
                            app: self.plan.app.clone(),
                            candidate: self.start.candidate.clone(),
                            commit: commit.clone(),
                            reason: reason.clone(),
                        },
                        Outcome::Bypassed { commit },
                    ),
                    None => (
                        GateMessage::Promoted {
                            app: self.plan.app.clone(),
                            candidate: self.start.candidate.clone(),
                            commit: commit.clone(),
                        },
                        Outcome::Promoted { commit },
                    ),
                };
                vec![Effect::Say(msg), Effect::Done(outcome)]
            }
            (Step::Promoting, Input::PromotionProposed { url, commit }) => {
                self.step = Step::Done;
                let msg = GateMessage::Proposed {
                    app: self.plan.app.clone(),
                    candidate: self.start.candidate.clone(),
                    url: url.clone(),
                    bypass: self.start.bypass.clone(),
                };
                let outcome = Outcome::Proposed {
                    url,
                    commit,
                    bypassed: self.start.bypass.is_some(),
                };
                vec![Effect::Say(msg), Effect::Done(outcome)]
            }
            (Step::Promoting, Input::PromotionDeclined { url }) => {
                let why = Blocked::PullRequestClosed { url };
                if self.start.bypass.is_some() {
                    // No candidate to keep: a bypass made none.
                    self.step = Step::Done;
                    return vec![
                        Effect::Say(GateMessage::Blocked(why.clone())),
                        Effect::Done(Outcome::Blocked(why)),
                    ];
                }
                self.block(why)
            }
            (Step::Settling(outcome), Input::CandidateSettled { .. }) => {
                self.step = Step::Done;
                let msg = match &outcome {
                    Outcome::SelfTestBlocked(_) => GateMessage::SelfTestBlocked,
                    Outcome::SelfTestLetThrough => GateMessage::SelfTestLetThrough,
                    Outcome::Cancelled { signal, left } => GateMessage::CancelSettled {
                        signal: *signal,
                        left: left.clone(),
                    },
                    _ => GateMessage::CandidateKept,
                };
                vec![Effect::Say(msg), Effect::Done(outcome)]
            }
            _ => Vec::new(),
        }
    }

    /// A signal: settle what the run put in git and end. A run that is promoting or settling
    /// already ends by itself (its commit is one push).
    fn cancel(&mut self, step: Step, signal: Signal) -> Vec<Effect> {
        let (during, left) = match step {
            Step::Done | Step::Promoting | Step::Settling(_) => return Vec::new(),
            Step::Committing => (CancelledDuring::Start, Left::Nothing),
            Step::Judging => (CancelledDuring::Judging, Left::Removed),
            Step::Checking(index) => (
                CancelledDuring::Check {
                    index,
                    name: self.plan.checks[index].name.clone(),
                },
                if self.start.self_test {
                    Left::Removed
                } else {
                    Left::Kept
                },
            ),
        };
        let outcome = Outcome::Cancelled {
            signal,
            left: left.clone(),
        };
        let mut out = vec![Effect::Say(GateMessage::Cancelled {
            signal,
            during: during.clone(),
        })];
        match left {
            Left::Nothing => {
                self.step = Step::Done;
                out.push(Effect::Done(outcome));
            }
            Left::Removed => {
                self.step = Step::Settling(outcome);
                out.push(Effect::RemoveCandidate);
            }
            Left::Kept => {
                self.step = Step::Settling(outcome);
                out.push(Effect::KeepCandidate {
                    trailers: vec![
                        trailers::cancelled(signal.name(), &crate::reason::during(&during)),
                        trailers::candidate(&self.start.candidate),
                    ],
                    scale_to_zero: false,
                });
            }
        }
        out
    }

    /// Check `i`, or — all passed — the promotion (a self-test's candidate must never get here).
    fn next_check(&mut self, i: usize) -> Vec<Effect> {
        if i < self.plan.checks.len() {
            self.step = Step::Checking(i);
            return vec![Effect::RunCheck { index: i }];
        }
        if self.start.self_test {
            return self.settle(Outcome::SelfTestLetThrough);
        }
        let mut out = Vec::new();
        let mut watch = self.plan.watch.clone();
        let mut raised = None;
        if let Some(measured_ms) = self.healthy_after_ms {
            let required_ms = required_deadline_ms(measured_ms);
            let configured_ms = watch.deadline_ms;
            if configured_ms < required_ms {
                match self.plan.short_deadline {
                    ShortDeadline::Refuse => {
                        return self.block(Blocked::WatchDeadlineShort {
                            configured_ms,
                            measured_ms,
                            required_ms,
                        });
                    }
                    ShortDeadline::Raise => {
                        out.push(Effect::Say(GateMessage::WatchDeadlineRaised {
                            configured_ms,
                            measured_ms,
                            raised_ms: required_ms,
                        }));
                        raised = Some(trailers::deadline_raised(
                            &human_duration(configured_ms),
                            &human_duration(required_ms),
                            &human_duration(measured_ms),
                        ));
                        watch.deadline_ms = required_ms;
                    }
                }
            }
        }
        self.step = Step::Promoting;
        let mut trailers = vec![
            trailers::passed(self.plan.checks.len()),
            trailers::candidate(&self.start.candidate),
        ];
        trailers.extend(self.evidence.iter().cloned());
        trailers.extend(raised);
        trailers.push((self.plan.watch_key.clone(), watch.render()));
        out.push(Effect::CommitPromotion {
            subject: format!(
                "promote {}: {} (gate passed)",
                self.plan.app, self.start.candidate
            ),
            trailers,
        });
        out
    }

    fn block(&mut self, why: Blocked) -> Vec<Effect> {
        let mut out = vec![Effect::Say(GateMessage::Blocked(why.clone()))];
        let outcome = if self.start.self_test {
            Outcome::SelfTestBlocked(why)
        } else {
            Outcome::Blocked(why)
        };
        out.extend(self.settle(outcome));
        out
    }

    /// Keep the candidate for the retention window — or remove it after a self-test — then end
    /// with `outcome`.
    fn settle(&mut self, outcome: Outcome) -> Vec<Effect> {
        let committed = !matches!(self.step, Step::Committing);
        self.step = Step::Settling(outcome.clone());
        if !committed {
            // Nothing of the candidate is in git yet: nothing to keep or remove.
            self.step = Step::Done;
            return vec![Effect::Done(outcome)];
        }
        if self.start.self_test {
            return vec![Effect::RemoveCandidate];
        }
        let why = match &outcome {
            Outcome::Blocked(b) => crate::reason::gate_blocked_summary(b),
            Outcome::Aborted { commit } => format!("aborted: the live manifest changed ({commit})"),
            _ => String::new(),
        };
        let scale_to_zero = matches!(
            &outcome,
            Outcome::Blocked(Blocked::CandidateNotReady { pending, .. }) if !pending.is_empty()
        );
        vec![Effect::KeepCandidate {
            trailers: vec![
                trailers::kept(&why),
                trailers::candidate(&self.start.candidate),
            ],
            scale_to_zero,
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(checks: &[(&str, &str)]) -> GatePlan {
        GatePlan {
            app: "llm".into(),
            checks: checks
                .iter()
                .map(|(n, k)| PlannedCheck {
                    name: n.to_string(),
                    kind: k.to_string(),
                })
                .collect(),
            watch_key: "Nav-Watchdog".into(),
            watch: Directive::parse("Nav-Watchdog", "app=llm deadline=900 mode=arm").unwrap(),
            short_deadline: ShortDeadline::Raise,
        }
    }

    fn start() -> Start {
        Start {
            candidate: "registry.local/llm@sha256:bbb".into(),
            candidate_digest: "sha256:bbb".into(),
            live_image: "registry.local/llm@sha256:aaa".into(),
            live_digest: Some("sha256:aaa".into()),
            live_tag_is_mutable: false,
            bypass: None,
            self_test: false,
            live_bypassed: None,
            expired_kept: Vec::new(),
        }
    }

    fn said(effects: &[Effect]) -> Vec<String> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Say(m) => Some(m.to_string()),
                _ => None,
            })
            .collect()
    }

    /// Whether `text` says "passed" as a word ("bypassed" does not).
    fn says_passed(text: &str) -> bool {
        text.split(|c: char| !c.is_alphanumeric())
            .any(|w| w.eq_ignore_ascii_case("passed") || w.eq_ignore_ascii_case("verified"))
    }

    fn done(effects: &[Effect]) -> Option<&Outcome> {
        effects.iter().find_map(|e| match e {
            Effect::Done(o) => Some(o),
            _ => None,
        })
    }

    fn two_checks() -> (Gate, Vec<Effect>) {
        Gate::start(
            plan(&[("smoke", "http"), ("errors", "prometheus")]),
            start(),
        )
    }

    fn passed_all(g: &mut Gate) -> Vec<Effect> {
        g.step(Input::CandidateCommitted {
            commit: "c0ffee".into(),
        });
        g.step(Input::CandidateHealthyAfter { ms: 700_000 });
        g.step(Input::CandidateJudged(CandidateVerdict::Ready));
        g.step(Input::CheckFinished {
            index: 0,
            outcome: CheckOutcome::Passed {
                evidence: "200".into(),
            },
        })
    }

    /// By pull request: an open request ends `proposed` (exit 0, never "promoted"); one closed
    /// unmerged blocks and keeps the candidate; a bypass's closed request has no candidate to
    /// keep.
    #[test]
    fn a_proposal_ends_proposed_and_a_closed_one_blocks_keeping_the_candidate() {
        let (mut g, _) = Gate::start(plan(&[("smoke", "http")]), start());
        passed_all(&mut g);
        let out = g.step(Input::PromotionProposed {
            url: "https://forge/acme/deploy/pull/7".into(),
            commit: "p7".into(),
        });
        let outcome = done(&out).unwrap();
        assert_eq!(
            outcome,
            &Outcome::Proposed {
                url: "https://forge/acme/deploy/pull/7".into(),
                commit: "p7".into(),
                bypassed: false
            }
        );
        assert_eq!(outcome.exit_code(), 0);
        let words = said(&out).join("\n");
        assert!(words.contains("nothing is live until it merges"), "{words}");
        assert!(!words.contains("promoted"), "{words}");

        let (mut g, _) = Gate::start(plan(&[("smoke", "http")]), start());
        passed_all(&mut g);
        let out = g.step(Input::PromotionDeclined {
            url: "https://forge/pull/8".into(),
        });
        assert!(
            matches!(out.last(), Some(Effect::KeepCandidate { trailers, .. })
                if trailers[0].1.contains("https://forge/pull/8 was closed unmerged")),
            "{out:?}"
        );
        let out = g.step(Input::CandidateSettled {
            commit: "k8".into(),
        });
        let outcome = done(&out).unwrap();
        assert!(
            matches!(outcome, Outcome::Blocked(Blocked::PullRequestClosed { url }) if url == "https://forge/pull/8")
        );
        assert_eq!(outcome.exit_code(), 1);

        let mut bypass = start();
        bypass.bypass = Some("incident 42".into());
        let (mut g, first) = Gate::start(plan(&[("smoke", "http")]), bypass);
        assert!(
            first
                .iter()
                .any(|e| matches!(e, Effect::CommitPromotion { .. })),
            "{first:?}"
        );
        let out = g.step(Input::PromotionProposed {
            url: "https://forge/pull/9".into(),
            commit: "p9".into(),
        });
        let words = said(&out).join("\n");
        assert!(
            words.starts_with("BYPASSED, NO CHECK RAN") && !says_passed(&words),
            "{words}"
        );
        let (mut g, _) = Gate::start(plan(&[("smoke", "http")]), {
            let mut b = start();
            b.bypass = Some("incident 42".into());
            b
        });
        let out = g.step(Input::PromotionDeclined {
            url: "https://forge/pull/10".into(),
        });
        assert!(
            !out.iter()
                .any(|e| matches!(e, Effect::KeepCandidate { .. })),
            "{out:?}"
        );
        assert!(matches!(
            done(&out),
            Some(Outcome::Blocked(Blocked::PullRequestClosed { .. }))
        ));
    }

    #[test]
    fn a_watch_deadline_shorter_than_the_candidates_start_is_raised_or_refused() {
        assert_eq!(required_deadline_ms(700_000), 1_050_000);
        assert_eq!(required_deadline_ms(1_001), 2_000);
        // 900 s configured, the candidate took 11m40s: raised to 17m30s, saying so.
        let (mut g, _) = Gate::start(plan(&[("smoke", "http")]), start());
        let out = passed_all(&mut g);
        assert_eq!(
            said(&out),
            [
                "check 1 smoke (http) passed: 200",
                "watch deadline raised to 17m30s for the promotion: the candidate took 11m40s to become healthy, and promotion.watch.deadline 15m would let the watchdog judge the live rollout before it could be healthy"
            ]
        );
        let Some(Effect::CommitPromotion { trailers, .. }) = out.last() else {
            panic!("{out:?}");
        };
        assert!(trailers.contains(&(
            "Greenlight-Watch-Deadline".to_string(),
            "raised from 15m to 17m30s: the candidate took 11m40s to become healthy".to_string()
        )));
        assert_eq!(
            trailers.last(),
            Some(&(
                "Nav-Watchdog".to_string(),
                "app=llm deadline=1050s mode=arm expect=Healthy".to_string()
            ))
        );
        // Refused: blocked, the candidate kept, never promoted.
        let mut refusing = plan(&[("smoke", "http")]);
        refusing.short_deadline = ShortDeadline::Refuse;
        let (mut g, _) = Gate::start(refusing, start());
        let out = passed_all(&mut g);
        assert!(
            matches!(out.last(), Some(Effect::KeepCandidate { .. })),
            "{out:?}"
        );
        assert!(said(&out)[1].starts_with("watch deadline too short, promotion blocked"));
        // A deadline long enough is left as it is.
        let mut long = plan(&[("smoke", "http")]);
        long.watch.deadline_ms = 1_050_000;
        let (mut g, _) = Gate::start(long, start());
        let out = passed_all(&mut g);
        let Some(Effect::CommitPromotion { trailers, .. }) = out.last() else {
            panic!("{out:?}");
        };
        assert!(
            !trailers
                .iter()
                .any(|(k, _)| k == "Greenlight-Watch-Deadline")
        );
    }

    #[test]
    fn a_signal_settles_what_the_run_put_in_git_and_never_promotes() {
        let cancel = |g: &mut Gate, signal| g.step(Input::Cancelled { signal });
        let committed = Input::CandidateCommitted {
            commit: "c0ffee".into(),
        };
        // Before the candidate commit: nothing to settle.
        let (mut g, _) = two_checks();
        let out = cancel(&mut g, Signal::Hangup);
        assert_eq!(
            done(&out),
            Some(&Outcome::Cancelled {
                signal: Signal::Hangup,
                left: Left::Nothing
            })
        );
        assert_eq!(done(&out).unwrap().exit_code(), 129);
        // While the candidate is judged: removed.
        let (mut g, _) = two_checks();
        g.step(committed.clone());
        let out = cancel(&mut g, Signal::Interrupt);
        assert_eq!(out.last(), Some(&Effect::RemoveCandidate));
        let out = g.step(Input::CandidateSettled {
            commit: "d00d".into(),
        });
        assert_eq!(
            done(&out),
            Some(&Outcome::Cancelled {
                signal: Signal::Interrupt,
                left: Left::Removed
            })
        );
        assert!(said(&out)[0].starts_with("CANCELLED by SIGINT, nothing promoted"));
        // During a check: kept, with why in its trailer; a second signal changes nothing.
        let (mut g, _) = two_checks();
        g.step(committed.clone());
        g.step(Input::CandidateJudged(CandidateVerdict::Ready));
        let out = cancel(&mut g, Signal::Terminate);
        assert_eq!(
            said(&out),
            [
                "cancelled by SIGTERM during check 1 smoke: its processes are stopped; nothing is promoted"
            ]
        );
        let Some(Effect::KeepCandidate { trailers, .. }) = out.last() else {
            panic!("{out:?}");
        };
        assert_eq!(
            trailers[0].1,
            "cancelled by SIGTERM during check 1 smoke, candidate kept"
        );
        assert!(cancel(&mut g, Signal::Interrupt).is_empty());
        let out = g.step(Input::CandidateSettled {
            commit: "d00d".into(),
        });
        assert_eq!(done(&out).unwrap().exit_code(), 143);
        assert!(
            !out.iter()
                .any(|e| matches!(e, Effect::CommitPromotion { .. }))
        );
        // Promoting: its one push ends the run by itself.
        let (mut g, _) = Gate::start(plan(&[("smoke", "http")]), start());
        g.step(committed);
        g.step(Input::CandidateJudged(CandidateVerdict::Ready));
        g.step(Input::CheckFinished {
            index: 0,
            outcome: CheckOutcome::Passed {
                evidence: "200".into(),
            },
        });
        assert!(cancel(&mut g, Signal::Terminate).is_empty());
    }

    #[test]
    fn a_pass_runs_every_check_in_order_then_promotes_in_one_commit_with_the_evidence() {
        let (mut g, out) = two_checks();
        assert_eq!(out.last(), Some(&Effect::CommitCandidate));
        let out = g.step(Input::CandidateCommitted {
            commit: "c1".into(),
        });
        assert_eq!(
            out.last(),
            Some(&Effect::JudgeCandidate {
                commit: "c1".into()
            })
        );
        let out = g.step(Input::CandidateJudged(CandidateVerdict::Ready));
        assert_eq!(out.last(), Some(&Effect::RunCheck { index: 0 }));
        // A report for another check than the one running changes nothing.
        assert!(
            g.step(Input::CheckFinished {
                index: 1,
                outcome: CheckOutcome::Passed {
                    evidence: "x".into()
                }
            })
            .is_empty()
        );
        let out = g.step(Input::CheckFinished {
            index: 0,
            outcome: CheckOutcome::Passed {
                evidence: "200 in 12ms".into(),
            },
        });
        assert_eq!(out.last(), Some(&Effect::RunCheck { index: 1 }));
        let out = g.step(Input::CheckFinished {
            index: 1,
            outcome: CheckOutcome::Passed {
                evidence: "Successful: 5 of 5 measurements".into(),
            },
        });
        let Some(Effect::CommitPromotion { subject, trailers }) = out.last() else {
            panic!("{out:?}");
        };
        assert_eq!(
            subject,
            "promote llm: registry.local/llm@sha256:bbb (gate passed)"
        );
        let keys: Vec<&str> = trailers.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                trailers::GATE,
                trailers::CANDIDATE,
                trailers::CHECK,
                trailers::CHECK,
                "Nav-Watchdog"
            ]
        );
        assert_eq!(trailers[2].1, "1 smoke (http) passed: 200 in 12ms");
        assert_eq!(
            trailers[4].1,
            "app=llm deadline=900s mode=arm expect=Healthy"
        );
        let out = g.step(Input::PromotionCommitted {
            commit: "p1".into(),
        });
        assert_eq!(
            done(&out),
            Some(&Outcome::Promoted {
                commit: "p1".into()
            })
        );
        assert_eq!(done(&out).unwrap().exit_code(), 0);
        assert!(g.is_done());
    }

    #[test]
    fn the_first_failure_stops_the_run_and_keeps_the_candidate() {
        let (mut g, _) = two_checks();
        g.step(Input::CandidateCommitted {
            commit: "c1".into(),
        });
        g.step(Input::CandidateJudged(CandidateVerdict::Ready));
        let out = g.step(Input::CheckFinished {
            index: 0,
            outcome: CheckOutcome::Failed {
                evidence: "503 in 8ms".into(),
            },
        });
        assert!(
            !out.iter()
                .any(|e| matches!(e, Effect::RunCheck { .. } | Effect::CommitPromotion { .. }))
        );
        let Some(Effect::KeepCandidate { trailers, .. }) = out.last() else {
            panic!("{out:?}")
        };
        assert!(
            trailers[0].1.starts_with("blocked, candidate kept: "),
            "{trailers:?}"
        );
        let out = g.step(Input::CandidateSettled {
            commit: "k1".into(),
        });
        let outcome = done(&out).unwrap();
        assert!(matches!(
            outcome,
            Outcome::Blocked(Blocked::CheckFailed { index: 0, .. })
        ));
        assert_eq!(outcome.exit_code(), 1);
    }

    #[test]
    fn an_undecided_check_is_no_pass_and_a_skipped_one_is_neither() {
        let (mut g, _) = two_checks();
        g.step(Input::CandidateCommitted {
            commit: "c1".into(),
        });
        g.step(Input::CandidateJudged(CandidateVerdict::Ready));
        let out = g.step(Input::CheckFinished {
            index: 0,
            outcome: CheckOutcome::Skipped {
                why: "no HTTP port".into(),
            },
        });
        assert_eq!(out.last(), Some(&Effect::RunCheck { index: 1 }));
        assert!(said(&out)[0].contains("skipped"), "{:?}", said(&out));
        let out = g.step(Input::CheckFinished {
            index: 1,
            outcome: CheckOutcome::Undecided {
                evidence: "Inconclusive".into(),
            },
        });
        assert!(matches!(out.last(), Some(Effect::KeepCandidate { .. })));
    }

    #[test]
    fn a_candidate_that_never_becomes_ready_is_blocked_before_any_check() {
        let (mut g, _) = two_checks();
        g.step(Input::CandidateCommitted {
            commit: "c1".into(),
        });
        let out = g.step(Input::CandidateJudged(CandidateVerdict::NotReady {
            state: JudgedAs::Verdict(State::Fail),
            reason: "not healthy within 15m after reach".into(),
            pending: vec!["0/3 nodes are available: 3 Insufficient nvidia.com/gpu.".into()],
        }));
        assert!(!out.iter().any(|e| matches!(e, Effect::RunCheck { .. })));
        let words = said(&out).join("\n");
        assert!(words.contains("short of capacity"), "{words}");
        assert!(words.contains("Insufficient nvidia.com/gpu"), "{words}");
    }

    #[test]
    fn a_live_image_a_bypass_put_there_is_named_and_its_no_op_is_not_silent() {
        let bypass = LiveBypass {
            commit: "abc1234".into(),
            reason: "hotfix at 3am".into(),
        };
        // The same digest again: still a no-op (nothing to promote), but it says that no
        // check ever ran on what is live, and never that anything passed.
        let mut s = start();
        s.live_digest = Some(s.candidate_digest.clone());
        s.live_bypassed = Some(bypass.clone());
        let (_, out) = Gate::start(plan(&[("smoke", "http")]), s);
        assert_eq!(done(&out), Some(&Outcome::NoOp));
        let words = said(&out).join("\n");
        assert!(
            words.starts_with("no-op on a bypassed image: ")
                && words.contains("GATE BYPASS put it there in abc1234 (hotfix at 3am)")
                && !says_passed(&words),
            "{words}"
        );
        // A new candidate: the run goes on, after a note that live came in by a bypass.
        let mut s = start();
        s.live_bypassed = Some(bypass);
        let (_, out) = Gate::start(plan(&[("smoke", "http")]), s);
        assert_eq!(out.last(), Some(&Effect::CommitCandidate));
        let words = said(&out);
        assert!(words[0].starts_with("promotion of "), "{words:?}");
        assert!(
            words[1].starts_with("note, live came in by a GATE BYPASS in abc1234"),
            "{words:?}"
        );
    }

    #[test]
    fn expired_kept_candidates_are_a_warning_before_whatever_the_run_does() {
        let expired = vec![
            ExpiredKept {
                path: "deploy/candidates/api-candidate.yaml".into(),
                until: "2026-11-02T10:00:00Z".into(),
            },
            ExpiredKept {
                path: "deploy/candidates/llm-candidate.yaml".into(),
                until: "2026-10-30T08:00:00Z".into(),
            },
        ];
        for no_op in [false, true] {
            let mut s = start();
            s.expired_kept = expired.clone();
            if no_op {
                s.live_digest = Some(s.candidate_digest.clone());
            }
            let (_, out) = Gate::start(plan(&[("smoke", "http")]), s);
            let words = said(&out);
            assert!(
                words[0].starts_with("warning, kept candidates pile up: 2 candidate(s)")
                    && words[0].contains("the oldest kept until 2026-10-30T08:00:00Z")
                    && words[0].contains("greenlight promote gc"),
                "{words:?}"
            );
            assert_eq!(words.len(), 2, "{words:?}");
        }
    }

    #[test]
    fn a_candidate_equal_to_live_is_a_silent_no_op_and_a_moved_mutable_tag_is_suspicious() {
        let (g, out) = Gate::start(
            plan(&[("smoke", "http")]),
            Start {
                live_digest: Some("sha256:bbb".into()),
                ..start()
            },
        );
        assert!(g.is_done());
        assert_eq!(out.len(), 2, "one line, then done: {out:?}");
        assert_eq!(done(&out), Some(&Outcome::NoOp));
        let (_, out) = Gate::start(
            plan(&[("smoke", "http")]),
            Start {
                live_image: "registry.local/llm:main".into(),
                live_digest: Some("sha256:bbb".into()),
                live_tag_is_mutable: true,
                ..start()
            },
        );
        assert_eq!(done(&out), Some(&Outcome::SuspiciousNoOp));
        assert!(said(&out)[0].contains("older content"), "{:?}", said(&out));
    }

    #[test]
    fn a_bypass_promotes_without_candidate_or_check_and_never_says_passed() {
        let (mut g, out) = Gate::start(
            plan(&[("smoke", "http")]),
            Start {
                bypass: Some("hotfix for INC-42".into()),
                ..start()
            },
        );
        assert!(
            !out.iter()
                .any(|e| matches!(e, Effect::CommitCandidate | Effect::RunCheck { .. }))
        );
        let Some(Effect::CommitPromotion { subject, trailers }) = out.last() else {
            panic!("{out:?}")
        };
        assert!(subject.contains("GATE BYPASSED"), "{subject}");
        assert!(
            !says_passed(subject) && trailers.iter().all(|(_, v)| !says_passed(v)),
            "{subject} {trailers:?}"
        );
        assert_eq!(
            trailers[0],
            (
                trailers::GATE.to_string(),
                "bypassed, no check ran: hotfix for INC-42".to_string()
            )
        );
        let out = g.step(Input::PromotionCommitted {
            commit: "p1".into(),
        });
        assert_eq!(
            done(&out),
            Some(&Outcome::Bypassed {
                commit: "p1".into()
            })
        );
        let words = said(&out).join("\n");
        assert!(
            words.contains("BYPASSED") && !says_passed(&words),
            "{words}"
        );
    }

    #[test]
    fn a_live_manifest_changed_mid_run_aborts_without_promoting() {
        let (mut g, _) = two_checks();
        g.step(Input::CandidateCommitted {
            commit: "c1".into(),
        });
        g.step(Input::CandidateJudged(CandidateVerdict::Ready));
        let out = g.step(Input::LiveManifestChanged {
            commit: "h1".into(),
        });
        assert!(
            matches!(out.last(), Some(Effect::KeepCandidate { .. })),
            "{out:?}"
        );
        // The check that was running reports afterwards: nothing follows from it.
        assert!(
            g.step(Input::CheckFinished {
                index: 0,
                outcome: CheckOutcome::Passed {
                    evidence: "ok".into()
                }
            })
            .is_empty()
        );
        let out = g.step(Input::CandidateSettled {
            commit: "k1".into(),
        });
        assert_eq!(
            done(&out),
            Some(&Outcome::Aborted {
                commit: "h1".into()
            })
        );
        assert_eq!(done(&out).unwrap().exit_code(), 1);
        // Before the candidate is committed there is nothing to keep.
        let (mut g, _) = two_checks();
        let out = g.step(Input::LiveManifestChanged {
            commit: "h2".into(),
        });
        assert_eq!(
            done(&out),
            Some(&Outcome::Aborted {
                commit: "h2".into()
            })
        );
    }

    #[test]
    fn a_self_test_passes_only_when_the_gate_blocks_and_never_promotes() {
        let self_test = Start {
            self_test: true,
            ..start()
        };
        let (mut g, _) = Gate::start(plan(&[("smoke", "http")]), self_test.clone());
        g.step(Input::CandidateCommitted {
            commit: "c1".into(),
        });
        g.step(Input::CandidateJudged(CandidateVerdict::Ready));
        let out = g.step(Input::CheckFinished {
            index: 0,
            outcome: CheckOutcome::Failed {
                evidence: "500".into(),
            },
        });
        assert_eq!(out.last(), Some(&Effect::RemoveCandidate));
        let out = g.step(Input::CandidateSettled {
            commit: "r1".into(),
        });
        assert!(matches!(done(&out), Some(Outcome::SelfTestBlocked(_))));
        assert_eq!(done(&out).unwrap().exit_code(), 0);
        // The gate let the failing candidate through: exit 1, and still no promotion.
        let (mut g, _) = Gate::start(plan(&[("smoke", "http")]), self_test);
        g.step(Input::CandidateCommitted {
            commit: "c1".into(),
        });
        g.step(Input::CandidateJudged(CandidateVerdict::Ready));
        let out = g.step(Input::CheckFinished {
            index: 0,
            outcome: CheckOutcome::Passed {
                evidence: "200".into(),
            },
        });
        assert!(
            !out.iter()
                .any(|e| matches!(e, Effect::CommitPromotion { .. }))
        );
        let out = g.step(Input::CandidateSettled {
            commit: "r1".into(),
        });
        assert_eq!(done(&out), Some(&Outcome::SelfTestLetThrough));
        assert_eq!(done(&out).unwrap().exit_code(), 1);
    }

    #[test]
    fn every_message_has_a_distinct_first_line_and_no_pass_wording_comes_from_a_bypass() {
        let blocked = Blocked::CheckFailed {
            index: 0,
            name: "smoke".into(),
            kind: "http".into(),
            evidence: "503".into(),
        };
        let messages = vec![
            GateMessage::Started {
                app: "a".into(),
                candidate: "c".into(),
                checks: 1,
            },
            GateMessage::NoOp { digest: "d".into() },
            GateMessage::SuspiciousNoOp {
                live_image: "i".into(),
                digest: "d".into(),
            },
            GateMessage::CandidateCommitted { commit: "c".into() },
            GateMessage::CandidateReady,
            GateMessage::CheckPassed {
                index: 0,
                name: "n".into(),
                kind: "k".into(),
                evidence: "e".into(),
            },
            GateMessage::CheckSkipped {
                index: 0,
                name: "n".into(),
                why: "w".into(),
            },
            GateMessage::Blocked(blocked.clone()),
            GateMessage::Blocked(Blocked::CheckUndecided {
                index: 0,
                name: "n".into(),
                kind: "k".into(),
                evidence: "e".into(),
            }),
            GateMessage::Blocked(Blocked::CandidateNotReady {
                state: JudgedAs::Verdict(State::Fail),
                reason: "r".into(),
                pending: vec!["p".into()],
            }),
            GateMessage::Blocked(Blocked::CandidateNotReady {
                state: JudgedAs::Verdict(State::Fail),
                reason: "r".into(),
                pending: vec![],
            }),
            GateMessage::Aborted { commit: "c".into() },
            GateMessage::Promoted {
                app: "a".into(),
                candidate: "c".into(),
                commit: "p".into(),
            },
            GateMessage::BypassRequested { reason: "r".into() },
            GateMessage::NoOpAfterBypass {
                digest: "d".into(),
                commit: "c".into(),
                reason: "r".into(),
            },
            GateMessage::LiveWasBypassed {
                commit: "c".into(),
                reason: "r".into(),
            },
            GateMessage::KeptCandidatesExpired {
                expired: vec![ExpiredKept {
                    path: "p".into(),
                    until: "u".into(),
                }],
            },
            GateMessage::Bypassed {
                app: "a".into(),
                candidate: "c".into(),
                commit: "p".into(),
                reason: "r".into(),
            },
            GateMessage::CandidateKept,
            GateMessage::SelfTestBlocked,
            GateMessage::SelfTestLetThrough,
        ];
        let firsts: Vec<String> = messages
            .iter()
            .map(|m| {
                m.to_string()
                    .lines()
                    .next()
                    .unwrap_or("")
                    .split(':')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect();
        let mut unique = firsts.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(
            unique.len(),
            firsts.len(),
            "first lines repeat: {firsts:#?}"
        );
        for m in &messages {
            let text = m.to_string().to_lowercase();
            if matches!(
                m,
                GateMessage::BypassRequested { .. }
                    | GateMessage::Bypassed { .. }
                    | GateMessage::NoOpAfterBypass { .. }
                    | GateMessage::LiveWasBypassed { .. }
            ) {
                assert!(text.contains("bypass") && !says_passed(&text), "{text}");
            }
            if matches!(m, GateMessage::Promoted { .. }) {
                assert!(!text.contains("bypass"), "{text}");
            }
        }
    }
}
