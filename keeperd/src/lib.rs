//! keeperd: a ZooKeeper-compatible server, standalone or in an ensemble.
//!
//! Pipeline: [`server`] (connections, framing, decoding, plain reads of
//! visible state via [`read`]) → [`core`] (sessions, reads, [`processor`]
//! turning writes into [`txn`]s) → [`log`] (the [`log::Log`] seam: a local
//! fsync'd log standalone; in an ensemble, [`quorum`] replicates it) →
//! [`tree`] (the deterministic state machine) → [`watch`] (notifications)
//! → [`outbox`] (replies written to the socket by whoever releases them,
//! see [`conn`]).

pub mod auth;
pub mod checksum;
pub mod config;
pub mod conn;
pub mod core;
pub mod failpoint;
pub mod fourlw;
pub mod frame;
pub mod invariant;
pub mod jute;
pub mod log;
pub mod membership;
pub mod outbox;
pub mod processor;
pub mod proto;
pub mod quorum;
pub mod read;
pub mod sched;
pub mod server;
pub mod stats;
pub mod tree;
pub mod txn;
pub mod watch;

use std::path::Path;
use std::sync::{mpsc, Arc};

/// The `keeperd <zoo.cfg>` command: logs to stderr, runs the server, exits 1
/// with a one-line error when it cannot.
pub fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colours only on a terminal: a log file (the nodes' keeperd.log) stays plain text
        // for the people and the log-trigger patterns that read it.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let mut args = std::env::args().skip(1);
    let config = match (args.next(), args.next()) {
        (Some(path), None) if path != "-h" && path != "--help" => std::path::PathBuf::from(path),
        _ => {
            eprintln!("usage: keeperd <zoo.cfg>");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&config) {
        eprintln!("keeperd: {e}");
        std::process::exit(1);
    }
}

/// Recovers state from the config's dataDir, binds the client port and
/// serves until the process ends: standalone, or as a member of the
/// ensemble the config lists. Errors are one line saying what and where.
pub fn run(config_path: &Path) -> Result<(), String> {
    let config = Arc::new(config::Config::load(config_path)?);
    failpoint::configure(&config.failpoints)?;
    failpoint::at_start(&config.data_dir)?;
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|e| format!("{}: cannot create data dir: {e}", config.data_dir.display()))?;
    let ensemble = config.ensemble()?;
    let pid_path = config.data_dir.join("keeperd.pid");
    std::fs::write(&pid_path, format!("{}\n", std::process::id()))
        .map_err(|e| format!("{}: {e}", pid_path.display()))?;
    let gate = Arc::new(match ensemble {
        Some(_) => server::Gate::default(),
        None => server::Gate::open_to(standalone(&config)?),
    });

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
        let clients = tokio::spawn(server::serve(listener, gate.clone()));
        match ensemble {
            None => {
                let _ = clients.await;
                Ok(())
            }
            Some(ensemble) => {
                tracing::info!(
                    "server {} of an ensemble of {} ({} voting)",
                    ensemble.my_id,
                    ensemble.servers.len(),
                    ensemble.voters().len()
                );
                quorum::peer::run(config, Arc::new(ensemble), gate).await
            }
        }
    })
}

/// Recovers a standalone server and starts its core.
fn standalone(config: &Arc<config::Config>) -> Result<server::Serving, String> {
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
    let (core_tx, core_rx) = mpsc::channel();
    let durable_tx = core_tx.clone();
    let last = recovered.tree.last_zxid;
    let file_log = log::FileLog::new(
        config.data_dir.clone(),
        recovered.segment,
        last,
        Box::new(move |zxid| {
            let _ = durable_tx.send(core::CoreMsg::Durable(zxid));
        }),
    );
    let start = core::Start::standalone(&recovered.tree);
    let core = core::Core::new(
        config.clone(),
        recovered.tree,
        Box::new(file_log),
        core::Role::Standalone,
        start,
    );
    let shared = core.shared();
    core.spawn(core_rx)?;
    Ok(server::Serving {
        core: core_tx,
        shared,
    })
}
