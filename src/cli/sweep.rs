//! `stampede test --contenders 5,20,100`: one test per number of contenders of a workload run
//! by contenders (every file of it when named by its workload, e.g. `lock`), then the sweep's
//! table and plots of them all.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::test::TestArgs;
use crate::config;
use crate::store::RunFolder;
use crate::workload::{self, WorkloadFile};

/// Runs the test once per (lock recipe, contenders) of `args`, each as a child `stampede test`
/// with the other flags as given, then draws the sweep's plots; exits with the worst exit code
/// of the runs.
pub fn run(args: &TestArgs) -> anyhow::Result<ExitCode> {
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
    let exe = std::env::current_exe().context("cannot find the stampede binary")?;
    let forwarded = forwarded_args(std::env::args().skip(1));
    let (mut runs, mut worst) = (Vec::new(), 0u8);
    for recipe in &recipes {
        for n in &args.contenders {
            eprintln!("sweep: {recipe} with {n} contenders");
            let name = match args.names.first() {
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

#[cfg(test)]
mod tests {
    use super::*;

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
