//! The watch workload against a real ZooKeeper standalone server on loopback: quiet, and
//! with the server killed and restarted; both judged valid with events received and watches
//! judged.

use std::sync::Arc;

use super::check::check_watch;
use super::driver;
use super::WatchConfig;
use crate::client::test_server::ZkServer;
use crate::history::Recorder;
use crate::workload::test_runs::{faulted, killable_server, ms, options, run_faulted};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_run_and_a_run_through_kills_keep_every_watch_guarantee() {
    let server = ZkServer::start();
    let recorder = Arc::new(Recorder::in_memory());
    let mut generator = faulted(5, 4000, 1000, 1000);
    generator.quiet_period = ms(1500);
    let cfg = WatchConfig::default();
    let run = |t| driver::run(&generator, &cfg, options(2000, 4000), t);
    let summary = run_faulted("quiet", vec![server.endpoint()], vec![], &recorder, run).await;
    let report = check_watch(&recorder.ops());
    assert!(report.found.is_empty(), "{}\n{report:?}", report.line());
    assert!(
        report.events > 50 && report.judged > 10,
        "{}",
        report.line()
    );
    for class in ["data", "exist", "child", "persistent", "recursive"] {
        assert!(
            report.watches.get(class).is_some_and(|n| *n > 0),
            "{class}: {}",
            report.line()
        );
    }
    assert!(summary.herd.notifications_mean.is_some(), "{summary:?}");

    let (_server, endpoint, kill) = killable_server().await;
    let recorder = Arc::new(Recorder::in_memory());
    let mut generator = faulted(5, 8000, 1500, 1500);
    generator.quiet_period = ms(2500);
    let run = |t| driver::run(&generator, &cfg, options(1000, 3000), t);
    run_faulted("kill", vec![endpoint], vec![kill], &recorder, run).await;
    let ops = recorder.ops();
    assert!(ops.iter().filter(|o| o.f == "start-kill").count() >= 2);
    let report = check_watch(&ops);
    assert!(report.found.is_empty(), "{}\n{report:?}", report.line());
    assert!(report.events > 20, "{}", report.line());
}
