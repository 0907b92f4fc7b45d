//! Lock recipes as ZooKeeper users really write them, run by contenders that take the lock,
//! work on a protected resource while they believe they hold it, and give it back.
//!
//! [`LockConfig`] is the `lock` section of a workload file; [`ENTRY`] (with the nemesis
//! schedule) and [`driver::Contenders`] run one contender per process slot against real
//! ZooKeeper, recording `acquire`, `hold` and `release` operations; the protected resource
//! (`resource`) is kept by the controller, and the herd meter (`herd`) counts the watch
//! notifications and reactions each release causes.

mod client_crate;
pub mod driver;
mod holder;
mod latency;
mod recipe;
mod resource;
mod single_node;
mod workload;
#[cfg(test)]
mod zk_tests;

use serde::{Deserialize, Serialize};

use crate::config::Duration;
use crate::workload::on_disconnect::OnDisconnect;
use crate::workload::rounds::{Contention, RecipeSection};

pub use latency::{lock_latencies, LockLatencies};
pub use resource::ResourceStats;
pub use workload::ENTRY;

/// Which lock recipe the contenders use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecipeKind {
    /// One ephemeral node everybody tries to create; losers watch it (exists watch).
    SingleNode,
    /// Ephemeral sequential children; each waiter watches only its predecessor.
    Sequential,
    /// Ephemeral sequential children; every waiter watches the children list (the herd).
    SequentialHerd,
    /// `sequential` with GUID-tagged child names, found again after a lost create answer
    /// (Curator's protection).
    Protected,
    /// The zookeeper-client crate's own lock (Curator's node names), as a reference.
    Crate,
    /// A deliberately unfair lock for tests: each waiter joins the line of `sequential` (its
    /// node's czxid is its token), but takes the lock by claiming the single node, so the
    /// lock stays exclusive while waiters are granted out of line order.
    #[cfg(test)]
    Barging,
}

impl RecipeKind {
    /// Every lock recipe.
    #[cfg(test)]
    pub const ALL: [RecipeKind; 5] = [
        RecipeKind::SingleNode,
        RecipeKind::Sequential,
        RecipeKind::SequentialHerd,
        RecipeKind::Protected,
        RecipeKind::Crate,
    ];

    /// Whether the recipe promises to grant the lock in the order of the waiters' sequential
    /// nodes (ours: `sequential`, `sequential-herd`, `protected`). The crate's lock is a
    /// reference whose order stampede does not judge.
    pub fn is_fair(self) -> bool {
        matches!(
            self,
            RecipeKind::Sequential | RecipeKind::SequentialHerd | RecipeKind::Protected
        )
    }

    /// The workload name, e.g. `lock-sequential`.
    pub fn workload_name(self) -> &'static str {
        match self {
            RecipeKind::SingleNode => "lock-single-node",
            RecipeKind::Sequential => "lock-sequential",
            RecipeKind::SequentialHerd => "lock-sequential-herd",
            RecipeKind::Protected => "lock-protected",
            RecipeKind::Crate => "lock-crate",
            #[cfg(test)]
            RecipeKind::Barging => "lock-barging",
        }
    }
}

/// Settings of the lock workloads (the `lock` section of `workloads/lock-*.yaml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LockConfig {
    /// The recipe.
    pub recipe: RecipeKind,
    /// Whether a holder takes the lock again (re-enters) during each hold.
    pub reentrant: bool,
    /// What a holder does when its session is disconnected.
    pub on_disconnect: OnDisconnect,
    /// How long a holder keeps the lock.
    pub hold: Duration,
    /// Read-modify-write steps on the protected resource during each hold.
    pub steps: u32,
    /// Pause between a release and the same contender's next acquire.
    pub pause: Duration,
    /// Whether the resource rejects steps with a token lower than the highest it has seen.
    pub fencing: bool,
    /// How contenders come and go (staggered by default), and when a waiter is starved.
    pub contention: Contention,
}

impl Default for LockConfig {
    fn default() -> LockConfig {
        let ms = |n| Duration(std::time::Duration::from_millis(n));
        LockConfig {
            recipe: RecipeKind::Sequential,
            reentrant: false,
            on_disconnect: OnDisconnect::AssumeLost,
            hold: ms(100),
            steps: 4,
            pause: ms(50),
            fencing: true,
            contention: Contention::default(),
        }
    }
}

impl RecipeSection for LockConfig {
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

impl LockConfig {
    /// Checks the values; the error names the field and what is wrong with it.
    pub fn validate(&self) -> Result<(), String> {
        if self.steps == 0 {
            return Err("lock.steps must be at least 1".into());
        }
        self.contention.validate("lock")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipes_and_policies_parse_by_name() {
        let cfg: LockConfig = serde_yaml_ng::from_str(
            "recipe: sequential-herd\non_disconnect: keep\nhold: 1s\nreentrant: true\n",
        )
        .unwrap();
        assert_eq!(cfg.recipe, RecipeKind::SequentialHerd);
        assert_eq!(cfg.on_disconnect, OnDisconnect::Keep);
        assert!(cfg.reentrant);
        assert_eq!(cfg.hold.0, std::time::Duration::from_secs(1));
        assert_eq!(cfg.recipe.workload_name(), "lock-sequential-herd");
        let err = serde_yaml_ng::from_str::<LockConfig>("recipe: optimistic\n").unwrap_err();
        assert!(
            err.to_string().contains("unknown variant `optimistic`"),
            "{err}"
        );
        let err = serde_yaml_ng::from_str::<LockConfig>("on_disconect: keep\n").unwrap_err();
        assert!(err.to_string().contains("on_disconect"), "{err}");
    }

    #[test]
    fn the_shipped_lock_files_hold_the_defaults_of_their_recipe() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads");
        for recipe in RecipeKind::ALL {
            let path = dir.join(format!("{}.yaml", recipe.workload_name()));
            let file: crate::workload::WorkloadFile = crate::config::load(&path).unwrap();
            assert_eq!(file.workload, "lock");
            let expected = LockConfig {
                recipe,
                ..LockConfig::default()
            };
            assert_eq!(
                file.section::<LockConfig>(),
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
        let cfg = LockConfig {
            steps: 0,
            ..LockConfig::default()
        };
        assert_eq!(cfg.validate().unwrap_err(), "lock.steps must be at least 1");
        assert!(LockConfig::default().validate().is_ok());
    }
}
