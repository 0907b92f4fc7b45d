//! What a suite found: one record per test (per member, for workloads run together), saved
//! as `summary.json`.

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::checker::result::Validity;

/// The outcome of one test of a suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The history is valid (exit code 0).
    Valid,
    /// Anomalies found (exit code 1).
    Invalid,
    /// The checkers could not decide, or the test was aborted after it started (exit code 2
    /// with a results folder).
    Unknown,
    /// The test did not produce a verdict: a setup error, a lost node, a crash.
    Error,
}

impl Verdict {
    /// The verdict of a finished `stampede test`: its exit code (None if killed by a signal)
    /// and whether it printed a results folder.
    pub fn from_exit(code: Option<i32>, has_results: bool) -> Verdict {
        match (code, has_results) {
            (Some(0), true) => Verdict::Valid,
            (Some(1), true) => Verdict::Invalid,
            (Some(2), true) => Verdict::Unknown,
            _ => Verdict::Error,
        }
    }

    /// The lower-case name, as in `summary.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Valid => "valid",
            Verdict::Invalid => "invalid",
            Verdict::Unknown => "unknown",
            Verdict::Error => "error",
        }
    }

    /// The background colour verdicts are shown in.
    pub fn colour(self) -> &'static str {
        match self {
            Verdict::Valid => "#c8f0c8",
            Verdict::Invalid => "#f4b4b4",
            Verdict::Unknown => "#f6e3a1",
            Verdict::Error => "#d8c8f0",
        }
    }
}

impl From<Validity> for Verdict {
    /// The verdict of a run's `results.json` (`Results::verdict`).
    fn from(validity: Validity) -> Verdict {
        match validity {
            Validity::Valid => Verdict::Valid,
            Validity::Invalid => Verdict::Invalid,
            Validity::Unknown => Verdict::Unknown,
        }
    }
}

/// One test of a suite as run, or one member of a test running workloads together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestRecord {
    /// The test's name (the member's, for workloads run together).
    pub name: String,
    /// The workload as given.
    pub workload: String,
    /// The nemesis package as given.
    pub nemesis: String,
    /// The database.
    pub db: String,
    /// 1-based repetition number.
    pub repetition: u32,
    /// The outcome.
    pub verdict: Verdict,
    /// `stampede test`'s exit code; null if it was killed by a signal or could not start.
    pub exit_code: Option<i32>,
    /// The test's results folder, relative to the suite's folder, if it made one.
    pub results: Option<String>,
    /// The verdict line `stampede test` printed last, if any.
    pub verdict_line: Option<String>,
    /// Wall-clock seconds the test took (all of it, for each member of a together test).
    pub duration_s: f64,
    /// Why there is no verdict (the test's last error line), for `error`.
    pub error: Option<String>,
}

/// A suite run: its name, when it started, and its tests so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The suite's name.
    pub suite: String,
    /// When it started (RFC 3339).
    pub started: String,
    /// Whether every test has run.
    pub finished: bool,
    /// The tests, in run order.
    pub tests: Vec<TestRecord>,
}

impl Summary {
    /// How many tests have `verdict`.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.tests.iter().filter(|t| t.verdict == verdict).count()
    }

    /// The suite's exit code: 1 if any test found anomalies, else 2 if any test errored or
    /// ended unknown, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.count(Verdict::Invalid) > 0 {
            1
        } else if self.count(Verdict::Error) + self.count(Verdict::Unknown) > 0 {
            2
        } else {
            0
        }
    }

    /// The overall verdict, the way a single test's is shown.
    pub fn verdict(&self) -> Verdict {
        match self.exit_code() {
            0 => Verdict::Valid,
            1 => Verdict::Invalid,
            _ if self.count(Verdict::Error) > 0 => Verdict::Error,
            _ => Verdict::Unknown,
        }
    }

    /// Writes `summary.json` into `dir`.
    pub fn save(&self, dir: &Path) -> anyhow::Result<()> {
        let path = dir.join("summary.json");
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(&path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// Reads `summary.json` from `dir`.
    pub fn load(dir: &Path) -> anyhow::Result<Summary> {
        let path = dir.join("summary.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| path.display().to_string())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A summary with one test of each verdict.
    pub(crate) fn sample() -> Summary {
        let record =
            |name: &str, verdict: Verdict, code: Option<i32>, error: Option<&str>| TestRecord {
                name: name.into(),
                workload: "register".into(),
                nemesis: "partition".into(),
                db: "zookeeper".into(),
                repetition: 1,
                verdict,
                exit_code: code,
                results: (verdict != Verdict::Error)
                    .then(|| format!("tests/{name}/2026-11-21T052629Z")),
                verdict_line: (verdict != Verdict::Error)
                    .then(|| format!("verdict: {} <&>", verdict.as_str())),
                duration_s: 12.5,
                error: error.map(str::to_string),
            };
        Summary {
            suite: "smoke".into(),
            started: "2026-11-21T05:26:29Z".into(),
            finished: true,
            tests: vec![
                record("a", Verdict::Valid, Some(0), None),
                record("b", Verdict::Invalid, Some(1), None),
                record("c", Verdict::Unknown, Some(2), None),
                record(
                    "d",
                    Verdict::Error,
                    Some(2),
                    Some("error: on n1: \"ssh\" <refused> & gone"),
                ),
            ],
        }
    }

    #[test]
    fn exit_codes_map_to_verdicts() {
        assert_eq!(Verdict::from_exit(Some(0), true), Verdict::Valid);
        assert_eq!(Verdict::from_exit(Some(1), true), Verdict::Invalid);
        assert_eq!(Verdict::from_exit(Some(2), true), Verdict::Unknown);
        assert_eq!(Verdict::from_exit(Some(2), false), Verdict::Error);
        assert_eq!(Verdict::from_exit(Some(0), false), Verdict::Error);
        assert_eq!(Verdict::from_exit(None, true), Verdict::Error);
        assert_eq!(Verdict::from_exit(Some(101), true), Verdict::Error);
    }

    #[test]
    fn anomalies_outrank_errors_in_the_exit_code() {
        let mut s = sample();
        assert_eq!((s.exit_code(), s.verdict()), (1, Verdict::Invalid));
        s.tests.remove(1);
        assert_eq!((s.exit_code(), s.verdict()), (2, Verdict::Error));
        s.tests.truncate(1);
        assert_eq!((s.exit_code(), s.verdict()), (0, Verdict::Valid));
    }

    #[test]
    fn summary_round_trips_through_json() {
        let dir = tempfile::tempdir().unwrap();
        let s = sample();
        s.save(dir.path()).unwrap();
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("summary.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(json["tests"][1]["verdict"], "invalid");
        assert_eq!(json["tests"][3]["results"], serde_json::Value::Null);
        assert_eq!(Summary::load(dir.path()).unwrap(), s);
    }
}
