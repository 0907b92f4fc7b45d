//! Integration tests of the corrupt nemesis on a 3-node local cluster: register runs against
//! real ZooKeeper and keeperd ensembles while one server's newest transaction log, then its
//! newest snapshot, is damaged with the server stopped. Each run must be judged valid, each
//! start must record the file it damaged, and each server must have refused to start (its log
//! says why; it gets its original file back when the fault ends) or come back serving. The
//! servers snapshot often (`db.snap_count`), so the snapshots damaged are ones taken during the
//! run. Then a controller killed with SIGKILL while a server is down on a damaged log, in the
//! middle of a rolling restart, and in the middle of a sequence (a partition and a killed
//! server in place): `stampede heal` puts everything back and every server serves again.
//!
//! Scenarios of the pooled target (tests/clusters/main.rs): each runs on a 3-node local cluster
//! of a lane's, made at the start and always removed at the end. Needs root on Linux,
//! and the keeperd binary built beside the test (`cargo test --workspace`).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{keeperd_binary, last_line, text, TestCluster};
use serde_json::Value;

/// Bits flipped in one server's newest log, then in its newest snapshot.
const LOG_THEN_SNAPSHOT: &str = "faults:\n\
    \x20 - {kind: corrupt, target: one, corrupt: {file: log, how: flip, bytes: 16}}\n\
    \x20 - {kind: corrupt, target: one, corrupt: {file: snapshot, how: flip, bytes: 16}}\n";

/// Bits flipped in one server's newest log, then the end of its data cut off.
const FLIP_THEN_TRUNCATE: &str = "faults:\n\
    \x20 - {kind: corrupt, target: one, corrupt: {file: log, how: flip, bytes: 16}}\n\
    \x20 - {kind: corrupt, target: one, corrupt: {file: log, how: truncate, bytes: 64}}\n";

/// A range of one server's newest snapshot zeroed, then the end of another's cut off.
const ZERO_THEN_TRUNCATE_SNAPSHOT: &str = "faults:\n\
    \x20 - {kind: corrupt, target: one, corrupt: {file: snapshot, how: zero, bytes: 64}}\n\
    \x20 - {kind: corrupt, target: one, corrupt: {file: snapshot, how: truncate, bytes: 64}}\n";

/// Runs a register test under the package `yaml` with `db_args`, asserts it was judged
/// valid (or INVALID naming a known ZooKeeper defect its server logged), and returns its
/// results folder and nemesis completions.
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
        "60s",
        "--set",
        "generator.nemesis_interval=2s",
        "--set",
        "generator.nemesis_duration=5s",
    ]);
    let out = cluster.stampede(&args);
    common::assert_valid_or_known_defect(&out);
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
            "zero" => {
                assert_eq!(damage["len"], 64, "{damage}");
                assert!(
                    damage["from"].as_u64().unwrap() + 64 <= data_end,
                    "{damage}"
                );
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
            // Slower than the fault's 20 s watch (a sync from the leader on a loaded machine):
            // it must still run at the stop; the run's checks judge what it served.
            "running, not serving" => assert!(came_back, "{node} ran, then died: {stop}"),
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

/// How many snapshot files the listing of each node's data directory (collected at the end of
/// the run in `dir`) shows.
fn snapshots_kept(dir: &Path) -> Vec<usize> {
    (1..=3)
        .map(|i| {
            let listing =
                std::fs::read_to_string(dir.join(format!("nodes/n{i}/data-dir.txt"))).unwrap();
            listing
                .lines()
                .filter(|l| l.contains(" snapshot.") && !l.ends_with(".tmp"))
                .count()
        })
        .collect()
}

fn zookeeper_survives_a_corrupted_log_and_snapshot(cluster: &TestCluster) {
    let snap_count = ["--set", "db.snap_count=100"];
    let (dir, ops) = run_valid(cluster, "zk-corrupt", LOG_THEN_SNAPSHOT, &snap_count);
    let damaged = judge_starts(
        &dir,
        &ops,
        "/data/version-2/",
        "zookeeper.log",
        "Unable to load database on disk",
    );
    assert!(damaged[0] >= 1, "a log was damaged: {damaged:?}");
    assert!(damaged[1] >= 1, "a snapshot was damaged: {damaged:?}");
    // ZooKeeper keeps its snapshots: one at start and one per new leader, and with snapCount
    // 100 one every 51 to 100 transactions of a run of about 900.
    let kept = snapshots_kept(&dir);
    assert!(
        kept.iter().all(|n| *n >= 8),
        "every server snapshotted during the run: {kept:?}"
    );
}

fn keeperd_survives_a_corrupted_and_a_truncated_log(cluster: &TestCluster) {
    let binary = keeperd_binary();
    let args = ["--db", "keeperd", "--keeperd-binary", binary.as_str()];
    let (dir, ops) = run_valid(cluster, "kd-corrupt", FLIP_THEN_TRUNCATE, &args);
    let damaged = judge_starts(&dir, &ops, "/data/", "keeperd.log", "refusing to start");
    assert!(damaged[0] >= 2, "a log was damaged twice: {damaged:?}");
}

/// keeperd checks a snapshot's checksum before loading it: a server whose newest snapshot was
/// zeroed or cut refuses to start (and serves again on its original file).
fn keeperd_refuses_a_zeroed_and_a_truncated_snapshot(cluster: &TestCluster) {
    let binary = keeperd_binary();
    let args = [
        "--db",
        "keeperd",
        "--keeperd-binary",
        binary.as_str(),
        "--set",
        "db.snap_count=20",
    ];
    let (dir, ops) = run_valid(cluster, "kd-snapshot", ZERO_THEN_TRUNCATE_SNAPSHOT, &args);
    let damaged = judge_starts(&dir, &ops, "/data/", "keeperd.log", "refusing to start");
    assert!(damaged[1] >= 2, "a snapshot was damaged twice: {damaged:?}");
    let refusals = (1..=3)
        .map(|i| std::fs::read_to_string(dir.join(format!("nodes/n{i}/keeperd.log"))).unwrap())
        .filter(|log| log.contains("corrupt snapshot") && log.contains("refusing to start"))
        .count();
    assert!(refusals >= 1, "a server refused its damaged snapshot");
}

/// The folders of copies of damaged files left on the cluster's nodes.
fn copies_left(cluster: &TestCluster) -> Vec<String> {
    common::node_paths(cluster, "/var/lib/stampede/corrupt", "")
}

fn heal_restores_a_log_left_corrupted_by_a_killed_controller(cluster: &TestCluster) {
    // A short run leaves the servers up with a transaction log to damage.
    database_up(cluster);
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
    // ZooKeeper refuses a log whose flipped bits fail a record's checksum, but reads one that
    // lands in a record's length as a torn tail, cuts it off and serves: both are its answers
    // to a damaged log, and heal must restore the copy either way.
    let after = value["after_restart"][node].as_str().unwrap_or_default();
    assert!(
        ["exited", "serving"].contains(&after),
        "the damaged server either refuses its log or serves: {value}"
    );
    assert_eq!(copies_left(cluster).len(), 1, "the copy is kept for heal");
    let status = cluster.stampede(&["db", "status"]);
    assert_eq!(
        status.status.success(),
        after == "serving",
        "{node} {after} after the damage: {}",
        text(&status)
    );
    heal_brings_every_node_back(cluster);
    cluster.stampede_ok(&["db", "teardown"]);
}

/// The pid of the ZooKeeper server on node `i` (1-based) when it runs: its pid file names a
/// live process whose command line holds its config file's path (local nodes share a disk).
fn server_pid(cluster: &TestCluster, i: usize) -> Option<i32> {
    let home = format!("/var/lib/stampede/db/{}{i}", cluster.net());
    let pid: i32 = std::fs::read_to_string(format!("{home}/server.pid"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let marker = format!("{home}/conf/zoo.cfg");
    String::from_utf8_lossy(&cmdline)
        .contains(&marker)
        .then_some(pid)
}

/// How many partition (filter) and packet (mangle) rules each node holds, one line per node.
fn rules_left(cluster: &TestCluster) -> Vec<String> {
    let count =
        "echo $(iptables -S | grep -c -- '^-A') $(iptables -t mangle -S | grep -c -- '^-A')";
    let out = cluster.stampede_ok(&["exec", "--", count]);
    out.lines().map(str::to_string).collect()
}

/// Sends `signal` to the process `pid`.
fn signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) on a child of ours; it reads no memory.
    assert_eq!(
        unsafe { libc::kill(pid as i32, signal) },
        0,
        "signal {signal} to {pid}"
    );
}

/// After a controller was killed mid-fault: `stampede heal`, then every server runs and serves
/// (within a minute), no node holds a partition or packet rule, and no copy of a damaged file
/// is left.
fn heal_brings_every_node_back(cluster: &TestCluster) {
    let out = cluster.stampede_ok(&["heal"]);
    assert!(out.contains("healed 3 nodes"), "{out}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cluster.stampede(&["db", "status"]).status.success() {
        assert!(
            Instant::now() < deadline,
            "every server serves again after heal"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    for i in 1..=3 {
        assert!(server_pid(cluster, i).is_some(), "n{i}'s server runs");
    }
    for line in rules_left(cluster) {
        assert!(
            line.ends_with(": 0 0"),
            "filter and mangle rules left: {line}"
        );
    }
    no_copy_left(cluster);
}

/// Starts `stampede args…` against the cluster, its output thrown away: a controller to kill.
fn spawn_quiet(cluster: &TestCluster, args: &[&str]) -> std::process::Child {
    let mut command = cluster.command(args);
    command.stdout(Stdio::null()).stderr(Stdio::null());
    command.spawn().unwrap()
}

/// Leaves the database running after a short run with no fault.
fn database_up(cluster: &TestCluster) {
    let args = [
        "test",
        "--nemesis",
        "none",
        "--time-limit",
        "3s",
        "--keep-db",
    ];
    let out = cluster.stampede(&args);
    assert!(out.status.success(), "{}", text(&out));
}

/// A rolling restart's controller stopped (SIGSTOP) the moment one of the servers it restarts
/// is gone, before it starts it again, then killed with SIGKILL: the server stays down until
/// `stampede heal` starts it. (A start already on its way when the controller stops brings
/// the server back on its own: then another try.)
fn heal_restarts_a_server_left_down_mid_restart(cluster: &TestCluster) {
    database_up(cluster);
    let mut caught = None;
    for _ in 0..3 {
        let pids: Vec<i32> = (1..=3)
            .map(|i| server_pid(cluster, i).expect("every server runs"))
            .collect();
        let args = ["nemesis", "run", "--kind", "restart", "--target", "all"];
        let mut child = spawn_quiet(cluster, &[&args[..], &["--duration", "60s"]].concat());
        let deadline = Instant::now() + Duration::from_secs(60);
        let gone = loop {
            let alive = |i: usize| server_pid(cluster, i + 1) == Some(pids[i]);
            if let Some(i) = (0..3).find(|i| !alive(*i)) {
                break i;
            }
            assert!(Instant::now() < deadline, "the restart killed no server");
            std::thread::sleep(Duration::from_millis(1));
        };
        signal(child.id(), libc::SIGSTOP);
        std::thread::sleep(Duration::from_millis(500));
        let down = server_pid(cluster, gone + 1).is_none();
        child.kill().unwrap(); // SIGKILL mid-fault: no chance to heal
        child.wait().unwrap();
        if down {
            std::thread::sleep(Duration::from_secs(2));
            assert!(
                server_pid(cluster, gone + 1).is_none(),
                "n{} stays down with its controller gone",
                gone + 1
            );
            caught = Some(gone + 1);
            break;
        }
        heal_brings_every_node_back(cluster);
    }
    let node = caught.expect("a controller was killed while a server was down");
    println!("n{node} was down when its restart's controller was killed");
    heal_brings_every_node_back(cluster);
    cluster.stampede_ok(&["db", "teardown"]);
}

/// A sequence that isolates one server and kills one, held for a minute: its controller
/// killed with SIGKILL while both are in place; `stampede heal` removes the rules and starts
/// the server.
fn heal_undoes_a_sequence_left_in_place(cluster: &TestCluster) {
    let yaml = "faults:\n\
                \x20 - kind: sequence\n\
                \x20   steps:\n\
                \x20     - {kind: partition, target: one}\n\
                \x20     - {kind: kill, target: one}\n";
    let nemesis = cluster.work.join("sequence-held.yaml");
    std::fs::write(&nemesis, yaml).unwrap();
    let run_dir = cluster.work.join("sequence-held");
    let args = [
        "test",
        "--nemesis",
        nemesis.to_str().unwrap(),
        "--run-dir",
        run_dir.to_str().unwrap(),
        "--time-limit",
        "90s",
        "--set",
        "generator.nemesis_interval=1s",
        "--set",
        "generator.nemesis_duration=60s",
    ];
    let mut child = spawn_quiet(cluster, &args);
    let deadline = Instant::now() + Duration::from_secs(60);
    let started = loop {
        let history = std::fs::read_to_string(run_dir.join("history.jsonl")).unwrap_or_default();
        let start = history
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|op| op["f"] == "start-sequence" && op["type"] != "invoke");
        if let Some(op) = start {
            break op;
        }
        assert!(Instant::now() < deadline, "the sequence started");
        std::thread::sleep(Duration::from_millis(200));
    };
    let steps = &started["value"]["steps"];
    let (isolated, killed) = (&steps[0]["value"]["nodes"], &steps[1]["value"]["nodes"]);
    let killed = killed[0].as_str().unwrap_or_else(|| panic!("{started}"));
    let down: Vec<usize> = (1..=3)
        .filter(|i| server_pid(cluster, *i).is_none())
        .collect();
    let rules = rules_left(cluster);
    child.kill().unwrap(); // SIGKILL mid-fault: no chance to heal
    child.wait().unwrap();
    assert_eq!(down.len(), 1, "one server was down ({started})");
    assert_eq!(killed, format!("n{}", down[0]), "{started}");
    assert!(
        rules.iter().any(|l| !l.ends_with(": 0 0")),
        "partition rules were in place ({isolated}): {rules:?}"
    );
    println!("{killed} down and {isolated} isolated when the controller was killed");
    heal_brings_every_node_back(cluster);
    cluster.stampede_ok(&["db", "teardown"]);
}

fn no_copy_left(cluster: &TestCluster) {
    assert!(
        copies_left(cluster).is_empty(),
        "copies of damaged files left: {:?}",
        copies_left(cluster)
    );
}

/// This file's scenarios, the longest first, for the pool of lanes (tests/clusters/main.rs).
pub fn group() -> common::Group {
    const SCENARIOS: &[common::Scenario] = &[
        (
            "zookeeper_survives_a_corrupted_log_and_snapshot",
            zookeeper_survives_a_corrupted_log_and_snapshot,
        ),
        (
            "keeperd_refuses_a_zeroed_and_a_truncated_snapshot",
            keeperd_refuses_a_zeroed_and_a_truncated_snapshot,
        ),
        (
            "keeperd_survives_a_corrupted_and_a_truncated_log",
            keeperd_survives_a_corrupted_and_a_truncated_log,
        ),
        (
            "heal_restores_a_log_left_corrupted_by_a_killed_controller",
            heal_restores_a_log_left_corrupted_by_a_killed_controller,
        ),
        (
            "heal_restarts_a_server_left_down_mid_restart",
            heal_restarts_a_server_left_down_mid_restart,
        ),
        (
            "heal_undoes_a_sequence_left_in_place",
            heal_undoes_a_sequence_left_in_place,
        ),
    ];
    common::Group {
        name: "storage_faults",
        scenarios: SCENARIOS,
        after_each: no_copy_left,
        prepare: None,
    }
}
