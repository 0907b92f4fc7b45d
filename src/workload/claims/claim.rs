//! One ephemeral node everybody tries to create: the participant whose create succeeds owns
//! it; the others watch it (an exists watch) and try again when it is deleted. Finding its own
//! identity in the node tells a participant that a create whose answer it lost went through.

use zookeeper_client::{Acls, Client, CreateMode, Error};

use super::{Dir, Owned};
use crate::client::{NoNodeIsLost, OpError};
use crate::workload::Requests;

/// Waits until `client`'s session owns the ephemeral `node` under `dir`, holding `identity`.
pub async fn claim(
    dir: Dir<'_>,
    node: &str,
    client: &Client,
    identity: &str,
    req: &mut Requests<'_>,
) -> Result<Owned, OpError> {
    let options = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    let owned = |token| Owned {
        token,
        node: node.to_string(),
    };
    loop {
        match req
            .send(client.create(node, identity.as_bytes(), &options))
            .await
            .no_node_is_lost(|| dir.gone())
        {
            Ok((stat, _)) => return Ok(owned(stat.czxid)),
            Err(OpError::Zk(Error::NodeExists)) => {}
            Err(e) => return Err(e),
        }
        match req.send(client.get_data(node)).await {
            // Our own create went through though its answer was lost.
            Ok((data, stat)) if data == identity.as_bytes() => return Ok(owned(stat.czxid)),
            Ok(_) => {}
            Err(OpError::Zk(Error::NoNode)) => continue,
            Err(e) => return Err(e),
        }
        match req.send(client.check_and_watch_stat(node)).await? {
            (None, _) => continue,
            (Some(_), watcher) => req.wait(watcher).await?,
        }
    }
}
