//! What an Application source tells the watchdog, and the bookkeeping that keeps it honest:
//! which deliveries are current (ordering) and when the source may vouch that an app has not
//! changed since it was last delivered (freshness). A source — Argo CD's REST stream and
//! listings today, the Kubernetes API next — does the IO and sends [`SourceMsg`]s in the order it
//! learnt them; [`Freshness`] sits between those messages and the judge.
//!
//! Pure: no IO, no clock, no async. The caller passes the time a message was received.

use crate::directive::AppRef;
use crate::snapshot::{AppKey, AppSnapshot};
use crate::time::Timestamp;
use std::collections::HashMap;

/// How many outstanding read and listing tickets are remembered.
pub const TICKETS_KEPT: u64 = 256;

/// How a delivery came to be: pushed by the change stream, read on request, or part of a
/// complete listing. Reads and listings carry the ticket of their request, so that an answer
/// older than a later stream delivery is recognized as such.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Stream,
    Read(u64),
    Listing(u64),
}

/// A problem on the source's side. The daemon warns and goes on; the self-check gate fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// One Application in a listing or on the stream could not be decoded.
    Unreadable(String),
    /// An app's observation could not be completed (its resource tree could not be read), so
    /// it is not judged: an incomplete observation must not pass for a healthy one.
    Incomplete { app: AppKey, why: String },
    /// Reading one app failed.
    ReadFailed { app: String, why: String },
    /// Argo CD refused to read one app: it answers `403 permission denied` both for an app the
    /// token may not see and for one that does not exist. Whether it exists is for a listing to
    /// say, never for this answer.
    AbsentOrForbidden { app: AppRef, why: String },
}

/// One message from a source, in the order the source learnt it.
#[derive(Clone, Debug, PartialEq)]
pub enum SourceMsg {
    /// The change stream is connected: from now on it delivers every change.
    Connected,
    /// The change stream is down; the source reconnects on its own.
    Lost(String),
    /// The stream could not deliver a message: any app may have changed.
    Skipped(String),
    /// An app changed and its observation is being completed: the last delivery of it is no
    /// longer current.
    Changing(AppKey),
    /// The stream delivered an app that nothing watches: only its freshness is kept, so that
    /// the stream can vouch for it as soon as a watch starts and reads it.
    Unwatched(AppKey),
    /// An app as seen. `resource_version` orders deliveries of one app when the source has one.
    Observed {
        snapshot: Box<AppSnapshot>,
        origin: Origin,
        resource_version: Option<u64>,
    },
    /// An app that does not exist (deleted on the stream, or not found when read).
    Absent { app: AppRef, origin: Origin },
    /// A listing finished: every app it held that is watched was delivered before this message;
    /// `present` names every app it held. `complete` is false when an item could not be read:
    /// then the listing's silence about an app proves nothing.
    Listed {
        ticket: u64,
        present: Vec<AppKey>,
        complete: bool,
    },
    /// A listing failed as a whole.
    ListingFailed { ticket: u64, why: String },
    /// Something the watchdog should hear about; no observation.
    Problem(Problem),
}

/// Ordering and freshness of one source's deliveries. Vouching is the basis of stability over
/// long windows: Argo CD streams every change, so while the connection that delivered an app
/// stays up, its silence means "unchanged". That holds only while the source was heard from
/// lately (a peer that vanished without closing the connection looks connected for minutes),
/// no message was skipped since, and no change of the app is half-delivered.
#[derive(Clone, Debug, Default)]
pub struct Freshness {
    connected: bool,
    /// Incremented at every (re)connection of the stream.
    generation: u64,
    /// The stream connection that last delivered each app.
    delivered_by: HashMap<AppKey, u64>,
    /// The last time the source answered anything.
    last_contact: Option<Timestamp>,
    /// A counter of admitted stream deliveries, and per app the value at its last one.
    seq: u64,
    stream_seq_of: HashMap<AppKey, u64>,
    /// The stream counter when each outstanding read or listing was requested.
    tickets: HashMap<u64, u64>,
    next_ticket: u64,
    resource_version: HashMap<AppKey, u64>,
}

impl Freshness {
    pub fn new() -> Freshness {
        Freshness::default()
    }

    /// A ticket for a read or listing about to be requested. Only the latest
    /// [`TICKETS_KEPT`] are remembered: an answer to an older request is not trusted over the
    /// stream (reads are never forgotten otherwise, since several answers share a ticket).
    pub fn ticket(&mut self) -> u64 {
        self.next_ticket += 1;
        self.tickets.insert(self.next_ticket, self.seq);
        let oldest_kept = self.next_ticket.saturating_sub(TICKETS_KEPT);
        if self.tickets.len() as u64 > TICKETS_KEPT {
            self.tickets.retain(|t, _| *t > oldest_kept);
        }
        self.next_ticket
    }

    /// Whether the stream is connected.
    pub fn connected(&self) -> bool {
        self.connected
    }

    /// Take one message in, as received at `now`. Returns it when it is current, `None` when a
    /// later delivery already superseded it (an answer to a read that a stream update overtook,
    /// an older resource version). Bookkeeping messages are always returned.
    pub fn admit(&mut self, msg: SourceMsg, now: Timestamp) -> Option<SourceMsg> {
        match &msg {
            SourceMsg::Lost(_) => {
                self.connected = false;
                return Some(msg);
            }
            SourceMsg::ListingFailed { ticket, .. } => {
                self.tickets.remove(ticket);
                return Some(msg);
            }
            SourceMsg::Problem(_) => return Some(msg),
            _ => {}
        }
        self.last_contact = Some(now);
        match &msg {
            SourceMsg::Connected => {
                self.connected = true;
                self.generation += 1;
            }
            SourceMsg::Skipped(_) => {
                // The skipped message may be any app's: vouch for none until each is delivered again.
                self.delivered_by.clear();
            }
            SourceMsg::Changing(key) => {
                self.delivered_by.remove(key);
                self.stream_delivery(key);
            }
            SourceMsg::Unwatched(key) => {
                self.stream_delivery(key);
                self.delivered_by.insert(key.clone(), self.generation);
            }
            SourceMsg::Observed {
                snapshot,
                origin,
                resource_version,
            } => {
                let key = snapshot.key();
                if let (Some(rv), Some(have)) = (resource_version, self.resource_version.get(&key))
                    && rv < have
                {
                    return None;
                }
                if self.superseded(&key, *origin) {
                    return None;
                }
                if let Some(rv) = resource_version {
                    self.resource_version.insert(key.clone(), *rv);
                }
                if *origin == Origin::Stream {
                    self.stream_delivery(&key);
                    self.delivered_by.insert(key, self.generation);
                }
            }
            SourceMsg::Absent { app, origin } => {
                let keys: Vec<AppKey> = self
                    .stream_seq_of
                    .keys()
                    .filter(|k| app.matches(&k.namespace, &k.name))
                    .cloned()
                    .collect();
                if keys.iter().any(|k| self.superseded(k, *origin)) {
                    return None;
                }
                for k in &keys {
                    self.delivered_by.remove(k);
                    self.resource_version.remove(k);
                }
                if *origin == Origin::Stream {
                    for k in &keys {
                        self.stream_delivery(k);
                    }
                }
            }
            SourceMsg::Listed { ticket, .. } => {
                // The ticket stays known for `absent_is_current` until the caller is done.
                let _ = ticket;
            }
            _ => {}
        }
        Some(msg)
    }

    /// Whether a listing's silence about `app` still means it is absent: not when the stream
    /// delivered the app after the listing was requested.
    pub fn absent_is_current(&self, app: &AppRef, ticket: u64) -> bool {
        !self
            .stream_seq_of
            .keys()
            .filter(|k| app.matches(&k.namespace, &k.name))
            .any(|k| self.superseded(k, Origin::Listing(ticket)))
    }

    /// The caller is done with a read's or listing's answers.
    pub fn forget(&mut self, ticket: u64) {
        self.tickets.remove(&ticket);
    }

    /// The apps the source vouches are unchanged since their last delivered observation.
    pub fn vouched(&self, now: Timestamp, stale_after_ms: i64) -> Vec<AppKey> {
        let heard_lately = self
            .last_contact
            .is_some_and(|t| now.ms_since(t) <= stale_after_ms);
        if !self.connected || !heard_lately {
            return Vec::new();
        }
        let mut keys: Vec<AppKey> = self
            .delivered_by
            .iter()
            .filter(|(_, g)| **g == self.generation)
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort();
        keys
    }

    /// Whether an answer of `origin` about `key` is older than the app's last stream delivery.
    fn superseded(&self, key: &AppKey, origin: Origin) -> bool {
        let ticket = match origin {
            Origin::Stream => return false,
            Origin::Read(t) | Origin::Listing(t) => t,
        };
        let Some(asked_at) = self.tickets.get(&ticket) else {
            // An unknown ticket cannot be placed in time: it is not trusted over the stream.
            return self.stream_seq_of.contains_key(key);
        };
        self.stream_seq_of.get(key).is_some_and(|s| s > asked_at)
    }

    fn stream_delivery(&mut self, key: &AppKey) {
        self.seq += 1;
        self.stream_seq_of.insert(key.clone(), self.seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{AppSnapshot, Health, ResourceHealthSource, SourceFacts};

    fn key(name: &str) -> AppKey {
        AppKey {
            namespace: "argocd".into(),
            name: name.into(),
        }
    }

    fn observed(name: &str, origin: Origin, rv: Option<u64>) -> SourceMsg {
        let snapshot = AppSnapshot {
            namespace: "argocd".into(),
            name: name.into(),
            source: SourceFacts::NotFromRepo { repos: Vec::new() },
            sync_status: "Synced".into(),
            sync_revision: String::new(),
            health: Health::Healthy,
            health_message: String::new(),
            operation_running: false,
            last_operation: None,
            unhealthy_resources: Vec::new(),
            resource_health_source: ResourceHealthSource::Application,
            health_stale: false,
            automated_sync: true,
            reach_candidates: Vec::new(),
            compared_elsewhere: None,
            comparison_error: None,
            source_hydrator: false,
        };
        SourceMsg::Observed {
            snapshot: Box::new(snapshot),
            origin,
            resource_version: rv,
        }
    }

    const T: Timestamp = Timestamp(1_000_000);

    #[test]
    fn the_stream_vouches_only_for_apps_its_current_connection_delivered() {
        let mut f = Freshness::new();
        f.admit(SourceMsg::Connected, T);
        f.admit(observed("web", Origin::Stream, None), T);
        assert_eq!(f.vouched(T.plus_ms(1000), 30_000), vec![key("web")]);
        // A reconnection: what the old connection delivered is no longer vouched for.
        f.admit(SourceMsg::Lost("closed".into()), T.plus_ms(2000));
        assert!(f.vouched(T.plus_ms(2000), 30_000).is_empty());
        f.admit(SourceMsg::Connected, T.plus_ms(3000));
        assert!(f.vouched(T.plus_ms(3000), 30_000).is_empty());
        f.admit(observed("web", Origin::Stream, None), T.plus_ms(3500));
        assert_eq!(f.vouched(T.plus_ms(4000), 30_000), vec![key("web")]);
    }

    #[test]
    fn a_silent_peer_a_skipped_message_or_a_half_delivered_change_vouches_for_nothing() {
        let mut f = Freshness::new();
        f.admit(SourceMsg::Connected, T);
        f.admit(observed("web", Origin::Stream, None), T);
        // Not heard from within stale-after: the peer may be gone without closing.
        assert!(f.vouched(T.plus_ms(30_001), 30_000).is_empty());
        assert_eq!(f.vouched(T.plus_ms(30_000), 30_000), vec![key("web")]);

        f.admit(SourceMsg::Skipped("bad line".into()), T.plus_ms(100));
        assert!(f.vouched(T.plus_ms(200), 30_000).is_empty());
        f.admit(observed("web", Origin::Stream, None), T.plus_ms(300));
        assert_eq!(f.vouched(T.plus_ms(400), 30_000), vec![key("web")]);

        f.admit(SourceMsg::Changing(key("web")), T.plus_ms(500));
        assert!(f.vouched(T.plus_ms(600), 30_000).is_empty());
    }

    #[test]
    fn a_read_answered_after_a_newer_stream_delivery_is_dropped() {
        let mut f = Freshness::new();
        f.admit(SourceMsg::Connected, T);
        let ticket = f.ticket();
        // The stream delivers the app after the read was requested, before its answer.
        assert!(f.admit(observed("web", Origin::Stream, None), T).is_some());
        assert_eq!(
            f.admit(observed("web", Origin::Read(ticket), None), T),
            None
        );
        // Another app the read answered for is current.
        assert!(
            f.admit(observed("api", Origin::Read(ticket), None), T)
                .is_some()
        );
        // A read requested after the stream delivery is current.
        let later = f.ticket();
        assert!(
            f.admit(observed("web", Origin::Read(later), None), T)
                .is_some()
        );
    }

    #[test]
    fn only_recent_tickets_are_remembered_and_an_unknown_one_is_not_trusted_over_the_stream() {
        let mut f = Freshness::new();
        let first = f.ticket();
        for _ in 0..TICKETS_KEPT + 10 {
            f.ticket();
        }
        assert!(f.tickets.len() as u64 <= TICKETS_KEPT);
        // Never delivered by the stream: any answer is current.
        assert!(
            f.admit(observed("web", Origin::Read(first), None), T)
                .is_some()
        );
        f.admit(observed("web", Origin::Stream, None), T);
        assert_eq!(f.admit(observed("web", Origin::Read(first), None), T), None);
    }

    #[test]
    fn an_older_resource_version_is_dropped_and_a_newer_one_kept() {
        let mut f = Freshness::new();
        assert!(
            f.admit(observed("web", Origin::Stream, Some(7)), T)
                .is_some()
        );
        assert_eq!(f.admit(observed("web", Origin::Stream, Some(6)), T), None);
        assert!(
            f.admit(observed("web", Origin::Stream, Some(7)), T)
                .is_some()
        );
        assert!(
            f.admit(observed("web", Origin::Stream, Some(8)), T)
                .is_some()
        );
    }

    #[test]
    fn a_listing_does_not_call_absent_an_app_the_stream_delivered_since_it_was_asked() {
        let mut f = Freshness::new();
        let app = AppRef {
            namespace: None,
            name: "web".into(),
        };
        let ticket = f.ticket();
        assert!(f.absent_is_current(&app, ticket));
        f.admit(observed("web", Origin::Stream, None), T);
        assert!(!f.absent_is_current(&app, ticket));
        let absent = SourceMsg::Absent {
            app: app.clone(),
            origin: Origin::Read(ticket),
        };
        assert_eq!(f.admit(absent, T), None);
        let later = f.ticket();
        assert!(f.absent_is_current(&app, later));
    }

    #[test]
    fn a_stream_deletion_ends_vouching_for_the_app() {
        let mut f = Freshness::new();
        f.admit(SourceMsg::Connected, T);
        f.admit(observed("web", Origin::Stream, Some(3)), T);
        let deleted = SourceMsg::Absent {
            app: AppRef {
                namespace: Some("argocd".into()),
                name: "web".into(),
            },
            origin: Origin::Stream,
        };
        assert!(f.admit(deleted, T).is_some());
        assert!(f.vouched(T, 30_000).is_empty());
        // A re-created app starts its resource versions afresh.
        assert!(
            f.admit(observed("web", Origin::Stream, Some(1)), T)
                .is_some()
        );
    }
}
