//! Leader election recipes as ZooKeeper users write them, run by candidates that campaign,
//! serve a tenure as leader, resign and campaign again.
//!
//! [`ElectionConfig`] is the `election` section of a workload file; [`ENTRY`] (with the nemesis
//! schedule) and [`driver::Candidates`] run one candidate per process slot against real
//! ZooKeeper. A candidate in office marks its term on the controller's record (`office`): a
//! `lead` operation invoked when it takes office and completed when it leaves (`ok`) or loses
//! its session (`info`), which `checker::election` judges.

pub mod driver;
mod office;
mod recipe;
mod workload;
#[cfg(test)]
mod zk_tests;

use serde::{Deserialize, Serialize};

use crate::config::Duration;
use crate::workload::on_disconnect::OnDisconnect;
use crate::workload::rounds::{Contention, RecipeSection};

pub use workload::ENTRY;

/// Which election recipe the candidates use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ElectionRecipe {
    /// One ephemeral leader node everybody tries to create; followers watch it and everyone
    /// runs again when it is deleted (the herd).
    Unfair,
    /// Ephemeral sequential candidate nodes; each watches its predecessor, the smallest leads
    /// and writes an acknowledgement node once it has taken office.
    Fair,
}

impl ElectionRecipe {
    /// Every election recipe.
    #[cfg(test)]
    pub const ALL: [ElectionRecipe; 2] = [ElectionRecipe::Unfair, ElectionRecipe::Fair];

    /// The workload name, e.g. `election-fair`.
    pub fn workload_name(self) -> &'static str {
        match self {
            ElectionRecipe::Unfair => "election-unfair",
            ElectionRecipe::Fair => "election-fair",
        }
    }
}

/// Settings of the election workloads (the `election` section of `workloads/election-*.yaml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ElectionConfig {
    /// The recipe.
    pub recipe: ElectionRecipe,
    /// How long a leader serves before it resigns.
    pub tenure: Duration,
    /// Pause between a resignation and the same candidate's next campaign.
    pub pause: Duration,
    /// What a leader does when its session is disconnected.
    pub on_disconnect: OnDisconnect,
    /// How contenders come and go (staggered by default), and when a waiter is starved.
    pub contention: Contention,
}

impl Default for ElectionConfig {
    fn default() -> ElectionConfig {
        let ms = |n| Duration(std::time::Duration::from_millis(n));
        ElectionConfig {
            recipe: ElectionRecipe::Fair,
            tenure: ms(200),
            pause: ms(50),
            on_disconnect: OnDisconnect::AssumeLost,
            contention: Contention::default(),
        }
    }
}

impl RecipeSection for ElectionConfig {
    fn workload_name(&self) -> &'static str {
        self.recipe.workload_name()
    }

    fn pause(&self) -> std::time::Duration {
        self.pause.0
    }

    fn contention(&self) -> &Contention {
        &self.contention
    }
}

impl ElectionConfig {
    /// Checks the values; the error names the field and what is wrong with it.
    pub fn validate(&self) -> Result<(), String> {
        if self.tenure.0.is_zero() {
            return Err("election.tenure must be above 0".into());
        }
        self.contention.validate("election")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipes_parse_by_name_and_typos_are_named() {
        let cfg: ElectionConfig =
            serde_yaml_ng::from_str("recipe: unfair\ntenure: 1s\non_disconnect: keep\n").unwrap();
        assert_eq!(cfg.recipe, ElectionRecipe::Unfair);
        assert_eq!(cfg.tenure.0, std::time::Duration::from_secs(1));
        assert_eq!(cfg.on_disconnect, OnDisconnect::Keep);
        assert_eq!(cfg.recipe.workload_name(), "election-unfair");
        let err = serde_yaml_ng::from_str::<ElectionConfig>("recipe: bully\n").unwrap_err();
        assert!(err.to_string().contains("unknown variant `bully`"), "{err}");
        let err = serde_yaml_ng::from_str::<ElectionConfig>("tenur: 1s\n").unwrap_err();
        assert!(err.to_string().contains("tenur"), "{err}");
    }

    #[test]
    fn the_shipped_election_files_hold_the_defaults_of_their_recipe() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads");
        for recipe in ElectionRecipe::ALL {
            let path = dir.join(format!("{}.yaml", recipe.workload_name()));
            let file: crate::workload::WorkloadFile = crate::config::load(&path).unwrap();
            assert_eq!(file.workload, "election");
            let expected = ElectionConfig {
                recipe,
                ..ElectionConfig::default()
            };
            assert_eq!(
                file.section::<ElectionConfig>(),
                Ok(expected),
                "{}",
                path.display()
            );
            assert_eq!(file.session, crate::workload::SessionConfig::default());
            assert!(crate::workload::build(&file).is_ok());
        }
    }

    #[test]
    fn bad_values_are_named() {
        let cfg = ElectionConfig {
            tenure: Duration(std::time::Duration::ZERO),
            ..ElectionConfig::default()
        };
        assert_eq!(
            cfg.validate().unwrap_err(),
            "election.tenure must be above 0"
        );
        assert!(ElectionConfig::default().validate().is_ok());
    }
}
