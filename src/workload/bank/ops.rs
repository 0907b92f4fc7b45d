//! The bank's operations on accounts `/stampede/<run-id>/bank/a<i>`, each holding its
//! balance: `transfer` reads both balances and, unless that would overdraw, writes both in one
//! `multi` (a check of the debited account's version, its setData, and the credited account's
//! setData with the version read), again while another transfer got in first; `read` gets
//! every balance in one `multiRead` (synced first when asked, and always in the final reads).
//! The `separate` mode writes the two balances in two setData calls, the mistake the checker
//! must catch.

use std::collections::BTreeSet;
use std::sync::Mutex;

use async_trait::async_trait;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use zookeeper_client::{Client, Error, MultiReadResult, MultiWriteError, Stat};

use super::{BankConfig, TransferMode};
use crate::generator::{Completion, OpSpec, Operations};
use crate::workload::paced;

/// The key every bank operation names (one bank per run).
const KEY: &str = "bank";

/// The bank workload's operations.
pub struct Bank {
    cfg: BankConfig,
    dir: String,
    rng: Mutex<StdRng>,
}

/// A balance as read: the amount and the account's data version.
#[derive(Clone, Copy)]
struct Balance {
    amount: i64,
    version: i32,
}

impl Bank {
    /// The bank of test run `run_id` (one path segment), its operations drawn from `seed`.
    pub fn new(cfg: BankConfig, run_id: &str, seed: u64) -> anyhow::Result<Bank> {
        Ok(Bank {
            cfg,
            dir: crate::workload::run_path(run_id, "bank")?,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        })
    }

    fn account(&self, i: u64) -> String {
        format!("{}/a{i}", self.dir)
    }

    async fn balance(&self, client: &Client, account: &str) -> Result<Balance, Error> {
        let (data, stat) = client.get_data(account).await?;
        Ok(Balance {
            amount: parse(&data)?,
            version: stat.version,
        })
    }

    /// Moves `amount` from account `from` to `to`, unless that would overdraw `from`.
    async fn transfer(
        &self,
        client: &Client,
        from: u64,
        to: u64,
        amount: i64,
    ) -> Result<Stat, Error> {
        let (from, to) = (self.account(from), self.account(to));
        loop {
            let debit = self.balance(client, &from).await?;
            let credit = self.balance(client, &to).await?;
            if debit.amount < amount {
                return Err(Error::BadArguments(&"insufficient funds"));
            }
            let debited = (debit.amount - amount).to_string();
            let credited = (credit.amount + amount).to_string();
            let written = match self.cfg.transfer {
                TransferMode::Multi => {
                    let mut multi = client.new_multi_writer();
                    multi.add_check_version(&from, debit.version)?;
                    multi.add_set_data(&from, debited.as_bytes(), None)?;
                    multi.add_set_data(&to, credited.as_bytes(), Some(credit.version))?;
                    match multi.commit().await {
                        Ok(results) => match results.into_iter().last() {
                            Some(zookeeper_client::MultiWriteResult::SetData { stat }) => Ok(stat),
                            other => {
                                Err(Error::UnexpectedError(format!("multi answered {other:?}")))
                            }
                        },
                        Err(MultiWriteError::OperationFailed { source, .. }) => Err(source),
                        Err(MultiWriteError::RequestFailed { source }) => Err(source),
                    }
                }
                TransferMode::Separate => {
                    match client
                        .set_data(&from, debited.as_bytes(), Some(debit.version))
                        .await
                    {
                        Ok(_) => self.credit(client, &to, amount, credit).await,
                        Err(e) => Err(e),
                    }
                }
            };
            match written {
                Err(Error::BadVersion) => continue,
                other => return other,
            }
        }
    }

    /// The second half of a `separate` transfer: credits `amount` to `to`, read as `credit`,
    /// again while another transfer got in first.
    async fn credit(
        &self,
        client: &Client,
        to: &str,
        amount: i64,
        mut credit: Balance,
    ) -> Result<Stat, Error> {
        loop {
            let credited = (credit.amount + amount).to_string();
            match client
                .set_data(to, credited.as_bytes(), Some(credit.version))
                .await
            {
                Err(Error::BadVersion) => credit = self.balance(client, to).await?,
                written => return written,
            }
        }
    }

    /// Every balance, in one `multiRead`.
    async fn snapshot(&self, client: &Client, sync: bool) -> Result<Vec<i64>, Error> {
        if sync {
            client.sync(&self.dir).await?;
        }
        let mut multi = client.new_multi_reader();
        for i in 0..self.cfg.accounts {
            multi.add_get_data(&self.account(u64::from(i)))?;
        }
        multi
            .commit()
            .await?
            .into_iter()
            .map(|result| match result {
                MultiReadResult::Data { data, .. } => parse(&data),
                MultiReadResult::Error { err } => Err(err),
                other => Err(Error::UnexpectedError(format!(
                    "multiRead answered {other:?}"
                ))),
            })
            .collect()
    }
}

/// A balance's data as a number.
fn parse(data: &[u8]) -> Result<i64, Error> {
    String::from_utf8_lossy(data)
        .parse::<i64>()
        .map_err(|_| Error::UnexpectedError(format!("balance {data:?} is no number")))
}

#[async_trait]
impl Operations for Bank {
    async fn setup(&self, client: &Client, _max_ops: u64) -> anyhow::Result<()> {
        paced::create(client, &self.dir, b"").await?;
        let balance = self.cfg.balance.to_string();
        for i in 0..self.cfg.accounts {
            paced::create(client, &self.account(u64::from(i)), balance.as_bytes()).await?;
        }
        Ok(())
    }

    fn next_op(&self, _process: u64) -> Option<OpSpec> {
        let cfg = self.cfg;
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        let transfer = rng.gen_range(0..cfg.mix.transfer + cfg.mix.read) < cfg.mix.transfer;
        let value = match transfer {
            true => {
                let from = rng.gen_range(0..cfg.accounts);
                let to = (from + rng.gen_range(1..cfg.accounts)) % cfg.accounts;
                let amount = rng.gen_range(1..=cfg.max_transfer);
                json!({ "from": from, "to": to, "amount": amount })
            }
            false => Value::Null,
        };
        Some(OpSpec {
            f: if transfer { "transfer" } else { "read" },
            key: Some(KEY.into()),
            value,
            is_final: false,
        })
    }

    async fn invoke(&self, client: &Client, op: &OpSpec) -> Result<Completion, Error> {
        let v = &op.value;
        match (
            op.f,
            v["from"].as_u64(),
            v["to"].as_u64(),
            v["amount"].as_i64(),
        ) {
            ("transfer", Some(from), Some(to), Some(amount)) => {
                let stat = self.transfer(client, from, to, amount).await?;
                Ok(Completion {
                    value: op.value.clone(),
                    version: None,
                    zxid: Some(stat.mzxid),
                })
            }
            ("read", ..) => {
                let balances = self
                    .snapshot(client, self.cfg.sync_reads || op.is_final)
                    .await?;
                Ok(Completion {
                    value: json!(balances),
                    version: None,
                    zxid: None,
                })
            }
            _ => Err(Error::BadArguments(&"unknown bank operation")),
        }
    }

    fn final_ops(&self, keys: &BTreeSet<String>) -> Vec<OpSpec> {
        paced::final_reads(keys)
    }
}
