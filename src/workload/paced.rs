//! What the workloads the generator paces one operation at a time share (the counter, set,
//! unique-ids and bank): how setup creates the znodes they keep their state under (at
//! [`super::run_path`]), the synced final reads after the heal, running under the generator,
//! and a verdict that needs something to judge.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use anyhow::Context;
use serde_json::json;
use zookeeper_client::{Acls, Client, CreateMode};

use super::{Ran, Section, Settings};
use crate::checker::result::Validity;
use crate::generator::{OpSpec, Operations, Target};
use crate::history::{Op, OpType, Process};

/// The invocation value of a final read.
pub const FINAL: &str = "final";

/// Creates the persistent znode `path` holding `data`, open to anyone, with its parents; an
/// error when it exists already (a run id used before).
pub async fn create(client: &Client, path: &str, data: &[u8]) -> anyhow::Result<()> {
    let parent = path.rsplit_once('/').map_or("/", |(p, _)| p);
    let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
    client
        .mkdir(parent, &options)
        .await
        .with_context(|| format!("creating {parent}"))?;
    client
        .create(path, data, &options)
        .await
        .with_context(|| format!("creating {path} (is the run id fresh?)"))?;
    Ok(())
}

/// One synced `read` of each of `keys`, invoked with [`FINAL`].
pub fn final_reads(keys: &BTreeSet<String>) -> Vec<OpSpec> {
    keys.iter()
        .map(|k| OpSpec {
            f: "read",
            key: Some(k.clone()),
            value: json!(FINAL),
            is_final: true,
        })
        .collect()
}

/// Runs `ops` under the generator as `settings` say against `target`; the run's summary is
/// kept.
pub async fn run<C: Section>(
    settings: &Settings<C>,
    ops: impl Operations + 'static,
    target: Target,
) -> anyhow::Result<Ran> {
    let options = settings.session.client_options();
    let healed = crate::generator::run(&settings.generator, Arc::new(ops), options, target).await?;
    Ran::kept(healed, None)
}

/// How the adds and reads of a workload that adds and reads (the counter, the set) ended;
/// kept flattened in its report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AddsAndReads {
    /// Adds that ended `ok`.
    pub adds_ok: u64,
    /// Adds whose outcome is unknown.
    pub adds_info: u64,
    /// Adds the server refused.
    pub adds_fail: u64,
    /// Reads that ended `ok`.
    pub reads: u64,
}

/// A client's operation in a history, as the paced workloads' checkers walk it.
pub enum Step<'a> {
    /// An invocation.
    Invoked(&'a Op),
    /// `op` completed by the process, with its invocation when the history has it.
    Completed(u64, Option<&'a Op>, &'a Op),
}

/// The client operations of `ops` in order, each completion with its invocation.
pub fn steps(ops: &[Op]) -> impl Iterator<Item = Step<'_>> {
    let mut invoked_at: HashMap<u64, &Op> = HashMap::new();
    ops.iter().filter_map(move |op| {
        let Process::Client(process) = op.process else {
            return None;
        };
        Some(if op.kind == OpType::Invoke {
            invoked_at.insert(process, op);
            Step::Invoked(op)
        } else {
            Step::Completed(process, invoked_at.remove(&process), op)
        })
    })
}

/// A checker's verdict: anomalies make it invalid; without them it is valid only when there
/// was something to judge (`judged`: e.g. a final read was made).
pub fn verdict(valid: bool, judged: bool) -> Validity {
    match (valid, judged) {
        (false, _) => Validity::Invalid,
        (true, true) => Validity::Valid,
        (true, false) => Validity::Unknown,
    }
}

/// Test histories of paced workloads: reads, plain and final.
#[cfg(test)]
pub mod testing {
    use crate::history::testing::ok_pair;
    use crate::history::Op;

    /// A read by `process` that returned `value`.
    pub fn read(process: u64, value: &str) -> [Op; 2] {
        ok_pair(process, "read", "null", value)
    }

    /// A final read (invoked with [`super::FINAL`]) by `process` that returned `value`.
    pub fn final_read(process: u64, value: &str) -> [Op; 2] {
        ok_pair(process, "read", &format!("{:?}", super::FINAL), value)
    }
}
