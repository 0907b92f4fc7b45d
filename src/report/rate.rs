//! `rate.png`: throughput per time bucket, by function and outcome.

use std::path::Path;

use super::buckets::Buckets;
use super::canvas::{render, Frame, LegendEntry, PlotArea, Sample, Scale};
use super::style::{f_colour, outcome_marker, outcome_name};
use super::PlotData;
use crate::history::OpType;

/// Draws, per function and outcome, how many operations completed per second in each time
/// bucket, over the fault bands. A bucket with no completions is drawn at zero, so an outage
/// shows as a drop.
pub fn plot_rate(data: &PlotData<'_>, path: &Path) -> anyhow::Result<PlotArea> {
    let buckets = Buckets::over(data.seconds);
    let mut legend = Vec::new();
    let mut lines = Vec::new();
    for (i, f) in data.functions().iter().enumerate() {
        for outcome in [OpType::Ok, OpType::Fail, OpType::Info] {
            let mut counts = vec![0u64; buckets.count()];
            for s in &data.ops {
                if s.invoke.f == *f && s.outcome() == outcome {
                    counts[buckets.of(s.end as f64 / 1e9)] += 1;
                }
            }
            if counts.iter().all(|&c| c == 0) {
                continue;
            }
            let (marker, colour) = (outcome_marker(outcome), f_colour(f, i));
            legend.push(LegendEntry {
                label: format!("{f} {}", outcome_name(outcome)),
                sample: Sample::Line(marker, colour),
            });
            let points: Vec<(f64, f64)> = counts
                .iter()
                .enumerate()
                .map(|(b, &c)| (buckets.middle(b), c as f64 / buckets.length(b)))
                .collect();
            lines.push((marker, colour, points));
        }
    }
    let top = lines
        .iter()
        .flat_map(|(.., points)| points.iter().map(|p| p.1))
        .fold(1f64, f64::max);
    let frame = Frame {
        title: "throughput per time bucket",
        y_desc: "throughput (ops/s)",
        y_range: 0.0..top * 1.1,
        y_scale: Scale::Linear,
        seconds: data.seconds,
        faults: &data.faults,
        legend,
    };
    render(path, frame, |painter| {
        for (marker, colour, points) in &lines {
            painter.line(*marker, *colour, points)?;
        }
        Ok(())
    })
}
