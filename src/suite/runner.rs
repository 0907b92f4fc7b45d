//! Running one test of a suite: `stampede test` as a child process of the running binary,
//! given its run folder under the suite's `tests/`, its output kept in the suite's `logs/` and
//! echoed to standard error, its outcome read from its exit code and its run folder.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;

use super::file::TestSpec;
use super::summary::{TestRecord, Verdict};
use crate::store::{Results, RunFolder};

/// How every test of a suite is run.
#[derive(Debug, Clone)]
pub struct Runner {
    /// The stampede binary.
    pub exe: PathBuf,
    /// The suite's folder: tests go to `<dir>/tests`, their output to `<dir>/logs`.
    pub dir: PathBuf,
    /// Arguments given to every test: node selection, time limit, overrides.
    pub common_args: Vec<OsString>,
}

impl Runner {
    /// The full `stampede test` command line for `spec` running in the folder `run_dir`
    /// (without the program).
    pub fn args(&self, spec: &TestSpec, run_dir: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = [
            "test",
            "--workload",
            &spec.workload,
            "--nemesis",
            &spec.nemesis,
            "--db",
            &spec.db,
            "--name",
            &spec.name,
        ]
        .iter()
        .map(OsString::from)
        .collect();
        args.push("--run-dir".into());
        args.push(run_dir.into());
        args.extend(self.common_args.iter().cloned());
        args
    }

    /// Runs `spec` to the end and records its outcome; failing to start it is an `error`
    /// outcome too, so the suite goes on.
    pub fn run(&self, spec: &TestSpec) -> TestRecord {
        let started = Instant::now();
        let outcome = RunFolder::create(&self.dir.join("tests"), &spec.name)
            .and_then(|folder| self.run_child(spec, &folder));
        let mut record = TestRecord {
            name: spec.name.clone(),
            workload: spec.workload.clone(),
            nemesis: spec.nemesis.clone(),
            db: spec.db.clone(),
            repetition: spec.repetition,
            verdict: Verdict::Error,
            exit_code: None,
            results: None,
            verdict_line: None,
            duration_s: 0.0,
            error: None,
        };
        match outcome {
            Ok(child) => {
                record.results = child.results.as_ref().map(|(dir, _)| {
                    dir.strip_prefix(&self.dir)
                        .unwrap_or(dir)
                        .display()
                        .to_string()
                });
                record.verdict = Verdict::from_exit(child.code, record.results.is_some());
                record.exit_code = child.code;
                record.verdict_line = child.results.and_then(|(_, r)| r.verdict_line);
                if record.verdict == Verdict::Error {
                    let how = child.code.map_or("killed by a signal".to_string(), |c| {
                        format!("exit code {c}")
                    });
                    record.error = Some(child.last_error.unwrap_or(how));
                }
            }
            Err(e) => record.error = Some(format!("{e:#}")),
        }
        record.duration_s = started.elapsed().as_secs_f64();
        record
    }

    fn run_child(&self, spec: &TestSpec, folder: &RunFolder) -> anyhow::Result<ChildOutcome> {
        let logs = self.dir.join("logs");
        std::fs::create_dir_all(&logs)
            .with_context(|| format!("cannot create {}", logs.display()))?;
        let log_path = logs.join(format!("{}-{}.log", spec.name, spec.repetition));
        let log = File::create(&log_path)
            .with_context(|| format!("cannot create {}", log_path.display()))?;
        let log = Arc::new(Mutex::new(log));
        let mut child = Command::new(&self.exe)
            .args(self.args(spec, folder.dir()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot run {}", self.exe.display()))?;
        let stderr = child.stderr.take().expect("piped");
        let err_log = log.clone();
        let err_reader = std::thread::spawn(move || tee(stderr, &err_log));
        tee(child.stdout.take().expect("piped"), &log);
        let err_lines = err_reader.join().unwrap_or_default();
        let status = child.wait().context("waiting for the test")?;
        let results = match folder.read_results() {
            Ok(Some(results)) => Some((folder.dir().to_path_buf(), results)),
            Ok(None) => {
                // A test that stopped before its run began leaves nothing worth keeping.
                let _ = std::fs::remove_dir(folder.dir());
                None
            }
            Err(e) => {
                eprintln!("warning: {e:#}");
                None
            }
        };
        let last_error = err_lines
            .iter()
            .rev()
            .find(|l| l.starts_with("error: "))
            .or_else(|| err_lines.iter().rev().find(|l| !l.trim().is_empty()))
            .cloned();
        Ok(ChildOutcome {
            code: status.code(),
            results,
            last_error,
        })
    }
}

struct ChildOutcome {
    code: Option<i32>,
    /// The run folder and its results, when the test got as far as a verdict.
    results: Option<(PathBuf, Results)>,
    last_error: Option<String>,
}

/// Copies `stream` line by line to the log and to standard error; returns the lines.
fn tee(stream: impl std::io::Read, log: &Mutex<File>) -> Vec<String> {
    let mut lines = Vec::new();
    for line in BufReader::new(stream).split(b'\n').map_while(Result::ok) {
        let line = String::from_utf8_lossy(&line)
            .trim_end_matches('\r')
            .to_string();
        if let Ok(mut f) = log.lock() {
            let _ = writeln!(f, "{line}");
        }
        eprintln!("  {line}");
        lines.push(line);
    }
    lines
}

/// The suite's folder for a run starting now: `<results>/suites/<name>/<timestamp>`.
pub fn suite_dir(results: &Path, name: &str, stamp: &str) -> PathBuf {
    results.join("suites").join(name).join(stamp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_is_run_with_the_suites_flags() {
        let runner = Runner {
            exe: "/bin/stampede".into(),
            dir: "/r/suites/s/t".into(),
            common_args: vec!["--time-limit".into(), "10s".into()],
        };
        let spec = TestSpec {
            name: "w-n-zookeeper".into(),
            workload: "w".into(),
            nemesis: "n".into(),
            db: "zookeeper".into(),
            repetition: 2,
        };
        let args: Vec<String> = runner
            .args(&spec, Path::new("/r/suites/s/t/tests/w-n-zookeeper/1"))
            .iter()
            .map(|a| a.to_string_lossy().to_string())
            .collect();
        assert_eq!(
            args.join(" "),
            "test --workload w --nemesis n --db zookeeper --name w-n-zookeeper --run-dir /r/suites/s/t/tests/w-n-zookeeper/1 --time-limit 10s"
        );
    }

    #[test]
    fn a_program_that_fails_without_results_is_an_error_and_one_that_cannot_start_too() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("fake-test");
        std::fs::write(&script, "#!/bin/sh\necho 'setting up' >&2\necho 'error: on n1: connection refused' >&2\nexit 2\n").unwrap();
        std::process::Command::new("chmod")
            .args(["+x", &script.display().to_string()])
            .status()
            .unwrap();
        let spec = TestSpec {
            name: "t".into(),
            workload: "w".into(),
            nemesis: "n".into(),
            db: "zookeeper".into(),
            repetition: 1,
        };
        let runner = Runner {
            exe: script,
            dir: dir.path().to_path_buf(),
            common_args: vec![],
        };
        let record = runner.run(&spec);
        assert_eq!(record.verdict, Verdict::Error);
        assert_eq!(record.exit_code, Some(2));
        assert_eq!(
            record.error.as_deref(),
            Some("error: on n1: connection refused")
        );
        let log = std::fs::read_to_string(dir.path().join("logs/t-1.log")).unwrap();
        assert!(log.contains("setting up"));
        let left = std::fs::read_dir(dir.path().join("tests/t"))
            .unwrap()
            .count();
        assert_eq!(left, 0, "the empty run folder is removed");
        let missing = Runner {
            exe: dir.path().join("nonexistent"),
            ..runner
        };
        let record = missing.run(&spec);
        assert_eq!((record.verdict, record.exit_code), (Verdict::Error, None));
        assert!(record.error.unwrap().contains("cannot run"));
    }

    #[test]
    fn results_and_verdict_lines_are_read_from_the_run_folder() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("fake-test");
        std::fs::write(
            &script,
            "#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = --run-dir ] && d=$2; shift; done\n\
             echo 'results: /elsewhere'\n\
             echo '{\"valid\": false, \"verdict_line\": \"verdict: INVALID (x)\"}' > \"$d/results.json\"\nexit 1\n",
        )
        .unwrap();
        std::process::Command::new("chmod")
            .args(["+x", &script.display().to_string()])
            .status()
            .unwrap();
        let spec = TestSpec {
            name: "t".into(),
            workload: "w".into(),
            nemesis: "n".into(),
            db: "zookeeper".into(),
            repetition: 1,
        };
        let record = Runner {
            exe: script,
            dir: dir.path().to_path_buf(),
            common_args: vec![],
        }
        .run(&spec);
        assert_eq!(record.verdict, Verdict::Invalid);
        let results = record.results.expect("the run folder");
        assert!(results.starts_with("tests/t/"), "{results}");
        assert!(dir.path().join(&results).join("results.json").is_file());
        assert_eq!(record.verdict_line.as_deref(), Some("verdict: INVALID (x)"));
        assert_eq!(record.error, None);
    }
}
