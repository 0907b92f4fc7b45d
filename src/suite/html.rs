//! The suite's `index.html`: a self-contained page with one row per test, coloured by
//! verdict, linking to each test's results. Also the style the results browser shares (text
//! is escaped by [`crate::report::html::escape`]).

use std::fmt::Write;

use super::summary::{Summary, Verdict};
use crate::report::html::escape;

/// The style sheet of stampede's pages (inlined, so each page stands alone).
pub const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;padding:.25em .6em;text-align:left}\
th{background:#eee}a{color:#1a4f9c}pre{background:#f6f6f6;padding:.6em;overflow:auto}\
.verdict{font-weight:bold}img{max-width:100%;border:1px solid #ddd;margin:.3em 0}";

/// Renders the suite's `index.html`; links are relative to the suite's folder.
pub fn render(summary: &Summary) -> String {
    let overall = summary.verdict();
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>suite {name} {started}</title><style>{STYLE}</style></head><body>\n\
         <h1>suite {name}</h1>\n<p>started {started}{state}</p>\n\
         <p class=\"verdict\" style=\"background:{colour}\">{overall}: {valid} valid, {invalid} with anomalies, {unknown} unknown, {error} errors</p>\n",
        name = escape(&summary.suite),
        started = escape(&summary.started),
        state = if summary.finished { "" } else { " (still running or cut short)" },
        colour = overall.colour(),
        overall = overall.as_str(),
        valid = summary.count(Verdict::Valid),
        invalid = summary.count(Verdict::Invalid),
        unknown = summary.count(Verdict::Unknown),
        error = summary.count(Verdict::Error),
    );
    html.push_str("<table>\n<tr><th>test</th><th>#</th><th>workload</th><th>nemesis</th><th>db</th><th>verdict</th><th>exit</th><th>duration</th><th>details</th></tr>\n");
    for t in &summary.tests {
        let details = match (&t.results, &t.error) {
            (_, Some(error)) => escape(error),
            (Some(dir), None) => {
                let d = escape(dir);
                format!(
                    "<a href=\"{d}/results.json\">results</a> · <a href=\"{d}/timeline.html\">timeline</a> · <a href=\"{d}/latency-raw.png\">latency</a> — {}",
                    escape(t.verdict_line.as_deref().unwrap_or(""))
                )
            }
            (None, None) => String::new(),
        };
        let _ = writeln!(
            html,
            "<tr class=\"test\" data-verdict=\"{v}\" style=\"background:{colour}\"><td>{name}</td><td>{rep}</td><td>{w}</td><td>{n}</td><td>{db}</td><td class=\"verdict\">{v}</td><td>{code}</td><td>{dur:.1} s</td><td>{details}</td></tr>",
            v = t.verdict.as_str(),
            colour = t.verdict.colour(),
            name = escape(&t.name),
            rep = t.repetition,
            w = escape(&t.workload),
            n = escape(&t.nemesis),
            db = escape(&t.db),
            code = t.exit_code.map_or("signal".to_string(), |c| c.to_string()),
            dur = t.duration_s,
        );
    }
    html.push_str("</table>\n<p><a href=\"summary.json\">summary.json</a> · <a href=\"junit.xml\">junit.xml</a></p>\n</body></html>\n");
    html
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::summary::tests::sample;

    #[test]
    fn rows_are_coloured_by_verdict_and_text_is_escaped() {
        let html = render(&sample());
        assert_eq!(html.matches("<tr class=\"test\"").count(), 4);
        for v in [
            Verdict::Valid,
            Verdict::Invalid,
            Verdict::Unknown,
            Verdict::Error,
        ] {
            let row = format!(
                "data-verdict=\"{}\" style=\"background:{}\"",
                v.as_str(),
                v.colour()
            );
            assert!(html.contains(&row), "{row}");
        }
        assert!(html.contains("&lt;refused&gt; &amp; gone"));
        assert!(!html.contains("<refused>"));
        assert!(html.contains("href=\"tests/a/2026-11-21T052629Z/timeline.html\""));
        assert!(html.contains("invalid: 1 valid, 1 with anomalies, 1 unknown, 1 errors"));
    }
}
