//! Pairing each invocation with its completion: the span of one operation.

use std::collections::HashMap;

use crate::history::{Op, OpType, Process};

/// One operation from its invocation to its completion. A process has at most one open
/// operation, so a completion belongs to its process's open invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct OpSpan<'a> {
    /// The invocation.
    pub invoke: &'a Op,
    /// The completion, or `None` when the history ended first.
    pub completion: Option<&'a Op>,
    /// Nanoseconds since the start of the test at which the operation ended: the completion's
    /// time, or the end of the history for an operation that never completed.
    pub end: u64,
}

impl OpSpan<'_> {
    /// How the operation ended; one that never completed counts as `info`, since it may or
    /// may not have taken effect.
    pub fn outcome(&self) -> OpType {
        self.completion.map_or(OpType::Info, |c| c.kind)
    }

    /// Nanoseconds from invocation to completion (or to the end of the history).
    pub fn latency(&self) -> u64 {
        self.end.saturating_sub(self.invoke.time)
    }
}

/// Pairs the invocations in `ops` (a history in order) with their completions, in invocation
/// order. Invocations without a completion end at the last op's time as `info`; a completion
/// without an open invocation of its process is skipped. An invocation on a process that
/// already has one open leaves the earlier one open to the end.
pub fn pair_ops(ops: &[Op]) -> Vec<OpSpan<'_>> {
    let end = ops.iter().map(|o| o.time).max().unwrap_or(0);
    let mut spans: Vec<OpSpan<'_>> = Vec::new();
    let mut open: HashMap<Process, usize> = HashMap::new();
    for op in ops {
        if op.kind == OpType::Invoke {
            open.insert(op.process, spans.len());
            spans.push(OpSpan {
                invoke: op,
                completion: None,
                end,
            });
        } else if let Some(i) = open.remove(&op.process) {
            spans[i].completion = Some(op);
            spans[i].end = op.time;
        }
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::testing::op;

    #[test]
    fn pairs_per_process_and_ends_open_ops_as_info() {
        let ops = vec![
            op(0, 100, OpType::Invoke, Process::Client(1), "read"),
            op(1, 150, OpType::Invoke, Process::Client(2), "write"),
            op(2, 180, OpType::Invoke, Process::NEMESIS, "start-kill"),
            op(3, 200, OpType::Ok, Process::Client(2), "write"),
            op(4, 260, OpType::Fail, Process::Client(1), "read"),
            op(5, 300, OpType::Invoke, Process::Client(3), "cas"),
            op(6, 310, OpType::Info, Process::NEMESIS, "start-kill"),
            op(7, 400, OpType::Ok, Process::Client(9), "read"),
        ];
        let spans = pair_ops(&ops);
        let summary: Vec<(u64, OpType, u64)> = spans
            .iter()
            .map(|s| (s.invoke.index, s.outcome(), s.latency()))
            .collect();
        assert_eq!(
            summary,
            [
                (0, OpType::Fail, 160),
                (1, OpType::Ok, 50),
                (2, OpType::Info, 130),
                (5, OpType::Info, 100),
            ]
        );
        assert!(spans[3].completion.is_none());
        assert_eq!(spans[1].completion.map(|c| c.index), Some(3));
    }
}
