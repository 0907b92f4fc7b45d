//! `test.yaml`: the effective configuration of a run.

use serde::{Deserialize, Serialize};

use crate::nemesis::NemesisConfig;
use crate::workload::WorkloadFile;

/// The effective configuration of a test, saved as `test.yaml` in its run folder.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestConfig {
    /// The test's name.
    pub name: String,
    /// The database under test.
    pub db: String,
    /// The nodes, by name and address.
    pub nodes: Vec<String>,
    /// The workload file as loaded, with overrides applied.
    pub workload: WorkloadFile,
    /// The nemesis package.
    pub nemesis: NemesisConfig,
}

impl TestConfig {
    /// The distinct fault kinds of the nemesis package in the order first met, joined by `+`
    /// (`none` for a package without faults).
    pub fn fault_kinds(&self) -> String {
        let mut kinds: Vec<String> = Vec::new();
        for fault in &self.nemesis.faults {
            let kind = fault.kind.clone();
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        match kinds.is_empty() {
            true => "none".into(),
            false => kinds.join("+"),
        }
    }
}
