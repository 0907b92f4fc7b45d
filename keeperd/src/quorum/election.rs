//! Fast Leader Election, as ZooKeeper runs it: every LOOKING server votes
//! for the best server it knows of (votes ordered by current epoch, then
//! last zxid, then id), tells the other voters, adopts any better vote it
//! hears in its round (or a later round, which it joins), and decides once
//! a quorum of voters agree with its vote and no better vote arrives within
//! a short wait. A server that is not LOOKING answers LOOKING servers with
//! the vote it followed and its state, so a restarted server joins the
//! standing leader once a quorum of them say so and the leader itself says
//! it leads. Observers never propose themselves and are never counted.
//!
//! [`Elector`] is the state machine alone (tested by delivering messages by
//! hand); [`Election`] runs it on the election port: one TCP connection per
//! peer to send (reconnected as needed), one accepted per peer to receive.

use super::wire::{self, Notification, PeerState, Vote};
use crate::config::Ensemble;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::time::{sleep_until, Instant};

/// What the elector asks to be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Send {
    /// To one server.
    To(u64, Notification),
    /// To every other voter.
    Voters(Notification),
}

/// The election state machine of one server; see the module docs.
#[derive(Debug)]
pub struct Elector {
    me: u64,
    voters: Vec<u64>,
    quorum: usize,
    state: PeerState,
    round: u64,
    vote: Vote,
    /// This server's own vote in the current election.
    own: Vote,
    /// Votes of LOOKING (or, in this round, settled) voters, with their rounds.
    received: HashMap<u64, (Vote, u64)>,
    /// Votes of voters that are FOLLOWING or LEADING, with their states.
    settled: HashMap<u64, (Vote, PeerState)>,
}

impl Elector {
    /// The elector of server `me` in `ensemble`, not electing yet (its state is LOOKING
    /// until the first [`Elector::look`] decides).
    pub fn new(ensemble: &Ensemble) -> Elector {
        let none = Vote {
            leader: 0,
            zxid: i64::MIN,
            epoch: 0,
        };
        Elector {
            me: ensemble.my_id,
            voters: ensemble.voters(),
            quorum: ensemble.quorum(),
            state: PeerState::Looking,
            round: 0,
            vote: none,
            own: none,
            received: HashMap::new(),
            settled: HashMap::new(),
        }
    }

    fn is_voter(&self, id: u64) -> bool {
        self.voters.contains(&id)
    }

    /// Counts `voters` from now on (a reconfiguration changed them).
    pub fn set_voters(&mut self, voters: Vec<u64>) {
        self.quorum = voters.len() / 2 + 1;
        self.voters = voters;
    }

    /// The notification describing this server now.
    pub fn notification(&self) -> Notification {
        Notification {
            vote: self.vote,
            round: self.round,
            state: self.state,
            from: self.me,
        }
    }

    /// The state (LOOKING while electing).
    pub fn state(&self) -> PeerState {
        self.state
    }

    /// Starts an election in a new round, voting for itself with its last
    /// logged `zxid` and current `epoch` (an observer votes for nobody).
    pub fn look(&mut self, zxid: i64, epoch: u64, out: &mut Vec<Send>) {
        self.state = PeerState::Looking;
        self.round += 1;
        self.own = if self.is_voter(self.me) {
            Vote {
                leader: self.me,
                zxid,
                epoch,
            }
        } else {
            Vote {
                leader: 0,
                zxid: i64::MIN,
                epoch: 0,
            }
        };
        self.vote = self.own;
        self.received.clear();
        self.settled.clear();
        self.record_own();
        out.push(Send::Voters(self.notification()));
    }

    fn record_own(&mut self) {
        if self.is_voter(self.me) {
            self.received.insert(self.me, (self.vote, self.round));
        }
    }

    /// Whether a quorum of voters in this round agree with this server's vote.
    pub fn quorum_agrees(&self) -> bool {
        self.state == PeerState::Looking
            && self.is_voter(self.vote.leader)
            && self
                .received
                .values()
                .filter(|(v, r)| *v == self.vote && *r == self.round)
                .count()
                >= self.quorum
    }

    /// Decides for its vote if a quorum still agrees (the caller waited
    /// a moment for better votes first).
    pub fn finalize(&mut self) -> Option<Vote> {
        self.quorum_agrees().then(|| self.decide(self.vote))
    }

    fn decide(&mut self, vote: Vote) -> Vote {
        self.vote = vote;
        self.state = if vote.leader == self.me {
            PeerState::Leading
        } else if self.is_voter(self.me) {
            PeerState::Following
        } else {
            PeerState::Observing
        };
        self.received.clear();
        self.settled.clear();
        vote
    }

    /// Handles a notification; returns the vote decided if it settles the
    /// election at once (a standing leader was found).
    pub fn receive(&mut self, n: Notification, out: &mut Vec<Send>) -> Option<Vote> {
        if n.from == self.me {
            return None;
        }
        if !self.is_voter(n.from) || self.state != PeerState::Looking {
            // Observers, and anyone while this server is settled, learn what it follows.
            if n.state == PeerState::Looking {
                out.push(Send::To(n.from, self.notification()));
            }
            return None;
        }
        if n.state == PeerState::Looking && n.round < self.round {
            out.push(Send::To(n.from, self.notification()));
            return None;
        }
        if !self.is_voter(n.vote.leader) {
            return None;
        }
        match n.state {
            PeerState::Looking => {
                if n.round > self.round {
                    self.round = n.round;
                    self.received.clear();
                    self.vote = if n.vote.rank() > self.own.rank() {
                        n.vote
                    } else {
                        self.own
                    };
                    self.record_own();
                    out.push(Send::Voters(self.notification()));
                } else if n.vote.rank() > self.vote.rank() {
                    self.vote = n.vote;
                    self.record_own();
                    out.push(Send::Voters(self.notification()));
                } else if n.vote.rank() < self.vote.rank() {
                    // The sender has not heard this better vote (it began looking after
                    // this server told everyone): tell it now rather than at the next resend.
                    out.push(Send::To(n.from, self.notification()));
                }
                self.received.insert(n.from, (n.vote, n.round));
                None
            }
            PeerState::Following | PeerState::Leading => {
                self.settled.insert(n.from, (n.vote, n.state));
                if n.round == self.round {
                    self.received.insert(n.from, (n.vote, n.round));
                    let agree = self
                        .received
                        .values()
                        .filter(|(v, r)| *v == n.vote && *r == n.round)
                        .count();
                    if agree >= self.quorum && self.leader_confirmed(n.vote.leader) {
                        return Some(self.decide(n.vote));
                    }
                }
                // A standing leader: a quorum follows it (same leader and epoch), and it leads.
                let agree = self
                    .settled
                    .values()
                    .filter(|(v, _)| v.leader == n.vote.leader && v.epoch == n.vote.epoch)
                    .count();
                if agree >= self.quorum && self.leader_confirmed(n.vote.leader) {
                    self.round = n.round.max(self.round);
                    return Some(self.decide(n.vote));
                }
                None
            }
            PeerState::Observing => None,
        }
    }

    /// The leader this server follows or is established in `epoch`: from now on it answers
    /// LOOKING servers with that epoch (ZooKeeper's `updateElectionVote`,
    /// ZOOKEEPER-1732). Servers that
    /// decided at different moments hold votes for one leader with different epochs (one
    /// decided for the leader's vote of the round before); without this, a server that
    /// looks later sees no quorum agree on (leader, epoch) and looks forever.
    pub fn established(&mut self, epoch: u64) {
        if self.state != PeerState::Looking {
            self.vote.epoch = epoch;
        }
    }

    /// A vote for another leader counts only once that leader says it leads.
    fn leader_confirmed(&self, leader: u64) -> bool {
        leader == self.me
            || self
                .settled
                .get(&leader)
                .is_some_and(|(_, s)| *s == PeerState::Leading)
    }
}

enum Command {
    Look {
        zxid: i64,
        epoch: u64,
        decided: oneshot::Sender<Vote>,
    },
    State(oneshot::Sender<PeerState>),
    Established(u64),
    Voters(Vec<u64>),
}

/// Leader election on the election port; see the module docs.
#[derive(Clone)]
pub struct Election {
    commands: mpsc::UnboundedSender<Command>,
}

impl Election {
    /// Binds the election port and starts electing in the background
    /// (answering LOOKING peers from the start).
    pub async fn start(ensemble: Arc<Ensemble>, tick: Duration) -> Result<Election, String> {
        let me = ensemble.me();
        let bind = format!("0.0.0.0:{}", me.election_port);
        let listener = TcpListener::bind(&bind)
            .await
            .map_err(|e| format!("cannot listen for elections on {bind}: {e}"))?;
        let (inbox_tx, inbox) = mpsc::unbounded_channel();
        tokio::spawn(accept(listener, ensemble.clone(), inbox_tx));
        let peers = ensemble
            .peers()
            .map(|p| (p.id, spawn_sender(ensemble.my_id, p.election_addr(), tick)))
            .collect();
        let (commands, rx) = mpsc::unbounded_channel();
        let elector = Elector::new(&ensemble);
        tokio::spawn(run(elector, peers, inbox, rx, tick));
        Ok(Election { commands })
    }

    /// Elects a leader: votes with this server's last logged `zxid` and
    /// current `epoch` until the ensemble agrees, then returns the vote.
    pub async fn look(&self, zxid: i64, epoch: u64) -> Vote {
        let (decided, rx) = oneshot::channel();
        let _ = self.commands.send(Command::Look {
            zxid,
            epoch,
            decided,
        });
        rx.await
            .expect("the election task runs as long as the server")
    }

    /// The leader this server follows, or this server leading, is established in `epoch`
    /// (see [`Elector::established`]).
    pub fn established(&self, epoch: u64) {
        let _ = self.commands.send(Command::Established(epoch));
    }

    /// The voters from the next election on (the membership changed).
    pub fn set_voters(&self, voters: Vec<u64>) {
        let _ = self.commands.send(Command::Voters(voters));
    }

    /// The election's state now.
    pub async fn state(&self) -> PeerState {
        let (tx, rx) = oneshot::channel();
        let _ = self.commands.send(Command::State(tx));
        rx.await.unwrap_or(PeerState::Looking)
    }
}

/// How long to wait for a better vote once a quorum agrees.
const FINALIZE_WAIT: Duration = Duration::from_millis(200);
/// The longest pause between resent votes while electing.
const MAX_RESEND: Duration = Duration::from_secs(2);

async fn run(
    mut elector: Elector,
    peers: HashMap<u64, mpsc::Sender<Notification>>,
    mut inbox: mpsc::UnboundedReceiver<Notification>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    tick: Duration,
) {
    let finalize_wait = FINALIZE_WAIT.min(tick);
    let mut waiting: Option<oneshot::Sender<Vote>> = None;
    let mut resend_every = finalize_wait;
    let mut resend_at = Instant::now() + resend_every;
    let mut finalize_at: Option<Instant> = None;
    let mut out = Vec::new();
    let send = |out: &mut Vec<Send>, elector: &Elector| {
        for s in out.drain(..) {
            match s {
                Send::To(to, n) => {
                    if let Some(p) = peers.get(&to) {
                        let _ = p.try_send(n);
                    }
                }
                Send::Voters(n) => {
                    for (id, p) in &peers {
                        if elector.voters.contains(id) {
                            let _ = p.try_send(n);
                        }
                    }
                }
            }
        }
    };
    loop {
        let looking = waiting.is_some();
        tokio::select! {
            cmd = commands.recv() => match cmd {
                None => return,
                Some(Command::Look { zxid, epoch, decided }) => {
                    elector.look(zxid, epoch, &mut out);
                    tracing::info!("LOOKING: round {}, voting for myself with zxid {zxid:#x}, epoch {epoch}", elector.round);
                    waiting = Some(decided);
                    finalize_at = None;
                    resend_every = finalize_wait;
                    resend_at = Instant::now() + resend_every;
                }
                Some(Command::State(tx)) => {
                    let _ = tx.send(elector.state());
                }
                Some(Command::Established(epoch)) => elector.established(epoch),
                Some(Command::Voters(voters)) => elector.set_voters(voters),
            },
            Some(n) = inbox.recv() => {
                let decided = elector.receive(n, &mut out);
                if looking {
                    resend_every = finalize_wait;
                    resend_at = Instant::now() + resend_every;
                }
                if let Some(vote) = decided {
                    report(&elector, vote);
                    if let Some(w) = waiting.take() {
                        let _ = w.send(vote);
                    }
                    finalize_at = None;
                } else if elector.quorum_agrees() {
                    finalize_at.get_or_insert(Instant::now() + finalize_wait);
                } else {
                    finalize_at = None;
                }
            }
            () = sleep_until(resend_at), if looking => {
                out.push(Send::Voters(elector.notification()));
                resend_every = (resend_every * 2).min(MAX_RESEND);
                resend_at = Instant::now() + resend_every;
            }
            () = sleep_until(finalize_at.unwrap_or_else(Instant::now)), if looking && finalize_at.is_some() => {
                finalize_at = None;
                if let Some(vote) = elector.finalize() {
                    report(&elector, vote);
                    if let Some(w) = waiting.take() {
                        let _ = w.send(vote);
                    }
                }
            }
        }
        send(&mut out, &elector);
    }
}

fn report(elector: &Elector, vote: Vote) {
    tracing::info!(
        "election round {} decided: leader {} (zxid {:#x}, epoch {}), this server is {:?}",
        elector.round,
        vote.leader,
        vote.zxid,
        vote.epoch,
        elector.state()
    );
}

/// Accepts peers' connections; each starts with the sender's id.
async fn accept(
    listener: TcpListener,
    ensemble: Arc<Ensemble>,
    inbox: mpsc::UnboundedSender<Notification>,
) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let inbox = inbox.clone();
        let ensemble = ensemble.clone();
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let Ok(from) = tokio::io::AsyncReadExt::read_u64(&mut stream).await else {
                return;
            };
            if ensemble.server(from).is_none() || from == ensemble.my_id {
                tracing::warn!("election connection from unknown server {from}");
                return;
            }
            while let Ok(body) = wire::read_message(&mut stream).await {
                match Notification::decode(&body) {
                    Ok(n) if n.from == from => {
                        if inbox.send(n).is_err() {
                            return;
                        }
                    }
                    _ => return,
                }
            }
        });
    }
}

/// A task that sends notifications to one peer, connecting when it has one
/// to send; a notification that cannot be delivered is dropped (votes are
/// sent again while electing).
fn spawn_sender(me: u64, addr: String, tick: Duration) -> mpsc::Sender<Notification> {
    let (tx, mut rx) = mpsc::channel::<Notification>(64);
    let limit = tick.clamp(Duration::from_millis(100), Duration::from_secs(2));
    tokio::spawn(async move {
        let mut stream: Option<TcpStream> = None;
        while let Some(n) = rx.recv().await {
            if stream.is_none() {
                let connect = tokio::time::timeout(limit, TcpStream::connect(&addr)).await;
                if let Ok(Ok(mut s)) = connect {
                    let _ = s.set_nodelay(true);
                    let hello = tokio::time::timeout(limit, s.write_u64(me)).await;
                    if matches!(hello, Ok(Ok(()))) {
                        stream = Some(s);
                    }
                }
            }
            let Some(s) = stream.as_mut() else {
                continue;
            };
            let mut buf = Vec::new();
            n.encode(&mut buf);
            if !matches!(
                tokio::time::timeout(limit, s.write_all(&buf)).await,
                Ok(Ok(()))
            ) {
                stream = None;
            }
        }
    });
    tx
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServerSpec;

    fn ensemble(me: u64, voters: u64, observers: u64) -> Ensemble {
        let servers = (1..=voters + observers)
            .map(|id| ServerSpec {
                id,
                host: "127.0.0.1".into(),
                quorum_port: 1,
                election_port: 2,
                observer: id > voters,
                client: None,
            })
            .collect();
        Ensemble { my_id: me, servers }
    }

    /// Delivers every message until none is left, skipping servers in `down`
    /// and links in `cut`; returns each server's decision.
    fn deliver(
        electors: &mut [Elector],
        queue: Vec<(u64, Send)>,
        down: &[u64],
        finalize: bool,
    ) -> HashMap<u64, Vote> {
        // In order, as TCP delivers between two servers.
        let mut queue: std::collections::VecDeque<(u64, Send)> = queue.into();
        let mut decided = HashMap::new();
        for _ in 0..50 {
            while let Some((from, s)) = queue.pop_front() {
                let targets: Vec<(u64, Notification)> = match s {
                    Send::To(to, n) => vec![(to, n)],
                    Send::Voters(n) => electors
                        .iter()
                        .filter(|e| e.is_voter(e.me) && e.me != from)
                        .map(|e| (e.me, n))
                        .collect(),
                };
                for (to, n) in targets {
                    if down.contains(&to) || down.contains(&from) {
                        continue;
                    }
                    let e = &mut electors[to as usize - 1];
                    let mut out = Vec::new();
                    if let Some(v) = e.receive(n, &mut out) {
                        decided.insert(to, v);
                    }
                    queue.extend(out.into_iter().map(|s| (to, s)));
                }
            }
            if !finalize {
                break;
            }
            // The finalize wait passed with nothing better: decide, and tell the others.
            for e in electors.iter_mut() {
                if down.contains(&e.me) || e.state() != PeerState::Looking {
                    continue;
                }
                if let Some(v) = e.finalize() {
                    decided.insert(e.me, v);
                    queue.push_back((e.me, Send::Voters(e.notification())));
                }
            }
            if queue.is_empty() {
                break;
            }
        }
        decided
    }

    fn start(electors: &mut [Elector], zxids: &[(i64, u64)], down: &[u64]) -> Vec<(u64, Send)> {
        let mut queue = Vec::new();
        for (e, (zxid, epoch)) in electors.iter_mut().zip(zxids) {
            if down.contains(&e.me) {
                continue;
            }
            let mut out = Vec::new();
            e.look(*zxid, *epoch, &mut out);
            queue.extend(out.into_iter().map(|s| (e.me, s)));
        }
        queue
    }

    #[test]
    fn the_most_up_to_date_server_wins() {
        let mut electors: Vec<Elector> =
            (1..=3).map(|i| Elector::new(&ensemble(i, 3, 0))).collect();
        // Server 2 has the highest zxid, server 3 the highest id.
        let q = start(&mut electors, &[(5, 1), (9, 1), (7, 1)], &[]);
        let decided = deliver(&mut electors, q, &[], true);
        assert_eq!(decided.len(), 3, "{decided:?}");
        assert!(decided.values().all(|v| v.leader == 2));
        assert_eq!(electors[1].state(), PeerState::Leading);
        assert_eq!(electors[0].state(), PeerState::Following);
        // The epoch weighs more than the zxid.
        let mut electors: Vec<Elector> =
            (1..=3).map(|i| Elector::new(&ensemble(i, 3, 0))).collect();
        let q = start(&mut electors, &[(1 << 33, 2), (9, 1), (7, 1)], &[]);
        let decided = deliver(&mut electors, q, &[], true);
        assert!(decided.values().all(|v| v.leader == 1), "{decided:?}");
    }

    #[test]
    fn a_minority_never_decides_and_a_returning_server_joins_the_leader() {
        let mut electors: Vec<Elector> =
            (1..=5).map(|i| Elector::new(&ensemble(i, 5, 0))).collect();
        let zx = [(1, 1), (2, 1), (3, 1), (4, 1), (5, 1)];
        // Two of five alone: no decision however long they talk.
        let q = start(&mut electors, &zx, &[3, 4, 5]);
        assert!(deliver(&mut electors, q, &[3, 4, 5], true).is_empty());
        // Three of five: server 3 (highest zxid among them) leads.
        let q = start(&mut electors, &zx, &[4, 5]);
        let decided = deliver(&mut electors, q, &[4, 5], true);
        assert!(decided.values().all(|v| v.leader == 3), "{decided:?}");
        assert_eq!(decided.len(), 3);
        // Server 5 comes back with a better zxid but a standing leader: it follows 3.
        let mut out = Vec::new();
        electors[4].look(99, 1, &mut out);
        let q = out.into_iter().map(|s| (5, s)).collect();
        let decided = deliver(&mut electors, q, &[4], false);
        assert_eq!(decided.get(&5).map(|v| v.leader), Some(3), "{decided:?}");
        assert_eq!(electors[4].state(), PeerState::Following);
    }

    #[test]
    fn a_server_that_starts_looking_late_hears_the_better_vote_at_once() {
        let mut electors: Vec<Elector> =
            (1..=3).map(|i| Elector::new(&ensemble(i, 3, 0))).collect();
        // Server 2 looks while 1 still follows the old leader (3, now down): 1 answers
        // with its settled vote, and 2's vote is not delivered to 1 as a LOOKING vote.
        let q = start(&mut electors, &[(0, 0), (5, 1), (0, 0)], &[1, 3]);
        assert!(deliver(&mut electors, q, &[1, 3], false).is_empty());
        // Then 1 looks in the same round with a worse vote: 2 answers it without waiting
        // for its resend timer, 1 adopts 2's vote, and both decide once the wait passes.
        let mut out = Vec::new();
        electors[0].look(5, 1, &mut out);
        assert_eq!(electors[0].round, electors[1].round);
        let q = out.into_iter().map(|s| (1, s)).collect();
        let decided = deliver(&mut electors, q, &[3], true);
        assert_eq!(decided.get(&1).map(|v| v.leader), Some(2), "{decided:?}");
        assert_eq!(decided.get(&2).map(|v| v.leader), Some(2), "{decided:?}");
    }

    #[test]
    fn a_server_joins_a_leader_its_followers_decided_for_in_different_epochs() {
        let mut electors: Vec<Elector> =
            (1..=3).map(|i| Elector::new(&ensemble(i, 3, 0))).collect();
        // 3 leads epoch 2 with 1 following; 2 is down.
        let q = start(&mut electors, &[(5, 1), (0, 0), (9, 1)], &[2]);
        let decided = deliver(&mut electors, q, &[2], true);
        assert!(decided.values().all(|v| v.leader == 3), "{decided:?}");
        // 3 is elected again in a round 1 took no part in (1 decided on 3's word of the
        // round before, as after a pause of the leader): 3's vote carries epoch 2, 1's
        // still epoch 1.
        let mut out = Vec::new();
        electors[2].look(20, 2, &mut out);
        electors[2].state = PeerState::Leading;
        electors[2].vote = electors[2].own;
        // The two settled votes now name leader 3 with epochs 1 and 2.
        assert_ne!(electors[0].vote.epoch, electors[2].vote.epoch);
        // 2 comes back and looks; without the epochs made one it never decides.
        let mut out = Vec::new();
        electors[1].look(0, 0, &mut out);
        let q = out.into_iter().map(|s| (2, s)).collect();
        assert!(deliver(&mut electors, q, &[], false).is_empty());
        // Once both say the epoch established (3), 2 joins at once.
        for e in [0, 2] {
            electors[e].established(3);
        }
        let mut out = Vec::new();
        electors[1].look(0, 0, &mut out);
        let q = out.into_iter().map(|s| (2, s)).collect();
        let decided = deliver(&mut electors, q, &[], false);
        assert_eq!(decided.get(&2).map(|v| v.leader), Some(3), "{decided:?}");
        assert_eq!(electors[1].state(), PeerState::Following);
        // A server that is looking keeps its own vote's epoch.
        let mut out = Vec::new();
        electors[1].look(0, 0, &mut out);
        electors[1].established(7);
        assert_eq!(electors[1].vote.epoch, 0);
    }

    #[test]
    fn observers_follow_but_never_lead_or_count() {
        // Two voters and an observer: the observer's vote never makes a quorum.
        let mut electors: Vec<Elector> =
            (1..=3).map(|i| Elector::new(&ensemble(i, 2, 1))).collect();
        let q = start(&mut electors, &[(1, 1), (2, 1), (50, 1)], &[2]);
        assert!(deliver(&mut electors, q, &[2], true).is_empty());
        let q = start(&mut electors, &[(1, 1), (2, 1), (50, 1)], &[]);
        let decided = deliver(&mut electors, q, &[], true);
        assert_eq!(decided.get(&1).map(|v| v.leader), Some(2), "{decided:?}");
        assert_eq!(decided.get(&3).map(|v| v.leader), Some(2), "{decided:?}");
        assert_eq!(electors[2].state(), PeerState::Observing);
    }
}
