//! Integration test of keeperd as a database under test: stampede provisions it on a node of
//! a local cluster over SSH, runs the register and lock workloads against it while kill -9
//! and SIGSTOP hit the server, and judges the histories valid: nothing acknowledged was lost
//! across the restarts, and no two contenders held the lock at once. The same register run
//! against a keeperd built with a failpoint that empties its data at every start is judged
//! INVALID.
//!
//! A custom harness (`harness = false`) on a one-node cluster of its own. Needs root on Linux
//! and the keeperd binary built beside the test (`cargo test --workspace` builds it).

mod common;

use common::{keeperd_binary, last_line, text, TestCluster};

/// Runs `workload` against the keeperd `binary` under kill -9 and pause.
fn run_under_kill_and_pause(
    cluster: &TestCluster,
    binary: &str,
    workload: &str,
) -> std::process::Output {
    cluster.stampede(&[
        "test",
        "--db",
        "keeperd",
        "--keeperd-binary",
        binary,
        "--workload",
        workload,
        "--nemesis",
        "kill-pause",
        "--time-limit",
        "24",
        "--set",
        "generator.nemesis_interval=3s",
        "--set",
        "generator.nemesis_duration=4s",
    ])
}

/// The operations of a run's history.
fn history(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    history
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Runs `workload` against keeperd under kill -9 and pause; asserts a valid verdict and
/// returns the results folder and the history.
fn valid_run_under_kill_and_pause(
    cluster: &TestCluster,
    workload: &str,
) -> (std::path::PathBuf, Vec<serde_json::Value>) {
    let binary = keeperd_binary();
    let out = run_under_kill_and_pause(cluster, &binary, workload);
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
    assert!(
        last_line(&out).contains("under 2 kills (one, ") || last_line(&out).contains("kill (one, "),
        "the verdict says what the run was exposed to: {}",
        last_line(&out)
    );
    let dir = cluster.results_dir(&out);
    let ops = history(&dir);
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

/// Builds keeperd with the `failpoints` feature and returns a copy of the binary in the test's
/// scratch folder; the plain build is put back afterwards (both land on the one path cargo
/// gives the binary).
fn failpoint_build(cluster: &TestCluster) -> std::path::PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let build = |extra: &[&str]| {
        let mut command = std::process::Command::new(&cargo);
        command.args([
            "build",
            "--release",
            "--manifest-path",
            manifest,
            "-p",
            "keeperd",
        ]);
        let out = command.args(extra).output().expect("cargo runs");
        assert!(out.status.success(), "{}", text(&out));
    };
    build(&["--features", "keeperd/failpoints"]);
    let copy = cluster.work.join("keeperd-failpoints");
    std::fs::copy(keeperd_binary(), &copy).unwrap();
    build(&[]);
    copy
}

/// A keeperd that loses all its data at every restart (the `forget-on-start` failpoint): the
/// register run under the same kills as [`register_under_kill_and_pause_is_valid`] must be
/// judged INVALID, the reads and writes answered `no-node` judged as lost writes.
fn a_server_that_forgets_on_restart_is_caught(cluster: &TestCluster) {
    let binary = failpoint_build(cluster);
    let wrapper = cluster.work.join("keeperd-forgetful");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nKEEPERD_FAILPOINTS=forget-on-start exec {} \"$@\"\n",
            binary.display()
        ),
    )
    .unwrap();
    let out = run_under_kill_and_pause(cluster, &wrapper.display().to_string(), "register");
    let verdict = last_line(&out);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(verdict.starts_with("verdict: INVALID under "), "{verdict}");
    assert!(verdict.contains("lost-write"), "{verdict}");
    let dir = cluster.results_dir(&out);
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["linearizable"]["valid"], false, "{results:#}");
    assert!(
        results["zookeeper"]["counts"]["lost-write"].as_u64() > Some(0),
        "{results:#}"
    );
    let ops = history(&dir);
    let no_node = ops
        .iter()
        .filter(|op| op["type"] == "fail" && op["error"] == "no-node")
        .count();
    assert!(no_node > 0, "the emptied server answered no-node");
    let log = std::fs::read_to_string(dir.join("nodes/n1/keeperd.log")).unwrap();
    assert!(log.contains("failpoint forget-on-start"), "{log}");
    let check = cluster.stampede(&["check", &dir.display().to_string()]);
    assert_eq!(last_line(&check), verdict, "check agrees with the run");
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
        (
            "a_server_that_forgets_on_restart_is_caught",
            a_server_that_forgets_on_restart_is_caught,
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
