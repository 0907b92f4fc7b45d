//! The queue workload as the registry runs it: producers and consumers under the nemesis
//! schedule, then the drain; judged by [`super::check`].

use anyhow::Context;
use async_trait::async_trait;
use serde_json::{json, Value};

use super::check::check_queue;
use super::contention::{self, judge_dequeues};
use super::QueueConfig;
use crate::checker::result::Validity;
use crate::generator::{GeneratorConfig, Target};
use crate::history::Op;
use crate::workload::{into_map, Entry, Judged, Ran, Section, Settings, Workload};

/// The registry's entry.
pub const ENTRY: Entry = Entry {
    name: "queue",
    build: |file| Ok(Box::new(QueueWorkload(Settings::read(file)?))),
    sweeps_contenders: false,
};

/// The queue workload of one workload file.
pub struct QueueWorkload(Settings<QueueConfig>);

impl Section for QueueConfig {
    fn check(&self, generator: &GeneratorConfig) -> Result<(), String> {
        self.validate(generator.concurrency)
    }
}

#[async_trait]
impl Workload for QueueWorkload {
    fn settings(&self) -> Value {
        self.0.own_json()
    }

    async fn run(&self, target: Target) -> anyhow::Result<Ran> {
        let options = self.0.session.client_options();
        let healed = super::driver::run(&self.0.generator, &self.0.own, options, target).await?;
        Ran::kept(healed, None)
    }

    /// Every acknowledged value dequeued exactly once, nothing dequeued that was not
    /// enqueued, FIFO order; a queue not drained leaves the verdict unknown. The consumers'
    /// queue positions and starved dequeues are reported beside (figures, no verdict).
    fn judge(&self, ops: &[Op], run: Option<Value>) -> anyhow::Result<Judged> {
        let queue = check_queue(ops).context("checking the queue")?;
        let (generator, own) = (&self.0.generator, &self.0.own);
        let consumers = generator.concurrency.saturating_sub(own.producers);
        let threshold = own.contention.starvation_threshold(consumers);
        let contention = judge_dequeues(ops, threshold);
        let remaining = match queue.drained {
            true => "drained".to_string(),
            false => format!(
                "NOT drained: {} acknowledged values remaining",
                queue.remaining.len()
            ),
        };
        let line = format!(
            "queue: {} enqueued ({} info), {} dequeued ({} info), {} lost, {} duplicated, {} phantom, {} reordered, {} possibly consumed, {remaining}; contention: {}",
            queue.enqueue_ok,
            queue.enqueue_info,
            queue.dequeue_ok,
            queue.dequeue_info,
            queue.lost.len(),
            queue.duplicated.len(),
            queue.phantom.len(),
            queue.reordered.len(),
            queue.possibly_consumed.len(),
            contention::line(&contention),
        );
        let valid = match (queue.valid, queue.drained) {
            (false, _) => Validity::Invalid,
            (true, false) => Validity::Unknown,
            (true, true) => Validity::Valid,
        };
        Ok(Judged {
            valid,
            marked: Vec::new(),
            checks: into_map(json!({ "queue": queue, "contention": contention, "run": run })),
            line,
        })
    }
}
