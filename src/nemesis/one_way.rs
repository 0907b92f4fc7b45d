//! One-way partitions (`kind: one-way-partition`): the servers a target picks stop hearing the
//! other servers while those still hear them. Each picked node drops, with iptables rules in
//! a chain of this fault's own, every packet from the servers that were not picked; nothing
//! is dropped the other way. A leader that can send but not receive keeps its followers'
//! timers fed while it hears no acknowledgement, a shape of fault a symmetric partition never
//! makes.

use std::sync::{Arc, Mutex};

use anyhow::Context;
use serde_json::json;

use super::kind::{self, Checking, FaultKind, HealStage, Healed, Parts, Refusal};
use super::package::FaultConfig;
use super::target::SeededTarget;
use super::Nemesis;
use crate::control::shell::quote;
use crate::control::{Control, Node, Retry};
use crate::db::Db;

/// The fault kind `one-way-partition`.
pub struct OneWayKind;

/// The iptables chain holding the rules.
const CHAIN: &str = "STAMPEDE-1WAY";

/// The shell command that removes every rule of this fault on a node.
fn heal_command() -> String {
    format!(
        "while iptables -w -D INPUT -j {CHAIN} 2>/dev/null; do :; done; \
         iptables -w -F {CHAIN} 2>/dev/null; iptables -w -X {CHAIN} 2>/dev/null; true"
    )
}

/// The shell command that makes a node drop every packet from `hosts`.
fn deafen_command(hosts: &[&str]) -> String {
    let mut cmd = format!(
        "{}; iptables -w -N {CHAIN} && iptables -w -I INPUT -j {CHAIN}",
        heal_command()
    );
    for host in hosts {
        cmd.push_str(&format!(
            " && iptables -w -A {CHAIN} -s {} -j DROP",
            quote(host)
        ));
    }
    cmd
}

#[async_trait::async_trait]
impl FaultKind for OneWayKind {
    fn name(&self) -> &'static str {
        "one-way-partition"
    }

    fn noun(&self) -> String {
        "one-way partition".into()
    }

    fn colour(&self) -> (u8, u8, u8) {
        (255, 152, 150)
    }

    /// Two servers at least, and a target that leaves some server unpicked to be unheard.
    fn check(&self, fault: &FaultConfig, checking: &Checking) -> Result<(), Refusal> {
        kind::check_cut_off(
            fault,
            checking,
            "a one-way partition",
            "target all leaves no server to stop hearing; give one, minority, majority, \
             leader, follower or a node",
        )
    }

    fn build(&self, fault: &FaultConfig, parts: Parts) -> anyhow::Result<Arc<dyn Nemesis>> {
        Ok(Arc::new(OneWay {
            control: parts.control,
            db: parts.db,
            target: SeededTarget::new(kind::node_target(fault)?, parts.dice),
            active: Mutex::new(false),
        }))
    }

    fn heal_stage(&self) -> Option<HealStage> {
        Some(HealStage::Network)
    }

    async fn heal_node(&self, control: &Control, _db: &dyn Db, node: &Node) -> Healed {
        control
            .exec(node, &heal_command(), Retry::Idempotent)
            .await?;
        Ok(Some("one-way partition rules"))
    }

    fn leftover_probe(&self, _node: &Node) -> Option<String> {
        Some(format!(
            "iptables -w -S {CHAIN} >/dev/null 2>&1 && echo 'one-way partition rules'; true"
        ))
    }
}

/// Makes the targeted servers deaf to the other servers while active.
struct OneWay {
    control: Control,
    db: Arc<dyn Db>,
    target: SeededTarget,
    active: Mutex<bool>,
}

#[async_trait::async_trait]
impl Nemesis for OneWay {
    fn kind(&self) -> &str {
        OneWayKind.name()
    }

    fn target(&self) -> String {
        self.target.to_string()
    }

    /// The value lists the deafened nodes (`nodes`) and whom each no longer hears
    /// (`unheard`).
    async fn start(&self) -> anyhow::Result<serde_json::Value> {
        let nodes = self.control.nodes();
        let (picked, unheard) = self
            .target
            .pick_apart(nodes, self.db.as_ref(), "to stop hearing")
            .await?;
        let hosts: Vec<&str> = unheard.iter().map(|n| n.host.as_str()).collect();
        *self.active.lock().unwrap_or_else(|p| p.into_inner()) = true;
        let command = deafen_command(&hosts);
        let deafen = picked
            .iter()
            .map(|node| self.control.exec(node, &command, Retry::Idempotent));
        for result in futures::future::join_all(deafen).await {
            result.context("cannot apply the one-way partition")?;
        }
        let deafened: Vec<&str> = picked.iter().map(|n| n.name.as_str()).collect();
        let unheard: Vec<&str> = unheard.iter().map(|n| n.name.as_str()).collect();
        Ok(json!({ "nodes": deafened, "unheard": unheard }))
    }

    async fn stop(&self) -> anyhow::Result<serde_json::Value> {
        let was = std::mem::take(&mut *self.active.lock().unwrap_or_else(|p| p.into_inner()));
        let command = heal_command();
        let heals = self
            .control
            .nodes()
            .iter()
            .map(|n| self.control.exec(n, &command, Retry::Idempotent));
        for result in futures::future::join_all(heals).await {
            result.context("cannot heal the one-way partition")?;
        }
        Ok(json!({ "healed": was }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_drop_only_what_the_unheard_send() {
        let cmd = deafen_command(&["10.0.0.2", "10.0.0.3"]);
        assert!(cmd.starts_with(&heal_command()), "{cmd}");
        assert!(cmd.contains("-I INPUT -j STAMPEDE-1WAY"), "{cmd}");
        assert!(
            cmd.contains("-A STAMPEDE-1WAY -s 10.0.0.2 -j DROP"),
            "{cmd}"
        );
        assert!(
            cmd.contains("-A STAMPEDE-1WAY -s 10.0.0.3 -j DROP"),
            "{cmd}"
        );
        assert!(
            !cmd.contains("OUTPUT"),
            "nothing the deafened node sends is dropped: {cmd}"
        );
    }
}
