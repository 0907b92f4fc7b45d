//! Membership changes (ZooKeeper 3.5+ dynamic reconfiguration, and keeperd's, which follows
//! it): remove voting members, or turn them into observers, then restore the planned
//! membership. Issued through a client session authenticated as the servers' superuser; the
//! live membership is read from `/zookeeper/config`. A change never leaves fewer voters than
//! a majority of the planned ones, and a marker on the nodes tells `stampede heal` to restore
//! the membership after a controller crash.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use serde_json::json;
use zookeeper_client::{Client, EnsembleUpdate};

use super::kind::{self, refuse, Checking, FaultKind, Parts, Refusal};
use super::package::FaultConfig;
use super::target::{SeededTarget, Target};
use super::{Nemesis, Restart};
use crate::control::{Control, Node, Retry};
use crate::db::Db;

/// The fault kind `reconfig`: settings under `reconfig:` ([`ReconfigConfig`]).
pub struct ReconfigKind;

#[async_trait::async_trait]
impl FaultKind for ReconfigKind {
    fn name(&self) -> &'static str {
        "reconfig"
    }

    fn settings_key(&self) -> Option<&'static str> {
        Some("reconfig")
    }

    fn check(&self, fault: &FaultConfig, checking: &Checking) -> Result<(), Refusal> {
        if let (Some(aim), Ok(target)) = (checking.aim, kind::node_target(fault)) {
            check(&target, aim.db).map_err(|(field, why)| refuse(field, why))?;
        }
        kind::check_node_target(fault, checking)?;
        kind::settings::<ReconfigConfig>(fault).map(drop)
    }

    fn build(&self, fault: &FaultConfig, parts: Parts) -> anyhow::Result<Arc<dyn Nemesis>> {
        kind::aimed(fault, parts, |c, db, target, cfg| {
            Ok(ReconfigNemesis::new(c, db, target, cfg))
        })
    }

    /// A membership change counts when the configuration's version moved.
    fn acted(&self, value: &serde_json::Value) -> bool {
        let version = value.get("version_before");
        let moved = version.is_none() || version != value.get("version_after");
        moved && kind::lists_nodes(value)
    }

    async fn holds_server(&self, control: &Control, node: &Node) -> anyhow::Result<bool> {
        is_marked(control, node).await
    }

    /// Restores the planned membership when a node was held for it; before a teardown,
    /// forgets the change instead.
    async fn heal_cluster(
        &self,
        control: &Control,
        db: &dyn Db,
        restart: Restart,
        held: bool,
    ) -> anyhow::Result<()> {
        match restart {
            Restart::Servers if held => restore_planned(control, db).await,
            Restart::Servers => Ok(()),
            Restart::Nothing => forget(control).await,
        }
    }

    fn leftover_probe(&self, node: &Node) -> Option<String> {
        Some(leftover_probe(node))
    }
}

/// How long one session, read or reconfiguration may take.
const REQUEST_LIMIT: Duration = Duration::from_secs(20);

/// How long restoring the membership keeps trying (an election may be under way).
const RESTORE_LIMIT: Duration = Duration::from_secs(60);

/// What a membership change does to the targeted servers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReconfigAction {
    /// Remove them from the ensemble (they keep running as non-voting followers).
    #[default]
    Remove,
    /// Turn them from voting participants into observers.
    Observer,
}

/// A `reconfig` fault's settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReconfigConfig {
    /// Remove the targeted voters, or demote them to observers.
    pub action: ReconfigAction,
}

/// The marker left on a node while its ensemble's membership may differ from the plan.
fn marker(node: &Node) -> String {
    format!("/var/lib/stampede/reconfigured-{}", node.host)
}

/// A shell command that prints `membership change` when a membership change on `node` was
/// started and not undone.
fn leftover_probe(node: &Node) -> String {
    format!("[ -f {} ] && echo 'membership change'; true", marker(node))
}

/// Forgets a membership change on every node (its marker), once the servers it changed are
/// removed: nothing is left to restore.
async fn forget(control: &Control) -> anyhow::Result<()> {
    set_markers(control, control.nodes().to_vec(), false).await
}

/// How many voters a change may take out of `planned`: what leaves a majority voting.
pub fn most_removable(planned: usize) -> usize {
    planned - (planned / 2 + 1)
}

/// Checks before anything starts that `target` can be reconfigured on `db` without taking the
/// ensemble below a majority of its planned voters; the error is a sentence and the field.
pub fn check(target: &Target, db: &dyn Db) -> Result<(), (&'static str, String)> {
    let planned = db.planned_members().len();
    if planned < 3 {
        let why = format!(
            "a reconfig needs an ensemble of 3 or more {} servers; this one has {planned}",
            db.name()
        );
        return Err(("kind", why));
    }
    let hit = match target {
        Target::Minority => ((planned - 1) / 2).max(1),
        Target::Majority => planned / 2 + 1,
        Target::All => planned,
        _ => 1,
    };
    let most = most_removable(planned);
    if hit > most {
        return Err((
            "target",
            format!(
                "target {target} takes {hit} of {planned} voters out; a reconfig may take at \
                 most {most}, leaving a majority of the planned voters"
            ),
        ));
    }
    Ok(())
}

/// A live membership, as `/zookeeper/config` holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Membership {
    /// Server id → `host:quorum:election:role;client`.
    servers: BTreeMap<u64, String>,
    /// The configuration's version (a zxid, in hex).
    version: String,
}

impl Membership {
    fn parse(text: &str) -> anyhow::Result<Membership> {
        let mut servers = BTreeMap::new();
        let mut version = String::new();
        for line in text.lines() {
            if let Some(v) = line.strip_prefix("version=") {
                version = v.trim().to_string();
            } else if let Some((key, spec)) = line.strip_prefix("server.").and_then(|l| {
                let (id, spec) = l.split_once('=')?;
                Some((id.parse::<u64>().ok()?, spec))
            }) {
                servers.insert(key, spec.trim().to_string());
            }
        }
        anyhow::ensure!(
            !servers.is_empty(),
            "no server in the configuration {text:?}"
        );
        Ok(Membership { servers, version })
    }

    /// The ids of the voting members.
    fn voters(&self) -> Vec<u64> {
        let votes = |spec: &String| !spec.split(';').next().unwrap_or("").ends_with(":observer");
        self.servers
            .iter()
            .filter(|(_, spec)| votes(spec))
            .map(|(id, _)| *id)
            .collect()
    }

    /// What turns this membership into `plan`: the `server.N=spec` lines to join, and the ids
    /// to leave.
    fn toward(&self, plan: &BTreeMap<u64, String>) -> (Vec<String>, Vec<String>) {
        let joining = plan
            .iter()
            .filter(|(id, spec)| self.servers.get(id) != Some(spec))
            .map(|(id, spec)| format!("server.{id}={spec}"))
            .collect();
        let leaving = self
            .servers
            .keys()
            .filter(|id| !plan.contains_key(id))
            .map(u64::to_string)
            .collect();
        (joining, leaving)
    }
}

/// The database's plan: server id → (node, spec).
fn plan(db: &dyn Db) -> BTreeMap<u64, (Node, String)> {
    (1..).zip(db.planned_members()).collect()
}

fn specs(plan: &BTreeMap<u64, (Node, String)>) -> BTreeMap<u64, String> {
    plan.iter().map(|(id, (_, s))| (*id, s.clone())).collect()
}

fn names(plan: &BTreeMap<u64, (Node, String)>, ids: &[u64]) -> Vec<String> {
    ids.iter()
        .filter_map(|id| plan.get(id).map(|(n, _)| n.name.clone()))
        .collect()
}

/// A session to the planned servers, authenticated as the database's superuser.
async fn session(db: &dyn Db) -> anyhow::Result<Client> {
    let hosts: Vec<String> = db
        .planned_members()
        .iter()
        .map(|(n, _)| db.client_address(n))
        .collect();
    let hosts = hosts.join(",");
    let mut connector = Client::connector().with_session_timeout(Duration::from_secs(10));
    if let Some(user) = db.superuser() {
        connector = connector.with_auth("digest", user.as_bytes());
    }
    tokio::time::timeout(REQUEST_LIMIT, connector.connect(&hosts))
        .await
        .map_err(|_| anyhow::anyhow!("no session to {hosts} within {REQUEST_LIMIT:?}"))?
        .with_context(|| format!("connecting to {hosts}"))
}

/// The live membership, read through a fresh session after a `sync`, so that a server that
/// has not applied the last reconfiguration yet does not answer with the one before.
async fn live(db: &dyn Db) -> anyhow::Result<Membership> {
    let client = session(db).await?;
    let read = async {
        client.sync("/zookeeper/config").await?;
        client.get_config().await
    };
    let (data, _) = tokio::time::timeout(REQUEST_LIMIT, read)
        .await
        .map_err(|_| anyhow::anyhow!("reading /zookeeper/config took over {REQUEST_LIMIT:?}"))?
        .context("reading /zookeeper/config")?;
    Membership::parse(&String::from_utf8_lossy(&data))
}

/// The live membership from the first read that succeeds within `limit`: right after a change
/// the servers may be electing, and a removed keeperd leader drops its sessions.
async fn live_within(db: &dyn Db, limit: Duration) -> anyhow::Result<Membership> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match live(db).await {
            Ok(membership) => return Ok(membership),
            Err(e) if tokio::time::Instant::now() >= deadline => return Err(e),
            Err(e) => tracing::debug!("reading the membership again: {e:#}"),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Sends one incremental reconfiguration. Its reply may be lost (a removed leader drops its
/// sessions): the caller reads the membership again to learn what happened.
async fn reconfigure(db: &dyn Db, joining: &[String], leaving: &[String]) -> anyhow::Result<()> {
    let client = session(db).await?;
    let update = EnsembleUpdate::Incremental {
        joinings: joining.iter().map(String::as_str),
        leavings: leaving.iter().map(String::as_str),
    };
    tokio::time::timeout(REQUEST_LIMIT, client.update_ensemble(update, None))
        .await
        .map_err(|_| anyhow::anyhow!("the reconfiguration took over {REQUEST_LIMIT:?}"))?
        .context("reconfiguring")
        .map(drop)
}

/// Puts `marker`s on (or, `present` false, removes them from) every planned server's node.
async fn mark(control: &Control, db: &dyn Db, present: bool) -> anyhow::Result<()> {
    let nodes = db.planned_members().into_iter().map(|(node, _)| node);
    set_markers(control, nodes.collect(), present).await
}

/// Puts the marker of a membership change on `nodes` (`present`), or removes it.
async fn set_markers(control: &Control, nodes: Vec<Node>, present: bool) -> anyhow::Result<()> {
    let marks = nodes.into_iter().map(|node| async move {
        let file = marker(&node);
        let cmd = match present {
            true => format!("mkdir -p /var/lib/stampede && touch {file}"),
            false => format!("rm -f {file}"),
        };
        control.exec(&node, &cmd, Retry::Idempotent).await
    });
    for result in futures::future::join_all(marks).await {
        result?;
    }
    Ok(())
}

/// Restores the planned membership: reconfigures back the servers that are missing or
/// observers, and restarts (with the planned configuration) a set-up server that is not
/// running, which a removal would have kept from starting. Returns what it did.
async fn restore(control: &Control, db: &dyn Db) -> anyhow::Result<serde_json::Value> {
    let plan = plan(db);
    let wanted = specs(&plan);
    let deadline = tokio::time::Instant::now() + RESTORE_LIMIT;
    let mut first: Option<Membership> = None;
    let after = loop {
        let sent = match live(db).await {
            Ok(now) => {
                first.get_or_insert_with(|| now.clone());
                let (joining, leaving) = now.toward(&wanted);
                if joining.is_empty() && leaving.is_empty() {
                    break now;
                }
                reconfigure(db, &joining, &leaving).await
            }
            Err(e) => Err(e),
        };
        let late = tokio::time::Instant::now() >= deadline;
        match sent {
            Err(e) if late => return Err(e.context("the planned membership was not restored")),
            Err(e) => tracing::debug!("restoring the membership: {e:#}"),
            Ok(()) if late => bail!("the planned membership was not restored in {RESTORE_LIMIT:?}"),
            Ok(()) => continue,
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let restarts = plan.values().map(|(node, _)| async move {
        if db.is_set_up(control, node).await? && !db.is_running(control, node).await? {
            db.restore_config(control, node).await?;
            db.start(control, node).await?;
            return anyhow::Ok(Some(node.clone()));
        }
        Ok(None)
    });
    let mut restarted = Vec::new();
    for result in futures::future::join_all(restarts).await {
        restarted.extend(result?);
    }
    if !restarted.is_empty() {
        let nodes: Vec<Node> = plan.values().map(|(n, _)| n.clone()).collect();
        crate::db::wait_until_serving(db, &nodes, RESTORE_LIMIT).await?;
    }
    mark(control, db, false).await?;
    let first = first.unwrap_or_else(|| after.clone());
    let ids: Vec<u64> = wanted
        .iter()
        .filter(|(id, spec)| first.servers.get(id) != Some(spec))
        .map(|(id, _)| *id)
        .collect();
    Ok(json!({
        "nodes": names(&plan, &ids),
        "restarted": restarted.iter().map(|n| n.name.clone()).collect::<Vec<_>>(),
        "version_before": first.version,
        "version_after": after.version,
        "voters": names(&plan, &after.voters()),
    }))
}

/// Restores the planned membership after a membership change that was started and not
/// undone (its marker found on a node by [`is_marked`]): the heal after a controller crash.
async fn restore_planned(control: &Control, db: &dyn Db) -> anyhow::Result<()> {
    restore(control, db).await.map(|_| ())
}

/// Whether `node` carries the marker of a membership change not undone: its stopped server
/// is then started by [`restore_planned`] once the planned membership is back (its own
/// configuration may leave it out until then), not by the general heal.
async fn is_marked(control: &Control, node: &Node) -> anyhow::Result<bool> {
    let cmd = format!("test -f {} && echo yes || true", marker(node));
    Ok(control.exec(node, &cmd, Retry::Idempotent).await? == "yes")
}

/// Removes voters or demotes them to observers while active; stopping restores the plan.
pub struct ReconfigNemesis {
    control: Control,
    db: Arc<dyn Db>,
    target: SeededTarget,
    cfg: ReconfigConfig,
    /// Whether a start marked the nodes, so that the stop has a membership to restore.
    marked: std::sync::atomic::AtomicBool,
}

impl ReconfigNemesis {
    /// A membership change `cfg` of the servers `target` picks at each start.
    pub fn new(
        control: Control,
        db: Arc<dyn Db>,
        target: SeededTarget,
        cfg: ReconfigConfig,
    ) -> ReconfigNemesis {
        ReconfigNemesis {
            control,
            db,
            target,
            cfg,
            marked: Default::default(),
        }
    }

    /// The change that takes `ids` out of the voters: `(joining, leaving)`.
    fn change(
        &self,
        plan: &BTreeMap<u64, (Node, String)>,
        ids: &[u64],
    ) -> (Vec<String>, Vec<String>) {
        match self.cfg.action {
            ReconfigAction::Remove => (Vec::new(), ids.iter().map(u64::to_string).collect()),
            ReconfigAction::Observer => {
                let observer = |spec: &str| spec.replacen(":participant;", ":observer;", 1);
                let joining = ids
                    .iter()
                    .map(|id| format!("server.{id}={}", observer(&plan[id].1)))
                    .collect();
                (joining, Vec::new())
            }
        }
    }
}

#[async_trait::async_trait]
impl Nemesis for ReconfigNemesis {
    fn kind(&self) -> &str {
        "reconfig"
    }

    fn target(&self) -> String {
        self.target.to_string()
    }

    /// Changes the membership of the picked servers, once the live membership is the plan;
    /// fails unless the new membership shows the change. The value records the membership
    /// before and after, with the configuration versions, and how long the reconfiguration
    /// request took (session included).
    async fn start(&self) -> anyhow::Result<serde_json::Value> {
        let db = self.db.as_ref();
        let plan = plan(db);
        let before = live(db).await?;
        anyhow::ensure!(
            before.servers == specs(&plan),
            "the membership is not the planned one (version {}): {:?}",
            before.version,
            before.servers
        );
        let picked = self.target.pick(self.control.nodes(), db).await?;
        let ids: Vec<u64> = plan
            .iter()
            .filter(|(_, (n, _))| picked.iter().any(|p| p.name == n.name))
            .map(|(id, _)| *id)
            .collect();
        anyhow::ensure!(
            !ids.is_empty() && ids.len() <= most_removable(plan.len()),
            "target {} picked {} of {} voters; a reconfig takes out 1 to {}",
            self.target,
            ids.len(),
            plan.len(),
            most_removable(plan.len())
        );
        mark(&self.control, db, true).await?;
        self.marked.store(true, Ordering::SeqCst);
        let (joining, leaving) = self.change(&plan, &ids);
        let sending = std::time::Instant::now();
        let sent = reconfigure(db, &joining, &leaving).await;
        let reconfig_ms = sending.elapsed().as_millis() as u64;
        let after = live_within(db, REQUEST_LIMIT).await?;
        let took = ids.iter().all(|id| !after.voters().contains(id));
        if !took {
            let why = sent.err().map(|e| format!(": {e:#}")).unwrap_or_default();
            bail!(
                "the membership did not change (version {}){why}",
                after.version
            );
        }
        Ok(json!({
            "action": self.cfg.action,
            "nodes": names(&plan, &ids),
            "version_before": before.version,
            "version_after": after.version,
            "voters_before": names(&plan, &before.voters()),
            "voters_after": names(&plan, &after.voters()),
            "reconfig_ms": reconfig_ms,
        }))
    }

    /// Restores the planned membership after a start that marked the nodes (a no-op
    /// otherwise: nothing was changed).
    async fn stop(&self) -> anyhow::Result<serde_json::Value> {
        if !self.marked.load(Ordering::SeqCst) {
            return Ok(json!({ "nodes": [] }));
        }
        let restored = restore(&self.control, self.db.as_ref()).await?;
        self.marked.store(false, Ordering::SeqCst);
        Ok(restored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::zookeeper::{ZkConfig, ZooKeeper};

    const LIVE: &str = "server.1=10.0.0.1:2888:3888:participant;10.0.0.1:2181\n\
                        server.2=10.0.0.2:2888:3888:observer;10.0.0.2:2181\n\
                        version=20000000a";

    #[test]
    fn a_live_membership_is_read_with_its_voters() {
        let m = Membership::parse(LIVE).unwrap();
        assert_eq!(m.version, "20000000a");
        assert_eq!(m.voters(), [1]);
        assert!(Membership::parse("version=1\n").is_err());
    }

    #[test]
    fn the_way_back_joins_missing_servers_and_observers_and_removes_strangers() {
        let m = Membership::parse(&format!(
            "{LIVE}\nserver.9=10.0.0.9:2888:3888:participant;10.0.0.9:2181\n"
        ))
        .unwrap();
        let db = ZooKeeper::new(ZkConfig::default(), crate::control::test_nodes(3));
        let (joining, leaving) = m.toward(&specs(&plan(&db)));
        assert_eq!(
            joining,
            [
                "server.2=10.0.0.2:2888:3888:participant;10.0.0.2:2181",
                "server.3=10.0.0.3:2888:3888:participant;10.0.0.3:2181"
            ]
        );
        assert_eq!(leaving, ["9"]);
        let planned = Membership {
            servers: specs(&plan(&db)),
            version: String::new(),
        };
        assert_eq!(
            planned.toward(&specs(&plan(&db))),
            (vec![], vec![]),
            "the plan needs nothing"
        );
    }

    #[test]
    fn no_target_may_leave_less_than_a_majority_of_the_planned_voters() {
        let zk = |n| ZooKeeper::new(ZkConfig::default(), crate::control::test_nodes(n));
        let target = |t: &str| t.parse::<Target>().unwrap();
        for t in ["one", "minority", "leader", "follower", "n2"] {
            assert_eq!(check(&target(t), &zk(3)), Ok(()), "{t}");
        }
        assert_eq!(
            check(&target("majority"), &zk(3)),
            Err((
                "target",
                "target majority takes 2 of 3 voters out; a reconfig may take at most 1, \
                 leaving a majority of the planned voters"
                    .to_string()
            ))
        );
        assert_eq!(check(&target("all"), &zk(5)).unwrap_err().0, "target");
        assert_eq!(check(&target("minority"), &zk(5)), Ok(()));
        assert_eq!(check(&target("one"), &zk(1)).unwrap_err().0, "kind");
        let keeperd = |n| {
            let nodes = crate::control::test_nodes(n);
            crate::db::keeperd::Keeperd::new(Default::default(), &nodes).unwrap()
        };
        assert_eq!(
            check(&target("leader"), &keeperd(3)),
            Ok(()),
            "keeperd reconfigures"
        );
        assert_eq!(
            check(&target("majority"), &keeperd(3)).unwrap_err().0,
            "target"
        );
        assert_eq!(most_removable(3), 1);
        assert_eq!(most_removable(4), 1);
        assert_eq!(most_removable(5), 2);
    }

    #[test]
    fn config_reads_actions_and_rejects_unknown_keys() {
        let cfg: ReconfigConfig = serde_yaml_ng::from_str("action: observer\n").unwrap();
        assert_eq!(cfg.action, ReconfigAction::Observer);
        assert_eq!(
            serde_yaml_ng::from_str::<ReconfigConfig>("{}")
                .unwrap()
                .action,
            ReconfigAction::Remove
        );
        assert!(serde_yaml_ng::from_str::<ReconfigConfig>("action: shrink\n").is_err());
        assert!(serde_yaml_ng::from_str::<ReconfigConfig>("count: 1\n").is_err());
    }
}
