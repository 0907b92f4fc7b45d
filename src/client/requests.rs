//! A process's requests within the request deadline, and its waits for the watches it set,
//! counting the notifications it receives (recipe drivers: elections, queues).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use zookeeper_client::{Error, EventType, OneshotWatcher, SessionState};

use super::OpError;

/// Sends one process's requests within the request deadline and counts the watch
/// notifications it receives.
pub struct Requests<'a> {
    timeout: Duration,
    notifications: &'a AtomicU64,
}

impl<'a> Requests<'a> {
    /// Requests with deadline `timeout`; notifications are added to `notifications`.
    pub fn new(timeout: Duration, notifications: &'a AtomicU64) -> Requests<'a> {
        Requests {
            timeout,
            notifications,
        }
    }

    /// Awaits one request; no answer within the deadline is [`OpError::Deadline`].
    pub async fn send<T>(
        &mut self,
        request: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, OpError> {
        match tokio::time::timeout(self.timeout, request).await {
            Ok(answer) => answer.map_err(OpError::Zk),
            Err(_) => Err(OpError::Deadline(self.timeout)),
        }
    }

    /// Waits for `watcher` to fire; a session event (expiry, closing) is the matching error.
    pub async fn wait(&mut self, watcher: OneshotWatcher) -> Result<(), OpError> {
        let event = watcher.changed().await;
        if event.event_type == EventType::Session {
            return Err(OpError::Zk(match event.session_state {
                SessionState::Expired => Error::SessionExpired,
                SessionState::AuthFailed => Error::AuthFailed,
                _ => Error::ClientClosed,
            }));
        }
        self.notifications.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
