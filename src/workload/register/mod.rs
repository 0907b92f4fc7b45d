//! The register workload: each independent key is a znode used as a versioned register
//! (`read`, `write`, and `cas` = setData with an expected version), driven by the generator;
//! its history is checked for linearizability per key and for ZooKeeper's own guarantees.

#[cfg(test)]
mod generator_tests;
mod ops;

use std::sync::Arc;

use anyhow::Context;
use async_trait::async_trait;
use serde_json::{json, Value};

use super::{counterexample_ops, into_map, Entry, Judged, Ran, Section, Settings, Workload};
use crate::checker::models::FailedCas;
use crate::checker::result::{CheckResult, Validity};
use crate::checker::zookeeper::{self, ZkOptions, ZkReport};
use crate::checker::{check_history, CheckOptions};
use crate::generator::{GeneratorConfig, Target};
use crate::history::Op;

pub use ops::{Register, RegisterConfig};

/// The registry's entry.
pub const ENTRY: Entry = Entry {
    name: "register",
    build: |file| Ok(Box::new(RegisterWorkload(Settings::read(file)?))),
    sweeps_contenders: false,
};

/// The register workload of one workload file.
pub struct RegisterWorkload(Settings<RegisterConfig>);

impl Section for RegisterConfig {
    fn check(&self, _generator: &GeneratorConfig) -> Result<(), String> {
        self.validate()
    }
}

#[async_trait]
impl Workload for RegisterWorkload {
    fn settings(&self) -> Value {
        self.0.own_json()
    }

    async fn run(&self, target: Target) -> anyhow::Result<Ran> {
        let ops = Register::new(self.0.own.clone(), &target.run_id, target.seed)?;
        let options = self.0.session.client_options();
        let healed =
            crate::generator::run(&self.0.generator, Arc::new(ops), options, target).await?;
        Ok(Ran {
            summary: None,
            heal_failures: healed.heal_failures,
            releases: None,
        })
    }

    /// Linearizability against the versioned-register model and ZooKeeper's own guarantees
    /// (with every read synced first when `sync_reads`). A cas the server answered
    /// `bad-version` counts as an observation of another version (ZooKeeper compares
    /// atomically), and a `no-node` answer as one of an absent znode.
    fn judge(&self, ops: &[Op], _run: Option<Value>) -> anyhow::Result<Judged> {
        judge_register(ops, self.0.own.sync_reads)
    }
}

/// Judges a register history (`sync_reads`: whether every read was synced first); also
/// what `stampede check` does with a run folder that has no `test.yaml`.
pub fn judge_register(ops: &[Op], sync_reads: bool) -> anyhow::Result<Judged> {
    let options = CheckOptions {
        failed_cas: FailedCas::Mismatch,
        ..CheckOptions::default()
    };
    let linear = check_history(ops, &options).context("checking linearizability")?;
    let zk_options = ZkOptions {
        sync_reads,
        ..ZkOptions::default()
    };
    let zk = zookeeper::check_with(ops, &zk_options).context("checking ZooKeeper's guarantees")?;
    let zk_valid = super::validity(zk.valid);
    let mut marked = counterexample_ops(&linear);
    marked.extend(zk.marked_ops());
    let line = format!(
        "linearizability ({}): {}; zookeeper: {}",
        linear.model,
        linear_summary(&linear),
        zk_summary(&zk)
    );
    Ok(Judged {
        valid: linear.valid.and(zk_valid),
        checks: into_map(json!({ "linearizable": linear, "zookeeper": zk })),
        marked,
        line,
    })
}

/// The linearizability part of a register run's verdict line.
fn linear_summary(linear: &CheckResult) -> String {
    let linear_keys = |v| linear.keys_with(v).len();
    match linear.valid {
        Validity::Valid => format!("valid on {} keys", linear.keys.len()),
        Validity::Invalid => format!(
            "NOT linearizable on {} of {} keys",
            linear_keys(Validity::Invalid),
            linear.keys.len()
        ),
        Validity::Unknown => format!(
            "unknown on {} of {} keys (search limit)",
            linear_keys(Validity::Unknown),
            linear.keys.len()
        ),
    }
}

/// The ZooKeeper-guarantees part of a register run's verdict line.
fn zk_summary(zk: &ZkReport) -> String {
    let found: Vec<String> = zk
        .counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(c, n)| format!("{n} {}", c.name()))
        .collect();
    let valid = if zk.valid { "valid" } else { "INVALID" };
    if found.is_empty() {
        format!(
            "{valid}, no anomalies in {} reads and {} writes",
            zk.reads, zk.writes
        )
    } else {
        format!("{valid} ({})", found.join(", "))
    }
}
