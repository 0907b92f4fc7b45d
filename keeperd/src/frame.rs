//! Splits a byte stream into ZooKeeper frames: a 4-byte big-endian length,
//! then that many bytes. Lengths that are negative or above the limit are
//! errors, after which the connection must be closed.

use bytes::{Buf, Bytes, BytesMut};
use std::fmt;

/// Largest data a znode may hold (jute.maxbuffer, 1 MiB - 1 as in ZooKeeper).
pub const MAX_DATA: usize = 0xfffff;

/// Largest frame accepted: the data limit plus room for the path, ACL and headers.
pub const MAX_FRAME: usize = MAX_DATA + 16 * 1024;

/// A frame that can never be valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError(pub i64);

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid frame length {} (limit {MAX_FRAME})", self.0)
    }
}

impl std::error::Error for FrameError {}

/// Incremental frame splitter over bytes read from a socket.
#[derive(Default)]
pub struct FrameDecoder {
    buf: BytesMut,
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        FrameDecoder {
            buf: BytesMut::with_capacity(8 * 1024),
        }
    }

    /// The buffer the socket should read into.
    pub fn buffer(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Appends bytes received.
    pub fn extend(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The first four bytes received, if that many arrived (used to spot four-letter words).
    pub fn peek_word(&self) -> Option<[u8; 4]> {
        (self.buf.len() >= 4).then(|| [self.buf[0], self.buf[1], self.buf[2], self.buf[3]])
    }

    /// The next complete frame's payload, `None` if more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        if len < 0 || len as usize > MAX_FRAME {
            return Err(FrameError(len as i64));
        }
        let len = len as usize;
        if self.buf.len() < 4 + len {
            self.buf.reserve(4 + len - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(len).freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(payload: &[u8]) -> Vec<u8> {
        let mut v = (payload.len() as i32).to_be_bytes().to_vec();
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn splits_frames_fed_byte_by_byte() {
        let mut stream = framed(b"hello");
        stream.extend(framed(b""));
        stream.extend(framed(b"world!"));
        let mut d = FrameDecoder::new();
        let mut got = Vec::new();
        for b in stream {
            d.extend(&[b]);
            while let Some(f) = d.next_frame().unwrap() {
                got.push(f.to_vec());
            }
        }
        assert_eq!(got, vec![b"hello".to_vec(), vec![], b"world!".to_vec()]);
    }

    #[test]
    fn rejects_negative_and_oversized_lengths() {
        let mut d = FrameDecoder::new();
        d.extend(&(-1i32).to_be_bytes());
        assert_eq!(d.next_frame(), Err(FrameError(-1)));
        let mut d = FrameDecoder::new();
        d.extend(&((MAX_FRAME + 1) as i32).to_be_bytes());
        assert!(d.next_frame().is_err());
        let mut d = FrameDecoder::new();
        d.extend(&(MAX_FRAME as i32).to_be_bytes());
        assert_eq!(d.next_frame(), Ok(None));
    }
}
