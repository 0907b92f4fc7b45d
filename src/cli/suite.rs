//! `stampede suite FILE.yaml`: runs a matrix of tests unattended and leaves
//! `results/suites/<name>/<timestamp>/` with `summary.json`, `junit.xml` and `index.html`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::targets::TargetArgs;
use crate::suite::runner::{self, Runner};
use crate::suite::{html, junit, SuiteFile, Summary, Verdict};

/// Arguments of `stampede suite`.
#[derive(Debug, clap::Args)]
pub struct SuiteArgs {
    /// The suite file, e.g. suites/nightly.yaml.
    file: PathBuf,
    /// Where results go (the suite's folder is `<results>/suites/<name>/<timestamp>`).
    #[arg(long, default_value = "results")]
    results: PathBuf,
    #[command(flatten)]
    targets: TargetArgs,
    /// A keeperd binary every `keeperd` test of the suite uploads (default: build it with cargo).
    #[arg(long)]
    keeperd_binary: Option<PathBuf>,
    /// An Apache ZooKeeper release tarball (path or URL) every `zookeeper` test of the suite
    /// installs instead of the distribution's package.
    #[arg(long)]
    zookeeper_tarball: Option<String>,
}

/// Runs `stampede suite`; exits 0 if every test is valid, 1 if any found anomalies, else 2
/// if any errored or ended unknown.
pub fn run(args: SuiteArgs) -> anyhow::Result<ExitCode> {
    let suite = SuiteFile::load(&args.file)?;
    check_builds(&args)?;
    let name = suite.name_for(&args.file);
    let suite_folder = args.file.parent().unwrap_or(Path::new("."));
    let tests = suite.expand(suite_folder);
    let now = std::time::SystemTime::now();
    let stamp = crate::store::stamp(now);
    let dir = runner::suite_dir(&args.results, &name, &stamp);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let dir = std::fs::canonicalize(&dir)?;
    let exe = std::env::current_exe().context("cannot find the stampede binary")?;
    let runner = Runner {
        exe,
        dir: dir.clone(),
        common_args: common_args(&suite, &args),
    };
    let mut summary = Summary {
        suite: name.clone(),
        started: humantime::format_rfc3339_seconds(now).to_string(),
        finished: false,
        tests: Vec::new(),
    };
    write_reports(&summary, &dir)?;
    let mut last_start: Option<(String, Instant)> = None;
    for (i, spec) in tests.iter().enumerate() {
        // Two runs of one test must not share a results folder, whose name has 1 s resolution.
        if let Some((prev, at)) = &last_start {
            let gap = Duration::from_millis(1100).saturating_sub(at.elapsed());
            if *prev == spec.name && !gap.is_zero() {
                std::thread::sleep(gap);
            }
        }
        last_start = Some((spec.name.clone(), Instant::now()));
        eprintln!(
            "suite {name}: test {}/{}: {} #{}",
            i + 1,
            tests.len(),
            spec.name,
            spec.repetition
        );
        for record in runner.run(spec) {
            eprintln!(
                "suite {name}: {} #{}: {} ({:.0} s)",
                record.name,
                record.repetition,
                record.verdict.as_str(),
                record.duration_s
            );
            summary.tests.push(record);
        }
        write_reports(&summary, &dir)?;
    }
    summary.finished = true;
    write_reports(&summary, &dir)?;
    link_latest(&dir);
    println!("suite: {}", dir.display());
    println!(
        "suite {name}: {}: {} valid, {} with anomalies, {} unknown, {} errors",
        tally(tests.len(), summary.tests.len()),
        summary.count(Verdict::Valid),
        summary.count(Verdict::Invalid),
        summary.count(Verdict::Unknown),
        summary.count(Verdict::Error)
    );
    Ok(ExitCode::from(summary.exit_code()))
}

/// How much ran: `N tests`, or `N runs of M tests` when workloads ran together (one run per
/// workload of a test).
fn tally(tests: usize, runs: usize) -> String {
    match runs == tests {
        true => format!("{tests} tests"),
        false => format!("{runs} runs of {tests} tests"),
    }
}

/// The flags every test gets: the suite's time limit and overrides, and the node selection
/// and database builds the suite was given.
fn common_args(suite: &SuiteFile, args: &SuiteArgs) -> Vec<OsString> {
    let targets = &args.targets;
    let mut out: Vec<OsString> = Vec::new();
    let mut flag = |name: &str, value: OsString| {
        out.push(name.into());
        out.push(value);
    };
    if let Some(limit) = &suite.time_limit {
        flag("--time-limit", limit.to_string().into());
    }
    for o in &suite.set {
        flag("--set", o.into());
    }
    if let Some(nodes) = &targets.nodes {
        flag("--nodes", nodes.into());
    }
    if let Some(file) = &targets.nodes_file {
        flag("--nodes-file", absolute(file).into());
    }
    flag("--ssh-user", (&targets.ssh_user).into());
    if let Some(key) = &targets.ssh_key {
        flag("--ssh-key", absolute(key).into());
    }
    if let Some(known) = &targets.known_hosts {
        flag("--known-hosts", absolute(known).into());
    }
    flag("--cluster", (&targets.cluster).into());
    if let Some(binary) = &args.keeperd_binary {
        flag("--keeperd-binary", absolute(binary).into());
    }
    if let Some(tarball) = &args.zookeeper_tarball {
        let local = !tarball.contains("://");
        let tarball = match local {
            true => absolute(Path::new(tarball)).into_os_string(),
            false => tarball.into(),
        };
        flag("--zookeeper-tarball", tarball);
    }
    out
}

/// Refuses, before the first test, a `--keeperd-binary` or local `--zookeeper-tarball` that
/// is not a file, which every test of its database would otherwise fail on.
fn check_builds(args: &SuiteArgs) -> anyhow::Result<()> {
    let local_tarball = args
        .zookeeper_tarball
        .as_deref()
        .filter(|t| !t.contains("://"));
    let files = [
        ("--keeperd-binary", args.keeperd_binary.as_deref()),
        ("--zookeeper-tarball", local_tarball.map(Path::new)),
    ];
    for (flag, file) in files {
        if let Some(file) = file.filter(|f| !f.is_file()) {
            anyhow::bail!("{flag} {}: no such file", file.display());
        }
    }
    Ok(())
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Writes summary.json, junit.xml and index.html (after every test, so a suite cut short
/// still has its reports).
fn write_reports(summary: &Summary, dir: &Path) -> anyhow::Result<()> {
    summary.save(dir)?;
    let write = |file: &str, text: String| {
        std::fs::write(dir.join(file), text)
            .with_context(|| format!("cannot write {}", dir.join(file).display()))
    };
    write("junit.xml", junit::render(summary))?;
    write("index.html", html::render(summary))
}

/// Points `<results>/suites/<name>/latest` at this run.
fn link_latest(dir: &Path) {
    if let (Some(parent), Some(stamp)) = (dir.parent(), dir.file_name()) {
        let latest = parent.join("latest");
        let _ = std::fs::remove_file(&latest);
        let _ = std::os::unix::fs::symlink(stamp, &latest);
    }
}
