//! The register workload's operations: each independent key is a znode used as a versioned
//! register.
//!
//! `read` returns the value and data version (after a `sync` of the path when `sync_reads`),
//! `write v` sets the data, and `cas [expected_version, v]` is ZooKeeper's conditional
//! setData. Values are unique increasing integers stored as decimal text; a znode with
//! empty data (as created at setup, version 0) reads as `null`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use anyhow::Context;
use async_trait::async_trait;
use rand::distributions::{Distribution, WeightedIndex};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use zookeeper_client::{Acls, Client, CreateMode, Error, Stat};

use crate::client::OpError;
use crate::generator::{Completion, OpSpec, Operations};
use crate::workload::keys::KeyRotation;

/// Settings of the register workload (the `register` section of `workloads/register.yaml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegisterConfig {
    /// How many keys are in play at once.
    pub keys_at_once: usize,
    /// Operations per key before it is replaced by a fresh key.
    pub ops_per_key: u32,
    /// Whether a read is preceded by a `sync` of its znode (final reads always sync).
    pub sync_reads: bool,
    /// Relative weights of the operations.
    pub mix: Mix,
}

impl Default for RegisterConfig {
    fn default() -> RegisterConfig {
        RegisterConfig {
            keys_at_once: 5,
            ops_per_key: 100,
            sync_reads: true,
            mix: Mix::default(),
        }
    }
}

/// Relative weights of `read`, `write` and `cas` in the operation mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Mix {
    /// Weight of `read`.
    pub read: u32,
    /// Weight of `write`.
    pub write: u32,
    /// Weight of `cas`.
    pub cas: u32,
}

impl Default for Mix {
    fn default() -> Mix {
        Mix {
            read: 1,
            write: 1,
            cas: 1,
        }
    }
}

impl RegisterConfig {
    /// Checks the values; the error names the field and what is wrong with it.
    pub fn validate(&self) -> Result<(), String> {
        if self.keys_at_once == 0 {
            return Err("register.keys_at_once must be at least 1".into());
        }
        if self.ops_per_key == 0 {
            return Err("register.ops_per_key must be at least 1".into());
        }
        if self.mix.read == 0 && self.mix.write == 0 && self.mix.cas == 0 {
            return Err(
                "register.mix: at least one of read, write, cas needs a weight above 0".into(),
            );
        }
        Ok(())
    }
}

const FUNCTIONS: [&str; 3] = ["read", "write", "cas"];

/// One `cas` in this many expects a version one or two behind the latest seen, so that every
/// history holds failed `cas` operations (which must not take effect) beside successful ones.
const STALE_CAS_ONE_IN: u32 = 4;

/// The register workload over znodes under `/stampede/<run-id>/register`.
pub struct Register {
    cfg: RegisterConfig,
    root: String,
    state: Mutex<State>,
}

struct State {
    rng: StdRng,
    choose: WeightedIndex<u32>,
    keys: KeyRotation,
    last_value: i64,
    /// The highest data version any process saw for a key: most `cas` operations expect it,
    /// so they succeed unless a concurrent write got in first.
    latest: HashMap<u64, i32>,
}

impl Register {
    /// A register workload for test run `run_id` (one path segment), its random choices
    /// drawn from `seed`.
    pub fn new(cfg: RegisterConfig, run_id: &str, seed: u64) -> anyhow::Result<Register> {
        cfg.validate().map_err(anyhow::Error::msg)?;
        let root = crate::workload::run_path(run_id, "register")?;
        let mix = cfg.mix;
        let choose = WeightedIndex::new([mix.read, mix.write, mix.cas]).expect("validated weights");
        let state = State {
            rng: StdRng::seed_from_u64(seed),
            choose,
            keys: KeyRotation::new(cfg.keys_at_once, cfg.ops_per_key, 0),
            last_value: 0,
            latest: HashMap::new(),
        };
        Ok(Register {
            cfg,
            root,
            state: Mutex::new(state),
        })
    }

    fn path(&self, key: &str) -> String {
        format!("{}/{key}", self.root)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn read(&self, client: &Client, path: &str, sync: bool) -> Result<Completion, Error> {
        if sync {
            client.sync(path).await?;
        }
        let (data, stat) = client.get_data(path).await?;
        Ok(Completion {
            value: decode(&data),
            version: Some(stat.version),
            zxid: Some(stat.mzxid),
        })
    }

    async fn write(&self, client: &Client, path: &str, value: &Value) -> Result<Completion, Error> {
        let v = value
            .as_i64()
            .ok_or(Error::BadArguments(&"write needs an integer value"))?;
        let stat = client
            .set_data(path, v.to_string().as_bytes(), None)
            .await?;
        Ok(written(value, &stat))
    }

    async fn cas(&self, client: &Client, path: &str, value: &Value) -> Result<Completion, Error> {
        let bad = Error::BadArguments(&"cas needs [expected_version, value]");
        let (expected, v) = match value.as_array().map(Vec::as_slice) {
            Some([e, v]) => (
                e.as_i64().ok_or(bad.clone())?,
                v.as_i64().ok_or(bad.clone())?,
            ),
            _ => return Err(bad),
        };
        let expected = i32::try_from(expected).map_err(|_| bad)?;
        let stat = client
            .set_data(path, v.to_string().as_bytes(), Some(expected))
            .await?;
        Ok(written(value, &stat))
    }
}

fn written(value: &Value, stat: &Stat) -> Completion {
    Completion {
        value: value.clone(),
        version: Some(stat.version),
        zxid: Some(stat.mzxid),
    }
}

/// A znode's data as a register value: empty is `null`, decimal text an integer, anything
/// else the text itself (which no write produced, so a checker will flag it).
fn decode(data: &[u8]) -> Value {
    if data.is_empty() {
        return Value::Null;
    }
    let text = String::from_utf8_lossy(data);
    match text.parse::<i64>() {
        Ok(v) => json!(v),
        Err(_) => Value::String(text.into_owned()),
    }
}

#[async_trait]
impl Operations for Register {
    async fn setup(&self, client: &Client, max_ops: u64) -> anyhow::Result<()> {
        let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
        client
            .mkdir(&self.root, &options)
            .await
            .with_context(|| format!("creating {}", self.root))?;
        let supply = KeyRotation::supply_for(self.cfg.keys_at_once, self.cfg.ops_per_key, max_ops);
        let paths: Vec<String> = (0..supply).map(|k| self.path(&k.to_string())).collect();
        for chunk in paths.chunks(1000) {
            // Requests are sent when created, so a chunk is pipelined in one round trip.
            let pending: Vec<_> = chunk
                .iter()
                .map(|p| (p, client.create(p, &[], &options)))
                .collect();
            for (path, created) in pending {
                created
                    .await
                    .with_context(|| format!("creating key znode {path} (is the run id fresh?)"))?;
            }
        }
        self.state().keys = KeyRotation::new(self.cfg.keys_at_once, self.cfg.ops_per_key, supply);
        tracing::debug!(root = %self.root, keys = supply, "register keys created");
        Ok(())
    }

    fn next_op(&self, _process: u64) -> Option<OpSpec> {
        let mut guard = self.state();
        let st = &mut *guard;
        let key = st.keys.pick(&mut st.rng)?;
        let f = FUNCTIONS[st.choose.sample(&mut st.rng)];
        let value = match f {
            "read" => Value::Null,
            "write" => {
                st.last_value += 1;
                json!(st.last_value)
            }
            _ => {
                st.last_value += 1;
                let latest = st.latest.get(&key).copied().unwrap_or(0);
                let behind = if st.rng.gen_ratio(1, STALE_CAS_ONE_IN) {
                    st.rng.gen_range(1..=2)
                } else {
                    0
                };
                let expected = (latest - behind).max(0);
                json!([expected, st.last_value])
            }
        };
        Some(OpSpec {
            f,
            key: Some(key.to_string()),
            value,
            is_final: false,
        })
    }

    async fn invoke(&self, client: &Client, op: &OpSpec) -> Result<Completion, Error> {
        let path = self.path(
            op.key
                .as_deref()
                .ok_or(Error::BadArguments(&"register ops need a key"))?,
        );
        match op.f {
            "read" => {
                self.read(client, &path, self.cfg.sync_reads || op.is_final)
                    .await
            }
            "write" => self.write(client, &path, &op.value).await,
            "cas" => self.cas(client, &path, &op.value).await,
            _ => Err(Error::BadArguments(&"unknown register operation")),
        }
    }

    fn completed(&self, _process: u64, op: &OpSpec, result: &Result<Completion, OpError>) {
        let (Ok(done), Some(key)) = (
            result,
            op.key.as_deref().and_then(|k| k.parse::<u64>().ok()),
        ) else {
            return;
        };
        let Some(version) = done.version else { return };
        let mut st = self.state();
        let latest = st.latest.entry(key).or_insert(version);
        *latest = (*latest).max(version);
    }

    fn final_ops(&self, keys: &BTreeSet<String>) -> Vec<OpSpec> {
        keys.iter()
            .map(|k| OpSpec {
                f: "read",
                key: Some(k.clone()),
                value: Value::Null,
                is_final: true,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn register(mix: Mix, keys_at_once: usize, ops_per_key: u32) -> Register {
        let cfg = RegisterConfig {
            mix,
            keys_at_once,
            ops_per_key,
            ..RegisterConfig::default()
        };
        let r = Register::new(cfg, "t", 7).unwrap();
        r.state().keys = KeyRotation::new(keys_at_once, ops_per_key, 1_000_000);
        r
    }

    fn ok(version: i32) -> Result<Completion, OpError> {
        Ok(Completion {
            value: Value::Null,
            version: Some(version),
            zxid: Some(1),
        })
    }

    #[test]
    fn mix_weights_shape_the_operations() {
        let r = register(
            Mix {
                read: 3,
                write: 1,
                cas: 0,
            },
            4,
            1000,
        );
        let mut counts: HashMap<&str, u32> = HashMap::new();
        for _ in 0..4000 {
            *counts.entry(r.next_op(0).unwrap().f).or_default() += 1;
        }
        assert_eq!(counts.get("cas"), None);
        let reads = counts["read"];
        assert!((2800..3200).contains(&reads), "{counts:?}");
        let only_writes = register(
            Mix {
                read: 0,
                write: 1,
                cas: 0,
            },
            4,
            1000,
        );
        assert!((0..100).all(|_| only_writes.next_op(0).unwrap().f == "write"));
    }

    #[test]
    fn written_values_are_unique_and_increasing() {
        let r = register(
            Mix {
                read: 0,
                write: 1,
                cas: 1,
            },
            2,
            1000,
        );
        let values: Vec<i64> = (0..200)
            .map(|_| {
                let op = r.next_op(0).unwrap();
                match op.f {
                    "write" => op.value.as_i64().unwrap(),
                    _ => op.value[1].as_i64().unwrap(),
                }
            })
            .collect();
        assert!(values.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn keys_rotate_after_ops_per_key() {
        let r = register(Mix::default(), 2, 10);
        let mut per_key: HashMap<String, u32> = HashMap::new();
        for _ in 0..200 {
            *per_key
                .entry(r.next_op(0).unwrap().key.unwrap())
                .or_default() += 1;
        }
        assert!(per_key.values().all(|&n| n <= 10), "{per_key:?}");
        assert!(per_key.len() >= 20, "{per_key:?}");
    }

    /// The expected versions of `n` cas operations by `process`.
    fn expected_versions(r: &Register, process: u64, n: usize) -> Vec<i64> {
        (0..n)
            .map(|_| r.next_op(process).unwrap().value[0].as_i64().unwrap())
            .collect()
    }

    #[test]
    fn cas_mostly_expects_the_latest_version_seen() {
        let only_cas = Mix {
            read: 0,
            write: 0,
            cas: 1,
        };
        let r = register(only_cas, 1, 1_000_000);
        assert!(
            expected_versions(&r, 1, 50).iter().all(|&v| v == 0),
            "a fresh znode has version 0"
        );
        let first = r.next_op(1).unwrap();
        r.completed(1, &first, &ok(9));
        r.completed(2, &first, &ok(6));
        r.completed(3, &first, &Err(OpError::Zk(Error::BadVersion)));
        let expected = expected_versions(&r, 2, 1000);
        assert!(
            expected.iter().all(|v| (7..=9).contains(v)),
            "older versions and failures teach nothing"
        );
        let latest = expected.iter().filter(|&&v| v == 9).count();
        assert!(
            (700..=800).contains(&latest),
            "{latest} of 1000 expected the latest version"
        );
        assert!(expected.contains(&7) && expected.contains(&8));
    }

    #[test]
    fn final_ops_read_every_key_with_sync() {
        let r = register(Mix::default(), 1, 10);
        let keys: BTreeSet<String> = ["1", "0"].iter().map(|s| s.to_string()).collect();
        let ops = r.final_ops(&keys);
        assert_eq!(
            ops.iter()
                .map(|o| o.key.clone().unwrap())
                .collect::<Vec<_>>(),
            ["0", "1"]
        );
        assert!(ops
            .iter()
            .all(|o| o.f == "read" && o.is_final && o.value.is_null()));
    }

    #[test]
    fn data_decodes_to_register_values() {
        assert_eq!(decode(b""), Value::Null);
        assert_eq!(decode(b"42"), json!(42));
        assert_eq!(decode(b"x1"), json!("x1"));
    }

    #[test]
    fn bad_config_is_named() {
        let cfg = RegisterConfig {
            ops_per_key: 0,
            ..RegisterConfig::default()
        };
        assert_eq!(
            cfg.validate().unwrap_err(),
            "register.ops_per_key must be at least 1"
        );
        let zero = Mix {
            read: 0,
            write: 0,
            cas: 0,
        };
        assert!(RegisterConfig {
            mix: zero,
            ..RegisterConfig::default()
        }
        .validate()
        .is_err());
        assert!(Register::new(RegisterConfig::default(), "a/b", 1).is_err());
        let unknown =
            serde_yaml_ng::from_str::<RegisterConfig>("keys_at_once: 2\nops_per_keys: 3\n");
        assert!(unknown.unwrap_err().to_string().contains("ops_per_keys"));
    }
}
