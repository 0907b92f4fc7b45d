//! Colours and marker shapes: one colour per operation function and per fault kind (the same
//! in the plots and in `timeline.html`), one marker per outcome.

use plotters::style::RGBColor;

use crate::history::OpType;
use crate::nemesis::SHARED_COLOUR;

/// How strongly a fault band tints the plot (0 = invisible, 1 = opaque).
pub const BAND_OPACITY: f64 = 0.18;

/// A marker shape drawn at a data point and in the legend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// A filled circle.
    Circle,
    /// An x.
    Cross,
    /// A filled triangle.
    Triangle,
    /// A hollow square.
    Square,
}

/// The marker of an outcome: ok ●, fail ×, info ▲.
pub fn outcome_marker(outcome: OpType) -> Marker {
    match outcome {
        OpType::Ok | OpType::Invoke => Marker::Circle,
        OpType::Fail => Marker::Cross,
        OpType::Info => Marker::Triangle,
    }
}

/// The lowercase name of an outcome, for legends.
pub fn outcome_name(outcome: OpType) -> &'static str {
    match outcome {
        OpType::Invoke => "invoke",
        OpType::Ok => "ok",
        OpType::Fail => "fail",
        OpType::Info => "info",
    }
}

/// The colour of an operation function; the register's functions have fixed colours, others
/// take one from a palette by their position among the functions plotted.
pub fn f_colour(f: &str, position: usize) -> RGBColor {
    const OTHERS: [RGBColor; 5] = [
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(23, 190, 207),
    ];
    match f {
        "read" => RGBColor(31, 119, 180),
        "write" => RGBColor(44, 160, 44),
        "cas" => RGBColor(255, 127, 14),
        _ => OTHERS[position % OTHERS.len()],
    }
}

/// The colour of a fault kind's band, as its kind chooses (the shared colour for a kind the
/// registry does not know), for plots and the timeline alike.
pub fn fault_colour(kind: &str) -> RGBColor {
    let (r, g, b) = crate::nemesis::kind(kind).map_or(SHARED_COLOUR, |k| k.colour());
    RGBColor(r, g, b)
}

/// The colour of a fault kind's band as a CSS hex colour, e.g. `#d62728`.
pub fn fault_css(kind: &str) -> String {
    let RGBColor(r, g, b) = fault_colour(kind);
    format!("#{r:02x}{g:02x}{b:02x}")
}
