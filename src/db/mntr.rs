//! The servers' own figures (`mntr`), sampled before and after a run, so that the load a
//! recipe puts on the ensemble can be read from the servers as well as from the clients.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{four_letter_word, Db};
use crate::control::Node;

/// One server's numeric `mntr` figures, by name (`zk_packets_received`, …).
pub type Mntr = BTreeMap<String, f64>;

/// The watch fan-out sums: how many watches each kind of event triggered, in total.
const FAN_OUT: [&str; 4] = [
    "zk_sum_node_created_watch_count",
    "zk_sum_node_deleted_watch_count",
    "zk_sum_node_changed_watch_count",
    "zk_sum_node_children_watch_count",
];

/// Reads the numeric lines (`name<TAB>value`) of a `mntr` answer.
pub fn parse(text: &str) -> Mntr {
    text.lines()
        .filter_map(|line| {
            let (name, value) = line.split_once('\t')?;
            Some((name.trim().to_string(), value.trim().parse::<f64>().ok()?))
        })
        .collect()
}

/// Every node's `mntr`, by node name; a node that does not answer is left out.
pub async fn sample(db: &dyn Db, nodes: &[Node]) -> BTreeMap<String, Mntr> {
    let asks = nodes.iter().map(|n| async move {
        let answer = four_letter_word(&db.client_address(n), "mntr").await;
        (n.name.clone(), answer.map(|text| parse(&text)))
    });
    let mut samples = BTreeMap::new();
    for (name, answer) in futures::future::join_all(asks).await {
        match answer {
            Ok(figures) if !figures.is_empty() => {
                samples.insert(name, figures);
            }
            Ok(_) => tracing::warn!("{name} answered mntr with no figures"),
            Err(e) => tracing::warn!("mntr of {name}: {e:#}"),
        }
    }
    samples
}

/// What the servers saw between two samples, summed over the nodes sampled both times.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ServerLoad {
    /// Nodes counted.
    pub nodes: usize,
    /// Packets the servers received (client requests and pings).
    pub packets_received: f64,
    /// Watch notifications the servers sent, from the fan-out summaries.
    pub watch_notifications: f64,
}

impl ServerLoad {
    /// The load between `before` and `after`.
    pub fn between(before: &BTreeMap<String, Mntr>, after: &BTreeMap<String, Mntr>) -> ServerLoad {
        let mut load = ServerLoad::default();
        for (node, end) in after {
            let Some(start) = before.get(node) else {
                continue;
            };
            let delta = |key: &str| end.get(key).unwrap_or(&0.0) - start.get(key).unwrap_or(&0.0);
            load.nodes += 1;
            load.packets_received += delta("zk_packets_received");
            load.watch_notifications += FAN_OUT.iter().map(|k| delta(k)).sum::<f64>();
        }
        load
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_numbers_and_skips_text() {
        let m = parse("zk_version\t3.8.0-abc\nzk_packets_received\t42\nzk_avg_latency\t0.5\nzk_server_state\tleader\n");
        assert_eq!(m.len(), 2);
        assert_eq!(m["zk_packets_received"], 42.0);
    }

    #[test]
    fn load_sums_deltas_over_nodes_seen_twice() {
        let sample = |pairs: &[(&str, &str, f64)]| {
            let mut all: BTreeMap<String, Mntr> = BTreeMap::new();
            for (node, key, value) in pairs {
                all.entry(node.to_string())
                    .or_default()
                    .insert(key.to_string(), *value);
            }
            all
        };
        let before = sample(&[
            ("n1", "zk_packets_received", 10.0),
            ("n1", "zk_sum_node_deleted_watch_count", 1.0),
            ("n2", "zk_packets_received", 5.0),
        ]);
        let after = sample(&[
            ("n1", "zk_packets_received", 30.0),
            ("n1", "zk_sum_node_deleted_watch_count", 21.0),
            ("n1", "zk_sum_node_children_watch_count", 4.0),
            ("n2", "zk_packets_received", 6.0),
            ("n3", "zk_packets_received", 100.0),
        ]);
        let load = ServerLoad::between(&before, &after);
        assert_eq!(
            load,
            ServerLoad {
                nodes: 2,
                packets_received: 21.0,
                watch_notifications: 24.0
            }
        );
    }
}
