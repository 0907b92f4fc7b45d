//! The lock recipes against a real ZooKeeper standalone server on loopback: safe and live
//! without faults, the herd effect visible in the client-side count, and the `keep` policy's
//! hazard caught when the holder is isolated past its session timeout, and `assume-lost` safe
//! through server kills.

use std::sync::Arc;
use std::time::Duration;

use super::driver::{Contenders, LockOutcome};
use super::{LockConfig, OnDisconnect, RecipeKind};
use crate::checker::liveness::{self, LivenessOptions};
use crate::checker::mutex_overlap::check_lock_history;
use crate::checker::result::Validity;
use crate::checker::CheckOptions;
use crate::client::cut_proxy::CutProxy;
use crate::client::test_server::ZkServer;
use crate::client::NodeEndpoint;
use crate::generator::drive;
use crate::history::{Op, Recorder};
use crate::nemesis::Nemesis;
use crate::workload::rounds::fairness::{judge_lock, PASSED_OVER};
use crate::workload::rounds::{self, Contention, RoundsSummary};
use crate::workload::test_runs::{
    any_time, faulted, ms, options, run_faulted, run_quiet, run_through_kills,
};

fn quick(recipe: RecipeKind, reentrant: bool) -> LockConfig {
    LockConfig {
        recipe,
        reentrant,
        hold: ms(40),
        steps: 4,
        pause: ms(20),
        ..LockConfig::default()
    }
}

/// Asserts no overlap and clean rounds; with `every_contender`, that each contender acquired
/// at least once (the single-node lock is unfair: with many contenders one may starve).
fn assert_safe_and_live(summary: &RoundsSummary<LockOutcome>, ops: &[Op], every_contender: bool) {
    let name = summary.recipe;
    let opts = CheckOptions {
        time_limit: Some(Duration::from_secs(30)),
        ..CheckOptions::default()
    };
    let verdict = check_lock_history(ops, true, &opts).unwrap();
    assert_eq!(verdict.valid, Validity::Valid, "{name}: {verdict:?}");
    let holds = verdict.mutual_exclusion.holds;
    assert!(holds > 20, "{name}: only {holds} holds");
    assert_eq!(summary.own.resource.max_inside, 1, "{name}: {summary:?}");
    assert_eq!(summary.own.resource.lost_updates, 0, "{name}: {summary:?}");
    assert_eq!(
        summary.own.resource.stale_rejected, 0,
        "{name}: {summary:?}"
    );
    assert!(
        !every_contender
            || summary
                .own
                .acquisitions_per_contender
                .iter()
                .all(|&n| n > 0),
        "{name}: a contender never acquired: {:?}",
        summary.own.acquisitions_per_contender
    );
    assert_eq!(
        (
            summary.own.acquire_failed,
            summary.own.lost_while_holding,
            summary.own.release_info
        ),
        (0, 0, 0),
        "{name}: {summary:?}"
    );
    assert_eq!(
        summary.own.acquired, summary.own.released,
        "{name}: {summary:?}"
    );
    let latency = summary.own.latency;
    assert_eq!(
        latency.acquire.count, summary.own.acquired,
        "{name}: {latency:?}"
    );
    assert!(
        latency.handoff.count + 1 >= summary.own.released,
        "{name}: {latency:?}"
    );
    assert!(
        latency.handoff.p50_ms < latency.acquire.max_ms,
        "{name}: {latency:?}"
    );
    let live = liveness::check_lock(ops, LivenessOptions::for_sessions(Duration::ZERO, STALL));
    assert!(live.judged && live.valid, "{name}: {live:?}");
}

/// How long the lock may stay free while contenders wait, in these tests: deaf contenders
/// leave it free for 3 s and more, while a 1 s bound failed a healthy run once on a loaded
/// machine (the whole unit suite at load 7).
const STALL: Duration = Duration::from_secs(2);

/// A proxy in front of `server` that drops its watch notifications, and the node `n1` it
/// stands for.
async fn deaf_proxy(server: &ZkServer) -> (CutProxy, NodeEndpoint) {
    let upstream = format!("127.0.0.1:{}", server.endpoint().port)
        .parse()
        .unwrap();
    let proxy = CutProxy::start(upstream).await;
    proxy.set_deaf(true);
    let endpoint = NodeEndpoint {
        name: "n1".into(),
        host: "127.0.0.1".into(),
        port: proxy.port(),
    };
    (proxy, endpoint)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contenders_deaf_to_their_watches_are_reported_stuck() {
    let server = ZkServer::start();
    let (_proxy, endpoint) = deaf_proxy(&server).await;
    // All three join at once, so that two wait behind the first holder.
    let cfg = LockConfig {
        contention: Contention {
            stagger: false,
            ..Contention::default()
        },
        ..quick(RecipeKind::Sequential, false)
    };
    let (summary, ops) = run_quiet(cfg, 3, 5, "deaf", endpoint, rounds::drive::<Contenders>).await;
    let opts = CheckOptions::default();
    let safety = check_lock_history(&ops, true, &opts).unwrap();
    assert_eq!(safety.valid, Validity::Valid, "still safe: {safety:?}");
    let live = liveness::check_lock(&ops, LivenessOptions::for_sessions(Duration::ZERO, STALL));
    assert!(
        !live.valid,
        "the missed watches are caught: {live:?} {summary:?}"
    );
    let stall = &live.stalls[0];
    assert_eq!(stall.waiting.len(), 2, "both waiters: {live:?}");
    assert_eq!(stall.nodes, ["n1"]);
    assert!(stall.duration_ns >= 3_000_000_000, "{live:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lock_recipe_is_safe_and_live_without_faults() {
    let server = ZkServer::start();
    let runs = RecipeKind::ALL.map(|recipe| {
        let endpoint = server.endpoint();
        // Re-entry is exercised by the single-node lock (its identity check) and the herd.
        let reentrant = recipe != RecipeKind::Sequential;
        let run_id = format!("safe-{}", recipe.workload_name());
        let cfg = quick(recipe, reentrant);
        tokio::spawn(async move {
            run_quiet(cfg, 5, 8, &run_id, endpoint, rounds::drive::<Contenders>).await
        })
    });
    for joined in runs {
        let (summary, ops) = joined.await.unwrap();
        assert_safe_and_live(&summary, &ops, true);
        if summary.recipe != "lock-sequential" {
            assert_eq!(summary.own.reentries, summary.own.acquired, "{summary:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn naive_recipes_notify_ten_times_more_per_release_than_the_sequential_lock() {
    let server = ZkServer::start();
    let naive_and_recipe = [
        RecipeKind::SingleNode,
        RecipeKind::Sequential,
        RecipeKind::SequentialHerd,
    ];
    let runs = naive_and_recipe.map(|recipe| {
        let endpoint = server.endpoint();
        let run_id = format!("herd-{}", recipe.workload_name());
        let cfg = quick(recipe, false);
        tokio::spawn(async move {
            run_quiet(cfg, 20, 8, &run_id, endpoint, rounds::drive::<Contenders>).await
        })
    });
    let mut per_release = std::collections::BTreeMap::new();
    for joined in runs {
        let (summary, ops) = joined.await.unwrap();
        let fair = summary.recipe != "lock-single-node";
        assert_safe_and_live(&summary, &ops, fair);
        assert!(summary.herd.releases >= 20, "{summary:?}");
        eprintln!(
            "{}: {:?} {:?}",
            summary.recipe, summary.herd, summary.own.latency
        );
        per_release.insert(summary.recipe, summary.herd);
    }
    let mean = |herd: &crate::workload::HerdStats| herd.notifications_mean.unwrap();
    let sequential = mean(&per_release["lock-sequential"]);
    assert!(sequential > 0.0, "{per_release:?}");
    for naive in ["lock-sequential-herd", "lock-single-node"] {
        let herd = &per_release[naive];
        assert!(
            mean(herd) >= 10.0 * sequential,
            "{naive}: {herd:?} against lock-sequential {sequential}"
        );
        assert!(herd.requests_mean > per_release["lock-sequential"].requests_mean);
    }
}

/// Staggered contenders on the sequential lock and on a lock that takes its line but grants by
/// a race (`Barging`): both stay exclusive and show several queue positions (a free lock, a
/// newcomer behind one, longer queues); the sequential lock keeps the order of its nodes,
/// and the barging one is caught passing waiters over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_granting_out_of_line_order_is_caught_passing_waiters_over() {
    let server = ZkServer::start();
    let runs = [RecipeKind::Sequential, RecipeKind::Barging].map(|recipe| {
        let endpoint = server.endpoint();
        let cfg = LockConfig {
            fencing: false,
            ..quick(recipe, false)
        };
        let run_id = format!("order-{}", recipe.workload_name());
        tokio::spawn(async move {
            run_quiet(cfg, 5, 8, &run_id, endpoint, rounds::drive::<Contenders>).await
        })
    });
    for (recipe, joined) in [RecipeKind::Sequential, RecipeKind::Barging]
        .into_iter()
        .zip(runs)
    {
        let (summary, ops) = joined.await.unwrap();
        let exclusive = check_lock_history(&ops, false, &CheckOptions::default()).unwrap();
        assert_eq!(
            exclusive.valid,
            Validity::Valid,
            "{recipe:?}: {exclusive:?}"
        );
        let contention = judge_lock(&ops, true, 10, Duration::ZERO);
        let seen = &contention.positions;
        assert!(
            seen.len() >= 3 && seen.contains_key(&0) && seen.contains_key(&1),
            "{recipe:?}: {contention:?} {summary:?}"
        );
        match recipe {
            RecipeKind::Sequential => assert!(contention.valid, "{contention:?}"),
            _ => assert!(
                contention.found.count(PASSED_OVER) > 0,
                "the out-of-order grants are caught: {contention:?}"
            ),
        }
    }
}

/// Three of five single-node contenders behind a proxy that drops their watch notifications
/// (slots 0, 2, 4 are bound to it), two straight to the server: the deaf ones wait on a lock
/// node whose deletion they never hear of while the two others take it again and again. The
/// unfair recipe promises nothing, so the run stays valid, but the starved waits are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_of_five_deaf_contenders_are_counted_starved_in_the_unfair_lock() {
    let server = ZkServer::start();
    let (_proxy, deaf) = deaf_proxy(&server).await;
    let direct = server.endpoint();
    let recorder = Arc::new(Recorder::in_memory());
    let (_keep, stop) = tokio::sync::watch::channel(false);
    let run = crate::generator::DriverRun {
        cfg: quick(RecipeKind::SingleNode, false),
        options: options(5000, 4000),
        slots: 5,
        time_limit: Duration::from_secs(8),
        run_id: "starve".into(),
        endpoints: vec![deaf, direct],
    };
    let summary = rounds::drive::<Contenders>(run, recorder.clone(), stop)
        .await
        .unwrap();
    let contention = judge_lock(&recorder.ops(), false, 10, Duration::ZERO);
    assert!(contention.valid, "a figure, not an anomaly: {contention:?}");
    assert!(
        contention.starved >= 2 && contention.longest_wait_handoffs > 20,
        "the deaf contenders starve: {contention:?} {summary:?}"
    );
    let starved: std::collections::BTreeSet<u64> =
        contention.starved_waits.iter().map(|w| w.process).collect();
    assert!(starved.len() >= 2, "{contention:?}");
}

/// Isolates the node of whoever holds the lock when it starts: cuts that node's proxy.
struct IsolateHolder {
    recorder: Arc<Recorder>,
    proxies: Vec<(String, Arc<CutProxy>)>,
}

impl IsolateHolder {
    /// The node of the process inside the critical section, if any.
    fn holder_node(&self) -> Option<String> {
        let mut inside = std::collections::HashMap::new();
        for op in self.recorder.ops().into_iter().filter(|o| o.f == "hold") {
            match op.kind {
                crate::history::OpType::Invoke => _ = inside.insert(op.process, op.node),
                _ => _ = inside.remove(&op.process),
            }
        }
        inside.into_values().next().flatten()
    }
}

#[async_trait::async_trait]
impl Nemesis for IsolateHolder {
    fn kind(&self) -> &str {
        "partition"
    }
    async fn start(&self) -> anyhow::Result<serde_json::Value> {
        for _ in 0..100 {
            if let Some(node) = self.holder_node() {
                let (_, proxy) = self.proxies.iter().find(|(n, _)| *n == node).unwrap();
                proxy.set_cut(true);
                return Ok(serde_json::json!({ "isolated": node }));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        anyhow::bail!("nobody held the lock")
    }
    async fn stop(&self) -> anyhow::Result<serde_json::Value> {
        self.proxies.iter().for_each(|(_, p)| p.set_cut(false));
        Ok(serde_json::json!("healed"))
    }
}

/// Two contenders, each behind its own proxy; the holder's proxy is cut for longer than the
/// session timeout while it holds the lock for longer still.
async fn isolate_the_holder(
    policy: OnDisconnect,
    server: &ZkServer,
) -> (RoundsSummary<LockOutcome>, Vec<Op>) {
    let upstream = format!("127.0.0.1:{}", server.endpoint().port)
        .parse()
        .unwrap();
    let mut proxies = Vec::new();
    let mut endpoints = Vec::new();
    for i in 0..2 {
        let proxy = Arc::new(CutProxy::start(upstream).await);
        let name = format!("n{i}");
        endpoints.push(NodeEndpoint {
            name: name.clone(),
            host: "127.0.0.1".into(),
            port: proxy.port(),
        });
        proxies.push((name, proxy));
    }
    let recorder = Arc::new(Recorder::in_memory());
    let nemesis: Arc<dyn Nemesis> = Arc::new(IsolateHolder {
        recorder: recorder.clone(),
        proxies,
    });
    let generator = faulted(2, 9000, 1000, 4000);
    let cfg = LockConfig {
        recipe: RecipeKind::Sequential,
        on_disconnect: policy,
        hold: ms(5000),
        steps: 10,
        pause: ms(100),
        // Steady contenders: the first holder must hold when the cut starts, 1 s in.
        contention: Contention {
            stagger: false,
            ..Contention::default()
        },
        ..LockConfig::default()
    };
    let run_id = format!("isolate-{policy:?}");
    let nemeses = vec![nemesis];
    let running = |target| {
        drive(
            &generator,
            &cfg,
            options(1000, 2000),
            target,
            rounds::drive::<Contenders>,
        )
    };
    let summary = run_faulted(&run_id, endpoints, nemeses, &recorder, running).await;
    (summary, recorder.ops())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_keeps_the_lock_while_isolated_overlaps_and_is_caught() {
    let server = ZkServer::start();
    let (keep, assume_lost) = tokio::join!(
        isolate_the_holder(OnDisconnect::Keep, &server),
        isolate_the_holder(OnDisconnect::AssumeLost, &server)
    );
    let opts = CheckOptions {
        time_limit: Some(Duration::from_secs(30)),
        ..CheckOptions::default()
    };
    let (summary, ops) = keep;
    let verdict = check_lock_history(&ops, true, &opts).unwrap();
    assert_eq!(verdict.valid, Validity::Invalid, "keep: {summary:?}");
    let overlaps = &verdict.mutual_exclusion.overlaps;
    assert!(!overlaps.is_empty(), "keep: {verdict:?}");
    assert!(
        overlaps.iter().all(|o| o.nemesis == ["partition"]),
        "{overlaps:?}"
    );
    assert!(summary.own.resource.max_inside >= 2, "{summary:?}");
    eprintln!("keep: {overlaps:?}");

    let (summary, ops) = assume_lost;
    let verdict = check_lock_history(&ops, true, &opts).unwrap();
    assert_eq!(verdict.valid, Validity::Valid, "assume-lost: {verdict:?}");
    assert!(
        summary.own.lost_while_holding >= 1,
        "assume-lost: {summary:?}"
    );
    assert_eq!(summary.own.resource.max_inside, 1, "{summary:?}");
}

/// Runs `recipe` (assume-lost) with 4 contenders on its own server, killed and restarted in
/// turn, and checks the history.
async fn through_kills(recipe: RecipeKind) {
    let cfg = quick(recipe, false);
    let (summary, ops) = run_through_kills(cfg, rounds::drive::<Contenders>, any_time).await;
    let name = summary.recipe;
    let opts = CheckOptions {
        time_limit: Some(Duration::from_secs(30)),
        ..CheckOptions::default()
    };
    let verdict = check_lock_history(&ops, true, &opts).unwrap();
    assert_eq!(verdict.valid, Validity::Valid, "{name}: {verdict:?}");
    assert_eq!(summary.own.resource.max_inside, 1, "{name}: {summary:?}");
    assert!(
        summary.own.acquire_info + summary.own.release_info > 0,
        "{name}: {summary:?}"
    );
    assert!(summary.own.acquired > 10, "{name}: {summary:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_locks_assuming_loss_stay_safe_when_the_server_is_killed() {
    tokio::join!(
        through_kills(RecipeKind::Sequential),
        through_kills(RecipeKind::Protected)
    );
}
