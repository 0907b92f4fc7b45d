//! The scenarios that run `stampede` against real local clusters (network namespaces with
//! sshd, real ZooKeeper and keeperd servers), one file per subject, pooled: six lanes, each on
//! a cluster of its own, take the scenarios of every file in turn, so that the files' longest
//! scenarios run side by side instead of one file after another. Run one file's or one
//! scenario's with a filter: `cargo test --release --test clusters -- triggers::`.

#[path = "../common/mod.rs"]
mod common;
mod ensemble;
mod faults;
mod keeperd_db;
mod lose_unfsynced;
mod recipes;
mod reconfig;
mod storage_faults;
mod suite_run;
mod test_run;
mod triggers;
mod unattended;

use common::TestCluster;

fn main() {
    let groups = [
        keeperd_db::group(),
        test_run::group(),
        recipes::group(),
        storage_faults::group(),
        triggers::group(),
        unattended::group(),
        reconfig::group(),
        faults::group(),
        suite_run::group(),
        lose_unfsynced::group(),
        ensemble::group(),
    ];
    TestCluster::new("stpool", "10.241.40.0/24").run(6, common::nothing, &groups);
}
