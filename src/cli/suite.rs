//! `stampede suite FILE.yaml`: runs a matrix of tests unattended, each in this process the way
//! `stampede test` runs it, and leaves `results/suites/<name>/<timestamp>/` with
//! `summary.json`, `junit.xml` and `index.html`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::db::DbChoice;
use super::targets::TargetArgs;
use super::test::{self, TestArgs};
use crate::nemesis::Interrupts;
use crate::suite::file::TestSpec;
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
/// if any errored or ended unknown. A signal stops the test it comes in (healed and judged);
/// then no further test starts, and the suite exits 1 if a test found anomalies, else 2.
pub async fn run(args: SuiteArgs) -> anyhow::Result<ExitCode> {
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
    let runner = Runner { dir: dir.clone() };
    let run_test = async |spec: &TestSpec, run_dirs: &[PathBuf]| -> anyhow::Result<u8> {
        let members = test::run_test(&test_args(&suite, &args, spec, run_dirs)).await?;
        Ok(test::exit_code(&members))
    };
    let mut summary = Summary {
        suite: name.clone(),
        started: humantime::format_rfc3339_seconds(now).to_string(),
        finished: false,
        tests: Vec::new(),
    };
    write_reports(&summary, &dir)?;
    let mut last_start: Option<(String, Instant)> = None;
    let (mut ran, mut stopped) = (0, false);
    for (i, spec) in tests.iter().enumerate() {
        // Two runs of one test must not share a results folder, whose name has 1 s resolution.
        if let Some((prev, at)) = &last_start {
            let gap = Duration::from_millis(1100).saturating_sub(at.elapsed());
            if *prev == spec.name && !gap.is_zero() {
                tokio::time::sleep(gap).await;
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
        for record in runner.run(spec, &run_test).await {
            eprintln!(
                "suite {name}: {} #{}: {} ({:.0} s)",
                record.name,
                record.repetition,
                record.verdict.as_str(),
                record.duration_s
            );
            if let Some(line) = record.error.as_ref().or(record.verdict_line.as_ref()) {
                eprintln!("  {line}");
            }
            summary.tests.push(record);
        }
        ran += 1;
        write_reports(&summary, &dir)?;
        if let Some(signal) = Interrupts::received() {
            eprintln!("suite {name}: stopped by {signal}: no further test starts");
            stopped = true;
            break;
        }
    }
    summary.finished = !stopped;
    write_reports(&summary, &dir)?;
    link_latest(&dir);
    println!("suite: {}", dir.display());
    println!(
        "suite {name}: {}: {} valid, {} with anomalies, {} unknown, {} errors",
        tally(ran, summary.tests.len(), tests.len()),
        summary.count(Verdict::Valid),
        summary.count(Verdict::Invalid),
        summary.count(Verdict::Unknown),
        summary.count(Verdict::Error)
    );
    let code = match (stopped, summary.exit_code()) {
        (true, 0) => 2,
        (_, code) => code,
    };
    Ok(ExitCode::from(code))
}

/// How much ran: `N tests`, or `N runs of M tests` when workloads ran together (one run per
/// workload of a test), and `of P` more when the suite stopped before the last of its `planned`
/// tests.
fn tally(tests: usize, runs: usize, planned: usize) -> String {
    let ran = match runs == tests {
        true => format!("{tests} tests"),
        false => format!("{runs} runs of {tests} tests"),
    };
    match tests == planned {
        true => ran,
        false => format!("{ran} of {planned}"),
    }
}

/// The arguments of `spec`'s test: its workloads, nemesis and database, each member's name and
/// run folder (`run_dirs`, in order), and what the suite gives every test: its time limit and
/// overrides, the node selection and the database builds.
fn test_args(
    suite: &SuiteFile,
    args: &SuiteArgs,
    spec: &TestSpec,
    run_dirs: &[PathBuf],
) -> TestArgs {
    let db = DbChoice {
        db: spec.db.clone(),
        options: crate::db::DbOptions {
            zookeeper_tarball: args.zookeeper_tarball.clone(),
            keeperd_binary: args.keeperd_binary.clone(),
            ..Default::default()
        },
    };
    let workloads = spec.workloads.clone();
    let targets = args.targets.clone();
    let mut test = TestArgs::new(workloads, spec.nemesis.clone(), targets, db);
    test.names = spec.member_names();
    test.run_dirs = run_dirs.to_vec();
    test.time_limit = suite.time_limit;
    test.overrides = suite.set.clone();
    test
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        args: SuiteArgs,
    }

    #[test]
    fn a_test_gets_the_suites_time_limit_overrides_nodes_and_builds_typed() {
        let line = "stampede s.yaml --cluster c7 --ssh-user admin --keeperd-binary /k/keeperd \
                    --zookeeper-tarball https://example.org/zk.tar.gz";
        let args = <Wrap as clap::Parser>::parse_from(line.split_whitespace()).args;
        let yaml = "workloads: [a, b, c]\nnemeses: [n]\ndbs: [keeperd]\ntime_limit: 1m 30s\n\
                    set: [generator.rate=3, generator.nemesis_interval=2s]\ntogether: true\n";
        let suite: SuiteFile = serde_yaml_ng::from_str(yaml).unwrap();
        let [spec] = suite.expand(Path::new("/suites")).try_into().unwrap();
        let dirs: Vec<PathBuf> = spec
            .member_names()
            .iter()
            .map(|m| Path::new("/s/tests").join(m).join("1"))
            .collect();
        let test = test_args(&suite, &args, &spec, &dirs);
        assert_eq!(test.workloads, ["a", "b", "c"]);
        assert_eq!(test.nemesis, "n");
        assert_eq!(
            test.names,
            ["a-n-keeperd", "b-n-keeperd", "c-n-keeperd"],
            "a name and a folder for each member"
        );
        assert_eq!(test.run_dirs, dirs);
        assert_eq!(
            test.time_limit.map(|d| d.0),
            Some(Duration::from_secs(90)),
            "the time limit flows as a duration"
        );
        assert_eq!(test.overrides, suite.set);
        assert_eq!(
            test.overrides[1].to_string(),
            "--set generator.nemesis_interval=2s"
        );
        assert_eq!(
            (
                test.targets.cluster.as_str(),
                test.targets.ssh_user.as_str()
            ),
            ("c7", "admin")
        );
        assert_eq!(test.db.db, "keeperd");
        assert_eq!(
            test.db.options.keeperd_binary,
            Some(PathBuf::from("/k/keeperd"))
        );
        let tarball = test.db.options.zookeeper_tarball.as_deref();
        assert_eq!(tarball, Some("https://example.org/zk.tar.gz"));
        assert!(test.contenders.is_empty());
    }

    #[test]
    fn the_tally_counts_runs_and_what_was_left_out() {
        assert_eq!(tally(4, 4, 4), "4 tests");
        assert_eq!(tally(2, 6, 2), "6 runs of 2 tests");
        assert_eq!(tally(1, 1, 4), "1 tests of 4");
    }
}
