//! Leader election, judged from the terms in office the candidates marked on the controller's
//! record (`lead` operations, one monotonic clock): at most one leader at any instant, how
//! long the group went without a leader, and how long failover took.
//!
//! Each `lead` runs from its invocation (the candidate took office) to its completion (it
//! resigned, `ok`, or stopped because of its session, `info`); a term never completed lasts to
//! the end of the history. Two terms of different processes that overlap are a violation,
//! reported with both processes and tokens, when, for how long, and the faults active then.
//! Time without a leader runs from the first term to the end of the history; a failover is a
//! gap between the end of a term (with nobody else in office) and the next term's beginning.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::history::{fault_intervals, FaultInterval, Op, OpType, Process, Quantiles};

/// The function name of a term in office.
const LEAD: &str = "lead";

/// One term in office as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    process: u64,
    token: Option<i64>,
    begin: u64,
    end: u64,
    completed: bool,
    lost: bool,
}

/// Two terms in office that overlapped: two leaders at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DualLeadership {
    /// The leader that took office first.
    pub first: u64,
    /// Its token (the czxid of the znode that made it leader).
    pub first_token: Option<i64>,
    /// The leader that took office while the first was still in office.
    pub second: u64,
    /// Its token.
    pub second_token: Option<i64>,
    /// When the overlap began: nanoseconds since the start of the test.
    pub at_ns: u64,
    /// How long both were in office, in nanoseconds (to the end of the history if one never
    /// left).
    pub duration_ns: u64,
    /// Whether neither term had ended when the overlap ended (the history ended first).
    pub open_ended: bool,
    /// The kinds of faults active at some point during the overlap.
    pub nemesis: Vec<String>,
}

/// The verdict on the terms of an election history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ElectionVerdict {
    /// No two terms overlapped.
    pub valid: bool,
    /// Terms recorded.
    pub terms: u64,
    /// Terms that ended because the leader's session was lost (`info`).
    pub terms_lost: u64,
    /// Terms per process that led at least once.
    pub terms_per_leader: BTreeMap<u64, u64>,
    /// Every overlap of two terms, by the time it began.
    pub overlaps: Vec<DualLeadership>,
    /// Time without a leader, from the first term to the end of the history, in nanoseconds.
    pub leaderless_ns: u64,
    /// The longest stretch without a leader, in nanoseconds.
    pub longest_leaderless_ns: u64,
    /// From the end of a term (nobody else in office) to the beginning of the next one.
    pub failover: Quantiles,
    /// The same, counting only terms that ended because the leader lost its session.
    pub failover_after_loss: Quantiles,
}

/// Checks the `lead` operations of a history. Errors (naming the op's index) when a term ends
/// without having begun or begins while its process is already in office.
pub fn check_election(ops: &[Op]) -> anyhow::Result<ElectionVerdict> {
    let history_end = ops.iter().map(|o| o.time).max().unwrap_or(0);
    let mut terms = terms(ops, history_end)?;
    terms.sort_by_key(|t| (t.begin, t.process));
    let faults = fault_intervals(ops);
    let overlaps = overlaps(&terms, &faults);

    let mut gaps = Vec::new();
    let mut failover = Vec::new();
    let mut after_loss = Vec::new();
    // The term whose end is the latest so far: whether the office is filled until then.
    let mut latest: Option<&Term> = None;
    for term in &terms {
        if let Some(prev) = latest.filter(|p| p.end <= term.begin) {
            let gap = term.begin - prev.end;
            gaps.push(gap);
            failover.push(gap);
            if prev.lost {
                after_loss.push(gap);
            }
        }
        if latest.is_none_or(|p| term.end > p.end) {
            latest = Some(term);
        }
    }
    if let Some(last) = latest {
        gaps.push(history_end - last.end);
    }
    let mut terms_per_leader = BTreeMap::new();
    for term in &terms {
        *terms_per_leader.entry(term.process).or_insert(0) += 1;
    }
    Ok(ElectionVerdict {
        valid: overlaps.is_empty(),
        terms: terms.len() as u64,
        terms_lost: terms.iter().filter(|t| t.lost).count() as u64,
        terms_per_leader,
        overlaps,
        leaderless_ns: gaps.iter().sum(),
        longest_leaderless_ns: gaps.iter().copied().max().unwrap_or(0),
        failover: Quantiles::of(failover),
        failover_after_loss: Quantiles::of(after_loss),
    })
}

/// Every pair of overlapping terms of `terms` (sorted by beginning).
fn overlaps(terms: &[Term], faults: &[FaultInterval]) -> Vec<DualLeadership> {
    let mut found = Vec::new();
    let mut in_office: Vec<&Term> = Vec::new();
    for term in terms {
        in_office.retain(|other| other.end > term.begin || !other.completed);
        for other in &in_office {
            let end = other.end.min(term.end);
            found.push(DualLeadership {
                first: other.process,
                first_token: other.token,
                second: term.process,
                second_token: term.token,
                at_ns: term.begin,
                duration_ns: end - term.begin,
                open_ended: !((other.completed && other.end == end)
                    || (term.completed && term.end == end)),
                nemesis: active_during(faults, term.begin, end),
            });
        }
        in_office.push(term);
    }
    found
}

/// The terms of a history; a term never completed lasts to `history_end`.
fn terms(ops: &[Op], history_end: u64) -> anyhow::Result<Vec<Term>> {
    let mut open: HashMap<u64, Term> = HashMap::new();
    let mut done = Vec::new();
    for op in ops.iter().filter(|o| o.f == LEAD) {
        let Process::Client(process) = op.process else {
            continue;
        };
        if op.kind == OpType::Invoke {
            let term = Term {
                process,
                token: op.value.get("token").and_then(|t| t.as_i64()),
                begin: op.time,
                end: history_end,
                completed: false,
                lost: false,
            };
            if open.insert(process, term).is_some() {
                anyhow::bail!(
                    "op {}: process {process} takes office while already in office",
                    op.index
                );
            }
            continue;
        }
        let Some(mut term) = open.remove(&process) else {
            anyhow::bail!(
                "op {}: process {process} leaves an office it never took",
                op.index
            );
        };
        term.end = op.time;
        term.completed = true;
        term.lost = op.kind != OpType::Ok;
        done.push(term);
    }
    done.extend(open.into_values());
    Ok(done)
}

/// The kinds of the faults active at some point in `[from, to]`, without repeats.
fn active_during(faults: &[FaultInterval], from: u64, to: u64) -> Vec<String> {
    let mut kinds: Vec<String> = faults
        .iter()
        .filter(|f| f.start <= to && f.end >= from)
        .map(|f| f.kind.clone())
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::history::testing::{indexed, op};
    use OpType::{Info, Invoke, Ok as Done};

    type Line = (u64, OpType, Option<u64>, &'static str, Value);

    /// Builds a history from `(time_ms, kind, process, f, value)`; process `None` is the
    /// nemesis.
    fn history(lines: &[Line]) -> Vec<Op> {
        indexed(lines.iter().map(|(ms, kind, process, f, value)| {
            let process = process.map_or(Process::NEMESIS, Process::Client);
            op(0, ms * 1_000_000, *kind, process, f).with_value(value.clone())
        }))
    }

    fn take(ms: u64, p: u64, token: i64) -> Line {
        (ms, Invoke, Some(p), LEAD, json!({ "token": token }))
    }

    fn resign(ms: u64, p: u64) -> Line {
        (ms, Done, Some(p), LEAD, Value::Null)
    }

    fn lose(ms: u64, p: u64) -> Line {
        (ms, Info, Some(p), LEAD, Value::Null)
    }

    #[test]
    fn successive_terms_are_accepted_with_their_gaps_and_failovers() {
        let ops = history(&[
            take(10, 1, 100),
            resign(50, 1),
            take(52, 2, 102),
            lose(100, 2),
            take(130, 3, 104),
            resign(180, 3),
            take(184, 1, 106),
            resign(200, 1),
            (210, Invoke, None, "start-kill", Value::Null),
        ]);
        let v = check_election(&ops).unwrap();
        assert!(v.valid, "{v:?}");
        assert_eq!((v.terms, v.terms_lost), (4, 1));
        assert_eq!(v.terms_per_leader, BTreeMap::from([(1, 2), (2, 1), (3, 1)]));
        // Gaps 2, 30 and 4 ms between terms, 10 ms after the last one.
        assert_eq!(v.leaderless_ns, 46_000_000);
        assert_eq!(v.longest_leaderless_ns, 30_000_000);
        assert_eq!(v.failover.count, 3);
        assert_eq!((v.failover.p50_ms, v.failover.max_ms), (4.0, 30.0));
        assert_eq!(v.failover_after_loss.count, 1);
        assert_eq!(v.failover_after_loss.max_ms, 30.0);
    }

    #[test]
    fn two_leaders_under_a_partition_are_reported_with_who_when_and_how_long() {
        let ops = history(&[
            (5, Invoke, None, "start-partition", Value::Null),
            (6, Info, None, "start-partition", json!("isolated n1")),
            take(10, 1, 100),
            take(30, 2, 102),
            lose(45, 1),
            (50, Invoke, None, "stop-partition", Value::Null),
            (51, Info, None, "stop-partition", json!("healed")),
            resign(60, 2),
            take(70, 3, 104),
            resign(80, 3),
        ]);
        let v = check_election(&ops).unwrap();
        assert!(!v.valid);
        assert_eq!(
            v.overlaps,
            [DualLeadership {
                first: 1,
                first_token: Some(100),
                second: 2,
                second_token: Some(102),
                at_ns: 30_000_000,
                duration_ns: 15_000_000,
                open_ended: false,
                nemesis: vec!["partition".into()],
            }]
        );
        // The lost term of 1 ended inside 2's term: no failover there.
        assert_eq!(v.failover.count, 1);
        assert_eq!(v.failover.max_ms, 10.0);
        assert_eq!(v.failover_after_loss.count, 0);
    }

    #[test]
    fn a_leader_that_never_leaves_overlaps_every_later_leader() {
        let ops = history(&[
            take(0, 1, 100),
            take(20, 2, 102),
            resign(30, 2),
            take(40, 3, 104),
            resign(50, 3),
        ]);
        let v = check_election(&ops).unwrap();
        let pairs: Vec<(u64, u64, u64)> = v
            .overlaps
            .iter()
            .map(|o| (o.first, o.second, o.duration_ns / 1_000_000))
            .collect();
        assert_eq!(pairs, [(1, 2, 10), (1, 3, 10)]);
        assert_eq!(v.leaderless_ns, 0, "1 was in office throughout");
        let open = history(&[take(0, 1, 100), take(20, 2, 102), take(25, 3, 104)]);
        let v = check_election(&open).unwrap();
        assert_eq!(v.overlaps.len(), 3);
        assert!(v.overlaps.iter().all(|o| o.open_ended));
    }

    #[test]
    fn a_term_beginning_as_another_ends_is_not_an_overlap() {
        let ops = history(&[take(0, 1, 100), resign(10, 1), take(10, 2, 102)]);
        let v = check_election(&ops).unwrap();
        assert!(v.valid, "{v:?}");
        assert_eq!(v.failover.count, 1);
        assert_eq!(v.failover.max_ms, 0.0);
    }

    #[test]
    fn malformed_terms_name_the_op() {
        let e = check_election(&history(&[resign(0, 1)])).unwrap_err();
        assert!(e.to_string().starts_with("op 0: process 1 leaves"), "{e}");
        let e = check_election(&history(&[take(0, 1, 1), take(1, 1, 2)])).unwrap_err();
        assert!(e.to_string().starts_with("op 1: process 1 takes"), "{e}");
    }
}
