//! Integration test of keeperd as a database under test: stampede provisions it on a node of
//! a local cluster over SSH, runs the register and lock workloads against it while kill -9
//! and SIGSTOP hit the server, and judges the histories valid: nothing acknowledged was lost
//! across the restarts, and no two contenders held the lock at once.
//!
//! A custom harness (`harness = false`) on a one-node cluster of its own. Needs root on Linux
//! and the keeperd binary built beside the test (`cargo test --workspace` builds it).

mod common;

use common::{last_line, text, TestCluster};

/// The keeperd binary cargo built for this workspace, next to the test's own directory.
fn keeperd_binary() -> String {
    let exe = std::env::current_exe().unwrap();
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let binary = dir.join("keeperd");
    assert!(
        binary.exists(),
        "{} is missing: run the tests with --workspace",
        binary.display()
    );
    binary.display().to_string()
}

/// Runs `workload` against keeperd under kill -9 and pause; asserts a valid verdict and
/// returns the results folder and the history.
fn valid_run_under_kill_and_pause(
    cluster: &TestCluster,
    workload: &str,
) -> (std::path::PathBuf, Vec<serde_json::Value>) {
    let binary = keeperd_binary();
    let out = cluster.stampede(&[
        "test",
        "--db",
        "keeperd",
        "--keeperd-binary",
        &binary,
        "--workload",
        workload,
        "--nemesis",
        "kill-pause",
        "--time-limit",
        "24s",
        "--set",
        "generator.nemesis_interval=3s",
        "--set",
        "generator.nemesis_duration=4s",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a valid verdict: {}",
        text(&out)
    );
    assert!(
        last_line(&out).starts_with("verdict: valid"),
        "{}",
        text(&out)
    );
    let dir = cluster.results_dir(&out);
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let ops = history
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (dir, ops)
}

fn register_under_kill_and_pause_is_valid(cluster: &TestCluster) {
    let (dir, ops) = valid_run_under_kill_and_pause(cluster, "register");
    for fault in ["start-kill", "start-pause"] {
        let hit = ops
            .iter()
            .any(|op| op["f"] == fault && op["type"] == "info" && op["value"]["nodes"][0] == "n1");
        assert!(hit, "{fault} hit the keeperd server");
    }
    let writes_after_restart = ops
        .iter()
        .skip_while(|op| op["f"] != "stop-kill")
        .filter(|op| op["f"] == "write" && op["type"] == "ok")
        .count();
    assert!(
        writes_after_restart > 10,
        "the restarted server took writes: {writes_after_restart}"
    );
    let final_reads = ops
        .iter()
        .filter(|op| op["f"] == "read" && op["type"] == "ok")
        .count();
    assert!(final_reads > 0, "final reads checked what survived");
    assert!(
        std::fs::metadata(dir.join("nodes/n1/keeperd.log")).is_ok(),
        "the server's log was collected"
    );
}

fn lock_under_kill_and_pause_is_valid(cluster: &TestCluster) {
    let (_, ops) = valid_run_under_kill_and_pause(cluster, "lock-sequential");
    assert!(
        ops.iter()
            .any(|op| op["f"] == "start-kill" && op["type"] == "info"),
        "the server was killed"
    );
    let held = ops
        .iter()
        .filter(|op| op["f"] == "hold" && op["type"] == "ok")
        .count();
    assert!(held > 10, "contenders held the lock: {held}");
}

fn main() {
    let scenarios: &[common::Scenario] = &[
        (
            "register_under_kill_and_pause_is_valid",
            register_under_kill_and_pause_is_valid,
        ),
        (
            "lock_under_kill_and_pause_is_valid",
            lock_under_kill_and_pause_is_valid,
        ),
    ];
    TestCluster::new("stkd", "10.241.12.0/24").run(
        1,
        common::nothing,
        scenarios,
        common::nothing,
        common::assert_cluster_gone,
    );
}
