//! ZooKeeper's watch guarantees, judged from a watch workload's history (see
//! [`super::driver`] for what it records), as the programmer's guide states them and no
//! stronger:
//!
//! - **One-shot watches** (data: `getData` on `k`; child: `getChildren` on `k`; exist:
//!   `exists` on `k/c`) fire once, for the first change after the state they were set on:
//!   several changes before the client re-arms give one event, so later changes are never
//!   expected of the same watch. A data or child watch's state is the zxid the setting read
//!   returned (mzxid, pzxid): the changes that trigger it are those with a higher zxid. An
//!   exist watch on an absent znode has no zxid: only a create invoked after it was set is
//!   certainly after it.
//!   - *duplicate*: a second event for one watch.
//!   - *phantom*: an event of a type the watch cannot get, or with no change that could cause
//!     it (a change of that znode invoked before the event, and above the watch's state when
//!     both zxids are known).
//!   - *missed*: no event, though a change that triggers it was acknowledged at least
//!     [`SETTLE_NS`] before the process closed its session while connected. A session that
//!     expired, or was not connected at the close, excuses the watch (the client was told by
//!     the session event): it is not judged.
//!   - *reordered*: a read by the same process showed the change (a zxid above the watch's
//!     state) before the event came ("a client will never see a change for which it has set
//!     a watch until it first sees the watch event").
//! - **Persistent watches** (on `k`: its data changes and child changes; persistent-recursive
//!   on the root: data changes of every `k` and creates and deletes of every `k/c`) see every
//!   change after the state read right after they were set, exactly once and in zxid order:
//!   per znode and kind, the events after that read must be the acknowledged changes above
//!   the read's zxid, in order (*reordered* where the types differ, *duplicate* or *phantom*
//!   beyond them, *missed* short of those acknowledged [`SETTLE_NS`] before a connected
//!   close). A persistent watch given up at a disconnection (`unwatch`: ZooKeeper may lose
//!   persistent events across reconnection, ZOOKEEPER-4698) is not held to completeness.
//!   A znode with a write of unknown outcome (`info`, zxid unknown) is judged for phantoms
//!   only (more events than changes that may have happened).
//! - **Order**: one client's events come in zxid order. The history can show it only for the
//!   events of one watch (each watch's events come through a channel of its own; events of
//!   two watches waiting at once are taken in no set order), and only for events carrying
//!   their zxid (ZooKeeper 3.9+, keeperd); without them, a persistent stream's order is
//!   judged by its events' types against its changes'.
//! - **Reconnections**: a one-shot watch still set when its client reconnects is checked
//!   again by the server against the state (watch reset, ZOOKEEPER-43): its event then says
//!   what the state shows (a znode deleted and created again reads as data changed), so
//!   any change of its znode explains it; the client may tell of the reconnection up to
//!   [`SETTLE_NS`] after it hands such an event over. An exist watch on an absent znode that
//!   was created and deleted again while its client was disconnected finds it absent and does
//!   not fire: the one case the guide says a watch may be missed, so such a create is not due.
//! - **Events in flight around a read**: the driver records every event already handed over
//!   before a read's answer, but the client may hand over events that came after the answer
//!   before it: such events (recorded while the read was in flight) may be for changes on
//!   either side of it. A one-shot watch's event may be for the very change its read saw
//!   (the server applies a change before it fires the watches).
//!
//! Nothing judged (no event and no watch ended by a connected close) leaves the verdict
//! unknown.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::checker::result::Validity;
use crate::history::{Op, OpType, Process};
use crate::workload::anomalies::Anomalies;

/// The key of the workload's root.
pub const ROOT: &str = "";
/// The name of each key's child that writers create and delete.
pub const CHILD: &str = "c";
/// How long before a connected close a change must have been acknowledged for its event to
/// be due (the watcher's server applies it shortly after the quorum does).
pub const SETTLE_NS: u64 = 1_000_000_000;

/// A kind of watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// One-shot `getData` watch.
    Data,
    /// One-shot `exists` watch.
    Exist,
    /// One-shot `getChildren` watch.
    Child,
    /// `addWatch` persistent.
    Persistent,
    /// `addWatch` persistent-recursive.
    Recursive,
}

impl Class {
    const ALL: [Class; 5] = [
        Class::Data,
        Class::Exist,
        Class::Child,
        Class::Persistent,
        Class::Recursive,
    ];

    /// Its name in the history and the report.
    pub fn name(self) -> &'static str {
        match self {
            Class::Data => "data",
            Class::Exist => "exist",
            Class::Child => "child",
            Class::Persistent => "persistent",
            Class::Recursive => "recursive",
        }
    }

    fn of(name: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|c| c.name() == name)
    }

    fn oneshot(self) -> bool {
        matches!(self, Class::Data | Class::Exist | Class::Child)
    }
}

/// The verdict of the watch checker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchReport {
    /// Writes, creates and deletes that ended `ok`.
    pub changes_ok: u64,
    /// Changes of unknown outcome.
    pub changes_info: u64,
    /// Watches set, by class.
    pub watches: BTreeMap<String, u64>,
    /// Events received.
    pub events: u64,
    /// Watches whose completeness could be judged (ended by a connected close).
    pub judged: u64,
    /// Watches not held to completeness (session expired, not connected at the close,
    /// persistent watch given up at a disconnection, or no close recorded).
    pub excused: u64,
    /// Anomalies by class and kind: `{"data": {"missed": 1}}`.
    pub by_class: BTreeMap<String, BTreeMap<String, u64>>,
    /// Anomalies by kind (`missed-data`, `phantom-child`, ...), the first few listed.
    #[serde(flatten)]
    pub found: Anomalies,
}

impl WatchReport {
    /// Invalid with an anomaly; unknown when nothing was judged.
    pub fn validity(&self) -> Validity {
        match (self.found.is_empty(), self.judged > 0 && self.events > 0) {
            (false, _) => Validity::Invalid,
            (true, true) => Validity::Valid,
            (true, false) => Validity::Unknown,
        }
    }

    /// The verdict line's part.
    pub fn line(&self) -> String {
        let total =
            |kind: &str| -> u64 { self.by_class.values().filter_map(|m| m.get(kind)).sum() };
        let classes: Vec<String> = self
            .by_class
            .iter()
            .map(|(c, m)| {
                let kinds: Vec<String> = m.iter().map(|(k, n)| format!("{n} {k}")).collect();
                format!("{c}: {}", kinds.join(", "))
            })
            .collect();
        let watches: u64 = self.watches.values().sum();
        format!(
            "watch: {watches} watches set, {} events, {} changes ok ({} info), {} watches judged ({} excused); missed {}, duplicate {}, reordered {}, phantom {}{}",
            self.events,
            self.changes_ok,
            self.changes_info,
            self.judged,
            self.excused,
            total("missed"),
            total("duplicate"),
            total("reordered"),
            total("phantom"),
            match classes.is_empty() {
                true => String::new(),
                false => format!(" ({})", classes.join("; ")),
            }
        )
    }

    fn note(&mut self, kind: &str, class: Class, op: &Op, what: String) {
        let process = match op.process {
            Process::Client(p) => p,
            Process::Nemesis(_) => 0,
        };
        let counts = self.by_class.entry(class.name().into()).or_default();
        *counts.entry(kind.into()).or_default() += 1;
        self.found
            .note(&format!("{kind}-{}", class.name()), op, process, what);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Write,
    Create,
    Delete,
}

/// A change a writer made (or may have made).
#[derive(Debug, Clone)]
struct Change {
    key: String,
    kind: Kind,
    /// Its zxid (`ok` only).
    zxid: Option<i64>,
    ok: bool,
    invoked: u64,
    completed: u64,
}

impl Change {
    /// The key whose data or children it changed, and whether it was the children.
    fn stream(&self) -> (String, bool) {
        match self.kind {
            Kind::Write => (self.key.clone(), false),
            _ => (parent(&self.key), true),
        }
    }
}

fn parent(key: &str) -> String {
    key.rsplit_once('/').map_or(ROOT, |(p, _)| p).to_string()
}

/// The event (its znode and type) `change` gives a watch of `class` on `key`, if any.
fn event_of(
    class: Class,
    key: &str,
    exists: bool,
    change: &Change,
) -> Option<(String, &'static str)> {
    let on = |k: &str| k == key;
    match (class, change.kind) {
        (Class::Data, Kind::Write) if on(&change.key) => Some((key.into(), "NodeDataChanged")),
        (Class::Child, Kind::Create | Kind::Delete) if on(&parent(&change.key)) => {
            Some((key.into(), "NodeChildrenChanged"))
        }
        (Class::Exist, Kind::Create) if on(&change.key) && !exists => {
            Some((key.into(), "NodeCreated"))
        }
        (Class::Exist, Kind::Delete) if on(&change.key) && exists => {
            Some((key.into(), "NodeDeleted"))
        }
        (Class::Persistent, Kind::Write) if on(&change.key) => {
            Some((key.into(), "NodeDataChanged"))
        }
        (Class::Persistent, Kind::Create | Kind::Delete) if on(&parent(&change.key)) => {
            Some((key.into(), "NodeChildrenChanged"))
        }
        (Class::Recursive, kind) if key == ROOT || change.key.starts_with(&format!("{key}/")) => {
            let t = match kind {
                Kind::Write => "NodeDataChanged",
                Kind::Create => "NodeCreated",
                Kind::Delete => "NodeDeleted",
            };
            Some((change.key.clone(), t))
        }
        _ => None,
    }
}

/// A change and the event (znode, type) it gives a watch.
type Caused<'c> = (&'c Change, (String, &'static str));

/// An event as received.
#[derive(Debug, Clone)]
struct Event<'a> {
    op: &'a Op,
    key: String,
    kind: String,
}

/// A watch as set.
#[derive(Debug)]
struct Watch<'a> {
    id: u64,
    class: Class,
    key: String,
    process: u64,
    op: &'a Op,
    state: Option<i64>,
    exists: bool,
    events: Vec<Event<'a>>,
    /// Given up at a disconnection.
    unwatched: bool,
}

/// What one process's session came to.
#[derive(Debug, Default, Clone, Copy)]
struct End {
    expired: bool,
    /// The time of a close while connected.
    connected_close: Option<u64>,
}

/// Checks a watch history.
pub fn check_watch(ops: &[Op]) -> WatchReport {
    let mut report = WatchReport::default();
    // Pending invocations per process and operation: a watcher records the events it is
    // handed while one of its reads is in flight, so a read's invocation is not the process's
    // latest one when the read completes.
    let mut invoked: HashMap<(u64, &str), (u64, u64)> = HashMap::new();
    let mut sessions: HashMap<u64, Vec<SessionChange>> = HashMap::new();
    let mut changes: Vec<Change> = Vec::new();
    let mut watches: Vec<Watch> = Vec::new();
    let mut by_id: HashMap<u64, usize> = HashMap::new();
    let mut ends: HashMap<u64, End> = HashMap::new();
    // Per process, in order: reads (key, of, zxid, op) and events (watch index, event index),
    // and session state changes (segment boundaries).
    let mut timeline: HashMap<u64, Vec<Seen>> = HashMap::new();
    for op in ops {
        let Process::Client(process) = op.process else {
            continue;
        };
        if op.kind == OpType::Invoke {
            invoked.insert((process, op.f.as_str()), (op.time, op.index));
            continue;
        }
        let (since, invoked_at) = invoked
            .remove(&(process, op.f.as_str()))
            .unwrap_or((op.time, op.index));
        let key = op.key.clone().unwrap_or_default();
        let id = op.value.get("id").and_then(Value::as_u64);
        match (op.f.as_str(), op.kind) {
            ("write" | "create" | "delete", OpType::Fail) => {}
            ("write" | "create" | "delete", kind) => {
                let ok = kind == OpType::Ok;
                match ok {
                    true => report.changes_ok += 1,
                    false => report.changes_info += 1,
                }
                let kind = match op.f.as_str() {
                    "write" => Kind::Write,
                    "create" => Kind::Create,
                    _ => Kind::Delete,
                };
                let zxid = op.zxid.filter(|_| ok);
                changes.push(Change {
                    key,
                    kind,
                    zxid,
                    ok,
                    invoked: since,
                    completed: op.time,
                });
            }
            ("watch", OpType::Ok) => {
                let class = op
                    .value
                    .get("class")
                    .and_then(Value::as_str)
                    .and_then(Class::of);
                let (Some(id), Some(class)) = (id, class) else {
                    continue;
                };
                *report.watches.entry(class.name().into()).or_default() += 1;
                let exists = op
                    .value
                    .get("exists")
                    .and_then(Value::as_bool)
                    .unwrap_or(true);
                by_id.insert(id, watches.len());
                watches.push(Watch {
                    id,
                    class,
                    key,
                    process,
                    op,
                    state: op.zxid,
                    exists,
                    events: Vec::new(),
                    unwatched: false,
                });
            }
            ("event", OpType::Ok) => {
                report.events += 1;
                let Some(&w) = id.and_then(|id| by_id.get(&id)) else {
                    continue;
                };
                let kind = op
                    .value
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                watches[w].events.push(Event {
                    op,
                    key,
                    kind: kind.into(),
                });
            }
            ("read", OpType::Ok) => {
                let of = op
                    .value
                    .get("of")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let Some(zxid) = op.zxid else { continue };
                timeline.entry(process).or_default().push(Seen::Read(
                    key,
                    of == "children",
                    zxid,
                    op,
                    invoked_at,
                ));
            }
            ("session", OpType::Ok) => {
                let connected = matches!(
                    op.value.as_str(),
                    Some("SyncConnected" | "ConnectedReadOnly")
                );
                sessions.entry(process).or_default().push(SessionChange {
                    index: op.index,
                    time: op.time,
                    connected,
                });
                if op.value.as_str() == Some("Expired") {
                    ends.entry(process).or_default().expired = true;
                }
            }
            ("unwatch", OpType::Ok) => {
                if let Some(&w) = id.and_then(|id| by_id.get(&id)) {
                    watches[w].unwatched = true;
                }
            }
            ("close", OpType::Ok)
                if op.value.get("connected").and_then(Value::as_bool) == Some(true) =>
            {
                ends.entry(process).or_default().connected_close = Some(op.time);
            }
            _ => {}
        }
    }
    let judge = Judge {
        changes: &changes,
        ends: &ends,
        timeline: &timeline,
        sessions: &sessions,
    };
    for watch in &watches {
        let end = judge.end_of(watch);
        match end {
            Some(_) => report.judged += 1,
            None => report.excused += 1,
        }
        match watch.class.oneshot() {
            true => judge.oneshot(&mut report, watch, end),
            false => judge.persistent(&mut report, watch, end),
        }
        order(&mut report, watch);
    }
    report
}

/// Something a process saw, in order.
#[derive(Debug)]
enum Seen<'a> {
    /// A read of a key's data (false) or children (true), with the zxid read, its
    /// completion and the index of its invocation.
    Read(String, bool, i64, &'a Op, u64),
}

struct Judge<'h> {
    changes: &'h [Change],
    ends: &'h HashMap<u64, End>,
    timeline: &'h HashMap<u64, Vec<Seen<'h>>>,
    /// Each process's session state changes, in order.
    sessions: &'h HashMap<u64, Vec<SessionChange>>,
}

/// A change of a process's session state, as its client told it.
#[derive(Debug, Clone, Copy)]
struct SessionChange {
    index: u64,
    time: u64,
    /// Connected (again) rather than disconnected, expired or closed.
    connected: bool,
}

impl<'h> Judge<'h> {
    /// When a watch's completeness is judged: the connected close of its process, unless
    /// the session expired or a persistent watch was given up.
    fn end_of(&self, watch: &Watch) -> Option<u64> {
        let end = self.ends.get(&watch.process).copied().unwrap_or_default();
        match end.expired || watch.unwatched {
            true => None,
            false => end.connected_close,
        }
    }

    /// Whether `create` may have come and gone while the process of `watch` (an exist watch on
    /// an absent znode) was disconnected: a disconnection after the watch was set and before
    /// the create was settled, and a delete of the znode invoked after the create and before
    /// the reconnection. The server re-checks the watch against the state at the reconnection
    /// and sees the znode absent, so nothing fires; ZooKeeper's guide names this the one case
    /// a watch may be missed.
    fn created_and_deleted_while_disconnected(&self, watch: &Watch, create: &Change) -> bool {
        let Some(changes) = self.sessions.get(&watch.process) else {
            return false;
        };
        let deleted_by = |reconnected: u64| {
            self.changes.iter().any(|d| {
                d.kind == Kind::Delete
                    && d.key == create.key
                    && d.invoked < reconnected
                    && match (d.zxid, create.zxid) {
                        (Some(dz), Some(cz)) => dz > cz,
                        _ => d.completed > create.invoked,
                    }
            })
        };
        changes.iter().enumerate().any(|(i, gone)| {
            let reconnected = changes[i + 1..].iter().find(|c| c.connected);
            let reconnected = reconnected.map_or(u64::MAX, |c| c.time);
            !gone.connected
                && gone.index > watch.op.index
                && gone.time < create.completed + SETTLE_NS
                && create.invoked < reconnected
                && deleted_by(reconnected)
        })
    }

    /// Judges a one-shot watch. Its event may be for the change it was set on (zxid equal to
    /// its state: the server applies a change, then fires the watches a read could have set
    /// in between), or any later one; it is due for a change above its state (or, with no
    /// zxid to compare, invoked after it was set).
    fn oneshot(&self, report: &mut WatchReport, watch: &Watch, end: Option<u64>) {
        let class = watch.class;
        let of_class: Vec<Caused> = self
            .changes
            .iter()
            .filter_map(|c| event_of(class, &watch.key, watch.exists, c).map(|e| (c, e)))
            .collect();
        for extra in watch.events.iter().skip(1) {
            let what = format!(
                "watch {} on {:?} fired again ({})",
                watch.id, watch.key, extra.kind
            );
            report.note("duplicate", class, extra.op, what);
        }
        match watch.events.first() {
            Some(e) => {
                // Across a reconnection the server re-checks the watch against the state
                // (watch reset): the event then says what the state shows (a znode deleted
                // and created again is "data changed"), not which change it was. The client
                // may hand the reset's events over before it tells of the reconnection, so a
                // session change up to SETTLE_NS after the event counts too.
                let reset = self.sessions.get(&watch.process).is_some_and(|s| {
                    s.iter().any(|c| {
                        c.index > watch.op.index
                            && (c.index < e.op.index || c.time <= e.op.time + SETTLE_NS)
                    })
                });
                let any_kind: Vec<Caused> = match reset {
                    true => self
                        .changes
                        .iter()
                        .filter_map(|c| {
                            let e = event_of(class, &watch.key, true, c)
                                .or_else(|| event_of(class, &watch.key, false, c));
                            e.map(|(k, _)| (c, (k, "")))
                        })
                        .collect(),
                    false => Vec::new(),
                };
                let cause = of_class.iter().chain(&any_kind).any(|(c, (k, t))| {
                    *k == e.key
                        && (*t == e.kind || (reset && t.is_empty()))
                        && c.invoked < e.op.time
                        && match (c.zxid, watch.state) {
                            (Some(z), Some(s)) => z >= s,
                            _ => true,
                        }
                });
                if !cause {
                    let what = format!(
                        "{} on {:?} for watch {} set at zxid {:?}: no such change from it on",
                        e.kind, e.key, watch.id, watch.state
                    );
                    report.note("phantom", class, e.op, what);
                }
            }
            None => {
                let Some(close) = end else { return };
                let due = of_class.iter().find(|(c, _)| {
                    let after = match (c.zxid, watch.state) {
                        (Some(z), Some(s)) => z > s,
                        _ => c.invoked > watch.op.time,
                    };
                    after
                        && c.ok
                        && c.completed + SETTLE_NS <= close
                        && !self.created_and_deleted_while_disconnected(watch, c)
                });
                if let Some((c, _)) = due {
                    report.note("missed", class, watch.op, format!("watch {} ({}) on {:?} set at zxid {:?} never fired, though {:?} {:?} (zxid {:?}) was acknowledged before the close", watch.id, class.name(), watch.key, watch.state, c.kind, c.key, c.zxid));
                }
            }
        }
        // A read showing a change above the watch's state before its event. An event that
        // came before the read's answer is recorded before the read (the driver takes every
        // event already handed over first), so none recorded before it means none came.
        let (Some(state), Some(seen)) = (watch.state, self.timeline.get(&watch.process)) else {
            return;
        };
        if class == Class::Exist {
            return;
        }
        let fired_at = watch.events.first().map_or(u64::MAX, |e| e.op.index);
        let shows = seen.iter().find_map(|s| match s {
            Seen::Read(key, children, zxid, op, _)
                if *key == watch.key
                    && *children == (class == Class::Child)
                    && op.index > watch.op.index
                    && op.index < fired_at
                    && *zxid > state =>
            {
                Some((*zxid, *op))
            }
            _ => None,
        });
        if let Some((zxid, op)) = shows {
            let what = format!(
                "read zxid {zxid} of {:?} before the event of watch {} set at zxid {state}",
                watch.key, watch.id
            );
            report.note("reordered", class, op, what);
        }
    }

    /// Judges a persistent or recursive watch stream by stream (one key's data, or one
    /// key's children), from the first read of that stream after the watch was set (its
    /// baseline, zxid `s`). Events recorded after that read are for changes above `s`; those
    /// recorded while it was in flight may be for changes up to `s` or above it (the client
    /// may have handed over events that came after the answer before the answer itself).
    /// Events carrying their zxid are matched by it. A stream with a change of unknown
    /// outcome is judged for phantoms only.
    fn persistent(&self, report: &mut WatchReport, watch: &Watch, end: Option<u64>) {
        let class = watch.class;
        let seen = self
            .timeline
            .get(&watch.process)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut streams: BTreeMap<(String, bool), Vec<Caused>> = BTreeMap::new();
        for c in self.changes {
            if let Some(e) = event_of(class, &watch.key, true, c) {
                streams.entry(c.stream()).or_default().push((c, e));
            }
        }
        let mut claimed = vec![false; watch.events.len()];
        for ((key, children), mut covered) in streams {
            let names: Vec<(String, &str)> = covered.iter().map(|(_, e)| e.clone()).collect();
            let ours = |e: &Event| names.iter().any(|(k, t)| *k == e.key && *t == e.kind);
            for (i, e) in watch.events.iter().enumerate() {
                claimed[i] |= ours(e);
            }
            let baseline = seen.iter().find_map(|s| match s {
                Seen::Read(k, ch, z, op, invoked)
                    if *k == key && *ch == children && op.index > watch.op.index =>
                {
                    Some((*z, *invoked, op.index))
                }
                _ => None,
            });
            let Some((base, read_invoked, read_done)) = baseline else {
                continue;
            };
            let ambiguous: Vec<&Event> = watch
                .events
                .iter()
                .filter(|e| ours(e) && e.op.index > read_invoked && e.op.index < read_done)
                .collect();
            let late: Vec<&Event> = watch
                .events
                .iter()
                .filter(|e| ours(e) && e.op.index > read_done)
                .collect();
            let clean = covered.iter().all(|(c, _)| c.ok && c.zxid.is_some());
            if !clean {
                let possible = covered
                    .iter()
                    .filter(|(c, _)| !c.ok || c.zxid.is_none_or(|z| z > base))
                    .count();
                if late.len() > possible {
                    let what = format!("{} events on {key:?} for watch {} after zxid {base}, with at most {possible} changes", late.len(), watch.id);
                    report.note("phantom", class, late[possible].op, what);
                }
                continue;
            }
            covered.retain(|(c, _)| c.zxid.is_some_and(|z| z > base));
            covered.sort_by_key(|(c, _)| c.zxid);
            let expected: Vec<(String, &str, i64, u64)> = covered
                .iter()
                .map(|(c, (k, t))| (k.clone(), *t, c.zxid.unwrap_or_default(), c.completed))
                .collect();
            let due = match end {
                Some(close) => expected
                    .iter()
                    .rposition(|x| x.3 + SETTLE_NS <= close)
                    .map_or(0, |p| p + 1),
                None => 0,
            };
            let with_zxids = ambiguous.iter().chain(&late).all(|e| e.op.zxid.is_some());
            let judged = match with_zxids {
                true => {
                    let events: Vec<&Event> = ambiguous
                        .iter()
                        .chain(&late)
                        .copied()
                        .filter(|e| e.op.zxid.is_some_and(|z| z > base))
                        .collect();
                    match_by_zxid(&expected, &events)
                }
                false => match_by_type(&expected, &ambiguous, &late),
            };
            let notified = match judged {
                Ok(notified) => notified,
                Err((kind, e, why)) => {
                    let what = format!("{} on {:?} for watch {} on {key:?} (zxid {:?}, stream from zxid {base}): {why}", e.kind, e.key, watch.id, e.op.zxid);
                    report.note(kind, class, e.op, what);
                    continue;
                }
            };
            if let Some(missing) = notified
                .iter()
                .take(due.max(notified.iter().rposition(|n| *n).map_or(0, |p| p + 1)))
                .position(|n| !n)
            {
                let (k, t, z, _) = &expected[missing];
                let what = format!("watch {} ({}) on {key:?}: no {t} on {k:?} for the change at zxid {z} (stream from zxid {base}; {} changes, {due} due)", watch.id, class.name(), expected.len());
                report.note("missed", class, watch.op, what);
            }
        }
        for (i, e) in watch.events.iter().enumerate() {
            if !claimed[i] {
                let what = format!(
                    "{} on {:?} for watch {}: no such change",
                    e.kind, e.key, watch.id
                );
                report.note("phantom", class, e.op, what);
            }
        }
    }
}

/// What is wrong with a stream's events: the anomaly, the event, and why.
type Mismatch<'e> = (&'static str, &'e Event<'e>, &'static str);

/// Matches events carrying zxids to the changes above a stream's baseline (`expected`, in
/// zxid order); returns which changes were notified.
fn match_by_zxid<'e>(
    expected: &[(String, &str, i64, u64)],
    events: &[&'e Event<'e>],
) -> Result<Vec<bool>, Mismatch<'e>> {
    let mut notified = vec![false; expected.len()];
    let mut next = 0;
    for e in events {
        let same =
            |x: &(String, &str, i64, u64)| x.0 == e.key && x.1 == e.kind && Some(x.2) == e.op.zxid;
        match expected.iter().position(same) {
            None => return Err(("phantom", e, "no such change")),
            Some(j) if notified[j] => {
                return Err(("duplicate", e, "its change was notified already"))
            }
            Some(j) if j < next => {
                return Err(("reordered", e, "it comes after the event of a later change"))
            }
            Some(j) => {
                notified[j] = true;
                next = j + 1;
            }
        }
    }
    Ok(notified)
}

/// Matches events without zxids to the changes above a stream's baseline (`expected`, in
/// zxid order) by their types: `late` (after the baseline read's answer) must follow some of
/// `ambiguous` (while it was in flight; any number of whose first ones may be for changes up
/// to the baseline) as the changes' events in order. Returns which changes were notified,
/// taking as many of `ambiguous` as fit (the reading that leaves the fewest missed).
fn match_by_type<'e>(
    expected: &[(String, &str, i64, u64)],
    ambiguous: &[&'e Event<'e>],
    late: &[&'e Event<'e>],
) -> Result<Vec<bool>, Mismatch<'e>> {
    let fits = |events: &[&Event]| {
        events.len() <= expected.len()
            && events
                .iter()
                .zip(expected)
                .all(|(e, x)| e.key == x.0 && e.kind == x.1)
    };
    for skip in 0..=ambiguous.len() {
        let events: Vec<&Event> = ambiguous[skip..].iter().chain(late).copied().collect();
        if fits(&events) {
            let mut notified = vec![false; expected.len()];
            notified[..events.len()].iter_mut().for_each(|n| *n = true);
            return Ok(notified);
        }
    }
    let Some(first) = late.first() else {
        return Ok(vec![false; expected.len()]);
    };
    if late.len() > expected.len() {
        let extra = late[expected.len()];
        let kind = match expected
            .iter()
            .any(|x| x.0 == extra.key && x.1 == extra.kind)
        {
            true => "duplicate",
            false => "phantom",
        };
        return Err((kind, extra, "more events than changes after the baseline"));
    }
    let wrong = late
        .iter()
        .zip(expected)
        .find(|(e, x)| e.key != x.0 || e.kind != x.1)
        .map_or(*first, |(e, _)| *e);
    Err((
        "reordered",
        wrong,
        "the events do not follow the changes' order",
    ))
}

/// One watch's events carrying their zxids come in zxid order (a persistent watch is given
/// up at a disconnection, so its events never span a reconnection). Only events of one watch
/// are compared: each watch hands its events over on a channel of its own, and events of
/// different watches that are both waiting are taken in no particular order, so the
/// history does not say which of them came first.
fn order(report: &mut WatchReport, watch: &Watch) {
    let mut last: Option<i64> = None;
    for e in &watch.events {
        let Some(zxid) = e.op.zxid else { continue };
        if last.is_some_and(|l| zxid < l) {
            let what = format!(
                "{} on {:?} (zxid {zxid}) after an event of zxid {} for watch {}",
                e.kind,
                e.key,
                last.unwrap_or_default(),
                watch.id
            );
            report.note("reordered", watch.class, e.op, what);
        }
        last = Some(last.map_or(zxid, |l| l.max(zxid)));
    }
}
