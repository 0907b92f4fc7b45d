//! Latency figures of a run for the trend page: per operation function, the outcome counts
//! and the median and 99th percentile latency of its `ok` operations, computed from
//! `history.jsonl` and cached by the file's modification time.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde_json::Value;

/// One function's figures in one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FnStats {
    /// Completed `ok`.
    pub ok: usize,
    /// Completed `fail`.
    pub fail: usize,
    /// Completed `info` (indeterminate).
    pub info: usize,
    /// Median latency of `ok` operations, in milliseconds.
    pub p50_ms: Option<f64>,
    /// 99th percentile latency of `ok` operations, in milliseconds.
    pub p99_ms: Option<f64>,
}

/// A run's figures by function name (client operations only, not the nemesis).
pub type RunStats = BTreeMap<String, FnStats>;

/// Computes the figures of a history (JSON lines); lines that do not parse are skipped.
pub fn compute(history: &str) -> RunStats {
    let mut pending: HashMap<String, (String, u64)> = HashMap::new();
    let mut latencies: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut stats = RunStats::new();
    for line in history.lines() {
        let Ok(op) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let (Some(kind), Some(f), Some(time)) =
            (op["type"].as_str(), op["f"].as_str(), op["time"].as_u64())
        else {
            continue;
        };
        if op["process"] == "nemesis" {
            continue;
        }
        let process = op["process"].to_string();
        if kind == "invoke" {
            pending.insert(process, (f.to_string(), time));
            continue;
        }
        let Some((f, start)) = pending.remove(&process) else {
            continue;
        };
        let entry = stats.entry(f.clone()).or_default();
        match kind {
            "ok" => {
                entry.ok += 1;
                latencies
                    .entry(f)
                    .or_default()
                    .push(time.saturating_sub(start));
            }
            "fail" => entry.fail += 1,
            _ => entry.info += 1,
        }
    }
    for (f, mut values) in latencies {
        values.sort_unstable();
        let entry = stats.entry(f).or_default();
        entry.p50_ms = quantile(&values, 0.5);
        entry.p99_ms = quantile(&values, 0.99);
    }
    stats
}

/// The `q` quantile of sorted nanosecond values, in milliseconds (nearest rank).
fn quantile(sorted: &[u64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1] as f64 / 1e6)
}

/// Figures per run folder, recomputed when its history changes.
#[derive(Default)]
pub struct Cache {
    entries: Mutex<HashMap<PathBuf, (SystemTime, RunStats)>>,
}

impl Cache {
    /// The figures of the run in `dir`; empty when it has no readable history.
    pub fn stats(&self, dir: &Path) -> RunStats {
        let path = dir.join("history.jsonl");
        let Ok(modified) = std::fs::metadata(&path).and_then(|m| m.modified()) else {
            return RunStats::new();
        };
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, stats)) = entries.get(&path) {
            if *at == modified {
                return stats.clone();
            }
        }
        let stats = std::fs::read_to_string(&path)
            .map(|t| compute(&t))
            .unwrap_or_default();
        entries.insert(path, (modified, stats.clone()));
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(index: u64, time_ms: u64, kind: &str, process: &str, f: &str) -> String {
        format!(
            r#"{{"index":{index},"time":{},"type":"{kind}","process":{process},"f":"{f}","value":null}}"#,
            time_ms * 1_000_000
        )
    }

    #[test]
    fn latencies_pair_invocations_with_completions_per_process() {
        let mut lines = Vec::new();
        // Process 0 writes 100 times, taking 1..=100 ms; process 1 reads once (2 ms) and fails a cas.
        let mut t = 0;
        for i in 1..=100 {
            lines.push(op(0, t, "invoke", "0", "write"));
            lines.push(op(0, t + i, "ok", "0", "write"));
            t += 200;
        }
        lines.push(op(0, 10, "invoke", "1", "read"));
        lines.push(op(0, 11, "invoke", "\"nemesis\"", "start-partition"));
        lines.push(op(0, 12, "ok", "1", "read"));
        lines.push(op(0, 13, "info", "\"nemesis\"", "start-partition"));
        lines.push(op(0, 20, "invoke", "1", "cas"));
        lines.push(op(0, 25, "fail", "1", "cas"));
        lines.push(op(0, 30, "invoke", "2", "write"));
        lines.push(op(0, 90, "info", "2", "write"));
        lines.push("not json".into());
        let stats = compute(&lines.join("\n"));
        let write = &stats["write"];
        assert_eq!((write.ok, write.fail, write.info), (100, 0, 1));
        assert_eq!(write.p50_ms, Some(50.0));
        assert_eq!(write.p99_ms, Some(99.0));
        assert_eq!(stats["read"].p50_ms, Some(2.0));
        assert_eq!((stats["cas"].fail, stats["cas"].p50_ms), (1, None));
        assert!(
            !stats.contains_key("start-partition"),
            "nemesis operations are not client latencies"
        );
    }
}
