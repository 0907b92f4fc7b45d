//! The election workloads as the registry runs them: candidates under the nemesis schedule;
//! judged for one leader at a time, the office never empty for long after the heal, and
//! failover times.

use anyhow::Context;
use async_trait::async_trait;
use serde_json::{json, Map, Value};

use super::driver::Candidates;
use super::{ElectionConfig, ElectionRecipe};
use crate::checker::election::check_election;
use crate::checker::liveness;
use crate::generator::{GeneratorConfig, Target};
use crate::history::Op;
use crate::workload::rounds::{self, fairness, RecipeSection};
use crate::workload::{
    into_map, liveness_summary, validity, Entry, Figures, Judged, Ran, Section, Settings, Workload,
};

/// The registry's entry.
pub const ENTRY: Entry = Entry {
    name: "election",
    build: |file| Ok(Box::new(ElectionWorkload(Settings::read(file)?))),
    sweeps_contenders: false,
};

/// An election workload of one workload file.
pub struct ElectionWorkload(Settings<ElectionConfig>);

impl Section for ElectionConfig {
    fn check(&self, _generator: &GeneratorConfig) -> Result<(), String> {
        self.validate()
    }
}

#[async_trait]
impl Workload for ElectionWorkload {
    fn settings(&self) -> Value {
        self.0.own_json()
    }

    fn holder_op(&self) -> Option<&'static str> {
        Some("lead")
    }

    async fn run(&self, target: Target) -> anyhow::Result<Ran> {
        rounds::run::<Candidates>(&self.0, target).await
    }

    /// Never two leaders in office at once, never an empty office for long once the faults
    /// are healed, and in the fair recipe office taken in the order of the candidates'
    /// sequential nodes; time without a leader and failover times.
    fn judge(&self, ops: &[Op], run: Option<Value>) -> anyhow::Result<Judged> {
        let election = check_election(ops).context("checking the election")?;
        let liveness = liveness::check_election(ops, self.0.session.liveness());
        let own = &self.0.own;
        let fair = own.recipe == ElectionRecipe::Fair;
        let threshold = own
            .contention
            .starvation_threshold(self.0.generator.concurrency);
        let contention = fairness::judge_terms(ops, fair, threshold, self.0.session.op_timeout.0);
        let line = format!(
            "election: {} overlapping terms in {} terms by {} leaders, {} ms without a leader (longest {} ms), failover p50 {:.1} ms max {:.1} ms; contention: {}; liveness: {}",
            election.overlaps.len(),
            election.terms,
            election.terms_per_leader.len(),
            election.leaderless_ns / 1_000_000,
            election.longest_leaderless_ns / 1_000_000,
            election.failover.p50_ms,
            election.failover.max_ms,
            contention.line(),
            liveness_summary(&liveness),
        );
        Ok(Judged {
            valid: validity(election.valid && liveness.valid && contention.valid),
            marked: contention.found.marked_ops(),
            checks: into_map(json!({
                "election": election,
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
