//! Runs the processes of a barrier workload: each process slot loops wait a moment → enter a
//! round → work → leave (→ pause or, staggered, now and then leave: a new process takes the
//! slot) until the time limit, one ZooKeeper session per process, recording `enter` and
//! `leave` operations into the history as they happen.
//!
//! History conventions: `enter` and `leave` carry the round number as value (invocation and
//! completion) and `round-<k>` as key; `ok` when the process passed that barrier, `info` when
//! it gave up: an error, no answer, or no passing within `wait_timeout` (the process is then
//! retired, its session closed, which removes its node), or the run ended while it waited
//! (error starting with [`ABANDONED`]). Which round a process enters is explained in the
//! module doc of [`super`].

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rand::Rng;
use serde::Serialize;
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::recipe::Recipe;
use super::BarrierConfig;
use crate::client::{setup_session, ClientOptions, NodeEndpoint, OpError, ProcessIds, Session};
use crate::generator::{ended, open_session, DriverRun};
use crate::history::{Meta, OpType, Process, Recorder, ABANDONED};
use crate::workload::{HerdMeter, HerdStats, Requests};

/// What a barrier run does: its settings, slots, time and servers.
pub type BarrierRun = DriverRun<BarrierConfig>;

/// What a barrier run did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BarrierRunSummary {
    /// Processes that must enter before the barrier opens.
    pub threshold: u64,
    /// Process ids handed out (each a session).
    pub processes: u64,
    /// Rounds somebody passed `enter` of.
    pub rounds_opened: u64,
    /// `enter` operations that ended `ok`.
    pub entered: u64,
    /// `enter` operations that ended `info` (including waits abandoned at the end of the run).
    pub enter_info: u64,
    /// `leave` operations that ended `ok`.
    pub left: u64,
    /// `leave` operations that ended `info` (likewise).
    pub leave_info: u64,
    /// Rounds each slot went all the way through, in slot order.
    pub rounds_per_slot: Vec<u64>,
    /// Watch notifications and reaction requests per round (client side): a round's window
    /// opens when its first process passes `enter`.
    pub herd: HerdStats,
    /// The caller stopped the run before the time limit.
    pub cancelled: bool,
}

/// What one process slot did.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    entered: u64,
    enter_info: u64,
    left: u64,
    leave_info: u64,
}

struct Shared {
    recipe: Recipe,
    cfg: BarrierConfig,
    options: ClientOptions,
    endpoints: Vec<NodeEndpoint>,
    recorder: Arc<Recorder>,
    /// The open round: the lowest round nobody has passed `enter` of.
    open: AtomicU64,
    meter: HerdMeter,
    ids: ProcessIds,
}

/// How a round of one process ended.
enum Round {
    /// Passed both barriers: go on to the next round with the same process.
    Passed,
    /// The process is retired: a new one (new session) takes the slot.
    Retire,
    /// The run ended.
    End,
}

/// Creates the barrier's znodes, then runs `run.slots` processes for `run.time_limit` (or
/// until `stop` turns true), recording into `recorder`. Fails if the setup session cannot be
/// opened or the history cannot be written.
pub async fn run_processes(
    run: BarrierRun,
    recorder: Arc<Recorder>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<BarrierRunSummary> {
    let threshold = run.cfg.threshold_for(run.slots);
    let recipe = Recipe::new(&run.run_id, threshold)?;
    drive(&run, recipe, recorder, stop).await
}

/// [`run_processes`] with the barrier `recipe`.
pub(super) async fn drive(
    run: &BarrierRun,
    recipe: Recipe,
    recorder: Arc<Recorder>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<BarrierRunSummary> {
    run.cfg.validate(run.slots).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(run.slots > 0, "a barrier run needs at least 1 process");
    anyhow::ensure!(!run.endpoints.is_empty(), "no ZooKeeper node to connect to");
    let options = run.options;
    let client = setup_session(&run.endpoints, options.session_timeout).await?;
    recipe
        .setup(&client)
        .await
        .with_context(|| format!("creating {}", recipe.dir()))?;
    drop(client);

    let shared = Arc::new(Shared {
        recipe,
        cfg: run.cfg.clone(),
        options,
        endpoints: run.endpoints.clone(),
        recorder,
        open: AtomicU64::new(0),
        meter: HerdMeter::default(),
        ids: ProcessIds::default(),
    });
    let deadline = Instant::now() + run.time_limit;
    let mut tasks = JoinSet::new();
    for slot in 0..run.slots {
        let (shared, stop) = (shared.clone(), stop.clone());
        tasks.spawn(async move { (slot, go_through(&shared, slot, deadline, stop).await) });
    }
    let mut per_slot = vec![Tally::default(); run.slots];
    while let Some(joined) = tasks.join_next().await {
        let (slot, done) = joined.context("a barrier process panicked")?;
        per_slot[slot] = done.context("recording a barrier operation")?;
    }
    let sum = |f: fn(&Tally) -> u64| per_slot.iter().map(f).sum::<u64>();
    Ok(BarrierRunSummary {
        threshold: run.cfg.threshold_for(run.slots) as u64,
        processes: shared.ids.count(),
        rounds_opened: shared.open.load(Ordering::Relaxed),
        entered: sum(|t| t.entered),
        enter_info: sum(|t| t.enter_info),
        left: sum(|t| t.left),
        leave_info: sum(|t| t.leave_info),
        rounds_per_slot: per_slot.iter().map(|t| t.left).collect(),
        herd: shared.meter.stats(),
        cancelled: *stop.borrow(),
    })
}

/// One process slot's loop, joining, pausing and leaving as the section's contention says;
/// fails only if the history cannot be written.
async fn go_through(
    shared: &Shared,
    slot: usize,
    deadline: Instant,
    mut stop: watch::Receiver<bool>,
) -> io::Result<Tally> {
    let mut tally = Tally::default();
    let contention = &shared.cfg.contention;
    if !contention.join(&mut stop, deadline).await {
        return Ok(tally);
    }
    let mut session: Option<Session> = None;
    // The slot's own next round (see the module doc of `super`).
    let mut next = 0;
    while !*stop.borrow() && Instant::now() < deadline {
        let Some(current) = session.as_ref().filter(|s| !s.is_dead()) else {
            let (ids, endpoints) = (&shared.ids, &shared.endpoints);
            session =
                open_session(ids, endpoints, slot, &shared.options, &mut stop, deadline).await;
            continue;
        };
        let round = next.max(shared.open.load(Ordering::SeqCst));
        match go_once(shared, current, round, deadline, &mut stop, &mut tally).await? {
            Round::Passed => {
                next = round + 1;
                // Staggered: a random pause, or leaving (a new process comes back).
                if contention
                    .after_round(shared.cfg.spread.0, &mut stop, deadline)
                    .await
                {
                    session = None;
                }
            }
            Round::Retire => {
                next = round;
                session = None;
            }
            Round::End => break,
        }
    }
    Ok(tally)
}

/// A random time from zero to `spread`.
fn up_to(spread: Duration) -> Duration {
    spread.mul_f64(rand::thread_rng().gen_range(0.0..=1.0))
}

/// One round of `session`'s process: wait a moment, enter, work, leave.
async fn go_once(
    shared: &Shared,
    session: &Session,
    round: u64,
    deadline: Instant,
    stop: &mut watch::Receiver<bool>,
    tally: &mut Tally,
) -> io::Result<Round> {
    tokio::select! {
        biased;
        _ = ended(stop, deadline) => return Ok(Round::End),
        _ = tokio::time::sleep(up_to(shared.cfg.spread.0)) => {}
    }
    let op = BarrierOp {
        shared,
        session,
        round,
    };
    let mut req = Requests::new(shared.options.op_timeout, &shared.meter);
    let entering = (shared.recipe).enter(&session.client, round, session.process, &mut req);
    match op.perform("enter", entering, deadline, stop).await? {
        Round::Passed => tally.entered += 1,
        other => {
            tally.enter_info += 1;
            return Ok(other);
        }
    }
    if shared.open.fetch_max(round + 1, Ordering::SeqCst) <= round {
        shared.meter.released();
    }
    // Work; when the run ends meanwhile, the leave below is abandoned at once.
    let work = shared.cfg.work.0 + up_to(shared.cfg.spread.0);
    tokio::select! {
        _ = ended(stop, deadline) => {}
        _ = tokio::time::sleep(work) => {}
    }
    let leaving = (shared.recipe).leave(&session.client, round, session.process, &mut req);
    let left = op.perform("leave", leaving, deadline, stop).await?;
    match left {
        Round::Passed => tally.left += 1,
        _ => tally.leave_info += 1,
    }
    Ok(left)
}

/// An `enter` or `leave` of one process in one round.
struct BarrierOp<'a> {
    shared: &'a Shared,
    session: &'a Session,
    round: u64,
}

impl BarrierOp<'_> {
    /// Records `f` invoked, awaits `passing` for at most the wait timeout (or until the run
    /// ends), and records how it ended: [`Round::Passed`] when it passed.
    async fn perform(
        &self,
        f: &str,
        passing: impl Future<Output = Result<(), OpError>>,
        deadline: Instant,
        stop: &mut watch::Receiver<bool>,
    ) -> io::Result<Round> {
        let record = |kind, error| {
            let meta = Meta {
                key: Some(format!("round-{}", self.round)),
                node: self.session.node.clone(),
                error,
                ..Meta::default()
            };
            let process = Process::Client(self.session.process);
            (self.shared.recorder).record(kind, process, f, json!(self.round), meta)
        };
        record(OpType::Invoke, None)?;
        let wait = self.shared.cfg.wait_timeout.0;
        let (kind, error, round) = tokio::select! {
            biased;
            _ = ended(stop, deadline) => {
                let error = format!("{ABANDONED}: the run ended while waiting at the barrier");
                (OpType::Info, Some(error), Round::End)
            }
            passed = tokio::time::timeout(wait, passing) => match passed {
                Ok(Ok(())) => (OpType::Ok, None, Round::Passed),
                Ok(Err(e)) => (OpType::Info, Some(e.to_string()), Round::Retire),
                Err(_) => {
                    let error = format!("timeout: not through the barrier within {} ms", wait.as_millis());
                    (OpType::Info, Some(error), Round::Retire)
                }
            },
        };
        record(kind, error)?;
        Ok(round)
    }
}
