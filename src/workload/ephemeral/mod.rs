//! The ephemeral lifecycle workload: sessions create ephemeral (and ephemeral-sequential)
//! znodes, hold them, and end, closed by their client or cut off from the servers behind a
//! loopback proxy until they expire, while every server's view is polled through sessions
//! pinned to it ([`driver`]); judged for ephemerals lost while their session lived,
//! ephemerals that outlive their session past the session timeout and a stated slack, and
//! session ids used twice ([`check`]).

mod check;
mod driver;
mod poll;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{into_map, paced, Entry, Judged, Ran, Section, Settings, Workload};
use crate::config::Duration;
use crate::generator::{GeneratorConfig, Target};
use crate::history::Op;
use check::{check_ephemeral, Limits};

/// The registry's entry.
pub const ENTRY: Entry = Entry {
    name: "ephemeral",
    build: |file| Ok(Box::new(EphemeralWorkload(Settings::read(file)?))),
    sweeps_contenders: false,
};

/// Settings of the ephemeral workload (the `ephemeral` section of `workloads/ephemeral.yaml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EphemeralConfig {
    /// Ephemerals each session creates (every second one ephemeral-sequential).
    pub nodes: u32,
    /// How long a session holds its ephemerals before it ends.
    pub hold: Duration,
    /// Every `cut_every`-th session is cut off from the servers (every second such cut until
    /// it expires, the others for half the session timeout, which it must outlive); the others
    /// are closed by their client (0: none is cut).
    pub cut_every: u32,
    /// How often each server's view is polled.
    pub poll: Duration,
    /// What a server may take beyond the session timeout to remove the ephemerals of a
    /// session that ended.
    pub slack: Duration,
    /// The bound on the final polls, after the settle.
    pub settle: Duration,
}

impl Default for EphemeralConfig {
    fn default() -> EphemeralConfig {
        let ms = |ms| Duration(std::time::Duration::from_millis(ms));
        EphemeralConfig {
            nodes: 4,
            hold: ms(2000),
            cut_every: 3,
            poll: ms(500),
            slack: ms(5000),
            settle: ms(30_000),
        }
    }
}

impl Section for EphemeralConfig {
    fn check(&self, _generator: &GeneratorConfig) -> Result<(), String> {
        if self.nodes == 0 {
            return Err(
                "ephemeral.nodes must be above 0: sessions without ephemerals tell nothing".into(),
            );
        }
        for (field, value) in [("poll", self.poll), ("settle", self.settle)] {
            if value.0.is_zero() {
                return Err(format!("ephemeral.{field} must be above 0"));
            }
        }
        Ok(())
    }
}

/// The ephemeral workload of one workload file.
pub struct EphemeralWorkload(Settings<EphemeralConfig>);

impl EphemeralWorkload {
    fn limits(&self) -> Limits {
        Limits {
            session_timeout: self.0.session.session_timeout.0,
            slack: self.0.own.slack.0,
        }
    }
}

#[async_trait]
impl Workload for EphemeralWorkload {
    fn settings(&self) -> Value {
        self.0.own_json()
    }

    async fn run(&self, target: Target) -> anyhow::Result<Ran> {
        let options = self.0.session.client_options();
        let healed =
            crate::generator::drive(&self.0.generator, &self.0.own, options, target, driver::run)
                .await?;
        Ran::kept(healed, None)
    }

    /// No ephemeral lost while its session lived, none outliving its session's deadline, no
    /// session id used twice; a server not read after the settle leaves it unknown.
    fn judge(&self, ops: &[Op], run: Option<Value>) -> anyhow::Result<Judged> {
        let report = check_ephemeral(ops, self.limits());
        let settled = match report.unread.as_slice() {
            [] if report.settled => "every server read after the settle".to_string(),
            [] => "NO server read after the settle".to_string(),
            unread => format!("NOT read after the settle: {}", unread.join(", ")),
        };
        let line = format!(
            "ephemeral: {} sessions ({} closed, {} cut, {} told they expired), {} ephemerals, {} polls ({} failed, {} stale after sync), deadline session timeout + slack = {} ms, {settled}; {}",
            report.sessions,
            report.closed,
            report.cut,
            report.expired,
            report.created,
            report.polls,
            report.polls_failed,
            report.stale_polls.len(),
            report.deadline_ms,
            report.found.summary(),
        );
        Ok(Judged {
            valid: paced::verdict(report.valid, report.settled),
            marked: report.found.marked_ops(),
            checks: into_map(json!({ "ephemeral": report, "run": run })),
            line,
        })
    }
}
