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
//! - **Order**: one client's events come in zxid order. An event's zxid is its own when the
//!   server sends one (3.9+, keeperd); else the zxid it is attributed to (the first change
//!   above a one-shot watch's state, the i-th change of a persistent stream), when every
//!   change of that znode is known. Only events between two session state changes are
//!   compared: events the server re-sends at reconnection (watch reset) need not be ordered.
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
    let mut invoked: HashMap<u64, u64> = HashMap::new();
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
            invoked.insert(process, op.time);
            continue;
        }
        let since = invoked.remove(&process).unwrap_or(op.time);
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
                let at = watches[w].events.len() - 1;
                timeline
                    .entry(process)
                    .or_default()
                    .push(Seen::Event(w, at));
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
                ));
            }
            ("session", OpType::Ok) => {
                if op.value.as_str() == Some("Expired") {
                    ends.entry(process).or_default().expired = true;
                }
                timeline.entry(process).or_default().push(Seen::Session);
            }
            ("unwatch", OpType::Ok) => {
                if let Some(&w) = id.and_then(|id| by_id.get(&id)) {
                    watches[w].unwatched = true;
                }
            }
            ("close", OpType::Ok) => {
                if op.value.get("connected").and_then(Value::as_bool) == Some(true) {
                    ends.entry(process).or_default().connected_close = Some(op.time);
                }
            }
            _ => {}
        }
    }
    let judge = Judge {
        changes: &changes,
        ends: &ends,
        timeline: &timeline,
    };
    let mut attributed: HashMap<(usize, usize), i64> = HashMap::new();
    for (w, watch) in watches.iter().enumerate() {
        let end = judge.end_of(watch);
        match end {
            Some(_) => report.judged += 1,
            None => report.excused += 1,
        }
        let found = match watch.class.oneshot() {
            true => judge.oneshot(&mut report, watch, end),
            false => judge.persistent(&mut report, watch, w, end),
        };
        for (e, zxid) in found {
            attributed.insert((w, e), zxid);
        }
    }
    judge.order(&mut report, &watches, &attributed);
    report
}

/// Something a process saw, in order.
#[derive(Debug)]
enum Seen<'a> {
    /// An event: the watch's index and the event's.
    Event(usize, usize),
    /// A read of a key's data (false) or children (true), with the zxid read.
    Read(String, bool, i64, &'a Op),
    /// A session state change.
    Session,
}

struct Judge<'h> {
    changes: &'h [Change],
    ends: &'h HashMap<u64, End>,
    timeline: &'h HashMap<u64, Vec<Seen<'h>>>,
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

    /// Judges a one-shot watch; returns the zxid its event is attributed to, when known.
    fn oneshot(
        &self,
        report: &mut WatchReport,
        watch: &Watch,
        end: Option<u64>,
    ) -> Vec<(usize, i64)> {
        let class = watch.class;
        let triggers: Vec<(&Change, (String, &str))> = self
            .changes
            .iter()
            .filter_map(|c| event_of(class, &watch.key, watch.exists, c).map(|e| (c, e)))
            .filter(|(c, _)| match (c.zxid, watch.state) {
                (Some(z), Some(s)) if class != Class::Exist || watch.exists => z > s,
                _ => c.invoked > watch.op.time || !c.ok || c.zxid.is_none(),
            })
            .collect();
        for extra in watch.events.iter().skip(1) {
            report.note(
                "duplicate",
                class,
                extra.op,
                format!(
                    "watch {} on {:?} fired again ({})",
                    watch.id, watch.key, extra.kind
                ),
            );
        }
        let mut attributed = Vec::new();
        match watch.events.first() {
            Some(e) => {
                let cause = triggers
                    .iter()
                    .any(|(c, (k, t))| *k == e.key && *t == e.kind && c.invoked < e.op.time);
                if !cause {
                    report.note(
                        "phantom",
                        class,
                        e.op,
                        format!(
                            "{} on {:?} for watch {} set at zxid {:?}: no such change after it",
                            e.kind, e.key, watch.id, watch.state
                        ),
                    );
                }
                let clean = triggers.iter().all(|(c, _)| c.ok && c.zxid.is_some());
                let first = triggers.iter().filter_map(|(c, _)| c.zxid).min();
                if let (true, Some(z), true) = (clean, first, watch.state.is_some()) {
                    attributed.push((0, z));
                }
            }
            None => {
                if let Some(close) = end {
                    let due = triggers
                        .iter()
                        .find(|(c, _)| c.ok && c.completed + SETTLE_NS <= close);
                    if let Some((c, _)) = due {
                        report.note("missed", class, watch.op, format!("watch {} ({}) on {:?} set at zxid {:?} never fired, though {:?} {:?} (zxid {:?}) was acknowledged before the close", watch.id, class.name(), watch.key, watch.state, c.kind, c.key, c.zxid));
                    }
                }
            }
        }
        // A read showing a change above the watch's state before its event.
        if let (Some(state), Some(seen)) = (watch.state, self.timeline.get(&watch.process)) {
            let children = class == Class::Child;
            if class != Class::Exist {
                let fired_at = watch.events.first().map_or(u64::MAX, |e| e.op.index);
                for s in seen {
                    if let Seen::Read(key, of_children, zxid, op) = s {
                        if *key == watch.key
                            && *of_children == children
                            && op.index > watch.op.index
                            && op.index < fired_at
                            && *zxid > state
                        {
                            report.note("reordered", class, op, format!("read zxid {zxid} of {key:?} before the event of watch {} set at zxid {state}", watch.id));
                            break;
                        }
                    }
                }
            }
        }
        attributed
    }

    /// Judges a persistent or recursive watch stream by stream (a znode's data or children
    /// changes); returns the zxids its events are attributed to.
    fn persistent(
        &self,
        report: &mut WatchReport,
        watch: &Watch,
        w: usize,
        end: Option<u64>,
    ) -> Vec<(usize, i64)> {
        let class = watch.class;
        let seen = self
            .timeline
            .get(&watch.process)
            .map(Vec::as_slice)
            .unwrap_or_default();
        // The streams: the changes each covers, keyed by (key read, children).
        let mut streams: BTreeMap<(String, bool), Vec<(&Change, (String, &str))>> = BTreeMap::new();
        for c in self.changes {
            if let Some(e) = event_of(class, &watch.key, true, c) {
                streams.entry(c.stream()).or_default().push((c, e));
            }
        }
        let mut attributed = Vec::new();
        let mut claimed = vec![false; watch.events.len()];
        for ((key, children), mut covered) in streams {
            // The baseline: the first read of the stream by the process after the watch.
            let baseline = seen.iter().find_map(|s| match s {
                Seen::Read(k, ch, z, op)
                    if *k == key && *ch == children && op.index > watch.op.index =>
                {
                    Some((*z, op.index))
                }
                _ => None,
            });
            let Some((base, base_index)) = baseline else {
                continue;
            };
            let names: Vec<(String, &str)> = covered.iter().map(|(_, e)| e.clone()).collect();
            let received: Vec<usize> = (0..watch.events.len())
                .filter(|&i| {
                    let e = &watch.events[i];
                    e.op.index > base_index
                        && names.iter().any(|(k, t)| *k == e.key && *t == e.kind)
                })
                .collect();
            for &i in &received {
                claimed[i] = true;
            }
            let clean = covered.iter().all(|(c, _)| c.ok && c.zxid.is_some());
            if !clean {
                let possible = covered
                    .iter()
                    .filter(|(c, _)| !c.ok || c.zxid.is_none_or(|z| z > base))
                    .count();
                if received.len() > possible {
                    let e = &watch.events[received[possible]];
                    report.note(
                        "phantom",
                        class,
                        e.op,
                        format!(
                            "{} events on {key:?} for watch {} with at most {possible} changes",
                            received.len(),
                            watch.id
                        ),
                    );
                }
                continue;
            }
            covered.retain(|(c, _)| c.zxid.is_some_and(|z| z > base));
            covered.sort_by_key(|(c, _)| c.zxid);
            let expected: Vec<(String, &str, i64, u64)> = covered
                .iter()
                .map(|(c, (k, t))| (k.clone(), *t, c.zxid.unwrap_or_default(), c.completed))
                .collect();
            let events: Vec<&Event> = received.iter().map(|&i| &watch.events[i]).collect();
            let matched = match_stream(report, class, watch, &key, &expected, &events);
            for (n, z) in matched.iter().enumerate() {
                if let Some(z) = z {
                    attributed.push((received[n], *z));
                }
            }
            // Unmatched changes: missed when a later change's event came (a gap), or when
            // due before a connected close.
            let last_matched = matched.iter().flatten().max().copied();
            let got: Vec<i64> = matched.iter().flatten().copied().collect();
            let missing = expected.iter().find(|(_, _, z, done)| {
                !got.contains(z)
                    && (last_matched.is_some_and(|l| *z < l)
                        || end.is_some_and(|close| done + SETTLE_NS <= close))
            });
            if let Some((k, t, z, _)) = missing {
                report.note("missed", class, watch.op, format!("watch {} ({}) on {key:?}: no {t} on {k:?} for the change at zxid {z} (base zxid {base}; {} events for {} changes)", watch.id, class.name(), events.len(), expected.len()));
            }
        }
        let _ = w;
        for (i, e) in watch.events.iter().enumerate() {
            let covered = self.changes.iter().any(|c| {
                event_of(class, &watch.key, true, c)
                    .is_some_and(|(k, t)| k == e.key && t == e.kind && c.invoked < e.op.time)
            });
            if !claimed[i] && !covered {
                report.note(
                    "phantom",
                    class,
                    e.op,
                    format!(
                        "{} on {:?} for watch {}: no such change",
                        e.kind, e.key, watch.id
                    ),
                );
            }
        }
        attributed
    }

    /// One client's events in zxid order, between session state changes.
    fn order(
        &self,
        report: &mut WatchReport,
        watches: &[Watch],
        attributed: &HashMap<(usize, usize), i64>,
    ) {
        for seen in self.timeline.values() {
            let mut last: Option<i64> = None;
            for s in seen {
                match s {
                    Seen::Session => last = None,
                    Seen::Read(..) => {}
                    Seen::Event(w, e) => {
                        let event = &watches[*w].events[*e];
                        let Some(zxid) =
                            event.op.zxid.or_else(|| attributed.get(&(*w, *e)).copied())
                        else {
                            continue;
                        };
                        if last.is_some_and(|l| zxid < l) {
                            report.note(
                                "reordered",
                                watches[*w].class,
                                event.op,
                                format!(
                                    "{} on {:?} (zxid {zxid}) after an event of zxid {}",
                                    event.kind,
                                    event.key,
                                    last.unwrap_or_default()
                                ),
                            );
                        }
                        last = Some(last.map_or(zxid, |l| l.max(zxid)));
                    }
                }
            }
        }
    }
}

/// Matches the events of one persistent stream (in receipt order) to the changes it covers
/// (`(key, type, zxid, completed)`, in zxid order); returns the zxid each event is matched to.
/// An event with its own zxid matches the change of that zxid; one without matches the next
/// unmatched change of its key and type. An event with no such change is a *duplicate* (its
/// change was matched already), *reordered* (it comes after a later change's event), or a
/// *phantom* (no such change at all).
fn match_stream(
    report: &mut WatchReport,
    class: Class,
    watch: &Watch,
    key: &str,
    expected: &[(String, &str, i64, u64)],
    events: &[&Event],
) -> Vec<Option<i64>> {
    let mut used = vec![false; expected.len()];
    let mut next = 0;
    let mut matched = Vec::new();
    for e in events {
        let same = |x: &(String, &str, i64, u64)| x.0 == e.key && x.1 == e.kind;
        let found = match e.op.zxid {
            Some(z) => expected.iter().position(|x| x.2 == z && same(x)),
            None => (next..expected.len()).find(|&j| !used[j] && same(&expected[j])),
        };
        let Some(j) = found.filter(|&j| !used[j] && j >= next) else {
            let (kind, why) = match found {
                Some(j) if used[j] => ("duplicate", "its change was notified already"),
                Some(_) => ("reordered", "it comes after the event of a later change"),
                None if expected
                    .iter()
                    .enumerate()
                    .any(|(j, x)| !used[j] && same(x)) =>
                {
                    ("reordered", "it comes after the event of a later change")
                }
                None if expected.iter().any(same) => {
                    ("duplicate", "every such change was notified already")
                }
                None => ("phantom", "no such change"),
            };
            report.note(
                kind,
                class,
                e.op,
                format!(
                    "{} on {:?} for watch {} on {key:?} (zxid {:?}): {why}",
                    e.kind, e.key, watch.id, e.op.zxid
                ),
            );
            matched.push(None);
            continue;
        };
        used[j] = true;
        next = j + 1;
        matched.push(Some(expected[j].2));
    }
    matched
}
