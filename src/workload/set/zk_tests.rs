//! The set against a real ZooKeeper standalone server on loopback, killed and restarted
//! during the run: persistent elements are all kept; ephemeral ones (the forgetting mistake)
//! vanish with the sessions the kills cut, and the checker reports them lost.

use std::sync::Arc;

use super::check::{check_set, SetReport};
use super::ops::Set;
use super::SetConfig;
use crate::workload::test_runs::run_ops_killed;

/// Runs 5 processes adding (and listing, 1 in 4) for 6 s while the server is killed for 1 s
/// every 1.5 s; the final reads come 6 s after the heal, when the sessions the kills cut
/// have expired (4 s).
async fn run(run_id: &str, ephemeral: bool) -> SetReport {
    let cfg = SetConfig {
        ephemeral,
        ..SetConfig::default()
    };
    let ops = Arc::new(Set::new(cfg, run_id, 7).unwrap());
    let history = run_ops_killed(run_id, ops, 6000, 6000).await;
    let report = check_set(&history, false);
    eprintln!("{report:?}");
    assert!(report.ops.adds_ok > 100 && report.final_read, "{report:?}");
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_elements_survive_kills_and_ephemeral_ones_are_caught_lost() {
    let kept = run("persistent", false).await;
    assert!(kept.valid, "{kept:?}");
    let listed = kept.final_size.unwrap() as u64;
    assert!(
        (kept.ops.adds_ok..=kept.ops.adds_ok + kept.ops.adds_info).contains(&listed),
        "every acknowledged element, and some unknown ones: {kept:?}"
    );

    let forgot = run("ephemeral", true).await;
    assert!(!forgot.valid, "{forgot:?}");
    assert!(forgot.found.count("lost-element") > 0, "{forgot:?}");
    assert_eq!(forgot.found.count("unexpected-element"), 0, "{forgot:?}");
}
