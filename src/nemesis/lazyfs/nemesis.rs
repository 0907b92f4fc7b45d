//! `kind: lose-unfsynced`: the servers on the targeted nodes lose power: each is killed with
//! SIGKILL and its layer throws away what was written since the last fsync; the fault is
//! healed by starting them again.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::layer;
use crate::control::{Control, Node};
use crate::db::Db;
use crate::nemesis::target::SeededTarget;
use crate::nemesis::Nemesis;

/// Power losses of the servers a target picks (they must run on the layer: see
/// [`OnLayer`](layer::OnLayer)).
pub struct LoseUnsynced {
    control: Control,
    db: Arc<dyn Db>,
    target: SeededTarget,
    down: Mutex<Vec<Node>>,
}

impl LoseUnsynced {
    /// Power losses on the nodes `target` picks at each start.
    pub fn new(control: Control, db: Arc<dyn Db>, target: SeededTarget) -> LoseUnsynced {
        LoseUnsynced {
            control,
            db,
            target,
            down: Mutex::new(Vec::new()),
        }
    }

    async fn power_loss(&self, node: &Node) -> anyhow::Result<super::fs::Lost> {
        self.db.kill(&self.control, node).await?;
        layer::lose(&self.control, self.db.as_ref(), node).await
    }
}

fn names(nodes: &[Node]) -> Vec<String> {
    nodes.iter().map(|n| n.name.clone()).collect()
}

#[async_trait::async_trait]
impl Nemesis for LoseUnsynced {
    fn kind(&self) -> &str {
        "lose-unfsynced"
    }

    fn target(&self) -> String {
        self.target.to_string()
    }

    /// Kills the server on each picked node that runs one and loses its unsynced data; the
    /// value lists the nodes and what each lost (`lost: {n1: {bytes, files}}`; losing zero
    /// bytes still counts: the server was killed and had nothing unsynced).
    async fn start(&self) -> anyhow::Result<serde_json::Value> {
        let nodes = self
            .target
            .pick_running(&self.control, self.db.as_ref(), "lose unfsynced data")
            .await?;
        self.down
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(nodes.iter().cloned());
        let losses = nodes.iter().map(|n| self.power_loss(n));
        let mut lost = BTreeMap::new();
        for (node, result) in nodes.iter().zip(futures::future::join_all(losses).await) {
            lost.insert(node.name.clone(), result?);
        }
        Ok(json!({ "nodes": names(&nodes), "lost": lost }))
    }

    async fn stop(&self) -> anyhow::Result<serde_json::Value> {
        let nodes = std::mem::take(&mut *self.down.lock().unwrap_or_else(|p| p.into_inner()));
        let starts = nodes.iter().map(|n| self.db.start(&self.control, n));
        for result in futures::future::join_all(starts).await {
            result?;
        }
        Ok(json!({ "nodes": names(&nodes) }))
    }
}
