//! Push webhooks (`docs/deploy.md#push-hooks`): `POST /hooks/github`, `/hooks/gitlab` and
//! `/hooks/gitea` on `--listen`'s port. A delivery verified with the forge's own scheme — GitHub's
//! `X-Hub-Signature-256` and Gitea's `X-Gitea-Signature` (HMAC-SHA256 of the body under the
//! webhook's secret), GitLab's `X-Gitlab-Token` (the secret itself) — that reports a push to the
//! tracked branch asks the runtime for a fetch ([`FetchNudge`]); the fetch tick stays the safety
//! net. A delivery that fails verification is `401` and a warning, never a fetch. However many
//! arrive, one fetch is in flight and one queued: the nudge holds one permit, and the runtime
//! merges what is asked while a fetch runs.
//!
//! The signature covers no timestamp, so a captured delivery replays: a delivery id seen before
//! (`X-GitHub-Delivery`, `X-Gitea-Delivery`, GitLab's `Idempotency-Key` or `X-Gitlab-Event-UUID`)
//! is answered without a fetch. A replay could only cause a fetch, which changes nothing.

use crate::clock::Clock;
use crate::metrics::Metrics;
use crate::output::Output;
use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use greenlight_core::secret::Secret;
use greenlight_core::time::Timestamp;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

/// The largest delivery read: GitHub caps its payloads at 25 MB; a larger body is `413`.
pub const BODY_LIMIT: usize = 25 * 1024 * 1024;

/// How many delivery ids are remembered as handled.
const DELIVERIES_KEPT: usize = 1024;

/// Refused deliveries are warned about at most this often (with the count since the last).
const REFUSED_WARN_EVERY_MS: i64 = 60_000;

/// What the listener tells the runtime: fetch now. One permit at most, so a flood of pushes
/// while the runtime is busy is one fetch.
#[derive(Default)]
pub struct FetchNudge {
    notify: tokio::sync::Notify,
    branch: OnceLock<String>,
}

impl FetchNudge {
    pub fn new() -> Arc<FetchNudge> {
        Arc::new(FetchNudge::default())
    }

    /// Ask for a fetch (coalesced with any not yet taken).
    pub fn nudge(&self) {
        self.notify.notify_one();
    }

    /// Resolves when a fetch was asked for.
    pub async fn nudged(&self) {
        self.notify.notified().await
    }

    /// The runtime's tracked branch, once it knows it: pushes to other refs are ignored.
    pub fn set_branch(&self, branch: &str) {
        let _ = self.branch.set(branch.to_string());
    }

    fn branch(&self) -> Option<&str> {
        self.branch.get().map(String::as_str)
    }
}

/// A forge whose push webhooks greenlight verifies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forge {
    GitHub,
    GitLab,
    Gitea,
}

impl Forge {
    pub const ALL: [Forge; 3] = [Forge::GitHub, Forge::GitLab, Forge::Gitea];

    /// Its route's last segment and its metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            Forge::GitHub => "github",
            Forge::GitLab => "gitlab",
            Forge::Gitea => "gitea",
        }
    }

    /// The flag that names its secret's file.
    pub fn flag(self) -> &'static str {
        match self {
            Forge::GitHub => "--github-webhook-secret-file",
            Forge::GitLab => "--gitlab-webhook-token-file",
            Forge::Gitea => "--gitea-webhook-secret-file",
        }
    }

    /// The header that authenticates its deliveries.
    fn auth_header(self) -> &'static str {
        match self {
            Forge::GitHub => "X-Hub-Signature-256",
            Forge::GitLab => "X-Gitlab-Token",
            Forge::Gitea => "X-Gitea-Signature",
        }
    }
}

/// The secrets of the forges whose hooks are served; a forge without one has no route.
#[derive(Clone, Debug, Default)]
pub struct HookSecrets {
    pub github: Option<Secret>,
    pub gitlab: Option<Secret>,
    pub gitea: Option<Secret>,
}

impl HookSecrets {
    fn of(&self, forge: Forge) -> Option<&Secret> {
        match forge {
            Forge::GitHub => self.github.as_ref(),
            Forge::GitLab => self.gitlab.as_ref(),
            Forge::Gitea => self.gitea.as_ref(),
        }
    }

    pub fn any(&self) -> bool {
        Forge::ALL.iter().any(|f| self.of(*f).is_some())
    }
}

/// The hooks' state, shared by their handlers.
pub struct PushHooks {
    secrets: HookSecrets,
    nudge: Arc<FetchNudge>,
    metrics: Arc<Metrics>,
    out: Output,
    clock: Arc<dyn Clock>,
    seen: Mutex<Seen>,
    refused: Mutex<Refused>,
}

#[derive(Default)]
struct Seen {
    order: VecDeque<String>,
    ids: HashSet<String>,
}

impl Seen {
    /// Records `id`; false when it was seen already.
    fn first(&mut self, id: &str) -> bool {
        if self.ids.contains(id) {
            return false;
        }
        if self.order.len() >= DELIVERIES_KEPT
            && let Some(old) = self.order.pop_front()
        {
            self.ids.remove(&old);
        }
        self.order.push_back(id.to_string());
        self.ids.insert(id.to_string());
        true
    }
}

#[derive(Default)]
struct Refused {
    warned_at: Option<Timestamp>,
    /// Refused since the last warning.
    since: u64,
}

/// What a verified delivery asks for.
#[derive(Debug, PartialEq, Eq)]
enum Asks {
    Fetch,
    /// GitHub's `ping` when the hook is created.
    Ping,
    /// Another event, or a push to another ref: why it is ignored.
    Ignore(String),
}

impl PushHooks {
    pub fn new(
        secrets: HookSecrets,
        nudge: Arc<FetchNudge>,
        metrics: Arc<Metrics>,
        out: Output,
        clock: Arc<dyn Clock>,
    ) -> Arc<PushHooks> {
        Arc::new(PushHooks {
            secrets,
            nudge,
            metrics,
            out,
            clock,
            seen: Mutex::new(Seen::default()),
            refused: Mutex::new(Refused::default()),
        })
    }

    /// The routes of the forges with a secret.
    pub fn routes(self: &Arc<PushHooks>) -> Router {
        let mut router = Router::new();
        for forge in Forge::ALL {
            if self.secrets.of(forge).is_some() {
                let hooks = self.clone();
                router = router.route(
                    &format!("/hooks/{}", forge.as_str()),
                    post(move |headers: HeaderMap, body: Bytes| async move {
                        hooks.receive(forge, &headers, &body)
                    }),
                );
            }
        }
        router.layer(DefaultBodyLimit::max(BODY_LIMIT))
    }

    fn receive(&self, forge: Forge, headers: &HeaderMap, body: &[u8]) -> Response {
        let label = forge.as_str();
        let Some(secret) = self.secrets.of(forge) else {
            return answer(StatusCode::NOT_FOUND, "no such hook");
        };
        if let Err(why) = verify(forge, secret, headers, body) {
            self.metrics.push_hook(label, "refused");
            self.warn_refused(forge, &why);
            return answer(StatusCode::UNAUTHORIZED, &why);
        }
        // A standby fetches nothing: the leader does, at its next fetch or when Argo CD reports
        // the revision. A success, not an error: a forge disables a hook that keeps failing,
        // and a Service spreads deliveries over every replica.
        if self.metrics.standing_by() {
            self.metrics.push_hook(label, "standby");
            return answer(
                StatusCode::OK,
                "standing by: the leading replica fetches at its next fetch interval, or when Argo CD reports the revision",
            );
        }
        if let Some(id) = delivery_id(forge, headers)
            && !self.seen.lock().expect("seen lock").first(&id)
        {
            self.metrics.push_hook(label, "duplicate");
            return answer(
                StatusCode::OK,
                &format!("delivery {id} was received before: nothing to do"),
            );
        }
        match asks(forge, headers, body, self.nudge.branch()) {
            Asks::Fetch => {
                self.metrics.push_hook(label, "fetch");
                self.nudge.nudge();
                let branch = self.nudge.branch().unwrap_or("the tracked branch");
                answer(StatusCode::ACCEPTED, &format!("fetching {branch}"))
            }
            Asks::Ping => {
                self.metrics.push_hook(label, "ignored");
                answer(StatusCode::OK, "pong")
            }
            Asks::Ignore(why) => {
                self.metrics.push_hook(label, "ignored");
                answer(StatusCode::OK, &format!("ignored: {why}"))
            }
        }
    }

    fn warn_refused(&self, forge: Forge, why: &str) {
        let now = self.clock.now();
        let mut r = self.refused.lock().expect("refused lock");
        r.since += 1;
        if r.warned_at
            .is_some_and(|at| now.ms_since(at) < REFUSED_WARN_EVERY_MS)
        {
            return;
        }
        let more = match r.since {
            1 => String::new(),
            n => format!(" ({n} refused since the last warning)"),
        };
        r.warned_at = Some(now);
        r.since = 0;
        drop(r);
        self.out.warn(
            now,
            &format!(
                "push hook /hooks/{} refused: {why}; no fetch{more}",
                forge.as_str()
            ),
        );
    }
}

fn answer(status: StatusCode, text: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{text}\n"),
    )
        .into_response()
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether the delivery is the forge's, by its scheme; the error is the refusal's words (never
/// the secret, nor what was sent in its place).
fn verify(forge: Forge, secret: &Secret, headers: &HeaderMap, body: &[u8]) -> Result<(), String> {
    let name = forge.auth_header();
    let Some(given) = header_str(headers, name) else {
        return Err(format!("no {name} header"));
    };
    let key = secret.expose().as_bytes();
    match forge {
        Forge::GitHub | Forge::Gitea => {
            let hex = match forge {
                Forge::GitHub => given.strip_prefix("sha256="),
                _ => Some(given),
            };
            let Some(tag) = hex.and_then(from_hex) else {
                return Err(format!("{name} is not a hex HMAC-SHA256"));
            };
            let mut mac =
                Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
            mac.update(body);
            mac.verify_slice(&tag)
                .map_err(|_| format!("{name} does not match the body under {}", forge.flag()))
        }
        Forge::GitLab => {
            // Constant-time: the two tokens' MACs under one key are compared, not the tokens.
            let mac_of = |token: &[u8]| {
                let mut m = Hmac::<Sha256>::new_from_slice(b"greenlight gitlab token")
                    .expect("HMAC takes a key of any length");
                m.update(token);
                m
            };
            let expected = mac_of(key).finalize().into_bytes();
            mac_of(given.as_bytes())
                .verify_slice(&expected)
                .map_err(|_| format!("{name} is not the token of {}", forge.flag()))
        }
    }
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// The delivery's id, if the forge sent one.
fn delivery_id(forge: Forge, headers: &HeaderMap) -> Option<String> {
    let names: &[&str] = match forge {
        Forge::GitHub => &["X-GitHub-Delivery"],
        Forge::Gitea => &["X-Gitea-Delivery"],
        // GitLab 17.4+ sends the same Idempotency-Key on a retry; the event's UUID before.
        Forge::GitLab => &["Idempotency-Key", "X-Gitlab-Event-UUID"],
    };
    names
        .iter()
        .find_map(|n| header_str(headers, n))
        .filter(|id| !id.is_empty())
        .map(|id| format!("{}:{id}", forge.as_str()))
}

/// What a verified delivery asks for: a push to `branch` (or to any branch while the runtime
/// does not know its branch yet) is a fetch. A body that is not JSON (a form-encoded payload)
/// whose event is a push is a fetch too: a fetch is harmless, a missed push is not.
fn asks(forge: Forge, headers: &HeaderMap, body: &[u8], branch: Option<&str>) -> Asks {
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let event = match forge {
        Forge::GitHub => header_str(headers, "X-GitHub-Event"),
        Forge::Gitea => header_str(headers, "X-Gitea-Event"),
        Forge::GitLab => header_str(headers, "X-Gitlab-Event"),
    }
    .unwrap_or("");
    let push = match forge {
        Forge::GitHub if event == "ping" => return Asks::Ping,
        Forge::GitHub | Forge::Gitea => event == "push",
        // A system hook carries pushes too, told by the body's kind.
        Forge::GitLab => {
            event == "Push Hook"
                || (event == "System Hook"
                    && json
                        .as_ref()
                        .and_then(|j| j.get("object_kind"))
                        .and_then(|k| k.as_str())
                        == Some("push"))
        }
    };
    if !push {
        return Asks::Ignore(format!("a {event:?} event, not a push"));
    }
    let Some(reference) = json
        .as_ref()
        .and_then(|j| j.get("ref"))
        .and_then(|r| r.as_str())
    else {
        return Asks::Fetch;
    };
    match (reference.strip_prefix("refs/heads/"), branch) {
        (None, _) => Asks::Ignore(format!("a push to {reference}, not to a branch")),
        (Some(b), Some(tracked)) if b != tracked => Asks::Ignore(format!(
            "a push to {b}, not to the tracked branch {tracked}"
        )),
        _ => Asks::Fetch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn sign(secret: &str, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(body);
        mac.finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn each_forge_is_verified_by_its_own_scheme() {
        let secret = Secret::new("s3cret");
        let body = br#"{"ref":"refs/heads/main"}"#;
        let sig = sign("s3cret", body);
        let good = [
            (
                Forge::GitHub,
                headers(&[("X-Hub-Signature-256", &format!("sha256={sig}"))]),
            ),
            (Forge::Gitea, headers(&[("X-Gitea-Signature", &sig)])),
            (Forge::GitLab, headers(&[("X-Gitlab-Token", "s3cret")])),
        ];
        for (forge, h) in &good {
            assert_eq!(verify(*forge, &secret, h, body), Ok(()), "{forge:?}");
            // The same headers over another body (or, for GitLab, a wrong secret) fail.
            let other = Secret::new("other");
            assert!(verify(*forge, &other, h, body).is_err(), "{forge:?}");
        }
        let tampered = br#"{"ref":"refs/heads/evil"}"#;
        assert!(verify(Forge::GitHub, &secret, &good[0].1, tampered).is_err());
        assert!(verify(Forge::Gitea, &secret, &good[1].1, tampered).is_err());
        // GitHub's header without its prefix, odd hex, no header at all.
        let e = verify(
            Forge::GitHub,
            &secret,
            &headers(&[("X-Hub-Signature-256", &sig)]),
            body,
        );
        assert!(e.unwrap_err().contains("not a hex HMAC-SHA256"));
        let e = verify(
            Forge::Gitea,
            &secret,
            &headers(&[("X-Gitea-Signature", "abc")]),
            body,
        );
        assert!(e.is_err());
        let e = verify(Forge::GitLab, &secret, &HeaderMap::new(), body).unwrap_err();
        assert_eq!(e, "no X-Gitlab-Token header");
        // The refusal never quotes the secret or what was sent in its place.
        let e = verify(
            Forge::GitLab,
            &secret,
            &headers(&[("X-Gitlab-Token", "guess-123")]),
            body,
        )
        .unwrap_err();
        assert!(!e.contains("guess-123") && !e.contains("s3cret"), "{e}");
    }

    #[test]
    fn a_push_to_the_tracked_branch_is_a_fetch_and_anything_else_is_not() {
        let gh = |event: &str| headers(&[("X-GitHub-Event", event)]);
        let main = br#"{"ref":"refs/heads/main"}"#;
        assert_eq!(
            asks(Forge::GitHub, &gh("push"), main, Some("main")),
            Asks::Fetch
        );
        assert_eq!(asks(Forge::GitHub, &gh("push"), main, None), Asks::Fetch);
        assert_eq!(
            asks(Forge::GitHub, &gh("ping"), b"{}", Some("main")),
            Asks::Ping
        );
        let other = asks(
            Forge::GitHub,
            &gh("push"),
            br#"{"ref":"refs/heads/dev"}"#,
            Some("main"),
        );
        assert!(matches!(other, Asks::Ignore(w) if w.contains("dev")));
        let tag = asks(
            Forge::GitHub,
            &gh("push"),
            br#"{"ref":"refs/tags/v1"}"#,
            Some("main"),
        );
        assert!(matches!(tag, Asks::Ignore(w) if w.contains("not to a branch")));
        assert!(matches!(
            asks(Forge::GitHub, &gh("issues"), main, Some("main")),
            Asks::Ignore(_)
        ));
        // A form-encoded push (no JSON to read the ref from) is a fetch.
        assert_eq!(
            asks(Forge::GitHub, &gh("push"), b"payload=%7B%7D", Some("main")),
            Asks::Fetch
        );
        let gl = |event: &str| headers(&[("X-Gitlab-Event", event)]);
        assert_eq!(
            asks(Forge::GitLab, &gl("Push Hook"), main, Some("main")),
            Asks::Fetch
        );
        let system = br#"{"object_kind":"push","ref":"refs/heads/main"}"#;
        assert_eq!(
            asks(Forge::GitLab, &gl("System Hook"), system, Some("main")),
            Asks::Fetch
        );
        assert!(matches!(
            asks(Forge::GitLab, &gl("Tag Push Hook"), main, Some("main")),
            Asks::Ignore(_)
        ));
        let gt = headers(&[("X-Gitea-Event", "push")]);
        assert_eq!(asks(Forge::Gitea, &gt, main, Some("main")), Asks::Fetch);
    }

    /// A replica that stands by answers a verified push with a success that says so, and
    /// fetches nothing (the nudge stays untaken); a bad signature is refused there too.
    #[tokio::test]
    async fn a_standby_answers_a_push_without_fetching() {
        use crate::clock::{Clock, SystemClock};
        use crate::metrics::{Metrics, Role};
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let metrics = Arc::new(Metrics::new(clock.clone()));
        metrics.set_role(Role::Standby {
            identity: "b".into(),
            leader: Some("a".into()),
        });
        let nudge = FetchNudge::new();
        let hooks = PushHooks::new(
            HookSecrets {
                github: Some(Secret::new("s3cret")),
                gitlab: None,
                gitea: None,
            },
            nudge.clone(),
            metrics.clone(),
            Output::new(crate::output::LogFormat::Text),
            clock,
        );
        let body = br#"{"ref":"refs/heads/main"}"#;
        let signed = headers(&[
            ("X-GitHub-Event", "push"),
            ("X-GitHub-Delivery", "d-1"),
            (
                "X-Hub-Signature-256",
                &format!("sha256={}", sign("s3cret", body)),
            ),
        ]);
        let r = hooks.receive(Forge::GitHub, &signed, body);
        assert_eq!(r.status(), StatusCode::OK);
        let bad = headers(&[
            ("X-GitHub-Event", "push"),
            ("X-Hub-Signature-256", "sha256=00"),
        ]);
        assert_eq!(
            hooks.receive(Forge::GitHub, &bad, body).status(),
            StatusCode::UNAUTHORIZED
        );
        let nudged =
            tokio::time::timeout(std::time::Duration::from_millis(50), nudge.nudged()).await;
        assert!(nudged.is_err(), "a standby asked for no fetch");
        let text = metrics.render(false);
        assert!(
            text.contains(
                r#"greenlight_push_hook_deliveries_total{forge="github",result="standby"} 1"#
            ),
            "{text}"
        );
        // Leading now: the same delivery (not recorded as seen while standing by) fetches.
        metrics.set_role(Role::Leader {
            identity: "b".into(),
        });
        let r = hooks.receive(Forge::GitHub, &signed, body);
        assert_eq!(r.status(), StatusCode::ACCEPTED);
    }

    #[test]
    fn a_delivery_id_is_remembered_within_its_bound() {
        let mut seen = Seen::default();
        assert!(seen.first("a"));
        assert!(!seen.first("a"));
        for i in 0..DELIVERIES_KEPT {
            seen.first(&i.to_string());
        }
        assert!(
            seen.first("a"),
            "the oldest id is forgotten once the bound is reached"
        );
        assert_eq!(seen.order.len(), DELIVERIES_KEPT);
        assert_eq!(seen.ids.len(), DELIVERIES_KEPT);
    }
}
