//! Integration tests of the recipes against a real 3-node ZooKeeper ensemble on a local
//! cluster, through `stampede test`: every recipe (locks, elections, queue, barrier) is safe
//! and live without faults; the sequential lock assuming loss stays safe and live through
//! partitions and kills; the herd effect shows in the clients' and the servers' own counts;
//! and isolating the current holder's node past its session timeout makes
//! `on_disconnect: keep` overlap (and the checker say so) while `assume-lost` stays safe; a
//! sweep over counts of contenders runs one test per count, all in the sweep's own process,
//! and draws them.
//!
//! Scenarios of the pooled target (tests/clusters/main.rs): each runs on a 3-node local cluster
//! of a lane's, made at the start and always removed at the end. Needs root on Linux.

use crate::common;

use common::{last_line, text, TestCluster};
use serde_json::Value;

/// Runs a recipe test and returns its exit code, verdict line, results.json and history.
fn recipe_test(
    cluster: &TestCluster,
    workload: &str,
    nemesis: &str,
    sets: &[&str],
) -> (Option<i32>, String, Value, String) {
    let mut args = vec!["test", "--workload", workload, "--nemesis", nemesis];
    for set in sets {
        args.extend_from_slice(&["--set", set]);
    }
    let out = cluster.stampede(&args);
    let dir = cluster.results_dir(&out);
    let results = std::fs::read_to_string(dir.join("results.json"))
        .unwrap_or_else(|e| panic!("no results.json ({e}): {}", text(&out)));
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    (
        out.status.code(),
        last_line(&out),
        serde_json::from_str(&results).unwrap(),
        history,
    )
}

/// The lock recipes not run by the other scenarios, and the queue, without faults.
fn every_lock_and_the_queue_are_safe_and_live_without_faults(cluster: &TestCluster) {
    recipes_are_safe_and_live_without_faults(cluster, &["lock-protected", "lock-crate", "queue"]);
}

/// Both election recipes and the barrier, without faults.
fn every_election_and_the_barrier_are_safe_and_live_without_faults(cluster: &TestCluster) {
    recipes_are_safe_and_live_without_faults(
        cluster,
        &["election-fair", "election-unfair", "barrier"],
    );
}

/// Each of `workloads` without faults: valid, and live where the checker judges liveness.
fn recipes_are_safe_and_live_without_faults(cluster: &TestCluster, workloads: &[&str]) {
    let sets = ["generator.time_limit=8s"];
    for &workload in workloads {
        let (code, verdict, results, _) = recipe_test(cluster, workload, "none", &sets);
        assert_eq!(code, Some(0), "{workload}: {verdict}");
        println!("{workload}: {verdict}");
        let run = &results["run"];
        match workload.split('-').next().unwrap() {
            "lock" => {
                assert!(run["acquired"].as_u64().unwrap() > 10, "{workload}: {run}");
                assert_eq!(
                    results["contention"]["valid"], true,
                    "{workload}: {results}"
                );
                assert_live(workload, &results);
            }
            "election" => {
                assert!(run["terms"].as_u64().unwrap() > 10, "{workload}: {run}");
                let contention = &results["contention"];
                assert_eq!(contention["valid"], true, "{workload}: {contention}");
                let per_change = run["server"]["notifications_per_release"].as_f64();
                assert!(per_change.unwrap() > 0.0, "{workload}: {run}");
                assert_live(workload, &results);
                if workload == "election-fair" {
                    assert_staggered_in_line_order(workload, &results);
                }
            }
            "queue" => {
                let queue = &results["queue"];
                assert!(queue["drained"].as_bool().unwrap(), "{workload}: {queue}");
                assert!(run["enqueued"].as_u64().unwrap() > 10, "{workload}: {run}");
                let contention = &results["contention"];
                assert_eq!(contention["valid"], true, "{workload}: {contention}");
                assert_positions_vary(workload, &results);
            }
            _ => {
                let barrier = &results["barrier"];
                let completed = barrier["rounds_completed"].as_u64().unwrap();
                assert!(completed > 2, "{workload}: {barrier}");
                assert_positions_vary(workload, &results);
            }
        }
    }
}

/// The shipped file staggers the processes: results.json reports more than one queue
/// position seen (the queue's dequeues racing none, some or all of the other consumers; the
/// barrier's arrivals first, in between and last in their rounds).
fn assert_positions_vary(workload: &str, results: &Value) {
    let contention = &results["contention"];
    println!("{workload}: positions seen {}", contention["positions"]);
    let positions = contention["positions"].as_object().unwrap();
    assert!(positions.len() > 1, "{workload}: {contention}");
}

/// The liveness checker judged the run and found no stall.
fn assert_live(workload: &str, results: &Value) {
    let liveness = &results["liveness"];
    assert_eq!(liveness["judged"], true, "{workload}: {liveness}");
    assert_eq!(
        liveness["stalls"].as_array().unwrap().len(),
        0,
        "{workload}: {liveness}"
    );
}

/// `lock-sequential` assuming loss, through partitions of the ensemble and kills of a
/// minority: no overlap, the lock model holds, and once healed the lock keeps changing hands.
fn lock_sequential_assuming_loss_survives_partitions_and_kills(cluster: &TestCluster) {
    let nemesis = cluster.work.join("partition-kill.yaml");
    std::fs::write(
        &nemesis,
        "faults:\n  - {kind: partition, target: halves}\n  - {kind: kill, target: minority}\n",
    )
    .unwrap();
    let nemesis = nemesis.display().to_string();
    let sets = [
        "lock.on_disconnect=assume-lost",
        "session.session_timeout=6s",
        "session.op_timeout=3s",
        "generator.time_limit=45s",
        "generator.nemesis_interval=3s",
        "generator.nemesis_duration=6s",
        "generator.quiet_period=15s",
    ];
    let (code, verdict, results, history) =
        recipe_test(cluster, "lock-sequential", &nemesis, &sets);
    println!("partitions and kills: {verdict}");
    assert_eq!(code, Some(0), "{verdict}");
    for fault in ["\"start-partition\"", "\"start-kill\""] {
        assert!(history.contains(fault), "{fault} happened");
    }
    assert_live("lock-sequential", &results);
    let run = &results["run"];
    assert!(run["acquired"].as_u64().unwrap() > 20, "{run}");
    assert_staggered_in_line_order("lock-sequential", &results);
}

/// The shipped files stagger the contenders: the run saw a free lock (an empty office), a
/// newcomer behind one other, and at least one longer queue, and the fair recipe granted (gave
/// office) in line order with no waiter starved.
fn assert_staggered_in_line_order(workload: &str, results: &Value) {
    let contention = &results["contention"];
    println!("{workload}: positions seen {}", contention["positions"]);
    assert_eq!(contention["valid"], true, "{workload}: {contention}");
    assert_eq!(contention["fair"], true, "{workload}: {contention}");
    let positions = contention["positions"].as_object().unwrap();
    assert!(
        positions.len() >= 3 && positions.contains_key("0") && positions.contains_key("1"),
        "{workload}: {contention}"
    );
}

fn twenty_contenders_show_the_herd_effect(cluster: &TestCluster) {
    // A steady herd: twenty contenders all waiting, not coming and going.
    let sets = [
        "generator.concurrency=20",
        "generator.time_limit=10s",
        "lock.contention.stagger=false",
    ];
    let mut per_release = Vec::new();
    for recipe in [
        "lock-sequential",
        "lock-sequential-herd",
        "lock-single-node",
    ] {
        let (code, verdict, results, _) = recipe_test(cluster, recipe, "none", &sets);
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

/// `stampede test --contenders 2,4`: one run per count, in the sweep's own process, each with
/// its count of contenders and judged valid, then the sweep's table of both and its plots.
fn a_sweep_runs_one_test_per_count_and_draws_them(cluster: &TestCluster) {
    let args = [
        "test",
        "--workload",
        "lock-sequential",
        "--nemesis",
        "none",
        "--contenders",
        "2,4",
        "--time-limit",
        "5s",
        // A folder of its own: the lane's cluster has run other scenarios' lock-sequential.
        "--results",
        "sweep",
    ];
    let out = cluster.stampede(&args);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    let sweep = cluster.work.join(
        last_line(&out)
            .strip_prefix("sweep: ")
            .unwrap_or_else(|| panic!("a sweep line last: {said}")),
    );
    for plot in ["herd.png", "recipes.png"] {
        let size = std::fs::metadata(sweep.join(plot)).map(|m| m.len());
        assert!(size.is_ok_and(|n| n > 1000), "{plot} drawn: {said}");
    }
    let table = std::fs::read_to_string(sweep.join("table.txt")).unwrap();
    let runs = cluster.work.join("sweep/lock-sequential-none");
    let mut counts: Vec<u64> = std::fs::read_dir(&runs)
        .unwrap()
        .map(|run| {
            let dir = run.unwrap().path();
            let results: Value =
                serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap())
                    .unwrap();
            assert_eq!(results["valid"], true, "{}: {results}", dir.display());
            let stamp = dir.file_name().unwrap().to_string_lossy().to_string();
            assert!(table.contains(&stamp), "{stamp} in the table:\n{table}");
            let config = std::fs::read_to_string(dir.join("test.yaml")).unwrap();
            let config: serde_yaml_ng::Value = serde_yaml_ng::from_str(&config).unwrap();
            config["workload"]["generator"]["concurrency"]
                .as_u64()
                .unwrap()
        })
        .collect();
    counts.sort();
    assert_eq!(counts, [2, 4], "one run per count: {said}");
}

/// The first holder keeps the lock for 24 s; 4 s in, its node is cut from the ensemble for
/// 22 s. Its server stops serving within syncLimit (5 s), so an `assume-lost` holder stops
/// then; the ensemble expires its session 10 s after last hearing of it (later when the cut
/// node was the leader and a new one must be elected first) and the next contender takes the
/// lock, while a `keep` holder, never told its session expired, still acts as the holder.
fn isolating_the_holder_catches_keep(cluster: &TestCluster) {
    let nemesis = holder_partition(cluster);
    // The overlap is a race the ensemble usually wins: the next contender is granted once the
    // leader expires the cut session, and the keep holder stops when its client declares the
    // session expired on its own (about a session timeout after losing its server). Seen 2 to
    // 9 s apart; when a loaded machine slows the ensemble's side past the client's, one run
    // shows no overlap, so the holder gets a second run to be caught in.
    let keep = || holder_test(cluster, &nemesis, "lock.on_disconnect=keep");
    let (mut code, mut verdict, mut results, _) = keep();
    if code == Some(0) {
        println!("keep, no overlap this time: {verdict}");
        (code, verdict, results, _) = keep();
    }
    assert_eq!(code, Some(1), "keep overlaps: {verdict}");
    let overlaps = results["lock"]["mutual_exclusion"]["overlaps"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!overlaps.is_empty(), "the overlap is reported: {results}");
    println!("keep: {verdict}");
}

/// The same cut as [`isolating_the_holder_catches_keep`]: an `assume-lost` holder stops
/// acting when its server stops serving, so the run stays safe.
fn isolating_the_holder_leaves_assume_lost_safe(cluster: &TestCluster) {
    let nemesis = holder_partition(cluster);
    let (code, verdict, _, _) = holder_test(cluster, &nemesis, "lock.on_disconnect=assume-lost");
    assert_eq!(code, Some(0), "assume-lost stays safe: {verdict}");
    println!("assume-lost: {verdict}");
}

/// A nemesis package cutting the lock holder's node off, written in the scratch folder.
fn holder_partition(cluster: &TestCluster) -> String {
    let nemesis = cluster.work.join("holder.yaml");
    std::fs::write(&nemesis, "faults:\n  - {kind: partition, target: holder}\n").unwrap();
    nemesis.display().to_string()
}

/// The sequential lock under `nemesis` with the disconnect `policy` (a `--set`): the first
/// holder keeps the lock for 24 s and is cut 4 s in for 22 s.
fn holder_test(
    cluster: &TestCluster,
    nemesis: &str,
    policy: &str,
) -> (Option<i32>, String, Value, String) {
    let sets = [
        policy,
        "lock.hold=24s",
        "lock.steps=24",
        "session.session_timeout=10s",
        "generator.concurrency=3",
        "generator.time_limit=28s",
        "generator.nemesis_interval=4s",
        "generator.nemesis_duration=22s",
        // The first holder must hold when the cut starts, 4 s in.
        "lock.contention.stagger=false",
    ];
    let run = || recipe_test(cluster, "lock-sequential", nemesis, &sets);
    let first = run();
    // Six lanes starting their ensembles at once have kept the first grant past the cut:
    // then the cut had nobody to aim at and the run is rightly unknown. Once more.
    if first.1.contains("no client holds the lock") {
        println!("nobody held the lock at the cut: {}", first.1);
        return run();
    }
    first
}

/// This file's scenarios, the longest first, for the pool of lanes (tests/clusters/main.rs).
pub fn group() -> common::Group {
    const SCENARIOS: &[common::Scenario] = &[
        (
            "isolating_the_holder_catches_keep",
            isolating_the_holder_catches_keep,
        ),
        (
            "twenty_contenders_show_the_herd_effect",
            twenty_contenders_show_the_herd_effect,
        ),
        (
            "every_lock_and_the_queue_are_safe_and_live_without_faults",
            every_lock_and_the_queue_are_safe_and_live_without_faults,
        ),
        (
            "every_election_and_the_barrier_are_safe_and_live_without_faults",
            every_election_and_the_barrier_are_safe_and_live_without_faults,
        ),
        (
            "lock_sequential_assuming_loss_survives_partitions_and_kills",
            lock_sequential_assuming_loss_survives_partitions_and_kills,
        ),
        (
            "isolating_the_holder_leaves_assume_lost_safe",
            isolating_the_holder_leaves_assume_lost_safe,
        ),
        (
            "a_sweep_runs_one_test_per_count_and_draws_them",
            a_sweep_runs_one_test_per_count_and_draws_them,
        ),
    ];
    common::Group {
        name: "recipes",
        scenarios: SCENARIOS,
        after_each: common::nothing,
        prepare: None,
    }
}
