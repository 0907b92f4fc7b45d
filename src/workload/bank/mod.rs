//! The bank workload (Jepsen's bank test): processes transfer amounts between account znodes,
//! each transfer one `multi`, and read every balance in one `multiRead`; its history is
//! checked for snapshots whose total is not the one the accounts started with, and for
//! negative balances ([`check`]).

mod check;
mod ops;
#[cfg(test)]
mod zk_tests;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{into_map, paced, Entry, Judged, Ran, Section, Settings, Workload};
use crate::generator::{GeneratorConfig, Target};
use crate::history::Op;

/// The registry's entry.
pub const ENTRY: Entry = Entry {
    name: "bank",
    build: |file| Ok(Box::new(BankWorkload(Settings::read(file)?))),
    sweeps_contenders: false,
};

/// How a transfer writes the two balances.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransferMode {
    /// Both in one `multi`: all or nothing.
    #[default]
    Multi,
    /// Two separate setData calls: a reader can see the debit without the credit, the
    /// mistake the checker must catch.
    Separate,
}

/// Relative weights of `transfer` and `read`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Mix {
    /// Weight of `transfer`.
    pub transfer: u32,
    /// Weight of `read`.
    pub read: u32,
}

impl Default for Mix {
    fn default() -> Mix {
        Mix {
            transfer: 1,
            read: 1,
        }
    }
}

/// Settings of the bank workload (the `bank` section of `workloads/bank.yaml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BankConfig {
    /// Accounts (at least 2).
    pub accounts: u32,
    /// Each account's balance at the start.
    pub balance: i64,
    /// The largest amount one transfer moves (amounts are drawn from 1 to it).
    pub max_transfer: i64,
    /// Relative weights of the operations.
    pub mix: Mix,
    /// Whether a read is preceded by a `sync` (final reads always sync).
    pub sync_reads: bool,
    /// How a transfer writes the two balances.
    pub transfer: TransferMode,
}

impl Default for BankConfig {
    fn default() -> BankConfig {
        BankConfig {
            accounts: 5,
            balance: 10,
            max_transfer: 5,
            mix: Mix::default(),
            sync_reads: false,
            transfer: TransferMode::Multi,
        }
    }
}

impl BankConfig {
    /// The total every snapshot must add up to.
    pub fn total(&self) -> i64 {
        i64::from(self.accounts) * self.balance
    }
}

impl Section for BankConfig {
    fn check(&self, _generator: &GeneratorConfig) -> Result<(), String> {
        if self.accounts < 2 {
            return Err("bank.accounts must be at least 2: a transfer needs two accounts".into());
        }
        if self.balance < 0 {
            return Err("bank.balance must not be below 0".into());
        }
        if self.max_transfer < 1 {
            return Err("bank.max_transfer must be at least 1".into());
        }
        if self.mix.transfer == 0 || self.mix.read == 0 {
            return Err("bank.mix.transfer and bank.mix.read must both be above 0".into());
        }
        Ok(())
    }
}

/// The bank workload of one workload file.
pub struct BankWorkload(Settings<BankConfig>);

#[async_trait]
impl Workload for BankWorkload {
    fn settings(&self) -> Value {
        self.0.own_json()
    }

    async fn run(&self, target: Target) -> anyhow::Result<Ran> {
        let ops = ops::Bank::new(self.0.own, &target.run_id, target.seed)?;
        paced::run(&self.0, ops, target).await
    }

    /// Every snapshot adds up to the starting total with no balance below zero; without a
    /// snapshot, unknown.
    fn judge(&self, ops: &[Op], run: Option<Value>) -> anyhow::Result<Judged> {
        let cfg = self.0.own;
        let bank = check::check_bank(ops, cfg.accounts as usize, cfg.total());
        let line = format!(
            "bank: {} transfers ok ({} info, {} fail), {} snapshots of total {}; {}",
            bank.transfers_ok,
            bank.transfers_info,
            bank.transfers_fail,
            bank.reads,
            bank.total,
            bank.found.summary(),
        );
        Ok(Judged {
            valid: paced::verdict(bank.valid, bank.reads > 0),
            marked: bank.found.marked_ops(),
            checks: into_map(json!({ "bank": bank, "run": run })),
            line,
        })
    }
}
