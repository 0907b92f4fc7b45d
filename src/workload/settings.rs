//! A workload's settings as one workload file gives them: its own section, the session every
//! workload shares, and the generator's pacing.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::{SessionConfig, WorkloadFile};
use crate::generator::GeneratorConfig;

/// A workload's own section of a workload file.
pub trait Section: Serialize + DeserializeOwned + Default {
    /// Checks the values (some against the generator's pacing); the error names the field.
    fn check(&self, generator: &GeneratorConfig) -> Result<(), String>;
}

/// The settings of a workload of section `C`.
#[derive(Debug, Clone)]
pub struct Settings<C> {
    /// Its own section.
    pub own: C,
    /// How its processes open their sessions.
    pub session: SessionConfig,
    /// Rate, concurrency, time limit and nemesis schedule.
    pub generator: GeneratorConfig,
}

impl<C: Section> Settings<C> {
    /// The settings `file` gives, checked; the error names the field.
    pub fn read(file: &WorkloadFile) -> Result<Settings<C>, String> {
        let own: C = file.section()?;
        own.check(&file.generator)?;
        Ok(Settings {
            own,
            session: file.session,
            generator: file.generator.clone(),
        })
    }

    /// Its own section as `test.yaml` keeps it.
    pub fn own_json(&self) -> Value {
        serde_json::to_value(&self.own).unwrap_or(Value::Null)
    }
}
