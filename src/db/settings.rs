//! Settings of the database under test that a workload file gives in its `db:` section (or
//! `--set db.<field>=…`), the same for every database: each is written into the servers'
//! configuration.

use serde::{Deserialize, Serialize};

/// The lowest `snapCount` both servers honour: ZooKeeper raises anything below 2 to 2 (it
/// draws its random offset from `snapCount / 2`).
pub const MIN_SNAP_COUNT: u64 = 2;

/// The highest `snapCount` ZooKeeper reads (a Java `int`; a bigger value is ignored for its
/// default).
pub const MAX_SNAP_COUNT: u64 = i32::MAX as u64;

/// The `db:` section of a workload file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DbSettings {
    /// Transactions between snapshots, written as `snapCount=` (absent: the servers' default
    /// of 100,000). keeperd snapshots after exactly this many committed transactions;
    /// ZooKeeper after a random number between `snap_count / 2 + 1` and `snap_count`, drawn
    /// again after each snapshot (so the servers of an ensemble do not snapshot together).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snap_count: Option<u64>,
}

impl DbSettings {
    /// Whether every setting is at its default (the section is left out of `test.yaml`).
    pub fn is_default(&self) -> bool {
        *self == DbSettings::default()
    }

    /// Checks the settings; the error is a sentence naming the field (`db.snap_count …`).
    pub fn validate(&self) -> Result<(), String> {
        match self.snap_count {
            Some(n) if n < MIN_SNAP_COUNT => Err(format!(
                "db.snap_count {n} is below {MIN_SNAP_COUNT} (ZooKeeper raises any snapCount under 2 to 2)"
            )),
            Some(n) if n > MAX_SNAP_COUNT => Err(format!(
                "db.snap_count {n} is above {MAX_SNAP_COUNT} (ZooKeeper reads snapCount as a 32-bit int)"
            )),
            _ => Ok(()),
        }
    }

    /// The lines these settings add to a server's configuration file (`zoo.cfg` or
    /// keeperd's), each ending in a newline; empty at the defaults.
    pub fn config_lines(&self) -> String {
        match self.snap_count {
            Some(n) => format!("snapCount={n}\n"),
            None => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snap_count_is_written_and_checked() {
        let none = DbSettings::default();
        assert!(none.is_default());
        assert_eq!(none.config_lines(), "");
        assert_eq!(none.validate(), Ok(()));
        let some: DbSettings = serde_yaml_ng::from_str("snap_count: 200").unwrap();
        assert_eq!(some.config_lines(), "snapCount=200\n");
        assert_eq!(some.validate(), Ok(()));
        let low = DbSettings {
            snap_count: Some(1),
        };
        assert!(low
            .validate()
            .unwrap_err()
            .starts_with("db.snap_count 1 is below 2"));
        let high = DbSettings {
            snap_count: Some(1 << 31),
        };
        assert!(high.validate().unwrap_err().contains("32-bit"));
        assert!(serde_yaml_ng::from_str::<DbSettings>("snapcount: 5").is_err());
    }

    #[test]
    fn both_servers_configs_carry_snap_count_only_when_set() {
        let nodes = crate::control::test_nodes(3);
        let settings = DbSettings {
            snap_count: Some(50),
        };
        let zk = crate::db::zookeeper::ZkConfig {
            settings: settings.clone(),
            ..Default::default()
        };
        let cfg = crate::db::zookeeper::render_zoo_cfg(&zk, &nodes, &nodes[0], "/d", "/c/d");
        assert!(cfg.contains("\nsnapCount=50\n"), "{cfg}");
        let kd = crate::db::keeperd::KeeperdConfig {
            settings,
            ..Default::default()
        };
        let cfg = crate::db::keeperd::render_config(&kd, &nodes, &nodes[1], "/d");
        assert!(cfg.contains("\nsnapCount=50\n"), "{cfg}");
        let zk = crate::db::zookeeper::ZkConfig::default();
        let cfg = crate::db::zookeeper::render_zoo_cfg(&zk, &nodes, &nodes[0], "/d", "/c/d");
        assert!(!cfg.contains("snapCount"), "the servers' default: {cfg}");
        let kd = crate::db::keeperd::KeeperdConfig::default();
        let cfg = crate::db::keeperd::render_config(&kd, &nodes, &nodes[1], "/d");
        assert!(!cfg.contains("snapCount"), "the servers' default: {cfg}");
    }
}
