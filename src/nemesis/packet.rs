//! Packet faults with tc netem on the nodes' interfaces: delay with jitter, loss, duplication
//! and reordering of everything a node sends, or a slow-network partition that only delays
//! the packets between the two halves of a grudge.

use std::sync::{Arc, Mutex};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::agent;
use super::grudge::{self, Shape};
use super::kind::{self, refuse, Checking, FaultKind, HealStage, Healed, Parts, Refusal};
use super::package::FaultConfig;
use super::target::SeededTarget;
use super::Nemesis;
use crate::config::Duration;
use crate::control::shell::quote;
use crate::control::{Control, Node, Retry};
use crate::db::Db;

/// The fault kind `packet`: settings under `netem:` ([`NetemConfig`]).
pub struct PacketKind;

#[async_trait::async_trait]
impl FaultKind for PacketKind {
    fn name(&self) -> &'static str {
        "packet"
    }

    fn colour(&self) -> (u8, u8, u8) {
        (23, 190, 207)
    }

    fn settings_key(&self) -> Option<&'static str> {
        Some("netem")
    }

    fn check(&self, fault: &FaultConfig, checking: &Checking) -> Result<(), Refusal> {
        let netem: NetemConfig = kind::settings(fault)?;
        if let (Some(aim), true) = (checking.aim, netem.slow_partition) {
            grudge::between_servers(aim.db, aim.nodes, "a slow partition")
                .map_err(|e| refuse("kind", format!("{e:#}")))?;
        }
        kind::check_node_target(fault, checking)?;
        netem
            .netem_args()
            .map(drop)
            .map_err(|e| refuse("netem", format!("{e:#}")))
    }

    fn build(&self, fault: &FaultConfig, parts: Parts) -> anyhow::Result<Arc<dyn Nemesis>> {
        kind::aimed(fault, parts, PacketNemesis::new)
    }

    /// The nodes it shaped (`nodes`), or for a slow partition its `slow` map.
    fn acted(&self, value: &serde_json::Value) -> bool {
        kind::lists_or_maps_nodes(value, "slow")
    }

    fn heal_stage(&self) -> Option<HealStage> {
        Some(HealStage::Network)
    }

    async fn heal_node(&self, control: &Control, _db: &dyn Db, node: &Node) -> Healed {
        control
            .exec(node, &heal_command(node), Retry::Idempotent)
            .await?;
        Ok(Some("packet faults"))
    }

    fn leftover_probe(&self, node: &Node) -> Option<String> {
        Some(leftover_probe(node))
    }
}

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
    /// Delay only the traffic between servers (a slow-network partition) instead of
    /// everything the targeted nodes send: between random halves with target `all`, else
    /// between the servers the target picks and the rest (e.g. a follower that lags behind
    /// its leader while its clients reach it at full speed).
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
        for (name, pct) in [
            ("loss", self.loss),
            ("duplicate", self.duplicate),
            ("reorder", self.reorder),
        ] {
            anyhow::ensure!(
                (0.0..=100.0).contains(&pct),
                "netem {name} {pct} is not a percentage from 0 to 100"
            );
        }
        let mut args = format!(
            "delay {}ms {}ms",
            self.delay.0.as_millis(),
            self.jitter.0.as_millis()
        );
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
    format!(
        "dev=$(ip -o route get {} | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p'); [ -n \"$dev\" ]",
        quote(peer)
    )
}

/// The agent's pid file on `node` (named by host: local nodes share a disk).
fn agent_pidfile(node: &Node) -> String {
    format!("/var/lib/stampede/netem/{}.pid", node.host)
}

/// The shell command that removes every qdisc, queue rule and queue agent stampede added on
/// `node`.
pub fn heal_command(node: &Node) -> String {
    format!(
        "for dev in $(ls /sys/class/net); do \
         tc qdisc show dev $dev | grep -q {qdisc} && tc qdisc del dev $dev root; done; \
         while iptables -w -t mangle -D OUTPUT -j STAMPEDE-NETEM 2>/dev/null; do :; done; \
         iptables -w -t mangle -F STAMPEDE-NETEM 2>/dev/null; iptables -w -t mangle -X STAMPEDE-NETEM 2>/dev/null; \
         f={pid}; if [ -f $f ]; then p=$(cat $f); grep -q 'agent-netem' /proc/$p/cmdline 2>/dev/null && kill -9 $p; while [ -d /proc/$p ] && grep -q 'agent-netem' /proc/$p/cmdline 2>/dev/null; do sleep 0.05; done; rm -f $f; fi; rm -f {log}; true",
        qdisc = quote(OUR_QDISCS),
        pid = quote(&agent_pidfile(node)),
        log = quote(&format!("/var/lib/stampede/netem/{}.log", node.host)),
    )
}

/// A shell command that prints one line for each part of a packet fault on `node` (a qdisc, the
/// queue rules, the queue agent): what [`heal_command`] removes.
fn leftover_probe(node: &Node) -> String {
    format!(
        "for dev in $(ls /sys/class/net); do \
         tc qdisc show dev $dev | grep -q {qdisc} && echo \"packet-fault qdisc on $dev\"; done; \
         iptables -w -t mangle -S STAMPEDE-NETEM >/dev/null 2>&1 && echo 'packet-fault queue rules'; \
         f={pid}; [ -f $f ] && grep -q agent-netem /proc/$(cat $f)/cmdline 2>/dev/null && echo 'packet-fault agent'; true",
        qdisc = quote(OUR_QDISCS),
        pid = quote(&agent_pidfile(node)),
    )
}

/// The root qdiscs stampede adds (netem, or the prio that feeds the queue agent), as a
/// `grep` pattern over `tc qdisc show`.
const OUR_QDISCS: &str = "qdisc netem\\|qdisc prio 1: .*bands 4";

/// The NFQUEUE number the agent serves.
const QUEUE: u16 = 7411;

/// Whether the node's kernel has netem (probed on its loopback, left as it was).
const HAS_NETEM: &str = "tc qdisc add dev lo root netem delay 0ms 2>/dev/null && tc qdisc del dev lo root && echo yes || true";

/// Commands that start the queue agent on a node and send its outgoing packets (all but SSH
/// and loopback, or only those to `towards`) through it; `pidfile` is the node's own.
fn queue_command(
    agent: &str,
    node: &Node,
    netem: &NetemConfig,
    towards: Option<&[&Node]>,
) -> String {
    let pidfile = agent_pidfile(node);
    let mut cmd = format!(
        "mkdir -p /var/lib/stampede/netem || exit 1; setsid nohup {agent} agent-netem --queue {QUEUE} --delay-ms {} --jitter-ms {} --loss {} \
         > /var/lib/stampede/netem/{host}.log 2>&1 < /dev/null & echo $! > {pid}; sleep 0.3; {{ kill -0 $(cat {pid}) || {{ echo \"the queue agent exited: $(tail -c 300 /var/lib/stampede/netem/{host}.log)\" >&2; false; }}; }} && \
         iptables -w -t mangle -N STAMPEDE-NETEM && iptables -w -t mangle -I OUTPUT -j STAMPEDE-NETEM && \
         iptables -w -t mangle -A STAMPEDE-NETEM -o lo -j RETURN && iptables -w -t mangle -A STAMPEDE-NETEM -p tcp --sport 22 -j RETURN",
        netem.delay.0.as_millis(),
        netem.jitter.0.as_millis(),
        netem.loss / 100.0,
        host = node.host,
        pid = quote(&pidfile),
    );
    let queue = format!("-j NFQUEUE --queue-num {QUEUE} --queue-bypass");
    match towards {
        Some(peers) => {
            for peer in peers {
                cmd.push_str(&format!(
                    " && iptables -w -t mangle -A STAMPEDE-NETEM -d {} {queue}",
                    quote(&peer.host)
                ));
            }
        }
        None => cmd.push_str(&format!(
            " && iptables -w -t mangle -A STAMPEDE-NETEM {queue}"
        )),
    }
    cmd
}

/// netem on every packet `node` sends.
fn shape_all(node_peer: &str, args: &str) -> String {
    format!(
        "{} && tc qdisc replace dev $dev root netem {args}",
        find_device(node_peer)
    )
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
    target: SeededTarget,
    netem: NetemConfig,
    active: Mutex<bool>,
}

impl PacketNemesis {
    /// Packet faults shaped by `netem` on the nodes `target` picks (all nodes for a slow
    /// partition).
    pub fn new(
        control: Control,
        db: Arc<dyn Db>,
        target: SeededTarget,
        netem: NetemConfig,
    ) -> anyhow::Result<PacketNemesis> {
        netem.netem_args()?;
        Ok(PacketNemesis {
            control,
            db,
            target,
            netem,
            active: Mutex::new(false),
        })
    }

    /// The nodes to shape, each with the peers whose traffic it slows (`None`: all of it),
    /// and what the fault was, as recorded in the history.
    async fn plan(
        &self,
        args: &str,
    ) -> anyhow::Result<(Vec<(Node, Option<Vec<Node>>)>, serde_json::Value)> {
        let nodes = self.control.nodes();
        if self.netem.slow_partition {
            let names = grudge::between_servers(self.db.as_ref(), nodes, "a slow partition")?;
            let grudge = match self.target.is_all() {
                true => {
                    let halves = |rng: &mut _| grudge::compute(&Shape::Halves, &names, rng);
                    self.target.dice().roll(halves)
                }
                false => {
                    let (picked, rest) = self
                        .target
                        .pick_apart(nodes, self.db.as_ref(), "to slow it from")
                        .await?;
                    let side = |side: Vec<Node>| side.into_iter().map(|n| n.name).collect();
                    grudge::complete(&[side(picked), side(rest)])
                }
            };
            let plan = grudge
                .iter()
                .filter(|(_, slow)| !slow.is_empty())
                .map(|(name, slow)| {
                    let node = nodes
                        .iter()
                        .find(|n| &n.name == name)
                        .expect("grudge names come from the nodes")
                        .clone();
                    let peers: Vec<Node> = nodes
                        .iter()
                        .filter(|n| slow.contains(&n.name))
                        .cloned()
                        .collect();
                    (node, Some(peers))
                })
                .collect();
            let shaped = grudge::acting(&grudge);
            let value = json!({ "netem": args, "slow": grudge, "nodes": shaped });
            return Ok((plan, value));
        }
        let hit = self.target.pick(nodes, self.db.as_ref()).await?;
        let names: Vec<&str> = hit.iter().map(|n| n.name.as_str()).collect();
        let value = json!({ "netem": args, "nodes": names });
        Ok((hit.into_iter().map(|n| (n, None)).collect(), value))
    }

    /// The command that shapes `node`: tc netem where its kernel has it, else the queue agent
    /// (uploaded first).
    async fn shaping_command(
        &self,
        node: &Node,
        slow: Option<&[Node]>,
        args: &str,
    ) -> anyhow::Result<String> {
        let peers: Option<Vec<&Node>> = slow.map(|s| s.iter().collect());
        if self
            .control
            .exec(node, HAS_NETEM, Retry::Idempotent)
            .await?
            == "yes"
        {
            let nodes = self.control.nodes();
            return Ok(match &peers {
                Some(peers) => shape_towards(peers, args),
                None => shape_all(
                    &nodes
                        .iter()
                        .find(|n| n.name != node.name)
                        .unwrap_or(node)
                        .host,
                    args,
                ),
            });
        }
        anyhow::ensure!(
            self.netem.duplicate == 0.0,
            "on {}: the kernel has no netem, and the queue agent cannot duplicate packets",
            node.name
        );
        let agent = agent::install(&self.control, node).await?;
        Ok(queue_command(&agent, node, &self.netem, peers.as_deref()))
    }
}

#[async_trait::async_trait]
impl Nemesis for PacketNemesis {
    fn kind(&self) -> &str {
        "packet"
    }

    fn target(&self) -> String {
        match self.netem.slow_partition && self.target.is_all() {
            true => "halves".to_string(),
            false => self.target.to_string(),
        }
    }

    async fn start(&self) -> anyhow::Result<serde_json::Value> {
        let args = self.netem.netem_args()?;
        let (plan, value) = self.plan(&args).await?;
        *self.active.lock().unwrap_or_else(|p| p.into_inner()) = true;
        let args = &args;
        let applies = plan.iter().map(|(node, slow)| async move {
            let cmd = self.shaping_command(node, slow.as_deref(), args).await?;
            self.control
                .exec(
                    node,
                    &format!("{}; {cmd}", heal_command(node)),
                    Retry::Idempotent,
                )
                .await
        });
        for result in futures::future::join_all(applies).await {
            result.context("cannot apply netem")?;
        }
        Ok(value)
    }

    async fn stop(&self) -> anyhow::Result<serde_json::Value> {
        let was = std::mem::take(&mut *self.active.lock().unwrap_or_else(|p| p.into_inner()));
        let heals = self.control.nodes().iter().map(|n| async move {
            self.control
                .exec(n, &heal_command(n), Retry::Idempotent)
                .await
        });
        for result in futures::future::join_all(heals).await {
            result.context("cannot remove netem")?;
        }
        Ok(json!({ "healed": was }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netem_arguments_follow_the_config() {
        let cfg = NetemConfig {
            loss: 1.5,
            duplicate: 2.0,
            reorder: 25.0,
            ..NetemConfig::default()
        };
        assert_eq!(
            cfg.netem_args().unwrap(),
            "delay 100ms 10ms loss 1.5% duplicate 2% reorder 25%"
        );
        assert!(NetemConfig {
            loss: 120.0,
            ..NetemConfig::default()
        }
        .netem_args()
        .is_err());
        let no_delay = NetemConfig {
            delay: Duration(std::time::Duration::ZERO),
            reorder: 5.0,
            ..NetemConfig::default()
        };
        assert!(no_delay.netem_args().is_err());
    }

    #[test]
    fn slow_partition_filters_each_slow_peer() {
        let peer = |i: u8| Node {
            name: format!("n{i}"),
            host: format!("10.0.0.{i}"),
            port: 22,
            user: "root".into(),
        };
        let (a, b) = (peer(2), peer(3));
        let cmd = shape_towards(&[&a, &b], "delay 1000ms 0ms");
        assert!(cmd.contains("prio bands 4"));
        assert!(cmd.contains("match ip dst 10.0.0.2/32 flowid 1:4"));
        assert!(cmd.contains("match ip dst 10.0.0.3/32 flowid 1:4"));
        assert!(cmd.contains("parent 1:4 handle 40: netem delay 1000ms 0ms"));
    }
}
