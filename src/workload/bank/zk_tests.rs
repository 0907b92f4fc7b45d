//! The bank against a real ZooKeeper standalone server on loopback, killed and restarted
//! during the run: transfers in one `multi` keep the total in every snapshot; transfers in two
//! separate setData calls are seen half done, and the checker reports the wrong totals.

use std::sync::Arc;

use super::check::{check_bank, BankReport};
use super::ops::Bank;
use super::{BankConfig, TransferMode};
use crate::workload::test_runs::run_ops_killed;

/// Runs 5 processes transferring between 5 accounts and reading them for 5 s while the
/// server is killed for 1 s every 1.5 s.
async fn run(run_id: &str, transfer: TransferMode) -> BankReport {
    let cfg = BankConfig {
        transfer,
        ..BankConfig::default()
    };
    let ops = Arc::new(Bank::new(cfg, run_id, 7).unwrap());
    let history = run_ops_killed(run_id, ops, 5000, 500).await;
    let report = check_bank(&history, 5, cfg.total());
    eprintln!("{report:?}");
    // Some of each, even on a machine slow enough to halve the run's pace.
    assert!(report.transfers_ok > 20 && report.reads > 20, "{report:?}");
    assert!(report.final_balances.is_some(), "{report:?}");
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfers_in_one_multi_keep_the_total_and_separate_writes_are_caught() {
    let atomic = run("multi", TransferMode::Multi).await;
    assert!(atomic.valid, "{atomic:?}");

    let separate = run("separate", TransferMode::Separate).await;
    assert!(!separate.valid, "{separate:?}");
    assert!(separate.found.count("wrong-total") > 0, "{separate:?}");
    assert_eq!(separate.found.count("negative-balance"), 0, "{separate:?}");
}
