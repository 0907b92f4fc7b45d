//! Quantiles of durations taken from a history (latencies, failovers), in milliseconds.

use serde::{Deserialize, Serialize};

/// Quantiles of a set of durations, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Quantiles {
    /// How many durations.
    pub count: u64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// The longest.
    pub max_ms: f64,
}

impl Quantiles {
    /// Nearest-rank quantiles of `ns` (nanoseconds); all zero when empty.
    pub fn of(mut ns: Vec<u64>) -> Quantiles {
        if ns.is_empty() {
            return Quantiles::default();
        }
        ns.sort_unstable();
        let at = |q: f64| {
            let rank = (q * ns.len() as f64).ceil() as usize;
            ns[rank.clamp(1, ns.len()) - 1] as f64 / 1e6
        };
        Quantiles {
            count: ns.len() as u64,
            p50_ms: at(0.5),
            p90_ms: at(0.9),
            p99_ms: at(0.99),
            max_ms: at(1.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles_in_milliseconds() {
        let q = Quantiles::of((1..=100).map(|ms| ms * 1_000_000).collect());
        assert_eq!(
            (q.count, q.p50_ms, q.p90_ms, q.p99_ms, q.max_ms),
            (100, 50.0, 90.0, 99.0, 100.0)
        );
        assert_eq!(Quantiles::of(Vec::new()), Quantiles::default());
    }
}
