//! Replies sent from where their bytes are: the headers in one buffer,
//! a read's data as the pieces of the byte store it is made of
//! ([`ReadBytes`]), all handed to the socket by vectored writes (`writev`).
//!
//! Before, a read's bytes were copied from the byte store into a fresh
//! buffer, then into the connection's `BufWriter`, then by the kernel into
//! the socket: two copies in the server besides the kernel's. Now the
//! kernel's is the only one; runs of zeros (never-written or trimmed
//! sectors) point at one static zero page, repeated. Replies are gathered
//! until the connection flushes them (when the client has no request
//! queued, or [`Outgoing::FLUSH_AT_BYTES`] are pending), so a pipelining
//! client still gets a batch per system call.

use super::bytes::{Piece, ReadBytes};
use std::io::{IoSlice, Write};

/// Zeros for runs of zeros, by reference.
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

/// Slices per `writev` (Linux's `IOV_MAX`).
const IOV_MAX: usize = 1024;

enum Part {
    /// Header bytes `from .. to` of [`Outgoing::headers`].
    Header {
        from: usize,
        to: usize,
    },
    Data(Piece),
}

/// Replies not yet sent (see the module docs).
#[derive(Default)]
pub struct Outgoing {
    headers: Vec<u8>,
    parts: Vec<Part>,
    pending_bytes: usize,
}

impl Outgoing {
    /// Pending bytes past which the connection sends without waiting for
    /// the client's queue to empty.
    pub const FLUSH_AT_BYTES: usize = 256 << 10;

    /// Queue the bytes of a reply's header (copied: a few bytes).
    pub fn push_header(&mut self, header: &[u8]) {
        let from = self.headers.len();
        self.headers.extend_from_slice(header);
        let to = self.headers.len();
        match self.parts.last_mut() {
            Some(Part::Header { to: end, .. }) if *end == from => *end = to,
            _ => self.parts.push(Part::Header { from, to }),
        }
        self.pending_bytes += header.len();
    }

    /// Queue a read's data (not copied: its pieces are shared).
    pub fn push_data(&mut self, data: &ReadBytes) {
        self.parts.extend(data.pieces().iter().cloned().map(Part::Data));
        self.pending_bytes += data.len();
    }

    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    /// Send everything queued to `out`; the queue is empty afterwards
    /// (also after an error).
    pub fn send(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        if self.parts.is_empty() {
            return Ok(());
        }
        let result = {
            let mut slices = Vec::with_capacity(self.parts.len());
            for part in &self.parts {
                match part {
                    Part::Header { from, to } => slices.push(IoSlice::new(&self.headers[*from..*to])),
                    Part::Data(Piece::Kept { bytes, from, len }) => {
                        slices.push(IoSlice::new(&bytes[*from..from + len]))
                    }
                    Part::Data(Piece::Zeros(len)) => {
                        let mut left = *len;
                        while left > 0 {
                            let n = left.min(ZEROS.len());
                            slices.push(IoSlice::new(&ZEROS[..n]));
                            left -= n;
                        }
                    }
                }
            }
            write_all_vectored(out, &mut slices)
        };
        self.headers.clear();
        self.parts.clear();
        self.pending_bytes = 0;
        result
    }
}

/// `write_all` of `slices` by vectored writes (std's own is unstable).
fn write_all_vectored(out: &mut impl Write, mut slices: &mut [IoSlice<'_>]) -> std::io::Result<()> {
    while !slices.is_empty() {
        let end = slices.len().min(IOV_MAX);
        match out.write_vectored(&slices[..end]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A writer that takes at most 5 bytes of one slice per call (short
    /// writes), recording what it got.
    struct Trickle(Vec<u8>);

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let n = buf.len().min(5);
            self.0.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn replies_go_out_in_order_whole_through_short_writes() {
        let kept = Arc::new((0..200u8).collect::<Vec<u8>>());
        let mut data = ReadBytes::default();
        data.push(Piece::Kept { bytes: Arc::clone(&kept), from: 10, len: 20 });
        data.push(Piece::Zeros(70_000));
        data.push(Piece::Kept { bytes: Arc::clone(&kept), from: 150, len: 50 });
        let mut out = Outgoing::default();
        out.push_header(b"HEAD");
        out.push_data(&data);
        out.push_header(b"H2");
        out.push_header(b"H3");
        assert_eq!(out.pending_bytes(), 4 + 70_070 + 4);
        let mut sink = Trickle(Vec::new());
        out.send(&mut sink).unwrap();
        let mut expected = b"HEAD".to_vec();
        expected.extend_from_slice(&kept[10..30]);
        expected.extend_from_slice(&[0; 70_000]);
        expected.extend_from_slice(&kept[150..200]);
        expected.extend_from_slice(b"H2H3");
        assert!(sink.0 == expected, "the bytes sent differ");
        assert_eq!(out.pending_bytes(), 0);
        out.send(&mut sink).unwrap();
        assert_eq!(sink.0.len(), expected.len(), "nothing is sent twice");
    }
}
