//! The unique-ids workload: processes take ids from the names of persistent sequential
//! znodes (the sequence number ZooKeeper appends); its history is checked for ids given twice
//! and ids below one given before ([`check`]).

mod check;
mod ops;
#[cfg(test)]
mod zk_tests;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{into_map, paced, Entry, Judged, Ran, Section, Settings, Workload};
use crate::generator::{GeneratorConfig, Target};
use crate::history::Op;

/// The registry's entry.
pub const ENTRY: Entry = Entry {
    name: "unique-ids",
    build: |file| Ok(Box::new(UniqueIdsWorkload(Settings::read(file)?))),
    sweeps_contenders: false,
};

/// How an id is made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    /// The sequence number of a persistent sequential znode.
    #[default]
    Sequential,
    /// The last id read from a znode and written back one higher without its version: the
    /// lost-update mistake, which gives one id twice.
    BlindCounter,
}

/// Settings of the unique-ids workload (the `unique-ids` section of
/// `workloads/unique-ids.yaml`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UniqueIdsConfig {
    /// How an id is made.
    pub scheme: Scheme,
}

impl Section for UniqueIdsConfig {
    fn check(&self, _generator: &GeneratorConfig) -> Result<(), String> {
        Ok(())
    }
}

/// The unique-ids workload of one workload file.
pub struct UniqueIdsWorkload(Settings<UniqueIdsConfig>);

#[async_trait]
impl Workload for UniqueIdsWorkload {
    fn settings(&self) -> Value {
        self.0.own_json()
    }

    async fn run(&self, target: Target) -> anyhow::Result<Ran> {
        let ops = ops::UniqueIds::new(self.0.own.scheme, &target.run_id)?;
        paced::run(&self.0, ops, target).await
    }

    /// No id given twice or below one given before; with no id given at all, unknown.
    fn judge(&self, ops: &[Op], run: Option<Value>) -> anyhow::Result<Judged> {
        let ids = check::check_unique_ids(ops);
        let line = format!(
            "unique-ids: {} ids given ({} info, {} fail), highest {}; {}",
            ids.generated,
            ids.unknown,
            ids.refused,
            ids.highest.map_or("none".into(), |h| h.to_string()),
            ids.found.summary(),
        );
        Ok(Judged {
            valid: paced::verdict(ids.valid, ids.generated > 0),
            marked: ids.found.marked_ops(),
            checks: into_map(json!({ "unique-ids": ids, "run": run })),
            line,
        })
    }
}
