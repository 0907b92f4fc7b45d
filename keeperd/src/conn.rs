//! What a connection's task and the core share: the outbox, the session the
//! connection is attached to, the identities it proved, how many of its
//! requests the core still has to answer, when it was last heard from and
//! its counters for `cons`. The core decides all of it; the task reads it to
//! answer reads itself (see [`crate::read::fast_reply`]) and stamps traffic.

use crate::auth::AuthId;
use crate::outbox::Outbox;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One connection's shared state; see the module docs.
pub struct Connection {
    /// Its outgoing bytes.
    pub outbox: Outbox,
    session: AtomicI64,
    auth: Mutex<Arc<[AuthId]>>,
    in_core: AtomicU64,
    opened: Instant,
    heard_ms: AtomicU64,
    received: AtomicU64,
    last_cxid: AtomicI32,
    last_op: AtomicI32,
    last_zxid: AtomicI64,
}

impl Connection {
    /// A connection writing to socket `fd`, proving `auth` (its address) so far.
    pub fn new(fd: RawFd, auth: Vec<AuthId>) -> Connection {
        Connection {
            outbox: Outbox::new(fd),
            session: AtomicI64::new(0),
            auth: Mutex::new(auth.into()),
            in_core: AtomicU64::new(0),
            opened: Instant::now(),
            heard_ms: AtomicU64::new(0),
            received: AtomicU64::new(0),
            last_cxid: AtomicI32::new(0),
            last_op: AtomicI32::new(0),
            last_zxid: AtomicI64::new(0),
        }
    }

    /// The attached session, 0 before the handshake and after it ends.
    pub fn session(&self) -> i64 {
        self.session.load(Ordering::Acquire)
    }

    /// Attaches (or with 0, detaches) a session.
    pub fn set_session(&self, session: i64) {
        self.session.store(session, Ordering::Release);
    }

    /// The identities proved so far.
    pub fn auth(&self) -> Arc<[AuthId]> {
        self.auth.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Adds a proved identity.
    pub fn add_auth(&self, id: AuthId) {
        let mut auth = self.auth.lock().unwrap_or_else(|e| e.into_inner());
        if !auth.contains(&id) {
            let mut ids = auth.to_vec();
            ids.push(id);
            *auth = ids.into();
        }
    }

    /// The task hands the core a message that the core answers with one reply.
    pub fn forwarded(&self) {
        self.in_core.fetch_add(1, Ordering::AcqRel);
    }

    /// The core has put the reply to a forwarded message in the outbox.
    pub fn answered(&self) {
        self.in_core.fetch_sub(1, Ordering::AcqRel);
    }

    /// Whether every forwarded message has its reply in the outbox, so a
    /// reply appended now keeps the connection's order.
    pub fn caught_up(&self) -> bool {
        self.in_core.load(Ordering::Acquire) == 0
    }

    /// Records a request frame: the session is alive, and `cons` counts it.
    pub fn heard(&self, xid: i32, opcode: i32) {
        let ms = self.opened.elapsed().as_millis() as u64;
        self.heard_ms.store(ms, Ordering::Relaxed);
        self.received.fetch_add(1, Ordering::Relaxed);
        if xid >= 0 {
            self.last_cxid.store(xid, Ordering::Relaxed);
        }
        self.last_op.store(opcode, Ordering::Relaxed);
    }

    /// When the last frame arrived (the connection's opening before any).
    pub fn last_heard(&self) -> Instant {
        self.opened + Duration::from_millis(self.heard_ms.load(Ordering::Relaxed))
    }

    /// Records the zxid of the latest reply.
    pub fn replied_at(&self, zxid: i64) {
        self.last_zxid.store(zxid, Ordering::Relaxed);
    }

    /// `(received, last cxid, last op code, last zxid)` for `cons`.
    pub fn counters(&self) -> (u64, i32, i32, i64) {
        (
            self.received.load(Ordering::Relaxed),
            self.last_cxid.load(Ordering::Relaxed),
            self.last_op.load(Ordering::Relaxed),
            self.last_zxid.load(Ordering::Relaxed),
        )
    }
}
