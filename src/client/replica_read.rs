//! Reading every server's copy of a test's tree, each through a session of its own pinned to
//! that one server (a connect string naming only it), for the replicas' comparison.
//!
//! First every reading session is opened (opening one commits a transaction on every
//! server, so none may open while another server is being read), then the ensemble settles:
//! every server answers `srvr` in a serving mode at one zxid (the time that took is kept;
//! opening and settling may take half the bound). Then rounds, until every
//! server has been read at one zxid or the bound passes. In a round each server is asked its last zxid (`srvr`), its tree is
//! read *without* `sync` (what a follower serves its own clients), its zxid asked again;
//! then `sync`, the tree read again, the zxid asked a third time. A read is kept, labelled
//! with the server's zxid, only when that zxid did not move across it: a server applies a
//! transaction's changes and its zxid together as reads and `srvr` see them, so such a read
//! is the server's whole tree as of that zxid. Reads at one zxid are comparable, whichever
//! server and round they came from; a follower lagging behind is never compared with a
//! leader ahead of it, only re-read until it catches up (sessions expiring after the run
//! keep committing for a while). keeperd's digest (`mntr`) is read too, where it is given.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use zookeeper_client::Client;

use super::tree::{read_tree, Tree};
use super::NodeEndpoint;
use crate::db::replicas::{digest, Digest};
use crate::db::standing;

/// Pause between rounds, and between asks while the ensemble settles.
const PAUSE: Duration = Duration::from_millis(200);
/// The longest a session to one server may take to open, within the bound.
const OPEN_LIMIT: Duration = Duration::from_secs(5);
/// The session timeout of the reading sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The root under which every workload of run `run_id` keeps its znodes.
pub fn run_root(run_id: &str) -> String {
    format!("/stampede/{run_id}")
}

/// What was read of every server (kept in `results.json` with the comparison).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaReading {
    /// The root whose tree was read.
    pub root: String,
    /// How long the ensemble took to settle (every server serving at one zxid), in ms;
    /// `None` when it did not within the bound.
    pub settled_ms: Option<u64>,
    /// How long settling and reading took in all, in ms.
    pub elapsed_ms: u64,
    /// The bound on settling and reading, in ms.
    pub limit_ms: u64,
    /// The rounds of reads.
    pub rounds: usize,
    /// Each server's reads, in node order.
    pub servers: Vec<ServerReading>,
}

/// One server's reads: the latest kept without and with `sync`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerReading {
    /// The node's name.
    pub server: String,
    /// Its mode the last time `srvr` answered (`leader`, `follower`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Its last zxid the last time `srvr` answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_zxid: Option<i64>,
    /// The latest tree read without `sync` while its zxid stood still.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsynced: Option<Labelled>,
    /// The latest tree read after `sync` while its zxid stood still.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synced: Option<Labelled>,
    /// keeperd's digest, read with the latest round (Apache ZooKeeper gives none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
    /// Why its latest round failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A tree read while its server stood at `zxid`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Labelled {
    /// The server's last zxid before and after the read.
    pub zxid: i64,
    /// What it served.
    #[serde(skip_serializing, default)]
    pub tree: Tree,
}

impl ServerReading {
    /// The zxid both its reads were kept at, when they were kept at one.
    fn met_at(&self) -> Option<i64> {
        let (unsynced, synced) = (self.unsynced.as_ref()?, self.synced.as_ref()?);
        (unsynced.zxid == synced.zxid).then_some(synced.zxid)
    }
}

impl ReplicaReading {
    /// The zxid every server's reads were kept at, when there is one.
    pub fn met_at(&self) -> Option<i64> {
        let first = self.servers.first()?.met_at()?;
        self.servers
            .iter()
            .all(|s| s.met_at() == Some(first))
            .then_some(first)
    }
}

/// One server being read: its endpoint, its pinned session and its reads so far.
struct Reader<'a> {
    endpoint: &'a NodeEndpoint,
    session: Option<Client>,
    reading: ServerReading,
}

impl Reader<'_> {
    /// One round on this server; a failure drops the session (the next round opens
    /// another) and is kept as the server's error.
    async fn round(&mut self, root: &str, deadline: Instant) {
        match self.try_round(root, deadline).await {
            Ok(()) => self.reading.error = None,
            Err(e) => {
                self.session = None;
                self.reading.error = Some(format!("{e:#}"));
            }
        }
    }

    async fn try_round(&mut self, root: &str, deadline: Instant) -> anyhow::Result<()> {
        let address = self.endpoint.address();
        if self.session.is_none() {
            self.session = Some(pinned_session(&address, deadline).await?);
        }
        let client = self.session.clone().expect("opened above");
        let before = self.zxid(&address).await?;
        let unsynced = read_tree(&client, root).await?;
        let between = self.zxid(&address).await?;
        client.sync("/").await?;
        let synced = read_tree(&client, root).await?;
        let after = self.zxid(&address).await?;
        if before == between {
            self.reading.unsynced = Some(Labelled {
                zxid: before,
                tree: unsynced,
            });
        }
        if between == after {
            self.reading.synced = Some(Labelled {
                zxid: after,
                tree: synced,
            });
        }
        self.reading.digest = digest(&address).await;
        Ok(())
    }

    /// The server's last zxid, noting its mode too.
    async fn zxid(&mut self, address: &str) -> anyhow::Result<i64> {
        let (mode, zxid) = standing(address).await?;
        self.reading.mode = Some(mode.to_string());
        self.reading.last_zxid = Some(zxid);
        Ok(zxid)
    }
}

/// A session to the server at `address` alone, opened within [`OPEN_LIMIT`], or by
/// `deadline` when that comes first (but given a second at least).
pub async fn pinned_session(address: &str, deadline: Instant) -> anyhow::Result<Client> {
    let left = deadline.saturating_duration_since(Instant::now());
    let limit = OPEN_LIMIT.min(left).max(Duration::from_secs(1));
    let connecting = Client::connector()
        .with_session_timeout(SESSION_TIMEOUT)
        .with_fail_eagerly()
        .connect(address);
    match tokio::time::timeout(limit, connecting).await {
        Ok(client) => Ok(client?),
        Err(_) => anyhow::bail!(
            "no session to {address} within {:.1} s",
            limit.as_secs_f64()
        ),
    }
}

/// Waits until every server answers `srvr` in a serving mode at one zxid, until `deadline`;
/// the time it took, `None` when they did not.
async fn settle(endpoints: &[NodeEndpoint], deadline: Instant) -> Option<Duration> {
    let start = Instant::now();
    loop {
        let asks = endpoints
            .iter()
            .map(|e| async move { standing(&e.address()).await.ok().map(|(_, zxid)| zxid) });
        let zxids = futures::future::join_all(asks).await;
        if zxids.iter().all(|z| z.is_some() && *z == zxids[0]) {
            return Some(start.elapsed());
        }
        if Instant::now() + PAUSE >= deadline {
            return None;
        }
        tokio::time::sleep(PAUSE).await;
    }
}

/// Reads the tree under `root` from every server in `endpoints`, each through its own pinned
/// session, without and with `sync`, until every server was read at one zxid or `limit`
/// passed (opening the sessions and settling take at most half of it; at least one round
/// is always made).
pub async fn read_every_server(
    endpoints: &[NodeEndpoint],
    root: &str,
    limit: Duration,
) -> ReplicaReading {
    let start = Instant::now();
    let deadline = start + limit;
    let opening = endpoints.iter().map(|endpoint| async move {
        let opened = pinned_session(&endpoint.address(), start + limit / 2).await;
        let (session, error) = match opened {
            Ok(session) => (Some(session), None),
            Err(e) => (None, Some(format!("{e:#}"))),
        };
        Reader {
            endpoint,
            session,
            reading: ServerReading {
                server: endpoint.name.clone(),
                error,
                ..ServerReading::default()
            },
        }
    });
    let mut readers: Vec<Reader> = futures::future::join_all(opening).await;
    let settled = settle(endpoints, start + limit / 2).await;
    let mut reading = ReplicaReading {
        root: root.to_string(),
        settled_ms: settled.map(|d| d.as_millis() as u64),
        elapsed_ms: 0,
        limit_ms: limit.as_millis() as u64,
        rounds: 0,
        servers: Vec::new(),
    };
    loop {
        reading.rounds += 1;
        let rounds = readers.iter_mut().map(|r| r.round(root, deadline));
        futures::future::join_all(rounds).await;
        reading.servers = readers.iter().map(|r| r.reading.clone()).collect();
        if reading.met_at().is_some() || Instant::now() + PAUSE >= deadline {
            break;
        }
        tokio::time::sleep(PAUSE).await;
    }
    reading.elapsed_ms = start.elapsed().as_millis() as u64;
    reading
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_server_is_read_without_and_with_sync_at_one_zxid() {
        let server = crate::client::test_server::ZkServer::start();
        let endpoint = server.endpoint();
        let client = Client::connect(&endpoint.address()).await.unwrap();
        let acl = zookeeper_client::CreateMode::Persistent
            .with_acls(zookeeper_client::Acls::anyone_all());
        client.create("/r", b"", &acl).await.unwrap();
        client.create("/r/k", b"1", &acl).await.unwrap();
        let reading = read_every_server(&[endpoint], "/r", Duration::from_secs(20)).await;
        let zxid = reading.met_at().expect("read at one zxid");
        let read = &reading.servers[0];
        assert_eq!(read.mode.as_deref(), Some("standalone"));
        assert_eq!(read.last_zxid, Some(zxid));
        assert_eq!(read.synced.as_ref().unwrap().tree.len(), 2);
        assert_eq!(read.unsynced, read.synced);
        assert!(reading.settled_ms.is_some() && read.error.is_none());
    }

    #[tokio::test]
    async fn a_server_that_does_not_answer_is_named_with_why_within_the_bound() {
        let server = crate::client::test_server::ZkServer::start();
        // A port held by a listener that never accepts: a port merely freed again could be
        // taken by another test's server meanwhile (it once was, and answered).
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut gone = server.endpoint();
        gone.name = "gone".into();
        gone.port = silent.local_addr().unwrap().port();
        let started = std::time::Instant::now();
        let reading =
            read_every_server(&[server.endpoint(), gone], "/r", Duration::from_secs(3)).await;
        assert!(started.elapsed() < Duration::from_secs(8), "bounded");
        assert_eq!(reading.settled_ms, None);
        assert_eq!(reading.met_at(), None);
        assert!(reading.servers[0].synced.is_some());
        let gone = &reading.servers[1];
        assert!(gone.synced.is_none() && gone.error.is_some(), "{gone:?}");
        drop(silent);
    }
}
