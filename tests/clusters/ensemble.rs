//! Integration tests of the local cluster itself and of one ZooKeeper ensemble's faults, driven
//! only through the `stampede` binary (so only through SSH): the ensemble forms with one
//! leader; isolating the leader elects another; a killed follower restarts and rejoins; a
//! paused leader resumes; SIGINT mid-partition heals; `heal` restarts a server killed behind
//! our back; bad input gets one-line errors; a release tarball installs and serves; `cluster
//! up` is idempotent and repairs a killed sshd.
//!
//! Scenarios of the pooled target (tests/clusters/main.rs): each runs on a 3-node local cluster
//! of a lane's, made at the start and always removed at the end; a lane's cluster has no
//! database when a scenario starts, so each that needs an ensemble sets up its own
//! ([`ready`]), and the group's `after_each` checks that no fault is left and tears it down.
//! Needs root on Linux.

use crate::common;

use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use common::{our_servers, TestCluster};

/// Starts `nemesis run --kind KIND --target TARGET --duration DURATION` in the background.
fn start_fault(c: &TestCluster, kind: &str, target: &str, duration: &str) -> Child {
    let args = ["nemesis", "run", "--kind", kind, "--target", target];
    c.command(&args)
        .args(["--duration", duration])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run stampede")
}

/// Each node's mode as `db status` reports it: ("n1", "leader"), …
fn modes(c: &TestCluster) -> Vec<(String, String)> {
    let out = c.stampede(&["db", "status"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next()?.to_string();
            let _address = words.next()?;
            Some((name, words.collect::<Vec<_>>().join(" ")))
        })
        .collect()
}

fn leaders(c: &TestCluster) -> Vec<String> {
    modes(c)
        .into_iter()
        .filter(|(_, m)| m == "leader")
        .map(|(n, _)| n)
        .collect()
}

fn wait_for(c: &TestCluster, what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    panic!(
        "timed out after {limit:?} waiting until {what}; modes now: {:?}",
        modes(c)
    );
}

fn healthy_ensemble(c: &TestCluster) -> bool {
    let m = modes(c);
    m.len() == 3
        && m.iter().filter(|(_, s)| s == "leader").count() == 1
        && m.iter().all(|(_, s)| s == "leader" || s == "follower")
}

/// Sets up the lane's ensemble (it has none when a scenario starts) and waits, at most 30 s,
/// until it is healthy: one leader, two followers.
fn ready(c: &TestCluster) {
    c.stampede_ok(&["db", "setup"]);
    wait_for(
        c,
        "the ensemble has one leader",
        Duration::from_secs(30),
        || healthy_ensemble(c),
    );
    let m = modes(c);
    assert_eq!(
        m.iter().filter(|(_, s)| s == "follower").count(),
        2,
        "{m:?}"
    );
}

/// The iptables rules on each node, read over SSH: `nI: COUNT` lines.
fn rules_on_nodes(c: &TestCluster) -> String {
    c.stampede_ok(&["exec", "--", "iptables -S | grep -c -- '^-A' || true"])
}

/// The server folders of the cluster's nodes that exist.
fn server_homes(c: &TestCluster) -> Vec<String> {
    common::node_paths(c, "/var/lib/stampede/db", "")
}

/// After each scenario: asserts that nothing a fault does is left (no partition rule, checked
/// on every node over SSH; when an ensemble was set up, no paused server and exactly one
/// server per node, each its pid file's), then tears the ensemble down and checks that the
/// lane is as the next scenario expects it: no server, no server folder, no run lock.
fn nothing_left_then_teardown(c: &TestCluster) {
    let rules = rules_on_nodes(c);
    for line in rules.lines() {
        assert!(line.ends_with(": 0"), "iptables rules left behind: {rules}");
    }
    // Only a scenario that needs no ensemble leaves neither a server nor a server folder.
    if !our_servers(c).is_empty() || !server_homes(c).is_empty() {
        assert_one_running_server_per_node(c);
        c.stampede_ok(&["db", "teardown"]);
    }
    assert!(our_servers(c).is_empty(), "servers left after the teardown");
    assert!(
        server_homes(c).is_empty(),
        "server folders left: {:?}",
        server_homes(c)
    );
    let locks = common::node_paths(c, "/var/lib/stampede/locks", ".lock");
    assert!(locks.is_empty(), "run locks left: {locks:?}");
}

/// Exactly one server per node, none paused, each the one its pid file names.
fn assert_one_running_server_per_node(c: &TestCluster) {
    let pids: Vec<String> = our_servers(c).iter().map(u32::to_string).collect();
    assert_eq!(
        pids.len(),
        3,
        "expected exactly one server per node, found pids {pids:?}"
    );
    for pid in &pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(") ")
            .map(|(_, rest)| rest.chars().next())
            .unwrap_or(None);
        assert_ne!(state, Some('T'), "server {pid} is left paused");
    }
    for i in 1..=3 {
        let pidfile = format!("/var/lib/stampede/db/{}{i}/server.pid", c.net());
        let pid = std::fs::read_to_string(&pidfile).unwrap_or_default();
        assert!(
            pids.contains(&pid.trim().to_string()),
            "{pidfile} names {pid:?}, not a running server of ours"
        );
    }
}

fn ensemble_forms_with_one_leader(c: &TestCluster) {
    ready(c);
}

/// Sets up the ensemble, starts a `kind` fault on its leader for `duration`, and waits (at most
/// `limit`) until another node leads and the old leader stops serving; returns the old leader
/// and the running fault.
fn fault_the_leader(
    c: &TestCluster,
    kind: &str,
    duration: &str,
    limit: Duration,
) -> (String, Child) {
    ready(c);
    let old = leaders(c).pop().expect("a leader");
    let fault = start_fault(c, kind, "leader", duration);
    wait_for(
        c,
        &format!("another node leads and the old leader under {kind} stops serving"),
        limit,
        || {
            let m = modes(c);
            let new_leader = m.iter().any(|(n, s)| s == "leader" && n != &old);
            let old_down = m.iter().any(|(n, s)| n == &old && s == "not serving");
            new_leader && old_down
        },
    );
    (old, fault)
}

fn isolating_the_leader_elects_another(c: &TestCluster) {
    let (old, mut fault) = fault_the_leader(c, "partition", "25s", Duration::from_secs(25));
    let status = fault.wait().unwrap();
    assert!(
        status.success(),
        "nemesis run failed: {:?}",
        fault.stderr.take().map(std::io::read_to_string)
    );
    wait_for(
        c,
        "the old leader rejoins as a follower",
        Duration::from_secs(30),
        || healthy_ensemble(c) && modes(c).iter().any(|(n, s)| n == &old && s == "follower"),
    );
}

fn killed_follower_restarts_and_rejoins(c: &TestCluster) {
    ready(c);
    let follower = modes(c)
        .into_iter()
        .find(|(_, s)| s == "follower")
        .expect("a follower")
        .0;
    let mut fault = start_fault(c, "kill", &follower, "6s");
    wait_for(
        c,
        "the killed follower stops serving",
        Duration::from_secs(5),
        || {
            modes(c)
                .iter()
                .any(|(n, s)| n == &follower && s == "not serving")
        },
    );
    assert_eq!(
        our_servers(c).len(),
        2,
        "the killed server's process is gone"
    );
    assert!(fault.wait().unwrap().success());
    wait_for(c, "the follower rejoins", Duration::from_secs(30), || {
        healthy_ensemble(c)
            && modes(c)
                .iter()
                .any(|(n, s)| n == &follower && s == "follower")
    });
}

fn paused_leader_resumes(c: &TestCluster) {
    let (old, mut fault) = fault_the_leader(c, "pause", "15s", Duration::from_secs(15));
    assert!(fault.wait().unwrap().success());
    wait_for(
        c,
        "the old leader is back in the ensemble",
        Duration::from_secs(30),
        || {
            healthy_ensemble(c)
                && modes(c)
                    .iter()
                    .any(|(n, s)| n == &old && s != "not serving")
        },
    );
}

fn sigint_mid_partition_heals(c: &TestCluster) {
    ready(c);
    let mut fault = start_fault(c, "partition", "halves", "120s");
    wait_for(
        c,
        "the partition is in place",
        Duration::from_secs(15),
        || rules_on_nodes(c).lines().any(|l| !l.ends_with(": 0")),
    );
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(fault.id() as i32, libc::SIGINT) };
    let status = fault.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(2),
        "an interrupted nemesis run exits with 2"
    );
    let stdout = std::io::read_to_string(fault.stdout.take().unwrap()).unwrap();
    assert!(stdout.contains("interrupted by SIGINT; healed"), "{stdout}");
    // The heal came after every command of the start: no rule is left, nor appears later.
    for _ in 0..2 {
        let rules = rules_on_nodes(c);
        assert!(
            rules.lines().all(|l| l.ends_with(": 0")),
            "rules left after the heal: {rules}"
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    wait_for(c, "the ensemble heals", Duration::from_secs(30), || {
        healthy_ensemble(c)
    });
}

fn heal_restarts_a_server_killed_behind_our_back(c: &TestCluster) {
    ready(c);
    let victim = "n2";
    c.stampede_ok(&[
        "exec",
        "--node",
        victim,
        "--",
        &format!(
            "kill -9 $(cat /var/lib/stampede/db/{}2/server.pid)",
            c.net()
        ),
    ]);
    wait_for(c, "n2 is down", Duration::from_secs(10), || {
        modes(c)
            .iter()
            .any(|(n, s)| n == victim && s == "not serving")
    });
    c.stampede_ok(&["heal"]);
    wait_for(c, "heal restarted n2", Duration::from_secs(30), || {
        healthy_ensemble(c)
    });
}

/// Runs `args` and asserts a one-line error (exit 2) that contains `needle`.
fn assert_one_line_error(c: &TestCluster, args: &[&str], needle: &str) {
    let out: Output = c.stampede(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(out.status.code(), Some(2), "stampede {args:?}: {stderr}");
    assert_eq!(
        lines.len(),
        1,
        "one line expected from {args:?}, got: {stderr}"
    );
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains(needle),
        "{args:?}: {stderr}"
    );
}

/// Needs no ensemble: every command fails before it reaches a server (or, for the wrong key,
/// at the node's sshd).
fn bad_input_gets_one_line_errors(c: &TestCluster) {
    assert_one_line_error(
        c,
        &["heal", "--nodes", "root@127.0.0.1:1"],
        "cannot connect to 127.0.0.1:1",
    );
    assert_one_line_error(
        c,
        &["db", "setup", "--nodes", "127.0.0.1:1"],
        "on 127.0.0.1:",
    );
    let dir = c.work.join("bad-input");
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("other_key");
    let _ = std::fs::remove_file(&key);
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(made.success());
    let nodes = &format!("{}/nodes", c.state_dir());
    let known = &format!("{}/known_hosts", c.state_dir());
    let key = key.display().to_string();
    let out = c.stampede(&[
        "exec",
        "--nodes-file",
        nodes,
        "--ssh-key",
        &key,
        "--known-hosts",
        known,
        "--node",
        "n1",
        "--",
        "true",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("n1: error:") && stderr.contains("was refused for user root"),
        "{stderr}"
    );
    assert_eq!(out.status.code(), Some(1));
    assert_one_line_error(
        c,
        &["nemesis", "run", "--kind", "flood"],
        "unknown nemesis kind \"flood\"",
    );
    assert_one_line_error(
        c,
        &["nemesis", "run", "--kind", "kill", "--target", "n9"],
        "--target: unknown target \"n9\": not a node",
    );
    let bad = dir.join("nodes");
    std::fs::write(&bad, format!("n1 root@{0}1\nn2 root@{0}2:port\n", c.net())).unwrap();
    assert_one_line_error(
        c,
        &["db", "status", "--nodes-file", &bad.display().to_string()],
        "nodes:2: bad port",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An Apache-style release tarball (a top folder with `lib/*.jar`), made from the jars of
/// Debian's package since the test has no network: installs, forms an ensemble, tears down
/// (`after_each` then checks that nothing of it is left).
fn a_release_tarball_installs_and_serves(c: &TestCluster) {
    let dir = c.work.join("tarball");
    let lib = dir.join("apache-zookeeper-3.8.0-bin/lib");
    std::fs::create_dir_all(&lib).unwrap();
    for jar in [
        "zookeeper.jar",
        "zookeeper-jute.jar",
        "slf4j-api.jar",
        "slf4j-log4j12.jar",
        "log4j-1.2.jar",
    ] {
        std::fs::copy(format!("/usr/share/java/{jar}"), lib.join(jar)).unwrap();
    }
    let tarball = dir.join("apache-zookeeper-3.8.0-bin.tar.gz");
    let made = std::process::Command::new("tar")
        .arg("-czf")
        .arg(&tarball)
        .arg("-C")
        .arg(&dir)
        .arg("apache-zookeeper-3.8.0-bin")
        .status()
        .unwrap();
    assert!(made.success());
    let tarball = tarball.display().to_string();
    c.stampede_ok(&["db", "setup", "--zookeeper-tarball", &tarball]);
    assert!(healthy_ensemble(c), "{:?}", modes(c));
    let cmdlines = std::process::Command::new("pgrep")
        .args([
            "-af",
            &format!("QuorumPeerMain /var/lib/stampede/db/{}", c.net()),
        ])
        .output()
        .unwrap();
    let cmdlines = String::from_utf8_lossy(&cmdlines.stdout);
    assert_eq!(
        cmdlines.matches("/dist/lib/*").count(),
        3,
        "servers run from the tarball: {cmdlines}"
    );
    assert_one_running_server_per_node(c);
    c.stampede_ok(&["db", "teardown", "--zookeeper-tarball", &tarball]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// On a cluster in use: the ensemble set up first must come through the repair untouched
/// (`after_each` checks its servers and pid files).
fn cluster_up_is_idempotent_and_repairs(c: &TestCluster) {
    ready(c);
    let pid: u32 = std::fs::read_to_string(format!("{}/n3/sshd.pid", c.state_dir()))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: killing the test cluster's own sshd, found by its pid file.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    std::thread::sleep(Duration::from_millis(200));
    c.stampede_ok(&["cluster", "up", "--nodes", "3", "--subnet", c.subnet]);
    let status = c.stampede_ok(&["cluster", "status"]);
    assert_eq!(
        status.lines().filter(|l| l.contains(" up ")).count(),
        3,
        "{status}"
    );
    assert!(
        !status.contains(&format!("sshd pid {pid},")),
        "sshd was restarted: {status}"
    );
}

/// This file's scenarios, the longest first, for the pool of lanes (tests/clusters/main.rs).
/// Named `cluster`, as the scenarios were when they had a target of their own.
pub fn group() -> common::Group {
    const SCENARIOS: &[common::Scenario] = &[
        (
            "isolating_the_leader_elects_another",
            isolating_the_leader_elects_another,
        ),
        ("paused_leader_resumes", paused_leader_resumes),
        (
            "killed_follower_restarts_and_rejoins",
            killed_follower_restarts_and_rejoins,
        ),
        ("sigint_mid_partition_heals", sigint_mid_partition_heals),
        (
            "heal_restarts_a_server_killed_behind_our_back",
            heal_restarts_a_server_killed_behind_our_back,
        ),
        (
            "a_release_tarball_installs_and_serves",
            a_release_tarball_installs_and_serves,
        ),
        (
            "cluster_up_is_idempotent_and_repairs",
            cluster_up_is_idempotent_and_repairs,
        ),
        (
            "ensemble_forms_with_one_leader",
            ensemble_forms_with_one_leader,
        ),
        (
            "bad_input_gets_one_line_errors",
            bad_input_gets_one_line_errors,
        ),
    ];
    common::Group {
        name: "cluster",
        scenarios: SCENARIOS,
        after_each: nothing_left_then_teardown,
        prepare: None,
    }
}
