//! `lock-crate`: the zookeeper-client crate's own lock (`Client::lock` with Curator's node
//! names), as a reference to measure the hand-written recipes against. It waits on its
//! predecessor inside the library, so the client-side herd meter cannot see its
//! notifications; the servers' `mntr` figures still count them.

use zookeeper_client::{Acls, Client, LockPrefix};

use crate::client::{NoNodeIsLost, OpError};
use crate::workload::claims::{own_node_gone, Dir, Owned};
use crate::workload::Requests;

/// The lock name in each contender's node, `_c_<uuid>-lock-<n>`.
const NAME: &str = "lock-";

/// Takes the lock in `dir` through the crate; `identity` is stored in the lock node.
pub async fn acquire(
    dir: Dir<'_>,
    client: &Client,
    identity: &str,
    req: &mut Requests<'_>,
) -> Result<Owned, OpError> {
    let prefix = LockPrefix::new_curator(dir.path, NAME).map_err(OpError::Zk)?;
    let lock = client
        .lock(prefix, identity.as_bytes(), Acls::anyone_all())
        .await
        .map_err(OpError::Zk)
        .no_node_is_lost(|| dir.gone())?;
    let node = lock.lock_path().to_string();
    // The release is recorded by the driver and done through `Recipe::release`; dropping the
    // guard would delete the node again in the background, unrecorded.
    std::mem::forget(lock);
    match req.send(client.check_stat(&node)).await? {
        Some(stat) => Ok(Owned {
            token: stat.czxid,
            node,
        }),
        // Gone though our session answers: a loss of acknowledged state.
        None => Err(OpError::Lost(own_node_gone("lock node", &node))),
    }
}
