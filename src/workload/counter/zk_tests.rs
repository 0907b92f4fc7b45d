//! The counter against a real ZooKeeper standalone server on loopback: versioned adds keep
//! every increment; blind adds lose some, and the checker says so.

use std::sync::Arc;
use std::time::Duration;

use super::check::{check_counter, CounterReport};
use super::ops::Counter;
use super::{CounterConfig, Mix};
use crate::client::test_server::ZkServer;
use crate::generator::GeneratorConfig;
use crate::history::Op;
use crate::workload::test_runs::run_ops;

/// Runs 5 processes adding (and reading, 1 in 4) for 3 s, then checks the history.
async fn counted(run_id: &str, versioned: bool, server: &ZkServer) -> (CounterReport, Vec<Op>) {
    let cfg = CounterConfig {
        mix: Mix { add: 3, read: 1 },
        versioned,
        ..CounterConfig::default()
    };
    let generator = GeneratorConfig {
        rate: 400.0,
        concurrency: 5,
        time_limit: crate::config::Duration(Duration::from_secs(3)),
        quiet_period: crate::config::Duration(Duration::from_millis(200)),
        ..GeneratorConfig::default()
    };
    let ops = Arc::new(Counter::new(cfg, run_id, 7).unwrap());
    let (summary, history) = run_ops(run_id, ops, &generator, server.endpoint(), vec![]).await;
    assert!(summary.ok > 100, "{summary:?}");
    (check_counter(&history), history)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versioned_adds_keep_every_increment_and_blind_adds_are_caught() {
    let server = ZkServer::start();
    let (kept, _) = counted("versioned", true, &server).await;
    assert!(kept.valid && kept.final_read, "{kept:?}");
    assert_eq!(kept.final_value, Some(kept.ops.adds_ok as i64), "{kept:?}");

    let (blind, ops) = counted("blind", false, &server).await;
    assert!(!blind.valid, "{blind:?}");
    let lost = blind.found.count("lost-increment");
    assert!(
        lost > 0,
        "concurrent blind adds overwrote each other: {blind:?}"
    );
    // The final total really is short of the acknowledged adds.
    assert!(
        blind.final_value.unwrap() < blind.ops.adds_ok as i64,
        "{blind:?}"
    );
    assert!(ops.iter().any(|o| o.value == crate::workload::paced::FINAL));
}
