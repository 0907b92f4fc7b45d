//! The registry's side of a database: its [`Entry`] (a name and a constructor), the options
//! every constructor is given ([`DbOptions`], the database flags of every command), and the
//! look-ups over [`DATABASES`].

use std::path::PathBuf;

use super::{Db, DbSettings, DATABASES};
use crate::control::Node;

/// A database as the registry knows it: the name `--db` and a suite's `dbs:` give it, and how
/// it is built.
pub struct Entry {
    /// The name `--db` takes; also what [`Db::name`] says.
    pub name: &'static str,
    /// The database on `nodes`, configured from `options` (each takes what concerns it).
    pub build: Build,
}

/// A database's constructor: from the options and the nodes.
type Build = fn(&DbOptions, &[Node]) -> anyhow::Result<Box<dyn Db>>;

/// How the database is configured, whichever it is: the database flags every command that
/// builds a database takes, the workload file's `db:` settings and the local cluster's fake
/// clock.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DbOptions {
    /// An Apache ZooKeeper release tarball (path or URL) instead of the distribution's package.
    #[arg(long, global = true)]
    pub zookeeper_tarball: Option<String>,
    /// A keeperd binary to upload for `--db keeperd` (default: build it with cargo).
    #[arg(long, global = true)]
    pub keeperd_binary: Option<PathBuf>,
    /// How many of the nodes (the last ones) run keeperd as observers.
    #[arg(long, default_value_t = 0, global = true)]
    pub keeperd_observers: usize,
    /// keeperd failpoints to switch on, comma-separated (a binary built with
    /// `--features failpoints`; see keeperd/src/failpoint.rs).
    #[arg(long, value_delimiter = ',', global = true)]
    pub keeperd_failpoints: Vec<String>,
    /// The workload file's `db:` settings (`stampede test`; the defaults elsewhere).
    #[arg(skip)]
    pub settings: DbSettings,
    /// Run the servers under libfaketime, each with a clock file of its own (the local
    /// cluster, whose nodes share one kernel clock).
    #[arg(skip)]
    pub faketime: bool,
}

/// The registry's entry of the database called `name`; the error names the known ones.
pub fn entry(name: &str) -> anyhow::Result<&'static Entry> {
    let found = DATABASES.iter().find(|e| e.name == name).copied();
    found.ok_or_else(|| {
        let known: Vec<&str> = DATABASES.iter().map(|e| e.name).collect();
        anyhow::anyhow!("unknown database {name:?} (known: {})", known.join(", "))
    })
}

/// The database called `name` on `nodes`, configured from `options`.
pub fn build(name: &str, options: &DbOptions, nodes: &[Node]) -> anyhow::Result<Box<dyn Db>> {
    (entry(name)?.build)(options, nodes)
}

/// Every database stampede runs, configured as a run sets it up on `nodes`: where an earlier
/// run's servers would be, whichever database it ran.
pub fn every_kind(nodes: &[Node]) -> anyhow::Result<Vec<Box<dyn Db>>> {
    let options = DbOptions::default();
    DATABASES
        .iter()
        .map(|e| (e.build)(&options, nodes))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_database_is_found_by_its_own_name() {
        let nodes = crate::control::test_nodes(3);
        for entry in DATABASES {
            let db = build(entry.name, &DbOptions::default(), &nodes).unwrap();
            assert_eq!(db.name(), entry.name);
        }
        let kinds: Vec<String> = every_kind(&nodes)
            .unwrap()
            .iter()
            .map(|d| d.name().to_string())
            .collect();
        assert_eq!(kinds, ["zookeeper", "keeperd"]);
    }

    #[test]
    fn an_unknown_database_is_refused_naming_the_known_ones() {
        let err = entry("etcd").err().unwrap().to_string();
        assert_eq!(err, "unknown database \"etcd\" (known: zookeeper, keeperd)");
    }
}
