//! The frame every plot shares: a time axis in seconds, fault bands behind the data, a legend
//! on the right, written as a PNG.

use std::fs::File;
use std::io::BufWriter;
use std::ops::Range;
use std::path::Path;

use anyhow::{anyhow, Context};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::font::{self, FAMILY};
use super::style::{fault_colour, Marker, BAND_OPACITY};
use crate::history::FaultInterval;

/// Image width in pixels.
pub const WIDTH: u32 = 1200;
/// Image height in pixels.
pub const HEIGHT: u32 = 600;
/// Width of the legend column on the right.
const LEGEND_WIDTH: u32 = 230;
/// Vertical distance between legend entries.
const LEGEND_STEP: i32 = 22;

/// Where a plot's data area lies in its image, and the time it spans.
#[derive(Debug, Clone, PartialEq)]
pub struct PlotArea {
    /// Pixel columns of the data area.
    pub x_pixels: Range<i32>,
    /// Pixel rows of the data area.
    pub y_pixels: Range<i32>,
    /// Seconds since the start of the test at the right edge (the left edge is 0).
    pub seconds: f64,
}

/// One line of a legend.
#[derive(Debug, Clone, PartialEq)]
pub struct LegendEntry {
    /// What the entry stands for, e.g. `read ok`.
    pub label: String,
    /// What it looks like in the plot.
    pub sample: Sample,
}

/// The picture next to a legend label.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sample {
    /// Points drawn with this marker and colour.
    Point(Marker, RGBColor),
    /// A line of this colour through points with this marker.
    Line(Marker, RGBColor),
    /// A shaded band of this colour.
    Band(RGBColor),
    /// No picture, only the label.
    Note,
}

/// How values map onto the y axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Evenly spaced values.
    Linear,
    /// Evenly spaced powers of ten.
    Log,
}

/// What a plot shows besides its data.
pub struct Frame<'a> {
    /// The caption above the plot.
    pub title: &'a str,
    /// The y axis description, with its unit.
    pub y_desc: &'a str,
    /// The values the y axis spans.
    pub y_range: Range<f64>,
    /// How the y axis is scaled.
    pub y_scale: Scale,
    /// The length of the time axis in seconds.
    pub seconds: f64,
    /// The faults to shade.
    pub faults: &'a [FaultInterval],
    /// Legend entries for the data (fault entries are added).
    pub legend: Vec<LegendEntry>,
}

/// Draws data in plot coordinates (seconds, y value) onto the image.
pub struct Painter<'a, 'b> {
    root: &'a DrawingArea<BitMapBackend<'b>, Shift>,
    to_pixel: &'a dyn Fn((f64, f64)) -> (i32, i32),
}

impl Painter<'_, '_> {
    /// A marker at a data point.
    pub fn point(&self, marker: Marker, colour: RGBColor, at: (f64, f64)) -> anyhow::Result<()> {
        draw_marker(self.root, marker, colour, (self.to_pixel)(at))
    }

    /// A line through data points, with a marker at each.
    pub fn line(
        &self,
        marker: Marker,
        colour: RGBColor,
        points: &[(f64, f64)],
    ) -> anyhow::Result<()> {
        let pixels: Vec<(i32, i32)> = points.iter().map(|&p| (self.to_pixel)(p)).collect();
        self.root
            .draw(&PathElement::new(pixels.clone(), colour.stroke_width(2)))
            .map_err(|e| anyhow!("{e}"))?;
        for p in pixels {
            draw_marker(self.root, marker, colour, p)?;
        }
        Ok(())
    }
}

/// Renders a plot with time on the x axis to a PNG at `path`: axes, fault bands, then
/// whatever `draw` paints, then the legend.
pub fn render(
    path: &Path,
    frame: Frame<'_>,
    draw: impl FnOnce(&Painter<'_, '_>) -> anyhow::Result<()>,
) -> anyhow::Result<PlotArea> {
    font::register()?;
    let mut pixels = vec![255u8; (WIDTH * HEIGHT * 3) as usize];
    let Range { start, end } = frame.y_range;
    let drawn = match frame.y_scale {
        Scale::Linear => draw_frame(&mut pixels, frame, start..end, draw),
        Scale::Log => {
            let (bold, light) = log_key_points(start, end);
            let y = (start..end)
                .log_scale()
                .with_key_points(bold)
                .with_light_points(light);
            draw_frame(&mut pixels, frame, y, draw)
        }
    };
    let area = drawn.with_context(|| format!("drawing {}", path.display()))?;
    write_png(path, &pixels).with_context(|| format!("writing {}", path.display()))?;
    Ok(area)
}

fn draw_frame<Y>(
    pixels: &mut [u8],
    frame: Frame<'_>,
    y: Y,
    draw: impl FnOnce(&Painter<'_, '_>) -> anyhow::Result<()>,
) -> anyhow::Result<PlotArea>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let root = BitMapBackend::with_buffer(pixels, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let (main, side) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
    let mut chart = ChartBuilder::on(&main)
        .caption(frame.title, (FAMILY, 22))
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(72)
        .build_cartesian_2d(0f64..frame.seconds, y)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("time since start (s)")
        .y_desc(frame.y_desc)
        .label_style((FAMILY, 14))
        .x_labels(12)
        .y_labels(12)
        .max_light_lines(4)
        .light_line_style(BLACK.mix(0.06))
        .bold_line_style(BLACK.mix(0.2))
        .axis_desc_style((FAMILY, 16))
        .x_label_formatter(&|v| tick_label(*v))
        .y_label_formatter(&|v| tick_label(*v))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    let (x_pixels, y_pixels) = chart.plotting_area().get_pixel_range();
    let y_floor = chart.y_range().start;
    let to_pixel = |(x, y): (f64, f64)| chart.backend_coord(&(x, y));

    for fault in frame.faults {
        let (x0, _) = to_pixel((fault.start as f64 / 1e9, y_floor));
        let (x1, _) = to_pixel((fault.end as f64 / 1e9, y_floor));
        let style = fault_colour(&fault.kind).mix(BAND_OPACITY).filled();
        let band = Rectangle::new(
            [(x0, y_pixels.start), (x1.max(x0 + 1), y_pixels.end - 1)],
            style,
        );
        root.draw(&band).map_err(|e| anyhow!("{e}"))?;
    }
    draw(&Painter {
        root: &root,
        to_pixel: &to_pixel,
    })?;

    let mut legend = frame.legend;
    legend.extend(fault_legend(frame.faults));
    draw_legend(&side, &legend, y_pixels.start)?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(PlotArea {
        x_pixels,
        y_pixels,
        seconds: frame.seconds,
    })
}

/// One entry per fault kind, in order of first appearance, or a note that there were none.
fn fault_legend(faults: &[FaultInterval]) -> Vec<LegendEntry> {
    let mut kinds: Vec<&str> = Vec::new();
    for f in faults {
        if !kinds.contains(&f.kind.as_str()) {
            kinds.push(&f.kind);
        }
    }
    if kinds.is_empty() {
        return vec![LegendEntry {
            label: "no faults injected".to_owned(),
            sample: Sample::Note,
        }];
    }
    kinds
        .into_iter()
        .map(|k| LegendEntry {
            label: format!("{k} active"),
            sample: Sample::Band(fault_colour(k)),
        })
        .collect()
}

pub(super) fn draw_legend(
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    entries: &[LegendEntry],
    top: i32,
) -> anyhow::Result<()> {
    let text = TextStyle::from((FAMILY, 14).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, entry) in entries.iter().enumerate() {
        let y = top + 8 + i as i32 * LEGEND_STEP;
        match entry.sample {
            Sample::Point(marker, colour) => draw_marker(area, marker, colour, (16, y))?,
            Sample::Line(marker, colour) => {
                area.draw(&PathElement::new(
                    vec![(4, y), (28, y)],
                    colour.stroke_width(2),
                ))
                .map_err(|e| anyhow!("{e}"))?;
                draw_marker(area, marker, colour, (16, y))?;
            }
            Sample::Band(colour) => {
                let style = colour.mix(BAND_OPACITY).filled();
                area.draw(&Rectangle::new([(4, y - 7), (28, y + 7)], style))
                    .map_err(|e| anyhow!("{e}"))?;
            }
            Sample::Note => {}
        }
        area.draw(&Text::new(entry.label.as_str(), (36, y), text.clone()))
            .map_err(|e| anyhow!("{e}"))?;
    }
    Ok(())
}

pub(super) fn draw_marker(
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    marker: Marker,
    colour: RGBColor,
    (x, y): (i32, i32),
) -> anyhow::Result<()> {
    let drawn = match marker {
        Marker::Circle => area.draw(&Circle::new((x, y), 3, colour.filled())),
        Marker::Cross => area.draw(&Cross::new((x, y), 4, colour.stroke_width(2))),
        Marker::Triangle => area.draw(&TriangleMarker::new((x, y), 5, colour.filled())),
        Marker::Square => area.draw(&Rectangle::new(
            [(x - 4, y - 4), (x + 4, y + 4)],
            colour.stroke_width(2),
        )),
    };
    drawn.map_err(|e| anyhow!("{e}"))
}

/// An axis tick label: whole numbers from 10 on, up to three decimals below.
pub(super) fn tick_label(v: f64) -> String {
    if v.abs() >= 10.0 {
        format!("{v:.0}")
    } else {
        let text = format!("{v:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// The key points of a log axis over `lo..hi`: labelled ones at 1, 2 and 5 times each power
/// of ten, light grid lines at the other multiples.
pub(super) fn log_key_points(lo: f64, hi: f64) -> (Vec<f64>, Vec<f64>) {
    let (mut bold, mut light) = (Vec::new(), Vec::new());
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= hi {
        for m in 1..10 {
            let v = decade * f64::from(m);
            if v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9) {
                if matches!(m, 1 | 2 | 5) {
                    bold.push(v);
                } else {
                    light.push(v);
                }
            }
        }
        decade *= 10.0;
    }
    (bold, light)
}

pub(super) fn write_png(path: &Path, rgb: &[u8]) -> anyhow::Result<()> {
    let file = BufWriter::new(File::create(path)?);
    let mut encoder = png::Encoder::new(file, WIDTH, HEIGHT);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_axis_labels_one_two_five() {
        let (bold, light) = log_key_points(2.0, 500.0);
        assert_eq!(bold, [2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0]);
        assert_eq!(light.len(), 14);
        assert_eq!(tick_label(0.5), "0.5");
        assert_eq!(tick_label(2.0), "2");
        assert_eq!(tick_label(200.0), "200");
    }
}
