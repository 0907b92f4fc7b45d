//! Nemeses: faults injected into the cluster during a test, and their healing.

mod agent;
mod clock;
pub mod corrupt;
mod grudge;
mod heal;
mod interrupts;
pub mod lazyfs;
pub mod leftovers;
pub mod nfqueue;
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

pub use clock::ClockConfig;
pub use corrupt::CorruptConfig;
pub use heal::{guarded, heal, heal_all, panicked, Ending, OnSignal, Restart};
pub use interrupts::Interrupts;
pub use package::{load as load_package, Aim, FaultConfig, NemesisConfig};
pub use packet::NetemConfig;
pub use partition::{HolderView, Partition, PartitionSpec};
pub use power::KIND as POWER_LOSS;
pub use process::{ProcessFault, ProcessNemesis};
pub use reconfig::ReconfigConfig;
pub use restart::RestartConfig;

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

/// The fault kinds `build` knows.
pub const KINDS: &[&str] = &[
    "partition",
    "kill",
    "pause",
    "clock",
    "packet",
    "corrupt",
    "restart",
    "reconfig",
    "sequence",
    lazyfs::KIND,
    power::KIND,
];

/// Builds the nemesis a fault describes (see [`Target`](target::Target) and
/// [`PartitionSpec`] for targets).
/// `holder` tells who holds a lock or leads, for the partition target `holder`.
pub fn build(
    fault: &FaultConfig,
    control: Control,
    db: Arc<dyn Db>,
    holder: Option<Arc<dyn HolderView>>,
) -> anyhow::Result<Arc<dyn Nemesis>> {
    let target = || fault.target.parse::<target::Target>();
    Ok(match fault.kind.as_str() {
        kind if fault.trigger.is_some() => Arc::new(trigger::TriggeredNemesis::new(
            control,
            db,
            (
                trigger::Triggered::of(kind).context("this kind takes no trigger")?,
                target()?,
            ),
            fault.trigger.clone().expect("matched above"),
        )?),
        "partition" if fault.target == "holder" => {
            let view = holder.context(
                "partition target holder: only lock and election workloads have holders",
            )?;
            Arc::new(Partition::new(
                control,
                db,
                PartitionSpec::IsolateHolder(view),
            ))
        }
        "partition" => Arc::new(Partition::new(
            control,
            db,
            PartitionSpec::parse(&fault.target)?,
        )),
        "sequence" => Arc::new(sequence::Sequence::new(
            fault.steps.as_deref().unwrap_or_default(),
            &control,
            db,
            holder,
        )?),
        "kill" => Arc::new(ProcessNemesis::new(
            control,
            db,
            ProcessFault::Kill,
            target()?,
        )),
        "pause" => Arc::new(ProcessNemesis::new(
            control,
            db,
            ProcessFault::Pause,
            target()?,
        )),
        "clock" => Arc::new(clock::ClockNemesis::new(
            control,
            db,
            target()?,
            fault.clock.clone().unwrap_or_default(),
        )),
        "packet" => Arc::new(packet::PacketNemesis::new(
            control,
            db,
            target()?,
            fault.netem.clone().unwrap_or_default(),
        )?),
        "corrupt" => Arc::new(corrupt::CorruptNemesis::new(
            control,
            db,
            target()?,
            fault.corrupt.clone().unwrap_or_default(),
        )),
        "restart" => Arc::new(restart::RestartNemesis::new(
            control,
            db,
            target()?,
            fault.restart.clone().unwrap_or_default(),
        )),
        "reconfig" => Arc::new(reconfig::ReconfigNemesis::new(
            control,
            db,
            target()?,
            fault.reconfig.clone().unwrap_or_default(),
        )),
        lazyfs::KIND => Arc::new(lazyfs::LoseUnsynced::new(control, db, target()?)),
        power::KIND => Arc::new(power::PowerLoss::new(control, db, target()?)?),
        other => anyhow::bail!(
            "unknown nemesis kind {other:?} (known: {})",
            KINDS.join(", ")
        ),
    })
}
