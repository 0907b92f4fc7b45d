//! Grudges: who drops whose packets during a network partition.

use std::collections::{BTreeMap, BTreeSet};

use rand::seq::SliceRandom;
use rand::Rng;

/// For each node, the nodes whose packets it drops.
pub type Grudge = BTreeMap<String, BTreeSet<String>>;

/// The shape of a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// Two halves chosen at random (the smaller half is the minority), cut from each other.
    Halves,
    /// These nodes are cut from all the others (one node isolated, or a chosen minority).
    Isolate(Vec<String>),
    /// Each node sees a majority of nodes, itself included, but no two see the same one.
    MajoritiesRing,
    /// Two halves that cannot talk to each other, and one node in the middle that talks to both.
    Bridge,
}

/// The names of the nodes running `db`, for `what` (a partition) between them: an error when
/// fewer than two run it, since a grudge among other nodes touches nothing under test.
pub fn between_servers(
    db: &dyn crate::db::Db,
    nodes: &[crate::control::Node],
    what: &str,
) -> anyhow::Result<Vec<String>> {
    let servers = crate::db::servers(db, nodes);
    let names: Vec<String> = servers.iter().map(|n| n.name.clone()).collect();
    anyhow::ensure!(
        names.len() >= 2,
        "{what} needs two {db} servers; {db} runs on {} alone",
        names.join(", "),
        db = db.name(),
    );
    Ok(names)
}

/// The nodes a grudge makes drop (or slow) somebody's packets: those it acts on.
pub fn acting(grudge: &Grudge) -> Vec<&String> {
    grudge
        .iter()
        .filter(|(_, dropped)| !dropped.is_empty())
        .map(|(name, _)| name)
        .collect()
}

/// A grudge cutting `components` completely from each other.
pub fn complete(components: &[Vec<String>]) -> Grudge {
    let mut grudge = Grudge::new();
    for (i, part) in components.iter().enumerate() {
        for node in part {
            let others = components
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .flat_map(|(_, p)| p.iter().cloned());
            grudge.entry(node.clone()).or_default().extend(others);
        }
    }
    grudge
}

/// Computes the grudge of `shape` over `nodes`, shuffling with `rng` where the shape is random.
pub fn compute(shape: &Shape, nodes: &[String], rng: &mut impl Rng) -> Grudge {
    let mut shuffled = nodes.to_vec();
    shuffled.shuffle(rng);
    match shape {
        Shape::Halves => {
            let (small, large) = shuffled.split_at(nodes.len() / 2);
            complete(&[small.to_vec(), large.to_vec()])
        }
        Shape::Isolate(cut) => {
            let rest: Vec<String> = nodes.iter().filter(|n| !cut.contains(n)).cloned().collect();
            complete(&[cut.clone(), rest])
        }
        Shape::MajoritiesRing => majorities_ring(&shuffled),
        Shape::Bridge => {
            let half = nodes.len() / 2;
            let (left, rest) = shuffled.split_at(half);
            let (_bridge, right) = rest
                .split_first()
                .expect("a bridge needs at least one node");
            let mut grudge = complete(&[left.to_vec(), right.to_vec()]);
            grudge.retain(|_, dropped| !dropped.is_empty());
            grudge
        }
    }
}

/// Each node in the ring keeps its nearest neighbours up to a majority and drops the rest.
fn majorities_ring(ring: &[String]) -> Grudge {
    let n = ring.len();
    let majority = n / 2 + 1;
    let mut grudge = Grudge::new();
    for (i, node) in ring.iter().enumerate() {
        // Neighbours on both sides, nearest first, starting with the next one.
        let visible: BTreeSet<&String> = (0..majority)
            .map(|k| {
                let offset = k.div_ceil(2) as isize * if k % 2 == 1 { 1 } else { -1 };
                &ring[(i as isize + offset).rem_euclid(n as isize) as usize]
            })
            .collect();
        let dropped = ring
            .iter()
            .filter(|m| !visible.contains(m))
            .cloned()
            .collect();
        grudge.insert(node.clone(), dropped);
    }
    grudge
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn names(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("n{i}")).collect()
    }

    fn sees(grudge: &Grudge, a: &str, b: &str) -> bool {
        a == b || !grudge.get(a).is_some_and(|d| d.contains(b))
    }

    /// Groups of nodes that all see each other both ways (connected components for symmetric grudges).
    fn visible_count(grudge: &Grudge, nodes: &[String], a: &str) -> usize {
        nodes.iter().filter(|b| sees(grudge, a, b)).count()
    }

    fn symmetric(grudge: &Grudge, nodes: &[String]) -> bool {
        nodes.iter().all(|a| {
            nodes
                .iter()
                .all(|b| sees(grudge, a, b) == sees(grudge, b, a))
        })
    }

    #[test]
    fn halves_split_into_minority_and_majority() {
        for n in [3, 5] {
            let nodes = names(n);
            for seed in 0..20 {
                let g = compute(
                    &Shape::Halves,
                    &nodes,
                    &mut rand::rngs::StdRng::seed_from_u64(seed),
                );
                assert!(symmetric(&g, &nodes));
                let mut sizes: Vec<usize> =
                    nodes.iter().map(|a| visible_count(&g, &nodes, a)).collect();
                sizes.sort();
                let minority = n / 2;
                assert_eq!(
                    sizes.iter().filter(|s| **s == minority).count(),
                    minority,
                    "{g:?}"
                );
                assert_eq!(
                    sizes.iter().filter(|s| **s == n - minority).count(),
                    n - minority,
                    "{g:?}"
                );
                assert!(
                    nodes.iter().all(|a| !g[a].contains(a)),
                    "nobody drops itself"
                );
            }
        }
    }

    #[test]
    fn isolating_one_node_cuts_it_from_everyone() {
        for n in [3, 5] {
            let nodes = names(n);
            let g = compute(
                &Shape::Isolate(vec!["n2".into()]),
                &nodes,
                &mut rand::thread_rng(),
            );
            assert_eq!(g["n2"].len(), n - 1);
            for other in nodes.iter().filter(|m| *m != "n2") {
                assert_eq!(g[other].iter().collect::<Vec<_>>(), vec!["n2"]);
            }
        }
    }

    #[test]
    fn majorities_ring_gives_each_node_its_own_majority() {
        for n in [3, 5] {
            let nodes = names(n);
            for seed in 0..20 {
                let g = compute(
                    &Shape::MajoritiesRing,
                    &nodes,
                    &mut rand::rngs::StdRng::seed_from_u64(seed),
                );
                let views: Vec<BTreeSet<&String>> = nodes
                    .iter()
                    .map(|a| nodes.iter().filter(|b| sees(&g, a, b)).collect())
                    .collect();
                for (a, view) in nodes.iter().zip(&views) {
                    assert_eq!(view.len(), n / 2 + 1, "{a} sees {view:?}");
                    assert!(view.contains(a));
                }
                let distinct: BTreeSet<_> = views.iter().collect();
                assert_eq!(
                    distinct.len(),
                    n,
                    "every node sees a different majority: {views:?}"
                );
            }
        }
    }

    #[test]
    fn bridge_keeps_one_node_in_touch_with_both_sides() {
        for n in [3, 5] {
            let nodes = names(n);
            for seed in 0..20 {
                let g = compute(
                    &Shape::Bridge,
                    &nodes,
                    &mut rand::rngs::StdRng::seed_from_u64(seed),
                );
                assert!(symmetric(&g, &nodes));
                let bridges: Vec<&String> = nodes
                    .iter()
                    .filter(|a| visible_count(&g, &nodes, a) == n)
                    .collect();
                assert_eq!(bridges.len(), 1, "{g:?}");
                for a in nodes.iter().filter(|a| *a != bridges[0]) {
                    assert_eq!(
                        visible_count(&g, &nodes, a),
                        n / 2 + 1 - (n % 2 == 0) as usize,
                        "{a}: {g:?}"
                    );
                }
            }
        }
    }
}
