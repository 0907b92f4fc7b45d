//! One process slot: it owns the current process's session, issues operations at the shared
//! rate, records each one, and replaces its process after an `info`.

use std::collections::BTreeSet;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::stop::Stop;
use super::{OpSpec, Operations};
use crate::client::{classify, ClientOptions, NodeEndpoint, OpError, ProcessIds, Session};
use crate::history::{Meta, OpType, Process, Recorder};

/// Pause before trying again to open a session that could not be opened.
const RECONNECT_DELAY: Duration = Duration::from_millis(250);
/// Attempts at a final operation that ends `info` (each on a fresh process).
const FINAL_ATTEMPTS: u32 = 3;

/// What every worker shares.
pub struct Shared {
    /// The workload's operations.
    pub workload: Arc<dyn Operations>,
    /// Where operations are recorded.
    pub recorder: Arc<Recorder>,
    /// The nodes sessions are opened to.
    pub endpoints: Vec<NodeEndpoint>,
    /// Session and timeout settings.
    pub options: ClientOptions,
    /// Process ids, never reused.
    pub ids: ProcessIds,
    /// Paces the main phase: one tick per operation, shared by all workers.
    pub ticker: Mutex<Interval>,
}

impl Shared {
    /// State shared by the workers of one run, paced at `rate` operations per second.
    pub fn new(
        workload: Arc<dyn Operations>,
        recorder: Arc<Recorder>,
        endpoints: Vec<NodeEndpoint>,
        options: ClientOptions,
        rate: f64,
    ) -> Shared {
        let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Shared {
            workload,
            recorder,
            endpoints,
            options,
            ids: ProcessIds::default(),
            ticker: Mutex::new(ticker),
        }
    }
}

/// Operations a worker completed, by outcome.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Ended `ok`.
    pub ok: u64,
    /// Ended `fail`.
    pub fail: u64,
    /// Ended `info`.
    pub info: u64,
}

impl Counts {
    fn add(&mut self, kind: OpType) {
        match kind {
            OpType::Ok => self.ok += 1,
            OpType::Fail => self.fail += 1,
            _ => self.info += 1,
        }
    }

    /// Sums two counts.
    pub fn plus(self, other: Counts) -> Counts {
        Counts {
            ok: self.ok + other.ok,
            fail: self.fail + other.fail,
            info: self.info + other.info,
        }
    }
}

/// A process slot and what it did so far.
pub struct Worker {
    slot: usize,
    session: Option<Session>,
    /// Keys its processes touched, read again in the final phase.
    touched: BTreeSet<String>,
    /// Outcomes of its operations.
    pub counts: Counts,
    /// Final operations that did not end `ok`.
    pub final_missed: u64,
}

impl Worker {
    /// An idle worker for slot `slot` (its processes bind to node `slot % nodes`).
    pub fn new(slot: usize) -> Worker {
        Worker {
            slot,
            session: None,
            touched: BTreeSet::new(),
            counts: Counts::default(),
            final_missed: 0,
        }
    }

    /// The main phase: issues operations at the shared rate until `deadline`, `stop`, or the
    /// workload runs dry. Fails only if the history cannot be written.
    pub async fn run_main(
        &mut self,
        shared: &Shared,
        deadline: Instant,
        mut stop: Stop,
    ) -> io::Result<()> {
        loop {
            if stop.is_set() || Instant::now() >= deadline {
                return Ok(());
            }
            if !self.ensure_session(shared, deadline, &mut stop).await {
                return Ok(());
            }
            tokio::select! {
                biased;
                _ = stop.wait() => return Ok(()),
                _ = tokio::time::sleep_until(deadline) => return Ok(()),
                _ = async { shared.ticker.lock().await.tick().await } => {}
            }
            let process = match &self.session {
                // It expired while waiting for the tick: the tick is lost, nothing else.
                Some(session) if session.is_dead() => continue,
                Some(session) => session.process,
                None => unreachable!("session ensured"),
            };
            let Some(op) = shared.workload.next_op(process) else {
                tracing::warn!("the workload has no more operations");
                return Ok(());
            };
            self.execute(shared, &op).await?;
        }
    }

    /// The final phase: the workload's final operations over every key this slot touched,
    /// each retried on a fresh process if it ends `info`. Stops early on `stop`.
    pub async fn run_final(&mut self, shared: &Shared, mut stop: Stop) -> io::Result<()> {
        let ops = shared.workload.final_ops(&self.touched);
        for op in &ops {
            let mut done = false;
            for _ in 0..FINAL_ATTEMPTS {
                let connect_by = Instant::now() + 2 * shared.options.op_timeout;
                if stop.is_set() || !self.ensure_session(shared, connect_by, &mut stop).await {
                    break;
                }
                match self.execute(shared, op).await? {
                    OpType::Info => continue,
                    kind => {
                        done = kind == OpType::Ok;
                        break;
                    }
                }
            }
            if !done {
                tracing::warn!(key = ?op.key, "final {} did not succeed", op.f);
                self.final_missed += 1;
            }
        }
        Ok(())
    }

    /// Makes sure a live session exists, opening one for a fresh process if needed and
    /// retrying until `deadline`. Returns false if none could be opened in time or on `stop`.
    async fn ensure_session(
        &mut self,
        shared: &Shared,
        deadline: Instant,
        stop: &mut Stop,
    ) -> bool {
        if self.session.as_ref().is_some_and(Session::is_dead) {
            // Expired while idle: nothing was in flight, so no operation is affected, and
            // the next session is a new process.
            self.session = None;
        }
        while self.session.is_none() {
            let opening = Session::open(&shared.ids, &shared.endpoints, self.slot, &shared.options);
            let opened = tokio::select! {
                _ = stop.wait() => return false,
                _ = tokio::time::sleep_until(deadline) => return false,
                opened = opening => opened,
            };
            match opened {
                Ok(session) => self.session = Some(session),
                Err(e) => {
                    tracing::debug!(slot = self.slot, "cannot open a session: {e}");
                    let retry_at = Instant::now() + RECONNECT_DELAY;
                    if retry_at >= deadline {
                        return false;
                    }
                    tokio::select! {
                        _ = stop.wait() => return false,
                        _ = tokio::time::sleep_until(retry_at) => {}
                    }
                }
            }
        }
        true
    }

    /// Records `op`'s invocation, performs it on the current session within the operation
    /// deadline, records its completion, and retires the process after an `info`.
    async fn execute(&mut self, shared: &Shared, op: &OpSpec) -> io::Result<OpType> {
        let session = self.session.as_ref().expect("execute needs a session");
        let process = session.process;
        let meta = Meta {
            key: op.key.clone(),
            node: session.node.clone(),
            ..Meta::default()
        };
        let recorder = &shared.recorder;
        recorder.record(
            OpType::Invoke,
            Process::Client(process),
            op.f,
            op.value.clone(),
            meta.clone(),
        )?;
        let deadline = shared.options.op_timeout;
        let result =
            match tokio::time::timeout(deadline, shared.workload.invoke(&session.client, op)).await
            {
                Ok(Ok(done)) => Ok(done),
                Ok(Err(e)) => Err(OpError::Zk(e)),
                Err(_) => Err(OpError::Deadline(deadline)),
            };
        let kind = match &result {
            Ok(done) => {
                let meta = Meta {
                    version: done.version,
                    zxid: done.zxid,
                    ..meta
                };
                recorder.record(
                    OpType::Ok,
                    Process::Client(process),
                    op.f,
                    done.value.clone(),
                    meta,
                )?;
                OpType::Ok
            }
            Err(e) => {
                let kind = classify(e);
                let meta = Meta {
                    error: Some(e.to_string()),
                    ..meta
                };
                recorder.record(kind, Process::Client(process), op.f, op.value.clone(), meta)?;
                kind
            }
        };
        shared.workload.completed(process, op, &result);
        if let Some(key) = &op.key {
            self.touched.insert(key.clone());
        }
        self.counts.add(kind);
        if kind == OpType::Info {
            // The outcome is unknown: this process never issues again.
            self.session = None;
        }
        Ok(kind)
    }
}
