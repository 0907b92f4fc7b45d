//! The progress of a running test: the phase it is in and, from the run on, the time limit's
//! clock, operations by outcome and the faults in force.
//!
//! On a terminal it is one line on stderr, redrawn in place. Otherwise (cron, CI, a pipe) it
//! is a complete line on stderr at each phase change and every 10 s, for a log to read, e.g.
//! `progress: run [00:20 / 01:00] ok 1234 fail 12 info 3 | faults: partition`. Recording an
//! operation costs an atomic increment either way.

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use crate::history::{Op, OpType, Process};

/// How often the line is redrawn on a terminal, so the clocks move between operations.
const REDRAW_EVERY: Duration = Duration::from_millis(500);

/// How often a line is written when stderr is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(10);

/// Where a test run is. A run goes through them in this order, skipping those it has no use
/// for (one that fails in setup goes on to teardown).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Looking for leftovers of earlier runs and taking the run lock; a new [`Progress`] starts
    /// in it.
    Preflight,
    /// Installing and starting the database.
    Setup,
    /// The workloads under the nemesis: the time limit's clock runs from its first start.
    Run,
    /// Healing the faults: the workloads' healed tail and final reads. A run still in
    /// [`Phase::Run`] past its limit is shown in it, from the limit on.
    Heal,
    /// Comparing the replicas, measuring the servers' load and collecting their logs.
    Compare,
    /// Tearing the database down.
    Teardown,
    /// Judging the histories.
    Check,
}

impl Phase {
    /// Its name on the line: `preflight`, `setup`, `run`, `heal`, `compare`, `teardown` or
    /// `check`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Preflight => "preflight",
            Phase::Setup => "setup",
            Phase::Run => "run",
            Phase::Heal => "heal",
            Phase::Compare => "compare",
            Phase::Teardown => "teardown",
            Phase::Check => "check",
        }
    }
}

/// The progress of one test run. Cheap to clone; clones share the same state and display, so
/// every client task can record into it.
#[derive(Clone)]
pub struct Progress {
    state: Arc<State>,
    display: Display,
}

/// How the progress is shown.
#[derive(Clone)]
enum Display {
    /// One line on the terminal, redrawn in place.
    Terminal(ProgressBar),
    /// Complete lines, from phase changes and a ticker thread.
    Lines {
        out: Arc<Lines>,
        /// Dropping it (at [`Progress::finish`], or with the last clone) stops the ticker.
        stop: Arc<Mutex<Option<Sender<()>>>>,
    },
}

/// Where complete lines go, and when the last one went; `None` once finished.
struct Lines(Mutex<Option<(Box<dyn Write + Send>, Instant)>>);

/// What the line shows, updated by [`Progress::record`] and [`Progress::set_phase`].
struct State {
    ok: AtomicU64,
    fail: AtomicU64,
    info: AtomicU64,
    /// The fault kinds currently active, from the nemesis operations recorded so far.
    active_faults: Mutex<BTreeSet<String>>,
    clock: Mutex<Clock>,
}

/// The phase the run is in, since when, and the time limit's clock.
struct Clock {
    /// How long the run phase lasts before the faults are healed.
    time_limit: Duration,
    phase: Phase,
    /// When `phase` was entered.
    since: Instant,
    /// When [`Phase::Run`] was first entered: the limit's clock starts there.
    run_start: Option<Instant>,
    /// When [`Phase::Run`] was last left: the limit's clock stops there.
    run_end: Option<Instant>,
}

impl Progress {
    /// Starts the progress of a test whose run phase lasts `time_limit`, in
    /// [`Phase::Preflight`]: a redrawn line when stderr is a terminal, else a line on stderr
    /// now, at each phase change and every 10 s.
    pub fn new(time_limit: Duration) -> Progress {
        if std::io::stderr().is_terminal() {
            Progress::on_terminal(time_limit)
        } else {
            Progress::in_lines(time_limit, Box::new(std::io::stderr()), LINE_EVERY)
        }
    }

    /// The line redrawn in place on stderr.
    fn on_terminal(time_limit: Duration) -> Progress {
        let state = Arc::new(State::new(time_limit));
        let shown = Arc::clone(&state);
        let style = ProgressStyle::with_template("{line}")
            .expect("static template")
            .with_key(
                "line",
                move |_: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = w.write_str(&shown.line(Instant::now()));
                },
            );
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(style);
        bar.enable_steady_tick(REDRAW_EVERY);
        Progress {
            state,
            display: Display::Terminal(bar),
        }
    }

    /// Complete lines to `out`: one now, one at each phase change, and one every `every` from
    /// a thread of its own, which ends at [`Progress::finish`] or when the last clone is
    /// dropped (it needs no async runtime and keeps no process alive).
    fn in_lines(time_limit: Duration, out: Box<dyn Write + Send>, every: Duration) -> Progress {
        let state = Arc::new(State::new(time_limit));
        let now = Instant::now();
        let out = Arc::new(Lines(Mutex::new(Some((out, now)))));
        out.write(&state, now);
        let (stop, stopped) = mpsc::channel::<()>();
        let (ticking, shown) = (Arc::clone(&out), Arc::clone(&state));
        std::thread::spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                ticking.tick(&shown, Instant::now(), every);
            }
        });
        Progress {
            state,
            display: Display::Lines {
                out,
                stop: Arc::new(Mutex::new(Some(stop))),
            },
        }
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
                let mut active = lock(&s.active_faults);
                if let Some(kind) = op.f.strip_prefix("start-") {
                    active.insert(kind.to_owned());
                } else if let Some(kind) = op.f.strip_prefix("stop-") {
                    active.remove(kind);
                }
            }
        }
    }

    /// Says the run is now in `phase`, and shows it at once (a no-op when it already is).
    /// The time limit's clock starts the first time the phase is [`Phase::Run`] and stops
    /// when the run leaves it (or at the limit, after which the line says how far past it
    /// the run went).
    pub fn set_phase(&self, phase: Phase) {
        self.enter(phase, Instant::now());
    }

    /// [`Progress::set_phase`] at `now`.
    fn enter(&self, phase: Phase, now: Instant) {
        if !lock(&self.state.clock).enter(phase, now) {
            return;
        }
        match &self.display {
            Display::Terminal(bar) => bar.tick(),
            Display::Lines { out, .. } => out.write(&self.state, now),
        }
    }

    /// Ends the display: removes the line from the terminal, or stops the lines (no line is
    /// written after it returns).
    pub fn finish(&self) {
        match &self.display {
            Display::Terminal(bar) => bar.finish_and_clear(),
            Display::Lines { out, stop } => {
                lock(stop).take();
                lock(&out.0).take();
            }
        }
    }
}

impl Lines {
    /// Writes the line at `now` as one complete line, unless finished.
    fn write(&self, state: &State, now: Instant) {
        if let Some((out, last)) = lock(&self.0).as_mut() {
            let line = format!("progress: {}\n", state.line(now));
            let _ = out.write_all(line.as_bytes()).and_then(|()| out.flush());
            *last = now;
        }
    }

    /// The ticker's line at `now`, unless a phase change wrote one in the last half period
    /// (the same line twice says nothing).
    fn tick(&self, state: &State, now: Instant, every: Duration) {
        let written = lock(&self.0).as_ref().map(|(_, last)| *last);
        if written.is_some_and(|last| now.saturating_duration_since(last) >= every / 2) {
            self.write(state, now);
        }
    }
}

impl State {
    /// Nothing counted yet, in [`Phase::Preflight`] from now.
    fn new(time_limit: Duration) -> State {
        State {
            ok: AtomicU64::new(0),
            fail: AtomicU64::new(0),
            info: AtomicU64::new(0),
            active_faults: Mutex::new(BTreeSet::new()),
            clock: Mutex::new(Clock {
                time_limit,
                phase: Phase::Preflight,
                since: Instant::now(),
                run_start: None,
                run_end: None,
            }),
        }
    }

    /// The text of the line at `now`.
    fn line(&self, now: Instant) -> String {
        let (phase, in_phase, run, time_limit) = {
            let clock = lock(&self.clock);
            let (phase, since) = clock.shown(now);
            let in_phase = now.saturating_duration_since(since);
            (phase, in_phase, clock.run_elapsed(now), clock.time_limit)
        };
        let Some(run) = run else {
            return format!("{} {}", phase.name(), clock(in_phase));
        };
        let counts = [&self.ok, &self.fail, &self.info].map(|c| c.load(Ordering::Relaxed));
        let ran = format_run(run, time_limit, counts, &lock(&self.active_faults));
        match phase {
            Phase::Run => ran,
            _ => format!("{} {} | {ran}", phase.name(), clock(in_phase)),
        }
    }
}

impl Clock {
    /// Enters `phase` at `now`; false when the run already is in it. Healing entered from a
    /// run past its limit began at the limit.
    fn enter(&mut self, phase: Phase, now: Instant) -> bool {
        if phase == self.phase {
            return false;
        }
        let (shown, since) = self.shown(now);
        if self.phase == Phase::Run {
            self.run_end = Some(now);
        }
        if phase == Phase::Run {
            self.run_start.get_or_insert(now);
            self.run_end = None;
        }
        self.phase = phase;
        self.since = match shown == phase {
            true => since,
            false => now,
        };
        true
    }

    /// The phase shown at `now` and since when: [`Phase::Heal`] from the limit on while the
    /// run goes past it (the faults are healed there; the workloads' healed tail and final
    /// reads follow), else the phase the run is in.
    fn shown(&self, now: Instant) -> (Phase, Instant) {
        match (self.phase, self.run_start) {
            (Phase::Run, Some(start)) if now.saturating_duration_since(start) > self.time_limit => {
                (Phase::Heal, start + self.time_limit)
            }
            _ => (self.phase, self.since),
        }
    }

    /// How long the run phase has lasted at `now`, from its first start; `None` before it.
    fn run_elapsed(&self, now: Instant) -> Option<Duration> {
        let start = self.run_start?;
        Some(self.run_end.unwrap_or(now).saturating_duration_since(start))
    }
}

/// The run's part of the line, e.g. `run [00:42 / 01:00] ok 1234 fail 12 info 3 | faults:
/// partition`. The clock stops at the limit (what follows it is shown as healing).
fn format_run(
    run: Duration,
    time_limit: Duration,
    [ok, fail, info]: [u64; 3],
    active_faults: &BTreeSet<String>,
) -> String {
    let faults = match active_faults.is_empty() {
        true => "none".to_owned(),
        false => Vec::from_iter(active_faults.iter().map(String::as_str)).join(", "),
    };
    format!(
        "run [{} / {}] ok {ok} fail {fail} info {info} | faults: {faults}",
        clock(run.min(time_limit)),
        clock(time_limit)
    )
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

/// The mutex's value, even if a thread panicked holding it (the counts stay meaningful).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(process: Process, kind: OpType, f: &str) -> Op {
        crate::history::testing::op(0, 0, kind, process, f)
    }

    /// A writer whose lines the test reads while the progress writes them.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            lock(&self.0).extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        /// The lines written so far; each must be complete, without carriage returns.
        fn lines(&self) -> Vec<String> {
            let text = String::from_utf8(lock(&self.0).clone()).unwrap();
            assert!(text.is_empty() || text.ends_with('\n'), "{text:?}");
            assert!(!text.contains('\r'), "{text:?}");
            text.lines().map(str::to_owned).collect()
        }
    }

    /// A progress writing lines to `out` every `every`, and the instant `s` seconds after it
    /// was made.
    fn in_lines(out: &Shared, every: Duration) -> (Progress, impl Fn(u64) -> Instant) {
        let p = Progress::in_lines(Duration::from_secs(60), Box::new(out.clone()), every);
        let made = lock(&p.state.clock).since;
        (p, move |s| made + Duration::from_secs(s))
    }

    /// Records two ok, one fail and one info, and a partition started.
    fn record_some(p: &Progress) {
        let c = Process::Client(1);
        for kind in [OpType::Ok, OpType::Ok, OpType::Fail, OpType::Info] {
            p.record(&op(c, kind, "read"));
        }
        p.record(&op(Process::NEMESIS, OpType::Info, "start-partition"));
    }

    const NEVER: Duration = Duration::from_secs(3600);

    /// A progress that ticks no lines, for its line's text at given instants.
    fn quiet() -> (Progress, impl Fn(u64) -> Instant) {
        in_lines(&Shared::default(), NEVER)
    }

    #[test]
    fn the_line_names_the_phase_and_runs_the_limit_clock_in_run_only() {
        use Phase::{Compare, Heal, Run, Setup};
        let ran = |clock: &str| format!("run [{clock}] ok 0 fail 0 info 0 | faults: none");
        // The phases entered (at which second from the start), when the line is read, and
        // what it says.
        for (entered, read, says) in [
            (&[][..], 3, "preflight 00:03".to_owned()),
            (&[(Setup, 5)], 12, "setup 00:07".to_owned()),
            // Not 00:50 since the start, nor 00:25 since setup.
            (&[(Setup, 5), (Run, 30)], 50, ran("00:20 / 01:00")),
            // Stopped at the limit; past it, healing from the limit on.
            (&[(Run, 10)], 70, ran("01:00 / 01:00")),
            (
                &[(Run, 10)],
                85,
                format!("heal 00:15 | {}", ran("01:00 / 01:00")),
            ),
            (
                &[(Run, 10), (Heal, 72)],
                77,
                format!("heal 00:07 | {}", ran("01:00 / 01:00")),
            ),
            // Stopped where the run ends, the phase after it with its own time.
            (
                &[(Run, 10), (Heal, 72), (Compare, 80)],
                200,
                format!("compare 02:00 | {}", ran("01:00 / 01:00")),
            ),
            (
                &[(Run, 0), (Heal, 25)],
                40,
                format!("heal 00:15 | {}", ran("00:25 / 01:00")),
            ),
            // Back in run, it goes on from the run's first start.
            (
                &[(Run, 10), (Heal, 72), (Run, 300)],
                301,
                format!("heal 03:51 | {}", ran("01:00 / 01:00")),
            ),
        ] {
            let (p, at) = quiet();
            for &(phase, s) in entered {
                p.enter(phase, at(s));
            }
            assert_eq!(p.state.line(at(read)), says, "{entered:?}");
        }
    }

    #[test]
    fn past_the_limit_elapsed_never_exceeds_it() {
        let none = BTreeSet::new();
        for (limit, run, shown) in [
            (60, 60, "[01:00 / 01:00] "),
            (60, 61, "[01:00 / 01:00] "),
            (60, 3725, "[01:00 / 01:00] "),
            (7200, 7300, "[2:00:00 / 2:00:00] "),
            (7200, 3725, "[1:02:05 / 2:00:00] "),
        ] {
            let [limit, run] = [limit, run].map(Duration::from_secs);
            let line = format_run(run, limit, [0; 3], &none);
            assert!(line.starts_with(&format!("run {shown}")), "{line}");
        }
        // Under a second past the limit is not yet past it.
        let line = format_run(
            Duration::from_millis(60_900),
            Duration::from_secs(60),
            [0; 3],
            &none,
        );
        assert!(line.starts_with("run [01:00 / 01:00] "), "{line}");
    }

    #[test]
    fn recorded_ops_drive_counts_and_faults() {
        let (p, at) = quiet();
        p.enter(Phase::Run, at(0));
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
        p.record(&op(n, OpType::Fail, "start-pause"));
        assert!(p.state.line(at(0)).ends_with("faults: none"));
        p.record(&op(n, OpType::Info, "start-partition"));
        p.record(&op(n, OpType::Info, "start-kill"));
        assert_eq!(
            p.state.line(at(5)),
            "run [00:05 / 01:00] ok 2 fail 1 info 1 | faults: kill, partition"
        );
        p.record(&op(n, OpType::Info, "stop-partition"));
        p.record(&op(n, OpType::Info, "stop-kill"));
        assert!(p.state.line(at(0)).ends_with("faults: none"));
    }

    #[test]
    fn lines_at_start_and_at_each_phase_change() {
        let out = Shared::default();
        let (p, at) = in_lines(&out, NEVER);
        p.enter(Phase::Setup, at(4));
        p.enter(Phase::Setup, at(6));
        record_some(&p);
        p.enter(Phase::Run, at(9));
        p.enter(Phase::Heal, at(70));
        p.enter(Phase::Teardown, at(75));
        p.finish();
        p.enter(Phase::Check, at(80));
        let ran = "run [01:00 / 01:00] ok 2 fail 1 info 1 | faults: partition";
        assert_eq!(
            out.lines(),
            [
                "progress: preflight 00:00".to_owned(),
                "progress: setup 00:00".to_owned(),
                "progress: run [00:00 / 01:00] ok 2 fail 1 info 1 | faults: partition".to_owned(),
                format!("progress: heal 00:01 | {ran}"),
                format!("progress: teardown 00:00 | {ran}"),
            ]
        );
    }

    #[test]
    fn a_tick_just_after_a_phase_change_repeats_nothing() {
        let out = Shared::default();
        let (p, at) = in_lines(&out, NEVER);
        let Display::Lines { out: lines, .. } = &p.display else {
            unreachable!("in lines")
        };
        let every = Duration::from_secs(10);
        p.enter(Phase::Setup, at(20));
        lines.tick(&p.state, at(24), every);
        assert_eq!(out.lines().len(), 2, "{:?}", out.lines());
        lines.tick(&p.state, at(25), every);
        assert_eq!(out.lines().last().unwrap(), "progress: setup 00:05");
    }

    #[test]
    fn lines_every_period_until_finished() {
        let every = Duration::from_millis(30);
        let out = Shared::default();
        let (p, at) = in_lines(&out, every);
        record_some(&p);
        p.set_phase(Phase::Run);
        let ticked = |lines: &[String]| {
            let run = |l: &&String| {
                l.starts_with("progress: run [00:0")
                    && l.ends_with(" / 01:00] ok 2 fail 1 info 1 | faults: partition")
            };
            lines.iter().filter(run).count()
        };
        // The phase change's line and three ticks.
        let deadline = Instant::now() + Duration::from_secs(10);
        while ticked(&out.lines()) < 4 {
            assert!(Instant::now() < deadline, "{:?}", out.lines());
            std::thread::sleep(every / 3);
        }
        assert!(
            at(0).elapsed() >= 3 * every,
            "ticks come every period, no sooner"
        );
        p.finish();
        let written = out.lines();
        std::thread::sleep(every * 4);
        assert_eq!(out.lines(), written, "no line after finish");
    }

    #[test]
    fn the_ticker_ends_with_the_last_clone() {
        let out = Shared::default();
        let (p, _) = in_lines(&out, Duration::from_millis(10));
        let other = p.clone();
        drop(p);
        std::thread::sleep(Duration::from_millis(30));
        assert!(Arc::strong_count(&out.0) > 1, "a clone keeps it going");
        drop(other);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Arc::strong_count(&out.0) > 1 {
            assert!(
                Instant::now() < deadline,
                "the ticker still holds the writer"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
