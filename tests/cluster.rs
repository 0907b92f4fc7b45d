//! Integration tests against a real 3-node ZooKeeper ensemble on a local cluster of network
//! namespaces, driven only through the `stampede` binary (so only through SSH).
//!
//! A custom harness (`harness = false`): the cluster is made once, the scenarios run in order
//! against it, every scenario is followed by a check that no fault is left behind, and the
//! cluster is always removed at the end. Needs root on Linux.

mod common;

use std::process::{Child, Output, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use common::TestCluster;

static TEST: LazyLock<TestCluster> = LazyLock::new(|| TestCluster::new("sttest", "10.241.9.0/24"));

fn stampede(args: &[&str]) -> Output {
    TEST.stampede(args)
}

fn stampede_ok(args: &[&str]) -> String {
    TEST.stampede_ok(args)
}

fn spawn(args: &[&str]) -> Child {
    TEST.command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run stampede")
}

/// Each node's mode as `db status` reports it: ("n1", "leader"), …
fn modes() -> Vec<(String, String)> {
    let out = stampede(&["db", "status"]);
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

fn leaders() -> Vec<String> {
    modes()
        .into_iter()
        .filter(|(_, m)| m == "leader")
        .map(|(n, _)| n)
        .collect()
}

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    panic!(
        "timed out after {limit:?} waiting until {what}; modes now: {:?}",
        modes()
    );
}

fn healthy_ensemble() -> bool {
    let m = modes();
    m.len() == 3
        && m.iter().filter(|(_, s)| s == "leader").count() == 1
        && m.iter().all(|(_, s)| s == "leader" || s == "follower")
}

/// Asserts that nothing a fault does is left: no partition rule (checked on every node over
/// SSH), no paused server, and exactly one server per node.
fn assert_nothing_left(_: &TestCluster) {
    let rules = stampede_ok(&["exec", "--", "iptables -S | grep -c -- '^-A' || true"]);
    for line in rules.lines() {
        assert!(line.ends_with(": 0"), "iptables rules left behind: {rules}");
    }
    let pattern = format!("QuorumPeerMain /var/lib/stampede/db/{}", TEST.net());
    let pids = std::process::Command::new("pgrep")
        .args(["-f", &pattern])
        .output()
        .unwrap();
    let pids: Vec<String> = String::from_utf8_lossy(&pids.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect();
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
        let pidfile = format!("/var/lib/stampede/db/{}{i}/server.pid", TEST.net());
        let pid = std::fs::read_to_string(&pidfile).unwrap_or_default();
        assert!(
            pids.contains(&pid.trim().to_string()),
            "{pidfile} names {pid:?}, not a running server of ours"
        );
    }
}

fn ensemble_forms_with_one_leader(_: &TestCluster) {
    wait_for(
        "the ensemble has one leader",
        Duration::from_secs(30),
        healthy_ensemble,
    );
    let m = modes();
    assert_eq!(
        m.iter().filter(|(_, s)| s == "follower").count(),
        2,
        "{m:?}"
    );
}

fn isolating_the_leader_elects_another(_: &TestCluster) {
    let old = leaders().pop().expect("a leader");
    let mut fault = spawn(&[
        "nemesis",
        "run",
        "--kind",
        "partition",
        "--target",
        "leader",
        "--duration",
        "25s",
    ]);
    wait_for(
        "the majority elects a new leader and the old one stops serving",
        Duration::from_secs(25),
        || {
            let m = modes();
            let new_leader = m.iter().any(|(n, s)| s == "leader" && n != &old);
            let old_down = m.iter().any(|(n, s)| n == &old && s == "not serving");
            new_leader && old_down
        },
    );
    let status = fault.wait().unwrap();
    assert!(
        status.success(),
        "nemesis run failed: {:?}",
        fault.stderr.take().map(std::io::read_to_string)
    );
    wait_for(
        "the old leader rejoins as a follower",
        Duration::from_secs(30),
        || healthy_ensemble() && modes().iter().any(|(n, s)| n == &old && s == "follower"),
    );
}

fn killed_follower_restarts_and_rejoins(_: &TestCluster) {
    let follower = modes()
        .into_iter()
        .find(|(_, s)| s == "follower")
        .expect("a follower")
        .0;
    let mut fault = spawn(&[
        "nemesis",
        "run",
        "--kind",
        "kill",
        "--target",
        &follower,
        "--duration",
        "6s",
    ]);
    wait_for(
        "the killed follower stops serving",
        Duration::from_secs(5),
        || {
            modes()
                .iter()
                .any(|(n, s)| n == &follower && s == "not serving")
        },
    );
    let servers = std::process::Command::new("pgrep")
        .args([
            "-f",
            &format!("QuorumPeerMain /var/lib/stampede/db/{}", TEST.net()),
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&servers.stdout).lines().count(),
        2,
        "the killed server's process is gone"
    );
    assert!(fault.wait().unwrap().success());
    wait_for("the follower rejoins", Duration::from_secs(30), || {
        healthy_ensemble()
            && modes()
                .iter()
                .any(|(n, s)| n == &follower && s == "follower")
    });
}

fn paused_leader_resumes(_: &TestCluster) {
    let old = leaders().pop().expect("a leader");
    let mut fault = spawn(&[
        "nemesis",
        "run",
        "--kind",
        "pause",
        "--target",
        "leader",
        "--duration",
        "15s",
    ]);
    wait_for(
        "the paused leader stops answering and another leads",
        Duration::from_secs(15),
        || {
            let m = modes();
            m.iter().any(|(n, s)| n == &old && s == "not serving")
                && m.iter().any(|(n, s)| n != &old && s == "leader")
        },
    );
    assert!(fault.wait().unwrap().success());
    wait_for(
        "the old leader is back in the ensemble",
        Duration::from_secs(30),
        || healthy_ensemble() && modes().iter().any(|(n, s)| n == &old && s != "not serving"),
    );
}

fn sigint_mid_partition_heals(_: &TestCluster) {
    let mut fault = spawn(&[
        "nemesis",
        "run",
        "--kind",
        "partition",
        "--target",
        "halves",
        "--duration",
        "120s",
    ]);
    wait_for("the partition is in place", Duration::from_secs(15), || {
        stampede_ok(&["exec", "--", "iptables -S | grep -c -- '^-A' || true"])
            .lines()
            .any(|l| !l.ends_with(": 0"))
    });
    // SAFETY: signalling our own child process.
    unsafe { libc_kill(fault.id() as i32, 2) };
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
        let rules = stampede_ok(&["exec", "--", "iptables -S | grep -c -- '^-A' || true"]);
        assert!(
            rules.lines().all(|l| l.ends_with(": 0")),
            "rules left after the heal: {rules}"
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    wait_for(
        "the ensemble heals",
        Duration::from_secs(30),
        healthy_ensemble,
    );
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, signal: i32) -> i32;
}

fn heal_restarts_a_server_killed_behind_our_back(_: &TestCluster) {
    let victim = "n2";
    stampede_ok(&[
        "exec",
        "--node",
        victim,
        "--",
        &format!(
            "kill -9 $(cat /var/lib/stampede/db/{}2/server.pid)",
            TEST.net()
        ),
    ]);
    wait_for("n2 is down", Duration::from_secs(10), || {
        modes()
            .iter()
            .any(|(n, s)| n == victim && s == "not serving")
    });
    stampede_ok(&["heal"]);
    wait_for(
        "heal restarted n2",
        Duration::from_secs(30),
        healthy_ensemble,
    );
}

/// Runs `args` and asserts a one-line error (exit 2) that contains `needle`.
fn assert_one_line_error(args: &[&str], needle: &str) {
    let out = stampede(args);
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

fn bad_input_gets_one_line_errors(_: &TestCluster) {
    assert_one_line_error(
        &["heal", "--nodes", "root@127.0.0.1:1"],
        "cannot connect to 127.0.0.1:1",
    );
    assert_one_line_error(&["db", "setup", "--nodes", "127.0.0.1:1"], "on 127.0.0.1:");
    let dir = std::env::temp_dir().join(format!("stampede-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("other_key");
    let _ = std::fs::remove_file(&key);
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(made.success());
    let nodes = &format!("{}/nodes", TEST.state_dir());
    let known = &format!("{}/known_hosts", TEST.state_dir());
    let key = key.display().to_string();
    let out = stampede(&[
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
        &["nemesis", "run", "--kind", "flood"],
        "unknown nemesis kind \"flood\"",
    );
    assert_one_line_error(
        &["nemesis", "run", "--kind", "kill", "--target", "n9"],
        "--target: unknown target \"n9\": not a node",
    );
    let bad = dir.join("nodes");
    std::fs::write(
        &bad,
        format!("n1 root@{0}1\nn2 root@{0}2:port\n", TEST.net()),
    )
    .unwrap();
    assert_one_line_error(
        &["db", "status", "--nodes-file", &bad.display().to_string()],
        "nodes:2: bad port",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An Apache-style release tarball (a top folder with `lib/*.jar`), made from the jars of
/// Debian's package since the test has no network: installs, forms an ensemble, tears down.
fn a_release_tarball_installs_and_serves(_: &TestCluster) {
    let dir = std::env::temp_dir().join(format!("stampede-tarball-{}", std::process::id()));
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
    stampede_ok(&["db", "teardown"]);
    stampede_ok(&["db", "setup", "--zookeeper-tarball", &tarball]);
    assert!(healthy_ensemble(), "{:?}", modes());
    let cmdlines = std::process::Command::new("pgrep")
        .args([
            "-af",
            &format!("QuorumPeerMain /var/lib/stampede/db/{}", TEST.net()),
        ])
        .output()
        .unwrap();
    let cmdlines = String::from_utf8_lossy(&cmdlines.stdout);
    assert_eq!(
        cmdlines.matches("/dist/lib/*").count(),
        3,
        "servers run from the tarball: {cmdlines}"
    );
    stampede_ok(&["db", "teardown", "--zookeeper-tarball", &tarball]);
    stampede_ok(&["db", "setup"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn cluster_up_is_idempotent_and_repairs(_: &TestCluster) {
    let pid: u32 = std::fs::read_to_string(format!("{}/n3/sshd.pid", TEST.state_dir()))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: killing the test cluster's own sshd, found by its pid file.
    unsafe { libc_kill(pid as i32, 9) };
    std::thread::sleep(Duration::from_millis(200));
    stampede_ok(&["cluster", "up", "--nodes", "3", "--subnet", TEST.subnet]);
    let status = stampede_ok(&["cluster", "status"]);
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

fn setup(_: &TestCluster) {
    stampede_ok(&["db", "setup"]);
}

fn main() {
    // One lane: the scenarios share the ensemble `setup` made and end with repairing it.
    const SCENARIOS: &[common::Scenario] = &[
        (
            "ensemble_forms_with_one_leader",
            ensemble_forms_with_one_leader,
        ),
        (
            "isolating_the_leader_elects_another",
            isolating_the_leader_elects_another,
        ),
        (
            "killed_follower_restarts_and_rejoins",
            killed_follower_restarts_and_rejoins,
        ),
        ("paused_leader_resumes", paused_leader_resumes),
        ("sigint_mid_partition_heals", sigint_mid_partition_heals),
        (
            "heal_restarts_a_server_killed_behind_our_back",
            heal_restarts_a_server_killed_behind_our_back,
        ),
        (
            "bad_input_gets_one_line_errors",
            bad_input_gets_one_line_errors,
        ),
        (
            "a_release_tarball_installs_and_serves",
            a_release_tarball_installs_and_serves,
        ),
        (
            "cluster_up_is_idempotent_and_repairs",
            cluster_up_is_idempotent_and_repairs,
        ),
    ];
    let group = common::Group {
        name: "cluster",
        scenarios: SCENARIOS,
        after_each: assert_nothing_left,
        prepare: None,
    };
    TEST.run(1, setup, &[group]);
}
