//! `election-unfair`: every candidate tries to create the same ephemeral leader node holding
//! its identity; the one whose create succeeds leads, the others watch the node (an exists
//! watch) and all run again when it is deleted. Finding its own identity in the node tells a
//! candidate that a create whose answer it lost went through.

use zookeeper_client::{Acls, Client, CreateMode, Error};

use super::recipe::Won;
use crate::client::{NoNodeIsLost, OpError};
use crate::workload::Requests;

/// The leader node under the election's directory.
fn leader_node(dir: &str) -> String {
    format!("{dir}/leader")
}

/// Campaigns until this candidate's create of the leader node succeeds.
pub async fn campaign(
    dir: &str,
    client: &Client,
    identity: &str,
    req: &mut Requests<'_>,
) -> Result<Won, OpError> {
    let node = leader_node(dir);
    let options = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    let won = |token| Won {
        token,
        nodes: vec![node.clone()],
    };
    loop {
        match req
            .send(client.create(&node, identity.as_bytes(), &options))
            .await
            .no_node_is_lost(|| super::recipe::dir_gone(dir))
        {
            Ok((stat, _)) => return Ok(won(stat.czxid)),
            Err(OpError::Zk(Error::NodeExists)) => {}
            Err(e) => return Err(e),
        }
        match req.send(client.get_data(&node)).await {
            Ok((data, stat)) if data == identity.as_bytes() => return Ok(won(stat.czxid)),
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
