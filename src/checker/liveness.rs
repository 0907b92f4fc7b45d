//! Liveness after the faults: once every fault is healed and the sessions it broke have had
//! time to expire, a lock must keep changing hands and an election must keep a leader in
//! office. A lock left free while contenders wait for it, or an office left empty while
//! candidates campaign, for longer than `stuck_after`, is a contender stuck behind a missed
//! watch (or a lost wake-up of any kind), and is reported.
//!
//! Judging starts `settle` after the last heal (from the start of the history when there was
//! no fault): ephemeral nodes of sessions cut off by the fault may outlive the heal by up to a
//! session timeout, and a waiter behind one of them is not stuck. A run that ended before
//! `stuck_after` of judged time is not judged.

use std::time::Duration;

use serde::Serialize;

use crate::history::{fault_intervals, Op, OpType, Process};

/// When judging starts and how long a stall must last to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LivenessOptions {
    /// Time after the last heal before judging starts.
    pub settle: Duration,
    /// How long the lock may stay free with waiters (the office empty) before it is a stall.
    pub stuck_after: Duration,
}

impl LivenessOptions {
    /// The options for sessions of `session_timeout` whose requests time out after
    /// `op_timeout`: settle for a session timeout plus a request deadline, and call a stall
    /// that lasts a request deadline stuck.
    pub fn for_sessions(session_timeout: Duration, op_timeout: Duration) -> LivenessOptions {
        LivenessOptions {
            settle: session_timeout + op_timeout,
            stuck_after: op_timeout,
        }
    }
}

/// A stretch of the judged time with waiters and nobody holding (or nobody in office).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stall {
    /// When it began: nanoseconds since the start of the test.
    pub at_ns: u64,
    /// How long it lasted, in nanoseconds.
    pub duration_ns: u64,
    /// It lasted to the end of the history.
    pub open_ended: bool,
    /// The processes waiting when it began (contenders, candidates; empty for an election
    /// history that does not record campaigns).
    pub waiting: Vec<u64>,
    /// The nodes those processes were connected to.
    pub nodes: Vec<String>,
}

/// The verdict on a history's liveness.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LivenessReport {
    /// No stall found in the judged time (true when not judged).
    pub valid: bool,
    /// Whether enough of the history came after the heal to judge it.
    pub judged: bool,
    /// Why the history was not judged.
    pub not_judged: Option<String>,
    /// When judging started: nanoseconds since the start of the test.
    pub from_ns: u64,
    /// Milliseconds of judged time.
    pub judged_ms: u64,
    /// The stall threshold, in milliseconds.
    pub stuck_after_ms: u64,
    /// Every stall, by the time it began.
    pub stalls: Vec<Stall>,
    /// The longest wait for the lock that began or went on in the judged time, in
    /// milliseconds (locks only).
    pub longest_wait_ms: u64,
}

/// What the history is judged on: the busy intervals (holds, terms) and the waits.
struct Activity {
    busy: Vec<(u64, u64)>,
    waits: Vec<Wait>,
}

/// A process waiting from `begin` to `end`.
struct Wait {
    process: u64,
    node: Option<String>,
    begin: u64,
    end: u64,
}

/// Judges a lock history (`acquire` / `release` operations): stalls are stretches with at
/// least one `acquire` pending and nobody holding the lock (from an `acquire` ending `ok` to
/// the completion of the next `release` of that process).
pub fn check_lock(ops: &[Op], options: LivenessOptions) -> LivenessReport {
    let end = history_end(ops);
    let mut busy = Vec::new();
    let mut waits = Vec::new();
    // The hold each process is in: its index in `busy`, ended by its next release.
    let mut holding = std::collections::HashMap::new();
    for (invoke, completion) in calls(ops, &["acquire", "release"]) {
        let process = client(invoke.process);
        let finished = completion.map_or(end, |c| c.time);
        if invoke.f == "release" {
            if let Some(i) = holding.remove(&process) {
                let hold: &mut (u64, u64) = &mut busy[i];
                hold.1 = finished;
            }
            continue;
        }
        waits.push(wait(invoke, completion, end));
        if completion.is_some_and(|c| c.kind == OpType::Ok) {
            holding.insert(process, busy.len());
            busy.push((finished, end));
        }
    }
    judge(ops, Activity { busy, waits }, options)
}

/// Judges an election history (`lead` operations, one per term in office): stalls are
/// stretches with nobody in office while a candidate campaigns (a `campaign` pending). A
/// history that does not record campaigns (older runs) is judged as if the candidates
/// campaigned throughout, and its stalls name no one.
pub fn check_election(ops: &[Op], options: LivenessOptions) -> LivenessReport {
    let end = history_end(ops);
    let busy = calls(ops, &["lead"])
        .into_iter()
        .map(|(invoke, completion)| (invoke.time, completion.map_or(end, |c| c.time)))
        .collect();
    let campaigns = calls(ops, &["campaign"]);
    if !campaigns.is_empty() {
        let waits = campaigns
            .into_iter()
            .map(|(invoke, completion)| wait(invoke, completion, end))
            .collect();
        return judge(ops, Activity { busy, waits }, options);
    }
    let start = ops.first().map_or(0, |o| o.time);
    let waits = vec![Wait {
        process: 0,
        node: None,
        begin: start,
        end,
    }];
    let mut report = judge(ops, Activity { busy, waits }, options);
    for stall in &mut report.stalls {
        stall.waiting.clear();
        stall.nodes.clear();
    }
    report
}

/// The wait of the call `invoke` (until its completion, or the history's `end`).
fn wait(invoke: &Op, completion: Option<&Op>, end: u64) -> Wait {
    Wait {
        process: client(invoke.process),
        node: invoke.node.clone(),
        begin: invoke.time,
        end: completion.map_or(end, |c| c.time),
    }
}

fn history_end(ops: &[Op]) -> u64 {
    ops.iter().map(|o| o.time).max().unwrap_or(0)
}

fn client(process: Process) -> u64 {
    match process {
        Process::Client(p) => p,
        Process::Nemesis(_) => u64::MAX,
    }
}

/// The invocations of functions `fs` by client processes, each with its completion if any.
fn calls<'a>(ops: &'a [Op], fs: &[&str]) -> Vec<(&'a Op, Option<&'a Op>)> {
    let mut open: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    let mut calls: Vec<(&Op, Option<&Op>)> = Vec::new();
    for op in ops {
        let Process::Client(process) = op.process else {
            continue;
        };
        if !fs.contains(&op.f.as_str()) {
            continue;
        }
        match op.kind {
            OpType::Invoke => {
                open.insert(process, calls.len());
                calls.push((op, None));
            }
            _ => {
                if let Some(i) = open.remove(&process) {
                    calls[i].1 = Some(op);
                }
            }
        }
    }
    calls
}

/// Finds the stalls of `activity` in the judged time of `ops`.
fn judge(ops: &[Op], activity: Activity, options: LivenessOptions) -> LivenessReport {
    let end = history_end(ops);
    let faults = fault_intervals(ops);
    let from = match faults.iter().map(|f| f.end).max() {
        Some(healed) => healed + options.settle.as_nanos() as u64,
        None => ops.first().map_or(0, |o| o.time),
    };
    let stuck_after = options.stuck_after.as_nanos() as u64;
    let judged_ns = end.saturating_sub(from);
    let mut report = LivenessReport {
        valid: true,
        judged: judged_ns >= stuck_after,
        not_judged: None,
        from_ns: from,
        judged_ms: judged_ns / 1_000_000,
        stuck_after_ms: stuck_after / 1_000_000,
        stalls: Vec::new(),
        longest_wait_ms: 0,
    };
    if !report.judged {
        report.not_judged = Some(format!(
            "the history ends {} ms after the faults were healed and settled; liveness needs {} ms more",
            judged_ns / 1_000_000,
            stuck_after / 1_000_000
        ));
        return report;
    }
    report.longest_wait_ms = activity
        .waits
        .iter()
        .filter(|w| w.end > from)
        .map(|w| (w.end - w.begin.max(from)) / 1_000_000)
        .max()
        .unwrap_or(0);
    report.stalls = stalls(&activity, from, end)
        .into_iter()
        .filter(|s| s.duration_ns >= stuck_after)
        .collect();
    report.valid = report.stalls.is_empty();
    report
}

/// The maximal stretches within `[from, end]` with a wait open and no busy interval.
fn stalls(activity: &Activity, from: u64, end: u64) -> Vec<Stall> {
    // +1 / -1 events of waits and busy intervals, clipped to the judged time.
    let mut events: Vec<(u64, i64, i64)> = Vec::new();
    let clip = |b: u64, e: u64| (b.max(from), e.min(end));
    for w in &activity.waits {
        let (b, e) = clip(w.begin, w.end);
        if b < e {
            events.push((b, 1, 0));
            events.push((e, -1, 0));
        }
    }
    for &(b, e) in &activity.busy {
        let (b, e) = clip(b, e);
        if b < e {
            events.push((b, 0, 1));
            events.push((e, 0, -1));
        }
    }
    events.sort_unstable();
    let (mut waiting, mut busy) = (0i64, 0i64);
    let mut open: Option<u64> = None;
    let mut found = Vec::new();
    let mut i = 0;
    while i < events.len() {
        let t = events[i].0;
        while i < events.len() && events[i].0 == t {
            waiting += events[i].1;
            busy += events[i].2;
            i += 1;
        }
        let stalled = waiting > 0 && busy == 0;
        match (open, stalled) {
            (None, true) => open = Some(t),
            (Some(at), false) => {
                found.push(stall(activity, at, t, false));
                open = None;
            }
            _ => {}
        }
    }
    if let Some(at) = open {
        found.push(stall(activity, at, end, true));
    }
    found
}

fn stall(activity: &Activity, at: u64, until: u64, open_ended: bool) -> Stall {
    let waiting: Vec<&Wait> = activity
        .waits
        .iter()
        .filter(|w| w.begin <= at && w.end > at)
        .collect();
    let mut nodes: Vec<String> = waiting.iter().filter_map(|w| w.node.clone()).collect();
    nodes.sort();
    nodes.dedup();
    Stall {
        at_ns: at,
        duration_ns: until - at,
        open_ended,
        waiting: waiting.iter().map(|w| w.process).collect(),
        nodes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{testing, NemesisTag};

    const MS: u64 = 1_000_000;

    fn op(time_ms: u64, kind: OpType, process: Process, f: &str) -> Op {
        testing::op(0, time_ms * MS, kind, process, f).on_node("n1")
    }

    fn c(p: u64) -> Process {
        Process::Client(p)
    }

    fn options() -> LivenessOptions {
        LivenessOptions {
            settle: Duration::from_millis(1000),
            stuck_after: Duration::from_millis(500),
        }
    }

    /// Process 1 holds 0–100 ms, process 2 waits from 50 ms and gets the lock at `handoff`,
    /// holds 10 ms and releases; the history ends at `end`.
    fn handoff(handoff: u64, end: u64) -> Vec<Op> {
        use OpType::*;
        let mut ops = vec![
            op(0, Invoke, c(1), "acquire"),
            op(0, Ok, c(1), "acquire"),
            op(50, Invoke, c(2), "acquire"),
            op(100, Invoke, c(1), "release"),
            op(100, Ok, c(1), "release"),
            op(handoff, Ok, c(2), "acquire"),
            op(handoff + 5, Invoke, c(2), "release"),
            op(handoff + 10, Ok, c(2), "release"),
            op(end, Invoke, c(1), "acquire"),
            op(end, Ok, c(1), "acquire"),
        ];
        for (i, o) in ops.iter_mut().enumerate() {
            o.index = i as u64;
        }
        ops
    }

    #[test]
    fn a_prompt_handoff_is_live() {
        let report = check_lock(&handoff(102, 3000), options());
        assert!(report.judged && report.valid, "{report:?}");
        assert_eq!(report.stalls, []);
        assert_eq!(report.longest_wait_ms, 52);
    }

    #[test]
    fn a_free_lock_with_a_waiter_is_a_stall() {
        let report = check_lock(&handoff(1700, 3000), options());
        assert!(!report.valid, "{report:?}");
        assert_eq!(report.stalls.len(), 1);
        let stall = &report.stalls[0];
        assert_eq!((stall.at_ns, stall.duration_ns), (100 * MS, 1600 * MS));
        assert_eq!(stall.waiting, [2]);
        assert_eq!(stall.nodes, ["n1"]);
        assert!(!stall.open_ended);
    }

    #[test]
    fn a_waiter_never_served_stalls_to_the_end() {
        use OpType::*;
        let ops = vec![
            op(0, Invoke, c(1), "acquire"),
            op(0, Ok, c(1), "acquire"),
            op(10, Invoke, c(2), "acquire"),
            op(20, Invoke, c(1), "release"),
            op(20, Ok, c(1), "release"),
            op(2000, Info, c(2), "acquire"),
        ];
        let report = check_lock(&ops, options());
        assert_eq!(report.stalls.len(), 1, "{report:?}");
        assert_eq!(report.stalls[0].duration_ns, 1980 * MS);
    }

    #[test]
    fn stalls_before_the_heal_has_settled_are_not_judged() {
        use OpType::*;
        let nemesis = Process::Nemesis(NemesisTag::Nemesis);
        let mut ops = handoff(1700, 5000);
        ops.extend([
            op(0, Invoke, nemesis, "start-partition"),
            op(1, Ok, nemesis, "start-partition"),
            op(1500, Invoke, nemesis, "stop-partition"),
            op(1500, Ok, nemesis, "stop-partition"),
        ]);
        ops.sort_by_key(|o| o.time);
        let report = check_lock(&ops, options());
        assert!(report.judged && report.valid, "{report:?}");
        assert_eq!(report.from_ns, 2500 * MS);
        let short = check_lock(&ops[..ops.len() - 2], options());
        assert!(!short.judged && short.valid, "{short:?}");
        assert!(short.not_judged.unwrap().contains("liveness needs"));
    }

    #[test]
    fn an_empty_office_is_a_stall_and_terms_in_turn_are_live() {
        let terms = |gap: u64| [call(1, "lead", 0, 100), call(2, "lead", 100 + gap, 3000)].concat();
        let live = check_election(&terms(5), options());
        assert!(live.valid, "{live:?}");
        let stalled = check_election(&terms(900), options());
        assert_eq!(stalled.stalls.len(), 1, "{stalled:?}");
        assert_eq!(stalled.stalls[0].duration_ns, 900 * MS);
        assert!(stalled.stalls[0].waiting.is_empty());
    }

    /// `process` calls `f` from `from_ms` to `to_ms`, completing `ok`.
    fn call(process: u64, f: &str, from_ms: u64, to_ms: u64) -> Vec<Op> {
        let invoke = op(from_ms, OpType::Invoke, c(process), f);
        vec![invoke, op(to_ms, OpType::Ok, c(process), f)]
    }

    #[test]
    fn recorded_campaigns_name_the_waiting_candidates_and_an_office_nobody_wants_is_no_stall() {
        let terms = |campaign_from: u64| {
            [
                call(1, "campaign", 0, 0),
                call(1, "lead", 0, 100),
                call(2, "campaign", campaign_from, 1000),
                call(2, "lead", 1000, 3000),
            ]
            .concat()
        };
        let stalled = check_election(&terms(200), options());
        assert_eq!(stalled.stalls.len(), 1, "{stalled:?}");
        let stall = &stalled.stalls[0];
        assert_eq!((stall.at_ns, stall.duration_ns), (200 * MS, 800 * MS));
        assert_eq!(stall.waiting, [2]);
        assert_eq!(stall.nodes, ["n1"]);
        let unwanted = check_election(&terms(700), options());
        assert!(unwanted.valid, "2 campaigned 300 ms: {unwanted:?}");
    }
}
