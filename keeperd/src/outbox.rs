//! A connection's outgoing bytes. Whoever has frames for the connection
//! appends them, then either writes them to the socket directly with a
//! non-blocking send ([`Outbox::flush`]: the connection task answering a
//! read, the core's writer thread) or hands them to the connection task
//! ([`Outbox::hand_over`]). When the socket cannot take everything at once,
//! the task takes over and drains the rest asynchronously. While the task
//! writes, everyone else only appends, so bytes reach the socket in the
//! order they were appended.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use tokio::sync::Notify;

/// What the connection task should do next (see [`Outbox::take`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Drain {
    /// Write these bytes, then ask again.
    Write(Vec<u8>),
    /// Nothing left to write; direct sends resume.
    Idle,
    /// Everything is written and the connection is to be closed.
    Close,
}

struct State {
    buf: Vec<u8>,
    /// The connection task is writing (a direct send could not finish, or a
    /// close was asked for): others only append.
    task_writes: bool,
    closing: bool,
    /// The socket is gone; appends are dropped.
    closed: bool,
}

/// Outgoing bytes of one connection; see the module docs.
pub struct Outbox {
    fd: RawFd,
    state: Mutex<State>,
    wake: Notify,
    frames: AtomicU64,
}

impl Outbox {
    /// An outbox writing to the socket `fd`. The connection task owns the
    /// socket and must call [`Outbox::shut`] before closing it.
    pub fn new(fd: RawFd) -> Outbox {
        Outbox {
            fd,
            state: Mutex::new(State {
                buf: Vec::new(),
                task_writes: false,
                closing: false,
                closed: false,
            }),
            wake: Notify::new(),
            frames: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends one frame without writing it yet (see [`Outbox::flush`]).
    pub fn stage(&self, frame: &[u8]) {
        let mut s = self.lock();
        if !s.closed && !s.closing {
            s.buf.extend_from_slice(frame);
            self.frames.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Writes what was appended, directly if the socket takes it, else hands
    /// the rest to the connection task.
    pub fn flush(&self) {
        let mut s = self.lock();
        if s.buf.is_empty() || s.task_writes || s.closed {
            return;
        }
        let mut sent = 0;
        while sent < s.buf.len() {
            let rest = &s.buf[sent..];
            // SAFETY: `fd` stays open while `closed` is false (the task calls
            // `shut` under this lock before dropping the socket), and `rest`
            // is a valid slice.
            let n = unsafe {
                libc::send(
                    self.fd,
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            if n > 0 {
                sent += n as usize;
            } else if n < 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
                continue;
            } else {
                // Full (or broken): the task writes the rest, or sees the error.
                break;
            }
        }
        s.buf.drain(..sent);
        if !s.buf.is_empty() {
            s.task_writes = true;
            self.wake.notify_one();
        }
    }

    /// Asks the connection task to write what was appended.
    pub fn hand_over(&self) {
        let mut s = self.lock();
        if !s.buf.is_empty() && !s.task_writes && !s.closed {
            s.task_writes = true;
            self.wake.notify_one();
        }
    }

    /// Appends one frame and writes it.
    pub fn send(&self, frame: &[u8]) {
        self.stage(frame);
        self.flush();
    }

    /// Asks the connection task to write everything appended so far, then
    /// close the connection. Later frames are dropped.
    pub fn close(&self) {
        let mut s = self.lock();
        if !s.closing {
            s.closing = true;
            s.task_writes = true;
            self.wake.notify_one();
        }
    }

    /// Frames appended so far.
    pub fn frames(&self) -> u64 {
        self.frames.load(Ordering::Relaxed)
    }

    /// Resolves when the connection task has something to do.
    pub async fn notified(&self) {
        self.wake.notified().await
    }

    /// For the connection task: the next bytes to write, or whether to go idle or close.
    pub fn take(&self) -> Drain {
        let mut s = self.lock();
        if !s.buf.is_empty() {
            s.task_writes = true;
            return Drain::Write(std::mem::take(&mut s.buf));
        }
        if s.closing {
            return Drain::Close;
        }
        s.task_writes = false;
        Drain::Idle
    }

    /// For the connection task, before it closes the socket: no more writes.
    pub fn shut(&self) {
        let mut s = self.lock();
        s.closed = true;
        s.buf = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    #[test]
    fn writes_directly_in_order_and_hands_over_when_full() {
        let (server, mut client) = pair();
        let out = Outbox::new(server.as_raw_fd());
        out.stage(b"ab");
        out.send(b"cd");
        let mut got = [0u8; 4];
        client.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"abcd");
        assert_eq!(out.take(), Drain::Idle);
        assert_eq!(out.frames(), 2);

        // Nobody reads: the socket fills, the task is asked to write the rest.
        let big = vec![7u8; 1 << 20];
        let mut handed_over = false;
        for _ in 0..64 {
            out.send(&big);
            if out.lock().task_writes {
                handed_over = true;
                break;
            }
        }
        assert!(handed_over, "a full socket never handed over to the task");
        out.send(b"late");
        let Drain::Write(rest) = out.take() else {
            panic!("nothing to drain")
        };
        assert!(rest.ends_with(b"late"), "a later frame jumped the queue");
        // While the task writes, frames are appended, not sent.
        out.send(b"x");
        assert_eq!(out.take(), Drain::Write(b"x".to_vec()));
        assert_eq!(out.take(), Drain::Idle);
        // A hand-over leaves the writing to the task.
        out.stage(b"y");
        out.hand_over();
        out.flush();
        assert_eq!(out.take(), Drain::Write(b"y".to_vec()));
        assert_eq!(out.take(), Drain::Idle);

        out.close();
        out.send(b"dropped");
        assert_eq!(out.take(), Drain::Close);
        out.shut();
        out.send(b"after shut");
        assert_eq!(out.take(), Drain::Close);
    }
}
