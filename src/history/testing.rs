//! The one builder of hand-written histories for unit tests: [`op`] (or [`invoke`] and
//! [`complete`]) makes an [`Op`], the `with_*` methods fill in its optional fields, and
//! [`history`] or [`indexed`] number a list of them; [`history_ms`] numbers [`MsLine`]s.

use super::{Op, OpType, Process};

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

/// An invocation by client `process` of `f` with the JSON text `value`, for [`history`].
pub fn invoke(process: u64, f: &str, value: &str) -> Op {
    op(0, 0, OpType::Invoke, Process::Client(process), f).with_json(value)
}

/// A completion (`ok`, `fail` or `info`) by client `process` of `f` with the JSON text
/// `value`, for [`history`].
pub fn complete(process: u64, kind: &str, f: &str, value: &str) -> Op {
    let kind = match kind {
        "ok" => OpType::Ok,
        "fail" => OpType::Fail,
        "info" => OpType::Info,
        other => panic!("not a completion type: {other}"),
    };
    op(0, 0, kind, Process::Client(process), f).with_json(value)
}

/// Numbers `ops` into a history: positions from 0, one microsecond apart.
pub fn history(ops: &[Op]) -> Vec<Op> {
    ops.iter()
        .enumerate()
        .map(|(i, op)| Op {
            index: i as u64,
            time: i as u64 * 1000,
            ..op.clone()
        })
        .collect()
}

/// A line of a test history timed in milliseconds: `(time_ms, type, process, f, value)`,
/// process `None` being the nemesis.
pub type MsLine = (u64, OpType, Option<u64>, &'static str, serde_json::Value);

/// Numbers `lines` into a history, keeping their times (milliseconds).
pub fn history_ms(lines: &[MsLine]) -> Vec<Op> {
    indexed(lines.iter().map(|(ms, kind, process, f, value)| {
        let process = process.map_or(Process::NEMESIS, Process::Client);
        op(0, ms * 1_000_000, *kind, process, f).with_value(value.clone())
    }))
}

/// Numbers the positions of `ops` from 0, keeping their times.
pub fn indexed(ops: impl IntoIterator<Item = Op>) -> Vec<Op> {
    ops.into_iter()
        .enumerate()
        .map(|(i, op)| Op {
            index: i as u64,
            ..op
        })
        .collect()
}

impl Op {
    /// The same op with `value`.
    pub fn with_value(self, value: serde_json::Value) -> Op {
        Op { value, ..self }
    }

    /// The same op with the value written as JSON text.
    pub fn with_json(self, value: &str) -> Op {
        self.with_value(serde_json::from_str(value).expect("test value is JSON"))
    }

    /// The same op on `key`.
    pub fn with_key(self, key: &str) -> Op {
        Op {
            key: Some(key.to_owned()),
            ..self
        }
    }

    /// The same op by a process connected to `node`.
    pub fn on_node(self, node: &str) -> Op {
        Op {
            node: Some(node.to_owned()),
            ..self
        }
    }

    /// The same op with `error`.
    pub fn with_error(self, error: &str) -> Op {
        Op {
            error: Some(error.to_owned()),
            ..self
        }
    }

    /// The same op reporting `zxid`.
    pub fn with_zxid(self, zxid: i64) -> Op {
        Op {
            zxid: Some(zxid),
            ..self
        }
    }

    /// The same op reporting data `version`.
    pub fn with_version(self, version: i32) -> Op {
        Op {
            version: Some(version),
            ..self
        }
    }
}

/// An invocation by client `process` of `f` with the JSON text `invoked`, and its `ok`
/// completion returning `returned`, for [`history`].
pub fn ok_pair(process: u64, f: &str, invoked: &str, returned: &str) -> [Op; 2] {
    [
        invoke(process, f, invoked),
        complete(process, "ok", f, returned),
    ]
}
