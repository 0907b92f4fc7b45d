//! Each server's view of the run's ephemerals, read through a session pinned to that server:
//! `sync`, then every znode under the workload's directory with its owner. Polled during the
//! run and, after the settle, once more from every server (`final`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::watch;
use tokio::time::Instant;
use zookeeper_client::Client;

use crate::client::replica_read::pinned_session;
use crate::client::tree::read_tree;
use crate::client::{classify, NodeEndpoint, OpError, ProcessIds};
use crate::history::{Meta, OpType, Process, Recorder};

/// The invocation value of a poll after the settle.
pub const FINAL: &str = "final";

/// Pause between two attempts of a final poll that did not answer.
const RETRY: Duration = Duration::from_millis(500);

/// A session's id as the history names it (`0x…`), in creates' owners too.
pub fn session_name(id: i64) -> String {
    format!("{id:#x}")
}

/// One server's poller: its pinned session (opened when needed) and its process.
pub struct Poller {
    endpoint: NodeEndpoint,
    dir: String,
    op_timeout: Duration,
    recorder: Arc<Recorder>,
    ids: Arc<ProcessIds>,
    process: u64,
    session: Option<Client>,
}

impl Poller {
    /// A poller of the server at `endpoint` reading `dir`, each poll within `op_timeout`.
    pub fn new(
        endpoint: NodeEndpoint,
        dir: &str,
        op_timeout: Duration,
        recorder: Arc<Recorder>,
        ids: Arc<ProcessIds>,
    ) -> Poller {
        let process = ids.next();
        Poller {
            endpoint,
            dir: dir.to_string(),
            op_timeout,
            recorder,
            ids,
            process,
            session: None,
        }
    }

    /// Polls the server once, recorded as `poll` (invoked with [`FINAL`] when `is_final`):
    /// `ok` with `{"nodes": {path: owner}, "pzxid"}` for every ephemeral under the directory
    /// and the directory's pzxid, else
    /// `fail` or `info` with the error (the session is dropped then). Whether it answered.
    pub async fn poll(&mut self, is_final: bool) -> std::io::Result<bool> {
        let server = self.endpoint.name.clone();
        let meta = || Meta {
            key: Some(server.clone()),
            node: Some(server.clone()),
            ..Meta::default()
        };
        let invoked = match is_final {
            true => json!(FINAL),
            false => Value::Null,
        };
        let process = Process::Client(self.process);
        self.recorder
            .record(OpType::Invoke, process, "poll", invoked, meta())?;
        let read = tokio::time::timeout(self.op_timeout, self.read()).await;
        let read = read.unwrap_or(Err(OpError::Deadline(self.op_timeout)));
        match read {
            Ok((nodes, pzxid)) => {
                let value = json!({ "nodes": nodes, "pzxid": pzxid });
                self.recorder
                    .record(OpType::Ok, process, "poll", value, meta())?;
                Ok(true)
            }
            Err(e) => {
                self.session = None;
                let kind = classify(&e);
                let error = Some(e.to_string());
                let failed = Meta { error, ..meta() };
                self.recorder
                    .record(kind, process, "poll", Value::Null, failed)?;
                if kind == OpType::Info {
                    self.process = self.ids.next();
                }
                Ok(false)
            }
        }
    }

    /// Every ephemeral under the directory with its owner, as the server serves it after a
    /// `sync`, and the directory's pzxid (the last create or delete of a child the server
    /// had applied: a poll lacking a node created later was behind).
    async fn read(&mut self) -> Result<(Map<String, Value>, i64), OpError> {
        if self.session.is_none() {
            let deadline = Instant::now() + self.op_timeout;
            let opened = pinned_session(&self.endpoint.address(), deadline).await;
            let opened =
                opened.map_err(|e| zookeeper_client::Error::UnexpectedError(format!("{e:#}")));
            self.session = Some(opened?);
        }
        let client = self.session.as_ref().expect("opened above");
        client.sync(&self.dir).await?;
        let tree = read_tree(client, &self.dir).await?;
        let pzxid = tree.get(&self.dir).map_or(0, |dir| dir.pzxid);
        let nodes = tree
            .into_iter()
            .filter(|(_, z)| z.ephemeral_owner != 0)
            .map(|(path, z)| (path, json!(session_name(z.ephemeral_owner))))
            .collect();
        Ok((nodes, pzxid))
    }
}

impl Poller {
    /// Polls the server every `every` until `stop` turns true; the poller, for the final
    /// poll.
    pub async fn poll_until(
        mut self,
        every: Duration,
        mut stop: watch::Receiver<bool>,
    ) -> std::io::Result<Poller> {
        loop {
            let next = Instant::now() + every;
            self.poll(false).await?;
            tokio::select! {
                _ = tokio::time::sleep_until(next) => {}
                _ = stop.wait_for(|s| *s) => return Ok(self),
            }
        }
    }

    /// Polls the server until it answers a final poll or `bound` passes; the server's name
    /// when it never answered.
    pub async fn final_poll(mut self, bound: Duration) -> std::io::Result<Option<String>> {
        let deadline = Instant::now() + bound;
        loop {
            if self.poll(true).await? {
                return Ok(None);
            }
            if Instant::now() + RETRY >= deadline {
                return Ok(Some(self.endpoint.name));
            }
            tokio::time::sleep(RETRY).await;
        }
    }
}
