//! The server core: one thread that owns the data tree, sessions, watches
//! and connections' protocol state, and runs the request pipeline in order:
//! reads are answered from the tree; writes are checked and resolved into
//! transactions (processor), appended to the [`Log`], applied to the tree,
//! and their watch events and replies are held until the log reports the
//! transaction durable. Events are queued before the reply of the write that
//! caused them, so every client sees an event before any response reflecting
//! the change.
//!
//! The tree lives in [`Shared`], behind a lock the core holds while it
//! handles a batch of messages; between batches (while the log syncs, say)
//! connection tasks read it to answer plain reads themselves once everything
//! applied is visible ([`crate::read::fast_reply`]). Output goes into the
//! connections' outboxes; after each batch the core hands them on without
//! writing to sockets itself (that would hold up the next sync): to the
//! connections' own tasks when few have output, since the task that writes
//! a reply is then awake to read that client's next request, or, when many
//! have, to one writer thread, as one send each costs less than waking as
//! many tasks.
//!
//! In an ensemble ([`Role`]) the pipeline is the same on the leader, whose
//! [`Log`] counts a transaction committed once a quorum has it durable, and
//! who also handles the requests its learners forward ([`ensemble`]). A
//! learner answers reads itself, forwards writes and `sync` to the leader,
//! logs the leader's proposals and applies them when committed, and
//! releases the leader's answer to a forwarded request once it has applied
//! the zxid the answer reflects.

mod ensemble;
mod reconfig;

use crate::auth::{digest_id, AuthId};
use crate::config::Config;
use crate::conn::Connection;
use crate::failpoint::{self, Failpoint};
use crate::jute::Writer;
use crate::log::{Log, Recovered};
use crate::processor::{self, Caller};
use crate::proto::{
    self, err, event, op, perms, Acl, ConnectRequest, MultiOp, ReadOp, Request, SetWatches,
};
use crate::quorum::{LearnerLink, Status, Upstream};
use crate::read;
use crate::stats::{ServerStats, Traffic};
use crate::tree::{owner_kind, Change, DataTree, OwnerKind};
use crate::txn::{Txn, TxnBody};
use crate::watch::{remove_mask, ConnId, WatchManager};
use bytes::Bytes;
use rand::RngCore;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::oneshot;

/// Above this many connections with output after a batch, the writer
/// thread sends it (see the module docs); measured: tasks do better with 10
/// sessions, the writer with 100.
const FEW_CONNECTIONS: usize = 32;

/// What the core sends a connection.
#[derive(Debug)]
pub enum Out {
    /// The one reply to a message the connection forwarded.
    Reply(Vec<u8>),
    /// A watch notification.
    Event(Vec<u8>),
    /// Flush and close the connection.
    Close,
}

/// What the core shares with the connection tasks.
pub struct Shared {
    tree: RwLock<DataTree>,
    visible_zxid: AtomicI64,
    /// A leader's figures and lease.
    leader: Option<Arc<Status>>,
    /// Packets and latency, counted by the core and the connections.
    pub traffic: Traffic,
}

impl Shared {
    /// The tree, for reading; blocks while the core handles a batch.
    pub fn tree(&self) -> RwLockReadGuard<'_, DataTree> {
        self.tree.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The highest zxid whose transaction is durable and whose replies and
    /// events are in the outboxes.
    pub fn visible_zxid(&self) -> i64 {
        self.visible_zxid.load(Ordering::Acquire)
    }

    /// Whether clients may be answered: always, except by a leader whose
    /// lease ran out (another leader may exist by now).
    pub fn may_answer(&self) -> bool {
        self.leader.as_ref().is_none_or(|s| s.lease_valid())
    }
}

/// This server's part in an ensemble.
pub enum Role {
    /// A single server.
    Standalone,
    /// Leads an ensemble as server `id`; `status` holds the leader's figures for `mntr`.
    Leader { id: u64, status: Arc<Status> },
    /// Follows (or, `observer`, observes) a leader, sending it `upstream`.
    Learner {
        id: u64,
        observer: bool,
        upstream: Upstream,
    },
}

impl Role {
    /// The server id (0 standalone).
    pub fn id(&self) -> u64 {
        match self {
            Role::Standalone => 0,
            Role::Leader { id, .. } | Role::Learner { id, .. } => *id,
        }
    }

    /// The mode `srvr` reports.
    pub fn mode(&self) -> &'static str {
        match self {
            Role::Standalone => "standalone",
            Role::Leader { .. } => "leader",
            Role::Learner {
                observer: false, ..
            } => "follower",
            Role::Learner { observer: true, .. } => "observer",
        }
    }
}

/// A client request that came through a learner, and where its answer goes.
pub struct Remote {
    /// The learner's server id.
    pub peer: u64,
    /// What the learner matches the answer with.
    pub token: u64,
    /// The session the request belongs to.
    pub session: i64,
    /// The identities the client's connection proved.
    pub auth: Arc<[AuthId]>,
    /// The learner's outgoing messages.
    pub link: LearnerLink,
}

/// The leader's answer to what a learner forwarded.
#[derive(Debug)]
pub enum Answer {
    /// A reply frame for the client.
    Reply(Vec<u8>),
    /// Whether a created or resumed session is valid.
    Session(bool),
}

/// Work run by the core at a cut of the log, given its last zxid.
pub type AtCut = Box<dyn FnOnce(i64) + Send>;

/// Messages into the core.
pub enum CoreMsg {
    /// A connection was accepted.
    Open {
        conn: ConnId,
        addr: SocketAddr,
        link: Arc<Connection>,
    },
    /// Its connect handshake arrived.
    Connect { conn: ConnId, req: ConnectRequest },
    /// A request arrived (`frame`: its bytes, for a learner to forward).
    Request {
        conn: ConnId,
        xid: i32,
        req: Request,
        frame: Bytes,
        at: Instant,
    },
    /// The connection is gone.
    Closed { conn: ConnId },
    /// The log made every zxid up to this one durable.
    Durable(i64),
    /// A four-letter word to answer.
    Command {
        word: String,
        reply: oneshot::Sender<String>,
    },
    /// Start serving: the ensemble's epoch is established (or the learner is up to date).
    Serve,
    /// Close every connection and stop.
    Shutdown,
    /// Leader: flush the log and run this with the last zxid (nothing is
    /// appended meanwhile), e.g. to add a learner to the broadcast.
    AtCut(AtCut),
    /// Leader: a request a learner forwarded (a write, sync or closeSession).
    Forwarded {
        from: Remote,
        xid: i32,
        req: Request,
    },
    /// Leader: a session a learner opened.
    CreateSession {
        from: Remote,
        timeout: i32,
        password: Vec<u8>,
    },
    /// Leader: a learner's client resumes a session there.
    Revalidate {
        from: Remote,
        timeout: i32,
        password: Vec<u8>,
    },
    /// Leader: sessions a learner's clients are alive in, with ms since each was heard.
    Touch {
        peer: u64,
        sessions: Vec<(i64, u32)>,
    },
    /// Learner: a proposal to log.
    Proposal(Txn),
    /// Learner: every proposal up to this zxid is committed.
    Commit(i64),
    /// Learner: the leader's answer to what connection `conn` forwarded,
    /// to release once `zxid` is applied.
    Answer {
        conn: ConnId,
        zxid: i64,
        answer: Answer,
    },
}

/// What a learner's connection is waiting for from the leader.
enum Forwarded {
    /// The answer to a request (`close`: it was closeSession).
    Request { close: bool, at: Instant },
    /// The leader's word on a new or resumed session.
    Connect {
        session: i64,
        timeout: i32,
        password: Vec<u8>,
    },
}

/// A request a learner's connection made while another waited for the leader.
struct Queued {
    xid: i32,
    req: Request,
    frame: Bytes,
    at: Instant,
}

/// Where a reply goes: a connection of this server, or a learner's client.
#[derive(Clone, Copy)]
enum To<'a> {
    Local(ConnId),
    Remote(&'a Remote),
}

struct Conn {
    link: Arc<Connection>,
    addr: SocketAddr,
    established: SystemTime,
    /// Learner: the request (or handshake) the leader has yet to answer.
    forwarded: Option<Forwarded>,
    /// Learner: requests waiting behind it, in order.
    queue: VecDeque<Queued>,
}

struct Live {
    timeout: i32,
    deadline: Instant,
    conn: Option<ConnId>,
    /// The server the client is connected to (0 standalone).
    owner: u64,
}

/// The core's state; see the module docs.
pub struct Core {
    config: Arc<Config>,
    shared: Arc<Shared>,
    /// The tree while a batch is handled (see [`Core::checked_out`]); an
    /// empty stand-in between batches, when the tree is in `shared`.
    tree: DataTree,
    watches: WatchManager,
    log: Box<dyn Log>,
    role: Role,
    /// Transactions up to here are committed (standalone: durable); output
    /// about later ones is held.
    committed_zxid: i64,
    /// The epoch's first zxid; new transactions count up from it.
    epoch_start: i64,
    /// Periodic work (expiry, reaping, touches) runs once serving.
    serving: bool,
    stopping: bool,
    /// Messages received while waiting for a commit, handled next.
    deferred: VecDeque<CoreMsg>,
    /// Learner: proposals logged, waiting for their commit.
    proposals: VecDeque<Txn>,
    /// Learner: the leader's answers waiting for their zxid to be applied.
    answers: BTreeMap<i64, Vec<(ConnId, Answer)>>,
    held: VecDeque<(i64, ConnId, Out)>,
    /// Connections with output staged since the last hand-off.
    staged: Vec<Arc<Connection>>,
    /// The writer thread's queue.
    writer: mpsc::Sender<Vec<Arc<Connection>>>,
    conns: HashMap<ConnId, Conn>,
    live: HashMap<i64, Live>,
    next_session: i64,
    since_snapshot: u64,
    stats: ServerStats,
    started: Instant,
    last_reap: Instant,
}

/// Starts the thread that writes outboxes for the core.
fn spawn_writer() -> mpsc::Sender<Vec<Arc<Connection>>> {
    let (tx, rx) = mpsc::channel::<Vec<Arc<Connection>>>();
    let spawned = std::thread::Builder::new()
        .name("keeperd-writer".into())
        .spawn(move || {
            for links in rx {
                for link in links {
                    link.outbox.flush();
                }
            }
        });
    if let Err(e) = spawned {
        // The core then hands everything to the connection tasks.
        tracing::warn!("no writer thread: {e}");
    }
    tx
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn op_name(opcode: i32) -> &'static str {
    match opcode {
        op::PING => "PING",
        op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => "CREA",
        op::DELETE => "DELE",
        op::EXISTS => "EXIS",
        op::GET_DATA => "GETD",
        op::SET_DATA => "SETD",
        op::GET_CHILDREN | op::GET_CHILDREN2 => "GETC",
        op::MULTI => "MULT",
        op::SYNC => "SYNC",
        op::CLOSE_SESSION => "CLOS",
        _ => "OTHR",
    }
}

/// Where a core starts: how much of its tree is committed, the epoch its
/// new transactions belong to, and whether it serves clients yet.
pub struct Start {
    /// Transactions up to this zxid are committed.
    pub committed: i64,
    /// The epoch of new transactions (0 standalone).
    pub epoch: u64,
    /// Serve at once (standalone), or after [`CoreMsg::Serve`].
    pub serving: bool,
}

impl Start {
    /// A standalone server over a recovered tree, all of it durable.
    pub fn standalone(tree: &DataTree) -> Start {
        Start {
            committed: tree.last_zxid,
            epoch: 0,
            serving: true,
        }
    }
}

impl Core {
    /// A core over a recovered tree whose transactions are all durable.
    pub fn new(
        config: Arc<Config>,
        tree: DataTree,
        log: Box<dyn Log>,
        role: Role,
        start: Start,
    ) -> Core {
        let now = Instant::now();
        let my_id = role.id();
        // A learner keeps no session table: the leader tracks expiry.
        let live = match role {
            Role::Learner { .. } => HashMap::new(),
            _ => tree
                .sessions
                .iter()
                .map(|(id, s)| {
                    (
                        *id,
                        Live {
                            timeout: s.timeout,
                            deadline: now + Duration::from_millis(s.timeout as u64),
                            conn: None,
                            owner: 0,
                        },
                    )
                })
                .collect(),
        };
        // Session ids carry the server id in their top byte, as in ZooKeeper.
        let base = ((((now_ms() as u64) << 24) >> 8) | (my_id << 56)) as i64;
        let next_session = tree
            .sessions
            .keys()
            .filter(|k| (**k as u64) >> 56 == my_id)
            .max()
            .map_or(base, |m| base.max(m + 1));
        let committed_zxid = start.committed.min(tree.last_zxid);
        Core {
            config,
            shared: Arc::new(Shared {
                tree: RwLock::new(tree),
                visible_zxid: AtomicI64::new(committed_zxid),
                leader: match &role {
                    Role::Leader { status, .. } => Some(status.clone()),
                    _ => None,
                },
                traffic: Traffic::default(),
            }),
            committed_zxid,
            epoch_start: crate::quorum::epochs::epoch_start(start.epoch),
            serving: start.serving,
            stopping: false,
            deferred: VecDeque::new(),
            proposals: VecDeque::new(),
            answers: BTreeMap::new(),
            role,
            tree: DataTree::default(),
            watches: WatchManager::default(),
            log,
            held: VecDeque::new(),
            staged: Vec::new(),
            writer: spawn_writer(),
            conns: HashMap::new(),
            live,
            next_session,
            since_snapshot: 0,
            stats: ServerStats::default(),
            started: now,
            last_reap: now,
        }
    }

    /// What the connection tasks share with the core.
    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Runs the core on a thread of its own, serving `rx`. A panic ends the
    /// process: a server must not accept clients it never answers.
    pub fn spawn(
        self,
        rx: Receiver<CoreMsg>,
    ) -> Result<std::thread::JoinHandle<Option<Recovered>>, String> {
        std::thread::Builder::new()
            .name("keeperd-core".into())
            .spawn(move || {
                let run = std::panic::AssertUnwindSafe(|| self.run(rx));
                std::panic::catch_unwind(run).unwrap_or_else(|_| {
                    eprintln!("keeperd: fatal: the core thread panicked");
                    std::process::exit(70);
                })
            })
            .map_err(|e| format!("cannot start core thread: {e}"))
    }

    /// The next message: one deferred earlier, else one from `rx` within `wait`.
    fn next_message(
        &mut self,
        rx: &Receiver<CoreMsg>,
        wait: Duration,
    ) -> Result<Option<CoreMsg>, RecvTimeoutError> {
        if let Some(msg) = self.deferred.pop_front() {
            return Ok(Some(msg));
        }
        match rx.recv_timeout(wait) {
            Ok(msg) => Ok(Some(msg)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Serves messages until every sender is gone or it is told to stop.
    pub fn run(mut self, rx: Receiver<CoreMsg>) -> Option<Recovered> {
        let tick = Duration::from_millis((self.config.tick_time as u64 / 2).clamp(10, 500));
        let mut last_expiry = Instant::now();
        while !self.stopping {
            let Ok(first) = self.next_message(&rx, tick) else {
                break;
            };
            // Periodic work takes the tree (blocking the connections'
            // reads) only when a session is due to expire or reaping is due.
            let (mut expire, mut reap) = (false, false);
            if last_expiry.elapsed() >= tick && self.serving {
                last_expiry = Instant::now();
                match &self.role {
                    Role::Learner { .. } => self.send_touches(),
                    _ => {
                        expire = !self.expired_sessions().is_empty();
                        reap = self.last_reap.elapsed()
                            >= Duration::from_millis(self.config.container_check_interval_ms);
                    }
                }
            }
            if first.is_some() || expire || reap {
                self.checked_out(|core| {
                    if let Some(msg) = first {
                        core.handle(msg);
                        let more = std::iter::from_fn(|| core.deferred.pop_front())
                            .chain(rx.try_iter())
                            .take(4096)
                            .collect::<Vec<_>>();
                        for msg in more {
                            core.handle(msg);
                        }
                    }
                    if expire {
                        // Checked again: the batch may have revived or closed some.
                        core.expire_sessions();
                    }
                    if reap {
                        core.last_reap = Instant::now();
                        core.reap();
                    }
                });
            }
            self.hand_off_output();
            self.log.flush();
            if self.since_snapshot >= self.config.snap_count && self.log.can_snapshot() {
                self.snapshot(&rx, tick);
            }
        }
        self.close_connections();
        self.hand_off_output();
        self.retire()
    }

    /// Closes every client connection of this ending core: its clients reconnect, to the
    /// next role of this member or to another, and set their watches again there. A
    /// connection left open would go on answering reads from this core's tree, which no
    /// longer changes, and its watches would never fire.
    fn close_connections(&mut self) {
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        for conn in conns {
            self.deliver(conn, Out::Close);
        }
    }

    /// What this stopped core leaves to the next role of an ensemble member:
    /// its tree with the logged proposals that were never committed applied
    /// and its log's open segment, with everything appended synced: the state
    /// recovering the data directory would give, without reading it again.
    /// `None` when the log cannot vouch for that.
    fn retire(self) -> Option<Recovered> {
        let mut tree = self.shared.tree().fork();
        let mut changes = Vec::new();
        for txn in &self.proposals {
            if !crate::log::follows(tree.last_zxid, txn.zxid) {
                return None;
            }
            changes.clear();
            tree.apply(txn, &mut changes);
        }
        let segment = self.log.retire()?;
        Some(Recovered {
            tree,
            segment,
            replayed: 0,
            torn_tail: None,
        })
    }

    /// Stores a snapshot once everything applied is committed: a snapshot
    /// holds committed transactions only, so a later TRUNC never has to cut
    /// into one. A leader holds new work back for a moment until its writes
    /// in flight commit.
    fn snapshot(&mut self, rx: &Receiver<CoreMsg>, wait: Duration) {
        let shared = self.shared.clone();
        let last = move || shared.tree().last_zxid;
        let deadline = Instant::now() + wait;
        while self.committed_zxid < last() && matches!(self.role, Role::Leader { .. }) {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(CoreMsg::Durable(z)) => {
                    self.checked_out(|core| core.handle(CoreMsg::Durable(z)));
                    self.hand_off_output();
                }
                Ok(other) => self.deferred.push_back(other),
                Err(_) => break,
            }
        }
        if self.committed_zxid < last() {
            return;
        }
        self.since_snapshot = 0;
        let started = Instant::now();
        let capture = self.shared.tree().capture();
        tracing::info!(
            "snapshot {:#x}: tree captured in {:?}",
            capture.last_zxid,
            started.elapsed()
        );
        self.log.snapshot(capture);
    }

    /// Passes the staged output on (see the module docs).
    fn hand_off_output(&mut self) {
        if self.staged.len() <= FEW_CONNECTIONS {
            for link in self.staged.drain(..) {
                link.outbox.hand_over();
            }
        } else if let Err(mpsc::SendError(links)) =
            self.writer.send(std::mem::take(&mut self.staged))
        {
            for link in links {
                link.outbox.hand_over();
            }
        }
    }

    /// Runs `f` with the tree moved from [`Shared`] into `self.tree`, holding
    /// the write lock throughout: connection tasks never see a half-handled
    /// batch, and the core works on the tree without locking each access.
    fn checked_out(&mut self, f: impl FnOnce(&mut Core)) {
        let shared = self.shared.clone();
        let mut guard = shared.tree.write().unwrap_or_else(PoisonError::into_inner);
        std::mem::swap(&mut *guard, &mut self.tree);
        f(self);
        std::mem::swap(&mut *guard, &mut self.tree);
    }

    fn handle(&mut self, msg: CoreMsg) {
        match msg {
            CoreMsg::Open { conn, addr, link } => {
                let c = Conn {
                    link,
                    addr,
                    established: SystemTime::now(),
                    forwarded: None,
                    queue: VecDeque::new(),
                };
                self.conns.insert(conn, c);
            }
            CoreMsg::Connect { conn, req } => match self.role {
                Role::Learner { .. } => self.learner_connect(conn, req),
                _ => self.connect(conn, req),
            },
            CoreMsg::Request {
                conn,
                xid,
                req,
                frame,
                at,
            } => match self.role {
                Role::Learner { .. } => self.learner_request(conn, xid, req, frame, at),
                _ => self.request(conn, xid, req, at),
            },
            CoreMsg::Closed { conn } => {
                self.watches.drop_conn(conn);
                if let Some(c) = self.conns.remove(&conn) {
                    if let Some(l) = self.live.get_mut(&c.link.session()) {
                        if l.conn == Some(conn) {
                            l.conn = None;
                            let heard = c.link.last_heard() + lifetime(l.timeout);
                            l.deadline = l.deadline.max(heard);
                        }
                    }
                }
            }
            CoreMsg::Durable(zxid) => self.committed(zxid),
            CoreMsg::Command { word, reply } => {
                let _ = reply.send(crate::fourlw::answer(self, &word));
            }
            CoreMsg::Serve => {
                self.serving = true;
                // Sessions count from now: nobody could touch them before.
                let now = Instant::now();
                for l in self.live.values_mut() {
                    l.deadline = l.deadline.max(now + lifetime(l.timeout));
                }
            }
            CoreMsg::Shutdown => self.stopping = true,
            CoreMsg::AtCut(work) => {
                self.log.flush();
                work(self.tree.last_zxid);
            }
            CoreMsg::Forwarded { from, xid, req } => self.forwarded(from, xid, req),
            CoreMsg::CreateSession {
                from,
                timeout,
                password,
            } => self.remote_session(from, timeout, password),
            CoreMsg::Revalidate {
                from,
                timeout,
                password,
            } => self.revalidate(from, timeout, password),
            CoreMsg::Touch { peer, sessions } => self.touch(peer, &sessions),
            CoreMsg::Proposal(txn) => {
                self.log.append(&txn);
                self.proposals.push_back(txn);
            }
            CoreMsg::Commit(zxid) => self.apply_committed(zxid),
            CoreMsg::Answer { conn, zxid, answer } => self.answer(conn, zxid, answer),
        }
    }

    /// Everything up to `zxid` is committed: releases the output held for it.
    fn committed(&mut self, zxid: i64) {
        self.committed_zxid = self.committed_zxid.max(zxid);
        while self
            .held
            .front()
            .is_some_and(|h| h.0 <= self.committed_zxid)
        {
            let (_, conn, out) = self.held.pop_front().unwrap();
            self.deliver(conn, out);
        }
        self.shared
            .visible_zxid
            .store(self.committed_zxid, Ordering::Release);
        self.reconfig_committed();
    }

    /// Queues output for a connection; held while any applied txn is not yet committed.
    fn send(&mut self, conn: ConnId, out: Out) {
        if self.held.is_empty() && self.tree.last_zxid <= self.committed_zxid {
            self.deliver(conn, out);
        } else {
            self.held.push_back((self.tree.last_zxid, conn, out));
        }
    }

    /// Stages output in the connection's outbox; handed on after the batch.
    fn deliver(&mut self, conn: ConnId, out: Out) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let link = &c.link;
        match out {
            Out::Reply(frame) => {
                link.outbox.stage(&frame);
                link.answered();
            }
            Out::Event(frame) => link.outbox.stage(&frame),
            Out::Close => {
                link.outbox.close();
                return;
            }
        }
        self.shared
            .traffic
            .packets_sent
            .fetch_add(1, Ordering::Relaxed);
        if !self.staged.last().is_some_and(|l| Arc::ptr_eq(l, link)) {
            self.staged.push(link.clone());
        }
    }

    fn reply(&mut self, conn: ConnId, xid: i32, err: i32, body: impl FnOnce(&mut Writer)) {
        let frame = proto::reply_frame(xid, self.tree.last_zxid, err, body);
        self.send(conn, Out::Reply(frame));
    }

    /// Replies with a body that may fail (see [`proto::reply_frame_with`]); returns the code.
    fn reply_with(
        &mut self,
        conn: ConnId,
        xid: i32,
        body: impl FnOnce(&DataTree, &mut Writer) -> Result<(), i32>,
    ) -> i32 {
        let tree = &self.tree;
        let (frame, code) = proto::reply_frame_with(xid, tree.last_zxid, |w| body(tree, w));
        self.send(conn, Out::Reply(frame));
        code
    }

    fn connect(&mut self, conn: ConnId, req: ConnectRequest) {
        if req.last_zxid_seen > self.tree.last_zxid {
            tracing::warn!(
                "refusing client that has seen zxid {:#x}, ahead of ours {:#x}",
                req.last_zxid_seen,
                self.tree.last_zxid
            );
            self.send(conn, Out::Close);
            return;
        }
        let timeout = self.config.negotiate_timeout(req.timeout);
        if req.session_id == 0 {
            let id = self.next_session;
            self.next_session += 1;
            let mut password = vec![0u8; 16];
            rand::thread_rng().fill_bytes(&mut password);
            self.commit(
                id,
                TxnBody::CreateSession {
                    timeout,
                    password: password.clone(),
                },
            );
            self.live.insert(
                id,
                Live {
                    timeout,
                    deadline: Instant::now() + lifetime(timeout),
                    conn: Some(conn),
                    owner: self.role.id(),
                },
            );
            self.attach(conn, id, timeout, &password);
            return;
        }
        let valid = self
            .tree
            .sessions
            .get(&req.session_id)
            .is_some_and(|s| s.password == req.password)
            && self.live.contains_key(&req.session_id);
        if !valid {
            self.send(conn, Out::Reply(proto::connect_frame(0, 0, &[0; 16])));
            self.send(conn, Out::Close);
            return;
        }
        let l = self.live.get_mut(&req.session_id).unwrap();
        let old = l.conn.replace(conn);
        l.owner = self.role.id();
        l.timeout = timeout;
        l.deadline = Instant::now() + lifetime(timeout);
        if let Some(old) = old.filter(|o| *o != conn) {
            if let Some(c) = self.conns.get(&old) {
                c.link.set_session(0);
            }
            self.send(old, Out::Close);
        }
        let password = self.tree.sessions[&req.session_id].password.clone();
        self.attach(conn, req.session_id, timeout, &password);
    }

    fn attach(&mut self, conn: ConnId, session: i64, timeout: i32, password: &[u8]) {
        if let Some(c) = self.conns.get(&conn) {
            c.link.set_session(session);
        }
        self.send(
            conn,
            Out::Reply(proto::connect_frame(timeout, session, password)),
        );
    }

    /// The zxid of the next transaction: the next counter, or the first of a new epoch.
    fn next_zxid(&self) -> i64 {
        (self.tree.last_zxid + 1).max(self.epoch_start + 1)
    }

    /// Appends a transaction, applies it and fires its watches.
    fn commit(&mut self, session: i64, body: TxnBody) -> i64 {
        let txn = Txn {
            zxid: self.next_zxid(),
            time: now_ms(),
            session,
            body,
        };
        let mut changes = Vec::new();
        self.tree.apply(&txn, &mut changes);
        self.log.append(&txn);
        self.since_snapshot += 1;
        self.fire(txn.zxid, &changes);
        txn.zxid
    }

    fn fire(&mut self, zxid: i64, changes: &[Change]) {
        for ch in changes {
            let (conns, kind, path) = match ch {
                Change::Created(p) => (self.watches.node_created(p), event::NODE_CREATED, p),
                Change::Deleted(p) => (self.watches.node_deleted(p), event::NODE_DELETED, p),
                Change::DataChanged(p) => {
                    (self.watches.node_changed(p), event::NODE_DATA_CHANGED, p)
                }
                Change::ChildrenChanged(p) => (
                    self.watches.children_changed(p),
                    event::NODE_CHILDREN_CHANGED,
                    p,
                ),
            };
            let summary = match kind {
                event::NODE_CREATED => &mut self.stats.node_created_watch,
                event::NODE_DELETED => &mut self.stats.node_deleted_watch,
                event::NODE_DATA_CHANGED => &mut self.stats.node_changed_watch,
                _ => &mut self.stats.node_children_watch,
            };
            summary.record(conns.len() as u64);
            if conns.is_empty() {
                continue;
            }
            let mut conns = conns;
            if kind == event::NODE_DATA_CHANGED && crate::failpoint::drops_watch_event(path, zxid) {
                conns.pop();
            }
            let frame = proto::event_frame(zxid, kind, path);
            for c in conns {
                self.send(c, Out::Event(frame.clone()));
            }
        }
    }

    /// Sessions not heard from within their timeout (renewing the deadlines
    /// of those heard from since).
    fn expired_sessions(&mut self) -> Vec<i64> {
        let now = Instant::now();
        let mut expired = Vec::new();
        for (id, l) in self.live.iter_mut() {
            if l.deadline > now {
                continue;
            }
            // Connections stamp every request; the deadline catches up lazily.
            if let Some(c) = l.conn.and_then(|c| self.conns.get(&c)) {
                let alive_until = c.link.last_heard() + lifetime(l.timeout);
                if alive_until > now {
                    l.deadline = alive_until;
                    continue;
                }
            }
            expired.push(*id);
        }
        expired
    }

    /// Closes the sessions not heard from within their timeout.
    fn expire_sessions(&mut self) {
        for id in self.expired_sessions() {
            tracing::info!("session {id:#x} expired");
            let l = self.live.remove(&id).unwrap();
            self.commit(id, TxnBody::CloseSession);
            if let Some(conn) = l.conn {
                if let Some(c) = self.conns.get(&conn) {
                    c.link.set_session(0);
                }
                self.send(conn, Out::Close);
            }
        }
    }

    /// Deletes empty containers (that once had children) and expired TTL nodes.
    fn reap(&mut self) {
        let now = now_ms();
        let mut doomed: Vec<String> = self
            .tree
            .reapable
            .iter()
            .filter(|p| {
                let Some(n) = self.tree.get(p) else {
                    return false;
                };
                let s = n.stat();
                s.num_children == 0
                    && match owner_kind(s.ephemeral_owner) {
                        OwnerKind::Container => s.cversion > 0,
                        OwnerKind::Ttl(ttl) => now - s.mtime > ttl,
                        _ => false,
                    }
            })
            .cloned()
            .collect();
        doomed.sort();
        for path in doomed {
            self.commit(0, TxnBody::Delete { path });
        }
    }

    fn request(&mut self, conn: ConnId, xid: i32, req: Request, at: Instant) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let session = c.link.session();
        if session == 0 {
            self.send(conn, Out::Close);
            return;
        }
        let auth = c.link.auth();
        let caller = Caller {
            session,
            auth: &auth,
        };
        let Some(req) = self.write(To::Local(conn), xid, session, &auth, req) else {
            return self.answered_at(conn, at);
        };
        match req {
            Request::Ping => self.reply(conn, xid, err::OK, |_| {}),
            Request::CloseSession => {
                self.live.remove(&session);
                self.commit(session, TxnBody::CloseSession);
                self.reply(conn, xid, err::OK, |_| {});
                self.conns[&conn].link.set_session(0);
                self.send(conn, Out::Close);
            }
            Request::Auth { scheme, auth } => {
                let id = (scheme == "digest")
                    .then(|| std::str::from_utf8(&auth).ok().and_then(digest_id))
                    .flatten();
                match id {
                    Some(id) => {
                        if self.config.super_digest.as_deref() == Some(id.as_str()) {
                            self.conns[&conn].link.add_auth(crate::auth::superuser());
                        }
                        self.conns[&conn].link.add_auth(AuthId { scheme, id });
                        self.reply(conn, xid, err::OK, |_| {});
                    }
                    None => {
                        self.reply(conn, xid, err::AUTH_FAILED, |_| {});
                        self.send(conn, Out::Close);
                    }
                }
            }
            Request::SetWatches(sw) => self.set_watches(conn, xid, sw),
            Request::Check { path, version } => {
                let e = processor::prep_check(&self.tree, &path, version, &caller)
                    .err()
                    .unwrap_or(err::OK);
                self.reply(conn, xid, e, |_| {});
            }
            Request::MultiRead(ops) => self.multi_read(conn, xid, &auth, ops),
            Request::Exists { path, watch } => {
                let code = self.reply_with(conn, xid, |tree, w| read::exists(tree, &path, w));
                // A missing node is watched for its creation; a bad path is not watched.
                if watch && code != err::BAD_ARGUMENTS {
                    self.watches.add_data(&path, conn);
                }
            }
            Request::GetData { path, watch } => {
                let code =
                    self.reply_with(conn, xid, |tree, w| read::get_data(tree, &auth, &path, w));
                if watch && code == err::OK {
                    self.watches.add_data(&path, conn);
                }
            }
            Request::GetChildren {
                path,
                watch,
                with_stat,
            } => {
                let code = self.reply_with(conn, xid, |tree, w| {
                    read::get_children(tree, &auth, &path, with_stat, w)
                });
                if watch && code == err::OK {
                    self.watches.add_child(&path, conn);
                }
            }
            Request::GetAcl { path } => match self.tree.get(&path) {
                None => self.reply(conn, xid, err::NO_NODE, |_| {}),
                Some(n) if !crate::auth::allowed(&n.acl, &auth, perms::READ | perms::ADMIN) => {
                    self.reply(conn, xid, err::NO_AUTH, |_| {})
                }
                Some(n) => {
                    let (acl, stat) = (n.acl.clone(), n.stat());
                    self.reply(conn, xid, err::OK, |w| {
                        Acl::write_list(&acl, w);
                        stat.write(w);
                    })
                }
            },
            Request::GetAllChildrenNumber { path } => match self.tree.get(&path) {
                None => self.reply(conn, xid, err::NO_NODE, |_| {}),
                Some(n) if !crate::auth::allowed(&n.acl, &auth, perms::READ) => {
                    self.reply(conn, xid, err::NO_AUTH, |_| {})
                }
                Some(_) => {
                    let count = self.tree.descendant_count(&path) as i32;
                    self.reply(conn, xid, err::OK, |w| {
                        w.i32(count);
                    })
                }
            },
            Request::GetEphemerals { prefix } => {
                let list: Vec<String> = self
                    .tree
                    .ephemerals_of(session)
                    .into_iter()
                    .filter(|p| p.starts_with(&prefix))
                    .collect();
                self.reply(conn, xid, err::OK, |w| {
                    w.strings(&list);
                })
            }
            Request::Sync { path } => self.reply(conn, xid, err::OK, |w| {
                w.string(&path);
            }),
            Request::AddWatch { path, mode } => {
                if !(0..=1).contains(&mode) || processor::validate_path(&path, false).is_err() {
                    return self.reply(conn, xid, err::BAD_ARGUMENTS, |_| {});
                }
                self.watches.add_persistent(&path, conn, mode == 1);
                self.reply(conn, xid, err::OK, |_| {});
            }
            Request::RemoveWatches { path, kind, remove } => {
                let Some((d, c)) = remove_mask(kind) else {
                    return self.reply(conn, xid, err::BAD_ARGUMENTS, |_| {});
                };
                let found = self.watches.remove(&path, conn, d, c, remove);
                self.reply(
                    conn,
                    xid,
                    if found { err::OK } else { err::NO_WATCHER },
                    |_| {},
                );
            }
            Request::WhoAmI => self.reply(conn, xid, err::OK, |w| {
                w.i32(auth.len() as i32);
                for a in auth.iter() {
                    w.string(&a.scheme).string(&a.id);
                }
            }),
            Request::Unknown(_) => self.reply(conn, xid, err::UNIMPLEMENTED, |_| {}),
            Request::Create(_)
            | Request::Delete { .. }
            | Request::SetData { .. }
            | Request::SetAcl { .. }
            | Request::Multi(_)
            | Request::Reconfig { .. } => unreachable!("writes are handled above"),
        }
        self.answered_at(conn, at);
    }

    /// Records a request's latency and the zxid its reply carried.
    fn answered_at(&mut self, conn: ConnId, at: Instant) {
        let lat = at.elapsed().as_millis() as u64;
        self.shared.traffic.latency.record(lat);
        if let Some(c) = self.conns.get(&conn) {
            c.link.replied_at(self.tree.last_zxid);
        }
    }

    /// Replies to a local connection or to a learner's client.
    fn reply_to(&mut self, to: To, xid: i32, err: i32, body: impl FnOnce(&mut Writer)) {
        match to {
            To::Local(conn) => self.reply(conn, xid, err, body),
            To::Remote(r) => {
                let frame = proto::reply_frame(xid, self.tree.last_zxid, err, body);
                r.answer(self.tree.last_zxid, Answer::Reply(frame));
            }
        }
    }

    /// Handles a write (create, delete, setData, setACL, multi) for `session`;
    /// hands any other request back.
    fn write(
        &mut self,
        to: To,
        xid: i32,
        session: i64,
        auth: &[AuthId],
        req: Request,
    ) -> Option<Request> {
        let caller = Caller { session, auth };
        match req {
            Request::Create(c) => {
                let kind = c.opcode;
                match processor::prep_create(&self.tree, &c, &caller) {
                    Err(e) => self.reply_to(to, xid, e, |_| {}),
                    Ok(body) => {
                        let path = match &body {
                            TxnBody::Create { path, .. } => path.clone(),
                            _ => unreachable!("prep_create returns a create"),
                        };
                        self.commit(session, body);
                        let stat = self.tree.get(&path).map(|n| n.stat()).unwrap_or_default();
                        self.reply_to(to, xid, err::OK, |w| {
                            w.string(&path);
                            if kind != op::CREATE {
                                stat.write(w);
                            }
                        });
                    }
                }
            }
            Request::Delete { path, version } => {
                let r = processor::prep_delete(&self.tree, &path, version, &caller);
                self.write_simple(to, xid, session, r, |_, _| {});
            }
            Request::SetData {
                path,
                data,
                version,
            } => {
                let r = processor::prep_set_data(&self.tree, &path, &data, version, &caller);
                self.write_simple(to, xid, session, r, |tree, w| {
                    tree.get(&path).unwrap().stat().write(w)
                });
            }
            Request::SetAcl { path, acl, version } => {
                let r = processor::prep_set_acl(&self.tree, &path, &acl, version, &caller);
                self.write_simple(to, xid, session, r, |tree, w| {
                    tree.get(&path).unwrap().stat().write(w)
                });
            }
            Request::Multi(ops) => self.multi(to, xid, session, auth, ops),
            Request::Reconfig {
                joining,
                leaving,
                new_members,
                config_id,
            } => {
                let change = reconfig::Change {
                    joining,
                    leaving,
                    new_members,
                    config_id,
                };
                self.reconfig(to, xid, session, auth, change);
            }
            other => return Some(other),
        }
        None
    }

    fn write_simple(
        &mut self,
        to: To,
        xid: i32,
        session: i64,
        prepped: Result<TxnBody, i32>,
        body: impl FnOnce(&DataTree, &mut Writer),
    ) {
        match prepped {
            Err(e) => self.reply_to(to, xid, e, |_| {}),
            Ok(txn) => {
                self.commit(session, txn);
                let mut w = Writer::new();
                body(&self.tree, &mut w);
                self.reply_to(to, xid, err::OK, |out| out.buf.extend_from_slice(&w.buf));
            }
        }
    }

    fn multi(&mut self, to: To, xid: i32, session: i64, auth: &[AuthId], ops: Vec<MultiOp>) {
        let caller = Caller { session, auth };
        let zxid = self.next_zxid();
        let time = now_ms();
        let mut undos = Vec::new();
        let mut bodies = Vec::new();
        let mut changes = Vec::new();
        let mut results = Writer::new();
        let mut failure = None;
        for (i, m) in ops.iter().enumerate() {
            match processor::prep_multi_op(&self.tree, m, &caller) {
                Err(e) => {
                    failure = Some((i, e));
                    break;
                }
                Ok(None) => {
                    results.i32(op::CHECK).bool(false).i32(0);
                }
                Ok(Some(body)) => {
                    undos.push(self.tree.apply_body(zxid, time, &body, &mut changes));
                    match (m, &body) {
                        (MultiOp::Create(c), TxnBody::Create { path, .. }) => {
                            if c.opcode == op::CREATE {
                                results.i32(op::CREATE).bool(false).i32(0).string(path);
                            } else {
                                results.i32(op::CREATE2).bool(false).i32(0).string(path);
                                self.tree.get(path).unwrap().stat().write(&mut results);
                            }
                        }
                        (MultiOp::SetData { path, .. }, _) => {
                            results.i32(op::SET_DATA).bool(false).i32(0);
                            self.tree.get(path).unwrap().stat().write(&mut results);
                        }
                        _ => {
                            results.i32(op::DELETE).bool(false).i32(0);
                        }
                    }
                    bodies.push(body);
                }
            }
        }
        if let Some((failed, e)) = failure {
            if !bodies.is_empty() && failpoint::active(Failpoint::PartialMulti) {
                tracing::warn!(
                    "failpoint partial-multi: {} of {} operations kept",
                    failed,
                    ops.len()
                );
                self.log_multi(zxid, time, session, bodies, &changes);
            } else {
                for u in undos.into_iter().rev() {
                    self.tree.revert(u);
                }
            }
            self.reply_to(to, xid, err::OK, |w| {
                for i in 0..ops.len() {
                    let code = match i.cmp(&failed) {
                        std::cmp::Ordering::Less => err::OK,
                        std::cmp::Ordering::Equal => e,
                        std::cmp::Ordering::Greater => err::RUNTIME_INCONSISTENCY,
                    };
                    w.i32(op::ERROR).bool(false).i32(code).i32(code);
                }
                w.i32(-1).bool(true).i32(-1);
            });
            return;
        }
        if !bodies.is_empty() {
            self.log_multi(zxid, time, session, bodies, &changes);
        }
        results.i32(-1).bool(true).i32(-1);
        self.reply_to(to, xid, err::OK, |w| w.buf.extend_from_slice(&results.buf));
    }

    /// Logs the multi of `bodies`, already applied to the tree at `zxid` with `changes`, and
    /// fires their watches.
    fn log_multi(
        &mut self,
        zxid: i64,
        time: i64,
        session: i64,
        bodies: Vec<TxnBody>,
        changes: &[Change],
    ) {
        let txn = Txn {
            zxid,
            time,
            session,
            body: TxnBody::Multi(bodies),
        };
        self.tree.last_zxid = zxid;
        self.log.append(&txn);
        self.since_snapshot += 1;
        self.fire(zxid, changes);
    }

    fn multi_read(&mut self, conn: ConnId, xid: i32, auth: &[AuthId], ops: Vec<ReadOp>) {
        let mut w = Writer::new();
        for r in ops {
            let start = w.buf.len();
            let (opcode, path, watch) = match &r {
                ReadOp::GetData { path, watch } => (op::GET_DATA, path, *watch),
                ReadOp::GetChildren { path, watch } => (op::GET_CHILDREN, path, *watch),
            };
            w.i32(opcode).bool(false).i32(0);
            let result = match &r {
                ReadOp::GetData { .. } => read::get_data(&self.tree, auth, path, &mut w),
                ReadOp::GetChildren { .. } => {
                    read::get_children(&self.tree, auth, path, false, &mut w)
                }
            };
            match result {
                Err(e) => {
                    w.buf.truncate(start);
                    w.i32(op::ERROR).bool(false).i32(e).i32(e);
                }
                Ok(()) if watch && opcode == op::GET_DATA => self.watches.add_data(path, conn),
                Ok(()) if watch => self.watches.add_child(path, conn),
                Ok(()) => {}
            }
        }
        w.i32(-1).bool(true).i32(-1);
        self.reply(conn, xid, err::OK, |out| out.buf.extend_from_slice(&w.buf));
    }

    /// Re-registers a reconnecting client's watches, first firing those whose
    /// condition already changed after `relative_zxid`.
    fn set_watches(&mut self, conn: ConnId, xid: i32, sw: SetWatches) {
        let rel = sw.relative_zxid;
        let zxid = self.tree.last_zxid;
        let mut events = Vec::new();
        for p in &sw.data {
            match self.tree.get(p).map(|n| n.stat()) {
                None => events.push((event::NODE_DELETED, p)),
                Some(s) if s.mzxid > rel => events.push((event::NODE_DATA_CHANGED, p)),
                Some(_) => self.watches.add_data(p, conn),
            }
        }
        for p in &sw.exist {
            match self.tree.get(p) {
                Some(_) => events.push((event::NODE_CREATED, p)),
                None => self.watches.add_data(p, conn),
            }
        }
        for p in &sw.child {
            match self.tree.get(p).map(|n| n.stat()) {
                None => events.push((event::NODE_DELETED, p)),
                Some(s) if s.pzxid > rel => events.push((event::NODE_CHILDREN_CHANGED, p)),
                Some(_) => self.watches.add_child(p, conn),
            }
        }
        for p in &sw.persistent {
            self.watches.add_persistent(p, conn, false);
        }
        for p in &sw.recursive {
            self.watches.add_persistent(p, conn, true);
        }
        for (kind, path) in events {
            self.send(conn, Out::Event(proto::event_frame(zxid, kind, path)));
        }
        self.reply(conn, xid, err::OK, |_| {});
    }

    // ---- read-only views for the four-letter words ----

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// This server's part in an ensemble.
    pub fn role(&self) -> &Role {
        &self.role
    }

    /// The data tree.
    pub fn tree(&self) -> &DataTree {
        &self.tree
    }

    /// The watches.
    pub fn watches(&self) -> &WatchManager {
        &self.watches
    }

    /// The watch statistics.
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// Packets and latency.
    pub fn traffic(&self) -> &Traffic {
        &self.shared.traffic
    }

    /// Time since start.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Open connections.
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Live sessions (a learner counts those its tree holds).
    pub fn session_count(&self) -> usize {
        match self.role {
            Role::Learner { .. } => self.tree.sessions.len(),
            _ => self.live.len(),
        }
    }

    /// Responses waiting for the log.
    pub fn outstanding(&self) -> usize {
        self.held.len()
    }

    /// One line per connection in ZooKeeper's `cons` format.
    pub fn connection_lines(&self, detailed: bool) -> Vec<String> {
        let mut ids: Vec<_> = self.conns.keys().copied().collect();
        ids.sort_unstable();
        ids.into_iter()
            .map(|id| {
                let c = &self.conns[&id];
                let (received, last_cxid, last_op, last_zxid) = c.link.counters();
                let sent = c.link.outbox.frames();
                let base = format!(" /{}[1](queued=0,recved={received},sent={sent}", c.addr);
                if !detailed {
                    return format!("{base})");
                }
                let est = c.established.duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
                let session = c.link.session();
                let to = self.live.get(&session).map_or(0, |l| l.timeout);
                let lop = if received == 0 { "NA" } else { op_name(last_op) };
                format!(
                    "{base},sid={session:#x},lop={lop},est={est},to={to},lcxid={last_cxid:#x},lzxid={last_zxid:#x},lresp=0,llat=0,minlat=0,avglat=0,maxlat=0)"
                )
            })
            .collect()
    }

    /// `(session, watched paths)` per watching connection, for `wchc`-style output.
    pub fn watch_lines(&self) -> Vec<(i64, Vec<String>)> {
        let mut ids: Vec<_> = self.conns.keys().copied().collect();
        ids.sort_unstable();
        ids.into_iter()
            .map(|id| (self.conns[&id].link.session(), self.watches.paths_of(id)))
            .filter(|(_, p)| !p.is_empty())
            .collect()
    }
}

/// How long a session of `timeout` ms lives after its server last heard from it: the timeout,
/// or a quarter of it with the `early-expiry` failpoint.
pub(crate) fn lifetime(timeout: i32) -> Duration {
    let full = Duration::from_millis(timeout as u64);
    match failpoint::active(Failpoint::EarlyExpiry) {
        true => full / 4,
        false => full,
    }
}
