//! Runs the candidates of an election workload: each process slot loops campaign → serve a
//! tenure as leader → resign → pause until the time limit, one ZooKeeper session per process,
//! marking each term in office on the controller's record (`lead` operations, see
//! [`super::office`]).
//!
//! A leader leaves office before it deletes its nodes, so the recorded term never outlasts the
//! leadership ZooKeeper granted it, unless the leader's session lost it first: then the
//! `on_disconnect` policy decides when the leader notices, and the term ends `info`. A process
//! is retired (its session closed) after a campaign that failed, a term that ended `info`, or
//! a resignation that did not go through. A campaign or resignation whose answer proved
//! acknowledged znodes gone is recorded as a `campaign` / `resign` operation that failed with
//! the fact (`lost: …`).

use std::io;
use std::sync::Arc;

use anyhow::Context;
use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::office::Office;
use super::recipe::Recipe;
use super::ElectionConfig;
use crate::client::{setup_session, ClientOptions, NodeEndpoint, OpError, ProcessIds, Session};
use crate::generator::{ended, DriverRun, HealReport, Next, Slot};
use crate::history::Recorder;
use crate::workload::{HerdMeter, HerdStats, Requests};

/// What a election run does: its settings, slots, time and servers.
pub type CandidateRun = DriverRun<ElectionConfig>;

/// What an election run did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ElectionRunSummary {
    /// The recipe's workload name, e.g. `election-fair`.
    pub recipe: &'static str,
    /// Process ids handed out (each a session).
    pub processes: u64,
    /// Terms served (elections won).
    pub terms: u64,
    /// Terms that ended in a resignation that went through.
    pub resigned: u64,
    /// Terms ended because the session was disconnected or expired (by the `on_disconnect`
    /// policy).
    pub lost_in_office: u64,
    /// Campaigns that ended in an error (the process is then retired).
    pub campaign_failed: u64,
    /// Resignations whose deletes did not go through.
    pub resign_failed: u64,
    /// Terms per candidate slot, in slot order.
    pub terms_per_candidate: Vec<u64>,
    /// Watch notifications and reaction requests per leadership change (client side): a
    /// change begins when a leader leaves office.
    pub herd: HerdStats,
    /// The most leaders the controller's record had in office at once.
    pub max_in_office: u64,
    /// The caller stopped the run before the time limit.
    pub cancelled: bool,
    /// Faults that could not be healed (run `stampede heal`); set by [`run`].
    pub heal_failures: Vec<String>,
}

/// What one candidate slot did.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    terms: u64,
    resigned: u64,
    lost_in_office: u64,
    campaign_failed: u64,
    resign_failed: u64,
}

struct Shared {
    recipe: Recipe,
    cfg: ElectionConfig,
    options: ClientOptions,
    endpoints: Vec<NodeEndpoint>,
    office: Office,
    meter: HerdMeter,
    ids: ProcessIds,
}

/// Creates the election's znodes, then runs `run.slots` candidates for `run.time_limit`
/// (or until `stop` turns true), recording into `recorder`. Fails if the setup session cannot
/// be opened or the history cannot be written.
pub async fn run_candidates(
    run: CandidateRun,
    recorder: Arc<Recorder>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<ElectionRunSummary> {
    run.cfg.validate().map_err(anyhow::Error::msg)?;
    anyhow::ensure!(run.slots > 0, "an election needs at least 1 candidate");
    anyhow::ensure!(!run.endpoints.is_empty(), "no ZooKeeper node to connect to");
    let recipe = Recipe::new(run.cfg.recipe, &run.run_id)?;
    let options = run.options;
    setup(&recipe, &run.endpoints, &options).await?;

    let shared = Arc::new(Shared {
        recipe,
        cfg: run.cfg.clone(),
        options,
        endpoints: run.endpoints.clone(),
        office: Office::new(recorder),
        meter: HerdMeter::default(),
        ids: ProcessIds::default(),
    });
    let deadline = Instant::now() + run.time_limit;
    let mut tasks = JoinSet::new();
    for slot in 0..run.slots {
        let (shared, stop) = (shared.clone(), stop.clone());
        tasks.spawn(async move { (slot, candidate(&shared, slot, deadline, stop).await) });
    }
    let mut per_slot = vec![Tally::default(); run.slots];
    while let Some(joined) = tasks.join_next().await {
        let (slot, tally) = joined.context("a candidate panicked")?;
        per_slot[slot] = tally.context("recording a term in office")?;
    }
    let sum = |f: fn(&Tally) -> u64| per_slot.iter().map(f).sum::<u64>();
    Ok(ElectionRunSummary {
        recipe: run.cfg.recipe.workload_name(),
        processes: shared.ids.count(),
        terms: sum(|t| t.terms),
        resigned: sum(|t| t.resigned),
        lost_in_office: sum(|t| t.lost_in_office),
        campaign_failed: sum(|t| t.campaign_failed),
        resign_failed: sum(|t| t.resign_failed),
        terms_per_candidate: per_slot.iter().map(|t| t.terms).collect(),
        herd: shared.meter.stats(),
        max_in_office: shared.office.max_in_office(),
        cancelled: *stop.borrow(),
        heal_failures: Vec::new(),
    })
}



impl HealReport for ElectionRunSummary {
    fn set_heal_failures(&mut self, failures: Vec<String>) {
        self.heal_failures = failures;
    }
}

/// Creates the election's parent znodes through a session to the whole ensemble.
async fn setup(
    recipe: &Recipe,
    endpoints: &[NodeEndpoint],
    options: &ClientOptions,
) -> anyhow::Result<()> {
    let client = setup_session(endpoints, options.session_timeout).await?;
    recipe
        .setup(&client)
        .await
        .with_context(|| format!("creating {}", recipe.dir()))
}

/// One candidate slot's loop; fails only if the history cannot be written.
async fn candidate(
    shared: &Shared,
    slot: usize,
    deadline: Instant,
    stop: watch::Receiver<bool>,
) -> io::Result<Tally> {
    let slot = Slot {
        ids: &shared.ids,
        endpoints: &shared.endpoints,
        options: &shared.options,
        slot,
        pause: shared.cfg.pause.0,
    };
    let mut tally = Tally::default();
    slot.run(
        deadline,
        stop,
        &mut (shared, &mut tally),
        |session, stop, (shared, tally)| Box::pin(round(shared, session, deadline, stop, tally)),
    )
    .await?;
    Ok(tally)
}

/// One campaign → tenure → resignation round of `session`'s process.
async fn round(
    shared: &Shared,
    session: &Session,
    deadline: Instant,
    stop: &mut watch::Receiver<bool>,
    tally: &mut Tally,
) -> io::Result<Next> {
    let identity = session.process.to_string();
    let mut req = Requests::new(shared.options.op_timeout, &shared.meter);
    let campaign = tokio::select! {
        biased;
        _ = ended(stop, deadline) => return Ok(Next::End),
        c = shared.recipe.campaign(&session.client, &identity, &mut req) => c,
    };
    let won = match campaign {
        Ok(won) => won,
        Err(e) => {
            tracing::debug!(process = session.process, "campaign: {e}");
            if let OpError::Lost(_) = e {
                let node = session.node.clone();
                shared
                    .office
                    .lost(session.process, "campaign", e.to_string(), node)?;
            }
            tally.campaign_failed += 1;
            return Ok(Next::Retire);
        }
    };
    let office = &shared.office;
    office.take(session.process, won.token, session.node.clone())?;
    tally.terms += 1;
    let mut states = session.client.state_watcher();
    let policy = shared.cfg.on_disconnect;
    let lost = match policy.lost(states.peek_state()) {
        Some(reason) => Some(reason),
        None => tokio::select! {
            reason = policy.session_lost(&mut states) => Some(reason),
            _ = tokio::time::sleep(shared.cfg.tenure.0) => None,
            _ = ended(stop, deadline) => None,
        },
    };
    // Leave office before giving up the nodes, so the term never outlasts the leadership.
    office.leave(session.process, lost.clone())?;
    shared.meter.released();
    if lost.is_some() {
        tally.lost_in_office += 1;
        return Ok(Next::Retire);
    }
    match shared.recipe.resign(&session.client, &won, &mut req).await {
        Ok(()) => {
            tally.resigned += 1;
            Ok(Next::Again)
        }
        Err(e) => {
            tracing::debug!(process = session.process, "resign: {e}");
            if let OpError::Lost(_) = e {
                let node = session.node.clone();
                shared
                    .office
                    .lost(session.process, "resign", e.to_string(), node)?;
            }
            tally.resign_failed += 1;
            Ok(Next::Retire)
        }
    }
}
