//! What a queue history shows of the consumers' contention: how many other consumers each
//! `dequeue` raced (the queue positions seen), and dequeues starved while the others took
//! value after value.
//!
//! - **Position**: when a consumer invokes `dequeue`, how many other consumers then have a
//!   `dequeue` in flight (invoked, not completed): 0 alone, `consumers − 1` all racing for
//!   the head of the queue.
//! - **Starved** (a figure: the queue recipe promises no fairness among consumers): one
//!   `dequeue` in flight while the others took more values than the threshold
//!   ([`Contention::starved_after`](crate::workload::rounds::Contention)) without taking one
//!   itself. A dequeue that ended in an error is not judged (its session may have been lost
//!   while it waited); one that took a value, found the queue empty, was abandoned at the end
//!   of the drain, or never ended is.

use std::collections::HashMap;

use super::check::{DEQUEUE, EMPTY};
use crate::history::{Op, OpType, Process, ABANDONED};
use crate::workload::rounds::fairness::ContentionReport;

/// Judges the dequeues of a queue history: positions, and dequeues that saw more than
/// `starved_after` values taken by others. Never an anomaly (`valid` stays true).
pub fn judge_dequeues(ops: &[Op], starved_after: u64) -> ContentionReport {
    let mut report = ContentionReport {
        starved_after,
        valid: true,
        ..ContentionReport::default()
    };
    // Dequeues in flight, by process: the values the others took meanwhile.
    let mut in_flight: HashMap<u64, u64> = HashMap::new();
    for op in ops.iter().filter(|op| op.f == DEQUEUE) {
        let Process::Client(process) = op.process else {
            continue;
        };
        if op.kind == OpType::Invoke {
            let racing = in_flight.keys().filter(|p| **p != process).count();
            *report.positions.entry(racing).or_default() += 1;
            in_flight.insert(process, 0);
            continue;
        }
        if op.kind == OpType::Ok {
            for (_, taken) in in_flight.iter_mut().filter(|(p, _)| **p != process) {
                *taken += 1;
            }
        }
        let Some(taken) = in_flight.remove(&process) else {
            continue;
        };
        let error = op.error.as_deref().unwrap_or("");
        if op.kind == OpType::Ok || error == EMPTY || error.starts_with(ABANDONED) {
            waited(&mut report, op, process, taken);
        }
    }
    if let Some(last) = ops.last() {
        let mut open: Vec<_> = in_flight.into_iter().collect();
        open.sort_unstable();
        for (process, taken) in open {
            waited(&mut report, last, process, taken);
        }
    }
    report
}

/// A judged dequeue of `process` ended at `op` (or the history did) after the others took
/// `taken` values.
fn waited(report: &mut ContentionReport, op: &Op, process: u64, taken: u64) {
    report.wait_ended(op, process, taken, || {
        format!("process {process} waited in a dequeue while the others took {taken} values")
    });
}

/// The verdict line's part: `positions 0:12 1:30 2:8, 1 starved (> 6 values taken by
/// others, not promised)`.
pub fn line(report: &ContentionReport) -> String {
    format!(
        "positions {}, {} starved (> {} values taken by others, not promised)",
        crate::workload::positions::seen(&report.positions),
        report.starved,
        report.starved_after
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::history::testing::{complete, history, invoke};

    fn took(process: u64, value: u64) -> Vec<Op> {
        vec![
            invoke(process, DEQUEUE, "null"),
            complete(process, "ok", DEQUEUE, &value.to_string()),
        ]
    }

    #[test]
    fn a_position_is_the_other_dequeues_in_flight() {
        let mut ops = took(1, 0); // alone: 0
        ops.push(invoke(1, DEQUEUE, "null")); // alone: 0
        ops.push(invoke(2, DEQUEUE, "null")); // 1 in flight: 1
        ops.push(invoke(3, DEQUEUE, "null")); // 1 and 2: 2
        ops.push(complete(2, "ok", DEQUEUE, "1"));
        ops.push(invoke(2, DEQUEUE, "null")); // 1 and 3: 2
        ops.push(complete(1, "info", DEQUEUE, "null").with_error("connection loss"));
        ops.push(invoke(4, DEQUEUE, "null")); // 2 and 3: 2
        ops.push(complete(3, "ok", DEQUEUE, "2"));
        ops.push(complete(2, "fail", DEQUEUE, "null").with_error(EMPTY));
        ops.push(complete(4, "fail", DEQUEUE, "null").with_error(EMPTY));
        ops.extend(took(5, 3)); // alone again: 0
        let r = judge_dequeues(&history(&ops), 2);
        assert_eq!(r.positions, BTreeMap::from([(0, 3), (1, 1), (2, 3)]));
        assert_eq!((r.starved, r.longest_wait_handoffs), (0, 1), "{r:?}");
        assert!(r.valid && !r.fair);
        assert_eq!(
            line(&r),
            "positions 0:3 1:1 2:3, 0 starved (> 2 values taken by others, not promised)"
        );
    }

    #[test]
    fn a_dequeue_that_saw_more_values_taken_than_the_threshold_is_starved_unless_it_failed() {
        let mut ops = vec![invoke(7, DEQUEUE, "null"), invoke(8, DEQUEUE, "null")];
        for value in 0..3 {
            ops.extend(took(1, value));
        }
        ops.push(complete(7, "fail", DEQUEUE, "null").with_error(EMPTY));
        ops.push(complete(8, "info", DEQUEUE, "null").with_error("session expired"));
        ops.push(invoke(9, DEQUEUE, "null"));
        ops.extend(took(1, 3));
        ops.extend(took(1, 4));
        ops.extend(took(1, 5));
        let r = judge_dequeues(&history(&ops), 2);
        assert_eq!(r.starved, 2, "7 and 9 (never ended), not 8: {r:?}");
        let starved: Vec<u64> = r.starved_waits.iter().map(|w| w.process).collect();
        assert_eq!(starved, [7, 9]);
        assert!(r.starved_waits[0].what.contains("took 3 values"));
        assert_eq!(r.longest_wait_handoffs, 3);
        assert!(r.valid, "a figure, not an anomaly");
        assert_eq!(
            judge_dequeues(&history(&ops), 3).starved,
            0,
            "at the threshold"
        );
    }
}
