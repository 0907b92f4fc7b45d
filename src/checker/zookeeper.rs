//! The `zookeeper` checker: ZooKeeper's own guarantees, checked from the zxid (the znode's
//! mzxid) and data version each `ok` read and write reports, in O(n log n).
//!
//! ZooKeeper orders all writes by zxid and makes them linearizable, but serves reads from the
//! server a session is connected to, so a read may be stale. It promises that a session never
//! goes back in time and that a read after `sync` sees what was committed before the sync.
//! This checker verifies, for the register workload's `read`, `write` and `cas` (see the
//! history contract) and optional explicit `sync` ops:
//!
//! - **write order** (`write-order`): a write acknowledged before another was invoked has the
//!   smaller zxid. Checked over all keys, since zxids are global.
//! - **values** (`unwritten-value`): a read reporting the zxid of an acknowledged write returns
//!   exactly that write's value and version, and completes after the write was invoked; a
//!   read at version 0 (the znode as created) returns the initial value; a read reporting a
//!   zxid no acknowledged write has must be explained by a distinct indeterminate (`info`)
//!   write of its key with the same value (and, for a cas, the version it would have made)
//!   invoked before the read completed; per key, distinct zxids carry strictly increasing
//!   versions, and no version exceeds the number of writes that could have happened.
//! - **lost writes** (`lost-write`): two acknowledged writes report one zxid, or a later
//!   acknowledged write of the key reports no higher version than an earlier one (the
//!   earlier was rolled back), or a sync'd read returns a zxid older than a write
//!   acknowledged before the sync was invoked.
//! - **sessions** (`went-back-in-time`): a session is a process. Once it has observed zxid H
//!   (any read's or write's zxid, on any key: the server that answered had applied H), its
//!   later reads of a key return no modification older than the newest known one at or
//!   below H, and its later writes get zxids above H. This covers "per session and key,
//!   observed zxids never decrease".
//! - **stale reads** (`stale-read`): a read not covered by a sync that returns a zxid older
//!   than a write acknowledged before the read was invoked. ZooKeeper allows these; they are
//!   counted and shown but do not make the history invalid.
//! - **absent znodes** (`lost-write`): each key's znode was created, and the creation
//!   acknowledged, before the history begins, and nothing deletes it. A write or cas the server
//!   answered `no-node` (writes go through the leader, which has every committed transaction),
//!   or a sync'd read answered `no-node`, proves the creation and every write on the key lost.
//!   A read without a sync answered `no-node` is a `stale-read`, unless its session had already
//!   observed a modification of the key (`went-back-in-time`).
//!
//! Assumptions: the register workload issues `sync` before every `read` (its default), so
//! with [`ZkOptions::sync_reads`] (the default) every read counts as sync'd after its own
//! invocation and a stale read is a `lost-write`. Without it, a read counts as sync'd only
//! after an `ok` `sync` op earlier in its session, bounded by that sync's invocation.
//! Indeterminate writes may or may not have happened and their zxids are unknown; they take
//! part only through the reads that reveal them (zxid order against real time is not
//! checked for them). `fail` ops did not happen; reads that did not return `ok` are dropped,
//! but for those answered `no-node`.
//! The workload is the only writer, each znode starts at version 0 with the initial value.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use anyhow::{anyhow, bail, Result};
use serde::Serialize;
use serde_json::Value;

use crate::history::{Op, OpType, Process, NO_NODE};

/// How many anomalies of each class the report lists; all are counted.
const EXAMPLES_PER_CLASS: usize = 100;

/// A class of anomaly the checker reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnomalyClass {
    /// A read older than a write acknowledged before it began: allowed by ZooKeeper.
    StaleRead,
    /// A session observed state older than state it had already observed.
    WentBackInTime,
    /// A read of a value, zxid or version no write produced.
    UnwrittenValue,
    /// An acknowledged write that later state proves missing.
    LostWrite,
    /// Zxid order of acknowledged writes against real time.
    WriteOrder,
}

impl AnomalyClass {
    /// Every class, in report order.
    pub const ALL: [AnomalyClass; 5] = [
        AnomalyClass::StaleRead,
        AnomalyClass::WentBackInTime,
        AnomalyClass::UnwrittenValue,
        AnomalyClass::LostWrite,
        AnomalyClass::WriteOrder,
    ];

    /// The class's name as reported, e.g. `stale-read`.
    pub fn name(self) -> &'static str {
        match self {
            AnomalyClass::StaleRead => "stale-read",
            AnomalyClass::WentBackInTime => "went-back-in-time",
            AnomalyClass::UnwrittenValue => "unwritten-value",
            AnomalyClass::LostWrite => "lost-write",
            AnomalyClass::WriteOrder => "write-order",
        }
    }

    /// Whether ZooKeeper allows anomalies of this class (they do not invalidate a history).
    pub fn allowed(self) -> bool {
        self == AnomalyClass::StaleRead
    }
}

/// One anomaly: its class, key, the ops involved (history indices) and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Anomaly {
    /// What kind of anomaly this is.
    pub class: AnomalyClass,
    /// The key involved, if the ops had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// History indices of the completions of the ops involved.
    pub ops: Vec<u64>,
    /// A sentence a person can check against the history.
    pub explanation: String,
}

/// The verdict of the `zookeeper` checker.
#[derive(Debug, Clone, Serialize)]
pub struct ZkReport {
    /// No anomaly of a class ZooKeeper forbids.
    pub valid: bool,
    /// Whether every read was taken as preceded by a sync.
    pub sync_reads: bool,
    /// `ok` reads checked.
    pub reads: usize,
    /// `ok` writes and cas checked.
    pub writes: usize,
    /// Writes and cas whose outcome is unknown (`info` or never completed).
    pub indeterminate_writes: usize,
    /// Reads, writes and cas the server answered `no-node` (the key's znode absent).
    pub no_node_answers: usize,
    /// Number of anomalies of each class.
    pub counts: BTreeMap<AnomalyClass, usize>,
    /// The anomalies, at most 100 of each class.
    pub anomalies: Vec<Anomaly>,
}

impl ZkReport {
    /// Number of anomalies of one class.
    pub fn count(&self, class: AnomalyClass) -> usize {
        self.counts.get(&class).copied().unwrap_or(0)
    }

    /// History indices of the ops in listed anomalies of forbidden classes, sorted, for a
    /// timeline to mark.
    pub fn marked_ops(&self) -> Vec<u64> {
        let mut marked: Vec<u64> = self
            .anomalies
            .iter()
            .filter(|a| !a.class.allowed())
            .flat_map(|a| a.ops.iter().copied())
            .collect();
        marked.sort_unstable();
        marked.dedup();
        marked
    }
}

impl fmt::Display for ZkReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "zookeeper: {} ({} reads, {} writes, {} indeterminate writes, {} no-node answers; \
             reads {}sync'd)",
            if self.valid { "valid" } else { "INVALID" },
            self.reads,
            self.writes,
            self.indeterminate_writes,
            self.no_node_answers,
            if self.sync_reads { "" } else { "not " }
        )?;
        for class in AnomalyClass::ALL {
            let note = if class.allowed() {
                " (allowed by ZooKeeper, not linearizable)"
            } else {
                ""
            };
            writeln!(f, "  {:<18} {}{note}", class.name(), self.count(class))?;
        }
        for a in &self.anomalies {
            let ops: Vec<String> = a.ops.iter().map(u64::to_string).collect();
            let key = a
                .key
                .as_deref()
                .map(|k| format!(" key {k}"))
                .unwrap_or_default();
            writeln!(
                f,
                "  - {}{key}, ops {}: {}",
                a.class.name(),
                ops.join(" "),
                a.explanation
            )?;
        }
        Ok(())
    }
}

/// What the checker assumes about the history.
#[derive(Debug, Clone)]
pub struct ZkOptions {
    /// Every `read` is preceded by a `sync` issued after the read's invocation.
    pub sync_reads: bool,
    /// The value of a znode as created (version 0).
    pub initial: Value,
}

impl Default for ZkOptions {
    fn default() -> Self {
        ZkOptions {
            sync_reads: true,
            initial: Value::Null,
        }
    }
}

/// Checks a history with the default options (sync'd reads, initial value nil).
pub fn check(ops: &[Op]) -> Result<ZkReport> {
    check_with(ops, &ZkOptions::default())
}

/// Checks a history against ZooKeeper's guarantees.
///
/// Errors on a history that cannot be paired (a completion without an invocation, two open
/// ops in one process) or an `ok` read/write without a zxid and version.
pub fn check_with(ops: &[Op], options: &ZkOptions) -> Result<ZkReport> {
    let history = History::read(ops)?;
    let mut findings = Findings::new(ops, &history.keys);
    check_write_order(&history, &mut findings);
    let known = check_key_states(&history, options, &mut findings);
    check_sessions(&history, &known, options, &mut findings);
    check_absent_writes(&history, &mut findings);
    let calls = &history.calls;
    let is_write = |c: &&Call| matches!(c.kind, Kind::Write | Kind::Cas);
    Ok(ZkReport {
        valid: findings
            .counts
            .iter()
            .all(|(class, n)| class.allowed() || *n == 0),
        sync_reads: options.sync_reads,
        reads: calls
            .iter()
            .filter(|c| c.kind == Kind::Read && c.outcome == OpType::Ok)
            .count(),
        writes: calls
            .iter()
            .filter(is_write)
            .filter(|c| c.outcome == OpType::Ok)
            .count(),
        indeterminate_writes: calls
            .iter()
            .filter(is_write)
            .filter(|c| c.outcome == OpType::Info)
            .count(),
        no_node_answers: calls.iter().filter(|c| c.absent).count(),
        counts: findings.counts,
        anomalies: findings.anomalies,
    })
}

/// The ZooKeeper operations a call can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    Cas,
    Sync,
}

/// An invocation paired with its completion.
#[derive(Debug, Clone)]
struct Call<'a> {
    kind: Kind,
    key: u32,
    process: u64,
    /// Position of the invocation in the history.
    invoke: usize,
    /// Position of the completion, or the history's length if it never completed.
    complete: usize,
    /// `Ok`, `Fail` or `Info` (also for ops that never completed).
    outcome: OpType,
    /// A read's result; the value a write or cas writes.
    value: &'a Value,
    /// A cas's expected version.
    expected: Option<i64>,
    /// The zxid and version of an `ok` read or write (0 otherwise).
    zxid: i64,
    version: i64,
    /// A read, write or cas the server answered `no-node`.
    absent: bool,
}

/// The calls of a history in completion order (never-completed ones last), with keys
/// numbered.
struct History<'a> {
    calls: Vec<Call<'a>>,
    keys: Vec<Option<&'a str>>,
}

impl<'a> History<'a> {
    fn read(ops: &'a [Op]) -> Result<History<'a>> {
        let mut key_ids: HashMap<Option<&str>, u32> = HashMap::new();
        let mut keys = Vec::new();
        let mut open: HashMap<u64, usize> = HashMap::new();
        let mut calls = Vec::with_capacity(ops.len() / 2);
        for (pos, op) in ops.iter().enumerate() {
            let Process::Client(process) = op.process else {
                continue;
            };
            if op.kind == OpType::Invoke {
                if let Some(&earlier) = open.get(&process) {
                    bail!(
                        "op {}: process {process} invokes {} while its op {} is still open",
                        op.index,
                        op.f,
                        ops[earlier].index
                    );
                }
                open.insert(process, pos);
                continue;
            }
            let invoke = open.remove(&process).ok_or_else(|| {
                anyhow!(
                    "op {}: {:?} completion of process {process} follows no invocation",
                    op.index,
                    op.kind
                )
            })?;
            let invocation = &ops[invoke];
            if invocation.f != op.f {
                bail!(
                    "op {}: completion {} does not match invocation {} (op {})",
                    op.index,
                    op.f,
                    invocation.f,
                    invocation.index
                );
            }
            if let Some(call) = Call::new(ops, process, invoke, Some(pos), &mut key_ids, &mut keys)?
            {
                calls.push(call);
            }
        }
        let mut never_completed: Vec<(usize, u64)> = open
            .into_iter()
            .map(|(process, invoke)| (invoke, process))
            .collect();
        never_completed.sort_unstable();
        for (invoke, process) in never_completed {
            if let Some(call) = Call::new(ops, process, invoke, None, &mut key_ids, &mut keys)? {
                calls.push(call);
            }
        }
        Ok(History { calls, keys })
    }
}

impl<'a> Call<'a> {
    /// Pairs an invocation with its completion (`None`: never completed); `None` for
    /// functions this checker does not know.
    fn new(
        ops: &'a [Op],
        process: u64,
        invoke: usize,
        complete: Option<usize>,
        key_ids: &mut HashMap<Option<&'a str>, u32>,
        keys: &mut Vec<Option<&'a str>>,
    ) -> Result<Option<Call<'a>>> {
        let inv = &ops[invoke];
        let kind = match inv.f.as_str() {
            "read" => Kind::Read,
            "write" => Kind::Write,
            "cas" => Kind::Cas,
            "sync" => Kind::Sync,
            _ => return Ok(None),
        };
        let done = complete.map(|pos| &ops[pos]);
        let outcome = done.map_or(OpType::Info, |op| op.kind);
        let key_name = inv.key.as_deref();
        let next_id = key_ids.len() as u32;
        let key = *key_ids.entry(key_name).or_insert_with(|| {
            keys.push(key_name);
            next_id
        });
        let (value, expected) = match kind {
            Kind::Read | Kind::Sync => (done.map_or(&Value::Null, |op| &op.value), None),
            Kind::Write => (&inv.value, None),
            Kind::Cas => match inv.value.as_array().map(Vec::as_slice) {
                Some([expected, new]) if expected.is_i64() => (new, expected.as_i64()),
                _ => bail!(
                    "op {}: cas value {} is not [expected_version, new_value]",
                    inv.index,
                    inv.value
                ),
            },
        };
        let (mut zxid, mut version) = (0, 0);
        if let (Some(op), OpType::Ok, Kind::Read | Kind::Write | Kind::Cas) = (done, outcome, kind)
        {
            let missing = |what: &str| {
                anyhow!(
                    "op {}: ok {} has no {what}; the zookeeper model needs the zxid and version \
                     ZooKeeper returned",
                    op.index,
                    op.f
                )
            };
            zxid = op.zxid.ok_or_else(|| missing("zxid"))?;
            version = i64::from(op.version.ok_or_else(|| missing("version"))?);
        }
        let absent = outcome == OpType::Fail
            && kind != Kind::Sync
            && done.and_then(|op| op.error.as_deref()) == Some(NO_NODE);
        Ok(Some(Call {
            kind,
            key,
            process,
            invoke,
            complete: complete.unwrap_or(ops.len()),
            outcome,
            value,
            expected,
            zxid,
            version,
            absent,
        }))
    }

    fn is_ok_write(&self) -> bool {
        matches!(self.kind, Kind::Write | Kind::Cas) && self.outcome == OpType::Ok
    }

    fn is_ok_read(&self) -> bool {
        self.kind == Kind::Read && self.outcome == OpType::Ok
    }

    fn is_absent_read(&self) -> bool {
        self.kind == Kind::Read && self.absent
    }
}

/// Counts anomalies and keeps the first of each class.
struct Findings<'a> {
    ops: &'a [Op],
    keys: &'a [Option<&'a str>],
    counts: BTreeMap<AnomalyClass, usize>,
    anomalies: Vec<Anomaly>,
}

impl<'a> Findings<'a> {
    fn new(ops: &'a [Op], keys: &'a [Option<&'a str>]) -> Self {
        Findings {
            ops,
            keys,
            counts: AnomalyClass::ALL.iter().map(|&c| (c, 0)).collect(),
            anomalies: Vec::new(),
        }
    }

    /// Records an anomaly involving `calls`; the explanation is only built if it is listed.
    fn add(
        &mut self,
        class: AnomalyClass,
        key: u32,
        calls: &[&Call],
        explain: impl FnOnce() -> String,
    ) {
        let count = self.counts.entry(class).or_insert(0);
        *count += 1;
        if *count > EXAMPLES_PER_CLASS {
            return;
        }
        let ops = calls
            .iter()
            .map(|c| {
                self.ops
                    .get(c.complete)
                    .unwrap_or(&self.ops[c.invoke])
                    .index
            })
            .collect();
        self.anomalies.push(Anomaly {
            class,
            key: self.keys[key as usize].map(str::to_string),
            ops,
            explanation: explain(),
        });
    }
}

/// Acknowledged writes: zxids unique, and zxid order agrees with real time.
fn check_write_order(history: &History, findings: &mut Findings) {
    let calls = &history.calls;
    let mut acked: Vec<&Call> = calls.iter().filter(|c| c.is_ok_write()).collect();
    acked.sort_by_key(|c| c.zxid);
    for pair in acked.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if a.zxid == b.zxid {
            findings.add(AnomalyClass::LostWrite, b.key, &[a, b], || {
                format!(
                    "two acknowledged writes report zxid {}: one of them has no transaction",
                    a.zxid
                )
            });
        }
    }
    // Scanning by zxid, the earlier-zxid write invoked last is the one most likely to have
    // been invoked after the current write completed.
    let mut latest: Option<&Call> = None;
    for &c in &acked {
        if let Some(p) = latest {
            if c.complete < p.invoke && p.zxid < c.zxid {
                findings.add(AnomalyClass::WriteOrder, c.key, &[c, p], || {
                    format!(
                        "the write with zxid {} completed before the write with the smaller \
                         zxid {} was invoked",
                        c.zxid, p.zxid
                    )
                });
            }
        }
        if latest.is_none_or(|p| c.invoke > p.invoke) {
            latest = Some(c);
        }
    }
}

/// The known modifications (zxids) of each key, sorted: from acknowledged writes and from
/// the zxids reads report.
struct KnownModifications {
    zxids: Vec<i64>,
    /// `zxids[ranges[k].0..ranges[k].1]` belong to key `k`.
    ranges: Vec<(usize, usize)>,
}

impl KnownModifications {
    /// The newest known modification of `key` at or below `zxid`.
    fn latest_at_or_below(&self, key: u32, zxid: i64) -> Option<i64> {
        let (start, end) = self.ranges[key as usize];
        let zxids = &self.zxids[start..end];
        let n = zxids.partition_point(|&z| z <= zxid);
        n.checked_sub(1).map(|i| zxids[i])
    }
}

/// A zxid of a key that only reads report: it must be an indeterminate write's.
struct Unexplained<'c, 'a> {
    zxid: i64,
    read: &'c Call<'a>,
    /// The earliest completion among the reads reporting it.
    deadline: usize,
}

/// Per key, by zxid: reads agree with the write of their zxid, versions grow with zxids,
/// and zxids no acknowledged write has are explained by indeterminate writes.
fn check_key_states(
    history: &History,
    options: &ZkOptions,
    findings: &mut Findings,
) -> KnownModifications {
    let calls = &history.calls;
    let mut points: Vec<(u32, i64, bool, usize)> = calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.is_ok_read() || c.is_ok_write())
        .map(|(i, c)| (c.key, c.zxid, !c.is_ok_write(), i))
        .collect();
    // Writes sort before reads of the same zxid.
    points.sort_unstable();
    let mut known = KnownModifications {
        zxids: Vec::with_capacity(points.len()),
        ranges: vec![(0, 0); history.keys.len()],
    };
    let mut unexplained: Vec<Unexplained> = Vec::new();
    let mut previous: Option<&Call> = None;
    let mut max_version: Vec<Option<&Call>> = vec![None; history.keys.len()];
    let mut start = 0;
    while start < points.len() {
        let (key, zxid, _, _) = points[start];
        let end = start
            + points[start..]
                .iter()
                .take_while(|p| p.0 == key && p.1 == zxid)
                .count();
        let group: Vec<&Call> = points[start..end].iter().map(|p| &calls[p.3]).collect();
        start = end;
        let rep = group[0];
        if rep.is_ok_write() {
            for read in group.iter().filter(|c| c.is_ok_read()) {
                check_read_of_write(rep, read, findings);
            }
        } else {
            for read in &group[1..] {
                if read.value != rep.value || read.version != rep.version {
                    findings.add(AnomalyClass::UnwrittenValue, key, &[rep, read], || {
                        format!(
                            "two reads report zxid {zxid} with different data: {} (version {}) \
                             and {} (version {})",
                            rep.value, rep.version, read.value, read.version
                        )
                    });
                }
            }
            if rep.version == 0 {
                for read in group.iter().filter(|r| *r.value != options.initial) {
                    findings.add(AnomalyClass::UnwrittenValue, key, &[read], || {
                        format!(
                            "read reports version 0 (the znode as created) but value {}, not \
                             the initial value {}",
                            read.value, options.initial
                        )
                    });
                }
            } else {
                let deadline = group
                    .iter()
                    .map(|r| r.complete)
                    .min()
                    .unwrap_or(rep.complete);
                unexplained.push(Unexplained {
                    zxid,
                    read: rep,
                    deadline,
                });
            }
        }
        match previous {
            Some(prev) if prev.key == key => {
                if rep.version <= prev.version {
                    let class = if prev.is_ok_write() && rep.is_ok_write() {
                        AnomalyClass::LostWrite
                    } else {
                        AnomalyClass::UnwrittenValue
                    };
                    findings.add(class, key, &[prev, rep], || {
                        format!(
                            "zxid {} has version {}, but the earlier zxid {} already had version \
                             {}: versions must grow with each modification",
                            rep.zxid, rep.version, prev.zxid, prev.version
                        )
                    });
                }
            }
            _ => known.ranges[key as usize].0 = known.zxids.len(),
        }
        known.zxids.push(zxid);
        known.ranges[key as usize].1 = known.zxids.len();
        let slot = &mut max_version[key as usize];
        if slot.is_none_or(|m| rep.version > m.version) {
            *slot = Some(rep);
        }
        previous = Some(rep);
    }
    check_version_budget(history, &max_version, findings);
    explain_by_indeterminate_writes(history, unexplained, findings);
    known
}

/// A read reporting an acknowledged write's zxid returns that write's data, after its
/// invocation.
fn check_read_of_write(write: &Call, read: &Call, findings: &mut Findings) {
    if read.value != write.value || read.version != write.version {
        findings.add(
            AnomalyClass::UnwrittenValue,
            read.key,
            &[write, read],
            || {
                format!(
                    "read returned {} (version {}) at zxid {}, but the write with that zxid \
                     wrote {} (version {})",
                    read.value, read.version, read.zxid, write.value, write.version
                )
            },
        );
    } else if read.complete < write.invoke {
        findings.add(
            AnomalyClass::UnwrittenValue,
            read.key,
            &[read, write],
            || {
                format!(
                    "read returned the write with zxid {} before that write was invoked",
                    read.zxid
                )
            },
        );
    }
}

/// No key reaches a version above the number of writes of it that could have happened.
fn check_version_budget(history: &History, max_version: &[Option<&Call>], findings: &mut Findings) {
    let mut possible = vec![0i64; history.keys.len()];
    for c in &history.calls {
        if matches!(c.kind, Kind::Write | Kind::Cas) && c.outcome != OpType::Fail {
            possible[c.key as usize] += 1;
        }
    }
    for (key, top) in max_version.iter().enumerate() {
        let Some(top) = top else { continue };
        let writes = possible[key];
        if top.version > writes {
            findings.add(AnomalyClass::UnwrittenValue, key as u32, &[top], || {
                format!(
                    "zxid {} reports version {}, but only {writes} writes of the key could \
                     have taken effect",
                    top.zxid, top.version
                )
            });
        }
    }
}

/// Matches each zxid only reads report to a distinct indeterminate write of its key with
/// the same value, invoked before the first such read completed (a cas must also produce the
/// reported version). Unmatched zxids are reads of unwritten values.
///
/// Eligibility only bounds the invocation from above, so serving zxids in order of their
/// deadlines and taking an eligible write (a cas of the exact version first) never blocks a
/// later zxid that a different choice would have served.
fn explain_by_indeterminate_writes(
    history: &History,
    mut unexplained: Vec<Unexplained>,
    findings: &mut Findings,
) {
    if unexplained.is_empty() {
        return;
    }
    let mut writes: HashMap<(u32, String), Vec<&Call>> = HashMap::new();
    // Indeterminate cas by the key and version they would make, each with a "used" flag.
    let mut cases: HashMap<(u32, i64), Vec<(&Call, bool)>> = HashMap::new();
    for c in history.calls.iter().filter(|c| c.outcome == OpType::Info) {
        match (c.kind, c.expected) {
            (Kind::Write, _) => writes
                .entry((c.key, c.value.to_string()))
                .or_default()
                .push(c),
            (Kind::Cas, Some(expected)) => cases
                .entry((c.key, expected + 1))
                .or_default()
                .push((c, false)),
            _ => {}
        }
    }
    // Calls are in completion order; eligibility needs invocation order.
    for list in writes.values_mut() {
        list.sort_by_key(|c| c.invoke);
    }
    let mut next_write: HashMap<(u32, String), usize> = HashMap::new();
    unexplained.sort_by_key(|u| u.deadline);
    for u in &unexplained {
        let read = u.read;
        let cas = cases.get_mut(&(read.key, read.version)).and_then(|list| {
            list.iter_mut()
                .find(|(c, used)| !*used && c.value == read.value && c.invoke < u.deadline)
        });
        if let Some((_, used)) = cas {
            *used = true;
            continue;
        }
        let bucket = (read.key, read.value.to_string());
        if let Some(list) = writes.get(&bucket) {
            let next = next_write.entry(bucket).or_insert(0);
            if list.get(*next).is_some_and(|w| w.invoke < u.deadline) {
                *next += 1;
                continue;
            }
        }
        findings.add(AnomalyClass::UnwrittenValue, read.key, &[read], || {
            format!(
                "read returned {} (version {}) at zxid {}, which no acknowledged write has and \
                 no remaining indeterminate write of that value invoked before the read could \
                 have produced",
                read.value, read.version, u.zxid
            )
        });
    }
}

/// A session's view: the newest zxid it has observed and the call it came from.
#[derive(Default)]
struct Session {
    horizon: Option<(i64, usize)>,
    last_sync: Option<usize>,
}

/// Sessions never go back in time; sync'd reads are not older than writes acknowledged
/// before the sync; other stale reads are counted.
fn check_sessions(
    history: &History,
    known: &KnownModifications,
    options: &ZkOptions,
    findings: &mut Findings,
) {
    let calls = &history.calls;
    // Per key: (completion position, highest zxid acknowledged so far, that write's call).
    let mut acked: Vec<Vec<(usize, i64, usize)>> = vec![Vec::new(); history.keys.len()];
    let mut sessions: HashMap<u64, Session> = HashMap::new();
    for (i, c) in calls.iter().enumerate() {
        if c.is_absent_read() {
            let session = sessions.entry(c.process).or_default();
            check_absent_read(calls, known, c, session, options, findings);
            continue;
        }
        if c.outcome != OpType::Ok {
            continue;
        }
        let session = sessions.entry(c.process).or_default();
        match c.kind {
            Kind::Sync => session.last_sync = Some(c.invoke),
            Kind::Read => {
                check_freshness(calls, &acked, c, session.last_sync, options, findings);
                if let Some((horizon, from)) = session.horizon {
                    let newest = known.latest_at_or_below(c.key, horizon);
                    if let Some(newest) = newest.filter(|&m| c.zxid < m) {
                        findings.add(
                            AnomalyClass::WentBackInTime,
                            c.key,
                            &[&calls[from], c],
                            || {
                                format!(
                                    "session {} had seen zxid {horizon}, when the key was \
                                     already modified at zxid {newest}, but then read the older \
                                     zxid {}",
                                    c.process, c.zxid
                                )
                            },
                        );
                    }
                }
            }
            Kind::Write | Kind::Cas => {
                if let Some((horizon, from)) = session.horizon.filter(|h| c.zxid <= h.0) {
                    findings.add(
                        AnomalyClass::WentBackInTime,
                        c.key,
                        &[&calls[from], c],
                        || {
                            format!(
                                "session {} had seen zxid {horizon}, but its later write got \
                                 the zxid {}, not above it",
                                c.process, c.zxid
                            )
                        },
                    );
                }
                let list = &mut acked[c.key as usize];
                let best = match list.last() {
                    Some(&(_, z, from)) if z >= c.zxid => (z, from),
                    _ => (c.zxid, i),
                };
                list.push((c.complete, best.0, best.1));
            }
        }
        if c.kind != Kind::Sync && session.horizon.is_none_or(|h| c.zxid > h.0) {
            session.horizon = Some((c.zxid, i));
        }
    }
}

/// A write or cas answered `no-node` found the key's znode, created before the run, gone.
fn check_absent_writes(history: &History, findings: &mut Findings) {
    for c in history
        .calls
        .iter()
        .filter(|c| c.absent && c.kind != Kind::Read)
    {
        let f = if c.kind == Kind::Cas { "cas" } else { "write" };
        findings.add(AnomalyClass::LostWrite, c.key, &[c], || {
            format!(
                "the {f} was answered no-node: the key's znode, created before the run and never \
                 deleted, is gone with every write acknowledged on it"
            )
        });
    }
}

/// A read answered `no-node`: after a sync the znode's creation (acknowledged before the run)
/// is lost; without one the read is stale, or goes back in time when its session had seen the
/// key modified.
fn check_absent_read(
    calls: &[Call],
    known: &KnownModifications,
    read: &Call,
    session: &Session,
    options: &ZkOptions,
    findings: &mut Findings,
) {
    if options.sync_reads || session.last_sync.is_some() {
        findings.add(AnomalyClass::LostWrite, read.key, &[read], || {
            "the sync'd read was answered no-node: the key's znode, created before the run and \
             never deleted, is gone with every write acknowledged on it"
                .to_string()
        });
        return;
    }
    let seen = session
        .horizon
        .and_then(|(h, from)| known.latest_at_or_below(read.key, h).map(|m| (h, m, from)));
    match seen {
        Some((horizon, modified, from)) => findings.add(
            AnomalyClass::WentBackInTime,
            read.key,
            &[&calls[from], read],
            || {
                format!(
                    "session {} had seen zxid {horizon}, when the key's znode was already \
                     modified at zxid {modified}, but then read it as absent (no-node)",
                    read.process
                )
            },
        ),
        None => findings.add(AnomalyClass::StaleRead, read.key, &[read], || {
            "the read was answered no-node, older than the key's znode created before the run"
                .to_string()
        }),
    }
}

/// A read is no older than the writes acknowledged before its sync (`lost-write` if not) or,
/// without a sync, before its invocation (`stale-read` if not).
fn check_freshness(
    calls: &[Call],
    acked: &[Vec<(usize, i64, usize)>],
    read: &Call,
    last_sync: Option<usize>,
    options: &ZkOptions,
    findings: &mut Findings,
) {
    let newest_before = |pos: usize| {
        let list = &acked[read.key as usize];
        let n = list.partition_point(|&(complete, _, _)| complete < pos);
        n.checked_sub(1).map(|i| (list[i].1, list[i].2))
    };
    let sync_at = if options.sync_reads {
        Some(read.invoke)
    } else {
        last_sync
    };
    if let Some((zxid, write)) = sync_at
        .and_then(newest_before)
        .filter(|&(z, _)| read.zxid < z)
    {
        findings.add(
            AnomalyClass::LostWrite,
            read.key,
            &[&calls[write], read],
            || {
                format!(
                    "the write with zxid {zxid} was acknowledged before the read's sync was \
                     invoked, but the sync'd read returned the older zxid {}",
                    read.zxid
                )
            },
        );
    } else if let Some((zxid, write)) = newest_before(read.invoke).filter(|&(z, _)| read.zxid < z) {
        findings.add(
            AnomalyClass::StaleRead,
            read.key,
            &[&calls[write], read],
            || {
                format!(
                    "the write with zxid {zxid} was acknowledged before the read was invoked, \
                     but the read returned the older zxid {}",
                    read.zxid
                )
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::testing::op;
    use serde_json::json;

    /// Builds a history op by op; index and time follow the order of calls.
    #[derive(Default)]
    struct Builder {
        ops: Vec<Op>,
    }

    impl Builder {
        fn push(&mut self, op: Op) -> &mut Self {
            let index = self.ops.len() as u64;
            self.ops.push(Op {
                index,
                time: index * 10,
                ..op
            });
            self
        }
        /// An op of `kind` by client `p` on `key`.
        fn on(kind: OpType, p: u64, f: &str, key: &str, value: Value) -> Op {
            op(0, 0, kind, Process::Client(p), f)
                .with_key(key)
                .with_value(value)
        }
        fn invoke(&mut self, p: u64, f: &str, key: &str, value: Value) -> &mut Self {
            self.push(Self::on(OpType::Invoke, p, f, key, value))
        }
        fn ok(
            &mut self,
            p: u64,
            f: &str,
            key: &str,
            value: Value,
            zxid: i64,
            version: i32,
        ) -> &mut Self {
            let op = Self::on(OpType::Ok, p, f, key, value);
            self.push(op.with_zxid(zxid).with_version(version))
        }
        fn end(&mut self, kind: OpType, p: u64, f: &str, key: &str) -> &mut Self {
            self.push(Self::on(kind, p, f, key, Value::Null))
        }
        /// A whole `f` by `p` on `key` answered `no-node`.
        fn no_node(&mut self, p: u64, f: &str, key: &str, value: Value) -> &mut Self {
            self.invoke(p, f, key, value.clone());
            self.push(Self::on(OpType::Fail, p, f, key, value).with_error(NO_NODE))
        }
        /// A whole write by `p`: invoke, then ok with the given zxid and version.
        fn write(&mut self, p: u64, key: &str, v: i64, zxid: i64, version: i32) -> &mut Self {
            self.invoke(p, "write", key, json!(v))
                .ok(p, "write", key, json!(v), zxid, version)
        }
        /// A whole read by `p` returning `v` at the given zxid and version.
        fn read(&mut self, p: u64, key: &str, v: Value, zxid: i64, version: i32) -> &mut Self {
            self.invoke(p, "read", key, Value::Null)
                .ok(p, "read", key, v, zxid, version)
        }
        fn check(&self) -> ZkReport {
            check(&self.ops).expect("well-formed history")
        }
        fn check_unsynced(&self) -> ZkReport {
            let options = ZkOptions {
                sync_reads: false,
                ..ZkOptions::default()
            };
            check_with(&self.ops, &options).expect("well-formed history")
        }
    }

    fn only(report: &ZkReport, class: AnomalyClass, n: usize) {
        for c in AnomalyClass::ALL {
            let expected = if c == class { n } else { 0 };
            assert_eq!(report.count(c), expected, "{c:?} in\n{report}");
        }
        assert_eq!(report.valid, class.allowed() || n == 0, "{report}");
    }

    #[test]
    fn sequential_register_is_valid() {
        let mut h = Builder::default();
        h.read(0, "k", json!(null), 5, 0)
            .write(0, "k", 1, 10, 1)
            .read(1, "k", json!(1), 10, 1)
            .invoke(1, "cas", "k", json!([1, 2]))
            .ok(1, "cas", "k", json!([1, 2]), 11, 2)
            .read(0, "k", json!(2), 11, 2)
            .read(2, "other", json!(null), 6, 0);
        let report = h.check();
        only(&report, AnomalyClass::StaleRead, 0);
        assert_eq!((report.reads, report.writes), (4, 2));
    }

    #[test]
    fn empty_history_is_valid() {
        let report = check(&[]).unwrap();
        assert!(report.valid);
        assert_eq!(report.reads + report.writes, 0);
    }

    #[test]
    fn read_concurrent_with_a_write_may_return_the_old_value() {
        let mut h = Builder::default();
        h.write(0, "k", 1, 10, 1)
            .invoke(0, "write", "k", json!(2))
            .invoke(1, "read", "k", Value::Null)
            .ok(1, "read", "k", json!(1), 10, 1)
            .ok(0, "write", "k", json!(2), 11, 2);
        only(&h.check(), AnomalyClass::StaleRead, 0);
    }

    #[test]
    fn stale_read_is_allowed_without_sync_and_a_lost_write_with_it() {
        let mut h = Builder::default();
        h.read(1, "k", json!(null), 5, 0)
            .write(0, "k", 1, 10, 1)
            .read(1, "k", json!(null), 5, 0);
        let unsynced = h.check_unsynced();
        only(&unsynced, AnomalyClass::StaleRead, 1);
        assert!(unsynced.marked_ops().is_empty());
        let synced = h.check();
        only(&synced, AnomalyClass::LostWrite, 1);
        assert_eq!(synced.anomalies[0].ops, vec![3, 5]);
        assert_eq!(synced.marked_ops(), vec![3, 5]);
    }

    #[test]
    fn explicit_sync_bounds_later_reads() {
        let mut h = Builder::default();
        h.write(0, "k", 1, 10, 1)
            .invoke(1, "sync", "k", Value::Null)
            .end(OpType::Ok, 1, "sync", "k")
            .read(1, "k", json!(null), 5, 0);
        only(&h.check_unsynced(), AnomalyClass::LostWrite, 1);
        // The same read without the sync is only stale.
        let mut h = Builder::default();
        h.write(0, "k", 1, 10, 1).read(1, "k", json!(null), 5, 0);
        only(&h.check_unsynced(), AnomalyClass::StaleRead, 1);
    }

    #[test]
    fn session_going_back_on_a_key_is_caught() {
        let mut h = Builder::default();
        h.write(0, "k", 1, 10, 1)
            .invoke(0, "write", "k", json!(2))
            .invoke(1, "read", "k", Value::Null)
            .ok(1, "read", "k", json!(2), 11, 2)
            .invoke(1, "read", "k", Value::Null)
            .ok(1, "read", "k", json!(1), 10, 1)
            .ok(0, "write", "k", json!(2), 11, 2);
        only(&h.check(), AnomalyClass::WentBackInTime, 1);
    }

    #[test]
    fn session_going_back_across_keys_is_caught() {
        // Session 1 sees zxid 20 on key a, so its server had applied zxid 15 on key b; a read
        // of b returning zxid 12 afterwards goes back, though it is concurrent with that write
        // and would be linearizable.
        let mut h = Builder::default();
        h.write(0, "b", 1, 12, 1)
            .invoke(2, "write", "b", json!(2))
            .write(3, "a", 7, 20, 1)
            .read(1, "a", json!(7), 20, 1)
            .read(1, "b", json!(1), 12, 1)
            .ok(2, "write", "b", json!(2), 15, 2);
        only(&h.check(), AnomalyClass::WentBackInTime, 1);
        // A fresh session may read b at zxid 12.
        let mut h = Builder::default();
        h.write(0, "b", 1, 12, 1)
            .invoke(2, "write", "b", json!(2))
            .write(3, "a", 7, 20, 1)
            .read(1, "a", json!(7), 20, 1)
            .read(4, "b", json!(1), 12, 1)
            .ok(2, "write", "b", json!(2), 15, 2);
        only(&h.check(), AnomalyClass::StaleRead, 0);
    }

    #[test]
    fn session_write_below_its_horizon_is_caught() {
        let mut h = Builder::default();
        h.invoke(0, "write", "a", json!(1))
            .read(1, "b", json!(null), 30, 0)
            .invoke(1, "write", "a", json!(2))
            .ok(0, "write", "a", json!(1), 25, 1)
            .ok(1, "write", "a", json!(2), 24, 2);
        let report = h.check();
        assert_eq!(report.count(AnomalyClass::WentBackInTime), 1, "{report}");
        assert!(!report.valid);
    }

    #[test]
    fn read_must_return_the_data_of_its_zxid() {
        let mut h = Builder::default();
        h.write(0, "k", 1, 10, 1).read(1, "k", json!(7), 10, 1);
        only(&h.check(), AnomalyClass::UnwrittenValue, 1);
        let mut h = Builder::default();
        h.write(0, "k", 1, 10, 1).read(1, "k", json!(1), 10, 3);
        only(&h.check(), AnomalyClass::UnwrittenValue, 1);
    }

    #[test]
    fn read_of_the_initial_version_must_return_the_initial_value() {
        let mut h = Builder::default();
        h.read(1, "k", json!(5), 5, 0);
        only(&h.check(), AnomalyClass::UnwrittenValue, 1);
        let options = ZkOptions {
            initial: json!(5),
            ..ZkOptions::default()
        };
        assert!(check_with(&h.ops, &options).unwrap().valid);
    }

    #[test]
    fn read_before_its_write_was_invoked_is_caught() {
        let mut h = Builder::default();
        h.read(1, "k", json!(1), 10, 1).write(0, "k", 1, 10, 1);
        only(&h.check(), AnomalyClass::UnwrittenValue, 1);
    }

    #[test]
    fn indeterminate_writes_explain_unknown_zxids_at_most_once() {
        // The info write of 9 explains the read at zxid 12.
        let mut h = Builder::default();
        h.write(0, "k", 1, 10, 1)
            .invoke(1, "write", "k", json!(9))
            .end(OpType::Info, 1, "write", "k")
            .read(2, "k", json!(9), 12, 2);
        only(&h.check(), AnomalyClass::StaleRead, 0);
        // A second unknown zxid with the same value needs a second write (and version 4
        // needs a fourth write).
        h.write(3, "k", 4, 13, 3).read(2, "k", json!(9), 14, 4);
        let report = h.check();
        only(&report, AnomalyClass::UnwrittenValue, 2);
        assert!(report.anomalies.iter().all(|a| a.ops == [9]));
        // No indeterminate write of that value at all.
        let mut h = Builder::default();
        h.write(0, "k", 1, 10, 1).read(2, "k", json!(9), 12, 2);
        only(&h.check(), AnomalyClass::UnwrittenValue, 2);
    }

    #[test]
    fn indeterminate_write_invoked_after_the_read_cannot_explain_it() {
        let mut h = Builder::default();
        h.read(2, "k", json!(9), 12, 1)
            .invoke(1, "write", "k", json!(9))
            .end(OpType::Info, 1, "write", "k");
        only(&h.check(), AnomalyClass::UnwrittenValue, 1);
        // A write that never completed may also have happened.
        let mut h = Builder::default();
        h.invoke(1, "write", "k", json!(9))
            .read(2, "k", json!(9), 12, 1);
        only(&h.check(), AnomalyClass::StaleRead, 0);
    }

    #[test]
    fn indeterminate_cas_must_make_the_reported_version() {
        let mut h = Builder::default();
        h.write(0, "k", 1, 10, 1)
            .invoke(1, "cas", "k", json!([1, 9]))
            .end(OpType::Info, 1, "cas", "k")
            .read(2, "k", json!(9), 12, 2);
        only(&h.check(), AnomalyClass::StaleRead, 0);
        let mut h = Builder::default();
        h.write(0, "k", 1, 10, 1)
            .invoke(1, "cas", "k", json!([0, 9]))
            .end(OpType::Info, 1, "cas", "k")
            .read(2, "k", json!(9), 12, 2);
        only(&h.check(), AnomalyClass::UnwrittenValue, 1);
    }

    #[test]
    fn versions_must_grow_with_zxids() {
        // Two acknowledged writes: the second reports no higher version: lost write.
        let mut h = Builder::default();
        h.write(0, "k", 1, 10, 2).write(0, "k", 2, 12, 2);
        let report = h.check();
        assert_eq!(report.count(AnomalyClass::LostWrite), 1, "{report}");
        assert!(!report.valid);
        // More versions than writes.
        let mut h = Builder::default();
        h.write(0, "k", 1, 10, 1).write(0, "k", 2, 12, 5);
        only(&h.check(), AnomalyClass::UnwrittenValue, 1);
        // A version gap filled by an indeterminate write is fine.
        let mut h = Builder::default();
        h.write(0, "k", 1, 10, 1)
            .invoke(1, "write", "k", json!(3))
            .end(OpType::Info, 1, "write", "k")
            .write(0, "k", 2, 12, 3);
        only(&h.check(), AnomalyClass::StaleRead, 0);
    }

    #[test]
    fn two_acknowledged_writes_with_one_zxid_are_a_lost_write() {
        let mut h = Builder::default();
        h.write(0, "a", 1, 10, 1).write(1, "b", 2, 10, 1);
        only(&h.check(), AnomalyClass::LostWrite, 1);
    }

    #[test]
    fn zxid_order_must_agree_with_real_time() {
        let mut h = Builder::default();
        h.write(0, "a", 1, 20, 1).write(1, "b", 2, 15, 1);
        only(&h.check(), AnomalyClass::WriteOrder, 1);
        // Concurrent writes may take either order.
        let mut h = Builder::default();
        h.invoke(0, "write", "a", json!(1))
            .invoke(1, "write", "b", json!(2))
            .ok(0, "write", "a", json!(1), 20, 1)
            .ok(1, "write", "b", json!(2), 15, 1);
        only(&h.check(), AnomalyClass::WriteOrder, 0);
    }

    #[test]
    fn failed_and_timed_out_ops_carry_no_observation() {
        let mut h = Builder::default();
        h.invoke(0, "cas", "k", json!([3, 4]))
            .end(OpType::Fail, 0, "cas", "k")
            .invoke(1, "read", "k", Value::Null)
            .end(OpType::Info, 1, "read", "k")
            .read(2, "k", json!(null), 5, 0);
        let report = h.check();
        only(&report, AnomalyClass::StaleRead, 0);
        assert_eq!(
            (report.reads, report.writes, report.indeterminate_writes),
            (1, 0, 0)
        );
    }

    #[test]
    fn writes_answered_no_node_are_lost_writes() {
        for (f, value) in [("write", json!(2)), ("cas", json!([1, 2]))] {
            let mut h = Builder::default();
            h.write(0, "k", 1, 10, 1).no_node(1, f, "k", value);
            let report = h.check();
            only(&report, AnomalyClass::LostWrite, 1);
            assert_eq!(report.anomalies[0].ops, vec![3], "{report}");
            assert_eq!(report.no_node_answers, 1);
        }
        // A write refused for another reason tells nothing.
        let mut h = Builder::default();
        h.write(0, "k", 1, 10, 1)
            .invoke(1, "write", "k", json!(2))
            .end(OpType::Fail, 1, "write", "k");
        only(&h.check(), AnomalyClass::LostWrite, 0);
    }

    #[test]
    fn reads_answered_no_node_are_lost_when_synced_and_stale_otherwise() {
        let mut h = Builder::default();
        h.write(0, "k", 1, 10, 1)
            .no_node(1, "read", "k", Value::Null);
        only(&h.check(), AnomalyClass::LostWrite, 1);
        let unsynced = h.check_unsynced();
        only(&unsynced, AnomalyClass::StaleRead, 1);
        assert!(unsynced.valid);
        // After an explicit sync of its session.
        let mut h = Builder::default();
        h.invoke(1, "sync", "k", Value::Null)
            .end(OpType::Ok, 1, "sync", "k")
            .no_node(1, "read", "k", Value::Null);
        only(&h.check_unsynced(), AnomalyClass::LostWrite, 1);
        // A session that saw the key modified cannot find it absent later.
        let mut h = Builder::default();
        h.write(0, "k", 1, 10, 1)
            .read(1, "k", json!(1), 10, 1)
            .no_node(1, "read", "k", Value::Null);
        only(&h.check_unsynced(), AnomalyClass::WentBackInTime, 1);
    }

    #[test]
    fn malformed_histories_are_errors() {
        let mut h = Builder::default();
        h.invoke(0, "read", "k", Value::Null);
        h.push(Builder::on(OpType::Ok, 0, "read", "k", json!(1)));
        let err = check(&h.ops).unwrap_err().to_string();
        assert!(err.starts_with("op 1: ok read has no zxid"), "{err}");
        let mut h = Builder::default();
        h.ok(0, "read", "k", json!(1), 5, 0);
        let err = check(&h.ops).unwrap_err().to_string();
        assert!(err.contains("follows no invocation"), "{err}");
        let mut h = Builder::default();
        h.invoke(0, "cas", "k", json!(3))
            .end(OpType::Fail, 0, "cas", "k");
        let err = check(&h.ops).unwrap_err().to_string();
        assert!(err.starts_with("op 0: cas value 3 is not"), "{err}");
    }

    fn synthetic(seed: u64) -> Vec<Op> {
        use super::super::synth::{generate, Flavor, SynthConfig};
        generate(&SynthConfig {
            seed,
            ops: 2000,
            keys: 4,
            processes: 8,
            info_rate: 0.1,
            flavor: Flavor::Versioned,
            ..SynthConfig::default()
        })
    }

    #[test]
    fn simulated_zookeeper_histories_are_valid_and_corrupted_twins_are_not() {
        use super::super::synth::corrupt_one_read;
        for seed in 0..20 {
            let mut ops = synthetic(seed);
            let report = check(&ops).unwrap();
            only(&report, AnomalyClass::StaleRead, 0);
            assert!(report.indeterminate_writes > 0);
            let corrupted = corrupt_one_read(&mut ops, seed).unwrap() as u64;
            let report = check(&ops).unwrap();
            assert!(!report.valid, "seed {seed}");
            assert!(
                report.marked_ops().contains(&corrupted),
                "seed {seed}: {report}"
            );
        }
    }

    /// Makes the first `ok` read of some process return an older acknowledged state of its
    /// key: the state before a write acknowledged before the read was invoked.
    fn make_one_read_stale(ops: &mut [Op]) -> Option<usize> {
        let mut seen = std::collections::HashSet::new();
        let mut acked: Vec<usize> = Vec::new();
        let mut invoked_at = HashMap::new();
        for pos in 0..ops.len() {
            let op = &ops[pos];
            let Process::Client(p) = op.process else {
                continue;
            };
            if op.kind == OpType::Invoke {
                invoked_at.insert(p, pos);
                continue;
            }
            let first = seen.insert(p);
            if op.kind == OpType::Ok && op.f != "read" {
                acked.push(pos);
            }
            if !(first && op.kind == OpType::Ok && op.f == "read") {
                continue;
            }
            // Two acknowledged writes of the key done before the read began: take the older.
            let before: Vec<usize> = acked
                .iter()
                .copied()
                .filter(|&w| w < invoked_at[&p] && ops[w].key == op.key)
                .collect();
            let (Some(&old), Some(&new)) = (before.first(), before.last()) else {
                continue;
            };
            if ops[old].zxid >= ops[new].zxid {
                continue;
            }
            let value = match ops[old].f.as_str() {
                "cas" => ops[old].value[1].clone(),
                _ => ops[old].value.clone(),
            };
            let (zxid, version) = (ops[old].zxid, ops[old].version);
            let read = &mut ops[pos];
            (read.value, read.zxid, read.version) = (value, zxid, version);
            return Some(pos);
        }
        None
    }

    #[test]
    fn stale_twins_are_lost_writes_when_synced_and_allowed_otherwise() {
        let mut twins = 0;
        for seed in 0..20 {
            let mut ops = synthetic(seed);
            if make_one_read_stale(&mut ops).is_none() {
                continue;
            }
            twins += 1;
            let unsynced = ZkOptions {
                sync_reads: false,
                ..ZkOptions::default()
            };
            only(
                &check_with(&ops, &unsynced).unwrap(),
                AnomalyClass::StaleRead,
                1,
            );
            only(&check(&ops).unwrap(), AnomalyClass::LostWrite, 1);
        }
        assert!(twins >= 10, "only {twins} stale twins were made");
    }

    #[test]
    fn report_serializes_classes_by_name() {
        let mut h = Builder::default();
        h.write(0, "a", 1, 20, 1).write(1, "b", 2, 15, 1);
        let json = serde_json::to_value(h.check()).unwrap();
        assert_eq!(json["counts"]["write-order"], 1);
        assert_eq!(json["anomalies"][0]["class"], "write-order");
        assert_eq!(json["valid"], false);
    }
}
