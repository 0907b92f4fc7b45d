//! The counter's operations: `add` reads the counter znode's total and sets it one higher
//! with the version it read (ZooKeeper's conditional setData), again while another add got in
//! first; `read` returns the total (synced first when asked, and always in the final reads).

use std::collections::BTreeSet;
use std::sync::Mutex;

use async_trait::async_trait;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use zookeeper_client::{Client, Error};

use super::CounterConfig;
use crate::generator::{Completion, OpSpec, Operations};
use crate::workload::paced;

/// The key every counter operation names (one counter per run).
const KEY: &str = "counter";

/// The counter workload's operations on `/stampede/<run-id>/counter`.
pub struct Counter {
    cfg: CounterConfig,
    path: String,
    rng: Mutex<StdRng>,
}

impl Counter {
    /// The counter of test run `run_id` (one path segment), its mix drawn from `seed`.
    pub fn new(cfg: CounterConfig, run_id: &str, seed: u64) -> anyhow::Result<Counter> {
        Ok(Counter {
            cfg,
            path: crate::workload::run_path(run_id, "counter")?,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        })
    }

    async fn total(&self, client: &Client) -> Result<(i64, i32), Error> {
        let (data, stat) = client.get_data(&self.path).await?;
        let total = String::from_utf8_lossy(&data)
            .parse::<i64>()
            .map_err(|_| Error::UnexpectedError(format!("counter data {data:?} is no number")))?;
        Ok((total, stat.version))
    }

    /// Adds 1: with the version read (again while another add got in first), or blindly
    /// when the settings say `versioned: false` (the lost-update mistake).
    async fn add(&self, client: &Client) -> Result<Completion, Error> {
        loop {
            let (total, version) = self.total(client).await?;
            let expected = self.cfg.versioned.then_some(version);
            let next = (total + 1).to_string();
            match client.set_data(&self.path, next.as_bytes(), expected).await {
                Ok(stat) => {
                    return Ok(Completion {
                        value: json!(total + 1),
                        version: Some(stat.version),
                        zxid: Some(stat.mzxid),
                    })
                }
                Err(Error::BadVersion) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    async fn read(&self, client: &Client, sync: bool) -> Result<Completion, Error> {
        if sync {
            client.sync(&self.path).await?;
        }
        let (data, stat) = client.get_data(&self.path).await?;
        let total = String::from_utf8_lossy(&data).parse::<i64>().ok();
        Ok(Completion {
            value: total.map_or(Value::Null, |t| json!(t)),
            version: Some(stat.version),
            zxid: Some(stat.mzxid),
        })
    }
}

#[async_trait]
impl Operations for Counter {
    async fn setup(&self, client: &Client, _max_ops: u64) -> anyhow::Result<()> {
        paced::create(client, &self.path, b"0").await
    }

    fn next_op(&self, _process: u64) -> Option<OpSpec> {
        let mix = self.cfg.mix;
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        let add = rng.gen_range(0..mix.add + mix.read) < mix.add;
        Some(OpSpec {
            f: if add { "add" } else { "read" },
            key: Some(KEY.into()),
            value: if add { json!(1) } else { Value::Null },
            is_final: false,
        })
    }

    async fn invoke(&self, client: &Client, op: &OpSpec) -> Result<Completion, Error> {
        match op.f {
            "add" => self.add(client).await,
            "read" => self.read(client, self.cfg.sync_reads || op.is_final).await,
            _ => Err(Error::BadArguments(&"unknown counter operation")),
        }
    }

    fn final_ops(&self, keys: &BTreeSet<String>) -> Vec<OpSpec> {
        paced::final_reads(keys)
    }
}
