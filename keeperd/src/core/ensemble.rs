//! The core's part in an ensemble: on the leader, requests, new sessions,
//! reconnections and liveness reports that learners forward; on a learner,
//! forwarding writes, logging proposals, applying commits and releasing the
//! leader's answers in order.

use super::{lifetime, Answer, ConnId, Core, Forwarded, Live, Out, Queued, Remote, Role, To};
use crate::failpoint::{self, Failpoint};
use crate::proto::{self, err, ConnectRequest, Request};
use crate::quorum::wire::{Down, Up};
use crate::txn::TxnBody;
use bytes::Bytes;
use rand::RngCore;
use std::time::{Duration, Instant};

impl Remote {
    /// Sends the learner the answer, valid once it has applied `zxid`.
    pub(super) fn answer(&self, zxid: i64, answer: Answer) {
        let msg = match answer {
            Answer::Reply(frame) => Down::Reply {
                token: self.token,
                zxid,
                frame,
            },
            Answer::Session(valid) => Down::Session {
                token: self.token,
                zxid,
                valid,
            },
        };
        let mut buf = Vec::new();
        msg.encode(&mut buf);
        let _ = self.link.send(Bytes::from(buf));
    }
}

/// Whether a learner sends `req` to the leader: writes (reconfig too), `sync` and
/// closeSession.
fn forwards(req: &Request) -> bool {
    matches!(
        req,
        Request::Create(_)
            | Request::Delete { .. }
            | Request::SetData { .. }
            | Request::SetAcl { .. }
            | Request::Multi(_)
            | Request::Reconfig { .. }
            | Request::Sync { .. }
            | Request::CloseSession
    )
}

impl Core {
    // ---- leader ----

    /// A request a learner's client sent: a write, sync or closeSession of
    /// a session that learner holds.
    pub(super) fn forwarded(&mut self, from: Remote, xid: i32, req: Request) {
        let session = from.session;
        let to = To::Remote(&from);
        match self.live.get(&session) {
            None => return self.reply_to(to, xid, err::SESSION_EXPIRED, |_| {}),
            Some(l) if l.owner != from.peer => {
                return self.reply_to(to, xid, err::SESSION_MOVED, |_| {})
            }
            Some(_) => {}
        }
        let auth = from.auth.clone();
        let Some(req) = self.write(to, xid, session, &auth, req) else {
            return;
        };
        match req {
            Request::Sync { path } => self.reply_to(to, xid, err::OK, |w| {
                w.string(&path);
            }),
            Request::CloseSession => {
                self.live.remove(&session);
                self.commit(session, TxnBody::CloseSession);
                self.reply_to(to, xid, err::OK, |_| {});
            }
            _ => self.reply_to(to, xid, err::BAD_ARGUMENTS, |_| {}),
        }
    }

    /// A session a learner opened for its client: logged, then tracked here.
    pub(super) fn remote_session(&mut self, from: Remote, timeout: i32, password: Vec<u8>) {
        let session = from.session;
        if self.tree.sessions.contains_key(&session) || self.live.contains_key(&session) {
            tracing::warn!("learner {} reused session id {session:#x}", from.peer);
            return from.answer(self.tree.last_zxid, Answer::Session(false));
        }
        self.commit(session, TxnBody::CreateSession { timeout, password });
        self.live.insert(
            session,
            Live {
                timeout,
                deadline: Instant::now() + lifetime(timeout),
                conn: None,
                owner: from.peer,
            },
        );
        from.answer(self.tree.last_zxid, Answer::Session(true));
    }

    /// A learner's client resumes a session: valid if it lives and the
    /// password matches; the session then belongs to that learner.
    pub(super) fn revalidate(&mut self, from: Remote, timeout: i32, password: Vec<u8>) {
        let session = from.session;
        let valid = self
            .tree
            .sessions
            .get(&session)
            .is_some_and(|s| s.password == password)
            && self.live.contains_key(&session);
        if valid {
            let l = self.live.get_mut(&session).expect("checked above");
            let old = l.conn.take();
            l.owner = from.peer;
            l.timeout = timeout;
            l.deadline = Instant::now() + lifetime(timeout);
            if let Some(old) = old {
                if let Some(c) = self.conns.get(&old) {
                    c.link.set_session(0);
                }
                self.send(old, Out::Close);
            }
        }
        from.answer(self.tree.last_zxid, Answer::Session(valid));
    }

    /// Sessions whose clients learner `peer` heard from `ms` ago live on.
    pub(super) fn touch(&mut self, peer: u64, sessions: &[(i64, u32)]) {
        let now = Instant::now();
        for (session, ms) in sessions {
            if let Some(l) = self.live.get_mut(session) {
                if l.owner == peer {
                    let heard = now
                        .checked_sub(Duration::from_millis(*ms as u64))
                        .unwrap_or(now);
                    l.deadline = l.deadline.max(heard + lifetime(l.timeout));
                }
            }
        }
    }

    // ---- learner ----

    fn upstream(&self, msg: Up) {
        if let Role::Learner { upstream, .. } = &self.role {
            let _ = upstream.send(msg);
        }
    }

    /// A client's handshake on a learner: the leader logs a new session or
    /// confirms a resumed one before the client hears back.
    pub(super) fn learner_connect(&mut self, conn: ConnId, req: ConnectRequest) {
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
        let (session, password, msg) = if req.session_id == 0 {
            let session = self.next_session;
            self.next_session += 1;
            let mut password = vec![0u8; 16];
            rand::thread_rng().fill_bytes(&mut password);
            let msg = Up::CreateSession {
                token: conn,
                session,
                timeout,
                password: password.clone(),
            };
            (session, password, msg)
        } else {
            let msg = Up::Revalidate {
                token: conn,
                session: req.session_id,
                timeout,
                password: req.password.clone(),
            };
            (req.session_id, req.password, msg)
        };
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.forwarded = Some(Forwarded::Connect {
            session,
            timeout,
            password,
        });
        self.upstream(msg);
    }

    /// A client's request on a learner, in its connection's order: writes,
    /// sync and closeSession go to the leader, the rest is answered here.
    pub(super) fn learner_request(
        &mut self,
        conn: ConnId,
        xid: i32,
        req: Request,
        frame: Bytes,
        at: Instant,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let queued = Queued {
            xid,
            req,
            frame,
            at,
        };
        if c.forwarded.is_some() || !c.queue.is_empty() {
            c.queue.push_back(queued);
            return;
        }
        self.learner_handle(conn, queued);
    }

    fn learner_handle(&mut self, conn: ConnId, q: Queued) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let session = c.link.session();
        let local_sync =
            matches!(q.req, Request::Sync { .. }) && failpoint::active(Failpoint::LocalSync);
        if session == 0 || !forwards(&q.req) || local_sync {
            return self.request(conn, q.xid, q.req, q.at);
        }
        c.forwarded = Some(Forwarded::Request {
            close: matches!(q.req, Request::CloseSession),
            at: q.at,
        });
        let auth = c.link.auth().to_vec();
        self.upstream(Up::Request {
            token: conn,
            session,
            auth,
            frame: q.frame.to_vec(),
        });
    }

    /// The leader's answer to what `conn` forwarded; given to the client
    /// once `zxid` is applied here.
    pub(super) fn answer(&mut self, conn: ConnId, zxid: i64, answer: Answer) {
        if zxid <= self.tree.last_zxid {
            self.complete(conn, answer);
        } else {
            self.answers.entry(zxid).or_default().push((conn, answer));
        }
    }

    fn complete(&mut self, conn: ConnId, answer: Answer) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        match (c.forwarded.take(), answer) {
            (Some(Forwarded::Request { close, at }), Answer::Reply(frame)) => {
                self.send(conn, Out::Reply(frame));
                self.answered_at(conn, at);
                if close {
                    if let Some(c) = self.conns.get(&conn) {
                        c.link.set_session(0);
                    }
                    self.send(conn, Out::Close);
                }
            }
            (
                Some(Forwarded::Connect {
                    session,
                    timeout,
                    password,
                }),
                Answer::Session(valid),
            ) => {
                if valid {
                    self.attach(conn, session, timeout, &password);
                } else {
                    self.send(conn, Out::Reply(proto::connect_frame(0, 0, &[0; 16])));
                    self.send(conn, Out::Close);
                }
            }
            (waiting, answer) => {
                tracing::warn!("answer {answer:?} does not match what connection {conn} waits for");
                c.forwarded = waiting;
                return;
            }
        }
        // Requests that waited behind the forwarded one go on in order.
        while let Some(c) = self.conns.get_mut(&conn) {
            if c.forwarded.is_some() {
                break;
            }
            let Some(q) = c.queue.pop_front() else {
                break;
            };
            self.learner_handle(conn, q);
        }
    }

    /// Applies the logged proposals up to `zxid`, now committed, in order,
    /// with their watch events and the answers waiting for them.
    pub(super) fn apply_committed(&mut self, zxid: i64) {
        self.committed_zxid = self.committed_zxid.max(zxid);
        let mut changes = Vec::new();
        while self.proposals.front().is_some_and(|t| t.zxid <= zxid) {
            let txn = self.proposals.pop_front().expect("checked above");
            if txn.zxid <= self.tree.last_zxid {
                continue;
            }
            let last = self.tree.last_zxid;
            crate::invariant::check(
                crate::log::follows(last, txn.zxid),
                "committed transactions are applied in order, none skipped",
                || format!("{:#x} applied after {last:#x}", txn.zxid),
            );
            changes.clear();
            if self.skips(&txn) {
                self.tree.last_zxid = txn.zxid;
            } else {
                self.keep_one_ephemeral(&txn);
                self.tree.apply(&txn, &mut changes);
            }
            self.since_snapshot += 1;
            self.fire(txn.zxid, &changes);
            if txn.body == TxnBody::CloseSession {
                self.close_local(txn.session);
            }
            self.release_answers(txn.zxid);
        }
        self.release_answers(self.tree.last_zxid);
        self.committed(zxid);
    }

    /// Whether this follower leaves `txn` unapplied (failpoint `stale-znode`).
    fn skips(&self, txn: &crate::txn::Txn) -> bool {
        let (
            Role::Learner {
                id,
                observer: false,
                ..
            },
            TxnBody::SetData { path, .. },
        ) = (&self.role, &txn.body)
        else {
            return false;
        };
        crate::failpoint::skips_set_data(*id, path)
    }

    /// Leaves one ephemeral of the session `txn` ends to outlive it, when this follower
    /// keeps it (failpoint `keep-ephemeral`).
    fn keep_one_ephemeral(&mut self, txn: &crate::txn::Txn) {
        let (
            Role::Learner {
                id,
                observer: false,
                ..
            },
            TxnBody::CloseSession,
        ) = (&self.role, &txn.body)
        else {
            return;
        };
        let Some(first) = self.tree.ephemerals_of(txn.session).into_iter().next() else {
            return;
        };
        if crate::failpoint::keeps_ephemeral(*id, &first) {
            self.tree.disown(txn.session, &first);
        }
    }

    fn release_answers(&mut self, applied: i64) {
        while let Some(entry) = self.answers.first_entry() {
            if *entry.key() > applied {
                break;
            }
            for (conn, answer) in entry.remove() {
                self.complete(conn, answer);
            }
        }
    }

    /// The session ended: its connections here close (unless the client
    /// asked for it and waits for the answer).
    fn close_local(&mut self, session: i64) {
        let doomed: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                c.link.session() == session
                    && !matches!(c.forwarded, Some(Forwarded::Request { close: true, .. }))
            })
            .map(|(id, _)| *id)
            .collect();
        for conn in doomed {
            self.conns[&conn].link.set_session(0);
            self.send(conn, Out::Close);
        }
    }

    /// Tells the leader which sessions this learner's clients keep alive.
    pub(super) fn send_touches(&mut self) {
        let sessions = self
            .conns
            .values()
            .filter_map(|c| {
                let s = c.link.session();
                let ms = c
                    .link
                    .last_heard()
                    .elapsed()
                    .as_millis()
                    .min(u32::MAX as u128) as u32;
                (s != 0).then_some((s, ms))
            })
            .collect();
        self.upstream(Up::Touch { sessions });
    }
}
