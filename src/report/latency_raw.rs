//! `latency-raw.png`: every operation as a point at its invocation time, y = its latency.

use std::path::Path;

use super::canvas::{render, Frame, LegendEntry, PlotArea, Sample, Scale};
use super::style::{f_colour, outcome_marker, outcome_name};
use super::PlotData;
use crate::history::OpType;

/// Smallest latency shown, so that a zero latency still has a place on the log scale.
const FLOOR_MS: f64 = 0.001;

/// Draws every client operation of `data` as a point (x: invocation time, y: latency in
/// ms on a log scale), coloured by function, shaped by outcome, over the fault bands.
pub fn plot_latency_raw(data: &PlotData<'_>, path: &Path) -> anyhow::Result<PlotArea> {
    let functions = data.functions();
    let outcomes = [OpType::Ok, OpType::Fail, OpType::Info];
    let mut legend = Vec::new();
    // Per (function, outcome): the points, so rarer outcomes are drawn over the common ones.
    let mut series = Vec::new();
    for (i, f) in functions.iter().enumerate() {
        for outcome in outcomes {
            let points: Vec<(f64, f64)> = data
                .ops
                .iter()
                .filter(|s| s.invoke.f == *f && s.outcome() == outcome)
                .map(|s| (s.invoke.time as f64 / 1e9, latency_ms(s.latency())))
                .collect();
            if points.is_empty() {
                continue;
            }
            let (marker, colour) = (outcome_marker(outcome), f_colour(f, i));
            legend.push(LegendEntry {
                label: format!("{f} {}", outcome_name(outcome)),
                sample: Sample::Point(marker, colour),
            });
            series.push((outcome, marker, colour, points));
        }
    }
    series.sort_by_key(|(outcome, ..)| outcomes.iter().position(|o| o == outcome));
    let all = series
        .iter()
        .flat_map(|(.., points)| points.iter().map(|p| p.1));
    let (lo, hi) = log_range(all);
    let frame = Frame {
        title: "latency of each operation",
        y_desc: "latency (ms)",
        y_range: lo..hi,
        y_scale: Scale::Log,
        seconds: data.seconds,
        faults: &data.faults,
        legend,
    };
    render(path, frame, |painter| {
        for (_, marker, colour, points) in &series {
            for &p in points {
                painter.point(*marker, *colour, p)?;
            }
        }
        Ok(())
    })
}

/// Nanoseconds as milliseconds, at least [`FLOOR_MS`].
pub fn latency_ms(ns: u64) -> f64 {
    (ns as f64 / 1e6).max(FLOOR_MS)
}

/// A log-scale range holding all `values`, widened to the next 1, 2 or 5 times a power of
/// ten on each side (so both ends are labelled), or 0.1–1000 when there are no values.
pub fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return (0.1, 1000.0);
    }
    let steps = |v: f64| {
        let decade = 10f64.powf(v.log10().floor());
        [0.5, 1.0, 2.0, 5.0, 10.0, 20.0].map(|m| m * decade)
    };
    let below = steps(lo * 0.9).into_iter().rev().find(|&s| s <= lo * 0.9);
    let above = steps(hi * 1.1).into_iter().find(|&s| s >= hi * 1.1);
    (below.unwrap_or(lo), above.unwrap_or(hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_range_ends_on_labelled_values_around_the_data() {
        assert_eq!(log_range([2.0, 20.0].into_iter()), (1.0, 50.0));
        assert_eq!(log_range([5.0, 1000.0].into_iter()), (2.0, 2000.0));
        assert_eq!(log_range([0.3, 0.3].into_iter()), (0.2, 0.5));
        assert_eq!(log_range(std::iter::empty()), (0.1, 1000.0));
    }
}
