//! What the results folder holds: test runs (folders with `test.yaml` or `results.json`) and
//! suite runs (folders with `summary.json`), wherever they are under it.

use std::path::Path;

use crate::checker::result::Validity;
use crate::store::{Figures, Results, RunFolder, TestConfig};
use crate::suite::{Summary, Verdict};

/// How deep runs are looked for: `suites/<suite>/<stamp>/tests/<test>/<stamp>` is 6.
const MAX_DEPTH: usize = 6;

/// One test run.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Its folder relative to the results folder, with `/` separators.
    pub rel: String,
    /// The test's name.
    pub name: String,
    /// The folder's name: when the run started (`2026-11-21T052629Z`).
    pub stamp: String,
    /// None while the run has no results.json yet (running, or killed).
    pub verdict: Option<Verdict>,
    /// The workload kind (`register`).
    pub workload: String,
    /// The fault kinds of its nemesis, joined with `+` (`none` without faults).
    pub nemesis: String,
    /// The database.
    pub db: String,
    /// What a recipe run measured (empty for other runs, and before results.json).
    pub figures: Figures,
}

/// One suite run.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteRun {
    /// Its folder relative to the results folder.
    pub rel: String,
    /// The folder's name: when it started.
    pub stamp: String,
    /// Its summary.
    pub summary: Summary,
    /// The file to link to: its `index.html`, or `summary.json` when it has no page.
    pub page: &'static str,
}

/// Every run and suite run under `root`, newest first. Symlinks (`latest`) are not followed,
/// so each run appears once; unreadable folders are skipped.
pub fn scan(root: &Path) -> (Vec<Run>, Vec<SuiteRun>) {
    let (mut runs, mut suites) = (Vec::new(), Vec::new());
    walk(root, "", 0, &mut runs, &mut suites);
    runs.sort_by(|a, b| b.stamp.cmp(&a.stamp).then_with(|| a.rel.cmp(&b.rel)));
    suites.sort_by(|a, b| b.stamp.cmp(&a.stamp).then_with(|| a.rel.cmp(&b.rel)));
    (runs, suites)
}

fn walk(dir: &Path, rel: &str, depth: usize, runs: &mut Vec<Run>, suites: &mut Vec<SuiteRun>) {
    if dir.join("summary.json").is_file() {
        if let Ok(summary) = Summary::load(dir) {
            let page = if dir.join("index.html").is_file() {
                "index.html"
            } else {
                "summary.json"
            };
            suites.push(SuiteRun {
                rel: rel.to_string(),
                stamp: last_segment(rel),
                summary,
                page,
            });
        }
    } else if RunFolder::is_run(dir) {
        runs.push(read_run(dir, rel));
        return;
    }
    if depth >= MAX_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if kind.is_dir() && !name.starts_with('.') {
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            walk(&entry.path(), &child, depth + 1, runs, suites);
        }
    }
}

fn last_segment(rel: &str) -> String {
    rel.rsplit('/').next().unwrap_or(rel).to_string()
}

/// A run's facts from its `test.yaml` and `results.json`, with what is missing or unreadable
/// left blank.
pub fn read_run(dir: &Path, rel: &str) -> Run {
    read_run_and_results(dir, rel).0
}

/// A run's facts, and its `results.json` when it has a readable one (each file read once).
pub fn read_run_and_results(dir: &Path, rel: &str) -> (Run, Option<Results>) {
    let folder = RunFolder::open(dir);
    let config = folder.read_config().ok().flatten();
    let results = folder.read_results().ok().flatten();
    let parent_name = rel.rsplit('/').nth(1).unwrap_or("?").to_string();
    let run = Run {
        rel: rel.to_string(),
        name: config.as_ref().map_or(parent_name, |c| c.name.clone()),
        stamp: last_segment(rel),
        verdict: results.as_ref().map(verdict_of),
        figures: results
            .as_ref()
            .map_or_else(Figures::default, |r| r.figures.clone()),
        workload: config
            .as_ref()
            .map_or("?".into(), |c| c.workload.workload.clone()),
        nemesis: config
            .as_ref()
            .map_or("none".into(), TestConfig::fault_kinds),
        db: config.map_or("?".into(), |c| c.db),
    };
    (run, results)
}

/// The verdict `results.json` states (an aborted run is unknown).
pub fn verdict_of(results: &Results) -> Verdict {
    match results.verdict() {
        Validity::Valid => Verdict::Valid,
        Validity::Invalid => Verdict::Invalid,
        Validity::Unknown => Verdict::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_dir(root: &Path, rel: &str, name: &str, results: Option<&str>, faults: &str) {
        let dir = root.join(rel);
        std::fs::create_dir_all(&dir).unwrap();
        let yaml = format!("name: {name}\ndb: zookeeper\nnodes: []\nworkload:\n  workload: register\nnemesis:\n  faults: {faults}\n");
        std::fs::write(dir.join("test.yaml"), yaml).unwrap();
        if let Some(r) = results {
            std::fs::write(dir.join("results.json"), r).unwrap();
        }
    }

    #[test]
    fn runs_and_suites_are_found_newest_first_with_their_facts() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        run_dir(root, "a/2026-11-20T010000Z", "a", Some(r#"{"valid": true, "aborted": null}"#), "[{kind: partition, target: halves}, {kind: kill, target: one}, {kind: partition, target: leader}]");
        run_dir(
            root,
            "a/2026-11-21T010000Z",
            "a",
            Some(r#"{"valid": false, "aborted": null}"#),
            "[]",
        );
        run_dir(root, "b/2026-11-22T010000Z", "b", None, "[]");
        run_dir(
            root,
            "c/2026-11-19T010000Z",
            "c",
            Some(r#"{"valid": true, "aborted": "interrupted by SIGINT"}"#),
            "[]",
        );
        std::os::unix::fs::symlink("a/2026-11-21T010000Z", root.join("latest")).unwrap();
        let suite = root.join("suites/s/2026-11-23T000000Z");
        run_dir(
            &suite,
            "tests/t/2026-11-23T000001Z",
            "t",
            Some(r#"{"valid": "unknown", "aborted": null}"#),
            "[]",
        );
        let summary = Summary {
            suite: "s".into(),
            started: "x".into(),
            finished: true,
            tests: vec![],
        };
        summary.save(&suite).unwrap();

        let (runs, suites) = scan(root);
        let stamps: Vec<&str> = runs.iter().map(|r| r.stamp.as_str()).collect();
        assert_eq!(
            stamps,
            [
                "2026-11-23T000001Z",
                "2026-11-22T010000Z",
                "2026-11-21T010000Z",
                "2026-11-20T010000Z",
                "2026-11-19T010000Z"
            ]
        );
        let verdicts: Vec<Option<Verdict>> = runs.iter().map(|r| r.verdict).collect();
        assert_eq!(
            verdicts,
            [
                Some(Verdict::Unknown),
                None,
                Some(Verdict::Invalid),
                Some(Verdict::Valid),
                Some(Verdict::Unknown)
            ]
        );
        assert_eq!(runs[3].nemesis, "partition+kill");
        assert_eq!(runs[2].nemesis, "none");
        assert_eq!(
            (runs[3].workload.as_str(), runs[3].db.as_str()),
            ("register", "zookeeper")
        );
        assert_eq!(
            runs[0].rel,
            "suites/s/2026-11-23T000000Z/tests/t/2026-11-23T000001Z"
        );
        assert_eq!(suites.len(), 1);
        assert_eq!(
            (suites[0].rel.as_str(), suites[0].page),
            ("suites/s/2026-11-23T000000Z", "summary.json")
        );
    }
}
