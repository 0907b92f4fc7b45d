//! Running one test of a suite in this process: a run folder under the suite's `tests/` for
//! each of its workloads, the test run there by the function the suite is given (`stampede
//! test`'s own), each workload's outcome read from the test's exit code (a solo test's) or its
//! run folder's results.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::Instant;

use futures::FutureExt;

use super::file::TestSpec;
use super::summary::{TestRecord, Verdict};
use crate::nemesis;
use crate::store::{Results, RunFolder};

/// How every test of a suite is run.
#[derive(Debug, Clone)]
pub struct Runner {
    /// The suite's folder: tests go to `<dir>/tests`.
    pub dir: PathBuf,
}

impl Runner {
    /// Runs `spec` to the end with `run_test` (given the test and each member's new run
    /// folder, in the order of its workloads; it ends with `stampede test`'s exit code) and
    /// records each member's outcome in that order. A test that fails, panics or cannot be
    /// started is an `error` outcome for every member without results, so the suite goes on.
    pub async fn run(
        &self,
        spec: &TestSpec,
        run_test: impl AsyncFn(&TestSpec, &[PathBuf]) -> anyhow::Result<u8>,
    ) -> Vec<TestRecord> {
        let started = Instant::now();
        let names = spec.member_names();
        let outcome = match self.create_folders(&names) {
            Ok(folders) => {
                let dirs: Vec<PathBuf> = folders.iter().map(|f| f.dir().to_path_buf()).collect();
                let ran = AssertUnwindSafe(run_test(spec, &dirs))
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|panic| Err(nemesis::panicked(panic)));
                let results: Vec<_> = folders.iter().map(take_results).collect();
                Ok((Ended::from(ran), results))
            }
            Err(e) => Err(e),
        };
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
            Ok((ended, results)) => members
                .zip(results)
                .map(|(member, results)| self.judge(spec, blank(member), &ended, results))
                .collect(),
            Err(e) => members
                .map(|member| TestRecord {
                    error: Some(format!("{e:#}")),
                    ..blank(member)
                })
                .collect(),
        }
    }

    /// Fills in `record` for a member of `spec` whose test ended as `ended` and left
    /// `results` (its run folder and results.json) if it got as far as a verdict.
    fn judge(
        &self,
        spec: &TestSpec,
        mut record: TestRecord,
        ended: &Ended,
        results: Option<(PathBuf, Results)>,
    ) -> TestRecord {
        record.verdict = match (&results, spec.is_together()) {
            (_, false) => Verdict::from_exit(Some(ended.code), results.is_some()),
            (Some((_, r)), true) => r.verdict().into(),
            (None, true) => Verdict::Error,
        };
        record.exit_code = Some(ended.code);
        if record.verdict == Verdict::Error {
            let how = format!("exit code {}", ended.code);
            record.error = Some(ended.error.clone().unwrap_or(how));
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
}

/// How a test ended: the exit code `stampede test` would have ended with, and its error line
/// when it failed (2 then).
struct Ended {
    code: i32,
    error: Option<String>,
}

impl From<anyhow::Result<u8>> for Ended {
    fn from(ran: anyhow::Result<u8>) -> Ended {
        match ran {
            Ok(code) => Ended {
                code: code.into(),
                error: None,
            },
            Err(e) => Ended {
                code: 2,
                error: Some(format!("error: {e:#}")),
            },
        }
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

/// The suite's folder for a run starting now: `<results>/suites/<name>/<timestamp>`.
pub fn suite_dir(results: &Path, name: &str, stamp: &str) -> PathBuf {
    results.join("suites").join(name).join(stamp)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A test of the workload `w` alone.
    fn solo() -> TestSpec {
        TestSpec {
            name: "t".into(),
            workloads: vec!["w".into()],
            nemesis: "n".into(),
            db: "zookeeper".into(),
            repetition: 1,
        }
    }

    /// Writes a results.json judged `valid` with `line` into `dir`, as a judged run does.
    fn judged(dir: &Path, valid: bool, line: &str) {
        let json = serde_json::json!({"valid": valid, "verdict_line": line});
        std::fs::write(dir.join("results.json"), json.to_string()).unwrap();
    }

    #[tokio::test]
    async fn a_test_that_fails_without_results_is_an_error_and_one_that_panics_too() {
        let dir = tempfile::tempdir().unwrap();
        let runner = Runner {
            dir: dir.path().to_path_buf(),
        };
        let failing = async |spec: &TestSpec, dirs: &[PathBuf]| -> anyhow::Result<u8> {
            assert_eq!((spec.name.as_str(), dirs.len()), ("t", 1));
            assert!(dirs[0].starts_with(dir.path().join("tests/t")), "{dirs:?}");
            anyhow::bail!("on n1: connection refused")
        };
        let [record] = runner.run(&solo(), failing).await.try_into().unwrap();
        assert_eq!(record.verdict, Verdict::Error);
        assert_eq!(record.exit_code, Some(2));
        assert_eq!(
            record.error.as_deref(),
            Some("error: on n1: connection refused")
        );
        assert_eq!(record.results, None);
        let left = std::fs::read_dir(dir.path().join("tests/t"))
            .unwrap()
            .count();
        assert_eq!(left, 0, "the empty run folder is removed");
        let panicking = async |_: &TestSpec, _: &[PathBuf]| -> anyhow::Result<u8> {
            panic!("boom in the checker")
        };
        let [record] = runner.run(&solo(), panicking).await.try_into().unwrap();
        assert_eq!(
            (record.verdict, record.exit_code),
            (Verdict::Error, Some(2))
        );
        assert_eq!(
            record.error.as_deref(),
            Some("error: panicked: boom in the checker")
        );
    }

    #[tokio::test]
    async fn a_test_that_cannot_get_its_run_folders_is_an_error_without_running() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tests"), "a file, not a folder").unwrap();
        let runner = Runner {
            dir: dir.path().to_path_buf(),
        };
        let ran = std::cell::Cell::new(false);
        let run = async |_: &TestSpec, _: &[PathBuf]| -> anyhow::Result<u8> {
            ran.set(true);
            Ok(0)
        };
        let records = runner.run(&together(), run).await;
        assert!(!ran.get(), "the test did not run");
        assert_eq!(records.len(), 3);
        assert!(records.iter().all(|r| r.verdict == Verdict::Error
            && r.exit_code.is_none()
            && r.error.as_deref().unwrap().contains("cannot create")));
    }

    #[tokio::test]
    async fn results_and_verdict_lines_are_read_from_the_run_folder() {
        let dir = tempfile::tempdir().unwrap();
        let runner = Runner {
            dir: dir.path().to_path_buf(),
        };
        let run = async |_: &TestSpec, dirs: &[PathBuf]| -> anyhow::Result<u8> {
            judged(&dirs[0], false, "verdict: INVALID (x)");
            Ok(1)
        };
        let [record] = runner.run(&solo(), run).await.try_into().unwrap();
        assert_eq!(record.verdict, Verdict::Invalid);
        assert_eq!(record.exit_code, Some(1));
        let results = record.results.expect("the run folder");
        assert!(results.starts_with("tests/t/"), "{results}");
        assert!(dir.path().join(&results).join("results.json").is_file());
        assert_eq!(record.verdict_line.as_deref(), Some("verdict: INVALID (x)"));
        assert_eq!(record.error, None);
        let unknown = async |_: &TestSpec, dirs: &[PathBuf]| -> anyhow::Result<u8> {
            judged(&dirs[0], true, "verdict: unknown (aborted)");
            Ok(2)
        };
        let [record] = runner.run(&solo(), unknown).await.try_into().unwrap();
        assert_eq!((record.verdict, record.error), (Verdict::Unknown, None));
    }

    #[tokio::test]
    async fn each_member_of_a_together_test_is_judged_by_its_own_results() {
        let dir = tempfile::tempdir().unwrap();
        let runner = Runner {
            dir: dir.path().to_path_buf(),
        };
        let run = async |spec: &TestSpec, dirs: &[PathBuf]| -> anyhow::Result<u8> {
            assert_eq!(spec, &together());
            for (d, member) in dirs.iter().zip(spec.member_names()) {
                assert!(
                    d.starts_with(dir.path().join("tests").join(member)),
                    "{d:?}"
                );
            }
            judged(&dirs[0], true, "verdict: valid");
            judged(&dirs[1], false, "verdict: INVALID (b)");
            anyhow::bail!("c: setup failed")
        };
        let [a, b, c] = runner.run(&together(), run).await.try_into().unwrap();
        let names = [&a.name, &b.name, &c.name];
        assert_eq!(names, ["a-n-zookeeper", "b-n-zookeeper", "c-n-zookeeper"]);
        assert_eq!([&a.workload, &b.workload, &c.workload], ["a", "b", "c"]);
        assert_eq!(
            [a.verdict, b.verdict, c.verdict],
            [Verdict::Valid, Verdict::Invalid, Verdict::Error]
        );
        assert!(a.exit_code == Some(2) && b.exit_code == Some(2) && c.exit_code == Some(2));
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
        let panicking =
            async |_: &TestSpec, _: &[PathBuf]| -> anyhow::Result<u8> { panic!("boom") };
        let records = runner.run(&together(), panicking).await;
        assert_eq!(records.len(), 3);
        assert!(records
            .iter()
            .all(|r| r.verdict == Verdict::Error
                && r.error.as_deref() == Some("error: panicked: boom")));
    }
}
