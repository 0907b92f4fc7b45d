//! The generator and the register workload against a real ZooKeeper server on loopback.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::sync::watch;

use async_trait::async_trait;

use super::{Register, RegisterConfig};
use crate::client::test_server::{KillServer, ZkServer};
use crate::client::{ClientOptions, Connect, NodeEndpoint, OpError};
use crate::config::Duration;
use crate::generator::{run, Completion, GeneratorConfig, OpSpec, Operations, RunSummary, Target};
use crate::history::{Op, OpType, Process, Recorder};
use crate::nemesis::Nemesis;

fn ms(n: u64) -> Duration {
    Duration(std::time::Duration::from_millis(n))
}

/// A nemesis that only counts its calls and whether its "fault" is active.
#[derive(Default)]
struct RecordingNemesis {
    starts: AtomicU32,
    stops: AtomicU32,
    active: AtomicBool,
}

#[async_trait::async_trait]
impl Nemesis for RecordingNemesis {
    fn kind(&self) -> &str {
        "partition"
    }
    async fn start(&self) -> anyhow::Result<serde_json::Value> {
        let n = self.starts.fetch_add(1, Ordering::SeqCst) + 1;
        self.active.store(true, Ordering::SeqCst);
        Ok(json!({ "start": n }))
    }
    async fn stop(&self) -> anyhow::Result<serde_json::Value> {
        self.stops.fetch_add(1, Ordering::SeqCst);
        self.active.store(false, Ordering::SeqCst);
        Ok(json!("healed"))
    }
}

fn register_config() -> RegisterConfig {
    RegisterConfig {
        keys_at_once: 3,
        ops_per_key: 40,
        sync_reads: true,
        // The default mix: read, write and cas alike.
        ..RegisterConfig::default()
    }
}

/// Node-bound sessions of 4 s whose requests time out after `op_timeout_ms`.
fn options(op_timeout_ms: u64) -> ClientOptions {
    ClientOptions {
        connect: Connect::Node,
        op_timeout: std::time::Duration::from_millis(op_timeout_ms),
        session_timeout: std::time::Duration::from_millis(4000),
    }
}

/// A run of `run_id` against `endpoint` with `nemeses`, recording into `recorder`.
fn target(
    run_id: &str,
    endpoint: NodeEndpoint,
    nemeses: Vec<Arc<dyn Nemesis>>,
    recorder: &Arc<Recorder>,
    cancel: watch::Receiver<bool>,
) -> Target {
    Target {
        run_id: run_id.to_string(),
        seed: 7,
        endpoints: vec![endpoint],
        faults: nemeses.into(),
        recorder: recorder.clone(),
        cancel,
    }
}

/// Runs the register workload against `endpoint` under `nemesis` and checks every fault was
/// healed; returns its summary and history.
async fn run_against(
    endpoint: NodeEndpoint,
    options: ClientOptions,
    generator: GeneratorConfig,
    nemesis: Arc<dyn Nemesis>,
    run_id: &str,
) -> (RunSummary, Vec<Op>) {
    let recorder = Arc::new(Recorder::in_memory());
    let workload = Arc::new(Register::new(register_config(), run_id, 42).unwrap());
    let (_cancel_tx, cancel) = watch::channel(false);
    let target = target(run_id, endpoint, vec![nemesis], &recorder, cancel);
    let healed = run(&generator, workload, options, target)
        .await
        .expect("run");
    assert!(healed.heal_failures.is_empty(), "{healed:?}");
    (healed.summary, recorder.ops())
}

/// A long run whose nemesis starts early and stays active for a long time.
fn long_generator() -> GeneratorConfig {
    GeneratorConfig {
        rate: 50.0,
        concurrency: 2,
        time_limit: ms(60_000),
        quiet_period: ms(100),
        nemesis_interval: ms(300),
        nemesis_duration: ms(60_000),
    }
}

/// The register workload, panicking on its `n`th operation.
struct PanicsAfter {
    inner: Register,
    left: AtomicU32,
}

#[async_trait]
impl Operations for PanicsAfter {
    async fn setup(&self, client: &zookeeper_client::Client, max_ops: u64) -> anyhow::Result<()> {
        self.inner.setup(client, max_ops).await
    }
    fn next_op(&self, process: u64) -> Option<OpSpec> {
        assert!(self.left.fetch_sub(1, Ordering::SeqCst) > 1, "workload bug");
        self.inner.next_op(process)
    }
    async fn invoke(
        &self,
        client: &zookeeper_client::Client,
        op: &OpSpec,
    ) -> Result<Completion, zookeeper_client::Error> {
        self.inner.invoke(client, op).await
    }
    fn completed(&self, process: u64, op: &OpSpec, result: &Result<Completion, OpError>) {
        self.inner.completed(process, op, result)
    }
    fn final_ops(&self, keys: &BTreeSet<String>) -> Vec<OpSpec> {
        self.inner.final_ops(keys)
    }
}

fn client(op: &Op) -> Option<u64> {
    match op.process {
        Process::Client(p) => Some(p),
        Process::Nemesis(_) => None,
    }
}

/// Invariants of every client history: each invocation is completed by the same process
/// with the same f and key before that process invokes again; a process that ended `info`
/// never issues again; `ok` operations carry version and zxid; failures carry an error; and
/// per key, the (zxid, version) pairs seen are consistent: one version per zxid, versions
/// strictly increasing with the zxid. Returns the completions.
fn check_client_history(ops: &[Op]) -> Vec<(&Op, &Op)> {
    let mut open: HashMap<u64, &Op> = HashMap::new();
    let mut retired: BTreeSet<u64> = BTreeSet::new();
    let mut pairs = Vec::new();
    for op in ops {
        let Some(p) = client(op) else { continue };
        assert!(
            !retired.contains(&p),
            "process {p} issued after an info: {op:?}"
        );
        if op.kind == OpType::Invoke {
            assert!(
                open.insert(p, op).is_none(),
                "process {p} has two open operations: {op:?}"
            );
            continue;
        }
        let invoke = open
            .remove(&p)
            .unwrap_or_else(|| panic!("completion without invocation: {op:?}"));
        assert_eq!((&invoke.f, &invoke.key), (&op.f, &op.key), "{op:?}");
        match op.kind {
            OpType::Ok => {
                assert!(
                    op.version.is_some() && op.zxid.is_some(),
                    "ok without version/zxid: {op:?}"
                );
                match op.f.as_str() {
                    "write" => assert_eq!(op.value, invoke.value),
                    "cas" => {
                        assert_eq!(op.value, invoke.value);
                        assert_eq!(
                            op.version.unwrap() as i64,
                            op.value[0].as_i64().unwrap() + 1,
                            "{op:?}"
                        );
                    }
                    "read" => assert!(op.value.is_null() || op.value.is_i64(), "{op:?}"),
                    other => panic!("unexpected f {other}"),
                }
            }
            OpType::Fail | OpType::Info => assert!(op.error.is_some(), "{op:?}"),
            OpType::Invoke => unreachable!(),
        }
        if op.kind == OpType::Info {
            retired.insert(p);
        }
        pairs.push((invoke, op));
    }
    assert!(open.is_empty(), "operations never completed: {open:?}");
    let mut by_key: BTreeMap<&str, BTreeMap<i64, i32>> = BTreeMap::new();
    for (_, done) in pairs.iter().filter(|(_, d)| d.kind == OpType::Ok) {
        let versions = by_key.entry(done.key.as_deref().unwrap()).or_default();
        let v = *versions
            .entry(done.zxid.unwrap())
            .or_insert(done.version.unwrap());
        assert_eq!(
            v,
            done.version.unwrap(),
            "two versions for one zxid: {done:?}"
        );
    }
    for (key, versions) in &by_key {
        let vs: Vec<i32> = versions.values().copied().collect();
        assert!(
            vs.windows(2).all(|w| w[0] < w[1]),
            "key {key}: versions not increasing with zxid: {versions:?}"
        );
    }
    pairs
}

/// The nemesis operations: alternating invoke/info pairs, starts and stops in turn, the last
/// a stop. Returns the index of the last one.
fn check_nemesis_history(ops: &[Op], kind: &str) -> (usize, u64) {
    let nemesis: Vec<&Op> = ops
        .iter()
        .filter(|o| o.process == Process::NEMESIS)
        .collect();
    assert!(nemesis.len() >= 4, "too few nemesis ops: {nemesis:?}");
    for pair in nemesis.chunks(2) {
        assert_eq!(pair[0].kind, OpType::Invoke);
        assert_eq!(pair[1].kind, OpType::Info);
        assert_eq!(pair[0].f, pair[1].f);
        assert!(pair[1].error.is_none(), "{:?}", pair[1]);
    }
    let starts = nemesis
        .iter()
        .filter(|o| o.kind == OpType::Info && o.f == format!("start-{kind}"))
        .count();
    let last = nemesis.last().unwrap();
    assert_eq!(last.f, format!("stop-{kind}"));
    assert_eq!(last.kind, OpType::Info);
    (last.index as usize, starts as u64)
}

/// Every key a client touched before the final phase is read (ok) after the last heal.
fn check_final_reads(ops: &[Op], last_heal: usize) {
    let touched: BTreeSet<&str> = ops[..last_heal]
        .iter()
        .filter(|o| client(o).is_some())
        .filter_map(|o| o.key.as_deref())
        .collect();
    let read_after: BTreeSet<&str> = ops[last_heal..]
        .iter()
        .filter(|o| client(o).is_some() && o.f == "read" && o.kind == OpType::Ok)
        .filter_map(|o| o.key.as_deref())
        .collect();
    assert!(!touched.is_empty());
    assert_eq!(
        touched, read_after,
        "final reads must cover every touched key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_run_records_a_complete_history() {
    let server = ZkServer::start();
    let nemesis = Arc::new(RecordingNemesis::default());
    let generator = GeneratorConfig {
        rate: 100.0,
        concurrency: 4,
        time_limit: ms(6000),
        quiet_period: ms(300),
        nemesis_interval: ms(1000),
        nemesis_duration: ms(1000),
    };
    let (summary, ops) = run_against(
        server.endpoint(),
        options(2000),
        generator,
        nemesis.clone(),
        "complete",
    )
    .await;

    let pairs = check_client_history(&ops);
    let (last_heal, starts) = check_nemesis_history(&ops, "partition");
    check_final_reads(&ops, last_heal);
    assert!(
        !nemesis.active.load(Ordering::SeqCst),
        "a fault was left active"
    );
    assert_eq!(nemesis.starts.load(Ordering::SeqCst) as u64, starts);
    assert!(
        starts >= 2,
        "expected at least two faults in 6 s, got {starts}"
    );

    for f in ["read", "write", "cas"] {
        assert!(
            pairs.iter().any(|(_, d)| d.f == f && d.kind == OpType::Ok),
            "no ok {f}"
        );
    }
    assert!(
        pairs
            .iter()
            .any(|(_, d)| d.f == "cas" && d.kind == OpType::Fail),
        "no cas ever failed"
    );
    let completions = summary.ok + summary.fail + summary.info;
    assert_eq!(completions, pairs.len() as u64);
    // The rate caps the main phase: 100 ops/s for 6 s, plus the first tick.
    let main_phase = pairs
        .iter()
        .filter(|(_, d)| (d.index as usize) < last_heal)
        .count();
    assert!(
        (100..=601).contains(&main_phase),
        "{main_phase} ops in the main phase"
    );
    assert_eq!(summary.final_missed, 0);
    assert!(!summary.cancelled);
    assert!(ops.iter().filter_map(client).all(|p| p < summary.processes));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_server_turns_ops_into_info_and_processes_are_replaced() {
    let server = Arc::new(Mutex::new(ZkServer::start()));
    let nemesis = Arc::new(KillServer(server.clone()));
    let generator = GeneratorConfig {
        rate: 100.0,
        concurrency: 4,
        time_limit: ms(5000),
        quiet_period: ms(500),
        nemesis_interval: ms(1500),
        nemesis_duration: ms(2000),
    };
    let endpoint = server.lock().unwrap().endpoint();
    let (summary, ops) = run_against(endpoint, options(1000), generator, nemesis, "killed").await;

    check_client_history(&ops);
    let (last_heal, _) = check_nemesis_history(&ops, "kill");
    check_final_reads(&ops, last_heal);

    // From the kill's invocation: operations in flight may end before the kill is recorded.
    let kill = ops.iter().find(|o| o.f == "start-kill").unwrap().index as usize;
    let restart = ops
        .iter()
        .find(|o| o.f == "stop-kill" && o.kind == OpType::Info)
        .unwrap()
        .index as usize;
    let infos: Vec<&Op> = ops[kill..restart]
        .iter()
        .filter(|o| o.kind == OpType::Info && client(o).is_some())
        .collect();
    assert!(
        !infos.is_empty(),
        "no op ended info while the server was down"
    );
    let before: BTreeSet<u64> = ops[..kill].iter().filter_map(client).collect();
    let fresh_ok = ops[restart..]
        .iter()
        .filter(|o| o.kind == OpType::Ok)
        .filter_map(client)
        .filter(|p| !before.contains(p))
        .count();
    assert!(
        fresh_ok > 0,
        "no fresh process completed an op after the restart"
    );
    assert!(summary.processes > 4, "{summary:?}");
    assert!(summary.info as usize >= infos.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_stops_issuing_and_heals() {
    let server = ZkServer::start();
    let nemesis = Arc::new(RecordingNemesis::default());
    let recorder = Arc::new(Recorder::in_memory());
    let workload = Arc::new(Register::new(register_config(), "cancel", 1).unwrap());
    let (cancel_tx, cancel) = watch::channel(false);
    let watched = nemesis.clone();
    tokio::spawn(async move {
        // Cancel while the fault is active and operations are flowing.
        while !watched.active.load(Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(700)).await;
        cancel_tx.send(true).unwrap();
    });
    let started = std::time::Instant::now();
    let nemeses: Vec<Arc<dyn Nemesis>> = vec![nemesis.clone()];
    let target = target("cancel", server.endpoint(), nemeses, &recorder, cancel);
    let summary = run(&long_generator(), workload, options(2000), target)
        .await
        .unwrap()
        .summary;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "cancel took {:?}",
        started.elapsed()
    );
    assert!(summary.cancelled);
    assert!(
        !nemesis.active.load(Ordering::SeqCst),
        "a fault was left active"
    );
    let ops = recorder.ops();
    check_client_history(&ops);
    let last = ops
        .iter()
        .rposition(|o| o.process == Process::NEMESIS)
        .unwrap();
    assert_eq!(ops[last].f, "stop-partition");
    assert!(
        ops[last..].iter().all(|o| client(o).is_none()),
        "no final reads after a cancel"
    );
    assert!(summary.ok > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_workload_still_heals() {
    let server = ZkServer::start();
    let nemesis = Arc::new(RecordingNemesis::default());
    let recorder = Arc::new(Recorder::in_memory());
    let inner = Register::new(register_config(), "panics", 1).unwrap();
    let workload = Arc::new(PanicsAfter {
        inner,
        left: AtomicU32::new(40),
    });
    let (_cancel_tx, cancel) = watch::channel(false);
    let nemeses: Vec<Arc<dyn Nemesis>> = vec![nemesis.clone()];
    let target = target("panics", server.endpoint(), nemeses, &recorder, cancel);
    let result = run(&long_generator(), workload, options(2000), target).await;
    let err = result.expect_err("a panicking workload fails the run");
    assert!(format!("{err:#}").contains("workload bug"), "{err:#}");
    assert_eq!(nemesis.starts.load(Ordering::SeqCst), 1);
    assert!(
        !nemesis.active.load(Ordering::SeqCst),
        "a fault was left active"
    );
    let ops = recorder.ops();
    assert_eq!(
        ops.iter()
            .rev()
            .find(|o| o.process == Process::NEMESIS)
            .unwrap()
            .f,
        "stop-partition"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_run_heals_in_the_background() {
    let server = ZkServer::start();
    let nemesis = Arc::new(RecordingNemesis::default());
    let recorder = Arc::new(Recorder::in_memory());
    let workload = Arc::new(Register::new(register_config(), "dropped", 1).unwrap());
    let (_cancel_tx, cancel) = watch::channel(false);
    let nemeses: Vec<Arc<dyn Nemesis>> = vec![nemesis.clone()];
    let generator = long_generator();
    let target = target("dropped", server.endpoint(), nemeses, &recorder, cancel);
    let running = run(&generator, workload, options(2000), target);
    let fault_active = async {
        while !nemesis.active.load(Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        _ = running => panic!("the run should still be going"),
        _ = fault_active => {}
    }
    for _ in 0..50 {
        if !nemesis.active.load(Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the fault was not healed after the run was dropped");
}
