//! Runs the contenders of a lock workload: each process slot loops acquire → hold (steps on
//! the protected resource) → release → pause until the time limit, one ZooKeeper session per
//! process, recording `acquire`, `hold` and `release` operations into the history.
//!
//! History conventions: `acquire` invoke value null, `ok` value = the fencing token (the lock
//! node's czxid, also in `zxid`); `hold` is the critical section as the resource saw it
//! (see [`super::resource`]); `release` invoke value null, `ok` when the lock node was
//! deleted, `info` when the outcome is unknown or the holder stopped holding because its
//! session was disconnected or expired (the lock is then released implicitly, some time after
//! the invocation). A process is retired after any `acquire` that did not end `ok` and after
//! any `release` that ended `info`, and its session closed.

use std::io;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Value};

use super::holder::Holder;
use super::recipe::Recipe;
use super::resource::Resource;
use super::{lock_latencies, LockConfig, LockLatencies, RecipeKind, ResourceStats};
use crate::client::classify;
use crate::generator::{ended, DriverRun, Next};
use crate::history::{Meta, OpType, Process, Recorder};
use crate::workload::rounds::{Rounds, Turn};
use crate::workload::HerdMeter;

/// What a lock run does: its settings, slots, time and servers.
pub type ContenderRun = DriverRun<LockConfig>;

/// What the contenders of a lock run did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LockOutcome {
    /// Acquisitions that ended `ok`.
    pub acquired: u64,
    /// Acquisitions that ended `fail`.
    pub acquire_failed: u64,
    /// Acquisitions that ended `info` (including waits abandoned at the end of the run).
    pub acquire_info: u64,
    /// Releases that ended `ok`.
    pub released: u64,
    /// Releases that ended `info` (unknown outcome, or the holder stopped holding).
    pub release_info: u64,
    /// Holds ended early because the session was disconnected or expired (by the
    /// `on_disconnect` policy) or a re-entry found the lock gone.
    pub lost_while_holding: u64,
    /// Successful re-entries (with `reentrant: true`).
    pub reentries: u64,
    /// Acquisitions per contender slot, in slot order.
    pub acquisitions_per_contender: Vec<u64>,
    /// Acquire and hand-off latencies.
    pub latency: LockLatencies,
    /// What the protected resource saw.
    pub resource: ResourceStats,
}

/// What one contender slot did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    acquired: u64,
    acquire_failed: u64,
    acquire_info: u64,
    released: u64,
    release_info: u64,
    lost_while_holding: u64,
    reentries: u64,
}

/// The contenders of a lock run, as [`rounds::drive`](crate::workload::rounds::drive) runs
/// them: the recipe, its settings, the history and the protected resource they share.
pub struct Contenders {
    recipe: Recipe,
    cfg: LockConfig,
    recorder: Arc<Recorder>,
    resource: Resource,
}

#[async_trait::async_trait]
impl Rounds for Contenders {
    type Config = LockConfig;
    type Tally = Tally;
    type Outcome = LockOutcome;
    const NAMES: (&'static str, &'static str) = ("contender", "recording a lock operation");

    fn start(run: &ContenderRun, recorder: Arc<Recorder>) -> anyhow::Result<Self> {
        run.cfg.validate().map_err(anyhow::Error::msg)?;
        Ok(Contenders {
            recipe: Recipe::new(run.cfg.recipe, &run.run_id)?,
            cfg: run.cfg.clone(),
            resource: Resource::new(recorder.clone(), run.cfg.fencing),
            recorder,
        })
    }

    /// The crate's own lock waits where the meter cannot see: it counts releases only.
    fn meter(&self) -> HerdMeter {
        match self.cfg.recipe {
            RecipeKind::Crate => HerdMeter::uncounted(),
            _ => HerdMeter::default(),
        }
    }

    fn dirs(&self) -> Vec<String> {
        self.recipe.dirs()
    }

    fn outcome(&self, per_slot: &[Tally]) -> LockOutcome {
        let sum = |f: fn(&Tally) -> u64| per_slot.iter().map(f).sum::<u64>();
        LockOutcome {
            acquired: sum(|t| t.acquired),
            acquire_failed: sum(|t| t.acquire_failed),
            acquire_info: sum(|t| t.acquire_info),
            released: sum(|t| t.released),
            release_info: sum(|t| t.release_info),
            lost_while_holding: sum(|t| t.lost_while_holding),
            reentries: sum(|t| t.reentries),
            acquisitions_per_contender: per_slot.iter().map(|t| t.acquired).collect(),
            latency: lock_latencies(&self.recorder.ops()),
            resource: self.resource.stats(),
        }
    }

    /// One acquire → hold → release round of `session`'s process.
    async fn round(&self, turn: Turn<'_, Tally>) -> io::Result<Next> {
        let (session, stop, tally) = (turn.session, turn.stop, turn.tally);
        let process = Process::Client(session.process);
        let meta = Meta {
            node: session.node.clone(),
            ..Meta::default()
        };
        let record = |kind, f: &str, value: Value, meta: Meta| {
            self.recorder.record(kind, process, f, value, meta)
        };
        let identity = session.process.to_string();
        record(OpType::Invoke, "acquire", Value::Null, meta.clone())?;
        let mut req = turn.processes.requests();
        let acquired = tokio::select! {
            biased;
            _ = ended(stop, turn.deadline) => None,
            r = self.recipe.acquire(&session.client, &identity, &mut req) => Some(r),
        };
        let held = match acquired {
            None => {
                let error = Some("abandoned: the run ended while waiting for the lock".into());
                record(OpType::Info, "acquire", Value::Null, Meta { error, ..meta })?;
                tally.acquire_info += 1;
                return Ok(Next::End);
            }
            Some(Err(e)) => {
                let kind = classify(&e);
                let error = Some(e.to_string());
                record(kind, "acquire", Value::Null, Meta { error, ..meta })?;
                match kind {
                    OpType::Fail => tally.acquire_failed += 1,
                    _ => tally.acquire_info += 1,
                }
                return Ok(Next::Retire);
            }
            Some(Ok(held)) => held,
        };
        let ok = Meta {
            zxid: Some(held.token),
            ..meta.clone()
        };
        record(OpType::Ok, "acquire", json!(held.token), ok)?;
        tally.acquired += 1;

        let holder = Holder {
            cfg: &self.cfg,
            recipe: &self.recipe,
            resource: &self.resource,
            processes: turn.processes,
        };
        let end = holder.hold(session, &held, &identity).await?;
        tally.reentries += u64::from(end.reentered);
        let lost = end.lost;
        record(OpType::Invoke, "release", Value::Null, meta.clone())?;
        if let Some(reason) = lost {
            tally.lost_while_holding += 1;
            tally.release_info += 1;
            let error = Some(reason);
            record(OpType::Info, "release", Value::Null, Meta { error, ..meta })?;
            return Ok(Next::Retire);
        }
        turn.processes.meter.released();
        let mut req = turn.processes.requests();
        match self.recipe.release(&session.client, &held, &mut req).await {
            Ok(()) => {
                record(OpType::Ok, "release", Value::Null, meta)?;
                tally.released += 1;
                Ok(Next::Again)
            }
            Err(e) => {
                let error = Some(e.to_string());
                record(OpType::Info, "release", Value::Null, Meta { error, ..meta })?;
                tally.release_info += 1;
                Ok(Next::Retire)
            }
        }
    }
}
