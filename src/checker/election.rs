//! Leader election, judged from the terms in office the candidates marked on the controller's
//! record (`lead` operations, one monotonic clock): at most one leader at any instant, how
//! long the group went without a leader, and how long failover took.
//!
//! Each `lead` runs from its invocation (the candidate took office) to its completion (it
//! resigned, `ok`, or stopped because of its session, `info`); a term never completed lasts to
//! the end of the history. Two terms of different processes that overlap are a violation,
//! found by the shared [`super::overlap`] checker (locks ask the same question of their
//! critical sections).
//! Time without a leader runs from the first term to the end of the history; a failover is a
//! gap between the end of a term (with nobody else in office) and the next term's beginning.

use std::collections::BTreeMap;

use serde::Serialize;

use super::overlap::{overlaps, tenures, Overlap, Tenure, Wording};
use crate::history::{Op, OpType, Quantiles};

/// The function name of a term in office.
const LEAD: &str = "lead";

/// How errors about malformed terms read.
const LEAD_WORDING: Wording = Wording {
    enters_twice: "takes office while already in office",
    leaves_unentered: "leaves an office it never took",
};

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
    pub overlaps: Vec<Overlap>,
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
    let terms = tenures(ops, LEAD, &LEAD_WORDING)?;
    let overlaps = overlaps(&terms, ops);

    let mut gaps = Vec::new();
    let mut failover = Vec::new();
    let mut after_loss = Vec::new();
    // The term whose end is the latest so far: whether the office is filled until then.
    let mut latest: Option<&Tenure> = None;
    for term in &terms {
        if let Some(prev) = latest.filter(|p| p.end <= term.begin) {
            let gap = term.begin - prev.end;
            gaps.push(gap);
            failover.push(gap);
            if lost(prev) {
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
        terms_lost: terms.iter().filter(|t| lost(t)).count() as u64,
        terms_per_leader,
        overlaps,
        leaderless_ns: gaps.iter().sum(),
        longest_leaderless_ns: gaps.iter().copied().max().unwrap_or(0),
        failover: Quantiles::of(failover),
        failover_after_loss: Quantiles::of(after_loss),
    })
}

/// Whether a term ended because the leader's session was lost (`info`, not a resignation).
fn lost(term: &Tenure) -> bool {
    term.completion.is_some_and(|c| c.kind != OpType::Ok)
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::history::testing::{history_ms as history, MsLine as Line};
    use OpType::{Info, Invoke, Ok as Done};

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
            [Overlap {
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
