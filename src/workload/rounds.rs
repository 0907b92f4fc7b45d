//! The driver the lock and election workloads share: the processes of a run (how and where
//! they open sessions, their ids, the herd meter their requests feed), the setup of the
//! recipe's znodes, and process slots that each do rounds (acquire → hold → release,
//! campaign → serve → resign) with a session of their own until the run ends, counting what
//! they did. A recipe says what differs ([`Rounds`]); [`drive`] does the rest.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;
use zookeeper_client::Client;

use crate::client::{setup_session, ClientOptions, NodeEndpoint, ProcessIds, Session};
use crate::generator::{DriverRun, Next, Slot};
use crate::history::Recorder;
use crate::workload::{HerdMeter, Requests};

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

    /// Creates the recipe's znodes under `dir` with `create`, handed a session to the whole
    /// ensemble.
    pub async fn setup<F>(&self, dir: &str, create: impl FnOnce(Client) -> F) -> anyhow::Result<()>
    where
        F: Future<Output = Result<(), zookeeper_client::Error>>,
    {
        let client = setup_session(&self.endpoints, self.options.session_timeout).await?;
        create(client)
            .await
            .with_context(|| format!("creating {dir}"))
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

/// A recipe driver whose process slots do rounds: how a run of it starts, one round of a
/// process, and what the run did.
#[async_trait::async_trait]
pub trait Rounds: Send + Sync + Sized + 'static {
    /// The workload file's section of the recipe.
    type Config: Send;
    /// What one slot did.
    type Tally: Default + Send + 'static;
    /// What a run did.
    type Summary;
    /// Who a slot's process is and what it records, in errors: `contender`, `recording a
    /// lock operation`.
    const NAMES: (&'static str, &'static str);

    /// The shared state of `run` (its settings checked), recording into `recorder`, and the
    /// meter that counts its herd.
    fn start(
        run: &DriverRun<Self::Config>,
        recorder: Arc<Recorder>,
    ) -> anyhow::Result<(Self, HerdMeter)>;

    /// The directory of the recipe's znodes.
    fn dir(&self) -> &str;

    /// Creates the recipe's znodes through `client`.
    async fn create(&self, client: &Client) -> Result<(), zookeeper_client::Error>;

    /// How long a process pauses after a round that went through.
    fn pause(&self) -> Duration;

    /// One round of `turn`'s process, counted into its tally. Fails only if the history
    /// cannot be written.
    async fn round(&self, turn: Turn<'_, Self::Tally>) -> io::Result<Next>;

    /// What the run did, from each slot's tally (in slot order).
    fn summary(
        &self,
        tallies: &[Self::Tally],
        processes: &Processes,
        cancelled: bool,
    ) -> Self::Summary;
}

/// Runs the recipe `R` of `run`: creates its znodes, then runs `run.slots` process slots for
/// `run.time_limit` (or until `stop` turns true), recording into `recorder`. Fails if the
/// setup session cannot be opened or the history cannot be written.
pub async fn drive<R: Rounds>(
    run: DriverRun<R::Config>,
    recorder: Arc<Recorder>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<R::Summary> {
    anyhow::ensure!(run.slots > 0, "a run needs at least 1 {}", R::NAMES.0);
    let (rounds, meter) = R::start(&run, recorder)?;
    let processes = Arc::new(Processes::new(run.options, run.endpoints, meter)?);
    let creating = &rounds;
    let create = |client: Client| async move { creating.create(&client).await };
    processes.setup(rounds.dir(), create).await?;
    let rounds = Arc::new(rounds);
    let pause = rounds.pause();
    let tallies = run_slots(&rounds, &processes, run.slots, run.time_limit, pause, &stop).await?;
    Ok(rounds.summary(&tallies, &processes, *stop.borrow()))
}

/// Runs `slots` process slots of `rounds` with `processes` for `time_limit` (or until `stop`
/// turns true), each pausing `pause` after a round that went through; returns what each slot
/// did, in slot order. Fails if a slot panicked or could not write the history.
async fn run_slots<R: Rounds>(
    rounds: &Arc<R>,
    processes: &Arc<Processes>,
    slots: usize,
    time_limit: Duration,
    pause: Duration,
    stop: &watch::Receiver<bool>,
) -> anyhow::Result<Vec<R::Tally>> {
    let deadline = Instant::now() + time_limit;
    let mut tasks = JoinSet::new();
    for slot in 0..slots {
        let (rounds, processes, stop) = (rounds.clone(), processes.clone(), stop.clone());
        tasks.spawn(async move {
            let slot_loop = run_slot(&*rounds, &processes, slot, pause, deadline, stop);
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

/// One slot's loop; fails only if the history cannot be written.
async fn run_slot<R: Rounds>(
    rounds: &R,
    processes: &Processes,
    slot: usize,
    pause: Duration,
    deadline: Instant,
    stop: watch::Receiver<bool>,
) -> io::Result<R::Tally> {
    let mut tally = R::Tally::default();
    let state = &mut (rounds, processes, &mut tally);
    let slot = processes.slot(slot, pause);
    slot.run(
        deadline,
        stop,
        state,
        |session, stop, (rounds, processes, tally)| {
            let turn = Turn {
                processes,
                session,
                deadline,
                stop,
                tally: &mut **tally,
            };
            rounds.round(turn)
        },
    )
    .await?;
    Ok(tally)
}
