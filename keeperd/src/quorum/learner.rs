//! Following (or observing) a leader: connect, report the epoch accepted
//! last, take the leader's new epoch (persisted before it is acknowledged),
//! bring the log in line (DIFF: append what follows; TRUNC: cut what the
//! leader never had first; SNAP: replace everything by the leader's
//! snapshot), and on NEWLEADER make all of it durable, then persist the new
//! current epoch, then acknowledge (in that order: ZOOKEEPER-4643, -4646,
//! -4685). Clients are served from UPTODATE on: nothing of the sync stream
//! is shown before the leader says it is committed (ZOOKEEPER-3911). Then
//! proposals are logged and acknowledged once durable (by observers too: the
//! leader counts the voters'), and applied when committed, by the core.

use super::epochs::Epochs;
use super::leader::StopCore;
use super::peer::Peer;
use super::wire::{self, Down, SyncKind, Up};
use crate::core::{Answer, Core, CoreMsg, Role, Start};
use crate::failpoint::{self, Failpoint};
use crate::log::{self, FileLog, Log, Recovered, Segment};
use crate::server::Serving;
use crate::tree::Capture;
use crate::txn::Txn;
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// Follows leader `leader` with the recovered state until the leader is
/// lost; returns why it ended, leaving in `carry` the state for the next
/// role if it got as far as running its core.
pub async fn follow(
    peer: &Peer,
    mut recovered: Recovered,
    epochs: &mut Epochs,
    leader: u64,
    carry: &mut Option<Recovered>,
) -> Result<(), String> {
    let config = peer.config.clone();
    let ensemble = peer.ensemble.clone();
    let gate = peer.gate.clone();
    // A server the membership leaves out (removed) follows without a vote, as an observer.
    let observer = !ensemble.is_voter(ensemble.my_id);
    let addr = ensemble
        .server(leader)
        .or_else(|| config.servers.iter().find(|s| s.id == leader))
        .ok_or_else(|| format!("leader {leader} is not a member"))?
        .quorum_addr();
    let init = config.tick() * config.init_limit;
    let sync_limit = config.tick() * config.sync_limit;
    let init_deadline = tokio::time::Instant::now() + init;
    let mut last = recovered.tree.last_zxid;
    let info = Up::FollowerInfo {
        id: ensemble.my_id,
        accepted_epoch: epochs.accepted(),
        observer,
        last_zxid: last,
    };
    // The leader may still be starting: try again until initLimit.
    let (mut rd, mut wr, epoch) = loop {
        let attempt = async {
            let left = init_deadline.saturating_duration_since(tokio::time::Instant::now());
            let stream = connect(&addr, left).await?;
            let (rd, mut wr) = stream.into_split();
            let mut rd = BufReader::with_capacity(256 * 1024, rd);
            send(&mut wr, &info, init).await?;
            match read_down(&mut rd, init).await? {
                Down::LeaderInfo { epoch } => Ok((rd, wr, epoch)),
                other => Err(format!("expected LEADERINFO, got {other:?}")),
            }
        };
        match attempt.await {
            Ok(connected) => break connected,
            Err(e) if tokio::time::Instant::now() >= init_deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    if epoch < epochs.accepted() {
        return Err(format!(
            "leader {leader} proposed epoch {epoch}, older than the accepted {}",
            epochs.accepted()
        ));
    }
    if epoch > epochs.accepted() {
        epochs.set_accepted(epoch)?;
    }
    send(
        &mut wr,
        &Up::AckEpoch {
            current_epoch: epochs.current(),
            last_zxid: last,
        },
        init,
    )
    .await?;

    // Bring the log in line with the leader's history.
    let Down::Sync { kind, committed } = read_down(&mut rd, init).await? else {
        return Err("expected the sync".into());
    };
    tracing::info!("syncing with leader {leader} (epoch {epoch}) by {kind:?} from {last:#x}");
    let dir = config.data_dir.clone();
    let mut next = read_down(&mut rd, init).await?;
    match kind {
        SyncKind::Diff => {}
        SyncKind::Trunc(zxid) => {
            drop(recovered);
            let d = dir.clone();
            recovered = blocking(move || {
                log::truncate_after(&d, zxid)?;
                log::recover(&d)
            })
            .await?;
            super::peer::membership(&config, &mut recovered.tree);
        }
        SyncKind::Snap => {
            let incoming = dir.join("snapshot.incoming");
            let bad = |e: std::io::Error| format!("{}: {e}", incoming.display());
            let mut file = std::fs::File::create(&incoming).map_err(bad)?;
            while let Down::SnapChunk(bytes) = next {
                tokio::task::block_in_place(|| std::io::Write::write_all(&mut file, &bytes))
                    .map_err(bad)?;
                next = read_down(&mut rd, init).await?;
            }
            drop(file);
            drop(recovered);
            let d = dir.clone();
            recovered = blocking(move || {
                let (tree, segment) = log::install_snapshot(&d, &incoming)?;
                Ok(Recovered {
                    tree,
                    segment,
                    replayed: 0,
                    torn_tail: None,
                })
            })
            .await?;
            super::peer::membership(&config, &mut recovered.tree);
        }
    }
    let mut tree = recovered.tree;
    last = tree.last_zxid;
    let mut file = FileLog::new(dir.clone(), recovered.segment, last, Box::new(|_| {}));
    let mut changes = Vec::new();
    let newleader = loop {
        match next {
            Down::Txn(bytes) => {
                let txn = Txn::decode(&bytes).map_err(|e| format!("sync transaction: {e}"))?;
                if !log::follows(last, txn.zxid) {
                    return Err(format!("the sync skips from {last:#x} to {:#x}", txn.zxid));
                }
                file.append(&txn);
                changes.clear();
                tree.apply(&txn, &mut changes);
                last = txn.zxid;
            }
            Down::NewLeader { epoch: e, zxid } => break (e, zxid),
            other => return Err(format!("unexpected {other:?} during the sync")),
        }
        next = read_down(&mut rd, init).await?;
    };
    if newleader != (epoch, last) {
        return Err(format!(
            "NEWLEADER {newleader:?} does not match the sync (epoch {epoch}, ends at {last:#x})"
        ));
    }
    // Durable first, then the epoch, then the acknowledgement.
    tokio::task::block_in_place(|| file.flush());
    epochs.set_current(epoch)?;
    peer.election.established(epoch);

    let (up_tx, up_rx) = mpsc::unbounded_channel();
    let _ = up_tx.send(Up::AckNewLeader { zxid: last });
    let writer = tokio::spawn(write_up(wr, up_rx, sync_limit));
    let _stop_writer = AbortOnDrop(writer.abort_handle());
    // Observers acknowledge too: the leader counts only the voters' acknowledgements, and a
    // reconfiguration that makes an observer a voter needs its acknowledgement.
    let acks = up_tx.clone();
    file.set_on_durable(Box::new(move |zxid| {
        let _ = acks.send(Up::Ack { zxid });
    }));
    let log = LearnerLog {
        file,
        early_acks: (!observer && failpoint::active(Failpoint::AckBeforeDurable))
            .then(|| up_tx.clone()),
        last_write: Instant::now(),
    };
    let ping_answers = up_tx.clone();
    let role = Role::Learner {
        id: ensemble.my_id,
        observer,
        upstream: up_tx,
    };
    let start = Start {
        committed: committed.max(0),
        epoch,
        serving: false,
    };
    let core = Core::new(config.clone(), tree, Box::new(log), role, start);
    let shared = core.shared();
    let (core_tx, core_rx) = std_mpsc::channel();
    let stop = StopCore {
        gate: gate.clone(),
        core: core_tx.clone(),
        thread: Some(core.spawn(core_rx)?),
    };
    let mode = if observer { "OBSERVING" } else { "FOLLOWING" };
    tracing::info!("{mode} leader {leader}: synced at {last:#x}");

    let mut limit = init;
    let why = loop {
        if stop.finished() {
            break "the core stopped".into();
        }
        let msg = match read_down(&mut rd, limit).await {
            Ok(m) => m,
            Err(e) => break e,
        };
        let to_core = match msg {
            Down::Proposal(bytes) => match Txn::decode(&bytes) {
                Ok(txn) => CoreMsg::Proposal(txn),
                Err(e) => break format!("proposal: {e}"),
            },
            Down::Commit { zxid } => CoreMsg::Commit(zxid),
            Down::UpToDate { committed } => {
                let _ = core_tx.send(CoreMsg::Commit(committed));
                let _ = core_tx.send(CoreMsg::Serve);
                gate.open(Serving {
                    core: core_tx.clone(),
                    shared: shared.clone(),
                });
                tracing::info!("{mode} leader {leader}: up to date, serving clients");
                limit = sync_limit;
                continue;
            }
            Down::Reply { token, zxid, frame } => CoreMsg::Answer {
                conn: token,
                zxid,
                answer: Answer::Reply(frame),
            },
            Down::Session { token, zxid, valid } => CoreMsg::Answer {
                conn: token,
                zxid,
                answer: Answer::Session(valid),
            },
            Down::Ping { at } => {
                let _ = ping_answers.send(Up::Ping { at });
                continue;
            }
            other => break format!("unexpected {other:?}"),
        };
        if core_tx.send(to_core).is_err() || stop.finished() {
            break "the core stopped".into();
        }
    };
    *carry = stop.retire();
    Err(format!("no longer {mode} leader {leader}: {why}"))
}

/// Runs blocking disk work off the runtime's threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| e.to_string())?
}

/// Connects to the leader, trying again until `limit` (it may still be starting).
async fn connect(addr: &str, limit: Duration) -> Result<TcpStream, String> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let attempt = tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(addr)).await;
        match attempt {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Ok(Err(e)) if tokio::time::Instant::now() >= deadline => {
                return Err(format!("cannot connect to the leader at {addr}: {e}"))
            }
            Err(_) if tokio::time::Instant::now() >= deadline => {
                return Err(format!("cannot connect to the leader at {addr}: timed out"))
            }
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

async fn read_down(rd: &mut BufReader<OwnedReadHalf>, limit: Duration) -> Result<Down, String> {
    match tokio::time::timeout(limit, wire::read_message(rd)).await {
        Err(_) => Err(format!("nothing heard from the leader for {limit:?}")),
        Ok(Err(e)) => Err(format!("leader connection: {e}")),
        Ok(Ok(body)) => Down::decode(&body).map_err(|e| e.to_string()),
    }
}

async fn send(
    wr: &mut tokio::net::tcp::OwnedWriteHalf,
    msg: &Up,
    limit: Duration,
) -> Result<(), String> {
    let mut buf = Vec::new();
    msg.encode(&mut buf);
    match tokio::time::timeout(limit, wr.write_all(&buf)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("leader connection: {e}")),
        Err(_) => Err(format!("could not send to the leader for {limit:?}")),
    }
}

/// Sends what the core queues for the leader, batching what is waiting.
async fn write_up(
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Up>,
    limit: Duration,
) {
    let mut buf = Vec::new();
    while let Some(msg) = rx.recv().await {
        msg.encode(&mut buf);
        while let Ok(more) = rx.try_recv() {
            more.encode(&mut buf);
        }
        if !matches!(
            tokio::time::timeout(limit, wr.write_all(&buf)).await,
            Ok(Ok(()))
        ) {
            return;
        }
        buf.clear();
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A learner's log: its local log, acknowledging each flush to the leader
/// (through the file log's callback). With the `ack-before-durable`
/// failpoint it acknowledges each proposal on arrival instead and writes
/// only every [`LAZY_WRITES`], so when its role ends (the leader is lost, or
/// the process dies) what it acknowledged since is gone.
/// How seldom a learner with the `ack-before-durable` failpoint writes.
const LAZY_WRITES: Duration = Duration::from_secs(5);

struct LearnerLog {
    file: FileLog,
    early_acks: Option<super::Upstream>,
    last_write: Instant,
}

impl Log for LearnerLog {
    fn append(&mut self, txn: &Txn) {
        self.file.append(txn);
        if let Some(acks) = &self.early_acks {
            let _ = acks.send(Up::Ack { zxid: txn.zxid });
        }
    }

    fn flush(&mut self) {
        if self.early_acks.is_some() && self.last_write.elapsed() < LAZY_WRITES {
            return;
        }
        self.last_write = Instant::now();
        self.file.flush();
    }

    fn can_snapshot(&self) -> bool {
        self.file.can_snapshot()
    }

    fn snapshot(&mut self, capture: Capture) {
        self.file.snapshot(capture);
    }

    fn retire(self: Box<Self>) -> Option<Segment> {
        // With `ack-before-durable` what it acknowledged since the last lazy
        // write is lost when the role ends: the next one starts from disk.
        if self.early_acks.is_some() {
            return None;
        }
        self.file.retire()
    }
}
