//! Which nodes a fault hits.

use std::fmt;
use std::str::FromStr;

use anyhow::bail;
use rand::seq::SliceRandom;

use crate::control::Node;
use crate::db::{self, Db};

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
    /// Picks the nodes, asking the database for the leader where needed.
    pub async fn pick(&self, nodes: &[Node], db: &dyn Db) -> anyhow::Result<Vec<Node>> {
        let mut shuffled = nodes.to_vec();
        shuffled.shuffle(&mut rand::thread_rng());
        let n = nodes.len();
        Ok(match self {
            Target::One => shuffled[..1.min(n)].to_vec(),
            Target::Minority => shuffled[..(n.saturating_sub(1) / 2).max(1).min(n)].to_vec(),
            Target::Majority => shuffled[..(n / 2 + 1).min(n)].to_vec(),
            Target::All => nodes.to_vec(),
            Target::Leader => match db::leader(db, nodes).await {
                Some(leader) => vec![leader],
                None => bail!("target leader: no node leads right now"),
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
                    bail!("target {name:?}: no such node (nodes: {}; or one, minority, majority, all, leader, follower)", known.join(", "))
                }
            },
        })
    }
}
