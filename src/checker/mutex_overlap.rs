//! Mutual exclusion, measured where it matters: the critical sections the protected resource
//! recorded (`hold` operations, one monotonic clock) must never overlap.
//!
//! Each `hold` runs from its invocation (the holder entered) to its completion (it left); a
//! hold never completed lasts to the end of the history. Any two holds of different processes
//! that overlap are a violation, found by the shared [`super::overlap`] checker (elections
//! ask the same question of their terms). The acquire/release operations are checked
//! separately against the `mutex` or `fenced-mutex` model by [`check_lock_model`].

use serde::Serialize;

use super::overlap::{overlaps, tenures, Overlap, Wording};
use crate::checker::result::{CheckResult, Validity};
use crate::checker::{check_history, CheckOptions, ModelKind};
use crate::history::{Op, Process};

/// The function name of a critical section.
const HOLD: &str = "hold";

/// How errors about malformed critical sections read.
const HOLD_WORDING: Wording = Wording {
    enters_twice: "enters a critical section while inside one",
    leaves_unentered: "leaves a critical section it never entered",
};

/// The verdict on the critical sections of a lock history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MutualExclusion {
    /// No two critical sections overlapped.
    pub valid: bool,
    /// Critical sections recorded.
    pub holds: u64,
    /// Every overlap, by the time it began.
    pub overlaps: Vec<Overlap>,
    /// Steps the resource rejected as stale (fencing), summed over the holds.
    pub stale_steps_rejected: u64,
}

/// Checks that no two `hold` operations of a history overlap. Errors (naming the op's index)
/// when a hold completes without having begun or begins twice.
pub fn check_mutual_exclusion(ops: &[Op]) -> anyhow::Result<MutualExclusion> {
    let holds = tenures(ops, HOLD, &HOLD_WORDING)?;
    let overlaps = overlaps(&holds, ops);
    // Each completion reports the steps the resource rejected as stale during its hold.
    let stale = holds
        .iter()
        .filter_map(|h| h.completion?.value.get("rejected")?.as_u64())
        .sum();
    Ok(MutualExclusion {
        valid: overlaps.is_empty(),
        holds: holds.len() as u64,
        overlaps,
        stale_steps_rejected: stale,
    })
}

/// The verdict on a lock run: its critical sections and its lock operations.
#[derive(Debug, Clone, Serialize)]
pub struct LockVerdict {
    /// Invalid when critical sections overlapped or the lock operations are not linearizable;
    /// unknown when the model check hit a limit.
    pub valid: Validity,
    /// The critical sections, as the protected resource recorded them.
    pub mutual_exclusion: MutualExclusion,
    /// The acquire/release operations against `mutex` or `fenced-mutex`.
    pub lock_model: CheckResult,
}

/// Checks a lock run's history: no overlapping critical sections, and acquire/release
/// linearizable against `fenced-mutex` (when the fencing tokens are to be checked) or `mutex`.
pub fn check_lock_history(
    ops: &[Op],
    fenced: bool,
    opts: &CheckOptions,
) -> anyhow::Result<LockVerdict> {
    let mutual_exclusion = check_mutual_exclusion(ops)?;
    let model = if fenced {
        ModelKind::FencedMutex
    } else {
        ModelKind::Mutex
    };
    let lock_model = check_lock_model(ops, model, opts)?;
    let valid = if mutual_exclusion.valid {
        lock_model.valid
    } else {
        Validity::Invalid
    };
    Ok(LockVerdict {
        valid,
        mutual_exclusion,
        lock_model,
    })
}

/// Checks the history's `acquire` and `release` operations (nothing else) for
/// linearizability against `model`, which must be `mutex` or `fenced-mutex`.
pub fn check_lock_model(
    ops: &[Op],
    model: ModelKind,
    opts: &CheckOptions,
) -> anyhow::Result<CheckResult> {
    anyhow::ensure!(
        matches!(model, ModelKind::Mutex | ModelKind::FencedMutex),
        "a lock history is checked against mutex or fenced-mutex, not {}",
        model.name()
    );
    let lock_ops: Vec<Op> = ops
        .iter()
        .filter(|o| o.process == Process::NEMESIS || o.f == "acquire" || o.f == "release")
        .cloned()
        .collect();
    let opts = CheckOptions {
        model,
        ..opts.clone()
    };
    check_history(&lock_ops, &opts)
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::history::testing::{history_ms as history, MsLine as Line};
    use crate::history::OpType;
    use OpType::{Info, Invoke, Ok as Done};

    fn enter(ms: u64, p: u64, token: i64) -> Line {
        (ms, Invoke, Some(p), HOLD, json!({ "token": token }))
    }

    fn leave(ms: u64, p: u64, rejected: u64) -> Line {
        (ms, Done, Some(p), HOLD, json!({ "rejected": rejected }))
    }

    /// A hold: `(process, token, enter_ms, Some((leave_ms, rejected)))`, `None` if it never
    /// left.
    type Span = (u64, i64, u64, Option<(u64, u64)>);

    /// A history of holds, their ops in time order.
    fn holds(spans: &[Span]) -> Vec<Op> {
        let mut lines: Vec<_> = spans
            .iter()
            .flat_map(|&(p, token, from, to)| {
                let left = to.map(|(ms, rejected)| leave(ms, p, rejected));
                std::iter::once(enter(from, p, token)).chain(left)
            })
            .collect();
        lines.sort_by_key(|line| line.0);
        history(&lines)
    }

    #[test]
    fn back_to_back_holds_are_accepted() {
        let ops = holds(&[
            (1, 10, 0, Some((10, 0))),
            (2, 12, 10, Some((20, 2))),
            (1, 14, 25, Some((30, 0))),
        ]);
        let v = check_mutual_exclusion(&ops).unwrap();
        assert!(v.valid, "{v:?}");
        assert_eq!((v.holds, v.stale_steps_rejected), (3, 2));
    }

    #[test]
    fn an_overlap_under_a_partition_is_reported_with_who_when_and_how_long() {
        let ops = history(&[
            (5, Invoke, None, "start-partition", Value::Null),
            (6, Info, None, "start-partition", json!("isolated n1")),
            enter(10, 1, 10),
            enter(30, 2, 12),
            leave(45, 1, 0),
            (50, Invoke, None, "stop-partition", Value::Null),
            leave(60, 2, 0),
            (61, Info, None, "stop-partition", json!("healed")),
        ]);
        let v = check_mutual_exclusion(&ops).unwrap();
        assert!(!v.valid);
        assert_eq!(
            v.overlaps,
            [Overlap {
                first: 1,
                first_token: Some(10),
                second: 2,
                second_token: Some(12),
                at_ns: 30_000_000,
                duration_ns: 15_000_000,
                open_ended: false,
                nemesis: vec!["partition".into()],
            }]
        );
    }

    #[test]
    fn a_holder_that_never_leaves_overlaps_everyone_after_it() {
        let ops = holds(&[
            (1, 10, 0, None),
            (2, 12, 20, Some((30, 0))),
            (3, 14, 40, Some((50, 0))),
        ]);
        let v = check_mutual_exclusion(&ops).unwrap();
        let pairs: Vec<(u64, u64, u64, bool)> = v
            .overlaps
            .iter()
            .map(|o| (o.first, o.second, o.duration_ns / 1_000_000, o.open_ended))
            .collect();
        assert_eq!(pairs, [(1, 2, 10, false), (1, 3, 10, false)]);
        assert!(v.overlaps.iter().all(|o| o.nemesis.is_empty()));
        let open = history(&[
            enter(0, 1, 10),
            enter(20, 2, 12),
            (30, Invoke, None, "start-kill", Value::Null),
        ]);
        let v = check_mutual_exclusion(&open).unwrap();
        assert_eq!(v.overlaps.len(), 1);
        assert!(v.overlaps[0].open_ended);
        assert_eq!(v.overlaps[0].duration_ns, 10_000_000);
        assert_eq!(
            v.overlaps[0].nemesis,
            ["kill"],
            "a start never completed counts"
        );
    }

    #[test]
    fn malformed_holds_name_the_op() {
        let e = check_mutual_exclusion(&history(&[leave(0, 1, 0)])).unwrap_err();
        assert!(e.to_string().starts_with("op 0: process 1 leaves"), "{e}");
        let e = check_mutual_exclusion(&history(&[enter(0, 1, 1), enter(1, 1, 1)])).unwrap_err();
        assert!(e.to_string().starts_with("op 1: process 1 enters"), "{e}");
    }

    fn lock_op(ms: u64, kind: OpType, p: u64, f: &'static str, v: Value) -> Line {
        (ms, kind, Some(p), f, v)
    }

    /// `p` acquires the lock with `token`: invoked at `ms`, ok a millisecond later.
    fn acquired(ms: u64, p: u64, token: i64) -> Vec<Line> {
        vec![
            lock_op(ms, Invoke, p, "acquire", Value::Null),
            lock_op(ms + 1, Done, p, "acquire", json!(token)),
        ]
    }

    /// `p` releases the lock: invoked at `ms`, ok a millisecond later.
    fn released(ms: u64, p: u64) -> Vec<Line> {
        vec![
            lock_op(ms, Invoke, p, "release", Value::Null),
            lock_op(ms + 1, Done, p, "release", Value::Null),
        ]
    }

    #[test]
    fn the_lock_operations_are_checked_against_the_mutex_models() {
        let quick = CheckOptions {
            threads: 1,
            ..CheckOptions::default()
        };
        let good = history(&[
            lock_op(0, Invoke, 1, "acquire", Value::Null),
            lock_op(1, Done, 1, "acquire", json!(10)),
            enter(2, 1, 10),
            lock_op(2, Invoke, 2, "acquire", Value::Null),
            leave(3, 1, 0),
            lock_op(4, Invoke, 1, "release", Value::Null),
            lock_op(5, Done, 1, "release", Value::Null),
            lock_op(6, Done, 2, "acquire", json!(12)),
            // Process 2 loses its session while holding: an implicit release.
            lock_op(7, Invoke, 2, "release", Value::Null),
            lock_op(8, Info, 2, "release", Value::Null),
            lock_op(9, Invoke, 3, "acquire", Value::Null),
            lock_op(10, Done, 3, "acquire", json!(14)),
        ]);
        for model in [ModelKind::Mutex, ModelKind::FencedMutex] {
            let r = check_lock_model(&good, model, &quick).unwrap();
            assert_eq!(r.valid, Validity::Valid, "{}", model.name());
        }
        // Two acquisitions without a release between them.
        let double = history(&[acquired(0, 1, 10), acquired(2, 2, 12)].concat());
        let r = check_lock_model(&double, ModelKind::Mutex, &quick).unwrap();
        assert_eq!(r.valid, Validity::Invalid);
        // A token that does not grow: only the fenced model objects.
        let stale = history(&[acquired(0, 1, 10), released(2, 1), acquired(4, 2, 9)].concat());
        let r = check_lock_model(&stale, ModelKind::Mutex, &quick).unwrap();
        assert_eq!(r.valid, Validity::Valid);
        let r = check_lock_model(&stale, ModelKind::FencedMutex, &quick).unwrap();
        assert_eq!(r.valid, Validity::Invalid);
        assert!(check_lock_model(&good, ModelKind::Register, &quick).is_err());
    }
}
