//! Confirmation reads: before the stream's silence carries an app's last observation to a
//! due moment, one read per app confirms the source still has that version; an app with
//! something due then that the stream does not vouch for is read too, and observed by the answer.

use super::*;

/// Before the stream's silence extends an app's last observation to a due moment (and a verdict
/// is built on it), one read per app confirms that the source still has the version the stream last
/// delivered: the stream may have lost an update (`docs/verdicts.md#observed-time`).
///
/// The read is asked slightly before the moment — early by about twice the last confirmation's
/// round trip, within [`CONFIRM_LEAD_MIN_MS`, `CONFIRM_LEAD_MAX_MS`] — so that the verdict does not
/// wait for it; an answer that comes after the moment is waited for, as it would be without the
/// lead.
///
/// An app with something due at that moment that the stream does not vouch for (its silence
/// lapsed, it was lost, no listing has baselined it yet) is read in the same request: its answer
/// is the observation the moment is decided on, rather than whatever the last listing saw up to
/// `--fetch-interval` — or, after a lapse shortly before the moment, up to the whole vouched
/// stretch — ago.
pub(super) struct Confirming {
    pub(super) ticket: u64,
    /// The due moment.
    pub(super) at: Timestamp,
    /// When the read was asked, for the round trip.
    pub(super) asked_at: Timestamp,
    /// The apps not yet confirmed, with the resource version of their last delivery.
    pub(super) apps: Vec<(AppKey, Option<u64>)>,
    /// The apps with something due that the stream does not vouch for, read to be observed;
    /// not yet answered.
    pub(super) reading: Vec<AppRef>,
    pub(super) give_up_at: Timestamp,
}

impl Confirming {
    fn answered(&self) -> bool {
        self.apps.is_empty() && self.reading.is_empty()
    }
}

/// Whether an answer about `(namespace when known, name)` concerns the app `(ns, name)` (also
/// known by name alone when its namespace is not).
pub(super) fn same_app(ns: Option<&str>, name: &str, other_ns: Option<&str>, other: &str) -> bool {
    name == other && (ns.is_none() || other_ns.is_none() || ns == other_ns)
}

/// How early a confirming read may be asked before its due moment, at least and at most. An
/// update the stream loses within this margin before the moment is not seen by the verdict.
pub(super) const CONFIRM_LEAD_MIN_MS: i64 = 2;
pub(super) const CONFIRM_LEAD_MAX_MS: i64 = 100;

/// The round trip assumed before the first confirmation has measured one.
pub(super) const CONFIRM_RTT_GUESS_MS: i64 = 5;

/// The confirmation under way and what sets how early the next is asked.
pub(super) struct Confirm {
    /// A due moment waits for the source to confirm the apps the stream vouches for.
    pub(super) confirming: Option<Confirming>,
    /// The due moment a confirmation was last asked for ahead of time, so it is asked once.
    pub(super) confirmed_ahead: Option<Timestamp>,
    /// The last confirmation's round trip (ms), which sets how early the next one is asked.
    pub(super) confirm_rtt_ms: i64,
}

impl Confirm {
    pub(super) fn new() -> Confirm {
        Confirm {
            confirming: None,
            confirmed_ahead: None,
            confirm_rtt_ms: CONFIRM_RTT_GUESS_MS,
        }
    }
}

impl Runtime {
    /// Shortly before the due moment `due`: ask the source to confirm the apps the stream vouches
    /// for now, so the answer is in by the moment.
    pub(super) fn confirm_ahead(&mut self, due: Timestamp) {
        self.confirm.confirmed_ahead = Some(due);
        if self.confirm.confirming.is_none() {
            self.start_confirming(self.last_wake, due);
        }
    }

    /// How early a confirmation is asked before its due moment.
    pub(super) fn confirm_lead_ms(&self) -> i64 {
        (2 * self.confirm.confirm_rtt_ms).clamp(CONFIRM_LEAD_MIN_MS, CONFIRM_LEAD_MAX_MS)
    }

    /// Asks one read of every live app the stream vouches for now, to confirm it up to `at`
    /// (the tick at `at` decides every watch, and a moment that falls due while the reads are
    /// under way is decided on the observations they carried to `at`), and of every app with a
    /// moment due in `(handled, at]` (`Engine::due_apps`) that the stream does not vouch for, to
    /// observe it at `at`. False when there is none.
    pub(super) fn start_confirming(&mut self, handled: Timestamp, at: Timestamp) -> bool {
        let now = self.now();
        let live = self.live_apps();
        let vouched: Vec<AppKey> = self
            .freshness
            .vouched(now)
            .into_iter()
            .filter(|key| live.iter().any(|a| a.matches(&key.namespace, &key.name)))
            .collect();
        let reading: Vec<AppRef> = self
            .engine
            .due_apps(handled, at)
            .into_iter()
            .filter(|a| !vouched.iter().any(|k| a.matches(&k.namespace, &k.name)))
            .collect();
        if vouched.is_empty() && reading.is_empty() {
            return false;
        }
        let ticket = self.freshness.ticket();
        let apps: Vec<AppRef> = vouched
            .iter()
            .map(|k| AppRef {
                namespace: Some(k.namespace.clone()),
                name: k.name.clone(),
            })
            .chain(reading.iter().cloned())
            .collect();
        self.confirm.confirming = Some(Confirming {
            ticket,
            at,
            asked_at: now,
            apps: vouched
                .into_iter()
                .map(|k| {
                    let rv = self.freshness.resource_version(&k);
                    (k, rv)
                })
                .collect(),
            reading,
            give_up_at: at.max(now).plus_ms(self.cfg.stale_after_ms),
        });
        self.ctx.source.request_read(ticket, apps);
        true
    }

    /// A confirming read answered: the same version as the last delivery vouches for the app up
    /// to the due moment, or up to the answer when it came ahead of the moment (the answer is
    /// then the observation the moment is decided on); any other version leaves it unvouched.
    /// An app read because the stream did not vouch for it is observed by the answer alone.
    pub(super) fn confirmed(&mut self, ticket: u64, key: &AppKey, rv: Option<u64>) -> Result<()> {
        let now = self.now();
        let Some(c) = self
            .confirm
            .confirming
            .as_mut()
            .filter(|c| c.ticket == ticket)
        else {
            return Ok(());
        };
        let Some(pos) = c.apps.iter().position(|(k, _)| k == key) else {
            let before = c.reading.len();
            c.reading.retain(|a| !a.matches(&key.namespace, &key.name));
            // Observed by the answer itself: the moment is decided once it is judged
            // (`Runtime::judge_source` finishes the confirmation after observing it).
            if c.reading.len() < before && c.answered() {
                self.confirm.confirm_rtt_ms = now.ms_since(c.asked_at).max(0);
            }
            return Ok(());
        };
        let (_, before) = c.apps.remove(pos);
        if c.answered() {
            self.confirm.confirm_rtt_ms = now.ms_since(c.asked_at).max(0);
        }
        let at = c.at;
        if before.is_some() && before == rv {
            // Unchanged since the last delivery, up to the moment or, answered ahead of it, up
            // to the answer — itself judged next, as an observation fresh at the moment.
            let effects = self.engine.vouch(key, at.min(now));
            self.apply(effects, None)?;
        }
        self.finish_confirming()
    }

    /// A confirming read that brought no observation (overtaken, failed, refused).
    pub(super) fn unconfirmed(&mut self, ticket: u64, key: &AppKey) {
        self.unconfirmed_where(
            |ns, name| same_app(ns, name, Some(&key.namespace), &key.name),
            Some(ticket),
        );
    }

    /// No answer will come for the apps `which` names — called with each app's namespace (when
    /// known) and name.
    pub(super) fn unconfirmed_where(
        &mut self,
        which: impl Fn(Option<&str>, &str) -> bool,
        ticket: Option<u64>,
    ) {
        if let Some(c) = self
            .confirm
            .confirming
            .as_mut()
            .filter(|c| ticket.is_none_or(|t| t == c.ticket))
        {
            c.apps.retain(|(k, _)| !which(Some(&k.namespace), &k.name));
            c.reading
                .retain(|a| !which(a.namespace.as_deref(), &a.name));
        }
    }

    /// The due moment has come and every app answered, or it is time to give up: decide what is
    /// due.
    pub(super) fn finish_confirming(&mut self) -> Result<()> {
        let now = self.now();
        let done = self
            .confirm
            .confirming
            .as_ref()
            .is_some_and(|c| now >= c.at && (c.answered() || now >= c.give_up_at));
        if !done {
            return Ok(());
        }
        let Some(c) = self.confirm.confirming.take() else {
            return Ok(());
        };
        self.last_wake = self.last_wake.max(c.at);
        let effects = self.engine.tick(now);
        self.apply(effects, None)
    }
}
