//! What a history shows of the contention in a lock or election run: how many contenders each
//! newcomer found ahead of it (the queue positions seen), waiters passed over, and waiters
//! starved.
//!
//! - **Queue position**: when a contender invokes `acquire` (a candidate `campaign`), the other
//!   processes then waiting (an `acquire` or `campaign` invoked and not completed) or holding
//!   (an `acquire` ok whose `release` has not completed; a `lead` term not ended). 0 is a free
//!   lock (an empty office), 1 a newcomer that found only the holder (or one waiter) ahead,
//!   `contenders − 1` a queue of all.
//! - **Passed over** (`passed-over`, fair recipes): a grant whose token (the czxid of the
//!   contender's sequential node, so its place in line) is below that of a grant recorded
//!   before it. The earlier node existed from its creation until its own grant (ZooKeeper
//!   created it before the later one and its owner found it first in line), so the later
//!   node's owner was granted while a node ahead of it was still waiting: the order of the
//!   sequential nodes was not kept.
//! - **Starved** (`starved` in the fair recipes, a figure in the unfair ones): one wait that
//!   saw more grants to others (`acquire` ok, `lead` taken) than the threshold ([`Contention::starved_after`]
//!   (super::Contention)). A wait that ended in an error is not judged: its session may have
//!   lost its place in line without the client knowing yet. A wait that ended ok, was
//!   abandoned at the end of the run (`abandoned: …`), or never ended is. Grants made while a
//!   fault may have been acting (from its start's invocation: a sequence's steps run before
//!   its start completes), or within a request deadline after its heal, are not counted toward
//!   any wait: a waiter on the far side of a partition cannot even put its node in line (its
//!   create waits for the heal) while the others go on taking turns, and no recipe promises
//!   it a turn then. They are counted apart (`handoffs_under_faults`).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::Serialize;

use crate::history::{fault_intervals, Op, OpType, Process};
use crate::workload::anomalies::{Anomalies, Anomaly};

/// How many starved waits are listed; all are counted.
const LISTED: usize = 20;

/// What a history shows of a run's contention.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ContentionReport {
    /// Whether the recipe promises order (then passed-over and starved waiters are anomalies).
    pub fair: bool,
    /// Contenders found ahead on arrival → how often (empty when the history does not record
    /// the waits, as elections recorded before campaigns were did not).
    pub positions: BTreeMap<usize, u64>,
    /// Hand-offs one wait may see before its contender counts as starved.
    pub starved_after: u64,
    /// Waits that saw more hand-offs than that.
    pub starved: u64,
    /// The first few starved waits: the wait's last operation, its process, and what it saw.
    pub starved_waits: Vec<Anomaly>,
    /// The most hand-offs one judged wait saw.
    pub longest_wait_handoffs: u64,
    /// Grants made while a fault was in effect or within the settle after its heal, not
    /// counted toward any wait's hand-offs.
    pub handoffs_under_faults: u64,
    /// The anomalies by class (fair recipes only): `passed-over`, `starved`.
    #[serde(flatten)]
    pub found: Anomalies,
    /// No anomaly.
    pub valid: bool,
}

impl ContentionReport {
    /// The verdict line's part: `positions 0:12 1:30 2:8, 0 passed over, 0 starved (> 10
    /// hand-offs; 25 under faults not counted)`.
    pub fn line(&self) -> String {
        let passed = self.found.counts.get(PASSED_OVER).copied().unwrap_or(0);
        if self.positions.is_empty() {
            return format!("{passed} passed over (waits not recorded)");
        }
        let unfair = match self.fair {
            true => "",
            false => ", not promised",
        };
        let uncounted = match self.handoffs_under_faults {
            0 => String::new(),
            n => format!("; {n} under faults not counted"),
        };
        format!(
            "positions {}, {passed} passed over, {} starved (> {} hand-offs{unfair}{uncounted})",
            crate::workload::positions::seen(&self.positions),
            self.starved,
            self.starved_after
        )
    }

    /// Counts a judged wait of `process`, ended at `op` (or the history was), that saw
    /// `handoffs`: past the threshold it is starved, listed among the first few as `what`
    /// says, and its description returned.
    pub fn wait_ended(
        &mut self,
        op: &Op,
        process: u64,
        handoffs: u64,
        what: impl FnOnce() -> String,
    ) -> Option<String> {
        self.longest_wait_handoffs = self.longest_wait_handoffs.max(handoffs);
        if handoffs <= self.starved_after {
            return None;
        }
        let what = what();
        self.starved += 1;
        if self.starved_waits.len() < LISTED {
            self.starved_waits.push(Anomaly {
                index: op.index,
                process,
                what: what.clone(),
            });
        }
        Some(what)
    }
}

/// The anomaly class of a waiter the grant order passed over.
pub const PASSED_OVER: &str = "passed-over";
/// The anomaly class of a waiter that saw too many hand-offs.
pub const STARVED: &str = "starved";

/// One open wait.
struct Wait {
    handoffs: u64,
}

/// Builds a report from a history's grants and waits.
struct Judge {
    report: ContentionReport,
    /// The highest token granted so far, with its process.
    highest: Option<(i64, u64)>,
}

impl Judge {
    fn new(fair: bool, starved_after: u64) -> Judge {
        Judge {
            report: ContentionReport {
                fair,
                starved_after,
                ..ContentionReport::default()
            },
            highest: None,
        }
    }

    /// `process` was granted at `op` with `token`.
    fn granted(&mut self, op: &Op, process: u64, token: Option<i64>) {
        let Some(token) = token else { return };
        match self.highest {
            Some((high, ahead)) if token < high && self.report.fair => {
                let what = format!(
                    "process {process} (token {token}) was granted after process {ahead} (token {high}), whose node came after its own"
                );
                self.report.found.note(PASSED_OVER, op, process, what);
            }
            Some((high, _)) if token < high => {}
            _ => self.highest = Some((token, process)),
        }
    }

    /// A judged wait of `process` ended at `op` (or the history did) after `wait`.
    fn waited(&mut self, op: &Op, process: u64, wait: &Wait) {
        let handoffs = wait.handoffs;
        let starved = self.report.wait_ended(op, process, handoffs, || {
            format!(
                "process {process} waited through {handoffs} hand-offs to others without acquiring"
            )
        });
        if let (Some(what), true) = (starved, self.report.fair) {
            self.report.found.note(STARVED, op, process, what);
        }
    }

    fn done(mut self) -> ContentionReport {
        self.report.valid = self.report.found.is_empty();
        self.report
    }
}

/// The token an operation's value carries: a number, or `{"token": n}`.
fn token(value: &serde_json::Value) -> Option<i64> {
    value.as_i64().or_else(|| value.get("token")?.as_i64())
}

/// How a recipe's history names the steps the contention is judged on.
struct Steps {
    /// The function of a wait: its invocation joins the line, its completion leaves it.
    wait: &'static str,
    /// The operation that grants the lock or the office (its value carries the token).
    grant: (&'static str, OpType),
    /// The function whose completion gives the lock or the office back.
    give_back: &'static str,
}

/// The lock's steps: `acquire` waits and is granted `ok` with the token, `release` gives back.
const LOCK: Steps = Steps {
    wait: "acquire",
    grant: ("acquire", OpType::Ok),
    give_back: "release",
};

/// The election's steps: `campaign` waits, a `lead` invocation takes office with
/// `{"token": n}`, its completion leaves office.
const ELECTION: Steps = Steps {
    wait: "campaign",
    grant: ("lead", OpType::Invoke),
    give_back: "lead",
};

/// Judges a lock history (`acquire` ok values are the tokens): positions, passed-over grants
/// when `fair`, and waits past `starved_after` hand-offs, not counting grants within `settle`
/// of a fault.
pub fn judge_lock(
    ops: &[Op],
    fair: bool,
    starved_after: u64,
    settle: Duration,
) -> ContentionReport {
    contention_of(ops, &LOCK, fair, (starved_after, settle))
}

/// Judges an election history: positions and starved waits from its `campaign` operations,
/// and the order of taking office (`lead` invocations carry `{"token": n}`) when `fair`. A
/// history that does not record campaigns (older runs) shows no positions and no starved waits.
pub fn judge_terms(
    ops: &[Op],
    fair: bool,
    starved_after: u64,
    settle: Duration,
) -> ContentionReport {
    contention_of(ops, &ELECTION, fair, (starved_after, settle))
}

/// Judges the contention of a history whose steps are named as `steps` say; `starvation` is
/// the hand-offs a wait may see and the settle after a fault's heal.
fn contention_of(
    ops: &[Op],
    steps: &Steps,
    fair: bool,
    starvation: (u64, Duration),
) -> ContentionReport {
    let (starved_after, settle) = starvation;
    let settle = settle.as_nanos() as u64;
    let faulted: Vec<(u64, u64)> = fault_intervals(ops)
        .iter()
        .map(|f| (f.invoked, f.end + settle))
        .collect();
    let under_fault = |time: u64| {
        faulted
            .iter()
            .any(|(from, to)| (*from..=*to).contains(&time))
    };
    let mut judge = Judge::new(fair, starved_after);
    let mut waits: HashMap<u64, Wait> = HashMap::new();
    let mut holding: HashMap<u64, bool> = HashMap::new();
    for op in ops {
        let Process::Client(process) = op.process else {
            continue;
        };
        let f = op.f.as_str();
        if f == steps.wait {
            match op.kind {
                OpType::Invoke => {
                    let ahead = waits.len() + holding.values().filter(|h| **h).count();
                    *judge.report.positions.entry(ahead).or_default() += 1;
                    waits.insert(process, Wait { handoffs: 0 });
                }
                OpType::Ok => {
                    if let Some(wait) = waits.remove(&process) {
                        judge.waited(op, process, &wait);
                    }
                }
                _ => {
                    let abandoned = op
                        .error
                        .as_deref()
                        .is_some_and(|e| e.starts_with("abandoned"));
                    if let Some(wait) = waits.remove(&process) {
                        if abandoned {
                            judge.waited(op, process, &wait);
                        }
                    }
                }
            }
        }
        if (f, op.kind) == steps.grant {
            match under_fault(op.time) {
                true => judge.report.handoffs_under_faults += 1,
                false => {
                    for (_, wait) in waits.iter_mut().filter(|(p, _)| **p != process) {
                        wait.handoffs += 1;
                    }
                }
            }
            judge.granted(op, process, token(&op.value));
            holding.insert(process, true);
        } else if f == steps.give_back && op.kind != OpType::Invoke {
            holding.insert(process, false);
        }
    }
    if let Some(last) = ops.last() {
        let mut open: Vec<_> = waits.into_iter().collect();
        open.sort_by_key(|(p, _)| *p);
        for (process, wait) in open {
            judge.waited(last, process, &wait);
        }
    }
    judge.done()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::testing::{complete, history, invoke};

    /// A round of `process`: acquire granted with `token`, then released.
    fn granted(process: u64, token: &str) -> Vec<Op> {
        vec![complete(process, "ok", "acquire", token)]
    }

    fn released(process: u64) -> Vec<Op> {
        vec![
            invoke(process, "release", "null"),
            complete(process, "ok", "release", "null"),
        ]
    }

    /// Four rounds of `process` in a row (acquire invoked, granted with tokens 100 to 103,
    /// released): four hand-offs to anyone waiting meanwhile.
    fn four_rounds(process: u64) -> Vec<Op> {
        let round = |token: u64| {
            let mut ops = vec![invoke(process, "acquire", "null")];
            ops.extend(granted(process, &token.to_string()));
            ops.extend(released(process));
            ops
        };
        (100..104).flat_map(round).collect()
    }

    /// A nemesis operation (`kind` of `f`), timed by [`history`] like the rest.
    fn nemesis(kind: OpType, f: &str) -> Op {
        crate::history::testing::op(0, 0, kind, Process::NEMESIS, f)
    }

    #[test]
    fn positions_count_the_contenders_found_waiting_or_holding() {
        let mut ops = vec![invoke(1, "acquire", "null")];
        ops.extend(granted(1, "10"));
        ops.push(invoke(2, "acquire", "null")); // behind the holder: 1
        ops.push(invoke(3, "acquire", "null")); // behind the holder and 2: 2
        ops.extend(released(1));
        ops.extend(granted(2, "11"));
        ops.extend(released(2));
        ops.extend(granted(3, "12"));
        ops.extend(released(3));
        ops.push(invoke(1, "acquire", "null")); // a free lock: 0
        let r = judge_lock(&history(&ops), true, 10, Duration::ZERO);
        assert_eq!(r.positions, BTreeMap::from([(0, 2), (1, 1), (2, 1)]));
        assert!(r.valid, "{r:?}");
        assert_eq!(r.longest_wait_handoffs, 1, "3 saw 2 granted");
    }

    #[test]
    fn a_later_node_granted_first_passes_the_waiter_over_in_a_fair_recipe_only() {
        let mut ops = vec![invoke(1, "acquire", "null"), invoke(2, "acquire", "null")];
        ops.extend(granted(2, "21"));
        ops.extend(released(2));
        ops.extend(granted(1, "20"));
        let r = judge_lock(&history(&ops), true, 10, Duration::ZERO);
        let passed = r.found.only(PASSED_OVER);
        assert_eq!(passed.process, 1);
        assert!(
            passed.what.contains("after process 2 (token 21)"),
            "{passed:?}"
        );
        assert!(!r.valid);
        assert!(
            judge_lock(&history(&ops), false, 10, Duration::ZERO).valid,
            "unfair: no promise"
        );
        let terms: Vec<Op> = [(2, 21), (1, 20)]
            .iter()
            .map(|(p, t)| invoke(*p, "lead", &format!("{{\"token\": {t}}}")))
            .collect();
        let r = judge_terms(&history(&terms), true, 10, Duration::ZERO);
        assert_eq!(r.found.count(PASSED_OVER), 1, "{r:?}");
        assert!(r.positions.is_empty());
    }

    #[test]
    fn a_wait_through_more_hand_offs_than_the_threshold_is_starved_unless_it_failed() {
        let mut ops = vec![invoke(3, "acquire", "null"), invoke(4, "acquire", "null")];
        ops.extend(four_rounds(1));
        ops.push(complete(3, "info", "acquire", "null").with_error("abandoned: the run ended"));
        ops.push(complete(4, "info", "acquire", "null").with_error("session expired"));
        let r = judge_lock(&history(&ops), true, 3, Duration::ZERO);
        let starved = r.found.only(STARVED);
        assert_eq!(starved.process, 3, "4's session may have lost its place");
        assert!(starved.what.contains("4 hand-offs"), "{starved:?}");
        assert_eq!((r.starved, r.longest_wait_handoffs), (1, 4));
        let unfair = judge_lock(&history(&ops), false, 3, Duration::ZERO);
        assert!(unfair.valid && unfair.starved == 1, "a figure: {unfair:?}");
        assert!(
            judge_lock(&history(&ops), true, 4, Duration::ZERO).valid,
            "at the threshold"
        );
    }

    /// `process` campaigns; `won` completes the campaign and takes office with `token`.
    fn campaign(process: u64) -> Op {
        invoke(process, "campaign", "null")
    }

    fn term(process: u64, token: i64) -> Vec<Op> {
        let won = format!("{{\"token\": {token}}}");
        vec![
            complete(process, "ok", "campaign", &won),
            invoke(process, "lead", &won),
            complete(process, "ok", "lead", &won),
        ]
    }

    #[test]
    fn campaigns_give_an_election_positions_and_starved_waits() {
        let mut ops = vec![campaign(1)]; // an empty office: 0
        ops.extend(term(1, 10));
        ops.push(campaign(4)); // nobody in office: 0, then waits through 1's terms
        for token in 0..3 {
            ops.push(campaign(1)); // 4 waiting: 1
            ops.extend(term(1, 11 + token));
        }
        ops.push(campaign(2)); // behind 4: 1
        ops.extend(term(2, 20));
        ops.push(complete(4, "ok", "campaign", "{\"token\": 5}"));
        let r = judge_terms(&history(&ops), true, 3, Duration::ZERO);
        assert_eq!(r.positions, BTreeMap::from([(0, 2), (1, 4)]), "{r:?}");
        let starved = r.found.only(STARVED);
        assert_eq!(starved.process, 4);
        assert!(starved.what.contains("4 hand-offs"), "{starved:?}");
        assert!(!r.valid);
        let unfair = judge_terms(&history(&ops), false, 3, Duration::ZERO);
        assert!(unfair.valid && unfair.starved == 1, "a figure: {unfair:?}");
    }

    #[test]
    fn hand_offs_under_a_fault_and_its_settle_are_not_counted() {
        let mut ops = vec![
            invoke(3, "acquire", "null"),
            nemesis(OpType::Invoke, "start-partition"),
            nemesis(OpType::Info, "start-partition"),
            nemesis(OpType::Invoke, "stop-partition"),
            nemesis(OpType::Info, "stop-partition"),
        ];
        ops.extend(four_rounds(1));
        // history() puts the ops 1 µs apart: the grants come a few µs after the heal.
        let ops = history(&ops);
        let calm = judge_lock(&ops, true, 3, Duration::ZERO);
        assert_eq!(
            (calm.starved, calm.handoffs_under_faults),
            (1, 0),
            "{calm:?}"
        );
        let settled = judge_lock(&ops, true, 3, Duration::from_millis(1));
        assert!(settled.valid && settled.starved == 0, "{settled:?}");
        assert_eq!(settled.handoffs_under_faults, 4);
    }

    #[test]
    fn hand_offs_while_a_start_is_still_acting_are_not_counted() {
        // A sequence's steps (a kill, a restart, a cut-off) run before its start completes.
        let mut ops = vec![
            invoke(3, "acquire", "null"),
            nemesis(OpType::Invoke, "start-sequence"),
        ];
        ops.extend(four_rounds(1));
        ops.push(nemesis(OpType::Info, "start-sequence"));
        ops.push(nemesis(OpType::Invoke, "stop-sequence"));
        ops.push(nemesis(OpType::Info, "stop-sequence"));
        let judged = judge_lock(&history(&ops), true, 3, Duration::ZERO);
        assert!(judged.valid && judged.starved == 0, "{judged:?}");
        assert_eq!(judged.handoffs_under_faults, 4);
    }
}
