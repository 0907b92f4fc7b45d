//! The connection layer: accepts TCP clients, splits their byte streams into
//! frames, decodes the handshake and requests, forwards them to the core and
//! writes back what the core sends. A connection that sends an invalid
//! frame or record is closed; no client can block another.

use crate::core::{CoreMsg, Out};
use crate::fourlw;
use crate::frame::FrameDecoder;
use crate::jute::Reader;
use crate::proto::{ConnectRequest, Request};
use crate::watch::ConnId;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

/// Accepts clients forever, one task per connection.
pub async fn serve(listener: TcpListener, core: Sender<CoreMsg>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let core = core.clone();
                tokio::spawn(async move {
                    if let Err(e) = connection(stream, core).await {
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

async fn connection(mut stream: TcpStream, core: Sender<CoreMsg>) -> std::io::Result<()> {
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
    if fourlw::is_word(&word) {
        let (reply, rx) = oneshot::channel();
        let word = String::from_utf8_lossy(&word).into_owned();
        if core.send(CoreMsg::Command { word, reply }).is_ok() {
            if let Ok(text) = rx.await {
                stream.write_all(text.as_bytes()).await?;
            }
        }
        return stream.shutdown().await;
    }
    let conn = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    if core
        .send(CoreMsg::Open {
            conn,
            addr,
            out: out_tx,
        })
        .is_err()
    {
        return Ok(());
    }
    let result = pump(&mut stream, decoder, out_rx, conn, &core).await;
    let _ = core.send(CoreMsg::Closed { conn });
    result
}

/// Reads requests and writes replies until either side ends.
async fn pump(
    stream: &mut TcpStream,
    mut decoder: FrameDecoder,
    mut out_rx: mpsc::UnboundedReceiver<Out>,
    conn: ConnId,
    core: &Sender<CoreMsg>,
) -> std::io::Result<()> {
    let invalid = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let (mut rd, mut wr) = stream.split();
    let mut handshaken = false;
    let mut write_buf = Vec::with_capacity(16 * 1024);
    loop {
        // Decode everything already buffered.
        while let Some(frame) = decoder.next_frame().map_err(|e| invalid(e.to_string()))? {
            let msg = if !handshaken {
                handshaken = true;
                let req = ConnectRequest::decode(&frame).map_err(|e| invalid(e.to_string()))?;
                CoreMsg::Connect { conn, req }
            } else {
                let mut r = Reader::new(&frame);
                let (xid, opcode) = match (r.i32(), r.i32()) {
                    (Ok(x), Ok(o)) => (x, o),
                    _ => return Err(invalid("request header truncated".into())),
                };
                let req = Request::decode(opcode, &frame[8..])
                    .map_err(|e| invalid(format!("op {opcode}: {e}")))?;
                CoreMsg::Request {
                    conn,
                    xid,
                    opcode,
                    req,
                    at: Instant::now(),
                }
            };
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
            out = out_rx.recv() => {
                let Some(first) = out else { return Ok(()) };
                let mut close = false;
                let mut next = Some(first);
                while let Some(o) = next.take() {
                    match o {
                        Out::Frame(f) => write_buf.extend_from_slice(&f),
                        Out::Close => {
                            close = true;
                            break;
                        }
                    }
                    if write_buf.len() < 256 * 1024 {
                        next = out_rx.try_recv().ok();
                    }
                }
                wr.write_all(&write_buf).await?;
                write_buf.clear();
                if close {
                    let _ = wr.shutdown().await;
                    return Ok(());
                }
            }
        }
    }
}
