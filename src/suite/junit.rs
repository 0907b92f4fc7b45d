//! The suite as a JUnit XML report, the format CI servers read: one `testcase` per test, a
//! `failure` for anomalies, an `error` for a test without a verdict.

use std::fmt::Write;

use super::summary::{Summary, Verdict};
use crate::report::html::escape;

/// Renders `summary` as a JUnit XML document.
pub fn render(summary: &Summary) -> String {
    let total: f64 = summary.tests.iter().map(|t| t.duration_s).sum();
    let errors = summary.count(Verdict::Error) + summary.count(Verdict::Unknown);
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites name=\"stampede\" tests=\"{n}\" failures=\"{f}\" errors=\"{errors}\" time=\"{total:.3}\">",
        n = summary.tests.len(),
        f = summary.count(Verdict::Invalid),
    );
    let _ = writeln!(
        xml,
        "  <testsuite name=\"{name}\" timestamp=\"{started}\" tests=\"{n}\" failures=\"{f}\" errors=\"{errors}\" time=\"{total:.3}\">",
        name = escape(&summary.suite),
        started = escape(&summary.started),
        n = summary.tests.len(),
        f = summary.count(Verdict::Invalid),
    );
    for t in &summary.tests {
        let _ = write!(
            xml,
            "    <testcase classname=\"{suite}.{db}\" name=\"{name} #{rep}\" time=\"{time:.3}\"",
            suite = escape(&summary.suite),
            db = escape(&t.db),
            name = escape(&t.name),
            rep = t.repetition,
            time = t.duration_s,
        );
        let line = t.verdict_line.as_deref().unwrap_or("");
        match t.verdict {
            Verdict::Valid => xml.push_str("/>\n"),
            Verdict::Invalid => {
                let _ = writeln!(
                    xml,
                    ">\n      <failure type=\"anomalies\" message=\"{m}\">{m}</failure>",
                    m = escape(line)
                );
                push_results(&mut xml, t.results.as_deref());
                xml.push_str("    </testcase>\n");
            }
            Verdict::Unknown | Verdict::Error => {
                let kind = t.verdict.as_str();
                let message = t.error.as_deref().unwrap_or(line);
                let code = t
                    .exit_code
                    .map_or("none (signal)".to_string(), |c| c.to_string());
                let _ = writeln!(
                    xml,
                    ">\n      <error type=\"{kind}\" message=\"{m}\">exit code {code}: {m}</error>",
                    m = escape(message)
                );
                push_results(&mut xml, t.results.as_deref());
                xml.push_str("    </testcase>\n");
            }
        }
    }
    xml.push_str("  </testsuite>\n</testsuites>\n");
    xml
}

fn push_results(xml: &mut String, results: Option<&str>) {
    if let Some(dir) = results {
        let _ = writeln!(
            xml,
            "      <system-out>results: {}</system-out>",
            escape(dir)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::summary::tests::sample;

    #[test]
    fn the_report_parses_back_with_one_testcase_per_test() {
        let mut summary = sample();
        summary.tests[3].error = Some("bell \u{7} and <markup> & \"quotes\"".into());
        let xml = render(&summary);
        let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
        let suite = doc
            .descendants()
            .find(|n| n.has_tag_name("testsuite"))
            .unwrap();
        assert_eq!(suite.attribute("name"), Some("smoke"));
        assert_eq!(suite.attribute("tests"), Some("4"));
        assert_eq!(suite.attribute("failures"), Some("1"));
        assert_eq!(suite.attribute("errors"), Some("2"));
        let cases: Vec<_> = suite
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        assert_eq!(cases.len(), 4);
        assert_eq!(cases[0].attribute("name"), Some("a #1"));
        assert!(
            cases[0].children().all(|c| !c.is_element()),
            "a valid test has no failure"
        );
        let failure = cases[1]
            .children()
            .find(|c| c.has_tag_name("failure"))
            .unwrap();
        assert_eq!(failure.attribute("message"), Some("verdict: invalid <&>"));
        let error = cases[3]
            .children()
            .find(|c| c.has_tag_name("error"))
            .unwrap();
        assert_eq!(error.attribute("type"), Some("error"));
        assert_eq!(
            error.attribute("message"),
            Some("bell  and <markup> & \"quotes\"")
        );
        assert!(error.text().unwrap().starts_with("exit code 2: "));
        assert!(
            cases[2].children().any(|c| c.has_tag_name("error")),
            "unknown counts as an error"
        );
    }
}
