//! What a person looks at after a run: plots of its history as PNG files in the results
//! folder (`latency-raw.png`, `latency-quantiles.png`, `rate.png`, each with the intervals
//! when a fault was active shaded behind the data), and [`timeline`], the `timeline.html`
//! picture of the history. [`html::escape`] is the one escaping of text for HTML and XML;
//! the fault kinds have one set of colours, in `style`.
//!
//! Text is drawn with an embedded font, so rendering needs neither fontconfig nor any font
//! installed on the machine. [`pair_ops`] turns a history into operation spans for anyone else
//! who draws one; the fault bands come from [`crate::history::fault_intervals`].

mod buckets;
mod canvas;
mod clock_skew;
mod font;
pub mod html;
mod latency_quantiles;
mod latency_raw;
mod op_spans;
mod rate;
pub mod recipes;
mod style;
pub mod timeline;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::history::{fault_intervals, FaultInterval, Op, Process};

pub use canvas::PlotArea;
pub use clock_skew::plot_clock_skew;
pub use latency_quantiles::plot_latency_quantiles;
pub use latency_raw::plot_latency_raw;
pub use op_spans::{pair_ops, OpSpan};
pub use rate::plot_rate;

/// What the plots are drawn from: the client operations, the faults, and the test's length.
#[derive(Debug, Clone)]
pub struct PlotData<'a> {
    /// The client operations (not the nemesis's), in invocation order.
    pub ops: Vec<OpSpan<'a>>,
    /// When each fault was active.
    pub faults: Vec<FaultInterval>,
    /// Seconds from the start of the test to its last op (at least 1, for a readable axis).
    pub seconds: f64,
}

impl<'a> PlotData<'a> {
    /// Reads the plot data out of a history (ops in history order).
    pub fn new(history: &'a [Op]) -> PlotData<'a> {
        let end = history.iter().map(|o| o.time).max().unwrap_or(0);
        PlotData {
            ops: pair_ops(history)
                .into_iter()
                .filter(|s| matches!(s.invoke.process, Process::Client(_)))
                .collect(),
            faults: fault_intervals(history),
            seconds: (end as f64 / 1e9).max(1.0),
        }
    }

    /// The distinct operation functions (`read`, `write`, ...), sorted.
    fn functions(&self) -> Vec<&'a str> {
        let set: BTreeSet<&'a str> = self.ops.iter().map(|s| s.invoke.f.as_str()).collect();
        set.into_iter().collect()
    }
}

/// A function that draws one plot of the plot data into a PNG file.
pub type PlotFn = fn(&PlotData<'_>, &Path) -> anyhow::Result<PlotArea>;

/// The plots of a results folder: file name and how to draw it.
pub const PLOTS: [(&str, PlotFn); 3] = [
    ("latency-raw.png", plot_latency_raw),
    ("latency-quantiles.png", plot_latency_quantiles),
    ("rate.png", plot_rate),
];

/// Draws `latency-raw.png`, `latency-quantiles.png` and `rate.png` for `history` into `dir`,
/// and `clock-skew.png` when the history has clock faults, and returns their paths.
pub fn write_plots(history: &[Op], dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let data = PlotData::new(history);
    let mut paths = PLOTS
        .into_iter()
        .map(|(name, plot)| {
            let path = dir.join(name);
            plot(&data, &path).map(|_| path)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let skew = dir.join("clock-skew.png");
    if plot_clock_skew(history, &skew)?.is_some() {
        paths.push(skew);
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::io::BufReader;

    use plotters::style::Color;

    use super::canvas::{HEIGHT, WIDTH};
    use super::style::{fault_colour, BAND_OPACITY};
    use super::*;
    use crate::history::testing::op;
    use crate::history::OpType;

    const S: u64 = 1_000_000_000;
    const MS: u64 = 1_000_000;

    /// A 60 s history: two clients doing reads, writes and cas every 100 ms with 2–20 ms
    /// latencies, a partition from 10 s to 20 s (during which ops fail or time out after 1 s)
    /// and a kill from 35 s to 45 s.
    fn synthetic_history() -> Vec<Op> {
        let mut events: Vec<(u64, OpType, Process, String)> = Vec::new();
        let n = Process::NEMESIS;
        for (kind, from, to) in [("partition", 10, 20), ("kill", 35, 45)] {
            let start = format!("start-{kind}");
            let stop = format!("stop-{kind}");
            events.push((from * S - 50 * MS, OpType::Invoke, n, start.clone()));
            events.push((from * S, OpType::Info, n, start));
            events.push((to * S - 50 * MS, OpType::Invoke, n, stop.clone()));
            events.push((to * S, OpType::Info, n, stop));
        }
        let mut next_process = 0;
        for lane in 0..2u64 {
            let mut process = Process::Client(next_process);
            next_process += 1;
            let mut t = lane * 37 * MS;
            let mut i = lane;
            while t < 60 * S {
                let f = ["read", "write", "cas"][(i % 3) as usize].to_owned();
                let partitioned = (10 * S..20 * S).contains(&t);
                let (latency, outcome) = match (partitioned, i % 4) {
                    (true, 0) => (1000 * MS, OpType::Info),
                    (true, _) => (5 * MS, OpType::Fail),
                    (false, _) => ((2 + (i * 7) % 19) * MS, OpType::Ok),
                };
                events.push((t, OpType::Invoke, process, f.clone()));
                events.push((t + latency, outcome, process, f));
                if outcome == OpType::Info {
                    process = Process::Client(next_process);
                    next_process += 1;
                }
                t += latency + 100 * MS;
                i += 1;
            }
        }
        events.sort_by_key(|e| e.0);
        events
            .into_iter()
            .enumerate()
            .map(|(i, (time, kind, process, f))| op(i as u64, time, kind, process, &f))
            .collect()
    }

    fn read_png(path: &Path) -> (u32, u32, Vec<u8>) {
        let decoder = png::Decoder::new(BufReader::new(File::open(path).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!(info.color_type, png::ColorType::Rgb);
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    }

    /// The colour of a band of `kind` over the white background.
    fn tint(kind: &str) -> [f64; 3] {
        let (r, g, b) = fault_colour(kind).rgb();
        [r, g, b].map(|c| 255.0 * (1.0 - BAND_OPACITY) + f64::from(c) * BAND_OPACITY)
    }

    /// The share of the data area's pixels in the column at `seconds` that have `kind`'s tint.
    fn tinted_share(rgb: &[u8], area: &PlotArea, seconds: f64, kind: &str) -> f64 {
        let width = f64::from(area.x_pixels.end - area.x_pixels.start);
        let x = area.x_pixels.start + (seconds / area.seconds * width) as i32;
        let want = tint(kind);
        let rows = area.y_pixels.clone();
        let hits = rows
            .clone()
            .filter(|&y| {
                let at = ((y as u32 * WIDTH + x as u32) * 3) as usize;
                (0..3).all(|c| (f64::from(rgb[at + c]) - want[c]).abs() <= 2.0)
            })
            .count();
        hits as f64 / rows.len() as f64
    }

    #[test]
    fn plots_shade_fault_intervals_and_only_them() {
        let history = synthetic_history();
        let data = PlotData::new(&history);
        assert_eq!(data.faults.len(), 2);
        let dir = tempfile::tempdir().unwrap();
        for (name, plot) in PLOTS {
            let path = dir.path().join(name);
            let area = plot(&data, &path).unwrap();
            let (w, h, rgb) = read_png(&path);
            assert_eq!((w, h), (WIDTH, HEIGHT), "{name}");
            for (t, kind, inside) in [
                // Off the whole seconds, where the vertical grid lines are.
                (10.3, "partition", true),
                (19.7, "partition", true),
                (40.4, "kill", true),
                (5.3, "partition", false),
                // Just before the partition took effect and just after it was healed.
                (9.7, "partition", false),
                (20.3, "partition", false),
                (28.3, "partition", false),
                (28.3, "kill", false),
                (50.4, "kill", false),
            ] {
                let share = tinted_share(&rgb, &area, t, kind);
                if inside {
                    assert!(share > 0.7, "{name} at {t}s: only {share:.2} tinted {kind}");
                } else {
                    assert_eq!(share, 0.0, "{name} at {t}s: tinted {kind}");
                }
            }
        }
    }

    #[test]
    fn write_plots_writes_the_three_files() {
        let history = synthetic_history();
        let dir = tempfile::tempdir().unwrap();
        let paths = write_plots(&history, dir.path()).unwrap();
        let names: Vec<_> = paths
            .iter()
            .map(|p| p.file_name().unwrap().to_owned())
            .collect();
        assert_eq!(
            names,
            ["latency-raw.png", "latency-quantiles.png", "rate.png"]
        );
        for p in &paths {
            assert_eq!(read_png(p).0, WIDTH);
        }
        let empty = write_plots(&[], dir.path()).unwrap();
        assert_eq!(empty.len(), 3, "an empty history still gets (empty) plots");
    }
}
