//! Unique ids against a real ZooKeeper standalone server on loopback, killed and restarted
//! during the run: sequence numbers are never given twice nor out of order; a blind counter
//! gives ids twice, and the checker says so.

use std::sync::Arc;

use super::check::{check_unique_ids, UniqueIdsReport};
use super::ops::UniqueIds;
use super::Scheme;
use crate::workload::test_runs::run_ops_killed;

/// Runs 5 processes generating ids for 5 s while the server is killed for 1 s every 1.5 s.
async fn run(run_id: &str, scheme: Scheme) -> UniqueIdsReport {
    let ops = Arc::new(UniqueIds::new(scheme, run_id).unwrap());
    let history = run_ops_killed(run_id, ops, 5000, 200).await;
    let report = check_unique_ids(&history);
    eprintln!("{report:?}");
    assert!(report.generated > 100, "{report:?}");
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequence_numbers_stay_unique_through_kills_and_a_blind_counter_is_caught() {
    let sequential = run("sequential", Scheme::Sequential).await;
    assert!(sequential.valid, "{sequential:?}");

    let blind = run("blind", Scheme::BlindCounter).await;
    assert!(!blind.valid, "{blind:?}");
    assert!(blind.found.count("duplicate-id") > 0, "{blind:?}");
}
