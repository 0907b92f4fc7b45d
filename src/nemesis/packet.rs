//! Packet faults with tc netem on the nodes' interfaces: delay with jitter, loss, duplication
//! and reordering of everything a node sends, or a slow-network partition that only delays
//! the packets between the two halves of a grudge.

use std::sync::{Arc, Mutex};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::grudge::{self, Shape};
use super::target::Target;
use super::{BoxFuture, Nemesis};
use crate::config::Duration;
use crate::control::shell::quote;
use crate::control::{Control, Node, Retry};
use crate::db::Db;

/// What netem does to the packets it touches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetemConfig {
    /// Added delay.
    pub delay: Duration,
    /// Random variation of the delay (±).
    pub jitter: Duration,
    /// Percentage of packets dropped.
    pub loss: f64,
    /// Percentage of packets sent twice.
    pub duplicate: f64,
    /// Percentage of packets sent at once, ahead of delayed ones (needs a delay).
    pub reorder: f64,
    /// Delay only the traffic between random halves of the nodes (a slow-network partition)
    /// instead of everything the targeted nodes send.
    pub slow_partition: bool,
}

impl Default for NetemConfig {
    fn default() -> Self {
        NetemConfig {
            delay: Duration(std::time::Duration::from_millis(100)),
            jitter: Duration(std::time::Duration::from_millis(10)),
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            slow_partition: false,
        }
    }
}

impl NetemConfig {
    /// The netem arguments, e.g. `delay 100ms 10ms loss 1%`.
    pub fn netem_args(&self) -> anyhow::Result<String> {
        for (name, pct) in [("loss", self.loss), ("duplicate", self.duplicate), ("reorder", self.reorder)] {
            anyhow::ensure!((0.0..=100.0).contains(&pct), "netem {name} {pct} is not a percentage from 0 to 100");
        }
        let mut args = format!("delay {}ms {}ms", self.delay.0.as_millis(), self.jitter.0.as_millis());
        if self.loss > 0.0 {
            args.push_str(&format!(" loss {}%", self.loss));
        }
        if self.duplicate > 0.0 {
            args.push_str(&format!(" duplicate {}%", self.duplicate));
        }
        if self.reorder > 0.0 {
            anyhow::ensure!(!self.delay.0.is_zero(), "netem reorder needs a delay");
            args.push_str(&format!(" reorder {}%", self.reorder));
        }
        Ok(args)
    }
}

/// The shell snippet that sets `dev` to the interface a node uses to reach `peer`.
fn find_device(peer: &str) -> String {
    format!("dev=$(ip -o route get {} | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p'); [ -n \"$dev\" ]", quote(peer))
}

/// The shell command that removes every qdisc stampede added on a node.
pub const HEAL_COMMAND: &str = "for dev in $(ls /sys/class/net); do \
     tc qdisc show dev $dev | grep -q 'qdisc netem\\|qdisc prio 1: .*bands 4' && tc qdisc del dev $dev root; done; true";

/// netem on every packet `node` sends.
fn shape_all(node_peer: &str, args: &str) -> String {
    format!("{} && tc qdisc replace dev $dev root netem {args}", find_device(node_peer))
}

/// netem only on packets from this node to `slow` peers: a prio qdisc with a fourth band
/// behind netem, and a filter per peer sending it there.
fn shape_towards(slow: &[&Node], args: &str) -> String {
    let mut cmd = format!(
        "{} && tc qdisc replace dev $dev root handle 1: prio bands 4 && tc qdisc add dev $dev parent 1:4 handle 40: netem {args}",
        find_device(&slow[0].host)
    );
    for peer in slow {
        cmd.push_str(&format!(
            " && tc filter add dev $dev parent 1: protocol ip prio 1 u32 match ip dst {}/32 flowid 1:4",
            quote(&peer.host)
        ));
    }
    cmd
}

/// Degrades the network of the targeted nodes while active.
pub struct PacketNemesis {
    control: Control,
    db: Arc<dyn Db>,
    target: Target,
    netem: NetemConfig,
    active: Mutex<bool>,
}

impl PacketNemesis {
    /// Packet faults shaped by `netem` on the nodes `target` picks (all nodes for a slow
    /// partition).
    pub fn new(control: Control, db: Arc<dyn Db>, target: Target, netem: NetemConfig) -> anyhow::Result<PacketNemesis> {
        netem.netem_args()?;
        Ok(PacketNemesis { control, db, target, netem, active: Mutex::new(false) })
    }

    /// The command for each node, and what the fault was, as recorded in the history.
    async fn plan(&self, args: &str) -> anyhow::Result<(Vec<(Node, String)>, serde_json::Value)> {
        let nodes = self.control.nodes();
        if self.netem.slow_partition {
            let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
            let grudge = grudge::compute(&Shape::Halves, &names, &mut rand::thread_rng());
            let plan = grudge
                .iter()
                .filter(|(_, slow)| !slow.is_empty())
                .map(|(name, slow)| {
                    let node = nodes.iter().find(|n| &n.name == name).expect("grudge names come from the nodes").clone();
                    let peers: Vec<&Node> = nodes.iter().filter(|n| slow.contains(&n.name)).collect();
                    (node, shape_towards(&peers, args))
                })
                .collect();
            return Ok((plan, json!({ "netem": args, "slow": grudge })));
        }
        let hit = self.target.pick(nodes, self.db.as_ref()).await?;
        let peer_of = |node: &Node| nodes.iter().find(|n| n.name != node.name).unwrap_or(node).host.clone();
        let plan = hit.iter().map(|n| (n.clone(), shape_all(&peer_of(n), args))).collect();
        let names: Vec<&str> = hit.iter().map(|n| n.name.as_str()).collect();
        Ok((plan, json!({ "netem": args, "nodes": names })))
    }
}

impl Nemesis for PacketNemesis {
    fn kind(&self) -> &str {
        "packet"
    }

    fn start(&self) -> BoxFuture<'_, anyhow::Result<serde_json::Value>> {
        Box::pin(async move {
            let args = self.netem.netem_args()?;
            let (plan, value) = self.plan(&args).await?;
            *self.active.lock().unwrap_or_else(|p| p.into_inner()) = true;
            let applies = plan.iter().map(|(node, cmd)| async move {
                self.control.exec(node, &format!("{HEAL_COMMAND}; {cmd}"), Retry::Idempotent).await
            });
            for result in futures::future::join_all(applies).await {
                result.context("cannot apply netem")?;
            }
            Ok(value)
        })
    }

    fn stop(&self) -> BoxFuture<'_, anyhow::Result<serde_json::Value>> {
        Box::pin(async move {
            let was = std::mem::take(&mut *self.active.lock().unwrap_or_else(|p| p.into_inner()));
            let heals = self.control.nodes().iter().map(|n| self.control.exec(n, HEAL_COMMAND, Retry::Idempotent));
            for result in futures::future::join_all(heals).await {
                result.context("cannot remove netem")?;
            }
            Ok(json!({ "healed": was }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netem_arguments_follow_the_config() {
        let cfg = NetemConfig { loss: 1.5, duplicate: 2.0, reorder: 25.0, ..NetemConfig::default() };
        assert_eq!(cfg.netem_args().unwrap(), "delay 100ms 10ms loss 1.5% duplicate 2% reorder 25%");
        assert!(NetemConfig { loss: 120.0, ..NetemConfig::default() }.netem_args().is_err());
        let no_delay = NetemConfig { delay: Duration(std::time::Duration::ZERO), reorder: 5.0, ..NetemConfig::default() };
        assert!(no_delay.netem_args().is_err());
    }

    #[test]
    fn slow_partition_filters_each_slow_peer() {
        let peer = |i: u8| Node { name: format!("n{i}"), host: format!("10.0.0.{i}"), port: 22, user: "root".into() };
        let (a, b) = (peer(2), peer(3));
        let cmd = shape_towards(&[&a, &b], "delay 1000ms 0ms");
        assert!(cmd.contains("prio bands 4"));
        assert!(cmd.contains("match ip dst 10.0.0.2/32 flowid 1:4"));
        assert!(cmd.contains("match ip dst 10.0.0.3/32 flowid 1:4"));
        assert!(cmd.contains("parent 1:4 handle 40: netem delay 1000ms 0ms"));
    }
}
