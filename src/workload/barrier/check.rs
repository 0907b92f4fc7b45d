//! The double barrier, judged from the `enter` and `leave` operations of a barrier run (value:
//! the round number; one monotonic clock, so the history's order is the order things
//! happened).
//!
//! - Enter: a process passes `enter` of a round (`ok`) only once `threshold` processes have
//!   invoked `enter` of that round before it. The barrier opens when that many nodes are
//!   there, and a node is only created after its process invoked `enter`.
//! - Leave: a process passes `leave` of a round only once every process that had passed
//!   `enter` of the round before it invoked `leave` has itself invoked `leave`, leaving out
//!   processes with an `info` or `fail` in the round (their sessions may have been lost, taking
//!   their nodes with them). Such a process's node was there before the leaver listed the
//!   nodes for the last time, and only its own `leave` (or the loss of its session) removes it.
//!   A latecomer that passed `enter` only after the leaver invoked `leave` is not counted: the
//!   recipe cannot promise anything about it.
//!
//! Liveness is reported beside: rounds that started (first `enter` invoked) after the last
//! fault was healed and never completed (nobody passed `leave`) although somebody gave up
//! waiting in them (an `info` or `fail` whose error does not start with
//! [`crate::history::ABANDONED`]); a round that only the end of the run cut short had no chance
//! to finish and is not counted.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::history::{fault_intervals, Op, OpType, Process, ABANDONED};

/// A process that passed `enter` before enough processes had arrived.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EarlyEnter {
    /// The round.
    pub round: u64,
    /// The process that passed.
    pub process: u64,
    /// When it invoked `enter`, in ms since the start of the test.
    pub invoked_ms: f64,
    /// When it passed, in ms since the start of the test.
    pub passed_ms: f64,
    /// Processes that had invoked `enter` of the round by then, itself included.
    pub entered: u64,
    /// Processes needed to open the barrier (the threshold).
    pub needed: u64,
    /// The history index of the `ok` that passed.
    pub op: u64,
}

/// A process that passed `leave` while others in the round had not yet arrived at it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EarlyLeave {
    /// The round.
    pub round: u64,
    /// The process that passed.
    pub process: u64,
    /// When it invoked `leave`, in ms since the start of the test.
    pub invoked_ms: f64,
    /// When it passed, in ms since the start of the test.
    pub passed_ms: f64,
    /// Processes in the round that had passed `enter` before it invoked `leave` and never gave
    /// up in the round, itself included.
    pub entered: u64,
    /// How many of those had invoked `leave` by the time it passed, itself included.
    pub left: u64,
    /// The processes it should have waited for.
    pub missing: Vec<u64>,
    /// The history index of the `ok` that passed.
    pub op: u64,
}

/// A round that started after the last fault was healed and never completed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StalledRound {
    /// The round.
    pub round: u64,
    /// When its first `enter` was invoked, in ms since the start of the test.
    pub started_ms: f64,
    /// Processes that invoked `enter` of it.
    pub entered: u64,
    /// Processes that passed `enter` of it.
    pub passed_enter: u64,
    /// Its `enter` and `leave` operations that gave up (not counting those the end of the run
    /// cut short).
    pub gave_up: u64,
}

/// The verdict on the `enter` and `leave` operations of a history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BarrierReport {
    /// Nobody passed a barrier early.
    pub valid: bool,
    /// Processes needed to open the barrier.
    pub threshold: u64,
    /// Rounds somebody invoked `enter` of.
    pub rounds: u64,
    /// Rounds somebody passed `leave` of.
    pub rounds_completed: u64,
    /// `enter` operations that passed.
    pub enters_passed: u64,
    /// `leave` operations that passed.
    pub leaves_passed: u64,
    /// `enter` and `leave` operations that gave up (`info` or `fail`), not counting those the
    /// end of the run cut short.
    pub gave_up: u64,
    /// Every `enter` passed before `threshold` processes had invoked it, by round.
    pub early_enters: Vec<EarlyEnter>,
    /// Every `leave` passed before the others in the round had invoked it, by round.
    pub early_leaves: Vec<EarlyLeave>,
    /// When the last fault was healed, in ms since the start of the test (`None`: no fault).
    pub last_heal_ms: Option<f64>,
    /// Rounds started after the last fault was healed that never completed though somebody
    /// gave up waiting in them.
    pub stalled_rounds: Vec<StalledRound>,
    /// How many rounds stalled.
    pub stalled: u64,
}

impl BarrierReport {
    /// The history indices of the operations that passed early, for the timeline.
    pub fn marked_ops(&self) -> Vec<u64> {
        let enters = self.early_enters.iter().map(|e| e.op);
        enters
            .chain(self.early_leaves.iter().map(|l| l.op))
            .collect()
    }
}

/// One `enter` or `leave` of one process.
#[derive(Debug, Clone)]
struct Call {
    process: u64,
    invoked: u64,
    invoked_at: u64,
    /// The completion: its index, time and kind.
    end: Option<(u64, u64, OpType)>,
    abandoned: bool,
}

impl Call {
    /// The index and time of its `ok`, if it passed.
    fn passed(&self) -> Option<(u64, u64)> {
        match self.end {
            Some((index, at, OpType::Ok)) => Some((index, at)),
            _ => None,
        }
    }

    /// Whether it gave up (`info` or `fail`) for a reason other than the end of the run.
    fn gave_up(&self) -> bool {
        matches!(self.end, Some((_, _, kind)) if kind != OpType::Ok) && !self.abandoned
    }
}

/// The `enter` and `leave` calls of one round, in invocation order.
#[derive(Debug, Default)]
struct RoundCalls {
    enters: Vec<Call>,
    leaves: Vec<Call>,
}

impl RoundCalls {
    /// Whether somebody passed `leave` of the round.
    fn completed(&self) -> bool {
        self.leaves.iter().any(|c| c.passed().is_some())
    }

    /// How many calls of the round gave up for a reason other than the end of the run.
    fn gave_up(&self) -> u64 {
        let calls = self.enters.iter().chain(&self.leaves);
        calls.filter(|c| c.gave_up()).count() as u64
    }

    /// Processes with an `enter` or `leave` of the round that did not end `ok`.
    fn dropped(&self) -> BTreeSet<u64> {
        let calls = self.enters.iter().chain(&self.leaves);
        calls
            .filter(|c| matches!(c.end, Some((_, _, kind)) if kind != OpType::Ok))
            .map(|c| c.process)
            .collect()
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Checks the `enter` and `leave` operations of `ops` against a barrier that opens once
/// `threshold` processes entered. Operations whose value is not a round number, and
/// completions without an invocation, are ignored.
pub fn check_barrier(ops: &[Op], threshold: u64) -> BarrierReport {
    let rounds = rounds(ops);
    let mut early_enters = Vec::new();
    let mut early_leaves = Vec::new();
    for (&round, calls) in &rounds {
        early_enters.extend(early_enters_of(round, calls, threshold));
        early_leaves.extend(early_leaves_of(round, calls));
    }
    let last_heal = fault_intervals(ops).iter().map(|f| f.end).max();
    let stalled_rounds: Vec<StalledRound> = rounds
        .iter()
        .filter_map(|(&round, calls)| {
            let started = calls.enters.iter().map(|c| c.invoked_at).min()?;
            let after_heal = last_heal.is_none_or(|healed| started > healed);
            let gave_up = calls.gave_up();
            (after_heal && !calls.completed() && gave_up > 0).then(|| StalledRound {
                round,
                started_ms: ms(started),
                entered: processes(&calls.enters, |_| true),
                passed_enter: processes(&calls.enters, |c| c.passed().is_some()),
                gave_up,
            })
        })
        .collect();
    let passed = |calls: &[Call]| calls.iter().filter(|c| c.passed().is_some()).count() as u64;
    BarrierReport {
        valid: early_enters.is_empty() && early_leaves.is_empty(),
        threshold,
        rounds: rounds.len() as u64,
        rounds_completed: rounds.values().filter(|r| r.completed()).count() as u64,
        enters_passed: rounds.values().map(|r| passed(&r.enters)).sum(),
        leaves_passed: rounds.values().map(|r| passed(&r.leaves)).sum(),
        gave_up: rounds.values().map(RoundCalls::gave_up).sum(),
        early_enters,
        early_leaves,
        last_heal_ms: last_heal.map(ms),
        stalled: stalled_rounds.len() as u64,
        stalled_rounds,
    }
}

/// How many distinct processes made the calls of `calls` that `keep` keeps.
fn processes(calls: &[Call], keep: impl Fn(&Call) -> bool) -> u64 {
    let found: BTreeSet<u64> = calls
        .iter()
        .filter(|c| keep(c))
        .map(|c| c.process)
        .collect();
    found.len() as u64
}

/// The `enter` passes of round `round` with fewer than `threshold` invocations before them.
fn early_enters_of(round: u64, calls: &RoundCalls, threshold: u64) -> Vec<EarlyEnter> {
    let mut early = Vec::new();
    for call in &calls.enters {
        let Some((index, at)) = call.passed() else {
            continue;
        };
        let entered = processes(&calls.enters, |c| c.invoked < index);
        if entered < threshold {
            early.push(EarlyEnter {
                round,
                process: call.process,
                invoked_ms: ms(call.invoked_at),
                passed_ms: ms(at),
                entered,
                needed: threshold,
                op: index,
            });
        }
    }
    early
}

/// The `leave` passes of round `round` before a process that was in the round arrived at
/// `leave`.
fn early_leaves_of(round: u64, calls: &RoundCalls) -> Vec<EarlyLeave> {
    let dropped = calls.dropped();
    let mut early = Vec::new();
    for call in &calls.leaves {
        let Some((index, at)) = call.passed() else {
            continue;
        };
        let inside: BTreeSet<u64> = calls
            .enters
            .iter()
            .filter(|c| c.process != call.process && !dropped.contains(&c.process))
            .filter(|c| c.passed().is_some_and(|(passed, _)| passed < call.invoked))
            .map(|c| c.process)
            .collect();
        let arrived: BTreeSet<u64> = calls
            .leaves
            .iter()
            .filter(|c| c.invoked < index)
            .map(|c| c.process)
            .collect();
        let missing: Vec<u64> = inside.difference(&arrived).copied().collect();
        if !missing.is_empty() {
            let entered = inside.len() as u64 + 1;
            early.push(EarlyLeave {
                round,
                process: call.process,
                invoked_ms: ms(call.invoked_at),
                passed_ms: ms(at),
                entered,
                left: entered - missing.len() as u64,
                missing,
                op: index,
            });
        }
    }
    early
}

/// The `enter` and `leave` calls of `ops`, by round.
fn rounds(ops: &[Op]) -> BTreeMap<u64, RoundCalls> {
    let mut rounds: BTreeMap<u64, RoundCalls> = BTreeMap::new();
    // Each process's open call: its round, whether it is a leave, and its place in the list.
    let mut open: HashMap<u64, (u64, bool, usize)> = HashMap::new();
    for op in ops.iter().filter(|o| o.f == "enter" || o.f == "leave") {
        let Process::Client(process) = op.process else {
            continue;
        };
        let leave = op.f == "leave";
        if op.kind == OpType::Invoke {
            let Some(round) = op.value.as_u64() else {
                continue;
            };
            let calls = rounds.entry(round).or_default();
            let list = if leave {
                &mut calls.leaves
            } else {
                &mut calls.enters
            };
            open.insert(process, (round, leave, list.len()));
            list.push(Call {
                process,
                invoked: op.index,
                invoked_at: op.time,
                end: None,
                abandoned: false,
            });
            continue;
        }
        let Some((round, was_leave, at)) = open.remove(&process) else {
            continue;
        };
        if was_leave != leave {
            continue;
        }
        let calls = rounds
            .get_mut(&round)
            .expect("an open call's round is recorded");
        let call = match leave {
            true => &mut calls.leaves[at],
            false => &mut calls.enters[at],
        };
        call.end = Some((op.index, op.time, op.kind));
        call.abandoned = op
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with(ABANDONED));
    }
    rounds
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::history::testing::op;
    use OpType::{Info, Invoke, Ok as Done};

    /// `(time_ms, kind, process, f, round)`; process `None` is the nemesis (round ignored).
    type Line = (u64, OpType, Option<u64>, &'static str, u64);

    fn history(lines: &[Line]) -> Vec<Op> {
        let line = |(i, &(ms, kind, process, f, round)): (usize, &Line)| {
            let who = process.map_or(Process::NEMESIS, Process::Client);
            let op = op(i as u64, ms * 1_000_000, kind, who, f);
            match process {
                Some(_) => op.with_value(json!(round)),
                None => op,
            }
        };
        lines.iter().enumerate().map(line).collect()
    }

    /// A round `round` of processes `ps` starting at `t` ms: everybody enters, then passes
    /// at once, then everybody invokes leave, then passes.
    fn good_round(t: u64, round: u64, ps: &[u64]) -> Vec<Line> {
        let mut lines = Vec::new();
        for (kind, f, dt) in [(Invoke, "enter", 0), (Done, "enter", 10)] {
            lines.extend(ps.iter().map(|&p| (t + dt, kind, Some(p), f, round)));
        }
        for (kind, f, dt) in [(Invoke, "leave", 20), (Done, "leave", 30)] {
            lines.extend(ps.iter().map(|&p| (t + dt, kind, Some(p), f, round)));
        }
        lines
    }

    #[test]
    fn rounds_where_everybody_waited_are_accepted() {
        let mut lines = good_round(0, 0, &[1, 2, 3]);
        lines.extend(good_round(100, 1, &[1, 2, 3]));
        let report = check_barrier(&history(&lines), 3);
        assert!(report.valid, "{report:?}");
        assert_eq!((report.rounds, report.rounds_completed), (2, 2));
        assert_eq!((report.enters_passed, report.leaves_passed), (6, 6));
        assert_eq!((report.gave_up, report.stalled), (0, 0));
        assert_eq!(report.last_heal_ms, None);
        assert!(report.marked_ops().is_empty());
    }

    #[test]
    fn an_enter_passed_before_enough_processes_arrived_is_rejected() {
        let lines = [
            (0, Invoke, Some(1), "enter", 4),
            (5, Invoke, Some(2), "enter", 4),
            (8, Done, Some(1), "enter", 4),
            (9, Done, Some(2), "enter", 4),
            (12, Invoke, Some(3), "enter", 4),
            (13, Done, Some(3), "enter", 4),
        ];
        let report = check_barrier(&history(&lines), 3);
        assert!(!report.valid);
        let early: Vec<(u64, u64, u64, u64, f64)> = report
            .early_enters
            .iter()
            .map(|e| (e.round, e.process, e.entered, e.op, e.passed_ms))
            .collect();
        assert_eq!(early, [(4, 1, 2, 2, 8.0), (4, 2, 2, 3, 9.0)]);
        assert_eq!(report.early_enters[0].needed, 3);
        assert_eq!(report.marked_ops(), [2, 3]);
        // The same history is fine for a barrier of two.
        assert!(check_barrier(&history(&lines), 2).valid);
    }

    #[test]
    fn a_leave_passed_while_another_was_still_working_is_rejected() {
        let mut lines: Vec<Line> = good_round(0, 0, &[1, 2, 3])[..6].to_vec();
        lines.extend([
            (20, Invoke, Some(1), "leave", 0),
            (21, Done, Some(1), "leave", 0),
            (40, Invoke, Some(2), "leave", 0),
            (41, Invoke, Some(3), "leave", 0),
            (42, Done, Some(2), "leave", 0),
            (42, Done, Some(3), "leave", 0),
        ]);
        let report = check_barrier(&history(&lines), 3);
        assert!(!report.valid);
        assert_eq!(
            report.early_leaves,
            [EarlyLeave {
                round: 0,
                process: 1,
                invoked_ms: 20.0,
                passed_ms: 21.0,
                entered: 3,
                left: 1,
                missing: vec![2, 3],
                op: 7,
            }]
        );
        assert!(report.early_enters.is_empty());
    }

    #[test]
    fn processes_that_gave_up_or_came_late_are_not_waited_for() {
        let lines = [
            (0, Invoke, Some(1), "enter", 0),
            (0, Invoke, Some(2), "enter", 0),
            (0, Invoke, Some(3), "enter", 0),
            (5, Done, Some(1), "enter", 0),
            (5, Done, Some(2), "enter", 0),
            (5, Done, Some(3), "enter", 0),
            // 3 loses its session while working; its leave ends info later.
            (10, Invoke, Some(1), "leave", 0),
            (10, Invoke, Some(2), "leave", 0),
            (12, Done, Some(1), "leave", 0),
            (12, Done, Some(2), "leave", 0),
            (30, Invoke, Some(3), "leave", 0),
            (31, Info, Some(3), "leave", 0),
            // 4 arrives after the others invoked leave: it passes alone.
            (40, Invoke, Some(4), "enter", 0),
            (41, Done, Some(4), "enter", 0),
            (42, Invoke, Some(4), "leave", 0),
            (43, Done, Some(4), "leave", 0),
        ];
        let report = check_barrier(&history(&lines), 3);
        assert!(report.valid, "{report:?}");
        assert_eq!(report.gave_up, 1);
        assert_eq!(report.rounds_completed, 1);
    }

    #[test]
    fn rounds_that_stall_after_the_last_heal_are_listed() {
        let mut lines: Vec<Line> = vec![
            (0, Invoke, None, "start-partition", 0),
            (1, Info, None, "start-partition", 0),
        ];
        lines.extend(good_round(2, 0, &[1, 2]));
        lines.extend([
            // Round 1 stalls during the fault: not counted.
            (40, Invoke, Some(1), "enter", 1),
            (41, Invoke, Some(2), "enter", 1),
            (60, Info, Some(1), "enter", 1),
            (61, Info, Some(2), "enter", 1),
            (70, Invoke, None, "stop-partition", 0),
            (71, Info, None, "stop-partition", 0),
            // Round 2 stalls after the heal: 3 gives up waiting.
            (80, Invoke, Some(3), "enter", 2),
            (90, Info, Some(3), "enter", 2),
            // Round 3 is cut short by the end of the run: not counted.
            (95, Invoke, Some(4), "enter", 3),
        ]);
        let mut ops = history(&lines);
        let abandoned = op(
            ops.len() as u64,
            99_000_000,
            Info,
            Process::Client(4),
            "enter",
        )
        .with_value(json!(3))
        .with_error(&format!("{ABANDONED}: the run ended"));
        ops.push(abandoned);
        let report = check_barrier(&ops, 2);
        assert!(report.valid, "{report:?}");
        assert_eq!(report.last_heal_ms, Some(71.0));
        assert_eq!(
            report.stalled_rounds,
            [StalledRound {
                round: 2,
                started_ms: 80.0,
                entered: 1,
                passed_enter: 0,
                gave_up: 1,
            }]
        );
        assert_eq!((report.stalled, report.gave_up), (1, 3));
        assert_eq!((report.rounds, report.rounds_completed), (4, 1));
    }
}
