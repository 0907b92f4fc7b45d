//! Runs the candidates of an election workload: each process slot loops campaign → serve a
//! tenure as leader → resign → pause until the time limit, one ZooKeeper session per process,
//! marking each campaign and each term in office on the controller's record (`campaign` and
//! `lead` operations, see [`super::office`]).
//!
//! A leader leaves office before it deletes its nodes, so the recorded term never outlasts the
//! leadership ZooKeeper granted it, unless the leader's session lost it first: then the
//! `on_disconnect` policy decides when the leader notices, and the term ends `info`. A process
//! is retired (its session closed) after a campaign that failed, a term that ended `info`, or
//! a resignation that did not go through. A campaign whose answer proved acknowledged znodes
//! gone fails with the fact (`lost: …`) as its error, and so does a `resign` operation
//! recorded for a resignation that did.

use std::io;
use std::sync::Arc;

use serde::Serialize;

use super::office::{Campaign, Office};
use super::recipe::Recipe;
use super::ElectionConfig;
use crate::client::{OpError, Session};
use crate::generator::{ended, DriverRun, Next};
use crate::history::Recorder;
use crate::workload::rounds::{Rounds, Turn};

/// What an election run does: its settings, slots, time and servers.
pub type CandidateRun = DriverRun<ElectionConfig>;

/// What the candidates of an election run did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ElectionOutcome {
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
    /// The most leaders the controller's record had in office at once.
    pub max_in_office: u64,
}

/// What one candidate slot did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    terms: u64,
    resigned: u64,
    lost_in_office: u64,
    campaign_failed: u64,
    resign_failed: u64,
}

/// The candidates of an election run, as [`rounds::drive`](crate::workload::rounds::drive)
/// runs them: the recipe, its settings and the record of who is in office.
pub struct Candidates {
    recipe: Recipe,
    cfg: ElectionConfig,
    office: Office,
}

impl Candidates {
    /// Notes that `session`'s process failed to resign with `e`; an answer that proved
    /// acknowledged znodes gone goes on the record as a fact.
    fn resign_failed(&self, session: &Session, e: OpError) -> io::Result<()> {
        tracing::debug!(process = session.process, "resign: {e}");
        if let OpError::Lost(_) = e {
            let node = session.node.clone();
            self.office
                .lost(session.process, "resign", e.to_string(), node)?;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Rounds for Candidates {
    type Config = ElectionConfig;
    type Tally = Tally;
    type Outcome = ElectionOutcome;
    const NAMES: (&'static str, &'static str) = ("candidate", "recording a term in office");

    fn start(run: &CandidateRun, recorder: Arc<Recorder>) -> anyhow::Result<Self> {
        run.cfg.validate().map_err(anyhow::Error::msg)?;
        Ok(Candidates {
            recipe: Recipe::new(run.cfg.recipe, &run.run_id)?,
            cfg: run.cfg.clone(),
            office: Office::new(recorder),
        })
    }

    fn dirs(&self) -> Vec<String> {
        self.recipe.dirs()
    }

    fn outcome(&self, per_slot: &[Tally]) -> ElectionOutcome {
        let sum = |f: fn(&Tally) -> u64| per_slot.iter().map(f).sum::<u64>();
        ElectionOutcome {
            terms: sum(|t| t.terms),
            resigned: sum(|t| t.resigned),
            lost_in_office: sum(|t| t.lost_in_office),
            campaign_failed: sum(|t| t.campaign_failed),
            resign_failed: sum(|t| t.resign_failed),
            terms_per_candidate: per_slot.iter().map(|t| t.terms).collect(),
            max_in_office: self.office.max_in_office(),
        }
    }

    /// One campaign → tenure → resignation round of `session`'s process.
    async fn round(&self, turn: Turn<'_, Tally>) -> io::Result<Next> {
        let (session, stop, tally) = (turn.session, turn.stop, turn.tally);
        let identity = session.process.to_string();
        let campaign = Campaign::begin(&self.office, session.process, session.node.clone())?;
        let mut req = turn.processes.requests();
        let won = tokio::select! {
            biased;
            _ = ended(stop, turn.deadline) => {
                campaign.abandoned()?;
                return Ok(Next::End);
            }
            c = self.recipe.campaign(&session.client, &identity, &mut req) => c,
        };
        let won = match won {
            Ok(won) => won,
            Err(e) => {
                tracing::debug!(process = session.process, "campaign: {e}");
                campaign.failed(&e)?;
                tally.campaign_failed += 1;
                return Ok(Next::Retire);
            }
        };
        campaign.won(won.token)?;
        let office = &self.office;
        office.take(session.process, won.token, session.node.clone())?;
        tally.terms += 1;
        let mut states = session.client.state_watcher();
        let policy = self.cfg.on_disconnect;
        let tenure = async {
            tokio::select! {
                _ = tokio::time::sleep(self.cfg.tenure.0) => {}
                _ = ended(stop, turn.deadline) => {}
            }
        };
        let lost = policy.unless_lost(&mut states, tenure).await.err();
        // Leave office before giving up the nodes, so the term never outlasts the leadership.
        office.leave(session.process, lost.clone())?;
        turn.processes.meter.released();
        if lost.is_some() {
            tally.lost_in_office += 1;
            return Ok(Next::Retire);
        }
        match self.recipe.resign(&session.client, &won, &mut req).await {
            Ok(()) => {
                tally.resigned += 1;
                Ok(Next::Again)
            }
            Err(e) => {
                self.resign_failed(session, e)?;
                tally.resign_failed += 1;
                Ok(Next::Retire)
            }
        }
    }
}
