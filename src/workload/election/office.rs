//! The controller's record of who is in office: a candidate acting as leader marks its term
//! here, so terms are stamped by the history's single monotonic clock.
//!
//! `take` records the invocation of a `lead` operation of the leader's process (value: the
//! token, the czxid of the znode that made it leader); `leave` completes it, `ok` when the
//! leader resigned and `info` with the reason when it stopped because of its session. Both are
//! recorded under the record's own lock, so two recorded terms overlap exactly when two
//! candidates acted as leader at once.
//!
//! A [`Campaign`] records the wait before a term: a `campaign` operation invoked when the
//! candidate joins the line and completed `ok` with the token when it wins, or `info` / `fail`
//! with the error (`abandoned: …` when the run ended first), so the contention checker sees who
//! waited and for how long.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::client::{classify, OpError};
use crate::history::{Meta, OpType, Process, Recorder};

/// The function name of a term in office in the history.
pub const LEAD: &str = "lead";
/// The function name of a campaign (the wait for office) in the history.
pub const CAMPAIGN: &str = "campaign";

#[derive(Default)]
struct State {
    in_office: BTreeMap<u64, i64>,
    max_in_office: u64,
}

/// The record of terms of one run.
pub struct Office {
    recorder: Arc<Recorder>,
    state: Mutex<State>,
}

impl Office {
    /// A record writing terms into `recorder`.
    pub fn new(recorder: Arc<Recorder>) -> Office {
        Office {
            recorder,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `process` takes office, made leader by the znode created at zxid `token`.
    pub fn take(&self, process: u64, token: i64, node: Option<String>) -> io::Result<()> {
        let mut s = self.state();
        let meta = Meta {
            node,
            zxid: Some(token),
            ..Meta::default()
        };
        self.recorder.record(
            OpType::Invoke,
            Process::Client(process),
            LEAD,
            json!({ "token": token }),
            meta,
        )?;
        s.in_office.insert(process, token);
        s.max_in_office = s.max_in_office.max(s.in_office.len() as u64);
        Ok(())
    }

    /// `process` leaves office: it resigned (`lost` is `None`) or its session says it may no
    /// longer lead (recorded as `info` with that reason).
    pub fn leave(&self, process: u64, lost: Option<String>) -> io::Result<()> {
        let mut s = self.state();
        let token = s.in_office.remove(&process);
        let kind = match lost {
            Some(_) => OpType::Info,
            None => OpType::Ok,
        };
        let meta = Meta {
            error: lost,
            ..Meta::default()
        };
        self.recorder.record(
            kind,
            Process::Client(process),
            LEAD,
            json!({ "token": token }),
            meta,
        )?;
        Ok(())
    }

    /// Records a fact of lost state `process` learned while doing `f` (`resign`, which is not
    /// otherwise recorded): an invocation and a `fail` whose error is the fact (`lost: …`),
    /// for `checker::lost` to judge.
    pub fn lost(
        &self,
        process: u64,
        f: &str,
        fact: String,
        node: Option<String>,
    ) -> io::Result<()> {
        let invoke = Meta {
            node,
            ..Meta::default()
        };
        let failed = Meta {
            error: Some(fact),
            ..invoke.clone()
        };
        let process = Process::Client(process);
        let value = serde_json::Value::Null;
        self.recorder
            .record(OpType::Invoke, process, f, value.clone(), invoke)?;
        self.recorder
            .record(OpType::Fail, process, f, value, failed)?;
        Ok(())
    }

    /// The most leaders in office at once so far (above 1 means the election failed).
    pub fn max_in_office(&self) -> u64 {
        self.state().max_in_office
    }
}

/// One campaign of a candidate, on the record from the moment it joins the line.
pub struct Campaign<'a> {
    recorder: &'a Recorder,
    process: Process,
    node: Option<String>,
}

impl<'a> Campaign<'a> {
    /// Records that `process`, connected to `node`, begins a campaign.
    pub fn begin(office: &'a Office, process: u64, node: Option<String>) -> io::Result<Self> {
        let campaign = Campaign {
            recorder: &office.recorder,
            process: Process::Client(process),
            node,
        };
        campaign.record(OpType::Invoke, serde_json::Value::Null, Meta::default())?;
        Ok(campaign)
    }

    fn record(&self, kind: OpType, value: serde_json::Value, meta: Meta) -> io::Result<()> {
        let meta = Meta {
            node: self.node.clone(),
            ..meta
        };
        self.recorder
            .record(kind, self.process, CAMPAIGN, value, meta)?;
        Ok(())
    }

    /// The campaign was won by the znode created at zxid `token`.
    pub fn won(self, token: i64) -> io::Result<()> {
        let meta = Meta {
            zxid: Some(token),
            ..Meta::default()
        };
        self.record(OpType::Ok, json!({ "token": token }), meta)
    }

    /// The campaign ended in `e`: `fail` when the answer proves it did nothing (a `lost: …`
    /// fact among them), `info` otherwise.
    pub fn failed(self, e: &OpError) -> io::Result<()> {
        let meta = Meta {
            error: Some(e.to_string()),
            ..Meta::default()
        };
        self.record(classify(e), serde_json::Value::Null, meta)
    }

    /// The run ended while the candidate waited.
    pub fn abandoned(self) -> io::Result<()> {
        let error = "abandoned: the run ended while campaigning".to_string();
        let meta = Meta {
            error: Some(error),
            ..Meta::default()
        };
        self.record(OpType::Info, serde_json::Value::Null, meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_recorded_as_lead_operations() {
        let recorder = Arc::new(Recorder::in_memory());
        let office = Office::new(recorder.clone());
        office.take(1, 10, Some("n1".into())).unwrap();
        office.take(2, 12, None).unwrap();
        office.leave(1, Some("disconnected".into())).unwrap();
        office.leave(2, None).unwrap();
        assert_eq!(office.max_in_office(), 2);
        let ops = recorder.ops();
        let kinds: Vec<OpType> = ops.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [OpType::Invoke, OpType::Invoke, OpType::Info, OpType::Ok]
        );
        assert!(ops.iter().all(|o| o.f == LEAD));
        assert_eq!(ops[2].value, json!({ "token": 10 }));
        assert_eq!(ops[2].error.as_deref(), Some("disconnected"));
        assert_eq!(ops[0].zxid, Some(10));
    }

    #[test]
    fn campaigns_are_recorded_from_joining_the_line_to_winning_or_failing() {
        let recorder = Arc::new(Recorder::in_memory());
        let office = Office::new(recorder.clone());
        Campaign::begin(&office, 1, Some("n2".into()))
            .unwrap()
            .won(42)
            .unwrap();
        let lost = OpError::Lost("the election node is gone".into());
        Campaign::begin(&office, 2, None)
            .unwrap()
            .failed(&lost)
            .unwrap();
        let deadline = OpError::Deadline(std::time::Duration::from_secs(1));
        let c = Campaign::begin(&office, 3, None).unwrap();
        c.failed(&deadline).unwrap();
        Campaign::begin(&office, 4, None)
            .unwrap()
            .abandoned()
            .unwrap();
        let ops = recorder.ops();
        assert!(ops.iter().all(|o| o.f == CAMPAIGN));
        let done: Vec<_> = ops.iter().filter(|o| o.kind != OpType::Invoke).collect();
        let kinds: Vec<OpType> = done.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [OpType::Ok, OpType::Fail, OpType::Info, OpType::Info]
        );
        assert_eq!(done[0].value, json!({ "token": 42 }));
        assert_eq!(
            (done[0].zxid, done[0].node.as_deref()),
            (Some(42), Some("n2"))
        );
        let errors: Vec<_> = done
            .iter()
            .map(|o| o.error.clone().unwrap_or_default())
            .collect();
        assert!(errors[1].starts_with("lost: "), "{errors:?}");
        assert!(errors[2].starts_with("timeout"), "{errors:?}");
        assert!(errors[3].starts_with("abandoned"), "{errors:?}");
    }
}
