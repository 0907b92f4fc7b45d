//! Verdicts: what `stampede check` prints and what `results.json` holds.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::calls::{Call, Outcome};
use crate::history::Process;

/// Whether a history (or one key's part of it) passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validity {
    /// Linearizable.
    Valid,
    /// Not linearizable: an anomaly was found.
    Invalid,
    /// A search limit was hit before a verdict.
    Unknown,
}

impl Validity {
    /// The verdict of two parts together: an anomaly anywhere wins, then any unknown.
    pub fn and(self, other: Validity) -> Validity {
        use Validity::*;
        match (self, other) {
            (Invalid, _) | (_, Invalid) => Invalid,
            (Unknown, _) | (_, Unknown) => Unknown,
            _ => Valid,
        }
    }

    /// The process exit code for this verdict: 0 valid, 1 anomalies, 2 unknown.
    pub fn exit_code(self) -> u8 {
        match self {
            Validity::Valid => 0,
            Validity::Invalid => 1,
            Validity::Unknown => 2,
        }
    }
}

/// Serialized as `true`, `false` or `"unknown"`.
impl Serialize for Validity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Validity::Valid => s.serialize_bool(true),
            Validity::Invalid => s.serialize_bool(false),
            Validity::Unknown => s.serialize_str("unknown"),
        }
    }
}

/// Read from `true`, `false` or `"unknown"`.
impl<'de> Deserialize<'de> for Validity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Bool(true) => Ok(Validity::Valid),
            serde_json::Value::Bool(false) => Ok(Validity::Invalid),
            serde_json::Value::String(s) if s == "unknown" => Ok(Validity::Unknown),
            other => Err(serde::de::Error::custom(format!(
                "a verdict is true, false or \"unknown\", not {other}"
            ))),
        }
    }
}

/// How many operations of one function ended each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Completed `ok`.
    pub ok: usize,
    /// Completed `fail`.
    pub fail: usize,
    /// Completed `info`, or never completed.
    pub info: usize,
}

/// One operation as shown in a counterexample.
#[derive(Debug, Clone, Serialize)]
pub struct OpView {
    /// Index of the invocation in the history.
    pub index: u64,
    /// Index of the completion, if there was one.
    pub completed: Option<u64>,
    /// The client process.
    pub process: u64,
    /// The function.
    pub f: String,
    /// `ok`, `fail` or `info`.
    pub outcome: &'static str,
    /// The invocation's argument.
    pub value: serde_json::Value,
    /// The completion's value (a read's result), null without a completion.
    pub result: serde_json::Value,
    /// The data version the completion reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i32>,
}

impl OpView {
    /// The view of one paired operation.
    pub fn of(call: &Call<'_>) -> OpView {
        let process = match call.invoke.process {
            Process::Client(p) => p,
            Process::Nemesis(_) => u64::MAX,
        };
        OpView {
            index: call.invoke.index,
            completed: call.completion.map(|c| c.index),
            process,
            f: call.invoke.f.clone(),
            outcome: match call.outcome() {
                Outcome::Ok => "ok",
                Outcome::Fail => "fail",
                Outcome::Info => "info",
            },
            value: call.invoke.value.clone(),
            result: call.result().clone(),
            version: call.version(),
        }
    }
}

impl fmt::Display for OpView {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(out, "#{} p{} {}", self.index, self.process, self.f)?;
        if !self.value.is_null() {
            write!(out, " {}", self.value)?;
        }
        write!(out, " -> {}", self.outcome)?;
        let differs = !self.result.is_null() && self.result != self.value;
        if self.outcome == "ok" && (self.f == "read" || differs) {
            write!(out, " {}", self.result)?;
        }
        if let Some(v) = self.version {
            write!(out, " (version {v})")?;
        }
        match self.completed {
            Some(c) => write!(out, " [#{}..#{c}]", self.index),
            None => write!(out, " [#{}.., never completed]", self.index),
        }
    }
}

/// Why a key is not linearizable, in a form a person can follow.
#[derive(Debug, Clone, Serialize)]
pub struct Counterexample {
    /// The smallest window of operations found that cannot be linearized.
    pub window: Vec<OpView>,
    /// Whether the window fails from any starting state (else: from the initial state).
    pub from_any_state: bool,
    /// The longest partial linearization of the window the search found, in order.
    pub linearized: Vec<OpView>,
    /// The model state after that partial linearization.
    pub state: serde_json::Value,
    /// The operation whose completion nothing could be linearized before.
    pub blocked: OpView,
}

impl fmt::Display for Counterexample {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let start = if self.from_any_state {
            "from any starting state"
        } else {
            "from the initial state"
        };
        writeln!(
            out,
            "  smallest failing window: {} operations that cannot be linearized {start}:",
            self.window.len()
        )?;
        for op in &self.window {
            writeln!(out, "    {op}")?;
        }
        writeln!(
            out,
            "  longest partial linearization ({} operations):",
            self.linearized.len()
        )?;
        for op in &self.linearized {
            writeln!(out, "    {op}")?;
        }
        writeln!(out, "  state after it: {}", self.state)?;
        writeln!(out, "  then no operation fits before this one completes:")?;
        writeln!(out, "    {}", self.blocked)
    }
}

/// The verdict on one key.
#[derive(Debug, Clone, Serialize)]
pub struct KeyResult {
    /// The key's verdict.
    pub valid: Validity,
    /// Client operations on the key.
    pub ops: usize,
    /// Why the verdict is unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why the key is invalid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counterexample: Option<Counterexample>,
}

/// The verdict on a whole history.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    /// `true`, `false`, or `"unknown"` when a search limit was hit (and no anomaly found).
    pub valid: Validity,
    /// The model checked against.
    pub model: String,
    /// Entries in the history.
    pub history_entries: usize,
    /// Outcomes per function over the whole history, nemesis included.
    pub counts: BTreeMap<String, Counts>,
    /// The verdict per key (`""`: operations without a key).
    pub keys: BTreeMap<String, KeyResult>,
    /// Milliseconds the check took.
    pub elapsed_ms: u64,
}

impl CheckResult {
    /// Keys whose verdict is `v`.
    pub fn keys_with(&self, v: Validity) -> Vec<&str> {
        self.keys
            .iter()
            .filter(|(_, r)| r.valid == v)
            .map(|(k, _)| k.as_str())
            .collect()
    }

    /// Indices of the history entries (invocations and completions) of every counterexample
    /// window, for a timeline to outline.
    pub fn marked_ops(&self) -> Vec<u64> {
        self.keys
            .values()
            .filter_map(|k| k.counterexample.as_ref())
            .flat_map(|cx| cx.window.iter())
            .flat_map(|op| std::iter::once(op.index).chain(op.completed))
            .collect()
    }

    /// The one-line verdict printed last.
    pub fn verdict_line(&self) -> String {
        let checked = format!(
            "{} keys, {} history entries, {:.1} s",
            self.keys.len(),
            self.history_entries,
            self.elapsed_ms as f64 / 1000.0
        );
        match self.valid {
            Validity::Valid => format!("verdict: valid ({}; {checked})", self.model),
            Validity::Invalid => {
                let bad = self.keys_with(Validity::Invalid);
                format!(
                    "verdict: INVALID ({}): not linearizable on {} key(s): {}; {checked}",
                    self.model,
                    bad.len(),
                    list(&bad)
                )
            }
            Validity::Unknown => {
                let open = self.keys_with(Validity::Unknown);
                format!(
                    "verdict: unknown ({}): search limit hit on {} key(s): {}; {checked}",
                    self.model,
                    open.len(),
                    list(&open)
                )
            }
        }
    }

    /// The report a person reads: counts, then each key that is not valid, then the verdict.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (f, c) in &self.counts {
            let _ = writeln!(
                out,
                "{f:>16}: {} ok, {} fail, {} info",
                c.ok, c.fail, c.info
            );
        }
        for (key, r) in &self.keys {
            match (r.valid, &r.counterexample) {
                (Validity::Invalid, Some(cx)) => {
                    let _ = writeln!(out, "key {key:?}: NOT linearizable ({} operations)", r.ops);
                    let _ = write!(out, "{cx}");
                }
                (Validity::Invalid, None) => {
                    let _ = writeln!(out, "key {key:?}: NOT linearizable ({} operations)", r.ops);
                }
                (Validity::Unknown, _) => {
                    let why = r.reason.as_deref().unwrap_or("search limit");
                    let _ = writeln!(out, "key {key:?}: unknown ({} operations): {why}", r.ops);
                }
                (Validity::Valid, _) => {}
            }
        }
        out.push_str(&self.verdict_line());
        out.push('\n');
        out
    }
}

fn list(keys: &[&str]) -> String {
    const SHOWN: usize = 10;
    let mut s = keys
        .iter()
        .take(SHOWN)
        .map(|k| format!("{k:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    if keys.len() > SHOWN {
        let _ = write!(s, " and {} more", keys.len() - SHOWN);
    }
    s
}

/// Writes `result` as pretty JSON to `path` (e.g. a run's `results.json`).
pub fn write_results(path: &Path, result: &CheckResult) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(result).context("serializing the check result")?;
    text.push('\n');
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_serializes_as_bool_or_unknown_and_combines() {
        assert_eq!(serde_json::to_string(&Validity::Valid).unwrap(), "true");
        assert_eq!(serde_json::to_string(&Validity::Invalid).unwrap(), "false");
        assert_eq!(
            serde_json::to_string(&Validity::Unknown).unwrap(),
            "\"unknown\""
        );
        assert_eq!(Validity::Unknown.and(Validity::Invalid), Validity::Invalid);
        assert_eq!(Validity::Valid.and(Validity::Unknown), Validity::Unknown);
        assert_eq!(Validity::Valid.and(Validity::Valid), Validity::Valid);
        assert_eq!(Validity::Unknown.exit_code(), 2);
    }
}
