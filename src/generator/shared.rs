//! The faults a run is exposed to: a schedule of its own, or its part in one schedule shared by
//! workloads run together against one database ([`SharedSchedule`]). A shared schedule starts
//! once every member is ready (its setup done, so no fault hits a member's setup), records every
//! fault in every member's history, ends at the time limit or when no member is left in its main
//! phase, heals, and tells every member what could not be healed.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::faults::{self, HealGuard};
use super::stop::Stop;
use super::GeneratorConfig;
use crate::history::Recorder;
use crate::nemesis::Nemesis;

/// What a run is exposed to.
pub enum Faults {
    /// Its own schedule over these nemeses (none: a run without faults).
    Own(Vec<Arc<dyn Nemesis>>),
    /// Its part in a schedule shared with workloads run together.
    Shared(Member),
}

impl From<Vec<Arc<dyn Nemesis>>> for Faults {
    fn from(nemeses: Vec<Arc<dyn Nemesis>>) -> Faults {
        Faults::Own(nemeses)
    }
}

impl Faults {
    /// Begins the run's main phase, whose operations go to `recorder`: arms the guard that
    /// heals a schedule of its own, or waits until every member of a shared schedule is ready.
    pub(super) async fn begin(self, recorder: &Arc<Recorder>) -> Begun {
        match self {
            Faults::Own(nemeses) => Begun {
                has_faults: !nemeses.is_empty(),
                ending: Ending::Guard(HealGuard::new(nemeses.clone(), vec![recorder.clone()])),
                own: nemeses,
            },
            Faults::Shared(mut member) => {
                member.ready(recorder.clone()).await;
                Begun {
                    has_faults: member.state.has_faults,
                    own: Vec::new(),
                    ending: Ending::Member(member),
                }
            }
        }
    }
}

/// A run's main phase under way: the nemeses its own schedule starts and stops, and how its
/// faults end.
pub(super) struct Begun {
    own: Vec<Arc<dyn Nemesis>>,
    has_faults: bool,
    ending: Ending,
}

enum Ending {
    Guard(HealGuard),
    Member(Member),
}

impl Begun {
    /// The nemeses the run's own schedule starts and stops (none for a member of a shared
    /// schedule: the schedule runs elsewhere).
    pub(super) fn own_schedule(&self) -> &[Arc<dyn Nemesis>] {
        &self.own
    }

    /// Whether any fault is planned, by its own schedule or the shared one.
    pub(super) fn has_faults(&self) -> bool {
        self.has_faults
    }

    /// Heals every fault of its own schedule, or waits until the shared schedule has healed;
    /// returns the heals that failed.
    pub(super) async fn heal(self) -> Vec<String> {
        match self.ending {
            Ending::Guard(guard) => guard.heal().await,
            Ending::Member(member) => member.healed().await,
        }
    }
}

/// What the shared schedule and its members both see.
struct State {
    /// Whether the schedule has any nemesis.
    has_faults: bool,
    /// The histories of the members that are ready, each fault recorded in all.
    recorders: Mutex<Vec<Arc<Recorder>>>,
    /// Members not yet ready (nor gone).
    unready: watch::Sender<usize>,
    /// Members still in their main phase.
    in_main: watch::Sender<usize>,
    /// Raised when the schedule starts.
    started: watch::Sender<bool>,
    /// The heals that failed, once the schedule has healed.
    healed: watch::Sender<Option<Vec<String>>>,
}

/// One nemesis schedule for the runs of workloads run together.
pub struct SharedSchedule {
    nemeses: Vec<Arc<dyn Nemesis>>,
    state: Arc<State>,
}

/// What the shared schedule tells a member when it ended without healing (it panicked or was
/// dropped): the caller's own heal (`nemesis::guarded`) still heals every node.
const ENDED_ABRUPTLY: &str = "the shared nemesis schedule ended before it healed";

impl SharedSchedule {
    /// A schedule over `nemeses` for `members` runs, and the handle each run joins it with
    /// (its [`Target`](super::Target)'s faults).
    pub fn new(nemeses: Vec<Arc<dyn Nemesis>>, members: usize) -> (SharedSchedule, Vec<Member>) {
        let state = Arc::new(State {
            has_faults: !nemeses.is_empty(),
            recorders: Mutex::new(Vec::new()),
            unready: watch::Sender::new(members),
            in_main: watch::Sender::new(members),
            started: watch::Sender::new(false),
            healed: watch::Sender::new(None),
        });
        let handles = (0..members)
            .map(|_| Member {
                state: state.clone(),
                step: Step::Joined,
            })
            .collect();
        (SharedSchedule { nemeses, state }, handles)
    }

    /// Runs the schedule: waits until every member is ready (or `cancel` is raised), then
    /// starts and stops the nemeses in turn with the timing of `cfg` until its time limit has
    /// passed, `cancel` is raised or no member is left in its main phase; heals every fault and
    /// hands the members the heals that failed.
    pub async fn run(self, cfg: &GeneratorConfig, cancel: watch::Receiver<bool>) {
        let state = &self.state;
        let mut unready = state.unready.subscribe();
        let mut cancelled = Stop::cancelled_by(cancel.clone());
        tokio::select! {
            _ = unready.wait_for(|n| *n == 0) => {}
            _ = cancelled.wait() => {}
        }
        let recorders = lock(&state.recorders).clone();
        state.started.send_replace(true);
        let guard = HealGuard::new(self.nemeses.clone(), recorders.clone());
        let none_in_main = async {
            let _ = state.in_main.subscribe().wait_for(|n| *n == 0).await;
        };
        let scheduled =
            faults::schedule_for(&self.nemeses, &recorders, cfg, cancel, none_in_main).await;
        let mut failures = guard.heal().await;
        if let Err(e) = scheduled {
            failures.push(format!("recording a nemesis operation: {e}"));
        }
        state.healed.send_replace(Some(failures));
    }
}

impl Drop for SharedSchedule {
    /// Releases members still waiting on a schedule that ended without running to its end.
    fn drop(&mut self) {
        self.state.started.send_replace(true);
        self.state.healed.send_if_modified(|healed| {
            let unset = healed.is_none();
            if unset {
                *healed = Some(vec![ENDED_ABRUPTLY.to_string()]);
            }
            unset
        });
    }
}

/// A run's part in a [`SharedSchedule`]. Dropped before its run is ready (its setup failed),
/// it no longer holds the schedule back.
pub struct Member {
    state: Arc<State>,
    step: Step,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Joined,
    Ready,
    Done,
}

impl Member {
    /// Adds `recorder` to the histories the schedule records in and waits until it starts.
    async fn ready(&mut self, recorder: Arc<Recorder>) {
        lock(&self.state.recorders).push(recorder);
        self.step = Step::Ready;
        self.state.unready.send_modify(|n| *n -= 1);
        let mut started = self.state.started.subscribe();
        let _ = started.wait_for(|s| *s).await;
    }

    /// Leaves the main phase and waits until the schedule has healed; returns the heals that
    /// failed.
    async fn healed(mut self) -> Vec<String> {
        self.leave();
        let mut healed = self.state.healed.subscribe();
        let failures = healed.wait_for(Option::is_some).await;
        failures.map_or_else(
            |_| vec![ENDED_ABRUPTLY.to_string()],
            |f| f.clone().unwrap_or_default(),
        )
    }

    /// Counts the member out of what the schedule waits on.
    fn leave(&mut self) {
        if self.step == Step::Joined {
            self.state.unready.send_modify(|n| *n -= 1);
        }
        if self.step != Step::Done {
            self.state.in_main.send_modify(|n| *n -= 1);
        }
        self.step = Step::Done;
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.leave();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    use serde_json::{json, Value};

    use super::*;
    use crate::generator::{with_faults, GeneratorConfig};
    use crate::history::{Op, OpType, Process};

    /// A nemesis that counts its calls and notes when the first start came.
    struct Counting {
        starts: AtomicU32,
        stops: AtomicU32,
        first_start: Mutex<Option<Instant>>,
    }

    #[async_trait::async_trait]
    impl Nemesis for Counting {
        fn kind(&self) -> &str {
            "pause"
        }
        async fn start(&self) -> anyhow::Result<Value> {
            self.starts.fetch_add(1, Ordering::SeqCst);
            lock(&self.first_start).get_or_insert_with(Instant::now);
            Ok(json!("paused"))
        }
        async fn stop(&self) -> anyhow::Result<Value> {
            self.stops.fetch_add(1, Ordering::SeqCst);
            Ok(json!("resumed"))
        }
    }

    fn timing() -> GeneratorConfig {
        let ms = |n| crate::config::Duration(Duration::from_millis(n));
        GeneratorConfig {
            time_limit: ms(600),
            quiet_period: ms(200),
            nemesis_interval: ms(50),
            nemesis_duration: ms(50),
            ..GeneratorConfig::default()
        }
    }

    fn nemesis_ops(ops: &[Op]) -> Vec<(OpType, String)> {
        ops.iter()
            .filter(|o| o.process == Process::NEMESIS)
            .map(|o| (o.kind, o.f.clone()))
            .collect()
    }

    /// A member that sets up for `setup`, then runs under the shared schedule; returns when
    /// its main phase began, its heal failures and its history.
    async fn member(faults: Member, setup: Duration) -> (Instant, Vec<String>, Vec<Op>) {
        tokio::time::sleep(setup).await;
        let recorder = Arc::new(Recorder::in_memory());
        let (_keep, cancel) = watch::channel(false);
        let cfg = timing();
        let healed = with_faults(
            &cfg,
            Faults::Shared(faults),
            recorder.clone(),
            cancel,
            |_, run_for| async move {
                let began = Instant::now();
                tokio::time::sleep(run_for).await;
                Ok(began)
            },
        )
        .await
        .unwrap();
        (healed.summary, healed.heal_failures, recorder.ops())
    }

    #[tokio::test]
    async fn members_share_one_schedule_that_starts_when_all_are_ready() {
        let nemesis = Arc::new(Counting {
            starts: AtomicU32::new(0),
            stops: AtomicU32::new(0),
            first_start: Mutex::new(None),
        });
        let (schedule, mut members) = SharedSchedule::new(vec![nemesis.clone()], 3);
        let gone = members.pop().unwrap();
        let (slow, quick) = (members.pop().unwrap(), members.pop().unwrap());
        let cfg = timing();
        let (_keep, cancel) = watch::channel(false);
        let running = schedule.run(&cfg, cancel);
        drop(gone); // its setup failed: the schedule must not wait for it
        let ((), quick, slow) = tokio::join!(
            running,
            member(quick, Duration::ZERO),
            member(slow, Duration::from_millis(300))
        );
        let first_start = lock(&nemesis.first_start).expect("a fault started");
        assert!(
            first_start >= slow.0 && first_start >= quick.0,
            "no fault before every member's main phase"
        );
        let starts = nemesis.starts.load(Ordering::SeqCst);
        assert!((3..=6).contains(&starts), "{starts} starts in 600 ms");
        // Every start, stop and the final heal recorded once in each history, the same in both.
        let ops = nemesis_ops(&quick.2);
        assert_eq!(ops, nemesis_ops(&slow.2));
        let recorded_starts = ops
            .iter()
            .filter(|(t, f)| *t == OpType::Invoke && f == "start-pause")
            .count();
        assert_eq!(recorded_starts as u32, starts);
        assert_eq!(
            ops.last().unwrap().1,
            "stop-pause",
            "the heal is recorded last"
        );
        assert_eq!(
            nemesis.stops.load(Ordering::SeqCst) as usize,
            ops.iter()
                .filter(|(t, f)| *t == OpType::Invoke && f == "stop-pause")
                .count()
        );
        assert!(quick.1.is_empty() && slow.1.is_empty());
    }

    #[tokio::test]
    async fn members_of_a_dropped_schedule_are_released_and_told() {
        let (schedule, mut members) = SharedSchedule::new(Vec::new(), 1);
        drop(schedule);
        let (_, failures, ops) = member(members.pop().unwrap(), Duration::ZERO).await;
        assert_eq!(failures, [ENDED_ABRUPTLY]);
        assert!(nemesis_ops(&ops).is_empty());
    }
}
