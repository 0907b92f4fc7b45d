//! What the generator asks of a workload whose processes issue one operation at a time (the
//! register and the counter): its znodes at setup, the next operation, how to perform one on a
//! session, what it learns from each outcome, and the final operations after the heal.

use std::collections::BTreeSet;

use async_trait::async_trait;
use zookeeper_client::Client;

use crate::client::OpError;

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

/// Operations the generator paces and records. Implementations keep their own state behind
/// interior mutability: several processes call them at once.
#[async_trait]
pub trait Operations: Send + Sync {
    /// Creates the znodes the test needs, through a session of its own, for at most `max_ops`
    /// operations in the main phase.
    async fn setup(&self, client: &Client, max_ops: u64) -> anyhow::Result<()>;

    /// The next operation for `process`, or `None` when there is nothing left to do.
    fn next_op(&self, process: u64) -> Option<OpSpec>;

    /// Performs `op` on `client`'s session.
    async fn invoke(
        &self,
        client: &Client,
        op: &OpSpec,
    ) -> Result<Completion, zookeeper_client::Error>;

    /// Learns how `process`'s operation `op` ended (e.g. the versions it saw); by default
    /// nothing is kept.
    fn completed(&self, _process: u64, _op: &OpSpec, _result: &Result<Completion, OpError>) {}

    /// The final-phase operations of a process that touched `keys`.
    fn final_ops(&self, keys: &BTreeSet<String>) -> Vec<OpSpec>;
}
