//! Nemesis packages: the faults a test takes turns injecting (`nemeses/*.yaml`).

use std::sync::Arc;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use rand::Rng;

use super::{BoxFuture, ClockConfig, HolderView, Nemesis, NetemConfig};
use crate::control::Control;
use crate::db::Db;

/// A nemesis file: the faults, injected in turn or in a random mix.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NemesisConfig {
    /// The faults; empty for a run without faults.
    #[serde(default)]
    pub faults: Vec<FaultConfig>,
    /// In which order the faults come, one at each nemesis interval.
    #[serde(default)]
    pub order: Order,
}

/// The order of a package's faults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// One after the other, as listed, round and round.
    #[default]
    InTurn,
    /// A fault picked at random each time.
    Random,
}

/// A random mix of faults, presented to the generator as one nemesis: each start injects the
/// fault picked after the previous stop, and `kind` names that fault.
struct RandomMix {
    faults: Vec<Arc<dyn Nemesis>>,
    next: std::sync::Mutex<usize>,
}

impl RandomMix {
    fn current(&self) -> &Arc<dyn Nemesis> {
        &self.faults[*self.next.lock().unwrap_or_else(|p| p.into_inner())]
    }
}

impl Nemesis for RandomMix {
    fn kind(&self) -> &str {
        self.current().kind()
    }

    fn start(&self) -> BoxFuture<'_, anyhow::Result<serde_json::Value>> {
        self.current().start()
    }

    fn stop(&self) -> BoxFuture<'_, anyhow::Result<serde_json::Value>> {
        let fault = self.current().clone();
        Box::pin(async move {
            let healed = fault.stop().await;
            *self.next.lock().unwrap_or_else(|p| p.into_inner()) =
                rand::thread_rng().gen_range(0..self.faults.len());
            healed
        })
    }
}

/// One fault of a package.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultConfig {
    /// `partition`, `kill` or `pause`.
    pub kind: String,
    /// Which nodes (see `stampede nemesis run --help`).
    #[serde(default = "default_target")]
    pub target: String,
    /// Settings of a `packet` fault (default: 100 ms delay, 10 ms jitter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netem: Option<NetemConfig>,
    /// Settings of a `clock` fault (default: bump by 5 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockConfig>,
}

fn default_target() -> String {
    "one".into()
}

impl NemesisConfig {
    /// Builds the package's nemeses; an error names the fault that is wrong.
    pub fn build(
        &self,
        control: &Control,
        db: Arc<dyn Db>,
        holder: Option<Arc<dyn HolderView>>,
    ) -> anyhow::Result<Vec<Arc<dyn Nemesis>>> {
        let faults = self.build_faults(control, db, holder)?;
        Ok(match self.order {
            Order::Random if faults.len() > 1 => {
                let first = rand::thread_rng().gen_range(0..faults.len());
                vec![Arc::new(RandomMix {
                    faults,
                    next: std::sync::Mutex::new(first),
                })]
            }
            _ => faults,
        })
    }

    fn build_faults(
        &self,
        control: &Control,
        db: Arc<dyn Db>,
        holder: Option<Arc<dyn HolderView>>,
    ) -> anyhow::Result<Vec<Arc<dyn Nemesis>>> {
        self.faults
            .iter()
            .enumerate()
            .map(|(i, f)| {
                super::build(f, control.clone(), db.clone(), holder.clone())
                    .with_context(|| format!("faults[{i}] ({} on {})", f.kind, f.target))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::control::{HostKeyPolicy, Node, SshOptions};
    use crate::db::zookeeper::{ZkConfig, ZooKeeper};

    #[test]
    fn every_shipped_nemesis_file_loads_and_builds() {
        let nodes: Vec<Node> = (1..=3)
            .map(|i| Node {
                name: format!("n{i}"),
                host: format!("10.0.0.{i}"),
                port: 22,
                user: "root".into(),
            })
            .collect();
        let opts = SshOptions {
            key: None,
            known_hosts: "/dev/null".into(),
            policy: HostKeyPolicy::Strict,
            connect_timeout: std::time::Duration::from_secs(1),
        };
        let control = Control::new(nodes.clone(), opts);
        let db: Arc<dyn Db> = Arc::new(ZooKeeper::new(ZkConfig::default(), nodes));
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("nemeses");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let cfg: NemesisConfig = crate::config::load(&path).unwrap_or_else(|e| panic!("{e:#}"));
            let built = cfg
                .build(&control, db.clone(), None)
                .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
            let expected = if cfg.order == Order::Random && cfg.faults.len() > 1 {
                1
            } else {
                cfg.faults.len()
            };
            assert_eq!(built.len(), expected);
            seen += 1;
        }
        assert!(seen >= 5, "the shipped nemesis files were found");
    }

    #[test]
    fn a_bad_fault_is_named() {
        let cfg: NemesisConfig =
            serde_yaml_ng::from_str("faults:\n  - kind: partition\n  - kind: flood\n").unwrap();
        let nodes = vec![Node {
            name: "n1".into(),
            host: "10.0.0.1".into(),
            port: 22,
            user: "root".into(),
        }];
        let opts = SshOptions {
            key: None,
            known_hosts: "/dev/null".into(),
            policy: HostKeyPolicy::Strict,
            connect_timeout: std::time::Duration::from_secs(1),
        };
        let db: Arc<dyn Db> = Arc::new(ZooKeeper::new(ZkConfig::default(), nodes.clone()));
        let err = cfg
            .build(&Control::new(nodes, opts), db, None)
            .err()
            .expect("flood is no fault");
        assert!(
            format!("{err:#}").starts_with("faults[1] (flood on one): unknown nemesis kind"),
            "{err:#}"
        );
        assert!(serde_yaml_ng::from_str::<NemesisConfig>(
            "faults:\n  - kind: clock\n    clok: {}\n"
        )
        .is_err());
    }

    /// A fault that does nothing but answer to its name.
    struct Named(&'static str);

    impl Nemesis for Named {
        fn kind(&self) -> &str {
            self.0
        }

        fn start(&self) -> BoxFuture<'_, anyhow::Result<serde_json::Value>> {
            Box::pin(async { Ok(serde_json::Value::Null) })
        }

        fn stop(&self) -> BoxFuture<'_, anyhow::Result<serde_json::Value>> {
            Box::pin(async { Ok(serde_json::Value::Null) })
        }
    }

    #[test]
    fn a_random_mix_names_the_fault_it_injects_next() {
        let faults: Vec<Arc<dyn Nemesis>> = vec![
            Arc::new(Named("kill")),
            Arc::new(Named("pause")),
            Arc::new(Named("clock")),
        ];
        let mix = RandomMix {
            faults,
            next: std::sync::Mutex::new(0),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut kinds = std::collections::BTreeMap::new();
        for _ in 0..300 {
            *kinds.entry(mix.kind().to_string()).or_insert(0) += 1;
            runtime.block_on(mix.stop()).unwrap();
        }
        assert_eq!(kinds.len(), 3, "every fault comes up: {kinds:?}");
        assert!(kinds.values().all(|n| *n > 50), "roughly evenly: {kinds:?}");
        let cfg: NemesisConfig = serde_yaml_ng::from_str("order: random\nfaults: []\n").unwrap();
        assert_eq!(cfg.order, Order::Random);
    }
}
