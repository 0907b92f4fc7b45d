//! The pace of a nemesis schedule: how long between faults and how long each lasts, fitted so
//! that a package's faults, started in turn, each come within the time limit. A user who picks
//! a package of five faults for 40 s gets all five, not the first one at the workload's
//! default pace (a fault every 10 s for 10 s).

use std::time::Duration;

use super::GeneratorConfig;

/// The shortest gap between faults a fitted pace keeps.
const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// The shortest a fitted fault lasts (unless the workload asks for less): long enough for
/// an election, a session's expiry or a restart to happen under it.
const MIN_DURATION: Duration = Duration::from_secs(5);

/// How a schedule paces its faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// Before each fault.
    pub interval: Duration,
    /// How long each lasts.
    pub duration: Duration,
    /// How many faults come in turn.
    pub faults: usize,
    /// The pace the workload asked for, when it was shortened to reach every fault.
    pub asked: Option<(Duration, Duration)>,
}

impl Pace {
    /// The pace of `faults` faults in turn under `cfg`: its `nemesis_interval` and
    /// `nemesis_duration` when each fault starts within `cfg.time_limit` at that pace, the
    /// last with time left to act (its duration, up to [`MIN_DURATION`]); otherwise both
    /// shortened in the same proportion until each does, down to [`MIN_INTERVAL`] and
    /// [`MIN_DURATION`] (or the duration asked, when shorter). A limit too short even then is
    /// an error naming the least that reaches each (the run keeps the pace asked).
    pub fn fitted(faults: usize, cfg: &GeneratorConfig) -> Result<Pace, String> {
        let asked = Pace::asked(faults, cfg);
        let (interval, duration, limit) = (asked.interval, asked.duration, cfg.time_limit.0);
        if faults <= 1 || asked.span() <= limit {
            return Ok(asked);
        }
        let scale = limit.as_secs_f64() / asked.span().as_secs_f64();
        let shortest = duration.min(MIN_DURATION);
        let mut fitted = Pace {
            interval: interval.mul_f64(scale),
            duration: duration.mul_f64(scale).max(shortest),
            asked: Some((interval, duration)),
            ..asked
        };
        if fitted.span() > limit {
            // The durations at their floor: the intervals take what is left.
            let held = fitted.span() - fitted.interval * fitted.count();
            fitted.interval = limit.saturating_sub(held) / fitted.count();
        }
        let least = Pace {
            interval: MIN_INTERVAL,
            duration: shortest,
            ..asked
        };
        if fitted.interval < MIN_INTERVAL {
            return Err(format!(
                "time limit {} s is too short for the {faults} faults of the nemesis package: \
                 at least {} s reaches each (every {} s for {} s)",
                limit.as_secs_f64(),
                least.span().as_secs_f64().ceil(),
                (least.interval + least.duration).as_secs_f64(),
                least.duration.as_secs_f64()
            ));
        }
        Ok(fitted)
    }

    /// How many faults, as a multiplier.
    fn count(&self) -> u32 {
        u32::try_from(self.faults).unwrap_or(u32::MAX)
    }

    /// From the schedule's start to the last fault's start plus its time to act: every
    /// interval, every duration but the last, and the last up to [`MIN_DURATION`].
    fn span(&self) -> Duration {
        let n = self.count();
        self.interval * n + self.duration * n.saturating_sub(1) + self.duration.min(MIN_DURATION)
    }

    /// The pace a run's schedule keeps: [`fitted`](Self::fitted), or the one asked when none
    /// fits (the plan warns of that before the run).
    pub fn of_run(faults: usize, cfg: &GeneratorConfig) -> Pace {
        Pace::fitted(faults, cfg).unwrap_or_else(|_| Pace::asked(faults, cfg))
    }

    /// The pace `cfg` asks for, as it is.
    pub fn asked(faults: usize, cfg: &GeneratorConfig) -> Pace {
        Pace {
            interval: cfg.nemesis_interval.0,
            duration: cfg.nemesis_duration.0,
            faults,
            asked: None,
        }
    }

    /// What a shortened pace is, said once before the run: `None` when it is as asked.
    pub fn note(&self) -> Option<String> {
        let (interval, duration) = self.asked?;
        Some(format!(
            "the {} faults of the package come every {:.1} s for {:.1} s, so that each comes \
             within the time limit (nemesis_interval {} s and nemesis_duration {} s would \
             reach fewer)",
            self.faults,
            (self.interval + self.duration).as_secs_f64(),
            self.duration.as_secs_f64(),
            interval.as_secs_f64(),
            duration.as_secs_f64()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config;

    fn cfg(limit: u64, interval: u64, duration: u64) -> GeneratorConfig {
        let secs = |s| config::Duration(Duration::from_secs(s));
        GeneratorConfig {
            time_limit: secs(limit),
            nemesis_interval: secs(interval),
            nemesis_duration: secs(duration),
            ..GeneratorConfig::default()
        }
    }

    #[test]
    fn a_package_that_fits_keeps_the_pace_asked() {
        let pace = Pace::fitted(3, &cfg(60, 10, 10)).unwrap();
        // Held to the end: the last fault starts in time, so the pace stays.
        assert_eq!(Pace::fitted(2, &cfg(60, 2, 30)).unwrap().asked, None);
        assert_eq!(
            (pace.interval, pace.duration, pace.asked),
            (Duration::from_secs(10), Duration::from_secs(10), None)
        );
        assert_eq!(pace.note(), None);
        // One fault (or a random mix, one nemesis) is never refitted.
        assert_eq!(Pace::fitted(1, &cfg(5, 10, 10)).unwrap().asked, None);
    }

    #[test]
    fn a_package_too_long_for_the_limit_is_paced_so_every_fault_comes() {
        for (faults, limit) in [(2, 30), (5, 40), (6, 60), (5, 60)] {
            let pace = Pace::fitted(faults, &cfg(limit, 10, 10)).unwrap();
            assert!(
                pace.span() <= Duration::from_secs(limit),
                "{faults} in {limit}: {pace:?}"
            );
            assert!(pace.interval >= MIN_INTERVAL && pace.duration >= MIN_DURATION);
            assert_eq!(
                pace.asked,
                Some((Duration::from_secs(10), Duration::from_secs(10)))
            );
            assert!(pace
                .note()
                .unwrap()
                .starts_with(&format!("the {faults} faults")));
        }
        // A workload asking for shorter faults than the floor keeps them.
        let pace = Pace::fitted(4, &cfg(10, 2, 1)).unwrap();
        assert_eq!(pace.duration, Duration::from_secs(1));
        assert!(pace.span() <= Duration::from_secs(10), "{pace:?}");
    }

    #[test]
    fn a_limit_too_short_for_every_fault_is_refused_with_the_least_that_reaches_them() {
        // 6 intervals of 1 s, 5 faults of 5 s, the last one's 5 s: 36 s.
        let error = Pace::fitted(6, &cfg(20, 10, 10)).unwrap_err();
        assert!(
            error.starts_with("time limit 20 s is too short for the 6 faults")
                && error.contains("at least 36 s reaches each (every 6 s for 5 s)"),
            "{error}"
        );
        assert!(Pace::fitted(6, &cfg(36, 10, 10)).is_ok());
        assert!(Pace::fitted(6, &cfg(35, 10, 10)).is_err());
    }
}
