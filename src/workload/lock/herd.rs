//! The client-side herd count: for each release, the watch notifications delivered to the
//! other contenders and the requests they sent in reaction.
//!
//! A release opens a window that lasts until the next release; every notification a waiter
//! receives, and every request it sends between that notification and its next wait (or its
//! acquisition), counts toward the open window. Notifications before the first release are
//! not counted.

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
}

/// Per-release load over a run: averages and maxima over the releases whose window closed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct HerdStats {
    /// Releases counted (each closed by the next release).
    pub releases: u64,
    /// Watch notifications delivered to waiters per release, on average.
    pub notifications_mean: f64,
    /// The most notifications one release caused.
    pub notifications_max: u64,
    /// Requests waiters sent in reaction per release, on average.
    pub requests_mean: f64,
    /// The most reaction requests one release caused.
    pub requests_max: u64,
}

impl HerdMeter {
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
        if n == 0 {
            return HerdStats::default();
        }
        let notifications: u64 = w.closed.iter().map(|x| x.notifications).sum();
        let requests: u64 = w.closed.iter().map(|x| x.requests).sum();
        HerdStats {
            releases: n,
            notifications_mean: notifications as f64 / n as f64,
            notifications_max: w.closed.iter().map(|x| x.notifications).max().unwrap_or(0),
            requests_mean: requests as f64 / n as f64,
            requests_max: w.closed.iter().map(|x| x.requests).max().unwrap_or(0),
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
        assert_eq!((s.notifications_max, s.requests_max), (3, 6));
        assert_eq!((s.notifications_mean, s.requests_mean), (2.0, 3.5));
        assert_eq!(HerdMeter::default().stats(), HerdStats::default());
    }
}
