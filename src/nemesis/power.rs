//! Power losses (`kind: power-loss`): the machines of the targeted servers lose power at the
//! emulator (a `stampede vm` guest's qemu is killed with SIGKILL), so that whatever a guest
//! had not written to its disk is gone, as after a real power cut; when the fault ends they
//! boot again and their servers are started. Only guests of `stampede vm up` on this
//! controller can lose power: a package with this kind is refused on other nodes.

use std::sync::{Arc, Mutex};

use anyhow::Context;
use serde_json::json;

use super::corrupt::watch;
use super::kind::{self, FaultKind, HealStage, Healed, Parts};
use super::package::FaultConfig;
use super::target::SeededTarget;
use super::Nemesis;
use crate::cluster::vm;
use crate::control::{Control, Node};
use crate::db::Db;

/// How long a server that booted again gets to serve: a guest's JVM under emulation starts
/// and catches up slowly.
const BOOT_WATCH: std::time::Duration = std::time::Duration::from_secs(120);

/// The fault kind `power-loss`.
pub struct PowerLossKind;

#[async_trait::async_trait]
impl FaultKind for PowerLossKind {
    fn name(&self) -> &'static str {
        "power-loss"
    }

    fn build(&self, fault: &FaultConfig, parts: Parts) -> anyhow::Result<Arc<dyn Nemesis>> {
        kind::aimed(fault, parts, |c, db, target, ()| {
            PowerLoss::new(c, db, target)
        })
    }

    fn heal_stage(&self) -> Option<HealStage> {
        Some(HealStage::Machine)
    }

    /// Boots the node's guest if an earlier start cut its power.
    async fn heal_node(&self, control: &Control, _db: &dyn Db, node: &Node) -> Healed {
        Ok(power_on(control, node).await?.then_some("booted"))
    }
}

/// Cuts the power of the targeted servers' guests while active.
pub struct PowerLoss {
    control: Control,
    db: Arc<dyn Db>,
    target: SeededTarget,
    hit: Mutex<Vec<Node>>,
}

impl PowerLoss {
    /// A power loss of the guests `target` picks at each start; an error names a node that
    /// is not a guest of `stampede vm up` on this machine.
    pub fn new(
        control: Control,
        db: Arc<dyn Db>,
        target: SeededTarget,
    ) -> anyhow::Result<PowerLoss> {
        if let Some(node) = control.nodes().iter().find(|n| !vm::is_guest(&n.host)) {
            anyhow::bail!(
                "node {} ({}) is not a guest of `stampede vm up` on this machine: only those can lose power",
                node.name,
                node.host
            );
        }
        Ok(PowerLoss {
            control,
            db,
            target,
            hit: Mutex::new(Vec::new()),
        })
    }
}

/// Boots `node`'s guest if it is a powered-off `stampede vm` guest (waiting until it answers
/// SSH); returns whether it did.
async fn power_on(control: &Control, node: &Node) -> anyhow::Result<bool> {
    let host = node.host.clone();
    let booted = tokio::task::spawn_blocking(move || match vm::is_guest(&host) {
        true => vm::power_on(&host),
        false => Ok(false),
    })
    .await??;
    if booted {
        control.forget_sessions(node);
    }
    Ok(booted)
}

#[async_trait::async_trait]
impl Nemesis for PowerLoss {
    fn kind(&self) -> &str {
        PowerLossKind.name()
    }

    fn target(&self) -> String {
        self.target.to_string()
    }

    /// Cuts the power of each picked guest; the value lists them.
    async fn start(&self) -> anyhow::Result<serde_json::Value> {
        let picked = self
            .target
            .pick(self.control.nodes(), self.db.as_ref())
            .await?;
        let mut names = Vec::new();
        for node in picked {
            let host = node.host.clone();
            tokio::task::spawn_blocking(move || vm::power_off(&host))
                .await?
                .with_context(|| format!("cannot cut the power of {}", node.name))?;
            self.control.forget_sessions(&node);
            names.push(node.name.clone());
            self.hit
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(node);
        }
        Ok(json!({ "nodes": names }))
    }

    /// Boots every guest that lost power and starts its server; the value says what each
    /// server did after (serving, exited, or running but not serving).
    async fn stop(&self) -> anyhow::Result<serde_json::Value> {
        let nodes = std::mem::take(&mut *self.hit.lock().unwrap_or_else(|p| p.into_inner()));
        let (control, db) = (&self.control, self.db.as_ref());
        let boots = nodes.iter().map(|n| power_on(control, n));
        for (node, booted) in nodes.iter().zip(futures::future::join_all(boots).await) {
            booted.with_context(|| format!("cannot boot {} again", node.name))?;
        }
        let mut after = serde_json::Map::new();
        for node in &nodes {
            if !db.is_running(control, node).await? {
                db.start(control, node).await?;
            }
            after.insert(
                node.name.clone(),
                watch(control, db, node, BOOT_WATCH).await?.into(),
            );
        }
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        Ok(json!({ "booted": names, "after_boot": after }))
    }
}
