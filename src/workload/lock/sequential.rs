//! `lock-sequential` and `lock-sequential-herd`: each contender creates an ephemeral
//! sequential child of the lock node and holds the lock when its child is the lowest.
//! A waiter either watches only its predecessor (ZooKeeper's recipe) and lists the children
//! again when that watch fires, or watches the whole children list (the herd).

use zookeeper_client::{Acls, Client, CreateMode, Error};

use super::recipe::{Held, Requests};
use crate::client::OpError;

const PREFIX: &str = "lock-";

/// The sequence number of a child named `lock-<n>`.
fn sequence(child: &str) -> Option<i64> {
    child.strip_prefix(PREFIX)?.parse().ok()
}

/// Takes the lock: creates this contender's child, then waits until it is the lowest.
pub async fn acquire(
    dir: &str,
    client: &Client,
    identity: &str,
    herd: bool,
    req: &mut Requests<'_>,
) -> Result<Held, OpError> {
    let options = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
    let prefix = format!("{dir}/{PREFIX}");
    let (stat, seq) = req
        .send(client.create(&prefix, identity.as_bytes(), &options))
        .await?;
    let mine = seq.into_i64();
    let held = Held {
        token: stat.czxid,
        node: format!("{prefix}{seq}"),
    };
    loop {
        let (children, watcher) = if herd {
            let (children, watcher) = req.send(client.list_and_watch_children(dir)).await?;
            (children, Some(watcher))
        } else {
            (req.send(client.list_children(dir)).await?, None)
        };
        let mut ahead: Vec<(i64, &str)> = children
            .iter()
            .filter_map(|c| sequence(c).map(|n| (n, c.as_str())))
            .filter(|(n, _)| *n <= mine)
            .collect();
        ahead.sort_unstable();
        match ahead.last() {
            Some((n, _)) if *n == mine => {}
            // Our node is gone: the session that created it expired.
            _ => return Err(OpError::Zk(Error::NoNode)),
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
        assert_eq!(sequence("lock-"), None);
        assert_eq!(sequence("other-0000000001"), None);
    }
}
