//! The ensemble's membership as replicated state, as ZooKeeper 3.5+ keeps it: the data of
//! `/zookeeper/config`, `server.N=host:quorumPort:electionPort:participant|observer[;client]`
//! lines and `version=<hex zxid>`. A reconfiguration is an ordinary setData transaction of
//! that node whose data carries its own zxid as the version, so it is logged, replicated,
//! replayed and snapshotted like any write.
//!
//! What wins: the config file's `server.N` lines seed the node (version 0) in a data
//! directory where no reconfiguration was ever logged; once one was, the membership in the
//! data directory (the newest `/zookeeper/config` in the log and snapshots) is the
//! ensemble's, whatever the config file lists.

use crate::config::ServerSpec;
use crate::proto::err;

/// The znode holding the membership.
pub const CONFIG_PATH: &str = "/zookeeper/config";

/// A membership: every server with its role, and the zxid of the reconfiguration that made
/// it (0 for the config file's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// The servers, by id.
    pub servers: Vec<ServerSpec>,
    /// The version: the zxid of the reconfiguration that made this membership.
    pub version: i64,
}

impl Membership {
    /// The membership of `servers` at `version`.
    pub fn new(mut servers: Vec<ServerSpec>, version: i64) -> Membership {
        servers.sort_by_key(|s| s.id);
        Membership { servers, version }
    }

    /// Reads `/zookeeper/config` data.
    pub fn parse(data: &[u8]) -> Result<Membership, String> {
        let text = std::str::from_utf8(data).map_err(|_| "not UTF-8".to_string())?;
        let mut servers = Vec::new();
        let mut version = 0;
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if let Some(v) = line.strip_prefix("version=") {
                version = i64::from_str_radix(v, 16).map_err(|_| format!("bad {line:?}"))?;
            } else {
                servers.push(parse_server(line).map_err(|_| format!("bad {line:?}"))?);
            }
        }
        Ok(Membership::new(servers, version))
    }

    /// The data of `/zookeeper/config` for this membership.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for s in &self.servers {
            out.push_str(&format!("server.{}={}\n", s.id, s.render()));
        }
        out.push_str(&format!("version={:x}", self.version));
        out
    }

    /// Ids of the voting members.
    pub fn voters(&self) -> Vec<u64> {
        crate::config::voters(&self.servers)
    }

    /// Whether `id` votes.
    pub fn is_voter(&self, id: u64) -> bool {
        self.voters().contains(&id)
    }

    /// The membership an incremental reconfiguration makes of this one: the servers of
    /// `joining` (comma-separated `server.N=spec`, replacing any with the same id) added, the
    /// ids of `leaving` (comma-separated) removed. `BADARGUMENTS` for what does not parse,
    /// for a change that changes nothing, and for one that leaves no voter.
    pub fn incremental(&self, joining: &str, leaving: &str) -> Result<Vec<ServerSpec>, i32> {
        let mut servers = self.servers.clone();
        for id in list(leaving) {
            let id: u64 = id.parse().map_err(|_| err::BAD_ARGUMENTS)?;
            servers.retain(|s| s.id != id);
        }
        for spec in list(joining) {
            let spec = parse_server(spec).map_err(|_| err::BAD_ARGUMENTS)?;
            servers.retain(|s| s.id != spec.id);
            servers.push(spec);
        }
        servers.sort_by_key(|s| s.id);
        checked(&self.servers, servers)
    }

    /// The membership a non-incremental reconfiguration names (`newMembers`, comma- or
    /// newline-separated `server.N=spec`), checked as [`Membership::incremental`] does.
    pub fn replaced(&self, members: &str) -> Result<Vec<ServerSpec>, i32> {
        let mut servers = Vec::new();
        for spec in members.split(['\n', ',']).map(str::trim) {
            if spec.is_empty() || spec.starts_with("version=") {
                continue;
            }
            let spec = parse_server(spec).map_err(|_| err::BAD_ARGUMENTS)?;
            if servers.iter().any(|s: &ServerSpec| s.id == spec.id) {
                return Err(err::BAD_ARGUMENTS);
            }
            servers.push(spec);
        }
        servers.sort_by_key(|s| s.id);
        checked(&self.servers, servers)
    }
}

/// The membership `txn` makes, if it is a reconfiguration.
pub fn reconfigured(txn: &crate::txn::Txn) -> Option<Membership> {
    match &txn.body {
        crate::txn::TxnBody::SetData { path, data, .. } if path == CONFIG_PATH => {
            Membership::parse(data).ok()
        }
        _ => None,
    }
}

fn list(text: &str) -> impl Iterator<Item = &str> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn checked(before: &[ServerSpec], after: Vec<ServerSpec>) -> Result<Vec<ServerSpec>, i32> {
    if after == before || after.iter().all(|s| s.observer) {
        return Err(err::BAD_ARGUMENTS);
    }
    Ok(after)
}

/// Parses one `server.N=spec` line.
fn parse_server(line: &str) -> Result<ServerSpec, String> {
    let (key, value) = line.split_once('=').ok_or("expected server.N=spec")?;
    let id = crate::config::server_id(key.trim()).ok_or("expected server.N with N in 1..=255")?;
    ServerSpec::parse(id, value.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "server.1=10.0.0.1:2888:3888:participant;10.0.0.1:2181\n\
                        server.2=10.0.0.2:2888:3888:participant;10.0.0.2:2181\n\
                        server.3=10.0.0.3:2888:3888:participant;10.0.0.3:2181\n\
                        version=0";

    #[test]
    fn the_config_data_reads_and_renders_as_zookeeper_writes_it() {
        let m = Membership::parse(PLAN.as_bytes()).unwrap();
        assert_eq!(m.voters(), [1, 2, 3]);
        assert_eq!(m.render(), PLAN);
        let m = Membership::new(m.servers, 0x1_0000_0003);
        assert!(m.render().ends_with("\nversion=100000003"));
        assert_eq!(Membership::parse(m.render().as_bytes()).unwrap(), m);
        assert!(Membership::parse(b"server.x=a:1:2\n").is_err());
    }

    #[test]
    fn incremental_changes_remove_demote_and_rejoin() {
        let m = Membership::parse(PLAN.as_bytes()).unwrap();
        let removed = m.incremental("", "3").unwrap();
        assert_eq!(removed.len(), 2);
        let demoted = m
            .incremental("server.2=10.0.0.2:2888:3888:observer;10.0.0.2:2181", "")
            .unwrap();
        let demoted = Membership::new(demoted, 5);
        assert_eq!(demoted.voters(), [1, 3]);
        assert!(!demoted.is_voter(2));
        let back = Membership::new(removed, 7)
            .incremental("server.3=10.0.0.3:2888:3888:participant;10.0.0.3:2181", "")
            .unwrap();
        assert_eq!(back, m.servers);
        assert_eq!(m.incremental("", ""), Err(err::BAD_ARGUMENTS), "no change");
        assert_eq!(m.incremental("", "x"), Err(err::BAD_ARGUMENTS));
        assert_eq!(m.incremental("server.4", ""), Err(err::BAD_ARGUMENTS));
        assert_eq!(
            m.incremental("", "1,2,3"),
            Err(err::BAD_ARGUMENTS),
            "no voter"
        );
        let only_one = m.replaced("server.1=10.0.0.1:2888:3888;2181").unwrap();
        assert_eq!(only_one.len(), 1);
        assert_eq!(
            m.replaced("server.1=a:1:2,server.1=b:1:2"),
            Err(err::BAD_ARGUMENTS)
        );
    }
}
