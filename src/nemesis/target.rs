//! Which nodes a fault hits.

use std::fmt;
use std::str::FromStr;

use anyhow::bail;
use rand::seq::SliceRandom;

use super::dice::Dice;
use crate::control::{Control, Node};
use crate::db::{self, Db};

/// How long a fault aimed at the leader waits for one (an election may be under way).
const LEADER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The leader among `nodes`, waiting up to `limit` for one to be elected.
async fn leader_within(db: &dyn Db, nodes: &[Node], limit: std::time::Duration) -> Option<Node> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(leader) = db::leader(db, nodes).await {
            return Some(leader);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

/// A choice of nodes, made when the fault starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One node at random.
    One,
    /// A random minority (fewer than half).
    Minority,
    /// A random majority.
    Majority,
    /// Every node.
    All,
    /// The node that leads at the time.
    Leader,
    /// One node that does not lead at the time, at random.
    Follower,
    /// A node by name.
    Named(String),
}

impl FromStr for Target {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Target> {
        Ok(match s {
            "one" => Target::One,
            "minority" => Target::Minority,
            "majority" => Target::Majority,
            "all" => Target::All,
            "leader" => Target::Leader,
            "follower" => Target::Follower,
            "" => bail!("empty target"),
            name => Target::Named(name.to_string()),
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::One => f.write_str("one"),
            Target::Minority => f.write_str("minority"),
            Target::Majority => f.write_str("majority"),
            Target::All => f.write_str("all"),
            Target::Leader => f.write_str("leader"),
            Target::Follower => f.write_str("follower"),
            Target::Named(n) => f.write_str(n),
        }
    }
}

impl Target {
    /// Checks, before anything starts, that the target can pick a node running the database:
    /// a named node must be one of `servers` (the nodes of `nodes` running `db_name`), and a
    /// follower needs two servers. The error is a sentence naming what is wrong.
    pub fn check(&self, nodes: &[Node], servers: &[Node], db_name: &str) -> Result<(), String> {
        let names = |list: &[Node]| {
            list.iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Target::Named(name) if !nodes.iter().any(|n| &n.name == name) => Err(format!(
                "unknown target {name:?}: not a node (nodes: {}) nor one of {}",
                names(nodes),
                Target::WORDS.join(", ")
            )),
            Target::Named(name) if !servers.iter().any(|n| &n.name == name) => Err(format!(
                "target {name:?} runs no {db_name} server ({db_name} runs on {})",
                names(servers)
            )),
            Target::Follower if servers.len() < 2 => Err(format!(
                "target follower needs two {db_name} servers; {db_name} runs on {} alone",
                names(servers)
            )),
            _ => Ok(()),
        }
    }

    /// The words a target can be besides a node name.
    pub const WORDS: [&'static str; 6] =
        ["one", "minority", "majority", "all", "leader", "follower"];

    /// Picks among the nodes running the database, asking it for the leader where needed (a
    /// lone standalone server counts as the leader); a random choice is drawn from `dice`.
    pub async fn pick_with(
        &self,
        nodes: &[Node],
        db: &dyn Db,
        dice: &Dice,
    ) -> anyhow::Result<Vec<Node>> {
        let servers = db::servers(db, nodes);
        anyhow::ensure!(!servers.is_empty(), "no node runs {}", db.name());
        let nodes = servers.as_slice();
        let mut shuffled = nodes.to_vec();
        dice.roll(|rng| shuffled.shuffle(rng));
        let n = nodes.len();
        Ok(match self {
            Target::One => shuffled[..1.min(n)].to_vec(),
            Target::Minority => shuffled[..(n.saturating_sub(1) / 2).max(1).min(n)].to_vec(),
            Target::Majority => shuffled[..(n / 2 + 1).min(n)].to_vec(),
            Target::All => nodes.to_vec(),
            Target::Leader => match leader_within(db, nodes, LEADER_WAIT).await {
                Some(leader) => vec![leader],
                None => bail!(
                    "target leader: no node led within {} s",
                    LEADER_WAIT.as_secs()
                ),
            },
            Target::Follower => {
                let leader = db::leader(db, nodes).await;
                let others: Vec<&Node> = shuffled
                    .iter()
                    .filter(|n| Some(*n) != leader.as_ref())
                    .collect();
                match others.first() {
                    Some(node) => vec![(*node).clone()],
                    None => bail!("target follower: every node leads"),
                }
            }
            Target::Named(name) => match nodes.iter().find(|n| &n.name == name) {
                Some(node) => vec![node.clone()],
                None => {
                    let known: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
                    bail!(
                        "target {name:?}: no {} server on such a node (servers: {}; or {})",
                        db.name(),
                        known.join(", "),
                        Target::WORDS.join(", ")
                    )
                }
            },
        })
    }
}

/// A fault's target with the dice it picks its nodes with.
#[derive(Debug, Clone)]
pub struct SeededTarget {
    target: Target,
    dice: Dice,
}

impl SeededTarget {
    /// `target`, picking with `dice`.
    pub fn new(target: Target, dice: Dice) -> SeededTarget {
        SeededTarget { target, dice }
    }

    /// The dice it picks with (for a fault's other random choices).
    pub fn dice(&self) -> &Dice {
        &self.dice
    }

    /// Whether it is `all` (every node).
    pub fn is_all(&self) -> bool {
        matches!(self.target, Target::All)
    }

    /// Picks as [`Target::pick_with`] does, with these dice.
    pub async fn pick(&self, nodes: &[Node], db: &dyn Db) -> anyhow::Result<Vec<Node>> {
        self.target.pick_with(nodes, db, &self.dice).await
    }

    /// Picks, then returns the picked servers and the rest of the database's servers; an
    /// error when no server is left, saying what it would be left for (`on the other side`).
    pub async fn pick_apart(
        &self,
        nodes: &[Node],
        db: &dyn Db,
        left_for: &str,
    ) -> anyhow::Result<(Vec<Node>, Vec<Node>)> {
        let picked = self.pick(nodes, db).await?;
        let rest: Vec<Node> = db::servers(db, nodes)
            .into_iter()
            .filter(|s| !picked.iter().any(|p| p.name == s.name))
            .collect();
        anyhow::ensure!(
            !rest.is_empty(),
            "target {self} picked every {} server: none is left {left_for}",
            db.name()
        );
        Ok((picked, rest))
    }

    /// Picks as [`pick`](Self::pick) does, then keeps the nodes whose server is running (a
    /// fault does nothing to one that is not); an error when none is, naming the picked nodes
    /// and the fault's `action` (`kill`, `corrupt`, …).
    pub async fn pick_running(
        &self,
        control: &Control,
        db: &dyn Db,
        action: &str,
    ) -> anyhow::Result<Vec<Node>> {
        let picked = self.pick(control.nodes(), db).await?;
        let running = picked.iter().map(|node| async move {
            db.is_running(control, node)
                .await
                .map(|up| up.then(|| node.clone()))
        });
        let mut nodes = Vec::new();
        for result in futures::future::join_all(running).await {
            nodes.extend(result?);
        }
        let names: Vec<&str> = picked.iter().map(|n| n.name.as_str()).collect();
        anyhow::ensure!(
            !nodes.is_empty(),
            "no {} server was running on {} to {action}",
            db.name(),
            names.join(", ")
        );
        Ok(nodes)
    }
}

impl fmt::Display for SeededTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.target.fmt(f)
    }
}
