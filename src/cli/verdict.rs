//! The verdict on a test run: every checker the run's workload calls for, `results.json`,
//! `timeline.html`, and the one-line verdict. `stampede test` and `stampede check` on a
//! results folder both come here, so they always agree.

use std::path::Path;

use anyhow::Context;
use serde_json::json;

use crate::checker::barrier::check_barrier;
use crate::checker::election::check_election;
use crate::checker::formats::{self, Format};
use crate::checker::liveness::{self, LivenessOptions, LivenessReport};
use crate::checker::mutex_overlap::check_lock_history;
use crate::checker::queue::check_queue;
use crate::checker::result::{CheckResult, Validity};
use crate::checker::zookeeper::{self, ZkOptions, ZkReport};
use crate::checker::{check_history, timeline, CheckOptions};
use crate::db::replicas::Replicas;
use crate::history::Op;

/// The outcome of judging a run.
pub struct Verdict {
    /// The line printed last.
    pub line: String,
    /// 0 valid, 1 anomalies found, 2 unknown or aborted.
    pub exit_code: u8,
}

/// Checks `ops` (the history of the run in `dir`) for linearizability against the
/// versioned-register model and for ZooKeeper's own guarantees (`sync_reads`: whether the
/// workload synced before every read), writes `results.json` and `timeline.html` into `dir`,
/// and returns the verdict. `aborted` says why a run stopped early.
pub fn judge_run(
    dir: &Path,
    ops: &[Op],
    sync_reads: bool,
    aborted: Option<&str>,
) -> anyhow::Result<Verdict> {
    let linear =
        check_history(ops, &CheckOptions::default()).context("checking linearizability")?;
    let zk_options = ZkOptions {
        sync_reads,
        ..ZkOptions::default()
    };
    let zk = zookeeper::check_with(ops, &zk_options).context("checking ZooKeeper's guarantees")?;
    let valid = overall(&linear, &zk, aborted.is_some());
    let results = json!({
        "valid": valid,
        "aborted": aborted,
        "linearizable": linear,
        "zookeeper": zk,
    });
    let mut marked: Vec<u64> = linear
        .keys
        .values()
        .filter_map(|k| k.counterexample.as_ref())
        .flat_map(|cx| {
            cx.window
                .iter()
                .flat_map(|op| std::iter::once(op.index).chain(op.completed))
        })
        .collect();
    marked.extend(zk.marked_ops());
    write_outputs(dir, &results, ops, &marked)?;
    let line = verdict_line(valid, &linear, &zk, aborted);
    Ok(Verdict {
        line,
        exit_code: valid.exit_code(),
    })
}

/// Checks the history of a lock run (`ops`, in `dir`): no overlapping critical sections,
/// acquire/release linearizable against `fenced-mutex` (when `fenced`) or `mutex`, and the
/// lock never left free while contenders wait once the faults are healed; writes
/// `results.json` (with the run's `summary`: herd figures, latencies) and `timeline.html`
/// into `dir`, and returns the verdict. `aborted` says why a run stopped early.
pub fn judge_lock_run(
    dir: &Path,
    ops: &[Op],
    fenced: bool,
    live: LivenessOptions,
    summary: Option<serde_json::Value>,
    aborted: Option<&str>,
) -> anyhow::Result<Verdict> {
    let lock =
        check_lock_history(ops, fenced, &CheckOptions::default()).context("checking the lock")?;
    let liveness = liveness::check_lock(ops, live);
    let valid = match (lock.valid, liveness.valid, aborted.is_some()) {
        (Validity::Invalid, _, _) | (_, false, _) => Validity::Invalid,
        (_, _, true) => Validity::Unknown,
        (v, true, false) => v,
    };
    let results = json!({
        "valid": valid,
        "aborted": aborted,
        "lock": lock,
        "liveness": liveness,
        "run": summary,
    });
    let marked: Vec<u64> = lock
        .lock_model
        .keys
        .values()
        .filter_map(|k| k.counterexample.as_ref())
        .flat_map(|cx| {
            cx.window
                .iter()
                .flat_map(|op| std::iter::once(op.index).chain(op.completed))
        })
        .collect();
    write_outputs(dir, &results, ops, &marked)?;
    let me = &lock.mutual_exclusion;
    let line = format!(
        "verdict: {}; mutual exclusion: {} overlaps in {} critical sections, {} stale steps rejected; lock model ({}): {:?}; liveness: {}",
        overall_word(valid, aborted),
        me.overlaps.len(),
        me.holds,
        me.stale_steps_rejected,
        lock.lock_model.model,
        lock.lock_model.valid,
        liveness_summary(&liveness),
    );
    Ok(Verdict {
        line,
        exit_code: valid.exit_code(),
    })
}

/// Checks the history of an election run (`ops`, in `dir`): never two leaders in office at
/// once, never an empty office for long once the faults are healed, time without a leader and
/// failover times; writes `results.json` (with the run's
/// `summary`) and `timeline.html` into `dir`, and returns the verdict. `aborted` says why a
/// run stopped early.
pub fn judge_election_run(
    dir: &Path,
    ops: &[Op],
    live: LivenessOptions,
    summary: Option<serde_json::Value>,
    aborted: Option<&str>,
) -> anyhow::Result<Verdict> {
    let election = check_election(ops).context("checking the election")?;
    let liveness = liveness::check_election(ops, live);
    let valid = match (election.valid && liveness.valid, aborted.is_some()) {
        (false, _) => Validity::Invalid,
        (true, true) => Validity::Unknown,
        (true, false) => Validity::Valid,
    };
    let results = json!({
        "valid": valid,
        "aborted": aborted,
        "election": election,
        "liveness": liveness,
        "run": summary,
    });
    write_outputs(dir, &results, ops, &[])?;
    let line = format!(
        "verdict: {}; election: {} overlapping terms in {} terms by {} leaders, {} ms without a leader (longest {} ms), failover p50 {:.1} ms max {:.1} ms; liveness: {}",
        overall_word(valid, aborted),
        election.overlaps.len(),
        election.terms,
        election.terms_per_leader.len(),
        election.leaderless_ns / 1_000_000,
        election.longest_leaderless_ns / 1_000_000,
        election.failover.p50_ms,
        election.failover.max_ms,
        liveness_summary(&liveness),
    );
    Ok(Verdict {
        line,
        exit_code: valid.exit_code(),
    })
}

/// The liveness part of a verdict line.
fn liveness_summary(report: &LivenessReport) -> String {
    if !report.judged {
        return "not judged (run too short after the heal)".into();
    }
    match report.stalls.iter().map(|s| s.duration_ns).max() {
        None => format!("no stall in {} ms judged", report.judged_ms),
        Some(longest) => format!(
            "STUCK {} times (longest {} ms)",
            report.stalls.len(),
            longest / 1_000_000
        ),
    }
}

/// Checks the history of a barrier run (`ops`, in `dir`) against a barrier of `threshold`:
/// nobody passed `enter` or `leave` early, and which rounds stalled after the last fault was
/// healed; writes `results.json` (with the run's `summary`) and `timeline.html` (the early
/// passes outlined) into `dir`, and returns the verdict. `aborted` says why a run stopped
/// early.
pub fn judge_barrier_run(
    dir: &Path,
    ops: &[Op],
    threshold: u64,
    summary: Option<serde_json::Value>,
    aborted: Option<&str>,
) -> anyhow::Result<Verdict> {
    let barrier = check_barrier(ops, threshold);
    let valid = match (barrier.valid, aborted.is_some()) {
        (false, _) => Validity::Invalid,
        (true, true) => Validity::Unknown,
        (true, false) => Validity::Valid,
    };
    let results = json!({ "valid": valid, "aborted": aborted, "barrier": barrier, "run": summary });
    write_outputs(dir, &results, ops, &barrier.marked_ops())?;
    let line = format!(
        "verdict: {}; barrier: {} early enters, {} early leaves in {} rounds ({} completed, threshold {}), {} gave up, {} stalled after the last heal",
        overall_word(valid, aborted),
        barrier.early_enters.len(),
        barrier.early_leaves.len(),
        barrier.rounds,
        barrier.rounds_completed,
        barrier.threshold,
        barrier.gave_up,
        barrier.stalled,
    );
    Ok(Verdict {
        line,
        exit_code: valid.exit_code(),
    })
}

/// Checks the history of a queue run (`ops`, in `dir`): every acknowledged value dequeued
/// exactly once, nothing dequeued that was not enqueued, FIFO order; writes `results.json`
/// (with the run's `summary`) and `timeline.html` into `dir`, and returns the verdict. A
/// queue not drained leaves the verdict unknown. `aborted` says why a run stopped early.
pub fn judge_queue_run(
    dir: &Path,
    ops: &[Op],
    summary: Option<serde_json::Value>,
    aborted: Option<&str>,
) -> anyhow::Result<Verdict> {
    let queue = check_queue(ops).context("checking the queue")?;
    let valid = match (queue.valid, queue.drained && aborted.is_none()) {
        (false, _) => Validity::Invalid,
        (true, false) => Validity::Unknown,
        (true, true) => Validity::Valid,
    };
    let results = json!({ "valid": valid, "aborted": aborted, "queue": queue, "run": summary });
    write_outputs(dir, &results, ops, &[])?;
    let remaining = match queue.drained {
        true => "drained".to_string(),
        false => format!(
            "NOT drained: {} acknowledged values remaining",
            queue.remaining.len()
        ),
    };
    let line = format!(
        "verdict: {}; queue: {} enqueued ({} info), {} dequeued ({} info), {} lost, {} duplicated, {} phantom, {} reordered, {} possibly consumed, {remaining}",
        overall_word(valid, aborted),
        queue.enqueue_ok,
        queue.enqueue_info,
        queue.dequeue_ok,
        queue.dequeue_info,
        queue.lost.len(),
        queue.duplicated.len(),
        queue.phantom.len(),
        queue.reordered.len(),
        queue.possibly_consumed.len(),
    );
    Ok(Verdict {
        line,
        exit_code: valid.exit_code(),
    })
}

/// Writes `results` as `results.json` and the timeline of `ops` (with the `marked` op
/// indices highlighted) as `timeline.html` into `dir`.
fn write_outputs(
    dir: &Path,
    results: &serde_json::Value,
    ops: &[Op],
    marked: &[u64],
) -> anyhow::Result<()> {
    let path = dir.join("results.json");
    std::fs::write(&path, serde_json::to_string_pretty(results)? + "\n")
        .with_context(|| format!("cannot write {}", path.display()))?;
    timeline::write(
        &dir.join("timeline.html"),
        ops,
        marked,
        &dir.display().to_string(),
    )
}

fn overall_word(valid: Validity, aborted: Option<&str>) -> String {
    match valid {
        Validity::Valid => "valid".to_string(),
        Validity::Invalid => "INVALID".to_string(),
        Validity::Unknown => match aborted {
            Some(why) => format!("unknown (aborted: {why})"),
            None => "unknown".to_string(),
        },
    }
}

fn overall(linear: &CheckResult, zk: &ZkReport, aborted: bool) -> Validity {
    let zk_valid = if zk.valid {
        Validity::Valid
    } else {
        Validity::Invalid
    };
    let checked = linear.valid.and(zk_valid);
    match (checked, aborted) {
        (Validity::Invalid, _) => Validity::Invalid,
        (_, true) => Validity::Unknown,
        (v, false) => v,
    }
}

/// The one-line verdict: overall, then each checker's. It holds no timings, so checking the
/// same history again prints the same line.
fn verdict_line(
    valid: Validity,
    linear: &CheckResult,
    zk: &ZkReport,
    aborted: Option<&str>,
) -> String {
    let overall = overall_word(valid, aborted);
    let linear_keys = |v| linear.keys_with(v).len();
    let linear_part = match linear.valid {
        Validity::Valid => format!("valid on {} keys", linear.keys.len()),
        Validity::Invalid => format!(
            "NOT linearizable on {} of {} keys",
            linear_keys(Validity::Invalid),
            linear.keys.len()
        ),
        Validity::Unknown => format!(
            "unknown on {} of {} keys (search limit)",
            linear_keys(Validity::Unknown),
            linear.keys.len()
        ),
    };
    format!(
        "verdict: {overall}; linearizability ({}): {linear_part}; zookeeper: {}",
        linear.model,
        zk_summary(zk)
    )
}

fn zk_summary(zk: &ZkReport) -> String {
    let found: Vec<String> = zk
        .counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(c, n)| format!("{n} {}", c.name()))
        .collect();
    let valid = if zk.valid { "valid" } else { "INVALID" };
    if found.is_empty() {
        format!(
            "{valid}, no anomalies in {} reads and {} writes",
            zk.reads, zk.writes
        )
    } else {
        format!("{valid} ({})", found.join(", "))
    }
}

/// Judges the stored run in `dir` again, exactly as the run itself did (a run that was aborted
/// stays aborted), rewriting its `results.json`, `timeline.html` and plots (a run whose
/// controller was killed gets them here for the first time).
pub fn recheck_dir(dir: &Path) -> anyhow::Result<Verdict> {
    let history = dir.join("history.jsonl");
    let (ops, _) = formats::read(&history, Format::Jsonl)?;
    let previous_results = std::fs::read_to_string(dir.join("results.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
    let aborted = previous_results
        .as_ref()
        .and_then(|results| results["aborted"].as_str().map(str::to_string));
    let test_yaml = dir.join("test.yaml");
    let workload = match test_yaml.exists() {
        true => Some(crate::config::load::<super::test::TestConfig>(&test_yaml)?.workload),
        false => None,
    };
    let verdict = match workload {
        Some(w) if w.workload == crate::workload::WorkloadKind::Lock => {
            let summary =
                previous_results.and_then(|mut r| r.get_mut("run").map(serde_json::Value::take));
            let live = LivenessOptions::for_sessions(w.lock.session_timeout.0, w.lock.op_timeout.0);
            judge_lock_run(dir, &ops, w.lock.fencing, live, summary, aborted.as_deref())?
        }
        Some(w) if w.workload == crate::workload::WorkloadKind::Election => {
            let summary =
                previous_results.and_then(|mut r| r.get_mut("run").map(serde_json::Value::take));
            let e = &w.election;
            let live = LivenessOptions::for_sessions(e.session_timeout.0, e.op_timeout.0);
            judge_election_run(dir, &ops, live, summary, aborted.as_deref())?
        }
        Some(w) if w.workload == crate::workload::WorkloadKind::Barrier => {
            let summary =
                previous_results.and_then(|mut r| r.get_mut("run").map(serde_json::Value::take));
            let threshold = w.barrier.threshold_for(w.generator.concurrency) as u64;
            judge_barrier_run(dir, &ops, threshold, summary, aborted.as_deref())?
        }
        Some(w) if w.workload == crate::workload::WorkloadKind::Queue => {
            let summary =
                previous_results.and_then(|mut r| r.get_mut("run").map(serde_json::Value::take));
            judge_queue_run(dir, &ops, summary, aborted.as_deref())?
        }
        w => judge_run(
            dir,
            &ops,
            w.is_none_or(|w| w.register.sync_reads),
            aborted.as_deref(),
        )?,
    };
    crate::report::write_plots(&ops, dir)?;
    Ok(verdict)
}

/// `verdict` with the replicas' comparison added (when judged): replicas that diverged
/// make any run INVALID.
pub fn with_replicas(verdict: Verdict, replicas: &Replicas) -> Verdict {
    match replicas {
        Replicas::NotJudged(_) => verdict,
        Replicas::Converged { .. } => Verdict {
            line: format!("{}; {}", verdict.line, replicas.describe()),
            ..verdict
        },
        Replicas::Diverged { .. } => {
            let rest = verdict
                .line
                .split_once(';')
                .map_or("", |(_, rest)| rest)
                .trim_start();
            Verdict {
                line: format!("verdict: INVALID; {rest}; {}", replicas.describe()),
                exit_code: verdict.exit_code.max(1),
            }
        }
    }
}

#[cfg(test)]
mod replicas_tests {
    use super::*;

    #[test]
    fn diverged_replicas_make_a_valid_run_invalid() {
        let valid = || Verdict {
            line: "verdict: valid; queue: 3 enqueued".into(),
            exit_code: 0,
        };
        let converged = with_replicas(valid(), &Replicas::Converged { zxid: 16, nodes: 3 });
        assert_eq!(
            (converged.line.as_str(), converged.exit_code),
            (
                "verdict: valid; queue: 3 enqueued; replicas: converged (3 at zxid 0x10)",
                0
            )
        );
        let diverged = Replicas::Diverged {
            zxid: 16,
            digests: vec![("n1".into(), 1), ("n2".into(), 2)],
        };
        let v = with_replicas(valid(), &diverged);
        assert!(
            v.line
                .starts_with("verdict: INVALID; queue: 3 enqueued; replicas: DIVERGED"),
            "{}",
            v.line
        );
        assert_eq!(v.exit_code, 1);
        let unjudged = with_replicas(valid(), &Replicas::NotJudged("one server".into()));
        assert_eq!(unjudged.line, "verdict: valid; queue: 3 enqueued");
    }
}
