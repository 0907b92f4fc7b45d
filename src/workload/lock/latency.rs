//! Acquire and hand-off latencies of a lock run, read from its history.
//!
//! Acquire latency: from an `acquire` invocation to its `ok` (waits that did not end `ok` are
//! left out). Hand-off latency: from the invocation of a `release` that ended `ok` to the next
//! `acquire` that ended `ok` after it, by whoever took the lock next.

use std::collections::HashMap;

use serde::Serialize;

use crate::history::{Op, OpType, Process, Quantiles};

/// The latencies of one lock run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LockLatencies {
    /// Invocation to `ok` of each acquisition.
    pub acquire: Quantiles,
    /// Release by one holder to acquisition by the next.
    pub handoff: Quantiles,
}

/// The acquire and hand-off latencies of a lock history.
pub fn lock_latencies(ops: &[Op]) -> LockLatencies {
    let mut invoked: HashMap<(Process, &str), u64> = HashMap::new();
    let mut acquire = Vec::new();
    let mut acquired_at = Vec::new();
    let mut released_from = Vec::new();
    for op in ops {
        let f @ ("acquire" | "release") = op.f.as_str() else {
            continue;
        };
        if op.kind == OpType::Invoke {
            invoked.insert((op.process, f), op.time);
            continue;
        }
        let Some(start) = invoked.remove(&(op.process, f)) else {
            continue;
        };
        match (f, op.kind) {
            ("acquire", OpType::Ok) => {
                acquire.push(op.time - start);
                acquired_at.push(op.time);
            }
            ("release", OpType::Ok) => released_from.push(start),
            _ => {}
        }
    }
    released_from.sort_unstable();
    let mut handoff = Vec::new();
    let mut releases = released_from.iter().peekable();
    for &at in &acquired_at {
        // The latest release sent before this acquisition, if none was used yet.
        let mut latest = None;
        while let Some(&&r) = releases.peek() {
            if r > at {
                break;
            }
            latest = Some(r);
            releases.next();
        }
        if let Some(r) = latest {
            handoff.push(at - r);
        }
    }
    LockLatencies {
        acquire: Quantiles::of(acquire),
        handoff: Quantiles::of(handoff),
    }
}

#[cfg(test)]
mod tests {
    use crate::history::testing;

    use super::*;

    fn op(ms: u64, kind: OpType, process: u64, f: &str) -> Op {
        testing::op(0, ms * 1_000_000, kind, Process::Client(process), f)
    }

    #[test]
    fn acquire_and_handoff_latencies_follow_the_history() {
        use OpType::{Info, Invoke, Ok};
        let ops = [
            op(0, Invoke, 1, "acquire"),
            op(2, Ok, 1, "acquire"),
            op(3, Invoke, 2, "acquire"),
            op(10, Invoke, 1, "release"),
            // The waiter hears of the release before the releaser hears back.
            op(14, Ok, 2, "acquire"),
            op(15, Ok, 1, "release"),
            op(20, Invoke, 2, "release"),
            op(21, Info, 2, "release"),
            op(30, Invoke, 3, "acquire"),
            op(60, Ok, 3, "acquire"),
        ];
        let l = lock_latencies(&ops);
        assert_eq!(l.acquire.count, 3);
        assert_eq!((l.acquire.p50_ms, l.acquire.max_ms), (11.0, 30.0));
        // Only the release that ended ok starts a hand-off.
        assert_eq!(l.handoff.count, 1);
        assert_eq!(l.handoff.max_ms, 4.0);
    }

    #[test]
    fn nearest_rank_quantiles() {
        let q = Quantiles::of((1..=100).map(|ms| ms * 1_000_000).collect());
        assert_eq!(
            (q.p50_ms, q.p90_ms, q.p99_ms, q.max_ms),
            (50.0, 90.0, 99.0, 100.0)
        );
        assert_eq!(Quantiles::of(Vec::new()), Quantiles::default());
    }
}
