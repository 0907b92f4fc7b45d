//! ZooKeeper's double barrier recipe, run by processes that go through barrier rounds: enter,
//! work, leave, again.
//!
//! [`BarrierConfig`] is the `barrier` section of a workload file; [`ENTRY`] (with the nemesis
//! schedule) and [`driver::run_processes`] run one process per slot against real ZooKeeper,
//! recording `enter` and `leave` operations that [`check`] judges: nobody passes
//! `enter` of a round before `threshold` processes arrived, nobody passes `leave` before every
//! process in the round arrived at it.
//!
//! # Rounds
//!
//! Each round `k` is a fresh barrier node, `/stampede/<run_id>/barrier/round-<k>`, so a round
//! is never polluted by the nodes of an earlier one. Processes must agree on `k`; the
//! controller keeps one figure for that, the lowest round nobody has passed `enter` of yet
//! (the *open* round), and every process picks its next round as the larger of
//!
//! - its slot's own next round: the one after the round it passed `leave` of, or for the
//!   replacement of a process retired after an `info`, the round that process was in;
//! - the open round.
//!
//! With the default threshold (every slot) no round can open without every slot, so the slots
//! walk the rounds in step. A replacement joins the round the others are in: when its
//! predecessor gave up waiting in `enter` of round `k` while the others still wait there, `k`
//! is still open and the replacement's node completes it; when `k` was passed (the predecessor
//! gave up in `leave`, or lost its session while working), it joins the next round, where the
//! others arrive once they leave `k`. Never rejoining a passed round keeps latecomers out of
//! rounds others already left, and never moving ahead of the open round keeps a replacement
//! from waiting alone in a round the others reach only after it gave up (which could go on
//! round after round). With a smaller threshold a slow slot catches up with the open round
//! instead of trailing behind.
//!
//! # Contention
//!
//! Staggered (the section's `contention`), each slot joins at a random time, pauses a random
//! time after each round it passed (in addition to `spread`), and now and then leaves after a
//! round: its process closes its session and a new one comes back after a while. Leaving is
//! safe with the default threshold (every slot): the slot left after passing `leave` of round
//! `k`, so nobody can pass `enter` of `k + 1` without it; the others wait there, and its
//! replacement joins `k + 1` (its slot's next round, which is also the open one) and
//! completes it. They wait at most the time the slot is away plus its spread, which
//! [`BarrierConfig::validate`] keeps below `wait_timeout`, so nobody gives up waiting for a
//! slot that is merely away.

mod arrivals;
mod check;
pub mod driver;
mod recipe;
mod workload;
#[cfg(test)]
mod zk_tests;

use serde::{Deserialize, Serialize};

use crate::config::Duration;
use crate::workload::rounds::Contention;

pub use workload::ENTRY;

/// Settings of the barrier workload (the `barrier` section of `workloads/barrier.yaml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BarrierConfig {
    /// Processes that must have entered before anyone passes `enter` (0: every process slot,
    /// the generator's concurrency).
    pub threshold: usize,
    /// How long a process works between passing `enter` and invoking `leave`.
    pub work: Duration,
    /// Each process waits a random time up to this before entering a round, and works up to
    /// this much longer than `work`, so arrivals at both barriers are spread out.
    pub spread: Duration,
    /// The longest an `enter` or `leave` may wait; then it ends `info` and the process is
    /// retired.
    pub wait_timeout: Duration,
    /// How processes come and go: staggered, a random first join, a random pause in `[0, 2 ×
    /// spread]` after each round, and leaving after a round.
    pub contention: Contention,
}

impl Default for BarrierConfig {
    fn default() -> BarrierConfig {
        let ms = |n| Duration(std::time::Duration::from_millis(n));
        BarrierConfig {
            threshold: 0,
            work: ms(100),
            spread: ms(100),
            wait_timeout: ms(20000),
            contention: Contention::default(),
        }
    }
}

impl BarrierConfig {
    /// Checks the values for a run of `processes` process slots; the error names the field and
    /// what is wrong with it.
    pub fn validate(&self, processes: usize) -> Result<(), String> {
        if self.threshold > processes {
            return Err(format!(
                "barrier.threshold ({}) must not be above the {processes} processes \
                 (generator.concurrency): no round could open",
                self.threshold
            ));
        }
        if self.wait_timeout.0.is_zero() {
            return Err("barrier.wait_timeout must be above 0".into());
        }
        self.contention.validate("barrier")?;
        if self.contention.starved_after.is_some() {
            let what = "nobody waits for a turn at a barrier";
            return Err(format!(
                "barrier.contention.starved_after does not apply: {what}"
            ));
        }
        let late = self.latest_arrival();
        if late >= self.wait_timeout.0 {
            return Err(format!(
                "barrier.contention: a staggered process may reach a round up to {} ms after \
                 the others (max(join_within, 2 x away) + spread), which must be below \
                 barrier.wait_timeout ({} ms), or the others give up waiting for it",
                late.as_millis(),
                self.wait_timeout.0.as_millis()
            ));
        }
        Ok(())
    }

    /// How much later than the others a staggered process may reach a round: after its first
    /// join, or back from leaving, plus its spread before entering (zero unstaggered).
    fn latest_arrival(&self) -> std::time::Duration {
        let c = &self.contention;
        match c.stagger {
            true => c.join_within.0.max(c.away.0 * 2) + self.spread.0,
            false => std::time::Duration::ZERO,
        }
    }

    /// The number of processes that must enter before the barrier opens, in a run of
    /// `processes` process slots.
    pub fn threshold_for(&self, processes: usize) -> usize {
        match self.threshold {
            0 => processes,
            n => n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::test_runs::ms;
    use crate::workload::WorkloadFile;

    #[test]
    fn the_shipped_barrier_file_holds_the_defaults() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/barrier.yaml");
        let file: WorkloadFile = crate::config::load(&path).unwrap();
        assert_eq!(file.workload, "barrier");
        assert_eq!(
            file.section::<BarrierConfig>().unwrap(),
            BarrierConfig::default()
        );
        assert_eq!(file.session, crate::workload::SessionConfig::default());
        assert_eq!(file.generator, crate::generator::GeneratorConfig::default());
        assert!(crate::workload::build(&file).is_ok());
    }

    #[test]
    fn settings_parse_and_typos_are_named() {
        let cfg: BarrierConfig =
            serde_yaml_ng::from_str("threshold: 3\nwork: 1s\nwait_timeout: 2s\n").unwrap();
        assert_eq!(cfg.threshold_for(5), 3);
        assert_eq!(cfg.work.0, std::time::Duration::from_secs(1));
        assert_eq!(BarrierConfig::default().threshold_for(5), 5);
        let err = serde_yaml_ng::from_str::<BarrierConfig>("treshold: 3\n").unwrap_err();
        assert!(err.to_string().contains("treshold"), "{err}");
    }

    #[test]
    fn bad_values_are_named() {
        let cfg = BarrierConfig {
            threshold: 6,
            ..BarrierConfig::default()
        };
        let err = cfg.validate(5).unwrap_err();
        assert!(err.starts_with("barrier.threshold (6)"), "{err}");
        assert!(cfg.validate(6).is_ok());
        let cfg = BarrierConfig {
            wait_timeout: Duration(std::time::Duration::ZERO),
            ..BarrierConfig::default()
        };
        assert_eq!(
            cfg.validate(5).unwrap_err(),
            "barrier.wait_timeout must be above 0"
        );
        let mut away = BarrierConfig {
            wait_timeout: ms(2000),
            ..BarrierConfig::default()
        };
        away.contention.join_within = ms(1000);
        away.contention.away = ms(1000);
        let err = away.validate(5).unwrap_err();
        assert!(
            err.starts_with(
                "barrier.contention: a staggered process may reach a round up to 2100 ms"
            ),
            "{err}"
        );
        away.contention.away = ms(900);
        assert!(away.validate(5).is_ok(), "1800 + 100 ms late");
        away.contention.stagger = false;
        away.contention.away = ms(5000);
        assert!(away.validate(5).is_ok(), "unstaggered, nobody is late");
        away.contention.starved_after = Some(3);
        let err = away.validate(5).unwrap_err();
        assert!(
            err.starts_with("barrier.contention.starved_after does not apply"),
            "{err}"
        );
    }
}
