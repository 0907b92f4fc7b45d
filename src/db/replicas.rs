//! A server's digest of its whole state, where it reports one: keeperd's `mntr` gives
//! `zk_keeperd_digest` beside `zk_last_zxid` (Apache ZooKeeper has no such line). Servers that
//! stand at the same zxid must report the same digest: it covers sessions too, which a read of
//! the tree does not see. The replicas' comparison (`checker::replicas`) uses it as an extra
//! signal beside the trees each server serves.

use serde::{Deserialize, Serialize};

use super::four_letter_word;

/// A server's digest at the zxid it stood at when asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digest {
    /// The server's last zxid (`zk_last_zxid`).
    pub zxid: i64,
    /// Its digest (`zk_keeperd_digest`).
    pub digest: u64,
}

/// The digest the server at `address` (`host:port`) reports, if it serves and reports one.
pub async fn digest(address: &str) -> Option<Digest> {
    parse(&four_letter_word(address, "mntr").await.ok()?)
}

/// The last zxid and digest of a `mntr` answer, when it has both.
fn parse(mntr: &str) -> Option<Digest> {
    let value = |key: &str| {
        mntr.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('\t'))
            .map(str::trim)
    };
    Some(Digest {
        zxid: value("zk_last_zxid")?.parse().ok()?,
        digest: value("zk_keeperd_digest")?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_needs_both_lines() {
        let keeperd = "zk_version\t3.8.0\nzk_last_zxid\t42\nzk_keeperd_digest\t7\n";
        assert_eq!(
            parse(keeperd),
            Some(Digest {
                zxid: 42,
                digest: 7
            })
        );
        assert_eq!(parse("zk_version\t3.8.0\nzk_last_zxid\t42\n"), None);
    }
}
