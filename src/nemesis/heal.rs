//! Healing everything, whatever the controller knows: used at the end of every run, on
//! Ctrl-C, SIGTERM, panic or error, and by `stampede heal` after a controller crash.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use anyhow::anyhow;
use futures::FutureExt;

use super::clock::SKEW_MARKER;
use super::{clock, packet, partition};
use crate::control::{Control, Node, Retry};
use crate::db::Db;

/// Heals one node: removes partition rules, resumes a paused server, restarts a server that
/// was set up but is not running. Returns what it did.
async fn heal_node(
    control: &Control,
    db: &dyn Db,
    node: &Node,
) -> anyhow::Result<Vec<&'static str>> {
    let mut done = Vec::new();
    control
        .exec(node, partition::HEAL_COMMAND, Retry::Idempotent)
        .await?;
    control
        .exec(node, &packet::heal_command(node), Retry::Idempotent)
        .await?;
    done.push("network");
    let skewed = match db.clock_file(node) {
        Some(file) => {
            control
                .exec(
                    node,
                    &format!("test -f {file} && echo yes || true"),
                    Retry::Idempotent,
                )
                .await?
        }
        None => {
            control
                .exec(
                    node,
                    &format!("test -f {SKEW_MARKER} && echo yes || true"),
                    Retry::Idempotent,
                )
                .await?
        }
    };
    if skewed == "yes" {
        clock::set_offset(control, db, node, 0).await?;
        done.push("clock");
    }
    db.resume(control, node).await?;
    if db.is_set_up(control, node).await? && !db.is_running(control, node).await? {
        db.start(control, node).await?;
        done.push("restarted server");
    }
    Ok(done)
}

/// Heals every node at once; an error lists each node that could not be healed.
pub async fn heal_all(control: &Control, db: &dyn Db) -> anyhow::Result<()> {
    let heals = control.nodes().iter().map(|n| heal_node(control, db, n));
    let results = futures::future::join_all(heals).await;
    let mut failures = Vec::new();
    for (node, result) in control.nodes().iter().zip(results) {
        match result {
            Ok(done) => tracing::debug!(node = %node.name, "healed: {}", done.join(", ")),
            Err(e) => failures.push(format!("{}: {e:#}", node.name)),
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(anyhow!(
            "could not heal every node: {}",
            failures.join("; ")
        ))
    }
}

/// How a guarded piece of work ended.
#[derive(Debug)]
pub enum Ending<T> {
    /// It finished (with success or an error).
    Finished(anyhow::Result<T>),
    /// SIGINT or SIGTERM arrived first: the work was asked to stop (or dropped).
    Interrupted(&'static str),
}

/// How to stop guarded work when a signal arrives.
pub enum OnSignal {
    /// Drop the work's future at once.
    Drop,
    /// Send `true` here and let the work wind down (heal, record) for up to this long.
    Cancel(tokio::sync::watch::Sender<bool>, std::time::Duration),
}

/// Runs `work` and then heals every node, whether `work` succeeded, failed, panicked or was
/// interrupted by SIGINT/SIGTERM (which are caught from here on, so a second Ctrl-C cannot
/// stop the healing).
pub async fn guarded<T>(
    control: &Control,
    db: &dyn Db,
    on_signal: OnSignal,
    work: impl Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<Ending<T>> {
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let work = AssertUnwindSafe(work).catch_unwind();
    tokio::pin!(work);
    let first = tokio::select! {
        outcome = &mut work => Ok(outcome),
        _ = sigint.recv() => Err("SIGINT"),
        _ = sigterm.recv() => Err("SIGTERM"),
    };
    let ending = match first {
        Ok(outcome) => Ending::Finished(outcome.unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
            Err(anyhow!("panicked: {}", what.unwrap_or_default()))
        })),
        Err(signal) => {
            eprintln!("{signal} received: healing every node before exiting");
            if let OnSignal::Cancel(cancel, grace) = on_signal {
                let _ = cancel.send(true);
                let _ = tokio::time::timeout(grace, &mut work).await;
            }
            Ending::Interrupted(signal)
        }
    };
    heal_all(control, db).await?;
    Ok(ending)
}
