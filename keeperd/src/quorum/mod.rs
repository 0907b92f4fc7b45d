//! Replication: keeperd as a ZooKeeper ensemble.
//!
//! [`peer`] runs a member: it elects a leader ([`election`], Fast Leader
//! Election) and then leads ([`leader`]) or follows or observes
//! ([`learner`]) until that ends, over and over. Leading and following
//! follow ZAB: a new leader makes a quorum accept a new epoch, brings each
//! learner's log in line with its own history (DIFF, TRUNC or SNAP), counts
//! that history committed once a quorum has it durable under the new epoch
//! (NEWLEADER acknowledged), then proposes each write and commits it once a
//! quorum (itself included) has it durable. The epochs a member promised
//! and took are persisted ([`epochs`]); the messages are in [`wire`].
//!
//! The replicated log sits under the request pipeline at the
//! [`crate::log::Log`] seam: on the leader it is [`leader::LeaderLog`], on a
//! learner the local log its leader's proposals go into.

pub mod election;
pub mod epochs;
pub mod leader;
pub mod learner;
pub mod peer;
pub mod wire;

use bytes::Bytes;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// What a learner's core sends its leader.
pub type Upstream = tokio::sync::mpsc::UnboundedSender<wire::Up>;

/// What the leader sends one learner: encoded messages, in order.
pub type LearnerLink = tokio::sync::mpsc::UnboundedSender<Bytes>;

/// A leader's figures for `mntr`, and its lease: it answers clients only
/// while no other leader can have been elected. A learner gives up on its
/// leader after syncLimit ticks without a message from it, so once a
/// quorum has answered a ping the leader sent at time t, none of them joins
/// another leader before t + syncLimit ticks; the lease ends a tick before.
pub struct Status {
    /// Learners connected (followers and observers).
    pub learners: AtomicUsize,
    /// Followers synced and acknowledging.
    pub synced_followers: AtomicUsize,
    /// Observers synced.
    pub synced_observers: AtomicUsize,
    /// Learners being synced.
    pub pending_syncs: AtomicUsize,
    base: Instant,
    lease_ms: AtomicU64,
    /// Ids of the servers holding this leader's history (itself and the synced learners).
    synced: std::sync::Mutex<Vec<u64>>,
}

impl Default for Status {
    fn default() -> Self {
        Status {
            learners: AtomicUsize::new(0),
            synced_followers: AtomicUsize::new(0),
            synced_observers: AtomicUsize::new(0),
            pending_syncs: AtomicUsize::new(0),
            base: Instant::now(),
            lease_ms: AtomicU64::new(0),
            synced: Default::default(),
        }
    }
}

impl Status {
    /// Whether the leader may answer clients now.
    pub fn lease_valid(&self) -> bool {
        self.lease_held()
            || crate::failpoint::active(crate::failpoint::Failpoint::StaleLeaderWrites)
    }

    /// Whether a quorum was heard from recently enough.
    pub fn lease_held(&self) -> bool {
        (self.base.elapsed().as_millis() as u64) < self.lease_ms.load(Ordering::Acquire)
    }

    /// This leader's clock for ping stamps (ms).
    pub fn now_ms(&self) -> u64 {
        self.base.elapsed().as_millis() as u64
    }

    /// Records which servers hold this leader's history.
    pub fn set_synced(&self, ids: Vec<u64>) {
        *self.synced.lock().unwrap_or_else(|e| e.into_inner()) = ids;
    }

    /// Ids of the servers holding this leader's history (itself and the synced learners).
    pub fn synced(&self) -> Vec<u64> {
        self.synced
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Sets the lease to end `length` after the stamp `pinged` (the ping a
    /// quorum has answered).
    pub fn renew_lease(&self, pinged: u64, length: Duration) {
        let until = pinged + length.as_millis() as u64;
        self.lease_ms.fetch_max(until, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_runs_out() {
        let s = Status::default();
        assert!(!s.lease_valid());
        s.renew_lease(s.now_ms(), Duration::from_millis(100));
        assert!(s.lease_valid());
        std::thread::sleep(Duration::from_millis(120));
        assert!(!s.lease_valid());
    }
}
