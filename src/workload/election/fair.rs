//! `election-fair`: ZooKeeper's election recipe. Each candidate creates an ephemeral
//! sequential node under `candidates`; the smallest leads; every other candidate watches only
//! its predecessor and lists the candidates again when that watch fires. Once elected, the
//! leader writes the acknowledgement node `leader` (ephemeral, holding its identity) before it
//! acts as leader, waiting first for a previous leader's acknowledgement to disappear.

use zookeeper_client::{Acls, Client, CreateMode, Error};

use super::recipe::Won;
use crate::client::{NoNodeIsLost, OpError};
use crate::workload::Requests;

const PREFIX: &str = "c-";

/// The directory of candidate nodes under the election's directory.
pub fn candidates(dir: &str) -> String {
    format!("{dir}/candidates")
}

/// The sequence number of a candidate node named `c-<n>`.
fn sequence(child: &str) -> Option<i64> {
    child.strip_prefix(PREFIX)?.parse().ok()
}

/// The predecessor of candidate `mine` among `children` (`Ok(None)`: it is the smallest);
/// `Err` when `mine` is not among them: the listing was answered on its session, which so
/// lives, and only a loss of acknowledged state removes its ephemeral node.
fn predecessor(children: &[String], mine: i64) -> Result<Option<&str>, OpError> {
    let mut ahead: Vec<(i64, &str)> = children
        .iter()
        .filter_map(|c| sequence(c).map(|n| (n, c.as_str())))
        .filter(|(n, _)| *n <= mine)
        .collect();
    ahead.sort_unstable();
    match ahead.last() {
        Some((n, _)) if *n == mine => Ok(ahead.len().checked_sub(2).map(|i| ahead[i].1)),
        _ => Err(OpError::Lost(format!(
            "our candidate node {PREFIX}{mine:010} is gone though our session lives"
        ))),
    }
}

/// Campaigns: creates this candidate's node, waits until it is the smallest, then writes the
/// acknowledgement node.
pub async fn campaign(
    dir: &str,
    client: &Client,
    identity: &str,
    req: &mut Requests<'_>,
) -> Result<Won, OpError> {
    let parent = candidates(dir);
    let options = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
    let prefix = format!("{parent}/{PREFIX}");
    let gone = || super::recipe::dir_gone(&parent);
    let (stat, seq) = req
        .send(client.create(&prefix, identity.as_bytes(), &options))
        .await
        .no_node_is_lost(gone)?;
    let mine = seq.into_i64();
    let node = format!("{prefix}{seq}");
    loop {
        let children = req
            .send(client.list_children(&parent))
            .await
            .no_node_is_lost(gone)?;
        let Some(before) = predecessor(&children, mine)? else {
            break;
        };
        let before = format!("{parent}/{before}");
        match req.send(client.check_and_watch_stat(&before)).await? {
            (None, _) => continue,
            (Some(_), watcher) => req.wait(watcher).await?,
        }
    }
    let ack = acknowledge(dir, client, identity, req).await?;
    Ok(Won {
        token: stat.czxid,
        nodes: vec![ack, node],
    })
}

/// Writes the acknowledgement node once a previous leader's is gone; returns its path.
async fn acknowledge(
    dir: &str,
    client: &Client,
    identity: &str,
    req: &mut Requests<'_>,
) -> Result<String, OpError> {
    let ack = format!("{dir}/leader");
    let options = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    loop {
        match req
            .send(client.create(&ack, identity.as_bytes(), &options))
            .await
            .no_node_is_lost(|| super::recipe::dir_gone(dir))
        {
            Ok(_) => return Ok(ack),
            Err(OpError::Zk(Error::NodeExists)) => {}
            Err(e) => return Err(e),
        }
        match req.send(client.get_data(&ack)).await {
            // Our own create went through though its answer was lost.
            Ok((data, _)) if data == identity.as_bytes() => return Ok(ack),
            Ok(_) => {}
            Err(OpError::Zk(Error::NoNode)) => continue,
            Err(e) => return Err(e),
        }
        match req.send(client.check_and_watch_stat(&ack)).await? {
            (None, _) => continue,
            (Some(_), watcher) => req.wait(watcher).await?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smallest_candidate_leads_and_the_others_watch_their_predecessor() {
        let children: Vec<String> = ["c-0000000007", "c-0000000003", "c-0000000005", "x-1"]
            .map(String::from)
            .to_vec();
        assert_eq!(predecessor(&children, 3), Ok(None));
        assert_eq!(predecessor(&children, 5), Ok(Some("c-0000000003")));
        assert_eq!(predecessor(&children, 7), Ok(Some("c-0000000005")));
        assert_eq!(
            predecessor(&children, 4),
            Err(OpError::Lost(
                "our candidate node c-0000000004 is gone though our session lives".into()
            )),
            "our node is gone"
        );
        assert_eq!(sequence("c-0000000042"), Some(42));
        assert_eq!(sequence("leader"), None);
    }
}
