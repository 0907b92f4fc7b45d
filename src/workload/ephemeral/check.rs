//! The ephemeral lifecycle, judged from the client-observed session events, the ephemeral
//! creates and every server's polled view (history conventions in [`super::driver`]).
//!
//! - **ephemeral-lost**: a server's synced poll does not show (or shows under another owner)
//!   an ephemeral whose create was acknowledged before the poll began, while its session
//!   lived through the poll: the session had not been closed or cut by then, and something
//!   after the poll proves it alive (a later `connected` event, an acknowledged create, or a
//!   close the server answered). A session the client still sees connected may already be
//!   expired by the leader (its server cut off from the quorum), so being connected alone
//!   proves nothing.
//!   A poll that missed an ephemeral whose create its server had not applied yet (the
//!   directory's pzxid the poll read is older than the create's zxid), or that the same server
//!   shows, owned by its session, in a later poll, was behind, not lost: such stale synced
//!   polls are counted (`stale_polls`), not
//!   anomalies, since ZooKeeper's `sync` is no quorum operation and a deposed leader that has
//!   not yet noticed answers it from its own older state (ZOOKEEPER-1675, open; seen on 3.8.0
//!   when the followers gave up on an isolated leader 0.8 s before it stepped down).
//! - **ephemeral-outlived-session**: a server's poll begun after the session's deadline shows
//!   one of its ephemerals. A session ends when its close is invoked, when the client is cut
//!   off (unless it reconnects later: then the cut did not end it), or when the client is
//!   told it expired, whichever comes first; its deadline is the end plus the session timeout
//!   plus the stated slack, moved past every fault that may have acted before it, from its
//!   start's invocation (a fault can stall expiry: a leader election restarts every session's
//!   clock), to the fault's heal plus the timeout and slack. The final polls, after the
//!   settle, are held to the same deadlines.
//! - **session-expired-early**: a cut session's client is told it expired, or a server's
//!   synced poll begun after the cut does not show one of its ephemerals (and was not
//!   [`behind`]), before the session could have expired. The leader hears of every create and
//!   of the session's creation itself, so it last heard from the session no earlier than the
//!   invocation of its last acknowledged create (or of its open), and ZooKeeper expires a
//!   session no earlier than the session timeout its server negotiated after that (rounded up
//!   to a tick); the bound is that invocation plus the negotiated timeout, less a tick
//!   ([`TICK_SLACK`]). Every second cut lasts half the timeout, so a server that expires
//!   sessions early tells the client so when it is let through.
//! - **session-id-reused**: two sessions opened with one id.
//!
//! Valid needs every polled server read in a final poll begun after every session's
//! deadline; a server never read then leaves the verdict unknown.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::history::{fault_intervals, FaultInterval, Op, OpType};
use crate::workload::anomalies::Anomalies;
use crate::workload::paced::{steps, Step};

/// What an early expiry is allowed: a server's expiry clock runs in ticks (1 s in the
/// configurations stampede writes).
const TICK_SLACK: Duration = Duration::from_secs(1);

/// The session timeout and the slack the deadlines are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The session timeout the sessions asked for.
    pub session_timeout: Duration,
    /// What a server may take beyond the session timeout to remove a session's ephemerals.
    pub slack: Duration,
}

/// The verdict of the ephemeral checker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EphemeralReport {
    /// No anomaly found.
    pub valid: bool,
    /// Every polled server was read after the settle (else the verdict is unknown).
    pub settled: bool,
    /// Sessions opened.
    pub sessions: u64,
    /// Sessions that ended closed by their client (or by the server, as the client saw).
    pub closed: u64,
    /// Sessions that ended cut off from the servers (and not reconnected).
    pub cut: u64,
    /// Sessions whose client was told they expired (after a cut, or on their own).
    pub expired: u64,
    /// Ephemeral creates acknowledged.
    pub created: u64,
    /// Polls of a server's view that answered.
    pub polls: u64,
    /// Polls that did not answer.
    pub polls_failed: u64,
    /// Servers with no final poll begun after every session's deadline.
    pub unread: Vec<String>,
    /// Synced polls that missed an ephemeral whose create was acknowledged before they began
    /// and which the server had not applied yet or showed later: the server was behind
    /// (ZOOKEEPER-1675).
    /// Counted, not an anomaly; each says what was missed, where and when.
    #[serde(default)]
    pub stale_polls: Vec<String>,
    /// The session timeout plus the slack, in ms: the shortest wait after a session's end.
    pub deadline_ms: u64,
    /// Anomalies by kind (`ephemeral-lost`, `ephemeral-outlived-session`,
    /// `session-expired-early`, `session-id-reused`).
    #[serde(flatten)]
    pub found: Anomalies,
}

/// One session as its client saw it.
#[derive(Debug, Default)]
struct Life<'a> {
    process: u64,
    opened: u64,
    /// When it ended and how (`closed`, `cut`, `expired`).
    end: Option<(u64, &'static str)>,
    /// A cut that a later `connected` event may void.
    cut: Option<u64>,
    /// The latest time something proves it alive.
    alive: u64,
    /// The first report that its client was told it expired.
    told_expired: Option<&'a Op>,
    /// The latest invocation of its open or of an acknowledged create: the leader heard
    /// from it no earlier.
    heard: u64,
    /// The session timeout its server negotiated, when the history has it.
    timeout: Option<Duration>,
}

impl Life<'_> {
    fn ends(&mut self, time: u64, how: &'static str) {
        if self.end.is_none_or(|(t, _)| time < t) {
            self.end = Some((time, how));
        }
    }

    /// When it ended, a cut voided by a later reconnection left out.
    fn ended(&self) -> Option<(u64, &'static str)> {
        let cut = self.cut.filter(|&t| self.alive <= t).map(|t| (t, "cut"));
        match (self.end, cut) {
            (Some(e), Some(c)) => Some(if c.0 < e.0 { c } else { e }),
            (e, c) => e.or(c),
        }
    }
}

/// An acknowledged ephemeral create.
struct Created {
    path: String,
    session: String,
    time: u64,
    /// The create's zxid, when the history has it.
    zxid: Option<i64>,
}

/// One answered poll of a server.
struct Poll<'a> {
    server: String,
    begun: u64,
    answered: u64,
    is_final: bool,
    nodes: BTreeMap<String, String>,
    /// The directory's pzxid as the server had it, when the history has it.
    pzxid: Option<i64>,
    op: &'a Op,
    process: u64,
}

/// The session a session-naming op's value names.
fn session_of(value: &Value) -> Option<String> {
    value.get("session")?.as_str().map(str::to_string)
}

/// Seconds since the start, for the anomalies' sentences.
fn secs(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

/// Checks an ephemeral history.
pub fn check_ephemeral(ops: &[Op], limits: Limits) -> EphemeralReport {
    let mut report = EphemeralReport {
        deadline_ms: (limits.session_timeout + limits.slack).as_millis() as u64,
        ..EphemeralReport::default()
    };
    let mut lives: HashMap<String, Life> = HashMap::new();
    let mut created: Vec<Created> = Vec::new();
    let mut polls: Vec<Poll> = Vec::new();
    let mut servers: BTreeSet<String> = BTreeSet::new();
    for step in steps(ops) {
        let Step::Completed(process, invoked, op) = step else {
            continue;
        };
        let begun = invoked.map_or(op.time, |i| i.time);
        if op.f == "poll" {
            servers.extend(op.key.clone());
            match (op.kind, &op.key) {
                (OpType::Ok, Some(server)) => polls.push(Poll {
                    server: server.clone(),
                    begun,
                    answered: op.time,
                    is_final: invoked.is_some_and(|i| i.value == "final"),
                    nodes: owners(&op.value),
                    pzxid: op.value.get("pzxid").and_then(Value::as_i64),
                    op,
                    process,
                }),
                _ => report.polls_failed += 1,
            }
            continue;
        }
        let Some(session) = session_of(&op.value) else {
            continue;
        };
        if op.f == "close" {
            // Closed or dropped: either way the client gave the session up when it asked.
            let life = lives.entry(session).or_default();
            if op.kind == OpType::Ok {
                life.alive = life.alive.max(begun);
            }
            life.ends(begun, "closed");
            continue;
        }
        if op.kind != OpType::Ok {
            continue;
        }
        if op.f == "open" {
            report.sessions += 1;
            if let Some(first) = lives.get(&session) {
                let what = format!(
                    "session {session} opened by process {process} at {}, already opened by process {} at {}",
                    secs(op.time),
                    first.process,
                    secs(first.opened)
                );
                report.found.note("session-id-reused", op, process, what);
                continue;
            }
            let timeout = op.value.get("timeout_ms").and_then(Value::as_u64);
            let life = Life {
                process,
                opened: op.time,
                alive: op.time,
                heard: begun,
                timeout: timeout.map(Duration::from_millis),
                ..Life::default()
            };
            lives.insert(session, life);
            continue;
        }
        let life = lives.entry(session.clone()).or_default();
        match (op.f.as_str(), op.value.get("state").and_then(Value::as_str)) {
            ("create", _) => {
                life.alive = life.alive.max(op.time);
                life.heard = life.heard.max(begun);
                let path = op.value.get("path").and_then(Value::as_str);
                created.extend(path.map(|path| Created {
                    path: path.to_string(),
                    session,
                    time: op.time,
                    zxid: op.zxid,
                }));
            }
            ("cut", _) => life.cut = Some(life.cut.map_or(op.time, |c| c.min(op.time))),
            ("session", Some("connected")) => life.alive = life.alive.max(op.time),
            ("session", Some("expired")) => {
                if life.told_expired.is_none_or(|told| op.time < told.time) {
                    life.told_expired = Some(op);
                }
                life.ends(op.time, "expired");
            }
            ("session", Some("closed")) => life.ends(op.time, "closed"),
            _ => {}
        }
    }
    report.created = created.len() as u64;
    report.polls = polls.len() as u64;
    for life in lives.values() {
        match life.ended().map(|(_, how)| how) {
            Some("closed") => report.closed += 1,
            Some("cut") => report.cut += 1,
            _ => {}
        }
        report.expired += u64::from(life.told_expired.is_some());
    }

    let faults = fault_intervals(ops);
    let deadlines: HashMap<&str, (u64, &'static str, u64)> = lives
        .iter()
        .filter_map(|(s, life)| {
            let (end, how) = life.ended()?;
            Some((s.as_str(), (end, how, deadline(end, limits, &faults))))
        })
        .collect();
    report.stale_polls = lost(&polls, &created, &lives, &mut report.found);
    expired_early(&polls, &created, &lives, limits, &mut report.found);
    outlived(&polls, &deadlines, &mut report.found);

    let last_deadline = deadlines.values().map(|d| d.2).max().unwrap_or(0);
    report.unread = servers
        .into_iter()
        .filter(|s| {
            !polls
                .iter()
                .any(|p| p.is_final && &p.server == s && p.begun > last_deadline)
        })
        .collect();
    report.settled = report.unread.is_empty() && report.polls > 0;
    report.valid = report.found.is_empty();
    report
}

/// The owner of each node a poll answered with (`{"nodes": {path: owner}}`).
fn owners(value: &Value) -> BTreeMap<String, String> {
    let nodes = value.get("nodes").and_then(Value::as_object);
    nodes
        .into_iter()
        .flatten()
        .filter_map(|(path, owner)| Some((path.clone(), owner.as_str()?.to_string())))
        .collect()
}

/// The deadline of a session that ended at `end`: the end plus the session timeout and the
/// slack, moved past each fault that may have acted before it (from its start's invocation:
/// a restart of every server in turn acts long before its start completes) to the fault's
/// heal plus the same.
fn deadline(end: u64, limits: Limits, faults: &[FaultInterval]) -> u64 {
    let wait = (limits.session_timeout + limits.slack).as_nanos() as u64;
    let mut deadline = end + wait;
    loop {
        let later = faults
            .iter()
            .filter(|f| f.invoked < deadline && f.end > end)
            .map(|f| f.end + wait)
            .max()
            .unwrap_or(0);
        if later <= deadline {
            return deadline;
        }
        deadline = later;
    }
}

/// Notes every ephemeral a poll did not show while its session lived through the poll, and
/// returns the polls that were only behind ([`behind`]).
fn lost(
    polls: &[Poll],
    created: &[Created],
    lives: &HashMap<String, Life>,
    found: &mut Anomalies,
) -> Vec<String> {
    let mut stale = Vec::new();
    let mut noted: HashSet<(&str, &str)> = HashSet::new();
    for poll in polls {
        for node in created.iter().filter(|c| c.time < poll.begun) {
            let Some(life) = lives.get(&node.session) else {
                continue;
            };
            let ended_before = life.ended().is_some_and(|(end, _)| end <= poll.answered);
            if ended_before || life.alive <= poll.answered {
                continue;
            }
            let shown = poll.nodes.get(&node.path);
            if shown == Some(&node.session) || !noted.insert((&node.path, &poll.server)) {
                continue;
            }
            let how = match shown {
                Some(other) => format!("showed it owned by {other}"),
                None => "did not show it".into(),
            };
            if shown.is_none() && behind(polls, poll, node) {
                stale.push(format!(
                    "{} polled from {} to {} did not show {} (created at {}): it was behind",
                    poll.server,
                    secs(poll.begun),
                    secs(poll.answered),
                    node.path,
                    secs(node.time),
                ));
                continue;
            }
            let what = format!(
                "session {}'s ephemeral {} (created at {}): {} polled from {} to {} {how}, yet the session was alive at {}",
                node.session,
                node.path,
                secs(node.time),
                poll.server,
                secs(poll.begun),
                secs(poll.answered),
                secs(life.alive),
            );
            found.note("ephemeral-lost", poll.op, life.process, what);
        }
    }
    stale
}

/// Whether `poll`, which did not show `node`, was behind rather than the server's view: the
/// server had not applied its create yet (its directory's pzxid, the last child created or
/// deleted, is older than the create's zxid), or a later poll of the same server shows it,
/// owned by its session. A synced poll can be behind: ZooKeeper's `sync` is no quorum
/// operation, and a deposed leader that has not noticed yet answers it from older state
/// (ZOOKEEPER-1675).
fn behind(polls: &[Poll], poll: &Poll, node: &Created) -> bool {
    if let (Some(pzxid), Some(czxid)) = (poll.pzxid, node.zxid) {
        if pzxid < czxid {
            return true;
        }
    }
    polls.iter().any(|later| {
        later.server == poll.server
            && later.begun > poll.answered
            && later.nodes.get(&node.path) == Some(&node.session)
    })
}

/// The timeout of `life`'s session and the earliest time it could expire: the invocation of
/// its last acknowledged create (or of its open), which the leader heard, plus the timeout
/// its server negotiated, less [`TICK_SLACK`].
fn earliest_expiry(life: &Life, limits: Limits) -> (Duration, u64) {
    let timeout = life.timeout.unwrap_or(limits.session_timeout);
    let earliest = life.heard + timeout.saturating_sub(TICK_SLACK).as_nanos() as u64;
    (timeout, earliest)
}

/// Notes every cut session whose client was told it expired before it could have, and every
/// ephemeral of a cut session that a poll begun after the cut and answered
/// before the session could have expired did not show (a poll [`behind`] left out).
fn expired_early(
    polls: &[Poll],
    created: &[Created],
    lives: &HashMap<String, Life>,
    limits: Limits,
    found: &mut Anomalies,
) {
    let mut noted: HashSet<&str> = HashSet::new();
    for (session, life) in lives {
        let (Some((cut, "cut")), Some(told)) = (life.ended(), life.told_expired) else {
            continue;
        };
        let (timeout, earliest) = earliest_expiry(life, limits);
        if told.time < earliest && noted.insert(session.as_str()) {
            let what = format!(
                "session {session}'s client was told it expired at {}: the session was cut at {}, last heard from no earlier than {} with a {} s timeout, so it could not expire before {}",
                secs(told.time),
                secs(cut),
                secs(life.heard),
                timeout.as_secs_f64(),
                secs(earliest),
            );
            found.note("session-expired-early", told, life.process, what);
        }
    }
    for node in created {
        let Some(life) = lives.get(&node.session) else {
            continue;
        };
        let Some((cut, "cut")) = life.ended() else {
            continue;
        };
        let (timeout, earliest) = earliest_expiry(life, limits);
        let gone = polls.iter().find(|poll| {
            poll.begun > node.time.max(cut)
                && poll.answered < earliest
                && !poll.nodes.contains_key(&node.path)
                && !behind(polls, poll, node)
        });
        let Some(poll) = gone else {
            continue;
        };
        if !noted.insert(node.session.as_str()) {
            continue;
        }
        let what = format!(
            "session {}'s ephemeral {} gone from {}'s poll answered at {}: the session was cut at {}, last heard from no earlier than {} with a {} s timeout, so it could not expire before {}",
            node.session,
            node.path,
            poll.server,
            secs(poll.answered),
            secs(cut),
            secs(life.heard),
            timeout.as_secs_f64(),
            secs(earliest),
        );
        found.note("session-expired-early", poll.op, life.process, what);
    }
}

/// Notes every ephemeral a poll begun after its session's deadline showed.
fn outlived(
    polls: &[Poll],
    deadlines: &HashMap<&str, (u64, &'static str, u64)>,
    found: &mut Anomalies,
) {
    let mut noted: HashSet<(&str, &str)> = HashSet::new();
    for poll in polls {
        for (path, owner) in &poll.nodes {
            let Some(&(end, how, deadline)) = deadlines.get(owner.as_str()) else {
                continue;
            };
            if poll.begun <= deadline || !noted.insert((path, &poll.server)) {
                continue;
            }
            let when = match poll.is_final {
                true => "in its final poll (after the settle)",
                false => "in a poll",
            };
            let what = format!(
                "session {owner}'s ephemeral {path} shown by {} {when} begun at {}: the session was {how} at {}, deadline {}",
                poll.server,
                secs(poll.begun),
                secs(end),
                secs(deadline),
            );
            found.note("ephemeral-outlived-session", poll.op, poll.process, what);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(start_s: u64, end_s: u64) -> FaultInterval {
        FaultInterval {
            kind: "partition".into(),
            start: start_s * 1_000_000_000,
            invoked: start_s * 1_000_000_000,
            end: end_s * 1_000_000_000,
            healed: true,
        }
    }

    #[test]
    fn a_deadline_moves_past_every_fault_in_effect_before_it() {
        let limits = Limits {
            session_timeout: Duration::from_secs(4),
            slack: Duration::from_secs(1),
        };
        let s = 1_000_000_000;
        assert_eq!(deadline(2 * s, limits, &[]), 7 * s);
        assert_eq!(
            deadline(2 * s, limits, &[fault(0, 1)]),
            7 * s,
            "healed before"
        );
        assert_eq!(
            deadline(2 * s, limits, &[fault(8, 9)]),
            7 * s,
            "begun after"
        );
        assert_eq!(deadline(2 * s, limits, &[fault(1, 3)]), 8 * s);
        assert_eq!(
            deadline(2 * s, limits, &[fault(1, 3), fault(6, 10)]),
            15 * s,
            "a fault that begins before the moved deadline moves it again"
        );
        let slow = FaultInterval {
            invoked: s,
            ..fault(9, 10)
        };
        assert_eq!(
            deadline(2 * s, limits, &[slow]),
            15 * s,
            "a start invoked before the deadline and completed after it moves it"
        );
    }
}
