//! A workload file, `workloads/<name>.yaml`: which workload runs, its own section (named
//! after it), the `session` section every workload shares, and the generator's pacing.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::SessionConfig;
use crate::db::DbSettings;
use crate::generator::GeneratorConfig;

/// The contents of a workload file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadFile {
    /// Which workload runs (a name in the registry, [`super::WORKLOADS`]).
    pub workload: String,
    /// How processes open their sessions.
    #[serde(default)]
    pub session: SessionConfig,
    /// Rate, concurrency, time limit and nemesis schedule.
    #[serde(default)]
    pub generator: GeneratorConfig,
    /// Settings of the database under test (its snapshot interval).
    #[serde(default, skip_serializing_if = "DbSettings::is_default")]
    pub db: DbSettings,
    /// The workload's own section, named after it (`lock:` for `workload: lock`), as written.
    #[serde(flatten)]
    pub sections: BTreeMap<String, serde_yaml_ng::Value>,
}

impl WorkloadFile {
    /// A file for `workload` with every setting at its default.
    pub fn named(workload: &str) -> WorkloadFile {
        WorkloadFile {
            workload: workload.to_string(),
            session: SessionConfig::default(),
            generator: GeneratorConfig::default(),
            db: DbSettings::default(),
            sections: BTreeMap::new(),
        }
    }

    /// The workload's own section as its settings type (the defaults when absent); the error
    /// names the section and what is wrong in it.
    pub fn section<C: DeserializeOwned + Default>(&self) -> Result<C, String> {
        match self.sections.get(&self.workload) {
            None | Some(serde_yaml_ng::Value::Null) => Ok(C::default()),
            Some(value) => {
                crate::config::from_section(value).map_err(|e| format!("{}: {e}", self.workload))
            }
        }
    }

    /// Refuses a section that is not the workload's own (a typo, or another workload's).
    pub fn check_sections(&self) -> Result<(), String> {
        match self.sections.keys().find(|k| **k != self.workload) {
            Some(other) => Err(format!(
                "unknown field `{other}` (expected `workload`, `session`, `generator`, `db` or \
                 the workload's own section `{}`)",
                self.workload
            )),
            None => Ok(()),
        }
    }

    /// The file with its own section replaced by `settings` (the effective settings, as a
    /// run's `test.yaml` keeps them).
    pub fn with_settings(&self, settings: serde_json::Value) -> WorkloadFile {
        let mut file = self.clone();
        let value = serde_yaml_ng::to_value(settings).unwrap_or(serde_yaml_ng::Value::Null);
        file.sections = BTreeMap::from([(self.workload.clone(), value)]);
        file
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::workload::{build, WORKLOADS};

    #[test]
    fn every_shipped_file_names_a_known_workload_and_holds_valid_settings() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads");
        let mut seen = std::collections::BTreeSet::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let file: WorkloadFile = crate::config::load(&path).unwrap();
            let workload = build(&file).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            // What test.yaml keeps reads back as the same workload.
            let kept = file.with_settings(workload.settings());
            let again = build(&kept).unwrap();
            assert_eq!(again.settings(), workload.settings(), "{}", path.display());
            seen.insert(file.workload);
        }
        for entry in WORKLOADS {
            assert!(
                seen.contains(entry.name),
                "no workloads/ file runs {}",
                entry.name
            );
        }
    }

    #[test]
    fn unknown_workloads_sections_and_values_are_named() {
        let parse = |yaml: &str| serde_yaml_ng::from_str::<WorkloadFile>(yaml).unwrap();
        let err = build(&parse("workload: bnak\n")).err().unwrap();
        assert!(
            err.starts_with("workload: unknown workload \"bnak\" (known: register, lock"),
            "{err}"
        );
        let err = build(&parse("workload: register\nregistr: {}\n"))
            .err()
            .unwrap();
        assert!(err.contains("unknown field `registr`"), "{err}");
        let err = build(&parse("workload: register\ngenerator: {rate: -1}\n"))
            .err()
            .unwrap();
        assert!(err.starts_with("generator.rate"), "{err}");
        let err = build(&parse("workload: register\nregister: {keys_at_once: 0}\n"))
            .err()
            .unwrap();
        assert_eq!(err, "register.keys_at_once must be at least 1");
        let err = build(&parse("workload: register\nregister: {keys: 3}\n"))
            .err()
            .unwrap();
        assert!(err.starts_with("register: unknown field `keys`"), "{err}");
        let err = build(&parse("workload: lock\nsession: {op_timeout: 0s}\n"))
            .err()
            .unwrap();
        assert_eq!(err, "session.op_timeout must be above 0");
    }

    #[test]
    fn a_bad_snap_count_is_one_line_naming_the_file_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.yaml");
        std::fs::write(&path, "workload: register\ndb:\n  snap_count: 1000\n").unwrap();
        let (file, _) = crate::workload::load(&path, &[], |_| {}).unwrap();
        assert_eq!(file.db.snap_count, Some(1000));
        let set = |text: &str| vec![text.parse::<crate::config::Override>().unwrap()];
        let (file, _) = crate::workload::load(&path, &set("db.snap_count=20"), |_| {}).unwrap();
        assert_eq!(file.db.snap_count, Some(20));
        let err = crate::workload::load(&path, &set("db.snap_count=1"), |_| {})
            .err()
            .unwrap();
        assert_eq!(
            format!("{err:#}"),
            format!(
                "{}: db.snap_count 1 is below 2 (ZooKeeper raises any snapCount under 2 to 2)",
                path.display()
            )
        );
        let err = crate::workload::load(&path, &set("db.snapcount=5"), |_| {})
            .err()
            .unwrap();
        let err = format!("{err:#}");
        assert!(
            err.contains("unknown field `snapcount`") && !err.contains('\n'),
            "{err}"
        );
    }
}
