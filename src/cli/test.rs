//! `stampede test`: the main job. Brings up what it needs (the local cluster when no nodes are
//! given, the database), runs a workload while a nemesis injects faults, records the history,
//! heals everything, checks the history, and leaves a results folder with plots.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;

use super::db::DbChoice;
use super::holder::HistoryHolder;
use super::targets::TargetArgs;
use crate::cluster::{self, Spec};
use crate::config::{self, Override};
use crate::control::Control;
use crate::db::Db;
use crate::engine::{self, Member, Scope, Test};
use crate::generator;
use crate::history::Recorder;
use crate::nemesis;
use crate::progress::{Phase, Progress};
use crate::store::{RunFolder, TestConfig};
use crate::workload::{self, Workload, WorkloadFile};

/// Where results go unless `--results` says otherwise.
const RESULTS: &str = "results";
/// Nodes in a local cluster made for a test unless `--cluster-nodes` says otherwise.
const CLUSTER_NODES: usize = 5;

/// Arguments of `stampede test`.
#[derive(Debug, Clone, clap::Args)]
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
    /// The nemesis package: a name in nemeses/ (partition, kill, pause, all, none, ...) or a path.
    #[arg(long, default_value = "partition")]
    pub(super) nemesis: String,
    /// Override any field of the workload file, e.g. `--set generator.rate=100`
    /// (repeatable; nemesis fields as `nemesis.faults=[...]`).
    #[arg(long = "set", value_name = "FIELD=VALUE")]
    pub(super) overrides: Vec<Override>,
    /// Shortcut for `--set generator.time_limit=…`: seconds (`30`) or with a unit (`2m`).
    #[arg(long, value_name = "DURATION", value_parser = config::Duration::parse_cli)]
    pub(super) time_limit: Option<config::Duration>,
    /// The test's name in results/ (default: <workload>-<nemesis>); with workloads run
    /// together, one per workload in their order, or none.
    #[arg(long = "name", value_name = "NAME")]
    pub(super) names: Vec<String>,
    /// Where results go.
    #[arg(long, default_value = RESULTS)]
    pub(super) results: PathBuf,
    /// The run's folder, instead of a new `<results>/<name>/<time>/` (as a suite or a sweep
    /// gives each of its runs); with workloads run together, one per workload in their order.
    #[arg(long = "run-dir", value_name = "DIR")]
    pub(super) run_dirs: Vec<PathBuf>,
    /// Nodes in the local cluster when it has to be made.
    #[arg(long, default_value_t = CLUSTER_NODES)]
    cluster_nodes: usize,
    /// Leave the database running after the test (it is torn down by default).
    #[arg(long)]
    keep_db: bool,
    /// Run one test per number of contenders in the list (e.g. `5,20,100`) of a lock workload
    /// (`--workload lock`: every lock recipe), one after another, then draw `herd.png` and
    /// `recipes.png` of them all into `results/sweep-<time>/`.
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub(super) contenders: Vec<u64>,
    /// The seed of the run's random choices: which nodes each fault hits, how a partition
    /// splits them, a random mix's next fault, and the workloads' keys, values and operation
    /// mix (default: drawn at random; `test.yaml` records it). The same seed makes the same
    /// choices again; the servers' timing, and so the history, still differ.
    #[arg(long)]
    pub(super) seed: Option<u64>,
    #[command(flatten)]
    pub(super) targets: TargetArgs,
    #[command(flatten)]
    pub(super) db: DbChoice,
}

impl TestArgs {
    /// The arguments of a test of `workloads` under `nemesis` on the nodes `targets` picks,
    /// against the database `db`; every other flag as if not given.
    pub(super) fn new(
        workloads: Vec<String>,
        nemesis: String,
        targets: TargetArgs,
        db: DbChoice,
    ) -> TestArgs {
        TestArgs {
            workloads,
            nemesis,
            overrides: Vec::new(),
            time_limit: None,
            names: Vec::new(),
            results: RESULTS.into(),
            run_dirs: Vec::new(),
            cluster_nodes: CLUSTER_NODES,
            keep_db: false,
            contenders: Vec::new(),
            seed: None,
            targets,
            db,
        }
    }
}

/// How one workload of a test was judged.
#[derive(Debug)]
pub(super) struct MemberOutcome {
    /// 0 valid, 1 anomalies found, 2 unknown or aborted.
    pub exit_code: u8,
    /// The verdict line.
    pub verdict_line: String,
    /// The run's folder.
    pub folder: PathBuf,
}

/// Runs `stampede test`; exits 0 valid, 1 anomalies found, 2 unknown or aborted (with workloads
/// run together, the worst of theirs: 1 if any found anomalies).
pub async fn run(args: TestArgs) -> anyhow::Result<ExitCode> {
    if !args.contenders.is_empty() {
        return super::sweep::run(&args).await;
    }
    let members = run_test(&args).await?;
    print_outcomes(&members);
    Ok(ExitCode::from(exit_code(&members)))
}

/// Prints each member's results folder and verdict line, the verdict line last.
pub(super) fn print_outcomes(members: &[MemberOutcome]) {
    for member in members {
        println!("results: {}", member.folder.display());
        println!("{}", member.verdict_line);
    }
}

/// The exit code of a test of `members`: the worst of theirs.
pub(super) fn exit_code(members: &[MemberOutcome]) -> u8 {
    members.iter().fold(0, |worst, m| worse(worst, m.exit_code))
}

/// Runs the test `args` describes in this process, the way `stampede test` does (and each test
/// of a suite or a sweep): plans it, claims the nodes, runs it and judges each workload's
/// history. Returns each workload's outcome in order; an error means no verdict at all.
pub(super) async fn run_test(args: &TestArgs) -> anyhow::Result<Vec<MemberOutcome>> {
    let plan = plan(args)?;
    let progress = Progress::new(plan.files[0].file.generator.time_limit.0);
    let outcomes = claim_and_run(plan, args, progress.clone()).await;
    progress.finish();
    outcomes
}

/// Claims the nodes of `plan`, opens its run folders, runs it and judges each workload's
/// history, showing how far it got on `progress`.
async fn claim_and_run(
    plan: Plan,
    args: &TestArgs,
    progress: Progress,
) -> anyhow::Result<Vec<MemberOutcome>> {
    let claim = engine::claim(&plan.control, plan.db.as_ref(), Scope::Everything).await?;
    run_claimed(claim, plan, args, progress).await
}

/// Opens the run folders of `plan`, whose nodes `claim` holds, runs it and judges each
/// workload's history, showing how far it got on `progress`.
async fn run_claimed(
    claim: engine::Claim,
    plan: Plan,
    args: &TestArgs,
    progress: Progress,
) -> anyhow::Result<Vec<MemberOutcome>> {
    let test = match open(plan, args, progress) {
        Ok(test) => test,
        Err(e) => {
            claim.release().await;
            return Err(e);
        }
    };
    let done = engine::execute(&test, claim, args.keep_db).await;
    test.progress.set_phase(Phase::Check);
    let mut outcomes = Vec::new();
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
        outcomes.push(MemberOutcome {
            exit_code: verdict.exit_code,
            verdict_line: verdict.line,
            folder: member.folder.dir().to_path_buf(),
        });
    }
    Ok(outcomes)
}

/// The worse of two exit codes of verdicts: anomalies found (1) over unknown (2) over valid.
fn worse(a: u8, b: u8) -> u8 {
    match (a, b) {
        (1, _) | (_, 1) => 1,
        _ => a.max(b),
    }
}

/// A test checked and ready to claim its nodes: nothing touches a node or the results folder
/// before all of it is known good.
struct Plan {
    files: Vec<Loaded>,
    nemesis_path: PathBuf,
    nemesis_config: nemesis::NemesisConfig,
    holder_op: Option<&'static str>,
    holder: Arc<HistoryHolder>,
    control: Control,
    db: Arc<dyn Db>,
    nemeses: Vec<Arc<dyn nemesis::Nemesis>>,
    seed: u64,
}

/// Reads and checks the workload files, the nemesis package and the nodes (making the local
/// cluster when needed).
fn plan(args: &TestArgs) -> anyhow::Result<Plan> {
    let files = load_workloads(args)?;
    let nemesis_path = config::resolve("nemeses", &args.nemesis)?;
    let holders = files.iter().any(|l| l.workload.holder_op().is_some());
    let nemesis_config = nemesis::load_package(&nemesis_path, holders, None)?;

    let control = targets_with_cluster(args)?;
    let mut choice = args.db.clone();
    choice.options.settings = files[0].file.db.clone();
    let db: Arc<dyn Db> = choice
        .build(&args.targets, control.nodes().to_vec())?
        .into();
    let seed = args.seed.unwrap_or_else(rand::random);
    Plan::assemble(files, (nemesis_path, nemesis_config), control, db, seed)
}

impl Plan {
    /// The plan of `files` under the nemesis package `nemesis` (its path and contents) on the
    /// nodes of `control` running `db`: the database prepared for the package, the package's
    /// targets checked against the nodes, and its nemeses built, their random choices drawn
    /// from `seed`.
    fn assemble(
        files: Vec<Loaded>,
        nemesis: (PathBuf, nemesis::NemesisConfig),
        control: Control,
        db: Arc<dyn Db>,
        seed: u64,
    ) -> anyhow::Result<Plan> {
        let (nemesis_path, nemesis_config) = nemesis;
        let holder_op = files.iter().find_map(|l| l.workload.holder_op());
        let holders = holder_op.is_some();
        let db = nemesis_config.prepare_db(db);
        let aim = nemesis::Aim {
            nodes: control.nodes(),
            db: db.as_ref(),
        };
        nemesis_config.check(&nemesis_path, holders, Some(&aim))?;
        let holder = Arc::new(HistoryHolder::new(holder_op));
        let dice = nemesis::Dice::for_faults(seed);
        let nemeses = nemesis_config.build(&control, db.clone(), Some(holder.clone()), &dice)?;
        match generator::Pace::fitted(nemeses.len(), &files[0].file.generator) {
            Ok(pace) => {
                if let Some(note) = pace.note() {
                    eprintln!("{}: {note}", nemesis_path.display());
                }
            }
            // A short smoke run keeps the pace asked; the verdict line names what acted.
            Err(short) => eprintln!("warning: {}: {short}", nemesis_path.display()),
        }
        Ok(Plan {
            files,
            nemesis_path,
            nemesis_config,
            holder_op,
            holder,
            control,
            db,
            nemeses,
            seed,
        })
    }
}

/// Makes each workload's run folder with its `test.yaml` and history, each recorded operation
/// shown by `progress`: the test, ready to run.
fn open(plan: Plan, args: &TestArgs, progress: Progress) -> anyhow::Result<Test> {
    let names: Vec<String> = match args.names.is_empty() {
        false => args.names.clone(),
        true => plan
            .files
            .iter()
            .map(|l| format!("{}-{}", stem(&l.path), stem(&plan.nemesis_path)))
            .collect(),
    };
    let nodes: Vec<String> = plan
        .control
        .nodes()
        .iter()
        .map(crate::control::Node::address)
        .collect();
    let mut members = Vec::new();
    for (
        i,
        Loaded {
            path,
            file,
            workload,
        },
    ) in plan.files.into_iter().enumerate()
    {
        let folder = match args.run_dirs.get(i) {
            Some(dir) => RunFolder::create_at(dir)?,
            None => RunFolder::create(&args.results, &names[i])?,
        };
        let others = names.iter().enumerate().filter(|(j, _)| *j != i);
        let others = others.map(|(_, name)| name.clone()).collect();
        let config = TestConfig {
            name: names[i].clone(),
            db: plan.db.name().to_string(),
            nodes: nodes.clone(),
            workload: file.with_settings(workload.settings()),
            nemesis: plan.nemesis_config.clone(),
            together: others,
            seed: Some(plan.seed),
        };
        folder.write_config(&config)?;
        let shown = progress.clone();
        let recorder = Recorder::create(&folder.history_path())
            .with_context(|| format!("cannot write {}", folder.history_path().display()))?
            .observed_by(Box::new(move |op| shown.record(op)));
        let recorder = Arc::new(recorder);
        if plan.holder_op.is_some() && workload.holder_op() == plan.holder_op {
            plan.holder.watch(recorder.clone());
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
    Ok(Test {
        members,
        control: plan.control,
        db: plan.db,
        nemeses: plan.nemeses,
        seed: plan.seed,
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

/// Every workload file of the test, with the workload it describes. `--time-limit` is set on
/// each file as the typed duration it was parsed to. Workloads run together share the first
/// one's time limit and nemesis timing (set on the others' files, so their `test.yaml` says what
/// ran) and must agree on the database's settings.
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
        let first = files.first().map(|l| &l.file.generator);
        let (file, workload) = workload::load(&path, &args.overrides, |file| {
            let generator = &mut file.generator;
            if let Some(limit) = args.time_limit {
                generator.time_limit = limit;
            }
            if let Some(first) = first {
                generator.time_limit = first.time_limit;
                generator.nemesis_interval = first.nemesis_interval;
                generator.nemesis_duration = first.nemesis_duration;
            }
        })?;
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
            subnet: cluster::subnet_for(&args.targets.cluster)?,
        };
        cluster::up(spec)?;
    }
    args.targets.control()
}

/// A config file's name without its extension.
pub(super) fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "test".into())
}

#[cfg(test)]
mod fakes;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        args: TestArgs,
    }

    /// `stampede test` parsed from `flags`.
    fn parsed(flags: &[&str]) -> Result<TestArgs, clap::Error> {
        let argv = std::iter::once("stampede").chain(flags.iter().copied());
        <Wrap as clap::Parser>::try_parse_from(argv).map(|w| w.args)
    }

    #[test]
    fn the_time_limit_reaches_every_workload_file_typed_and_the_first_sets_the_timing() {
        let args = parsed(&[
            "--workload",
            "register,queue",
            "--time-limit",
            "1m 30.5s",
            "--set",
            "generator.nemesis_interval=3s",
        ])
        .unwrap();
        let loaded = load_workloads(&args).unwrap();
        let limit = Duration::from_millis(90_500);
        for l in &loaded {
            let g = &l.file.generator;
            assert_eq!(g.time_limit.0, limit, "{}", l.path.display());
            assert_eq!(g.nemesis_interval.0, Duration::from_secs(3));
        }
        // Without --time-limit the second workload takes the first one's timing over its own.
        let dir = tempfile::tempdir().unwrap();
        let short = dir.path().join("short-queue.yaml");
        let queue = std::fs::read_to_string("workloads/queue.yaml").unwrap();
        let queue = queue.replace("time_limit: 60s", "time_limit: 20s");
        std::fs::write(
            &short,
            queue.replace("nemesis_duration: 10s", "nemesis_duration: 4s"),
        )
        .unwrap();
        let together = format!("register,{}", short.display());
        let loaded = load_workloads(&parsed(&["--workload", &together]).unwrap()).unwrap();
        let [first, second] = [0, 1].map(|i| &loaded[i].file.generator);
        assert_eq!(first.time_limit.0, Duration::from_secs(60));
        assert_eq!(second.time_limit, first.time_limit);
        assert_eq!(second.nemesis_duration, first.nemesis_duration);
        let short = short.display().to_string();
        let alone = load_workloads(&parsed(&["--workload", &short]).unwrap()).unwrap();
        assert_eq!(
            alone[0].file.generator.time_limit.0,
            Duration::from_secs(20)
        );
    }

    #[test]
    fn a_bare_time_limit_is_seconds() {
        let limit = |flag: &str| parsed(&["--time-limit", flag]).map(|a| a.time_limit.map(|d| d.0));
        assert_eq!(limit("30").unwrap(), Some(Duration::from_secs(30)));
        assert_eq!(limit("2m").unwrap(), Some(Duration::from_secs(120)));
        assert!(limit("soon").is_err());
    }
}
