//! Byte sources the header parser reads from: an in-memory prefix or a
//! streaming `Read`.
//!
//! One parser serves both so that a file is read exactly once, front to back,
//! and never beyond its header (plus one buffer of read-ahead). Every read
//! knows its absolute position, so running out of input becomes
//! `Truncated { needed, have }` with the exact prefix length that would help.

use std::io::{self, BufRead, Read};

use super::error::GgufError;

/// A forward-only byte source with a known position.
pub(crate) trait Source {
    /// Bytes consumed so far.
    fn pos(&self) -> u64;

    /// Fills `buf` completely.
    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), GgufError>;

    /// Reads `n` bytes and hands them to `f`; nothing is allocated before the
    /// bytes are actually present.
    fn with_bytes<T>(&mut self, n: u64, f: impl FnOnce(&[u8]) -> T) -> Result<T, GgufError>;

    /// Reads past `n` bytes without keeping them.
    fn skip(&mut self, n: u64) -> Result<(), GgufError>;

    /// Reads a little-endian `u32`.
    fn u32(&mut self) -> Result<u32, GgufError> {
        let mut b = [0u8; 4];
        self.read_exact(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Reads a little-endian `u64`.
    fn u64(&mut self) -> Result<u64, GgufError> {
        let mut b = [0u8; 8];
        self.read_exact(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
}

/// `Truncated` for a read of `n` bytes at `pos` when only `have` exist.
fn truncated(pos: u64, n: u64, have: u64) -> GgufError {
    GgufError::Truncated {
        needed: pos.saturating_add(n),
        have,
    }
}

/// A source over an in-memory prefix of a file.
pub(crate) struct SliceSource<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> SliceSource<'a> {
    /// A source reading `data` from its start.
    pub(crate) fn new(data: &'a [u8]) -> Self {
        SliceSource { data, pos: 0 }
    }

    /// The next `n` bytes, advancing past them.
    fn take(&mut self, n: u64) -> Result<&'a [u8], GgufError> {
        let rest = &self.data[self.pos..];
        match usize::try_from(n) {
            Ok(n) if n <= rest.len() => {
                self.pos += n;
                Ok(&rest[..n])
            }
            _ => Err(truncated(self.pos(), n, self.data.len() as u64)),
        }
    }
}

impl Source for SliceSource<'_> {
    fn pos(&self) -> u64 {
        self.pos as u64
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), GgufError> {
        let bytes = self.take(buf.len() as u64)?;
        buf.copy_from_slice(bytes);
        Ok(())
    }

    fn with_bytes<T>(&mut self, n: u64, f: impl FnOnce(&[u8]) -> T) -> Result<T, GgufError> {
        self.take(n).map(f)
    }

    fn skip(&mut self, n: u64) -> Result<(), GgufError> {
        self.take(n).map(|_| ())
    }
}

/// A source over a buffered reader.
pub(crate) struct ReadSource<R> {
    inner: R,
    pos: u64,
    /// Total input length when known (a file), to refuse impossible skips
    /// without reading to the end.
    len: Option<u64>,
    /// Reused buffer for `with_bytes`.
    scratch: Vec<u8>,
}

impl<R: BufRead> ReadSource<R> {
    /// A source reading `inner` from its current position, which counts as 0.
    pub(crate) fn new(inner: R, len: Option<u64>) -> Self {
        ReadSource {
            inner,
            pos: 0,
            len,
            scratch: Vec::new(),
        }
    }

    /// Fails fast when `n` more bytes cannot exist.
    fn check_len(&self, n: u64) -> Result<(), GgufError> {
        match self.len {
            Some(len) if self.pos.checked_add(n).is_none_or(|end| end > len) => {
                Err(truncated(self.pos, n, len))
            }
            _ => Ok(()),
        }
    }
}

impl<R: BufRead> Source for ReadSource<R> {
    fn pos(&self) -> u64 {
        self.pos
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), GgufError> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => {
                    let have = self.pos + filled as u64;
                    return Err(truncated(self.pos, buf.len() as u64, have));
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.pos += filled as u64;
        Ok(())
    }

    fn with_bytes<T>(&mut self, n: u64, f: impl FnOnce(&[u8]) -> T) -> Result<T, GgufError> {
        self.check_len(n)?;
        self.scratch.clear();
        // `read_to_end` grows the buffer as bytes arrive, so a lying length
        // costs at most what the input really holds.
        let got = (&mut self.inner).take(n).read_to_end(&mut self.scratch)? as u64;
        if got < n {
            return Err(truncated(self.pos, n, self.pos + got));
        }
        self.pos += n;
        Ok(f(&self.scratch))
    }

    fn skip(&mut self, n: u64) -> Result<(), GgufError> {
        self.check_len(n)?;
        // Consuming from the buffer directly: skipping a vocabulary means
        // hundreds of thousands of small skips.
        let mut left = n;
        while left > 0 {
            let available = match self.inner.fill_buf() {
                Ok(buf) => buf.len(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            if available == 0 {
                return Err(truncated(self.pos, n, self.pos + (n - left)));
            }
            // `k` is at most `available`, a usize.
            let k = left.min(available as u64);
            self.inner.consume(k as usize);
            left -= k;
        }
        self.pos += n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needed(e: GgufError) -> (u64, u64) {
        match e {
            GgufError::Truncated { needed, have } => (needed, have),
            other => panic!("expected Truncated, got {other}"),
        }
    }

    #[test]
    fn slice_source_reports_exact_shortfall() {
        let data = [1, 0, 0, 0, 2, 0];
        let mut s = SliceSource::new(&data);
        assert_eq!(s.u32().ok(), Some(1));
        assert_eq!(needed(s.u32().expect_err("only 2 bytes left")), (8, 6));
        assert_eq!(
            needed(s.skip(u64::MAX).expect_err("cannot skip")),
            (u64::MAX, 6)
        );
        assert_eq!(s.with_bytes(2, |b| b.to_vec()).ok(), Some(vec![2, 0]));
        assert_eq!(s.pos(), 6);
    }

    #[test]
    fn read_source_matches_slice_source() {
        let data = [1, 0, 0, 0, 2, 0, 3];
        let mut s = ReadSource::new(&data[..], None);
        assert_eq!(s.u32().ok(), Some(1));
        assert_eq!(s.with_bytes(2, |b| b.to_vec()).ok(), Some(vec![2, 0]));
        assert_eq!(needed(s.u64().expect_err("1 byte left")), (14, 7));
        let mut s = ReadSource::new(&data[..], None);
        assert_eq!(needed(s.skip(1 << 40).expect_err("short")), (1 << 40, 7));
        let mut s = ReadSource::new(&data[..], Some(7));
        s.skip(3).expect("3 of 7 bytes");
        assert_eq!(
            needed(s.with_bytes(1 << 50, |_| ()).expect_err("short")),
            (3 + (1 << 50), 7)
        );
    }
}
