//! A recipe driver's process slot: one process at a time, each with a session of its own,
//! doing rounds until the run ends; a process that is retired, or whose session died, is
//! replaced by a new one.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::ended;
use crate::client::{ClientOptions, NodeEndpoint, ProcessIds, Session};
use futures::future::BoxFuture;

/// How a round of a slot's process ended.
pub enum Next {
    /// The round went through: pause, then the same process does the next one.
    Again,
    /// The process is retired: a new process, with a new session, does the next round.
    Retire,
    /// The slot is done.
    End,
}

/// Where a slot's processes connect, and how long they pause between rounds.
pub struct Slot<'a> {
    /// Hands out the processes' ids.
    pub ids: &'a ProcessIds,
    /// The ZooKeeper servers.
    pub endpoints: &'a [NodeEndpoint],
    /// How sessions are opened.
    pub options: &'a ClientOptions,
    /// The slot's number (which node a node-bound session uses).
    pub slot: usize,
    /// Pause after a round that went through.
    pub pause: Duration,
}

impl Slot<'_> {
    /// Runs `round` (handed the current process's session, `stop` and `state`) until
    /// `deadline` passes or `stop` is raised; `round` decides what a round in flight does
    /// then. Fails with the first error of `round`.
    pub async fn run<T: Send, E>(
        &self,
        deadline: Instant,
        mut stop: watch::Receiver<bool>,
        state: &mut T,
        mut round: impl for<'s> FnMut(
            &'s Session,
            &'s mut watch::Receiver<bool>,
            &'s mut T,
        ) -> BoxFuture<'s, Result<Next, E>>,
    ) -> Result<(), E> {
        let mut session: Option<Session> = None;
        while !*stop.borrow() && Instant::now() < deadline {
            if session.as_ref().is_some_and(Session::is_dead) {
                session = None;
            }
            let Some(current) = &session else {
                let end = ended(&mut stop, deadline);
                let opening =
                    Session::open_retrying(self.ids, self.endpoints, self.slot, self.options, end);
                match opening.await {
                    Some(opened) => session = Some(opened),
                    None => break,
                }
                continue;
            };
            match round(current, &mut stop, state).await? {
                Next::Again => tokio::select! {
                    _ = ended(&mut stop, deadline) => break,
                    _ = tokio::time::sleep(self.pause) => {}
                },
                Next::Retire => session = None,
                Next::End => break,
            }
        }
        Ok(())
    }
}
