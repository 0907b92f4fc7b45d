//! Process faults: kill -9 then restart, or SIGSTOP then SIGCONT, of the servers on the
//! nodes a target picks.

use std::sync::{Arc, Mutex};

use serde_json::json;

use super::kind::{self, FaultKind, HealStage, Healed, Parts};
use super::package::FaultConfig;
use super::target::SeededTarget;
use super::trigger::Triggered;
use super::Nemesis;
use crate::control::{Control, Node};
use crate::db::Db;

/// The fault kinds `kill` and `pause`.
pub struct ProcessKind(ProcessFault);

/// The registry's entry of `kill`.
pub const KILL: ProcessKind = ProcessKind(ProcessFault::Kill);

/// The registry's entry of `pause`.
pub const PAUSE: ProcessKind = ProcessKind(ProcessFault::Pause);

#[async_trait::async_trait]
impl FaultKind for ProcessKind {
    fn name(&self) -> &'static str {
        self.0.kind()
    }

    fn noun(&self) -> String {
        self.0.kind().into()
    }

    fn colour(&self) -> (u8, u8, u8) {
        match self.0 {
            ProcessFault::Kill => (60, 60, 60),
            ProcessFault::Pause => (148, 103, 189),
        }
    }

    fn triggered(&self) -> Option<Triggered> {
        Some(match self.0 {
            ProcessFault::Kill => Triggered::Kill,
            ProcessFault::Pause => Triggered::Pause,
        })
    }

    fn build(&self, fault: &FaultConfig, parts: Parts) -> anyhow::Result<Arc<dyn Nemesis>> {
        let fault_of = self.0;
        kind::aimed(fault, parts, |c, db, target, ()| {
            Ok(ProcessNemesis::new(c, db, fault_of, target))
        })
    }

    /// A paused server is resumed (a killed one is started by the generic heal).
    fn heal_stage(&self) -> Option<HealStage> {
        match self.0 {
            ProcessFault::Kill => None,
            ProcessFault::Pause => Some(HealStage::Process),
        }
    }

    async fn heal_node(&self, control: &Control, db: &dyn Db, node: &Node) -> Healed {
        if self.0 == ProcessFault::Pause {
            db.resume(control, node).await?;
        }
        Ok(None)
    }
}

/// What a process fault does to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessFault {
    /// SIGKILL, healed by starting the server again.
    Kill,
    /// SIGSTOP, healed by SIGCONT.
    Pause,
}

impl ProcessFault {
    /// The fault kind: `kill` or `pause`.
    pub fn kind(self) -> &'static str {
        match self {
            ProcessFault::Kill => "kill",
            ProcessFault::Pause => "pause",
        }
    }
}

/// Kills or pauses the servers on the targeted nodes while active.
pub struct ProcessNemesis {
    control: Control,
    db: Arc<dyn Db>,
    fault: ProcessFault,
    target: SeededTarget,
    hit: Mutex<Vec<Node>>,
}

impl ProcessNemesis {
    /// A `fault` on the nodes `target` picks at each start.
    pub fn new(
        control: Control,
        db: Arc<dyn Db>,
        fault: ProcessFault,
        target: SeededTarget,
    ) -> ProcessNemesis {
        ProcessNemesis {
            control,
            db,
            fault,
            target,
            hit: Mutex::new(Vec::new()),
        }
    }

    fn names(nodes: &[Node]) -> Vec<String> {
        nodes.iter().map(|n| n.name.clone()).collect()
    }
}

#[async_trait::async_trait]
impl Nemesis for ProcessNemesis {
    fn kind(&self) -> &str {
        self.fault.kind()
    }

    fn target(&self) -> String {
        self.target.to_string()
    }

    /// Kills or pauses the server on each picked node that runs one; the value lists them
    /// (a node whose server was not running is left out: nothing was done to it).
    async fn start(&self) -> anyhow::Result<serde_json::Value> {
        let nodes = self
            .target
            .pick_running(&self.control, self.db.as_ref(), self.kind())
            .await?;
        self.hit
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(nodes.iter().cloned());
        let faults = nodes.iter().map(|node| async move {
            match self.fault {
                ProcessFault::Kill => self.db.kill(&self.control, node).await,
                ProcessFault::Pause => self.db.pause(&self.control, node).await,
            }
        });
        for result in futures::future::join_all(faults).await {
            result?;
        }
        Ok(json!({ "nodes": Self::names(&nodes) }))
    }

    async fn stop(&self) -> anyhow::Result<serde_json::Value> {
        let nodes = std::mem::take(&mut *self.hit.lock().unwrap_or_else(|p| p.into_inner()));
        let heals = nodes.iter().map(|node| async move {
            match self.fault {
                ProcessFault::Kill => self.db.start(&self.control, node).await,
                ProcessFault::Pause => self.db.resume(&self.control, node).await,
            }
        });
        for result in futures::future::join_all(heals).await {
            result?;
        }
        Ok(json!({ "nodes": Self::names(&nodes) }))
    }
}
