//! The forge's pull requests and commit statuses as plain data, and every decision about them
//! that does not need git: is a branch protected, what do its required checks say about a head
//! commit, may auto-merge be armed, which armed pull requests are due. Flavour-neutral: each
//! flavour's routes turn these answers into that forge's status codes and words. No IO, no
//! clock (times are passed in), so the state machine is tested without a server or a repo.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

/// How a pull request is merged: a merge commit with two parents, or one squashed commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MergeMethod {
    Merge,
    Squash,
}

/// A commit status's state, as GitHub's statuses API names them (`pending`, `success`,
/// `failure`, `error`); GitLab's pipeline and Gitea's status states are read into these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CheckState {
    Pending,
    Success,
    Failure,
    Error,
}

impl CheckState {
    pub(crate) fn parse(text: &str) -> Result<CheckState, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "pending" | "running" | "created" => Ok(CheckState::Pending),
            "success" => Ok(CheckState::Success),
            "failure" | "failed" => Ok(CheckState::Failure),
            "error" => Ok(CheckState::Error),
            other => Err(format!(
                "state {other:?} is not one of pending, success, failure, error"
            )),
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CheckState::Pending => "pending",
            CheckState::Success => "success",
            CheckState::Failure => "failure",
            CheckState::Error => "error",
        }
    }
}

/// Where a pull request stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Status {
    Open,
    Closed { at: SystemTime },
    Merged { commit: String, at: SystemTime },
}

/// One pull (merge) request.
#[derive(Debug, Clone)]
pub(crate) struct Pull {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub head: String,
    pub base: String,
    pub created_at: SystemTime,
    pub updated_at: SystemTime,
    pub status: Status,
    /// The head commit when it merged or closed (a branch may move or go afterwards).
    pub final_head: Option<String>,
    /// Auto-merge armed, with the method it merges with.
    pub auto_merge: Option<MergeMethod>,
}

impl Pull {
    pub(crate) fn is_open(&self) -> bool {
        self.status == Status::Open
    }
}

/// Branch protection: which branches refuse direct pushes, which status contexts a pull
/// request into one of them needs before it merges, and whether auto-merge may be armed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rules {
    pub protected: BTreeSet<String>,
    /// Required on pull requests into a protected branch; none elsewhere.
    pub required_checks: Vec<String>,
    pub allow_auto_merge: bool,
}

/// What the required checks say about a head commit, for a pull request into `base`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Every required context is `success` (or none is required).
    Green,
    /// This required context has not reported, or is `pending`.
    Waiting(String),
    /// This required context is `failure` or `error`.
    Failing(String),
}

/// Why auto-merge cannot be armed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ArmRefusal {
    /// The repository does not allow auto-merge (GitHub's `allow_auto_merge: false`).
    NotAllowed,
    /// The pull request is closed or merged.
    NotOpen,
    /// Nothing is left to wait for: every required check passed (GitHub's `clean` status).
    Clean,
}

/// Everything the forge knows besides git.
#[derive(Debug, Clone)]
pub(crate) struct Board {
    pub rules: Rules,
    pulls: Vec<Pull>,
    /// Commit id → context → state, as the last report for each context left it.
    statuses: BTreeMap<String, BTreeMap<String, CheckState>>,
}

impl Board {
    pub(crate) fn new(rules: Rules) -> Board {
        Board {
            rules,
            pulls: Vec::new(),
            statuses: BTreeMap::new(),
        }
    }

    pub(crate) fn is_protected(&self, branch: &str) -> bool {
        self.rules.protected.contains(branch)
    }

    pub(crate) fn pull(&self, number: u64) -> Option<&Pull> {
        self.pulls.iter().find(|p| p.number == number)
    }

    pub(crate) fn pull_mut(&mut self, number: u64) -> Option<&mut Pull> {
        self.pulls.iter_mut().find(|p| p.number == number)
    }

    /// The open pull request from `head` (into `base`, when given), if any: every forge
    /// refuses a second one (GitHub and Gitea per head and base, GitLab per source branch).
    pub(crate) fn open_from(&self, head: &str, base: Option<&str>) -> Option<&Pull> {
        self.pulls
            .iter()
            .find(|p| p.is_open() && p.head == head && base.is_none_or(|b| p.base == b))
    }

    /// Records a new open pull request; numbers start at 1, one sequence per repository.
    pub(crate) fn open(
        &mut self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        now: SystemTime,
    ) -> &Pull {
        let number = self.pulls.len() as u64 + 1;
        self.pulls.push(Pull {
            number,
            title: title.to_string(),
            body: body.to_string(),
            head: head.to_string(),
            base: base.to_string(),
            created_at: now,
            updated_at: now,
            status: Status::Open,
            final_head: None,
            auto_merge: None,
        });
        &self.pulls[self.pulls.len() - 1]
    }

    /// Records a report of `context` on `commit`; the last report of a context wins.
    pub(crate) fn set_status(&mut self, commit: &str, context: &str, state: CheckState) {
        self.statuses
            .entry(commit.to_string())
            .or_default()
            .insert(context.to_string(), state);
    }

    /// The required checks' verdict on `head_sha` for a pull request into `base`: the first
    /// failing context, else the first not yet successful, else green.
    pub(crate) fn gate(&self, base: &str, head_sha: &str) -> Gate {
        if !self.is_protected(base) {
            return Gate::Green;
        }
        let reported = self.statuses.get(head_sha);
        let state = |ctx: &str| reported.and_then(|m| m.get(ctx)).copied();
        if let Some(ctx) = self.rules.required_checks.iter().find(|c| {
            matches!(
                state(c.as_str()),
                Some(CheckState::Failure | CheckState::Error)
            )
        }) {
            return Gate::Failing(ctx.clone());
        }
        match self
            .rules
            .required_checks
            .iter()
            .find(|c| state(c.as_str()) != Some(CheckState::Success))
        {
            Some(ctx) => Gate::Waiting(ctx.clone()),
            None => Gate::Green,
        }
    }

    /// May auto-merge be armed on pull request `number` whose head is `head_sha`? `clean_refused`:
    /// the flavour refuses when nothing is left to wait for (GitHub does; GitLab and Gitea merge
    /// at once instead, which their routes decide).
    pub(crate) fn may_arm(
        &self,
        number: u64,
        head_sha: &str,
        clean_refused: bool,
    ) -> Result<(), ArmRefusal> {
        if !self.rules.allow_auto_merge {
            return Err(ArmRefusal::NotAllowed);
        }
        let Some(pull) = self.pull(number).filter(|p| p.is_open()) else {
            return Err(ArmRefusal::NotOpen);
        };
        if clean_refused && self.gate(&pull.base, head_sha) == Gate::Green {
            return Err(ArmRefusal::Clean);
        }
        Ok(())
    }

    /// Arms auto-merge on an open pull request (again: the method is replaced).
    pub(crate) fn arm(&mut self, number: u64, method: MergeMethod, now: SystemTime) {
        if let Some(pull) = self.pull_mut(number).filter(|p| p.is_open()) {
            pull.auto_merge = Some(method);
            pull.updated_at = now;
        }
    }

    /// The open pull requests with auto-merge armed whose required checks are green, with
    /// the method each merges with. `head_of` reads a branch's tip (`None`: it is gone).
    pub(crate) fn due(&self, head_of: impl Fn(&str) -> Option<String>) -> Vec<(u64, MergeMethod)> {
        self.pulls
            .iter()
            .filter(|p| p.is_open())
            .filter_map(|p| {
                let method = p.auto_merge?;
                let head = head_of(&p.head)?;
                (self.gate(&p.base, &head) == Gate::Green).then_some((p.number, method))
            })
            .collect()
    }

    /// The pull request merged as `commit`, from head `head_sha`.
    pub(crate) fn record_merge(
        &mut self,
        number: u64,
        commit: &str,
        head_sha: &str,
        now: SystemTime,
    ) {
        if let Some(pull) = self.pull_mut(number) {
            pull.status = Status::Merged {
                commit: commit.to_string(),
                at: now,
            };
            pull.final_head = Some(head_sha.to_string());
            pull.auto_merge = None;
            pull.updated_at = now;
        }
    }

    /// Closes an open pull request unmerged; false when it is not open.
    pub(crate) fn close(&mut self, number: u64, head_sha: Option<String>, now: SystemTime) -> bool {
        match self.pull_mut(number) {
            Some(pull) if pull.is_open() => {
                pull.status = Status::Closed { at: now };
                pull.final_head = head_sha;
                pull.auto_merge = None;
                pull.updated_at = now;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn board(required: &[&str], allow_auto_merge: bool) -> Board {
        Board::new(Rules {
            protected: ["main".to_string()].into(),
            required_checks: required.iter().map(|s| s.to_string()).collect(),
            allow_auto_merge,
        })
    }

    #[test]
    fn the_gate_waits_for_every_required_check_and_names_a_failing_one_first() {
        let mut b = board(&["ci", "lint"], true);
        assert_eq!(b.gate("main", "h1"), Gate::Waiting("ci".into()));
        b.set_status("h1", "ci", CheckState::Success);
        assert_eq!(b.gate("main", "h1"), Gate::Waiting("lint".into()));
        b.set_status("h1", "lint", CheckState::Failure);
        assert_eq!(b.gate("main", "h1"), Gate::Failing("lint".into()));
        b.set_status("h1", "lint", CheckState::Success);
        assert_eq!(b.gate("main", "h1"), Gate::Green);
        // Another head commit has reported nothing; an unprotected base requires nothing.
        assert_eq!(b.gate("main", "h2"), Gate::Waiting("ci".into()));
        assert_eq!(b.gate("dev", "h2"), Gate::Green);
        // Contexts that are not required do not count.
        b.set_status("h2", "extra", CheckState::Failure);
        assert_eq!(b.gate("main", "h2"), Gate::Waiting("ci".into()));
    }

    #[test]
    fn one_open_pull_request_per_head_and_base_and_numbers_in_sequence() {
        let mut b = board(&[], true);
        assert_eq!(b.open("promo", "main", "t", "b", UNIX_EPOCH).number, 1);
        assert!(b.open_from("promo", Some("main")).is_some());
        assert!(b.open_from("promo", Some("dev")).is_none());
        assert!(b.open_from("promo", None).is_some());
        assert!(b.close(1, Some("h".into()), UNIX_EPOCH));
        assert!(!b.close(1, None, UNIX_EPOCH), "closing twice is refused");
        assert!(b.open_from("promo", Some("main")).is_none());
        assert_eq!(b.open("promo", "main", "t", "b", UNIX_EPOCH).number, 2);
    }

    #[test]
    fn arming_is_refused_when_not_allowed_not_open_or_clean_where_the_forge_refuses_clean() {
        let mut b = board(&["ci"], true);
        b.open("promo", "main", "t", "", UNIX_EPOCH);
        assert_eq!(b.may_arm(1, "h1", true), Ok(()));
        b.set_status("h1", "ci", CheckState::Success);
        assert_eq!(b.may_arm(1, "h1", true), Err(ArmRefusal::Clean));
        assert_eq!(b.may_arm(1, "h1", false), Ok(()));
        assert_eq!(b.may_arm(2, "h1", true), Err(ArmRefusal::NotOpen));
        let mut off = board(&["ci"], false);
        off.open("promo", "main", "t", "", UNIX_EPOCH);
        assert_eq!(off.may_arm(1, "h1", true), Err(ArmRefusal::NotAllowed));
        // No required check at all: a pull request into main is clean at once.
        let mut none = board(&[], true);
        none.open("promo", "main", "t", "", UNIX_EPOCH);
        assert_eq!(none.may_arm(1, "h1", true), Err(ArmRefusal::Clean));
    }

    #[test]
    fn an_armed_pull_request_is_due_once_its_head_is_green_and_not_after_it_merged() {
        let mut b = board(&["ci"], true);
        b.open("promo", "main", "t", "", UNIX_EPOCH);
        b.open("other", "main", "t", "", UNIX_EPOCH);
        b.arm(1, MergeMethod::Merge, UNIX_EPOCH);
        let heads = |branch: &str| Some(format!("{branch}-tip"));
        assert!(b.due(heads).is_empty(), "nothing reported yet");
        b.set_status("promo-tip", "ci", CheckState::Failure);
        assert!(b.due(heads).is_empty(), "a failing check leaves it open");
        b.set_status("promo-tip", "ci", CheckState::Success);
        b.set_status("other-tip", "ci", CheckState::Success);
        assert_eq!(
            b.due(heads),
            vec![(1, MergeMethod::Merge)],
            "only armed ones"
        );
        assert!(b.due(|_| None).is_empty(), "a head branch that is gone");
        b.record_merge(1, "m1", "promo-tip", UNIX_EPOCH);
        assert!(b.due(heads).is_empty());
        let pull = b.pull(1).unwrap();
        assert_eq!(pull.auto_merge, None);
        assert!(matches!(&pull.status, Status::Merged { commit, .. } if commit == "m1"));
        assert_eq!(pull.final_head.as_deref(), Some("promo-tip"));
    }

    #[test]
    fn check_states_parse_the_forges_words_and_refuse_others() {
        assert_eq!(CheckState::parse("success").unwrap(), CheckState::Success);
        assert_eq!(CheckState::parse("failed").unwrap(), CheckState::Failure);
        assert_eq!(CheckState::parse(" Pending ").unwrap(), CheckState::Pending);
        let err = CheckState::parse("green").unwrap_err();
        assert!(err.contains("\"green\""), "{err}");
    }
}
