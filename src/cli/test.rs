//! `stampede test`: the main job. Brings up what it needs (the local cluster when no nodes are
//! given, the database), runs a workload while a nemesis injects faults, records the history,
//! heals everything, checks the history, and leaves a results folder with plots.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::db::DbChoice;
use super::targets::TargetArgs;
use crate::client::NodeEndpoint;
use crate::cluster::{self, Spec};
use crate::config::{self, Override};
use crate::control::Control;
use crate::db::Db;
use crate::generator::RunSummary;
use crate::history::Recorder;
use crate::nemesis::{self, Ending, NemesisConfig};
use crate::progress::Progress;
use crate::workload::election::{self, ElectionRunSummary};
use crate::workload::lock::{self, LockRunSummary};
use crate::workload::{WorkloadFile, WorkloadKind};

/// Arguments of `stampede test`.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// The workload: a name in workloads/ (register) or a path to a YAML file.
    #[arg(long, default_value = "register")]
    workload: String,
    /// The nemesis package: a name in nemeses/ (partition, kill, pause, none) or a path.
    #[arg(long, default_value = "partition")]
    nemesis: String,
    /// Override any field of the workload file, e.g. `--set generator.rate=100`
    /// (repeatable; nemesis fields as `nemesis.faults=[...]`).
    #[arg(long = "set", value_name = "FIELD=VALUE")]
    overrides: Vec<Override>,
    /// Shortcut for `--set generator.time_limit=…`.
    #[arg(long, value_name = "DURATION")]
    time_limit: Option<String>,
    /// The test's name in results/ (default: <workload>-<nemesis>).
    #[arg(long)]
    name: Option<String>,
    /// Where results go.
    #[arg(long, default_value = "results")]
    results: PathBuf,
    /// Nodes in the local cluster when it has to be made.
    #[arg(long, default_value_t = 5)]
    cluster_nodes: usize,
    /// Leave the database running after the test (it is torn down by default).
    #[arg(long)]
    keep_db: bool,
    #[command(flatten)]
    targets: TargetArgs,
    #[command(flatten)]
    db: DbChoice,
}

/// The effective configuration of a test, saved as `test.yaml` with its results.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestConfig {
    /// The test's name.
    pub name: String,
    /// The database under test.
    pub db: String,
    /// The nodes, by name and address.
    pub nodes: Vec<String>,
    /// The workload file as loaded, with overrides applied.
    pub workload: WorkloadFile,
    /// The nemesis package.
    pub nemesis: NemesisConfig,
}

/// Runs `stampede test`; exits 0 valid, 1 anomalies found, 2 unknown or aborted.
pub async fn run(args: TestArgs) -> anyhow::Result<ExitCode> {
    let mut overrides = args.overrides.clone();
    if let Some(limit) = &args.time_limit {
        overrides.push(format!("generator.time_limit={limit}").parse()?);
    }
    let workload_path = config::resolve("workloads", &args.workload)?;
    let workload_file: WorkloadFile = config::load_with_overrides(&workload_path, &overrides)?;
    workload_file
        .validate()
        .map_err(|e| anyhow::anyhow!("{}: {e}", workload_path.display()))?;
    let nemesis_path = config::resolve("nemeses", &args.nemesis)?;
    let nemesis_config: NemesisConfig = config::load(&nemesis_path)?;

    let control = targets_with_cluster(&args)?;
    let db: Arc<dyn Db> = args
        .db
        .build(&args.targets, control.nodes().to_vec())?
        .into();
    let nemeses = nemesis_config.build(&control, db.clone())?;
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("{}-{}", stem(&workload_path), stem(&nemesis_path)));
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "");
    let dir = args.results.join(&name).join(&stamp);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    link_latest(&args.results, &dir)?;
    let test = TestConfig {
        name: name.clone(),
        db: db.name().to_string(),
        nodes: control
            .nodes()
            .iter()
            .map(|n| format!("{} {}@{}:{}", n.name, n.user, n.host, n.port))
            .collect(),
        workload: workload_file.clone(),
        nemesis: nemesis_config,
    };
    config::save(&dir.join("test.yaml"), &test)?;
    eprintln!(
        "setting up {} on {} nodes",
        db.name(),
        control.nodes().len()
    );
    db.setup(&control).await?;

    let time_limit = workload_file.generator.time_limit.0;
    let progress = Progress::new(time_limit);
    let shown = progress.clone();
    let recorder = Recorder::create(&dir.join("history.jsonl"))
        .with_context(|| format!("cannot write {}", dir.join("history.jsonl").display()))?
        .observed_by(Box::new(move |op| shown.record(op)));
    let recorder = Arc::new(recorder);
    let endpoints: Vec<NodeEndpoint> = control
        .nodes()
        .iter()
        .map(|n| endpoint(db.as_ref(), n))
        .collect();
    let mntr_before = crate::db::mntr::sample(db.as_ref(), control.nodes()).await;
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let on_signal = nemesis::OnSignal::Cancel(cancel_tx, Duration::from_secs(60));
    let ending = match workload_file.workload {
        WorkloadKind::Register => {
            let workload = workload_file.build(&stamp, rand::random())?;
            let run = crate::generator::run(
                &workload_file.generator,
                workload,
                endpoints,
                nemeses,
                recorder.clone(),
                cancel_rx,
            );
            nemesis::guarded(&control, db.as_ref(), on_signal, async {
                run.await.map(RunOutcome::Register)
            })
            .await
        }
        WorkloadKind::Lock => {
            let run = lock::run(
                &workload_file,
                &stamp,
                endpoints,
                nemeses,
                recorder.clone(),
                cancel_rx,
            );
            nemesis::guarded(&control, db.as_ref(), on_signal, async {
                run.await.map(|s| RunOutcome::Lock(Box::new(s)))
            })
            .await
        }
        WorkloadKind::Election => {
            let run = election::run(
                &workload_file,
                &stamp,
                endpoints,
                nemeses,
                recorder.clone(),
                cancel_rx,
            );
            nemesis::guarded(&control, db.as_ref(), on_signal, async {
                run.await.map(|s| RunOutcome::Election(Box::new(s)))
            })
            .await
        }
    };
    progress.finish();
    let mntr_after = crate::db::mntr::sample(db.as_ref(), control.nodes()).await;
    let server_load = crate::db::mntr::ServerLoad::between(&mntr_before, &mntr_after);
    collect_logs(&control, db.as_ref(), &dir).await;
    if !args.keep_db {
        if let Err(e) = db.teardown(&control).await {
            eprintln!("warning: tearing down {}: {e:#}", db.name());
        }
    }
    let (aborted, outcome) = match ending? {
        Ending::Finished(Ok(outcome)) => {
            if !outcome.heal_failures().is_empty() {
                eprintln!(
                    "warning: some faults could not be healed: {}",
                    outcome.heal_failures().join("; ")
                );
            }
            (None, Some(outcome))
        }
        Ending::Finished(Err(e)) => (Some(format!("{e:#}")), None),
        Ending::Interrupted(signal) => (Some(format!("interrupted by {signal}")), None),
    };
    let ops = recorder.ops();
    let verdict = match workload_file.workload {
        WorkloadKind::Register => {
            let sync_reads = workload_file.register.sync_reads;
            super::verdict::judge_run(&dir, &ops, sync_reads, aborted.as_deref())?
        }
        WorkloadKind::Lock => {
            let summary = match &outcome {
                Some(RunOutcome::Lock(summary)) => {
                    let mut value = serde_json::to_value(summary)?;
                    value["server"] = server_herd(&server_load, summary.herd.releases);
                    Some(value)
                }
                _ => None,
            };
            super::verdict::judge_lock_run(
                &dir,
                &ops,
                workload_file.lock.fencing,
                summary,
                aborted.as_deref(),
            )?
        }
        WorkloadKind::Election => {
            let summary = match &outcome {
                Some(RunOutcome::Election(summary)) => Some(serde_json::to_value(summary)?),
                _ => None,
            };
            super::verdict::judge_election_run(&dir, &ops, summary, aborted.as_deref())?
        }
    };
    if let Err(e) = crate::report::write_plots(&ops, &dir) {
        eprintln!("warning: plots: {e:#}");
    }
    println!("results: {}", dir.display());
    println!("{}", verdict.line);
    Ok(ExitCode::from(verdict.exit_code))
}

/// How the main job of a run ended, by workload.
enum RunOutcome {
    Register(RunSummary),
    Lock(Box<LockRunSummary>),
    Election(Box<ElectionRunSummary>),
}

impl RunOutcome {
    /// Faults that could not be healed.
    fn heal_failures(&self) -> &[String] {
        match self {
            RunOutcome::Register(s) => &s.heal_failures,
            RunOutcome::Lock(s) => &s.heal_failures,
            RunOutcome::Election(s) => &s.heal_failures,
        }
    }
}

/// A controller for the chosen nodes, making the local cluster first when none are given.
fn targets_with_cluster(args: &TestArgs) -> anyhow::Result<Control> {
    if args.targets.uses_local_cluster() && !cluster::Cluster::named(&args.targets.cluster).exists()
    {
        eprintln!(
            "making the local cluster {} with {} nodes",
            args.targets.cluster, args.cluster_nodes
        );
        let spec = Spec {
            name: args.targets.cluster.clone(),
            nodes: args.cluster_nodes,
            subnet: cluster::parse_subnet("10.241.0.0/24")?,
        };
        cluster::up(spec)?;
    }
    args.targets.control()
}

fn endpoint(db: &dyn Db, node: &crate::control::Node) -> NodeEndpoint {
    let address = db.client_address(node);
    let (host, port) = address.rsplit_once(':').unwrap_or((&address, "2181"));
    NodeEndpoint {
        name: node.name.clone(),
        host: host.to_string(),
        port: port.parse().unwrap_or(2181),
    }
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "test".into())
}

/// Points `results/latest` at the newest run.
fn link_latest(results: &Path, dir: &Path) -> anyhow::Result<()> {
    let latest = results.join("latest");
    let target = dir.strip_prefix(results).unwrap_or(dir);
    let _ = std::fs::remove_file(&latest);
    std::os::unix::fs::symlink(target, &latest)
        .with_context(|| format!("cannot link {}", latest.display()))
}

/// Copies every node's logs into `<dir>/nodes/<node>/`; a node that cannot be reached is
/// reported and skipped, so the results of the run are never lost to it.
async fn collect_logs(control: &Control, db: &dyn Db, dir: &Path) {
    let fetches = control.nodes().iter().map(|n| async move {
        (
            n,
            db.collect_logs(control, n, &dir.join("nodes").join(&n.name))
                .await,
        )
    });
    for (node, result) in futures::future::join_all(fetches).await {
        if let Err(e) = result {
            eprintln!("warning: logs of {}: {e:#}", node.name);
        }
    }
}

/// The servers' own figures for a lock run, per release: watch notifications (from the
/// fan-out summaries) and packets received, summed over the servers.
fn server_herd(load: &crate::db::mntr::ServerLoad, releases: u64) -> serde_json::Value {
    let per_release = |total: f64| {
        if releases == 0 {
            0.0
        } else {
            total / releases as f64
        }
    };
    serde_json::json!({
        "nodes": load.nodes,
        "releases": releases,
        "watch_notifications": load.watch_notifications,
        "packets_received": load.packets_received,
        "notifications_per_release": per_release(load.watch_notifications),
        "packets_per_release": per_release(load.packets_received),
    })
}
