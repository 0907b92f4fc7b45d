//! The nemesis's random choices: which nodes a target picks, how a partition splits them, and
//! which fault of a random mix comes next. Each fault draws from a generator of its own,
//! seeded from the run's seed and the fault's place in its package, so a run with the same
//! seed and package makes the same choices in the same order, however the faults' starts
//! interleave in time.

use std::sync::{Arc, Mutex};

use rand::rngs::StdRng;
use rand::SeedableRng;

/// A seeded source of random choices, shared by the clones of one fault.
#[derive(Clone, Debug)]
pub struct Dice {
    seed: u64,
    rng: Arc<Mutex<StdRng>>,
}

impl Dice {
    /// Dice that draw from `seed`.
    pub fn seeded(seed: u64) -> Dice {
        Dice {
            seed,
            rng: Arc::new(Mutex::new(StdRng::seed_from_u64(seed))),
        }
    }

    /// The dice of a run's faults, from the run's `seed` (a part of its own, apart from the
    /// workloads').
    pub fn for_faults(seed: u64) -> Dice {
        Dice::seeded(seed).split(0)
    }

    /// The dice of a run's workloads, from the run's `seed`: each workload's seed is drawn
    /// from a part split by its place.
    pub fn for_workloads(seed: u64) -> Dice {
        Dice::seeded(seed).split(1)
    }

    /// Dice of their own for the part `stream` of what these dice serve (a package's fault, a
    /// sequence's step): their draws do not depend on how many these dice have made.
    pub fn split(&self, stream: u64) -> Dice {
        Dice::seeded(mix(self.seed ^ mix(stream.wrapping_add(1))))
    }

    /// Draws with `choose`.
    pub fn roll<T>(&self, choose: impl FnOnce(&mut StdRng) -> T) -> T {
        choose(&mut self.rng.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// SplitMix64's finaliser: spreads the bits of `x`, so that near seeds give unrelated streams.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    fn draws(dice: &Dice) -> Vec<u32> {
        (0..8)
            .map(|_| dice.roll(|r| r.gen_range(0..1000)))
            .collect()
    }

    #[test]
    fn the_same_seed_draws_the_same_and_another_seed_or_part_does_not() {
        assert_eq!(draws(&Dice::seeded(7)), draws(&Dice::seeded(7)));
        assert_ne!(draws(&Dice::seeded(7)), draws(&Dice::seeded(8)));
        let dice = Dice::seeded(7);
        assert_ne!(draws(&dice.split(0)), draws(&dice.split(1)));
        // A part's draws do not depend on what the whole drew before it was split.
        let used = Dice::seeded(7);
        draws(&used);
        assert_eq!(draws(&used.split(1)), draws(&Dice::seeded(7).split(1)));
        // A run's faults and its workloads draw from parts of their own: the first fault's
        // dice are not the first workload's.
        let first_fault = Dice::for_faults(7).split(0);
        assert_ne!(draws(&first_fault), draws(&Dice::for_workloads(7).split(0)));
    }
}
