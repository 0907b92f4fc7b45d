//! Integration tests of the clock, packet and combined nemeses against real ZooKeeper on a
//! local cluster, through full `stampede test` runs: offsets measured over SSH show a bump on
//! the leader and a strobe on a follower and go back to zero, a packet delay raises client
//! latencies by about the delay, a one-way partition deafens its target alone, and a package
//! of every fault kind heals all of them.
//!
//! Scenarios of the pooled target (tests/clusters/main.rs): each runs on a 3-node local cluster
//! of a lane's, made at the start and always removed at the end. Needs root on Linux.

use crate::common;

use std::path::{Path, PathBuf};

use common::{text, TestCluster};
use serde_json::Value;

/// Runs a 25 s test under the shipped package `nemeses/<name>.yaml`, a fault every 2 s lasting
/// `duration`; returns its results folder and history.
fn run_shipped(cluster: &TestCluster, name: &str, duration: &str) -> (PathBuf, Vec<Value>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("nemeses/{name}.yaml"));
    let yaml = std::fs::read_to_string(path).unwrap();
    let duration = format!("generator.nemesis_duration={duration}");
    let args = [
        "--time-limit",
        "25s",
        "--set",
        "generator.nemesis_interval=2s",
        "--set",
        &duration,
    ];
    run_test(cluster, name, &yaml, &args)
}

/// Runs a test with the nemesis package `yaml` and returns its results folder and history.
fn run_test(
    cluster: &TestCluster,
    name: &str,
    yaml: &str,
    extra: &[&str],
) -> (PathBuf, Vec<Value>) {
    let nemesis = cluster.work.join(format!("{name}.yaml"));
    std::fs::write(&nemesis, yaml).unwrap();
    let nemesis = nemesis.display().to_string();
    let mut args = vec!["test", "--name", name, "--nemesis", nemesis.as_str()];
    args.extend_from_slice(extra);
    let out = cluster.stampede(&args);
    let last = common::last_line(&out);
    // Unknown only when a fault start did not take effect (a start racing an election), which
    // the verdict must then say.
    let judged = match out.status.code() {
        Some(0) => last.starts_with("verdict: valid under "),
        Some(1) => last.starts_with("verdict: INVALID under "),
        Some(2) => last.contains("fault starts did not take effect"),
        _ => false,
    };
    assert!(judged, "the run ended with a verdict: {}", text(&out));
    let dir = cluster.results_dir(&out);
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    (
        dir,
        history
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
    )
}

/// Completions of nemesis operations named `f`.
fn nemesis_completions<'a>(history: &'a [Value], f: &str) -> Vec<&'a Value> {
    history
        .iter()
        .filter(|op| op["process"] == "nemesis" && op["f"] == f && op["type"] != "invoke")
        .collect()
}

fn offset(op: &Value, node: &str) -> f64 {
    op["value"]["offsets_ms"][node]
        .as_f64()
        .unwrap_or_else(|| panic!("no offset of {node} in {op}"))
}

fn assert_no_fault_left(cluster: &TestCluster) {
    let out = cluster.stampede(
        &["exec", "--", "echo $(iptables -S | grep -c -- '^-A') $(iptables -t mangle -S | grep -c -- '^-A') $(pgrep --ns $$ --nslist net -fc '[a]gent-netem')"],
    );
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        assert!(
            line.ends_with(": 0 0 0"),
            "filter rules, mangle rules, packet agents left: {line}"
        );
    }
    for i in 1..=3 {
        let file = format!("/var/lib/stampede/db/{}{i}/faketime", cluster.net());
        if let Ok(text) = std::fs::read_to_string(&file) {
            assert_eq!(text.trim(), "+0.000", "{file}: the clock was reset");
        }
    }
}

fn clock_bump_and_strobe_are_measured_and_reset(cluster: &TestCluster) {
    let yaml = "faults:\n\
                \x20 - {kind: clock, target: leader, clock: {mode: bump, delta_ms: 3000}}\n\
                \x20 - {kind: clock, target: follower, clock: {mode: strobe, delta_ms: 1500, period: 6s}}\n";
    let args = [
        "--time-limit",
        "34s",
        "--set",
        "generator.nemesis_interval=2s",
        "--set",
        "generator.nemesis_duration=9s",
        "--keep-db",
    ];
    let (dir, history) = run_test(cluster, "clock", yaml, &args);
    let starts = nemesis_completions(&history, "start-clock");
    assert!(starts.len() >= 2, "both clock faults ran: {starts:?}");
    for (start, expected) in starts.iter().take(2).zip([3000.0, 1500.0]) {
        let hit = start["value"]["nodes"][0]
            .as_str()
            .expect("a targeted node")
            .to_string();
        for node in ["n1", "n2", "n3"] {
            let measured = offset(start, node);
            let want = if node == hit { expected } else { 0.0 };
            assert!(
                (measured - want).abs() < 300.0,
                "{node}: measured {measured} ms, expected about {want} ({start})"
            );
        }
    }
    // Each stop resets every clock; a strobe still running when the run ends is stopped
    // last, so the final measurement shows every clock back.
    let stops = nemesis_completions(&history, "stop-clock");
    let last = stops.last().expect("the clock faults were stopped");
    for node in ["n1", "n2", "n3"] {
        assert!(offset(last, node).abs() < 300.0, "{node} was reset: {last}");
    }
    let png = std::fs::metadata(dir.join("clock-skew.png")).expect("clock-skew.png was drawn");
    assert!(png.len() > 10_000);
    cluster.stampede_ok(&["db", "teardown"]);
}

/// Median latency in ms of ok client operations `f` invoked inside (`true`) or outside every
/// `[start, stop]` window of `kind`.
fn median_latency(history: &[Value], f: &str, kind: &str, inside: bool) -> f64 {
    let time = |op: &Value| op["time"].as_u64().unwrap();
    let starts: Vec<u64> = nemesis_completions(history, &format!("start-{kind}"))
        .iter()
        .map(|o| time(o))
        .collect();
    let stops: Vec<u64> = history
        .iter()
        .filter(|o| {
            o["process"] == "nemesis" && o["f"] == format!("stop-{kind}") && o["type"] == "invoke"
        })
        .map(time)
        .collect();
    let windows: Vec<(u64, u64)> = starts
        .iter()
        .map(|s| {
            (
                *s,
                stops.iter().copied().find(|t| t > s).unwrap_or(u64::MAX),
            )
        })
        .collect();
    let mut open = std::collections::HashMap::new();
    let mut latencies = Vec::new();
    for op in history
        .iter()
        .filter(|o| o["process"] != "nemesis" && o["f"] == f)
    {
        let process = op["process"].as_u64().unwrap();
        match op["type"].as_str().unwrap() {
            "invoke" => {
                open.insert(process, time(op));
            }
            "ok" => {
                let begun = open.remove(&process).unwrap();
                let during = windows.iter().any(|(s, e)| begun >= *s && time(op) <= *e);
                let clear = windows.iter().all(|(s, e)| time(op) < *s || begun > *e);
                if (inside && during) || (!inside && clear) {
                    latencies.push((time(op) - begun) as f64 / 1e6);
                }
            }
            _ => {
                open.remove(&process);
            }
        }
    }
    assert!(
        latencies.len() >= 10,
        "too few {f} ops {} the {kind} windows",
        if inside { "inside" } else { "outside" }
    );
    latencies.sort_by(f64::total_cmp);
    latencies[latencies.len() / 2]
}

/// A read without sync is one round trip to the client's own server, whose answer the fault
/// delays once: its latency rises by about the delay. A write crosses the ensemble several
/// times, each hop delayed.
fn packet_delay_raises_latency_by_about_the_delay(cluster: &TestCluster) {
    let yaml = "faults:\n  - {kind: packet, target: all, netem: {delay: 100ms, jitter: 0ms}}\n";
    let args = [
        "--time-limit",
        "30s",
        "--set",
        "generator.nemesis_interval=6s",
        "--set",
        "generator.nemesis_duration=12s",
        "--set",
        "register.sync_reads=false",
    ];
    let (_, history) = run_test(cluster, "packet", yaml, &args);
    let (clear, delayed) = (
        median_latency(&history, "read", "packet", false),
        median_latency(&history, "read", "packet", true),
    );
    let (write_clear, write_delayed) = (
        median_latency(&history, "write", "packet", false),
        median_latency(&history, "write", "packet", true),
    );
    println!("median read latency without delay {clear:.1} ms, with 100 ms delay {delayed:.1} ms");
    println!("median write latency without delay {write_clear:.1} ms, with 100 ms delay {write_delayed:.1} ms");
    assert!(
        (80.0..=200.0).contains(&(delayed - clear)),
        "a read rises by about the delay: {clear:.1} ms -> {delayed:.1} ms"
    );
    assert!(
        write_delayed - write_clear >= 100.0,
        "a write rises by at least the delay: {write_clear:.1} -> {write_delayed:.1} ms"
    );
}

fn every_fault_kind_in_one_test_is_healed(cluster: &TestCluster) {
    let yaml =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("nemeses/all.yaml"))
            .unwrap();
    let args = [
        "--time-limit",
        "60s",
        "--set",
        "generator.nemesis_interval=1s",
        "--set",
        "generator.nemesis_duration=3s",
    ];
    let (_, history) = run_test(cluster, "all", &yaml, &args);
    for kind in ["partition", "kill", "pause", "clock", "packet"] {
        let started = nemesis_completions(&history, &format!("start-{kind}"));
        let stopped = nemesis_completions(&history, &format!("stop-{kind}"));
        assert!(
            started.iter().any(|op| op["error"].is_null()),
            "{kind} was injected"
        );
        assert!(
            stopped.len() >= started.len(),
            "{kind} was healed each time"
        );
    }
}

/// `nemesis run` makes the leader drop what the two followers send, and nothing else: the
/// rules are on the leader alone, in INPUT, one per follower; the heal removes them; then a
/// whole test under `nemeses/one-way-partition.yaml` is judged and says it was exposed to
/// one-way partitions.
fn a_one_way_partition_deafens_its_target_alone_and_is_healed(cluster: &TestCluster) {
    cluster.stampede_ok(&["db", "setup"]);
    let args = [
        "nemesis",
        "run",
        "--kind",
        "one-way-partition",
        "--target",
        "leader",
        "--duration",
        "6s",
    ];
    let mut running = common::Running::start(cluster, &args);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let rules = loop {
        let rules = common::chain_drops(cluster, "STAMPEDE-1WAY");
        if rules.iter().any(|r| !r.is_empty()) {
            break rules;
        }
        if std::time::Instant::now() > deadline || running.child.try_wait().unwrap().is_some() {
            let (code, stdout, stderr) = running.finish(std::time::Duration::from_secs(60));
            panic!(
                "no one-way rules appeared: {code:?} {stdout}\n{}",
                stderr.join("\n")
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let (code, stdout, stderr) = running.finish(std::time::Duration::from_secs(120));
    assert_eq!(code, Some(0), "{stdout}\n{}", stderr.join("\n"));
    let start = stdout
        .lines()
        .find_map(|l| l.strip_prefix("start-one-way-partition: "))
        .unwrap_or_else(|| panic!("the start was printed: {stdout}"));
    let value: Value = serde_json::from_str(start).unwrap();
    let deaf = value["nodes"][0]
        .as_str()
        .expect("one node deafened")
        .to_string();
    let unheard = value["unheard"].as_array().expect("the unheard").len();
    assert_eq!(
        unheard, 2,
        "the leader stops hearing both followers: {value}"
    );
    for (i, node_rules) in rules.iter().enumerate() {
        let node = format!("n{}", i + 1);
        match node == deaf {
            true => assert_eq!(
                node_rules.len(),
                2,
                "{node} drops both followers: {rules:?}"
            ),
            false => assert!(node_rules.is_empty(), "{node} hears everyone: {rules:?}"),
        }
    }
    assert!(
        common::chain_drops(cluster, "STAMPEDE-1WAY")
            .iter()
            .all(Vec::is_empty),
        "the heal removed the rules"
    );
    cluster.stampede_ok(&["db", "teardown"]);
    let (dir, history) = run_shipped(cluster, "one-way-partition", "6s");
    let started = nemesis_completions(&history, "start-one-way-partition");
    assert!(
        started.iter().any(|op| op["error"].is_null()),
        "a one-way partition was injected: {started:?}"
    );
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let exposed = results["exposure"]["faults"].as_array().expect("exposure");
    assert!(
        exposed.iter().any(
            |f| f["kind"] == "one-way-partition" && f["took_effect"].as_u64().unwrap_or(0) >= 1
        ),
        "the run counts the one-way partitions that took effect: {exposed:?}"
    );
}

/// The shipped flapping package (the leader, then a follower, cut off and joined again every
/// second or two): each start cuts its target off, each stop counts several cuts and leaves no
/// rule, and the verdict names the flapping partitions.
fn a_flapping_partition_cuts_and_joins_again_and_is_healed(cluster: &TestCluster) {
    let (dir, history) = run_shipped(cluster, "flapping-partition", "7s");
    let started = nemesis_completions(&history, "start-flapping-partition");
    let cut: Vec<&Value> = started
        .iter()
        .copied()
        .filter(|op| op["error"].is_null())
        .collect();
    assert!(
        cut.len() >= 2,
        "the leader and a follower were cut off: {started:?}"
    );
    for op in &cut {
        let nodes = op["value"]["nodes"].as_array().expect("nodes");
        assert_eq!(nodes.len(), 1, "one server cut off: {op}");
    }
    let stopped = nemesis_completions(&history, "stop-flapping-partition");
    let cuts: Vec<u64> = stopped
        .iter()
        .filter_map(|op| op["value"]["cuts"].as_u64())
        .collect();
    assert!(
        cuts.len() >= 2 && cuts.iter().all(|n| *n >= 2),
        "each fault cut its link several times in 7 s: {stopped:?}"
    );
    assert!(
        common::chain_drops(cluster, "STAMPEDE-FLAP")
            .iter()
            .all(Vec::is_empty),
        "the heal removed the rules"
    );
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let line = results["verdict_line"].as_str().unwrap_or_default();
    assert!(line.contains("flapping partition"), "{line}");
}

/// This file's scenarios, the longest first, for the pool of lanes (tests/clusters/main.rs).
pub fn group() -> common::Group {
    const SCENARIOS: &[common::Scenario] = &[
        (
            "every_fault_kind_in_one_test_is_healed",
            every_fault_kind_in_one_test_is_healed,
        ),
        (
            "clock_bump_and_strobe_are_measured_and_reset",
            clock_bump_and_strobe_are_measured_and_reset,
        ),
        (
            "a_one_way_partition_deafens_its_target_alone_and_is_healed",
            a_one_way_partition_deafens_its_target_alone_and_is_healed,
        ),
        (
            "packet_delay_raises_latency_by_about_the_delay",
            packet_delay_raises_latency_by_about_the_delay,
        ),
        (
            "a_flapping_partition_cuts_and_joins_again_and_is_healed",
            a_flapping_partition_cuts_and_joins_again_and_is_healed,
        ),
    ];
    common::Group {
        name: "faults",
        scenarios: SCENARIOS,
        after_each: assert_no_fault_left,
        prepare: None,
    }
}
