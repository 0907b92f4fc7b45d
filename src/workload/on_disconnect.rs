//! When a lock holder or an elected leader must stop acting as one: the `on_disconnect`
//! policy of the lock and election workload files, read against its session's states.

use std::future::Future;

use serde::{Deserialize, Serialize};
use zookeeper_client::{SessionState, StateWatcher};

/// What a holder (or leader) does when its session is disconnected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnDisconnect {
    /// Stop acting as holder as soon as the session is disconnected.
    #[default]
    AssumeLost,
    /// Act as holder until told the session expired (the common mistake).
    Keep,
}

impl OnDisconnect {
    /// Whether a holder (or leader) whose session is in `state` must stop acting as one under
    /// this policy, and why.
    pub fn lost(self, state: SessionState) -> Option<String> {
        match (state, self) {
            (SessionState::Expired, _) => Some("session-expired".into()),
            (SessionState::Closed, _) => Some("session-closed".into()),
            (SessionState::AuthFailed, _) => Some("auth-failed".into()),
            (SessionState::Disconnected, OnDisconnect::AssumeLost) => Some("disconnected".into()),
            _ => None,
        }
    }

    /// Completes, with the reason, when the session's state makes a holder (or leader) stop
    /// under this policy.
    pub async fn session_lost(self, states: &mut StateWatcher) -> String {
        loop {
            if let Some(reason) = self.lost(states.changed().await) {
                return reason;
            }
        }
    }

    /// Does `work` as holder (or leader) on the session `states` watches: its output, or the
    /// reason the holder must stop (before it starts, or while it goes on) under this policy.
    pub async fn unless_lost<T>(
        self,
        states: &mut StateWatcher,
        work: impl Future<Output = T>,
    ) -> Result<T, String> {
        if let Some(reason) = self.lost(states.peek_state()) {
            return Err(reason);
        }
        tokio::select! {
            reason = self.session_lost(states) => Err(reason),
            done = work => Ok(done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_and_leaders_stop_by_their_policy() {
        use OnDisconnect::{AssumeLost, Keep};
        assert_eq!(
            AssumeLost.lost(SessionState::Disconnected).as_deref(),
            Some("disconnected")
        );
        assert_eq!(Keep.lost(SessionState::Disconnected), None);
        assert_eq!(
            Keep.lost(SessionState::Expired).as_deref(),
            Some("session-expired")
        );
        assert_eq!(AssumeLost.lost(SessionState::SyncConnected), None);
    }
}
