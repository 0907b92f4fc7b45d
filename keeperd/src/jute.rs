//! Jute, ZooKeeper's record encoding: big-endian integers, length-prefixed
//! buffers and strings (length -1 means null), length-prefixed vectors.

use std::fmt;

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed record: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}

/// Result of decoding.
pub type DecodeResult<T> = Result<T, DecodeError>;

/// Reads jute primitives from a byte slice, never panicking on short input.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`, starting at its first byte.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Skips every byte not read yet.
    pub fn skip_rest(&mut self) {
        self.pos = self.buf.len();
    }

    fn take(&mut self, n: usize) -> DecodeResult<&'a [u8]> {
        if self.remaining() < n {
            return Err(DecodeError("truncated"));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// An `int`.
    pub fn i32(&mut self) -> DecodeResult<i32> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A `long`.
    pub fn i64(&mut self) -> DecodeResult<i64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    /// A `boolean` (one byte).
    pub fn bool(&mut self) -> DecodeResult<bool> {
        Ok(self.take(1)?[0] != 0)
    }

    /// A `buffer`; null (-1) reads as empty.
    pub fn buffer(&mut self) -> DecodeResult<Vec<u8>> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(Vec::new());
        }
        Ok(self.take(len as usize)?.to_vec())
    }

    /// A `ustring`; null (-1) reads as empty.
    pub fn string(&mut self) -> DecodeResult<String> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(String::new());
        }
        let b = self.take(len as usize)?;
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError("string is not UTF-8"))
    }

    /// A `vector`, each element read by `item`; null (-1) reads as empty.
    pub fn vec<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> DecodeResult<T>,
    ) -> DecodeResult<Vec<T>> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(Vec::new());
        }
        // Each element takes at least one byte: refuse counts the input cannot hold.
        if len as usize > self.remaining() {
            return Err(DecodeError("vector longer than its frame"));
        }
        let mut out = Vec::with_capacity(len as usize);
        for _ in 0..len {
            out.push(item(self)?);
        }
        Ok(out)
    }
}

/// Appends jute primitives to a byte vector.
#[derive(Default)]
pub struct Writer {
    /// The bytes written so far.
    pub buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Writer {
            buf: Vec::with_capacity(64),
        }
    }

    /// An `int`.
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// A `long`.
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// A `boolean`.
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.buf.push(v as u8);
        self
    }

    /// A `buffer`.
    pub fn buffer(&mut self, v: &[u8]) -> &mut Self {
        self.i32(v.len() as i32);
        self.buf.extend_from_slice(v);
        self
    }

    /// A `ustring`.
    pub fn string(&mut self, v: &str) -> &mut Self {
        self.buffer(v.as_bytes())
    }

    /// A vector of strings.
    pub fn strings<S: AsRef<str>>(&mut self, v: &[S]) -> &mut Self {
        self.i32(v.len() as i32);
        for s in v {
            self.string(s.as_ref());
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives_round_trip() {
        let mut w = Writer::new();
        w.i32(-7)
            .i64(1 << 40)
            .bool(true)
            .buffer(b"ab")
            .string("zk")
            .strings(&["x", "y"]);
        let mut r = Reader::new(&w.buf);
        assert_eq!(r.i32().unwrap(), -7);
        assert_eq!(r.i64().unwrap(), 1 << 40);
        assert!(r.bool().unwrap());
        assert_eq!(r.buffer().unwrap(), b"ab");
        assert_eq!(r.string().unwrap(), "zk");
        assert_eq!(r.vec(|r| r.string()).unwrap(), vec!["x", "y"]);
        assert_eq!(r.remaining(), 0);
        assert!(r.i32().is_err());
    }

    #[test]
    fn oversized_lengths_are_errors() {
        let mut w = Writer::new();
        w.i32(i32::MAX);
        assert!(Reader::new(&w.buf).buffer().is_err());
        assert!(Reader::new(&w.buf).vec(|r| r.i32()).is_err());
    }
}
