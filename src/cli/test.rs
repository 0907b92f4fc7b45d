//! `stampede test`: the main job. Brings up what it needs (the local cluster when no nodes are
//! given, the database), runs a workload while a nemesis injects faults, records the history,
//! heals everything, checks the history, and leaves a results folder with plots.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::db::DbChoice;
use super::holder::HistoryHolder;
use super::targets::TargetArgs;
use crate::checker::replicas::{self, Replicas};
use crate::client::NodeEndpoint;
use crate::cluster::{self, Spec};
use crate::config::{self, Override};
use crate::control::Control;
use crate::db::Db;
use crate::generator::Target;
use crate::history::Recorder;
use crate::nemesis::{self, Ending};
use crate::progress::Progress;
use crate::store::{RunFolder, TestConfig};
use crate::workload::{self, Ran, Workload};

/// Arguments of `stampede test`.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// The workload: a name in workloads/ (register, lock-sequential, ...) or a path to a
    /// YAML file.
    #[arg(long, default_value = workload::DEFAULT)]
    pub(super) workload: String,
    /// The nemesis package: a name in nemeses/ (partition, kill, pause, none) or a path.
    #[arg(long, default_value = "partition")]
    pub(super) nemesis: String,
    /// Override any field of the workload file, e.g. `--set generator.rate=100`
    /// (repeatable; nemesis fields as `nemesis.faults=[...]`).
    #[arg(long = "set", value_name = "FIELD=VALUE")]
    overrides: Vec<Override>,
    /// Shortcut for `--set generator.time_limit=…`: seconds (`30`) or with a unit (`2m`).
    #[arg(long, value_name = "DURATION", value_parser = config::Duration::parse_cli)]
    time_limit: Option<config::Duration>,
    /// The test's name in results/ (default: <workload>-<nemesis>).
    #[arg(long)]
    pub(super) name: Option<String>,
    /// Where results go.
    #[arg(long, default_value = "results")]
    pub(super) results: PathBuf,
    /// The run's folder, instead of a new `<results>/<name>/<time>/` (as a suite or a sweep
    /// gives each of its runs).
    #[arg(long, value_name = "DIR")]
    run_dir: Option<PathBuf>,
    /// Nodes in the local cluster when it has to be made.
    #[arg(long, default_value_t = 5)]
    cluster_nodes: usize,
    /// Leave the database running after the test (it is torn down by default).
    #[arg(long)]
    keep_db: bool,
    /// Run one test per number of contenders in the list (e.g. `5,20,100`) of a lock workload
    /// (`--workload lock`: every lock recipe), one after another, then draw `herd.png` and
    /// `recipes.png` of them all into `results/sweep-<time>/`.
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub(super) contenders: Vec<u64>,
    #[command(flatten)]
    targets: TargetArgs,
    #[command(flatten)]
    db: DbChoice,
}

/// Runs `stampede test`; exits 0 valid, 1 anomalies found, 2 unknown or aborted.
pub async fn run(args: TestArgs) -> anyhow::Result<ExitCode> {
    if !args.contenders.is_empty() {
        return super::sweep::run(&args);
    }
    let test = prepare(&args)?;
    let done = execute(&test, args.keep_db).await?;
    let ops = test.recorder.ops();
    let judging = super::verdict::Judging {
        folder: &test.folder,
        aborted: done.aborted.as_deref(),
        config: Some(&test.config),
        replicas: Some(&done.replicas),
    };
    let verdict = super::verdict::judge(&judging, test.workload.as_ref(), &ops, done.summary)?;
    if let Err(e) = test.workload.plots(&ops, test.folder.dir()) {
        eprintln!("warning: plots: {e:#}");
    }
    println!("results: {}", test.folder.dir().display());
    println!("{}", verdict.line);
    Ok(ExitCode::from(verdict.exit_code))
}

/// A test ready to run: everything checked, the database chosen, the run folder made with
/// its `test.yaml`, the history open.
struct Prepared {
    workload: Box<dyn Workload>,
    config: TestConfig,
    control: Control,
    db: Arc<dyn Db>,
    nemeses: Vec<Arc<dyn nemesis::Nemesis>>,
    folder: RunFolder,
    recorder: Arc<Recorder>,
    progress: Progress,
}

/// How a test's run went, before it is judged.
struct Executed {
    /// Why it stopped early, if it did.
    aborted: Option<String>,
    /// The run's summary (with the servers' load per release when it counts releases).
    summary: Option<serde_json::Value>,
    /// The replicas compared after the run.
    replicas: Replicas,
}

/// Reads and checks the workload file, the nemesis package and the nodes (making the local
/// cluster when needed), then makes the run folder with its `test.yaml` and history: nothing
/// touches a node before all of it is known good.
fn prepare(args: &TestArgs) -> anyhow::Result<Prepared> {
    let mut overrides = args.overrides.clone();
    if let Some(limit) = &args.time_limit {
        overrides.push(format!("generator.time_limit={limit}").parse()?);
    }
    let workload_path = config::resolve("workloads", &args.workload)?;
    let (workload_file, workload) = workload::load(&workload_path, &overrides)?;
    let nemesis_path = config::resolve("nemeses", &args.nemesis)?;
    let holders = workload.holder_op().is_some();
    let nemesis_config = nemesis::load_package(&nemesis_path, holders, None)?;

    let control = targets_with_cluster(args)?;
    let choice = DbChoice {
        settings: workload_file.db.clone(),
        ..args.db.clone()
    };
    let db: Arc<dyn Db> = choice
        .build(&args.targets, control.nodes().to_vec())?
        .into();
    let db = nemesis::lazyfs::for_package(&nemesis_config, db);
    let aim = nemesis::Aim {
        nodes: control.nodes(),
        db: db.as_ref(),
    };
    nemesis_config.check(&nemesis_path, holders, Some(&aim))?;
    let holder = Arc::new(HistoryHolder::new(workload.holder_op()));
    let nemeses = nemesis_config.build(&control, db.clone(), Some(holder.clone()))?;
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("{}-{}", stem(&workload_path), stem(&nemesis_path)));
    let folder = match &args.run_dir {
        Some(dir) => RunFolder::create_at(dir)?,
        None => RunFolder::create(&args.results, &name)?,
    };
    let config = TestConfig {
        name,
        db: db.name().to_string(),
        nodes: control
            .nodes()
            .iter()
            .map(|n| format!("{} {}@{}:{}", n.name, n.user, n.host, n.port))
            .collect(),
        workload: workload_file.with_settings(workload.settings()),
        nemesis: nemesis_config,
    };
    folder.write_config(&config)?;
    let progress = Progress::new(workload_file.generator.time_limit.0);
    let shown = progress.clone();
    let recorder = Recorder::create(&folder.history_path())
        .with_context(|| format!("cannot write {}", folder.history_path().display()))?
        .observed_by(Box::new(move |op| shown.record(op)));
    let recorder = Arc::new(recorder);
    holder.watch(recorder.clone());
    Ok(Prepared {
        workload,
        config,
        control,
        db,
        nemeses,
        folder,
        recorder,
        progress,
    })
}

/// Sets the database up, runs the workload under the nemesis schedule (every fault healed
/// whatever happens, Ctrl-C included), measures the servers' load and compares the replicas,
/// collects the servers' logs, and tears the database down unless `keep_db`.
async fn execute(test: &Prepared, keep_db: bool) -> anyhow::Result<Executed> {
    let (control, db) = (&test.control, test.db.as_ref());
    eprintln!(
        "setting up {} on {} nodes",
        db.name(),
        control.nodes().len()
    );
    db.setup(control).await?;
    let endpoints: Vec<NodeEndpoint> = control.nodes().iter().map(|n| endpoint(db, n)).collect();
    let mntr_before = crate::db::mntr::sample(db, control.nodes()).await;
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let on_signal = nemesis::OnSignal(cancel_tx, Duration::from_secs(60));
    let target = Target {
        run_id: test.folder.stamp(),
        endpoints,
        nemeses: test.nemeses.clone(),
        recorder: test.recorder.clone(),
        cancel: cancel_rx,
    };
    let ending = nemesis::guarded(control, db, on_signal, test.workload.run(target)).await;
    test.progress.finish();
    let mntr_after = crate::db::mntr::sample(db, control.nodes()).await;
    let server_load = crate::db::mntr::ServerLoad::between(&mntr_before, &mntr_after);
    let replicas = compare_replicas(db, control, &test.folder.stamp()).await;
    collect_logs(control, db, &test.folder).await;
    if !keep_db {
        if let Err(e) = db.teardown(control).await {
            eprintln!("warning: tearing down {}: {e:#}", db.name());
        }
    }
    let (aborted, ran) = match ending? {
        Ending::Finished(Ok(ran)) => {
            if !ran.heal_failures.is_empty() {
                eprintln!(
                    "warning: some faults could not be healed: {}",
                    ran.heal_failures.join("; ")
                );
            }
            (None, Some(ran))
        }
        Ending::Finished(Err(e)) => (Some(format!("{e:#}")), None),
        Ending::Interrupted(signal) => (Some(format!("interrupted by {signal}")), None),
    };
    Ok(Executed {
        aborted,
        summary: ran.and_then(|ran| with_server_load(ran, &server_load)),
        replicas,
    })
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

/// A config file's name without its extension.
pub(super) fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "test".into())
}

/// Copies every node's logs into `<dir>/nodes/<node>/`; a node that cannot be reached is
/// reported and skipped, so the results of the run are never lost to it.
async fn collect_logs(control: &Control, db: &dyn Db, folder: &RunFolder) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_time_limit_is_seconds() {
        #[derive(clap::Parser)]
        struct Wrap {
            #[command(flatten)]
            args: TestArgs,
        }
        let limit = |flag: &str| {
            <Wrap as clap::Parser>::try_parse_from(["stampede", "--time-limit", flag])
                .map(|w| w.args.time_limit.map(|d| d.0))
        };
        assert_eq!(limit("30").unwrap(), Some(Duration::from_secs(30)));
        assert_eq!(limit("2m").unwrap(), Some(Duration::from_secs(120)));
        assert!(limit("soon").is_err());
    }
}
