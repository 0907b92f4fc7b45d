//! A workload file, `workloads/<name>.yaml`: which workload runs, its settings, and the
//! generator's pacing.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::barrier::BarrierConfig;
use super::election::ElectionConfig;
use super::lock::LockConfig;
use super::queue::QueueConfig;
use super::{Register, RegisterConfig, Workload};
use crate::generator::GeneratorConfig;

/// The workloads stampede knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    /// Versioned registers over independent keys.
    Register,
    /// A lock recipe's contenders (the `lock` section), run by `workload::lock::driver`.
    Lock,
    /// A leader election recipe's candidates (the `election` section), run by
    /// `workload::election::driver`.
    Election,
    /// A double barrier's processes (the `barrier` section), run by
    /// `workload::barrier::driver`.
    Barrier,
    /// A FIFO queue's producers and consumers (the `queue` section), run by
    /// `workload::queue::driver`.
    Queue,
}

impl WorkloadKind {
    /// The name a workload file gives it (`workload: register`).
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Register => "register",
            WorkloadKind::Lock => "lock",
            WorkloadKind::Election => "election",
            WorkloadKind::Barrier => "barrier",
            WorkloadKind::Queue => "queue",
        }
    }
}

/// The contents of a workload file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadFile {
    /// Which workload runs.
    pub workload: WorkloadKind,
    /// Settings of the register workload.
    #[serde(default)]
    pub register: RegisterConfig,
    /// Settings of the lock workloads.
    #[serde(default)]
    pub lock: LockConfig,
    /// Settings of the election workloads.
    #[serde(default)]
    pub election: ElectionConfig,
    /// Settings of the barrier workload.
    #[serde(default)]
    pub barrier: BarrierConfig,
    /// Settings of the queue workload.
    #[serde(default)]
    pub queue: QueueConfig,
    /// Rate, concurrency, time limit and nemesis schedule.
    #[serde(default)]
    pub generator: GeneratorConfig,
}

impl WorkloadFile {
    /// Checks every value; the error names the field and what is wrong with it.
    pub fn validate(&self) -> Result<(), String> {
        match self.workload {
            WorkloadKind::Register => self.register.validate()?,
            WorkloadKind::Lock => self.lock.validate()?,
            WorkloadKind::Election => self.election.validate()?,
            WorkloadKind::Barrier => self.barrier.validate(self.generator.concurrency)?,
            WorkloadKind::Queue => self.queue.validate(self.generator.concurrency)?,
        }
        self.generator.validate()
    }

    /// The workload for test run `run_id` (one znode name, e.g. the results timestamp), its
    /// random choices drawn from `seed`.
    pub fn build(&self, run_id: &str, seed: u64) -> anyhow::Result<Arc<dyn Workload>> {
        Ok(match self.workload {
            WorkloadKind::Register => Arc::new(Register::new(self.register.clone(), run_id, seed)?),
            WorkloadKind::Lock => anyhow::bail!(
                "the lock workload is run by workload::lock::driver::run, not the generator"
            ),
            WorkloadKind::Election => anyhow::bail!(
                "the election workload is run by workload::election::driver::run, not the generator"
            ),
            WorkloadKind::Barrier => anyhow::bail!(
                "the barrier workload is run by workload::barrier::driver::run, not the generator"
            ),
            WorkloadKind::Queue => anyhow::bail!(
                "the queue workload is run by workload::queue::driver::run, not the generator"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn the_shipped_register_file_holds_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/register.yaml");
        let file: WorkloadFile = crate::config::load(&path).unwrap();
        let defaults = WorkloadFile {
            workload: WorkloadKind::Register,
            register: RegisterConfig::default(),
            lock: LockConfig::default(),
            election: ElectionConfig::default(),
            barrier: BarrierConfig::default(),
            queue: QueueConfig::default(),
            generator: GeneratorConfig::default(),
        };
        assert_eq!(file, defaults);
        file.validate().unwrap();
        assert!(file.build("run-1", 7).is_ok());
    }

    #[test]
    fn unknown_workloads_and_keys_are_rejected() {
        let err = serde_yaml_ng::from_str::<WorkloadFile>("workload: bank\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown variant `bank`"), "{err}");
        let err = serde_yaml_ng::from_str::<WorkloadFile>("workload: register\nregistr: {}\n")
            .unwrap_err();
        assert!(err.to_string().contains("registr"), "{err}");
        let bad =
            serde_yaml_ng::from_str::<WorkloadFile>("workload: register\ngenerator: {rate: -1}\n")
                .unwrap();
        assert!(bad.validate().unwrap_err().starts_with("generator.rate"));
    }
}
