//! ZooKeeper's queue recipe over the znodes of one test run: values are persistent sequential
//! children `qn-<n>` of the queue node, holding the value in decimal; a consumer lists the
//! children, tries them from the smallest sequence number up (read the value, delete the
//! node: the delete that succeeds is the consumption, `NoNode` means somebody else took it),
//! and when the list is empty syncs and lists again with a children watch to wait on.
//!
//! The sync makes an empty answer current: every value acknowledged before the dequeue began
//! had been taken by then (what [`super::check`] relies on to call a value lost).

use zookeeper_client::{Acls, Client, CreateMode, Error, OneshotWatcher};

use crate::client::{NoNodeIsLost, OpError};
use crate::workload::Requests;

const PREFIX: &str = "qn-";

/// What one attempt at taking the oldest value found.
pub enum Take {
    /// This value's node was deleted by us: it is consumed.
    Took(u64),
    /// The queue was empty (after a sync); the watch fires on the next change of its children.
    Empty(OneshotWatcher),
}

/// The queue of one test run.
#[derive(Debug, Clone)]
pub struct Queue {
    dir: String,
}

impl Queue {
    /// The queue of test run `run_id` (one znode name): `/stampede/<run_id>/queue`.
    pub fn new(run_id: &str) -> anyhow::Result<Queue> {
        let dir = crate::workload::run_path(run_id, "queue")?;
        Ok(Queue { dir })
    }

    /// The queue node.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// The fact a `no-node` answer on the queue node states.
    fn gone(&self) -> String {
        format!(
            "the queue node {}, created at setup and never deleted, is gone",
            self.dir
        )
    }

    /// Creates the queue node and its parents.
    pub async fn setup(&self, client: &Client) -> Result<(), Error> {
        let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
        client.mkdir(&self.dir, &options).await
    }

    /// Appends `value`; returns the czxid of its node.
    pub async fn enqueue(
        &self,
        client: &Client,
        value: u64,
        req: &mut Requests<'_>,
    ) -> Result<i64, OpError> {
        let options = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
        let prefix = format!("{}/{PREFIX}", self.dir);
        let data = value.to_string();
        let (stat, _) = req
            .send(client.create(&prefix, data.as_bytes(), &options))
            .await
            .no_node_is_lost(|| self.gone())?;
        Ok(stat.czxid)
    }

    /// Takes the oldest value, or finds the queue empty. `trying` holds the value whose
    /// delete is in flight (`None` otherwise), so that a caller giving up, or an error,
    /// tells which value may have been consumed.
    pub async fn take(
        &self,
        client: &Client,
        trying: &mut Option<u64>,
        req: &mut Requests<'_>,
    ) -> Result<Take, OpError> {
        loop {
            let mut children = req
                .send(client.list_children(&self.dir))
                .await
                .no_node_is_lost(|| self.gone())?;
            if children.is_empty() {
                req.send(client.sync(&self.dir)).await?;
                let (listed, watcher) = req
                    .send(client.list_and_watch_children(&self.dir))
                    .await
                    .no_node_is_lost(|| self.gone())?;
                if listed.is_empty() {
                    return Ok(Take::Empty(watcher));
                }
                children = listed;
            }
            for child in oldest_first(&children) {
                let path = format!("{}/{child}", self.dir);
                let data = match req.send(client.get_data(&path)).await {
                    Ok((data, _)) => data,
                    Err(OpError::Zk(Error::NoNode)) => continue,
                    Err(e) => return Err(e),
                };
                let value = parse_value(&data).ok_or_else(|| {
                    OpError::Zk(Error::UnexpectedError(format!(
                        "{path} holds {:?}, not a queued value",
                        String::from_utf8_lossy(&data)
                    )))
                })?;
                *trying = Some(value);
                match req.send(client.delete(&path, None)).await {
                    Ok(()) => return Ok(Take::Took(value)),
                    Err(OpError::Zk(Error::NoNode)) => *trying = None,
                    Err(e) => return Err(e),
                }
            }
        }
    }
}

/// The sequence number of a child named `qn-<n>`.
fn sequence(child: &str) -> Option<i64> {
    child.strip_prefix(PREFIX)?.parse().ok()
}

/// The queue's children by sequence number, smallest first; other names are left out.
fn oldest_first(children: &[String]) -> Vec<&str> {
    let mut numbered: Vec<(i64, &str)> = children
        .iter()
        .filter_map(|c| sequence(c).map(|n| (n, c.as_str())))
        .collect();
    numbered.sort_unstable();
    numbered.into_iter().map(|(_, c)| c).collect()
}

/// A queued value: decimal digits.
fn parse_value(data: &[u8]) -> Option<u64> {
    std::str::from_utf8(data).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_are_taken_by_sequence_number() {
        let children: Vec<String> = ["qn-0000000010", "qn-0000000002", "other", "qn-0000000009"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            oldest_first(&children),
            ["qn-0000000002", "qn-0000000009", "qn-0000000010"]
        );
        assert_eq!(sequence("qn-"), None);
    }

    #[test]
    fn values_are_decimal() {
        assert_eq!(parse_value(b"42"), Some(42));
        assert_eq!(parse_value(b"-1"), None);
        assert_eq!(parse_value(b"\xff"), None);
    }

    #[test]
    fn run_ids_are_one_znode_name() {
        assert_eq!(Queue::new("r1").unwrap().dir(), "/stampede/r1/queue");
        assert!(Queue::new("a/b").is_err());
        assert!(Queue::new("").is_err());
    }
}
