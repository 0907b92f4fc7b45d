//! Runs a queue workload: the first `producers` process slots enqueue unique values with a
//! pause between them, the others dequeue, one ZooKeeper session per process, until the time
//! limit; then, with every fault healed, the consumer slots drain the queue until they find
//! it empty or the drain timeout passes. Staggered (the section's `contention`), the slots of
//! the main phase join at random times and pause a random time between operations
//! (consumers too), and consumers now and then leave: the process closes its session and a
//! new one comes back after a while. The drain is not staggered.
//!
//! History conventions: `enqueue` invoke value = the value (unique in the run), completed
//! `ok` (the value's node was created; `zxid` its czxid), `fail` or `info`. `dequeue` invoke
//! value null, completed `ok` with the value taken; `fail` with error [`EMPTY`] when the
//! queue was found empty (after a sync), also when the run ended while the consumer waited
//! for a value; `info` when an answer was lost, with the value whose delete was in flight
//! (null if none was). A process is retired (its session closed) after any operation that
//! did not end `ok` or empty.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::check::{DEQUEUE, EMPTY, ENQUEUE};
use super::recipe::{Queue, Take};
use super::QueueConfig;
use crate::client::{classify, setup_session, ClientOptions, NodeEndpoint, ProcessIds, Session};
use crate::generator::{self, ended, GeneratorConfig, Healed, Next, Slot, Target};
use crate::history::{Meta, OpType, Process, Recorder};
use crate::workload::rounds::Contention;
use crate::workload::{HerdMeter, HerdStats, Requests};

/// What a queue run did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueRunSummary {
    /// Process ids handed out (each a session).
    pub processes: u64,
    /// Producer slots.
    pub producers: usize,
    /// Consumer slots.
    pub consumers: usize,
    /// Enqueues that ended `ok`.
    pub enqueued: u64,
    /// Enqueues that ended `fail`.
    pub enqueue_failed: u64,
    /// Enqueues that ended `info`.
    pub enqueue_info: u64,
    /// Dequeues that ended `ok` (a value taken), the drain's included.
    pub dequeued: u64,
    /// Dequeues that found the queue empty.
    pub dequeue_empty: u64,
    /// Dequeues that ended `fail` otherwise.
    pub dequeue_failed: u64,
    /// Dequeues that ended `info`.
    pub dequeue_info: u64,
    /// Values taken during the drain.
    pub drained: u64,
    /// Every drain consumer found the queue empty before the drain timeout.
    pub drain_emptied: bool,
    /// How long the drain took, in milliseconds.
    pub drain_ms: f64,
    /// Watch notifications delivered to waiting consumers and the requests they sent in
    /// reaction, per acknowledged enqueue (client side).
    pub herd: HerdStats,
    /// The caller stopped the run before the time limit (no drain then).
    pub cancelled: bool,
}

/// What one slot did in one phase.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    enqueued: u64,
    enqueue_failed: u64,
    enqueue_info: u64,
    dequeued: u64,
    dequeue_empty: u64,
    dequeue_failed: u64,
    dequeue_info: u64,
    /// The slot's last dequeue found the queue empty.
    emptied: bool,
}

impl Tally {
    /// The counts of `tallies` together; `emptied` when every one of them emptied.
    fn sum<'a>(tallies: impl IntoIterator<Item = &'a Tally>) -> Tally {
        let all = Tally {
            emptied: true,
            ..Tally::default()
        };
        tallies.into_iter().fold(all, |a, t| Tally {
            enqueued: a.enqueued + t.enqueued,
            enqueue_failed: a.enqueue_failed + t.enqueue_failed,
            enqueue_info: a.enqueue_info + t.enqueue_info,
            dequeued: a.dequeued + t.dequeued,
            dequeue_empty: a.dequeue_empty + t.dequeue_empty,
            dequeue_failed: a.dequeue_failed + t.dequeue_failed,
            dequeue_info: a.dequeue_info + t.dequeue_info,
            emptied: a.emptied && t.emptied,
        })
    }

    /// Counts an operation that ended `kind`.
    fn count(&mut self, f: &str, kind: OpType) {
        let counter = match (f, kind) {
            (ENQUEUE, OpType::Ok) => &mut self.enqueued,
            (ENQUEUE, OpType::Fail) => &mut self.enqueue_failed,
            (ENQUEUE, _) => &mut self.enqueue_info,
            (_, OpType::Ok) => &mut self.dequeued,
            (_, OpType::Fail) => &mut self.dequeue_failed,
            _ => &mut self.dequeue_info,
        };
        *counter += 1;
    }
}

/// What a slot does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Producer,
    Consumer,
}

/// The part of the run: the main phase (consumers wait for values), or the drain (consumers
/// stop at the first empty answer, and give up on whatever is in flight at the deadline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Main,
    Drain,
}

struct Shared {
    queue: Queue,
    cfg: QueueConfig,
    options: ClientOptions,
    endpoints: Vec<NodeEndpoint>,
    recorder: Arc<Recorder>,
    ids: ProcessIds,
    next_value: AtomicU64,
    meter: HerdMeter,
}

/// `stampede test` for the queue workload: creates the queue node, runs `cfg.producers`
/// producers and the rest of `gen.concurrency` slots as consumers (their sessions opened as
/// `options` says) for `gen.time_limit` while the generator's nemesis schedule starts and
/// stops the target's nemeses in turn, heals every fault, then drains the queue with the
/// consumer slots (for at most `cfg.drain_timeout`). The target's cancel signal (Ctrl-C) ends
/// the run early, without a drain; no fault is left active on return, and heals that failed
/// are listed beside the summary. Fails if the setup session cannot be opened or the history
/// cannot be written.
pub async fn run(
    gen: &GeneratorConfig,
    cfg: &QueueConfig,
    options: ClientOptions,
    target: Target,
) -> anyhow::Result<Healed<QueueRunSummary>> {
    gen.validate().map_err(anyhow::Error::msg)?;
    cfg.validate(gen.concurrency).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(
        !target.endpoints.is_empty(),
        "no ZooKeeper node to connect to"
    );
    let queue = Queue::new(&target.run_id)?;
    let client = setup_session(&target.endpoints, options.session_timeout).await?;
    queue
        .setup(&client)
        .await
        .with_context(|| format!("creating {}", queue.dir()))?;
    drop(client);

    let shared = Arc::new(Shared {
        queue,
        cfg: cfg.clone(),
        options,
        endpoints: target.endpoints,
        recorder: target.recorder.clone(),
        ids: ProcessIds::default(),
        next_value: AtomicU64::new(0),
        meter: HerdMeter::default(),
    });
    let slots: Vec<(usize, Role)> = (0..gen.concurrency)
        .map(|slot| match slot < cfg.producers {
            true => (slot, Role::Producer),
            false => (slot, Role::Consumer),
        })
        .collect();
    let main = |cancel, run_for| {
        let deadline = Instant::now() + run_for;
        phase(&shared, &slots, Phase::Main, deadline, cancel)
    };
    let cancel = target.cancel;
    let main = generator::with_faults(gen, target.faults, target.recorder, cancel.clone(), main);
    let Healed {
        summary: main_tallies,
        heal_failures,
    } = main.await?;
    let cancelled = *cancel.borrow();
    let drain_start = Instant::now();
    let drain_tallies = match cancelled {
        true => Vec::new(),
        false => {
            let consumers: Vec<(usize, Role)> = slots
                .iter()
                .copied()
                .filter(|&(_, role)| role == Role::Consumer)
                .collect();
            let drain_deadline = drain_start + cfg.drain_timeout.0;
            phase(&shared, &consumers, Phase::Drain, drain_deadline, cancel).await?
        }
    };
    let drain_ms = drain_start.elapsed().as_secs_f64() * 1000.0;
    let drained = Tally::sum(&drain_tallies);
    let total = Tally::sum(main_tallies.iter().chain(&drain_tallies));
    let summary = QueueRunSummary {
        processes: shared.ids.count(),
        producers: cfg.producers,
        consumers: gen.concurrency - cfg.producers,
        enqueued: total.enqueued,
        enqueue_failed: total.enqueue_failed,
        enqueue_info: total.enqueue_info,
        dequeued: total.dequeued,
        dequeue_empty: total.dequeue_empty,
        dequeue_failed: total.dequeue_failed,
        dequeue_info: total.dequeue_info,
        drained: drained.dequeued,
        drain_emptied: !cancelled && drained.emptied,
        drain_ms,
        herd: shared.meter.stats(),
        cancelled,
    };
    Ok(Healed {
        summary,
        heal_failures,
    })
}

/// Runs `slots` (slot number and role) in `phase` until `deadline` or `stop`; returns what
/// each did. Fails only if the history cannot be written.
async fn phase(
    shared: &Arc<Shared>,
    slots: &[(usize, Role)],
    phase: Phase,
    deadline: Instant,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<Vec<Tally>> {
    let mut tasks = JoinSet::new();
    for &(slot, role) in slots {
        let (shared, stop) = (shared.clone(), stop.clone());
        tasks.spawn(async move { run_slot(&shared, slot, role, phase, deadline, stop).await });
    }
    let mut tallies = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let tally = joined.context("a queue process panicked")?;
        tallies.push(tally.context("recording a queue operation")?);
    }
    Ok(tallies)
}

/// One slot's loop in `phase`; fails only if the history cannot be written. In the main
/// phase the slot joins, pauses and (a consumer) leaves as the queue's contention says.
async fn run_slot(
    shared: &Shared,
    slot: usize,
    role: Role,
    phase: Phase,
    deadline: Instant,
    mut stop: watch::Receiver<bool>,
) -> io::Result<Tally> {
    let mut tally = Tally::default();
    let pause = shared.cfg.pause.0;
    // Only consumers leave: the positions are theirs, and a producer's session is no place
    // in any line.
    let contention = &match role {
        Role::Producer => Contention {
            leave_percent: 0,
            ..shared.cfg.contention.clone()
        },
        Role::Consumer => shared.cfg.contention.clone(),
    };
    let staggered = phase == Phase::Main && contention.stagger;
    if staggered && !contention.join(&mut stop, deadline).await {
        return Ok(tally);
    }
    let slot = Slot {
        ids: &shared.ids,
        endpoints: &shared.endpoints,
        options: &shared.options,
        slot,
        pause: match role {
            Role::Producer => contention.slot_pause(pause),
            Role::Consumer => Duration::ZERO,
        },
    };
    let state = &mut (shared, &mut tally);
    slot.run(deadline, stop, state, |session, stop, (shared, tally)| {
        Box::pin(async move {
            let next = match role {
                Role::Producer => enqueue(shared, session, tally).await?,
                Role::Consumer => dequeue(shared, session, phase, deadline, stop, tally).await?,
            };
            if !staggered {
                return Ok::<Next, io::Error>(next);
            }
            Ok(contention.next_after(next, pause, stop, deadline).await)
        })
    })
    .await?;
    Ok(tally)
}

/// Records the operations of one process.
struct Ops<'a> {
    recorder: &'a Recorder,
    process: Process,
    node: Option<String>,
}

impl Ops<'_> {
    /// Records one entry of function `f`.
    fn record(
        &self,
        kind: OpType,
        f: &str,
        value: Value,
        error: Option<String>,
        zxid: Option<i64>,
    ) -> io::Result<()> {
        let meta = Meta {
            node: self.node.clone(),
            error,
            zxid,
            ..Meta::default()
        };
        self.recorder.record(kind, self.process, f, value, meta)?;
        Ok(())
    }
}

fn ops<'a>(shared: &'a Shared, session: &Session) -> Ops<'a> {
    Ops {
        recorder: &shared.recorder,
        process: Process::Client(session.process),
        node: session.node.clone(),
    }
}

/// One enqueue of a new value by `session`'s process. Runs to its end (at most the request
/// deadline), whatever the time.
async fn enqueue(shared: &Shared, session: &Session, tally: &mut Tally) -> io::Result<Next> {
    let ops = ops(shared, session);
    let value = shared.next_value.fetch_add(1, Ordering::Relaxed);
    ops.record(OpType::Invoke, ENQUEUE, json!(value), None, None)?;
    let mut req = Requests::new(shared.options.op_timeout, &shared.meter);
    match shared.queue.enqueue(&session.client, value, &mut req).await {
        Ok(czxid) => {
            ops.record(OpType::Ok, ENQUEUE, json!(value), None, Some(czxid))?;
            shared.meter.released();
            tally.count(ENQUEUE, OpType::Ok);
            Ok(Next::Again)
        }
        Err(e) => {
            let kind = classify(&e);
            ops.record(kind, ENQUEUE, json!(value), Some(e.to_string()), None)?;
            tally.count(ENQUEUE, kind);
            Ok(Next::Retire)
        }
    }
}

/// One dequeue by `session`'s process. In the main phase an empty queue is waited on until
/// a value arrives or the run ends (then the dequeue ends empty); in the drain an empty queue
/// ends the dequeue and the slot, and the drain deadline abandons the dequeue wherever it is.
async fn dequeue(
    shared: &Shared,
    session: &Session,
    phase: Phase,
    deadline: Instant,
    stop: &mut watch::Receiver<bool>,
    tally: &mut Tally,
) -> io::Result<Next> {
    let ops = ops(shared, session);
    ops.record(OpType::Invoke, DEQUEUE, Value::Null, None, None)?;
    let mut req = Requests::new(shared.options.op_timeout, &shared.meter);
    let mut trying = None;
    loop {
        let taking = shared.queue.take(&session.client, &mut trying, &mut req);
        let taken = match phase {
            Phase::Main => Some(taking.await),
            Phase::Drain => tokio::select! {
                biased;
                _ = ended(stop, deadline) => None,
                taken = taking => Some(taken),
            },
        };
        let watcher = match taken {
            Some(Ok(Take::Took(value))) => {
                ops.record(OpType::Ok, DEQUEUE, json!(value), None, None)?;
                tally.count(DEQUEUE, OpType::Ok);
                return Ok(Next::Again);
            }
            Some(Ok(Take::Empty(watcher))) => watcher,
            Some(Err(e)) => {
                let kind = classify(&e);
                let value = match kind {
                    OpType::Info => json!(trying),
                    _ => Value::Null,
                };
                ops.record(kind, DEQUEUE, value, Some(e.to_string()), None)?;
                tally.count(DEQUEUE, kind);
                return Ok(Next::Retire);
            }
            None => {
                let error = Some("abandoned: the drain ended".to_string());
                ops.record(OpType::Info, DEQUEUE, json!(trying), error, None)?;
                tally.count(DEQUEUE, OpType::Info);
                return Ok(Next::End);
            }
        };
        let woke = match phase {
            Phase::Main => tokio::select! {
                biased;
                _ = ended(stop, deadline) => None,
                woke = req.wait(watcher) => Some(woke),
            },
            Phase::Drain => None,
        };
        match woke {
            Some(Ok(())) => continue,
            Some(Err(e)) => {
                ops.record(
                    OpType::Info,
                    DEQUEUE,
                    Value::Null,
                    Some(e.to_string()),
                    None,
                )?;
                tally.count(DEQUEUE, OpType::Info);
                return Ok(Next::Retire);
            }
            None => {
                ops.record(OpType::Fail, DEQUEUE, Value::Null, Some(EMPTY.into()), None)?;
                tally.dequeue_empty += 1;
                tally.emptied = true;
                return Ok(Next::End);
            }
        }
    }
}
