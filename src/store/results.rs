//! `results.json`: the verdict of a run and every checker's report.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::checker::exposure::Exposure;
use crate::checker::lost::LostReport;
use crate::checker::result::{Counts, Validity};
use crate::workload::Figures;

/// The schema `results.json` is written in. Version 1 (folders written before this module
/// existed, without the field) is read too: `RunFolder::read_results` derives its figures
/// from its checker reports.
pub const SCHEMA: u32 = 2;

/// What a run's `results.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// The schema version the file was written in.
    #[serde(default = "first_schema")]
    pub schema: u32,
    /// The verdict: valid, invalid, or unknown (also when aborted).
    pub valid: Validity,
    /// The verdict line as printed (absent from version 1 files).
    #[serde(default)]
    pub verdict_line: Option<String>,
    /// Why the run stopped early, if it did.
    #[serde(default)]
    pub aborted: Option<String>,
    /// Why the run did not finish, when `stampede check` judged a folder its run left without
    /// a `results.json` (its controller stopped before the heal and the replica comparison):
    /// this file, written by the check, does not make the run finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfinished: Option<String>,
    /// The faults the run met.
    #[serde(default)]
    pub exposure: Option<Exposure>,
    /// Facts of lost state the history holds.
    #[serde(default)]
    pub lost: Option<LostReport>,
    /// How the client operations ended, per function.
    #[serde(default)]
    pub operations: BTreeMap<String, Counts>,
    /// What a recipe run measured.
    #[serde(default)]
    pub figures: Figures,
    /// Each checker's report by checker (`linearizable`, `zookeeper`, `lock`, `liveness`,
    /// `election`, `barrier`, `queue`, …) and the recipe run's summary as `run`.
    #[serde(flatten)]
    pub checks: Map<String, Value>,
}

fn first_schema() -> u32 {
    1
}

impl Results {
    /// The verdict as one word: `valid`, `INVALID`, `unknown`, or `unknown (aborted)`.
    pub fn verdict_word(&self) -> &'static str {
        match (self.verdict(), self.aborted.is_some()) {
            (Validity::Valid, _) => "valid",
            (Validity::Invalid, _) => "INVALID",
            (Validity::Unknown, true) => "unknown (aborted)",
            (Validity::Unknown, false) => "unknown",
        }
    }

    /// The verdict counting an aborted run as unknown whatever its checkers said.
    pub fn verdict(&self) -> Validity {
        match (self.valid, self.aborted.is_some()) {
            (Validity::Invalid, _) => Validity::Invalid,
            (_, true) => Validity::Unknown,
            (valid, false) => valid,
        }
    }
}
