//! Appends operations to `history.jsonl` as they happen.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Mutex;
use tokio::time::Instant;

use super::{Op, OpType, Process};

/// Optional fields of an operation, beside its kind, process, function and value.
#[derive(Debug, Clone, Default)]
pub struct Meta {
    /// The independent key the operation touched.
    pub key: Option<String>,
    /// The node the process is connected to.
    pub node: Option<String>,
    /// The error behind a `fail` or `info`.
    pub error: Option<String>,
    /// The zxid the client saw.
    pub zxid: Option<i64>,
    /// The data version the client saw.
    pub version: Option<i32>,
}

/// Records a test's history: numbers each operation, stamps it with the monotonic time since
/// the start of the test (tokio's clock: the system's, or a test's paused one), and writes it to the history file at once, one `write` per line, so
/// that a controller killed at any moment loses no operation that was already recorded.
pub struct Recorder {
    start: Instant,
    state: Mutex<State>,
    observer: Option<Observer>,
}

/// Called with every operation just recorded (e.g. to update a progress line).
pub type Observer = Box<dyn Fn(&Op) + Send + Sync>;

struct State {
    file: Option<File>,
    ops: Vec<Op>,
}

impl Recorder {
    /// Starts a history written to `path` (created or truncated).
    pub fn create(path: &Path) -> io::Result<Recorder> {
        let file = File::create(path)?;
        Ok(Recorder::with_file(Some(file)))
    }

    /// Calls `observer` with every operation from now on, after it is written.
    pub fn observed_by(mut self, observer: Observer) -> Recorder {
        self.observer = Some(observer);
        self
    }

    /// Starts a history kept in memory only.
    #[cfg(test)]
    pub fn in_memory() -> Recorder {
        Recorder::with_file(None)
    }

    fn with_file(file: Option<File>) -> Recorder {
        Recorder {
            start: Instant::now(),
            state: Mutex::new(State {
                file,
                ops: Vec::new(),
            }),
            observer: None,
        }
    }

    /// Records one operation and returns it as written.
    pub fn record(
        &self,
        kind: OpType,
        process: Process,
        f: &str,
        value: serde_json::Value,
        meta: Meta,
    ) -> io::Result<Op> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let op = Op {
            index: state.ops.len() as u64,
            time: self.start.elapsed().as_nanos() as u64,
            kind,
            process,
            f: f.to_string(),
            value,
            key: meta.key,
            node: meta.node,
            error: meta.error,
            zxid: meta.zxid,
            version: meta.version,
        };
        if let Some(file) = state.file.as_mut() {
            let mut line = serde_json::to_vec(&op).map_err(io::Error::other)?;
            line.push(b'\n');
            file.write_all(&line)?;
        }
        state.ops.push(op.clone());
        drop(state);
        if let Some(observer) = &self.observer {
            observer(&op);
        }
        Ok(op)
    }

    /// The moment `time` (nanoseconds since the start of the test, as operations are stamped).
    pub fn instant_of(&self, time: u64) -> Instant {
        self.start + std::time::Duration::from_nanos(time)
    }

    /// A copy of every operation recorded so far.
    pub fn ops(&self) -> Vec<Op> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .ops
            .clone()
    }
}
