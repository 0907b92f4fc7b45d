//! The bank, judged from its snapshots (Jepsen's bank test). A `transfer` moves an amount
//! from one account to another in one `multi` (and refuses to overdraw); a `read` is `ok`
//! with every balance, read in one `multiRead`, so it sees all of a transfer or none of it.
//! The final reads, after the heal and the quiet period, are synced and invoked with the
//! value `"final"`.
//!
//! - **wrong total**: a snapshot whose balances do not add up to the total the accounts
//!   started with (money created or destroyed, or a transfer seen half done).
//! - **negative balance**: a snapshot with an account below zero (transfers never overdraw).
//! - **wrong accounts**: a snapshot without one balance per account.
//! - **account gone**: an operation answered `no-node` on an account created at setup.
//!
//! Without a snapshot there is nothing to judge: the verdict is then unknown.

use serde::{Deserialize, Serialize};

use crate::history::{Op, OpType};
use crate::workload::anomalies::Anomalies;
use crate::workload::paced::{steps, Step, FINAL};

/// The verdict of the bank checker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BankReport {
    /// No anomaly found.
    pub valid: bool,
    /// The total every snapshot must add up to.
    pub total: i64,
    /// Transfers that ended `ok`.
    pub transfers_ok: u64,
    /// Transfers whose outcome is unknown.
    pub transfers_info: u64,
    /// Transfers refused (overdraft, or by the server).
    pub transfers_fail: u64,
    /// Snapshots read (`ok` reads).
    pub reads: u64,
    /// The balances the last final read saw.
    pub final_balances: Option<Vec<i64>>,
    /// Anomalies by kind (`wrong-total`, `negative-balance`, `wrong-accounts`,
    /// `account-gone`).
    #[serde(flatten)]
    pub found: Anomalies,
}

/// Checks a bank history of `accounts` accounts whose balances add up to `total`.
pub fn check_bank(ops: &[Op], accounts: usize, total: i64) -> BankReport {
    let mut report = BankReport {
        total,
        ..BankReport::default()
    };
    for step in steps(ops) {
        let Step::Completed(process, invoke, op) = step else {
            continue;
        };
        let setup = "an account created at setup";
        report.found.note_gone("account-gone", op, process, setup);
        match (op.f.as_str(), op.kind) {
            ("transfer", OpType::Ok) => report.transfers_ok += 1,
            ("transfer", OpType::Fail) => report.transfers_fail += 1,
            ("transfer", _) => report.transfers_info += 1,
            ("read", OpType::Ok) => {
                report.reads += 1;
                let balances: Option<Vec<i64>> = op
                    .value
                    .as_array()
                    .and_then(|a| a.iter().map(|b| b.as_i64()).collect());
                let Some(balances) = balances.filter(|b| b.len() == accounts) else {
                    let what = format!("snapshot {} is not {accounts} balances", op.value);
                    report.found.note("wrong-accounts", op, process, what);
                    continue;
                };
                judge_snapshot(&mut report, op, process, &balances);
                if invoke.is_some_and(|i| i.value == FINAL) {
                    report.final_balances = Some(balances);
                }
            }
            _ => {}
        }
    }
    report.valid = report.found.is_empty();
    report
}

/// Holds one snapshot to the total and to non-negative balances.
fn judge_snapshot(report: &mut BankReport, op: &Op, process: u64, balances: &[i64]) {
    let sum: i64 = balances.iter().sum();
    if sum != report.total {
        let what = format!(
            "balances {balances:?} add up to {sum}, not {}",
            report.total
        );
        report.found.note("wrong-total", op, process, what);
    }
    if let Some((account, balance)) = balances.iter().enumerate().find(|(_, b)| **b < 0) {
        let what = format!("account {account} has {balance} in {balances:?}");
        report.found.note("negative-balance", op, process, what);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::testing::{complete, history, invoke};
    use crate::workload::paced::testing::{final_read, read};

    fn transfer(process: u64, kind: &str) -> [Op; 2] {
        let value = r#"{"from":0,"to":1,"amount":3}"#;
        [
            invoke(process, "transfer", value),
            complete(process, kind, "transfer", value),
        ]
    }

    /// Three accounts of 10: a transfer of 3 from account 0 to 1, a read of `seen`, a final
    /// read.
    fn run(seen: &str) -> Vec<Op> {
        let mut lines: Vec<Op> = Vec::new();
        lines.extend(read(1, "[10,10,10]"));
        lines.extend(transfer(2, "ok"));
        lines.extend(read(1, seen));
        lines.extend(final_read(3, "[7,13,10]"));
        history(&lines)
    }

    #[test]
    fn snapshots_that_add_up_are_valid() {
        let report = check_bank(&run("[7,13,10]"), 3, 30);
        assert!(report.valid, "{report:?}");
        assert_eq!((report.transfers_ok, report.reads), (1, 3));
        assert_eq!(report.final_balances, Some(vec![7, 13, 10]));
    }

    #[test]
    fn a_transfer_seen_half_done_is_a_wrong_total() {
        // The debit without the credit: what two separate setData calls let a reader see.
        let report = check_bank(&run("[7,10,10]"), 3, 30);
        assert!(!report.valid);
        let anomaly = report.found.only("wrong-total");
        assert!(anomaly.what.contains("add up to 27, not 30"), "{anomaly:?}");
        assert_eq!(anomaly.index, 5, "the read's completion");
    }

    #[test]
    fn an_overdrawn_account_is_a_negative_balance() {
        let report = check_bank(&run("[-3,23,10]"), 3, 30);
        report.found.only("negative-balance");
        assert_eq!(report.found.count("wrong-total"), 0, "it adds up");
    }

    #[test]
    fn a_snapshot_missing_an_account_is_reported() {
        let report = check_bank(&run("[7,23]"), 3, 30);
        report.found.only("wrong-accounts");
        let lines = [
            invoke(1, "read", "null"),
            complete(1, "fail", "read", "null").with_error("no-node"),
        ];
        let report = check_bank(&history(&lines), 3, 30);
        report.found.only("account-gone");
    }

    #[test]
    fn unknown_and_refused_transfers_change_nothing_the_snapshots_must_show() {
        // Whether the unknown transfer happened or not, each snapshot adds up.
        for seen in ["[10,10,10]", "[7,13,10]"] {
            let mut lines: Vec<Op> = Vec::new();
            lines.extend(transfer(1, "info"));
            lines.extend(transfer(2, "fail"));
            lines.extend(final_read(3, seen));
            let report = check_bank(&history(&lines), 3, 30);
            assert!(report.valid, "{seen}: {report:?}");
            assert_eq!((report.transfers_info, report.transfers_fail), (1, 1));
        }
    }
}
