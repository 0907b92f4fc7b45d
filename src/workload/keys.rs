//! Independent keys, rotated so each key's history stays short (Jepsen's independent keys).

use rand::Rng;

/// Chooses the key of each operation: a bounded set of keys is active at once, each gets at
/// most `ops_per_key` operations, and a key that reached it is replaced by a fresh one.
/// Keys are numbered `0..supply`, the keys created at setup.
#[derive(Debug)]
pub struct KeyRotation {
    ops_per_key: u32,
    supply: u64,
    next_fresh: u64,
    /// Active keys and how many operations each was given.
    active: Vec<(u64, u32)>,
}

impl KeyRotation {
    /// A rotation over `supply` keys, `keys_at_once` of them active at a time.
    pub fn new(keys_at_once: usize, ops_per_key: u32, supply: u64) -> KeyRotation {
        let first = (keys_at_once as u64).min(supply);
        KeyRotation {
            ops_per_key,
            supply,
            next_fresh: first,
            active: (0..first).map(|k| (k, 0)).collect(),
        }
    }

    /// How many keys to create for `max_ops` operations so that the supply never runs out.
    pub fn supply_for(keys_at_once: usize, ops_per_key: u32, max_ops: u64) -> u64 {
        max_ops.div_ceil(u64::from(ops_per_key)) + keys_at_once as u64
    }

    /// The key of the next operation, or `None` when every key was used up.
    pub fn pick(&mut self, rng: &mut impl Rng) -> Option<u64> {
        if self.active.is_empty() {
            return None;
        }
        let i = rng.gen_range(0..self.active.len());
        let (key, used) = &mut self.active[i];
        let key = *key;
        *used += 1;
        if *used >= self.ops_per_key {
            if self.next_fresh < self.supply {
                self.active[i] = (self.next_fresh, 0);
                self.next_fresh += 1;
            } else {
                self.active.swap_remove(i);
            }
        }
        Some(key)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn each_key_gets_at_most_ops_per_key_and_few_are_active() {
        let max_ops = 1000;
        let supply = KeyRotation::supply_for(3, 7, max_ops);
        let mut rotation = KeyRotation::new(3, 7, supply);
        let mut rng = StdRng::seed_from_u64(1);
        let picks: Vec<u64> = (0..max_ops)
            .map(|_| rotation.pick(&mut rng).unwrap())
            .collect();
        let mut counts: HashMap<u64, u32> = HashMap::new();
        for k in &picks {
            *counts.entry(*k).or_default() += 1;
        }
        assert!(counts.values().all(|&n| n <= 7), "{counts:?}");
        // A key, once retired, never comes back: between its first and last use at most
        // 3 distinct keys were in play, so any window of picks holds at most 3 live keys.
        let first: HashMap<u64, usize> = picks
            .iter()
            .enumerate()
            .rev()
            .map(|(i, k)| (*k, i))
            .collect();
        let last: HashMap<u64, usize> = picks.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        for i in 0..picks.len() {
            let live = first
                .keys()
                .filter(|k| first[k] <= i && i <= last[k])
                .count();
            assert!(live <= 3, "{live} keys live at op {i}");
        }
        // Retired keys are replaced in order: keys are used from 0 upwards without gaps.
        let used = counts.len() as u64;
        assert!((0..used).all(|k| counts.contains_key(&k)));
        assert!(used <= supply);
    }

    #[test]
    fn runs_dry_only_after_the_supply() {
        let mut rotation = KeyRotation::new(2, 2, 3);
        let mut rng = StdRng::seed_from_u64(2);
        let picks: Vec<u64> = std::iter::from_fn(|| rotation.pick(&mut rng)).collect();
        assert_eq!(picks.len(), 6);
        assert_eq!(KeyRotation::new(2, 2, 0).pick(&mut rng), None);
    }
}
