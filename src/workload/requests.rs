//! The request helper every recipe's waits and requests go through: it applies the request
//! deadline, turns session events into errors, and feeds the herd meter.

use std::future::Future;
use std::time::Duration;

use zookeeper_client::{Error, EventType, OneshotWatcher, SessionState};

use super::HerdMeter;
use crate::client::OpError;

/// Sends one participant's requests within the request deadline and tells the herd meter about
/// the notifications it waits for and the requests it sends in reaction to them.
pub struct Requests<'a> {
    timeout: Duration,
    meter: &'a HerdMeter,
    reacting: bool,
}

impl<'a> Requests<'a> {
    /// Requests with deadline `timeout`, counted by `meter`.
    pub fn new(timeout: Duration, meter: &'a HerdMeter) -> Requests<'a> {
        Requests {
            timeout,
            meter,
            reacting: false,
        }
    }

    /// Awaits one request; no answer within the deadline is [`OpError::Deadline`].
    pub async fn send<T>(
        &mut self,
        request: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, OpError> {
        if self.reacting {
            self.meter.reacted();
        }
        match tokio::time::timeout(self.timeout, request).await {
            Ok(answer) => answer.map_err(OpError::Zk),
            Err(_) => Err(OpError::Deadline(self.timeout)),
        }
    }

    /// Waits for `watcher` to fire; a session event (expiry, closing) is the matching error.
    pub async fn wait(&mut self, watcher: OneshotWatcher) -> Result<(), OpError> {
        self.reacting = false;
        let event = watcher.changed().await;
        if event.event_type == EventType::Session {
            return Err(OpError::Zk(match event.session_state {
                SessionState::Expired => Error::SessionExpired,
                SessionState::AuthFailed => Error::AuthFailed,
                _ => Error::ClientClosed,
            }));
        }
        self.meter.notified();
        self.reacting = true;
        Ok(())
    }
}
