//! The engine: a test's life on a cluster, from claiming the nodes to leaving them as they
//! were. [`claim`] catches SIGINT and SIGTERM (re-arming the process's one catcher, so that in a
//! process running many tests a signal stops the run it comes in), takes the run lock on every
//! node and clears what earlier runs left; [`execute`] sets the database up, runs the workloads
//! under the nemesis, heals, compares the replicas, collects the logs, and then, whatever ended
//! the run (an error on a node, a signal in any phase, a panic), heals and tears the database
//! down and releases the lock, saying what it cleaned.

mod lock;
mod preflight;
mod run;

pub use preflight::Scope;
pub use run::{execute, Member, Test};

use crate::control::{Control, Node};
use crate::db::Db;
use crate::nemesis::Interrupts;

/// The nodes claimed for one run: signals caught, the run lock held, leftovers cleared.
/// Give it back with [`Claim::release`] (or to [`execute`], which does).
pub struct Claim {
    interrupts: Interrupts,
    lock: lock::RunLock,
}

impl Claim {
    /// The signals caught for the run.
    pub fn interrupts(&self) -> &Interrupts {
        &self.interrupts
    }

    /// Releases the run lock.
    pub async fn release(self) {
        self.lock.release().await;
    }
}

/// Claims `control`'s nodes for a run of `db`: catches SIGINT and SIGTERM, takes the run lock
/// on every node (refused with one line naming the holder when another run holds one; a dead
/// holder's lock is taken over), then clears what earlier runs left as `scope` says, printing
/// what it found. Nothing is set up yet; on any error or signal the lock is released.
pub async fn claim(control: &Control, db: &dyn Db, scope: Scope) -> anyhow::Result<Claim> {
    claim_with(control, db, scope, Interrupts::catch()?).await
}

/// Claims as [`claim`] does, stopped by `interrupts` (signals raised by hand, in the tests of
/// the harness's rules) instead of the process's SIGINT and SIGTERM.
pub async fn claim_with(
    control: &Control,
    db: &dyn Db,
    scope: Scope,
    interrupts: Interrupts,
) -> anyhow::Result<Claim> {
    let taking = interrupts.unless(lock::RunLock::take(control)).await;
    let (lock, taken_over) = match taking {
        Ok(taken) => taken?,
        // A lock file that lands after this belongs to a dead process: the next run takes
        // it over.
        Err(signal) => {
            anyhow::bail!("interrupted by {signal} while taking the run lock: nothing was started")
        }
    };
    for line in &taken_over {
        eprintln!("{line}");
    }
    let clearing = interrupts
        .unless(preflight::clear(control, db, scope))
        .await;
    let outcome = match clearing {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(e)) => Err(e),
        Err(signal) => {
            control.settle().await;
            Err(anyhow::anyhow!(
                "interrupted by {signal} while clearing what earlier runs left: nothing was \
                 started; the next run clears the rest"
            ))
        }
    };
    match outcome {
        Ok(found) => {
            if !found.is_empty() {
                eprintln!(
                    "found what an earlier run left, and removed it: {}",
                    found.join("; ")
                );
            }
            Ok(Claim { interrupts, lock })
        }
        Err(e) => {
            lock.release().await;
            Err(e)
        }
    }
}

/// The live run holding any of `control`'s nodes, as a line naming the node and the holder
/// (for commands that must not act under a running test, such as `stampede heal`); the lock of
/// a dead holder is removed on the way.
pub async fn running_elsewhere(control: &Control) -> anyhow::Result<Option<String>> {
    Ok(lock::live_holder(control)
        .await?
        .map(|(node, holder)| format!("{node}: a run holds this cluster: {holder}")))
}

/// The error of a node that did not answer before the run started.
fn unanswered(node: &Node, e: anyhow::Error) -> anyhow::Error {
    anyhow::anyhow!(
        "{} does not answer: {e:#}; nothing was started",
        node.address()
    )
}
