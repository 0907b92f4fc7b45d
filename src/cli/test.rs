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
use crate::generator::{Faults, SharedSchedule, Target};
use crate::history::Recorder;
use crate::nemesis::{self, Ending};
use crate::progress::Progress;
use crate::store::{RunFolder, TestConfig};
use crate::workload::{self, Ran, Workload, WorkloadFile};

/// Arguments of `stampede test`.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// The workload: a name in workloads/ (register, lock-sequential, ...) or a path to a
    /// YAML file. Several (repeated, or separated by commas) run together: at once against
    /// one database under one nemesis schedule, each judged as if alone in a run folder of
    /// its own.
    #[arg(
        long = "workload",
        default_value = workload::DEFAULT,
        value_delimiter = ',',
        value_name = "WORKLOAD"
    )]
    pub(super) workloads: Vec<String>,
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
    /// The test's name in results/ (default: <workload>-<nemesis>); with workloads run
    /// together, one per workload in their order, or none.
    #[arg(long = "name", value_name = "NAME")]
    pub(super) names: Vec<String>,
    /// Where results go.
    #[arg(long, default_value = "results")]
    pub(super) results: PathBuf,
    /// The run's folder, instead of a new `<results>/<name>/<time>/` (as a suite or a sweep
    /// gives each of its runs); with workloads run together, one per workload in their order.
    #[arg(long = "run-dir", value_name = "DIR")]
    run_dirs: Vec<PathBuf>,
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

/// Runs `stampede test`; exits 0 valid, 1 anomalies found, 2 unknown or aborted (with workloads
/// run together, the worst of theirs: 1 if any found anomalies).
pub async fn run(args: TestArgs) -> anyhow::Result<ExitCode> {
    if !args.contenders.is_empty() {
        return super::sweep::run(&args);
    }
    let test = prepare(&args)?;
    let done = execute(&test, args.keep_db).await?;
    let mut worst = 0u8;
    for (member, executed) in test.members.iter().zip(done) {
        let ops = member.recorder.ops();
        let judging = super::verdict::Judging {
            folder: &member.folder,
            aborted: executed.aborted.as_deref(),
            unfinished: None,
            config: Some(&member.config),
            replicas: Some(&executed.replicas),
        };
        let workload = member.workload.as_ref();
        let verdict = super::verdict::judge(&judging, workload, &ops, executed.summary)?;
        if let Err(e) = workload.plots(&ops, member.folder.dir()) {
            eprintln!("warning: plots of {}: {e:#}", member.config.name);
        }
        println!("results: {}", member.folder.dir().display());
        println!("{}", verdict.line);
        worst = worse(worst, verdict.exit_code);
    }
    Ok(ExitCode::from(worst))
}

/// The worse of two exit codes of verdicts: anomalies found (1) over unknown (2) over valid.
fn worse(a: u8, b: u8) -> u8 {
    match (a, b) {
        (1, _) | (_, 1) => 1,
        _ => a.max(b),
    }
}

/// A test ready to run: everything checked, the database chosen, each workload's run folder
/// made with its `test.yaml` and its history open.
struct Prepared {
    members: Vec<Member>,
    control: Control,
    db: Arc<dyn Db>,
    nemeses: Vec<Arc<dyn nemesis::Nemesis>>,
    progress: Progress,
}

/// One workload of a test (a test runs one, or several together).
struct Member {
    workload: Box<dyn Workload>,
    /// The workload file as loaded, overrides applied.
    file: WorkloadFile,
    config: TestConfig,
    folder: RunFolder,
    recorder: Arc<Recorder>,
    /// The id of its run: one znode name under `/stampede`.
    run_id: String,
}

/// How a workload's run went, before it is judged.
struct Executed {
    /// Why it stopped early, if it did.
    aborted: Option<String>,
    /// The run's summary (with the servers' load per release when it counts releases).
    summary: Option<serde_json::Value>,
    /// The replicas compared after the run.
    replicas: Replicas,
}

/// Reads and checks the workload files, the nemesis package and the nodes (making the local
/// cluster when needed), then makes each workload's run folder with its `test.yaml` and
/// history: nothing touches a node before all of it is known good.
fn prepare(args: &TestArgs) -> anyhow::Result<Prepared> {
    let files = load_workloads(args)?;
    let nemesis_path = config::resolve("nemeses", &args.nemesis)?;
    let holder_op = files.iter().find_map(|l| l.workload.holder_op());
    let holders = holder_op.is_some();
    let nemesis_config = nemesis::load_package(&nemesis_path, holders, None)?;

    let control = targets_with_cluster(args)?;
    let choice = DbChoice {
        settings: files[0].file.db.clone(),
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
    let holder = Arc::new(HistoryHolder::new(holder_op));
    let nemeses = nemesis_config.build(&control, db.clone(), Some(holder.clone()))?;
    let names: Vec<String> = match args.names.is_empty() {
        false => args.names.clone(),
        true => files
            .iter()
            .map(|l| format!("{}-{}", stem(&l.path), stem(&nemesis_path)))
            .collect(),
    };
    let time_limit = files[0].file.generator.time_limit.0;
    let progress = Progress::new(time_limit);
    let nodes: Vec<String> = control
        .nodes()
        .iter()
        .map(|n| format!("{} {}@{}:{}", n.name, n.user, n.host, n.port))
        .collect();
    let mut members = Vec::new();
    for (
        i,
        Loaded {
            path,
            file,
            workload,
        },
    ) in files.into_iter().enumerate()
    {
        let folder = match args.run_dirs.get(i) {
            Some(dir) => RunFolder::create_at(dir)?,
            None => RunFolder::create(&args.results, &names[i])?,
        };
        let others = names.iter().enumerate().filter(|(j, _)| *j != i);
        let others = others.map(|(_, name)| name.clone()).collect();
        let config = TestConfig {
            name: names[i].clone(),
            db: db.name().to_string(),
            nodes: nodes.clone(),
            workload: file.with_settings(workload.settings()),
            nemesis: nemesis_config.clone(),
            together: others,
        };
        folder.write_config(&config)?;
        let shown = progress.clone();
        let recorder = Recorder::create(&folder.history_path())
            .with_context(|| format!("cannot write {}", folder.history_path().display()))?
            .observed_by(Box::new(move |op| shown.record(op)));
        let recorder = Arc::new(recorder);
        if holder_op.is_some() && workload.holder_op() == holder_op {
            holder.watch(recorder.clone());
        }
        let run_id = match names.len() {
            1 => folder.stamp(),
            _ => format!("{}-{}", folder.stamp(), stem(&path)),
        };
        members.push(Member {
            workload,
            file,
            config,
            folder,
            recorder,
            run_id,
        });
    }
    Ok(Prepared {
        members,
        control,
        db,
        nemeses,
        progress,
    })
}

/// A workload file of the test as loaded: where it is, its contents (overrides applied) and the
/// workload it describes.
struct Loaded {
    path: PathBuf,
    file: WorkloadFile,
    workload: Box<dyn Workload>,
}

/// Every workload file of the test, with the workload it describes. Workloads run together
/// share the first one's time limit and nemesis timing (set on the others as overrides, so
/// their `test.yaml` says what ran) and must agree on the database's settings.
fn load_workloads(args: &TestArgs) -> anyhow::Result<Vec<Loaded>> {
    let count = args.workloads.len();
    for (flag, given) in [
        ("--name", args.names.len()),
        ("--run-dir", args.run_dirs.len()),
    ] {
        anyhow::ensure!(
            given == 0 || given == count,
            "{flag}: given {given} times for {count} workload(s); give it once per workload"
        );
    }
    let mut overrides = args.overrides.clone();
    if let Some(limit) = &args.time_limit {
        overrides.push(format!("generator.time_limit={limit}").parse()?);
    }
    let mut files: Vec<Loaded> = Vec::new();
    for name in &args.workloads {
        let path = config::resolve("workloads", name)?;
        if let Some(same) = files.iter().find(|l| stem(&l.path) == stem(&path)) {
            anyhow::bail!(
                "--workload: {} and {} have one name; workloads run together need distinct names",
                same.path.display(),
                path.display()
            );
        }
        let mut own = overrides.clone();
        if let Some(first) = files.first() {
            let timing = &first.file.generator;
            for (field, value) in [
                ("time_limit", &timing.time_limit),
                ("nemesis_interval", &timing.nemesis_interval),
                ("nemesis_duration", &timing.nemesis_duration),
            ] {
                own.push(format!("generator.{field}={value}").parse()?);
            }
        }
        let (file, workload) = workload::load(&path, &own)?;
        if let Some(first) = files.first() {
            anyhow::ensure!(
                file.db == first.file.db,
                "{}: its db section differs from {}'s; workloads run together share one \
                 database",
                path.display(),
                first.path.display()
            );
        }
        files.push(Loaded {
            path,
            file,
            workload,
        });
    }
    Ok(files)
}

/// Sets the database up, runs the workloads under the nemesis schedule (every fault healed
/// whatever happens, Ctrl-C included), measures the servers' load and compares the replicas,
/// collects the servers' logs, and tears the database down unless `keep_db`. Returns how each
/// workload's run went, in order.
async fn execute(test: &Prepared, keep_db: bool) -> anyhow::Result<Vec<Executed>> {
    let (control, db) = (&test.control, test.db.as_ref());
    eprintln!(
        "setting up {} on {} nodes",
        db.name(),
        control.nodes().len()
    );
    db.setup(control).await?;
    let endpoints: Vec<NodeEndpoint> = control.nodes().iter().map(|n| endpoint(db, n)).collect();
    // The servers' load is a run's own only when it runs alone: sampled only then.
    let mntr_before = match test.members.len() {
        1 => Some(crate::db::mntr::sample(db, control.nodes()).await),
        _ => None,
    };
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let on_signal = nemesis::OnSignal(cancel_tx, Duration::from_secs(60));
    let runs = run_members(test, &endpoints, cancel_rx);
    let ending = nemesis::guarded(control, db, on_signal, runs).await;
    test.progress.finish();
    let server_load = match mntr_before {
        Some(before) => {
            let after = crate::db::mntr::sample(db, control.nodes()).await;
            Some(crate::db::mntr::ServerLoad::between(&before, &after))
        }
        None => None,
    };
    let mut replicas = Vec::new();
    for member in &test.members {
        replicas.push(compare_replicas(db, control, &member.run_id).await);
    }
    collect_logs(control, db, &test.members).await;
    if !keep_db {
        if let Err(e) = db.teardown(control).await {
            eprintln!("warning: tearing down {}: {e:#}", db.name());
        }
    }
    let outcomes: Vec<Result<Ran, String>> = match ending? {
        Ending::Finished(Ok(runs)) => runs
            .into_iter()
            .map(|r| r.map_err(|e| format!("{e:#}")))
            .collect(),
        Ending::Finished(Err(e)) => vec![Err(format!("{e:#}")); test.members.len()],
        Ending::Interrupted(signal) => {
            vec![Err(format!("interrupted by {signal}")); test.members.len()]
        }
    };
    let executed = outcomes
        .into_iter()
        .zip(replicas)
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
            let summary = ran.and_then(|ran| match &server_load {
                Some(load) => with_server_load(ran, load),
                None => ran.summary,
            });
            Executed {
                aborted,
                summary,
                replicas,
            }
        });
    Ok(executed.collect())
}

/// Runs every workload of the test against `endpoints`: one alone under its own nemesis
/// schedule, several at once under one shared schedule. Returns how each ended, in order.
async fn run_members(
    test: &Prepared,
    endpoints: &[NodeEndpoint],
    cancel: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Vec<anyhow::Result<Ran>>> {
    let target = |member: &Member, faults: Faults| Target {
        run_id: member.run_id.clone(),
        endpoints: endpoints.to_vec(),
        faults,
        recorder: member.recorder.clone(),
        cancel: cancel.clone(),
    };
    if let [member] = test.members.as_slice() {
        let faults = test.nemeses.clone().into();
        return Ok(vec![member.workload.run(target(member, faults)).await]);
    }
    let (schedule, handles) = SharedSchedule::new(test.nemeses.clone(), test.members.len());
    let runs = test
        .members
        .iter()
        .zip(handles)
        .map(|(member, handle)| member.workload.run(target(member, Faults::Shared(handle))));
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
