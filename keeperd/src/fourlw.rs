//! Four-letter words (ruok, srvr, stat, mntr, wchs, wchc, cons, conf, envi,
//! isro), answered from the core's state in ZooKeeper 3.8's formats: the
//! mode is standalone, leader, follower or observer, and a leader's `mntr`
//! adds its learners (`zk_synced_followers`, `zk_pending_syncs`, ...).

use crate::core::{Core, Role};
use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

/// Version string reported to clients and monitors.
pub const VERSION: &str = "3.8.0-keeperd-0.1.0, built on 1970-01-01 00:00 UTC";

/// Words keeperd knows.
pub const WORDS: &[&str] = &[
    "ruok", "srvr", "stat", "mntr", "wchs", "wchc", "cons", "conf", "envi", "isro",
];

/// Whether the first four bytes of a connection are a four-letter word.
pub fn is_word(first: &[u8; 4]) -> bool {
    WORDS.iter().any(|w| w.as_bytes() == first)
}

/// The text answering `word`, honoring the whitelist.
pub fn answer(core: &Core, word: &str) -> String {
    if !core.config().allows_word(word) {
        return format!("{word} is not executed because it is not in the whitelist.\n");
    }
    let tree = core.tree();
    let traffic = core.traffic();
    let mut out = String::new();
    let srvr_tail = |out: &mut String| {
        let l = traffic.latency.get();
        let _ = writeln!(
            out,
            "Latency min/avg/max: {}/{:.4}/{}",
            l.min,
            l.avg(),
            l.max
        );
        let _ = writeln!(out, "Received: {}", traffic.packets_received.load(Relaxed));
        let _ = writeln!(out, "Sent: {}", traffic.packets_sent.load(Relaxed));
        let _ = writeln!(out, "Connections: {}", core.connection_count());
        let _ = writeln!(out, "Outstanding: {}", core.outstanding());
        let _ = writeln!(out, "Zxid: {:#x}", tree.last_zxid);
        let _ = writeln!(out, "Mode: {}", core.role().mode());
        let _ = writeln!(out, "Node count: {}", tree.node_count());
    };
    match word {
        "ruok" => out.push_str("imok"),
        "isro" => out.push_str("rw"),
        "srvr" => {
            let _ = writeln!(out, "Zookeeper version: {VERSION}");
            srvr_tail(&mut out);
        }
        "stat" => {
            let _ = writeln!(out, "Zookeeper version: {VERSION}");
            let _ = writeln!(out, "Clients:");
            for line in core.connection_lines(false) {
                let _ = writeln!(out, "{line}");
            }
            out.push('\n');
            srvr_tail(&mut out);
        }
        "cons" => {
            for line in core.connection_lines(true) {
                let _ = writeln!(out, "{line}");
            }
            out.push('\n');
        }
        "wchs" => {
            let w = core.watches();
            let _ = writeln!(
                out,
                "{} connections watching {} paths",
                w.conn_count(),
                w.path_count()
            );
            let _ = writeln!(out, "Total watches:{}", w.watch_count());
        }
        "wchc" => {
            for (session, paths) in core.watch_lines() {
                let _ = writeln!(out, "{session:#x}");
                for p in paths {
                    let _ = writeln!(out, "\t{p}");
                }
            }
        }
        "conf" => {
            out.push_str(&core.config().render(core.role().id()));
            if !matches!(core.role(), Role::Standalone) {
                // The membership as the replicated /zookeeper/config holds it.
                let (data, _) = core.tree().config();
                out.push_str(&String::from_utf8_lossy(&data));
                out.push('\n');
            }
        }
        "envi" => {
            let _ = writeln!(out, "Environment:");
            let _ = writeln!(out, "zookeeper.version={VERSION}");
            let _ = writeln!(out, "os.name=Linux");
        }
        "mntr" => mntr(core, &mut out),
        _ => {}
    }
    out
}

fn mntr(core: &Core, out: &mut String) {
    let tree = core.tree();
    let stats = core.stats();
    let traffic = core.traffic();
    let l = traffic.latency.get();
    let mut kv = |k: &str, v: String| {
        let _ = writeln!(out, "zk_{k}\t{v}");
    };
    kv("version", VERSION.to_string());
    kv("server_state", core.role().mode().into());
    kv("uptime", core.uptime().as_millis().to_string());
    kv("avg_latency", format!("{:.4}", l.avg()));
    kv("max_latency", l.max.to_string());
    kv("min_latency", l.min.to_string());
    kv(
        "packets_received",
        traffic.packets_received.load(Relaxed).to_string(),
    );
    kv(
        "packets_sent",
        traffic.packets_sent.load(Relaxed).to_string(),
    );
    kv("num_alive_connections", core.connection_count().to_string());
    kv("outstanding_requests", core.outstanding().to_string());
    kv("znode_count", tree.node_count().to_string());
    kv("watch_count", core.watches().watch_count().to_string());
    kv("ephemerals_count", tree.ephemeral_count().to_string());
    kv("approximate_data_size", tree.data_size().to_string());
    kv("global_sessions", core.session_count().to_string());
    kv("local_sessions", "0".into());
    kv("last_zxid", tree.last_zxid.to_string());
    kv("keeperd_digest", tree.digest().to_string());
    if let Role::Leader { status, .. } = core.role() {
        let n = |a: &std::sync::atomic::AtomicUsize| a.load(Relaxed).to_string();
        kv("learners", n(&status.learners));
        kv("synced_followers", n(&status.synced_followers));
        kv("synced_non_voting_followers", "0".into());
        kv("synced_observers", n(&status.synced_observers));
        kv("pending_syncs", n(&status.pending_syncs));
    }
    if let Role::Learner { .. } = core.role() {
        kv(
            "peer_state",
            format!(
                "{} - broadcast",
                core.role()
                    .mode()
                    .replace("follower", "following")
                    .replace("observer", "observing")
            ),
        );
    } else if let Role::Leader { .. } = core.role() {
        kv("peer_state", "leading - broadcast".into());
    }
    stats
        .node_created_watch
        .mntr_lines("node_created_watch_count", out);
    stats
        .node_deleted_watch
        .mntr_lines("node_deleted_watch_count", out);
    stats
        .node_changed_watch
        .mntr_lines("node_changed_watch_count", out);
    stats
        .node_children_watch
        .mntr_lines("node_children_watch_count", out);
}

#[cfg(test)]
mod tests {
    #[test]
    fn recognizes_words() {
        assert!(super::is_word(b"mntr"));
        assert!(!super::is_word(&[0, 0, 0, 45]));
    }
}
