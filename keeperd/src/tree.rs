//! The data tree: the deterministic state machine. It applies transactions in
//! zxid order and reports the changes each one made, from which watches fire.
//! It also holds the durable part of sessions (id, timeout, password), and
//! [`DataTree::capture`]s itself for a snapshot image, which is encoded
//! elsewhere, and decodes such images. A capture costs next to nothing: the
//! nodes live in shards the capture shares, and a change to a shard that a
//! capture still holds copies that shard first (its entries are paths,
//! Arcs and stats; the children index is not part of it).

use crate::jute::{DecodeError, DecodeResult, Reader, Writer};
use crate::proto::{Acl, Stat};
use crate::txn::{Txn, TxnBody};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// ephemeralOwner marking a container node.
pub const CONTAINER_OWNER: i64 = i64::MIN;
/// High byte of ephemeralOwner marking a TTL node (low bits hold the TTL).
pub const TTL_MARK: i64 = 0xFF00_0000_0000_0000u64 as i64;
/// Largest TTL that fits beside the mark.
pub const MAX_TTL: i64 = 0x00FF_FFFF_FFFF;

/// The kind of node an ephemeralOwner value denotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerKind {
    /// Ordinary persistent node.
    Persistent,
    /// Ephemeral node owned by a session.
    Ephemeral(i64),
    /// Container node.
    Container,
    /// TTL node with its TTL in ms.
    Ttl(i64),
}

/// Classifies an ephemeralOwner value as ZooKeeper's EphemeralType does.
pub fn owner_kind(owner: i64) -> OwnerKind {
    if owner == 0 {
        OwnerKind::Persistent
    } else if owner == CONTAINER_OWNER {
        OwnerKind::Container
    } else if owner & TTL_MARK == TTL_MARK {
        OwnerKind::Ttl(owner & MAX_TTL)
    } else {
        OwnerKind::Ephemeral(owner)
    }
}

/// One znode (its children's names are in the tree's children index).
#[derive(Debug, Clone)]
pub struct Node {
    /// Data (replaced whole by setData, so snapshots can share it).
    pub data: Arc<[u8]>,
    /// ACL, shared between nodes with equal ACLs.
    pub acl: Arc<[Acl]>,
    /// Stat, counting the children; data_length is filled in by [`Node::stat`].
    stat: Stat,
    /// Children created so far: the next sequential child's suffix. Unlike
    /// cversion it does not count deletes (as in ZooKeeper: create, delete,
    /// create -s gives suffix 1 with cversion 3).
    pub seq: i32,
}

impl Node {
    /// The node's full stat.
    pub fn stat(&self) -> Stat {
        Stat {
            data_length: self.data.len() as i32,
            ..self.stat
        }
    }
}

impl Stat {
    /// This stat with the child count of `current` (insert_node and
    /// remove_node keep that count; reverting restores everything else).
    fn with_children_of(self, current: &Stat) -> Stat {
        Stat {
            num_children: current.num_children,
            ..self
        }
    }
}

/// Shards of the node table; see the module docs.
const SHARDS: usize = 1024;

type Shard = HashMap<Arc<str>, Node>;

/// The znodes by path, in copy-on-write shards.
struct Nodes {
    shards: Vec<Arc<Shard>>,
    len: usize,
}

/// FNV-1a of `bytes`, continuing from `h`.
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h = (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a of the path, picking its shard.
fn shard_of(path: &str) -> usize {
    (fnv(FNV_START, path.as_bytes()) as usize) & (SHARDS - 1)
}

impl Nodes {
    fn new() -> Nodes {
        Nodes {
            shards: (0..SHARDS).map(|_| Arc::new(Shard::new())).collect(),
            len: 0,
        }
    }

    fn get(&self, path: &str) -> Option<&Node> {
        self.shards[shard_of(path)].get(path)
    }

    /// The node, copying its shard first if a capture holds it.
    fn get_mut(&mut self, path: &str) -> Option<&mut Node> {
        let shard = &mut self.shards[shard_of(path)];
        if !shard.contains_key(path) {
            return None;
        }
        Arc::make_mut(shard).get_mut(path)
    }

    fn insert(&mut self, path: &str, node: Node) {
        let shard = Arc::make_mut(&mut self.shards[shard_of(path)]);
        if shard.insert(path.into(), node).is_none() {
            self.len += 1;
        }
    }

    fn remove(&mut self, path: &str) -> Option<Node> {
        let shard = &mut self.shards[shard_of(path)];
        if !shard.contains_key(path) {
            return None;
        }
        let node = Arc::make_mut(shard).remove(path);
        self.len -= 1;
        node
    }
}

/// A session as the log knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    /// Negotiated timeout, ms.
    pub timeout: i32,
    /// Password the client must present to resume.
    pub password: Vec<u8>,
}

/// A change a transaction made, for firing watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Node created.
    Created(String),
    /// Node deleted.
    Deleted(String),
    /// Node data changed.
    DataChanged(String),
    /// Children of this node changed.
    ChildrenChanged(String),
}

/// How to revert one applied sub-transaction (multi rollback).
#[derive(Debug)]
pub enum Undo {
    /// Nothing to revert.
    Nothing,
    /// Remove the created node and restore its parent's stat.
    Created {
        path: String,
        parent_stat: Stat,
        parent_seq: i32,
    },
    /// Put the deleted node back and restore its parent's stat.
    Deleted {
        path: String,
        node: Node,
        parent_stat: Stat,
    },
    /// Restore data and stat.
    DataSet {
        path: String,
        data: Arc<[u8]>,
        stat: Stat,
    },
    /// Restore ACL and stat.
    AclSet {
        path: String,
        acl: Arc<[Acl]>,
        stat: Stat,
    },
}

/// The znodes, the session records and the last applied zxid.
pub struct DataTree {
    nodes: Nodes,
    /// Names of the children of every node that has some.
    children: HashMap<Arc<str>, BTreeSet<String>>,
    ephemerals: HashMap<i64, BTreeSet<String>>,
    /// Container and TTL nodes, checked by the reaper.
    pub reapable: HashSet<String>,
    /// Open sessions.
    pub sessions: HashMap<i64, SessionRecord>,
    /// Zxid of the last applied transaction.
    pub last_zxid: i64,
    data_size: u64,
    acl_cache: HashMap<Vec<Acl>, Arc<[Acl]>>,
    /// The membership (`/zookeeper/config` data) a reconfiguration applied since this tree
    /// was loaded replaced, until that reconfiguration is known committed: a leader whose
    /// history ends with it needs the old voters' quorum as well as the new ones'.
    pub config_before: Option<Arc<[u8]>>,
}

/// The parent path of `path` ("/" for top-level nodes).
pub fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

fn child_name(path: &str) -> &str {
    &path[path.rfind('/').map_or(0, |i| i + 1)..]
}

impl Default for DataTree {
    fn default() -> Self {
        Self::new()
    }
}

impl DataTree {
    /// Seeds `/zookeeper/config` with `data` (the config file's membership) unless a
    /// reconfiguration wrote it: not a transaction, every member seeds the same.
    pub fn seed_config(&mut self, data: &[u8]) {
        let path = crate::membership::CONFIG_PATH;
        if let Some(node) = self.nodes.get_mut(path) {
            if node.stat.mzxid == 0 && *node.data != *data {
                let old = std::mem::replace(&mut node.data, data.into());
                self.data_size = self.data_size + data.len() as u64 - old.len() as u64;
            }
        }
    }

    /// The membership data (`/zookeeper/config`) and the zxid that wrote it (0: seeded).
    pub fn config(&self) -> (Arc<[u8]>, i64) {
        let node = self.nodes.get(crate::membership::CONFIG_PATH);
        node.map_or((Arc::new([]), 0), |n| (n.data.clone(), n.stat.mzxid))
    }

    /// A tree holding only "/" and ZooKeeper's system nodes.
    pub fn new() -> Self {
        let mut t = DataTree {
            nodes: Nodes::new(),
            children: HashMap::new(),
            ephemerals: HashMap::new(),
            reapable: HashSet::new(),
            sessions: HashMap::new(),
            last_zxid: 0,
            data_size: 0,
            acl_cache: HashMap::new(),
            config_before: None,
        };
        let acl = t.intern_acl(vec![Acl::open()]);
        t.nodes.insert(
            "/",
            Node {
                data: Arc::new([]),
                acl: acl.clone(),
                stat: Stat::default(),
                seq: 0,
            },
        );
        // As in ZooKeeper 3.5.3+, only the superuser may write /zookeeper/config.
        let read_only = t.intern_acl(vec![Acl {
            perms: crate::proto::perms::READ,
            ..Acl::open()
        }]);
        for path in ["/zookeeper", "/zookeeper/quota", "/zookeeper/config"] {
            t.insert_node(
                path,
                Node {
                    data: Arc::new([]),
                    acl: match path {
                        crate::membership::CONFIG_PATH => read_only.clone(),
                        _ => acl.clone(),
                    },
                    stat: Stat::default(),
                    seq: 0,
                },
            );
        }
        t
    }

    fn intern_acl(&mut self, acl: Vec<Acl>) -> Arc<[Acl]> {
        if let Some(a) = self.acl_cache.get(&acl) {
            return a.clone();
        }
        let a: Arc<[Acl]> = acl.clone().into();
        self.acl_cache.insert(acl, a.clone());
        a
    }

    fn insert_node(&mut self, path: &str, node: Node) {
        let parent_path = parent_of(path);
        if let Some(parent) = self.nodes.get_mut(parent_path) {
            parent.stat.num_children += 1;
            match self.children.get_mut(parent_path) {
                Some(names) => {
                    names.insert(child_name(path).to_string());
                }
                None => {
                    let names = BTreeSet::from([child_name(path).to_string()]);
                    self.children.insert(parent_path.into(), names);
                }
            }
        }
        if let OwnerKind::Ephemeral(s) = owner_kind(node.stat.ephemeral_owner) {
            self.ephemerals
                .entry(s)
                .or_default()
                .insert(path.to_string());
        } else if node.stat.ephemeral_owner != 0 {
            self.reapable.insert(path.to_string());
        }
        self.data_size += (path.len() + node.data.len()) as u64;
        self.nodes.insert(path, node);
    }

    fn remove_node(&mut self, path: &str) -> Option<Node> {
        let node = self.nodes.remove(path)?;
        let parent_path = parent_of(path);
        if let Some(parent) = self.nodes.get_mut(parent_path) {
            parent.stat.num_children -= 1;
        }
        if let Some(names) = self.children.get_mut(parent_path) {
            names.remove(child_name(path));
            if names.is_empty() {
                self.children.remove(parent_path);
            }
        }
        if let OwnerKind::Ephemeral(s) = owner_kind(node.stat.ephemeral_owner) {
            if let Some(set) = self.ephemerals.get_mut(&s) {
                set.remove(path);
                if set.is_empty() {
                    self.ephemerals.remove(&s);
                }
            }
        }
        self.reapable.remove(path);
        self.data_size -= (path.len() + node.data.len()) as u64;
        Some(node)
    }

    /// The node at `path`.
    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path)
    }

    /// The names of the children of `path`, in order.
    pub fn children(&self, path: &str) -> &BTreeSet<String> {
        static NONE: BTreeSet<String> = BTreeSet::new();
        self.children.get(path).unwrap_or(&NONE)
    }

    /// A digest of everything the log replicates (every node with its data,
    /// ACL and stat, every session), the same on two servers exactly when
    /// their states are, whatever order things were inserted in.
    pub fn digest(&self) -> u64 {
        let mut sum: u64 = 0;
        for shard in &self.nodes.shards {
            for (path, node) in shard.iter() {
                let mut h = fnv(FNV_START, path.as_bytes());
                h = fnv(h, &node.data);
                let mut w = Writer::new();
                node.stat().write(&mut w);
                w.i32(node.seq);
                Acl::write_list(&node.acl, &mut w);
                sum = sum.wrapping_add(fnv(h, &w.buf));
            }
        }
        for (id, s) in &self.sessions {
            let h = fnv(fnv(FNV_START, &id.to_be_bytes()), &s.timeout.to_be_bytes());
            sum = sum.wrapping_add(fnv(h, &s.password));
        }
        sum
    }

    /// Number of znodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len
    }

    /// Approximate bytes of paths and data.
    pub fn data_size(&self) -> u64 {
        self.data_size
    }

    /// Number of ephemeral nodes.
    pub fn ephemeral_count(&self) -> usize {
        self.ephemerals.values().map(|s| s.len()).sum()
    }

    /// Ephemeral paths owned by `session`.
    pub fn ephemerals_of(&self, session: i64) -> Vec<String> {
        self.ephemerals
            .get(&session)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Leaves ephemeral `path` out of `session`'s ephemerals, so that the session's end
    /// keeps it (failpoint `keep-ephemeral`).
    pub fn disown(&mut self, session: i64, path: &str) {
        if let Some(set) = self.ephemerals.get_mut(&session) {
            set.remove(path);
        }
    }

    /// Number of descendants of `path` (not counting itself).
    pub fn descendant_count(&self, path: &str) -> usize {
        self.children(path)
            .iter()
            .map(|c| 1 + self.descendant_count(&join(path, c)))
            .sum()
    }

    /// Applies a whole transaction, appending the changes it made.
    pub fn apply(&mut self, txn: &Txn, changes: &mut Vec<Change>) {
        match &txn.body {
            TxnBody::CreateSession { timeout, password } => {
                self.sessions.insert(
                    txn.session,
                    SessionRecord {
                        timeout: *timeout,
                        password: password.clone(),
                    },
                );
            }
            TxnBody::CloseSession => {
                for path in self.ephemerals_of(txn.session) {
                    self.apply_body(txn.zxid, txn.time, &TxnBody::Delete { path }, changes);
                }
                self.sessions.remove(&txn.session);
            }
            TxnBody::Multi(subs) => {
                for s in subs {
                    self.apply_body(txn.zxid, txn.time, s, changes);
                }
            }
            body => {
                self.apply_body(txn.zxid, txn.time, body, changes);
            }
        }
        self.last_zxid = txn.zxid;
    }

    /// Applies one node-level change and returns how to revert it.
    pub fn apply_body(
        &mut self,
        zxid: i64,
        time: i64,
        body: &TxnBody,
        changes: &mut Vec<Change>,
    ) -> Undo {
        match body {
            TxnBody::Create {
                path,
                data,
                acl,
                ephemeral_owner,
            } => {
                let parent_path = parent_of(path).to_string();
                // As in ZooKeeper, a create of an existing node changes nothing
                // (a leader never logs one; a replica that kept a transaction
                // its leader never had could meet one).
                if self.nodes.get(path).is_some() {
                    return Undo::Nothing;
                }
                let Some(parent) = self.nodes.get_mut(parent_path.as_str()) else {
                    return Undo::Nothing;
                };
                let (parent_stat, parent_seq) = (parent.stat, parent.seq);
                parent.stat.cversion = parent.stat.cversion.wrapping_add(1);
                parent.stat.pzxid = zxid;
                parent.seq = parent.seq.wrapping_add(1);
                let stat = Stat {
                    czxid: zxid,
                    mzxid: zxid,
                    ctime: time,
                    mtime: time,
                    pzxid: zxid,
                    ephemeral_owner: *ephemeral_owner,
                    ..Stat::default()
                };
                let acl = self.intern_acl(acl.clone());
                self.insert_node(
                    path,
                    Node {
                        data: data.as_slice().into(),
                        acl,
                        stat,
                        seq: 0,
                    },
                );
                changes.push(Change::Created(path.clone()));
                changes.push(Change::ChildrenChanged(parent_path));
                Undo::Created {
                    path: path.clone(),
                    parent_stat,
                    parent_seq,
                }
            }
            TxnBody::Delete { path } => {
                let parent_path = parent_of(path).to_string();
                let Some(node) = self.remove_node(path) else {
                    return Undo::Nothing;
                };
                let mut parent_stat = Stat::default();
                if let Some(parent) = self.nodes.get_mut(parent_path.as_str()) {
                    parent_stat = parent.stat;
                    parent.stat.cversion = parent.stat.cversion.wrapping_add(1);
                    parent.stat.pzxid = zxid;
                }
                changes.push(Change::Deleted(path.clone()));
                changes.push(Change::ChildrenChanged(parent_path));
                Undo::Deleted {
                    path: path.clone(),
                    node,
                    parent_stat,
                }
            }
            TxnBody::SetData {
                path,
                data,
                version,
            } => {
                let Some(node) = self.nodes.get_mut(path.as_str()) else {
                    return Undo::Nothing;
                };
                let undo = Undo::DataSet {
                    path: path.clone(),
                    data: std::mem::replace(&mut node.data, data.as_slice().into()),
                    stat: node.stat,
                };
                if path == crate::membership::CONFIG_PATH {
                    if let Undo::DataSet { data: old, .. } = &undo {
                        self.config_before = Some(old.clone());
                    }
                }
                node.stat.version = *version;
                node.stat.mzxid = zxid;
                node.stat.mtime = time;
                if let Undo::DataSet { data: old, .. } = &undo {
                    self.data_size = self.data_size + data.len() as u64 - old.len() as u64;
                }
                changes.push(Change::DataChanged(path.clone()));
                undo
            }
            TxnBody::SetAcl { path, acl, version } => {
                let acl = self.intern_acl(acl.clone());
                let Some(node) = self.nodes.get_mut(path.as_str()) else {
                    return Undo::Nothing;
                };
                let undo = Undo::AclSet {
                    path: path.clone(),
                    acl: std::mem::replace(&mut node.acl, acl),
                    stat: node.stat,
                };
                node.stat.aversion = *version;
                undo
            }
            TxnBody::CreateSession { .. } | TxnBody::CloseSession | TxnBody::Multi(_) => {
                Undo::Nothing
            }
        }
    }

    /// Reverts one sub-transaction applied by [`DataTree::apply_body`].
    pub fn revert(&mut self, undo: Undo) {
        match undo {
            Undo::Nothing => {}
            Undo::Created {
                path,
                parent_stat,
                parent_seq,
            } => {
                self.remove_node(&path);
                if let Some(p) = self.nodes.get_mut(parent_of(&path)) {
                    p.stat = parent_stat.with_children_of(&p.stat);
                    p.seq = parent_seq;
                }
            }
            Undo::Deleted {
                path,
                node,
                parent_stat,
            } => {
                self.insert_node(&path, node);
                if let Some(p) = self.nodes.get_mut(parent_of(&path)) {
                    p.stat = parent_stat.with_children_of(&p.stat);
                }
            }
            Undo::DataSet { path, data, stat } => {
                if let Some(n) = self.nodes.get_mut(path.as_str()) {
                    self.data_size = self.data_size + data.len() as u64 - n.data.len() as u64;
                    n.data = data;
                    n.stat = stat;
                }
            }
            Undo::AclSet { path, acl, stat } => {
                if let Some(n) = self.nodes.get_mut(path.as_str()) {
                    n.acl = acl;
                    n.stat = stat;
                }
            }
        }
    }

    /// Everything a snapshot stores, as of now.
    /// A copy of the tree that shares the node shards with it (each side
    /// copies a shard on its first change to it, as for a capture).
    pub fn fork(&self) -> DataTree {
        DataTree {
            nodes: Nodes {
                shards: self.nodes.shards.clone(),
                len: self.nodes.len,
            },
            children: self.children.clone(),
            ephemerals: self.ephemerals.clone(),
            reapable: self.reapable.clone(),
            sessions: self.sessions.clone(),
            last_zxid: self.last_zxid,
            data_size: self.data_size,
            acl_cache: self.acl_cache.clone(),
            config_before: self.config_before.clone(),
        }
    }

    pub fn capture(&self) -> Capture {
        let mut sessions: Vec<_> = self
            .sessions
            .iter()
            .map(|(id, s)| (*id, s.clone()))
            .collect();
        sessions.sort_by_key(|(id, _)| *id);
        Capture {
            last_zxid: self.last_zxid,
            sessions,
            shards: self.nodes.shards.clone(),
        }
    }

    /// The whole tree and session table as one snapshot image.
    pub fn encode_snapshot(&self) -> Vec<u8> {
        let mut image = Vec::new();
        let encoded = self.capture().encode(|piece| {
            image.extend_from_slice(piece);
            Ok::<(), std::convert::Infallible>(())
        });
        match encoded {
            Ok(()) => image,
            Err(never) => match never {},
        }
    }

    /// Decodes a snapshot image made by [`Capture::encode`].
    pub fn decode_snapshot(bytes: &[u8]) -> DecodeResult<DataTree> {
        let mut r = Reader::new(bytes);
        let mut t = DataTree {
            nodes: Nodes::new(),
            children: HashMap::new(),
            ..DataTree::new()
        };
        t.data_size = 0;
        t.ephemerals.clear();
        t.reapable.clear();
        t.last_zxid = r.i64()?;
        let sessions = r.i32()?;
        for _ in 0..sessions.max(0) {
            let id = r.i64()?;
            t.sessions.insert(
                id,
                SessionRecord {
                    timeout: r.i32()?,
                    password: r.buffer()?,
                },
            );
        }
        let count = r.i64()?;
        for i in 0..count.max(0) {
            let path = r.string()?;
            let data = r.buffer()?;
            let acl = r.vec(Acl::read)?;
            // The children are counted again as they are inserted.
            let stat = Stat {
                num_children: 0,
                ..Stat::read(&mut r)?
            };
            let seq = r.i32()?;
            let acl = t.intern_acl(acl);
            if i == 0 {
                if path != "/" {
                    return Err(DecodeError("snapshot does not start at the root"));
                }
            } else if t.nodes.get(parent_of(&path)).is_none() {
                return Err(DecodeError("snapshot node before its parent"));
            }
            t.insert_node(
                &path,
                Node {
                    data: data.into(),
                    acl,
                    stat,
                    seq,
                },
            );
        }
        if r.remaining() != 0 || t.nodes.get("/").is_none() {
            return Err(DecodeError("snapshot has trailing bytes or no root"));
        }
        Ok(t)
    }
}

/// The tree's content at one zxid, for a snapshot (see [`DataTree::capture`]).
pub struct Capture {
    /// Zxid of the last transaction the capture includes.
    pub last_zxid: i64,
    sessions: Vec<(i64, SessionRecord)>,
    shards: Vec<Arc<Shard>>,
}

impl Capture {
    /// Encodes the snapshot image, handing it to `out` in pieces of about
    /// 1 MiB and stopping at its first error. Nodes go in path order, so
    /// every parent precedes its children.
    pub fn encode<E>(self, mut out: impl FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        const PIECE: usize = 1 << 20;
        let mut w = Writer {
            buf: Vec::with_capacity(PIECE + 64 * 1024),
        };
        w.i64(self.last_zxid);
        w.i32(self.sessions.len() as i32);
        for (id, s) in &self.sessions {
            w.i64(*id).i32(s.timeout).buffer(&s.password);
        }
        let mut nodes: Vec<(&Arc<str>, &Node)> =
            self.shards.iter().flat_map(|s| s.iter()).collect();
        nodes.sort_unstable_by(|a, b| a.0.cmp(b.0));
        w.i64(nodes.len() as i64);
        for (path, n) in nodes {
            w.string(path).buffer(&n.data);
            Acl::write_list(&n.acl, &mut w);
            n.stat.write(&mut w);
            w.i32(n.seq);
            if w.buf.len() >= PIECE {
                out(&w.buf)?;
                w.buf.clear();
            }
        }
        out(&w.buf)
    }
}

/// `parent` + "/" + `child`.
pub fn join(parent: &str, child: &str) -> String {
    if parent == "/" {
        format!("/{child}")
    } else {
        format!("{parent}/{child}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(path: &str, owner: i64) -> TxnBody {
        TxnBody::Create {
            path: path.into(),
            data: b"d".to_vec(),
            acl: vec![Acl::open()],
            ephemeral_owner: owner,
        }
    }

    #[test]
    fn apply_updates_stats_and_reports_changes() {
        let mut t = DataTree::new();
        let mut ch = Vec::new();
        t.apply(
            &Txn {
                zxid: 1,
                time: 10,
                session: 5,
                body: create("/a", 0),
            },
            &mut ch,
        );
        t.apply(
            &Txn {
                zxid: 2,
                time: 11,
                session: 5,
                body: create("/a/e", 5),
            },
            &mut ch,
        );
        t.apply(
            &Txn {
                zxid: 3,
                time: 12,
                session: 5,
                body: TxnBody::SetData {
                    path: "/a".into(),
                    data: b"xy".to_vec(),
                    version: 1,
                },
            },
            &mut ch,
        );
        let a = t.get("/a").unwrap().stat();
        assert_eq!(
            (
                a.czxid,
                a.mzxid,
                a.pzxid,
                a.version,
                a.cversion,
                a.num_children,
                a.data_length
            ),
            (1, 3, 2, 1, 1, 1, 2)
        );
        assert_eq!(t.ephemerals_of(5), vec!["/a/e".to_string()]);
        ch.clear();
        t.apply(
            &Txn {
                zxid: 4,
                time: 13,
                session: 5,
                body: TxnBody::CloseSession,
            },
            &mut ch,
        );
        assert!(t.get("/a/e").is_none());
        assert_eq!(
            ch,
            vec![
                Change::Deleted("/a/e".into()),
                Change::ChildrenChanged("/a".into())
            ]
        );
        let a = t.get("/a").unwrap();
        assert_eq!(
            (a.stat().pzxid, a.stat().cversion, a.seq),
            (4, 2, 1),
            "deletes count in cversion, not in seq"
        );
        assert_eq!(t.descendant_count("/"), 4);
    }

    #[test]
    fn revert_restores_the_tree() {
        let mut t = DataTree::new();
        let mut ch = Vec::new();
        t.apply(
            &Txn {
                zxid: 1,
                time: 10,
                session: 5,
                body: create("/a", 0),
            },
            &mut ch,
        );
        let before = t.encode_snapshot();
        let u1 = t.apply_body(2, 20, &create("/a/b", 0), &mut ch);
        let u2 = t.apply_body(
            2,
            20,
            &TxnBody::SetData {
                path: "/a".into(),
                data: vec![],
                version: 1,
            },
            &mut ch,
        );
        let u3 = t.apply_body(
            2,
            20,
            &TxnBody::Delete {
                path: "/a/b".into(),
            },
            &mut ch,
        );
        for u in [u3, u2, u1] {
            t.revert(u);
        }
        assert_eq!(t.encode_snapshot(), before);
    }

    #[test]
    fn revert_of_a_delete_restores_the_child_count() {
        let mut t = DataTree::new();
        let mut ch = Vec::new();
        for (zxid, path) in [(1, "/a"), (2, "/a/b")] {
            t.apply(
                &Txn {
                    zxid,
                    time: 10,
                    session: 5,
                    body: create(path, 0),
                },
                &mut ch,
            );
        }
        let before = t.encode_snapshot();
        let delete = TxnBody::Delete {
            path: "/a/b".into(),
        };
        let u = t.apply_body(3, 30, &delete, &mut ch);
        assert_eq!(t.get("/a").unwrap().stat().num_children, 0);
        t.revert(u);
        assert_eq!(t.get("/a").unwrap().stat().num_children, 1);
        assert_eq!(t.children("/a").iter().collect::<Vec<_>>(), ["b"]);
        assert_eq!(t.encode_snapshot(), before);
    }

    #[test]
    fn a_capture_keeps_its_moment() {
        let mut t = DataTree::new();
        let mut ch = Vec::new();
        for i in 0..3000 {
            let body = create(&format!("/n{i}"), 0);
            let txn = Txn {
                zxid: i + 1,
                time: 1,
                session: 5,
                body,
            };
            t.apply(&txn, &mut ch);
        }
        let image = t.encode_snapshot();
        let capture = t.capture();
        // Changes after the capture, touching most shards, do not show in it.
        for i in 0..3000 {
            let body = if i % 2 == 0 {
                TxnBody::Delete {
                    path: format!("/n{i}"),
                }
            } else {
                TxnBody::SetData {
                    path: format!("/n{i}"),
                    data: b"new".to_vec(),
                    version: 1,
                }
            };
            t.apply_body(4000 + i, 2, &body, &mut ch);
            t.apply_body(4000 + i, 2, &create(&format!("/m{i}"), 0), &mut ch);
        }
        let mut later = Vec::new();
        capture
            .encode(|piece| {
                later.extend_from_slice(piece);
                Ok::<(), ()>(())
            })
            .unwrap();
        assert_eq!(later, image);
        assert_eq!(t.node_count(), 4 + 1500 + 3000);
        assert_eq!(t.get("/n1").unwrap().data[..], b"new"[..]);
    }

    #[test]
    fn snapshot_round_trips() {
        let mut t = DataTree::new();
        let mut ch = Vec::new();
        t.apply(
            &Txn {
                zxid: 1,
                time: 1,
                session: 9,
                body: TxnBody::CreateSession {
                    timeout: 3000,
                    password: vec![7; 16],
                },
            },
            &mut ch,
        );
        t.apply(
            &Txn {
                zxid: 2,
                time: 2,
                session: 9,
                body: create("/x", 9),
            },
            &mut ch,
        );
        t.apply(
            &Txn {
                zxid: 3,
                time: 3,
                session: 9,
                body: create("/c", CONTAINER_OWNER),
            },
            &mut ch,
        );
        let img = t.encode_snapshot();
        let u = DataTree::decode_snapshot(&img).unwrap();
        assert_eq!(u.encode_snapshot(), img);
        assert_eq!(u.last_zxid, 3);
        assert_eq!(u.ephemerals_of(9), vec!["/x".to_string()]);
        assert!(u.reapable.contains("/c"));
        assert_eq!(u.sessions[&9].timeout, 3000);
        assert!(DataTree::decode_snapshot(&img[..img.len() - 3]).is_err());
    }

    #[test]
    fn digests_differ_exactly_when_the_states_do() {
        let txn = |zxid, body| Txn {
            zxid,
            time: 1,
            session: 5,
            body,
        };
        let (mut a, mut b) = (DataTree::new(), DataTree::new());
        assert_eq!(a.digest(), b.digest());
        a.apply(&txn(1, create("/x", 0)), &mut Vec::new());
        a.apply(&txn(2, create("/y", 0)), &mut Vec::new());
        assert_ne!(a.digest(), b.digest());
        // The same changes through the same zxids: the same digest.
        b.apply(&txn(1, create("/x", 0)), &mut Vec::new());
        b.apply(&txn(2, create("/y", 0)), &mut Vec::new());
        assert_eq!(a.digest(), b.digest());
        let session = TxnBody::CreateSession {
            timeout: 1000,
            password: vec![1; 16],
        };
        b.apply(&txn(3, session), &mut Vec::new());
        assert_ne!(a.digest(), b.digest(), "sessions count");
    }

    #[test]
    fn owner_kinds() {
        assert_eq!(owner_kind(0), OwnerKind::Persistent);
        assert_eq!(owner_kind(CONTAINER_OWNER), OwnerKind::Container);
        assert_eq!(owner_kind(TTL_MARK | 500), OwnerKind::Ttl(500));
        assert_eq!(owner_kind(0x0123), OwnerKind::Ephemeral(0x0123));
    }
}
