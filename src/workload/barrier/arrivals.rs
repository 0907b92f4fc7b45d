//! What a barrier history shows of the contention: each process's place in the order of
//! arrival at `enter` of its round (its position: how many processes of the round had
//! invoked `enter` before it, 0 the first, `threshold − 1` the last to open the barrier; a
//! replacement that joins a round its predecessor entered counts that one too).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::history::{Op, OpType, Process};

/// The positions of a barrier run's arrivals.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Arrivals {
    /// Processes of the round already entered on arrival → how often.
    pub positions: BTreeMap<usize, u64>,
}

impl Arrivals {
    /// The verdict line's part: `positions 0:40 1:40 2:40 (processes of the round already
    /// entered)`.
    pub fn line(&self) -> String {
        format!(
            "positions {} (processes of the round already entered)",
            crate::workload::positions::seen(&self.positions)
        )
    }
}

/// The arrival positions of the `enter` invocations of `ops` (value: the round number).
pub fn arrivals(ops: &[Op]) -> Arrivals {
    let mut entered: HashMap<u64, BTreeSet<u64>> = HashMap::new();
    let mut report = Arrivals::default();
    for op in ops {
        let (Process::Client(process), "enter", OpType::Invoke) =
            (op.process, op.f.as_str(), op.kind)
        else {
            continue;
        };
        let Some(round) = op.value.as_u64() else {
            continue;
        };
        let round = entered.entry(round).or_default();
        let ahead = round.iter().filter(|p| **p != process).count();
        *report.positions.entry(ahead).or_default() += 1;
        round.insert(process);
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::testing::{complete, history, invoke};

    #[test]
    fn a_position_counts_the_processes_of_the_same_round_already_entered() {
        let ops = [
            invoke(1, "enter", "0"),           // first of round 0: 0
            invoke(2, "enter", "0"),           // 1
            complete(2, "info", "enter", "0"), // 2 gave up
            invoke(5, "enter", "0"),           // its replacement, behind 1 and 2: 2
            invoke(3, "enter", "1"),           // first of round 1: 0
            complete(1, "ok", "enter", "0"),
            invoke(1, "enter", "1"),     // behind 3: 1
            invoke(1, "leave", "1"),     // not an arrival at enter
            invoke(4, "enter", "\"x\""), // no round: ignored
        ];
        let r = arrivals(&history(&ops));
        assert_eq!(r.positions, BTreeMap::from([(0, 2), (1, 2), (2, 1)]));
        assert_eq!(
            r.line(),
            "positions 0:2 1:2 2:1 (processes of the round already entered)"
        );
        assert_eq!(
            arrivals(&[]).line(),
            "positions none (processes of the round already entered)"
        );
    }
}
