//! Unique ids, judged from the `generate` operations: each ends `ok` with the id it was given.
//! With sequential znodes the id is the sequence number ZooKeeper appended to the name, the
//! parent's child version (cversion) when the create was applied: it grows with every child
//! created or deleted, and writes are linearizable, so a create applied after another gets a
//! higher number.
//!
//! - **duplicate id**: one id acknowledged to two generates.
//! - **went back**: a process was given an id not above the one it was given before (a
//!   session's requests are applied in the order it sent them).
//! - **out of order**: an id not above one acknowledged to another process's generate that
//!   completed before this one was invoked (writes respect real-time precedence).
//!
//! - **ids gone**: a generate answered `no-node` on the directory created at setup.
//!
//! Generates that ended `info` may or may not have used an id; nothing is expected of them.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::history::{Op, OpType, Process, NO_NODE};
use crate::workload::anomalies::Anomalies;

/// The verdict of the unique-ids checker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UniqueIdsReport {
    /// No anomaly found.
    pub valid: bool,
    /// Generates that ended `ok`.
    pub generated: u64,
    /// Generates whose outcome is unknown.
    pub unknown: u64,
    /// Generates the server refused.
    pub refused: u64,
    /// The highest id acknowledged.
    pub highest: Option<i64>,
    /// Anomalies by kind (`duplicate-id`, `went-back`, `out-of-order`, `ids-gone`).
    #[serde(flatten)]
    pub found: Anomalies,
}

/// An acknowledged id: the generate's completion index and process.
#[derive(Clone, Copy)]
struct Given {
    id: i64,
    index: u64,
    process: u64,
}

/// Checks a unique-ids history.
pub fn check_unique_ids(ops: &[Op]) -> UniqueIdsReport {
    let mut report = UniqueIdsReport::default();
    // The highest id acknowledged so far, and the highest when each process invoked.
    let mut highest: Option<Given> = None;
    let mut floor_at_invoke: HashMap<u64, Option<Given>> = HashMap::new();
    let mut last_of: HashMap<u64, Given> = HashMap::new();
    let mut given: HashMap<i64, Given> = HashMap::new();
    for op in ops.iter().filter(|o| o.f == "generate") {
        let Process::Client(process) = op.process else {
            continue;
        };
        let floor = match op.kind {
            OpType::Invoke => {
                floor_at_invoke.insert(process, highest);
                continue;
            }
            OpType::Ok => floor_at_invoke.remove(&process).flatten(),
            OpType::Fail => {
                report.refused += 1;
                if op.error.as_deref() == Some(NO_NODE) {
                    let what = "generate answered no-node on the directory created at setup";
                    report.found.note("ids-gone", op, process, what.into());
                }
                continue;
            }
            OpType::Info => {
                report.unknown += 1;
                continue;
            }
        };
        report.generated += 1;
        let Some(id) = op.value.as_i64() else {
            continue;
        };
        let this = Given {
            id,
            index: op.index,
            process,
        };
        if let Some(first) = given.insert(id, this) {
            let what = format!(
                "id {id} was given to op {} (process {}) already",
                first.index, first.process
            );
            report.found.note("duplicate-id", op, process, what);
        } else if let Some(last) = last_of.get(&process).filter(|l| l.id >= id) {
            let what = format!("given id {id} after id {} (op {})", last.id, last.index);
            report.found.note("went-back", op, process, what);
        } else if let Some(before) = floor.filter(|f| f.id >= id) {
            let what = format!(
                "given id {id}, though id {} (op {}, process {}) was acknowledged before it began",
                before.id, before.index, before.process
            );
            report.found.note("out-of-order", op, process, what);
        }
        last_of.insert(process, this);
        if highest.is_none_or(|h| id > h.id) {
            highest = Some(this);
        }
    }
    report.highest = highest.map(|h| h.id);
    report.valid = report.found.is_empty();
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::testing::{complete, history, invoke, ok_pair};

    fn generate(process: u64, id: &str) -> [Op; 2] {
        ok_pair(process, "generate", "null", id)
    }

    /// Two processes given ids one after the other; process 2's last id is `last`.
    fn run(last: &str) -> Vec<Op> {
        let mut lines: Vec<Op> = Vec::new();
        lines.extend(generate(1, "0"));
        lines.extend(generate(2, "1"));
        lines.extend(generate(1, "2"));
        lines.extend(generate(2, last));
        history(&lines)
    }

    #[test]
    fn increasing_unique_ids_are_valid() {
        let report = check_unique_ids(&run("3"));
        assert!(report.valid, "{report:?}");
        assert_eq!((report.generated, report.highest), (4, Some(3)));
    }

    #[test]
    fn an_id_given_twice_is_a_duplicate() {
        let report = check_unique_ids(&run("2"));
        assert!(report
            .found
            .only("duplicate-id")
            .what
            .contains("op 5 (process 1)"));
        assert_eq!(report.found.count("out-of-order"), 0, "one anomaly per id");
    }

    #[test]
    fn a_lower_id_than_the_session_had_went_back() {
        let mut lines: Vec<Op> = Vec::new();
        lines.extend(generate(1, "5"));
        lines.extend(generate(1, "4"));
        let report = check_unique_ids(&history(&lines));
        report.found.only("went-back");
    }

    #[test]
    fn a_lower_id_than_one_acknowledged_before_is_out_of_order() {
        let mut lines: Vec<Op> = Vec::new();
        lines.extend(generate(1, "5"));
        lines.extend(generate(2, "4"));
        let report = check_unique_ids(&history(&lines));
        report.found.only("out-of-order");
        // Its twin: concurrent generates may be given ids in either order.
        let lines = [
            invoke(1, "generate", "null"),
            invoke(2, "generate", "null"),
            complete(1, "ok", "generate", "5"),
            complete(2, "ok", "generate", "4"),
        ];
        assert!(check_unique_ids(&history(&lines)).valid);
    }

    #[test]
    fn unknown_and_refused_generates_expect_nothing() {
        let mut lines: Vec<Op> = vec![
            invoke(1, "generate", "null"),
            complete(1, "info", "generate", "null").with_error("connection-loss"),
            invoke(2, "generate", "null"),
            complete(2, "fail", "generate", "null").with_error("throttled"),
        ];
        lines.extend(generate(3, "7"));
        let report = check_unique_ids(&history(&lines));
        assert!(report.valid, "{report:?}");
        assert_eq!(
            (report.unknown, report.refused, report.generated),
            (1, 1, 1)
        );
        // Refused for want of the directory: it was created at setup and never deleted.
        lines[3] = lines[3].clone().with_error("no-node");
        let report = check_unique_ids(&history(&lines));
        report.found.only("ids-gone");
    }
}
