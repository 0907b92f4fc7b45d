//! When each fault was active, from the nemesis operations of a history.

use std::collections::HashMap;

use crate::history::{Op, OpType, Process};

/// A stretch of the test during which one kind of fault was in effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NemesisInterval {
    /// The fault kind, from `start-<kind>`: `partition`, `kill`, `pause`, `clock`, `packet`.
    pub kind: String,
    /// Nanoseconds since the start of the test at which the fault took effect.
    pub start: u64,
    /// Nanoseconds since the start at which it was healed (the end of the history if never).
    pub end: u64,
}

/// The intervals during which each fault was active, ordered by start. A fault is active
/// from the completion of its `start-<kind>` op to the completion of the next `stop-<kind>`.
/// A start that failed is ignored; a start that never completed may have taken effect, so it
/// counts from its invocation; a fault never healed lasts to the end of the history.
pub fn nemesis_intervals(ops: &[Op]) -> Vec<NemesisInterval> {
    let end = ops.iter().map(|o| o.time).max().unwrap_or(0);
    let mut intervals = Vec::new();
    let mut active: HashMap<&str, u64> = HashMap::new();
    let mut pending_start: HashMap<&str, u64> = HashMap::new();
    for op in ops.iter().filter(|o| o.process == Process::NEMESIS) {
        let (starting, kind) = match (op.f.strip_prefix("start-"), op.f.strip_prefix("stop-")) {
            (Some(kind), _) => (true, kind),
            (_, Some(kind)) => (false, kind),
            _ => continue,
        };
        match (starting, op.kind) {
            (true, OpType::Invoke) => _ = pending_start.insert(kind, op.time),
            (true, OpType::Fail) => _ = pending_start.remove(kind),
            (true, _) => {
                pending_start.remove(kind);
                active.entry(kind).or_insert(op.time);
            }
            (false, OpType::Ok | OpType::Info) => {
                if let Some(start) = active.remove(kind) {
                    intervals.push(NemesisInterval {
                        kind: kind.to_owned(),
                        start,
                        end: op.time,
                    });
                }
            }
            (false, _) => {}
        }
    }
    let unhealed = active.into_iter().chain(pending_start);
    intervals.extend(unhealed.map(|(kind, start)| NemesisInterval {
        kind: kind.to_owned(),
        start,
        end,
    }));
    intervals.sort_by(|a, b| (a.start, &a.kind).cmp(&(b.start, &b.kind)));
    intervals
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_history::op;

    fn summary(ops: &[Op]) -> Vec<(String, u64, u64)> {
        nemesis_intervals(ops)
            .into_iter()
            .map(|i| (i.kind, i.start, i.end))
            .collect()
    }

    #[test]
    fn active_from_start_completion_to_stop_completion() {
        let n = Process::NEMESIS;
        let ops = vec![
            op(0, 10, OpType::Invoke, n, "start-partition"),
            op(1, 20, OpType::Info, n, "start-partition"),
            op(2, 25, OpType::Invoke, Process::Client(1), "read"),
            op(3, 30, OpType::Invoke, n, "start-kill"),
            op(4, 35, OpType::Info, n, "start-kill"),
            op(5, 50, OpType::Invoke, n, "stop-partition"),
            op(6, 60, OpType::Info, n, "stop-partition"),
            op(7, 70, OpType::Invoke, n, "start-pause"),
            op(8, 75, OpType::Fail, n, "start-pause"),
            op(9, 80, OpType::Invoke, n, "start-clock"),
            op(10, 90, OpType::Ok, Process::Client(1), "read"),
        ];
        assert_eq!(
            summary(&ops),
            [
                ("partition".to_owned(), 20, 60),
                ("kill".to_owned(), 35, 90),
                ("clock".to_owned(), 80, 90),
            ]
        );
    }

    #[test]
    fn stop_without_start_and_repeated_start_are_harmless() {
        let n = Process::NEMESIS;
        let ops = vec![
            op(0, 10, OpType::Info, n, "stop-packet"),
            op(1, 20, OpType::Info, n, "start-packet"),
            op(2, 30, OpType::Info, n, "start-packet"),
            op(3, 40, OpType::Info, n, "stop-packet"),
            op(4, 50, OpType::Info, n, "stop-packet"),
        ];
        assert_eq!(summary(&ops), [("packet".to_owned(), 20, 40)]);
    }
}
