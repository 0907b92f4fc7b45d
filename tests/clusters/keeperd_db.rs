//! Integration test of keeperd as a database under test: on a 3-node local cluster,
//! `--db keeperd` runs a 3-server ensemble. The register workload under partitions, kills
//! and pauses of the leader is judged valid with the replicas converged; the lock workload
//! under kill -9 and SIGSTOP is valid. Then, for each classic replication bug keeperd can be
//! built with (cargo feature `failpoints`), a run with the faults that expose it is judged
//! INVALID with the anomaly the bug causes; so is a keeperd whose members forget their data
//! at every start (`forget-on-start`), killed all at once; and a follower that serves one
//! stale znode (`stale-znode`) is named with that znode in a `replica-divergence`, and one
//! that keeps an ephemeral after its session ended (`keep-ephemeral`) is caught by the
//! ephemeral workload's polls of it, an `ephemeral-outlived-session`.
//!
//! Scenarios of the pooled target (tests/clusters/main.rs): each runs on a 3-node local cluster
//! of a lane's, made at the start and always removed at the end. Needs root on Linux and the
//! keeperd binary built beside the test (`cargo test --workspace` builds it); the failpoint
//! build is made with cargo as the lanes begin (the group's `prepare`: `--bin
//! keeperd-failpoints --features failpoints`).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{failpoints_binary, keeperd_binary, last_line, text, TestCluster};

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/keeperd")
        .join(name)
        .display()
        .to_string()
}

/// `stampede test` against keeperd on the cluster with `extra` arguments.
fn run(cluster: &TestCluster, binary: &str, extra: &[&str]) -> Output {
    let mut args = vec!["test", "--db", "keeperd", "--keeperd-binary", binary];
    args.extend_from_slice(extra);
    cluster.stampede(&args)
}

fn history(cluster: &TestCluster, out: &Output) -> (PathBuf, Vec<serde_json::Value>) {
    let dir = cluster.results_dir(out);
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let ops = history
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (dir, ops)
}

fn assert_valid(out: &Output) {
    assert_eq!(out.status.code(), Some(0), "a valid verdict: {}", text(out));
    assert!(
        last_line(out).starts_with("verdict: valid"),
        "{}",
        text(out)
    );
}

fn register_on_an_ensemble_under_leader_faults_is_valid(cluster: &TestCluster) {
    let faults = fixture("ensemble-faults.yaml");
    let out = run(
        cluster,
        &keeperd_binary(),
        &[
            "--workload",
            "register",
            "--nemesis",
            &faults,
            "--time-limit",
            "27s",
            "--set",
            "generator.nemesis_interval=3s",
            "--set",
            "generator.nemesis_duration=5s",
        ],
    );
    assert_valid(&out);
    assert!(
        last_line(&out).contains("replicas: converged (3 servers agree on ")
            && last_line(&out).contains("keeperd digests too"),
        "{}",
        text(&out)
    );
    let (dir, ops) = history(cluster, &out);
    for fault in ["start-partition", "start-kill", "start-pause"] {
        let hit = ops
            .iter()
            .any(|op| op["f"] == fault && op["type"] == "info");
        assert!(hit, "{fault} took effect");
    }
    // Every node ran a member, and leadership moved with the faults.
    let mut leaderships = 0;
    for n in ["n1", "n2", "n3"] {
        let log = std::fs::read_to_string(dir.join(format!("nodes/{n}/keeperd.log")))
            .unwrap_or_else(|e| panic!("{n}'s keeperd log was not collected: {e}"));
        assert!(log.contains("server "), "{n} ran a member: {log}");
        leaderships += log.matches("established, serving clients").count();
    }
    assert!(leaderships >= 2, "the leader changed under the faults");
    let writes = ops
        .iter()
        .filter(|op| op["f"] == "write" && op["type"] == "ok")
        .count();
    assert!(writes > 50, "writes went through: {writes}");
}

fn lock_on_an_ensemble_under_kill_and_pause_is_valid(cluster: &TestCluster) {
    let out = run(
        cluster,
        &keeperd_binary(),
        &[
            "--workload",
            "lock-sequential",
            "--nemesis",
            "kill-pause",
            "--time-limit",
            "18s",
            "--set",
            "generator.nemesis_interval=3s",
            "--set",
            "generator.nemesis_duration=4s",
        ],
    );
    assert_valid(&out);
    let (_, ops) = history(cluster, &out);
    assert!(
        ops.iter()
            .any(|op| op["f"] == "start-kill" && op["type"] == "info"),
        "a server was killed"
    );
    let held = ops
        .iter()
        .filter(|op| op["f"] == "hold" && op["type"] == "ok")
        .count();
    assert!(held > 10, "contenders held the lock: {held}");
}

/// A register run of keeperd with `failpoint` on must be judged INVALID, naming `anomaly`.
fn caught(cluster: &TestCluster, failpoint: &str, extra: &[&str], anomaly: &str) {
    caught_in(cluster, failpoint, "register", extra, anomaly);
}

/// A run of `workload` on keeperd with `failpoint` on must be judged INVALID, naming
/// `anomaly` (in the verdict printed last); the run's output.
fn caught_in(
    cluster: &TestCluster,
    failpoint: &str,
    workload: &str,
    extra: &[&str],
    anomaly: &str,
) -> Output {
    let mut args = vec!["--keeperd-failpoints", failpoint, "--workload", workload];
    args.extend_from_slice(extra);
    let out = run(cluster, failpoints_binary(), &args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{failpoint}: anomalies found: {}",
        text(&out)
    );
    let verdict = last_line(&out);
    assert!(
        verdict.starts_with("verdict: INVALID") && verdict.contains(anomaly),
        "{failpoint}: expected {anomaly:?} in {verdict}"
    );
    let (dir, _) = history(cluster, &out);
    let log = std::fs::read_to_string(dir.join("nodes/n1/keeperd.log")).unwrap();
    assert!(
        log.contains(&format!("failpoints on: {failpoint}")),
        "{log}"
    );
    out
}

/// Partitions of the leader, the first 3 s in, for 6 s.
const PARTITION_LEADER: &[&str] = &[
    "--time-limit",
    "12s",
    "--set",
    "generator.nemesis_interval=3s",
    "--set",
    "generator.nemesis_duration=6s",
];

fn commit_before_a_quorum_loses_acknowledged_writes(cluster: &TestCluster) {
    let faults = fixture("partition-leader.yaml");
    let mut args = vec!["--nemesis", faults.as_str()];
    args.extend_from_slice(PARTITION_LEADER);
    caught(cluster, "commit-before-quorum", &args, "lost-write");
}

/// The same bug caught with workloads run together: a keeperd committing before a quorum,
/// the set and the register run at once under partitions of the leader. The register is
/// judged INVALID with a lost write as when it runs alone, the set is judged too, in a folder
/// of its own with the servers' logs, and the exit code says anomalies were found.
fn commit_before_a_quorum_is_caught_in_workloads_run_together(cluster: &TestCluster) {
    let faults = fixture("partition-leader.yaml");
    let mut args = vec!["--nemesis", faults.as_str()];
    args.extend_from_slice(PARTITION_LEADER);
    // The register prints its verdict last; the first folder, the set's, has the logs.
    let out = caught_in(
        cluster,
        "commit-before-quorum",
        "set,register",
        &args,
        "lost-write",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let folders: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("results: "))
        .collect();
    let verdicts = stdout.lines().filter(|l| l.starts_with("verdict: "));
    assert_eq!((folders.len(), verdicts.count()), (2, 2), "{stdout}");
    assert!(
        folders[0].contains("set-") && folders[1].contains("register-"),
        "{stdout}"
    );
}

fn a_leader_writing_without_its_quorum_loses_acknowledged_writes(cluster: &TestCluster) {
    let faults = fixture("partition-leader.yaml");
    let mut args = vec!["--nemesis", faults.as_str()];
    args.extend_from_slice(PARTITION_LEADER);
    caught(cluster, "stale-leader-writes", &args, "lost-write");
}

fn skipping_trunc_leaves_a_replica_diverged(cluster: &TestCluster) {
    // Clients of the cut-off leader give up fast and reconnect to it, so it logs
    // transactions (sessions, writes) that never commit; the learner keeps them.
    let faults = fixture("partition-leader.yaml");
    let mut args = vec![
        "--nemesis",
        faults.as_str(),
        "--set",
        "generator.concurrency=9",
        "--set",
        "session.op_timeout=1500ms",
    ];
    args.extend_from_slice(PARTITION_LEADER);
    caught(cluster, "skip-trunc", &args, "replicas: DIVERGED");
}

fn acknowledging_before_durable_loses_acknowledged_writes(cluster: &TestCluster) {
    // The leader is killed 8 s in; the followers wrote lazily, last about 5 s in.
    let faults = fixture("kill-leader.yaml");
    let args = [
        "--nemesis",
        faults.as_str(),
        "--time-limit",
        "14s",
        "--set",
        "generator.nemesis_interval=8s",
        "--set",
        "generator.nemesis_duration=4s",
    ];
    caught(cluster, "ack-before-durable", &args, "lost-write");
}

fn members_that_forget_on_restart_lose_acknowledged_writes(cluster: &TestCluster) {
    // Every member is killed at once 5 s in and comes back with an empty data directory.
    let faults = fixture("kill-all.yaml");
    let args = [
        "--nemesis",
        faults.as_str(),
        "--time-limit",
        "16s",
        "--set",
        "generator.nemesis_interval=5s",
        "--set",
        "generator.nemesis_duration=3s",
    ];
    caught(cluster, "forget-on-start", &args, "lost-write");
}

/// The latest run's `results.json`, and the znode failpoint `name` acted on in it, as n1's
/// keeperd logged it (`failpoint <name>: <path> …`).
fn latest_on_n1(cluster: &TestCluster, name: &str) -> (serde_json::Value, String) {
    let out_dir = std::fs::canonicalize(cluster.work.join("results/latest")).unwrap();
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("results.json")).unwrap()).unwrap();
    let log = std::fs::read_to_string(out_dir.join("nodes/n1/keeperd.log")).unwrap();
    let znode = log
        .lines()
        .find_map(|l| l.split(&format!("failpoint {name}: ")).nth(1))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("{name} acted on no znode on n1: {log}"));
    (results, znode.to_string())
}

fn a_follower_serving_a_stale_znode_is_caught(cluster: &TestCluster) {
    // No fault: server 1 follows the leader (3, elected on equal zxids) all along, and
    // freezes the first register key it sees set.
    let args = ["--nemesis", "none", "--time-limit", "8"];
    caught(
        cluster,
        "stale-znode",
        &args,
        "replicas: DIVERGED (replica-divergence: n1 /stampede/",
    );
    let (results, frozen) = latest_on_n1(cluster, "stale-znode");
    let compared = &results["replicas"]["compared"];
    assert_eq!(compared["outcome"], "diverged", "{compared}");
    let named = compared["divergences"].as_array().unwrap().iter().any(|d| {
        d["server"] == "n1"
            && d["path"] == frozen
            && d["fields"].as_array().unwrap().contains(&"version".into())
            && d["reads"] == serde_json::json!(["unsynced", "synced"])
    });
    assert!(named, "n1's frozen {frozen} is named: {compared}");
}
fn a_dropped_watch_event_is_caught_as_missed(cluster: &TestCluster) {
    // No fault: each server, once, leaves one of its watchers without the first
    // NodeDataChanged it sends.
    let args = [
        "--keeperd-failpoints",
        "drop-watch-event",
        "--workload",
        "watch",
        "--nemesis",
        "none",
        "--time-limit",
        "8",
        "--set",
        "generator.quiet_period=3s",
    ];
    let out = run(cluster, failpoints_binary(), &args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a dropped event is found: {}",
        text(&out)
    );
    let verdict = last_line(&out);
    assert!(
        verdict.starts_with("verdict: INVALID") && verdict.contains(" missed"),
        "{verdict}"
    );
    let dir = cluster.results_dir(&out);
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    let by_class = results["watch"]["by_class"].as_object().unwrap();
    let missed: u64 = by_class.values().filter_map(|k| k["missed"].as_u64()).sum();
    // One event dropped per server at most, each missed by the watches its connection had on
    // the znode (a persistent watcher's key and root watches share one event): 1 to 6
    // missed, and nothing called a phantom or a duplicate.
    assert!((1..=6).contains(&missed), "{by_class:?}");
    for kinds in by_class.values() {
        assert!(
            kinds.get("phantom").is_none() && kinds.get("duplicate").is_none(),
            "{by_class:?}"
        );
    }
    let dropped = ["n1", "n2", "n3"].iter().any(|n| {
        std::fs::read_to_string(dir.join(format!("nodes/{n}/keeperd.log")))
            .is_ok_and(|log| log.contains("failpoint drop-watch-event: "))
    });
    assert!(dropped, "a server dropped an event");
}

fn a_follower_keeping_an_ephemeral_after_its_session_is_caught(cluster: &TestCluster) {
    // No fault: server 1 follows all along and keeps one ephemeral of the first session it
    // sees end; its polls show it long after the session's deadline.
    let args = [
        "--nemesis",
        "none",
        "--time-limit",
        "6",
        "--set",
        "session.session_timeout=4s",
        "--set",
        "ephemeral.hold=1s",
        "--set",
        "ephemeral.slack=2s",
    ];
    caught_in(
        cluster,
        "keep-ephemeral",
        "ephemeral",
        &args,
        "ephemeral-outlived-session",
    );
    let (results, kept) = latest_on_n1(cluster, "keep-ephemeral");
    let report = &results["ephemeral"];
    let outlived = report["anomalies"]["ephemeral-outlived-session"]
        .as_array()
        .unwrap_or_else(|| panic!("{report}"));
    let named = outlived.iter().any(|a| {
        let what = a["what"].as_str().unwrap();
        what.contains(&format!("ephemeral {kept} shown by n1 "))
    });
    assert!(named, "n1's kept {kept} is named: {report}");
    let elsewhere = outlived
        .iter()
        .any(|a| !a["what"].as_str().unwrap().contains(" shown by n1 "));
    assert!(!elsewhere, "only n1 keeps it: {report}");
    assert_eq!(report["settled"], true, "{report}");
}

/// This file's scenarios, the longest first, for the pool of lanes (tests/clusters/main.rs).
pub fn group() -> common::Group {
    const SCENARIOS: &[common::Scenario] = &[
        (
            "a_leader_writing_without_its_quorum_loses_acknowledged_writes",
            a_leader_writing_without_its_quorum_loses_acknowledged_writes,
        ),
        (
            "lock_on_an_ensemble_under_kill_and_pause_is_valid",
            lock_on_an_ensemble_under_kill_and_pause_is_valid,
        ),
        (
            "commit_before_a_quorum_loses_acknowledged_writes",
            commit_before_a_quorum_loses_acknowledged_writes,
        ),
        (
            "commit_before_a_quorum_is_caught_in_workloads_run_together",
            commit_before_a_quorum_is_caught_in_workloads_run_together,
        ),
        (
            "register_on_an_ensemble_under_leader_faults_is_valid",
            register_on_an_ensemble_under_leader_faults_is_valid,
        ),
        (
            "members_that_forget_on_restart_lose_acknowledged_writes",
            members_that_forget_on_restart_lose_acknowledged_writes,
        ),
        (
            "acknowledging_before_durable_loses_acknowledged_writes",
            acknowledging_before_durable_loses_acknowledged_writes,
        ),
        (
            "skipping_trunc_leaves_a_replica_diverged",
            skipping_trunc_leaves_a_replica_diverged,
        ),
        (
            "a_follower_serving_a_stale_znode_is_caught",
            a_follower_serving_a_stale_znode_is_caught,
        ),
        (
            "a_dropped_watch_event_is_caught_as_missed",
            a_dropped_watch_event_is_caught_as_missed,
        ),
        (
            "a_follower_keeping_an_ephemeral_after_its_session_is_caught",
            a_follower_keeping_an_ephemeral_after_its_session_is_caught,
        ),
    ];
    common::Group {
        name: "keeperd_db",
        scenarios: SCENARIOS,
        after_each: common::nothing,
        prepare: Some(common::build_failpoints),
    }
}
