//! What both databases share for membership changes: the superuser the reconfiguration
//! nemesis authenticates as, and the line a server has in the dynamic configuration
//! (`/zookeeper/config`), which ZooKeeper and keeperd write alike.

/// The superuser the reconfiguration nemesis authenticates as (`digest` scheme): servers
/// accept it through their superDigest setting, which gives no other client anything it did
/// not have.
pub const SUPERUSER: &str = "stampede:reconfig";

/// The digest of [`SUPERUSER`], `user:base64(sha1(user:password))`.
pub const SUPER_DIGEST: &str = "stampede:eDe4kmqjwu6mF9gxDXhYED3R44s=";

/// The ports of a server in the membership.
#[derive(Debug, Clone, Copy)]
pub struct MemberPorts {
    /// Port learners connect to when the server leads.
    pub quorum: u16,
    /// Port of leader election.
    pub election: u16,
    /// Port clients connect to.
    pub client: u16,
}

/// One server's line in the dynamic configuration, without the `server.N=` prefix:
/// `host:quorum:election:participant|observer;host:client`.
pub fn member_line(host: &str, ports: MemberPorts, observer: bool) -> String {
    let role = if observer { "observer" } else { "participant" };
    format!(
        "{host}:{}:{}:{role};{host}:{}",
        ports.quorum, ports.election, ports.client
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_zookeepers_dynamic_config_form() {
        let ports = MemberPorts {
            quorum: 2888,
            election: 3888,
            client: 2181,
        };
        assert_eq!(
            member_line("10.0.0.1", ports, false),
            "10.0.0.1:2888:3888:participant;10.0.0.1:2181"
        );
        assert_eq!(
            member_line("10.0.0.2", ports, true),
            "10.0.0.2:2888:3888:observer;10.0.0.2:2181"
        );
    }
}
