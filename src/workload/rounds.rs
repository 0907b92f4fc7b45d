//! The driver the lock and election workloads share: the processes of a run (how and where
//! they open sessions, their ids, the herd meter their requests feed), the setup of the
//! recipe's znodes, and process slots that each do rounds (acquire → hold → release,
//! campaign → serve → resign) with a session of their own until the run ends, counting what
//! they did, and the summary of the run. A recipe says what differs ([`Rounds`],
//! [`RecipeSection`]); [`drive`] does the rest, and [`run`] does it under the nemesis schedule
//! for the registry. Contenders come and go as [`Contention`] says, and [`fairness`] judges what
//! the history shows of it.

mod contention;
pub mod fairness;

use std::io;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;
use zookeeper_client::{Acls, CreateMode};

use crate::client::{setup_session, ClientOptions, NodeEndpoint, ProcessIds, Session};
use crate::generator::{self, DriverRun, Next, Slot, Target};
use crate::history::Recorder;
use crate::workload::{HerdMeter, HerdStats, Ran, Requests, Settings};

pub use contention::Contention;

/// The processes of one recipe run: how and where they open sessions, the ids handed out, and
/// the herd meter their requests feed.
pub struct Processes {
    /// How sessions are opened (and the deadline of one request).
    pub options: ClientOptions,
    /// The ZooKeeper servers.
    pub endpoints: Vec<NodeEndpoint>,
    /// Hands out the processes' ids (each a session).
    pub ids: ProcessIds,
    /// Counts notifications and reactions per release.
    pub meter: HerdMeter,
}

impl Processes {
    /// Processes opening sessions to `endpoints` with `options`, counted by `meter`; fails
    /// when there is no server to connect to.
    pub fn new(
        options: ClientOptions,
        endpoints: Vec<NodeEndpoint>,
        meter: HerdMeter,
    ) -> anyhow::Result<Processes> {
        anyhow::ensure!(!endpoints.is_empty(), "no ZooKeeper node to connect to");
        Ok(Processes {
            options,
            endpoints,
            ids: ProcessIds::default(),
            meter,
        })
    }

    /// Creates the persistent znodes `dirs` (and their parents), through a session to the
    /// whole ensemble.
    async fn create(&self, dirs: &[String]) -> anyhow::Result<()> {
        let client = setup_session(&self.endpoints, self.options.session_timeout).await?;
        let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
        for dir in dirs {
            let created = client.mkdir(dir, &options).await;
            created.with_context(|| format!("creating {dir}"))?;
        }
        Ok(())
    }

    /// One participant's requests: within the request deadline, counted by the herd meter.
    pub fn requests(&self) -> Requests<'_> {
        Requests::new(self.options.op_timeout, &self.meter)
    }

    /// Process slot `slot`, pausing `pause` after each round that went through.
    fn slot(&self, slot: usize, pause: Duration) -> Slot<'_> {
        Slot {
            ids: &self.ids,
            endpoints: &self.endpoints,
            options: &self.options,
            slot,
            pause,
        }
    }
}

/// What one round of a slot's process is handed.
pub struct Turn<'a, T> {
    /// The processes of the run.
    pub processes: &'a Processes,
    /// The process's session.
    pub session: &'a Session,
    /// When the run ends, unless `stop` is raised first.
    pub deadline: Instant,
    /// Raised when the run is stopped early.
    pub stop: &'a mut watch::Receiver<bool>,
    /// What the slot did so far.
    pub tally: &'a mut T,
}

/// What [`drive`] reads of a recipe's section of a workload file.
pub trait RecipeSection: Clone + Send + Sync + 'static {
    /// The recipe's workload name, e.g. `lock-sequential`.
    fn workload_name(&self) -> &'static str;

    /// How long a process pauses after a round that went through (on average, staggered).
    fn pause(&self) -> Duration;

    /// How contenders come and go.
    fn contention(&self) -> &Contention;
}

/// A recipe driver whose process slots do rounds: the state its processes share, one round of
/// a process, and what they did.
#[async_trait::async_trait]
pub trait Rounds: Send + Sync + Sized + 'static {
    /// The workload file's section of the recipe.
    type Config: RecipeSection;
    /// What one slot did.
    type Tally: Default + Send + 'static;
    /// What the run's processes did, the recipe's own part of the run's summary.
    type Outcome;
    /// Who a slot's process is and what it records, in errors: `contender`, `recording a
    /// lock operation`.
    const NAMES: (&'static str, &'static str);

    /// The state the processes of `run` share (its settings checked), recording into
    /// `recorder`.
    fn start(run: &DriverRun<Self::Config>, recorder: Arc<Recorder>) -> anyhow::Result<Self>;

    /// The meter that counts the run's herd.
    fn meter(&self) -> HerdMeter {
        HerdMeter::default()
    }

    /// The persistent znodes the recipe's nodes live under, created before the run.
    fn dirs(&self) -> Vec<String>;

    /// One round of `turn`'s process, counted into its tally. Fails only if the history
    /// cannot be written.
    async fn round(&self, turn: Turn<'_, Self::Tally>) -> io::Result<Next>;

    /// What the run's processes did, from each slot's tally (in slot order).
    fn outcome(&self, tallies: &[Self::Tally]) -> Self::Outcome;
}

/// What a run of a rounds recipe did: what every such run counts, and the recipe's own
/// outcome `O`, in one object as a run's summary keeps them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundsSummary<O> {
    /// The recipe's workload name, e.g. `lock-sequential`.
    pub recipe: &'static str,
    /// Process ids handed out (each a session).
    pub processes: u64,
    /// What the recipe's processes did.
    #[serde(flatten)]
    pub own: O,
    /// Watch notifications and reaction requests per release (client side): a lock given
    /// back, a leader leaving office.
    pub herd: HerdStats,
    /// The caller stopped the run before the time limit.
    pub cancelled: bool,
}

/// Runs the recipe `R` of `run`: creates its znodes, then runs `run.slots` process slots for
/// `run.time_limit` (or until `stop` turns true), recording into `recorder`. Fails if the
/// setup session cannot be opened or the history cannot be written.
pub async fn drive<R: Rounds>(
    run: DriverRun<R::Config>,
    recorder: Arc<Recorder>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<RoundsSummary<R::Outcome>> {
    anyhow::ensure!(run.slots > 0, "a run needs at least 1 {}", R::NAMES.0);
    let rounds = Arc::new(R::start(&run, recorder)?);
    let processes = Processes::new(run.options, run.endpoints, rounds.meter())?;
    processes.create(&rounds.dirs()).await?;
    let processes = Arc::new(processes);
    let contention = Staggered {
        contention: run.cfg.contention().clone(),
        pause: run.cfg.pause(),
    };
    let tallies = run_slots(
        &rounds,
        &processes,
        run.slots,
        run.time_limit,
        &contention,
        &stop,
    )
    .await?;
    Ok(RoundsSummary {
        recipe: run.cfg.workload_name(),
        processes: processes.ids.count(),
        own: rounds.outcome(&tallies),
        herd: processes.meter.stats(),
        cancelled: *stop.borrow(),
    })
}

/// `stampede test` for the recipe `R`: [`drive`]s it as `settings` say against `target` under
/// the nemesis schedule, and keeps its summary with the releases it counted.
pub async fn run<R: Rounds>(settings: &Settings<R::Config>, target: Target) -> anyhow::Result<Ran>
where
    R::Outcome: Serialize,
{
    let (generator, own) = (&settings.generator, &settings.own);
    let options = settings.session.client_options();
    let healed = generator::drive(generator, own, options, target, drive::<R>).await?;
    let releases = healed.summary.herd.releases;
    Ran::kept(healed, Some(releases))
}

/// How the slots of a run come and go: the recipe's contention and its pause.
#[derive(Clone)]
struct Staggered {
    contention: Contention,
    pause: Duration,
}

/// Runs `slots` process slots of `rounds` with `processes` for `time_limit` (or until `stop`
/// turns true), joining, pausing and leaving as `staggered` says; returns what each slot did,
/// in slot order. Fails if a slot panicked or could not write the history.
async fn run_slots<R: Rounds>(
    rounds: &Arc<R>,
    processes: &Arc<Processes>,
    slots: usize,
    time_limit: Duration,
    staggered: &Staggered,
    stop: &watch::Receiver<bool>,
) -> anyhow::Result<Vec<R::Tally>> {
    let deadline = Instant::now() + time_limit;
    let mut tasks = JoinSet::new();
    for slot in 0..slots {
        let (rounds, processes, stop) = (rounds.clone(), processes.clone(), stop.clone());
        let staggered = staggered.clone();
        tasks.spawn(async move {
            let slot_loop = run_slot(&*rounds, &processes, slot, &staggered, deadline, stop);
            (slot, slot_loop.await)
        });
    }
    let mut per_slot: Vec<R::Tally> = (0..slots).map(|_| R::Tally::default()).collect();
    while let Some(joined) = tasks.join_next().await {
        let (who, recording) = R::NAMES;
        let (slot, tally) = joined.with_context(|| format!("a {who} panicked"))?;
        per_slot[slot] = tally.context(recording)?;
    }
    Ok(per_slot)
}

/// One slot's loop: joins when its contention says, then does rounds, pausing or leaving
/// after each that went through; fails only if the history cannot be written.
async fn run_slot<R: Rounds>(
    rounds: &R,
    processes: &Processes,
    slot: usize,
    staggered: &Staggered,
    deadline: Instant,
    mut stop: watch::Receiver<bool>,
) -> io::Result<R::Tally> {
    let mut tally = R::Tally::default();
    let contention = &staggered.contention;
    if !contention.join(&mut stop, deadline).await {
        return Ok(tally);
    }
    let state = &mut (rounds, processes, &mut tally);
    let slot = processes.slot(slot, contention.slot_pause(staggered.pause));
    slot.run(
        deadline,
        stop,
        state,
        |session, stop, (rounds, processes, tally)| {
            Box::pin(async move {
                let turn = Turn {
                    processes,
                    session,
                    deadline,
                    stop: &mut *stop,
                    tally: &mut **tally,
                };
                let next = rounds.round(turn).await?;
                let pause = staggered.pause;
                Ok::<Next, io::Error>(contention.next_after(next, pause, stop, deadline).await)
            })
        },
    )
    .await?;
    Ok(tally)
}

#[cfg(test)]
mod tests {
    use serde::Serialize;

    use super::RoundsSummary;
    use crate::generator::Healed;
    use crate::workload::election::driver::ElectionOutcome;
    use crate::workload::lock::driver::LockOutcome;
    use crate::workload::HerdStats;

    /// The fields of the summary a run of `recipe` with outcome `own` keeps, as
    /// `results.json` has them: one object.
    fn fields(recipe: &'static str, own: impl Serialize) -> Vec<String> {
        let summary = RoundsSummary {
            recipe,
            processes: 3,
            own,
            herd: HerdStats::default(),
            cancelled: false,
        };
        let heal_failures = vec!["n1: iptables".to_string()];
        let run = Healed {
            summary,
            heal_failures,
        };
        let json = serde_json::to_value(&run).unwrap();
        assert_eq!(json["recipe"], recipe);
        assert_eq!(json["heal_failures"][0], "n1: iptables");
        json.as_object().unwrap().keys().cloned().collect()
    }

    #[test]
    fn run_summaries_keep_the_fields_of_the_runs_before_them() {
        let lock = "acquire_failed acquire_info acquired acquisitions_per_contender cancelled \
                    heal_failures herd latency lost_while_holding processes recipe reentries \
                    release_info released resource";
        let kept = fields("lock-sequential", LockOutcome::default());
        assert_eq!(kept, lock.split(' ').collect::<Vec<_>>());
        let election = "campaign_failed cancelled heal_failures herd lost_in_office \
                        max_in_office processes recipe resign_failed resigned terms \
                        terms_per_candidate";
        let kept = fields("election-fair", ElectionOutcome::default());
        assert_eq!(kept, election.split(' ').collect::<Vec<_>>());
    }
}
