//! The protected resource: kept by the controller, used by contenders while they believe they
//! hold the lock, and the exact record of when each critical section begins and ends.
//!
//! `enter` and `exit` are recorded as one `hold` operation of the holder's process (invoke at
//! the start of the critical section, completion at its end), stamped by the history's single
//! monotonic clock under the resource's own lock, so two recorded sections overlap exactly when
//! two contenders were inside at once. Each `step` is a read-modify-write of a counter with a
//! pause in between; a write that finds the counter changed since its read is a lost update.
//! With fencing, a step whose token is lower than the highest seen is rejected.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use crate::history::{Meta, OpType, Process, Recorder};

/// The function name of a critical section in the history.
pub const HOLD: &str = "hold";

/// What the resource saw over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ResourceStats {
    /// Critical sections entered.
    pub sections: u64,
    /// Steps applied.
    pub steps: u64,
    /// Steps rejected because their token was lower than the highest seen (fencing).
    pub stale_rejected: u64,
    /// Steps whose write found the counter changed since their read.
    pub lost_updates: u64,
    /// The most holders inside at once (above 1 means mutual exclusion failed).
    pub max_inside: u64,
}

#[derive(Debug, Clone, Copy)]
struct Section {
    token: i64,
    steps: u64,
    rejected: u64,
}

#[derive(Default)]
struct State {
    counter: i64,
    highest_token: Option<i64>,
    inside: BTreeMap<u64, Section>,
    stats: ResourceStats,
}

/// The protected resource of one run.
pub struct Resource {
    recorder: Arc<Recorder>,
    fencing: bool,
    state: Mutex<State>,
}

/// Why a step did not apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepRefused {
    /// Fencing: the token is lower than the highest the resource has seen.
    Stale,
}

impl Resource {
    /// A resource recording critical sections into `recorder`; with `fencing`, steps carrying
    /// a token lower than the highest seen are rejected.
    pub fn new(recorder: Arc<Recorder>, fencing: bool) -> Resource {
        Resource {
            recorder,
            fencing,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `process` begins a critical section under the lock it acquired with fencing `token`.
    pub fn enter(&self, process: u64, token: i64, node: Option<String>) -> io::Result<()> {
        let mut s = self.state();
        self.recorder.record(
            OpType::Invoke,
            Process::Client(process),
            HOLD,
            json!({ "token": token }),
            Meta {
                node,
                ..Meta::default()
            },
        )?;
        s.inside.insert(
            process,
            Section {
                token,
                steps: 0,
                rejected: 0,
            },
        );
        s.stats.sections += 1;
        s.stats.max_inside = s.stats.max_inside.max(s.inside.len() as u64);
        Ok(())
    }

    /// One read-modify-write step of `process` (which must be inside): reads the counter,
    /// waits `think`, and writes it plus one.
    pub async fn step(&self, process: u64, think: Duration) -> Result<(), StepRefused> {
        let (seen, token) = {
            let s = self.state();
            let token = s.inside.get(&process).map_or(i64::MIN, |x| x.token);
            (s.counter, token)
        };
        tokio::time::sleep(think).await;
        let mut s = self.state();
        if self.fencing && s.highest_token.is_some_and(|h| token < h) {
            s.stats.stale_rejected += 1;
            if let Some(section) = s.inside.get_mut(&process) {
                section.rejected += 1;
            }
            return Err(StepRefused::Stale);
        }
        s.highest_token = Some(s.highest_token.map_or(token, |h| h.max(token)));
        if s.counter != seen {
            s.stats.lost_updates += 1;
        }
        s.counter += 1;
        s.stats.steps += 1;
        if let Some(section) = s.inside.get_mut(&process) {
            section.steps += 1;
        }
        Ok(())
    }

    /// `process` ends its critical section: normally (`lost` is `None`), or because it learned
    /// it may have lost the lock (recorded as `info` with that reason).
    pub fn exit(&self, process: u64, lost: Option<String>) -> io::Result<()> {
        let mut s = self.state();
        let section = s.inside.remove(&process);
        let value = section.map_or(
            serde_json::Value::Null,
            |x| json!({ "token": x.token, "steps": x.steps, "rejected": x.rejected }),
        );
        let kind = if lost.is_some() {
            OpType::Info
        } else {
            OpType::Ok
        };
        let meta = Meta {
            error: lost,
            ..Meta::default()
        };
        self.recorder
            .record(kind, Process::Client(process), HOLD, value, meta)?;
        Ok(())
    }

    /// What the resource saw so far.
    pub fn stats(&self) -> ResourceStats {
        self.state().stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn records_sections_and_rejects_stale_tokens() {
        let recorder = Arc::new(Recorder::in_memory());
        let r = Resource::new(recorder.clone(), true);
        r.enter(1, 10, None).unwrap();
        r.step(1, Duration::ZERO).await.unwrap();
        // A second holder with a newer token overlaps the first: the old one is now stale.
        r.enter(2, 12, None).unwrap();
        r.step(2, Duration::ZERO).await.unwrap();
        assert_eq!(r.step(1, Duration::ZERO).await, Err(StepRefused::Stale));
        r.exit(1, Some("connection-loss".into())).unwrap();
        r.exit(2, None).unwrap();
        let s = r.stats();
        assert_eq!(
            (s.sections, s.steps, s.stale_rejected, s.max_inside),
            (2, 2, 1, 2)
        );
        let ops = recorder.ops();
        assert_eq!(ops.len(), 4);
        assert!(ops.iter().all(|o| o.f == HOLD));
        assert_eq!(ops[2].kind, OpType::Info);
        assert_eq!(
            ops[2].value,
            json!({ "token": 10, "steps": 1, "rejected": 1 })
        );
        assert_eq!(ops[3].kind, OpType::Ok);
    }

    #[tokio::test]
    async fn overlapping_steps_lose_updates_without_fencing() {
        let r = Arc::new(Resource::new(Arc::new(Recorder::in_memory()), false));
        r.enter(1, 5, None).unwrap();
        r.enter(2, 3, None).unwrap();
        let (a, b) = tokio::join!(
            r.step(1, Duration::from_millis(20)),
            r.step(2, Duration::from_millis(20))
        );
        assert!(a.is_ok() && b.is_ok(), "no fencing: both apply");
        assert_eq!(r.stats().lost_updates, 1);
    }
}
