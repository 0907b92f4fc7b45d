//! A fault kind as the harness knows it: what a package may say of it, how it is checked and
//! built, what it leaves on a node and how that is healed, how its band is coloured and its
//! starts are counted. Each kind implements [`FaultKind`] in a file of its own and has one
//! line in the registry ([`KINDS`](super::KINDS)); the package loader, the heal, the checker
//! of exposure and the plots find it there by name and know no particular kind.

use std::sync::Arc;

use serde_json::Value;

use super::dice::Dice;
use super::package::{Aim, FaultConfig};
use super::target::{SeededTarget, Target};
use super::trigger::Triggered;
use super::{HolderView, Nemesis};
use crate::control::{Control, Node};
use crate::db::Db;

/// What the checks of a fault see besides the fault.
pub struct Checking<'a> {
    /// Whether the workload has lock holders or leaders (for the partition target `holder`).
    pub holders: bool,
    /// The nodes and database the package is aimed at, when known.
    pub aim: Option<&'a Aim<'a>>,
}

/// What a fault is built from.
pub struct Parts {
    /// The nodes under control.
    pub control: Control,
    /// The database on them.
    pub db: Arc<dyn Db>,
    /// Who holds a lock or leads, for workloads that have holders.
    pub holder: Option<Arc<dyn HolderView>>,
    /// The fault's random choices (its targets' picks among them).
    pub dice: Dice,
}

/// When in the heal of one node a kind's own heal runs. Machines come first (every other heal
/// needs the node answering), then log triggers are disarmed (so that a drop they fire cannot
/// land after the network's heal), then the rest in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HealStage {
    /// The machine itself (power).
    Machine,
    /// Packet rules and queues.
    Network,
    /// Clocks.
    Clock,
    /// The server process (a paused one resumed).
    Process,
    /// Data files.
    Files,
}

/// Why a fault is refused: the field at fault (`target`, `netem`, `clock.period`) and a
/// sentence.
pub type Refusal = (String, String);

/// A refusal of `field`.
pub fn refuse(field: &str, why: impl Into<String>) -> Refusal {
    (field.to_string(), why.into())
}

/// What a kind's heal of one node says it did, if anything.
pub type Healed = anyhow::Result<Option<&'static str>>;

/// The colour of a kind that does not choose one.
pub const SHARED_COLOUR: (u8, u8, u8) = (140, 86, 75);

/// One fault kind. Only [`name`](FaultKind::name) and [`build`](FaultKind::build) are
/// required: a kind that takes no settings, aims at nodes like most kinds (`one`, `leader`,
/// `n3`, …), names the nodes it acted on as `nodes` in its start's value and leaves nothing
/// that the generic heal (restarting stopped servers) does not clear needs nothing more.
#[async_trait::async_trait]
pub trait FaultKind: Sync {
    /// Its name: `kind:` in a package, `start-<name>` in a history.
    fn name(&self) -> &'static str;

    /// Its noun in a verdict line, in the singular (`2 kills`, `1 clock fault`).
    fn noun(&self) -> String {
        format!("{} fault", self.name())
    }

    /// The colour of its bands in the plots and the timeline.
    fn colour(&self) -> (u8, u8, u8) {
        SHARED_COLOUR
    }

    /// The key of its settings in a package's fault (`netem:` for `packet`), if it takes any.
    fn settings_key(&self) -> Option<&'static str> {
        None
    }

    /// What a log trigger fires for it, if it takes a `trigger:`.
    fn triggered(&self) -> Option<Triggered> {
        None
    }

    /// Checks its target and settings before anything starts (the trigger, the settings key
    /// and the kind's name are checked before); the refusal names the field.
    fn check(&self, fault: &FaultConfig, checking: &Checking) -> Result<(), Refusal> {
        check_node_target(fault, checking)
    }

    /// Builds the nemesis `fault` describes (without its trigger; a triggered fault is built
    /// by the trigger's own nemesis from [`triggered`](FaultKind::triggered)).
    fn build(&self, fault: &FaultConfig, parts: Parts) -> anyhow::Result<Arc<dyn Nemesis>>;

    /// The faults it holds (a sequence's steps), for what a package needs of the database.
    fn nested(&self, _fault: &FaultConfig) -> Vec<FaultConfig> {
        Vec::new()
    }

    /// The database its runs need (the database on a layer that can lose unsynced writes),
    /// given the one they would use.
    fn prepare_db(&self, db: Arc<dyn Db>) -> Arc<dyn Db> {
        db
    }

    /// Whether a start's completion value says it acted on a node running the database.
    fn acted(&self, value: &Value) -> bool {
        lists_nodes(value)
    }

    /// When in a node's heal its own heal runs, if it has one.
    fn heal_stage(&self) -> Option<HealStage> {
        None
    }

    /// Undoes what a start of this kind may have left on `node`, whatever the controller
    /// knows (after a crash too); says what it did, if anything.
    async fn heal_node(&self, _control: &Control, _db: &dyn Db, _node: &Node) -> Healed {
        Ok(None)
    }

    /// Whether it keeps `node`'s server stopped on purpose until its
    /// [`heal_cluster`](FaultKind::heal_cluster) (a membership change that left it out):
    /// the generic heal then does not start it.
    async fn holds_server(&self, _control: &Control, _node: &Node) -> anyhow::Result<bool> {
        Ok(false)
    }

    /// Heals what it did to the cluster as a whole, after every node's heal: `held` says
    /// whether a node's server was held for it, `restart` whether servers are being started
    /// again (a run's heal) or about to be removed (the heal before a teardown).
    async fn heal_cluster(
        &self,
        _control: &Control,
        _db: &dyn Db,
        _restart: super::Restart,
        _held: bool,
    ) -> anyhow::Result<()> {
        Ok(())
    }

    /// A shell command that prints one phrase per thing of this kind left on `node` (e.g.
    /// `partition rules`), nothing when there is none.
    fn leftover_probe(&self, _node: &Node) -> Option<String> {
        None
    }
}

/// Whether a start's value lists the nodes it acted on (`nodes`, not empty).
pub fn lists_nodes(value: &Value) -> bool {
    value
        .get("nodes")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

/// Whether a start's value lists the nodes it acted on (`nodes`), or when it has no such list,
/// maps some node to a non-empty list under `key` (a partition's older `grudge`, a slow
/// partition's `slow`).
pub fn lists_or_maps_nodes(value: &Value, key: &str) -> bool {
    if value.get("nodes").is_some() {
        return lists_nodes(value);
    }
    value.get(key).and_then(Value::as_object).is_some_and(|m| {
        m.values()
            .any(|v| v.as_array().is_some_and(|a| !a.is_empty()))
    })
}

/// The target of a fault aimed at nodes, parsed.
pub fn node_target(fault: &FaultConfig) -> anyhow::Result<Target> {
    fault.target.parse()
}

/// Checks the target of a fault aimed at nodes (`one`, `leader`, `n3`, …) against the nodes
/// running the database.
pub fn check_node_target(fault: &FaultConfig, checking: &Checking) -> Result<(), Refusal> {
    if fault.target == "holder" {
        return Err(refuse("target", "target holder is for partitions only"));
    }
    let target = node_target(fault).map_err(|e| refuse("target", format!("{e:#}")))?;
    check_aim(&target, checking)
}

/// Checks a fault that cuts the servers its target picks off from the others (`what`, as in
/// `a one-way partition`): two servers at least, and a target other than `all`, which is
/// refused with `all_refused`; then the target as [`check_node_target`] does.
pub fn check_cut_off(
    fault: &FaultConfig,
    checking: &Checking,
    what: &str,
    all_refused: &str,
) -> Result<(), Refusal> {
    if let Some(aim) = checking.aim {
        super::grudge::between_servers(aim.db, aim.nodes, what)
            .map_err(|e| refuse("kind", format!("{e:#}")))?;
    }
    if fault.target == "all" {
        return Err(refuse("target", all_refused));
    }
    check_node_target(fault, checking)
}

/// Checks that `target` can reach a node running the database of `checking`'s aim.
pub fn check_aim(target: &Target, checking: &Checking) -> Result<(), Refusal> {
    let Some(aim) = checking.aim else {
        return Ok(());
    };
    let servers = crate::db::servers(aim.db, aim.nodes);
    target
        .check(aim.nodes, &servers, aim.db.name())
        .map_err(|e| refuse("target", e))
}

/// The settings of `fault` under its kind's key as `T` (the defaults when absent, or when the
/// kind takes none); the refusal names the field.
pub fn settings<T: serde::de::DeserializeOwned + Default>(
    fault: &FaultConfig,
) -> Result<T, Refusal> {
    match fault.entry()?.settings_key() {
        Some(key) => fault.section(key).map(Option::unwrap_or_default),
        None => Ok(T::default()),
    }
}

/// Builds a fault aimed at nodes: `make` gets the parts, the target and the kind's settings
/// (`()` for a kind without settings).
pub fn aimed<T, N>(
    fault: &FaultConfig,
    parts: Parts,
    make: impl FnOnce(Control, Arc<dyn Db>, SeededTarget, T) -> anyhow::Result<N>,
) -> anyhow::Result<Arc<dyn Nemesis>>
where
    T: serde::de::DeserializeOwned + Default,
    N: Nemesis + 'static,
{
    let settings = settings(fault).map_err(|(field, why)| anyhow::anyhow!("{field}: {why}"))?;
    let target = SeededTarget::new(node_target(fault)?, parts.dice);
    Ok(Arc::new(make(parts.control, parts.db, target, settings)?))
}
