//! Nemeses: faults injected into the cluster during a test, and their healing.

mod agent;
mod clock;
pub mod corrupt;
mod dice;
mod flap;
mod grudge;
mod heal;
mod interrupts;
mod kind;
pub mod lazyfs;
pub mod leftovers;
pub mod nfqueue;
mod one_way;
mod package;
mod packet;
mod partition;
mod power;
mod process;
mod reconfig;
mod restart;
mod sequence;
mod target;
mod trigger;
pub mod trigger_action;
pub mod trigger_agent;

use anyhow::Context;
use std::sync::Arc;

pub use dice::Dice;
pub use heal::{guarded, heal, heal_all, panicked, Ending, OnSignal, Restart};
pub use interrupts::Interrupts;
pub use kind::{FaultKind, HealStage, SHARED_COLOUR};
pub use package::{load as load_package, Aim, FaultConfig, NemesisConfig};
pub use partition::HolderView;

use crate::control::Control;
use crate::db::Db;

/// A fault that can be started and stopped. The generator drives it on a schedule and records
/// each call as a `start-<kind>` / `stop-<kind>` operation of the `"nemesis"` process, with the
/// returned value (what was done, e.g. the grudge of a partition) as the completion's value.
#[async_trait::async_trait]
pub trait Nemesis: Send + Sync {
    /// The fault kind: `partition`, `kill`, `pause`, `clock`, `packet`, `corrupt`, `sequence`, …
    fn kind(&self) -> &str;
    /// What the fault aims at, as the package names it (`leader`, `halves`, `n3`), recorded
    /// with each start; empty when it has no target.
    fn target(&self) -> String {
        String::new()
    }
    /// Injects the fault.
    async fn start(&self) -> anyhow::Result<serde_json::Value>;
    /// Heals the fault injected by the last `start` (a no-op when none is active).
    async fn stop(&self) -> anyhow::Result<serde_json::Value>;
    /// Whether a fault armed by a log trigger has fired since its start (`false` for others).
    async fn fired(&self) -> anyhow::Result<bool> {
        Ok(false)
    }
}

/// Every fault kind stampede knows, one line each, in the order `--help` and errors list
/// them (see [`FaultKind`]).
pub const KINDS: &[&dyn FaultKind] = &[
    &partition::PartitionKind,
    &process::KILL,
    &process::PAUSE,
    &clock::ClockKind,
    &packet::PacketKind,
    &corrupt::CorruptKind,
    &restart::RestartKind,
    &reconfig::ReconfigKind,
    &sequence::SequenceKind,
    &lazyfs::LoseUnsyncedKind,
    &power::PowerLossKind,
    &one_way::OneWayKind,
    &flap::FlapKind,
];

/// The registry's entry of the kind called `name`.
pub fn kind(name: &str) -> Option<&'static dyn FaultKind> {
    KINDS.iter().copied().find(|k| k.name() == name)
}

/// Builds the nemesis a fault describes, through its kind (a fault with a trigger through the
/// trigger's nemesis). `holder` tells who holds a lock or leads, for the partition target
/// `holder`; `dice` make the fault's random choices.
pub fn build(
    fault: &FaultConfig,
    control: Control,
    db: Arc<dyn Db>,
    holder: Option<Arc<dyn HolderView>>,
    dice: Dice,
) -> anyhow::Result<Arc<dyn Nemesis>> {
    let entry = fault.entry().map_err(|(_, why)| anyhow::anyhow!(why))?;
    if let Some(trigger) = &fault.trigger {
        let action = entry.triggered().context("this kind takes no trigger")?;
        let target = target::SeededTarget::new(kind::node_target(fault)?, dice);
        return Ok(Arc::new(trigger::TriggeredNemesis::new(
            control,
            db,
            (action, target),
            trigger.clone(),
        )?));
    }
    let parts = kind::Parts {
        control,
        db,
        holder,
        dice,
    };
    entry.build(fault, parts)
}
