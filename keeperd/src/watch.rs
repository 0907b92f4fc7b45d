//! Watch registrations per connection: one-shot data/exist and child watches,
//! persistent and persistent-recursive watches, with ZooKeeper's trigger rules.

use crate::tree::parent_of;
use std::collections::{HashMap, HashSet};

/// Identifies a client connection.
pub type ConnId = u64;

/// One-shot watch bit.
const ONE_SHOT: u8 = 1;
/// Persistent watch bit.
const PERSISTENT: u8 = 2;
/// Persistent recursive watch bit.
const RECURSIVE: u8 = 4;

/// Watches of one kind (data or child), by path then connection.
#[derive(Default)]
struct Table {
    by_path: HashMap<String, HashMap<ConnId, u8>>,
    by_conn: HashMap<ConnId, HashSet<String>>,
    recursive: usize,
}

impl Table {
    fn add(&mut self, path: &str, conn: ConnId, bit: u8) {
        let bits = self
            .by_path
            .entry(path.to_string())
            .or_default()
            .entry(conn)
            .or_insert(0);
        if bit == RECURSIVE && *bits & RECURSIVE == 0 {
            self.recursive += 1;
        }
        *bits |= bit;
        self.by_conn
            .entry(conn)
            .or_default()
            .insert(path.to_string());
    }

    /// Clears `mask` bits of `conn` at `path`; whether any was set.
    fn remove(&mut self, path: &str, conn: ConnId, mask: u8) -> bool {
        let Some(conns) = self.by_path.get_mut(path) else {
            return false;
        };
        let Some(bits) = conns.get_mut(&conn) else {
            return false;
        };
        let had = *bits & mask != 0;
        if *bits & mask & RECURSIVE != 0 {
            self.recursive -= 1;
        }
        *bits &= !mask;
        if *bits == 0 {
            conns.remove(&conn);
            if conns.is_empty() {
                self.by_path.remove(path);
            }
            if let Some(paths) = self.by_conn.get_mut(&conn) {
                paths.remove(path);
                if paths.is_empty() {
                    self.by_conn.remove(&conn);
                }
            }
        }
        had
    }

    fn has(&self, path: &str, conn: ConnId, mask: u8) -> bool {
        self.by_path
            .get(path)
            .and_then(|c| c.get(&conn))
            .is_some_and(|b| b & mask != 0)
    }

    fn drop_conn(&mut self, conn: ConnId) {
        for path in self.by_conn.remove(&conn).unwrap_or_default() {
            if let Some(conns) = self.by_path.get_mut(&path) {
                if let Some(bits) = conns.remove(&conn) {
                    if bits & RECURSIVE != 0 {
                        self.recursive -= 1;
                    }
                }
                if conns.is_empty() {
                    self.by_path.remove(&path);
                }
            }
        }
    }

    /// Connections to notify of an event at `path`; one-shot watches there are consumed.
    fn trigger(&mut self, path: &str, out: &mut Vec<ConnId>) {
        let mut consumed = Vec::new();
        if let Some(conns) = self.by_path.get(path) {
            for (&conn, &bits) in conns {
                out.push(conn);
                if bits & ONE_SHOT != 0 {
                    consumed.push(conn);
                }
            }
        }
        for conn in consumed {
            self.remove(path, conn, ONE_SHOT);
        }
        if self.recursive > 0 {
            let mut p = path;
            while p != "/" {
                p = parent_of(p);
                if let Some(conns) = self.by_path.get(p) {
                    out.extend(
                        conns
                            .iter()
                            .filter(|(_, b)| **b & RECURSIVE != 0)
                            .map(|(c, _)| *c),
                    );
                }
            }
        }
    }

    fn count(&self) -> usize {
        self.by_path.values().map(|c| c.len()).sum()
    }
}

/// Which watches a removeWatches/checkWatches request targets (WatcherType).
pub fn remove_mask(kind: i32) -> Option<(u8, u8)> {
    // (data table mask, child table mask)
    match kind {
        1 => Some((0, ONE_SHOT)),
        2 => Some((ONE_SHOT, 0)),
        3 => Some((ONE_SHOT | PERSISTENT | RECURSIVE, ONE_SHOT | PERSISTENT)),
        4 => Some((PERSISTENT, PERSISTENT)),
        5 => Some((RECURSIVE, 0)),
        _ => None,
    }
}

/// All watches of all connections.
#[derive(Default)]
pub struct WatchManager {
    data: Table,
    child: Table,
}

impl WatchManager {
    /// A one-shot data (getData) or exist (exists) watch.
    pub fn add_data(&mut self, path: &str, conn: ConnId) {
        self.data.add(path, conn, ONE_SHOT);
    }

    /// A one-shot child watch.
    pub fn add_child(&mut self, path: &str, conn: ConnId) {
        self.child.add(path, conn, ONE_SHOT);
    }

    /// A persistent (mode 0) or persistent recursive (mode 1) watch.
    pub fn add_persistent(&mut self, path: &str, conn: ConnId, recursive: bool) {
        if recursive {
            self.data.add(path, conn, RECURSIVE);
        } else {
            self.data.add(path, conn, PERSISTENT);
            self.child.add(path, conn, PERSISTENT);
        }
    }

    /// Removes (or with `remove` false, only looks for) watches; whether any matched.
    pub fn remove(
        &mut self,
        path: &str,
        conn: ConnId,
        data_mask: u8,
        child_mask: u8,
        remove: bool,
    ) -> bool {
        if !remove {
            return self.data.has(path, conn, data_mask) || self.child.has(path, conn, child_mask);
        }
        let a = data_mask != 0 && self.data.remove(path, conn, data_mask);
        let b = child_mask != 0 && self.child.remove(path, conn, child_mask);
        a || b
    }

    /// Drops every watch of a closed connection.
    pub fn drop_conn(&mut self, conn: ConnId) {
        self.data.drop_conn(conn);
        self.child.drop_conn(conn);
    }

    /// Connections to notify, and the event type, for a node created at `path`.
    pub fn node_created(&mut self, path: &str) -> Vec<ConnId> {
        let mut out = Vec::new();
        self.data.trigger(path, &mut out);
        dedup(out)
    }

    /// For a data change at `path`.
    pub fn node_changed(&mut self, path: &str) -> Vec<ConnId> {
        self.node_created(path)
    }

    /// For a deletion of `path`: data, exist and child watchers there, each once.
    pub fn node_deleted(&mut self, path: &str) -> Vec<ConnId> {
        let mut out = Vec::new();
        self.data.trigger(path, &mut out);
        self.child.trigger(path, &mut out);
        dedup(out)
    }

    /// For a change to the children of `path`.
    pub fn children_changed(&mut self, path: &str) -> Vec<ConnId> {
        let mut out = Vec::new();
        self.child.trigger(path, &mut out);
        dedup(out)
    }

    /// Total registrations (path, connection, kind).
    pub fn watch_count(&self) -> usize {
        self.data.count() + self.child.count()
    }

    /// Distinct watched paths.
    pub fn path_count(&self) -> usize {
        let mut paths: HashSet<&String> = self.data.by_path.keys().collect();
        paths.extend(self.child.by_path.keys());
        paths.len()
    }

    /// Connections with at least one watch.
    pub fn conn_count(&self) -> usize {
        let mut conns: HashSet<&ConnId> = self.data.by_conn.keys().collect();
        conns.extend(self.child.by_conn.keys());
        conns.len()
    }

    /// Paths watched by `conn`.
    pub fn paths_of(&self, conn: ConnId) -> Vec<String> {
        let mut paths: Vec<String> = self
            .data
            .by_conn
            .get(&conn)
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        paths.extend(self.child.by_conn.get(&conn).into_iter().flatten().cloned());
        paths.sort();
        paths.dedup();
        paths
    }
}

fn dedup(mut v: Vec<ConnId>) -> Vec<ConnId> {
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_shot_watches_fire_once() {
        let mut w = WatchManager::default();
        w.add_data("/a", 1);
        w.add_child("/a", 2);
        assert_eq!(w.watch_count(), 2);
        assert_eq!(w.node_changed("/a"), vec![1]);
        assert!(w.node_changed("/a").is_empty());
        assert_eq!(w.node_deleted("/a"), vec![2]);
        assert_eq!(w.watch_count(), 0);
    }

    #[test]
    fn persistent_and_recursive_watches_stay() {
        let mut w = WatchManager::default();
        w.add_persistent("/a", 1, false);
        w.add_persistent("/", 2, true);
        w.add_data("/a/b", 1);
        assert_eq!(w.node_created("/a/b"), vec![1, 2]);
        assert_eq!(w.node_created("/a/b"), vec![2]);
        assert_eq!(w.children_changed("/a"), vec![1]);
        assert_eq!(w.node_changed("/a"), vec![1, 2]);
        assert_eq!(w.node_deleted("/a"), vec![1, 2]);
        let (d, c) = remove_mask(5).unwrap();
        assert!(w.remove("/", 2, d, c, true));
        assert_eq!(w.node_changed("/a/b"), Vec::<ConnId>::new());
        w.drop_conn(1);
        assert_eq!(w.watch_count(), 0);
    }
}
