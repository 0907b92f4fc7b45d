//! The verdict on a test run: every checker the run's workload calls for, `results.json`,
//! `timeline.html`, and the one-line verdict. `stampede test` and `stampede check` on a
//! results folder both come here, so they always agree.

use std::path::Path;

use anyhow::Context;
use serde_json::json;

use crate::checker::result::{CheckResult, Validity};
use crate::checker::zookeeper::{self, ZkReport};
use crate::checker::{check_history, timeline, CheckOptions};
use crate::history::Op;

/// The outcome of judging a run.
pub struct Verdict {
    /// The line printed last.
    pub line: String,
    /// 0 valid, 1 anomalies found, 2 unknown or aborted.
    pub exit_code: u8,
}

/// Checks `ops` (the history of the run in `dir`) for linearizability against the
/// versioned-register model and for ZooKeeper's own guarantees, writes `results.json` and
/// `timeline.html` into `dir`, and returns the verdict. `aborted` says why a run stopped early.
pub fn judge_run(dir: &Path, ops: &[Op], aborted: Option<&str>) -> anyhow::Result<Verdict> {
    let linear = check_history(ops, &CheckOptions::default()).context("checking linearizability")?;
    let zk = zookeeper::check(ops).context("checking ZooKeeper's guarantees")?;
    let valid = overall(&linear, &zk, aborted.is_some());
    let results = json!({
        "valid": valid,
        "aborted": aborted,
        "linearizable": linear,
        "zookeeper": zk,
    });
    let path = dir.join("results.json");
    std::fs::write(&path, serde_json::to_string_pretty(&results)? + "\n").with_context(|| format!("cannot write {}", path.display()))?;
    let mut marked: Vec<u64> = linear
        .keys
        .values()
        .filter_map(|k| k.counterexample.as_ref())
        .flat_map(|cx| cx.window.iter().flat_map(|op| std::iter::once(op.index).chain(op.completed)))
        .collect();
    marked.extend(zk.marked_ops());
    timeline::write(&dir.join("timeline.html"), ops, &marked, &dir.display().to_string())?;
    let mut line = format!("{}; zookeeper: {}", linear.verdict_line(), zk_summary(&zk));
    if let Some(why) = aborted {
        line = format!("verdict: unknown: the run was aborted ({why}); {line}");
    }
    Ok(Verdict { line, exit_code: valid.exit_code() })
}

fn overall(linear: &CheckResult, zk: &ZkReport, aborted: bool) -> Validity {
    let zk_valid = if zk.valid { Validity::Valid } else { Validity::Invalid };
    let checked = linear.valid.and(zk_valid);
    match (checked, aborted) {
        (Validity::Invalid, _) => Validity::Invalid,
        (_, true) => Validity::Unknown,
        (v, false) => v,
    }
}

fn zk_summary(zk: &ZkReport) -> String {
    let found: Vec<String> = zk.counts.iter().filter(|(_, n)| **n > 0).map(|(c, n)| format!("{n} {}", c.name())).collect();
    let valid = if zk.valid { "valid" } else { "INVALID" };
    if found.is_empty() {
        format!("{valid}, no anomalies in {} reads and {} writes", zk.reads, zk.writes)
    } else {
        format!("{valid} ({})", found.join(", "))
    }
}
