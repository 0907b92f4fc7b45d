//! The verdict on a test run: the run's workload judges its history, and what every run is
//! judged on is added (lost state, exposure to faults, how operations ended); then
//! `results.json`, `timeline.html`, and the one-line verdict. `stampede test` and `stampede check` on a
//! results folder both come here, so they always agree: everything the line says (the
//! exposure to faults included) is read from the stored history and `test.yaml`.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::checker::exposure::exposure;
use crate::checker::formats::{self, Format};
use crate::checker::lost::check_lost;
use crate::checker::replicas::Replicas;
use crate::checker::result::{Counts, Validity};
use crate::checker::server_logs;
use crate::history::{nothing_to_judge, Op, OpType, Process};
use crate::report::timeline;
use crate::store::{Results, RunFolder, TestConfig, SCHEMA};
use crate::workload::{self, Judged, Workload};

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
    /// Why the run did not finish, if it did not (see `unfinished_reason`; a run judged by
    /// its own controller always finished).
    pub unfinished: Option<&'a str>,
    /// The run's configuration (`None` for a folder without `test.yaml`: then whether faults
    /// were planned is read from the history's nemesis operations).
    pub config: Option<&'a TestConfig>,
    /// The replicas compared after the run (`None` when they were not compared).
    pub replicas: Option<&'a Replicas>,
}

/// Judges `ops` (the history of the run in `j.folder`) as `workload` says, with what every
/// run is judged on besides; `run` is the run's summary, when it has one. Writes
/// `results.json` and `timeline.html`, and returns the verdict.
pub fn judge(
    j: &Judging,
    workload: &dyn Workload,
    ops: &[Op],
    run: Option<serde_json::Value>,
) -> anyhow::Result<Verdict> {
    let judged = workload.judge(ops, run)?;
    finish(j, workload, ops, judged)
}

/// Folds what every run is judged on into a checker's part: facts of lost state and replicas
/// that diverged (either makes it invalid), replicas that could not all be compared, a run
/// that was aborted or did not finish, a history without client operations and the run's
/// exposure to faults (each makes it at best unknown), the outcomes per function; writes
/// `results.json` and `timeline.html` and forms the line: `verdict: <word> under <exposure>`
/// (or `unknown (<why>)` when aborted, unfinished, without operations or not exposed as
/// planned), then `; <checker's part>; [LOST STATE: …; ]operations …[; replicas: …]`, and
/// `[; server logs: …]` when a server's collected log shows a known defect (named, not judged:
/// it changes no verdict).
fn finish(
    j: &Judging,
    workload: &dyn Workload,
    ops: &[Op],
    checked: Judged,
) -> anyhow::Result<Verdict> {
    let lost = check_lost(ops);
    let planned_faults = j.config.map(|t| !t.nemesis.faults.is_empty());
    let exposure = exposure(ops, planned_faults);
    let operations = operation_counts(ops);
    let replicas = j.replicas.map_or(Validity::Valid, Replicas::validity);
    let found = match lost.valid {
        true => checked.valid.and(replicas),
        false => Validity::Invalid,
    };
    let not_valid_because = j
        .aborted
        .map(|why| format!("aborted: {why}"))
        .or_else(|| {
            j.unfinished
                .map(|why| format!("the run did not finish: {why}"))
        })
        .or_else(|| nothing_to_judge(ops).map(|why| format!("no operations to judge: {why}")))
        .or_else(|| exposure.shortfall());
    let (valid, word) = match (found, not_valid_because) {
        (Validity::Invalid, _) => (
            Validity::Invalid,
            format!("INVALID under {}", exposure.summary()),
        ),
        (_, Some(why)) => (Validity::Unknown, format!("unknown ({why})")),
        (Validity::Unknown, None) => (
            Validity::Unknown,
            format!("unknown under {}", exposure.summary()),
        ),
        (Validity::Valid, None) => (
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
    let replicas_part = match j.replicas.and_then(Replicas::describe) {
        None => String::new(),
        Some(part) => format!("; {part}"),
    };
    let seen = server_logs::sightings(&j.folder.node_logs("zookeeper.log"));
    let seen_part = match server_logs::describe(&seen) {
        None => String::new(),
        Some(part) => format!("; {part}"),
    };
    let line = format!(
        "verdict: {word}; {}; {lost_part}{}{replicas_part}{seen_part}",
        checked.line,
        operations_summary(&operations)
    );
    let mut checks = checked.checks;
    if let Some(replicas) = j.replicas {
        checks.insert("replicas".into(), serde_json::to_value(replicas)?);
    }
    if !seen.is_empty() {
        checks.insert("server_logs".into(), serde_json::to_value(&seen)?);
    }
    let results = Results {
        schema: SCHEMA,
        valid,
        verdict_line: Some(line.clone()),
        aborted: j.aborted.map(str::to_string),
        unfinished: j.unfinished.map(str::to_string),
        figures: workload.figures(&checks),
        exposure: Some(exposure),
        lost: Some(lost),
        operations,
        checks,
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

/// Why a run whose folder has no `results.json` did not finish.
const NO_RESULTS: &str =
    "no results.json: its controller stopped before the heal and the replica comparison";

/// Why the stored run whose `results.json` read back as `stored` did not finish, if it did
/// not: the one rule of what a finished run is. Its controller writes `results.json` only
/// after the heal and the replica comparison, so a folder without one holds a run stopped
/// before them (its controller killed, or still running), and one that does not read was cut
/// off while being written; a `results.json` that `stampede check` wrote into such a folder
/// keeps the reason, so that judging the run again never makes it look finished.
fn unfinished_reason(stored: &anyhow::Result<Option<Results>>) -> Option<String> {
    match stored {
        Ok(Some(results)) => results.unfinished.clone(),
        Ok(None) => Some(NO_RESULTS.to_string()),
        Err(e) => Some(format!("{e:#}")),
    }
}

/// Judges the stored run in `dir` again, exactly as the run itself did (a run that was aborted
/// stays aborted, replicas that diverged stay diverged, a run that did not finish is at best
/// unknown), rewriting its `results.json`, `timeline.html` and plots (a run whose controller
/// was killed gets them here for the first time, its `results.json` saying it did not
/// finish).
pub fn recheck_dir(dir: &Path) -> anyhow::Result<Verdict> {
    let folder = RunFolder::open(dir);
    let (ops, _) = formats::read(&folder.history_path(), Format::Jsonl)?;
    let stored = folder.read_results();
    let unfinished = unfinished_reason(&stored);
    let mut previous_results = stored.ok().flatten();
    let aborted = previous_results.as_ref().and_then(|r| r.aborted.clone());
    let mut kept = |check: &str| previous_results.as_mut()?.checks.remove(check);
    let summary = kept("run");
    let replicas: Option<Replicas> = kept("replicas").and_then(|r| serde_json::from_value(r).ok());
    let test = folder.read_config()?;
    let j = Judging {
        folder: &folder,
        aborted: aborted.as_deref(),
        unfinished: unfinished.as_deref(),
        config: test.as_ref(),
        replicas: replicas.as_ref(),
    };
    // A folder without test.yaml (a history copied by hand) is judged as the default
    // workload with its default settings.
    let file = match &test {
        Some(t) => t.workload.clone(),
        None => workload::WorkloadFile::named(workload::DEFAULT),
    };
    let workload = workload::build(&file)
        .map_err(|e| anyhow::anyhow!("{}: {e}", folder.config_path().display()))?;
    let verdict = judge(&j, workload.as_ref(), &ops, summary)?;
    workload.plots(&ops, dir)?;
    Ok(verdict)
}

#[cfg(test)]
mod replicas_tests {
    use super::*;
    use crate::history::testing::{complete, history, invoke};

    /// A valid register history: a write, then a read of it.
    pub(super) fn valid_register_history() -> Vec<Op> {
        history(&[
            invoke(1, "write", "1").with_key("0"),
            complete(1, "ok", "write", "1")
                .with_key("0")
                .with_zxid(2)
                .with_version(1),
            invoke(1, "read", "null").with_key("0"),
            complete(1, "ok", "read", "1")
                .with_key("0")
                .with_zxid(2)
                .with_version(1),
        ])
    }

    /// Judges a valid register history in a fresh folder with `replicas` compared; returns
    /// the verdict and what `results.json` says.
    fn judged(replicas: &Replicas) -> (Verdict, Results) {
        let dir = tempfile::tempdir().unwrap();
        let folder = RunFolder::open(dir.path());
        let ops = valid_register_history();
        let j = Judging {
            folder: &folder,
            aborted: None,
            unfinished: None,
            config: None,
            replicas: Some(replicas),
        };
        let file = workload::WorkloadFile::named(workload::DEFAULT);
        let workload = workload::build(&file).unwrap();
        let verdict = judge(&j, workload.as_ref(), &ops, None).unwrap();
        (verdict, folder.read_results().unwrap().unwrap())
    }

    #[test]
    fn diverged_replicas_make_a_valid_run_invalid_in_its_line_and_its_results() {
        let (valid, results) = judged(&Replicas::Converged { zxid: 16, nodes: 3 });
        assert_eq!(valid.exit_code, 0, "{}", valid.line);
        assert!(valid.line.starts_with("verdict: valid"), "{}", valid.line);
        assert!(
            valid
                .line
                .ends_with("; replicas: converged (3 at zxid 0x10)"),
            "{}",
            valid.line
        );
        assert_eq!(results.valid, Validity::Valid);
        let diverged = Replicas::Diverged {
            zxid: 16,
            digests: vec![("n1".into(), 1), ("n2".into(), 2)],
        };
        let (v, results) = judged(&diverged);
        assert!(v.line.starts_with("verdict: INVALID under "), "{}", v.line);
        assert!(
            v.line.contains("; replicas: DIVERGED at zxid 0x10"),
            "{}",
            v.line
        );
        assert_eq!(v.exit_code, 1);
        assert_eq!(results.valid, Validity::Invalid, "results.json says so too");
        assert_eq!(results.verdict_line.as_deref(), Some(v.line.as_str()));
        let kept: Replicas = serde_json::from_value(results.checks["replicas"].clone()).unwrap();
        assert_eq!(kept, diverged, "kept for `stampede check` to judge again");
        let (unjudged, _) = judged(&Replicas::NotJudged("one server".into()));
        assert!(!unjudged.line.contains("replicas:"), "{}", unjudged.line);
        assert_eq!(unjudged.exit_code, 0);
    }

    #[test]
    fn a_known_defect_in_a_servers_log_is_named_in_the_line_and_kept_in_the_results() {
        let dir = tempfile::tempdir().unwrap();
        let folder = RunFolder::open(dir.path());
        let node = folder.node_dir("n2");
        std::fs::create_dir_all(&node).unwrap();
        let npe = "WARN Exception when following the leader\n\
            java.lang.NullPointerException: Cannot read field \"hdr\" because \"pif\" is null\n\
            \tat org.apache.zookeeper.server.quorum.Learner.syncWithLeader(Learner.java:655)\n";
        std::fs::write(node.join("zookeeper.log"), npe).unwrap();
        let j = Judging {
            folder: &folder,
            aborted: None,
            unfinished: None,
            config: None,
            replicas: None,
        };
        let workload = workload::build(&workload::WorkloadFile::named(workload::DEFAULT)).unwrap();
        let v = judge(&j, workload.as_ref(), &valid_register_history(), None).unwrap();
        assert!(
            v.line.ends_with("; server logs: ZOOKEEPER-4394 on n2 (a follower's DIFF sync failed (NullPointerException in Learner.syncWithLeader) and its replica may have diverged)"),
            "{}",
            v.line
        );
        assert_eq!(v.exit_code, 0, "named, not judged: {}", v.line);
        let results = folder.read_results().unwrap().unwrap();
        assert_eq!(results.checks["server_logs"][0]["node"], "n2");
    }

    /// The comparison of a hand-made reading in `tests/fixtures/replicas/`.
    fn compared(fixture: &str) -> Replicas {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/replicas")
            .join(fixture);
        let reading = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        crate::checker::replicas::judge(reading)
    }

    #[test]
    fn trees_compared_make_the_run_valid_invalid_or_unknown_in_its_line_and_its_results() {
        let (v, results) = judged(&compared("valid-stale-znode-on-one-follower.json"));
        assert_eq!(v.exit_code, 0, "{}", v.line);
        assert!(v
            .line
            .contains("; replicas: converged (3 servers agree on 5 znodes"));
        assert_eq!(results.valid, Validity::Valid);
        let (v, results) = judged(&compared("invalid-stale-znode-on-one-follower.json"));
        assert!(v.line.starts_with("verdict: INVALID under "), "{}", v.line);
        assert!(
            v.line
                .contains("; replicas: DIVERGED (replica-divergence: n1 /stampede/r/register/0"),
            "{}",
            v.line
        );
        assert_eq!((v.exit_code, results.valid), (1, Validity::Invalid));
        let unreadable = compared("unknown-one-server-unreadable.json");
        let (v, results) = judged(&unreadable);
        assert!(v.line.starts_with("verdict: unknown under "), "{}", v.line);
        assert!(
            v.line.contains(
                "; replicas: UNKNOWN (not every server could be read within 30.0 s: n3: "
            ),
            "{}",
            v.line
        );
        assert_eq!((v.exit_code, results.valid), (2, Validity::Unknown));
        let kept: Replicas = serde_json::from_value(results.checks["replicas"].clone()).unwrap();
        assert_eq!(
            kept.describe(),
            unreadable.describe(),
            "read back by `stampede check`"
        );
    }
}

#[cfg(test)]
mod unfinished_tests {
    use super::replicas_tests::valid_register_history;
    use super::*;
    use crate::history::testing::history_ms;

    /// A run folder holding `ops` as its history and `results` as its `results.json`, judged
    /// again: the verdict and the `results.json` the check wrote.
    fn rechecked(ops: &[Op], results: &str) -> (Verdict, Results) {
        let dir = tempfile::tempdir().unwrap();
        let folder = RunFolder::open(dir.path());
        let lines: Vec<String> = ops
            .iter()
            .map(|op| serde_json::to_string(op).unwrap() + "\n")
            .collect();
        std::fs::write(folder.history_path(), lines.concat()).unwrap();
        std::fs::write(folder.results_path(), results).unwrap();
        let verdict = recheck_dir(dir.path()).unwrap();
        (verdict, folder.read_results().unwrap().unwrap())
    }

    #[test]
    fn a_run_whose_results_json_does_not_read_did_not_finish() {
        let ops = valid_register_history();
        let (valid, _) = rechecked(&ops, r#"{"valid": "unknown"}"#);
        assert_eq!(valid.exit_code, 0, "{}", valid.line);
        // Cut off while being written: the controller was killed before it finished.
        let (cut, results) = rechecked(&ops, r#"{"valid": tr"#);
        assert_eq!(cut.exit_code, 2, "{}", cut.line);
        assert!(
            cut.line
                .starts_with("verdict: unknown (the run did not finish: "),
            "{}",
            cut.line
        );
        assert!(cut.line.contains("not a results file"), "{}", cut.line);
        assert_eq!(results.valid, Validity::Unknown);
        assert!(results.unfinished.is_some(), "kept for the next check");
    }

    #[test]
    fn a_finished_run_without_client_operations_is_at_best_unknown() {
        let faults = history_ms(&[
            (0, OpType::Info, None, "start-kill", serde_json::Value::Null),
            (5, OpType::Info, None, "stop-kill", serde_json::Value::Null),
        ]);
        let (v, results) = rechecked(&faults, r#"{"valid": "unknown"}"#);
        assert_eq!(v.exit_code, 2, "{}", v.line);
        assert!(
            v.line.starts_with(
                "verdict: unknown (no operations to judge: the history holds only 2 nemesis \
                 operations); "
            ),
            "{}",
            v.line
        );
        assert_eq!(results.valid, Validity::Unknown);
        assert_eq!(results.unfinished, None, "it finished");
    }
}
