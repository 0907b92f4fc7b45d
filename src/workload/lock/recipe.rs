//! The lock recipes behind one interface: take the lock, check it is still ours (re-entry),
//! give it back; and the request helper that applies the deadline and feeds the herd count.

use std::future::Future;
use std::time::Duration;

use zookeeper_client::{Acls, Client, CreateMode, Error, EventType, OneshotWatcher, SessionState};

use super::herd::HerdMeter;
use super::sequential::{self, Variant};
use super::{single_node, RecipeKind};
use crate::client::OpError;

/// A lock a contender holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The fencing token: the czxid of the lock node that made the contender the holder.
    pub token: i64,
    /// The znode to delete on release.
    pub node: String,
}

/// Sends one contender's requests within the request deadline and tells the herd meter about
/// the notifications it waits for and the requests it sends in reaction to them.
pub struct Requests<'a> {
    timeout: Duration,
    meter: &'a HerdMeter,
    reacting: bool,
}

impl<'a> Requests<'a> {
    /// Requests with deadline `timeout`, counted by `meter`.
    pub fn new(timeout: Duration, meter: &'a HerdMeter) -> Requests<'a> {
        Requests {
            timeout,
            meter,
            reacting: false,
        }
    }

    /// Awaits one request; no answer within the deadline is [`OpError::Deadline`].
    pub async fn send<T>(
        &mut self,
        request: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, OpError> {
        if self.reacting {
            self.meter.reacted();
        }
        match tokio::time::timeout(self.timeout, request).await {
            Ok(answer) => answer.map_err(OpError::Zk),
            Err(_) => Err(OpError::Deadline(self.timeout)),
        }
    }

    /// Waits for `watcher` to fire; a session event (expiry, closing) is the matching error.
    pub async fn wait(&mut self, watcher: OneshotWatcher) -> Result<(), OpError> {
        self.reacting = false;
        let event = watcher.changed().await;
        if event.event_type == EventType::Session {
            return Err(OpError::Zk(match event.session_state {
                SessionState::Expired => Error::SessionExpired,
                SessionState::AuthFailed => Error::AuthFailed,
                _ => Error::ClientClosed,
            }));
        }
        self.meter.notified();
        self.reacting = true;
        Ok(())
    }
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
            RecipeKind::Sequential | RecipeKind::SequentialHerd | RecipeKind::Protected => {
                let (data, _) = req.send(client.get_data(&held.node)).await?;
                Ok(data == identity.as_bytes())
            }
        }
    }

    /// Gives the lock back by deleting its node.
    pub async fn release(
        &self,
        client: &Client,
        held: &Held,
        req: &mut Requests<'_>,
    ) -> Result<(), OpError> {
        req.send(client.delete(&held.node, None)).await
    }
}
