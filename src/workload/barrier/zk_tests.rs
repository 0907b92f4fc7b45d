//! The double barrier against a real ZooKeeper standalone server on loopback: the recipe lets
//! four processes through round after round and the checker accepts it, also across a kill of
//! the server (the replaced processes find the others' round again); barriers with a
//! deliberate mistake are rejected by the checker.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use super::arrivals::arrivals;
use super::check::{check_barrier, BarrierReport};
use super::driver::BarrierRunSummary;
use super::driver::{drive, BarrierRun};
use super::recipe::{Flaw, Recipe};
use super::BarrierConfig;
use crate::client::test_server::ZkServer;
use crate::client::NodeEndpoint;
use crate::history::{Meta, OpType, Process, Recorder, ABANDONED};
use crate::workload::rounds::Contention;
use crate::workload::test_runs::ms;

const PROCESSES: usize = 4;

/// A run of 4 processes through the barrier of 4 for `secs` seconds, with short waits,
/// unstaggered (every process joins at once and stays: the counts below rely on it).
fn barrier_run(name: &str, secs: u64, endpoint: NodeEndpoint) -> BarrierRun {
    BarrierRun {
        cfg: BarrierConfig {
            work: ms(40),
            spread: ms(60),
            wait_timeout: ms(2000),
            contention: Contention {
                stagger: false,
                ..Contention::default()
            },
            ..BarrierConfig::default()
        },
        options: crate::workload::test_runs::options(1000, 2000),
        slots: PROCESSES,
        time_limit: Duration::from_secs(secs),
        run_id: name.to_string(),
        endpoints: vec![endpoint],
    }
}

/// Runs 4 processes through the barrier of 4 (with `flaw`, if any) for 3 seconds, and checks
/// the history against a barrier of 4.
async fn run(
    name: &str,
    flaw: Option<Flaw>,
    endpoint: NodeEndpoint,
) -> (BarrierRunSummary, BarrierReport) {
    let recorder = Arc::new(Recorder::in_memory());
    let (_keep, stop) = watch::channel(false);
    let run = barrier_run(name, 3, endpoint);
    let recipe = Recipe::new(name, PROCESSES).unwrap();
    let recipe = match flaw {
        Some(flaw) => recipe.with_flaw(flaw),
        None => recipe,
    };
    let summary = drive(&run, recipe, recorder.clone(), stop).await.unwrap();
    let ops = recorder.ops();
    let report = check_barrier(&ops, PROCESSES as u64);
    let gave_up = ops.iter().filter(|o| o.kind == OpType::Info);
    let gave_up = gave_up.filter(|o| !o.error.as_deref().unwrap_or("").starts_with(ABANDONED));
    assert_eq!(gave_up.count(), 0, "{name}: nothing fails without faults");
    eprintln!("{name}: {summary:?}\n{name}: {report:?}");
    (summary, report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recipe_lets_everybody_through_together_and_is_accepted() {
    let server = ZkServer::start();
    let (summary, report) = run("barrier-right", None, server.endpoint()).await;
    assert!(report.valid, "{report:?}");
    assert!(report.rounds_completed >= 5, "{report:?}");
    assert_eq!(report.enters_passed, summary.entered);
    assert_eq!(report.leaves_passed, summary.left);
    // Four passed enter of every completed round, and perhaps of the one the end cut short.
    let everybody = PROCESSES as u64 * report.rounds_completed;
    assert!(
        (everybody..=everybody + PROCESSES as u64).contains(&report.enters_passed),
        "{report:?}"
    );
    assert_eq!((report.stalled, report.gave_up), (0, 0));
    assert_eq!(summary.processes, PROCESSES as u64, "nobody was retired");
    assert_eq!(summary.threshold, PROCESSES as u64);
    // Every slot went through every completed round but perhaps the last one.
    assert!(
        summary
            .rounds_per_slot
            .iter()
            .all(|&n| n + 1 >= report.rounds_completed),
        "{summary:?}"
    );
    let per_round = summary.herd.notifications_mean.unwrap_or(0.0);
    assert!(summary.herd.releases > 0 && per_round > 0.0, "{summary:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staggered_processes_leave_and_come_back_without_stalling_a_round_of_all() {
    let server = ZkServer::start();
    let recorder = Arc::new(Recorder::in_memory());
    let (_keep, stop) = watch::channel(false);
    let mut run = barrier_run("barrier-staggered", 5, server.endpoint());
    run.cfg.contention = Contention {
        join_within: ms(500),
        leave_percent: 30,
        away: ms(200),
        ..Contention::default()
    };
    let recipe = Recipe::new("barrier-staggered", PROCESSES).unwrap();
    let summary = drive(&run, recipe, recorder.clone(), stop).await.unwrap();
    let ops = recorder.ops();
    let report = check_barrier(&ops, PROCESSES as u64);
    let seen = arrivals(&ops);
    eprintln!(
        "staggered: {summary:?}\nstaggered: {report:?}\n{}",
        seen.line()
    );
    assert!(report.valid, "{report:?}");
    assert_eq!((report.stalled, report.gave_up), (0, 0), "{report:?}");
    assert!(report.rounds_completed >= 5, "{report:?}");
    assert!(
        summary.processes > PROCESSES as u64,
        "some left and came back as new processes: {summary:?}"
    );
    let positions: Vec<usize> = seen.positions.keys().copied().collect();
    assert_eq!(positions, [0, 1, 2, 3], "{}", seen.line());
}

/// Records a nemesis operation `f` (`start-kill`, `stop-kill`) around `action` on `server`.
async fn fault(
    recorder: &Recorder,
    f: &str,
    server: &Arc<Mutex<ZkServer>>,
    action: fn(&mut ZkServer),
) {
    let record = |kind| {
        let meta = Meta::default();
        recorder
            .record(kind, Process::NEMESIS, f, Value::Null, meta)
            .unwrap();
    };
    record(OpType::Invoke);
    let server = server.clone();
    tokio::task::spawn_blocking(move || action(&mut server.lock().unwrap()))
        .await
        .unwrap();
    record(OpType::Info);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_processes_find_each_other_again_after_the_server_is_killed() {
    let server = Arc::new(Mutex::new(ZkServer::start()));
    let endpoint = server.lock().unwrap().endpoint();
    let recorder = Arc::new(Recorder::in_memory());
    let (_keep, stop) = watch::channel(false);
    let run = barrier_run("barrier-kill", 10, endpoint);
    let recipe = Recipe::new("barrier-kill", PROCESSES).unwrap();
    let driving = tokio::spawn(drive_owned(run, recipe, recorder.clone(), stop));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    fault(&recorder, "start-kill", &server, ZkServer::kill).await;
    tokio::time::sleep(Duration::from_millis(2000)).await;
    fault(&recorder, "stop-kill", &server, ZkServer::restart).await;
    let summary = driving.await.unwrap();
    let ops = recorder.ops();
    let report = check_barrier(&ops, PROCESSES as u64);
    eprintln!("kill: {summary:?}\nkill: {report:?}");
    assert!(report.valid, "{report:?}");
    assert!(
        report.gave_up > 0,
        "the kill made processes give up: {report:?}"
    );
    assert!(summary.processes > PROCESSES as u64, "{summary:?}");
    let healed = report.last_heal_ms.expect("the kill was healed") * 1e6;
    let rounds_after: BTreeSet<u64> = ops
        .iter()
        .filter(|o| o.f == "leave" && o.kind == OpType::Ok && o.time as f64 > healed)
        .filter_map(|o| o.value.as_u64())
        .collect();
    assert!(
        rounds_after.len() >= 3,
        "rounds after the heal: {rounds_after:?}"
    );
    assert_eq!(report.stalled, 0, "{report:?}");
}

/// [`drive`] on owned arguments, for spawning.
async fn drive_owned(
    run: BarrierRun,
    recipe: Recipe,
    recorder: Arc<Recorder>,
    stop: watch::Receiver<bool>,
) -> BarrierRunSummary {
    drive(&run, recipe, recorder, stop).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn barriers_that_open_early_are_rejected() {
    let server = ZkServer::start();
    for (name, flaw) in [
        ("barrier-enter-early", Flaw::EnterOneEarly),
        ("barrier-leave-early", Flaw::LeaveWithoutWaiting),
    ] {
        let (_, report) = run(name, Some(flaw), server.endpoint()).await;
        assert!(!report.valid, "{name}");
        assert!(report.rounds_completed >= 5, "{name}: {report:?}");
        // Only the barrier with the mistake is reported.
        let (early, other) = match flaw {
            Flaw::EnterOneEarly => (report.early_enters.len(), report.early_leaves.len()),
            Flaw::LeaveWithoutWaiting => (report.early_leaves.len(), report.early_enters.len()),
        };
        eprintln!("{name}: {early} early passes in {} rounds", report.rounds);
        assert!(early > 0, "{name}: {report:?}");
        assert_eq!(other, 0, "{name}: {report:?}");
    }
}
