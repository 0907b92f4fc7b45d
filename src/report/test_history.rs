//! Building blocks of hand-made histories for tests.

use crate::history::{Op, OpType, Process};

/// An op with the given position, time (ns), type, process and function, and no value.
pub fn op(index: u64, time: u64, kind: OpType, process: Process, f: &str) -> Op {
    Op {
        index,
        time,
        kind,
        process,
        f: f.to_owned(),
        value: serde_json::Value::Null,
        key: None,
        node: None,
        error: None,
        zxid: None,
        version: None,
    }
}
