//! A holder's critical section: steps on the protected resource while it believes it holds
//! the lock, stopping early when its session state says so under the `on_disconnect` policy.

use std::io;

use super::recipe::Recipe;
use super::resource::Resource;
use super::LockConfig;
use crate::client::{OpError, Session};
use crate::workload::claims::Owned;
use crate::workload::rounds::Processes;

/// What a holder needs to work under the lock.
pub struct Holder<'a> {
    /// Hold time, steps, re-entry and the on-disconnect policy.
    pub cfg: &'a LockConfig,
    /// The recipe, for re-entry.
    pub recipe: &'a Recipe,
    /// The protected resource.
    pub resource: &'a Resource,
    /// The processes' request deadline and herd meter (re-entry requests are not reactions,
    /// so not counted).
    pub processes: &'a Processes,
}

/// How a critical section ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldEnd {
    /// Why the holder stopped holding early, if it did.
    pub lost: Option<String>,
    /// Whether it re-entered the lock during the hold.
    pub reentered: bool,
}

impl Holder<'_> {
    /// The critical section of `session`'s process holding `held`: enters the resource, does
    /// the configured steps (re-entering once when `reentrant`), and exits. Fails only if the
    /// history cannot be written.
    pub async fn hold(
        &self,
        session: &Session,
        held: &Owned,
        identity: &str,
    ) -> io::Result<HoldEnd> {
        let process = session.process;
        let cfg = self.cfg;
        self.resource
            .enter(process, held.token, session.node.clone())?;
        let think = cfg.hold.0 / cfg.steps;
        let mut states = session.client.state_watcher();
        let mut end = HoldEnd {
            lost: None,
            reentered: false,
        };
        for step in 0..cfg.steps {
            // A stale step (fencing) is counted by the resource; the holder goes on.
            let step_done = self.resource.step(process, think);
            if let Err(reason) = cfg.on_disconnect.unless_lost(&mut states, step_done).await {
                end.lost = Some(reason);
                break;
            }
            if cfg.reentrant && step == 0 {
                let mut req = self.processes.requests();
                match self
                    .recipe
                    .reenter(&session.client, identity, held, &mut req)
                    .await
                {
                    Ok(true) => end.reentered = true,
                    Ok(false) => {
                        end.lost = Some("re-entry found the lock taken by someone else".into());
                        break;
                    }
                    // A fact of lost state keeps its `lost:` form for the checker.
                    Err(e @ OpError::Lost(_)) => {
                        end.lost = Some(e.to_string());
                        break;
                    }
                    Err(e) => {
                        end.lost = Some(format!("re-entry: {e}"));
                        break;
                    }
                }
            }
        }
        self.resource.exit(process, end.lost.clone())?;
        Ok(end)
    }
}
