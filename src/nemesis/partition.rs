//! Network partitions with iptables on the nodes: each node drops packets from the nodes in
//! its grudge, through a chain of stampede's own so that healing removes exactly what was added.

use std::sync::{Arc, Mutex};

use anyhow::Context;
use serde_json::json;

use super::dice::Dice;
use super::grudge::{self, Grudge, Shape};
use super::kind::{self, refuse, Checking, FaultKind, HealStage, Healed, Parts, Refusal};
use super::package::FaultConfig;
use super::target::Target;
use super::trigger::Triggered;
use super::Nemesis;
use crate::control::shell::quote;
use crate::control::{Control, Node, Retry};
use crate::db::Db;

/// The fault kind `partition`: iptables rules cutting the nodes running the database into
/// sides (`halves`, `majorities-ring`, `bridge`) or isolating some (`one`, `leader`,
/// `holder`, …).
pub struct PartitionKind;

#[async_trait::async_trait]
impl FaultKind for PartitionKind {
    fn name(&self) -> &'static str {
        "partition"
    }

    fn noun(&self) -> String {
        "partition".into()
    }

    fn colour(&self) -> (u8, u8, u8) {
        (214, 39, 40)
    }

    fn triggered(&self) -> Option<Triggered> {
        Some(Triggered::Isolate)
    }

    fn check(&self, fault: &FaultConfig, checking: &Checking) -> Result<(), Refusal> {
        if let Some(aim) = checking.aim {
            grudge::between_servers(aim.db, aim.nodes, "a partition")
                .map_err(|e| refuse("kind", format!("{e:#}")))?;
        }
        // A triggered partition cuts off each targeted node whose log matches.
        if fault.trigger.is_some() {
            let target =
                kind::node_target(fault).map_err(|e| refuse("target", format!("{e:#}")))?;
            return kind::check_aim(&target, checking);
        }
        match fault.target.as_str() {
            "holder" if !checking.holders => Err(refuse(
                "target",
                "target holder: only lock and election workloads have holders",
            )),
            "holder" => Ok(()),
            text => match PartitionSpec::parse(text) {
                Ok(PartitionSpec::Isolate(target)) => kind::check_aim(&target, checking),
                Ok(_) => Ok(()),
                Err(e) => Err(refuse("target", format!("{e:#}"))),
            },
        }
    }

    fn build(&self, fault: &FaultConfig, parts: Parts) -> anyhow::Result<Arc<dyn Nemesis>> {
        let spec = match fault.target.as_str() {
            "holder" => PartitionSpec::IsolateHolder(parts.holder.context(
                "partition target holder: only lock and election workloads have holders",
            )?),
            text => PartitionSpec::parse(text)?,
        };
        Ok(Arc::new(Partition::new(
            parts.control,
            parts.db,
            spec,
            parts.dice,
        )))
    }

    /// The nodes it cut off (`nodes`), or in older records its `grudge`.
    fn acted(&self, value: &serde_json::Value) -> bool {
        kind::lists_or_maps_nodes(value, "grudge")
    }

    fn heal_stage(&self) -> Option<HealStage> {
        Some(HealStage::Network)
    }

    async fn heal_node(&self, control: &Control, _db: &dyn Db, node: &Node) -> Healed {
        control.exec(node, HEAL_COMMAND, Retry::Idempotent).await?;
        Ok(Some("partition rules"))
    }

    fn leftover_probe(&self, _node: &Node) -> Option<String> {
        Some(LEFTOVER_PROBE.to_string())
    }
}

/// The iptables chain holding a partition's rules.
const CHAIN: &str = "STAMPEDE";

/// The shell command that removes every partition rule stampede added on a node.
pub const HEAL_COMMAND: &str = "while iptables -w -D INPUT -j STAMPEDE 2>/dev/null; do :; done; \
     iptables -w -F STAMPEDE 2>/dev/null; iptables -w -X STAMPEDE 2>/dev/null; true";

/// A shell command that prints `partition rules` when stampede's partition chain is on the
/// node (what [`HEAL_COMMAND`] removes).
const LEFTOVER_PROBE: &str =
    "iptables -w -S STAMPEDE >/dev/null 2>&1 && echo 'partition rules'; true";

/// How a partition picks its sides.
#[derive(Clone)]
pub enum PartitionSpec {
    /// A fixed shape.
    Shape(Shape),
    /// Isolate the nodes a target picks when the fault starts (e.g. the leader).
    Isolate(Target),
    /// Isolate the node whose client holds the lock or leads when the fault starts.
    IsolateHolder(Arc<dyn HolderView>),
}

impl std::fmt::Debug for PartitionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PartitionSpec::Shape(shape) => write!(f, "Shape({shape:?})"),
            PartitionSpec::Isolate(target) => write!(f, "Isolate({target})"),
            PartitionSpec::IsolateHolder(_) => f.write_str("IsolateHolder"),
        }
    }
}

/// Tells which node's client holds a lock or leads right now (read from the history).
pub trait HolderView: Send + Sync {
    /// The node of the client that holds now, if one does.
    fn holder_node(&self) -> Option<String>;
}

impl PartitionSpec {
    /// Reads a partition target: `halves`, `majorities-ring`, `bridge`, or a [`Target`] whose
    /// nodes get isolated (`one`, `leader`, `minority`, a node name).
    pub fn parse(text: &str) -> anyhow::Result<PartitionSpec> {
        Ok(match text {
            "halves" | "random-halves" => PartitionSpec::Shape(Shape::Halves),
            "majorities-ring" => PartitionSpec::Shape(Shape::MajoritiesRing),
            "bridge" => PartitionSpec::Shape(Shape::Bridge),
            "all" | "majority" => anyhow::bail!("partition target {text:?}: a partition isolates a minority; use halves, one, leader, minority, majorities-ring, bridge or a node"),
            other => PartitionSpec::Isolate(other.parse()?),
        })
    }
}

/// Partitions the network between the nodes running the database while active.
pub struct Partition {
    control: Control,
    db: Arc<dyn Db>,
    spec: PartitionSpec,
    dice: Dice,
    active: Mutex<Option<Grudge>>,
}

impl std::fmt::Display for PartitionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PartitionSpec::Shape(Shape::Halves) => f.write_str("halves"),
            PartitionSpec::Shape(Shape::MajoritiesRing) => f.write_str("majorities-ring"),
            PartitionSpec::Shape(Shape::Bridge) => f.write_str("bridge"),
            PartitionSpec::Shape(Shape::Isolate(cut)) => f.write_str(&cut.join(",")),
            PartitionSpec::Isolate(target) => write!(f, "{target}"),
            PartitionSpec::IsolateHolder(_) => f.write_str("holder"),
        }
    }
}

impl Partition {
    /// A partition of `control`'s nodes shaped by `spec`, its random choices drawn from `dice`.
    pub fn new(control: Control, db: Arc<dyn Db>, spec: PartitionSpec, dice: Dice) -> Partition {
        Partition {
            control,
            db,
            spec,
            dice,
            active: Mutex::new(None),
        }
    }

    /// Who drops whose packets, over the nodes running the database only (a partition
    /// between other nodes touches nothing under test).
    async fn grudge(&self) -> anyhow::Result<Grudge> {
        let nodes = self.control.nodes();
        let names = grudge::between_servers(self.db.as_ref(), nodes, "a partition")?;
        let shape = match &self.spec {
            PartitionSpec::Shape(shape) => shape.clone(),
            PartitionSpec::Isolate(target) => {
                let cut = target
                    .pick_with(nodes, self.db.as_ref(), &self.dice)
                    .await?;
                Shape::Isolate(cut.into_iter().map(|n| n.name).collect())
            }
            PartitionSpec::IsolateHolder(view) => match view.holder_node() {
                Some(node) if names.contains(&node) => Shape::Isolate(vec![node]),
                Some(node) => anyhow::bail!(
                    "target holder: the holder's node {node} runs no {} server",
                    self.db.name()
                ),
                None => anyhow::bail!("target holder: no client holds the lock or leads right now"),
            },
        };
        Ok(self.dice.roll(|rng| grudge::compute(&shape, &names, rng)))
    }
}

/// The commands that make `node` drop packets from the nodes named in `dropped`.
pub fn drop_command(nodes: &[Node], dropped: &[&String]) -> String {
    let mut cmd =
        format!("{HEAL_COMMAND}; iptables -w -N {CHAIN} && iptables -w -I INPUT -j {CHAIN}");
    for name in dropped {
        if let Some(peer) = nodes.iter().find(|n| &&n.name == name) {
            cmd.push_str(&format!(
                " && iptables -w -A {CHAIN} -s {} -j DROP",
                quote(&peer.host)
            ));
        }
    }
    cmd
}

/// The same rules as [`drop_command`] dropping packets from `hosts`, as one
/// `iptables-restore --noflush` input (one process, one atomic change), for a trigger agent
/// that cuts its node off; [`HEAL_COMMAND`] removes them.
pub fn restore_rules(hosts: &[String]) -> String {
    let mut rules = format!("*filter\n:{CHAIN} - [0:0]\n-I INPUT -j {CHAIN}\n");
    for host in hosts {
        rules.push_str(&format!("-A {CHAIN} -s {host} -j DROP\n"));
    }
    rules.push_str("COMMIT\n");
    rules
}

#[async_trait::async_trait]
impl Nemesis for Partition {
    fn kind(&self) -> &str {
        "partition"
    }

    fn target(&self) -> String {
        self.spec.to_string()
    }

    async fn start(&self) -> anyhow::Result<serde_json::Value> {
        let grudge = self.grudge().await?;
        let cut = grudge::acting(&grudge);
        let nodes = self.control.nodes();
        let applies = grudge
            .iter()
            .filter(|(_, d)| !d.is_empty())
            .map(|(name, dropped)| {
                let node = nodes
                    .iter()
                    .find(|n| &n.name == name)
                    .expect("grudge names come from the nodes");
                let cmd = drop_command(nodes, &dropped.iter().collect::<Vec<_>>());
                async move { self.control.exec(node, &cmd, Retry::Idempotent).await }
            });
        *self.active.lock().unwrap_or_else(|p| p.into_inner()) = Some(grudge.clone());
        for result in futures::future::join_all(applies).await {
            result.context("cannot apply the partition")?;
        }
        Ok(json!({ "grudge": grudge, "nodes": cut }))
    }

    async fn stop(&self) -> anyhow::Result<serde_json::Value> {
        let healed = self.active.lock().unwrap_or_else(|p| p.into_inner()).take();
        let heals = self
            .control
            .nodes()
            .iter()
            .map(|n| self.control.exec(n, HEAL_COMMAND, Retry::Idempotent));
        for result in futures::future::join_all(heals).await {
            result.context("cannot heal the partition")?;
        }
        Ok(json!({ "healed": healed.is_some() }))
    }
}
