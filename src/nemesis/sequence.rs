//! A sequence of faults (`kind: sequence`): steps run in order by one start, for crash-recovery
//! scenarios that need several faults in a given order (isolate a follower, kill the leader,
//! arm a trigger, heal the partition, ...). A step is a fault (started, left in effect), `heal:
//! <step>` (stops an earlier fault step) or `wait: <duration>`. The stop heals what is still in
//! effect, latest first.
//!
//! The start's value lists every step's outcome (`steps`), the nodes any step acted on
//! (`nodes`), and a `shortfall`: steps that failed, and triggers healed without having fired.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::dice::Dice;
use super::kind::{refuse, Checking, FaultKind, Parts, Refusal};
use super::package::{Aim, FaultConfig};
use super::{HolderView, Nemesis};
use crate::config::Duration;
use crate::control::Control;
use crate::db::Db;

/// The fault kind `sequence`: its steps under `steps:`.
pub struct SequenceKind;

impl SequenceKind {
    /// The steps of `fault`; a sequence without steps is refused.
    fn steps(fault: &FaultConfig) -> Result<Vec<Step>, Refusal> {
        fault
            .section("steps")?
            .ok_or_else(|| refuse("steps", "a sequence needs steps"))
    }
}

impl FaultKind for SequenceKind {
    fn name(&self) -> &'static str {
        "sequence"
    }

    fn settings_key(&self) -> Option<&'static str> {
        Some("steps")
    }

    /// Checks the steps (each fault step as a fault of its own); a sequence's target is its
    /// steps' business.
    fn check(&self, fault: &FaultConfig, checking: &Checking) -> Result<(), Refusal> {
        check(&Self::steps(fault)?, checking.holders, checking.aim)
            .map_err(|e| refuse("steps", format!("steps{e}")))
    }

    fn build(&self, fault: &FaultConfig, parts: Parts) -> anyhow::Result<Arc<dyn Nemesis>> {
        let steps = Self::steps(fault).map_err(|(_, why)| anyhow::anyhow!(why))?;
        Ok(Arc::new(Sequence::new(
            &steps,
            &parts.control,
            parts.db,
            parts.holder,
            &parts.dice,
        )?))
    }

    fn nested(&self, fault: &FaultConfig) -> Vec<FaultConfig> {
        let steps = Self::steps(fault).unwrap_or_default();
        steps
            .into_iter()
            .filter_map(|s| match s {
                Step::Fault(f) => Some(*f),
                _ => None,
            })
            .collect()
    }
}

/// One step of a sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Step {
    /// Wait this long before the next step.
    Wait(WaitStep),
    /// Stop (heal) the fault started at an earlier step, by its index.
    Heal(HealStep),
    /// Wait until the trigger of an earlier step has fired, at most `within`.
    UntilFired(UntilFiredStep),
    /// Start a fault (any kind but a sequence), left in effect until healed.
    Fault(Box<FaultConfig>),
}

/// `wait: <duration>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitStep {
    /// How long.
    pub wait: Duration,
}

/// `heal: <step index>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealStep {
    /// The index (from 0) of the fault step to heal.
    pub heal: usize,
}

/// `until_fired: <step index>, within: <duration>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UntilFiredStep {
    /// The index of a fault step with a trigger.
    pub until_fired: usize,
    /// How long to wait at most.
    pub within: Duration,
}

/// Checks a sequence's steps: at least one fault, each fault valid and no sequence, each heal
/// naming an earlier fault step still in effect. The error names the step and field.
pub fn check(steps: &[Step], holders: bool, aim: Option<&Aim>) -> Result<(), String> {
    if !steps.iter().any(|s| matches!(s, Step::Fault(_))) {
        return Err("a sequence needs at least one fault step".into());
    }
    let mut active = BTreeSet::new();
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Wait(_) => {}
            Step::Fault(f) if f.kind == "sequence" => {
                return Err(format!("[{i}].kind: a sequence cannot hold a sequence"))
            }
            Step::Fault(f) => {
                f.validate(holders, aim)
                    .map_err(|(field, message)| format!("[{i}].{field}: {message}"))?;
                active.insert(i);
            }
            Step::UntilFired(u) => {
                let triggered =
                    matches!(steps.get(u.until_fired), Some(Step::Fault(f)) if f.trigger.is_some());
                if u.until_fired >= i || !triggered {
                    return Err(format!(
                        "[{i}].until_fired: step {} is no fault step with a trigger before it",
                        u.until_fired
                    ));
                }
            }
            Step::Heal(h) => {
                if !active.remove(&h.heal) {
                    return Err(format!(
                        "[{i}].heal: step {} is no fault step before it still in effect",
                        h.heal
                    ));
                }
            }
        }
    }
    Ok(())
}

/// A built step.
enum Built {
    Wait(std::time::Duration),
    Heal(usize),
    UntilFired(usize, std::time::Duration),
    Fault(Arc<dyn Nemesis>),
}

/// The steps of a sequence, run by its start.
pub struct Sequence {
    steps: Vec<Built>,
    active: Mutex<Vec<usize>>,
}

/// A shortfall if a healed fault's value shows a trigger that was armed and never fired.
fn unfired(label: &str, healed: &Value) -> Option<String> {
    let armed = healed.get("armed")?.as_array()?;
    let fired = healed.get("fired")?.as_array()?;
    (!armed.is_empty() && fired.is_empty()).then(|| {
        let names: Vec<&str> = armed.iter().filter_map(Value::as_str).collect();
        format!("{label}: trigger armed on {} never fired", names.join(", "))
    })
}

impl Sequence {
    /// Builds each fault step of `steps` (checked by [`check`]).
    pub fn new(
        steps: &[Step],
        control: &Control,
        db: Arc<dyn Db>,
        holder: Option<Arc<dyn HolderView>>,
        dice: &Dice,
    ) -> anyhow::Result<Sequence> {
        let built = steps
            .iter()
            .enumerate()
            .map(|(i, step)| {
                Ok(match step {
                    Step::Wait(w) => Built::Wait(w.wait.0),
                    Step::Heal(h) => Built::Heal(h.heal),
                    Step::UntilFired(u) => Built::UntilFired(u.until_fired, u.within.0),
                    Step::Fault(f) => Built::Fault(
                        super::build(
                            f,
                            control.clone(),
                            db.clone(),
                            holder.clone(),
                            dice.split(i as u64),
                        )
                        .map_err(|e| anyhow::anyhow!("steps[{i}]: {e:#}"))?,
                    ),
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Sequence {
            steps: built,
            active: Mutex::new(Vec::new()),
        })
    }

    fn fault(&self, i: usize) -> Option<&Arc<dyn Nemesis>> {
        match self.steps.get(i) {
            Some(Built::Fault(n)) => Some(n),
            _ => None,
        }
    }

    fn label(&self, i: usize) -> String {
        match self.fault(i) {
            Some(n) => format!("step {i} ({} on {})", n.kind(), n.target()),
            None => format!("step {i}"),
        }
    }

    /// Heals fault step `i`: its record, and a shortfall if it failed or never fired.
    async fn heal_step(&self, i: usize, shortfall: &mut Vec<String>) -> Value {
        self.active
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|a| *a != i);
        let Some(n) = self.fault(i) else {
            return Value::Null;
        };
        let f = format!("stop-{}", n.kind());
        match n.stop().await {
            Ok(value) => {
                shortfall.extend(unfired(&self.label(i), &value));
                json!({ "step": i, "f": f, "value": value })
            }
            Err(e) => {
                shortfall.push(format!("{}: cannot heal: {e:#}", self.label(i)));
                json!({ "step": i, "f": f, "error": format!("{e:#}") })
            }
        }
    }
}

/// The node names a step's value lists as acted on.
fn acted_on(value: &Value) -> impl Iterator<Item = String> + '_ {
    value
        .get("nodes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|n| n.as_str().map(str::to_string))
}

#[async_trait::async_trait]
impl Nemesis for Sequence {
    fn kind(&self) -> &str {
        "sequence"
    }

    /// Runs every step in order.
    async fn start(&self) -> anyhow::Result<Value> {
        let mut steps = Vec::new();
        let mut shortfall = Vec::new();
        let mut nodes = BTreeSet::new();
        for (i, step) in self.steps.iter().enumerate() {
            match step {
                Built::Wait(d) => tokio::time::sleep(*d).await,
                Built::UntilFired(j, within) => {
                    let began = tokio::time::Instant::now();
                    let fired = loop {
                        let fired = match self.fault(*j) {
                            Some(n) => n.fired().await.unwrap_or(false),
                            None => false,
                        };
                        if fired || began.elapsed() >= *within {
                            break fired;
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    };
                    let waited = began.elapsed().as_millis() as u64;
                    steps.push(
                        json!({ "step": i, "until_fired": j, "fired": fired, "waited_ms": waited }),
                    );
                }
                Built::Heal(j) => {
                    let record = self.heal_step(*j, &mut shortfall).await;
                    nodes.extend(acted_on(&record["value"]));
                    steps.push(record);
                }
                Built::Fault(n) => {
                    self.active
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(i);
                    let f = format!("start-{}", n.kind());
                    match n.start().await {
                        Ok(value) => {
                            nodes.extend(acted_on(&value));
                            steps.push(
                                json!({ "step": i, "f": f, "target": n.target(), "value": value }),
                            );
                        }
                        Err(e) => {
                            shortfall.push(format!("{}: {e:#}", self.label(i)));
                            steps.push(json!({ "step": i, "f": f, "target": n.target(), "error": format!("{e:#}") }));
                        }
                    }
                }
            }
        }
        Ok(json!({ "nodes": nodes, "steps": steps, "shortfall": shortfall }))
    }

    /// Heals the fault steps still in effect, latest first.
    async fn stop(&self) -> anyhow::Result<Value> {
        let active = self
            .active
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut shortfall = Vec::new();
        let mut healed = Vec::new();
        for i in active.into_iter().rev() {
            healed.push(self.heal_step(i, &mut shortfall).await);
        }
        let failed: Vec<&String> = shortfall
            .iter()
            .filter(|s| s.contains("cannot heal"))
            .collect();
        if let Some(first) = failed.first() {
            anyhow::bail!("{first}");
        }
        Ok(json!({ "healed": healed, "shortfall": shortfall }))
    }
}
