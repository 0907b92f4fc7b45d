//! Integration tests of log triggers against a real 3-node ensemble on a local cluster: a
//! trigger on the line a restarted follower logs when it syncs with the leader fires, kills it,
//! and the run is valid with the firing recorded; the same trigger on a partition cuts the
//! follower off (its DROP rules seen while the fault holds; on keeperd) and on a
//! lose-unfsynced fault takes its power (what it lost recorded); a trigger whose pattern never
//! matches makes the verdict `unknown`; `stampede heal` after a controller SIGKILL kills armed
//! agents and removes the rules of one that fired. ZooKeeper 3.8.0 but where said.
//!
//! Scenarios of the pooled target (tests/clusters/main.rs): each runs on a 3-node local cluster
//! of a lane's, made at the start and always removed at the end. Needs root on Linux.

use crate::common;

use std::time::{Duration, Instant};

use common::TestCluster;
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

/// The line a follower logs when it has taken the leader's history: ZooKeeper's, or keeperd's
/// right after its NEWLEADER ACK.
const NEWLEADER: &str = "Learner received NEWLEADER message|leader [0-9]+: synced at";

/// A package of one sequence: a follower killed and restarted, and a `kind` fault armed on every
/// server with a trigger on the line it logs when it syncs with the leader, healed after it
/// fired and `hold`.
fn on_newleader(kind: &str, hold: &str) -> String {
    format!(
        "faults:\n  - kind: sequence\n    steps:\n      - {{kind: kill, target: follower}}\n      \
         - kind: {kind}\n        target: all\n        trigger: {{pattern: \"{NEWLEADER}\"}}\n      \
         - {{heal: 0}}\n      - {{until_fired: 1, within: 30s}}\n      - {{wait: {hold}}}\n      - {{heal: 1}}\n"
    )
}

/// Asserts that a run was valid (or INVALID naming a known ZooKeeper defect) and that its
/// first sequence had no shortfall; that sequence's firings.
fn valid_firings(cluster: &TestCluster, out: &std::process::Output) -> Vec<Value> {
    common::assert_valid_or_known_defect(out);
    let dir = cluster.results_dir(out);
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
    let fired: Vec<Value> = start["value"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["value"]["fired"].as_array())
        .flatten()
        .cloned()
        .collect();
    assert_eq!(fired.len(), 1, "one firing: {start}");
    let line = fired[0]["line"].as_str().unwrap();
    let synced = regex::Regex::new(NEWLEADER).unwrap();
    assert!(synced.is_match(line), "{line}");
    assert!(fired[0]["acted_ns"].as_u64() >= fired[0]["seen_ns"].as_u64());
    fired
}

/// The arguments of a short `stampede test` run called `name` with the package at `package`.
fn test_args<'a>(name: &'a str, package: &'a str) -> Vec<&'a str> {
    let mut args = vec!["test", "--name", name, "--nemesis", package];
    args.extend_from_slice(SHORT);
    args
}

fn a_follower_killed_on_its_newleader_line_is_recorded_and_the_run_is_valid(cluster: &TestCluster) {
    let package = write_package(cluster, "rejoin", &on_newleader("kill", "0s"));
    valid_firings(cluster, &cluster.stampede(&test_args("rejoin", &package)));
}

/// The DROP rules in stampede's partition chain on each node (by node number), read in the
/// nodes' network namespaces.
fn drop_rules(cluster: &TestCluster) -> Vec<(usize, Vec<String>)> {
    let rules = common::chain_drops(cluster, "STAMPEDE");
    rules
        .into_iter()
        .enumerate()
        .map(|(i, r)| (i + 1, r))
        .collect()
}

/// Asserts that node `i` drops packets from both other nodes and from nothing else.
fn assert_cut_off(cluster: &TestCluster, i: usize, rules: &[String]) {
    let mut sources: Vec<String> = rules
        .iter()
        .filter_map(|r| r.split_whitespace().nth(3).map(str::to_string))
        .collect();
    sources.sort();
    let others: Vec<String> = (1..=3)
        .filter(|j| *j != i)
        .map(|j| format!("{}{j}/32", cluster.net()))
        .collect();
    assert_eq!(
        sources, others,
        "n{i} drops packets from the other nodes: {rules:?}"
    );
}

/// On keeperd: ZooKeeper 3.8.0's replicas can diverge when a follower is cut off there
/// (docs/findings/2026-11-29-follower-cut-after-newleader-diverges.md), with nothing in its log
/// to name it by; the rules and the firing are what this scenario is about.
fn a_follower_cut_off_on_its_newleader_line_drops_its_peers_until_healed(cluster: &TestCluster) {
    let package = write_package(cluster, "cutoff", &on_newleader("partition", "3s"));
    let keeperd = common::keeperd_binary();
    let mut args = test_args("cutoff", &package);
    args.extend(["--db", "keeperd", "--keeperd-binary", &keeperd]);
    let mut controller = cluster
        .command(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // While the run goes on, the rules on the nodes: the cut-off node's, seen while they hold.
    let mut seen: Vec<(usize, Vec<String>)> = Vec::new();
    while controller.try_wait().unwrap().is_none() {
        seen.extend(
            drop_rules(cluster)
                .into_iter()
                .filter(|(_, r)| !r.is_empty()),
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let fired = valid_firings(cluster, &controller.wait_with_output().unwrap());
    // The node the first sequence cut off was seen cut off (a later sequence may cut off
    // another follower before the time limit), and every node seen was cut off from both others.
    let node: usize = fired[0]["node"].as_str().unwrap()[1..].parse().unwrap();
    assert!(
        seen.iter().any(|(i, _)| *i == node),
        "rules seen on n{node} while the fault held: {seen:?}"
    );
    for (i, rules) in &seen {
        assert_cut_off(cluster, *i, rules);
    }
    assert!(
        drop_rules(cluster).iter().all(|(_, r)| r.is_empty()),
        "healed: no rule left"
    );
}

fn a_follower_losing_power_on_its_newleader_line_records_what_it_lost(cluster: &TestCluster) {
    let package = write_package(cluster, "powerloss", &on_newleader("lose-unfsynced", "0s"));
    let fired = valid_firings(
        cluster,
        &cluster.stampede(&test_args("powerloss", &package)),
    );
    let lost = &fired[0]["lost"];
    assert!(
        lost["bytes"].is_u64() && lost["files"].is_u64(),
        "what the power loss threw away is recorded: {fired:?}"
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

/// Polls `found` every 200 ms until it finds something, at most 2 minutes (`what` names it).
fn wait_for<T>(what: &str, mut found: impl FnMut() -> Option<T>) -> T {
    let began = Instant::now();
    loop {
        if let Some(it) = found() {
            return it;
        }
        assert!(began.elapsed() < Duration::from_secs(120), "{what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Starts a 90 s `stampede test` run called `name` with the package at `package`, each fault
/// lasting `duration`, its output discarded (the test kills it).
fn spawn_quiet(
    cluster: &TestCluster,
    name: &str,
    package: &str,
    duration: &str,
) -> std::process::Child {
    let duration = format!("generator.nemesis_duration={duration}");
    let args = [
        "test",
        "--name",
        name,
        "--nemesis",
        package,
        "--time-limit",
        "90s",
        "--set",
        "generator.nemesis_interval=1s",
        "--set",
        &duration,
    ];
    cluster
        .command(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

fn heal_after_a_controller_sigkill_disarms_the_agent(cluster: &TestCluster) {
    let package = write_package(
        cluster,
        "armed",
        "faults:\n  - kind: kill\n    target: all\n    trigger: {pattern: \"no server ever logs this\"}\n",
    );
    let mut controller = spawn_quiet(cluster, "armed", &package, "60s");
    wait_for("the agents were armed", || {
        (agents(cluster).len() == 3).then_some(())
    });
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

fn heal_after_a_controller_sigkill_removes_a_fired_drop_and_armed_agents(cluster: &TestCluster) {
    let package = write_package(cluster, "dropheal", &on_newleader("partition", "60s"));
    let mut controller = spawn_quiet(cluster, "dropheal", &package, "1s");
    let cut = wait_for("a follower was cut off", || {
        drop_rules(cluster).into_iter().find(|(_, r)| !r.is_empty())
    });
    controller.kill().unwrap();
    controller.wait().unwrap();
    assert_cut_off(cluster, cut.0, &cut.1);
    let armed = agents(cluster);
    assert_eq!(armed.len(), 2, "the agents that did not fire stay armed");
    cluster.stampede_ok(&["heal"]);
    assert!(agents(cluster).is_empty(), "heal disarmed every agent");
    assert!(
        drop_rules(cluster).iter().all(|(_, r)| r.is_empty()),
        "heal removed the rules"
    );
    let leftovers: Vec<String> = std::fs::read_dir("/var/lib/stampede/trigger")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| f.starts_with(cluster.net()))
        .collect();
    assert!(leftovers.is_empty(), "no agent file left: {leftovers:?}");
}

/// This file's scenarios, the longest first, for the pool of lanes (tests/clusters/main.rs).
pub fn group() -> common::Group {
    const SCENARIOS: &[common::Scenario] = &[
        (
            "a_follower_killed_on_its_newleader_line_is_recorded_and_the_run_is_valid",
            a_follower_killed_on_its_newleader_line_is_recorded_and_the_run_is_valid,
        ),
        (
            "a_follower_cut_off_on_its_newleader_line_drops_its_peers_until_healed",
            a_follower_cut_off_on_its_newleader_line_drops_its_peers_until_healed,
        ),
        (
            "a_follower_losing_power_on_its_newleader_line_records_what_it_lost",
            a_follower_losing_power_on_its_newleader_line_records_what_it_lost,
        ),
        (
            "heal_after_a_controller_sigkill_disarms_the_agent",
            heal_after_a_controller_sigkill_disarms_the_agent,
        ),
        (
            "heal_after_a_controller_sigkill_removes_a_fired_drop_and_armed_agents",
            heal_after_a_controller_sigkill_removes_a_fired_drop_and_armed_agents,
        ),
    ];
    common::Group {
        name: "triggers",
        scenarios: SCENARIOS,
        after_each: common::nothing,
        prepare: None,
    }
}
