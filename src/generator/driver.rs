//! What the recipe drivers (locks, elections, barriers) share: the run they are handed, and how
//! `stampede test` starts one under the nemesis schedule.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::{with_faults, Faults, GeneratorConfig, Healed};
use crate::client::{ClientOptions, NodeEndpoint};
use crate::history::Recorder;

/// What a recipe driver runs: its settings, how many process slots, for how long, against
/// which servers.
#[derive(Debug, Clone)]
pub struct DriverRun<C> {
    /// The workload file's section of the recipe.
    pub cfg: C,
    /// How the processes open their sessions (the workload file's `session` section).
    pub options: ClientOptions,
    /// Process slots at once (the generator's concurrency), one session each.
    pub slots: usize,
    /// How long the slots keep going.
    pub time_limit: Duration,
    /// The test run's id: one znode name under `/stampede`.
    pub run_id: String,
    /// The ZooKeeper servers.
    pub endpoints: Vec<NodeEndpoint>,
}

/// Where a test's driver runs: the run's id, the servers, the faults to inject, the history,
/// and the caller's cancel signal (Ctrl-C).
pub struct Target {
    /// The test run's id: one znode name under `/stampede`.
    pub run_id: String,
    /// The seed of the workload's own random choices (keys, values, the operation mix).
    pub seed: u64,
    /// The ZooKeeper servers.
    pub endpoints: Vec<NodeEndpoint>,
    /// The faults: started and stopped in turn by the run's own schedule, or by one shared
    /// with workloads run together.
    pub faults: Faults,
    /// The history.
    pub recorder: Arc<Recorder>,
    /// Turns true when the caller stops the run early.
    pub cancel: watch::Receiver<bool>,
}

/// `stampede test` for a recipe driver: runs `driver` over `cfg` (with `gen.concurrency`
/// slots, their sessions opened as `options` says) while the nemesis schedule of `gen` starts
/// and stops the target's nemeses in turn for `gen.time_limit`, then heals every fault; with
/// faults, the driver goes on for `gen.quiet_period` after the heal. Cancelling ends the run
/// early; no fault is left active on return, and heals that failed are listed beside the
/// driver's summary.
pub async fn drive<C, S, F>(
    gen: &GeneratorConfig,
    cfg: &C,
    options: ClientOptions,
    target: Target,
    driver: impl FnOnce(DriverRun<C>, Arc<Recorder>, watch::Receiver<bool>) -> F,
) -> anyhow::Result<Healed<S>>
where
    C: Clone,
    F: Future<Output = anyhow::Result<S>>,
{
    gen.validate().map_err(anyhow::Error::msg)?;
    let Target {
        run_id,
        endpoints,
        faults,
        recorder,
        cancel,
        // The recipes' drivers draw nothing at random but their own timing.
        seed: _,
    } = target;
    let driving = recorder.clone();
    with_faults(gen, faults, recorder, cancel, |cancel, run_for| {
        let run = DriverRun {
            cfg: cfg.clone(),
            options,
            slots: gen.concurrency,
            time_limit: run_for,
            run_id,
            endpoints,
        };
        driver(run, driving, cancel)
    })
    .await
}
