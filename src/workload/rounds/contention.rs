//! Contention that varies (Jepsen's staggered generators): contenders join at random times,
//! pause a random time between attempts, and now and then leave (close their session) and come
//! back later as a new process, so that every queue position occurs, not only the steady
//! queue where each newcomer lands last. [`Contention`] is the `contention` part of a recipe's
//! section of a workload file; it also holds the starvation threshold the checker applies.

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::config::Duration;
use crate::generator::{ended, Next};

/// How contenders come and go, and when a waiter counts as starved (the `contention` part of
/// the `lock`, `election`, `queue` and `barrier` sections).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Contention {
    /// Whether contenders are staggered: a random first join, random pauses in `[0, 2 ×
    /// pause]` instead of exactly the section's `pause`, and leaving. Off, every contender
    /// joins at once and pauses exactly `pause`.
    pub stagger: bool,
    /// Each contender joins first at a random time in `[0, join_within]`.
    pub join_within: Duration,
    /// The chance, in percent, that a contender leaves after a round: it closes its session
    /// and comes back as a new process after a random time in `[0, 2 × away]`.
    pub leave_percent: u32,
    /// How long a contender that left stays away, on average.
    pub away: Duration,
    /// How many hand-offs to others (grants of the lock) one wait may see before its contender
    /// counts as starved. Unset, it is twice the contenders: in a fair queue a waiter sees at
    /// most one hand-off per contender ahead of it (at most all others, plus one whose grant
    /// was recorded just after the waiter joined), so twice that is past any fair schedule
    /// with room to spare, yet far below the ~95 hand-offs per contender of a lock that starves
    /// three of five contenders for 30 s. A starved waiter is an anomaly (`starved`) in the
    /// fair recipes and a figure in the unfair ones.
    pub starved_after: Option<u32>,
}

impl Default for Contention {
    fn default() -> Contention {
        let ms = |n| Duration(std::time::Duration::from_millis(n));
        Contention {
            stagger: true,
            join_within: ms(2000),
            leave_percent: 10,
            away: ms(500),
            starved_after: None,
        }
    }
}

impl Contention {
    /// Checks the values of the `contention` part of section `section`; the error names the
    /// field and what is wrong with it.
    pub fn validate(&self, section: &str) -> Result<(), String> {
        if self.leave_percent > 100 {
            return Err(format!(
                "{section}.contention.leave_percent must be at most 100 (it is {})",
                self.leave_percent
            ));
        }
        if self.starved_after == Some(0) {
            return Err(format!(
                "{section}.contention.starved_after must be at least 1 (leave it out for twice the contenders)"
            ));
        }
        Ok(())
    }

    /// The hand-offs one wait may see before its contender counts as starved, with
    /// `contenders` process slots.
    pub fn starvation_threshold(&self, contenders: usize) -> u64 {
        match self.starved_after {
            Some(n) => u64::from(n),
            None => 2 * contenders.max(1) as u64,
        }
    }

    /// The pause the slot itself keeps after a round that went through: `pause` unstaggered,
    /// none staggered (the [`Contention::after_round`] draws it).
    pub fn slot_pause(&self, pause: std::time::Duration) -> std::time::Duration {
        match self.stagger {
            true => std::time::Duration::ZERO,
            false => pause,
        }
    }

    /// Waits a contender's random first join; false when the run ended meanwhile.
    pub async fn join(&self, stop: &mut watch::Receiver<bool>, deadline: Instant) -> bool {
        match self.stagger {
            true => sleep_unless_ended(uniform(self.join_within.0), stop, deadline).await,
            false => true,
        }
    }

    /// After a round that went through, staggered: leaves (after its time away; true, so the
    /// slot opens a new session) or pauses a random time in `[0, 2 × pause]` (false).
    pub async fn after_round(
        &self,
        pause: std::time::Duration,
        stop: &mut watch::Receiver<bool>,
        deadline: Instant,
    ) -> bool {
        if !self.stagger {
            return false;
        }
        let leaves = rand::random::<u32>() % 100 < self.leave_percent;
        let wait = match leaves {
            true => self.away.0 * 2,
            false => pause * 2,
        };
        sleep_unless_ended(uniform(wait), stop, deadline).await;
        leaves
    }

    /// What a slot does after a round that ended `next`: a round that went through is
    /// followed, staggered, by a random pause (`Next::Again`) or by leaving (`Next::Retire`, so
    /// the slot opens a new session); any other end stands.
    pub async fn next_after(
        &self,
        next: Next,
        pause: std::time::Duration,
        stop: &mut watch::Receiver<bool>,
        deadline: Instant,
    ) -> Next {
        if !matches!(next, Next::Again) {
            return next;
        }
        match self.after_round(pause, stop, deadline).await {
            true => Next::Retire,
            false => Next::Again,
        }
    }
}

/// A random time in `[0, max]`.
fn uniform(max: std::time::Duration) -> std::time::Duration {
    max.mul_f64(rand::random::<f64>())
}

/// Sleeps `time` unless the run ends first; true when it slept the whole time.
async fn sleep_unless_ended(
    time: std::time::Duration,
    stop: &mut watch::Receiver<bool>,
    deadline: Instant,
) -> bool {
    tokio::select! {
        _ = ended(stop, deadline) => false,
        _ = tokio::time::sleep(time) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staggering_is_on_by_default_and_bad_values_are_named() {
        let c = Contention::default();
        assert!(c.stagger);
        assert!(c.validate("lock").is_ok());
        assert_eq!(c.starvation_threshold(5), 10);
        let bad = Contention {
            leave_percent: 101,
            ..Contention::default()
        };
        assert_eq!(
            bad.validate("queue").unwrap_err(),
            "queue.contention.leave_percent must be at most 100 (it is 101)"
        );
        let zero = Contention {
            starved_after: Some(0),
            ..Contention::default()
        };
        assert!(zero
            .validate("election")
            .unwrap_err()
            .starts_with("election.contention.starved_after must be at least 1"));
        let set = Contention {
            starved_after: Some(7),
            ..Contention::default()
        };
        assert_eq!(set.starvation_threshold(5), 7);
        let err = serde_yaml_ng::from_str::<Contention>("stager: false\n").unwrap_err();
        assert!(err.to_string().contains("stager"), "{err}");
    }

    #[test]
    fn unstaggered_slots_keep_their_pause() {
        let off = Contention {
            stagger: false,
            ..Contention::default()
        };
        let pause = std::time::Duration::from_millis(50);
        assert_eq!(off.slot_pause(pause), pause);
        assert_eq!(
            Contention::default().slot_pause(pause),
            std::time::Duration::ZERO
        );
        let draws: Vec<_> = (0..100).map(|_| uniform(pause)).collect();
        assert!(draws.iter().all(|d| *d <= pause));
        assert!(draws.iter().any(|d| *d != draws[0]), "the pauses vary");
    }
}
