//! Time buckets for per-interval statistics, and quantiles.

/// The test's duration cut into buckets of a round width; the remainder at the end joins
/// the last bucket, so no bucket is a sliver.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Buckets {
    width: f64,
    count: usize,
    seconds: f64,
}

impl Buckets {
    /// About 60 buckets over `seconds`, each 0.1, 0.2, 0.5, 1, 2, 5, 10, ... seconds wide.
    pub fn over(seconds: f64) -> Buckets {
        let target = (seconds / 60.0).max(0.1);
        let mut magnitude = 10f64.powf(target.log10().floor());
        let width = 'found: loop {
            for step in [1.0, 2.0, 5.0] {
                if step * magnitude >= target * (1.0 - 1e-9) {
                    break 'found step * magnitude;
                }
            }
            magnitude *= 10.0;
        };
        let count = ((seconds / width).floor() as usize).max(1);
        Buckets {
            width,
            count,
            seconds,
        }
    }

    /// How many buckets there are.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The bucket holding time `t` (seconds since the start).
    pub fn of(&self, t: f64) -> usize {
        ((t / self.width) as usize).min(self.count - 1)
    }

    /// The seconds bucket `b` covers.
    pub fn length(&self, b: usize) -> f64 {
        if b + 1 == self.count {
            (self.seconds - b as f64 * self.width).max(self.width)
        } else {
            self.width
        }
    }

    /// The middle of bucket `b`, where its value is drawn.
    pub fn middle(&self, b: usize) -> f64 {
        b as f64 * self.width + self.length(b) / 2.0
    }
}

/// The `q` quantile (0 < q ≤ 1) of ascending `sorted` values by nearest rank, or `None` for
/// no values.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len().max(1)) - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_are_round_and_give_about_sixty_buckets() {
        let widths: Vec<f64> = [60.0, 61.0, 300.0, 3600.0, 1.0]
            .map(|s| Buckets::over(s).width)
            .to_vec();
        assert_eq!(widths, [1.0, 2.0, 5.0, 100.0, 0.1]);
        assert_eq!(Buckets::over(60.0).count(), 60);
    }

    #[test]
    fn the_remainder_joins_the_last_bucket() {
        let b = Buckets::over(61.0);
        assert_eq!(b.count(), 30);
        assert_eq!(b.of(0.5), 0);
        assert_eq!(b.of(59.9), 29);
        assert_eq!(b.of(61.0), 29);
        assert_eq!(b.length(0), 2.0);
        assert_eq!(b.length(29), 3.0);
        assert_eq!(b.middle(0), 1.0);
        assert_eq!(b.middle(29), 59.5);
        let short = Buckets::over(0.05);
        assert_eq!((short.count(), short.length(0)), (1, 0.1));
    }

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), Some(50.0));
        assert_eq!(quantile(&v, 0.99), Some(99.0));
        assert_eq!(quantile(&v, 1.0), Some(100.0));
        assert_eq!(quantile(&[7.0], 0.5), Some(7.0));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
