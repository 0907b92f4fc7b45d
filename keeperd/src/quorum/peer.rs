//! A member's life: elect, then lead, follow or observe until that ends,
//! then elect again, with the persisted epochs; while it elects, the server
//! answers no clients. A round starts from the state the previous role left
//! once its core thread stopped and its log was synced (the tree and the
//! open log segment: what recovering the data directory would give, without
//! the seconds a large log takes to replay), or else from the data directory
//! recovered afresh. Nothing else outlives a role (ZOOKEEPER-4712).

use super::election::Election;
use super::epochs::Epochs;
use super::{leader, learner};
use crate::config::{Config, Ensemble};
use crate::log;
use crate::server::Gate;
use std::sync::Arc;

/// What a member's roles share: its configuration, its place in the ensemble, the gate
/// that opens and closes client service, and its election (told when an epoch is
/// established).
pub struct Peer {
    /// The server's configuration.
    pub config: Arc<Config>,
    /// The ensemble and this server's place in it.
    pub ensemble: Arc<Ensemble>,
    /// Opens client service once a role serves; closed while electing.
    pub gate: Arc<Gate>,
    /// The election, running on its port for the server's whole life.
    pub election: Election,
}

/// Runs this member of `ensemble` forever; errors are fatal (a corrupt log,
/// an unusable data directory or port).
pub async fn run(
    config: Arc<Config>,
    ensemble: Arc<Ensemble>,
    gate: Arc<Gate>,
) -> Result<(), String> {
    let election = Election::start(ensemble.clone(), config.tick()).await?;
    let peer = Peer {
        config: config.clone(),
        ensemble: ensemble.clone(),
        gate: gate.clone(),
        election,
    };
    let mut carried: Option<log::Recovered> = None;
    loop {
        let dir = config.data_dir.clone();
        let left = carried.take();
        let (recovered, mut epochs) = tokio::task::spawn_blocking(move || {
            let recovered = match left {
                Some(state) => {
                    let zxid = state.tree.last_zxid;
                    tracing::info!("starting from the previous role's state at {zxid:#x}");
                    state
                }
                None => log::recover(&dir)?,
            };
            let epochs = Epochs::load(&dir, recovered.tree.last_zxid)?;
            Ok::<_, String>((recovered, epochs))
        })
        .await
        .map_err(|e| e.to_string())??;
        let last = recovered.tree.last_zxid;
        let vote = peer.election.look(last, epochs.current()).await;
        let opened = gate.times_opened();
        let ended = if vote.leader == ensemble.my_id {
            leader::lead(&peer, recovered, &mut epochs, &mut carried).await
        } else {
            learner::follow(&peer, recovered, &mut epochs, vote.leader, &mut carried).await
        };
        if let Err(why) = ended {
            tracing::warn!("{why}");
        }
        // Not a tight loop when the ensemble cannot form: a role that never served
        // pauses; one that served elects again at once.
        if gate.times_opened() == opened {
            tokio::time::sleep(config.tick() / 4).await;
        }
    }
}
