//! Integration tests of the membership-change nemesis (`kind: reconfig`) against a real
//! 3-node ZooKeeper ensemble and a 3-server keeperd ensemble on a local cluster: register and
//! set runs under removals (of the leader too, but for ZooKeeper's register run) and
//! voter→observer changes are judged, each change is seen in the recorded membership and the
//! planned membership is back at the end (asked of every server with `conf`); a package that
//! would leave fewer than a majority of the planned voters is refused before anything starts;
//! `heal` after a controller SIGKILL restores the membership, restarting a removed server that
//! had died.
//!
//! Scenarios of the pooled target (tests/clusters/main.rs): each runs on a 3-node local cluster
//! of a lane's, made at the start and always removed at the end. Needs root on Linux.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{keeperd_binary, text, TestCluster};
use serde_json::Value;

/// The membership lines (`server.N=…`) server `i` reports with the `conf` four-letter word.
fn membership(cluster: &TestCluster, i: usize) -> Vec<String> {
    let address = format!("{}{i}:2181", cluster.net());
    try_membership(&address).unwrap_or_else(|e| panic!("{address}: {e}"))
}

/// What server `address` answers to `conf`, its membership lines; an error when it does
/// not take the connection.
fn try_membership(address: &str) -> std::io::Result<Vec<String>> {
    let mut stream = TcpStream::connect(address)?;
    stream.write_all(b"conf")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer
        .lines()
        .filter(|l| l.starts_with("server."))
        .map(str::to_string)
        .collect())
}

/// The database arguments of the keeperd scenarios.
fn keeperd() -> Vec<String> {
    ["--db", "keeperd", "--keeperd-binary", &keeperd_binary()]
        .map(String::from)
        .to_vec()
}

/// `args` followed by the database arguments `db`.
fn with(args: &[&str], db: &[String]) -> Vec<String> {
    args.iter()
        .map(|a| a.to_string())
        .chain(db.iter().cloned())
        .collect()
}

/// Runs `stampede args… db…`, failing the test on an error.
fn stampede_ok(cluster: &TestCluster, args: &[&str], db: &[String]) -> String {
    let args = with(args, db);
    cluster.stampede_ok(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Asserts that every server reports the planned membership, three voting participants,
/// within 30 s: a server the heal just started takes a few seconds to serve and to sync.
fn assert_planned_membership(cluster: &TestCluster, db: &[String]) {
    let net = cluster.net();
    let planned: Vec<String> = (1..=3)
        .map(|i| format!("server.{i}={net}{i}:2888:3888:participant;{net}{i}:2181"))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    for i in 1..=3 {
        let address = format!("{net}{i}:2181");
        let reported = loop {
            let reported = try_membership(&address).map_err(|e| e.to_string());
            if reported.as_ref() == Ok(&planned) || Instant::now() > deadline {
                break reported;
            }
            std::thread::sleep(Duration::from_millis(250));
        };
        assert_eq!(reported, Ok(planned.clone()), "the membership n{i} reports");
    }
    let status = stampede_ok(cluster, &["db", "status"], db);
    assert!(
        !status.contains("observer") && !status.contains("not serving"),
        "every server votes and serves: {status}"
    );
}

/// Runs a `workload` test under the package `yaml`, keeping the database; returns the
/// verdict line and the nemesis operations of its history.
fn run(
    cluster: &TestCluster,
    name: &str,
    workload: &str,
    yaml: &str,
    db: &[String],
) -> (String, Vec<Value>) {
    let package = cluster.work.join(format!("{name}.yaml"));
    std::fs::write(&package, yaml).unwrap();
    let package = package.display().to_string();
    let args = with(
        &[
            "test",
            "--name",
            name,
            "--workload",
            workload,
            "--nemesis",
            &package,
            "--time-limit",
            "30s",
            "--set",
            "generator.nemesis_interval=2s",
            "--set",
            "generator.nemesis_duration=4s",
            "--keep-db",
        ],
        db,
    );
    let out = cluster.stampede(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let verdict = common::last_line(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a valid verdict: {}",
        text(&out)
    );
    let history = std::fs::read_to_string(cluster.results_dir(&out).join("history.jsonl")).unwrap();
    let nemesis = history
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|op| op["process"] == "nemesis")
        .collect();
    (verdict, nemesis)
}

/// The completed starts and stops of the reconfig fault.
fn changes<'a>(nemesis: &'a [Value], f: &str) -> Vec<&'a Value> {
    let completed = |op: &&Value| op["f"] == f && op["type"] != "invoke";
    nemesis.iter().filter(completed).collect()
}

/// Checks that each start changed the membership it records and each stop restored it.
fn assert_changes_recorded(nemesis: &[Value], actions: &[&str]) {
    let starts = changes(nemesis, "start-reconfig");
    for action in actions {
        assert!(
            starts.iter().any(|op| op["value"]["action"] == *action),
            "a {action} took place: {starts:?}"
        );
    }
    for start in &starts {
        let value = &start["value"];
        assert!(start["error"].is_null(), "the change took effect: {start}");
        assert_ne!(value["version_before"], value["version_after"], "{start}");
        let hit = value["nodes"][0].as_str().expect("a changed node");
        let voters = |key: &str| value[key].as_array().unwrap().len();
        assert_eq!((voters("voters_before"), voters("voters_after")), (3, 2));
        assert!(!value["voters_after"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == hit));
    }
    // The end of the run stops every fault once more: stops may outnumber starts, and a
    // stop after a stop has nothing to restore.
    let stops: Vec<&Value> = changes(nemesis, "stop-reconfig")
        .into_iter()
        .filter(|stop| stop["value"]["voters"].is_array())
        .collect();
    assert_eq!(stops.len(), starts.len(), "every change was undone");
    let planned = serde_json::json!(["n1", "n2", "n3"]);
    for stop in stops {
        assert_eq!(stop["value"]["voters"], planned, "{stop}");
    }
}

/// A register run under removals of `removed` (`leader` or `follower`) and demotions of a
/// follower, judged valid.
fn register_under_removal_and_demotion(cluster: &TestCluster, removed: &str, db: &[String]) {
    let yaml = format!(
        "faults:\n\
         \x20 - {{kind: reconfig, target: {removed}, reconfig: {{action: remove}}}}\n\
         \x20 - {{kind: reconfig, target: follower, reconfig: {{action: observer}}}}\n"
    );
    let (verdict, nemesis) = run(cluster, "register-reconfig", "register", &yaml, db);
    assert!(
        verdict.starts_with("verdict: valid under ") && verdict.contains("reconfig fault"),
        "{verdict}"
    );
    assert_changes_recorded(&nemesis, &["remove", "observer"]);
    assert_planned_membership(cluster, db);
    stampede_ok(cluster, &["db", "teardown"], db);
}

fn set_under_removal(cluster: &TestCluster, db: &[String]) {
    let yaml = "faults:\n  - {kind: reconfig, target: one}\n";
    let (verdict, nemesis) = run(cluster, "set-reconfig", "set", yaml, db);
    assert!(verdict.starts_with("verdict: valid under "), "{verdict}");
    assert_changes_recorded(&nemesis, &["remove"]);
    assert_planned_membership(cluster, db);
    stampede_ok(cluster, &["db", "teardown"], db);
}

/// Followers only: a removed ZooKeeper 3.8 leader goes on answering its sessions' sync and
/// reads from its old state while the new leader commits
/// (`docs/findings/2026-11-25-removed-leader-serves-stale-reads.md`), so a
/// register run that removes the leader is not always valid.
fn register_under_follower_removal_and_demotion_is_valid_and_restored(cluster: &TestCluster) {
    register_under_removal_and_demotion(cluster, "follower", &[]);
}

fn set_under_removal_is_valid_and_restored(cluster: &TestCluster) {
    set_under_removal(cluster, &[]);
}

/// keeperd's removed leader stops serving at once, so its removal is judged too.
fn keeperd_register_under_removal_and_demotion_is_valid_and_restored(cluster: &TestCluster) {
    register_under_removal_and_demotion(cluster, "leader", &keeperd());
}

fn keeperd_set_under_removal_is_valid_and_restored(cluster: &TestCluster) {
    set_under_removal(cluster, &keeperd());
}

fn packages_below_a_majority_are_refused(cluster: &TestCluster) {
    let refused = |name: &str, yaml: &str, extra: &[&str]| {
        let package = cluster.work.join(format!("{name}.yaml"));
        std::fs::write(&package, yaml).unwrap();
        let package = package.display().to_string();
        let results = cluster.work.join("refused").display().to_string();
        let mut args = vec!["test", "--nemesis", &package, "--results", &results];
        args.extend_from_slice(extra);
        let out = cluster.stampede(&args);
        assert!(!out.status.success(), "refused: {}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        stderr
    };
    let majority = refused(
        "majority",
        "faults:\n  - kind: reconfig\n    target: majority\n",
        &[],
    );
    assert!(
        majority.ends_with(
            "majority.yaml:3: faults[0].target: target majority takes 2 of 3 voters out; a \
             reconfig may take at most 1, leaving a majority of the planned voters"
        ),
        "{majority}"
    );
    let keeperd = refused(
        "keeperd",
        "faults:\n  - kind: reconfig\n    target: all\n",
        &["--db", "keeperd"],
    );
    assert!(
        keeperd.ends_with(
            "keeperd.yaml:3: faults[0].target: target all takes 3 of 3 voters out; a \
             reconfig may take at most 1, leaving a majority of the planned voters"
        ),
        "{keeperd}"
    );
    assert!(!cluster.work.join("refused").exists(), "no run was started");
    let status = text(&cluster.stampede(&["db", "status"]));
    let idle = status.matches("not serving").count();
    assert_eq!(idle, 3, "no server was started: {status}");
}

/// Kills the controller of a removal, kills the removed server too, and checks that `heal`
/// brings back the planned membership; the servers' files are under `home` on the nodes.
fn heal_after_a_controller_sigkill(cluster: &TestCluster, db: &[String], home: &str) {
    stampede_ok(cluster, &["db", "setup"], db);
    let args = "nemesis run --kind reconfig --target follower --duration 5m";
    let args = with(&args.split(' ').collect::<Vec<_>>(), db);
    let mut controller = cluster.command(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let mut controller = controller.stdout(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(controller.stdout.take().unwrap()).lines();
    let started = lines
        .next()
        .expect("the controller printed the start")
        .unwrap();
    let value: Value =
        serde_json::from_str(started.strip_prefix("start-reconfig: ").expect(&started)).unwrap();
    controller.kill().unwrap();
    controller.wait().unwrap();
    let removed = value["nodes"][0].as_str().unwrap().to_string();
    let i: usize = removed.trim_start_matches('n').parse().unwrap();
    assert_eq!(
        membership(cluster, 1 + i % 3).len(),
        2,
        "{removed} was removed: {value}"
    );
    // The removed server dies too: ZooKeeper will not restart it while its own configuration
    // leaves it out, so the heal must restore its configuration before starting it (keeperd
    // starts it as an observer, and the heal adds it back).
    let pid_file = format!("{home}/{}{i}/server.pid", cluster.net());
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    let began = Instant::now();
    stampede_ok(cluster, &["heal"], db);
    println!("heal restored the membership in {:?}", began.elapsed());
    assert_planned_membership(cluster, db);
    let marker = format!("/var/lib/stampede/reconfigured-{}{i}", cluster.net());
    assert!(!std::path::Path::new(&marker).exists(), "{marker} removed");
    assert!(began.elapsed() < Duration::from_secs(90));
    stampede_ok(cluster, &["db", "teardown"], db);
}

fn heal_after_a_controller_sigkill_restores_the_membership(cluster: &TestCluster) {
    heal_after_a_controller_sigkill(cluster, &[], "/var/lib/stampede/db");
}

fn keeperd_heal_after_a_controller_sigkill_restores_the_membership(cluster: &TestCluster) {
    heal_after_a_controller_sigkill(cluster, &keeperd(), "/var/lib/stampede/keeperd");
}

/// This file's scenarios, the longest first, for the pool of lanes (tests/clusters/main.rs).
pub fn group() -> common::Group {
    const SCENARIOS: &[common::Scenario] = &[
        (
            "packages_below_a_majority_are_refused",
            packages_below_a_majority_are_refused,
        ),
        (
            "register_under_follower_removal_and_demotion_is_valid_and_restored",
            register_under_follower_removal_and_demotion_is_valid_and_restored,
        ),
        (
            "set_under_removal_is_valid_and_restored",
            set_under_removal_is_valid_and_restored,
        ),
        (
            "keeperd_register_under_removal_and_demotion_is_valid_and_restored",
            keeperd_register_under_removal_and_demotion_is_valid_and_restored,
        ),
        (
            "keeperd_set_under_removal_is_valid_and_restored",
            keeperd_set_under_removal_is_valid_and_restored,
        ),
        (
            "keeperd_heal_after_a_controller_sigkill_restores_the_membership",
            keeperd_heal_after_a_controller_sigkill_restores_the_membership,
        ),
        (
            "heal_after_a_controller_sigkill_restores_the_membership",
            heal_after_a_controller_sigkill_restores_the_membership,
        ),
    ];
    common::Group {
        name: "reconfig",
        scenarios: SCENARIOS,
        after_each: common::nothing,
        prepare: None,
    }
}
