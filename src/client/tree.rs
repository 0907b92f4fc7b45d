//! A whole tree of znodes read through one session: every path under a root with its data and
//! the Stat fields that every replica must agree on (the ones a transaction sets; `ctime`,
//! `mtime` and `aversion` are left out).

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use zookeeper_client::Client;

/// Requests in flight at once on the session while a level of the tree is read.
const IN_FLIGHT: usize = 64;

/// One znode as a server serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Znode {
    /// Its data, escaped (`[u8]::escape_ascii`: printable ASCII as is, anything else as
    /// `\xNN`), so that two values are equal exactly when their bytes are.
    pub data: String,
    /// The zxid that created it.
    pub czxid: i64,
    /// The zxid that last set its data.
    pub mzxid: i64,
    /// The zxid that last created or deleted a child.
    pub pzxid: i64,
    /// Its data version.
    pub version: i32,
    /// Its children's version.
    pub cversion: i32,
    /// The session owning it when ephemeral, else 0.
    pub ephemeral_owner: i64,
    /// How many children it has.
    pub num_children: i32,
}

impl Znode {
    /// Each field with its value as text, in a fixed order: `data`, then the Stat fields by
    /// their ZooKeeper names (`czxid`, `mzxid`, `pzxid`, `version`, `cversion`,
    /// `ephemeralOwner`, `numChildren`), zxids and sessions in hex.
    pub fn fields(&self) -> [(&'static str, String); 8] {
        [
            ("data", format!("{:?}", self.data)),
            ("czxid", format!("{:#x}", self.czxid)),
            ("mzxid", format!("{:#x}", self.mzxid)),
            ("pzxid", format!("{:#x}", self.pzxid)),
            ("version", self.version.to_string()),
            ("cversion", self.cversion.to_string()),
            ("ephemeralOwner", format!("{:#x}", self.ephemeral_owner)),
            ("numChildren", self.num_children.to_string()),
        ]
    }
}

/// Every znode under a root (the root included), by path.
pub type Tree = BTreeMap<String, Znode>;

/// Reads `root` and everything below it through `client`, a level at a time. A root that
/// does not exist is an empty tree; a znode deleted between its parent's listing and its
/// own read is left out (the caller knows the tree moved from the server's zxid).
pub async fn read_tree(client: &Client, root: &str) -> Result<Tree, zookeeper_client::Error> {
    let mut tree = Tree::new();
    let mut level = vec![root.to_string()];
    while !level.is_empty() {
        // Each read owns its client and path, so the future is `Send` for any caller (a
        // spawned task too).
        let read: Vec<Option<(Znode, Vec<String>)>> = futures::stream::iter(level.clone())
            .map(|path| {
                let client = client.clone();
                async move { read_znode(&client, &path).await }
            })
            .buffered(IN_FLIGHT)
            .try_collect()
            .await?;
        let mut next = Vec::new();
        for (path, read) in level.iter().zip(read) {
            let Some((znode, children)) = read else {
                continue;
            };
            next.extend(children.iter().map(|c| child_path(path, c)));
            tree.insert(path.clone(), znode);
        }
        level = next;
    }
    Ok(tree)
}

/// One znode and the names of its children, `None` when it does not exist.
async fn read_znode(
    client: &Client,
    path: &str,
) -> Result<Option<(Znode, Vec<String>)>, zookeeper_client::Error> {
    let (data, stat) = match client.get_data(path).await {
        Err(zookeeper_client::Error::NoNode) => return Ok(None),
        read => read?,
    };
    // A leaf's children are not asked for: most znodes a workload leaves are leaves, and
    // on emulated guests every request counts. A child created between the two requests is
    // missed, as one created a moment after the listing would be: the tree is not read at
    // one instant (the replicas' reader keeps only reads across which the zxid stood still).
    let children = match stat.num_children {
        0 => Vec::new(),
        _ => match client.list_children(path).await {
            Err(zookeeper_client::Error::NoNode) => return Ok(None),
            listed => listed?,
        },
    };
    let znode = Znode {
        data: data.escape_ascii().to_string(),
        czxid: stat.czxid,
        mzxid: stat.mzxid,
        pzxid: stat.pzxid,
        version: stat.version,
        cversion: stat.cversion,
        ephemeral_owner: stat.ephemeral_owner,
        num_children: stat.num_children,
    };
    Ok(Some((znode, children)))
}

/// The path of child `name` of `parent`.
fn child_path(parent: &str, name: &str) -> String {
    match parent {
        "/" => format!("/{name}"),
        _ => format!("{parent}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zookeeper_client::{Acls, CreateMode};

    #[tokio::test]
    async fn reads_every_znode_below_the_root_with_its_stat() {
        let server = crate::client::test_server::ZkServer::start();
        let client = Client::connect(&server.endpoint().address()).await.unwrap();
        let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
        let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
        client.create("/t", b"", &persistent).await.unwrap();
        client.create("/t/a", b"x\x01", &persistent).await.unwrap();
        client.create("/t/a/b", b"", &ephemeral).await.unwrap();
        client.create("/other", b"", &persistent).await.unwrap();
        client.set_data("/t/a", b"y\x02", None).await.unwrap();
        let tree = read_tree(&client, "/t").await.unwrap();
        assert_eq!(
            tree.keys().collect::<Vec<_>>(),
            ["/t", "/t/a", "/t/a/b"],
            "the root and what is below it, nothing else"
        );
        let a = &tree["/t/a"];
        assert_eq!(
            (a.data.as_str(), a.version, a.num_children),
            ("y\\x02", 1, 1)
        );
        assert!(a.mzxid > a.czxid && a.pzxid > a.czxid);
        assert_eq!(tree["/t/a/b"].ephemeral_owner, client.session_id().0);
        assert_eq!(tree["/t"].cversion, 1);
        assert!(read_tree(&client, "/missing").await.unwrap().is_empty());
    }
}
