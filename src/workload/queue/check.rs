//! A distributed FIFO queue, judged from its `enqueue` and `dequeue` operations (conventions in
//! `workload::queue::driver`): every acknowledged value is taken exactly once, nothing is taken
//! that was never put in, and values come out in the order they went in.
//!
//! - **lost**: an `ok` enqueue whose value no dequeue took (`ok`) nor may have taken (an `info`
//!   dequeue of that value), although a later dequeue found the queue empty: invoked after the
//!   enqueue was acknowledged, so the value was gone by then. A value in an `info` dequeue only
//!   is *possibly consumed*, not a violation; an acknowledged value no later dequeue found gone
//!   is *remaining* (the queue was not drained), which leaves the run undecided instead.
//! - **duplicated**: a value taken by two `ok` dequeues.
//! - **phantom**: a value taken that no enqueue put in (none invoked, or every one `fail`).
//! - **reordered**: enqueue(a) acknowledged before enqueue(b) was invoked, yet dequeue(b)
//!   completed before dequeue(a) was invoked (the `ok` one, else the first `info` one trying
//!   a): b came out while a, older, was still in.

use std::collections::BTreeMap;

use anyhow::bail;
use serde::Serialize;

use crate::checker::calls::{pair, Call, Outcome};
use crate::history::{Op, Process};

/// The function name of an enqueue.
pub const ENQUEUE: &str = "enqueue";
/// The function name of a dequeue.
pub const DEQUEUE: &str = "dequeue";
/// The error of a dequeue that found the queue empty.
pub const EMPTY: &str = "empty";

/// Who did something, and when: milliseconds since the start of the test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct At {
    /// The process.
    pub process: Process,
    /// When.
    pub ms: f64,
}

impl At {
    fn of(op: &Op) -> At {
        At {
            process: op.process,
            ms: op.time as f64 / 1e6,
        }
    }
}

/// An acknowledged value no dequeue was seen to take.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Enqueued {
    /// The value.
    pub value: u64,
    /// Its enqueue's acknowledgement.
    pub acknowledged: At,
}

/// An acknowledged value gone from the queue without any dequeue taking it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lost {
    /// The value.
    pub value: u64,
    /// Its enqueue's acknowledgement.
    pub acknowledged: At,
    /// The invocation of the first later dequeue that found the queue empty.
    pub seen_empty: At,
}

/// An acknowledged value only an `info` dequeue may have taken.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PossiblyConsumed {
    /// The value.
    pub value: u64,
    /// The invocation of the first `info` dequeue trying it.
    pub tried: At,
}

/// A value taken more than once.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Duplicated {
    /// The value.
    pub value: u64,
    /// The completions of the `ok` dequeues that took it, in history order.
    pub dequeued: Vec<At>,
}

/// A value taken that was never put in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Phantom {
    /// The value.
    pub value: u64,
    /// The completion of the first `ok` dequeue that took it.
    pub dequeued: At,
    /// An enqueue of the value was invoked but ended `fail` (else none was invoked).
    pub enqueue_failed: bool,
}

/// Two values that came out in the opposite order to the one they went in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reordered {
    /// The value enqueued first.
    pub first: u64,
    /// Its enqueue's acknowledgement.
    pub first_acknowledged: At,
    /// The invocation of the dequeue that took (or may have taken) it.
    pub first_dequeue_invoked: At,
    /// The value enqueued after `first` was acknowledged.
    pub second: u64,
    /// Its enqueue's invocation.
    pub second_enqueue_invoked: At,
    /// The completion of the dequeue that took it, before `first`'s dequeue was invoked.
    pub second_dequeued: At,
}

/// The verdict on the operations of a queue history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueReport {
    /// No value lost, duplicated, phantom or reordered.
    pub valid: bool,
    /// Every acknowledged value was taken, may have been, or was lost: none is `remaining`.
    pub drained: bool,
    /// Enqueues acknowledged (`ok`).
    pub enqueue_ok: u64,
    /// Enqueues that certainly did not happen (`fail`).
    pub enqueue_fail: u64,
    /// Enqueues with an unknown outcome (`info`, or never completed).
    pub enqueue_info: u64,
    /// Dequeues that took a value (`ok`).
    pub dequeue_ok: u64,
    /// Dequeues that found the queue empty.
    pub dequeue_empty: u64,
    /// Dequeues that failed otherwise.
    pub dequeue_fail: u64,
    /// Dequeues with an unknown outcome (`info`, or never completed).
    pub dequeue_info: u64,
    /// Acknowledged values that only `info` dequeues may have taken.
    pub possibly_consumed: Vec<PossiblyConsumed>,
    /// Acknowledged values never taken and not known to be gone (the queue was not drained).
    pub remaining: Vec<Enqueued>,
    /// Acknowledged values gone without a dequeue taking them.
    pub lost: Vec<Lost>,
    /// Values taken twice or more.
    pub duplicated: Vec<Duplicated>,
    /// Values taken that were never put in.
    pub phantom: Vec<Phantom>,
    /// Values that came out before an older one, one older witness each, by the time the
    /// younger came out.
    pub reordered: Vec<Reordered>,
}

/// The operations of one value.
#[derive(Default)]
struct ValueOps<'a> {
    enqueue: Option<Call<'a>>,
    taken: Vec<Call<'a>>,
    tried: Vec<Call<'a>>,
}

/// Checks the `enqueue` and `dequeue` operations of `ops`. Errors (naming the op's index) on
/// a malformed history: completions without invocations, a value enqueued twice, or a value
/// that is not a non-negative integer.
pub fn check_queue(ops: &[Op]) -> anyhow::Result<QueueReport> {
    let calls = pair(ops)?;
    let mut values: BTreeMap<u64, ValueOps<'_>> = BTreeMap::new();
    let mut empty_seen: Vec<&Op> = Vec::new();
    let mut unfinished_dequeue = false;
    let mut report = QueueReport {
        valid: true,
        drained: true,
        enqueue_ok: 0,
        enqueue_fail: 0,
        enqueue_info: 0,
        dequeue_ok: 0,
        dequeue_empty: 0,
        dequeue_fail: 0,
        dequeue_info: 0,
        possibly_consumed: Vec::new(),
        remaining: Vec::new(),
        lost: Vec::new(),
        duplicated: Vec::new(),
        phantom: Vec::new(),
        reordered: Vec::new(),
    };
    for call in calls {
        match (call.f(), call.outcome()) {
            (ENQUEUE, outcome) => {
                let value = integer(call.invoke, &call.invoke.value)?;
                let entry = values.entry(value).or_default();
                if let Some(earlier) = &entry.enqueue {
                    bail!(
                        "op {}: value {value} enqueued again (first by op {})",
                        call.invoke.index,
                        earlier.invoke.index
                    );
                }
                entry.enqueue = Some(call);
                *match outcome {
                    Outcome::Ok => &mut report.enqueue_ok,
                    Outcome::Fail => &mut report.enqueue_fail,
                    Outcome::Info => &mut report.enqueue_info,
                } += 1;
            }
            (DEQUEUE, Outcome::Ok) => {
                let completion = call.completion.unwrap_or(call.invoke);
                let value = integer(completion, call.result())?;
                values.entry(value).or_default().taken.push(call);
                report.dequeue_ok += 1;
            }
            (DEQUEUE, Outcome::Fail) => match call.completion {
                Some(c) if c.error.as_deref() == Some(EMPTY) => {
                    empty_seen.push(call.invoke);
                    report.dequeue_empty += 1;
                }
                _ => report.dequeue_fail += 1,
            },
            (DEQUEUE, Outcome::Info) => {
                report.dequeue_info += 1;
                match call.completion {
                    Some(c) if !c.value.is_null() => {
                        let value = integer(c, &c.value)?;
                        values.entry(value).or_default().tried.push(call);
                    }
                    Some(_) => {}
                    None => unfinished_dequeue = true,
                }
            }
            _ => {}
        }
    }
    for (&value, ops) in &values {
        judge_value(value, ops, &empty_seen, unfinished_dequeue, &mut report);
    }
    report.reordered = reordered(&values);
    report.valid = report.lost.is_empty()
        && report.duplicated.is_empty()
        && report.phantom.is_empty()
        && report.reordered.is_empty();
    report.drained = report.remaining.is_empty();
    Ok(report)
}

/// `value` as a non-negative integer, or an error naming `op`.
fn integer(op: &Op, value: &serde_json::Value) -> anyhow::Result<u64> {
    match value.as_u64() {
        Some(v) => Ok(v),
        None => bail!(
            "op {}: {} value {value} is not a non-negative integer",
            op.index,
            op.f
        ),
    }
}

/// Files `value` under the report's lists it belongs to. `empty_seen` holds the invocations
/// of the dequeues that found the queue empty, in history order; an `unfinished` dequeue (the
/// history ended first) may have taken anything, so nothing is called lost then.
fn judge_value(
    value: u64,
    ops: &ValueOps<'_>,
    empty_seen: &[&Op],
    unfinished: bool,
    report: &mut QueueReport,
) {
    if ops.taken.len() > 1 {
        report.duplicated.push(Duplicated {
            value,
            dequeued: ops.taken.iter().map(|c| At::of(completion(c))).collect(),
        });
    }
    let acknowledged = ops
        .enqueue
        .filter(|e| e.outcome() == Outcome::Ok)
        .map(|e| completion(&e));
    if let Some(first) = ops.taken.first() {
        let put_in = ops.enqueue.map(|e| e.outcome() != Outcome::Fail);
        if put_in != Some(true) {
            report.phantom.push(Phantom {
                value,
                dequeued: At::of(completion(first)),
                enqueue_failed: put_in == Some(false),
            });
        }
        return;
    }
    let Some(acknowledged) = acknowledged else {
        return;
    };
    if let Some(tried) = ops.tried.first() {
        report.possibly_consumed.push(PossiblyConsumed {
            value,
            tried: At::of(tried.invoke),
        });
        return;
    }
    let after = empty_seen.partition_point(|op| op.time <= acknowledged.time);
    match empty_seen.get(after) {
        Some(seen) if !unfinished => report.lost.push(Lost {
            value,
            acknowledged: At::of(acknowledged),
            seen_empty: At::of(seen),
        }),
        _ => report.remaining.push(Enqueued {
            value,
            acknowledged: At::of(acknowledged),
        }),
    }
}

/// The completion of a call known to have one, else its invocation.
fn completion<'a>(call: &Call<'a>) -> &'a Op {
    call.completion.unwrap_or(call.invoke)
}

/// Every value taken while an older one was still in, with the oldest-dequeued witness.
fn reordered(values: &BTreeMap<u64, ValueOps<'_>>) -> Vec<Reordered> {
    // Older candidates: acknowledged values with a dequeue, by acknowledgement time.
    let mut older: Vec<(u64, &Op, &Op)> = values
        .iter()
        .filter_map(|(&value, ops)| {
            let enqueue = ops.enqueue.filter(|e| e.outcome() == Outcome::Ok)?;
            let dequeue = ops.taken.first().or(ops.tried.first())?;
            Some((value, completion(&enqueue), dequeue.invoke))
        })
        .collect();
    older.sort_by_key(|(_, acked, _)| acked.time);
    // The older candidate dequeued latest among the first i + 1.
    let mut latest: Vec<usize> = Vec::with_capacity(older.len());
    for (i, (_, _, dequeue)) in older.iter().enumerate() {
        let best = match latest.last() {
            Some(&j) if older[j].2.time >= dequeue.time => j,
            _ => i,
        };
        latest.push(best);
    }
    let mut found = Vec::new();
    for (&value, ops) in values {
        let (Some(enqueue), Some(taken)) = (ops.enqueue, ops.taken.first()) else {
            continue;
        };
        if enqueue.outcome() == Outcome::Fail {
            continue;
        }
        let dequeued = completion(taken);
        let before = older.partition_point(|(_, acked, _)| acked.time < enqueue.invoke.time);
        let Some(&j) = before.checked_sub(1).map(|i| &latest[i]) else {
            continue;
        };
        let (first, acked, first_dequeue) = older[j];
        if first_dequeue.time > dequeued.time {
            found.push(Reordered {
                first,
                first_acknowledged: At::of(acked),
                first_dequeue_invoked: At::of(first_dequeue),
                second: value,
                second_enqueue_invoked: At::of(enqueue.invoke),
                second_dequeued: At::of(dequeued),
            });
        }
    }
    found.sort_by(|a, b| a.second_dequeued.ms.total_cmp(&b.second_dequeued.ms));
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::testing::{complete, history, invoke};

    fn enq(p: u64, v: u64) -> Op {
        invoke(p, ENQUEUE, &v.to_string())
    }

    fn enq_done(p: u64, kind: &str, v: u64) -> Op {
        complete(p, kind, ENQUEUE, &v.to_string())
    }

    fn deq(p: u64) -> Op {
        invoke(p, DEQUEUE, "null")
    }

    fn took(p: u64, v: u64) -> Op {
        complete(p, "ok", DEQUEUE, &v.to_string())
    }

    fn empty(p: u64) -> Op {
        complete(p, "fail", DEQUEUE, "null").with_error(EMPTY)
    }

    fn lost_answer(p: u64, v: Option<u64>) -> Op {
        let value = v.map_or("null".to_string(), |v| v.to_string());
        complete(p, "info", DEQUEUE, &value).with_error("connection-loss")
    }

    /// Process `p` enqueues `v`, acknowledged.
    fn acked(p: u64, v: u64) -> Vec<Op> {
        vec![enq(p, v), enq_done(p, "ok", v)]
    }

    /// Process `p` dequeues `v`.
    fn taken(p: u64, v: u64) -> Vec<Op> {
        vec![deq(p), took(p, v)]
    }

    /// Process `p` finds the queue empty.
    fn emptied(p: u64) -> Vec<Op> {
        vec![deq(p), empty(p)]
    }

    /// `process` at the `position`-th line (test lines are 1 µs apart).
    fn at(process: u64, position: u64) -> At {
        At {
            process: Process::Client(process),
            ms: position as f64 / 1000.0,
        }
    }

    fn check(parts: &[Vec<Op>]) -> QueueReport {
        check_queue(&history(&parts.concat())).unwrap()
    }

    #[test]
    fn every_value_taken_once_in_order_then_empty_is_valid_and_drained() {
        let r = check(&[
            acked(1, 0),
            acked(1, 1),
            taken(2, 0),
            taken(3, 1),
            emptied(2),
        ]);
        assert!(r.valid && r.drained, "{r:?}");
        assert_eq!((r.enqueue_ok, r.dequeue_ok, r.dequeue_empty), (2, 2, 1));
        assert!(r.possibly_consumed.is_empty() && r.remaining.is_empty());
    }

    #[test]
    fn an_acknowledged_value_gone_before_an_empty_queue_is_lost() {
        let r = check(&[acked(1, 7), emptied(2)]);
        assert!(!r.valid, "{r:?}");
        assert_eq!(
            r.lost,
            [Lost {
                value: 7,
                acknowledged: at(1, 1),
                seen_empty: at(2, 2),
            }]
        );
    }

    #[test]
    fn an_empty_queue_seen_before_the_acknowledgement_leaves_the_value_remaining() {
        // The dequeue found the queue empty while the enqueue was still in flight: the value
        // may be in the queue still. Not drained, but no violation.
        let r = check(&[vec![enq(1, 7)], emptied(2), vec![enq_done(1, "ok", 7)]]);
        assert!(r.valid && !r.drained, "{r:?}");
        assert_eq!(r.remaining.len(), 1);
        assert!(r.lost.is_empty());
        // Likewise when a dequeue never completed: it may have taken the value.
        let r = check(&[acked(1, 7), vec![deq(3)], emptied(2)]);
        assert!(r.valid && !r.drained, "{r:?}");
        assert_eq!(r.dequeue_info, 1);
    }

    #[test]
    fn a_value_taken_twice_is_duplicated() {
        let r = check(&[acked(1, 3), vec![deq(2), deq(3), took(2, 3), took(3, 3)]]);
        assert!(!r.valid);
        assert_eq!(
            r.duplicated,
            [Duplicated {
                value: 3,
                dequeued: vec![at(2, 4), at(3, 5)],
            }]
        );
    }

    #[test]
    fn a_value_never_put_in_or_failed_is_a_phantom() {
        let r = check(&[
            vec![enq(1, 1), enq_done(1, "fail", 1)],
            taken(2, 1),
            taken(2, 99),
        ]);
        assert!(!r.valid);
        let phantoms: Vec<(u64, bool)> = r
            .phantom
            .iter()
            .map(|p| (p.value, p.enqueue_failed))
            .collect();
        assert_eq!(phantoms, [(1, true), (99, false)]);
        assert_eq!(r.phantom[1].dequeued, at(2, 5));
    }

    #[test]
    fn a_younger_value_taken_before_the_older_is_reordered() {
        let r = check(&[acked(1, 0), acked(1, 1), taken(2, 1), taken(3, 0)]);
        assert!(!r.valid);
        assert_eq!(
            r.reordered,
            [Reordered {
                first: 0,
                first_acknowledged: at(1, 1),
                first_dequeue_invoked: at(3, 6),
                second: 1,
                second_enqueue_invoked: at(1, 2),
                second_dequeued: at(2, 5),
            }]
        );
        assert!(r.lost.is_empty() && r.duplicated.is_empty() && r.phantom.is_empty());
    }

    #[test]
    fn concurrent_enqueues_may_come_out_in_either_order() {
        for (a, b) in [(0, 1), (1, 0)] {
            let concurrent = vec![
                enq(1, 0),
                enq(2, 1),
                enq_done(1, "ok", 0),
                enq_done(2, "ok", 1),
            ];
            let r = check(&[concurrent, taken(3, a), taken(3, b)]);
            assert!(r.valid, "{a} then {b}: {r:?}");
        }
        // So may overlapping dequeues of sequential enqueues.
        let overlapping = vec![deq(2), deq(3), took(3, 1), took(2, 0)];
        let r = check(&[acked(1, 0), acked(1, 1), overlapping]);
        assert!(r.valid, "{r:?}");
    }

    #[test]
    fn info_outcomes_excuse_but_do_not_invent() {
        let r = check(&[
            // 0 acknowledged, then tried by a dequeue whose answer was lost: possibly consumed.
            acked(1, 0),
            vec![deq(2), lost_answer(2, Some(0))],
            // 1's enqueue answer was lost but it went in: taking it is no phantom.
            vec![enq(1, 1), complete(1, "info", ENQUEUE, "1")],
            taken(3, 1),
            // 2's enqueue answer was lost and nobody took it: nothing is required of it.
            vec![enq(4, 2), complete(4, "info", ENQUEUE, "2")],
            // A lost answer with no delete in flight names no value.
            vec![deq(5), lost_answer(5, None)],
            emptied(3),
        ]);
        assert!(r.valid && r.drained, "{r:?}");
        assert_eq!(
            r.possibly_consumed,
            [PossiblyConsumed {
                value: 0,
                tried: at(2, 2),
            }]
        );
        assert_eq!((r.enqueue_info, r.dequeue_info), (2, 2));
        // An info dequeue that did not take its value, and an ok one that did: neither lost
        // nor duplicated.
        let r = check(&[
            acked(1, 0),
            vec![deq(2), lost_answer(2, Some(0))],
            taken(3, 0),
            emptied(3),
        ]);
        assert!(
            r.valid && r.drained && r.possibly_consumed.is_empty(),
            "{r:?}"
        );
    }

    #[test]
    fn an_info_dequeue_of_the_older_value_dates_its_removal() {
        // 0 was possibly taken by a dequeue invoked after 1 came out: reordered.
        let r = check(&[
            acked(1, 0),
            acked(1, 1),
            taken(2, 1),
            vec![deq(3), lost_answer(3, Some(0))],
        ]);
        assert_eq!(r.reordered.len(), 1, "{r:?}");
        assert_eq!((r.reordered[0].first, r.reordered[0].second), (0, 1));
    }

    #[test]
    fn other_failures_are_not_empty_queues() {
        let refused = complete(2, "fail", DEQUEUE, "null").with_error("no-node");
        let r = check(&[acked(1, 7), vec![deq(2), refused]]);
        assert!(r.valid && !r.drained, "{r:?}");
        assert_eq!((r.dequeue_fail, r.dequeue_empty), (1, 0));
    }

    #[test]
    fn malformed_histories_name_the_op() {
        let twice = history(&[acked(1, 1), vec![enq(1, 1)]].concat());
        let e = check_queue(&twice).unwrap_err().to_string();
        assert!(e.starts_with("op 2: value 1 enqueued again"), "{e}");
        let text = history(&[invoke(1, ENQUEUE, "\"x\"")]);
        let e = check_queue(&text).unwrap_err().to_string();
        assert!(e.starts_with("op 0: enqueue value \"x\""), "{e}");
        let orphan = history(&[took(1, 1)]);
        assert!(check_queue(&orphan).is_err());
    }
}
