//! The verdict on a test run: every checker the run's workload calls for, `results.json`,
//! `timeline.html`, and the one-line verdict. `stampede test` and `stampede check` on a
//! results folder both come here, so they always agree: everything the line says (the
//! exposure to faults included) is read from the stored history and `test.yaml`.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::Context;
use serde_json::json;

use crate::checker::barrier::check_barrier;
use crate::checker::election::check_election;
use crate::checker::exposure::exposure;
use crate::checker::formats::{self, Format};
use crate::checker::liveness::{self, LivenessOptions, LivenessReport};
use crate::checker::lost::check_lost;
use crate::checker::models::FailedCas;
use crate::checker::mutex_overlap::check_lock_history;
use crate::checker::queue::check_queue;
use crate::checker::result::{CheckResult, Counts, Validity};
use crate::checker::zookeeper::{self, ZkOptions, ZkReport};
use crate::checker::{check_history, CheckOptions};
use crate::db::replicas::Replicas;
use crate::history::{Op, OpType, Process};
use crate::report::timeline;
use crate::store::{Figures, Results, RunFolder, TestConfig, SCHEMA};
use crate::workload::WorkloadKind;

/// The outcome of judging a run.
pub struct Verdict {
    /// The line printed last.
    pub line: String,
    /// 0 valid, 1 anomalies found, 2 unknown or aborted.
    pub exit_code: u8,
}

/// What every judgement of a run needs besides its history.
pub struct Judging<'a> {
    /// The run's folder, where `results.json` and `timeline.html` go.
    pub folder: &'a RunFolder,
    /// Why the run stopped early, if it did.
    pub aborted: Option<&'a str>,
    /// The run's configuration (`None` for a folder without `test.yaml`: then whether faults
    /// were planned is read from the history's nemesis operations).
    pub config: Option<&'a TestConfig>,
}

/// A checker's part of a verdict: its validity, what it adds to `results.json`, the ops a
/// timeline marks, and its part of the verdict line.
struct Checked {
    valid: Validity,
    results: serde_json::Map<String, serde_json::Value>,
    marked: Vec<u64>,
    line: String,
}

/// Checks `ops` (the history of the run in `j.dir`) for linearizability against the
/// versioned-register model and for ZooKeeper's own guarantees (`sync_reads`: whether the
/// workload synced before every read), writes `results.json` and `timeline.html`, and returns
/// the verdict. A cas the server answered `bad-version` counts as an observation of another
/// version (ZooKeeper compares atomically), and a `no-node` answer as one of an absent znode.
pub fn judge_run(j: &Judging, ops: &[Op], sync_reads: bool) -> anyhow::Result<Verdict> {
    let options = CheckOptions {
        failed_cas: FailedCas::Mismatch,
        ..CheckOptions::default()
    };
    let linear = check_history(ops, &options).context("checking linearizability")?;
    let zk_options = ZkOptions {
        sync_reads,
        ..ZkOptions::default()
    };
    let zk = zookeeper::check_with(ops, &zk_options).context("checking ZooKeeper's guarantees")?;
    let zk_valid = if zk.valid {
        Validity::Valid
    } else {
        Validity::Invalid
    };
    let mut marked = counterexample_ops(&linear);
    marked.extend(zk.marked_ops());
    let line = format!(
        "linearizability ({}): {}; zookeeper: {}",
        linear.model,
        linear_summary(&linear),
        zk_summary(&zk)
    );
    let results = json!({ "linearizable": linear, "zookeeper": zk });
    finish(
        j,
        ops,
        Checked {
            valid: linear.valid.and(zk_valid),
            results: into_map(results),
            marked,
            line,
        },
    )
}

/// Checks the history of a lock run (`ops`): no overlapping critical sections, acquire/release
/// linearizable against `fenced-mutex` (when `fenced`) or `mutex`, and the lock never left
/// free while contenders wait once the faults are healed; writes `results.json` (with the
/// run's `summary`: herd figures, latencies) and `timeline.html`, and returns the verdict.
pub fn judge_lock_run(
    j: &Judging,
    ops: &[Op],
    fenced: bool,
    live: LivenessOptions,
    summary: Option<serde_json::Value>,
) -> anyhow::Result<Verdict> {
    let lock =
        check_lock_history(ops, fenced, &CheckOptions::default()).context("checking the lock")?;
    let liveness = liveness::check_lock(ops, live);
    let me = &lock.mutual_exclusion;
    let line = format!(
        "mutual exclusion: {} overlaps in {} critical sections, {} stale steps rejected; lock model ({}): {:?}; liveness: {}",
        me.overlaps.len(),
        me.holds,
        me.stale_steps_rejected,
        lock.lock_model.model,
        lock.lock_model.valid,
        liveness_summary(&liveness),
    );
    let checked = Checked {
        valid: lock.valid.and(bool_validity(liveness.valid)),
        marked: counterexample_ops(&lock.lock_model),
        results: into_map(json!({ "lock": lock, "liveness": liveness, "run": summary })),
        line,
    };
    finish(j, ops, checked)
}

/// Checks the history of an election run (`ops`): never two leaders in office at once, never
/// an empty office for long once the faults are healed, time without a leader and failover
/// times; writes `results.json` (with the run's `summary`) and `timeline.html`, and returns
/// the verdict.
pub fn judge_election_run(
    j: &Judging,
    ops: &[Op],
    live: LivenessOptions,
    summary: Option<serde_json::Value>,
) -> anyhow::Result<Verdict> {
    let election = check_election(ops).context("checking the election")?;
    let liveness = liveness::check_election(ops, live);
    let line = format!(
        "election: {} overlapping terms in {} terms by {} leaders, {} ms without a leader (longest {} ms), failover p50 {:.1} ms max {:.1} ms; liveness: {}",
        election.overlaps.len(),
        election.terms,
        election.terms_per_leader.len(),
        election.leaderless_ns / 1_000_000,
        election.longest_leaderless_ns / 1_000_000,
        election.failover.p50_ms,
        election.failover.max_ms,
        liveness_summary(&liveness),
    );
    let checked = Checked {
        valid: bool_validity(election.valid && liveness.valid),
        marked: Vec::new(),
        results: into_map(json!({ "election": election, "liveness": liveness, "run": summary })),
        line,
    };
    finish(j, ops, checked)
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

/// Checks the history of a barrier run (`ops`) against a barrier of `threshold`: nobody
/// passed `enter` or `leave` early, and which rounds stalled after the last fault was healed;
/// writes `results.json` (with the run's `summary`) and `timeline.html` (the early passes
/// outlined), and returns the verdict.
pub fn judge_barrier_run(
    j: &Judging,
    ops: &[Op],
    threshold: u64,
    summary: Option<serde_json::Value>,
) -> anyhow::Result<Verdict> {
    let barrier = check_barrier(ops, threshold);
    let line = format!(
        "barrier: {} early enters, {} early leaves in {} rounds ({} completed, threshold {}), {} gave up, {} stalled after the last heal",
        barrier.early_enters.len(),
        barrier.early_leaves.len(),
        barrier.rounds,
        barrier.rounds_completed,
        barrier.threshold,
        barrier.gave_up,
        barrier.stalled,
    );
    let checked = Checked {
        valid: bool_validity(barrier.valid),
        marked: barrier.marked_ops(),
        results: into_map(json!({ "barrier": barrier, "run": summary })),
        line,
    };
    finish(j, ops, checked)
}

/// Checks the history of a queue run (`ops`): every acknowledged value dequeued exactly once,
/// nothing dequeued that was not enqueued, FIFO order; writes `results.json` (with the run's
/// `summary`) and `timeline.html`, and returns the verdict. A queue not drained leaves the
/// verdict unknown.
pub fn judge_queue_run(
    j: &Judging,
    ops: &[Op],
    summary: Option<serde_json::Value>,
) -> anyhow::Result<Verdict> {
    let queue = check_queue(ops).context("checking the queue")?;
    let remaining = match queue.drained {
        true => "drained".to_string(),
        false => format!(
            "NOT drained: {} acknowledged values remaining",
            queue.remaining.len()
        ),
    };
    let line = format!(
        "queue: {} enqueued ({} info), {} dequeued ({} info), {} lost, {} duplicated, {} phantom, {} reordered, {} possibly consumed, {remaining}",
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
    let valid = match (queue.valid, queue.drained) {
        (false, _) => Validity::Invalid,
        (true, false) => Validity::Unknown,
        (true, true) => Validity::Valid,
    };
    let checked = Checked {
        valid,
        marked: Vec::new(),
        results: into_map(json!({ "queue": queue, "run": summary })),
        line,
    };
    finish(j, ops, checked)
}

/// Folds what every run is judged on into a checker's part: facts of lost state (any makes
/// it invalid), the run's exposure to faults (a shortfall makes it at best unknown), the
/// outcomes per function; writes `results.json` and `timeline.html` and forms the line:
/// `verdict: <word> under <exposure>` (or `unknown (<why>)` when aborted or not exposed as
/// planned), then `; <checker's part>; [LOST STATE: …; ]operations …`.
fn finish(j: &Judging, ops: &[Op], checked: Checked) -> anyhow::Result<Verdict> {
    let lost = check_lost(ops);
    let planned_faults = j.config.map(|t| !t.nemesis.faults.is_empty());
    let exposure = exposure(ops, planned_faults);
    let operations = operation_counts(ops);
    let found = if lost.valid {
        checked.valid
    } else {
        Validity::Invalid
    };
    let (valid, word) = match (found, j.aborted, exposure.shortfall()) {
        (Validity::Invalid, ..) => (
            Validity::Invalid,
            format!("INVALID under {}", exposure.summary()),
        ),
        (_, Some(why), _) => (Validity::Unknown, format!("unknown (aborted: {why})")),
        (_, None, Some(shortfall)) => (Validity::Unknown, format!("unknown ({shortfall})")),
        (Validity::Unknown, None, None) => (
            Validity::Unknown,
            format!("unknown under {}", exposure.summary()),
        ),
        (Validity::Valid, None, None) => (
            Validity::Valid,
            format!("valid under {}", exposure.summary()),
        ),
    };
    let mut marked = checked.marked;
    marked.extend(lost.marked_ops());
    let lost_part = match lost.facts.first() {
        None => String::new(),
        Some(first) => format!(
            "LOST STATE: {} answers prove acknowledged znodes gone (first, op {} {}: {}); ",
            lost.count, first.index, first.f, first.fact
        ),
    };
    let line = format!(
        "verdict: {word}; {}; {lost_part}{}",
        checked.line,
        operations_summary(&operations)
    );
    let results = Results {
        schema: SCHEMA,
        valid,
        verdict_line: Some(line.clone()),
        aborted: j.aborted.map(str::to_string),
        figures: Figures::derive(&checked.results, j.config),
        exposure: Some(exposure),
        lost: Some(lost),
        operations,
        checks: checked.results,
    };
    j.folder.write_results(&results)?;
    timeline::write(
        &j.folder.timeline_path(),
        ops,
        &marked,
        &j.folder.dir().display().to_string(),
    )?;
    Ok(Verdict {
        line,
        exit_code: valid.exit_code(),
    })
}

/// How the client operations of a history ended, per function: completions by kind, and an
/// invocation never completed as `info`.
fn operation_counts(ops: &[Op]) -> BTreeMap<String, Counts> {
    let mut counts: BTreeMap<String, Counts> = BTreeMap::new();
    let mut open: HashMap<u64, &str> = HashMap::new();
    for op in ops {
        let Process::Client(process) = op.process else {
            continue;
        };
        if op.kind == OpType::Invoke {
            open.insert(process, &op.f);
            continue;
        }
        open.remove(&process);
        let c = counts.entry(op.f.clone()).or_default();
        match op.kind {
            OpType::Ok => c.ok += 1,
            OpType::Fail => c.fail += 1,
            _ => c.info += 1,
        }
    }
    for f in open.into_values() {
        counts.entry(f.to_string()).or_default().info += 1;
    }
    counts
}

/// The operations part of a verdict line, e.g. `operations ok/fail/info: read 20/0/1, write
/// 5/0/0`, warning when most of them failed definitively (the run exercised little).
fn operations_summary(counts: &BTreeMap<String, Counts>) -> String {
    let each: Vec<String> = counts
        .iter()
        .map(|(f, c)| format!("{f} {}/{}/{}", c.ok, c.fail, c.info))
        .collect();
    let total: usize = counts.values().map(|c| c.ok + c.fail + c.info).sum();
    let failed: usize = counts.values().map(|c| c.fail).sum();
    let mut line = match each.is_empty() {
        true => "operations: none".to_string(),
        false => format!("operations ok/fail/info: {}", each.join(", ")),
    };
    if 2 * failed > total {
        line.push_str(&format!(
            "; MOSTLY FAILED: {failed} of {total} operations failed definitively"
        ));
    }
    line
}

/// The ops of a linearizability result's counterexamples, for a timeline to mark.
fn counterexample_ops(result: &CheckResult) -> Vec<u64> {
    result
        .keys
        .values()
        .filter_map(|k| k.counterexample.as_ref())
        .flat_map(|cx| {
            cx.window
                .iter()
                .flat_map(|op| std::iter::once(op.index).chain(op.completed))
        })
        .collect()
}

fn bool_validity(valid: bool) -> Validity {
    match valid {
        true => Validity::Valid,
        false => Validity::Invalid,
    }
}

fn into_map(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

/// The linearizability part of a register run's verdict line.
fn linear_summary(linear: &CheckResult) -> String {
    let linear_keys = |v| linear.keys_with(v).len();
    match linear.valid {
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
    }
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
    let folder = RunFolder::open(dir);
    let (ops, _) = formats::read(&folder.history_path(), Format::Jsonl)?;
    let previous_results = folder.read_results().ok().flatten();
    let aborted = previous_results.as_ref().and_then(|r| r.aborted.clone());
    let test = folder.read_config()?;
    let j = Judging {
        folder: &folder,
        aborted: aborted.as_deref(),
        config: test.as_ref(),
    };
    let summary = || previous_results.and_then(|mut r| r.checks.remove("run"));
    let verdict = match test.as_ref().map(|t| &t.workload) {
        Some(w) if w.workload == WorkloadKind::Lock => {
            let live = LivenessOptions::for_sessions(w.lock.session_timeout.0, w.lock.op_timeout.0);
            judge_lock_run(&j, &ops, w.lock.fencing, live, summary())?
        }
        Some(w) if w.workload == WorkloadKind::Election => {
            let e = &w.election;
            let live = LivenessOptions::for_sessions(e.session_timeout.0, e.op_timeout.0);
            judge_election_run(&j, &ops, live, summary())?
        }
        Some(w) if w.workload == WorkloadKind::Barrier => {
            let threshold = w.barrier.threshold_for(w.generator.concurrency) as u64;
            judge_barrier_run(&j, &ops, threshold, summary())?
        }
        Some(w) if w.workload == WorkloadKind::Queue => judge_queue_run(&j, &ops, summary())?,
        w => judge_run(&j, &ops, w.is_none_or(|w| w.register.sync_reads))?,
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
            // The outcome word changes; what the run was exposed to stays.
            let line = ["verdict: valid", "verdict: unknown"]
                .iter()
                .find_map(|p| verdict.line.strip_prefix(p))
                .map_or(verdict.line.clone(), |rest| {
                    format!("verdict: INVALID{rest}")
                });
            Verdict {
                line: format!("{line}; {}", replicas.describe()),
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
        let exposed = Verdict {
            line: "verdict: unknown under 2 kills (n1, n2); queue: 3 enqueued".into(),
            exit_code: 2,
        };
        let v = with_replicas(exposed, &diverged);
        assert!(
            v.line.starts_with(
                "verdict: INVALID under 2 kills (n1, n2); queue: 3 enqueued; replicas: DIVERGED"
            ),
            "{}",
            v.line
        );
        let unjudged = with_replicas(valid(), &Replicas::NotJudged("one server".into()));
        assert_eq!(unjudged.line, "verdict: valid; queue: 3 enqueued");
    }
}
