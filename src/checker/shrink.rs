//! Shrinks a non-linearizable history to the smallest window that shows it.
//!
//! First the shortest failing prefix: the operations invoked up to the completion the search
//! could not get past ([`Stuck::furthest`]), those still open then taken as indefinite (a
//! prefix failing implies the whole history fails). Then, when the model has a state standing
//! for "anything", the latest start: the window of that prefix's operations invoked from some
//! position on that fails from any state. Every window reported was itself searched and
//! failed; a window search that runs out of its step budget counts as passing, so shrinking
//! never costs more than a few budgets.

use super::model::Model;
use super::search::{search, Limits, SearchOp, Stuck, Verdict};

/// Steps each window search of the latest-start stage may take.
const WINDOW_STEPS: u64 = 1 << 18;

/// A failing window of a searched history.
#[derive(Debug, Clone)]
pub struct Window<S> {
    /// The window's operations, as indices into the searched operations, in invocation order.
    pub ops: Vec<usize>,
    /// Whether the window fails from any starting state (else from the model's initial state).
    pub from_any_state: bool,
    /// Where the window's own search got furthest (indices into the searched operations).
    pub stuck: Stuck<S>,
}

/// The smallest window found of `ops`, whose full search failed as `stuck`.
pub fn smallest_window<M: Model>(
    model: &M,
    ops: &[SearchOp<M::Op>],
    stuck: Stuck<M::State>,
    limits: &Limits<'_>,
) -> Window<M::State> {
    let end = stuck.furthest;
    let prefix = by_call(ops, (0..ops.len()).filter(|&i| ops[i].call <= end));
    let mut best = Window {
        ops: prefix.clone(),
        from_any_state: false,
        stuck,
    };
    let Some(any) = model.any_state() else {
        return best;
    };
    let limits = Limits {
        steps: Some(WINDOW_STEPS),
        ..*limits
    };
    let window_from = |first: usize| prefix[first..].to_vec();
    let Some(stuck) = fails(model, ops, &prefix, end, any.clone(), &limits) else {
        return best;
    };
    best = Window {
        ops: prefix.clone(),
        from_any_state: true,
        stuck,
    };
    let (mut lo, mut hi) = (0, prefix.len() - 1);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        let window = window_from(mid);
        match fails(model, ops, &window, end, any.clone(), &limits) {
            Some(stuck) => {
                lo = mid;
                best = Window {
                    ops: window,
                    from_any_state: true,
                    stuck,
                };
            }
            None => hi = mid - 1,
        }
    }
    best
}

fn by_call<O>(ops: &[SearchOp<O>], chosen: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut v: Vec<usize> = chosen.collect();
    v.sort_by_key(|&i| ops[i].call);
    v
}

/// Searches the operations `chosen`, cut at history position `end` (operations still open then
/// are indefinite), from `init`; where it got stuck, in indices into `ops`, if it failed.
fn fails<M: Model>(
    model: &M,
    ops: &[SearchOp<M::Op>],
    chosen: &[usize],
    end: usize,
    init: M::State,
    limits: &Limits<'_>,
) -> Option<Stuck<M::State>> {
    let sub: Vec<SearchOp<M::Op>> = chosen
        .iter()
        .map(|&i| SearchOp {
            op: ops[i].op.clone(),
            call: ops[i].call,
            ret: ops[i].ret.filter(|&r| r <= end),
        })
        .collect();
    match search(model, &sub, init, limits) {
        Verdict::Violation(s) => Some(Stuck {
            linearized: s.linearized.iter().map(|&i| chosen[i]).collect(),
            state: s.state,
            blocked: chosen[s.blocked],
            furthest: s.furthest,
        }),
        Verdict::Linearizable | Verdict::Unknown(_) => None,
    }
}
