//! The watch workload: writers change a few znodes under the run's root (data changes of
//! `k<i>`, creates and deletes of its child `k<i>/c`, each key owned by one writer slot), and
//! watchers set one-shot data, exist and child watches and re-arm them after each event
//! (even watcher slots), or persistent watches on each key and a persistent-recursive watch on
//! the root (odd watcher slots), reading the znodes now and then. Every write with its zxid,
//! every watch set, event and session change received, and every read is recorded as it
//! happens; [`check`] judges ZooKeeper's watch guarantees from that history.

mod check;
mod driver;
#[cfg(test)]
mod zk_tests;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use serde_json::Map;

use super::{into_map, Entry, Figures, Judged, Ran, Section, Settings, Workload};
use crate::config::Duration;
use crate::generator::{GeneratorConfig, Target};
use crate::history::Op;

use check::check_watch;

/// The registry's entry.
pub const ENTRY: Entry = Entry {
    name: "watch",
    build: |file| Ok(Box::new(WatchWorkload(Settings::read(file)?))),
    sweeps_contenders: false,
};

/// Settings of the watch workload (the `watch` section of `workloads/watch.yaml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WatchConfig {
    /// Znodes changed (`k0`..): each one's data, and its child `c` created and deleted.
    pub keys: usize,
    /// Writer slots (each owning the keys `i` with `i % writers` its slot); the rest of the
    /// generator's concurrency watches.
    pub writers: usize,
    /// Pause after each write.
    pub write_pause: Duration,
    /// A watcher reads one of its znodes this often (without setting a watch).
    pub read_every: Duration,
}

impl Default for WatchConfig {
    fn default() -> WatchConfig {
        WatchConfig {
            keys: 3,
            writers: 2,
            write_pause: Duration(std::time::Duration::from_millis(50)),
            read_every: Duration(std::time::Duration::from_millis(100)),
        }
    }
}

impl WatchConfig {
    /// Checks the values against the generator's concurrency; the error names the field.
    pub fn validate(&self, concurrency: usize) -> Result<(), String> {
        if self.writers == 0 || self.keys < self.writers {
            return Err(format!(
                "watch.writers must be at least 1 and at most watch.keys ({}), not {}",
                self.keys, self.writers
            ));
        }
        if concurrency < self.writers + 2 {
            return Err(format!(
                "generator.concurrency must be at least watch.writers + 2 ({}): one watcher with \
                 one-shot watches and one with persistent ones",
                self.writers + 2
            ));
        }
        if self.read_every.0.is_zero() {
            return Err("watch.read_every must be above 0".into());
        }
        Ok(())
    }
}

impl Section for WatchConfig {
    fn check(&self, generator: &GeneratorConfig) -> Result<(), String> {
        self.validate(generator.concurrency)
    }
}

/// The watch workload of one workload file.
pub struct WatchWorkload(Settings<WatchConfig>);

#[async_trait]
impl Workload for WatchWorkload {
    fn settings(&self) -> Value {
        self.0.own_json()
    }

    async fn run(&self, target: Target) -> anyhow::Result<Ran> {
        let options = self.0.session.client_options();
        let healed = driver::run(&self.0.generator, &self.0.own, options, target).await?;
        let releases = healed.summary.herd.releases;
        Ran::kept(healed, Some(releases))
    }

    /// ZooKeeper's watch guarantees ([`check`]); unknown when nothing could be judged.
    fn judge(&self, ops: &[Op], run: Option<Value>) -> anyhow::Result<Judged> {
        let watch = check_watch(ops);
        let line = watch.line();
        Ok(Judged {
            valid: watch.validity(),
            marked: watch.found.marked_ops(),
            checks: into_map(json!({ "watch": watch, "run": run })),
            line,
        })
    }

    /// The herd figures per write (notifications and re-arming requests), as the recipes'
    /// per release.
    fn figures(&self, checks: &Map<String, Value>) -> Figures {
        let watchers = (self.0.generator.concurrency - self.0.own.writers) as u64;
        Figures::of_recipe(checks, ENTRY.name, watchers)
    }
}
