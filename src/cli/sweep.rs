//! `stampede test --contenders 5,20,100`: one test per number of contenders of a workload run
//! by contenders (every file of it when named by its workload, e.g. `lock`), then the sweep's
//! table and plots of them all.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use futures::FutureExt;

use super::test::TestArgs;
use crate::config::{self, Override};
use crate::nemesis::{self, Interrupts};
use crate::store::RunFolder;
use crate::workload::{self, WorkloadFile};

/// Runs the test once per (lock recipe, contenders) of `args`, each in this process with the
/// other flags as given, then draws the sweep's plots; exits with the worst exit code of the
/// runs. A signal stops the sweep after the run it came in (the plots drawn of the runs so
/// far, exit 2).
pub async fn run(args: &TestArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        !args.contenders.contains(&0),
        "--contenders: every value must be at least 1"
    );
    let [workload] = args.workloads.as_slice() else {
        anyhow::bail!("--contenders: sweeps one workload, not workloads run together");
    };
    anyhow::ensure!(
        args.names.len() <= 1,
        "--contenders: takes one --name at most"
    );
    let recipes = sweep_workloads(workload)?;
    let nemesis = super::test::stem(&config::resolve("nemeses", &args.nemesis)?);
    let (mut runs, mut worst) = (Vec::new(), 0u8);
    'sweep: for recipe in &recipes {
        for &n in &args.contenders {
            eprintln!("sweep: {recipe} with {n} contenders");
            let name = match args.names.first() {
                Some(name) => format!("{name}-{recipe}"),
                None => format!("{recipe}-{nemesis}"),
            };
            let folder = RunFolder::create(&args.results, &name)?;
            let code = run_one(&run_args(args, recipe, n, &name, folder.dir())).await;
            worst = worst.max(code);
            match folder.read_results()? {
                Some(_) => runs.push(folder.dir().to_path_buf()),
                None => eprintln!("warning: {recipe} with {n} contenders left no results"),
            }
            if let Some(signal) = Interrupts::received() {
                eprintln!("sweep: stopped by {signal}: no further runs");
                worst = worst.max(2);
                break 'sweep;
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

/// Runs one test of the sweep in this process and prints its results folder and verdict line,
/// or its error; returns its exit code (2 for an error, or a panic).
async fn run_one(run: &TestArgs) -> u8 {
    let ran = AssertUnwindSafe(super::test::run_test(run))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| Err(nemesis::panicked(panic)));
    match ran {
        Ok(members) => {
            super::test::print_outcomes(&members);
            super::test::exit_code(&members)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            2
        }
    }
}

/// The arguments of the sweep's run of `recipe` with `contenders` processes: the sweep's own,
/// with that workload, the run's name and folder, and `generator.concurrency` set last.
fn run_args(args: &TestArgs, recipe: &str, contenders: u64, name: &str, dir: &Path) -> TestArgs {
    let mut run = args.clone();
    run.workloads = vec![recipe.to_string()];
    run.names = vec![name.to_string()];
    run.run_dirs = vec![dir.to_path_buf()];
    run.overrides
        .push(Override::number("generator.concurrency", contenders));
    run.contenders.clear();
    run
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
    let named = workload::entry(workload).is_ok();
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
        workload::build(&file).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        anyhow::ensure!(
            workload::entry(&file.workload).is_ok_and(|e| e.sweeps_contenders),
            "--contenders: {} is not a workload of contenders (those are: {})",
            path.display(),
            contender_workloads().join(", ")
        );
    }
    Ok(files)
}

/// The names of the workloads run by contenders.
fn contender_workloads() -> Vec<&'static str> {
    let contenders = workload::WORKLOADS.iter().filter(|e| e.sweeps_contenders);
    contenders.map(|e| e.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        args: TestArgs,
    }

    #[test]
    fn a_sweeps_run_keeps_every_flag_but_its_own() {
        let line = "stampede --workload lock --contenders=5,20 --nemesis none --name x \
                    --time-limit 5s --set generator.rate=3";
        let args = <Wrap as clap::Parser>::parse_from(line.split_whitespace()).args;
        let dir = Path::new("/r/x-lock-fair/1");
        let run = run_args(&args, "lock-fair", 20, "x-lock-fair", dir);
        assert_eq!(run.workloads, ["lock-fair"]);
        assert_eq!(run.names, ["x-lock-fair"]);
        assert_eq!(run.run_dirs, [dir]);
        assert!(run.contenders.is_empty(), "a run is not a sweep again");
        let set: Vec<Override> = ["generator.rate=3", "generator.concurrency=20"]
            .iter()
            .map(|o| o.parse().unwrap())
            .collect();
        assert_eq!(run.overrides, set, "the sweep's own override comes last");
        assert_eq!(run.nemesis, "none");
        assert_eq!(
            run.time_limit.map(|d| d.0),
            Some(std::time::Duration::from_secs(5))
        );
        assert_eq!(
            args.overrides.len(),
            1,
            "the sweep's arguments are left as given"
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
