//! A line of ephemeral sequential children under one directory: each participant creates its
//! child, and the one whose child is the lowest is first in line. A waiter either watches only
//! its predecessor (ZooKeeper's recipe) and lists the children again when that watch fires, or
//! watches the whole children list (the herd). A protected child carries a unique id in its
//! name, so that after a create whose answer was lost (connection loss, timeout) its owner
//! finds it again instead of leaving an orphan that would block everyone once it is the lowest.

use zookeeper_client::{Acls, Client, CreateMode, Error};

use super::{Dir, Owned};
use crate::client::{NoNodeIsLost, OpError};
use crate::workload::Requests;

/// The children of one directory, named `<prefix><n>` (or `_c_<guid>-<prefix><n>` when
/// protected), in the order of their sequence numbers.
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    /// The directory the children live in.
    pub dir: Dir<'a>,
    /// A child's name before its sequence number: `lock-`, `c-`.
    pub prefix: &'a str,
}

/// Where a participant's child stands in a listing of the line.
#[derive(Debug, PartialEq, Eq)]
enum Place<'c> {
    /// It is the lowest.
    First,
    /// Behind this child, its predecessor.
    Behind(&'c str),
    /// Not listed.
    Missing,
}

/// The child among `children` whose name carries `guid`.
fn own_child<'c>(children: &'c [String], guid: &str) -> Option<&'c str> {
    let tag = format!("_c_{guid}-");
    children
        .iter()
        .map(String::as_str)
        .find(|c| c.starts_with(&tag))
}

/// Whether a create that ended in `e` may have been applied by the server.
fn may_have_applied(e: &OpError) -> bool {
    matches!(
        e,
        OpError::Deadline(_) | OpError::Zk(Error::ConnectionLoss | Error::Timeout)
    )
}

impl Line<'_> {
    /// The sequence number of a child named `<prefix><n>` or `_c_<guid>-<prefix><n>`.
    fn sequence(&self, child: &str) -> Option<i64> {
        let (_, n) = child.rsplit_once(self.prefix)?;
        n.parse().ok()
    }

    /// Where the child with sequence number `mine` stands among `children`.
    fn place<'c>(&self, children: &'c [String], mine: i64) -> Place<'c> {
        let mut ahead: Vec<(i64, &str)> = children
            .iter()
            .filter_map(|c| self.sequence(c).map(|n| (n, c.as_str())))
            .filter(|(n, _)| *n <= mine)
            .collect();
        ahead.sort_unstable();
        match ahead.last() {
            Some((n, _)) if *n == mine => match ahead.len().checked_sub(2) {
                None => Place::First,
                Some(i) => Place::Behind(ahead[i].1),
            },
            _ => Place::Missing,
        }
    }

    /// Creates this participant's child holding `identity`; with `protected`, names it with a
    /// unique id and finds it again after a lost create answer.
    pub async fn join(
        &self,
        client: &Client,
        identity: &str,
        protected: bool,
        req: &mut Requests<'_>,
    ) -> Result<Owned, OpError> {
        let (dir, prefix) = (self.dir.path, self.prefix);
        let options = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
        let guid = format!("{:032x}", rand::random::<u128>());
        let path = match protected {
            true => format!("{dir}/_c_{guid}-{prefix}"),
            false => format!("{dir}/{prefix}"),
        };
        loop {
            match req
                .send(client.create(&path, identity.as_bytes(), &options))
                .await
                .no_node_is_lost(|| self.dir.gone())
            {
                Ok((stat, seq)) => {
                    return Ok(Owned {
                        token: stat.czxid,
                        node: format!("{path}{seq}"),
                    })
                }
                Err(e) if protected && may_have_applied(&e) => {
                    let children = req
                        .send(client.list_children(dir))
                        .await
                        .no_node_is_lost(|| self.dir.gone())?;
                    if let Some(child) = own_child(&children, &guid) {
                        let node = format!("{dir}/{child}");
                        let Some(stat) = req.send(client.check_stat(&node)).await? else {
                            // Gone again: only an expired session deletes it.
                            return Err(OpError::Zk(Error::SessionExpired));
                        };
                        return Ok(Owned {
                            token: stat.czxid,
                            node,
                        });
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits until `own`, this participant's child, is the lowest: watching its predecessor,
    /// or with `herd` the whole children list. A listing without `own` was answered on its
    /// session, which so lives, and only a loss of acknowledged state removes its ephemeral
    /// child: that is the fact `lost` states, handed `own`'s sequence number.
    pub async fn wait_first(
        &self,
        client: &Client,
        own: &Owned,
        herd: bool,
        lost: impl FnOnce(i64) -> String,
        req: &mut Requests<'_>,
    ) -> Result<(), OpError> {
        let dir = self.dir.path;
        let mine = own
            .node
            .rsplit_once('/')
            .and_then(|(_, name)| self.sequence(name))
            .ok_or(OpError::Zk(Error::UnexpectedError(format!(
                "created {} without a sequence number",
                own.node
            ))))?;
        loop {
            let (children, watcher) = if herd {
                let (children, watcher) = req
                    .send(client.list_and_watch_children(dir))
                    .await
                    .no_node_is_lost(|| self.dir.gone())?;
                (children, Some(watcher))
            } else {
                let children = req.send(client.list_children(dir)).await;
                (children.no_node_is_lost(|| self.dir.gone())?, None)
            };
            let predecessor = match self.place(&children, mine) {
                Place::First => return Ok(()),
                Place::Missing => return Err(OpError::Lost(lost(mine))),
                Place::Behind(predecessor) => format!("{dir}/{predecessor}"),
            };
            match watcher {
                Some(watcher) => req.wait(watcher).await?,
                None => match req.send(client.check_and_watch_stat(&predecessor)).await? {
                    (None, _) => continue,
                    (Some(_), watcher) => req.wait(watcher).await?,
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCKS: Line = Line {
        dir: Dir {
            path: "/l",
            recipe: "lock",
        },
        prefix: "lock-",
    };

    #[test]
    fn sequence_numbers_come_from_the_suffix() {
        assert_eq!(LOCKS.sequence("lock-0000000042"), Some(42));
        assert_eq!(LOCKS.sequence("_c_0af3-lock-0000000007"), Some(7));
        assert_eq!(LOCKS.sequence("lock-"), None);
        assert_eq!(LOCKS.sequence("other-0000000001"), None);
        let candidates = Line {
            prefix: "c-",
            ..LOCKS
        };
        assert_eq!(candidates.sequence("c-0000000042"), Some(42));
        assert_eq!(candidates.sequence("leader"), None);
    }

    #[test]
    fn the_lowest_child_is_first_and_the_others_wait_on_their_predecessor() {
        let line = Line {
            prefix: "c-",
            ..LOCKS
        };
        let children: Vec<String> = ["c-0000000007", "c-0000000003", "c-0000000005", "x-1"]
            .map(String::from)
            .to_vec();
        assert_eq!(line.place(&children, 3), Place::First);
        assert_eq!(line.place(&children, 5), Place::Behind("c-0000000003"));
        assert_eq!(line.place(&children, 7), Place::Behind("c-0000000005"));
        assert_eq!(
            line.place(&children, 4),
            Place::Missing,
            "our child is gone"
        );
    }

    #[test]
    fn a_participant_finds_its_own_child_by_guid() {
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
