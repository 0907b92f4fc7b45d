//! Workloads: what the processes do to ZooKeeper, one operation at a time.
//!
//! A [`Workload`] creates its znodes at setup, hands the generator the next operation to
//! issue, performs an operation on a process's session, learns from each outcome, and names
//! the final operations (e.g. reads of every key) run after the faults are healed. It knows
//! nothing of SSH, nodes or faults, so new workloads (locks, elections, queues) plug into the
//! same generator.

pub mod barrier;
pub mod election;
mod ephemeral;
mod file;
mod herd;
mod keys;
pub mod lock;
mod on_disconnect;
pub mod queue;
mod register;
mod requests;
mod rounds;
#[cfg(test)]
mod test_runs;

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;

use zookeeper_client::Client;

use crate::client::{ClientOptions, OpError};

pub use file::{WorkloadFile, WorkloadKind};
pub use herd::{HerdMeter, HerdStats};
pub use register::{Register, RegisterConfig};
pub use requests::Requests;

/// A boxed future, as returned by the object-safe [`Workload`] trait.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// An operation to issue: what the invocation records, and what `invoke` performs.
#[derive(Debug, Clone, PartialEq)]
pub struct OpSpec {
    /// The function name, e.g. `read`, `write`, `cas`.
    pub f: &'static str,
    /// The independent key the operation touches.
    pub key: Option<String>,
    /// The invocation's value, e.g. the value to write.
    pub value: serde_json::Value,
    /// Issued in the final phase, after healing: reads always `sync` first.
    pub is_final: bool,
}

/// What an operation that ended `ok` returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The completion's value (a read's result; the invocation's value for writes).
    pub value: serde_json::Value,
    /// The znode data version seen (after a write: the new version).
    pub version: Option<i32>,
    /// The znode's mzxid seen.
    pub zxid: Option<i64>,
}

/// A workload the generator drives. Implementations keep their own state behind interior
/// mutability: several processes call it at once.
pub trait Workload: Send + Sync {
    /// How processes open sessions and how long an operation may take.
    fn client_options(&self) -> ClientOptions;

    /// Creates the znodes the test needs, through a session of its own, for at most `max_ops`
    /// operations in the main phase.
    fn setup<'a>(&'a self, client: &'a Client, max_ops: u64) -> BoxFuture<'a, anyhow::Result<()>>;

    /// The next operation for `process`, or `None` when the workload has nothing left to do.
    fn next_op(&self, process: u64) -> Option<OpSpec>;

    /// Performs `op` on `client`'s session.
    fn invoke<'a>(
        &'a self,
        client: &'a Client,
        op: &'a OpSpec,
    ) -> BoxFuture<'a, Result<Completion, zookeeper_client::Error>>;

    /// Learns how `process`'s operation `op` ended (e.g. the versions it saw).
    fn completed(&self, process: u64, op: &OpSpec, result: &Result<Completion, OpError>);

    /// The final-phase operations of a process that touched `keys`.
    fn final_ops(&self, keys: &BTreeSet<String>) -> Vec<OpSpec>;
}
