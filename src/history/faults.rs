//! When each fault was in effect, derived from the nemesis operations of a history: the one
//! interval sweep that checkers, plots and the timeline all read.
//!
//! The rule, per fault kind (`start-<kind>` / `stop-<kind>`; Jepsen's bare `start` / `stop`
//! are the kind `nemesis`):
//! - A fault is in effect from the completion (`ok` or `info`) of its start to the completion
//!   of the next stop of its kind.
//! - A start that failed (`fail`) is ignored.
//! - A start invoked but never completed may have taken effect at any moment after its
//!   invocation, even after a later stop ran, so it counts from its invocation to the end of
//!   the history.
//! - A fault never healed lasts to the end of the history; a stop with nothing in effect, and
//!   a further start while the fault is in effect, change nothing.
//! - Jepsen logs a nemesis call as two `info` entries (invocation, then completion) and no
//!   `invoke`. So a start or stop completion with no invocation of its own that directly
//!   follows (among its kind's entries) another such start or stop is the completion of that
//!   one: it moves the fault's beginning (or end) to itself. stampede records an `invoke`
//!   before every nemesis completion, so its histories never take this path.

use std::collections::HashMap;

use super::{Op, OpType, Process};

/// A stretch of the test during which one kind of fault was in effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultInterval {
    /// The fault kind, from `start-<kind>`: `partition`, `kill`, `pause`, `clock`, `packet`.
    pub kind: String,
    /// Nanoseconds since the start of the test at which the fault took effect.
    pub start: u64,
    /// When its start was invoked: the earliest it may have begun to act, since a start may
    /// take a while to complete (a restart of every server in turn, a sequence's steps).
    pub invoked: u64,
    /// Nanoseconds since the start at which it was healed (the end of the history if never).
    pub end: u64,
    /// Whether a stop healed it (otherwise it lasts to the end of the history).
    pub healed: bool,
}

/// The intervals during which each fault was in effect, ordered by start (then kind), by the
/// rule in the module's doc.
pub fn fault_intervals(ops: &[Op]) -> Vec<FaultInterval> {
    let end = ops.iter().map(|o| o.time).max().unwrap_or(0);
    let mut intervals = Vec::new();
    let mut kinds: HashMap<&str, KindState> = HashMap::new();
    for op in ops.iter().filter(|o| o.process == Process::NEMESIS) {
        let Some((call, kind)) = call_of(&op.f) else {
            continue;
        };
        kinds
            .entry(kind)
            .or_default()
            .step(call, op, kind, &mut intervals);
    }
    for (kind, state) in kinds {
        let active = state.active.into_iter();
        let invoked = state.invoked.into_iter().map(|at| (at, at));
        intervals.extend(active.chain(invoked).map(|(invoked, start)| FaultInterval {
            kind: kind.to_owned(),
            start,
            invoked,
            end,
            healed: false,
        }));
    }
    intervals.sort_by(|a, b| (a.start, &a.kind, a.end).cmp(&(b.start, &b.kind, b.end)));
    intervals
}

/// Whether a nemesis op starts or stops a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Start,
    Stop,
}

/// The call and fault kind of a nemesis op's function, if it is a start or a stop.
fn call_of(f: &str) -> Option<(Call, &str)> {
    if let Some(kind) = f.strip_prefix("start-") {
        Some((Call::Start, kind))
    } else if let Some(kind) = f.strip_prefix("stop-") {
        Some((Call::Stop, kind))
    } else {
        match f {
            "start" => Some((Call::Start, "nemesis")),
            "stop" => Some((Call::Stop, "nemesis")),
            _ => None,
        }
    }
}

/// What the sweep knows about one fault kind so far.
#[derive(Debug, Default)]
struct KindState {
    /// When the start of the fault in effect was invoked, and when it took effect.
    active: Option<(u64, u64)>,
    /// When a start not yet completed was invoked.
    invoked: Option<u64>,
    /// Whether a stop was invoked and not yet completed.
    stop_invoked: bool,
    /// The kind's previous entry, if it was a completion without an invocation of its own.
    lone: Option<Lone>,
}

/// A completion without an invocation of its own, which the next such entry may complete.
#[derive(Debug, Clone, Copy)]
enum Lone {
    /// A start; `opened` if it is what put the fault in effect.
    Start { opened: bool },
    /// A stop that healed the interval at this position.
    Stop(usize),
}

impl KindState {
    /// Takes one start or stop entry of this kind into account.
    fn step(&mut self, call: Call, op: &Op, kind: &str, intervals: &mut Vec<FaultInterval>) {
        let lone = self.lone.take();
        match (call, op.kind) {
            (Call::Start, OpType::Invoke) => self.invoked = Some(op.time),
            (Call::Start, OpType::Fail) => self.invoked = None,
            (Call::Start, _) => {
                if let Some(invoked) = self.invoked.take() {
                    self.active.get_or_insert((invoked, op.time));
                } else if let Some(Lone::Start { opened }) = lone {
                    if let (true, Some((invoked, _))) = (opened, self.active) {
                        self.active = Some((invoked, op.time));
                    }
                } else {
                    let opened = self.active.is_none();
                    self.active.get_or_insert((op.time, op.time));
                    self.lone = Some(Lone::Start { opened });
                }
            }
            (Call::Stop, OpType::Invoke) => self.stop_invoked = true,
            (Call::Stop, OpType::Fail) => self.stop_invoked = false,
            (Call::Stop, _) => {
                let invoked = std::mem::take(&mut self.stop_invoked);
                if let Some((began, start)) = self.active.take() {
                    if !invoked {
                        self.lone = Some(Lone::Stop(intervals.len()));
                    }
                    intervals.push(FaultInterval {
                        kind: kind.to_owned(),
                        start,
                        invoked: began,
                        end: op.time,
                        healed: true,
                    });
                } else if let (false, Some(Lone::Stop(i))) = (invoked, lone) {
                    intervals[i].end = op.time;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::history::testing::{indexed, op};

    fn summary(ops: &[Op]) -> Vec<(String, u64, u64)> {
        fault_intervals(ops)
            .into_iter()
            .map(|i| (i.kind, i.start, i.end))
            .collect()
    }

    #[test]
    fn active_from_start_completion_to_stop_completion() {
        let n = Process::NEMESIS;
        let ops = vec![
            op(0, 10, OpType::Invoke, n, "start-partition"),
            op(1, 20, OpType::Info, n, "start-partition"),
            op(2, 25, OpType::Invoke, Process::Client(1), "read"),
            op(3, 30, OpType::Invoke, n, "start-kill"),
            op(4, 35, OpType::Info, n, "start-kill"),
            op(5, 50, OpType::Invoke, n, "stop-partition"),
            op(6, 60, OpType::Info, n, "stop-partition"),
            op(7, 70, OpType::Invoke, n, "start-pause"),
            op(8, 75, OpType::Fail, n, "start-pause"),
            op(9, 80, OpType::Invoke, n, "start-clock"),
            op(10, 90, OpType::Ok, Process::Client(1), "read"),
        ];
        assert_eq!(
            summary(&ops),
            [
                ("partition".to_owned(), 20, 60),
                ("kill".to_owned(), 35, 90),
                ("clock".to_owned(), 80, 90),
            ]
        );
    }

    #[test]
    fn a_fault_may_act_from_its_starts_invocation() {
        use OpType::*;
        let n = Process::NEMESIS;
        // A start invoked at 15 and completed at 20 (servers restarted in turn take a while);
        // Jepsen's pair of infos, whose first is the invocation; a start never completed,
        // which may act from its invocation on.
        let restart = [call(20, "start-restart"), call(35, "stop-restart")];
        let kill = [40, 45].map(|t| op(0, t, Info, n, "start-kill"));
        let pause = op(0, 50, Invoke, n, "start-pause");
        let ops = indexed(restart.into_iter().flatten().chain(kill).chain([pause]));
        let faults: Vec<(String, u64, u64, u64)> = fault_intervals(&ops)
            .into_iter()
            .map(|f| (f.kind, f.invoked, f.start, f.end))
            .collect();
        assert_eq!(
            faults,
            [
                ("restart".to_owned(), 15, 20, 35),
                ("kill".to_owned(), 40, 45, 50),
                ("pause".to_owned(), 50, 50, 50),
            ]
        );
    }

    /// A nemesis call as stampede records it: invoked at `t - 5`, completed (`info`) at `t`.
    fn call(t: u64, f: &str) -> [Op; 2] {
        let n = Process::NEMESIS;
        [
            op(0, t - 5, OpType::Invoke, n, f),
            op(0, t, OpType::Info, n, f),
        ]
    }

    #[test]
    fn stop_without_start_and_repeated_start_are_harmless() {
        let calls = [
            call(10, "stop-packet"),
            call(20, "start-packet"),
            call(30, "start-packet"),
            call(40, "stop-packet"),
            // The heal at the end of a run stops every nemesis again.
            call(50, "stop-packet"),
        ];
        let ops = indexed(calls.into_iter().flatten());
        assert_eq!(summary(&ops), [("packet".to_owned(), 20, 40)]);
    }

    #[test]
    fn lone_completions_pair_up_as_jepsen_logs_them() {
        let n = Process::NEMESIS;
        // Jepsen logs no invocations: each start and stop is an info, then another info.
        let ops = indexed(
            [
                (10, "stop-packet"),
                (20, "start-packet"),
                (30, "start-packet"),
                (40, "stop-packet"),
                (50, "stop-packet"),
            ]
            .map(|(t, f)| op(0, t, OpType::Info, n, f)),
        );
        assert_eq!(summary(&ops), [("packet".to_owned(), 30, 50)]);
    }

    #[test]
    fn fault_intervals_pair_starts_and_stops_per_kind() {
        use OpType::*;
        let n = Process::NEMESIS;
        // Jepsen logs nemesis invocations as info too: repeated starts count at the last.
        let ops = vec![
            op(0, 10, Info, n, "start-kill"),
            op(1, 20, Info, n, "start-kill").with_value(json!("killed")),
            op(2, 25, Info, n, "start-pause"),
            op(3, 30, Info, n, "stop-kill"),
            op(4, 40, Info, n, "stop-kill").with_value(json!("restarted")),
            op(5, 50, Info, n, "start-kill"),
        ];
        let faults: Vec<(String, u64, Option<u64>)> = fault_intervals(&ops)
            .into_iter()
            .map(|f| (f.kind, f.start, f.healed.then_some(f.end)))
            .collect();
        assert_eq!(
            faults,
            vec![
                ("kill".to_string(), 20, Some(40)),
                ("pause".to_string(), 25, None),
                ("kill".to_string(), 50, None),
            ]
        );
    }

    #[test]
    fn a_start_never_completed_outlasts_a_later_stop() {
        use OpType::{Info, Invoke};
        let n = Process::NEMESIS;
        let ops = vec![
            op(0, 10, Invoke, n, "start-clock"),
            op(1, 20, Invoke, n, "stop-clock"),
            op(2, 30, Info, n, "stop-clock"),
            op(3, 40, Info, n, "start"),
            op(4, 50, Info, n, "stop"),
            op(5, 60, Invoke, Process::Client(0), "read"),
        ];
        assert_eq!(
            summary(&ops),
            [("clock".to_owned(), 10, 60), ("nemesis".to_owned(), 40, 50)]
        );
    }
}
