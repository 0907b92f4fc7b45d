//! A distributed FIFO queue as ZooKeeper's recipe builds it, run by producers that enqueue
//! unique values and consumers that take the oldest one.
//!
//! [`QueueConfig`] is the `queue` section of a workload file; [`driver::run`] runs the producer and
//! consumer slots against real ZooKeeper while the nemesis schedule injects faults, heals them,
//! then lets the consumers drain the queue, recording `enqueue` and `dequeue` operations
//! ([`driver`] says how) that [`check`] judges.

mod check;
mod contention;
pub mod driver;
mod recipe;
mod workload;
#[cfg(test)]
mod zk_tests;

use serde::{Deserialize, Serialize};

use crate::config::Duration;
use crate::workload::rounds::Contention;

pub use workload::ENTRY;

/// Settings of the queue workload (the `queue` section of `workloads/queue.yaml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueConfig {
    /// How many of the generator's `concurrency` process slots produce; the others consume.
    pub producers: usize,
    /// Pause between an enqueue and the same producer's next one (on average, staggered;
    /// staggered consumers pause as long between dequeues).
    pub pause: Duration,
    /// After the time limit and the heal, how long consumers may take to empty the queue.
    pub drain_timeout: Duration,
    /// How producers and consumers come and go in the main phase (only consumers leave; the
    /// drain is not staggered), and when a dequeue counts as starved (a figure: the recipe
    /// promises no fairness among consumers).
    pub contention: Contention,
}

impl Default for QueueConfig {
    fn default() -> QueueConfig {
        let ms = |n| Duration(std::time::Duration::from_millis(n));
        QueueConfig {
            producers: 2,
            pause: ms(20),
            drain_timeout: ms(30_000),
            contention: Contention::default(),
        }
    }
}

impl QueueConfig {
    /// Checks the values against the generator's `concurrency` (producers and consumers
    /// share its slots); the error names the field and what is wrong with it.
    pub fn validate(&self, concurrency: usize) -> Result<(), String> {
        if self.producers == 0 {
            return Err("queue.producers must be at least 1".into());
        }
        if self.producers >= concurrency {
            return Err(format!(
                "queue.producers must be below generator.concurrency ({concurrency}) to leave at \
                 least 1 consumer, not {}",
                self.producers
            ));
        }
        if self.drain_timeout.0.is_zero() {
            return Err("queue.drain_timeout must be above 0".into());
        }
        self.contention.validate("queue")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_and_typos_are_named() {
        let cfg: QueueConfig =
            serde_yaml_ng::from_str("producers: 3\npause: 0ms\ndrain_timeout: 1m\n").unwrap();
        assert_eq!(cfg.producers, 3);
        assert!(cfg.pause.0.is_zero());
        assert_eq!(cfg.drain_timeout.0, std::time::Duration::from_secs(60));
        let err = serde_yaml_ng::from_str::<QueueConfig>("consumers: 3\n").unwrap_err();
        assert!(err.to_string().contains("consumers"), "{err}");
    }

    #[test]
    fn the_shipped_queue_file_holds_the_defaults() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/queue.yaml");
        let file: crate::workload::WorkloadFile = crate::config::load(&path).unwrap();
        assert_eq!(file.workload, "queue");
        assert_eq!(
            file.section::<QueueConfig>().unwrap(),
            QueueConfig::default()
        );
        assert_eq!(file.session, crate::workload::SessionConfig::default());
        assert_eq!(file.generator, crate::generator::GeneratorConfig::default());
        assert!(crate::workload::build(&file).is_ok());
    }

    #[test]
    fn bad_values_are_named() {
        let cfg = QueueConfig::default();
        assert!(cfg.validate(3).is_ok());
        assert_eq!(
            cfg.validate(2).unwrap_err(),
            "queue.producers must be below generator.concurrency (2) to leave at least 1 \
             consumer, not 2"
        );
        let none = QueueConfig {
            producers: 0,
            ..QueueConfig::default()
        };
        assert_eq!(
            none.validate(5).unwrap_err(),
            "queue.producers must be at least 1"
        );
        let no_drain = QueueConfig {
            drain_timeout: Duration(std::time::Duration::ZERO),
            ..QueueConfig::default()
        };
        assert_eq!(
            no_drain.validate(5).unwrap_err(),
            "queue.drain_timeout must be above 0"
        );
        let mut leaving = QueueConfig::default();
        leaving.contention.leave_percent = 200;
        assert_eq!(
            leaving.validate(5).unwrap_err(),
            "queue.contention.leave_percent must be at most 100 (it is 200)"
        );
    }
}
