//! Flapping partitions (`kind: flapping-partition`, settings under `flap:`): the servers a
//! target picks are cut off from the other servers for `on`, then joined again for `off`, over
//! and over while the fault lasts. Each side drops the other's packets with the partition
//! kind's iptables rules (so its heal and leftover probe clear them too); the controller's
//! clients reach every server throughout. A
//! link that keeps coming back re-runs elections and follower syncs one after another, the
//! shape ZOOKEEPER-4409 (an NPE in the follower's ack processor under flapping links) needs.

use std::sync::{Arc, Mutex};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::kind::{self, refuse, Checking, FaultKind, Parts, Refusal};
use super::package::FaultConfig;
use super::partition;
use super::target::SeededTarget;
use super::Nemesis;
use crate::config::Duration;
use crate::control::{Control, Node, Retry};
use crate::db::Db;

/// The fault kind `flapping-partition`.
pub struct FlapKind;

/// A flapping partition's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FlapConfig {
    /// How long each cut lasts (default 1 s).
    pub on: Duration,
    /// How long the link is back between cuts (default 1 s).
    pub off: Duration,
}

impl Default for FlapConfig {
    fn default() -> Self {
        let second = Duration(std::time::Duration::from_secs(1));
        FlapConfig {
            on: second,
            off: second,
        }
    }
}

#[async_trait::async_trait]
impl FaultKind for FlapKind {
    fn name(&self) -> &'static str {
        "flapping-partition"
    }

    fn noun(&self) -> String {
        "flapping partition".into()
    }

    fn colour(&self) -> (u8, u8, u8) {
        (219, 219, 141)
    }

    fn settings_key(&self) -> Option<&'static str> {
        Some("flap")
    }

    /// Two servers at least, a target that leaves some server on the other side, and cuts
    /// and gaps that last.
    fn check(&self, fault: &FaultConfig, checking: &Checking) -> Result<(), Refusal> {
        kind::check_cut_off(
            fault,
            checking,
            "a flapping partition",
            "target all leaves no server on the other side; give one, minority, leader, \
             follower or a node",
        )?;
        let flap = kind::settings::<FlapConfig>(fault)?;
        if flap.on.0.is_zero() || flap.off.0.is_zero() {
            return Err(refuse("flap", "on and off must each be above zero"));
        }
        Ok(())
    }

    fn build(&self, fault: &FaultConfig, parts: Parts) -> anyhow::Result<Arc<dyn Nemesis>> {
        kind::aimed(fault, parts, |control, db, target, flap| {
            Ok(Flapping {
                control,
                db,
                target,
                flap,
                running: Mutex::new(None),
            })
        })
    }
}

/// The two sides of a flapping partition: each node with the names of the servers whose
/// packets it drops while the link is cut.
type Sides = Vec<(Node, Vec<String>)>;

/// A flapping under way: the signal that ends it and the task counting its cuts.
struct Running {
    end: watch::Sender<bool>,
    task: JoinHandle<anyhow::Result<u64>>,
    nodes: Vec<String>,
}

/// Cuts the targeted servers off from the others and joins them again, in turn, while active.
struct Flapping {
    control: Control,
    db: Arc<dyn Db>,
    target: SeededTarget,
    flap: FlapConfig,
    running: Mutex<Option<Running>>,
}

impl Flapping {
    /// Who drops whose packets: the picked servers the others', the others the picked ones'.
    async fn sides(&self) -> anyhow::Result<(Vec<String>, Sides)> {
        let (inside, outside) = self
            .target
            .pick_apart(self.control.nodes(), self.db.as_ref(), "on the other side")
            .await?;
        let names = |side: &[Node]| side.iter().map(|n| n.name.clone()).collect::<Vec<_>>();
        let (inside_names, outside_names) = (names(&inside), names(&outside));
        let mut sides: Sides = inside
            .into_iter()
            .map(|n| (n, outside_names.clone()))
            .collect();
        sides.extend(outside.into_iter().map(|n| (n, inside_names.clone())));
        Ok((inside_names, sides))
    }
}

/// Cuts the link (`cut`) or joins it again on every node of `sides`.
async fn set_link(control: &Control, sides: &Sides, cut: bool) -> anyhow::Result<()> {
    let commands = sides.iter().map(|(node, dropped)| {
        let dropped: Vec<&String> = dropped.iter().collect();
        let command = match cut {
            true => partition::drop_command(control.nodes(), &dropped),
            false => partition::HEAL_COMMAND.to_string(),
        };
        async move { control.exec(node, &command, Retry::Idempotent).await }
    });
    for result in futures::future::join_all(commands).await {
        result.context("cannot set the flapping partition's rules")?;
    }
    Ok(())
}

/// Flaps the link of `sides` (cut at first) until `end` turns true, leaving it joined; returns
/// how many cuts were made.
async fn flap(
    control: Control,
    sides: Sides,
    flap: FlapConfig,
    mut end: watch::Receiver<bool>,
) -> anyhow::Result<u64> {
    let mut cuts = 1;
    loop {
        for (cut, hold) in [(false, flap.on.0), (true, flap.off.0)] {
            tokio::select! {
                _ = end.wait_for(|end| *end) => return Ok(cuts),
                _ = tokio::time::sleep(hold) => {}
            }
            set_link(&control, &sides, cut).await?;
            cuts += u64::from(cut);
        }
    }
}

#[async_trait::async_trait]
impl Nemesis for Flapping {
    fn kind(&self) -> &str {
        FlapKind.name()
    }

    fn target(&self) -> String {
        self.target.to_string()
    }

    /// Makes the first cut; the value lists the nodes cut off (`nodes`).
    async fn start(&self) -> anyhow::Result<serde_json::Value> {
        let (nodes, sides) = self.sides().await?;
        set_link(&self.control, &sides, true).await?;
        let (end, ended) = watch::channel(false);
        let task = tokio::spawn(flap(self.control.clone(), sides, self.flap, ended));
        let value = json!({
            "nodes": nodes,
            "on_ms": self.flap.on.0.as_millis() as u64,
            "off_ms": self.flap.off.0.as_millis() as u64,
        });
        let running = Running { end, task, nodes };
        *self.running.lock().unwrap_or_else(|p| p.into_inner()) = Some(running);
        Ok(value)
    }

    /// Ends the flapping and removes every rule; the value says how many cuts were made.
    async fn stop(&self) -> anyhow::Result<serde_json::Value> {
        let running = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let (cuts, nodes, flapped) = match running {
            Some(Running { end, task, nodes }) => {
                let _ = end.send(true);
                let flapped = task.await.map_err(anyhow::Error::from).and_then(|r| r);
                (flapped.as_ref().ok().copied(), nodes, flapped.err())
            }
            None => (None, Vec::new(), None),
        };
        let heals = self.control.nodes().iter().map(|n| {
            self.control
                .exec(n, partition::HEAL_COMMAND, Retry::Idempotent)
        });
        for result in futures::future::join_all(heals).await {
            result.context("cannot heal the flapping partition")?;
        }
        if let Some(e) = flapped {
            return Err(e.context("the flapping stopped early"));
        }
        Ok(json!({ "nodes": nodes, "cuts": cuts }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_default_to_a_second_each_and_zero_is_refused() {
        let parse = |yaml: &str| serde_yaml_ng::from_str::<FaultConfig>(yaml).unwrap();
        let checking = Checking {
            holders: false,
            aim: None,
        };
        let plain = parse("{kind: flapping-partition, target: leader}");
        assert_eq!(FlapKind.check(&plain, &checking), Ok(()));
        assert_eq!(
            kind::settings::<FlapConfig>(&plain).unwrap(),
            FlapConfig::default()
        );
        let zero = parse("{kind: flapping-partition, target: one, flap: {on: 0s, off: 1s}}");
        let refused = FlapKind.check(&zero, &checking).unwrap_err();
        assert_eq!(refused.0, "flap", "{refused:?}");
        let all = parse("{kind: flapping-partition, target: all}");
        assert_eq!(FlapKind.check(&all, &checking).unwrap_err().0, "target");
    }
}
