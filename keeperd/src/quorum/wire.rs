//! The messages servers exchange, framed as `[u32 length][u8 kind][fields]`
//! with jute primitives: learner to leader ([`Up`]), leader to learner
//! ([`Down`]), and election notifications ([`Notification`]).

use crate::auth::AuthId;
use crate::jute::{DecodeError, DecodeResult, Reader, Writer};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Largest message accepted (a snapshot travels in chunks far below it).
pub const MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// Learner to leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Up {
    /// First message: who connects, the epoch it promised last and its last zxid.
    FollowerInfo {
        id: u64,
        accepted_epoch: u64,
        observer: bool,
        last_zxid: i64,
    },
    /// The learner took the new epoch; its current epoch and last logged zxid.
    AckEpoch { current_epoch: u64, last_zxid: i64 },
    /// Everything up to `zxid` is durable and the new epoch is its current one.
    AckNewLeader { zxid: i64 },
    /// Every proposal up to `zxid` is durable here.
    Ack { zxid: i64 },
    /// A client's request for the leader to process (a write, or sync).
    Request {
        token: u64,
        session: i64,
        auth: Vec<AuthId>,
        frame: Vec<u8>,
    },
    /// A new session created on the learner, to be logged.
    CreateSession {
        token: u64,
        session: i64,
        timeout: i32,
        password: Vec<u8>,
    },
    /// A client reconnects with a session: is it alive, and may it move here?
    Revalidate {
        token: u64,
        session: i64,
        timeout: i32,
        password: Vec<u8>,
    },
    /// The sessions whose clients this learner heard from, each with the
    /// ms since it last heard from them.
    Touch { sessions: Vec<(i64, u32)> },
    /// The answer to the leader's ping stamped `at`.
    Ping { at: u64 },
}

/// How a learner is brought in line with its leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncKind {
    /// Transactions after the learner's last zxid follow.
    Diff,
    /// Discard everything after this zxid, then transactions follow.
    Trunc(i64),
    /// A snapshot follows in chunks, then the transactions after it.
    Snap,
}

/// Leader to learner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Down {
    /// The epoch the leader proposes.
    LeaderInfo { epoch: u64 },
    /// How the learner is synced; `committed` is the leader's commit point.
    Sync { kind: SyncKind, committed: i64 },
    /// A piece of the snapshot file.
    SnapChunk(Vec<u8>),
    /// A transaction of the leader's history (sync phase).
    Txn(Vec<u8>),
    /// The history up to `zxid` has been sent; the learner persists it and acks.
    NewLeader { epoch: u64, zxid: i64 },
    /// The epoch is established; serve clients. `committed` as in Commit.
    UpToDate { committed: i64 },
    /// A transaction to log and acknowledge.
    Proposal(Vec<u8>),
    /// Every proposal up to `zxid` is committed.
    Commit { zxid: i64 },
    /// The reply to a forwarded request, to release once `zxid` is applied.
    Reply {
        token: u64,
        zxid: i64,
        frame: Vec<u8>,
    },
    /// The answer to CreateSession or Revalidate, valid once `zxid` is applied.
    Session { token: u64, zxid: i64, valid: bool },
    /// Heartbeat, stamped with the leader's clock (ms), to be answered.
    Ping { at: u64 },
}

/// A server's state as election notifications carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    /// Electing.
    Looking,
    /// Following a leader.
    Following,
    /// Leading.
    Leading,
    /// Observing a leader.
    Observing,
}

/// A vote: who should lead, with the history it would bring (its last
/// zxid and its current epoch). Votes are ordered by epoch, then zxid, then id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vote {
    /// Proposed leader.
    pub leader: u64,
    /// Its last logged zxid.
    pub zxid: i64,
    /// Its current epoch.
    pub epoch: u64,
}

impl Vote {
    /// The key votes are compared by.
    pub fn rank(&self) -> (u64, i64, u64) {
        (self.epoch, self.zxid, self.leader)
    }
}

/// An election message: the sender's vote, election round and state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notification {
    /// The vote.
    pub vote: Vote,
    /// The sender's election round (logical clock).
    pub round: u64,
    /// The sender's state.
    pub state: PeerState,
    /// The sender's id.
    pub from: u64,
}

fn frame(kind: u8, body: impl FnOnce(&mut Writer), out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0, 0, 0, 0, kind]);
    let mut w = Writer {
        buf: std::mem::take(out),
    };
    body(&mut w);
    *out = w.buf;
    let len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

fn done<T>(r: &Reader, v: T) -> DecodeResult<T> {
    if r.remaining() != 0 {
        return Err(DecodeError("trailing bytes after message"));
    }
    Ok(v)
}

fn u64_of(r: &mut Reader) -> DecodeResult<u64> {
    Ok(r.i64()? as u64)
}

impl Up {
    /// Appends the framed message to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Up::FollowerInfo {
                id,
                accepted_epoch,
                observer,
                last_zxid,
            } => frame(
                1,
                |w| {
                    w.i64(*id as i64)
                        .i64(*accepted_epoch as i64)
                        .bool(*observer)
                        .i64(*last_zxid);
                },
                out,
            ),
            Up::AckEpoch {
                current_epoch,
                last_zxid,
            } => frame(
                2,
                |w| {
                    w.i64(*current_epoch as i64).i64(*last_zxid);
                },
                out,
            ),
            Up::AckNewLeader { zxid } => frame(
                3,
                |w| {
                    w.i64(*zxid);
                },
                out,
            ),
            Up::Ack { zxid } => frame(
                4,
                |w| {
                    w.i64(*zxid);
                },
                out,
            ),
            Up::Request {
                token,
                session,
                auth,
                frame: f,
            } => frame(
                5,
                |w| {
                    w.i64(*token as i64).i64(*session).i32(auth.len() as i32);
                    for a in auth {
                        w.string(&a.scheme).string(&a.id);
                    }
                    w.buffer(f);
                },
                out,
            ),
            Up::CreateSession {
                token,
                session,
                timeout,
                password,
            } => frame(
                6,
                |w| {
                    w.i64(*token as i64)
                        .i64(*session)
                        .i32(*timeout)
                        .buffer(password);
                },
                out,
            ),
            Up::Revalidate {
                token,
                session,
                timeout,
                password,
            } => frame(
                7,
                |w| {
                    w.i64(*token as i64)
                        .i64(*session)
                        .i32(*timeout)
                        .buffer(password);
                },
                out,
            ),
            Up::Touch { sessions } => frame(
                8,
                |w| {
                    w.i32(sessions.len() as i32);
                    for (s, idle) in sessions {
                        w.i64(*s).i32(*idle as i32);
                    }
                },
                out,
            ),
            Up::Ping { at } => frame(
                9,
                |w| {
                    w.i64(*at as i64);
                },
                out,
            ),
        }
    }

    /// Decodes one message body (after the length).
    pub fn decode(body: &[u8]) -> DecodeResult<Up> {
        let (&kind, rest) = body.split_first().ok_or(DecodeError("empty message"))?;
        let mut r = Reader::new(rest);
        let msg = match kind {
            1 => Up::FollowerInfo {
                id: u64_of(&mut r)?,
                accepted_epoch: u64_of(&mut r)?,
                observer: r.bool()?,
                last_zxid: r.i64()?,
            },
            2 => Up::AckEpoch {
                current_epoch: u64_of(&mut r)?,
                last_zxid: r.i64()?,
            },
            3 => Up::AckNewLeader { zxid: r.i64()? },
            4 => Up::Ack { zxid: r.i64()? },
            5 => Up::Request {
                token: u64_of(&mut r)?,
                session: r.i64()?,
                auth: r.vec(|r| {
                    Ok(AuthId {
                        scheme: r.string()?,
                        id: r.string()?,
                    })
                })?,
                frame: r.buffer()?,
            },
            6 => Up::CreateSession {
                token: u64_of(&mut r)?,
                session: r.i64()?,
                timeout: r.i32()?,
                password: r.buffer()?,
            },
            7 => Up::Revalidate {
                token: u64_of(&mut r)?,
                session: r.i64()?,
                timeout: r.i32()?,
                password: r.buffer()?,
            },
            8 => Up::Touch {
                sessions: r.vec(|r| Ok((r.i64()?, r.i32()? as u32)))?,
            },
            9 => Up::Ping {
                at: u64_of(&mut r)?,
            },
            _ => return Err(DecodeError("unknown learner message")),
        };
        done(&r, msg)
    }
}

impl Down {
    /// Appends the framed message to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Down::LeaderInfo { epoch } => frame(
                1,
                |w| {
                    w.i64(*epoch as i64);
                },
                out,
            ),
            Down::Sync { kind, committed } => frame(
                2,
                |w| {
                    match kind {
                        SyncKind::Diff => w.i32(0).i64(0),
                        SyncKind::Trunc(z) => w.i32(1).i64(*z),
                        SyncKind::Snap => w.i32(2).i64(0),
                    };
                    w.i64(*committed);
                },
                out,
            ),
            Down::SnapChunk(bytes) => frame(
                3,
                |w| {
                    w.buffer(bytes);
                },
                out,
            ),
            Down::Txn(bytes) => frame(
                4,
                |w| {
                    w.buffer(bytes);
                },
                out,
            ),
            Down::NewLeader { epoch, zxid } => frame(
                5,
                |w| {
                    w.i64(*epoch as i64).i64(*zxid);
                },
                out,
            ),
            Down::UpToDate { committed } => frame(
                6,
                |w| {
                    w.i64(*committed);
                },
                out,
            ),
            Down::Proposal(bytes) => encode_proposal(bytes, out),
            Down::Commit { zxid } => encode_commit(*zxid, out),
            Down::Reply {
                token,
                zxid,
                frame: f,
            } => frame(
                9,
                |w| {
                    w.i64(*token as i64).i64(*zxid).buffer(f);
                },
                out,
            ),
            Down::Session { token, zxid, valid } => frame(
                10,
                |w| {
                    w.i64(*token as i64).i64(*zxid).bool(*valid);
                },
                out,
            ),
            Down::Ping { at } => frame(
                11,
                |w| {
                    w.i64(*at as i64);
                },
                out,
            ),
        }
    }

    /// Decodes one message body (after the length).
    pub fn decode(body: &[u8]) -> DecodeResult<Down> {
        let (&kind, rest) = body.split_first().ok_or(DecodeError("empty message"))?;
        let mut r = Reader::new(rest);
        let msg = match kind {
            1 => Down::LeaderInfo {
                epoch: u64_of(&mut r)?,
            },
            2 => {
                let (k, z) = (r.i32()?, r.i64()?);
                let kind = match k {
                    0 => SyncKind::Diff,
                    1 => SyncKind::Trunc(z),
                    2 => SyncKind::Snap,
                    _ => return Err(DecodeError("unknown sync kind")),
                };
                Down::Sync {
                    kind,
                    committed: r.i64()?,
                }
            }
            3 => Down::SnapChunk(r.buffer()?),
            4 => Down::Txn(r.buffer()?),
            5 => Down::NewLeader {
                epoch: u64_of(&mut r)?,
                zxid: r.i64()?,
            },
            6 => Down::UpToDate {
                committed: r.i64()?,
            },
            7 => Down::Proposal(r.buffer()?),
            8 => Down::Commit { zxid: r.i64()? },
            9 => Down::Reply {
                token: u64_of(&mut r)?,
                zxid: r.i64()?,
                frame: r.buffer()?,
            },
            10 => Down::Session {
                token: u64_of(&mut r)?,
                zxid: r.i64()?,
                valid: r.bool()?,
            },
            11 => Down::Ping {
                at: u64_of(&mut r)?,
            },
            _ => return Err(DecodeError("unknown leader message")),
        };
        done(&r, msg)
    }
}

/// Appends a framed PROPOSAL of an encoded transaction.
pub fn encode_proposal(txn: &[u8], out: &mut Vec<u8>) {
    frame(
        7,
        |w| {
            w.buffer(txn);
        },
        out,
    )
}

/// Appends a framed COMMIT.
pub fn encode_commit(zxid: i64, out: &mut Vec<u8>) {
    frame(
        8,
        |w| {
            w.i64(zxid);
        },
        out,
    )
}

impl Notification {
    /// Appends the framed notification.
    pub fn encode(&self, out: &mut Vec<u8>) {
        frame(
            1,
            |w| {
                w.i64(self.vote.leader as i64)
                    .i64(self.vote.zxid)
                    .i64(self.vote.epoch as i64)
                    .i64(self.round as i64)
                    .i32(match self.state {
                        PeerState::Looking => 0,
                        PeerState::Following => 1,
                        PeerState::Leading => 2,
                        PeerState::Observing => 3,
                    })
                    .i64(self.from as i64);
            },
            out,
        )
    }

    /// Decodes a notification body (after the length).
    pub fn decode(body: &[u8]) -> DecodeResult<Notification> {
        let (&kind, rest) = body.split_first().ok_or(DecodeError("empty message"))?;
        if kind != 1 {
            return Err(DecodeError("not a notification"));
        }
        let mut r = Reader::new(rest);
        let vote = Vote {
            leader: u64_of(&mut r)?,
            zxid: r.i64()?,
            epoch: u64_of(&mut r)?,
        };
        let round = u64_of(&mut r)?;
        let state = match r.i32()? {
            0 => PeerState::Looking,
            1 => PeerState::Following,
            2 => PeerState::Leading,
            3 => PeerState::Observing,
            _ => return Err(DecodeError("unknown peer state")),
        };
        let n = Notification {
            vote,
            round,
            state,
            from: u64_of(&mut r)?,
        };
        done(&r, n)
    }
}

/// Reads one message body (without its length) from `r`.
pub async fn read_message(r: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Vec<u8>> {
    let len = r.read_u32().await? as usize;
    if len == 0 || len > MAX_MESSAGE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("bad message length {len}"),
        ));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await?;
    Ok(body)
}

/// An I/O error for a message that does not decode.
pub fn invalid(e: DecodeError) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(out: &[u8]) -> &[u8] {
        let len = u32::from_be_bytes([out[0], out[1], out[2], out[3]]) as usize;
        assert_eq!(len + 4, out.len());
        &out[4..]
    }

    #[test]
    fn messages_round_trip() {
        let ups = vec![
            Up::FollowerInfo {
                id: 3,
                accepted_epoch: 9,
                observer: true,
                last_zxid: 77,
            },
            Up::AckEpoch {
                current_epoch: 8,
                last_zxid: -1,
            },
            Up::AckNewLeader { zxid: 5 },
            Up::Ack { zxid: 6 },
            Up::Request {
                token: 1,
                session: 2,
                auth: vec![AuthId {
                    scheme: "ip".into(),
                    id: "1.2.3.4".into(),
                }],
                frame: vec![1, 2, 3],
            },
            Up::CreateSession {
                token: 4,
                session: 5,
                timeout: 6000,
                password: vec![7; 16],
            },
            Up::Revalidate {
                token: 4,
                session: 5,
                timeout: 6000,
                password: vec![],
            },
            Up::Touch {
                sessions: vec![(1, 2), (3, 4)],
            },
            Up::Ping { at: 77 },
        ];
        for m in ups {
            let mut out = Vec::new();
            m.encode(&mut out);
            assert_eq!(Up::decode(body(&out)).unwrap(), m);
            assert!(
                Up::decode(&body(&out)[..body(&out).len() - 1]).is_err()
                    || matches!(m, Up::Touch { .. })
            );
        }
        let downs = vec![
            Down::LeaderInfo { epoch: 4 },
            Down::Sync {
                kind: SyncKind::Trunc(33),
                committed: 30,
            },
            Down::Sync {
                kind: SyncKind::Snap,
                committed: 1,
            },
            Down::SnapChunk(vec![9; 10]),
            Down::Txn(vec![1]),
            Down::NewLeader { epoch: 4, zxid: 99 },
            Down::UpToDate { committed: 99 },
            Down::Proposal(vec![5, 5]),
            Down::Commit { zxid: 100 },
            Down::Reply {
                token: 8,
                zxid: 101,
                frame: vec![0; 20],
            },
            Down::Session {
                token: 8,
                zxid: 101,
                valid: false,
            },
            Down::Ping { at: 5 },
        ];
        for m in downs {
            let mut out = Vec::new();
            m.encode(&mut out);
            assert_eq!(Down::decode(body(&out)).unwrap(), m);
        }
        let n = Notification {
            vote: Vote {
                leader: 2,
                zxid: 1 << 33,
                epoch: 2,
            },
            round: 7,
            state: PeerState::Following,
            from: 3,
        };
        let mut out = Vec::new();
        n.encode(&mut out);
        assert_eq!(Notification::decode(body(&out)).unwrap(), n);
        assert!(Notification::decode(&[9]).is_err());
    }

    #[test]
    fn votes_order_by_epoch_then_zxid_then_id() {
        let v = |epoch, zxid, leader| Vote {
            leader,
            zxid,
            epoch,
        };
        assert!(v(2, 1, 1).rank() > v(1, 100, 9).rank());
        assert!(v(1, 5, 1).rank() > v(1, 4, 9).rank());
        assert!(v(1, 5, 2).rank() > v(1, 5, 1).rank());
    }
}
