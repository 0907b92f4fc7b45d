//! The counter workload: processes add 1 to one counter znode by versioned setData (read the
//! total and its version, set it one higher if nobody got in first, else again) and read it;
//! its history is checked for lost and phantom increments and for reads that went back
//! ([`check`]).

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
    name: "counter",
    build: |file| Ok(Box::new(CounterWorkload(Settings::read(file)?))),
    sweeps_contenders: false,
};

/// Settings of the counter workload (the `counter` section of `workloads/counter.yaml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CounterConfig {
    /// Relative weights of the operations.
    pub mix: Mix,
    /// Whether a read is preceded by a `sync` (final reads always sync).
    pub sync_reads: bool,
    /// Whether an add sets the total with the version it read (`false`: blindly, the
    /// lost-update mistake the checker must catch).
    pub versioned: bool,
}

/// Relative weights of `add` and `read`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Mix {
    /// Weight of `add`.
    pub add: u32,
    /// Weight of `read`.
    pub read: u32,
}

impl Default for Mix {
    fn default() -> Mix {
        Mix { add: 1, read: 1 }
    }
}

impl Default for CounterConfig {
    fn default() -> CounterConfig {
        CounterConfig {
            mix: Mix::default(),
            sync_reads: false,
            versioned: true,
        }
    }
}

impl CounterConfig {
    /// Checks the values; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.mix.add == 0 {
            return Err(
                "counter.mix.add must be above 0: a counter nobody adds to tells nothing".into(),
            );
        }
        Ok(())
    }
}

/// The counter workload of one workload file.
pub struct CounterWorkload(Settings<CounterConfig>);

impl Section for CounterConfig {
    fn check(&self, _generator: &GeneratorConfig) -> Result<(), String> {
        self.validate()
    }
}

#[async_trait]
impl Workload for CounterWorkload {
    fn settings(&self) -> Value {
        self.0.own_json()
    }

    async fn run(&self, target: Target) -> anyhow::Result<Ran> {
        let ops = ops::Counter::new(self.0.own, &target.run_id, target.seed)?;
        paced::run(&self.0, ops, target).await
    }

    /// No lost or phantom increment, no read that went back; without a final read, unknown.
    fn judge(&self, ops: &[Op], run: Option<Value>) -> anyhow::Result<Judged> {
        let counter = check::check_counter(ops);
        let final_value = match counter.final_value {
            Some(total) => format!("final total {total}"),
            None => "NO final read".into(),
        };
        let line = format!(
            "counter: {} adds ok ({} info, {} fail), {} reads, {final_value}; {}",
            counter.ops.adds_ok,
            counter.ops.adds_info,
            counter.ops.adds_fail,
            counter.ops.reads,
            counter.found.summary(),
        );
        Ok(Judged {
            valid: paced::verdict(counter.valid, counter.final_read),
            marked: counter.found.marked_ops(),
            checks: into_map(json!({ "counter": counter, "run": run })),
            line,
        })
    }
}
