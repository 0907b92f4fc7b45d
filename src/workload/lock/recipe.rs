//! The lock recipes behind one interface: take the lock, check it is still ours (re-entry),
//! give it back. The single-node lock claims one ephemeral node ([`claims::claim`]); the
//! sequential ones (`sequential`, `sequential-herd`, `protected`) wait in a line of ephemeral
//! sequential children ([`claims::Line`]), watching their predecessor or, in the herd, the
//! whole children list, with protection finding their child again after a lost create answer.

use zookeeper_client::Client;

use super::{client_crate, single_node, RecipeKind};
use crate::client::{NoNodeIsLost, OpError};
use crate::workload::claims::{self, own_node_gone, Dir, Line, Owned};
use crate::workload::Requests;

/// A sequential lock child's name before its sequence number.
const PREFIX: &str = "lock-";

/// One lock recipe over the znodes of one test run.
#[derive(Debug, Clone)]
pub struct Recipe {
    kind: RecipeKind,
    dir: String,
}

impl Recipe {
    /// The recipe `kind` for test run `run_id` (one znode name), under
    /// `/stampede/<run_id>/lock`.
    pub fn new(kind: RecipeKind, run_id: &str) -> anyhow::Result<Recipe> {
        let dir = crate::workload::run_path(run_id, "lock")?;
        Ok(Recipe { kind, dir })
    }

    /// The persistent znodes the lock's nodes live under: its directory.
    pub fn dirs(&self) -> Vec<String> {
        vec![self.dir.clone()]
    }

    /// The lock's directory, as the recipes name it in facts of lost state.
    fn znodes(&self) -> Dir<'_> {
        Dir {
            path: &self.dir,
            recipe: "lock",
        }
    }

    /// Waits until `client`'s session holds the lock (the node it owns, whose czxid is the
    /// fencing token); `identity` is stored in the lock node.
    pub async fn acquire(
        &self,
        client: &Client,
        identity: &str,
        req: &mut Requests<'_>,
    ) -> Result<Owned, OpError> {
        let dir = self.znodes();
        match self.kind {
            RecipeKind::SingleNode => {
                let node = single_node::node(&self.dir);
                claims::claim(dir, &node, client, identity, req).await
            }
            RecipeKind::Sequential | RecipeKind::SequentialHerd | RecipeKind::Protected => {
                let line = Line {
                    dir,
                    prefix: PREFIX,
                };
                let protected = self.kind == RecipeKind::Protected;
                let own = line.join(client, identity, protected, req).await?;
                let herd = self.kind == RecipeKind::SequentialHerd;
                let lost = |_| own_node_gone("lock node", &own.node);
                line.wait_first(client, &own, herd, lost, req).await?;
                Ok(own)
            }
            RecipeKind::Crate => client_crate::acquire(dir, client, identity, req).await,
            #[cfg(test)]
            RecipeKind::Barging => {
                let line = Line {
                    dir,
                    prefix: PREFIX,
                };
                let own = line.join(client, identity, false, req).await?;
                let node = single_node::node(&self.dir);
                let claimed = claims::claim(dir, &node, client, identity, req).await?;
                req.send(client.delete(&own.node, None)).await?;
                Ok(Owned {
                    token: own.token,
                    node: claimed.node,
                })
            }
        }
    }

    /// Re-enters a lock the contender holds: true when the lock node still carries its
    /// identity (single node: by trying to take it again; sequential: its own node).
    pub async fn reenter(
        &self,
        client: &Client,
        identity: &str,
        held: &Owned,
        req: &mut Requests<'_>,
    ) -> Result<bool, OpError> {
        match self.kind {
            RecipeKind::SingleNode => {
                single_node::reenter(self.znodes(), client, identity, held.token, req).await
            }
            _ => {
                let (data, _) = req
                    .send(client.get_data(&held.node))
                    .await
                    .no_node_is_lost(|| own_node_gone("lock node", &held.node))?;
                Ok(data == identity.as_bytes())
            }
        }
    }

    /// Gives the lock back by deleting its node (ephemeral on our session, which answers: a
    /// `no-node` answer is a loss of acknowledged state).
    pub async fn release(
        &self,
        client: &Client,
        held: &Owned,
        req: &mut Requests<'_>,
    ) -> Result<(), OpError> {
        req.send(client.delete(&held.node, None))
            .await
            .no_node_is_lost(|| own_node_gone("lock node", &held.node))
    }
}
