//! The promotion's trailers, written and read in this one place: the keys, the values the
//! machine writes (a pass, a bypass, a kept candidate, each check's evidence), the message a
//! gate commit carries, and the readers of what an earlier run wrote (the gate record of a
//! commit of the live manifest; the paths a revert of a promotion leaves alone).

use greenlight_core::trailer;

/// On a promotion or kept candidate's commit: the gate's outcome (`passed: …`,
/// `bypassed, no check ran: …`, `blocked, candidate kept: …`).
pub const GATE: &str = "Greenlight-Gate";
/// The candidate image a gate commit is about.
pub const CANDIDATE: &str = "Greenlight-Candidate";
/// One check's result, in order, on a promotion commit.
pub const CHECK: &str = "Greenlight-Check";
/// A candidate commit also carries `greenlight_core::trailer::JUDGED_BY`: the gate's run that
/// made it judges its watch trailer, and a watchdog daemon starts no watch for it.
/// On a promotion commit: the candidates' directory, which a revert of the commit (the
/// watchdog's, when the promoted image fails live) leaves as it is on the branch, so that
/// undoing the promotion does not bring back the candidate and the lock the commit removed.
pub const REVERT_KEEPS: &str = "Greenlight-Revert-Keeps";

/// The start of a bypass's `Greenlight-Gate` value.
const BYPASSED: &str = "bypassed, no check ran: ";

/// `Greenlight-Gate` of a promotion the gate verified.
pub fn passed(checks: usize) -> (String, String) {
    (
        GATE.into(),
        format!("passed: candidate ready, {checks} check(s) in order"),
    )
}

/// `Greenlight-Gate` of a bypass.
pub fn bypassed(reason: &str) -> (String, String) {
    (GATE.into(), format!("{BYPASSED}{}", one_line(reason)))
}

/// `Greenlight-Gate` of a kept (blocked) candidate.
pub fn kept(why: &str) -> (String, String) {
    (
        GATE.into(),
        format!("blocked, candidate kept: {}", one_line(why)),
    )
}

/// `Greenlight-Gate` of a candidate kept because a signal cancelled its run.
pub fn cancelled(signal: &str, during: &str) -> (String, String) {
    (
        GATE.into(),
        format!("cancelled by {signal} {}, candidate kept", one_line(during)),
    )
}

/// On a promotion commit whose watch deadline the run raised above the configured one.
pub const WATCH_DEADLINE: &str = "Greenlight-Watch-Deadline";

/// `Greenlight-Watch-Deadline`: raised from `configured` to `raised`, the candidate having taken
/// `measured` to become healthy.
pub fn deadline_raised(configured: &str, raised: &str, measured: &str) -> (String, String) {
    (
        WATCH_DEADLINE.into(),
        format!(
            "raised from {configured} to {raised}: the candidate took {measured} to become healthy"
        ),
    )
}

/// On a promotion of a digest the watchdog reverted before, proposed again with
/// `--allow-reverted`: why, and the revert.
pub const ALLOW_REVERTED: &str = "Greenlight-Allow-Reverted";

/// `Greenlight-Allow-Reverted`.
pub fn allowed_reverted(reason: &str, revert: &str) -> (String, String) {
    (
        ALLOW_REVERTED.into(),
        format!("{} (reverted in {revert})", one_line(reason)),
    )
}

/// `Greenlight-Candidate`.
pub fn candidate(image: &str) -> (String, String) {
    (CANDIDATE.into(), image.to_string())
}

/// `Greenlight-Check` of check `index` (0-based), `what` being `passed` or `skipped by design`.
pub fn check(index: usize, name: &str, kind: &str, what: &str, evidence: &str) -> (String, String) {
    (
        CHECK.into(),
        format!(
            "{} {name} ({kind}) {what}: {}",
            index + 1,
            one_line(evidence)
        ),
    )
}

/// `Greenlight-Revert-Keeps` naming `dir`.
pub fn revert_keeps(dir: &str) -> (String, String) {
    (REVERT_KEEPS.into(), dir.trim_end_matches('/').to_string())
}

/// A candidate commit's message: the candidate of `live_app`, judged on `candidate_app`, with
/// its watch trailer (`key`, `directive`), `Greenlight-Candidate` and
/// `Greenlight-Judged-By: promote run` (a daemon starts no watch for it).
pub fn candidate_message(
    live_app: &str,
    image: &str,
    candidate_app: &str,
    (key, directive): (&str, &str),
) -> String {
    format!(
        "candidate for {live_app}: {image}\n\nThe promotion gate's candidate, judged on {candidate_app} by the gate's run before any check runs\n(a watchdog daemon does not watch it).\n\n{key}: {directive}\n{CANDIDATE}: {image}\n{}: {}\n",
        trailer::JUDGED_BY,
        trailer::JUDGED_BY_GATE,
    )
}

/// A gate commit's message: the subject, the body if any, then the trailers, one a line.
pub fn message(subject: &str, body: &str, trailers: &[(String, String)]) -> String {
    let mut m = format!("{subject}\n\n");
    if !body.is_empty() {
        m.push_str(body);
        m.push_str("\n\n");
    }
    for (k, v) in trailers {
        m.push_str(&format!("{k}: {v}\n"));
    }
    m
}

/// What a commit of the live manifest says the gate did, read back from its trailers (the
/// last of each key wins, as git's `interpret-trailers` lists them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateRecord {
    /// The `Greenlight-Gate` value.
    pub gate: String,
    /// The `Greenlight-Candidate` value.
    pub candidate: String,
}

impl GateRecord {
    /// The record of a commit message, when it has both a gate outcome and a candidate.
    pub fn parse(message: &str) -> Option<GateRecord> {
        let trailers = trailer::parse(message);
        let field = |key: &str| {
            trailers
                .iter()
                .rev()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.clone())
        };
        Some(GateRecord {
            gate: field(GATE)?,
            candidate: field(CANDIDATE)?,
        })
    }

    /// The bypass's reason, when the record is a bypass.
    pub fn bypass_reason(&self) -> Option<&str> {
        self.gate.strip_prefix(BYPASSED)
    }
}

/// The paths a revert of the commit with `message` leaves as they are: its
/// `Greenlight-Revert-Keeps` trailers, each a comma-separated list.
pub fn revert_keeps_of(message: &str) -> Vec<String> {
    trailer::parse(message)
        .into_iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(REVERT_KEEPS))
        .flat_map(|(_, v)| {
            v.split(',')
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A trailer value is one line: newlines become spaces, and it is kept short.
pub fn one_line(s: &str) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let flat = flat.trim();
    if flat.chars().count() > 300 {
        let cut: String = flat.chars().take(297).collect();
        format!("{cut}...")
    } else {
        flat.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_commit_reads_back_what_it_wrote() {
        let m = message(
            "promote web: r/web@sha256:ab (GATE BYPASSED, no check ran)",
            "",
            &[
                bypassed("hotfix\nfor INC-42"),
                candidate("r/web@sha256:ab"),
                revert_keeps("deploy/candidates/"),
                ("Nav-Watchdog".into(), "app=web".into()),
            ],
        );
        let r = GateRecord::parse(&m).unwrap();
        assert_eq!(r.candidate, "r/web@sha256:ab");
        assert_eq!(r.bypass_reason(), Some("hotfix for INC-42"));
        assert_eq!(revert_keeps_of(&m), ["deploy/candidates"]);
        let passed = message("promote", "", &[passed(2), candidate("x")]);
        assert_eq!(GateRecord::parse(&passed).unwrap().bypass_reason(), None);
        assert_eq!(
            GateRecord::parse("promote\n\nGreenlight-Gate: passed\n"),
            None
        );
    }
}
