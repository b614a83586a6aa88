//! Why a verdict came out so (`docs/why.md`): a watch's tape of judge inputs replayed through
//! this build's judge, the timeline that replay tells in words, and whether it reached the
//! verdict the store recorded.

use greenlight_core::event::Event;
use greenlight_core::judge::{Engine, State, Watch};
use greenlight_core::tape::{Step, TAPE_SNAPSHOT_BYTES, TAPE_STEPS};
use greenlight_core::time::Timestamp;
use serde_json::{Value, json};

/// What a replay of one watch came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The replay reached the recorded verdict (or, for a watch still being judged, the same
    /// state and reason).
    Same,
    /// It reached another (an older greenlight judged it, or the judge changed).
    Different,
    /// It parted from the recording at a step: this judge consumes the inputs otherwise.
    Parted { step: usize, why: String },
    /// The inputs outgrew the tape's bound: not replayed.
    Full,
    /// No tape: the watch started before tapes were kept, or its tape cannot be read (`why`
    /// says which).
    NoTape(String),
}

impl Outcome {
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Same => "same",
            Outcome::Different => "different",
            Outcome::Parted { .. } => "parted",
            Outcome::Full => "full",
            Outcome::NoTape(_) => "none",
        }
    }

    /// A replay that judged otherwise than the record says.
    pub fn disagrees(&self) -> bool {
        matches!(self, Outcome::Different | Outcome::Parted { .. })
    }
}

/// One watch explained.
pub struct Why {
    pub recorded: Watch,
    pub replayed: Option<Watch>,
    pub outcome: Outcome,
    /// What the replayed judge said, in order.
    pub events: Vec<Event>,
    /// Restarts on the tape, by time.
    pub restarts: Vec<Timestamp>,
    pub steps: usize,
    /// How the watch started, in the judge's words (from its tape's first step).
    pub started: Option<String>,
}

/// The verdict's words a replay is compared on: state, time and reason.
fn verdict_of(w: &Watch) -> (State, Option<Timestamp>, String) {
    (w.state(), w.finished_at(), w.reason_text())
}

/// Replays `recorded`'s tape (an error: the tape cannot be read, in words).
pub fn explain(recorded: &Watch, tape: Result<Vec<Step>, String>) -> Why {
    let mut why = Why {
        recorded: recorded.clone(),
        replayed: None,
        outcome: Outcome::NoTape(String::new()),
        events: Vec::new(),
        restarts: Vec::new(),
        steps: 0,
        started: None,
    };
    let steps = match tape {
        Err(e) => {
            why.outcome = Outcome::NoTape(format!("its tape cannot be read: {e}"));
            return why;
        }
        Ok(s) if s.is_empty() => {
            why.outcome = Outcome::NoTape(
                "no judge inputs were recorded for it (a greenlight before tapes judged it)".into(),
            );
            return why;
        }
        Ok(s) => s,
    };
    why.steps = steps.len();
    if let Some(Step::Start { config, .. }) = steps.first() {
        let msg = greenlight_core::reason::Message::WatchStarted {
            mode: recorded.mode,
            dry_run: recorded.dry_run || config.dry_run,
            deadline_ms: recorded.deadline_ms,
            stable_for_ms: config.stable_for_ms,
        };
        why.started = Some(if recorded.id.contains('~') {
            format!("re-opened: {msg}")
        } else {
            msg.to_string()
        });
    }
    why.restarts = steps
        .iter()
        .filter_map(|s| match s {
            Step::Resumed { at, .. } => Some(*at),
            _ => None,
        })
        .collect();
    let replay = match Engine::replay(&steps) {
        Ok(r) => r,
        Err(e) => {
            why.outcome = Outcome::NoTape(format!("its tape cannot be replayed: {e}"));
            return why;
        }
    };
    why.events = replay.events.into_iter().map(|(_, e)| e).collect();
    why.outcome = if replay.full {
        Outcome::Full
    } else if let Some(d) = replay.diverged {
        Outcome::Parted {
            step: d.step,
            why: d.why,
        }
    } else if verdict_of(&replay.watch) == verdict_of(recorded) {
        Outcome::Same
    } else {
        Outcome::Different
    };
    why.replayed = Some(replay.watch);
    why
}

fn at(t: Option<Timestamp>) -> String {
    t.map_or_else(|| "-".to_string(), Timestamp::rfc3339)
}

impl Why {
    /// The words `greenlight why` prints for this watch.
    pub fn lines(&self) -> Vec<String> {
        let w = &self.recorded;
        let mut out = vec![format!(
            "{} {:?} on app {} (mode {}{}), watch {}",
            w.commit.short(),
            w.subject,
            w.app,
            w.mode.as_str(),
            if w.dry_run { ", dry-run" } else { "" },
            w.id
        )];
        out.push(format!(
            "  verdict as recorded: {} at {}: {}",
            w.state().as_str(),
            at(w.finished_at()),
            w.reason_text()
        ));
        if let Outcome::NoTape(why) = &self.outcome {
            out.push(format!("  replay: none — {why}"));
            return out;
        }
        out.push(format!(
            "  timeline (replayed from its {} recorded steps):",
            self.steps
        ));
        if let Some(started) = &self.started {
            out.push(format!("    {}  {started}", w.watch_started_at.rfc3339()));
        }
        let mut restarts = self.restarts.iter().peekable();
        for e in &self.events {
            while let Some(r) = restarts.next_if(|r| **r <= e.time) {
                out.push(format!(
                    "    {}  greenlight restarted: what went unobserved meanwhile counts for nothing",
                    r.rfc3339()
                ));
            }
            if e.event == greenlight_core::event::EventKind::WatchStarted {
                continue;
            }
            out.push(format!(
                "    {}  {}: {}",
                e.time.rfc3339(),
                e.event.as_str().replace('_', " "),
                e.message
            ));
        }
        for r in restarts {
            out.push(format!("    {}  greenlight restarted", r.rfc3339()));
        }
        if let Some(r) = &self.replayed {
            if let Some(reached) = r.reached_at() {
                out.push(format!(
                    "  reached at {}; health deadline {}{}",
                    reached.rfc3339(),
                    at(r.deadline_at().or(Some(reached.plus_ms(r.deadline_ms)))),
                    r.healthy_since()
                        .map(|h| format!("; healthy streak from {}", h.rfc3339()))
                        .unwrap_or_default()
                ));
            } else {
                out.push(format!(
                    "  never reached; reach deadline {}",
                    w.watch_started_at.plus_ms(w.deadline_ms).rfc3339()
                ));
            }
        }
        match (&self.outcome, &self.replayed) {
            (Outcome::Same, _) => out.push(format!(
                "  replay: same verdict — {} at {}",
                w.state().as_str(),
                at(w.finished_at())
            )),
            (Outcome::Full, _) => out.push(format!(
                "  replay: not possible — the inputs outgrew the tape's bound ({TAPE_STEPS} steps, {} KiB of snapshots); the timeline is what was kept",
                TAPE_SNAPSHOT_BYTES / 1024
            )),
            (Outcome::Parted { step, why }, _) => out.push(format!(
                "  replay: parted from the recording at step {step} of {}: {why} — this greenlight judges these inputs otherwise",
                self.steps
            )),
            (Outcome::Different, Some(r)) => {
                out.push("  replay: a DIFFERENT verdict — this greenlight judges these inputs otherwise:".into());
                let width = 40;
                out.push(format!("    {:<8} {:<width$} {}", "", "recorded", "replayed"));
                out.push(format!(
                    "    {:<8} {:<width$} {}",
                    "state",
                    w.state().as_str(),
                    r.state().as_str()
                ));
                out.push(format!(
                    "    {:<8} {:<width$} {}",
                    "at",
                    at(w.finished_at()),
                    at(r.finished_at())
                ));
                out.push(format!("    {:<8} recorded: {}", "reason", w.reason_text()));
                out.push(format!("    {:<8} replayed: {}", "", r.reason_text()));
            }
            _ => {}
        }
        out
    }

    /// `--json` (docs/why.md#json).
    pub fn to_json(&self) -> Value {
        let w = &self.recorded;
        let verdict = |w: &Watch| {
            json!({
                "state": w.state().as_str(),
                "at": w.finished_at().map(Timestamp::rfc3339),
                "reason": w.reason_text(),
            })
        };
        let mut replay = json!({ "outcome": self.outcome.as_str() });
        match &self.outcome {
            Outcome::NoTape(why) => replay["why"] = json!(why),
            Outcome::Parted { step, why } => {
                replay["step"] = json!(step);
                replay["why"] = json!(why);
            }
            _ => {}
        }
        if let Some(r) = &self.replayed {
            replay["verdict"] = verdict(r);
            replay["reached_at"] = json!(r.reached_at().map(Timestamp::rfc3339));
        }
        json!({
            "watch": w.id,
            "commit": w.commit.as_str(),
            "app": w.app.to_string(),
            "mode": w.mode.as_str(),
            "recorded": verdict(w),
            "steps": self.steps,
            "replay": replay,
            "timeline": self.events.iter().map(|e| json!({
                "time": e.time.rfc3339(),
                "event": e.event.as_str(),
                "message": e.message,
            })).collect::<Vec<_>>(),
            "restarts": self.restarts.iter().map(|t| t.rfc3339()).collect::<Vec<_>>(),
        })
    }
}
