//! The one-line progress display of a running test: elapsed time, operations by outcome and
//! the nemesis state.
//!
//! It draws to stderr only when stderr is a terminal; otherwise (CI, a pipe) it draws nothing
//! and recording an operation costs an atomic increment.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use crate::history::{Op, OpType, Process};

/// How often the line is redrawn on a terminal, so the elapsed time moves between operations.
const REDRAW_EVERY: Duration = Duration::from_millis(500);

/// The progress line of one test run. Cheap to clone; clones share the same line, so every
/// client task can record into it.
#[derive(Clone)]
pub struct Progress {
    bar: ProgressBar,
    state: Arc<State>,
}

/// What the line shows, updated by [`Progress::record`] and read on each redraw.
#[derive(Default)]
struct State {
    time_limit: Duration,
    ok: AtomicU64,
    fail: AtomicU64,
    info: AtomicU64,
    /// The fault kinds currently active, from the nemesis operations recorded so far.
    active_faults: Mutex<BTreeSet<String>>,
}

impl Progress {
    /// Starts the line for a test that runs for `time_limit` (its clock starts now).
    pub fn new(time_limit: Duration) -> Progress {
        let state = Arc::new(State {
            time_limit,
            ..State::default()
        });
        let bar = if std::io::stderr().is_terminal() {
            let shown = Arc::clone(&state);
            let style = ProgressStyle::with_template("{line}")
                .expect("static template")
                .with_key(
                    "line",
                    move |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = w.write_str(&shown.line(s.elapsed()));
                    },
                );
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(style);
            bar.enable_steady_tick(REDRAW_EVERY);
            bar
        } else {
            ProgressBar::hidden()
        };
        Progress { bar, state }
    }

    /// Counts a client operation's completion by outcome, or follows a nemesis operation's
    /// completion (`start-<kind>` makes the fault active, `stop-<kind>` heals it).
    pub fn record(&self, op: &Op) {
        let s = &self.state;
        match (op.process, op.kind) {
            (_, OpType::Invoke) => {}
            (Process::Client(_), OpType::Ok) => _ = s.ok.fetch_add(1, Ordering::Relaxed),
            (Process::Client(_), OpType::Fail) => _ = s.fail.fetch_add(1, Ordering::Relaxed),
            (Process::Client(_), OpType::Info) => _ = s.info.fetch_add(1, Ordering::Relaxed),
            (Process::Nemesis(_), OpType::Fail) => {}
            (Process::Nemesis(_), _) => {
                let mut active = s.active_faults.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(kind) = op.f.strip_prefix("start-") {
                    active.insert(kind.to_owned());
                } else if let Some(kind) = op.f.strip_prefix("stop-") {
                    active.remove(kind);
                }
            }
        }
    }

    /// Removes the line from the terminal (a no-op when nothing was drawn).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl State {
    /// The text of the line after `elapsed`.
    fn line(&self, elapsed: Duration) -> String {
        let active = self.active_faults.lock().unwrap_or_else(|e| e.into_inner());
        format_line(
            elapsed,
            self.time_limit,
            [&self.ok, &self.fail, &self.info].map(|c| c.load(Ordering::Relaxed)),
            &active,
        )
    }
}

/// Formats e.g. `[00:42 / 01:00] ok 1234  fail 12  info 3 | nemesis: partition active`.
fn format_line(
    elapsed: Duration,
    time_limit: Duration,
    [ok, fail, info]: [u64; 3],
    active_faults: &BTreeSet<String>,
) -> String {
    let mut line = format!(
        "[{} / {}] ok {ok}  fail {fail}  info {info} | nemesis: ",
        clock(elapsed),
        clock(time_limit)
    );
    if active_faults.is_empty() {
        line.push_str("quiet");
    } else {
        let kinds: Vec<&str> = active_faults.iter().map(String::as_str).collect();
        let _ = write!(line, "{} active", kinds.join(", "));
    }
    line
}

/// `mm:ss`, or `h:mm:ss` from an hour on.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(process: Process, kind: OpType, f: &str) -> Op {
        crate::history::testing::op(0, 0, kind, process, f)
    }

    #[test]
    fn formats_elapsed_counts_and_quiet_nemesis() {
        let line = format_line(
            Duration::from_millis(42_900),
            Duration::from_secs(60),
            [1234, 12, 3],
            &BTreeSet::new(),
        );
        assert_eq!(
            line,
            "[00:42 / 01:00] ok 1234  fail 12  info 3 | nemesis: quiet"
        );
        let line = format_line(
            Duration::from_secs(3725),
            Duration::from_secs(7200),
            [0, 0, 0],
            &BTreeSet::new(),
        );
        assert!(line.starts_with("[1:02:05 / 2:00:00]"), "{line}");
    }

    #[test]
    fn recorded_ops_drive_counts_and_nemesis_state() {
        let p = Progress::new(Duration::from_secs(60));
        let c = Process::Client(1);
        for (kind, f) in [
            (OpType::Invoke, "read"),
            (OpType::Ok, "read"),
            (OpType::Ok, "write"),
            (OpType::Fail, "cas"),
            (OpType::Info, "write"),
        ] {
            p.record(&op(c, kind, f));
        }
        let n = Process::NEMESIS;
        p.record(&op(n, OpType::Invoke, "start-partition"));
        assert!(p.state.line(Duration::ZERO).ends_with("nemesis: quiet"));
        p.record(&op(n, OpType::Info, "start-partition"));
        p.record(&op(n, OpType::Info, "start-kill"));
        let line = p.state.line(Duration::from_secs(5));
        assert_eq!(
            line,
            "[00:05 / 01:00] ok 2  fail 1  info 1 | nemesis: kill, partition active"
        );
        p.record(&op(n, OpType::Info, "stop-partition"));
        p.record(&op(n, OpType::Info, "stop-kill"));
        assert!(p.state.line(Duration::ZERO).ends_with("nemesis: quiet"));
        p.finish();
    }
}
