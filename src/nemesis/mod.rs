//! Nemeses: faults injected into the cluster during a test, and their healing.

mod grudge;
mod heal;
mod package;
mod partition;
mod process;
mod target;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use heal::{guarded, heal_all, Ending};
pub use package::NemesisConfig;
pub use partition::{Partition, PartitionSpec};
pub use process::{ProcessFault, ProcessNemesis};
pub use target::Target;

use crate::control::Control;
use crate::db::Db;

/// A boxed future, as returned by the object-safe [`Nemesis`] trait.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A fault that can be started and stopped. The generator drives it on a schedule and records
/// each call as a `start-<kind>` / `stop-<kind>` operation of the `"nemesis"` process, with the
/// returned value (what was done, e.g. the grudge of a partition) as the completion's value.
pub trait Nemesis: Send + Sync {
    /// The fault kind: `partition`, `kill`, `pause`, `clock` or `packet`.
    fn kind(&self) -> &str;
    /// Injects the fault.
    fn start(&self) -> BoxFuture<'_, anyhow::Result<serde_json::Value>>;
    /// Heals the fault injected by the last `start` (a no-op when none is active).
    fn stop(&self) -> BoxFuture<'_, anyhow::Result<serde_json::Value>>;
}

/// The fault kinds `build` knows.
pub const KINDS: &[&str] = &["partition", "kill", "pause"];

/// Builds the nemesis of `kind` aimed at `target` (see [`Target`] and [`PartitionSpec`]).
pub fn build(kind: &str, target: &str, control: Control, db: Arc<dyn Db>) -> anyhow::Result<Arc<dyn Nemesis>> {
    Ok(match kind {
        "partition" => Arc::new(Partition::new(control, db, PartitionSpec::parse(target)?)),
        "kill" => Arc::new(ProcessNemesis::new(control, db, ProcessFault::Kill, target.parse()?)),
        "pause" => Arc::new(ProcessNemesis::new(control, db, ProcessFault::Pause, target.parse()?)),
        other => anyhow::bail!("unknown nemesis kind {other:?} (known: {})", KINDS.join(", ")),
    })
}
