//! Splits a history into independent parts and checks them in parallel.
//!
//! Linearizability is P-compositional: a history is linearizable if and only if each key's
//! part is. Parts (keys, then any partition the model declares) are searched by a few worker
//! threads that take the largest parts first; an invalid part is shrunk to a counterexample in
//! the same worker. Plain scoped threads suffice for one parallel loop over independent jobs.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use anyhow::anyhow;

use super::calls::Call;
use super::model::{Model, Prepared};
use super::parallel;
use super::result::{Counterexample, KeyResult, OpView, Validity};
use super::search::{search, Limit, Limits, MemoryBudget, SearchOp, Verdict};
use super::shrink::smallest_window;

/// How the parts of one history are checked.
#[derive(Debug, Clone, Copy)]
pub struct RunLimits {
    /// Give up (unknown) at this instant.
    pub deadline: Option<Instant>,
    /// Bytes all searches together may hold in their caches.
    pub memory: usize,
    /// Worker threads; 0 = one per core.
    pub threads: usize,
    /// Shrink invalid parts to a smallest failing window.
    pub shrink: bool,
}

/// One independent part of a history: a key, or a model-declared part of a key.
struct Part<'a, O> {
    key: &'a str,
    /// The searched operations, and for each the call it came from.
    ops: Vec<SearchOp<O>>,
    origin: Vec<usize>,
}

struct PartResult {
    valid: Validity,
    reason: Option<String>,
    counterexample: Option<Counterexample>,
}

/// Checks every key of `calls` against `model`; the verdict per key.
pub fn check_keys<M: Model>(
    model: &M,
    calls: &[Call<'_>],
    limits: &RunLimits,
) -> anyhow::Result<BTreeMap<String, KeyResult>> {
    let mut keys: HashMap<&str, KeyResult> = HashMap::new();
    let mut parts: HashMap<(&str, u64), Part<'_, M::Op>> = HashMap::new();
    for (i, call) in calls.iter().enumerate() {
        let key = call.invoke.key.as_deref().unwrap_or_default();
        keys.entry(key)
            .or_insert(KeyResult {
                valid: Validity::Valid,
                ops: 0,
                reason: None,
                counterexample: None,
            })
            .ops += 1;
        let prepared = model
            .prepare(call)
            .map_err(|e| anyhow!("op {}: {e}", call.invoke.index))?;
        let (op, ret) = match prepared {
            Prepared::Definite(op) => (op, call.complete_pos),
            Prepared::Indefinite(op) => (op, None),
            Prepared::Skip => continue,
        };
        let part = parts.entry((key, model.part(&op))).or_insert_with(|| Part {
            key,
            ops: Vec::new(),
            origin: Vec::new(),
        });
        part.ops.push(SearchOp {
            op,
            call: call.invoke_pos,
            ret,
        });
        part.origin.push(i);
    }
    let mut parts: Vec<Part<'_, M::Op>> = parts.into_values().collect();
    parts.sort_by_key(|p| (std::cmp::Reverse(p.ops.len()), p.key));
    for (part, result) in parts.iter().zip(run_parts(model, calls, &parts, limits)) {
        let key = keys.get_mut(part.key).expect("every part's key is listed");
        key.valid = key.valid.and(result.valid);
        if key.reason.is_none() {
            key.reason = result.reason;
        }
        if key.counterexample.is_none() {
            key.counterexample = result.counterexample;
        }
    }
    Ok(keys.into_iter().map(|(k, r)| (k.to_string(), r)).collect())
}

fn run_parts<M: Model>(
    model: &M,
    calls: &[Call<'_>],
    parts: &[Part<'_, M::Op>],
    limits: &RunLimits,
) -> Vec<PartResult> {
    let budget = MemoryBudget::new(limits.memory);
    let search_limits = Limits {
        deadline: limits.deadline,
        memory: &budget,
        steps: None,
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = if limits.threads == 0 {
        cores
    } else {
        limits.threads
    };
    parallel::map(parts, threads, |part| {
        check_part(model, calls, part, &search_limits, limits.shrink)
    })
}

/// The part without the indefinite operations no linearization needs ([`Model::needless`]).
fn without_needless<'a, M: Model>(model: &M, part: &Part<'a, M::Op>) -> Part<'a, M::Op> {
    let needless = model.needless(&part.ops);
    let kept = (0..part.ops.len()).filter(|&i| !needless[i]);
    Part {
        key: part.key,
        ops: kept.clone().map(|i| part.ops[i].clone()).collect(),
        origin: kept.map(|i| part.origin[i]).collect(),
    }
}

fn check_part<M: Model>(
    model: &M,
    calls: &[Call<'_>],
    part: &Part<'_, M::Op>,
    limits: &Limits<'_>,
    shrink: bool,
) -> PartResult {
    let part = &without_needless(model, part);
    let stuck = match search(model, &part.ops, model.init(), limits) {
        Verdict::Linearizable => {
            return PartResult {
                valid: Validity::Valid,
                reason: None,
                counterexample: None,
            }
        }
        Verdict::Unknown(limit) => {
            let reason = match limit {
                Limit::Time => "time limit hit before a verdict",
                Limit::Memory => "memory limit hit before a verdict",
                Limit::Steps => unreachable!("the whole part's search has no step budget"),
            };
            return PartResult {
                valid: Validity::Unknown,
                reason: Some(reason.to_string()),
                counterexample: None,
            };
        }
        Verdict::Violation(stuck) => stuck,
    };
    let view = |i: usize| OpView::of(&calls[part.origin[i]]);
    let (window, from_any_state, stuck) = if shrink {
        let w = smallest_window(model, &part.ops, stuck, limits);
        (w.ops, w.from_any_state, w.stuck)
    } else {
        let mut all: Vec<usize> = (0..part.ops.len()).collect();
        all.sort_by_key(|&i| part.ops[i].call);
        (all, false, stuck)
    };
    let counterexample = Counterexample {
        window: window.into_iter().map(view).collect(),
        from_any_state,
        linearized: stuck.linearized.iter().map(|&i| view(i)).collect(),
        state: serde_json::to_value(&stuck.state).unwrap_or(serde_json::Value::Null),
        blocked: view(stuck.blocked),
    };
    PartResult {
        valid: Validity::Invalid,
        reason: None,
        counterexample: Some(counterexample),
    }
}
