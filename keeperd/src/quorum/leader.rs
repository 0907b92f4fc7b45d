//! Leading: discovery (a quorum of learners report the epochs they
//! accepted; the new epoch is one past the largest, persisted before it is
//! proposed), synchronization (each learner's log brought in line with
//! this leader's history by DIFF, TRUNC or SNAP, then NEWLEADER; the
//! history counts committed once a quorum, this leader included, has
//! acknowledged NEWLEADER), and broadcast (each write proposed to every
//! learner at once and committed, in zxid order, once a quorum including
//! this leader has it durable). A leader that stops hearing from a quorum
//! stops answering clients at once (its lease runs out) and steps down.
//!
//! [`Broadcast`] counts acknowledgements and decides commits; [`LeaderLog`]
//! is the [`Log`] the core appends to; [`lead`] runs the phases and one
//! task per learner connection.

use super::epochs::Epochs;
use super::peer::Peer;
use super::wire::{self, Down, SyncKind, Up};
use super::{LearnerLink, Status};
use crate::config::{Config, Ensemble};
use crate::core::{Core, CoreMsg, Remote, Role, Start};
use crate::failpoint::{self, Failpoint};
use crate::log::{FileLog, History, Log, Recovered, Segment};
use crate::proto::Request;
use crate::server::{Gate, Serving};
use crate::tree::Capture;
use crate::txn::Txn;
use bytes::Bytes;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};

/// A learner in the broadcast.
struct Member {
    observer: bool,
    link: LearnerLink,
    /// Which connection of this learner (a reconnect replaces the older).
    generation: u64,
    /// Highest zxid it has durable (counted once synced).
    acked: i64,
    /// It acknowledged NEWLEADER: it holds this leader's history.
    synced: bool,
    /// Stamp of the newest ping (or NEWLEADER) it answered.
    pinged: u64,
    heard: Instant,
}

struct Tally {
    my_id: u64,
    /// The voter sets of which each a quorum must have a zxid durable for it to commit:
    /// the membership, and until the epoch is established the one before the last
    /// reconfiguration in this leader's history if that may not be committed yet.
    voters: Vec<Vec<u64>>,
    /// A reconfiguration proposed and not committed yet: its zxid and new voters, whose
    /// quorum must also have it (and every later proposal) durable.
    pending: Option<(i64, Vec<u64>)>,
    /// This leader is not a voter of the membership committed last: it steps down.
    removed: bool,
    /// Highest zxid durable on this leader.
    durable: i64,
    committed: i64,
    /// Where this leader's history ended when it took over.
    base: i64,
    learners: HashMap<u64, Member>,
    core: Option<std_mpsc::Sender<CoreMsg>>,
}

/// Acknowledgements, commits and the learners proposals go to.
pub struct Broadcast {
    tally: Mutex<Tally>,
    status: Arc<Status>,
    lease: Duration,
    established: watch::Sender<bool>,
}

impl Broadcast {
    /// The broadcast of a leader whose history ends at `base`, all of it durable, counting
    /// quorums of each of `voters` (see [`Tally`]).
    fn new(
        my_id: u64,
        voters: Vec<Vec<u64>>,
        base: i64,
        status: Arc<Status>,
        lease: Duration,
    ) -> Broadcast {
        Broadcast {
            tally: Mutex::new(Tally {
                my_id,
                voters,
                pending: None,
                removed: false,
                durable: base,
                // Below any zxid: the history up to `base` (maybe 0) commits once a quorum synced.
                committed: -1,
                base,
                learners: HashMap::new(),
                core: None,
            }),
            status,
            lease,
            established: watch::channel(false).0,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a learner at a cut of the log: every later proposal and commit
    /// goes to it. Returns the commit point.
    fn register(&self, id: u64, observer: bool, link: LearnerLink, generation: u64) -> i64 {
        let mut t = self.lock();
        t.learners.insert(
            id,
            Member {
                observer,
                link,
                generation,
                acked: 0,
                synced: false,
                pinged: 0,
                heard: Instant::now(),
            },
        );
        let committed = t.committed.max(0);
        self.figures(&t);
        committed
    }

    /// The learner acknowledged NEWLEADER (sent at stamp `sent`): it has
    /// everything up to `zxid`.
    fn synced(&self, id: u64, generation: u64, zxid: i64, sent: u64) {
        let mut t = self.lock();
        let established = *self.established.borrow();
        let committed = t.committed.max(0);
        if let Some(m) = member(&mut t, id, generation) {
            m.synced = true;
            m.acked = m.acked.max(zxid);
            m.pinged = m.pinged.max(sent);
            m.heard = Instant::now();
            if established {
                let _ = m.link.send(frame(&Down::UpToDate { committed }));
            }
        }
        self.advance(&mut t);
    }

    /// The learner has every proposal up to `zxid` durable.
    fn ack(&self, id: u64, generation: u64, zxid: i64) {
        let mut t = self.lock();
        if let Some(m) = member(&mut t, id, generation) {
            m.acked = m.acked.max(zxid);
            m.heard = Instant::now();
        }
        self.advance(&mut t);
    }

    /// A message from the learner arrived.
    fn heard(&self, id: u64, generation: u64) {
        if let Some(m) = member(&mut self.lock(), id, generation) {
            m.heard = Instant::now();
        }
    }

    /// The learner answered the ping stamped `at`.
    fn pinged(&self, id: u64, generation: u64, at: u64) {
        let mut t = self.lock();
        if let Some(m) = member(&mut t, id, generation) {
            m.heard = Instant::now();
            m.pinged = m.pinged.max(at);
        }
        self.renew(&t);
    }

    /// The learner's connection ended.
    fn remove(&self, id: u64, generation: u64) {
        let mut t = self.lock();
        if t.learners
            .get(&id)
            .is_some_and(|m| m.generation == generation)
        {
            t.learners.remove(&id);
        }
        self.figures(&t);
        self.renew(&t);
    }

    /// This leader made everything up to `zxid` durable.
    fn durable(&self, zxid: i64) {
        let mut t = self.lock();
        t.durable = t.durable.max(zxid);
        self.advance(&mut t);
    }

    /// Sends a batch of proposals to every learner.
    fn propose(&self, batch: Bytes) {
        let t = self.lock();
        for m in t.learners.values() {
            let _ = m.link.send(batch.clone());
        }
    }

    /// This leader proposed a reconfiguration at `zxid` making `voters` the voters.
    fn reconfig(&self, zxid: i64, voters: Vec<u64>) {
        self.lock().pending = Some((zxid, voters));
    }

    /// Whether a reconfiguration committed without this leader among the voters.
    pub fn removed(&self) -> bool {
        self.lock().removed
    }

    /// Commits whatever a quorum (this leader included) now has durable: a quorum of each
    /// voter set, and from a pending reconfiguration on, of its new voters too.
    fn advance(&self, t: &mut Tally) {
        let mut point = t
            .voters
            .iter()
            .map(|set| quorum_point(t, set))
            .min()
            .unwrap_or(i64::MIN)
            .min(t.durable);
        let mut reconfigured = None;
        if let Some((zxid, new)) = &t.pending {
            if point >= *zxid {
                let theirs = quorum_point(t, new);
                if theirs >= *zxid {
                    point = point.min(theirs.max(*zxid));
                    reconfigured = Some(new.clone());
                } else {
                    point = *zxid - 1;
                }
            }
        }
        if let Some(new) = reconfigured {
            tracing::info!("reconfiguration committed: voters now {new:?}");
            t.removed = !new.contains(&t.my_id);
            t.voters = vec![new];
            t.pending = None;
        }
        let without_quorum = failpoint::active(Failpoint::CommitBeforeQuorum)
            || (failpoint::active(Failpoint::StaleLeaderWrites) && !self.status.lease_held());
        if without_quorum {
            point = t.durable;
        }
        check_commit(t, point, without_quorum);
        if point > t.committed {
            t.committed = point;
            let commit = frame(&Down::Commit { zxid: point });
            for m in t.learners.values() {
                let _ = m.link.send(commit.clone());
            }
            if let Some(core) = &t.core {
                let _ = core.send(CoreMsg::Durable(point));
            }
            if !*self.established.borrow() && point >= t.base {
                let up = frame(&Down::UpToDate { committed: point });
                for m in t.learners.values().filter(|m| m.synced) {
                    let _ = m.link.send(up.clone());
                }
                self.established.send_replace(true);
                // The whole history is committed: the membership before it counts no more.
                t.voters.truncate(1);
            }
        }
        self.figures(t);
        self.renew(t);
    }

    /// Extends the lease from the newest ping a quorum of each voter set answered.
    fn renew(&self, t: &Tally) {
        let now = self.status.now_ms();
        let stamps = t.voters.iter().map(|set| {
            let mut pinged: Vec<u64> = set
                .iter()
                .filter_map(|v| {
                    if *v == t.my_id {
                        Some(now)
                    } else {
                        t.learners.get(v).filter(|m| m.synced).map(|m| m.pinged)
                    }
                })
                .collect();
            let quorum = set.len() / 2 + 1;
            pinged.sort_unstable_by(|a, b| b.cmp(a));
            pinged.get(quorum - 1).copied()
        });
        if let Some(Some(stamp)) = stamps.min() {
            self.status.renew_lease(stamp, self.lease);
        }
    }

    /// How long ago each learner was last heard from, for the log.
    fn last_heard(&self) -> String {
        let t = self.lock();
        let mut heard: Vec<String> = t
            .learners
            .iter()
            .map(|(id, m)| format!("server {id} {:?} ago", m.heard.elapsed()))
            .collect();
        heard.sort();
        if heard.is_empty() {
            "no learner".into()
        } else {
            heard.join(", ")
        }
    }

    fn figures(&self, t: &Tally) {
        let s = &self.status;
        let count = |f: &dyn Fn(&Member) -> bool| t.learners.values().filter(|m| f(m)).count();
        s.learners.store(t.learners.len(), Ordering::Relaxed);
        s.synced_followers
            .store(count(&|m| m.synced && !m.observer), Ordering::Relaxed);
        s.synced_observers
            .store(count(&|m| m.synced && m.observer), Ordering::Relaxed);
        s.pending_syncs
            .store(count(&|m| !m.synced), Ordering::Relaxed);
        let synced = t
            .learners
            .iter()
            .filter(|(_, m)| m.synced)
            .map(|(id, _)| *id);
        s.set_synced(synced.chain([t.my_id]).collect());
    }
}

/// The highest zxid a quorum of `set` (this leader included) has durable.
fn quorum_point(t: &Tally, set: &[u64]) -> i64 {
    let mut acks: Vec<i64> = set.iter().map(|v| durable_on(t, *v)).collect();
    acks.sort_unstable_by(|a, b| b.cmp(a));
    acks.get(set.len() / 2).copied().unwrap_or(i64::MIN)
}

/// The highest zxid voter `id` has durable as far as this leader knows (`i64::MIN` for a
/// learner not synced or not connected).
fn durable_on(t: &Tally, id: u64) -> i64 {
    if id == t.my_id {
        return t.durable;
    }
    t.learners
        .get(&id)
        .filter(|m| m.synced)
        .map_or(i64::MIN, |m| m.acked)
}

/// Checks a new commit `point`, counted afresh: this leader has it durable and, unless a
/// failpoint commits without a quorum on purpose (`without_quorum`), more than half of each
/// voter set has acknowledged it.
fn check_commit(t: &Tally, point: i64, without_quorum: bool) {
    crate::invariant::check(
        point <= t.durable,
        "a leader commits only what it has durable",
        || format!("commit point {point:#x}, durable up to {:#x}", t.durable),
    );
    if without_quorum || point <= t.committed {
        return;
    }
    for set in &t.voters {
        let holding = set.iter().filter(|v| durable_on(t, **v) >= point).count();
        crate::invariant::check(
            holding > set.len() / 2,
            "a leader commits only what a quorum acknowledged",
            || format!("commit point {point:#x} held by {holding} of voters {set:?}"),
        );
    }
}

/// Whether `ids` hold a quorum of each of the voter sets.
fn quorum_of_each(sets: &[Vec<u64>], ids: impl Fn(u64) -> bool) -> bool {
    sets.iter()
        .all(|set| set.iter().filter(|v| ids(**v)).count() > set.len() / 2)
}

/// The learner `id` if this is its current connection.
fn member(t: &mut Tally, id: u64, generation: u64) -> Option<&mut Member> {
    t.learners
        .get_mut(&id)
        .filter(|m| m.generation == generation)
}

fn frame(msg: &Down) -> Bytes {
    let mut buf = Vec::new();
    msg.encode(&mut buf);
    Bytes::from(buf)
}

/// The leader's log: the local log, and every append proposed to the learners.
pub struct LeaderLog {
    file: FileLog,
    broadcast: Arc<Broadcast>,
    batch: Vec<u8>,
}

impl Log for LeaderLog {
    fn append(&mut self, txn: &Txn) {
        if let Some(new) = crate::membership::reconfigured(txn) {
            self.broadcast.reconfig(txn.zxid, new.voters());
        }
        let payload = self.file.append_record(txn);
        wire::encode_proposal(payload, &mut self.batch);
    }

    fn flush(&mut self) {
        // Proposals leave before the local sync, so learners sync alongside.
        if !self.batch.is_empty() {
            let batch = Bytes::from(std::mem::take(&mut self.batch));
            self.broadcast.propose(batch);
        }
        self.file.flush();
    }

    fn can_snapshot(&self) -> bool {
        self.file.can_snapshot()
    }

    fn snapshot(&mut self, capture: Capture) {
        self.flush();
        self.file.snapshot(capture);
    }

    fn retire(self: Box<Self>) -> Option<Segment> {
        self.file.retire()
    }
}

/// What a leader shares with the tasks serving its learners.
struct Leading {
    config: Arc<Config>,
    ensemble: Arc<Ensemble>,
    broadcast: Arc<Broadcast>,
    events: mpsc::UnboundedSender<Event>,
    epoch: watch::Receiver<Option<u64>>,
    core: watch::Receiver<Option<std_mpsc::Sender<CoreMsg>>>,
    generations: AtomicU64,
}

impl Leading {
    fn init_limit(&self) -> Duration {
        self.config.tick() * self.config.init_limit
    }

    fn sync_limit(&self) -> Duration {
        self.config.tick() * self.config.sync_limit
    }
}

/// What learner tasks tell the leader during discovery.
enum Event {
    /// A learner connected with the epoch it last accepted.
    Discovered { id: u64, accepted: u64 },
    /// A learner took the new epoch; its current epoch and last zxid.
    EpochAcked { id: u64, current: u64, last: i64 },
}

/// Leads with the recovered state until a quorum is lost; returns why it
/// ended, leaving in `carry` the state for the next role if it served.
pub async fn lead(
    peer: &Peer,
    recovered: Recovered,
    epochs: &mut Epochs,
    carry: &mut Option<Recovered>,
) -> Result<(), String> {
    let config = peer.config.clone();
    let ensemble = peer.ensemble.clone();
    let gate = peer.gate.clone();
    let last = recovered.tree.last_zxid;
    // The port this server's own config file gives it (the membership's line for it says the
    // same wherever the config files agree).
    let own = config.servers.iter().find(|s| s.id == ensemble.my_id);
    let port = own.map_or(ensemble.me().quorum_port, |s| s.quorum_port);
    let bind = format!("0.0.0.0:{port}");
    let listener = TcpListener::bind(&bind)
        .await
        .map_err(|e| format!("cannot listen for learners on {bind}: {e}"))?;
    let status = Arc::new(Status::default());
    // A tick short of when the learners could give up on this leader.
    let lease = (config.tick() * config.sync_limit.saturating_sub(1)).max(config.tick() / 2);
    // A quorum of the membership, and of the one before if its change may be uncommitted.
    let voters: Vec<Vec<u64>> = std::iter::once(ensemble.voters())
        .chain(peer.voters_before.clone())
        .collect();
    let broadcast = Arc::new(Broadcast::new(
        ensemble.my_id,
        voters.clone(),
        last,
        status.clone(),
        lease,
    ));
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let (epoch_tx, epoch_rx) = watch::channel(None);
    let (core_tx_watch, core_rx_watch) = watch::channel(None);
    let leading = Arc::new(Leading {
        config: config.clone(),
        ensemble: ensemble.clone(),
        broadcast: broadcast.clone(),
        events: events_tx,
        epoch: epoch_rx,
        core: core_rx_watch,
        generations: AtomicU64::new(1),
    });
    let acceptor = tokio::spawn(accept(listener, leading.clone()));
    let _stop_acceptor = AbortOnDrop(acceptor.abort_handle());
    let init_deadline = tokio::time::Instant::now() + leading.init_limit();

    // Discovery: a quorum of voters report the epochs they accepted.
    let mut accepted: HashMap<u64, u64> = HashMap::from([(ensemble.my_id, epochs.accepted())]);
    let mut early_acks = Vec::new();
    while !quorum_of_each(&voters, |id| accepted.contains_key(&id)) {
        match tokio::time::timeout_at(init_deadline, events.recv()).await {
            Ok(Some(Event::Discovered { id, accepted: a })) => {
                accepted.insert(id, a);
            }
            Ok(Some(other)) => early_acks.push(other),
            _ => return Err("no quorum of followers connected within initLimit".into()),
        }
    }
    let epoch = accepted.values().max().copied().unwrap_or(0) + 1;
    epochs.set_accepted(epoch)?;
    epoch_tx.send_replace(Some(epoch));
    tracing::info!("LEADING: proposing epoch {epoch} with history up to {last:#x}");

    // A quorum takes the epoch, none of them ahead of this leader.
    let mine = (epochs.current(), last);
    let mut took: HashSet<u64> = HashSet::from([ensemble.my_id]);
    loop {
        if quorum_of_each(&voters, |id| took.contains(&id)) {
            break;
        }
        let event = match early_acks.pop() {
            Some(e) => e,
            None => match tokio::time::timeout_at(init_deadline, events.recv()).await {
                Ok(Some(e)) => e,
                _ => return Err("no quorum took the new epoch within initLimit".into()),
            },
        };
        if let Event::EpochAcked {
            id,
            current,
            last: theirs,
        } = event
        {
            if (current, theirs) > mine {
                return Err(format!(
                    "learner {id} is ahead of this leader (epoch {current}, zxid {theirs:#x} against {}, {:#x})",
                    mine.0, mine.1
                ));
            }
            took.insert(id);
        }
    }
    epochs.set_current(epoch)?;
    peer.election.established(epoch);

    // The core starts (not serving yet) so learners can be cut in.
    let (core_tx, core_rx) = std_mpsc::channel();
    let mut file = FileLog::new(
        config.data_dir.clone(),
        recovered.segment,
        last,
        Box::new(|_| {}),
    );
    let b = broadcast.clone();
    file.set_on_durable(Box::new(move |z| b.durable(z)));
    let log = LeaderLog {
        file,
        broadcast: broadcast.clone(),
        batch: Vec::new(),
    };
    let role = Role::Leader {
        id: ensemble.my_id,
        status: status.clone(),
    };
    let start = Start {
        committed: 0,
        epoch,
        serving: false,
    };
    let core = Core::new(config.clone(), recovered.tree, Box::new(log), role, start);
    let shared = core.shared();
    let core_thread = core.spawn(core_rx)?;
    let stop_core = StopCore {
        gate: gate.clone(),
        core: core_tx.clone(),
        thread: Some(core_thread),
    };
    broadcast.lock().core = Some(core_tx.clone());
    core_tx_watch.send_replace(Some(core_tx.clone()));

    // Established once a quorum acknowledged NEWLEADER.
    let mut established = broadcast.established.subscribe();
    let wait = established.wait_for(|e| *e);
    if tokio::time::timeout_at(init_deadline, wait).await.is_err() {
        return Err("no quorum synced within initLimit".into());
    }
    let _ = core_tx.send(CoreMsg::Serve);
    gate.open(Serving {
        core: core_tx.clone(),
        shared,
    });
    tracing::info!("LEADING epoch {epoch}: established, serving clients");

    // Broadcast until the lease runs out.
    let mut check = tokio::time::interval(config.tick() / 4);
    let why = loop {
        check.tick().await;
        while events.try_recv().is_ok() {}
        if !status.lease_valid() {
            break format!("lost the quorum (last heard: {})", broadcast.last_heard());
        }
        if broadcast.removed() {
            break "a reconfiguration left it out of the voters".to_string();
        }
        if stop_core.finished() {
            break "the core stopped".to_string();
        }
    };
    *carry = stop_core.retire();
    Err(format!("stepping down as leader of epoch {epoch}: {why}"))
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Closes the gate and stops a core (waiting for it) when dropped.
pub struct StopCore {
    /// The client gate.
    pub gate: Arc<Gate>,
    /// The core's inbox.
    pub core: std_mpsc::Sender<CoreMsg>,
    /// The core's thread.
    pub thread: Option<std::thread::JoinHandle<Option<Recovered>>>,
}

impl StopCore {
    /// Stops the core and returns the state it leaves to the next role
    /// (see [`Core`]'s `retire`), if any.
    pub fn retire(mut self) -> Option<Recovered> {
        self.gate.close();
        let _ = self.core.send(CoreMsg::Shutdown);
        let thread = self.thread.take()?;
        tokio::task::block_in_place(|| thread.join()).ok().flatten()
    }

    /// Whether the core thread ended.
    pub fn finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }
}

impl Drop for StopCore {
    fn drop(&mut self) {
        self.gate.close();
        let _ = self.core.send(CoreMsg::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = tokio::task::block_in_place(|| t.join());
        }
    }
}

/// Accepts learner connections, one task each (ended with this task).
async fn accept(listener: TcpListener, leading: Arc<Leading>) {
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, addr)) => {
                    let leading = leading.clone();
                    tasks.spawn(async move {
                        if let Err(e) = serve_learner(stream, leading).await {
                            tracing::info!("learner connection from {addr} ended: {e}");
                        }
                    });
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
}

async fn read_up(rd: &mut OwnedReadHalf, limit: Duration) -> Result<Up, String> {
    match tokio::time::timeout(limit, wire::read_message(rd)).await {
        Err(_) => Err(format!("nothing heard for {limit:?}")),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(body)) => Up::decode(&body).map_err(|e| e.to_string()),
    }
}

async fn write_all(wr: &mut OwnedWriteHalf, buf: &[u8], limit: Duration) -> Result<(), String> {
    match tokio::time::timeout(limit, wr.write_all(buf)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("could not send for {limit:?}")),
    }
}

/// Removes a learner from the broadcast and stops its writer when its connection ends.
struct Leave {
    broadcast: Arc<Broadcast>,
    id: u64,
    generation: u64,
    writer: Option<tokio::task::AbortHandle>,
}

impl Drop for Leave {
    fn drop(&mut self) {
        self.broadcast.remove(self.id, self.generation);
        if let Some(w) = &self.writer {
            w.abort();
        }
    }
}

/// Serves one learner connection through discovery, sync and broadcast.
async fn serve_learner(stream: TcpStream, leading: Arc<Leading>) -> Result<(), String> {
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let init = leading.init_limit();
    let Up::FollowerInfo {
        id,
        accepted_epoch,
        observer,
        last_zxid: _,
    } = read_up(&mut rd, init).await?
    else {
        return Err("expected FOLLOWERINFO".into());
    };
    // A server the membership lists, or one a reconfiguration removed (which follows as a
    // non-voting learner until it is added again).
    let known =
        leading.ensemble.server(id).is_some() || leading.config.servers.iter().any(|s| s.id == id);
    if id == leading.ensemble.my_id || !known {
        return Err(format!("server {id} is not a learner of this ensemble"));
    }
    let _ = leading.events.send(Event::Discovered {
        id,
        accepted: accepted_epoch,
    });
    let mut epoch = leading.epoch.clone();
    let epoch = match tokio::time::timeout(init, epoch.wait_for(Option::is_some)).await {
        Ok(Ok(e)) => e.expect("waited for it"),
        _ => return Err("no epoch decided within initLimit".into()),
    };
    write_all(&mut wr, &frame(&Down::LeaderInfo { epoch }), init).await?;
    let Up::AckEpoch {
        current_epoch,
        last_zxid,
    } = read_up(&mut rd, init).await?
    else {
        return Err(format!("server {id}: expected ACKEPOCH"));
    };
    let _ = leading.events.send(Event::EpochAcked {
        id,
        current: current_epoch,
        last: last_zxid,
    });
    let mut core = leading.core.clone();
    let core = match tokio::time::timeout(init, core.wait_for(Option::is_some)).await {
        Ok(Ok(c)) => c.clone().expect("waited for it"),
        _ => return Err("the leader did not start within initLimit".into()),
    };

    // Cut this learner into the broadcast where the log stands now.
    let generation = leading.generations.fetch_add(1, Ordering::Relaxed);
    let (link, mut outgoing) = mpsc::unbounded_channel::<Bytes>();
    let mut leave = Leave {
        broadcast: leading.broadcast.clone(),
        id,
        generation,
        writer: None,
    };
    let (cut_tx, cut_rx) = oneshot::channel();
    let broadcast = leading.broadcast.clone();
    let dir = leading.config.data_dir.clone();
    let member_link = link.clone();
    let at_cut = Box::new(move |last: i64| {
        let committed = broadcast.register(id, observer, member_link, generation);
        let _ = cut_tx.send((last, committed, History::open(&dir)));
    });
    core.send(CoreMsg::AtCut(at_cut))
        .map_err(|_| "the core stopped")?;
    let (last, committed, history) = tokio::time::timeout(init, cut_rx)
        .await
        .map_err(|_| "no cut of the log within initLimit")?
        .map_err(|_| "the core stopped")?;
    let history = history.map_err(|e| format!("cannot open the history: {e}"))?;
    let plan = tokio::task::spawn_blocking(move || plan_sync(&history, last_zxid, last))
        .await
        .map_err(|e| e.to_string())??;
    tracing::info!(
        "syncing server {id} (at {last_zxid:#x}) by {:?} with {} transactions up to {last:#x}",
        plan.kind,
        plan.txns.len()
    );

    // The sync stream, then NEWLEADER.
    let mut buf = Vec::new();
    Down::Sync {
        kind: plan.kind,
        committed,
    }
    .encode(&mut buf);
    for chunk in plan.snapshot.chunks(1 << 20) {
        Down::SnapChunk(chunk.to_vec()).encode(&mut buf);
        write_all(&mut wr, &buf, init).await?;
        buf.clear();
    }
    for txn in plan.txns {
        Down::Txn(txn).encode(&mut buf);
        if buf.len() >= 1 << 20 {
            write_all(&mut wr, &buf, init).await?;
            buf.clear();
        }
    }
    Down::NewLeader { epoch, zxid: last }.encode(&mut buf);
    let newleader_sent = leading.broadcast.status.now_ms();
    write_all(&mut wr, &buf, init).await?;

    // From here on the writer sends what the broadcast queues, and pings.
    let sync_limit = leading.sync_limit();
    let ping_every = leading.config.tick() / 2;
    let status = leading.broadcast.status.clone();
    let writer = tokio::spawn(async move {
        let mut pings = tokio::time::interval(ping_every);
        loop {
            let bytes = tokio::select! {
                msg = outgoing.recv() => match msg {
                    Some(b) => b,
                    None => return,
                },
                _ = pings.tick() => frame(&Down::Ping { at: status.now_ms() }),
            };
            if write_all(&mut wr, &bytes, sync_limit).await.is_err() {
                return;
            }
        }
    });
    leave.writer = Some(writer.abort_handle());

    let Up::AckNewLeader { zxid } = read_up(&mut rd, init).await? else {
        return Err(format!(
            "server {id}: expected the NEWLEADER acknowledgement"
        ));
    };
    if zxid != last {
        return Err(format!(
            "server {id} acknowledged NEWLEADER at {zxid:#x}, expected {last:#x}"
        ));
    }
    leading
        .broadcast
        .synced(id, generation, last, newleader_sent);
    tracing::info!("server {id} is synced at {last:#x}");

    let remote = |token: u64, session: i64, auth: Vec<crate::auth::AuthId>| Remote {
        peer: id,
        token,
        session,
        auth: auth.into(),
        link: link.clone(),
    };
    loop {
        let msg = read_up(&mut rd, sync_limit).await?;
        let to_core = match msg {
            Up::Ack { zxid } => {
                leading.broadcast.ack(id, generation, zxid);
                continue;
            }
            Up::Ping { at } => {
                leading.broadcast.pinged(id, generation, at);
                continue;
            }
            Up::Touch { sessions } => CoreMsg::Touch { peer: id, sessions },
            Up::Request {
                token,
                session,
                auth,
                frame,
            } => {
                if frame.len() < 8 {
                    return Err(format!("server {id}: truncated request"));
                }
                let xid = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
                let opcode = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
                let req = Request::decode(opcode, &frame[8..])
                    .map_err(|e| format!("server {id}: request op {opcode}: {e}"))?;
                CoreMsg::Forwarded {
                    from: remote(token, session, auth),
                    xid,
                    req,
                }
            }
            Up::CreateSession {
                token,
                session,
                timeout,
                password,
            } => CoreMsg::CreateSession {
                from: remote(token, session, Vec::new()),
                timeout,
                password,
            },
            Up::Revalidate {
                token,
                session,
                timeout,
                password,
            } => CoreMsg::Revalidate {
                from: remote(token, session, Vec::new()),
                timeout,
                password,
            },
            other => return Err(format!("server {id}: unexpected {other:?}")),
        };
        leading.broadcast.heard(id, generation);
        core.send(to_core).map_err(|_| "the core stopped")?;
    }
}

/// How to bring one learner in line.
#[derive(Debug)]
struct Plan {
    kind: SyncKind,
    /// The snapshot file, for SNAP.
    snapshot: Vec<u8>,
    /// The encoded transactions to send after it.
    txns: Vec<Vec<u8>>,
}

/// Plans the sync of a learner whose log ends at `theirs` with this
/// leader's `history` up to `last`: DIFF when its last zxid is in the
/// history, TRUNC to the last zxid both have when it holds transactions
/// this leader never had, SNAP when it is behind the newest snapshot.
fn plan_sync(history: &History, theirs: i64, last: i64) -> Result<Plan, String> {
    let base = history.base();
    let records = history.records(last)?;
    if theirs < base {
        let snapshot = history
            .snapshot_bytes()
            .map_err(|e| format!("cannot read the snapshot: {e}"))?;
        return Ok(Plan {
            kind: SyncKind::Snap,
            snapshot,
            txns: records.into_iter().map(|r| r.1).collect(),
        });
    }
    let known = theirs == base || records.iter().any(|r| r.0 == theirs);
    let (kind, from) = if known {
        (SyncKind::Diff, theirs)
    } else {
        let common = records
            .iter()
            .map(|r| r.0)
            .filter(|z| *z < theirs)
            .max()
            .unwrap_or(base);
        if failpoint::active(Failpoint::SkipTrunc) {
            // The bug: the learner keeps what this leader never had.
            (SyncKind::Diff, theirs)
        } else {
            (SyncKind::Trunc(common), common)
        }
    };
    Ok(Plan {
        kind,
        snapshot: Vec::new(),
        txns: records
            .into_iter()
            .filter(|r| r.0 > from)
            .map(|r| r.1)
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::recover;
    use crate::proto::Acl;
    use crate::txn::TxnBody;

    fn create(zxid: i64) -> Txn {
        Txn {
            zxid,
            time: 1,
            session: 0,
            body: TxnBody::Create {
                path: format!("/n{zxid:x}"),
                data: vec![],
                acl: vec![Acl::open()],
                ephemeral_owner: 0,
            },
        }
    }

    /// A data dir holding `zxids`, with a snapshot after `snap_at` if given.
    fn history(name: &str, zxids: &[i64], snap_at: Option<i64>) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("keeperd-plan-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let r = recover(&dir).unwrap();
        let mut log = FileLog::new(dir.clone(), r.segment, 0, Box::new(|_| {}));
        let mut tree = r.tree;
        for z in zxids {
            let t = create(*z);
            tree.apply(&t, &mut Vec::new());
            log.append(&t);
            if Some(*z) == snap_at {
                log.snapshot(tree.capture());
            }
        }
        log.flush();
        drop(log);
        dir
    }

    const E1: i64 = 1 << 32;
    const E2: i64 = 2 << 32;

    /// A broadcast led by server 1 over voters 1-3 with learners 2-5 synced at 0.
    fn broadcast() -> Broadcast {
        let status = Arc::new(Status::default());
        let b = Broadcast::new(1, vec![vec![1, 2, 3]], 0, status, Duration::from_secs(5));
        let (link, _) = mpsc::unbounded_channel();
        for id in 2..=5 {
            b.register(id, id > 3, link.clone(), id);
            b.synced(id, id, 0, 0);
        }
        b
    }

    fn committed(b: &Broadcast) -> i64 {
        b.lock().committed
    }

    #[test]
    fn a_commit_is_counted_afresh_against_each_voter_set() {
        let b = broadcast();
        b.durable(E1 + 2);
        b.ack(2, 2, E1 + 2);
        assert_eq!(committed(&b), E1 + 2, "servers 1 and 2 of 1-3");
        let mut t = b.lock();
        t.durable = E1 + 5;
        // A failpoint that commits without a quorum is let through; nothing else is.
        check_commit(&t, E1 + 5, true);
        let beyond = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check_commit(&t, E1 + 5, false)
        }));
        let said = beyond.unwrap_err().downcast::<String>().unwrap();
        assert!(
            said.starts_with(
                "invariant violated: a leader commits only what a quorum acknowledged: \
                 commit point 0x100000005 held by 1 of voters [1, 2, 3]"
            ),
            "{said}"
        );
        let undurable = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check_commit(&t, E1 + 6, true)
        }));
        let said = undurable.unwrap_err().downcast::<String>().unwrap();
        assert!(
            said.starts_with("invariant violated: a leader commits only what it has durable"),
            "{said}"
        );
    }

    #[test]
    fn a_reconfiguration_commits_only_once_the_old_and_the_new_voters_have_it() {
        let b = broadcast();
        let z = E1 + 1;
        b.reconfig(z, vec![1, 4, 5]);
        b.durable(z);
        b.ack(2, 2, z);
        b.ack(3, 3, z);
        assert!(committed(&b) < z, "the old voters alone do not commit it");
        b.ack(4, 4, z);
        assert_eq!(committed(&b), z, "a quorum of both");
        assert_eq!(b.lock().voters, [vec![1, 4, 5]]);
        assert!(!b.removed());
        // From here on the new voters count, and only they.
        b.durable(z + 1);
        b.ack(2, 2, z + 1);
        b.ack(3, 3, z + 1);
        assert_eq!(committed(&b), z);
        b.ack(5, 5, z + 1);
        assert_eq!(committed(&b), z + 1);
    }

    #[test]
    fn writes_after_a_pending_reconfiguration_wait_for_it_and_a_removed_leader_steps_down() {
        let b = broadcast();
        let z = E1 + 1;
        b.durable(z);
        b.ack(2, 2, z);
        assert_eq!(
            committed(&b),
            z,
            "before any reconfiguration: the old quorum"
        );
        b.reconfig(z + 1, vec![2, 3]);
        b.durable(z + 2);
        b.ack(2, 2, z + 2);
        assert_eq!(
            committed(&b),
            z,
            "voter 3 of the new membership has not acknowledged"
        );
        b.ack(3, 3, z + 2);
        assert_eq!(committed(&b), z + 2);
        assert!(b.removed(), "the leader is not a voter any more");
    }

    #[test]
    fn a_leader_with_an_uncommitted_reconfiguration_needs_both_memberships() {
        let status = Arc::new(Status::default());
        let voters = vec![vec![1, 2, 3], vec![1, 2, 3, 4, 5]];
        let b = Broadcast::new(1, voters.clone(), E1, status, Duration::from_secs(5));
        let (link, _) = mpsc::unbounded_channel();
        b.register(2, false, link.clone(), 2);
        b.synced(2, 2, E1, 0);
        assert!(
            !*b.established.borrow(),
            "two of five is no quorum of the old membership"
        );
        b.register(3, false, link, 3);
        b.synced(3, 3, E1, 0);
        assert!(*b.established.borrow());
        assert_eq!(
            b.lock().voters,
            [vec![1, 2, 3]],
            "the old one counts no more"
        );
        assert!(quorum_of_each(&voters, |id| id <= 3));
        assert!(!quorum_of_each(&voters, |id| id == 1 || id >= 4));
    }

    #[test]
    fn diff_trunc_and_snap_are_chosen_by_the_learners_last_zxid() {
        let zx = [E1 + 1, E1 + 2, E1 + 3, E2 + 1, E2 + 2];
        let dir = history("plan", &zx, None);
        let h = History::open(&dir).unwrap();
        let last = E2 + 2;
        let p = plan_sync(&h, E1 + 2, last).unwrap();
        assert_eq!(p.kind, SyncKind::Diff);
        assert_eq!(p.txns.len(), 3);
        let p = plan_sync(&h, last, last).unwrap();
        assert_eq!((p.kind, p.txns.len()), (SyncKind::Diff, 0));
        let p = plan_sync(&h, 0, last).unwrap();
        assert_eq!((p.kind, p.txns.len()), (SyncKind::Diff, 5));
        // The learner logged (1, 4) and (1, 5), which this leader never had.
        let p = plan_sync(&h, E1 + 5, last).unwrap();
        assert_eq!(p.kind, SyncKind::Trunc(E1 + 3));
        assert_eq!(p.txns.len(), 2);
        // Ahead within this leader's own epoch: cut back to the leader's end.
        let p = plan_sync(&h, E2 + 7, last).unwrap();
        assert_eq!((p.kind, p.txns.len()), (SyncKind::Trunc(E2 + 2), 0));
        std::fs::remove_dir_all(&dir).unwrap();

        let dir = history("plan-snap", &zx, Some(E1 + 3));
        // Wait for the background snapshot.
        let start = Instant::now();
        while History::open(&dir).unwrap().base() != E1 + 3 {
            assert!(start.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(10));
        }
        let h = History::open(&dir).unwrap();
        let p = plan_sync(&h, E1 + 1, last).unwrap();
        assert_eq!(p.kind, SyncKind::Snap);
        assert!(p.snapshot.starts_with(b"KPSN"));
        assert_eq!(p.txns.len(), 2);
        let p = plan_sync(&h, E1 + 3, last).unwrap();
        assert_eq!((p.kind, p.txns.len()), (SyncKind::Diff, 2));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
