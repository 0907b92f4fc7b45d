//! Who holds the lock or leads while a test runs, for the partition target `holder`: read
//! from the history as it is recorded.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use crate::history::{Op, OpType, Recorder};
use crate::nemesis::HolderView;

/// Who holds the lock or leads, read from the history as it is recorded: the node of the
/// latest operation `op` (the workload's `hold` or `lead`) still open, for the partition
/// target `holder`.
pub struct HistoryHolder {
    recorder: OnceLock<Arc<Recorder>>,
    op: Option<&'static str>,
}

impl HistoryHolder {
    /// A view of the holders of a workload whose open `op` (`hold`, `lead`) names the node
    /// held on (`None`: the workload holds nothing); it sees the history once `watch` gives it.
    pub fn new(op: Option<&'static str>) -> HistoryHolder {
        HistoryHolder {
            recorder: OnceLock::new(),
            op,
        }
    }

    /// Starts reading the history `recorder` records.
    pub fn watch(&self, recorder: Arc<Recorder>) {
        let _ = self.recorder.set(recorder);
    }
}

impl HolderView for HistoryHolder {
    fn holder_node(&self) -> Option<String> {
        open_holder(&self.recorder.get()?.ops(), self.op?)
    }
}

/// The node of the latest invocation of `f` whose process has not completed it.
fn open_holder(ops: &[Op], f: &str) -> Option<String> {
    let mut open = HashMap::new();
    for op in ops.iter().filter(|op| op.f == f) {
        match op.kind {
            OpType::Invoke => _ = open.insert(op.process, op),
            _ => _ = open.remove(&op.process),
        }
    }
    open.into_values()
        .max_by_key(|op| op.index)
        .and_then(|op| op.node.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{testing, Process};

    fn op(index: u64, kind: OpType, process: u64, f: &str, node: &str) -> Op {
        testing::op(index, index, kind, Process::Client(process), f).on_node(node)
    }

    #[test]
    fn the_holder_is_the_latest_open_hold() {
        let ops = vec![
            op(0, OpType::Invoke, 1, "hold", "n1"),
            op(1, OpType::Ok, 1, "hold", "n1"),
            op(2, OpType::Invoke, 2, "acquire", "n3"),
            op(3, OpType::Invoke, 4, "hold", "n2"),
        ];
        assert_eq!(open_holder(&ops, "hold").as_deref(), Some("n2"));
        assert_eq!(
            open_holder(&ops[..2], "hold"),
            None,
            "nobody holds after the release"
        );
        let lead = vec![op(0, OpType::Invoke, 7, "lead", "n3")];
        assert_eq!(open_holder(&lead, "lead").as_deref(), Some("n3"));
        assert_eq!(
            open_holder(&lead, "hold"),
            None,
            "only the workload's own op counts"
        );
    }
}
