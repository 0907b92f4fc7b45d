//! Running one test of a suite: `stampede test` as a child process of the running binary,
//! given a run folder under the suite's `tests/` for each of its workloads, its output kept
//! in the suite's `logs/` and echoed to standard error, each workload's outcome read from the
//! exit code (a solo test's) or its run folder's results.

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
    /// The full `stampede test` command line for `spec` (without the program): every
    /// workload, the nemesis and database, then each member's name and run folder
    /// (`run_dirs`, one per workload in order).
    pub fn args(&self, spec: &TestSpec, run_dirs: &[&Path]) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["test".into()];
        let mut flag = |name: &str, value: OsString| {
            args.push(name.into());
            args.push(value);
        };
        for workload in &spec.workloads {
            flag("--workload", workload.into());
        }
        flag("--nemesis", (&spec.nemesis).into());
        flag("--db", (&spec.db).into());
        for name in spec.member_names() {
            flag("--name", name.into());
        }
        for dir in run_dirs {
            flag("--run-dir", dir.into());
        }
        args.extend(self.common_args.iter().cloned());
        args
    }

    /// Runs `spec` to the end and records each member's outcome, in the order of its
    /// workloads; failing to start it is an `error` outcome for every member, so the suite
    /// goes on.
    pub fn run(&self, spec: &TestSpec) -> Vec<TestRecord> {
        let started = Instant::now();
        let names = spec.member_names();
        let outcome = self.create_folders(&names).and_then(|folders| {
            let child = self.run_child(spec, &folders);
            let results: Vec<_> = folders.iter().map(take_results).collect();
            child.map(|child| (child, results))
        });
        let duration_s = started.elapsed().as_secs_f64();
        let members = names.into_iter().zip(&spec.workloads);
        let blank = |(name, workload): (String, &String)| TestRecord {
            name,
            workload: workload.clone(),
            nemesis: spec.nemesis.clone(),
            db: spec.db.clone(),
            repetition: spec.repetition,
            verdict: Verdict::Error,
            exit_code: None,
            results: None,
            verdict_line: None,
            duration_s,
            error: None,
        };
        match outcome {
            Ok((child, results)) => members
                .zip(results)
                .map(|(member, results)| self.judge(spec, blank(member), &child, results))
                .collect(),
            Err(e) => members
                .map(|member| TestRecord {
                    error: Some(format!("{e:#}")),
                    ..blank(member)
                })
                .collect(),
        }
    }

    /// Fills in `record` for a member of `spec` whose child ended as `child` and left
    /// `results` (its run folder and results.json) if it got as far as a verdict.
    fn judge(
        &self,
        spec: &TestSpec,
        mut record: TestRecord,
        child: &ChildOutcome,
        results: Option<(PathBuf, Results)>,
    ) -> TestRecord {
        record.verdict = match (&results, spec.is_together()) {
            (_, false) => Verdict::from_exit(child.code, results.is_some()),
            (Some((_, r)), true) => r.verdict().into(),
            (None, true) => Verdict::Error,
        };
        record.exit_code = child.code;
        if record.verdict == Verdict::Error {
            let how = child.code.map_or("killed by a signal".to_string(), |c| {
                format!("exit code {c}")
            });
            record.error = Some(child.last_error.clone().unwrap_or(how));
        }
        if let Some((dir, r)) = results {
            let dir = dir.strip_prefix(&self.dir).unwrap_or(&dir);
            record.results = Some(dir.display().to_string());
            record.verdict_line = r.verdict_line;
        }
        record
    }

    /// A new run folder under the suite's `tests/` for each member.
    fn create_folders(&self, names: &[String]) -> anyhow::Result<Vec<RunFolder>> {
        let tests = self.dir.join("tests");
        names
            .iter()
            .map(|name| RunFolder::create(&tests, name))
            .collect()
    }

    fn run_child(&self, spec: &TestSpec, folders: &[RunFolder]) -> anyhow::Result<ChildOutcome> {
        let logs = self.dir.join("logs");
        std::fs::create_dir_all(&logs)
            .with_context(|| format!("cannot create {}", logs.display()))?;
        let log_path = logs.join(format!("{}-{}.log", spec.name, spec.repetition));
        let log = File::create(&log_path)
            .with_context(|| format!("cannot create {}", log_path.display()))?;
        let log = Arc::new(Mutex::new(log));
        let run_dirs: Vec<&Path> = folders.iter().map(RunFolder::dir).collect();
        let mut child = Command::new(&self.exe)
            .args(self.args(spec, &run_dirs))
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
        let last_error = err_lines
            .iter()
            .rev()
            .find(|l| l.starts_with("error: "))
            .or_else(|| err_lines.iter().rev().find(|l| !l.trim().is_empty()))
            .cloned();
        Ok(ChildOutcome {
            code: status.code(),
            last_error,
        })
    }
}

/// The run folder and its results, when its run got as far as a verdict; a folder left
/// empty (its test stopped before the run began) is removed.
fn take_results(folder: &RunFolder) -> Option<(PathBuf, Results)> {
    match folder.read_results() {
        Ok(Some(results)) => Some((folder.dir().to_path_buf(), results)),
        Ok(None) => {
            let _ = std::fs::remove_dir(folder.dir());
            None
        }
        Err(e) => {
            eprintln!("warning: {e:#}");
            None
        }
    }
}

struct ChildOutcome {
    code: Option<i32>,
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

    /// An executable shell script `fake-test` in `dir` running `body`.
    fn fake_test(dir: &Path, body: &str) -> PathBuf {
        let script = dir.join("fake-test");
        std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::process::Command::new("chmod")
            .args(["+x", &script.display().to_string()])
            .status()
            .unwrap();
        script
    }

    /// A test of the workloads `a`, `b` and `c` together under nemesis `n`.
    fn together() -> TestSpec {
        TestSpec {
            name: "together-n-zookeeper".into(),
            workloads: vec!["a".into(), "b".into(), "c".into()],
            nemesis: "n".into(),
            db: "zookeeper".into(),
            repetition: 1,
        }
    }

    #[test]
    fn a_test_is_run_with_the_suites_flags() {
        let runner = Runner {
            exe: "/bin/stampede".into(),
            dir: "/r/suites/s/t".into(),
            common_args: vec!["--time-limit".into(), "10s".into()],
        };
        let spec = TestSpec {
            name: "w-n-zookeeper".into(),
            workloads: vec!["w".into()],
            nemesis: "n".into(),
            db: "zookeeper".into(),
            repetition: 2,
        };
        let args: Vec<String> = runner
            .args(&spec, &[Path::new("/r/suites/s/t/tests/w-n-zookeeper/1")])
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
        let script = fake_test(
            dir.path(),
            "echo 'setting up' >&2\necho 'error: on n1: connection refused' >&2\nexit 2",
        );
        let spec = TestSpec {
            name: "t".into(),
            workloads: vec!["w".into()],
            nemesis: "n".into(),
            db: "zookeeper".into(),
            repetition: 1,
        };
        let runner = Runner {
            exe: script,
            dir: dir.path().to_path_buf(),
            common_args: vec![],
        };
        let [record] = runner.run(&spec).try_into().unwrap();
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
        let [record] = missing.run(&spec).try_into().unwrap();
        assert_eq!((record.verdict, record.exit_code), (Verdict::Error, None));
        assert!(record.error.unwrap().contains("cannot run"));
    }

    #[test]
    fn results_and_verdict_lines_are_read_from_the_run_folder() {
        let dir = tempfile::tempdir().unwrap();
        let script = fake_test(
            dir.path(),
            "while [ $# -gt 0 ]; do [ \"$1\" = --run-dir ] && d=$2; shift; done\n\
             echo 'results: /elsewhere'\n\
             echo '{\"valid\": false, \"verdict_line\": \"verdict: INVALID (x)\"}' > \"$d/results.json\"\nexit 1",
        );
        let spec = TestSpec {
            name: "t".into(),
            workloads: vec!["w".into()],
            nemesis: "n".into(),
            db: "zookeeper".into(),
            repetition: 1,
        };
        let runner = Runner {
            exe: script,
            dir: dir.path().to_path_buf(),
            common_args: vec![],
        };
        let [record] = runner.run(&spec).try_into().unwrap();
        assert_eq!(record.verdict, Verdict::Invalid);
        let results = record.results.expect("the run folder");
        assert!(results.starts_with("tests/t/"), "{results}");
        assert!(dir.path().join(&results).join("results.json").is_file());
        assert_eq!(record.verdict_line.as_deref(), Some("verdict: INVALID (x)"));
        assert_eq!(record.error, None);
    }

    #[test]
    fn workloads_together_are_one_command_line_with_a_name_and_folder_each() {
        let runner = Runner {
            exe: "/bin/stampede".into(),
            dir: "/s".into(),
            common_args: vec!["--time-limit".into(), "10s".into()],
        };
        let dirs = [
            "/s/tests/a-n-zookeeper/1",
            "/s/tests/b-n-zookeeper/1",
            "/s/tests/c-n-zookeeper/1",
        ];
        let dirs: Vec<&Path> = dirs.iter().map(Path::new).collect();
        let args: Vec<String> = runner
            .args(&together(), &dirs)
            .iter()
            .map(|a| a.to_string_lossy().to_string())
            .collect();
        assert_eq!(
            args.join(" "),
            "test --workload a --workload b --workload c --nemesis n --db zookeeper \
             --name a-n-zookeeper --name b-n-zookeeper --name c-n-zookeeper \
             --run-dir /s/tests/a-n-zookeeper/1 --run-dir /s/tests/b-n-zookeeper/1 \
             --run-dir /s/tests/c-n-zookeeper/1 --time-limit 10s"
        );
    }

    #[test]
    fn each_member_of_a_together_test_is_judged_by_its_own_results() {
        let dir = tempfile::tempdir().unwrap();
        let script = fake_test(
            dir.path(),
            "n=0\n\
             while [ $# -gt 0 ]; do\n\
               if [ \"$1\" = --run-dir ]; then\n\
                 n=$((n+1))\n\
                 case $n in\n\
                   1) echo '{\"valid\": true, \"verdict_line\": \"verdict: valid\"}' > \"$2/results.json\";;\n\
                   2) echo '{\"valid\": false, \"verdict_line\": \"verdict: INVALID (b)\"}' > \"$2/results.json\";;\n\
                 esac\n\
               fi\n\
               shift\n\
             done\n\
             echo 'error: c: setup failed' >&2\n\
             exit 1",
        );
        let runner = Runner {
            exe: script,
            dir: dir.path().to_path_buf(),
            common_args: vec![],
        };
        let [a, b, c] = runner.run(&together()).try_into().unwrap();
        let names = [&a.name, &b.name, &c.name];
        assert_eq!(names, ["a-n-zookeeper", "b-n-zookeeper", "c-n-zookeeper"]);
        assert_eq!([&a.workload, &b.workload, &c.workload], ["a", "b", "c"]);
        assert_eq!(
            [a.verdict, b.verdict, c.verdict],
            [Verdict::Valid, Verdict::Invalid, Verdict::Error]
        );
        assert!(a.exit_code == Some(1) && b.exit_code == Some(1) && c.exit_code == Some(1));
        for (record, prefix) in [(&a, "tests/a-n-zookeeper/"), (&b, "tests/b-n-zookeeper/")] {
            let results = record.results.as_deref().expect("the member's run folder");
            assert!(results.starts_with(prefix), "{results}");
            assert!(dir.path().join(results).join("results.json").is_file());
            assert_eq!(record.error, None);
        }
        assert_eq!(a.verdict_line.as_deref(), Some("verdict: valid"));
        assert_eq!(b.verdict_line.as_deref(), Some("verdict: INVALID (b)"));
        assert_eq!(c.results, None);
        assert_eq!(c.error.as_deref(), Some("error: c: setup failed"));
        let left = std::fs::read_dir(dir.path().join("tests/c-n-zookeeper"))
            .unwrap()
            .count();
        assert_eq!(left, 0, "the member's empty run folder is removed");
        assert!(dir.path().join("logs/together-n-zookeeper-1.log").is_file());
        let missing = Runner {
            exe: dir.path().join("nonexistent"),
            ..runner
        };
        let records = missing.run(&together());
        assert_eq!(records.len(), 3);
        assert!(records
            .iter()
            .all(|r| r.verdict == Verdict::Error
                && r.error.as_deref().unwrap().contains("cannot run")));
    }
}
