//! `latency-quantiles.png`: p50, p95, p99 and max latency per time bucket, by function.

use std::path::Path;

use super::buckets::{quantile, Buckets};
use super::canvas::{render, Frame, LegendEntry, PlotArea, Sample, Scale};
use super::latency_raw::{latency_ms, log_range};
use super::style::{f_colour, Marker};
use super::PlotData;
use crate::history::OpType;

/// The quantiles drawn, with their names and markers.
const QUANTILES: [(f64, &str, Marker); 4] = [
    (0.5, "p50", Marker::Circle),
    (0.95, "p95", Marker::Triangle),
    (0.99, "p99", Marker::Square),
    (1.0, "max", Marker::Cross),
];

/// Draws, per function, the latency quantiles of the operations invoked in each time bucket,
/// on a log scale over the fault bands. Operations that ended `info` are left out: their
/// latency is a timeout, not a service time.
pub fn plot_latency_quantiles(data: &PlotData<'_>, path: &Path) -> anyhow::Result<PlotArea> {
    let buckets = Buckets::over(data.seconds);
    let mut legend = Vec::new();
    let mut lines = Vec::new();
    for (i, f) in data.functions().iter().enumerate() {
        let mut latencies: Vec<Vec<f64>> = vec![Vec::new(); buckets.count()];
        for s in &data.ops {
            if s.invoke.f == *f && s.outcome() != OpType::Info {
                latencies[buckets.of(s.invoke.time as f64 / 1e9)].push(latency_ms(s.latency()));
            }
        }
        if latencies.iter().all(Vec::is_empty) {
            continue;
        }
        latencies.iter_mut().for_each(|b| b.sort_by(f64::total_cmp));
        let colour = f_colour(f, i);
        for (q, name, marker) in QUANTILES {
            legend.push(LegendEntry {
                label: format!("{f} {name}"),
                sample: Sample::Line(marker, colour),
            });
            let values = latencies.iter().map(|b| quantile(b, q));
            for run in runs(values, |b| buckets.middle(b)) {
                lines.push((marker, colour, run));
            }
        }
    }
    let (lo, hi) = log_range(lines.iter().flat_map(|(.., run)| run.iter().map(|p| p.1)));
    let frame = Frame {
        title: "latency quantiles per time bucket",
        y_desc: "latency (ms)",
        y_range: lo..hi,
        y_scale: Scale::Log,
        seconds: data.seconds,
        faults: &data.faults,
        legend,
    };
    render(path, frame, |painter| {
        for (marker, colour, run) in &lines {
            painter.line(*marker, *colour, run)?;
        }
        Ok(())
    })
}

/// The points (`x_of(bucket)`, value) of consecutive buckets that have a value, one run per
/// stretch without gaps, so lines do not bridge buckets with no operations.
fn runs(
    values: impl Iterator<Item = Option<f64>>,
    x_of: impl Fn(usize) -> f64,
) -> Vec<Vec<(f64, f64)>> {
    let mut runs = vec![Vec::new()];
    for (b, v) in values.enumerate() {
        match v {
            Some(v) => runs.last_mut().expect("never empty").push((x_of(b), v)),
            None if runs.last().is_some_and(|r| !r.is_empty()) => runs.push(Vec::new()),
            None => {}
        }
    }
    runs.retain(|r| !r.is_empty());
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_break_at_empty_buckets() {
        let values = [Some(1.0), Some(2.0), None, None, Some(3.0), None];
        let r = runs(values.into_iter(), |b| b as f64 * 2.0 + 1.0);
        assert_eq!(r, vec![vec![(1.0, 1.0), (3.0, 2.0)], vec![(9.0, 3.0)]]);
    }
}
