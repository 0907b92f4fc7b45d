//! The queue recipe against a real ZooKeeper standalone server on loopback: without faults
//! every acknowledged value comes out exactly once and in order, and with the server killed
//! and restarted mid-run the history still checks, the uncertain outcomes classified.

use std::sync::Arc;

use super::check::{check_queue, QueueReport};
use super::contention::judge_dequeues;
use super::driver::QueueRunSummary;
use super::QueueConfig;
use crate::client::test_server::ZkServer;
use crate::client::{ClientOptions, NodeEndpoint};
use crate::history::{Op, OpType, Recorder};
use crate::nemesis::Nemesis;
use crate::workload::rounds::Contention;
use crate::workload::test_runs::{faulted, killable_server, ms, options, run_faulted};

/// Runs 2 producers and 3 consumers (their sessions opened as `options` says) for `secs`
/// seconds against `endpoint` under `nemeses` (every fault healed), then checks the history.
async fn run(
    run_id: &str,
    secs: u64,
    (queue, options): (QueueConfig, ClientOptions),
    endpoint: NodeEndpoint,
    nemeses: Vec<Arc<dyn Nemesis>>,
) -> (QueueRunSummary, QueueReport, Vec<Op>) {
    let generator = faulted(5, secs * 1000, 1500, 2000);
    let recorder = Arc::new(Recorder::in_memory());
    let running = |target| super::driver::run(&generator, &queue, options, target);
    let summary = run_faulted(run_id, vec![endpoint], nemeses, &recorder, running).await;
    let ops = recorder.ops();
    let report = check_queue(&ops).unwrap();
    (summary, report, ops)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_value_comes_out_once_and_in_order_without_faults() {
    let server = ZkServer::start();
    // Unstaggered: every slot keeps its process (the count of processes below relies on it).
    let cfg = QueueConfig {
        pause: ms(5),
        contention: Contention {
            stagger: false,
            ..Contention::default()
        },
        ..QueueConfig::default()
    };
    let cfg = (cfg, options(5000, 4000));
    let (summary, report, ops) = run("calm", 4, cfg, server.endpoint(), Vec::new()).await;
    eprintln!("calm: {summary:?}\n{report:?}");
    assert!(report.valid && report.drained, "{report:?}");
    assert!(
        report.enqueue_ok > 100,
        "only {} enqueued",
        report.enqueue_ok
    );
    assert_eq!(report.dequeue_ok, report.enqueue_ok, "{report:?}");
    assert_eq!(
        (report.enqueue_fail, report.enqueue_info),
        (0, 0),
        "{report:?}"
    );
    assert_eq!((report.dequeue_fail, report.dequeue_info), (0, 0));
    assert!(report.possibly_consumed.is_empty() && report.remaining.is_empty());
    // The checker and the driver agree, and the drain found the queue empty.
    assert_eq!(report.enqueue_ok, summary.enqueued);
    assert_eq!(report.dequeue_ok, summary.dequeued);
    assert_eq!(report.dequeue_empty, summary.dequeue_empty);
    assert!(summary.drain_emptied, "{summary:?}");
    assert_eq!((summary.producers, summary.consumers), (2, 3));
    assert_eq!(
        summary.processes,
        5 + 3,
        "one session per slot, and per drainer"
    );
    // Consumers outpace the producers: they waited on an empty queue and were woken.
    assert!(summary.herd.releases > 0, "{summary:?}");
    assert!(report.dequeue_empty >= 3, "every drainer ends empty");
    // The same history with the first value taken reported as the second: one value taken
    // twice, and one gone that nobody took.
    let mut forged = ops.clone();
    let taken: Vec<usize> = (0..forged.len())
        .filter(|&i| forged[i].f == "dequeue" && forged[i].kind == OpType::Ok)
        .collect();
    forged[taken[0]].value = forged[taken[1]].value.clone();
    let forged = check_queue(&forged).unwrap();
    assert!(!forged.valid);
    assert_eq!((forged.duplicated.len(), forged.lost.len()), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_loses_no_acknowledged_value() {
    let (_server, endpoint, kill) = killable_server().await;
    // Staggered: producers and consumers come and go while the server is killed.
    let cfg = QueueConfig {
        pause: ms(5),
        contention: Contention {
            join_within: ms(1000),
            leave_percent: 5,
            away: ms(200),
            ..Contention::default()
        },
        ..QueueConfig::default()
    };
    let cfg = (cfg, options(1000, 3000));
    let (summary, report, ops) = run("kill", 8, cfg, endpoint, vec![kill]).await;
    eprintln!("kill: {summary:?}\n{report:?}");
    let kills = ops.iter().filter(|o| o.f == "start-kill").count();
    assert!(kills >= 2, "the server was killed during the run ({kills})");
    assert!(report.valid, "{report:?}");
    assert!(report.drained && summary.drain_emptied, "{report:?}");
    assert!(report.lost.is_empty() && report.duplicated.is_empty());
    // The faults left uncertain outcomes, each classified: every acknowledged value came out
    // or is possibly consumed; every value out was put in, acknowledged or not.
    assert!(
        report.enqueue_info + report.dequeue_info > 0,
        "the kills cut some operations: {report:?}"
    );
    assert_eq!(
        report.enqueue_ok,
        report.dequeue_ok + report.possibly_consumed.len() as u64 - dequeued_unacknowledged(&ops),
        "{report:?}"
    );
    assert!(report.dequeue_ok > 100, "{report:?}");
    // The consumers dequeued alone, racing one other, and racing both others.
    let contention = judge_dequeues(&ops, 6);
    assert!(contention.valid, "never an anomaly");
    eprintln!("kill: {}", super::contention::line(&contention));
    let positions: Vec<usize> = contention.positions.keys().copied().collect();
    assert_eq!(positions, [0, 1, 2], "{contention:?}");
}

/// How many values came out (`ok`) whose enqueue was not acknowledged.
fn dequeued_unacknowledged(ops: &[Op]) -> u64 {
    let acked: std::collections::HashSet<u64> = ops
        .iter()
        .filter(|o| o.f == "enqueue" && o.kind == OpType::Ok)
        .filter_map(|o| o.value.as_u64())
        .collect();
    ops.iter()
        .filter(|o| o.f == "dequeue" && o.kind == OpType::Ok)
        .filter_map(|o| o.value.as_u64())
        .filter(|v| !acked.contains(v))
        .count() as u64
}
