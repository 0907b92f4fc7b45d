//! The election recipes behind one interface: campaign until elected, resign.
//!
//! - `election-unfair`: every candidate claims the same ephemeral leader node holding its
//!   identity ([`claims::claim`]); the one whose create succeeds leads, the others watch the
//!   node and all run again when it is deleted.
//! - `election-fair`: ZooKeeper's election recipe. Each candidate joins a line of ephemeral
//!   sequential nodes under `candidates` ([`claims::Line`]); the smallest leads, every other
//!   candidate watches only its predecessor. Once elected, the leader claims the
//!   acknowledgement node `leader` (ephemeral, holding its identity) before it acts as leader,
//!   so it waits first for a previous leader's acknowledgement to disappear.

use zookeeper_client::Client;

use super::ElectionRecipe;
use crate::client::{NoNodeIsLost, OpError};
use crate::workload::claims::{self, own_node_gone, Dir, Line};
use crate::workload::Requests;

/// A candidate node's name before its sequence number.
const PREFIX: &str = "c-";

/// A term a candidate won.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Won {
    /// The czxid of the znode that made the candidate leader.
    pub token: i64,
    /// The znodes to delete on resignation, in order.
    pub nodes: Vec<String>,
}

/// One election recipe over the znodes of one test run.
#[derive(Debug, Clone)]
pub struct Recipe {
    kind: ElectionRecipe,
    dir: String,
}

impl Recipe {
    /// The recipe `kind` for test run `run_id` (one znode name), under
    /// `/stampede/<run_id>/election`.
    pub fn new(kind: ElectionRecipe, run_id: &str) -> anyhow::Result<Recipe> {
        let dir = crate::workload::run_path(run_id, "election")?;
        Ok(Recipe { kind, dir })
    }

    /// The persistent znodes the election's nodes live under: its directory, and the fair
    /// recipe's candidates.
    pub fn dirs(&self) -> Vec<String> {
        match self.kind {
            ElectionRecipe::Unfair => vec![self.dir.clone()],
            ElectionRecipe::Fair => vec![self.dir.clone(), self.candidates()],
        }
    }

    /// The leader node (the unfair recipe's prize, the fair one's acknowledgement).
    fn leader(&self) -> String {
        format!("{}/leader", self.dir)
    }

    /// The directory of the fair recipe's candidate nodes.
    fn candidates(&self) -> String {
        format!("{}/candidates", self.dir)
    }

    /// Campaigns until `client`'s session is elected; `identity` is stored in the nodes it
    /// creates.
    pub async fn campaign(
        &self,
        client: &Client,
        identity: &str,
        req: &mut Requests<'_>,
    ) -> Result<Won, OpError> {
        let dir = Dir {
            path: &self.dir,
            recipe: "election",
        };
        let leader = self.leader();
        match self.kind {
            ElectionRecipe::Unfair => {
                let won = claims::claim(dir, &leader, client, identity, req).await?;
                Ok(Won {
                    token: won.token,
                    nodes: vec![won.node],
                })
            }
            ElectionRecipe::Fair => {
                let candidates = self.candidates();
                let line = Line {
                    dir: Dir {
                        path: &candidates,
                        ..dir
                    },
                    prefix: PREFIX,
                };
                let own = line.join(client, identity, false, req).await?;
                let lost = |mine| own_node_gone("candidate node", &format!("{PREFIX}{mine:010}"));
                line.wait_first(client, &own, false, lost, req).await?;
                let ack = claims::claim(dir, &leader, client, identity, req).await?;
                Ok(Won {
                    token: own.token,
                    nodes: vec![ack.node, own.node],
                })
            }
        }
    }

    /// Resigns a won term by deleting its nodes (the acknowledgement first). They are
    /// ephemeral on our session, which answers: a `no-node` answer is a loss of acknowledged
    /// state.
    pub async fn resign(
        &self,
        client: &Client,
        won: &Won,
        req: &mut Requests<'_>,
    ) -> Result<(), OpError> {
        for node in &won.nodes {
            req.send(client.delete(node, None))
                .await
                .no_node_is_lost(|| own_node_gone("node", node))?;
        }
        Ok(())
    }
}
