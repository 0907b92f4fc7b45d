//! Plots that compare lock and election runs with each other: `compare.png` (acquire or
//! failover latency per run), `herd.png` (load per release or leadership change against the
//! number of contenders, per recipe) and `recipes.png` (acquire, hand-off and failover latency
//! quantiles per recipe). Their x axes are runs,
//! contenders or quantiles rather than time, so they have a frame of their own that shares
//! the font, legend and markers of the time plots.

use std::ops::Range;
use std::path::Path;

use anyhow::{anyhow, Context};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

use super::canvas::{
    draw_legend, draw_marker, log_key_points, tick_label, write_png, LegendEntry, Sample, HEIGHT,
    WIDTH,
};
use super::font::{self, FAMILY};
use super::latency_raw::log_range;
use super::style::Marker;
use crate::history::Quantiles;

/// Width of the legend column on the right.
const LEGEND_WIDTH: u32 = 300;

/// Per-release load: the mean and the most in any one release (or leadership change).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoadFigures {
    /// Mean per release.
    pub mean: f64,
    /// Most in one release.
    pub max: u64,
}

/// What a latency of a recipe measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatencyKind {
    /// Lock: from invoking acquire to holding the lock.
    Acquire,
    /// Lock: from a release being invoked to the next holder acquiring.
    Handoff,
    /// Election: from a leader leaving office (nobody else in office) to the next taking it.
    Failover,
}

impl LatencyKind {
    /// The name in legends and tables.
    pub fn name(self) -> &'static str {
        match self {
            LatencyKind::Acquire => "acquire",
            LatencyKind::Handoff => "hand-off",
            LatencyKind::Failover => "failover",
        }
    }

    fn marker(self) -> Marker {
        match self {
            LatencyKind::Acquire => Marker::Circle,
            LatencyKind::Handoff => Marker::Triangle,
            LatencyKind::Failover => Marker::Square,
        }
    }
}

/// What a lock or election run measured, as the comparison plots need it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecipeFigures {
    /// The recipe's workload name, e.g. `lock-sequential`, `election-fair`.
    pub recipe: String,
    /// Contenders (or candidates) at once.
    pub contenders: u64,
    /// Latency quantiles by kind: acquire and hand-off for a lock, failover for an election.
    pub latencies: Vec<(LatencyKind, Quantiles)>,
    /// Watch notifications per release or leadership change, when the clients could count
    /// them.
    pub notifications: Option<LoadFigures>,
    /// Requests sent in reaction to a notification, per release or leadership change.
    pub requests: Option<LoadFigures>,
    /// Watch notifications per release or leadership change as the servers' `mntr` counted
    /// them (summed over the servers), when the run sampled them.
    pub server_notifications: Option<f64>,
}

impl RecipeFigures {
    /// The quantiles of latency `kind`, when the run measured it.
    pub fn latency(&self, kind: LatencyKind) -> Option<Quantiles> {
        self.latencies
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, q)| *q)
    }

    /// The latency a run is compared by: acquire for a lock, failover for an election.
    fn headline(&self) -> Option<Quantiles> {
        self.latencies.first().map(|(_, q)| *q)
    }
}

/// The colour of a recipe, fixed for the known ones.
pub fn recipe_colour(recipe: &str) -> RGBColor {
    match recipe {
        "lock-sequential" => RGBColor(31, 119, 180),
        "lock-sequential-herd" => RGBColor(214, 39, 40),
        "lock-single-node" => RGBColor(44, 160, 44),
        "lock-protected" => RGBColor(255, 127, 14),
        "lock-crate" => RGBColor(140, 86, 75),
        "election-fair" => RGBColor(23, 190, 207),
        "election-unfair" => RGBColor(227, 119, 194),
        _ => RGBColor(148, 103, 189),
    }
}

/// A set of points drawn with one marker and colour, joined by a line or not.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The marker at each point.
    pub marker: Marker,
    /// The colour of markers and line.
    pub colour: RGBColor,
    /// The points, in plot coordinates.
    pub points: Vec<(f64, f64)>,
    /// Whether a line joins the points.
    pub joined: bool,
}

/// The x axis of a comparison plot.
#[derive(Debug, Clone, PartialEq)]
pub enum XAxis {
    /// Numbers, with ticks at the given values.
    Numbers(Vec<f64>),
    /// Named positions 0, 1, 2, ...
    Categories(Vec<String>),
}

/// A comparison plot: what its axes say, and the data.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// The caption above the plot.
    pub title: String,
    /// The x axis description, with its unit.
    pub x_desc: String,
    /// The y axis description, with its unit.
    pub y_desc: String,
    /// The x axis.
    pub x: XAxis,
    /// Log scale on the y axis (else linear from 0).
    pub y_log: bool,
    /// What is drawn.
    pub series: Vec<Series>,
    /// The legend.
    pub legend: Vec<LegendEntry>,
}

/// The chart of `compare.png`: p50 and p99 of each run's headline latency (acquire for a
/// lock, failover for an election) per run (labelled by `label`), runs grouped by recipe.
pub fn compare_chart(runs: &[(String, RecipeFigures)]) -> Chart {
    let mut order: Vec<(&String, &RecipeFigures, Quantiles)> = runs
        .iter()
        .filter_map(|(label, f)| Some((label, f, f.headline()?)))
        .collect();
    order.sort_by(|a, b| a.1.recipe.cmp(&b.1.recipe));
    let mut series = Vec::new();
    let mut legend = Vec::new();
    for (i, (_, f, q)) in order.iter().enumerate() {
        let colour = recipe_colour(&f.recipe);
        let x = i as f64;
        for (marker, value) in [(Marker::Circle, q.p50_ms), (Marker::Triangle, q.p99_ms)] {
            series.push(Series {
                marker,
                colour,
                points: vec![(x, value)],
                joined: false,
            });
        }
        let label = f.recipe.clone();
        if !legend.iter().any(|e: &LegendEntry| e.label == label) {
            legend.push(LegendEntry {
                label,
                sample: Sample::Point(Marker::Circle, colour),
            });
        }
    }
    legend.push(note("● p50   ▲ p99"));
    Chart {
        title: "acquire (lock) or failover (election) latency per run".into(),
        x_desc: "run".into(),
        y_desc: "latency (ms)".into(),
        x: XAxis::Categories(order.iter().map(|(label, ..)| (*label).clone()).collect()),
        y_log: true,
        series,
        legend,
    }
}

/// The chart of `herd.png`: notifications and reaction requests per release or leadership
/// change (means) against the number of contenders, one line of each per recipe, from the
/// clients' counts; a recipe whose clients could not count them (the crate's own lock) gets
/// the servers' notifications instead. Log scale, so that 1 and 100 per release both show.
pub fn herd_chart(runs: &[RecipeFigures]) -> Chart {
    let mut series = Vec::new();
    let mut legend = Vec::new();
    for recipe in recipes(runs.iter()) {
        let colour = recipe_colour(recipe);
        let mut of: Vec<&RecipeFigures> = runs.iter().filter(|f| f.recipe == recipe).collect();
        of.sort_by_key(|f| f.contenders);
        let line = |load: &dyn Fn(&RecipeFigures) -> Option<f64>| -> Vec<(f64, f64)> {
            of.iter()
                .filter_map(|f| Some((f.contenders as f64, load(f)?)))
                .collect()
        };
        let lines = match of.iter().any(|f| f.notifications.is_some()) {
            true => vec![
                (
                    Marker::Circle,
                    "notifications",
                    line(&|f| Some(f.notifications?.mean)),
                ),
                (
                    Marker::Triangle,
                    "requests",
                    line(&|f| Some(f.requests?.mean)),
                ),
            ],
            false => vec![(
                Marker::Square,
                "notifications (servers)",
                line(&|f| f.server_notifications),
            )],
        };
        for (marker, what, points) in lines {
            if points.is_empty() {
                continue;
            }
            series.push(Series {
                marker,
                colour,
                points,
                joined: true,
            });
            legend.push(LegendEntry {
                label: format!("{recipe} {what}"),
                sample: Sample::Line(marker, colour),
            });
        }
    }
    let mut ticks: Vec<f64> = runs.iter().map(|f| f.contenders as f64).collect();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    Chart {
        title: "load per release or leadership change (herd effect)".into(),
        x_desc: "contenders".into(),
        y_desc: "per release (mean count)".into(),
        x: XAxis::Numbers(ticks),
        y_log: true,
        series,
        legend,
    }
}

/// The quantiles on the x axis of `recipes.png`.
const QUANTILE_NAMES: [&str; 4] = ["p50", "p90", "p99", "max"];

/// The chart of `recipes.png`: acquire and hand-off (locks) and failover (elections) latency
/// quantiles per recipe, each from the recipe's run with the most contenders.
pub fn recipes_chart(runs: &[RecipeFigures]) -> Chart {
    let mut series = Vec::new();
    let mut legend = Vec::new();
    for recipe in recipes(runs.iter()) {
        let Some(f) = runs
            .iter()
            .filter(|f| f.recipe == recipe)
            .max_by_key(|f| f.contenders)
        else {
            continue;
        };
        let colour = recipe_colour(recipe);
        for (kind, q) in &f.latencies {
            let values = [q.p50_ms, q.p90_ms, q.p99_ms, q.max_ms];
            series.push(Series {
                marker: kind.marker(),
                colour,
                points: (0..4).map(|i| (i as f64, values[i])).collect(),
                joined: true,
            });
            legend.push(LegendEntry {
                label: format!("{recipe} {} ({} c.)", kind.name(), f.contenders),
                sample: Sample::Line(kind.marker(), colour),
            });
        }
    }
    Chart {
        title: "recipe latency quantiles".into(),
        x_desc: "quantile".into(),
        y_desc: "latency (ms)".into(),
        x: XAxis::Categories(QUANTILE_NAMES.map(String::from).to_vec()),
        y_log: true,
        series,
        legend,
    }
}

/// The distinct recipes of `runs`, sorted.
fn recipes<'a>(runs: impl Iterator<Item = &'a RecipeFigures>) -> Vec<&'a str> {
    let mut names: Vec<&str> = runs.map(|f| f.recipe.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    names
}

fn note(label: &str) -> LegendEntry {
    LegendEntry {
        label: label.into(),
        sample: Sample::Note,
    }
}

/// Renders `chart` to a PNG at `path`.
pub fn render_chart(chart: &Chart, path: &Path) -> anyhow::Result<()> {
    font::register()?;
    let values = || {
        chart
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
    };
    let mut pixels = vec![255u8; (WIDTH * HEIGHT * 3) as usize];
    let drawn = if chart.y_log {
        let (lo, hi) = log_range(values().filter(|v| *v > 0.0));
        let (bold, light) = log_key_points(lo, hi);
        let y = (lo..hi)
            .log_scale()
            .with_key_points(bold)
            .with_light_points(light);
        draw_chart(&mut pixels, chart, y)
    } else {
        let hi = values().fold(0f64, f64::max).max(1.0) * 1.1;
        draw_chart(&mut pixels, chart, 0f64..hi)
    };
    drawn.with_context(|| format!("drawing {}", path.display()))?;
    write_png(path, &pixels).with_context(|| format!("writing {}", path.display()))
}

fn draw_chart<Y>(pixels: &mut [u8], chart: &Chart, y: Y) -> anyhow::Result<()>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let root = BitMapBackend::with_buffer(pixels, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let (main, side) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
    let (x_range, ticks, names) = x_layout(&chart.x);
    let mut plot = ChartBuilder::on(&main)
        .caption(&chart.title, (FAMILY, 22))
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(72)
        .build_cartesian_2d(x_range.clone(), y)
        .map_err(|e| anyhow!("{e}"))?;
    // Labels only at the ticks asked for: category positions or the numbers plotted.
    let x_label = |v: &f64| match ticks.iter().position(|t| (t - v).abs() < 1e-6) {
        Some(i) => names
            .as_ref()
            .map_or_else(|| tick_label(ticks[i]), |n| n[i].clone()),
        None => String::new(),
    };
    plot.configure_mesh()
        .disable_x_mesh()
        .set_tick_mark_size(LabelAreaPosition::Bottom, 0)
        .x_labels(x_label_count(&x_range))
        .x_desc(chart.x_desc.as_str())
        .y_desc(chart.y_desc.as_str())
        .label_style((FAMILY, 14))
        .light_line_style(BLACK.mix(0.06))
        .bold_line_style(BLACK.mix(0.2))
        .axis_desc_style((FAMILY, 16))
        .x_label_formatter(&x_label)
        .y_label_formatter(&|v| tick_label(*v))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    let (_, y_pixels) = plot.plotting_area().get_pixel_range();
    for s in &chart.series {
        let points: Vec<(i32, i32)> = s
            .points
            .iter()
            .filter(|p| !chart.y_log || p.1 > 0.0)
            .map(|p| plot.backend_coord(p))
            .collect();
        if s.joined && points.len() > 1 {
            root.draw(&PathElement::new(points.clone(), s.colour.stroke_width(2)))
                .map_err(|e| anyhow!("{e}"))?;
        }
        for p in points {
            draw_marker(&root, s.marker, s.colour, p)?;
        }
    }
    draw_legend(&side, &chart.legend, y_pixels.start)?;
    root.present().map_err(|e| anyhow!("{e}"))
}

/// How many x labels to ask plotters for over `range`, so that every whole number (and the
/// usual contender counts) is a candidate position.
fn x_label_count(range: &Range<f64>) -> usize {
    ((range.end - range.start).ceil() as usize * 2 + 1).clamp(2, 400)
}

/// The x range, its tick positions, and the tick names of a categorical axis.
fn x_layout(x: &XAxis) -> (Range<f64>, Vec<f64>, Option<Vec<String>>) {
    match x {
        XAxis::Categories(names) => {
            let n = names.len().max(1) as f64;
            let ticks = (0..names.len()).map(|i| i as f64).collect();
            (-0.5..n - 0.5, ticks, Some(names.clone()))
        }
        XAxis::Numbers(ticks) => {
            let hi = ticks.iter().copied().fold(1f64, f64::max);
            (0.0..hi * 1.05, ticks.clone(), None)
        }
    }
}
