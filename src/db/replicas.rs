//! Whether the replicas converged: after a run, every node of the ensemble is asked for its
//! last zxid and a digest of its state (`mntr`'s `zk_last_zxid` and `zk_keeperd_digest`, which
//! keeperd reports; Apache ZooKeeper has no such digest and is not judged). Once every node
//! stands at the same zxid, their digests must agree: servers that applied the same
//! transactions hold the same tree. A replica that kept transactions its leader never
//! committed, or lost some it should have, differs.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{four_letter_word, Db};
use crate::control::Node;

/// What the replicas' comparison found (kept in `results.json` as `replicas`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Replicas {
    /// Every node stood at `zxid` with the same digest.
    Converged { zxid: i64, nodes: usize },
    /// Nodes stood at the same `zxid` with different digests: (node, digest) each.
    Diverged {
        zxid: i64,
        digests: Vec<(String, u64)>,
    },
    /// Not judged, and why (one node, no digest, or the zxids never met).
    NotJudged(String),
}

impl Replicas {
    /// The verdict line's part, e.g. `replicas: converged (3 at zxid 0x200000017)`.
    pub fn describe(&self) -> String {
        match self {
            Replicas::Converged { zxid, nodes } => {
                format!("replicas: converged ({nodes} at zxid {zxid:#x})")
            }
            Replicas::Diverged { zxid, digests } => {
                let each: Vec<String> = digests
                    .iter()
                    .map(|(n, d)| format!("{n} {d:016x}"))
                    .collect();
                format!("replicas: DIVERGED at zxid {zxid:#x} ({})", each.join(", "))
            }
            Replicas::NotJudged(why) => format!("replicas: not judged ({why})"),
        }
    }
}

/// One node's `(last zxid, digest)` from its `mntr`, if it serves and reports both.
async fn state(db: &dyn Db, node: &Node) -> Option<(i64, u64)> {
    let mntr = four_letter_word(&db.client_address(node), "mntr")
        .await
        .ok()?;
    let value = |key: &str| {
        mntr.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('\t'))
            .map(str::trim)
    };
    Some((
        value("zk_last_zxid")?.parse().ok()?,
        value("zk_keeperd_digest")?.parse().ok()?,
    ))
}

/// Asks every node until all stand at the same zxid (sessions still expiring move it), for
/// at most `limit`, and compares their digests.
pub async fn compare(db: &dyn Db, nodes: &[Node], limit: Duration) -> Replicas {
    if nodes.len() < 2 {
        return Replicas::NotJudged("one server".into());
    }
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let asks = nodes.iter().map(|n| state(db, n));
        let states = futures::future::join_all(asks).await;
        if states.iter().all(Option::is_none) {
            return Replicas::NotJudged(format!("{} reports no digest", db.name()));
        }
        if let Some(judged) = judge(nodes, &states) {
            return judged;
        }
        if tokio::time::Instant::now() >= deadline {
            return Replicas::NotJudged(format!(
                "the servers' zxids did not meet within {limit:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The judgement when every node answered at the same zxid, else `None`.
fn judge(nodes: &[Node], states: &[Option<(i64, u64)>]) -> Option<Replicas> {
    let all: Vec<(i64, u64)> = states.iter().copied().collect::<Option<_>>()?;
    let zxid = all[0].0;
    if all.iter().any(|(z, _)| *z != zxid) {
        return None;
    }
    if all.iter().all(|(_, d)| *d == all[0].1) {
        return Some(Replicas::Converged {
            zxid,
            nodes: nodes.len(),
        });
    }
    let digests = nodes
        .iter()
        .zip(&all)
        .map(|(n, (_, d))| (n.name.clone(), *d))
        .collect();
    Some(Replicas::Diverged { zxid, digests })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: usize) -> Vec<Node> {
        crate::control::test_nodes(n)
    }

    #[test]
    fn judged_only_at_one_zxid() {
        let n = nodes(3);
        assert_eq!(judge(&n, &[Some((5, 1)), Some((4, 1)), Some((5, 1))]), None);
        assert_eq!(judge(&n, &[Some((5, 1)), None, Some((5, 1))]), None);
        assert_eq!(
            judge(&n, &[Some((5, 7)), Some((5, 7)), Some((5, 7))]),
            Some(Replicas::Converged { zxid: 5, nodes: 3 })
        );
        let diverged = judge(&n, &[Some((5, 7)), Some((5, 8)), Some((5, 7))]).unwrap();
        assert!(matches!(diverged, Replicas::Diverged { zxid: 5, .. }));
        assert!(diverged
            .describe()
            .starts_with("replicas: DIVERGED at zxid 0x5"));
    }
}
