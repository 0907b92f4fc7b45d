//! `lock-single-node`: everyone creates the same ephemeral node holding their identity; the
//! one whose create succeeds holds the lock, the others watch the node (an exists watch) and
//! try again when it is deleted. Finding its own identity in the node lets a contender
//! re-enter, or learn that a create whose answer it lost went through.

use zookeeper_client::{Acls, Client, CreateMode, Error};

use super::recipe::Held;
use super::sequential::{dir_gone, own_node_gone};
use crate::client::{NoNodeIsLost, OpError};
use crate::workload::Requests;

fn lock_node(dir: &str) -> String {
    format!("{dir}/holder")
}

/// Takes the lock, waiting as long as someone else holds it.
pub async fn acquire(
    dir: &str,
    client: &Client,
    identity: &str,
    req: &mut Requests<'_>,
) -> Result<Held, OpError> {
    let node = lock_node(dir);
    let options = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    loop {
        match req
            .send(client.create(&node, identity.as_bytes(), &options))
            .await
            .no_node_is_lost(|| dir_gone(dir))
        {
            Ok((stat, _)) => {
                return Ok(Held {
                    token: stat.czxid,
                    node,
                })
            }
            Err(OpError::Zk(Error::NodeExists)) => {}
            Err(e) => return Err(e),
        }
        match req.send(client.get_data(&node)).await {
            Ok((data, stat)) if data == identity.as_bytes() => {
                return Ok(Held {
                    token: stat.czxid,
                    node,
                })
            }
            Ok(_) => {}
            Err(OpError::Zk(Error::NoNode)) => continue,
            Err(e) => return Err(e),
        }
        match req.send(client.check_and_watch_stat(&node)).await? {
            (None, _) => continue,
            (Some(_), watcher) => req.wait(watcher).await?,
        }
    }
}

/// Takes the lock again while holding it: true when the node is still the one it created.
/// The node is ephemeral on our session, which answers, so anything else is a loss of
/// acknowledged state.
pub async fn reenter(
    dir: &str,
    client: &Client,
    identity: &str,
    held: &Held,
    req: &mut Requests<'_>,
) -> Result<bool, OpError> {
    let node = lock_node(dir);
    let options = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    match req
        .send(client.create(&node, identity.as_bytes(), &options))
        .await
        .no_node_is_lost(|| dir_gone(dir))
    {
        // The node was gone while our session lived (it is now taken afresh).
        Ok(_) => return Err(OpError::Lost(own_node_gone(&node))),
        Err(OpError::Zk(Error::NodeExists)) => {}
        Err(e) => return Err(e),
    }
    match req.send(client.get_data(&node)).await {
        Ok((data, stat)) if data == identity.as_bytes() && stat.czxid == held.token => Ok(true),
        Ok(_) | Err(OpError::Zk(Error::NoNode)) => Err(OpError::Lost(own_node_gone(&node))),
        Err(e) => Err(e),
    }
}
