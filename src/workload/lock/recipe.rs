//! The lock recipes behind one interface: take the lock, check it is still ours (re-entry),
//! give it back.

use zookeeper_client::{Acls, Client, CreateMode, Error};

use super::sequential::{self, Variant};
use super::{client_crate, single_node, RecipeKind};
use crate::client::{NoNodeIsLost, OpError};
use crate::workload::Requests;

/// A lock a contender holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The fencing token: the czxid of the lock node that made the contender the holder.
    pub token: i64,
    /// The znode to delete on release.
    pub node: String,
}

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
        if run_id.is_empty() || run_id.contains('/') {
            anyhow::bail!("run id {run_id:?} must be a non-empty znode name without '/'");
        }
        Ok(Recipe {
            kind,
            dir: format!("/stampede/{run_id}/lock"),
        })
    }

    /// The persistent znode the lock's nodes live under.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// Creates the lock's parent znodes.
    pub async fn setup(&self, client: &Client) -> Result<(), Error> {
        client
            .mkdir(
                &self.dir,
                &CreateMode::Persistent.with_acls(Acls::anyone_all()),
            )
            .await
    }

    /// Waits until `client`'s session holds the lock; `identity` is stored in the lock node.
    pub async fn acquire(
        &self,
        client: &Client,
        identity: &str,
        req: &mut Requests<'_>,
    ) -> Result<Held, OpError> {
        match self.kind {
            RecipeKind::SingleNode => single_node::acquire(&self.dir, client, identity, req).await,
            RecipeKind::Sequential | RecipeKind::SequentialHerd | RecipeKind::Protected => {
                let variant = Variant {
                    herd: self.kind == RecipeKind::SequentialHerd,
                    protected: self.kind == RecipeKind::Protected,
                };
                sequential::acquire(&self.dir, client, identity, variant, req).await
            }
            RecipeKind::Crate => client_crate::acquire(&self.dir, client, identity, req).await,
        }
    }

    /// Re-enters a lock the contender holds: true when the lock node still carries its
    /// identity (single node: by trying to take it again; sequential: its own node).
    pub async fn reenter(
        &self,
        client: &Client,
        identity: &str,
        held: &Held,
        req: &mut Requests<'_>,
    ) -> Result<bool, OpError> {
        match self.kind {
            RecipeKind::SingleNode => {
                single_node::reenter(&self.dir, client, identity, held, req).await
            }
            RecipeKind::Sequential
            | RecipeKind::SequentialHerd
            | RecipeKind::Protected
            | RecipeKind::Crate => {
                let (data, _) = req
                    .send(client.get_data(&held.node))
                    .await
                    .no_node_is_lost(|| sequential::own_node_gone(&held.node))?;
                Ok(data == identity.as_bytes())
            }
        }
    }

    /// Gives the lock back by deleting its node (ephemeral on our session, which answers: a
    /// `no-node` answer is a loss of acknowledged state).
    pub async fn release(
        &self,
        client: &Client,
        held: &Held,
        req: &mut Requests<'_>,
    ) -> Result<(), OpError> {
        req.send(client.delete(&held.node, None))
            .await
            .no_node_is_lost(|| sequential::own_node_gone(&held.node))
    }
}
