//! What an Application source tells the watchdog, and the bookkeeping that keeps it honest:
//! which deliveries are current (ordering) and when the source may vouch that an app has not
//! changed since it was last delivered (freshness). A source — Argo CD's REST stream and
//! listings today, the Kubernetes API next — does the IO and sends [`SourceMsg`]s in the order it
//! learnt them; [`Freshness`] sits between those messages and the judge.
//!
//! Pure: no IO, no clock, no async. The caller passes the time a message was received.

use crate::directive::AppRef;
use crate::snapshot::{AppKey, AppSnapshot, Glimpse};
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
    /// Reading one app failed. `app` names it as it was asked: `namespace/name`, or the name
    /// alone.
    ReadFailed { app: String, why: String },
    /// Argo CD refused to read one app: it answers `403 permission denied` both for an app the
    /// token may not see and for one that does not exist. Whether it exists is for a listing to
    /// say, never for this answer.
    AbsentOrForbidden { app: AppRef, why: String },
}

/// One message from a source, in the order the source learnt it.
#[derive(Clone, Debug, PartialEq)]
pub enum SourceMsg {
    /// The change stream is connected. Argo CD does not promise that it delivers every change
    /// (the initial burst is sent before it subscribes; a slow reader's events are dropped), so
    /// only a complete listing asked for after this makes the stream's silence mean anything.
    Connected,
    /// The stream is alive though nothing changed (a server-sent-events heartbeat).
    Heartbeat,
    /// The change stream is down; the source reconnects on its own.
    Lost(String),
    /// The stream could not deliver a message: any app may have changed.
    Skipped(String),
    /// An app changed and its observation is being completed: the last delivery of it is no
    /// longer current.
    Changing(AppKey),
    /// The stream (or a listing) delivered an app that nothing watches: its freshness is kept,
    /// so that the stream can vouch for it as soon as a watch starts and reads it, and its
    /// glimpse, the baseline of a watch that starts later.
    Unwatched {
        key: AppKey,
        glimpse: Glimpse,
        origin: Origin,
    },
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
/// long windows: while the stream is connected and alive, its silence about an app means
/// "unchanged" — but Argo CD's stream may lose updates (between the initial burst and its
/// subscription, and when a reader falls behind), so the source vouches only when all hold:
///
/// - the stream is connected, and a *complete listing* asked for after the last suspected gap
///   (a (re)connection, a skipped message, a silence past stale-after) has answered: the
///   listing is the baseline the stream's later silence builds on;
/// - the stream showed life (a message or a heartbeat) within stale-after;
/// - the app was delivered (by the stream, a read or a listing) since the connection, nothing
///   of it is half-delivered, and no read or listing found it changed behind the stream's back.
///
/// A read or listing that brings a resource version newer than the stream's last delivery of an
/// app is a dropped update: a gap, reported by [`Freshness::take_missed`].
#[derive(Clone, Debug)]
pub struct Freshness {
    stale_after_ms: i64,
    connected: bool,
    /// Incremented at every (re)connection of the stream.
    generation: u64,
    /// The stream connection in which each app was last delivered.
    delivered_by: HashMap<AppKey, u64>,
    /// The last sign of life of the stream (a message or a heartbeat).
    last_life: Option<Timestamp>,
    /// Incremented at every suspected gap in the stream; a complete listing asked for within the
    /// current one closes it.
    gap_epoch: u64,
    listed_epoch: Option<u64>,
    /// A counter of admitted stream deliveries, and per app the value at its last one.
    seq: u64,
    stream_seq_of: HashMap<AppKey, u64>,
    /// The stream counter and gap epoch when each outstanding read or listing was requested.
    tickets: HashMap<u64, (u64, u64)>,
    next_ticket: u64,
    resource_version: HashMap<AppKey, u64>,
    /// Apps a read or listing found changed behind the stream's back, not yet taken.
    missed: Vec<AppKey>,
}

impl Freshness {
    /// `stale_after_ms`: how long the stream may stay silent (no message, no heartbeat) before
    /// it is suspected of a gap.
    pub fn new(stale_after_ms: i64) -> Freshness {
        Freshness {
            stale_after_ms,
            connected: false,
            generation: 0,
            delivered_by: HashMap::new(),
            last_life: None,
            gap_epoch: 0,
            listed_epoch: None,
            seq: 0,
            stream_seq_of: HashMap::new(),
            tickets: HashMap::new(),
            next_ticket: 0,
            resource_version: HashMap::new(),
            missed: Vec::new(),
        }
    }

    /// A ticket for a read or listing about to be requested. Only the latest
    /// [`TICKETS_KEPT`] are remembered: an answer to an older request is not trusted over the
    /// stream (reads are never forgotten otherwise, since several answers share a ticket).
    pub fn ticket(&mut self) -> u64 {
        self.next_ticket += 1;
        self.tickets
            .insert(self.next_ticket, (self.seq, self.gap_epoch));
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

    /// Whether a complete listing asked for since the last suspected gap has answered.
    pub fn baselined(&self) -> bool {
        self.listed_epoch == Some(self.gap_epoch)
    }

    /// The apps whose last read or listing found them changed behind the stream's back (a
    /// dropped update), each once.
    pub fn take_missed(&mut self) -> Vec<AppKey> {
        std::mem::take(&mut self.missed)
    }

    fn gap(&mut self) {
        self.gap_epoch += 1;
    }

    /// A sign of life of the stream at `now`; after a silence past stale-after, a gap.
    fn life(&mut self, now: Timestamp) {
        if self
            .last_life
            .is_some_and(|t| now.ms_since(t) > self.stale_after_ms)
        {
            self.gap();
        }
        self.last_life = Some(now);
    }

    /// Take one message in, as received at `now`. Returns it when it is current, `None` when a
    /// later delivery already superseded it (an answer to a read that a stream update overtook,
    /// an older resource version). Bookkeeping messages are always returned.
    pub fn admit(&mut self, msg: SourceMsg, now: Timestamp) -> Option<SourceMsg> {
        match &msg {
            SourceMsg::Lost(_) => {
                self.connected = false;
                self.gap();
                return Some(msg);
            }
            SourceMsg::ListingFailed { ticket, .. } => {
                self.tickets.remove(ticket);
                return Some(msg);
            }
            SourceMsg::Problem(_) => return Some(msg),
            _ => {}
        }
        match &msg {
            SourceMsg::Connected => {
                self.connected = true;
                self.generation += 1;
                self.gap();
                self.last_life = Some(now);
            }
            SourceMsg::Heartbeat => self.life(now),
            SourceMsg::Skipped(_) => {
                // The skipped message may be any app's: vouch for none until a listing again.
                self.life(now);
                self.delivered_by.clear();
                self.gap();
            }
            SourceMsg::Changing(key) => {
                self.life(now);
                self.delivered_by.remove(key);
                self.stream_delivery(key);
            }
            SourceMsg::Unwatched { key, origin, .. } => {
                if *origin == Origin::Stream {
                    self.life(now);
                    self.stream_delivery(key);
                } else if self.superseded(key, *origin) {
                    // The stream delivered the app after the listing was asked: older news.
                    return None;
                }
                self.delivered_by.insert(key.clone(), self.generation);
            }
            SourceMsg::Observed {
                snapshot,
                origin,
                resource_version,
            } => {
                let key = snapshot.key();
                let known = self.resource_version.get(&key).copied();
                if let (Some(rv), Some(have)) = (resource_version, known)
                    && *rv < have
                {
                    return None;
                }
                // Asked before the stream's last delivery of the app, an answer is older news —
                // unless its resource version says it is newer: then the stream missed it.
                let newer =
                    matches!((resource_version, known), (Some(rv), Some(have)) if *rv > have);
                if !newer && self.superseded(&key, *origin) {
                    return None;
                }
                if *origin == Origin::Stream {
                    self.life(now);
                    self.stream_delivery(&key);
                } else if let (Some(rv), Some(have)) = (resource_version, known)
                    && *rv > have
                    && self.connected
                    && self.delivered_by.get(&key) == Some(&self.generation)
                {
                    // Newer than what the connected stream last delivered, and the stream did
                    // not deliver it since this was asked: the stream lost an update.
                    self.missed.push(key.clone());
                    self.gap();
                }
                if let Some(rv) = resource_version {
                    self.resource_version.insert(key.clone(), *rv);
                }
                self.delivered_by.insert(key, self.generation);
            }
            SourceMsg::Absent { app, origin } => {
                if *origin == Origin::Stream {
                    self.life(now);
                }
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
            SourceMsg::Listed {
                ticket, complete, ..
            } => {
                // The ticket stays known for `absent_is_current` until the caller is done.
                if let Some((_, epoch)) = self.tickets.get(ticket)
                    && *complete
                    && self.connected
                    && *epoch == self.gap_epoch
                {
                    self.listed_epoch = Some(*epoch);
                }
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

    /// Whether the stream vouches at `now`: connected, heard from within stale-after, and
    /// baselined by a complete listing since its last suspected gap. While it does, a listing
    /// is only a safety net (`--resync-interval`); while it does not, listings observe.
    pub fn vouching(&self, now: Timestamp) -> bool {
        let alive = self
            .last_life
            .is_some_and(|t| now.ms_since(t) <= self.stale_after_ms);
        self.connected && alive && self.baselined()
    }

    /// While the stream vouches, the first moment it no longer does unless it is heard from
    /// again (its last sign of life plus stale-after); `None` while it does not vouch.
    pub fn vouching_until(&self) -> Option<Timestamp> {
        let last = self.last_life?;
        (self.connected && self.baselined()).then(|| last.plus_ms(self.stale_after_ms + 1))
    }

    /// The apps the source vouches are unchanged since their last delivered observation.
    pub fn vouched(&mut self, now: Timestamp) -> Vec<AppKey> {
        if !self.vouching(now) {
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

    /// The resource version of an app's last admitted delivery, when the source has one.
    pub fn resource_version(&self, key: &AppKey) -> Option<u64> {
        self.resource_version.get(key).copied()
    }

    /// Whether an answer of `origin` about `key` is older than the app's last stream delivery.
    fn superseded(&self, key: &AppKey, origin: Origin) -> bool {
        let ticket = match origin {
            Origin::Stream => return false,
            Origin::Read(t) | Origin::Listing(t) => t,
        };
        let Some((asked_at, _)) = self.tickets.get(&ticket) else {
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
            inputs: Default::default(),
            resources: Vec::new(),
        };
        SourceMsg::Observed {
            snapshot: Box::new(snapshot),
            origin,
            resource_version: rv,
        }
    }

    const T: Timestamp = Timestamp(1_000_000);

    const STALE: i64 = 30_000;

    /// A complete listing asked for and answered at `at`.
    fn listed(f: &mut Freshness, at: Timestamp) {
        let ticket = f.ticket();
        let msg = SourceMsg::Listed {
            ticket,
            present: Vec::new(),
            complete: true,
        };
        assert!(f.admit(msg, at).is_some());
        f.forget(ticket);
    }

    fn unwatched(name: &str, origin: Origin) -> SourceMsg {
        SourceMsg::Unwatched {
            key: key(name),
            glimpse: Glimpse {
                health: Health::Healthy,
                sync_revision: "a".repeat(40),
                operation_running: false,
                sync_status: "Synced".into(),
                last_operation_phase: None,
                last_operation_revision: None,
                chronic: Default::default(),
                source_paths: None,
            },
            origin,
        }
    }

    /// A listing's glimpse of an app nothing watches is older news than a stream delivery made
    /// after the listing was asked for: dropped, so that it never stands as the app's newest
    /// idle state (a baseline). One the stream did not overtake is taken.
    #[test]
    fn a_listings_glimpse_overtaken_by_the_stream_is_dropped() {
        let mut f = Freshness::new(STALE);
        f.admit(SourceMsg::Connected, T);
        let ticket = f.ticket();
        assert!(f.admit(unwatched("web", Origin::Stream), T).is_some());
        assert!(
            f.admit(unwatched("web", Origin::Listing(ticket)), T)
                .is_none()
        );
        assert!(
            f.admit(unwatched("api", Origin::Listing(ticket)), T)
                .is_some()
        );
        let later = f.ticket();
        assert!(
            f.admit(unwatched("web", Origin::Listing(later)), T)
                .is_some()
        );
    }

    #[test]
    fn the_stream_vouches_only_after_a_listing_asked_for_since_it_connected() {
        let mut f = Freshness::new(STALE);
        // A listing from before the connection is no baseline for it.
        let early = f.ticket();
        f.admit(SourceMsg::Connected, T);
        f.admit(observed("web", Origin::Stream, None), T);
        let msg = SourceMsg::Listed {
            ticket: early,
            present: Vec::new(),
            complete: true,
        };
        f.admit(msg, T);
        assert!(
            f.vouched(T.plus_ms(1000)).is_empty(),
            "the burst may have a gap"
        );
        listed(&mut f, T.plus_ms(1000));
        assert_eq!(f.vouched(T.plus_ms(1000)), vec![key("web")]);
        // A reconnection: nothing is vouched for until a listing after it.
        f.admit(SourceMsg::Lost("closed".into()), T.plus_ms(2000));
        assert!(f.vouched(T.plus_ms(2000)).is_empty());
        f.admit(SourceMsg::Connected, T.plus_ms(3000));
        f.admit(observed("web", Origin::Stream, None), T.plus_ms(3500));
        assert!(f.vouched(T.plus_ms(4000)).is_empty());
        listed(&mut f, T.plus_ms(4000));
        assert_eq!(f.vouched(T.plus_ms(4000)), vec![key("web")]);
        // An incomplete listing is no baseline.
        f.admit(SourceMsg::Connected, T.plus_ms(5000));
        let ticket = f.ticket();
        let partial = SourceMsg::Listed {
            ticket,
            present: Vec::new(),
            complete: false,
        };
        f.admit(partial, T.plus_ms(5000));
        assert!(f.vouched(T.plus_ms(5000)).is_empty());
    }

    #[test]
    fn heartbeats_keep_the_stream_alive_and_a_silence_past_stale_after_is_a_gap() {
        let mut f = Freshness::new(STALE);
        f.admit(SourceMsg::Connected, T);
        f.admit(observed("web", Origin::Stream, None), T);
        listed(&mut f, T);
        for s in 1..=4 {
            f.admit(SourceMsg::Heartbeat, T.plus_ms(s * 15_000));
        }
        assert_eq!(f.vouched(T.plus_ms(75_000)), vec![key("web")]);
        assert!(f.vouching(T.plus_ms(75_000)));
        // The last heartbeat at 60 s: vouching until stale-after has passed since.
        assert_eq!(f.vouching_until(), Some(T.plus_ms(60_000 + STALE + 1)));
        assert!(f.vouching(T.plus_ms(90_000)));
        // Not heard from within stale-after: the peer may be gone, or events lost.
        assert!(f.vouched(T.plus_ms(90_001)).is_empty());
        assert!(!f.vouching(T.plus_ms(90_001)));
        // Life again after the silence: still nothing until a listing.
        f.admit(SourceMsg::Heartbeat, T.plus_ms(100_000));
        assert!(f.vouched(T.plus_ms(100_000)).is_empty());
        assert!(
            !f.vouching(T.plus_ms(100_000)),
            "not baselined since the gap"
        );
        listed(&mut f, T.plus_ms(100_000));
        assert_eq!(f.vouched(T.plus_ms(100_000)), vec![key("web")]);
        assert!(f.vouching(T.plus_ms(100_000)));
        // Answers to reads and listings are no sign of the stream's life.
        f.admit(
            observed("web", Origin::Read(f.next_ticket), None),
            T.plus_ms(120_000),
        );
        assert!(f.vouched(T.plus_ms(130_001)).is_empty());
    }

    #[test]
    fn a_skipped_message_or_a_half_delivered_change_vouches_for_nothing() {
        let mut f = Freshness::new(STALE);
        f.admit(SourceMsg::Connected, T);
        f.admit(observed("web", Origin::Stream, None), T);
        listed(&mut f, T);
        assert_eq!(f.vouched(T.plus_ms(30_000)), vec![key("web")]);

        f.admit(SourceMsg::Skipped("bad line".into()), T.plus_ms(100));
        f.admit(observed("web", Origin::Stream, None), T.plus_ms(300));
        assert!(
            f.vouched(T.plus_ms(400)).is_empty(),
            "a gap until a listing"
        );
        listed(&mut f, T.plus_ms(400));
        assert_eq!(f.vouched(T.plus_ms(400)), vec![key("web")]);

        f.admit(SourceMsg::Changing(key("web")), T.plus_ms(500));
        assert!(f.vouched(T.plus_ms(600)).is_empty());
    }

    #[test]
    fn a_read_newer_than_the_streams_last_delivery_is_a_dropped_update() {
        let mut f = Freshness::new(STALE);
        f.admit(SourceMsg::Connected, T);
        f.admit(observed("web", Origin::Stream, Some(7)), T);
        listed(&mut f, T);
        // The same version read back: nothing was missed.
        let t1 = f.ticket();
        assert!(
            f.admit(observed("web", Origin::Read(t1), Some(7)), T)
                .is_some()
        );
        assert!(f.take_missed().is_empty());
        assert_eq!(f.vouched(T), vec![key("web")]);
        // A newer one the stream never delivered: it lost an update.
        let t2 = f.ticket();
        assert!(
            f.admit(observed("web", Origin::Read(t2), Some(9)), T)
                .is_some()
        );
        assert_eq!(f.take_missed(), vec![key("web")]);
        assert!(f.take_missed().is_empty(), "said once");
        assert!(f.vouched(T).is_empty(), "a gap until a listing");
        listed(&mut f, T);
        assert_eq!(f.vouched(T), vec![key("web")]);
    }

    #[test]
    fn a_listing_asked_before_a_stream_delivery_but_newer_than_it_is_a_dropped_update() {
        let mut f = Freshness::new(STALE);
        f.admit(SourceMsg::Connected, T);
        let ticket = f.ticket();
        // The burst after the (re)connection, then the listing's answer: asked earlier, yet
        // Argo CD had moved on since the burst — an update between them never reached the stream.
        f.admit(observed("web", Origin::Stream, Some(7)), T);
        assert!(
            f.admit(observed("web", Origin::Listing(ticket), Some(9)), T)
                .is_some()
        );
        assert_eq!(f.take_missed(), vec![key("web")]);
        // The same version as the burst: older news, dropped.
        let again = f.ticket();
        f.admit(observed("web", Origin::Stream, Some(10)), T);
        assert_eq!(
            f.admit(observed("web", Origin::Listing(again), Some(10)), T),
            None
        );
    }

    #[test]
    fn a_listing_asked_before_a_stream_update_never_replaces_it() {
        // By resource version: the listing's older item is dropped.
        let mut f = Freshness::new(STALE);
        f.admit(SourceMsg::Connected, T);
        let ticket = f.ticket();
        assert!(
            f.admit(observed("web", Origin::Stream, Some(8)), T)
                .is_some()
        );
        assert_eq!(
            f.admit(observed("web", Origin::Listing(ticket), Some(7)), T),
            None,
            "older never replaces newer"
        );
        // Without resource versions: by request order.
        let mut f = Freshness::new(STALE);
        f.admit(SourceMsg::Connected, T);
        let ticket = f.ticket();
        assert!(f.admit(observed("web", Origin::Stream, None), T).is_some());
        assert_eq!(
            f.admit(observed("web", Origin::Listing(ticket), None), T),
            None,
            "asked before the stream's delivery, answered after it: older news"
        );
    }

    #[test]
    fn a_read_answered_after_a_newer_stream_delivery_is_dropped() {
        let mut f = Freshness::new(STALE);
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
        let mut f = Freshness::new(STALE);
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
        let mut f = Freshness::new(STALE);
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
        let mut f = Freshness::new(STALE);
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
        let mut f = Freshness::new(STALE);
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
        assert!(f.vouched(T).is_empty());
        // A re-created app starts its resource versions afresh.
        assert!(
            f.admit(observed("web", Origin::Stream, Some(1)), T)
                .is_some()
        );
    }
}
