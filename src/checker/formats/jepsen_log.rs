//! Jepsen's `jepsen.util` log lines, one operation per line as Jepsen logs them while a test
//! runs, and Jepsen's `history.txt` (the same lines without the logger's prefix).
//!
//! An op line is a line from the `jepsen.util` logger (`INFO  jepsen.util - ` in old logs,
//! `... jepsen.util: ` with logback's default layout) whose message starts with a process (an
//! integer, or a keyword such as `:nemesis`); its message is `<process> :<type> <f> <value>`
//! and optionally an error, the fields separated by tabs as Jepsen writes them or by any run of
//! whitespace as reformatted logs have them (as Jepsen's log readers and Porcupine's test
//! parser split them). The value is one EDN form, so it may hold spaces (`[1 4]`); whatever
//! follows it is the error. Every such line must parse, or the whole file is rejected with an
//! error that names the line; lines of other loggers and `jepsen.util` messages that do not
//! start with a process (e.g. stack traces, progress messages) are not operations and are
//! skipped. A file without any `jepsen.util` line is a `history.txt`: every line that is not
//! blank must be an op line. A timestamp at the start of the line (`2017-03-07 14:39:59,339`)
//! becomes the op's time, relative to the first op line; without one, ops are timed by
//! position. Keys of independent histories are split off as in [`super::edn`].

use anyhow::{anyhow, bail, Result};

use super::edn::{self, Edn, RawOp};
use crate::history::Op;

/// The markers that introduce a `jepsen.util` log message, old layout and logback's.
const MARKERS: [&str; 2] = ["jepsen.util - ", "jepsen.util: "];

/// Parses the operations logged in a Jepsen log or `history.txt`.
pub fn parse(text: &str) -> Result<Vec<Op>> {
    let logged = text.lines().any(|line| util_message(line).is_some());
    let mut raws = Vec::new();
    let mut first_ms = None;
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        let (prefix, message) = match util_message(line) {
            Some(split) => split,
            None if logged || line.trim().is_empty() => continue,
            None => ("", line.trim_end_matches('\r')),
        };
        if logged && !starts_with_process(message) {
            continue;
        }
        let column = line.len() - message.len() + 1;
        let mut raw = op_line(number, column, message)?;
        if let Some(ms) = timestamp_ms(prefix) {
            let first = *first_ms.get_or_insert(ms);
            // Log lines of different threads may be a millisecond out of order; keep the
            // times monotone, as the history requires, without reordering the ops.
            let previous = raws.last().and_then(|r: &RawOp| r.time).unwrap_or(0);
            raw.time = Some(
                ms.saturating_sub(first)
                    .saturating_mul(1_000_000)
                    .max(previous),
            );
        }
        raws.push(raw);
    }
    edn::finish(raws)
}

/// Whether `line` is an op line of `history.txt`: a process, then an op type keyword.
pub fn is_op_message(line: &str) -> bool {
    let mut fields = line.split_whitespace();
    starts_with_process(line)
        && fields
            .nth(1)
            .is_some_and(|t| matches!(t, ":invoke" | ":ok" | ":fail" | ":info"))
}

/// Splits a `jepsen.util` log line into the text before the marker and the message.
fn util_message(line: &str) -> Option<(&str, &str)> {
    MARKERS.iter().find_map(|marker| {
        line.find(marker).map(|at| {
            (
                &line[..at],
                line[at + marker.len()..].trim_end_matches('\r'),
            )
        })
    })
}

/// Whether a message starts with a process (digits or a keyword), then more fields.
fn starts_with_process(message: &str) -> bool {
    let mut fields = message.split_whitespace();
    let Some(first) = fields.next() else {
        return false;
    };
    let keyword = first.len() > 1 && first.starts_with(':');
    (keyword || first.bytes().all(|b| b.is_ascii_digit())) && fields.next().is_some()
}

/// Reads `<process> <type> <f> <value> [<error>]` from line `number`, whose message starts at
/// `column`.
fn op_line(number: usize, column: usize, message: &str) -> Result<RawOp> {
    let mut rest = message;
    let mut at = column;
    let mut fields = Vec::with_capacity(3);
    for _ in 0..3 {
        let skipped = rest.len() - rest.trim_start().len();
        at += rest[..skipped].chars().count();
        rest = &rest[skipped..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        fields.push(edn::read_value(&rest[..end], number, at)?);
        at += rest[..end].chars().count();
        rest = &rest[end..];
    }
    if fields.len() < 3 || rest.trim().is_empty() {
        bail!(
            "line {number}: a jepsen.util op line needs <process>, <type>, <f> and <value> \
             separated by whitespace, found {} field(s)",
            fields.len() + usize::from(!rest.trim().is_empty())
        );
    }
    let (value, after) = edn::read_first(rest, number, at)?;
    let at_line = |e: anyhow::Error| anyhow!("line {number}: {e}");
    let kind = edn::op_type(&fields[1]).map_err(at_line)?;
    let process = edn::process_of(&fields[0]).map_err(at_line)?;
    let f = match &fields[2] {
        Edn::Keyword(name) | Edn::Symbol(name) | Edn::Str(name) => name.clone(),
        other => bail!("line {number}: the op's f must be a keyword, found {other}"),
    };
    let error = Some(after.trim().to_string()).filter(|e| !e.is_empty());
    Ok(RawOp {
        line: number,
        kind,
        process,
        f,
        value,
        index: None,
        time: None,
        error,
        node: None,
        zxid: None,
        version: None,
    })
}

/// Milliseconds since 1970 of a leading `YYYY-MM-DD HH:MM:SS,mmm` (or `T` and `.`) stamp.
fn timestamp_ms(prefix: &str) -> Option<u64> {
    let b = prefix.as_bytes();
    if b.len() < 23 {
        return None;
    }
    let digits = |range: std::ops::Range<usize>| -> Option<u64> {
        let s = prefix.get(range)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let shape_ok = b[4] == b'-'
        && b[7] == b'-'
        && matches!(b[10], b' ' | b'T')
        && b[13] == b':'
        && b[16] == b':'
        && matches!(b[19], b',' | b'.');
    if !shape_ok {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, minute, second, milli) = (
        digits(11..13)?,
        digits(14..16)?,
        digits(17..19)?,
        digits(20..23)?,
    );
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year as i64, month as i64, day as i64);
    let seconds = days * 86_400 + (hour * 3600 + minute * 60 + second) as i64;
    u64::try_from(seconds).ok().map(|s| s * 1000 + milli)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {

    const LOGBACK: &str =
        include_str!("../../../tests/fixtures/checker/jepsen-log/logback-cas.log");
    const OLD: &str = include_str!("../../../tests/fixtures/checker/jepsen-log/old-layout.log");
    const BAD_VALUE: &str =
        include_str!("../../../tests/fixtures/checker/jepsen-log/malformed-value.log");
    const MISSING_VALUE: &str =
        include_str!("../../../tests/fixtures/checker/jepsen-log/malformed-missing-value.log");

    #[test]
    fn logback_layout_parses_ops_and_times() {
        use super::*;
        use crate::history::{OpType, Process};
        use serde_json::json;
        let ops = parse(LOGBACK).unwrap();
        let shape: Vec<_> = ops
            .iter()
            .map(|o| (o.index, o.kind, o.process, o.f.as_str(), o.value.clone()))
            .collect();
        use OpType::*;
        let c = Process::Client;
        let n = Process::NEMESIS;
        assert_eq!(
            shape,
            vec![
                (0, Invoke, c(0), "read", json!(null)),
                (1, Invoke, c(1), "write", json!(3)),
                (2, Ok, c(0), "read", json!(null)),
                (3, Ok, c(1), "write", json!(3)),
                (4, Info, n, "start-partition", json!(null)),
                (
                    5,
                    Info,
                    n,
                    "start-partition",
                    json!(["isolated", {"n1": ["n2", "n3"]}])
                ),
                (6, Invoke, c(0), "cas", json!([3, 4])),
                (7, Info, c(0), "cas", json!("timed-out")),
                (8, Invoke, c(2), "read", json!(null)),
                (9, Ok, c(2), "read", json!(4)),
                (10, Invoke, c(1), "cas", json!([4, 1])),
                (11, Fail, c(1), "cas", json!([4, 1])),
                (12, Info, n, "stop-partition", json!(null)),
                (13, Info, n, "stop-partition", json!("network-healed")),
            ]
        );
        assert_eq!(ops[0].time, 0);
        assert_eq!(ops[1].time, 1_000_000);
        assert_eq!(ops[7].time, 5_161_000_000);
        assert_eq!(
            ops[7].error.as_deref(),
            Some("indeterminate: connection loss")
        );
    }

    #[test]
    fn old_layout_skips_non_op_messages_and_times_by_position() {
        use super::*;
        use crate::history::{OpType, Process};
        use serde_json::json;
        let ops = parse(OLD).unwrap();
        assert_eq!(ops.len(), 8);
        assert_eq!(
            ops.iter().map(|o| o.time).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4, 5, 6, 7]
        );
        assert_eq!(ops[5].f, "cas");
        assert_eq!(ops[5].kind, OpType::Info);
        assert_eq!(ops[7].process, Process::Client(6));
        assert_eq!(ops[7].value, json!(3));
    }

    #[test]
    fn malformed_op_lines_name_the_line() {
        use super::*;
        let err = parse(BAD_VALUE).unwrap_err().to_string();
        assert!(
            err.starts_with("line 2, column 36: unclosed collection"),
            "{err}"
        );
        let err = parse(MISSING_VALUE).unwrap_err().to_string();
        assert!(
            err.starts_with("line 3: a jepsen.util op line needs") && err.contains("found 3"),
            "{err}"
        );
        let err = parse("INFO  jepsen.util - 0\t:begin\t:read\tnil").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("line 1: unknown op :type :begin"),
            "{err}"
        );
    }

    #[test]
    fn fields_aligned_with_spaces_split_on_whitespace_and_values_keep_theirs() {
        use super::*;
        use crate::history::{OpType, Process};
        use serde_json::json;
        let log = "INFO  jepsen.util - 1   :invoke :write  3\n\
                   INFO  jepsen.util - 12  :invoke :cas    [1 4]\n\
                   INFO  jepsen.util - 1   :ok     :write  3\n\
                   INFO  jepsen.util - 12  :info   :cas    [1 4]   indeterminate: timed out\n\
                   INFO  jepsen.util - :nemesis :info :start   {:n1 [:n2 :n3]}\n";
        let ops = parse(log).unwrap();
        assert_eq!(ops.len(), 5);
        assert_eq!(ops[1].process, Process::Client(12));
        assert_eq!(ops[1].value, json!([1, 4]));
        assert_eq!(ops[3].kind, OpType::Info);
        assert_eq!(ops[3].value, json!([1, 4]));
        assert_eq!(ops[3].error.as_deref(), Some("indeterminate: timed out"));
        assert_eq!(ops[4].process, Process::NEMESIS);
        assert_eq!(ops[4].value, json!({"n1": ["n2", "n3"]}));
    }

    #[test]
    fn history_txt_without_logger_prefix_parses_every_line() {
        use super::*;
        use crate::history::OpType;
        let text = "0\t:invoke\t:read\tnil\n0\t:ok\t:read\t3\n\n:nemesis\t:info\t:start\tnil\n";
        let ops = parse(text).unwrap();
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[1].kind, OpType::Ok);
        let err = parse("0 :invoke :read nil\nhello there\n").unwrap_err();
        assert!(err.to_string().starts_with("line 2"), "{err}");
    }

    #[test]
    fn timestamps_are_read_from_the_line_start() {
        use super::*;
        assert_eq!(
            timestamp_ms("1970-01-02 00:00:01,005{GMT}\tINFO\t"),
            Some(86_401_005)
        );
        assert_eq!(
            timestamp_ms("2000-03-01T00:00:00.000 "),
            Some(951_868_800_000)
        );
        assert_eq!(timestamp_ms("INFO  "), None);
        assert_eq!(timestamp_ms("2000-13-01 00:00:00,000"), None);
    }
}
