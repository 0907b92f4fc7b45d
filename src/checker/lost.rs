//! The `lost` checker: facts of lost state the workloads recorded. A workload that knows a
//! znode must exist (a directory created at setup and never deleted, an ephemeral node of a
//! session that still answers) records a `no-node` answer on it as an operation whose error
//! begins with `lost:` ([`crate::history::LOST`]). Each such answer proves that state the
//! server had acknowledged is gone, so any one makes the history invalid, whatever the
//! recipe's own checker says about the rest.

use serde::{Deserialize, Serialize};

use crate::history::{Op, OpType, Process, LOST};

/// How many facts the report lists; all are counted.
const LISTED: usize = 100;

/// One recorded fact of lost state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostFact {
    /// History index of the completion that carries it.
    pub index: u64,
    /// The client process that learned it.
    pub process: u64,
    /// The operation it learned it in.
    pub f: String,
    /// What was lost, as the workload said it.
    pub fact: String,
}

/// The verdict of the `lost` checker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostReport {
    /// No fact of lost state in the history.
    pub valid: bool,
    /// How many completions carry one.
    pub count: usize,
    /// The first of them.
    pub facts: Vec<LostFact>,
}

/// Finds the completions whose error is a fact of lost state.
pub fn check_lost(ops: &[Op]) -> LostReport {
    let mut count = 0;
    let mut facts = Vec::new();
    for op in ops.iter().filter(|op| op.kind != OpType::Invoke) {
        let (Process::Client(process), Some(error)) = (op.process, op.error.as_deref()) else {
            continue;
        };
        let Some(fact) = error
            .strip_prefix(LOST)
            .and_then(|rest| rest.strip_prefix(':'))
        else {
            continue;
        };
        count += 1;
        if facts.len() < LISTED {
            facts.push(LostFact {
                index: op.index,
                process,
                f: op.f.clone(),
                fact: fact.trim().to_string(),
            });
        }
    }
    LostReport {
        valid: count == 0,
        count,
        facts,
    }
}

impl LostReport {
    /// History indices of the listed facts, for a timeline to mark.
    pub fn marked_ops(&self) -> Vec<u64> {
        self.facts.iter().map(|f| f.index).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::testing::{complete, history, invoke};

    #[test]
    fn a_recorded_loss_invalidates_and_other_errors_do_not() {
        let ops = history(&[
            invoke(1, "acquire", "null"),
            complete(1, "fail", "acquire", "null").with_error("no-node"),
            invoke(2, "acquire", "null"),
            complete(2, "fail", "acquire", "null").with_error(
                "lost: the lock directory /l, created at setup and never deleted, is gone",
            ),
            invoke(3, "release", "null"),
            complete(3, "info", "release", "null").with_error("lost-connection"),
        ]);
        let report = check_lost(&ops);
        assert!(!report.valid);
        assert_eq!(report.count, 1);
        assert_eq!(
            report.facts,
            [LostFact {
                index: 3,
                process: 2,
                f: "acquire".into(),
                fact: "the lock directory /l, created at setup and never deleted, is gone".into(),
            }]
        );
        assert_eq!(report.marked_ops(), [3]);
        let twin = history(&[
            invoke(2, "acquire", "null"),
            complete(2, "ok", "acquire", "7"),
        ]);
        assert!(check_lost(&twin).valid);
    }
}
