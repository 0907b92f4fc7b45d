//! One process's ZooKeeper session, bound to one node or to the whole ensemble.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use zookeeper_client::Client;

use super::OpError;

/// Pause before trying again to open a session that could not be opened.
const RECONNECT_DELAY: Duration = Duration::from_millis(250);

/// A ZooKeeper server a client can connect to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeEndpoint {
    /// The node's name, written to the history's `node` field.
    pub name: String,
    /// Host name or address of the node's client port (loopback for local clusters).
    pub host: String,
    /// ZooKeeper's client port.
    pub port: u16,
}

impl NodeEndpoint {
    /// `host:port`, as in a ZooKeeper connect string.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// Which servers a process's session may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Connect {
    /// Each process is bound to one node (process slots are spread over the nodes in turn).
    #[default]
    Node,
    /// Each process gets the whole ensemble as its connect string and may move between nodes.
    Ensemble,
}

/// How processes open their sessions and how long an operation may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientOptions {
    /// Node-bound or ensemble-wide sessions.
    pub connect: Connect,
    /// The client-side deadline of one operation (and of opening a session); an operation
    /// without an answer by then ends `info`.
    pub op_timeout: Duration,
    /// The session timeout asked of ZooKeeper.
    pub session_timeout: Duration,
}

impl ClientOptions {
    /// Checks the deadlines; the error names the field of workload file section `section`
    /// (e.g. `lock.op_timeout`).
    pub fn validate(&self, section: &str) -> Result<(), String> {
        if self.op_timeout.is_zero() {
            return Err(format!("{section}.op_timeout must be above 0"));
        }
        if self.session_timeout.is_zero() {
            return Err(format!("{section}.session_timeout must be above 0"));
        }
        Ok(())
    }
}

/// Hands out process ids: increasing from 0, never reused.
#[derive(Debug, Default)]
pub struct ProcessIds(AtomicU64);

impl ProcessIds {
    /// The next unused process id.
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }

    /// How many ids were handed out.
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A logical process: its id and the one ZooKeeper session it owns.
pub struct Session {
    /// The process id recorded in the history.
    pub process: u64,
    /// The node the session is bound to (`None` for ensemble-wide sessions).
    pub node: Option<String>,
    /// The session.
    pub client: Client,
}

impl Session {
    /// Opens a session for a new process in slot `slot`: bound to node `slot % endpoints.len()`
    /// or to the whole ensemble. Fails if no session is established within the operation
    /// deadline; no process id is spent then.
    pub async fn open(
        ids: &ProcessIds,
        endpoints: &[NodeEndpoint],
        slot: usize,
        options: &ClientOptions,
    ) -> Result<Session, OpError> {
        assert!(
            !endpoints.is_empty(),
            "a session needs at least one endpoint"
        );
        let (node, connect) = match options.connect {
            Connect::Node => {
                let endpoint = &endpoints[slot % endpoints.len()];
                (Some(endpoint.name.clone()), endpoint.address())
            }
            Connect::Ensemble => (None, ensemble_string(endpoints)),
        };
        let connector = Client::connector()
            .with_session_timeout(options.session_timeout)
            .with_fail_eagerly();
        let client = tokio::time::timeout(options.op_timeout, connector.connect(&connect))
            .await
            .map_err(|_| OpError::Deadline(options.op_timeout))??;
        Ok(Session {
            process: ids.next(),
            node,
            client,
        })
    }

    /// Opens a session for a new process in slot `slot` as [`Session::open`] does, trying
    /// again after a short pause while none can be opened, until `end` completes (then
    /// `None`).
    pub async fn open_retrying(
        ids: &ProcessIds,
        endpoints: &[NodeEndpoint],
        slot: usize,
        options: &ClientOptions,
        end: impl std::future::Future<Output = ()>,
    ) -> Option<Session> {
        tokio::pin!(end);
        loop {
            tokio::select! {
                _ = &mut end => return None,
                opened = Session::open(ids, endpoints, slot, options) => match opened {
                    Ok(session) => return Some(session),
                    Err(e) => tracing::debug!(slot, "cannot open a session: {e}"),
                },
            }
            tokio::select! {
                _ = &mut end => return None,
                _ = tokio::time::sleep(RECONNECT_DELAY) => {}
            }
        }
    }

    /// Whether the session can no longer serve requests (expired, closed, auth failed).
    pub fn is_dead(&self) -> bool {
        self.client.state().is_terminated()
    }
}

/// A session to the whole ensemble for setting a test up (creating its znodes), trying again
/// after each failed attempt (a server still starting, or killed and restarted by a fault
/// that began with the run) until twice the session timeout has passed; the error names the
/// last attempt's failure.
pub async fn setup_session(
    endpoints: &[NodeEndpoint],
    session_timeout: std::time::Duration,
) -> anyhow::Result<zookeeper_client::Client> {
    let connect = ensemble_string(endpoints);
    let wait = 2 * session_timeout;
    let deadline = tokio::time::Instant::now() + wait;
    let mut last = String::from("no attempt finished");
    loop {
        let connecting = zookeeper_client::Client::connector()
            .with_session_timeout(session_timeout)
            .connect(&connect);
        match tokio::time::timeout_at(deadline, connecting).await {
            Ok(Ok(client)) => return Ok(client),
            Ok(Err(e)) => last = e.to_string(),
            Err(_) => {}
        }
        if tokio::time::Instant::now() + RECONNECT_DELAY >= deadline {
            anyhow::bail!("no ZooKeeper session to {connect} for setup within {wait:?} (last attempt: {last})");
        }
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
}

/// The connect string of the whole ensemble, `host1:port1,host2:port2,...`.
pub fn ensemble_string(endpoints: &[NodeEndpoint]) -> String {
    endpoints
        .iter()
        .map(NodeEndpoint::address)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(name: &str, port: u16) -> NodeEndpoint {
        NodeEndpoint {
            name: name.into(),
            host: "127.0.0.1".into(),
            port,
        }
    }

    #[test]
    fn ensemble_string_lists_every_node() {
        let eps = [endpoint("n1", 2181), endpoint("n2", 2182)];
        assert_eq!(ensemble_string(&eps), "127.0.0.1:2181,127.0.0.1:2182");
    }

    #[test]
    fn process_ids_are_never_reused() {
        let ids = ProcessIds::default();
        assert_eq!((ids.next(), ids.next(), ids.next()), (0, 1, 2));
        assert_eq!(ids.count(), 3);
    }

    fn options(connect: Connect) -> ClientOptions {
        ClientOptions {
            connect,
            op_timeout: Duration::from_secs(5),
            session_timeout: Duration::from_secs(4),
        }
    }

    #[test]
    fn zero_deadlines_are_named_by_section() {
        assert!(options(Connect::Node).validate("queue").is_ok());
        let no_op = ClientOptions {
            op_timeout: Duration::ZERO,
            ..options(Connect::Node)
        };
        assert_eq!(
            no_op.validate("queue").unwrap_err(),
            "queue.op_timeout must be above 0"
        );
        let no_session = ClientOptions {
            session_timeout: Duration::ZERO,
            ..options(Connect::Node)
        };
        assert_eq!(
            no_session.validate("lock").unwrap_err(),
            "lock.session_timeout must be above 0"
        );
    }

    #[tokio::test]
    async fn sessions_bind_to_their_slots_node_or_use_the_ensemble() {
        let server = crate::client::test_server::ZkServer::start();
        let ids = ProcessIds::default();
        // Slots alternate between a node nothing listens on and the live server.
        let eps = [endpoint("gone", closed_port()), server.endpoint()];
        let bound = Session::open(&ids, &eps, 3, &options(Connect::Node))
            .await
            .unwrap();
        assert_eq!((bound.process, bound.node.as_deref()), (0, Some("zk")));
        let dead_node = Session::open(&ids, &eps, 2, &options(Connect::Node)).await;
        assert!(
            dead_node.is_err(),
            "a node-bound session never moves to another node"
        );
        let anywhere = Session::open(&ids, &eps, 2, &options(Connect::Ensemble))
            .await
            .unwrap();
        assert_eq!((anywhere.process, anywhere.node.as_deref()), (1, None));
        assert!(!bound.is_dead() && !anywhere.is_dead());
        let acl = zookeeper_client::CreateMode::Persistent
            .with_acls(zookeeper_client::Acls::anyone_all());
        bound.client.create("/x", b"1", &acl).await.unwrap();
        assert_eq!(anywhere.client.get_data("/x").await.unwrap().0, b"1");
    }

    #[tokio::test]
    async fn a_session_that_cannot_open_spends_no_id() {
        let closed = closed_port();
        let ids = ProcessIds::default();
        let eps = [endpoint("gone", closed)];
        let started = std::time::Instant::now();
        assert!(Session::open(&ids, &eps, 0, &options(Connect::Node))
            .await
            .is_err());
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "fails fast on a refused connection"
        );
        assert_eq!(ids.count(), 0);
    }

    /// A loopback port nothing listens on.
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }

    #[test]
    fn connect_mode_parses_snake_case() {
        let c: Connect = serde_yaml_ng::from_str("ensemble").unwrap();
        assert_eq!(c, Connect::Ensemble);
        assert!(serde_yaml_ng::from_str::<Connect>("everything").is_err());
    }
}
