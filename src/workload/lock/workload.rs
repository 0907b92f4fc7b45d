//! The lock workloads as the registry runs them: contenders under the nemesis schedule;
//! judged for mutual exclusion, against the (fenced) mutex model, and for liveness after the
//! heal.

use anyhow::Context;
use async_trait::async_trait;
use serde_json::{json, Map, Value};

use super::driver::Contenders;
use super::LockConfig;
use crate::checker::liveness;
use crate::checker::mutex_overlap::check_lock_history;
use crate::checker::CheckOptions;
use crate::generator::{GeneratorConfig, Target};
use crate::history::Op;
use crate::workload::rounds::{self, fairness, RecipeSection};
use crate::workload::{
    counterexample_ops, into_map, liveness_summary, validity, Entry, Figures, Judged, Ran, Section,
    Settings, Workload,
};

/// The registry's entry.
pub const ENTRY: Entry = Entry {
    name: "lock",
    build: |file| Ok(Box::new(LockWorkload(Settings::read(file)?))),
    sweeps_contenders: true,
};

/// A lock workload of one workload file.
pub struct LockWorkload(Settings<LockConfig>);

impl Section for LockConfig {
    fn check(&self, _generator: &GeneratorConfig) -> Result<(), String> {
        self.validate()
    }
}

#[async_trait]
impl Workload for LockWorkload {
    fn settings(&self) -> Value {
        self.0.own_json()
    }

    fn holder_op(&self) -> Option<&'static str> {
        Some("hold")
    }

    async fn run(&self, target: Target) -> anyhow::Result<Ran> {
        rounds::run::<Contenders>(&self.0, target).await
    }

    /// No overlapping critical sections, acquire/release linearizable against
    /// `fenced-mutex` (when fenced) or `mutex`, the lock never left free while contenders
    /// wait once the faults are healed, and in the sequential recipes (fair: the lowest node
    /// is granted next) no waiter passed over or starved.
    fn judge(&self, ops: &[Op], run: Option<Value>) -> anyhow::Result<Judged> {
        let lock = check_lock_history(ops, self.0.own.fencing, &CheckOptions::default())
            .context("checking the lock")?;
        let liveness = liveness::check_lock(ops, self.0.session.liveness());
        let own = &self.0.own;
        let threshold = own
            .contention
            .starvation_threshold(self.0.generator.concurrency);
        let contention = fairness::judge_lock(ops, own.recipe.is_fair(), threshold, self.0.session.op_timeout.0);
        let me = &lock.mutual_exclusion;
        let line = format!(
            "mutual exclusion: {} overlaps in {} critical sections, {} stale steps rejected; lock model ({}): {:?}; contention: {}; liveness: {}",
            me.overlaps.len(),
            me.holds,
            me.stale_steps_rejected,
            lock.lock_model.model,
            lock.lock_model.valid,
            contention.line(),
            liveness_summary(&liveness),
        );
        Ok(Judged {
            valid: lock.valid.and(validity(liveness.valid && contention.valid)),
            marked: [
                counterexample_ops(&lock.lock_model),
                contention.found.marked_ops(),
            ]
            .concat(),
            checks: into_map(json!({
                "lock": lock,
                "contention": contention,
                "liveness": liveness,
                "run": run,
            })),
            line,
        })
    }

    fn figures(&self, checks: &Map<String, Value>) -> Figures {
        let contenders = self.0.generator.concurrency as u64;
        Figures::of_recipe(checks, self.0.own.workload_name(), contenders)
    }
}
