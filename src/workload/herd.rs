//! The client-side herd count: for each release (a lock given back, a leader leaving office),
//! the watch notifications delivered to the waiters and the requests they sent in reaction.
//!
//! A release opens a window that lasts until the next release; every notification a waiter
//! receives, and every request it sends between that notification and its next wait (or its
//! acquisition), counts toward the open window. Notifications before the first release are
//! not counted. A recipe whose waits happen inside a library (the zookeeper-client crate's
//! own lock) cannot be counted: its meter only counts releases.

use std::sync::Mutex;

use serde::Serialize;

/// What one release caused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Window {
    notifications: u64,
    requests: u64,
}

#[derive(Debug, Default)]
struct Windows {
    open: Option<Window>,
    closed: Vec<Window>,
}

/// Counts notifications and reactions per release, shared by every contender of a run.
#[derive(Debug, Default)]
pub struct HerdMeter {
    windows: Mutex<Windows>,
    uncounted: bool,
}

/// Per-release load over a run: averages and maxima over the releases whose window closed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct HerdStats {
    /// Releases counted (each closed by the next release).
    pub releases: u64,
    /// Watch notifications delivered to waiters per release, on average (none when the
    /// waits could not be counted).
    pub notifications_mean: Option<f64>,
    /// The most notifications one release caused.
    pub notifications_max: Option<u64>,
    /// Requests waiters sent in reaction per release, on average.
    pub requests_mean: Option<f64>,
    /// The most reaction requests one release caused.
    pub requests_max: Option<u64>,
}

impl HerdMeter {
    /// A meter for waits it cannot see: it counts releases only.
    pub fn uncounted() -> HerdMeter {
        HerdMeter {
            uncounted: true,
            ..HerdMeter::default()
        }
    }

    fn windows(&self) -> std::sync::MutexGuard<'_, Windows> {
        self.windows.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A holder is about to release: closes the open window and opens a new one.
    pub fn released(&self) {
        let mut w = self.windows();
        if let Some(done) = w.open.replace(Window::default()) {
            w.closed.push(done);
        }
    }

    /// A waiter received a watch notification.
    pub fn notified(&self) {
        if let Some(open) = self.windows().open.as_mut() {
            open.notifications += 1;
        }
    }

    /// A waiter sent a request in reaction to a notification.
    pub fn reacted(&self) {
        if let Some(open) = self.windows().open.as_mut() {
            open.requests += 1;
        }
    }

    /// Averages and maxima over the closed windows.
    pub fn stats(&self) -> HerdStats {
        let w = self.windows();
        let n = w.closed.len() as u64;
        if n == 0 || self.uncounted {
            return HerdStats {
                releases: n,
                ..HerdStats::default()
            };
        }
        let mean = |count: fn(&Window) -> u64| {
            Some(w.closed.iter().map(count).sum::<u64>() as f64 / n as f64)
        };
        let max = |count: fn(&Window) -> u64| w.closed.iter().map(count).max();
        HerdStats {
            releases: n,
            notifications_mean: mean(|x| x.notifications),
            notifications_max: max(|x| x.notifications),
            requests_mean: mean(|x| x.requests),
            requests_max: max(|x| x.requests),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_release_and_ignores_what_came_before_the_first() {
        let m = HerdMeter::default();
        m.notified();
        m.reacted();
        m.released();
        for _ in 0..3 {
            m.notified();
            m.reacted();
            m.reacted();
        }
        m.released();
        m.notified();
        m.reacted();
        m.released();
        m.notified(); // the open window is not counted
        let s = m.stats();
        assert_eq!(s.releases, 2);
        assert_eq!((s.notifications_max, s.requests_max), (Some(3), Some(6)));
        assert_eq!(
            (s.notifications_mean, s.requests_mean),
            (Some(2.0), Some(3.5))
        );
        assert_eq!(HerdMeter::default().stats(), HerdStats::default());
    }

    #[test]
    fn an_uncounted_meter_counts_releases_only() {
        let m = HerdMeter::uncounted();
        m.released();
        m.notified();
        m.released();
        let s = m.stats();
        assert_eq!(s.releases, 1);
        assert_eq!((s.notifications_mean, s.requests_max), (None, None));
    }
}
