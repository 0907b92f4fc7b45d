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
use crate::membership::Membership;
use crate::server::Gate;
use crate::tree::DataTree;
use std::sync::Arc;

/// What a member's roles share: its configuration, its place in the ensemble, the gate
/// that opens and closes client service, and its election (told when an epoch is
/// established).
pub struct Peer {
    /// The server's configuration.
    pub config: Arc<Config>,
    /// The membership this round runs with (`/zookeeper/config` in its state, see
    /// [`crate::membership`]) and this server's id, which it may not list (removed).
    pub ensemble: Arc<Ensemble>,
    /// The voters before the last reconfiguration in this server's history while that one
    /// may be uncommitted: a leader needs a quorum of them as well.
    pub voters_before: Option<Vec<u64>>,
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
    let mut peer = Peer {
        config: config.clone(),
        ensemble: ensemble.clone(),
        voters_before: None,
        gate: gate.clone(),
        election,
    };
    let mut carried: Option<log::Recovered> = None;
    loop {
        let dir = config.data_dir.clone();
        let left = carried.take();
        let (mut recovered, mut epochs) = tokio::task::spawn_blocking(move || {
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
        let current = membership(&config, &mut recovered.tree);
        peer.voters_before = recovered
            .tree
            .config_before
            .as_deref()
            .and_then(|before| Membership::parse(before).ok().map(|m| m.voters()));
        peer.election.set_voters(current.voters());
        peer.ensemble = Arc::new(Ensemble {
            my_id: ensemble.my_id,
            servers: current.servers,
        });
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

/// The membership in `tree`, which is first seeded with the config file's where no
/// reconfiguration was logged (see [`crate::membership`]).
pub fn membership(config: &Config, tree: &mut DataTree) -> Membership {
    let seed = Membership::new(config.servers.clone(), 0);
    tree.seed_config(seed.render().as_bytes());
    let (data, zxid) = tree.config();
    Membership::parse(&data).unwrap_or_else(|e| {
        tracing::error!(
            "the membership written at {zxid:#x} is unreadable ({e}); using the config file's"
        );
        seed
    })
}
