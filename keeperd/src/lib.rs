//! keeperd: a single-node ZooKeeper-compatible server.
//!
//! Pipeline: [`server`] (connections, framing, decoding, plain reads of
//! visible state via [`read`]) → [`core`] (sessions, reads, [`processor`]
//! turning writes into [`txn`]s) → [`log`] (the [`log::Log`] seam; a local
//! fsync'd log today) → [`tree`] (the deterministic state machine) →
//! [`watch`] (notifications) → [`outbox`] (replies written to the socket by
//! whoever releases them, see [`conn`]).

pub mod auth;
pub mod checksum;
pub mod config;
pub mod conn;
pub mod core;
#[cfg(feature = "failpoints")]
pub mod failpoint;
pub mod fourlw;
pub mod frame;
pub mod jute;
pub mod log;
pub mod outbox;
pub mod processor;
pub mod proto;
pub mod read;
pub mod sched;
pub mod server;
pub mod stats;
pub mod tree;
pub mod txn;
pub mod watch;

use std::path::Path;
use std::sync::{mpsc, Arc};

/// Recovers state from the config's dataDir, binds the client port and
/// serves until the process ends. Errors are one line saying what and where.
pub fn run(config_path: &Path) -> Result<(), String> {
    let config = Arc::new(config::Config::load(config_path)?);
    #[cfg(feature = "failpoints")]
    failpoint::at_start(&config.data_dir)?;
    let recovered = log::recover(&config.data_dir)?;
    if let Some(t) = &recovered.torn_tail {
        tracing::warn!("recovered after a torn write: {t}");
    }
    tracing::info!(
        "recovered zxid {:#x} ({} nodes, {} sessions, {} txns replayed) from {}",
        recovered.tree.last_zxid,
        recovered.tree.node_count(),
        recovered.tree.sessions.len(),
        recovered.replayed,
        config.data_dir.display()
    );
    let pid_path = config.data_dir.join("keeperd.pid");
    std::fs::write(&pid_path, format!("{}\n", std::process::id()))
        .map_err(|e| format!("{}: {e}", pid_path.display()))?;

    let (core_tx, core_rx) = mpsc::channel();
    let durable_tx = core_tx.clone();
    let file_log = log::FileLog::new(
        config.data_dir.clone(),
        recovered.segment,
        Box::new(move |zxid| {
            let _ = durable_tx.send(core::CoreMsg::Durable(zxid));
        }),
    );
    let core = core::Core::new(config.clone(), recovered.tree, Box::new(file_log));
    let shared = core.shared();
    std::thread::Builder::new()
        .name("keeperd-core".into())
        .spawn(move || {
            // A broken core must not leave a server that accepts clients but never answers.
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| core.run(core_rx))).is_err()
            {
                eprintln!("keeperd: fatal: the core thread panicked");
                std::process::exit(70);
            }
        })
        .map_err(|e| format!("cannot start core thread: {e}"))?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start runtime: {e}"))?;
    runtime.block_on(async move {
        let addr = config.listen_addr();
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        tracing::info!("keeperd serving clients on {addr}");
        server::serve(listener, core_tx, shared).await;
        Ok(())
    })
}
