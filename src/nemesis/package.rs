//! Nemesis packages: the faults a test takes turns injecting (`nemeses/*.yaml`).

use std::sync::Arc;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::{ClockConfig, Nemesis, NetemConfig};
use crate::control::Control;
use crate::db::Db;

/// A nemesis file: the faults, injected in turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NemesisConfig {
    /// The faults; empty for a run without faults.
    #[serde(default)]
    pub faults: Vec<FaultConfig>,
}

/// One fault of a package.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultConfig {
    /// `partition`, `kill` or `pause`.
    pub kind: String,
    /// Which nodes (see `stampede nemesis run --help`).
    #[serde(default = "default_target")]
    pub target: String,
    /// Settings of a `packet` fault (default: 100 ms delay, 10 ms jitter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netem: Option<NetemConfig>,
    /// Settings of a `clock` fault (default: bump by 5 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockConfig>,
}

fn default_target() -> String {
    "one".into()
}

impl NemesisConfig {
    /// Builds the package's nemeses; an error names the fault that is wrong.
    pub fn build(&self, control: &Control, db: Arc<dyn Db>) -> anyhow::Result<Vec<Arc<dyn Nemesis>>> {
        self.faults
            .iter()
            .enumerate()
            .map(|(i, f)| {
                super::build(f, control.clone(), db.clone())
                    .with_context(|| format!("faults[{i}] ({} on {})", f.kind, f.target))
            })
            .collect()
    }
}
