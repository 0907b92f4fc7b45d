//! The set workload: processes add unique elements to a set of znodes (each add creates a
//! child named after its element) and list them; its history is checked for acknowledged
//! elements lost, elements that vanished after being read and elements never added
//! ([`check`]).

mod check;
mod ops;
#[cfg(test)]
mod zk_tests;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::counter::Mix;
use super::{into_map, paced, Entry, Judged, Ran, Section, Settings, Workload};
use crate::generator::{GeneratorConfig, Target};
use crate::history::Op;

/// The registry's entry.
pub const ENTRY: Entry = Entry {
    name: "set",
    build: |file| Ok(Box::new(SetWorkload(Settings::read(file)?))),
    sweeps_contenders: false,
};

/// Settings of the set workload (the `set` section of `workloads/set.yaml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SetConfig {
    /// Relative weights of `add` and `read`.
    pub mix: Mix,
    /// Whether a read is preceded by a `sync` (final reads always sync).
    pub sync_reads: bool,
    /// Whether elements are ephemeral znodes (`true`: each vanishes with the session that
    /// added it, the forgetting mistake the checker must catch).
    pub ephemeral: bool,
}

impl Default for SetConfig {
    fn default() -> SetConfig {
        SetConfig {
            mix: Mix { add: 3, read: 1 },
            sync_reads: false,
            ephemeral: false,
        }
    }
}

impl Section for SetConfig {
    fn check(&self, _generator: &GeneratorConfig) -> Result<(), String> {
        if self.mix.add == 0 {
            return Err("set.mix.add must be above 0: a set nobody adds to tells nothing".into());
        }
        Ok(())
    }
}

/// The set workload of one workload file.
pub struct SetWorkload(Settings<SetConfig>);

#[async_trait]
impl Workload for SetWorkload {
    fn settings(&self) -> Value {
        self.0.own_json()
    }

    async fn run(&self, target: Target) -> anyhow::Result<Ran> {
        let ops = ops::Set::new(self.0.own, &target.run_id, target.seed)?;
        paced::run(&self.0, ops, target).await
    }

    /// No acknowledged element lost or vanished, none unexpected; without a final read,
    /// unknown.
    fn judge(&self, ops: &[Op], run: Option<Value>) -> anyhow::Result<Judged> {
        let set = check::check_set(ops, self.0.own.sync_reads);
        let final_size = match set.final_size {
            Some(n) => format!("final read {n} elements"),
            None => "NO final read".into(),
        };
        let line = format!(
            "set: {} adds ok ({} info, {} fail), {} reads, {final_size}; {}",
            set.ops.adds_ok,
            set.ops.adds_info,
            set.ops.adds_fail,
            set.ops.reads,
            set.found.summary(),
        );
        Ok(Judged {
            valid: paced::verdict(set.valid, set.final_read),
            marked: set.found.marked_ops(),
            checks: into_map(json!({ "set": set, "run": run })),
            line,
        })
    }
}
