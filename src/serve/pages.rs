//! The browser's pages, rendered on the server as plain HTML: the index of runs and suites,
//! one page per run, and the trend of one test across runs.

use std::fmt::Write;
use std::path::Path;

use serde_json::Value;

use super::catalog::{self, Run, SuiteRun};
use super::latency::RunStats;
use super::paths::{encode, encode_path};
use crate::history::Quantiles;
use crate::report::html::escape;
use crate::store::{Figures, Results};
use crate::suite::html::STYLE;
use crate::suite::Verdict;

/// Filters of the index, from its query string.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Only runs of this workload.
    pub workload: Option<String>,
    /// Only runs whose nemesis has this fault kind (`none` for none).
    pub nemesis: Option<String>,
    /// Only runs of this database.
    pub db: Option<String>,
}

impl Filter {
    fn admits(&self, run: &Run) -> bool {
        let nemesis_ok = self
            .nemesis
            .as_ref()
            .is_none_or(|n| run.nemesis.split('+').any(|k| k == n));
        self.workload.as_ref().is_none_or(|w| *w == run.workload)
            && nemesis_ok
            && self.db.as_ref().is_none_or(|d| *d == run.db)
    }
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style></head><body>\n\
         <p><a href=\"/\">all runs</a></p>\n<h1>{t}</h1>\n{body}</body></html>\n",
        t = escape(title)
    )
}

fn verdict_label(verdict: Option<Verdict>) -> (&'static str, &'static str) {
    match verdict {
        Some(v) => (v.as_str(), v.colour()),
        None => ("incomplete", "#e4e4e4"),
    }
}

fn select(name: &str, values: &[String], chosen: Option<&String>) -> String {
    let mut html = format!("<label>{name} <select name=\"{name}\"><option value=\"\">any</option>");
    for v in values {
        let selected = if Some(v) == chosen { " selected" } else { "" };
        let _ = write!(html, "<option{selected}>{}</option>", escape(v));
    }
    html + "</select></label> "
}

fn distinct(runs: &[Run], field: impl Fn(&Run) -> Vec<String>) -> Vec<String> {
    let mut values: Vec<String> = runs.iter().flat_map(field).collect();
    values.sort();
    values.dedup();
    values
}

/// The index: suites, then the runs that pass `filter`, newest first, coloured by verdict.
pub fn index(runs: &[Run], suites: &[SuiteRun], filter: &Filter) -> String {
    let mut body = String::new();
    body.push_str("<h2>runs</h2>\n<form method=\"get\" action=\"/\">");
    body.push_str(&select(
        "workload",
        &distinct(runs, |r| vec![r.workload.clone()]),
        filter.workload.as_ref(),
    ));
    body.push_str(&select(
        "nemesis",
        &distinct(runs, |r| r.nemesis.split('+').map(str::to_string).collect()),
        filter.nemesis.as_ref(),
    ));
    body.push_str(&select(
        "db",
        &distinct(runs, |r| vec![r.db.clone()]),
        filter.db.as_ref(),
    ));
    body.push_str("<button type=\"submit\">filter</button></form>\n");
    let shown: Vec<&Run> = runs.iter().filter(|r| filter.admits(r)).collect();
    let _ = writeln!(body, "<p>{} of {} runs</p>", shown.len(), runs.len());
    body.push_str("<table id=\"runs\">\n<tr><th>started</th><th>test</th><th>workload</th><th>nemesis</th><th>db</th><th>verdict</th><th></th></tr>\n");
    for run in shown {
        let (label, colour) = verdict_label(run.verdict);
        let _ = writeln!(
            body,
            "<tr class=\"run\" data-verdict=\"{label}\" style=\"background:{colour}\"><td><a href=\"/run/{href}\">{stamp}</a></td><td>{name}</td><td>{w}</td><td>{n}</td><td>{db}</td><td class=\"verdict\">{label}</td><td><a href=\"/trend?name={trend}\">trend</a></td></tr>",
            href = encode_path(&run.rel),
            stamp = escape(&run.stamp),
            name = escape(&run.name),
            w = escape(&run.workload),
            n = escape(&run.nemesis),
            db = escape(&run.db),
            trend = encode(&run.name),
        );
    }
    body.push_str("</table>\n<h2>suites</h2>\n<table id=\"suites\">\n<tr><th>started</th><th>suite</th><th>tests</th><th>verdict</th></tr>\n");
    for suite in suites {
        let v = suite.summary.verdict();
        let _ = writeln!(
            body,
            "<tr class=\"suite\" data-verdict=\"{v}\" style=\"background:{colour}\"><td><a href=\"/files/{href}/{page}\">{stamp}</a></td><td>{name}</td><td>{n}{state}</td><td class=\"verdict\">{v}</td></tr>",
            v = v.as_str(),
            colour = v.colour(),
            href = encode_path(&suite.rel),
            page = suite.page,
            stamp = escape(&suite.stamp),
            name = escape(&suite.summary.suite),
            n = suite.summary.tests.len(),
            state = if suite.summary.finished { "" } else { " (running or cut short)" },
        );
    }
    body.push_str("</table>\n");
    page("stampede results", &body)
}

/// The page of the run in `dir` (`rel` from the results folder).
pub fn run(dir: &Path, rel: &str) -> String {
    let (run, results) = catalog::read_run_and_results(dir, rel);
    let (label, colour) = verdict_label(run.verdict);
    let files = |name: &str| format!("/files/{}/{}", encode_path(rel), encode(name));
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<p class=\"verdict\" id=\"verdict\" data-verdict=\"{label}\" style=\"background:{colour}\">verdict: {label}</p>\n\
         <p>workload {w} · nemesis {n} · db {db} · <a href=\"/trend?name={trend}\">trend of {name}</a></p>",
        w = escape(&run.workload),
        n = escape(&run.nemesis),
        db = escape(&run.db),
        trend = encode(&run.name),
        name = escape(&run.name),
    );
    if let Some(results) = &results {
        body.push_str(&anomalies(results));
        if let Some(lin) = results.checks.get("linearizable") {
            body.push_str(&counts(&lin["counts"]));
        }
    }
    body.push_str("<h2>plots</h2>\n");
    for png in listing(dir, |n| n.ends_with(".png")) {
        let _ = writeln!(
            body,
            "<p><img src=\"{}\" alt=\"{n}\" title=\"{n}\"></p>",
            files(&png),
            n = escape(&png)
        );
    }
    body.push_str("<h2>files</h2>\n<ul>\n");
    for file in listing(dir, |n| {
        [".html", ".json", ".jsonl", ".yaml"]
            .iter()
            .any(|e| n.ends_with(e))
    }) {
        let _ = writeln!(
            body,
            "<li><a href=\"{}\">{}</a></li>",
            files(&file),
            escape(&file)
        );
    }
    body.push_str("</ul>\n<h2>node logs</h2>\n<ul>\n");
    for node in listing(&dir.join("nodes"), |_| true) {
        let logs: Vec<String> = listing(&dir.join("nodes").join(&node), |_| true)
            .iter()
            .map(|f| {
                format!(
                    "<a href=\"/files/{}/nodes/{}/{}\">{}</a>",
                    encode_path(rel),
                    encode(&node),
                    encode(f),
                    escape(f)
                )
            })
            .collect();
        let _ = writeln!(body, "<li>{}: {}</li>", escape(&node), logs.join(" · "));
    }
    body.push_str("</ul>\n<h2>test.yaml</h2>\n");
    let config = std::fs::read_to_string(dir.join("test.yaml")).unwrap_or_default();
    let _ = writeln!(body, "<pre id=\"config\">{}</pre>", escape(&config));
    page(&format!("{} {}", run.name, run.stamp), &body)
}

/// The anomalies in results.json: each checker's verdict and what it found.
fn anomalies(results: &Results) -> String {
    let mut html = String::from("<h2>anomalies</h2>\n");
    if let Some(reason) = &results.aborted {
        let _ = writeln!(html, "<p>aborted: {}</p>", escape(reason));
    }
    if let Some(lin) = results.checks.get("linearizable") {
        html.push_str(&linearizability(lin));
    }
    if let Some(zk) = results.checks.get("zookeeper") {
        let _ = writeln!(
            html,
            "<p>zookeeper guarantees: {}</p>",
            describe(&zk["valid"])
        );
        if let Some(found) = zk["anomalies"].as_array().filter(|a| !a.is_empty()) {
            let pretty = serde_json::to_string_pretty(&found.iter().take(50).collect::<Vec<_>>())
                .unwrap_or_default();
            let _ = writeln!(html, "<pre id=\"anomalies\">{}</pre>", escape(&pretty));
        } else {
            html.push_str("<p id=\"anomalies\">no anomalies</p>\n");
        }
    }
    // Every other workload's checker: its verdict and the anomalies it listed by kind.
    let others = results
        .checks
        .iter()
        .filter(|(name, _)| !["linearizable", "zookeeper", "run"].contains(&name.as_str()));
    for (name, report) in others.filter(|(_, r)| r.get("valid").is_some()) {
        let _ = writeln!(
            html,
            "<p>{}: {}</p>",
            escape(name),
            describe(&report["valid"])
        );
        if let Some(found) = report["anomalies"].as_object().filter(|a| !a.is_empty()) {
            let pretty = serde_json::to_string_pretty(found).unwrap_or_default();
            let _ = writeln!(html, "<pre>{}</pre>", escape(&pretty));
        }
    }
    html
}

/// The linearizability check's part of a run page: its verdict and each failing key.
fn linearizability(lin: &Value) -> String {
    let mut html = String::new();
    let bad_keys: Vec<(&String, &Value)> = lin["keys"]
        .as_object()
        .map(|k| k.iter().filter(|(_, v)| v["valid"] != true).collect())
        .unwrap_or_default();
    let _ = writeln!(
        html,
        "<p>linearizability ({}): {}</p>",
        escape(lin["model"].as_str().unwrap_or("?")),
        describe(&lin["valid"])
    );
    for (key, detail) in bad_keys.iter().take(20) {
        let pretty = serde_json::to_string_pretty(detail).unwrap_or_default();
        let _ = writeln!(
            html,
            "<details open><summary>key {}</summary><pre>{}</pre></details>",
            escape(key),
            escape(&pretty)
        );
    }
    html
}

fn describe(valid: &Value) -> &'static str {
    match valid {
        Value::Bool(true) => "valid",
        Value::Bool(false) => "INVALID",
        Value::Null => "not checked",
        _ => "unknown",
    }
}

fn counts(counts: &Value) -> String {
    let Some(by_f) = counts.as_object() else {
        return String::new();
    };
    let mut html = String::from(
        "<h2>operations</h2>\n<table><tr><th>f</th><th>ok</th><th>fail</th><th>info</th></tr>\n",
    );
    for (f, c) in by_f {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(f),
            c["ok"],
            c["fail"],
            c["info"]
        );
    }
    html + "</table>\n"
}

/// Names of the entries of `dir` that `keep` accepts, sorted.
fn listing(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|n| !n.starts_with('.') && keep(n))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The trend of the test `name`: each run's verdict, counts and p50/p99 latency per
/// function, oldest first, with a chart of the latencies, and for recipe runs their latencies
/// and herd figures.
pub fn trend(name: &str, runs: &[(Run, RunStats)]) -> String {
    let mut body = String::new();
    let functions: Vec<String> = {
        let mut fs: Vec<String> = runs.iter().flat_map(|(_, s)| s.keys().cloned()).collect();
        fs.sort();
        fs.dedup();
        fs
    };
    let _ = writeln!(
        body,
        "<p>{} runs of {}, oldest first.</p>",
        runs.len(),
        escape(name)
    );
    body.push_str(&chart(runs, &functions));
    body.push_str("<table id=\"trend\">\n<tr><th>started</th><th>verdict</th>");
    for f in &functions {
        let _ = write!(
            body,
            "<th>{f} ok/fail/info</th><th>{f} p50 ms</th><th>{f} p99 ms</th>",
            f = escape(f)
        );
    }
    body.push_str("</tr>\n");
    let ms = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.1}"));
    for (run, stats) in runs {
        let (label, colour) = verdict_label(run.verdict);
        let _ = write!(
            body,
            "<tr class=\"run\" style=\"background:{colour}\"><td><a href=\"/run/{href}\">{stamp}</a></td><td>{label}</td>",
            href = encode_path(&run.rel),
            stamp = escape(&run.stamp)
        );
        for f in &functions {
            let s = stats.get(f).cloned().unwrap_or_default();
            let _ = write!(
                body,
                "<td>{}/{}/{}</td><td>{}</td><td>{}</td>",
                s.ok,
                s.fail,
                s.info,
                ms(s.p50_ms),
                ms(s.p99_ms)
            );
        }
        body.push_str("</tr>\n");
    }
    body.push_str("</table>\n");
    body.push_str(&recipe_table(runs));
    page(&format!("trend of {name}"), &body)
}

/// The figures a recipe run (lock or election) keeps in results.json, as table cells:
/// acquire and hand-off p50/p99 (ms), notifications and requests per release (clients),
/// notifications per release (servers), election failover p50/p99 (ms).
fn recipe_cells(figures: &Figures) -> Option<[String; 9]> {
    figures.recipe.as_ref()?;
    let num = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.1}"));
    let q = |q: Option<Quantiles>, p99: bool| num(q.map(|q| if p99 { q.p99_ms } else { q.p50_ms }));
    Some([
        q(figures.acquire, false),
        q(figures.acquire, true),
        q(figures.handoff, false),
        q(figures.handoff, true),
        num(figures.notifications.map(|n| n.mean)),
        num(figures.requests.map(|r| r.mean)),
        num(figures.server.map(|s| s.notifications_per_release)),
        q(figures.failover, false),
        q(figures.failover, true),
    ])
}

/// A table of recipe figures across the runs that have them (empty when none has).
fn recipe_table(runs: &[(Run, RunStats)]) -> String {
    let rows: Vec<(&Run, [String; 9])> = runs
        .iter()
        .filter_map(|(run, _)| Some((run, recipe_cells(&run.figures)?)))
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h2>recipe figures</h2>\n<table id=\"recipes\">\n<tr><th>started</th><th>acquire p50 ms</th><th>acquire p99 ms</th>\
         <th>hand-off p50 ms</th><th>hand-off p99 ms</th><th>notifications / release (clients)</th>\
         <th>requests / release (clients)</th><th>notifications / release (servers)</th>\
         <th>failover p50 ms</th><th>failover p99 ms</th></tr>\n",
    );
    for (run, cells) in rows {
        let _ = write!(
            out,
            "<tr><td><a href=\"/run/{}\">{}</a></td>",
            encode_path(&run.rel),
            escape(&run.stamp)
        );
        for cell in cells {
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    out
}

/// An inline SVG with one line per function and quantile (p50 solid, p99 dashed) over the
/// runs, in run order.
fn chart(runs: &[(Run, RunStats)], functions: &[String]) -> String {
    const W: f64 = 720.0;
    const H: f64 = 240.0;
    const PAD: f64 = 40.0;
    const COLOURS: [&str; 6] = [
        "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
    ];
    let max = runs
        .iter()
        .flat_map(|(_, s)| s.values().filter_map(|f| f.p99_ms.or(f.p50_ms)))
        .fold(0.0_f64, f64::max);
    if runs.is_empty() || max <= 0.0 {
        return "<p>no latencies recorded yet</p>\n".to_string();
    }
    const RIGHT: f64 = W - 120.0;
    let x = |i: usize| {
        PAD + if runs.len() > 1 {
            i as f64 * (RIGHT - PAD) / (runs.len() - 1) as f64
        } else {
            (RIGHT - PAD) / 2.0
        }
    };
    let y = |v: f64| H - PAD - v / max * (H - 2.0 * PAD);
    let mut svg = format!(
        "<svg id=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" style=\"border:1px solid #ccc;background:#fff\">\
         <text x=\"4\" y=\"14\" font-size=\"12\">latency ms (max {max:.1}); p50 solid, p99 dashed</text>\
         <line x1=\"{PAD}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"#888\"/>",
        b = H - PAD,
        r = RIGHT
    );
    for (k, f) in functions.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        for (dash, pick) in [("", 0), (" stroke-dasharray=\"5,4\"", 1)] {
            let points: Vec<String> = runs
                .iter()
                .enumerate()
                .filter_map(|(i, (_, s))| {
                    let stats = s.get(f)?;
                    let v = if pick == 0 {
                        stats.p50_ms
                    } else {
                        stats.p99_ms
                    }?;
                    Some(format!("{:.1},{:.1}", x(i), y(v)))
                })
                .collect();
            let _ = write!(svg, "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash} points=\"{}\"/>", points.join(" "));
        }
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"{colour}\">{}</text>",
            RIGHT + 16.0,
            30.0 + 14.0 * k as f64,
            escape(f)
        );
    }
    svg + "</svg>\n"
}

#[cfg(test)]
mod recipe_tests {
    use super::*;
    use crate::report::recipes::LoadFigures;
    use crate::store::ServerFigures;

    #[test]
    fn recipe_runs_show_latency_and_herd_figures() {
        let quantiles = |p50_ms, p99_ms| Quantiles {
            p50_ms,
            p99_ms,
            ..Quantiles::default()
        };
        let lock = Figures {
            recipe: Some("lock-sequential".into()),
            acquire: Some(quantiles(12.34, 56.0)),
            handoff: Some(quantiles(3.0, 9.5)),
            notifications: Some(LoadFigures {
                mean: 36.8,
                max: 40,
            }),
            server: Some(ServerFigures {
                notifications_per_release: 37.2,
                packets_per_release: 80.0,
            }),
            ..Figures::default()
        };
        let cells = recipe_cells(&lock).expect("a lock run has recipe figures");
        assert_eq!(cells[0], "12.3");
        assert_eq!(cells[4], "36.8");
        assert_eq!(cells[6], "37.2");
        assert_eq!(cells[7], "–", "no failover in a lock run");
        let election = Figures {
            recipe: Some("election-fair".into()),
            failover: Some(quantiles(4.0, 40.0)),
            ..Figures::default()
        };
        let cells = recipe_cells(&election).expect("an election run has recipe figures");
        assert_eq!((cells[7].as_str(), cells[8].as_str()), ("4.0", "40.0"));
        assert!(
            recipe_cells(&Figures::default()).is_none(),
            "a register run"
        );
    }
}

#[cfg(test)]
mod anomaly_tests {
    use super::*;

    #[test]
    fn a_run_of_a_workload_without_linearizability_shows_its_own_checker() {
        let results: Results = serde_json::from_value(serde_json::json!({
            "valid": false,
            "bank": {
                "valid": false,
                "anomalies": {"wrong-total": [{"index": 5, "process": 1, "what": "add up to 27"}]},
                "counts": {"wrong-total": 1}
            },
            "run": {"ok": 10}
        }))
        .unwrap();
        let html = anomalies(&results);
        assert!(html.contains("<p>bank: INVALID</p>"), "{html}");
        assert!(html.contains("add up to 27"), "{html}");
        assert!(!html.contains("linearizability"), "{html}");
    }
}
