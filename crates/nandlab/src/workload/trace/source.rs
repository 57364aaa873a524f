//! Opening a trace file (plain, gzip or zstd) and cutting it into lines.
//!
//! Compression is recognised by the file's magic bytes, not its name:
//! gzip (`1f 8b`, multi-member files such as `pigz`/`bgzip` output are read
//! to the end) and zstd (`28 b5 2f fd`, multi-frame). Progress counts bytes
//! read from the file itself, compressed or not, so it reaches the file's
//! size exactly at the end.
//!
//! [`LineSource`] keeps one buffer for the whole file and hands out lines as
//! slices of it: no allocation per line. A line ends at `\n`; a `\r` before
//! it is dropped (CRLF files); the last line needs no newline. A UTF-8 byte
//! order mark (`EF BB BF`, which Windows tools put at the start of CSV files
//! such as the MSR traces) is dropped from the first line, so every reader's
//! header and field rules see the text itself. A line longer than
//! [`MAX_LINE_BYTES`] is an error rather than unbounded memory.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The longest line accepted (bytes, without the newline).
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// Bytes read from the decompressed stream at a time.
const CHUNK_BYTES: usize = 256 * 1024;

/// How a trace file is compressed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    /// Recognise the compression from a file's first bytes.
    pub fn sniff(magic: &[u8]) -> Compression {
        if magic.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }
}

/// Counts the bytes read through it into a shared counter.
struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A readable, decompressed trace with the count of file bytes consumed.
pub struct Opened {
    pub reader: Box<dyn Read + Send>,
    pub compression: Compression,
    /// File bytes read so far (before decompression).
    pub file_bytes_read: Arc<AtomicU64>,
    /// The file's size in bytes, if known.
    pub file_bytes: Option<u64>,
}

/// Open `path`, recognising its compression.
pub fn open(path: &Path) -> io::Result<Opened> {
    let mut file = File::open(path)?;
    let size = file.metadata().ok().map(|m| m.len());
    let mut magic = [0u8; 4];
    let mut got = 0;
    while got < magic.len() {
        let n = file.read(&mut magic[got..])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    let count = Arc::new(AtomicU64::new(0));
    let compression = Compression::sniff(&magic[..got]);
    // Put the magic bytes back in front of the rest of the file.
    let raw = io::Cursor::new(magic[..got].to_vec()).chain(file);
    let counted = Counting { inner: raw, count: count.clone() };
    Ok(Opened { reader: wrap(counted, compression)?, compression, file_bytes_read: count, file_bytes: size })
}

/// Whether `path` can be read a second time from its start: a regular file
/// can; a pipe, FIFO or terminal (`/dev/stdin`, `<(…)`) cannot (opening a
/// FIFO again waits for a writer that never comes). A path that cannot be
/// looked at is left for the open to report.
pub fn rereadable(path: &Path) -> bool {
    std::fs::metadata(path).map_or(true, |m| m.is_file())
}

/// Decompress an in-memory trace (tests and fuzzing).
pub fn from_bytes(bytes: Vec<u8>) -> io::Result<Opened> {
    let compression = Compression::sniff(&bytes);
    let size = bytes.len() as u64;
    let count = Arc::new(AtomicU64::new(0));
    let counted = Counting { inner: io::Cursor::new(bytes), count: count.clone() };
    Ok(Opened { reader: wrap(counted, compression)?, compression, file_bytes_read: count, file_bytes: Some(size) })
}

fn wrap<R: Read + Send + 'static>(r: R, c: Compression) -> io::Result<Box<dyn Read + Send>> {
    let buffered = io::BufReader::with_capacity(CHUNK_BYTES, r);
    Ok(match c {
        Compression::None => Box::new(buffered),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(buffered)),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(buffered)?),
    })
}

/// Why the next line could not be had.
#[derive(Debug)]
pub enum LineFault {
    Io(io::Error),
    TooLong,
}

/// Lines of a stream, as slices of one reused buffer.
pub struct LineSource {
    reader: Box<dyn Read + Send>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    line_no: u64,
}

impl LineSource {
    /// Lines of `reader`, starting with the bytes in `prefix` (already read
    /// from it, e.g. to sniff the format).
    pub fn new(reader: Box<dyn Read + Send>, prefix: &[u8]) -> Self {
        let mut buf = vec![0u8; CHUNK_BYTES.max(prefix.len())];
        buf[..prefix.len()].copy_from_slice(prefix);
        LineSource { reader, buf, start: 0, end: prefix.len(), eof: false, line_no: 0 }
    }

    /// The number of the line last returned (1-based; 0 before the first).
    pub fn line_no(&self) -> u64 {
        self.line_no
    }

    /// The next line (its number, and its bytes without `\n` or `\r\n`),
    /// or `None` at the end.
    #[inline]
    pub fn next_line(&mut self) -> Result<Option<(u64, &[u8])>, LineFault> {
        loop {
            if let Some(p) = memchr::memchr(b'\n', &self.buf[self.start..self.end]) {
                let s = self.start;
                let e = s + p;
                self.start = e + 1;
                self.line_no += 1;
                return Ok(Some((self.line_no, self.clean(s, e))));
            }
            if self.end - self.start > MAX_LINE_BYTES {
                self.line_no += 1;
                return Err(LineFault::TooLong);
            }
            if self.eof {
                if self.start == self.end {
                    return Ok(None);
                }
                // The last line has no newline.
                let s = self.start;
                self.start = self.end;
                self.line_no += 1;
                return Ok(Some((self.line_no, self.clean(s, self.end))));
            }
            self.refill().map_err(LineFault::Io)?;
        }
    }

    /// Line `self.line_no`'s bytes `buf[s..e]` without the `\r` of a CRLF
    /// ending and, on line 1, without a byte order mark.
    #[inline]
    fn clean(&self, s: usize, e: usize) -> &[u8] {
        let line = strip_cr(&self.buf[s..e]);
        if self.line_no == 1 {
            strip_bom(line)
        } else {
            line
        }
    }

    fn refill(&mut self) -> io::Result<()> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            // A line longer than the buffer: grow (bounded by MAX_LINE_BYTES).
            let grown = (self.buf.len() * 2).min(MAX_LINE_BYTES + CHUNK_BYTES);
            self.buf.resize(grown.max(self.buf.len() + 1), 0);
        }
        loop {
            match self.reader.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

#[inline]
fn strip_cr(line: &[u8]) -> &[u8] {
    match line {
        [rest @ .., b'\r'] => rest,
        _ => line,
    }
}

/// The UTF-8 byte order mark.
pub const UTF8_BOM: &[u8] = b"\xef\xbb\xbf";

/// `text` without a leading UTF-8 byte order mark.
#[inline]
pub fn strip_bom(text: &[u8]) -> &[u8] {
    text.strip_prefix(UTF8_BOM).unwrap_or(text)
}

/// Read up to `limit` bytes from `reader` (for sniffing the format).
pub fn read_prefix(reader: &mut dyn Read, limit: usize) -> io::Result<Vec<u8>> {
    let mut v = Vec::with_capacity(limit);
    reader.take(limit as u64).read_to_end(&mut v)?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &[u8]) -> Vec<Vec<u8>> {
        let mut src = LineSource::new(Box::new(io::Cursor::new(text.to_vec())), b"");
        let mut v = Vec::new();
        while let Some((_, l)) = src.next_line().unwrap() {
            v.push(l.to_vec());
        }
        v
    }

    #[test]
    fn crlf_and_a_missing_final_newline_are_handled() {
        assert_eq!(lines(b"a\r\nb\n\nc"), vec![b"a".to_vec(), b"b".to_vec(), b"".to_vec(), b"c".to_vec()]);
        assert_eq!(lines(b""), Vec::<Vec<u8>>::new());
        assert_eq!(lines(b"\n"), vec![b"".to_vec()]);
    }

    #[test]
    fn a_byte_order_mark_is_dropped_from_the_first_line_only() {
        assert_eq!(lines(b"\xef\xbb\xbfa,b\r\n\xef\xbb\xbfc"), vec![b"a,b".to_vec(), b"\xef\xbb\xbfc".to_vec()]);
        assert_eq!(lines(b"\xef\xbb\xbf"), vec![b"".to_vec()]);
    }

    #[test]
    fn lines_longer_than_the_buffer_are_joined_and_overlong_lines_refused() {
        let long = vec![b'x'; CHUNK_BYTES * 2 + 17];
        let mut text = long.clone();
        text.extend_from_slice(b"\nshort\n");
        assert_eq!(lines(&text), vec![long, b"short".to_vec()]);
        let huge = vec![b'y'; MAX_LINE_BYTES + 10];
        let mut src = LineSource::new(Box::new(io::Cursor::new(huge)), b"");
        assert!(matches!(src.next_line(), Err(LineFault::TooLong)));
    }

    #[test]
    fn gzip_and_zstd_are_recognised_by_magic() {
        use std::io::Write;
        let text = b"1 2 3\n4 5 6\n".to_vec();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&text).unwrap();
        let gz = gz.finish().unwrap();
        let zs = zstd::encode_all(&text[..], 1).unwrap();
        for (bytes, c) in [(gz, Compression::Gzip), (zs, Compression::Zstd)] {
            let mut o = from_bytes(bytes.clone()).unwrap();
            assert_eq!(o.compression, c);
            let mut out = Vec::new();
            o.reader.read_to_end(&mut out).unwrap();
            assert_eq!(out, text);
            assert_eq!(o.file_bytes_read.load(Ordering::Relaxed), bytes.len() as u64);
        }
    }
}
