//! Builders for small hand-written histories in unit tests.

use crate::history::{Op, OpType, Process};

/// One line of a test history, before it gets its index and time.
#[derive(Debug, Clone)]
pub struct Line {
    kind: OpType,
    process: u64,
    f: String,
    value: serde_json::Value,
    key: Option<String>,
    version: Option<i32>,
    error: Option<String>,
}

impl Line {
    /// An invocation by client `process` with a JSON `value`.
    pub fn invoke(process: u64, f: &str, value: &str) -> Line {
        Line::new(OpType::Invoke, process, f, value)
    }

    /// A completion (`ok`, `fail` or `info`) by client `process` with a JSON `value`.
    pub fn complete(process: u64, kind: &str, f: &str, value: &str) -> Line {
        let kind = match kind {
            "ok" => OpType::Ok,
            "fail" => OpType::Fail,
            "info" => OpType::Info,
            other => panic!("not a completion type: {other}"),
        };
        Line::new(kind, process, f, value)
    }

    fn new(kind: OpType, process: u64, f: &str, value: &str) -> Line {
        let value = serde_json::from_str(value).expect("test value is JSON");
        Line {
            kind,
            process,
            f: f.to_string(),
            value,
            key: None,
            version: None,
            error: None,
        }
    }

    /// The same line on `key`.
    pub fn key(mut self, key: &str) -> Line {
        self.key = Some(key.to_string());
        self
    }

    /// The same line with `error`.
    pub fn error(mut self, error: &str) -> Line {
        self.error = Some(error.to_string());
        self
    }

    /// The same line reporting data `version`.
    pub fn version(mut self, version: i32) -> Line {
        self.version = Some(version);
        self
    }
}

/// Numbers the lines into a history, one microsecond apart.
pub fn history(lines: &[Line]) -> Vec<Op> {
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| Op {
            index: i as u64,
            time: i as u64 * 1000,
            kind: l.kind,
            process: Process::Client(l.process),
            f: l.f.clone(),
            value: l.value.clone(),
            key: l.key.clone(),
            node: None,
            error: l.error.clone(),
            zxid: None,
            version: l.version,
        })
        .collect()
}
