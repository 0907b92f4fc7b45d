//! The `lose-unfsynced` fault: a FUSE layer under each server's data directory that keeps
//! what was written since the last fsync apart and throws it away on command, as a power
//! loss would ([`fs`]), the agent that serves it on a node ([`serve`]), and the nemesis and
//! database wrapper that put it to use.

pub mod fs;
mod layer;
mod nemesis;
pub mod serve;
mod undo;

use std::sync::Arc;

pub use layer::{port_file, OnLayer};
pub use nemesis::LoseUnsynced;

use super::kind::{self, FaultKind, Parts};
use super::package::FaultConfig;
use super::trigger::Triggered;
use super::Nemesis;
use crate::db::Db;

/// The fault kind `lose-unfsynced`.
pub struct LoseUnsyncedKind;

impl FaultKind for LoseUnsyncedKind {
    fn name(&self) -> &'static str {
        "lose-unfsynced"
    }

    fn triggered(&self) -> Option<Triggered> {
        Some(Triggered::PowerLoss)
    }

    fn build(&self, fault: &FaultConfig, parts: Parts) -> anyhow::Result<Arc<dyn Nemesis>> {
        kind::aimed(fault, parts, |c, db, target, ()| {
            Ok(LoseUnsynced::new(c, db, target))
        })
    }

    /// Its servers keep their data on the layer from their first start.
    fn prepare_db(&self, db: Arc<dyn Db>) -> Arc<dyn Db> {
        Arc::new(OnLayer::new(db))
    }
}

#[cfg(test)]
mod tests;
