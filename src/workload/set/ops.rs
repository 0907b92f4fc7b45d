//! The set's operations: `add` creates a child of the set's znode named after a fresh element
//! (persistent; ephemeral when the settings say so, the forgetting mistake); `read` lists the
//! children (synced first when asked, and always in the final reads).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use async_trait::async_trait;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use zookeeper_client::{Acls, Client, CreateMode, Error};

use super::SetConfig;
use crate::generator::{Completion, OpSpec, Operations};
use crate::workload::paced;

/// The key every set operation names (one set per run).
const KEY: &str = "set";

/// The set workload's operations on `/stampede/<run-id>/set`.
pub struct Set {
    cfg: SetConfig,
    dir: String,
    next_element: AtomicU64,
    rng: Mutex<StdRng>,
}

impl Set {
    /// The set of test run `run_id` (one path segment), its mix drawn from `seed`.
    pub fn new(cfg: SetConfig, run_id: &str, seed: u64) -> anyhow::Result<Set> {
        Ok(Set {
            cfg,
            dir: crate::workload::run_path(run_id, "set")?,
            next_element: AtomicU64::new(0),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        })
    }

    async fn add(&self, client: &Client, element: u64) -> Result<Completion, Error> {
        let mode = match self.cfg.ephemeral {
            true => CreateMode::Ephemeral,
            false => CreateMode::Persistent,
        };
        let path = format!("{}/e{element}", self.dir);
        let (stat, _) = client
            .create(&path, b"", &mode.with_acls(Acls::anyone_all()))
            .await?;
        Ok(Completion {
            value: json!(element),
            version: None,
            zxid: Some(stat.czxid),
        })
    }

    async fn read(&self, client: &Client, sync: bool) -> Result<Completion, Error> {
        if sync {
            client.sync(&self.dir).await?;
        }
        let (children, stat) = client.get_children(&self.dir).await?;
        let elements = children
            .iter()
            .map(|name| {
                name.strip_prefix('e')
                    .and_then(|e| e.parse::<u64>().ok())
                    .ok_or_else(|| Error::UnexpectedError(format!("child {name:?} is no element")))
            })
            .collect::<Result<BTreeSet<u64>, Error>>()?;
        Ok(Completion {
            value: json!(elements),
            version: None,
            zxid: Some(stat.pzxid),
        })
    }
}

#[async_trait]
impl Operations for Set {
    async fn setup(&self, client: &Client, _max_ops: u64) -> anyhow::Result<()> {
        paced::create(client, &self.dir, b"").await
    }

    fn next_op(&self, _process: u64) -> Option<OpSpec> {
        let mix = self.cfg.mix;
        let add = {
            let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
            rng.gen_range(0..mix.add + mix.read) < mix.add
        };
        Some(match add {
            true => OpSpec {
                f: "add",
                key: Some(KEY.into()),
                value: json!(self.next_element.fetch_add(1, Ordering::Relaxed)),
                is_final: false,
            },
            false => OpSpec {
                f: "read",
                key: Some(KEY.into()),
                value: Value::Null,
                is_final: false,
            },
        })
    }

    async fn invoke(&self, client: &Client, op: &OpSpec) -> Result<Completion, Error> {
        match (op.f, op.value.as_u64()) {
            ("add", Some(element)) => self.add(client, element).await,
            ("read", _) => self.read(client, self.cfg.sync_reads || op.is_final).await,
            _ => Err(Error::BadArguments(&"unknown set operation")),
        }
    }

    fn final_ops(&self, keys: &BTreeSet<String>) -> Vec<OpSpec> {
        paced::final_reads(keys)
    }
}
