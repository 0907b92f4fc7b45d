//! Pairs each client invocation in a history with its completion.

use std::collections::HashMap;

use anyhow::bail;

use crate::history::{Op, OpType, Process};

/// How a client operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It took effect (reads: returned the completion's value).
    Ok,
    /// It certainly did not take effect.
    Fail,
    /// It may or may not have taken effect: an `info` completion, or no completion at all.
    Info,
}

/// One client operation: its invocation and, if the history has it, its completion.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The invocation; an operation's arguments always come from here.
    pub invoke: &'a Op,
    /// The completion, absent when the history ends before the operation did.
    pub completion: Option<&'a Op>,
    /// Position of the invocation in the history slice.
    pub invoke_pos: usize,
    /// Position of the completion in the history slice, if any.
    pub complete_pos: Option<usize>,
}

impl Call<'_> {
    /// How the operation ended.
    pub fn outcome(&self) -> Outcome {
        match self.completion.map(|c| c.kind) {
            Some(OpType::Ok) => Outcome::Ok,
            Some(OpType::Fail) => Outcome::Fail,
            _ => Outcome::Info,
        }
    }

    /// The completion's value (a read's result), or null.
    pub fn result(&self) -> &serde_json::Value {
        static NULL: serde_json::Value = serde_json::Value::Null;
        self.completion.map_or(&NULL, |c| &c.value)
    }

    /// The operation's value as Knossos reads it (`knossos.history/complete`): an ok
    /// completion's (what a read returned, what a write says it wrote), else the invocation's.
    pub fn value(&self) -> &serde_json::Value {
        match self.outcome() {
            Outcome::Ok => self.result(),
            Outcome::Fail | Outcome::Info => &self.invoke.value,
        }
    }

    /// The data version the completion reported, if any.
    pub fn version(&self) -> Option<i32> {
        self.completion.and_then(|c| c.version)
    }

    /// The operation's function name.
    pub fn f(&self) -> &str {
        &self.invoke.f
    }

    /// The error its completion recorded, if any (e.g. `no-node`).
    pub fn error(&self) -> Option<&str> {
        self.completion.and_then(|c| c.error.as_deref())
    }
}

/// Pairs the client operations of a history, in invocation order; nemesis ops are left out.
///
/// An invocation never completed counts as `info`. A completion without an open invocation of
/// its process, or with another function name, is an error naming the op's index.
pub fn pair(ops: &[Op]) -> anyhow::Result<Vec<Call<'_>>> {
    let mut calls: Vec<Call<'_>> = Vec::new();
    let mut open: HashMap<u64, usize> = HashMap::new();
    for (pos, op) in ops.iter().enumerate() {
        let Process::Client(process) = op.process else {
            continue;
        };
        if op.kind == OpType::Invoke {
            if let Some(&earlier) = open.get(&process) {
                bail!(
                    "op {}: process {process} invokes {} while its op {} is still open",
                    op.index,
                    op.f,
                    calls[earlier].invoke.index
                );
            }
            open.insert(process, calls.len());
            calls.push(Call {
                invoke: op,
                completion: None,
                invoke_pos: pos,
                complete_pos: None,
            });
            continue;
        }
        let Some(at) = open.remove(&process) else {
            bail!(
                "op {}: process {process} completes {} without an open invocation",
                op.index,
                op.f
            );
        };
        let call = &mut calls[at];
        if call.invoke.f != op.f {
            bail!(
                "op {}: process {process} completes {} but invoked {} (op {})",
                op.index,
                op.f,
                call.invoke.f,
                call.invoke.index
            );
        }
        call.completion = Some(op);
        call.complete_pos = Some(pos);
    }
    Ok(calls)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::testing::{complete, history, invoke};

    #[test]
    fn pairs_by_process_and_leaves_open_invocations_as_info() {
        let ops = history(&[
            invoke(1, "write", "3"),
            invoke(2, "read", "null"),
            complete(2, "ok", "read", "3"),
            complete(1, "info", "write", "null"),
            invoke(1, "read", "null"),
        ]);
        let calls = pair(&ops).unwrap();
        assert_eq!(calls.len(), 3);
        assert_eq!(calls[0].outcome(), Outcome::Info);
        assert_eq!(calls[0].complete_pos, Some(3));
        assert_eq!(calls[1].outcome(), Outcome::Ok);
        assert_eq!(calls[1].result(), &serde_json::json!(3));
        assert_eq!(calls[2].outcome(), Outcome::Info);
        assert_eq!(calls[2].completion, None);
    }

    #[test]
    fn rejects_orphan_completion_and_double_invoke() {
        let orphan = history(&[complete(1, "ok", "read", "3")]);
        let e = pair(&orphan).unwrap_err().to_string();
        assert!(
            e.contains("op 0") && e.contains("without an open invocation"),
            "{e}"
        );
        let double = history(&[invoke(1, "read", "null"), invoke(1, "write", "1")]);
        let e = pair(&double).unwrap_err().to_string();
        assert!(e.contains("op 1") && e.contains("still open"), "{e}");
        let mismatch = history(&[invoke(1, "read", "null"), complete(1, "ok", "write", "1")]);
        assert!(pair(&mismatch).is_err());
    }
}
