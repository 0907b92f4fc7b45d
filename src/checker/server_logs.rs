//! Known server defects, recognised in the servers' own logs (`nodes/<node>/zookeeper.log`,
//! collected after every run). A sighting does not change a verdict (what the checkers found
//! decides it); it names, beside an anomaly, the defect the server itself admits to, so that a
//! user reading `INVALID` knows whether it is a known ZooKeeper bug or something new.

use serde::{Deserialize, Serialize};

/// A defect with a signature in a server's log.
struct KnownDefect {
    /// Its upstream issue, or a name of stampede's for one not yet reported upstream.
    id: &'static str,
    /// What it does, in a few words.
    what: &'static str,
    /// The log line that starts its signature.
    first: &'static str,
    /// What must follow that line.
    then: Then,
}

/// Where the rest of a defect's signature is, after its first line.
enum Then {
    /// On the next line (the frame an exception was thrown from).
    NextLine(&'static str),
    /// On any line of the exception the first line logged (its message line, then its stack
    /// trace's indented and `Caused by` lines): one of these.
    InRecord(&'static [&'static str]),
}

impl Then {
    /// Whether `after`, the lines after a first line, complete the signature.
    fn holds(&self, after: &[&str]) -> bool {
        match self {
            Then::NextLine(frame) => after
                .first()
                .is_some_and(|line| line.trim().starts_with(frame)),
            Then::InRecord(frames) => {
                let trace = after.iter().skip(1).take_while(|line| in_a_trace(line));
                after
                    .iter()
                    .take(1)
                    .chain(trace)
                    .any(|line| frames.iter().any(|f| line.contains(f)))
            }
        }
    }
}

/// Whether `line` continues a stack trace (a frame, `... n more`, or a cause).
fn in_a_trace(line: &str) -> bool {
    line.starts_with(char::is_whitespace) || line.starts_with("Caused by")
}

/// The defects recognised.
const KNOWN: &[KnownDefect] = &[
    KnownDefect {
        id: "ZOOKEEPER-4394",
        what: "a follower's DIFF sync failed (NullPointerException in Learner.syncWithLeader) \
               and its replica may have diverged",
        first: "java.lang.NullPointerException",
        then: Then::NextLine("at org.apache.zookeeper.server.quorum.Learner.syncWithLeader("),
    },
    // Found by stampede (docs/findings/2026-11-29-half-read-snapshot.md): FileSnap reads the
    // next older snapshot into the same DataTree, whose deserialize clears the nodes but not
    // the ephemeral owners read from the damaged one; a bit flipped in an owner makes a
    // persistent znode look ephemeral, and a server that then leads deletes it as a dead
    // session's, on its own replica only.
    KnownDefect {
        id: "half-read-snapshot (unreported)",
        what: "a snapshot failed to load part-way and an older one was loaded; the ephemeral \
               owners read from the damaged one stay, and the server deletes those znodes, \
               unreplicated, when it next leads",
        first: "problem reading snap file",
        then: Then::InRecord(&[
            "at org.apache.zookeeper.server.DataTree.deserialize(",
            "at org.apache.zookeeper.server.persistence.SnapStream.checkSealIntegrity(",
        ]),
    },
    // A power loss after a new txn log was created but before its header was on disk leaves
    // it empty or short; 3.8 reads its header at startup, hits the end of the file and exits.
    // Fixed in 3.9.3, which deletes an empty last log.
    KnownDefect {
        id: "ZOOKEEPER-2332",
        what: "the server refuses to start: its newest txn log ends inside its header (an \
               empty log left by a crash or power loss)",
        first: "Unable to load database on disk",
        then: Then::InRecord(&[
            "at org.apache.zookeeper.server.persistence.FileHeader.deserialize(",
        ]),
    },
];

/// A known defect seen in one node's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sighting {
    /// The defect's upstream issue, e.g. `ZOOKEEPER-4394`, or stampede's name for it.
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
            let count = (0..lines.len())
                .filter(|&i| lines[i].contains(defect.first) && defect.then.holds(&lines[i + 1..]))
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

    /// Each sighting as (defect, node, count).
    fn by_node(seen: &[Sighting]) -> Vec<(&str, &str, usize)> {
        seen.iter()
            .map(|s| (s.id.as_str(), s.node.as_str(), s.count))
            .collect()
    }

    #[test]
    fn the_sync_npe_is_recognised_on_the_node_whose_log_shows_it() {
        let logs = vec![
            ("n1".to_string(), "INFO all well\n".to_string()),
            ("n2".to_string(), format!("{JAVA17}{JAVA17}")),
            ("n3".to_string(), OLDER_JVM.to_string()),
        ];
        let seen = sightings(&logs);
        let found = by_node(&seen);
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

    /// What ZooKeeper 3.8.0 wrote when it fell back from a snapshot it had half read (run of
    /// 2026-11-29, docs/findings/2026-11-29-half-read-snapshot.md), cut to its first frames.
    const HALF_READ: &str = "2026-11-29 11:52:32,144 [myid:2] - INFO  [main:FileSnap@85] - Reading snapshot /d/version-2/snapshot.200000298\n\
        2026-11-29 11:52:32,147 [myid:2] - WARN  [main:FileSnap@105] - problem reading snap file /d/version-2/snapshot.200000298\n\
        java.io.IOException: Unreasonable length = 842411313\n\
        \tat org.apache.jute.BinaryInputArchive.checkLength(BinaryInputArchive.java:166)\n\
        \tat org.apache.jute.BinaryInputArchive.readString(BinaryInputArchive.java:116)\n\
        \tat org.apache.zookeeper.server.DataTree.deserialize(DataTree.java:1409)\n\
        \tat org.apache.zookeeper.server.util.SerializeUtils.deserializeSnapshot(SerializeUtils.java:161)\n\
        2026-11-29 11:52:32,148 [myid:2] - INFO  [main:FileSnap@85] - Reading snapshot /d/version-2/snapshot.20000025d\n";

    /// The same when the tree was read whole and the checksum after it failed.
    const BAD_CHECKSUM: &str = "2026-11-29 11:52:32,147 [myid:3] - WARN  [main:FileSnap@105] - problem reading snap file /d/version-2/snapshot.10000022a\n\
        java.io.IOException: CRC corruption\n\
        \tat org.apache.zookeeper.server.persistence.SnapStream.checkSealIntegrity(SnapStream.java:178)\n\
        \tat org.apache.zookeeper.server.persistence.FileSnap.deserialize(FileSnap.java:91)\n";

    #[test]
    fn a_snapshot_read_part_way_or_whole_then_refused_is_recognised() {
        let logs = vec![
            ("n1".to_string(), BAD_CHECKSUM.to_string()),
            ("n2".to_string(), HALF_READ.to_string()),
        ];
        let seen = sightings(&logs);
        let found = by_node(&seen);
        let id = "half-read-snapshot (unreported)";
        assert_eq!(found, [(id, "n1", 1), (id, "n2", 1)]);
        let line = describe(&seen).unwrap();
        assert!(
            line.starts_with(&format!("server logs: {id} on n1, n2 (a snapshot failed")),
            "{line}"
        );
    }

    /// What ZooKeeper 3.8.0 wrote when it restarted on a txn log whose header a power loss
    /// threw away (run of 2026-11-29, the trigger scenario's lose-unfsynced on NEWLEADER).
    const EMPTY_LOG: &str = "2026-11-29 14:55:34,469 [myid:1] - ERROR [main:QuorumPeer@1200] - Unable to load database on disk\n\
        java.io.EOFException\n\
        \tat java.base/java.io.DataInputStream.readInt(DataInputStream.java:386)\n\
        \tat org.apache.jute.BinaryInputArchive.readInt(BinaryInputArchive.java:96)\n\
        \tat org.apache.zookeeper.server.persistence.FileHeader.deserialize(FileHeader.java:67)\n\
        \tat org.apache.zookeeper.server.persistence.FileTxnLog$FileTxnIterator.inStreamCreated(FileTxnLog.java:707)\n\
        2026-11-29 14:55:34,472 [myid:1] - ERROR [main:QuorumPeerMain@114] - Unexpected exception, exiting abnormally\n\
        java.lang.RuntimeException: Unable to run quorum server \n\
        \tat org.apache.zookeeper.server.quorum.QuorumPeer.loadDataBase(QuorumPeer.java:1201)\n\
        Caused by: java.io.EOFException\n\
        \tat org.apache.zookeeper.server.persistence.FileHeader.deserialize(FileHeader.java:67)\n";

    #[test]
    fn a_txn_log_ending_in_its_header_is_recognised_once_per_start() {
        let logs = vec![("n1".to_string(), format!("{EMPTY_LOG}{EMPTY_LOG}"))];
        let seen = sightings(&logs);
        assert_eq!(by_node(&seen), [("ZOOKEEPER-2332", "n1", 2)]);
        let line = describe(&seen).unwrap();
        assert!(
            line.starts_with("server logs: ZOOKEEPER-2332 on n1 (the server refuses to start"),
            "{line}"
        );
    }

    #[test]
    fn a_database_refused_for_another_reason_is_not_a_sighting() {
        // A log with a wrong magic number (corrupted, not cut short) is refused elsewhere.
        let magic = "2026-11-29 14:55:34,469 [myid:1] - ERROR [main:QuorumPeer@1200] - Unable to load database on disk\n\
            java.io.IOException: Transaction log: /d/version-2/log.1 has invalid magic number 0 != 1514884167\n\
            \tat org.apache.zookeeper.server.persistence.FileTxnLog$FileTxnIterator.inStreamCreated(FileTxnLog.java:709)\n\
            2026-11-29 14:55:35,000 [myid:1] - INFO  [main:Other@1] - later\n\
            \tat org.apache.zookeeper.server.persistence.FileHeader.deserialize(FileHeader.java:67)\n";
        let logs = vec![("n1".to_string(), magic.to_string())];
        assert_eq!(sightings(&logs), []);
    }

    #[test]
    fn a_snapshot_refused_before_its_tree_is_read_is_not_a_sighting() {
        // Refused on its header: nothing of it reached the tree. The frame of a later record
        // does not belong to this one.
        let header = "2026-11-29 11:52:32,147 [myid:2] - WARN  [main:FileSnap@105] - problem reading snap file /d/snapshot.5\n\
            java.io.IOException: mismatching magic headers 0 !=  1514885966\n\
            \tat org.apache.zookeeper.server.persistence.FileSnap.deserialize(FileSnap.java:140)\n\
            2026-11-29 11:52:33,000 [myid:2] - WARN  [main:Other@1] - something else\n\
            \tat org.apache.zookeeper.server.DataTree.deserialize(DataTree.java:1409)\n";
        let logs = vec![("n2".to_string(), header.to_string())];
        assert_eq!(sightings(&logs), []);
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
