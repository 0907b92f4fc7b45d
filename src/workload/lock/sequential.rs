//! `lock-sequential`, `lock-sequential-herd` and `lock-protected`: each contender creates an
//! ephemeral sequential child of the lock node and holds the lock when its child is the
//! lowest. A waiter either watches only its predecessor (ZooKeeper's recipe) and lists the
//! children again when that watch fires, or watches the whole children list (the herd).
//! The protected variant puts a unique id in its child's name, so that after a create whose
//! answer was lost (connection loss, timeout) it can find its child instead of leaving an
//! orphan that would block everyone once it becomes the lowest.

use zookeeper_client::{Acls, Client, CreateMode, Error};

use super::recipe::Held;
use crate::client::{NoNodeIsLost, OpError};
use crate::workload::Requests;

const PREFIX: &str = "lock-";

/// How a contender waits and names its child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// Watch the whole children list instead of the predecessor.
    pub herd: bool,
    /// Name the child `_c_<guid>-lock-<n>` and look for it after a lost create answer.
    pub protected: bool,
}

/// The sequence number of a child named `lock-<n>` or `_c_<guid>-lock-<n>`.
fn sequence(child: &str) -> Option<i64> {
    let (_, n) = child.rsplit_once(PREFIX)?;
    n.parse().ok()
}

/// The child among `children` whose name carries `guid`.
fn own_child<'a>(children: &'a [String], guid: &str) -> Option<&'a str> {
    let tag = format!("_c_{guid}-");
    children
        .iter()
        .map(String::as_str)
        .find(|c| c.starts_with(&tag))
}

/// The fact a `no-node` answer on the lock directory states.
pub fn dir_gone(dir: &str) -> String {
    format!("the lock directory {dir}, created at setup and never deleted, is gone")
}

/// The fact a live session's lock node missing states.
pub fn own_node_gone(node: &str) -> String {
    format!("our lock node {node} is gone though our session lives")
}

/// Whether a create that ended in `e` may have been applied by the server.
fn may_have_applied(e: &OpError) -> bool {
    matches!(
        e,
        OpError::Deadline(_) | OpError::Zk(Error::ConnectionLoss | Error::Timeout)
    )
}

/// Creates this contender's child; with protection, finds it again after a lost answer.
async fn create_child(
    dir: &str,
    client: &Client,
    identity: &str,
    protected: bool,
    req: &mut Requests<'_>,
) -> Result<Held, OpError> {
    let options = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
    let guid = format!("{:032x}", rand::random::<u128>());
    let prefix = match protected {
        true => format!("{dir}/_c_{guid}-{PREFIX}"),
        false => format!("{dir}/{PREFIX}"),
    };
    loop {
        match req
            .send(client.create(&prefix, identity.as_bytes(), &options))
            .await
            .no_node_is_lost(|| dir_gone(dir))
        {
            Ok((stat, seq)) => {
                return Ok(Held {
                    token: stat.czxid,
                    node: format!("{prefix}{seq}"),
                })
            }
            Err(e) if protected && may_have_applied(&e) => {
                let children = req
                    .send(client.list_children(dir))
                    .await
                    .no_node_is_lost(|| dir_gone(dir))?;
                if let Some(child) = own_child(&children, &guid) {
                    let node = format!("{dir}/{child}");
                    let Some(stat) = req.send(client.check_stat(&node)).await? else {
                        // Gone again: only an expired session deletes it.
                        return Err(OpError::Zk(Error::SessionExpired));
                    };
                    return Ok(Held {
                        token: stat.czxid,
                        node,
                    });
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Takes the lock: creates this contender's child, then waits until it is the lowest.
pub async fn acquire(
    dir: &str,
    client: &Client,
    identity: &str,
    variant: Variant,
    req: &mut Requests<'_>,
) -> Result<Held, OpError> {
    let held = create_child(dir, client, identity, variant.protected, req).await?;
    let mine = held
        .node
        .rsplit_once('/')
        .and_then(|(_, name)| sequence(name))
        .ok_or(OpError::Zk(Error::UnexpectedError(format!(
            "created {} without a sequence number",
            held.node
        ))))?;
    loop {
        let (children, watcher) = if variant.herd {
            let (children, watcher) = req
                .send(client.list_and_watch_children(dir))
                .await
                .no_node_is_lost(|| dir_gone(dir))?;
            (children, Some(watcher))
        } else {
            let children = req.send(client.list_children(dir)).await;
            (children.no_node_is_lost(|| dir_gone(dir))?, None)
        };
        let mut ahead: Vec<(i64, &str)> = children
            .iter()
            .filter_map(|c| sequence(c).map(|n| (n, c.as_str())))
            .filter(|(n, _)| *n <= mine)
            .collect();
        ahead.sort_unstable();
        match ahead.last() {
            Some((n, _)) if *n == mine => {}
            // The listing was answered on our session, so the session lives: only a loss of
            // acknowledged state removes its ephemeral node.
            _ => return Err(OpError::Lost(own_node_gone(&held.node))),
        }
        if ahead.len() == 1 {
            return Ok(held);
        }
        match watcher {
            Some(watcher) => req.wait(watcher).await?,
            None => {
                let predecessor = format!("{dir}/{}", ahead[ahead.len() - 2].1);
                match req.send(client.check_and_watch_stat(&predecessor)).await? {
                    (None, _) => continue,
                    (Some(_), watcher) => req.wait(watcher).await?,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_come_from_the_suffix() {
        assert_eq!(sequence("lock-0000000042"), Some(42));
        assert_eq!(sequence("_c_0af3-lock-0000000007"), Some(7));
        assert_eq!(sequence("lock-"), None);
        assert_eq!(sequence("other-0000000001"), None);
    }

    #[test]
    fn a_contender_finds_its_own_child_by_guid() {
        let children = [
            "_c_aaaa-lock-0000000003".to_string(),
            "_c_bbbb-lock-0000000004".to_string(),
            "lock-0000000005".to_string(),
        ];
        assert_eq!(
            own_child(&children, "bbbb"),
            Some("_c_bbbb-lock-0000000004")
        );
        assert_eq!(own_child(&children, "cccc"), None);
        assert!(may_have_applied(&OpError::Zk(Error::ConnectionLoss)));
        assert!(!may_have_applied(&OpError::Zk(Error::NoNode)));
    }
}
