//! The signal that ends the main phase early: the caller's cancellation (Ctrl-C) or an
//! internal abort after an error.

use tokio::sync::watch;

/// Watches both the caller's cancellation and the run's own abort flag.
#[derive(Clone)]
pub struct Stop {
    cancel: watch::Receiver<bool>,
    abort: watch::Receiver<bool>,
}

impl Stop {
    /// A stop signal raised by either channel turning `true`.
    pub fn new(cancel: watch::Receiver<bool>, abort: watch::Receiver<bool>) -> Stop {
        Stop { cancel, abort }
    }

    /// A signal raised only by the caller's cancellation, for the final phase (which runs
    /// after the main phase's own stop was raised).
    pub fn cancel_only(&self) -> Stop {
        Stop::cancelled_by(self.cancel.clone())
    }

    /// A signal raised only by `cancel` turning `true`.
    pub fn cancelled_by(cancel: watch::Receiver<bool>) -> Stop {
        let (_, never) = watch::channel(false);
        Stop {
            cancel,
            abort: never,
        }
    }

    /// Whether the caller cancelled the run.
    pub fn is_cancelled(&self) -> bool {
        *self.cancel.borrow()
    }

    /// Whether the run should stop now.
    pub fn is_set(&self) -> bool {
        self.is_cancelled() || *self.abort.borrow()
    }

    /// Completes when the run should stop (never, if both senders are gone unraised).
    pub async fn wait(&mut self) {
        tokio::select! {
            _ = raised(&mut self.cancel) => {}
            _ = raised(&mut self.abort) => {}
        }
    }
}

async fn raised(rx: &mut watch::Receiver<bool>) {
    if rx.wait_for(|set| *set).await.is_err() {
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn either_channel_stops_and_dropped_senders_do_not() {
        let (cancel_tx, cancel_rx) = watch::channel(false);
        let (abort_tx, abort_rx) = watch::channel(false);
        let mut stop = Stop::new(cancel_rx, abort_rx);
        assert!(!stop.is_set());
        abort_tx.send(true).unwrap();
        stop.wait().await;
        assert!(stop.is_set() && !stop.is_cancelled());

        let (cancel_tx2, cancel_rx2) = watch::channel(false);
        let (abort_tx2, abort_rx2) = watch::channel(false);
        drop((cancel_tx2, abort_tx2));
        let mut idle = Stop::new(cancel_rx2, abort_rx2);
        assert!(tokio::time::timeout(Duration::from_millis(50), idle.wait())
            .await
            .is_err());

        let final_phase = stop.cancel_only();
        assert!(
            !final_phase.is_set(),
            "an abort does not end the final phase"
        );
        cancel_tx.send(true).unwrap();
        assert!(final_phase.is_set());
        stop.wait().await;
        assert!(stop.is_cancelled());
    }
}
