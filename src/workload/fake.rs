//! A workload that needs no server: one process records a write every 50 ms while the
//! target's nemesis schedule runs, and its history is valid when every write completed. For
//! the tests of the harness's own rules (schedule, heal, exposure, verdicts) on fake machines
//! under tokio's paused time.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Map, Value};

use super::{Judged, Ran, Workload};
use crate::checker::result::Validity;
use crate::generator::{self, GeneratorConfig, Target};
use crate::history::{Meta, Op, OpType, Process};

/// The fake workload, paced by `generator` (its time limit, quiet period and nemesis timing).
pub struct FakeWrites {
    /// The generator settings of its workload file.
    pub generator: GeneratorConfig,
}

/// What a run of the fake workload did, as `results.json` keeps it.
#[derive(Debug, serde::Serialize)]
struct Written {
    writes: u64,
}

/// The pace of the writes.
const EVERY: Duration = Duration::from_millis(50);

#[async_trait]
impl Workload for FakeWrites {
    fn settings(&self) -> Value {
        json!({})
    }

    async fn run(&self, target: Target) -> anyhow::Result<Ran> {
        let recorder = target.recorder.clone();
        let writes = |mut cancel: tokio::sync::watch::Receiver<bool>, run_for: Duration| async move {
            let end = tokio::time::Instant::now() + run_for;
            let mut written = 0u64;
            while tokio::time::Instant::now() < end && !*cancel.borrow_and_update() {
                let value = json!(written);
                recorder.record(
                    OpType::Invoke,
                    Process::Client(0),
                    "write",
                    value.clone(),
                    Meta::default(),
                )?;
                tokio::time::sleep(EVERY).await;
                recorder.record(
                    OpType::Ok,
                    Process::Client(0),
                    "write",
                    value,
                    Meta::default(),
                )?;
                written += 1;
            }
            anyhow::Ok(Written { writes: written })
        };
        let recorder = target.recorder.clone();
        let healed = generator::with_faults(
            &self.generator,
            target.faults,
            recorder,
            target.cancel,
            writes,
        )
        .await?;
        Ran::kept(healed, None)
    }

    fn judge(&self, ops: &[Op], _run: Option<Value>) -> anyhow::Result<Judged> {
        let writes = |kind: OpType| {
            ops.iter()
                .filter(|o| o.f == "write" && o.kind == kind)
                .count()
        };
        let (invoked, ok) = (writes(OpType::Invoke), writes(OpType::Ok));
        // Nothing is judged valid from an empty history.
        let valid = match (invoked == ok, ok) {
            (false, _) => Validity::Invalid,
            (true, 0) => Validity::Unknown,
            (true, _) => Validity::Valid,
        };
        Ok(Judged {
            valid,
            checks: Map::new(),
            marked: Vec::new(),
            line: format!("{ok} of {invoked} writes completed"),
        })
    }
}
