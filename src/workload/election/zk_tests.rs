//! The election recipes against a real ZooKeeper standalone server on loopback: safe (never
//! two leaders) and live (leadership changes often, every candidate leads) without faults, and
//! safe with failovers measured when the server is killed under the leader.

use super::driver::{Candidates, ElectionOutcome};
use super::{ElectionConfig, ElectionRecipe};
use crate::checker::election::check_election;
use crate::client::test_server::ZkServer;
use crate::client::NodeEndpoint;
use crate::history::{Op, OpType};
use crate::workload::rounds::fairness::judge_terms;
use crate::workload::rounds::Contention;
use crate::workload::rounds::{self, RoundsSummary};
use crate::workload::test_runs::{ms, open, run_quiet, run_through_kills};

/// Runs `recipe` with `candidates` for `secs` seconds and a short tenure.
async fn run(
    recipe: ElectionRecipe,
    candidates: usize,
    secs: u64,
    endpoint: NodeEndpoint,
) -> (RoundsSummary<ElectionOutcome>, Vec<Op>) {
    let cfg = ElectionConfig {
        recipe,
        tenure: ms(60),
        pause: ms(30),
        // Steady candidates: the failover times and process counts below assume them.
        contention: Contention {
            stagger: false,
            ..Contention::default()
        },
        ..ElectionConfig::default()
    };
    let run_id = format!("safe-{}", recipe.workload_name());
    run_quiet(
        cfg,
        candidates,
        secs,
        &run_id,
        endpoint,
        rounds::drive::<Candidates>,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_election_recipe_is_safe_and_live_without_faults() {
    let server = ZkServer::start();
    let runs = ElectionRecipe::ALL.map(|recipe| {
        let endpoint = server.endpoint();
        tokio::spawn(async move { run(recipe, 5, 8, endpoint).await })
    });
    let mut per_change = std::collections::HashMap::new();
    for joined in runs {
        let (summary, ops) = joined.await.unwrap();
        let name = summary.recipe;
        let verdict = check_election(&ops).unwrap();
        eprintln!(
            "{name}: {} terms, leaderless {} ms (longest {} ms), failover {:?}, herd {:?}",
            verdict.terms,
            verdict.leaderless_ns / 1_000_000,
            verdict.longest_leaderless_ns / 1_000_000,
            verdict.failover,
            summary.herd
        );
        assert!(verdict.valid, "{name}: {:?}", verdict.overlaps);
        let fair = name == "election-fair";
        let order = judge_terms(&ops, fair, 10, std::time::Duration::ZERO);
        assert!(
            order.valid,
            "{name}: office taken out of line order: {order:?}"
        );
        // Every campaign was recorded: its wait is a queue position.
        let campaigns = order.positions.values().sum::<u64>();
        assert!(campaigns >= verdict.terms, "{name}: {order:?}");
        assert_eq!(summary.own.max_in_office, 1, "{name}: {summary:?}");
        assert_eq!(verdict.terms, summary.own.terms, "{name}");
        assert!(verdict.terms_per_leader.len() >= 3, "{name}: {verdict:?}");
        assert!(
            summary.own.terms_per_candidate.iter().all(|&n| n > 0),
            "{name}: a candidate was never elected: {summary:?}"
        );
        assert!(verdict.terms > 20, "{name}: only {} terms", verdict.terms);
        assert_eq!(
            (
                summary.processes,
                summary.own.campaign_failed,
                summary.own.lost_in_office,
                summary.own.resign_failed
            ),
            (5, 0, 0, 0),
            "{name}: {summary:?}"
        );
        assert_eq!(verdict.failover.count + 1, verdict.terms, "{name}");
        assert!(verdict.failover.p50_ms < 60.0, "{name}: {verdict:?}");
        assert!(
            summary.herd.releases + 1 >= verdict.terms,
            "{name}: {summary:?}"
        );
        per_change.insert(name, summary.herd.notifications_mean.unwrap());
    }
    // The fair recipe wakes only the next in line; the unfair one wakes every follower.
    let (fair, unfair) = (per_change["election-fair"], per_change["election-unfair"]);
    assert!(fair > 0.0 && unfair >= 2.0 * fair, "{per_change:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaders_assuming_loss_stay_alone_when_the_server_is_killed() {
    let cfg = ElectionConfig {
        recipe: ElectionRecipe::Fair,
        tenure: ms(300),
        pause: ms(30),
        ..ElectionConfig::default()
    };
    // Each kill waits for a leader in office: the loss below is the test's, not the timing's.
    let in_office = |ops: &[Op]| open(ops, "lead");
    let (summary, ops) = run_through_kills(cfg, rounds::drive::<Candidates>, in_office).await;
    let verdict = check_election(&ops).unwrap();
    eprintln!("kill: {summary:?}\n{verdict:?}");
    assert!(verdict.valid, "{:?}", verdict.overlaps);
    assert_eq!(summary.own.max_in_office, 1, "{summary:?}");
    assert!(verdict.terms_lost >= 1, "a leader lost office: {verdict:?}");
    assert!(verdict.failover_after_loss.count >= 1, "{verdict:?}");
    // Failover after a kill waits for the restart: far longer than a resignation's.
    assert!(
        verdict.failover_after_loss.max_ms > verdict.failover.p50_ms,
        "{verdict:?}"
    );
    // Every restart early enough for the sessions to come back is followed by a new leader.
    let term_begins: Vec<u64> = ops
        .iter()
        .filter(|o| o.f == "lead" && o.kind == OpType::Invoke)
        .map(|o| o.time)
        .collect();
    let restarts: Vec<u64> = ops
        .iter()
        .filter(|o| o.f == "stop-kill" && o.kind != OpType::Invoke)
        .map(|o| o.time)
        .filter(|&t| t + 4_000_000_000 < 12_000_000_000)
        .collect();
    assert!(
        !restarts.is_empty(),
        "the server was restarted during the run"
    );
    for restart in restarts {
        assert!(
            term_begins.iter().any(|&t| t > restart),
            "nobody was elected after the restart at {restart} ns"
        );
    }
}
