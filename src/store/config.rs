//! `test.yaml`: the effective configuration of a run.

use serde::{Deserialize, Serialize};
use serde_yaml_ng::{Mapping, Value};

use crate::nemesis::NemesisConfig;
use crate::workload::WorkloadFile;

/// The fields of a workload's session, which files written before the `session` section
/// existed kept in the workload's own section.
const SESSION_FIELDS: [&str; 3] = ["connect", "op_timeout", "session_timeout"];

/// The effective configuration of a test, saved as `test.yaml` in its run folder.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestConfig {
    /// The test's name.
    pub name: String,
    /// The database under test.
    pub db: String,
    /// The nodes, by name and address.
    pub nodes: Vec<String>,
    /// The workload file as loaded, with overrides applied.
    pub workload: WorkloadFile,
    /// The nemesis package.
    pub nemesis: NemesisConfig,
    /// The names of the tests run together with this one: other workloads against the same
    /// database at the same time, under the same nemesis schedule (empty for a run alone).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub together: Vec<String>,
    /// The seed of the run's random choices (`stampede test --seed` makes them again); none
    /// in runs recorded before seeds were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl TestConfig {
    /// Reads a `test.yaml`, also one written before workload files had a `session` section
    /// (then every workload's section was kept, each with its session fields): the
    /// workload's own section gives the session, the other workloads' sections are dropped.
    pub fn from_yaml(text: &str) -> anyhow::Result<TestConfig> {
        let mut doc: Value = serde_yaml_ng::from_str(text)?;
        if let Some(workload) = doc.get_mut("workload").and_then(Value::as_mapping_mut) {
            if !workload.contains_key("session") {
                move_session_out(workload);
            }
        }
        Ok(serde_yaml_ng::from_value(doc)?)
    }

    /// The distinct fault kinds of the nemesis package in the order first met, joined by `+`
    /// (`none` for a package without faults).
    pub fn fault_kinds(&self) -> String {
        let mut kinds: Vec<String> = Vec::new();
        for fault in &self.nemesis.faults {
            let kind = fault.kind.clone();
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        match kinds.is_empty() {
            true => "none".into(),
            false => kinds.join("+"),
        }
    }
}

/// Rewrites a workload file of the first layout (a section per workload, the session fields
/// in each) into the current one.
fn move_session_out(workload: &mut Mapping) {
    let name = workload
        .get("workload")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut session = Mapping::new();
    if let Some(Value::Mapping(own)) = workload.get_mut(name.as_str()) {
        for field in SESSION_FIELDS {
            if let Some(value) = own.remove(field) {
                session.insert(field.into(), value);
            }
        }
    }
    let keep = |key: &Value| matches!(key.as_str(), Some(k) if k == name || k == "workload" || k == "generator");
    workload.retain(|key, _| keep(key));
    workload.insert("session".into(), Value::Mapping(session));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `test.yaml` as the previous layout wrote it (abridged: every section was there).
    const FIRST_LAYOUT: &str = "name: lock-sequential-none
db: zookeeper
nodes: [n1 root@10.0.0.1:22]
workload:
  workload: lock
  register: {keys_at_once: 5, connect: node, op_timeout: 5s, session_timeout: 10s}
  lock: {recipe: sequential, hold: 100ms, connect: ensemble, op_timeout: 2s, session_timeout: 8s}
  election: {recipe: fair, connect: node, op_timeout: 5s, session_timeout: 10s}
  generator: {rate: 50.0, concurrency: 7, time_limit: 10s, quiet_period: 1s, nemesis_interval: 1s, nemesis_duration: 1s}
nemesis: {faults: []}
";

    #[test]
    fn a_first_layout_test_yaml_reads_as_the_same_workload() {
        let config = TestConfig::from_yaml(FIRST_LAYOUT).unwrap();
        let file = &config.workload;
        assert_eq!(file.workload, "lock");
        assert_eq!(file.session.connect, crate::client::Connect::Ensemble);
        assert_eq!(file.session.op_timeout.0, std::time::Duration::from_secs(2));
        assert_eq!(
            file.session.session_timeout.0,
            std::time::Duration::from_secs(8)
        );
        assert_eq!(file.generator.concurrency, 7);
        assert_eq!(file.sections.keys().collect::<Vec<_>>(), ["lock"]);
        let workload = crate::workload::build(file).unwrap();
        assert_eq!(workload.settings()["hold"], "100ms");
        // Written again and read back, it is the same.
        let text = serde_yaml_ng::to_string(&config).unwrap();
        assert_eq!(
            TestConfig::from_yaml(&text).unwrap().workload,
            config.workload
        );
    }
}
