//! A test run on claimed nodes: set up, run, heal, compare, collect; then leave the nodes as
//! they were, whatever ended it.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;

use super::Claim;
use crate::checker::replicas::{self, Replicas};
use crate::client::NodeEndpoint;
use crate::control::Control;
use crate::db::Db;
use crate::generator::{Faults, SharedSchedule, Target};
use crate::history::Recorder;
use crate::nemesis::{self, Ending, Interrupts, Restart};
use crate::progress::{Phase, Progress};
use crate::store::{RunFolder, TestConfig};
use crate::workload::{Ran, Workload, WorkloadFile};

/// A test ready to run: everything checked, the database chosen, each workload's run folder
/// made with its `test.yaml` and its history open.
pub struct Test {
    /// The workloads, run alone or together.
    pub members: Vec<Member>,
    /// The nodes.
    pub control: Control,
    /// The database under test.
    pub db: Arc<dyn Db>,
    /// The nemesis package's faults.
    pub nemeses: Vec<Arc<dyn nemesis::Nemesis>>,
    /// The seed of the run's random choices: the faults' (drawn when they were built) and,
    /// split from it, each workload's.
    pub seed: u64,
    /// The progress line, moved from phase to phase.
    pub progress: Progress,
}

/// One workload of a test (a test runs one, or several together).
pub struct Member {
    /// The workload.
    pub workload: Box<dyn Workload>,
    /// The workload file as loaded, overrides applied.
    pub file: WorkloadFile,
    /// What `test.yaml` records.
    pub config: TestConfig,
    /// The run's folder.
    pub folder: RunFolder,
    /// The history being recorded.
    pub recorder: Arc<Recorder>,
    /// The id of its run: one znode name under `/stampede`.
    pub run_id: String,
}

/// How a workload's run went, before it is judged.
pub struct Executed {
    /// Why it stopped early, if it did (with what was cleaned afterwards).
    pub aborted: Option<String>,
    /// The run's summary (with the servers' load per release when it counts releases).
    pub summary: Option<serde_json::Value>,
    /// The replicas compared after the run.
    pub replicas: Replicas,
}

/// What the phases on the servers gave, when the run got as far as its workloads.
struct Phases {
    ending: Ending<Vec<anyhow::Result<Ran>>>,
    server_load: Option<crate::db::mntr::ServerLoad>,
    replicas: Vec<Replicas>,
}

/// Runs `test` on the nodes of `claim`: sets the database up, runs the workloads under the
/// nemesis schedule, heals, measures the servers' load, compares the replicas and collects
/// the servers' logs. Then, however that ended (an error, a signal in any phase, a panic),
/// heals every node, tears the database down unless `keep_db`, and releases the claim; a run
/// that stopped early says why and what was cleaned. Returns how each workload's run went, in
/// order. From its return on, a signal ends the process at once: the nodes are clean.
pub async fn execute(test: &Test, claim: Claim, keep_db: bool) -> Vec<Executed> {
    let interrupts = claim.interrupts().clone();
    let phases = AssertUnwindSafe(phases(test, &interrupts))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| Err(format!("{:#}", nemesis::panicked(panic))));
    test.progress.set_phase(Phase::Teardown);
    let cleaned = clean_up(&test.control, test.db.as_ref(), keep_db).await;
    claim.release().await;
    interrupts.exit_from_now(format!(
        "judging stopped; the nodes are clean; judge the history again with `stampede check {}`",
        test.members[0].folder.dir().display()
    ));
    let phases = match phases {
        Ok(phases) => phases,
        Err(why) => {
            let why = format!("{why}; {cleaned}");
            return test
                .members
                .iter()
                .map(|_| Executed {
                    aborted: Some(why.clone()),
                    summary: None,
                    replicas: Replicas::NotJudged("the run did not start".into()),
                })
                .collect();
        }
    };
    let outcomes: Vec<Result<Ran, String>> = match phases.ending {
        Ending::Finished(Ok(runs)) => runs
            .into_iter()
            .map(|r| r.map_err(|e| format!("{e:#}")))
            .collect(),
        Ending::Finished(Err(e)) => vec![Err(format!("{e:#}")); test.members.len()],
        Ending::Interrupted(signal) => {
            vec![Err(format!("interrupted by {signal}; {cleaned}")); test.members.len()]
        }
    };
    outcomes
        .into_iter()
        .zip(phases.replicas)
        .map(|(outcome, replicas)| {
            let (aborted, ran) = match outcome {
                Ok(ran) => (None, Some(ran)),
                Err(why) => (Some(why), None),
            };
            if let Some(ran) = ran.as_ref().filter(|r| !r.heal_failures.is_empty()) {
                eprintln!(
                    "warning: some faults could not be healed: {}",
                    ran.heal_failures.join("; ")
                );
            }
            let summary = ran.and_then(|ran| match &phases.server_load {
                Some(load) => with_server_load(ran, load),
                None => ran.summary,
            });
            Executed {
                aborted,
                summary,
                replicas,
            }
        })
        .collect()
}

/// The phases on the servers, each stopped by a signal: setup, the run (healed whatever
/// ends it), the load measured, the replicas compared, the logs collected. `Err` says why the
/// run never got to its workloads.
async fn phases(test: &Test, interrupts: &Interrupts) -> Result<Phases, String> {
    let (control, db) = (&test.control, test.db.as_ref());
    test.progress.set_phase(Phase::Setup);
    eprintln!(
        "setting up {} on {} nodes (seed {}: `--seed {}` makes this run's random choices again)",
        db.name(),
        control.nodes().len(),
        test.seed,
        test.seed
    );
    match interrupts.unless(db.setup(control)).await {
        Err(signal) => return Err(format!("interrupted by {signal} during setup")),
        Ok(Err(e)) => return Err(format!("setup failed: {e:#}")),
        Ok(Ok(())) => {}
    }
    let endpoints: Vec<NodeEndpoint> = control.nodes().iter().map(|n| endpoint(db, n)).collect();
    // The servers' load is a run's own only when it runs alone: sampled only then.
    let mntr_before = match test.members.len() {
        1 => Some(crate::db::mntr::sample(db, control.nodes()).await),
        _ => None,
    };
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let on_signal = nemesis::OnSignal(cancel_tx, Duration::from_secs(60));
    test.progress.set_phase(Phase::Run);
    let runs = async {
        let ran = run_members(test, &endpoints, cancel_rx).await;
        test.progress.set_phase(Phase::Heal);
        ran
    };
    let ending = nemesis::guarded(control, db, interrupts, on_signal, runs)
        .await
        .map_err(|e| format!("{e:#}"))?;
    test.progress.set_phase(Phase::Compare);
    let server_load = match mntr_before {
        Some(before) => interrupts
            .unless(crate::db::mntr::sample(db, control.nodes()))
            .await
            .ok()
            .map(|after| crate::db::mntr::ServerLoad::between(&before, &after)),
        None => None,
    };
    let mut replicas = Vec::new();
    for member in &test.members {
        let compared = interrupts.unless(compare_replicas(db, control, &member.run_id));
        replicas.push(compared.await.unwrap_or_else(|signal| {
            replicas::not_compared(format!("not compared: interrupted by {signal}"))
        }));
    }
    // Quick, and what a stopped run is diagnosed from: collected even after a signal.
    collect_logs(control, db, &test.members).await;
    Ok(Phases {
        ending,
        server_load,
        replicas,
    })
}

/// Leaves the nodes as they were before the run: every fault healed and, unless `keep_db`,
/// the database torn down. Says what it did, or what it could not do.
async fn clean_up(control: &Control, db: &dyn Db, keep_db: bool) -> String {
    let nodes = control.nodes().len();
    let mut said = Vec::new();
    let restart = match keep_db {
        true => Restart::Servers,
        false => Restart::Nothing,
    };
    match nemesis::heal(control, db, restart).await {
        Ok(()) => said.push(format!("faults healed on {nodes} nodes")),
        Err(e) => {
            eprintln!("warning: {e:#}");
            said.push(format!("NOT HEALED ({e:#}): run `stampede heal`"));
        }
    }
    if keep_db {
        said.push(format!("{} left running (--keep-db)", db.name()));
    } else {
        match db.teardown(control).await {
            Ok(()) => said.push(format!("{} removed from {nodes} nodes", db.name())),
            Err(e) => {
                eprintln!("warning: tearing down {}: {e:#}", db.name());
                said.push(format!(
                    "{} NOT removed ({e:#}): run `stampede db teardown`",
                    db.name()
                ));
            }
        }
    }
    said.push("run lock released".into());
    format!("cleaned: {}", said.join(", "))
}

/// Runs every workload of the test against `endpoints`: one alone under its own nemesis
/// schedule, several at once under one shared schedule. Returns how each ended, in order.
async fn run_members(
    test: &Test,
    endpoints: &[NodeEndpoint],
    cancel: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Vec<anyhow::Result<Ran>>> {
    let seeds = nemesis::Dice::for_workloads(test.seed);
    let target = |(i, member): (usize, &Member), faults: Faults| Target {
        run_id: member.run_id.clone(),
        seed: seeds.split(i as u64).roll(rand::Rng::gen),
        endpoints: endpoints.to_vec(),
        faults,
        recorder: member.recorder.clone(),
        cancel: cancel.clone(),
    };
    if let [member] = test.members.as_slice() {
        let faults = test.nemeses.clone().into();
        return Ok(vec![member.workload.run(target((0, member), faults)).await]);
    }
    let (schedule, handles) = SharedSchedule::new(test.nemeses.clone(), test.members.len());
    let runs = test
        .members
        .iter()
        .enumerate()
        .zip(handles)
        .map(|(member, handle)| {
            member
                .1
                .workload
                .run(target(member, Faults::Shared(handle)))
        });
    let shared = schedule.run(&test.members[0].file.generator, cancel.clone());
    let ((), ran) = tokio::join!(shared, futures::future::join_all(runs));
    Ok(ran)
}

/// The bound on the replicas' comparison after a run: the ensemble settling, then every
/// server read until they meet at one zxid.
const REPLICAS_LIMIT: Duration = Duration::from_secs(30);

/// Reads every server's tree under run `run_id`'s root, each through a session pinned to it,
/// and compares them.
async fn compare_replicas(db: &dyn Db, control: &Control, run_id: &str) -> Replicas {
    let servers = crate::db::servers(db, control.nodes());
    let endpoints: Vec<NodeEndpoint> = servers.iter().map(|n| endpoint(db, n)).collect();
    let root = crate::client::replica_read::run_root(run_id);
    eprintln!(
        "comparing the trees under {root} on {} servers",
        endpoints.len()
    );
    let reading =
        crate::client::replica_read::read_every_server(&endpoints, &root, REPLICAS_LIMIT).await;
    replicas::judge(reading)
}

/// Where clients reach `node`'s server.
fn endpoint(db: &dyn Db, node: &crate::control::Node) -> NodeEndpoint {
    let address = db.client_address(node);
    let (host, port) = address.rsplit_once(':').unwrap_or((&address, "2181"));
    NodeEndpoint {
        name: node.name.clone(),
        host: host.to_string(),
        port: port.parse().unwrap_or(2181),
    }
}

/// Copies every node's logs into `<dir>/nodes/<node>/` of the first workload's run folder,
/// and links them into the other workloads' folders; a node that cannot be reached is
/// reported and skipped, so the results of the run are never lost to it.
async fn collect_logs(control: &Control, db: &dyn Db, members: &[Member]) {
    let Some((first, others)) = members.split_first() else {
        return;
    };
    let folder = &first.folder;
    let fetches = control.nodes().iter().map(|n| async move {
        (
            n,
            db.collect_logs(control, n, &folder.node_dir(&n.name)).await,
        )
    });
    for (node, result) in futures::future::join_all(fetches).await {
        if let Err(e) = result {
            eprintln!("warning: logs of {}: {e:#}", node.name);
        }
    }
    for node in control.nodes() {
        for other in others {
            let (from, to) = (
                folder.node_dir(&node.name),
                other.folder.node_dir(&node.name),
            );
            if let Err(e) = link_tree(&from, &to) {
                eprintln!(
                    "warning: logs of {} into {}: {e:#}",
                    node.name,
                    to.display()
                );
            }
        }
    }
}

/// Makes `to` a copy of the folder `from`, its files hard links where the filesystem allows
/// (copies elsewhere); nothing when `from` does not exist.
fn link_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    if !from.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            link_tree(&entry.path(), &target)?;
        } else if std::fs::hard_link(entry.path(), &target).is_err() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// The run's summary with the servers' own figures beside it when the run counts releases
/// (lock hand-offs, leadership changes): watch notifications (from the fan-out summaries) and
/// packets received, summed over the servers, in all and per release.
fn with_server_load(ran: Ran, load: &crate::db::mntr::ServerLoad) -> Option<serde_json::Value> {
    let mut summary = ran.summary?;
    let Some(releases) = ran.releases else {
        return Some(summary);
    };
    let per_release = |total: f64| {
        if releases == 0 {
            0.0
        } else {
            total / releases as f64
        }
    };
    summary["server"] = serde_json::json!({
        "nodes": load.nodes,
        "releases": releases,
        "watch_notifications": load.watch_notifications,
        "packets_received": load.packets_received,
        "notifications_per_release": per_release(load.watch_notifications),
        "packets_per_release": per_release(load.packets_received),
    });
    Some(summary)
}
