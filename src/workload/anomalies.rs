//! The anomalies a workload's checker found, by kind: every one counted, the first few of each
//! kind listed with the operation and a sentence (what the counter, set, unique-ids and bank
//! checkers report).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::history::{Op, NO_NODE};

/// How many anomalies of each kind are listed; all are counted.
const LISTED: usize = 20;

/// One anomaly: the operation (its completion's index) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anomaly {
    /// History index of the completion.
    pub index: u64,
    /// The client process.
    pub process: u64,
    /// What is wrong, in a sentence with the numbers.
    pub what: String,
}

/// Anomalies by kind, as a report keeps them (`anomalies` and `counts`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anomalies {
    /// The first few anomalies of each kind.
    pub anomalies: BTreeMap<String, Vec<Anomaly>>,
    /// How many anomalies of each kind there are.
    pub counts: BTreeMap<String, usize>,
}

impl Anomalies {
    /// Notes an anomaly of `kind` at `op` (by `process`), saying `what`.
    pub fn note(&mut self, kind: &str, op: &Op, process: u64, what: String) {
        *self.counts.entry(kind.to_string()).or_default() += 1;
        let listed = self.anomalies.entry(kind.to_string()).or_default();
        if listed.len() < LISTED {
            listed.push(Anomaly {
                index: op.index,
                process,
                what,
            });
        }
    }

    /// Notes an anomaly of `kind` when `op` (by `process`) was answered no-node on `what`, a
    /// znode setup created and nothing deletes.
    pub fn note_gone(&mut self, kind: &str, op: &Op, process: u64, what: &str) {
        if op.error.as_deref() == Some(NO_NODE) {
            let said = format!("{} answered no-node on {what}", op.f);
            self.note(kind, op, process, said);
        }
    }

    /// None found.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// How many of `kind` were found.
    #[cfg(test)]
    pub fn count(&self, kind: &str) -> usize {
        self.counts.get(kind).copied().unwrap_or(0)
    }

    /// The one anomaly of `kind`; panics unless exactly one was found.
    #[cfg(test)]
    pub fn only(&self, kind: &str) -> &Anomaly {
        assert_eq!(self.count(kind), 1, "one {kind}: {self:?}");
        &self.anomalies[kind][0]
    }

    /// The indexes of the anomalous completions, for a timeline to outline.
    pub fn marked_ops(&self) -> Vec<u64> {
        self.anomalies.values().flatten().map(|a| a.index).collect()
    }

    /// The verdict line's part: `no anomalies`, or `2 lost-element, 1 unexpected-element`.
    pub fn summary(&self) -> String {
        if self.is_empty() {
            return "no anomalies".into();
        }
        let found: Vec<String> = self
            .counts
            .iter()
            .map(|(kind, n)| format!("{n} {kind}"))
            .collect();
        found.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::testing::complete;

    #[test]
    fn every_anomaly_is_counted_and_the_first_few_listed() {
        let mut found = Anomalies::default();
        assert_eq!(found.summary(), "no anomalies");
        let op = complete(1, "ok", "read", "1");
        for _ in 0..LISTED + 5 {
            found.note("lost", &op, 1, "gone".into());
        }
        found.note("extra", &op, 1, "more".into());
        assert_eq!(found.count("lost"), LISTED + 5);
        assert_eq!(found.anomalies["lost"].len(), LISTED);
        assert_eq!(found.summary(), "1 extra, 25 lost");
        assert_eq!(found.marked_ops().len(), LISTED + 1);
    }
}
