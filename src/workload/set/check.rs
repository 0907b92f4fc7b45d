//! The set, judged from its `add` and `read` operations (Jepsen's set-full, held to what
//! ZooKeeper promises). Every `add` invokes a fresh element and ends `ok` once its znode was
//! created; a read is `ok` with the sorted elements it listed. The final reads, after the heal
//! and the quiet period, are synced and invoked with the value `"final"`.
//!
//! An element is *known* from the moment an add of it ended `ok` or a read listed it. A read
//! must list every element known before it was invoked when it is synced (a final read, or
//! every read with `sync_reads`): a synced read sees every write completed before it began.
//! Any read must list every element its own session added or listed before: a session never
//! sees older state than it has seen.
//!
//! - **lost element**: a final read misses a known element.
//! - **disappeared**: a read that is not final misses an element it must list (it vanished
//!   after being acknowledged or read, Jepsen set-full's lost-then-found or stale reads).
//! - **unexpected element**: a read lists an element no add invoked before it completed, or
//!   one whose add the server refused.
//! - **set gone**: an operation answered `no-node` on the set's znode created at setup.
//!
//! An add that ended `info` may or may not be present; once listed it is known like any other.
//! Without a final read lost elements cannot be looked for: the verdict is then unknown.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::history::{Op, OpType};
use crate::workload::anomalies::Anomalies;
use crate::workload::paced::{steps, AddsAndReads, Step, FINAL};

/// The verdict of the set checker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetReport {
    /// No anomaly found.
    pub valid: bool,
    /// A final read was made, so lost elements could be looked for.
    pub final_read: bool,
    /// How its adds and reads ended.
    #[serde(flatten)]
    pub ops: AddsAndReads,
    /// Elements the last final read listed.
    pub final_size: Option<usize>,
    /// Anomalies by kind (`lost-element`, `disappeared`, `unexpected-element`, `set-gone`),
    /// each element reported once per kind.
    #[serde(flatten)]
    pub found: Anomalies,
}

/// What the history showed so far.
#[derive(Default)]
struct State {
    /// Elements whose add was invoked and not refused.
    attempted: HashSet<u64>,
    /// Elements whose add the server refused.
    refused: HashSet<u64>,
    /// Known elements and when they became known (ns).
    known: HashMap<u64, u64>,
    /// Elements each process added or listed.
    seen_by: HashMap<u64, HashSet<u64>>,
    /// Elements already reported, by kind.
    reported: HashSet<(&'static str, u64)>,
}

/// Checks a set history; `sync_reads`: every read was synced first.
pub fn check_set(ops: &[Op], sync_reads: bool) -> SetReport {
    let mut report = SetReport::default();
    let mut state = State::default();
    for step in steps(ops) {
        let (process, invoke, op) = match step {
            Step::Invoked(op) => {
                if let ("add", Some(element)) = (op.f.as_str(), op.value.as_u64()) {
                    state.attempted.insert(element);
                }
                continue;
            }
            Step::Completed(process, invoke, op) => (process, invoke, op),
        };
        let setup = "the set created at setup";
        report.found.note_gone("set-gone", op, process, setup);
        match (op.f.as_str(), op.kind) {
            ("add", OpType::Ok) => {
                report.ops.adds_ok += 1;
                if let Some(element) = op.value.as_u64() {
                    state.known.entry(element).or_insert(op.time);
                    state.seen_by.entry(process).or_default().insert(element);
                }
            }
            ("add", OpType::Fail) => {
                report.ops.adds_fail += 1;
                if let Some(element) = op.value.as_u64() {
                    state.attempted.remove(&element);
                    state.refused.insert(element);
                }
            }
            ("add", _) => report.ops.adds_info += 1,
            ("read", OpType::Ok) => {
                report.ops.reads += 1;
                let Some(listed) = elements(&op.value) else {
                    continue;
                };
                let is_final = invoke.is_some_and(|i| i.value == FINAL);
                let read = Read {
                    op,
                    process,
                    since: invoke.map_or(op.time, |i| i.time),
                    synced: is_final || sync_reads,
                    is_final,
                };
                state.missing(&mut report, &read, &listed);
                if is_final {
                    report.final_read = true;
                    report.final_size = Some(listed.len());
                }
                state.listed(&mut report, op, process, &listed);
            }
            _ => {}
        }
    }
    report.valid = report.found.is_empty();
    report
}

impl State {
    /// Reports the elements `read` misses from `listed`: every element known before it
    /// began when it is synced, and every element its process saw. A final read misses them
    /// as lost, any other read as disappeared.
    fn missing(&mut self, report: &mut SetReport, read: &Read, listed: &BTreeSet<u64>) {
        let Read {
            op,
            process,
            since,
            synced,
            is_final,
        } = *read;
        let mut missed: BTreeSet<(u64, &'static str)> = BTreeSet::new();
        if synced {
            for (&element, &at) in &self.known {
                if at < since && !listed.contains(&element) {
                    missed.insert((element, "known before the read began"));
                }
            }
        }
        for &element in self.seen_by.get(&process).into_iter().flatten() {
            if !listed.contains(&element) {
                missed.insert((element, "seen by this session before"));
            }
        }
        let kind = if is_final {
            "lost-element"
        } else {
            "disappeared"
        };
        for (element, why) in missed {
            if self.reported.insert((kind, element)) {
                let read = if is_final { "final read" } else { "read" };
                let what = format!("{read} misses element {element}, {why}");
                report.found.note(kind, op, process, what);
            }
        }
    }

    /// Notes the elements read `op` by `process` listed: each must have been attempted, and
    /// each is known from now on.
    fn listed(&mut self, report: &mut SetReport, op: &Op, process: u64, listed: &BTreeSet<u64>) {
        let seen = self.seen_by.entry(process).or_default();
        for &element in listed {
            if !self.attempted.contains(&element)
                && self.reported.insert(("unexpected-element", element))
            {
                let why = match self.refused.contains(&element) {
                    true => "whose add the server refused",
                    false => "that no add invoked",
                };
                let what = format!("read lists element {element}, {why}");
                report.found.note("unexpected-element", op, process, what);
            }
            self.known.entry(element).or_insert(op.time);
            seen.insert(element);
        }
    }
}

/// A read that ended `ok`, as [`State::missing`] judges it.
#[derive(Clone, Copy)]
struct Read<'a> {
    /// Its completion.
    op: &'a Op,
    /// Its process.
    process: u64,
    /// When it was invoked (ns).
    since: u64,
    /// Synced first: it must list every element known before `since`.
    synced: bool,
    /// A final read: what it misses is lost.
    is_final: bool,
}

/// The elements a read returned (a JSON array of non-negative integers).
fn elements(value: &serde_json::Value) -> Option<BTreeSet<u64>> {
    value.as_array()?.iter().map(|v| v.as_u64()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::testing::{complete, history, invoke, ok_pair};
    use crate::workload::paced::testing::{final_read, read};

    fn add(process: u64, element: &str) -> [Op; 2] {
        ok_pair(process, "add", element, element)
    }

    /// Elements 0 and 1 added by two processes, read in between, a final read of `last`.
    fn run(last: &str) -> Vec<Op> {
        let mut lines: Vec<Op> = Vec::new();
        lines.extend(add(1, "0"));
        lines.extend(read(2, "[0]"));
        lines.extend(add(2, "1"));
        lines.extend(final_read(3, last));
        history(&lines)
    }

    #[test]
    fn a_set_that_kept_every_element_is_valid() {
        let report = check_set(&run("[0,1]"), false);
        assert!(report.valid && report.final_read, "{report:?}");
        assert_eq!(
            (report.ops.adds_ok, report.ops.reads, report.final_size),
            (2, 2, Some(2))
        );
    }

    #[test]
    fn a_final_read_missing_an_acknowledged_element_lost_it() {
        let report = check_set(&run("[1]"), false);
        assert!(!report.valid);
        let lost = report.found.only("lost-element");
        assert!(lost.what.contains("element 0"), "{lost:?}");
        assert_eq!(lost.index, 7, "the final read's completion");
    }

    #[test]
    fn an_element_no_add_invoked_is_unexpected() {
        let report = check_set(&run("[0,1,7]"), false);
        assert!(report
            .found
            .only("unexpected-element")
            .what
            .contains("element 7, that no add invoked"));
    }

    #[test]
    fn an_element_whose_add_was_refused_is_unexpected() {
        let mut lines: Vec<Op> = Vec::new();
        lines.push(invoke(1, "add", "0"));
        lines.push(complete(1, "fail", "add", "0").with_error("node-exists"));
        lines.extend(final_read(2, "[0]"));
        let report = check_set(&history(&lines), false);
        report.found.only("unexpected-element");
        assert_eq!(report.ops.adds_fail, 1);
        // Its twin: the refused element is absent.
        let lines = [&lines[..2], &final_read(2, "[]")].concat();
        assert!(check_set(&history(&lines), false).valid);
    }

    #[test]
    fn an_unknown_add_may_or_may_not_be_present() {
        for last in ["[0]", "[0,1]"] {
            let mut lines: Vec<Op> = Vec::new();
            lines.extend(add(1, "0"));
            lines.push(invoke(2, "add", "1"));
            lines.push(complete(2, "info", "add", "1").with_error("connection-loss"));
            lines.extend(final_read(3, last));
            let report = check_set(&history(&lines), false);
            assert!(report.valid, "{last}: {report:?}");
            assert_eq!(report.ops.adds_info, 1);
        }
    }

    #[test]
    fn an_unknown_add_once_read_must_stay() {
        let mut lines: Vec<Op> = Vec::new();
        lines.push(invoke(2, "add", "1"));
        lines.push(complete(2, "info", "add", "1").with_error("connection-loss"));
        lines.extend(read(3, "[1]"));
        lines.extend(final_read(4, "[]"));
        let report = check_set(&history(&lines), false);
        report.found.only("lost-element");
    }

    #[test]
    fn an_element_a_session_saw_that_its_next_read_misses_disappeared() {
        let mut lines: Vec<Op> = Vec::new();
        lines.extend(add(1, "0"));
        lines.extend(read(2, "[0]"));
        lines.extend(read(2, "[]"));
        lines.extend(final_read(2, "[0]"));
        let report = check_set(&history(&lines), false);
        report.found.only("disappeared");
        assert_eq!(
            report.found.count("lost-element"),
            0,
            "back in the final read"
        );
    }

    #[test]
    fn an_unsynced_read_of_another_session_may_be_stale_but_a_synced_one_not() {
        // Process 2's unsynced read may come from a follower behind process 1's add.
        let mut lines: Vec<Op> = Vec::new();
        lines.extend(add(1, "0"));
        lines.extend(read(2, "[]"));
        lines.extend(final_read(2, "[0]"));
        assert!(check_set(&history(&lines), false).valid);
        // With every read synced it must list what was acknowledged before it began.
        let report = check_set(&history(&lines), true);
        report.found.only("disappeared");
    }

    #[test]
    fn an_add_still_running_when_a_synced_read_began_may_be_missing() {
        let lines = [
            invoke(1, "add", "0"),
            invoke(2, "read", "\"final\""),
            complete(1, "ok", "add", "0"),
            complete(2, "ok", "read", "[]"),
        ];
        assert!(check_set(&history(&lines), true).valid);
    }

    #[test]
    fn no_node_on_the_set_and_no_final_read_are_reported() {
        let lines = [
            invoke(1, "read", "null"),
            complete(1, "fail", "read", "null").with_error("no-node"),
        ];
        let report = check_set(&history(&lines), false);
        report.found.only("set-gone");
        assert!(!report.final_read);
    }
}
