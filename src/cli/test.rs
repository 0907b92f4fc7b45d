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
use crate::workload::{self, Ran, WorkloadFile};

/// Arguments of `stampede test`.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// The workload: a name in workloads/ (register, lock-sequential, ...) or a path to a
    /// YAML file.
    #[arg(long, default_value = workload::DEFAULT)]
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
    let (workload_file, workload) = workload::load(&workload_path, &overrides)?;
    let nemesis_path = config::resolve("nemeses", &args.nemesis)?;
    let holders = workload.holder_op().is_some();
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
    let holder = Arc::new(HistoryHolder {
        recorder: Default::default(),
        op: workload.holder_op(),
    });
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
        workload: workload_file.with_settings(workload.settings()),
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
    let _ = holder.recorder.set(recorder.clone());
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
        endpoints,
        nemeses,
        recorder: recorder.clone(),
        cancel: cancel_rx,
    };
    let ending = nemesis::guarded(&control, db.as_ref(), on_signal, workload.run(target)).await;
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
    let ops = recorder.ops();
    let judging = super::verdict::Judging {
        folder: &folder,
        aborted: aborted.as_deref(),
        config: Some(&test),
    };
    let summary = ran.and_then(|ran| with_server_load(ran, &server_load));
    let verdict = super::verdict::judge(&judging, workload.as_ref(), &ops, summary)?;
    let verdict = super::verdict::with_replicas(verdict, &replicas);
    if let Err(e) = workload.plots(&ops, &dir) {
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

/// The workload files a sweep runs: `workload` itself, or when it names a workload rather
/// than a file (`lock`), every file in workloads/ that runs it; each must be a workload run
/// by contenders.
fn sweep_workloads(workload: &str) -> anyhow::Result<Vec<String>> {
    let runs = |name: &str| -> anyhow::Result<(PathBuf, WorkloadFile)> {
        let path = config::resolve("workloads", name)?;
        let file = config::load(&path)?;
        Ok((path, file))
    };
    let named = workload::WORKLOADS.iter().any(|e| e.name == workload);
    let files = match (named, config::resolve("workloads", workload)) {
        (true, Err(_)) => {
            let mut files = Vec::new();
            for name in config::names("workloads") {
                let (_, file) = runs(&name)?;
                if file.workload == workload {
                    files.push(name);
                }
            }
            files
        }
        _ => vec![workload.to_string()],
    };
    for name in &files {
        let (path, file) = runs(name)?;
        let runs_contenders = workload::build(&file)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
            .sweeps_contenders();
        anyhow::ensure!(
            runs_contenders,
            "--contenders: {} is not a workload of contenders (those are: {})",
            path.display(),
            contender_workloads().join(", ")
        );
    }
    Ok(files)
}

/// The names of the workloads run by contenders.
fn contender_workloads() -> Vec<&'static str> {
    let default = WorkloadFile::named(workload::DEFAULT);
    workload::WORKLOADS
        .iter()
        .filter(|e| {
            let file = WorkloadFile {
                workload: e.name.to_string(),
                ..default.clone()
            };
            workload::build(&file).is_ok_and(|w| w.sweeps_contenders())
        })
        .map(|e| e.name)
        .collect()
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

/// Who holds the lock or leads, read from the history as it is recorded: the node of the
/// latest operation `op` (the workload's `hold` or `lead`) still open, for the partition
/// target `holder`.
struct HistoryHolder {
    recorder: std::sync::OnceLock<Arc<Recorder>>,
    op: Option<&'static str>,
}

impl nemesis::HolderView for HistoryHolder {
    fn holder_node(&self) -> Option<String> {
        open_holder(&self.recorder.get()?.ops(), self.op?)
    }
}

/// The node of the latest invocation of `f` whose process has not completed it.
fn open_holder(ops: &[crate::history::Op], f: &str) -> Option<String> {
    let mut open = std::collections::HashMap::new();
    for op in ops.iter().filter(|op| op.f == f) {
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
        assert_eq!(open_holder(&ops, "hold").as_deref(), Some("n2"));
        assert_eq!(
            open_holder(&ops[..2], "hold"),
            None,
            "nobody holds after the release"
        );
        let lead = vec![op(0, OpType::Invoke, 7, "lead", "n3")];
        assert_eq!(open_holder(&lead, "lead").as_deref(), Some("n3"));
        assert_eq!(
            open_holder(&lead, "hold"),
            None,
            "only the workload's own op counts"
        );
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
            err.ends_with("register.yaml is not a workload of contenders (those are: lock)"),
            "{err}"
        );
    }
}
