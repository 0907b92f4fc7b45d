//! "At most one holder at any instant", the question a lock's critical sections and an
//! election's terms in office both answer: one overlap checker for both.
//!
//! A tenure runs from the invocation of its operation (`hold`, `lead`: the process entered)
//! to its completion (it left); a tenure never completed lasts to the end of the history.
//! Any two tenures of different processes that overlap are an [`Overlap`], reported with
//! both processes and tokens, when it began, how long it lasted and the faults in effect
//! then.

use std::collections::HashMap;

use serde::Serialize;

use crate::history::{fault_intervals, FaultInterval, Op, OpType, Process};

/// One tenure of the one place (a critical section, a term in office) as recorded.
#[derive(Debug, Clone)]
pub struct Tenure<'a> {
    /// The client process that held it.
    pub process: u64,
    /// The fencing token its invocation carried (`value.token`).
    pub token: Option<i64>,
    /// When it began: nanoseconds since the start of the test.
    pub begin: u64,
    /// When it ended (the end of the history if it never did).
    pub end: u64,
    /// The completion that ended it, if any.
    pub completion: Option<&'a Op>,
}

impl Tenure<'_> {
    /// Whether the holder left before the history ended.
    pub fn completed(&self) -> bool {
        self.completion.is_some()
    }
}

/// Two tenures that overlapped: two holders at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Overlap {
    /// The process that entered first.
    pub first: u64,
    /// Its fencing token.
    pub first_token: Option<i64>,
    /// The process that entered while the first was still inside.
    pub second: u64,
    /// Its fencing token.
    pub second_token: Option<i64>,
    /// When the overlap began: nanoseconds since the start of the test.
    pub at_ns: u64,
    /// How long both were inside, in nanoseconds (to the end of the history if one never
    /// left).
    pub duration_ns: u64,
    /// Whether neither tenure had ended when the overlap ended (the history ended first).
    pub open_ended: bool,
    /// The kinds of faults in effect at some point during the overlap.
    pub nemesis: Vec<String>,
}

/// How errors about malformed tenures read, e.g. `enters a critical section while inside
/// one` and `leaves a critical section it never entered`.
pub struct Wording {
    /// What a process does when it begins a tenure while in one.
    pub enters_twice: &'static str,
    /// What a process does when it ends a tenure it never began.
    pub leaves_unentered: &'static str,
}

/// The tenures of the client operations named `f` in `ops`, sorted by beginning (then
/// process). Errors (naming the op's index and `wording`)
/// when a tenure ends without having begun or begins while its process is inside one.
pub fn tenures<'a>(ops: &'a [Op], f: &str, wording: &Wording) -> anyhow::Result<Vec<Tenure<'a>>> {
    let history_end = ops.iter().map(|o| o.time).max().unwrap_or(0);
    let mut open: HashMap<u64, Tenure> = HashMap::new();
    let mut done = Vec::new();
    for op in ops.iter().filter(|o| o.f == f) {
        let Process::Client(process) = op.process else {
            continue;
        };
        if op.kind == OpType::Invoke {
            let tenure = Tenure {
                process,
                token: op.value.get("token").and_then(|t| t.as_i64()),
                begin: op.time,
                end: history_end,
                completion: None,
            };
            if open.insert(process, tenure).is_some() {
                anyhow::bail!(
                    "op {}: process {process} {}",
                    op.index,
                    wording.enters_twice
                );
            }
            continue;
        }
        let Some(mut tenure) = open.remove(&process) else {
            anyhow::bail!(
                "op {}: process {process} {}",
                op.index,
                wording.leaves_unentered
            );
        };
        tenure.end = op.time;
        tenure.completion = Some(op);
        done.push(tenure);
    }
    done.extend(open.into_values());
    done.sort_by_key(|t| (t.begin, t.process));
    Ok(done)
}

/// Every pair of overlapping tenures, by the time the overlap began, with the faults of
/// `ops` in effect during each. `tenures` must be sorted by beginning, as [`tenures`] are.
pub fn overlaps(tenures: &[Tenure], ops: &[Op]) -> Vec<Overlap> {
    let faults = fault_intervals(ops);
    let mut found = Vec::new();
    let mut inside: Vec<&Tenure> = Vec::new();
    for tenure in tenures {
        inside.retain(|other| other.end > tenure.begin || !other.completed());
        for other in &inside {
            let end = other.end.min(tenure.end);
            found.push(Overlap {
                first: other.process,
                first_token: other.token,
                second: tenure.process,
                second_token: tenure.token,
                at_ns: tenure.begin,
                duration_ns: end - tenure.begin,
                open_ended: !((other.completed() && other.end == end)
                    || (tenure.completed() && tenure.end == end)),
                nemesis: active_during(&faults, tenure.begin, end),
            });
        }
        inside.push(tenure);
    }
    found
}

/// The kinds of the faults that may have acted at some point in `[from, to]` (from their
/// start's invocation to their heal), without repeats.
fn active_during(faults: &[FaultInterval], from: u64, to: u64) -> Vec<String> {
    let mut kinds: Vec<String> = faults
        .iter()
        .filter(|f| f.invoked <= to && f.end >= from)
        .map(|f| f.kind.clone())
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
}
