//! `lock-single-node`: everyone claims the same ephemeral node holding their identity (see
//! [`crate::workload::claims::claim`]); the one whose create succeeds holds the lock.
//! Finding its own identity in the node lets a holder re-enter.

use zookeeper_client::{Acls, Client, CreateMode, Error};

use crate::client::{NoNodeIsLost, OpError};
use crate::workload::claims::{own_node_gone, Dir};
use crate::workload::Requests;

/// The lock node under the lock's directory.
pub fn node(dir: &str) -> String {
    format!("{dir}/holder")
}

/// Takes the lock again while holding it (by the node created at zxid `token`): true when the
/// node is still the one it created. The node is ephemeral on our session, which answers, so
/// anything else is a loss of acknowledged state.
pub async fn reenter(
    dir: Dir<'_>,
    client: &Client,
    identity: &str,
    token: i64,
    req: &mut Requests<'_>,
) -> Result<bool, OpError> {
    let node = node(dir.path);
    let options = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    let lost = || OpError::Lost(own_node_gone("lock node", &node));
    match req
        .send(client.create(&node, identity.as_bytes(), &options))
        .await
        .no_node_is_lost(|| dir.gone())
    {
        // The node was gone while our session lived (it is now taken afresh).
        Ok(_) => return Err(lost()),
        Err(OpError::Zk(Error::NodeExists)) => {}
        Err(e) => return Err(e),
    }
    match req.send(client.get_data(&node)).await {
        Ok((data, stat)) if data == identity.as_bytes() && stat.czxid == token => Ok(true),
        Ok(_) | Err(OpError::Zk(Error::NoNode)) => Err(lost()),
        Err(e) => Err(e),
    }
}
