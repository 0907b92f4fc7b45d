//! `stampede test`: the main job. Brings up what it needs (the local cluster when no nodes are
//! given, the database), runs a workload while a nemesis injects faults, records the history,
//! heals everything, checks the history, and leaves a results folder with plots.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::db::DbChoice;
use super::targets::TargetArgs;
use crate::checker::liveness::LivenessOptions;
use crate::client::NodeEndpoint;
use crate::cluster::{self, Spec};
use crate::config::{self, Override};
use crate::control::Control;
use crate::db::Db;
use crate::generator::{RunSummary, Target};
use crate::history::Recorder;
use crate::nemesis::{self, Ending};
use crate::progress::Progress;
use crate::store::{RunFolder, TestConfig};
use crate::workload::barrier::{self, BarrierRunSummary};
use crate::workload::election::{self, ElectionRunSummary};
use crate::workload::lock::{self, LockRunSummary};
use crate::workload::queue::{self, QueueRunSummary};
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
    /// Shortcut for `--set generator.time_limit=…`: seconds (`30`) or with a unit (`2m`).
    #[arg(long, value_name = "DURATION", value_parser = config::Duration::parse_cli)]
    time_limit: Option<config::Duration>,
    /// The test's name in results/ (default: <workload>-<nemesis>).
    #[arg(long)]
    name: Option<String>,
    /// Where results go.
    #[arg(long, default_value = "results")]
    results: PathBuf,
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
    contenders: Vec<u64>,
    #[command(flatten)]
    targets: TargetArgs,
    #[command(flatten)]
    db: DbChoice,
}

/// Runs `stampede test`; exits 0 valid, 1 anomalies found, 2 unknown or aborted.
pub async fn run(args: TestArgs) -> anyhow::Result<ExitCode> {
    if !args.contenders.is_empty() {
        return sweep(&args);
    }
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
    let holders = matches!(
        workload_file.workload,
        WorkloadKind::Lock | WorkloadKind::Election
    );
    let nemesis_config = nemesis::load_package(&nemesis_path, holders, None)?;

    let control = targets_with_cluster(&args)?;
    let db: Arc<dyn Db> = args
        .db
        .build(&args.targets, control.nodes().to_vec())?
        .into();
    let aim = nemesis::Aim {
        nodes: control.nodes(),
        db: db.as_ref(),
    };
    nemesis_config.check(&nemesis_path, holders, Some(&aim))?;
    let holder = Arc::new(HistoryHolder::default());
    let nemeses = nemesis_config.build(&control, db.clone(), Some(holder.clone()))?;
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("{}-{}", stem(&workload_path), stem(&nemesis_path)));
    let folder = match &args.run_dir {
        Some(dir) => RunFolder::create_at(dir)?,
        None => RunFolder::create(&args.results, &name)?,
    };
    let dir = folder.dir().to_path_buf();
    let stamp = folder.stamp();
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
    folder.write_config(&test)?;
    eprintln!(
        "setting up {} on {} nodes",
        db.name(),
        control.nodes().len()
    );
    db.setup(&control).await?;

    let time_limit = workload_file.generator.time_limit.0;
    let progress = Progress::new(time_limit);
    let shown = progress.clone();
    let recorder = Recorder::create(&folder.history_path())
        .with_context(|| format!("cannot write {}", folder.history_path().display()))?
        .observed_by(Box::new(move |op| shown.record(op)));
    let recorder = Arc::new(recorder);
    let _ = holder.0.set(recorder.clone());
    let endpoints: Vec<NodeEndpoint> = control
        .nodes()
        .iter()
        .map(|n| endpoint(db.as_ref(), n))
        .collect();
    let mntr_before = crate::db::mntr::sample(db.as_ref(), control.nodes()).await;
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let on_signal = nemesis::OnSignal(cancel_tx, Duration::from_secs(60));
    let target = Target {
        run_id: stamp.clone(),
        endpoints: endpoints.clone(),
        nemeses: nemeses.clone(),
        recorder: recorder.clone(),
        cancel: cancel_rx.clone(),
    };
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
            let run = lock::run(&workload_file, target);
            nemesis::guarded(&control, db.as_ref(), on_signal, async {
                run.await.map(|s| RunOutcome::Lock(Box::new(s)))
            })
            .await
        }
        WorkloadKind::Election => {
            let run = election::run(&workload_file, target);
            nemesis::guarded(&control, db.as_ref(), on_signal, async {
                run.await.map(|s| RunOutcome::Election(Box::new(s)))
            })
            .await
        }
        WorkloadKind::Barrier => {
            let run = barrier::run(&workload_file, target);
            nemesis::guarded(&control, db.as_ref(), on_signal, async {
                run.await.map(|s| RunOutcome::Barrier(Box::new(s)))
            })
            .await
        }
        WorkloadKind::Queue => {
            let run = queue::run(
                &workload_file,
                &stamp,
                endpoints,
                nemeses,
                recorder.clone(),
                cancel_rx,
            );
            nemesis::guarded(&control, db.as_ref(), on_signal, async {
                run.await.map(|s| RunOutcome::Queue(Box::new(s)))
            })
            .await
        }
    };
    progress.finish();
    let mntr_after = crate::db::mntr::sample(db.as_ref(), control.nodes()).await;
    let server_load = crate::db::mntr::ServerLoad::between(&mntr_before, &mntr_after);
    let replicas =
        crate::db::replicas::compare(db.as_ref(), control.nodes(), Duration::from_secs(15)).await;
    collect_logs(&control, db.as_ref(), &folder).await;
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
    let judging = super::verdict::Judging {
        folder: &folder,
        aborted: aborted.as_deref(),
        config: Some(&test),
    };
    let verdict = match workload_file.workload {
        WorkloadKind::Register => {
            let sync_reads = workload_file.register.sync_reads;
            super::verdict::judge_run(&judging, &ops, sync_reads)?
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
            let lock = &workload_file.lock;
            super::verdict::judge_lock_run(
                &judging,
                &ops,
                lock.fencing,
                LivenessOptions::for_sessions(lock.session_timeout.0, lock.op_timeout.0),
                summary,
            )?
        }
        WorkloadKind::Election => {
            let summary = match &outcome {
                Some(RunOutcome::Election(summary)) => {
                    let mut value = serde_json::to_value(summary)?;
                    value["server"] = server_herd(&server_load, summary.herd.releases);
                    Some(value)
                }
                _ => None,
            };
            let e = &workload_file.election;
            let live = LivenessOptions::for_sessions(e.session_timeout.0, e.op_timeout.0);
            super::verdict::judge_election_run(&judging, &ops, live, summary)?
        }
        WorkloadKind::Barrier => {
            let summary = match &outcome {
                Some(RunOutcome::Barrier(summary)) => Some(serde_json::to_value(summary)?),
                _ => None,
            };
            let cfg = &workload_file;
            let threshold = cfg.barrier.threshold_for(cfg.generator.concurrency) as u64;
            super::verdict::judge_barrier_run(&judging, &ops, threshold, summary)?
        }
        WorkloadKind::Queue => {
            let summary = match &outcome {
                Some(RunOutcome::Queue(summary)) => Some(serde_json::to_value(summary)?),
                _ => None,
            };
            super::verdict::judge_queue_run(&judging, &ops, summary)?
        }
    };
    let verdict = super::verdict::with_replicas(verdict, &replicas);
    if let Err(e) = crate::report::write_plots(&ops, &dir) {
        eprintln!("warning: plots: {e:#}");
    }
    println!("results: {}", dir.display());
    println!("{}", verdict.line);
    Ok(ExitCode::from(verdict.exit_code))
}

/// Runs the test once per (lock recipe, contenders) of `args`, each as a child `stampede test`
/// with the other flags as given, then draws the sweep's plots; exits with the worst exit code
/// of the runs.
fn sweep(args: &TestArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        !args.contenders.contains(&0),
        "--contenders: every value must be at least 1"
    );
    let recipes = sweep_workloads(&args.workload)?;
    let nemesis = stem(&config::resolve("nemeses", &args.nemesis)?);
    let exe = std::env::current_exe().context("cannot find the stampede binary")?;
    let forwarded = forwarded_args(std::env::args().skip(1));
    let (mut runs, mut worst) = (Vec::new(), 0u8);
    for recipe in &recipes {
        for n in &args.contenders {
            eprintln!("sweep: {recipe} with {n} contenders");
            let name = match &args.name {
                Some(name) => format!("{name}-{recipe}"),
                None => format!("{recipe}-{nemesis}"),
            };
            let folder = RunFolder::create(&args.results, &name)?;
            let status = std::process::Command::new(&exe)
                .args(&forwarded)
                .args(["--workload", recipe.as_str(), "--name", &name, "--set"])
                .arg(format!("generator.concurrency={n}"))
                .arg("--run-dir")
                .arg(folder.dir())
                .status()
                .with_context(|| format!("cannot run {}", exe.display()))?;
            worst = worst.max(status.code().map_or(2, |c| c.clamp(0, 2) as u8));
            match folder.read_results()? {
                Some(_) => runs.push(folder.dir().to_path_buf()),
                None => eprintln!("warning: {recipe} with {n} contenders left no results"),
            }
        }
    }
    let stamp = crate::store::stamp(std::time::SystemTime::now());
    let dir = args.results.join(format!("sweep-{stamp}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let rows = super::compare::load_runs(&runs)?;
    let table = super::compare::render_table(&rows);
    std::fs::write(dir.join("table.txt"), &table)
        .with_context(|| format!("cannot write {}", dir.join("table.txt").display()))?;
    let drawn = super::compare::plot_herd(&rows, &dir.join("herd.png"))?
        && super::compare::plot_recipes(&rows, &dir.join("recipes.png"))?;
    if !drawn {
        eprintln!("warning: no lock run finished with figures: no plots drawn");
    }
    print!("{table}");
    println!("sweep: {}", dir.display());
    Ok(ExitCode::from(worst))
}

/// The lock workloads a sweep runs: every recipe for `lock`, else `workload` if it is a lock
/// workload.
fn sweep_workloads(workload: &str) -> anyhow::Result<Vec<String>> {
    if workload == "lock" {
        use crate::workload::lock::RecipeKind;
        return Ok(RecipeKind::ALL
            .map(|r| r.workload_name().to_string())
            .to_vec());
    }
    let path = config::resolve("workloads", workload)?;
    let file: WorkloadFile = config::load(&path)?;
    anyhow::ensure!(
        file.workload == WorkloadKind::Lock,
        "--contenders: {} is not a lock workload",
        path.display()
    );
    Ok(vec![workload.to_string()])
}

/// The command line of the sweep without the flags each run sets itself (`--workload`,
/// `--contenders`, `--name`, `--run-dir`).
fn forwarded_args(args: impl Iterator<Item = String>) -> Vec<String> {
    const OWN: [&str; 4] = ["--workload", "--contenders", "--name", "--run-dir"];
    let mut kept = Vec::new();
    let mut skip_value = false;
    for arg in args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        if OWN.contains(&arg.as_str()) {
            skip_value = true;
        } else if !OWN.iter().any(|f| arg.starts_with(&format!("{f}="))) {
            kept.push(arg);
        }
    }
    kept
}

/// How the main job of a run ended, by workload.
enum RunOutcome {
    Register(RunSummary),
    Lock(Box<LockRunSummary>),
    Election(Box<ElectionRunSummary>),
    Barrier(Box<BarrierRunSummary>),
    Queue(Box<QueueRunSummary>),
}

impl RunOutcome {
    /// Faults that could not be healed.
    fn heal_failures(&self) -> &[String] {
        match self {
            RunOutcome::Register(s) => &s.heal_failures,
            RunOutcome::Lock(s) => &s.heal_failures,
            RunOutcome::Election(s) => &s.heal_failures,
            RunOutcome::Barrier(s) => &s.heal_failures,
            RunOutcome::Queue(s) => &s.heal_failures,
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

/// The servers' own figures for a lock run per release, or an election run per leadership
/// change: watch notifications (from the fan-out summaries) and packets received, summed over
/// the servers.
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

/// Who holds the lock or leads, read from the history as it is recorded: the node of the
/// latest `hold` / `lead` operation still open (for the partition target `holder`).
#[derive(Default)]
struct HistoryHolder(std::sync::OnceLock<Arc<Recorder>>);

impl nemesis::HolderView for HistoryHolder {
    fn holder_node(&self) -> Option<String> {
        open_holder(&self.0.get()?.ops())
    }
}

/// The node of the latest `hold` or `lead` invocation whose process has not completed it.
fn open_holder(ops: &[crate::history::Op]) -> Option<String> {
    let mut open = std::collections::HashMap::new();
    for op in ops.iter().filter(|op| op.f == "hold" || op.f == "lead") {
        match op.kind {
            crate::history::OpType::Invoke => _ = open.insert(op.process, op),
            _ => _ = open.remove(&op.process),
        }
    }
    open.into_values()
        .max_by_key(|op| op.index)
        .and_then(|op| op.node.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Op, OpType, Process};

    fn op(index: u64, kind: OpType, process: u64, f: &str, node: &str) -> Op {
        Op {
            index,
            time: index,
            kind,
            process: Process::Client(process),
            f: f.into(),
            value: serde_json::Value::Null,
            key: None,
            node: Some(node.into()),
            error: None,
            zxid: None,
            version: None,
        }
    }

    #[test]
    fn the_holder_is_the_latest_open_hold() {
        let ops = vec![
            op(0, OpType::Invoke, 1, "hold", "n1"),
            op(1, OpType::Ok, 1, "hold", "n1"),
            op(2, OpType::Invoke, 2, "acquire", "n3"),
            op(3, OpType::Invoke, 4, "hold", "n2"),
        ];
        assert_eq!(open_holder(&ops).as_deref(), Some("n2"));
        assert_eq!(
            open_holder(&ops[..2]),
            None,
            "nobody holds after the release"
        );
        let lead = vec![op(0, OpType::Invoke, 7, "lead", "n3")];
        assert_eq!(open_holder(&lead).as_deref(), Some("n3"));
    }

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

    #[test]
    fn a_sweep_forwards_every_flag_but_its_own() {
        let line = "-v test --workload lock --contenders=5,20 --nemesis none --name x --time-limit 5s --keep-db";
        let kept = forwarded_args(line.split(' ').map(String::from));
        assert_eq!(
            kept,
            [
                "-v",
                "test",
                "--nemesis",
                "none",
                "--time-limit",
                "5s",
                "--keep-db"
            ]
        );
    }

    #[test]
    fn a_sweep_runs_lock_workloads_only() {
        let all = sweep_workloads("lock").unwrap();
        assert_eq!(all.len(), 5);
        assert!(all.contains(&"lock-sequential-herd".to_string()));
        assert_eq!(
            sweep_workloads("lock-protected").unwrap(),
            ["lock-protected"]
        );
        let err = sweep_workloads("register").unwrap_err().to_string();
        assert!(
            err.contains("register.yaml is not a lock workload"),
            "{err}"
        );
    }
}
