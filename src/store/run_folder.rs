//! One run's folder: where its files go, and reading and writing them as typed structs.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::{Results, TestConfig, SCHEMA};

/// A run's folder, `results/<test>/<stamp>/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFolder {
    dir: PathBuf,
}

impl RunFolder {
    /// Makes a new folder for a run of `test` under `results`, named by the time now (with a
    /// `-2`, `-3`… suffix if a run of that second already has it), and points
    /// `results/latest` at it.
    pub fn create(results: &Path, test: &str) -> anyhow::Result<RunFolder> {
        let stamp = stamp(std::time::SystemTime::now());
        let parent = results.join(test);
        std::fs::create_dir_all(&parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
        let mut n = 1;
        let dir = loop {
            let name = match n {
                1 => stamp.clone(),
                n => format!("{stamp}-{n}"),
            };
            let dir = parent.join(name);
            match std::fs::create_dir(&dir) {
                Ok(()) => break dir,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
                Err(e) => return Err(e).context(format!("cannot create {}", dir.display())),
            }
        };
        link_latest(results, &dir)?;
        Ok(RunFolder { dir })
    }

    /// Makes the folder `dir` for a new run (a folder chosen by the caller, as a suite chooses
    /// each test's); it may exist but must not hold a run yet.
    pub fn create_at(dir: &Path) -> anyhow::Result<RunFolder> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let folder = RunFolder::open(dir);
        anyhow::ensure!(
            !folder.config_path().exists() && !folder.history_path().exists(),
            "{}: already holds a run",
            dir.display()
        );
        Ok(folder)
    }

    /// The run folder at `dir` (which may not hold anything yet).
    pub fn open(dir: &Path) -> RunFolder {
        RunFolder {
            dir: dir.to_path_buf(),
        }
    }

    /// Whether `dir` is a run's folder: it has a `test.yaml` or a `results.json`.
    pub fn is_run(dir: &Path) -> bool {
        let folder = RunFolder::open(dir);
        folder.config_path().is_file() || folder.results_path().is_file()
    }

    /// The judged runs (folders with a `results.json`) directly inside the test folder
    /// `test_dir`, in timestamp order; links such as `latest` are passed over.
    pub fn judged_runs_in(test_dir: &Path) -> anyhow::Result<Vec<RunFolder>> {
        let entries = std::fs::read_dir(test_dir)
            .with_context(|| format!("cannot read {}", test_dir.display()))?;
        let mut runs = Vec::new();
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot read {}", test_dir.display()))?;
            if entry.file_type()?.is_symlink() {
                continue;
            }
            let folder = RunFolder::open(&entry.path());
            if folder.results_path().is_file() {
                runs.push(folder);
            }
        }
        runs.sort_by(|a, b| a.dir.cmp(&b.dir));
        Ok(runs)
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The folder's own name: the run's timestamp.
    pub fn stamp(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "-".into())
    }

    /// `test.yaml`.
    pub fn config_path(&self) -> PathBuf {
        self.dir.join("test.yaml")
    }

    /// `history.jsonl`, written as the run goes.
    pub fn history_path(&self) -> PathBuf {
        self.dir.join("history.jsonl")
    }

    /// `results.json`.
    pub fn results_path(&self) -> PathBuf {
        self.dir.join("results.json")
    }

    /// `timeline.html`.
    pub fn timeline_path(&self) -> PathBuf {
        self.dir.join("timeline.html")
    }

    /// `nodes/<node>/`, where a node's logs are copied.
    pub fn node_dir(&self, node: &str) -> PathBuf {
        self.dir.join("nodes").join(node)
    }

    /// The text of `nodes/<node>/<file>` for every node that has one, by node name (a
    /// log not valid UTF-8 read lossily).
    pub fn node_logs(&self, file: &str) -> Vec<(String, String)> {
        let Ok(entries) = std::fs::read_dir(self.dir.join("nodes")) else {
            return Vec::new();
        };
        let mut logs: Vec<(String, String)> = entries
            .flatten()
            .filter_map(|e| {
                let bytes = std::fs::read(e.path().join(file)).ok()?;
                let node = e.file_name().to_string_lossy().to_string();
                Some((node, String::from_utf8_lossy(&bytes).into_owned()))
            })
            .collect();
        logs.sort();
        logs
    }

    /// Writes `test.yaml`.
    pub fn write_config(&self, config: &TestConfig) -> anyhow::Result<()> {
        crate::config::save(&self.config_path(), config)
    }

    /// Reads `test.yaml` (also as written before workload files had a `session` section);
    /// `None` when the run has none.
    pub fn read_config(&self) -> anyhow::Result<Option<TestConfig>> {
        let path = self.config_path();
        if !path.exists() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        TestConfig::from_yaml(&text)
            .map(Some)
            .with_context(|| format!("{}: not a test configuration", path.display()))
    }

    /// Writes `results.json` in the current schema.
    pub fn write_results(&self, results: &Results) -> anyhow::Result<()> {
        let path = self.results_path();
        let results = Results {
            schema: SCHEMA,
            ..results.clone()
        };
        std::fs::write(&path, serde_json::to_string_pretty(&results)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// Reads `results.json` (of any schema: an older one's figures are derived from its
    /// reports and `test.yaml`); `None` when the run has none (still running, or its
    /// controller was killed).
    pub fn read_results(&self) -> anyhow::Result<Option<Results>> {
        let path = self.results_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).context(format!("cannot read {}", path.display())),
        };
        let mut results: Results = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a results file", path.display()))?;
        if results.schema < SCHEMA {
            let config = self.read_config().ok().flatten();
            let workload = config.and_then(|c| crate::workload::build(&c.workload).ok());
            if let Some(workload) = workload {
                results.figures = workload.figures(&results.checks);
            }
        }
        Ok(Some(results))
    }
}

/// The name of a folder for something started at `at`: its UTC time to the second without
/// colons, e.g. `2026-11-21T052629Z`.
pub fn stamp(at: std::time::SystemTime) -> String {
    humantime::format_rfc3339_seconds(at)
        .to_string()
        .replace(':', "")
}

/// Points `results/latest` at the run folder `dir`.
fn link_latest(results: &Path, dir: &Path) -> anyhow::Result<()> {
    let latest = results.join("latest");
    let target = dir.strip_prefix(results).unwrap_or(dir);
    let _ = std::fs::remove_file(&latest);
    std::os::unix::fs::symlink(target, &latest)
        .with_context(|| format!("cannot link {}", latest.display()))
}
