//! `clock-skew.png`: each node's clock offset from the controller's, as every clock fault
//! measured it when it started and stopped, over the test.

use std::collections::BTreeMap;
use std::path::Path;

use super::canvas::{render, Frame, LegendEntry, PlotArea, Sample, Scale};
use super::style::{f_colour, Marker};
use super::PlotData;
use crate::history::{Op, OpType, Process};

/// Each node's measured offsets in milliseconds, as (seconds since start, offset) points,
/// from the completions of `start-clock` / `stop-clock` operations.
pub fn clock_offsets(history: &[Op]) -> BTreeMap<String, Vec<(f64, f64)>> {
    let mut offsets: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let clock_ops = history.iter().filter(|op| {
        op.process == Process::NEMESIS
            && op.kind != OpType::Invoke
            && (op.f == "start-clock" || op.f == "stop-clock")
    });
    for op in clock_ops {
        let Some(measured) = op.value.get("offsets_ms").and_then(|v| v.as_object()) else {
            continue;
        };
        for (node, ms) in measured {
            if let Some(ms) = ms.as_f64() {
                offsets
                    .entry(node.clone())
                    .or_default()
                    .push((op.time as f64 / 1e9, ms));
            }
        }
    }
    offsets
}

/// Clocks jump: each measured offset holds until the next measurement.
fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (i, &(t, v)) in points.iter().enumerate() {
        if i > 0 {
            out.push((t, points[i - 1].1));
        }
        out.push((t, v));
    }
    out
}

/// Draws `clock-skew.png` when the history has clock faults; returns `None` (and draws
/// nothing) when it has none.
pub fn plot_clock_skew(history: &[Op], path: &Path) -> anyhow::Result<Option<PlotArea>> {
    let offsets = clock_offsets(history);
    if offsets.is_empty() {
        return Ok(None);
    }
    let data = PlotData::new(history);
    let values = offsets.values().flatten().map(|p| p.1);
    let (low, high) = values.fold((0f64, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let margin = ((high - low) * 0.1).max(10.0);
    let legend = offsets
        .keys()
        .enumerate()
        .map(|(i, node)| LegendEntry {
            label: format!("{node} offset"),
            sample: Sample::Line(Marker::Circle, f_colour(node, i)),
        })
        .collect();
    let frame = Frame {
        title: "clock offset of each node from the controller",
        y_desc: "offset (ms)",
        y_range: (low - margin)..(high + margin),
        y_scale: Scale::Linear,
        seconds: data.seconds,
        faults: &data.faults,
        legend,
    };
    let area = render(path, frame, |painter| {
        for (i, (node, points)) in offsets.iter().enumerate() {
            painter.line(Marker::Circle, f_colour(node, i), &steps(points))?;
        }
        Ok(())
    })?;
    Ok(Some(area))
}
