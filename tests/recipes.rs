//! Integration tests of the lock recipes against a real 3-node ZooKeeper ensemble on a local
//! cluster, through `stampede test`: the herd effect shows in the clients' and the servers' own
//! counts, and isolating the current holder's node past its session timeout makes
//! `on_disconnect: keep` overlap (and the checker say so) while `assume-lost` stays safe.
//!
//! A custom harness (`harness = false`) on a cluster of its own. Needs root on Linux.

mod common;

use common::{last_line, text, TestCluster};
use serde_json::Value;

/// Runs a lock test and returns its exit code, verdict line and results.json.
fn lock_test(
    cluster: &TestCluster,
    workload: &str,
    nemesis: &str,
    sets: &[&str],
) -> (Option<i32>, String, Value) {
    let mut args = vec!["test", "--workload", workload, "--nemesis", nemesis];
    for set in sets {
        args.extend_from_slice(&["--set", set]);
    }
    let out = cluster.stampede(&args);
    let results = std::fs::read_to_string(cluster.results_dir(&out).join("results.json"))
        .unwrap_or_else(|e| panic!("no results.json ({e}): {}", text(&out)));
    (
        out.status.code(),
        last_line(&out),
        serde_json::from_str(&results).unwrap(),
    )
}

fn twenty_contenders_show_the_herd_effect(cluster: &TestCluster) {
    let sets = ["generator.concurrency=20", "generator.time_limit=10s"];
    let mut per_release = Vec::new();
    for recipe in [
        "lock-sequential",
        "lock-sequential-herd",
        "lock-single-node",
    ] {
        let (code, verdict, results) = lock_test(cluster, recipe, "none", &sets);
        assert_eq!(code, Some(0), "{recipe}: {verdict}");
        let run = &results["run"];
        let clients = run["herd"]["notifications_mean"].as_f64().unwrap();
        let servers = run["server"]["notifications_per_release"].as_f64().unwrap();
        assert!(
            run["herd"]["releases"].as_u64().unwrap() > 20,
            "{recipe}: enough releases: {run}"
        );
        println!(
            "{recipe}: notifications per release {clients:.1} (clients), {servers:.1} (servers)"
        );
        per_release.push((recipe, clients, servers));
    }
    let (_, base_clients, base_servers) = per_release[0];
    for (recipe, clients, servers) in &per_release[1..] {
        assert!(
            *clients >= 10.0 * base_clients,
            "{recipe}: {clients} vs {base_clients} (clients)"
        );
        assert!(
            *servers >= 10.0 * base_servers,
            "{recipe}: {servers} vs {base_servers} (servers)"
        );
    }
}

/// The first holder keeps the lock for 24 s; 2 s in, its node is cut from the ensemble for
/// 22 s. Its server stops serving within syncLimit (5 s), so an `assume-lost` holder stops
/// then; the ensemble expires its session 10 s after last hearing of it (later when the cut
/// node was the leader and a new one must be elected first) and the next contender takes the
/// lock, while a `keep` holder, never told its session expired, still acts as the holder.
fn isolating_the_holder_catches_keep_but_not_assume_lost(cluster: &TestCluster) {
    let nemesis = cluster.work.join("holder.yaml");
    std::fs::write(&nemesis, "faults:\n  - {kind: partition, target: holder}\n").unwrap();
    let nemesis = nemesis.display().to_string();
    let sets = |policy: &'static str| {
        [
            policy,
            "lock.hold=24s",
            "lock.steps=24",
            "lock.session_timeout=10s",
            "generator.concurrency=3",
            "generator.time_limit=28s",
            "generator.nemesis_interval=2s",
            "generator.nemesis_duration=22s",
        ]
    };
    let (code, verdict, results) = lock_test(
        cluster,
        "lock-sequential",
        &nemesis,
        &sets("lock.on_disconnect=keep"),
    );
    assert_eq!(code, Some(1), "keep overlaps: {verdict}");
    let overlaps = results["lock"]["mutual_exclusion"]["overlaps"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!overlaps.is_empty(), "the overlap is reported: {results}");
    println!("keep: {verdict}");
    let (code, verdict, _) = lock_test(
        cluster,
        "lock-sequential",
        &nemesis,
        &sets("lock.on_disconnect=assume-lost"),
    );
    assert_eq!(code, Some(0), "assume-lost stays safe: {verdict}");
    println!("assume-lost: {verdict}");
}

fn main() {
    let scenarios: &[common::Scenario] = &[
        (
            "twenty_contenders_show_the_herd_effect",
            twenty_contenders_show_the_herd_effect,
        ),
        (
            "isolating_the_holder_catches_keep_but_not_assume_lost",
            isolating_the_holder_catches_keep_but_not_assume_lost,
        ),
    ];
    TestCluster::new("strec", "10.241.14.0/24").run(
        3,
        common::nothing,
        scenarios,
        common::nothing,
        common::assert_cluster_gone,
    );
}
