//! SIGINT and SIGTERM, caught for a whole run: from the moment a run may touch a node until
//! every node is clean again, a signal asks the run to stop instead of killing the controller,
//! so that whatever ends a run, its faults are healed and its servers removed. A process
//! running many tests (a suite, a sweep) has one catcher, re-armed by each run.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

/// The process's catcher, started by the first [`Interrupts::catch`].
static CATCHER: Mutex<Option<Interrupts>> = Mutex::new(None);

/// The signals that stop a run, caught from [`Interrupts::catch`] on. Cheap to clone; every
/// clone sees the first signal.
#[derive(Clone)]
pub struct Interrupts {
    first: watch::Receiver<Option<&'static str>>,
    /// Once set, a signal ends the process at once (exit 130) after printing this: nothing
    /// is left to clean.
    exit_saying: Arc<Mutex<Option<String>>>,
}

impl Interrupts {
    /// Catches SIGINT and SIGTERM for a run: the first call starts the process's catcher (for
    /// the rest of the process: a second Ctrl-C cannot cut the clean-up short), and every call
    /// re-arms it, so that a signal stops this run rather than ending the process. The first
    /// signal stays caught: every later run stops at once. Needs a tokio runtime.
    pub fn catch() -> anyhow::Result<Interrupts> {
        let mut catcher = CATCHER.lock().unwrap_or_else(PoisonError::into_inner);
        let interrupts = match catcher.as_ref() {
            Some(interrupts) => interrupts.clone(),
            None => catcher.insert(Interrupts::start()?).clone(),
        };
        interrupts.rearm();
        Ok(interrupts)
    }

    /// The first signal the process caught, if any: a process running many tests starts no
    /// further one after it.
    pub fn received() -> Option<&'static str> {
        let catcher = CATCHER.lock().unwrap_or_else(PoisonError::into_inner);
        catcher
            .as_ref()
            .and_then(|interrupts| *interrupts.first.borrow())
    }

    /// Starts catching SIGINT and SIGTERM in a task of its own.
    fn start() -> anyhow::Result<Interrupts> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut sigint = signal(SignalKind::interrupt())?;
        let mut sigterm = signal(SignalKind::terminate())?;
        let (tx, first) = watch::channel(None);
        let interrupts = Interrupts {
            first,
            exit_saying: Arc::default(),
        };
        let caught = interrupts.clone();
        tokio::spawn(async move {
            loop {
                let name = tokio::select! {
                    _ = sigint.recv() => "SIGINT",
                    _ = sigterm.recv() => "SIGTERM",
                };
                if let Some(why) = caught.exit_saying().as_ref() {
                    eprintln!("{name} received: {why}");
                    std::process::exit(130);
                }
                if tx.borrow().is_none() {
                    eprintln!("{name} received: stopping, then healing and cleaning every node");
                    let _ = tx.send(Some(name));
                } else {
                    eprintln!("{name} received again: still cleaning the nodes, please wait");
                }
            }
        });
        Ok(interrupts)
    }

    /// From now on a signal ends the process at once, printing `why` (what is left undone
    /// and how to finish it): the nodes are clean, nothing is left to heal.
    pub fn exit_from_now(&self, why: String) {
        *self.exit_saying() = Some(why);
    }

    /// Makes a signal stop a run again rather than end the process: a new run begins.
    fn rearm(&self) {
        *self.exit_saying() = None;
    }

    /// What a signal prints before it ends the process, if it does.
    fn exit_saying(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.exit_saying
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Interrupts raised by hand, for tests: the sender raises one.
    #[cfg(test)]
    pub fn manual() -> (watch::Sender<Option<&'static str>>, Interrupts) {
        let (tx, first) = watch::channel(None);
        let exit_saying = Arc::default();
        (tx, Interrupts { first, exit_saying })
    }

    /// Waits for the first signal and returns its name (at once if one came already).
    pub async fn wait(&self) -> &'static str {
        let mut first = self.first.clone();
        let got = first.wait_for(Option::is_some).await.map(|name| *name);
        match got {
            Ok(name) => name.expect("waited for Some"),
            // The catcher is gone (its runtime is shutting down): no signal will come.
            Err(_) => std::future::pending().await,
        }
    }

    /// Runs `work` unless a signal comes first: `Err(signal)` then, `work` dropped (commands
    /// it had sent still run to their end; see `Control::settle`).
    pub async fn unless<T>(
        &self,
        work: impl std::future::Future<Output = T>,
    ) -> Result<T, &'static str> {
        tokio::select! {
            biased;
            signal = self.wait() => Err(signal),
            done = work => Ok(done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn work_runs_to_its_end_unless_a_signal_comes_first() {
        let (raise, interrupts) = Interrupts::manual();
        let done = interrupts.unless(async { 7 }).await;
        assert_eq!(done, Ok(7));
        let slow = interrupts.unless(tokio::time::sleep(Duration::from_secs(60)));
        let signal = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            raise.send(Some("SIGINT")).unwrap();
        };
        let (stopped, ()) = tokio::join!(slow, signal);
        assert_eq!(stopped, Err("SIGINT"));
        // Once received, every later wait ends at once.
        assert_eq!(interrupts.unless(async { 1 }).await, Err("SIGINT"));
    }

    #[test]
    fn a_new_run_rearms_what_the_last_one_set_to_exit() {
        let (_raise, interrupts) = Interrupts::manual();
        interrupts.exit_from_now("judging stopped".into());
        let later = interrupts.clone();
        assert_eq!(later.exit_saying().as_deref(), Some("judging stopped"));
        later.rearm();
        assert_eq!(*interrupts.exit_saying(), None, "every clone is re-armed");
    }
}
