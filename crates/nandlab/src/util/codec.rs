//! Little-endian fixed-width fields on a byte stream: what the state files
//! (`serve --drive`) are written and read with.
//!
//! [`Dec`] never trusts a length it reads: a count or a length is checked
//! against a bound the caller gives before anything is allocated for it,
//! so a corrupt or hostile file yields an error naming the field, never a
//! huge allocation or a panic.

use std::io::{self, Read, Write};

/// Writes fields to `W`.
pub struct Enc<W: Write> {
    out: W,
}

impl<W: Write> Enc<W> {
    pub fn new(out: W) -> Enc<W> {
        Enc { out }
    }
    pub fn into_inner(self) -> W {
        self.out
    }
    pub fn u8(&mut self, v: u8) -> io::Result<()> {
        self.out.write_all(&[v])
    }
    pub fn u32(&mut self, v: u32) -> io::Result<()> {
        self.out.write_all(&v.to_le_bytes())
    }
    pub fn u64(&mut self, v: u64) -> io::Result<()> {
        self.out.write_all(&v.to_le_bytes())
    }
    /// A length (u32) and the bytes.
    pub fn bytes(&mut self, v: &[u8]) -> io::Result<()> {
        let len = u32::try_from(v.len()).map_err(|_| io::Error::other("a field of more than 4 GiB"))?;
        self.u32(len)?;
        self.out.write_all(v)
    }
    /// Bytes whose length the reader knows.
    pub fn raw(&mut self, v: &[u8]) -> io::Result<()> {
        self.out.write_all(v)
    }
}

/// Reads fields from `R`; errors name the field.
pub struct Dec<R: Read> {
    input: R,
}

impl<R: Read> Dec<R> {
    pub fn new(input: R) -> Dec<R> {
        Dec { input }
    }
    fn fill(&mut self, buf: &mut [u8], what: &str) -> Result<(), String> {
        self.input.read_exact(buf).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => format!("{what}: the data ends early"),
            _ => format!("{what}: {e}"),
        })
    }
    pub fn u8(&mut self, what: &str) -> Result<u8, String> {
        let mut b = [0; 1];
        self.fill(&mut b, what)?;
        Ok(b[0])
    }
    pub fn u32(&mut self, what: &str) -> Result<u32, String> {
        let mut b = [0; 4];
        self.fill(&mut b, what)?;
        Ok(u32::from_le_bytes(b))
    }
    pub fn u64(&mut self, what: &str) -> Result<u64, String> {
        let mut b = [0; 8];
        self.fill(&mut b, what)?;
        Ok(u64::from_le_bytes(b))
    }
    /// A u32 at most `max`.
    pub fn u32_max(&mut self, what: &str, max: u32) -> Result<u32, String> {
        let v = self.u32(what)?;
        if v > max {
            return Err(format!("{what}: {v} is above the most possible, {max}"));
        }
        Ok(v)
    }
    /// A u64 below `end`.
    pub fn u64_below(&mut self, what: &str, end: u64) -> Result<u64, String> {
        let v = self.u64(what)?;
        if v >= end {
            return Err(format!("{what}: {v} is beyond the last possible, {}", end.saturating_sub(1)));
        }
        Ok(v)
    }
    /// A length (u32, at most `max`) and that many bytes.
    pub fn bytes(&mut self, what: &str, max: usize) -> Result<Vec<u8>, String> {
        let len = self.u32_max(&format!("{what} length"), u32::try_from(max).unwrap_or(u32::MAX))?;
        let mut v = vec![0; len as usize];
        self.fill(&mut v, what)?;
        Ok(v)
    }
    /// Exactly `out.len()` bytes.
    pub fn raw(&mut self, what: &str, out: &mut [u8]) -> Result<(), String> {
        self.fill(out, what)
    }
    /// Whether the input has ended (one byte is read to know: only at the end).
    pub fn at_end(&mut self) -> Result<bool, String> {
        let mut b = [0; 1];
        match self.input.read(&mut b) {
            Ok(0) => Ok(true),
            Ok(_) => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_bad_lengths_are_refused_before_allocating() {
        let mut e = Enc::new(Vec::new());
        e.u8(7).unwrap();
        e.u32(0xdead_beef).unwrap();
        e.u64(1 << 40).unwrap();
        e.bytes(b"abc").unwrap();
        let data = e.into_inner();
        let mut d = Dec::new(&data[..]);
        assert_eq!(d.u8("a").unwrap(), 7);
        assert_eq!(d.u32("b").unwrap(), 0xdead_beef);
        assert_eq!(d.u64_below("c", 1 << 41).unwrap(), 1 << 40);
        assert_eq!(d.bytes("d", 3).unwrap(), b"abc");
        assert!(d.at_end().unwrap());
        let mut d = Dec::new(&data[..]);
        d.u8("a").unwrap();
        let err = d.u32_max("count", 5).unwrap_err();
        assert!(err.contains("count") && err.contains("above"), "{err}");
        let err = Dec::new(&data[..3]).u64("field x").unwrap_err();
        assert_eq!(err, "field x: the data ends early");
        let mut d = Dec::new(&data[..]);
        d.u8("a").unwrap();
        d.u32("b").unwrap();
        assert!(d.u64_below("c", 1 << 40).unwrap_err().contains("beyond"));
    }
}
