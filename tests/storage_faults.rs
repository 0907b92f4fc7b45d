//! Integration tests of the corrupt nemesis on a 3-node local cluster: register runs against
//! real ZooKeeper and keeperd ensembles while one server's newest transaction log, then its
//! newest snapshot, is damaged with the server stopped. Each run must be judged valid, each
//! start must record the file it damaged, and each server must have refused to start (its log
//! says why; it gets its original file back when the fault ends) or come back serving. Then a
//! controller killed with SIGKILL while a server is down on a damaged log: `stampede heal`
//! puts the file back and the server serves again.
//!
//! A custom harness (`harness = false`): the scenarios share one cluster. Needs root on Linux,
//! and the keeperd binary built beside the test (`cargo test --workspace`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{keeperd_binary, last_line, text, TestCluster};
use serde_json::Value;

/// Bits flipped in one server's newest log, then in its newest snapshot.
const LOG_THEN_SNAPSHOT: &str = "faults:\n\
    \x20 - {kind: corrupt, target: one, corrupt: {file: log, how: flip, bytes: 16}}\n\
    \x20 - {kind: corrupt, target: one, corrupt: {file: snapshot, how: flip, bytes: 16}}\n";

/// Bits flipped in one server's newest log, then the end of its data cut off (keeperd takes
/// a snapshot only every 100,000 transactions: a short run has none to damage).
const FLIP_THEN_TRUNCATE: &str = "faults:\n\
    \x20 - {kind: corrupt, target: one, corrupt: {file: log, how: flip, bytes: 16}}\n\
    \x20 - {kind: corrupt, target: one, corrupt: {file: log, how: truncate, bytes: 64}}\n";

/// Runs a register test under the package `yaml` with `db_args`, asserts it was judged
/// valid, and returns its results folder and nemesis completions.
fn run_valid(
    cluster: &TestCluster,
    name: &str,
    yaml: &str,
    db_args: &[&str],
) -> (PathBuf, Vec<Value>) {
    let nemesis = cluster.work.join(format!("{name}.yaml"));
    std::fs::write(&nemesis, yaml).unwrap();
    let nemesis = nemesis.display().to_string();
    let mut args = vec!["test", "--workload", "register", "--nemesis", &nemesis];
    args.extend_from_slice(db_args);
    args.extend_from_slice(&[
        "--time-limit",
        "28s",
        "--set",
        "generator.nemesis_interval=2s",
        "--set",
        "generator.nemesis_duration=5s",
    ]);
    let out = cluster.stampede(&args);
    assert!(
        out.status.success() && last_line(&out).starts_with("verdict: valid under "),
        "the run was judged valid: {}",
        text(&out)
    );
    assert!(
        last_line(&out).contains("corrupt faults (one,"),
        "the verdict names both corrupt faults: {}",
        last_line(&out)
    );
    let dir = cluster.results_dir(&out);
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let nemesis = history
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|op| op["process"] == "nemesis" && op["type"] != "invoke")
        .collect();
    (dir, nemesis)
}

/// Checks what each start and stop of the run recorded, against the server's own log (`log`
/// in the node's folder; `refusal` is the line a refusing server writes), and prints what each
/// server did. Returns how many starts damaged a file of each kind (log, snapshot).
fn judge_starts(dir: &Path, ops: &[Value], txn_dir: &str, log: &str, refusal: &str) -> [usize; 2] {
    let mut damaged = [0, 0];
    for (i, op) in ops.iter().enumerate() {
        if op["f"] != "start-corrupt" {
            continue;
        }
        assert!(op["error"].is_null(), "the start worked: {op}");
        let value = &op["value"];
        let node = value["nodes"][0].as_str().expect("a node was damaged");
        let damage = &value["damage"][0];
        assert_eq!(damage["node"], node);
        let file = damage["file"].as_str().unwrap();
        let name = file.rsplit('/').next().unwrap();
        assert!(file.contains(txn_dir), "{file} is in {txn_dir}");
        let kind = if name.starts_with("log.") { 0 } else { 1 };
        assert!(kind == 0 || name.starts_with("snapshot."), "{file}");
        damaged[kind] += 1;
        let data_end = damage["data_end"].as_u64().unwrap();
        match damage["how"].as_str().unwrap() {
            "flip" => {
                let offsets = damage["offsets"].as_array().unwrap();
                assert_eq!(offsets.len(), 16, "16 bytes flipped: {damage}");
                assert!(offsets.iter().all(|o| o.as_u64().unwrap() < data_end));
            }
            "truncate" => {
                assert_eq!(damage["len"], 64, "{damage}");
                assert_eq!(damage["from"].as_u64().unwrap() + 64, data_end, "{damage}");
            }
            other => panic!("unexpected damage {other}"),
        }
        let after = value["after_restart"][node].as_str().unwrap();
        let server_log = std::fs::read_to_string(dir.join(format!("nodes/{node}/{log}"))).unwrap();
        let refused = server_log.contains(refusal);
        let stop = ops[i + 1..]
            .iter()
            .find(|o| o["f"] == "stop-corrupt" && o["value"]["nodes"][0] == node)
            .expect("the fault was stopped");
        let came_back = stop["value"]["came_back"][node].as_bool().unwrap();
        match after {
            "exited" => {
                assert!(refused, "{node} exited: its log says {refusal:?}");
                assert!(!came_back, "{stop}");
                assert_eq!(stop["value"]["after_restore"][node], "serving", "{stop}");
            }
            "serving" => assert!(came_back, "{node} kept running: {stop}"),
            other => panic!("{node} neither served nor exited after the damage: {other}"),
        }
        println!(
            "{name} on {node}: {}",
            match after {
                "exited" => "refused to start; served again on its original file",
                _ => "started and served (recovered from its older files or its peers)",
            }
        );
    }
    damaged
}

fn zookeeper_survives_a_corrupted_log_and_snapshot(cluster: &TestCluster) {
    let (dir, ops) = run_valid(cluster, "zk-corrupt", LOG_THEN_SNAPSHOT, &[]);
    let damaged = judge_starts(
        &dir,
        &ops,
        "/data/version-2/",
        "zookeeper.log",
        "Unable to load database on disk",
    );
    assert!(damaged[0] >= 1, "a log was damaged: {damaged:?}");
    assert!(damaged[1] >= 1, "a snapshot was damaged: {damaged:?}");
}

fn keeperd_survives_a_corrupted_and_a_truncated_log(cluster: &TestCluster) {
    let binary = keeperd_binary();
    let args = ["--db", "keeperd", "--keeperd-binary", binary.as_str()];
    let (dir, ops) = run_valid(cluster, "kd-corrupt", FLIP_THEN_TRUNCATE, &args);
    let damaged = judge_starts(&dir, &ops, "/data/", "keeperd.log", "refusing to start");
    assert!(damaged[0] >= 2, "a log was damaged twice: {damaged:?}");
}

/// The folders of copies of damaged files left on the cluster's nodes.
fn copies_left(cluster: &TestCluster) -> Vec<String> {
    (1..=3)
        .map(|i| format!("/var/lib/stampede/corrupt/{}{i}", cluster.net()))
        .filter(|d| Path::new(d).exists())
        .collect()
}

fn heal_restores_a_log_left_corrupted_by_a_killed_controller(cluster: &TestCluster) {
    // A short run leaves the servers up with a transaction log to damage.
    let out = cluster.stampede(&[
        "test",
        "--nemesis",
        "none",
        "--time-limit",
        "3s",
        "--keep-db",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let mut child = cluster
        .command(&[
            "nemesis",
            "run",
            "--kind",
            "corrupt",
            "--target",
            "one",
            "--duration",
            "120s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    child.kill().unwrap(); // SIGKILL mid-fault: no chance to heal
    child.wait().unwrap();
    let value: Value = serde_json::from_str(
        line.strip_prefix("start-corrupt: ")
            .unwrap_or_else(|| panic!("the fault started: {line:?}")),
    )
    .unwrap();
    let node = value["nodes"][0].as_str().expect(&line);
    assert_eq!(
        value["after_restart"][node], "exited",
        "ZooKeeper refuses a log with flipped bits: {value}"
    );
    assert_eq!(copies_left(cluster).len(), 1, "the copy is kept for heal");
    let status = cluster.stampede(&["db", "status"]);
    assert!(
        !status.status.success(),
        "{node} is down: {}",
        text(&status)
    );
    cluster.stampede_ok(&["heal"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cluster.stampede(&["db", "status"]).status.success() {
        assert!(Instant::now() < deadline, "{node} did not serve again");
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(copies_left(cluster).is_empty(), "heal dropped the copy");
    cluster.stampede_ok(&["db", "teardown"]);
}

fn no_copy_left(cluster: &TestCluster) {
    assert!(
        copies_left(cluster).is_empty(),
        "copies of damaged files left: {:?}",
        copies_left(cluster)
    );
}

fn main() {
    let scenarios: &[common::Scenario] = &[
        (
            "zookeeper_survives_a_corrupted_log_and_snapshot",
            zookeeper_survives_a_corrupted_log_and_snapshot,
        ),
        (
            "keeperd_survives_a_corrupted_and_a_truncated_log",
            keeperd_survives_a_corrupted_and_a_truncated_log,
        ),
        (
            "heal_restores_a_log_left_corrupted_by_a_killed_controller",
            heal_restores_a_log_left_corrupted_by_a_killed_controller,
        ),
    ];
    let cluster = TestCluster::new("ststor", "10.241.21.0/24");
    cluster.run(
        3,
        common::nothing,
        scenarios,
        no_copy_left,
        common::assert_cluster_gone,
    );
}
