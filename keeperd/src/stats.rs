//! Counters and summaries served by the four-letter words.

use std::sync::atomic::{AtomicU64, Ordering};

/// Count/sum/min/max of a sampled quantity (ZooKeeper's AvgMinMaxCounter).
#[derive(Debug, Default, Clone, Copy)]
pub struct Summary {
    /// Samples taken.
    pub count: u64,
    /// Sum of samples.
    pub sum: u64,
    /// Smallest sample.
    pub min: u64,
    /// Largest sample.
    pub max: u64,
}

impl Summary {
    /// Records one sample.
    pub fn record(&mut self, v: u64) {
        if self.count == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.count += 1;
        self.sum += v;
    }

    /// Mean of the samples (0 when none).
    pub fn avg(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// The five mntr lines `zk_{avg,min,max,cnt,sum}_<name>`.
    pub fn mntr_lines(&self, name: &str, out: &mut String) {
        use std::fmt::Write;
        let _ = writeln!(out, "zk_avg_{name}\t{:.4}", self.avg());
        let _ = writeln!(out, "zk_min_{name}\t{}", self.min);
        let _ = writeln!(out, "zk_max_{name}\t{}", self.max);
        let _ = writeln!(out, "zk_cnt_{name}\t{}", self.count);
        let _ = writeln!(out, "zk_sum_{name}\t{}", self.sum);
    }
}

/// A [`Summary`] that several threads record into.
#[derive(Debug)]
pub struct SharedSummary {
    count: AtomicU64,
    sum: AtomicU64,
    min: AtomicU64,
    max: AtomicU64,
}

impl Default for SharedSummary {
    fn default() -> Self {
        SharedSummary {
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
        }
    }
}

impl SharedSummary {
    /// Records one sample.
    pub fn record(&self, v: u64) {
        self.min.fetch_min(v, Ordering::Relaxed);
        self.max.fetch_max(v, Ordering::Relaxed);
        self.sum.fetch_add(v, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// The samples so far.
    pub fn get(&self) -> Summary {
        let count = self.count.load(Ordering::Relaxed);
        Summary {
            count,
            sum: self.sum.load(Ordering::Relaxed),
            min: if count == 0 {
                0
            } else {
                self.min.load(Ordering::Relaxed)
            },
            max: self.max.load(Ordering::Relaxed),
        }
    }
}

/// Traffic counted by the core and the connections together.
#[derive(Debug, Default)]
pub struct Traffic {
    /// Packets received from clients.
    pub packets_received: AtomicU64,
    /// Packets sent to clients.
    pub packets_sent: AtomicU64,
    /// Request latency in ms.
    pub latency: SharedSummary,
}

/// Watch statistics, kept by the core.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Watchers notified per NodeCreated event.
    pub node_created_watch: Summary,
    /// Watchers notified per NodeDeleted event.
    pub node_deleted_watch: Summary,
    /// Watchers notified per NodeDataChanged event.
    pub node_changed_watch: Summary,
    /// Watchers notified per NodeChildrenChanged event.
    pub node_children_watch: Summary,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_tracks_min_max_avg() {
        let mut s = Summary::default();
        s.record(3);
        s.record(1);
        s.record(5);
        assert_eq!((s.count, s.sum, s.min, s.max), (3, 9, 1, 5));
        let mut out = String::new();
        s.mntr_lines("x", &mut out);
        assert!(out.contains("zk_avg_x\t3.0000\n") && out.contains("zk_cnt_x\t3\n"));
        let shared = SharedSummary::default();
        assert_eq!(shared.get().min, 0);
        for v in [3, 1, 5] {
            shared.record(v);
        }
        let g = shared.get();
        assert_eq!((g.count, g.sum, g.min, g.max), (3, 9, 1, 5));
    }
}
