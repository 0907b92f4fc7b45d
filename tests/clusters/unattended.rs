//! Integration tests of unattended use on a local cluster of network namespaces: no run poisons
//! the next. A node that does not answer stops a run before anything starts; a run stopped by
//! SIGINT during an install leaves nothing behind (SIGINT during setup and mid-fault are shown
//! on the fakes, `src/cli/test/fakes.rs`); after a controller SIGKILLed
//! mid-partition or mid-pause, a plain `stampede test` clears what it left, says so, and is
//! valid; a second run on a cluster in use is refused at once, naming the holder; and a second
//! cluster on a used subnet is refused. Each scenario ends with a normal run that must be
//! valid.
//!
//! Scenarios of the pooled target (tests/clusters/main.rs): each runs on a 3-node local cluster
//! of a lane's, made at the start and always removed at the end. Needs root on Linux.

use crate::common;

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{our_servers, partition_rules, text, Running, TestCluster};

/// Whether process `pid` is stopped (SIGSTOP).
fn is_stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('T'))
        })
        .unwrap_or(false)
}

/// The run lock files of this cluster's nodes.
fn lock_files(cluster: &TestCluster) -> Vec<String> {
    common::node_paths(cluster, "/var/lib/stampede/locks", ".lock")
}

/// Checks that nothing of a run is left on the cluster: no server, no lock, no rules, no
/// server directory.
fn assert_clean(cluster: &TestCluster) {
    assert!(our_servers(cluster).is_empty(), "servers left running");
    assert!(lock_files(cluster).is_empty(), "run locks left");
    assert_eq!(partition_rules(cluster), 0, "partition rules left");
    for i in 1..=3 {
        let home = format!("/var/lib/stampede/db/{}{i}", cluster.net());
        assert!(!std::path::Path::new(&home).exists(), "{home} left");
    }
}

/// A short run under partitions that must be valid: what every scenario ends with.
fn a_normal_run_is_valid(cluster: &TestCluster) -> String {
    let started = Instant::now();
    let out = cluster.stampede(&[
        "test",
        "--time-limit",
        "6s",
        "--set",
        "generator.nemesis_interval=1s",
        "--set",
        "generator.nemesis_duration=2s",
    ]);
    common::assert_valid_or_known_defect(&out);
    assert!(
        started.elapsed() < Duration::from_secs(300),
        "the run took {:?}",
        started.elapsed()
    );
    assert_clean(cluster);
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// A nodes file naming the cluster's nodes and one more that nothing answers: refused before
/// anything starts (no server, no results folder), then a normal run is valid.
fn an_unreachable_node_stops_the_run_before_anything_starts(cluster: &TestCluster) {
    let state = cluster.state_dir();
    let nodes = std::fs::read_to_string(format!("{state}/nodes")).unwrap();
    let file = cluster.work.join("nodes-with-a-dead-one");
    std::fs::write(&file, format!("{nodes}n4 root@{}99:22\n", cluster.net())).unwrap();
    let started = Instant::now();
    let out = cluster.stampede(&[
        "test",
        "--nodes-file",
        &file.display().to_string(),
        "--ssh-key",
        &format!("{state}/id_ed25519"),
        "--known-hosts",
        &format!("{state}/known_hosts"),
        "--results",
        "dead-node-results",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let error = stderr.lines().last().unwrap_or_default();
    assert!(
        error.starts_with("error: ") && error.contains("n4"),
        "one line naming the node: {error}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert!(
        !cluster.work.join("dead-node-results").exists(),
        "no folder"
    );
    assert_clean(cluster);
    a_normal_run_is_valid(cluster);
}

/// A server on the controller's side of the bridge that sends an HTTP answer one byte per
/// 100 ms for about 8 s: an install from it lasts long enough to be interrupted. Returns its
/// URL and the count of downloads begun.
fn trickling_tarball(cluster: &TestCluster) -> (String, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind(format!("{}254:0", cluster.net())).unwrap();
    let port = listener.local_addr().unwrap().port();
    let begun = Arc::new(AtomicUsize::new(0));
    let count = begun.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let body = 80;
                let head = format!("HTTP/1.0 200 OK\r\nContent-Length: {body}\r\n\r\n");
                let _ = conn.write_all(head.as_bytes());
                for _ in 0..body {
                    std::thread::sleep(Duration::from_millis(100));
                    if conn.write_all(b"x").is_err() {
                        return;
                    }
                }
            });
        }
    });
    let url = format!(
        "http://{}254:{port}/apache-zookeeper-bin.tar.gz",
        cluster.net()
    );
    (url, begun)
}

/// SIGINT while ZooKeeper is being installed (a release tarball downloaded by the nodes):
/// the run waits for the commands it sent, removes what they left, and a normal run is valid.
fn sigint_during_install_leaves_nothing(cluster: &TestCluster) {
    let (url, downloads) = trickling_tarball(cluster);
    let mut run = Running::start(
        cluster,
        &["test", "--time-limit", "30s", "--zookeeper-tarball", &url],
    );
    // Every node is downloading: the install is under way.
    run.wait_until(Duration::from_secs(120), |_| {
        downloads.load(Ordering::SeqCst) >= 3
    });
    run.signal("INT");
    let (code, stdout, stderr) = run.finish(Duration::from_secs(90));
    assert_eq!(code, Some(2), "{stdout}{}", stderr.join("\n"));
    let verdict = stdout.lines().last().unwrap_or_default();
    assert!(
        verdict.contains("interrupted by SIGINT during setup")
            && verdict.contains("zookeeper removed from 3 nodes"),
        "{verdict}"
    );
    assert_clean(cluster);
    a_normal_run_is_valid(cluster);
}

/// The controller SIGKILLed while a partition is in force, then while a server is paused: a
/// plain `stampede test` (no `stampede heal` by hand) clears each, says what it removed, and
/// is valid.
fn a_controller_killed_mid_fault_is_cleared_by_the_next_run(cluster: &TestCluster) {
    for (nemesis, in_force, removed) in [
        ("partition", "partition rules", "partition rules"),
        ("pause", "paused server", "zookeeper server paused"),
    ] {
        let mut run = Running::start(
            cluster,
            &[
                "test",
                "--nemesis",
                nemesis,
                "--time-limit",
                "60s",
                "--set",
                "generator.nemesis_interval=1s",
                "--set",
                "generator.nemesis_duration=40s",
            ],
        );
        run.wait_until(Duration::from_secs(150), |_| match nemesis {
            "partition" => partition_rules(cluster) > 0,
            _ => our_servers(cluster).into_iter().any(is_stopped),
        });
        run.child.kill().unwrap(); // SIGKILL: no chance to heal
        run.child.wait().unwrap();
        assert!(!lock_files(cluster).is_empty(), "the dead run's locks stay");
        let stderr = a_normal_run_is_valid(cluster);
        let found = stderr
            .lines()
            .find(|l| l.starts_with("found what an earlier run left, and removed it: "))
            .unwrap_or_else(|| panic!("the {in_force} was not reported: {stderr}"));
        assert!(found.contains(removed), "{found}");
        assert!(
            stderr
                .lines()
                .any(|l| l.contains("which is gone, taken over on n1, n2, n3")),
            "the dead run's lock taken over: {stderr}"
        );
    }
}

/// `cluster up` on a subnet another cluster uses is refused, naming it, and makes nothing.
fn a_second_cluster_on_a_used_subnet_is_refused(cluster: &TestCluster) {
    let out = cluster.stampede(&[
        "cluster",
        "up",
        "--name",
        "stdupe",
        "--nodes",
        "1",
        "--subnet",
        cluster.subnet,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(
        error.contains(&format!("in use by cluster {}", cluster.name)),
        "{error}"
    );
    let bridge = std::process::Command::new("ip")
        .args(["link", "show", "stdupe-br"])
        .output()
        .unwrap();
    assert!(!bridge.status.success(), "no bridge made");
    assert!(!std::path::Path::new("/var/lib/stampede/clusters/stdupe").exists());
}

/// This file's scenarios, the longest first, for the pool of lanes (tests/clusters/main.rs).
pub fn group() -> common::Group {
    const SCENARIOS: &[common::Scenario] = &[
        (
            "a_controller_killed_mid_fault_is_cleared_by_the_next_run",
            a_controller_killed_mid_fault_is_cleared_by_the_next_run,
        ),
        (
            "sigint_during_install_leaves_nothing",
            sigint_during_install_leaves_nothing,
        ),
        (
            "an_unreachable_node_stops_the_run_before_anything_starts",
            an_unreachable_node_stops_the_run_before_anything_starts,
        ),
        (
            "a_second_cluster_on_a_used_subnet_is_refused",
            a_second_cluster_on_a_used_subnet_is_refused,
        ),
    ];
    common::Group {
        name: "unattended",
        scenarios: SCENARIOS,
        after_each: common::nothing,
        prepare: None,
    }
}
