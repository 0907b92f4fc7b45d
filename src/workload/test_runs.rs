//! What the workloads' ZooKeeper-backed tests (`zk_tests`) share: short durations, session
//! options, a server that a nemesis kills and restarts, and runs of a driver with and without
//! faults that hand back the summary and the history.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::client::test_server::{KillServer, ZkServer};
use crate::client::{ClientOptions, Connect, NodeEndpoint};
use crate::generator::{self, DriverRun, GeneratorConfig, Healed, Operations, RunSummary, Target};
use crate::history::{Op, Recorder};
use crate::nemesis::Nemesis;

/// `n` milliseconds, as a workload file writes a duration.
pub fn ms(n: u64) -> crate::config::Duration {
    crate::config::Duration(Duration::from_millis(n))
}

/// Node-bound sessions of `session_ms` whose requests time out after `op_ms`.
pub fn options(op_ms: u64, session_ms: u64) -> ClientOptions {
    ClientOptions {
        connect: Connect::Node,
        op_timeout: Duration::from_millis(op_ms),
        session_timeout: Duration::from_millis(session_ms),
    }
}

/// A generator of `concurrency` slots running for `time_limit` ms, starting a fault every
/// `interval` ms that lasts `duration` ms.
pub fn faulted(
    concurrency: usize,
    time_limit: u64,
    interval: u64,
    duration: u64,
) -> GeneratorConfig {
    GeneratorConfig {
        concurrency,
        time_limit: ms(time_limit),
        nemesis_interval: ms(interval),
        nemesis_duration: ms(duration),
        ..GeneratorConfig::default()
    }
}

/// A standalone server on loopback, its endpoint, and the nemesis that kills and restarts it.
/// The server starts on a blocking thread: runs joined in one task go on meanwhile (a JVM
/// starting on a loaded machine must not stall another run's session past its timeout).
pub async fn killable_server() -> (Arc<Mutex<ZkServer>>, NodeEndpoint, Arc<dyn Nemesis>) {
    let started = tokio::task::spawn_blocking(ZkServer::start).await;
    let server = Arc::new(Mutex::new(started.expect("starting ZooKeeper")));
    let endpoint = server.lock().unwrap().endpoint();
    let kill: Arc<dyn Nemesis> = Arc::new(KillServer(server.clone()));
    (server, endpoint, kill)
}

/// Runs `run` (a workload's `stampede test` entry) as run `run_id` against `endpoints` under
/// `nemeses`, recording into `recorder`; checks that every fault was healed and returns the
/// summary.
pub async fn run_faulted<S, F>(
    run_id: &str,
    endpoints: Vec<NodeEndpoint>,
    nemeses: Vec<Arc<dyn Nemesis>>,
    recorder: &Arc<Recorder>,
    run: impl FnOnce(Target) -> F,
) -> S
where
    S: std::fmt::Debug,
    F: Future<Output = anyhow::Result<Healed<S>>>,
{
    let (_keep, cancel) = watch::channel(false);
    let target = Target {
        run_id: run_id.to_string(),
        seed: 7,
        endpoints,
        faults: nemeses.into(),
        recorder: recorder.clone(),
        cancel,
    };
    let healed = run(target).await.unwrap();
    assert!(healed.heal_failures.is_empty(), "{healed:?}");
    healed.summary
}

/// Whether the history so far lets a kill strike: a test that needs the kill to hit
/// something (a leader in office) says so instead of leaving it to timing.
pub type Strike = fn(&[Op]) -> bool;

/// Strikes whenever the schedule says.
pub fn any_time(_: &[Op]) -> bool {
    true
}

/// Whether some process has invoked an operation named `f` and not completed it yet: a term
/// in office (`lead`) under way.
pub fn open(ops: &[Op], f: &str) -> bool {
    let mut last = std::collections::HashMap::new();
    for op in ops {
        last.insert(op.process, op);
    }
    last.values()
        .any(|op| op.f == f && op.kind == crate::history::OpType::Invoke)
}

/// The kill nemesis of [`killable_server`], holding each kill until `strike` holds of the
/// history `recorder` has so far (for at most 5 s: a wait that long is the test's failure to
/// report, not to hang on).
struct KillWhen {
    kill: Arc<dyn Nemesis>,
    recorder: Arc<Recorder>,
    strike: Strike,
}

#[async_trait::async_trait]
impl Nemesis for KillWhen {
    fn kind(&self) -> &str {
        self.kill.kind()
    }
    async fn start(&self) -> anyhow::Result<serde_json::Value> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !(self.strike)(&self.recorder.ops()) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.kill.start().await
    }
    async fn stop(&self) -> anyhow::Result<serde_json::Value> {
        self.kill.stop().await
    }
}

/// Drives `driver` over `cfg` with 4 slots for 12 s against a server of its own that is
/// killed every 2 s (once `strike` holds) and restarted 2 s later (sessions of 3 s, requests
/// of 1 s); checks that the server was killed at least twice and every fault healed. Returns
/// the summary and the history.
pub async fn run_through_kills<C, S, F>(
    cfg: C,
    driver: impl FnOnce(DriverRun<C>, Arc<Recorder>, watch::Receiver<bool>) -> F,
    strike: Strike,
) -> (S, Vec<Op>)
where
    C: Clone,
    S: std::fmt::Debug,
    F: Future<Output = anyhow::Result<S>>,
{
    let (_server, endpoint, kill) = killable_server().await;
    let generator = faulted(4, 12000, 2000, 2000);
    let recorder = Arc::new(Recorder::in_memory());
    let kill: Arc<dyn Nemesis> = Arc::new(KillWhen {
        kill,
        recorder: recorder.clone(),
        strike,
    });
    let running = |target| generator::drive(&generator, &cfg, options(1000, 3000), target, driver);
    let summary = run_faulted("kill", vec![endpoint], vec![kill], &recorder, running).await;
    let ops = recorder.ops();
    let kills = ops.iter().filter(|o| o.f == "start-kill").count();
    assert!(
        kills >= 2,
        "the server was killed {kills} times: {summary:?}"
    );
    (summary, ops)
}

/// Runs `driver` over `cfg` with `slots` slots for `secs` seconds as run `run_id` against
/// `endpoint`, without faults, its sessions of 4 s; returns its summary and history.
pub async fn run_quiet<C, S, F>(
    cfg: C,
    slots: usize,
    secs: u64,
    run_id: &str,
    endpoint: NodeEndpoint,
    driver: impl FnOnce(DriverRun<C>, Arc<Recorder>, watch::Receiver<bool>) -> F,
) -> (S, Vec<Op>)
where
    F: Future<Output = anyhow::Result<S>>,
{
    let recorder = Arc::new(Recorder::in_memory());
    let (_keep, stop) = watch::channel(false);
    let run = DriverRun {
        cfg,
        options: options(5000, 4000),
        slots,
        time_limit: Duration::from_secs(secs),
        run_id: run_id.into(),
        endpoints: vec![endpoint],
    };
    let summary = driver(run, recorder.clone(), stop).await.unwrap();
    (summary, recorder.ops())
}

/// Runs `ops` (a workload the generator paces) under `generator` as run `run_id` against
/// `endpoint` with `nemeses`, its sessions of 4 s with requests of 2 s; returns the summary
/// and the history.
pub async fn run_ops(
    run_id: &str,
    ops: Arc<dyn Operations>,
    generator: &GeneratorConfig,
    endpoint: NodeEndpoint,
    nemeses: Vec<Arc<dyn Nemesis>>,
) -> (RunSummary, Vec<Op>) {
    let recorder = Arc::new(Recorder::in_memory());
    let running = |target| crate::generator::run(generator, ops, options(2000, 4000), target);
    let summary = run_faulted(run_id, vec![endpoint], nemeses, &recorder, running).await;
    (summary, recorder.ops())
}

/// Runs `ops` as run `run_id` with 5 processes at 300 operations a second for `time_ms`
/// against a standalone server killed for 1 s every 1.5 s, then waits `quiet_ms` before the
/// final operations; checks that the server was killed at least twice and every fault healed.
/// Returns the history.
pub async fn run_ops_killed(
    run_id: &str,
    ops: Arc<dyn Operations>,
    time_ms: u64,
    quiet_ms: u64,
) -> Vec<Op> {
    let (_server, endpoint, kill) = killable_server().await;
    let generator = GeneratorConfig {
        rate: 300.0,
        quiet_period: ms(quiet_ms),
        ..faulted(5, time_ms, 1500, 1000)
    };
    let (summary, history) = run_ops(run_id, ops, &generator, endpoint, vec![kill]).await;
    eprintln!("{run_id}: {summary:?}");
    let kills = history.iter().filter(|o| o.f == "start-kill").count();
    assert!(kills >= 2, "the server was killed during the run ({kills})");
    history
}
