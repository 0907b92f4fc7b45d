//! The counter, judged from its `add` and `read` operations (Jepsen's counter, with what
//! ZooKeeper promises a session besides). Every `add` adds 1; its `ok` value is the total it
//! produced. Reads are `ok` with the total read; the final reads, after the heal and the quiet
//! period, are synced and invoked with the value `"final"`.
//!
//! - **lost increment**: a final read below the `ok` adds completed before it was invoked, or
//!   two `ok` adds that produced the same total (one overwrote the other).
//! - **phantom increment**: a read above every add invoked before it completed (`fail` adds
//!   excluded: the server refused them).
//! - **went back**: a process read a total below one it had already seen (read or produced):
//!   a session never sees older state than it has seen.
//! - **counter gone**: an operation answered `no-node` on the counter created at setup.
//!
//! Without a final read the run has no lower bound to check: the verdict is then unknown.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::history::{Op, OpType};
use crate::workload::anomalies::Anomalies;
use crate::workload::paced::{steps, AddsAndReads, Step, FINAL};

/// The verdict of the counter checker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterReport {
    /// No anomaly found.
    pub valid: bool,
    /// A final read was made, so lost increments could be looked for.
    pub final_read: bool,
    /// How its adds and reads ended.
    #[serde(flatten)]
    pub ops: AddsAndReads,
    /// The total the last final read saw.
    pub final_value: Option<i64>,
    /// Anomalies by kind (`lost-increment`, `phantom-increment`, `went-back`,
    /// `counter-gone`).
    #[serde(flatten)]
    pub found: Anomalies,
}

/// Checks a counter history.
pub fn check_counter(ops: &[Op]) -> CounterReport {
    let mut report = CounterReport::default();
    // Adds invoked so far (not refused), and `ok` adds completed so far, as history goes.
    let mut adds_invoked: i64 = 0;
    let mut adds_done: Vec<(u64, &Op)> = Vec::new();
    let mut seen: HashMap<u64, i64> = HashMap::new();
    let mut produced: HashMap<i64, u64> = HashMap::new();
    for step in steps(ops) {
        let (process, invoke, op) = match step {
            Step::Invoked(op) => {
                if op.f == "add" {
                    adds_invoked += 1;
                }
                continue;
            }
            Step::Completed(process, invoke, op) => (process, invoke, op),
        };
        let setup = "the counter created at setup";
        report.found.note_gone("counter-gone", op, process, setup);
        match (op.f.as_str(), op.kind) {
            ("add", OpType::Ok) => {
                report.ops.adds_ok += 1;
                adds_done.push((op.time, op));
                let Some(total) = op.value.as_i64() else {
                    continue;
                };
                if let Some(first) = produced.insert(total, op.index) {
                    report.found.note(
                        "lost-increment",
                        op,
                        process,
                        format!("produced total {total}, as the add at op {first} did"),
                    );
                }
                see(&mut report, &mut seen, op, process, total);
            }
            ("add", OpType::Fail) => {
                report.ops.adds_fail += 1;
                adds_invoked -= 1;
            }
            ("add", _) => report.ops.adds_info += 1,
            ("read", OpType::Ok) => {
                report.ops.reads += 1;
                let Some(total) = op.value.as_i64() else {
                    continue;
                };
                if total > adds_invoked {
                    report.found.note(
                        "phantom-increment",
                        op,
                        process,
                        format!("read {total} with only {adds_invoked} adds invoked by then"),
                    );
                }
                see(&mut report, &mut seen, op, process, total);
                if invoke.is_some_and(|i| i.value == FINAL) {
                    report.final_read = true;
                    report.final_value = Some(total);
                    let since = invoke.map_or(op.time, |i| i.time);
                    let done = adds_done.iter().filter(|(t, _)| *t < since).count() as i64;
                    if total < done {
                        report.found.note(
                            "lost-increment",
                            op,
                            process,
                            format!("final read {total} with {done} adds acknowledged before it"),
                        );
                    }
                }
            }
            _ => {}
        }
    }
    report.valid = report.found.is_empty();
    report
}

/// Notes that `process` saw `total`; a total below one it saw before went back.
fn see(
    report: &mut CounterReport,
    seen: &mut HashMap<u64, i64>,
    op: &Op,
    process: u64,
    total: i64,
) {
    let highest = seen.entry(process).or_insert(total);
    if total < *highest {
        let before = *highest;
        report.found.note(
            "went-back",
            op,
            process,
            format!("{} saw {total} after having seen {before}", op.f),
        );
    }
    *highest = (*highest).max(total);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::testing::{complete, history, invoke, ok_pair};
    use crate::workload::paced::testing::{final_read, read};

    fn add(process: u64, total: &str) -> [Op; 2] {
        ok_pair(process, "add", "1", total)
    }

    /// Three adds by two processes, reads between them, a final read of `last`.
    fn run(last: &str) -> Vec<Op> {
        let mut lines: Vec<Op> = Vec::new();
        lines.extend(add(1, "1"));
        lines.extend(read(2, "1"));
        lines.extend(add(2, "2"));
        lines.extend(add(1, "3"));
        lines.extend(final_read(1, last));
        history(&lines)
    }

    #[test]
    fn a_counter_that_kept_every_increment_is_valid() {
        let report = check_counter(&run("3"));
        assert!(report.valid && report.final_read, "{report:?}");
        assert_eq!(
            (report.ops.adds_ok, report.ops.reads, report.final_value),
            (3, 2, Some(3))
        );
    }

    #[test]
    fn a_final_read_short_of_the_acknowledged_adds_is_a_lost_increment() {
        let report = check_counter(&run("2"));
        assert!(!report.valid);
        assert_eq!(report.found.counts["lost-increment"], 1, "{report:?}");
        assert_eq!(
            report.found.counts["went-back"], 1,
            "process 1 had produced 3"
        );
    }

    #[test]
    fn two_adds_producing_one_total_lost_an_increment() {
        let mut lines: Vec<Op> = Vec::new();
        lines.extend(add(1, "1"));
        lines.extend(add(2, "1"));
        let report = check_counter(&history(&lines));
        assert_eq!(report.found.counts["lost-increment"], 1, "{report:?}");
        assert!(report
            .found
            .only("lost-increment")
            .what
            .contains("produced total 1"));
    }

    #[test]
    fn a_read_above_the_adds_invoked_is_a_phantom() {
        let mut lines: Vec<Op> = Vec::new();
        lines.extend(add(1, "1"));
        lines.push(invoke(1, "add", "1"));
        lines.push(complete(1, "fail", "add", "1").with_error("bad-arguments"));
        lines.extend(read(2, "2"));
        let report = check_counter(&history(&lines));
        assert_eq!(report.found.counts["phantom-increment"], 1, "{report:?}");
        assert_eq!(report.ops.adds_fail, 1);
    }

    #[test]
    fn an_unknown_add_may_or_may_not_count() {
        for last in ["1", "2"] {
            let mut lines: Vec<Op> = Vec::new();
            lines.extend(add(1, "1"));
            lines.push(invoke(2, "add", "1"));
            lines.push(complete(2, "info", "add", "1").with_error("deadline"));
            lines.extend(final_read(3, last));
            let report = check_counter(&history(&lines));
            assert!(report.valid, "{last}: {report:?}");
        }
    }

    #[test]
    fn a_stale_read_that_is_not_final_is_no_lost_increment() {
        // Unsynced reads may be served by a follower behind: only final reads are held to
        // the acknowledged adds, and a process's reads only to what it saw itself.
        let mut lines: Vec<Op> = Vec::new();
        lines.extend(add(1, "1"));
        lines.extend(add(1, "2"));
        lines.extend(read(2, "0"));
        lines.extend(final_read(2, "2"));
        let report = check_counter(&history(&lines));
        assert!(report.valid, "{report:?}");
    }

    #[test]
    fn no_node_on_the_counter_and_no_final_read_are_reported() {
        let lines = [
            invoke(1, "read", "null"),
            complete(1, "fail", "read", "null").with_error("no-node"),
        ];
        let report = check_counter(&history(&lines));
        assert_eq!(report.found.counts["counter-gone"], 1);
        assert!(!report.final_read);
    }
}
