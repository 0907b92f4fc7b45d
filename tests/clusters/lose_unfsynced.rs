//! The lose-unfsynced fault on a 3-node local cluster: keeperd built with the failpoint
//! `skip-fsync` (it acknowledges writes it never fsync'd) loses acknowledged writes when every
//! server loses power, and the register checker says so; keeperd and ZooKeeper with their
//! fsyncs intact lose nothing acknowledged; `stampede heal` after a controller SIGKILL
//! mid-fault brings the servers back; no layer stays mounted after any of it.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::{failpoints_binary, keeperd_binary, last_line, text, TestCluster};

fn fixture() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/lose-unfsynced/all.yaml")
        .display()
        .to_string()
}

/// Every server loses power 5 s in, and comes back 3 s later.
const POWER_LOSS: &[&str] = &[
    "--workload",
    "register",
    "--time-limit",
    "16s",
    "--set",
    "generator.nemesis_interval=5s",
    "--set",
    "generator.nemesis_duration=3s",
];

fn run(cluster: &TestCluster, db: &[&str]) -> Output {
    let faults = fixture();
    let mut args = vec!["test", "--nemesis", faults.as_str()];
    args.extend_from_slice(db);
    args.extend_from_slice(POWER_LOSS);
    cluster.stampede(&args)
}

fn history(cluster: &TestCluster, out: &Output) -> Vec<serde_json::Value> {
    let dir = cluster.results_dir(out);
    std::fs::read_to_string(dir.join("history.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What each power loss threw away, per node: the values of the run's completed
/// `start-lose-unfsynced` operations (the nemesis completes with `info`).
fn losses(ops: &[serde_json::Value]) -> Vec<serde_json::Value> {
    ops.iter()
        .filter(|o| o["f"] == "start-lose-unfsynced" && o["value"]["lost"].is_object())
        .map(|o| o["value"].clone())
        .collect()
}

/// Asserts that the run had at least one power loss of all three servers.
fn assert_power_lost(ops: &[serde_json::Value]) -> Vec<serde_json::Value> {
    let losses = losses(ops);
    assert!(!losses.is_empty(), "no power loss happened");
    for loss in &losses {
        assert_eq!(loss["nodes"].as_array().unwrap().len(), 3, "{loss}");
        for node in ["n1", "n2", "n3"] {
            assert!(loss["lost"][node]["bytes"].is_u64(), "{loss}");
        }
    }
    losses
}

fn assert_valid(out: &Output) {
    common::assert_valid_or_known_defect(out);
    let verdict = last_line(out);
    assert!(
        verdict.contains("lose-unfsynced"),
        "exposure named: {verdict}"
    );
}

fn keeperd_skipping_fsync_loses_acknowledged_writes(cluster: &TestCluster) {
    let out = run(
        cluster,
        &[
            "--db",
            "keeperd",
            "--keeperd-binary",
            failpoints_binary(),
            "--keeperd-failpoints",
            "skip-fsync",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "anomalies found: {}",
        text(&out)
    );
    let verdict = last_line(&out);
    assert!(
        verdict.starts_with("verdict: INVALID") && verdict.contains("lost-write"),
        "expected lost-write in {verdict}"
    );
    let losses = assert_power_lost(&history(cluster, &out));
    // The writes acknowledged before the loss were in no fsync'd byte: every node lost some.
    for node in ["n1", "n2", "n3"] {
        assert!(
            losses[0]["lost"][node]["bytes"].as_u64().unwrap() > 0,
            "{}",
            losses[0]
        );
    }
}

fn keeperd_with_fsync_loses_nothing_acknowledged(cluster: &TestCluster) {
    let out = run(
        cluster,
        &["--db", "keeperd", "--keeperd-binary", &keeperd_binary()],
    );
    assert_valid(&out);
    assert_power_lost(&history(cluster, &out));
}

fn zookeeper_loses_nothing_acknowledged(cluster: &TestCluster) {
    let out = run(cluster, &["--db", "zookeeper"]);
    assert_valid(&out);
    assert_power_lost(&history(cluster, &out));
}

/// Whether keeperd on node `i` answers `ruok` with `imok`.
fn serves(cluster: &TestCluster, i: usize) -> bool {
    let addr = format!("{}{i}:2181", cluster.net());
    let Ok(mut conn) = TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(2))
    else {
        return false;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    let mut answer = String::new();
    conn.write_all(b"ruok").is_ok() && conn.read_to_string(&mut answer).is_ok() && answer == "imok"
}

fn heal_after_a_controller_sigkill_mid_fault(cluster: &TestCluster) {
    let run_dir: PathBuf =
        std::env::temp_dir().join(format!("lazyfs-killed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&run_dir);
    let log_path = run_dir.with_extension("log");
    let log = std::fs::File::create(&log_path).unwrap();
    let faults = fixture();
    let keeperd = keeperd_binary();
    let mut controller = cluster
        .command(&[
            "test",
            "--db",
            "keeperd",
            "--keeperd-binary",
            &keeperd,
            "--nemesis",
            &faults,
            "--workload",
            "register",
            "--time-limit",
            "120s",
            "--set",
            "generator.nemesis_interval=3s",
            "--set",
            "generator.nemesis_duration=120s",
            "--run-dir",
            run_dir.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(180);
    let lost = loop {
        let history = std::fs::read_to_string(run_dir.join("history.jsonl")).unwrap_or_default();
        let ops: Vec<serde_json::Value> = history
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if let Some(loss) = losses(&ops).pop() {
            break loss;
        }
        assert!(Instant::now() < deadline, "no power loss within 3 minutes");
        assert!(
            controller.try_wait().unwrap().is_none(),
            "the controller ended: {}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    controller.kill().unwrap();
    controller.wait().unwrap();
    assert!(
        (1..=3).all(|i| !serves(cluster, i)),
        "the servers are down: {lost}"
    );
    cluster.stampede_ok(&["heal", "--db", "keeperd"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(1..=3).all(|i| serves(cluster, i)) {
        assert!(Instant::now() < deadline, "heal brought the servers back");
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(
        layers_mounted(cluster),
        3,
        "the servers still run on their layers"
    );
    cluster.stampede_ok(&["db", "teardown", "--db", "keeperd"]);
    let _ = std::fs::remove_dir_all(&run_dir);
    let _ = std::fs::remove_file(&log_path);
}

/// How many lazyfs layers are mounted on the nodes (each node has a mount namespace of its
/// own, that of its sshd).
fn layers_mounted(cluster: &TestCluster) -> usize {
    let out = cluster.stampede_ok(&["exec", "grep -c ^stampede-lazyfs /proc/self/mounts || true"]);
    out.lines()
        .filter_map(|l| l.split_whitespace().last()?.parse::<usize>().ok())
        .sum()
}

/// After every scenario: no layer is left mounted, on the nodes or on the host.
fn no_layer_left(cluster: &TestCluster) {
    assert_eq!(
        layers_mounted(cluster),
        0,
        "a layer was left mounted on a node"
    );
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(
        !mounts
            .lines()
            .any(|l| l.starts_with("stampede-lazyfs") && l.contains(cluster.net())),
        "a layer was left mounted on the host"
    );
}

/// This file's scenarios, the longest first, for the pool of lanes (tests/clusters/main.rs).
pub fn group() -> common::Group {
    const SCENARIOS: &[common::Scenario] = &[
        (
            "keeperd_skipping_fsync_loses_acknowledged_writes",
            keeperd_skipping_fsync_loses_acknowledged_writes,
        ),
        (
            "keeperd_with_fsync_loses_nothing_acknowledged",
            keeperd_with_fsync_loses_nothing_acknowledged,
        ),
        (
            "zookeeper_loses_nothing_acknowledged",
            zookeeper_loses_nothing_acknowledged,
        ),
        (
            "heal_after_a_controller_sigkill_mid_fault",
            heal_after_a_controller_sigkill_mid_fault,
        ),
    ];
    common::Group {
        name: "lose_unfsynced",
        scenarios: SCENARIOS,
        after_each: no_layer_left,
        prepare: Some(common::build_failpoints),
    }
}
