//! The suite file (`suites/*.yaml`) and its expansion into the tests it names.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;

use crate::config::{self, Override};

/// A suite as written in YAML: every combination of the lists is run `repetitions` times.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteFile {
    /// The suite's name in `results/suites/` (default: the file's name without `.yaml`).
    #[serde(default)]
    pub name: Option<String>,
    /// Workloads: names in `workloads/` or paths (relative to the suite file).
    pub workloads: Vec<String>,
    /// Nemesis packages: names in `nemeses/` or paths (relative to the suite file).
    pub nemeses: Vec<String>,
    /// Databases under test.
    #[serde(default = "default_dbs")]
    pub dbs: Vec<String>,
    /// How many times each combination runs.
    #[serde(default = "one")]
    pub repetitions: u32,
    /// Each test's time limit (`generator.time_limit`); the workload file's when absent.
    #[serde(default)]
    pub time_limit: Option<config::Duration>,
    /// Overrides given to every test, as `field=value` (like `--set`).
    #[serde(default)]
    pub set: Vec<Override>,
    /// Run the workloads together: each (repetition, db, nemesis) is one test running every
    /// workload at once against one database under one nemesis schedule, each workload in a
    /// run folder of its own (default: one test per workload).
    #[serde(default)]
    pub together: bool,
}

fn default_dbs() -> Vec<String> {
    vec![crate::db::DEFAULT.to_string()]
}

fn one() -> u32 {
    1
}

/// One test of the matrix, ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestSpec {
    /// The test's name (`<workload>-<nemesis>-<db>`, or `together-<nemesis>-<db>` for
    /// workloads run together), the same for every repetition.
    pub name: String,
    /// The workloads as given to `stampede test --workload`: one, or several run together.
    pub workloads: Vec<String>,
    /// The nemesis package as given to `--nemesis`.
    pub nemesis: String,
    /// The database.
    pub db: String,
    /// 1-based repetition number.
    pub repetition: u32,
}

impl TestSpec {
    /// Whether the test runs several workloads together.
    pub fn is_together(&self) -> bool {
        self.workloads.len() > 1
    }

    /// The names of the test's members, one per workload in order: the test's name for a
    /// solo test, `<workload>-<nemesis>-<db>` for each workload run together.
    pub fn member_names(&self) -> Vec<String> {
        if !self.is_together() {
            return vec![self.name.clone()];
        }
        self.workloads
            .iter()
            .map(|w| test_name(w, &self.nemesis, &self.db))
            .collect()
    }
}

impl SuiteFile {
    /// Reads and checks a suite file; errors name the file (and line, for YAML errors).
    pub fn load(path: &Path) -> anyhow::Result<SuiteFile> {
        let suite: SuiteFile = config::load(path)?;
        suite
            .validate()
            .with_context(|| path.display().to_string())?;
        Ok(suite)
    }

    fn validate(&self) -> anyhow::Result<()> {
        for (field, list) in [
            ("workloads", &self.workloads),
            ("nemeses", &self.nemeses),
            ("dbs", &self.dbs),
        ] {
            if list.is_empty() {
                bail!("{field}: the list is empty");
            }
            if let Some(bad) = list
                .iter()
                .find(|s| s.trim().is_empty() || s.starts_with('-'))
            {
                bail!("{field}: bad entry {bad:?}");
            }
        }
        if let Some(unknown) = self.dbs.iter().find_map(|db| crate::db::entry(db).err()) {
            bail!("dbs: {unknown}");
        }
        if self.repetitions == 0 {
            bail!("repetitions: must be at least 1");
        }
        if self.together {
            self.validate_together()?;
        }
        if let Some(name) = &self.name {
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                || name.starts_with('.')
            {
                bail!("name: {name:?}: use letters, digits, '-', '_' and '.'");
            }
        }
        Ok(())
    }

    /// A together suite needs two workloads or more, with distinct names (each member's run
    /// folder is named after its workload).
    fn validate_together(&self) -> anyhow::Result<()> {
        if self.workloads.len() < 2 {
            bail!("together: needs at least two workloads");
        }
        let mut stems = std::collections::BTreeSet::new();
        if let Some(twice) = self
            .workloads
            .iter()
            .find(|w| !stems.insert(stem(Path::new(w))))
        {
            bail!(
                "together: workload {twice:?} named twice (each member needs a folder of its own)"
            );
        }
        Ok(())
    }

    /// The suite's name: `name`, else the file's stem.
    pub fn name_for(&self, path: &Path) -> String {
        self.name.clone().unwrap_or_else(|| stem(path))
    }

    /// Every test of the matrix in run order: repetitions outermost, so that a suite cut
    /// short has run each combination at least once; then DBs, workloads (unless run
    /// together), nemeses. Entries that are paths are made relative to `suite_dir` (the suite
    /// file's folder).
    pub fn expand(&self, suite_dir: &Path) -> Vec<TestSpec> {
        let workloads: Vec<String> = self
            .workloads
            .iter()
            .map(|w| locate(suite_dir, w))
            .collect();
        let groups: Vec<&[String]> = match self.together {
            true => vec![&workloads],
            false => workloads.chunks(1).collect(),
        };
        let mut tests = Vec::new();
        for repetition in 1..=self.repetitions {
            for db in &self.dbs {
                for group in &groups {
                    for nemesis in &self.nemeses {
                        let nemesis = locate(suite_dir, nemesis);
                        // A together test is named as if its workload were called `together`.
                        let workload = match self.together {
                            true => "together",
                            false => &group[0],
                        };
                        tests.push(TestSpec {
                            name: test_name(workload, &nemesis, db),
                            workloads: group.to_vec(),
                            nemesis,
                            db: db.clone(),
                            repetition,
                        });
                    }
                }
            }
        }
        tests
    }
}

/// `<workload stem>-<nemesis stem>-<db>`.
fn test_name(workload: &str, nemesis: &str, db: &str) -> String {
    format!(
        "{}-{}-{db}",
        stem(Path::new(workload)),
        stem(Path::new(nemesis))
    )
}

/// A path-like entry (with a `/` or a `.yaml`/`.yml` ending) relative to the suite's folder;
/// a bare name as is.
fn locate(suite_dir: &Path, entry: &str) -> String {
    let is_path = entry.contains('/') || entry.ends_with(".yaml") || entry.ends_with(".yml");
    if is_path && Path::new(entry).is_relative() {
        PathBuf::from(suite_dir).join(entry).display().to_string()
    } else {
        entry.to_string()
    }
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "suite".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite(yaml: &str) -> anyhow::Result<SuiteFile> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.yaml");
        std::fs::write(&path, yaml).unwrap();
        SuiteFile::load(&path)
    }

    #[test]
    fn the_matrix_is_every_combination_times_the_repetitions() {
        let s = suite("workloads: [register, fixtures/w.yaml]\nnemeses: [none, partition, kill]\nrepetitions: 2\n").unwrap();
        let tests = s.expand(Path::new("/suites"));
        assert_eq!(tests.len(), 2 * 3 * 2);
        assert_eq!(
            tests[0],
            TestSpec {
                name: "register-none-zookeeper".into(),
                workloads: vec!["register".into()],
                nemesis: "none".into(),
                db: "zookeeper".into(),
                repetition: 1
            }
        );
        assert_eq!(tests[3].workloads, ["/suites/fixtures/w.yaml"]);
        assert_eq!(tests[3].name, "w-none-zookeeper");
        assert_eq!(tests[3].member_names(), ["w-none-zookeeper"]);
        assert!(!tests[3].is_together());
        assert!(
            tests[..6].iter().all(|t| t.repetition == 1)
                && tests[6..].iter().all(|t| t.repetition == 2)
        );
        let mut names: Vec<_> = tests.iter().map(|t| (&t.name, t.repetition)).collect();
        names.dedup();
        assert_eq!(names.len(), 12, "each test once per repetition");
    }

    #[test]
    fn a_together_suite_is_one_test_per_repetition_db_and_nemesis() {
        let s = suite("workloads: [register, fixtures/w.yaml, set]\nnemeses: [none, nemeses/kill.yaml]\ndbs: [zookeeper, keeperd]\nrepetitions: 2\ntogether: true\n").unwrap();
        let tests = s.expand(Path::new("/suites"));
        let order: Vec<_> = tests
            .iter()
            .map(|t| format!("{} #{}", t.name, t.repetition))
            .collect();
        assert_eq!(
            order,
            [
                "together-none-zookeeper #1",
                "together-kill-zookeeper #1",
                "together-none-keeperd #1",
                "together-kill-keeperd #1",
                "together-none-zookeeper #2",
                "together-kill-zookeeper #2",
                "together-none-keeperd #2",
                "together-kill-keeperd #2",
            ]
        );
        let t = &tests[1];
        assert!(t.is_together());
        assert_eq!(t.workloads, ["register", "/suites/fixtures/w.yaml", "set"]);
        assert_eq!(t.nemesis, "/suites/nemeses/kill.yaml");
        assert_eq!(
            t.member_names(),
            [
                "register-kill-zookeeper",
                "w-kill-zookeeper",
                "set-kill-zookeeper"
            ]
        );
    }

    #[test]
    fn shipped_suites_load() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let nightly = SuiteFile::load(&root.join("suites/nightly.yaml")).unwrap();
        assert_eq!(nightly.expand(&root.join("suites")).len(), 6);
        assert_eq!(
            nightly.time_limit.unwrap().0,
            std::time::Duration::from_secs(60)
        );
        SuiteFile::load(&root.join("suites/smoke.yaml")).unwrap();
    }

    /// Every suite file shipped in `suites/` loads, and names only workloads and nemesis
    /// packages that the project ships.
    #[test]
    fn every_shipped_suite_names_shipped_workloads_and_packages() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut loaded = 0;
        for entry in std::fs::read_dir(root.join("suites")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let suite = SuiteFile::load(&path).unwrap();
            let shipped = |dir: &str, name: &String| root.join(dir).join(format!("{name}.yaml"));
            for workload in &suite.workloads {
                let file = shipped("workloads", workload);
                assert!(file.exists(), "{}: {workload}", path.display());
            }
            for nemesis in &suite.nemeses {
                let file = shipped("nemeses", nemesis);
                assert!(file.exists(), "{}: {nemesis}", path.display());
            }
            loaded += 1;
        }
        assert!(loaded >= 6, "only {loaded} suite files");
    }

    #[test]
    fn bad_suites_are_rejected_naming_the_file_and_field() {
        let cases = [
            (
                "workloads: []\nnemeses: [none]\n",
                "workloads: the list is empty",
            ),
            (
                "workloads: [register]\nnemeses: [none]\nrepetitions: 0\n",
                "repetitions: must be at least 1",
            ),
            (
                "workloads: [register]\nnemeses: [none]\nset: [nofield]\n",
                "s.yaml:3:6: set: --set nofield: expected path.to.field=value",
            ),
            (
                "workloads: [register]\nnemeses: [none]\ntime_limit: 60\n",
                "s.yaml:3",
            ),
            ("workloads: [register]\nnemesis: [none]\n", "s.yaml:2"),
            (
                "workloads: [register]\nnemeses: [--evil]\n",
                "nemeses: bad entry",
            ),
            (
                "workloads: [register]\nnemeses: [none]\ndbs: [zookeeper, zk]\n",
                "dbs: unknown database \"zk\" (known: zookeeper, keeperd)",
            ),
            (
                "workloads: [register]\nnemeses: [none]\ntogether: true\n",
                "together: needs at least two workloads",
            ),
            (
                "workloads: [register, set, register]\nnemeses: [none]\ntogether: true\n",
                "together: workload \"register\" named twice",
            ),
            (
                "workloads: [register, w/register.yaml]\nnemeses: [none]\ntogether: true\n",
                "together: workload \"w/register.yaml\" named twice",
            ),
            (
                "workloads: [register]\nnemeses: [none]\ntogether: yes please\n",
                "s.yaml:3",
            ),
        ];
        for (yaml, expected) in cases {
            let err = format!("{:#}", suite(yaml).unwrap_err());
            assert!(
                err.contains(expected) && err.contains("s.yaml"),
                "{yaml:?}: {err}"
            );
        }
    }
}
