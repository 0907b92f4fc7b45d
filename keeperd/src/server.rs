//! The connection layer: accepts TCP clients, splits their byte streams into
//! frames, decodes the handshake and requests, answers plain reads itself
//! when it can ([`crate::read::fast_reply`]) and forwards everything else to
//! the core. Replies reach the socket through the connection's
//! [`crate::outbox::Outbox`]; this task writes only what the socket could not
//! take at once. A connection that sends an invalid frame or record is
//! closed; no client can block another.
//!
//! Connections go to the core behind the [`Gate`]: in an ensemble a
//! server serves only while it leads, follows or observes an established
//! leader; otherwise a client's handshake waits a moment for it to serve
//! ([`HOLD_WHILE_NOT_SERVING`], then the client is turned away) and
//! four-letter words say it does not serve.

use crate::auth::AuthId;
use crate::conn::Connection;
use crate::core::{CoreMsg, Shared};
use crate::fourlw;
use crate::frame::FrameDecoder;
use crate::jute::Reader;
use crate::outbox::Drain;
use crate::proto::{ConnectRequest, Request};
use crate::read::{answerable, fast_reply};
use crate::watch::ConnId;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Notify};

static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

/// What ZooKeeper answers a four-letter word with when it does not serve.
pub const NOT_SERVING: &str = "This ZooKeeper instance is not currently serving requests\n";

/// The core clients are served by.
#[derive(Clone)]
pub struct Serving {
    /// Its inbox.
    pub core: Sender<CoreMsg>,
    /// What it shares with connections.
    pub shared: Arc<Shared>,
}

/// How long a client's handshake waits for a server that does not serve (an
/// ensemble member electing or syncing) before the connection is turned away.
/// Turned away at once, clients back off more and more between attempts, and
/// come back long after the election ended; the Java client gives up on a
/// silent server by itself (session timeout / number of servers).
pub const HOLD_WHILE_NOT_SERVING: Duration = Duration::from_secs(2);

/// Which core serves clients, if any.
#[derive(Default)]
pub struct Gate {
    serving: Mutex<Option<Serving>>,
    /// How many times it opened.
    opened: AtomicU64,
    /// Woken when it opens.
    opening: Notify,
}

impl Gate {
    /// A gate open to `serving` from the start (a standalone server).
    pub fn open_to(serving: Serving) -> Gate {
        Gate {
            serving: Mutex::new(Some(serving)),
            ..Gate::default()
        }
    }

    /// New connections go to `serving`.
    pub fn open(&self, serving: Serving) {
        *self.serving.lock().unwrap_or_else(|e| e.into_inner()) = Some(serving);
        self.opened.fetch_add(1, Ordering::Relaxed);
        self.opening.notify_waiters();
    }

    /// How many times the gate has opened: a role that served opened it.
    pub fn times_opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// The core serving clients, waiting up to `limit` for one.
    async fn serving_within(&self, limit: Duration) -> Option<Serving> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let opened = self.opening.notified();
            tokio::pin!(opened);
            opened.as_mut().enable();
            if let Some(serving) = self.current() {
                return Some(serving);
            }
            tokio::time::timeout_at(deadline, opened).await.ok()?;
        }
    }

    /// New connections are turned away.
    pub fn close(&self) {
        *self.serving.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    fn current(&self) -> Option<Serving> {
        self.serving
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Accepts clients forever, one task per connection.
pub async fn serve(listener: TcpListener, gate: Arc<Gate>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let gate = gate.clone();
                tokio::spawn(async move {
                    if let Err(e) = connection(stream, gate).await {
                        tracing::debug!("connection closed: {e}");
                    }
                });
            }
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

async fn connection(mut stream: TcpStream, gate: Arc<Gate>) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let addr = stream.peer_addr()?;
    let mut decoder = FrameDecoder::new();
    // A four-letter word arrives as the connection's first four bytes.
    while decoder.peek_word().is_none() {
        if stream.read_buf(decoder.buffer()).await? == 0 {
            return Ok(());
        }
    }
    let word = decoder.peek_word().unwrap();
    let serving = gate.current();
    if fourlw::is_word(&word) {
        let word = String::from_utf8_lossy(&word).into_owned();
        let text = match serving {
            Some(s) => {
                let (reply, rx) = oneshot::channel();
                let _ = s.core.send(CoreMsg::Command { word, reply });
                rx.await.unwrap_or_else(|_| NOT_SERVING.to_string())
            }
            None if word == "ruok" => "imok".to_string(),
            None => NOT_SERVING.to_string(),
        };
        stream.write_all(text.as_bytes()).await?;
        return stream.shutdown().await;
    }
    let serving = match serving {
        Some(s) => Some(s),
        None => gate.serving_within(HOLD_WHILE_NOT_SERVING).await,
    };
    let Some(Serving { core, shared }) = serving else {
        return Ok(());
    };
    let conn = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
    let ip = AuthId {
        scheme: "ip".into(),
        id: addr.ip().to_string(),
    };
    let link = Arc::new(Connection::new(stream.as_raw_fd(), vec![ip]));
    if core
        .send(CoreMsg::Open {
            conn,
            addr,
            link: link.clone(),
        })
        .is_err()
    {
        return Ok(());
    }
    let result = pump(&mut stream, decoder, &link, conn, &core, &shared).await;
    // Nobody writes to the socket once it is dropped.
    link.outbox.shut();
    let _ = core.send(CoreMsg::Closed { conn });
    result
}

/// Reads requests and writes what the outbox hands over until either side ends.
async fn pump(
    stream: &mut TcpStream,
    mut decoder: FrameDecoder,
    link: &Connection,
    conn: ConnId,
    core: &Sender<CoreMsg>,
    shared: &Shared,
) -> std::io::Result<()> {
    let invalid = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let (mut rd, mut wr) = stream.split();
    let mut handshaken = false;
    loop {
        // Decode everything already buffered.
        while let Some(frame) = decoder.next_frame().map_err(|e| invalid(e.to_string()))? {
            let msg = if !handshaken {
                handshaken = true;
                let req = ConnectRequest::decode(&frame).map_err(|e| invalid(e.to_string()))?;
                CoreMsg::Connect { conn, req }
            } else {
                let at = Instant::now();
                let mut r = Reader::new(&frame);
                let (xid, opcode) = match (r.i32(), r.i32()) {
                    (Ok(x), Ok(o)) => (x, o),
                    _ => return Err(invalid("request header truncated".into())),
                };
                let req = Request::decode(opcode, &frame[8..])
                    .map_err(|e| invalid(format!("op {opcode}: {e}")))?;
                link.heard(xid, opcode);
                let traffic = &shared.traffic;
                traffic.packets_received.fetch_add(1, Ordering::Relaxed);
                if answerable(&req)
                    && link.session() != 0
                    && link.caught_up()
                    && shared.may_answer()
                {
                    let reply = {
                        let tree = shared.tree();
                        fast_reply(&tree, shared.visible_zxid(), &link.auth(), xid, &req)
                    };
                    if let Some(reply) = reply {
                        link.outbox.send(&reply);
                        traffic.packets_sent.fetch_add(1, Ordering::Relaxed);
                        traffic.latency.record(at.elapsed().as_millis() as u64);
                        continue;
                    }
                }
                CoreMsg::Request {
                    conn,
                    xid,
                    req,
                    frame,
                    at,
                }
            };
            link.forwarded();
            if core.send(msg).is_err() {
                return Ok(());
            }
        }
        tokio::select! {
            n = rd.read_buf(decoder.buffer()) => {
                if n? == 0 {
                    return Ok(());
                }
            }
            () = link.outbox.notified() => loop {
                match link.outbox.take() {
                    Drain::Write(bytes) => wr.write_all(&bytes).await?,
                    Drain::Idle => break,
                    Drain::Close => {
                        let _ = wr.shutdown().await;
                        return Ok(());
                    }
                }
            }
        }
    }
}
