//! The recorded operations of a test: one JSON object per line in `history.jsonl`.
//!
//! This module holds the plain data every stage agrees on. Workloads and the nemesis
//! produce [`Op`]s, the history writer appends them as they happen, and checkers read them
//! back without knowing anything about ZooKeeper's client or SSH. [`fault_intervals`] reads
//! when each fault was in effect out of the nemesis's operations.

use serde::{Deserialize, Serialize};

/// What an entry in the history records: the start of an operation or how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpType {
    /// The operation was issued.
    Invoke,
    /// The operation certainly took effect (reads: returned this value).
    Ok,
    /// The operation certainly did not take effect.
    Fail,
    /// The operation may or may not have taken effect (timeout, connection loss).
    Info,
}

/// Who performed an operation: a logical client process, or the nemesis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Process {
    /// A client process; a process id is never reused after an `info` outcome.
    Client(u64),
    /// The fault injector.
    Nemesis(NemesisTag),
}

/// The literal string `"nemesis"`, as the process of fault operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NemesisTag {
    /// Serialized as `"nemesis"`.
    Nemesis,
}

impl Process {
    /// The nemesis process.
    pub const NEMESIS: Process = Process::Nemesis(NemesisTag::Nemesis);
}

/// How the error of an operation that the end of the run cut short begins (e.g. `abandoned:
/// the run ended while waiting for the lock`): the operation ended `info` because the test was
/// over, not because of anything ZooKeeper did.
pub const ABANDONED: &str = "abandoned";

/// The error of an operation the server answered "no such znode". On a znode the workload
/// created before the run and never deletes (a register's key), it is an observation: the
/// znode was absent, so state the server had acknowledged is gone.
pub const NO_NODE: &str = "no-node";

/// The error of an operation the server answered "bad version": a cas whose expected data
/// version was not the znode's when the server compared them.
pub const BAD_VERSION: &str = "bad-version";

/// How the error of an operation begins when the server's answer proves acknowledged state
/// gone (e.g. `lost: the lock directory ... created at setup is gone`): the workload knew the
/// znode must exist, so the answer is a fact about the state, judged by `checker::lost`.
pub const LOST: &str = "lost";

/// One line of `history.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Op {
    /// Position in the history, from 0, without gaps.
    pub index: u64,
    /// Nanoseconds since the start of the test, from a monotonic clock.
    pub time: u64,
    /// Invocation or completion kind.
    #[serde(rename = "type")]
    pub kind: OpType,
    /// The process that performed the operation.
    pub process: Process,
    /// The operation's function name, e.g. `read`, `write`, `cas`, `start-partition`.
    pub f: String,
    /// The operation's argument (invocations) or result (completions).
    #[serde(default)]
    pub value: serde_json::Value,
    /// The independent key this operation touched, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The node the process was connected to, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The error that made the operation `fail` or `info`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// ZooKeeper's zxid the client saw: the node's mzxid for reads and writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zxid: Option<i64>,
    /// ZooKeeper's data version the client saw (after a write, the new version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i32>,
}

/// Why a history leaves nothing to judge, if it does: it holds no client operation at all
/// (it is empty, or holds only the nemesis's operations). A verdict judged from such a history
/// would say nothing of the database.
pub fn nothing_to_judge(ops: &[Op]) -> Option<String> {
    if ops
        .iter()
        .any(|op| matches!(op.process, Process::Client(_)))
    {
        return None;
    }
    Some(match ops.len() {
        0 => "the history is empty".to_string(),
        1 => "the history holds only 1 nemesis operation".to_string(),
        n => format!("the history holds only {n} nemesis operations"),
    })
}

mod faults;
mod quantiles;
mod recorder;
#[cfg(test)]
pub mod testing;

pub use faults::{fault_intervals, FaultInterval};
pub use quantiles::Quantiles;
pub use recorder::{Meta, Recorder};

#[cfg(test)]
mod tests {
    use super::testing::{complete, history, history_ms, invoke};
    use super::*;

    #[test]
    fn a_history_without_client_operations_leaves_nothing_to_judge() {
        assert_eq!(
            nothing_to_judge(&[]).as_deref(),
            Some("the history is empty")
        );
        let faults = history_ms(&[
            (0, OpType::Info, None, "start-kill", serde_json::Value::Null),
            (5, OpType::Info, None, "stop-kill", serde_json::Value::Null),
        ]);
        assert_eq!(
            nothing_to_judge(&faults).as_deref(),
            Some("the history holds only 2 nemesis operations")
        );
        let read = history(&[invoke(1, "read", "null"), complete(1, "ok", "read", "1")]);
        assert_eq!(nothing_to_judge(&read), None);
    }
}
