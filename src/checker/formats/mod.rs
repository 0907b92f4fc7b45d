//! History files: stampede's `history.jsonl`, Jepsen EDN histories and `jepsen.util` logs.

pub mod edn;
pub mod jepsen_log;
pub mod jsonl;

use std::path::Path;
use std::str::FromStr;

use anyhow::Context;

use crate::history::Op;

/// A history file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Guess from the first meaningful line.
    Auto,
    /// stampede's JSON lines.
    Jsonl,
    /// A Jepsen EDN history: a list or vector of op maps, or one map per line.
    Edn,
    /// `jepsen.util` log lines, or Jepsen's `history.txt` (the same lines without the
    /// logger's prefix).
    JepsenLog,
}

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "auto" => Ok(Format::Auto),
            "jsonl" => Ok(Format::Jsonl),
            "edn" => Ok(Format::Edn),
            "jepsen-log" => Ok(Format::JepsenLog),
            _ => Err(format!(
                "unknown format {s:?}: expected auto, jsonl, edn or jepsen-log"
            )),
        }
    }
}

/// Guesses the format of a history: a log line of `jepsen.util` anywhere among the first
/// lines makes it a Jepsen log; otherwise the first line that is neither blank nor a comment
/// tells JSON lines (`{"`) from EDN (`(`, `[`, `{` or a tagged `#...{`) and from a
/// `history.txt` op line (`<process> :<type> ...`).
pub fn detect(text: &str) -> anyhow::Result<Format> {
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(';'))
        .take(DETECT_LINES);
    if lines
        .clone()
        .any(|l| l.contains("jepsen.util - ") || l.contains("jepsen.util: "))
    {
        return Ok(Format::JepsenLog);
    }
    let Some(line) = lines.next() else {
        return Ok(Format::Jsonl);
    };
    if line.starts_with("{\"") || line.starts_with("{ \"") {
        return Ok(Format::Jsonl);
    }
    if line.starts_with(['(', '[', '{', '#']) {
        return Ok(Format::Edn);
    }
    if jepsen_log::is_op_message(line) {
        return Ok(Format::JepsenLog);
    }
    let shown: String = line.chars().take(60).collect();
    anyhow::bail!(
        "cannot tell the history format from its first line {shown:?}: name it with --format"
    )
}

/// How many meaningful lines [`detect`] looks at for a Jepsen log line.
const DETECT_LINES: usize = 100;

/// Parses a history in `format` (detected if [`Format::Auto`]); returns the ops and the format.
pub fn parse(text: &str, format: Format) -> anyhow::Result<(Vec<Op>, Format)> {
    let format = if format == Format::Auto {
        detect(text)?
    } else {
        format
    };
    let ops = match format {
        Format::Jsonl | Format::Auto => jsonl::parse(text)?,
        Format::Edn => edn::parse(text)?,
        Format::JepsenLog => jepsen_log::parse(text)?,
    };
    Ok((ops, format))
}

/// Reads and parses the history file at `path`; errors name the file.
pub fn read(path: &Path, format: Format) -> anyhow::Result<(Vec<Op>, Format)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text, format).with_context(|| format!("{}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_each_format_from_its_first_line() {
        let jsonl = r#"{"index":0,"time":0,"type":"invoke","process":0,"f":"read","value":null}"#;
        assert_eq!(detect(jsonl).unwrap(), Format::Jsonl);
        assert_eq!(
            detect("; a comment\n[{:type :invoke, :f :read}]").unwrap(),
            Format::Edn
        );
        assert_eq!(
            detect("{:type :invoke, :f :read, :process 0}").unwrap(),
            Format::Edn
        );
        assert_eq!(
            detect("({:type :invoke, :f :read, :process 0})").unwrap(),
            Format::Edn
        );
        assert_eq!(
            detect("#jepsen.history.Op{:index 0, :type :invoke}").unwrap(),
            Format::Edn
        );
        assert_eq!(detect("3\t:invoke\t:read\tnil").unwrap(), Format::JepsenLog);
        assert_eq!(
            detect(":nemesis :info :start nil").unwrap(),
            Format::JepsenLog
        );
        let log = "INFO  jepsen.util - 0\t:invoke\t:read\tnil";
        assert_eq!(detect(log).unwrap(), Format::JepsenLog);
        let logback = "2017-03-07 14:39:59,100{GMT}\tINFO\t[main] jepsen.core: Running\n\
                       2017-03-07 14:39:59,339{GMT}\tINFO\t[jepsen worker 0] jepsen.util: 0\t:invoke\t:read\tnil";
        assert_eq!(detect(logback).unwrap(), Format::JepsenLog);
        assert!(detect("hello")
            .unwrap_err()
            .to_string()
            .contains("--format"));
    }
}
