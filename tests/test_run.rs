//! Integration tests of `stampede test`, the main job, against real ZooKeeper on a local
//! cluster of network namespaces: a run ends with a verdict and a complete results folder,
//! `stampede check` agrees with the run, and a controller killed with SIGKILL mid-test leaves a
//! history that parses and can be judged, with `stampede heal` clearing the faults.
//!
//! A custom harness (`harness = false`): the scenarios share one cluster, made at the start
//! and always removed at the end. Needs root on Linux.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{last_line, text, TestCluster};

fn partition_rules(cluster: &TestCluster) -> usize {
    let out = cluster.stampede(&["exec", "--", "iptables -S | grep -c -- '^-A' || true"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.rsplit(' ').next()?.parse::<usize>().ok())
        .sum()
}

fn our_servers(cluster: &TestCluster) -> Vec<String> {
    let pattern = format!("QuorumPeerMain /var/lib/stampede/db/{}", cluster.net());
    let out = std::process::Command::new("pgrep")
        .args(["-f", &pattern])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn a_register_run_with_partitions_is_valid_and_complete(cluster: &TestCluster) {
    let work = &cluster.work;
    let out = cluster.stampede(&[
        "test",
        "--nemesis",
        "partition",
        "--time-limit",
        "25s",
        "--set",
        "register.mix.read=0",
        "--set",
        "generator.nemesis_interval=5s",
        "--set",
        "generator.nemesis_duration=8s",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "expected a valid verdict: {}",
        text(&out)
    );
    let verdict = last_line(&out);
    assert!(verdict.starts_with("verdict: valid"), "{verdict}");
    let dir = cluster.results_dir(&out);
    for file in [
        "history.jsonl",
        "results.json",
        "test.yaml",
        "latency-raw.png",
        "latency-quantiles.png",
        "rate.png",
        "timeline.html",
    ] {
        let meta = std::fs::metadata(dir.join(file))
            .unwrap_or_else(|_| panic!("{file} missing in {}", dir.display()));
        assert!(meta.len() > 0, "{file} is empty");
    }
    for node in ["n1", "n2", "n3"] {
        let log = dir.join("nodes").join(node).join("zookeeper.log");
        assert!(
            std::fs::metadata(&log)
                .map(|m| m.len() > 0)
                .unwrap_or(false),
            "{} missing",
            log.display()
        );
    }
    let latest = std::fs::canonicalize(work.join("results/latest")).unwrap();
    assert_eq!(
        latest,
        std::fs::canonicalize(&dir).unwrap(),
        "results/latest points at the newest run"
    );
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let ops: Vec<serde_json::Value> = history
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        ops.iter().any(|op| op["f"] == "start-partition"),
        "the nemesis ran"
    );
    assert!(
        ops.iter()
            .filter(|op| op["type"] == "ok" && op["f"] == "write")
            .count()
            > 20,
        "writes happened"
    );
    assert!(
        !ops.iter()
            .any(|op| op["f"] == "read" && op["type"] == "invoke" && !is_final(op, &ops)),
        "no reads but final reads"
    );
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["valid"], true);
    assert_eq!(partition_rules(cluster), 0, "no partition left behind");
    assert!(
        our_servers(cluster).is_empty(),
        "the database was torn down"
    );

    let check = cluster.stampede(&["check", &dir.display().to_string()]);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check));
    assert_eq!(last_line(&check), verdict, "check agrees with the run");
}

/// Final reads are issued after the last nemesis operation.
fn is_final(op: &serde_json::Value, ops: &[serde_json::Value]) -> bool {
    let last_nemesis = ops
        .iter()
        .filter(|o| o["process"] == "nemesis")
        .map(|o| o["index"].as_u64().unwrap())
        .max()
        .unwrap_or(0);
    op["index"].as_u64().unwrap() > last_nemesis
}

fn a_killed_controller_leaves_a_checkable_history(cluster: &TestCluster) {
    let work = &cluster.work;
    let mut child = cluster
        .command(&[
            "test",
            "--nemesis",
            "partition",
            "--time-limit",
            "60s",
            "--set",
            "generator.nemesis_interval=2s",
            "--set",
            "generator.nemesis_duration=30s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    while partition_rules(cluster) == 0 {
        assert!(Instant::now() < deadline, "the partition never started");
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(2));
    child.kill().unwrap(); // SIGKILL: no chance to heal
    child.wait().unwrap();
    assert!(
        partition_rules(cluster) > 0,
        "SIGKILL left the partition in place, as expected"
    );
    let dir = std::fs::canonicalize(work.join("results/latest")).unwrap();
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    assert!(history.ends_with('\n'), "the last line is complete");
    let lines: Vec<&str> = history.lines().collect();
    assert!(
        lines.len() > 50,
        "operations were recorded before the kill: {}",
        lines.len()
    );
    for (i, line) in lines.iter().enumerate() {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("line {} does not parse: {e}", i + 1));
    }
    let check = cluster.stampede(&["check", &dir.display().to_string()]);
    let verdict = last_line(&check);
    assert!(
        verdict.starts_with("verdict: "),
        "check judged the history: {}",
        text(&check)
    );
    assert!(
        matches!(check.status.code(), Some(0) | Some(1) | Some(2)),
        "{}",
        text(&check)
    );
    cluster.stampede_ok(&["heal"]);
    assert_eq!(partition_rules(cluster), 0, "heal cleared the partition");
    cluster.stampede_ok(&["db", "teardown"]);
    assert!(our_servers(cluster).is_empty());
}

fn main() {
    let scenarios: &[common::Scenario] = &[
        (
            "a_register_run_with_partitions_is_valid_and_complete",
            a_register_run_with_partitions_is_valid_and_complete,
        ),
        (
            "a_killed_controller_leaves_a_checkable_history",
            a_killed_controller_leaves_a_checkable_history,
        ),
    ];
    TestCluster::new("strun", "10.241.10.0/24").run(
        3,
        common::nothing,
        scenarios,
        common::nothing,
        common::assert_cluster_gone,
    );
}
