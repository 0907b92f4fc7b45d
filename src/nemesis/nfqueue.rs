//! A userspace stand-in for tc netem, for kernels built without `sch_netem` (such as the one
//! the local cluster may run on): iptables sends a node's outgoing packets to an NFQUEUE, and
//! this agent, running on the node, holds each for the configured delay (± jitter) before
//! accepting it, or drops it with the configured probability. Jitter reorders packets, as in
//! netem. The queue is set up to fail open, so packets flow again the moment the agent dies.
//!
//! It speaks nfnetlink_queue directly over a netlink socket: bind the queue, ask for packet
//! metadata only, and answer each packet id with a verdict.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::time::{Duration, Instant};

use rand::Rng;

const NETLINK_NETFILTER: i32 = 12;
const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_VERDICT: u16 = 1;
const NFQNL_MSG_CONFIG: u16 = 2;
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQA_CFG_MASK: u16 = 4;
const NFQA_CFG_FLAGS: u16 = 5;
const NFQA_CFG_F_FAIL_OPEN: u32 = 1;
const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_COPY_META: u8 = 1;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NF_DROP: u32 = 0;
const NF_ACCEPT: u32 = 1;

/// What the agent does to each packet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shaping {
    /// Added delay.
    pub delay: Duration,
    /// Uniform variation of the delay, ±.
    pub jitter: Duration,
    /// Probability of dropping a packet, 0 to 1.
    pub loss: f64,
}

/// Appends a netlink attribute (type, payload, padding to 4 bytes).
fn push_attr(buf: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    buf.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(payload);
    while !buf.len().is_multiple_of(4) {
        buf.push(0);
    }
}

/// A whole nfnetlink_queue message: netlink header, nfgenmsg for `queue`, then `attrs`.
pub fn message(msg: u16, queue: u16, attrs: &[u8]) -> Vec<u8> {
    let len = 16 + 4 + attrs.len();
    let mut buf = Vec::with_capacity(len);
    buf.extend_from_slice(&(len as u32).to_ne_bytes());
    buf.extend_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | msg).to_ne_bytes());
    buf.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes()); // sequence
    buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
    buf.extend_from_slice(&[libc::AF_UNSPEC as u8, 0]); // family, version
    buf.extend_from_slice(&queue.to_be_bytes());
    buf.extend_from_slice(attrs);
    buf
}

/// The verdict message for packet `id`.
pub fn verdict(queue: u16, id: u32, verdict: u32) -> Vec<u8> {
    let mut attrs = Vec::new();
    let mut hdr = verdict.to_be_bytes().to_vec();
    hdr.extend_from_slice(&id.to_be_bytes());
    push_attr(&mut attrs, NFQA_VERDICT_HDR, &hdr);
    message(NFQNL_MSG_VERDICT, queue, &attrs)
}

/// The packet ids in a buffer of netlink messages from the kernel; an error message from the
/// kernel (a refused configuration) is returned as an error.
pub fn packet_ids(buf: &[u8]) -> io::Result<Vec<u32>> {
    let mut ids = Vec::new();
    let mut at = 0;
    while at + 16 <= buf.len() {
        let len = u32::from_ne_bytes(buf[at..at + 4].try_into().expect("4 bytes")) as usize;
        let kind = u16::from_ne_bytes(buf[at + 4..at + 6].try_into().expect("2 bytes"));
        if len < 16 || at + len > buf.len() {
            break;
        }
        if kind == NLMSG_ERROR {
            let code = i32::from_ne_bytes(buf[at + 16..at + 20].try_into().expect("4 bytes"));
            if code != 0 {
                return Err(io::Error::from_raw_os_error(-code));
            }
        } else if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET {
            let mut attr = at + 20;
            while attr + 4 <= at + len {
                let alen =
                    u16::from_ne_bytes(buf[attr..attr + 2].try_into().expect("2 bytes")) as usize;
                let akind =
                    u16::from_ne_bytes(buf[attr + 2..attr + 4].try_into().expect("2 bytes"))
                        & 0x7fff;
                if alen < 4 {
                    break;
                }
                if akind == NFQA_PACKET_HDR && alen >= 8 {
                    ids.push(u32::from_be_bytes(
                        buf[attr + 4..attr + 8].try_into().expect("4 bytes"),
                    ));
                }
                attr += (alen + 3) & !3;
            }
        }
        at += (len + 3) & !3;
    }
    Ok(ids)
}

/// A netlink socket bound to one queue.
struct Queue {
    fd: i32,
}

impl Queue {
    fn bind(number: u16) -> io::Result<Queue> {
        // SAFETY: plain socket creation; the descriptor is owned by the returned Queue.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_NETFILTER,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let queue = Queue { fd };
        let mut cmd = Vec::new();
        push_attr(
            &mut cmd,
            NFQA_CFG_CMD,
            &[NFQNL_CFG_CMD_BIND, 0, 0, libc::AF_INET as u8],
        );
        queue.send(&message(NFQNL_MSG_CONFIG, number, &cmd))?;
        let mut params = Vec::new();
        let mut copy = 0u32.to_be_bytes().to_vec();
        copy.push(NFQNL_COPY_META);
        push_attr(&mut params, NFQA_CFG_PARAMS, &copy);
        push_attr(&mut params, NFQA_CFG_QUEUE_MAXLEN, &65536u32.to_be_bytes());
        push_attr(
            &mut params,
            NFQA_CFG_MASK,
            &NFQA_CFG_F_FAIL_OPEN.to_be_bytes(),
        );
        push_attr(
            &mut params,
            NFQA_CFG_FLAGS,
            &NFQA_CFG_F_FAIL_OPEN.to_be_bytes(),
        );
        queue.send(&message(NFQNL_MSG_CONFIG, number, &params))?;
        Ok(queue)
    }

    fn send(&self, msg: &[u8]) -> io::Result<()> {
        // SAFETY: a zeroed sockaddr_nl addresses the kernel; the buffer outlives the call.
        let n = unsafe {
            let mut kernel: libc::sockaddr_nl = std::mem::zeroed();
            kernel.nl_family = libc::AF_NETLINK as u16;
            libc::sendto(
                self.fd,
                msg.as_ptr().cast(),
                msg.len(),
                0,
                (&kernel as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits up to `timeout` for messages; returns the packet ids that arrived.
    fn receive(&self, buf: &mut [u8], timeout: Duration) -> io::Result<Vec<u32>> {
        let mut pollfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(1000) as i32;
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut pollfd, 1, ms) };
        if ready <= 0 {
            return Ok(Vec::new());
        }
        // SAFETY: the buffer is valid for its length.
        let n = unsafe {
            libc::recv(
                self.fd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            // ENOBUFS: the kernel dropped messages; fail-open keeps traffic moving.
            return if e.raw_os_error() == Some(libc::ENOBUFS)
                || e.kind() == io::ErrorKind::WouldBlock
            {
                Ok(Vec::new())
            } else {
                Err(e)
            };
        }
        packet_ids(&buf[..n as usize])
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // SAFETY: closing the descriptor this Queue owns.
        unsafe { libc::close(self.fd) };
    }
}

/// Runs the agent on queue `number` until it is killed.
pub fn run(number: u16, shaping: Shaping) -> io::Result<()> {
    let queue = Queue::bind(number)?;
    let mut rng = rand::thread_rng();
    let mut due: BinaryHeap<Reverse<(Instant, u32)>> = BinaryHeap::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let now = Instant::now();
        while let Some(Reverse((at, id))) = due.peek().copied() {
            if at > now {
                break;
            }
            due.pop();
            queue.send(&verdict(number, id, NF_ACCEPT))?;
        }
        let wait = due
            .peek()
            .map(|Reverse((at, _))| at.saturating_duration_since(now))
            .unwrap_or(Duration::from_secs(1));
        for id in queue.receive(&mut buf, wait)? {
            if shaping.loss > 0.0 && rng.gen_bool(shaping.loss.min(1.0)) {
                queue.send(&verdict(number, id, NF_DROP))?;
                continue;
            }
            let jitter = shaping.jitter.as_secs_f64();
            let delay = (shaping.delay.as_secs_f64() + rng.gen_range(-jitter..=jitter)).max(0.0);
            due.push(Reverse((
                Instant::now() + Duration::from_secs_f64(delay),
                id,
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_well_formed() {
        let msg = verdict(7, 0x01020304, NF_ACCEPT);
        assert_eq!(msg.len(), 16 + 4 + 12);
        assert_eq!(
            u32::from_ne_bytes(msg[0..4].try_into().unwrap()) as usize,
            msg.len()
        );
        assert_eq!(
            u16::from_ne_bytes(msg[4..6].try_into().unwrap()),
            (3 << 8) | 1
        );
        assert_eq!(&msg[18..20], &7u16.to_be_bytes());
        assert_eq!(&msg[24..28], &NF_ACCEPT.to_be_bytes());
        assert_eq!(&msg[28..32], &0x01020304u32.to_be_bytes());
    }

    #[test]
    fn packet_ids_are_read_from_packet_messages() {
        let mut attrs = Vec::new();
        push_attr(&mut attrs, NFQA_PACKET_HDR, &[0, 0, 0, 42, 8, 0, 3]);
        let mut buf = message(NFQNL_MSG_PACKET, 1, &attrs);
        let mut attrs = Vec::new();
        push_attr(&mut attrs, NFQA_PACKET_HDR, &[0, 0, 1, 0, 8, 0, 3]);
        buf.extend(message(NFQNL_MSG_PACKET, 1, &attrs));
        assert_eq!(packet_ids(&buf).unwrap(), vec![42, 256]);
    }

    #[test]
    fn kernel_errors_surface() {
        let mut buf = vec![0u8; 36];
        buf[0..4].copy_from_slice(&36u32.to_ne_bytes());
        buf[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        buf[16..20].copy_from_slice(&(-libc::EPERM).to_ne_bytes());
        assert_eq!(
            packet_ids(&buf).unwrap_err().raw_os_error(),
            Some(libc::EPERM)
        );
    }
}
