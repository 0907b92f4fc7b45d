//! The generator: runs a workload's processes while a nemesis schedule injects faults, then
//! heals everything. [`run`] paces the [`Operations`] of a workload whose processes issue one
//! operation at a time (the register, the counter) at a rate for a time limit, waits a quiet
//! period after the heal, and lets every process read back what it touched; [`drive`] runs a
//! recipe's own driver (locks, elections, barrier) under the same schedule, and
//! [`with_faults`] any other work (the queue). Whatever happens (time limit, Ctrl-C, an error,
//! the future being dropped) no fault is left active.

mod driver;
mod faults;
mod ops;
mod pace;
mod shared;
mod slot;
mod stop;
mod worker;

use std::sync::Arc;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::{setup_session, ClientOptions, NodeEndpoint, ProcessIds, Session};
use crate::config::Duration;
use crate::history::Recorder;
use crate::nemesis::Nemesis;

pub use driver::{drive, DriverRun, Target};
pub use ops::{Completion, OpSpec, Operations};
pub use pace::Pace;
pub use shared::{Faults, SharedSchedule};
use stop::Stop;
use worker::{Counts, Shared, Worker};

pub use slot::{Next, Slot};

/// Pacing and timing of a test (the `generator` section of a workload file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GeneratorConfig {
    /// Operations per second over all processes (an upper bound).
    pub rate: f64,
    /// Number of processes issuing operations at once.
    pub concurrency: usize,
    /// Length of the main phase.
    pub time_limit: Duration,
    /// Wait between healing every fault and the final reads.
    pub quiet_period: Duration,
    /// Wait before each fault starts.
    pub nemesis_interval: Duration,
    /// How long each fault stays active.
    pub nemesis_duration: Duration,
}

impl Default for GeneratorConfig {
    fn default() -> GeneratorConfig {
        let secs = |s| Duration(std::time::Duration::from_secs(s));
        GeneratorConfig {
            rate: 50.0,
            concurrency: 5,
            time_limit: secs(60),
            quiet_period: secs(5),
            nemesis_interval: secs(10),
            nemesis_duration: secs(10),
        }
    }
}

impl GeneratorConfig {
    /// Checks the values; the error names the field and what is wrong with it.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(format!(
                "generator.rate must be a number of operations per second above 0, not {}",
                self.rate
            ));
        }
        if self.concurrency == 0 {
            return Err("generator.concurrency must be at least 1".into());
        }
        if self.time_limit.0.is_zero() {
            return Err("generator.time_limit must be above 0".into());
        }
        if self.nemesis_interval.0.is_zero() || self.nemesis_duration.0.is_zero() {
            return Err(
                "generator.nemesis_interval and generator.nemesis_duration must be above 0".into(),
            );
        }
        Ok(())
    }

    /// An upper bound on the operations of the main phase: one per tick, plus a tick that
    /// may start as the time limit ends, per process.
    fn max_ops(&self) -> u64 {
        (self.rate * self.time_limit.0.as_secs_f64()).ceil() as u64 + self.concurrency as u64 + 1
    }
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunSummary {
    /// Process ids handed out (each a session).
    pub processes: u64,
    /// Client operations ended `ok`.
    pub ok: u64,
    /// Client operations ended `fail`.
    pub fail: u64,
    /// Client operations ended `info`.
    pub info: u64,
    /// Final operations that never ended `ok`.
    pub final_missed: u64,
    /// The caller cancelled the run (no quiet period, no final reads).
    pub cancelled: bool,
}

/// How a run under the nemesis schedule ended: what its processes did (`S`), and the faults
/// that could not be healed. A run's summary in `results.json` is the two in one object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Healed<S> {
    /// What the processes did.
    #[serde(flatten)]
    pub summary: S,
    /// Faults that could not be healed (run `stampede heal`).
    pub heal_failures: Vec<String>,
}

/// Runs `workload`'s operations against the servers of `target`, its processes opening
/// sessions as `options` says: creates its znodes, runs `cfg.concurrency` processes at
/// `cfg.rate` for `cfg.time_limit` while the target's nemeses are started and stopped in turn,
/// heals every fault, waits `cfg.quiet_period`, and does the workload's final operations.
/// Every operation goes through the target's recorder. The target's cancel signal (Ctrl-C)
/// stops issuing operations, heals, and returns. No fault is left active on return; heals that
/// failed are listed beside the summary.
pub async fn run(
    cfg: &GeneratorConfig,
    workload: Arc<dyn Operations>,
    options: ClientOptions,
    target: Target,
) -> anyhow::Result<Healed<RunSummary>> {
    let Target {
        endpoints,
        faults,
        recorder,
        cancel,
        ..
    } = target;
    cfg.validate().map_err(anyhow::Error::msg)?;
    anyhow::ensure!(!endpoints.is_empty(), "no ZooKeeper node to connect to");
    setup(
        workload.as_ref(),
        &endpoints,
        options.session_timeout,
        cfg.max_ops(),
    )
    .await?;

    let begun = faults.begin(&recorder).await;
    let shared = Arc::new(Shared::new(
        workload,
        recorder.clone(),
        endpoints,
        options,
        cfg.rate,
    ));
    let (abort_tx, abort_rx) = watch::channel(false);
    let stop = Stop::new(cancel, abort_rx);
    let own = begun.own_schedule();
    let (workers, nemesis) = main_phase(cfg, &shared, own, &abort_tx, stop.clone()).await;
    let heal_failures = begun.heal().await;
    let mut workers = workers.context("a client process failed")?;
    nemesis.context("recording a nemesis operation")?;

    let cancelled = stop.is_cancelled();
    if !cancelled {
        final_phase(
            &shared,
            &mut workers,
            cfg.quiet_period.0,
            stop.cancel_only(),
        )
        .await?;
    }
    let counts = workers
        .iter()
        .fold(Counts::default(), |sum, w| sum.plus(w.counts));
    let summary = RunSummary {
        processes: shared.ids.count(),
        ok: counts.ok,
        fail: counts.fail,
        info: counts.info,
        final_missed: workers.iter().map(|w| w.final_missed).sum(),
        cancelled,
    };
    Ok(Healed {
        summary,
        heal_failures,
    })
}

/// Runs the processes until the time limit (or `stop`) alongside the nemesis schedule.
/// Returns the workers, for the final phase, and how the schedule ended; an error in either
/// raises `abort` so the other side stops too.
async fn main_phase(
    cfg: &GeneratorConfig,
    shared: &Arc<Shared>,
    nemeses: &[Arc<dyn Nemesis>],
    abort: &watch::Sender<bool>,
    stop: Stop,
) -> (anyhow::Result<Vec<Worker>>, std::io::Result<()>) {
    let deadline = Instant::now() + cfg.time_limit.0;
    let mut tasks = JoinSet::new();
    for slot in 0..cfg.concurrency {
        let (shared, stop) = (shared.clone(), stop.clone());
        tasks.spawn(async move {
            let mut worker = Worker::new(slot);
            worker
                .run_main(&shared, deadline, stop)
                .await
                .map(|_| worker)
        });
    }
    let workers = async {
        let mut done = Vec::new();
        let mut first_error = None;
        while let Some(joined) = tasks.join_next().await {
            match joined
                .map_err(anyhow::Error::from)
                .and_then(|r| r.map_err(anyhow::Error::from))
            {
                Ok(worker) => done.push(worker),
                Err(e) => {
                    let _ = abort.send(true);
                    first_error.get_or_insert(e);
                }
            }
        }
        // The main phase is over: end the nemesis schedule too.
        let _ = abort.send(true);
        first_error.map_or(Ok(done), Err)
    };
    let pace = Pace::of_run(nemeses.len(), cfg);
    let (interval, duration) = (pace.interval, pace.duration);
    let schedule = async {
        let recorders = [shared.recorder.clone()];
        // No end: the final phase waits for the heal, so a late start only delays it.
        let r = faults::schedule(nemeses, &recorders, interval, duration, None, stop).await;
        if r.is_err() {
            let _ = abort.send(true);
        }
        r
    };
    tokio::join!(workers, schedule)
}

/// Runs `work` while the nemesis schedule of `cfg` starts and stops the nemeses of `faults` in
/// turn for `cfg.time_limit` (or a shared schedule does), then heals every fault; with faults,
/// `work` goes on for `cfg.quiet_period` after the heal (the healed tail, where liveness is
/// judged). `work` is handed the cancel signal and how long to run; its result comes back with
/// the heals that failed. For workloads whose drivers have phases of their own (the queue's
/// drain).
pub async fn with_faults<T, F>(
    cfg: &GeneratorConfig,
    faults: Faults,
    recorder: Arc<Recorder>,
    cancel: watch::Receiver<bool>,
    work: impl FnOnce(watch::Receiver<bool>, std::time::Duration) -> F,
) -> anyhow::Result<Healed<T>>
where
    F: std::future::Future<Output = anyhow::Result<T>>,
{
    let begun = faults.begin(&recorder).await;
    let (done_tx, mut done_rx) = watch::channel(false);
    let schedule_cancel = cancel.clone();
    let run_for = match begun.has_faults() {
        false => cfg.time_limit.0,
        true => cfg.time_limit.0 + cfg.quiet_period.0,
    };
    let working = async {
        let result = work(cancel, run_for).await;
        let _ = done_tx.send(true);
        result
    };
    let faults = async {
        let recorders = [recorder.clone()];
        let work_done = async {
            let _ = done_rx.wait_for(|done| *done).await;
        };
        let own = begun.own_schedule();
        let schedule = faults::schedule_for(own, &recorders, cfg, schedule_cancel, work_done).await;
        // Healed while the work goes on: the rest of the run is the healed tail.
        (schedule, begun.heal().await)
    };
    let (result, (schedule, heal_failures)) = tokio::join!(working, faults);
    let summary = result?;
    schedule.context("recording a nemesis operation")?;
    Ok(Healed {
        summary,
        heal_failures,
    })
}

/// Completes when a driver's run should end: `stop` raised or `deadline` passed.
pub async fn ended(stop: &mut watch::Receiver<bool>, deadline: Instant) {
    let raised = async {
        if stop.wait_for(|s| *s).await.is_err() {
            // The sender is gone without stopping: only the deadline ends the run.
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        _ = raised => {}
        _ = tokio::time::sleep_until(deadline) => {}
    }
}

/// Pause before a driver tries again to open a session that could not be opened.
const RECONNECT_DELAY: std::time::Duration = std::time::Duration::from_millis(250);

/// A session for a new process of a driver's `slot` (see [`Session::open`]), trying again
/// every 250 ms until one opens; `None` when the run ends first (`stop` raised or `deadline`
/// passed).
pub async fn open_session(
    ids: &ProcessIds,
    endpoints: &[NodeEndpoint],
    slot: usize,
    options: &ClientOptions,
    stop: &mut watch::Receiver<bool>,
    deadline: Instant,
) -> Option<Session> {
    loop {
        tokio::select! {
            _ = ended(stop, deadline) => return None,
            opened = Session::open(ids, endpoints, slot, options) => match opened {
                Ok(session) => return Some(session),
                Err(e) => tracing::debug!(slot, "cannot open a session: {e}"),
            },
        }
        tokio::select! {
            _ = ended(stop, deadline) => return None,
            _ = tokio::time::sleep(RECONNECT_DELAY) => {}
        }
    }
}

/// Creates the workload's znodes through a session to the whole ensemble.
async fn setup(
    workload: &dyn Operations,
    endpoints: &[NodeEndpoint],
    session_timeout: std::time::Duration,
    max_ops: u64,
) -> anyhow::Result<()> {
    let client = setup_session(endpoints, session_timeout).await?;
    workload
        .setup(&client, max_ops)
        .await
        .context("workload setup")
}

/// After the quiet period, every worker does its final operations, concurrently.
async fn final_phase(
    shared: &Arc<Shared>,
    workers: &mut Vec<Worker>,
    quiet: std::time::Duration,
    mut stop: Stop,
) -> anyhow::Result<()> {
    tokio::select! {
        _ = stop.wait() => return Ok(()),
        _ = tokio::time::sleep(quiet) => {}
    }
    let mut tasks = JoinSet::new();
    for mut worker in workers.drain(..) {
        let (shared, stop) = (shared.clone(), stop.clone());
        tasks.spawn(async move { worker.run_final(&shared, stop).await.map(|_| worker) });
    }
    while let Some(joined) = tasks.join_next().await {
        workers.push(joined?.context("recording a final operation")?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_are_named() {
        let cfg = GeneratorConfig {
            rate: 0.0,
            ..GeneratorConfig::default()
        };
        assert!(cfg.validate().unwrap_err().starts_with("generator.rate"));
        let cfg = GeneratorConfig {
            concurrency: 0,
            ..GeneratorConfig::default()
        };
        assert_eq!(
            cfg.validate().unwrap_err(),
            "generator.concurrency must be at least 1"
        );
        assert!(GeneratorConfig::default().validate().is_ok());
        let err =
            serde_yaml_ng::from_str::<GeneratorConfig>("rate: 5\ntime_limit: 60").unwrap_err();
        assert!(
            err.to_string().contains("time_limit: invalid duration"),
            "{err}"
        );
    }

    #[test]
    fn max_ops_bounds_the_ticks() {
        let cfg = GeneratorConfig {
            rate: 50.0,
            concurrency: 5,
            ..GeneratorConfig::default()
        };
        assert_eq!(cfg.max_ops(), 3000 + 5 + 1);
    }
}
