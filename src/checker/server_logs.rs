//! Known server defects, recognised in the servers' own logs (`nodes/<node>/zookeeper.log`,
//! collected after every run). A sighting does not change a verdict (what the checkers found
//! decides it); it names, beside an anomaly, the defect the server itself admits to, so that a
//! user reading `INVALID` knows whether it is a known ZooKeeper bug or something new.

use serde::{Deserialize, Serialize};

/// A defect with a signature in a server's log.
struct KnownDefect {
    /// Its upstream issue.
    id: &'static str,
    /// What it does, in a few words.
    what: &'static str,
    /// The log line that starts its signature.
    first: &'static str,
    /// What the line after it holds (the frame the exception was thrown from).
    then: &'static str,
}

/// The defects recognised.
const KNOWN: &[KnownDefect] = &[KnownDefect {
    id: "ZOOKEEPER-4394",
    what: "a follower's DIFF sync failed (NullPointerException in Learner.syncWithLeader) \
           and its replica may have diverged",
    first: "java.lang.NullPointerException",
    then: "at org.apache.zookeeper.server.quorum.Learner.syncWithLeader(",
}];

/// A known defect seen in one node's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sighting {
    /// The defect's upstream issue, e.g. `ZOOKEEPER-4394`.
    pub id: String,
    /// The node whose log shows it.
    pub node: String,
    /// How many times the log shows it.
    pub count: usize,
    /// What it does.
    pub what: String,
}

/// The known defects each log of `logs` (node name, log text) shows, by defect then node.
pub fn sightings(logs: &[(String, String)]) -> Vec<Sighting> {
    let mut found = Vec::new();
    for defect in KNOWN {
        for (node, text) in logs {
            let lines: Vec<&str> = text.lines().collect();
            let count = lines
                .windows(2)
                .filter(|w| w[0].contains(defect.first) && w[1].trim().starts_with(defect.then))
                .count();
            if count > 0 {
                found.push(Sighting {
                    id: defect.id.into(),
                    node: node.clone(),
                    count,
                    what: defect.what.into(),
                });
            }
        }
    }
    found
}

/// The verdict line's part for `sightings` (grouped by defect, as [`sightings`] returns
/// them), e.g. `server logs: ZOOKEEPER-4394 on n1, n2 (…)`; `None` when there are none.
pub fn describe(sightings: &[Sighting]) -> Option<String> {
    let parts: Vec<String> = sightings
        .chunk_by(|a, b| a.id == b.id)
        .map(|same| {
            let nodes: Vec<&str> = same.iter().map(|s| s.node.as_str()).collect();
            format!("{} on {} ({})", same[0].id, nodes.join(", "), same[0].what)
        })
        .collect();
    (!parts.is_empty()).then(|| format!("server logs: {}", parts.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines ZooKeeper 3.8.0 on Java 17 wrote when it hit ZOOKEEPER-4394 (run of
    /// 2026-11-28, docs/findings/2026-11-28-zookeeper-4394-diverged-follower.md).
    const JAVA17: &str = "2026-11-28 22:23:37,849 [myid:2] - WARN  [QuorumPeer[myid=2]:Follower@128] - Exception when following the leader\n\
        java.lang.NullPointerException: Cannot read field \"hdr\" because \"pif\" is null\n\
        \tat org.apache.zookeeper.server.quorum.Learner.syncWithLeader(Learner.java:655)\n\
        \tat org.apache.zookeeper.server.quorum.Follower.followLeader(Follower.java:108)\n";

    /// The same on a JVM without helpful NullPointerException messages.
    const OLDER_JVM: &str =
        "WARN  [QuorumPeer[myid=3]:Follower@129] - Exception when following the leader\n\
        java.lang.NullPointerException\n\
        \tat org.apache.zookeeper.server.quorum.Learner.syncWithLeader(Learner.java:616)\n";

    #[test]
    fn the_sync_npe_is_recognised_on_the_node_whose_log_shows_it() {
        let logs = vec![
            ("n1".to_string(), "INFO all well\n".to_string()),
            ("n2".to_string(), format!("{JAVA17}{JAVA17}")),
            ("n3".to_string(), OLDER_JVM.to_string()),
        ];
        let seen = sightings(&logs);
        let found: Vec<(&str, &str, usize)> = seen
            .iter()
            .map(|s| (s.id.as_str(), s.node.as_str(), s.count))
            .collect();
        assert_eq!(
            found,
            [("ZOOKEEPER-4394", "n2", 2), ("ZOOKEEPER-4394", "n3", 1)]
        );
        let line = describe(&seen).unwrap();
        assert!(
            line.starts_with("server logs: ZOOKEEPER-4394 on n2, n3 (a follower's DIFF sync"),
            "{line}"
        );
        assert_eq!(line.matches("ZOOKEEPER-4394").count(), 1, "{line}");
    }

    #[test]
    fn other_exceptions_and_clean_logs_are_not_sightings() {
        // A NullPointerException thrown elsewhere, and the sync frame under another exception.
        let elsewhere = "java.lang.NullPointerException\n\
            \tat org.apache.zookeeper.server.quorum.SendAckRequestProcessor.flush(X.java:1)\n\
            java.net.SocketException: Connection reset\n\
            \tat org.apache.zookeeper.server.quorum.Learner.syncWithLeader(Learner.java:600)\n";
        let logs = vec![("n1".to_string(), elsewhere.to_string())];
        assert_eq!(sightings(&logs), []);
        assert_eq!(describe(&[]), None);
    }
}
