//! Integration tests of `stampede test`, the main job, against real ZooKeeper on a local
//! cluster of network namespaces: a run under partitions and kills ends with a verdict, the
//! replicas' trees compared, and a complete results folder; a server that cannot be read after
//! the run leaves it unknown; `stampede check` agrees with the run; and a controller killed
//! with SIGKILL mid-test leaves a history that parses and can be judged (unknown: the run did
//! not finish), with `stampede heal` clearing the faults. Ephemerals live and die with their
//! sessions through partitions, kills and client-side cuts. A run is
//! never valid without the faults it claims: a mistyped package is refused before anything
//! starts, a run no fault reached or whose fault failed to start is unknown, and kills aimed
//! at a minority or the leader reach keeperd's one server.
//!
//! Scenarios of the pooled target (tests/clusters/main.rs): each runs on a 3-node local cluster
//! of a lane's, made at the start and always removed at the end. Needs root on Linux.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{keeperd_binary, last_line, our_servers, partition_rules, text, TestCluster};

fn a_register_run_with_partitions_and_kills_is_valid_and_complete(cluster: &TestCluster) {
    let work = &cluster.work;
    // Random halves cut apart, then the leader killed (restarted when the fault ends), in turn.
    let package = work.join("partition-kill.yaml");
    let faults =
        "faults:\n  - kind: partition\n    target: halves\n  - kind: kill\n    target: leader\n";
    std::fs::write(&package, faults).unwrap();
    let out = cluster.stampede(&[
        "test",
        "--nemesis",
        &package.display().to_string(),
        "--time-limit",
        "25s",
        "--set",
        "register.mix.read=0",
        "--set",
        "generator.nemesis_interval=3s",
        "--set",
        "generator.nemesis_duration=6s",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "expected a valid verdict: {}",
        text(&out)
    );
    let verdict = last_line(&out);
    assert!(verdict.starts_with("verdict: valid"), "{verdict}");
    let dir = cluster.results_dir(&out);
    for file in [
        "history.jsonl",
        "results.json",
        "test.yaml",
        "latency-raw.png",
        "latency-quantiles.png",
        "rate.png",
        "timeline.html",
    ] {
        let meta = std::fs::metadata(dir.join(file))
            .unwrap_or_else(|_| panic!("{file} missing in {}", dir.display()));
        assert!(meta.len() > 0, "{file} is empty");
    }
    for node in ["n1", "n2", "n3"] {
        let log = dir.join("nodes").join(node).join("zookeeper.log");
        assert!(
            std::fs::metadata(&log)
                .map(|m| m.len() > 0)
                .unwrap_or(false),
            "{} missing",
            log.display()
        );
    }
    let latest = std::fs::canonicalize(work.join("results/latest")).unwrap();
    assert_eq!(
        latest,
        std::fs::canonicalize(&dir).unwrap(),
        "results/latest points at the newest run"
    );
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let ops: Vec<serde_json::Value> = history
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for fault in ["start-partition", "start-kill"] {
        let hit = ops
            .iter()
            .any(|op| op["f"] == fault && op["type"] == "info" && op["error"].is_null());
        assert!(hit, "{fault} took effect");
    }
    assert!(
        ops.iter()
            .filter(|op| op["type"] == "ok" && op["f"] == "write")
            .count()
            > 20,
        "writes happened"
    );
    assert!(
        !ops.iter()
            .any(|op| op["f"] == "read" && op["type"] == "invoke" && !is_final(op, &ops)),
        "no reads but final reads"
    );
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["valid"], true);
    replicas_compared(&verdict, &results["replicas"]["compared"]);
    assert_eq!(partition_rules(cluster), 0, "no partition left behind");
    assert!(
        our_servers(cluster).is_empty(),
        "the database was torn down"
    );

    let check = cluster.stampede(&["check", &dir.display().to_string()]);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check));
    assert_eq!(last_line(&check), verdict, "check agrees with the run");
    every_reader_reads_the_run_back(cluster, &dir, &verdict, "register");
}

/// After a run, the three servers' trees were read without and after sync at one zxid, and
/// agree: the verdict line says so and `results.json` keeps what each server was read at.
fn replicas_compared(verdict: &str, compared: &serde_json::Value) {
    assert!(
        verdict.contains("; replicas: converged (3 servers agree on "),
        "{verdict}"
    );
    assert_eq!(compared["outcome"], "converged", "{compared}");
    let zxid = &compared["zxid"];
    assert!(zxid.as_i64().is_some_and(|z| z > 0), "{compared}");
    assert!(
        compared["znodes"].as_u64().is_some_and(|n| n >= 3),
        "the run's root, the register directory and its keys: {compared}"
    );
    let servers = compared["reading"]["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 3, "{compared}");
    for server in servers {
        for read in ["unsynced", "synced"] {
            assert_eq!(&server[read]["zxid"], zxid, "{server}");
        }
    }
    let modes: Vec<&str> = servers.iter().filter_map(|s| s["mode"].as_str()).collect();
    assert_eq!(
        modes.iter().filter(|m| **m == "leader").count(),
        1,
        "{modes:?}"
    );
    assert!(
        compared["reading"]["settled_ms"].as_u64().is_some(),
        "{compared}"
    );
}

/// Starts `stampede test --name NAME ARGS…` (output piped) and returns once the run began:
/// its own folder, `results/NAME/<time>/`, has a history of a few lines.
fn begun(cluster: &TestCluster, name: &str, args: &[&str]) -> std::process::Child {
    let mut all = vec!["test", "--name", name];
    all.extend_from_slice(args);
    let child = cluster
        .command(&all)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let runs = cluster.work.join("results").join(name);
    let began = || -> Option<()> {
        let run = std::fs::read_dir(&runs).ok()?.next()?.ok()?.path();
        let history = std::fs::read_to_string(run.join("history.jsonl")).ok()?;
        (history.lines().count() >= 5).then_some(())
    };
    let deadline = Instant::now() + Duration::from_secs(90);
    while began().is_none() {
        assert!(Instant::now() < deadline, "the run never began");
        std::thread::sleep(Duration::from_millis(200));
    }
    child
}

/// A server whose client port stops answering during the run cannot be read after it: the
/// replicas' comparison is unknown, naming it, and so is the run; `stampede check` agrees.
fn a_server_unreadable_after_the_run_leaves_it_unknown(cluster: &TestCluster) {
    let args = ["--nemesis", "none", "--time-limit", "8"];
    let child = begun(cluster, "unreadable-n3", &args);
    // n3's client port (and its four-letter words) dropped, its quorum ports untouched.
    let rule = "INPUT -p tcp --dport 2181 -j DROP";
    cluster.stampede_ok(&["exec", "--node", "n3", "--", &format!("iptables -I {rule}")]);
    let out = child.wait_with_output().unwrap();
    cluster.stampede_ok(&["exec", "--node", "n3", "--", &format!("iptables -D {rule}")]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let verdict = last_line(&out);
    assert!(
        verdict.starts_with("verdict: unknown under no faults;")
            && verdict.contains(
                "; replicas: UNKNOWN (not every server could be read within 30.0 s: n3: "
            ),
        "{verdict}"
    );
    let dir = cluster.results_dir(&out);
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["valid"], "unknown");
    let compared = &results["replicas"]["compared"];
    assert_eq!(compared["outcome"], "unknown", "{compared}");
    let servers = compared["reading"]["servers"].as_array().unwrap();
    assert!(servers[2]["error"].is_string() && servers[2]["synced"].is_null());
    assert!(servers[0]["synced"].is_object() && servers[1]["synced"].is_object());
    let check = cluster.stampede(&["check", &dir.display().to_string()]);
    assert_eq!(last_line(&check), verdict, "check agrees with the run");
    assert!(our_servers(cluster).is_empty(), "torn down");
}

/// The run folder `dir` of a valid run read back by every reader: `results.json` in the
/// current schema with the printed verdict line, `compare`'s row, and `serve`'s run page of
/// a `workload` run.
fn every_reader_reads_the_run_back(
    cluster: &TestCluster,
    dir: &std::path::Path,
    verdict: &str,
    workload: &str,
) {
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["schema"], 2);
    assert_eq!(results["verdict_line"], verdict);
    let plot = cluster.work.join("compare.png").display().to_string();
    let compare = cluster.stampede(&["compare", &dir.display().to_string(), "--plot", &plot]);
    assert_eq!(compare.status.code(), Some(0), "{}", text(&compare));
    let row = String::from_utf8_lossy(&compare.stdout)
        .lines()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    let stamp = dir.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        row.contains(&stamp) && row.contains(" valid ") && row.contains("partition"),
        "compare's row: {row}"
    );
    let results_root = dir.parent().unwrap().parent().unwrap();
    let rel = dir
        .strip_prefix(results_root)
        .unwrap()
        .display()
        .to_string();
    let page = common::serve_page(results_root, &format!("/run/{rel}"));
    assert!(
        page.contains("data-verdict=\"valid\"") && page.contains(&format!("workload {workload}")),
        "serve's run page: {page}"
    );
}

/// A nemesis package of partitions into halves and kills of a minority, written into the
/// cluster's scratch folder; its path.
fn partition_kill(cluster: &TestCluster) -> String {
    let package = cluster.work.join("partition-kill.yaml");
    std::fs::write(
        &package,
        "faults:\n  - {kind: partition, target: halves}\n  - {kind: kill, target: minority}\n",
    )
    .unwrap();
    package.display().to_string()
}

/// A 24 s run of `workload` (or workloads run together) under partitions of halves and kills
/// of a minority, a fault 3 s after the last healed, each lasting 4 s.
fn under_partitions_and_kills(cluster: &TestCluster, workload: &str) -> std::process::Output {
    let package = partition_kill(cluster);
    cluster.stampede(&[
        "test",
        "--workload",
        workload,
        "--nemesis",
        &package,
        "--time-limit",
        "24",
        "--set",
        "generator.nemesis_interval=3s",
        "--set",
        "generator.nemesis_duration=4s",
        "--set",
        "generator.quiet_period=3s",
        "--set",
        "session.op_timeout=3s",
    ])
}

/// The counter and set workloads through partitions and kills (see
/// [`workloads_stay_valid_through_partitions_and_kills`]).
fn counter_and_set_stay_valid_through_partitions_and_kills(cluster: &TestCluster) {
    workloads_stay_valid_through_partitions_and_kills(
        cluster,
        &[("counter", "adds_ok"), ("set", "adds_ok")],
    );
}

/// The unique-ids and bank workloads through partitions and kills, every reader showing the
/// bank run.
fn unique_ids_and_bank_stay_valid_through_partitions_and_kills(cluster: &TestCluster) {
    workloads_stay_valid_through_partitions_and_kills(
        cluster,
        &[("unique-ids", "generated"), ("bank", "transfers_ok")],
    );
}

/// Each (workload, its count of acknowledged operations) through partitions of the ensemble
/// and kills of a minority: each run valid, exposed to both, its checker's report in
/// `results.json` with enough acknowledged operations.
fn workloads_stay_valid_through_partitions_and_kills(
    cluster: &TestCluster,
    workloads: &[(&str, &str)],
) {
    for &(workload, acknowledged) in workloads {
        let out = under_partitions_and_kills(cluster, workload);
        let verdict = last_line(&out);
        println!("{workload}: {verdict}");
        common::assert_valid_or_known_defect(&out);
        let dir = cluster.results_dir(&out);
        let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
        for fault in ["\"start-partition\"", "\"start-kill\""] {
            assert!(history.contains(fault), "{workload}: {fault} happened");
        }
        let results: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
        let report = &results[workload];
        assert_eq!(report["valid"], true, "{workload}: {report}");
        assert!(
            report[acknowledged].as_u64().unwrap() > 100,
            "{workload}: {report}"
        );
        if workload == "bank" {
            every_reader_reads_the_run_back(cluster, &dir, &verdict, workload);
        }
    }
}

/// The register, the sequential lock and the queue run together through partitions of the
/// ensemble and kills of a minority: each judged valid in a run folder of its own whose
/// `test.yaml` names the other two, every fault recorded alike in the three histories (one
/// schedule, not three), the servers' logs in every folder.
fn workloads_run_together_share_one_schedule(cluster: &TestCluster) {
    let out = under_partitions_and_kills(cluster, "register,lock-sequential,queue");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let verdicts: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("verdict: "))
        .collect();
    assert_eq!(verdicts.len(), 3, "{stdout}");
    for verdict in &verdicts {
        assert!(verdict.starts_with("verdict: valid under "), "{verdict}");
    }
    let dirs: Vec<std::path::PathBuf> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("results: "))
        .map(|d| cluster.work.join(d))
        .collect();
    let names = [
        "register-partition-kill",
        "lock-sequential-partition-kill",
        "queue-partition-kill",
    ];
    let faults = |dir: &std::path::Path| -> Vec<serde_json::Value> {
        let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
        let ops = history
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap());
        let nemesis = ops.filter(|op| op["process"] == "nemesis");
        nemesis
            .map(|op| serde_json::json!([op["type"], op["f"], op["value"]]))
            .collect()
    };
    let recorded = faults(&dirs[0]);
    for fault in ["start-partition", "start-kill"] {
        assert!(recorded.iter().any(|op| op[1] == fault), "{fault} happened");
    }
    assert_eq!(dirs.len(), 3, "{stdout}");
    for (i, dir) in dirs.iter().enumerate() {
        assert!(
            dir.display().to_string().contains(names[i]),
            "{}",
            dir.display()
        );
        assert_eq!(faults(dir), recorded, "{}: the same faults", names[i]);
        let config = std::fs::read_to_string(dir.join("test.yaml")).unwrap();
        let others = names.iter().enumerate().filter(|(j, _)| *j != i);
        for (_, other) in others {
            assert!(
                config.contains(&format!("- {other}")),
                "{}: {config}",
                names[i]
            );
        }
        let logs = std::fs::read_dir(dir.join("nodes/n1")).map_or(0, |d| d.count());
        assert!(logs > 0, "{}: n1's logs", names[i]);
    }
}

/// The ephemeral workload through partitions of the ensemble and kills of a minority, every
/// third session cut off on the client's side until it expires: valid, every server read after
/// the settle, sessions closed, cut and told they expired, ephemerals polled from every server.
fn ephemerals_live_and_die_with_their_sessions_through_partitions_and_kills(cluster: &TestCluster) {
    let package = partition_kill(cluster);
    let out = cluster.stampede(&[
        "test",
        "--workload",
        "ephemeral",
        "--nemesis",
        &package,
        // 2 s, a partition for 3 s, 2 s, a kill: starts and heals take seconds on a busy
        // machine, and the kill must still start within the limit.
        "--time-limit",
        "14",
        "--set",
        "generator.nemesis_interval=2s",
        "--set",
        "generator.nemesis_duration=3s",
        "--set",
        "generator.quiet_period=2s",
        "--set",
        "session.op_timeout=3s",
        "--set",
        "session.session_timeout=4s",
        "--set",
        "ephemeral.hold=1s",
    ]);
    let verdict = last_line(&out);
    println!("ephemeral: {verdict}");
    common::assert_valid_or_known_defect(&out);
    let dir = cluster.results_dir(&out);
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    for fault in ["\"start-partition\"", "\"start-kill\""] {
        assert!(history.contains(fault), "{fault} happened");
    }
    assert!(
        history.contains("\"state\":\"expired\""),
        "a cut session was told it expired"
    );
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    let report = &results["ephemeral"];
    assert_eq!(report["valid"], true, "{report}");
    assert_eq!(report["settled"], true, "{report}");
    let count = |field: &str| report[field].as_u64().unwrap();
    assert!(count("closed") >= 5 && count("cut") >= 3, "{report}");
    assert!(count("created") >= 40 && count("polls") >= 30, "{report}");
}

/// Final reads are issued after the last nemesis operation.
fn is_final(op: &serde_json::Value, ops: &[serde_json::Value]) -> bool {
    let last_nemesis = ops
        .iter()
        .filter(|o| o["process"] == "nemesis")
        .map(|o| o["index"].as_u64().unwrap())
        .max()
        .unwrap_or(0);
    op["index"].as_u64().unwrap() > last_nemesis
}

fn a_killed_controller_leaves_a_checkable_history(cluster: &TestCluster) {
    let work = &cluster.work;
    let mut child = cluster
        .command(&[
            "test",
            "--nemesis",
            "partition",
            "--time-limit",
            "60s",
            "--set",
            "generator.nemesis_interval=2s",
            "--set",
            "generator.nemesis_duration=30s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    while partition_rules(cluster) == 0 {
        assert!(Instant::now() < deadline, "the partition never started");
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(2));
    child.kill().unwrap(); // SIGKILL: no chance to heal
    child.wait().unwrap();
    assert!(
        partition_rules(cluster) > 0,
        "SIGKILL left the partition in place, as expected"
    );
    let dir = std::fs::canonicalize(work.join("results/latest")).unwrap();
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    assert!(history.ends_with('\n'), "the last line is complete");
    let lines: Vec<&str> = history.lines().collect();
    assert!(
        lines.len() > 50,
        "operations were recorded before the kill: {}",
        lines.len()
    );
    for (i, line) in lines.iter().enumerate() {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("line {} does not parse: {e}", i + 1));
    }
    // Never healed, its replicas never compared: the run did not finish, so its history is
    // judged but the run is not called valid.
    let check = cluster.stampede(&["check", &dir.display().to_string()]);
    assert_eq!(check.status.code(), Some(2), "{}", text(&check));
    assert!(
        last_line(&check)
            .starts_with("verdict: unknown (the run did not finish: no results.json: "),
        "check judged the history: {}",
        text(&check)
    );
    cluster.stampede_ok(&["heal"]);
    assert_eq!(partition_rules(cluster), 0, "heal cleared the partition");
    cluster.stampede_ok(&["db", "teardown"]);
    assert!(our_servers(cluster).is_empty());
}

/// The watch workload through partitions of the ensemble and kills of a minority (~30 s):
/// valid, exposed to both, with events received and watches of every class judged, and no
/// anomaly counted in `results.json`.
fn watch_stays_valid_through_partitions_and_kills(cluster: &TestCluster) {
    let package = cluster.work.join("partition-kill.yaml");
    std::fs::write(
        &package,
        "faults:\n  - {kind: partition, target: halves}\n  - {kind: kill, target: minority}\n",
    )
    .unwrap();
    let out = cluster.stampede(&[
        "test",
        "--workload",
        "watch",
        "--nemesis",
        &package.display().to_string(),
        "--time-limit",
        "28",
        "--set",
        "generator.nemesis_interval=3s",
        "--set",
        "generator.nemesis_duration=4s",
        "--set",
        "generator.quiet_period=6s",
        "--set",
        "session.op_timeout=3s",
    ]);
    let verdict = last_line(&out);
    println!("watch: {verdict}");
    common::assert_valid_or_known_defect(&out);
    let dir = cluster.results_dir(&out);
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    for fault in ["\"start-partition\"", "\"start-kill\""] {
        assert!(history.contains(fault), "watch: {fault} happened");
    }
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    let report = &results["watch"];
    assert_eq!(report["by_class"], serde_json::json!({}), "{report}");
    assert!(report["events"].as_u64().unwrap() > 100, "{report}");
    assert!(report["judged"].as_u64().unwrap() > 10, "{report}");
    for class in ["data", "exist", "child", "persistent", "recursive"] {
        assert!(
            report["watches"][class].as_u64() > Some(0),
            "{class}: {report}"
        );
    }
    assert!(
        results["run"]["herd"]["notifications_mean"].as_f64() > Some(0.0),
        "{results}"
    );
}

/// The one keeperd server runs on n1 of the cluster: kills aimed at a minority or at the
/// leader resolve to it (a standalone server leads), and the verdict says so.
fn kills_reach_the_one_keeperd_server(cluster: &TestCluster) {
    let binary = keeperd_binary();
    // keeperd on n1 alone: a nodes file naming only n1 of the cluster (keeperd runs on every
    // node it is given, as an ensemble when there are several).
    let state = cluster.state_dir();
    let all = std::fs::read_to_string(format!("{state}/nodes")).unwrap();
    let n1: String = all
        .lines()
        .filter(|l| l.split_whitespace().next() == Some("n1"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(!n1.is_empty(), "no n1 in {all}");
    let nodes_file = cluster.work.join("n1-only");
    std::fs::write(&nodes_file, n1).unwrap();
    let out = cluster.stampede(&[
        "test",
        "--nodes-file",
        &nodes_file.display().to_string(),
        "--ssh-key",
        &format!("{state}/id_ed25519"),
        "--known-hosts",
        &format!("{state}/known_hosts"),
        "--db",
        "keeperd",
        "--keeperd-binary",
        &binary,
        "--nemesis",
        "kill",
        "--time-limit",
        "24",
        "--set",
        "generator.nemesis_interval=3s",
        "--set",
        "generator.nemesis_duration=3s",
        "--set",
        "generator.quiet_period=1s",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let verdict = last_line(&out);
    assert!(
        verdict.starts_with("verdict: valid under ")
            && verdict.contains(" (minority, ")
            && verdict.contains(" (leader, "),
        "{verdict}"
    );
    let dir = cluster.results_dir(&out);
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let starts: Vec<serde_json::Value> = history
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|op| op["f"] == "start-kill" && op["type"] != "invoke")
        .collect();
    assert!(starts.len() >= 2, "{starts:?}");
    for start in &starts {
        assert_eq!(
            start["value"]["nodes"],
            serde_json::json!(["n1"]),
            "{start}"
        );
        assert!(start["error"].is_null(), "{start}");
    }
}

/// This file's scenarios, the longest first, for the pool of lanes (tests/clusters/main.rs).
pub fn group() -> common::Group {
    const SCENARIOS: &[common::Scenario] = &[
        (
            "a_server_unreadable_after_the_run_leaves_it_unknown",
            a_server_unreadable_after_the_run_leaves_it_unknown,
        ),
        (
            "counter_and_set_stay_valid_through_partitions_and_kills",
            counter_and_set_stay_valid_through_partitions_and_kills,
        ),
        (
            "unique_ids_and_bank_stay_valid_through_partitions_and_kills",
            unique_ids_and_bank_stay_valid_through_partitions_and_kills,
        ),
        (
            "a_register_run_with_partitions_and_kills_is_valid_and_complete",
            a_register_run_with_partitions_and_kills_is_valid_and_complete,
        ),
        (
            "workloads_run_together_share_one_schedule",
            workloads_run_together_share_one_schedule,
        ),
        (
            "watch_stays_valid_through_partitions_and_kills",
            watch_stays_valid_through_partitions_and_kills,
        ),
        (
            "ephemerals_live_and_die_with_their_sessions_through_partitions_and_kills",
            ephemerals_live_and_die_with_their_sessions_through_partitions_and_kills,
        ),
        (
            "kills_reach_the_one_keeperd_server",
            kills_reach_the_one_keeperd_server,
        ),
        (
            "a_killed_controller_leaves_a_checkable_history",
            a_killed_controller_leaves_a_checkable_history,
        ),
    ];
    common::Group {
        name: "test_run",
        scenarios: SCENARIOS,
        after_each: common::nothing,
        prepare: None,
    }
}
