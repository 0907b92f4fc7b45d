//! The barrier workload as the registry runs it: every process slot goes through rounds of
//! the double barrier under the nemesis schedule; judged by [`super::check`].

use async_trait::async_trait;
use serde_json::{json, Value};

use super::arrivals::arrivals;
use super::check::check_barrier;
use super::driver::run_processes;
use super::BarrierConfig;
use crate::generator::{self, GeneratorConfig, Target};
use crate::history::Op;
use crate::workload::{into_map, validity, Entry, Judged, Ran, Section, Settings, Workload};

/// The registry's entry.
pub const ENTRY: Entry = Entry {
    name: "barrier",
    build: |file| Ok(Box::new(BarrierWorkload(Settings::read(file)?))),
    sweeps_contenders: false,
};

/// The barrier workload of one workload file.
pub struct BarrierWorkload(Settings<BarrierConfig>);

impl Section for BarrierConfig {
    fn check(&self, generator: &GeneratorConfig) -> Result<(), String> {
        self.validate(generator.concurrency)
    }
}

#[async_trait]
impl Workload for BarrierWorkload {
    fn settings(&self) -> Value {
        self.0.own_json()
    }

    async fn run(&self, target: Target) -> anyhow::Result<Ran> {
        let options = self.0.session.client_options();
        let (generator, own) = (&self.0.generator, &self.0.own);
        let healed = generator::drive(generator, own, options, target, run_processes).await?;
        Ran::kept(healed, None)
    }

    /// Nobody passed `enter` or `leave` early, and which rounds stalled after the last fault
    /// was healed; the early passes are outlined on the timeline. The arrival positions are
    /// reported beside.
    fn judge(&self, ops: &[Op], run: Option<Value>) -> anyhow::Result<Judged> {
        let threshold = self.0.own.threshold_for(self.0.generator.concurrency) as u64;
        let barrier = check_barrier(ops, threshold);
        let contention = arrivals(ops);
        let line = format!(
            "barrier: {} early enters, {} early leaves in {} rounds ({} completed, threshold {}), {} gave up, {} stalled after the last heal; contention: {}",
            barrier.early_enters.len(),
            barrier.early_leaves.len(),
            barrier.rounds,
            barrier.rounds_completed,
            barrier.threshold,
            barrier.gave_up,
            barrier.stalled,
            contention.line(),
        );
        Ok(Judged {
            valid: validity(barrier.valid),
            marked: barrier.marked_ops(),
            checks: into_map(json!({ "barrier": barrier, "contention": contention, "run": run })),
            line,
        })
    }
}
