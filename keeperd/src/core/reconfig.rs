//! The `reconfig` request on the leader, as ZooKeeper 3.5+ serves it: checked against the
//! membership committed last and resolved into a setData of `/zookeeper/config` whose data
//! carries the new membership with its own zxid as the version (see [`crate::membership`]);
//! the broadcast commits it once a quorum of the old voters and one of the new voters have
//! it. The reply is a getData reply of the new config (data and stat).

use super::{Core, Role, To};
use crate::auth::{allowed, AuthId};
use crate::membership::{Membership, CONFIG_PATH};
use crate::proto::{err, perms};
use crate::txn::TxnBody;

/// A decoded ReconfigRequest.
pub(super) struct Change {
    pub joining: String,
    pub leaving: String,
    pub new_members: String,
    pub config_id: i64,
}

impl Core {
    /// Answers a `reconfig` request of `session`.
    pub(super) fn reconfig(
        &mut self,
        to: To,
        xid: i32,
        session: i64,
        auth: &[AuthId],
        change: Change,
    ) {
        match self.prep_reconfig(auth, &change) {
            Err(code) => self.reply_to(to, xid, code, |_| {}),
            Ok(body) => {
                self.commit(session, body);
                let node = self.tree.get(CONFIG_PATH).expect("the config node stays");
                let (data, stat) = (node.data.clone(), node.stat());
                self.reply_to(to, xid, err::OK, |w| {
                    w.buffer(&data);
                    stat.write(w);
                });
            }
        }
    }

    /// The transaction of a reconfiguration, or ZooKeeper's error code: UNIMPLEMENTED off a
    /// leader (standalone), NOAUTH without write permission on `/zookeeper/config` (the
    /// superuser has it), RECONFIGINPROGRESS while the last one is not committed,
    /// BADVERSION when the membership's version is not `config_id`, BADARGUMENTS for a
    /// change that does not parse, changes nothing or leaves no voter, NEWCONFIGNOQUORUM
    /// when no quorum of the new voters holds this leader's history now.
    fn prep_reconfig(&self, auth: &[AuthId], change: &Change) -> Result<TxnBody, i32> {
        let Role::Leader { status, .. } = &self.role else {
            return Err(err::UNIMPLEMENTED);
        };
        let node = self.tree.get(CONFIG_PATH).ok_or(err::NO_NODE)?;
        if !allowed(&node.acl, auth, perms::WRITE) {
            return Err(err::NO_AUTH);
        }
        let (data, written) = self.tree.config();
        if written > self.committed_zxid {
            return Err(err::RECONFIG_IN_PROGRESS);
        }
        let current = Membership::parse(&data).map_err(|_| err::BAD_ARGUMENTS)?;
        if change.config_id != -1 && change.config_id != current.version {
            return Err(err::BAD_VERSION);
        }
        let servers = if change.new_members.is_empty() {
            current.incremental(&change.joining, &change.leaving)?
        } else if change.joining.is_empty() && change.leaving.is_empty() {
            current.replaced(&change.new_members)?
        } else {
            return Err(err::BAD_ARGUMENTS);
        };
        let next = Membership::new(servers, self.next_zxid());
        let synced = status.synced();
        let voters = next.voters();
        if voters.iter().filter(|v| synced.contains(v)).count() <= voters.len() / 2 {
            return Err(err::NEW_CONFIG_NO_QUORUM);
        }
        Ok(TxnBody::SetData {
            path: CONFIG_PATH.to_string(),
            data: next.render().into_bytes(),
            version: node.stat().version.wrapping_add(1),
        })
    }

    /// Once the last reconfiguration is committed: forgets the membership before it, and
    /// ends this role if the change took this server's vote or gave it one (a removed or
    /// demoted server then follows as an observer, a promoted one as a follower, a removed
    /// leader leaves the new voters to elect a leader).
    pub(super) fn reconfig_committed(&mut self) {
        let (data, written) = self.tree.config();
        if written == 0 || written > self.committed_zxid || self.tree.config_before.is_none() {
            return;
        }
        self.tree.config_before = None;
        let Ok(membership) = Membership::parse(&data) else {
            return;
        };
        let votes = match &self.role {
            Role::Standalone => return,
            Role::Leader { .. } => true,
            Role::Learner { observer, .. } => !observer,
        };
        let id = self.role.id();
        if membership.is_voter(id) != votes {
            tracing::info!(
                "reconfiguration {written:#x} committed: server {id} {} the voters; ending this role",
                if votes { "left" } else { "joined" }
            );
            self.stopping = true;
        }
    }
}
