//! Rolling restarts (`kind: restart`): the servers a target picks are restarted one after
//! another in node order, each waited for until it serves (or exits) and then left alone
//! for a gap, as an operator restarts an ensemble; with `kill` each goes down by SIGKILL (a
//! crash), else by SIGTERM. The whole sequence is the start; the stop starts any of them
//! that is not running.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::corrupt::{watch, WATCH};
use super::kind::{self, FaultKind, Parts};
use super::package::FaultConfig;
use super::target::SeededTarget;
use super::Nemesis;
use crate::config::Duration;
use crate::control::{Control, Node};
use crate::db::Db;

/// The fault kind `restart`: settings under `restart:` ([`RestartConfig`]). It leaves
/// nothing behind but stopped servers, which the generic heal starts again.
pub struct RestartKind;

impl FaultKind for RestartKind {
    fn name(&self) -> &'static str {
        "restart"
    }

    fn settings_key(&self) -> Option<&'static str> {
        Some("restart")
    }

    fn check(&self, fault: &FaultConfig, checking: &kind::Checking) -> Result<(), kind::Refusal> {
        kind::check_node_target(fault, checking)?;
        kind::settings::<RestartConfig>(fault).map(drop)
    }

    fn build(&self, fault: &FaultConfig, parts: Parts) -> anyhow::Result<Arc<dyn Nemesis>> {
        kind::aimed(fault, parts, |c, db, target, cfg| {
            Ok(RestartNemesis::new(c, db, target, cfg))
        })
    }
}

/// A restart fault's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RestartConfig {
    /// How long to wait after one server is back before restarting the next (default 1 s).
    pub gap: Duration,
    /// SIGKILL (default) rather than SIGTERM.
    pub kill: bool,
}

impl Default for RestartConfig {
    fn default() -> Self {
        RestartConfig {
            gap: Duration(std::time::Duration::from_secs(1)),
            kill: true,
        }
    }
}

/// Restarts the targeted servers one by one.
pub struct RestartNemesis {
    control: Control,
    db: Arc<dyn Db>,
    target: SeededTarget,
    cfg: RestartConfig,
    hit: Mutex<Vec<Node>>,
}

impl RestartNemesis {
    /// A rolling restart of the servers `target` picks at each start.
    pub fn new(
        control: Control,
        db: Arc<dyn Db>,
        target: SeededTarget,
        cfg: RestartConfig,
    ) -> RestartNemesis {
        RestartNemesis {
            control,
            db,
            target,
            cfg,
            hit: Mutex::new(Vec::new()),
        }
    }
}

#[async_trait::async_trait]
impl Nemesis for RestartNemesis {
    fn kind(&self) -> &str {
        "restart"
    }

    fn target(&self) -> String {
        self.target.to_string()
    }

    /// Restarts each picked running server in node order; the value lists them in that order
    /// (`nodes`) and what each did after its restart (`after_restart`: serving, exited, or
    /// running but not serving).
    async fn start(&self) -> anyhow::Result<serde_json::Value> {
        let (control, db) = (&self.control, self.db.as_ref());
        let mut picked = self.target.pick(control.nodes(), db).await?;
        let order = |n: &Node| control.nodes().iter().position(|m| m == n);
        picked.sort_by_key(order);
        let (mut nodes, mut after) = (Vec::new(), BTreeMap::new());
        for node in picked {
            if !db.is_running(control, &node).await? {
                continue;
            }
            if !nodes.is_empty() {
                tokio::time::sleep(self.cfg.gap.0).await;
            }
            self.hit
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(node.clone());
            match self.cfg.kill {
                true => db.kill(control, &node).await?,
                false => db.stop(control, &node).await?,
            }
            db.start(control, &node).await?;
            after.insert(node.name.clone(), watch(control, db, &node, WATCH).await?);
            nodes.push(node.name.clone());
        }
        anyhow::ensure!(
            !nodes.is_empty(),
            "no {} server was running on the target to restart",
            db.name()
        );
        Ok(json!({ "nodes": nodes, "after_restart": after }))
    }

    /// Starts any restarted server that is not running; the value lists them.
    async fn stop(&self) -> anyhow::Result<serde_json::Value> {
        let nodes = std::mem::take(&mut *self.hit.lock().unwrap_or_else(|p| p.into_inner()));
        let (control, db) = (&self.control, self.db.as_ref());
        let mut started = Vec::new();
        for node in &nodes {
            if !db.is_running(control, node).await? {
                db.start(control, node).await?;
                started.push(node.name.clone());
            }
        }
        Ok(json!({ "started": started }))
    }
}
