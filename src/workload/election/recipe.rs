//! The election recipes behind one interface: campaign until elected, resign; and the request
//! helper that applies the deadline and counts the watch notifications candidates receive.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use zookeeper_client::{Acls, Client, CreateMode, Error, EventType, OneshotWatcher, SessionState};

use super::{fair, unfair, ElectionRecipe};
use crate::client::OpError;

/// A term a candidate won.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Won {
    /// The czxid of the znode that made the candidate leader.
    pub token: i64,
    /// The znodes to delete on resignation, in order.
    pub nodes: Vec<String>,
}

/// Sends one candidate's requests within the request deadline and counts the watch
/// notifications it receives.
pub struct Requests<'a> {
    timeout: Duration,
    notifications: &'a AtomicU64,
}

impl<'a> Requests<'a> {
    /// Requests with deadline `timeout`; notifications are added to `notifications`.
    pub fn new(timeout: Duration, notifications: &'a AtomicU64) -> Requests<'a> {
        Requests {
            timeout,
            notifications,
        }
    }

    /// Awaits one request; no answer within the deadline is [`OpError::Deadline`].
    pub async fn send<T>(
        &mut self,
        request: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, OpError> {
        match tokio::time::timeout(self.timeout, request).await {
            Ok(answer) => answer.map_err(OpError::Zk),
            Err(_) => Err(OpError::Deadline(self.timeout)),
        }
    }

    /// Waits for `watcher` to fire; a session event (expiry, closing) is the matching error.
    pub async fn wait(&mut self, watcher: OneshotWatcher) -> Result<(), OpError> {
        let event = watcher.changed().await;
        if event.event_type == EventType::Session {
            return Err(OpError::Zk(match event.session_state {
                SessionState::Expired => Error::SessionExpired,
                SessionState::AuthFailed => Error::AuthFailed,
                _ => Error::ClientClosed,
            }));
        }
        self.notifications.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
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
        if run_id.is_empty() || run_id.contains('/') {
            anyhow::bail!("run id {run_id:?} must be a non-empty znode name without '/'");
        }
        Ok(Recipe {
            kind,
            dir: format!("/stampede/{run_id}/election"),
        })
    }

    /// The persistent znode the election's nodes live under.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// Creates the election's persistent znodes.
    pub async fn setup(&self, client: &Client) -> Result<(), Error> {
        let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
        client.mkdir(&self.dir, &options).await?;
        if self.kind == ElectionRecipe::Fair {
            client.mkdir(&fair::candidates(&self.dir), &options).await?;
        }
        Ok(())
    }

    /// Campaigns until `client`'s session is elected; `identity` is stored in the nodes it
    /// creates.
    pub async fn campaign(
        &self,
        client: &Client,
        identity: &str,
        req: &mut Requests<'_>,
    ) -> Result<Won, OpError> {
        match self.kind {
            ElectionRecipe::Unfair => unfair::campaign(&self.dir, client, identity, req).await,
            ElectionRecipe::Fair => fair::campaign(&self.dir, client, identity, req).await,
        }
    }

    /// Resigns a won term by deleting its nodes (the acknowledgement first).
    pub async fn resign(
        &self,
        client: &Client,
        won: &Won,
        req: &mut Requests<'_>,
    ) -> Result<(), OpError> {
        for node in &won.nodes {
            req.send(client.delete(node, None)).await?;
        }
        Ok(())
    }
}
