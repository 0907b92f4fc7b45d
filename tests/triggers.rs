//! Integration tests of log triggers against a real 3-node ZooKeeper ensemble on a local
//! cluster: a trigger on the line a restarted follower logs when it syncs with the leader fires,
//! kills it, and the run is valid with the firing recorded; a trigger whose pattern never
//! matches makes the verdict `unknown`; `stampede heal` after a controller SIGKILL kills an
//! armed agent.
//!
//! A custom harness (`harness = false`): the scenarios share one cluster. Needs root on Linux.

mod common;

use std::time::{Duration, Instant};

use common::{text, TestCluster};
use serde_json::Value;

const SHORT: &[&str] = &[
    "--time-limit",
    "20s",
    "--set",
    "generator.nemesis_interval=1s",
    "--set",
    "generator.nemesis_duration=1s",
];

fn write_package(cluster: &TestCluster, name: &str, yaml: &str) -> String {
    let path = cluster.work.join(format!("{name}.yaml"));
    std::fs::write(&path, yaml).unwrap();
    path.display().to_string()
}

fn a_follower_killed_on_its_newleader_line_is_recorded_and_the_run_is_valid(cluster: &TestCluster) {
    let package = write_package(
        cluster,
        "rejoin",
        "faults:\n  - kind: sequence\n    steps:\n      - {kind: kill, target: follower}\n      \
         - kind: kill\n        target: all\n        trigger: {pattern: \"Learner received NEWLEADER message\"}\n      \
         - {heal: 0}\n      - {until_fired: 1, within: 30s}\n      - {heal: 1}\n",
    );
    let mut args = vec!["test", "--name", "rejoin", "--nemesis", &package];
    args.extend_from_slice(SHORT);
    let out = cluster.stampede(&args);
    let last = common::last_line(&out);
    assert!(
        out.status.code() == Some(0) && last.starts_with("verdict: valid under "),
        "{}",
        text(&out)
    );
    let dir = cluster.results_dir(&out);
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let start = history
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|op| op["f"] == "start-sequence" && op["type"] != "invoke")
        .expect("the sequence ran");
    assert_eq!(
        start["value"]["shortfall"],
        serde_json::json!([]),
        "{start}"
    );
    let fired: Vec<&Value> = start["value"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["value"]["fired"].as_array())
        .flatten()
        .collect();
    assert_eq!(fired.len(), 1, "one firing: {start}");
    assert!(fired[0]["line"]
        .as_str()
        .unwrap()
        .contains("Learner received NEWLEADER message"));
    assert!(fired[0]["signalled_ns"].as_u64() >= fired[0]["seen_ns"].as_u64());
}

fn a_trigger_that_never_fires_makes_the_run_unknown(cluster: &TestCluster) {
    let package = write_package(
        cluster,
        "never",
        "faults:\n  - kind: pause\n    target: one\n    trigger: {pattern: \"no server ever logs this\"}\n",
    );
    let mut args = vec!["test", "--name", "never", "--nemesis", &package];
    args.extend_from_slice(SHORT);
    let out = cluster.stampede(&args);
    let last = common::last_line(&out);
    assert!(
        out.status.code() == Some(2)
            && last.starts_with("verdict: unknown")
            && last.contains("never fired"),
        "{}",
        text(&out)
    );
}

/// The pids of the trigger agents running on the cluster's nodes (local: one process table).
fn agents(cluster: &TestCluster) -> Vec<String> {
    (1..=3)
        .filter_map(|i| {
            let pid = std::fs::read_to_string(format!(
                "/var/lib/stampede/trigger/{}{i}.pid",
                cluster.net()
            ))
            .ok()?;
            let pid = pid.trim().to_string();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            String::from_utf8_lossy(&cmdline)
                .contains("agent-trigger")
                .then_some(pid)
        })
        .collect()
}

fn heal_after_a_controller_sigkill_disarms_the_agent(cluster: &TestCluster) {
    let package = write_package(
        cluster,
        "armed",
        "faults:\n  - kind: kill\n    target: all\n    trigger: {pattern: \"no server ever logs this\"}\n",
    );
    let mut controller = cluster
        .command(&[
            "test",
            "--name",
            "armed",
            "--nemesis",
            &package,
            "--time-limit",
            "60s",
            "--set",
            "generator.nemesis_interval=1s",
            "--set",
            "generator.nemesis_duration=60s",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let began = Instant::now();
    while agents(cluster).len() < 3 {
        assert!(
            began.elapsed() < Duration::from_secs(120),
            "the agents were armed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    controller.kill().unwrap();
    controller.wait().unwrap();
    let armed = agents(cluster);
    assert_eq!(armed.len(), 3, "the agents outlive the controller");
    cluster.stampede_ok(&["heal"]);
    assert!(agents(cluster).is_empty(), "heal disarmed every agent");
    for pid in armed {
        // Dead: gone, or a zombie its new parent has not reaped yet.
        let state = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        assert!(
            state.is_empty() || state.lines().any(|l| l.starts_with("State:\tZ")),
            "agent {pid} is dead: {state}"
        );
    }
}

fn main() {
    let scenarios: &[common::Scenario] = &[
        (
            "a_follower_killed_on_its_newleader_line_is_recorded_and_the_run_is_valid",
            a_follower_killed_on_its_newleader_line_is_recorded_and_the_run_is_valid,
        ),
        (
            "a_trigger_that_never_fires_makes_the_run_unknown",
            a_trigger_that_never_fires_makes_the_run_unknown,
        ),
        (
            "heal_after_a_controller_sigkill_disarms_the_agent",
            heal_after_a_controller_sigkill_disarms_the_agent,
        ),
    ];
    let cluster = TestCluster::new("sttrig", "10.241.17.0/24");
    cluster.run(
        3,
        common::nothing,
        scenarios,
        common::nothing,
        common::assert_cluster_gone,
    );
}
