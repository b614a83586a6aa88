//! What a notification says, in each sink's format, from one stored event: the generic JSON
//! body (`docs/notifications.md#body`), Slack's blocks, and the webhook's signature. Pure: the
//! wording is the event catalogue's ([`Outcome::title`]) and the event's own message.

use greenlight_core::event::{Event, EventKind, Outcome};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

/// The body's `schema`: a receiver can tell a change of shape by it.
pub const SCHEMA: &str = "greenlight.dev/notification/v1";

/// The signature header: `sha256=` and the lowercase hex HMAC-SHA256 of the body's bytes under
/// the sink's secret, as GitHub signs its webhooks (`X-Hub-Signature-256`).
pub const SIGNATURE_HEADER: &str = "X-Greenlight-Signature-256";
/// The delivery's id ([`Notice::delivery_id`]): the same on every retry, so a receiver that
/// saw it already can drop it (delivery is at least once).
pub const DELIVERY_HEADER: &str = "X-Greenlight-Delivery";
/// The outcome's name.
pub const OUTCOME_HEADER: &str = "X-Greenlight-Outcome";

/// One event to tell about: what was stored, with its place in the outbox.
#[derive(Clone, Debug)]
pub struct Notice {
    /// The outbox's own id (`meta` row `outbox_id` of its file, made once): sequence numbers
    /// start again in every new file (a run without --data-dir has a scratch one), ids do not.
    pub outbox: String,
    /// The event's sequence number in the events table.
    pub seq: i64,
    pub event: Event,
    pub outcome: Outcome,
}

impl Notice {
    /// The notice of a stored event, when it carries an outcome.
    pub fn of(outbox: &str, seq: i64, event: Event) -> Option<Notice> {
        let outcome = event.outcome?;
        Some(Notice {
            outbox: outbox.to_string(),
            seq,
            event,
            outcome,
        })
    }

    /// `<sink>:<outbox>:<sequence>`: the same on every retry of this notification to this
    /// sink, and never the same for another.
    pub fn delivery_id(&self, sink: &str) -> String {
        format!("{sink}:{}:{}", self.outbox, self.seq)
    }

    /// Who decided: the watchdog's judge or the promotion gate.
    pub fn source(&self) -> &'static str {
        match self.event.event {
            EventKind::GateEnded => "promote",
            _ => "watch",
        }
    }

    /// The event's words, URLs with credentials redacted.
    fn message(&self) -> String {
        greenlight_git::redact(&self.event.message)
    }

    /// The verdict's whole words (the event's own, for a promotion run's end), redacted.
    fn reason(&self) -> String {
        greenlight_git::redact(self.event.reason.as_deref().unwrap_or(&self.event.message))
    }

    /// The generic body: stable keys, documented in `docs/notifications.md#body`.
    pub fn json(&self, sink: &str) -> Value {
        json!({
            "schema": SCHEMA,
            "delivery": self.delivery_id(sink),
            "outcome": self.outcome.as_str(),
            "title": self.outcome.title(),
            "level": self.outcome.level(),
            "source": self.source(),
            "time": self.event.time.rfc3339(),
            "app": self.event.app,
            "commit": self.event.commit,
            "state": self.event.state.map(|s| s.as_str()),
            "message": self.message(),
            "reason": self.reason(),
            "evidence": self.event.evidence,
        })
    }

    /// Slack's incoming-webhook body: a `text` fallback and blocks — the title as the header,
    /// the app, commit and state as fields, the reason, and the time.
    pub fn slack(&self) -> Value {
        let commit = self.event.commit.as_deref().map(short);
        let mut fallback = self.outcome.title().to_string();
        let mut fields = Vec::new();
        if let Some(app) = &self.event.app {
            fallback.push_str(&format!(" · {app}"));
            fields.push(field("App", &slack_escape(app)));
        }
        if let Some(c) = &commit {
            fallback.push_str(&format!(" · {c}"));
            fields.push(field("Commit", &format!("`{}`", slack_escape(c))));
        }
        if let Some(s) = self.event.state {
            fields.push(field("State", s.as_str()));
        }
        let mut blocks = vec![json!({
            "type": "header",
            "text": {"type": "plain_text", "text": cut(self.outcome.title(), 150)},
        })];
        if !fields.is_empty() {
            blocks.push(json!({"type": "section", "fields": fields}));
        }
        blocks.push(json!({
            "type": "section",
            "text": {"type": "mrkdwn", "text": cut(&slack_escape(&self.reason()), 3000)},
        }));
        blocks.push(json!({
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": format!("greenlight {} · {}", self.source(), self.event.time.rfc3339())}],
        }));
        json!({"text": cut(&slack_escape(&fallback), 3000), "blocks": blocks})
    }
}

fn field(label: &str, value: &str) -> Value {
    json!({"type": "mrkdwn", "text": cut(&format!("*{label}*\n{value}"), 2000)})
}

fn short(sha: &str) -> String {
    sha.chars().take(8).collect()
}

/// Slack's control characters in text: `&`, `<`, `>` (Slack's "Formatting text for app
/// surfaces": escaping).
pub fn slack_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// At most `max` characters, the cut marked with `…` (Slack refuses longer block texts).
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The value of [`SIGNATURE_HEADER`] for `body` under `secret`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    let mut out = String::from("sha256=");
    for b in bytes {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenlight_core::event::Evidence;
    use greenlight_core::state::State;
    use greenlight_core::time::Timestamp;

    fn event(outcome: Outcome, message: &str) -> Event {
        Event {
            time: Timestamp(1_800_000_000_000),
            event: EventKind::RevertPushed,
            commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
            app: Some("web".into()),
            state: Some(State::Reverted),
            message: message.into(),
            evidence: Evidence::default(),
            outcome: Some(outcome),
            reason: None,
        }
    }

    /// RFC 4231 test case 2: the key "Jefe" and "what do ya want for nothing?".
    #[test]
    fn the_signature_is_hmac_sha256_in_lowercase_hex() {
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn the_titles_are_distinct_at_a_glance_and_say_what_was_undone() {
        let titles: Vec<&str> = Outcome::ALL.iter().map(|o| o.title()).collect();
        // No two titles start with the same word (case aside), and none starts with another's
        // first word inside its own (`passed` in `BYPASSED`).
        let first = |t: &str| {
            t.split([' ', ':', ','])
                .next()
                .unwrap_or_default()
                .to_lowercase()
        };
        for (i, a) in titles.iter().enumerate() {
            for b in &titles[i + 1..] {
                assert_ne!(a.split(':').next(), b.split(':').next(), "{a:?} and {b:?}");
                if !(a.starts_with("would have reverted") && b.starts_with("would have reverted")) {
                    assert_ne!(first(a), first(b), "{a:?} and {b:?} start alike");
                }
            }
        }
        // What went around the checks, what failed to undo, and a broken gate shout.
        for (o, loud) in [
            (Outcome::Bypassed, "BYPASSED"),
            (Outcome::RevertFailed, "REVERT FAILED"),
            (Outcome::BreakerOpened, "BREAKER OPEN"),
            (Outcome::SelfTestLetThrough, "GATE BROKEN"),
            (Outcome::FailedNotReverted, "FAILED, not reverted"),
        ] {
            assert!(o.title().contains(loud), "{o:?}: {}", o.title());
        }
        // Only a pass reads as one.
        for o in Outcome::ALL {
            let t = o.title().to_lowercase();
            let reads_as_pass = t.starts_with("passed") || t.starts_with("promoted");
            assert_eq!(
                reads_as_pass,
                matches!(o, Outcome::Passed | Outcome::Promoted),
                "{o:?}: {t}"
            );
            assert_eq!(Outcome::parse(o.as_str()), Some(o));
        }
        // Shadow and dry-run failures say nothing was undone; a bypass says the checks did
        // not run rather than that they failed.
        for o in [
            Outcome::WouldHaveRevertedShadow,
            Outcome::WouldHaveRevertedDryRun,
        ] {
            assert!(o.title().contains("nothing undone"), "{}", o.title());
        }
        assert!(!Outcome::Bypassed.title().to_lowercase().contains("fail"));
        assert!(!Outcome::NoOp.notifies());
        assert!(Outcome::ALL.iter().filter(|o| !o.notifies()).count() == 1);
    }

    #[test]
    fn the_json_body_has_the_stable_keys_and_redacts_urls() {
        let n = Notice::of(
            "0b0x",
            7,
            event(
                Outcome::Reverted,
                "pushed to https://user:tok3n@git.example/r.git",
            ),
        )
        .unwrap();
        let body = n.json("ops");
        let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "app", "commit", "delivery", "evidence", "level", "message", "outcome", "reason",
                "schema", "source", "state", "time", "title"
            ]
        );
        assert_eq!(body["delivery"], "ops:0b0x:7");
        assert_eq!(body["outcome"], "reverted");
        assert_eq!(body["source"], "watch");
        assert!(!body.to_string().contains("tok3n"), "{body}");
    }

    #[test]
    fn slack_blocks_lead_with_the_title_and_escape_the_words() {
        let n = Notice::of("0b0x", 1, event(Outcome::Bypassed, "reason: <b> & ")).unwrap();
        let s = n.slack();
        assert_eq!(s["blocks"][0]["text"]["text"], Outcome::Bypassed.title());
        assert_eq!(s["blocks"][1]["fields"][1]["text"], "*Commit*\n`01234567`");
        assert_eq!(s["blocks"][2]["text"]["text"], "reason: &lt;b&gt; &amp; ");
        assert!(s["text"].as_str().unwrap().starts_with("BYPASSED"));
        let long = "é".repeat(4000);
        let n = Notice::of("0b0x", 1, event(Outcome::Blocked, &long)).unwrap();
        assert_eq!(
            n.slack()["blocks"][2]["text"]["text"]
                .as_str()
                .unwrap()
                .chars()
                .count(),
            3000
        );
    }
}
