//! `timeline.html`: a self-contained picture of a history (inline CSS, no script, no network).
//!
//! One lane per process (the nemesis on top), a bar per operation from its invocation to its
//! completion coloured by outcome (`ok`, `fail`, `info`, or never completed), the ops of a
//! counterexample outlined and listed below the chart, and nemesis faults shaded across all
//! lanes while they were in effect (by [`crate::history::fault_intervals`], in the plots'
//! colours). A history longer than [`MAX_ENTRIES`] is cut to a window of that many entries
//! (around the marked ops if any, else from the start), with a note saying so.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

use super::html::escape;
use super::style::{fault_css, BAND_OPACITY};
use crate::history::{fault_intervals, FaultInterval, Op, OpType, Process};

/// The most history entries (invocations plus completions) one timeline shows.
pub const MAX_ENTRIES: usize = 2000;

/// Width of the lane labels, in pixels.
const LABEL_PX: u32 = 90;

/// Renders a timeline of `ops` with the ops whose index is in `marked` outlined.
pub fn render(ops: &[Op], marked: &[u64], title: &str) -> String {
    let window = Window::choose(ops, marked);
    let shown = &ops[window.start..window.end];
    let bars = bars(ops, &window, marked);
    let faults = fault_intervals(ops);
    let t0 = shown.first().map_or(0, |op| op.time);
    let t1 = shown.last().map_or(0, |op| op.time).max(t0 + 1);
    let x = |t: u64| (t.clamp(t0, t1) - t0) as f64 * 100.0 / (t1 - t0) as f64;

    let mut lanes: BTreeMap<Lane, Vec<&Bar>> = BTreeMap::new();
    for bar in &bars {
        lanes
            .entry(Lane::of(bar.invoke.process))
            .or_default()
            .push(bar);
    }
    let colours = fault_colours(&faults);

    let mut html = String::with_capacity(4096 + bars.len() * 300);
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{}</title>\n<style>{}</style></head><body>\n<h1>{}</h1>\n",
        escape(title),
        css(),
        escape(title)
    );
    let _ = writeln!(
        html,
        "<p class=\"note\">{} history entries, {} processes, {} marked ops; time {} to {}.</p>",
        ops.len(),
        lanes.len(),
        marked.len(),
        seconds(t0),
        seconds(t1)
    );
    if window.start > 0 || window.end < ops.len() {
        let _ = writeln!(
            html,
            "<p class=\"note cut\">Showing entries {} to {} of {} (at most {MAX_ENTRIES} \
             per timeline{}).</p>",
            window.start,
            window.end.saturating_sub(1),
            ops.len(),
            if marked.is_empty() {
                ""
            } else {
                ", around the marked ops"
            }
        );
    }
    legend(&mut html, &colours);

    let _ = writeln!(html, "<div class=\"chart\">");
    axis(&mut html, t0, t1);
    let _ = writeln!(html, "<div class=\"lanes\"><div class=\"faults\">");
    for fault in &faults {
        let (from, to) = (fault.start.max(t0), fault.end.min(t1));
        let to = if fault.healed { to } else { t1 };
        if from > to || (from == to && fault.healed) {
            continue;
        }
        let _ = writeln!(
            html,
            "<div class=\"fault\" style=\"left:{:.3}%;width:{:.3}%;background:{}\" \
             title=\"{} from {} to {}\"></div>",
            x(from),
            x(to) - x(from),
            colours[fault.kind.as_str()],
            escape(&fault.kind),
            seconds(fault.start),
            if fault.healed {
                seconds(fault.end)
            } else {
                "the end".to_string()
            }
        );
    }
    let _ = writeln!(html, "</div>");
    for (lane, lane_bars) in &lanes {
        let _ = write!(
            html,
            "<div class=\"lane\"><div class=\"label\">{}</div><div class=\"track\">",
            escape(&lane.name())
        );
        for bar in lane_bars {
            let end = bar.end_time.unwrap_or(t1);
            let _ = write!(
                html,
                "<div class=\"op {}{}\" style=\"left:{:.3}%;width:{:.3}%\" title=\"{}\">{}</div>",
                bar.outcome_class(),
                if bar.marked { " marked" } else { "" },
                x(bar.invoke.time),
                x(end) - x(bar.invoke.time),
                escape(&bar.tooltip()),
                escape(&bar.label())
            );
        }
        let _ = writeln!(html, "</div></div>");
    }
    let _ = writeln!(html, "</div></div>");
    marked_table(&mut html, &bars);
    html.push_str("</body></html>\n");
    html
}

/// Renders the timeline and writes it to `path`.
pub fn write(path: &Path, ops: &[Op], marked: &[u64], title: &str) -> Result<()> {
    std::fs::write(path, render(ops, marked, title))
        .with_context(|| format!("writing timeline {}", path.display()))
}

/// The range of history positions a timeline shows.
struct Window {
    start: usize,
    end: usize,
}

impl Window {
    fn choose(ops: &[Op], marked: &[u64]) -> Window {
        if ops.len() <= MAX_ENTRIES {
            return Window {
                start: 0,
                end: ops.len(),
            };
        }
        let marked: HashSet<u64> = marked.iter().copied().collect();
        let positions: Vec<usize> = ops
            .iter()
            .enumerate()
            .filter(|(_, op)| marked.contains(&op.index))
            .map(|(pos, _)| pos)
            .collect();
        let start = match (positions.first(), positions.last()) {
            (Some(&first), Some(&last)) => {
                let middle = first + (last - first) / 2;
                middle
                    .saturating_sub(MAX_ENTRIES / 2)
                    .min(ops.len() - MAX_ENTRIES)
            }
            _ => 0,
        };
        Window {
            start,
            end: start + MAX_ENTRIES,
        }
    }
}

/// A lane: the nemesis first, then clients by number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Lane {
    Nemesis,
    Client(u64),
}

impl Lane {
    fn of(process: Process) -> Lane {
        match process {
            Process::Client(p) => Lane::Client(p),
            Process::Nemesis(_) => Lane::Nemesis,
        }
    }

    fn name(self) -> String {
        match self {
            Lane::Nemesis => "nemesis".to_string(),
            Lane::Client(p) => format!("process {p}"),
        }
    }
}

/// An operation drawn as a bar: its invocation and, if it completed, its completion.
struct Bar<'a> {
    invoke: &'a Op,
    done: Option<&'a Op>,
    end_time: Option<u64>,
    marked: bool,
}

impl Bar<'_> {
    fn outcome_class(&self) -> &'static str {
        match self.done.map(|op| op.kind) {
            Some(OpType::Ok) => "ok",
            Some(OpType::Fail) => "fail",
            Some(OpType::Info) if self.invoke.process == Process::NEMESIS => "nemesis",
            Some(OpType::Info) => "info",
            Some(OpType::Invoke) | None => "open",
        }
    }

    fn label(&self) -> String {
        let op = self
            .done
            .filter(|d| d.kind == OpType::Ok)
            .unwrap_or(self.invoke);
        let value = if op.value.is_null() {
            String::new()
        } else {
            format!(" {}", op.value)
        };
        format!("{}{value}", self.invoke.f)
    }

    fn tooltip(&self) -> String {
        let inv = self.invoke;
        let mut text = format!("op {} {}", inv.index, inv.f);
        if let Some(key) = &inv.key {
            let _ = write!(text, " key {key}");
        }
        let _ = write!(text, "\ninvoked {} value {}", seconds(inv.time), inv.value);
        match self.done {
            Some(done) if !std::ptr::eq(done, inv) => {
                let _ = write!(
                    text,
                    "\n{:?} {} (op {}) value {}",
                    done.kind,
                    seconds(done.time),
                    done.index,
                    done.value
                );
                for (name, field) in [
                    ("zxid", done.zxid.map(|z| format!("{z:#x}"))),
                    ("version", done.version.map(|v| v.to_string())),
                    ("node", done.node.clone()),
                    ("error", done.error.clone()),
                ] {
                    if let Some(field) = field {
                        let _ = write!(text, "\n{name} {field}");
                    }
                }
            }
            Some(_) => {}
            None => text.push_str("\nnever completed"),
        }
        text
    }
}

/// Pairs the ops in the window into bars (ops that straddle its edges included).
fn bars<'a>(ops: &'a [Op], window: &Window, marked: &[u64]) -> Vec<Bar<'a>> {
    let mut open: HashMap<Process, usize> = HashMap::new();
    let mut bars = Vec::new();
    let marked: HashSet<u64> = marked.iter().copied().collect();
    let is_marked = |op: &Op| marked.contains(&op.index);
    for (pos, op) in ops.iter().enumerate() {
        if pos >= window.end && open.is_empty() {
            break;
        }
        if op.kind == OpType::Invoke {
            if pos < window.end {
                open.insert(op.process, pos);
            }
            continue;
        }
        let invoke = open.remove(&op.process);
        // Bars that end before the window, or start after it, are not drawn.
        if pos < window.start || (pos >= window.end && invoke.is_none()) {
            continue;
        }
        // A completion without an invocation (Jepsen logs nemesis ops as lone infos) is a
        // bar of no length.
        let inv = &ops[invoke.unwrap_or(pos)];
        bars.push(Bar {
            invoke: inv,
            done: Some(op),
            end_time: Some(op.time),
            marked: is_marked(inv) || is_marked(op),
        });
    }
    for (_, pos) in open {
        let inv = &ops[pos];
        bars.push(Bar {
            invoke: inv,
            done: None,
            end_time: None,
            marked: is_marked(inv),
        });
    }
    bars.sort_by_key(|b| b.invoke.index);
    bars
}

/// The colour of each fault kind in `faults` (from the plots' table).
fn fault_colours(faults: &[FaultInterval]) -> BTreeMap<&str, String> {
    faults
        .iter()
        .map(|fault| (fault.kind.as_str(), fault_css(&fault.kind)))
        .collect()
}

fn legend(html: &mut String, colours: &BTreeMap<&str, String>) {
    html.push_str("<div class=\"legend\">");
    for (class, text) in [
        ("ok", "ok"),
        ("fail", "fail"),
        ("info", "info (outcome unknown)"),
        ("open", "never completed"),
        ("nemesis", "nemesis op"),
        ("ok marked", "marked (counterexample)"),
    ] {
        let _ = write!(
            html,
            "<span><i class=\"op swatch {class}\"></i>{}</span>",
            escape(text)
        );
    }
    for (kind, colour) in colours {
        let _ = write!(
            html,
            "<span><i class=\"swatch fault\" style=\"background:{colour}\"></i>{} active</span>",
            escape(kind)
        );
    }
    html.push_str("</div>\n");
}

/// Tick marks at a round step giving at most ten ticks, in a unit that suits the span.
fn axis(html: &mut String, t0: u64, t1: u64) {
    let span = t1 - t0;
    let mut step: u64 = 1;
    'search: for scale in (0..19).map(|e| 10u64.pow(e)) {
        for m in [1, 2, 5] {
            step = scale * m;
            if span / step <= 10 {
                break 'search;
            }
        }
    }
    let (div, unit) = [
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "µs"),
        (1, "ns"),
    ]
    .into_iter()
    .find(|&(div, _)| step >= div)
    .unwrap_or((1, "ns"));
    html.push_str("<div class=\"axis\">");
    let mut t = t0.div_ceil(step) * step;
    while t <= t1 {
        let left = (t - t0) as f64 * 100.0 / span as f64;
        let label = format!("{} {unit}", t as f64 / div as f64);
        let _ = write!(html, "<span style=\"left:{left:.3}%\">{label}</span>");
        t += step;
    }
    html.push_str("</div>\n");
}

fn marked_table(html: &mut String, bars: &[Bar]) {
    let marked: Vec<&Bar> = bars.iter().filter(|b| b.marked).collect();
    if marked.is_empty() {
        return;
    }
    html.push_str(
        "<h2>Marked operations</h2>\n<table><tr><th>op</th><th>process</th><th>f</th>\
         <th>key</th><th>invoked</th><th>outcome</th><th>value</th><th>zxid</th>\
         <th>version</th></tr>\n",
    );
    for bar in marked {
        let inv = bar.invoke;
        let done = bar.done.unwrap_or(inv);
        let process = match inv.process {
            Process::Client(p) => p.to_string(),
            Process::Nemesis(_) => "nemesis".to_string(),
        };
        let indices = match bar.done {
            Some(done) if !std::ptr::eq(done, inv) => format!("{} → {}", inv.index, done.index),
            _ => inv.index.to_string(),
        };
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            indices,
            process,
            escape(&inv.f),
            escape(inv.key.as_deref().unwrap_or("")),
            seconds(inv.time),
            bar.outcome_class(),
            escape(&done.value.to_string()),
            done.zxid.map(|z| format!("{z:#x}")).unwrap_or_default(),
            done.version.map(|v| v.to_string()).unwrap_or_default()
        );
    }
    html.push_str("</table>\n");
}

/// Nanoseconds as seconds with microsecond precision, e.g. `1.234567 s`.
fn seconds(ns: u64) -> String {
    format!("{}.{:06} s", ns / 1_000_000_000, ns % 1_000_000_000 / 1_000)
}

fn css() -> String {
    format!(
        "body{{font:13px system-ui,sans-serif;margin:16px;color:#212121}}\
         h1{{font-size:18px;margin:0 0 6px}}h2{{font-size:15px;margin:18px 0 6px}}\
         .note{{margin:2px 0;color:#555}}.cut{{color:#b71c1c}}\
         .legend{{margin:8px 0;display:flex;flex-wrap:wrap;gap:14px}}\
         .legend span{{display:inline-flex;align-items:center;gap:5px}}\
         .legend .swatch{{display:inline-block;position:static;width:22px;height:12px}}\
         .legend .swatch.fault{{opacity:.35}}\
         .chart{{border:1px solid #ccc;padding:4px 8px 8px}}\
         .axis{{position:relative;height:18px;margin-left:{LABEL_PX}px;\
         border-bottom:1px solid #999;font-size:11px;color:#555}}\
         .axis span{{position:absolute;transform:translateX(-50%);white-space:nowrap}}\
         .lanes{{position:relative}}\
         .faults{{position:absolute;left:{LABEL_PX}px;right:0;top:0;bottom:0;\
         pointer-events:none}}\
         .fault{{position:absolute;top:0;bottom:0;opacity:{BAND_OPACITY}}}\
         .lane{{display:flex;height:22px;border-bottom:1px solid #eee}}\
         .label{{width:{LABEL_PX}px;flex:none;font-size:11px;line-height:22px;color:#333}}\
         .track{{position:relative;flex:1}}\
         .op{{position:absolute;top:3px;height:16px;min-width:2px;box-sizing:border-box;\
         border:1px solid rgba(0,0,0,.35);border-radius:2px;font-size:10px;line-height:14px;\
         overflow:hidden;white-space:nowrap;padding:0 2px;color:#111}}\
         .ok{{background:#81c784}}.fail{{background:#e57373}}.info{{background:#ffb74d}}\
         .open{{background:#bdbdbd}}.nemesis{{background:#616161;color:#fff}}\
         .marked{{border:2px solid #000;box-shadow:0 0 0 3px #ff1744;min-width:8px;z-index:2}}\
         table{{border-collapse:collapse;font-size:12px}}\
         td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left}}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::testing;
    use serde_json::{json, Value};

    fn op(index: u64, time: u64, kind: OpType, process: Process, f: &str, value: Value) -> Op {
        testing::op(index, time, kind, process, f).with_value(value)
    }

    /// A register history with a partition: process 0 writes, process 1 times out.
    fn history() -> Vec<Op> {
        use OpType::*;
        let (c, n) = (Process::Client, Process::NEMESIS);
        vec![
            op(0, 0, Invoke, c(0), "write", json!(1)),
            op(1, 10, Invoke, n, "start-partition", Value::Null),
            op(2, 20, Ok, c(0), "write", json!(1)),
            op(3, 30, Info, n, "start-partition", json!({"n1": ["n2"]})),
            op(4, 40, Invoke, c(1), "read", Value::Null),
            op(5, 50, Invoke, c(0), "cas", json!([1, 2])),
            op(6, 60, Fail, c(0), "cas", json!([1, 2])),
            op(7, 70, Invoke, n, "stop-partition", Value::Null),
            op(8, 80, Info, c(1), "read", Value::Null),
            op(9, 90, Info, n, "stop-partition", Value::Null),
            op(10, 100, Invoke, c(2), "read", Value::Null),
        ]
    }

    #[test]
    fn lanes_bars_and_marks_are_drawn() {
        let html = render(&history(), &[6], "cas <register>");
        assert!(html.contains("<title>cas &lt;register&gt;</title>"));
        for lane in ["nemesis", "process 0", "process 1", "process 2"] {
            assert!(
                html.contains(&format!("<div class=\"label\">{lane}</div>")),
                "{lane}"
            );
        }
        assert_eq!(html.matches("class=\"op ok\"").count(), 1);
        assert_eq!(html.matches("class=\"op fail marked\"").count(), 1);
        assert_eq!(html.matches("class=\"op info\"").count(), 1);
        assert_eq!(html.matches("class=\"op open\"").count(), 1);
        assert_eq!(html.matches("class=\"op nemesis\"").count(), 2);
        // The partition is shaded from the start's completion (30) to the stop's (90).
        assert!(
            html.contains("class=\"fault\" style=\"left:30.000%;width:60.000%"),
            "{html}"
        );
        assert!(html.contains("<h2>Marked operations</h2>"));
        assert!(!html.contains("<script") && !html.contains("http"));
    }

    #[test]
    fn long_histories_are_cut_around_the_marked_ops() {
        let ops: Vec<Op> = (0..10_000u64)
            .map(|i| {
                let kind = if i % 2 == 0 {
                    OpType::Invoke
                } else {
                    OpType::Ok
                };
                op(
                    i,
                    i * 1000,
                    kind,
                    Process::Client(i / 2 % 7),
                    "read",
                    Value::Null,
                )
            })
            .collect();
        let html = render(&ops, &[7001], "long");
        assert!(
            html.contains("Showing entries 6001 to 8000 of 10000"),
            "cut note"
        );
        // Completions 6001..=7999 and the invocation at 8000, which completes after the cut.
        assert_eq!(html.matches("class=\"op ok").count(), 1001);
        assert_eq!(html.matches("class=\"op open").count(), 0);
        assert_eq!(html.matches("class=\"op ok marked\"").count(), 1);
        let html = render(&ops, &[], "long");
        assert!(html.contains("Showing entries 0 to 1999 of 10000"));
    }

    #[test]
    fn empty_history_renders() {
        let html = render(&[], &[], "empty");
        assert!(html.contains("0 history entries"));
        assert!(html.ends_with("</html>\n"));
    }
}
